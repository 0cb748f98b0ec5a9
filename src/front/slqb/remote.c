/*
 * remote.c - frees of other owners' objects, sent home in batches: the
 * pending batches (SLQB's rlist: up to QS_PENDING owners open, each posted
 * at freebatch objects to its owner's inbox, or freed under the node's lock
 * for node-owned slabs), the inbox an owner claims at its next refill, and
 * a CPU's open batch that the per-CPU free fast path appends to.
 */
#include "front/slqb/fast.h"
#include "front/front.h"
#include "front/slqb/slqb.h"
#include "owner/owner.h"
#include "core/hooks.h"

#include <errno.h>

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
                    slqb_put_twice_report(c, q, obj);
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
        slqb_put_twice_report(c, q, twice[i]);
    if (corrupt)
        qs_report_bad_link(c, q, corrupt);
    qs_node_release_list(c, q, release, NULL);
    qs_stat(c, q, QS_NODE_FREE, done);
    if (nagain)
        qs_route_list(c, q, again, nagain);
}

/* Free obj of node-owned slab s, for a cache whose slabs all belong to
 * their nodes (the debug front end): under the node's lock, the debug
 * checks (checked false: the object passed them already, leaving Q's
 * quarantine), then the slab's free list.  The checks say what goes there
 * (core/hooks.h): obj, or one that leaves the quarantine in its place (of
 * another slab, in s and obj then), or nothing (obj reported and left
 * alone, or held in the quarantine). */
static void node_free(qslab_cache *c, struct qs_slab *s, void *obj, bool checked)
{
    struct qs_node *n = &c->nodes[s->node];
    struct qs_slab *empties = NULL, *release = NULL;
    qs_lock_acquire(&n->lock);
    if (unlikely(qs_slab_owner(s) != &n->list)) { /* not a node's slab: route it */
        qs_lock_release(&n->lock);
        qs_free_direct(c, obj);
        return;
    }
    int how = checked && c->debug ? qs_debug_hooks.free_locked(c, &s, &obj) : QS_DBG_FREE_PUT;
    /* counted in n, under its lock (qs_stat_locked) */
    if (how != QS_DBG_FREE_PUT) {
        if (how == QS_DBG_FREE_HELD) /* freed: no longer the program's */
            qs_stat_locked(NULL, n, QS_NEV_FREE_SLOW, 1);
        qs_lock_release(&n->lock);
        return;
    }
    bool once = slab_put(c, &n->list, s, obj, &empties);
    if (empties)
        qs_node_put_empty_locked(c, n, empties, &release);
    if (checked)
        qs_stat_locked(NULL, n, QS_NEV_FREE_SLOW, 1);
    qs_stat_locked(NULL, n, QS_NEV_NODE_FREE, 1);
    qs_lock_release(&n->lock);
    if (unlikely(!once))
        slqb_put_twice_report(c, NULL, obj);
    qs_node_release_list(c, NULL, release, NULL);
}

void qs_node_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    node_free(c, s, obj, true);
}

