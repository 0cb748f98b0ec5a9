/*
 * slab.c - objects inside a slab.
 *
 * A slab is 2^order pages.  Objects start at the slab's first byte (rounded
 * up to the cache's alignment) and sit slot_size bytes apart; nothing else is
 * stored in the slab, the descriptor lives in the chunk header (page.c).
 *
 * ORDER RULE (order 0 first, as SLQB).  The default order is the smallest
 * order that holds QS_SLAB_MIN_OBJS (8) objects or is QS_SLAB_MIN_BYTES (32
 * KiB) long, unless that wastes more than 1/8 of the slab; then up to three
 * orders above the one that holds one object are tried and the first that
 * wastes at most 1/8 is taken (or the least wasteful).  Objects up to 512
 * bytes keep order 0.  Why not one object per page: every slab has a
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
#include "internal.h"

unsigned qs_slab_min_order(size_t slot_size, size_t align)
{
    unsigned k = 0;
    size_t need = slot_size > align ? slot_size : align;
    while (k < QS_MAX_ORDER && qs_slab_bytes(k) < need)
        k++;
    return k;
}

unsigned qs_slab_objects(const qslab_cache *c, unsigned order)
{
    return (unsigned)(qs_slab_bytes(order) / c->slot_size);
}

unsigned qs_slab_default_order(size_t slot_size, size_t align)
{
    unsigned min = qs_slab_min_order(slot_size, align), best = min;
    size_t best_waste_pm = (size_t)-1;
    for (unsigned k = min; k <= min + 3 && k <= QS_MAX_ORDER; k++) {
        size_t bytes = qs_slab_bytes(k);
        if (bytes / slot_size < QS_SLAB_MIN_OBJS && bytes < QS_SLAB_MIN_BYTES)
            continue; /* a descriptor for every one or two objects */
        /* waste that costs memory: the slab's tail past the last
         * object's page is never written, so never resident (a 1.5 MiB
         * object in a 2 MiB slab wastes address space, not RSS) */
        size_t used = (bytes / slot_size) * slot_size;
        size_t waste = ((used + QS_PAGE_SIZE - 1) & ~(size_t)(QS_PAGE_SIZE - 1)) - used;
        if (waste * 8 <= bytes)
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
 * Returns the number born, 0 when s is at capacity.
 *
 * qs_slab_grow_into: the same, but the first `room` objects born go
 * straight into a queue's slots at dst, with the queue's free stamp and
 * counted in s->inuse (the refill would walk the free list for them at
 * once); the rest onto the free list.  Returns the number placed. */
static uint32_t slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                          void **dst, uint32_t room, uint32_t *placed)
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
    if (k > cap - n)
        k = cap - n;
    uint32_t p = room < k ? room : k, size = c->slot_size;
    char *obj = s->base + (size_t)n * size;
    uintptr_t stamp = QS_STAMP(c->secret);
    for (uint32_t i = 0; i < p; i++, obj += size) {
        if (c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = stamp;
        dst[i] = obj;
    }
    char *first = obj;
    for (uint32_t i = p; i < k; i++, obj += size) {
        if (c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = qs_enc(c, i + 1 < k ? obj + size : NULL);
    }
    if (p < k) {
        if (s->tail)
            *qs_link(c, s->tail) = qs_enc(c, first);
        else
            s->freelist = first;
        s->tail = first + (size_t)(k - p - 1) * size;
    }
    s->inuse += p;
    *placed = p;
    s->objects = n + k;
    __atomic_store_n(&s->span, (n + k) * size, __ATOMIC_RELAXED);
    qs_stat(c, q, QS_NEW_OBJS, k);
    return k;
}

uint32_t qs_slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want)
{
    uint32_t placed;
    return slab_grow(c, q, s, want, NULL, 0, &placed);
}

uint32_t qs_slab_grow_into(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, uint32_t want,
                           void **dst, uint32_t room)
{
    uint32_t placed;
    slab_grow(c, q, s, want, dst, room, &placed);
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
    s->base = (char *)(((uintptr_t)s->mem + al - 1) & ~(uintptr_t)(al - 1));
    s->objects = 0;
    __atomic_store_n(&s->span, 0, __ATOMIC_RELAXED); /* read by frees' validation */
    s->recip = ~(uint64_t)0 / c->slot_size + 1;
    s->cache_id = c->id;
    s->inuse = 0;
    s->freelist = s->tail = NULL;
    if (born)
        qs_slab_grow(c, q, s, 1);
    __atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
    qs_stat(c, q, QS_NEW_SLAB, 1);
    return s;
}

void *qs_slab_take_one(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    if (!s->freelist && !qs_slab_grow(c, q, s, 1))
        return NULL;
    void *obj = s->freelist;
    bool bad;
    void *next = qs_dec(c, *qs_link(c, obj), &bad);
    if (unlikely(bad)) {
        qs_report_bad_link(c, q, obj);
        return NULL;
    }
    s->freelist = next;
    if (!next)
        s->tail = NULL;
    s->inuse++;
    *qs_link(c, obj) = 0;
    return obj;
}
