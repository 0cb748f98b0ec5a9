/*
 * core/page.h - the page layer (page.c): chunks and their headers, the unit
 * map from a pointer to its slab descriptor, slabs handed out and given
 * back, warm slots, large blocks.  Part of core/internal.h, which includes
 * it where the types it needs are defined.
 */
#ifndef QSLAB_CORE_PAGE_H
#define QSLAB_CORE_PAGE_H

#ifndef QSLAB_INTERNAL_H
#error "core/page.h is part of core/internal.h: include that"
#endif

/* ---- page.c ---- */
enum { QS_CHUNK_SLABS = 1, QS_CHUNK_LARGE = 2 };
/* The CPUs of a home take their cold slabs from chunks of their own
 * (page.c, HOMES); a CPU's home is its id modulo QS_PAGE_HOMES. */
#define QS_PAGE_HOMES 16
#define QS_CHUNK_MAGIC 0x51534c42u /* "QSLB" */

struct qs_chunk {
    uint32_t magic;
    uint8_t kind;
    uint8_t order;
    uint16_t node;
    uint32_t nr_slots;           /* descriptors: slots of the whole chunk */
    uint32_t first_slot;         /* slots below it hold the header */
    uint32_t nr_free, next_unused;
    char *data;                  /* slot i starts at data + (i << (page shift + order)) */
    size_t map_size;             /* bytes mapped at the chunk's start */
    struct qs_slab *free_slots;  /* returned slots (slab->next) */
    struct qs_chunk *next, *prev; /* pool->avail */
    struct qs_chunk *all_next, *all_prev; /* every slab chunk of the pool */
    /* large blocks */
    char *large_ptr;      /* the user's pointer */
    size_t large_size;    /* bytes usable from large_ptr */
    unsigned large_flags; /* QS_LARGE_GUARD, QS_LARGE_KEEP: as made */
    uint32_t home;        /* slab chunks: h + 1 while pool->home[h] is this chunk, else 0 */
    struct qs_slab slabs[] __attribute__((aligned(QS_CACHELINE)));
};
#define QS_CHUNK_HDR_SLABS 128 /* offset of slabs[] in a chunk */

/* The unit map: one byte per 4 MiB unit of the user address space.
 *   0        the unit is not qslab's
 *   1        a chunk header starts at the unit's first byte (a chunk of
 *            several units, or a large block)
 *   2..127   the chunk's header is k-1 units back (127: at least 126 back;
 *            step back and read again)
 *   0x80 | s a chunk of one unit, its header at the unit's start, cut into
 *            slabs of 2^s bytes (s = page shift + order, at most 21); slot i
 *            starts at i << s from the chunk and has descriptor slabs[i]
 * The last form lets the free path find a slab descriptor from the pointer
 * and this byte alone, without reading the chunk header.  A static array
 * (32 MiB of BSS on x86-64, untouched pages cost nothing; mapped in ASan
 * builds: page.c), so the lookup is one load at a constant base. */
#if defined(__aarch64__)
#define QS_VA_BITS 48
#else
#define QS_VA_BITS 47
#endif
#define QS_UNITS ((size_t)1 << (QS_VA_BITS - QS_CHUNK_SHIFT))
#define QS_UNIT_FAR_MAX 127
#define QS_UNIT_SLABS 0x80
#ifdef QS_HAVE_ASAN
extern uint8_t *qs_unit_map; /* mapped at load instead: page.c */
#else
extern uint8_t qs_unit_map[QS_UNITS];
#endif
struct qs_chunk *qs_chunk_of_far(size_t unit, unsigned k);

static inline struct qs_chunk *qs_chunk_of(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    if (unlikely(u >> QS_VA_BITS))
        return NULL;
    unsigned k = __atomic_load_n(&qs_unit_map[u >> QS_CHUNK_SHIFT], __ATOMIC_ACQUIRE);
    if (likely(k >= QS_UNIT_SLABS || k == 1))
        return (struct qs_chunk *)(u & ~(uintptr_t)(QS_CHUNK_SIZE - 1));
    if (k == 0)
        return NULL;
    return qs_chunk_of_far(u >> QS_CHUNK_SHIFT, k);
}

