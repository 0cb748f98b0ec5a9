/*
 * slob.c - the SLOB front end, after Linux's mm/slob.c (Matt Mackall's
 * "simple list of blocks"): the memory floor the other front ends are
 * measured against.
 *
 * PAGES SHARED BY EVERY CACHE.  Objects of all caches and sizes are cut,
 * first fit, from 4 KiB pages (order-0 slabs of the page layer, owned by one
 * pseudo cache, the arena `slob-pages`, which is in no cache list).  A page
 * with free space sits on one of three lists by the size of the request that
 * put it there (under 256 bytes, under 1 KiB, larger: mm/slob.c's
 * free_slob_small/medium/large); a search walks one list, skips pages with
 * too few free units, and the list is turned to start at the page that
 * served the request (mm/slob.c's list_rotate_to_front, Knuth's next fit):
 * the pages walked past go to the list's end, so the next search starts
 * where this one succeeded and sees them last.  (Moving only the serving
 * page to the head, as this file did before, made every search walk the
 * same failing pages again: tests/preload/alloc_heavy.py on the drop-in,
 * PYTHONMALLOC=malloc, 4.2-5.7 s then, 3.1-3.2 s now, 0.6 s under SLQB.  What is
 * left is first fit itself, as in the kernel: page_take walking the free
 * blocks of pages with enough free units but no block large enough.)
 * Pages without free space sit on the full list, so that validation and
 * fork see every page.  No per-owner caching, no per-cache slabs: one lock
 * (slob_lock) for everything, as in the kernel.  Objects too big for a page
 * (request + header + alignment slack over 4 KiB) come from their cache's
 * own slabs on the node lists (node.c, one node lock per call), as the
 * kernel's SLOB hands big objects to the page allocator.
 *
 * BLOCKS.  Every byte of a page belongs to one block, allocated or free;
 * every block starts with an 8-byte header (the kernel keeps a header on
 * kmalloc blocks only; qslab keeps one on every block so that a bad or
 * second free is found and named like the other front ends do):
 *   bits  0..9   units of 8 bytes, header included (1..512)
 *   bits 10..19  a free block: the unit offset of the next free block (0: none)
 *   bits 20..35  the cache id of the object (of the last one, once free)
 *   bits 36..63  a tag: a hash of the secret and the block's address, with
 *                its state (allocated, free, or dead: a header merged into
 *                the free block before it)
 * The free list of a page runs in address order through the free blocks;
 * a free merges with both neighbours, so an empty page is one free block.
 * A free finds its header 8 bytes before the pointer: an allocated tag
 * frees; a free or dead one is a double free (named with the cache of its
 * header); anything else is a bad pointer, classified by walking the
 * page's blocks from its start (interior pointer, free memory).  What the
 * kernel's SLOB cannot tell either: an object freed, handed out again at
 * the same address, and freed through the old pointer is a valid free.
 *
 * kmalloc blocks have 16-byte aligned payloads (malloc's alignment) and
 * sizes rounded to 16 bytes; the request's own size reaches SLOB
 * (qs_kmalloc_slow), not its class's, so a block is as large as asked, as
 * in the kernel.  qslab_aligned_alloc asks for its alignment (slob_kmalloc
 * with align).  Constructors run at every allocation of a page object
 * (mm/slob.c does the same: nothing is kept constructed).
 *
 * Empty pages are kept for reuse, up to the arena's empty_limit (every
 * cache's default for order 0: 1 GiB), newest first; the purger gives back
 * those older than the arena's empty_decay_ms (1 s), and trim all of them,
 * as every other front end's empty slabs (node.c).  Page faults cost more
 * than they save (design.md), and so does giving pages back one at a time:
 * with 16 kept (before), stress_cross_thread_ring made 63,743 single-page
 * madvise calls a run, each flushing the TLBs of the CPUs its threads had
 * run on (14.3 CPU-s under SLOB; 620 calls and 8.2 CPU-s keeping them).
 *
 * COUNTERS.  Per cache (orphan counters, atomic): alloc_slow and new_objs
 * per allocation, free_slow and free_objs per free; the arena counts its
 * pages (new_slab, free_slab).
 */
#include "fastpath.h"
#include "front.h"

#include <errno.h>
#include <string.h>

