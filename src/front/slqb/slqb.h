/*
 * front/slqb/slqb.h - what the SLQB front end's files share among
 * themselves: queue.c (refills, flushes, routing, the owner's slow paths),
 * remote.c (remote frees in batches, inboxes), budget.c (the owner budget,
 * grants, stashes), cpu.c (per-CPU queues' slow paths) and misuse.c (bad
 * frees: second frees, bad words and links).  The slow paths
 * other layers call are declared in core/internal.h.
 */
#ifndef QSLAB_SLQB_H
#define QSLAB_SLQB_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

void slqb_budget_put(struct qs_owner *o, unsigned long bytes); /* budget.c */
/* Remote frees in transit (budget.c): reserve up to `want` objects of c
 * for q's batches from its owner's transit budget (how many: 0 when it is
 * spent), give k back */
uint32_t slqb_transit_take(qslab_cache *c, struct qs_queue *q, uint32_t want);
void slqb_transit_put(qslab_cache *c, struct qs_queue *q, uint32_t k);
/* c's objects are never queued (budget.c: over 32 KiB or an eighth of the
 * owner budget): they come from their node's slabs and go back to them at
 * once (queue.c qs_alloc_slow_unsampled, remote.c pending_start) */
bool slqb_unqueued(const qslab_cache *c); /* budget.c */
void slqb_grant_grow(qslab_cache *c, struct qs_queue *q); /* budget.c */
void slqb_grant_release(qslab_cache *c, struct qs_queue *q); /* budget.c */
void slqb_stash_add(qslab_cache *c, struct qs_queue *q, struct qs_slab *list); /* budget.c */
struct qs_slab *slqb_stash_pop(struct qs_queue *q); /* budget.c: stash_lock held */
void slqb_queue_uncount(struct qs_queue *q, unsigned long k); /* queue.c */
void qs_queue_hand_slabs(qslab_cache *c, struct qs_queue *q); /* queue.c: every slab to its node */
bool qs_queue_batches_held(const struct qs_queue *q); /* remote.c: in its pending or open batch */
void qs_queue_steal_idle_stash(qslab_cache *c, struct qs_queue *q); /* budget.c: the purger's */
unsigned slqb_refill_gather(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room,
                            bool *bare); /* queue.c */
struct qs_batch *slqb_batch_for(qslab_cache *c, struct qs_queue *q, struct qs_batch *b, unsigned nb,
                                unsigned *victim, struct qs_list *to); /* remote.c */
void slqb_send_pending(qslab_cache *c, struct qs_queue *q, bool taken); /* remote.c */
unsigned slqb_claim_into(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room); /* remote.c */
void slqb_percpu_fb_open(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj); /* remote.c */
void slqb_slab_put_twice(qslab_cache *c, struct qs_slab *s, void *obj); /* misuse.c */
void slqb_put_twice_report(qslab_cache *c, struct qs_queue *q, void *obj); /* misuse.c */
struct qs_batch *slqb_pending_find(qslab_cache *c, struct qs_queue *q, struct qs_list *to); /* remote.c */
void slqb_send_batch(qslab_cache *c, struct qs_queue *q, struct qs_batch *b); /* remote.c */
/* Flush up to n objects from the top of a CPU's queue q home (q->lock
 * held); how many, or QS_RSEQ_MOVED */
int slqb_percpu_flush(qslab_cache *c, struct qs_queue *q, unsigned n); /* cpu.c */
/* A CPU's queue q about to take new memory (q->lock held, q's batches
 * posted): slabs with free objects of other CPUs' queues of q's node, made
 * q's (a ->next list, off every list), about `want` free objects */
struct qs_slab *slqb_percpu_adopt(qslab_cache *c, struct qs_queue *q, unsigned want); /* cpu.c */
void *slqb_percpu_alloc_slow(qslab_cache *c); /* cpu.c */

/* Owner-side free of obj to slab s on list l; empties collected on *empties.
 * False: obj was free in s already (repaired: slqb_slab_put_twice); the caller
 * reports it (slqb_put_twice_report), unlocked where it can. */
static inline bool slab_put_bit(qslab_cache *c, struct qs_list *l, struct qs_slab *s, void *obj,
                                uint64_t *w, uint64_t bit, struct qs_slab **empties)
{
    bool was_full = s->state == QS_SLAB_FULL;
    uint64_t v = *w;
    bool once = !(v & bit);
    if (likely(once)) {
        *w = v | bit;
        qs_slab_give(c, s, obj);
    } else {
        bool was_empty = s->inuse == 0;
        slqb_slab_put_twice(c, s, obj);
        if (was_empty) /* on an empties list already: it stays there */
            return false;
    }
    if (s->inuse == 0) {
        qs_list_del(l, s);
        s->next = *empties;
        *empties = s;
    } else if (was_full) {
        qs_list_del(l, s);
        qs_list_add(l, s, QS_SLAB_PARTIAL);
    }
    return once;
}
/* The same, obj's free bit found here (slab_put_bit: a caller that found it) */
static inline bool slab_put(qslab_cache *c, struct qs_list *l, struct qs_slab *s, void *obj,
                            struct qs_slab **empties)
{
    uint64_t bit, *w = qs_fbit_word(s, obj, &bit);
    return slab_put_bit(c, l, s, obj, w, bit, empties);
}

/* Add obj to batch b; post the batch once it holds `limit` objects. */
static inline void batch_add(qslab_cache *c, struct qs_queue *q, struct qs_batch *b, void *obj,
                             unsigned long limit)
{
    *qs_link(c, obj) = qs_enc(c, b->head);
    if (!b->head)
        b->tail = obj;
    b->head = obj;
    if (unlikely(++b->n >= limit))
        slqb_send_batch(c, q, b);
}

static inline void pending_add(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    struct qs_list *to = qs_slab_owner(s);
    struct qs_batch *b = &q->pending[q->pending_mru];
    if (unlikely(b->to != to))
        b = slqb_pending_find(c, q, to);
    batch_add(c, q, b, obj, qs_batch_cap(b)); /* posting is a tail call */
}

#pragma GCC visibility pop

#endif /* QSLAB_SLQB_H */
