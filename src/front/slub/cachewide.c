/*
 * front/slub/cachewide.c - the SLUB front end's cache-wide hooks, which act
 * on every owner and every node of a cache rather than on one allocation
 * or free: retire (a thread's exit) and the flush of owners' active slabs,
 * lists and partial slabs back to their slabs and nodes (through slabs.c's
 * slub_deactivate and slub_put_partials), shrink (the nodes' empty partial
 * slabs and their FIFOs, each slab's list checked), the purger's sweep
 * (malloc_trim's everything), destroy (the slabs on no shared list, found
 * through the page layer), the default order of a cache's slabs (mm/slub.c's
 * calculate_order, with qslab's waste bound) and validation (every slab against its state and the
 * lists that hold it).  None is on an allocation's or a free's path; the
 * front end's overview is slub.c's.
 */
#include "front/slub/fast.h"
#include "front/front.h"
#include "front/slub/slub.h"

#include <string.h>

/* ---- owners' state back to the slabs: retire, flush ---- */

/* Everything owner q holds (its active slab, list and partial slabs) back
 * to the slabs and nodes (the kernel's flush_cpu_slab + put_partials): the
 * owner itself (a thread), a CPU's queue's lock holder with the queue taken
 * from its CPU, or anyone when the owner is gone. */
static void flush_owner(qslab_cache *c, struct qs_queue *q)
{
    struct qs_slab *s = q->sl.slab, *list = q->sl.partial;
    void *fl = q->sl.freelist;
    QS_STORE(q->sl.slab, NULL);
    q->sl.freelist = NULL;
    q->sl.partial = NULL;
    QS_STORE(q->sl.nr_partial, 0);
    slub_deactivate(c, q, s, fl);
    slub_put_partials(c, q, list);
}

void slub_retire(qslab_cache *c, struct qs_queue *q)
{
    flush_owner(c, q);
}

/* Every owner's state we may touch: a thread, its own; per-CPU, every
 * CPU's queue, taken from its CPU (or only ours, without membarrier). */
static void flush_all(qslab_cache *c)
{
    if (!qs_percpu()) {
        struct qs_queue *q = qs_queue_of(c);
        if (q)
            flush_owner(c, q);
        return;
    }
#if QS_HAVE_PERCPU
    qs_lock_acquire(&qs_global);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        qs_lock_acquire(&q->lock);
        /* nothing on the CPU (no active slab, no list, no partial slab): no
         * take, whose membarrier interrupts the CPU.  A push lands only on
         * a list of an active slab, or just after a slow path that migrated
         * cleared it: a free racing with the flush, which a take could
         * miss as well */
        if (!QS_LOAD(q->sl.slab) && !QS_LOAD(q->sl.freelist) && !q->sl.partial) {
            qs_lock_release(&q->lock);
            continue;
        }
        if (qs_percpu_take(q)) {
            /* TSan: what the CPU's sections published (percpu.h) */
            QS_TSAN_ACQUIRE(q);
            flush_owner(c, q);
            QS_TSAN_RELEASE(q);
            qs_percpu_give(q);
        } else { /* no membarrier: only the queue of the CPU we run on */
            struct qs_slab *old = q->sl.slab, *list = q->sl.partial;
            void *fl;
            if (slub_pc_detach(q, &fl) == 0) {
                q->sl.partial = NULL;
                QS_STORE(q->sl.nr_partial, 0);
                slub_deactivate(c, q, old, fl);
                slub_put_partials(c, q, list);
            }
        }
        qs_lock_release(&q->lock);
    }
    qs_lock_release(&qs_global);
#endif
}

/* The purger's tick for q, a queue of c (the `idle` hook, front.h;
 * qs_global held, no other lock).  A CPU's queue that no fast path used
 * for a whole tick (its committed pops and pushes did not move) and that
 * holds an active slab, a list or partial slabs gives them all back to
 * their slabs and nodes, as a shrink does (flush_all): a thread that the
 * scheduler moved to another CPU left them there, where nobody allocates
 * from them, while its refills on the new CPU took new slabs (the node's
 * partial lists are where every CPU's refills look first).  Who owns
 * what: q's slow state is q->lock's holder's (tried, not waited for: the
 * order is qs_global, q->lock, node locks, as every slow path's); its list
 * and active slab are its CPU's until qs_percpu_take has replaced the
 * queue in the CPU's table and a membarrier has restarted any section that
 * found it; from then on they are ours until qs_percpu_give.  idle_top (the
 * purger's alone: SLUB's queues have no SLQB top to watch) keeps the count
 * of the last tick.  A queue that holds nothing is not taken (no
 * membarrier), so a CPU that stays idle costs one look a tick. */
