/*
 * front/queue.h - the owners' queues' slow paths: refill, flush, remote
 * frees, claims, the per-CPU queues' operations, the answers to bad frees.
 * The SLQB front end implements them (front/slqb/: queue.c, remote.c,
 * budget.c, cpu.c, misuse.c); the inline fast paths (slqb/fast.h), the
 * other front ends with queues, and the layers above call them.
 */
#ifndef QSLAB_FRONT_QUEUE_H
#define QSLAB_FRONT_QUEUE_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

void *qs_alloc_slow(qslab_cache *c);
void *qs_alloc_slow_unsampled(qslab_cache *c); /* never a guarded sample */
void qs_free_slow(qslab_cache *c, struct qs_slab *s, void *obj);
size_t qs_slqb_shrink(qslab_cache *c); /* SLQB's shrink: every queue emptied, then the nodes */
void qs_queue_flush(qslab_cache *c, struct qs_queue *q, unsigned count);
void qs_free_full(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_queue_drain_stash(qslab_cache *c, struct qs_queue *q);
void qs_queue_send_pending(qslab_cache *c, struct qs_queue *q);
void qs_free_remote(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
/* The per-CPU free fast path's other outcomes (slqb/fast.h QS_PC_*). */
void qs_percpu_free_slow(qslab_cache *c, struct qs_slab *s, void *obj, int why);
void qs_percpu_empty(qslab_cache *c, struct qs_queue *q); /* q->lock held */
void qs_percpu_empty_all(qslab_cache *c);                 /* qs_global held */
void qs_queue_empty_out(qslab_cache *c, struct qs_queue *q); /* claim, flush all, drain */
/* A queue's stash of its own empty slabs, for its next refill without the
 * node's lock (SLUB's per-CPU partial lists, counted in bytes): tunable
 * stash_bytes, at most QS_MAX_STASH_BYTES (and empty_limit slabs). */
#define QS_STASH_BYTES ((size_t)128 << 10)     /* default */
#define QS_MAX_STASH_BYTES ((uint32_t)64 << 20)
void qs_queue_claim(qslab_cache *c, struct qs_queue *q);
/* Room for n more in a CPU's queue's slots (q->lock held, on q->cpu) */
bool qs_percpu_reserve(struct qs_queue *q, unsigned n);
/* The caller's CPU's queue of c, locked (attached if needed); NULL: none */
struct qs_queue *qs_percpu_lock(qslab_cache *c);
int qs_percpu_pop_one(qslab_cache *c, struct qs_queue *q, void **obj); /* cpu.c */
void *qs_percpu_refilled(qslab_cache *c, struct qs_queue *q, void **buf, unsigned n);
/* The caller's queue for a free: attached at a thread's 32nd free if it has
 * none (queue.c QS_FREE_ONLY_ATTACH); NULL: none yet */
struct qs_queue *qs_queue_for_free(qslab_cache *c);
/* q: the caller's queue, or NULL for a caller without one */
bool qs_double_free_check(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_free_direct(qslab_cache *c, void *obj); /* no queue: to its slab's owner */
void qs_free_suspect(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_queue_corrupt(qslab_cache *c, struct qs_queue *q);
/* A queued object whose word is neither the stamp nor a link: reported;
 * true if it is a second free (its word 0) */
bool qs_report_unstamped(qslab_cache *c, void *obj);
/* Route a list of objects (linked, count n) of cache c to their slabs' owners. */
void *qs_route_list(qslab_cache *c, struct qs_queue *q, void *head, unsigned long n);
/* Route n objects of an array (their links are written on the way). */
unsigned long qs_route_vec(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long n);

#pragma GCC visibility pop

#endif /* QSLAB_FRONT_QUEUE_H */
