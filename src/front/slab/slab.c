/*
 * front/slab/slab.c - the SLAB front end, after Linux's mm/slab.c (Manfred
 * Spraul's and Mark Hemment's per-CPU array caches over Jeff Bonwick's
 * slab allocator; the kernel's default until 2.6.23, removed in 6.8).
 *
 * ARRAY CACHES ARE QUEUES.  An owner's array cache (ac->entry[], limit,
 * batchcount) is a LIFO of object pointers, which is what SLQB's queue is:
 * a SLAB cache's owners have queues, served by the same inline fast paths
 * (fastpath.h), with limit = the tunable `limit` and park = limit, so that
 * the free fast path takes any object of the owner's node while the array
 * has room (SLAB's arrays, unlike SLQB's queues, do not care which owner's
 * slab an object came from: every slab is the node's).  Everything else is
 * this file's: the slow paths (the fast paths miss and call the hooks),
 * and the way objects go back to slabs (give_back: queue.c's routing hands
 * SLAB's objects here).
 *
 * SLABS ARE THE NODE'S.  Every slab of a SLAB cache is owned by its node
 * (owner = &node->list), on one of three lists under node->lock: partial
 * and full (node->list) and free (node->slabs_free, state EMPTY).  A slab's
 * free list is an index array (the kernel's freelist_idx_t: 1, 2 or 4
 * bytes per object): entries [inuse, objects) are the free objects' indices;
 * an allocation takes entry inuse++, a free writes entry --inuse.  It lives
 * at the slab's end when the slab's leftover holds it, else in a separate
 * block (the kernel's OFF_SLAB, for objects of 128 bytes and more).  Nothing
 * is needed in a free object in a slab (the kernel's SLAB writes nothing
 * there); qslab keeps one word for its checks: the queues' free stamp while
 * an object is in an array (written when it enters one), the slab mark (an
 * encoded NULL link, which "looks free") while it is free in its slab
 * (written at the slab's birth, as the kernel's SLUB writes its free
 * pointers, and when it goes back), 0 while allocated.  So a free of an
 * object that is free in its slab is found at once where the free loads
 * the word (the slow paths) or, when a CPU's fast path pushed it blindly,
 * by the refill that finds the stamp or 0 on an object its slab says is
 * free; a write into a free object, when its array gives it back (the word
 * must be the stamp), by a refill, or by the shrink that gives its slab
 * back.
 *
 * COLOURING.  The leftover of a slab (what objects and an on-slab index
 * array do not use) shifts each new slab's first object by the next multiple
 * of the colour offset (a cache line, or the alignment), so that the same
 * object of different slabs falls in different cache sets (Bonwick 1994).
 *
 * PER NODE (under node->lock): the slab lists, free_objects (free objects
 * in the node's slabs) and free_limit ((1 + CPUs of the node) * batchcount
 * + objects per slab: empty slabs past it go back at once), and a shared
 * array (shared * batchcount objects) between the owners' arrays and the
 * slabs: a flush puts a batch there if it has room, a refill takes from it
 * first.
 *
 * ALIEN CACHES.  A free of another node's object goes to the freeing
 * owner's alien array for that node (12 objects, as the kernel's), flushed
 * to that node's shared array or slabs when full: an owner holds one per
 * node, the "crossbar" of nodes x owners x caches the seeds worried about.
 *
 * THE REAPER (mm/slab.c cache_reap, every 2 s per CPU): the purger's tick
 * runs it every QS_REAP_MS: per-CPU arrays that no fast path touched since
 * the last reap give back a fifth of their limit (taken from their CPU with
 * a membarrier), alien arrays are drained, shared arrays give back a fifth
 * of their limit, and a fifth of free_limit's worth of free slabs go back.
 * A thread's array is its own: it is drained at the thread's exit, by
 * qslab_trim and by the thread's own shrink.
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
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>

#define ALIEN_LIMIT 12      /* mm/slab.c alloc_alien_cache */
#ifndef QS_REAP_MS /* -D for stress builds */
#define QS_REAP_MS 2000 /* mm/slab.c REAPTIMEOUT_AC */
#endif
#define OFF_SLAB_MIN 128    /* PAGE_SIZE >> 5 */
#define REFILL_MAX 256      /* objects a CPU's refill gathers at once */

/* ---- slab layout ---- */
struct layout {
    unsigned num;        /* objects per slab */
    unsigned ix;         /* bytes per index */
    bool off;            /* index array off the slab */
    size_t colour_space; /* leftover bytes */
};

static unsigned idx_bytes(unsigned num)
{
    return num <= 256 ? 1 : num <= 65536 ? 2 : 4;
}

/* A slab's free-list block: a bitmap of its free objects (qslab's: a free
 * of an object its slab holds free already is found at once, whatever
 * path brought it; the kernel's SLAB keeps one only when debugging), then
 * the index array. */
static inline size_t bm_bytes(unsigned num)
{
    return ((size_t)num + 63) / 64 * 8;
}
static inline size_t meta_bytes(unsigned num, unsigned ix)
{
    return (bm_bytes(num) + (size_t)num * ix + 7) & ~(size_t)7;
}

/* The most objects of `slot` bytes, at most num, that fit in `slab` bytes
 * with their free-list block on the slab.  What they take grows with their
 * number (the index width too), so the answer is found by bisection: the
 * decrement it replaces ran 2.85 million times for a 64 MiB slab (order 14)
 * of 8-byte objects, at every statistics read and free-limit computation. */