void slub_idle(qslab_cache *c, struct qs_queue *q)
{
#if QS_HAVE_PERCPU
    if (q->cpu < 0 || !qs_percpu_takeable)
        return;
    uint64_t used = __atomic_load_n(&q->sl.pops, __ATOMIC_RELAXED) +
                    __atomic_load_n(&q->sl.pushes, __ATOMIC_RELAXED);
    if (used == q->idle_top &&
        (QS_LOAD(q->sl.slab) || QS_LOAD(q->sl.freelist) || QS_LOAD(q->sl.nr_partial)) &&
        qs_lock_try(&q->lock)) {
        if (qs_percpu_take(q)) {
            QS_TSAN_ACQUIRE(q); /* what the CPU's sections published (percpu.h) */
            flush_owner(c, q);
            QS_TSAN_RELEASE(q);
            qs_percpu_give(q);
        }
        qs_lock_release(&q->lock);
    }
    q->idle_top = used;
#else
    (void)c;
    (void)q;
#endif
}

/* ---- shrink and the purger's sweep ---- */

/* Before an empty slab goes back to the page layer for good: its list, the
 * one place where SLUB sees all of a slab's free objects at once, followed
 * to its end, so that a write into a free object (a use after free) that
 * no allocation met is reported before the evidence is gone. */
static void check_empty(qslab_cache *c, struct qs_slab *s)
{
    uint32_t n = 0, objs = slab_objects(s);
    for (void *p = s->freelist; p && n <= objs; n++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, p), &bad);
        if (unlikely(bad || (next && !qs_slab_valid_obj(s, next)))) {
            slub_corrupt_link(c, p);
            return;
        }
        p = next;
    }
}

/* The nodes' empty partial slabs, all of them (kmem_cache_shrink ignores
 * min_partial), then the FIFOs, each slab's list checked. */
static size_t shrink_nodes(qslab_cache *c)
{
    size_t bytes = 0;
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        struct qs_slab *rel = NULL;
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial, *next; s; s = next) {
            next = s->next;
            if (fw_inuse(fw_load(s)) == 0) {
                qs_list_del(&n->list, s);
                slub_discard_locked(c, n, s, &rel);
            }
        }
        qs_lock_release(&n->lock);
        slub_release_after(c, NULL, n, rel);
        qs_lock_acquire(&n->lock);
        struct qs_slab *list = qs_node_fifo_detach(n);
        qs_lock_release(&n->lock);
        for (struct qs_slab *s = list; s; s = s->next)
            check_empty(c, s);
        qs_node_release_list(c, NULL, list, &bytes);
    }
    return bytes;
}

size_t slub_shrink(qslab_cache *c)
{
    flush_all(c);
    size_t bytes = shrink_nodes(c);
    qs_purger_check();
    return bytes;
}

/* trim (all): every SLUB cache shrunk; the purger's tick: nothing here
 * (SLUB has no reaper; what owners keep is bounded by cpu_partial and
 * given back by an idle CPU, slub_idle; what nodes keep by min_partial and
 * the FIFO's decay) */
QS_RARE size_t slub_sweep(bool all)
{
    if (!all)
        return 0;
    qslab_cache *list[64];
    size_t bytes = 0;
    unsigned skip = 0;
    for (;;) { /* in groups, without qs_global held while shrinking */
        unsigned n = 0, seen = 0;
        qs_lock_acquire(&qs_global);
        for (qslab_cache *c = qs_caches; c && n < 64; c = c->next)
            if (c->front == QS_FRONT_SLUB && seen++ >= skip)
                list[n++] = c;
        qs_lock_release(&qs_global);
        for (unsigned i = 0; i < n; i++)
            bytes += slub_shrink(list[i]);
        if (n < 64)
            return bytes;
        skip += n;
    }
}

/* ---- destroy ---- */

/* destroy: every slab of c that is on no shared list (active, owners'
 * partial, full: on no list at all, pass-through) found through the page
 * layer, collected, then given back (the node lists and the FIFO are the
 * shared destroy's) */
struct sl_collect {
    qslab_cache *c;
    struct qs_slab *list;
};
static void collect_slab(struct qs_slab *s, void *arg)
{
    struct sl_collect *k = arg;
    if (__atomic_load_n(&s->cache, __ATOMIC_RELAXED) != k->c) /* another cache's: not read */
        return;
    int st = get_state(s);
    if (st == QS_SLAB_PARTIAL || st == QS_SLAB_EMPTY)
        return;
    s->next = k->list;
    k->list = s;
}

void slub_destroy(qslab_cache *c, struct qs_slab **all)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        memset(&q->sl, 0, sizeof(q->sl));
    struct sl_collect k = {c, NULL};
    qs_page_walk(collect_slab, &k);
    qs_slabs_gather(all, k.list);
}

