/*
 * queue.c - the owner's object queue: slow paths.
 *
 * ALLOC SLOW PATH (the queue is empty), refill_gather, in order:
 *   1. claim the inbox: remote frees other owners posted to us go into the
 *      queue's slots, up to its room, the rest back to their slabs (SLQB's
 *      claim_remote_free_list);
 *   2. refill from slabs: walk slabs' free lists into the slots until they
 *      hold c->refill objects (half a batch, at most 64 KiB): our own
 *      partial slabs first, then our stash of empty slabs, then the node's
 *      partial and empty slabs (one lock for several slabs), then new
 *      memory: a slab of ours that can grow (lazy birth, core/slab.c) or a new
 *      slab, until c->fresh objects (QS_REFILL_MIN, at most a page's
 *      worth), born straight into the slots.  A slab whose free list went to
 *      the queue is FULL, unless it can grow.
 * A thread's queue is refilled in place; a CPU's refill gathers into a
 * buffer under q->lock and pushes it in a section (percpu_alloc_slow).
 * FREE SLOW PATHS:
 *   - an object of a slab we do not own (another thread's, a node's) goes
 *     on our queue only while the queue is short (c->park: hiwater/4 and
 *     16 KiB) and the object is of our node; otherwise it
 *     joins the pending batch for its owner (pending_add, SLQB's rlist),
 *     posted to the owner's inbox under one lock, or freed under the node's
 *     lock, freebatch objects at a time;
 *   - the queue is at hiwater: an object of our own slab goes straight onto
 *     the slab's free list (qs_free_full; a CPU's queue flushes freebatch
 *     objects home first, SLQB's flush_free_list); slabs that become empty
 *     go to our stash, handed to the node's empty FIFO a few at a time.
 * qs_queue_flush (shrink, trim) takes objects off the queue and routes each
 * to its slab's owner, walking them once, with the same batching.
 *
 * Producer/consumer traffic stays bounded: a consumer parks at most
 * park + QS_PENDING * freebatch of the producer's objects (park at most
 * 16 KiB, tune.c qs_tune_derive), and the rest return to the producer's inbox, which the producer claims before it
 * makes any new slab.
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "debug/debug.h"
#include "owner/owner.h"

#include <errno.h>

#define QS_ROUTE_BATCHES 8

/* obj, going onto slab s's free list, is on it already (its free bit,
 * internal.h): it was freed again while it sat there, and that second free
 * wrote over its link (a queue's stamp, a batch's link), cutting the list
 * at obj.  The list ends before obj now (a walk on this error path only);
 * what followed obj is lost for good (counted in use, never handed out);
 * obj goes back on the list, once.  The caller reports (put_twice_report). */
static QS_NOINLINE void slab_put_twice(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (s->inuse == 0) {
        /* every object of the slab is free (obj too): the slab went empty
         * with its first free and is on an empties list already (a
         * router's, the stash, the node's FIFO), where it stays.  Its list
         * is rebuilt whole, nothing lost (fuzz bug 10: moved to an empties
         * list a second time, it was handed to two refills) */
        qs_fbits_clear_slab(s);
        s->freelist = NULL;
        for (uint32_t i = s->objects; i-- > 0;) {
            void *o = s->base + (size_t)i * c->slot_size;
            *qs_link(c, o) = qs_enc(c, s->freelist);
            if (!s->freelist)
                s->tail = o;
            s->freelist = o;
            qs_fbit_set(s, o);
        }
        return;
    }
    uint32_t n = s->objects - s->inuse, len = 0;
    void *prev = NULL, *p = s->freelist;
    while (p && p != obj && len < n) {
        bool bad;
        void *next = qs_list_next(c, s, *qs_link(c, p), &bad);
        if (bad)
            break;
        prev = p;
        p = next;
        len++;
    }
    qs_fbits_clear_slab(s);
    if (prev)
        *qs_link(c, prev) = qs_enc(c, NULL);
    else
        s->freelist = NULL;
    s->tail = prev;
    p = s->freelist;
    for (uint32_t i = 0; i < len; i++) {
        bool bad;
        qs_fbit_set(s, p);
        p = qs_dec(c, *qs_link(c, p), &bad);
    }
    s->inuse = s->objects - len; /* obj too: it goes back now */
    qs_fbit_set(s, obj);
    qs_slab_give(c, s, obj);
}

/* Report what slab_put_twice repaired; the second free was counted where
 * it was pushed (through q, or the cache's orphan counters). */
static QS_NOINLINE void put_twice_report(qslab_cache *c, struct qs_queue *q, void *obj)
{
    qs_fatal("double free of %p in cache %s (freed again while it was free)", obj, c->name);
    qs_uncount_frees(c, q, 1);
}

/* Owner-side free of obj to slab s on list l; empties collected on *empties.
 * False: obj was free in s already (repaired: slab_put_twice); the caller
 * reports it (put_twice_report), unlocked where it can. */
static inline bool slab_put(qslab_cache *c, struct qs_list *l, struct qs_slab *s, void *obj,
                            struct qs_slab **empties)
{
    bool was_full = s->state == QS_SLAB_FULL;
    uint64_t bit, *w = qs_fbit_word(s, obj, &bit), v = *w;
    bool once = !(v & bit);
    if (likely(once)) {
        *w = v | bit;
        qs_slab_give(c, s, obj);
    } else {
        bool was_empty = s->inuse == 0;
        slab_put_twice(c, s, obj);
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


/* Free a batch of objects whose slabs were owned by node list b->to. */
static void send_node(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    struct qs_node *n = b->to->node;
    struct qs_slab *empties = NULL, *release = NULL;
    void *again = NULL;
    unsigned long nagain = 0, done = 0;
    void *obj = b->head, *corrupt = NULL, *twice[8];
    unsigned long count = b->n, ntwice = 0;
    qs_lock_acquire(&n->lock);
    for (unsigned long i = 0; i < count; i++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, obj), &bad);
        if (unlikely(bad)) {
            /* follow nothing more, and leave obj alone: a stamp or 0 says
             * it is also queued or handed out (that entry brings it back),
             * anything else was written after its free (lost); reported
             * unlocked */
            corrupt = obj;
            break;
        }
        struct qs_slab *s = qs_slab_lookup(obj);
        if (qs_slab_owner(s) == b->to) {
            if (unlikely(!slab_put(c, &n->list, s, obj, &empties))) {
                if (ntwice < 8)
                    twice[ntwice++] = obj;
                else /* a ninth in one batch: reported under the lock */
                    put_twice_report(c, q, obj);
            }
            done++;
        } else { /* taken by a thread since we looked: route again */
            *qs_link(c, obj) = qs_enc(c, again);
            again = obj;
            nagain++;
        }
        obj = next;
    }
    if (empties)
        qs_node_put_empty_locked(c, n, empties, &release);
    qs_lock_release(&n->lock);
    for (unsigned long i = 0; i < ntwice; i++)
        put_twice_report(c, q, twice[i]);
    if (corrupt)
        qs_report_bad_link(c, q, corrupt);
    qs_node_release_list(c, q, release, NULL);
    qs_stat(c, q, QS_NODE_FREE, done);
    if (nagain)
        qs_route_list(c, q, again, nagain);
}

/* Free obj of node-owned slab s, for a cache whose slabs all belong to
 * their nodes (the debug front end): under the node's lock, the debug
 * checks, then the slab's free list.  An object the checks refuse
 * (reported) is left alone. */
void qs_node_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    struct qs_node *n = &c->nodes[s->node];
    struct qs_slab *empties = NULL, *release = NULL;
    qs_lock_acquire(&n->lock);
    if (unlikely(qs_slab_owner(s) != &n->list)) { /* not a node's slab: route it */
        qs_lock_release(&n->lock);
        qs_free_direct(c, obj);
        return;
    }
    if (c->debug && !qs_debug_free_locked(c, s, obj)) {
        qs_lock_release(&n->lock);
        return;
    }
    bool once = slab_put(c, &n->list, s, obj, &empties);
    if (empties)
        qs_node_put_empty_locked(c, n, empties, &release);
    qs_lock_release(&n->lock);
    if (unlikely(!once))
        put_twice_report(c, NULL, obj);
    qs_node_release_list(c, NULL, release, NULL);
    qs_stat(c, NULL, QS_FREE_SLOW, 1);
    qs_stat(c, NULL, QS_NODE_FREE, 1);
}

/* Post a batch to the inbox of the queue that owns list b->to. */
static void send_inbox(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    struct qs_queue *t = (struct qs_queue *)((char *)b->to - __builtin_offsetof(struct qs_queue, list));
    qs_lock_acquire(&t->inbox.lock);
    if (unlikely(t->inbox.dead)) {
        /* the owner exited and handed its slabs to the node lists after we
         * read slab->owner: the new owners are visible now (inbox lock) */
        qs_lock_release(&t->inbox.lock);
        qs_route_list(c, q, b->head, b->n);
        return;
    }
    if (t->inbox.head)
        *qs_link(c, t->inbox.tail) = qs_enc(c, b->head);
    else
        t->inbox.head = b->head;
    t->inbox.tail = b->tail;
    t->inbox.nr += b->n;
    __atomic_store_n(&t->inbox.pending, 1, __ATOMIC_RELAXED);
    qs_lock_release(&t->inbox.lock);
    qs_stat(c, q, QS_REMOTE_FREE, b->n);
    qs_stat(c, q, QS_REMOTE_BATCH, 1);
}

static void send_batch(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    if (!b->n)
        return;
    if (b->to->node)
        send_node(c, q, b);
    else
        send_inbox(c, q, b);
    b->n = 0;
    b->head = b->tail = NULL;
    b->to = NULL;
}

/* The batch of b[0..nb) bound for owner `to`: the open one, else an unused
 * one, else one sent to make room (round robin on *victim). */
