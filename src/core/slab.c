/*
 * slab.c - objects inside a slab.
 *
 * A slab is 2^order pages.  Objects start at the slab's first byte (rounded
 * up to the cache's alignment) and sit slot_size bytes apart; nothing else is
 * stored in the slab, the descriptor lives in the chunk header (page.c).
 *
 * ORDER RULE (order 0 first, as SLQB).  The default order is the smallest
 * order that holds QS_SLAB_MIN_OBJS (8) objects or is QS_SLAB_MIN_BYTES (32
 * KiB) long, unless that wastes more than 1/64 of the slab; then up to five
 * orders above the one that holds one object, but no slab past 128 KiB
 * unless the first order is already longer, are tried and the first that
 * wastes at most 1/64 is taken (or the least wasteful).  Powers of two up
 * to 512 bytes keep order 0.  Why not one object per page: every slab has a
 * 96-byte descriptor (a 4 KiB object with a slab of its own paid 2.3% for
 * it, 0.94 MiB per 10,000, where glibc's header costs 16 bytes), and a burst
 * of frees pays a slab's list moves and stash entry once per slab: 1 KiB
 * objects four to a page cost 84.6 + 99.4 instructions per malloc + free in
 * a 10,000-object batch, eight to a 8 KiB slab 64.7 + 83.2 (4 KiB objects
 * one to a page 178.9 + 177.8, eight to a 32 KiB slab 70.1 + 87.4).
 *
 * The slab's own free list (freelist/tail, encoded links as in queues) is
 * touched only by the slab's owner: the owning thread, or whoever holds the
 * node lock for node-owned slabs.
 */
#include "core/internal.h"
#include "core/hooks.h"

#include <string.h>

unsigned qs_slab_min_order(size_t slot_size, size_t align)
{
    unsigned k = 0;
    size_t need = slot_size > align ? slot_size : align;
    while (k < QS_MAX_ORDER && qs_slab_bytes(k) < need)
        k++;
    return k;
}

unsigned qs_slab_max_order(size_t slot_size)
{
    unsigned k = QS_MAX_ORDER;
    while (k > 0 && slot_size < ((size_t)1 << QS_FBITS_SHIFT(k)))
        k--;
    return k;
}

unsigned qs_slab_objects(const qslab_cache *c, unsigned order)
{
    return (unsigned)(qs_slab_bytes(order) / c->slot_size);
}

QS_STARTUP unsigned qs_slab_default_order(size_t slot_size, size_t align)
{
    unsigned min = qs_slab_min_order(slot_size, align), best = min;
    size_t best_waste_pm = (size_t)-1, first = 0;
    for (unsigned k = min; k <= min + QS_SLAB_ORDERS_UP && k <= QS_MAX_ORDER; k++) {
        size_t bytes = qs_slab_bytes(k);
        if (bytes / slot_size < QS_SLAB_MIN_OBJS && bytes < QS_SLAB_MIN_BYTES)
            continue; /* a descriptor for every one or two objects */
        if (!first)
            first = bytes;
        else if (bytes > QS_SLAB_WASTE_MAX_BYTES)
            break; /* bigger slabs only for less waste: not past QS_SLAB_WASTE_MAX_BYTES */
        /* waste that costs memory: the slab's tail past the last
         * object's page is never written, so never resident (a 1.5 MiB
         * object in a 2 MiB slab wastes address space, not RSS) */
        size_t used = (bytes / slot_size) * slot_size;
        size_t waste = ((used + QS_PAGE_SIZE - 1) & ~(size_t)(QS_PAGE_SIZE - 1)) - used;
        if (waste * QS_SLAB_WASTE_DIV <= bytes)
            return k;
        size_t pm = waste * 1000 / bytes;
        if (pm < best_waste_pm) {
            best_waste_pm = pm;
            best = k;
        }
    }
    return best;
}

/* Objects slab s of cache c can hold; s->objects counts those born so far. */
static uint32_t slab_capacity(const qslab_cache *c, const struct qs_slab *s)
{
    return (uint32_t)((qs_slab_bytes(s->order) - (size_t)(s->base - s->mem)) / c->slot_size);
}

