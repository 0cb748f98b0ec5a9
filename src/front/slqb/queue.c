/*
 * queue.c - the owner's object queue: slow paths.  The frees of other
 * owners' objects (pending batches, inboxes, a CPU's open batch) are in
 * remote.c, the owner budget, grants and stashes in budget.c, what is
 * particular to a CPU's queue in cpu.c, and the answers to bad frees in
 * misuse.c; slqb.h is what they share.
 *
 * ALLOC SLOW PATH (the queue is empty), slqb_refill_gather, in order:
 *   1. claim the inbox: remote frees other owners posted to us go into the
 *      queue's slots, up to its room, the rest back to the inbox for the
 *      next refills, or home to their slabs once it waited empty_decay_ms
 *      (SLQB's claim_remote_free_list; remote.c slqb_claim_into);
 *   2. refill from slabs: walk slabs' free lists into the slots until they
 *      hold c->refill objects (half a batch, at most 64 KiB): our own
 *      partial slabs first, then our stash of empty slabs, then the node's
 *      partial and empty slabs (one lock for several slabs), then (a
 *      CPU's queue) other CPUs' slabs with free objects, then new
 *      memory: a slab of ours that can grow (lazy birth, core/slab.c) or a new
 *      slab, until c->fresh objects (QS_REFILL_MIN, at most a page's
 *      worth), born straight into the slots (calloc's refill: one object
 *      born bare, never written, handed out past the queue: core/slab.c
 *      qs_slab_born_bare).  A slab whose free list went to
 *      the queue is FULL, unless it can grow.
 * A thread's queue is refilled in place; a CPU's refill gathers into a
 * buffer under q->lock and pushes it in a section (slqb_percpu_alloc_slow).
 * FREE SLOW PATHS:
 *   - an object of a slab we do not own (another thread's, a node's) goes
 *     on our queue only while the queue is short (c->park: hiwater/4 and
 *     16 KiB) and the object is of our node; otherwise it
 *     joins the pending batch for its owner (pending_add, SLQB's rlist),
 *     posted to the owner's inbox under one lock, or freed under the node's
 *     lock, freebatch objects at a time;
 *   - the queue is at hiwater: an object of our own slab goes straight onto
 *     the slab's free list (qs_free_full; a CPU's queue flushes half of
 *     itself home first, at most freebatch, SLQB's flush_free_list:
 *     cpu.c flush_count); slabs that become empty
 *     go to our stash, handed to the node's empty FIFO a few at a time.
 * qs_queue_flush (shrink, trim) takes objects off the queue and routes each
 * to its slab's owner, walking them once, with the same batching.
 * NEVER QUEUED (slqb_unqueued: objects over 32 KiB or an eighth of the
 * owner budget): such an object comes from its node's slabs (qs_node_alloc,
 * the node's lock) and its free, by whichever owner, goes back to its slab
 * at once (a pending batch of one: pending_start reserves it no room).
 * Batched, it waited in a batch or in its owner's inbox until the owner
 * missed on that cache again or the purger found the queue idle: the
 * 4-thread Python program kept a 1.9 MiB block freed by another thread in
 * an inbox for over 150 ms, at its peak.
 *
 * Producer/consumer traffic stays bounded: a consumer parks at most
 * park + QS_PENDING * freebatch of the producer's objects (park at most
 * 16 KiB, tune.c qs_tune_derive), and the rest return to the producer's inbox, which the producer claims before it
 * makes any new slab.
 */
#include "front/slqb/fast.h"
#include "front/front.h"
#include "core/hooks.h"
#include "owner/owner.h"
#include "front/slqb/slqb.h"

#include <errno.h>

#define QS_ROUTE_BATCHES 8


void qs_queue_empty_out(qslab_cache *c, struct qs_queue *q)
{
    qs_queue_send_pending(c, q);
    qs_queue_claim(c, q);
    qs_queue_flush(c, q, QS_TOP_NR(q->top));
    slqb_grant_release(c, q);
    qs_queue_drain_stash(c, q);
}