static unsigned on_slab_fit(size_t slab, size_t slot, unsigned num)
{
    unsigned lo = 0, hi = num; /* lo fits (0 always does); the answer is in [lo, hi] */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo + 1) / 2;
        if ((size_t)mid * slot + meta_bytes(mid, idx_bytes(mid)) <= slab)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static struct layout layout(const qslab_cache *c, unsigned order)
{
    struct layout L = {0, 1, false, 0};
    size_t slab = qs_slab_bytes(order), slot = c->slot_size;
    unsigned num = (unsigned)(slab / slot);
    if (!num)
        return L;
    unsigned ix = idx_bytes(num);
    size_t left = slab - num * slot;
    if (left >= meta_bytes(num, ix)) { /* the leftover holds it */
        L.num = num;
        L.ix = ix;
        L.colour_space = left - meta_bytes(num, ix);
    } else if (slot >= OFF_SLAB_MIN) {
        L.num = num;
        L.ix = ix;
        L.off = true;
        L.colour_space = left;
    } else {
        num = on_slab_fit(slab, slot, num);
        L.num = num;
        L.ix = idx_bytes(num);
        L.colour_space = slab - (size_t)num * slot - meta_bytes(num, L.ix);
    }
    return L;
}

static unsigned slab_objs_per_slab(const qslab_cache *c, unsigned order)
{
    return layout(c, order).num;
}

/* calculate_slab_order's first fit from order 0, with qslab's waste bound
 * (core/slab.c's order rule): the first order, from the least that holds an
 * object, whose leftover (the colour space) is at most 1/32 of the slab,
 * trying up to four orders above it and no slab past 64 KiB unless the
 * least is longer; else the least wasteful of those.  The kernel's rule
 * (order 0 unless it wastes more than 1/8, then order 1) left a fifth of
 * some slabs unused: 2,176-byte objects three to an 8 KiB slab. */
static unsigned slab_order(const qslab_cache *c)
{
    unsigned first = QS_MAX_ORDER + 1, best = c->min_order;
    size_t best_pm = (size_t)-1;
    for (unsigned order = c->min_order; order <= QS_MAX_ORDER; order++) {
        struct layout L = layout(c, order);
        if (!L.num)
            continue;
        size_t bytes = qs_slab_bytes(order);
        if (first > QS_MAX_ORDER)
            first = order;
        else if (order > first + QS_SLAB_ORDERS_UP || bytes > QS_SLAB_WASTE_MAX_BYTES)
            break;
        if (L.colour_space * QS_SLAB_WASTE_DIV <= bytes)
            return order;
        size_t pm = L.colour_space * 1000 / bytes;
        if (pm < best_pm) {
            best_pm = pm;
            best = order;
        }
    }
    return first > QS_MAX_ORDER ? c->min_order : best;
}

static inline unsigned ix_of(const struct qs_slab *s)
{
    return idx_bytes(s->objects);
}
static inline uint64_t *free_bm(const struct qs_slab *s)
{
    return (uint64_t *)s->freelist;
}
static inline bool bm_test(const struct qs_slab *s, unsigned i)
{
    return free_bm(s)[i / 64] >> (i % 64) & 1;
}
static inline void bm_flip(const struct qs_slab *s, unsigned i)
{
    free_bm(s)[i / 64] ^= (uint64_t)1 << (i % 64);
}
static inline unsigned get_free_idx(const struct qs_slab *s, unsigned i)
{
    const void *a = (const char *)s->freelist + bm_bytes(s->objects);
    switch (ix_of(s)) {
    case 1:
        return ((const uint8_t *)a)[i];
    case 2:
        return ((const uint16_t *)a)[i];
    default:
        return ((const uint32_t *)a)[i];
    }
}
static inline void set_free_idx(struct qs_slab *s, unsigned i, unsigned v)
{
    void *a = (char *)s->freelist + bm_bytes(s->objects);
    switch (ix_of(s)) {
    case 1:
        ((uint8_t *)a)[i] = (uint8_t)v;
        break;
    case 2:
        ((uint16_t *)a)[i] = (uint16_t)v;
        break;
    default:
        ((uint32_t *)a)[i] = v;
    }
}
static inline bool off_slab(const struct qs_slab *s)
{
    return (uintptr_t)s->freelist - (uintptr_t)s->mem >= qs_slab_bytes(s->order);
}
static inline unsigned obj_index(const qslab_cache *c, const struct qs_slab *s, const void *obj)
{
    return (unsigned)(((uintptr_t)obj - (uintptr_t)s->base) / c->slot_size);
}

/* The kernel's free_limit, bounded in bytes at QS_SLAB_FREE_BYTES (ten
 * 32 KiB slabs, what SLUB's min_partial keeps at most): the kernel's rule
 * is for slabs of a few pages, and kept four empty 2 MiB slabs a node for a
 * class of 1 MiB blocks on two CPUs; past it, empty slabs go to the FIFO,
 * under its decay and the retention rule. */
static unsigned free_limit(const qslab_cache *c)
{
    long cpus = qs_os_cpu_possible(); /* nr_cpus_node: the node's share */
    long per_node = cpus / (qs_nr_nodes ? qs_nr_nodes : 1);
    if (per_node < 1)
        per_node = 1;
    unsigned long k = (unsigned long)((1 + per_node) * QS_LOAD(c->slab_batch) +
                                      slab_objs_per_slab(c, QS_LOAD(c->order)));
    if (k * c->slot_size > QS_SLAB_FREE_BYTES)
        k = QS_SLAB_FREE_BYTES / c->slot_size;
    return (unsigned)k;
}

/* A new slab on node n: every object born (constructed) and free, its
 * index array in order (shuffled with `random`), its colour the node's
 * next; not on a list yet.
 * q: whose counters (NULL: the cache's). */