#define SLOB_UNIT 8
#define SLOB_PAGE_UNITS (QS_PAGE_SIZE / SLOB_UNIT) /* 512 */
#define SLOB_BREAK1 256
#define SLOB_BREAK2 1024
enum { L_SMALL, L_MEDIUM, L_LARGE, L_FULL, L_NR };
enum { ST_ALLOC, ST_FREE, ST_DEAD };

qslab_cache qs_slob_arena;
static qs_lock slob_lock; /* rank: with node locks (never held together) */
static struct qs_slab *lists[L_NR]; /* doubly linked by next/prev, NULL-ended */
static struct qs_slab *tails[L_NR]; /* the last page of each list */
static struct qs_slab *keep;       /* empty pages, newest first (->next) */
static unsigned nr_keep; /* the pages on keep */
static uint64_t slob_secret;

/* ---- block headers ---- */
#define H_UNITS(h) ((unsigned)((h)&0x3ff))
#define H_NEXT(h) ((unsigned)(((h) >> 10) & 0x3ff))
#define H_ID(h) ((unsigned)(((h) >> 20) & 0xffff))
#define H_TAG(h) ((uint32_t)((h) >> 36))

static inline uint32_t tag_of(const void *blk, int st)
{
    uint64_t x = ((uintptr_t)blk ^ slob_secret) * 0x9e3779b97f4a7c15ULL;
    return (uint32_t)((x >> 36) ^ ((uint64_t)(st + 1) * 0x5bd1e995u)) & 0xfffffffu;
}
static inline uint64_t mkhdr(const void *blk, int st, unsigned units, unsigned next, unsigned id)
{
    return (uint64_t)units | (uint64_t)next << 10 | (uint64_t)id << 20 | (uint64_t)tag_of(blk, st) << 36;
}
static inline uint64_t *hdr(void *blk)
{
    return (uint64_t *)blk;
}
/* the state of a header, or -1 if it is none */
static inline int hstate(const void *blk, uint64_t h)
{
    for (int st = ST_ALLOC; st <= ST_DEAD; st++)
        if (H_TAG(h) == tag_of(blk, st))
            return st;
    return -1;
}
static inline unsigned uoff(const struct qs_slab *sp, const char *b)
{
    return (unsigned)((b - sp->mem) / SLOB_UNIT);
}
static inline char *unext(const struct qs_slab *sp, uint64_t h)
{
    return H_NEXT(h) ? sp->mem + (size_t)H_NEXT(h) * SLOB_UNIT : NULL;
}
static void set_next(struct qs_slab *sp, char *b, char *next)
{
    uint64_t h = *hdr(b);
    *hdr(b) = mkhdr(b, ST_FREE, H_UNITS(h), next ? uoff(sp, next) : 0, H_ID(h));
}

static const char *name_of(unsigned id)
{
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    return c ? c->name : "(a destroyed cache)";
}

/* ---- page lists (slob_lock) ---- */
static void list_del(struct qs_slab *sp)
{
    unsigned l = sp->empty_ms;
    if (sp->prev)
        sp->prev->next = sp->next;
    else
        lists[l] = sp->next;
    if (sp->next)
        sp->next->prev = sp->prev;
    else
        tails[l] = sp->prev;
    sp->next = sp->prev = NULL;
}
static void list_add(struct qs_slab *sp, unsigned l)
{
    sp->empty_ms = l;
    sp->state = l == L_FULL ? QS_SLAB_FULL : QS_SLAB_PARTIAL;
    sp->prev = NULL;
    sp->next = lists[l];
    if (lists[l])
        lists[l]->prev = sp;
    else
        tails[l] = sp;
    lists[l] = sp;
}
/* Turn sp's list so that it starts at sp: the pages before sp move, in
 * their order, after the list's last page. */
static void list_rotate_to(struct qs_slab *sp)
{
    unsigned l = sp->empty_ms;
    struct qs_slab *first = lists[l], *before = sp->prev;
    if (!before)
        return; /* first already */
    tails[l]->next = first;
    first->prev = tails[l];
    before->next = NULL;
    tails[l] = before;
    sp->prev = NULL;
    lists[l] = sp;
}
static unsigned list_for(size_t bytes)
{
    return bytes < SLOB_BREAK1 ? L_SMALL : bytes < SLOB_BREAK2 ? L_MEDIUM : L_LARGE;
}

/* First fit in page sp: a block of `units` whose payload is aligned to
 * `align`; the payload, or NULL. */
