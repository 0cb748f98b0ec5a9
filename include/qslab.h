/*
 * qslab - a user-space slab allocator in the SLQB tradition.
 *
 * Public API.  Two families:
 *   - object caches (qslab_cache_*): fixed-size objects, optional alignment and
 *     constructor, per-owner LIFO queues, remote-free batching;
 *   - a kmalloc-style general allocator (qslab_malloc & co): size classes
 *     kmalloc-8 .. kmalloc-32M served from caches, larger requests mapped
 *     directly.
 *
 * Every function is thread-safe.  qslab_free() accepts any pointer returned by
 * either family.  Bad pointers (not from qslab, interior pointers, double
 * frees, objects freed to the wrong cache) are reported through the fatal
 * handler, which by default prints one line on stderr and aborts.
 *
 * See docs/design.md for the data structures and the fast/slow paths.
 */
#ifndef QSLAB_H
#define QSLAB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QSLAB_VERSION_MAJOR 0
#define QSLAB_VERSION_MINOR 1

/* Cache flags (qslab_cache_create). */
#define QSLAB_HWCACHE_ALIGN 0x00002000UL /* align objects to the cache line */
/* Debugging (docs/debugging.md): SLUB's flags, also set per cache by the
 * environment (QSLAB_DEBUG, SLUB's slub_debug syntax).  A cache with any of
 * them is served by a checked slow path (no per-owner caching) and reports
 * misuse as "BUG <cache>: <what>" on stderr, then calls the fatal handler. */
#define QSLAB_CONSISTENCY_CHECKS 0x00000100UL /* F: checks on every alloc and free */
#define QSLAB_RED_ZONE      0x00000400UL /* Z: red zones on both sides of objects */
#define QSLAB_POISON        0x00000800UL /* P: free objects filled with 0x6b..0xa5 */
#define QSLAB_STORE_USER    0x00010000UL /* U: who allocated and freed each object */
#define QSLAB_TRACE         0x00200000UL /* T: every alloc and free to stderr */
#define QSLAB_DEBUG_REPAIR  0x01000000UL /* R: report, restore, count, go on */
#define QSLAB_QUARANTINE    0x02000000UL /* Q: freed objects zeroed, held back from reuse */

/* Node argument meaning "any node" (the caller's node). */
#define QSLAB_NUMA_NO_NODE (-1)

typedef struct qslab_cache qslab_cache;

/*
 * Create a cache of objects of `size` bytes aligned to `align` (0 = default,
 * 8 bytes; must otherwise be a power of two).  `ctor`, if not NULL, runs once
 * per object when its slab is created: objects come back from
 * qslab_cache_alloc in the state they were freed in, and the caller must free
 * them in their constructed state.  `name` is copied (at most 31 bytes kept).
 * Returns NULL with errno EINVAL (NULL name, size 0, bad alignment, unknown
 * flag) or ENOMEM.
 */
qslab_cache *qslab_cache_create(const char *name, size_t size, size_t align,
                                unsigned long flags, void (*ctor)(void *obj));
void *qslab_cache_alloc(qslab_cache *c);
/* Allocate from `node`'s memory (QSLAB_NUMA_NO_NODE: the caller's node).
 * NULL with EINVAL for a node that does not exist. */
void *qslab_cache_alloc_node(qslab_cache *c, int node);
void qslab_cache_free(qslab_cache *c, void *obj);
/* Flush the calling thread's queue and give every empty slab back to the OS.
 * Returns the number of bytes given back. */
size_t qslab_cache_shrink(qslab_cache *c);

