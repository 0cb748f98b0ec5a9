/*
 * front/slob/slob.h - what SLOB's files share: slob.c (the front end's entry
 * points: allocation, free, big objects), blocks.c (blocks in a page, the
 * index) and arena.c (pages as a whole: kept pages, give-back, validation,
 * the report).  The page kinds, the block header's encoding, SLOB's state
 * under slob_lock, and the calls between the files.
 */
#ifndef QSLAB_SLOB_H
#define QSLAB_SLOB_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

#define SLOB_UNIT 8 /* a page's unit; a header (SLOB_HDR) */
#define SLOB_HDR 8  /* a block's header: one word */
#define SLOB_BUCKETS 513 /* by key: pages 0 .. 511 units, runs bins 0 .. RUN_BINS - 1 */
#define SLOB_MAP_WORDS ((SLOB_BUCKETS + 63) / 64)
#define SLOB_WALK 32 /* free blocks a take looks at, at most */
/* A run's free lists: a bin per size below RUN_EXACT units, then RUN_SUB
 * per power of two (a bin's sizes within 1/RUN_SUB of each other), up to
 * the run's units (under 2^14). */
#define RUN_EXACT_SHIFT 6
#define RUN_SUB_SHIFT 4
#define RUN_EXACT (1u << RUN_EXACT_SHIFT)
#define RUN_SUB (1u << RUN_SUB_SHIFT)
#define RUN_BINS (RUN_EXACT + (14 - RUN_EXACT_SHIFT) * RUN_SUB) /* 64 .. 127 units, ..., 8192 .. 16383 */
#define RUN_MAP_WORDS ((RUN_BINS + 63) / 64)
/* A run's first bytes: its bins' heads and the bitmap of non-empty ones. */
struct slob_run_ix {
    uint64_t map[RUN_MAP_WORDS]; /* bit k: head[k] is not empty */
    uint16_t head[RUN_BINS];     /* a block's unit offset plus one, 0: none */
};
#define RUN_SKIP ((sizeof(struct slob_run_ix) + 15) & ~(size_t)15) /* the first block's offset */
#ifndef SLOB_KEEP_FRACTION
#define SLOB_KEEP_FRACTION 8 /* empty pages kept: at most an eighth of those in use */
#endif
#ifndef SLOB_KEEP_BYTES
#define SLOB_KEEP_BYTES ((size_t)256 << 10) /* ... or 256 KiB of them */
#endif
#define SLOB_PAGE_MAX ((size_t)528) /* the largest block of a page: a 512-byte request's */
#define SLOB_RUN_MAX ((size_t)64 << 10)  /* the largest block of a run */
enum { ST_ALLOC, ST_FREE, ST_DEAD, ST_LINK };
enum { K_PAGE, K_RUN, K_NR };

/* The two kinds of SLOB page.  Blocks tile [mem + skip, mem + skip + units
 * * unit); a block starts with its header, one word (SLOB_HDR), its
 * payload follows: units, link and cache id in fbits, fbits and 16 bits,
 * then a tag.  A page's fields are 10 bits, its tag 28 bits; its first 8
 * bytes are unused.  A run's fields are 15 bits, its tag 18 bits; its
 * first RUN_SKIP bytes are its free lists' heads (struct slob_run_ix), its
 * blocks start 8 bytes past a 16-byte boundary, so that their payloads are
 * 16-byte aligned, and its last 8 bytes are unused. */
struct slob_kind {
    unsigned unit, units; /* block sizes in these; the page's units */
    unsigned fbits;       /* header fields: units and link, fbits each */
    unsigned tshift;      /* the tag: bits tshift..63 */
    unsigned order;       /* slab order */
    unsigned skip;        /* the first block's offset in the slab */
};
static const struct slob_kind kinds[K_NR] = {
    [K_PAGE] = {8, 511, 10, 36, 0, 8}, /* 4 KiB pages */
    /* 256 KiB runs: blocks from RUN_SKIP + 8 to 8 bytes before the end */
    [K_RUN] = {16, (unsigned)(((256u << 10) - RUN_SKIP - 16) / 16), 15, 46, 6, (unsigned)RUN_SKIP + 8},
};
/* The bin of a run's free block of n units (1 .. the run's units): n
 * itself below RUN_EXACT, then the power of two and the next
 * RUN_SUB_SHIFT bits. */
static inline unsigned run_bin(unsigned n)
{
    if (n < RUN_EXACT)
        return n;
    unsigned e = 31u - (unsigned)__builtin_clz(n);
    return RUN_EXACT + (e - RUN_EXACT_SHIFT) * RUN_SUB + ((n >> (e - RUN_SUB_SHIFT)) & (RUN_SUB - 1));
}
/* A page's key in the index for a free block of n units: a page's is the
 * units, a run's the bin.  Keys grow with n. */
static inline unsigned slob_key(unsigned kind, unsigned n)
{
    return kind == K_RUN ? run_bin(n) : n;
}
_Static_assert(((256u << 10) - RUN_SKIP) / 16 < (1u << 14), "a run's bins end at 2^14 units, its fields hold them");
static inline const struct slob_kind *kind_of(const struct qs_slab *sp)
{
    return &kinds[sp->order == kinds[K_RUN].order ? K_RUN : K_PAGE];
}
static inline unsigned kind_nr(const struct qs_slab *sp)
{
    return sp->order == kinds[K_RUN].order ? K_RUN : K_PAGE;
}