/* ---- calculate_order (mm/slub.c, as fixed in 5.12: the CPU count is the
 * possible CPUs', not the online ones', which during boot was 1 and gave
 * every cache of the boot the orders of a one-CPU machine) ----
 * Try for at least min_objects = 4 * (fls(CPUs) + 1) objects per slab, at
 * most order 3 (PAGE_ALLOC_COSTLY_ORDER), wasting at most 1/16 of the slab,
 * then 1/8, 1/4, then with fewer objects; past order 3 only objects that
 * need it. */
static unsigned calc_slab_order(size_t size, unsigned min_objects, unsigned max_order, unsigned fract)
{
    unsigned order = 0;
    while (qs_slab_bytes(order) < (size_t)min_objects * size && order < QS_MAX_ORDER)
        order++;
    for (; order <= max_order; order++) {
        size_t slab = qs_slab_bytes(order);
        if (slab >= size && slab % size <= slab / fract)
            break;
    }
    return order;
}

static unsigned slub_calculate_order(size_t size)
{
    long ncpu = qs_os_cpu_possible(); /* 5.12's fix: possible CPUs */
    if (ncpu < 1)
        ncpu = 1;
    unsigned fls = 64 - (unsigned)__builtin_clzl((unsigned long)ncpu);
    unsigned min_objects = 4 * (fls + 1);
    unsigned max_objects = (unsigned)(qs_slab_bytes(3) / size);
    if (min_objects > max_objects)
        min_objects = max_objects;
    for (; min_objects > 1; min_objects--)
        for (unsigned fract = 16; fract >= 4; fract /= 2) {
            unsigned order = calc_slab_order(size, min_objects, 3, fract);
            if (order <= 3)
                return order;
        }
    unsigned order = calc_slab_order(size, 1, 3, 1);
    if (order <= 3)
        return order;
    return calc_slab_order(size, 1, QS_MAX_ORDER, 1);
}

/* What a slab of `order` leaves unused of the pages its objects touch (the
 * tail past the last object's page is never written: address space, not
 * memory), as core/slab.c's order rule counts it. */
static size_t touched_waste(size_t size, unsigned order)
{
    size_t used = qs_slab_bytes(order) / size * size;
    return ((used + QS_PAGE_SIZE - 1) & ~(size_t)(QS_PAGE_SIZE - 1)) - used;
}

/* qslab's waste bound on top of calculate_order (the one every front end's
 * default order meets, docs/design.md "Slab order"): an order that leaves
 * more than 1/64 of its slab unused gives way to the first order above it
 * that does not, trying up to five orders up and slabs up to 128 KiB, else
 * to the least wasteful of them.  The kernel's fractions (1/16, then 1/8,
 * 1/4) are for slabs a CPU refills often; here they cost memory for good:
 * SQLite's 1,312-byte page-cache blocks went twelve to a 16 KiB slab, 640
 * bytes unused in each, 9.4 MiB of its 240 MiB peak (order 5: 99 to a
 * 128 KiB slab, 1,184 bytes in each, 1.6 MiB). */
static unsigned waste_bound(size_t size, unsigned o)
{
    size_t bytes = qs_slab_bytes(o), w = touched_waste(size, o);
    if (w * QS_SLAB_WASTE_DIV <= bytes || bytes >= QS_SLAB_WASTE_MAX_BYTES)
        return o;
    unsigned best = o;
    size_t best_pm = w * 1000 / bytes;
    for (unsigned k = o + 1; k <= o + QS_SLAB_ORDERS_UP && k <= QS_MAX_ORDER; k++) {
        bytes = qs_slab_bytes(k);
        if (bytes > QS_SLAB_WASTE_MAX_BYTES)
            break;
        w = touched_waste(size, k);
        if (w * QS_SLAB_WASTE_DIV <= bytes)
            return k;
        if (w * 1000 / bytes < best_pm) {
            best_pm = w * 1000 / bytes;
            best = k;
        }
    }
    return best;
}

unsigned slub_order(const qslab_cache *c)
{
    unsigned o = slub_calculate_order(c->slot_size);
    if (o < c->min_order)
        o = c->min_order;
    if (o > QS_MAX_ORDER)
        o = QS_MAX_ORDER;
    return waste_bound(c->slot_size, o);
}

/* ---- validation (qs_global held; a cache nobody uses at the moment) ----
 * Every slab of the cache is found through the page layer (qs_page_walk:
 * the full ones are on no list) and checked against its state: its word's
 * list (objects of this slab, valid links) plus inuse == objects; frozen
 * exactly when ACTIVE; a list head for the partial ones, none for the full
 * ones.  The slabs found in each state must be the ones the owners' and
 * nodes' lists hold. */
struct sl_walk {
    struct qs_walk *w;
    unsigned long by_state[8];
};