/*
 * COOPERATIVE DEFRAGMENTATION.  After a program frees most of a population
 * at random, every slab keeps a few survivors and none can go back.  The
 * owner of a typed cache who can move its objects says so with
 * qslab_cache_set_mobility; then qslab_cache_shrink (and the purger, when
 * the cache's slabs hold more than twice its live objects, and under
 * memory pressure) picks the cache's sparsest slabs, turns away allocations
 * from them, and hands the owner the addresses of the objects in them that
 * may be live.  For each slab:
 *
 *   isolate(c, objs, n, arg)   objs[0..n): addresses of objects of c, or of
 *       its debug twin, that are not free as far as qslab can tell: most
 *       are the owner's live objects, but any may be free or another
 *       thread's in flight.  The owner keeps those it will move: it moves
 *       them to the front of objs and returns how many (0..n); the rest are
 *       declined.  It must recognise its objects by address without
 *       trusting their contents (an address may hold a free object's
 *       bytes), e.g. by a tag word it writes and clears with atomic stores
 *       under its own lock, or a lookup of the address in its own index.
 *   migrate(c, old, new, arg)  for each kept object, in order: new is a
 *       fresh object of c in a fuller slab (allocated as qslab_cache_alloc
 *       allocates: a constructed object of a constructor cache, the
 *       constructor is not run again).  The owner checks that old is still
 *       its live object (between isolate and migrate another thread of its
 *       own may have freed it, unless isolate pinned it), copies old into
 *       new, points every reference at new and returns 0: qslab then frees
 *       old itself (the owner must not free it, nor touch it again, and a
 *       constructor cache's old object is left in its constructed state, as
 *       for any free).  Any other return declines: qslab frees new, and old
 *       stays the owner's, untouched.
 *
 * Rules for the callbacks: they run in the thread that shrinks (or in
 * qslab's purger thread), with no qslab lock held; they may allocate and
 * free (of c too), and other threads may allocate from and free to c all
 * along.  Whatever excludes a free of old by the owner's other threads
 * during its move is the owner's (its lock around each migrate, or a
 * reference taken in isolate).  They must not call qslab_cache_shrink,
 * qslab_cache_set_mobility or qslab_cache_destroy on c (those wait for the
 * pass).  Objects that other owners' queues (per-thread owners) hold free
 * keep their slabs from emptying; slabs that do empty go back as any empty
 * slab does (qslab_cache_shrink gives them back at once).
 *
 * isolate may be NULL (every address is kept); migrate NULL turns mobility
 * off.  Returns 0, or -1 with errno EINVAL (NULL cache, a kmalloc cache or a
 * debug twin, isolate without migrate), with a line on stderr.  Under the
 * SLOB front end, whose pages every cache shares, the pass moves c's
 * objects off the pages less than three quarters in use, and a page goes
 * back once every cache's blocks have left it.  The counters are in struct
 * qslab_cache_stats (defrag_*).
 */
typedef size_t (*qslab_isolate_fn)(qslab_cache *c, void **objs, size_t n, void *arg);
typedef int (*qslab_migrate_fn)(qslab_cache *c, void *old_obj, void *new_obj, void *arg);
int qslab_cache_set_mobility(qslab_cache *c, qslab_isolate_fn isolate, qslab_migrate_fn migrate,
                             void *arg);
/* 0, or -1 with errno EBUSY when objects are still allocated (the cache is
 * then left intact and usable, and a report is printed on stderr).  The
 * destroyed cache's slabs stay resident for the next caches' slabs (warm: at
 * most 64 MiB in the process) and go back to the OS after a second unused,
 * or at qslab_trim. */
int qslab_cache_destroy(qslab_cache *c);

/* Flush the calling thread's queues and give every empty slab of every cache,
 * and every warm slab of destroyed caches, back to the OS (what malloc_trim
 * does).  Returns the bytes given back. */
size_t qslab_trim(void);

/* Name, object size (as asked) and slot size of a cache. */
const char *qslab_cache_name(const qslab_cache *c);
size_t qslab_cache_object_size(const qslab_cache *c);

/* qslab_malloc(0) and qslab_calloc of zero bytes return a block of size
 * zero: a pointer of its own that faults on any access (usable size 0),
 * which qslab_free and qslab_realloc take back. */
void *qslab_malloc(size_t size);
void *qslab_malloc_node(size_t size, int node);
void *qslab_calloc(size_t n, size_t size);
void *qslab_realloc(void *p, size_t size);
void *qslab_aligned_alloc(size_t align, size_t size);
void qslab_free(void *p); /* any qslab object, any cache; NULL is fine */
size_t qslab_usable_size(const void *p);

