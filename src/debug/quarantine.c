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
 * WHERE IT GOES: THE READY STACK.  An object that leaves goes onto the
 * quarantine's ready stack while that has room (a quarter of the
 * quarantine's, ready_room), else to its slab's free list; the node's
 * next allocation takes the stack's top (dbg_quarantine_reuse), checked
 * as one from a free list is (its fill and red zones: a write after free
 * is reported there).  A program that frees and allocates in turn so
 * recycles objects through the stack without touching their slabs, as the
 * owners' queues do for the other caches: a free list's put and take read
 * the slab's descriptor and free bits, lines the quarantine's random
 * choice has let go cold, and the object's own lines are asked for as it
 * goes onto the stack (QS_READY_PREFETCH).  The order of reuse stays the
 * quarantine's: which object leaves is still its random choice.  An object
 * on the stack is free in every other respect: its word QS_QUAR_WORD, its
 * fill checked by the walks, counted with the quarantine's.
 *
 * LOCKING.  A node's quarantine and ready stack are touched only under
 * that node's lock, the lock of its slabs' free lists: an object is in
 * exactly one of allocated, quarantined, on the ready stack, or on its
 * slab's free list, and each move between them happens under the one lock
 * (the walks hold it too, so they never meet an object half checked or
 * half filled).  Only the counts nr and ready are read without it
 * (dbg_quarantine_objects, and reuse's look for an empty stack, which it
 * reads again under the lock).  Its array is made outside the
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
#define QS_READY_PREFETCH 512     /* bytes of an object put on the ready stack asked for */

/* The objects held, obj[0 .. nr), and the ready stack, obj[cap .. cap +
 * ready) (top last); each one's slab is found when it leaves
 * (qs_slab_lookup).  nr and ready are stored atomically for
 * dbg_quarantine_objects, changed under the lock. */
struct qs_quar {
    uint32_t nr, cap;
    uint64_t rnd; /* xorshift64 state, under the lock */
    uint32_t ready;
    void *obj[]; /* cap + ready_room(cap) */
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

/* The ready stack's room for a quarantine's room (or its array's, for
 * the cap): a quarter of it, at least one */
static uint32_t ready_room(uint32_t room)
{
    return room / 4 + 1;
}

static size_t quar_size(uint32_t cap)
{
    return sizeof(struct qs_quar) + (size_t)(cap + ready_room(cap)) * sizeof(void *);
}

/* The ready stack's top, taken off; NULL: empty.  Under the node's lock. */
static void *ready_pop(struct qs_quar *q)
{
    if (!q || !q->ready)
        return NULL;
    __atomic_store_n(&q->ready, q->ready - 1, __ATOMIC_RELAXED); /* (dbg_quarantine_objects) */
    return q->obj[q->cap + q->ready];
}

void dbg_quarantine_prepare(qslab_cache *c, int node)
{
    struct qs_node *n = &c->nodes[node]; /* its quarantine missing (debug_free): a racer's CAS wins */
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
    uint32_t room = quar_room(c, &c->nodes[(*s)->node], q);
    if (q->nr < room) {
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
    if (q->ready < ready_room(room)) { /* the next allocation's, likely: its lines asked for */
        q->obj[q->cap + q->ready] = out;
        __atomic_store_n(&q->ready, q->ready + 1, __ATOMIC_RELAXED);
        for (size_t k = 0; k < c->obj_size && k < QS_READY_PREFETCH; k += 64)
            __builtin_prefetch((char *)out + k, 1);
        return NULL;
    }
    *s = qs_slab_lookup(out); /* a slab of this node: its object keeps it */
    return out; /* its word QS_QUAR_WORD: the caller's slab_put links it */
}

/* The top of node's ready stack, checked and allocated (its word 0); NULL:
 * the stack is empty (the caller takes from the slabs).  One whose check
 * fails is reported and kept out of use as qs_node_alloc keeps one, and
 * the next is taken.  Each is counted as a slow allocation, as a slab's. */
void *dbg_quarantine_reuse(qslab_cache *c, int node)
{
    struct qs_node *n = &c->nodes[node];
    struct qs_quar *q = __atomic_load_n(&n->quar, __ATOMIC_ACQUIRE);
    if (!q || !__atomic_load_n(&q->ready, __ATOMIC_RELAXED)) /* a hint: read again below */
        return NULL;
    void *obj;
    qs_lock_acquire(&n->lock);
    while ((obj = ready_pop(q)) != NULL) {
        *qs_link(c, obj) = 0; /* allocated: the walk reads its red zones only */
        qs_stat_locked(NULL, n, QS_NEV_ALLOC_SLOW, 1);
        if (qs_debug_alloc_locked(c, qs_slab_lookup(obj), obj))
            break;
    }
    qs_lock_release(&n->lock);
    return obj;
}

/* One object out of node n's ready stack or quarantine, with its slab;
 * NULL: both empty. */
static void *quarantine_pop(qslab_cache *c, struct qs_node *n, struct qs_slab **s)
{
    qs_lock_acquire(&n->lock);
    struct qs_quar *q = n->quar;
    void *obj = ready_pop(q);
    if (!obj && q && q->nr) {
        obj = q->obj[q->nr - 1];
        __atomic_store_n(&q->nr, q->nr - 1, __ATOMIC_RELAXED);
    }
    if (obj)
        *s = qs_slab_lookup(obj);
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
            objs += __atomic_load_n(&q->nr, __ATOMIC_RELAXED) + __atomic_load_n(&q->ready, __ATOMIC_RELAXED);
    }
    return objs;
}
