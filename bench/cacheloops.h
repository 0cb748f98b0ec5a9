/*
 * bench/cacheloops.h - what bench_fronts and bench_debug (debug.c) share
 * over qslab's object-cache API: slub_test's timed loops, slub.c's with
 * qslab_cache_alloc and qslab_cache_free, each a NOINLINE function named as
 * slub.c's (callgrind's --toggle-collect='alloc_objs*' etc. count one loop),
 * returning its TSC ticks; and a checked destroy.  bench_fronts' files use
 * either the loops (fronts_patterns.c) or the destroy (fronts.c).
 */
#ifndef BENCH_CACHELOOPS_H
#define BENCH_CACHELOOPS_H

#include <qslab.h>
#include <stdint.h>

#include "bench.h"

/* a timed loop: never inlined; no warning in a file that does not use it */
#define LOOP NOINLINE __attribute__((unused))

/* n objects of c into objs[0..n), timed; dies if one is NULL. */
static LOOP uint64_t alloc_objs(qslab_cache *c, void **objs, long n)
{
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < n; i++)
        objs[i] = qslab_cache_alloc(c);
    uint64_t t1 = tsc_end();

    bench_all_allocated(objs, n, "qslab_cache_alloc(%s)", qslab_cache_name(c));
    return t1 - t0;
}

/* objs[0..n) back to c, timed. */
static LOOP uint64_t free_objs(qslab_cache *c, void **objs, long n)
{
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < n; i++)
        qslab_cache_free(c, objs[i]);
    uint64_t t1 = tsc_end();
    return t1 - t0;
}

/* n alloc+free pairs on c, timed. */
static LOOP uint64_t alloc_free_pairs(qslab_cache *c, long n)
{
    uint64_t t0 = tsc_begin();
    for (long i = 0; i < n; i++) {
        void *p = qslab_cache_alloc(c);
        escape(p);
        qslab_cache_free(c, p);
    }
    uint64_t t1 = tsc_end();
    return t1 - t0;
}

/* Destroy c; dies if the library refuses. */
static inline void destroy_cache(qslab_cache *c)
{
    if (qslab_cache_destroy(c) != 0)
        bench_die("qslab_cache_destroy(%s) failed", qslab_cache_name(c));
}

#undef LOOP

#endif /* BENCH_CACHELOOPS_H */
