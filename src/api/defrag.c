/*
 * defrag.c - cooperative defragmentation of object caches
 * (qslab_cache_set_mobility; docs/design.md "Defragmentation").
 *
 * One mechanism for every front end: the pass finds the cache's slabs
 * through the page layer (qs_page_walk), reads their objects' words to
 * tell which may be live (a free object's word is a link or a free stamp,
 * core/slab.h qs_maybe_free; an allocated one's is not, but for a 2^-20
 * chance), and moves objects only through the cache's own allocation and
 * free, so no front end's lists, words or locks are touched here.  A
 * front end whose pages every cache shares (SLOB: front.h shared_pages)
 * has no slab of one cache: the records are its pages, whose fill (every
 * cache's blocks) and whose live objects of the cache its page_objs hook
 * tells from the blocks' headers; a page drained of the cache's objects
 * empties once the other caches' blocks have left it too.
 *
 * A PASS over cache c:
 *  1. Pin the page layer (qs_page_pin: no chunk is unmapped until the
 *     unpin), walk the slabs of c and of its debug twins, count in each the
 *     objects that look live.
 *  2. Pick the sparse slabs: every slab less than three quarters full is
 *     drained, the sparsest first (a shared page: less than three
 *     quarters in use, with objects of the cache).  The moves fill the slabs kept and new
 *     slabs, mostly cut from fresh chunks (the drained slabs' slots stay
 *     allocated until the end), so the survivors end in few chunks and the
 *     chunks the drained slabs leave fully free are unmapped, headers and
 *     free bits too.  (Keeping the fullest of the sparse slabs as the
 *     moves' destinations instead left 2 M entries' 10% survivors spread
 *     over every chunk: 1.36x their live bytes resident against 1.09x.)
 *  3. For each, sparsest first: gather the addresses that look live, call
 *     isolate, then for each object kept allocate its new place and call
 *     migrate.  A new object that comes from a slab being drained, or
 *     drained already, is held (allocated to the pass, not handed out) and
 *     the allocation tried again: so no allocation of the pass fills a slab
 *     it empties, and what the pass holds keeps the other threads' from
 *     them too once the pass has taken them.  A new object from a sparse
 *     slab not yet drained makes that slab a destination (it is kept).
 *     The old objects of the moves are freed at the end, not at once (each
 *     would otherwise come straight back from this thread's queue as the
 *     next new object, to be held).
 *  4. Free what the pass holds and the moved objects, shrink the cache
 *     (qslab_cache_shrink's own work: the queues flushed, every empty slab
 *     given back), count the drained slabs that left the cache, unpin.
 *
 * CONCURRENCY.  Who owns what:
 *  - c->mob_busy (taken 0 -> 1 by compare-and-swap, released with a
 *    release store) serialises the passes, qslab_cache_set_mobility and
 *    destroy's wait over c's callbacks and counters: whoever holds it alone
 *    reads or writes mob_isolate, mob_migrate, mob_arg and adds to the
 *    defrag_* counters (the statistics load those relaxed; each stands
 *    alone).  The purger takes it under qs_global, and destroy waits for it
 *    to be 0 under qs_global before it unlinks the cache in that same hold,
 *    so the purger never runs a pass on a cache being destroyed.  Callbacks
 *    run with mob_busy held and no qslab lock.
 *  - The slab records are the pass's own.  A slab's descriptor is read
 *    with relaxed loads of `cache` and `span` (the fields slab_leave and
 *    lazy birth change with atomic stores) under the pool's lock in the
 *    walk, and `cache` again later: a record may go stale (the slab left
 *    c, or was reused), which costs only a useless offer, since the owner
 *    verifies every address.  The memory stays mapped, by the pin
 *    (core/page.c PINS has the argument).
 *  - The objects' words are read with no ordering while other threads may
 *    write them (users write their objects, frees write links): the read
 *    is a guess, a racy one by design (scan_live carries QS_NO_SANITIZE for
 *    that), and nothing is decided on it but which addresses to offer.
 *  - The new objects and the held ones are allocated to the pass like any
 *    caller's; an old object becomes the pass's when migrate returns 0
 *    (the owner has stopped referring to it), and the pass frees it.
 *    Every allocation and free is the public one, with the front end's own
 *    locking and ordering.
 */