/* Whether s has unborn objects: one more slot fits past the born ones
 * (slab_capacity without its division; take_slab asks for every slab). */
bool qs_slab_growable(const qslab_cache *c, const struct qs_slab *s)
{
    size_t born = (size_t)(s->base - s->mem) + (size_t)s->objects * c->slot_size;
    return born + c->slot_size <= qs_slab_bytes(s->order);
}

/* SLAB_FREELIST_RANDOM (the kernel's CONFIG_SLAB_FREELIST_RANDOM, which
 * distributions enable): with the tunable `random`, the objects of a new
 * slab are handed out in a shuffled order, so that a heap overflow cannot
 * count on which object comes next to the one it overflows.  As the
 * kernel does (mm/slab_common.c cache_random_seq_create, mm/slub.c
 * shuffle_freelist), each cache has a random permutation made once and
 * each slab walks it from a random start; the kernel's is as long as a
 * slab, which qslab's tunable `order` may change at any time (and 8-byte
 * objects of a 64 MiB slab number 2^23), so qslab's is 256 entries long
 * (with the same order cut to each narrower power of two), and an index
 * is read as 8-bit digits under a top digit as wide as n needs, each
 * mapped twice through the permutation of its width, from a start and
 * through an XOR mask chosen per slab (or birth, below): a bijection of
 * [0, 2^bits), of which the walk keeps the indices below n, skipping
 * whole blocks past n.  So every object is handed out exactly once, slabs
 * of up to 256 objects are shuffled whole and bigger ones by blocks of
 * 256 and within them; no allocation on any allocation path.  The PRNG is
 * splitmix64 (not a cryptographic one, as the kernel's prandom_u32_state
 * long was not): one qs_os_random64() per process, a key per cache, a
 * counter per cache for the slabs.
 *
 * Where each front end applies it: SLQB and SLUB build a new slab's free
 * list here (slab_grow: SLQB births lazily, a birth being a contiguous
 * run of slots past the born ones, which is shuffled, so `span` stays the
 * born prefix; with `random` a birth takes at least QS_RANDOM_BATCH
 * objects so that slabs of big objects, a page's worth being one or two,
 * are shuffled whole; SLUB births a whole slab at once); SLAB fills its
 * index array (front/slab/slabs.c slab_init_free); SLOB's shared pages have no
 * per-slab order (only its objects over a page, from their own slabs, are
 * shuffled).  Slabs taken back from the empty FIFO keep their free lists
 * (SLAB rebuilds its index array, shuffled). */
#define QS_RANDOM_BATCH 16
_Static_assert((QS_PAGE_SIZE << QS_MAX_ORDER) / 8 <= (1u << 24), "three 256-wide digits per index");

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* c's permutations and key, made once, under qs_global (tune), before
 * `random` is stored: Fisher-Yates over splitmix64 for 256 entries, and
 * for each narrower width b the entries below 2^b in that order (a random
 * permutation of 0..2^b-1 too).  They live apart from the cache, by cache
 * id: a cache's struct is in every process (the kmalloc caches' array
 * grew by 25 KiB of RSS with 512 bytes more in each), and cache.c frees
 * nothing of ours at destroy, so the block of a destroyed cache's id
 * serves the next cache given that id (the old one has no slab builder
 * left).  512 bytes per id ever used with random=1. */
static QS_BSS_APART uint8_t *rand_seqs[QS_MAX_CACHES]; /* qs_global */

