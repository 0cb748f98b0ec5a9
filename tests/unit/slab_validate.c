/*
 * unit: qslab_cache_validate of SLAB's slabs (front/slab/reap.c check_slab)
 * finds each corruption of a slab's free-list block (its bitmap of free
 * objects and its list of free indices), names it, and the slab validates
 * again once the block is put back.  White box: the block's layout is
 * front/slab/slab.h's (the bitmap, a bit per object in 64-bit words, then one
 * index per object, one byte each for slabs of up to 256 objects, each
 * entry holding its index XOR its place; the free indices are entries
 * inuse .. objects-1).
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <string.h>

enum { N = 20, FREED = 7 };

static char out[8192];

/* validate must fail and say `what` */
static void expect_problem(qslab_cache *c, const char *what, const char *case_name)
{
    tu_stderr_begin();
    int r = qslab_cache_validate(c);
    tu_stderr_end(out, sizeof out);
    CHECKF(r != 0 && strstr(out, what) != NULL && strstr(out, "t-slabv") != NULL,
           "%s: validate returned %d, expected a report naming the cache and \"%s\"; stderr:\n%s",
           case_name, r, what, out);
}

int main(void)
{
    qslab_cache *c = qslab_cache_create("t-slabv", 64, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_debug_skip("slab_validate", c)) {
        qslab_cache_destroy(c);
        return tu_done();
    }
    CHECK(qslab_tune("t-slabv", "front", "slab") == 0 && tf_is(c, "slab"));

    void *obj[N];
    for (int i = 0; i < N; i++)
        CHECK((obj[i] = qslab_cache_alloc(c)) != NULL);
    struct qs_slab *s = qs_slab_lookup(obj[0]);
    CHECK(s != NULL);
    for (int i = 1; i < N; i++) /* one slab (64-byte objects, 4 KiB or more) */
        CHECK(qs_slab_lookup(obj[i]) == s);
    for (int i = 0; i < FREED; i++)
        qslab_cache_free(c, obj[i]);
    qslab_cache_shrink(c); /* the array caches' objects back to their slab */
    CHECKF(s->inuse == N - FREED && s->objects <= 256, "inuse %u of %u", s->inuse, s->objects);
    CHECK(qslab_cache_validate(c) == 0);

    uint64_t *bm = (uint64_t *)s->freelist;
    uint8_t *ix = (uint8_t *)s->freelist + (s->objects + 63) / 64 * 8;
    unsigned live = (unsigned)(((char *)obj[N - 1] - s->base) / c->slot_size);
    CHECK(!(bm[live / 64] >> (live % 64) & 1)); /* in use: its bit clear */
    unsigned first = s->inuse; /* the first free index's entry */
    uint8_t saved0 = ix[first], saved1 = ix[first + 1];
    unsigned v0 = saved0 ^ first; /* the index entry `first` names */
#define ENTRY(pos, v) (uint8_t)((v) ^ (pos))

    /* a live object's bit set: one free object too many in the bitmap */
    bm[live / 64] ^= (uint64_t)1 << (live % 64);
    expect_problem(c, "slab's free bitmap does not match its free count", "bitmap bit");
    bm[live / 64] ^= (uint64_t)1 << (live % 64);
    CHECK(qslab_cache_validate(c) == 0);

    /* a free index out of range */
    ix[first] = ENTRY(first, s->objects + 3 > 255 ? 255 : s->objects + 3);
    expect_problem(c, "free index out of range", "index out of range");
    ix[first] = saved0;

    /* a free index naming a live object */
    ix[first] = ENTRY(first, live);
    expect_problem(c, "free index of an object its bitmap says is in use", "index of a live object");
    ix[first] = saved0;

    /* one free object named twice (and another not at all) */
    ix[first + 1] = ENTRY(first + 1, v0);
    expect_problem(c, "object free twice in its slab's index list", "index twice");
    ix[first + 1] = saved1;
    CHECK(qslab_cache_validate(c) == 0);

    for (int i = FREED; i < N; i++)
        qslab_cache_free(c, obj[i]);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
