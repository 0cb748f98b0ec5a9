/*
 * front/slab/slabs.c - the SLAB front end's slabs, all of them its nodes':
 * their layout (objects, index width, on or off the slab, colour space)
 * and order, the node's free_limit, a new slab's birth (coloured, its
 * index array in order or shuffled), slabs to and from the node's
 * empty-slab FIFO (src/core/node.c), slabs given back to the page layer,
 * and objects taken from and freed to their slabs under node->lock, each
 * object's word checked on the way (slabfe_take_locked,
 * slabfe_free_block_locked, slabfe_drain_free).  What is above the slabs
 * (the shared and alien arrays, the owners' arrays) is shared.c's and
 * slab.c's; the front end's overview is slab.c's.
 *
 * SLABS ARE THE NODE'S.  Every slab of a SLAB cache is owned by its node
 * (owner = &node->list), on one of three lists under node->lock: partial
 * and full (node->list) and free (node->slabs_free, state EMPTY).  A slab's
 * free list is an index array (the kernel's freelist_idx_t: 1, 2 or 4
 * bytes per object): entries [inuse, objects) are the free objects' indices;
 * an allocation takes entry inuse++, a free writes entry --inuse.  It lives
 * at the slab's end when the slab's leftover holds it, else in a separate
 * block (the kernel's OFF_SLAB, for objects of 128 bytes and more).  Nothing
 * is needed in a free object in a slab (the kernel's SLAB writes nothing
 * there); qslab keeps one word for its checks: the queues' free stamp while
 * an object is in an array (written when it enters one), the slab mark (an
 * encoded NULL link, which "looks free") while it is free in its slab
 * (written at the object's birth, as the kernel's SLUB writes its free
 * pointers, and when it goes back), 0 while allocated.  So a free of an
 * object that is free in its slab is found at once where the free loads
 * the word (the slow paths) or, when a CPU's fast path pushed it blindly,
 * by the refill that finds the stamp or 0 on an object its slab says is
 * free; a write into a free object, when its array gives it back (the word
 * must be the stamp), by a refill, or by the shrink that gives its slab
 * back.  Objects are born lazily (slab.h, LAZY BIRTH): the word of an
 * object not born yet is never read, and the first refill that takes it
 * writes the stamp there.
 *
 * COLOURING.  The leftover of a slab (what objects and an on-slab index
 * array do not use) shifts each new slab's first object by the next multiple
 * of the colour offset (a cache line, or the alignment), so that the same
 * object of different slabs falls in different cache sets (Bonwick 1994).
 */
#include "front/front.h"
#include "front/slab/slab.h"

#include <errno.h>
#include <string.h>

#define OFF_SLAB_MIN 128    /* PAGE_SIZE >> 5 */

/* ---- slab layout ---- */
struct layout {
    unsigned num;        /* objects per slab */
    unsigned ix;         /* bytes per index */
    bool off;            /* index array off the slab */
    size_t colour_space; /* leftover bytes */
};

/* The most objects of `slot` bytes, at most num, that fit in `slab` bytes
 * with their free-list block on the slab.  What they take grows with their
 * number (the index width too), so the answer is found by bisection: the
 * decrement it replaces ran 2.85 million times for a 64 MiB slab (order 14)
 * of 8-byte objects, at every statistics read and free-limit computation. */
static unsigned on_slab_fit(size_t slab, size_t slot, unsigned num)
{
    unsigned lo = 0, hi = num; /* lo fits (0 always does); the answer is in [lo, hi] */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo + 1) / 2;
        if ((size_t)mid * slot + meta_bytes(mid, idx_bytes(mid)) <= slab)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static struct layout layout(const qslab_cache *c, unsigned order)
{
    struct layout L = {0, 1, false, 0};
    size_t slab = qs_slab_bytes(order), slot = c->slot_size;
    unsigned num = (unsigned)(slab / slot);
    if (!num)
        return L;
    unsigned ix = idx_bytes(num);
    size_t left = slab - num * slot;
    if (left >= meta_bytes(num, ix)) { /* the leftover holds it */
        L.num = num;
        L.ix = ix;
        L.colour_space = left - meta_bytes(num, ix);
    } else if (slot >= OFF_SLAB_MIN) {
        L.num = num;
        L.ix = ix;
        L.off = true;
        L.colour_space = left;
    } else {
        num = on_slab_fit(slab, slot, num);
        L.num = num;
        L.ix = idx_bytes(num);
        L.colour_space = slab - (size_t)num * slot - meta_bytes(num, L.ix);
    }
    return L;
}

