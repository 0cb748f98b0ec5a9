/*
 * Threads exit while the cache they used is being destroyed: each round,
 * threads allocate and free (their queues keep the freed objects), tell the
 * main thread they are done, and exit; the main thread destroys the cache
 * at once, racing their exit, and must get 0.  Run it under the sanitizers
 * to catch use of a destroyed cache by an exiting thread.
 */
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

#define THREADS 4

static qslab_cache *cache;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int finished;
static void *handoff[THREADS]; /* one object each thread leaves for main */

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    void *v[64];
    for (int i = 0; i < 64; i++)
        v[i] = qslab_cache_alloc(cache);
    for (int i = 1; i < 64; i++)
        qslab_cache_free(cache, v[i]);
    handoff[id] = v[0];
    void *m = qslab_malloc(100); /* kmalloc queues too */
    qslab_free(m);
    pthread_mutex_lock(&lock);
    finished++;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    return NULL; /* the exit path runs while main destroys the cache */
}

int main(void)
{
    int rounds = (int)tu_scale_debug(TU_SCALE_TSAN(TU_SCALE(1500, 3), 2), 2);
    int refused = 0, failed_create = 0;
    for (int r = 0; r < rounds; r++) {
        char name[32];
        snprintf(name, sizeof name, "t-evd-%d", r % 7);
        cache = qslab_cache_create(name, 32 + (size_t)(r % 5) * 40, 0, 0, NULL);
        if (!cache) {
            failed_create++;
            continue;
        }
        finished = 0;
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
            pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
        pthread_mutex_lock(&lock);
        while (finished < THREADS)
            pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        /* Free the objects they left (remote frees), then destroy. */
        for (int i = 0; i < THREADS; i++)
            qslab_cache_free(cache, handoff[i]);
        if (qslab_cache_destroy(cache) != 0)
            refused++;
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
    }
    CHECKF(failed_create == 0, "%d creates failed", failed_create);
    CHECKF(refused == 0, "%d of %d destroys refused", refused, rounds);
    return tu_done();
}