/* Free-list block, bitmap and marks of a slab whose objects are all free
 * (arr: where the block goes); its base and objects set.  The index array
 * is in order, or with `random` in the cache's random order (core/slab.c
 * SLAB_FREELIST_RANDOM; the kernel's shuffle_freelist in cache_init_objs):
 * new slabs and slabs back from the empty FIFO, which plays the page
 * allocator's part, alike. */
static bool slab_word_ok(qslab_cache *c, void *obj);
static void uncount_twice(qslab_cache *c, struct qs_queue *q, unsigned long k);

static void slab_init_free(qslab_cache *c, struct qs_slab *s, void *arr, bool ctor)
{
    unsigned num = s->objects;
    s->inuse = 0;
    s->freelist = arr;
    memset(arr, 0, bm_bytes(num));
    uintptr_t mark = qs_enc(c, NULL);
    bool fifo = s->tail != NULL; /* linked by slabs_to_fifo, in address order */
    s->tail = NULL;
    for (unsigned i = 0; i < num; i++) {
        char *obj = s->base + (size_t)i * c->slot_size;
        set_free_idx(s, i, i);
        if (unlikely(fifo) && *qs_link(c, obj) != qs_enc(c, i + 1 < num ? obj + c->slot_size : NULL)) {
            /* not as the FIFO left it: freed again while there (pushed
             * blindly: an array holds it, or handed it out since) or
             * written after its free.  Reported, in use for good or
             * until its array entry comes home; the entries below
             * s->inuse are the objects in use */
            slab_word_ok(c, obj);
            set_free_idx(s, i, get_free_idx(s, s->inuse));
            set_free_idx(s, s->inuse++, i);
            uncount_twice(c, NULL, 1); /* counted as allocated (see to_node) */
            continue;
        }
        bm_flip(s, i); /* free */
        if (ctor && c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = mark;
    }
    if (unlikely(qs_slab_random(c)) && !s->inuse) { /* the kernel's shuffle_freelist */
        struct qs_shuffle sh;
        qs_shuffle_start(c, &sh, num);
        for (unsigned i = 0; i < num; i++)
            set_free_idx(s, i, qs_shuffle_next(&sh));
    }
}

/* An empty slab of n's FIFO (src/core/node.c), back as a SLAB slab: the same
 * objects at the same places (constructed still: nothing wrote into them
 * but their link words), a new free-list block.  NULL: none. */
static struct qs_slab *slab_from_fifo(qslab_cache *c, struct qs_node *n)
{
    struct qs_slab *s = qs_node_take_empty(n);
    if (!s)
        return NULL;
    struct layout L = layout(c, s->order);
    void *arr = L.off ? qs_meta_alloc(meta_bytes(L.num, L.ix))
                      : s->mem + qs_slab_bytes(s->order) - meta_bytes(L.num, L.ix);
    if (!arr || L.num != s->objects) { /* ENOMEM: back to the FIFO */
        if (arr && L.off)
            qs_meta_free(arr, meta_bytes(L.num, L.ix));
        s->next = NULL;
        qs_node_put_empty(c, NULL, n, s);
        return NULL;
    }
    slab_init_free(c, s, arr, false);
    return s;
}

/* Empty slabs past free_limit (the kernel's slab_destroy to the page
 * allocator): to the node's empty-slab FIFO, which plays the page
 * allocator's part here (it keeps them for empty_decay_ms, then gives them
 * back: a page fault costs far more in user space than a page allocation
 * in the kernel).  The FIFO's view: objects linked through their words
 * (node.c, validate.c), the free-list block given back. */
static bool slab_leaving_ok(qslab_cache *c, struct qs_queue *q, struct qs_slab *s);

static void slabs_to_fifo(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    while (list) {
        struct qs_slab *s = list, *next = s->next;
        if (unlikely(!slab_leaving_ok(c, q, s))) { /* it stays */
            list = next;
            continue;
        }
        if (off_slab(s))
            qs_meta_free(s->freelist, meta_bytes(s->objects, ix_of(s)));
        char *first = s->base, *last = s->base + (size_t)(s->objects - 1) * c->slot_size;
        for (char *obj = first; obj < last; obj += c->slot_size)
            *qs_link(c, obj) = qs_enc(c, obj + c->slot_size);
        *qs_link(c, last) = qs_enc(c, NULL);
        s->freelist = first;
        s->tail = last;
        s->inuse = 0;
        s->next = NULL;
        qs_node_put_empty(c, q, &c->nodes[s->node], s);
        list = next;
    }
}

/* A slab with free objects for node n: an empty one of the FIFO, or a new
 * one, whose objects are then zero but for their word if *zero. */
static struct qs_slab *slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_node *n, bool *zero)
{
    *zero = false;
    struct qs_slab *f = slab_from_fifo(c, n);
    if (f)
        return f;
    unsigned order = QS_LOAD(c->order);
    struct layout L = layout(c, order);
    if (!L.num) {
        errno = ENOMEM;
        return NULL;
    }
    struct qs_slab *s = qs_page_alloc_slab(n->id, order);
    if (!s)
        return NULL;
    void *arr;
    if (L.off) {
        if (!(arr = qs_meta_alloc(meta_bytes(L.num, L.ix)))) {
            qs_page_free_slab(s);
            errno = ENOMEM;
            return NULL;
        }
    } else {
        arr = s->mem + qs_slab_bytes(order) - meta_bytes(L.num, L.ix);
    }
    size_t colour_off = c->align > QS_CACHELINE ? c->align : QS_CACHELINE;
    size_t ncolours = L.colour_space / colour_off + 1;
    uint32_t k = __atomic_fetch_add(&n->colour_next, 1, __ATOMIC_RELAXED);
    s->base = s->mem + (k % ncolours) * colour_off;
    *zero = qs_slab_born_zero(c, s);
    s->objects = L.num;
    s->recip = ~(uint64_t)0 / c->slot_size + 1;
    s->cache_id = c->id;
    s->tail = NULL; /* not a FIFO slab's (slab_init_free) */
    slab_init_free(c, s, arr, true);
    qs_slab_set_owner(s, &n->list);
    __atomic_store_n(&s->span, L.num * c->slot_size, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
    qs_stat(c, q, QS_NEW_SLAB, 1);
    qs_stat(c, q, QS_NEW_OBJS, L.num);
    return s;
}

/* bytes this thread gave back (shrink and trim report their difference:
 * slabs go back from several places on the way, free_limit's among them) */
static __thread size_t released;

/* The kernel's slab_destroy, for a ->next list: each slab's free-list
 * block and counts, then the page layer (adjacent slabs: one madvise);
 * a destroy's (`all`) go onto *all, for the shared destroy. */
static void release_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *list, struct qs_slab **all)
{
    for (struct qs_slab *s = list; s; s = s->next) {
        unsigned objs = s->objects;
        if (off_slab(s))
            qs_meta_free(s->freelist, meta_bytes(objs, ix_of(s)));
        s->freelist = NULL;
        qs_stat(c, q, QS_FREE_SLAB, 1);
        qs_stat(c, q, QS_FREE_OBJS, objs);
    }
    if (all)
        qs_slabs_gather(all, list);
    else
        released += qs_page_free_slabs(list);
}