/*
 * Change a tunable of a cache at run time.  `cache` is a cache name or "*"
 * (every cache).  Attributes: order, hiwater, freebatch, empty_limit,
 * empty_decay_ms, stash_bytes (see docs/design.md), and front (a front end's
 * name, before the cache's first allocation; qslab_tune_get reads its number:
 * 0 slqb, 1 slob).  One attribute is the process's, named with "*" only:
 * owner_budget, the bytes each owner (a CPU, or a thread) may keep of free
 * objects and empty slabs in its queues and stashes over all its caches
 * (default: 16 MiB over the possible CPUs, 256 KiB to 4 MiB each;
 * qslab_budget_stats below), and cached_max, the cap on the empty slabs
 * kept for reuse (qslab_cached_stats below).  Returns 0, or -1 with
 * errno EINVAL (unknown cache or attribute, value not a number or out of
 * range; a message naming the allowed range is printed on stderr and
 * nothing is changed).
 * The same settings can be given at start-up in QSLAB_TUNE, e.g.
 *   QSLAB_TUNE="kmalloc-8192:order=3,hiwater=64;*:empty_decay_ms=500,owner_budget=524288"
 */
int qslab_tune(const char *cache, const char *attr, const char *value);
/* Read a tunable into *out; 0 or -1/EINVAL. */
int qslab_tune_get(const char *cache, const char *attr, unsigned long *out);

/* The owner budget (docs/design.md, "The owner budget"): what the owners
 * (CPUs, or threads) keep for their SLQB caches, read under the cache
 * list's lock at the time of the call. */
struct qslab_budget_stats {
    unsigned long budget;   /* bytes per owner (tunable owner_budget; with a cached-memory cap,
                               at most each owner's share of half the cap) */
    unsigned long owners;   /* owners with a queue */
    unsigned long used;     /* bytes granted to queues and stashes, all owners */
    unsigned long used_max; /* ... the most one owner has granted now */
    unsigned long peak_max; /* ... the most one owner (gone ones too) has ever had granted */
    unsigned long held_max; /* the most bytes one owner's queues and stashes hold now */
    unsigned long steals;   /* grants taken from a colder queue of the same owner */
    /* remote frees in transit: objects of other owners' slabs in an owner's
     * batches on their way home, reserved by each batch at its start */
    unsigned long transit_budget; /* bytes per owner: a quarter of budget, at least 16 KiB */
    unsigned long transit_max;    /* the most one owner has reserved now */
    unsigned long transit_peak;   /* ... the most one owner (gone ones too) ever had */
};
void qslab_budget_stats(struct qslab_budget_stats *st);

/* The cached-memory cap (docs/design.md, "The cached-memory cap"): a cap
 * on what qslab keeps that is not in use, set by QSLAB_CACHED_MAX=BYTES at
 * start-up, qslab_tune("*", "cached_max", "BYTES") or the control
 * channel's "set * cached_max BYTES" at any time; 0 (the default) is none,
 * and the retention rule and owner_budget alone bound what is kept.  Half
 * of it is for the empty slabs kept for reuse (the caches' FIFOs, warm
 * slots, SLOB's empty pages): a keep that takes them past it gives back
 * the oldest first, down to seven eighths of it.  The other half is the
 * owners': each one's budget (qslab_budget_stats) is at most its share. */
struct qslab_cached_stats {
    unsigned long max;       /* the cap, bytes; 0: none */
    unsigned long cached;    /* bytes of empty slabs kept now (FIFOs, stashes, warm slots) */
    unsigned long walks;     /* the cap's walks (a keep past it, or a cap set) */
    unsigned long cuts;      /* walks that gave memory back */
    unsigned long cut_bytes; /* the bytes they gave back */
};
void qslab_cached_stats(struct qslab_cached_stats *st);

