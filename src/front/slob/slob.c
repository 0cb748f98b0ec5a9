/*
 * slob.c - the SLOB front end, after Linux's mm/slob.c (Matt Mackall's
 * "simple list of blocks"): the memory floor the other front ends are
 * measured against, at a time per operation that does not grow with the
 * number of pages (docs/fronts.md has the measurements).
 *
 * PAGES SHARED BY EVERY CACHE.  Objects of all caches are cut from slabs of
 * the page layer owned by one pseudo cache, the arena `slob-pages` (in no
 * cache list), of two kinds:
 *   pages  4 KiB, in 8-byte units: blocks of up to a page (SLOB_PAGE_MAX)
 *   runs   256 KiB, in 16-byte units: blocks over a page, up to 64 KiB
 *          (SLOB_RUN_MAX, with the alignment)
 * A block is as large as asked (kmalloc passes the request's own size), so
 * a 4,368-byte request takes 4,384 bytes of a run, not kmalloc-5120's slot;
 * a run is large enough that what is left at its end after blocks of a few
 * KiB is a few percent.  Pages stay 4 KiB for blocks of a page or less: a
 * page's free list is short, so a take that looks at all of it is cheap
 * (16 KiB pages, with a quarter of the page layer's 96-byte descriptors,
 * took twice the time a malloc and free).  Objects over SLOB_RUN_MAX come
 * from their cache's own slabs on the node lists (node.c, one node lock
 * per call), as the kernel's SLOB hands big objects to the page allocator;
 * the kmalloc classes' empty slabs of them are kept for their decay only
 * while they are at most what empty pages may be (below), past that given
 * back as they empty, as glibc unmaps a freed block over its mmap
 * threshold (object caches keep theirs by their tunables).  No per-owner
 * caching: one lock (slob_lock) for everything, as in the kernel.
 *
 * THE INDEX: A FITTING PAGE WITHOUT A WALK.  mm/slob.c walks a list of pages
 * first fit, skipping pages whose free units suffice but whose blocks are
 * too small; with many live objects that walk is most of the time (160 k
 * live strings 1.5 s, 640 k 47 s on this kind of machine).  Here a node's
 * pages of each kind with objects are in 513 buckets by their key, the
 * largest free block each knows of (pages: in units; runs: in 32-unit
 * steps), with a bitmap of the buckets that are not empty: an allocation of
 * u units takes the first set bit from u's bucket on (9 words at most), the
 * page whose largest block is the smallest that fits.  That is first fit's
 * spirit kept in O(1), and best fit by page: the fullest page that can take
 * the request serves it, so pages fill up and the large free blocks stay
 * where large requests need them instead of being spread thin over every
 * page; a page that served goes first in its bucket (the kernel's
 * rotation: the next request of the size tries it first).  A bucket's pages
 * may be too small by its step or by the alignment's slack (align / unit - 1
 * units, which fit any address): the first page of such a bucket is tried
 * once before the first bucket that surely fits.  Within the page, the
 * smallest fitting block among the first SLOB_WALK (32) of its free list is
 * taken, else the block of its key (sp->tail): a bounded search, which also
 * gives the page's new key.  A key is a free block the page has, never
 * larger than its largest (a page whose list is longer than the walk may
 * know only a smaller one, and serve smaller requests until a free merges
 * a larger block); an exact fit that is not the key's block ends the walk.
 *
 * BLOCKS.  Every byte of a run, and of a page from its 8th, belongs to one
 * block, allocated or free; every block starts with a header (the kernel keeps a header on
 * kmalloc blocks only; qslab keeps one on every block so that a bad or
 * second free is found and named like the other front ends do).  A page's
 * blocks start 8 bytes in (so that kmalloc's 16-byte aligned payloads leave
 * no slack before the first), 511 units; its header is one word:
 *   bits  0..9   units of 8 bytes, header included (1..511)
 *   bits 10..19  free block: the next on the page's free list (offset + 1;
 *                0: none); allocated block: the units of the free block
 *                just before it (0: none)
 *   bits 20..35  the cache id of the object (of the last one, once free)
 *   bits 36..63  a tag: a hash of the secret and the block's address, with
 *                its state (allocated, free, or dead: a header merged into
 *                the free block before it)
 * A run's is two words, so that its payloads are 16-byte aligned: units
 * and link in 16 bits each and a 32-bit tag, then the cache id.  The free
 * list of a page is doubly linked: a free block of 2 units or more keeps
 * its predecessor in its last word, tagged like a header (a write after
 * free there shows in validation); 1-unit free blocks (alignment slack, a
 * remainder too small for any block) are on no list and wait to be merged.
 * So a free merges with both neighbours without a walk: the next block by
 * its size, the previous one by the free units its own header records; no
 * two free blocks touch, and an empty page is one free block.  A free
 * finds its header just before the pointer: an allocated tag frees; a free
 * or dead one is a double free (named with the cache of its header);
 * anything else is a bad pointer, classified by walking the page's blocks
 * from its start (interior pointer, free memory).  What the kernel's SLOB
 * cannot tell either: an object freed, handed out again at the same
 * address, and freed through the old pointer is a valid free.
 *
 * kmalloc blocks have 16-byte aligned payloads (malloc's alignment) and
 * sizes rounded to 16 bytes; the request's own size reaches SLOB
 * (qs_kmalloc_slow), not its class's.  qslab_aligned_alloc asks for its
 * alignment (slob_kmalloc with align), or, when alignment and size do not
 * fit a page together, for a power of two, which it expects naturally
 * aligned as the classes' are: a power of two of a page or more is.  Constructors run at every
 * allocation of a page object (mm/slob.c does the same: nothing is kept
 * constructed).
 *
 * EMPTY PAGES are kept for reuse, newest first, for each kind at most an
 * eighth of the pages in use (SLOB_KEEP_FRACTION; at least SLOB_KEEP_BYTES
 * of them, 256 KiB, and at most the arena's empty_limit): a page fault
 * costs about 13 us here, so a program that frees and allocates again
 * should find its pages resident, but the floor must not hold memory a
 * shrinking program gave up.  A page that empties past the bound sends the
 * oldest kept pages, down to three quarters of it, back to the page layer
 * in one call (adjacent pages share one madvise); the purger gives back
 * those kept longer than the arena's empty_decay_ms (1 s), and trim all of
 * them, as every other front end's empty slabs (node.c).
 *
 * LOCKS.  slob_lock guards the indexes, every page's blocks and free list,
 * and the kept pages; it ranks with the node locks and is never held with
 * one: pages come from the page layer (page_new) and go back to it
 * (pages_release) outside it, and a big object's node lock is taken
 * without it (big_free frees the object, then gives back its cache's empty
 * slabs of that node, each under the node's lock alone).  A free reads the
 * header before taking the lock (to name a bad pointer without it) and
 * again under it, so that of two racing frees of one block the second
 * finds it free.  Fork takes slob_lock after the node locks
 * (slob_lock_all).
 *
 * COUNTERS.  Per cache (orphan counters, atomic): alloc_slow and new_objs
 * per allocation, free_slow and free_objs per free; the arena counts its
 * pages and runs in 4 KiB pages (new_slab, free_slab: its order is 0).
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "owner/owner.h"
#include "api/api.h"

#include <errno.h>
#include <string.h>

#define SLOB_UNIT 8 /* a page's unit; a header */
#define SLOB_BUCKETS 513 /* by largest free block >> bshift: 0 .. 512 */
#define SLOB_MAP_WORDS ((SLOB_BUCKETS + 63) / 64)
#define SLOB_WALK 32 /* free blocks a take looks at, at most */
#ifndef SLOB_KEEP_FRACTION
#define SLOB_KEEP_FRACTION 8 /* empty pages kept: at most an eighth of those in use */
#endif
#ifndef SLOB_KEEP_BYTES
#define SLOB_KEEP_BYTES ((size_t)256 << 10) /* ... or 256 KiB of them */
#endif
#define SLOB_PAGE_MAX ((size_t)4 << 10) /* the largest block of a page */
#define SLOB_RUN_MAX ((size_t)64 << 10)  /* the largest block of a run */
enum { ST_ALLOC, ST_FREE, ST_DEAD, ST_LINK };
enum { K_PAGE, K_RUN, K_NR };

