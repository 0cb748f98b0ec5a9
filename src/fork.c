/*
 * fork.c - fork from a multithreaded program.
 *
 * The prepare handler takes every qslab lock, in the lock order of
 * internal.h (qs_global, every queue lock, every node lock, every inbox and stash lock, the
 * page pools, the map lock, the meta lock), so that no lock is held by a thread that does
 * not exist in the child.  Parent and child release them all; the child also
 * forgets the purger (threads do not survive fork) and may allocate at once.
 * Queues of the parent's other threads stay attached to owners that do not
 * exist in the child: their queued objects are unreachable there, as with
 * any per-thread cache.
 */
#include "front.h"

static void for_each_lock(void (*op)(qs_lock *), bool reverse)
{
    /* qs_global is held by the caller: the cache and queue lists are stable.
     * Passes in lock order: queue locks (CPU queues), node locks, inbox and
     * stash locks; released in the reverse order. */
    for (int pass = 0; pass < 3; pass++) {
        int which = reverse ? 2 - pass : pass;
        for (qslab_cache *c = qs_caches; c; c = c->next) {
            if (which == 1)
                for (int n = 0; n < qs_nr_nodes; n++)
                    op(&c->nodes[n].lock);
            else
                for (struct qs_queue *q = c->queues; q; q = q->all_next) {
                    if (which == 0) {
                        op(&q->lock);
                    } else {
                        op(&q->inbox.lock);
                        op(&q->stash_lock);
                    }
                }
        }
    }
}

static void fork_prepare(void)
{
    qs_lock_acquire(&qs_global);
    for_each_lock(qs_lock_acquire, false);
    for (int f = 0; f < QS_FRONT_NR; f++)
        if (qs_fronts[f]->lock_all)
            qs_fronts[f]->lock_all(true);
    qs_page_lock_all(true);
    qs_meta_lock_all(true);
    qs_guard_fork(0); /* the guard pool's lock: a leaf */
}

static void fork_release(void)
{
    qs_guard_fork(1);
    qs_meta_lock_all(false);
    qs_page_lock_all(false);
    for (int f = QS_FRONT_NR - 1; f >= 0; f--)
        if (qs_fronts[f]->lock_all)
            qs_fronts[f]->lock_all(false);
    for_each_lock(qs_lock_release, true);
    qs_lock_release(&qs_global);
}

static void fork_child(void)
{
    fork_release();
    qs_guard_fork(2); /* after fork_release's qs_guard_fork(1): the sampler is gone */
    qs_node_purger_forked();
    if (qs_self.state == 1) /* the forking thread is the child's only one: its id */
        qs_self.tid = qs_os_gettid();
}

void qs_fork_init(void)
{
    qs_os_atfork(fork_prepare, fork_release, fork_child);
}
