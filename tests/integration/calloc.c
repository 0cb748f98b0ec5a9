/*
 * qslab_calloc returns zeroed memory on every path, though it clears only
 * memory that may hold old data (kmalloc.c: objects born into a queue from
 * memory the OS zeroed carry QS_FRESH_WORD and are not cleared):
 *   - fresh slabs, small and one-object ones, and a class's later births;
 *   - recycled objects: freed after the program wrote them, from the queue,
 *     from their slab's list, from another thread's frees;
 *   - slabs reused warm from another cache (dirty memory, never "fresh");
 *   - memory given back and taken again (zero again);
 *   - large blocks, and a large block grown by realloc then freed;
 * and a 9 MiB calloc of fresh memory leaves its pages untouched under
 * every front end (mincore: only its first page, where its word was, is
 * resident), and small callocs from fresh slabs leave theirs untouched
 * under SLQB, SLUB and SLAB (born bare).
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* 1 + the offset of p's first non-zero byte in n, 0 if none: compared a
 * page at a time (the large blocks are 20 to 80 MiB), bytes only where a
 * page differs */
static size_t nonzero(const void *p, size_t n)
{
    static const unsigned char zero[4096];
    const unsigned char *b = p;
    for (size_t at = 0; at < n; at += sizeof zero) {
        size_t k = n - at < sizeof zero ? n - at : sizeof zero;
        if (memcmp(b + at, zero, k) == 0)
            continue;
        for (size_t i = at; i < at + k; i++)
            if (b[i])
                return i + 1;
    }
    return 0;
}

#define CHECK_ZERO(p, n, what)                                                                     \
    do {                                                                                           \
        size_t at_ = nonzero((p), (n));                                                           \
        CHECKF(at_ == 0, "%s: calloc(%zu) byte %zu is not zero", (what), (size_t)(n), at_ - 1);     \
    } while (0)

/* n callocs of `size` bytes into v, each checked zero; then all freed */
static void calloc_zero_free(void **v, int n, size_t size, const char *what)
{
    for (int i = 0; i < n; i++) {
        v[i] = qslab_calloc(1, size);
        CHECK(v[i] != NULL);
        if (v[i])
            CHECK_ZERO(v[i], size, what);
    }
    for (int i = 0; i < n; i++)
        qslab_free(v[i]);
}

/* Many callocs of each size: the first from fresh slabs, the rest of the
 * run from the births that follow. */
static void test_fresh(void)
{
    static const size_t sizes[] = {16, 48, 64, 100, 256, 1000, 1025, 4096, 5000, 20000, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        enum { N = 300 };
        static void *v[N];
        calloc_zero_free(v, N, sizes[k], "fresh");
    }
}

/* Objects written then freed come back zeroed: straight from the queue
 * (LIFO), and after a flush from their slabs' lists. */
static void test_recycled(void)
{
    static const size_t sizes[] = {16, 64, 200, 1024, 3000, 9000, 100000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        enum { N = 2000 };
        static void *v[N];
        size_t n = sizes[k];
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < N; i++) {
                v[i] = qslab_malloc(n);
                CHECK(v[i] != NULL);
                if (v[i])
                    memset(v[i], 0xa5, n);
            }
            for (int i = 0; i < N; i++)
                qslab_free(v[i]);
            if (round) /* the queues' objects home: the next come from slab lists */
                qslab_trim();
            for (int i = 0; i < N; i++) {
                v[i] = qslab_calloc(n, 1);
                CHECK(v[i] != NULL);
                if (v[i])
                    CHECK_ZERO(v[i], n, round ? "recycled from slabs" : "recycled");
            }
            for (int i = 0; i < N; i++)
                qslab_free(v[i]);
        }
    }
}

/* Freed by another thread, back through remote batches and inboxes. */
struct batch {
    void **v;
    int n;
};
static void *free_all(void *arg)
{
    struct batch *b = arg;
    for (int i = 0; i < b->n; i++)
        qslab_free(b->v[i]);
    return NULL;
}

static void test_remote(void)
{
    enum { N = 5000 };
    static void *v[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            v[i] = qslab_malloc(96);
            CHECK(v[i] != NULL);
            if (v[i])
                memset(v[i], 0x5a, 96);
        }
        struct batch b = {v, N};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_all, &b) == 0);
        pthread_join(t, NULL);
        calloc_zero_free(v, N, 96, "freed by another thread");
    }
}

/* A cache's slabs, written all over, destroyed: its slots stay warm in
 * the page layer and the next slabs of that order (a kmalloc class's)
 * take them, dirty. */
static void test_warm(void)
{
    enum { N = 256 };
    static void *v[N];
    /* 4 KiB objects: order-3 slabs, as kmalloc-4096's */
    for (int round = 0; round < 3; round++) {
        qslab_cache *c = qslab_cache_create("t-calloc-dirty", 4096, 0, 0, NULL);
        CHECK(c != NULL);
        if (!c)
            return;
        for (int i = 0; i < N; i++) {
            v[i] = qslab_cache_alloc(c);
            CHECK(v[i] != NULL);
            if (v[i])
                memset(v[i], 0x3c, 4096);
        }
        for (int i = 0; i < N; i++)
            qslab_cache_free(c, v[i]);
        CHECK(qslab_cache_destroy(c) == 0);
        for (int i = 0; i < N; i++) {
            v[i] = qslab_calloc(1, 4000);
            CHECK(v[i] != NULL);
            if (v[i])
                CHECK_ZERO(v[i], 4000, "from a destroyed cache's slabs");
        }
        for (int i = 0; i < N; i++) {
            memset(v[i], 0x77, 4000); /* and dirty again for the next round */
            qslab_free(v[i]);
        }
        qslab_trim(); /* given back: zero again */
        calloc_zero_free(v, N, 4000, "after qslab_trim");
    }
}