static struct qs_batch *batch_for(qslab_cache *c, struct qs_queue *q, struct qs_batch *b, unsigned nb,
                                  unsigned *victim, struct qs_list *to)
{
    struct qs_batch *unused = NULL;
    for (unsigned k = 0; k < nb; k++) {
        if (b[k].to == to)
            return &b[k];
        if (!b[k].to && !unused)
            unused = &b[k];
    }
    if (!unused) {
        unused = &b[(*victim)++ % nb];
        send_batch(c, q, unused);
    }
    unused->to = to;
    return unused;
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
        send_batch(c, q, b);
}

/* ---- The owner budget ----
 * Each owner (a CPU, or a thread) has one byte budget, qs_owner_budget
 * (tunable owner_budget: tune.c), shared by all its SLQB queues: a queue
 * holds at most its grant of objects (its limit is min(grant, hiwater,
 * cap), refills stop at it), and empty slabs stay in its stash only while
 * the budget has room.  owner->budget_used is the sum of its queues'
 * grant x slot_size and stash bytes; it never exceeds the budget (only
 * for a moment after the budget is lowered: the next misses give back the
 * difference).  So what an owner keeps that is not in use grows with the
 * caches it uses hot, not with the caches it has ever used: tcmalloc sizes
 * its per-CPU caches the same way.
 *
 * Hot caches get more of it, cold ones give theirs back.  A queue misses
 * when an allocation finds it empty or a free of its own object finds it
 * at its limit; each miss asks for a step more: as much as it has already
 * (doubling from a refill's worth, so a queue ends with what its misses
 * show it needs, not with hiwater), at most a sixteenth of the budget
 * (objects over an eighth of the budget are never queued: they go to and
 * come from their slabs).  The step comes from the budget's free part;
 * when that is spent, every QS_STEAL_EVERY misses, from the unused part
 * (grant over what it holds) of the coldest of a few other queues of the
 * owner (the fewest misses since a steal last looked at them: each look
 * halves a queue's count), and only a colder one than the asker: nothing
 * is flushed, and two hot caches do not take turns emptying each other.
 * A lowered budget is different: the next miss takes the excess back from
 * the owner's queues, flushing what they hold over their new grants.  A
 * queue emptied by shrink, trim or the purger (an idle CPU) gives its
 * whole grant back.
 *
 * Who may change what.  A queue's grant and limit belong to its owner (a
 * thread) or to the holder of its lock (a CPU's queue), as its slots do.
 * budget_used changes by atomic adds (a CPU's queues have one lock each,
 * and the purger takes a quiet thread's stash).  A steal acts on another
 * queue of the same owner: it needs the cache to stay alive and the
 * owner's slot array to stay put, so it holds qs_global, taken with a
 * try (the caller may hold a queue lock, which ranks after it: a try
 * never waits, so no order is broken, and a busy qs_global only skips the
 * steal), and for a CPU's queue that queue's lock, also tried (two queue
 * locks are never waited for).  A CPU's victim is emptied by sections on
 * its CPU, the caller's own (both queues are that CPU's); a caller that
 * migrated meanwhile lowers the grant only as far as it emptied. */
unsigned long qs_owner_budget = QS_BUDGET_LOW;

/* The default: QS_BUDGET_TOTAL over the possible CPUs, within
 * [QS_BUDGET_LOW, QS_BUDGET_HIGH].  On a small machine one hot size class
 * per CPU may keep what a burst of frees brings (the scale benchmark's 45
 * classes of random sizes ran at half speed on 1 MiB a CPU, at full speed
 * on 4 MiB), and what the CPUs keep in all stays at 16 MiB; on a big one
 * each CPU keeps little (256 KiB), as the seeds asked of a queued
 * allocator. */
void qs_owner_budget_default(void)
{
    unsigned long b = QS_BUDGET_TOTAL / (unsigned long)qs_os_cpu_possible();
    QS_STORE(qs_owner_budget, b < QS_BUDGET_LOW ? QS_BUDGET_LOW : b > QS_BUDGET_HIGH ? QS_BUDGET_HIGH : b);
}
static unsigned long budget_steals; /* atomic: steals that found a victim */
static unsigned long budget_peak;   /* the most any owner has had granted (relaxed) */

#define QS_GRANT_STEPS 16 /* a miss asks for this part of the budget */
#define QS_GRANT_BIG 8    /* objects over this part are never queued */
#define QS_STEAL_LOOK 8   /* queues a steal looks at */
#define QS_STEAL_SCAN 32  /* ... among this many of the owner's slots */
#define QS_STEAL_EVERY 16 /* a full budget: a steal at every this many misses */

static bool budget_take(struct qs_owner *o, unsigned long bytes)
{
    unsigned long used = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED);
    unsigned long max = QS_LOAD(qs_owner_budget);
    do {
        if (used + bytes > max)
            return false;
    } while (!__atomic_compare_exchange_n(&o->budget_used, &used, used + bytes, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    if (used + bytes > QS_LOAD(o->budget_peak)) { /* racy maxima: statistics */
        QS_STORE(o->budget_peak, used + bytes);
        if (used + bytes > QS_LOAD(budget_peak))
            QS_STORE(budget_peak, used + bytes);
    }
    return true;
}

static void budget_put(struct qs_owner *o, unsigned long bytes)
{
    if (bytes)
        __atomic_fetch_sub(&o->budget_used, bytes, __ATOMIC_RELAXED);
}

static int percpu_flush(qslab_cache *c, struct qs_queue *q, unsigned n);

/* Lower q's grant to `to` objects (q's owner; a CPU's queue: q->lock
 * held): the limit first, so that no push goes past it, then what q holds
 * over it goes home, then the budget.  A CPU's queue that cannot be
 * emptied that far (the caller left its CPU) keeps a grant of what it
 * holds. */
static void grant_lower(qslab_cache *c, struct qs_queue *q, uint32_t to)
{
    uint32_t g = q->grant;
    if (to >= g)
        return;
    QS_STORE(q->grant, to);
    qs_queue_limit_set(q);
    unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
    if (nr > to) {
        if (q->cpu < 0) {
            qs_queue_flush(c, q, nr - to);
        } else {
            while (nr > to && percpu_flush(c, q, nr - to) > 0)
                nr = QS_TOP_NR(QS_LOAD(q->top));
            if (nr > to) { /* migrated: keep a grant of what is held */
                QS_STORE(q->grant, nr < g ? nr : g);
                to = q->grant;
            }
        }
    }
    budget_put(q->owner, (unsigned long)(g - to) * c->slot_size);
}

/* Take `want` bytes of grant from the coldest of a few other queues of
 * q's owner o (see above); true if that many were freed. */
static bool grant_steal(struct qs_queue *q, struct qs_owner *o, unsigned long want, bool colder)
{
    if (!qs_lock_try(&qs_global))
        return false;
    unsigned cap = o->cap, looked = 0, hand = QS_LOAD(o->budget_hand), i;
    struct qs_queue *victim = NULL;
    if (cap && hand >= cap)
        hand %= cap;
    for (i = 0; i < cap && i < QS_STEAL_SCAN && looked < QS_STEAL_LOOK; i++) {
        struct qs_queue *v = o->slots[hand + i < cap ? hand + i : hand + i - cap];
        /* a miss takes only what a queue does not use (grant over what it
         * holds: nothing is flushed); shedding an excess takes what it must */
        if (!v || v == q || v->cache->front != QS_FRONT_SLQB || !QS_LOAD(v->grant) ||
            (colder && QS_LOAD(v->grant) <= QS_TOP_NR(QS_LOAD(v->top))))
            continue;
        looked++;
        if (!victim || QS_LOAD(v->misses) < QS_LOAD(victim->misses))
            victim = v;
        QS_STORE(v->misses, QS_LOAD(v->misses) / 2);
    }
    QS_STORE(o->budget_hand, hand + i);
    /* a miss takes only from a colder queue (fewer misses than its own):
     * two hot caches do not take turns emptying each other */
    if (victim && colder && QS_LOAD(victim->misses) >= QS_LOAD(q->misses))
        victim = NULL;
    bool got = false;
    if (victim)
        __atomic_fetch_add(&budget_steals, 1, __ATOMIC_RELAXED);
    if (victim && (victim->cpu < 0 || qs_lock_try(&victim->lock))) {
        qslab_cache *vc = victim->cache;
        uint32_t g = victim->grant, nr = QS_TOP_NR(QS_LOAD(victim->top));
        uint32_t k = (uint32_t)((want + vc->slot_size - 1) / vc->slot_size);
        if (colder && k > (g > nr ? g - nr : 0))
            k = g > nr ? g - nr : 0; /* its unused part only */
        if (k > g)
            k = g;
        unsigned long before = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED);
        grant_lower(vc, victim, g - k);
        got = before - __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED) >= want || victim->grant == 0;
        if (victim->cpu >= 0)
            qs_lock_release(&victim->lock);
    }
    qs_lock_release(&qs_global);
    return got;
}

/* q missed: ask for a step more grant (see above).  q's owner (a CPU's
 * queue: q->lock held); SLQB queues only. */
static void grant_grow(qslab_cache *c, struct qs_queue *q)
{
    QS_STORE(q->misses, QS_LOAD(q->misses) + 1); /* (steals halve it) */
    uint32_t hw = QS_LOAD(q->hiwater), slot = c->slot_size;
    if (q->grant >= hw || !q->owner)
        return;
    unsigned long budget = QS_LOAD(qs_owner_budget);
    if (slot > budget / QS_GRANT_BIG)
        return; /* never queued */
    /* as much as it has (doubling: a queue gets what its misses show it
     * needs), at least a refill, at most a sixteenth of the budget */
    uint32_t step = q->grant > QS_LOAD(c->refill) ? q->grant : QS_LOAD(c->refill);
    uint32_t most = (uint32_t)(budget / QS_GRANT_STEPS / slot);
    if (step > most)
        step = most ? most : 1;
    if (step > hw - q->grant)
        step = hw - q->grant;
    unsigned long want = (unsigned long)step * slot;
    struct qs_owner *o = q->owner;
    if (!budget_take(o, want)) {
        /* over the budget (it was lowered): the excess goes back first,
         * a victim at a time */
        for (int i = 0; i < QS_STEAL_LOOK; i++) {
            unsigned long used = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED);
            if (used <= budget || !grant_steal(q, o, used - budget, false))
                break;
        }
        /* a steal every QS_STEAL_EVERY misses: its look costs more than
         * a miss, and a queue that needs more misses again soon */
        if (QS_LOAD(q->misses) % QS_STEAL_EVERY || !grant_steal(q, o, want, true) ||
            !budget_take(o, want))
            return;
    }
    QS_STORE(q->grant, q->grant + step);
    qs_queue_limit_set(q);
}

