/*
 * unit: an empty slab that a queue entry points into is never given back.
 *
 * With per-CPU owners the free fast paths of the front ends with queues
 * (SLQB, SLAB) push objects of any slab of their node (SLQB: while the
 * queue is short; SLAB: while the array is below its limit), and push
 * without a check an object whose word is neither a free-list link nor
 * the stamp (SLAB's array: any word).  So a second free of an object
 * whose slab is empty and kept (the node's empty FIFO, or SLAB's free
 * slabs), after a write over its word, leaves a queue entry pointing into
 * that slab.  If the slab went
 * back to the page layer then, its memory could become a new slab while
 * the entry waits, and the object would be handed out twice (fuzz_misuse,
 * 2026-12-01: fuzz/corpus/misuse/found-fixed-bug13-*).  Checked here:
 *   - fifo: the FIFO's giving back (qs_node_shrink, as shrink, trim, the
 *     decay and the purger do) keeps such a slab (src/core/node.c fifo_whole);
 *   - reaper (SLAB): the reaper's giving back of free slabs checks each
 *     object's word (front/slab/slabs.c slabfe_drain_free), so the entry is found and
 *     reported there, and the slab stays;
 * then, in both, allocating through everything reports the second free
 * exactly once and hands nothing out twice.  A second free that is
 * reported at once (thread owners, SLQB's per-CPU check) leaves no entry:
 * the test checks that, and then the blind push after an overwrite.
 *   - fifo-slub: SLUB cannot leave such an entry: a CPU's push takes only
 *     an object of its active slab (pc_push compares the slab), whose
 *     objects on the list count as in use, so that slab is never empty;
 *     every other free loads the word and goes to the slab's word, whose
 *     inuse is 0 on the FIFO.  So a second free of an object of a FIFO
 *     slab is reported at once, with both owner kinds, and the slab may go.
 * Runs with the purger off (the sweep must not empty the queue first).
 */
#include "../testutil.h"
#include "../front.h"
#include "front/fastpath.h"
#include "front/front.h"
#include "core/internal.h"

#include <stdlib.h>

enum { N = 400 };
static void *objs[N], *held[N], *drained[N];

/* calls reports so far, the last one naming x */
static bool reported(void *x, unsigned long calls)
{
    char a[32];
    return tu_capture_calls() == calls && strstr(tu_fatal_msg, tu_addr(a, x)) != NULL;
}

static void tune(const char *name, const char *key, const char *val)
{
    CHECKF(qslab_tune(name, key, val) == 0, "qslab_tune(%s, %s, %s) refused", name, key, val);
}

/* A cache of `front` whose emptied slabs are kept on the FIFO (SLUB: all
 * of them, min_partial 0); for SLAB,
 * first on its nodes' free slabs, up to free_limit free objects
 * ((1 + CPUs) * batchcount + a slab's): about none with a batch of 4,
 * some with 60 (`keep_free`). */
static qslab_cache *make(const char *name, const char *front, bool keep_free)
{
    qslab_cache *c = qslab_cache_create(name, 64, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_is(c, "debug"))
        return c;
    tune(name, "front", front);
    tune(name, "empty_limit", "1000");
    tune(name, "empty_decay_ms", "1000000");
    if (strcmp(front, "slub") == 0) {
        tune(name, "min_partial", "0"); /* an emptied slab goes to the FIFO */
        tune(name, "cpu_partial", "0"); /* a slab found full goes to its node */
    } else if (strcmp(front, "slqb") == 0) {
        tune(name, "stash_bytes", "0"); /* empties straight to the FIFO */
        tune(name, "freebatch", "8");
        tune(name, "hiwater", "16"); /* frees past 16 go home */
    } else {
        tune(name, "shared", "0");
        tune(name, "limit", keep_free ? "120" : "60"); /* 60: the least */
        tune(name, "batchcount", keep_free ? "60" : "4");
    }
    return c;
}

