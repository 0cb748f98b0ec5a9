/*
 * large.c - blocks past the kmalloc classes (32 MiB): a chunk of kind LARGE
 * each, mapped, unmapped and resized (mremap) here, entered in the unit
 * map like the page layer's chunks (page.c); and their counters, with
 * their reader qslab_large_stats.
 */
#include "core/internal.h"

#include <errno.h>
#include <string.h>

/* Large blocks' counters (internal.h), counted by the API layer's large
 * paths (api/kmalloc.c: relaxed atomics), read racily by qslab_large_stats,
 * the statistics (observe/stats.c) and from outside through the observe
 * root, whose contract their layout is (observe.h: large, large_buckets). */
struct qs_large_counters qs_large;
void *const qs_large_counters = &qs_large; /* observe.c: the root points here */

/* Before start-up: zeros, which is right (no large block yet). */
QSLAB_EXPORT void qslab_large_stats(struct qslab_large_stats *st)
{
    st->alloc = __atomic_load_n(&qs_large.alloc, __ATOMIC_RELAXED);
    st->free = __atomic_load_n(&qs_large.free, __ATOMIC_RELAXED);
    st->live = __atomic_load_n(&qs_large.live, __ATOMIC_RELAXED);
    st->live_bytes = __atomic_load_n(&qs_large.live_bytes, __ATOMIC_RELAXED);
}

static size_t large_offset(size_t align)
{
    return align > QS_PAGE_SIZE ? align : QS_PAGE_SIZE;
}

struct qs_chunk *qs_page_map_large(size_t size, size_t align)
{
    size_t off = large_offset(align);
    if (size > ((size_t)1 << 46) - off)
        return NULL;
    size_t map = qs_round_up(off + size, QS_CHUNK_SIZE);
    size_t malign = align > QS_CHUNK_SIZE ? align : QS_CHUNK_SIZE;
    struct qs_chunk *ch = qs_os_map_aligned(map, malign);
    if (!ch)
        return NULL;
    ch->magic = QS_CHUNK_MAGIC;
    ch->kind = QS_CHUNK_LARGE;
    ch->map_size = map;
    ch->large_ptr = (char *)ch + off;
    ch->large_size = map - off;
    qs_page_map_set(ch, map, false);
    return ch;
}

/* The blocks freed last, so that a second free of one can say so: its
 * mapping is gone, and without this it would read as a pointer qslab never
 * handed out.  A ring of QS_LARGE_FREED, under its own lock (a leaf, on
 * the free path of blocks over 32 MiB only); a slot is only a hint: the
 * range may have been mapped again since, by qslab (then the block is
 * live and the free goes through) or by anyone else. */
#define QS_LARGE_FREED 64
static struct {
    qs_lock lock;
    unsigned next;
    uintptr_t ptr[QS_LARGE_FREED];
} freed;

static void freed_note(uintptr_t p)
{
    qs_lock_acquire(&freed.lock);
    freed.ptr[freed.next++ % QS_LARGE_FREED] = p;
    qs_lock_release(&freed.lock);
}

void qs_large_fork(bool before)
{
    (before ? qs_lock_acquire : qs_lock_release)(&freed.lock);
}

bool qs_large_freed(const void *p)
{
    bool found = false;
    qs_lock_acquire(&freed.lock);
    for (unsigned i = 0; i < QS_LARGE_FREED && !found; i++)
        found = freed.ptr[i] == (uintptr_t)p;
    qs_lock_release(&freed.lock);
    return found;
}

void qs_page_unmap_large(struct qs_chunk *ch)
{
    freed_note((uintptr_t)ch->large_ptr);
    size_t size = ch->map_size;
    qs_page_map_set(ch, size, true);
    if (likely(qs_os_unmap(ch, size) == 0))
        return;
    /* refused: the block is free and no longer qslab's (its units are
     * clear, so a second free is reported), but its range stays mapped;
     * its pages at least go back, if the kernel takes them */
    qs_page_unmap_refused(size);
    if (qs_os_decommit(ch, size) != 0)
        qs_page_decommit_refused(size);
}

/* Resize a large block to hold `size` bytes: in place if the address space
 * allows, else moved (page tables, not bytes) to a new aligned range.
 * Returns the (possibly new) chunk, or NULL with the old one intact. */
struct qs_chunk *qs_page_remap_large(struct qs_chunk *ch, size_t size)
{
    size_t off = (size_t)(ch->large_ptr - (char *)ch);
    if (size > ((size_t)1 << 46) - off)
        return NULL;
    size_t map = qs_round_up(off + size, QS_CHUNK_SIZE);
    size_t old = ch->map_size;
    if (map == old)
        return ch;
    if (map < old) {
        struct qs_chunk *tail = (struct qs_chunk *)((char *)ch + map);
        qs_page_map_set(tail, old - map, true);
        if (unlikely(qs_os_unmap(tail, old - map) != 0)) {
            /* refused: the block keeps its size (a realloc that shrinks
             * may keep the bigger block) */
            qs_page_unmap_refused(old - map);
            qs_page_map_set(ch, old, false);
            return ch;
        }
    } else if (qs_os_remap_inplace(ch, old, map) == 0) {
        qs_page_map_set(ch, map, false);
    } else {
        size_t malign = off > QS_CHUNK_SIZE ? off : QS_CHUNK_SIZE;
        struct qs_chunk *dst = qs_os_map_aligned(map, malign);
        if (!dst)
            return NULL;
        if (qs_os_remap_to(ch, old, dst, old) != 0) {
            if (qs_os_unmap(dst, map) != 0) /* never qslab's: left mapped */
                qs_page_unmap_refused(map);
            errno = ENOMEM;
            return NULL;
        }
        qs_page_map_set(ch, old, true); /* the old range is gone (moved) */
        ch = dst;
        ch->large_ptr = (char *)ch + off;
        qs_page_map_set(ch, map, false);
    }
    ch->map_size = map;
    ch->large_size = map - off;
    return ch;
}