/* the node's free slabs (doubly linked, n->lock) */
static void free_add(struct qs_node *n, struct qs_slab *s)
{
    __atomic_store_n(&s->state, (uint8_t)QS_SLAB_EMPTY, __ATOMIC_RELAXED);
    s->prev = NULL;
    s->next = n->slabs_free;
    if (s->next)
        s->next->prev = s;
    n->slabs_free = s;
    QS_STORE(n->nr_free_slabs, n->nr_free_slabs + 1);
}
static void free_del(struct qs_node *n, struct qs_slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        n->slabs_free = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    QS_STORE(n->nr_free_slabs, n->nr_free_slabs - 1);
}

/* ---- objects to and from slabs (n->lock held) ---- */

/* The word of a free object in a slab: the slab mark; the stamp (in an
 * array too) or 0 (handed out from an array meanwhile): freed twice; else
 * overwritten.  Reports and returns false for the last ones. */
static bool slab_word_ok(qslab_cache *c, void *obj)
{
    uintptr_t w = *qs_link(c, obj);
    if (likely(w == qs_enc(c, NULL)))
        return true;
    if (w == QS_STAMP(c->secret) || w == 0)
        qs_fatal("double free of %p in cache %s (found before it was handed out again)", obj,
                 c->name);
    else
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)",
                 c->name, obj);
    return false;
}

/* Take the second frees out of the counts: through q (the caller's array),
 * else the cache's slow frees (a caller without an array counts its frees
 * there: free_unowned). */
static void uncount_twice(qslab_cache *c, struct qs_queue *q, unsigned long k)
{
    if (q)
        qs_uncount_frees(c, q, k);
    else if (k)
        __atomic_fetch_sub(&c->orphan_stat[QS_FREE_SLOW], k, __ATOMIC_RELAXED);
}

/* Slab s, every object free in its bitmap, is leaving n's lists (to the
 * FIFO, or back to the page layer): each object's word must be the slab
 * mark.  One that is not is in use after all: freed twice, its second free
 * pushed blindly by a CPU's fast path while its slab held it free, so an
 * array holds it (the stamp) or handed it out since (0, or what the
 * program wrote); or written after its free.  Each is reported and marked
 * in use in its slab (an array entry of it then comes home as any object's
 * does, unreported), and the slab stays, partial, on n's list: false.  The
 * caller holds no lock. */
static bool slab_leaving_ok(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    uintptr_t mark = qs_enc(c, NULL);
    unsigned long twice = 0;
    unsigned bad = 0;
    for (unsigned i = 0; i < s->objects; i++) {
        void *obj = s->base + (size_t)i * c->slot_size;
        uintptr_t w = *qs_link(c, obj);
        if (likely(w == mark))
            continue;
        slab_word_ok(c, obj); /* reports */
        twice++; /* every object left alone counts as allocated (see to_node) */
        /* in use: its index from the free entries [inuse, objects) to entry inuse */
        for (unsigned p = s->inuse; p < s->objects; p++) {
            if (get_free_idx(s, p) == i) {
                set_free_idx(s, p, get_free_idx(s, s->inuse));
                set_free_idx(s, s->inuse, i);
                break;
            }
        }
        s->inuse++;
        bm_flip(s, i);
        bad++;
    }
    if (!bad)
        return true;
    uncount_twice(c, q, twice);
    struct qs_node *n = &c->nodes[s->node];
    qs_lock_acquire(&n->lock);
    n->free_objects += s->objects - s->inuse;
    qs_list_add(&n->list, s, s->inuse == s->objects ? QS_SLAB_FULL : QS_SLAB_PARTIAL);
    qs_lock_release(&n->lock);
    return false;
}

/* Take up to want objects of node n's slabs into dst, each given the free
 * stamp (it enters an array): partial slabs first, then free ones.  An
 * object whose word is wrong is reported and not taken (it stays in use
 * from its slab's side: an array holds it already, or it is lost); *twice
 * counts those freed twice (their second free leaves the counts). */
