/*
 * owner.c - who owns a queue.
 *
 * Today the owner is a thread: struct qs_owner lives in initial-exec TLS and
 * holds an array of queue pointers indexed by cache id, so the fast path
 * finds its queue with two TLS loads and one indexed load.  Everything else
 * in qslab sees only "the caller's queue" (qs_queue_of / qs_queue_attach),
 * so a later per-CPU owner (restartable sequences) changes this file and
 * fastpath.h's qs_queue_of, not the slow paths.
 *
 * States: 0 new, 1 active (has or may make queues), 2 exited (its exit
 * destructor ran; it gets no queue again).
 *
 * Lifetime: a queue is made on a thread's first use of a cache and linked on
 * the cache's queue list.  When the thread exits, qs_queue_retire gives its
 * objects back and hands its slabs to the node lists, and the queue goes to
 * the cache's pool for the next new thread.  Queues are freed only when the
 * cache is destroyed, so a stale pointer to a queue (a sender that read a
 * slab's owner just before the handover) still finds a valid inbox.
 *
 * Locking: the slot array is written by its thread under qs_global (growth)
 * and by qslab_cache_destroy under qs_global (clearing a slot); the thread
 * reads its own slots without a lock.
 */
#include "internal.h"

#include <string.h>

struct qs_queue qs_no_queue; /* never written: empty, owns no slab */

__thread struct qs_owner qs_self __attribute__((tls_model("initial-exec"))) = {
    .fixed = {[0 ... QS_FIXED_SLOTS - 1] = &qs_no_queue},
};

static void owner_exit(void *arg);

void qs_owner_init(void)
{
    /* the destructor runs at thread exit while the key's value is non-NULL */
    static int registered;
    if (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE)) {
        qs_lock_acquire(&qs_global);
        if (!registered) {
            qs_os_thread_exit_init(owner_exit);
            __atomic_store_n(&registered, 1, __ATOMIC_RELEASE);
        }
        qs_lock_release(&qs_global);
    }
    struct qs_owner *o = &qs_self;
    o->node = qs_node_of_cpu(qs_os_current_cpu());
    o->state = 1;
    qs_os_thread_watch(o);
}

static bool slots_grow(struct qs_owner *o, unsigned id)
{
    unsigned cap = o->cap ? o->cap : 32;
    while (cap <= id)
        cap *= 2;
    struct qs_queue **slots = qs_meta_alloc(cap * sizeof(*slots));
    if (!slots)
        return false;
    if (o->slots)
        memcpy(slots, o->slots, o->cap * sizeof(*slots));
    struct qs_queue **old = o->slots;
    unsigned old_cap = o->cap;
    __atomic_store_n(&o->slots, slots, __ATOMIC_RELEASE);
    __atomic_store_n(&o->cap, cap, __ATOMIC_RELEASE);
    qs_meta_free(old, old_cap * sizeof(*old));
    return true;
}

struct qs_queue *qs_queue_attach(qslab_cache *c)
{
    qs_init();
    struct qs_owner *o = &qs_self;
    /* Past its exit destructor a thread still frees (and may allocate) from
     * later destructors and libc's own clean-up; a queue made now would never
     * be retired, so such a thread works without one (node lists, orphan
     * counters). */
    if (o->state == 2)
        return NULL;
    if (o->state != 1)
        qs_owner_init();
    struct qs_queue *q = NULL;
    qs_lock_acquire(&qs_global);
    if (c->id >= o->cap && !slots_grow(o, c->id))
        goto out;
    if ((q = o->slots[c->id]))
        goto out;
    if ((q = c->pool)) {
        c->pool = q->pool_next;
        q->pool_next = NULL;
    } else {
        q = qs_meta_alloc(sizeof(*q));
        if (!q)
            goto out;
        q->cache = c;
        q->all_next = c->queues;
        c->queues = q;
    }
    q->owner = o;
    q->node = o->node;
    q->stamp = QS_STAMP(c->secret);
    q->link_off = c->link_off;
    QS_STORE(q->hiwater, QS_LOAD(c->hiwater));
    if (!q->slots && !qs_queue_reserve(q, 1)) { /* a first few slots; they grow */
        q->owner = NULL;
        q->pool_next = c->pool;
        c->pool = q;
        q = NULL;
        goto out;
    }
    QS_STORE(q->limit, q->hiwater < q->cap ? q->hiwater : q->cap);
    qs_lock_acquire(&q->inbox.lock);
    q->inbox.dead = 0;
    qs_lock_release(&q->inbox.lock);
    qs_owner_set_slot(o, c->id, q);
out:
    qs_lock_release(&qs_global);
    return q;
}

static void owner_exit(void *arg)
{
    struct qs_owner *o = &qs_self;
    o->state = 2; /* exiting: e.g. no purger start from under qs_global */
    qs_lock_acquire(&qs_global);
    for (unsigned i = 0; i < o->cap; i++) {
        struct qs_queue *q = o->slots[i];
        if (!q)
            continue;
        qslab_cache *c = q->cache;
        qs_queue_retire(c, q);
        q->owner = NULL;
        q->pool_next = c->pool;
        c->pool = q;
        qs_owner_set_slot(o, i, NULL);
    }
    struct qs_queue **slots = o->slots;
    unsigned cap = o->cap;
    __atomic_store_n(&o->cap, 0, __ATOMIC_RELEASE);
    o->slots = NULL;
    qs_lock_release(&qs_global);
    qs_meta_free(slots, cap * sizeof(*slots));
    /* the slabs this thread gave back are on the empty FIFOs: make sure the
     * purger runs even if nothing else ever touches them */
    qs_node_purger_start_wanted();
}

void qs_owner_detach_cache(qslab_cache *c)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        if (q->owner)
            qs_owner_set_slot(q->owner, c->id, NULL);
}
