/*
 * bench_calloc: what calloc costs in page faults and written pages.
 *
 * calloc must return zeroed memory; memory fresh from the OS is zero
 * already, so an allocator that knows where its memory came from need not
 * write it.  Two cases, each in a fresh process (the runner starts one per
 * run):
 *
 *   --count 1 --size 9437184      one 9 MiB calloc; nothing touches the block
 *   --count 100000 --size 64      100,000 callocs of 64 bytes, from slabs,
 *                                 arenas or spans nobody has used yet
 *
 * Before the measured callocs the process makes and frees one malloc of
 * another size (24 bytes), so that the allocator's start-up (its state,
 * thread data, the first arena) is not charged to calloc; the pointer array
 * is from mmap and written before the measurement.
 *
 * Result:
 *   faults           minor page faults during the callocs (getrusage)
 *   faults_per_block the same per block
 *   anon_kib         anonymous memory added by the callocs (smaps_rollup:
 *                    exact), i.e. pages written, by calloc's zeroing or by
 *                    the allocator's own bookkeeping; a page only read maps
 *                    the shared zero page and adds nothing
 *   block_kib        the blocks' own size, count x size, for reference
 *   secs             time of the calloc loop
 * After the measurement every block is checked to be zero (the check reads
 * them: not counted); a block that is not zero ends the run with exit 1.
 *
 * Usage: bench_calloc [--count N] [--size BYTES]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long count = 100000, size = 64;
    const struct bench_opt opts[] = {
        {"count", &count, NULL},
        {"size", &size, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "[--count N] [--size BYTES]");
    if (count < 1 || size < 1)
        bench_die("need --count and --size of at least 1");

    char **blocks = bench_map(sizeof(char *) * (size_t)count);
    memset(blocks, 0xA5, sizeof(char *) * (size_t)count); /* fault it in now */

    void *warm = malloc(24); /* the allocator's start-up, not calloc's */
    escape(warm);
    free(warm);

    long rss0, anon0, rss1, anon1;
    if (bench_smaps_kib(&rss0, &anon0) != 0)
        bench_die("cannot read /proc/self/smaps_rollup");
    long flt0 = bench_minflt();
    double t0 = bench_now();
    for (long i = 0; i < count; i++) {
        blocks[i] = calloc(1, (size_t)size);
        if (!blocks[i])
            bench_die("calloc(1, %ld) failed at block %ld", size, i);
    }
    double t1 = bench_now();
    long flt1 = bench_minflt();
    if (bench_smaps_kib(&rss1, &anon1) != 0)
        bench_die("cannot read /proc/self/smaps_rollup");

    for (long i = 0; i < count; i++) {
        const unsigned char *p = (const unsigned char *)blocks[i];
        for (long j = 0; j < size; j++)
            if (p[j] != 0)
                bench_die("block %ld is not zero at byte %ld", i, j);
    }
    for (long i = 0; i < count; i++)
        free(blocks[i]);

    bench_result("faults", (double)(flt1 - flt0));
    bench_result("faults_per_block", (double)(flt1 - flt0) / (double)count);
    bench_result("anon_kib", (double)(anon1 - anon0));
    bench_result("block_kib", (double)count * (double)size / 1024.0);
    bench_result("secs", t1 - t0);
    bench_result_end();
    return 0;
}
