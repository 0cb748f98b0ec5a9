/*
 * api/kmalloc.h - kmalloc's fast paths: a request's class from the tables
 * (kmalloc.c lists the classes), an allocation from the class's cache
 * through the owners' queues (front/slqb/fast.h), the free of a pointer of
 * any kind.  Inlined into kmalloc.c's entry points and into the drop-in's
 * malloc and free (src/malloc/), so that those are one call deep; their
 * slow paths (qs_kmalloc_slow, qs_large_alloc, qs_free_other) are
 * kmalloc.c's.
 */
#ifndef QSLAB_API_KMALLOC_H
#define QSLAB_API_KMALLOC_H

#include "front/fastpath.h"

#pragma GCC visibility push(hidden)

#define QS_KM_SMALL_MAX 1024
#define QS_KM_SMALL_ENTRIES (QS_KM_SMALL_MAX / 8 + 1)
/* The class tables: entry j of the first half is the class of the sizes
 * whose (size + 7) >> 3 (or (size + 31) >> 5) is j, entry j of the second
 * half that class's fast path (QS_FAST_*, its cache's fast: kept equal by
 * qs_kmalloc_fast), so that the fast path's choice is one compare with
 * the table's base already in a register.  Written only by qs_kmalloc_fast. */
extern uint8_t qs_kmalloc_small_index[2 * QS_KM_SMALL_ENTRIES];
extern uint8_t qs_kmalloc_small_index16[2 * QS_KM_SMALL_ENTRIES];
#define QS_KM_MID_MAX 32768
#define QS_KM_MID_ENTRIES (QS_KM_MID_MAX / 32 + 1)
extern uint8_t qs_kmalloc_mid_index[2 * QS_KM_MID_ENTRIES];
/* Each class's fast path by class (its cache's fast, kept equal by
 * qs_kmalloc_fast; 0, the thread owner's, until the class is made): for
 * the classes past the second table, and calloc's */
extern uint8_t qs_kmalloc_kind[QS_KMALLOC_CLASSES];
/* A kmalloc class's cache changed its fast path (qs_api_hooks.kmalloc_fast) */
void qs_kmalloc_fast(qslab_cache *c);
void *qs_large_alloc(size_t size, size_t align);
/* Protection for the large blocks made from now on (core/page.h
 * QS_LARGE_*), with the fault handler that reports faults on it */
void qs_large_protect_add(unsigned flags);
void qs_free_other(void *p);
/* free_sized's check, its messages naming `what` ("operator delete", ...) */
void qs_free_sized_as(void *p, size_t size, const char *what);
/* free_aligned_sized's: the alignment, and size (0: not given) within the block */
void qs_free_aligned_as(void *p, size_t align, size_t size, const char *what);
/* Is p in memory qslab handed out (a slab's chunk, a large block, a guarded
 * sample)?  Not whether it is a live object: the free paths check that. */
bool qs_kmalloc_owns(const void *p);
/* qslab_usable_size, a bad pointer reported as `what` of it (0) */
size_t qs_usable_size_as(const void *p, const char *what);
void *qs_kmalloc_slow(unsigned i, size_t size); /* size: for a front end without queues */
/* qs_kmalloc_slow for a request of size (up to QS_KMALLOC_MAX) through the
 * table `small`: the fast path keeps no class across its section */
void *qs_kmalloc_slow_size(size_t size, const uint8_t *small);

#define QS_KM_FINE_FIRST 9  /* 8 .. 128: classes 0..8; then eight per power of two */
#define QS_KM_STEPS 8       /* classes per power of two from 128 bytes up, */
#define QS_KM_FINE32_FROM 1024 /* four times as many from 1 KiB */
#define QS_KM_FINE32_TO 2048   /* to 2 KiB (a 1 KiB page and its header) */
#define QS_KM_FINE16_TO 8192   /* then twice as many to 8 KiB (page buffers) */
#define QS_KM_BIG_FIRST 113 /* 36 KiB, the first class past the second table */

/* Class of a request (kmalloc.c lists the classes): a table up to 1 KiB
 * (`small` is qs_kmalloc_small_index, or ..16 for malloc's 16-byte minimum),
 * a second one up to 32 KiB (32-byte steps), then from the position of the
 * top bit and the three bits below it: for 2^(k-1) < size <= 2^k,
 * (size - 1) >> (k - 4) is 8..15, the eighth of the power of two the size
 * reaches into.  The first table's case falls through (no taken branch on
 * the common path). */
