/*
 * unit: the empty-slab FIFO keeps at most empty_limit slabs per node and
 * gives back those older than empty_decay_ms; shrink gives back the rest.
 * A queue's stash of its own empties is bounded too, and off with decay 0.
 * Also: the invariant walker passes after each step and catches a broken
 * slab; a sweep whose clock was read before slabs went empty keeps them.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <time.h>

enum { N = 4096 };
static void *objs[N];

static unsigned long empties(qslab_cache *c)
{
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    return st.empty_slabs;
}

int main(void)
{
    /* one CPU: a thread moved to the other CPU mid-loop frees its objects
     * as remote frees, parked in an inbox until that CPU's next refill, and
     * their slabs are not empty for this test's counts */
    int cpu = tu_pin_one_cpu();
    qslab_cache *c = qslab_cache_create("t-empty", 1024, 0, 0, NULL);
    CHECK(c != NULL);
    tf_pin_slqb("t-empty"); /* SLQB's queues and stash */
    unsigned per = qs_slab_objects(c, c->order); /* objects per slab */
    CHECK(qslab_tune("t-empty", "empty_limit", "8") == 0);
    CHECK(qslab_tune("t-empty", "freebatch", "16") == 0); /* freebatch <= hiwater */
    CHECK(qslab_tune("t-empty", "hiwater", "16") == 0);
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    CHECK(qslab_cache_validate(c) == 0);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_validate(c) == 0);
    /* the node keeps at most 8; our queue's stash of own empties at most
     * limit (and stash_bytes) more */
    CHECKF(empties(c) <= 8 + 8, "%lu empty slabs kept, limit 8 + stash", empties(c));
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECKF(st.free_slab >= N / per - 8 - 16, "%lu slabs given back of %u", st.free_slab, N / per);

    /* decay: with 0 ms, any touch of the FIFO gives everything back */
    CHECK(qslab_tune("t-empty", "empty_decay_ms", "0") == 0);
    for (int i = 0; i < 64; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 64; i++)
        qslab_cache_free(c, objs[i]);
    CHECKF(empties(c) <= 1, "%lu empty slabs with decay 0", empties(c));

    /* shrink: queue flushed, every empty slab back, bytes counted */
    CHECK(qslab_tune("t-empty", "empty_decay_ms", "100000") == 0);
    for (int i = 0; i < 256; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 256; i++)
        qslab_cache_free(c, objs[i]);
    size_t bytes = qslab_cache_shrink(c);
    CHECKF(bytes >= 8 * 4096, "shrink gave back %zu bytes", bytes);
    qslab_cache_stats(c, &st);
    CHECK(st.num_slabs == 0 && st.empty_slabs == 0);
    CHECK(qslab_cache_validate(c) == 0);

    /* the walker notices a slab whose count is wrong */
    void *o = qslab_cache_alloc(c);
    struct qs_slab *s = qs_chunk_slab(qs_chunk_of(o), o);
    tu_stderr_begin();
    s->inuse++;
    CHECK(qslab_cache_validate(c) == -1);
    s->inuse--;
    char buf[1024];
    tu_stderr_end(buf, sizeof buf);
    CHECK(strstr(buf, "validate t-empty") != NULL);
    CHECK(qslab_cache_validate(c) == 0);
    qslab_cache_free(c, o);

    /* a stale clock: the purger reads its clock, then waits for qs_global
     * while slabs go empty onto a FIFO, stamped after that reading; its
     * sweep must see them young (age 0), not 24 days old, and keep them */
    struct qs_node *n = &c->nodes[cpu >= 0 ? qs_node_of_cpu(cpu) : 0];
    unsigned long before = qs_node_nr_empty(n);
    uint64_t stale = qs_os_now_ms() - 50;
    struct qs_slab *made[4], *list = NULL;
    for (int i = 0; i < 4; i++) {
        CHECK((made[i] = qs_slab_new(c, NULL, n->id, false)) != NULL);
        made[i]->next = list;
        list = made[i];
    }
    qs_node_put_empty(c, NULL, n, list); /* stamped now: after `stale` */
    struct qs_slab *release = NULL;
    qs_lock_acquire(&qs_global);
    qs_node_sweep_cache(c, false, stale, &release);
    qs_lock_release(&qs_global);
    unsigned nrel = 0;
    for (struct qs_slab *r = release; r; r = r->next)
        nrel++;
    qs_node_sweep_end(release, false);
    CHECKF(nrel == 0 && qs_node_nr_empty(n) == before + 4,
           "a sweep with a clock read 50 ms before 4 slabs went empty gave back %u of them (decay "
           "%u ms; %lu on the FIFO, %lu before)",
           nrel, (unsigned)QS_LOAD(c->empty_decay_ms), (unsigned long)qs_node_nr_empty(n), before);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
