/*
 * front.c - the front ends' registry and their selection (front.h).
 *
 * QSLAB_FRONT=slqb|slub|slab|slob picks the front end of every cache made from then on
 * (the kmalloc caches included: they are made at start-up); the `front`
 * tunable changes one cache's before its first allocation (tune.c), e.g.
 * QSLAB_TUNE="conn:front=slob".  A cache keeps its front end for life.
 */
#include "front/front.h"

#include <string.h>

/* SLQB: the inline fast paths and queue.c's slow paths are its own; only
 * shrink is a hook (cache.c). */
const struct qs_front qs_front_slqb = {
    .name = "slqb",
    .what = "per-owner LIFO queues, remote frees batched home (SLQB)",
    .shrink = qs_slqb_shrink,
    .queues = true,
    .idle_queues = true,
    .owns_slabs = true,
};

const struct qs_front *const qs_fronts[QS_FRONT_NR] = {
    [QS_FRONT_SLQB] = &qs_front_slqb,
    [QS_FRONT_SLOB] = &qs_front_slob,
    [QS_FRONT_SLUB] = &qs_front_slub,
    [QS_FRONT_SLAB] = &qs_front_slab,
    [QS_FRONT_DEBUG] = &qs_front_debug,
};

unsigned qs_front_objs_per_slab(const qslab_cache *c, unsigned order)
{
    const struct qs_front *f = qs_front_of(c);
    return f->objs_per_slab ? f->objs_per_slab(c, order) : qs_slab_objects(c, order);
}

unsigned qs_front_order(const qslab_cache *c, int f)
{
    if (qs_fronts[f]->order)
        return qs_fronts[f]->order(c);
    return qs_slab_default_order(c->slot_size, c->align);
}

int qs_front_default = QS_FRONT_SLQB;

int qs_front_find(const char *name, size_t len)
{
    for (int i = 0; i < QS_FRONT_NAMED; i++)
        if (strlen(qs_fronts[i]->name) == len && memcmp(qs_fronts[i]->name, name, len) == 0)
            return i;
    return -1;
}

void qs_front_init(void)
{
    const char *v = qs_os_getenv("QSLAB_FRONT");
    if (v && *v) {
        int f = qs_front_find(v, strlen(v));
        if (f < 0)
            qs_warn("QSLAB_FRONT=%s ignored: the front ends are " QS_FRONT_NAMES, v);
        else
            qs_front_default = f;
    }
}

QSLAB_EXPORT const char *qslab_cache_front(const qslab_cache *c)
{
    return c ? qs_front_of(c)->name : NULL;
}