static unsigned take_locked(qslab_cache *c, struct qs_node *n, void **dst, unsigned want,
                            unsigned *twice)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned got = 0;
    while (got < want) {
        struct qs_slab *s = n->list.partial;
        if (!s) {
            if (!(s = n->slabs_free))
                break;
            free_del(n, s);
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
        }
        while (s->inuse < s->objects && got < want) {
            unsigned idx = get_free_idx(s, s->inuse++);
            void *obj = s->base + (size_t)idx * c->slot_size;
            bm_flip(s, idx); /* in use */
            n->free_objects--;
            if (unlikely(!slab_word_ok(c, obj))) {
                /* held elsewhere too (the stamp, or 0: handed out from an
                 * array), or written after its free or by the program that
                 * got it from an array: reported, never handed out while
                 * someone may hold it, in use for good from its slab's
                 * side and counted as allocated (see to_node) */
                ++*twice;
                continue;
            }
            *qs_link(c, obj) = stamp;
            dst[got++] = obj;
        }
        if (s->inuse == s->objects) {
            qs_list_del(&n->list, s);
            qs_list_add(&n->list, s, QS_SLAB_FULL);
        }
    }
    return got;
}

/* Objects of node n back to their slabs (the kernel's free_block); empty
 * slabs past free_limit onto *release.  An object its slab holds free
 * already (freed twice, or never handed out: pushed by a CPU's fast path,
 * which does not look) is left alone and put in twice[] (up to 8; counted
 * in *ntwice) for the caller to report once the lock is released. */
static void free_block_locked(qslab_cache *c, struct qs_node *n, void *const *objs, unsigned long k,
                              struct qs_slab **release, void **twice, unsigned *ntwice)
{
    uintptr_t mark = qs_enc(c, NULL);
    for (unsigned long i = 0; i < k; i++) {
        struct qs_slab *s = qs_slab_lookup(objs[i]);
        /* an array holds an object its slab counts in use, so its slab is
         * one of n's; one that went to the FIFO (linked through its
         * objects: tail set) or elsewhere since was empty: this entry is
         * a second free, pushed blindly */
        if (unlikely(!s || s->cache != c || s->tail != NULL)) {
            if (*ntwice < 8)
                twice[*ntwice] = objs[i];
            ++*ntwice;
            if (s && s->cache == c && s->tail != NULL && &c->nodes[s->node] == n) {
                /* on n's FIFO (under n's lock), linked in address order:
                 * its link again, which the push overwrote, so that the
                 * slab's next refill does not report it a second time
                 * (fuzz bug 11) */
                char *o = s->base + (size_t)obj_index(c, s, objs[i]) * c->slot_size;
                *qs_link(c, o) = qs_enc(c, o + c->slot_size < s->base + s->span ? o + c->slot_size : NULL);
            }
            continue;
        }
        unsigned idx = obj_index(c, s, objs[i]);
        if (unlikely(bm_test(s, idx))) {
            if (*ntwice < 8)
                twice[*ntwice] = objs[i];
            ++*ntwice;
            *qs_link(c, objs[i]) = mark; /* free in its slab: its word again */
            continue;
        }
        bm_flip(s, idx);
        bool was_full = s->inuse == s->objects;
        *qs_link(c, objs[i]) = mark;
        set_free_idx(s, --s->inuse, idx);
        n->free_objects++;
        if (s->inuse == 0) {
            qs_list_del(&n->list, s);
            free_add(n, s);
        } else if (was_full) {
            qs_list_del(&n->list, s);
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
        }
    }
    while (n->free_objects > n->free_limit && n->slabs_free) {
        struct qs_slab *s = n->slabs_free;
        free_del(n, s);
        n->free_objects -= s->objects;
        s->next = *release;
        *release = s;
    }
}

/* Give objects (all of node n) to n's shared array while it has room, the
 * rest to their slabs (the kernel's cache_flusharray, and the alien
 * drain's __drain_alien_cache). */
static void to_node_locked(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void *const *objs,
                           unsigned long k, bool shared_first)
{
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    if (shared_first && n->shared) {
        unsigned long room = n->shared_limit - n->shared_avail;
        unsigned long m = room < k ? room : k;
        memcpy(n->shared + n->shared_avail, objs, m * sizeof(void *));
        n->shared_avail += (uint32_t)m;
        objs += m;
        k -= m;
    }
    void *twice[8];
    unsigned ntwice = 0;
    if (k) {
        free_block_locked(c, n, objs, k, &rel, twice, &ntwice);
        qs_stat(c, q, QS_NODE_FREE, k - ntwice);
    }
    bool kept = QS_LOAD(n->nr_free_slabs) != 0;
    qs_lock_release(&n->lock);
    slabs_to_fifo(c, q, rel); /* past free_limit */
    if (kept) /* the reaper gives free slabs back over time (node.c starts it) */
        qs_node_purger_want();
    if (unlikely(ntwice)) {
        for (unsigned i = 0; i < ntwice && i < 8; i++)
            qs_fatal("double free of %p in cache %s (found as it went back to its slab)", twice[i],
                     c->name);
        uncount_twice(c, q, ntwice); /* the second frees were counted as frees */
    }
}

/* The same, each object's word checked first (it comes from an array: the
 * stamp; else reported as queue.c does, and left out; a second free leaves
 * the counts). */
