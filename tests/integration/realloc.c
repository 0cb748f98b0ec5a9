/*
 * qslab_realloc: NULL acts as malloc, contents survive growth and shrinking
 * across classes and the large path, growth within the usable size keeps the
 * pointer, and a failed realloc leaves the block intact.  Under the SLOB
 * front end a kmalloc block keeps the request's size (rounded to 16n + 8),
 * not its class's: the usable sizes are checked against that.
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

static inline unsigned char byte_at(size_t i)
{
    return (unsigned char)((i * 131) ^ (i >> 9));
}

/* Every byte normally; every STEP-th byte under a sanitizer (the big blocks
 * are tens of MiB). */
#define STEP ((size_t)(TU_SANITIZED ? 29 : 1))

static size_t first_index(size_t from)
{
    return (from + STEP - 1) / STEP * STEP;
}

static void fill(unsigned char *p, size_t from, size_t to)
{
    for (size_t i = first_index(from); i < to; i += STEP)
        p[i] = byte_at(i);
}

/* First index in [0, n) that lost its content, or n. */
static size_t first_bad(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += STEP)
        if (p[i] != byte_at(i))
            return i;
    return n;
}

static void test_null(void)
{
    qslab_cache *c = qslab_cache_find("kmalloc-128");
    struct qslab_cache_stats a, b;
    if (c)
        qslab_cache_stats(c, &a);
    void *p = qslab_realloc(NULL, 120); /* kmalloc-128 */
    CHECK(p != NULL);
    if (tf_kmalloc_slob())
        CHECKF(tf_slob_usable_ok(qslab_usable_size(p), 120), "slob: usable %zu for 120", qslab_usable_size(p));
    else
        CHECK(qslab_usable_size(p) == 128);
    if (c) {
        qslab_cache_stats(c, &b);
        CHECK(b.alloc - a.alloc == 1);
    }
    qslab_free(p);

    void *big = qslab_realloc(NULL, (size_t)40 << 20);
    CHECK(big != NULL);
    qslab_free(big);
}

static void test_grow_and_shrink(void)
{
    static const size_t steps[] = {1,
                                   8,
                                   9,
                                   33,
                                   96,
                                   97,
                                   150,
                                   250,
                                   1000,
                                   5000,
                                   70000,
                                   (size_t)1 << 20,
                                   ((size_t)16 << 20) + 5,
                                   (size_t)32 << 20,
                                   ((size_t)32 << 20) + 1,
                                   (size_t)48 << 20,
                                   (size_t)80 << 20,
                                   (size_t)36 << 20,
                                   (size_t)20 << 20,
                                   70000,
                                   3000,
                                   100,
                                   24,
                                   5};
    size_t n = sizeof steps / sizeof steps[0];
    unsigned char *p = qslab_malloc(steps[0]);
    CHECK(p != NULL);
    if (!p)
        return;
    fill(p, 0, steps[0]);
    for (size_t i = 1; i < n; i++) {
        size_t old = steps[i - 1], want = steps[i];
        unsigned char *q = qslab_realloc(p, want);
        CHECKF(q != NULL, "realloc %zu -> %zu failed", old, want);
        if (!q)
            break;
        CHECKF(qslab_usable_size(q) >= want, "usable %zu < %zu", qslab_usable_size(q), want);
        size_t keep = old < want ? old : want;
        size_t bad = first_bad(q, keep);
        CHECKF(bad == keep, "realloc %zu -> %zu: byte %zu lost", old, want, bad);
        if (want > old)
            fill(q, old, want);
        p = q;
    }
    qslab_free(p);
}

