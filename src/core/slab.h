/*
 * core/slab.h - objects in a slab (slab.c): the order rule, encoded
 * free-list links, free bits, slab lists, lazy birth, shuffled order.  Part
 * of core/internal.h, which includes it where the types it needs are
 * defined.
 */
#ifndef QSLAB_CORE_SLAB_H
#define QSLAB_CORE_SLAB_H

#ifndef QSLAB_INTERNAL_H
#error "core/slab.h is part of core/internal.h: include that"
#endif

/* ---- core/slab.c ---- */
unsigned qs_slab_objects(const qslab_cache *c, unsigned order);
unsigned qs_slab_min_order(size_t slot_size, size_t align);
/* The largest order whose free-bit granule (QS_FBITS_SHIFT) fits in a slot */
unsigned qs_slab_max_order(size_t slot_size);
#define QS_SLAB_MIN_OBJS 8           /* objects per slab by default, */
#define QS_SLAB_MIN_BYTES (32u << 10) /* or a slab this long (core/slab.c) */
#define QS_SLAB_WASTE_DIV 64          /* at most 1/64 of a slab's touched pages wasted, */
#define QS_SLAB_ORDERS_UP 5           /* trying this many orders above the least, */
#define QS_SLAB_WASTE_MAX_BYTES (128u << 10) /* and slabs up to this long, for it */
unsigned qs_slab_default_order(size_t slot_size, size_t align);
struct qs_slab *qs_slab_new(qslab_cache *c, struct qs_queue *q, int node, bool born);
/* Allocate one object from a slab the caller owns (freelist non-empty). */
void *qs_slab_take_one(qslab_cache *c, struct qs_queue *q, struct qs_slab *s);
uint32_t qs_slab_list_lost(struct qs_slab *s); /* a walker met a bad link: returns objects lost */
uint32_t qs_slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want);
uint32_t qs_slab_grow_into(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                           void **dst, uint32_t room);
uint32_t qs_slab_grow_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                           void **list);
bool qs_slab_growable(const qslab_cache *c, const struct qs_slab *s);
/* Objects [n, n + k) of s about to be born: the pages their birth writes
 * faulted in with one call, if s's memory past its born objects is zero
 * (slab.c FIRST TOUCH) */
void qs_slab_first_touch(const qslab_cache *c, const struct qs_slab *s, uint32_t n, uint32_t k);
/* May s's next object be born bare for calloc (qs_slab_born_bare)? */
bool qs_slab_bare_ok(const qslab_cache *c, const struct qs_slab *s);
void *qs_slab_born_bare(qslab_cache *c, struct qs_queue *q, struct qs_slab *s);

static inline uintptr_t *qs_link(const qslab_cache *c, void *obj)
{
    return (uintptr_t *)((char *)obj + c->link_off);
}
static inline uintptr_t qs_enc(const qslab_cache *c, void *next)
{
    return (uintptr_t)next ^ c->secret;
}
/* Objects born now in s are zero but for the word the allocator writes:
 * its memory is zero (QS_SLAB_ZERO) and no constructor or debugging writes
 * them.  A slow path that hands out such an object leaves QS_FRESH_WORD in
 * qs_self.last_word, so that calloc need not clear it (kmalloc.c). */
static inline bool qs_slab_born_zero(const qslab_cache *c, const struct qs_slab *s)
{
    return (s->empty_ms & QS_SLAB_ZERO) && !c->ctor && !c->debug;
}
static inline bool qs_looks_free(const qslab_cache *c, uintptr_t w)
{
    return ((w ^ c->secret) & QS_LINK_TAG_MASK) == 0;
}
/* A word of a free object: a free-list link or a queue's free stamp. */
static inline bool qs_maybe_free(const qslab_cache *c, uintptr_t w)
{
    return qs_looks_free(c, w) || w == QS_STAMP(c->secret);
}
/* Decode a link; NULL and *bad set if the word is not a valid link. */
static inline void *qs_dec(const qslab_cache *c, uintptr_t w, bool *bad)
{
    uintptr_t n = w ^ c->secret;
    *bad = (n & QS_LINK_TAG_MASK) != 0;
    return (void *)n;
}
/* Is p the start of an object of slab s?  off = p - base must lie in the
 * objects (a p below base wraps to a huge off) and be a multiple of the slot
 * size: with c = ceil(2^64 / size), off is a multiple of size exactly when
 * off * c mod 2^64 < c, for off < 2^32 (Lemire's divisibility test; slabs
 * are at most 64 MiB).  One multiply, two compares. */
