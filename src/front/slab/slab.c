/*
 * front/slab/slab.c - the SLAB front end, after Linux's mm/slab.c (Manfred
 * Spraul's and Mark Hemment's per-CPU array caches over Jeff Bonwick's
 * slab allocator; the kernel's default until 2.6.23, removed in 6.8): its
 * entry points (the alloc and free hooks), the owners' array slow paths
 * (a thread's array, a CPU's), the double-free check of a free that finds
 * the free stamp, and the front end's table.  The front end's overview is
 * here; each of the other files says what it holds (FILES, below).
 *
 * ARRAY CACHES ARE QUEUES.  An owner's array cache (ac->entry[], limit,
 * batchcount) is a LIFO of object pointers, which is what SLQB's queue is:
 * a SLAB cache's owners have queues, served by the same inline fast paths
 * (slqb/fast.h), with limit = its grant (array_grow: at most the tunable
 * `limit`) and park = limit, so that the free fast path takes any object
 * of the owner's node while the array has room (SLAB's arrays, unlike
 * SLQB's queues, do not care which owner's slab an object came from: every
 * slab is the node's); a CPU's array names its node's list as its own
 * (q->own), so that the per-CPU free section pushes such an object as
 * SLQB's pushes one of its own slabs, below the limit with no other test.
 * Everything else is
 * this folder's: the slow paths (the fast paths miss and call the hooks),
 * and the way objects go back to slabs (give_back: queue.c's routing hands
 * SLAB's objects here).
 *
 * PER NODE (under node->lock): the slab lists, free_objects (free objects
 * in the node's slabs) and free_limit ((1 + CPUs of the node) * batchcount
 * + objects per slab: empty slabs past it go back at once), and a shared
 * array (shared * batchcount objects) between the owners' arrays and the
 * slabs: a flush puts a batch there if it has room, a refill takes from it
 * first.
 *
 * LOCKS.  A CPU's queue lock (its slow paths, the reaper), then at most one
 * node lock; never two node locks at once (alien drains lock the target
 * node alone).  Counters follow SLQB's queue rules (a CPU's under its lock,
 * free_fast derived from nr): refill (a refill), claim (a refill served by
 * the shared array), flush (a flush of a batch), remote_free (frees of
 * other nodes' objects, to alien arrays), remote_batch (alien arrays
 * drained), node_free (objects freed to slabs).
 *
 * DIFFERENCES FROM THE KERNEL'S.  A CPU's array flushes its top batch (an
 * rseq section can take the top in one commit; the kernel flushes the
 * oldest, bottom batch and slides the rest down); a thread's array flushes
 * its bottom as the kernel does.  Arrays are SLQB's queues (640 bytes of
 * owner state per owner and cache, the slots apart).  The refill writes the
 * free stamp into the objects it takes.  The reaper's "touched" is a queue
 * whose top did not move since the last reap.
 *
 * FILES.  One a responsibility, from the owners down to the slabs; a
 * function one file calls in another is named slabfe_ (declared in slab.h,
 * hidden), the rest are static:
 *   slab.c    this file: the hooks' entry points and the owners' arrays
 *   shared.c  between the arrays and the slabs: refills and flushes through
 *             the node's shared array, the alien arrays
 *   slabs.c   the node's slabs: layout and order, birth, the empty-slab
 *             FIFO, index free lists, objects into and out of slabs
 *   reap.c    the cache-wide hooks: shrink, the reaper (sweep), retire,
 *             destroy, tune, validate
 *   slab.h    what they share: the limits, a slab's free-list block and
 *             the node's free-slab list (inline), the slabfe_ functions
 */
#include "front/slqb/fast.h"
#include "front/front.h"
#include "front/slab/slab.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>

/* ---- double frees ---- */
static bool vec_has(void *const *v, unsigned long n, const void *obj)
{
    for (unsigned long i = 0; i < n; i++)
        if (v[i] == obj)
            return true;
    return false;
}

