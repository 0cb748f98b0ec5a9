/*
 * The cached-memory cap (docs/design.md, "The cached-memory cap") under
 * concurrency: THREADS threads (more than the CPUs) fill and empty CACHES
 * caches of 64 bytes to 16 KiB, each its own objects and the objects of the
 * thread before it (remote frees), while the main thread moves the cap
 * between 256 KiB, 4 MiB and none, and back.  Keeps race with walks (which
 * only try qs_global and the node locks) and with the cap's changes.  At the
 * end, with a cap of 1 MiB set again and every thread gone,
 * qslab_cached_stats says that what is kept is within the cap, a keep's
 * slabs and the stashes kept while there was none; walks and give-backs
 * happened; every object kept its stamp; every cache validates.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <qslab.h>

#include "../testutil.h"

#define THREADS 4
#define CACHES 8
#define ROUNDS TU_SCALE(40, 8)
#define BATCH 2000

static qslab_cache *caches[CACHES];
static size_t sizes[CACHES];
static void *handoff[THREADS][BATCH]; /* thread t's objects for thread t + 1 to free */
static int handoff_n[THREADS], handoff_c[THREADS];
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static int running = THREADS;

static void stamp(void *p, size_t n, unsigned v)
{
    memset(p, (int)(v & 0xff), n < 64 ? n : 64);
}

static bool stamped(const void *p, size_t n, unsigned v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < (n < 64 ? n : 64); i++)
        if (b[i] != (unsigned char)(v & 0xff))
            return false;
    return true;
}

static void *work(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t seed = tu_seed((uint64_t)me + 101);
    static __thread void *objs[BATCH];
    for (int r = 0; r < ROUNDS; r++) {
        int c = (int)(tu_rand(&seed) % CACHES);
        int n = 1 + (int)(tu_rand(&seed) % BATCH);
        for (int i = 0; i < n; i++) {
            objs[i] = qslab_cache_alloc(caches[c]);
            if (!objs[i]) {
                CHECKF(0, "cache %d: allocation %d failed", c, i);
                n = i;
                break;
            }
            stamp(objs[i], sizes[c], (unsigned)(c + me));
        }
        /* half freed here, half handed to the next thread */
        int keep = n / 2;
        for (int i = keep; i < n; i++) {
            if (!stamped(objs[i], sizes[c], (unsigned)(c + me)))
                tu_fail("cache %d: an object lost its stamp", c);
            qslab_cache_free(caches[c], objs[i]);
        }
        int next = (me + 1) % THREADS;
        pthread_mutex_lock(&handoff_lock);
        for (int i = 0; i < handoff_n[next]; i++)
            qslab_cache_free(caches[handoff_c[next]], handoff[next][i]);
        memcpy(handoff[next], objs, (size_t)keep * sizeof(void *));
        handoff_n[next] = keep;
        handoff_c[next] = c;
        pthread_mutex_unlock(&handoff_lock);
    }
    __atomic_sub_fetch(&running, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    for (int i = 0; i < CACHES; i++) {
        char name[32];
        snprintf(name, sizeof name, "t-cap-%d", i);
        sizes[i] = (size_t)64 << (i % 9);
        CHECK((caches[i] = qslab_cache_create(name, sizes[i], 0, 0, NULL)) != NULL);
        CHECK(qslab_tune(name, "empty_decay_ms", "600000") == 0);
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, work, (void *)(intptr_t)t) == 0);
    static const char *const caps[] = {"262144", "4194304", "0", "1048576"};
    for (unsigned k = 0; __atomic_load_n(&running, __ATOMIC_ACQUIRE) > 0; k++) {
        CHECK(qslab_tune("*", "cached_max", caps[k % 4]) == 0);
        tu_sleep_ms(2);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < handoff_n[t]; i++)
            qslab_cache_free(caches[handoff_c[t]], handoff[t][i]);
    CHECK(qslab_tune("*", "cached_max", "1048576") == 0); /* walks now: no thread keeps */
    struct qslab_cached_stats st;
    qslab_cached_stats(&st);
    CHECKF(st.max == 1048576, "cap %lu", st.max);
    /* stashes kept while there was no cap stay their owners' until the
     * purger takes them idle: within what the owners have granted */
    struct qslab_budget_stats bs;
    qslab_budget_stats(&bs);
    CHECKF(st.cached <= st.max + (512ul << 10) + bs.used, "%lu bytes kept with a cap of %lu (owners %lu)",
           st.cached, st.max, bs.used);
    /* SLOB's pages are bounded by its own keep (half the cap a kind), not
     * by the walks: its FIFOs hold its big objects' slabs only */
    bool slob = strcmp(qslab_cache_front(caches[0]), "slob") == 0;
    CHECKF(st.walks > 0 && (slob || (st.cuts > 0 && st.cut_bytes > 0)), "walks %lu, cuts %lu, bytes %lu",
           st.walks, st.cuts, st.cut_bytes);
    for (int i = 0; i < CACHES; i++)
        CHECKF(qslab_cache_validate(caches[i]) == 0, "cache %d validates", i);
    for (int i = 0; i < CACHES; i++)
        CHECK(qslab_cache_destroy(caches[i]) == 0);
    return tu_done();
}