static inline bool qs_slab_valid_obj(const struct qs_slab *s, const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)s->base;
    /* span grows while the slab lives (lazy birth, core/slab.c): relaxed */
    return off < __atomic_load_n(&s->span, __ATOMIC_RELAXED) && off * s->recip < s->recip;
}
/* Slab of a pointer that should be an object of a slab chunk; NULL if not. */
static inline struct qs_slab *qs_obj_slab(struct qs_chunk *ch, const void *p)
{
    struct qs_slab *s = qs_chunk_slab(ch, p);
    if (unlikely(!s || !__atomic_load_n(&s->cache, __ATOMIC_RELAXED) || !qs_slab_valid_obj(s, p)))
        return NULL;
    return s;
}
/* w, a word that looks like a link (qs_looks_free), links into slab s's
 * free list: to NULL or to another object of s.  User data passes both
 * tests with odds of 2^-20 at most: SLUB's double-free test, and the free
 * state of an object of a front end that keeps no free bits. */
static inline bool qs_slab_link_in(const qslab_cache *c, const struct qs_slab *s, uintptr_t w)
{
    void *next = (void *)(w ^ c->secret);
    return !next || qs_slab_valid_obj(s, next);
}
/* Owner lists: doubly linked, head insertion; the caller owns the list. */
static inline void qs_list_add(struct qs_list *l, struct qs_slab *s, int state)
{
    struct qs_slab **head = state == QS_SLAB_FULL ? &l->full : &l->partial;
    /* relaxed: SLUB's slabs change state outside the list's lock too */
    __atomic_store_n(&s->state, (uint8_t)state, __ATOMIC_RELAXED);
    s->prev = NULL;
    s->next = *head;
    if (*head)
        (*head)->prev = s;
    *head = s;
    /* counts are read unlocked as hints (SLUB's refill): relaxed stores */
    if (state == QS_SLAB_FULL)
        QS_STORE(l->nr_full, l->nr_full + 1);
    else
        QS_STORE(l->nr_partial, l->nr_partial + 1);
}
static inline void qs_list_del(struct qs_list *l, struct qs_slab *s)
{
    struct qs_slab **head = s->state == QS_SLAB_FULL ? &l->full : &l->partial;
    if (s->prev)
        s->prev->next = s->next;
    else
        *head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    if (s->state == QS_SLAB_FULL)
        QS_STORE(l->nr_full, l->nr_full - 1);
    else
        QS_STORE(l->nr_partial, l->nr_partial - 1);
}

