/*
 * validate.c - the invariant walker (SLUB's validate_slab_cache).
 *
 * qslab_cache_validate walks every list of a cache and checks, for a cache
 * that no thread is using at the moment of the call:
 *   - every slab: owner matches the list it is on, state matches the list,
 *     inuse + (length of its free list) == objects, PARTIAL has
 *     0 < inuse < objects, FULL has inuse == objects, EMPTY has inuse == 0;
 *   - every queue and inbox: its length matches its count, every object is
 *     a valid object of this cache and its link decodes;
 *   - totals: the slabs found equal the statistics' slab count, and
 *     sum(inuse) == allocated objects + objects in queues and inboxes.
 * Returns 0, or -1 after printing one line per problem on stderr.
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "debug/debug.h"

/* The objects of a queue's slots: each an object of this cache holding the
 * free stamp (QS_STAMP) or, when a refill put it there, its free-list link. */
static void walk_vec(struct qs_walk *w, void *const *v, unsigned long n)
{
    for (unsigned long i = 0; i < n; i++) {
        struct qs_chunk *ch = qs_chunk_of(v[i]);
        struct qs_slab *s = ch && ch->kind == QS_CHUNK_SLABS ? qs_obj_slab(ch, v[i]) : NULL;
        if (!s || s->cache != w->c) {
            qs_walk_problem(w, "queue holds a pointer that is not an object of this cache", v[i]);
            continue;
        }
        uintptr_t word = *qs_link(w->c, v[i]);
        if (word != QS_STAMP(w->c->secret) && !qs_looks_free(w->c, word))
            qs_walk_problem(w, "queued object overwritten (use after free, or freed twice)", v[i]);
    }
}

/* Length of an encoded list (max objects), checking each object. */
static unsigned long walk_objects(struct qs_walk *w, void *head, unsigned long max, struct qs_slab *only)
{
    unsigned long n = 0;
    while (head && n <= max) {
        struct qs_chunk *ch = qs_chunk_of(head);
        struct qs_slab *s = ch && ch->kind == QS_CHUNK_SLABS ? qs_obj_slab(ch, head) : NULL;
        if (!s || s->cache != w->c || (only && s != only)) {
            qs_walk_problem(w, "list holds a pointer that is not an object of this cache/slab", head);
            return n;
        }
        if (only && qs_keeps_fbits(w->c) && !qs_fbit_test(s, head)) { /* internal.h */
            qs_walk_problem(w, "object on a free list without its free bit", head);
            return n;
        }
        bool bad;
        head = qs_dec(w->c, *qs_link(w->c, head), &bad);
        if (bad) {
            qs_walk_problem(w, "corrupt free-list link", head);
            return n;
        }
        n++;
    }
    if (head)
        qs_walk_problem(w, "list longer than its count (cycle?)", head);
    return n;
}

static void walk_slab(struct qs_walk *w, struct qs_slab *s, struct qs_list *owner, int state)
{
    w->slabs++;
    w->inuse += s->inuse;
    if (s->cache != w->c)
        qs_walk_problem(w, "slab of another cache on a list", s->mem);
    if (qs_slab_owner(s) != owner)
        qs_walk_problem(w, "slab owner does not match its list", s->mem);
    if (s->state != state)
        qs_walk_problem(w, "slab state does not match its list", s->mem);
    unsigned long nfree = walk_objects(w, s->freelist, s->objects, s);
    if (nfree + s->inuse != s->objects)
        qs_walk_problem(w, "inuse + free != objects", s->mem);
    if (qs_keeps_fbits(w->c)) {
        /* free bits (internal.h): set exactly for the objects on the list
         * (walk_objects checked each listed one) */
        unsigned long bits = 0;
        for (uint32_t i = 0; i < s->objects; i++)
            bits += qs_fbit_test(s, s->base + (size_t)i * w->c->slot_size);
        if (bits != nfree)
            qs_walk_problem(w, "free bits do not match the free list", s->mem);
    }
    bool growable = qs_slab_growable(w->c, s); /* unborn objects (core/slab.c) */
    if (state == QS_SLAB_PARTIAL && (s->inuse == 0 || (s->inuse >= s->objects && !growable)))
        qs_walk_problem(w, "partial slab that is empty or full", s->mem);
    if (state == QS_SLAB_FULL && (s->inuse != s->objects || growable))
        qs_walk_problem(w, "full slab with free or unborn objects", s->mem);
    if (__atomic_load_n(&s->span, __ATOMIC_RELAXED) != s->objects * w->c->slot_size)
        qs_walk_problem(w, "span does not match the objects born", s->mem);
    if (state == QS_SLAB_EMPTY && s->inuse != 0)
        qs_walk_problem(w, "empty slab with objects in use", s->mem);
}

