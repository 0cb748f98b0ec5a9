/*
 * core/hooks.h - the calls that go up the layers.  A lower layer (core,
 * owner, front) never includes a higher layer's header; where it must
 * reach up, it calls through a table of function pointers declared here,
 * which the higher layer fills in.  One table a layer that is called up to:
 *   qs_debug_hooks    the debug layer (debug/debug.c qs_debug_hooks_register):
 *                     the debug front end's checks under the node lock, new
 *                     objects' red zones and poison, guarded samples, twins
 *   qs_observe_hooks  the observe layer (observe/observe.c
 *                     qs_observe_hooks_register): the seqlock of the root
 *                     structure around changes of the owner tables
 *   qs_api_hooks      the API layer (api/cache.c qs_init_slow): making a
 *                     cache as qslab_cache_create does, for SLOB's arena
 *                     and debug twins; shrink and trim, for the control
 *                     channel's requests; the entry points' addresses, for
 *                     the debug tracks' call sites; zero-size blocks, for
 *                     the fault handler's reports
 *   qs_front_hooks    the front layer (front/registry.c
 *                     qs_front_hooks_register): the purger's tick, an
 *                     owner's exit, a destroyed cache's queues, which
 *                     front ends have queues
 * Every hook sits on a slow path behind a test the caller made already (a
 * debug cache, an armed queue, sampling on, a twin): none is on a fast path.
 *
 * WHEN THEY ARE SET.  qs_init_slow (api/cache.c) registers the tables
 * first thing, under its lock, before the owner kind, the front ends and
 * the kmalloc caches are set up, and before qs_initialized is stored (with
 * release).  Every call of a hook comes after qs_init (a cache is made, a
 * queue attached, a slow allocation taken only after it) or is about a
 * cache, queue, object or flag made after it: so the hooks are never NULL
 * when called, and they are not checked.  They never change after, and a
 * fork's child inherits them.
 */
#ifndef QSLAB_CORE_HOOKS_H
#define QSLAB_CORE_HOOKS_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

struct qs_debug_hooks {
    /* core/slab.c: a debug cache's n new objects from `first` (red zones,
     * poison, tracks), zero: their memory is known zero (QS_SLAB_ZERO):
     * qs_debug_born */
    void (*born)(qslab_cache *c, char *first, uint32_t n, bool zero);
    /* under the node lock, a debug cache's object leaving (core/node.c) or
     * joining (front/slqb/remote.c) its slab's free list: alloc false:
     * reported, keep it out; free: QS_DBG_FREE_*, and what to put on a free
     * list in *obj and *s: qs_debug_alloc_locked, qs_debug_free_locked */
    bool (*alloc_locked)(qslab_cache *c, struct qs_slab *s, void *obj);
    int (*free_locked)(qslab_cache *c, struct qs_slab **s, void **obj);
    /* front/slqb/misuse.c: a debug cache's corrupt free-list link:
     * qs_debug_bad_link */
    void (*bad_link)(qslab_cache *c, void *obj);
    /* front/slqb/queue.c, while qs_guard_on: a guarded sample or NULL:
     * qs_guard_alloc */
    void *(*guard_alloc)(qslab_cache *c, size_t size);
    /* front/slqb/queue.c and cpu.c, a slow free while q->guard_armed: empty
     * q: qs_guard_armed_free */
    void (*guard_armed_free)(qslab_cache *c, struct qs_queue *q);
    /* qs_twin_divert below: qs_twin_take; and the twin's allocation:
     * qs_twin_alloc */
    qslab_cache *(*twin_take)(qslab_cache *c, qslab_cache *t);
    void *(*twin_alloc)(qslab_cache *t, int node);
    /* core/page.c, while qs_debug_tools: slab s leaves its cache, its memory
     * is usable again for valgrind and ASan: qs_debug_slab_released */
    void (*slab_released)(struct qs_slab *s);
    /* core/node.c, c alive: an empty slab of debug cache c, off its FIFO
     * and every list (the caller's alone), about to go back: its objects'
     * last check (red zones, poison), reported as the purger's walk
     * reports: qs_debug_slab_leaving */
    void (*slab_leaving)(qslab_cache *c, struct qs_slab *s);
};
extern struct qs_debug_hooks qs_debug_hooks;
enum {
    QS_DBG_FREE_KEEP, /* reported: the object stays as it is (not freed) */
    QS_DBG_FREE_PUT,  /* put *obj (the freed one, or one the quarantine let
                         go in its place) on the free list of *s */
    QS_DBG_FREE_HELD, /* freed, held in the quarantine: nothing to put */
};

struct qs_observe_hooks {
    /* owner/owner.c, qs_global held: open (odd) and close (even) a change
     * of an owner table or a queue list: qs_observe_begin, qs_observe_end */
    void (*begin)(void);
    void (*end)(void);
};
extern struct qs_observe_hooks qs_observe_hooks;

