#!/usr/bin/env bash
# real_sort: coreutils sort of a generated 200,000-line file gives the same
# output on glibc and under qslab-run: plain, numeric on a key, unique,
# multi-threaded (--parallel=2 -S 50M), and an external sort that merges
# temporary files (-S 1M).
source "$(dirname "$0")/common.sh"
need sort coreutils
need awk mawk
workdir sort
check_preload_active

# Park-Miller generator (exact in awk's doubles): the same file everywhere.
awk 'BEGIN {
    x = 12345
    for (i = 0; i < 200000; i++) {
        x = (x * 16807) % 2147483647
        w = sprintf("w%04d", x % 5000)
        printf "%s\t%d\t%s %s\n", w, x % 100000, substr("abcdefghijklmnopqrstuvwxyz", 1 + x % 26, 1 + x % 17), i % 97
    }
}' > "$WORK/input.txt"
[ "$(wc -l < "$WORK/input.txt")" -eq 200000 ] || fail "input generation failed"

# The sorts (each output read to the end: no reader stops early, so no
# SIGPIPE and no "write failed" race in the compared stderr).
cat > "$WORK/run_sorts.sh" <<'SORTS'
set -eo pipefail
in=$1
tab=$(printf '\t')
sort "$in" | cksum
sort -t "$tab" -k2,2n -k1,1 "$in" | sed -n '1,5000p' | cksum
sort -u -k1,1 "$in" | cksum
sort -r "$in" | sed -n '199998,$p'
sort --parallel=2 -S 50M "$in" | cksum
sort --parallel=2 -S 50M -t "$tab" -k3,3 -k2,2nr "$in" | cksum
TMPDIR=. sort --parallel=2 -S 1M -k2,2n -s "$in" | cksum
sort "$in" | sed -n '1,100000p' > first.txt
sort "$in" | sed -n '100001,$p' > second.txt
sort -m first.txt second.txt | cksum
SORTS
compare_run "sort" bash "$WORK/run_sorts.sh" "$WORK/input.txt"
pass "sort: $(wc -l < "$WORK/glibc.out") results identical on glibc and qslab"
