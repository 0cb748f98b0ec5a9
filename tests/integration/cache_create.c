/*
 * Cache creation: argument checks, names, alignment of every object.
 */
#include <qslab.h>

#include "../testutil.h"

#define NOBJ 300 /* several slabs for small objects */

static int expect_einval(const char *name, size_t size, size_t align, unsigned long flags)
{
    errno = 0;
    qslab_cache *c = qslab_cache_create(name, size, align, flags, NULL);
    int ok = c == NULL && errno == EINVAL;
    if (c)
        qslab_cache_destroy(c);
    return ok;
}

static void test_bad_arguments(void)
{
    CHECK(expect_einval(NULL, 64, 0, 0));
    CHECK(expect_einval("t-size0", 0, 0, 0));
    CHECK(expect_einval("t-align3", 64, 3, 0));
    CHECK(expect_einval("t-align24", 64, 24, 0));
    CHECK(expect_einval("t-align96", 64, 96, 0));
    CHECK(expect_einval("t-alignodd", 64, 4097, 0));
    CHECK(expect_einval("t-flag1", 64, 0, 0x1UL));
    CHECK(expect_einval("t-flaghigh", 64, 0, 0x80000000UL));
    CHECK(expect_einval("t-flagmix", 64, 0, QSLAB_HWCACHE_ALIGN | 0x4UL));

    /* Impossible sizes and alignments fail cleanly, whatever the errno. */
    errno = 0;
    qslab_cache *c = qslab_cache_create("t-huge", SIZE_MAX, 0, 0, NULL);
    CHECKF(c == NULL && (errno == EINVAL || errno == ENOMEM), "c=%p errno=%d", (void *)c, errno);
    errno = 0;
    c = qslab_cache_create("t-hugealign", 64, (size_t)1 << 62, 0, NULL);
    CHECKF(c == NULL && (errno == EINVAL || errno == ENOMEM), "c=%p errno=%d", (void *)c, errno);
}

static void test_names(void)
{
    char name[64] = "t-name-abcdefghijklmnopqrstuvwxyz0123456789"; /* 43 bytes */
    qslab_cache *c = qslab_cache_create(name, 40, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    memset(name, 'X', sizeof name - 1); /* the name was copied */
    const char *got = qslab_cache_name(c);
    CHECKF(got && strlen(got) == 31 && strncmp(got, "t-name-abcdefghijklmnopqrstuvwxyz", 31) == 0, "name \"%s\"",
           got ? got : "(null)");
    CHECK(qslab_cache_object_size(c) == 40);
    CHECK(qslab_cache_find(got) == c);
    CHECK(qslab_cache_destroy(c) == 0);

    c = qslab_cache_create("t-short", 1, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(strcmp(qslab_cache_name(c), "t-short") == 0);
    CHECK(qslab_cache_object_size(c) == 1);
    CHECK(qslab_cache_find("t-short") == c);
    CHECK(qslab_cache_destroy(c) == 0);
    CHECK(qslab_cache_find("t-short") == NULL);
    CHECK(qslab_cache_find("t-no-such-cache") == NULL);
}

/* Allocate NOBJ objects; check they are distinct, aligned, writable. */
static void use_cache(qslab_cache *c, size_t size, size_t align, const char *what)
{
    static void *objs[NOBJ];
    int misaligned = 0, nulls = 0, overlap = 0;
    for (int i = 0; i < NOBJ; i++) {
        objs[i] = qslab_cache_alloc(c);
        if (!objs[i]) {
            nulls++;
            continue;
        }
        if ((uintptr_t)objs[i] % align)
            misaligned++;
        memset(objs[i], (unsigned char)i, size);
    }
    for (int i = 0; i < NOBJ; i++) {
        if (!objs[i])
            continue;
        const unsigned char *b = objs[i];
        for (size_t k = 0; k < size; k++)
            if (b[k] != (unsigned char)i) {
                overlap++;
                break;
            }
    }
    CHECKF(nulls == 0, "%s: %d allocations failed", what, nulls);
    CHECKF(misaligned == 0, "%s: %d objects not %zu-aligned", what, misaligned, align);
    CHECKF(overlap == 0, "%s: %d objects overwritten by others", what, overlap);
    for (int i = 0; i < NOBJ; i++)
        if (objs[i])
            qslab_cache_free(c, objs[i]);
}

static void test_alignment(void)
{
    static const size_t sizes[] = {1, 8, 13, 24, 64, 100, 200, 1000, 3000};
    char what[96];
    for (size_t align = 8; align <= 4096; align *= 2) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t size = sizes[i];
            snprintf(what, sizeof what, "t-a%zu-s%zu", align, size);
            qslab_cache *c = qslab_cache_create(what, size, align, 0, NULL);
            CHECKF(c != NULL, "%s: errno %d", what, errno);
            if (!c)
                continue;
            use_cache(c, size, align, what);
            CHECKF(qslab_cache_destroy(c) == 0, "%s", what);
        }
    }

    /* Default alignment is 8; alignments below 8 are accepted. */
    static const size_t small[] = {0, 1, 2, 4};
    for (size_t i = 0; i < 4; i++) {
        snprintf(what, sizeof what, "t-small-align%zu", small[i]);
        qslab_cache *c = qslab_cache_create(what, 24, small[i], 0, NULL);
        CHECKF(c != NULL, "%s: errno %d", what, errno);
        if (!c)
            continue;
        use_cache(c, 24, small[i] == 0 ? 8 : small[i], what);
        CHECK(qslab_cache_destroy(c) == 0);
    }

    /* QSLAB_HWCACHE_ALIGN: 64-byte aligned when size >= 64. */
    static const size_t hw[] = {64, 65, 100, 128, 129, 500, 4000};
    for (size_t i = 0; i < sizeof hw / sizeof hw[0]; i++) {
        snprintf(what, sizeof what, "t-hw%zu", hw[i]);
        qslab_cache *c = qslab_cache_create(what, hw[i], 0, QSLAB_HWCACHE_ALIGN, NULL);
        CHECKF(c != NULL, "%s: errno %d", what, errno);
        if (!c)
            continue;
        use_cache(c, hw[i], 64, what);
        CHECK(qslab_cache_destroy(c) == 0);
    }
    /* ... and still at least 8-aligned below that. */
    qslab_cache *c = qslab_cache_create("t-hw20", 20, 0, QSLAB_HWCACHE_ALIGN, NULL);
    CHECK(c != NULL);
    if (c) {
        use_cache(c, 20, 8, "t-hw20");
        CHECK(qslab_cache_destroy(c) == 0);
    }
}

static void test_stats_shape(void)
{
    qslab_cache *c = qslab_cache_create("t-shape", 100, 32, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    void *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECK(st.object_size == 100);
    CHECKF(st.slot_size >= 100 && st.slot_size % 32 == 0, "slot_size %zu", st.slot_size);
    CHECK(st.objs_per_slab >= 1);
    CHECKF(st.objs_per_slab * st.slot_size <= ((size_t)4096 << st.order), "objs_per_slab %u slot %zu order %u",
           st.objs_per_slab, st.slot_size, st.order);
    qslab_cache_free(c, p);
    errno = 0;
    CHECK(qslab_cache_stats(NULL, &st) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_stats(c, NULL) == -1 && errno == EINVAL);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(void)
{
    test_bad_arguments();
    test_names();
    test_alignment();
    test_stats_shape();
    return tu_done();
}
