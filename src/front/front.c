/*
 * front.c - the front ends' registry and their selection (front.h); what
 * follows from a cache's front end for every layer above: objects per
 * slab, the default order, the sum of its counters (qs_stats_sum: the
 * statistics, validation, destroy's live objects).
 *
 * QSLAB_FRONT=slqb|slub|slab|slob picks the front end of every cache made from then on
 * (the kmalloc caches included: they are made at start-up); the `front`
 * tunable changes one cache's before its first allocation (tune.c), e.g.
 * QSLAB_TUNE="conn:front=slob".  A cache keeps its front end for life.
 */
#include "front/front.h"

#include <string.h>

/* SLQB: the inline fast paths and queue.c's slow paths are its own; only
 * shrink is a hook (cache.c). */
const struct qs_front qs_front_slqb = {
    .name = "slqb",
    .what = "per-owner LIFO queues, remote frees batched home (SLQB)",
    .shrink = qs_slqb_shrink,
    .queues = true,
    .idle_queues = true,
    .owns_slabs = true,
};

const struct qs_front *const qs_fronts[QS_FRONT_NR] = {
    [QS_FRONT_SLQB] = &qs_front_slqb,
    [QS_FRONT_SLOB] = &qs_front_slob,
    [QS_FRONT_SLUB] = &qs_front_slub,
    [QS_FRONT_SLAB] = &qs_front_slab,
    [QS_FRONT_DEBUG] = &qs_front_debug,
};

unsigned qs_front_objs_per_slab(const qslab_cache *c, unsigned order)
{
    const struct qs_front *f = qs_front_of(c);
    return f->objs_per_slab ? f->objs_per_slab(c, order) : qs_slab_objects(c, order);
}

unsigned qs_front_order(const qslab_cache *c, int f)
{
    if (qs_fronts[f]->order)
        return qs_fronts[f]->order(c);
    return qs_slab_default_order(c->slot_size, c->align);
}

/* Counters live in the queues (one writer each, relaxed stores); queues
 * are never freed while their cache lives, so a sum over c->queues under
 * qs_global sees every event, including those of exited threads. */
void qs_stats_sum(qslab_cache *c, unsigned long *sum)
{
    memset(sum, 0, sizeof(unsigned long) * QS_STAT_NR);
    bool queues = qs_front_of(c)->queues;
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        struct qs_queue_raw r;
        /* the seqcount pairs nr with moved (qs_queue_nr_set); an owner busy
         * in its slow paths gets a few tries, then its last reading */
        for (int tries = 0;; tries++) {
            unsigned seq = __atomic_load_n(&q->nr_seq, __ATOMIC_ACQUIRE);
            r.moved = QS_LOAD(q->moved);
            for (int i = 0; i < QS_STAT_NR; i++)
                r.stat[i] = QS_LOAD(q->stat[i]);
            r.top = QS_LOAD(q->top); /* after the slow pops: undercount, never over */
            r.fb = QS_LOAD(q->fb); /* a CPU's open batch: fast frees not counted yet */
            r.fb_base = QS_LOAD(q->fb_base);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if ((!(seq & 1) && QS_LOAD(q->nr_seq) == seq) || tries >= 1000)
                break;
        }
        r.sl_pops = QS_LOAD(q->sl.pops);
        r.sl_pushes = QS_LOAD(q->sl.pushes);
        /* fast pops count in top and wrap at 2^43: accumulate what moved
         * since the last reading (exact while every queue is read at least
         * once per 2^43 of its allocations; the purger reads them all) */
        qs_calc_queue(&r, queues, &q->pops_seen, &q->pops_raw, sum);
    }
    for (int i = 0; i < QS_STAT_NR; i++)
        sum[i] += QS_LOAD(c->orphan_stat[i]);
}

int qs_front_default = QS_FRONT_SLQB;

int qs_front_find(const char *name, size_t len)
{
    for (int i = 0; i < QS_FRONT_NAMED; i++)
        if (strlen(qs_fronts[i]->name) == len && memcmp(qs_fronts[i]->name, name, len) == 0)
            return i;
    return -1;
}

void qs_front_init(void)
{
    const char *v = qs_os_getenv("QSLAB_FRONT");
    if (v && *v) {
        int f = qs_front_find(v, strlen(v));
        if (f < 0)
            qs_warn("QSLAB_FRONT=%s ignored: the front ends are " QS_FRONT_NAMES, v);
        else
            qs_front_default = f;
    }
}

QSLAB_EXPORT const char *qslab_cache_front(const qslab_cache *c)
{
    return c ? qs_front_of(c)->name : NULL;
}