/* The descriptor of p's slot when p lies in a one-unit slab chunk; NULL for
 * anything else (not ours, a large block, a chunk of slabs of 4 MiB and
 * more: the caller takes qs_chunk_of's general path).  The descriptor may
 * be a header slot's or a free slot's (span 0): check qs_slab_valid_obj. */
static inline struct qs_slab *qs_slab_fast(const void *p)
{
    uintptr_t u = (uintptr_t)p, unit = u >> QS_CHUNK_SHIFT;
    /* the unit is tested against the map's size, not u against 2^47, so
     * that one shift serves both (the empty asm keeps GCC from folding the
     * test back into a shift of its own) */
    __asm__("" : "+r"(unit));
    if (unlikely(unit >= QS_UNITS))
        return NULL;
    unsigned k = __atomic_load_n(&qs_unit_map[unit], __ATOMIC_ACQUIRE);
    if (unlikely(k < QS_UNIT_SLABS))
        return NULL;
    struct qs_slab *slabs = (struct qs_slab *)((u & ~(uintptr_t)(QS_CHUNK_SIZE - 1)) + QS_CHUNK_HDR_SLABS);
    return &slabs[(u & (QS_CHUNK_SIZE - 1)) >> (k & 63)]; /* x86 masks the count: one shr */
}

/* Slab descriptor of the slot that holds p, or NULL (header, past the end). */
struct qs_slab *qs_slab_lookup(const void *p); /* any slab chunk (page.c); NULL: none */
static inline struct qs_slab *qs_chunk_slab(struct qs_chunk *ch, const void *p)
{
    /* a p below data wraps to a huge index */
    uintptr_t i = ((uintptr_t)p - (uintptr_t)ch->data) >> (QS_PAGE_SHIFT + ch->order);
    if (unlikely(i >= ch->nr_slots || i < ch->first_slot))
        return NULL;
    return &ch->slabs[i];
}
_Static_assert(__builtin_offsetof(struct qs_chunk, slabs) == QS_CHUNK_HDR_SLABS, "chunk header size");

struct qs_slab *qs_page_alloc_slab(int node, unsigned order); /* NULL: ENOMEM */
size_t qs_page_free_slab(struct qs_slab *s);       /* kept warm (below); bytes given back */
size_t qs_page_free_slab_now(struct qs_slab *s); /* one slab, given back now */
size_t qs_page_free_slabs(struct qs_slab *list); /* a ->next list, adjacent ones in one madvise */
/* Empty slabs no cache keeps (a ->next list): resident as warm slots for
 * the next slabs of their pools, any cache's, up to QS_WARM_LIMIT (the
 * rest given back at once: the bytes the OS took); a destroyed cache's up
 * to qs_page_retain_cap() (warm.c: the retention rule) */
size_t qs_page_keep_slabs(struct qs_slab *list);
size_t qs_page_keep_empties(struct qs_slab *list); /* a FIFO's: empty since empty_ms */
size_t qs_page_keep_destroyed(struct qs_slab *list);
size_t qs_page_retain_cap(void); /* max(floor, slab bytes / QS_RETAIN_FRACTION) */
void qs_page_set_reclaim(void (*fn)(int node, unsigned order)); /* node.c's, at start-up */
/* Give back warm slots kept QS_WARM_MS (all: every one); bytes the OS took */
size_t qs_page_sweep_warm(bool all);
/* ... those of orders `from` and up but `except`, warm `age` ms or more
 * at `now` (0: every one; node.c: big empties) */
size_t qs_page_sweep_warm_orders(unsigned from, unsigned except, uint32_t age, uint64_t now);
extern size_t *const qs_page_warm_bytes;        /* atomic: bytes of warm slots */
extern size_t *const qs_page_slab_bytes;        /* atomic: bytes of slabs handed to caches */
extern unsigned long *const qs_page_warm_trims; /* atomic: cuts to the retention cap */
#define QS_WARM_MS 1000                     /* a warm slot goes back after this */
#define QS_WARM_LIMIT ((size_t)1 << 30)     /* at most this many bytes warm */
#define QS_RETAIN_FRACTION 16               /* kept empty: at most 1/16 of slab bytes ... */
#define QS_RETAIN_FLOOR ((size_t)1 << 20)   /* ... or this, when the process grows */
/* THE CACHED-MEMORY CAP (tunable cached_max, QSLAB_CACHED_MAX: page.c
 * holds its state and its counters, node.c its walk; docs/design.md,
 * "The cached-memory cap").  0: none, the retention rule alone. */
