/*
 * kmalloc.c - the general allocator: size classes served from caches.
 *
 * 193 classes, named kmalloc-<bytes>:
 *   8, 16, 32, 48, 64, 80, 96, 112, 128              (classes 0..8)
 *   then eight per power of two, 2^k/8 apart:
 *   144, 160, ..., 256; 288, 320, ..., 512; ...      (9..32)
 *   thirty-two from 1 KiB to 2 KiB, 32 bytes apart:
 *   1056, 1088, ..., 2048                            (33..64)
 *   sixteen from 2 KiB to 8 KiB, 2^k/16 apart:
 *   2176, ..., 4096; ...; 7936, 8192                 (65..96)
 *   eight again: 9216, ..., 16384; ... 29M, 30M, 32M (97..192)
 * From 128 bytes to 32 MiB a request wastes less than a ninth of its block
 * (the worst is just past a power of two: 2^k + 1 bytes in a block of
 * 2^k + 2^k/8), so no request of that range wastes 12.5% of its block;
 * from 2 KiB to 8 KiB less than a seventeenth (6%), from 1 KiB to 2 KiB
 * less than a thirty-third (3%).  That range holds the buffers of a page
 * and a header (SQLite's 1 KiB pages are 1,296-byte mallocs: 1,312 bytes
 * here, 1,344 with sixteen classes, 1,408 with eight), and values of a
 * few KiB (Redis).  (With two per power of two a request could waste a
 * third: a 1,025-byte page buffer would take 1,536 bytes, a 516-byte value
 * 768.)  Below 128 bytes the
 * classes are 16 bytes apart (malloc's alignment); kmalloc-8 serves the
 * kmalloc API only, malloc's blocks are at least 16 bytes.  More classes
 * cost nothing on the fast paths (one table load finds the class, as
 * before) and little metadata: a class's queues and slabs exist only once
 * it is used.  The seeds' 4,696-byte skb data takes kmalloc-4864 (3.5% waste).
 * Every size up to 32 MiB is served by a cache, never passed through to
 * the page layer: the seeds show what SLUB's pass-through of 4,696-byte
 * allocations cost netperf.  Larger requests are mapped directly (kind
 * LARGE chunks in core/large.c, page-granular: at most a page less a byte of
 * waste), counted in qslab_large_stats, and resized with mremap (in place
 * when the address space allows, otherwise moved without copying).  The
 * class of a size is computed in api/kmalloc.h (qs_kmalloc_index: two tables
 * up to 32 KiB, then the top bit and the three bits below it); class_size
 * is its inverse, and unit_kmalloc_index checks the two against each other
 * for every size up to 64 KiB and at every class edge, and the waste bound
 * for every size from 128 bytes to 32 MiB.
 *
 * Power-of-two classes are naturally aligned (page.c aligns slabs to their
 * size), which is what qslab_aligned_alloc relies on (it asks for powers of
 * two only).
 */
#include "api/zero.h"
#include "api/kmalloc.h"
#include "front/front.h"
#include "debug/debug.h"
#include "api/api.h"

#include <errno.h>
#include <string.h>

/* the classes' caches, which the layers below use too: core/caches.c */

/* (size + 7) >> 3 -> class, for sizes up to 1 KiB (one load on the common
 * path).  The two tables differ only for sizes 0..8: kmalloc's smallest
 * class is 8 bytes, malloc's blocks are at least 16 (16-byte alignment).
 * Every class boundary up to 1 KiB is a multiple of 8. */
#define QS_KM_SMALL_FROM_17 \
    2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, \
    10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, \
    17, 17, 18, 18, 18, 18, 19, 19, 19, 19, 20, 20, 20, 20, 21, 21, \
    21, 21, 22, 22, 22, 22, 23, 23, 23, 23, 24, 24, 24, 24, 25, 25, \
    25, 25, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27, \
    27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 29, 29, \
    29, 29, 29, 29, 29, 29, 30, 30, 30, 30, 30, 30, 30, 30, 31, 31, \
    31, 31, 31, 31, 31, 31, 32, 32, 32, 32, 32, 32, 32, 32
/* (the second halves: every class's fast path, QS_FAST_THREAD (0) until
 * start-up sets them: qs_kmalloc_fast) */