/* qslab_budget_stats (qslab.h): every owner's figures, under qs_global:
 * what each owner's queues and stashes hold is summed in its budget_held
 * (the reader's scratch), then the maxima are taken. */
QSLAB_EXPORT void qslab_budget_stats(struct qslab_budget_stats *st)
{
    qs_init();
    __builtin_memset(st, 0, sizeof(*st));
    st->budget = QS_LOAD(qs_owner_budget);
    st->steals = __atomic_load_n(&budget_steals, __ATOMIC_RELAXED);
    st->peak_max = QS_LOAD(budget_peak); /* owners that are gone included */
    qs_lock_acquire(&qs_global);
    for (int pass = 0; pass < 3; pass++)
        for (qslab_cache *c = qs_caches; c; c = c->next)
            for (struct qs_queue *q = c->queues; q; q = q->all_next) {
                struct qs_owner *o = q->owner;
                if (!o || c->front != QS_FRONT_SLQB)
                    continue;
                if (pass == 0) {
                    o->budget_held = 0;
                    continue;
                }
                if (pass == 1) {
                    o->budget_held += (unsigned long)QS_TOP_NR(QS_LOAD(q->top)) * c->slot_size +
                                      QS_LOAD(q->stash_bytes);
                    continue;
                }
                if (o->budget_held == ~0ul) /* counted already */
                    continue;
                unsigned long used = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED);
                st->owners++;
                st->used += used;
                if (used > st->used_max)
                    st->used_max = used;
                if (o->budget_held > st->held_max)
                    st->held_max = o->budget_held;
                o->budget_held = ~0ul;
            }
    qs_lock_release(&qs_global);
}

/* q's cache is being destroyed (qs_global held, the cache quiet): q's
 * grant and stash leave its owner's budget with it. */
void qs_queue_budget_drop(qslab_cache *c, struct qs_queue *q)
{
    if (c->front != QS_FRONT_SLQB || !q->owner)
        return;
    qs_lock_acquire(&q->stash_lock);
    budget_put(q->owner, (unsigned long)q->grant * c->slot_size + q->stash_bytes);
    QS_STORE(q->grant, 0);
    QS_STORE(q->stash_bytes, 0);
    qs_lock_release(&q->stash_lock);
}

/* Give q's whole grant back (emptied by shrink, trim, the purger, retire;
 * q's owner or lock holder, q holding nothing). */
static void grant_release(qslab_cache *c, struct qs_queue *q)
{
    if (c->front == QS_FRONT_SLQB && q->owner)
        grant_lower(c, q, 0);
}

/* Detach the stash (stash_lock held). */
static struct qs_slab *stash_detach_locked(struct qs_queue *q)
{
    struct qs_slab *list = q->stash;
    q->stash = NULL;
    QS_STORE(q->nr_stash, 0); /* read by statistics */
    if (q->owner)
        budget_put(q->owner, q->stash_bytes);
    QS_STORE(q->stash_bytes, 0); /* read by qslab_budget_stats */
    return list;
}

/* Hand the stash to the node's empty FIFO: one lock and one clock read
 * for the lot.  The stash lock is never held with another qslab lock. */
void qs_queue_drain_stash(qslab_cache *c, struct qs_queue *q)
{
    if (!QS_LOAD(q->nr_stash))
        return;
    qs_lock_acquire(&q->stash_lock);
    struct qs_slab *list = stash_detach_locked(q);
    qs_lock_release(&q->stash_lock);
    if (list)
        qs_node_put_empty(c, q, &c->nodes[q->node], list);
}

/* The purger, every tick (qs_global held, q may be another thread's): a
 * stash its owner has not touched since the last tick goes to the node's
 * empty FIFO, where the decay gives it back.  A thread that went quiet
 * would otherwise keep up to stash_bytes per cache for good.  Counted in
 * the orphan counters: q's are its owner's alone. */
void qs_queue_steal_idle_stash(qslab_cache *c, struct qs_queue *q)
{
    if (!QS_LOAD(q->nr_stash))
        return;
    if (!QS_LOAD(q->stash_idle)) { /* the owner clears it when it uses the stash */
        QS_STORE(q->stash_idle, 1);
        return;
    }
    qs_lock_acquire(&q->stash_lock);
    struct qs_slab *list = q->stash_idle ? stash_detach_locked(q) : NULL;
    qs_lock_release(&q->stash_lock);
    if (list)
        qs_node_put_empty(c, NULL, &c->nodes[q->node], list);
}

/* Keep our empty slabs (a list linked by ->next, off every list) for our
 * next refill, which takes them without the node's lock (SLUB's per-CPU
 * partial slabs, counted in bytes).  At the cache's stash_bytes (tunable,
 * 128 KiB by default) or empty_limit slabs the stash goes to the node,
 * where the empty-slab policy and the purger see it; a cache tuned to keep
 * no empties (stash_bytes, limit or decay 0) has no stash.  A slab the
 * owner budget has no room for goes to the node at once. */
static void stash_add(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    unsigned limit = QS_LOAD(c->empty_limit);
    uint32_t bytes = QS_LOAD(c->stash_bytes);
    if (QS_LOAD(c->empty_decay_ms) == 0 || bytes == 0)
        limit = 0;
    struct qs_slab *full = NULL;
    qs_lock_acquire(&q->stash_lock);
    QS_STORE(q->stash_idle, 0);
    while (list) {
        struct qs_slab *s = list;
        list = s->next;
        __atomic_store_n(&s->state, (uint8_t)QS_SLAB_EMPTY, __ATOMIC_RELAXED);
        if (!limit || !q->owner || !budget_take(q->owner, qs_slab_bytes(s->order))) {
            s->next = full; /* no room: to the node */
            full = s;
            continue;
        }
        s->next = q->stash;
        q->stash = s;
        QS_STORE(q->nr_stash, q->nr_stash + 1);
        QS_STORE(q->stash_bytes, q->stash_bytes + (uint32_t)qs_slab_bytes(s->order));
        if (q->nr_stash >= limit || q->stash_bytes >= bytes) {
            /* hand this stash over after unlocking; start a new one */
            struct qs_slab *t = stash_detach_locked(q), *last = t;
            while (last->next)
                last = last->next;
            last->next = full;
            full = t;
        }
    }
    qs_lock_release(&q->stash_lock);
    if (full)
        qs_node_put_empty(c, q, &c->nodes[q->node], full);
    else
        qs_node_purger_want(); /* it takes the stash if we go quiet */
}

void qs_queue_empty_out(qslab_cache *c, struct qs_queue *q)
{
    qs_queue_send_pending(c, q);
    qs_queue_claim(c, q);
    qs_queue_flush(c, q, QS_TOP_NR(q->top));
    grant_release(c, q);
    qs_queue_drain_stash(c, q);
}

/* Routing objects to their slabs' owners: the caller's own slabs get them
 * at once, other owners in batches (up to QS_ROUTE_BATCHES open). */
struct router {
    struct qs_batch b[QS_ROUTE_BATCHES];
    struct qs_slab *empties;
    struct qs_slab *s; /* the last descriptor: objects freed together often
                          share a slab (mem and order never change for a
                          descriptor, so this holds even if the slab was given
                          back meanwhile) */
    unsigned long limit;
    unsigned victim;
};

static void route_begin(qslab_cache *c, struct router *r)
{
    __builtin_memset(r, 0, sizeof(*r));
    r->limit = QS_LOAD(c->freebatch);
}

static inline void route_one(qslab_cache *c, struct qs_queue *q, struct router *r, void *obj)
{
    struct qs_slab *s = r->s;
    if (!s || (uintptr_t)obj - (uintptr_t)s->mem >= qs_slab_bytes(s->order))
        r->s = s = qs_slab_lookup(obj);
    struct qs_list *to = qs_slab_owner(s);
    if (q && to == &q->list) {
        if (unlikely(!slab_put(c, &q->list, s, obj, &r->empties)))
            put_twice_report(c, q, obj);
    } else
        batch_add(c, q, batch_for(c, q, r->b, QS_ROUTE_BATCHES, &r->victim, to), obj, r->limit);
}

static void route_end(qslab_cache *c, struct qs_queue *q, struct router *r)
{
    for (unsigned k = 0; k < QS_ROUTE_BATCHES; k++)
        send_batch(c, q, &r->b[k]);
    if (r->empties)
        stash_add(c, q, r->empties);
}

/* Route n objects linked from head to their slabs' owners.  Returns what
 * the n-th object's link points to; NULL, after reporting, if a link on the
 * way is corrupt (that object and the ones after it are left alone, lost
 * unless another entry brings them home). */
void *qs_route_list(qslab_cache *c, struct qs_queue *q, void *head, unsigned long n)
{
    if (qs_front_of(c)->give_back) { /* SLAB: its own slabs' lists */
        void *buf[64];
        void *obj = head;
        unsigned long k = 0;
        for (unsigned long i = 0; i < n && obj; i++) {
            bool bad;
            void *next = qs_dec(c, *qs_link(c, obj), &bad);
            if (unlikely(bad)) { /* obj stays where it is: see below */
                qs_report_bad_link(c, q, obj);
                obj = NULL;
                break;
            }
            buf[k++] = obj;
            if (k == 64) {
                qs_front_of(c)->give_back(c, q, buf, k);
                k = 0;
            }
            obj = next;
        }
        if (k)
            qs_front_of(c)->give_back(c, q, buf, k);
        return obj;
    }
    struct router r;
    route_begin(c, &r);
    void *obj = head;
    for (unsigned long i = 0; i < n; i++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, obj), &bad);
        if (unlikely(bad)) {
            /* follow nothing more, and leave obj alone: a stamp or 0 says
             * another entry holds it (it comes home from there) or it was
             * handed out from there; anything else may be the program's
             * data in such an object, or a write after its free (lost) */
            qs_report_bad_link(c, q, obj);
            obj = NULL;
            break;
        }
        route_one(c, q, &r, obj);
        obj = next;
    }
    route_end(c, q, &r);
    return obj;
}

