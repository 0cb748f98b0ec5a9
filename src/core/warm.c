/*
 * warm.c - warm slots, the retention rule and the cached-memory cap: how
 * much of what the caches give back the page layer keeps resident.
 *
 * Empty slabs that no cache keeps stay resident in their pool, newest
 * first, and qs_page_alloc_slab takes the newest warm slot before any
 * other, for whichever cache asks: slabs of one order serve every cache
 * of that order, so memory one size class freed serves the next class
 * that grows, with no page fault (13 us a 4 KiB page on these VMs) and no
 * growth of the process.  They come from the caches' empty-slab FIFOs
 * past their small limit (node.c), from destroyed caches, and from SLUB's
 * pass-through blocks (qs_page_free_slab).  THE RETENTION RULE bounds them:
 *   - by time: a slot warm for QS_WARM_MS goes back (decommitted, its slot
 *     to its chunk); the purger's tick (qs_node_sweep_end) and every keep look
 *     for them; qslab_trim gives back every warm slot at once;
 *   - by the working set: whenever this layer hands out memory that is not
 *     resident (a slot given back before, or a new chunk's), the layer
 *     above's hook (node.c node_reclaim) first sends an empty slab of this
 *     order from any cache's FIFO here warm, to serve at once, and brings
 *     the FIFOs down to the cap; then the warm pool is cut to qs_page_retain_cap(), a
 *     sixteenth of the bytes of slabs in the caches (at least
 *     QS_RETAIN_FLOOR), biggest slots first, oldest first within a pool.
 *     So memory kept for reuse never lets the process grow by more than
 *     that share of what it holds in slabs (and a step: node.c): a program
 *     that frees one size class and fills another reuses or gives back,
 *     while one that frees its working set and takes it again (the seeds'
 *     batches) finds it all kept, however large;
 *   - a keep beyond QS_WARM_LIMIT decommits at once, and a destroyed
 *     cache's slabs stay warm only within qs_page_retain_cap(): once every
 *     cache is gone, nothing stays.
 * Nothing relies on a slot's memory being zero (above), so a warm slot's
 * old bytes are no one's concern.
 *
 * A warm slot has left its cache (slab_leave: no cache, span 0, state
 * FREE), so it is no object's slab: a pointer into it is reported as a
 * free of a freed slab's object, as when its slot was free.  For its chunk
 * it is still handed out (not on the chunk's free slots, nr_free not
 * counting it), so the chunk is not unmapped under it.  Its descriptor's
 * empty_ms holds when it became warm; ->next and ->prev link the pool's
 * list, under the pool's lock: reuse takes the head (newest), the give-back
 * the tail (oldest), each in O(1) a slot (a destroy keeps thousands).
 */
#include "core/page_int.h"

static size_t warm_bytes; /* atomic: bytes of warm slots, every pool */
static unsigned long warm_trims; /* atomic: cuts by the working-set bound */
unsigned long *const qs_page_warm_trims = &warm_trims;
size_t *const qs_page_warm_bytes = &warm_bytes;

/* Unused for at least `age` ms */
static bool warm_old(const struct qs_slab *s, uint64_t now, uint32_t age)
{
    return qs_ms_age(now, s->empty_ms) >= age;
}

/* Take pool p's warm slots unused for `age` ms (0: every one) off its list
 * (p->lock held), onto *out (a ->next list); returns their bytes.  The
 * list is newest first, so the old ones are its tail: taken from there,
 * oldest first, until a young one.  The caller takes the bytes off
 * warm_bytes only once it has given the slots back (qs_page_free_left): until
 * then they are still resident, and a reader that sees warm_bytes reach 0
 * (qslab_stats_report, unit_warm_slots) may rely on their pages being
 * decommitted. */
/* Pool p's oldest warm slot, off its list onto *out (p->lock held); its
 * bytes. */
static size_t warm_cut_oldest(struct qs_page_pool *p, struct qs_slab **out)
{
    struct qs_slab *s = p->warm_tail;
    p->warm_tail = s->prev;
    if (s->prev)
        s->prev->next = NULL;
    else
        p->warm = NULL;
    s->prev = NULL;
    s->next = *out;
    *out = s;
    return qs_slab_bytes(s->order);
}