/* Large blocks, and one grown by realloc (mremap) then freed. */
static void test_large(void)
{
    unsigned char *p = qslab_calloc(40, MIB);
    CHECK(p != NULL);
    if (p) {
        CHECK_ZERO(p, 40 * MIB, "large");
        memset(p, 0xee, 40 * MIB);
        p = qslab_realloc(p, 80 * MIB);
        CHECK(p != NULL);
        qslab_free(p);
    }
    p = qslab_calloc(80, MIB);
    CHECK(p != NULL);
    if (p)
        CHECK_ZERO(p, 80 * MIB, "large, after a grown one was freed");
    qslab_free(p);
    /* a class block grown into a large one by realloc */
    p = qslab_malloc(20 * MIB);
    CHECK(p != NULL);
    if (p) {
        memset(p, 0x11, 20 * MIB);
        p = qslab_realloc(p, 36 * MIB);
        CHECK(p != NULL);
        qslab_free(p);
    }
    p = qslab_calloc(20, MIB);
    CHECK(p != NULL);
    if (p)
        CHECK_ZERO(p, 20 * MIB, "a class block after a realloc'ed one was freed");
    qslab_free(p);
}

/* 9 MiB from memory never touched: only the page with its word is
 * resident after the calloc, under every front end (not debugging); the
 * same block written, freed and taken again reads zero. */
static void test_untouched(void)
{
    qslab_cache *k = qslab_cache_find("kmalloc-9437184");
    CHECK(k != NULL);
    if (!k || getenv("QSLAB_DEBUG") || getenv("QSLAB_GUARD_SAMPLE")) {
        tf_note("integration_calloc", k, "calloc without touching fresh memory");
        return;
    }
    size_t n = 9 * MIB, pages = n / 4096;
    unsigned char *p = qslab_calloc(1, n);
    CHECK(p != NULL);
    if (!p)
        return;
    static unsigned char vec[9 * 256];
    CHECK(mincore(p, n, vec) == 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    CHECKF(resident <= 2, "%zu of %zu pages of a fresh 9 MiB calloc resident", resident, pages);
    CHECK_ZERO(p, n, "9 MiB fresh");
    memset(p, 0x6b, n);
    qslab_free(p);
    p = qslab_calloc(n, 1);
    CHECK(p != NULL);
    if (p)
        CHECK_ZERO(p, n, "9 MiB written and freed");
    qslab_free(p);
}

/* Small callocs of a class nothing used yet, from fresh slabs: the
 * blocks are born bare (core/slab.c qs_slab_born_bare), so their pages
 * stay untouched (mincore) under the front ends that do so (all but SLOB);
 * mallocs in between take the same slabs' next objects the usual way, and
 * every block reads zero, before and after its neighbours are written;
 * freed and calloc'ed again, they come back cleared. */
static size_t resident_pages(void *const *v, int n)
{
    size_t res = 0;
    uintptr_t last = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t pg = (uintptr_t)v[i] & ~(uintptr_t)4095;
        if (pg == last)
            continue;
        last = pg;
        unsigned char vec;
        if (mincore((void *)pg, 4096, &vec) == 0)
            res += vec & 1;
    }
    return res;
}

static void test_bare(void)
{
    enum { N = 20000, SZ = 112 };
    static void *v[N], *m[N / 100];
    qslab_cache *k = qslab_cache_find("kmalloc-112");
    const char *f = tf_kmalloc_front();
    int bare = strcmp(f, "slob") != 0 && !getenv("QSLAB_DEBUG") &&
               !getenv("QSLAB_GUARD_SAMPLE") && !getenv("QSLAB_TUNE");
    CHECK(k != NULL);
    for (int i = 0; i < N / 2; i++) {
        v[i] = qslab_calloc(1, SZ);
        CHECK(v[i] != NULL);
        if (!v[i])
            return;
    }
    size_t pages = (size_t)N / 2 * SZ / 4096, res = resident_pages(v, N / 2);
    if (bare)
        CHECKF(res <= pages / 10, "%zu of about %zu pages of %d small fresh callocs resident", res, pages,
               N / 2);
    else
        tf_note("integration_calloc", NULL, "small fresh callocs born bare (not SLOB's)");
    for (int i = N / 2; i < N; i++) {
        v[i] = qslab_calloc(1, SZ);
        CHECK(v[i] != NULL);
        if (!v[i])
            return;
        if (i % 50 == 25) /* a malloc between: the slab's next objects born as usual */
            m[(i - N / 2) / 50] = qslab_malloc(SZ);
    }
    for (int i = 0; i < N; i++)
        CHECK_ZERO(v[i], SZ, "born bare");
    for (int i = 0; i < N / 100; i++) {
        CHECK(m[i] != NULL);
        if (m[i])
            memset(m[i], 0xc3, SZ);
    }
    for (int i = 0; i < N; i += 2)
        memset(v[i], 0x99, SZ);
    for (int i = 1; i < N; i += 2)
        CHECK_ZERO(v[i], SZ, "born bare, its neighbours written");
    for (int i = 0; i < N; i++)
        qslab_free(v[i]);
    for (int i = 0; i < N / 100; i++)
        qslab_free(m[i]);
    calloc_zero_free(v, N, SZ, "born bare, written, freed");
}

int main(void)
{
    test_untouched(); /* first: the process has touched no 9 MiB slab yet */
    test_bare();      /* and no 112-byte block */
    test_fresh();
    test_recycled();
    test_remote();
    test_warm();
    test_large();
    /* overflow: n * size past SIZE_MAX is refused */
    errno = 0;
    CHECK(qslab_calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    return tu_done();
}
