/*
 * fastpath.h - allocation and free fast paths (inline).
 *
 * Budget, alloc: 1 TLS load of the queue pointer, 3 loads from the queue
 * line (top, slots, secret), 1 of the slot, 1 of the object's word (its
 * free stamp: checked, then cleared); 1 store commits (top: nr and the pop
 * counter) and 1 clears the stamp.  No lock, no atomic read-modify-write.
 * Budget, free: the unit map (1 load) locates the slab descriptor, whose
 * first 32 bytes (1 line) validate the pointer and name the cache id, then
 * 1 TLS load, the queue line, the top slot (double-free check); 2 stores
 * (the stamp into the object, the pointer into the slot) and 1 commit.
 * Nothing is loaded from the object.  The chain of
 * dependent loads from the pointer to the queue is: unit map, descriptor,
 * slot array entry; the chunk header and the cache are off that chain.
 */
#ifndef QSLAB_FASTPATH_H
#define QSLAB_FASTPATH_H

#include "internal.h"

#pragma GCC visibility push(hidden) /* as internal.h */

/* The caller's queue for the cache with id `id`, for the fast paths: never
 * NULL.  A thread without a queue for the cache gets qs_no_queue, which is
 * always empty (alloc goes to its slow path) and owns no slab (free goes to
 * qs_free_remote, which hands it to qs_free_slow): one test fewer on both
 * paths.  Nobody writes to qs_no_queue. */
_Static_assert(QS_KMALLOC_CLASSES <= QS_FIXED_SLOTS, "kmalloc queues at fixed TLS offsets");
static inline struct qs_queue *qs_queue_fast(unsigned id)
{
    struct qs_owner *o = &qs_self;
    if (likely(id < QS_FIXED_SLOTS))
        return o->fixed[id];
    if (id < o->cap && o->slots[id])
        return o->slots[id];
    return &qs_no_queue;
}

/* The caller's queue for the cache with id `id`, or NULL if it has none. */
static inline struct qs_queue *qs_queue_of_id(unsigned id)
{
    struct qs_queue *q = qs_queue_fast(id);
    return q == &qs_no_queue ? NULL : q;
}

static inline struct qs_queue *qs_queue_of(const qslab_cache *c)
{
    return qs_queue_of_id(c->id);
}

/* Pop the top of a non-empty queue, counting it as `item`, with the link
 * word at link_off (q->link_off; the constant 0 for the kmalloc caches,
 * which have no constructor).  The object's word must hold the free stamp
 * (a push writes it) or a free-list link (a refill leaves the link it had
 * on its slab's list: writing the stamp there cost 4 KiB objects 24 cycles
 * each, a store into a line of a conflicting set per object); NULL, the
 * queue untouched, if not: the object was freed twice (the first of its two
 * entries was handed out and its word cleared) or written after its free
 * (qs_queue_corrupt tells which).
 * The caller reports it (qs_queue_pop), so the kmalloc path need not know
 * its cache's address until it is on a slow path.  A fast pop counts
 * itself in `top` (one store); a slow one in stat[]. */
static inline void *qs_queue_try_pop(struct qs_queue *q, int item, uint32_t link_off)
{
    uint64_t t = q->top;
    void *obj = q->slots[QS_TOP_NR(t) - 1];
    uintptr_t *l = (uintptr_t *)((char *)obj + link_off);
    uintptr_t w = *l;
    if (unlikely(w != q->stamp) && ((w ^ q->stamp ^ QS_STAMP(0)) & QS_LINK_TAG_MASK))
        return NULL; /* neither the free stamp nor a free-list link */
    if (item == QS_ALLOC_FAST) {
        QS_STORE(q->top, t + QS_TOP_POP);
    } else {
        QS_STORE(q->top, t - 1);
        QS_ADD(q->stat[item], 1);
    }
    *l = 0; /* an allocated object must not look free */
    return obj;
}

static inline void *qs_queue_pop(qslab_cache *c, struct qs_queue *q, int item)
{
    while (QS_TOP_NR(q->top)) {
        void *obj = qs_queue_try_pop(q, item, q->link_off);
        if (likely(obj != NULL))
            return obj;
        qs_queue_corrupt(c, q); /* reports; drops the entry if the handler returns */
    }
    return NULL;
}