static inline unsigned qs_kmalloc_index(size_t size, const uint8_t *small)
{
    if (likely(size <= QS_KM_SMALL_MAX))
        return small[(size + 7) >> 3];
    if (likely(size <= QS_KM_MID_MAX))
        return qs_kmalloc_mid_index[(size + 31) >> 5];
    unsigned k = (unsigned)(64 - __builtin_clzl(size - 1)); /* 2^(k-1) < size <= 2^k */
    return QS_KM_BIG_FIRST - QS_KM_STEPS + QS_KM_STEPS * (k - 16) + (unsigned)((size - 1) >> (k - 4));
}

/* qs_alloc_fast for class i, whose cache id is i (qs_kmalloc_init), by
 * its fast path's kind byte at kp (the class table's second half): the
 * queue lookup does not wait for the cache's line.  The class is that of
 * size through the table `small`: the slow path finds it again, so that
 * the fast path keeps no class across its section. */
static inline __attribute__((always_inline)) void *qs_kmalloc_alloc(unsigned long i, const uint8_t *kp,
                                                                    size_t size, const uint8_t *small)
{
    if (i >= QS_KMALLOC_CLASSES)
        __builtin_unreachable(); /* (thread owner: classes below 16 KiB at fixed offsets) */
    void *obj = qs_alloc_fast_at(i, 0, kp); /* no ctor: the link at 0 */
    return likely(obj != NULL) ? obj : qs_kmalloc_slow_size(size, small); /* refill, or report a bad word */
}

/* Class i's cache as it is now: qs_kmalloc_unmade until the class is
 * made (core/internal.h), read with acquire (kmalloc.c stores it with
 * release once the cache is complete): for calloc's fresh-object check */
static inline qslab_cache *qs_kmalloc_class_now(unsigned long i)
{
    return __atomic_load_n(&qs_kmalloc_cache_of[i], __ATOMIC_ACQUIRE);
}

#define QS_KM_SMALL_CLASSES 33 /* the first table's: 8 .. 1024 */
_Static_assert(QS_KM_SMALL_CLASSES <= QS_FIXED_SLOTS, "classes up to 1 KiB at fixed TLS offsets");

/* Up to 1 KiB the class comes from the first table and is one of the
 * first 33, all at fixed TLS offsets: that path has no bound check on the
 * class (the thread owner's queue lookup needs one only past them). */
/* Size 0 wraps to the largest m: past both classes' tests, to
 * qs_large_alloc, which gives a zero-size block (zero.c).  The same
 * instructions as size <= ... tests: the index is (m >> 3) + 1, which is
 * (size + 7) >> 3. */
static inline void *qs_kmalloc(size_t size, const uint8_t *small)
{
    size_t m = size - 1;
    if (likely(m < QS_KM_SMALL_MAX)) {
        size_t j = (m >> 3) + 1;
        unsigned long i = small[j];
        if (i >= QS_KM_SMALL_CLASSES)
            __builtin_unreachable();
        return qs_kmalloc_alloc(i, &small[QS_KM_SMALL_ENTRIES + j], size, small);
    }
    if (likely(m < QS_KMALLOC_MAX)) {
        if (likely(size <= QS_KM_MID_MAX)) {
            size_t j = (size + 31) >> 5;
            return qs_kmalloc_alloc(qs_kmalloc_mid_index[j], &qs_kmalloc_mid_index[QS_KM_MID_ENTRIES + j],
                                    size, small);
        }
        unsigned i = qs_kmalloc_index(size, small);
        return qs_kmalloc_alloc(i, &qs_kmalloc_kind[i], size, small);
    }
    return qs_large_alloc(size, 0); /* and size 0 */
}

/* (its slow path: the class is made by then, which its first use does, so
 * its secret is read after it) */
static inline void *qs_kmalloc_fresh_slow(unsigned i, size_t size, bool *fresh)
{
    qs_self.last_word = QS_WORD_CALLOC;
    void *obj = qs_kmalloc_slow(i, size);
    *fresh = obj && qs_self.last_word == QS_FRESH_WORD(QS_LOAD(qs_kmalloc_class_now(i)->secret));
    qs_self.last_word = 0;
    return obj;
}