void qs_node_put(qslab_cache *c, struct qs_slab *s, void *obj)
{
    node_free(c, s, obj, false);
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

void slqb_send_batch(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    if (b->n) {
        if (b->to->node)
            send_node(c, q, b);
        else
            send_inbox(c, q, b);
    }
    slqb_transit_put(c, q, b->res); /* its transit reservation (budget.c) */
    b->n = 0;
    b->head = b->tail = NULL;
    b->to = NULL;
    b->res = 0;
}

/* A pending batch b of q starts: reserve its room, freebatch objects, from
 * the owner's transit budget (budget.c); past it, post q's other pending
 * batches to make room, and failing that b gets none and is posted with
 * its first object (qs_batch_cap). */
static void pending_start(qslab_cache *c, struct qs_queue *q, struct qs_batch *b)
{
    if (slqb_unqueued(c)) { /* posted with its first object: home at once (slqb.h) */
        b->res = 0;
        return;
    }
    uint32_t want = QS_LOAD(c->freebatch), k = slqb_transit_take(c, q, want);
    if (k < want) {
        for (unsigned i = 0; i < QS_PENDING; i++)
            if (&q->pending[i] != b && q->pending[i].n)
                slqb_send_batch(c, q, &q->pending[i]);
        k += slqb_transit_take(c, q, want - k);
    }
    b->res = k;
}

/* q's pending batch bound for owner `to`, its room reserved if it starts
 * (slqb_batch_for; the batches a flush routes through reserve nothing) */
static struct qs_batch *pending_for(qslab_cache *c, struct qs_queue *q, struct qs_list *to)
{
    unsigned victim = q->pending_victim;
    struct qs_batch *b = slqb_batch_for(c, q, q->pending, QS_PENDING, &victim, to);
    q->pending_victim = (uint16_t)victim;
    if (!b->n)
        pending_start(c, q, b);
    return b;
}

/* The batch of b[0..nb) bound for owner `to`: the open one, else an unused
 * one, else one sent to make room (round robin on *victim). */
struct qs_batch *slqb_batch_for(qslab_cache *c, struct qs_queue *q, struct qs_batch *b, unsigned nb,
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
        slqb_send_batch(c, q, unused);
    }
    unused->to = to;
    return unused;
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
QS_SLOW struct qs_batch *slqb_pending_find(qslab_cache *c, struct qs_queue *q,
                                                struct qs_list *to)
{
    struct qs_batch *b = pending_for(c, q, to);
    q->pending_mru = (uint16_t)(b - q->pending);
    return b;
}


/* Post every pending batch (see pending_add). */
static void percpu_fb_close(qslab_cache *c, struct qs_queue *q, bool taken);

/* Post every pending batch, and a CPU's open batch (q->lock held, or the
 * queue taken from its CPU: `taken`). */
void slqb_send_pending(qslab_cache *c, struct qs_queue *q, bool taken)
{
    if (q->cpu >= 0)
        percpu_fb_close(c, q, taken);
    for (unsigned k = 0; k < QS_PENDING; k++)
        slqb_send_batch(c, q, &q->pending[k]);
}

void qs_queue_send_pending(qslab_cache *c, struct qs_queue *q)
{
    slqb_send_pending(c, q, true); /* the owner thread, or a queue taken from its CPU */
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
        qs_front_of(c)->free_obj(c, s, obj);
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

/* Detach our inbox (what other owners posted, and what a claim put back):
 * its list, count and last object, and since when it has held objects put
 * back (0: none). */
static void *inbox_detach(struct qs_queue *q, unsigned long *n, void **tail, uint32_t *kept_ms)
{
    qs_lock_acquire(&q->inbox.lock);
    void *head = q->inbox.head;
    *n = q->inbox.nr;
    *tail = q->inbox.tail;
    *kept_ms = q->inbox.kept_ms;
    q->inbox.head = q->inbox.tail = NULL;
    q->inbox.nr = 0;
    q->inbox.kept_ms = 0;
    __atomic_store_n(&q->inbox.pending, 0, __ATOMIC_RELAXED);
    qs_lock_release(&q->inbox.lock);
    return head;
}

/* Claim the inbox and route everything home (shrink, retire, drains): the
 * objects are mostly ours, straight back onto our slabs. */
void qs_queue_claim(qslab_cache *c, struct qs_queue *q)
{
    unsigned long n;
    void *tail;
    uint32_t kept;
    void *head = inbox_detach(q, &n, &tail, &kept);
    if (!head)
        return;
    QS_ADD(q->stat[QS_CLAIM], 1);
    qs_route_list(c, q, head, n);
}

/* Claim the inbox for a refill: up to `room` objects into dst (their links
 * stay: they look free, see qs_queue_try_pop); the rest goes back to the
 * inbox's head, for the next refills, unless what a claim put back there
 * has waited for the cache's empty_decay_ms: then the rest goes straight
 * back to its slabs (ours, or routed).  Returns how many went to dst.
 *
 * Why put back: a producer whose objects another thread frees finds a
 * round's worth in its inbox at its first refill.  Routing them all to
 * their slabs at once, for the next refills to take them off the slabs'
 * lists again, read every object's link twice on this CPU, with a slab's
 * bookkeeping each time (a 4 KiB object is a page, and a TLB miss, each
 * time); put back, each is read once, when a refill takes it, and the put
 * back costs one link.  The objects are this owner's either way (on its
 * slabs' lists or in its inbox), and so is the memory; the decay bounds how
 * long a claim keeps them from their slabs, which can only go empty (and
 * back to the OS) once their objects are home: an owner that stopped
 * asking routes them at its next refill, a CPU queue left idle at the
 * purger's next tick (qs_queue_empty_out), any queue at a shrink or trim.
 * The inbox lock orders the put back with posts (at the tail) and other
 * claims; the objects between head and tail are ours while detached. */
unsigned slqb_claim_into(qslab_cache *c, struct qs_queue *q, void **dst, unsigned room)
{
    unsigned long n;
    void *tail;
    uint32_t kept;
    void *head = inbox_detach(q, &n, &tail, &kept);
    if (!head)
        return 0;
    QS_ADD(q->stat[QS_CLAIM], 1);
    /* into dst from its end: the queue pops its last slot first, so the
     * refill hands them out in the inbox's order, the order they were freed
     * in (the same order, round after round, for a producer whose consumer
     * frees what it made in order; popped the other way, each refill's run
     * reversed, and a run of 1 KiB objects scattered over more pages and
     * cache sets at every round) */
    unsigned long k = n < room ? n : room, i = 0;
    for (; i < k; i++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, head), &bad);
        if (unlikely(bad)) { /* keep head out of the queue, follow nothing more */
            qs_report_bad_link(c, q, head);
            __builtin_memmove(dst, dst + (k - i), i * sizeof(void *));
            return (unsigned)i;
        }
        dst[k - 1 - i] = head;
        head = next;
    }
    if (n == k)
        return (unsigned)k;
    uint32_t now = (uint32_t)qs_os_now_ms() | 1;
    if (!kept)
        kept = now;
    if (now - kept >= QS_LOAD(c->empty_decay_ms)) {
        qs_route_list(c, q, head, n - k);
        return (unsigned)k;
    }
    qs_lock_acquire(&q->inbox.lock);
    if (q->inbox.head) /* posted since: after ours */
        *qs_link(c, tail) = qs_enc(c, q->inbox.head);
    else
        q->inbox.tail = tail;
    q->inbox.head = head;
    q->inbox.nr += n - k;
    q->inbox.kept_ms = kept;
    __atomic_store_n(&q->inbox.pending, 1, __ATOMIC_RELAXED);
    qs_lock_release(&q->inbox.lock);
    return (unsigned)k;
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
    struct qs_batch *p = pending_for(c, q, b->to);
    if (p->n) {
        *qs_link(c, b->tail) = qs_enc(c, p->head);
        b->tail = p->tail;
    }
    p->head = b->head;
    p->tail = b->tail;
    p->n += b->n;
    if (p->n >= qs_batch_cap(p))
        slqb_send_batch(c, q, p);
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
    slqb_transit_put(c, q, q->fb_max); /* closed: its objects go to a pending batch or home */
    QS_STORE(q->fb_max, 0);
    if (!old)
        return;
    struct qs_batch b = {q->fb_to, QS_FB_HEAD(old), q->fb_tail, n, 0};
    if (n >= QS_LOAD(c->freebatch))
        slqb_send_batch(c, q, &b);
    else
        pending_merge(c, q, &b);
}

