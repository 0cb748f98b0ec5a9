/*
 * kmalloc size classes (193, kmalloc.c): the kmalloc-<bytes> caches exist, every qslab_malloc
 * size is served by its class cache (usable size = class size, the cache's
 * counters move by exactly one), and sizes over 32 MiB are mapped directly.
 * Under the SLOB front end a request that fits a page or a run keeps its
 * own size (rounded to 16n + 8 usable bytes), not its class's; the class
 * cache's counters still move, and larger requests come from its slabs.
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#define MAX_CLASS ((size_t)32 << 20)

static size_t classes[200];
static int nclasses;

/* 8, then 16 bytes apart up to 128, then eight per power of two,
 * thirty-two from 1 KiB to 2 KiB, sixteen from 2 KiB to 8 KiB. */
static void build_classes(void)
{
    static const size_t small[] = {8, 16, 32, 48, 64, 80, 96, 112, 128};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        classes[nclasses++] = small[i];
    for (size_t p = 128; p < MAX_CLASS; p *= 2) {
        size_t n = p >= 1024 && p < 2048 ? 32 : p >= 2048 && p < 8192 ? 16 : 8;
        for (size_t e = 1; e <= n; e++)
            classes[nclasses++] = p + e * (p / n);
    }
}

static qslab_cache *class_cache(size_t size)
{
    char name[40];
    snprintf(name, sizeof name, "kmalloc-%zu", size);
    return qslab_cache_find(name);
}

static void test_caches_exist(void)
{
    for (int i = 0; i < nclasses; i++) {
        char name[40];
        snprintf(name, sizeof name, "kmalloc-%zu", classes[i]);
        qslab_cache *c = qslab_cache_find(name);
        CHECKF(c != NULL, "no cache %s", name);
        if (!c)
            continue;
        CHECKF(strcmp(qslab_cache_name(c), name) == 0, "%s is named %s", name, qslab_cache_name(c));
        CHECKF(qslab_cache_object_size(c) == classes[i], "%s object size %zu", name, qslab_cache_object_size(c));
    }
    CHECK(qslab_cache_find("kmalloc-96") != NULL);
    CHECK(qslab_cache_find("kmalloc-192") != NULL);
    CHECK(qslab_cache_find("kmalloc-8192") != NULL);
    CHECK(qslab_cache_find("kmalloc-33554432") != NULL);
    CHECK(qslab_cache_find("kmalloc-5120") != NULL); /* the seeds' 4,696-byte skb data */
    CHECK(qslab_cache_find("kmalloc-1056") != NULL); /* a 1,025-byte request's block */
    CHECK(qslab_cache_find("kmalloc-1312") != NULL); /* SQLite's 1,296-byte page buffers' */
    CHECK(qslab_cache_find("kmalloc-1280") != NULL);
    CHECK(qslab_cache_find("kmalloc-576") != NULL);  /* a 516-byte one's */
    CHECK(qslab_cache_find("kmalloc-18874368") != NULL); /* 16 MiB + 1's: 18 MiB */
    CHECK(nclasses == 193);
    CHECK(qslab_cache_find("kmalloc-4") == NULL);
    CHECK(qslab_cache_find("kmalloc-40") == NULL);
    CHECK(qslab_cache_find("kmalloc-136") == NULL);
    CHECK(qslab_cache_find("kmalloc-8k") == NULL);
    CHECK(qslab_cache_find("kmalloc-67108864") == NULL);
    CHECK(qslab_cache_find("") == NULL);
}

/* The usable size of malloc(size), class cls, is right: the class's size,
 * or for SLOB the request's own size where it fits a page or a run (either
 * one near a run's largest block, where the header decides). */
static int usable_ok(size_t us, size_t size, size_t cls)
{
    size_t pow2 = 1;
    while (pow2 < cls)
        pow2 *= 2;
    /* a block alone in its slab: the slab's room, up to the power of two
     * (not under SLAB: its index arrays may follow the objects; under SLOB,
     * a block too big for its runs) */
    if (cls >= 16384 && us > cls && us <= pow2 && (!tf_kmalloc_slob() || size > TF_SLOB_RUN_MAX) &&
        !tf_kmalloc_slab())
        return 1;
    if (!tf_kmalloc_slob() || size > TF_SLOB_RUN_MAX)
        return us == cls;
    if (size <= TF_SLOB_RUN_MAX - 64)
        return tf_slob_usable_ok(us, size);
    return us == cls || tf_slob_usable_ok(us, size);
}

