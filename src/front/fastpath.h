/*
 * fastpath.h - the allocation and free fast paths (inline): each front
 * end's own, chosen by one compare of a byte in memory, the cache's fast
 * (or for a free the slab's copy, in the descriptor's first line; for
 * malloc the class table's, beside the class): the owners' queues per CPU
 * or per thread (front/slqb/fast.h: SLQB's, and SLAB's arrays), or SLUB's
 * own (front/slub/fast.h); QS_FAST_DISPATCH below.  The front ends without
 * a fast path of their own (SLOB, debug caches) have inert queues: their
 * allocations miss to the slow paths, which are theirs.  Each module's
 * fast.h states its loads and stores.
 * Instructions: bench/fastpath_budget.py (a test) holds each front end's
 * and owner kind's count for a 64-byte pair and a batch of 1,000, measured
 * with callgrind, and fails when a change adds to them.
 */
#ifndef QSLAB_FASTPATH_H
#define QSLAB_FASTPATH_H

#include "core/internal.h"
#include "front/slqb/fast.h"
#include "front/slub/fast.h"

#pragma GCC visibility push(hidden) /* as internal.h */

/* The choice of fast path by the kind byte at kp (internal.h QS_FAST_*:
 * c->fast, s->fast, kmalloc's class tables): one compare of the byte in
 * memory with QS_FAST_CPU; the per-thread queues' (below) jump to label
 * `thread`, SLUB's (above) to `other`, and the per-CPU queues' fall
 * through, with no taken branch (a jump to them cost the default path 2
 * cycles a pair, 12%, for one instruction fewer).  In C, GCC loads the
 * byte into a register first.  The byte is written while other threads
 * allocate (front.c qs_front_fast): a stale value takes the old route once
 * more, which stays correct. */
#if QS_HAVE_PERCPU
#define QS_FAST_DISPATCH(kp, thread, other)                                                        \
    __asm__ goto("cmpb $1, %0\n\t" /* QS_FAST_CPU */                                           \
                 "jb %l1\n\t"                                                                     \
                 "ja %l2\n\t"                                                                     \
                 :                                                                                 \
                 : "m"(*(const uint8_t *)(kp))                                                     \
                 : "cc"                                                                            \
                 : thread, other)
#else
#define QS_FAST_DISPATCH(kp, thread, other)                                                        \
    do {                                                                                           \
        if (likely(*(const uint8_t *)(kp) == QS_FAST_THREAD))                                       \
            goto thread;                                                                           \
        goto other;                                                                                \
    } while (0)
#endif
_Static_assert(QS_FAST_THREAD == 0 && QS_FAST_CPU == 1 && QS_FAST_SLUB_THREAD > 1,
               "QS_FAST_DISPATCH: thread below, SLUB above");

/* An allocation's fast path, by the kind byte at kp: the object, its word
 * cleared, or NULL for the slow path. */
static inline __attribute__((always_inline)) void *qs_alloc_fast_at(unsigned long id,
                                                                    unsigned long link_off,
                                                                    const uint8_t *kp)
{
    QS_FAST_DISPATCH(kp, thread, slub);
#if QS_HAVE_PERCPU
    return qs_percpu_alloc(id, link_off);
#endif
thread:;
    struct qs_queue *q = qs_queue_fast(id);
    /* empty, or a bad word (reported by the slow path) */
    return qs_queue_try_pop(q, QS_ALLOC_FAST, (uint32_t)link_off);
slub:;
    /* QS_FAST_SLUB_CPU exactly when the owners are CPUs (qs_front_fast) */
    return qs_slub_alloc_fast(id, link_off);
}

static inline void *qs_alloc_fast(qslab_cache *c)
{
    void *obj = qs_alloc_fast_at(c->id, c->link_off, &c->fast);
    return likely(obj != NULL) ? obj : qs_alloc_slow(c);
}

/* Free obj (validated: an object of slab s of cache c).  The queue is found
 * through the slab's copy of the cache id, in parallel with loading c.
 * c may be NULL (qs_free_fast_slab): the cache is then read from the slab
 * only on the paths that need it, none of them the common one. */
static inline __attribute__((always_inline)) void qs_free_fast_in(qslab_cache *c, struct qs_slab *s,
                                                                  void *obj)
{
    /* s->fast: the slab's cache's free_fast, set with cache_id */
    QS_FAST_DISPATCH(&s->fast, thread, slub);
#if QS_HAVE_PERCPU
    qs_queue_free_cpu(c, s, obj);
    return;
#endif
slub:
    qs_slub_free(s, obj); /* a tail call: the other paths keep their registers */
    return;
thread:
    qs_queue_free_thread(c, s, obj);
}

static inline __attribute__((always_inline)) void qs_free_fast(qslab_cache *c, struct qs_slab *s, void *obj)
{
    qs_free_fast_in(c, s, obj);
}

/* As qs_free_fast, the cache read from the slab where a slow path needs it */
static inline __attribute__((always_inline)) void qs_free_fast_slab(struct qs_slab *s, void *obj)
{
    qs_free_fast_in(NULL, s, obj);
}

#pragma GCC visibility pop

#endif /* QSLAB_FASTPATH_H */