/* Fill and free N objects, so that slabs empty; our queue */
static struct qs_queue *fill_and_free(qslab_cache *c)
{
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = N; i-- > 0;)
        qslab_cache_free(c, objs[i]);
    struct qs_queue *q = qs_queue_of(c);
    CHECK(q != NULL && q != &qs_no_queue);
    return q;
}

/* fill_and_free, then take what our queue holds (allocations that pop it)
 * into held[]: the next free of another slab's object of our node is a
 * short queue's push.  Returns how many. */
static int churn(qslab_cache *c)
{
    struct qs_queue *q = fill_and_free(c);
    int k = (int)QS_TOP_NR(q->top);
    for (int i = 0; i < k; i++)
        held[i] = qslab_cache_alloc(c);
    CHECKF(QS_TOP_NR(q->top) == 0, "queue still holds %u", (unsigned)QS_TOP_NR(q->top));
    return k;
}

/* Free x a second time (its slab holds it free): pushed blindly (no
 * report, x on top of our queue), or reported at once: a thread's free
 * loads the word, SLQB's per-CPU free of an object not of its queue's own
 * slabs checks it too (a link or the stamp goes to the checked slow path),
 * SLAB's array push does not.  A CPU's push loads no word that is neither
 * a link nor the stamp, though: when the second free was reported, with
 * per-CPU owners x's word is then overwritten (a write after free) and x
 * freed a third time, which must be pushed blindly.  Returns whether x
 * was pushed, the entry this test is about; the captured reports start
 * again from 0 then. */
static bool free_again(qslab_cache *c, const char *name, void *x)
{
    struct qs_queue *q = qs_queue_of(c);
    tu_capture_reset();
    qslab_cache_free(c, x);
    bool pushed = QS_TOP_NR(q->top) == 1 && q->slots[0] == x && tu_capture_calls() == 0;
    if (pushed || !qs_percpu()) {
        if (!pushed)
            CHECKF(reported(x, 1), "%s: second free of %p: %lu reports (\"%s\")", name, x,
                   tu_capture_calls(), tu_fatal_msg);
        return pushed;
    }
    CHECKF(reported(x, 1), "%s: a CPU's second free of %p neither pushed nor reported once (%lu "
                           "reports, \"%s\")",
           name, x, tu_capture_calls(), tu_fatal_msg);
    tu_capture_reset();
    *qs_link(c, x) = 0x5a5a5a5a5a5a5a5aul; /* not a link, not the stamp */
    qslab_cache_free(c, x);
    pushed = QS_TOP_NR(q->top) == 1 && q->slots[0] == x && tu_capture_calls() == 0;
    CHECKF(pushed, "%s: a CPU's free of %p with an overwritten word was not pushed blindly (%lu "
                   "reports, \"%s\")",
           name, x, tu_capture_calls(), tu_fatal_msg);
    return pushed;
}

/* Allocate through everything: nothing twice, nothing held, x at most
 * once; the second free of x reported exactly once in all. */
static void drain_and_check(qslab_cache *c, const char *name, void *x, int nheld)
{
    for (int i = 0; i < N; i++)
        drained[i] = qslab_cache_alloc(c);
    CHECKF(tu_dups(drained, N) == 0, "%s: an object handed out twice", name);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < nheld; j++)
            CHECKF(drained[i] != held[j], "%s: held %p handed out", name, held[j]);
    CHECKF(reported(x, 1), "%s: %lu reports of the second free of %p (last \"%s\")", name,
           tu_capture_calls(), x, tu_fatal_msg);
    for (int i = N; i-- > 0;)
        qslab_cache_free(c, drained[i]);
    while (nheld)
        qslab_cache_free(c, held[--nheld]);
    CHECKF(tu_capture_calls() == 1, "%s: freeing: %lu reports (last \"%s\")", name,
           tu_capture_calls(), tu_fatal_msg);
    tu_capture_reset();
}