unsigned slabfe_slab_objs_per_slab(const qslab_cache *c, unsigned order)
{
    return layout(c, order).num;
}

/* calculate_slab_order's first fit from order 0, with qslab's waste bound
 * (core/slab.c's order rule): the first order, from the least that holds an
 * object, whose leftover (the colour space) is at most 1/64 of the slab,
 * trying up to five orders above it and no slab past 128 KiB unless the
 * least is longer; else the least wasteful of those.  The kernel's rule
 * (order 0 unless it wastes more than 1/8, then order 1) left a fifth of
 * some slabs unused: 2,176-byte objects three to an 8 KiB slab. */
unsigned slabfe_slab_order(const qslab_cache *c)
{
    unsigned first = QS_MAX_ORDER + 1, best = c->min_order;
    size_t best_pm = (size_t)-1;
    for (unsigned order = c->min_order; order <= QS_MAX_ORDER; order++) {
        struct layout L = layout(c, order);
        if (!L.num)
            continue;
        size_t bytes = qs_slab_bytes(order);
        if (first > QS_MAX_ORDER)
            first = order;
        else if (order > first + QS_SLAB_ORDERS_UP || bytes > QS_SLAB_WASTE_MAX_BYTES)
            break;
        if (L.colour_space * QS_SLAB_WASTE_DIV <= bytes)
            return order;
        size_t pm = L.colour_space * 1000 / bytes;
        if (pm < best_pm) {
            best_pm = pm;
            best = order;
        }
    }
    return first > QS_MAX_ORDER ? c->min_order : best;
}

/* The kernel's free_limit, bounded in bytes at QS_SLAB_FREE_BYTES (ten
 * 32 KiB slabs, what SLUB's min_partial keeps at most): the kernel's rule
 * is for slabs of a few pages, and kept four empty 2 MiB slabs a node for a
 * class of 1 MiB blocks on two CPUs; past it, empty slabs go to the FIFO,
 * under its decay and the retention rule. */
unsigned slabfe_free_limit(const qslab_cache *c)
{
    long cpus = qs_os_cpu_possible(); /* nr_cpus_node: the node's share */
    long per_node = cpus / (qs_nr_nodes ? qs_nr_nodes : 1);
    if (per_node < 1)
        per_node = 1;
    unsigned long k = (unsigned long)((1 + per_node) * QS_LOAD(c->slab_batch) +
                                      slabfe_slab_objs_per_slab(c, QS_LOAD(c->order)));
    if (k * c->slot_size > QS_SLAB_FREE_BYTES)
        k = QS_SLAB_FREE_BYTES / c->slot_size;
    return (unsigned)k;
}

/* Free-list block, bitmap and marks of a slab whose objects are all free
 * (arr: where the block goes; s->objects: the layout's objects, set), of
 * which the first `born` are born: their words written (the slab mark),
 * constructed if `ctor`; the others are not touched (lazy birth: born when
 * a refill first takes them, slabfe_take_locked).  The index array is in
 * order, or with `random` in the cache's random order (core/slab.c
 * SLAB_FREELIST_RANDOM; the kernel's shuffle_freelist in cache_init_objs):
 * new slabs and slabs back from the empty FIFO, which plays the page
 * allocator's part, alike. */
static bool slab_word_ok(qslab_cache *c, void *obj);