uint8_t qs_kmalloc_small_index[2 * QS_KM_SMALL_ENTRIES] = {0, 0, 1, QS_KM_SMALL_FROM_17};
uint8_t qs_kmalloc_small_index16[2 * QS_KM_SMALL_ENTRIES] = {1, 1, 1, QS_KM_SMALL_FROM_17};

uint8_t qs_kmalloc_kind[QS_KMALLOC_CLASSES];

/* (size + 31) >> 5 -> class, for sizes from 1 KiB to 32 KiB (every class
 * boundary there is a multiple of 32 bytes; the entries below 1 KiB are
 * never read).  Generated from class_size. */
uint8_t qs_kmalloc_mid_index[2 * QS_KM_MID_ENTRIES] = {
    0, 2, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19, 20, 21, 22, 23,
    24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31, 32,
    32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 65, 65, 65, 66, 66, 66, 66, 67, 67, 67, 67, 68, 68, 68,
    68, 69, 69, 69, 69, 70, 70, 70, 70, 71, 71, 71, 71, 72, 72, 72,
    72, 73, 73, 73, 73, 74, 74, 74, 74, 75, 75, 75, 75, 76, 76, 76,
    76, 77, 77, 77, 77, 78, 78, 78, 78, 79, 79, 79, 79, 80, 80, 80,
    80, 81, 81, 81, 81, 81, 81, 81, 81, 82, 82, 82, 82, 82, 82, 82,
    82, 83, 83, 83, 83, 83, 83, 83, 83, 84, 84, 84, 84, 84, 84, 84,
    84, 85, 85, 85, 85, 85, 85, 85, 85, 86, 86, 86, 86, 86, 86, 86,
    86, 87, 87, 87, 87, 87, 87, 87, 87, 88, 88, 88, 88, 88, 88, 88,
    88, 89, 89, 89, 89, 89, 89, 89, 89, 90, 90, 90, 90, 90, 90, 90,
    90, 91, 91, 91, 91, 91, 91, 91, 91, 92, 92, 92, 92, 92, 92, 92,
    92, 93, 93, 93, 93, 93, 93, 93, 93, 94, 94, 94, 94, 94, 94, 94,
    94, 95, 95, 95, 95, 95, 95, 95, 95, 96, 96, 96, 96, 96, 96, 96,
    96, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97,
    97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97,
    97, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98,
    98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98,
    98, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100,
    100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100,
    100, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101,
    101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101,
    101, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102,
    102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102,
    102, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103,
    103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103, 103,
    103, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104,
    104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104, 104,
    104, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105,
    105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105,
    105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105,
    105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105, 105,
    105, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106,
    106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106,
    106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106,
    106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106, 106,
    106, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
    107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
    107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
    107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
    107, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108,
    108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108,
    108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108,
    108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108, 108,
    108, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109,
    109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109,
    109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109,
    109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109, 109,
    109, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110,
    110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110,
    110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110,
    110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110, 110,
    110, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111,
    111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111,
    111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111,
    111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111, 111,
    111, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112,
    112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112,
    112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112,
    112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112,
    112,
};

/* The size of class i: the table's nine up to 128 bytes, then for each
 * power of two 2^k from 128 bytes up, steps(2^k) classes 2^k/steps apart
 * up to 2^(k+1): eight, thirty-two from 1 to 2 KiB, sixteen from 2 to
 * 8 KiB. */
static size_t class_size(unsigned i)
{
    static const uint8_t small[QS_KM_FINE_FIRST] = {8, 16, 32, 48, 64, 80, 96, 112, 128};
    if (i < QS_KM_FINE_FIRST)
        return small[i];
    unsigned j = i - QS_KM_FINE_FIRST;
    size_t p = 128;
    for (;;) {
        unsigned n = p >= QS_KM_FINE32_FROM && p < QS_KM_FINE32_TO ? 4 * QS_KM_STEPS
                     : p >= QS_KM_FINE32_TO && p < QS_KM_FINE16_TO     ? 2 * QS_KM_STEPS
                                                                       : QS_KM_STEPS;
        if (j < n)
            return p + (p / n) * (j + 1);
        j -= n;
        p *= 2;
    }
}

static inline unsigned kmalloc_index(size_t size)
{
    return qs_kmalloc_index(size, qs_kmalloc_small_index);
}

