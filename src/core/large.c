/*
 * large.c - blocks past the kmalloc classes (32 MiB): a chunk of kind LARGE
 * each, mapped, unmapped and resized (mremap) here, entered in the unit
 * map like the page layer's chunks (page.c); and their counters, with
 * their reader qslab_large_stats.  With protection (page.h QS_LARGE_*:
 * the hardened profile, or red zones and quarantine for the kmalloc
 * classes), a block has inaccessible pages before and after it, and a
 * freed one stays inaccessible while it is among the last freed: a fault
 * there is told apart from others by qs_large_fault, which the debug
 * layer's fault handler asks.
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

/* The blocks made from now on: QS_LARGE_* (page.h) */
unsigned qs_large_protect;

/* Where a block starts in its mapping: after the header page (and, with a
 * guard, an inaccessible page), or at its alignment */
static size_t large_offset(size_t align, bool guard)
{
    size_t min = guard ? 2 * QS_PAGE_SIZE : QS_PAGE_SIZE;
    return align > min ? align : min;
}

void *qs_large_track(struct qs_chunk *ch, int which)
{
    /* the header page past the chunk header: slabs[] is a slab chunk's */
    return (char *)ch + QS_CHUNK_HDR_SLABS + (size_t)which * QS_LARGE_TRACK_BYTES;
}
_Static_assert(QS_CHUNK_HDR_SLABS + 2 * QS_LARGE_TRACK_BYTES <= QS_PAGE_SIZE, "large tracks fit");

/* GUARD: the pages between the header page and the block, and from the
 * block's end (a page boundary) to the mapping's, made inaccessible.
 * Refused (the kernel's map count): the block goes unguarded, as made
 * without it. */
static void guard(struct qs_chunk *ch)
{
    char *lo = (char *)ch + QS_PAGE_SIZE, *end = ch->large_ptr + ch->large_size;
    if (qs_os_protect(lo, (size_t)(ch->large_ptr - lo), false) != 0 ||
        qs_os_protect(end, (size_t)((char *)ch + ch->map_size - end), false) != 0) {
        qs_os_protect(lo, ch->map_size - QS_PAGE_SIZE, true);
        ch->large_flags &= ~QS_LARGE_GUARD;
        ch->large_size = ch->map_size - (size_t)(ch->large_ptr - (char *)ch);
    }
}

struct qs_chunk *qs_page_map_large(size_t size, size_t align)
{
    unsigned flags = __atomic_load_n(&qs_large_protect, __ATOMIC_RELAXED);
    bool g = flags & QS_LARGE_GUARD;
    size_t off = large_offset(align, g), tail = g ? QS_PAGE_SIZE : 0;
    if (size > ((size_t)1 << 46) - off - tail)
        return NULL;
    size_t map = qs_round_up(off + size + tail, QS_CHUNK_SIZE);
    size_t malign = align > QS_CHUNK_SIZE ? align : QS_CHUNK_SIZE;
    struct qs_chunk *ch = qs_os_map_aligned(map, malign);
    if (!ch)
        return NULL;
    ch->magic = QS_CHUNK_MAGIC;
    ch->kind = QS_CHUNK_LARGE;
    ch->map_size = map;
    ch->large_ptr = (char *)ch + off;
    ch->large_size = g ? qs_round_up(size, QS_PAGE_SIZE) : map - off;
    ch->large_flags = flags;
    if (g)
        guard(ch);
    qs_page_map_set(ch, map, false);
    return ch;
}

/* The blocks freed last, so that a second free of one can say so: its
 * mapping is gone, and without this it would read as a pointer qslab never
 * handed out.  A ring of QS_LARGE_FREED, under its own lock (a leaf, on
 * the free path of blocks over 32 MiB only).  Without KEEP a slot is only
 * a hint: the range may have been mapped again since, by qslab (then the
 * block is live and the free goes through) or by anyone else.  With KEEP
 * the slot owns the block's range, sealed (inaccessible, no memory): it is
 * unmapped when a newer free takes the slot.
 *
 * The fault handler reads the slots without the lock (it may interrupt a
 * holder): each field is written with the lock held, `map` last with
 * release and first cleared, and read with acquire first; a slot changing
 * under the handler can give a stale answer about a range being unmapped,
 * never a crash of the handler (it reads the slot, not the range). */
#define QS_LARGE_FREED 64
struct freed_slot {
    uintptr_t ptr;  /* the user's pointer */
    char *map;      /* KEEP: the sealed range this slot owns; else NULL */
    size_t map_size, size;
    unsigned char track[2][QS_LARGE_TRACK_BYTES];
};
static struct {
    qs_lock lock;
    unsigned next;
    struct freed_slot slot[QS_LARGE_FREED];
} freed QS_BSS_APART;

