/*
 * front/slab/reap.c - the SLAB front end's cache-wide hooks, which act on
 * every owner's array and every node of a cache rather than on one
 * allocation or free: shrink, the purger's sweep (the reaper, and
 * malloc_trim's everything), retire (a thread's exit), destroy, tuned (the
 * tunables limit, batchcount and shared changed) and validate (the
 * invariant walker's look at the slabs' lists, free-list blocks, shared
 * and alien arrays).  What they give back goes the ordinary ways
 * (shared.c's slabfe_to_node and slabfe_drain_shared, slabs.c's
 * slabfe_drain_free).
 *
 * THE REAPER (mm/slab.c cache_reap, every 2 s per CPU): the purger's tick
 * runs it every QS_REAP_MS: per-CPU arrays that no fast path touched since
 * the last reap give back a fifth of their limit (taken from their CPU with
 * a membarrier), alien arrays are drained, shared arrays give back a fifth
 * of their limit, and a fifth of free_limit's worth of free slabs go back.
 * A thread's array is its own: it is drained at the thread's exit, by
 * qslab_trim and by the thread's own shrink.
 */
#include "front/queue.h"
#include "owner/owner.h"
#include "owner/percpu.h"
#include "front/front.h"
#include "front/slab/slab.h"

#include <string.h>

#ifndef QS_REAP_MS /* -D for stress builds */
#define QS_REAP_MS 2000 /* mm/slab.c REAPTIMEOUT_AC */
#endif

/* Drain an owner's array (all of it, or up to n from its top), its alien
 * arrays: the caller owns q (a thread; a CPU's queue taken from its CPU). */
static void drain_owner(qslab_cache *c, struct qs_queue *q, unsigned n)
{
    qs_queue_flush(c, q, n); /* queue.c: routed here by give_back */
    slabfe_alien_drain(c, q);
}

/* every owner's array we may touch: per-CPU, each CPU's (taken from it);
 * a thread, its own.  qs_global held for the per-CPU walk. */
static void drain_owners(qslab_cache *c, unsigned n_each, bool only_idle)
{
    if (!qs_percpu()) {
        struct qs_queue *q = qs_queue_of(c);
        if (q && !only_idle)
            drain_owner(c, q, n_each);
        return;
    }
#if QS_HAVE_PERCPU
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        uint64_t top = QS_LOAD(q->top);
        bool idle = top == q->idle_top;
        q->idle_top = top;
        if (only_idle && !qs_lock_try(&q->lock))
            continue;
        if (!only_idle)
            qs_lock_acquire(&q->lock);
        if (idle || !only_idle) {
            if (QS_TOP_NR(top) && qs_percpu_take(q)) {
                QS_TSAN_ACQUIRE(q);
                drain_owner(c, q, n_each);
                QS_TSAN_RELEASE(q);
                qs_percpu_give(q);
            } else {
                slabfe_alien_drain(c, q);
            }
            q->idle_top = QS_LOAD(q->top);
        } else {
            slabfe_alien_drain(c, q); /* the kernel drains aliens at every reap */
        }
        qs_lock_release(&q->lock);
    }
#endif
}

static void shrink_locked(qslab_cache *c, bool all_owners)
{
    if (all_owners)
        drain_owners(c, ~0u, false);
    for (int i = 0; i < qs_nr_nodes; i++) {
        slabfe_drain_shared(c, &c->nodes[i], ~0u);
        slabfe_drain_free(c, &c->nodes[i], ~0ul);
        slabfe_released += qs_node_shrink(c, NULL, &c->nodes[i]); /* and the FIFO's */
    }
}

size_t slabfe_slab_shrink(qslab_cache *c)
{
    size_t before = slabfe_released;
    if (qs_percpu()) {
        qs_lock_acquire(&qs_global);
        shrink_locked(c, true);
        qs_lock_release(&qs_global);
    } else {
        struct qs_queue *q = qs_queue_of(c);
        if (q)
            drain_owner(c, q, QS_TOP_NR(q->top));
        shrink_locked(c, false);
    }
    qs_purger_check();
    return slabfe_released - before;
}

/* The purger's tick: the reaper every QS_REAP_MS; trim (all): everything. */
static uint64_t last_reap;
QS_RARE size_t slabfe_slab_sweep(bool all)
{
    uint64_t now = qs_os_now_ms();
    if (!all && now - __atomic_load_n(&last_reap, __ATOMIC_RELAXED) < QS_REAP_MS)
        return 0;
    __atomic_store_n(&last_reap, now, __ATOMIC_RELAXED);
    size_t before = slabfe_released;
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        if (c->front != QS_FRONT_SLAB)
            continue;
        if (all) {
            if (!qs_percpu()) { /* the caller's own array (qslab_trim's thread) */
                struct qs_queue *q = qs_queue_of(c);
                if (q)
                    drain_owner(c, q, QS_TOP_NR(q->top));
            }
            shrink_locked(c, qs_percpu());
            continue;
        }
        unsigned fifth = (QS_LOAD(c->slab_limit) + 4) / 5;
        drain_owners(c, fifth, true);
        unsigned objs = slabfe_slab_objs_per_slab(c, QS_LOAD(c->order));
        for (int i = 0; i < qs_nr_nodes; i++) {
            struct qs_node *n = &c->nodes[i];
            if (n->shared)
                slabfe_drain_shared(c, n, fifth);
            unsigned long fl = QS_LOAD(n->free_limit);
            slabfe_drain_free(c, n, (fl + 5 * objs - 1) / (5 * (objs ? objs : 1)));
        }
    }
    qs_lock_release(&qs_global);
    return slabfe_released - before;
}

