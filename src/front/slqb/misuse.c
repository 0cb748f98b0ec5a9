/*
 * misuse.c - SLQB's answers to a bad free: a second free of an object that
 * is back on its slab's list (the list repaired, the object put back
 * once), a queued object whose word is neither the free stamp nor a link,
 * and the checked slow path a free takes when the object's word looks free
 * (is it in a queue, a batch, an inbox or its slab's list already?).  A
 * list walker that meets a bad link reports it with core/slab.c's
 * qs_report_bad_link.  docs/design.md, "Free bits", argues the rules.
 */
#include "front/slqb/fast.h"
#include "front/slqb/slqb.h"

/* obj, going onto slab s's free list, is on it already (its free bit,
 * internal.h): it was freed again while it sat there, and that second free
 * wrote over its link (a queue's stamp, a batch's link), cutting the list
 * at obj.  The list ends before obj now (a walk on this error path only);
 * what followed obj is lost for good (counted in use, never handed out);
 * obj goes back on the list, once.  The caller reports (slqb_put_twice_report). */
QS_NOINLINE void slqb_slab_put_twice(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (s->inuse == 0) {
        /* every object of the slab is free (obj too): the slab went empty
         * with its first free and is on an empties list already (a
         * router's, the stash, the node's FIFO), where it stays.  Its list
         * is rebuilt whole, nothing lost (fuzz bug 10: moved to an empties
         * list a second time, it was handed to two refills) */
        qs_fbits_clear_slab(s);
        s->freelist = NULL;
        for (uint32_t i = s->objects; i-- > 0;) {
            void *o = s->base + (size_t)i * c->slot_size;
            *qs_link(c, o) = qs_enc(c, s->freelist);
            if (!s->freelist)
                s->tail = o;
            s->freelist = o;
            qs_fbit_set(s, o);
        }
        return;
    }
    uint32_t n = s->objects - s->inuse, len = 0;
    void *prev = NULL, *p = s->freelist;
    while (p && p != obj && len < n) {
        bool bad;
        void *next = qs_list_next(c, s, *qs_link(c, p), &bad);
        if (bad)
            break;
        prev = p;
        p = next;
        len++;
    }
    qs_fbits_clear_slab(s);
    if (prev)
        *qs_link(c, prev) = qs_enc(c, NULL);
    else
        s->freelist = NULL;
    s->tail = prev;
    p = s->freelist;
    for (uint32_t i = 0; i < len; i++) {
        bool bad;
        qs_fbit_set(s, p);
        p = qs_dec(c, *qs_link(c, p), &bad);
    }
    s->inuse = s->objects - len; /* obj too: it goes back now */
    qs_fbit_set(s, obj);
    qs_slab_give(c, s, obj);
}

/* Report what slqb_slab_put_twice repaired; the second free was counted where
 * it was pushed (through q, or the cache's orphan counters). */
QS_NOINLINE void slqb_put_twice_report(qslab_cache *c, struct qs_queue *q, void *obj)
{
    qs_fatal("double free of %p in cache %s (freed again while it was free)", obj, c->name);
    qs_uncount_frees(c, q, 1);
}

/* Report a queued object whose word is neither the free stamp nor a
 * free-list link (see qs_queue_corrupt); true if it is a second free of
 * one object: 0 is what the first of its two entries left when it was
 * handed out. */
bool qs_report_unstamped(qslab_cache *c, void *obj)
{
    uintptr_t w = *qs_link(c, obj);
    bool twice = w == 0;
    if (twice)
        qs_fatal("double free of %p in cache %s (found before it was handed out again)", obj,
                 c->name);
    else
        qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after "
                 "free or double free?)", c->name, obj);
    return twice;
}

static bool list_has(qslab_cache *c, void *head, unsigned long max, const void *obj)
{
    for (unsigned long i = 0; head && i < max; i++) {
        if (head == obj)
            return true;
        bool bad;
        head = qs_dec(c, *qs_link(c, head), &bad);
        if (bad)
            return false;
    }
    return false;
}

static bool vec_has(void *const *v, unsigned long n, const void *obj)
{
    for (unsigned long i = 0; i < n; i++)
        if (v[i] == obj)
            return true;
    return false;
}

/* obj is freed twice in a row (it is the queue's top), or its word looks
 * like a free object's.  Look for obj where the caller may look: its queue;
 * for its own slabs, the slab's free list and its inbox; for node-owned
 * slabs, the slab's free list under the node lock.  An object sitting in
 * another live thread's queue is not found (that queue is its owner's
 * alone); the caller then frees it, as glibc's tcache does when its key
 * matches by chance, and the second entry is caught when it is popped
 * (qs_queue_try_pop).  True (after reporting) if it is a double free. */
bool qs_double_free_check(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    qs_stat(c, q, QS_DOUBLE_FREE_CHECK, 1);
    bool found = false;
    if (q) { /* NULL: a caller without a queue (SLOB's big objects) */
        found = vec_has(q->slots, QS_TOP_NR(q->top), obj);
        for (unsigned k = 0; k < QS_PENDING && !found; k++)
            found = list_has(c, q->pending[k].head, q->pending[k].n, obj);
        if (!found) { /* a CPU's open batch (racing with its appends: a hint) */
            uint64_t fb = QS_LOAD(q->fb);
            found = fb && list_has(c, QS_FB_HEAD(fb), QS_FB_N(fb), obj);
        }
    }
    struct qs_list *own = qs_slab_owner(s);
    if (!found && q && own == &q->list) {
        found = list_has(c, s->freelist, s->objects, obj);
        if (!found) { /* freed by another thread and posted back to us */
            qs_lock_acquire(&q->inbox.lock);
            found = list_has(c, q->inbox.head, q->inbox.nr, obj);
            qs_lock_release(&q->inbox.lock);
        }
    } else if (!found && own && own->node) { /* node-owned: its lock */
        qs_lock_acquire(&own->node->lock);
        if (qs_slab_owner(s) == own)
            found = list_has(c, s->freelist, s->objects, obj);
        qs_lock_release(&own->node->lock);
    }
    if (found)
        qs_fatal("double free of %p in cache %s", obj, c->name);
    return found;
}

/* The free of the queue's top object: a double free, unless it was handed
 * out meanwhile by a path that does not pop (it cannot be: every
 * allocation from the queue pops), so qs_double_free_check finds it. */
QS_NOINLINE void qs_free_suspect(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    if (!qs_double_free_check(c, q, s, obj))
        qs_queue_push(c, q, s, obj);
}

/* The queue's top object does not look free (qs_queue_try_pop): report it,
 * and if the handler returns, drop the entry (never hand it out).  A word
 * of 0 is what the first of two entries of one object left when it was
 * handed out: a double free whose second free was not next to the first. */
void qs_queue_corrupt(qslab_cache *c, struct qs_queue *q)
{
    unsigned nr = QS_TOP_NR(q->top);
    /* the handler returned: drop the entry, never hand it out.  A second
     * free was no free: it leaves the count of frees; an overwritten object
     * was freed once and is lost (leaked, in use from its slab's side) */
    bool twice = qs_report_unstamped(c, q->slots[nr - 1]);
    qs_queue_nr_set(q, nr - 1);
    if (twice)
        slqb_queue_uncount(q, 1);
}