/* Large blocks' counters (qs_large, core/large.c: the observe layer reads
 * them too), kept here by the large paths with relaxed atomics; by size
 * bucket too: bucket b holds mappings of [2^(SHIFT0+b), 2^(SHIFT0+b+1))
 * bytes, the last one everything bigger. */
static unsigned large_bucket(size_t map_size)
{
    unsigned b = (unsigned)(63 - __builtin_clzl(map_size | 1));
    b = b < QS_LARGE_BUCKET_SHIFT0 ? 0 : b - QS_LARGE_BUCKET_SHIFT0;
    return b < QS_LARGE_BUCKETS ? b : QS_LARGE_BUCKETS - 1;
}

/* MAKING A CLASS.  A class's cache is set up on its first use, not at
 * start-up: its structure (512 bytes) and its node array are memory every
 * process would hold for the classes it never uses, 136 KiB for 193 classes
 * (most programs use a few dozen).  Until then its entries in the class
 * tables and qs_kmalloc_kind keep the thread owner's fast path
 * (QS_FAST_THREAD, 0), whose queue of an id no thread has a queue of is
 * the empty qs_no_queue, and qs_kmalloc_cache_of[i] is qs_kmalloc_unmade
 * (core/internal.h): the class's first
 * allocation takes the slow path (qs_kmalloc_slow), which makes it; so does
 * a look-up of its name (qs_cache_find, through qs_api_hooks.kmalloc_make)
 * and anything that acts on every cache (qs_kmalloc_make_all).  Its id is
 * the class (start-up reserves 0..192); its structure the next of
 * qs_kmalloc_store, so that the classes in use share few pages.
 * make_lock orders the makers: one thread sets the class up while the
 * others wait.  qs_kmalloc_cache_of[i] is stored with release once the
 * cache is complete (its QSLAB_TUNE entries applied), and read with
 * acquire: a thread that sees it sees the whole cache.  Only then are the
 * class tables' fast-path bytes copied from the cache (qs_kmalloc_fast
 * leaves a class alone until it is published): a malloc that read the
 * per-CPU kind there before the CPUs' tables had the class's id would
 * index past them.  Lock order: make_lock, then what qs_cache_setup takes
 * (qs_global, the meta lock); nothing calls in here holding a qslab lock
 * (a slow path of malloc, a name look-up, a tune of every cache before it
 * takes qs_global).  No class is ever destroyed. */
static qs_lock make_lock;
static unsigned nr_made; /* of qs_kmalloc_store (make_lock) */

static qslab_cache *kmalloc_make(unsigned i)
{
    qs_lock_acquire(&make_lock);
    qslab_cache *c = qs_kmalloc_cache_of[i]; /* (written under make_lock) */
    if (c == &qs_kmalloc_unmade) {
        char name[QS_NAME_MAX];
        qs_kmalloc_class_name(i, name, sizeof name);
        c = &qs_kmalloc_store[nr_made];
        if (!qs_cache_setup(c, name, class_size(i), 0, 0, NULL, true, (int)i)) {
            memset(c, 0, sizeof(*c)); /* for the next try: set-up counts on zeros */
            qs_lock_release(&make_lock);
            errno = ENOMEM; /* its node array */
            return NULL;
        }
        nr_made++;
        /* no constructor puts the link word elsewhere than 0, which
         * qs_kmalloc_alloc relies on (a debug cache's link is elsewhere,
         * but its queues stay empty: its fast paths always miss) */
        if (c->link_off != 0 && !c->debug) {
            qs_warn("%s has link offset %u", name, (unsigned long)c->link_off);
            qs_os_abort();
        }
        __atomic_store_n(&qs_kmalloc_cache_of[i], c, __ATOMIC_RELEASE);
        qs_lock_acquire(&qs_global); /* as tune's changes of the fast path */
        qs_kmalloc_fast(c);
        qs_lock_release(&qs_global);
    }
    qs_lock_release(&make_lock);
    return c;
}

qslab_cache *qs_kmalloc_cache(unsigned i)
{
    qslab_cache *c = __atomic_load_n(&qs_kmalloc_cache_of[i], __ATOMIC_ACQUIRE);
    if (likely(c != &qs_kmalloc_unmade))
        return c;
    return kmalloc_make(i);
}

