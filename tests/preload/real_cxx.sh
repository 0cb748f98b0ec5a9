#!/usr/bin/env bash
# real_cxx: containers.cpp (vector, map, unordered_map, string, shared_ptr
# from 4 threads) prints the same on glibc and under qslab-run, and under
# qslab-run operator new's memory is qslab's (--check-qslab).
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_containers
[ -x "$prog" ] || fail "test program not built: $prog"
workdir cxx
check_preload_active
compare_run "containers" "$prog"
if ! on_qslab "$prog" --check-qslab > "$WORK/check.out" 2>&1; then
    cat "$WORK/check.out" >&2
    fail "operator new does not reach qslab under the preload"
fi
pass "C++ containers identical on glibc and qslab; $(tail -1 "$WORK/check.out")"