/* obj, of another owner's slab s, found the open batch closed, full, or
 * another owner's (q->lock held): close it, and open it for s's owner with
 * obj and what was pending for that owner. */
void slqb_percpu_fb_open(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    percpu_fb_close(c, q, false);
    struct qs_batch b = {qs_slab_owner(s), obj, obj, 1, 0};
    *qs_link(c, obj) = qs_enc(c, NULL);
    for (unsigned k = 0; k < QS_PENDING; k++) {
        struct qs_batch *p = &q->pending[k];
        if (p->to == b.to && p->n) { /* take it over: obj first */
            *qs_link(c, obj) = qs_enc(c, p->head);
            b.tail = p->tail;
            b.n += p->n;
            p->n = 0; /* its reservation goes back: the open batch takes its own */
            slqb_send_batch(c, q, p);
            break;
        }
    }
    uint32_t want = QS_LOAD(c->freebatch);
    if (b.n + 1 >= want || QS_LOAD(q->fb) || slqb_unqueued(c)) {
        /* full already (or open again: migrated; or never queued: home at once) */
        pending_merge(c, q, &b);
        return;
    }
    /* the open batch's room, from the transit budget: the fast path
     * appends up to fb_max objects (at least one more than it holds) */
    uint32_t k = slqb_transit_take(c, q, want);
    if (k < b.n + 2) {
        slqb_transit_put(c, q, k);
        pending_merge(c, q, &b);
        return;
    }
    qs_queue_seq_begin(q);
    QS_STORE(q->fb_to, b.to);
    QS_STORE(q->fb_tail, b.tail);
    QS_STORE(q->fb_base, (uint32_t)b.n);
    QS_STORE(q->fb_max, k);
    uint64_t old;
    int r = qs_percpu_swap_fb(q, QS_FB_PACK(obj, b.n), &old);
    qs_queue_seq_end(q, 0);
    if (r != 0) { /* migrated: the batch stays with the pending ones */
        slqb_transit_put(c, q, k);
        QS_STORE(q->fb_max, 0);
        pending_merge(c, q, &b);
    }
}
