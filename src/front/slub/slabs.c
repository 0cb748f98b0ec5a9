/*
 * front/slub/slabs.c - the SLUB front end's slabs, below their owners'
 * lists: the slab word's operations (an owner's get_freelist and freeze of
 * a slab, slub_deactivate of its active slab), the free of an object that
 * is not on its owner's list, straight onto its slab's list by
 * compare-and-swap (slub_slab_free: every "remote" free), the partial lists
 * (an owner's, put_cpu_partial; its node's, add_partial, under node->lock)
 * and empty slabs to the node's FIFO, and the refills that take from them
 * (slub_new_freelist: a new list for an owner; slub_alloc_single: one
 * object off a node's partial slab).  The transitions of SLAB STATES
 * (slub.c) are made here, but for shrink's (cachewide.c) and pass-through
 * blocks' (slub.c).  The owners' lists, the per-CPU sections and the entry
 * points are slub.c's, as is the front end's overview.
 */
#include "front/slub/fast.h"
#include "front/front.h"
#include "front/slub/slub.h"

/* cpu_partial counted the way the seeds settled it (Vlastimil Babka, 2021,
 * in 5.16): the tunable stays in objects, and the list holds at most
 * cpu_partial * 2 / objects-per-slab slabs, whatever they hold; counting
 * the free objects of slabs as they went on the list had let it grow
 * without bound when frees refilled slabs already on it. */
static unsigned cpu_partial_slabs(const qslab_cache *c)
{
    unsigned objs = qs_slab_objects(c, QS_LOAD(c->order));
    unsigned long nr = QS_LOAD(c->cpu_partial);
    if (!nr)
        return 0;
    if (!objs)
        objs = 1;
    return (unsigned)((nr * 2 + objs - 1) / objs);
}

/* ---- slab word operations ---- */

/* An owner takes its active slab's remote frees (the kernel's get_freelist),
 * or freezes a slab it holds off every list or under its node lock (the
 * kernel's freeze_slab): the whole list, and inuse = objects.  None: the
 * slab is unfrozen, full, on no list (its state says so before the CAS that
 * lets a freer see it full). */
static void *get_freelist(qslab_cache *c, struct qs_slab *s)
{
    uint64_t old = fw_load(s), nw;
    do {
        uint32_t h = fw_head(old);
        set_state(s, h ? QS_SLAB_ACTIVE : QS_SLAB_FULL);
        nw = fw_make(0, slab_objects(s), h != 0);
    } while (!fw_cas(s, &old, nw));
    return idx_obj(c, s, fw_head(old));
}

/* The owner's active slab s (frozen) whose list ran dry: its remote frees,
 * s staying frozen and ACTIVE (get_freelist without the unfreeze), for a
 * slab that can still grow: it grows only when nothing came back. */
static void *take_remote(qslab_cache *c, struct qs_slab *s)
{
    uint64_t old = fw_load(s);
    if (!fw_head(old))
        return NULL;
    while (!fw_cas(s, &old, fw_make(0, slab_objects(s), true)))
        ;
    return idx_obj(c, s, fw_head(old));
}

/* LAZY BIRTH (core/slab.c): a SLUB slab's objects are born as its owner
 * needs them, a page's worth when the slab is made, then as many as are
 * born already (doubling) each time its owner's list runs dry with no
 * remote free to take; the kernel writes every free pointer of a new slab,
 * which here made the whole slab resident for its first object.  Only the
 * owner of the active slab grows it (the thread, or the holder of its CPU
 * queue's lock): s->objects, span and the new objects' links are its alone
 * until the CAS below, which counts the new objects in use (they are on
 * the owner's list); a freer only ever reads fw, and frees only objects
 * handed out after their birth.  Returns the new objects' list (never
 * NULL: the caller checked qs_slab_growable). */
static void *grow_active(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    void *fl;
    uint32_t k = qs_slab_grow_list(c, q, s, 0, &fl); /* s->fw untouched */
    uint64_t old = fw_load(s);
    while (!fw_cas(s, &old, fw_make(fw_head(old), fw_inuse(old) + k, true)))
        ;
    return fl;
}

