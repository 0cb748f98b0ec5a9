/*
 * meta.c - the allocator for qslab's own structures (caches, queues, node
 * arrays, owners' slot arrays).  These are few and long-lived, so one lock
 * and free lists by size over 256 KiB mapped blocks are enough; blocks over
 * 64 KiB are mapped directly.  Memory comes back zeroed.
 *
 * Sizes: multiples of a cache line up to 4 KiB, eight steps per power of
 * two above (4.5, 5, ... 8 KiB, 9, 10, ... 16 KiB, ...).  The
 * common structures are just over a power of two or between two (a queue
 * is 640 bytes, a node 192, a slot array of 2^k pointers one more for its
 * sentinel), so power-of-two blocks would leave a third to a half of every
 * one unused, and most of that resident: a block's tail shares pages with
 * its neighbours, and a reused block is cleared whole.
 */
#include "core/internal.h"

#include <string.h>

#define META_MIN_SHIFT 4  /* 16 bytes */
#define META_MAX_SHIFT 16 /* 64 KiB */
#define META_BLOCK ((size_t)256 << 10)
#define META_STEP_SHIFT 6 /* a cache line: the step of the sizes up to ... */
#define META_STEP_MAX_SHIFT 12 /* ... 4 KiB */
#define META_STEPS (1u << (META_STEP_MAX_SHIFT - META_STEP_SHIFT))
#define META_EIGHTHS 3 /* above 4 KiB: 2^3 steps per power of two */
/* bins: 16 and 32 bytes, the steps (64 .. 4 KiB), the eighths above */
#define META_BINS                                                                                  \
    (2 + META_STEPS + ((META_MAX_SHIFT - META_STEP_MAX_SHIFT) << META_EIGHTHS))

struct meta_free {
    struct meta_free *next;
};

static qs_lock meta_lock;
static struct meta_free *meta_bins[META_BINS];
static char *meta_bump, *meta_end;

/* The bin of a request of `size` bytes (1 .. 64 KiB), and its block size. */
static unsigned meta_bin(size_t size, size_t *bytes)
{
    if (size <= ((size_t)1 << (META_STEP_SHIFT - 1))) {
        unsigned small = size <= ((size_t)1 << META_MIN_SHIFT) ? 0 : 1;
        *bytes = (size_t)1 << (META_MIN_SHIFT + small);
        return small;
    }
    if (size <= ((size_t)1 << META_STEP_MAX_SHIFT)) {
        size_t steps = (size + ((size_t)1 << META_STEP_SHIFT) - 1) >> META_STEP_SHIFT;
        *bytes = steps << META_STEP_SHIFT;
        return 1 + (unsigned)steps;
    }
    unsigned s = META_STEP_MAX_SHIFT + 1; /* 2^(s-1) < size <= 2^s */
    while (((size_t)1 << s) < size)
        s++;
    size_t step = (size_t)1 << (s - 1 - META_EIGHTHS);
    *bytes = (size + step - 1) & ~(step - 1);
    size_t k = (*bytes - ((size_t)1 << (s - 1))) / step; /* 1 .. 8 */
    return 1 + META_STEPS + ((s - META_STEP_MAX_SHIFT - 1) << META_EIGHTHS) + (unsigned)k;
}

/* Bytes mapped for metadata (blocks and direct mappings), relaxed atomics:
 * read by qslabinfo -T through the observe root. */
static size_t meta_mapped;
size_t *const qs_meta_mapped_bytes = &meta_mapped; /* observe.c: the root points here */

static void *meta_map(size_t len)
{
    void *p = qs_os_map_aligned(len, QS_PAGE_SIZE);
    if (p)
        __atomic_fetch_add(&meta_mapped, len, __ATOMIC_RELAXED);
    return p;
}

void *qs_meta_alloc(size_t size)
{
    if (size == 0)
        size = 1;
    if (size > ((size_t)1 << META_MAX_SHIFT)) {
        size_t len = (size + QS_PAGE_SIZE - 1) & ~(QS_PAGE_SIZE - 1);
        return meta_map(len);
    }
    size_t bytes;
    unsigned s = meta_bin(size, &bytes);
    void *p = NULL;
    qs_lock_acquire(&meta_lock);
    if (meta_bins[s]) {
        p = meta_bins[s];
        meta_bins[s] = meta_bins[s]->next;
        qs_lock_release(&meta_lock);
        memset(p, 0, bytes);
        return p;
    }
    /* bump from the current block, aligned to min(bytes, cache line) */
    size_t al = bytes < QS_CACHELINE ? bytes : QS_CACHELINE;
    char *b = (char *)(((uintptr_t)meta_bump + al - 1) & ~(uintptr_t)(al - 1));
    if (!meta_bump || b + bytes > meta_end) {
        char *blk = meta_map(META_BLOCK);
        if (!blk) {
            qs_lock_release(&meta_lock);
            return NULL;
        }
        meta_bump = blk;
        meta_end = blk + META_BLOCK;
        b = blk;
    }
    meta_bump = b + bytes;
    p = b; /* fresh mapping: already zero */
    qs_lock_release(&meta_lock);
    return p;
}

void qs_meta_free(void *p, size_t size)
{
    if (!p)
        return;
    if (size == 0)
        size = 1;
    if (size > ((size_t)1 << META_MAX_SHIFT)) {
        size_t len = (size + QS_PAGE_SIZE - 1) & ~(QS_PAGE_SIZE - 1);
        if (qs_os_unmap(p, len) != 0)
            qs_page_unmap_refused(len); /* kept mapped, and counted (the Pages: line) */
        else
            __atomic_fetch_sub(&meta_mapped, len, __ATOMIC_RELAXED);
        return;
    }
    size_t bytes;
    unsigned s = meta_bin(size, &bytes);
    (void)bytes;
    struct meta_free *f = p;
    qs_lock_acquire(&meta_lock);
    f->next = meta_bins[s];
    meta_bins[s] = f;
    qs_lock_release(&meta_lock);
}

/* fork: take or release the meta lock */
void qs_meta_lock_all(bool lock)
{
    if (lock)
        qs_lock_acquire(&meta_lock);
    else
        qs_lock_release(&meta_lock);
}
