/*
 * fork.c - fork from a multithreaded program.
 *
 * The prepare handler takes every qslab lock, in the lock order of
 * internal.h (the kmalloc classes' maker's, qs_global, every queue lock, every node lock and its FIFO's, every inbox and stash lock, the
 * page pools, the map lock, the meta lock, and the leaves: the guard pool's,
 * the zero-size blocks'), so that no lock is held by a thread that does
 * not exist in the child.  Parent and child release them all; the child also
 * forgets the purger (threads do not survive fork) and may allocate at once.
 * Queues of the parent's other threads stay attached to owners that do not
 * exist in the child: their queued objects are unreachable there, as with
 * any per-thread cache.
 *
 * A process that has never had a second thread skips the locks (libc tells,
 * qs_os_single_threaded): no other thread exists to hold one, and the forking
 * thread holds none while it is in fork() (qslab never forks, and a signal
 * handler's fork inside qslab would deadlock on the locks anyway).  Taking
 * them cost a single-threaded forker (a shell, make) some 15 page faults a
 * fork, parent and child together (a shell's fork and exec of /bin/true:
 * 129 faults with the locks, 114.5 without, 94 on glibc's malloc): every
 * page with a lock word on it, written before the fork and again after it,
 * is a copy-on-write fault in the parent and again in the child.  The decision is made once, in prepare, and
 * the parent and child handlers follow it (fork_locked): a thread can be
 * created only by a running thread, and the only one is inside fork().
 */
#include "front/front.h"
#include "debug/debug.h"
#include "api/zero.h"
#include "api/api.h"
#include "owner/owner.h"

static void for_each_lock(void (*op)(qs_lock *), bool reverse)
{
    /* qs_global is held by the caller: the cache and queue lists are stable.
     * Passes in lock order: queue locks (CPU queues), node locks (each with
     * its FIFO's home locks), inbox and stash locks; released in the reverse
     * order. */
    for (int pass = 0; pass < 3; pass++) {
        int which = reverse ? 2 - pass : pass;
        for (qslab_cache *c = qs_caches; c; c = c->next) {
            if (which == 1)
                for (int n = 0; n < qs_nr_nodes; n++) {
                    op(&c->nodes[n].lock);
                    for (int h = 0; h < QS_FIFO_HOMES; h++) /* its FIFO's homes, after it */
                        op(&c->nodes[n].fifo[h].lock);
                }
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

/* Written by the forking thread in prepare and read by it (or by the child's
 * copy of it) after: when other threads exist, under qs_global. */
static bool fork_locked;

static void fork_prepare(void)
{
    if (qs_os_single_threaded()) {
        if (fork_locked) /* no store when unchanged: the page may be shared with the last child */
            fork_locked = false;
        return;
    }
    qs_kmalloc_fork(true); /* the classes' maker, before qs_global */
    qs_lock_acquire(&qs_global);
    fork_locked = true;
    for_each_lock(qs_lock_acquire, false);
    for (int f = 0; f < QS_FRONT_NR; f++)
        if (qs_fronts[f]->lock_all)
            qs_fronts[f]->lock_all(true);
    qs_page_lock_all(true);
    qs_meta_lock_all(true);
    qs_guard_fork(0); /* the guard pool's lock: a leaf */
    qs_zero_fork(true); /* the zero-size blocks' lock: a leaf */
    qs_large_fork(true); /* the freed large blocks' ring: a leaf */
}

static void fork_release(void)
{
    if (!fork_locked)
        return;
    qs_large_fork(false);
    qs_zero_fork(false);
    qs_guard_fork(1);
    qs_meta_lock_all(false);
    qs_page_lock_all(false);
    for (int f = QS_FRONT_NR - 1; f >= 0; f--)
        if (qs_fronts[f]->lock_all)
            qs_fronts[f]->lock_all(false);
    for_each_lock(qs_lock_release, true);
    qs_lock_release(&qs_global);
    qs_kmalloc_fork(false);
}

static void fork_child(void)
{
    fork_release();
    qs_guard_fork(2); /* after fork_release's qs_guard_fork(1): the sampler is gone */
    qs_node_purger_forked();
    qs_defrag_forked(); /* passes of threads the child does not have */
    qs_owners_forked(); /* the child's one thread */
    if (qs_self.state == 1) /* the forking thread is the child's only one: its id */
        qs_self.tid = qs_os_gettid();
}

QS_STARTUP void qs_fork_init(void)
{
    qs_os_atfork(fork_prepare, fork_release, fork_child);
}
