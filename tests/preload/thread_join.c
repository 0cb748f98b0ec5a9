/*
 * thread_join.c - joining many threads must not hang.  Run under the preload.
 *
 * When pthread_join releases a dead thread's stack and glibc's stack cache
 * is over its limit, glibc frees thread-local storage vectors (memory the
 * creating thread calloc'ed) while it holds its thread-stack lock.  If such a
 * free made qslab start its background purger there, pthread_create would
 * wait for that same lock forever.  This creates ROUNDS rounds of THREADS
 * threads, all alive at once, then joins them all; the main thread's queue
 * for the vectors' size class fills and its empty slabs are kept, as in
 * bench_threads --mode idle, which hung.  ctest's timeout is the check.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 1000
#define ROUNDS 3

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;

/* Workers that never call malloc (glibc allocates for them): the purger is
 * not started by any thread's exit, and the main thread's queue is fed by
 * the thread vectors alone. */
static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void)
{
    static pthread_t t[THREADS];
    for (int r = 0; r < ROUNDS; r++) {
        int made = 0;
        go = 0;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 << 10); /* 1,000 alive at once */
        for (int i = 0; i < THREADS; i++, made++)
            if (pthread_create(&t[i], &attr, worker, (void *)(uintptr_t)i) != 0)
                break;
        pthread_attr_destroy(&attr);
        pthread_mutex_lock(&mu);
        go = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        for (int i = 0; i < made; i++)
            pthread_join(t[i], NULL);
        if (made < 100) {
            fprintf(stderr, "thread_join: could create only %d threads\n", made);
            return 1;
        }
    }
    printf("thread_join: %d rounds of %d threads joined\n", ROUNDS, THREADS);
    return 0;
}
