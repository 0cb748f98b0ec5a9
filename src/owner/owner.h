/*
 * owner/owner.h - who owns a queue (owner.c): making owners, attaching a
 * cache's queue to the caller's owner, the owner the caller would use now,
 * a queue's slots.
 */
#ifndef QSLAB_OWNER_H
#define QSLAB_OWNER_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- owner.c ---- */
struct qs_queue *qs_queue_attach(qslab_cache *c); /* the caller's queue, made if needed */
void qs_owner_init(void);
void qs_owner_detach_cache(qslab_cache *c); /* destroy: clear owners' slots (qs_global held) */
void qs_owner_kind_init(void);              /* start-up: QSLAB_OWNER, rseq */
void qs_owner_cache_added(unsigned id);     /* qs_global held: ids up to id in use */
int qs_owner_cpu(void);                     /* the caller's CPU (registering rseq), or -1 */
int qs_owner_current_node(void);            /* qslab_current_node's answer */
/* The node the caller allocates on without a queue: its CPU's (per-CPU
 * owners), its thread's (a thread whose owner was set up, also after its
 * exit), else its CPU's; never sets an owner up (qs_owner_current_node
 * does, which a thread past its exit must not) */
int qs_owner_node_now(void);
/* The owners whose budgets share the cached-memory cap (front/slqb/budget.c):
 * the possible CPUs with per-CPU owners, else the threads that have an
 * owner now (made at a thread's first queue, gone at its exit) */
unsigned long qs_owners_sharing(void);
void qs_owners_forked(void); /* fork's child: its one thread's owner, if it has one */
void qs_owner_info(struct qslab_owner_info *info); /* qslab_owner_info's */
/* A queue's slots: room for n more (grown plainly: a thread's queue, or
 * one nobody else sees yet); grown by a section on q's CPU (in_section:
 * q->lock held, cpu.c qs_percpu_reserve); freed (destroy) */
bool qs_queue_reserve(struct qs_queue *q, unsigned n);
bool qs_queue_slots_grow(struct qs_queue *q, unsigned n, bool in_section);
void qs_queue_free_slots(struct qs_queue *q);


/* Set the caller's (or an owner's) queue of cache id (qs_global held). */
static inline void qs_owner_set_slot(struct qs_owner *o, unsigned id, struct qs_queue *q)
{
    __atomic_store_n(&o->slots[id], q, __ATOMIC_RELEASE);
    if (id < QS_FIXED_SLOTS)
        __atomic_store_n(&o->fixed[id], q ? q : &qs_no_queue, __ATOMIC_RELEASE);
    if (o->ids && id < QS_PERCPU_IDS)
        __atomic_store_n(&o->ids[id], q ? q : &qs_no_queue, __ATOMIC_RELEASE);
}

/* The caller's queue for the cache with id `id`, for the fast paths: never
 * NULL.  A thread without a queue for the cache gets qs_no_queue, which is
 * always empty (alloc goes to its slow path) and owns no slab (free goes to
 * qs_free_remote, which hands it to qs_free_slow): one test fewer on both
 * paths.  Nobody writes to qs_no_queue. */
_Static_assert(65 <= QS_FIXED_SLOTS, "kmalloc queues up to 4 KiB at fixed TLS offsets");
static inline struct qs_queue *qs_queue_fast(unsigned long id)
{
    struct qs_owner *o = &qs_self;
    if (likely(id < QS_FIXED_SLOTS))
        return o->fixed[id];
    if (id < o->cap && o->slots[id])
        return o->slots[id];
    return &qs_no_queue;
}

/* The owner the caller would use now: its CPU's (NULL if that CPU has none
 * yet, or the thread has no rseq registration) or its thread's. */
static inline struct qs_owner *qs_owner_now(void)
{
    if (qs_percpu()) {
        int cpu = qs_os_rseq_cpu(qs_rseq_off);
        return cpu >= 0 && cpu < qs_nr_cpu_ids ? __atomic_load_n(&qs_cpu_owners[cpu], __ATOMIC_ACQUIRE)
                                                : NULL;
    }
    return &qs_self;
}

/* The caller's queue for the cache with id `id` (its thread's, or its
 * CPU's at this moment), or NULL if it has none: for the slow paths. */
static inline struct qs_queue *qs_queue_of_id(unsigned id)
{
    if (qs_percpu()) {
        struct qs_owner *o = qs_owner_now();
        if (!o || id >= __atomic_load_n(&o->cap, __ATOMIC_ACQUIRE))
            return NULL;
        struct qs_queue **slots = __atomic_load_n(&o->slots, __ATOMIC_ACQUIRE);
        return __atomic_load_n(&slots[id], __ATOMIC_ACQUIRE);
    }
    struct qs_queue *q = qs_queue_fast(id);
    return q == &qs_no_queue ? NULL : q;
}

static inline struct qs_queue *qs_queue_of(const qslab_cache *c)
{
    return qs_queue_of_id(c->id);
}

#pragma GCC visibility pop

#endif /* QSLAB_OWNER_H */