static void slab_init_free(qslab_cache *c, struct qs_slab *s, void *arr, unsigned born, bool ctor,
                           bool zero)
{
    unsigned num = s->objects;
    s->inuse = 0;
    s->freelist = arr;
    /* the bitmap clear (the objects not born yet are free by their place:
     * slab.h), every entry its own index (0: slab.h get_free_idx); memory
     * the page layer gave zero (zero) is so already, and stays untouched */
    if (!zero)
        memset(arr, 0, meta_bytes(num, ix_of(s)));
    uintptr_t mark = qs_enc(c, NULL);
    bool fifo = s->tail != NULL; /* linked by slabfe_slabs_to_fifo, in address order */
    s->tail = NULL;
    for (unsigned i = 0; i < born; i++) {
        char *obj = s->base + (size_t)i * c->slot_size;
        if (unlikely(fifo) && *qs_link(c, obj) != qs_enc(c, i + 1 < born ? obj + c->slot_size : NULL)) {
            /* not as the FIFO left it: freed again while there (pushed
             * blindly: an array holds it, or handed it out since) or
             * written after its free.  Reported, in use for good or
             * until its array entry comes home; the entries below
             * s->inuse are the objects in use */
            slab_word_ok(c, obj);
            set_free_idx(s, i, get_free_idx(s, s->inuse));
            set_free_idx(s, s->inuse++, i);
            slabfe_uncount_twice(c, NULL, 1); /* counted as allocated (see slabfe_to_node) */
            continue;
        }
        bm_flip(s, i); /* free */
        if (ctor && c->ctor)
            c->ctor(obj);
        *qs_link(c, obj) = mark;
    }
    /* the kernel's shuffle_freelist: slabs born whole only (born_whole) */
    if (unlikely(qs_slab_random(c)) && !s->inuse && born == num) {
        struct qs_shuffle sh;
        qs_shuffle_start(c, &sh, num);
        for (unsigned i = 0; i < num; i++)
            set_free_idx(s, i, qs_shuffle_next(&sh));
    }
}

/* An empty slab of n's FIFO (src/core/node.c), back as a SLAB slab: the same
 * born objects at the same places (constructed still: nothing wrote into
 * them but their link words), the rest still to be born, a new free-list
 * block.  NULL: none. */
static struct qs_slab *slab_from_fifo(qslab_cache *c, struct qs_node *n)
{
    struct qs_slab *s = qs_node_take_empty(n);
    if (!s)
        return NULL;
    struct layout L = layout(c, s->order);
    unsigned born = s->objects; /* the FIFO's view: its born objects, linked */
    void *arr = L.off ? qs_meta_alloc(meta_bytes(L.num, L.ix))
                      : s->mem + qs_slab_bytes(s->order) - meta_bytes(L.num, L.ix);
    if (!arr || born > L.num) { /* ENOMEM: back to the FIFO */
        if (arr && L.off)
            qs_meta_free(arr, meta_bytes(L.num, L.ix));
        s->next = NULL;
        qs_node_put_empty(c, NULL, n, s);
        return NULL;
    }
    s->objects = L.num; /* span stays: the born objects' */
    slab_init_free(c, s, arr, born, false, false);
    return s;
}

/* Empty slabs past free_limit (the kernel's slab_destroy to the page
 * allocator): to the node's empty-slab FIFO, which plays the page
 * allocator's part here (it keeps them for empty_decay_ms, then gives them
 * back: a page fault costs far more in user space than a page allocation
 * in the kernel).  The FIFO's view: objects linked through their words
 * (node.c, validate.c), the free-list block given back. */
static bool slab_leaving_ok(qslab_cache *c, struct qs_queue *q, struct qs_slab *s);