/* Note the freed block `f` (f->map set: its range sealed and now the
 * slot's); the range the slot owned before, to unmap, in *old (NULL if
 * none). */
static void freed_note(const struct freed_slot *f, char **old, size_t *old_size)
{
    qs_lock_acquire(&freed.lock);
    struct freed_slot *s = &freed.slot[freed.next++ % QS_LARGE_FREED];
    *old = s->map;
    *old_size = s->map_size;
    __atomic_store_n(&s->map, NULL, __ATOMIC_RELEASE);
    s->ptr = f->ptr;
    s->map_size = f->map_size;
    s->size = f->size;
    memcpy(s->track, f->track, sizeof s->track);
    __atomic_store_n(&s->map, f->map, __ATOMIC_RELEASE);
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
        found = freed.slot[i].ptr == (uintptr_t)p;
    qs_lock_release(&freed.lock);
    return found;
}

bool qs_large_fault(uintptr_t a, struct qs_large_fault *f)
{
    struct qs_chunk *ch = qs_chunk_of((const void *)a);
    if (ch && ch->kind == QS_CHUNK_LARGE) {
        if (!(ch->large_flags & QS_LARGE_GUARD) || a < (uintptr_t)ch + QS_PAGE_SIZE ||
            (a >= (uintptr_t)ch->large_ptr && a < (uintptr_t)ch->large_ptr + ch->large_size))
            return false; /* not a guard page */
        f->freed = false;
        f->block = ch->large_ptr;
        f->size = ch->large_size;
        f->tracks = qs_large_track(ch, 0);
        return true;
    }
    for (unsigned i = 0; i < QS_LARGE_FREED; i++) {
        struct freed_slot *s = &freed.slot[i];
        char *m = __atomic_load_n(&s->map, __ATOMIC_ACQUIRE);
        if (m && a - (uintptr_t)m < s->map_size) {
            f->freed = true;
            f->block = (char *)s->ptr;
            f->size = s->size;
            f->tracks = s->track;
            return true;
        }
    }
    return false;
}

void qs_page_unmap_large(struct qs_chunk *ch)
{
    size_t size = ch->map_size;
    struct freed_slot f = {(uintptr_t)ch->large_ptr, NULL, size, ch->large_size, {{0}}};
    bool keep = ch->large_flags & QS_LARGE_KEEP;
    if (keep) /* (read before the seal: the slot holds what a report needs) */
        memcpy(f.track, qs_large_track(ch, 0), sizeof f.track);
    qs_page_map_set(ch, size, true);
    if (keep && qs_os_seal(ch, size) == 0)
        f.map = (char *)ch;
    char *old;
    size_t old_size;
    freed_note(&f, &old, &old_size);
    if (old && qs_os_unmap(old, old_size) != 0)
        qs_page_unmap_refused(old_size); /* left sealed: no memory, no use */
    if (f.map)
        return;
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
 * Returns the (possibly new) chunk, or NULL with the old one intact.  A
 * guarded block's mapping is whole (read-write) meanwhile: mremap takes
 * one mapping, and the guard pages split it. */
static struct qs_chunk *remap(struct qs_chunk *ch, size_t size, bool g)
{
    size_t off = (size_t)(ch->large_ptr - (char *)ch), tail = g ? QS_PAGE_SIZE : 0;
    if (size > ((size_t)1 << 46) - off - tail)
        return NULL;
    size_t map = qs_round_up(off + size + tail, QS_CHUNK_SIZE);
    size_t old = ch->map_size;
    if (map < old) {
        struct qs_chunk *rest = (struct qs_chunk *)((char *)ch + map);
        qs_page_map_set(rest, old - map, true);
        if (unlikely(qs_os_unmap(rest, old - map) != 0)) {
            /* refused: the block keeps its size (a realloc that shrinks
             * may keep the bigger block) */
            qs_page_unmap_refused(old - map);
            qs_page_map_set(ch, old, false);
            return ch;
        }
    } else if (map > old && qs_os_remap_inplace(ch, old, map) == 0) {
        qs_page_map_set(ch, map, false);
    } else if (map > old) {
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
    } /* (map == old: the same mapping; only the usable size may change) */
    ch->map_size = map;
    ch->large_size = g ? qs_round_up(size, QS_PAGE_SIZE) : map - off;
    return ch;
}

struct qs_chunk *qs_page_remap_large(struct qs_chunk *ch, size_t size)
{
    if (!(ch->large_flags & QS_LARGE_GUARD))
        return remap(ch, size, false);
    if (qs_os_protect((char *)ch + QS_PAGE_SIZE, ch->map_size - QS_PAGE_SIZE, true) != 0) {
        errno = ENOMEM;
        return NULL;
    }
    struct qs_chunk *n = remap(ch, size, true);
    guard(n ? n : ch); /* (the old layout, when it failed or was refused) */
    return n;
}
