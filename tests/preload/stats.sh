#!/usr/bin/env bash
# stats: under qslab-run, QSLAB_STATS=1 prints the statistics report on stderr
# at exit (a header line starting "Name", then "kmalloc-<size> ..." lines), and
# leaves stdout alone; without it nothing is printed.
source "$(dirname "$0")/common.sh"
prog=$PRELOAD_BIN/preload_tune_probe
[ -x "$prog" ] || fail "test program not built: $prog"
workdir stats

# check_report FILE WHAT: header first, then at least one kmalloc line
check_report() {
    head -n 1 "$1" | grep -q '^Name ' || { cat "$1" >&2; fail "$2: no header line starting with 'Name' on stderr"; }
    grep -Eq '^kmalloc-[0-9]+ +[0-9]' "$1" || { cat "$1" >&2; fail "$2: no kmalloc-<size> line on stderr"; }
}

QSLAB_STATS=1 on_qslab "$prog" kmalloc-64:hiwater > "$WORK/out" 2> "$WORK/err" || fail "tune_probe exited $? with QSLAB_STATS=1"
check_report "$WORK/err" "QSLAB_STATS=1 tune_probe"
grep -q '^kmalloc-64 hiwater ' "$WORK/out" || fail "the program's own output is missing: $(cat "$WORK/out")"
grep -Eq '^Name |^kmalloc-[0-9]+ +[0-9]' "$WORK/out" && fail "the report went to stdout"
n=$(grep -Ec '^kmalloc-[0-9]+ ' "$WORK/err")

on_qslab "$prog" kmalloc-64:hiwater > "$WORK/out0" 2> "$WORK/err0" || fail "tune_probe exited $?"
[ -s "$WORK/err0" ] && { cat "$WORK/err0" >&2; fail "stderr is not empty without QSLAB_STATS"; }
QSLAB_STATS=0 on_qslab "$prog" kmalloc-64:hiwater > "$WORK/out0" 2> "$WORK/err0" || fail "tune_probe exited $?"
[ -s "$WORK/err0" ] && { cat "$WORK/err0" >&2; fail "stderr is not empty with QSLAB_STATS=0"; }

# A multi-threaded real program, when python3 is there (stats_coreutils covers
# programs that close stderr; this one must not need any package).
if [ -x /usr/bin/python3 ]; then
    QSLAB_STATS=1 PYTHONMALLOC=malloc on_qslab /usr/bin/python3 -c 'import threading; t = [threading.Thread(target=lambda: [bytes(i) for i in range(2000)]) for _ in range(4)]; [x.start() for x in t]; [x.join() for x in t]' \
        > /dev/null 2> "$WORK/err.py" || fail "python3 exited $? with QSLAB_STATS=1"
    check_report "$WORK/err.py" "QSLAB_STATS=1 python3"
fi
pass "QSLAB_STATS=1 printed the report ($n kmalloc lines) on stderr at exit"
