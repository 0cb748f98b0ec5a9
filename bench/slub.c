/*
 * bench_slub: the patterns of the kernel's slub_test module, whose SLAB, SLQB
 * and SLUB numbers Nick Piggin posted in the January 2009 thread "Mainline
 * kernel OLTP performance update" ("All numbers are in CPU cycles"):
 *
 *   batch      one CPU allocates N objects, then frees them
 *   pair       one CPU does N malloc+free pairs
 *   batch_all  batch on every CPU at once
 *   pair_all   pair on every CPU at once
 *   remote     CPUs 1..n-1 allocate N objects each, then CPU 0 frees them all
 *   ring       every CPU allocates N objects, then CPU i frees what CPU i-1
 *              allocated
 *
 * Each thread is pinned to its own CPU and times its own loops with the TSC.
 * Thread 0 is the main thread (so single-CPU patterns run in the process's
 * first thread, as a single-threaded program would).  As in slub_test, the
 * benchmark does not touch the objects, except in remote and ring: there the
 * allocating thread writes the first word of each object after its timed
 * loop, as a producer fills what it hands over (so the freeing CPU finds the
 * object's cache line on the other CPU, and peak RSS counts every object).
 * After one warm-up round, --rounds rounds are measured; the result line gives
 * the medians, in ticks per operation:
 *
 *   alloc  cycles per malloc (mean over the allocating CPUs)
 *   free   cycles per free (mean over the freeing CPUs); 0 for pair patterns
 *   total  alloc + free, or cycles per malloc+free pair
 *   minflt minor page faults per measured round
 *   peak_rss_kib  the process's peak RSS (VmHWM) at the end
 *   peak_sampled_kib, peak_anon_kib  (remote and ring) resident memory and
 *                 its anonymous part, exact (smaps_rollup), sampled when
 *                 every object of the round is allocated: the most over the
 *                 rounds.  The anonymous part is the allocator's own memory;
 *                 the rest is mostly code pages (file-backed, shared)
 *
 * Usage: bench_slub --test NAME --size BYTES [--objs N] [--rounds N] [--cpus N]
 */
#define _GNU_SOURCE
#include "bench.h"
#include "patterns.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pattern_name[NR_PATTERNS] = {
    "batch", "pair", "batch_all", "pair_all", "remote", "ring",
};

static struct patterns pt; /* the pattern, its workers and their barrier */
static size_t size;
static long nr_objs = 10000, nr_rounds = 5, nr_cpus;

static NOINLINE void alloc_objs(struct worker *w)
{
    void **objs = w->objs;
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < nr_objs; i++)
        objs[i] = malloc(size);
    uint64_t t1 = tsc_end();

    bench_all_allocated(objs, nr_objs, "malloc(%zu)", size);
    if (pt.pattern == REMOTE || pt.pattern == RING)
        for (long i = 0; i < nr_objs; i++)
            *(volatile long *)objs[i] = i;
    w->alloc_ticks += t1 - t0;
    w->allocs += nr_objs;
}

/* Free the objects `owner` allocated; the time counts for the caller `w`. */
static NOINLINE void free_objs(struct worker *w, struct worker *owner)
{
    void **objs = owner->objs;
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < nr_objs; i++)
        free(objs[i]);
    uint64_t t1 = tsc_end();

    w->free_ticks += t1 - t0;
    w->frees += nr_objs;
}

static NOINLINE void alloc_free_pairs(struct worker *w)
{
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < nr_objs; i++) {
        void *p = malloc(size);
        escape(p);
        free(p);
    }
    uint64_t t1 = tsc_end();

    w->alloc_ticks += t1 - t0; /* the pair's cost is booked as "alloc" */
    w->allocs += nr_objs;
}

/* remote, ring: memory when every object of the round is allocated */
static long peak_sampled, peak_anon;