/* FREE BITS.  Every slab chunk keeps one bit per granule of the chunk: 8
 * bytes for order-0 slabs, twice that for each order up, 128 bytes from
 * order 4 (64 KiB slabs) on (QS_FBITS_SHIFT).  That is 64 bytes per 4 KiB
 * slab, a cache line, 1/64 of the slabs' memory, at order 0, and 1/1024
 * from order 4 on, faulted in as slabs are used (a 64 KiB slab of 1,312-byte
 * SQLite pages kept 1 KiB of bits for its 49 objects).  Every object has a
 * granule of its own: a cache's slots are at least a granule of its order
 * apart (qs_slab_max_order: objects under 128 bytes keep to the orders
 * where a slab holds at most 512 of them).
 * For the slabs whose free lists are linked through the objects (SLQB's
 * and the debug front end's: qs_slab_give, take_slab, qs_slab_take_one,
 * lazy birth and the inline free of slqb/fast.h), the bit of an object's
 * first granule is set exactly while the object is on its slab's free list,
 * and changes only under the same ownership as the list (the slab's owner,
 * or its node's lock).  The fast free pushes an object without loading its
 * word; a double free of an object that has gone back to its slab pushes it
 * while it is on that list (its stamp cuts the list).  The route home finds
 * the bit set and reports instead of linking it a second time (slab_put,
 * queue.c), in O(1).  Other front ends keep their own state (SLAB's in-slab
 * bitmap, SLUB's and SLOB's lists) and ignore these bits; a slab's bits are
 * cleared as its objects are born (core/slab.c), so what a slab of another cache
 * left there does not matter. */
/* Where a chunk's free bits start (page.c chunk_layout): for slabs of up
 * to 16 KiB, the unit's last 64, 32 or 16 KiB (the header's slots are too
 * small to hold them; the unit loses those slots, not a page of
 * descriptors); for bigger ones, in the header's first slot, after the
 * descriptors; for chunks of one slab of more than half a unit, after the
 * header's page. */
extern const uint32_t qs_fbits_off[QS_NR_ORDERS];
#define QS_FBITS_SHIFT(order) (3u + ((order) < 4u ? (unsigned)(order) : 4u))
#define QS_FBITS_BYTES(order) (QS_CHUNK_SIZE >> (QS_FBITS_SHIFT(order) + 3)) /* a unit's */
/* Do c's slabs keep free bits?  SLQB's, the debug front end's and SLOB's
 * big objects' (their lists are linked through the objects); SLUB's and
 * SLAB's keep their own state (struct qs_front own_free_state). */
static inline bool qs_keeps_fbits(const qslab_cache *c)
{
    return c->keeps_fbits;
}
/* The free bits of s's chunk, and the chunk (*ch): s is in its header. */
static inline uint64_t *qs_fbits_of(const struct qs_slab *s, uintptr_t *ch)
{
    *ch = (uintptr_t)s & ~(uintptr_t)(QS_CHUNK_SIZE - 1);
    return (uint64_t *)(*ch + qs_fbits_off[s->order]);
}
/* obj's bit (*bit) and its word, in the bits of chunk ch at granule shift
 * `shift` (what qs_fbits_of and QS_FBITS_SHIFT give for its slab: a walker
 * of one slab's objects finds them once) */
static inline uint64_t *qs_fbit_word_in(uintptr_t ch, uint64_t *bits, unsigned shift,
                                        const void *obj, uint64_t *bit)
{
    size_t g = ((uintptr_t)obj - ch) >> shift;
    *bit = (uint64_t)1 << (g & 63);
    return bits + (g >> 6);
}
static inline uint64_t *qs_fbit_word(const struct qs_slab *s, const void *obj, uint64_t *bit)
{
    uintptr_t ch;
    uint64_t *bits = qs_fbits_of(s, &ch);
    return qs_fbit_word_in(ch, bits, QS_FBITS_SHIFT(s->order), obj, bit);
}
static inline bool qs_fbit_test(const struct qs_slab *s, const void *obj)
{
    uint64_t bit, *w = qs_fbit_word(s, obj, &bit);
    return (*w & bit) != 0;
}
static inline void qs_fbit_set(const struct qs_slab *s, const void *obj)
{
    uint64_t bit, *w = qs_fbit_word(s, obj, &bit);
    *w |= bit;
}
static inline void qs_fbit_clear(const struct qs_slab *s, const void *obj)
{
    uint64_t bit, *w = qs_fbit_word(s, obj, &bit);
    *w &= ~bit;
}
/* The object after one on s's free list whose word is w; *bad if w is no
 * link, or leads out of s's born objects or to one not on its list (its
 * bit clear: the word was overwritten by a second free that linked it into
 * a batch, or by a use after free that wrote a link-like value).  A walker
 * that takes objects checks the next one before it takes the current. */
