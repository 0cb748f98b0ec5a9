/*
 * front/slab/shared.c - the SLAB front end between the owners' arrays and
 * the slabs: a refill's gather (the node's shared array first, then its
 * slabs, then a new slab: cache_alloc_refill), a flush's way back (the
 * shared array while it has room, the rest to the slabs: cache_flusharray,
 * each object's word checked first), queue.c's routing of an array's
 * objects (give_back), the shared array drained (shrink, the reaper), and
 * the alien arrays.  The owners' paths that call these are slab.c's; the
 * slabs' side (what happens under node->lock to a slab) is slabs.c's.
 *
 * ALIEN CACHES.  A free of another node's object goes to the freeing
 * owner's alien array for that node (12 objects, as the kernel's), flushed
 * to that node's shared array or slabs when full: an owner holds one per
 * node, the "crossbar" of nodes x owners x caches the seeds worried about.
 */
#include "front/front.h"
#include "front/slab/slab.h"

#include <string.h>

/* ---- between the arrays and the slabs: the shared array ---- */

/* Give objects (all of node n) to n's shared array while it has room, the
 * rest to their slabs (the kernel's cache_flusharray, and the alien
 * drain's __drain_alien_cache). */
static void to_node_locked(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void *const *objs,
                           unsigned long k, bool shared_first)
{
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    if (shared_first && n->shared) {
        unsigned long room = n->shared_limit - n->shared_avail;
        unsigned long m = room < k ? room : k;
        memcpy(n->shared + n->shared_avail, objs, m * sizeof(void *));
        n->shared_avail += (uint32_t)m;
        objs += m;
        k -= m;
    }
    void *twice[8];
    unsigned ntwice = 0;
    if (k) {
        slabfe_free_block_locked(c, n, objs, k, &rel, twice, &ntwice);
        qs_stat(c, q, QS_NODE_FREE, k - ntwice);
    }
    bool kept = QS_LOAD(n->nr_free_slabs) != 0;
    qs_lock_release(&n->lock);
    slabfe_slabs_to_fifo(c, q, rel); /* past free_limit */
    if (kept) /* the reaper gives free slabs back over time (node.c starts it) */
        qs_node_purger_want();
    if (unlikely(ntwice)) {
        for (unsigned i = 0; i < ntwice && i < 8; i++)
            qs_fatal("double free of %p in cache %s (found as it went back to its slab)", twice[i],
                     c->name);
        slabfe_uncount_twice(c, q, ntwice); /* the second frees were counted as frees */
    }
}

/* The same, each object's word checked first (it comes from an array: the
 * stamp; else reported as queue.c does, and left out; a second free leaves
 * the counts). */
void slabfe_to_node(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void *const *objs,
                    unsigned long k, bool shared_first)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned long i = 0, twice = 0;
    while (i < k && *qs_link(c, objs[i]) == stamp)
        i++;
    if (i == k) { /* the common case: all of them */
        to_node_locked(c, q, n, objs, k, shared_first);
        return;
    }
    void *buf[64];
    unsigned m = 0;
    for (i = 0; i < k; i++) {
        if (likely(*qs_link(c, objs[i]) == stamp)) {
            buf[m++] = objs[i];
        } else {
            /* 0: handed out since from its other entry; anything else:
             * written after its free, or handed out and written by the
             * program: reported and left alone, and counted as allocated
             * (its second free leaves the counts), so that the statistics
             * and the slabs agree on an object that stays in use */
            qs_report_unstamped(c, objs[i]);
            twice++;
        }
        /* else written after its free, or freed twice and handed out
         * from its other entry since (the program wrote it): reported,
         * lost for good (in use from its slab's side), never handed out
         * while someone may hold it */
        if (m == 64 || (i + 1 == k && m)) {
            to_node_locked(c, q, n, buf, m, shared_first);
            m = 0;
        }
    }
    slabfe_uncount_twice(c, q, twice);
}

/* queue.c's routing of a queue's objects (flush, shrink, exit): to their
 * slabs, node by node (the kernel's free_block from drain_array). */
void slabfe_slab_give_back(qslab_cache *c, struct qs_queue *q, void *const *objs, unsigned long k)
{
    unsigned long i = 0;
    while (i < k) {
        int node = qs_slab_lookup(objs[i])->node;
        unsigned long j = i + 1;
        while (j < k && qs_slab_lookup(objs[j])->node == node)
            j++;
        slabfe_to_node(c, q, &c->nodes[node], objs + i, j - i, false);
        i = j;
    }
}

/* Copy m objects of the shared array (src) into dst, each word checked: a
 * flush left the stamp there, untouched since, unless the object was freed
 * twice and its other entry, still in an array, was handed out meanwhile
 * (the second free is pushed last, so it leaves first, in the top batch),
 * so that the program owns it now (0, or what it wrote there).  Such an
 * entry is dropped and put in bad[] (up to 8; counted in *nbad) for the
 * caller to report once n->lock is released.  A refill hands its last
 * object out unchecked (qs_percpu_refilled, slab_alloc_single), so this is
 * the last look before the object would be handed out twice.  Returns the
 * objects kept. */
static unsigned claim_shared(qslab_cache *c, void **dst, void *const *src, unsigned m, void **bad,
                             unsigned *nbad)
{
    uintptr_t stamp = QS_STAMP(c->secret);
    unsigned got = 0;
    for (unsigned i = 0; i < m; i++) {
        if (likely(*qs_link(c, src[i]) == stamp))
            dst[got++] = src[i];
        else if ((*nbad)++ < 8)
            bad[*nbad - 1] = src[i];
    }
    return got;
}