void slabfe_slabs_to_fifo(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    while (list) {
        struct qs_slab *s = list, *next = s->next;
        if (unlikely(!slab_leaving_ok(c, q, s))) { /* it stays */
            list = next;
            continue;
        }
        if (off_slab(s))
            qs_meta_free(s->freelist, meta_bytes(s->objects, ix_of(s)));
        unsigned born = born_of(c, s);
        if (unlikely(!born)) { /* made, never taken from: its first object born for the FIFO's view */
            born = 1;
            __atomic_store_n(&s->span, (uint32_t)c->slot_size, __ATOMIC_RELAXED);
            qs_stat(c, q, QS_NEW_OBJS, 1);
        }
        s->objects = born; /* the FIFO's view: the born objects, linked (slab_from_fifo) */
        char *first = s->base, *last = s->base + (size_t)(born - 1) * c->slot_size;
        for (char *obj = first; obj < last; obj += c->slot_size)
            *qs_link(c, obj) = qs_enc(c, obj + c->slot_size);
        *qs_link(c, last) = qs_enc(c, NULL);
        s->freelist = first;
        s->tail = last;
        s->inuse = 0;
        s->next = NULL;
        qs_node_put_empty(c, q, &c->nodes[s->node], s);
        list = next;
    }
}

/* A slab with free objects for node n: an empty one of the FIFO, or a new
 * one, whose objects are then zero but for their word if *zero. */
struct qs_slab *slabfe_slab_grow(qslab_cache *c, struct qs_queue *q, struct qs_node *n, bool *zero)
{
    *zero = false;
    struct qs_slab *f = slab_from_fifo(c, n);
    if (f)
        return f;
    unsigned order = QS_LOAD(c->order);
    struct layout L = layout(c, order);
    if (!L.num) {
        errno = ENOMEM;
        return NULL;
    }
    struct qs_slab *s = qs_page_alloc_slab(n->id, order);
    if (!s)
        return NULL;
    void *arr;
    if (L.off) {
        if (!(arr = qs_meta_alloc(meta_bytes(L.num, L.ix)))) {
            qs_page_free_slab(s);
            errno = ENOMEM;
            return NULL;
        }
    } else {
        arr = s->mem + qs_slab_bytes(order) - meta_bytes(L.num, L.ix);
    }
    size_t colour_off = c->align > QS_CACHELINE ? c->align : QS_CACHELINE;
    size_t ncolours = L.colour_space / colour_off + 1;
    uint32_t k = __atomic_fetch_add(&n->colour_next, 1, __ATOMIC_RELAXED);
    s->base = s->mem + (k % ncolours) * colour_off;
    *zero = qs_slab_born_zero(c, s);
    s->objects = L.num;
    s->recip = ~(uint64_t)0 / c->slot_size + 1;
    s->cache_id = c->id;
    s->fast = c->free_fast;
    s->tail = NULL; /* not a FIFO slab's (slab_init_free) */
    unsigned born = born_whole(c) ? L.num : 0;
    /* an on-slab array in zero memory is zero: in order, nothing free born */
    slab_init_free(c, s, arr, born, true, !L.off && (s->empty_ms & QS_SLAB_ZERO));
    qs_slab_set_owner(s, &n->list);
    __atomic_store_n(&s->span, born * c->slot_size, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
    qs_stat(c, q, QS_NEW_SLAB, 1);
    qs_stat(c, q, QS_NEW_OBJS, born);
    return s;
}

/* bytes this thread gave back (shrink and trim report their difference:
 * slabs go back from several places on the way, free_limit's among them) */
__thread size_t slabfe_released;

/* The kernel's slab_destroy, for a ->next list: each slab's free-list
 * block and counts, then the page layer (adjacent slabs: one madvise);
 * a destroy's (`all`) go onto *all, for the shared destroy. */
void slabfe_release_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *list, struct qs_slab **all)
{
    for (struct qs_slab *s = list; s; s = s->next) {
        unsigned objs = born_of(c, s); /* NEW_OBJS counted births */
        if (off_slab(s))
            qs_meta_free(s->freelist, meta_bytes(s->objects, ix_of(s)));
        s->freelist = NULL;
        qs_stat(c, q, QS_FREE_SLAB, 1);
        qs_stat(c, q, QS_FREE_OBJS, objs);
    }
    if (all)
        qs_slabs_gather(all, list);
    else
        slabfe_released += qs_page_free_slabs(list);
}

