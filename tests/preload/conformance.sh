#!/usr/bin/env bash
# conformance: conformance.c prints one line per edge case of the allocation
# API; its output on glibc and under qslab-run must be identical.  Then, under
# qslab-run, every entry point must hand out qslab memory (--check-qslab).
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_conformance
[ -x "$prog" ] || fail "test program not built: $prog"
workdir conformance
check_preload_active

on_glibc "$prog" > "$WORK/glibc.out" 2> "$WORK/glibc.err" || fail "conformance on glibc exited $?: $(cat "$WORK/glibc.err")"
on_qslab "$prog" > "$WORK/qslab.out" 2> "$WORK/qslab.err" || fail "conformance under qslab exited $?: $(cat "$WORK/qslab.err")"
grep -q ' cases$' "$WORK/glibc.out" || fail "conformance on glibc did not finish"
same_output "conformance cases" "$WORK/glibc.out" "$WORK/qslab.out"

if ! on_qslab "$prog" --check-qslab > "$WORK/check.out" 2>&1; then
    cat "$WORK/check.out" >&2
    fail "some entry points are not served by libqslab-malloc.so"
fi
pass "$(tail -1 "$WORK/glibc.out") identical on glibc and qslab; $(tail -1 "$WORK/check.out")"