/* Fill dst with up to want objects for an owner of node n: the shared
 * array first, then slabs, then a new slab (cache_alloc_refill).  fresh
 * (one object only): set when it is a new slab's, zero but for its word
 * (calloc need not clear it).  bare (calloc's refill, else NULL): set when
 * the one object returned was born bare (slabfe_take_locked): nothing
 * else was found first, and it goes to the caller as it is, past the
 * array. */
unsigned slabfe_gather(qslab_cache *c, struct qs_queue *q, struct qs_node *n, void **dst, unsigned want,
                       bool *fresh, bool *bare)
{
    unsigned got = 0, twice = 0, births = 0;
    qs_stat(c, q, QS_REFILL, 1);
    for (;;) {
        void *bad[8];
        unsigned nbad = 0;
        qs_lock_acquire(&n->lock);
        if (n->shared_avail && !got) {
            unsigned m = n->shared_avail < want ? n->shared_avail : want;
            n->shared_avail -= m;
            got = claim_shared(c, dst, n->shared + n->shared_avail, m, bad, &nbad);
            qs_stat(c, q, QS_CLAIM, 1);
        }
        got += slabfe_take_locked(c, n, dst + got, want - got, &twice, &births, slab_born_max(c),
                                  got ? NULL : bare);
        qs_lock_release(&n->lock);
        if (births) /* objects born (slab.h: lazy birth) */
            qs_stat(c, q, QS_NEW_OBJS, births);
        births = 0;
        for (unsigned i = 0; i < nbad && i < 8; i++)
            qs_report_unstamped(c, bad[i]); /* left alone: counted as allocated (slabfe_to_node) */
        /* second frees counted as frees: uncounted (a fast free counts in
         * the array, an unowned one in the orphan counts: qs_uncount_frees) */
        qs_uncount_frees(c, q, twice + nbad);
        twice = 0;
        if (got)
            return got;
        bool zero;
        struct qs_slab *s = slabfe_slab_grow(c, q, n, &zero);
        if (!s)
            return 0;
        qs_lock_acquire(&n->lock);
        if (zero && ((fresh && want == 1) || bare)) {
            /* its first object is ours: the slab goes on the partial list,
             * whose head slabfe_take_locked takes from while we hold the
             * lock (calloc's refill: born bare) */
            qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
            n->free_objects += s->objects;
            got = slabfe_take_locked(c, n, dst, 1, &twice, &births, 1, bare);
            qs_lock_release(&n->lock);
            if (births)
                qs_stat(c, q, QS_NEW_OBJS, births);
            if (fresh)
                *fresh = got != 0;
            return got;
        }
        if (likely(!s->inuse)) /* a FIFO slab may keep objects in use (slab_from_fifo) */
            free_add(n, s);
        else
            qs_list_add(&n->list, s, s->inuse == s->objects ? QS_SLAB_FULL : QS_SLAB_PARTIAL);
        n->free_objects += s->objects - s->inuse;
        qs_lock_release(&n->lock);
    }
}

/* up to max objects of n's shared array back to their slabs, each word
 * checked (shrink, the reaper) */
void slabfe_drain_shared(qslab_cache *c, struct qs_node *n, unsigned max)
{
    void *buf[REFILL_MAX];
    for (;;) {
        qs_lock_acquire(&n->lock);
        unsigned k = n->shared_avail < max ? n->shared_avail : max;
        if (k > REFILL_MAX)
            k = REFILL_MAX;
        if (!k) {
            qs_lock_release(&n->lock);
            return;
        }
        n->shared_avail -= k;
        memcpy(buf, n->shared + n->shared_avail, k * sizeof(void *));
        qs_lock_release(&n->lock);
        slabfe_to_node(c, NULL, n, buf, k, false); /* words checked */
        max -= k;
        if (!max)
            return;
    }
}

/* ---- alien caches ---- */
static void **alien_of(struct qs_queue *q, int node)
{
    if (!q->alien) {
        size_t bytes = sizeof(void *) * (ALIEN_LIMIT + 1) * (size_t)qs_nr_nodes;
        if (!(q->alien = qs_meta_alloc(bytes)))
            return NULL;
    }
    return q->alien + (size_t)node * (ALIEN_LIMIT + 1);
}

static void alien_drain_one(qslab_cache *c, struct qs_queue *q, int node)
{
    void **a = q->alien + (size_t)node * (ALIEN_LIMIT + 1);
    uintptr_t k = (uintptr_t)a[0];
    if (!k)
        return;
    a[0] = 0;
    qs_stat(c, q, QS_REMOTE_BATCH, 1);
    slabfe_to_node(c, q, &c->nodes[node], a + 1, k, true);
}

void slabfe_alien_drain(qslab_cache *c, struct qs_queue *q)
{
    if (q->alien)
        for (int i = 0; i < qs_nr_nodes; i++)
            alien_drain_one(c, q, i);
}

/* obj of another node than q's: its alien array (the caller owns q) */
void slabfe_alien_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    void **a = alien_of(q, s->node);
    qs_stat(c, q, QS_FREE_SLOW, 1);
    if (!a) { /* ENOMEM: straight home */
        slabfe_to_node(c, q, &c->nodes[s->node], &obj, 1, true);
        return;
    }
    qs_stat(c, q, QS_REMOTE_FREE, 1);
    if ((uintptr_t)a[0] >= ALIEN_LIMIT)
        alien_drain_one(c, q, s->node);
    *qs_link(c, obj) = QS_STAMP(c->secret);
    uintptr_t k = (uintptr_t)a[0];
    a[1 + k] = obj;
    a[0] = (void *)(k + 1);
}