void slabfe_slab_retire(qslab_cache *c, struct qs_queue *q)
{
    slabfe_alien_drain(c, q); /* the array itself: queue.c routes it (give_back) */
}

void slabfe_slab_destroy_all(qslab_cache *c, struct qs_slab **gone)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        if (q->alien) {
            qs_meta_free(q->alien, sizeof(void *) * (ALIEN_LIMIT + 1) * (size_t)qs_nr_nodes);
            q->alien = NULL;
        }
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        struct qs_slab *all = NULL; /* one list: adjacent slabs, one madvise */
        qs_slabs_gather(&all, n->list.partial);
        qs_slabs_gather(&all, n->list.full);
        qs_slabs_gather(&all, n->slabs_free);
        slabfe_release_list(c, NULL, all, gone);
        n->list.partial = n->list.full = n->slabs_free = NULL;
        if (n->shared)
            qs_meta_free(n->shared, sizeof(void *) * n->shared_limit);
        n->shared = NULL;
    }
}

/* limit, batchcount or shared changed (qs_global held): the arrays'
 * limits, each node's shared array (a new one, the old one's objects
 * freed to the slabs) and free_limit. */
void slabfe_slab_tuned(qslab_cache *c)
{
    /* while the cache has a debug twin, the arrays take nothing (twin.c) */
    uint32_t lim = qs_slab_array_limit(c);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        qs_front_slab.queue_knobs(c, q, false); /* limit lowered at once; raised by the owner */
        /* the caller's own array (a thread's) gives back its excess now */
        if (q->cpu < 0 && q == qs_queue_of(c) && QS_TOP_NR(q->top) > lim)
            qs_queue_flush(c, q, QS_TOP_NR(q->top) - lim);
#if QS_HAVE_PERCPU
        /* a CPU's array over the new limit gives back the excess now (the
         * kernel's do_tune_cpucache frees the old arrays); another
         * thread's, at its next free */
        if (q->cpu >= 0 && QS_TOP_NR(QS_LOAD(q->top)) > lim) {
            qs_lock_acquire(&q->lock);
            if (qs_percpu_take(q)) {
                QS_TSAN_ACQUIRE(q);
                unsigned nr = QS_TOP_NR(q->top);
                if (nr > lim)
                    qs_queue_flush(c, q, nr - lim);
                QS_TSAN_RELEASE(q);
                qs_percpu_give(q);
            }
            qs_lock_release(&q->lock);
        }
#endif
    }
    /* another front end now (the tunable `front` before any allocation):
     * no shared arrays */
    uint32_t want = c->front == QS_FRONT_SLAB ? QS_LOAD(c->slab_shared) * QS_LOAD(c->slab_batch) : 0;
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        void **fresh = want ? qs_meta_alloc(sizeof(void *) * want) : NULL;
        qs_lock_acquire(&n->lock);
        void **old = n->shared;
        uint32_t old_limit = n->shared_limit, old_avail = n->shared_avail;
        n->shared = fresh;
        n->shared_limit = fresh ? want : 0;
        n->shared_avail = 0;
        QS_STORE(n->free_limit, slabfe_free_limit(c));
        qs_lock_release(&n->lock);
        /* the old array's objects to their slabs, each word checked now (not
         * only when it entered the array): an entry whose object was freed
         * twice and handed out since from its other entry belongs to the
         * program, and must be neither written nor freed (fuzz bug 9) */
        if (old_avail)
            slabfe_to_node(c, NULL, n, old, old_avail, false);
        if (old)
            qs_meta_free(old, sizeof(void *) * old_limit);
    }
}

