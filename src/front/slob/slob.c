/*
 * slob.c - the SLOB front end, after Linux's mm/slob.c (Matt Mackall's
 * "simple list of blocks"): the memory floor the other front ends are
 * measured against, at a time per operation that does not grow with the
 * number of pages (docs/fronts.md has the measurements).
 *
 * PAGES SHARED BY EVERY CACHE.  Objects of all caches are cut from slabs of
 * the page layer owned by one pseudo cache, the arena `slob-pages` (in no
 * cache list), of two kinds:
 *   pages  4 KiB, in 8-byte units: blocks of up to 528 bytes, a 512-byte
 *          request's (SLOB_PAGE_MAX)
 *   runs   256 KiB, in 16-byte units: larger blocks, up to 64 KiB
 *          (SLOB_RUN_MAX, with the alignment)
 * A block is as large as asked (kmalloc passes the request's own size), so
 * a 4,368-byte request takes 4,384 bytes of a run, not kmalloc-5120's slot;
 * a run is large enough that what is left at its end after blocks of a few
 * KiB is a fraction of a percent.  A page holds seven of its largest
 * blocks or more, so that what a page's blocks leave at its end stays
 * small: in pages, SQLite's 1,312-byte page-cache blocks would go three to
 * a page and leave a tenth of it to smaller blocks that do not come.  Pages stay 4 KiB for small blocks: a page's free list is
 * short, so a take that looks at all of it is cheap (16 KiB pages, with a
 * quarter of the page layer's 96-byte descriptors,
 * took twice the time a malloc and free).  Objects over SLOB_RUN_MAX come
 * from their cache's own slabs on the node lists (node.c, one node lock
 * per call), as the kernel's SLOB hands big objects to the page allocator;
 * the kmalloc classes' empty slabs of them are given back as they empty,
 * as glibc unmaps a freed block over its mmap threshold (object caches
 * keep theirs by their tunables).  No per-owner
 * caching: one lock (slob_lock) for everything, as in the kernel.
 *
 * THE INDEX: A FITTING PAGE WITHOUT A WALK.  mm/slob.c walks a list of pages
 * first fit, skipping pages whose free units suffice but whose blocks are
 * too small; with many live objects that walk is most of the time (160 k
 * live strings 1.5 s, 640 k 47 s on this kind of machine).  Here a node's
 * pages of each kind with objects are in 513 buckets by their key (a page's:
 * the largest free block it knows of, in units; a run's: the highest bin
 * of its free blocks, below), with a bitmap of the buckets that are not
 * empty: an allocation of u units takes the first set bit from u's key on
 * (9 words at most), the page whose largest block is the smallest that
 * fits.  That is first fit's spirit kept in O(1), and best fit by page: the
 * fullest page that can take the request serves it, so pages fill up and
 * the large free blocks stay where large requests need them instead of
 * being spread thin over every page; a page that served goes first in its
 * bucket (the kernel's rotation: the next request of the size tries it
 * first).  A bucket's pages may be too small by a bin's width or by the
 * alignment's slack (align / unit - 1 units, which fit any address): the
 * first page of such a bucket is tried once before the first bucket that
 * surely fits.
 *
 * IN A PAGE, the smallest fitting block among the first SLOB_WALK (32) of
 * its free list is taken, else the block of its key (sp->tail): a bounded
 * search, which also gives the page's new key.  A key is a free block the
 * page has, never larger than its largest (a page whose list is longer
 * than the walk may know only a smaller one, and serve smaller requests
 * until a free merges a larger block); an exact fit that is not the key's
 * block ends the walk.
 *
 * IN A RUN, whose free blocks are many (a run of 1 KiB blocks churned at
 * random has dozens), free blocks are on segregated lists, one per bin of
 * sizes: a bin per size below 64 units (1 KiB), then 16 per power of two
 * (a bin's sizes within 1/16 of each other), 192 bins; the run's first
 * 416 bytes hold their heads and a bitmap of the non-empty ones (struct
 * slob_run_ix).  A take finds the first fitting block of the request's own
 * bin among the first SLOB_WALK of its list, else takes the first block of
 * the first non-empty bin above, whose blocks all fit: a few bitmap words
 * and no walk over blocks that cannot fit.  One list over the whole run,
 * walked up to SLOB_WALK blocks, misses the fitting blocks past the walk
 * (five times the time per malloc and free of random sizes with 300 k
 * live), and a walk short enough to be fast leaves runs a tenth emptier.
 * The run's key is its highest non-empty bin.
 *
 * BLOCKS.  Every byte of a page from its 8th, and of a run past its heads,
 * belongs to one block, allocated or free; every block starts with a
 * header (the kernel keeps a header on kmalloc blocks only; qslab keeps one
 * on every block so that a bad or second free is found and named like the
 * other front ends do).  A page's
 * blocks start 8 bytes in (so that kmalloc's 16-byte aligned payloads leave
 * no slack before the first), 511 units; its header is one word:
 *   bits  0..9   units of 8 bytes, header included (1..511)
 *   bits 10..19  free block: the next on the page's free list (offset + 1;
 *                0: none); allocated block: the units of the free block
 *                just before it (0: none)
 *   bits 20..35  the cache id of the object (of the last one, once free)
 *   bits 36..63  a tag: a hash of the secret and the block's address, with
 *                its state (allocated, free, or dead: a header merged into
 *                the free block before it)
 * A run's header is one word too, with 15-bit units (of 16 bytes) and
 * link, the cache id and an 18-bit tag; its blocks start 8 bytes before a
 * 16-byte boundary, so that payloads are 16-byte aligned behind 8 bytes
 * of header, as in glibc (a 1,296-byte request takes 1,312 bytes, not
 * 1,328; a weaker tag, 1 in 262,144 for a random word to pass for an
 * allocated header, is the price).  Free lists are doubly linked: a free
 * block of 2 units or more keeps its predecessor on its list in a link
 * word tagged like a header (a write after free there shows in
 * validation), a page's block in its last word, a run's in its second (no
 * header is there: a run's blocks start on its 16-byte units; a list's
 * work stays in the blocks' first cache lines); 1-unit free blocks
 * (alignment slack, a remainder too small for any block) are on no list
 * and wait to be merged.
 * So a free merges with both neighbours without a walk: the next block by
 * its size, the previous one by the free units its own header records; no
 * two free blocks touch, and an empty page is one free block.  A free
 * finds its header just before the pointer: an allocated tag frees; a free
 * or dead one is a double free (named with the cache of its header);
 * anything else is a bad pointer, classified by walking the page's blocks
 * from its start (interior pointer, free memory).  What the kernel's SLOB
 * cannot tell either: an object freed, handed out again at the same
 * address, and freed through the old pointer is a valid free.
 *
 * kmalloc blocks have 16-byte aligned payloads (malloc's alignment) and
 * sizes rounded to 16 bytes; the request's own size reaches SLOB
 * (qs_kmalloc_slow), not its class's.  qslab_aligned_alloc asks for its
 * alignment (slob_kmalloc with align), or, when alignment and size do not
 * fit a page together, for a power of two, which it expects naturally
 * aligned as the classes' are: a power of two of a page or more is.  Constructors run at every
 * allocation of a page object (mm/slob.c does the same: nothing is kept
 * constructed).
 *
 * EMPTY PAGES are kept for reuse, newest first, for each kind at most an
 * eighth of the pages in use (SLOB_KEEP_FRACTION; at least SLOB_KEEP_BYTES
 * of them, 256 KiB, and at most the arena's empty_limit): a page fault
 * costs about 13 us here, so a program that frees and allocates again
 * should find its pages resident, but the floor must not hold memory a
 * shrinking program gave up.  A page that empties past the bound sends the
 * oldest kept pages, down to three quarters of it, back to the page layer
 * in one call (adjacent pages share one madvise); the purger gives back
 * those kept longer than the arena's empty_decay_ms (1 s), and trim all of
 * them, as every other front end's empty slabs (node.c).
 *
 * LOCKS.  slob_lock guards the indexes, every page's blocks and free lists
 * (a run's heads and bitmap, in the run, are read and written only under
 * it, but for a new run's, set before it is in an index), and the kept
 * pages; it ranks with the node locks and is never held with
 * one: pages come from the page layer (slob_page_new) and go back to it
 * (slob_pages_release) outside it, and a big object's node lock is taken
 * without it (big_free frees the object, then gives back its cache's empty
 * slabs of that node, each under the node's lock alone).  A free reads the
 * header before taking the lock (to name a bad pointer without it) and
 * again under it, so that of two racing frees of one block the second
 * finds it free.  Fork takes slob_lock after the node locks
 * (slob_lock_all).
 *
 * COUNTERS.  Per cache (orphan counters, atomic): alloc_slow and new_objs
 * per allocation, free_slow and free_objs per free; the arena counts its
 * pages and runs in 4 KiB pages (new_slab, free_slab: its order is 0).
 */