/* The two kinds of SLOB page.  Blocks tile [mem + skip, mem + skip + units
 * * unit); a block starts with its header (hsize bytes), its payload
 * follows.  A page's header is one word: units, link and cache id in 10, 10
 * and 16 bits, a 28-bit tag.  A run's is two: units and link in 16 bits
 * each and a 32-bit tag, then the cache id; its payloads are 16-byte
 * aligned. */
struct slob_kind {
    unsigned unit, units; /* block sizes in these; the page's units */
    unsigned hsize;       /* header bytes: 8 or 16 */
    unsigned fbits;       /* header fields: units and link, fbits each */
    unsigned tshift;      /* the tag: bits tshift..63 */
    unsigned bshift;      /* the index's bucket: largest free block >> bshift */
    unsigned order;       /* slab order */
    unsigned skip;        /* the first block's offset in the slab */
};
static const struct slob_kind kinds[K_NR] = {
    [K_PAGE] = {8, 511, 8, 10, 36, 0, 0, 8},    /* 4 KiB pages */
    [K_RUN] = {16, 16384, 16, 16, 32, 5, 6, 0}, /* 256 KiB runs */
};
static inline const struct slob_kind *kind_of(const struct qs_slab *sp)
{
    return &kinds[sp->order == kinds[K_RUN].order ? K_RUN : K_PAGE];
}
static inline unsigned kind_nr(const struct qs_slab *sp)
{
    return sp->order == kinds[K_RUN].order ? K_RUN : K_PAGE;
}

/* A node's pages of one kind with objects, by their largest free block. */
struct slob_index {
    uint64_t map[SLOB_MAP_WORDS];         /* bit k: bucket[k] is not empty */
    struct qs_slab *bucket[SLOB_BUCKETS]; /* doubly linked by next/prev, NULL-ended */
    unsigned long pages;                  /* in its buckets */
};

qslab_cache qs_slob_arena;
static qs_lock slob_lock; /* rank: with node locks (never held together) */
static struct slob_index pages_by_max[K_NR][QS_MAX_NODES];
static unsigned long nr_pages[K_NR];          /* in the indexes */
static struct qs_slab *keep[K_NR], *keep_tail[K_NR]; /* empty, newest first (->next, ->prev) */
static unsigned nr_keep[K_NR];                /* on keep */
static uint64_t slob_secret;

/* ---- block headers ---- */
#define FMASK(K) ((1u << (K)->fbits) - 1)
#define H_UNITS(K, h) ((unsigned)((h) & FMASK(K)))
#define H_NEXT(K, h) ((unsigned)(((h) >> (K)->fbits) & FMASK(K)))
#define H_TAG(K, h) ((uint32_t)((h) >> (K)->tshift))

static inline uint32_t tag_of(const struct slob_kind *K, const void *blk, int st)
{
    uint64_t x = ((uintptr_t)blk ^ slob_secret) * 0x9e3779b97f4a7c15ULL;
    uint32_t t = (uint32_t)((x >> 32) ^ ((uint64_t)(st + 1) * 0x5bd1e995u));
    return K->tshift == 32 ? t : t & ((1u << (64 - K->tshift)) - 1);
}
static inline uint64_t *hdr(void *blk)
{
    return (uint64_t *)blk;
}
/* Header and link words are read and written with relaxed atomics: an
 * allocated block's header changes under slob_lock when the block before
 * it is freed or taken (the free units it records), while its owner's free
 * or usable-size call reads it before taking the lock (page_free,
 * slob_usable), as a second free reads a free block's. */
static inline uint64_t hget(const void *w)
{
    return __atomic_load_n((const uint64_t *)w, __ATOMIC_RELAXED);
}
static inline void hset(void *w, uint64_t v)
{
    __atomic_store_n((uint64_t *)w, v, __ATOMIC_RELAXED);
}
/* block b's header: state, units, link and cache id */
static inline void sethdr(const struct slob_kind *K, void *b, int st, unsigned units, unsigned next,
                          unsigned id)
{
    uint64_t h = (uint64_t)units | (uint64_t)next << K->fbits | (uint64_t)tag_of(K, b, st) << K->tshift;
    if (K->hsize == 8) {
        hset(b, h | (uint64_t)id << (2 * K->fbits));
    } else {
        hset(hdr(b), h);
        hset(hdr(b) + 1, id);
    }
}
/* the cache id of block b, whose header word is h */
static inline unsigned hid(const struct slob_kind *K, const void *b, uint64_t h)
{
    return K->hsize == 8 ? (unsigned)((h >> (2 * K->fbits)) & 0xffff)
                         : (unsigned)(hget((const uint64_t *)b + 1) & 0xffff);
}
/* the state of a header, or -1 if it is none */
static inline int hstate(const struct slob_kind *K, const void *blk, uint64_t h)
{
    for (int st = ST_ALLOC; st <= ST_DEAD; st++)
        if (H_TAG(K, h) == tag_of(K, blk, st))
            return st;
    return -1;
}
static inline char *page_base(const struct qs_slab *sp)
{
    return sp->mem + kind_of(sp)->skip;
}
static inline char *page_end(const struct qs_slab *sp)
{
    return sp->mem + qs_slab_bytes(sp->order);
}
static inline unsigned uoff(const struct qs_slab *sp, const char *b)
{
    return (unsigned)((size_t)(b - page_base(sp)) / kind_of(sp)->unit);
}
static const char *name_of(unsigned id)
{
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    return c ? c->name : "(a destroyed cache)";
}

