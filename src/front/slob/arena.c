/*
 * arena.c - SLOB's pages as a whole: new pages from the page layer, empty
 * pages kept for reuse and given back (past the bound, by the purger, by
 * trim and shrink), validation of every page's blocks, the totals and the
 * report line of the arena.
 */
#include "front/queue.h"
#include "front/front.h"
#include "front/slob/slob.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>

/* ---- empty pages (slob_lock) ---- */
static void keep_unlink(struct qs_slab *sp)
{
    unsigned k = kind_nr(sp);
    if (sp->prev)
        sp->prev->next = sp->next;
    else
        slob_keep[k] = sp->next;
    if (sp->next)
        sp->next->prev = sp->prev;
    else
        slob_keep_tail[k] = sp->prev;
    sp->next = sp->prev = NULL;
    slob_nr_keep[k]--;
}
/* How many empty pages of a kind may be kept: an eighth of those in use,
 * at least SLOB_KEEP_BYTES of them, at most the arena's empty_limit (and
 * half the cached-memory cap's share of what is kept empty). */
static unsigned long keep_limit(unsigned k)
{
    unsigned long lim = slob_nr_pages[k] / SLOB_KEEP_FRACTION, cap = QS_LOAD(qs_slob_arena.empty_limit);
    unsigned long floor = SLOB_KEEP_BYTES >> (QS_PAGE_SHIFT + kinds[k].order);
    if (lim < floor)
        lim = floor;
    /* with a cached-memory cap (core/page.h), each kind keeps half of its
     * empty share */
    unsigned long share = qs_cached_empty_max();
    unsigned long max = share / 2 >> (QS_PAGE_SHIFT + kinds[k].order);
    if (share && max < cap)
        cap = max;
    return lim < cap ? lim : cap;
}
/* Keep sp (empty), newest first; past the limit, the oldest pages down to
 * three quarters of it are returned as a ->next list, to be given back
 * outside the lock in one call (the caller's). */
struct qs_slab *slob_keep_push(struct qs_slab *sp)
{
    unsigned k = kind_nr(sp);
    sp->state = QS_SLAB_EMPTY;
    sp->empty_ms = (uint32_t)qs_os_now_ms();
    sp->prev = NULL;
    sp->next = slob_keep[k];
    if (slob_keep[k])
        slob_keep[k]->prev = sp;
    else
        slob_keep_tail[k] = sp;
    slob_keep[k] = sp;
    slob_nr_keep[k]++;
    unsigned long lim = keep_limit(k);
    if (slob_nr_keep[k] <= lim)
        return NULL;
    struct qs_slab *release = NULL;
    while (slob_nr_keep[k] > lim - lim / 4) {
        struct qs_slab *old = slob_keep_tail[k];
        keep_unlink(old);
        old->next = release;
        release = old;
    }
    return release;
}

/* A new page of a kind on `node` (slob_lock not held): a kept one, or the
 * page layer's; NULL on ENOMEM. */
