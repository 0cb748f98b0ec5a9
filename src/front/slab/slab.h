/*
 * front/slab/slab.h - what the SLAB front end's files share (slab.c's FILES
 * says which holds what): the array limits, the inline accessors of a
 * slab's free-list block (its bitmap and index array) and of the node's
 * list of free slabs, used on every path from the owners' arrays to the
 * slabs and by validation, and the functions one file calls in another
 * (slabfe_, hidden).  Private to src/front/slab/: no other folder includes
 * it (front.h holds the front end's interface, qs_front_slab).
 */
#ifndef QSLAB_FRONT_SLAB_H
#define QSLAB_FRONT_SLAB_H

#include "front/front.h"

#pragma GCC visibility push(hidden)

#define ALIEN_LIMIT 12      /* mm/slab.c alloc_alien_cache */
#define REFILL_MAX 256      /* objects a CPU's refill gathers at once */

/* ---- a slab's free-list block ---- */
static inline unsigned idx_bytes(unsigned num)
{
    return num <= 256 ? 1 : num <= 65536 ? 2 : 4;
}

/* A slab's free-list block: a bitmap of its free objects (qslab's: a free
 * of an object its slab holds free already is found at once, whatever
 * path brought it; the kernel's SLAB keeps one only when debugging), then
 * the index array. */
static inline size_t bm_bytes(unsigned num)
{
    return ((size_t)num + 63) / 64 * 8;
}
static inline size_t meta_bytes(unsigned num, unsigned ix)
{
    return (bm_bytes(num) + (size_t)num * ix + 7) & ~(size_t)7;
}

static inline unsigned ix_of(const struct qs_slab *s)
{
    return idx_bytes(s->objects);
}
static inline uint64_t *free_bm(const struct qs_slab *s)
{
    return (uint64_t *)s->freelist;
}
static inline bool bm_test(const struct qs_slab *s, unsigned i)
{
    return free_bm(s)[i / 64] >> (i % 64) & 1;
}
static inline void bm_flip(const struct qs_slab *s, unsigned i)
{
    free_bm(s)[i / 64] ^= (uint64_t)1 << (i % 64);
}
/* Entry i of the index array holds its index XOR i (entries are as wide
 * as the indices: i and v have the same width), so that an entry still
 * zero names its own object: a new slab's array starts in order without a
 * write, and one of zero memory (the page layer's, QS_SLAB_ZERO) is not
 * written at all until an object goes back (slab_init_free: bare births
 * for calloc leave a slab's every page untouched). */
static inline unsigned get_free_idx(const struct qs_slab *s, unsigned i)
{
    const void *a = (const char *)s->freelist + bm_bytes(s->objects);
    switch (ix_of(s)) {
    case 1:
        return ((const uint8_t *)a)[i] ^ i;
    case 2:
        return ((const uint16_t *)a)[i] ^ i;
    default:
        return ((const uint32_t *)a)[i] ^ i;
    }
}
static inline void set_free_idx(struct qs_slab *s, unsigned i, unsigned v)
{
    void *a = (char *)s->freelist + bm_bytes(s->objects);
    switch (ix_of(s)) {
    case 1:
        ((uint8_t *)a)[i] = (uint8_t)(v ^ i);
        break;
    case 2:
        ((uint16_t *)a)[i] = (uint16_t)(v ^ i);
        break;
    default:
        ((uint32_t *)a)[i] = v ^ i;
    }
}
static inline bool off_slab(const struct qs_slab *s)
{
    return (uintptr_t)s->freelist - (uintptr_t)s->mem >= qs_slab_bytes(s->order);
}
static inline unsigned obj_index(const qslab_cache *c, const struct qs_slab *s, const void *obj)
{
    return (unsigned)(((uintptr_t)obj - (uintptr_t)s->base) / c->slot_size);
}

