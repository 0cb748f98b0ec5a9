/*
 * front.h - front ends: how a cache's objects travel between its callers and
 * its slabs.
 *
 * The seeds argue over three designs for this (SLAB, SLUB, SLQB) and keep
 * SLOB for small machines.  qslab runs each as a front end over the same
 * layers below (page.c chunks and slabs, core/slab.c object layout, node.c lists
 * and empty-slab policy, the statistics, tunables, validation and the
 * drop-in): a cache picks its front end when it is made (QSLAB_FRONT for the
 * process, the `front` tunable per cache before its first allocation) and
 * keeps it.
 *
 *   slqb  per-owner LIFO queues, remote frees batched home (front/slqb/:
 *         queue.c, remote.c, cpu.c, budget.c; its inline fast paths fast.h)
 *   slub  a per-owner active slab whose free list the owner pops and
 *         pushes without a lock; every other free goes straight to its
 *         slab's free list by compare-and-swap (slub.c)
 *   slab  per-owner arrays of objects (SLQB's queues) over node-owned
 *         slabs with index free lists, a shared array per node, alien
 *         caches for other nodes' objects, the reaper (front/slab/)
 *   slob  pages shared by every cache, indexed by their largest free
 *         block (best fit by page), no per-owner caching
 *         (slob.c): the memory floor
 *
 * THE CONTRACT.  The queues' inline fast paths (slqb/fast.h) serve only caches whose
 * owners have queues; a front end without queues never attaches one, so its
 * caches' fast paths always miss (qs_no_queue: empty, owns nothing) and land
 * in the slow paths, which hand the call to the cache's front end:
 *   alloc   qs_alloc_slow, qs_kmalloc_slow (with the request's size),
 *           qslab_cache_alloc_node
 *   free    qs_free_slow, qs_free_remote, qs_percpu_free_slow, and
 *           qslab_cache_free of an object of another cache's slab (the
 *           front end decides: SLOB's pages belong to its arena)
 * and the cache-wide operations (shrink, the purger's sweep, trim, destroy,
 * statistics, validation, fork) call the hooks below after (or instead of)
 * the work on queues, which is empty for a front end without queues.
 * A NULL hook means "nothing beyond the common work".
 *
 * The layers below reach the front layer through core/hooks.h's
 * qs_front_hooks (registry.c qs_front_hooks_register): the purger's tick
 * (qs_front_tick), an owner's exit and a destroyed cache's queues
 * (owner/owner.c), and which front ends have queues (core/node.c).
 */
#ifndef QSLAB_FRONT_H
#define QSLAB_FRONT_H

#include "core/internal.h"
#include "front/queue.h"

#pragma GCC visibility push(hidden)

struct qs_walk; /* below */