static void *page_take(struct qs_slab *sp, unsigned units, size_t align, unsigned id)
{
    char *prev = NULL;
    for (char *b = sp->freelist; b;) {
        uint64_t h = *hdr(b);
        unsigned n = H_UNITS(h);
        char *next = unext(sp, h);
        uintptr_t pay = (uintptr_t)b + SLOB_UNIT;
        unsigned delta = (unsigned)((((pay + align - 1) & ~(uintptr_t)(align - 1)) - pay) / SLOB_UNIT);
        if (n >= delta + units) {
            if (delta) { /* the slack before the aligned block stays free */
                char *nb = b + (size_t)delta * SLOB_UNIT;
                *hdr(b) = mkhdr(b, ST_FREE, delta, uoff(sp, nb), H_ID(h));
                prev = b;
                b = nb;
                n -= delta;
            }
            char *after = next;
            if (n > units) { /* the rest stays free */
                after = b + (size_t)units * SLOB_UNIT;
                *hdr(after) = mkhdr(after, ST_FREE, n - units, next ? uoff(sp, next) : 0, H_ID(h));
            }
            if (prev)
                set_next(sp, prev, after);
            else
                sp->freelist = after;
            *hdr(b) = mkhdr(b, ST_ALLOC, units, 0, id);
            sp->objects -= units;
            sp->inuse++;
            return b + SLOB_UNIT;
        }
        prev = b;
        b = next;
    }
    return NULL;
}

/* Give block b (allocated, `units`) back to page sp's free list, merging
 * it with free neighbours; merged-away headers become dead ones. */
static void page_give(struct qs_slab *sp, char *b, unsigned units, unsigned id)
{
    char *prev = NULL, *cur = sp->freelist;
    while (cur && cur < b) {
        prev = cur;
        cur = unext(sp, *hdr(cur));
    }
    unsigned n = units, nx = cur ? uoff(sp, cur) : 0;
    if (cur && b + (size_t)n * SLOB_UNIT == cur) { /* merge the next one */
        uint64_t hc = *hdr(cur);
        n += H_UNITS(hc);
        nx = H_NEXT(hc);
        *hdr(cur) = mkhdr(cur, ST_DEAD, 0, 0, H_ID(hc));
    }
    uint64_t hp = prev ? *hdr(prev) : 0;
    if (prev && prev + (size_t)H_UNITS(hp) * SLOB_UNIT == b) { /* into the previous one */
        *hdr(prev) = mkhdr(prev, ST_FREE, H_UNITS(hp) + n, nx, H_ID(hp));
        *hdr(b) = mkhdr(b, ST_DEAD, 0, 0, id);
    } else {
        *hdr(b) = mkhdr(b, ST_FREE, n, nx, id);
        if (prev)
            set_next(sp, prev, b);
        else
            sp->freelist = b;
    }
    sp->objects += units;
    sp->inuse--;
}

static void page_init(struct qs_slab *sp)
{
    sp->freelist = sp->mem;
    *hdr(sp->mem) = mkhdr(sp->mem, ST_FREE, SLOB_PAGE_UNITS, 0, 0);
    sp->objects = SLOB_PAGE_UNITS;
    sp->inuse = 0;
}

/* A new page on `node` (slob_lock not held): from the kept ones, or the
 * page layer's; NULL on ENOMEM. */
static struct qs_slab *page_new(int node)
{
    qs_lock_acquire(&slob_lock);
    for (struct qs_slab **pp = &keep; *pp; pp = &(*pp)->next) {
        struct qs_slab *sp = *pp;
        if (sp->node == node) {
            *pp = sp->next;
            nr_keep--;
            sp->next = NULL;
            qs_lock_release(&slob_lock);
            return sp; /* empty: one free block (page_give merged it) */
        }
    }
    qs_lock_release(&slob_lock);
    struct qs_slab *sp = qs_page_alloc_slab(node, 0);
    if (!sp)
        return NULL;
    qslab_cache *a = &qs_slob_arena;
    sp->base = sp->mem;
    sp->recip = ~(uint64_t)0 / SLOB_UNIT + 1; /* any 8-byte step passes qs_slab_valid_obj */
    sp->cache_id = a->id;
    sp->owner = NULL; /* no queue's: the fast frees miss */
    sp->tail = NULL;
    page_init(sp);
    __atomic_store_n(&sp->span, (uint32_t)QS_PAGE_SIZE, __ATOMIC_RELAXED);
    __atomic_store_n(&sp->cache, a, __ATOMIC_RELEASE);
    qs_stat(a, NULL, QS_NEW_SLAB, 1);
    qs_stat(a, NULL, QS_NEW_OBJS, SLOB_PAGE_UNITS);
    return sp;
}

