/*
 * core/node.h - NUMA topology and the per-(cache, node) lists (node.c): the
 * empty-slab FIFO, the purger, objects of node-owned slabs.  Part of
 * core/internal.h, which includes it where the types it needs are defined.
 */
#ifndef QSLAB_CORE_NODE_H
#define QSLAB_CORE_NODE_H

#ifndef QSLAB_INTERNAL_H
#error "core/node.h is part of core/internal.h: include that"
#endif

/* ---- node.c ---- */
void qs_node_topology_init(void);
int qs_node_of_cpu(int cpu);
void qs_node_init(struct qs_node *n, int id);
/* Put empty slabs (linked by ->next) on node n's FIFO; release by policy.
 * The _locked form for a caller that may hold n->lock: the slabs the
 * policy takes are pushed on *release, for qs_node_release_list once
 * unlocked; true if the FIFO keeps slabs. */
void qs_node_put_empty(qslab_cache *c, struct qs_queue *q, struct qs_node *n, struct qs_slab *list);
bool qs_node_put_empty_locked(qslab_cache *c, struct qs_node *n, struct qs_slab *list,
                              struct qs_slab **release);
/* Take slabs with free objects from node n into q's ownership (returned as
 * a list linked by ->next).  Takes partial slabs, then empty ones. */
struct qs_slab *qs_node_take(qslab_cache *c, struct qs_queue *q, struct qs_node *n, unsigned want);
void qs_node_release_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *list, size_t *bytes);
/* Every slab of n's FIFO, detached: a ->next list (no FIFO lock held;
 * n->lock may be) */
struct qs_slab *qs_node_fifo_detach(struct qs_node *n);
/* Every home's lock of n's FIFO, and their release (node.c, LOCKS: after
 * n->lock if that is held) */
void qs_node_fifo_lock(struct qs_node *n);
void qs_node_fifo_unlock(struct qs_node *n);
/* The empty slab a take from n on this CPU would have next (NULL: none; a
 * quiet cache: tests) */
struct qs_slab *qs_node_fifo_peek(const struct qs_node *n);
/* Every slab s of n's empty FIFO, home by home (qs_node_fifo_lock held;
 * no break) */
#define QS_FIFO_FOR_EACH(n, s)                                                                     \
    for (int fh_ = 0; fh_ < QS_FIFO_HOMES; fh_++)                                                  \
        for (struct qs_slab *s = (n)->fifo[fh_].head; s; s = s->next)
extern unsigned long *const qs_node_reclaims; /* node.c's retention reclaims (atomic) */
#define QS_BIG_EMPTY_ORDER 6 /* 256 KiB slabs and up: big empties (node.c node_reclaim) */
extern unsigned long *const qs_node_big_cuts; /* big empty slabs given back by a walk (atomic) */
extern unsigned long *const qs_node_walks;    /* node_reclaim's walks (a step of growth each) */
extern uint64_t *const qs_node_cut_rate;     /* CYCLING's rate, bytes a second (node.c) */
#define QS_CUT_HOLD_MS 1000                  /* CYCLING's hold after a cut (node.c) */
size_t qs_node_shrink(qslab_cache *c, struct qs_queue *q, struct qs_node *n);
/* Bytes of empty slabs kept now: every FIFO's and stash's, and the warm
 * slots (takes qs_global; the statistics' "Cached:" figure) */
size_t qs_node_cached_bytes(void);
/* The newest empty slab of n's FIFO, taken off it (NULL: none). */
struct qs_slab *qs_node_take_empty(struct qs_node *n);
/* The purger's tick and malloc_trim, core's part (the tick is the front
 * layer's: front/registry.c qs_front_tick): c's nodes' empty slabs by the
 * policy at `now` (all: every one), those to go back pushed on *release,
 * bytes kept warm (qs_global held); then, qs_global released, *release's
 * slabs given back: bytes. */
size_t qs_node_sweep_cache(qslab_cache *c, bool all, uint64_t now, struct qs_slab **release);
size_t qs_node_sweep_end(struct qs_slab *release, bool all);
void qs_node_purger_forked(void);
void qs_node_purger_start(void);
void qs_node_purger_start_wanted(void);
extern int qs_purger_wanted; /* a purger is wanted and none runs yet */
void qs_purger_kick(void);
void qs_node_purger_want(void); /* record the wish (any context) */
/* At a point where starting a thread is safe (see node.c): start the
 * purger if it is wanted. */
static inline void qs_purger_check(void)
{
    if (unlikely(__atomic_load_n(&qs_purger_wanted, __ATOMIC_RELAXED)))
        qs_purger_kick();
}
void *qs_node_alloc(qslab_cache *c, struct qs_queue *q, int node);
/* Free obj of node-owned slab s (a cache without owners: debug.c) */
void qs_node_free(qslab_cache *c, struct qs_slab *s, void *obj);
/* ... without the debug checks: obj passed them at its free, and leaves
 * the debug layer's quarantine now (debug/quarantine.c) */
void qs_node_put(qslab_cache *c, struct qs_slab *s, void *obj);

/* ---- pressure.c: memory pressure, heard by the purger's thread ---- */
#define QS_PRESSURE_PATH 512 /* a cgroup directory's path, at most */
#define QS_PRESSURE_TEXT 640
struct qs_pressure {
    /* one writer (the purger), relaxed; read by anyone (pressure.c) */
    unsigned long events, event_bytes;   /* PSI events, the bytes their trims gave back */
    unsigned long high_trims, high_bytes; /* trims near the cgroup's limit, their bytes */
    unsigned long trim_ms_max;           /* the longest of those trims, ms */
    unsigned long limit;                 /* the limit watched (bytes), 0 none */
    unsigned cur;                        /* text[cur & 1] is the published one */
    /* "cgroup DIR (TRIGGER)" | "system (TRIGGER; cgroup: WHY)" | "none (WHY)",
     * then "; limit memory.high N of DIR" when there is one */
    char text[2][QS_PRESSURE_TEXT];
};
extern struct qs_pressure qs_pressure;
/* Tests (tests/unit/pressure.c) point the sources elsewhere before the
 * purger starts: directories standing for the cgroup v2 and the cgroup v1
 * memory controller's cgroup, a file for the system's PSI; NULL: the
 * process's own. */
struct qs_pressure_paths {
    const char *cgroup, *v1, *system;
};
extern struct qs_pressure_paths qs_pressure_paths;
void qs_pressure_init(bool purge_on); /* start-up: QSLAB_PRESSURE */
void qs_pressure_open(void);          /* the purger's start: pick the source */
void qs_pressure_wait(unsigned ms);   /* the purger's sleep; an event trims at once */
void qs_pressure_tick(void);          /* after each tick: the cgroup's limit */
const char *qs_pressure_text(void);   /* the published text (any thread) */

#endif /* QSLAB_CORE_NODE_H */
