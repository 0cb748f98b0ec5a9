/*
 * cache.c - object caches: create, destroy, shrink, the public alloc/free
 * entry points, pointer validation and start-up.
 *
 * OBJECT LAYOUT in a slot of slot_size bytes:
 *   [ object: obj_size bytes ][ link word, constructor caches only ]
 * The link word (see internal.h) sits at offset 0 of a free object, or right
 * after the object when a constructor owns the object's bytes.  The slot is
 * rounded up to the alignment.  A cache with debug flags (red zones, poison,
 * owner tracking: debug/slot.c) has a layout of its own, with the link after the
 * object and its right red zone, and a left red zone before each object;
 * slot_size, link_off and red_left are the only offsets the rest of qslab
 * uses.
 */
#include "observe/control.h"
#include "front/fastpath.h"
#include "front/front.h"
#include "observe/observe.h"
#include "debug/debug.h"
#include "owner/owner.h"
#include "api/kmalloc.h"
#include "api/zero.h"
#include "api/api.h"
#include "observe/stats.h"
#include "observe/tune.h"

#include <errno.h>
#include <string.h>

/* qs_global, the cache list, qs_cache_by_id and qs_initialized, which
 * every layer uses: core/caches.c */

static QS_BSS_APART uint64_t id_bits[QS_MAX_CACHES / 64];

static bool id_alloc(unsigned *id)
{
    for (unsigned w = 0; w < QS_MAX_CACHES / 64; w++) {
        if (~id_bits[w]) {
            unsigned b = (unsigned)__builtin_ctzll(~id_bits[w]);
            id_bits[w] |= 1ULL << b;
            *id = w * 64 + b;
            return true;
        }
    }
    return false;
}

static void id_free(unsigned id)
{
    id_bits[id / 64] &= ~(1ULL << (id % 64));
}

/* Ids 0..n-1 kept for the caches qs_cache_setup is given them for (the
 * kmalloc classes, made on first use: api/kmalloc.c).  Start-up, before
 * any cache takes an id. */
QS_STARTUP void qs_cache_ids_reserve(unsigned n)
{
    qs_lock_acquire(&qs_global);
    for (unsigned id = 0; id < n; id++)
        id_bits[id / 64] |= 1ULL << (id % 64);
    qs_lock_release(&qs_global);
}

/* Per-cache link secrets: one getrandom per process, then splitmix64 over a
 * counter (start-up makes 25 caches; 25 system calls saved). */
