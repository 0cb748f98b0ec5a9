/*
 * blocks.c - SLOB's blocks inside a page or a run (slob.c's top comment
 * describes their headers and lists): the per-node index of pages by their
 * key, taking a block from a page (the smallest fitting one among the
 * first SLOB_WALK of its free list) or from a run (from its bins' lists),
 * giving one back with both neighbours merged, a new page's one free
 * block.  Under slob_lock.
 */
#include "front/queue.h"
#include "front/front.h"
#include "front/slob/slob.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>

/* The first non-empty bucket at `from` or above, or -1. */
int slob_index_find(const struct slob_index *ix, unsigned from)
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
void slob_index_del(struct slob_index *ix, struct qs_slab *sp)
{
    unsigned k = sp->empty_ms;
    if (sp->prev)
        sp->prev->next = sp->next;
    else if (!(ix->bucket[k] = sp->next))
        ix->map[k / 64] &= ~((uint64_t)1 << (k % 64));
    if (sp->next)
        sp->next->prev = sp->prev;
    sp->next = sp->prev = NULL;
    ix->pages--;
    slob_nr_pages[kind_nr(sp)]--;
}
/* sp goes first in the bucket of its key `max` (0: full): the page that
 * served last is the first one tried next. */
void slob_index_add(struct slob_index *ix, struct qs_slab *sp, unsigned max)
{
    unsigned k = max;
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
    slob_nr_pages[kind_nr(sp)]++;
}


/* The free lists: a page has one, sp->freelist; a run one per bin, its
 * head and bit in the run's first bytes.  Free blocks of n units are on
 * list fl_bin(sp, n). */
static inline struct slob_run_ix *run_ix(const struct qs_slab *sp)
{
    return (struct slob_run_ix *)sp->mem;
}
static inline unsigned fl_bin(const struct qs_slab *sp, unsigned n)
{
    return kind_nr(sp) == K_RUN ? run_bin(n) : 0;
}
static char *fl_head(const struct qs_slab *sp, unsigned bin)
{
    return kind_nr(sp) == K_RUN ? at(sp, run_ix(sp)->head[bin]) : sp->freelist;
}
static void fl_set_head(struct qs_slab *sp, unsigned bin, char *b)
{
    if (kind_nr(sp) != K_RUN) {
        sp->freelist = b;
        return;
    }
    struct slob_run_ix *rx = run_ix(sp);
    rx->head[bin] = (uint16_t)ref(sp, b);
    if (b)
        rx->map[bin / 64] |= (uint64_t)1 << (bin % 64);
    else
        rx->map[bin / 64] &= ~((uint64_t)1 << (bin % 64));
}
/* the first non-empty bin of run sp at `from` or above, or -1 */
static int run_find(const struct qs_slab *sp, unsigned from)
{
    const uint64_t *map = run_ix(sp)->map;
    unsigned w = from / 64;
    if (w >= RUN_MAP_WORDS)
        return -1;
    uint64_t m = map[w] & (~(uint64_t)0 << (from % 64));
    while (!m) {
        if (++w == RUN_MAP_WORDS)
            return -1;
        m = map[w];
    }
    return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
}
/* run sp's key: its highest non-empty bin, 0 if none */
static unsigned run_key(const struct qs_slab *sp)
{
    const uint64_t *map = run_ix(sp)->map;
    for (unsigned w = RUN_MAP_WORDS; w-- > 0;)
        if (map[w])
            return w * 64 + 63 - (unsigned)__builtin_clzll(map[w]);
    return 0;
}