/* A slab that is the caller's alone (new, or from the empty FIFO), all its
 * born objects free on the list starting at `first`: frozen, the list
 * returned (its unborn ones are born by grow_active). */
static void *freeze_fresh(struct qs_slab *s, void *first)
{
    s->freelist = NULL; /* the FIFO's view (node.c); SLUB keeps its head in fw */
    qs_slab_set_owner(s, NULL);
    s->inuse = 0;
    set_state(s, QS_SLAB_ACTIVE);
    __atomic_store_n(&s->fw, fw_make(0, slab_objects(s), true), __ATOMIC_RELEASE);
    return first;
}

/* Hand an empty, unfrozen slab that is on no list to its node's empty FIFO
 * (n->lock held): the FIFO's view of it, as node.c and validation read
 * empty slabs (freelist, inuse 0). */
void slub_discard_locked(qslab_cache *c, struct qs_node *n, struct qs_slab *s,
                         struct qs_slab **release)
{
    uint64_t w = fw_load(s);
    qs_assert(fw_inuse(w) == 0);
    s->freelist = idx_obj(c, s, fw_head(w));
    s->tail = NULL;
    s->inuse = 0;
    s->next = NULL;
    qs_node_put_empty_locked(c, n, s, release);
}

/* q: whose counters the slabs given back count in (NULL: the cache's) */
void slub_release_after(qslab_cache *c, struct qs_queue *q, struct qs_node *n,
                        struct qs_slab *rel)
{
    bool kept = qs_node_nr_empty(n) != 0;
    qs_node_release_list(c, q, rel, NULL);
    if (kept)
        qs_node_purger_want();
}

/* Put an unfrozen slab that is on no list on its node's partial list, or
 * give it back if it is empty and the node has min_partial partial slabs
 * (the kernel's add_partial and discard_slab). */
static void add_partial(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    struct qs_node *n = &c->nodes[s->node];
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    /* inuse 0 is for good: nobody holds an object of it to free */
    if (fw_inuse(fw_load(s)) == 0 && n->list.nr_partial >= QS_LOAD(c->min_partial)) {
        slub_discard_locked(c, n, s, &rel);
    } else {
        qs_slab_set_owner(s, NULL);
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    qs_lock_release(&n->lock);
    slub_release_after(c, q, n, rel);
}

/* An owner's partial slabs (->next linked) to their nodes (the kernel's
 * __put_partials). */
void slub_put_partials(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    while (list) {
        struct qs_slab *next = list->next;
        list->next = NULL;
        add_partial(c, q, list);
        list = next;
    }
}

/* Give back an owner's active slab s with what is left of its list fl (the
 * kernel's deactivate_slab): the list spliced onto the slab's own, the slab
 * unfrozen, then to its node's partial list, the FIFO, or no list (full).
 * fl may hold objects of other slabs (PER-CPU OWNERS in slub.c): each goes to
 * its own slab.  s may be NULL (fl alone). */
void slub_deactivate(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *fl)
{
    void *mine = NULL, *tail = NULL;
    uint32_t n = 0;
    while (fl) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, fl), &bad);
        if (unlikely(bad)) {
            slub_corrupt_link(c, fl); /* the rest of the list is lost */
            next = NULL;
        }
        struct qs_slab *t = qs_slab_lookup(fl);
        if (t == s) {
            *qs_link(c, fl) = qs_enc(c, mine);
            if (!mine)
                tail = fl;
            mine = fl;
            n++;
        } else if (t) {
            slub_slab_free(c, q, t, fl, false);
        }
        fl = next;
    }
    if (!s)
        return;
    uint64_t old = fw_load(s), nw;
    do {
        uint32_t h = fw_head(old);
        if (tail)
            *qs_link(c, tail) = qs_enc(c, idx_obj(c, s, h));
        uint32_t nh = mine ? obj_idx(s, mine) : h;
        /* full: say so before the CAS that lets a freer see it full */
        set_state(s, nh ? QS_SLAB_ACTIVE : QS_SLAB_FULL);
        nw = fw_make(nh, fw_inuse(old) - n, false);
    } while (!fw_cas(s, &old, nw));
    sl_stat(c, q, QS_FLUSH, 1);
    if (fw_head(nw))
        add_partial(c, q, s); /* or the FIFO, if empty */
}