static void sample_peak(void)
{
    long rss, anon;
    if (bench_smaps_kib(&rss, &anon) != 0)
        return;
    if (rss > peak_sampled)
        peak_sampled = rss;
    if (anon > peak_anon)
        peak_anon = anon;
}

static _Atomic int stop;

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    bench_pin(w->id);
    while (1) {
        bench_barrier_wait(&pt.barrier); /* a round starts, or the run ends */
        if (stop)
            return NULL;
        round_step(&pt, w);
    }
}

/* patterns.h's start of a round: the workers wait at the barrier. */
static void start_round(void)
{
    bench_barrier_wait(&pt.barrier);
}

int main(int argc, char **argv)
{
    const char *test = NULL;
    long size_arg = 0;
    const struct bench_opt opts[] = {
        {"test", NULL, &test},        {"size", &size_arg, NULL}, {"objs", &nr_objs, NULL},
        {"rounds", &nr_rounds, NULL}, {"cpus", &nr_cpus, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "--test batch|pair|batch_all|pair_all|remote|ring --size BYTES "
                "[--objs N] [--rounds N] [--cpus N]");
    pt.pattern = NR_PATTERNS;
    for (int i = 0; test && i < NR_PATTERNS; i++)
        if (strcmp(test, pattern_name[i]) == 0)
            pt.pattern = i;
    if (pt.pattern == NR_PATTERNS || size_arg <= 0 || nr_objs <= 0 || nr_rounds <= 0)
        bench_die("need --test with a known pattern, --size, and positive counts");
    size = (size_t)size_arg;

    if (pt.pattern == BATCH || pt.pattern == PAIR)
        nr_cpus = 1;
    else if (nr_cpus == 0)
        nr_cpus = bench_ncpus();
    if ((pt.pattern == REMOTE || pt.pattern == RING) && nr_cpus < 2)
        bench_die("%s needs at least 2 CPUs", pattern_name[pt.pattern]);

    pt.cpus = (int)nr_cpus;
    pt.alloc_objs = alloc_objs;
    pt.free_objs = free_objs;
    pt.alloc_free_pairs = alloc_free_pairs;
    pt.sample_peak = sample_peak;
    pt.start_round = start_round;
    pt.workers = bench_map(sizeof(*pt.workers) * (size_t)nr_cpus);
    bench_barrier_init(&pt.barrier, (unsigned)nr_cpus);
    for (int i = 0; i < nr_cpus; i++) {
        pt.workers[i].id = i;
        pt.workers[i].objs = bench_map(sizeof(void *) * (size_t)nr_objs);
    }
    bench_pin(0);
    for (int i = 1; i < nr_cpus; i++)
        if (pthread_create(&pt.workers[i].tid, NULL, worker_main, &pt.workers[i]) != 0)
            bench_die("pthread_create failed");

    double *alloc_c = bench_map(sizeof(double) * 3 * (size_t)nr_rounds);
    double *free_c = alloc_c + nr_rounds, *faults = free_c + nr_rounds;
    /* one block of the size first, outside the measured loops (and the
     * functions callgrind counts): an allocator's one-time set-up of the
     * size's class (qslab makes a kmalloc class on its first use) is no
     * part of what the patterns measure */
    void *first = malloc(size);
    escape(first);
    free(first);
    measure_rounds(&pt, nr_rounds, alloc_c, free_c, faults);

    stop = 1;
    bench_barrier_wait(&pt.barrier);
    for (int i = 1; i < nr_cpus; i++)
        pthread_join(pt.workers[i].tid, NULL);

    result_costs(alloc_c, free_c, faults, nr_rounds);
    bench_result("peak_rss_kib", (double)bench_peak_rss_kib());
    if (pt.pattern == REMOTE || pt.pattern == RING) {
        bench_result("peak_sampled_kib", (double)peak_sampled);
        bench_result("peak_anon_kib", (double)peak_anon);
    }
    bench_result_end();
    return 0;
}
