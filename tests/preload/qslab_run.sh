#!/usr/bin/env bash
# qslab_run: the wrapper fails as the shell would (a missing command: "not
# found", 127; one that cannot run: 126), has --help (exit 0), refuses bad
# usage with exit 2, passes the command's status through, and puts
# libqslab-malloc.so first in LD_PRELOAD.
source "$(dirname "$0")/common.sh"
workdir qslab_run

# expect STATUS STDERR CMD...: the status and stderr's exact text
expect() {
    local want=$1 text=$2 st=0
    shift 2
    "$@" > "$WORK/out" 2> "$WORK/err" || st=$?
    [ "$st" -eq "$want" ] || fail "$*: status $st, expected $want ($(cat "$WORK/err"))"
    [ "$(cat "$WORK/err")" = "$text" ] || fail "$*: stderr '$(cat "$WORK/err")', expected '$text'"
}

expect 127 "qslab-run: qslab-no-such-command: command not found" "$QSLAB_RUN" qslab-no-such-command
expect 127 "qslab-run: ./no/such/file: command not found" "$QSLAB_RUN" ./no/such/file
printf 'x\n' > "$WORK/plain"
chmod 644 "$WORK/plain"
expect 126 "qslab-run: $WORK/plain: Permission denied" "$QSLAB_RUN" "$WORK/plain"
expect 126 "qslab-run: $WORK: Permission denied" "$QSLAB_RUN" "$WORK"
expect 0 "" "$QSLAB_RUN" --help
grep -q '^usage: qslab-run COMMAND' "$WORK/out" || fail "--help: no usage on stdout"
"$QSLAB_RUN" > /dev/null 2> "$WORK/err" && fail "no command: status 0"
[ $? -eq 2 ] && grep -q '^usage: qslab-run' "$WORK/err" || fail "no command: not exit 2 with the usage"
st=0; "$QSLAB_RUN" -z true 2> "$WORK/err" || st=$?
[ $st -eq 2 ] && grep -q '^qslab-run: unknown option -z' "$WORK/err" || fail "-z: status $st, $(cat "$WORK/err")"
expect 3 "" "$QSLAB_RUN" sh -c 'exit 3'
expect 5 "" "$QSLAB_RUN" -- sh -c 'exit 5'
expect 0 "" "$QSLAB_RUN" true # found on PATH though the shell has it built in
"$QSLAB_RUN" sh -c 'echo "$LD_PRELOAD"' > "$WORK/out"
case $(cat "$WORK/out") in
"$QSLAB_LIB"* | *libqslab-malloc.so*) ;;
*) fail "LD_PRELOAD under qslab-run: $(cat "$WORK/out")" ;;
esac
pass "qslab-run: missing and unrunnable commands, usage, status, LD_PRELOAD"
