/*
 * Caches come and go while threads live on: a long-lived thread uses a cache,
 * the main thread destroys it (the thread's queue still holds freed objects
 * of it) and creates another, which the thread then uses.  Nothing of the
 * old cache may show up in the new one.  Also: hundreds of caches alive at
 * once, all used by the same threads.
 */
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

/* A worker that runs one job at a time on request. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static void (*job)(void);
static int job_seq, done_seq, quit;

static void *worker(void *arg)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        while (done_seq == job_seq && !quit)
            pthread_cond_wait(&cond, &lock);
        if (quit)
            break;
        void (*fn)(void) = job;
        pthread_mutex_unlock(&lock);
        fn();
        pthread_mutex_lock(&lock);
        done_seq++;
        pthread_cond_broadcast(&cond);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void run_in_worker(void (*fn)(void))
{
    pthread_mutex_lock(&lock);
    job = fn;
    job_seq++;
    pthread_cond_broadcast(&cond);
    while (done_seq != job_seq)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static qslab_cache *cur;
static size_t cur_size;
static unsigned char cur_mark;
static unsigned long bad;

/* Allocate, mark the whole object, check, free: everything stays in the
 * worker's queue afterwards. */
static void use_cur(void)
{
    enum { N = 150 };
    unsigned char *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = qslab_cache_alloc(cur);
        if (!v[i]) {
            bad++;
            continue;
        }
        memset(v[i], cur_mark, cur_size);
    }
    for (int i = 0; i < N; i++) {
        if (!v[i])
            continue;
        if (v[i][0] != cur_mark || v[i][cur_size - 1] != cur_mark)
            bad++;
        qslab_cache_free(cur, v[i]);
    }
}

static void test_destroy_under_idle_thread(void)
{
    int cycles = TU_SCALE(300, 3);
    for (int i = 0; i < cycles; i++) {
        char name[32];
        snprintf(name, sizeof name, "t-life-%d", i);
        cur_size = 16 + (size_t)(i * 37 % 700);
        cur_mark = (unsigned char)(i + 1);
        cur = qslab_cache_create(name, cur_size, 0, 0, NULL);
        if (!cur) {
            tu_fail("create %s: errno %d", name, errno);
            continue;
        }
        run_in_worker(use_cur);
        use_cur(); /* and here */
        struct qslab_cache_stats st;
        qslab_cache_stats(cur, &st);
        if (st.alloc != 300 || st.free != 300 || st.active_objs != 0)
            tu_fail("%s: alloc %lu free %lu active %lu", name, st.alloc, st.free, st.active_objs);
        if (qslab_cache_destroy(cur) != 0)
            tu_fail("destroy %s while the worker's queue holds its free objects: errno %d", name, errno);
    }
    CHECKF(bad == 0, "%lu bad objects", bad);
    CHECKF(tu_capture_calls() == 0, "handler called: %s", tu_fatal_msg);
}

/* Many caches alive at once, used by the worker and by this thread. */
static qslab_cache **many;
static int nmany;
static void use_many(void)
{
    for (int i = 0; i < nmany; i++) {
        cur = many[i];
        cur_size = qslab_cache_object_size(many[i]);
        cur_mark = (unsigned char)(i * 3 + 1);
        use_cur();
    }
}

static void test_many_alive(void)
{
    nmany = TU_SCALE(600, 3);
    many = calloc((size_t)nmany, sizeof *many);
    for (int i = 0; i < nmany; i++) {
        char name[32];
        snprintf(name, sizeof name, "t-many-%d", i);
        many[i] = qslab_cache_create(name, 8 + (size_t)(i % 50) * 8, 0, 0, NULL);
        if (!many[i]) {
            tu_fail("create %s: errno %d", name, errno);
            nmany = i;
            break;
        }
    }
    run_in_worker(use_many);
    use_many();
    run_in_worker(use_many);
    CHECKF(bad == 0, "%lu bad objects", bad);
    int busy = 0;
    for (int i = 0; i < nmany; i++) {
        struct qslab_cache_stats st;
        qslab_cache_stats(many[i], &st);
        if (st.alloc != 450 || st.active_objs != 0)
            busy++;
        if (qslab_cache_destroy(many[i]) != 0)
            busy++;
    }
    CHECKF(busy == 0, "%d of %d caches with wrong counts or not destroyable", busy, nmany);
    free(many);
}

int main(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    test_destroy_under_idle_thread();
    test_many_alive();
    pthread_mutex_lock(&lock);
    quit = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    CHECKF(tu_capture_calls() == 0, "handler called: %s", tu_fatal_msg);
    return tu_done();
}
