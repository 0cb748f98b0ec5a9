/*
 * unit: what a refill's claim does with an inbox larger than the queue's room
 * (front/slqb/remote.c slqb_claim_into).  A producer allocates N objects, a
 * consumer on another CPU (another thread) frees them all: they reach the
 * producer's inbox.  The producer's next refill takes what its queue has
 * room for and puts the rest back at the inbox's head, not on the slabs: no
 * slab becomes partial or empty, and the next refills take the rest, so the
 * producer allocates all N again without a new slab.  Then the decay: once
 * what a claim put back has waited for the cache's empty_decay_ms, the next
 * claim sends the rest home to the slabs.  Then a shrink sends the inbox
 * home at once.  The invariant walker passes after each step.
 *
 * Runs with the purger off (QSLAB_PURGE=0, by running itself again): its
 * tick empties an idle CPU's queue, inbox included, and would route what
 * this test counts while the consumer runs.  With per-CPU owners the two
 * threads are pinned to two CPUs (with one allowed CPU, per-thread only).
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "front/fastpath.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { N = 3000, SIZE = 256 };
static qslab_cache *c;
static void *objs[N], *sorted[N], *again[2 * N];
static int cpus[2], ncpus;

static void pin(int cpu)
{
    CHECKF(tu_pin_cpu(cpu) == 0, "cannot pin to CPU %d", cpu);
}

/* The producer's queue's inbox: how many objects it holds. */
static unsigned long inbox_nr(void)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!q)
        return 0;
    qs_lock_acquire(&q->inbox.lock);
    unsigned long n = q->inbox.nr;
    qs_lock_release(&q->inbox.lock);
    return n;
}

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
        pin(cpus[1]);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    return NULL;
}

/* Every object freed by the consumer thread; then how many reached our inbox. */
static unsigned long consume_all(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, consumer, NULL) == 0);
    pthread_join(t, NULL);
    return inbox_nr();
}

static void free_again(int n)
{
    for (int i = 0; i < n; i++)
        qslab_cache_free(c, again[i]);
}

static void alloc_all(void)
{
    for (int i = 0; i < N; i++)
        CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
}

/* Allocate until a refill claims the inbox (the queue's objects first);
 * returns how many that took, held in again[from..]. */
static int alloc_until_claim(int from)
{
    unsigned long claims = stats().claim;
    int k = from;
    while (k < 2 * N && stats().claim == claims) {
        CHECK((again[k] = qslab_cache_alloc(c)) != NULL);
        k++;
    }
    CHECKF(stats().claim == claims + 1, "no claim after %d allocations", k - from);
    return k - from;
}

int main(int argc, char **argv)
{
    if (argc < 2) { /* once more, with the purger off */
        int st = tu_reexec("nopurge", "QSLAB_PURGE", "0");
        CHECKF(st == 0, "the run with QSLAB_PURGE=0 exited %d", st);
        return tu_done();
    }
    ncpus = tu_allowed_cpus(cpus);
    c = qslab_cache_create("t-remote-inbox", SIZE, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c || tf_debug_skip("remote_inbox", c))
        return tu_done();
    if (tf_guard_skip("remote_inbox", c)) /* a sampled allocation comes from a guarded slot, not the inbox */
        return tu_done();
    tf_pin_slqb("t-remote-inbox"); /* SLQB's inboxes, whatever QSLAB_FRONT says */
    if (qs_percpu() && ncpus < 2) {
        fprintf(stderr, "remote_inbox: per-CPU queues and one allowed CPU: nothing to test\n");
        qslab_cache_destroy(c);
        return tu_done();
    }
    if (ncpus == 2)
        pin(cpus[0]);
    CHECK(qslab_tune("t-remote-inbox", "freebatch", "32") == 0); /* freebatch <= hiwater */
    CHECK(qslab_tune("t-remote-inbox", "hiwater", "64") == 0);
    CHECK(qslab_tune("t-remote-inbox", "empty_decay_ms", "600000") == 0);

    /* 1. the rest stays in the inbox, and serves the next refills */
    alloc_all();
    for (int i = 0; i < N; i++)
        sorted[i] = objs[i];
    qsort(sorted, N, sizeof *sorted, tu_cmp_ptr);
    unsigned long in0 = consume_all();
    /* what the consumer holds back (per-CPU: its short queue and open and
     * pending batches) is a few freebatches at most */
    CHECKF(in0 >= N / 2, "inbox holds %lu of %d remote frees", in0, N);
    /* our queue's own objects, never handed out, come first */
    unsigned long qnr = QS_TOP_NR(qs_queue_of(c)->top);
    struct qslab_cache_stats st0 = stats();
    int took = alloc_until_claim(0);
    unsigned long in1 = inbox_nr();
    struct qslab_cache_stats st1 = stats();
    CHECKF(in1 > 0 && in1 < in0, "inbox %lu -> %lu after a claim", in0, in1);
    CHECKF(st1.partial_slabs == st0.partial_slabs && st1.empty_slabs == st0.empty_slabs,
           "the claim sent objects home: partial slabs %lu -> %lu, empty %lu -> %lu", st0.partial_slabs,
           st1.partial_slabs, st0.empty_slabs, st1.empty_slabs);
    CHECK(qslab_cache_validate(c) == 0);
    int total = (int)(qnr + in0);
    for (int i = took; i < total; i++)
        CHECK((again[i] = qslab_cache_alloc(c)) != NULL);
    struct qslab_cache_stats st2 = stats();
    CHECKF(st2.new_slab == st0.new_slab, "%lu new slabs while %lu freed objects waited in the inbox",
           st2.new_slab - st0.new_slab, in0);
    CHECKF(inbox_nr() == 0, "inbox still holds %lu", inbox_nr());
    int foreign = 0;
    for (int i = (int)qnr; i < total; i++)
        if (!bsearch(&again[i], sorted, N, sizeof *sorted, tu_cmp_ptr))
            foreign++;
    CHECKF(foreign == 0, "%d of the %lu objects allocated again are not the ones freed", foreign, in0);
    CHECK(tu_dups(again, total) == 0);
    CHECK(qslab_cache_validate(c) == 0);
    free_again(total);

    /* 2. what waited past empty_decay_ms goes home at the next claim */
    alloc_all();
    consume_all();
    CHECK(qslab_tune("t-remote-inbox", "empty_decay_ms", "20") == 0);
    took = alloc_until_claim(0);
    CHECKF(inbox_nr() > 0, "the claim put nothing back");
    tu_sleep_ms(60);
    st0 = stats();
    took += alloc_until_claim(took);
    st1 = stats();
    CHECKF(inbox_nr() == 0, "the inbox kept %lu objects past the decay", inbox_nr());
    CHECKF(st1.partial_slabs + st1.empty_slabs > st0.partial_slabs + st0.empty_slabs,
           "nothing went home: partial slabs %lu, empty %lu", st1.partial_slabs, st1.empty_slabs);
    CHECK(qslab_cache_validate(c) == 0);
    free_again(took);

    /* 3. a shrink sends the inbox home at once */
    CHECK(qslab_tune("t-remote-inbox", "empty_decay_ms", "600000") == 0);
    alloc_all();
    consume_all();
    took = alloc_until_claim(0);
    CHECKF(inbox_nr() > 0, "the claim put nothing back");
    qslab_cache_shrink(c);
    CHECKF(inbox_nr() == 0, "the inbox holds %lu after a shrink", inbox_nr());
    CHECK(qslab_cache_validate(c) == 0);
    free_again(took);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
