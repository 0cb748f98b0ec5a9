/*
 * bench/patterns.h - the kernel's slub_test patterns as bench_slub (malloc,
 * slub.c) and bench_fronts (the object-cache API, fronts_patterns.c) run
 * them:
 *
 *   batch      one CPU allocates N objects, then frees them
 *   pair       one CPU does N malloc+free pairs
 *   batch_all  batch on every CPU at once
 *   pair_all   pair on every CPU at once
 *   remote     CPUs 1..n-1 allocate N objects each, then CPU 0 frees them all
 *   ring       every CPU allocates N objects, then CPU i frees what CPU i-1
 *              allocated
 *
 * Here: the workers (one per CPU, worker 0 the main thread), a round's steps
 * between them, the rounds measured and their costs.  The driver gives the
 * timed loops (NOINLINE functions of its own, named alloc_objs, free_objs
 * and alloc_free_pairs or after them, for callgrind's --toggle-collect),
 * its peak sample and how it wakes its other workers.
 */
#ifndef BENCH_PATTERNS_H
#define BENCH_PATTERNS_H

#include <pthread.h>
#include <stdint.h>

#include "bench.h"

enum pattern { BATCH, PAIR, BATCH_ALL, PAIR_ALL, REMOTE, RING, NR_PATTERNS };

/* One thread's part of a round.  ticks are summed over the measured loop. */
struct worker {
    pthread_t tid;
    int id;
    void **objs; /* the objects this thread allocated (bench_map memory) */
    uint64_t alloc_ticks, free_ticks;
    long allocs, frees; /* operations timed in this round */
};

/* A pattern's run, as the driver sets it up. */
struct patterns {
    enum pattern pattern;
    int cpus; /* workers taking part: workers[0..cpus) */
    struct worker *workers;
    struct bench_barrier barrier; /* for cpus threads */
    /* the timed loops: w's objects; owner's objects, timed for w; pairs */
    void (*alloc_objs)(struct worker *w);
    void (*free_objs)(struct worker *w, struct worker *owner);
    void (*alloc_free_pairs)(struct worker *w);
    /* worker 0's peak sample, untimed, between barriers, when every object
     * of a remote or ring round is allocated; with sample_all, of a batch
     * round too, and at the end of a pair round */
    void (*sample_peak)(void);
    int sample_all;
    void (*start_round)(void); /* wake workers[1..cpus) for round_step */
};

/* One round of the pattern, as seen by worker w; every worker taking part
 * calls it. */
static inline void round_step(struct patterns *pt, struct worker *w)
{
    int n = pt->cpus;

    bench_barrier_wait(&pt->barrier);
    switch (pt->pattern) {
    case BATCH:
    case BATCH_ALL:
        pt->alloc_objs(w);
        bench_barrier_wait(&pt->barrier);
        if (pt->sample_all) {
            if (w->id == 0)
                pt->sample_peak();
            bench_barrier_wait(&pt->barrier);
        }
        pt->free_objs(w, w);
        break;
    case PAIR:
    case PAIR_ALL:
        pt->alloc_free_pairs(w);
        if (pt->sample_all) {
            bench_barrier_wait(&pt->barrier);
            if (w->id == 0)
                pt->sample_peak(); /* what the pairs left in queues and slabs */
        }
        break;
    case REMOTE:
        if (w->id != 0)
            pt->alloc_objs(w);
        bench_barrier_wait(&pt->barrier);
        if (w->id == 0) {
            pt->sample_peak(); /* untimed; the others wait at the last barrier */
            for (int i = 1; i < n; i++)
                pt->free_objs(w, &pt->workers[i]);
        }
        break;
    case RING:
        pt->alloc_objs(w);
        bench_barrier_wait(&pt->barrier);
        if (w->id == 0)
            pt->sample_peak();
        bench_barrier_wait(&pt->barrier); /* untimed */
        pt->free_objs(w, &pt->workers[(w->id + n - 1) % n]);
        break;
    default:
        break;
    }
    bench_barrier_wait(&pt->barrier);
}

/* Run one round on every worker taking part (the main thread is worker 0). */
static inline void run_round(struct patterns *pt)
{
    for (int i = 0; i < pt->cpus; i++) {
        pt->workers[i].alloc_ticks = pt->workers[i].free_ticks = 0;
        pt->workers[i].allocs = pt->workers[i].frees = 0;
    }
    pt->start_round();
    round_step(pt, &pt->workers[0]);
}

/* A warm-up round, then `rounds` measured ones; for each, the ticks per
 * alloc and per free (0 where there were none) over the workers, and the
 * page faults. */
static inline void measure_rounds(struct patterns *pt, long rounds, double *alloc_c, double *free_c,
                                  double *faults)
{
    run_round(pt); /* warm-up */
    for (long r = 0; r < rounds; r++) {
        long flt = bench_minflt();
        run_round(pt);
        faults[r] = (double)(bench_minflt() - flt);

        uint64_t at = 0, ft = 0;
        long an = 0, fn = 0;
        for (int i = 0; i < pt->cpus; i++) {
            at += pt->workers[i].alloc_ticks;
            ft += pt->workers[i].free_ticks;
            an += pt->workers[i].allocs;
            fn += pt->workers[i].frees;
        }
        alloc_c[r] = an ? (double)at / (double)an : 0;
        free_c[r] = fn ? (double)ft / (double)fn : 0;
    }
}

/* The result line's alloc, free, total and minflt: medians over the rounds
 * (reorders the arrays). */
static inline void result_costs(double *alloc_c, double *free_c, double *faults, long rounds)
{
    double a = bench_median(alloc_c, (int)rounds), f = bench_median(free_c, (int)rounds);
    bench_result("alloc", a);
    bench_result("free", f);
    bench_result("total", a + f);
    bench_result("minflt", bench_median(faults, (int)rounds));
}

#endif /* BENCH_PATTERNS_H */