struct qs_api_hooks {
    /* Make c a cache as qslab_cache_create does: its layout (debug: QS_DBG_*
     * flags, or -1 for those its flags and QSLAB_DEBUG give it), tunables,
     * id, its place in the cache list and in the observe root; false with
     * errno set.  That reaches every layer up to the API's (api/cache.c
     * cache_setup); SLOB's arena (front/slob/slob.c) and debug twins
     * (debug/twin.c) are made through it. */
    bool (*cache_setup)(qslab_cache *c, const char *name, size_t size, size_t align,
                        unsigned long flags, void (*ctor)(void *), bool is_kmalloc, int debug);
    /* observe/control_cmd.c, the control channel's `shrink` and `trim`;
     * core/pressure.c, the purger under memory pressure (trim):
     * qslab_cache_shrink, qslab_trim */
    size_t (*cache_shrink)(qslab_cache *c);
    size_t (*trim)(void);
    /* core/node.c, the purger's thread, no lock held: a defragmentation
     * pass on each mobile cache worth one (pressure: core/pressure.c, on a
     * pressure event or near the limit, before its trim); bytes given
     * back: api/defrag.c qs_defrag_tick */
    size_t (*defrag)(bool pressure);
    /* debug/fault.c, a fault: the zero-size block (api/zero.c) whose
     * 16-byte slot holds address a, or NULL (not in their range):
     * qs_zero_block */
    void *(*zero_block)(uintptr_t a);
    /* front/front.c qs_front_fast: a kmalloc class's cache changed its
     * fast path, which the class tables copy: qs_kmalloc_fast */
    void (*kmalloc_fast)(qslab_cache *c);
    /* core/caches.c qs_cache_find (a class named, not made yet), observe/
     * tune.c (a tunable set on every cache): class i's cache, made now if
     * it was not (NULL: no memory for it), and every class's:
     * qs_kmalloc_cache, qs_kmalloc_make_all.  No qslab lock held. */
    qslab_cache *(*kmalloc_make)(unsigned i);
    void (*kmalloc_make_all)(void);
    /* debug/track.c: the addresses of the entry points a user's code calls
     * (qslab_malloc, qslab_cache_alloc, ...): a direct call of one of them
     * is the user's frame of a track */
    const uintptr_t *entries;
    unsigned nr_entries;
};
extern struct qs_api_hooks qs_api_hooks;

struct qs_front_hooks {
    /* core/node.c, the purger's thread, no lock held: its tick, the whole
     * of it (every cache's idle queues, then core's policy on its nodes,
     * qs_node_sweep_cache, then the front ends' sweeps); bytes given back:
     * qs_front_tick */
    size_t (*tick)(bool all);
    /* owner/owner.c, an owner's exit, qs_global held: everything q holds
     * given back (the front end's per-owner state first), its slabs to the
     * node lists: registry.c's, which calls the front end's retire and SLQB's
     * qs_queue_retire */
    void (*retire)(qslab_cache *c, struct qs_queue *q);
    /* owner/owner.c qs_owner_detach_cache, destroy, qs_global held, the
     * cache quiet: q's grant and stash leave its owner's budget:
     * qs_queue_budget_drop (nothing for other front ends' queues) */
    void (*budget_drop)(qslab_cache *c, struct qs_queue *q);
    /* owner/owner.c, a queue attached to an owner (inert: limit, park and
     * hiwater 0; its grant 0, room for one in its slots), qs_global held:
     * the knobs the fast paths read, the front end's (front.h queue_knobs;
     * a front end without them leaves the queue inert): front_attached */
    void (*attached)(qslab_cache *c, struct qs_queue *q);
    /* bit f set (1u << QS_FRONT_*): front end f's caches have queues
     * (front.h `queues`: SLQB, SLAB), whose fast frees push an object
     * without loading its word: core/node.c fifo_whole checks their empty
     * slabs before they go back.  A cache's front end is fixed before its
     * first slab (tune.c), so c->front read with its slabs is its own. */
    unsigned queues;
};
extern struct qs_front_hooks qs_front_hooks;

/* Guarded sampling is on anywhere (QSLAB_GUARD_SAMPLE, or a cache's
 * guard_sample): the slow allocation paths then ask the guard sampler
 * (qs_debug_hooks.guard_alloc).  Written by debug/guard.c
 * (qs_guard_enable), read by the slow paths; kept here, in core, so that
 * the front ends below the debug layer can test it. */
extern int qs_guard_on;

/* A cache with the V flag exists (valgrind's or ASan's view of objects):
 * slabs leaving their cache tell the tools (qs_debug_hooks.slab_released).
 * Written by debug/slot.c, read by core/page.c: kept here for the same
 * reason as qs_guard_on. */
extern bool qs_debug_tools;

/* The twin that takes this allocation of c, or NULL: c has none, or the
 * caller's own (thread) queue still holds objects, which it hands out
 * first.  A CPU's queues were emptied when the twin came (debug/twin.c). */
static inline qslab_cache *qs_twin_divert(qslab_cache *c)
{
    qslab_cache *t = __atomic_load_n(&c->dbg_alloc, __ATOMIC_ACQUIRE);
    if (likely(t == NULL))
        return NULL;
    return qs_debug_hooks.twin_take(c, t);
}

#pragma GCC visibility pop

#endif /* QSLAB_CORE_HOOKS_H */