/* A slab of one block (blocks over half a slab: the big kmalloc classes,
 * slub_alloc_single) that a free just emptied, on no list and the freer's
 * alone: straight to its node's FIFO, which serves every class of its order
 * under the decay and the retention rule (node.c).  Listed as partial, on
 * the freer's list (cpu_partial of such a class is at least one object,
 * two slabs) and the node's (min_partial, up to 320 KiB of slabs), each
 * class kept empty slabs of 32 KiB to 2 MiB per CPU and node: 2.5 MiB at
 * the peak of the 4-thread Python program of make bench. */
static void discard_single(qslab_cache *c, struct qs_slab *s)
{
    struct qs_node *n = &c->nodes[s->node];
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    slub_discard_locked(c, n, s, &rel);
    qs_lock_release(&n->lock);
    slub_release_after(c, NULL, n, rel);
}

/* The free of an object that is not on its owner's list (the kernel's
 * __slab_free): straight onto its slab's list.  q: the caller's queue (its
 * counters), or NULL.  user: a free by the program (counted; a slab it
 * finds full goes on the caller's partial list), else an object of an
 * owner's list going home (slub_deactivate: already counted as freed; its caller
 * may hold a queue's lock, so a full slab goes to its node). */
static void put_cpu_partial(qslab_cache *c, struct qs_slab *s);

QS_SLOW void slub_slab_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj,
                                bool user)
{
    struct qs_node *n = NULL;
    uint32_t idx = obj_idx(s, obj);
    uint64_t old = fw_load(s), nw;
    for (;;) {
        uint32_t prior = fw_head(old), inuse = fw_inuse(old);
        if (unlikely(inuse == 0)) { /* nothing of it is in use: freed already */
            if (n)
                qs_lock_release(&n->lock);
            qs_fatal("double free of %p in cache %s", obj, c->name);
            return;
        }
        *qs_link(c, obj) = qs_enc(c, idx_obj(c, s, prior));
        nw = fw_make(idx, inuse - 1, old & FW_FROZEN);
        /* an unfrozen slab with free objects that this free empties may be
         * on its node's list: lock before the CAS, so that nobody takes it
         * off that list in between (the kernel's rule) */
        if (!(old & FW_FROZEN) && prior && inuse == 1 && !n) {
            n = &c->nodes[s->node];
            qs_lock_acquire(&n->lock);
        }
        if (fw_cas(s, &old, nw))
            break;
    }
    if (user) {
        sl_stat(c, q, QS_FREE_SLOW, 1);
        sl_stat(c, q, QS_REMOTE_FREE, 1);
    }
    if (old & FW_FROZEN) { /* an owner's active slab: nothing to move */
        if (n)
            qs_lock_release(&n->lock);
        return;
    }
    if (!fw_head(old)) { /* it was full: ours to list */
        if (n)
            qs_lock_release(&n->lock);
        if (c->slot_size > qs_slab_bytes(s->order) / 2) { /* one block, free now */
            discard_single(c, s);
            return;
        }
        if (user)
            put_cpu_partial(c, s);
        else
            add_partial(c, NULL, s);
        return;
    }
    if (!n)
        return;
    if (user)
        sl_stat(c, q, QS_NODE_FREE, 1);
    struct qs_slab *rel = NULL;
    /* empty now; on the node's list (not an owner's), and the node has
     * enough partial slabs: give it back */
    if (fw_inuse(nw) == 0 && get_state(s) == QS_SLAB_PARTIAL &&
        n->list.nr_partial >= QS_LOAD(c->min_partial)) {
        qs_list_del(&n->list, s);
        slub_discard_locked(c, n, s, &rel);
    }
    qs_lock_release(&n->lock);
    if (rel)
        slub_release_after(c, NULL, n, rel); /* no lock of q's held: the cache's counters */
}