struct qs_slab *slob_page_new(unsigned kind, int node)
{
    qs_lock_acquire(&slob_lock);
    for (struct qs_slab *sp = slob_keep[kind]; sp; sp = sp->next) {
        if (sp->node == node) {
            keep_unlink(sp);
            /* one free block (slob_page_give merged it) */
            sp->empty_ms = slob_key(kind, kinds[kind].units);
            sp->tail = kind == K_RUN ? NULL : page_base(sp);
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
    sp->fast = a->free_fast;
    sp->owner = NULL; /* no queue's: the fast frees miss */
    sp->tail = NULL;
    sp->next = sp->prev = NULL;
    slob_page_init(sp);
    __atomic_store_n(&sp->span, (uint32_t)qs_slab_bytes(sp->order), __ATOMIC_RELAXED);
    __atomic_store_n(&sp->cache, a, __ATOMIC_RELEASE);
    qs_stat(a, NULL, QS_NEW_SLAB, qs_slab_bytes(sp->order) / QS_PAGE_SIZE); /* in 4 KiB pages */
    qs_stat(a, NULL, QS_NEW_OBJS, kinds[kind].units);
    return sp;
}

/* Give back the ->next list of empty pages (slob_lock not held); bytes
 * the OS took. */
size_t slob_pages_release(struct qs_slab *list)
{
    if (!list)
        return 0;
    for (struct qs_slab *sp = list; sp; sp = sp->next) {
        qs_stat(&qs_slob_arena, NULL, QS_FREE_SLAB, qs_slab_bytes(sp->order) / QS_PAGE_SIZE);
        qs_stat(&qs_slob_arena, NULL, QS_FREE_OBJS, kind_of(sp)->units);
    }
    return qs_page_free_slabs(list); /* adjacent pages: one madvise */
}

/* ---- cache-wide ---- */
static size_t give_back(bool all, unsigned *left)
{
    struct qs_slab *release = NULL;
    uint32_t decay = QS_LOAD(qs_slob_arena.empty_decay_ms);
    qs_lock_acquire(&slob_lock);
    /* the clock read under the lock that every keep stamps under: a page
     * kept while we waited for it is not older than `now` (read before,
     * its age wrapped to 49 days and it went back at once) */
    uint64_t now = qs_os_now_ms();
    /* keep is newest first (pages are pushed as they empty; slob_page_new takes
     * one out and leaves the others' order): the old enough are taken from
     * its tail until a young one */
    for (unsigned k = 0; k < K_NR; k++)
        while (slob_keep_tail[k] && (all || qs_ms_age(now, slob_keep_tail[k]->empty_ms) >= decay)) {
            struct qs_slab *sp = slob_keep_tail[k];
            keep_unlink(sp);
            sp->next = release;
            release = sp;
        }
    *left = slob_nr_keep[K_PAGE] + slob_nr_keep[K_RUN];
    qs_lock_release(&slob_lock);
    return slob_pages_release(release);
}

QS_RARE size_t slob_sweep(bool all)
{
    unsigned left;
    size_t bytes = give_back(all, &left);
    if (left)
        qs_node_purger_want();
    return bytes;
}

size_t slob_shrink(qslab_cache *c)
{
    unsigned left;
    size_t bytes = give_back(true, &left);
    for (int n = 0; n < qs_nr_nodes; n++) /* its big objects' empty slabs */
        bytes += qs_node_shrink(c, NULL, &c->nodes[n]);
    return bytes;
}

/* Walk one page: blocks tile it, headers are valid, no two free blocks
 * touch, each allocated block records the free block before it, the free
 * lists hold every free block of 2 units or more once, on its bin's list
 * (a run's bitmap says which lists are not empty), with its links both
 * ways, the page's counts match its blocks, and its key is right (a
 * page's: a free block it has, no larger than its largest; a run's: its
 * highest non-empty bin).  Counts c's objects into w. */
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
    bool run = kind_nr(sp) == K_RUN;
    const struct slob_run_ix *rx = (const struct slob_run_ix *)sp->mem;
    unsigned top = 0; /* a run's highest non-empty bin */
    for (unsigned bin = 0; bin < (run ? RUN_BINS : 1); bin++) {
        char *prev = NULL, *f = run ? at(sp, rx->head[bin]) : sp->freelist;
        if (run && (bool)((rx->map[bin / 64] >> (bin % 64)) & 1) != (f != NULL)) {
            qs_walk_problem(w, "SLOB run's bitmap does not match its free lists", sp->mem);
            return;
        }
        if (f)
            top = bin;
        for (; f; prev = f, f = at(sp, H_NEXT(K, hget(f))), k++) {
            if (k == listed || f < page_base(sp) || f >= end ||
                H_TAG(K, hget(f)) != tag_of(K, f, ST_FREE) || H_UNITS(K, hget(f)) < 2 ||
                (run ? run_bin(H_UNITS(K, hget(f))) : 0) != bin ||
                hget(fl_link(sp, f)) != mklink(sp, fl_link(sp, f), ref(sp, prev))) {
                qs_walk_problem(w, "SLOB free list corrupt (a write after free?)", f);
                return;
            }
        }
    }
    if (k != listed)
        qs_walk_problem(w, "SLOB free list misses free blocks", sp->mem);
    if (freeu != sp->objects || alloc != sp->inuse)
        qs_walk_problem(w, "SLOB page counts do not match its blocks", sp->mem);
    /* its key: a page's a free block it has, no larger than its largest; a
     * run's its highest non-empty bin */
    char *kb = sp->tail;
    if (run ? sp->empty_ms != top || kb
            : sp->empty_ms > max ||
                  (sp->empty_ms ? !kb || kb < page_base(sp) || kb >= end ||
                                      H_TAG(K, hget(kb)) != tag_of(K, kb, ST_FREE) ||
                                      H_UNITS(K, hget(kb)) != sp->empty_ms
                                : kb != NULL))
        qs_walk_problem(w, "SLOB page's largest free block wrong", sp->mem);
    if (__atomic_load_n(&sp->cache, __ATOMIC_RELAXED) != &qs_slob_arena)
        qs_walk_problem(w, "SLOB page not owned by the arena", sp->mem);
}

void slob_validate(qslab_cache *c, struct qs_walk *w)
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
                    if (kind_nr(sp) != kind || sp->empty_ms != k ||
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
        if (all != slob_nr_pages[kind])
            qs_walk_problem(w, "SLOB page count does not match", &slob_nr_pages[kind]);
        unsigned k = 0;
        struct qs_slab *newer = NULL;
        for (struct qs_slab *sp = slob_keep[kind]; sp; newer = sp, sp = sp->next, k++) {
            if (kind_nr(sp) != kind || sp->inuse || sp->objects != K->units ||
                sp->state != QS_SLAB_EMPTY)
                qs_walk_problem(w, "kept SLOB page not empty", sp->mem);
            if (sp->prev != newer)
                qs_walk_problem(w, "kept SLOB page links corrupt", sp->mem);
            /* newest first: give_back takes the old from the tail */
            if (newer && (int32_t)(newer->empty_ms - sp->empty_ms) < 0)
                qs_walk_problem(w, "kept SLOB pages out of age order", sp->mem);
        }
        if (slob_keep_tail[kind] != newer)
            qs_walk_problem(w, "kept SLOB pages' tail wrong",
                            newer ? newer->mem : (char *)&slob_keep_tail[kind]);
        if (k != slob_nr_keep[kind])
            qs_walk_problem(w, "kept SLOB page count does not match", &slob_nr_keep[kind]);
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
        n[kind] = (struct slob_count){slob_nr_pages[kind], 0, slob_nr_keep[kind]};
        for (int node = 0; node < qs_nr_nodes; node++) {
            struct slob_index *ix = index_of(kind, node);
            for (int k = slob_index_find(ix, 0); k >= 0; k = slob_index_find(ix, (unsigned)k + 1))
                for (struct qs_slab *sp = ix->bucket[k]; sp; sp = sp->next)
                    n[kind].free_bytes += (size_t)sp->objects * kinds[kind].unit;
        }
    }
    qs_lock_release(&slob_lock);
}