static void page_release(struct qs_slab *sp)
{
    qs_stat(&qs_slob_arena, NULL, QS_FREE_SLAB, 1);
    qs_stat(&qs_slob_arena, NULL, QS_FREE_OBJS, SLOB_PAGE_UNITS);
    qs_page_free_slab_now(sp); /* past the arena's empty_limit: back now */
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
static void big_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (unlikely(qs_maybe_free(c, *qs_link(c, obj))) && qs_double_free_check(c, NULL, s, obj))
        return;
    qs_free_direct(c, obj); /* to its node list, under the node's lock */
}

/* ---- allocation ---- */
static void *slob_alloc_align(qslab_cache *c, size_t size, size_t align, int node)
{
    if (align < SLOB_UNIT)
        align = SLOB_UNIT;
    size_t units = 1 + (size + SLOB_UNIT - 1) / SLOB_UNIT;
    if (units < 2)
        units = 2;
    if (node < 0)
        node = local_node();
    if (units * SLOB_UNIT + align - SLOB_UNIT > QS_PAGE_SIZE) /* too big for a page */
        return qs_node_alloc(c, NULL, node);
    unsigned l = list_for(size);
    void *p = NULL;
    qs_lock_acquire(&slob_lock);
    for (struct qs_slab *sp = lists[l]; sp; sp = sp->next) {
        if (sp->objects < units || sp->node != node)
            continue;
        if ((p = page_take(sp, (unsigned)units, align, c->id))) {
            if (sp->objects) {
                list_rotate_to(sp); /* the next search starts here */
            } else {
                list_del(sp);
                list_add(sp, L_FULL);
            }
            break;
        }
    }
    qs_lock_release(&slob_lock);
    while (!p) {
        struct qs_slab *sp = page_new(node);
        if (!sp) {
            errno = ENOMEM;
            return NULL;
        }
        qs_lock_acquire(&slob_lock);
        p = page_take(sp, (unsigned)units, align, c->id);
        list_add(sp, sp->objects ? l : L_FULL);
        qs_lock_release(&slob_lock);
    }
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
    size_t sz = size < 8 ? 8 : size;
    sz = ((sz + SLOB_UNIT + 15) & ~(size_t)15) - SLOB_UNIT;
    return slob_alloc_align(c, sz, align > 16 ? align : 16, QSLAB_NUMA_NO_NODE);
}

/* ---- free ---- */
/* p, a pointer into page sp, is no allocated block's start: report what
 * it is (expected: the cache it was freed to, or NULL). */
void qs_slob_bad_free(qslab_cache *expected, struct qs_slab *sp, const void *p)
{
    const char *want = expected ? expected->name : NULL;
    char *b = sp->mem, *end = sp->mem + QS_PAGE_SIZE;
    if ((const char *)p >= b + SLOB_UNIT && ((uintptr_t)p & (SLOB_UNIT - 1)) == 0) {
        char *h = (char *)p - SLOB_UNIT;
        int st = hstate(h, *hdr(h));
        if (st == ST_FREE || st == ST_DEAD) {
            qs_fatal("double free of %p in cache %s", p, want ? want : name_of(H_ID(*hdr(h))));
            return;
        }
    }
    qs_lock_acquire(&slob_lock); /* walk the blocks: they tile the page */
    while (b < end) {
        uint64_t h = *hdr(b);
        int st = hstate(b, h);
        unsigned n = H_UNITS(h);
        if ((st != ST_ALLOC && st != ST_FREE) || n == 0 || b + (size_t)n * SLOB_UNIT > end)
            break;
        if ((const char *)p < b + (size_t)n * SLOB_UNIT) {
            qs_lock_release(&slob_lock);
            if (st == ST_ALLOC)
                qs_fatal("invalid free of %p: interior pointer into object %p of cache %s", p,
                         b + SLOB_UNIT, name_of(H_ID(h)));
            else
                qs_fatal("invalid free of %p: not an allocated object (free memory of a SLOB "
                         "page)%s%s", p, want ? ", cache " : "", want ? want : "");
            return;
        }
        b += (size_t)n * SLOB_UNIT;
    }
    qs_lock_release(&slob_lock);
    qs_fatal("invalid free of %p: SLOB page %p corrupt at %p (a block header overwritten)", p,
             sp->mem, b);
}