#include "api/api.h"
#include "core/hooks.h"
#include "debug/debug.h"
#include "front/front.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* the scan reads words other threads may be writing (above) */
#define QS_NO_SANITIZE __attribute__((no_sanitize("address", "thread")))

enum { R_KEPT, R_PENDING, R_DRAIN };

struct rec {
    struct qs_slab *s;
    qslab_cache *c; /* c or one of its twins (a shared page: the pages' cache) at the walk */
    char *base;
    uint32_t nobj, live; /* nobj: room for c's objects; live: c's that look live */
    uint32_t held;       /* objects of it the pass holds (new_place) */
    uint32_t fill;       /* the share in use, of QS_PAGE_FILL_ONE: a slab's c's, a page's every cache's */
    int state;
};

/* The pass's own arrays (records, held objects, offered addresses) come
 * from qslab's metadata (core/meta.c: those over 64 KiB are mappings of
 * their own, unmapped at their free), not from the kmalloc caches: a
 * pass over 2 M entries holds megabytes of them, and freed into kmalloc
 * slabs they would stay resident as empty slabs for the decay's second
 * after the shrink that was to give memory back. */
struct pass {
    qslab_cache *c;
    const struct qs_front *f; /* c's front end; f->shared_pages: the records are its pages */
    struct rec *r;   /* the slabs, by live objects then (after pick) */
    struct rec **by; /* the same, by descriptor address: find() */
    size_t n, cap;
    void **held;     /* what the pass holds to free at the end */
    size_t nheld, capheld;
    void **hset;     /* the held new places of debug caches' slabs: a set
                        (open addressing, NULL free) */
    size_t hmask, nset; /* its slots - 1, its objects */
    bool oom;
};

/* A slab of c or of its twins; with shared pages, any slab of another
 * cache of c's front end (its pages, and other caches' own slabs, which
 * page_objs tells apart later: it takes locks the pool's must not be
 * held under) */
static void collect(struct qs_slab *s, void *arg) /* the pool's lock held */
{
    struct pass *p = arg;
    /* a slab being made is the pool's no more but not yet its cache's
     * (NULL, since it left its last one); the front end stores the cache
     * last, with release: acquired, its base and span are written */
    qslab_cache *sc = __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE);
    if (!sc)
        return;
    if (p->f->shared_pages ? sc == p->c || sc->front != p->c->front
                           : sc != p->c && sc->twin_of != p->c)
        return;
    if (p->n < p->cap) {
        struct rec *r = &p->r[p->n];
        r->s = s;
        r->c = sc;
        r->base = s->base;
        r->nobj = __atomic_load_n(&s->span, __ATOMIC_RELAXED) / sc->slot_size;
        r->live = r->held = 0;
        r->state = R_KEPT;
    }
    p->n++;
}

/* Does the object at obj look allocated? */
static QS_NO_SANITIZE bool looks_live(const qslab_cache *c, const char *obj)
{
    uintptr_t w = *(const volatile uintptr_t *)(obj + c->link_off);
    return !qs_maybe_free(c, w);
}

/* Still a slab of the cache it was at the walk, with the same objects?
 * The descriptor may be given back and reused for a new slab while the pass
 * reads it, its base written plainly by the front end that makes the slab:
 * the read is a guess (an aligned word, never torn), and either answer is
 * safe: a stale one skips the record, and a slab of the same cache at the
 * same base has the same objects' places, each checked again before it
 * moves. */
static QS_NO_SANITIZE bool rec_valid(const struct rec *r)
{
    return __atomic_load_n(&r->s->cache, __ATOMIC_RELAXED) == r->c &&
           *(char *const volatile *)&r->s->base == r->base;
}

/* Is obj held by the pass (new_place's mark)?  A read of a word another
 * thread may write (a live object's): a guess, as looks_live's. */
static QS_NO_SANITIZE bool marked(const qslab_cache *c, const char *obj)
{
    return *(const volatile uintptr_t *)(obj + c->link_off) == QS_STAMP(c->secret);
}

static size_t hslot(const struct pass *p, const void *obj)
{
    return (size_t)(((uintptr_t)obj >> 3) * 0x9e3779b97f4a7c15ULL >> 20) & p->hmask;
}

/* Does the pass hold obj?  Asked for a debug cache's objects, whose words
 * are its checks' and carry no mark of the pass's. */