/* A free found slab s full: the freer lists it (the kernel's
 * put_cpu_partial): on its owner's partial list, which, when it holds
 * cpu_partial_slabs(c) already, first goes to the nodes; another node's slab
 * (or a caller without an owner, or cpu_partial 0) on its node's list. */
static void put_cpu_partial(qslab_cache *c, struct qs_slab *s)
{
    /* a thread without a queue gets none here: a free may come after its
     * exit destructor (glibc's), and a queue attached then is never
     * retired (queue.c QS_FREE_ONLY_ATTACH) */
    struct qs_queue *q = qs_percpu() ? slub_my_queue(c) : qs_queue_of(c);
    unsigned max = cpu_partial_slabs(c);
    if (!q || s->node != q->node || !max) {
        add_partial(c, NULL, s);
        return;
    }
    bool pc = q->cpu >= 0;
    if (pc)
        qs_lock_acquire(&q->lock);
    struct qs_slab *drain = NULL;
    if (q->sl.nr_partial >= max) {
        drain = q->sl.partial;
        q->sl.partial = NULL;
        QS_STORE(q->sl.nr_partial, 0);
    }
    set_state(s, QS_SLAB_CPU_PARTIAL);
    s->next = q->sl.partial;
    q->sl.partial = s;
    QS_STORE(q->sl.nr_partial, q->sl.nr_partial + 1);
    if (pc)
        qs_lock_release(&q->lock);
    slub_put_partials(c, pc ? NULL : q, drain);
}

/* ---- refills: a new list for an owner, one object for a caller without one ---- */

/* One object from node `node` without an owner (qslab_cache_alloc_node for
 * another node, or a caller without a queue): popped off a partial slab of
 * that node under its lock, the slab staying there (the kernel freezes a
 * slab of that node as the CPU's, and keeps switching between nodes; this
 * takes the object and leaves the active slab alone). */