/* k frees pushed on q were no frees (second frees of one object, dropped):
 * take them out of the derived FREE_FAST (free_fast = nr + pops - moved). */
/* A slow change of q's nr by `delta` (made by the sections between
 * seq_begin and seq_end) is recorded in moved inside the seqcount, as
 * qs_queue_nr_set does for a thread's queue (stats.c pairs nr and moved). */
void qs_queue_seq_begin(struct qs_queue *q)
{
    QS_STORE(q->nr_seq, q->nr_seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
void qs_queue_seq_end(struct qs_queue *q, long moved)
{
    QS_STORE(q->moved, q->moved + (unsigned long)moved);
    __atomic_store_n(&q->nr_seq, q->nr_seq + 1, __ATOMIC_RELEASE);
}

static void queue_uncount(struct qs_queue *q, unsigned long k)
{
    qs_queue_seq_begin(q);
    qs_queue_seq_end(q, (long)k);
}

void qs_uncount_frees(qslab_cache *c, struct qs_queue *q, unsigned long k)
{
    if (!k)
        return;
    if (q && q != &qs_no_queue)
        queue_uncount(q, k);
    else
        __atomic_fetch_sub(&c->orphan_stat[QS_FREE_FAST], k, __ATOMIC_RELAXED);
}

void qs_report_bad_link(qslab_cache *c, struct qs_queue *q, void *obj)
{
    if (c->debug) { /* no queues, no stamps: the link word was overwritten */
        qs_debug_bad_link(c, obj);
        return;
    }
    uintptr_t w = *qs_link(c, obj);
    /* the stamp: freed again (pushed) while on this list; 0: that second
     * entry was handed out since (a pop clears the word) */
    if (w == QS_STAMP(c->secret) || w == 0) {
        qs_fatal("double free of %p in cache %s (freed again while it was free)", obj, c->name);
        qs_uncount_frees(c, q, 1);
    } else {
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)", c->name, obj);
    }
}

/* Report a queued object whose word is neither the free stamp nor a
 * free-list link (see qs_queue_corrupt); true if it is a second free of
 * one object: 0 is what the first of its two entries left when it was
 * handed out. */
bool qs_report_unstamped(qslab_cache *c, void *obj)
{
    uintptr_t w = *qs_link(c, obj);
    bool twice = w == 0;
    if (twice)
        qs_fatal("double free of %p in cache %s (found before it was handed out again)", obj,
                 c->name);
    else
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)", c->name, obj);
    return twice;
}

/* Route n objects of a queue's slots home.  Each must hold the free stamp
 * or a free-list link (refills leave those): one that does not is reported
 * and dropped (never routed: see qs_queue_corrupt; SLAB's slabs count it,
 * so it goes back there), and the second frees among them are returned,
 * for the caller to take out of its counts.
 * Two passes, because one object may sit in the slots twice (a double free
 * not next to the first, which the fast path does not see): routing its
 * first entry writes a link into it, after which its second entry would
 * look like a refilled object and be routed again, putting it on its
 * slab's list twice.  So the first pass marks every valid entry's word
 * with `mark` (neither the stamp, nor 0, nor a link: its tag bits are
 * wrong) and meets a second entry as a word already marked; the second
 * pass routes exactly the marked words, each once. */
unsigned long qs_route_vec(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long n)
{
    struct router r;
    uintptr_t stamp = QS_STAMP(c->secret), mark = c->secret ^ 2;
    unsigned long twice = 0;
    void (*give_back)(qslab_cache *, struct qs_queue *, void *const *, unsigned long) =
        qs_front_of(c)->give_back;
    for (unsigned long i = 0; i < n; i++) {
        uintptr_t *l = qs_link(c, objs[i]), w = *l;
        if (likely(w == stamp || qs_looks_free(c, w))) {
            *l = mark;
        } else if (w == mark) { /* its first entry is earlier in the slots */
            qs_fatal("double free of %p in cache %s (queued twice)", objs[i], c->name);
            twice++;
        } else {
            /* 0: its twin was handed out; anything else: written after its
             * free, or handed out from a twin entry and written by the
             * program.  Reported and left alone in every front end, never
             * handed out while held, and counted as allocated (the free
             * leaves the counts): the statistics and the slab agree */
            qs_report_unstamped(c, objs[i]);
            twice++;
        }
    }
    route_begin(c, &r);
    unsigned long from = 0; /* SLAB: runs of marked objects, handed over */
    for (unsigned long i = 0; i < n; i++) {
        uintptr_t *l = qs_link(c, objs[i]);
        if (*l != mark) { /* dropped, or its first entry was routed */
            if (give_back && i > from)
                give_back(c, q, objs + from, i - from);
            from = i + 1;
            continue;
        }
        *l = stamp; /* as pushed: what give_back and the batches expect */
        if (!give_back)
            route_one(c, q, &r, objs[i]);
    }
    if (give_back && n > from)
        give_back(c, q, objs + from, n - from);
    route_end(c, q, &r);
    return twice;
}

/* Route the top `count` objects of the queue home (shrink, trim). */
void qs_queue_flush(qslab_cache *c, struct qs_queue *q, unsigned count)
{
    unsigned nr = QS_TOP_NR(q->top);
    if (count > nr)
        count = nr;
    if (!count)
        return;
    QS_ADD(q->stat[QS_FLUSH], 1);
    /* nothing the routing calls touches the queue's slots */
    unsigned long twice = qs_route_vec(c, q, q->slots + (nr - count), count);
    qs_queue_nr_set(q, nr - count);
    if (twice)
        queue_uncount(q, twice);
}

/* Room in q's slots for n objects more: the array grows (doubling from 32)
 * on demand, so a queue costs what it holds, not its hiwater.  The new
 * slots are installed plainly (a thread's queue, or one nobody else sees
 * yet) or, `in_section`, by a section on the queue's CPU that copies the
 * entries and swaps the pointer (percpu.c): fast pushes stay below limit
 * <= the old capacity meanwhile, so the copy holds them all, and a section
 * that had loaded the old slots was restarted when ours ran there, so they
 * can go at once.  False on ENOMEM, or if the caller left q->cpu. */
static bool slots_grow(struct qs_queue *q, unsigned n, bool in_section)
{
    unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
    if (nr + n <= q->cap)
        return true;
    unsigned cap = q->cap ? q->cap * 2 : 32;
    while (cap < nr + n)
        cap *= 2;
    void **mem = qs_meta_alloc(((size_t)cap + 1) * sizeof(void *));
    if (!mem)
        return false;
    mem[0] = NULL; /* the sentinel slots[-1] */
    void **old = q->slots;
    unsigned old_cap = q->cap;
    if (!in_section) {
        if (nr)
            __builtin_memcpy(mem + 1, old, nr * sizeof(void *));
        q->slots = mem + 1;
    } else if (qs_percpu_swap_slots(q, mem + 1) != 0) { /* migrated */
        qs_meta_free(mem, ((size_t)cap + 1) * sizeof(void *));
        return false;
    }
    QS_STORE(q->cap, cap); /* read racily by the statistics (stats.c) */
    qs_queue_limit_set(q);
    if (old)
        qs_meta_free(old - 1, ((size_t)old_cap + 1) * sizeof(void *));
    return true;
}

bool qs_queue_reserve(struct qs_queue *q, unsigned n)
{
    return slots_grow(q, n, false);
}

void qs_queue_free_slots(struct qs_queue *q)
{
    if (q->slots)
        qs_meta_free(q->slots - 1, ((size_t)q->cap + 1) * sizeof(void *));
    q->slots = NULL;
    QS_STORE(q->cap, 0);
    QS_STORE(q->limit, 0);
}

/* Objects of slabs we do not own go onto our queue only while it is short
 * (below c->park: local reuse, as SLQB does for all of them); otherwise
 * home: onto the pending batch for their owner (SLQB's rlist), posted to
 * its inbox (or freed under its node's lock) when it holds
 * freebatch objects.  Up to QS_PENDING owners have a batch open at
 * once; a new owner takes a free batch or sends one (round robin).  A
 * thread that frees what others allocated thus parks at most park of them
 * plus QS_PENDING * freebatch, not hiwater, and the owner gets the
 * rest back within a batch. */
static QS_NOINLINE struct qs_batch *pending_find(qslab_cache *c, struct qs_queue *q,
                                                struct qs_list *to)
{
    struct qs_batch *b = batch_for(c, q, q->pending, QS_PENDING, &q->pending_victim, to);
    q->pending_mru = (unsigned)(b - q->pending);
    return b;
}

static inline void pending_add(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    struct qs_list *to = qs_slab_owner(s);
    struct qs_batch *b = &q->pending[q->pending_mru];
    if (unlikely(b->to != to))
        b = pending_find(c, q, to);
    batch_add(c, q, b, obj, QS_LOAD(c->freebatch)); /* posting is a tail call */
}

/* A free while the queue is at its limit.  Below hiwater, the slots grow
 * and take it.  At hiwater, an object of one of our own slabs goes straight
 * to that slab: pushing it would only mean a flush walking the queue's
 * objects again to put each back where this one can go now.  A slab it
 * empties goes to the stash.  This path loads the object's word (its free
 * stamp tells a double free); the push does not. */