struct qs_front {
    const char *name; /* as in QSLAB_FRONT and the statistics */
    const char *what; /* one line for the report */
    /* the slow paths: allocate one object of c (node: QSLAB_NUMA_NO_NODE or
     * a node), NULL with errno set on failure */
    void *(*alloc)(qslab_cache *c, int node);
    /* kmalloc's slow path with the request's size, c its class's cache
     * (NULL: alloc); align (0: malloc's) from qslab_aligned_alloc, for
     * requests that fit a page with their alignment */
    void *(*kmalloc)(qslab_cache *c, size_t size, size_t align);
    /* free obj, which the caller validated as an object of slab s, whose
     * cache is c (for SLOB: its arena) */
    void (*free_obj)(qslab_cache *c, struct qs_slab *s, void *obj);
    /* qslab_cache_free(expected, obj) where obj lies in slab s of a cache
     * of this front end other than `expected` (SLOB: pages shared by every
     * cache): free it or report it and return true; or return false, s
     * being none of the front end's shared memory, for the caller to
     * report obj (qs_bad_free) */
    bool (*free_to)(qslab_cache *expected, struct qs_slab *s, void *obj);
    /* usable bytes of obj, an object of slab s (kmalloc: the block's); 0
     * when obj is none, reported as `what` of it */
    size_t (*usable)(struct qs_slab *s, const void *obj, const char *what);
    /* shrink: give back what the front end keeps for cache c; bytes */
    size_t (*shrink)(qslab_cache *c);
    /* the purger's tick (all: malloc_trim, everything), over the whole
     * front end, once per tick; bytes given back.  No lock held. */
    size_t (*sweep)(bool all);
    /* the purger's tick (qs_front_tick), for each queue q of c (any
     * owner's; qs_global held, no other lock), before c's nodes' policy:
     * give back what an owner that went idle keeps (SLQB: an idle CPU's
     * queue emptied and its slabs handed to the node, q->lock only tried;
     * an untouched stash to the node's FIFO; SLUB: an idle CPU's active
     * and partial slabs back to their nodes).  NULL: nothing (a queue of
     * another front end never holds a stash: only SLQB's own slabs) */
    void (*idle)(qslab_cache *c, struct qs_queue *q);
    /* mallinfo's totals: add what the front end holds beyond its caches'
     * objects (SLOB: free space in its pages, kept pages) */
    void (*totals)(struct qs_totals *t);
    /* validation: walk what the front end holds for c (qs_global held) */
    void (*validate)(qslab_cache *c, struct qs_walk *w);
    /* fork: take (true) or release every lock of the front end's, in its
     * rank (after node locks, before the page pools) */
    void (*lock_all)(bool lock);
    /* a line of its own for the report (SLOB: its pages); NULL: none */
    void (*report)(int fd);
    /* an owner's exit (thread owners): give back its per-owner state in
     * q (SLUB: the active slab and partial slabs); qs_global held */
    void (*retire)(qslab_cache *c, struct qs_queue *q);
    /* destroy: every object is free; release what the front end keeps of
     * c beyond the queues' and nodes' lists (cache unpublished, no lock):
     * its slabs onto *all (a ->next list), which the shared destroy hands
     * to the page layer in one go (warm.c: the retention rule) */
    void (*destroy)(qslab_cache *c, struct qs_slab **all);
    /* the default order of c's slabs (NULL: core/slab.c's rule) */
    unsigned (*order)(const qslab_cache *c);
    /* kmalloc gets the request's own size and alignment (SLOB): aligned
     * allocations within a page go to it */
    bool kmalloc_exact;
    /* its caches' objects live in pages every cache shares (SLOB): no slab
     * holds one cache's objects only; defragmentation (api/defrag.c) moves
     * a cache's objects off the sparse pages through page_objs below, and
     * a page empties once every cache's blocks have left it */
    bool shared_pages;
    /* the nodes' partial and full lists hold slabs under the front end's
     * own rules (SLUB, SLAB): validation leaves them to its hook */
    bool own_node_lists;
    /* its slabs keep their free objects' state their own way (SLUB's slab
     * word, SLAB's index arrays): no free bits (core/slab.h) */
    bool own_free_state;
    /* it keeps data past its slabs' objects (SLAB's on-slab index arrays):
     * a kmalloc block alone in its slab does not grow into the slab's rest
     * (qs_front_kmalloc_room) */
    bool slab_tail_used;
    /* its caches' owners have SLQB's queues of objects (SLQB, SLAB): the
     * inline fast paths serve them, the statistics derive free_fast, empty
     * slabs are checked before they go back (core/node.c fifo_whole, told
     * through qs_front_hooks.queues); the purger empties idle CPUs' queues
     * through the `idle` hook (SLQB's; SLUB's has no queue to empty) */
    bool queues;
    /* its owners own slabs (their queues' lists) and other owners batch
     * frees home to their inboxes (SLQB): the purger hands an idle CPU's
     * slabs to the node, a diverted allocation claims the inbox, the guard
     * sampler arms its queues */
    bool owns_slabs;
    /* a queue's copies of c's knobs that the inline fast paths read
     * (hiwater, limit, park), set from c's tunables: at attach (attach
     * true: a new queue of an owner, its grant 0, its slots room for one;
     * owner.c), after a tune (tune.c), when a debug twin comes or goes
     * (while c->dbg_alloc is set, every knob 0: twin.c).  qs_global held.
     * NULL: the queues are per-owner state only (SLUB): inert for the fast
     * paths, limit, park and hiwater 0, so they miss and call the slow
     * paths */
    void (*queue_knobs)(qslab_cache *c, struct qs_queue *q, bool attach);
    /* c's front-end tunables changed, or c took or left this front end
     * (qs_global held, or c not yet published): SLAB's arrays and shared
     * arrays follow limit, batchcount and shared */
    void (*tuned)(qslab_cache *c);
    /* objects of a queue going back to their slabs (SLAB: its slabs' free
     * lists are index arrays), instead of SLQB's routing to owners; their
     * words hold the free stamp or a link (checked by the caller) */
    void (*give_back)(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long n);
    /* objects in a slab of `order` (NULL: slab bytes / slot size) */
    unsigned (*objs_per_slab)(const qslab_cache *c, unsigned order);
    /* the slabinfo line's "tunables" of c: limit, batchcount, sharedfactor
     * (NULL: SLQB's hiwater and freebatch, and 0) */
    void (*slabinfo_tunables)(const qslab_cache *c, unsigned long out[3]);
    /* shared_pages front ends, for defragmentation (api/defrag.c): false
     * if slab s is none of the front end's shared pages; else *max, how
     * many objects of c the page could hold, *fill, the share of the page
     * in use (of QS_PAGE_FILL_ONE, every cache's blocks), and *live, c's
     * allocated objects in it, their addresses into out (NULL: counted;
     * else room for *max, as an earlier call on the page returned).  No
     * lock held; the front end takes its own.  The page's memory stays
     * mapped (the caller pins the page layer); it may have left the front
     * end since the caller found it (false). */
    bool (*page_objs)(const qslab_cache *c, struct qs_slab *s, void **out, uint32_t *live,
                      uint32_t *max, uint32_t *fill);
};
#define QS_PAGE_FILL_ONE 1024u

