/*
 * Constructors: run once per object when its slab is created; an object freed
 * in its constructed state comes back in that state, in the same thread and
 * after crossing threads.  Under the SLOB front end nothing is kept
 * constructed: the constructor runs at every allocation instead (checked
 * where the cache is SLOB's), and objects still come out constructed.
 */
#include <pthread.h>
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#define NTHREADS 8
#define RING 512

static const size_t sizes[] = {8, 24, 200, 1000};
static size_t cur_size;
static unsigned long ctor_calls;

/* The constructed state: byte k of the object holds pattern(k). */
static inline unsigned char pattern(size_t k)
{
    return (unsigned char)(k * 7 + 3);
}

static void ctor(void *obj)
{
    unsigned char *b = obj;
    for (size_t k = 0; k < cur_size; k++)
        b[k] = pattern(k);
    __atomic_add_fetch(&ctor_calls, 1, __ATOMIC_RELAXED);
}

static int constructed(const void *obj, size_t size)
{
    const unsigned char *b = obj;
    for (size_t k = 0; k < size; k++)
        if (b[k] != pattern(k))
            return 0;
    return 1;
}

/* Use the object (scribble on it), then put it back in constructed state. */
static void use_and_restore(void *obj, size_t size, uint64_t tag)
{
    volatile unsigned char *b = obj; /* keep the scribble */
    for (size_t k = 0; k < size; k++)
        b[k] = (unsigned char)(tag >> (k % 8 * 8));
    for (size_t k = 0; k < size; k++)
        b[k] = pattern(k);
}

/* ---- single thread ---- */

/* Over the cache's life (ctor_calls is reset at creation): one call per
 * object born.  Slabs bear their objects as they are needed (lazy birth),
 * so at most every slot of every slab made; exactly the objects in slabs
 * now (num_objs) when no slab was given back. */
static void check_ctor_calls(qslab_cache *c)
{
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    unsigned long calls = __atomic_load_n(&ctor_calls, __ATOMIC_RELAXED);
    if (tf_slob(c)) { /* SLOB: at every allocation, nothing kept constructed */
        CHECKF(calls >= st.alloc && st.alloc > 0, "%s (slob): %lu ctor calls for %lu allocations",
               qslab_cache_name(c), calls, st.alloc);
        return;
    }
    CHECKF(calls >= st.num_objs && calls <= st.new_slab * st.objs_per_slab,
           "%s: %lu ctor calls, %lu objects in %lu slabs of %u", qslab_cache_name(c), calls, st.num_objs,
           st.new_slab, st.objs_per_slab);
    if (st.free_slab == 0)
        CHECKF(calls == st.num_objs, "%s: %lu ctor calls for %lu objects born", qslab_cache_name(c), calls,
               st.num_objs);
}

static void test_single(qslab_cache *c, size_t size)
{
    enum { N = 700 };
    static void *objs[N];
    int bad = 0;
    for (int round = 0; round < 20; round++) {
        int n = 1 + (round * 97) % N;
        for (int i = 0; i < n; i++) {
            objs[i] = qslab_cache_alloc(c);
            if (!objs[i] || !constructed(objs[i], size))
                bad++;
        }
        for (int i = 0; i < n; i++)
            if (objs[i]) {
                use_and_restore(objs[i], size, (uint64_t)i * 0x100000001ULL);
                qslab_cache_free(c, objs[i]);
            }
    }
    CHECKF(bad == 0, "size %zu: %d objects not in constructed state (or NULL)", size, bad);

    check_ctor_calls(c);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    if (!tf_slob(c)) /* SLQB keeps freed objects constructed */
        CHECKF(ctor_calls < st.alloc, "size %zu: ctor ran %lu times for %lu allocations", size, ctor_calls, st.alloc);
}

/* ---- threads: objects cross threads through a ring ---- */

static qslab_cache *tc;
static void *ring[RING];
static unsigned long bad_mt;

static void *worker(void *arg)
{
    uint64_t seed = tu_seed((uint64_t)(uintptr_t)arg + 1);
    int iters = TU_SCALE(40000, 8);
    for (int i = 0; i < iters; i++) {
        void *p = qslab_cache_alloc(tc);
        if (!p || !constructed(p, cur_size)) {
            __atomic_add_fetch(&bad_mt, 1, __ATOMIC_RELAXED);
            if (!p)
                continue;
        }
        use_and_restore(p, cur_size, tu_rand(&seed));
        void *old = __atomic_exchange_n(&ring[tu_rand(&seed) % RING], p, __ATOMIC_ACQ_REL);
        if (old) {
            if (!constructed(old, cur_size))
                __atomic_add_fetch(&bad_mt, 1, __ATOMIC_RELAXED);
            qslab_cache_free(tc, old);
        }
    }
    return NULL;
}

static void test_threads(qslab_cache *c)
{
    tc = c;
    memset(ring, 0, sizeof ring);
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < RING; i++)
        if (ring[i]) {
            if (!constructed(ring[i], cur_size))
                bad_mt++;
            qslab_cache_free(c, ring[i]);
        }
    CHECKF(bad_mt == 0, "size %zu: %lu objects not in constructed state across threads", cur_size, bad_mt);
    bad_mt = 0;

    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECKF(st.active_objs == 0, "active_objs %lu", st.active_objs);
    check_ctor_calls(c);
}

int main(void)
{
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cur_size = sizes[i];
        char name[32];
        snprintf(name, sizeof name, "t-ctor-%zu", cur_size);
        ctor_calls = 0;
        qslab_cache *c = qslab_cache_create(name, cur_size, 0, 0, ctor);
        CHECK(c != NULL);
        if (!c)
            continue;
        test_single(c, cur_size);
        test_threads(c);
        CHECK(qslab_cache_destroy(c) == 0);

        /* Same with cache-line alignment. */
        snprintf(name, sizeof name, "t-ctor-hw-%zu", cur_size);
        ctor_calls = 0;
        c = qslab_cache_create(name, cur_size, 0, QSLAB_HWCACHE_ALIGN, ctor);
        CHECK(c != NULL);
        if (!c)
            continue;
        test_single(c, cur_size);
        CHECK(qslab_cache_destroy(c) == 0);
    }
    return tu_done();
}