QS_NOINLINE bool qs_slab_random_init(qslab_cache *c)
{
    static uint64_t seed, counter;
    if (c->rand_key)
        return true;
    uint8_t *tab = rand_seqs[c->id];
    if (!tab && !(tab = rand_seqs[c->id] = qs_meta_alloc(512)))
        return false;
    if (!__atomic_load_n(&seed, __ATOMIC_ACQUIRE))
        __atomic_store_n(&seed, qs_os_random64() | 1, __ATOMIC_RELEASE);
    uint64_t key =
        splitmix64(__atomic_load_n(&seed, __ATOMIC_ACQUIRE) +
                   0x9e3779b97f4a7c15ULL * __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    uint8_t *seq = tab + 255;
    for (unsigned i = 0; i < 256; i++)
        seq[i] = (uint8_t)i;
    uint64_t x = key, r = 0;
    for (unsigned i = 255; i > 0; i--) {
        if (i % 2 == 1) /* two 32-bit draws per output */
            r = splitmix64(x++);
        uint32_t j = (uint32_t)(((r & 0xffffffffu) * (uint64_t)(i + 1)) >> 32);
        r >>= 32;
        uint8_t t = seq[i];
        seq[i] = seq[j];
        seq[j] = t;
    }
    unsigned got[8] = {0};
    for (unsigned i = 0; i < 256; i++) /* seq[i] joins every width holding it */
        for (unsigned b = seq[i] ? 32 - (unsigned)__builtin_clz(seq[i]) : 0; b < 8; b++)
            tab[(1u << b) - 1 + got[b]++] = seq[i];
    c->rand_seq = tab;
    c->rand_ctr = 0;
    c->rand_key = key | 1; /* published by the release of `random` (tune.c) */
    return true;
}

/* A slab's (or birth's) walk: 96 bits of the cache's stream, four bytes
 * per digit.  One pass through the permutation from a random start and
 * XOR mask (the kernel's scheme, plus the mask) gives 65,536 orders, and
 * two slabs shared the first byte once in 256: their orders then matched
 * in up to half of their places.  A second pass makes that 2^-32.  The
 * top digit takes as many bits as n needs (a 16-object birth: 4), through
 * the permutation of that width: walking 256 values to keep 16 made a
 * 256-byte object's birth cost 420 cycles instead of 235. */
QS_NOINLINE void qs_shuffle_start(qslab_cache *c, struct qs_shuffle *sh, uint32_t n)
{
    uint64_t i = __atomic_add_fetch(&c->rand_ctr, 2, __ATOMIC_RELAXED);
    uint64_t r[2] = {splitmix64(c->rand_key + 0x9e3779b97f4a7c15ULL * i),
                     splitmix64(c->rand_key + 0x9e3779b97f4a7c15ULL * (i + 1))};
    memcpy(sh->key, r, sizeof sh->key);
    sh->seq = c->rand_seq + 255;
    sh->n = n;
    sh->pos = 0;
    sh->top = n <= 256 ? 0 : n <= 65536 ? 8 : 16;
    uint32_t blocks = (n + (1u << sh->top) - 1) >> sh->top;
    sh->bits = 0;
    while ((1u << sh->bits) < blocks)
        sh->bits++;
    sh->tab = c->rand_seq + (1u << sh->bits) - 1;
}

/* digit d through table t (of m + 1 entries) with key k: a bijection */
static inline uint32_t shuffle_digit(const uint8_t *t, uint32_t m, const uint8_t *k, uint32_t d)
{
    d = t[(d + k[0]) & m] ^ (k[1] & m);
    return t[(d + k[2]) & m] ^ (k[3] & m);
}

/* The next index; call it at most n times. */
static inline uint32_t shuffle_next(struct qs_shuffle *sh)
{
    uint32_t p = sh->pos, m = (1u << sh->bits) - 1;
    if (sh->top == 0) { /* one digit (n <= 256): at most half of it past n */
        for (;;) {
            uint32_t idx = shuffle_digit(sh->tab, m, sh->key[0], p++);
            if (idx < sh->n) {
                sh->pos = p;
                return idx;
            }
        }
    }
    for (;;) {
        unsigned l = sh->top;
        uint32_t idx = shuffle_digit(sh->tab, m, sh->key[l / 8], p >> l) << l;
        while (idx < sh->n && l) {
            l -= 8;
            idx |= shuffle_digit(sh->seq, 255, sh->key[l / 8], (p >> l) & 255) << l;
        }
        if (idx < sh->n) {
            sh->pos = p + 1;
            return idx;
        }
        p = (p | ((1u << l) - 1)) + 1; /* this block (lower digits 0) starts past n: skip it */
    }
}

QS_NOINLINE uint32_t qs_shuffle_next(struct qs_shuffle *sh)
{
    return shuffle_next(sh);
}

/* Objects [first, first + k slots) born: constructed, the first p into
 * dst (stamped), the rest appended to s's free list, in address order. */
/* The word of an object born into a queue: the free stamp, or, when the
 * slab's memory is zero (internal.h QS_SLAB_ZERO) and nothing writes the
 * object at birth (no constructor, no debugging), QS_FRESH_WORD: calloc
 * need not clear it (kmalloc.c). */
static uintptr_t born_word(const qslab_cache *c, const struct qs_slab *s)
{
    return qs_slab_born_zero(c, s) ? QS_FRESH_WORD(c->secret) : QS_STAMP(c->secret);
}

static void born_in_order(qslab_cache *c, struct qs_slab *s, char *first, uint32_t k, void **dst,
                          uint32_t p, bool fbits, void **fl, void **tl)
{
    uint32_t size = c->slot_size;
    char *obj = first;
    uintptr_t stamp = born_word(c, s);
    for (uint32_t i = 0; i < p; i++, obj += size) {
        if (c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = stamp;
        dst[i] = obj;
    }
    char *head = obj;
    for (uint32_t i = p; i < k; i++, obj += size) {
        if (c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = qs_enc(c, i + 1 < k ? obj + size : NULL);
        if (fbits)
            qs_fbit_set(s, obj);
    }
    if (p < k) {
        if (*tl)
            *qs_link(c, *tl) = qs_enc(c, head);
        else
            *fl = head;
        *tl = head + (size_t)(k - p - 1) * size;
    }
}

/* The same in the cache's random order (SLAB_FREELIST_RANDOM): the k new
 * slots are a contiguous run past the born ones (span stays a prefix),
 * taken in a fresh shuffle; dst and the free list get them in that order. */
static void born_shuffled(qslab_cache *c, struct qs_slab *s, char *first, uint32_t k, void **dst,
                          uint32_t p, bool fbits, void **fl, void **tl)
{
    struct qs_shuffle sh;
    qs_shuffle_start(c, &sh, k);
    uint32_t size = c->slot_size;
    uintptr_t stamp = born_word(c, s);
    char *head = NULL, *prev = NULL;
    for (uint32_t i = 0; i < k; i++) {
        char *obj = first + (size_t)shuffle_next(&sh) * size;
        if (c->ctor)
            c->ctor(obj);
        if (i < p) {
            *qs_link(c, obj) = stamp;
            dst[i] = obj;
            continue;
        }
        if (prev)
            *qs_link(c, prev) = qs_enc(c, obj);
        else
            head = obj;
        prev = obj;
        if (fbits)
            qs_fbit_set(s, obj);
    }
    if (prev) {
        *qs_link(c, prev) = qs_enc(c, NULL);
        if (*tl)
            *qs_link(c, *tl) = qs_enc(c, head);
        else
            *fl = head;
        *tl = prev;
    }
}

/* LAZY BIRTH.  A slab's objects are born (constructed, linked onto its free
 * list) as its owner needs them, not all at once when the slab is made: a
 * page's worth first, then `want` or as many as are born already, whichever
 * is more (a slab that keeps growing doubles, so a run of fresh mallocs
 * pays a refill per few objects, not per page).  Writing the link word
 * of every object touched every page of the slab, so one 4 KiB malloc made
 * a 32 KiB slab resident (mimalloc extends its pages' free lists the same
 * way).  s->objects and s->span count the born objects only, so every
 * invariant (inuse + free list == objects) holds as before and a free of a
 * never-born address fails validation like any other non-object.  A slab
 * with unborn objects and an empty free list is PARTIAL: the next refill
 * (or node allocation) grows it.  The caller owns the slab's free list.
 * span is stored relaxed: other threads read it to validate their frees of
 * objects born earlier (handed to them after birth), and it only grows.
 * Returns the number born, 0 when s is at capacity.  With `random` the
 * new run is shuffled (SLAB_FREELIST_RANDOM above) and at least
 * QS_RANDOM_BATCH long (or the rest of the slab).
 *
 * qs_slab_grow_into: the same, but the first `room` objects born go
 * straight into a queue's slots at dst, with the queue's free stamp and
 * counted in s->inuse (the refill would walk the free list for them at
 * once); the rest onto the free list.  Returns the number placed.
 *
 * qs_slab_grow_list: the same, but the objects born go onto a list of
 * their own, *list (NULL-ended), leaving s->freelist and s->tail alone:
 * SLUB keeps its slab word in the tail's place (internal.h), which other
 * threads change by compare-and-swap while the slab's owner grows it. */
/* FIRST TOUCH.  A birth from memory known zero (QS_SLAB_ZERO: fresh from
 * the OS, or given back) writes every new object's word, so it faults in
 * every page of the run, one trap at a time.  Objects up to a page long
 * start in every page of their run, and a debug cache that poisons its free
 * objects (P, or Q's zeros: debug/slot.c qs_debug_born) writes every byte
 * of them, or with Q alone reads every byte at their allocation's check
 * (the zeros are there already); those pages are faulted in first, with one call
 * (qs_os_populate), from the first page that no born object reaches (with
 * a slab's first birth, its first page) to the end of the run's last slot.
 * Other objects over a page keep their other pages for their users.
 * On these VMs a fault costs 10.6 us a page and a populated page 7.8 us
 * alone, 5.6 us in runs of four (mmap'd memory, each page then written
 * once).  SLAB's refills birth their runs one object at a time
 * (front/slab/slabs.c slabfe_take_locked) and call it too. */
void qs_slab_first_touch(const qslab_cache *c, const struct qs_slab *s, uint32_t n, uint32_t k)
{
    size_t size = c->slot_size;
    if (!(s->empty_ms & QS_SLAB_ZERO) || (size > QS_PAGE_SIZE && !(c->debug & (QS_DBG_P | QS_DBG_Q))))
        return;
    uintptr_t from = (uintptr_t)s->base + (size_t)n * size - c->red_left;
    uintptr_t to = from + (size_t)k * size, mask = QS_PAGE_SIZE - 1;
    uintptr_t a = n ? (from + mask) & ~mask : from & ~mask, b = (to + mask) & ~mask;
    if (b > a)
        qs_os_populate((void *)a, b - a);
}

static uint32_t slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                          void **dst, uint32_t room, uint32_t *placed, void **fl, void **tl)
{
    uint32_t cap = slab_capacity(c, s), n = s->objects;
    *placed = 0;
    if (n >= cap)
        return 0;
    /* a page's worth, or what the caller wants, or as many as were born
     * already: a slab that keeps growing doubles, so a run of fresh
     * mallocs pays a refill per few objects, not per page */
    uint32_t k = (uint32_t)(QS_PAGE_SIZE / c->slot_size);
    if (k < want)
        k = want;
    if (k < n)
        k = n;
    if (k < 1)
        k = 1;
    bool rnd = qs_slab_random(c);
    if (rnd && k < QS_RANDOM_BATCH) /* something to shuffle */
        k = QS_RANDOM_BATCH;
    if (k > cap - n)
        k = cap - n;
    uint32_t p = room < k ? room : k, size = c->slot_size;
    /* the run's free bits (internal.h), for the front ends whose slabs keep
     * them (SLQB's, the debug front end's, SLOB's big objects' node lists;
     * SLUB's slabs are born here too, and never look at them): whatever
     * the memory's last slab left goes */
    bool fbits = qs_keeps_fbits(c);
    if (fbits)
        qs_fbits_clear_objs(s, s->base + (size_t)n * size, k, size);
    qs_slab_first_touch(c, s, n, k);
    if (unlikely(rnd))
        born_shuffled(c, s, s->base + (size_t)n * size, k, dst, p, fbits, fl, tl);
    else
        born_in_order(c, s, s->base + (size_t)n * size, k, dst, p, fbits, fl, tl);
    if (unlikely(c->debug)) /* red zones, poison, tracks (debug/slot.c) */
        qs_debug_hooks.born(c, s->base + (size_t)n * size, k, (s->empty_ms & QS_SLAB_ZERO) != 0);
    s->inuse += p;
    *placed = p;
    s->objects = n + k;
    __atomic_store_n(&s->span, (n + k) * size, __ATOMIC_RELAXED);
    qs_stat(c, q, QS_NEW_OBJS, k);
    return k;
}

/* BARE BIRTH, for calloc.  A birth writes every object's word (a free-list
 * link, or the stamp of an object born into a queue), so a run of callocs
 * of small blocks from fresh slabs dirtied every page they were given,
 * although their bytes were zero and calloc itself writes nothing there
 * (100,000 callocs of 64 bytes: 6.4 MiB of anonymous memory).  When the
 * caller is calloc's slow path and the slab's next object would be born
 * from zero memory (qs_slab_born_zero: no constructor, no debugging), it
 * is born alone and handed out at once, its word never written: an object
 * in use with every byte zero, as calloc wants.  Only the next object in
 * address order, so span stays the born prefix; not with `random`, whose
 * births are shuffled runs.  The caller owns s's free list, which is
 * empty (a bare birth past objects on it would strand none, but the
 * refill takes those first), and puts s on its list as its state says
 * (qs_slab_growable).  Its free bit (the first granule's, the only one
 * ever read) is cleared only if set: a page of bits only read stays the
 * kernel's zero page. */
bool qs_slab_bare_ok(const qslab_cache *c, const struct qs_slab *s)
{
    return !s->freelist && qs_slab_born_zero(c, s) && !qs_slab_random(c) && qs_slab_growable(c, s);
}

void *qs_slab_born_bare(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    uint32_t n = s->objects, size = c->slot_size;
    char *obj = s->base + (size_t)n * size;
    if (qs_keeps_fbits(c) && qs_fbit_test(s, obj))
        qs_fbit_clear(s, obj);
    s->inuse++;
    s->objects = n + 1;
    __atomic_store_n(&s->span, (n + 1) * size, __ATOMIC_RELAXED);
    qs_stat(c, q, QS_NEW_OBJS, 1);
    return obj;
}

uint32_t qs_slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want)
{
    uint32_t placed;
    return slab_grow(c, q, s, want, NULL, 0, &placed, &s->freelist, &s->tail);
}

uint32_t qs_slab_grow_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                           void **list)
{
    uint32_t placed;
    void *tail = NULL;
    *list = NULL;
    return slab_grow(c, q, s, want, NULL, 0, &placed, list, &tail);
}