/* the free block b (header written, 2 units or more) goes first on its list */
static void fl_push(struct qs_slab *sp, char *b)
{
    const struct slob_kind *K = kind_of(sp);
    uint64_t h = hget(b);
    unsigned bin = fl_bin(sp, H_UNITS(K, h));
    char *head = fl_head(sp, bin);
    sethdr(K, b, ST_FREE, H_UNITS(K, h), ref(sp, head), hid(K, b, h));
    uint64_t *lb = fl_link(sp, b);
    hset(lb, mklink(sp, lb, 0));
    if (head) {
        uint64_t *lh = fl_link(sp, head);
        hset(lh, mklink(sp, lh, ref(sp, b)));
    }
    fl_set_head(sp, bin, b);
}
static void fl_unlink(struct qs_slab *sp, char *b)
{
    const struct slob_kind *K = kind_of(sp);
    uint64_t h = hget(b);
    char *prev = lprev(sp, b), *next = at(sp, H_NEXT(K, h));
    if (prev) { /* its next: b's; its header's other fields (its link) stay */
        uint64_t hp = hget(prev);
        hset(prev, (hp & ~((uint64_t)FMASK(K) << K->fbits)) | (h & ((uint64_t)FMASK(K) << K->fbits)));
    } else {
        fl_set_head(sp, fl_bin(sp, H_UNITS(K, h)), next);
    }
    if (next) {
        uint64_t *ln = fl_link(sp, next);
        hset(ln, mklink(sp, ln, ref(sp, prev)));
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
    uintptr_t pay = (uintptr_t)b + SLOB_HDR;
    return (unsigned)((((pay + align - 1) & ~(uintptr_t)(align - 1)) - pay) / K->unit);
}

/* Cut `units` from free block b of page sp (n units, its payload aligned
 * `delta` units in) for cache id: the slack before the aligned block and
 * the rest after it stay free.  The payload. */
static void *carve(struct qs_slab *sp, char *b, unsigned n, unsigned delta, unsigned units,
                   unsigned id)
{
    const struct slob_kind *K = kind_of(sp);
    unsigned rest = n - delta - units;
    char *a = b + (size_t)delta * K->unit, *after = a + (size_t)units * K->unit;
    unsigned bid = hid(K, b, hget(b));
    fl_unlink(sp, b);
    if (delta) /* the slack before the aligned block stays free */
        free_block(sp, b, delta, bid);
    sethdr(K, a, ST_ALLOC, units, delta, id);
    if (rest) /* the rest stays free */
        free_block(sp, after, rest, bid);
    set_pfree(sp, after + (size_t)rest * K->unit, rest);
    sp->objects -= units;
    sp->inuse++;
    return a + SLOB_HDR;
}

/* Best fit in page sp among the first SLOB_WALK blocks of its free list:
 * the smallest listed free block with room for `units` at a payload
 * aligned to `align`, else the page's largest block (sp->tail); the
 * payload, or NULL.  *max: the page's key after the take: the largest free
 * block it knows of, sp->tail, never larger than the page's largest (a
 * page whose list is longer than the walk may know a smaller one, and so
 * serve smaller requests until a free finds it a larger block).  The walk
 * stops early at an exact fit that is not the known largest block. */
static void *page_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id, unsigned *max)
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
    char *after = best + (size_t)(best_delta + units) * K->unit;
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
    return carve(sp, best, best_n, best_delta, units, id);
}

/* Good fit in run sp from its bins: the first fitting block among the
 * first SLOB_WALK of the list of the request's bin (whose blocks may be
 * smaller than the request), else the first block of the first non-empty
 * bin whose blocks all fit (with the alignment's slack; bins between the
 * two are walked as the request's is).  A bin's sizes are within
 * 1/RUN_SUB of each other, so a first fit in it is as good as the best
 * but for that, and the rest of the block stays free in its own bin.  The
 * payload, or NULL; *max: the run's key after the take, its highest
 * non-empty bin. */
