/*
 * qslab_cache_stats in one thread: counters move by exactly what was done,
 * and the derived numbers agree with each other.  Where a cache is SLOB's
 * (QSLAB_FRONT=slob), every allocation and free is a slow one, there are no
 * queues, and objects that fit a page are in no slab of the cache: the
 * checks of queue and slab mechanics become checks of that.
 */
#include <pthread.h>
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

static void check_consistent(const qslab_cache *c, const struct qslab_cache_stats *st, const char *when)
{
    CHECKF(st->alloc - st->free == st->active_objs, "%s: alloc %lu free %lu active %lu", when, st->alloc, st->free,
           st->active_objs);
    CHECKF(st->alloc_fast + st->alloc_slow == st->alloc, "%s: alloc_fast %lu + alloc_slow %lu != alloc %lu", when,
           st->alloc_fast, st->alloc_slow, st->alloc);
    CHECKF(st->free_fast + st->free_slow + st->remote_free == st->free || st->free_fast + st->free_slow == st->free,
           "%s: free_fast %lu free_slow %lu remote_free %lu free %lu", when, st->free_fast, st->free_slow,
           st->remote_free, st->free);
    if (tf_slob(c)) {
        /* SLOB: no fast path, no queues; page objects (live ones) in no
         * slab of the cache, big objects in its own slabs */
        CHECKF(st->alloc_fast == 0 && st->free_fast == 0 && st->alloc_slow == st->alloc && st->free_slow == st->free,
               "%s (slob): alloc_fast %lu free_fast %lu alloc_slow %lu/%lu free_slow %lu/%lu", when,
               st->alloc_fast, st->free_fast, st->alloc_slow, st->alloc, st->free_slow, st->free);
        CHECKF(st->queued_objs == 0 && st->flush == 0 && st->refill == 0 && st->claim == 0,
               "%s (slob): queued %lu flush %lu refill %lu claim %lu", when, st->queued_objs, st->flush,
               st->refill, st->claim);
        unsigned long objs = st->num_slabs ? (unsigned long)st->num_slabs * st->objs_per_slab : st->active_objs;
        CHECKF(st->num_objs == objs, "%s (slob): num_objs %lu, active %lu, %lu slabs of %u", when, st->num_objs,
               st->active_objs, st->num_slabs, st->objs_per_slab);
    } else if (tf_is(c, "slab")) {
        /* SLAB: objects are born as refills take them (front/slab/slab.h,
         * lazy birth): at most the slabs' objects, at least those handed out
         * or queued */
        CHECKF(st->num_objs <= (unsigned long)st->num_slabs * st->objs_per_slab &&
                   st->num_objs >= st->active_objs + st->queued_objs,
               "%s (slab): num_objs %lu, %lu slabs of %u, active %lu, queued %lu", when, st->num_objs,
               st->num_slabs, st->objs_per_slab, st->active_objs, st->queued_objs);
    } else {
        CHECKF(st->num_objs == (unsigned long)st->num_slabs * st->objs_per_slab, "%s: num_objs %lu, %lu slabs of %u",
               when, st->num_objs, st->num_slabs, st->objs_per_slab);
    }
    CHECKF(st->active_objs <= st->num_objs, "%s: active %lu > num_objs %lu", when, st->active_objs, st->num_objs);
    CHECKF(st->empty_slabs <= st->num_slabs, "%s: empty %lu > slabs %lu", when, st->empty_slabs, st->num_slabs);
    CHECKF(st->new_slab - st->free_slab == st->num_slabs, "%s: new_slab %lu - free_slab %lu != num_slabs %lu", when,
           st->new_slab, st->free_slab, st->num_slabs);
}