struct qs_cached {
    unsigned long max;       /* the cap, bytes (0: none); relaxed */
    unsigned long kept;      /* atomic: bytes kept since the last walk (an estimate) */
    unsigned long held;      /* what the last walk left kept (FIFOs + warm slots) */
    unsigned long walks;     /* walks (written under qs_global) */
    unsigned long cuts;      /* walks that gave memory back (under qs_global) */
    unsigned long cut_bytes; /* ... the bytes they gave back (under qs_global) */
};
extern struct qs_cached qs_cached;
/* With a cap, half of it is the owners' (their budgets: front/slqb/
 * budget.c gives each owner its share) and the rest is what the FIFOs,
 * the warm slots and SLOB's kept pages may keep empty: so that the two
 * together stay within the one cap.  0: no cap. */
static inline unsigned long qs_cached_empty_max(void)
{
    unsigned long max = __atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED);
    return max - max / 2;
}
#define QS_CACHED_MAX_MAX ((unsigned long)1 << 40) /* the largest cap accepted */
/* bytes just kept empty (a FIFO's slabs, warm slots): counted for the cap,
 * when there is one (any context: one atomic add) */
static inline void qs_page_cached_kept(size_t bytes)
{
    if (unlikely(__atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED)))
        __atomic_fetch_add(&qs_cached.kept, bytes, __ATOMIC_RELAXED);
}
/* With a cap, past it by the estimate: the walk (node.c) gives back.  No
 * lock held but, possibly, a queue lock, a node lock or SLOB's lock (the
 * walk only tries qs_global and the node locks). */
void qs_page_cached_check(void);
void qs_page_set_cached_walk(void (*fn)(void)); /* node.c's, at start-up */
void qs_page_set_cached_max(unsigned long max); /* the tunable; 0: none */
void qs_page_cached_apply(void); /* a walk now (a cap just set), with a cap */
/* Cut the warm slots to `cap` bytes (biggest first, oldest first in a
 * pool); bytes the OS took */
size_t qs_page_warm_cut(size_t cap);
/* Push every slab of a ->next list onto *all (lists gathered for one
 * qs_page_free_slabs call) */
static inline void qs_slabs_gather(struct qs_slab **all, struct qs_slab *list)
{
    while (list) {
        struct qs_slab *next = list->next;
        list->next = *all;
        *all = list;
        list = next;
    }
}
struct qs_chunk *qs_page_map_large(size_t size, size_t align);
void qs_page_unmap_large(struct qs_chunk *ch);
/* Was p a large block freed lately (one of the last 64)?  For messages */
bool qs_large_freed(const void *p);
void qs_large_fork(bool before); /* its lock around fork (api/fork.c): a leaf */
struct qs_chunk *qs_page_remap_large(struct qs_chunk *ch, size_t size);

/* Large blocks' protection, what the blocks made from now on get (each
 * keeps its own in large_flags); set by the API layer from the kmalloc
 * classes' debug flags (red zones: GUARD; quarantine: KEEP) and by
 * qslab_harden():
 *   QS_LARGE_GUARD  the block ends at an inaccessible page (its size is
 *                   rounded up to pages), and an inaccessible page lies
 *                   between its header and its start
 *   QS_LARGE_KEEP   once freed, its range stays reserved and inaccessible
 *                   (memory given back) while it is one of the last
 *                   QS_LARGE_FREED freed, so that any use of it faults */
#define QS_LARGE_GUARD 1u
#define QS_LARGE_KEEP 2u
extern unsigned qs_large_protect;
/* Room in a large block's header for two tracks of the debug layer's
 * (where it was allocated, and freed): filled by the API layer while
 * large_flags is set, kept with the block's range under QS_LARGE_KEEP. */