static void to_node(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void *const *objs,
                    unsigned long k, bool shared_first)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned long i = 0, twice = 0;
    while (i < k && *qs_link(c, objs[i]) == stamp)
        i++;
    if (i == k) { /* the common case: all of them */
        to_node_locked(c, q, n, objs, k, shared_first);
        return;
    }
    void *buf[64];
    unsigned m = 0;
    for (i = 0; i < k; i++) {
        if (likely(*qs_link(c, objs[i]) == stamp)) {
            buf[m++] = objs[i];
        } else {
            /* 0: handed out since from its other entry; anything else:
             * written after its free, or handed out and written by the
             * program: reported and left alone, and counted as allocated
             * (its second free leaves the counts), so that the statistics
             * and the slabs agree on an object that stays in use */
            qs_report_unstamped(c, objs[i]);
            twice++;
        }
        /* else written after its free, or freed twice and handed out
         * from its other entry since (the program wrote it): reported,
         * lost for good (in use from its slab's side), never handed out
         * while someone may hold it */
        if (m == 64 || (i + 1 == k && m)) {
            to_node_locked(c, q, n, buf, m, shared_first);
            m = 0;
        }
    }
    uncount_twice(c, q, twice);
}

/* queue.c's routing of a queue's objects (flush, shrink, exit): to their
 * slabs, node by node (the kernel's free_block from drain_array). */
static void slab_give_back(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long k)
{
    unsigned long i = 0;
    while (i < k) {
        int node = qs_slab_lookup(objs[i])->node;
        unsigned long j = i + 1;
        while (j < k && qs_slab_lookup(objs[j])->node == node)
            j++;
        to_node(c, q, &c->nodes[node], objs + i, j - i, false);
        i = j;
    }
}

/* Copy m objects of the shared array (src) into dst, each word checked: a
 * flush left the stamp there, untouched since, unless the object was freed
 * twice and its other entry, still in an array, was handed out meanwhile
 * (the second free is pushed last, so it leaves first, in the top batch),
 * so that the program owns it now (0, or what it wrote there).  Such an
 * entry is dropped and put in bad[] (up to 8; counted in *nbad) for the
 * caller to report once n->lock is released.  A refill hands its last
 * object out unchecked (qs_percpu_refilled, slab_alloc_single), so this is
 * the last look before the object would be handed out twice.  Returns the
 * objects kept. */
static unsigned claim_shared(qslab_cache *c, void **dst, void *const *src, unsigned m, void **bad,
                             unsigned *nbad)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned got = 0;
    for (unsigned i = 0; i < m; i++) {
        if (likely(*qs_link(c, src[i]) == stamp))
            dst[got++] = src[i];
        else if ((*nbad)++ < 8)
            bad[*nbad - 1] = src[i];
    }
    return got;
}

/* Fill dst with up to want objects for an owner of node n: the shared
 * array first, then slabs, then a new slab (cache_alloc_refill).  fresh
 * (one object only): set when it is a new slab's, zero but for its word
 * (calloc need not clear it). */
static unsigned gather(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void **dst, unsigned want,
                       bool *fresh)
{
    unsigned got = 0, twice = 0;
    qs_stat(c, q, QS_REFILL, 1);
    for (;;) {
        void *bad[8];
        unsigned nbad = 0;
        qs_lock_acquire(&n->lock);
        if (n->shared_avail && !got) {
            unsigned m = n->shared_avail < want ? n->shared_avail : want;
            n->shared_avail -= m;
            got = claim_shared(c, dst, n->shared + n->shared_avail, m, bad, &nbad);
            qs_stat(c, q, QS_CLAIM, 1);
        }
        got += take_locked(c, n, dst + got, want - got, &twice);
        qs_lock_release(&n->lock);
        for (unsigned i = 0; i < nbad && i < 8; i++)
            qs_report_unstamped(c, bad[i]); /* left alone: counted as allocated (see to_node) */
        /* second frees counted as frees: uncounted (a fast free counts in
         * the array, an unowned one in the orphan counts: qs_uncount_frees) */
        qs_uncount_frees(c, q, twice + nbad);
        twice = 0;
        if (got)
            return got;
        bool zero;
        struct qs_slab *s = slab_grow(c, q, n, &zero);
        if (!s)
            return 0;
        qs_lock_acquire(&n->lock);
        if (fresh && zero && want == 1) {
            /* its first object is ours: the slab goes on the partial list,
             * whose head take_locked takes from while we hold the lock */
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
            n->free_objects += s->objects;
            got = take_locked(c, n, dst, 1, &twice);
            qs_lock_release(&n->lock);
            *fresh = got != 0;
            return got;
        }
        if (likely(!s->inuse)) /* a FIFO slab may keep objects in use (slab_from_fifo) */
            free_add(n, s);
        else
            qs_list_add(&n->list, s, s->inuse == s->objects ? QS_SLAB_FULL : QS_SLAB_PARTIAL);
        n->free_objects += s->objects - s->inuse;
        qs_lock_release(&n->lock);
    }
}

/* ---- alien caches ---- */
static void **alien_of(struct qs_queue *q, int node)
{
    if (!q->alien) {
        size_t bytes = sizeof(void *) * (ALIEN_LIMIT + 1) * (size_t)qs_nr_nodes;
        if (!(q->alien = qs_meta_alloc(bytes)))
            return NULL;
    }
    return q->alien + (size_t)node * (ALIEN_LIMIT + 1);
}

static void alien_drain_one(qslab_cache *c, struct qs_queue *q, int node)
{
    void **a = q->alien + (size_t)node * (ALIEN_LIMIT + 1);
    uintptr_t k = (uintptr_t)a[0];
    if (!k)
        return;
    a[0] = 0;
    qs_stat(c, q, QS_REMOTE_BATCH, 1);
    to_node(c, q, &c->nodes[node], a + 1, k, true);
}

