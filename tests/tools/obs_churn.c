/*
 * obs_churn: creates and destroys caches, and threads that use them, in a
 * tight loop until its stdin closes: the target of qslabinfo_test.py's
 * torn-read test (the cache list, the queue lists and the owner tables
 * change all the time).  Prints "READY" once the loop runs.
 */
#include <qslab.h>

#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile int stop;

static void *closer(void *arg)
{
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    stop = 1;
    return arg;
}

static void *user(void *arg)
{
    qslab_cache *c = arg;
    void *o[64];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 64; i++)
            o[i] = qslab_cache_alloc(c);
        for (int i = 0; i < 64; i++)
            qslab_cache_free(c, o[i]);
    }
    return NULL;
}

int main(void)
{
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    pthread_t t;
    pthread_create(&t, NULL, closer, NULL);
    printf("READY\n");
    fflush(stdout);
    void *held[16];
    for (unsigned long n = 0; !stop; n++) {
        char name[32];
        snprintf(name, sizeof name, "churn-%lu", n % 7);
        qslab_cache *c = qslab_cache_create(name, 16 + (n % 13) * 40, 0, 0, NULL);
        if (!c)
            continue;
        pthread_t u[2];
        int made = 0;
        for (int i = 0; i < 2; i++)
            made += pthread_create(&u[i], NULL, user, c) == 0;
        for (int i = 0; i < 16; i++) /* the main thread's own queue too */
            held[i] = qslab_cache_alloc(c);
        for (int i = 0; i < 16; i++)
            qslab_cache_free(c, held[i]);
        for (int i = 0; i < made; i++)
            pthread_join(u[i], NULL);
        held[0] = qslab_malloc(100 + n % 1000); /* the kmalloc caches move too */
        qslab_free(held[0]);
        qslab_cache_destroy(c);
    }
    pthread_join(t, NULL);
    return 0;
}