void qs_free_full(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    unsigned nr = QS_TOP_NR(q->top);
    uint32_t hw = QS_LOAD(q->hiwater);
    if (unlikely(QS_LOAD(q->guard_armed))) {
        /* the guard sampler armed us (guard.c): empty the queue, so that
         * the next allocation is a slow one (the sample); no push */
        qs_guard_armed_free(c, q);
    } else if (unlikely(nr < hw)) {
        if (nr >= q->grant) /* a miss: more of the owner budget */
            grant_grow(c, q);
        uint32_t max = qs_queue_max(q);
        if (nr < max && qs_queue_reserve(q, max - nr < q->cap ? max - nr : q->cap)) {
            qs_queue_limit_set(q);
            if (nr < QS_LOAD(q->limit)) {
                qs_queue_push(c, q, s, obj);
                return;
            }
        }
        qs_queue_limit_set(q); /* a stale limit after tune */
    }
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && qs_double_free_check(c, q, s, obj))
        return;
    QS_ADD(q->stat[QS_FREE_SLOW], 1);
    if (unlikely(qs_slab_owner(s) != &q->list)) { /* another owner's: batched home */
        pending_add(c, q, s, obj);
        return;
    }
    struct qs_slab *empties = NULL;
    if (unlikely(!slab_put(c, &q->list, s, obj, &empties)))
        put_twice_report(c, q, obj);
    if (empties)
        stash_add(c, q, empties);
}

/* Post every pending batch (see pending_add). */
static void percpu_fb_close(qslab_cache *c, struct qs_queue *q, bool taken);

/* Post every pending batch, and a CPU's open batch (q->lock held, or the
 * queue taken from its CPU: `taken`). */
static void send_pending(qslab_cache *c, struct qs_queue *q, bool taken)
{
    if (q->cpu >= 0)
        percpu_fb_close(c, q, taken);
    for (unsigned k = 0; k < QS_PENDING; k++)
        send_batch(c, q, &q->pending[k]);
}

void qs_queue_send_pending(qslab_cache *c, struct qs_queue *q)
{
    send_pending(c, q, true); /* the owner thread, or a queue taken from its CPU */
}

/* The free of an object of a slab we do not own (another thread's, or a
 * node's): checked for a double free, then batched home (pending_add). */
static QS_NOINLINE void free_remote_suspect(qslab_cache *c, struct qs_queue *q, struct qs_slab *s,
                                            void *obj)
{
    if (qs_double_free_check(c, q, s, obj))
        return;
    QS_ADD(q->stat[QS_FREE_SLOW], 1);
    pending_add(c, q, s, obj);
}

/* Written so that the common case is a leaf: the suspect case and posting a
 * full batch are tail calls. */
void qs_free_remote(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    /* no queue (see qs_queue_fast), or a queue of another front end's
     * (SLUB's: its slabs have no owner list, front.h) */
    if (unlikely(c->front != QS_FRONT_SLQB)) {
        qs_front_of(c)->free(c, s, obj);
        return;
    }
    if (unlikely(q == &qs_no_queue)) {
        qs_free_slow(c, s, obj);
        return;
    }
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj)))) {
        free_remote_suspect(c, q, s, obj);
        return;
    }
    if (QS_TOP_NR(q->top) < QS_LOAD(q->park) && s->node == q->node) { /* c->park's copy */
        /* a short queue takes it: the thread reuses it locally (a
         * consumer that never allocates parks at most hiwater/4 objects
         * and 16 KiB); never memory of another node, which a local
         * allocation must not get */
        qs_queue_push(c, q, s, obj); /* below hiwater: a plain push */
        return;
    }
    QS_ADD(q->stat[QS_FREE_SLOW], 1);
    pending_add(c, q, s, obj);
}

/* Detach our inbox (what other owners posted): its list and count. */
static void *inbox_detach(struct qs_queue *q, unsigned long *n)
{
    qs_lock_acquire(&q->inbox.lock);
    void *head = q->inbox.head;
    *n = q->inbox.nr;
    q->inbox.head = q->inbox.tail = NULL;
    q->inbox.nr = 0;
    __atomic_store_n(&q->inbox.pending, 0, __ATOMIC_RELAXED);
    qs_lock_release(&q->inbox.lock);
    return head;
}

/* Claim the inbox and route everything home (shrink, retire, drains): the
 * objects are mostly ours, straight back onto our slabs. */
void qs_queue_claim(qslab_cache *c, struct qs_queue *q)
{
    unsigned long n;
    void *head = inbox_detach(q, &n);
    if (!head)
        return;
    QS_ADD(q->stat[QS_CLAIM], 1);
    qs_route_list(c, q, head, n);
}

/* Claim the inbox for a refill: up to `room` objects into dst (their links
 * stay: they look free, see qs_queue_try_pop), the rest straight back to
 * their slabs (ours, or routed).  Returns how many went to dst. */
static unsigned claim_into(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room)
{
    unsigned long n;
    void *head = inbox_detach(q, &n);
    if (!head)
        return 0;
    QS_ADD(q->stat[QS_CLAIM], 1);
    unsigned long k = n < room ? n : room, i = 0;
    for (; i < k; i++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, head), &bad);
        if (unlikely(bad)) { /* keep head out of the queue, follow nothing more */
            qs_report_bad_link(c, q, head);
            return (unsigned)i;
        }
        dst[i] = head;
        head = next;
    }
    if (n > k)
        qs_route_list(c, q, head, n - k);
    return (unsigned)k;
}

/* Move up to `max` objects of slab s (owned by q) from its free list to
 * dst (their links stay: see qs_queue_try_pop); returns how many.  A slab
 * with an empty list is grown instead when `grow` (lazy birth, core/slab.c: at
 * least `grow` objects or a page's worth, or as many as it had born): its
 * new objects are born straight into dst, up to `max`, stamped, and the
 * rest onto its list.  The slab is FULL after, unless objects are left on
 * its list or it can grow again (then PARTIAL). */
static unsigned take_slab(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, bool listed,
                          unsigned grow, unsigned max, void **dst)
{
    unsigned got = 0;
    if (!s->freelist && grow) {
        got = qs_slab_grow_into(c, q, s, grow, dst, max);
    } else {
        if (max > s->objects - s->inuse) /* the free list's length */
            max = s->objects - s->inuse;
        void *obj = s->freelist, *bad_obj = NULL;
        uintptr_t ch;
        uint64_t *bits = qs_fbits_of(s, &ch);
        /* in locals: the stores to dst may alias them for the compiler */
        uintptr_t secret = c->secret, base = (uintptr_t)s->base, span = s->span;
        size_t link_off = c->link_off;
        while (obj && got < max) {
            /* the next object must be a born object of s on its list (its
             * free bit: qs_list_next) before obj is taken */
            uintptr_t n = *(uintptr_t *)((char *)obj + link_off) ^ secret;
            if (n) {
                size_t g = (n - ch) >> 3;
                if (unlikely((n & QS_LINK_TAG_MASK) || n - base >= span ||
                             !(bits[g >> 6] >> (g & 63) & 1))) {
                    bad_obj = obj;
                    obj = NULL;
                    break;
                }
            }
            dst[got++] = obj;
            obj = (void *)n;
        }
        /* the taken objects' bits: the slab's whole range when the list is
         * gone (a refill mostly takes it all: one line for an order-0 slab),
         * else one by one */
        if (!obj)
            qs_fbits_clear_slab(s);
        else
            for (unsigned i = 0; i < got; i++)
                qs_fbit_clear_in(ch, bits, dst[i]);
        s->freelist = obj;
        if (!obj)
            s->tail = NULL;
        s->inuse += got;
        if (unlikely(bad_obj)) {
            /* bad_obj and what follows are lost to the slab (in use
             * forever): never handed out, never followed */
            qs_report_bad_link(c, q, bad_obj);
            qs_slab_list_lost(s);
        }
    }
    if (listed)
        qs_list_del(&q->list, s);
    qs_list_add(&q->list, s, s->freelist || qs_slab_growable(c, s) ? QS_SLAB_PARTIAL : QS_SLAB_FULL);
    return got;
}

/* q has objects in a pending batch, or (a CPU's) in its open batch. */
bool qs_queue_batches_held(const struct qs_queue *q)
{
    if (q->cpu >= 0 && QS_LOAD(q->fb))
        return true;
    for (unsigned k = 0; k < QS_PENDING; k++)
        if (q->pending[k].n)
            return true;
    return false;
}

/* Gather free objects of q's own for its queue into dst[0..room): what
 * others posted to its inbox, if anything; else up to c->refill objects from
 * slabs (SLQB's refill): our partial slabs' free lists, our stash of empty
 * slabs, the node's partial and empty slabs (one lock for several slabs),
 * then new memory: a slab of ours that can grow (lazy birth, core/slab.c) or a
 * new slab, until c->fresh objects (QS_REFILL_MIN, at most a page's worth).
 * Returns how many; 0 on ENOMEM.  The owner (thread mode) or q->lock holder
 * (CPU mode) calls it. */
