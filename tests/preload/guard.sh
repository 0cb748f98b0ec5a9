#!/usr/bin/env bash
# guard: QSLAB_GUARD_SAMPLE through the drop-in (docs/debugging.md, "Guarded
# sampling").  With QSLAB_GUARD_SAMPLE=1 the first malloc of a class is a
# guarded sample: a write one byte past it, and a write after its free,
# kill the program with SIGSEGV after a report whose first line is checked;
# a program that does nothing wrong runs as on glibc at several rates, and
# QSLAB_STATS=1's report counts the samples.
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_guard_probe
[ -x "$prog" ] || fail "test program not built: $prog"
workdir guard

# expect_fault MODE FIRST-LINE WORDS: a SIGSEGV death (status 139) with the report
expect_fault() {
    local mode=$1 first=$2 words=$3 rc=0
    QSLAB_GUARD_SAMPLE=1 on_qslab "$prog" "$mode" > /dev/null 2> "$WORK/$mode.err" || rc=$?
    [ "$rc" -eq 139 ] || { cat "$WORK/$mode.err" >&2; fail "$mode: exit status $rc, not 139 (SIGSEGV)"; }
    [ "$(head -n 1 "$WORK/$mode.err")" = "$first" ] ||
        { cat "$WORK/$mode.err" >&2; fail "$mode: first line is not '$first'"; }
    grep -q -- "$words" "$WORK/$mode.err" || { cat "$WORK/$mode.err" >&2; fail "$mode: '$words' not in the report"; }
    grep -q '^Allocated by thread ' "$WORK/$mode.err" || { cat "$WORK/$mode.err" >&2; fail "$mode: no alloc owner"; }
}
expect_fault overflow "BUG kmalloc-64: out-of-bounds access to guarded object" "@offset=64"
expect_fault uaf "BUG kmalloc-256: use after free in guarded object" "@offset=10"
grep -q '^Freed by thread ' "$WORK/uaf.err" || { cat "$WORK/uaf.err" >&2; fail "uaf: no free owner"; }

on_glibc "$prog" work > "$WORK/glibc.out"
for rate in 1 10 1000; do
    QSLAB_STATS=1 QSLAB_GUARD_SAMPLE=$rate on_qslab "$prog" work > "$WORK/q$rate.out" 2> "$WORK/q$rate.err" ||
        { cat "$WORK/q$rate.err" >&2; fail "QSLAB_GUARD_SAMPLE=$rate: the workload failed"; }
    same_output "QSLAB_GUARD_SAMPLE=$rate output" "$WORK/glibc.out" "$WORK/q$rate.out"
    grep -Eq "^Guard: 1 in $rate, samples [0-9]+" "$WORK/q$rate.err" ||
        { cat "$WORK/q$rate.err" >&2; fail "QSLAB_GUARD_SAMPLE=$rate: no Guard: line in the report"; }
done
n=$(sed -n 's/^Guard: 1 in 10, samples \([0-9]*\).*/\1/p' "$WORK/q10.err")
[ "$n" -ge 10 ] || fail "QSLAB_GUARD_SAMPLE=10: only $n samples in 40,000 allocations"
QSLAB_STATS=1 on_qslab "$prog" work > /dev/null 2> "$WORK/off.err"
grep -q '^Guard:' "$WORK/off.err" && fail "a Guard: line without QSLAB_GUARD_SAMPLE"
pass "guarded samples fault with their report under the drop-in; QSLAB_GUARD_SAMPLE=10 took $n samples"
