/*
 * budget.c - what an owner holds that is not in use: the owner budget
 * shared by all its SLQB queues, each queue's grant of it (grown on misses,
 * stolen from colder queues, given back), and each queue's stash of its own
 * empty slabs.
 */
#include "front/slqb/fast.h"
#include "front/front.h"
#include "front/slqb/slqb.h"
#include "owner/owner.h"

#include <errno.h>

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
 * (doubling from a page's worth, so a queue ends with what its misses
 * show it needs, not with hiwater), at most a sixteenth of the budget
 * (objects over QS_OWNER_OBJ_MAX, core/page.h, or an eighth of the budget
 * are never queued: they go to and come from their node's slabs).  The step comes from the
 * budget's free part; when that is spent, every QS_STEAL_EVERY misses,
 * from the unused part (grant over what it holds) of the coldest of a few
 * other queues of the owner (the fewest misses since a steal last looked
 * at them: each look halves a queue's count), and only a colder one than
 * the asker: nothing is flushed, and two hot caches do not take turns
 * emptying each other.
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
QS_STARTUP void qs_owner_budget_default(void)
{
    unsigned long b = QS_BUDGET_TOTAL / (unsigned long)qs_os_cpu_possible();
    QS_STORE(qs_owner_budget, b < QS_BUDGET_LOW ? QS_BUDGET_LOW : b > QS_BUDGET_HIGH ? QS_BUDGET_HIGH : b);
}
/* The budget in force: owner_budget, or with a cached-memory cap each
 * owner's share of its half of the cap (core/page.h qs_cached_empty_max
 * keeps the other half for empty slabs), whichever is less: the owners
 * sharing it are the possible CPUs, or the threads that have queues now
 * (owner/owner.h qs_owners_sharing), so what they hold in all stays within
 * half the cap.  A cap set, or more threads, lowers it: each owner gives
 * back its excess at its next miss, as when owner_budget is lowered
 * (slqb_grant_grow), and the purger empties an idle CPU's queues. */
unsigned long qs_owner_budget_now(void)
{
    unsigned long b = QS_LOAD(qs_owner_budget), max = QS_LOAD(qs_cached.max);
    if (unlikely(max)) {
        unsigned long share = max / 2 / qs_owners_sharing();
        if (share < b)
            b = share;
    }
    return b;
}

/* ---- Remote frees in transit ----
 * A queue's pending batches and a CPU's open batch hold objects of other
 * owners' slabs on their way home (remote.c).  Each batch reserves its
 * room (up to freebatch objects) from its owner's transit budget when it
 * starts, and gives it back when it is posted: so what an owner holds in
 * transit over all its caches is at most qs_transit_budget(), a quarter of
 * the owner budget (at least QS_TRANSIT_LOW), not freebatch x 5 batches x
 * every cache it frees others' objects of (4.3 MiB a CPU for six caches on
 * the big machines of docs/fronts.md, where the owner budget is 256 KiB).
 * A batch that finds the budget spent gets what is left, or none (after
 * its queue's other pending batches were posted to make room): it is then
 * posted at once, one object at a time, slower but bounded.  One atomic
 * add at a batch's start and one at its posting, never per object. */
#define QS_TRANSIT_PART 4
#define QS_TRANSIT_LOW ((unsigned long)16 << 10)
static unsigned long transit_peak; /* the most any owner has reserved (relaxed) */

unsigned long qs_transit_budget(void)
{
    unsigned long b = qs_owner_budget_now() / QS_TRANSIT_PART;
    return b < QS_TRANSIT_LOW ? QS_TRANSIT_LOW : b;
}

uint32_t slqb_transit_take(qslab_cache *c, struct qs_queue *q, uint32_t want)
{
    struct qs_owner *o = q ? q->owner : NULL;
    if (!o || !want)
        return 0;
    unsigned long slot = c->slot_size, max = qs_transit_budget(), k;
    unsigned long used = __atomic_load_n(&o->transit_used, __ATOMIC_RELAXED);
    do {
        unsigned long avail = used < max ? (max - used) / slot : 0;
        k = want < avail ? want : avail;
        if (!k)
            return 0;
    } while (!__atomic_compare_exchange_n(&o->transit_used, &used, used + k * slot, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    if (used + k * slot > QS_LOAD(transit_peak)) /* racy maximum: statistics */
        QS_STORE(transit_peak, used + k * slot);
    return (uint32_t)k;
}

void slqb_transit_put(qslab_cache *c, struct qs_queue *q, uint32_t k)
{
    if (k && q && q->owner)
        __atomic_fetch_sub(&q->owner->transit_used, (unsigned long)k * c->slot_size, __ATOMIC_RELAXED);
}

static unsigned long budget_steals; /* atomic: steals that found a victim */
static unsigned long budget_peak;   /* the most any owner has had granted (relaxed) */

#define QS_GRANT_STEPS 16 /* a miss asks for this part of the budget */
/* Objects over an eighth of the budget, or over 32 KiB (QS_OWNER_OBJ_MAX),
 * are never queued:
 * a program that uses such an object writes at least eight pages of it,
 * next to which the slow path of its malloc and free is small, and one of
 * them queued per class and CPU adds up to nobody's memory (the 4-thread
 * Python program of `make bench` held 4.2 MiB in its queues at its peak,
 * most of it blocks of 36 KiB to 2 MiB of classes with nothing in use; its
 * peak RSS went 33.9 -> 32.2 MiB).  They come from their node's slabs and
 * go back to them at once, whoever frees them (queue.c, "NEVER QUEUED"),
 * and an empty slab serves every class of its order. */
#define QS_GRANT_BIG 8
#define QS_STEAL_LOOK 8   /* queues a steal looks at */
#define QS_STEAL_SCAN 32  /* ... among this many of the owner's slots */
#define QS_STEAL_EVERY 16 /* a full budget: a steal at every this many misses */

bool slqb_unqueued(const qslab_cache *c)
{
    return c->slot_size > QS_OWNER_OBJ_MAX || c->slot_size > qs_owner_budget_now() / QS_GRANT_BIG;
}

static bool budget_take(struct qs_owner *o, unsigned long bytes)
{
    unsigned long used = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED);
    unsigned long max = qs_owner_budget_now();
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

void slqb_budget_put(struct qs_owner *o, unsigned long bytes)
{
    if (bytes)
        __atomic_fetch_sub(&o->budget_used, bytes, __ATOMIC_RELAXED);
}


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
            while (nr > to && slqb_percpu_flush(c, q, nr - to) > 0)
                nr = QS_TOP_NR(QS_LOAD(q->top));
            if (nr > to) { /* migrated: keep a grant of what is held */
                QS_STORE(q->grant, nr < g ? nr : g);
                to = q->grant;
            }
        }
    }
    slqb_budget_put(q->owner, (unsigned long)(g - to) * c->slot_size);
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
void slqb_grant_grow(qslab_cache *c, struct qs_queue *q)
{
    QS_STORE(q->misses, QS_LOAD(q->misses) + 1); /* (steals halve it) */
    uint32_t hw = QS_LOAD(q->hiwater), slot = c->slot_size;
    if (q->grant >= hw || !q->owner)
        return;
    if (slqb_unqueued(c))
        return;
    unsigned long budget = qs_owner_budget_now();
    /* as much as it has (doubling: a queue gets what its misses show it
     * needs), at least a page's worth (c->fresh: a refill's 64 KiB of
     * 1 KiB objects, for each of the classes a program uses a few objects
     * of, spent the budget on what they never used), at most a sixteenth
     * of the budget */
    uint32_t step = q->grant > QS_LOAD(c->fresh) ? q->grant : QS_LOAD(c->fresh);
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

/* qslab_budget_stats (qslab.h; its entry point, which starts the library
 * up first: api/entry.c): every owner's figures, under qs_global: what
 * each owner's queues and stashes hold is summed in its budget_held (the
 * reader's scratch), then the maxima are taken. */
QS_NOINLINE void qs_owner_budget_stats(struct qslab_budget_stats *st)
{
    __builtin_memset(st, 0, sizeof(*st));
    st->budget = qs_owner_budget_now();
    st->steals = __atomic_load_n(&budget_steals, __ATOMIC_RELAXED);
    st->peak_max = QS_LOAD(budget_peak); /* owners that are gone included */
    st->transit_budget = qs_transit_budget();
    st->transit_peak = QS_LOAD(transit_peak);
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
                unsigned long used = __atomic_load_n(&o->budget_used, __ATOMIC_RELAXED),
                              transit = __atomic_load_n(&o->transit_used, __ATOMIC_RELAXED);
                if (transit > st->transit_max)
                    st->transit_max = transit;
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
 * grant and stash leave its owner's budget with it, and its batches'
 * reservations the transit budget (the objects they hold are free, and
 * their slabs go back whole: api/cache.c release_cache). */
void qs_queue_budget_drop(qslab_cache *c, struct qs_queue *q)
{
    if (c->front != QS_FRONT_SLQB || !q->owner)
        return;
    qs_lock_acquire(&q->stash_lock);
    slqb_budget_put(q->owner, (unsigned long)q->grant * c->slot_size + q->stash_bytes);
    QS_STORE(q->grant, 0);
    QS_STORE(q->stash_bytes, 0);
    qs_lock_release(&q->stash_lock);
    for (unsigned k = 0; k < QS_PENDING; k++) {
        slqb_transit_put(c, q, q->pending[k].res);
        q->pending[k].res = 0;
    }
    slqb_transit_put(c, q, QS_LOAD(q->fb_max));
    QS_STORE(q->fb_max, 0);
}

/* Give q's whole grant back (emptied by shrink, trim, the purger, retire;
 * q's owner or lock holder, q holding nothing). */
void slqb_grant_release(qslab_cache *c, struct qs_queue *q)
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
        slqb_budget_put(q->owner, q->stash_bytes);
    QS_STORE(q->stash_bytes, 0); /* read by qslab_budget_stats */
    return list;
}

/* The newest slab of q's stash, off it, its bytes back to the owner
 * budget (stash_lock held); NULL: the stash is empty. */
struct qs_slab *slqb_stash_pop(struct qs_queue *q)
{
    struct qs_slab *s = q->stash;
    if (!s)
        return NULL;
    q->stash = s->next;
    QS_STORE(q->nr_stash, q->nr_stash - 1);
    QS_STORE(q->stash_bytes, q->stash_bytes - (uint32_t)qs_slab_bytes(s->order));
    slqb_budget_put(q->owner, qs_slab_bytes(s->order));
    return s;
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
 * owner budget has no room for goes to the node at once; with a
 * cached-memory cap, every slab does. */
void slqb_stash_add(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    unsigned limit = QS_LOAD(c->empty_limit);
    uint32_t bytes = QS_LOAD(c->stash_bytes);
    /* with a cached-memory cap (core/page.h), empty slabs wait where the
     * cap sees them: on the node's FIFO */
    if (QS_LOAD(c->empty_decay_ms) == 0 || bytes == 0 || QS_LOAD(qs_cached.max))
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
