/*
 * meta.c - the allocator for qslab's own structures (caches, queues, node
 * arrays, owners' slot arrays).  These are few and long-lived, so one lock
 * and power-of-two free lists over 256 KiB mapped blocks are enough; blocks
 * over 64 KiB are mapped directly.  Memory comes back zeroed.
 */
#include "core/internal.h"

#include <string.h>

#define META_MIN_SHIFT 4  /* 16 bytes */
#define META_MAX_SHIFT 16 /* 64 KiB */
#define META_BLOCK ((size_t)256 << 10)

struct meta_free {
    struct meta_free *next;
};

static qs_lock meta_lock;
static struct meta_free *meta_bins[META_MAX_SHIFT + 1];
static char *meta_bump, *meta_end;

static unsigned meta_shift(size_t size)
{
    unsigned s = META_MIN_SHIFT;
    while (((size_t)1 << s) < size)
        s++;
    return s;
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
    unsigned s = meta_shift(size);
    size_t bytes = (size_t)1 << s;
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
    unsigned s = meta_shift(size);
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
