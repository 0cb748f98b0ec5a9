/*
 * bench/fronts_patterns.c - bench_fronts' slub_test patterns (patterns.h,
 * slub.c's, with the cache API's loops of cacheloops.h): one worker thread
 * pinned to each CPU (worker 0 is the main thread), the others asleep on
 * their channel between jobs, and a peak sample when every object of a
 * round is allocated, in every pattern.  fronts.c describes the tests and
 * their result lines.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "cacheloops.h"
#include "fronts.h"

#include <pthread.h>
#include <qslab.h>
#include <string.h>

long nr_objs = 10000, nr_rounds = 5;
static struct chan worker_chan = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};
static void start_round(void);
static void worker_alloc(struct worker *w);
static void worker_free(struct worker *w, struct worker *owner);
static void worker_pairs(struct worker *w);
/* the pattern under test; pt.cpus: workers taking part, 1 or nr_cpus */
static struct patterns pt = {.alloc_objs = worker_alloc,
                             .free_objs = worker_free,
                             .alloc_free_pairs = worker_pairs,
                             .sample_peak = sample_peak,
                             .sample_all = 1,
                             .start_round = start_round};

static void worker_alloc(struct worker *w)
{
    w->alloc_ticks += alloc_objs(cache, w->objs, nr_objs);
    if (pt.pattern == REMOTE || pt.pattern == RING)
        for (long i = 0; i < nr_objs; i++)
            *(volatile long *)w->objs[i] = i;
    w->allocs += nr_objs;
}

/* Free the objects `owner` allocated; the time counts for the caller `w`. */
static void worker_free(struct worker *w, struct worker *owner)
{
    w->free_ticks += free_objs(cache, owner->objs, nr_objs);
    w->frees += nr_objs;
}

static void worker_pairs(struct worker *w)
{
    w->alloc_ticks += alloc_free_pairs(cache, nr_objs); /* the pair's cost is booked as "alloc" */
    w->allocs += nr_objs;
}

static void job_round(void *self)
{
    struct worker *w = self;
    if (w->id < pt.cpus)
        round_step(&pt, w);
}

/* The "after" step: each worker that took part flushes its queue of the
 * cache (per-CPU queues: every CPU's at once), twice: the first pass sends
 * the frees of other threads' objects home, where the second finds them. */
static void job_shrink(void *self)
{
    struct worker *w = self;
    if (w->id >= pt.cpus)
        return;
    for (int pass = 0; pass < 2; pass++) {
        qslab_cache_shrink(cache);
        bench_barrier_wait(&pt.barrier);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    bench_pin(w->id);
    touch_stack();
    chan_serve(&worker_chan, w);
    return NULL;
}

/* patterns.h's start of a round: the other workers taking part wake up. */
static void start_round(void)
{
    if (pt.cpus > 1)
        chan_post(&worker_chan, job_round);
}

static void shrink_workers(void)
{
    if (pt.cpus > 1)
        chan_post(&worker_chan, job_shrink);
    job_shrink(&pt.workers[0]);
}

void run_pattern(enum pattern t, const char *front)
{
    pt.pattern = t;
    pt.cpus = (t == BATCH || t == PAIR) ? 1 : (int)nr_cpus;
    bench_barrier_init(&pt.barrier, (unsigned)pt.cpus);

    double *alloc_c = bench_map(sizeof(double) * 3 * (size_t)nr_rounds);
    double *free_c = alloc_c + nr_rounds, *faults = free_c + nr_rounds;

    track_begin(&test_mem);
    measure_rounds(&pt, nr_rounds, alloc_c, free_c, faults);
    shrink_workers();
    struct mem after = mem_now();

    long live = 0; /* threads whose objects are all live at the peak sample */
    if (t == BATCH)
        live = 1;
    else if (t == BATCH_ALL || t == RING)
        live = pt.cpus;
    else if (t == REMOTE)
        live = pt.cpus - 1;
    result_head(test_name[t], front, size);
    result_costs(alloc_c, free_c, faults, nr_rounds);
    bench_result("live_kib", (double)live * (double)nr_objs * (double)size / 1024);
    result_mem(after);
    bench_result_end();
    bench_unmap(alloc_c, sizeof(double) * 3 * (size_t)nr_rounds);
}

/* The workers: their object arrays faulted in, the main thread (worker 0)
 * pinned to CPU 0, each other worker started on its own CPU. */
void patterns_start(void)
{
    pt.workers = bench_map(sizeof(*pt.workers) * (size_t)nr_cpus);
    for (int i = 0; i < nr_cpus; i++) {
        pt.workers[i].id = i;
        pt.workers[i].objs = bench_map(sizeof(void *) * (size_t)nr_objs);
        memset(pt.workers[i].objs, 0, sizeof(void *) * (size_t)nr_objs); /* fault it in */
    }
    bench_pin(0);
    touch_stack();
    for (int i = 1; i < nr_cpus; i++)
        if (pthread_create(&pt.workers[i].tid, NULL, worker_main, &pt.workers[i]) != 0)
            bench_die("pthread_create failed");
}

static void job_warm(void *self)
{
    (void)self;
    warm_probes();
    bench_barrier_wait(&pt.barrier);
}

void patterns_warm(void)
{
    pt.cpus = (int)nr_cpus;
    bench_barrier_init(&pt.barrier, (unsigned)nr_cpus);
    if (nr_cpus > 1)
        chan_post(&worker_chan, job_warm);
    job_warm(NULL);
}

void patterns_stop(void)
{
    chan_post(&worker_chan, NULL);
    for (int i = 1; i < nr_cpus; i++)
        pthread_join(pt.workers[i].tid, NULL);
}