static unsigned refill_gather(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room)
{
    if (__atomic_load_n(&q->inbox.pending, __ATOMIC_RELAXED)) {
        unsigned got = claim_into(c, q, dst, room);
        if (got)
            return got;
    }
    struct qs_slab *s;
    QS_ADD(q->stat[QS_REFILL], 1);
    /* slabs we own and slabs on the node lists are already faulted in: take
     * enough of them for half a batch (one lock for the node's), not just
     * QS_REFILL_MIN objects; only new memory stops at c->fresh.  Both at
     * most QS_REFILL_BYTES, at least one object (c->refill): a thread that
     * took four 256 KiB slabs for one allocation hoarded 768 KiB that the
     * other threads then made anew */
    unsigned want = QS_LOAD(c->refill), least = QS_LOAD(c->fresh), got = 0;
    if (want > room)
        want = room;
    if (least > want)
        least = want;
    /* objects already born: our partial slabs' free lists (a partial slab
     * with an empty list can only grow: that is new memory, below) */
    s = q->list.partial;
    while (s && got < want) {
        struct qs_slab *next = s->next; /* take_slab moves s to a list head */
        if (s->freelist)
            got += take_slab(c, q, s, true, 0, want - got, dst + got);
        s = next;
    }
    if (got < want && QS_LOAD(q->nr_stash)) { /* our empties: no node lock */
        qs_lock_acquire(&q->stash_lock);
        QS_STORE(q->stash_idle, 0);
        while (got < want && (s = q->stash)) {
            q->stash = s->next;
            QS_STORE(q->nr_stash, q->nr_stash - 1);
            QS_STORE(q->stash_bytes, q->stash_bytes - (uint32_t)qs_slab_bytes(s->order));
            budget_put(q->owner, qs_slab_bytes(s->order));
            got += take_slab(c, q, s, false, 0, want - got, dst + got);
        }
        qs_lock_release(&q->stash_lock);
    }
    if (got < least) {
        /* Our batches first: a slab we take from the node becomes ours,
         * and an object of it waiting in a batch of ours (freed while the
         * slab was the node's or another owner's) would be an own object
         * that is on no list of ours.  A second free of it would then be
         * pushed on the queue with no look at its word, the batch would
         * later free it again, and the object would be handed out twice
         * with no report (fuzz_misuse: found-fixed-bug15-*).  Posted now,
         * the batches hold no object of a slab we take. */
        if (qs_queue_batches_held(q))
            send_pending(c, q, false);
        s = qs_node_take(c, q, &c->nodes[q->node], want - got);
        while (s) {
            struct qs_slab *next = s->next;
            if (got >= want && s->inuse == 0) {
                /* an empty slab taken for the count, but the slabs taken
                 * after it (first here) filled the refill: lazy birth gives
                 * empties different counts (fuzz bug 12: listed partial
                 * with nothing in use).  Ours now: the stash */
                s->next = NULL;
                stash_add(c, q, s);
            } else {
                got += take_slab(c, q, s, false, 0, want - got, dst + got);
            }
            s = next;
        }
    }
    /* new memory: grow a slab of ours that can (every partial slab left
     * has an empty free list now), else make one, until `least` objects:
     * a page's worth at most, so a class's first mallocs touch a page each.
     * All that a growth makes goes to dst while it has room: it is a page's
     * worth, or what the slab had born already, and touched now anyway */
    while (got < least) {
        if ((s = q->list.partial) && !s->freelist) {
            got += take_slab(c, q, s, true, least - got, room - got, dst + got);
            continue;
        }
        s = qs_slab_new(c, q, q->node, false);
        if (!s)
            break;
        qs_slab_set_owner(s, &q->list);
        got += take_slab(c, q, s, false, least - got, room - got, dst + got); /* born into dst */
    }
    if (!got)
        errno = ENOMEM;
    return got;
}

/* Thread mode: refill the (empty) queue in place. */
static bool queue_refill(qslab_cache *c, struct qs_queue *q)
{
    grant_grow(c, q); /* a miss */
    /* room for a refill, up to the grant and at least the caller's object
     * (a growth's objects past it stay on their slab's list, a claim's go
     * home) */
    unsigned nr = QS_TOP_NR(q->top), max = qs_queue_max(q);
    unsigned room = max > nr + 1 ? max - nr : 1, refill = QS_LOAD(c->refill);
    if (!qs_queue_reserve(q, room < refill ? room : refill) && !q->cap) {
        errno = ENOMEM;
        return false;
    }
    if (room > q->cap - nr)
        room = q->cap - nr;
    unsigned got = refill_gather(c, q, q->slots + nr, room);
    qs_queue_nr_set(q, nr + got);
    return got != 0;
}

static void *percpu_alloc_slow(qslab_cache *c);

/* QSLAB_GUARD_SAMPLE (guard.c): a slow allocation may be a guarded sample */
void *qs_alloc_slow(qslab_cache *c)
{
    qs_init();
    if (unlikely(QS_LOAD(qs_guard_on))) {
        void *g = qs_guard_alloc(c, 0);
        if (g)
            return g;
    }
    return qs_alloc_slow_unsampled(c);
}

void *qs_alloc_slow_unsampled(qslab_cache *c)
{
    qs_init();
    qs_purger_check(); /* a safe point to start the purger (node.c) */
    qslab_cache *t = qs_twin_divert(c);
    if (unlikely(t != NULL)) /* debugging turned on in use (twin.c) */
        return qs_twin_alloc(t, QSLAB_NUMA_NO_NODE);
    if (unlikely(c->front != QS_FRONT_SLQB)) /* no queues: front.h */
        return qs_front_of(c)->alloc(c, QSLAB_NUMA_NO_NODE);
    if (qs_percpu())
        return percpu_alloc_slow(c);
    struct qs_queue *q = qs_queue_of(c);
    if (!q && !(q = qs_queue_attach(c))) {
        if (qs_self.state == 2) /* exited thread: straight from the node list */
            return qs_node_alloc(c, NULL, qs_self.node);
        return NULL;
    }
    for (;;) {
        if (!QS_TOP_NR(q->top) && !queue_refill(c, q))
            return NULL;
        void *obj = qs_queue_pop(c, q, QS_ALLOC_SLOW);
        if (obj)
            return obj;
    }
}

/* A free by a thread without a queue (or of a front end without queues):
 * straight back to the object's owner (cache's counters). */
void qs_free_direct(qslab_cache *c, void *obj)
{
    *qs_link(c, obj) = qs_enc(c, NULL);
    qs_stat(c, NULL, QS_FREE_SLOW, 1);
    qs_route_list(c, NULL, obj, 1);
}

/* A thread that has never allocated gets a queue on its QS_FREE_ONLY_ATTACH-th
 * free, not its first: glibc frees memory (the thread vectors of cached
 * stacks) from an exiting thread after the key destructors ran, and a queue
 * attached then would never be retired.  A thread that only frees (a pure
 * consumer) pays the direct route for its first few frees only. */
#define QS_FREE_ONLY_ATTACH 32

struct qs_queue *qs_queue_for_free(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!q && (qs_self.state != 0 || ++qs_self.direct_frees >= QS_FREE_ONLY_ATTACH))
        q = qs_queue_attach(c);
    return q;
}

void qs_free_slow(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (unlikely(c->front != QS_FRONT_SLQB)) { /* no queues: front.h */
        qs_front_of(c)->free(c, s, obj);
        return;
    }
    struct qs_queue *q = qs_queue_for_free(c);
    if (q && qs_slab_owner(s) == &q->list) { /* our slab: the queue was just attached */
        qs_free_fast(c, s, obj);
        return;
    }
    if (q) { /* another owner's slab: batched home */
        qs_free_remote(c, q, s, obj);
        return;
    }
    qs_free_direct(c, obj);
}

static bool list_has(qslab_cache *c, void *head, unsigned long max, const void *obj)
{
    for (unsigned long i = 0; head && i < max; i++) {
        if (head == obj)
            return true;
        bool bad;
        head = qs_dec(c, *qs_link(c, head), &bad);
        if (bad)
            return false;
    }
    return false;
}

static bool vec_has(void *const *v, unsigned long n, const void *obj)
{
    for (unsigned long i = 0; i < n; i++)
        if (v[i] == obj)
            return true;
    return false;
}

/* obj is freed twice in a row (it is the queue's top), or its word looks
 * like a free object's.  Look for obj where the caller may look: its queue;
 * for its own slabs, the slab's free list and its inbox; for node-owned
 * slabs, the slab's free list under the node lock.  An object sitting in
 * another live thread's queue is not found (that queue is its owner's
 * alone); the caller then frees it, as glibc's tcache does when its key
 * matches by chance, and the second entry is caught when it is popped
 * (qs_queue_try_pop).  True (after reporting) if it is a double free. */
bool qs_double_free_check(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    qs_stat(c, q, QS_DOUBLE_FREE_CHECK, 1);
    bool found = false;
    if (q) { /* NULL: a caller without a queue (SLOB's big objects) */
        found = vec_has(q->slots, QS_TOP_NR(q->top), obj);
        for (unsigned k = 0; k < QS_PENDING && !found; k++)
            found = list_has(c, q->pending[k].head, q->pending[k].n, obj);
        if (!found) { /* a CPU's open batch (racing with its appends: a hint) */
            uint64_t fb = QS_LOAD(q->fb);
            found = fb && list_has(c, QS_FB_HEAD(fb), QS_FB_N(fb), obj);
        }
    }
    struct qs_list *own = qs_slab_owner(s);
    if (!found && q && own == &q->list) {
        found = list_has(c, s->freelist, s->objects, obj);
        if (!found) { /* freed by another thread and posted back to us */
            qs_lock_acquire(&q->inbox.lock);
            found = list_has(c, q->inbox.head, q->inbox.nr, obj);
            qs_lock_release(&q->inbox.lock);
        }
    } else if (!found && own && own->node) { /* node-owned: its lock */
        qs_lock_acquire(&own->node->lock);
        if (qs_slab_owner(s) == own)
            found = list_has(c, s->freelist, s->objects, obj);
        qs_lock_release(&own->node->lock);
    }
    if (found)
        qs_fatal("double free of %p in cache %s", obj, c->name);
    return found;
}

/* The free of the queue's top object: a double free, unless it was handed
 * out meanwhile by a path that does not pop (it cannot be: every
 * allocation from the queue pops), so qs_double_free_check finds it. */
QS_NOINLINE void qs_free_suspect(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    if (!qs_double_free_check(c, q, s, obj))
        qs_queue_push(c, q, s, obj);
}

/* The queue's top object does not look free (qs_queue_try_pop): report it,
 * and if the handler returns, drop the entry (never hand it out).  A word
 * of 0 is what the first of two entries of one object left when it was
 * handed out: a double free whose second free was not next to the first. */
void qs_queue_corrupt(qslab_cache *c, struct qs_queue *q)
{
    unsigned nr = QS_TOP_NR(q->top);
    /* the handler returned: drop the entry, never hand it out.  A second
     * free was no free: it leaves the count of frees; an overwritten object
     * was freed once and is lost (leaked, in use from its slab's side) */
    bool twice = qs_report_unstamped(c, q->slots[nr - 1]);
    qs_queue_nr_set(q, nr - 1);
    if (twice)
        queue_uncount(q, 1);
}

