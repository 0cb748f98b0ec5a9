#!/usr/bin/env bash
# real_gcc: gcc and g++ running on qslab produce the same bytes as on glibc:
# four of qslab's own sources compiled to objects (-O2 -g), the C++
# containers.cpp, and conformance.c linked into an executable (byte-identical
# too, so it runs as the glibc-built one does: running both, 6 s, showed
# nothing cmp does not).  Both compilers run in the same directory
# ($PRELOAD_BIN) so that the debug information (which names it) is the same.
#
# Four sources, not all of them: the largest ones and the malloc shim, chosen
# for their size and spread of code (cc1 allocates most on long functions
# and many inlined helpers).  Every source also compiles on qslab in
# preload_self_build (in the default mode; this test runs in every mode);
# compiling all of them here again cost 35 s a mode (7 modes in make test).
#
# The glibc side depends on the compilers and their input only, not on the
# mode the suite runs in (QSLAB_OWNER, QSLAB_FRONT): it is built once per
# build tree, kept in $PRELOAD_BIN/gcc-reference and used again while its key
# holds (the compilers' -v, the flags, this script and every source as the
# preprocessor sees it, headers included).  Half this test's time otherwise.
source "$(dirname "$0")/common.sh"
need gcc gcc
need g++ g++
: "${QSLAB_SOURCE_DIR:?QSLAB_SOURCE_DIR must be set by CMake}"
workdir gcc
check_preload_active
cd "$PRELOAD_BIN"
mkdir -p "$WORK/glibc" "$WORK/qslab"
srcs=("$QSLAB_SOURCE_DIR"/src/core/page.c "$QSLAB_SOURCE_DIR"/src/front/slqb/queue.c
      "$QSLAB_SOURCE_DIR"/src/debug/guard.c "$QSLAB_SOURCE_DIR"/src/malloc/malloc.c)
for s in "${srcs[@]}"; do [ -f "$s" ] || fail "source $s not found (update real_gcc.sh's list)"; done
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
key=$({
    on_glibc gcc -v 2>&1
    on_glibc g++ -v 2>&1
    printf '%s\n' "$PWD" "${cflags[@]}"
    cat "$0"
    for s in "${srcs[@]}"; do on_glibc gcc "${cflags[@]}" -E "$s"; done
    on_glibc g++ -std=c++17 -pthread -E "$PRELOAD_SRC/containers.cpp"
    on_glibc gcc -std=gnu11 -E "$PRELOAD_SRC/conformance.c"
} | sha256sum | cut -d' ' -f1)
ref=$PRELOAD_BIN/gcc-reference
reused=""
if [ -f "$ref/key" ] && [ "$(cat "$ref/key")" = "$key" ]; then
    cp -p "$ref"/glibc/* "$WORK/glibc/"
    cp -p "$ref/glibc.err" "$WORK/glibc.err"
    reused=" (the glibc side kept from an earlier run: same key; rm -rf $ref to build it again)"
else
    build "$WORK/glibc" on_glibc 2> "$WORK/glibc.err" || { cat "$WORK/glibc.err" >&2; fail "compiling on glibc failed"; }
    rm -rf "$ref.new" "$ref"
    mkdir -p "$ref.new/glibc"
    cp -p "$WORK"/glibc/* "$ref.new/glibc/"
    cp -p "$WORK/glibc.err" "$ref.new/"
    echo "$key" > "$ref.new/key"
    mv "$ref.new" "$ref"
fi
build "$WORK/qslab" on_qslab 2> "$WORK/qslab.err" || { cat "$WORK/qslab.err" >&2; fail "compiling under qslab-run failed"; }
cd "$WORK"
same_output "compiler diagnostics" glibc.err qslab.err

n=0
for o in glibc/*.o glibc/conformance; do
    cmp -s "$o" "qslab/${o#glibc/}" || fail "gcc on qslab produced a different ${o#glibc/} than on glibc (cmp $WORK/$o $WORK/qslab/${o#glibc/})$reused"
    n=$((n + 1))
done
[ "$n" -eq $((${#srcs[@]} + 2)) ] || fail "$n outputs compared, not $((${#srcs[@]} + 2))"
pass "gcc/g++: $n outputs byte-identical on glibc and qslab$reused"
