#!/usr/bin/env bash
# code_layout: libqslab-malloc.so's code lies in the order it runs
# (docs/design.md, "Resident code"), since the kernel maps a library's code
# a 64 KiB window at a time around each page that runs.  The functions that
# every program's allocations and frees run (SLQB's and SLOB's), and those
# that run once at start-up, lie in the first 192 KiB of the code; start-up
# code lies ahead of the entry points; the entry points of validation and
# statistics lie past all of them; and nothing in the library calls
# pthread_atfork, a stub of libc_nonshared.a that the link puts past the
# library's code.
source "$(dirname "$0")/common.sh"
need nm binutils
need readelf binutils
workdir code_layout

text=$(readelf -SW "$QSLAB_LIB" |
       awk '{ for (i = 1; i < NF; i++) if ($i == ".text") { print $(i + 2); exit } }')
[ -n "$text" ] || fail "readelf -S $QSLAB_LIB: no .text section"
nm "$QSLAB_LIB" | awk 'NF == 3 && ($2 == "t" || $2 == "T") { print $3, $1 }' > "$WORK/syms"

addr() { # the address of function $1, in decimal
    local a
    a=$(awk -v f="$1" '$1 == f { print $2; exit }' "$WORK/syms")
    [ -n "$a" ] || fail "nm $QSLAB_LIB: no function $1"
    echo $((16#$a))
}

start=$((16#$text))
limit=$((start + 192 * 1024))
hot="malloc free calloc realloc qs_kmalloc_slow qs_meta_alloc qs_page_alloc_slab \
     qs_percpu_free_slow slqb_send_batch slob_alloc slob_free"
startup="qs_init_slow qs_kmalloc_init qs_tune_apply_env qs_os_numa_topology"
cold="qslab_cache_validate qslab_slabinfo qslab_stats_report"
last=0
for f in $hot $startup; do
    a=$(addr "$f")
    [ "$a" -lt "$limit" ] ||
        fail "$f at $(printf %#x "$a"): past the first 192 KiB of the code ($(printf %#x "$limit"))"
    [ "$a" -gt "$last" ] && last=$a
done
first_entry=$(addr malloc)
for f in $startup; do
    a=$(addr "$f")
    [ "$a" -lt "$first_entry" ] ||
        fail "$f (start-up) at $(printf %#x "$a"): not ahead of malloc ($(printf %#x "$first_entry"))"
done
for f in $cold; do
    a=$(addr "$f")
    [ "$a" -gt "$last" ] ||
        fail "$f at $(printf %#x "$a"): among the code every allocation runs (up to $(printf %#x "$last"))"
done
if grep -qE '^(__)?pthread_atfork ' "$WORK/syms"; then
    fail "libqslab-malloc.so links libc_nonshared's pthread_atfork (os/linux.c qs_os_atfork registers fork handlers)"
fi
pass "the code that runs on allocations and at start-up within $(( (last - start) / 1024 )) KiB of the code's start"
