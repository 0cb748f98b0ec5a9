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