/* ---- objects to and from slabs (n->lock held) ---- */

/* The word of a free object in a slab: the slab mark; the stamp (in an
 * array too) or 0 (handed out from an array meanwhile): freed twice; else
 * overwritten.  Reports and returns false for the last ones. */
static bool slab_word_ok(qslab_cache *c, void *obj)
{
    uintptr_t w = *qs_link(c, obj);
    if (likely(w == qs_enc(c, NULL)))
        return true;
    if (w == QS_STAMP(c->secret) || w == 0)
        qs_fatal("double free of %p in cache %s (found before it was handed out again)", obj,
                 c->name);
    else
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)",
                 c->name, obj);
    return false;
}

/* Take the second frees out of the counts: through q (the caller's array),
 * else the cache's slow frees (a caller without an array counts its frees
 * there: free_unowned). */
void slabfe_uncount_twice(qslab_cache *c, struct qs_queue *q, unsigned long k)
{
    if (q)
        qs_uncount_frees(c, q, k);
    else if (k)
        __atomic_fetch_sub(&c->orphan_stat[QS_FREE_SLOW], k, __ATOMIC_RELAXED);
}

/* Slab s, every object free in its bitmap, is leaving n's lists (to the
 * FIFO, or back to the page layer): each object's word must be the slab
 * mark.  One that is not is in use after all: freed twice, its second free
 * pushed blindly by a CPU's fast path while its slab held it free, so an
 * array holds it (the stamp) or handed it out since (0, or what the
 * program wrote); or written after its free.  Each is reported and marked
 * in use in its slab (an array entry of it then comes home as any object's
 * does, unreported), and the slab stays, partial, on n's list: false.  The
 * caller holds no lock. */
static bool slab_leaving_ok(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    uintptr_t mark = qs_enc(c, NULL);
    unsigned long twice = 0;
    unsigned bad = 0, born = born_of(c, s);
    for (unsigned i = 0; i < born; i++) { /* the others were never written */
        void *obj = s->base + (size_t)i * c->slot_size;
        uintptr_t w = *qs_link(c, obj);
        if (likely(w == mark))
            continue;
        slab_word_ok(c, obj); /* reports */
        twice++; /* every object left alone counts as allocated (see slabfe_to_node) */
        /* in use: its index from the free entries [inuse, objects) to entry inuse */
        for (unsigned p = s->inuse; p < s->objects; p++) {
            if (get_free_idx(s, p) == i) {
                set_free_idx(s, p, get_free_idx(s, s->inuse));
                set_free_idx(s, s->inuse, i);
                break;
            }
        }
        s->inuse++;
        bm_flip(s, i);
        bad++;
    }
    if (!bad)
        return true;
    slabfe_uncount_twice(c, q, twice);
    struct qs_node *n = &c->nodes[s->node];
    qs_lock_acquire(&n->lock);
    n->free_objects += s->objects - s->inuse;
    qs_list_add(&n->list, s, s->inuse == s->objects ? QS_SLAB_FULL : QS_SLAB_PARTIAL);
    qs_lock_release(&n->lock);
    return false;
}

/* Take up to want objects of node n's slabs into dst, each given the free
 * stamp (it enters an array): partial slabs first, then free ones, and of
 * the objects not born yet at most born_max (at least 1), counted in
 * *births: a refill that reaches new memory takes a page's worth of it, as
 * SLQB's (c->fresh), not a batch, so that the pages it touches are the
 * pages its array's owner uses.  bare (calloc's refill, else NULL): an
 * object not born yet of zero memory met before any other is born bare
 * (never written: the stamp neither), alone into dst[0], and *bare set.
 * An object whose word is wrong is reported
 * and not taken (it stays in use from its slab's side: an array holds it
 * already, or it is lost); *twice counts those freed twice (their second
 * free leaves the counts). */