static bool held_has(const struct pass *p, const void *obj)
{
    if (!p->hset)
        return false;
    for (size_t i = hslot(p, obj);; i = (i + 1) & p->hmask) {
        if (p->hset[i] == obj)
            return true;
        if (!p->hset[i])
            return false;
    }
}

static void hset_put(struct pass *p, void *obj)
{
    size_t i = hslot(p, obj);
    while (p->hset[i])
        i = (i + 1) & p->hmask;
    p->hset[i] = obj;
}

/* obj into the set, which stays at most half full: false if no memory for
 * a bigger one (the old one kept) */
static bool hset_add(struct pass *p, void *obj)
{
    size_t slots = p->hset ? p->hmask + 1 : 0;
    if (2 * (p->nset + 1) > slots) {
        size_t n = slots ? 2 * slots : 4096;
        void **v = qs_meta_alloc(n * sizeof(void *)), **old = p->hset;
        if (!v)
            return false;
        p->hset = v;
        p->hmask = n - 1;
        for (size_t i = 0; i < slots; i++)
            if (old[i])
                hset_put(p, old[i]);
        qs_meta_free(old, slots * sizeof(void *));
    }
    hset_put(p, obj);
    p->nset++;
    return true;
}

static uint32_t scan_live(const struct pass *p, struct rec *r, void **out)
{
    if (p->f->shared_pages) { /* the front end's walk of the page's blocks */
        /* (a page no longer the front end's: none live, full, as it was) */
        uint32_t live = 0, max = r->nobj, fill = QS_PAGE_FILL_ONE, n = 0;
        p->f->page_objs(p->c, r->s, out, &live, &max, &fill);
        if (!out) {
            r->nobj = max;
            r->fill = fill;
            return live;
        }
        for (uint32_t i = 0; i < live; i++) /* not what the pass holds */
            if (!marked(r->c, out[i]))
                out[n++] = out[i];
        return n;
    }
    uint32_t n = 0;
    size_t slot = r->c->slot_size;
    bool unmarked = r->held && r->c->debug; /* the pass's own objects: not marked */
    for (uint32_t i = 0; i < r->nobj; i++) {
        char *obj = r->base + (size_t)i * slot;
        if (looks_live(r->c, obj) && !(unmarked && held_has(p, obj))) {
            if (out)
                out[n] = obj;
            n++;
        }
    }
    return n;
}

static int by_fill(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    return x->fill < y->fill ? -1 : x->fill > y->fill;
}
static int by_addr(const void *a, const void *b)
{
    const struct rec *x = *(struct rec *const *)a, *y = *(struct rec *const *)b;
    return x->s < y->s ? -1 : x->s > y->s;
}