QS_SLOW void *slub_alloc_single(qslab_cache *c, struct qs_queue *q, int node)
{
    struct qs_node *n = &c->nodes[node];
    void *obj = NULL;
    bool fresh = false; /* obj born now from zero memory: calloc need not clear it */
    qs_lock_acquire(&n->lock);
    struct qs_slab *s = n->list.partial;
    if (!s) {
        qs_lock_release(&n->lock);
        s = qs_node_take_empty(n);
        void *first;
        if (s) {
            first = s->freelist;
        } else {
            if (!(s = qs_slab_new(c, NULL, node, false)))
                return NULL;
            fresh = qs_slab_born_zero(c, s); /* its first object is ours below */
            qs_slab_grow(c, NULL, s, UINT32_MAX);
            first = s->freelist;
        }
        s->freelist = NULL;
        qs_slab_set_owner(s, NULL);
        s->inuse = 0;
        __atomic_store_n(&s->fw, fw_make(obj_idx(s, first), 0, false), __ATOMIC_RELEASE);
        qs_lock_acquire(&n->lock);
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    /* the only taker of s's objects while we hold the lock; frees may add */
    uint64_t old = fw_load(s), nw;
    for (;;) {
        uint32_t h = fw_head(old);
        obj = idx_obj(c, s, h);
        bool bad;
        void *next = qs_dec(c, *qs_link(c, obj), &bad);
        if (unlikely(bad || (next && !qs_slab_valid_obj(s, next)))) {
            qs_lock_release(&n->lock);
            slub_corrupt_link(c, obj);
            return NULL;
        }
        nw = fw_make(next ? obj_idx(s, next) : 0, fw_inuse(old) + 1, false);
        if (next) {
            if (fw_cas(s, &old, nw))
                break;
            continue;
        }
        /* its last free object: off the list before the CAS that makes it
         * full (a freer who then finds it full lists it elsewhere) */
        qs_list_del(&n->list, s);
        set_state(s, QS_SLAB_FULL);
        if (fw_cas(s, &old, nw))
            break;
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    qs_lock_release(&n->lock);
    *qs_link(c, obj) = 0;
    qs_self.last_word = fresh ? QS_FRESH_WORD(c->secret) : 0;
    sl_stat(c, q, QS_ALLOC_SLOW, 1);
    sl_stat(c, q, QS_NODE_ALLOC, 1);
    return obj;
}

/* A new list for owner q, whose active slab `old` (frozen, or NULL) was
 * detached with an empty list (the kernel's ___slab_alloc after the fast
 * path): old's remote frees, or, none there, its next unborn objects (LAZY
 * BIRTH above); else old is given up (full) and the list comes from an own
 * partial slab, a node partial slab (taking more for the own list, up to
 * half of cpu_partial_slabs), an empty slab of the FIFO, or a new slab, a
 * page's worth of whose objects are born (with `random`, in the cache's
 * random order, core/slab.c: the kernel's shuffle_freelist).  Returns the
 * list, *sp its frozen slab; NULL on ENOMEM.  bare (calloc's miss, else
 * NULL): where the list would be objects born now from zero memory (the
 * active slab grown, or a new slab), one object is born bare instead
 * (core/slab.c qs_slab_born_bare), never written, into *bare, counted in
 * use; NULL is returned with *sp the frozen slab, its list empty. */
void *slub_new_freelist(qslab_cache *c, struct qs_queue *q, struct qs_slab *old,
                        struct qs_slab **sp, void **bare)
{
    void *fl;
    struct qs_slab *s;
    sl_stat(c, q, QS_REFILL, 1);
    if (old && qs_slab_growable(c, old)) {
        *sp = old;
        if ((fl = take_remote(c, old)))
            return fl;
        if (bare && qs_slab_bare_ok(c, old)) {
            *bare = qs_slab_born_bare(c, q, old); /* owner's alone until the CAS, as grow_active */
            uint64_t w = fw_load(old);
            while (!fw_cas(old, &w, fw_make(fw_head(w), fw_inuse(w) + 1, true)))
                ;
            return NULL;
        }
        return grow_active(c, q, old);
    }
    if (old && (fl = get_freelist(c, old))) {
        *sp = old;
        return fl;
    }
    while ((s = q->sl.partial)) {
        q->sl.partial = s->next;
        s->next = NULL;
        QS_STORE(q->sl.nr_partial, q->sl.nr_partial - 1);
        if ((fl = get_freelist(c, s))) {
            *sp = s;
            return fl;
        }
    }
    struct qs_node *n = &c->nodes[q->node];
    if (QS_LOAD(n->list.nr_partial)) {
        qs_lock_acquire(&n->lock);
        s = NULL;
        fl = NULL;
        while (!fl && (s = n->list.partial)) {
            qs_list_del(&n->list, s);
            fl = get_freelist(c, s); /* a node partial slab has free objects */
        }
        if (fl) {
            unsigned max = cpu_partial_slabs(c), moved = 0;
            struct qs_slab *t;
            while (q->sl.nr_partial < max && moved <= max / 2 && (t = n->list.partial)) {
                qs_list_del(&n->list, t);
                set_state(t, QS_SLAB_CPU_PARTIAL);
                t->next = q->sl.partial;
                q->sl.partial = t;
                QS_STORE(q->sl.nr_partial, q->sl.nr_partial + 1);
                moved++;
            }
        }
        qs_lock_release(&n->lock);
        if (fl) {
            *sp = s;
            return fl;
        }
    }
    if ((s = qs_node_take_empty(n))) {
        *sp = s;
        return freeze_fresh(s, s->freelist);
    }
    if (!(s = qs_slab_new(c, q, q->node, false)))
        return NULL;
    *sp = s;
    if (bare && qs_slab_bare_ok(c, s)) {
        *bare = qs_slab_born_bare(c, q, s); /* in use: freeze_fresh counts it */
        freeze_fresh(s, NULL);
        return NULL;
    }
    qs_slab_grow(c, q, s, 0); /* a page's worth: LAZY BIRTH above */
    return freeze_fresh(s, s->freelist);
}