static size_t warm_cut_locked(struct qs_page_pool *p, uint32_t age, uint64_t now, struct qs_slab **out)
{
    size_t b = 0;
    while (p->warm_tail && warm_old(p->warm_tail, now, age))
        b += warm_cut_oldest(p, out);
    return b;
}

/* Give back slots cut off the warm lists (with any others on the list),
 * then take the cut ones' bytes off warm_bytes. */
static size_t free_cut(struct qs_slab *list, size_t cut)
{
    size_t back = qs_page_free_left(list);
    if (cut)
        __atomic_sub_fetch(&warm_bytes, cut, __ATOMIC_RELAXED);
    return back;
}

size_t qs_page_retain_cap(void)
{
    size_t cap = __atomic_load_n(&qs_page_out, __ATOMIC_RELAXED) / QS_RETAIN_FRACTION;
    cap = cap > QS_RETAIN_FLOOR ? cap : QS_RETAIN_FLOOR;
    size_t max = qs_cached_empty_max(); /* the cached-memory cap's share */
    return max && max < cap ? max : cap;
}

/* ---- the cached-memory cap (page.h; node.c cached_walk; docs/design.md,
 * "The cached-memory cap") ----
 *
 * `max` is the tunable's (qs_page_set_cached_max: any thread, relaxed);
 * what is kept empty is held to its share, qs_cached_empty_max (page.h).
 * `kept` counts what is kept empty from its caller's point of view, only
 * while there is a cap: the bytes of slabs appended to a FIFO (node.c) and
 * of slabs kept warm that came from no FIFO (keep_slabs below); slabs that
 * leave a FIFO or a warm pool are not subtracted, so held + kept bounds
 * what is kept from above, give or take the reorderings below.  When that
 * passes the cap, the walk (node.c) sums the FIFOs and the warm slots
 * exactly under qs_global, gives back the oldest down to seven eighths of
 * the cap, stores what is left in `held` and zeroes `kept`: the next walk
 * comes once an eighth of the cap has been kept again.  One atomic add per
 * keep (a list of slabs, on a slow path) and one relaxed load per check,
 * none without a cap; nothing on an allocation's or a free's fast path. */
struct qs_cached qs_cached;
static void (*cached_walk)(void);

void qs_page_set_cached_walk(void (*fn)(void))
{
    cached_walk = fn;
}

void qs_page_set_cached_max(unsigned long max)
{
    __atomic_store_n(&qs_cached.max, max, __ATOMIC_RELAXED);
    if (max) /* held + kept: the first check walks */
        __atomic_store_n(&qs_cached.held, qs_cached_empty_max(), __ATOMIC_RELAXED);
}

void qs_page_cached_apply(void)
{
    if (__atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED) && cached_walk)
        cached_walk();
}

void qs_page_cached_check(void)
{
    unsigned long max = qs_cached_empty_max();
    if (likely(!max))
        return;
    if (__atomic_load_n(&qs_cached.held, __ATOMIC_RELAXED) +
            __atomic_load_n(&qs_cached.kept, __ATOMIC_RELAXED) >
        max && cached_walk)
        cached_walk();
}

/* Keep a ->next list warm up to `limit` bytes warm in all; `since`: the
 * slabs' empty_ms already says since when they are unused (a FIFO's),
 * else they are unused from now. */
static size_t keep_slabs(struct qs_slab *list, size_t limit, bool since)
{
    uint64_t now = qs_os_now_ms();
    struct qs_slab *cold = NULL;
    size_t cut = 0, kept = 0, max = qs_cached_empty_max();
    if (unlikely(max) && max < limit)
        limit = max; /* the cached-memory cap's share bounds the warm slots alone too */
    while (list) {
        struct qs_slab *s = list;
        list = list->next;
        qs_page_slab_leave(s);
        size_t sb = qs_slab_bytes(s->order);
        struct qs_page_pool *p = &qs_page_pools[s->node][s->order];
        /* within the limit: the slot stays warm (a racing keep may pass
         * the limit by its own slab at most) */
        if (__atomic_load_n(&warm_bytes, __ATOMIC_RELAXED) + sb > limit) {
            s->next = cold;
            cold = s;
            continue;
        }
        __atomic_add_fetch(&warm_bytes, sb, __ATOMIC_RELAXED);
        kept += sb;
        /* since when it is unused; its memory is no longer zero (it held
         * a cache's objects) */
        s->empty_ms = since ? s->empty_ms & QS_MS_MASK : (uint32_t)now & QS_MS_MASK;
        s->prev = NULL;
        qs_lock_acquire(&p->lock);
        s->next = p->warm;
        if (p->warm)
            p->warm->prev = s;
        else
            p->warm_tail = s;
        p->warm = s;
        cut += warm_cut_locked(p, QS_WARM_MS, now, &cold); /* this pool's old ones go now */
        qs_lock_release(&p->lock);
    }
    size_t back = free_cut(cold, cut);
    if (__atomic_load_n(&warm_bytes, __ATOMIC_RELAXED))
        qs_node_purger_want(); /* it gives them back once old */
    if (unlikely(max) && !since && kept) { /* a FIFO's slabs were counted on the FIFO */
        qs_page_cached_kept(kept);
        qs_page_cached_check();
    }
    return back;
}

