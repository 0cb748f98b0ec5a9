#!/usr/bin/env bash
# conformance: conformance.c prints one line per edge case of the allocation
# API; its output (and its silence on stderr, its exit status) on glibc and
# under qslab-run must be identical (compare_run: the glibc side is kept).
# Then, under qslab-run, every entry point must hand out qslab memory
# (--check-qslab).
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_conformance
[ -x "$prog" ] || fail "test program not built: $prog"
workdir conformance
check_preload_active

compare_run "conformance cases" "$prog"
grep -q ' cases$' "$WORK/glibc.out" || fail "conformance on glibc did not finish"

if ! on_qslab "$prog" --check-qslab > "$WORK/check.out" 2>&1; then
    cat "$WORK/check.out" >&2
    fail "some entry points are not served by libqslab-malloc.so"
fi
pass "$(tail -1 "$WORK/glibc.out") identical on glibc and qslab; $(tail -1 "$WORK/check.out")"
