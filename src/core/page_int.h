/*
 * core/page_int.h - what the page layer's two files share, and no other
 * file includes: page.c (chunks, their slots, the unit map, slabs handed
 * out and given back) and warm.c (warm slots, the retention rule, the
 * cached-memory cap).  The pools are per (node, order); pool->lock guards
 * a pool's chunk lists, its chunks' slot lists and counters, and its warm
 * list.
 */
#ifndef QSLAB_CORE_PAGE_INT_H
#define QSLAB_CORE_PAGE_INT_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

struct qs_page_pool {
    qs_lock lock;
    struct qs_chunk *avail; /* chunks with a free slot */
    struct qs_chunk *all;   /* every chunk (all_next): qs_page_walk */
    unsigned nr_fully_free;
    struct qs_slab *warm, *warm_tail; /* warm slots, newest first (->next, ->prev) */
    struct qs_chunk *home[QS_PAGE_HOMES]; /* each home's chunk (page.c HOMES); NULL: none yet */
} __attribute__((aligned(QS_CACHELINE)));

extern struct qs_page_pool qs_page_pools[QS_MAX_NODES][QS_NR_ORDERS];
/* Bytes in slabs handed out (atomic; observe's root points at it through
 * qs_page_slab_bytes): the working set the retention rule measures. */
extern size_t qs_page_out;

/* page.c: a slab leaving its cache for the page layer (no pointer is its
 * object any more; its bytes no longer handed out) */
void qs_page_slab_leave(struct qs_slab *s);
/* page.c: decommit and return to their chunks slabs that left their
 * caches; bytes the OS took */
size_t qs_page_free_left(struct qs_slab *list);
/* warm.c: pool p's newest warm slot off its list and its bytes off the
 * warm slots' (p->lock held), or NULL */
struct qs_slab *qs_page_warm_pop(struct qs_page_pool *p);

#pragma GCC visibility pop

#endif /* QSLAB_CORE_PAGE_INT_H */
