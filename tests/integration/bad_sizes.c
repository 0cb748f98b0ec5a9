/*
 * Bad sizes and alignments: what no block can be (SIZE_MAX, SIZE_MAX/2, just
 * over the largest mapping, an overflowing calloc) is NULL with ENOMEM;
 * what the caller got wrong (an alignment that is 0, not a power of two, or
 * over QSLAB_MAX_ALIGN; a cache of size 0, of a bad or absurd alignment, of
 * an absurd size) is NULL with EINVAL.  qslab_free_sized checks its size
 * against the object: right sizes free, wrong ones are reported (the fatal
 * handler's exact line) and leave the object alone.
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#define MIB ((size_t)1 << 20)
/* the largest block: 2^46 bytes of mapping, less the header's page */
#define LARGEST (((size_t)1 << 46) - 4096)

static void test_malloc(void)
{
    static const size_t huge[] = {SIZE_MAX,        SIZE_MAX - 4095,       SIZE_MAX / 2,
                                  SIZE_MAX / 2 + 1, (size_t)1 << 62,       (size_t)1 << 47,
                                  (size_t)1 << 46,  LARGEST + 1,           LARGEST + 4096};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        errno = 0;
        void *p = qslab_malloc(huge[i]);
        CHECKF(p == NULL && errno == ENOMEM, "qslab_malloc(%zu) = %p errno %d", huge[i], p, errno);
        errno = 0;
        p = qslab_malloc_node(huge[i], 0);
        CHECKF(p == NULL && errno == ENOMEM, "qslab_malloc_node(%zu, 0) = %p errno %d", huge[i], p, errno);
    }
    struct qslab_large_stats st;
    qslab_large_stats(&st);
    CHECKF(st.alloc == 0 && st.live == 0, "large: %lu allocated, %lu live after refusals", st.alloc, st.live);
}

static void test_calloc(void)
{
    static const size_t pairs[][2] = {
        {SIZE_MAX / 2 + 1, 2}, {2, SIZE_MAX / 2 + 1}, {(size_t)1 << 32, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX},  {SIZE_MAX, 2},         {3, SIZE_MAX / 3 + 1},
        /* no overflow, but no block can be that big */
        {1, LARGEST + 1},      {(size_t)1 << 23, (size_t)1 << 23},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = qslab_calloc(pairs[i][0], pairs[i][1]);
        CHECKF(p == NULL && errno == ENOMEM, "qslab_calloc(%zu, %zu) = %p errno %d", pairs[i][0], pairs[i][1], p,
               errno);
    }
    /* zero of anything is a block */
    void *p = qslab_calloc(0, SIZE_MAX);
    CHECK(p != NULL);
    qslab_free(p);
    p = qslab_calloc(SIZE_MAX, 0);
    CHECK(p != NULL);
    qslab_free(p);
}

static void test_realloc(void)
{
    static const size_t olds[] = {100, 40 * MIB};
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX / 2, LARGEST + 1};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
            unsigned char *p = qslab_malloc(olds[k]);
            CHECK(p != NULL);
            memset(p, 0x3c, 100);
            errno = 0;
            void *q = qslab_realloc(p, huge[i]);
            CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu bytes, %zu) = %p errno %d", olds[k], huge[i], q,
                   errno);
            int kept = qslab_usable_size(p) >= olds[k];
            for (int j = 0; j < 100; j++)
                kept &= p[j] == 0x3c;
            CHECKF(kept, "realloc(%zu bytes, %zu) failed but the block changed", olds[k], huge[i]);
            qslab_free(p);
        }
}

