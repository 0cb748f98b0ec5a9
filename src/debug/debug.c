/*
 * debug.c - SLUB's debugging for qslab caches: consistency checks (F), red
 * zones (Z), poisoning (P), owner tracking (U), tracing (T), and qslab's
 * repair mode (R).  docs/debugging.md is the user's guide.
 *
 * WHICH CACHES.  A cache's flags (QSLAB_RED_ZONE ...) and the environment
 * (QSLAB_DEBUG, SLUB's slub_debug syntax, parsed by qs_debug_flags_for in
 * flags.c) decide its debug flags when it is made.  A cache with any is
 * served by the debug front end below: no per-owner caching at all (its
 * owners' queues stay inert, so the inline fast paths always miss, as for
 * SLUB's caches), every allocation and free on its node's lists under the
 * node's lock, where the checks run (slot.c).  This is SLUB's own choice
 * since Linux 6.2 (debug caches allocate from the node's partial list under
 * list_lock).  So a cache without debug flags pays nothing: the fast paths
 * do not test for debugging, and the slow paths only where the debug front
 * end's objects pass (core/slab.c's birth, node.c's allocation: one test of
 * c->debug there).
 *
 * LOCKING.  Every change of an object's debug state (red zones, poison,
 * tracks, link) is made under its node's lock, with the object's move
 * onto or off its slab's free list; the walks hold the same lock.  So a
 * walk never sees a half-written red zone.  The bytes of an allocated
 * object belong to its user: only their red zones are read.
 *
 * THE FILES.  This one holds the front end's hooks, the walks over a
 * debug cache's objects (validation, the purger's tick) and the
 * registration of the debug layer's calls from the layers below
 * (qs_debug_hooks, core/hooks.h: the whole layer's, guard.c's and
 * twin.c's included); the rest of the
 * debug front end is, by what it does (their shared header: debug_int.h):
 *   flags.c   which caches, with which flags: QSLAB_DEBUG (slub_debug)
 *   slot.c    the slot layout, red zones, poison, the checks under the
 *             node's lock (qs_debug_alloc_locked, qs_debug_free_locked)
 *   track.c   owner tracking: the tracks, call sites, leaks at destroy
 *   bugs.c    the reports (BUG, FIX, TRACE), bad links and pointers
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"
#include "owner/owner.h"

#include <errno.h>

#define QS_DEBUG_WALK_MS 1000 /* the purger checks debug caches this often */

/* ---- walks: every object of every slab of a debug cache ---- */

static void walk_slab_objs(qslab_cache *c, struct qs_slab *s, obj_fn fn, void *arg)
{
    for (uint32_t i = 0; i < s->objects; i++) {
        char *obj = s->base + (size_t)i * c->slot_size;
        fn(c, s, obj, *qs_link(c, obj) == 0, arg);
    }
}

void dbg_walk_cache(qslab_cache *c, obj_fn fn, void *arg)
{
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial; s; s = s->next)
            walk_slab_objs(c, s, fn, arg);
        for (struct qs_slab *s = n->list.full; s; s = s->next)
            walk_slab_objs(c, s, fn, arg);
        qs_node_fifo_lock(n);
        QS_FIFO_FOR_EACH(n, s)
            walk_slab_objs(c, s, fn, arg);
        qs_node_fifo_unlock(n);
        qs_lock_release(&n->lock);
    }
}

static void debug_validate(qslab_cache *c, struct qs_walk *w)
{
    /* quarantined objects: free, and in use in their slabs, as queued ones */
    w->queued += dbg_quarantine_objects(c);
    struct check_arg a = {0, false};
    dbg_walk_cache(c, dbg_check_obj, &a);
    if (a.bad)
        qs_walk_problem(w, "debug checks failed (BUG reports above) in objects of the cache", c);
}

/* What the walks check: red zones (Z), poison (P, and Q's zeros) */
#define QS_DBG_WALKED (QS_DBG_Z | QS_DBG_P | QS_DBG_Q)

/* An empty slab of c about to go back (node.c fifo_keep: the policy, the
 * purger's tick, shrink, trim, the reclaims): the last check of its
 * objects, reported as the purger's walk reports (the handler).  The
 * purger's tick gives back the FIFO's old slabs before it walks (front.c
 * qs_front_tick), and a slab's decay and the walk's period are both about
 * a second: without this check a write after free in a slab that goes
 * back before the walk reaches it is never reported.  No lock: the slab is
 * off the FIFO and every list, detached by the caller under the node's
 * lock (which orders the objects' last fill_free, made under that lock,
 * before these reads), so no other thread of qslab reaches its objects;
 * the caller keeps c alive. */
void qs_debug_slab_leaving(qslab_cache *c, struct qs_slab *s)
{
    if (!(c->debug & QS_DBG_WALKED))
        return;
    struct check_arg a = {0, true};
    walk_slab_objs(c, s, dbg_check_obj, &a);
}