void qs_kmalloc_make_all(void)
{
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES; i++)
        (void)qs_kmalloc_cache(i);
}

void qs_kmalloc_fork(bool lock)
{
    if (lock)
        qs_lock_acquire(&make_lock);
    else
        qs_lock_release(&make_lock);
}

QS_STARTUP void qs_kmalloc_init(void)
{
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES; i++)
        qs_kmalloc_bytes[i] = (uint32_t)class_size(i);
    qs_cache_ids_reserve(QS_KMALLOC_CLASSES); /* class i: cache id i */
    /* kmalloc-8 now: the first cache, which reads QSLAB_TUNE (tune.c) */
    if (!qs_kmalloc_cache(0)) {
        qs_warn("cannot set up kmalloc-8");
        qs_os_abort();
    }
    /* blocks past the classes: the largest class's red zones as guard
     * pages; its poison or quarantine as freed blocks kept inaccessible
     * (its flags as QSLAB_DEBUG and QSLAB_HARDEN give them, made or not) */
    char name[QS_NAME_MAX];
    unsigned d = qs_debug_flags_for(qs_kmalloc_class_name(QS_KMALLOC_CLASSES - 1, name, sizeof name), 0);
    qs_large_protect_add((d & QS_DBG_Z ? QS_LARGE_GUARD : 0) |
                         (d & (QS_DBG_P | QS_DBG_Q) ? QS_LARGE_KEEP : 0));
}

void *qs_large_alloc(size_t size, size_t align)
{
    if (size == 0) {
        if (!align) { /* malloc(0): a zero-size block, else (none left) 16 bytes */
            void *z = qs_zero_alloc();
            return z ? z : qs_kmalloc(16, qs_kmalloc_small_index16);
        }
        size = 1; /* aligned_alloc(4 MiB, 0): a block of its own, not its end */
    }
    struct qs_chunk *ch = qs_page_map_large(size, align);
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    __atomic_fetch_add(&qs_large.alloc, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&qs_large.live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&qs_large.live_bytes, ch->map_size, __ATOMIC_RELAXED);
    struct qs_large_bucket *b = &qs_large.bucket[large_bucket(ch->map_size)];
    __atomic_fetch_add(&b->alloc, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->live_bytes, ch->map_size, __ATOMIC_RELAXED);
    if (unlikely(qs_debug_tools))
        qs_debug_large(ch->large_ptr, size, true);
    if (unlikely(ch->large_flags))
        qs_track_record(qs_large_track(ch, 0));
    return ch->large_ptr;
}

_Static_assert(QS_TRACK_BYTES <= QS_LARGE_TRACK_BYTES, "a track fits a large block's header");

/* Large blocks' protection (core/page.h QS_LARGE_*) from now on, and the
 * fault handler that reports what faults on it (debug/fault.c) */
void qs_large_protect_add(unsigned flags)
{
    if (!flags)
        return;
    qs_fault_install();
    __atomic_fetch_or(&qs_large_protect, flags, __ATOMIC_RELAXED);
}

static void large_free(struct qs_chunk *ch)
{
    if (unlikely(qs_debug_tools))
        qs_debug_large(ch->large_ptr, 0, false);
    if (unlikely(ch->large_flags))
        qs_track_record(qs_large_track(ch, 1));
    __atomic_fetch_add(&qs_large.free, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&qs_large.live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&qs_large.live_bytes, ch->map_size, __ATOMIC_RELAXED);
    struct qs_large_bucket *b = &qs_large.bucket[large_bucket(ch->map_size)];
    __atomic_fetch_sub(&b->live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&b->live_bytes, ch->map_size, __ATOMIC_RELAXED);
    qs_page_unmap_large(ch);
}

/* Class c's fast path (c->fast, front.c qs_front_fast) into
 * qs_kmalloc_kind and the class tables' second halves, at every entry of
 * the class.  Relaxed byte stores: a malloc that read the old one takes
 * the old route once more, which stays correct (qs_front_fast). */