void slob_totals(struct qs_totals *t)
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

/* Defragmentation's view of page sp (front.h page_objs): c's allocated
 * blocks and the page's fill, read under slob_lock as page_check walks a
 * page (blocks tile it).  A header that is no block's ends the walk with
 * the page reported full and nothing of c's: the pass leaves it alone, and
 * validation reports it.  (c's blocks are of one kind, by its size; a
 * block takes at least its payload and header, hence *max.) */
bool slob_page_objs(const qslab_cache *c, struct qs_slab *sp, void **out, uint32_t *live, uint32_t *max,
                    uint32_t *fill)
{
    uint32_t room = out ? *max : 0, n = 0;
    unsigned used = 0;
    qs_lock_acquire(&slob_lock);
    if (__atomic_load_n(&sp->cache, __ATOMIC_RELAXED) != &qs_slob_arena) {
        qs_lock_release(&slob_lock);
        return false;
    }
    const struct slob_kind *K = kind_of(sp);
    size_t least = (c->obj_size + SLOB_HDR + K->unit - 1) / K->unit;
    char *b = page_base(sp), *end = page_end(sp);
    while (b < end) {
        uint64_t h = hget(b);
        int st = hstate(K, b, h);
        unsigned u = H_UNITS(K, h);
        if ((st != ST_ALLOC && st != ST_FREE) || u == 0 || b + (size_t)u * K->unit > end) {
            used = K->units;
            n = 0;
            break;
        }
        if (st == ST_ALLOC) {
            used += u;
            if (hid(K, b, h) == c->id) {
                if (n < room)
                    out[n] = b + SLOB_HDR;
                n++;
            }
        }
        b += (size_t)u * K->unit;
    }
    qs_lock_release(&slob_lock);
    *max = (uint32_t)(K->units / (least ? least : 1));
    *live = out && n > room ? room : n;
    *fill = (uint32_t)((uint64_t)used * QS_PAGE_FILL_ONE / K->units);
    return true;
}

void slob_lock_all(bool lock)
{
    if (lock)
        qs_lock_acquire(&slob_lock);
    else
        qs_lock_release(&slob_lock);
}

void slob_report(int fd)
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