static struct rec *find(struct pass *p, const struct qs_slab *s)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->by[mid]->s == s)
            return p->by[mid];
        if (p->by[mid]->s < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool hold(struct pass *p, void *obj, bool unmarked)
{
    if (p->nheld == p->capheld) { /* twice the room, or false with the old kept */
        size_t cap = p->capheld ? 2 * p->capheld : 1024;
        void **v = qs_meta_alloc(cap * sizeof(void *));
        if (!v)
            return false;
        if (p->held)
            memcpy(v, p->held, p->nheld * sizeof(void *));
        qs_meta_free(p->held, p->capheld * sizeof(void *));
        p->held = v;
        p->capheld = cap;
    }
    if (unmarked && !hset_add(p, obj)) /* a debug cache's: no mark in its word (new_place) */
        return false;
    p->held[p->nheld++] = obj;
    return true;
}

/* A new object for a move, from no slab the pass drains (above, 3.) */
static void *new_place(struct pass *p)
{
    for (;;) {
        void *obj = qslab_cache_alloc(p->c);
        if (!obj)
            return NULL;
        struct qs_slab *s = qs_slab_lookup(obj);
        struct rec *r = s ? find(p, s) : NULL;
        if (!r || r->state == R_KEPT || !rec_valid(r))
            return obj;
        if (!hold(p, obj, r->c->debug)) {
            qslab_cache_free(p->c, obj);
            return NULL;
        }
        r->held++;
        /* marked, so that the scan of its slab does not offer it: the
         * free stamp in its word, which allocation left 0; the pass owns
         * the object, and puts the 0 back before it frees it (a debug
         * cache's words are its checks', left alone).  A shared page's
         * object is marked whatever its word (its front end tells live
         * objects by their headers; the pages' cache names the stamp) */
        uintptr_t *w = qs_link(r->c, obj);
        if (!r->c->debug && (*w == 0 || p->f->shared_pages))
            *w = QS_STAMP(r->c->secret);
    }
}

/* 4.: what the pass holds, freed */
static void unhold(struct pass *p)
{
    for (size_t i = 0; i < p->nheld; i++) {
        void *obj = p->held[i];
        struct qs_slab *s = qs_slab_lookup(obj);
        qslab_cache *oc = s ? __atomic_load_n(&s->cache, __ATOMIC_RELAXED) : NULL;
        if (oc && !oc->debug && *qs_link(oc, obj) == QS_STAMP(oc->secret))
            *qs_link(oc, obj) = 0;
        qslab_cache_free(p->c, obj);
    }
}

/* 1. and 2.: the records, sorted, the slabs to drain marked R_PENDING;
 * false: nothing to do (or no memory for the records) */
static bool pick(struct pass *p)
{
    for (;;) {
        p->n = 0;
        qs_page_walk(collect, p);
        if (p->n <= p->cap)
            break;
        size_t cap = p->n + p->n / 4 + 16;
        qs_meta_free(p->r, p->cap * sizeof(*p->r));
        qs_meta_free(p->by, p->cap * sizeof(*p->by));
        p->cap = cap; /* the size both are freed with, at the end */
        p->r = qs_meta_alloc(cap * sizeof(*p->r));
        p->by = qs_meta_alloc(cap * sizeof(*p->by));
        if (!p->r || !p->by)
            return false;
    }
    if (p->n < 2)
        return false;
    for (size_t i = 0; i < p->n; i++) {
        struct rec *r = &p->r[i];
        r->live = scan_live(p, r, NULL); /* a shared page's nobj and fill too */
        if (!p->f->shared_pages)
            r->fill = r->nobj ? (uint32_t)((uint64_t)r->live * QS_PAGE_FILL_ONE / r->nobj)
                              : QS_PAGE_FILL_ONE;
    }
    qsort(p->r, p->n, sizeof(*p->r), by_fill);
    /* a slab less than three quarters full is drained; a shared page too,
     * if it holds c's objects (a page of other caches' alone is left: c's
     * new objects may fill it) */
    size_t drain = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct rec *r = &p->r[i];
        if ((size_t)r->fill * 4 >= (size_t)QS_PAGE_FILL_ONE * 3)
            break;
        if (p->f->shared_pages && !r->live)
            continue;
        r->state = R_PENDING;
        drain++;
    }
    for (size_t i = 0; i < p->n; i++)
        p->by[i] = &p->r[i];
    qsort(p->by, p->n, sizeof(*p->by), by_addr);
    return drain > 0;
}

/* 3. for one slab */
static void drain(struct pass *p, struct rec *r, void **objs, qslab_isolate_fn isolate,
                  qslab_migrate_fn migrate, void *arg, unsigned long *moved,
                  unsigned long *declined)
{
    r->state = R_DRAIN;
    if (!rec_valid(r))
        return;
    size_t n = scan_live(p, r, objs), k = n;
    if (isolate) {
        k = isolate(p->c, objs, n, arg);
        if (k > n)
            k = n;
    }
    *declined += n - k;
    for (size_t i = 0; i < k; i++) {
        if (p->oom) {
            *declined += k - i;
            return;
        }
        void *nu = new_place(p);
        if (!nu) {
            p->oom = true;
            continue;
        }
        struct qs_slab *os = qs_slab_lookup(objs[i]), *ns = qs_slab_lookup(nu);
        if (os && ns && os->cache && ns->cache)
            qs_debug_moved(os->cache, objs[i], ns->cache, nu); /* before nu is published */
        if (migrate(p->c, objs[i], nu, arg) == 0) {
            if (!hold(p, objs[i], false)) { /* in a slab scanned already: no set */
                qslab_cache_free(p->c, objs[i]); /* the pass's now: free it at once */
                p->oom = true;
            }
            (*moved)++;
        } else {
            qslab_cache_free(p->c, nu);
            (*declined)++;
        }
    }
}

/* The cache whose pass this thread runs (NULL: none), for fork's child */
static __thread qslab_cache *passing;

