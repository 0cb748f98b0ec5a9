/*
 * front/slub/slub.h - what the SLUB front end's files share among
 * themselves (slub.c's FILES says which holds what): the slab word's layout
 * and accessors and a slab's state (inline: used on every path, from the
 * owners' lists to validation), the counters (sl_stat), and the functions
 * one file calls in another (slub_, hidden).  Private to src/front/slub/:
 * no other folder includes it (front.h holds the front end's interface,
 * qs_front_slub).
 */
#ifndef QSLAB_FRONT_SLUB_H
#define QSLAB_FRONT_SLUB_H

#include "core/internal.h"
#include "front/slub/fast.h"
#include "front/front.h"

#pragma GCC visibility push(hidden)

/* ---- the slab word (THE SLAB WORD in slub.c) ---- */
#define FW_MASK ((1ULL << 24) - 1)
#define FW_FROZEN (1ULL << 48)
_Static_assert((QS_CHUNK_SIZE << 4) / 8 < FW_MASK, "slab word: an index for every object");

static inline uint32_t fw_head(uint64_t w)
{
    return (uint32_t)(w & FW_MASK);
}
static inline uint32_t fw_inuse(uint64_t w)
{
    return (uint32_t)((w >> 24) & FW_MASK);
}
static inline uint64_t fw_make(uint32_t head, uint32_t inuse, bool frozen)
{
    return (uint64_t)head | (uint64_t)inuse << 24 | (frozen ? FW_FROZEN : 0);
}
static inline uint64_t fw_load(struct qs_slab *s)
{
    return __atomic_load_n(&s->fw, __ATOMIC_ACQUIRE);
}
/* release: the links written before it (a free's, a deactivation's) are
 * seen by whoever takes the list after it (acquire) */
static inline bool fw_cas(struct qs_slab *s, uint64_t *old, uint64_t nw)
{
    return __atomic_compare_exchange_n(&s->fw, old, nw, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
static inline void *idx_obj(const qslab_cache *c, const struct qs_slab *s, uint32_t h)
{
    return h ? s->base + (size_t)(h - 1) * c->slot_size : NULL;
}
/* index + 1 of obj, an object of s: (off * recip) >> 64 is off / slot_size
 * exactly for the multiples of slot_size below 2^32 (recip's rounding
 * error times the index stays below 2^64) */
static inline uint32_t obj_idx(const struct qs_slab *s, const void *obj)
{
    uint64_t off = (uintptr_t)obj - (uintptr_t)s->base;
    return (uint32_t)(((unsigned __int128)off * s->recip) >> 64) + 1;
}
static inline void set_state(struct qs_slab *s, int st)
{
    __atomic_store_n(&s->state, (uint8_t)st, __ATOMIC_RELAXED);
}
static inline int get_state(const struct qs_slab *s)
{
    return __atomic_load_n(&s->state, __ATOMIC_RELAXED);
}
static inline uint32_t slab_objects(const struct qs_slab *s)
{
    return __atomic_load_n(&s->objects, __ATOMIC_RELAXED);
}

/* ---- counters ---- */
/* Inline: on the frees to a slab's word (a batch's every free), a call
 * cost more than the adds. */
static inline __attribute__((always_inline)) void sl_stat(qslab_cache *c, struct qs_queue *q, int item,
                                                          unsigned long n)
{
    if (!q)
        __atomic_fetch_add(&c->orphan_stat[item], n, __ATOMIC_RELAXED);
    else if (q->cpu >= 0) /* see COUNTERS in slub.c */
        __atomic_fetch_add(&q->stat[item], n, __ATOMIC_RELAXED);
    else
        QS_ADD(q->stat[item], n);
}

/* ---- slub.c: the owners ---- */
/* The caller's queue for c (attached if it has none); NULL: it cannot have
 * one (a thread past its exit, a CPU without rseq). */
struct qs_queue *slub_my_queue(qslab_cache *c);
/* A free object whose link was overwritten: reported (qs_fatal). */
void slub_corrupt_link(qslab_cache *c, void *obj);
#if QS_HAVE_PERCPU
/* The lock holder's detach of q's list (q->lock held): 0 (the list in *fl,
 * q's active slab cleared) or QS_RSEQ_MOVED (not on q's CPU). */
int slub_pc_detach(struct qs_queue *q, void **fl);
#endif

/* ---- slabs.c: the slabs' word, states and lists ---- */
void slub_discard_locked(qslab_cache *c, struct qs_node *n, struct qs_slab *s,
                         struct qs_slab **release);
void slub_release_after(qslab_cache *c, struct qs_queue *q, struct qs_node *n,
                        struct qs_slab *rel);
void slub_put_partials(qslab_cache *c, struct qs_queue *q, struct qs_slab *list);
void slub_deactivate(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *fl);
void slub_slab_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj, bool user);
void *slub_alloc_single(qslab_cache *c, struct qs_queue *q, int node);
void *slub_new_freelist(qslab_cache *c, struct qs_queue *q, struct qs_slab *old,
                        struct qs_slab **sp, void **bare);

/* ---- cachewide.c: the cache-wide hooks of qs_front_slub (slub.c) ---- */
void slub_retire(qslab_cache *c, struct qs_queue *q);
void slub_idle(qslab_cache *c, struct qs_queue *q);
size_t slub_shrink(qslab_cache *c);
size_t slub_sweep(bool all);
void slub_destroy(qslab_cache *c, struct qs_slab **all);
unsigned slub_order(const qslab_cache *c);
void slub_validate(qslab_cache *c, struct qs_walk *w);

#pragma GCC visibility pop

#endif /* QSLAB_FRONT_SLUB_H */