/* obj's word is the free stamp: is it free already (in q's array or alien
 * arrays, its node's shared array, or its slab's free indices)? */
static bool double_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    qs_stat(c, q, QS_DOUBLE_FREE_CHECK, 1);
    bool found = false;
    if (q) {
        found = vec_has(q->slots, QS_TOP_NR(QS_LOAD(q->top)), obj);
        for (int i = 0; q->alien && !found && i < qs_nr_nodes; i++) {
            void **a = q->alien + (size_t)i * (ALIEN_LIMIT + 1);
            found = vec_has(a + 1, (uintptr_t)a[0], obj);
        }
    }
    if (!found) {
        struct qs_node *n = &c->nodes[s->node];
        unsigned idx = obj_index(c, s, obj);
        qs_lock_acquire(&n->lock);
        found = bm_test(s, idx) || (n->shared && vec_has(n->shared, n->shared_avail, obj));
        qs_lock_release(&n->lock);
    }
    if (found)
        qs_fatal("double free of %p in cache %s", obj, c->name);
    return found;
}

/* ---- the arrays' grants ---- */

/* An array holds at most its grant (q->grant; its limit and park are
 * min(grant, hiwater = the tunable limit, slots)), which starts at 0 when
 * the array is attached (owner.c) and grows at each miss, an allocation
 * that finds the array empty or a free that finds it at its limit, by as
 * much as it has, at least c->fresh (a page's worth of objects, at most
 * four), up to the tunable limit; a refill brings at most the grant.  So
 * an array ends with what its misses show it needs, as SLQB's queues
 * (docs/design.md, "The owner budget"), where every array of the kernel's
 * is `limit` long and refilled `batchcount` at a time: each kmalloc class
 * a program touched a few objects of kept up to a batch of them per CPU.
 * The grant is the array's owner's, like its limit: a thread's, or the
 * holder of a CPU's queue lock; only the slow paths change it, so the fast
 * paths are as they were.  Returns the grant, at most lim. */
__attribute__((noinline)) static uint32_t array_grow(qslab_cache *c, struct qs_queue *q, uint32_t lim)
{
    uint32_t g = q->grant;
    if (g < lim) {
        uint32_t f = QS_LOAD(c->fresh), step = g > f ? g : (f ? f : 1);
        g = step >= lim - g ? lim : g + step;
        QS_STORE(q->grant, g);
        qs_queue_limit_set(q);
        QS_STORE(q->park, QS_LOAD(q->limit));
    }
    return g < lim ? g : lim;
}

/* ---- the owners' slow paths ---- */

/* A free by a caller without an array: straight to its node */
static void free_unowned(qslab_cache *c, struct qs_slab *s, void *obj)
{
    *qs_link(c, obj) = QS_STAMP(c->secret);
    qs_stat(c, NULL, QS_FREE_SLOW, 1);
    slabfe_to_node(c, NULL, &c->nodes[s->node], &obj, 1, true);
}

/* A thread's array is full: its bottom batch to the shared array or the
 * slabs, the rest slid down (cache_flusharray). */
static void th_flusharray(qslab_cache *c, struct qs_queue *q)
{
    unsigned nr = QS_TOP_NR(q->top), b = QS_LOAD(c->slab_batch);
    if (b > nr)
        b = nr;
    if (!b)
        return;
    qs_stat(c, q, QS_FLUSH, 1);
    /* objects of the array are all of q's node (alien ones go elsewhere) */
    slabfe_to_node(c, q, &c->nodes[q->node], q->slots, b, true);
    memmove(q->slots, q->slots + b, (size_t)(nr - b) * sizeof(void *));
    qs_queue_nr_set(q, nr - b);
}

