#!/usr/bin/env bash
# stats_coreutils: QSLAB_STATS=1 prints the report at exit for coreutils too.
# coreutils (gnulib's close_stdout, run by atexit) close stdout and stderr
# before the library destructors run, so a report written to fd 2 from a
# destructor is lost (write returns EBADF).  sort, ls, cp, ... all do this.
source "$(dirname "$0")/common.sh"
need sort coreutils
workdir stats-coreutils
seq 1 20000 > "$WORK/in" 2>/dev/null || awk 'BEGIN { for (i = 1; i <= 20000; i++) print i }' > "$WORK/in"
QSLAB_STATS=1 on_qslab sort -r "$WORK/in" > "$WORK/out" 2> "$WORK/err" || fail "sort exited $?"
[ "$(head -n 1 "$WORK/out")" = 9999 ] || fail "sort output is wrong"
if ! head -n 1 "$WORK/err" | grep -q '^Name ' || ! grep -Eq '^kmalloc-[0-9]+ ' "$WORK/err"; then
    cat "$WORK/err" >&2
    fail "QSLAB_STATS=1 sort printed no statistics report: sort closes stderr at exit (gnulib close_stdout, an atexit handler) before qslab's destructor writes the report to fd 2"
fi
pass "QSLAB_STATS=1 sort printed the report"
