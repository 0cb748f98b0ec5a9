/*
 * bench_live: the time of a malloc and a free as the number of live
 * objects grows.
 *
 * --live N blocks of random sizes (uniform, --min to --max bytes: 16 B to
 * 4 KiB) are allocated and their first bytes written; then --pairs times a
 * random one of them is freed and a block of a new random size takes its
 * place (written too, as a program would), timed as a whole.  The sizes
 * and the slots come from a fixed seed, so every allocator sees the same
 * program.  An allocator whose search grows with what it holds (a list of
 * pages or of free blocks walked) shows it here as time per pair growing
 * with --live; the cache and TLB misses of a larger heap add to every
 * allocator's.
 *
 * Result: ns_pair (nanoseconds per free + malloc of the churn, wall
 * clock), cpu_ns_pair (the same in the process's CPU time: steadier on a
 * busy machine), fill_ns (per malloc while filling), peak_rss_kib, live.
 *
 * Usage: bench_live [--live N] [--pairs N] [--min B] [--max B] [--seed S]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A block's first bytes: written at its allocation, so that the churn
 * pays for the block's memory as a program would (its first cache line). */
#define TOUCH 16

/* CPU seconds of the process: its threads' (the allocator's own too) */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t random_size(uint64_t *rng, long min, long max)
{
    return (size_t)min + (size_t)(bench_rand(rng) % (uint64_t)(max - min + 1));
}

int main(int argc, char **argv)
{
    long live = 100000, pairs = 1000000, min = 16, max = 4096, seed = 1;
    const struct bench_opt opts[] = {
        {"live", &live, NULL}, {"pairs", &pairs, NULL}, {"min", &min, NULL},
        {"max", &max, NULL},   {"seed", &seed, NULL},
    };
    bench_parse(argc, argv, opts, 5,
                "bench_live [--live N] [--pairs N] [--min B] [--max B] [--seed S]");
    if (live < 1 || min < TOUCH || max < min)
        bench_die("need --live >= 1 and %d <= --min <= --max", TOUCH);
    uint64_t rng = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + 1;
    void **objs = bench_map((size_t)live * sizeof(void *));

    double t0 = bench_now();
    for (long i = 0; i < live; i++) {
        size_t n = random_size(&rng, min, max);
        objs[i] = malloc(n);
        if (!objs[i])
            bench_die("malloc(%zu) failed", n);
        memset(objs[i], (int)i, TOUCH);
    }
    double t1 = bench_now(), c1 = cpu_now();
    for (long k = 0; k < pairs; k++) {
        uint64_t r = bench_rand(&rng);
        long i = (long)(r % (uint64_t)live);
        size_t n = (size_t)min + (size_t)((r >> 32) % (uint64_t)(max - min + 1));
        free(objs[i]);
        objs[i] = malloc(n);
        if (!objs[i])
            bench_die("malloc(%zu) failed", n);
        memset(objs[i], (int)k, TOUCH);
    }
    double t2 = bench_now(), c2 = cpu_now();
    long peak = bench_peak_rss_kib();
    for (long i = 0; i < live; i++)
        free(objs[i]);
    bench_unmap(objs, (size_t)live * sizeof(void *));

    bench_result("ns_pair", pairs ? (t2 - t1) * 1e9 / (double)pairs : 0);
    bench_result("cpu_ns_pair", pairs ? (c2 - c1) * 1e9 / (double)pairs : 0);
    bench_result("fill_ns", (t1 - t0) * 1e9 / (double)live);
    bench_result("peak_rss_kib", (double)peak);
    bench_result("live", (double)live);
    bench_result_end();
    return 0;
}