/* One allocation of `size`, expected in class `cls`. */
static void check_size(size_t size, size_t cls)
{
    qslab_cache *c = class_cache(cls);
    if (!c)
        return; /* reported by test_caches_exist */
    struct qslab_cache_stats a, b, d;
    qslab_cache_stats(c, &a);
    unsigned char *p = qslab_malloc(size);
    qslab_cache_stats(c, &b);
    CHECKF(p != NULL, "qslab_malloc(%zu)", size);
    if (!p)
        return;
    size_t us = qslab_usable_size(p);
    CHECKF(usable_ok(us, size, cls), "usable_size(malloc(%zu)) = %zu, class %zu (%s front)", size, us, cls,
           tf_kmalloc_front());
    CHECKF(b.alloc - a.alloc == 1, "malloc(%zu): kmalloc-%zu alloc moved by %lu", size, cls, b.alloc - a.alloc);
    CHECKF(b.active_objs - a.active_objs == 1, "malloc(%zu): kmalloc-%zu active moved by %lu", size, cls,
           b.active_objs - a.active_objs);
    p[0] = 1;
    p[us - 1] = 2; /* the whole usable size is ours */
    if (size > 1)
        p[size / 2] = 3;
    qslab_free(p);
    qslab_cache_stats(c, &d);
    CHECKF(d.free - b.free == 1, "free of malloc(%zu): kmalloc-%zu free moved by %lu", size, cls, d.free - b.free);
    CHECKF(d.active_objs == a.active_objs, "free of malloc(%zu): active %lu, was %lu", size, d.active_objs,
           a.active_objs);
}

static void test_class_of_each_size(void)
{
    size_t prev = 0;
    for (int i = 0; i < nclasses; i++) {
        size_t cls = classes[i];
        check_size(prev + 1, cls);
        if (cls - prev > 2)
            check_size(prev + (cls - prev) / 2, cls);
        if (cls - 1 > prev)
            check_size(cls - 1, cls);
        check_size(cls, cls);
        prev = cls;
    }
    /* Every size up to 1100, quickly, for usable size only. */
    int bad = 0;
    for (size_t s = 1; s <= 1100; s++) {
        size_t cls = 0;
        for (int i = 0; i < nclasses && !cls; i++)
            if (classes[i] >= s)
                cls = classes[i];
        void *p = qslab_malloc(s);
        if (!p || !usable_ok(qslab_usable_size(p), s, cls))
            bad++;
        qslab_free(p);
    }
    CHECKF(bad == 0, "%d sizes in 1..1100 with the wrong usable size", bad);

    /* qslab_malloc(0) comes from some cache and is freeable. */
    void *z = qslab_malloc(0);
    CHECK(z != NULL);
    qslab_free(z);
}

static void test_large(void)
{
    static const size_t sizes[] = {MAX_CLASS + 1, MAX_CLASS + 4096, (size_t)50 << 20, (size_t)100 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        struct qslab_large_stats a, b, c;
        qslab_large_stats(&a);
        unsigned char *p = qslab_malloc(n);
        qslab_large_stats(&b);
        CHECKF(p != NULL, "qslab_malloc(%zu)", n);
        if (!p)
            continue;
        CHECKF(qslab_usable_size(p) >= n, "usable %zu < %zu", qslab_usable_size(p), n);
        CHECK(b.alloc - a.alloc == 1);
        CHECK(b.live - a.live == 1);
        CHECKF(b.live_bytes - a.live_bytes >= n, "live_bytes moved by %zu for %zu", b.live_bytes - a.live_bytes, n);
        p[0] = 1;
        p[n - 1] = 2;
        qslab_free(p);
        qslab_large_stats(&c);
        CHECK(c.free - b.free == 1);
        CHECK(c.live == a.live);
        CHECK(c.live_bytes == a.live_bytes);
    }
}

int main(void)
{
    build_classes();
    test_caches_exist();
    test_class_of_each_size();
    test_large();
    return tu_done();
}