extern const struct qs_front qs_front_slqb, qs_front_slob, qs_front_slub, qs_front_slab;
extern const struct qs_front *qs_fronts[QS_FRONT_NR]; /* [QS_FRONT_DEBUG]: set by the debug layer */
extern int qs_front_default; /* QSLAB_FRONT, read at start-up */
void qs_front_init(void);    /* start-up: QSLAB_FRONT */
int qs_front_find(const char *name, size_t len); /* QS_FRONT_*, or -1 */
#define QS_FRONT_NAMES "slqb, slub, slab, slob" /* for messages */
unsigned qs_front_objs_per_slab(const qslab_cache *c, unsigned order);
/* c's front end is f now (before its first allocation), with what the
 * layers below copy from the front end's properties (keeps_fbits) */
void qs_front_set(qslab_cache *c, int f);
/* c's fast paths (c->fast, c->free_fast) from its front end, its debug
 * twin and sampling; _all: every cache's (qs_global held) */
void qs_front_fast(qslab_cache *c);
void qs_front_fast_all(void);
/* The default order of c's slabs under front end f. */
unsigned qs_front_order(const qslab_cache *c, int f);
/* The room of a kmalloc object of slab s (its usable size): its class's
 * size, unless it is alone in its slab (front.c) */
#define QS_KM_ROOM_FROM 16384 /* objects alone in a slab: from this class size up */
size_t qs_front_kmalloc_room(const struct qs_slab *s);
/* c's event counters, its queues' and its orphan ones, summed into
 * sum[QS_STAT_NR] (qs_global held): for the statistics (stats.c), tune,
 * validation (validate.c) and destroy's live objects (cache.c) */
void qs_stats_sum(qslab_cache *c, unsigned long *sum);
/* Start-up (qs_init_slow, with the other layers' tables): fill in
 * core/hooks.h's qs_front_hooks. */
void qs_front_hooks_register(void);
/* The purger's tick (all == false: core/node.c's purger, through
 * qs_front_hooks.tick) or malloc_trim's (all: qslab_trim): every cache's
 * queues (the `idle` hooks) and nodes (core's policy, qs_node_sweep_cache),
 * then every front end's `sweep`; bytes given back.  No lock held. */
size_t qs_front_tick(bool all);

static inline const struct qs_front *qs_front_of(const qslab_cache *c)
{
    return qs_fronts[c->front];
}

/* The validation walker's state (debug/validate.c walks a cache; the front
 * ends' validate hooks walk what they hold): a problem found is counted
 * and reported on stderr by qs_walk_problem (front.c). */
struct qs_walk {
    qslab_cache *c;
    unsigned long slabs, inuse, queued, errors;
};
void qs_walk_problem(struct qs_walk *w, const char *what, const void *where);

/* ---- front/slqb: what the registry (registry.c) takes from SLQB ---- */
void qs_slqb_idle(qslab_cache *c, struct qs_queue *q); /* cpu.c: SLQB's `idle` hook */
void qs_slqb_queue_knobs(qslab_cache *c, struct qs_queue *q, bool attach); /* queue.c */
/* An owner's exit (qs_global held): q's objects, batches, inbox and stash
 * given back, its slabs handed to the node lists (queue.c); the front
 * end's own per-owner state went first (registry.c: its `retire` hook) */
void qs_queue_retire(qslab_cache *c, struct qs_queue *q);
/* destroy (qs_global held, the cache quiet): q's grant and stash leave its
 * owner's budget (budget.c; SLQB's queues only) */
void qs_queue_budget_drop(qslab_cache *c, struct qs_queue *q);

/* ---- slob.c ---- */
extern qslab_cache qs_slob_arena; /* the owner of SLOB's shared pages */
void qs_slob_setup(void);         /* start-up, after kmalloc's caches: the arena's id */
void qs_slob_bad_free(qslab_cache *expected, struct qs_slab *s, const void *p);
/* ... as `what` ("free", "realloc", "malloc_usable_size", ...) of p */
void qs_slob_bad_pointer(qslab_cache *expected, struct qs_slab *s, const void *p, const char *what);

#pragma GCC visibility pop

#endif /* QSLAB_FRONT_H */