uint32_t qs_slab_grow_into(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                           void **dst, uint32_t room)
{
    uint32_t placed;
    slab_grow(c, q, s, want, dst, room, &placed, &s->freelist, &s->tail);
    return placed;
}

/* A new slab of cache c on `node`, its first page's worth of objects (at
 * least one) born when `born`: free and constructed; else none yet (the
 * caller grows it).  Not on any list, no owner yet. */
struct qs_slab *qs_slab_new(qslab_cache *c, struct qs_queue *q, int node, bool born)
{
    unsigned order = QS_LOAD(c->order);
    struct qs_slab *s = qs_page_alloc_slab(node, order);
    if (!s)
        return NULL;
    size_t al = c->align > 8 ? c->align : 8;
    /* a debug cache's first object has its left red zone before it */
    s->base = (char *)(((uintptr_t)s->mem + c->red_left + al - 1) & ~(uintptr_t)(al - 1));
    s->objects = 0;
    __atomic_store_n(&s->span, 0, __ATOMIC_RELAXED); /* read by frees' validation */
    s->recip = ~(uint64_t)0 / c->slot_size + 1;
    s->cache_id = c->id;
    s->fast = c->free_fast;
    s->inuse = 0;
    s->freelist = s->tail = NULL;
    if (born)
        qs_slab_grow(c, q, s, 1);
    __atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
    qs_stat(c, q, QS_NEW_SLAB, 1);
    return s;
}