#include "front/queue.h"
#include "front/front.h"
#include "core/hooks.h"
#include "front/slob/slob.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>


/* SLOB's state (slob.h): the arena, its lock, the indexes, the kept pages. */
qslab_cache qs_slob_arena;
qs_lock slob_lock;
QS_BSS_APART struct slob_index slob_by_max[K_NR][QS_MAX_NODES];
unsigned long slob_nr_pages[K_NR];
struct qs_slab *slob_keep[K_NR], *slob_keep_tail[K_NR];
unsigned slob_nr_keep[K_NR];
uint64_t slob_secret;

const char *slob_name_of(unsigned id)
{
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    return c ? c->name : "(a destroyed cache)";
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
    int node = s->node; /* s may go back to the page layer with the free */
    qs_free_direct(c, obj); /* to its node list, under the node's lock */
    /* A kmalloc class's empty slab of big blocks is given back as it
     * empties, as glibc unmaps a freed block over its mmap threshold: such
     * a slab is hundreds of KiB to MiBs of one size, which a program that
     * frees it (SQLite's sorter, a dict's old table, a grown buffer) may
     * not ask for again, and kept it is resident memory at the program's
     * peak (redis 170 KiB, Python dicts 200 KiB; kept up to 256 KiB for a
     * 1 s decay, it saved py_threads' growing bytearrays a quarter of
     * their page faults).  Object caches keep their empty slabs by their
     * tunables. */
    struct qs_node *n = &c->nodes[node];
    if (c->is_kmalloc && c->obj_size + SLOB_UNIT > SLOB_RUN_MAX && qs_node_nr_empty(n))
        qs_node_shrink(c, NULL, n);
}

