/*
 * front.c - what every front end and every layer above share (front.h):
 * the table of front ends (qs_fronts, filled at start-up by registry.c and
 * the debug layer) and the selection of a cache's; what follows from a
 * cache's front end: its fast paths' kind bytes, objects per slab, the
 * default order, the sum of its counters (qs_stats_sum: the statistics,
 * validation, destroy's live objects); the validation walker's reports
 * (qs_walk_problem).  It names no front end's module: the modules build
 * on it, and registry.c, above them all, names each.
 *
 * QSLAB_FRONT=slqb|slub|slab|slob picks the front end of every cache made from then on
 * (the kmalloc caches included: they are made at start-up); the `front`
 * tunable changes one cache's before its first allocation (tune.c), e.g.
 * QSLAB_TUNE="conn:front=slob".  A cache keeps its front end for life.
 */
#include "front/front.h"
#include "core/hooks.h"

#include <string.h>

/* Filled in at start-up, before any cache is made: the front ends by the
 * registry (registry.c qs_front_hooks_register), the debug front end by
 * the debug layer (debug.c qs_debug_hooks_register); read-only after. */
const struct qs_front *qs_fronts[QS_FRONT_NR];

void qs_front_set(qslab_cache *c, int f)
{
    c->front = (uint8_t)f;
    c->keeps_fbits = !qs_fronts[f]->own_free_state;
    /* the slabs' copy: set before the first slab (tune.c refuses a front
     * end after the first allocation), never changed after */
    unsigned own = qs_percpu() ? QS_FAST_CPU : QS_FAST_THREAD;
    c->free_fast = (uint8_t)(f == QS_FRONT_SLUB ? own + QS_FAST_SLUB_THREAD : own);
    qs_front_fast(c);
}

/* The fast path of c's allocations (internal.h QS_FAST_*; its slabs'
 * frees' is free_fast, qs_front_set), by its front end and the owner
 * kind: SLUB's own for a SLUB cache (front/slub/fast.h), the owners'
 * queues for every other (SLQB's, SLAB's arrays; the other front ends'
 * queues are inert, so their fast paths miss to the slow paths, which are
 * theirs).  A SLUB cache's allocations take the queues' path (always a
 * miss: the slow path, with its checks, then SLUB's) while it has a debug
 * twin (whose diversion is on the slow path) or guarded sampling is on
 * (which counts a front end without queues on its slow path:
 * debug/guard.c).  Called when any of that changes: the front end set
 * (before the first allocation), a twin coming or going (debug/twin.c),
 * sampling turned on (guard.c).  Relaxed stores: a fast path that read the
 * old value takes the old route once more, which stays correct: both end
 * in the same slow paths, and SLUB's list, which a twin or a sample
 * bypasses only for the objects it holds, is the owner's either way. */
void qs_front_fast(qslab_cache *c)
{
    unsigned own = qs_percpu() ? QS_FAST_CPU : QS_FAST_THREAD;
    bool slub = c->front == QS_FRONT_SLUB && !QS_LOAD(c->dbg_alloc) && !QS_LOAD(qs_guard_on);
    QS_STORE(c->fast, (uint8_t)(slub ? own + QS_FAST_SLUB_THREAD : own));
    if (c->is_kmalloc && qs_api_hooks.kmalloc_fast)
        qs_api_hooks.kmalloc_fast(c);
}

void qs_front_fast_all(void)
{
    for (qslab_cache *c = qs_caches; c; c = c->next)
        qs_front_fast(c);
}

unsigned qs_front_objs_per_slab(const qslab_cache *c, unsigned order)
{
    const struct qs_front *f = qs_front_of(c);
    return f->objs_per_slab ? f->objs_per_slab(c, order) : qs_slab_objects(c, order);
}

unsigned qs_front_order(const qslab_cache *c, int f)
{
    unsigned o = qs_fronts[f]->order ? qs_fronts[f]->order(c)
                                     : qs_slab_default_order(c->slot_size, c->align);
    /* a front end that keeps free bits: a granule to each slot (core/slab.h) */
    return qs_fronts[f]->own_free_state || o < c->max_order ? o : c->max_order;
}

/* The room of a kmalloc object of slab s: its class's size, unless it is
 * alone in its slab (the classes from 20 KiB up, one to a slab: core/slab.c
 * picks their order), whose room is the slab up to the power of two of its
 * class.  So a block that realloc grows by small steps (a buffer appended
 * to) moves once per power of two, not once per class: each move copies it
 * into pages it touches for the first time (the 4-thread Python program of
 * `make bench`, whose bytearrays grow to 200 KB: 9,400 of its 18,900 page
 * faults were realloc's copies).  The pages past what the program writes
 * are never touched, as before.  Bounded by the power of two, so that a
 * request for the class is always over half its room (free_sized's and
 * realloc's rules); a debug cache's objects (red zones) have their own
 * hook, and a front end that keeps data past the objects (SLAB's index
 * arrays) keeps its blocks to their class.  SLOB's blocks too big for its
 * runs are such objects (slob.c's usable hook asks here). */
size_t qs_front_kmalloc_room(const struct qs_slab *s)
{
    size_t slot = s->cache->slot_size;
    if (slot < QS_KM_ROOM_FROM || qs_front_of(s->cache)->slab_tail_used)
        return slot;
    size_t room = qs_slab_bytes(s->order) - (size_t)(s->base - s->mem);
    if (room >= 2 * slot)
        return slot; /* several to a slab */
    size_t pow2 = (size_t)1 << (64 - __builtin_clzl(slot - 1));
    return room < pow2 ? room & ~(size_t)15 : pow2;
}

/* Counters live in the queues (one writer each, relaxed stores); queues
 * are never freed while their cache lives, so a sum over c->queues under
 * qs_global sees every event, including those of exited threads. */
QS_NOINLINE void qs_stats_sum(qslab_cache *c, unsigned long *sum)
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
    for (int n = 0; n < qs_nr_nodes; n++)
        qs_node_events_sum(&c->nodes[n], sum);
}

void qs_walk_problem(struct qs_walk *w, const char *what, const void *where)
{
    w->errors++;
    qs_warn("validate %s: %s at %p", w->c->name, what, where);
}

int qs_front_default = QS_FRONT_SLQB;

int qs_front_find(const char *name, size_t len)
{
    for (int i = 0; i < QS_FRONT_NAMED; i++)
        if (strlen(qs_fronts[i]->name) == len && memcmp(qs_fronts[i]->name, name, len) == 0)
            return i;
    return -1;
}

QS_STARTUP void qs_front_init(void)
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
