/*
 * Threads fill their stashes of empty slabs in bursts and pause between
 * them, so the purger takes idle stashes (front/slqb/budget.c qs_queue_steal_idle_stash)
 * while other threads add to and refill from theirs.  Objects are stamped
 * and verified.  At the end the threads stay alive and idle: every empty
 * slab they stashed must go back all the same, and the invariant walker
 * must pass.  Run under TSan with the other stress tests.
 */
#include <pthread.h>
#include <qslab.h>
#include <time.h>

#include "../testutil.h"

#define NTHREADS 8
#define BURST 64
#define SIZE 1024

static qslab_cache *cache;
static pthread_barrier_t idle_start, idle_end;
static unsigned long bad;

static void *worker(void *arg)
{
    uint64_t seed = tu_seed((uint64_t)(uintptr_t)arg + 7);
    int rounds = TU_SCALE(12, 2);
    void *objs[BURST];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < BURST; i++) {
            objs[i] = qslab_cache_alloc(cache);
            if (!objs[i]) {
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            uint64_t *w = objs[i];
            for (size_t k = 0; k < SIZE / 8; k++)
                w[k] = (uint64_t)(uintptr_t)objs[i] + k;
        }
        for (int i = 0; i < BURST; i++) {
            uint64_t *w = objs[i];
            if (!w)
                continue;
            for (size_t k = 0; k < SIZE / 8; k++)
                if (w[k] != (uint64_t)(uintptr_t)w + k) {
                    __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                    break;
                }
            qslab_cache_free(cache, w);
        }
        /* sometimes long enough for the purger to find the stash idle
         * (its tick is 250 ms), sometimes straight on */
        tu_sleep_ms((unsigned)(tu_rand(&seed) % 4) * 120);
    }
    pthread_barrier_wait(&idle_start);
    pthread_barrier_wait(&idle_end); /* alive and idle meanwhile */
    return NULL;
}

int main(void)
{
    cache = qslab_cache_create("t-stash-purge", SIZE, 0, 0, NULL);
    CHECK(cache != NULL);
    /* a queue of a few objects: frees go straight to their slabs, and
     * emptied slabs to the stash */
    CHECK(qslab_tune("t-stash-purge", "freebatch", "2") == 0);
    CHECK(qslab_tune("t-stash-purge", "hiwater", "4") == 0);
    CHECK(qslab_tune("t-stash-purge", "empty_decay_ms", "50") == 0);
    pthread_barrier_init(&idle_start, NULL, NTHREADS + 1);
    pthread_barrier_init(&idle_end, NULL, NTHREADS + 1);
    pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    struct qslab_cache_stats st;
    pthread_barrier_wait(&idle_start);
    /* every thread is idle now, its queue holding at most 4 objects and its
     * stash whatever its last burst emptied */
    for (int waited = 0; waited < 200; waited++) {
        qslab_cache_stats(cache, &st);
        if (st.empty_slabs == 0)
            break;
        tu_sleep_ms(100);
    }
    CHECKF(st.empty_slabs == 0, "%lu empty slabs still kept by idle threads after 20 s", st.empty_slabs);
    CHECK(qslab_cache_validate(cache) == 0);
    pthread_barrier_wait(&idle_end);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECKF(bad == 0, "%lu objects lost or overwritten", bad);
    qslab_cache_stats(cache, &st);
    CHECKF(st.active_objs == 0, "%lu objects still in use", st.active_objs);
    CHECK(qslab_cache_validate(cache) == 0);
    CHECK(qslab_cache_destroy(cache) == 0);
    return tu_done();
}