/* ---- validation (qs_global held; nobody uses the cache) ---- */
static void check_slab(struct qs_walk *w, struct qs_node *n, struct qs_slab *s, int state,
                       unsigned long *nfree)
{
    qslab_cache *c = w->c;
    w->slabs++;
    w->inuse += s->inuse;
    *nfree += s->objects - s->inuse;
    if (s->cache != c)
        qs_walk_problem(w, "slab of another cache on a list", s->mem);
    if (qs_slab_owner(s) != &n->list)
        qs_walk_problem(w, "slab owner is not its node", s->mem);
    if (s->state != state)
        qs_walk_problem(w, "slab state does not match its list", s->mem);
    if (s->inuse > s->objects || (state == QS_SLAB_FULL && s->inuse != s->objects) ||
        (state == QS_SLAB_PARTIAL && (s->inuse == 0 || s->inuse == s->objects)) ||
        (state == QS_SLAB_EMPTY && s->inuse != 0))
        qs_walk_problem(w, "slab's inuse does not match its list", s->mem);
    /* lazy birth (slab.h): span a run of born objects, each object in use
     * born, the entries from born on never written (each its own index) */
    uint32_t span = __atomic_load_n(&s->span, __ATOMIC_RELAXED);
    unsigned born = born_of(c, s);
    if (span % c->slot_size || born > s->objects || s->inuse > born)
        qs_walk_problem(w, "span is not a run of born objects", s->mem);
    for (unsigned i = born > s->inuse ? born : s->inuse; i < s->objects && born <= s->objects; i++)
        if (get_free_idx(s, i) != i) {
            qs_walk_problem(w, "free index of an object not born yet out of place", s->mem);
            break;
        }
    /* the bitmap: exactly the free objects born (a word at a time; bits
     * past the last object do not count; slab.h: those not born yet are
     * free by their place, their bits 0) */
    unsigned long bits = 0;
    const uint64_t *bm = free_bm(s);
    for (unsigned i = 0; i < s->objects / 64; i++)
        bits += (unsigned long)__builtin_popcountll(bm[i]);
    if (s->objects % 64)
        bits += (unsigned long)__builtin_popcountll(bm[s->objects / 64] &
                                                    (((uint64_t)1 << (s->objects % 64)) - 1));
    if (born < s->inuse || bits != born - s->inuse)
        qs_walk_problem(w, "slab's free bitmap does not match its free count", s->mem);
    /* the free indices: in range, each once, free in the bitmap.  The seen
     * set is a copy of the bitmap whose bits are cleared as indices name
     * them: an index whose bit is already clear is in use, or named twice
     * (the bitmap's own count was checked above). */
    uint64_t seen[64];
    bool track = s->objects <= sizeof(seen) * 8;
    if (track)
        memcpy(seen, bm, (s->objects + 63) / 64 * sizeof(uint64_t));
    for (unsigned i = s->inuse; i < s->objects && i >= s->inuse; i++) {
        unsigned v = get_free_idx(s, i);
        if (v >= s->objects) {
            qs_walk_problem(w, "free index out of range", s->mem);
            break;
        }
        if (i >= born) /* an object not born yet at its own entry: checked above */
            continue;
        if (track && (seen[v / 64] >> (v % 64) & 1)) {
            seen[v / 64] &= ~((uint64_t)1 << (v % 64));
            continue;
        }
        if (!bm_test(s, v)) {
            qs_walk_problem(w, "free index of an object its bitmap says is in use", s->mem);
            break;
        }
        if (track) { /* free in the bitmap, its seen bit cleared: named before */
            qs_walk_problem(w, "object free twice in its slab's index list", s->base + (size_t)v * c->slot_size);
            break;
        }
    }
}

static void check_objs(struct qs_walk *w, void *const *v, unsigned long n, int node, const char *what)
{
    for (unsigned long i = 0; i < n; i++) {
        struct qs_chunk *ch = qs_chunk_of(v[i]);
        struct qs_slab *s = ch && ch->kind == QS_CHUNK_SLABS ? qs_obj_slab(ch, v[i]) : NULL;
        if (!s || s->cache != w->c || (node >= 0 && s->node != node))
            qs_walk_problem(w, what, v[i]);
    }
}

void slabfe_slab_validate(qslab_cache *c, struct qs_walk *w)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        for (int i = 0; q->alien && i < qs_nr_nodes; i++) {
            void **a = q->alien + (size_t)i * (ALIEN_LIMIT + 1);
            uintptr_t k = (uintptr_t)a[0];
            if (k > ALIEN_LIMIT) {
                qs_walk_problem(w, "alien array count over its limit", q);
                continue;
            }
            check_objs(w, a + 1, k, i, "alien array holds a pointer that is not an object of its node");
            w->queued += k;
        }
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        unsigned long np = 0, nf = 0, ne = 0, nfree = 0;
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial; s; s = s->next, np++)
            check_slab(w, n, s, QS_SLAB_PARTIAL, &nfree);
        for (struct qs_slab *s = n->list.full; s; s = s->next, nf++)
            check_slab(w, n, s, QS_SLAB_FULL, &nfree);
        for (struct qs_slab *s = n->slabs_free; s; s = s->next, ne++)
            check_slab(w, n, s, QS_SLAB_EMPTY, &nfree);
        if (np != n->list.nr_partial || nf != n->list.nr_full || ne != n->nr_free_slabs)
            qs_walk_problem(w, "node list counts do not match", n);
        if (nfree != n->free_objects)
            qs_walk_problem(w, "node's free_objects does not match its slabs", n);
        if (n->shared_avail > n->shared_limit)
            qs_walk_problem(w, "shared array count over its limit", n);
        else if (n->shared)
            check_objs(w, n->shared, n->shared_avail, i,
                       "shared array holds a pointer that is not an object of its node");
        w->queued += n->shared_avail;
        qs_lock_release(&n->lock);
    }
}