/* Thread exit (qs_global held): give everything back and hand the slabs to
 * the node lists.  The order matters: slabs are handed over before the inbox
 * is marked dead, so a sender that finds it dead sees the new owners. */
/* Hand every slab q owns to its node's list (q's owner, or q->lock held,
 * q's objects gone home): a thread's exit, and a CPU the purger found idle,
 * so that the node's other owners refill from them instead of making new
 * slabs (a thread that moved to another CPU left its slabs partly free on
 * the old one).  Frees of their objects that read the old owner meanwhile
 * are posted to q's inbox and routed again from there (the routing reads
 * the owner under the node lock). */
void qs_queue_hand_slabs(qslab_cache *c, struct qs_queue *q)
{
    for (int pass = 0; pass < 2; pass++) {
        struct qs_slab *s;
        while ((s = pass ? q->list.full : q->list.partial)) {
            int state = s->state;
            qs_list_del(&q->list, s);
            struct qs_node *n = &c->nodes[s->node];
            qs_lock_acquire(&n->lock);
            qs_slab_set_owner(s, &n->list);
            qs_list_add(&n->list, s, state);
            qs_lock_release(&n->lock);
        }
    }
}

void qs_queue_retire(qslab_cache *c, struct qs_queue *q)
{
    if (qs_front_of(c)->retire) /* the front end's per-owner state */
        qs_front_of(c)->retire(c, q);
    qs_queue_send_pending(c, q);
    qs_queue_claim(c, q);
    if (QS_TOP_NR(q->top)) {
        unsigned long twice = qs_route_vec(c, q, q->slots, QS_TOP_NR(q->top));
        qs_queue_nr_set(q, 0);
        if (twice)
            queue_uncount(q, twice);
    }
    grant_release(c, q);
    qs_queue_drain_stash(c, q);
    qs_queue_hand_slabs(c, q);
    qs_lock_acquire(&q->inbox.lock);
    q->inbox.dead = 1;
    void *head = q->inbox.head;
    unsigned long n = q->inbox.nr;
    q->inbox.head = q->inbox.tail = NULL;
    q->inbox.nr = 0;
    __atomic_store_n(&q->inbox.pending, 0, __ATOMIC_RELAXED);
    qs_lock_release(&q->inbox.lock);
    if (head)
        qs_route_list(c, q, head, n);
}

/* ---- per-CPU queues (QS_OWNER_CPU): the slow paths ----
 *
 * Who owns what.  A CPU's queue q: its top and slots are changed only by
 * restartable sequences running on q->cpu (the fast paths, and percpu.c's
 * batch operations), or by a thread that took q from its CPU
 * (percpu_take).  Everything else of q (its slabs' lists and free lists,
 * its pending batches, its counters, moved and nr_seq, the size of its
 * slots) belongs to whoever holds q->lock: every slow path takes it first.
 * A slow path may be preempted, migrated or signalled anywhere: holding the
 * lock, it still owns q's slow state wherever it runs, and its changes of
 * top and slots are sections that check they run on q->cpu and restart or
 * fail as a whole (percpu.c); a failed one (the thread migrated) leaves the
 * objects in the caller's hands, which puts them back on their slabs.  One
 * preempted lock holder stalls only the slow paths of its queue (the fast
 * paths of every CPU, its own included, go on), and only until it runs
 * again: the lock's waiters yield.  SLQB had all of this from running with
 * interrupts off on its own CPU; tcmalloc's per-CPU caches do the same as
 * here (batch operations as restartable sequences, and stopping a CPU's
 * cache with a membarrier to drain it from outside).
 */
#define QS_PERCPU_BATCH 256 /* objects a slow path moves at once (on the stack) */

/* A CPU's queue's slots grow in a section on its CPU (q->lock held). */
bool qs_percpu_reserve(struct qs_queue *q, unsigned n)
{
    return slots_grow(q, n, true);
}

/* Take q from its CPU (q->lock held): its fast paths find qs_no_queue from
 * now on (and go to the slow paths, which wait for the lock), and the
 * membarrier restarts any section that found q before.  Then q's top and
 * slots are the caller's, as a thread's queue is its thread's, until
 * percpu_give.  False if membarrier is refused (nothing changed). */
bool qs_percpu_take(struct qs_queue *q)
{
    if (!qs_percpu_takeable)
        return false;
    unsigned id = q->cache->id;
    if (id < QS_PERCPU_IDS) {
        __atomic_store_n(&q->owner->ids[id], &qs_no_queue, __ATOMIC_RELEASE);
        if (qs_os_membarrier_rseq(q->cpu) != 0) {
            __atomic_store_n(&q->owner->ids[id], q, __ATOMIC_RELEASE);
            return false;
        }
    }
    return true;
}

void qs_percpu_give(struct qs_queue *q)
{
    unsigned id = q->cache->id;
    if (id < QS_PERCPU_IDS)
        __atomic_store_n(&q->owner->ids[id], q, __ATOMIC_RELEASE);
}

/* ---- the open remote batch (q->fb; internal.h) ----
 * The free fast path appends another owner's object to q's open batch when
 * the batch is that owner's and not full: one restartable sequence, no lock.
 * Everything else is the lock holder's: it closes the batch (a section on
 * q->cpu swaps fb for 0: no fast path appends to a closed batch, so fb_to,
 * fb_tail and fb_base may change then), hands what it held to the pending
 * batches (SLQB's rlist: up to QS_PENDING owners open, each posted home at
 * freebatch objects), and opens it for the owner of the object that found
 * it closed or full, with that owner's pending objects.  A thread that
 * migrated meanwhile fails the section: the batch stays in pending[].
 * Objects the fast path appended are fast frees: counted at the close, in
 * moved (stats.c adds those of an open batch), inside the seqcount. */

/* Hand a closed batch b to the pending batch of its owner (merged: the
 * pending one's objects after b's), posted once it holds freebatch. */
static void pending_merge(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    struct qs_batch *p = batch_for(c, q, q->pending, QS_PENDING, &q->pending_victim, b->to);
    if (p->n) {
        *qs_link(c, b->tail) = qs_enc(c, p->head);
        b->tail = p->tail;
    }
    p->head = b->head;
    p->tail = b->tail;
    p->n += b->n;
    if (p->n >= QS_LOAD(c->freebatch))
        send_batch(c, q, p);
}

static void percpu_fb_close(qslab_cache *c, struct qs_queue *q, bool taken)
{
    uint64_t old;
    qs_queue_seq_begin(q);
    if (taken) { /* no section uses q: plain */
        old = q->fb;
        QS_STORE(q->fb, 0);
    } else if (qs_percpu_swap_fb(q, 0, &old) != 0) {
        qs_queue_seq_end(q, 0);
        return; /* migrated: it stays open for now */
    }
    unsigned n = QS_FB_N(old);
    /* the fast path's appends are fast frees (free_fast = nr + pops - moved) */
    qs_queue_seq_end(q, old ? -(long)(n - q->fb_base) : 0);
    if (!old)
        return;
    struct qs_batch b = {q->fb_to, QS_FB_HEAD(old), q->fb_tail, n};
    if (n >= QS_LOAD(c->freebatch))
        send_batch(c, q, &b);
    else
        pending_merge(c, q, &b);
}

/* obj, of another owner's slab s, found the open batch closed, full, or
 * another owner's (q->lock held): close it, and open it for s's owner with
 * obj and what was pending for that owner. */
static void percpu_fb_open(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    percpu_fb_close(c, q, false);
    struct qs_batch b = {qs_slab_owner(s), obj, obj, 1};
    *qs_link(c, obj) = qs_enc(c, NULL);
    for (unsigned k = 0; k < QS_PENDING; k++) {
        struct qs_batch *p = &q->pending[k];
        if (p->to == b.to && p->n) { /* take it over: obj first */
            *qs_link(c, obj) = qs_enc(c, p->head);
            b.tail = p->tail;
            b.n += p->n;
            p->n = 0;
            p->head = p->tail = NULL;
            p->to = NULL;
            break;
        }
    }
    if (b.n + 1 >= QS_LOAD(q->fb_max) || QS_LOAD(q->fb)) { /* full already (or open again: migrated) */
        pending_merge(c, q, &b);
        return;
    }
    qs_queue_seq_begin(q);
    QS_STORE(q->fb_to, b.to);
    QS_STORE(q->fb_tail, b.tail);
    QS_STORE(q->fb_base, (uint32_t)b.n);
    uint64_t old;
    int r = qs_percpu_swap_fb(q, QS_FB_PACK(obj, b.n), &old);
    qs_queue_seq_end(q, 0);
    if (r != 0) /* migrated: the batch stays with the pending ones */
        pending_merge(c, q, &b);
}

/* Flush up to n objects from the top of q home (SLQB's flush_free_list), in
 * a section on q->cpu; q->lock held.  Returns how many, or QS_RSEQ_MOVED. */
static int percpu_flush(qslab_cache *c, struct qs_queue *q, unsigned n)
{
    void *buf[QS_PERCPU_BATCH];
    qs_queue_seq_begin(q);
    int k = qs_percpu_pop(q, buf, n < QS_PERCPU_BATCH ? n : QS_PERCPU_BATCH);
    qs_queue_seq_end(q, k > 0 ? -k : 0);
    if (k > 0) {
        QS_ADD(q->stat[QS_FLUSH], 1);
        unsigned long twice = qs_route_vec(c, q, buf, (unsigned long)k);
        if (twice)
            queue_uncount(q, twice);
    }
    return k;
}

/* Give back everything a CPU's queue holds (shrink, trim, the purger for
 * CPUs that went idle), q->lock held: taken from its CPU, it is emptied as
 * a thread's queue is.  Without membarrier only the caller's own CPU's
 * queue can be emptied, a batch at a time. */