/* ---- the index (slob_lock) ---- */
static inline struct slob_index *index_of(unsigned kind, int node)
{
    return &pages_by_max[kind][node];
}
/* The first non-empty bucket at `from` or above, or -1. */
static int index_find(const struct slob_index *ix, unsigned from)
{
    unsigned w = from / 64;
    if (w >= SLOB_MAP_WORDS)
        return -1;
    uint64_t m = ix->map[w] & (~(uint64_t)0 << (from % 64));
    while (!m) {
        if (++w == SLOB_MAP_WORDS)
            return -1;
        m = ix->map[w];
    }
    return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
}
static void index_del(struct slob_index *ix, struct qs_slab *sp)
{
    unsigned k = sp->empty_ms >> kind_of(sp)->bshift;
    if (sp->prev)
        sp->prev->next = sp->next;
    else if (!(ix->bucket[k] = sp->next))
        ix->map[k / 64] &= ~((uint64_t)1 << (k % 64));
    if (sp->next)
        sp->next->prev = sp->prev;
    sp->next = sp->prev = NULL;
    ix->pages--;
    QS_STORE(nr_pages[kind_nr(sp)], nr_pages[kind_nr(sp)] - 1); /* read unlocked: big_free */
}
/* sp goes first in the bucket of its largest free block, `max` units (0:
 * full): the page that served last is the first one tried next. */
static void index_add(struct slob_index *ix, struct qs_slab *sp, unsigned max)
{
    unsigned k = max >> kind_of(sp)->bshift;
    sp->empty_ms = max;
    sp->state = max ? QS_SLAB_PARTIAL : QS_SLAB_FULL;
    sp->prev = NULL;
    sp->next = ix->bucket[k];
    if (sp->next)
        sp->next->prev = sp;
    else
        ix->map[k / 64] |= (uint64_t)1 << (k % 64);
    ix->bucket[k] = sp;
    ix->pages++;
    QS_STORE(nr_pages[kind_nr(sp)], nr_pages[kind_nr(sp)] + 1);
}

/* ---- blocks (slob_lock) ---- */
/* Free list links: a block's unit offset plus one, 0 for none */
static inline char *at(const struct qs_slab *sp, unsigned ref)
{
    return ref ? page_base(sp) + (size_t)(ref - 1) * kind_of(sp)->unit : NULL;
}
static inline unsigned ref(const struct qs_slab *sp, const char *b)
{
    return b ? uoff(sp, b) + 1 : 0;
}
/* A listed free block's last word: the previous one on the list.  The last
 * word, not the second: a free block's second word may be the header of
 * the object merged into it (a 1-unit block before it), which must still
 * say "dead" to name a second free; its last word is never a header that
 * matters (only a 1-unit block, never an object, ends with its header). */
static inline uint64_t *link(const struct qs_slab *sp, char *blk)
{
    const struct slob_kind *K = kind_of(sp);
    return (uint64_t *)(blk + (size_t)H_UNITS(K, hget(blk)) * K->unit) - 1;
}
static inline uint64_t mklink(const uint64_t *w, unsigned prev)
{
    return (uint64_t)prev | (uint64_t)tag_of(&kinds[K_PAGE], w, ST_LINK) << 36;
}
#define LINK_REF(w) ((unsigned)((w) & 0xffff))
static inline char *lprev(const struct qs_slab *sp, char *b)
{
    unsigned r = LINK_REF(hget(link(sp, b))); /* in the page whatever the word */
    return r <= kind_of(sp)->units ? at(sp, r) : NULL;
}
/* the free block b (header written, 2 units or more) goes first on the list */
static void fl_push(struct qs_slab *sp, char *b)
{
    const struct slob_kind *K = kind_of(sp);
    char *head = sp->freelist;
    uint64_t h = hget(b);
    sethdr(K, b, ST_FREE, H_UNITS(K, h), ref(sp, head), hid(K, b, h));
    uint64_t *lb = link(sp, b);
    hset(lb, mklink(lb, 0));
    if (head) {
        uint64_t *lh = link(sp, head);
        hset(lh, mklink(lh, ref(sp, b)));
    }
    sp->freelist = b;
}
static void fl_unlink(struct qs_slab *sp, char *b)
{
    const struct slob_kind *K = kind_of(sp);
    uint64_t h = hget(b);
    char *prev = lprev(sp, b), *next = at(sp, H_NEXT(K, h));
    if (prev) {
        uint64_t hp = hget(prev);
        sethdr(K, prev, ST_FREE, H_UNITS(K, hp), H_NEXT(K, h), hid(K, prev, hp));
    } else {
        sp->freelist = next;
    }
    if (next) {
        uint64_t *ln = link(sp, next);
        hset(ln, mklink(ln, ref(sp, prev)));
    }
}
/* A free block of n units at b (header to write, id its cache's): on the
 * list if it can hold the link. */
static void free_block(struct qs_slab *sp, char *b, unsigned n, unsigned id)
{
    sethdr(kind_of(sp), b, ST_FREE, n, 0, id);
    if (n >= 2)
        fl_push(sp, b);
}
/* The allocated block after a free block of `pf` units (0: after an
 * allocated one) at b, if b is in the page, records it. */
static void set_pfree(struct qs_slab *sp, char *b, unsigned pf)
{
    if (b < page_end(sp)) {
        const struct slob_kind *K = kind_of(sp);
        uint64_t h = hget(b);
        sethdr(K, b, ST_ALLOC, H_UNITS(K, h), pf, hid(K, b, h));
    }
}

/* Units from free block b (whose payload would start 8 bytes in) to the
 * first block start whose payload is aligned to `align`. */
static inline unsigned align_delta(const struct slob_kind *K, const char *b, size_t align)
{
    uintptr_t pay = (uintptr_t)b + K->hsize;
    return (unsigned)((((pay + align - 1) & ~(uintptr_t)(align - 1)) - pay) / K->unit);
}