static void test_aligned(void)
{
    static const size_t bad[] = {0,
                                 3,
                                 24,
                                 48,
                                 100,
                                 4095,
                                 4097,
                                 ((size_t)1 << 21) + 4096,
                                 QSLAB_MAX_ALIGN - 1,
                                 QSLAB_MAX_ALIGN + 1,
                                 QSLAB_MAX_ALIGN * 2,
                                 (size_t)1 << 50,
                                 SIZE_MAX / 2 + 1,
                                 SIZE_MAX};
    static const size_t sizes[] = {1, 64, 5000, 40 * MIB, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            errno = 0;
            void *p = qslab_aligned_alloc(bad[i], sizes[j]);
            CHECKF(p == NULL && errno == EINVAL, "aligned_alloc(%zu, %zu) = %p errno %d, expected EINVAL", bad[i],
                   sizes[j], p, errno);
        }
    /* a good alignment with a size no block can have: ENOMEM */
    static const size_t good[] = {1, 8, 64, 4096, (size_t)1 << 22, (size_t)1 << 30};
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX / 2, LARGEST + 1, (size_t)1 << 47};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        for (size_t j = 0; j < sizeof huge / sizeof huge[0]; j++) {
            errno = 0;
            void *p = qslab_aligned_alloc(good[i], huge[j]);
            CHECKF(p == NULL && errno == ENOMEM, "aligned_alloc(%zu, %zu) = %p errno %d, expected ENOMEM", good[i],
                   huge[j], p, errno);
        }
    /* a large alignment within the maximum works */
    void *p = qslab_aligned_alloc((size_t)1 << 30, 100);
    CHECKF(p != NULL && ((uintptr_t)p & (((size_t)1 << 30) - 1)) == 0, "aligned_alloc(1 GiB, 100) = %p errno %d",
           p, errno);
    qslab_free(p);
}

static void ctor(void *obj)
{
    (void)obj;
}

