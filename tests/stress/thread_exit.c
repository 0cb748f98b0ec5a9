/*
 * Thousands of short-lived threads, at most WAVE alive at once.  Each
 * allocates and frees objects, frees some objects left behind by threads that
 * have already exited, and leaves some for later threads.  Afterwards nothing
 * is live and the caches can be destroyed.
 */
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

#define WAVE 64
#define LEAVE 8 /* objects each thread leaves behind */

static qslab_cache *small, *odd;
static int nthreads;

/* Objects left by exited threads: a mutex-protected stack. */
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static void *orphans[WAVE * LEAVE * 4];
static int norphans;
static unsigned long errors, allocs;

struct obj {
    uint64_t owner;
    uint64_t check;
};

static void stamp(struct obj *o, uint64_t owner)
{
    o->owner = owner;
    o->check = ~owner * 0x9E3779B97F4A7C15ULL;
}

static int valid(const struct obj *o)
{
    return o->check == ~o->owner * 0x9E3779B97F4A7C15ULL;
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    uint64_t seed = tu_seed(id);
    void *mine[64];
    int n = 16 + (int)(tu_rand(&seed) % 48);
    for (int i = 0; i < n; i++) {
        mine[i] = qslab_cache_alloc(i & 1 ? odd : small);
        if (!mine[i]) {
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            continue;
        }
        stamp(mine[i], id);
    }
    __atomic_add_fetch(&allocs, (unsigned long)n, __ATOMIC_RELAXED);
    void *m = qslab_malloc(1 + tu_rand(&seed) % 3000);
    qslab_free(m);

    /* Free some objects of threads that are gone (or going). */
    pthread_mutex_lock(&orphan_lock);
    int take = norphans < LEAVE ? norphans : LEAVE;
    void *taken[LEAVE];
    for (int i = 0; i < take; i++)
        taken[i] = orphans[--norphans];
    pthread_mutex_unlock(&orphan_lock);
    for (int i = 0; i < take; i++) {
        if (!valid(taken[i]))
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        qslab_free(taken[i]); /* either cache */
    }

    /* Free most of ours; leave LEAVE behind. */
    for (int i = LEAVE; i < n; i++) {
        if (!mine[i])
            continue;
        if (!valid(mine[i]) || ((struct obj *)mine[i])->owner != id)
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        qslab_cache_free(i & 1 ? odd : small, mine[i]);
    }
    pthread_mutex_lock(&orphan_lock);
    for (int i = 0; i < LEAVE; i++)
        if (mine[i] && norphans < (int)(sizeof orphans / sizeof orphans[0]))
            orphans[norphans++] = mine[i];
        else if (mine[i])
            qslab_cache_free(i & 1 ? odd : small, mine[i]);
    pthread_mutex_unlock(&orphan_lock);
    return NULL;
}

int main(void)
{
    nthreads = TU_SCALE_TSAN(TU_SCALE(3000, 3), 2);
    small = qslab_cache_create("t-exit-small", 16, 0, 0, NULL);
    odd = qslab_cache_create("t-exit-odd", 72, 16, 0, NULL);
    CHECK(small && odd);
    if (!small || !odd)
        return tu_done();

    pthread_t t[WAVE];
    int started = 0;
    while (started < nthreads) {
        int wave = nthreads - started < WAVE ? nthreads - started : WAVE;
        for (int i = 0; i < wave; i++)
            if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(started + i + 1))) {
                tu_fail("pthread_create failed at thread %d", started + i);
                return tu_done();
            }
        for (int i = 0; i < wave; i++)
            pthread_join(t[i], NULL);
        started += wave;
    }
    CHECKF(errors == 0, "%lu bad objects", errors);

    struct qslab_cache_stats s1, s2;
    qslab_cache_stats(small, &s1);
    qslab_cache_stats(odd, &s2);
    CHECKF(s1.active_objs + s2.active_objs == (unsigned long)norphans, "active %lu + %lu, orphans %d",
           s1.active_objs, s2.active_objs, norphans);
    for (int i = 0; i < norphans; i++)
        qslab_free(orphans[i]);
    norphans = 0;
    qslab_cache_stats(small, &s1);
    qslab_cache_stats(odd, &s2);
    CHECKF(s1.active_objs == 0 && s2.active_objs == 0, "active %lu, %lu after freeing everything", s1.active_objs,
           s2.active_objs);
    CHECKF(s1.alloc == s1.free && s2.alloc == s2.free, "small %lu/%lu odd %lu/%lu", s1.alloc, s1.free, s2.alloc,
           s2.free);
    CHECKF(s1.alloc + s2.alloc == allocs, "caches counted %lu allocations, threads made %lu", s1.alloc + s2.alloc,
           allocs);

    /* What dead threads had queued was given back: after a shrink, what is
     * left fits in the queues of the live owners (this thread, or one per
     * CPU), not in one queue per dead thread. */
    qslab_cache *cs[2] = {small, odd};
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    for (int i = 0; i < 2; i++) {
        struct qslab_cache_stats st;
        unsigned long hi = 0, fb = 0;
        qslab_tune_get(qslab_cache_name(cs[i]), "hiwater", &hi);
        qslab_tune_get(qslab_cache_name(cs[i]), "freebatch", &fb);
        qslab_cache_shrink(cs[i]);
        qslab_cache_stats(cs[i], &st);
        unsigned long bound = (unsigned long)(ncpu + 2) * (hi + fb) * 2 + (unsigned long)(ncpu + 2) * st.objs_per_slab;
        CHECKF(st.num_objs <= bound, "%s: %lu objects in %lu slabs after shrink with nothing live (bound %lu)",
               qslab_cache_name(cs[i]), st.num_objs, st.num_slabs, bound);
    }
    printf("%d threads; small: %lu allocs, %lu slabs; odd: %lu allocs, %lu slabs\n", nthreads, s1.alloc,
           s1.num_slabs, s2.alloc, s2.num_slabs);
    CHECK(qslab_cache_destroy(small) == 0);
    CHECK(qslab_cache_destroy(odd) == 0);
    return tu_done();
}