static inline void *qs_alloc_fast(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_fast(c->id);
    if (likely(QS_TOP_NR(q->top) != 0)) {
        void *obj = qs_queue_try_pop(q, QS_ALLOC_FAST, q->link_off);
        if (likely(obj != NULL))
            return obj;
    }
    return qs_alloc_slow(c);
}

/* Push a free object of slab s on the owner's queue: store its free stamp
 * (QS_STAMP: the word looks free) and its pointer, then commit
 * with `top`.  Nothing is loaded from the object.  An object equal to the
 * top entry is freed twice in a row: qs_free_suspect checks and reports
 * (slots[-1] is a NULL sentinel, so an empty queue needs no test).  Older
 * double frees are caught when the second entry is popped
 * (qs_queue_try_pop) or, on every slower path, by the free stamp.  A queue
 * at its limit takes no more: qs_free_full frees an object of one of our
 * own slabs straight to it (no queue round trip: a burst of frees touches
 * each object once). */
/* The push itself, below the limit (t: q->top, just loaded). */
static inline void qs_queue_push_at(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj,
                                    uint64_t t)
{
    unsigned nr = QS_TOP_NR(t);
    void **sl = q->slots;
    if (unlikely(sl[(int)nr - 1] == obj)) {
        qs_free_suspect(c, q, s, obj);
        return;
    }
    *(uintptr_t *)((char *)obj + q->link_off) = q->stamp;
    sl[nr] = obj;
    /* not counted: FREE_FAST is derived from nr (qs_queue_nr_set) */
    QS_STORE(q->top, t + 1); /* read by statistics: relaxed store, a plain mov */
}

static inline void qs_queue_push(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    uint64_t t = q->top;
    if (unlikely(QS_TOP_NR(t) >= QS_LOAD(q->limit))) { /* relaxed: tune lowers it */
        qs_free_full(c, q, s, obj);
        return;
    }
    qs_queue_push_at(c, q, s, obj, t);
}

/* Free obj (validated: an object of slab s of cache c).  The queue is found
 * through the slab's copy of the cache id, in parallel with loading c. */
static inline void qs_free_fast(qslab_cache *c, struct qs_slab *s, void *obj)
{
    struct qs_queue *q = qs_queue_fast(s->cache_id);
    /* objects of our own slabs go on our queue (our slabs are on our node);
     * anything else takes the slow path (queued while the queue is short,
     * else batched home), and so does everything when we have no queue
     * (qs_no_queue owns no slab).  A relaxed
     * load: only we make a slab ours, so equality needs no ordering. */
    if (unlikely(__atomic_load_n(&s->owner, __ATOMIC_RELAXED) != &q->list)) {
        qs_free_remote(c, q, s, obj);
        return;
    }
    uint64_t t = q->top;
    if (unlikely(QS_TOP_NR(t) >= QS_LOAD(q->limit))) {
        /* full: straight onto our slab's free list (qs_free_full), inline
         * while the queue is at hiwater (not only at its slots' end), the
         * slab stays partial (an own slab with a free list is partial; one
         * left with no object in use becomes empty), and the object's word
         * is no free object's (this path may load it: it is not the common
         * one) */
        uintptr_t *l = (uintptr_t *)((char *)obj + q->link_off);
        uintptr_t secret = q->stamp ^ QS_STAMP(0), w = *l;
        void *fl = s->freelist;
        uint32_t inuse = s->inuse - 1;
        if (likely(fl != NULL && inuse != 0 && QS_TOP_NR(t) >= QS_LOAD(q->hiwater) &&
                   ((w ^ secret) & QS_LINK_TAG_MASK) != 0 && w != q->stamp)) {
            *l = (uintptr_t)fl ^ secret;
            s->freelist = obj;
            s->inuse = inuse;
            QS_ADD(q->stat[QS_FREE_SLOW], 1);
            return;
        }
        qs_free_full(c, q, s, obj);
        return;
    }
    qs_queue_push_at(c, q, s, obj, t);
}

