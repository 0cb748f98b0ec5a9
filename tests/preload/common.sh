# common.sh - sourced by the tests/preload/*.sh scripts (bash).
#
# CMake passes, in the environment:
#   QSLAB_RUN      the build's qslab-run wrapper (runs a command on libqslab-malloc.so)
#   QSLAB_LIB      the build's libqslab-malloc.so
#   PRELOAD_SRC    tests/preload in the source tree
#   PRELOAD_BIN    tests/preload in the build tree (the test programs)
#
# Helpers:
#   need TOOL PACKAGE       fail (never install, never skip) if TOOL is missing
#   workdir NAME            make $WORK, a temp dir removed on success, kept on failure
#   on_glibc CMD...         run CMD on glibc's malloc (no preload at all)
#   on_qslab CMD...         run CMD through qslab-run
#   same_output WHAT A B    compare two files; print a diff and fail if they differ
#   check_preload_active    qslab-run really puts libqslab-malloc.so in a child's maps
#   fail MSG / pass MSG
set -euo pipefail

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

pass() {
    echo "PASS: $*"
}

: "${QSLAB_RUN:?QSLAB_RUN (the qslab-run wrapper) must be set by CMake}"
: "${QSLAB_LIB:?QSLAB_LIB (libqslab-malloc.so) must be set by CMake}"
[ -x "$QSLAB_RUN" ] || fail "qslab-run not found or not executable: $QSLAB_RUN"
[ -f "$QSLAB_LIB" ] || fail "libqslab-malloc.so not found: $QSLAB_LIB (build target qslab_malloc)"

# A variable from the caller's environment must not pick another library, nor
# preload anything into the glibc runs.
unset QSLAB_MALLOC_LIB LD_PRELOAD QSLAB_STATS QSLAB_TUNE QSLAB_FAKE_NUMA MALLOC_CHECK_ \
    MALLOC_PERTURB_ GLIBC_TUNABLES
export LC_ALL=C TZ=UTC

# need TOOL PACKAGE: the Debian package that provides TOOL is listed in
# tests/preload/packages.txt, which the project's dependency script installs.
NEEDED=()
need() {
    command -v "$1" >/dev/null 2>&1 ||
        fail "required tool '$1' not found: install the Debian package '$2' (listed in tests/preload/packages.txt); this test installs nothing itself"
    NEEDED+=("$(command -v "$1")")
}

# python3: Debian's interpreter when present (package python3), else the one on PATH.
find_python() {
    if [ -x /usr/bin/python3 ]; then
        PYTHON=/usr/bin/python3
    else
        need python3 python3
        PYTHON=$(command -v python3)
    fi
}

workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/qslab-preload-$1.XXXXXX")
    trap 'rc=$?; if [ $rc -eq 0 ]; then rm -rf "$WORK"; else echo "(files kept in $WORK)" >&2; fi' EXIT
}

on_glibc() {
    env -u LD_PRELOAD "$@"
}

on_qslab() {
    "$QSLAB_RUN" "$@"
}

same_output() {
    local what=$1 a=$2 b=$3
    if ! cmp -s "$a" "$b"; then
        echo "--- $what: glibc ($a) vs qslab ($b), first differences:" >&2
        diff -u "$a" "$b" | head -40 >&2 || true
        fail "$what differs between glibc and qslab"
    fi
}

# The wrapper must reach grandchildren: sh -> grep, both on qslab.
check_preload_active() {
    on_qslab /bin/sh -c 'grep -q libqslab-malloc /proc/self/maps' ||
        fail "qslab-run did not load libqslab-malloc.so into the child process"
}

# compare_run WHAT CMD...: run CMD in $WORK/glibc on glibc's malloc, then in
# $WORK/qslab under qslab-run (each directory fresh, so that the two runs see
# the same relative paths).  The glibc run must succeed; stdout, stderr and
# the exit status of the two runs must be identical.
#
# The glibc run depends on the workload, not on the mode the suite runs in
# (QSLAB_OWNER, QSLAB_FRONT: make test runs every test in 7): its output is
# kept in $PRELOAD_BIN/glibc-reference/KEY and used again while KEY holds.
# KEY hashes this file and the test's script, the command (with $WORK's name
# taken out), the content of every argument that is a file and of every
# tool the script `need`ed, and the environment variables that shape the
# output (LC_*, LANG, TZ, PYTHON*, TMPDIR).  A stale reference could only
# make a test fail, never pass: qslab's run is always new.
# QSLAB_PRELOAD_FRESH=1 runs the glibc side every time.
reference_key() {
    local a
    {
        cat "${BASH_SOURCE[0]}" "$0"
        printf '%s\n' "${NEEDED[@]}"
        for a in "${NEEDED[@]}"; do sha256sum < "$a"; done
        for a in "$@"; do
            printf 'arg %s\n' "${a//$WORK/WORK}"
            [ -f "$a" ] && sha256sum < "$a"
        done
        env | grep -E '^(LC_[A-Z]+|LANG|TZ|PYTHON[A-Z]*|TMPDIR)=' | sort
    } | sha256sum | cut -d' ' -f1
}

compare_run() {
    local what=$1 rc_g=0 rc_q=0 key ref
    shift
    rm -rf "$WORK/glibc" "$WORK/qslab"
    mkdir -p "$WORK/glibc" "$WORK/qslab"
    key=$(reference_key "$@")
    ref=$PRELOAD_BIN/glibc-reference/$key
    if [ "${QSLAB_PRELOAD_FRESH:-0}" != 1 ] && [ -f "$ref/out" ] && [ -f "$ref/err" ]; then
        cp "$ref/out" "$WORK/glibc.out"
        cp "$ref/err" "$WORK/glibc.err"
        what="$what (the glibc side kept from an earlier run in $ref; QSLAB_PRELOAD_FRESH=1 runs it again)"
    else
        (cd "$WORK/glibc" && on_glibc "$@") > "$WORK/glibc.out" 2> "$WORK/glibc.err" || rc_g=$?
        [ "$rc_g" -eq 0 ] || {
            tail -20 "$WORK/glibc.err" >&2
            fail "$what exited $rc_g on glibc's malloc (the workload itself is broken)"
        }
        mkdir -p "$ref.new.$$"
        cp "$WORK/glibc.out" "$ref.new.$$/out"
        cp "$WORK/glibc.err" "$ref.new.$$/err"
        rm -rf "$ref"
        mv "$ref.new.$$" "$ref"
    fi
    (cd "$WORK/qslab" && on_qslab "$@") > "$WORK/qslab.out" 2> "$WORK/qslab.err" || rc_q=$?
    [ "$rc_q" -eq "$rc_g" ] || {
        tail -20 "$WORK/qslab.err" >&2
        fail "$what exited $rc_q under qslab-run ($rc_g on glibc)"
    }
    same_output "$what: standard output" "$WORK/glibc.out" "$WORK/qslab.out"
    same_output "$what: standard error" "$WORK/glibc.err" "$WORK/qslab.err"
    [ -s "$WORK/glibc.out" ] || fail "$what printed nothing: nothing was compared"
}