/* ---- allocation ---- */
/* A block of `units` of page kind `kind` for cache c on `node`, its
 * payload aligned to `align`; the payload, or NULL with errno set. */
static void *take(qslab_cache *c, unsigned kind, unsigned u, size_t align, int node)
{
    const struct slob_kind *K = &kinds[kind];
    /* a free block of u + slack units has room for the aligned block
     * whatever its address; one of fewer (down to u) may */
    unsigned slack = align > K->unit ? (unsigned)(align / K->unit) - 1 : 0, max = 0;
    unsigned sure_k = slob_key(kind, u + slack - 1) + 1; /* its pages have a block >= u + slack */
    struct slob_index *ix = index_of(kind, node);
    struct qs_slab *sp = NULL;
    void *p = NULL;
    qs_lock_acquire(&slob_lock);
    int k = slob_index_find(ix, slob_key(kind, u));
    if (k >= 0 && (unsigned)k < sure_k) { /* the fullest page that may fit */
        sp = ix->bucket[k];
        if (!(p = slob_page_take(sp, u, align, c->id, &max)))
            k = slob_index_find(ix, sure_k);
    }
    if (!p && k >= 0) { /* the fullest page that fits */
        sp = ix->bucket[k];
        p = slob_page_take(sp, u, align, c->id, &max);
    }
    if (p && max != sp->empty_ms) {
        slob_index_del(ix, sp);
        slob_index_add(ix, sp, max);
    }
    qs_lock_release(&slob_lock);
    if (!p) {
        if (!(sp = slob_page_new(kind, node))) {
            errno = ENOMEM;
            return NULL;
        }
        qs_lock_acquire(&slob_lock);
        p = slob_page_take(sp, u, align, c->id, &max); /* an empty page: always fits */
        slob_index_add(ix, sp, max);
        qs_lock_release(&slob_lock);
    }
    return p;
}

