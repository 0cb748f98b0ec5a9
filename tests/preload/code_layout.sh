#!/usr/bin/env bash
# code_layout: libqslab-malloc.so's code lies in the order it runs
# (docs/design.md, "The library's own pages"), since the kernel maps a
# library's code a 64 KiB window at a time around each page that runs.  The
# code starts on a 64 KiB boundary; the functions that every program's
# allocations and frees run on the default front end (SLQB), those that run
# once at start-up, and _fini (run at exit) lie in its first two windows
# (128 KiB), start-up code ahead of the entry points, and so do SLOB's;
# SLUB's and SLAB's in the first three;
# the entry points of validation and statistics, and the cold functions
# (reports of misuse), past all of them; the unwind tables with the code,
# not with the read-only data; and nothing in the library calls
# pthread_atfork, a stub of libc_nonshared.a that the link puts past the
# library's code.
source "$(dirname "$0")/common.sh"
need nm binutils
need readelf binutils
workdir code_layout

# the code's segment: the LOAD entry with R E, its address and alignment
read -r seg align < <(readelf -lW "$QSLAB_LIB" | awk '$1 == "LOAD" && $7 == "R" && $8 == "E" { print $3, $9; exit }')
[ -n "$seg" ] || fail "readelf -l $QSLAB_LIB: no executable LOAD segment"
[ $((align)) -ge 65536 ] && [ $((seg % 65536)) -eq 0 ] ||
    fail "the code's segment at $seg, aligned to $align: not on a 64 KiB boundary (-z max-page-size)"
nm "$QSLAB_LIB" | awk 'NF == 3 && ($2 == "t" || $2 == "T") { print $3, $1 }' > "$WORK/syms"
# the unwind tables lie with the code (after it), not in the read-only data's
# segment, whose pages every program maps 64 KiB at a time
# (awk reads to the end: an early exit would break readelf's pipe, a failure
# under pipefail)
section() {
    readelf -SW "$QSLAB_LIB" | awk -v n="$1" '!done { for (i = 1; i < NF; i++) if ($i == n) { print $(i + 2); done = 1; break } }'
}
eh=$(section .eh_frame) ro=$(section .rodata)
[ -n "$eh" ] && [ -n "$ro" ] || fail "readelf -S $QSLAB_LIB: no .eh_frame or .rodata section"
[ $((16#$eh)) -lt $((16#$ro)) ] || fail ".eh_frame at 0x$eh: beside the read-only data (0x$ro), not with the code"

addr() { # the address of function $1, in decimal
    local a
    a=$(awk -v f="$1" '$1 == f { print $2; exit }' "$WORK/syms")
    [ -n "$a" ] || fail "nm $QSLAB_LIB: no function $1"
    echo $((16#$a))
}

start=$((seg))
limit=$((start + 128 * 1024))
hot="malloc free calloc realloc qs_kmalloc_slow qs_free_other qs_meta_alloc qs_page_alloc_slab \
     qs_alloc_slow qs_percpu_free_slow slqb_send_batch qs_free_full purger_main _fini"
startup="qs_init_slow qs_kmalloc_init qs_tune_apply_env qs_os_numa_topology"
slob="slob_alloc slob_free"
other="qs_slub_free slub_alloc_single pc_install_or_give slabfe_take_locked slabfe_free_block_locked"
cold="qslab_cache_validate qslab_slabinfo qslab_stats_report slqb_put_twice_report qs_free_suspect \
      malloc_stats qs_warn"
last=0
for f in $hot $startup; do
    a=$(addr "$f")
    [ "$a" -lt "$limit" ] ||
        fail "$f at $(printf %#x "$a"): past the code's first 128 KiB ($(printf %#x "$limit"))"
    [ "$a" -gt "$last" ] && last=$a
done
for f in $slob; do
    a=$(addr "$f")
    [ "$a" -lt "$limit" ] ||
        fail "$f (SLOB) at $(printf %#x "$a"): past the code's first 128 KiB ($(printf %#x "$limit"))"
done
for f in $other; do # SLUB's and SLAB's paths: in the third window at most
    a=$(addr "$f")
    [ "$a" -lt $((start + 192 * 1024)) ] ||
        fail "$f at $(printf %#x "$a"): past the code's first 192 KiB"
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
pass "the code that runs on allocations (SLQB, SLOB), at start-up and at exit within $(( (last - start) / 1024 )) KiB of the code's start"