unsigned slabfe_take_locked(qslab_cache *c, struct qs_node *n, void **dst, unsigned want,
                            unsigned *twice, unsigned *births, unsigned born_max, bool *bare)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned got = 0, born = 0;
    const struct qs_slab *touched = NULL; /* the slab whose run's pages were asked for */
    while (got < want) {
        struct qs_slab *s = n->list.partial;
        if (!s) {
            if (born >= born_max || !(s = n->slabs_free)) /* (no free slab left partial empty) */
                break;
            free_del(n, s);
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
        }
        while (s->inuse < s->objects && got < want) {
            /* an entry at or past born names its own object (slab.h): not
             * read, so that a birth does not fault the index block's page
             * in (from the kernel's zero page, a second fault when the
             * object's page is the block's and the program writes it) */
            unsigned born_n = born_of(c, s);
            unsigned idx = s->inuse >= born_n ? s->inuse : get_free_idx(s, s->inuse);
            s->inuse++;
            void *obj = s->base + (size_t)idx * c->slot_size;
            n->free_objects--;
            uint32_t span = __atomic_load_n(&s->span, __ATOMIC_RELAXED);
            if ((size_t)idx * c->slot_size >= span) { /* its bit is 0 (slab.h): no flip */
                if (born >= born_max && born) { /* enough new memory: not taken */
                    n->free_objects++;
                    s->inuse--;
                    want = got;
                    break;
                }
                if (bare && !got && qs_slab_born_zero(c, s) && !born_whole(c)) {
                    /* calloc's: born bare, its word never written
                     * (core/slab.c qs_slab_born_bare), handed out alone */
                    __atomic_store_n(&s->span, (uint32_t)((idx + 1) * c->slot_size), __ATOMIC_RELAXED);
                    ++*births;
                    *bare = true;
                    dst[got++] = obj;
                    want = got;
                    break;
                }
                if (s != touched) { /* its run: the pages its words go to, at once */
                    unsigned k = born_max - born, left = s->objects - idx;
                    if (k > want - got) /* (this one included in both) */
                        k = want - got;
                    qs_slab_first_touch(c, s, idx, k < left ? k : left);
                    touched = s;
                }
                born++;
                /* not born yet: the next in address order (an index past
                 * the born ones is at its own entry, never written:
                 * slab.h born_of); born now, its word whatever the
                 * memory held.  span grows under n->lock only, read
                 * relaxed by frees' validation (qs_slab_valid_obj): a
                 * free of this object follows its hand-out, which
                 * follows this store (the program's own ordering) */
                __atomic_store_n(&s->span, (uint32_t)((idx + 1) * c->slot_size), __ATOMIC_RELAXED);
                ++*births;
            } else {
                bm_flip(s, idx); /* in use */
                if (unlikely(!slab_word_ok(c, obj))) {
                    /* held elsewhere too (the stamp, or 0: handed out from an
                     * array), or written after its free or by the program that
                     * got it from an array: reported, never handed out while
                     * someone may hold it, in use for good from its slab's
                     * side and counted as allocated (see slabfe_to_node) */
                    ++*twice;
                    continue;
                }
            }
            *qs_link(c, obj) = stamp;
            dst[got++] = obj;
        }
        if (s->inuse == s->objects) {
            qs_list_del(&n->list, s);
            qs_list_add(&n->list, s, QS_SLAB_FULL);
        }
    }
    return got;
}

/* Objects of node n back to their slabs (the kernel's free_block); empty
 * slabs past free_limit onto *release.  An object its slab holds free
 * already (freed twice, or never handed out: pushed by a CPU's fast path,
 * which does not look) is left alone and put in twice[] (up to 8; counted
 * in *ntwice) for the caller to report once the lock is released. */