/* The purger's tick: check every debug cache, every QS_DEBUG_WALK_MS. */
static QS_RARE size_t debug_sweep(bool all)
{
    static uint64_t last; /* the purger's and trim's calls race: one walks */
    uint64_t now = qs_os_now_ms(), was = __atomic_load_n(&last, __ATOMIC_RELAXED);
    if ((!all && now - was < QS_DEBUG_WALK_MS) ||
        !__atomic_compare_exchange_n(&last, &was, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return 0;
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        if (c->front != QS_FRONT_DEBUG || !(c->debug & QS_DBG_WALKED))
            continue;
        struct check_arg a = {0, true};
        dbg_walk_cache(c, dbg_check_obj, &a);
    }
    qs_lock_release(&qs_global);
    return 0;
}

/* ---- the debug front end ---- */

static void *debug_alloc(qslab_cache *c, int node)
{
    if (node < 0)
        node = qs_owner_current_node();
    if (c->debug & QS_DBG_WALKED) { /* its walks (debug_sweep) */
        qs_node_purger_want();
        qs_purger_check(); /* an allocation slow path: a safe point to start it (node.c) */
    }
    /* a corrupt free list met on the way isolates its slab, and
     * qs_node_alloc takes another: NULL is the OS refusing memory, which is
     * not asked again (fault injection's "the path returns NULL") */
    void *obj = (c->debug & QS_DBG_Q) ? dbg_quarantine_reuse(c, node) : NULL;
    if (obj) {
        qs_self.last_word = 0; /* not fresh: calloc clears it */
        return obj;
    }
    obj = qs_node_alloc(c, NULL, node);
    if (!obj)
        errno = ENOMEM;
    return obj;
}

static void debug_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    /* once per node, outside its lock (made: one load, no call) */
    if ((c->debug & QS_DBG_Q) && !__atomic_load_n(&c->nodes[s->node].quar, __ATOMIC_ACQUIRE))
        dbg_quarantine_prepare(c, s->node);
    qs_node_free(c, s, obj);
}

/* The usable size of obj, a pointer into slab s: an allocated object's
 * size (never the slot: its tail is red zone); a free object (in the
 * quarantine, or on its slab's free list: its link word is not 0) and a
 * pointer that is not an object are reported, as `what` of it, and get 0.
 * The word is read without the node's lock: it is 0 from the allocation
 * to the free of the object, which the caller holds; any other reading
 * means the caller holds no object. */
static size_t debug_usable(struct qs_slab *s, const void *obj, const char *what)
{
    qslab_cache *c = s->cache;
    if (!qs_slab_valid_obj(s, obj)) {
        if (!qs_debug_bad_pointer(c, s, obj))
            qs_fatal("invalid %s of %p: not an object of cache %s", what, obj, c->name);
        return 0;
    }
    uintptr_t w = __atomic_load_n(qs_link(c, (void *)obj), __ATOMIC_RELAXED);
    if (w != 0) {
        char text[96];
        struct qs_buf b = {text, 0, sizeof(text)};
        qs_buf_str(&b, what);
        qs_buf_str(&b, " of a free object");
        qs_buf_putc(&b, '\0');
        struct problem pb = {text, NULL, NULL, -1,
                             w == QS_QUAR_WORD(c->secret)
                                 ? "The object was freed and is in quarantine: a use after free"
                                 : "The object was freed: a use after free"};
        dbg_report(c, s, obj, &pb);
        dbg_conclude(c, obj, &pb);
        return 0;
    }
    return c->obj_size;
}

static size_t debug_shrink(qslab_cache *c)
{
    size_t bytes = 0;
    if (c->debug & QS_DBG_Q) /* what waits in quarantine goes back too */
        dbg_quarantine_drain(c);
    for (int n = 0; n < qs_nr_nodes; n++)
        bytes += qs_node_shrink(c, NULL, &c->nodes[n]);
    return bytes;
}

static void debug_destroy(qslab_cache *c, struct qs_slab **all)
{
    (void)all; /* the slabs: on the node lists, which the shared destroy gathers */
    dbg_quarantine_release(c);
    /* every object is free (destroy refuses otherwise): their last check
     * before the slabs go, as qs_debug_slab_leaving's (c unlinked: no
     * other thread reaches its lists, whose locks the walk takes anyway) */
    if (c->debug & QS_DBG_WALKED) {
        struct check_arg a = {0, true};
        dbg_walk_cache(c, dbg_check_obj, &a);
    }
}

static unsigned debug_objs_per_slab(const qslab_cache *c, unsigned order)
{
    return (unsigned)((qs_slab_bytes(order) - c->red_left) / c->slot_size);
}

/* ---- the calls of the layers below into this one (core/hooks.h) ---- */

/* qs_init_slow, first thing: before any cache is made or any slow path
 * runs, so no hook is ever called while NULL (core/hooks.h) */
QS_STARTUP void qs_debug_hooks_register(void)
{
    qs_fronts[QS_FRONT_DEBUG] = &qs_front_debug; /* the debug front end (front.c) */
    qs_debug_hooks = (struct qs_debug_hooks){
        .born = qs_debug_born,
        .alloc_locked = qs_debug_alloc_locked,
        .free_locked = qs_debug_free_locked,
        .bad_link = qs_debug_bad_link,
        .guard_alloc = qs_guard_alloc,
        .guard_armed_free = qs_guard_armed_free,
        .twin_take = qs_twin_take,
        .twin_alloc = qs_twin_alloc,
        .slab_released = qs_debug_slab_released,
        .slab_leaving = qs_debug_slab_leaving,
    };
}

const struct qs_front qs_front_debug = {
    .name = "debug",
    .what = "debug caches: checked allocations from node lists, no per-owner caching (SLUB's)",
    .alloc = debug_alloc,
    .free_obj = debug_free,
    .usable = debug_usable,
    .shrink = debug_shrink,
    .sweep = debug_sweep,
    .validate = debug_validate,
    .destroy = debug_destroy,
    .objs_per_slab = debug_objs_per_slab,
};