static void alien_drain(qslab_cache *c, struct qs_queue *q)
{
    if (q->alien)
        for (int i = 0; i < qs_nr_nodes; i++)
            alien_drain_one(c, q, i);
}

/* obj of another node than q's: its alien array (the caller owns q) */
static void alien_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    void **a = alien_of(q, s->node);
    qs_stat(c, q, QS_FREE_SLOW, 1);
    if (!a) { /* ENOMEM: straight home */
        to_node(c, q, &c->nodes[s->node], &obj, 1, true);
        return;
    }
    qs_stat(c, q, QS_REMOTE_FREE, 1);
    if ((uintptr_t)a[0] >= ALIEN_LIMIT)
        alien_drain_one(c, q, s->node);
    *qs_link(c, obj) = QS_STAMP(c->secret);
    uintptr_t k = (uintptr_t)a[0];
    a[1 + k] = obj;
    a[0] = (void *)(k + 1);
}

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

/* ---- the owners' slow paths ---- */

/* A free by a caller without an array: straight to its node */
static void free_unowned(qslab_cache *c, struct qs_slab *s, void *obj)
{
    *qs_link(c, obj) = QS_STAMP(c->secret);
    qs_stat(c, NULL, QS_FREE_SLOW, 1);
    to_node(c, NULL, &c->nodes[s->node], &obj, 1, true);
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
    to_node(c, q, &c->nodes[q->node], q->slots, b, true);
    memmove(q->slots, q->slots + b, (size_t)(nr - b) * sizeof(void *));
    qs_queue_nr_set(q, nr - b);
}

static void *slab_alloc_single(qslab_cache *c, struct qs_queue *q, int node)
{
    void *obj;
    bool fresh = false;
    if (!gather(c, q, &c->nodes[node], &obj, 1, &fresh))
        return NULL;
    *qs_link(c, obj) = 0;
    qs_self.last_word = fresh ? QS_FRESH_WORD(c->secret) : 0;
    qs_stat(c, q, QS_ALLOC_SLOW, 1);
    qs_stat(c, q, QS_NODE_ALLOC, 1);
    return obj;
}

static void *th_alloc(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!q && !(q = qs_queue_attach(c)))
        return slab_alloc_single(c, NULL, qs_self.node); /* an exited thread */
    for (;;) {
        if (!QS_TOP_NR(q->top)) {
            unsigned want = QS_LOAD(c->slab_batch);
            if (!qs_queue_reserve(q, want) && !q->cap) {
                errno = ENOMEM;
                return NULL;
            }
            unsigned room = q->cap - QS_TOP_NR(q->top);
            if (want > room)
                want = room;
            unsigned got = gather(c, q, &c->nodes[q->node], q->slots, want, NULL);
            if (!got)
                return NULL;
            qs_queue_nr_set(q, got);
        }
        void *obj = qs_queue_pop(c, q, QS_ALLOC_SLOW);
        if (obj)
            return obj;
    }
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
        alien_free(c, q, s, obj);
        return;
    }
    /* the limit is the owner's to raise (as its slots grow) and tune's to
     * lower (relaxed both): an array over it (a lowered limit) flushes
     * batches until it is below; park follows it (owner.c) */
    uint64_t t = q->top;
    if (QS_LOAD(q->limit) < l && QS_TOP_NR(t) >= QS_LOAD(q->limit) && qs_queue_reserve(q, 1)) {
        QS_STORE(q->limit, l < q->cap ? l : q->cap);
        QS_STORE(q->park, QS_LOAD(q->limit));
    }
    while (QS_TOP_NR(t) >= QS_LOAD(q->limit) && QS_TOP_NR(t)) {
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
        unsigned want = QS_LOAD(c->slab_batch);
        if (want > REFILL_MAX)
            want = REFILL_MAX;
        unsigned n = gather(c, q, &c->nodes[q->node], buf, want, NULL);
        if (!n) {
            qs_lock_release(&q->lock);
            return NULL;
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
            alien_free(c, q, s, obj);
            qs_lock_release(&q->lock);
            return;
        }
        if (QS_TOP_NR(QS_LOAD(q->top)) >= lim || !qs_percpu_reserve(q, 1)) {
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
            to_node(c, q, &c->nodes[q->node], buf, (unsigned)k, true);
        }
        uint32_t ql = lim < q->cap ? lim : q->cap;
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
    if (unlikely(qs_one_per_slab(c))) { /* no array keeps such a block (internal.h) */
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
    void *obj = qs_alloc_fast(c);
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

/* Drain an owner's array (all of it, or up to n from its top), its alien
 * arrays: the caller owns q (a thread; a CPU's queue taken from its CPU). */
static void drain_owner(qslab_cache *c, struct qs_queue *q, unsigned n)
{
    qs_queue_flush(c, q, n); /* queue.c: routed here by give_back */
    alien_drain(c, q);
}

static void drain_shared(qslab_cache *c, struct qs_node *n, unsigned max)
{
    void *buf[REFILL_MAX];
    for (;;) {
        qs_lock_acquire(&n->lock);
        unsigned k = n->shared_avail < max ? n->shared_avail : max;
        if (k > REFILL_MAX)
            k = REFILL_MAX;
        if (!k) {
            qs_lock_release(&n->lock);
            return;
        }
        n->shared_avail -= k;
        memcpy(buf, n->shared + n->shared_avail, k * sizeof(void *));
        qs_lock_release(&n->lock);
        to_node(c, NULL, n, buf, k, false); /* words checked */
        max -= k;
        if (!max)
            return;
    }
}

/* up to max free slabs of n back (drain_freelist), each object's word
 * checked first (slab_leaving_ok), by the reaper too.  The check is not
 * only the last look for a write after free: a second free that a CPU's
 * fast path pushed blindly while the slab held the object free leaves an
 * array entry into the slab.  Given back unchecked, the slab's memory
 * could become a new slab while that entry waits, and the entry would then
 * hand out an object that the new slab's free list hands out too (the
 * FIFO's twin of this is src/core/node.c fifo_whole; both are tested by
 * tests/unit/empty_slab_entry.c).  It reads one word per object of slabs
 * about to go. */
static void drain_free(qslab_cache *c, struct qs_node *n, unsigned long max)
{
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    while (max-- && n->slabs_free) {
        struct qs_slab *s = n->slabs_free;
        free_del(n, s);
        n->free_objects -= s->objects;
        s->next = rel;
        rel = s;
    }
    qs_lock_release(&n->lock);
    struct qs_slab *go = NULL;
    while (rel) { /* a slab with an object in use after all stays (slab_leaving_ok) */
        struct qs_slab *s = rel;
        rel = s->next;
        if (slab_leaving_ok(c, NULL, s)) {
            s->next = go;
            go = s;
        }
    }
    release_list(c, NULL, go, NULL);
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
                alien_drain(c, q);
            }
            q->idle_top = QS_LOAD(q->top);
        } else {
            alien_drain(c, q); /* the kernel drains aliens at every reap */
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
        drain_shared(c, &c->nodes[i], ~0u);
        drain_free(c, &c->nodes[i], ~0ul);
        released += qs_node_shrink(c, NULL, &c->nodes[i]); /* and the FIFO's */
    }
}

