/*
 * observe.c - the root structure for readers of this process from outside
 * (observe.h; tools/qslabinfo; docs/observability.md).  Everything in it is
 * constant from relocation on except `ready` (set once, at initialisation),
 * the generation (observe.h: bumped under qs_global where the cache list, a
 * queue list or an owner table changes), the front ends' names (at the
 * first cache) and the objects-per-slab table (written under qs_global at
 * create and tune).  Nothing here runs on an allocation or free path (the
 * seqlock's hooks only where a queue or a CPU's owner is made, and at a
 * thread's exit).
 */
#include "observe/observe.h"
#include "core/hooks.h"
#include "front/front.h"

/* Objects per slab by cache id: the one figure of a cache that depends on
 * its front end's code (SLAB's slab management, debug red zones). */
static QS_BSS_APART uint32_t obs_objs_per_slab[QS_MAX_CACHES];

/* Globals of other files the root points to (one line each there). */
extern void *const qs_large_counters;   /* core/large.c */
extern size_t *const qs_page_chunk_bytes; /* page.c */
extern size_t *const qs_page_slot_bytes;  /* page.c */
extern size_t *const qs_meta_mapped_bytes; /* meta.c */

#define QS_OBSERVE_OFF_(s, f) (uint32_t) offsetof(struct s, f),
QSLAB_EXPORT struct qs_observe_root qslab_observe_root = {
    .magic = QS_OBSERVE_MAGIC,
    .version = QS_OBSERVE_VERSION,
    .root_size = sizeof(struct qs_observe_root),
    .ptr_size = sizeof(void *),
    .stat_nr = QS_STAT_NR,
    .sizeof_cache = sizeof(struct qslab_cache),
    .sizeof_queue = sizeof(struct qs_queue),
    .sizeof_node = sizeof(struct qs_node),
    .sizeof_list = sizeof(struct qs_list),
    .sizeof_owner = sizeof(struct qs_owner),
    .sizeof_inbox = sizeof(struct qs_inbox),
    .max_caches = QS_MAX_CACHES,
    .max_nodes = QS_MAX_NODES,
    .page_shift = QS_PAGE_SHIFT,
    .name_max = QS_NAME_MAX,
    .front_nr = QS_FRONT_NR,
    .nr_offsets = QS_OBSERVE_NR_OFFSETS,
    .offsets = {QS_OBSERVE_OFFSETS(QS_OBSERVE_OFF_)},
    .caches = &qs_caches,
    .nr_nodes = &qs_nr_nodes,
    .owner_kind = &qs_owner_kind,
    .owner_why = &qs_owner_why,
    .cpu_owners = &qs_cpu_owners,
    .nr_cpu_ids = &qs_nr_cpu_ids,
    .front_default = &qs_front_default,
    .objs_per_slab = obs_objs_per_slab,
    .large = &qs_large_counters,
    .page_slab_bytes = &qs_page_slab_bytes,
    .page_chunk_bytes = &qs_page_chunk_bytes,
    .page_slot_bytes = &qs_page_slot_bytes,
    .page_warm_bytes = &qs_page_warm_bytes,
    .meta_mapped_bytes = &qs_meta_mapped_bytes,
    .slob_arena = &qs_slob_arena,
    .large_buckets = QS_LARGE_BUCKETS,
    .large_bucket_shift0 = QS_LARGE_BUCKET_SHIFT0,
    .sizeof_large = sizeof(struct qs_large_counters),
    .sizeof_pressure = sizeof(struct qs_pressure),
    .pressure = &qs_pressure,
    .sizeof_cached = sizeof(struct qs_cached),
    .cached = &qs_cached,
};

QS_STARTUP void qs_observe_ready(void)
{
    __atomic_store_n(&qslab_observe_root.ready, 1, __ATOMIC_RELEASE);
}

/* qs_observe_begin and end for the layers below (core/hooks.h) */
static void observe_begin_hook(void)
{
    qs_observe_begin();
}

static void observe_end_hook(void)
{
    qs_observe_end();
}

/* qs_init_slow, first thing: before any queue is attached or owner made,
 * so the owner layer never calls them while NULL (core/hooks.h) */
QS_STARTUP void qs_observe_hooks_register(void)
{
    qs_observe_hooks = (struct qs_observe_hooks){
        .begin = observe_begin_hook,
        .end = observe_end_hook,
    };
}

QS_STARTUP void qs_observe_cache(const qslab_cache *c)
{
    if (!qslab_observe_root.front_queues) /* once: the front ends' names and kinds */
        for (int f = 0; f < QS_FRONT_NR && f < QS_OBSERVE_FRONTS; f++) {
            const char *n = qs_fronts[f]->name;
            for (int i = 0; i < 7 && n[i]; i++)
                qslab_observe_root.front_names[f][i] = n[i];
            if (qs_fronts[f]->queues)
                qslab_observe_root.front_queues |= 1u << f;
        }
    if (c->id < QS_MAX_CACHES)
        QS_STORE(obs_objs_per_slab[c->id], qs_front_objs_per_slab(c, QS_LOAD(c->order)));
}
