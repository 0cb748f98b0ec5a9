/*
 * internal.h - qslab's core structures.  Read this comment first.
 *
 * LAYERS (docs/design.md, "Layers"; a folder of src/ each, lowest first; a
 * layer includes only its own and lower layers' headers: scripts/check-layers;
 * where one calls a higher layer, it calls through a table of core/hooks.h
 * that the higher layer fills in)
 *   os/       the only code that calls the OS (contract: os/os.h)
 *   core/     meta.c (qslab's own structures), page.c (4 MiB chunks cut into
 *             slabs, the unit map, large blocks), slab.c (objects in a slab),
 *             node.c (NUMA, per-node lists, empty FIFO), report.c (messages),
 *             large.c (large blocks), caches.c (the global lock, the cache
 *             list, the kmalloc caches: state every layer shares),
 *             hooks.[ch] (the calls up the layers, which those layers fill in)
 *   owner/    owner.c (who owns a queue: a CPU or a thread), percpu.[ch]
 *             (restartable sequences)
 *   front/    front.[ch] (the interface, the table of front ends); slqb/
 *             (fast.h: the queues' inline fast paths; queue.c: refill,
 *             flush; remote.c: remote batches, inboxes; budget.c: the owner
 *             budget; cpu.c: per-CPU queues), slub/, slab/, slob/;
 *             fastpath.h (the choice among the fast paths), registry.c
 *   debug/    debug.c, flags.c, slot.c, track.c, bugs.c (the debug front end),
 *             twin.c, guard.c, validate.c
 *   observe/  stats.c, observe.[ch], tune.c, control.[ch]
 *   api/      cache.c (object caches, start-up), kmalloc.c, fork.c, entry.c
 *             (the entry points whose work lies below)
 *   malloc/   the malloc drop-in
 * This header holds the types and helpers every layer shares, and through
 * core/lock.h, core/page.h, core/slab.h, core/node.h and core/queue.h
 * (parts of it, included where their types are defined) the lock and the
 * core's prototypes; each other layer declares its own in its headers
 * (owner/owner.h, front/queue.h, debug/debug.h, observe/stats.h,
 * observe/tune.h, api/api.h, ...).
 *
 * STRUCTURES (SLQB's, with a thread as the queue owner)
 *   qslab_cache  one per object type; kmalloc-<size> caches are static.
 *   qs_queue     one per (owner, cache): a LIFO queue of free objects
 *                (head, nr) that the owner pops and pushes without locks or
 *                atomics; the slabs the owner owns (qs_list: partial, full);
 *                an inbox where other owners post batches of remote frees.
 *   qs_node      one per (cache, NUMA node): slabs owned by no thread (their
 *                owner exited, or alloc_node put them there), under a lock;
 *                and the FIFO of empty slabs kept for reuse.
 *   qs_slab      descriptor of a slab, kept in its chunk's header (outside the
 *                slab, so that objects fill whole pages): the slab's own free
 *                list, inuse count, owner.
 *
 * OBJECTS.  A free object carries one link word at cache->link_off: offset 0,
 * or just past the object for constructor caches (a constructed object must
 * not be overwritten).  The word holds next ^ cache->secret: the secret has
 * random bits where user pointers have zero bits (bits 47..63 and 0..2), so
 * a word "looks free" only if those bits match (qs_looks_free); allocation
 * clears the word.  That gives cheap double-free detection (a free of an
 * object whose word looks free is checked against the queue) and catches
 * most writes to free objects (a decoded link with those bits set).
 *
 * AN OBJECT IS IN EXACTLY ONE PLACE: allocated to the user; in some owner's
 * queue; in some inbox (posted, not yet claimed); or on its slab's free list.
 * slab->inuse counts every object not on the slab's free list, so
 *     slab->inuse + (length of slab->freelist) == slab->objects
 * and objects in queues and inboxes count as "in use" from the slab's side.
 *
 * SLAB STATES AND OWNERSHIP
 *   FREE     the slot belongs to the page layer (slab->cache == NULL)
 *   PARTIAL  on its owner's partial list: 0 < inuse < objects
 *   FULL     on its owner's full list: inuse == objects (every object is
 *            allocated or sitting in a queue)
 *   EMPTY    on its node's empty FIFO: inuse == 0, owner = the node list
 *   The owner (slab->owner, a qs_list) is either a queue (one thread touches
 *   the slab's free list, no lock) or a node list (touched under node->lock).
 *   Anyone else who frees an object of the slab routes it to the owner: to the
 *   queue's inbox (one lock per batch) or under the node lock.
 *
 * LOCKS, in the order they nest (never take an earlier one while holding a
 * later one; inbox and node locks are never held together):
 *   0. make_lock     api/kmalloc.c: a kmalloc class's cache made on its
 *                    first use (qs_kmalloc_cache); taken with no other held.
 *   1. qs_global     the cache list, cache ids, each cache's queue list and
 *                    pool, owners' slot arrays; held by thread exit, destroy,
 *                    the statistics readers and tune.
 *   2. node->lock    node-owned slabs (their free lists, inuse, lists), and
 *                    changing a slab's owner to or from the node's lists.
 *   2a. fifo[h].lock one home's list of the node's empty FIFO (node.c, FIFO
 *                    HOMES): after node->lock when both are held, several in
 *                    increasing h; a slab's owner changes to or from the node
 *                    under it as the slab joins or leaves the list.
 *   2. inbox.lock    one queue's inbox (posted remote frees) and its dead flag.
 *   3. pool->lock    the page layer's chunk lists for one (node, order).
 *   4. qs_meta_lock  the meta allocator.
 *
 * MEMORY ORDERING.  slab->owner is written with release and read with
 * acquire: whoever changes it holds the node lock (a FIFO home's lock for a
 * slab joining or leaving the FIFO), so the slab's fields written by the old
 * owner are visible to the next.  A slab on the FIFO has no object in use:
 * only a second free can reach it there, and the node lock its sender
 * takes does not hold off a take from the FIFO: the second free is
 * reported when the sender finds the slab first (as the FIFO's own, or as
 * another owner's: routed again), and may go unseen when the take comes
 * between the sender's look at the owner and its look at the free bit,
 * as a second free racing with its slab's reuse may anywhere.  A thread holding an
 * allocated object of a slab keeps the slab alive (inuse > 0), so reading
 * slab->owner on free is always safe.  Queues are never freed while their
 * cache lives (exited threads' queues go to a pool), so a stale owner
 * pointer still points to a valid inbox; the inbox's dead flag, read under
 * its lock, tells a sender to route again.  Statistics counters are written
 * by one thread at a time with relaxed atomic loads and stores (plain movs
 * on x86, no locked instructions) and summed by readers.
 */