/* s's free list cannot be followed (a walker met a bad link and reported
 * it): what is left on it stays out of use for good, counted as allocated,
 * never handed out nor followed; its free bits go (internal.h).  An object
 * whose word was a free stamp is in a queue as well and comes back from
 * there (its bit clear now, it is put as any free).  Returns how many were
 * left on the list. */
uint32_t qs_slab_list_lost(struct qs_slab *s)
{
    uint32_t lost = s->objects - s->inuse;
    qs_fbits_clear_slab(s);
    s->freelist = s->tail = NULL;
    s->inuse = s->objects;
    return lost;
}

/* "No queue" (internal.h): what the fast paths find where a caller has no
 * queue of a cache (owner/owner.c hands it out; front/slqb/fast.h).  Never
 * written: empty, owns no slab.  Defined here, in core, for
 * qs_uncount_frees below. */
struct qs_queue qs_no_queue = {.own = &qs_no_queue.list}; /* owns no slab */

/* The tag masks for the fast paths' asm (internal.h QS_TAG_MASK_ASM). */
const uint64_t qs_tag_masks[2] = {QS_LINK_TAG_MASK, QS_WORD_TAG_MASK};

/* A queue's seqcount around a slow change of its nr (core/queue.h). */
void qs_queue_seq_begin(struct qs_queue *q)
{
    QS_STORE(q->nr_seq, q->nr_seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
void qs_queue_seq_end(struct qs_queue *q, long moved)
{
    QS_STORE(q->moved, q->moved + (unsigned long)moved);
    __atomic_store_n(&q->nr_seq, q->nr_seq + 1, __ATOMIC_RELEASE);
}

void qs_uncount_frees(qslab_cache *c, struct qs_queue *q, unsigned long k)
{
    if (!k)
        return;
    if (q && q != &qs_no_queue) { /* core/queue.h: out of the derived FREE_FAST */
        qs_queue_seq_begin(q);
        qs_queue_seq_end(q, (long)k);
    } else {
        __atomic_fetch_sub(&c->orphan_stat[QS_FREE_FAST], k, __ATOMIC_RELAXED);
    }
}

/* A list walker (this file's, SLQB's) met obj, whose link is not
 * valid: report it.  A debug cache (no queues, no stamps: the link word
 * was overwritten) is the debug front end's to report
 * (qs_debug_hooks.bad_link).  Otherwise a double free if obj's word holds
 * the free stamp or 0, else an overwritten free object.  A double free's
 * second free was counted where it was pushed: it is taken out of the
 * counts through q (the caller's queue, or NULL). */
QS_NOINLINE void qs_report_bad_link(qslab_cache *c, struct qs_queue *q, void *obj)
{
    if (c->debug) { /* no queues, no stamps: the link word was overwritten */
        qs_debug_hooks.bad_link(c, obj);
        return;
    }
    uintptr_t w = *qs_link(c, obj);
    /* the stamp: freed again (pushed) while on this list; 0: that second
     * entry was handed out since (a pop clears the word) */
    if (w == QS_STAMP(c->secret) || w == 0) {
        qs_fatal("double free of %p in cache %s (freed again while it was free)", obj, c->name);
        qs_uncount_frees(c, q, 1);
    } else {
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)",
                 c->name, obj);
    }
}

void *qs_slab_take_one(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    if (!s->freelist && !qs_slab_grow(c, q, s, 1))
        return NULL;
    void *obj = s->freelist;
    bool bad;
    void *next = qs_list_next(c, s, *qs_link(c, obj), &bad);
    if (unlikely(bad)) {
        qs_report_bad_link(c, q, obj);
        /* the list is lost from here: its objects stay out of use,
         * counted as allocated (debug/slot.c: quarantined), the slab full */
        uint32_t lost = qs_slab_list_lost(s);
        if (c->debug) {
            __atomic_fetch_add(&c->debug_quarantined, lost, __ATOMIC_RELAXED);
            qs_stat(c, q, QS_ALLOC_SLOW, lost);
        }
        return NULL;
    }
    s->freelist = next;
    if (!next)
        s->tail = NULL;
    s->inuse++;
    qs_fbit_clear(s, obj);
    *qs_link(c, obj) = 0;
    return obj;
}