void qs_kmalloc_fast(qslab_cache *c)
{
    size_t i = c->id;
    if (i >= QS_KMALLOC_CLASSES || __atomic_load_n(&qs_kmalloc_cache_of[i], __ATOMIC_RELAXED) != c)
        return; /* not a class (a class's debug twin, say), or not published yet */
    uint8_t k = QS_LOAD(c->fast);
    QS_STORE(qs_kmalloc_kind[i], k);
    for (size_t j = 0; j < QS_KM_SMALL_ENTRIES; j++) {
        if (qs_kmalloc_small_index[j] == i)
            QS_STORE(qs_kmalloc_small_index[QS_KM_SMALL_ENTRIES + j], k);
        if (qs_kmalloc_small_index16[j] == i)
            QS_STORE(qs_kmalloc_small_index16[QS_KM_SMALL_ENTRIES + j], k);
    }
    for (size_t j = 0; j < QS_KM_MID_ENTRIES; j++)
        if (qs_kmalloc_mid_index[j] == i)
            QS_STORE(qs_kmalloc_mid_index[QS_KM_MID_ENTRIES + j], k);
}

/* qs_kmalloc_alloc's slow path: the queue is empty (or missing), or its
 * top object does not look free (qs_queue_pop reports it).  The program's
 * first allocation comes here (before start-up every queue is the empty
 * qs_no_queue), perhaps before qslab's constructor (the malloc drop-in),
 * so this starts the library up; the slow paths it calls run after. */
QS_SLOW void *qs_kmalloc_slow(unsigned i, size_t size)
{
    qs_init();
    qslab_cache *c = qs_kmalloc_cache(i); /* its first use makes it */
    if (unlikely(!c))
        return NULL;
    if (unlikely(QS_LOAD(qs_guard_on))) { /* QSLAB_GUARD_SAMPLE (guard.c) */
        void *g = qs_guard_alloc(c, size);
        if (g)
            return g;
    }
    qslab_cache *t = qs_twin_divert(c);
    if (unlikely(t != NULL)) /* debugging turned on in use (twin.c) */
        return qs_twin_alloc(t, QSLAB_NUMA_NO_NODE);
    const struct qs_front *fe = qs_front_of(c);
    if (unlikely(fe->alloc != NULL)) /* slow paths of its own: front.h */
        return fe->kmalloc ? fe->kmalloc(c, size, 0) : fe->alloc(c, QSLAB_NUMA_NO_NODE);
    if (qs_percpu())
        return qs_alloc_slow_unsampled(c);
    struct qs_queue *q = qs_queue_of(c);
    if (q && QS_TOP_NR(q->top)) {
        void *obj = qs_queue_pop(c, q, QS_ALLOC_FAST);
        if (obj)
            return obj;
    }
    return qs_alloc_slow_unsampled(c);
}

QS_SLOW void *qs_kmalloc_slow_size(size_t size, const uint8_t *small)
{
    return qs_kmalloc_slow(qs_kmalloc_index(size, small), size);
}

QSLAB_EXPORT void *qslab_malloc(size_t size)
{
    return qs_kmalloc(size, qs_kmalloc_small_index);
}

QSLAB_EXPORT void *qslab_malloc_node(size_t size, int node)
{
    qs_init();
    if (size <= QS_KMALLOC_MAX) {
        qslab_cache *c = qs_kmalloc_cache(kmalloc_index(size));
        return c ? qslab_cache_alloc_node(c, node) : NULL;
    }
    if (node < QSLAB_NUMA_NO_NODE || node >= qs_nr_nodes) {
        errno = EINVAL;
        return NULL;
    }
    void *p = qs_large_alloc(size, 0);
    if (p && node >= 0 && qs_real_numa) {
        struct qs_chunk *ch = qs_chunk_of(p);
        qs_os_bind_node(ch, ch->map_size, node);
    }
    return p;
}

QSLAB_EXPORT void *qslab_calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (total > QS_KMALLOC_MAX || total == 0)
        return qs_large_alloc(total, 0); /* fresh mapping: already zero; or a zero-size block */
    bool fresh;
    void *p = qs_kmalloc_fresh(qs_kmalloc_index(total, qs_kmalloc_small_index), total, &fresh);
    if (p && !fresh)
        memset(p, 0, total);
    return p;
}

/* qslab_free of anything qs_slab_fast does not resolve to an object: NULL,
 * an object in a chunk of big slabs, a large block, or a pointer to report. */