static void *slab_alloc_single(qslab_cache *c, struct qs_queue *q, int node)
{
    void *obj;
    bool fresh = false;
    if (!slabfe_gather(c, q, &c->nodes[node], &obj, 1, &fresh, NULL))
        return NULL;
    *qs_link(c, obj) = 0;
    qs_self.last_word = fresh ? QS_FRESH_WORD(c->secret) : 0;
    qs_stat(c, q, QS_ALLOC_SLOW, 1);
    qs_stat(c, q, QS_NODE_ALLOC, 1);
    return obj;
}

/* calloc's miss (api/kmalloc.h: QS_WORD_CALLOC): a refill that would
 * birth objects from zero memory gives one born bare instead
 * (slabfe_take_locked), which bare_out hands out past the array: a slow
 * pop, counted in moved as qs_percpu_refilled counts the object it hands
 * out (the array's owner: the thread, or the holder of its CPU's lock). */
static inline bool calloc_miss(void)
{
    return qs_self.last_word == QS_WORD_CALLOC;
}

static void *bare_out(qslab_cache *c, struct qs_queue *q, void *obj)
{
    qs_queue_seq_begin(q);
    qs_queue_seq_end(q, 1);
    qs_stat(c, q, QS_ALLOC_SLOW, 1);
    qs_self.last_word = QS_FRESH_WORD(c->secret);
    return obj;
}

static void *th_alloc(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!q && !(q = qs_queue_attach(c)))
        return slab_alloc_single(c, NULL, qs_self.node); /* an exited thread */
    for (;;) {
        if (!QS_TOP_NR(q->top)) { /* a miss */
            uint32_t g = array_grow(c, q, qs_slab_array_limit(c));
            unsigned want = QS_LOAD(c->slab_batch);
            if (want > g)
                want = g ? g : 1;
            if (!qs_queue_reserve(q, want) && !q->cap) {
                errno = ENOMEM;
                return NULL;
            }
            unsigned room = q->cap - QS_TOP_NR(q->top);
            if (want > room)
                want = room;
            bool bare = false;
            unsigned got = slabfe_gather(c, q, &c->nodes[q->node], q->slots, want, NULL,
                                         calloc_miss() ? &bare : NULL);
            if (!got)
                return NULL;
            if (bare)
                return bare_out(c, q, q->slots[0]);
            qs_queue_nr_set(q, got);
        }
        void *obj = qs_queue_pop(c, q, QS_ALLOC_SLOW);
        if (obj)
            return obj;
    }
}

/* A thread's array at its limit: a step more grant, and slots for it
 * (apart, so that th_free's common path stays short).  True if it has room
 * now. */
__attribute__((noinline)) static bool th_grow(qslab_cache *c, struct qs_queue *q, uint32_t l)
{
    unsigned nr = QS_TOP_NR(q->top);
    uint32_t g = array_grow(c, q, l);
    if (g > nr && qs_queue_reserve(q, g - nr)) {
        qs_queue_limit_set(q);
        QS_STORE(q->park, QS_LOAD(q->limit));
    }
    return nr < QS_LOAD(q->limit);
}

static void th_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    struct qs_queue *q = qs_queue_for_free(c); /* queue.c's rule for a thread that only frees */
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && double_free(c, q, s, obj))
        return;
    uint32_t l = qs_slab_array_limit(c);
    if (!q || unlikely(!l)) { /* a debug twin, or one block a slab */
        free_unowned(c, s, obj);
        return;
    }
    if (s->node != q->node) {
        slabfe_alien_free(c, q, s, obj);
        return;
    }
    /* the limit is the owner's to raise (with its grant, as its slots
     * grow) and tune's to lower (relaxed both): an array over it (a
     * lowered limit) flushes batches until it is below; park follows it */
    uint64_t t = q->top;
    while (unlikely(QS_TOP_NR(t) >= QS_LOAD(q->limit))) {
        /* at its limit, a miss: a step more grant, else a batch out */
        if (th_grow(c, q, l) || !QS_TOP_NR(t))
            break;
        th_flusharray(c, q);
        t = q->top;
    }
    qs_queue_push_at(c, q, s, obj, t);
}