static void walk_list(struct qs_walk *w, struct qs_list *l)
{
    unsigned long np = 0, nf = 0;
    for (struct qs_slab *s = l->partial; s; s = s->next, np++)
        walk_slab(w, s, l, QS_SLAB_PARTIAL);
    for (struct qs_slab *s = l->full; s; s = s->next, nf++)
        walk_slab(w, s, l, QS_SLAB_FULL);
    if (np != l->nr_partial || nf != l->nr_full)
        qs_walk_problem(w, "list counts do not match", l);
}

static int validate_one(qslab_cache *c)
{
    struct qs_walk w = {c, 0, 0, 0, 0};
    unsigned long sum[QS_STAT_NR];
    qs_lock_acquire(&qs_global);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        unsigned nr = QS_TOP_NR(q->top);
        if (nr > q->cap)
            qs_walk_problem(&w, "queue count over its capacity", q);
        else
            walk_vec(&w, q->slots, nr);
        w.queued += nr;
        for (unsigned k = 0; k < QS_PENDING; k++) {
            struct qs_batch *b = &q->pending[k];
            if (walk_objects(&w, b->head, b->n, NULL) != b->n)
                qs_walk_problem(&w, "pending batch length does not match its count", q);
            w.queued += b->n;
        }
        uint64_t fb = QS_LOAD(q->fb); /* a CPU's open batch */
        if (fb && walk_objects(&w, QS_FB_HEAD(fb), QS_FB_N(fb), NULL) != QS_FB_N(fb))
            qs_walk_problem(&w, "open batch length does not match its count", q);
        w.queued += QS_FB_N(fb);
        qs_lock_acquire(&q->inbox.lock);
        if (walk_objects(&w, q->inbox.head, q->inbox.nr, NULL) != q->inbox.nr)
            qs_walk_problem(&w, "inbox length does not match its count", q);
        w.queued += q->inbox.nr;
        qs_lock_release(&q->inbox.lock);
        walk_list(&w, &q->list);
        unsigned long ns = 0;
        qs_lock_acquire(&q->stash_lock);
        for (struct qs_slab *s = q->stash; s; s = s->next, ns++)
            walk_slab(&w, s, &q->list, QS_SLAB_EMPTY);
        if (ns != q->nr_stash)
            qs_walk_problem(&w, "stash count does not match the stash", q);
        qs_lock_release(&q->stash_lock);
    }
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        unsigned long ne = 0;
        qs_lock_acquire(&n->lock);
        if (!qs_front_of(c)->own_node_lists) /* SLUB's: its hook walks them */
            walk_list(&w, &n->list);
        qs_node_fifo_lock(n);
        QS_FIFO_FOR_EACH(n, s) {
            walk_slab(&w, s, &n->list, QS_SLAB_EMPTY);
            ne++;
        }
        if (ne != qs_node_nr_empty(n))
            qs_walk_problem(&w, "empty count does not match the FIFO", n);
        qs_node_fifo_unlock(n);
        qs_lock_release(&n->lock);
    }
    if (qs_front_of(c)->validate) /* what the front end holds beyond queues and nodes */
        qs_front_of(c)->validate(c, &w);
    qs_stats_sum(c, sum);
    qs_lock_release(&qs_global);
    unsigned long live = sum[QS_ALLOC_FAST] + sum[QS_ALLOC_SLOW] - sum[QS_FREE_FAST] - sum[QS_FREE_SLOW];
    if (w.slabs != sum[QS_NEW_SLAB] - sum[QS_FREE_SLAB])
        qs_walk_problem(&w, "slabs found differ from the slab count", c);
    /* guarded samples (guard.c) are allocated objects in no slab */
    if (w.inuse + __atomic_load_n(&c->guard_live, __ATOMIC_RELAXED) != live + w.queued)
        qs_walk_problem(&w, "objects in use differ from allocated + queued", c);
    return w.errors ? -1 : 0;
}

/* The cache, then its debug twins (twin.c), which stay listed while it lives */
QSLAB_EXPORT int qslab_cache_validate(qslab_cache *c)
{
    int r = validate_one(c);
    for (qslab_cache *t = NULL;;) {
        qs_lock_acquire(&qs_global);
        t = qs_twin_next(c, t);
        qs_lock_release(&qs_global);
        if (!t)
            return r;
        r |= validate_one(t);
    }
}
