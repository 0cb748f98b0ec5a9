#!/usr/bin/env bash
# real_gcc: gcc and g++ running on qslab produce the same bytes as on glibc:
# qslab's own sources and conformance.c compiled to objects (-O2 -g), the C++
# containers.cpp, and conformance.c linked into an executable whose output
# (run on glibc) is compared too.  Both compilers run in the same directory so
# that the debug information (which names it) is the same.
source "$(dirname "$0")/common.sh"
need gcc gcc
need g++ g++
: "${QSLAB_SOURCE_DIR:?QSLAB_SOURCE_DIR must be set by CMake}"
workdir gcc
check_preload_active
cd "$WORK"
mkdir -p glibc qslab
srcs=("$QSLAB_SOURCE_DIR"/src/*.c "$QSLAB_SOURCE_DIR"/src/os/*.c "$QSLAB_SOURCE_DIR"/src/malloc/malloc.c)
[ -f "${srcs[0]}" ] || fail "no C sources found under $QSLAB_SOURCE_DIR/src"
cflags=(-std=gnu11 -O2 -g -fPIC -Wall -frandom-seed=qslab -I "$QSLAB_SOURCE_DIR/include" -I "$QSLAB_SOURCE_DIR/src")

build() { # build OUTDIR RUNNER: every compile and the link, run through RUNNER
    local out=$1 run=$2 s o
    for s in "${srcs[@]}"; do
        o=$out/$(basename "$(dirname "$s")")_$(basename "$s" .c).o
        $run gcc "${cflags[@]}" -c "$s" -o "$o"
    done
    $run g++ -std=c++17 -O2 -g -frandom-seed=qslab -pthread -c "$PRELOAD_SRC/containers.cpp" -o "$out/containers.o"
    $run gcc -std=gnu11 -O2 -g -fno-builtin -frandom-seed=qslab "$PRELOAD_SRC/conformance.c" -o "$out/conformance" -ldl
}
build glibc on_glibc 2> glibc.err || { cat glibc.err >&2; fail "compiling on glibc failed"; }
build qslab on_qslab 2> qslab.err || { cat qslab.err >&2; fail "compiling under qslab-run failed"; }
same_output "compiler diagnostics" glibc.err qslab.err

n=0
for o in glibc/*.o glibc/conformance; do
    cmp -s "$o" "qslab/${o#glibc/}" || fail "gcc on qslab produced a different ${o#glibc/} than on glibc (cmp $WORK/$o $WORK/qslab/${o#glibc/})"
    n=$((n + 1))
done
on_glibc glibc/conformance > glibc.out 2>&1 || fail "conformance built on glibc failed to run"
on_glibc qslab/conformance > qslab.out 2>&1 || fail "conformance built on qslab failed to run"
same_output "output of the program each compiler built" glibc.out qslab.out
pass "gcc/g++: $n outputs byte-identical on glibc and qslab, and the built program runs the same"