#ifndef QSLAB_INTERNAL_H
#define QSLAB_INTERNAL_H

#include "os/os.h"
#include <qslab.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Everything declared below is internal: hidden, so that code in the shared
 * libraries reaches qslab's globals directly, not through the GOT. */
#pragma GCC visibility push(hidden)

#define QSLAB_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
/* Out of line and cold (callers' branches to it are unlikely), for code most
 * programs never run (reports, misuse): the compiler puts it in
 * .text.unlikely, which the drop-in's link places after all other code
 * (src/malloc/layout.ld).  QS_SLOW: out of line, for a slow path that
 * programs run now and then (a queue's miss, a big block's free), kept
 * among the code of its file, so that the pages a program runs stay
 * together.  Not cold: GCC takes a function that only cold ones call for
 * cold too and moves it to .text.unlikely (SLUB's pc_install_or_give,
 * which every SLUB refill runs, went there); the calls sit behind
 * unlikely() anyway. */
#define QS_NOINLINE __attribute__((noinline, cold))
#define QS_SLOW __attribute__((noinline, section(".text.qs_slow")))

/* v rounded up to a multiple of a (a power of two). */
static inline size_t qs_round_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* Debug tiers: QSLAB_DEBUG (cheap asserts), QSLAB_DEBUG_EXPENSIVE (walkers). */
#ifndef QSLAB_DEBUG
#define QSLAB_DEBUG 0
#endif
#define qs_assert(x)                                                                               \
    do {                                                                                           \
        if (QSLAB_DEBUG && !(x))                                                                   \
            qs_assert_fail(#x, __FILE__, __LINE__);                                                \
    } while (0)

#define QS_PAGE_SHIFT 12
#define QS_PAGE_SIZE ((size_t)1 << QS_PAGE_SHIFT)
#define QS_CHUNK_SHIFT 22
#define QS_CHUNK_SIZE ((size_t)1 << QS_CHUNK_SHIFT) /* 4 MiB */
#define QS_MAX_ORDER 14                             /* 64 MiB slabs */
#define QS_NR_ORDERS (QS_MAX_ORDER + 1)
#define QS_MAX_NODES 64
#define QS_MAX_CPUS 1024
#define QS_NAME_MAX 32
#define QS_CACHELINE 64
#define QS_MAX_HIWATER (1u << 20)
#define QS_MAX_EMPTY_LIMIT (1u << 20)
#define QS_MAX_DECAY_MS 3600000u
#define QS_MAX_PARTIAL (1u << 20)  /* SLUB cpu_partial, min_partial */
#define QS_SLUB_CPU_PARTIAL_BYTES (6u * 8192)   /* SLUB cpu_partial's default, in bytes at most */
#define QS_SLUB_MIN_PARTIAL_BYTES (10u * 32768) /* SLUB min_partial's default, in slab bytes at most */
#define QS_SLAB_FREE_BYTES (10u * 32768)        /* SLAB free_limit, in bytes at most */
#define QS_MAX_SLAB_LIMIT 32768u   /* SLAB limit */
#define QS_MAX_SLAB_SHARED 64u     /* SLAB shared (batches) */

#define QS_LINK_TAG_MASK 0xffff800000000007ULL
/* The tag bits but bit 0's: those of w ^ stamp for a free object's word w
 * (front/slqb/fast.h qs_queue_word_taken).  The fast paths' asm tests a
 * word against the masks in memory (qs_tag_masks, core/slab.c: a test with
 * a RIP-relative operand, where a 64-bit immediate would need a register
 * and an instruction more). */
#define QS_WORD_TAG_MASK (QS_LINK_TAG_MASK & ~1ull)
extern const uint64_t qs_tag_masks[2]; /* QS_LINK_TAG_MASK, QS_WORD_TAG_MASK */
#define QS_TAG_MASK_ASM "qs_tag_masks(%%rip)"
#define QS_WORD_MASK_ASM "qs_tag_masks+8(%%rip)"
/* The word of an object in a queue, its free stamp: no valid link (its tag
 * bit 0 is wrong), so a list walker that meets it (an object freed again
 * while it sat on a free list: the fast free stores without loading) stops
 * and reports a double free instead of following it, and a pop tells a
 * queued object from one that was handed out or is on a list as well.
 * The slower free paths, which load the word, treat it as "free"
 * (qs_maybe_free). */
#define QS_STAMP(secret) ((uintptr_t)(secret) ^ 1)

/* qs_queue.top: nr in the low bits, fast pops above.  A fast pop adds
 * QS_TOP_POP (nr - 1, pops + 1), a push adds 1.  Pops wrap at 2^43; the
 * statistics readers accumulate them (stats.c). */
#define QS_TOP_SHIFT 21 /* nr <= QS_MAX_HIWATER + a refill < 2^21 */
#define QS_TOP_NR_MASK (((uint64_t)1 << QS_TOP_SHIFT) - 1)
#define QS_TOP_NR(t) ((unsigned)((t) & QS_TOP_NR_MASK))
#define QS_TOP_POPS(t) ((t) >> QS_TOP_SHIFT)
#define QS_TOP_POP (((uint64_t)1 << QS_TOP_SHIFT) - 1)
/* qs_queue.fb: the open batch's head >> 3 (user pointers are below 2^47)
 * and its count above */
#define QS_FB_SHIFT 44
#define QS_FB_N(w) ((unsigned)((w) >> QS_FB_SHIFT))
#define QS_FB_HEAD(w) ((void *)(((w) & (((uint64_t)1 << QS_FB_SHIFT) - 1)) << 3))
#define QS_FB_PACK(head, n) (((uint64_t)(uintptr_t)(head) >> 3) | ((uint64_t)(n) << QS_FB_SHIFT))

/* ASan builds (gcc defines __SANITIZE_ADDRESS__, clang answers
 * __has_feature): debug/slot.c poisons objects by hand, page.c maps the unit map. */
#if defined(__SANITIZE_ADDRESS__)
#define QS_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QS_HAVE_ASAN 1
#endif
#endif

#include "core/lock.h"

/* ---- statistics: one X-macro list ---- */
#define QS_STATS(X)                                                                                \
    X(ALLOC_FAST, "alloc_fast", "allocations served from the owner's queue")                      \
    X(ALLOC_SLOW, "alloc_slow", "allocations that needed a refill or a node list")                \
    X(FREE_FAST, "free_fast", "frees pushed on the owner's queue")                                \
    X(FREE_SLOW, "free_slow", "frees not pushed (queue full: to own slab; other node; no queue)")  \
    X(FLUSH, "flush", "queue flushes over hiwater")                                               \
    X(REMOTE_FREE, "remote_free", "objects posted to another owner's inbox")                      \
    X(REMOTE_BATCH, "remote_batch", "batches posted (one inbox lock each)")                       \
    X(NODE_FREE, "node_free", "objects freed to node-owned slabs")                                \
    X(CLAIM, "claim", "inboxes claimed by their owner")                                           \
    X(REFILL, "refill", "queue refills from slabs")                                               \
    X(NEW_SLAB, "new_slab", "slabs taken from the page layer")                                    \
    X(FREE_SLAB, "free_slab", "slabs given back to the page layer")                               \
    X(NEW_OBJS, "new_objs", "objects in slabs taken from the page layer")                         \
    X(FREE_OBJS, "free_objs", "objects in slabs given back")                                      \
    X(NODE_ALLOC, "node_alloc", "allocations from a node list (alloc_node)")                      \
    X(DOUBLE_FREE_CHECK, "df_check", "frees of objects whose link looked free")

enum qs_stat_item {
#define X(e, n, d) QS_##e,
    QS_STATS(X)
#undef X
        QS_STAT_NR
};
/* The events a node counts (struct qs_node ev[]): of QS_STATS, those of
 * its own paths; qs_node_ev_stat maps each to its item. */
#define QS_NODE_EVENTS(X) X(ALLOC_SLOW) X(NODE_ALLOC) X(FREE_SLOW) X(NODE_FREE)
enum {
#define X(e) QS_NEV_##e,
    QS_NODE_EVENTS(X)
#undef X
        QS_NEV_NR
};
static const uint8_t qs_node_ev_stat[QS_NEV_NR] = {
#define X(e) QS_##e,
    QS_NODE_EVENTS(X)
#undef X
};
_Static_assert(QS_ALLOC_FAST == 0, "the fast paths' counter is the queue's first");

struct qs_slab;
struct qs_queue;
struct qs_node;

/* A set of slabs with one owner. */
struct qs_list {
    struct qs_slab *partial; /* 0 < inuse < objects; doubly linked */
    struct qs_slab *full;    /* inuse == objects */
    unsigned long nr_partial, nr_full;
    struct qs_node *node; /* non-NULL: this is node->list (shared, locked) */
};

/* Slab descriptor, in the chunk header.  Identity fields are written when
 * the slot is given to a cache and read by anyone; the rest by the owner. */
struct qs_slab {
    /* what the free path reads: the first 32 bytes, one cache line
     * (descriptors are 96 bytes, 32-aligned).  A slot that holds no slab
     * (free in the page layer, or covered by the chunk header) has span 0,
     * so no pointer passes qs_slab_valid_obj for it. */
    qslab_cache *cache;     /* NULL: slot free in the page layer (atomic) */
    char *base;             /* first object */
    uint64_t recip;         /* ceil(2^64 / slot_size): divisibility check */
    uint32_t span;          /* objects * slot_size: bytes of born objects; 0: none */
    uint16_t cache_id;      /* cache->id: the free path finds its queue
                               without waiting for the cache's line */
    uint8_t fast;           /* QS_FAST_*: the free fast path this slab's
                               objects take (its cache's free_fast) */
    uint8_t home;           /* on a node's empty FIFO: its list there (node.c) */
    /* (cache ids fit cache_id: QS_MAX_CACHES, asserted in core/caches.c) */
    char *mem;              /* slab start (page aligned); set by page layer */
    struct qs_list *owner;  /* atomic (acquire/release) */
    void *freelist;         /* objects free in the slab (encoded links) */
    union {
        void *tail;         /* the free list's last object */
        uint64_t fw;        /* SLUB's slabs (slub.c): free list head, inuse
                               and frozen in one word, changed by CAS */
    };
    uint32_t inuse;         /* objects not on freelist */
    uint32_t objects;       /* objects born in this slab (core/slab.c qs_slab_grow) */
    uint8_t state;          /* QS_SLAB_* */
    uint8_t order;          /* slab bytes = page << order */
    uint16_t node;          /* NUMA node of its memory */
    uint32_t empty_ms;      /* QS_SLAB_ZERO: the slab's memory past its born
                               objects is zero (page.c); the low 31 bits:
                               when it went on the empty FIFO or warm (ms,
                               wraps: qs_ms_age) */
    struct qs_slab *next, *prev; /* list links (owner list, empty FIFO, page free slots) */
};

/* qs_slab.empty_ms: a slot handed out by the page layer from memory that
 * was given back to the OS (or never touched) is zero; objects born there
 * into a queue carry QS_FRESH_WORD(secret), a link to the non-object
 * address QS_FRESH_LINK, so that calloc hands them out without clearing
 * them (kmalloc.c).  Times keep 31 bits. */
#define QS_SLAB_ZERO 0x80000000u
#define QS_MS_MASK 0x7fffffffu
#define QS_FRESH_LINK ((uintptr_t)8)
#define QS_FRESH_WORD(secret) ((uintptr_t)(secret) ^ QS_FRESH_LINK)
/* qs_self.last_word as calloc's slow path starts (kmalloc.h): the caller
 * wants zero bytes, so a slow path that would birth objects from zero
 * memory may hand it one born bare instead (qs_slab_born_bare), written
 * nowhere; it then leaves QS_FRESH_WORD there.  No object's word is 1. */
#define QS_WORD_CALLOC ((uintptr_t)1)
static inline uint32_t qs_ms_stamp(uint64_t now, uint32_t old)
{
    return (old & QS_SLAB_ZERO) | ((uint32_t)now & QS_MS_MASK);
}
/* The age of a stamp at `now`, modulo 2^31 ms (24 days).  A stamp after
 * `now` (up to 12 days) is age 0: a clock read before a lock is taken can
 * be older than a stamp that another thread made under that lock
 * meanwhile (the purger reads its clock before it takes qs_global, then
 * each node lock: front/registry.c), and its wrapped difference, 24 days,
 * passed every decay, so a sweep gave back slabs that had just gone
 * empty (unit_empty_slabs, "a stale clock"). */
static inline uint32_t qs_ms_age(uint64_t now, uint32_t stamp)
{
    uint32_t d = ((uint32_t)now - stamp) & QS_MS_MASK;
    return d <= QS_MS_MASK / 2 ? d : 0;
}

enum { QS_SLAB_FREE, QS_SLAB_PARTIAL, QS_SLAB_FULL, QS_SLAB_EMPTY,
       /* SLUB's (slub.c) */
       QS_SLAB_ACTIVE,      /* frozen: an owner's active slab */
       QS_SLAB_CPU_PARTIAL, /* on an owner's partial list */
       QS_SLAB_PASS };      /* a kmalloc block from the page layer (pass-through) */
_Static_assert(sizeof(struct qs_slab) == 96 && __builtin_offsetof(struct qs_slab, mem) == 32,
               "slab descriptors: validation fields in one aligned 32-byte block");

/* Remote frees posted to a queue by other owners. */
struct qs_inbox {
    qs_lock lock;
    int dead;          /* owner exited: route again (under lock) */
    int pending;       /* atomic hint: head != NULL */
    void *head, *tail; /* encoded links, under lock */
    unsigned long nr;
    uint32_t kept_ms; /* under lock: since when the head holds objects a
                         claim put back (its low bit set), 0 if none
                         (front/slqb/remote.c slqb_claim_into) */
} __attribute__((aligned(QS_CACHELINE)));

struct qs_owner;

#define QS_PENDING 4    /* owners with a pending batch at once, per queue */
#define QS_REMOTE_LOW 4 /* others' objects are queued below hiwater / 4 */
#define QS_PARK_BYTES (16 << 10)   /* ... and below this many bytes of queue */
#define QS_REFILL_BYTES (64 << 10) /* a refill takes at most this much */
#define QS_REFILL_MIN 4            /* ... and at least this many objects */
#define QS_QUEUE_BYTES ((size_t)256 << 10) /* default hiwater, at most (tune.c) */

/* Objects on their way to one owner (a queue's list or a node's), linked
 * through their link words; posted in one go (remote.c slqb_send_batch). */
struct qs_batch {
    struct qs_list *to;
    void *head, *tail;
    uint32_t n;
    /* a pending batch (SLQB's, remote.c): the objects its owner's transit
     * budget has reserved for it (budget.c), posted once it holds that
     * many (one, if none); 0 for the batches a flush routes through */
    uint32_t res;
};
static inline uint32_t qs_batch_cap(const struct qs_batch *b)
{
    return b->res ? b->res : 1;
}

/* One owner's view of one cache. */
struct qs_queue {
    /* hot: the first 64 bytes are all the fast paths touch (the struct is
     * 64-aligned: its inbox is).  The queue is an array of object pointers,
     * a LIFO stack slots[0 .. nr): a push stores the pointer and the
     * object's free stamp, a pop loads both; neither follows a link, and a
     * free never loads from the object (the program's last narrow write
     * there cannot stall it on store forwarding).  `top` packs nr with a
     * count of fast pops, so that one store commits a pop and counts it
     * (QS_TOP_*): the commit the per-CPU owner's restartable sequences need. */
    uint64_t top;   /* nr (low QS_TOP_SHIFT bits) | fast pops (above, wrap) */
    void **slots;   /* [cap]; slots[-1] is a NULL sentinel (push's dup check) */
    /* copies of the cache's (set at attach; limit and park also by tune
     * under qs_global): the fast paths read the queue's line, not the
     * cache's */
    uintptr_t stamp; /* QS_STAMP(cache->secret): the word of a queued object */
    uint32_t link_off;
    uint32_t limit;   /* push while nr < limit = min(hiwater, cap): owner
                         (and tune, lowering only); relaxed */
    /* the owner list whose slabs' objects the per-CPU free fast path takes
     * as the queue's own (pushed while nr < limit, no other test): the
     * queue's `list` (SLQB: the slabs it owns), or for a SLAB CPU's array
     * its node's list (every SLAB slab is its node's); set at attach and
     * by the front end's queue_knobs, read by the section (relaxed) */
    struct qs_list *own;
    int node;         /* owner's node; its slabs come from this node */
    uint32_t park;    /* cache->park's copy (tune): the per-CPU free fast
                         path queues another owner's object of our node
                         while nr < park (qs_free_remote's rule) */
    /* A CPU's open remote batch (remote.c slqb_percpu_fb_*): objects of slabs
     * of owner fb_to, linked through their link words, on their way home.
     * fb packs its head (>> 3, low QS_FB_SHIFT bits) and its count (above);
     * 0: closed.  The free fast path appends to an open batch of the
     * object's owner below fb_max, committing with fb; everything else
     * (fb_to, fb_tail, fb_base, opening and closing) is the lock holder's,
     * and fb_to and fb_tail change only while fb is closed. */
    uint64_t fb;
    struct qs_list *fb_to;
    uint32_t fb_max;  /* the open batch's room, which it reserved of the
                         transit budget (budget.c); 0 while closed */
    uint32_t fb_base; /* objects in the batch when the lock holder opened
                         it: the rest are fast frees, counted at its close */
    void *fb_tail;
    /* written by the owner (relaxed); fast pops live in `top`, fast frees
     * are derived (qs_queue_nr_set) */
    unsigned long stat[QS_STAT_NR];
    struct qs_list list; /* slabs this owner owns */
    /* our empty slabs (state EMPTY, ->next linked), kept for the next
     * refill; handed to the node in batches (qs_queue_drain_stash).  Under
     * stash_lock, a leaf lock: the owner takes it once per stash_add or
     * refill, the purger to take a stash its owner left alone for a whole
     * tick (stash_idle: set by the purger, cleared by the owner, relaxed),
     * which a quiet thread would otherwise keep forever. */
    qs_lock stash_lock;
    int stash_idle;
    struct qs_slab *stash;
    unsigned nr_stash; /* also read unlocked (statistics, hints) */
    uint32_t stash_bytes; /* at most cache->stash_bytes + one slab */
    struct qs_batch pending[QS_PENDING]; /* frees of objects of slabs we do
                                            not own, on their way home
                                            (remote.c pending_add) */
    uint16_t pending_victim, pending_mru; /* indices of pending[] */
    /* read by the slow paths only (the queue's first line is the fast
     * paths'): */
    uint32_t cap;     /* slots' capacity (owner) */
    qslab_cache *cache;
    unsigned long moved; /* net change of nr by slow paths (wraps) */
    unsigned nr_seq;     /* odd while the owner changes nr and moved */
    uint32_t hiwater;    /* relaxed; a copy of the cache's, as limit and park */
    /* the statistics readers' (qs_global): fast pops seen so far, and the
     * raw count of `top` at the last reading (it wraps at 2^43) */
    unsigned long pops_seen;
    uint64_t pops_raw;
    /* shared */
    struct qs_inbox inbox;
    /* per-CPU queues (QS_OWNER_CPU): every slow path holds lock (rank 1b:
     * after qs_global, before node, inbox and stash locks; a second queue
     * lock is only tried, never waited for: budget.c grant_steal, cpu.c
     * slqb_percpu_adopt); cpu is the owner's, -1 for a thread's queue */
    qs_lock lock;
    int cpu;
    uint64_t idle_top; /* the purger's: top at its last tick (per-CPU) */
    uint64_t adopt_top; /* lock holders': top when another CPU's refill last
                           looked at it (cpu.c slqb_percpu_adopt) */
    /* bookkeeping under qs_global */
    struct qs_owner *owner;    /* thread using it; NULL when pooled */
    struct qs_queue *all_next; /* cache->queues */
    struct qs_queue *pool_next;
    /* SLUB's per-owner state (slub.c; kmem_cache_cpu): a queue of a SLUB
     * cache is inert for SLQB's fast paths (top 0, limit 0, park 0).  The
     * owner allocates from freelist (objects of slab, its active slab) and
     * frees objects of slab onto it, without a lock (per-CPU: restartable
     * sequences); slab and freelist change only in the owner's slow paths
     * (per-CPU: q->lock held, through sections or after percpu_take);
     * partial (unfrozen slabs, ->next linked) likewise. */
    /* SLAB's per-owner state (front/slab/shared.c): alien caches, one small array
     * per node for frees of that node's objects ([node * (limit + 1)]:
     * count, then entries); the owner's (a CPU's: under q->lock) */
    void **alien;
    struct {
        /* pushes, freelist, pops: a CPU's push commits (pushes + 1, obj)
         * with one 16-byte store, a pop (next, pops + 1): its fast
         * counters are exact (slub.c) */
        uint64_t pushes; /* fast frees */
        void *freelist;
        uint64_t pops; /* fast allocations */
        struct qs_slab *slab;
        struct qs_slab *partial;
        uint32_t nr_partial;
    } sl;
    /* guarded sampling (guard.c), only with QSLAB_GUARD_SAMPLE: the
     * owner's (a CPU's: under q->lock) mark, allocations (fast pops + slow)
     * counted at its last sample, and threshold; guard_armed is set by the
     * sampler thread (relaxed, with limit lowered to 0 so that the owner's
     * next own free misses its fast path) and cleared by the owner */
    uint32_t guard_armed;
    uint32_t guard_thresh;
    unsigned long guard_mark;
    /* the owner budget (budget.c): objects this queue may hold, granted
     * from its owner's budget (limit = min(grant, hiwater, cap); a SLAB
     * array's grows with its misses up to SLAB's limit: front/slab/slab.c),
     * and its misses since
     * a steal last looked at it (relaxed: read by other queues' steals);
     * the owner's (a CPU's: under q->lock) */
    uint32_t grant;
    uint32_t misses;
};

_Static_assert(__builtin_offsetof(struct qs_queue, park) + 4 <= 64,
               "the fast paths' queue fields in one cache line");
/* a thread has one queue per cache it uses: 1,000 threads using 20 classes
 * hold 20,000 of them */
_Static_assert(sizeof(struct qs_queue) <= 640, "queues stay at 640 bytes");

/* Per-(cache, node) lists. */
/* A node's empty FIFO is one list per home, each oldest first, each with
 * its own lock in a cache line of its own (node.c, "FIFO HOMES"); a CPU's
 * home is its id modulo QS_FIFO_HOMES.  lock guards the rest, and the
 * links (prev, next, home, empty_ms) of the slabs on the list; nr is
 * stored under it and read without it (qs_node_nr_empty). */
#define QS_FIFO_HOMES 4
struct qs_fifo {
    qs_lock lock;
    uint32_t nr;            /* slabs on the list */
    struct qs_slab *head, *tail;
    unsigned long appended; /* slabs ever appended to it (CYCLING) */
} __attribute__((aligned(QS_CACHELINE)));
struct qs_node {
    qs_lock lock;
    int id;
    struct qs_list list;      /* node-owned slabs; list.node == this */
    /* SLAB's (front/slab/slabs.c), under lock: its free slabs (prev/next), free
     * objects in the node's slabs and the limit over which empty slabs go
     * back, the shared array, the next slab's colour */
    struct qs_slab *slabs_free;
    unsigned long nr_free_slabs, free_objects, free_limit;
    void **shared;
    uint32_t shared_avail, shared_limit;
    uint32_t colour_next;
    /* a debug cache with Q: its quarantine (debug/quarantine.c), under lock */
    struct qs_quar *quar;
    /* events of callers without a queue on the node's own paths
     * (qs_node_alloc, remote.c node_free: every allocation and free of a
     * debug cache), under lock: plain adds, where the cache's orphan
     * counters (atomic adds on one line for every thread) cost those paths
     * more than the lock.  Indexed by QS_NEV_* (below), in the struct's
     * padding; read racily and summed with the queues' and the orphans'
     * (front.c qs_stats_sum, tools/reader.c). */
    unsigned long ev[QS_NEV_NR];
    /* the retention cap's cuts of this FIFO (core/node.c, CYCLING), under
     * every home's lock (and qs_global): the homes' appended counts summed
     * at its last cut, when that was (ms, with QS_CUT_SET) and how many
     * slabs that run of cuts took */
    unsigned long cut_mark;
    uint32_t cut_ms, cut_nr;
    struct qs_fifo fifo[QS_FIFO_HOMES]; /* the empty FIFO, by home: a line each */
} __attribute__((aligned(QS_CACHELINE)));
_Static_assert(sizeof(struct qs_node) == (3 + QS_FIFO_HOMES) * QS_CACHELINE,
               "struct qs_node: three cache lines and a line per FIFO home");

/* Empty slabs on node n's FIFO, every home's (read without the locks: an
 * estimate while slabs come and go) */
static inline unsigned long qs_node_nr_empty(const struct qs_node *n)
{
    unsigned long nr = 0;
    for (int h = 0; h < QS_FIFO_HOMES; h++)
        nr += QS_LOAD(n->fifo[h].nr);
    return nr;
}

/* Node n's events added to sum[QS_STAT_NR]: the statistics' sum
 * (front.c qs_stats_sum) and the reader's, over its copy (tools/reader.c) */
static inline void qs_node_events_sum(const struct qs_node *n, unsigned long *sum)
{
    for (int e = 0; e < QS_NEV_NR; e++)
        sum[qs_node_ev_stat[e]] += QS_LOAD(n->ev[e]);
}

struct qslab_cache {
    /* hot: read on every alloc and free */
    unsigned id;         /* index in owners' slot arrays */
    uint32_t link_off;   /* offset of the link word in a free object */
    uintptr_t secret;    /* link encoding */
    uint32_t slot_size;  /* bytes per object in a slab */
    uint32_t hiwater;    /* tunable: queue length that triggers a flush */
    uint32_t freebatch;  /* tunable: objects moved per flush */
    /* derived from hiwater, freebatch and slot_size (qs_tune_derive): what
     * a thread holds of other owners' objects is bounded in bytes too */
    uint32_t park;         /* others' objects queued while nr < park */
    uint32_t refill;       /* objects a refill aims for (queue.c) */
    uint32_t fresh;        /* ... and takes at least, of new memory */
    /* QS_FAST_*: the fast paths an allocation (fast) and a free of one of
     * its slabs' objects (free_fast, copied into each slab) take; set by
     * front.c qs_front_fast */
    uint8_t fast, free_fast;
    void (*ctor)(void *);
    /* cold */
    size_t obj_size, align;
    unsigned long flags;
    uint32_t order;          /* tunable: order of new slabs */
    uint32_t min_order;      /* smallest order holding one object */
    uint32_t max_order;      /* largest whose free-bit granule fits a slot (core/slab.h):
                                the bound of front ends that keep free bits */
    uint32_t empty_limit;    /* tunable: empty slabs kept per node */
    uint32_t empty_decay_ms; /* tunable: age after which empties go back */
    uint32_t stash_bytes;    /* tunable: empty slabs a queue keeps (bytes) */
    uint32_t shrinking;      /* qslab_cache_shrink's under way (atomic): its
                                FIFOs keep what its owners hand them, past
                                empty_limit, for the shrink to give back */
    uint32_t cpu_partial;    /* tunable (SLUB): objects in an owner's partial slabs */
    uint32_t min_partial;    /* tunable (SLUB): partial slabs a node keeps, empty or not */
    uint32_t pass_through;   /* tunable (SLUB kmalloc over a page): blocks
                                straight from the page layer */
    uint32_t slab_limit;     /* tunable (SLAB) limit: an owner's array */
    uint32_t slab_batch;     /* tunable (SLAB) batchcount: objects per refill, flush */
    uint32_t slab_shared;    /* tunable (SLAB) shared: a node's shared array
                                holds shared * batchcount (0: none) */
    bool is_kmalloc;
    uint8_t front;            /* QS_FRONT_*: its front end (front.h), set
                                 before its first allocation */
    bool keeps_fbits;         /* its slabs keep free bits (core/slab.h):
                                 set with front (front.c qs_front_set) */
    /* debugging (debug.c): QS_DBG_* flags; a cache with any is served by
     * the debug front end (QS_FRONT_DEBUG), never by the fast paths */
    uint8_t debug;
    uint32_t red_left;        /* bytes of left red zone before each object
                                 (the slab's first object starts this far in) */
    uint32_t track_off;       /* U: the alloc and free tracks, from the object */
    unsigned long debug_repairs, debug_quarantined; /* atomic counts */
    /* debugging turned on for a cache in use (twin.c): dbg_alloc is the
     * debug twin that takes the cache's allocations now (NULL: none;
     * stored under qs_global with release, read with acquire); twin_of is
     * a twin's cache (set before the twin is published, then constant) */
    qslab_cache *dbg_alloc, *twin_of;
    /* its twins in creation order, chained through twin_next (qs_global;
     * qs_twin_next walks them) */
    qslab_cache *twins, *twin_next;
    char name[QS_NAME_MAX];
    struct qs_node *nodes;    /* [qs_nr_nodes] */
    struct qs_queue *queues;  /* every queue of this cache (qs_global) */
    struct qs_queue *pool;    /* queues of exited owners (qs_global) */
    /* events of callers without a queue (the purger, malloc_trim, a thread
     * past its exit destructor): atomic adds, summed with the queues' */
    unsigned long orphan_stat[QS_STAT_NR];
    unsigned long report_act; /* qslab_stats_report's scratch (qs_global) */
    qslab_cache *next;        /* qs_caches (qs_global) */
    qslab_cache **pprev;      /* the link that points here: O(1) unlink */
    /* SLAB_FREELIST_RANDOM (core/slab.c): tunable `random` (stored with release
     * after rand_seq is made, read with acquire by slab builders); random
     * permutations of 0..2^b-1, b = 0..8, at rand_seq + 2^b - 1, made once
     * per cache (512 bytes kept by cache id); the key and counter of the
     * per-slab stream */
    uint32_t random;
    /* tunable guard_sample (guard.c): this cache's sampling rate, over
     * QSLAB_GUARD_SAMPLE's; 0: QSLAB_GUARD_SAMPLE's */
    uint32_t guard_sample;
    unsigned long guard_live; /* its live guarded samples (atomic; guard.c):
                                 counted as allocated, in no slab */
    uint64_t rand_key, rand_ctr;
    const uint8_t *rand_seq;
    /* cooperative defragmentation (api/defrag.c): the owner's callbacks
     * (mob_migrate NULL: none), written and read only by whoever holds
     * mob_busy (taken by compare-and-swap 0 -> 1: a pass, a change, a
     * destroy's wait); the passes' counters, added by the pass that holds
     * mob_busy and read relaxed by the statistics */
    qslab_isolate_fn mob_isolate;
    qslab_migrate_fn mob_migrate;
    void *mob_arg;
    int mob_busy;
    unsigned long mob_stale; /* slabs (SLOB: its pages) after a purger's pass
                                that moved nothing (qs_global): none before
                                they change */
    unsigned long defrag_passes, defrag_moved, defrag_declined, defrag_slabs;
};
/* A walk over 0..n-1 in the cache's random order (core/slab.c): 8-bit digits
 * under a top digit as wide as n needs, each through the permutation of
 * its width twice, with the slab's own starts and masks; every index
 * exactly once, n <= 2^24.  No allocation, O(n + 512) steps. */
struct qs_shuffle {
    const uint8_t *seq, *tab; /* the lower digits' permutation, the top one's */
    uint32_t n, pos;
    uint8_t top, bits;        /* the top digit's shift (0, 8, 16) and width */
    uint8_t key[3][4];        /* per digit: start, mask, start, mask */
};
/* make rand_seq, once (tune.c, qs_global held, c->id valid); false: ENOMEM */
bool qs_slab_random_init(qslab_cache *c);
/* c->random, acquire: the slabs made now are shuffled */
static inline bool qs_slab_random(const qslab_cache *c)
{
    return __atomic_load_n(&c->random, __ATOMIC_ACQUIRE) != 0;
}
void qs_shuffle_start(qslab_cache *c, struct qs_shuffle *sh, uint32_t n);
uint32_t qs_shuffle_next(struct qs_shuffle *sh);

/* Front ends (front.h): SLQB's queues, SLUB's per-owner active slabs, or
 * SLOB's shared pages. */
enum { QS_FRONT_SLQB, QS_FRONT_SLOB, QS_FRONT_SLUB, QS_FRONT_SLAB,
       QS_FRONT_DEBUG, /* caches with debug flags (debug.c): never chosen by name */
       QS_FRONT_NR }; /* numbers are kept (tune_get) */
#define QS_FRONT_NAMED QS_FRONT_DEBUG /* the front ends a user can name */

/* Debug flags (debug/flags.c), SLUB's letters. */
enum {
    QS_DBG_F = 1,  /* consistency checks on every slow path */
    QS_DBG_Z = 2,  /* red zones */
    QS_DBG_P = 4,  /* poisoning */
    QS_DBG_U = 8,  /* store user: alloc and free tracks */
    QS_DBG_T = 16, /* trace every alloc and free */
    QS_DBG_R = 32, /* repair: report, restore, count and go on (qslab's own) */
    QS_DBG_V = 64, /* tell valgrind's memcheck and ASan about objects (automatic
                      under valgrind); qslab's own Z and P checks then stay off */
    QS_DBG_Q = 128, /* quarantine: freed objects zeroed (0x6b with P) and held
                       back from reuse, checked when reused (qslab's own) */
};
#define QS_DEBUG_LETTERS "FZPUTRVQ" /* QS_DBG_*, bit by bit */
#define QS_DEBUG_LETTERS_LEN 9      /* a buffer for them and the NUL */
/* The debug flags' letters (QS_DBG_*, SLUB's) of a cache's `debug` byte,
 * into out[QS_DEBUG_LETTERS_LEN]: the statistics, the reports, the tools. */
static inline void qs_debug_letters(unsigned debug, char *out)
{
    static const char letters[] = QS_DEBUG_LETTERS;
    int k = 0;
    for (int i = 0; i < 8; i++)
        if (debug & (1u << i))
            out[k++] = letters[i];
    out[k] = '\0';
}
/* qs_debug_tools, qs_debug_hooks.slab_released: core/hooks.h */
void qs_debug_large(void *p, size_t size, bool alloc); /* large blocks, to the tools */

/* Per-thread owner (TLS). */
#define QS_FIXED_SLOTS 88
struct qs_owner {
    /* queues of caches with ids below QS_FIXED_SLOTS (the kmalloc classes
     * up to 5,888 bytes), at fixed offsets in TLS: the fast paths reach their
     * queue with one TLS load, no bound check against cap, no slot array
     * pointer to load first; the bigger classes and the user caches go
     * through `slots`.  Every thread's TLS holds them (a thread costs about
     * 250 bytes idle), so they stay few.  A mirror of
     * slots[0..QS_FIXED_SLOTS), with &qs_no_queue where slots has NULL. */
    struct qs_queue *fixed[QS_FIXED_SLOTS];
    struct qs_queue **slots; /* [cap], indexed by cache->id */
    unsigned cap;
    int node;
    int state; /* 0 new, 1 active, 2 exited */
    unsigned direct_frees; /* frees routed without a queue while state 0 */
    uintptr_t last_word;    /* a thread's: the word of the object its last
                               slow SLQB allocation handed out (calloc reads
                               QS_FRESH_WORD there: kmalloc.c); before
                               calloc's slow path, QS_WORD_CALLOC */
    int cpu;                /* a CPU's owner: its id; a thread's: -1 */
    int tid;                /* a thread's owner: its thread id (qslabinfo -l); a CPU's: -1 */
    unsigned long rseq_aborts; /* a thread's: its critical sections restarted */
    struct qs_queue **ids;  /* a CPU's owner: [QS_PERCPU_IDS], its queues by
                               cache id, qs_no_queue where none (the fast
                               paths' table); a thread's: NULL */
    /* The owner budget (budget.c): bytes its SLQB queues may hold, their
     * grants (grant x slot_size) and their stashes' slabs together, at
     * most qs_owner_budget_now() (more only for a moment after the budget
     * is lowered).  Atomic adds: a CPU's queues have a lock each, and the
     * purger takes a quiet thread's stash. */
    unsigned long budget_used;
    unsigned long budget_peak; /* the most budget_used has been (relaxed) */
    /* Remote frees in transit (budget.c): bytes its SLQB queues' pending
     * and open batches have reserved, at most qs_transit_budget(); atomic
     * adds, at a batch's start and its posting */
    unsigned long transit_used;
    unsigned long budget_held; /* qslab_budget_stats's scratch (qs_global) */
    unsigned budget_hand; /* the slot index the next steal looks at first (relaxed) */
};
/* The owner budget, bytes (tunable owner_budget, "*" only: tune.c).  By
 * default QS_BUDGET_TOTAL shared by the possible CPUs, at least
 * QS_BUDGET_LOW and at most QS_BUDGET_HIGH each (budget.c
 * qs_owner_budget_default: 4 MiB on up to 4 CPUs, 256 KiB from 64). */
#define QS_BUDGET_TOTAL ((unsigned long)16 << 20)
#define QS_BUDGET_LOW ((unsigned long)256 << 10)
#define QS_BUDGET_HIGH ((unsigned long)4 << 20)
#define QS_OWNER_BUDGET_MIN ((unsigned long)16 << 10)
#define QS_OWNER_BUDGET_MAX ((unsigned long)1 << 30)
extern unsigned long qs_owner_budget;
/* budget.c: the budget in force, qs_owner_budget or, with a cached-memory
 * cap, each owner's share of half the cap if less */
unsigned long qs_owner_budget_now(void);
void qs_owner_budget_default(void); /* start-up, before the first cache */
unsigned long qs_transit_budget(void); /* budget.c: bytes an owner may hold in remote frees in transit */
void qs_owner_budget_stats(struct qslab_budget_stats *st); /* after start-up */

/* ---- owner kinds (owner.c) ----
 * QS_OWNER_THREAD: a queue belongs to a thread (qs_self, TLS); its fast
 *   paths are plain C, its slow paths run on the owner alone.
 * QS_OWNER_CPU: a queue belongs to a CPU (SLQB's owner), found through the
 *   thread's rseq area (cpu_id) and qs_cpu_owners[].  Fast paths are
 *   restartable sequences (percpu.c, slqb/fast.h): they touch only the
 *   current CPU's queue line and slots, and commit with one store to `top`.
 *   Every slow path on a queue holds its `lock`, and changes the queue's
 *   top and slots only through restartable sequences on the queue's CPU
 *   (percpu.c), or after taking the queue from its CPU (qs_percpu_take).
 * The kind is chosen once, at start-up (QSLAB_OWNER, rseq available). */
enum { QS_OWNER_THREAD, QS_OWNER_CPU };
/* The fast path a cache's allocations (c->fast, and kmalloc's class
 * tables) and its slabs' frees (s->fast) take: the owners' queues, per
 * thread or per CPU (SLQB's, SLAB's arrays; the other front ends' queues
 * are inert: their fast paths always miss), or SLUB's active slab's list
 * (front/slub/fast.h), per thread or per CPU.  One compare with 1 sends
 * each to its own path (front/fastpath.h); 0, the per-thread queues', is
 * what memory holds before start-up (their lookups then find qs_no_queue). */
enum { QS_FAST_THREAD, QS_FAST_CPU, QS_FAST_SLUB_THREAD, QS_FAST_SLUB_CPU };
extern int qs_owner_kind;
extern const char *qs_owner_why;
extern long qs_rseq_off;                 /* struct rseq at thread pointer + this */
#define QS_MAX_CACHES 65536           /* cache ids */
#define QS_PERCPU_IDS QS_MAX_CACHES  /* a CPU's table covers every cache id */
/* By cpu_id, [-2 .. qs_nr_cpu_ids): the CPU's queues by cache id (its
 * owner's `ids`), for the fast paths; -1 (a thread not registered yet) and
 * -2 (refused), and CPUs not used yet, hold qs_no_ids.  A table is 512 KiB
 * of address space, mapped zero: only the entries of cache ids in use are
 * written (qs_no_queue, or the CPU's queue), by qs_owner_cache_added when
 * a cache is made and by cpu_owner for the ids in use then, so only their
 * pages are touched; no fast path reads the entry of an id not in use. */
extern struct qs_queue ***qs_cpu_tables;
extern struct qs_owner **qs_cpu_owners; /* by cpu_id [0 .. qs_nr_cpu_ids): NULL until used */
extern int qs_nr_cpu_ids;               /* possible CPU ids */
extern bool qs_percpu_takeable;         /* membarrier works: qs_percpu_take */
static inline bool qs_percpu(void)
{
    return __builtin_expect(qs_owner_kind == QS_OWNER_CPU, 1);
}

/* ---- globals ---- */
extern int qs_nr_nodes;          /* nodes qslab uses (real or fake) */
extern bool qs_multi_node;       /* qs_nr_nodes > 1 */
extern bool qs_real_numa;        /* bind slabs with mbind */
extern __thread struct qs_owner qs_self __attribute__((tls_model("initial-exec")));
extern struct qs_queue qs_no_queue; /* "no queue" for the fast paths (slqb/fast.h; slab.c) */
/* Defined in core/caches.c (with the kmalloc classes' caches): the global lock; the
 * cache list, in creation order, and the live caches by id (qs_global;
 * linked and unlinked by the caches' set-up and destroy, api/cache.c);
 * start-up has run (stored with release by qs_init_slow; qs_init). */
extern qs_lock qs_global;
extern qslab_cache *qs_caches;
extern qslab_cache **qs_caches_tail; /* the last cache's next */
extern qslab_cache *qs_cache_by_id[QS_MAX_CACHES];
/* The first cache named `name` in the list, or NULL (takes qs_global); a
 * kmalloc class not made yet is made first (caches.c) */
qslab_cache *qs_cache_find(const char *name);
/* "kmalloc-N" (N all digits, up to the largest class): the name of the
 * class that serves a request of N bytes, written into buf[cap], for
 * messages; else NULL (caches.c) */
const char *qs_kmalloc_serving(const char *name, char *buf, size_t cap);
/* The class named name[0..len) ("kmalloc-1280"), or -1 */
int qs_kmalloc_class_named(const char *name, size_t len);
/* Does the pattern p[0..len) (a trailing '*': a prefix) name a class? */
bool qs_kmalloc_class_matches(const char *p, size_t len);
/* A class's name, "kmalloc-<bytes>", into buf[cap] (QS_NAME_MAX is enough) */
const char *qs_kmalloc_class_name(unsigned i, char *buf, size_t cap);
extern volatile int qs_initialized;

/* Start-up (qs_init, qs_init_slow) is the API layer's: api/api.h, START-UP. */

/* Off qs_caches (qs_global held): a cache destroyed, SLOB's arena */
static inline void qs_cache_unlist(qslab_cache *c)
{
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    else
        qs_caches_tail = c->pprev;
    c->next = NULL;
    c->pprev = NULL;
}

/* ---- report.c ---- */
struct qs_buf {
    char *p;
    size_t len, cap;
};
void qs_buf_str(struct qs_buf *b, const char *s);
void qs_buf_u64(struct qs_buf *b, uint64_t v);
void qs_buf_hex(struct qs_buf *b, uint64_t v); /* 0x... */
void qs_buf_pad(struct qs_buf *b, size_t upto, bool right_align, size_t from);
void qs_buf_putc(struct qs_buf *b, char c);
/* message builders: "%s" -> const char*, "%u" -> unsigned long, "%p" -> void* */
void qs_fatal(const char *fmt, ...);
void qs_warn(const char *fmt, ...);
void qs_vformat(struct qs_buf *b, const char *fmt, __builtin_va_list ap);
void qs_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
/* While b is set, qs_warn appends the calling thread's messages to b (each
 * "qslab: ...\n") instead of writing them to stderr; NULL restores stderr.
 * The control thread (observe/control_cmd.c) captures qslab_tune's
 * refusals and qslab_cache_validate's problems this way. */
struct qs_buf *qs_warn_capture(struct qs_buf *b); /* the one before */

qslab_fatal_fn qs_fatal_handler(void);  /* report.c: the user's, or NULL */
/* A boolean variable of the environment (report.c): 1 or 0, `dflt` when it
 * is unset or empty; any case of 1/0, yes/no, on/off, true/false, else one
 * line names the variable, the value and what is allowed, and says that
 * `what` stays as `dflt` has it. */
int qs_env_bool(const char *name, int dflt, const char *what);
/* Why a refused number of the environment is refused, before its range:
 * "empty; ", "not a number; ", or "" (a number out of range) */
const char *qs_env_why(const char *v);

/* ---- meta.c ---- */
void *qs_meta_alloc(size_t size); /* zeroed; NULL on ENOMEM */
void qs_meta_free(void *p, size_t size);
void qs_meta_lock_all(bool lock);

#include "core/page.h"

#include "core/slab.h"

#include "core/node.h"

#include "core/queue.h"

/* ---- the kmalloc classes (api/kmalloc.c) ---- */
#define QS_KMALLOC_CLASSES 193
#define QS_KMALLOC_MAX ((size_t)32 << 20)
/* The classes' caches (core/caches.c), each set up on its class's first
 * use (api/kmalloc.c qs_kmalloc_cache: cache id i for class i, reserved at
 * start-up; kmalloc-8 at start-up) in the next structure of
 * qs_kmalloc_store, so that the classes a program uses share few pages;
 * qs_kmalloc_cache_of[i] is that structure once it is complete (stored with
 * release), until then qs_kmalloc_unmade: all zero, read-only, on no list,
 * so that calloc's fast path, which reads a class's secret, needs no test
 * (api/kmalloc.h). */
extern qslab_cache qs_kmalloc_store[QS_KMALLOC_CLASSES];
extern const qslab_cache qs_kmalloc_unmade;
extern qslab_cache *qs_kmalloc_cache_of[QS_KMALLOC_CLASSES];
/* each class's object size, written by start-up (qs_kmalloc_init) */
extern uint32_t qs_kmalloc_bytes[QS_KMALLOC_CLASSES];

#include "core/large.h"

#pragma GCC visibility pop

#endif /* QSLAB_INTERNAL_H */
