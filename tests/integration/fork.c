/*
 * fork() while other threads allocate and free: the child can allocate at
 * once (no lock is left held by a thread that does not exist in the child),
 * and the parent goes on.  A child that hangs is killed by an alarm and
 * counted as a failure.  Skipped under ThreadSanitizer, which does not
 * support threads started in the child of a multi-threaded fork (qslab may
 * start its purger there).
 */
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

#define THREADS 4

static qslab_cache *cache;
static int stop;

static void *busy(void *arg)
{
    uint64_t seed = tu_seed((uint64_t)(uintptr_t)arg);
    void *keep[64] = {0};
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        uint64_t r = tu_rand(&seed);
        int i = (int)(r % 64);
        if (keep[i]) {
            qslab_free(keep[i]);
            keep[i] = NULL;
        } else {
            keep[i] = r & 1 ? qslab_cache_alloc(cache) : qslab_malloc((r >> 8) % 70000);
        }
        if (r % 512 == 0)
            qslab_cache_shrink(cache);
    }
    for (int i = 0; i < 64; i++)
        qslab_free(keep[i]);
    return NULL;
}

/* In the child: every kind of allocation, then exit 0 (or die trying). */
static int child(void)
{
    alarm(20);
    void *v[500];
    for (int i = 0; i < 500; i++) {
        v[i] = i % 2 ? qslab_cache_alloc(cache) : qslab_malloc((size_t)i * 37);
        if (!v[i])
            return 2;
    }
    for (int i = 0; i < 500; i++)
        qslab_free(v[i]);
    void *big = qslab_malloc((size_t)40 << 20);
    if (!big)
        return 3;
    qslab_free(big);
    qslab_cache *c = qslab_cache_create("t-fork-child", 100, 0, 0, NULL);
    if (!c)
        return 4;
    void *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    if (qslab_cache_destroy(c) != 0)
        return 5;
    if (qslab_tune("t-fork", "hiwater", "2048") != 0)
        return 6;
    qslab_slabinfo(-1); /* walks every cache under their locks; output discarded */
    return 0;
}

int main(void)
{
    if (TU_TSAN) {
        printf("skipped under ThreadSanitizer\n");
        return tu_done();
    }
    cache = qslab_cache_create("t-fork", 72, 0, 0, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return tu_done();
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, busy, (void *)(i + 1));

    /* x 7 modes + 4 ASan runs in make test: 450 forks a run.  The four busy
     * threads burn both CPUs while the forks take (6.4 CPU-s a mode at 100),
     * and a lock left held at fork hangs a child in any of them. */
    int forks = TU_SCALE(50, 2), bad = 0;
    for (int i = 0; i < forks; i++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            _exit(child());
        if (pid < 0) {
            tu_fail("fork: errno %d", errno);
            break;
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (bad++ < 5)
                tu_fail("child %d: %s %d", i, WIFEXITED(st) ? "exit status" : "killed by signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        /* The parent still allocates. */
        void *p = qslab_cache_alloc(cache);
        if (!p)
            tu_fail("parent allocation after fork %d", i);
        qslab_cache_free(cache, p);
    }
    CHECKF(bad == 0, "%d of %d children failed", bad, forks);

    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(cache, &st) == 0 && st.active_objs == 0);
    CHECK(qslab_cache_destroy(cache) == 0);
    return tu_done();
}