static uint64_t cache_secret(void)
{
    static uint64_t seed, counter;
    if (!__atomic_load_n(&seed, __ATOMIC_ACQUIRE))
        __atomic_store_n(&seed, qs_os_random64() | 1, __ATOMIC_RELEASE);
    uint64_t z = __atomic_load_n(&seed, __ATOMIC_ACQUIRE) +
                 0x9e3779b97f4a7c15ULL * __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* debug: the cache's QS_DBG_* flags, or -1 for those its flags and
 * QSLAB_DEBUG give it (a debug twin's are its tunable's: twin.c, through
 * qs_api_hooks.cache_setup, core/hooks.h) */
static QS_STARTUP bool cache_setup_id(qslab_cache *c, const char *name, size_t size, size_t align,
                                      unsigned long flags, void (*ctor)(void *), bool is_kmalloc,
                                      int debug, int want_id)
{
    if (size > qs_slab_bytes(QS_MAX_ORDER)) { /* no slab can hold it */
        errno = EINVAL;
        return false;
    }
    if (align < 8)
        align = 8;
    if (flags & QSLAB_HWCACHE_ALIGN) {
        size_t a = QS_CACHELINE;
        while (size <= a / 2 && a > 8)
            a /= 2;
        if (a > align)
            align = a;
    }
    c->debug = (uint8_t)(debug >= 0 ? (unsigned)debug : qs_debug_flags_for(name, flags));
    size_t link_off, slot;
    for (;;) {
        link_off = ctor ? qs_round_up(size, 8) : 0;
        slot = ctor ? link_off + sizeof(uintptr_t) : size;
        if (slot < sizeof(uintptr_t))
            slot = sizeof(uintptr_t);
        slot = qs_round_up(slot, align);
        c->red_left = 0;
        bool laid = !c->debug || qs_debug_layout(c, size, align, &slot, &link_off);
        if (laid && slot + c->red_left <= qs_slab_bytes(QS_MAX_ORDER) && slot <= UINT32_MAX)
            break;
        /* debugging that QSLAB_DEBUG asks of every cache makes no cache
         * impossible: this one is made with its own flags only (the
         * kernel's slub_debug=O drops them too where they would not fit) */
        unsigned own = qs_debug_flags_own(flags);
        if (debug >= 0 || !c->debug || c->debug == own) {
            errno = EINVAL;
            return false;
        }
        char want[QS_DEBUG_LETTERS_LEN], keep[QS_DEBUG_LETTERS_LEN];
        qs_debug_letters(c->debug, want);
        qs_debug_letters(own, keep);
        qs_warn("cache %s: objects of %u bytes with debug flags %s do not fit in a slab; made "
                "with %s%s", name, size, want, own ? "flags " : "no debug flags", keep);
        c->debug = (uint8_t)own;
    }
    size_t i = 0;
    for (; i < QS_NAME_MAX - 1 && name[i]; i++)
        c->name[i] = name[i];
    c->name[i] = '\0';
    c->obj_size = size;
    c->align = align;
    c->flags = flags;
    c->ctor = ctor;
    c->link_off = (uint32_t)link_off;
    c->slot_size = (uint32_t)slot;
    c->is_kmalloc = is_kmalloc;
    qs_front_set(c, c->debug ? QS_FRONT_DEBUG : qs_front_default);
    /* a zero word must not look free: set the top bit */
    c->secret = (uintptr_t)(cache_secret() | (1ULL << 63));
    c->min_order = qs_slab_min_order(slot + c->red_left, align);
    c->max_order = qs_slab_max_order(slot); /* under QS_MAX_ORDER only for slots under 128 bytes,
                                               whose min_order is 0 */
    c->order = qs_front_order(c, c->front); /* SLUB: its calculate_order */
    qs_tune_defaults(c);
    c->nodes = qs_meta_alloc(sizeof(struct qs_node) * (size_t)qs_nr_nodes);
    if (!c->nodes) {
        errno = ENOMEM;
        return false;
    }
    for (int n = 0; n < qs_nr_nodes; n++)
        qs_node_init(&c->nodes[n], n);
    /* the id first: nothing made after it needs undoing when none is left
     * (reserved, it names no cache until qs_cache_by_id is set below) */
    qs_lock_acquire(&qs_global);
    bool have_id = want_id >= 0 ? (c->id = (unsigned)want_id, true) : id_alloc(&c->id);
    qs_lock_release(&qs_global);
    if (!have_id) {
        qs_meta_free(c->nodes, sizeof(struct qs_node) * (size_t)qs_nr_nodes);
        errno = ENOMEM;
        return false;
    }
    if (qs_front_of(c)->tuned) /* SLAB's shared arrays (nobody sees c yet) */
        qs_front_of(c)->tuned(c);
    qs_lock_acquire(&qs_global);
    qs_observe_begin(); /* the cache list changes (observe.h) */
    qs_observe_cache(c);
    qs_owner_cache_added(c->id);
    __atomic_store_n(&qs_cache_by_id[c->id], c, __ATOMIC_RELEASE);
    /* append, so that slabinfo lists caches in creation order; but a
     * kmalloc class (made on its first use) goes among the classes at the
     * list's head, in order of size, as if all were made at start-up */
    qslab_cache **at = qs_caches_tail;
    if (is_kmalloc && want_id >= 0) {
        at = &qs_caches;
        while (*at && (*at)->is_kmalloc && (*at)->id < c->id) /* (a class's twin: id >= 193) */
            at = &(*at)->next;
    }
    c->next = *at;
    c->pprev = at;
    if (*at)
        (*at)->pprev = &c->next;
    else
        qs_caches_tail = &c->next;
    *at = c;
    if (c->twin_of) { /* a debug twin: after its cache's others (twin.c) */
        qslab_cache **tp = &c->twin_of->twins;
        while (*tp)
            tp = &(*tp)->twin_next;
        c->twin_next = NULL;
        *tp = c;
    }
    qs_observe_end();
    qs_lock_release(&qs_global);
    qs_tune_apply_env(c);
    return true;
}

/* (qs_api_hooks.cache_setup: SLOB's arena, debug twins) */
static QS_STARTUP bool cache_setup(qslab_cache *c, const char *name, size_t size, size_t align,
                                   unsigned long flags, void (*ctor)(void *), bool is_kmalloc, int debug)
{
    return cache_setup_id(c, name, size, align, flags, ctor, is_kmalloc, debug, -1);
}

QS_STARTUP bool qs_cache_setup(qslab_cache *c, const char *name, size_t size, size_t align,
                               unsigned long flags, void (*ctor)(void *), bool is_kmalloc, int id)
{
    return cache_setup_id(c, name, size, align, flags, ctor, is_kmalloc, -1, id);
}

/* The entry points a user's code calls to allocate or free: a direct call
 * of one of them is the user's frame of a debug track (debug/track.c) */
static const uintptr_t entry_points[] = {
    (uintptr_t)&qslab_cache_alloc,  (uintptr_t)&qslab_cache_alloc_node,
    (uintptr_t)&qslab_cache_free,   (uintptr_t)&qslab_malloc,
    (uintptr_t)&qslab_malloc_node,  (uintptr_t)&qslab_calloc,
    (uintptr_t)&qslab_realloc,      (uintptr_t)&qslab_aligned_alloc,
    (uintptr_t)&qslab_free,         (uintptr_t)&qslab_cache_destroy,
};

QS_STARTUP void qs_init_slow(void)
{
    static qs_lock init_lock;
    qs_lock_acquire(&init_lock);
    if (!qs_initialized) {
        /* the calls of the layers below into front, debug, observe and
         * this one (core/hooks.h): before anything that could need them */
        qs_debug_hooks_register();
        qs_observe_hooks_register();
        qs_api_hooks = (struct qs_api_hooks){
            .cache_setup = cache_setup,
            .cache_shrink = qslab_cache_shrink,
            .trim = qslab_trim,
            .defrag = qs_defrag_tick,
            .zero_block = qs_zero_block,
            .kmalloc_fast = qs_kmalloc_fast,
            .kmalloc_make = qs_kmalloc_cache,
            .kmalloc_make_all = qs_kmalloc_make_all,
            .entries = entry_points,
            .nr_entries = sizeof(entry_points) / sizeof(entry_points[0]),
        };
        qs_front_hooks_register();
        qs_node_topology_init();
        qs_owner_kind_init();
        qs_owner_budget_default(); /* before QSLAB_TUNE's owner_budget (the first cache) */
        qs_front_init();
        qs_kmalloc_init();
        qs_tune_env_check(); /* QSLAB_TUNE's and QSLAB_DEBUG's names of kmalloc classes */
        qs_debug_env_check();
        qs_slob_setup();
        qs_stats_init();
        qs_guard_init();
        qs_observe_ready(); /* last: what the root points to is made (observe.h) */
        __atomic_store_n(&qs_initialized, 1, __ATOMIC_RELEASE);
        qs_lock_release(&init_lock);
        /* last, and outside the init lock: pthread_atfork may allocate,
         * which now simply uses qslab */
        qs_fork_init();
        return;
    }
    qs_lock_release(&init_lock);
}

__attribute__((constructor)) static QS_STARTUP void qs_ctor(void)
{
    qs_init();
    /* QSLAB_CONTROL=1: the control channel's thread (control.c), started
     * here and not in qs_init_slow, which may run inside a malloc */
    qs_control_init();
}

__attribute__((destructor)) static QS_STARTUP void qs_dtor(void)
{
    qs_tune_env_unused();
    qs_debug_env_unused();
    qs_stats_at_exit();
}

#define QS_KNOWN_FLAGS                                                                             \
    (QSLAB_HWCACHE_ALIGN | QSLAB_RED_ZONE | QSLAB_POISON | QSLAB_STORE_USER |                      \
     QSLAB_CONSISTENCY_CHECKS | QSLAB_TRACE | QSLAB_DEBUG_REPAIR | QSLAB_QUARANTINE)

QSLAB_EXPORT qslab_cache *qslab_cache_create(const char *name, size_t size, size_t align,
                                             unsigned long flags, void (*ctor)(void *obj))
{
    if (!name || !size || (align & (align - 1)) || align > QS_CHUNK_SIZE / 2 ||
        (flags & ~QS_KNOWN_FLAGS)) {
        errno = EINVAL;
        return NULL;
    }
    qs_init();
    qslab_cache *c = qs_meta_alloc(sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    if (!qs_cache_setup(c, name, size, align, flags, ctor, false, -1)) {
        qs_meta_free(c, sizeof(*c));
        return NULL;
    }
    return c;
}

QSLAB_EXPORT void *qslab_cache_alloc(qslab_cache *c)
{
    return qs_alloc_fast(c);
}

QSLAB_EXPORT void *qslab_cache_alloc_node(qslab_cache *c, int node)
{
    qs_init();
    if (node == QSLAB_NUMA_NO_NODE)
        return qs_alloc_fast(c);
    if (node < 0 || node >= qs_nr_nodes) {
        errno = EINVAL;
        return NULL;
    }
    qslab_cache *t = qs_twin_divert(c);
    if (unlikely(t != NULL)) /* debugging turned on in use (twin.c) */
        return qs_twin_alloc(t, node);
    if (qs_front_of(c)->alloc) /* slow paths of its own: front.h */
        return qs_front_of(c)->alloc(c, node);
    struct qs_queue *q = qs_queue_of(c);
    if (!q)
        q = qs_queue_attach(c); /* NULL for an exited thread: node path */
    if (q && node == q->node) {
        /* a CPU owner may change before the pop (the thread migrates): the
         * object is checked, and given back if it is of another node
         * (neither counted) */
        void *obj = qs_alloc_fast(c);
        struct qs_slab *s = obj ? qs_slab_lookup(obj) : NULL;
        if (!obj || (!s && qslab_object_node(obj) == node) || (s && s->node == node))
            return obj; /* a guarded sample (no slab) on the node too */
        qslab_cache_free(c, obj);
        qs_uncount_pair(c);
        return qs_node_alloc(c, NULL, node);
    }
    /* a CPU's queue counts under its lock: the cache's counters here */
    return qs_node_alloc(c, qs_percpu() ? NULL : q, node);
}

/* Report a pointer that is not an allocated object of `expected` (NULL:
 * of any cache), given to `what` ("free", "realloc", ...): what it is. */
void qs_bad_pointer(qslab_cache *expected, const void *p, const char *what)
{
    const char *want = expected ? expected->name : NULL;
    struct qs_chunk *ch = qs_chunk_of(p);
    if (!ch && qs_large_freed(p)) { /* its mapping went with its free */
        qs_fatal("invalid %s of %p: a large block freed before (double free, or a use after free)",
                 what, p);
        return;
    }
    if (!ch) {
        if (want)
            qs_fatal("invalid %s of %p to cache %s: not allocated by qslab", what, p, want);
        else
            qs_fatal("invalid %s of %p: not allocated by qslab", what, p);
        return;
    }
    if (ch->kind == QS_CHUNK_LARGE) {
        if (want)
            qs_fatal("invalid %s of %p to cache %s: it belongs to cache large (block %p)", what, p,
                     want, ch->large_ptr);
        else
            qs_fatal("invalid %s of %p: interior pointer into large block %p", what, p, ch->large_ptr);
        return;
    }
    struct qs_slab *s = qs_chunk_slab(ch, p);
    qslab_cache *c = s ? __atomic_load_n(&s->cache, __ATOMIC_RELAXED) : NULL;
    if (c == &qs_slob_arena) { /* SLOB's shared pages: it knows their blocks */
        qs_slob_bad_pointer(expected, s, p, what);
        return;
    }
    if (!c || (uintptr_t)p < (uintptr_t)s->base) {
        qs_fatal("invalid %s of %p: not an allocated object (free slab memory)%s%s", what, p,
                 want ? ", cache " : "", want ? want : "");
        return;
    }
    if (c->debug && !qs_slab_valid_obj(s, p) && qs_debug_bad_pointer(c, s, p))
        return; /* SLUB's "Invalid object pointer" report */
    size_t off = (size_t)((const char *)p - s->base);
    const char *obj = s->base + off / c->slot_size * c->slot_size;
    if (qs_slab_valid_obj(s, p)) {
        qs_fatal("invalid %s of %p: freed to cache %s but it belongs to cache %s", what, p, want,
                 c->name);
        return;
    }
    if (off >= __atomic_load_n(&s->span, __ATOMIC_RELAXED))
        qs_fatal("invalid %s of %p: not an allocated object (slab tail, or a slot never handed "
                 "out, of cache %s)", what, p, c->name);
    else
        qs_fatal("invalid %s of %p: interior pointer into object %p of cache %s", what, p, obj,
                 c->name);
}

void qs_bad_free(qslab_cache *expected, const void *p)
{
    qs_bad_pointer(expected, p, "free");
}

static QS_SLOW void cache_free_other(qslab_cache *c, void *obj)
{
    if (!obj)
        return;
    if (unlikely(qs_guard_owns(obj))) { /* a guarded sample (guard.c) */
        qs_guard_free(c, obj);
        return;
    }
    struct qs_chunk *ch = qs_chunk_of(obj);
    struct qs_slab *s = NULL;
    if (ch && ch->kind == QS_CHUNK_SLABS && (s = qs_obj_slab(ch, obj)) && s->cache == c)
        qs_free_fast(c, s, obj);
    else if (s && s->cache && s->cache->twin_of == c && qs_slab_valid_obj(s, obj))
        qs_free_fast(s->cache, s, obj); /* of its debug twin (twin.c) */
    else if (!(s && qs_front_of(s->cache)->free_to && qs_front_of(s->cache)->free_to(c, s, obj)))
        qs_bad_free(c, obj); /* SLOB frees, or reports, what is in its shared pages */
}

QSLAB_EXPORT void qslab_cache_free(qslab_cache *c, void *obj)
{
    struct qs_slab *s = qs_slab_fast(obj);
    if (likely(s && qs_slab_valid_obj(s, obj) && s->cache == c)) {
        qs_free_fast(c, s, obj);
        return;
    }
    cache_free_other(c, obj);
}

/* A front end's shrink of c: while it drains the owners' empty slabs into
 * the FIFOs, they keep them (no warm overflow, node.c) for the shrink to
 * give back and count. */
static size_t shrink_one(qslab_cache *c)
{
    __atomic_fetch_add(&c->shrinking, 1, __ATOMIC_RELAXED);
    size_t bytes = qs_front_of(c)->shrink(c);
    __atomic_fetch_sub(&c->shrinking, 1, __ATOMIC_RELAXED);
    return bytes;
}

/* qslab_cache_shrink's work, and a defragmentation pass's end (defrag.c) */
size_t qs_cache_shrink_all(qslab_cache *c)
{
    size_t bytes = shrink_one(c);
    for (qslab_cache *t = NULL;;) { /* and its debug twins (twin.c) */
        qs_lock_acquire(&qs_global);
        t = qs_twin_next(c, t);
        qs_lock_release(&qs_global);
        if (!t)
            return bytes;
        bytes += shrink_one(t);
    }
}

QSLAB_EXPORT size_t qslab_cache_shrink(qslab_cache *c)
{
    qs_init();
    if (__atomic_load_n(&c->mob_migrate, __ATOMIC_RELAXED)) /* its owner can move objects */
        return qs_defrag_shrink(c);
    return qs_cache_shrink_all(c);
}




static unsigned long live_objects(qslab_cache *c) /* qs_global held */
{
    unsigned long sum[QS_STAT_NR];
    qs_stats_sum(c, sum);
    return sum[QS_ALLOC_FAST] + sum[QS_ALLOC_SLOW] - sum[QS_FREE_FAST] - sum[QS_FREE_SLOW];
}

/* Off every list, its id free (qs_global held, inside qs_observe_begin/end) */
static void unlink_cache(qslab_cache *c)
{
    qs_owner_detach_cache(c);
    __atomic_store_n(&qs_cache_by_id[c->id], NULL, __ATOMIC_RELAXED);
    qs_cache_unlist(c);
    if (c->twin_of) { /* off its cache's twins too */
        qslab_cache **tp = &c->twin_of->twins;
        while (*tp != c)
            tp = &(*tp)->twin_next;
        *tp = c->twin_next;
    }
    id_free(c->id);
}

/* Every object is free: wherever they sit (queues, inboxes), the slabs can
 * go back whole (c unlinked, no lock), all in one list (adjacent slabs: one
 * madvise) */
static void release_cache(qslab_cache *c)
{
    struct qs_slab *all = NULL;
    if (qs_front_of(c)->destroy) /* the front end's per-owner state */
        qs_front_of(c)->destroy(c, &all);
    struct qs_queue *q = c->queues;
    while (q) {
        struct qs_queue *next = q->all_next;
        qs_slabs_gather(&all, q->list.partial);
        qs_slabs_gather(&all, q->list.full);
        qs_slabs_gather(&all, q->stash);
        qs_queue_free_slots(q);
        qs_meta_free(q, sizeof(*q));
        q = next;
    }
    for (int n = 0; n < qs_nr_nodes; n++) {
        qs_slabs_gather(&all, c->nodes[n].list.partial);
        qs_slabs_gather(&all, c->nodes[n].list.full);
        qs_slabs_gather(&all, qs_node_fifo_detach(&c->nodes[n]));
    }
    qs_page_keep_destroyed(all); /* warm for the next caches' slabs, within the retention cap (page.c) */
    qs_meta_free(c->nodes, sizeof(struct qs_node) * (size_t)qs_nr_nodes);
    qs_meta_free(c, sizeof(*c));
}

QSLAB_EXPORT int qslab_cache_destroy(qslab_cache *c)
{
    if (!c) {
        errno = EINVAL;
        return -1;
    }
    if (c->is_kmalloc) {
        qs_warn("cache %s is a kmalloc cache and cannot be destroyed", c->name);
        errno = EINVAL;
        return -1;
    }
    if (c->twin_of) {
        qs_warn("cache %s is the debug twin of cache %s and goes when that cache is destroyed",
                c->name, c->twin_of->name);
        errno = EINVAL;
        return -1;
    }
    qs_lock_acquire(&qs_global);
    /* the control channel's thread may be acting on c (control.h,
     * qs_ctl_pinned; it pins under qs_global): wait until it is done, then
     * unlink c in this same hold of qs_global, so that it cannot be pinned
     * again */
    for (;;) {
        qslab_cache *p = __atomic_load_n(&qs_ctl_pinned, __ATOMIC_ACQUIRE);
        /* nor may a defragmentation pass (the purger's) be under way on
         * it: the purger takes mob_busy under qs_global (defrag.c) */
        if (likely(p != c && (!p || p->twin_of != c)) &&
            !__atomic_load_n(&c->mob_busy, __ATOMIC_ACQUIRE))
            break;
        qs_lock_release(&qs_global);
        qs_os_yield();
        qs_lock_acquire(&qs_global);
    }
    /* its objects, and its debug twins' (twin.c) */
    unsigned long live = live_objects(c);
    for (qslab_cache *t = qs_twin_next(c, NULL); t; t = qs_twin_next(c, t))
        live += live_objects(t);
    if (live) {
        qs_lock_release(&qs_global);
        qs_warn("cache %s destroyed with %u objects still allocated; cache left intact", c->name,
                live);
        if (c->debug & QS_DBG_U) /* where they were allocated */
            qs_debug_leaks(c, 2);
        for (qslab_cache *t = NULL;;) { /* twins stay listed while c lives */
            qs_lock_acquire(&qs_global);
            t = qs_twin_next(c, t);
            bool leaks = t && (t->debug & QS_DBG_U) && live_objects(t);
            qs_lock_release(&qs_global);
            if (!t)
                break;
            if (leaks)
                qs_debug_leaks(t, 2);
        }
        errno = EBUSY;
        return -1;
    }
    qs_observe_begin(); /* the cache list changes (observe.h) */
    qslab_cache *twins = NULL; /* unlinked, chained through next */
    for (qslab_cache *t; (t = qs_twin_next(c, NULL)) != NULL;) {
        unlink_cache(t);
        t->next = twins;
        twins = t;
    }
    unlink_cache(c);
    qs_observe_end();
    qs_lock_release(&qs_global);
    while (twins) {
        qslab_cache *next = twins->next;
        release_cache(twins);
        twins = next;
    }
    release_cache(c);
    qs_purger_check(); /* the purger gives back what stays warm */
    return 0;
}

QSLAB_EXPORT const char *qslab_cache_name(const qslab_cache *c)
{
    return c->name;
}

QSLAB_EXPORT size_t qslab_cache_object_size(const qslab_cache *c)
{
    return c->obj_size;
}

QSLAB_EXPORT qslab_cache *qslab_cache_find(const char *name)
{
    if (!name)
        return NULL;
    qs_init();
    return qs_cache_find(name);
}

QSLAB_EXPORT int qslab_num_nodes(void)
{
    qs_init();
    return qs_nr_nodes;
}

QSLAB_EXPORT int qslab_current_node(void)
{
    qs_init();
    return qs_owner_current_node();
}

QSLAB_EXPORT int qslab_object_node(const void *p)
{
    if (unlikely(qs_guard_owns(p))) /* a guarded sample (guard.c) */
        return qs_guard_node(p);
    struct qs_chunk *ch = qs_chunk_of(p);
    if (!ch)
        return qs_zero_in(p) ? 0 : -1; /* a zero-size block holds no memory: node 0 */
    return ch->kind == QS_CHUNK_SLABS ? ch->node : (qs_real_numa ? qs_os_page_node(p) : 0);
}

QSLAB_EXPORT size_t qslab_trim(void)
{
    qs_init();
    struct qs_owner *o = &qs_self;
    if (qs_percpu()) { /* every CPU's queues */
        qs_lock_acquire(&qs_global);
        for (qslab_cache *c = qs_caches; c; c = c->next)
            qs_percpu_empty_all(c);
        qs_lock_release(&qs_global);
    }
    /* the caller's queues first (no other thread's queue can be touched) */
    for (unsigned i = 0; i < o->cap; i++) {
        struct qs_queue *q = o->slots[i];
        if (!q)
            continue;
        qs_queue_empty_out(q->cache, q);
    }
    size_t bytes = qs_front_tick(true);
    qs_purger_check();
    return bytes;
}
