/*
 * cpu.c - the slow paths of per-CPU queues (QSLAB_OWNER=cpu): who owns
 * what while a slow path runs, the sections that change a CPU's queue
 * (owner/percpu.c), refills and flushes under the queue's lock, taking a
 * queue from its CPU.
 */
#include "front/slqb/fast.h"
#include "front/front.h"
#include "front/slqb/slqb.h"
#include "owner/owner.h"
#include "core/hooks.h"

#include <errno.h>

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
    return qs_queue_slots_grow(q, n, true);
}

/* Flush up to n objects from the top of q home (SLQB's flush_free_list), in
 * a section on q->cpu; q->lock held.  Returns how many, or QS_RSEQ_MOVED. */
int slqb_percpu_flush(qslab_cache *c, struct qs_queue *q, unsigned n)
{
    void *buf[QS_PERCPU_BATCH];
    qs_queue_seq_begin(q);
    int k = qs_percpu_pop(q, buf, n < QS_PERCPU_BATCH ? n : QS_PERCPU_BATCH);
    qs_queue_seq_end(q, k > 0 ? -k : 0);
    if (k > 0) {
        QS_ADD(q->stat[QS_FLUSH], 1);
        unsigned long twice = qs_route_vec(c, q, buf, (unsigned long)k);
        if (twice)
            slqb_queue_uncount(q, twice);
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
    slqb_send_pending(c, q, false);
    qs_queue_claim(c, q);
    while (slqb_percpu_flush(c, q, QS_PERCPU_BATCH) > 0)
        ;
    slqb_grant_release(c, q);
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

/* SLQB's `idle` hook (front.h): the purger's tick, for every queue q of c
 * (qs_global held, q any owner's, a CPU's or a thread's). */
void qs_slqb_idle(qslab_cache *c, struct qs_queue *q)
{
    /* a CPU's queue that nobody used for a whole tick (its top did not
     * move: no fast alloc or free) is emptied from here (qs_percpu_empty:
     * taken from its CPU with a membarrier), so an idle program gives back
     * what it freed, and its slabs go to their node; a busy one is
     * skipped */
    if (q->cpu >= 0 && qs_percpu_takeable) {
        uint64_t top = QS_LOAD(q->top);
        if (top == q->idle_top && qs_lock_try(&q->lock)) {
            if (QS_TOP_NR(top) || __atomic_load_n(&q->inbox.pending, __ATOMIC_RELAXED) ||
                qs_queue_batches_held(q))
                qs_percpu_empty(c, q);
            /* and its slabs go to the node, where the CPUs still at work
             * refill from them: a thread that moved to another CPU left
             * them partly free here */
            if (q->list.nr_partial || q->list.nr_full)
                qs_queue_hand_slabs(c, q);
            qs_lock_release(&q->lock);
            top = QS_LOAD(q->top);
        }
        q->idle_top = top;
    }
    qs_queue_steal_idle_stash(c, q);
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
 * gather a refill (slqb_refill_gather: inbox, slabs, stash, node, new memory),
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

void *slqb_percpu_alloc_slow(qslab_cache *c)
{
    void *buf[QS_PERCPU_BATCH];
    bool want_bare = qs_self.last_word == QS_WORD_CALLOC; /* calloc's miss (kmalloc.h) */
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
        slqb_grant_grow(c, q); /* a miss */
        uint32_t room = qs_queue_max(q) + 1; /* the grant, and the caller's */
        if (room > QS_PERCPU_BATCH)
            room = QS_PERCPU_BATCH;
        bool bare = false;
        unsigned n = slqb_refill_gather(c, q, buf, room, want_bare ? &bare : NULL);
        if (!n) {
            qs_lock_release(&q->lock);
            return NULL; /* ENOMEM */
        }
        if (bare) { /* born bare for calloc: handed out as it is, its word unwritten */
            qs_queue_seq_begin(q);
            qs_queue_seq_end(q, 1); /* never in the queue: as qs_percpu_refilled counts it */
            QS_ADD(q->stat[QS_ALLOC_SLOW], 1);
            qs_lock_release(&q->lock);
            qs_self.last_word = QS_FRESH_WORD(c->secret);
            return buf[0];
        }
        return qs_percpu_refilled(c, q, buf, n);
    }
}

/* ---- other CPUs' slabs ----
 * A CPU's queue owns its slabs, so a thread that moves to another CPU
 * leaves the slabs it allocated from, with the free objects its frees
 * bring back (into the old CPU's inbox, claimed only by that CPU's next
 * refill), to a queue it no longer runs on, and cuts new slabs where it
 * runs now: one set of partial slabs per CPU the program ran on.  A
 * single-threaded Python building dicts under load from other processes
 * peaked at 110 to 128 MiB where, pinned to one CPU, it peaked at 109.  So
 * before new memory, a CPU's refill takes slabs with free objects from
 * other CPUs' queues of its node (SLUB has them on the node's partial
 * list for the same reason): up to QS_ADOPT_LOOK queues that hold
 * partial slabs, an inbox or a stash (read as hints), each only if its
 * lock is free and nobody used it since the previous look (adopt_top).
 * Who owns what.  A queue's slabs' lists and free lists, its inbox claim
 * and its pending batches are its lock holder's (above), wherever that
 * thread runs: holding v->lock we are v's owner for them, as the purger is
 * when it empties an idle CPU's queue; the fast paths of v's CPU touch
 * only v's top, slots and open batch, none of which we touch.  The lock is
 * only tried (we hold q->lock; two queue locks are never waited for).  We
 * claim v's inbox home to its slabs (qs_queue_claim, routed as v: objects
 * of other owners' slabs go out in v's batches), then take v's partial
 * slabs that have free objects and make them ours (slab->owner, release);
 * an object of such a slab that is on its way to v (in another owner's
 * batch) or in v's slots is not lost: a claim routes each object by its
 * slab's owner at that time, and a queue may hold any slab's objects, as
 * when the node's slabs change hands.  Our own batches were posted before
 * (slqb_refill_gather), so none holds an object of a slab we take.  v's
 * stash (its own leaf lock) gives its empty slabs and their budget back.
 * A slab that grows only (no free list) stays v's. */
#define QS_ADOPT_LOOK 8

struct qs_slab *slqb_percpu_adopt(qslab_cache *c, struct qs_queue *q, unsigned want)
{
    struct qs_slab *out = NULL, *s;
    unsigned got = 0, looked = 0, ncpu = (unsigned)qs_nr_cpu_ids;
    for (unsigned i = 1; i < ncpu && got < want && looked < QS_ADOPT_LOOK; i++) {
        unsigned cpu = ((unsigned)q->cpu + i) % ncpu;
        struct qs_owner *o = __atomic_load_n(&qs_cpu_owners[cpu], __ATOMIC_ACQUIRE);
        /* a CPU's slot array never moves away (an old one is kept:
         * owner.c slots_grow), and its queues stay while c lives */
        if (!o || o->node != q->node || c->id >= __atomic_load_n(&o->cap, __ATOMIC_ACQUIRE))
            continue;
        struct qs_queue *v = __atomic_load_n(&__atomic_load_n(&o->slots, __ATOMIC_ACQUIRE)[c->id], __ATOMIC_ACQUIRE);
        if (!v || v == q ||
            (!QS_LOAD(v->list.nr_partial) && !__atomic_load_n(&v->inbox.pending, __ATOMIC_RELAXED) &&
             !QS_LOAD(v->nr_stash)))
            continue;
        looked++;
        if (!qs_lock_try(&v->lock))
            continue;
        /* only a queue nobody used since the last look (its CPU runs no
         * thread of ours, or none that uses c): two CPUs busy with c do
         * not take turns at each other's slabs, whose frees would then
         * all be remote */
        uint64_t top = QS_LOAD(v->top);
        bool idle = top == v->adopt_top;
        v->adopt_top = top;
        if (idle) {
            qs_queue_claim(c, v);
            struct qs_slab *next;
            for (s = v->list.partial; s && got < want; s = next) {
                next = s->next;
                if (!s->freelist)
                    continue;
                qs_list_del(&v->list, s);
                got += qs_slab_hand_to(s, &q->list, &out);
            }
        }
        qs_lock_release(&v->lock);
        if (idle && got < want && QS_LOAD(v->nr_stash)) {
            qs_lock_acquire(&v->stash_lock);
            while (got < want && (s = slqb_stash_pop(v)))
                got += qs_slab_hand_to(s, &q->list, &out);
            qs_lock_release(&v->stash_lock);
        }
    }
    return out;
}

/* How many objects a flush of a CPU's queue at its limit (nr objects)
 * sends home: half of them, at most freebatch.  A class whose count in use
 * wanders by a few objects either way then misses again only after it has
 * wandered half the limit.  A flush of the whole queue would leave it to
 * miss at its next allocation, and the refill that follows at its next
 * free: the scale benchmark's classes of 1 to 2 KiB, four objects in use
 * each and their grants held down by the owner budget, went from limit to
 * empty and back on 4% of their operations that way.  SLQB's watermarks
 * keep their meaning: hiwater is 4 x freebatch, down to 1 x for big
 * objects (observe/tune.c). */
static unsigned flush_count(qslab_cache *c, unsigned nr)
{
    unsigned n = nr - nr / 2, fb = QS_LOAD(c->freebatch);
    return n < fb ? n : fb; /* slqb_percpu_flush moves QS_PERCPU_BATCH at most */
}

/* The free fast path's other outcomes: the queue's top is obj (a double
 * free), the queue is full, or obj is not of this CPU's slabs (or the CPU
 * has no queue).  Full: grow the slots up to hiwater, else flush half the
 * queue (at most freebatch objects: flush_count) from the top home (SLQB's
 * flush_free_list), then push.  Another
 * owner's object: queued while the queue is short, else batched home, as a
 * thread's queue does (qs_free_remote). */
void qs_percpu_free_slow(qslab_cache *c, struct qs_slab *s, void *obj, int why)
{
    if (unlikely(c->front != QS_FRONT_SLQB)) { /* no queues: front.h */
        qs_front_of(c)->free_obj(c, s, obj);
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
        qs_debug_hooks.guard_armed_free(c, q);
    for (int tries = 0; !armed && tries < 2; tries++) {
        unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
        /* a miss (more of the owner budget): our own object at the limit,
         * or another owner's of our node that the queue would park */
        if (!tries && nr >= q->grant && nr < QS_LOAD(q->hiwater) &&
            (own || (s->node == q->node && nr < QS_LOAD(q->park))))
            slqb_grant_grow(c, q);
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
        if (slqb_percpu_flush(c, q, flush_count(c, nr)) <= 0)
            break;
    }
    QS_ADD(q->stat[QS_FREE_SLOW], 1);
    if (own) { /* ours, and not queued: straight onto its slab */
        struct qs_slab *empties = NULL;
        if (unlikely(!slab_put(c, &q->list, s, obj, &empties)))
            slqb_put_twice_report(c, q, obj);
        if (empties)
            slqb_stash_add(c, q, empties);
    } else {
        slqb_percpu_fb_open(c, q, s, obj);
    }
    qs_lock_release(&q->lock);
}
