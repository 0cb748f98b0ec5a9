/*
 * unit: first touch (core/slab.c first_touch, os/linux.c qs_os_populate).
 * A birth from memory known zero faults in the pages it writes with one
 * call: qs_os_populate makes exactly its range resident (where the kernel
 * has MADV_POPULATE_WRITE) and keeps errno; a birth of objects up to a
 * page long makes resident the pages of its run and no more (the run's
 * objects all start there); objects over a page keep only the page of
 * their word resident, the rest being their users', unless a debug cache
 * poisons them at birth (every page of the run).  SLQB's, SLUB's and SLAB's
 * births.  A debug cache's birth on memory known zero writes its red zones
 * but not Q's fill, zeros already there; P's poison it writes.
 */
#define _GNU_SOURCE
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "core/hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Which of the n pages from p are resident, as a bit mask */
static unsigned long resident(void *p, size_t n)
{
    unsigned char vec[64];
    CHECK(n <= sizeof vec && mincore(p, n * QS_PAGE_SIZE, vec) == 0);
    unsigned long m = 0;
    for (size_t i = 0; i < n; i++)
        m |= (unsigned long)(vec[i] & 1) << i;
    return m;
}

/* The pages of bytes [from, to) of a slab, as a bit mask */
static unsigned long pages(size_t from, size_t to)
{
    unsigned long m = 0;
    for (size_t pg = from / QS_PAGE_SIZE; pg * QS_PAGE_SIZE < to; pg++)
        m |= 1ul << pg;
    return m;
}