static void test_deltas(void)
{
    qslab_cache *c = qslab_cache_create("t-stats", 120, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    struct qslab_cache_stats s0, s1, s2;
    CHECK(qslab_cache_stats(c, &s0) == 0);
    CHECK(s0.alloc == 0 && s0.free == 0 && s0.active_objs == 0);
    CHECK(s0.object_size == 120);
    check_consistent(c, &s0, "new cache");

    enum { N = 1000 };
    static void *objs[N];
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    CHECK(qslab_cache_stats(c, &s1) == 0);
    CHECKF(s1.alloc - s0.alloc == N, "alloc moved by %lu", s1.alloc - s0.alloc);
    CHECK(s1.free == s0.free);
    CHECK(s1.active_objs == N);
    CHECK(s1.num_objs >= N);
    if (tf_slob(c)) /* 120 bytes fit a page: SLOB's shared pages, no slab of the cache */
        CHECKF(s1.new_slab == 0 && s1.num_slabs == 0 && s1.num_objs == N, "slob: new_slab %lu num_slabs %lu num_objs %lu",
               s1.new_slab, s1.num_slabs, s1.num_objs);
    else
        CHECK(s1.new_slab >= 1 && s1.num_slabs >= (N + s1.objs_per_slab - 1) / s1.objs_per_slab);
    check_consistent(c, &s1, "after allocating");

    for (int i = 0; i < N / 2; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_stats(c, &s2) == 0);
    CHECKF(s2.free - s1.free == N / 2, "free moved by %lu", s2.free - s1.free);
    CHECK(s2.alloc == s1.alloc);
    CHECK(s2.active_objs == N - N / 2);
    check_consistent(c, &s2, "after freeing half");

    /* Reallocating what was just freed is served from the queue: fast
     * (SLOB has no queue: slow, every one). */
    for (int i = 0; i < 10; i++)
        objs[i] = qslab_cache_alloc(c);
    CHECK(qslab_cache_stats(c, &s1) == 0);
    CHECK(s1.alloc - s2.alloc == 10);
    if (tf_slob(c))
        CHECKF(s1.alloc_slow - s2.alloc_slow == 10 && s1.alloc_fast == 0, "slob: alloc_slow moved by %lu, alloc_fast %lu",
               s1.alloc_slow - s2.alloc_slow, s1.alloc_fast);
    else
        CHECKF(s1.alloc_fast - s2.alloc_fast == 10, "alloc_fast moved by %lu", s1.alloc_fast - s2.alloc_fast);

    /* qslab_free() counts against the object's cache. */
    qslab_free(objs[0]);
    CHECK(qslab_cache_stats(c, &s2) == 0);
    CHECK(s2.free - s1.free == 1);
    for (int i = 1; i < 10; i++)
        qslab_cache_free(c, objs[i]);
    for (int i = N / 2; i < N; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_stats(c, &s2) == 0);
    CHECK(s2.active_objs == 0);
    CHECK(s2.alloc == s2.free);
    check_consistent(c, &s2, "after freeing everything");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Counters of exited threads are still counted. */
static qslab_cache *tc;
static void *thread_allocs(void *arg)
{
    void **objs = arg;
    for (int i = 0; i < 100; i++)
        objs[i] = qslab_cache_alloc(tc);
    for (int i = 0; i < 50; i++)
        qslab_cache_free(tc, objs[i]);
    return NULL;
}

static void test_threads_counted(void)
{
    tc = qslab_cache_create("t-stats-thr", 40, 0, 0, NULL);
    CHECK(tc != NULL);
    if (!tc)
        return;
    static void *objs[4][100];
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, thread_allocs, objs[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(tc, &st) == 0);
    CHECKF(st.alloc == 400 && st.free == 200 && st.active_objs == 200, "alloc %lu free %lu active %lu", st.alloc,
           st.free, st.active_objs);
    check_consistent(tc, &st, "after threads");
    for (int i = 0; i < 4; i++)
        for (int k = 50; k < 100; k++)
            qslab_cache_free(tc, objs[i][k]);
    CHECK(qslab_cache_stats(tc, &st) == 0);
    CHECKF(st.alloc == 400 && st.free == 400 && st.active_objs == 0, "alloc %lu free %lu active %lu", st.alloc,
           st.free, st.active_objs);
    CHECK(qslab_cache_destroy(tc) == 0);
}

/* Frees on the fast path are not counted one by one but derived from the
 * queue length and the slow paths' moves (qs_queue_nr_set): check the
 * derivation stays exact through flushes, remote frees, claims, refills and
 * queue reuse by a later thread. */
#define DN 3000
static void *remote_frees(void *arg)
{
    void **objs = arg;
    for (int i = 0; i < DN; i += 2)
        qslab_cache_free(tc, objs[i]);
    return NULL;
}

static void *owner_thread(void *arg)
{
    (void)arg;
    static void *objs[DN];
    struct qslab_cache_stats st, st0;
    qslab_cache_stats(tc, &st0);
    for (int i = 0; i < DN; i++)
        objs[i] = qslab_cache_alloc(tc);
    pthread_t t;
    pthread_create(&t, NULL, remote_frees, objs); /* even ones: to our inbox */
    pthread_join(t, NULL);
    for (int i = 1; i < DN; i += 2) /* odd ones: our queue, many flushes */
        qslab_cache_free(tc, objs[i]);
    qslab_cache_stats(tc, &st);
    CHECKF(st.free - st0.free == DN && st.active_objs == 0, "after frees: free %lu active %lu", st.free - st0.free,
           st.active_objs);
    check_consistent(tc, &st, "after frees");
    for (int round = 0; round < 3; round++) { /* claims the inbox, refills */
        for (int i = 0; i < DN; i++)
            objs[i] = qslab_cache_alloc(tc);
        for (int i = DN - 1; i >= 0; i--)
            qslab_cache_free(tc, objs[i]);
    }
    qslab_cache_stats(tc, &st);
    CHECKF(st.alloc - st0.alloc == 4 * DN && st.free - st0.free == 4 * DN && st.active_objs == 0,
           "after rounds: alloc %lu free %lu active %lu", st.alloc - st0.alloc, st.free - st0.free, st.active_objs);
    check_consistent(tc, &st, "after rounds");
    return NULL;
}

static void test_derived_free_count(void)
{
    tc = qslab_cache_create("t-stats-derived", 72, 0, 0, NULL);
    CHECK(tc != NULL);
    if (!tc)
        return;
    CHECK(qslab_tune("t-stats-derived", "hiwater", "256") == 0);
    CHECK(qslab_tune("t-stats-derived", "freebatch", "32") == 0);
    for (int k = 0; k < 2; k++) { /* the second thread reuses the first's queue */
        pthread_t t;
        pthread_create(&t, NULL, owner_thread, NULL);
        pthread_join(t, NULL);
        struct qslab_cache_stats st;
        qslab_cache_stats(tc, &st);
        CHECKF(st.alloc == (unsigned long)(k + 1) * 4 * DN && st.free == st.alloc && st.active_objs == 0,
               "after thread %d: alloc %lu free %lu active %lu", k, st.alloc, st.free, st.active_objs);
    }
    CHECK(qslab_cache_destroy(tc) == 0);
}

int main(void)
{
    test_deltas();
    test_threads_counted();
    test_derived_free_count();
    return tu_done();
}
