/*
 * unit: a slab's objects are born a page's worth at a time, as they are
 * needed (core/slab.c qs_slab_grow): one 4 KiB object makes one page of its
 * 32 KiB slab resident, not eight; a slot not yet born is not an object
 * (its free is reported and changes nothing); growing to the last slot
 * makes the slab full, and the invariant walker agrees at every step.
 * The thread stays on one CPU: with per-CPU owners an allocation made
 * after a migration comes from another CPU's slab.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <string.h>
#include <sys/mman.h>

/* Pages of [p, p + len) resident in this process. */
static unsigned resident_pages(void *p, size_t len)
{
    unsigned char vec[64];
    size_t n = len / QS_PAGE_SIZE, got = 0;
    CHECK(n <= sizeof vec && mincore(p, len, vec) == 0);
    for (size_t i = 0; i < n; i++)
        got += vec[i] & 1;
    return (unsigned)got;
}

int main(void)
{
    qslab_cache *c = qslab_cache_create("t-lazy", 4096, 0, 0, NULL);
    CHECK(c != NULL);
    tf_pin_slqb("t-lazy"); /* SLQB's slabs */
    tu_pin_one_cpu();
    unsigned per = qs_slab_objects(c, c->order);
    size_t slab = qs_slab_bytes(c->order);
    CHECKF(per == 8 && slab == 32768, "%u objects in %zu bytes", per, slab);

    /* one object: one object born, one page of the slab touched */
    char *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    struct qs_slab *s = qs_slab_fast(p);
    CHECK(s && s->mem == p && s->objects == 1);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECKF(st.num_objs == 1 && st.num_slabs == 1, "num_objs %lu in %lu slabs", st.num_objs, st.num_slabs);
    memset(p, 0xab, 4096);
    CHECKF(resident_pages(s->mem, slab) == 1, "%u of 8 pages resident for one object",
           resident_pages(s->mem, slab));
    CHECK(qslab_cache_validate(c) == 0);

    /* the next slot is not an object yet: its free is refused, changes
     * nothing, and says why */
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    qslab_cache_free(c, p + 4096);
    CHECKF(tu_capture_calls() == 1 && strstr(tu_fatal_msg, "never handed out") &&
               strstr(tu_fatal_msg, "t-lazy"),
           "free of an unborn slot: %lu reports: %s", tu_capture_calls(), tu_fatal_msg);
    qslab_set_fatal_handler(NULL);
    CHECK(s->objects == 1 && s->inuse == 1 && qslab_cache_validate(c) == 0);

    /* a second object: one more page, not the rest of the slab */
    char *second = qslab_cache_alloc(c);
    CHECK(second && qs_slab_fast(second) == s);
    CHECKF(s->objects == 2 && resident_pages(s->mem, slab) <= 2, "objects %u, %u pages resident after two",
           s->objects, resident_pages(s->mem, slab));
    qslab_cache_free(c, second);
    CHECK(qslab_cache_validate(c) == 0);

    /* the rest are born as they are needed, in the same slab */
    char *more[7];
    for (int i = 0; i < 7; i++) {
        more[i] = qslab_cache_alloc(c);
        CHECK(more[i] && qs_slab_fast(more[i]) == s);
        CHECK(qslab_cache_validate(c) == 0);
    }
    CHECKF(s->objects == 8 && s->state == QS_SLAB_FULL, "objects %u state %d", s->objects, s->state);
    char *next = qslab_cache_alloc(c); /* a second slab */
    CHECK(next && qs_slab_fast(next) != s);
    CHECK(qslab_cache_validate(c) == 0);

    qslab_cache_free(c, p);
    for (int i = 0; i < 7; i++)
        qslab_cache_free(c, more[i]);
    qslab_cache_free(c, next);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