QS_SLOW void qs_free_other(void *p)
{
    if (!p)
        return;
    if (unlikely(qs_zero_in(p))) {
        qs_zero_free(p, "free");
        return;
    }
    if (unlikely(qs_guard_owns(p))) { /* a guarded sample (guard.c) */
        qs_guard_free(NULL, p);
        return;
    }
    struct qs_chunk *ch = qs_chunk_of(p);
    struct qs_slab *s;
    if (ch && ch->kind == QS_CHUNK_SLABS && (s = qs_obj_slab(ch, p)))
        qs_free_fast(s->cache, s, p);
    else if (ch && ch->kind == QS_CHUNK_LARGE && p == ch->large_ptr)
        large_free(ch);
    else
        qs_bad_free(NULL, p);
}

QSLAB_EXPORT void qslab_free(void *p)
{
    qs_kfree(p);
}

/* Is obj, an object of slab s, free?  Its word is the free stamp (it sits
 * in a queue: a 64-bit value derived from the cache's secret, which no
 * program writes by chance), or a free-list link while the slab's free bit
 * says it is on its slab's list.  Read without a lock: the caller says it
 * holds the object, so nothing else writes either while that is true; if
 * it does not, the answer is for its report only.  A front end that keeps
 * its free state its own way (SLUB: its slab word, no free bits) is asked
 * what it asks at a free: a link to NULL or to another object of the slab
 * (every allocation clears the word), which user data matches with odds of
 * 2^-20 at most.  Objects in a remote batch read as allocated. */
static bool freed(const struct qs_slab *s, const void *obj)
{
    const qslab_cache *c = s->cache;
    uintptr_t w = __atomic_load_n((const uintptr_t *)((const char *)obj + c->link_off), __ATOMIC_RELAXED);
    if (w == QS_STAMP(c->secret))
        return true;
    if (!qs_looks_free(c, w))
        return false;
    if (!c->keeps_fbits)
        return qs_slab_link_in(c, s, w);
    uint64_t bit, *bits = qs_fbit_word(s, obj, &bit);
    return (__atomic_load_n(bits, __ATOMIC_RELAXED) & bit) != 0;
}

/* Usable size of a valid pointer; 0 (after reporting) if invalid. */
static size_t usable(const void *p, const char *what)
{
    if (unlikely(qs_zero_in(p))) { /* 0 either way: a live block holds nothing */
        (void)qs_zero_live(p, what);
        return 0;
    }
    if (unlikely(qs_guard_owns(p)))
        return qs_guard_usable(p, what);
    struct qs_chunk *ch = qs_chunk_of(p);
    if (ch && ch->kind == QS_CHUNK_SLABS) {
        struct qs_slab *s = qs_obj_slab(ch, p);
        if (s && qs_front_of(s->cache)->usable)
            return qs_front_of(s->cache)->usable(s, p, what);
        if (s && unlikely(freed(s, p))) {
            qs_fatal("%s of %p: a freed object of cache %s", what, p, s->cache->name);
            return 0;
        }
        if (s)
            return s->cache->is_kmalloc ? qs_front_kmalloc_room(s) : s->cache->obj_size;
    } else if (ch && ch->kind == QS_CHUNK_LARGE && p == ch->large_ptr) {
        return ch->large_size;
    }
    qs_bad_pointer(NULL, p, what); /* what it is, as free says */
    return 0;
}

size_t qs_usable_size_as(const void *p, const char *what)
{
    return p ? usable(p, what) : 0;
}

QSLAB_EXPORT size_t qslab_usable_size(const void *p)
{
    return qs_usable_size_as(p, "qslab_usable_size");
}

/* free_sized: `size` must be one a request for p's object could have named
 * (qslab.h), checked with what the free reads anyway.  A slab object: from
 * its usable size u (its class's size; SLOB's block), a request gets a
 * block of at most twice its size (classes are at most a power of two
 * apart, SLOB rounds to 16 bytes) and realloc keeps a block for any size
 * over half of it, so a size in (u/2, u] is right and any other is not;
 * except that blocks under 32 bytes serve every smaller size (malloc's
 * 16-byte minimum; SLOB's 24-byte block with its header serves requests
 * from 9 bytes).  A large block: a size over 32 MiB must round to its
 * mapping (realloc remaps to the size), a smaller one must be over half of
 * it (a realloc that kept it).  A mismatch is reported, naming the
 * object's cache and the sizes it takes, and the object is not freed. */
