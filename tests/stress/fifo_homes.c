/*
 * The empty FIFO's homes under load: many more threads than CPUs take and
 * free blocks of 16 KiB (two to a slab, so nearly every free empties a
 * slab and nearly every refill takes one from the FIFO), half of them
 * freed by the next thread (remote frees: the slab goes empty on another
 * CPU, onto its home's list), with a small empty_limit (the whole-FIFO
 * policy at the puts over their share) and a short decay (each put's own
 * home's decay, the purger's sweeps).  Meanwhile another thread shrinks
 * the cache (every home's lock), trims the process (the sweeps, the
 * retention cuts) and reads its statistics (the homes' counts, without
 * their locks).  Objects are stamped and checked.  At the end: nothing lost, nothing in use, the walker
 * content, and a shrink leaves no empty slab.  Run under TSan with the
 * other stress tests (src/core/node.c, FIFO HOMES).
 */
#include <pthread.h>
#include <qslab.h>
#include <stdbool.h>
#include <unistd.h>

#include "../testutil.h"
#include "../front.h"

#define SIZE 16384
#define BURST 24
#define MAXT 64

static qslab_cache *cache;
static int nthreads;
static unsigned long bad;
static int done;

/* A mailbox per thread: objects the previous thread hands it to free. */
static struct box {
    pthread_mutex_t lock;
    void *objs[BURST];
    int n;
} boxes[MAXT];

static void stamp(uint64_t *w)
{
    for (size_t k = 0; k < SIZE / 8; k += 64) /* a word a line: every page written */
        w[k] = (uint64_t)(uintptr_t)w ^ k;
}

static bool intact(const uint64_t *w)
{
    for (size_t k = 0; k < SIZE / 8; k += 64)
        if (w[k] != ((uint64_t)(uintptr_t)w ^ k))
            return false;
    return true;
}

static void check_free(void *p)
{
    if (!intact(p))
        __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
    qslab_cache_free(cache, p);
}

static void drain(struct box *b)
{
    void *objs[BURST];
    pthread_mutex_lock(&b->lock);
    int n = b->n;
    for (int i = 0; i < n; i++)
        objs[i] = b->objs[i];
    b->n = 0;
    pthread_mutex_unlock(&b->lock);
    for (int i = 0; i < n; i++)
        check_free(objs[i]);
}

static void *worker(void *arg)
{
    int me = (int)(uintptr_t)arg;
    struct box *mine = &boxes[me], *next = &boxes[(me + 1) % nthreads];
    uint64_t seed = tu_seed((uint64_t)me + 11);
    int rounds = TU_SCALE(3000, 20);
    void *objs[BURST];
    for (int r = 0; r < rounds; r++) {
        int n = 0;
        for (int i = 0; i < BURST; i++) {
            void *p = qslab_cache_alloc(cache);
            if (!p) {
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            stamp(p);
            objs[n++] = p;
        }
        drain(mine);
        /* the first half to the next thread, when its box has room */
        int give = 0;
        pthread_mutex_lock(&next->lock);
        while (give < n / 2 && next->n < BURST)
            next->objs[next->n++] = objs[give++];
        pthread_mutex_unlock(&next->lock);
        for (int i = give; i < n; i++)
            check_free(objs[i]);
        if (tu_rand(&seed) % 16 == 0)
            tu_sleep_ms(1 + (unsigned)(tu_rand(&seed) % 5));
    }
    return NULL;
}

static void *keeper(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !__atomic_load_n(&done, __ATOMIC_ACQUIRE); i++) {
        struct qslab_cache_stats st;
        if (i % 3 == 0)
            qslab_cache_stats(cache, &st); /* the homes' counts, read racily */
        else if (i % 3 == 1)
            qslab_cache_shrink(cache);
        else
            qslab_trim();
        tu_sleep_ms(3);
    }
    return NULL;
}

int main(void)
{
    nthreads = 4 * (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nthreads < 8)
        nthreads = 8;
    if (nthreads > MAXT)
        nthreads = MAXT;
    cache = qslab_cache_create("t-fifo-homes", SIZE, 0, 0, NULL);
    CHECK(cache != NULL);
    CHECK(qslab_tune("t-fifo-homes", "empty_limit", "6") == 0);
    CHECK(qslab_tune("t-fifo-homes", "empty_decay_ms", "20") == 0);
    for (int i = 0; i < nthreads; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_t t[MAXT], k;
    CHECK(pthread_create(&k, NULL, keeper, NULL) == 0);
    for (uintptr_t i = 0; i < (uintptr_t)nthreads; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    pthread_join(k, NULL);
    for (int i = 0; i < nthreads; i++)
        drain(&boxes[i]);
    CHECKF(bad == 0, "%lu objects lost or overwritten", bad);
    struct qslab_cache_stats st;
    qslab_cache_stats(cache, &st);
    CHECKF(st.active_objs == 0, "%lu objects still in use", st.active_objs);
    /* the FIFO was used: slabs went empty and were taken again, and some
     * went back (the limit, the decay, the shrinks); SLOB keeps blocks this
     * size in its runs, not in slabs of the cache */
    CHECKF(tf_slob(cache) || (st.new_slab > 0 && st.free_slab > 0),
           "%lu slabs made, %lu given back: the FIFO was not exercised", st.new_slab,
           st.free_slab);
    CHECK(qslab_cache_validate(cache) == 0);
    qslab_cache_shrink(cache);
    qslab_cache_stats(cache, &st);
    CHECKF(st.empty_slabs == 0, "%lu empty slabs kept after a shrink", st.empty_slabs);
    CHECK(qslab_cache_destroy(cache) == 0);
    return tu_done();
}
