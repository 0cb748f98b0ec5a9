/*
 * unit: a CPU's refill takes other CPUs' slabs with free objects before new
 * memory (front/slqb/cpu.c slqb_percpu_adopt).  A thread allocates on one
 * CPU, moves to another and frees every other object there (remote frees:
 * the first CPU's inbox, claimed only by that CPU's refills), then
 * allocates as many again there: they come from the first CPU's slabs, so
 * the cache has no more slabs than before, and none of them is an object
 * still in use.  Then the first CPU's empty slabs: freed there, kept in its
 * stash, they serve the second CPU too.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "front/fastpath.h"

#include <stdlib.h>
#include <string.h>

enum { N = 20000, SIZE = 64 };

static void pin(int cpu)
{
    CHECKF(tu_pin_cpu(cpu) == 0, "cannot pin to CPU %d", cpu);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static unsigned long slabs(qslab_cache *c)
{
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    return st.num_slabs;
}

int main(int argc, char **argv)
{
    if (!tf_cpu_owner("cpu_adopt", argc, argv))
        return tu_done();
    int cpu[2];
    if (tu_allowed_cpus(cpu) < 2) {
        fprintf(stderr, "cpu_adopt: needs two CPUs, one allowed: nothing to test\n");
        return tu_done();
    }
    pin(cpu[0]);
    qslab_cache *c = qslab_cache_create("t-cpu-adopt", SIZE, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_debug_skip("cpu_adopt", c)) {
        qslab_cache_destroy(c);
        return tu_done();
    }
    tf_pin_slqb("t-cpu-adopt"); /* SLQB's per-CPU queues, whatever QSLAB_FRONT says */
    void **obj = calloc(2 * N, sizeof *obj);
    CHECK(obj != NULL);
    for (int i = 0; i < N; i++) {
        CHECK((obj[i] = qslab_cache_alloc(c)) != NULL);
        memset(obj[i], 0x11, SIZE);
    }
    unsigned long before = slabs(c);

    /* on the other CPU: every other object freed, as many allocated */
    pin(cpu[1]);
    for (int i = 0; i < N; i += 2)
        qslab_cache_free(c, obj[i]);
    for (int i = 0; i < N; i += 2) {
        CHECK((obj[i] = qslab_cache_alloc(c)) != NULL);
        memset(obj[i], 0x22, SIZE);
    }
    unsigned long after = slabs(c);
    /* slack: the second CPU's batches still hold the last frees (freebatch
     * objects at most: a few slabs' worth) */
    unsigned long slack = QS_LOAD(c->freebatch) * c->slot_size / qs_slab_bytes(QS_LOAD(c->order)) + 2;
    CHECKF(after <= before + slack,
           "%lu slabs after %d frees and allocations on CPU %d, %lu before on CPU %d (at most %lu more)",
           after, N / 2, cpu[1], before, cpu[0], slack);
    void **sorted = malloc(N * sizeof *sorted);
    CHECK(sorted != NULL);
    memcpy(sorted, obj, N * sizeof *sorted);
    qsort(sorted, N, sizeof *sorted, cmp_ptr);
    for (int i = 1; i < N; i++)
        CHECKF(sorted[i] != sorted[i - 1], "object %p handed out twice", sorted[i]);
    for (int i = 1; i < N; i += 2) /* the objects kept were not touched */
        CHECKF(((unsigned char *)obj[i])[SIZE - 1] == 0x11, "object %p changed", obj[i]);
    free(sorted);

    /* empty slabs: all freed on the first CPU (its queue, then its slabs
     * and its stash), then allocated on the second */
    pin(cpu[0]);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, obj[i]);
    before = slabs(c);
    /* what the first CPU's queue holds stays there (its slots are its
     * CPU's: the fast paths' and its sections') */
    struct qs_queue *q0 = qs_queue_of(c);
    unsigned long held = q0 ? QS_TOP_NR(QS_LOAD(q0->top)) : 0, per = qs_slab_objects(c, QS_LOAD(c->order));
    pin(cpu[1]);
    for (int i = 0; i < N; i++)
        CHECK((obj[i] = qslab_cache_alloc(c)) != NULL);
    after = slabs(c);
    CHECKF(after <= before + slack + (held + per - 1) / per,
           "%lu slabs after %d allocations on CPU %d, %lu before (at most %lu more: %lu objects stay in "
           "CPU %d's queue)", after, N, cpu[1], before, slack + (held + per - 1) / per, held, cpu[0]);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, obj[i]);
    CHECK(qslab_cache_validate(c) == 0);
    free(obj);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
