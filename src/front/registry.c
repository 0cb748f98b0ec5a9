/*
 * registry.c - the front ends' registry, the top of the front layer: the
 * only file of the layer that names every module.  At start-up it puts
 * each front end's table into qs_fronts (front.c) and fills in the calls of
 * the layers below into the front ends (core/hooks.h qs_front_hooks): the
 * purger's tick (qs_front_tick, trim's too), an owner's exit, a queue
 * attached, a destroyed cache's queues.
 */
#include "front/front.h"
#include "core/hooks.h"

/* The purger's tick and malloc_trim's (front.h).  qs_global is held over
 * every cache, as it always was: per cache, its front end's `idle` hook on
 * each of its queues (SLQB's tries q->lock, under which it takes node
 * locks: qs_global, q->lock, node lock, the order of every slow path),
 * then core's policy on its nodes (each node lock alone); the slabs to go
 * back go after qs_global is released, then each front end's sweep, with
 * no lock held.  `now` is read once, before qs_global, for every node. */
size_t qs_front_tick(bool all)
{
    struct qs_slab *release = NULL;
    size_t bytes = 0;
    uint64_t now = qs_os_now_ms();
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        void (*idle)(qslab_cache *, struct qs_queue *) = qs_front_of(c)->idle;
        for (struct qs_queue *q = c->queues; q && idle; q = q->all_next)
            idle(c, q);
        bytes += qs_node_sweep_cache(c, all, now, &release);
    }
    qs_lock_release(&qs_global);
    bytes += qs_node_sweep_end(release, all);
    for (int f = 0; f < QS_FRONT_NR; f++) /* what the front ends keep of their own */
        if (qs_fronts[f]->sweep)
            bytes += qs_fronts[f]->sweep(all);
    /* the cached-memory cap (core/page.c): a keep whose walk found
     * qs_global busy left its estimate over the cap; the tick walks then */
    qs_page_cached_check();
    return bytes;
}

/* An owner's exit (owner/owner.c, qs_global held): the front end's own
 * per-owner state in q first (SLUB's active and partial slabs, SLAB's
 * alien arrays), then what every front end's queue holds (SLQB's
 * queue.c: SLAB's array goes back through its give_back). */
static void front_retire(qslab_cache *c, struct qs_queue *q)
{
    if (qs_front_of(c)->retire)
        qs_front_of(c)->retire(c, q);
    qs_queue_retire(c, q);
}

/* A queue attached to an owner (owner/owner.c, qs_global held): its
 * front end's knobs (front.h queue_knobs), or inert. */
static void front_attached(qslab_cache *c, struct qs_queue *q)
{
    if (qs_front_of(c)->queue_knobs)
        qs_front_of(c)->queue_knobs(c, q, true);
}

QS_STARTUP void qs_front_hooks_register(void)
{
    /* one entry each: [QS_FRONT_DEBUG] is the debug layer's, set before */
    qs_fronts[QS_FRONT_SLQB] = &qs_front_slqb;
    qs_fronts[QS_FRONT_SLOB] = &qs_front_slob;
    qs_fronts[QS_FRONT_SLUB] = &qs_front_slub;
    qs_fronts[QS_FRONT_SLAB] = &qs_front_slab;
    unsigned queues = 0;
    for (int f = 0; f < QS_FRONT_NR; f++)
        if (qs_fronts[f]->queues)
            queues |= 1u << f;
    qs_front_hooks = (struct qs_front_hooks){
        .tick = qs_front_tick,
        .retire = front_retire,
        .budget_drop = qs_queue_budget_drop,
        .attached = front_attached,
        .queues = queues,
    };
}