static void *slob_alloc_align(qslab_cache *c, size_t size, size_t align, int node)
{
    if (align < SLOB_UNIT)
        align = SLOB_UNIT;
    size_t units = 1 + (size + SLOB_UNIT - 1) / SLOB_UNIT;
    if (units < 2)
        units = 2;
    if (node < 0)
        node = local_node();
    void *p;
    if (units * SLOB_UNIT + align - SLOB_UNIT <= SLOB_PAGE_MAX) { /* in a page */
        p = take(c, K_PAGE, (unsigned)units, align, node);
    } else if (size + align <= SLOB_RUN_MAX) { /* in a run: 16-byte units */
        p = take(c, K_RUN, (unsigned)((size + SLOB_HDR + 15) / 16), align, node);
    } else {
        return qs_node_alloc(c, NULL, node); /* its cache's own slabs */
    }
    if (!p)
        return NULL;
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
    /* a power of two of a page or more is naturally aligned, as in its
     * class's slabs: qslab_aligned_alloc asks kmalloc for one when the
     * alignment and the size do not fit a page together (in a run the
     * slack before the block stays free; past a run, the class's slabs) */
    if (size >= QS_PAGE_SIZE && !(size & (size - 1)) && align < size)
        align = size;
    size_t sz = size < 8 ? 8 : size;
    sz = ((sz + SLOB_UNIT + 15) & ~(size_t)15) - SLOB_UNIT;
    return slob_alloc_align(c, sz, align > 16 ? align : 16, QSLAB_NUMA_NO_NODE);
}

/* ---- free ---- */
/* p, a pointer into page sp, is no allocated block's start: report what
 * it is, as `what` ("free", "realloc", ...) of it (expected: the cache it
 * was freed to, or NULL). */
void qs_slob_bad_pointer(qslab_cache *expected, struct qs_slab *sp, const void *p, const char *what)
{
    const struct slob_kind *K = kind_of(sp);
    const char *want = expected ? expected->name : NULL;
    char *b = page_base(sp), *end = page_end(sp);
    if ((const char *)p >= b + SLOB_HDR && (const char *)p <= end &&
        ((uintptr_t)p & (SLOB_UNIT - 1)) == 0) {
        char *h = (char *)p - SLOB_HDR;
        int st = hstate(K, h, hget(h));
        if (st == ST_FREE || st == ST_DEAD) {
            const char *name = want ? want : slob_name_of(hid(K, h, hget(h)));
            if (!strcmp(what, "free"))
                qs_fatal("double free of %p in cache %s", p, name);
            else
                qs_fatal("%s of %p: a freed object of cache %s", what, p, name);
            return;
        }
    }
    if ((const char *)p < b) /* a run's free lists' heads */
        b = end;
    qs_lock_acquire(&slob_lock); /* walk the blocks: they tile the page */
    while (b < end) {
        uint64_t h = hget(b);
        int st = hstate(K, b, h);
        unsigned n = H_UNITS(K, h);
        if ((st != ST_ALLOC && st != ST_FREE) || n == 0 || b + (size_t)n * K->unit > end)
            break;
        if ((const char *)p < b + (size_t)n * K->unit) {
            qs_lock_release(&slob_lock);
            if (st == ST_ALLOC)
                qs_fatal("invalid %s of %p: interior pointer into object %p of cache %s", what, p,
                         b + SLOB_HDR, slob_name_of(hid(K, b, h)));
            else
                qs_fatal("invalid %s of %p: not an allocated object (free memory of a SLOB "
                         "page)%s%s", what, p, want ? ", cache " : "", want ? want : "");
            return;
        }
        b += (size_t)n * K->unit;
    }
    qs_lock_release(&slob_lock);
    if (b == end) /* the blocks are sound: p is before them (a page's first 8 bytes, a run's heads) or at the end */
        qs_fatal("invalid %s of %p: not an allocated object (free memory of a SLOB page)%s%s",
                 what, p, want ? ", cache " : "", want ? want : "");
    else
        qs_fatal("invalid %s of %p: SLOB page %p corrupt at %p (a block header overwritten)",
                 what, p, sp->mem, b);
}

void qs_slob_bad_free(qslab_cache *expected, struct qs_slab *sp, const void *p)
{
    qs_slob_bad_pointer(expected, sp, p, "free");
}

