/*
 * qslab_cache_shrink: after everything is freed, the empty slabs go back to
 * the OS and the byte count says so; the cache works afterwards.  Under the
 * SLOB front end objects of up to 64 KiB live in pages and runs shared by
 * every cache (no slab of the cache): shrink gives back the arena's empty
 * pages, at most as many as the objects filled, and the cache's own slabs
 * of objects too big for a run.
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

/* Keep empty slabs until shrink: the background purger must not give them
 * back first (that would make the byte counts depend on timing). */
static void keep_empties(const char *cache)
{
    CHECKF(qslab_tune(cache, "empty_decay_ms", "600000") == 0, "tune %s empty_decay_ms: errno %d", cache, errno);
}

static void one_cache(const char *name, size_t size, int n)
{
    qslab_cache *c = qslab_cache_create(name, size, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    keep_empties(name);
    void **objs = malloc(sizeof(void *) * (size_t)n);
    /* SLOB page objects, or run objects (over 528 bytes) */
    int slob = tf_slob(c), in_pages = slob && size + 64 <= TF_SLOB_RUN_MAX;
    /* SLOB: a page object is its size in 8-byte units plus an 8-byte header,
     * up to 528 bytes, a page 511 units; a run object its size and an
     * 8-byte header in 16-byte units, a run of 256 KiB 16,357 (past its
     * lists' heads): whole objects per page, and the pages n of them fill
     * (all kept empty after the frees), one more for another's (a page the
     * library's own caches use) */
    int run = ((size + 7) / 8 + 1) * 8 > 528;
    size_t per_page = run ? 16357 / ((size + 8 + 15) / 16) : 511 / ((size + 7) / 8 + 1);
    size_t page = run ? (size_t)256 << 10 : 4096;
    size_t slob_bytes = in_pages ? (((size_t)n + per_page - 1) / per_page + 1) * page : 0;
    for (int round = 0; round < 2; round++) {
        if (slob)
            qslab_trim(); /* no empty SLOB page of earlier caches left to count */
        for (int i = 0; i < n; i++) {
            objs[i] = qslab_cache_alloc(c);
            if (objs[i])
                memset(objs[i], 0x77, size);
        }
        struct qslab_cache_stats full;
        qslab_cache_stats(c, &full);
        if (in_pages)
            CHECKF(full.num_slabs == 0 && full.num_objs == (unsigned long)n, "%s (slob): %lu slabs, %lu objects for %d",
                   name, full.num_slabs, full.num_objs, n);
        else
            CHECKF(full.num_slabs >= 2, "%s: %lu slabs for %d objects", name, full.num_slabs, n);
        for (int i = 0; i < n; i++)
            qslab_cache_free(c, objs[i]);

        size_t slab_bytes = (size_t)4096 << full.order;
        size_t got = qslab_cache_shrink(c);
        /* SLOB's empty pages are the arena's (decay 1 s, not this cache's
         * tunable): the purger may have given them back first */
        CHECKF(got > 0 || in_pages, "%s: shrink after freeing %d objects gave back nothing", name, n);
        CHECKF(got % 4096 == 0, "%s: shrink gave back %zu bytes, not whole pages", name, got);
        CHECKF(got <= full.num_slabs * slab_bytes + slob_bytes, "%s: gave back %zu bytes of %lu slabs of %zu%s", name,
               got, full.num_slabs, slab_bytes, in_pages ? " and SLOB pages" : "");

        struct qslab_cache_stats st;
        qslab_cache_stats(c, &st);
        CHECK(st.active_objs == 0);
        CHECKF(st.empty_slabs == 0, "%s: %lu empty slabs kept after shrink", name, st.empty_slabs);
        CHECKF(st.num_slabs == 0, "%s: %lu slabs left after shrink with nothing allocated", name, st.num_slabs);
        CHECKF(qslab_cache_shrink(c) == 0, "%s: a second shrink gave back more", name);
    }
    /* Usable afterwards. */
    void *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    qslab_cache_free(c, p);
    CHECK(qslab_cache_destroy(c) == 0);
    free(objs);
}

static void test_kmalloc(void)
{
    enum { N = 200 };
    void *p[N];
    keep_empties("kmalloc-4096");
    for (int i = 0; i < N; i++)
        p[i] = qslab_malloc(4000); /* kmalloc-4096 */
    for (int i = 0; i < N; i++)
        qslab_free(p[i]);
    qslab_cache *c = qslab_cache_find("kmalloc-4096");
    CHECK(c != NULL);
    if (c)
        CHECK(qslab_cache_shrink(c) > 0);
}

static void test_partial(void)
{
    /* With objects still live, shrink keeps their slabs. */
    qslab_cache *c = qslab_cache_create("t-shrink-part", 256, 0, 0, NULL);
    keep_empties("t-shrink-part");
    enum { N = 2000 };
    static void *objs[N];
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 1; i < N; i++)
        qslab_cache_free(c, objs[i]);
    qslab_cache_shrink(c);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECK(st.active_objs == 1);
    if (tf_slob(c)) /* a page object: in a shared SLOB page, no slab of the cache */
        CHECKF(st.num_slabs == 0 && st.num_objs == 1, "slob: %lu slabs, %lu objects for one live object",
               st.num_slabs, st.num_objs);
    else
        CHECKF(st.num_slabs == 1, "%lu slabs left for one live object", st.num_slabs);
    memset(objs[0], 1, 256); /* still ours */
    qslab_cache_free(c, objs[0]);
    CHECK(qslab_cache_shrink(c) > 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(void)
{
    one_cache("t-shrink-small", 32, 5000);
    one_cache("t-shrink-mid", 700, 600);
    one_cache("t-shrink-big", 20000, 40);
    test_kmalloc();
    test_partial();
    return tu_done();
}