/*
 * The control channel (docs/observability.md, "Control channel"): a Unix
 * stream socket through which `qslabinfo -p PID --set CACHE ATTR=VALUE`,
 * `--get`, `--shrink`, `--validate` and `--control-stats` steer this
 * process.  qslab_control_start() starts it (QSLAB_CONTROL=1 in the
 * environment does at start-up); it is served by one background thread
 * (all signals blocked) at
 *     DIR/<pid>.sock (mode 0600), DIR (mode 0700, the process's user's) being
 *     $QSLAB_CONTROL_DIR, else $XDG_RUNTIME_DIR/qslab, else /tmp/qslab-<euid>
 * and accepts peers of the process's effective uid, or root (SO_PEERCRED);
 * others get one line "error: refused: ..." and are disconnected.  Each
 * request must arrive whole within QSLAB_CONTROL_TIMEOUT_MS (default 5000).
 * The thread never holds a qslab lock while it talks to a peer: a peer can
 * never block the program's allocations.  A child made by fork() serves
 * nothing (not its parent's socket) until it calls qslab_control_start().
 * Returns 0 (also when it runs already), or -1 with errno (the directory is
 * not private, the socket cannot be made...; a message on stderr says why).
 */
int qslab_control_start(void);
/* Stop the thread and remove the socket (exit does it too).  0, or -1 with
 * errno ENOENT when the channel does not run. */
int qslab_control_stop(void);

/* /proc/slabinfo (version 2.1) text for every cache, written to fd. */
void qslab_slabinfo(int fd);
/* SLUB `slabinfo -AD` style activity report (Name Objects Alloc Free %Fast). */
void qslab_stats_report(int fd);

/* Statistics of one cache, summed over every owner at the time of the call. */
struct qslab_cache_stats {
    unsigned long alloc;        /* objects handed out */
    unsigned long alloc_fast;   /* ... straight from the owner's queue */
    unsigned long alloc_slow;   /* ... after a refill */
    unsigned long free;         /* objects given back */
    unsigned long free_fast;    /* ... pushed on the owner's queue */
    unsigned long free_slow;    /* ... through a slow path (remote node) */
    unsigned long flush;        /* queue flushes over hiwater */
    unsigned long remote_free;  /* objects sent to another owner */
    unsigned long remote_batch; /* batches sent (one lock each) */
    unsigned long claim;        /* remote batches claimed by owners */
    unsigned long refill;       /* queue refills from slabs */
    unsigned long new_slab;     /* slabs taken from the page layer */
    unsigned long free_slab;    /* slabs given back to the page layer */
    unsigned long node_alloc;   /* allocations served from a node list */
    unsigned long active_objs;  /* alloc - free */
    unsigned long num_objs;     /* objects in all slabs */
    unsigned long num_slabs;    /* slabs held (including empty ones) */
    unsigned long empty_slabs;  /* empty slabs kept for reuse */
    size_t object_size;         /* size asked for at create */
    size_t slot_size;           /* bytes per object in a slab */
    unsigned objs_per_slab, order;
    unsigned long queued_objs;  /* free objects held in queues and inboxes */
    /* ---- since layout 2 of this struct (qslab 0.2) ---- */
    unsigned long partial_slabs; /* slabs with both free and allocated objects */
    unsigned long owner_slabs;   /* slabs held by owners (CPUs, threads) */
    unsigned long nr_queues;     /* queues: one per CPU or thread that used the cache */
    size_t slab_bytes;           /* bytes of one slab (4 KiB << order) */
    size_t metadata_bytes;       /* the cache's descriptor, nodes, queues and their slots */
    /* ---- since layout 3 (cooperative defragmentation) ---- */
    unsigned long defrag_passes;   /* defragmentation passes run on the cache */
    unsigned long defrag_moved;    /* objects its owner moved out of sparse slabs */
    unsigned long defrag_declined; /* objects offered and declined (isolate or migrate) */
    unsigned long defrag_slabs;    /* sparse slabs (SLOB: pages) that the passes emptied and gave back */
};
/* Fill the first `size` bytes of *st for cache `c` (size: the caller's
 * sizeof(struct qslab_cache_stats)); 0, or -1/EINVAL for NULL arguments or
 * a size smaller than the first layout's.  ABI: struct qslab_cache_stats
 * only ever grows at its end, so a program built against an older qslab.h
 * passes its smaller size and gets exactly its fields; one built against a
 * newer header than the library gets the fields the library knows and
 * zeros after them.  qslab_cache_stats(c, st) is a macro passing
 * sizeof *st; the function of that name (programs built before the macro
 * call it) fills the first layout's fields only. */
