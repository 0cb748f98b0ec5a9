/*
 * fastpath.h - allocation and free fast paths (inline).
 *
 * Budget, alloc: 2 TLS loads (slot array, its size), 1 load of the queue
 * pointer, 2 loads from the queue, 1 load of the object's link word;
 * 3 stores to the queue line (head, nr, counter) and 1 to the object (clear
 * the link).  No lock, no atomic read-modify-write.
 * Budget, free: the chunk-map walk (2 loads) and the slab descriptor (1 line)
 * to validate the pointer, then the same queue work as alloc, plus the
 * hiwater compare.
 */
#ifndef QSLAB_FASTPATH_H
#define QSLAB_FASTPATH_H

#include "internal.h"

/* The caller's queue for cache c, or NULL if it has none yet. */
static inline struct qs_queue *qs_queue_of(const qslab_cache *c)
{
    struct qs_owner *o = &qs_self;
    unsigned id = c->id;
    if (likely(id < o->cap))
        return o->slots[id];
    return NULL;
}

/* Pop the queue's head (non-empty), counting it as `item`. */
static inline void *qs_queue_pop(qslab_cache *c, struct qs_queue *q, int item)
{
    void *obj = q->head;
    uintptr_t *l = qs_link(c, obj);
    bool bad;
    void *next = qs_dec(c, *l, &bad);
    if (unlikely(bad))
        return qs_queue_corrupt(c, q, obj);
    q->head = next;
    QS_STORE(q->nr, q->nr - 1);
    *l = 0; /* an allocated object must not look free */
    QS_ADD(q->stat[item], 1);
    return obj;
}

static inline void *qs_alloc_fast(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    if (likely(q != NULL && q->head != NULL))
        return qs_queue_pop(c, q, QS_ALLOC_FAST);
    return qs_alloc_slow(c);
}

/* Push a free object on the owner's queue; flush over hiwater. */
static inline void qs_queue_push(qslab_cache *c, struct qs_queue *q, void *obj)
{
    *qs_link(c, obj) = qs_enc(c, q->head);
    q->head = obj;
    QS_ADD(q->stat[QS_FREE_FAST], 1);
    unsigned nr = q->nr + 1;
    QS_STORE(q->nr, nr); /* read by statistics: relaxed store, a plain mov */
    if (unlikely(nr > QS_LOAD(c->hiwater))) /* tunables: relaxed loads */
        qs_queue_flush(c, q, QS_LOAD(c->freebatch));
}

/* Free obj (validated: an object of slab s of cache c). */
static inline void qs_free_fast(qslab_cache *c, struct qs_slab *s, void *obj)
{
    struct qs_queue *q = qs_queue_of(c);
    if (unlikely(q == NULL || (qs_multi_node && s->node != q->node))) {
        qs_free_slow(c, s, obj);
        return;
    }
    uintptr_t *l = qs_link(c, obj);
    if (unlikely(qs_looks_free(c, *l))) {
        qs_free_suspect(c, q, s, obj); /* tail call keeps this path leaf-like */
        return;
    }
    qs_queue_push(c, q, obj);
}

/* Slab of a pointer that should be an object of a slab chunk; NULL if not. */
static inline struct qs_slab *qs_obj_slab(struct qs_chunk *ch, const void *p)
{
    struct qs_slab *s = qs_chunk_slab(ch, p);
    if (unlikely(!s || !__atomic_load_n(&s->cache, __ATOMIC_RELAXED) || !qs_slab_valid_obj(s, p)))
        return NULL;
    return s;
}

#endif /* QSLAB_FASTPATH_H */