#define QS_LARGE_TRACK_BYTES 48
void *qs_large_track(struct qs_chunk *ch, int which);
/* What a fault at address a hit, if it is one of the ranges above: a live
 * block's guard page, or a freed block kept inaccessible.  Called from a
 * signal handler: no lock, best effort (a range may change under it). */
struct qs_large_fault {
    bool freed;         /* a freed block's range (else a live block's guard page) */
    char *block;        /* the user's pointer */
    size_t size;        /* its usable size */
    const void *tracks; /* 2 tracks (allocated, freed): QS_LARGE_TRACK_BYTES each */
};
bool qs_large_fault(uintptr_t a, struct qs_large_fault *f);
/* Give-backs the kernel refused, and the bytes kept for it (page.c) */
struct qs_page_failures {
    unsigned long decommit, unmap;
    size_t decommit_bytes, unmap_bytes;
};
void qs_page_failures(struct qs_page_failures *f);
void qs_page_unmap_refused(size_t bytes); /* meta.c, large.c: a refused unmap, counted */
void qs_page_decommit_refused(size_t bytes); /* large.c: a refused decommit, counted */
/* Mark the units of [ch, ch + size) as chunk ch's (clear: nobody's) */
void qs_page_map_set(struct qs_chunk *ch, size_t size, bool clear);
static inline size_t qs_slab_bytes(unsigned order)
{
    return QS_PAGE_SIZE << order;
}
/* c's slabs hold one block each (blocks over half a slab: the big kmalloc
 * classes).  No owner keeps such a slab for c while it is free: SLUB's
 * active slab is bypassed (slub.c), and an empty slab goes to its node's
 * FIFO, under the retention rule.  SLAB's arrays keep no such block over
 * QS_OWNER_OBJ_MAX (front/slab/slab.c). */
static inline bool qs_one_per_slab(const qslab_cache *c)
{
    return c->slot_size > qs_slab_bytes(__atomic_load_n(&c->order, __ATOMIC_RELAXED)) / 2;
}
/* No owner keeps a free block over this many bytes for its next
 * allocations: SLQB's queues hold none (front/slqb/budget.c slqb_unqueued),
 * nor do SLAB's arrays (qs_slab_unarrayed).  Such a block spans eight pages
 * or more, next to which its slow paths cost little. */
#define QS_OWNER_OBJ_MAX 32768u
/* SLAB's blocks that no array keeps: those alone in their slabs and over
 * QS_OWNER_OBJ_MAX.  The power-of-two classes of 4 to 32 KiB are alone in
 * SLAB's slabs too (its orders waste at most an eighth: a 4 KiB block
 * takes a page); without arrays every allocation and free of them took the
 * node's lock, 170 and 390 cycles a malloc+free pair at 4 and 8 KiB against
 * 17 to 19 at 1 and 6 KiB. */
static inline bool qs_slab_unarrayed(const qslab_cache *c)
{
    return qs_one_per_slab(c) && c->slot_size > QS_OWNER_OBJ_MAX;
}
/* SLAB: what an owner's array of c holds at most: slab_limit, or nothing
 * while a debug twin takes the allocations (twin.c) or no array keeps c's
 * blocks (qs_slab_unarrayed). */
static inline uint32_t qs_slab_array_limit(const qslab_cache *c)
{
    if (__atomic_load_n(&c->dbg_alloc, __ATOMIC_RELAXED) || qs_slab_unarrayed(c))
        return 0;
    return __atomic_load_n(&c->slab_limit, __ATOMIC_RELAXED);
}
void qs_page_lock_all(bool lock);
/* Call fn on every slab descriptor in use (cache set), pool by pool under
 * the pool's lock (rank 3: fn takes no lock; validation of quiescent
 * caches, which cannot otherwise find SLUB's full slabs). */
void qs_page_walk(void (*fn)(struct qs_slab *s, void *arg), void *arg);
/* Keep every chunk mapped from qs_page_pin to its qs_page_unpin, so that a
 * slab found by qs_page_walk stays readable memory after the walk even if
 * it leaves its cache meanwhile (api/defrag.c; the argument is page.c's). */
void qs_page_pin(void);
void qs_page_unpin(void);
void qs_page_pins_forked(unsigned long mine); /* fork's child: the forking thread's pins */

#endif /* QSLAB_CORE_PAGE_H */
