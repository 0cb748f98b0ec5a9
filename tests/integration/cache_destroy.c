/*
 * qslab_cache_destroy: refused (EBUSY, report on stderr, cache left usable)
 * while objects are live; succeeds once everything is freed, also after many
 * threads used the cache and exited.
 */
#include <pthread.h>
#include <qslab.h>

#include "../cacheutil.h"
#include "../testutil.h"

#define NTHREADS 16

static void test_busy(void)
{
    enum { LIVE = 37 };
    void *objs[LIVE];
    qslab_cache *c = qslab_cache_create("t-destroy-busy", 72, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    for (int i = 0; i < LIVE; i++)
        objs[i] = qslab_cache_alloc(c);

    char err[4096];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_cache_destroy(c);
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EBUSY, "destroy with live objects: %d, errno %d", r, e);
    CHECKF(strstr(err, "t-destroy-busy") != NULL, "report does not name the cache: \"%s\"", err);
    CHECKF(strstr(err, "37") != NULL, "report does not give the count (37): \"%s\"", err);

    /* The cache is intact and usable. */
    CHECK(qslab_cache_find("t-destroy-busy") == c);
    CHECK(tc_active(c) == LIVE);
    void *more[500];
    for (int i = 0; i < 500; i++) {
        more[i] = qslab_cache_alloc(c);
        if (more[i])
            memset(more[i], 0xee, 72);
    }
    for (int i = 0; i < 500; i++)
        qslab_cache_free(c, more[i]);
    CHECK(tc_active(c) == LIVE);

    /* One left: still refused. */
    for (int i = 0; i < LIVE - 1; i++)
        qslab_cache_free(c, objs[i]);
    tu_stderr_begin();
    errno = 0;
    r = qslab_cache_destroy(c);
    e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EBUSY, "destroy with one live object: %d, errno %d", r, e);
    CHECKF(strstr(err, "t-destroy-busy") != NULL, "report: \"%s\"", err);

    qslab_cache_free(c, objs[LIVE - 1]);
    CHECK(qslab_cache_destroy(c) == 0);
    CHECK(qslab_cache_find("t-destroy-busy") == NULL);
}

static void test_unused(void)
{
    qslab_cache *c = qslab_cache_create("t-destroy-unused", 16, 0, 0, NULL);
    CHECK(c != NULL);
    if (c)
        CHECK(qslab_cache_destroy(c) == 0);

    c = qslab_cache_create("t-destroy-shrunk", 16, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    void *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    qslab_cache_shrink(c);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- after threads ---- */

static qslab_cache *tc;
static void *handoff[NTHREADS][64]; /* objects thread i leaves for thread i+1 */

static void *worker(void *arg)
{
    long id = (long)arg;
    void *objs[256];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 256; i++)
            objs[i] = qslab_cache_alloc(tc);
        for (int i = 0; i < 256; i++)
            qslab_cache_free(tc, objs[i]);
    }
    for (int i = 0; i < 64; i++)
        handoff[id][i] = qslab_cache_alloc(tc);
    return NULL;
}

static void test_after_threads(void)
{
    tc = qslab_cache_create("t-destroy-threads", 200, 0, QSLAB_HWCACHE_ALIGN, NULL);
    CHECK(tc != NULL);
    if (!tc)
        return;
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);

    /* The threads exited holding objects. */
    char err[4096];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_cache_destroy(tc);
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EBUSY, "%d errno %d", r, e);
    CHECKF(strstr(err, "t-destroy-threads") && strstr(err, "1024"), "report: \"%s\"", err);
    CHECK(tc_active(tc) == NTHREADS * 64);

    /* Free them here, from a thread that allocated none of them. */
    for (int i = 0; i < NTHREADS; i++)
        for (int k = 0; k < 64; k++)
            qslab_cache_free(tc, handoff[i][k]);
    CHECK(tc_active(tc) == 0);
    CHECK(qslab_cache_destroy(tc) == 0);
}

/* Threads that exit while the main thread still holds their objects, and
 * free objects the main thread allocated. */
static void *free_main_objs(void *arg)
{
    void **objs = arg;
    for (int i = 0; i < 100; i++)
        qslab_cache_free(tc, objs[i]);
    for (int i = 0; i < 100; i++)
        objs[i] = qslab_cache_alloc(tc);
    return NULL;
}

static void test_cross_exit(void)
{
    tc = qslab_cache_create("t-destroy-cross", 24, 0, 0, NULL);
    CHECK(tc != NULL);
    if (!tc)
        return;
    static void *objs[8][100];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        for (int k = 0; k < 100; k++)
            objs[i][k] = qslab_cache_alloc(tc);
        pthread_create(&t[i], NULL, free_main_objs, objs[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    CHECK(tc_active(tc) == 800);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 100; k++)
            qslab_cache_free(tc, objs[i][k]);
    CHECK(tc_active(tc) == 0);
    CHECK(qslab_cache_destroy(tc) == 0);
}

int main(void)
{
    test_busy();
    test_unused();
    test_after_threads();
    test_cross_exit();
    return tu_done();
}
