#!/usr/bin/env bash
# real_git: git_session.sh (init, 5 commits over ~230 generated files, a
# branch and a merge, log --stat, diff, blame, gc, fsck, archive) prints the
# same on glibc and under qslab-run.  git's child processes (pack-objects,
# index-pack, ...) inherit the preload.
source "$(dirname "$0")/common.sh"
need git git
need awk mawk
workdir git
check_preload_active
compare_run "git session" bash "$PRELOAD_SRC/git_session.sh"
grep -q '^== end$' "$WORK/glibc.out" || fail "git session did not reach its end"
pass "git: $(wc -l < "$WORK/glibc.out") lines identical on glibc and qslab ($(grep -m1 -A1 'rev-parse\|^== after gc' "$WORK/glibc.out" | tail -1 | cut -c1-40))"