/* obj is in page sp (the caller checked it is 8-byte aligned inside it) */
static void page_free(qslab_cache *expected, struct qs_slab *sp, void *obj)
{
    const struct slob_kind *K = kind_of(sp);
    char *b = (char *)obj - SLOB_HDR;
    uint64_t h;
    if ((char *)obj < page_base(sp) + SLOB_HDR || (char *)obj > page_end(sp) ||
        hstate(K, b, (h = hget(b))) != ST_ALLOC) {
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    unsigned id = hid(K, b, h), units = H_UNITS(K, h);
    /* the neighbours the merge reads, fetched while the lock is taken */
    __builtin_prefetch(b + (size_t)units * K->unit, 1);
    if (H_NEXT(K, h))
        __builtin_prefetch(b - (size_t)H_NEXT(K, h) * K->unit, 1);
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
    if (expected && c != expected) {
        qs_fatal("invalid free of %p: freed to cache %s but it belongs to cache %s", obj,
                 expected->name, slob_name_of(id));
        return;
    }
    struct qs_slab *release = NULL;
    struct slob_index *ix = index_of(kind_nr(sp), sp->node);
    qs_lock_acquire(&slob_lock);
    /* checked again under the lock: a racing second free loses here */
    if (hstate(K, b, hget(b)) != ST_ALLOC) {
        qs_lock_release(&slob_lock);
        qs_slob_bad_free(expected, sp, obj);
        return;
    }
    unsigned key = slob_page_give(sp, b, units, id);
    if (sp->inuse == 0) { /* empty: kept, and the oldest past the limit given back */
        slob_index_del(ix, sp);
        release = slob_keep_push(sp);
    } else if (key != sp->empty_ms) { /* a larger block: another bucket */
        slob_index_del(ix, sp);
        slob_index_add(ix, sp, key);
    }
    bool kept = slob_nr_keep[K_PAGE] || slob_nr_keep[K_RUN];
    qs_lock_release(&slob_lock);
    if (c) {
        qs_stat(c, NULL, QS_FREE_SLOW, 1);
        qs_stat(c, NULL, QS_FREE_OBJS, 1);
    }
    if (release)
        slob_pages_release(release);
    if (kept) /* the purger gives them back after their decay */
        qs_node_purger_want();
}

static void slob_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (c == &qs_slob_arena)
        page_free(NULL, s, obj);
    else
        big_free(c, s, obj);
}

static bool slob_free_to(qslab_cache *expected, struct qs_slab *s, void *obj)
{
    if (s->cache != &qs_slob_arena)
        return false; /* a big object's slab: the caller reports obj */
    page_free(expected, s, obj);
    return true;
}

static size_t slob_usable(struct qs_slab *s, const void *obj, const char *what)
{
    if (s->cache != &qs_slob_arena) /* a big object, alone in its slab: as SLQB's */
        return s->cache->is_kmalloc ? qs_front_kmalloc_room(s) : s->cache->obj_size;
    const struct slob_kind *K = kind_of(s);
    char *b = (char *)obj - SLOB_HDR;
    uint64_t h;
    if ((const char *)obj < page_base(s) + SLOB_HDR || (const char *)obj > page_end(s) ||
        hstate(K, b, (h = hget(b))) != ST_ALLOC) {
        qs_slob_bad_pointer(NULL, s, obj, what);
        return 0;
    }
    qslab_cache *c = __atomic_load_n(&qs_cache_by_id[hid(K, b, h)], __ATOMIC_ACQUIRE);
    size_t pay = (size_t)H_UNITS(K, h) * K->unit - SLOB_HDR;
    return c && !c->is_kmalloc && c->obj_size < pay ? c->obj_size : pay;
}

QS_STARTUP void qs_slob_setup(void)
{
    slob_secret = qs_os_random64();
    qslab_cache *a = &qs_slob_arena;
    if (!qs_api_hooks.cache_setup(a, "slob-pages", SLOB_UNIT, SLOB_UNIT, 0, NULL, false, -1)) {
        qs_warn("cannot set up the SLOB arena");
        qs_os_abort();
    }
    qs_front_set(a, QS_FRONT_SLOB);
    /* in no cache list: its pages are every SLOB cache's (slob_report) */
    qs_lock_acquire(&qs_global);
    qs_cache_unlist(a);
    qs_lock_release(&qs_global);
}

const struct qs_front qs_front_slob = {
    .name = "slob",
    .what = "pages every cache shares, indexed by largest free block, one lock (SLOB)",
    .alloc = slob_alloc,
    .kmalloc = slob_kmalloc,
    .free_obj = slob_free,
    .free_to = slob_free_to,
    .usable = slob_usable,
    .shrink = slob_shrink,
    .sweep = slob_sweep,
    .totals = slob_totals,
    .validate = slob_validate,
    .lock_all = slob_lock_all,
    .report = slob_report,
    .page_objs = slob_page_objs,
    .kmalloc_exact = true,
    .shared_pages = true,
};