/* calloc's allocation of class i: the object, and in *fresh whether its
 * bytes are known zero (born into a queue from memory the OS zeroed and
 * never handed out: its word was QS_FRESH_WORD, internal.h), which saves
 * clearing what the program may never touch.  The fast pops read the
 * popped object's word (it is ours after the commit); the slow paths leave
 * it in qs_self.last_word (only SLQB's pops write it: anything else, a
 * guarded sample, a twin's or another front end's object, reads as not
 * fresh).  Before the slow path, last_word says QS_WORD_CALLOC: a slow
 * path that would birth objects from zero memory hands one out born bare
 * instead, written nowhere, and leaves QS_FRESH_WORD (core/slab.c
 * qs_slab_born_bare), so that a run of callocs from fresh slabs touches
 * no page; after it, 0, so that no other slow path reads the request. */
static inline void *qs_kmalloc_fresh(unsigned i, size_t size, bool *fresh)
{
    if (i >= QS_KMALLOC_CLASSES)
        __builtin_unreachable();
    unsigned k = QS_LOAD(qs_kmalloc_kind[i]); /* 0, the thread's, for a class not made */
    if (unlikely(k > QS_FAST_CPU)) { /* SLUB's lists' objects are not fresh */
        void *obj = qs_alloc_fast_at(i, 0, &qs_kmalloc_kind[i]);
        *fresh = false;
        if (likely(obj != NULL))
            return obj;
        return qs_kmalloc_fresh_slow(i, size, fresh); /* its slow path's block may be (slub/slabs.c) */
    }
    /* an object from a queue: its class is made, the secret set */
    uintptr_t want = QS_FRESH_WORD(qs_kmalloc_class_now(i)->secret);
#if QS_HAVE_PERCPU
    if (k == QS_FAST_CPU) {
        void *obj = qs_percpu_try_alloc0(i);
        if (likely(obj != NULL)) {
            *fresh = *(uintptr_t *)obj == want;
            *(uintptr_t *)obj = 0; /* ours now */
            return obj;
        }
        return qs_kmalloc_fresh_slow(i, size, fresh);
    }
#endif
    struct qs_queue *q = qs_queue_fast(i);
    unsigned nr = QS_TOP_NR(q->top);
    if (likely(nr != 0)) {
        void *top = q->slots[nr - 1];
        uintptr_t w = *(uintptr_t *)top;
        void *obj = qs_queue_try_pop(q, QS_ALLOC_FAST, 0);
        if (likely(obj != NULL)) {
            *fresh = w == want;
            return obj;
        }
    }
    return qs_kmalloc_fresh_slow(i, size, fresh);
}

static inline __attribute__((always_inline)) void qs_kfree(void *p)
{
    struct qs_slab *s = qs_slab_fast(p); /* NULL for p == NULL */
    if (likely(s && qs_slab_valid_obj(s, p))) {
        qs_free_fast_slab(s, p);
        return;
    }
    qs_free_other(p); /* NULL, big slabs, large blocks, bad pointers */
}

/* free_sized and C++'s sized delete: an object of the class malloc(size)
 * serves is freed as free() would be, after one table load and a compare
 * of the descriptor's cache id (a kmalloc class's id is its index); any
 * other (a block kept by realloc, a large block, a guarded sample, SLOB's,
 * a debug twin's, a bad pointer) gets the full check (qs_free_sized_as). */
static inline __attribute__((always_inline)) bool qs_kfree_sized_fast(void *p, size_t size)
{
    struct qs_slab *s = qs_slab_fast(p); /* NULL for p == NULL */
    if (unlikely(!s || !qs_slab_valid_obj(s, p)))
        return false;
    unsigned want;
    if (likely(size <= QS_KM_SMALL_MAX))
        want = qs_kmalloc_small_index16[(size + 7) >> 3];
    else if (size <= QS_KMALLOC_MAX)
        want = qs_kmalloc_index(size, qs_kmalloc_small_index16);
    else
        return false;
    if (unlikely(s->cache_id != want))
        return false;
    qs_free_fast_slab(s, p);
    return true;
}

#pragma GCC visibility pop

#endif /* QSLAB_API_KMALLOC_H */
