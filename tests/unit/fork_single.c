/*
 * unit: fork from a process that never had a second thread skips qslab's
 * fork locks (src/api/fork.c), and fork from one that has takes them.
 *
 *   1. libc's answer (qs_os_single_threaded) is "single-threaded" at start
 *      (glibc 2.32 and later; not under ThreadSanitizer, whose runtime may
 *      start a thread of its own) and "not" once a thread was created, and
 *      stays "not" after that thread is joined;
 *   2. a child forked before any thread (the lock-free path) and one forked
 *      after (every lock taken and released in both) can each allocate,
 *      free, create and destroy a cache, walk every cache for slabinfo and
 *      exit 0; the parent goes on allocating after each.
 *
 * Nothing here starts qslab's purger before the first fork (it is a
 * thread): the process keeps below 1 MiB of slabs and frees nothing first.
 * Under QSLAB_DEBUG or QSLAB_GUARD_SAMPLE a qslab thread starts anyway.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <pthread.h>
#include <stdio.h>

static qslab_cache *cache;

/* In a child: every kind of allocation; its exit status says what failed. */
static int child(void)
{
    alarm(20);
    void *v[200];
    for (int i = 0; i < 200; i++) {
        v[i] = i % 2 ? qslab_cache_alloc(cache) : qslab_malloc((size_t)i * 53);
        if (!v[i])
            return 2;
    }
    for (int i = 0; i < 200; i++)
        qslab_free(v[i]);
    void *big = qslab_malloc((size_t)3 << 20);
    if (!big)
        return 3;
    qslab_free(big);
    qslab_cache *c = qslab_cache_create("t-fork-single-child", 40, 0, 0, NULL);
    if (!c)
        return 4;
    qslab_cache_free(c, qslab_cache_alloc(c));
    if (qslab_cache_destroy(c) != 0)
        return 5;
    qslab_slabinfo(-1); /* every cache's lock, output discarded */
    return 0;
}

static void fork_once(const char *when)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    CHECKF(pid > 0, "fork %s: errno %d", when, errno);
    if (pid < 0)
        return;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child forked %s: %s %d", when,
           WIFEXITED(st) ? "exit status" : "killed by signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    void *p = qslab_cache_alloc(cache); /* the parent goes on */
    CHECKF(p != NULL, "parent allocation after the fork %s", when);
    qslab_cache_free(cache, p);
}

static void *nothing(void *arg)
{
    return arg;
}

int main(void)
{
    if (TU_TSAN) {
        printf("skipped under ThreadSanitizer (its runtime's threads; fork is tested in "
               "integration_fork)\n");
        return tu_done();
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
    CHECKF(qs_os_single_threaded(), "libc says this fresh process is not single-threaded");
#endif
    cache = qslab_cache_create("t-fork-single", 72, 0, 0, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return tu_done();
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = qslab_cache_alloc(cache);
    /* QSLAB_DEBUG (the purger walks debug slabs) and QSLAB_GUARD_SAMPLE (the
     * sampler) start a qslab thread at once: then both forks take the locks */
    if (!qs_os_single_threaded())
        printf("note: not single-threaded before the first fork (a qslab thread runs): "
               "both forks take the locks\n");
    fork_once("single-threaded");

    pthread_t t;
    CHECK(pthread_create(&t, NULL, nothing, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECKF(!qs_os_single_threaded(), "libc says single-threaded after a pthread_create: "
                                     "fork would skip the locks with other threads about");
    fork_once("after a thread");

    for (int i = 0; i < 100; i++)
        qslab_cache_free(cache, keep[i]);
    CHECK(qslab_cache_destroy(cache) == 0);
    return tu_done();
}
