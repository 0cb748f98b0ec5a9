/*
 * observe.h - the root structure through which a process's qslab counters
 * are read from outside (tools/qslabinfo: docs/observability.md), with no
 * opt-in.  Shared by the library (src/observe/observe.c) and the reader.
 *
 * The library defines one global object, `qslab_observe_root` (default
 * visibility: in the dynamic symbol table of libqslab.so and
 * libqslab-malloc.so, in .symtab of an executable linked with libqslab.a
 * that kept its symbols).  A reader finds its address through the ELF
 * symbols of the mapped object, reads it with process_vm_readv, checks
 * magic, layout version, pointer size, the sizes of every structure it
 * follows and the offsets of every field it reads (`offsets`, compared with
 * its own), then follows the addresses below.
 *
 * LAYOUT VERSION.  QS_OBSERVE_VERSION is bumped whenever the root changes,
 * or any structure or field the reader follows changes in size, place or
 * meaning (struct qslab_cache, qs_queue, qs_node, qs_list, qs_owner, the
 * statistics items QS_STAT_*, the front-end numbering).  A change the
 * sizes and offsets catch by themselves still gets a bump: the version is
 * the contract, the fingerprint a safety net.  A reader refuses (exit 2)
 * any root whose version is not its own.
 *
 * GENERATION (seqlock, writers under qs_global): odd while the cache list,
 * a cache's queue list or an owner table changes (cache create and destroy,
 * a queue made or retired, a CPU owner made, a thread's exit); even and
 * bumped once more after.  The counters themselves are read racily, as
 * /proc/slabinfo reads the kernel's.  See docs/design.md, "Reading a
 * process from outside".
 */
#ifndef QSLAB_OBSERVE_H
#define QSLAB_OBSERVE_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

#define QS_OBSERVE_MAGIC 0x5652455342534c51ULL /* "QSLBSERV" little-endian */
#define QS_OBSERVE_VERSION 14u /* 2: large buckets, queue nodes, owners' thread ids;
                               * 3: the page layer's chunks and the metadata's mappings;
                               * 4: `ready`; 5: the page layer's warm slots;
                               * 6: 177 kmalloc classes, qs_owner's budget;
                               * 7: qslab_cache's report scratch (report_act);
                               * 8: 193 kmalloc classes, 88 fixed queue slots;
                               * 9: qs_queue's adopt_top;
                               * 10: memory pressure's counters;
                               * 11: the cached-memory cap's;
                               * 12: a cache's defragmentation counters;
                               * 13: the nodes' event counters;
                               * 14: the empty FIFO's homes' counts */
#define QS_OBSERVE_FRONTS 8 /* room for front-end names */

/* The fields the reader reads, by offset: the fingerprint both sides
 * compute (QS_OBSERVE_OFFSETS(X): X(struct, field)). */
#define QS_OBSERVE_OFFSETS(X)                                                                      \
    X(qslab_cache, id) X(qslab_cache, slot_size) X(qslab_cache, hiwater)                           \
    X(qslab_cache, freebatch) X(qslab_cache, obj_size) X(qslab_cache, align)                       \
    X(qslab_cache, flags) X(qslab_cache, order) X(qslab_cache, slab_limit)                         \
    X(qslab_cache, slab_batch) X(qslab_cache, slab_shared) X(qslab_cache, is_kmalloc)              \
    X(qslab_cache, front) X(qslab_cache, debug) X(qslab_cache, ctor) X(qslab_cache, name)          \
    X(qslab_cache, nodes) X(qslab_cache, queues) X(qslab_cache, orphan_stat)                       \
    X(qslab_cache, next) X(qs_queue, top) X(qs_queue, fb) X(qs_queue, fb_base)                     \
    X(qs_queue, stat) X(qs_queue, list) X(qs_queue, nr_stash) X(qs_queue, moved)                   \
    X(qs_queue, nr_seq) X(qs_queue, pops_seen) X(qs_queue, pops_raw) X(qs_queue, inbox)            \
    X(qs_queue, cap) X(qs_queue, owner) X(qs_queue, all_next) X(qs_queue, sl)                      \
    X(qs_queue, cpu) X(qs_node, list) X(qs_node, fifo) X(qs_node, nr_free_slabs)               \
    X(qs_node, shared_avail) X(qs_list, nr_partial) X(qs_list, nr_full) X(qs_inbox, nr)          \
    X(qs_queue, node) X(qs_owner, cpu) X(qs_owner, tid) X(qs_large_counters, bucket)              \
    X(qslab_cache, defrag_passes) X(qslab_cache, defrag_moved) X(qslab_cache, defrag_declined)     \
    X(qslab_cache, defrag_slabs) X(qs_node, ev)
#define QS_OBSERVE_COUNT_(s, f) +1
enum { QS_OBSERVE_NR_OFFSETS = 0 QS_OBSERVE_OFFSETS(QS_OBSERVE_COUNT_) };

