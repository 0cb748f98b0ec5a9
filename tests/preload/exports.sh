#!/usr/bin/env bash
# exports: libqslab-malloc.so defines exactly the dynamic symbols listed in
# exports.txt (nm -D --defined-only), and exports.txt is what the sources
# promise: the names of src/malloc/exports.map plus every qslab_* function
# declared in include/qslab.h.
source "$(dirname "$0")/common.sh"
need nm binutils
: "${QSLAB_SOURCE_DIR:?QSLAB_SOURCE_DIR must be set by CMake}"
workdir exports

grep -v '^#' "$PRELOAD_SRC/exports.txt" | sed '/^$/d' > "$WORK/expected"
nm -D --defined-only "$QSLAB_LIB" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' |
    sort -u > "$WORK/actual"
[ -s "$WORK/actual" ] || fail "nm -D printed no defined symbol for $QSLAB_LIB"
if ! cmp -s "$WORK/expected" "$WORK/actual"; then
    echo "--- exports.txt vs nm -D --defined-only $QSLAB_LIB ('-' missing, '+' extra):" >&2
    diff -u "$WORK/expected" "$WORK/actual" >&2 || true
    fail "libqslab-malloc.so exports differ from tests/preload/exports.txt"
fi

# The list itself: exports.map's names (the qslab_* wildcard aside) and the
# functions of the public header.
map="$QSLAB_SOURCE_DIR/src/malloc/exports.map"
hdr="$QSLAB_SOURCE_DIR/include/qslab.h"
{
    sed -n '/global:/,/local:/p' "$map" | sed 's,/\*.*\*/,,; s/global://; s/local:.*//' |
        tr ';' '\n' | tr -d ' \t' | grep -v '^qslab_\*$' | sed '/^$/d'
    grep -oE '\bqslab_[a-z0-9_]+[[:space:]]*\(' "$hdr" | tr -d '( \t'
} | sort -u > "$WORK/sources"
if ! cmp -s "$WORK/expected" "$WORK/sources"; then
    echo "--- exports.txt vs exports.map + qslab.h functions ('+' in the sources only):" >&2
    diff -u "$WORK/expected" "$WORK/sources" >&2 || true
    fail "tests/preload/exports.txt is out of date with src/malloc/exports.map or include/qslab.h"
fi
pass "$(wc -l < "$WORK/actual") exported symbols, as listed"