static void test_cache_create(void)
{
    struct {
        const char *what;
        const char *name;
        size_t size, align;
        unsigned long flags;
        void (*ctor)(void *);
    } bad[] = {
        {"size 0", "t-bad", 0, 0, 0, NULL},
        {"align 3", "t-bad", 64, 3, 0, NULL},
        {"align 24", "t-bad", 64, 24, 0, NULL},
        {"align 100", "t-bad", 64, 100, 0, NULL},
        {"align 4 MiB (over 2 MiB)", "t-bad", 64, (size_t)4 << 20, 0, NULL},
        {"align 2^62", "t-bad", 64, (size_t)1 << 62, 0, NULL},
        {"align SIZE_MAX", "t-bad", 64, SIZE_MAX, 0, NULL},
        {"size SIZE_MAX", "t-bad", SIZE_MAX, 0, 0, NULL},
        {"size SIZE_MAX - 7", "t-bad", SIZE_MAX - 7, 0, 0, NULL},
        {"size SIZE_MAX/2", "t-bad", SIZE_MAX / 2, 0, 0, NULL},
        {"size 2^40", "t-bad", (size_t)1 << 40, 0, 0, NULL},
        {"size over the largest slab (64 MiB)", "t-bad", 64 * MIB + 1, 0, 0, NULL},
        {"64 MiB with a constructor's link word", "t-bad", 64 * MIB, 0, 0, ctor},
        {"NULL name", NULL, 64, 0, 0, NULL},
        {"unknown flag", "t-bad", 64, 0, 0x80000000UL, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        qslab_cache *c = qslab_cache_create(bad[i].name, bad[i].size, bad[i].align, bad[i].flags, bad[i].ctor);
        CHECKF(c == NULL && errno == EINVAL, "qslab_cache_create(%s) = %p errno %d, expected EINVAL", bad[i].what,
               (void *)c, errno);
        if (c)
            qslab_cache_destroy(c);
    }
    CHECK(qslab_cache_find("t-bad") == NULL);
    /* the edges that are fine */
    qslab_cache *c = qslab_cache_create("t-edge-64m", 64 * MIB, 0, 0, NULL);
    CHECK(c != NULL && qslab_cache_destroy(c) == 0);
    c = qslab_cache_create("t-edge-align", 100, (size_t)2 << 20, 0, NULL);
    CHECK(c != NULL && qslab_cache_destroy(c) == 0);
    c = qslab_cache_create("t-edge-1", 1, 1, 0, NULL);
    CHECK(c != NULL && qslab_cache_destroy(c) == 0);
}

/* ---- free_sized ---- */

static void capture(const char *msg)
{
    tu_fatal_capture(msg);
}

static unsigned long active_of(const char *cache)
{
    struct qslab_cache_stats st;
    qslab_cache *c = qslab_cache_find(cache);
    return c && qslab_cache_stats(c, &st) == 0 ? st.active_objs : ~0ul;
}

/* The kmalloc class of n bytes: its cache's name. */
static const char *class_name(size_t n, char buf[32])
{
    snprintf(buf, 32, "kmalloc-%zu", tu_kmalloc_class(n));
    return buf;
}

/* qslab_free_sized(p, size) must be reported with exactly `want` (the
 * handler's one line) and leave p allocated */
#define EXPECT_REPORT(p, size, ...) expect_report_at(__LINE__, p, size, __VA_ARGS__)
static void expect_report_at(int line, void *p, size_t size, const char *fmt, ...)
{
    char want[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    tu_capture_reset();
    qslab_free_sized(p, size);
    tu_check(tu_capture_calls() == 1 && strcmp(tu_fatal_msg, want) == 0, __FILE__, line, "free_sized reported",
             "%lu reports, \"%s\", expected \"%s\"", tu_capture_calls(), tu_fatal_msg, want);
    tu_check(qslab_usable_size(p) > 0, __FILE__, line, "object left alone", NULL);
    tu_capture_reset();
}

static void test_free_sized(void)
{
    qslab_set_fatal_handler(capture);
    int slob = tf_kmalloc_slob();
    char buf[32];

    /* right sizes: the size asked for, for classes from 8 bytes to 32 MiB */
    static const size_t right[] = {1, 7, 8, 9, 16, 17, 33, 64, 65, 100, 500, 1000, 3000, 4096, 5000, 20000,
                                   100000, MIB + 1, 20 * MIB, 32 * MIB};
    for (size_t i = 0; i < sizeof right / sizeof right[0]; i++) {
        size_t n = right[i];
        const char *cn = class_name(n, buf);
        CHECKF(qslab_cache_find(cn) != NULL, "no cache %s", cn);
        void *p = qslab_malloc(n);
        CHECK(p != NULL);
        unsigned long before = active_of(cn);
        tu_capture_reset();
        qslab_free_sized(p, n);
        CHECKF(tu_capture_calls() == 0, "free_sized(malloc(%zu), %zu) reported: \"%s\"", n, n, tu_fatal_msg);
        CHECKF(active_of(cn) == before - 1, "free_sized(malloc(%zu)) did not free (%s active %lu -> %lu)", n,
                   cn, before, active_of(cn));
    }
    /* a zero-size block: size 0 frees it, another size is reported */
    void *z = qslab_malloc(0);
    tu_capture_reset();
    qslab_free_sized(z, 0);
    CHECKF(tu_capture_calls() == 0, "free_sized(malloc(0), 0) reported: \"%s\"", tu_fatal_msg);
    z = qslab_malloc(0);
    qslab_free_sized(z, 8);
    tu_check_fatal("with size 8: the object is a zero-size block (size 0)");
    qslab_free(z);
    /* calloc's product, realloc's new size (kept in place or moved) */
    void *p = qslab_calloc(10, 10);
    tu_capture_reset();
    qslab_free_sized(p, 100);
    CHECK(tu_capture_calls() == 0);
    p = qslab_malloc(100);
    void *q = qslab_realloc(p, 70); /* kept: over half of its block */
    qslab_free_sized(q, 70);
    p = qslab_realloc(qslab_malloc(100), 3000); /* moved */
    qslab_free_sized(p, 3000);
    CHECKF(tu_capture_calls() == 0, "calloc/realloc sizes reported: \"%s\"", tu_fatal_msg);
    qslab_free_sized(NULL, 12345); /* nothing */
    CHECK(tu_capture_calls() == 0);

    /* a large block: its size, and sizes that map to the same range */
    struct qslab_large_stats a, b;
    qslab_large_stats(&a);
    p = qslab_malloc(40 * MIB);
    qslab_free_sized(p, 40 * MIB);
    p = qslab_malloc(40 * MIB);
    qslab_free_sized(p, 41 * MIB); /* the same mapping */
    p = qslab_realloc(qslab_malloc(40 * MIB), 30 * MIB); /* kept by realloc */
    qslab_free_sized(p, 30 * MIB);
    qslab_large_stats(&b);
    CHECKF(tu_capture_calls() == 0 && b.free == a.free + 3 && b.live == a.live,
           "large free_sized: %lu reports (\"%s\"), %lu freed", tu_capture_calls(), tu_fatal_msg, b.free - a.free);

    /* wrong sizes: too big and too small for the class */
    char addr[32];
    p = qslab_malloc(56);
    size_t u = qslab_usable_size(p);
    const char *cache = slob ? "slob-pages" : "kmalloc-64";
    size_t lo = u < 32 ? 0 : u / 2 + 1;
    if (!slob)
        CHECK(u == 64 && lo == 33); /* "(sizes 33..64)" */
    EXPECT_REPORT(p, 100, "qslab: free_sized of %s with size 100: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), cache, lo, u);
    EXPECT_REPORT(p, 10, "qslab: free_sized of %s with size 10: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), cache, lo, u);
    EXPECT_REPORT(p, SIZE_MAX, "qslab: free_sized of %s with size %zu: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), (size_t)SIZE_MAX, cache, lo, u);
    qslab_free_sized(p, 56); /* still allocated: freed now */
    CHECK(tu_capture_calls() == 0);

    p = qslab_malloc(3000);
    u = qslab_usable_size(p);
    cache = slob ? "slob-pages" : "kmalloc-3072";
    EXPECT_REPORT(p, 1000, "qslab: free_sized of %s with size 1000: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), cache, u / 2 + 1, u);
    EXPECT_REPORT(p, 3100, "qslab: free_sized of %s with size 3100: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), cache, u / 2 + 1, u);
    qslab_free_sized(p, 3000);

    p = qslab_malloc(200000); /* a class with slabs of its own, every front end */
    u = qslab_usable_size(p);
    EXPECT_REPORT(p, 50000, "qslab: free_sized of %s with size 50000: the object is in cache %s (sizes %zu..%zu)",
                  tu_addr(addr, p), class_name(200000, buf), u / 2 + 1, u);
    qslab_free_sized(p, 200000);

    /* a large block: 40 MiB maps 44 MiB less its header page; sizes over
     * 32 MiB must map the same, smaller ones be over half (realloc) */
    p = qslab_malloc(40 * MIB);
    u = qslab_usable_size(p);
    CHECK(u == 44 * MIB - 4096);
    EXPECT_REPORT(p, 50 * MIB,
                  "qslab: free_sized of %s with size %zu: the object is a large block of %zu bytes (sizes %zu..%zu, "
                  "or %zu..%zu after a realloc)",
                  tu_addr(addr, p), 50 * MIB, u, u - 4 * MIB + 1, u, u / 2 + 1, 32 * MIB);
    EXPECT_REPORT(p, 36 * MIB,
                  "qslab: free_sized of %s with size %zu: the object is a large block of %zu bytes (sizes %zu..%zu, "
                  "or %zu..%zu after a realloc)",
                  tu_addr(addr, p), 36 * MIB, u, u - 4 * MIB + 1, u, u / 2 + 1, 32 * MIB);
    EXPECT_REPORT(p, 100,
                  "qslab: free_sized of %s with size 100: the object is a large block of %zu bytes (sizes %zu..%zu, "
                  "or %zu..%zu after a realloc)",
                  tu_addr(addr, p), u, u - 4 * MIB + 1, u, u / 2 + 1, 32 * MIB);
    qslab_large_stats(&a);
    qslab_free_sized(p, 40 * MIB);
    qslab_large_stats(&b);
    CHECK(tu_capture_calls() == 0 && b.free == a.free + 1);
    /* a bigger block: one range */
    p = qslab_malloc(100 * MIB);
    u = qslab_usable_size(p);
    EXPECT_REPORT(p, 60 * MIB,
                  "qslab: free_sized of %s with size %zu: the object is a large block of %zu bytes (sizes %zu..%zu)",
                  tu_addr(addr, p), 60 * MIB, u, u - 4 * MIB + 1, u);
    qslab_free_sized(p, 100 * MIB);
    CHECK(tu_capture_calls() == 0);

    /* not qslab's: reported as qslab_free reports it */
    int local;
    tu_capture_reset();
    qslab_free_sized(&local, sizeof local);
    tu_check_fatal("invalid free", tu_addr(addr, &local), "not allocated by qslab");
    qslab_set_fatal_handler(NULL);
}

int main(void)
{
    test_malloc();
    test_calloc();
    test_realloc();
    test_aligned();
    test_cache_create();
    test_free_sized();
    return tu_done();
}