static void test_in_place(void)
{
    int slob = tf_kmalloc_slob(); /* SLOB: the block's size, not the class's */
    unsigned char *p = qslab_malloc(90); /* kmalloc-96 */
    size_t us = qslab_usable_size(p);
    if (slob)
        CHECKF(p != NULL && tf_slob_usable_ok(us, 90), "slob: usable %zu for 90", us);
    else
        CHECK(p != NULL && us == 96);
    if (!p)
        return;
    fill(p, 0, 70);
    if (!slob)
        CHECK(qslab_realloc(p, 80) == p);
    CHECKF(qslab_realloc(p, us) == p, "realloc up to the usable size %zu moved", us); /* 96 for SLQB */
    CHECK(qslab_realloc(p, 70) == p);
    CHECK(first_bad(p, 70) == 70);
    qslab_free(p);

    p = qslab_malloc(4000); /* kmalloc-4096 */
    us = qslab_usable_size(p);
    if (slob)
        CHECKF(tf_slob_usable_ok(us, 4000), "slob: usable %zu for 4000", us);
    else
        CHECK(us == 4096);
    CHECK(qslab_realloc(p, us) == p);
    qslab_free(p);

    /* a block alone in its slab (kmalloc-40960, a 64 KiB slab; kmalloc-20480,
     * 32 KiB; kmalloc-81920, 128 KiB) grows in place up to the power of two
     * of its class, what the slab has room for: a buffer appended to moves
     * once per power of two (not under SLAB, which keeps its index arrays
     * past the objects; under SLOB, a block too big for its runs, over
     * 64 KiB, which is its class's object) */
    static const size_t alone[][2] = {{40000, 65536}, {20000, 32768}, {80000, 131072}};
    for (size_t i = 0; i < 3 && !tf_kmalloc_slab(); i++) {
        size_t req = alone[i][0], pow2 = alone[i][1];
        if (slob && req <= 65536)
            continue; /* a run's block: its own size */
        p = qslab_malloc(req);
        CHECK(p != NULL);
        if (!p)
            return;
        us = qslab_usable_size(p);
        CHECKF(us > pow2 - 1024 && us <= pow2, "malloc(%zu): usable %zu, not the slab's room (%zu)", req,
               us, pow2);
        fill(p, 0, req);
        unsigned char *q = qslab_realloc(p, us);
        CHECKF(q == p, "realloc of a %zu-byte block alone in its slab to %zu moved", req, us);
        if (q != p) {
            qslab_free(q);
            continue;
        }
        fill(p, req, us);
        CHECK(first_bad(p, us) == us);
        qslab_free_sized(p, req); /* the request's size is still the object's */
        p = qslab_malloc(req);
        q = qslab_realloc(p, us + 1); /* past the room: moves */
        CHECK(q != NULL && q != p);
        qslab_free(q);
    }

    size_t big = ((size_t)40 << 20) + 10;
    p = qslab_malloc(big);
    CHECK(p != NULL);
    if (!p)
        return;
    us = qslab_usable_size(p);
    CHECK(us >= big);
    p[big - 1] = 7;
    CHECKF(qslab_realloc(p, us) == p, "large realloc up to its usable size %zu moved", us);
    CHECK(p[big - 1] == 7);
    qslab_free(p);
}

static void test_enomem(void)
{
    static const size_t sizes[] = {40, 5000, (size_t)40 << 20};
    for (size_t i = 0; i < 3; i++) {
        size_t n = sizes[i];
        unsigned char *p = qslab_malloc(n);
        CHECK(p != NULL);
        if (!p)
            continue;
        fill(p, 0, n);
        errno = 0;
        void *q = qslab_realloc(p, SIZE_MAX);
        CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu-byte block, SIZE_MAX) = %p errno %d", n, q, errno);
        errno = 0;
        q = qslab_realloc(p, SIZE_MAX - 4095);
        CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu-byte block, SIZE_MAX-4095) = %p errno %d", n, q, errno);
        CHECKF(first_bad(p, n) == n, "contents of a %zu-byte block changed by a failed realloc", n);
        /* still a live, resizable, freeable block */
        unsigned char *r = qslab_realloc(p, n * 2);
        CHECK(r != NULL && first_bad(r, n) == n);
        qslab_free(r ? r : p);
    }
}

int main(void)
{
    test_null();
    test_grow_and_shrink();
    test_in_place();
    test_enomem();
    return tu_done();
}