static inline void *qs_list_next(const qslab_cache *c, const struct qs_slab *s, uintptr_t w,
                                 bool *bad)
{
    void *n = qs_dec(c, w, bad);
    if (n && !*bad &&
        unlikely((uintptr_t)n - (uintptr_t)s->base >= s->span || !qs_fbit_test(s, n)))
        *bad = true;
    return n;
}
static inline void qs_fbit_clear_in(uintptr_t ch, uint64_t *bits, unsigned shift, const void *obj)
{
    uint64_t bit, *w = qs_fbit_word_in(ch, bits, shift, obj, &bit);
    *w &= ~bit;
}
/* qs_fbit_set out of line, for the free fast path's inline full-queue
 * case (page.c): inline, its few instructions cost the pair 5 more
 * (registers), out of line a call on that path only. */
void qs_fbit_set_cold(const struct qs_slab *s, const void *obj);
/* Clear the bits of the objects from `from` up to `to` (the end of the
 * last) of slab s: the granules from from's up to the one before to's,
 * which may be the next object's first. */
void qs_fbits_clear(const struct qs_slab *s, const char *from, const char *to);
/* The bits of n objects of `slot` bytes from `first`: every bit of their
 * range for small objects; for objects of 64 granules and more (a 64-bit
 * word of bits or more each) only their first granules' bits, which are
 * all that is ever read (the bits of other granules, a former slab's of
 * another size, mean nothing): a 9 MiB object's birth writes one word,
 * not 144 KiB of bits. */
void qs_fbits_clear_objs(const struct qs_slab *s, const char *first, uint32_t n, uint32_t slot);
static inline void qs_fbits_clear_slab(const struct qs_slab *s) /* every born object's */
{
    uint32_t slot = __atomic_load_n(&s->cache, __ATOMIC_RELAXED)->slot_size;
    qs_fbits_clear_objs(s, s->base, __atomic_load_n(&s->span, __ATOMIC_RELAXED) / slot, slot);
}
/* k frees counted through q (a queue, or NULL/qs_no_queue: the cache's
 * orphan counters) were second frees: out of the counts (slab.c). */
void qs_uncount_frees(qslab_cache *c, struct qs_queue *q, unsigned long k);
/* A list walker met obj, whose link is not valid: report it (a double free
 * if it holds the free stamp or 0, else an overwritten free object; a
 * debug cache's through qs_debug_hooks.bad_link).  A double free's second
 * free was counted where it was pushed: it is taken out of the counts
 * through q (the caller's queue, or NULL).  slab.c */
void qs_report_bad_link(qslab_cache *c, struct qs_queue *q, void *obj);

/* Free an object to its slab's free list; the caller owns the slab and
 * has set the object's free bit. */
static inline void qs_slab_give(qslab_cache *c, struct qs_slab *s, void *obj)
{
    *qs_link(c, obj) = qs_enc(c, s->freelist);
    if (!s->freelist)
        s->tail = obj;
    s->freelist = obj;
    s->inuse--;
}
static inline struct qs_list *qs_slab_owner(const struct qs_slab *s)
{
    return __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
}
static inline void qs_slab_set_owner(struct qs_slab *s, struct qs_list *l)
{
    __atomic_store_n(&s->owner, l, __ATOMIC_RELEASE);
}
/* Slab s (off every list) becomes l's and goes first on the ->next list
 * *out (slabs handed to a refill); returns its free objects. */
static inline unsigned qs_slab_hand_to(struct qs_slab *s, struct qs_list *l, struct qs_slab **out)
{
    qs_slab_set_owner(s, l);
    s->next = *out;
    *out = s;
    return s->objects - s->inuse;
}

#endif /* QSLAB_CORE_SLAB_H */