/* A node's pages of one kind with objects, by their key (slob_key). */
struct slob_index {
    uint64_t map[SLOB_MAP_WORDS];         /* bit k: bucket[k] is not empty */
    struct qs_slab *bucket[SLOB_BUCKETS]; /* doubly linked by next/prev, NULL-ended */
    unsigned long pages;                  /* in its buckets */
};

extern qs_lock slob_lock; /* rank: with node locks (never held together) */
extern struct slob_index slob_by_max[K_NR][QS_MAX_NODES];
extern unsigned long slob_nr_pages[K_NR]; /* in the indexes */
extern struct qs_slab *slob_keep[K_NR], *slob_keep_tail[K_NR]; /* empty, newest first (->next, ->prev) */
extern unsigned slob_nr_keep[K_NR]; /* on slob_keep */
extern uint64_t slob_secret;

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
    hset(b, (uint64_t)units | (uint64_t)next << K->fbits | (uint64_t)id << (2 * K->fbits) |
                (uint64_t)tag_of(K, b, st) << K->tshift);
}
/* the cache id of block b, whose header word is h */
static inline unsigned hid(const struct slob_kind *K, const void *b, uint64_t h)
{
    (void)b;
    return (unsigned)((h >> (2 * K->fbits)) & 0xffff);
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
/* the end of the page's blocks: the slab's end, or 8 bytes before in a run */
static inline char *page_end(const struct qs_slab *sp)
{
    const struct slob_kind *K = kind_of(sp);
    return page_base(sp) + (size_t)K->units * K->unit;
}
static inline unsigned uoff(const struct qs_slab *sp, const char *b)
{
    return (unsigned)((size_t)(b - page_base(sp)) / kind_of(sp)->unit);
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
/* A listed free block's link: the previous block on its list, tagged
 * like a header (a write after free there shows in validation).  A page's
 * is its last word, not its second: a free block's second word may be the
 * header of the object merged into it (a 1-unit block before it), which
 * must still say "dead" to name a second free; its last word is never a
 * header that matters (only a 1-unit block, never an object, ends with its
 * header).  A run's is its second word: its blocks start on 16-byte units,
 * so no header is there, and a list's work stays in the blocks' first
 * cache lines. */
static inline uint64_t *fl_link(const struct qs_slab *sp, char *blk)
{
    const struct slob_kind *K = kind_of(sp);
    if (kind_nr(sp) == K_RUN)
        return hdr(blk) + 1;
    return (uint64_t *)(blk + (size_t)H_UNITS(K, hget(blk)) * K->unit) - 1;
}
/* the link word w of a block of page sp, to `prev` (a ref) */
static inline uint64_t mklink(const struct qs_slab *sp, const uint64_t *w, unsigned prev)
{
    (void)sp;
    return (uint64_t)prev | (uint64_t)tag_of(&kinds[K_PAGE], w, ST_LINK) << 36;
}
/* the ref in a link word */
static inline unsigned lref(const struct qs_slab *sp, uint64_t w)
{
    (void)sp;
    return (unsigned)(w & 0xffff);
}
static inline char *lprev(const struct qs_slab *sp, char *b)
{
    unsigned r = lref(sp, hget(fl_link(sp, b))); /* in the page whatever the word */
    return r <= kind_of(sp)->units ? at(sp, r) : NULL;
}

int slob_index_find(const struct slob_index *ix, unsigned from); /* blocks.c */
void slob_index_del(struct slob_index *ix, struct qs_slab *sp); /* blocks.c */
void slob_index_add(struct slob_index *ix, struct qs_slab *sp, unsigned max); /* blocks.c */
void *slob_page_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id, unsigned *max); /* blocks.c */
unsigned slob_page_give(struct qs_slab *sp, char *b, unsigned units, unsigned id); /* blocks.c */
void slob_page_init(struct qs_slab *sp); /* blocks.c */
struct qs_slab *slob_keep_push(struct qs_slab *sp); /* arena.c */
struct qs_slab *slob_page_new(unsigned kind, int node); /* arena.c */
size_t slob_pages_release(struct qs_slab *list); /* arena.c */
size_t slob_sweep(bool all); /* arena.c */
size_t slob_shrink(qslab_cache *c); /* arena.c */
void slob_totals(struct qs_totals *t); /* arena.c */
void slob_validate(qslab_cache *c, struct qs_walk *w); /* arena.c */
bool slob_page_objs(const qslab_cache *c, struct qs_slab *sp, void **out, uint32_t *live, uint32_t *max,
                    uint32_t *fill); /* arena.c: front.h page_objs */
void slob_lock_all(bool lock); /* arena.c */
void slob_report(int fd); /* arena.c */

/* ---- the index (slob_lock) ---- */
static inline struct slob_index *index_of(unsigned kind, int node)
{
    return &slob_by_max[kind][node];
}

const char *slob_name_of(unsigned id); /* slob.c: a cache's name, or "(a destroyed cache)" */

#pragma GCC visibility pop

#endif /* QSLAB_SLOB_H */
