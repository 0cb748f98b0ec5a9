/*
 * quarantine.c - Q: freed objects held back from reuse.
 *
 * A use after free is harmless until the slot is handed out again; then
 * the stale pointer reaches someone else's object.  A debug cache with Q
 * keeps each freed object out of its slab's free list for a while: the
 * free checks it (slot.c), fills it (zero, or P's 0x6b), marks its link
 * word QS_QUAR_WORD (so a second free is "Object already free", and
 * malloc_usable_size and realloc of it are reported: debug.c) and puts it
 * in its node's quarantine; only an object that leaves the quarantine
 * goes to its slab's free list, where the next allocation checks that its
 * fill is intact (a write after free: "Poison overwritten", its offset and
 * bytes) and the purger's walk checks it meanwhile (debug.c).
 *
 * WHICH ONE LEAVES.  The quarantine of a (cache, node) holds at most
 * QS_QUAR_BYTES of slots (none for objects larger than that), and at most
 * a sixteenth of the node's slabs (quar_room), but at least QS_QUAR_FLOOR:
 * what a cache holds back follows what it uses.  While it has room, a
 * freed object waits;
 * once it is full, each free puts its object in the place of one chosen at
 * random, which leaves.  So an object's stay is random (an attacker cannot
 * count frees to get a slot back), on average `cap` frees of its cache and
 * node, and the bytes held stay bounded.
 *
 * LOCKING.  A node's quarantine is touched only under that node's lock,
 * the lock of its slabs' free lists: an object is in exactly one of
 * allocated, quarantined, or on its slab's free list, and each move between
 * the last two happens under the one lock.  Its array is made outside the
 * lock (the first free of the node, dbg_quarantine_prepare), published with
 * release, read under the lock (acquire: its zeroed contents are seen);
 * it lives as long as the cache (released by the destroy hook, when no
 * object of the cache is in use and nobody frees).
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"

#include <string.h>

#define QS_QUAR_BYTES (64u << 10) /* held per (cache, node), at most */
#define QS_QUAR_FLOOR (8u << 10)  /* ... and at least, if the cache has fewer slabs */

/* The objects held; each one's slab is found when it leaves (qs_slab_lookup) */
struct qs_quar {
    uint32_t nr, cap;
    uint64_t rnd; /* xorshift64 state, under the lock */
    void *obj[];
};

static uint32_t quar_cap(const qslab_cache *c)
{
    return (uint32_t)(QS_QUAR_BYTES / c->slot_size); /* 0: objects too large */
}

/* What the quarantine may hold now, in objects: a sixteenth of the node's
 * slabs (so a cache holds back in proportion to what it uses), between
 * QS_QUAR_FLOOR and the cap's QS_QUAR_BYTES.  Under the node's lock. */
static uint32_t quar_room(const qslab_cache *c, const struct qs_node *n, const struct qs_quar *q)
{
    size_t slabs = QS_LOAD(n->list.nr_partial) + QS_LOAD(n->list.nr_full);
    /* (order: tune may change it meanwhile, relaxed; an estimate either way:
     * the lists may hold slabs of an older order) */
    size_t bytes = (slabs * qs_slab_bytes(QS_LOAD(c->order))) / 16;
    if (bytes < QS_QUAR_FLOOR)
        bytes = QS_QUAR_FLOOR;
    size_t objs = bytes / c->slot_size;
    if (objs < 1)
        objs = 1;
    return objs < q->cap ? (uint32_t)objs : q->cap;
}

static size_t quar_size(uint32_t cap)
{
    return sizeof(struct qs_quar) + (size_t)cap * sizeof(void *);
}

void dbg_quarantine_prepare(qslab_cache *c, int node)
{
    struct qs_node *n = &c->nodes[node];
    if (__atomic_load_n(&n->quar, __ATOMIC_ACQUIRE))
        return;
    uint32_t cap = quar_cap(c);
    if (!cap)
        return;
    struct qs_quar *q = qs_meta_alloc(quar_size(cap));
    if (!q)
        return; /* no memory for it: the frees go straight to the slabs */
    q->cap = cap;
    q->rnd = (qs_os_random64() ^ (uintptr_t)q) | 1;
    struct qs_quar *none = NULL;
    if (!__atomic_compare_exchange_n(&n->quar, &none, q, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        qs_meta_free(q, quar_size(cap));
}

void *dbg_quarantine_swap(qslab_cache *c, struct qs_slab **s, void *obj)
{
    struct qs_quar *q = __atomic_load_n(&c->nodes[(*s)->node].quar, __ATOMIC_ACQUIRE);
    if (!q)
        return obj;
    *qs_link(c, obj) = QS_QUAR_WORD(c->secret);
    if (q->nr < quar_room(c, &c->nodes[(*s)->node], q)) {
        q->obj[q->nr] = obj;
        __atomic_store_n(&q->nr, q->nr + 1, __ATOMIC_RELAXED); /* (dbg_quarantine_objects) */
        return NULL;
    }
    uint64_t x = q->rnd;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    q->rnd = x;
    void **e = &q->obj[(uint32_t)((x >> 32) * q->nr >> 32)]; /* nr: 1 .. cap */
    void *out = *e;
    *e = obj;
    *s = qs_slab_lookup(out); /* a slab of this node: its object keeps it */
    return out; /* its word QS_QUAR_WORD: the caller's slab_put links it */
}

/* One object out of node n's quarantine, with its slab; NULL: empty. */
static void *quarantine_pop(qslab_cache *c, struct qs_node *n, struct qs_slab **s)
{
    void *obj = NULL;
    qs_lock_acquire(&n->lock);
    struct qs_quar *q = n->quar;
    if (q && q->nr) {
        obj = q->obj[q->nr - 1];
        __atomic_store_n(&q->nr, q->nr - 1, __ATOMIC_RELAXED);
        *s = qs_slab_lookup(obj);
    }
    qs_lock_release(&n->lock);
    return obj;
}

void dbg_quarantine_drain(qslab_cache *c)
{
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_slab *s;
        void *obj;
        while ((obj = quarantine_pop(c, &c->nodes[i], &s)) != NULL)
            qs_node_put(c, s, obj);
    }
}

void dbg_quarantine_release(qslab_cache *c)
{
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_quar *q = c->nodes[i].quar;
        if (q)
            qs_meta_free(q, quar_size(q->cap));
        c->nodes[i].quar = NULL;
    }
}

unsigned long dbg_quarantine_objects(const qslab_cache *c)
{
    unsigned long objs = 0;
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_quar *q = __atomic_load_n(&c->nodes[i].quar, __ATOMIC_ACQUIRE);
        if (q)
            objs += __atomic_load_n(&q->nr, __ATOMIC_RELAXED);
    }
    return objs;
}