/* Best fit in page sp among the first SLOB_WALK blocks of its free list:
 * the smallest listed free block with room for `units` at a payload
 * aligned to `align`, else the page's largest block (sp->tail); the
 * payload, or NULL.  *max: the page's key after the take: the largest free
 * block it knows of, sp->tail, never larger than the page's largest (a
 * page whose list is longer than the walk may know a smaller one, and so
 * serve smaller requests until a free finds it a larger block).  The walk
 * stops early at an exact fit that is not the known largest block. */
static void *page_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id,
                       unsigned *max)
{
    const struct slob_kind *K = kind_of(sp);
    unsigned old_max = sp->empty_ms, best_n = ~0u, best_delta = 0, max1 = 0, max2 = 0, walked = 0;
    char *best = NULL, *max1_b = NULL, *max2_b = NULL, *maxb = sp->tail;
    for (char *b = sp->freelist; b && walked < SLOB_WALK; b = at(sp, H_NEXT(K, hget(b))), walked++) {
        unsigned n = H_UNITS(K, hget(b));
        if (n > max1) {
            max2 = max1;
            max2_b = max1_b;
            max1 = n;
            max1_b = b;
        } else if (n > max2) {
            max2 = n;
            max2_b = b;
        }
        if (n < units || n >= best_n)
            continue;
        unsigned delta = align_delta(K, b, align);
        if (n < delta + units)
            continue;
        best = b;
        best_n = n;
        best_delta = delta;
        if (n == delta + units && b != maxb)
            break; /* exact, and not the known largest block */
    }
    if (!best && maxb && old_max >= units) { /* the known largest block, past the walk */
        unsigned delta = align_delta(K, maxb, align);
        if (old_max >= delta + units) {
            best = maxb;
            best_n = old_max;
            best_delta = delta;
        }
    }
    if (!best)
        return NULL;
    unsigned rest = best_n - best_delta - units;
    char *a = best + (size_t)best_delta * K->unit, *after = a + (size_t)units * K->unit;
    /* the page's key: the largest block known after the take */
    unsigned key = 0;
    char *key_b = NULL;
    if (best != maxb && maxb) {
        key = old_max;
        key_b = maxb;
    }
    char *other_b = best == max1_b ? max2_b : max1_b;
    unsigned other = best == max1_b ? max2 : max1;
    if (other > key && other_b != maxb) {
        key = other;
        key_b = other_b;
    }
    if (rest > key) {
        key = rest;
        key_b = after;
    }
    if (best_delta > key) {
        key = best_delta;
        key_b = best;
    }
    *max = key;
    sp->tail = key_b;

    unsigned bid = hid(K, best, hget(best));
    fl_unlink(sp, best);
    if (best_delta) /* the slack before the aligned block stays free */
        free_block(sp, best, best_delta, bid);
    sethdr(K, a, ST_ALLOC, units, best_delta, id);
    if (rest) /* the rest stays free */
        free_block(sp, after, rest, bid);
    set_pfree(sp, after + (size_t)rest * K->unit, rest);
    sp->objects -= units;
    sp->inuse++;
    return a + K->hsize;
}

/* Give block b (allocated, `units`) back to page sp, merging it with free
 * neighbours, found without a walk: the next block by b's size, the
 * previous one by the free units b's header records; merged-away headers
 * become dead ones.  Returns the units of the free block that holds b. */
static unsigned page_give(struct qs_slab *sp, char *b, unsigned units, unsigned id)
{
    const struct slob_kind *K = kind_of(sp);
    uint64_t h = hget(b);
    unsigned n = units, pf = H_NEXT(K, h);
    char *nb = b + (size_t)units * K->unit;
    if (nb < page_end(sp)) {
        uint64_t hn = hget(nb);
        if (H_TAG(K, hn) == tag_of(K, nb, ST_FREE)) { /* merge the next one */
            if (H_UNITS(K, hn) >= 2)
                fl_unlink(sp, nb);
            n += H_UNITS(K, hn);
            sethdr(K, nb, ST_DEAD, 0, 0, hid(K, nb, hn));
        }
    }
    char *start = b;
    if (pf) { /* into the previous one */
        char *pb = b - (size_t)pf * K->unit;
        uint64_t hp = hget(pb);
        unsigned lp = pf >= 2 ? LINK_REF(hget(link(sp, pb))) : 0;
        n += pf;
        sethdr(K, b, ST_DEAD, 0, 0, id);
        sethdr(K, pb, ST_FREE, n, H_NEXT(K, hp), hid(K, pb, hp));
        if (pf == 1) {
            fl_push(sp, pb); /* off the list until now */
        } else {
            uint64_t *lw = link(sp, pb); /* its new last word */
            hset(lw, mklink(lw, lp));
        }
        start = pb;
    } else {
        free_block(sp, b, n, id);
    }
    set_pfree(sp, start + (size_t)n * K->unit, n);
    if (n > sp->empty_ms)
        sp->tail = start; /* the largest block known: the caller's new key */
    sp->objects += units;
    sp->inuse--;
    return n;
}

static void page_init(struct qs_slab *sp)
{
    const struct slob_kind *K = kind_of(sp);
    sp->freelist = NULL;
    free_block(sp, page_base(sp), K->units, 0);
    sp->objects = K->units;
    sp->inuse = 0;
    sp->empty_ms = K->units; /* its largest free block, for page_take */
    sp->tail = page_base(sp);
}

/* ---- empty pages (slob_lock) ---- */
static void keep_unlink(struct qs_slab *sp)
{
    unsigned k = kind_nr(sp);
    if (sp->prev)
        sp->prev->next = sp->next;
    else
        keep[k] = sp->next;
    if (sp->next)
        sp->next->prev = sp->prev;
    else
        keep_tail[k] = sp->prev;
    sp->next = sp->prev = NULL;
    nr_keep[k]--;
}
/* How many empty pages of a kind may be kept: an eighth of those in use,
 * at least SLOB_KEEP_BYTES of them, at most the arena's empty_limit. */
static unsigned long keep_limit(unsigned k)
{
    unsigned long lim = nr_pages[k] / SLOB_KEEP_FRACTION, cap = QS_LOAD(qs_slob_arena.empty_limit);
    unsigned long floor = SLOB_KEEP_BYTES >> (QS_PAGE_SHIFT + kinds[k].order);
    if (lim < floor)
        lim = floor;
    return lim < cap ? lim : cap;
}
/* Keep sp (empty), newest first; past the limit, the oldest pages down to
 * three quarters of it are returned as a ->next list, to be given back
 * outside the lock in one call (the caller's). */