size_t qs_page_keep_slabs(struct qs_slab *list)
{
    return keep_slabs(list, QS_WARM_LIMIT, false);
}

size_t qs_page_keep_empties(struct qs_slab *list)
{
    return keep_slabs(list, QS_WARM_LIMIT, true);
}

/* A destroyed cache's slabs: its own bytes leave the working set first
 * (and no floor: once every cache is gone, nothing stays). */
size_t qs_page_keep_destroyed(struct qs_slab *list)
{
    size_t mine = 0;
    for (struct qs_slab *s = list; s; s = s->next)
        mine += qs_slab_bytes(s->order);
    size_t held = __atomic_load_n(&qs_page_out, __ATOMIC_RELAXED);
    return keep_slabs(list, held > mine ? (held - mine) / QS_RETAIN_FRACTION : 0, false);
}

/* Cut the warm pool to `cap` bytes (see the retention rule): the biggest
 * slots first, oldest first within a pool; one pool lock at a time. */
static size_t warm_trim(size_t cap)
{
    struct qs_slab *go = NULL;
    size_t cut = 0, warm = __atomic_load_n(&warm_bytes, __ATOMIC_RELAXED);
    for (int order = QS_NR_ORDERS - 1; order >= 0 && warm > cap + cut; order--)
        for (int node = 0; node < qs_nr_nodes && warm > cap + cut; node++) {
            struct qs_page_pool *p = &qs_page_pools[node][order];
            qs_lock_acquire(&p->lock);
            while (warm > cap + cut && p->warm_tail)
                cut += warm_cut_oldest(p, &go);
            qs_lock_release(&p->lock);
        }
    if (cut)
        __atomic_fetch_add(&warm_trims, 1, __ATOMIC_RELAXED);
    return free_cut(go, cut);
}

size_t qs_page_warm_cut(size_t cap)
{
    return warm_trim(cap);
}

size_t qs_page_sweep_warm(bool all)
{
    return qs_page_sweep_warm_orders(0, QS_NR_ORDERS, all ? 0 : QS_WARM_MS, qs_os_now_ms());
}

size_t qs_page_sweep_warm_orders(unsigned from, unsigned except, uint32_t age, uint64_t now)
{
    if (!__atomic_load_n(&warm_bytes, __ATOMIC_RELAXED))
        return 0;
    struct qs_slab *go = NULL;
    size_t cut = 0;
    /* every pool's lock (a tick with warm slots only): p->warm is read
     * under it, like every other pool field */
    for (int node = 0; node < qs_nr_nodes; node++)
        for (unsigned order = from; order < QS_NR_ORDERS; order++) {
            if (order == except)
                continue;
            struct qs_page_pool *p = &qs_page_pools[node][order];
            qs_lock_acquire(&p->lock);
            cut += warm_cut_locked(p, age, now, &go);
            qs_lock_release(&p->lock);
        }
    return free_cut(go, cut);
}

/* Pool p's newest warm slot, off its list and its bytes off warm_bytes
 * (p->lock held), or NULL. */
struct qs_slab *qs_page_warm_pop(struct qs_page_pool *p)
{
    struct qs_slab *s = p->warm;
    if (!s)
        return NULL;
    p->warm = s->next;
    if (p->warm)
        p->warm->prev = NULL;
    else
        p->warm_tail = NULL;
    __atomic_sub_fetch(&warm_bytes, qs_slab_bytes(s->order), __ATOMIC_RELAXED);
    return s;
}