static void fifo(const char *front)
{
    char name[32];
    snprintf(name, sizeof name, "t-ese-fifo-%s", front);
    qslab_cache *c = make(name, front, false);
    if (tf_debug_skip(name, c))
        return;
    tu_capture_reset();
    int nheld = churn(c);
    struct qs_node *n = &c->nodes[qs_queue_of(c)->node];
    CHECKF(qs_node_nr_empty(n) >= 1, "%s: no empty slab on the FIFO after %d frees", name, N);
    struct qs_slab *s = qs_node_fifo_peek(n);
    void *x = s->freelist; /* free in an empty slab */
    if (free_again(c, name, x)) {
        qs_node_shrink(c, NULL, n); /* the FIFO gives back what it may */
        CHECKF(qs_node_nr_empty(n) == 1 && qs_node_fifo_peek(n) == s,
               "%s: the FIFO gave back the slab of %p, which our queue holds (%lu left)", name, x,
               (unsigned long)qs_node_nr_empty(n));
    } else {
        qs_node_shrink(c, NULL, n);
        CHECKF(qs_node_nr_empty(n) == 0, "%s: %lu whole empty slabs kept by a shrink", name,
               (unsigned long)qs_node_nr_empty(n));
    }
    drain_and_check(c, name, x, nheld);
}

static void fifo_slub(void)
{
    const char *name = "t-ese-fifo-slub";
    qslab_cache *c = make(name, "slub", false);
    if (tf_debug_skip(name, c))
        return;
    tu_capture_reset();
    struct qs_queue *q = fill_and_free(c);
    struct qs_node *n = &c->nodes[q->node];
    CHECKF(qs_node_nr_empty(n) >= 1, "%s: no empty slab on the FIFO after %d frees", name, N);
    if (qs_node_nr_empty(n) == 0)
        return;
    struct qs_slab *s = qs_node_fifo_peek(n);
    CHECKF(s != q->sl.slab, "%s: the FIFO's slab is the active one", name);
    void *x = s->base; /* every object of an empty slab is free */
    unsigned long before = tu_capture_calls();
    qslab_cache_free(c, x);
    CHECKF(reported(x, before + 1), "%s: second free of %p: %lu reports (\"%s\")", name, x,
           tu_capture_calls() - before, tu_fatal_msg);
    CHECKF(q->sl.freelist != x, "%s: the second free of %p was pushed", name, x);
    qs_node_shrink(c, NULL, n);
    CHECKF(qs_node_nr_empty(n) == 0, "%s: %lu whole empty slabs kept by a shrink", name,
           (unsigned long)qs_node_nr_empty(n));
    drain_and_check(c, name, x, 0);
}

static void reaper(void)
{
    const char *name = "t-ese-reaper";
    qslab_cache *c = make(name, "slab", true);
    if (tf_debug_skip(name, c))
        return;
    tu_capture_reset();
    int nheld = churn(c);
    struct qs_node *n = &c->nodes[qs_queue_of(c)->node];
    struct qs_slab *s = n->slabs_free;
    CHECKF(s != NULL, "%s: no free slab kept after %d frees", name, N);
    if (!s)
        return;
    void *x = s->base; /* every object of a free slab is free */
    if (free_again(c, name, x)) {
        /* the reaper's tick (the first of the process: it runs at once);
         * our array is not idle (its top moved), so it stays as it is */
        qs_fronts[QS_FRONT_SLAB]->sweep(false);
        CHECKF(reported(x, 1),
               "%s: the reaper gave back free slabs without finding %p queued (%lu reports, "
               "\"%s\")",
               name, x, tu_capture_calls(), tu_fatal_msg);
    }
    drain_and_check(c, name, x, nheld);
}

int main(void)
{
    setenv("QSLAB_PURGE", "0", 1); /* read when the purger would start */
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_pin_one_cpu(); /* one CPU's queue */
    fifo("slqb");
    fifo("slab");
    fifo_slub();
    reaper();
    return tu_done();
}