struct qs_observe_root {
    uint64_t magic;             /* QS_OBSERVE_MAGIC */
    uint32_t version;           /* QS_OBSERVE_VERSION */
    uint32_t root_size;         /* sizeof(struct qs_observe_root) */
    uint32_t ptr_size;          /* sizeof(void *) */
    uint32_t stat_nr;           /* QS_STAT_NR */
    /* sizeof of every structure the reader follows */
    uint32_t sizeof_cache, sizeof_queue, sizeof_node, sizeof_list, sizeof_owner, sizeof_inbox;
    uint32_t max_caches;        /* QS_MAX_CACHES: ids, the objs_per_slab table */
    uint32_t max_nodes;         /* QS_MAX_NODES */
    uint32_t page_shift;        /* QS_PAGE_SHIFT */
    uint32_t name_max;          /* QS_NAME_MAX */
    uint32_t front_nr;          /* QS_FRONT_NR */
    uint32_t nr_offsets;        /* QS_OBSERVE_NR_OFFSETS */
    uint32_t offsets[QS_OBSERVE_NR_OFFSETS];
    /* the seqlock (above): written under qs_global, read from outside */
    unsigned long generation;
    /* addresses, in the target */
    qslab_cache *const *caches;        /* &qs_caches: the list head */
    const int *nr_nodes;               /* &qs_nr_nodes */
    const int *owner_kind;             /* &qs_owner_kind (QS_OWNER_*) */
    const char *const *owner_why;      /* &qs_owner_why */
    struct qs_owner **const *cpu_owners; /* &qs_cpu_owners: [nr_cpu_ids] */
    const int *nr_cpu_ids;             /* &qs_nr_cpu_ids */
    const int *front_default;          /* &qs_front_default */
    const uint32_t *objs_per_slab;     /* [max_caches], by cache id */
    void *const *large;                /* -> core/large.c's qs_large */
    size_t *const *page_slab_bytes;    /* -> page.c's bytes of slabs handed out */
    size_t *const *page_chunk_bytes;   /* -> page.c's bytes of slab chunks mapped */
    size_t *const *page_slot_bytes;    /* -> page.c's bytes of those chunks' slots */
    size_t *const *page_warm_bytes;    /* -> warm.c's bytes of warm slots (resident) */
    size_t *const *meta_mapped_bytes;  /* -> meta.c's bytes mapped for metadata */
    const qslab_cache *slob_arena;     /* SLOB's pages (in no cache list) */
    uint32_t front_queues;             /* bit f: front end f's owners have queues */
    uint32_t large_buckets;            /* QS_LARGE_BUCKETS */
    uint32_t large_bucket_shift0;      /* QS_LARGE_BUCKET_SHIFT0 */
    uint32_t sizeof_large;             /* sizeof(struct qs_large_counters) */
    uint32_t sizeof_pressure;          /* sizeof(struct qs_pressure) */
    const struct qs_pressure *pressure; /* &qs_pressure (core/pressure.c) */
    uint32_t sizeof_cached;            /* sizeof(struct qs_cached) */
    const struct qs_cached *cached;    /* &qs_cached (core/warm.c: the cached-memory cap) */
    /* 0 until the library's initialisation (qs_init_slow, from its
     * constructor or its first call) has run, then 1 for good.  The
     * addresses above are link-time values until the dynamic loader has
     * relocated the library, and a reader can find the library mapped
     * before that (a process starting); no code of an object runs before
     * its relocation, so once this is 1 they hold.  And what they point to
     * is made by that initialisation (the kmalloc caches, SLOB's arena,
     * which is in no cache list and so under no generation): set last, so
     * that a reader never follows one half made.  The reader waits for it
     * (tools/reader.c, snapshot). */
    uint32_t ready;
    char front_names[QS_OBSERVE_FRONTS][8];
};

/* ---- observe.c (hooks; the caller holds qs_global) ---- */
extern QSLAB_EXPORT struct qs_observe_root qslab_observe_root;
/* Open (odd) and close (even) a change of the cache list, a queue list or
 * an owner table. */
static inline void qs_observe_begin(void)
{
    /* a locked add: a full barrier, so the list stores that follow are
     * seen after the odd value (one writer: qs_global) */
    __atomic_fetch_add(&qslab_observe_root.generation, 1, __ATOMIC_SEQ_CST);
}
static inline void qs_observe_end(void)
{
    __atomic_store_n(&qslab_observe_root.generation, qslab_observe_root.generation + 1,
                     __ATOMIC_RELEASE);
}
/* The library runs, so it is relocated: the root's addresses hold
 * (`ready`; qs_init_slow, first thing). */
void qs_observe_ready(void);
/* Fill qs_observe_hooks (core/hooks.h: qs_observe_begin and end for the
 * owner layer): qs_init_slow, first thing */
void qs_observe_hooks_register(void);
/* Publish what the reader cannot compute for cache c (objects per slab of
 * its front end at its order): at create, and after every tune. */
void qs_observe_cache(const qslab_cache *c);

#pragma GCC visibility pop

#endif /* QSLAB_OBSERVE_H */