/* Slab of a pointer that should be an object of a slab chunk; NULL if not. */
static inline struct qs_slab *qs_obj_slab(struct qs_chunk *ch, const void *p)
{
    struct qs_slab *s = qs_chunk_slab(ch, p);
    if (unlikely(!s || !__atomic_load_n(&s->cache, __ATOMIC_RELAXED) || !qs_slab_valid_obj(s, p)))
        return NULL;
    return s;
}

/* ---- kmalloc's fast paths (kmalloc.c; inlined into the drop-in's malloc
 * and free as well, so that they are one call deep) ---- */
#define QS_KM_SMALL_MAX 1024
#define QS_KM_SMALL_ENTRIES (QS_KM_SMALL_MAX / 8 + 1)
extern const uint8_t qs_kmalloc_small_index[QS_KM_SMALL_ENTRIES];
extern const uint8_t qs_kmalloc_small_index16[QS_KM_SMALL_ENTRIES];
#define QS_KM_MID_MAX 32768
#define QS_KM_MID_ENTRIES (QS_KM_MID_MAX / 128 + 1)
extern const uint8_t qs_kmalloc_mid_index[QS_KM_MID_ENTRIES];
void *qs_large_alloc(size_t size, size_t align);
void qs_free_other(void *p);
void *qs_kmalloc_slow(unsigned i);

#define QS_KM_TABLE_CLASSES 12 /* 8 .. 1024: from the table */
#define QS_KM_QUARTER_FIRST 16 /* 1.5K, 2K, 3K, 4K before it; then 5K .. 32K */
#define QS_KM_HALF_FIRST 28    /* 48K .. 32M: two per power of two */

/* Class of a request (kmalloc.c lists the classes): a table up to 1 KiB
 * (`small` is qs_kmalloc_small_index, or ..16 for malloc's 16-byte minimum),
 * a second one up to 32 KiB (128-byte steps), then from the position of the
 * top bit, two classes per power of two.  The first table's case falls
 * through (no taken branch on the common path). */
static inline unsigned qs_kmalloc_index(size_t size, const uint8_t *small)
{
    if (likely(size <= QS_KM_SMALL_MAX))
        return small[(size + 7) >> 3];
    if (likely(size <= QS_KM_MID_MAX))
        return qs_kmalloc_mid_index[(size + 127) >> 7];
    unsigned k = (unsigned)(64 - __builtin_clzl(size - 1)); /* 2^(k-1) < size <= 2^k */
    return QS_KM_HALF_FIRST + 2 * (k - 16) + (size > ((size_t)3 << (k - 2)));
}

/* qs_alloc_fast for class i, whose cache id is i (qs_kmalloc_init): the
 * queue lookup does not wait for the cache's line. */
static inline void *qs_kmalloc_alloc(unsigned i)
{
    if (i >= QS_KMALLOC_CLASSES)
        __builtin_unreachable(); /* so i < QS_FIXED_SLOTS: no bound check */
    struct qs_queue *q = qs_queue_fast(i);
    if (likely(QS_TOP_NR(q->top) != 0)) {
        void *obj = qs_queue_try_pop(q, QS_ALLOC_FAST, 0); /* no ctor: link at 0 */
        if (likely(obj != NULL))
            return obj;
    }
    return qs_kmalloc_slow(i); /* refill, or report the corrupt link */
}

static inline void *qs_kmalloc(size_t size, const uint8_t *small)
{
    if (likely(size <= QS_KMALLOC_MAX))
        return qs_kmalloc_alloc(qs_kmalloc_index(size, small));
    return qs_large_alloc(size, 0);
}

static inline void qs_kfree(void *p)
{
    struct qs_slab *s = qs_slab_fast(p); /* NULL for p == NULL */
    if (likely(s && qs_slab_valid_obj(s, p))) {
        qs_free_fast(s->cache, s, p);
        return;
    }
    qs_free_other(p); /* NULL, big slabs, large blocks, bad pointers */
}

#pragma GCC visibility pop

#endif /* QSLAB_FASTPATH_H */
