/*
 * core/queue.h - the owners' queues' slow paths, which the SLQB front end
 * implements (front/slqb/) and every layer with queues calls: refill, flush,
 * remote frees, claims, the per-CPU queues' operations; and the arithmetic
 * of a queue's counters: their seqcount (qs_queue_seq_begin, _end) and what
 * turns the raw counters into events (qs_calc_queue).  Part of
 * core/internal.h, which includes it where the types it needs are defined.
 */
#ifndef QSLAB_CORE_QUEUE_H
#define QSLAB_CORE_QUEUE_H

#ifndef QSLAB_INTERNAL_H
#error "core/queue.h is part of core/internal.h: include that"
#endif

/* ---- front/slqb: queue.c, remote.c, budget.c, cpu.c ---- */
void *qs_alloc_slow(qslab_cache *c);
void *qs_alloc_slow_unsampled(qslab_cache *c); /* never a guarded sample */
void qs_free_slow(qslab_cache *c, struct qs_slab *s, void *obj);
size_t qs_slqb_shrink(qslab_cache *c); /* SLQB's shrink: every queue emptied, then the nodes */
void qs_queue_flush(qslab_cache *c, struct qs_queue *q, unsigned count);
void qs_free_full(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_queue_drain_stash(qslab_cache *c, struct qs_queue *q);
void qs_queue_send_pending(qslab_cache *c, struct qs_queue *q);
void qs_free_remote(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
/* The per-CPU free fast path's other outcomes (fastpath.h QS_PC_*). */
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
/* Take a CPU's queue from its CPU (its fast paths miss until given back:
 * a membarrier restarts any section running there); false: impossible
 * (no membarrier).  The caller holds q->lock. */
bool qs_percpu_take(struct qs_queue *q);
void qs_percpu_give(struct qs_queue *q);
/* q: the caller's queue, or NULL for a caller without one */
bool qs_double_free_check(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_free_direct(qslab_cache *c, void *obj); /* no queue: to its slab's owner */
void qs_free_suspect(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);
void qs_free_other(void *p);
void qs_queue_corrupt(qslab_cache *c, struct qs_queue *q);
/* A queued object whose word is neither the stamp nor a link: reported;
 * true if it is a second free (its word 0) */
bool qs_report_unstamped(qslab_cache *c, void *obj);
/* Route a list of objects (linked, count n) of cache c to their slabs' owners. */
void *qs_route_list(qslab_cache *c, struct qs_queue *q, void *head, unsigned long n);
/* Route n objects of an array (their links are written on the way). */
unsigned long qs_route_vec(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long n);

/* The writers' side (core/slab.c): a slow change of a CPU's queue's nr by
 * `moved` (the net change, made by the sections between these two) is
 * recorded in moved inside the seqcount, as qs_queue_nr_set does for a
 * thread's queue (the readers below pair nr and moved).  Between the two
 * with moved = k and no section: k frees counted through q were no frees
 * (second frees of one object, dropped), out of the derived FREE_FAST
 * (free_fast = nr + pops - moved): qs_uncount_frees. */
void qs_queue_seq_begin(struct qs_queue *q);
void qs_queue_seq_end(struct qs_queue *q, long moved);

/* The readers' side: one queue's counters, as read (a consistent pair of
 * top and moved: the reader retried while nr_seq was odd or moved), by the
 * library (qs_stats_sum, front.c: atomic loads under qs_global) or by the
 * reader of another process (tools/: process_vm_readv). */
struct qs_queue_raw {
    unsigned long stat[QS_STAT_NR];
    unsigned long moved;
    uint64_t top, fb;
    uint32_t fb_base;
    uint64_t sl_pops, sl_pushes; /* SLUB's exact fast counters */
};

/* Add one queue's events to sum[QS_STAT_NR].  queues: the cache's front
 * end has SLQB's queues (free_fast derived); otherwise its fast counters
 * are exact.  *pops_seen, *pops_raw: the fast pops accumulated so far and
 * the raw count of `top` then (pops wrap at 2^43); updated (the in-process
 * reader stores them back, an outside reader keeps the target's). */
static inline void qs_calc_queue(const struct qs_queue_raw *r, bool queues, unsigned long *pops_seen,
                                 uint64_t *pops_raw, unsigned long *sum)
{
    unsigned long st[QS_STAT_NR];
    for (int i = 0; i < QS_STAT_NR; i++)
        st[i] = r->stat[i];
    if (!queues) { /* counted as they happen (slub.c) */
        st[QS_ALLOC_FAST] += r->sl_pops;
        st[QS_FREE_FAST] += r->sl_pushes;
    } else {
        uint64_t raw = QS_TOP_POPS(r->top);
        *pops_seen += (raw - *pops_raw) & (((uint64_t)1 << (64 - QS_TOP_SHIFT)) - 1);
        *pops_raw = raw;
        st[QS_ALLOC_FAST] += *pops_seen;
        unsigned long nr = QS_TOP_NR(r->top);
        st[QS_FREE_FAST] = nr + st[QS_ALLOC_FAST] + st[QS_ALLOC_SLOW] - st[QS_NODE_ALLOC] - r->moved;
        if (r->fb && QS_FB_N(r->fb) >= r->fb_base)
            st[QS_FREE_FAST] += QS_FB_N(r->fb) - r->fb_base;
    }
    for (int i = 0; i < QS_STAT_NR; i++)
        sum[i] += st[i];
}

#endif /* QSLAB_CORE_QUEUE_H */
