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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pattern { BATCH, PAIR, BATCH_ALL, PAIR_ALL, REMOTE, RING, NR_PATTERNS };

static const char *const pattern_name[NR_PATTERNS] = {
    "batch", "pair", "batch_all", "pair_all", "remote", "ring",
};

/* One thread's part of a round.  ticks are summed over the measured loop. */
struct worker {
    pthread_t tid;
    int id;
    void **objs; /* the N objects this thread allocated (bench_map memory) */
    uint64_t alloc_ticks, free_ticks;
    long allocs, frees; /* operations timed in this round */
};

static enum pattern pattern;
static size_t size;
static long nr_objs = 10000, nr_rounds = 5, nr_cpus;
static struct worker *workers;
static struct bench_barrier barrier;

static NOINLINE void alloc_objs(struct worker *w)
{
    void **objs = w->objs;
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < nr_objs; i++)
        objs[i] = malloc(size);
    uint64_t t1 = tsc_end();

    for (long i = 0; i < nr_objs; i++)
        if (!objs[i])
            bench_die("malloc(%zu) failed", size);
    if (pattern == REMOTE || pattern == RING)
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

/* One round of the pattern, as seen by worker w; every worker calls it. */
static void round_step(struct worker *w)
{
    int n = (int)nr_cpus;

    bench_barrier_wait(&barrier);
    switch (pattern) {
    case BATCH:
    case BATCH_ALL:
        alloc_objs(w);
        bench_barrier_wait(&barrier);
        free_objs(w, w);
        break;
    case PAIR:
    case PAIR_ALL:
        alloc_free_pairs(w);
        break;
    case REMOTE:
        if (w->id != 0)
            alloc_objs(w);
        bench_barrier_wait(&barrier);
        if (w->id == 0) {
            sample_peak(); /* untimed; the others wait at the last barrier */
            for (int i = 1; i < n; i++)
                free_objs(w, &workers[i]);
        }
        break;
    case RING:
        alloc_objs(w);
        bench_barrier_wait(&barrier);
        if (w->id == 0)
            sample_peak();
        bench_barrier_wait(&barrier); /* untimed */
        free_objs(w, &workers[(w->id + n - 1) % n]);
        break;
    default:
        break;
    }
    bench_barrier_wait(&barrier);
}

static _Atomic int stop;

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    bench_pin(w->id);
    while (1) {
        bench_barrier_wait(&barrier); /* a round starts, or the run ends */
        if (stop)
            return NULL;
        round_step(w);
    }
}

/* Run one round on every worker (the main thread is worker 0). */
static void run_round(void)
{
    for (int i = 0; i < nr_cpus; i++) {
        workers[i].alloc_ticks = workers[i].free_ticks = 0;
        workers[i].allocs = workers[i].frees = 0;
    }
    bench_barrier_wait(&barrier);
    round_step(&workers[0]);
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
    pattern = NR_PATTERNS;
    for (int i = 0; test && i < NR_PATTERNS; i++)
        if (strcmp(test, pattern_name[i]) == 0)
            pattern = i;
    if (pattern == NR_PATTERNS || size_arg <= 0 || nr_objs <= 0 || nr_rounds <= 0)
        bench_die("need --test with a known pattern, --size, and positive counts");
    size = (size_t)size_arg;

    if (pattern == BATCH || pattern == PAIR)
        nr_cpus = 1;
    else if (nr_cpus == 0)
        nr_cpus = bench_ncpus();
    if ((pattern == REMOTE || pattern == RING) && nr_cpus < 2)
        bench_die("%s needs at least 2 CPUs", pattern_name[pattern]);

    workers = bench_map(sizeof(*workers) * (size_t)nr_cpus);
    bench_barrier_init(&barrier, (unsigned)nr_cpus);
    for (int i = 0; i < nr_cpus; i++) {
        workers[i].id = i;
        workers[i].objs = bench_map(sizeof(void *) * (size_t)nr_objs);
    }
    bench_pin(0);
    for (int i = 1; i < nr_cpus; i++)
        if (pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]) != 0)
            bench_die("pthread_create failed");

    double *alloc_c = bench_map(sizeof(double) * 3 * (size_t)nr_rounds);
    double *free_c = alloc_c + nr_rounds, *faults = free_c + nr_rounds;

    run_round(); /* warm-up */
    for (long r = 0; r < nr_rounds; r++) {
        long flt = bench_minflt();
        run_round();
        faults[r] = (double)(bench_minflt() - flt);

        uint64_t at = 0, ft = 0;
        long an = 0, fn = 0;
        for (int i = 0; i < nr_cpus; i++) {
            at += workers[i].alloc_ticks;
            ft += workers[i].free_ticks;
            an += workers[i].allocs;
            fn += workers[i].frees;
        }
        alloc_c[r] = an ? (double)at / (double)an : 0;
        free_c[r] = fn ? (double)ft / (double)fn : 0;
    }

    stop = 1;
    bench_barrier_wait(&barrier);
    for (int i = 1; i < nr_cpus; i++)
        pthread_join(workers[i].tid, NULL);

    double a = bench_median(alloc_c, (int)nr_rounds), f = bench_median(free_c, (int)nr_rounds);
    bench_result("alloc", a);
    bench_result("free", f);
    bench_result("total", a + f);
    bench_result("minflt", bench_median(faults, (int)nr_rounds));
    bench_result("peak_rss_kib", (double)bench_peak_rss_kib());
    if (pattern == REMOTE || pattern == RING) {
        bench_result("peak_sampled_kib", (double)peak_sampled);
        bench_result("peak_anon_kib", (double)peak_anon);
    }
    bench_result_end();
    return 0;
}