static struct qs_slab *keep_push(struct qs_slab *sp)
{
    unsigned k = kind_nr(sp);
    sp->state = QS_SLAB_EMPTY;
    sp->empty_ms = (uint32_t)qs_os_now_ms();
    sp->prev = NULL;
    sp->next = keep[k];
    if (keep[k])
        keep[k]->prev = sp;
    else
        keep_tail[k] = sp;
    keep[k] = sp;
    nr_keep[k]++;
    unsigned long lim = keep_limit(k);
    if (nr_keep[k] <= lim)
        return NULL;
    struct qs_slab *release = NULL;
    while (nr_keep[k] > lim - lim / 4) {
        struct qs_slab *old = keep_tail[k];
        keep_unlink(old);
        old->next = release;
        release = old;
    }
    return release;
}

/* A new page of a kind on `node` (slob_lock not held): a kept one, or the
 * page layer's; NULL on ENOMEM. */
static struct qs_slab *page_new(unsigned kind, int node)
{
    qs_lock_acquire(&slob_lock);
    for (struct qs_slab *sp = keep[kind]; sp; sp = sp->next) {
        if (sp->node == node) {
            keep_unlink(sp);
            sp->empty_ms = kinds[kind].units; /* one free block (page_give merged it) */
            sp->tail = page_base(sp);
            qs_lock_release(&slob_lock);
            return sp;
        }
    }
    qs_lock_release(&slob_lock);
    struct qs_slab *sp = qs_page_alloc_slab(node, kinds[kind].order);
    if (!sp)
        return NULL;
    qslab_cache *a = &qs_slob_arena;
    sp->base = sp->mem;
    sp->recip = ~(uint64_t)0 / SLOB_UNIT + 1; /* any 8-byte step passes qs_slab_valid_obj */
    sp->cache_id = a->id;
    sp->owner = NULL; /* no queue's: the fast frees miss */
    sp->tail = NULL;
    sp->next = sp->prev = NULL;
    page_init(sp);
    __atomic_store_n(&sp->span, (uint32_t)qs_slab_bytes(sp->order), __ATOMIC_RELAXED);
    __atomic_store_n(&sp->cache, a, __ATOMIC_RELEASE);
    qs_stat(a, NULL, QS_NEW_SLAB, qs_slab_bytes(sp->order) / QS_PAGE_SIZE); /* in 4 KiB pages */
    qs_stat(a, NULL, QS_NEW_OBJS, kinds[kind].units);
    return sp;
}

/* Give back the ->next list of empty pages (slob_lock not held); bytes
 * the OS took. */
static size_t pages_release(struct qs_slab *list)
{
    if (!list)
        return 0;
    for (struct qs_slab *sp = list; sp; sp = sp->next) {
        qs_stat(&qs_slob_arena, NULL, QS_FREE_SLAB, qs_slab_bytes(sp->order) / QS_PAGE_SIZE);
        qs_stat(&qs_slob_arena, NULL, QS_FREE_OBJS, kind_of(sp)->units);
    }
    return qs_page_free_slabs(list); /* adjacent pages: one madvise */
}

static int local_node(void)
{
    if (!qs_multi_node)
        return 0;
    if (qs_percpu()) { /* the CPU's node, as qslab_current_node says */
        int cpu = qs_owner_cpu();
        if (cpu >= 0)
            return qs_node_of_cpu(cpu);
        return qs_node_of_cpu(qs_os_current_cpu());
    }
    if (qs_self.state == 0) /* a thread's node is fixed at its start */
        qs_owner_init();
    return qs_self.node;
}

/* ---- big objects: their cache's own slabs on the node lists ---- */
/* Bytes of the SLOB pages and runs in use (read without the lock: a
 * bound, not an account). */
static size_t slob_bytes_in_use(void)
{
    size_t b = 0;
    for (unsigned k = 0; k < K_NR; k++)
        b += QS_LOAD(nr_pages[k]) * qs_slab_bytes(kinds[k].order);
    return b;
}

static void big_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && qs_double_free_check(c, NULL, s, obj))
        return;
    int node = s->node; /* s may go back to the page layer with the free */
    qs_free_direct(c, obj); /* to its node list, under the node's lock */
    /* The kmalloc classes' empty slabs of big blocks on this node are kept
     * for their decay (1 s: a program that frees and allocates big blocks
     * again, as realloc does, faults no pages in) while they are at most an
     * eighth of SLOB's pages and runs in use, or SLOB_KEEP_BYTES; past that
     * this class's are given back at once (a floor keeps no more empty slabs
     * of sizes it may not see again than it keeps empty pages).  Object
     * caches keep their empty slabs by their tunables. */
    struct qs_node *n = &c->nodes[node];
    if (!c->is_kmalloc || c->obj_size + SLOB_UNIT <= SLOB_RUN_MAX || !QS_LOAD(n->nr_empty))
        return;
    size_t held = 0, lim = slob_bytes_in_use() / SLOB_KEEP_FRACTION;
    if (lim < SLOB_KEEP_BYTES)
        lim = SLOB_KEEP_BYTES;
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES && held <= lim; i++) {
        qslab_cache *k = &qs_kmalloc_caches[i];
        if (k->front == QS_FRONT_SLOB && k->obj_size + SLOB_UNIT > SLOB_RUN_MAX)
            held += QS_LOAD(k->nodes[node].nr_empty) * qs_slab_bytes(QS_LOAD(k->order));
    }
    if (held > lim)
        qs_node_shrink(c, NULL, n);
}

/* ---- allocation ---- */
/* A block of `units` of page kind `kind` for cache c on `node`, its
 * payload aligned to `align`; the payload, or NULL with errno set. */