static size_t slab_shrink(qslab_cache *c)
{
    size_t before = released;
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
    return released - before;
}

/* The purger's tick: the reaper every QS_REAP_MS; trim (all): everything. */
static uint64_t last_reap;
static size_t slab_sweep(bool all)
{
    uint64_t now = qs_os_now_ms();
    if (!all && now - __atomic_load_n(&last_reap, __ATOMIC_RELAXED) < QS_REAP_MS)
        return 0;
    __atomic_store_n(&last_reap, now, __ATOMIC_RELAXED);
    size_t before = released;
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
        unsigned objs = slab_objs_per_slab(c, QS_LOAD(c->order));
        for (int i = 0; i < qs_nr_nodes; i++) {
            struct qs_node *n = &c->nodes[i];
            if (n->shared)
                drain_shared(c, n, fifth);
            unsigned long fl = QS_LOAD(n->free_limit);
            drain_free(c, n, (fl + 5 * objs - 1) / (5 * (objs ? objs : 1)));
        }
    }
    qs_lock_release(&qs_global);
    return released - before;
}

static void slab_retire(qslab_cache *c, struct qs_queue *q)
{
    alien_drain(c, q); /* the array itself: queue.c routes it (give_back) */
}

static void slab_destroy_all(qslab_cache *c, struct qs_slab **gone)
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
        release_list(c, NULL, all, gone);
        n->list.partial = n->list.full = n->slabs_free = NULL;
        if (n->shared)
            qs_meta_free(n->shared, sizeof(void *) * n->shared_limit);
        n->shared = NULL;
    }
}

/* limit, batchcount or shared changed (qs_global held): the arrays'
 * limits, each node's shared array (a new one, the old one's objects
 * freed to the slabs) and free_limit. */
static void slab_tuned(qslab_cache *c)
{
    /* while the cache has a debug twin, the arrays take nothing (twin.c) */
    uint32_t lim = qs_slab_array_limit(c);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        QS_STORE(q->hiwater, lim);
        if (QS_LOAD(q->limit) > lim) { /* lowered at once; raised by the owner */
            QS_STORE(q->limit, lim);
            QS_STORE(q->park, lim);
        }
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
        QS_STORE(n->free_limit, free_limit(c));
        qs_lock_release(&n->lock);
        /* the old array's objects to their slabs, each word checked now (not
         * only when it entered the array): an entry whose object was freed
         * twice and handed out since from its other entry belongs to the
         * program, and must be neither written nor freed (fuzz bug 9) */
        if (old_avail)
            to_node(c, NULL, n, old, old_avail, false);
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
    if (__atomic_load_n(&s->span, __ATOMIC_RELAXED) != s->objects * c->slot_size)
        qs_walk_problem(w, "span does not match the objects", s->mem);
    /* the bitmap: exactly the free objects (a word at a time; bits past
     * the last object do not count) */
    unsigned long bits = 0;
    const uint64_t *bm = free_bm(s);
    for (unsigned i = 0; i < s->objects / 64; i++)
        bits += (unsigned long)__builtin_popcountll(bm[i]);
    if (s->objects % 64)
        bits += (unsigned long)__builtin_popcountll(bm[s->objects / 64] &
                                                    (((uint64_t)1 << (s->objects % 64)) - 1));
    if (bits != s->objects - s->inuse)
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

static void slab_validate(qslab_cache *c, struct qs_walk *w)
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

const struct qs_front qs_front_slab = {
    .name = "slab",
    .what = "per-owner arrays, a shared array and alien arrays per node (SLAB)",
    .alloc = slab_alloc,
    .free = slab_free,
    .shrink = slab_shrink,
    .sweep = slab_sweep,
    .validate = slab_validate,
    .retire = slab_retire,
    .destroy = slab_destroy_all,
    .order = slab_order,
    .own_node_lists = true,
    .queues = true,
    .give_back = slab_give_back,
    .objs_per_slab = slab_objs_per_slab,
    .tuned = slab_tuned,
};