/* Routing objects to their slabs' owners: the caller's own slabs get them
 * at once, other owners in batches (up to QS_ROUTE_BATCHES open). */
struct router {
    struct qs_batch b[QS_ROUTE_BATCHES];
    struct qs_slab *empties;
    /* the last descriptor, its memory [lo, lo + span) and its chunk's free
     * bits: objects freed together often share a slab (mem and order never
     * change for a descriptor, so this holds even if the slab was given
     * back meanwhile) */
    struct qs_slab *s;
    uintptr_t lo, span, ch;
    uint64_t *bits;
    unsigned shift;
    unsigned long limit;
    unsigned victim;
};

static void route_begin(qslab_cache *c, struct router *r)
{
    __builtin_memset(r, 0, sizeof(*r)); /* span 0: the first object looks its slab up */
    r->limit = QS_LOAD(c->freebatch);
}

/* obj's slab: the last one, or looked up (and kept for the next) */
static inline struct qs_slab *route_slab(struct router *r, void *obj)
{
    if (likely((uintptr_t)obj - r->lo < r->span))
        return r->s;
    struct qs_slab *s = qs_slab_lookup(obj);
    r->s = s;
    r->lo = (uintptr_t)s->mem;
    r->span = qs_slab_bytes(s->order);
    r->bits = qs_fbits_of(s, &r->ch);
    r->shift = QS_FBITS_SHIFT(s->order);
    return s;
}

static inline void route_remote(qslab_cache *c, struct qs_queue *q, struct router *r,
                                struct qs_list *to, void *obj)
{
    batch_add(c, q, slqb_batch_for(c, q, r->b, QS_ROUTE_BATCHES, &r->victim, to), obj, r->limit);
}

static inline void route_one(qslab_cache *c, struct qs_queue *q, struct router *r, void *obj)
{
    struct qs_slab *s = route_slab(r, obj);
    struct qs_list *to = qs_slab_owner(s);
    if (q && to == &q->list) {
        if (unlikely(!slab_put(c, &q->list, s, obj, &r->empties)))
            slqb_put_twice_report(c, q, obj);
    } else
        route_remote(c, q, r, to, obj);
}