static void *take(qslab_cache *c, unsigned kind, unsigned u, size_t align, int node)
{
    const struct slob_kind *K = &kinds[kind];
    /* a free block of u + slack units has room for the aligned block
     * whatever its address; one of fewer (down to u) may */
    unsigned slack = align > K->unit ? (unsigned)(align / K->unit) - 1 : 0, max = 0;
    unsigned sure = u + slack, sure_k = (sure + (1u << K->bshift) - 1) >> K->bshift;
    struct slob_index *ix = index_of(kind, node);
    struct qs_slab *sp = NULL;
    void *p = NULL;
    qs_lock_acquire(&slob_lock);
    int k = index_find(ix, u >> K->bshift);
    if (k >= 0 && (unsigned)k < sure_k) { /* the fullest page that may fit */
        sp = ix->bucket[k];
        if (sp->empty_ms < u || !(p = page_take(sp, u, align, c->id, &max)))
            k = index_find(ix, sure_k);
    }
    if (!p && k >= 0) { /* the fullest page that fits */
        sp = ix->bucket[k];
        p = page_take(sp, u, align, c->id, &max);
    }
    if (p && max != sp->empty_ms) {
        index_del(ix, sp);
        index_add(ix, sp, max);
    }
    qs_lock_release(&slob_lock);
    if (!p) {
        if (!(sp = page_new(kind, node))) {
            errno = ENOMEM;
            return NULL;
        }
        qs_lock_acquire(&slob_lock);
        p = page_take(sp, u, align, c->id, &max); /* an empty page: always fits */
        index_add(ix, sp, max);
        qs_lock_release(&slob_lock);
    }
    return p;
}

static void *slob_alloc_align(qslab_cache *c, size_t size, size_t align, int node)
{
    if (align < SLOB_UNIT)
        align = SLOB_UNIT;
    size_t units = 1 + (size + SLOB_UNIT - 1) / SLOB_UNIT;
    if (units < 2)
        units = 2;
    if (node < 0)
        node = local_node();
    void *p;
    if (units * SLOB_UNIT + align - SLOB_UNIT <= SLOB_PAGE_MAX) { /* in a page */
        p = take(c, K_PAGE, (unsigned)units, align, node);
    } else if (size + align <= SLOB_RUN_MAX) { /* in a run: 16-byte units and header */
        p = take(c, K_RUN, (unsigned)((size + 16 + 15) / 16), align, node);
    } else {
        return qs_node_alloc(c, NULL, node); /* its cache's own slabs */
    }
    if (!p)
        return NULL;
    qs_stat(c, NULL, QS_ALLOC_SLOW, 1);
    qs_stat(c, NULL, QS_NEW_OBJS, 1);
    if (c->ctor)
        c->ctor(p);
    return p;
}

static void *slob_alloc(qslab_cache *c, int node)
{
    return slob_alloc_align(c, c->obj_size, c->align, node);
}

/* kmalloc: the request's size, 16-byte aligned payloads in blocks of a
 * multiple of 16 bytes (a block starts 8 bytes before a 16-byte boundary,
 * so the next one does too); `align` (0: 16) from qslab_aligned_alloc.  c
 * is the request's class: a block too big for a page is its object. */
static void *slob_kmalloc(qslab_cache *c, size_t size, size_t align)
{
    /* a power of two of a page or more is naturally aligned, as in its
     * class's slabs: qslab_aligned_alloc asks kmalloc for one when the
     * alignment and the size do not fit a page together (in a run the
     * slack before the block stays free; past a run, the class's slabs) */
    if (size >= QS_PAGE_SIZE && !(size & (size - 1)) && align < size)
        align = size;
    size_t sz = size < 8 ? 8 : size;
    sz = ((sz + SLOB_UNIT + 15) & ~(size_t)15) - SLOB_UNIT;
    return slob_alloc_align(c, sz, align > 16 ? align : 16, QSLAB_NUMA_NO_NODE);
}

/* ---- free ---- */
/* p, a pointer into page sp, is no allocated block's start: report what
 * it is (expected: the cache it was freed to, or NULL). */
void qs_slob_bad_free(qslab_cache *expected, struct qs_slab *sp, const void *p)
{
    const struct slob_kind *K = kind_of(sp);
    const char *want = expected ? expected->name : NULL;
    char *b = page_base(sp), *end = page_end(sp);
    if ((const char *)p >= b + K->hsize && (const char *)p <= end &&
        ((uintptr_t)p & (SLOB_UNIT - 1)) == 0) {
        char *h = (char *)p - K->hsize;
        int st = hstate(K, h, hget(h));
        if (st == ST_FREE || st == ST_DEAD) {
            qs_fatal("double free of %p in cache %s", p, want ? want : name_of(hid(K, h, hget(h))));
            return;
        }
    }
    qs_lock_acquire(&slob_lock); /* walk the blocks: they tile the page */
    while (b < end) {
        uint64_t h = hget(b);
        int st = hstate(K, b, h);
        unsigned n = H_UNITS(K, h);
        if ((st != ST_ALLOC && st != ST_FREE) || n == 0 || b + (size_t)n * K->unit > end)
            break;
        if ((const char *)p < b + (size_t)n * K->unit) {
            qs_lock_release(&slob_lock);
            if (st == ST_ALLOC)
                qs_fatal("invalid free of %p: interior pointer into object %p of cache %s", p,
                         b + K->hsize, name_of(hid(K, b, h)));
            else
                qs_fatal("invalid free of %p: not an allocated object (free memory of a SLOB "
                         "page)%s%s", p, want ? ", cache " : "", want ? want : "");
            return;
        }
        b += (size_t)n * K->unit;
    }
    qs_lock_release(&slob_lock);
    if (b == end) /* the blocks are sound: p is in a run's 8 bytes before or after them */
        qs_fatal("invalid free of %p: not an allocated object (free memory of a SLOB page)%s%s",
                 p, want ? ", cache " : "", want ? want : "");
    else
        qs_fatal("invalid free of %p: SLOB page %p corrupt at %p (a block header overwritten)",
                 p, sp->mem, b);
}