/* After fork, in the child (api/fork.c), its only thread: the passes other
 * threads were running are gone with them, so their caches' mob_busy and
 * their page pins are let go; the forking thread's own pass (a callback
 * that forks) keeps its own. */
void qs_defrag_forked(void)
{
    for (qslab_cache *c = qs_caches; c; c = c->next)
        if (c != passing)
            c->mob_busy = 0;
    qs_page_pins_forked(passing ? 1 : 0);
}

/* The pass; mob_busy held.  Returns the bytes the closing shrink gave back. */
static size_t pass(qslab_cache *c)
{
    qslab_isolate_fn isolate = c->mob_isolate;
    qslab_migrate_fn migrate = c->mob_migrate;
    void *arg = c->mob_arg;
    struct pass p = {.c = c, .f = qs_front_of(c)};
    unsigned long moved = 0, declined = 0, freed = 0;
    void **objs = NULL;
    size_t nobjs = 0;
    passing = c;
    qs_page_pin();
    if (pick(&p)) {
        for (size_t i = 0; i < p.n && !p.oom; i++) {
            struct rec *r = &p.r[i];
            if (r->state != R_PENDING)
                continue;
            if (r->nobj > nobjs) {
                qs_meta_free(objs, nobjs * sizeof(void *));
                nobjs = r->nobj;
                objs = qs_meta_alloc(nobjs * sizeof(void *));
                if (!objs) {
                    nobjs = 0;
                    break;
                }
            }
            drain(&p, r, objs, isolate, migrate, arg, &moved, &declined);
        }
    }
    /* the slabs that empty now stay on the FIFOs (no limit, no warm
     * overflow: node.c) for the shrink to give back together (core/page.c
     * qs_page_free_slabs: adjacent slabs, one madvise) */
    __atomic_fetch_add(&c->shrinking, 1, __ATOMIC_RELAXED);
    unhold(&p);
    size_t bytes = qs_cache_shrink_all(c);
    __atomic_fetch_sub(&c->shrinking, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < p.n && p.n <= p.cap; i++)
        if (p.r[i].state == R_DRAIN && !rec_valid(&p.r[i]))
            freed++;
    qs_page_unpin();
    passing = NULL;
    qs_meta_free(objs, nobjs * sizeof(void *));
    qs_meta_free(p.held, p.capheld * sizeof(void *));
    qs_meta_free(p.hset, p.hset ? (p.hmask + 1) * sizeof(void *) : 0);
    qs_meta_free(p.r, p.cap * sizeof(*p.r));
    qs_meta_free(p.by, p.cap * sizeof(*p.by));
    __atomic_fetch_add(&c->defrag_passes, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->defrag_moved, moved, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->defrag_declined, declined, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->defrag_slabs, freed, __ATOMIC_RELAXED);
    return bytes;
}

