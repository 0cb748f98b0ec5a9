/*
 * core/queue.h - the arithmetic of a queue's counters and limits: their
 * seqcount (qs_queue_seq_begin, _end, qs_queue_nr_set), what turns the raw
 * counters into events (qs_calc_queue), an event counted (qs_stat), how
 * many objects a queue may hold (qs_queue_max, qs_queue_limit_set).  The
 * queues' slow paths are front/queue.h's.  Part of core/internal.h, which
 * includes it where the types it needs are defined.
 */
#ifndef QSLAB_CORE_QUEUE_H
#define QSLAB_CORE_QUEUE_H

#ifndef QSLAB_INTERNAL_H
#error "core/queue.h is part of core/internal.h: include that"
#endif

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

/* A slow-path change of the queue's nr (in top: refill, claim, flush,
 * drops), by the owner thread (or by whoever took a CPU's queue).
 * Frees on the fast path are not counted there (a store saved per free):
 * each push adds one to nr and nothing else does without going through
 * here or a pop, so per queue
 *     free_fast = nr + pops - moved,
 *     pops = ALLOC_FAST + ALLOC_SLOW - NODE_ALLOC (node allocs skip the queue).
 * nr and moved change together inside nr_seq (a seqcount: odd while
 * changing), so a reader never pairs a new nr with an old moved; fast-path
 * pops between a reader's loads can only make it undercount (qs_stats_sum
 * reads pops before nr). */
static inline void qs_queue_nr_set(struct qs_queue *q, unsigned nr)
{
    unsigned seq = q->nr_seq;
    QS_STORE(q->nr_seq, seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint64_t t = q->top;
    QS_STORE(q->moved, q->moved + (unsigned long)nr - QS_TOP_NR(t));
    QS_STORE(q->top, (t & ~QS_TOP_NR_MASK) | nr);
    __atomic_store_n(&q->nr_seq, seq + 2, __ATOMIC_RELEASE);
}

/* How many objects q may hold: its grant from the owner budget, at most
 * hiwater (queue.c); the fast paths push below limit = that, at most cap.
 * Stored relaxed: the fast paths read it, tune and the guard sampler only
 * ever lower it; q's owner (a CPU's queue: q->lock's holder) raises it. */
static inline uint32_t qs_queue_max(const struct qs_queue *q)
{
    uint32_t hw = QS_LOAD(q->hiwater), g = q->grant;
    return g < hw ? g : hw;
}
static inline void qs_queue_limit_set(struct qs_queue *q)
{
    uint32_t m = qs_queue_max(q);
    QS_STORE(q->limit, m < q->cap ? m : q->cap);
}

/* An allocation given straight back (alloc_node's object of another node):
 * neither counted (the cache's counters absorb both) */
static inline void qs_uncount_pair(qslab_cache *c)
{
    __atomic_fetch_sub(&c->orphan_stat[QS_ALLOC_SLOW], 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&c->orphan_stat[QS_FREE_SLOW], 1, __ATOMIC_RELAXED);
}

/* Count an event: in the caller's queue (one writer, plain stores), or in
 * the cache's orphan counters (atomic) when the caller has no queue. */
static inline void qs_stat(qslab_cache *c, struct qs_queue *q, int item, unsigned long n)
{
    if (likely(q != NULL))
        QS_ADD(q->stat[item], n);
    else
        __atomic_fetch_add(&c->orphan_stat[item], n, __ATOMIC_RELAXED);
}

/* As qs_stat, of node event nev (QS_NEV_*), by a caller that holds node
 * n's lock: a caller without a queue counts in the node (plain adds, under
 * the lock), not in the cache's orphan counters. */
static inline void qs_stat_locked(struct qs_queue *q, struct qs_node *n, int nev, unsigned long k)
{
    if (q != NULL)
        QS_ADD(q->stat[qs_node_ev_stat[nev]], k);
    else
        QS_ADD(n->ev[nev], k);
}

#endif /* QSLAB_CORE_QUEUE_H */