#if QS_HAVE_PERCPU
static void *pc_alloc(qslab_cache *c)
{
    void *buf[REFILL_MAX];
    for (;;) {
        struct qs_queue *q = qs_percpu_lock(c);
        if (!q) {
            int cpu = qs_os_rseq_cpu(qs_rseq_off);
            return slab_alloc_single(c, NULL, qs_node_of_cpu(cpu >= 0 ? cpu : qs_os_current_cpu()));
        }
        void *obj;
        int k = qs_percpu_pop_one(c, q, &obj); /* queue.c: SLQB's step */
        if (k != 0) {
            qs_lock_release(&q->lock);
            if (k != 1)
                continue;
            *qs_link(c, obj) = 0;
            return obj;
        }
        /* a miss (the array is empty) */
        uint32_t g = array_grow(c, q, qs_slab_array_limit(c));
        unsigned want = QS_LOAD(c->slab_batch);
        if (want > g)
            want = g ? g : 1;
        if (want > REFILL_MAX)
            want = REFILL_MAX;
        bool bare = false;
        unsigned n = slabfe_gather(c, q, &c->nodes[q->node], buf, want, NULL, calloc_miss() ? &bare : NULL);
        if (!n) {
            qs_lock_release(&q->lock);
            return NULL;
        }
        if (bare) {
            bare_out(c, q, buf[0]);
            qs_lock_release(&q->lock);
            return buf[0];
        }
        return qs_percpu_refilled(c, q, buf, n); /* queue.c: SLQB's step */
    }
}

/* A CPU's array is full (or obj is another node's): its top batch to the
 * shared array or slabs, then the push. */
static void pc_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    void *buf[REFILL_MAX];
    for (;;) {
        struct qs_queue *q = qs_percpu_lock(c);
        if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && double_free(c, q, s, obj)) {
            if (q)
                qs_lock_release(&q->lock);
            return;
        }
        uint32_t lim = qs_slab_array_limit(c);
        if (!q || unlikely(!lim)) { /* a debug twin, or one block a slab */
            if (q)
                qs_lock_release(&q->lock);
            free_unowned(c, s, obj);
            return;
        }
        if (s->node != q->node) {
            slabfe_alien_free(c, q, s, obj);
            qs_lock_release(&q->lock);
            return;
        }
        unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
        uint32_t g = q->grant < lim ? q->grant : lim;
        if (nr >= QS_LOAD(q->limit)) /* a miss */
            g = array_grow(c, q, lim);
        if (nr >= g || !qs_percpu_reserve(q, 1)) {
            unsigned b = QS_LOAD(c->slab_batch);
            if (b > REFILL_MAX)
                b = REFILL_MAX;
            qs_queue_seq_begin(q);
            int k = qs_percpu_pop(q, buf, b);
            qs_queue_seq_end(q, k > 0 ? -k : 0);
            if (k < 0) {
                qs_lock_release(&q->lock);
                continue;
            }
            QS_ADD(q->stat[QS_FLUSH], 1);
            slabfe_to_node(c, q, &c->nodes[q->node], buf, (unsigned)k, true);
        }
        uint32_t ql = g < q->cap ? g : q->cap;
        QS_STORE(q->limit, ql);
        QS_STORE(q->park, ql);
        *qs_link(c, obj) = q->stamp;
        int k = qs_percpu_push(q, &obj, 1, ql); /* a free: nr + 1 counts it */
        qs_lock_release(&q->lock);
        if (k == 1)
            return;
        /* migrated, or the fast path filled it meanwhile: again */
        *qs_link(c, obj) = 0;
    }
}
#endif

/* ---- hooks ---- */

static void slab_free(qslab_cache *c, struct qs_slab *s, void *obj);