void slabfe_free_block_locked(qslab_cache *c, struct qs_node *n, void *const *objs, unsigned long k,
                              struct qs_slab **release, void **twice, unsigned *ntwice)
{
    uintptr_t mark = qs_enc(c, NULL);
    for (unsigned long i = 0; i < k; i++) {
        struct qs_slab *s = qs_slab_lookup(objs[i]);
        /* an array holds an object its slab counts in use, so its slab is
         * one of n's; one that went to the FIFO (linked through its
         * objects: tail set) or elsewhere since was empty: this entry is
         * a second free, pushed blindly */
        if (unlikely(!s || s->cache != c || s->tail != NULL)) {
            if (*ntwice < 8)
                twice[*ntwice] = objs[i];
            ++*ntwice;
            if (s && s->cache == c && s->tail != NULL && &c->nodes[s->node] == n) {
                /* on n's FIFO (under n's lock), linked in address order:
                 * its link again, which the push overwrote, so that the
                 * slab's next refill does not report it a second time
                 * (fuzz bug 11) */
                char *o = s->base + (size_t)obj_index(c, s, objs[i]) * c->slot_size;
                *qs_link(c, o) = qs_enc(c, o + c->slot_size < s->base + s->span ? o + c->slot_size : NULL);
            }
            continue;
        }
        unsigned idx = obj_index(c, s, objs[i]);
        if (unlikely(bm_test(s, idx))) {
            if (*ntwice < 8)
                twice[*ntwice] = objs[i];
            ++*ntwice;
            *qs_link(c, objs[i]) = mark; /* free in its slab: its word again */
            continue;
        }
        bm_flip(s, idx);
        bool was_full = s->inuse == s->objects;
        *qs_link(c, objs[i]) = mark;
        set_free_idx(s, --s->inuse, idx);
        n->free_objects++;
        if (s->inuse == 0) {
            qs_list_del(&n->list, s);
            if (likely(s->objects > 1)) {
                free_add(n, s);
            } else {
                /* a slab of one block (the big kmalloc classes, which
                 * have no arrays): to the FIFO at once, which serves every
                 * class of its order under the decay and the retention
                 * rule; kept on the free list within free_limit (up to
                 * 320 KiB a class and node), such slabs held 4 MiB at the
                 * peak of the 4-thread Python program of make bench */
                n->free_objects--;
                s->next = *release;
                *release = s;
            }
        } else if (was_full) {
            qs_list_del(&n->list, s);
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
        }
    }
    while (n->free_objects > n->free_limit && n->slabs_free) {
        struct qs_slab *s = n->slabs_free;
        free_del(n, s);
        n->free_objects -= s->objects;
        s->next = *release;
        *release = s;
    }
}

/* up to max free slabs of n back (drain_freelist), each object's word
 * checked first (slab_leaving_ok), by the reaper too.  The check is not
 * only the last look for a write after free: a second free that a CPU's
 * fast path pushed blindly while the slab held the object free leaves an
 * array entry into the slab.  Given back unchecked, the slab's memory
 * could become a new slab while that entry waits, and the entry would then
 * hand out an object that the new slab's free list hands out too (the
 * FIFO's twin of this is src/core/node.c fifo_whole; both are tested by
 * tests/unit/empty_slab_entry.c).  It reads one word per object of slabs
 * about to go. */
void slabfe_drain_free(qslab_cache *c, struct qs_node *n, unsigned long max)
{
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    while (max-- && n->slabs_free) {
        struct qs_slab *s = n->slabs_free;
        free_del(n, s);
        n->free_objects -= s->objects;
        s->next = rel;
        rel = s;
    }
    qs_lock_release(&n->lock);
    struct qs_slab *go = NULL;
    while (rel) { /* a slab with an object in use after all stays (slab_leaving_ok) */
        struct qs_slab *s = rel;
        rel = s->next;
        if (slab_leaving_ok(c, NULL, s)) {
            s->next = go;
            go = s;
        }
    }
    slabfe_release_list(c, NULL, go, NULL);
}