/* obj is in page sp (the caller checked it is 8-byte aligned inside it) */
static void page_free(qslab_cache *expected, struct qs_slab *sp, void *obj)
{
    char *b = (char *)obj - SLOB_UNIT;
    uint64_t h;
    if ((char *)obj < sp->mem + SLOB_UNIT || hstate(b, (h = *hdr(b))) != ST_ALLOC) {
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    unsigned id = H_ID(h), units = H_UNITS(h);
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    if (expected && c != expected) {
        qs_fatal("invalid free of %p: freed to cache %s but it belongs to cache %s", obj,
                 expected->name, name_of(id));
        return;
    }
    struct qs_slab *release = NULL;
    qs_lock_acquire(&slob_lock);
    /* checked again under the lock: a racing second free loses here */
    if (hstate(b, *hdr(b)) != ST_ALLOC) {
        qs_lock_release(&slob_lock);
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    bool was_full = sp->objects == 0;
    page_give(sp, b, units, id);
    if (sp->inuse == 0) { /* empty: kept, or given back */
        list_del(sp);
        sp->state = QS_SLAB_EMPTY;
        if (nr_keep < QS_LOAD(qs_slob_arena.empty_limit)) {
            sp->empty_ms = (uint32_t)qs_os_now_ms();
            sp->next = keep;
            keep = sp;
            nr_keep++;
        } else {
            release = sp;
        }
    } else if (was_full) { /* back on a list, by the size freed (mm/slob.c) */
        list_del(sp);
        list_add(sp, list_for((size_t)units * SLOB_UNIT));
    }
    bool kept = nr_keep != 0;
    qs_lock_release(&slob_lock);
    if (c) {
        qs_stat(c, NULL, QS_FREE_SLOW, 1);
        qs_stat(c, NULL, QS_FREE_OBJS, 1);
    }
    if (release)
        page_release(release);
    else if (kept) /* the purger gives them back after their decay */
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
    char *b = (char *)obj - SLOB_UNIT;
    uint64_t h;
    if ((const char *)obj < s->mem + SLOB_UNIT || hstate(b, (h = *hdr(b))) != ST_ALLOC) {
        qs_slob_bad_free(NULL, s, obj);
        return 0;
    }
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[H_ID(h)], __ATOMIC_ACQUIRE);
    size_t pay = (size_t)(H_UNITS(h) - 1) * SLOB_UNIT;
    return c && !c->is_kmalloc && c->obj_size < pay ? c->obj_size : pay;
}

/* ---- cache-wide ---- */
static size_t give_back(bool all, unsigned *left)
{
    struct qs_slab *release = NULL;
    uint32_t now = (uint32_t)qs_os_now_ms(), decay = QS_LOAD(qs_slob_arena.empty_decay_ms);
    qs_lock_acquire(&slob_lock);
    /* keep is newest first (pages are pushed as they empty; page_new takes
     * one out and leaves the others' order), so the pages old enough are
     * all those from the first old one on: the walk passes the young only */
    struct qs_slab **pp = &keep;
    while (*pp && !all && now - (*pp)->empty_ms < decay)
        pp = &(*pp)->next;
    release = *pp;
    *pp = NULL;
    for (struct qs_slab *sp = release; sp; sp = sp->next)
        nr_keep--;
    *left = nr_keep;
    qs_lock_release(&slob_lock);
    for (struct qs_slab *sp = release; sp; sp = sp->next) {
        qs_stat(&qs_slob_arena, NULL, QS_FREE_SLAB, 1);
        qs_stat(&qs_slob_arena, NULL, QS_FREE_OBJS, SLOB_PAGE_UNITS);
    }
    return qs_page_free_slabs(release); /* what the OS took; adjacent pages: one madvise */
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

/* Walk one page: blocks tile it, headers are valid, the free list is the
 * free blocks in address order and its units and the allocated blocks
 * match the page's counts.  Counts c's objects into w. */
static void page_check(struct qs_walk *w, qslab_cache *c, struct qs_slab *sp)
{
    char *b = sp->mem, *end = sp->mem + QS_PAGE_SIZE, *fl = sp->freelist;
    unsigned long freeu = 0, alloc = 0;
    while (b < end) {
        uint64_t h = *hdr(b);
        int st = hstate(b, h);
        unsigned n = H_UNITS(h);
        if ((st != ST_ALLOC && st != ST_FREE) || n == 0 || b + (size_t)n * SLOB_UNIT > end) {
            qs_walk_problem(w, "SLOB block header overwritten", b);
            return;
        }
        if (st == ST_FREE) {
            if (b != fl) {
                qs_walk_problem(w, "SLOB free block off its page's free list", b);
                return;
            }
            fl = unext(sp, h);
            freeu += n;
        } else {
            alloc++;
            if (c && H_ID(h) == c->id)
                w->inuse++;
        }
        b += (size_t)n * SLOB_UNIT;
    }
    if (fl)
        qs_walk_problem(w, "SLOB free list runs past the page's free blocks", fl);
    if (freeu != sp->objects || alloc != sp->inuse)
        qs_walk_problem(w, "SLOB page counts do not match its blocks", sp->mem);
    if (__atomic_load_n(&sp->cache, __ATOMIC_RELAXED) != &qs_slob_arena)
        qs_walk_problem(w, "SLOB page not owned by the arena", sp->mem);
}

static void slob_validate(qslab_cache *c, struct qs_walk *w)
{
    qs_lock_acquire(&slob_lock);
    for (int l = 0; l < L_NR; l++) {
        struct qs_slab *last = NULL;
        for (struct qs_slab *sp = lists[l]; sp; last = sp, sp = sp->next) {
            if ((l == L_FULL) != (sp->objects == 0) || sp->inuse == 0)
                qs_walk_problem(w, "SLOB page on the wrong list", sp->mem);
            if (sp->prev != last || sp->empty_ms != (unsigned)l)
                qs_walk_problem(w, "SLOB page list links corrupt", sp->mem);
            page_check(w, c, sp);
        }
        if (tails[l] != last)
            qs_walk_problem(w, "SLOB page list's tail wrong", last ? last->mem : (char *)&tails[l]);
    }
    unsigned k = 0;
    for (struct qs_slab *sp = keep, *newer = NULL; sp; newer = sp, sp = sp->next, k++) {
        if (sp->inuse || sp->objects != SLOB_PAGE_UNITS)
            qs_walk_problem(w, "kept SLOB page not empty", sp->mem);
        /* newest first: give_back stops at the first young page */
        if (newer && (int32_t)(newer->empty_ms - sp->empty_ms) < 0)
            qs_walk_problem(w, "kept SLOB pages out of age order", sp->mem);
    }
    if (k != nr_keep)
        qs_walk_problem(w, "kept SLOB page count does not match", &nr_keep);
    qs_lock_release(&slob_lock);
}

/* Pages in use, their free units, and pages kept, read under the lock. */
struct slob_count {
    unsigned long pages, free_units, kept;
};
static struct slob_count count_pages(void)
{
    struct slob_count n = {0, 0, 0};
    qs_lock_acquire(&slob_lock);
    for (int l = 0; l < L_NR; l++)
        for (struct qs_slab *sp = lists[l]; sp; sp = sp->next) {
            n.pages++;
            n.free_units += sp->objects;
        }
    n.kept = nr_keep;
    qs_lock_release(&slob_lock);
    return n;
}

static void slob_totals(struct qs_totals *t)
{
    struct slob_count n = count_pages();
    t->slab_bytes += n.free_units * SLOB_UNIT + n.kept * QS_PAGE_SIZE;
    t->empty_bytes += n.kept * QS_PAGE_SIZE;
    t->slabs += n.pages + n.kept;
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
    char line[160];
    struct qs_buf b = {line, 0, sizeof(line)};
    struct slob_count n = count_pages();
    unsigned long pages = n.pages, kept = n.kept, freeu = n.free_units;
    if (!pages && !kept)
        return;
    qs_buf_str(&b, "slob pages          ");
    qs_buf_u64(&b, pages);
    qs_buf_str(&b, " in use (");
    qs_buf_u64(&b, pages * QS_PAGE_SIZE >> 10);
    qs_buf_str(&b, " KiB, ");
    qs_buf_u64(&b, freeu * SLOB_UNIT >> 10);
    qs_buf_str(&b, " KiB free in them), ");
    qs_buf_u64(&b, kept);
    qs_buf_str(&b, " empty kept\n");
    qs_os_write(fd, b.p, b.len);
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
    .what = "first fit in pages every cache shares, one lock (SLOB)",
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