static void *slab_alloc_any(qslab_cache *c)
{
    if (unlikely(qs_slab_unarrayed(c))) { /* no array keeps such a block (core/page.h) */
        struct qs_queue *q = qs_queue_of(c); /* a CPU's: its node only (counted unowned) */
        return slab_alloc_single(c, qs_percpu() ? NULL : q, q ? q->node : qs_self.node);
    }
#if QS_HAVE_PERCPU
    if (qs_percpu())
        return pc_alloc(c);
#endif
    return th_alloc(c);
}

static void *slab_alloc(qslab_cache *c, int node)
{
    if (node == QSLAB_NUMA_NO_NODE)
        return slab_alloc_any(c);
    struct qs_queue *q = qs_queue_of(c);
    if (!q)
        q = qs_queue_attach(c);
    if (!q || node != q->node)
        return slab_alloc_single(c, qs_percpu() ? NULL : q, node);
    /* a CPU owner may change before the pop: checked, and given back if
     * the object is of another node (neither counted) */
    void *obj = qs_queue_alloc_fast(c);
    struct qs_slab *s = obj ? qs_slab_lookup(obj) : NULL;
    if (!obj || !s || s->node == node)
        return obj;
    slab_free(c, s, obj);
    qs_uncount_pair(c);
    return slab_alloc_single(c, NULL, node);
}

static void slab_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
#if QS_HAVE_PERCPU
    if (qs_percpu()) {
        pc_free(c, s, obj);
        return;
    }
#endif
    th_free(c, s, obj);
}

/* /proc/slabinfo's tunables columns are SLAB's own */
static void slab_slabinfo_tunables(const qslab_cache *c, unsigned long out[3])
{
    out[0] = QS_LOAD(c->slab_limit);
    out[1] = QS_LOAD(c->slab_batch);
    out[2] = QS_LOAD(c->slab_shared);
}

/* SLAB's `queue_knobs` (front.h): an array's hiwater is the tunable limit
 * (0 while a debug twin takes the allocations, or for objects alone in
 * their slabs: qs_slab_array_limit); its limit and park are min(grant,
 * hiwater, slots): park = limit, so the free fast path takes any object of
 * the owner's node.  A new array gets its slots at once (the kernel's are
 * `limit` long; fewer on ENOMEM, which caps limit); an existing one's limit
 * and park are lowered at once and raised by its owner at its misses
 * (array_grow). */
static void slab_queue_knobs(qslab_cache *c, struct qs_queue *q, bool attach)
{
    uint32_t lim = qs_slab_array_limit(c);
    QS_STORE(q->hiwater, lim);
    /* a CPU's array takes its node's objects as its own in the free
     * section: pushed below the limit, with no other test (slqb/fast.h) */
    if (q->cpu >= 0)
        QS_STORE(q->own, &c->nodes[q->node].list);
    if (attach) {
        if (q->cap < lim)
            qs_queue_reserve(q, lim);
        qs_queue_limit_set(q);
        QS_STORE(q->park, QS_LOAD(q->limit));
    } else if (QS_LOAD(q->limit) > lim) {
        QS_STORE(q->limit, lim);
        QS_STORE(q->park, lim);
    }
}

const struct qs_front qs_front_slab = {
    .name = "slab",
    .what = "per-owner arrays, a shared array and alien arrays per node (SLAB)",
    .alloc = slab_alloc,
    .free_obj = slab_free,
    .shrink = slabfe_slab_shrink,
    .sweep = slabfe_slab_sweep,
    .validate = slabfe_slab_validate,
    .retire = slabfe_slab_retire,
    .destroy = slabfe_slab_destroy_all,
    .order = slabfe_slab_order,
    .own_node_lists = true,
    .own_free_state = true,
    .slab_tail_used = true,
    .queues = true,
    .give_back = slabfe_slab_give_back,
    .objs_per_slab = slabfe_slab_objs_per_slab,
    .tuned = slabfe_slab_tuned,
    .queue_knobs = slab_queue_knobs,
    .slabinfo_tunables = slab_slabinfo_tunables,
};