static bool busy_try(qslab_cache *c)
{
    int z = 0;
    return __atomic_compare_exchange_n(&c->mob_busy, &z, 1, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}
static void busy_take(qslab_cache *c)
{
    while (!busy_try(c))
        qs_os_yield();
}
static void busy_drop(qslab_cache *c)
{
    __atomic_store_n(&c->mob_busy, 0, __ATOMIC_RELEASE);
}

/* Why c cannot be made mobile, or NULL */
static const char *refusal(const qslab_cache *c, int *err)
{
    *err = EINVAL;
    if (c->is_kmalloc)
        return "is a kmalloc cache: its objects are malloc's callers'";
    if (c->twin_of)
        return "is a debug twin: set mobility on its cache";
    return NULL;
}

QSLAB_EXPORT int qslab_cache_set_mobility(qslab_cache *c, qslab_isolate_fn isolate,
                                          qslab_migrate_fn migrate, void *arg)
{
    qs_init();
    if (!c) {
        qs_warn("qslab_cache_set_mobility: cache is NULL");
        errno = EINVAL;
        return -1;
    }
    if (isolate && !migrate) {
        qs_warn("qslab_cache_set_mobility: cache %s: isolate without migrate", c->name);
        errno = EINVAL;
        return -1;
    }
    int err;
    const char *why = migrate ? refusal(c, &err) : NULL;
    if (why) {
        qs_warn("qslab_cache_set_mobility: cache %s %s", c->name, why);
        errno = err;
        return -1;
    }
    busy_take(c);
    c->mob_isolate = migrate ? isolate : NULL;
    c->mob_arg = migrate ? arg : NULL;
    __atomic_store_n(&c->mob_migrate, migrate, __ATOMIC_RELAXED);
    busy_drop(c);
    return 0;
}

/* qslab_cache_shrink of a mobile cache (cache.c): a pass, whose end is the
 * shrink */
size_t qs_defrag_shrink(qslab_cache *c)
{
    busy_take(c);
    size_t bytes;
    int err;
    if (c->mob_migrate && !refusal(c, &err)) /* its front end may have changed since */
        bytes = pass(c);
    else
        bytes = qs_cache_shrink_all(c);
    busy_drop(c);
    return bytes;
}

/* Is c worth a pass now?  Its slabs hold more than twice its live objects
 * and at least 1 MiB (under pressure: any slab's worth more than its live
 * objects need), and they changed since a pass that moved nothing. */
static unsigned long slabs_of(qslab_cache *c, unsigned long *live) /* qs_global held */
{
    unsigned long sum[QS_STAT_NR];
    qs_stats_sum(c, sum);
    *live = sum[QS_ALLOC_FAST] + sum[QS_ALLOC_SLOW] - sum[QS_FREE_FAST] - sum[QS_FREE_SLOW];
    return sum[QS_NEW_SLAB] - sum[QS_FREE_SLAB];
}

/* With shared pages (SLOB) the measure is the front end's pages: worth a
 * pass while their free bytes exceed c's live objects' bytes and 1 MiB
 * (under pressure: 64 KiB), and the page count changed since a pass that
 * moved nothing (mob_stale holds it then) */
static unsigned long pages_of(qslab_cache *c, size_t *free_bytes) /* qs_global held */
{
    struct qs_totals t = {0};
    qs_front_of(c)->totals(&t); /* slab_bytes: the pages' free bytes and the kept pages */
    *free_bytes = t.slab_bytes - t.empty_bytes;
    return t.slabs;
}

/* The staleness measure: c's slabs, or its front end's shared pages */
static unsigned long spread_of(qslab_cache *c, unsigned long *live, size_t *free_bytes)
{
    unsigned long slabs = slabs_of(c, live);
    return qs_front_of(c)->shared_pages ? pages_of(c, free_bytes) : slabs;
}

static bool worth(qslab_cache *c, bool pressure) /* qs_global held */
{
    unsigned long live;
    size_t free_bytes = 0;
    unsigned long slabs = spread_of(c, &live, &free_bytes);
    if (qs_front_of(c)->shared_pages) {
        if (!live || slabs == c->mob_stale) /* slabs: its front end's pages */
            return false;
        return free_bytes >= (pressure ? (64u << 10) : (1u << 20)) && free_bytes > live * c->obj_size;
    }
    unsigned order = QS_LOAD(c->order);
    unsigned long per = qs_front_objs_per_slab(c, order);
    if (!per || slabs < 2 || slabs == c->mob_stale)
        return false;
    if (pressure)
        return slabs * per > live + 2 * per;
    return slabs * per > 2 * live && slabs * qs_slab_bytes(order) >= (1u << 20);
}

/* The purger's look at the mobile caches (core/hooks.h qs_api_hooks.defrag):
 * each worth it gets a pass, in the purger's thread. */
QS_RARE size_t qs_defrag_tick(bool pressure)
{
    size_t bytes = 0;
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c;) {
        if (!__atomic_load_n(&c->mob_migrate, __ATOMIC_RELAXED) || !worth(c, pressure) ||
            !busy_try(c)) {
            c = c->next;
            continue;
        }
        /* c stays listed while mob_busy is held: destroy waits for it */
        qs_lock_release(&qs_global);
        int err;
        unsigned long before = QS_LOAD(c->defrag_moved);
        if (c->mob_migrate && !refusal(c, &err))
            bytes += pass(c);
        qs_lock_acquire(&qs_global);
        unsigned long live;
        size_t free_bytes;
        c->mob_stale = QS_LOAD(c->defrag_moved) == before ? spread_of(c, &live, &free_bytes) : 0;
        qslab_cache *next = c->next;
        busy_drop(c);
        c = next;
    }
    qs_lock_release(&qs_global);
    return bytes;
}
