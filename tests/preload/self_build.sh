#!/usr/bin/env bash
# self_build: qslab builds itself with cmake, make and the compiler running on
# qslab.  A fresh build directory of this source tree is configured and built
# under qslab-run (LD_PRELOAD exported to every child: cmake, make, gcc, cc1,
# as, ld), for the targets in SELF_BUILD_TARGETS; then the unit tests among
# them run normally (not under the preload) and must pass.
#
# Environment from CMake: QSLAB_SOURCE_DIR, CMAKE_COMMAND,
# SELF_BUILD_TARGETS (space separated), SELF_BUILD_CC/CXX (the build's compilers).
#
# A Debug build (-g, no optimisation): it compiles in about half the time of
# -O2 -g, and runs in make test's default mode; preload_gcc compiles the
# largest sources at -O2 -g on qslab, byte for byte against glibc.
source "$(dirname "$0")/common.sh"
: "${QSLAB_SOURCE_DIR:?}" "${CMAKE_COMMAND:?}" "${SELF_BUILD_TARGETS:?}"
# The whole build (cmake, make, the compilers, the linker) runs in the
# default mode (SLQB, per-CPU queues where the kernel has rseq), the
# costliest test of a run; in the other modes the compiler and assembler
# run on qslab in preload_gcc (its largest sources, -O2 -g, against glibc's
# objects), and git, sqlite3, sort and python, threaded ones among them,
# in theirs.  Exit 77: skipped.
case "${QSLAB_FRONT:-slqb}/${QSLAB_OWNER:-default}" in
slqb/default | slqb/cpu) ;;
*)
    echo "preload_self_build: skipped under QSLAB_FRONT=${QSLAB_FRONT:-} QSLAB_OWNER=${QSLAB_OWNER:-} (it runs in the default mode; preload_gcc runs the compiler in this one)"
    exit 77
    ;;
esac
need make make
need gcc gcc
need g++ g++
workdir self-build
check_preload_active

# CMake's Makefiles whatever the outer build uses (make test's is Ninja):
# make, and the cmake processes it starts for every target, are real
# programs on qslab too.
gen=(-G "Unix Makefiles")
compilers=()
[ -n "${SELF_BUILD_CC:-}" ] && compilers+=(-DCMAKE_C_COMPILER="$SELF_BUILD_CC")
[ -n "${SELF_BUILD_CXX:-}" ] && compilers+=(-DCMAKE_CXX_COMPILER="$SELF_BUILD_CXX")
read -r -a targets <<< "$SELF_BUILD_TARGETS"

# Everything below the wrapper inherits LD_PRELOAD.  A compiler launcher
# checks, for every compile, that its process has libqslab-malloc.so mapped
# (and counts the compiles).
on_qslab sh -c 'case ":$LD_PRELOAD:" in *libqslab-malloc*) ;; *) exit 1 ;; esac' ||
    fail "qslab-run does not export LD_PRELOAD"
cat > "$WORK/on-qslab" <<'LAUNCHER'
#!/bin/sh
if ! grep -q libqslab-malloc /proc/$$/maps; then
    echo "qslab-preload: the compiler is not running on qslab: $*" >&2
    exit 1
fi
echo x >> "${0%/*}/compiles"
exec "$@"
LAUNCHER
chmod +x "$WORK/on-qslab"
: > "$WORK/compiles"
echo "configuring $QSLAB_SOURCE_DIR in $WORK/build under qslab-run"
on_qslab "$CMAKE_COMMAND" -S "$QSLAB_SOURCE_DIR" -B "$WORK/build" "${gen[@]}" "${compilers[@]}" \
    -DCMAKE_BUILD_TYPE=Debug -DQSLAB_SANITIZE= \
    -DCMAKE_C_COMPILER_LAUNCHER="$WORK/on-qslab" -DCMAKE_CXX_COMPILER_LAUNCHER="$WORK/on-qslab" \
    > "$WORK/configure.log" 2>&1 || {
    tail -30 "$WORK/configure.log" >&2
    fail "cmake configure failed under qslab-run"
}
echo "building ${targets[*]} under qslab-run"
on_qslab "$CMAKE_COMMAND" --build "$WORK/build" -j 2 --target "${targets[@]}" > "$WORK/build.log" 2>&1 || {
    grep -E 'error|Error|qslab:' "$WORK/build.log" | head -30 >&2
    tail -20 "$WORK/build.log" >&2
    fail "the build failed with the toolchain running on qslab"
}
grep -q '^qslab: ' "$WORK/build.log" && {
    grep '^qslab: ' "$WORK/build.log" >&2
    fail "qslab reported a problem during the build"
}

compiles=$(wc -l < "$WORK/compiles")
[ "$compiles" -gt 0 ] || fail "no compile went through the checking launcher"

ran=0
for t in "${targets[@]}"; do
    case $t in unit_* | integration_* | stress_*) ;; *) continue ;; esac
    exe=$(find "$WORK/build" -type f -name "$t" -perm -u+x | head -n 1)
    [ -n "$exe" ] || fail "built test $t not found in $WORK/build"
    echo "running $t (not under the preload)"
    on_glibc "$exe" > "$WORK/$t.log" 2>&1 || {
        tail -20 "$WORK/$t.log" >&2
        fail "$t, built by the toolchain on qslab, failed"
    }
    ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || fail "SELF_BUILD_TARGETS names no unit test to run"
pass "qslab built itself (${targets[*]}: $compiles compiles, each checked to run on qslab); $ran unit tests passed"