/* LAZY BIRTH.  A slab's objects [0, born) are born (their words written,
 * constructed), the others not yet: `span` counts the born ones' bytes, as
 * SLQB's (core/slab.c), so a free of a slot never handed out fails the
 * pointer check.  The index array starts in order, an allocation takes
 * entry inuse++ and a free writes entry --inuse, so the entries from born
 * on were never written: the free objects not born yet, in address order,
 * each at its own entry; the refill that takes one births it
 * (slabfe_take_locked) and a new slab makes no page resident but the ones
 * its objects in use and its free-list block are on (the kernel's SLAB
 * writes every object's index into the slab when it makes it).  The
 * bitmap has the bits of born free objects only: an object not born yet is
 * free by its place (its entry at or past born), its bit 0, so that a
 * birth flips nothing and a slab of zero memory needs no write to start
 * (slab_init_free).  Caches
 * with a constructor (run outside the node lock at the slab's birth) or
 * `random` (a shuffled index array names objects in no order) are born
 * whole.  On the node's FIFO a slab's `objects` is its born ones (linked:
 * the FIFO's view, node.c); back from it, the layout's again. */
static inline unsigned born_of(const qslab_cache *c, const struct qs_slab *s)
{
    return (unsigned)(__atomic_load_n(&s->span, __ATOMIC_RELAXED) / c->slot_size);
}
static inline bool born_whole(const qslab_cache *c)
{
    return c->ctor || qs_slab_random(c);
}

/* the node's free slabs (doubly linked, n->lock) */
static inline void free_add(struct qs_node *n, struct qs_slab *s)
{
    __atomic_store_n(&s->state, (uint8_t)QS_SLAB_EMPTY, __ATOMIC_RELAXED);
    s->prev = NULL;
    s->next = n->slabs_free;
    if (s->next)
        s->next->prev = s;
    n->slabs_free = s;
    QS_STORE(n->nr_free_slabs, n->nr_free_slabs + 1);
}
static inline void free_del(struct qs_node *n, struct qs_slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        n->slabs_free = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    QS_STORE(n->nr_free_slabs, n->nr_free_slabs - 1);
}

/* ---- slabs.c: the node's slabs ---- */
extern __thread size_t slabfe_released; /* bytes this thread gave back */
unsigned slabfe_slab_objs_per_slab(const qslab_cache *c, unsigned order);
unsigned slabfe_slab_order(const qslab_cache *c);
unsigned slabfe_free_limit(const qslab_cache *c);
struct qs_slab *slabfe_slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_node *n, bool *zero);
void slabfe_slabs_to_fifo(qslab_cache *c, struct qs_queue *q, struct qs_slab *list);
void slabfe_release_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *list,
                         struct qs_slab **all);
void slabfe_uncount_twice(qslab_cache *c, struct qs_queue *q, unsigned long k);
unsigned slabfe_take_locked(qslab_cache *c, struct qs_node *n, void **dst, unsigned want,
                            unsigned *twice, unsigned *births, unsigned born_max, bool *bare);
/* objects not born yet a refill takes at most: a page's worth, at least one */
static inline unsigned slab_born_max(const qslab_cache *c)
{
    return c->slot_size < QS_PAGE_SIZE ? (unsigned)(QS_PAGE_SIZE / c->slot_size) : 1;
}
void slabfe_free_block_locked(qslab_cache *c, struct qs_node *n, void *const *objs,
                              unsigned long k, struct qs_slab **release, void **twice,
                              unsigned *ntwice);
void slabfe_drain_free(qslab_cache *c, struct qs_node *n, unsigned long max);

/* ---- shared.c: between the arrays and the slabs ---- */
void slabfe_to_node(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void *const *objs,
                    unsigned long k, bool shared_first);
void slabfe_slab_give_back(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long k);
unsigned slabfe_gather(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void **dst,
                       unsigned want, bool *fresh, bool *bare);
void slabfe_drain_shared(qslab_cache *c, struct qs_node *n, unsigned max);
void slabfe_alien_drain(qslab_cache *c, struct qs_queue *q);
void slabfe_alien_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj);

/* ---- reap.c: the cache-wide hooks ---- */
size_t slabfe_slab_shrink(qslab_cache *c);
size_t slabfe_slab_sweep(bool all);
void slabfe_slab_retire(qslab_cache *c, struct qs_queue *q);
void slabfe_slab_destroy_all(qslab_cache *c, struct qs_slab **gone);
void slabfe_slab_tuned(qslab_cache *c);
void slabfe_slab_validate(qslab_cache *c, struct qs_walk *w);

#pragma GCC visibility pop

#endif /* QSLAB_FRONT_SLAB_H */