void qs_percpu_empty(qslab_cache *c, struct qs_queue *q)
{
    /* Taken only if something is on its CPU (an object in its slots, or an
     * open remote batch: only the lock holder opens one, and we hold the
     * lock).  Otherwise what is left, the pending batches, the inbox and the
     * stash, is the lock holder's, as it is without membarrier.  A take's
     * membarrier interrupts the CPU; a shrink's two rounds over every CPU's
     * queue of an idle cache cost four on 2 CPUs.  A fast path on that CPU
     * may push after these loads: an object freed during the shrink, which
     * a take would miss too. */
    bool held = QS_TOP_NR(QS_LOAD(q->top)) || QS_LOAD(q->fb);
    if (held && qs_percpu_take(q)) {
        QS_TSAN_ACQUIRE(q);
        qs_queue_empty_out(c, q);
        QS_TSAN_RELEASE(q);
        qs_percpu_give(q);
        return;
    }
    send_pending(c, q, false);
    qs_queue_claim(c, q);
    while (percpu_flush(c, q, QS_PERCPU_BATCH) > 0)
        ;
    grant_release(c, q);
    qs_queue_drain_stash(c, q);
}

/* Empty every CPU's queue of c (shrink, trim; qs_global held).  Emptying
 * one queue posts objects of other CPUs' slabs to their inboxes, so a
 * second round empties the inboxes the first one filled. */
void qs_percpu_empty_all(qslab_cache *c)
{
    for (int round = 0; round < 2; round++)
        for (struct qs_queue *q = c->queues; q; q = q->all_next) {
            qs_lock_acquire(&q->lock);
            qs_percpu_empty(c, q);
            qs_lock_release(&q->lock);
        }
}

/* The caller's CPU's queue of c, locked; NULL if the caller has none (no
 * rseq registration for this thread, or ENOMEM). */
struct qs_queue *qs_percpu_lock(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!q && !(q = qs_queue_attach(c)))
        return NULL;
    qs_lock_acquire(&q->lock);
    return q;
}

/* The fast path found the queue empty (or its top object's word wrong, or
 * the CPU without a queue).  Under the lock: pop what is there now, or
 * gather a refill (refill_gather: inbox, slabs, stash, node, new memory),
 * hand one object to the caller and push the rest; whatever a migration
 * keeps out of the queue goes back to its slab.  The caller's object never
 * entered the queue: it counts as a slow pop and in moved, which keeps
 * free_fast = nr + pops - moved. */
/* q->lock held, buf[0..n) gathered for q (n >= 1): the last object is the
 * caller's (a slow allocation, counted), the rest go onto q's slots; what a
 * migration keeps out goes back (qs_route_vec: to its slab's owner, or the
 * front end's give_back).  The caller's object never entered the queue: it
 * counts in moved too, which keeps free_fast = nr + pops - moved.  Releases
 * q->lock. */
void *qs_percpu_refilled(qslab_cache *c, struct qs_queue *q, void **buf, unsigned n)
{
    void *obj = buf[--n];
    int pushed = 0;
    qs_queue_seq_begin(q);
    if (n && qs_percpu_reserve(q, n)) {
        pushed = qs_percpu_push(q, buf, n, q->cap);
        if (pushed < 0)
            pushed = 0;
    }
    qs_queue_seq_end(q, pushed + 1);
    if ((unsigned)pushed < n)
        qs_route_vec(c, q, buf + pushed, n - (unsigned)pushed);
    QS_ADD(q->stat[QS_ALLOC_SLOW], 1);
    qs_lock_release(&q->lock);
    qs_self.last_word = *qs_link(c, obj); /* calloc's (kmalloc.c) */
    *qs_link(c, obj) = 0;
    return obj;
}

/* q->lock held: pop q's top object for a slow allocation (counted).
 * Returns 1 (*obj is it, its word still to clear), 0 (q is empty), -1 (the
 * caller left q's CPU) or 2 (the top entry was reported and dropped: its
 * word was neither the stamp nor a link; a second free leaves the counts
 * with its entry (nr went, no pop counted), an object written after its
 * free stays counted as freed (lost)). */
int qs_percpu_pop_one(qslab_cache *c, struct qs_queue *q, void **obj)
{
    qs_queue_seq_begin(q);
    int k = qs_percpu_pop(q, obj, 1);
    qs_queue_seq_end(q, 0); /* a pop, counted below */
    if (k != 1)
        return k;
    uintptr_t w = *qs_link(c, *obj);
    if (w != q->stamp && !qs_looks_free(c, w)) {
        if (!qs_report_unstamped(c, *obj)) {
            qs_queue_seq_begin(q);
            qs_queue_seq_end(q, -1);
        }
        return 2;
    }
    QS_ADD(q->stat[QS_ALLOC_SLOW], 1);
    return 1;
}

static void *percpu_alloc_slow(qslab_cache *c)
{
    void *buf[QS_PERCPU_BATCH];
    for (;;) {
        struct qs_queue *q = qs_percpu_lock(c);
        if (!q) {
            int cpu = qs_os_rseq_cpu(qs_rseq_off);
            return qs_node_alloc(c, NULL, cpu >= 0 ? qs_node_of_cpu(cpu) : 0);
        }
        void *obj;
        int k = qs_percpu_pop_one(c, q, &obj);
        if (k != 0) {
            qs_lock_release(&q->lock);
            if (k != 1) /* migrated (the new CPU's queue), or an entry dropped */
                continue;
            qs_self.last_word = *qs_link(c, obj); /* calloc's (kmalloc.c) */
            *qs_link(c, obj) = 0;
            return obj;
        }
        grant_grow(c, q); /* a miss */
        uint32_t room = qs_queue_max(q) + 1; /* the grant, and the caller's */
        if (room > QS_PERCPU_BATCH)
            room = QS_PERCPU_BATCH;
        unsigned n = refill_gather(c, q, buf, room);
        if (!n) {
            qs_lock_release(&q->lock);
            return NULL; /* ENOMEM */
        }
        return qs_percpu_refilled(c, q, buf, n);
    }
}

/* The free fast path's other outcomes: the queue's top is obj (a double
 * free), the queue is full, or obj is not of this CPU's slabs (or the CPU
 * has no queue).  Full: grow the slots up to hiwater, else flush freebatch
 * objects from the top home (SLQB's flush_free_list), then push.  Another
 * owner's object: queued while the queue is short, else batched home, as a
 * thread's queue does (qs_free_remote). */
void qs_percpu_free_slow(qslab_cache *c, struct qs_slab *s, void *obj, int why)
{
    if (unlikely(c->front != QS_FRONT_SLQB)) { /* no queues: front.h */
        qs_front_of(c)->free(c, s, obj);
        return;
    }
    if (why == QS_PC_SUSPECT) { /* obj is the top of our queue: free already */
        qs_fatal("double free of %p in cache %s", obj, c->name);
        return;
    }
    struct qs_queue *q = qs_percpu_lock(c);
    if (!q) { /* no queue (no rseq for this thread) */
        qs_free_direct(c, obj);
        return;
    }
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && qs_double_free_check(c, q, s, obj)) {
        qs_lock_release(&q->lock);
        return;
    }
    bool own = qs_slab_owner(s) == &q->list;
    /* the guard sampler armed us (guard.c): empty the queue, so that the
     * next allocation is a slow one (the sample); no push */
    bool armed = unlikely(QS_LOAD(q->guard_armed) != 0);
    if (armed)
        qs_guard_armed_free(c, q);
    for (int tries = 0; !armed && tries < 2; tries++) {
        unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
        /* a miss (more of the owner budget): our own object at the limit,
         * or another owner's of our node that the queue would park */
        if (!tries && nr >= q->grant && nr < QS_LOAD(q->hiwater) &&
            (own || (s->node == q->node && nr < QS_LOAD(q->park))))
            grant_grow(c, q);
        uint32_t qmax = qs_queue_max(q);
        uint32_t max = own ? qmax : QS_LOAD(q->park); /* c->park's copy (0: twin.c) */
        if (max > qmax)
            max = qmax;
        if (!own && s->node != q->node)
            max = 0; /* never another node's memory on our queue */
        if (nr < max && (nr < q->cap || qs_percpu_reserve(q, 1))) {
            qs_queue_limit_set(q);
            *qs_link(c, obj) = q->stamp;
            int k = qs_percpu_push(q, &obj, 1, max < q->cap ? max : q->cap); /* a free: nr + 1 counts it */
            if (k == 1) {
                qs_lock_release(&q->lock);
                return;
            }
            if (k < 0)
                break; /* migrated */
        }
        if (!own || tries)
            break;
        /* full: flush a batch from the top home, then push */
        uint32_t fb = QS_LOAD(c->freebatch);
        if (percpu_flush(c, q, fb < QS_PERCPU_BATCH ? fb : QS_PERCPU_BATCH) <= 0)
            break;
    }
    QS_ADD(q->stat[QS_FREE_SLOW], 1);
    if (own) { /* ours, and not queued: straight onto its slab */
        struct qs_slab *empties = NULL;
        if (unlikely(!slab_put(c, &q->list, s, obj, &empties)))
            put_twice_report(c, q, obj);
        if (empties)
            stash_add(c, q, empties);
    } else {
        percpu_fb_open(c, q, s, obj);
    }
    qs_lock_release(&q->lock);
}

/* SLQB's shrink: the queues' objects home, then the nodes' empty slabs. */
size_t qs_slqb_shrink(qslab_cache *c)
{
    if (qs_percpu()) { /* every CPU's queue (SLUB's flush_all) */
        qs_lock_acquire(&qs_global);
        qs_percpu_empty_all(c);
        qs_lock_release(&qs_global);
        size_t bytes = 0;
        for (int n = 0; n < qs_nr_nodes; n++)
            bytes += qs_node_shrink(c, NULL, &c->nodes[n]);
        qs_purger_check();
        return bytes;
    }
    struct qs_queue *q = qs_queue_of(c);
    if (!q)
        q = qs_queue_attach(c);
    if (q)
        qs_queue_empty_out(c, q);
    size_t bytes = 0;
    for (int n = 0; n < qs_nr_nodes; n++)
        bytes += qs_node_shrink(c, q, &c->nodes[n]);
    qs_purger_check();
    return bytes;
}