int qslab_cache_stats_size(qslab_cache *c, struct qslab_cache_stats *st, size_t size);
int qslab_cache_stats(qslab_cache *c, struct qslab_cache_stats *st);
#define qslab_cache_stats(c, st) qslab_cache_stats_size((c), (st), sizeof *(st))
/* Every counter of the process's qslab as one JSON document written to fd
 * (with write(2); no allocation): the process, each cache (the keys of
 * `qslabinfo --json`'s caches), the large allocations, the guard pool and
 * totals.  docs/observability.md describes the keys.  0, or -1/EBADF for a
 * negative fd. */
int qslab_stats_json(int fd);
/* Check every invariant of a cache that no thread is using right now
 * (slab counts, free lists, queues, inboxes, totals).  0, or -1 after
 * printing one line per problem on stderr. */
int qslab_cache_validate(qslab_cache *c);
/* SLUB's alloc_calls and free_calls for a cache with owner tracking
 * (QSLAB_STORE_USER, or U in QSLAB_DEBUG): the objects allocated (freed),
 * grouped by call site with counts, written to fd.  Returns the number of
 * call sites, or -1 with errno EINVAL (no tracking). */
int qslab_cache_alloc_calls(qslab_cache *c, int fd);
int qslab_cache_free_calls(qslab_cache *c, int fd);
/* Look a cache up by name (kmalloc-<size> names included: a class's cache,
 * set up on the class's first use, is set up then); NULL if none. */
qslab_cache *qslab_cache_find(const char *name);

/* The front end serving a cache: "slqb" (per-owner queues, the default) or
 * "slob" (first-fit in pages shared by every cache, no per-owner caching:
 * the smallest footprint).  QSLAB_FRONT=<name> chooses for every cache of
 * the process; the tunable `front` (qslab_tune(cache, "front", "slob"), or
 * QSLAB_TUNE="cache:front=slob") for one cache before its first
 * allocation.  NULL for a NULL cache.  See docs/fronts.md. */
const char *qslab_cache_front(const qslab_cache *c);

/* Who owns the object queues: a CPU (SLQB's owner, through Linux
 * restartable sequences) or a thread.  QSLAB_OWNER=cpu|thread chooses at
 * start-up; the default is cpu where rseq works.  `why` says which is in
 * force and why (a static string). */
enum { QSLAB_OWNER_THREAD = 0, QSLAB_OWNER_CPU = 1 };
struct qslab_owner_info {
    int kind;                  /* QSLAB_OWNER_* */
    const char *why;
    int nr_cpu_ids;            /* CPU ids the per-CPU tables cover (0: thread owner) */
    unsigned long rseq_aborts; /* the calling thread's critical sections the
                                  kernel restarted (preemption, migration,
                                  signals) */
};
void qslab_owner_info(struct qslab_owner_info *info);

/* Large (directly mapped, over 32 MiB) allocations. */
struct qslab_large_stats {
    unsigned long alloc, free, live;
    size_t live_bytes; /* mapped bytes of live large allocations */
};
void qslab_large_stats(struct qslab_large_stats *st);

/* Sampled guarded allocations (QSLAB_GUARD_SAMPLE=N: docs/debugging.md). */
struct qslab_guard_stats {
    unsigned long rate;      /* N (one allocation in about N); 0: off */
    unsigned long slots;     /* the pool's slots (QSLAB_GUARD_SLOTS) */
    unsigned long samples;   /* allocations placed in the pool */
    unsigned long pool_full; /* samples not taken: every slot was live */
    unsigned long frees;     /* samples freed */
    unsigned long live;      /* samples allocated now */
    unsigned long faults;    /* accesses to the pool that faulted */
};
void qslab_guard_stats(struct qslab_guard_stats *st);
/* 1 if p is a live guarded sample (its object in the guard pool). */
int qslab_guarded(const void *p);

/*
 * Fatal error handler: called with a one-line message (no trailing newline)
 * when a bad pointer or corruption is found.  The default writes the message
 * to stderr and aborts.  A handler that returns makes the offending call do
 * nothing (a bad free is ignored, an allocation returns NULL).  Passing NULL
 * restores the default.  Returns the previous handler.
 */