static void route_end(qslab_cache *c, struct qs_queue *q, struct router *r)
{
    for (unsigned k = 0; k < QS_ROUTE_BATCHES; k++)
        slqb_send_batch(c, q, &r->b[k]);
    if (r->empties)
        slqb_stash_add(c, q, r->empties);
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
 * take them out of the derived FREE_FAST (free_fast = nr + pops - moved;
 * core/queue.h). */
void slqb_queue_uncount(struct qs_queue *q, unsigned long k)
{
    qs_queue_seq_begin(q);
    qs_queue_seq_end(q, (long)k);
}


/* Whether obj is among objs[0..i) (the error path of qs_route_vec) */
static QS_SLOW bool queued_before(void *const *objs, unsigned long i, const void *obj)
{
    while (i-- > 0)
        if (objs[i] == obj)
            return true;
    return false;
}

static void double_queued(qslab_cache *c, void *obj)
{
    qs_fatal("double free of %p in cache %s (queued twice)", obj, c->name);
}

/* Route n objects of a queue's slots home.  Each must hold the free stamp
 * or a free-list link (refills leave those): one that does not is reported
 * and dropped (never routed: see qs_queue_corrupt; SLAB's slabs count it,
 * so it goes back there), and the second frees among them are returned,
 * for the caller to take out of its counts.
 * One object may sit in the slots twice (a double free not next to the
 * first, which the fast path does not see): routing its first entry
 * writes a link into it, after which its second entry would look like a
 * refilled object and be routed again, putting it on a list twice.
 * SLQB's slabs keep free bits: an object of the caller's own slabs goes
 * onto its slab's list at once, and an entry whose bit is set already is
 * a second entry if the object came earlier in the vector (looked for on
 * that error path only; else it was on its slab's list before: slab_put
 * reports and repairs).  An object of another owner's slab goes into a
 * batch, where no bit is set: those are marked in the first pass with
 * `mark` (neither the stamp, nor 0, nor a link: its tag bits are wrong),
 * so that a second entry meets a word already marked, and routed by a
 * second pass, which runs only if there were any.  SLAB's arrays (its
 * slabs keep no free bits: give_back) mark every entry, then hand over
 * the runs of marked ones. */
static unsigned long route_vec_marked(qslab_cache *c, struct qs_queue *q, void *const *objs,
                                      unsigned long n)
{
    uintptr_t stamp = QS_STAMP(c->secret), mark = c->secret ^ 2;
    unsigned long twice = 0;
    void (*give_back)(qslab_cache *, struct qs_queue *, void *const *, unsigned long) =
        qs_front_of(c)->give_back;
    for (unsigned long i = 0; i < n; i++) {
        uintptr_t *l = qs_link(c, objs[i]), w = *l;
        if (likely(w == stamp || qs_looks_free(c, w))) {
            *l = mark;
        } else if (w == mark) { /* its first entry is earlier in the slots */
            double_queued(c, objs[i]);
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
    unsigned long from = 0; /* runs of marked objects, handed over */
    for (unsigned long i = 0; i < n; i++) {
        uintptr_t *l = qs_link(c, objs[i]);
        if (*l != mark) { /* dropped, or its first entry was handed over */
            if (i > from)
                give_back(c, q, objs + from, i - from);
            from = i + 1;
            continue;
        }
        *l = stamp; /* as pushed: what give_back expects */
    }
    if (n > from)
        give_back(c, q, objs + from, n - from);
    return twice;
}

unsigned long qs_route_vec(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long n)
{
    if (qs_front_of(c)->give_back)
        return route_vec_marked(c, q, objs, n);
    struct router r;
    uintptr_t stamp = QS_STAMP(c->secret), mark = c->secret ^ 2;
    unsigned long twice = 0, marked = 0;
    route_begin(c, &r);
    for (unsigned long i = 0; i < n; i++) {
        void *obj = objs[i];
        uintptr_t *l = qs_link(c, obj), w = *l;
        if (unlikely(w != stamp && !qs_looks_free(c, w))) {
            if (w == mark) /* another owner's object, its first entry earlier */
                double_queued(c, obj);
            else /* as in route_vec_marked */
                qs_report_unstamped(c, obj);
            twice++;
            continue;
        }
        struct qs_slab *s = route_slab(&r, obj);
        if (!q || qs_slab_owner(s) != &q->list) {
            *l = mark; /* routed by the second pass */
            marked++;
            continue;
        }
        uint64_t bit, *fw = qs_fbit_word_in(r.ch, r.bits, r.shift, obj, &bit);
        if (unlikely(*fw & bit) && queued_before(objs, i, obj)) {
            double_queued(c, obj);
            twice++;
            continue;
        }
        if (unlikely(!slab_put_bit(c, &q->list, s, obj, fw, bit, &r.empties)))
            slqb_put_twice_report(c, q, obj);
    }
    for (unsigned long i = 0; marked && i < n; i++) {
        uintptr_t *l = qs_link(c, objs[i]);
        if (*l != mark) /* routed, dropped, or its first entry was batched */
            continue;
        *l = stamp; /* as pushed: what the batches expect */
        marked--;
        route_remote(c, q, &r, qs_slab_owner(route_slab(&r, objs[i])), objs[i]);
    }
    route_end(c, q, &r);
    return twice;
}

/* Route the top `count` objects of the queue home (shrink, trim). */
/* SLQB's `queue_knobs` (front.h): hiwater and park are the cache's (0
 * while a debug twin takes the allocations: twin.c); a new queue's limit
 * follows from hiwater and its slots (its grant grows at its misses:
 * budget.c), an existing one's is lowered at once to a lower hiwater and
 * raised by its owner (qs_free_full: the slots grow as it needs). */
void qs_slqb_queue_knobs(qslab_cache *c, struct qs_queue *q, bool attach)
{
    bool twin = QS_LOAD(c->dbg_alloc) != NULL;
    uint32_t hw = twin ? 0 : QS_LOAD(c->hiwater);
    QS_STORE(q->hiwater, hw);
    QS_STORE(q->park, twin ? 0 : QS_LOAD(c->park));
    if (attach && !twin)
        qs_queue_limit_set(q);
    else if (QS_LOAD(q->limit) > hw)
        QS_STORE(q->limit, hw);
}

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
        slqb_queue_uncount(q, twice);
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
        qs_debug_hooks.guard_armed_free(c, q);
    } else if (unlikely(nr < hw)) {
        if (nr >= q->grant) /* a miss: more of the owner budget */
            slqb_grant_grow(c, q);
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
        slqb_put_twice_report(c, q, obj);
    if (empties)
        slqb_stash_add(c, q, empties);
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
        unsigned shift = QS_FBITS_SHIFT(s->order);
        /* in locals: the stores to dst may alias them for the compiler */
        uintptr_t secret = c->secret, base = (uintptr_t)s->base, span = s->span;
        size_t link_off = c->link_off;
        while (obj && got < max) {
            /* the next object must be a born object of s on its list (its
             * free bit: qs_list_next) before obj is taken */
            uintptr_t n = *(uintptr_t *)((char *)obj + link_off) ^ secret;
            if (n) {
                size_t g = (n - ch) >> shift;
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
                qs_fbit_clear_in(ch, bits, shift, dst[i]);
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


/* Take objects from a ->next list of slabs just made q's (off every list)
 * into dst[got..want); returns the new count. */
static unsigned take_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, unsigned got,
                          unsigned want, void **dst)
{
    while (s) {
        struct qs_slab *next = s->next;
        if (got >= want && s->inuse == 0) {
            /* an empty slab taken for the count, but the slabs taken
             * after it (first here) filled the refill: lazy birth gives
             * empties different counts (fuzz bug 12: listed partial
             * with nothing in use).  Ours now: the stash */
            s->next = NULL;
            slqb_stash_add(c, q, s);
        } else {
            got += take_slab(c, q, s, false, 0, want - got, dst + got);
        }
        s = next;
    }
    return got;
}

/* calloc's refill found no object born already (bare: core/slab.c): one
 * object born bare into dst[0] from the slab of ours that grows, or from a
 * new slab, when the page layer gave it zero: 1.  0: nothing taken (the
 * slab made is kept on our list, grown by the caller); -1: no memory for
 * a new slab (ENOMEM, as the caller's own attempt would end). */
static int take_bare(qslab_cache *c, struct qs_queue *q, void **dst)
{
    if (c->ctor || c->debug || qs_slab_random(c))
        return 0;
    struct qs_slab *s = q->list.partial;
    bool listed = s != NULL;
    if (!s) {
        if (!(s = qs_slab_new(c, q, q->node, false)))
            return -1;
        qs_slab_set_owner(s, &q->list);
        if (!qs_slab_bare_ok(c, s)) { /* grown by the caller, as any new slab of ours */
            qs_list_add(&q->list, s, QS_SLAB_PARTIAL);
            return 0;
        }
    } else if (!qs_slab_bare_ok(c, s)) {
        return 0;
    }
    dst[0] = qs_slab_born_bare(c, q, s);
    if (listed)
        qs_list_del(&q->list, s);
    qs_list_add(&q->list, s, qs_slab_growable(c, s) ? QS_SLAB_PARTIAL : QS_SLAB_FULL);
    return 1;
}

/* Gather free objects of q's own for its queue into dst[0..room): what
 * others posted to its inbox, if anything; else up to c->refill objects from
 * slabs (SLQB's refill): our partial slabs' free lists, our stash of empty
 * slabs, the node's partial and empty slabs (one lock for several slabs),
 * then new memory: a slab of ours that can grow (lazy birth, core/slab.c) or a
 * new slab, until c->fresh objects (QS_REFILL_MIN, at most a page's worth).
 * Returns how many; 0 on ENOMEM.  The owner (thread mode) or q->lock holder
 * (CPU mode) calls it.  bare: calloc's refill (NULL for any other): when
 * nothing born already was found and new memory is zero, one object born
 * bare (never written: core/slab.c qs_slab_born_bare) goes to dst[0],
 * *bare is set and 1 returned; the caller hands it out as it is, past the
 * queue. */
unsigned slqb_refill_gather(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room,
                            bool *bare)
{
    if (__atomic_load_n(&q->inbox.pending, __ATOMIC_RELAXED)) {
        unsigned got = slqb_claim_into(c, q, dst, room);
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
        while (got < want && (s = slqb_stash_pop(q)))
            got += take_slab(c, q, s, false, 0, want - got, dst + got);
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
            slqb_send_pending(c, q, false);
        /* the node's partial slabs, then its FIFO's, our home's first:
         * qs_node_take reads their counts as hints (relaxed; the locks
         * order the lists) and takes no lock where none has a slab
         * (calloc's refills of bare births come here once per object); it
         * reads another home's count only when ours has too few, so that
         * a CPU refilling from its own home touches no line another CPU
         * writes (node.c, FIFO HOMES) */
        struct qs_node *n = &c->nodes[q->node];
        got = take_list(c, q, qs_node_take(c, q, n, want - got), got, want, dst);
        /* a CPU's queue: other CPUs' slabs of our node with free objects
         * before new memory (cpu.c) */
        if (got < least && q->cpu >= 0)
            got = take_list(c, q, slqb_percpu_adopt(c, q, want - got), got, want, dst);
    }
    /* new memory: grow a slab of ours that can (every partial slab left
     * has an empty free list now), else make one, until `least` objects:
     * a page's worth at most, so a class's first mallocs touch a page each.
     * All that a growth makes goes to dst while it has room: it is a page's
     * worth, or what the slab had born already, and touched now anyway */
    if (!got && bare) { /* calloc's: one object born bare instead */
        int k = take_bare(c, q, dst);
        if (k) {
            if (k < 0)
                errno = ENOMEM;
            *bare = k > 0;
            return k > 0;
        }
    }
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

/* Thread mode: refill the (empty) queue in place.  *bare_obj (calloc's
 * refill; else bare_obj is NULL): an object born bare, handed out past the
 * queue (slqb_refill_gather), counted as a slow pop and in moved, as a
 * CPU's refill counts the object it hands out (cpu.c). */
static bool queue_refill(qslab_cache *c, struct qs_queue *q, void **bare_obj)
{
    slqb_grant_grow(c, q); /* a miss */
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
    bool bare = false;
    unsigned got = slqb_refill_gather(c, q, q->slots + nr, room, bare_obj ? &bare : NULL);
    if (bare) {
        *bare_obj = q->slots[nr];
        qs_queue_seq_begin(q);
        qs_queue_seq_end(q, 1);
        QS_ADD(q->stat[QS_ALLOC_SLOW], 1);
        qs_self.last_word = QS_FRESH_WORD(c->secret);
        return true;
    }
    qs_queue_nr_set(q, nr + got);
    return got != 0;
}


/* QSLAB_GUARD_SAMPLE (guard.c): a slow allocation may be a guarded sample.
 * Both slow allocations run after start-up: c exists (qslab_cache_create
 * and qslab_cache_find start the library up; the kmalloc classes' slow
 * path, qs_kmalloc_slow, starts it up first: api/kmalloc.c). */
void *qs_alloc_slow(qslab_cache *c)
{
    if (unlikely(QS_LOAD(qs_guard_on))) {
        void *g = qs_debug_hooks.guard_alloc(c, 0);
        if (g)
            return g;
    }
    return qs_alloc_slow_unsampled(c);
}

void *qs_alloc_slow_unsampled(qslab_cache *c)
{
    qs_purger_check(); /* a safe point to start the purger (node.c) */
    qslab_cache *t = qs_twin_divert(c);
    if (unlikely(t != NULL)) /* debugging turned on in use (twin.c) */
        return qs_debug_hooks.twin_alloc(t, QSLAB_NUMA_NO_NODE);
    if (unlikely(c->front != QS_FRONT_SLQB)) /* no queues: front.h */
        return qs_front_of(c)->alloc(c, QSLAB_NUMA_NO_NODE);
    if (slqb_unqueued(c)) /* never queued (slqb.h): the node's slabs */
        return qs_node_alloc(c, NULL, qs_owner_node_now());
    if (qs_percpu())
        return slqb_percpu_alloc_slow(c);
    struct qs_queue *q = qs_queue_of(c);
    if (!q && !(q = qs_queue_attach(c))) {
        if (qs_self.state == 2) /* exited thread: straight from the node list */
            return qs_node_alloc(c, NULL, qs_self.node);
        return NULL;
    }
    bool want_bare = qs_self.last_word == QS_WORD_CALLOC;
    for (;;) {
        void *obj = NULL;
        if (!QS_TOP_NR(q->top) && !queue_refill(c, q, want_bare ? &obj : NULL))
            return NULL;
        if (obj)
            return obj; /* born bare for calloc */
        obj = qs_queue_pop(c, q, QS_ALLOC_SLOW);
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
        qs_front_of(c)->free_obj(c, s, obj);
        return;
    }
    struct qs_queue *q = qs_queue_for_free(c);
    if (q && qs_slab_owner(s) == &q->list) { /* our slab: the queue was just attached */
        qs_queue_free_fast(c, s, obj);
        return;
    }
    if (q) { /* another owner's slab: batched home */
        qs_free_remote(c, q, s, obj);
        return;
    }
    qs_free_direct(c, obj);
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
    /* the front end's per-owner state went first (registry.c front_retire) */
    qs_queue_send_pending(c, q);
    qs_queue_claim(c, q);
    if (QS_TOP_NR(q->top)) {
        unsigned long twice = qs_route_vec(c, q, q->slots, QS_TOP_NR(q->top));
        qs_queue_nr_set(q, 0);
        if (twice)
            slqb_queue_uncount(q, twice);
    }
    slqb_grant_release(c, q);
    qs_queue_drain_stash(c, q);
    qs_queue_hand_slabs(c, q);
    qs_lock_acquire(&q->inbox.lock);
    q->inbox.dead = 1;
    void *head = q->inbox.head;
    unsigned long n = q->inbox.nr;
    q->inbox.head = q->inbox.tail = NULL;
    q->inbox.nr = 0;
    q->inbox.kept_ms = 0;
    __atomic_store_n(&q->inbox.pending, 0, __ATOMIC_RELAXED);
    qs_lock_release(&q->inbox.lock);
    if (head)
        qs_route_list(c, q, head, n);
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

/* SLQB: the inline fast paths and queue.c's slow paths are its own; only
 * shrink (cache.c) and the purger's work on idle queues are hooks. */
const struct qs_front qs_front_slqb = {
    .name = "slqb",
    .what = "per-owner LIFO queues, remote frees batched home (SLQB)",
    .shrink = qs_slqb_shrink,
    .idle = qs_slqb_idle,
    .queue_knobs = qs_slqb_queue_knobs,
    .queues = true,
    .owns_slabs = true,
};