static void populate(void)
{
    size_t n = 16;
    char *m = mmap(NULL, n * QS_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    /* does the kernel have it?  (pages 14 and 15: outside what is checked) */
    bool has = madvise(m + 14 * QS_PAGE_SIZE, 2 * QS_PAGE_SIZE, MADV_POPULATE_WRITE) == 0;
    errno = 12345;
    qs_os_populate(m + 4 * QS_PAGE_SIZE, 8 * QS_PAGE_SIZE);
    CHECKF(errno == 12345, "errno %d after qs_os_populate", errno);
    unsigned long got = resident(m, 14), want = has ? 0xff0ul : 0;
    CHECKF(got == want, "resident pages %#lx after populating pages 4..11, want %#lx (%s)", got, want,
           has ? "MADV_POPULATE_WRITE works here" : "no MADV_POPULATE_WRITE here");
    munmap(m, n * QS_PAGE_SIZE);
}

/* A fresh slab of `size`-byte objects: its first births' pages resident,
 * no more; `objs` objects allocated, not written */
static void births(const char *name, const char *front, size_t size, unsigned long flags,
                   unsigned objs)
{
    qslab_trim(); /* no empty or warm slab to reuse: the new slab is fresh memory */
    qslab_cache *c = qslab_cache_create(name, size, 0, flags, NULL);
    CHECK(c != NULL);
    if (!flags && !tf_is(c, "debug")) { /* (a debug cache has its own front end) */
        CHECK(qslab_tune(name, "front", front) == 0);
        CHECK(tf_is(c, front));
    }
    void *o[64];
    CHECK(objs <= 64);
    for (unsigned i = 0; i < objs; i++)
        CHECK((o[i] = qslab_cache_alloc(c)) != NULL);
    struct qs_slab *s = NULL; /* (QSLAB_GUARD_SAMPLE: a guarded sample has no slab) */
    for (unsigned i = 0; i < objs && !s; i++)
        s = qs_slab_fast(o[i]);
    if (!s && getenv("QSLAB_GUARD_SAMPLE")) { /* every one sampled: nothing to look at */
        for (unsigned i = 0; i < objs; i++)
            qslab_cache_free(c, o[i]);
        qslab_cache_destroy(c);
        return;
    }
    CHECKF(s != NULL && (s->empty_ms & QS_SLAB_ZERO), "%s: %s", name,
           s ? "its slab is not fresh memory" : "no object of a slab");
    size_t slab = qs_slab_bytes(s->order), np = slab / QS_PAGE_SIZE;
    if (np > 64)
        np = 64;
    /* what is born: SLQB's objects, SLAB's span (its objects is its layout's) */
    uint32_t nborn = __atomic_load_n(&s->span, __ATOMIC_RELAXED) / c->slot_size;
    size_t born = (size_t)(s->base - s->mem) + (size_t)nborn * c->slot_size;
    /* (QSLAB_DEBUG may make any cache a debug cache) */
    bool whole = c->slot_size <= QS_PAGE_SIZE || (c->debug & (QS_DBG_P | QS_DBG_Q));
    unsigned long want = 0;
    if (whole) /* every page a born object's slot reaches */
        want = pages(0, born);
    else /* the page of each born object's word */
        for (uint32_t i = 0; i < nborn; i++)
            want |= pages((size_t)(s->base - s->mem) + i * c->slot_size,
                          (size_t)(s->base - s->mem) + i * c->slot_size + 1);
    unsigned long got = resident(s->mem, np);
    CHECKF(got == want, "%s: %u objects born of %zu bytes: resident pages %#lx, want %#lx", name,
           nborn, size, got, want);
    for (unsigned i = 0; i < objs; i++)
        qslab_cache_free(c, o[i]);
    CHECK(qslab_cache_validate(c) == 0);
    qslab_cache_destroy(c);
}

/* The debug hook's birth of one object in a buffer of 0xaa bytes, its
 * memory said to be zero or not: the object's bytes then hold `body` (its
 * last one `last`), its right red zone 0xbb (free) */
static void born_as(qslab_cache *c, bool zero, int body, int last)
{
    size_t slot = c->slot_size;
    char *buf = malloc(2 * slot + 64);
    CHECK(buf != NULL);
    memset(buf, 0xaa, 2 * slot + 64);
    char *obj = buf + 64 + c->red_left;
    qs_debug_hooks.born(c, obj, 1, zero);
    int body_bad = 0, red_bad = 0;
    for (size_t k = 0; k + 1 < c->obj_size; k++)
        body_bad += (uint8_t)obj[k] != (uint8_t)body;
    for (size_t k = c->obj_size; k < c->link_off; k++)
        red_bad += (uint8_t)obj[k] != 0xbb;
    CHECKF(body_bad == 0 && (uint8_t)obj[c->obj_size - 1] == (uint8_t)last,
           "%s, memory %s: %d bytes not %#x, last %#x", c->name, zero ? "zero" : "not zero", body_bad, body,
           (uint8_t)obj[c->obj_size - 1]);
    CHECKF(red_bad == 0, "%s, memory %s: %d red-zone bytes not 0xbb", c->name, zero ? "zero" : "not zero",
           red_bad);
    free(buf);
}

static void debug_births(void)
{
    qslab_cache *q = qslab_cache_create("t-born-q", 100, 0, QSLAB_QUARANTINE | QSLAB_RED_ZONE, NULL);
    qslab_cache *p = qslab_cache_create("t-born-p", 100, 0, QSLAB_POISON | QSLAB_RED_ZONE, NULL);
    CHECK(q != NULL && p != NULL && q->link_off > q->obj_size);
    born_as(q, true, 0xaa, 0xaa); /* Q's zeros: there already */
    born_as(q, false, 0, 0);
    born_as(p, true, 0x6b, 0xa5); /* P's poison: always written */
    born_as(p, false, 0x6b, 0xa5);
    qslab_cache_destroy(q);
    qslab_cache_destroy(p);
}

int main(void)
{
    tu_pin_one_cpu(); /* with per-CPU owners, every allocation from one CPU's slab */
    populate();
    births("t-touch-1536", "slqb", 1536, 0, 1);  /* a first birth: a page's worth */
    births("t-touch-1536b", "slqb", 1536, 0, 5); /* and the doubling births after it */
    births("t-touch-200", "slqb", 200, 0, 40);
    births("t-touch-8k", "slqb", 8192, 0, 3); /* over a page: the words' pages only */
    births("t-touch-8k-p", "slqb", 8192, QSLAB_POISON, 3); /* unless poisoned whole at birth */
    births("t-touch-200-slub", "slub", 200, 0, 40);
    births("t-touch-200-slab", "slab", 200, 0, 40); /* SLAB's refills birth a page's worth */
    births("t-touch-1536-slab", "slab", 1536, 0, 5);
    births("t-touch-8k-slab", "slab", 8192, 0, 3);
    debug_births();
    return tu_done();
}