typedef void (*qslab_fatal_fn)(const char *msg);
qslab_fatal_fn qslab_set_fatal_handler(qslab_fatal_fn fn);

/*
 * The hardened profile (docs/debugging.md), for programs that face
 * untrusted input, as QSLAB_HARDEN=1 gives it from the start: red zones and
 * a quarantine (freed objects zeroed and held back from reuse, checked when
 * reused) on the caches made from now on, and on every cache in use
 * through a debug twin (its new objects are checked; the objects it handed
 * out before are not).  Caches made with debug flags keep theirs.  Returns
 * 0, or -1 (errno EINVAL or ENOMEM, and a line on stderr) if a cache could
 * not get its twin.  Not while other threads create or destroy caches.
 */
int qslab_harden(void);

/* Number of NUMA nodes qslab sees (real, or fake with QSLAB_FAKE_NUMA=N). */
int qslab_num_nodes(void);
/* Node of the calling thread's queues. */
int qslab_current_node(void);
/* Node whose memory holds p (0 for a block of size zero, which holds
 * none), or -1 if p is not a qslab object. */
int qslab_object_node(const void *p);

/*
 * Bad sizes and alignments.  qslab_aligned_alloc takes a power of two from 1
 * to QSLAB_MAX_ALIGN (the largest alignment a directly mapped block can be
 * given); any other alignment (0, 3, 24, ...) is refused with NULL and
 * errno EINVAL.  A size no block can have (over 2^46 - 4096 bytes, the
 * largest mapping; an overflowing qslab_calloc) gives NULL with ENOMEM.
 */
#define QSLAB_MAX_ALIGN ((size_t)1 << 45)

/*
 * qslab_free_sized(p, size): qslab_free(p) for a caller that knows the
 * size it asked for (C23's free_sized; the malloc drop-in's free_sized).
 * The size is checked, cheaply, against the object: it must be one a
 * request for that object could have named, i.e. its kmalloc class is the
 * object's cache, or it is one qslab_realloc would have kept the object for
 * (over half of its usable size, or any size for a block of up to 16
 * bytes); for a large block, a size over 32 MiB whose mapping is the
 * block's, or one realloc kept it for.  A mismatch is reported through the
 * fatal handler ("free_sized of 0x... with size 100: the object is in cache
 * kmalloc-64 (sizes 33..64)") and, if the handler returns, p is not freed.
 * NULL is fine; a bad pointer is reported as qslab_free reports it.
 */
void qslab_free_sized(void *p, size_t size);

/*
 * Fault injection, for tests: make the nth request for memory from the OS,
 * counted from this call, fail as if the kernel had said ENOMEM (the call
 * that needed it returns NULL with errno ENOMEM, or does what its
 * documentation says it does without the memory).  Requests are counted per
 * kind: requests for memory (mmap, mremap growths: slabs, large blocks,
 * qslab's own structures), or with QSLAB_FAULT_RELEASE memory given back
 * (madvise(MADV_DONTNEED), munmap), whose refusals qslab survives by keeping
 * the memory (counted on the "Pages:" line of qslab_stats_report).  With
 * QSLAB_FAULT_EVERY, every nth request from now on fails, not just the nth.
 * nth 0 disarms that kind.  Returns 0, or -1 with errno EINVAL for an
 * unknown flag.  The environment arms it at start-up, counting from the
 * process's first request: QSLAB_FAIL_NTH=N[,every][,release].
 */
#define QSLAB_FAULT_MAP     0x0u /* requests for memory (the default) */
#define QSLAB_FAULT_RELEASE 0x1u /* give-backs: decommits and unmaps */
#define QSLAB_FAULT_EVERY   0x2u /* every nth request, not only the nth */
int qslab_fault_inject(unsigned long nth, unsigned flags);
/* Failures injected so far, in the life of the process, of one kind
 * (QSLAB_FAULT_MAP or QSLAB_FAULT_RELEASE; other flags are ignored). */
unsigned long qslab_fault_injected(unsigned flags);

#ifdef __cplusplus
}
#endif
#endif /* QSLAB_H */
