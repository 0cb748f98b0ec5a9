/*
 * unit: objects that are never queued (over 32 KiB: front/slqb/budget.c
 * slqb_unqueued) come from their node's slabs and go back to them at once,
 * whoever frees them.  A producer allocates K blocks of 64 KiB and writes
 * them; a consumer on another CPU (another thread) frees them all.  Right
 * after, every slab is empty and the node's (none is an owner's, nothing
 * waits in a batch or an inbox), and the producer's next K allocations take
 * no new slab: the blocks the consumer freed serve them.  Then the same with
 * the producer freeing its own blocks.  The invariant walker passes after
 * each step.
 *
 * Runs with the purger off (QSLAB_PURGE=0, by running itself again), so
 * that nothing but the frees moves the slabs.  With per-CPU owners the two
 * threads are pinned to two CPUs (with one allowed CPU, per-thread only).
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { K = 8, SIZE = 64 << 10 };
static qslab_cache *c;
static void *objs[K];
static int cpus[2], ncpus;

static struct qslab_cache_stats stats(void)
{
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    return st;
}

static void *consumer(void *arg)
{
    (void)arg;
    if (ncpus == 2)
        CHECK(tu_pin_cpu(cpus[1]) == 0);
    for (int i = 0; i < K; i++)
        qslab_cache_free(c, objs[i]);
    return NULL;
}

static void alloc_all(void)
{
    for (int i = 0; i < K; i++) {
        CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
        if (objs[i])
            memset(objs[i], 0x5a, SIZE);
    }
}

/* Every block freed (by `who`): every slab empty and the node's. */
static void check_home(const char *who)
{
    struct qslab_cache_stats st = stats();
    CHECKF(st.active_objs == 0, "%s: %lu blocks still in use", who, st.active_objs);
    CHECKF(st.queued_objs == 0, "%s: %lu freed blocks held in queues or inboxes", who, st.queued_objs);
    CHECKF(st.owner_slabs == 0, "%s: %lu slabs held by owners", who, st.owner_slabs);
    CHECKF(st.empty_slabs == st.num_slabs, "%s: %lu of %lu slabs empty (%lu partial): freed blocks on their way home",
           who, st.empty_slabs, st.num_slabs, st.partial_slabs);
    CHECK(qslab_cache_validate(c) == 0);
}

/* The next K allocations reuse the freed blocks: no new slab. */
static void check_reused(const char *who)
{
    struct qslab_cache_stats st0 = stats();
    alloc_all();
    struct qslab_cache_stats st1 = stats();
    CHECKF(st1.new_slab == st0.new_slab, "%s: %lu new slabs for blocks freed a moment ago", who,
           st1.new_slab - st0.new_slab);
    CHECK(tu_dups(objs, K) == 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) { /* once more, with the purger off */
        int st = tu_reexec("nopurge", "QSLAB_PURGE", "0");
        CHECKF(st == 0, "the run with QSLAB_PURGE=0 exited %d", st);
        return tu_done();
    }
    ncpus = tu_allowed_cpus(cpus);
    c = qslab_cache_create("t-unqueued", SIZE, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c || tf_debug_skip("remote_unqueued", c))
        return tu_done();
    if (tf_guard_skip("remote_unqueued", c)) /* a sampled allocation comes from a guarded slot */
        return tu_done();
    tf_pin_slqb("t-unqueued"); /* SLQB's queues, whatever QSLAB_FRONT says */
    CHECK(qslab_tune("t-unqueued", "empty_decay_ms", "600000") == 0); /* the FIFO keeps them */
    if (ncpus == 2)
        CHECK(tu_pin_cpu(cpus[0]) == 0);

    /* 1. freed by another CPU (thread) */
    alloc_all();
    CHECKF(stats().owner_slabs == 0, "an unqueued block came from an owner's slab (%lu)", stats().owner_slabs);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, consumer, NULL) == 0);
    pthread_join(t, NULL);
    check_home("freed by another thread");
    check_reused("after another thread's frees");

    /* 2. freed by their allocator */
    for (int i = 0; i < K; i++)
        qslab_cache_free(c, objs[i]);
    check_home("freed by the allocating thread");
    check_reused("after our own frees");
    for (int i = 0; i < K; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