/* obj is in page sp (the caller checked it is 8-byte aligned inside it) */
static void page_free(qslab_cache *expected, struct qs_slab *sp, void *obj)
{
    const struct slob_kind *K = kind_of(sp);
    char *b = (char *)obj - K->hsize;
    uint64_t h;
    if ((char *)obj < page_base(sp) + K->hsize || (char *)obj > page_end(sp) ||
        hstate(K, b, (h = hget(b))) != ST_ALLOC) {
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    unsigned id = hid(K, b, h), units = H_UNITS(K, h);
    /* the neighbours the merge reads, fetched while the lock is taken */
    __builtin_prefetch(b + (size_t)units * K->unit, 1);
    if (H_NEXT(K, h))
        __builtin_prefetch(b - (size_t)H_NEXT(K, h) * K->unit, 1);
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    if (expected && c != expected) {
        qs_fatal("invalid free of %p: freed to cache %s but it belongs to cache %s", obj,
                 expected->name, name_of(id));
        return;
    }
    struct qs_slab *release = NULL;
    struct slob_index *ix = index_of(kind_nr(sp), sp->node);
    qs_lock_acquire(&slob_lock);
    /* checked again under the lock: a racing second free loses here */
    if (hstate(K, b, hget(b)) != ST_ALLOC) {
        qs_lock_release(&slob_lock);
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    unsigned merged = page_give(sp, b, units, id);
    if (sp->inuse == 0) { /* empty: kept, and the oldest past the limit given back */
        index_del(ix, sp);
        release = keep_push(sp);
    } else if (merged > sp->empty_ms) { /* a larger block: another bucket */
        index_del(ix, sp);
        index_add(ix, sp, merged);
    }
    bool kept = nr_keep[K_PAGE] || nr_keep[K_RUN];
    qs_lock_release(&slob_lock);
    if (c) {
        qs_stat(c, NULL, QS_FREE_SLOW, 1);
        qs_stat(c, NULL, QS_FREE_OBJS, 1);
    }
    if (release)
        pages_release(release);
    if (kept) /* the purger gives them back after their decay */
        qs_node_purger_want();
}

static void slob_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (c == &qs_slob_arena)
        page_free(NULL, s, obj);
    else
        big_free(c, s, obj);
}

static void slob_free_to(qslab_cache *expected, struct qs_slab *s, void *obj)
{
    if (s->cache == &qs_slob_arena)
        page_free(expected, s, obj);
    else
        qs_bad_free(expected, obj);
}

static size_t slob_usable(struct qs_slab *s, const void *obj)
{
    if (s->cache != &qs_slob_arena)
        return s->cache->is_kmalloc ? s->cache->slot_size : s->cache->obj_size;
    const struct slob_kind *K = kind_of(s);
    char *b = (char *)obj - K->hsize;
    uint64_t h;
    if ((const char *)obj < page_base(s) + K->hsize || (const char *)obj > page_end(s) ||
        hstate(K, b, (h = hget(b))) != ST_ALLOC) {
        qs_slob_bad_free(NULL, s, obj);
        return 0;
    }
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[hid(K, b, h)], __ATOMIC_ACQUIRE);
    size_t pay = (size_t)H_UNITS(K, h) * K->unit - K->hsize;
    return c && !c->is_kmalloc && c->obj_size < pay ? c->obj_size : pay;
}

/* ---- cache-wide ---- */
static size_t give_back(bool all, unsigned *left)
{
    struct qs_slab *release = NULL;
    uint32_t now = (uint32_t)qs_os_now_ms(), decay = QS_LOAD(qs_slob_arena.empty_decay_ms);
    qs_lock_acquire(&slob_lock);
    /* keep is newest first (pages are pushed as they empty; page_new takes
     * one out and leaves the others' order): the old enough are taken from
     * its tail until a young one */
    for (unsigned k = 0; k < K_NR; k++)
        while (keep_tail[k] && (all || now - keep_tail[k]->empty_ms >= decay)) {
            struct qs_slab *sp = keep_tail[k];
            keep_unlink(sp);
            sp->next = release;
            release = sp;
        }
    *left = nr_keep[K_PAGE] + nr_keep[K_RUN];
    qs_lock_release(&slob_lock);
    return pages_release(release);
}

static size_t slob_sweep(bool all)
{
    unsigned left;
    size_t bytes = give_back(all, &left);
    if (left)
        qs_node_purger_want();
    return bytes;
}

static size_t slob_shrink(qslab_cache *c)
{
    unsigned left;
    size_t bytes = give_back(true, &left);
    for (int n = 0; n < qs_nr_nodes; n++) /* its big objects' empty slabs */
        bytes += qs_node_shrink(c, NULL, &c->nodes[n]);
    return bytes;
}

/* Walk one page: blocks tile it, headers are valid, no two free blocks
 * touch, each allocated block records the free block before it, the free
 * list holds every free block of 2 units or more once with its links both
 * ways, the page's counts match its blocks, and its key is a free block
 * it has, no larger than its largest.  Counts c's objects into w. */
static void page_check(struct qs_walk *w, qslab_cache *c, struct qs_slab *sp)
{
    const struct slob_kind *K = kind_of(sp);
    char *b = page_base(sp), *end = page_end(sp);
    unsigned long freeu = 0, alloc = 0, max = 0, listed = 0;
    unsigned before = 0; /* units of the free block before b, 0: none */
    while (b < end) {
        uint64_t h = hget(b);
        int st = hstate(K, b, h);
        unsigned n = H_UNITS(K, h);
        if ((st != ST_ALLOC && st != ST_FREE) || n == 0 || b + (size_t)n * K->unit > end) {
            qs_walk_problem(w, "SLOB block header overwritten", b);
            return;
        }
        if (st == ST_FREE) {
            if (before)
                qs_walk_problem(w, "SLOB free blocks not merged", b);
            freeu += n;
            listed += n >= 2;
            if (n > max)
                max = n;
            before = n;
        } else {
            if (H_NEXT(K, h) != before)
                qs_walk_problem(w, "SLOB block's record of the free block before it wrong", b);
            alloc++;
            if (c && hid(K, b, h) == c->id)
                w->inuse++;
            before = 0;
        }
        b += (size_t)n * K->unit;
    }
    unsigned long k = 0;
    char *prev = NULL;
    for (char *f = sp->freelist; f; prev = f, f = at(sp, H_NEXT(K, hget(f))), k++) {
        if (k == listed || f < page_base(sp) || f >= end ||
            H_TAG(K, hget(f)) != tag_of(K, f, ST_FREE) || H_UNITS(K, hget(f)) < 2 ||
            hget(link(sp, f)) != mklink(link(sp, f), ref(sp, prev))) {
            qs_walk_problem(w, "SLOB free list corrupt (a write after free?)", f);
            return;
        }
    }
    if (k != listed)
        qs_walk_problem(w, "SLOB free list misses free blocks", sp->mem);
    if (freeu != sp->objects || alloc != sp->inuse)
        qs_walk_problem(w, "SLOB page counts do not match its blocks", sp->mem);
    /* its key: a free block it has, no larger than its largest */
    char *kb = sp->tail;
    if (sp->empty_ms > max ||
        (sp->empty_ms ? !kb || kb < page_base(sp) || kb >= end ||
                            H_TAG(K, hget(kb)) != tag_of(K, kb, ST_FREE) ||
                            H_UNITS(K, hget(kb)) != sp->empty_ms
                      : kb != NULL))
        qs_walk_problem(w, "SLOB page's largest free block wrong", sp->mem);
    if (__atomic_load_n(&sp->cache, __ATOMIC_RELAXED) != &qs_slob_arena)
        qs_walk_problem(w, "SLOB page not owned by the arena", sp->mem);
}

