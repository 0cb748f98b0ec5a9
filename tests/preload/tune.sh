#!/usr/bin/env bash
# tune: QSLAB_TUNE set in the environment of a program run under qslab-run is
# applied by the preloaded library (read back with qslab_tune_get via dlsym);
# several entries and "*" apply in order; an out-of-range value is refused
# with a "qslab:" message and the default stays.
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_tune_probe
[ -x "$prog" ] || fail "test program not built: $prog"
workdir tune

probe() { # probe EXPECTED-OUTPUT QSLAB_TUNE-VALUE ARGS...
    local want=$1 tune=$2
    shift 2
    local got
    got=$(QSLAB_TUNE=$tune on_qslab "$prog" "$@" 2> "$WORK/err") || fail "tune_probe exited $? (QSLAB_TUNE='$tune'): $(cat "$WORK/err")"
    [ "$got" = "$want" ] || fail "QSLAB_TUNE='$tune': expected '$want', got '$got' (stderr: $(cat "$WORK/err"))"
}

default=$(on_qslab "$prog" kmalloc-64:hiwater) || fail "tune_probe exited $?"
[ "$default" != "kmalloc-64 hiwater 2048" ] || fail "kmalloc-64 hiwater is 2048 by default: the test would prove nothing"
probe "kmalloc-64 hiwater 2048" "kmalloc-64:hiwater=2048" kmalloc-64:hiwater
[ -s "$WORK/err" ] && fail "a valid QSLAB_TUNE printed: $(cat "$WORK/err")"
probe "kmalloc-64 hiwater 2048
kmalloc-8192 order 4
kmalloc-96 empty_decay_ms 500
kmalloc-64 empty_decay_ms 500" "kmalloc-64:hiwater=2048;kmalloc-8192:order=4;*:empty_decay_ms=500" \
    kmalloc-64:hiwater kmalloc-8192:order kmalloc-96:empty_decay_ms kmalloc-64:empty_decay_ms
probe "$default" "kmalloc-64:hiwater=1" kmalloc-64:hiwater
grep -q '^qslab: .*hiwater' "$WORK/err" || fail "an out-of-range QSLAB_TUNE value was not reported: $(cat "$WORK/err")"
pass "QSLAB_TUNE applied under the preload ($default by default, 2048 when set)"