QS_NOINLINE void qs_free_sized_as(void *p, size_t size, const char *what)
{
    if (!p)
        return;
    if (unlikely(qs_zero_in(p))) {
        if (size)
            qs_fatal("%s of %p with size %u: the object is a zero-size block (size 0)", what, p, size);
        else
            qs_zero_free(p, what);
        return;
    }
    struct qs_chunk *ch = qs_chunk_of(p);
    if (unlikely(qs_guard_owns(p))) { /* a guarded sample: its usable size */
        size_t u = qs_guard_usable(p, what);
        if (!u)
            return; /* reported */
        size_t lo = u < 32 ? 0 : u / 2 + 1;
        if (size > u || size < lo) {
            qs_fatal("%s of %p with size %u: the object is a guarded sample of %u bytes "
                     "(sizes %u..%u)", what, p, size, u, lo, u);
            return;
        }
    } else if (ch && ch->kind == QS_CHUNK_LARGE && p == ch->large_ptr) {
        /* sizes that map to it: over u less a chunk (u is the mapping
         * less the header's offset) */
        size_t u = ch->large_size, rlo = u / 2 + 1;
        size_t mlo = u > QS_CHUNK_SIZE ? u - QS_CHUNK_SIZE + 1 : 1;
        if (mlo <= QS_KMALLOC_MAX)
            mlo = QS_KMALLOC_MAX + 1;
        bool mapped = size >= mlo && size <= u, kept = size >= rlo && size <= QS_KMALLOC_MAX;
        if (!mapped && !kept) {
            if (rlo > QS_KMALLOC_MAX || mlo == QS_KMALLOC_MAX + 1) /* one range */
                qs_fatal("%s of %p with size %u: the object is a large block of %u "
                         "bytes (sizes %u..%u)", what, p, size, u, rlo > QS_KMALLOC_MAX ? mlo : rlo, u);
            else
                qs_fatal("%s of %p with size %u: the object is a large block of %u "
                         "bytes (sizes %u..%u, or %u..%u after a realloc)", what, p, size, u, mlo, u,
                         rlo, QS_KMALLOC_MAX);
            return;
        }
    } else if (ch && ch->kind == QS_CHUNK_SLABS && qs_obj_slab(ch, p)) {
        size_t u = usable(p, what);
        if (!u)
            return; /* reported */
        size_t lo = u < 32 ? 0 : u / 2 + 1;
        if (size > u || size < lo) {
            qs_fatal("%s of %p with size %u: the object is in cache %s (sizes %u..%u)", what,
                     p, size, qs_obj_slab(ch, p)->cache->name, lo, u);
            return;
        }
    } /* anything else: qs_kfree reports it */
    qs_kfree(p);
}

bool qs_kmalloc_owns(const void *p)
{
    return qs_chunk_of(p) != NULL || qs_guard_owns(p) || qs_zero_in(p);
}

QSLAB_EXPORT void qslab_free_sized(void *p, size_t size)
{
    qs_free_sized_as(p, size, "free_sized");
}

/* free_aligned_sized and the aligned C++ deletes: p's alignment must be
 * `align` (a power of two) and `size` (0: not given) must fit its block;
 * aligned blocks come from a class of at least max(align, size), so sizes
 * far below the block are legitimate and only the upper bound is checked.
 * A mismatch is reported and the block is not freed. */
QS_NOINLINE void qs_free_aligned_as(void *p, size_t align, size_t size, const char *what)
{
    if (!p)
        return;
    if (align == 0 || (align & (align - 1)) || ((uintptr_t)p & (align - 1))) {
        qs_fatal("%s of %p with alignment %u: %s", what, p, align,
                 align == 0 || (align & (align - 1)) ? "not a power of two" : "the pointer does not have it");
        return;
    }
    if (size && !qs_zero_in(p)) {
        size_t u = usable(p, what); /* reports a pointer not qslab's: 0 */
        if (!u)
            return;
        if (size > u) {
            qs_fatal("%s of %p with size %u: the block holds %u bytes", what, p, size, u);
            return;
        }
    }
    qs_kfree(p);
}