static void check_slab(struct qs_walk *w, struct qs_slab *s, int state)
{
    qslab_cache *c = w->c;
    uint64_t fw = fw_load(s);
    uint32_t objs = slab_objects(s), nfree = 0;
    w->slabs++;
    w->inuse += fw_inuse(fw);
    if (get_state(s) != state)
        qs_walk_problem(w, "slab state does not match its list", s->mem);
    if (!!(fw & FW_FROZEN) != (state == QS_SLAB_ACTIVE))
        qs_walk_problem(w, "slab frozen but not active, or active but not frozen", s->mem);
    for (void *p = idx_obj(c, s, fw_head(fw)); p && nfree <= objs; nfree++) {
        if (!qs_slab_valid_obj(s, p)) {
            qs_walk_problem(w, "slab's free list holds a pointer that is not its object", p);
            break;
        }
        bool bad;
        p = qs_dec(c, *qs_link(c, p), &bad);
        if (bad) {
            qs_walk_problem(w, "corrupt free-list link", p);
            break;
        }
    }
    if (nfree + fw_inuse(fw) != objs)
        qs_walk_problem(w, "inuse + free != objects", s->mem);
    if ((state == QS_SLAB_PARTIAL || state == QS_SLAB_CPU_PARTIAL) && !fw_head(fw))
        qs_walk_problem(w, "partial slab without a free object", s->mem);
    if (state == QS_SLAB_FULL && fw_head(fw))
        qs_walk_problem(w, "full slab with a free object", s->mem);
    if (__atomic_load_n(&s->span, __ATOMIC_RELAXED) != objs * c->slot_size)
        qs_walk_problem(w, "span does not match the objects born", s->mem);
}

static void walk_page_slab(struct qs_slab *s, void *arg)
{
    struct sl_walk *sw = arg;
    if (__atomic_load_n(&s->cache, __ATOMIC_RELAXED) != sw->w->c)
        return;
    int st = get_state(s);
    if (st < 8)
        sw->by_state[st]++;
    if (st == QS_SLAB_FULL) {
        check_slab(sw->w, s, QS_SLAB_FULL);
    } else if (st == QS_SLAB_PASS) {
        sw->w->slabs++;
        sw->w->inuse++;
    } else if (st != QS_SLAB_ACTIVE && st != QS_SLAB_CPU_PARTIAL && st != QS_SLAB_PARTIAL &&
               st != QS_SLAB_EMPTY) {
        qs_walk_problem(sw->w, "slab in a state SLUB does not use", s->mem);
    }
}

void slub_validate(qslab_cache *c, struct qs_walk *w)
{
    unsigned long act = 0, cpup = 0, nodep = 0;
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        unsigned long n = 0;
        for (void *p = q->sl.freelist; p; n++) {
            struct qs_chunk *ch = qs_chunk_of(p);
            struct qs_slab *s = ch && ch->kind == QS_CHUNK_SLABS ? qs_obj_slab(ch, p) : NULL;
            if (!s || s->cache != c) {
                qs_walk_problem(w, "owner's list holds a pointer that is not an object of this cache", p);
                break;
            }
            bool bad;
            p = qs_dec(c, *qs_link(c, p), &bad);
            if (bad) {
                qs_walk_problem(w, "corrupt link on an owner's list", p);
                break;
            }
        }
        w->queued += n;
        if (q->sl.slab) {
            act++;
            check_slab(w, q->sl.slab, QS_SLAB_ACTIVE);
        }
        unsigned long np = 0;
        for (struct qs_slab *s = q->sl.partial; s; s = s->next, np++)
            check_slab(w, s, QS_SLAB_CPU_PARTIAL);
        if (np != q->sl.nr_partial)
            qs_walk_problem(w, "owner's partial count does not match its list", q);
        cpup += np;
    }
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        unsigned long np = 0;
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial; s; s = s->next, np++)
            check_slab(w, s, QS_SLAB_PARTIAL);
        if (np != n->list.nr_partial || n->list.full || n->list.nr_full)
            qs_walk_problem(w, "node list counts do not match", n);
        qs_lock_release(&n->lock);
        nodep += np;
    }
    struct sl_walk sw = {w, {0}};
    qs_page_walk(walk_page_slab, &sw);
    if (sw.by_state[QS_SLAB_ACTIVE] != act)
        qs_walk_problem(w, "active slabs that no owner holds", c);
    if (sw.by_state[QS_SLAB_CPU_PARTIAL] != cpup)
        qs_walk_problem(w, "owner-partial slabs on no owner's list", c);
    if (sw.by_state[QS_SLAB_PARTIAL] != nodep)
        qs_walk_problem(w, "partial slabs not on their node's list", c);
}