static void slob_validate(qslab_cache *c, struct qs_walk *w)
{
    qs_lock_acquire(&slob_lock);
    for (unsigned kind = 0; kind < K_NR; kind++) {
        const struct slob_kind *K = &kinds[kind];
        unsigned long all = 0;
        for (int node = 0; node < qs_nr_nodes; node++) {
            struct slob_index *ix = index_of(kind, node);
            unsigned long n = 0;
            for (unsigned k = 0; k < SLOB_BUCKETS; k++) {
                bool bit = (ix->map[k / 64] >> (k % 64)) & 1;
                if (bit != (ix->bucket[k] != NULL))
                    qs_walk_problem(w, "SLOB index bitmap does not match its buckets",
                                    &ix->map[k / 64]);
                struct qs_slab *last = NULL;
                for (struct qs_slab *sp = ix->bucket[k]; sp; last = sp, sp = sp->next, n++) {
                    if (kind_nr(sp) != kind || sp->empty_ms >> K->bshift != k ||
                        sp->node != (unsigned)node || sp->inuse == 0 ||
                        (sp->objects == 0 && sp->empty_ms != 0) ||
                        sp->state != (sp->empty_ms ? QS_SLAB_PARTIAL : QS_SLAB_FULL))
                        qs_walk_problem(w, "SLOB page in the wrong bucket of the index", sp->mem);
                    if (sp->prev != last)
                        qs_walk_problem(w, "SLOB index links corrupt", sp->mem);
                    page_check(w, c, sp);
                }
            }
            if (n != ix->pages)
                qs_walk_problem(w, "SLOB index page count does not match", &ix->pages);
            all += n;
        }
        if (all != nr_pages[kind])
            qs_walk_problem(w, "SLOB page count does not match", &nr_pages[kind]);
        unsigned k = 0;
        struct qs_slab *newer = NULL;
        for (struct qs_slab *sp = keep[kind]; sp; newer = sp, sp = sp->next, k++) {
            if (kind_nr(sp) != kind || sp->inuse || sp->objects != K->units ||
                sp->state != QS_SLAB_EMPTY)
                qs_walk_problem(w, "kept SLOB page not empty", sp->mem);
            if (sp->prev != newer)
                qs_walk_problem(w, "kept SLOB page links corrupt", sp->mem);
            /* newest first: give_back takes the old from the tail */
            if (newer && (int32_t)(newer->empty_ms - sp->empty_ms) < 0)
                qs_walk_problem(w, "kept SLOB pages out of age order", sp->mem);
        }
        if (keep_tail[kind] != newer)
            qs_walk_problem(w, "kept SLOB pages' tail wrong",
                            newer ? newer->mem : (char *)&keep_tail[kind]);
        if (k != nr_keep[kind])
            qs_walk_problem(w, "kept SLOB page count does not match", &nr_keep[kind]);
    }
    qs_lock_release(&slob_lock);
}

/* Of each kind: pages in use, the bytes free in them, and pages kept,
 * read under the lock. */
struct slob_count {
    unsigned long pages, free_bytes, kept;
};
static void count_pages(struct slob_count n[K_NR])
{
    qs_lock_acquire(&slob_lock);
    for (unsigned kind = 0; kind < K_NR; kind++) {
        n[kind] = (struct slob_count){nr_pages[kind], 0, nr_keep[kind]};
        for (int node = 0; node < qs_nr_nodes; node++) {
            struct slob_index *ix = index_of(kind, node);
            for (int k = index_find(ix, 0); k >= 0; k = index_find(ix, (unsigned)k + 1))
                for (struct qs_slab *sp = ix->bucket[k]; sp; sp = sp->next)
                    n[kind].free_bytes += (size_t)sp->objects * kinds[kind].unit;
        }
    }
    qs_lock_release(&slob_lock);
}

static void slob_totals(struct qs_totals *t)
{
    struct slob_count n[K_NR];
    count_pages(n);
    for (unsigned kind = 0; kind < K_NR; kind++) {
        size_t pb = qs_slab_bytes(kinds[kind].order);
        t->slab_bytes += n[kind].free_bytes + n[kind].kept * pb;
        t->empty_bytes += n[kind].kept * pb;
        t->slabs += n[kind].pages + n[kind].kept;
    }
}

static void slob_lock_all(bool lock)
{
    if (lock)
        qs_lock_acquire(&slob_lock);
    else
        qs_lock_release(&slob_lock);
}

static void slob_report(int fd)
{
    static const char *const label[K_NR] = {"slob pages          ", "slob 256 KiB runs   "};
    struct slob_count n[K_NR];
    count_pages(n);
    for (unsigned kind = 0; kind < K_NR; kind++) {
        char line[160];
        struct qs_buf b = {line, 0, sizeof(line)};
        if (!n[kind].pages && !n[kind].kept)
            continue;
        qs_buf_str(&b, label[kind]);
        qs_buf_u64(&b, n[kind].pages);
        qs_buf_str(&b, " in use (");
        qs_buf_u64(&b, n[kind].pages * qs_slab_bytes(kinds[kind].order) >> 10);
        qs_buf_str(&b, " KiB, ");
        qs_buf_u64(&b, n[kind].free_bytes >> 10);
        qs_buf_str(&b, " KiB free in them), ");
        qs_buf_u64(&b, n[kind].kept);
        qs_buf_str(&b, " empty kept\n");
        qs_os_write(fd, b.p, b.len);
    }
}

void qs_slob_setup(void)
{
    slob_secret = qs_os_random64();
    qslab_cache *a = &qs_slob_arena;
    if (!qs_cache_setup(a, "slob-pages", SLOB_UNIT, SLOB_UNIT, 0, NULL, false)) {
        qs_warn("cannot set up the SLOB arena");
        qs_os_abort();
    }
    a->front = QS_FRONT_SLOB;
    /* in no cache list: its pages are every SLOB cache's (slob_report) */
    qs_lock_acquire(&qs_global);
    qs_cache_unlist(a);
    qs_lock_release(&qs_global);
}

const struct qs_front qs_front_slob = {
    .name = "slob",
    .what = "pages every cache shares, indexed by largest free block, one lock (SLOB)",
    .alloc = slob_alloc,
    .kmalloc = slob_kmalloc,
    .free = slob_free,
    .free_to = slob_free_to,
    .usable = slob_usable,
    .shrink = slob_shrink,
    .sweep = slob_sweep,
    .totals = slob_totals,
    .validate = slob_validate,
    .lock_all = slob_lock_all,
    .report = slob_report,
    .kmalloc_exact = true,
};