QSLAB_EXPORT void *qslab_realloc(void *p, size_t size)
{
    if (!p)
        return qslab_malloc(size);
    if (size == 0) {
        qs_kfree(p);
        return NULL;
    }
    if (unlikely(qs_zero_in(p))) { /* a zero-size block: nothing to copy */
        if (!qs_zero_live(p, "realloc"))
            return NULL;
        void *n = qslab_malloc(size);
        if (n)
            qs_zero_free(p, "realloc");
        return n;
    }
    size_t old = usable(p, "realloc");
    if (!old)
        return NULL;
    struct qs_chunk *ch = qs_chunk_of(p);
    if (ch && ch->kind == QS_CHUNK_LARGE && size > QS_KMALLOC_MAX) {
        size_t before = ch->map_size;
        struct qs_chunk *nch = qs_page_remap_large(ch, size);
        if (!nch) {
            errno = ENOMEM;
            return NULL;
        }
        __atomic_fetch_add(&qs_large.live_bytes, nch->map_size - before, __ATOMIC_RELAXED);
        /* the block may change bucket: out of the old one, into the new */
        struct qs_large_bucket *ob = &qs_large.bucket[large_bucket(before)],
                               *nb = &qs_large.bucket[large_bucket(nch->map_size)];
        __atomic_fetch_sub(&ob->live, 1, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&ob->live_bytes, before, __ATOMIC_RELAXED);
        __atomic_fetch_add(&nb->live, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&nb->live_bytes, nch->map_size, __ATOMIC_RELAXED);
        return nch->large_ptr;
    }
    /* same object when the size still fits and at least half of it is used */
    if (size <= old && (size > old / 2 || old <= 16))
        return p;
    void *n = qslab_malloc(size);
    if (!n)
        return NULL;
    memcpy(n, p, size < old ? size : old);
    qs_kfree(p);
    return n;
}

/* Can kmalloc's class of pow2 bytes give an object aligned to `align`?
 * Yes, unless its objects (or its debug twin's) are debug objects, whose
 * left red zone and stride are 16-aligned only (debug/slot.c qs_debug_layout):
 * then the aligned allocation is mapped, without a useless object
 * allocated, counted and freed first. */
static bool class_aligns(size_t pow2, size_t align)
{
    if (pow2 > QS_KMALLOC_MAX)
        return true; /* qslab_malloc maps it */
    qslab_cache *c = qs_kmalloc_cache(kmalloc_index(pow2));
    if (!c)
        return true; /* qslab_malloc fails as well */
    qslab_cache *t = __atomic_load_n(&c->dbg_alloc, __ATOMIC_ACQUIRE);
    if (t)
        c = t;
    return !c->debug || (c->red_left % align == 0 && c->slot_size % align == 0);
}

/* Alignments: powers of two up to QSLAB_MAX_ALIGN (qslab.h), which keeps
 * the large path's header offset (the alignment) within the 2^46 bytes a
 * block may span (page.c); anything else is the caller's error, EINVAL,
 * while a size no block can have is ENOMEM. */
QSLAB_EXPORT void *qslab_aligned_alloc(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)) || align > QSLAB_MAX_ALIGN) {
        errno = EINVAL;
        return NULL;
    }
    if (align <= 8)
        return qslab_malloc(size);
    qs_init();
    const struct qs_front *fe = qs_front_of(qs_kmalloc_cache_of[0]); /* (made at start-up) */
    if (fe->kmalloc_exact && size <= QS_PAGE_SIZE && size + align + 32 <= QS_PAGE_SIZE) { /* SLOB: in a page */
        qslab_cache *c = qs_kmalloc_cache(qs_kmalloc_index(size, qs_kmalloc_small_index));
        if (!c)
            return NULL;
        if (!QS_LOAD(c->dbg_alloc))
            return fe->kmalloc(c, size, align);
    }
    size_t want = size > align ? size : align;
    if (want <= QS_CHUNK_SIZE / 2) {
        /* round to a power of two: those classes are naturally aligned */
        size_t pow2 = want <= 8 ? 8 : (size_t)1 << (64 - __builtin_clzl(want - 1));
        if (class_aligns(pow2, align)) {
            void *p = qslab_malloc(pow2);
            if (!p || ((uintptr_t)p & (align - 1)) == 0)
                return p;
            qs_kfree(p); /* an order tuned past the chunk size: map it */
        }
    }
    if (size > ((size_t)1 << 46)) {
        errno = ENOMEM;
        return NULL;
    }
    return qs_large_alloc(size, align);
}