static void *run_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id, unsigned *max)
{
    const struct slob_kind *K = kind_of(sp);
    unsigned slack = align > K->unit ? (unsigned)(align / K->unit) - 1 : 0;
    unsigned sure = run_bin(units + slack - 1) + 1; /* its blocks and above are >= units + slack */
    unsigned best_n = ~0u, best_delta = 0;
    char *best = NULL;
    int k = run_find(sp, run_bin(units));
    for (; k >= 0 && (unsigned)k < sure && !best; k = run_find(sp, (unsigned)k + 1)) {
        unsigned walked = 0;
        for (char *b = fl_head(sp, (unsigned)k); b && walked < SLOB_WALK;
             b = at(sp, H_NEXT(K, hget(b))), walked++) {
            unsigned n = H_UNITS(K, hget(b)), delta;
            if (n < units || n >= best_n || n < (delta = align_delta(K, b, align)) + units)
                continue;
            best = b;
            best_n = n;
            best_delta = delta;
            break;
        }
    }
    if (!best) {
        if (k < 0)
            return NULL;
        best = fl_head(sp, (unsigned)k);
        best_n = H_UNITS(K, hget(best));
        best_delta = align_delta(K, best, align);
    }
    /* The blocks carve writes, anywhere in the run: fetched together, so
     * that their misses overlap (the next one on best's list, the rest's
     * header, the head of the rest's list, the block after best). */
    unsigned rest = best_n - best_delta - units;
    char *nx = at(sp, H_NEXT(K, hget(best))), *end = best + (size_t)best_n * K->unit;
    if (nx)
        __builtin_prefetch(nx, 1);
    if (rest) {
        char *rh = fl_head(sp, run_bin(rest));
        __builtin_prefetch(end - (size_t)rest * K->unit, 1);
        if (rh)
            __builtin_prefetch(rh, 1);
    }
    if (end < page_end(sp))
        __builtin_prefetch(end, 1);
    void *p = carve(sp, best, best_n, best_delta, units, id);
    *max = run_key(sp);
    return p;
}

/* A block of `units` from page sp for cache id, its payload aligned to
 * `align`: the payload, or NULL if sp has no room it can find; *max: the
 * page's key after the take. */
void *slob_page_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id, unsigned *max)
{
    return kind_nr(sp) == K_RUN ? run_take(sp, units, align, id, max)
                                : page_take(sp, units, align, id, max);
}

/* Give block b (allocated, `units`) back to page sp, merging it with free
 * neighbours, found without a walk: the next block by b's size, the
 * previous one by the free units b's header records; merged-away headers
 * become dead ones.  Returns the page's key after the give (the caller
 * moves the page in the index when it changes: the merged block is the
 * largest on its list, or not larger than the key).  A run's key stays
 * its highest non-empty bin: the blocks merged away were smaller than the
 * merged one, so no bin above its bin empties. */
unsigned slob_page_give(struct qs_slab *sp, char *b, unsigned units, unsigned id)
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
        unsigned lp = pf >= 2 ? lref(sp, hget(fl_link(sp, pb))) : 0;
        bool move = pf == 1 || fl_bin(sp, pf) != fl_bin(sp, pf + n);
        if (pf >= 2 && move)
            fl_unlink(sp, pb); /* its list changes */
        n += pf;
        sethdr(K, b, ST_DEAD, 0, 0, id);
        sethdr(K, pb, ST_FREE, n, H_NEXT(K, hp), hid(K, pb, hp));
        if (move) {
            fl_push(sp, pb); /* off the list until now, or on another one */
        } else {
            uint64_t *lw = fl_link(sp, pb); /* a page's: its new last word */
            hset(lw, mklink(sp, lw, lp));
        }
        start = pb;
    } else {
        free_block(sp, b, n, id);
    }
    set_pfree(sp, start + (size_t)n * K->unit, n);
    sp->objects += units;
    sp->inuse--;
    unsigned key = slob_key(kind_nr(sp), n);
    if (key <= sp->empty_ms)
        return sp->empty_ms;
    if (kind_nr(sp) == K_PAGE)
        sp->tail = start; /* the largest block known */
    return key;
}

/* A new page's one free block: outside slob_lock, as the page is in no
 * index yet (slob_page_new), so no other thread reads its lists. */
void slob_page_init(struct qs_slab *sp)
{
    const struct slob_kind *K = kind_of(sp);
    sp->freelist = NULL;
    if (kind_nr(sp) == K_RUN)
        memset(run_ix(sp), 0, sizeof(struct slob_run_ix));
    free_block(sp, page_base(sp), K->units, 0);
    sp->objects = K->units;
    sp->inuse = 0;
    sp->empty_ms = slob_key(kind_nr(sp), K->units); /* its key, for slob_page_take */
    sp->tail = kind_nr(sp) == K_RUN ? NULL : page_base(sp);
}
