/*
 * Tunables changed while threads allocate and free: slab order, queue
 * high-water mark and free batch, empty-slab limit.  Objects cross threads
 * through a ring and are stamped and verified; at the end the counters are
 * exact and the cache is destroyed cleanly.  Then the same with a cache of
 * the hardened profile's flags (red zones, quarantine), whose allocations
 * and frees all take the node's paths and are counted there, and whose
 * quarantine sizes itself from the order the tuner changes.
 */
#include <pthread.h>
#include <sched.h>
#include <qslab.h>

#include "../testutil.h"

#define NTHREADS 16
#define RING 1024
#define SIZE 500

static qslab_cache *cache;
static const char *name;
static int iter_div; /* a run's iterations: the full count / iter_div */
static void *ring[RING];
static int stop;
static unsigned long allocs, bad, tunes, refused;

static void stamp(uint64_t *w, uint64_t v)
{
    for (size_t i = 0; i < SIZE / 8; i++)
        w[i] = v + i;
}

static int stamped(const uint64_t *w)
{
    for (size_t i = 1; i < SIZE / 8; i++)
        if (w[i] != w[0] + i)
            return 0;
    return 1;
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    uint64_t seed = tu_seed(id + 1000);
    int iters = TU_SCALE(150000, 5) / iter_div;
    unsigned long n = 0;
    for (int i = 0; i < iters; i++) {
        uint64_t r = tu_rand(&seed);
        void *p = qslab_cache_alloc(cache);
        if (!p) {
            tu_fail("allocation failed");
            continue;
        }
        n++;
        stamp(p, r);
        if (r % 4) { /* through the ring */
            void *old = __atomic_exchange_n(&ring[(r >> 16) % RING], p, __ATOMIC_ACQ_REL);
            p = old;
        }
        if (p) {
            if (!stamped(p))
                __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
            qslab_cache_free(cache, p);
        }
    }
    __atomic_add_fetch(&allocs, n, __ATOMIC_RELAXED);
    return NULL;
}

static void set(const char *attr, unsigned long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lu", v);
    if (qslab_tune(name, attr, buf) != 0) {
        __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
        tu_fail("qslab_tune(%s, %s, %s) refused, errno %d", name, attr, buf, errno);
    }
    unsigned long got = 0;
    if (qslab_tune_get(name, attr, &got) != 0 || got != v)
        tu_fail("%s reads back %lu, set %lu", attr, got, v);
    tunes++;
}

static void *tuner(void *arg)
{
    uint64_t seed = tu_seed(99);
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        unsigned long hi = 16 + tu_rand(&seed) % 241; /* 16 .. 256 */
        unsigned long fb = 4 + tu_rand(&seed) % (hi / 2 - 3);
        set("freebatch", 4); /* keep freebatch <= hiwater at every step */
        set("hiwater", hi);
        set("freebatch", fb);
        set("order", 1 + tu_rand(&seed) % 3);
        set("empty_limit", tu_rand(&seed) % 8);
        if (tunes % 16 == 0)
            qslab_cache_shrink(cache);
        sched_yield();
    }
    return NULL;
}

static void run(const char *cache_name, unsigned long flags, int div)
{
    name = cache_name;
    iter_div = div;
    allocs = bad = tunes = refused = 0;
    __atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
    cache = qslab_cache_create(name, SIZE, 0, flags, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return;
    pthread_t t[NTHREADS], tu;
    pthread_create(&tu, NULL, tuner, NULL);
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(tu, NULL);

    for (int i = 0; i < RING; i++)
        if (ring[i]) {
            if (!stamped(ring[i]))
                bad++;
            qslab_cache_free(cache, ring[i]);
            ring[i] = NULL;
        }
    CHECKF(bad == 0, "%s: %lu corrupt objects", name, bad);
    CHECK(refused == 0);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(cache, &st) == 0);
    CHECKF(st.alloc == allocs && st.free == allocs && st.active_objs == 0,
           "%s: alloc %lu free %lu active %lu, made %lu", name, st.alloc, st.free, st.active_objs, allocs);
    printf("%s: %lu objects, %lu tunes, %lu slabs created, %lu freed\n", name, allocs, tunes, st.new_slab,
           st.free_slab);
    CHECK(qslab_cache_destroy(cache) == 0);
}

int main(void)
{
    run("t-live", 0, 1);
    /* a debug cache's operations are slower: a quarter of the iterations */
    run("t-live-zq", QSLAB_RED_ZONE | QSLAB_QUARANTINE, 4);
    return tu_done();
}
