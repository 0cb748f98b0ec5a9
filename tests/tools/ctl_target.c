/*
 * ctl_target: a process for control_test.py (the control channel), run
 * with QSLAB_CONTROL=1 (or "api" as argument: it calls qslab_control_start
 * itself).  It makes two caches, prints "READY", then obeys lines on stdin,
 * answering each with one line:
 *   alloc N    N more objects of ctl_a (100 bytes), kept        -> DONE
 *   free N     free N of the kept ctl_a objects                  -> DONE
 *   churn      a thread allocates, fills, checks and frees ctl_b
 *              objects (512 bytes) in a loop from now on          -> DONE
 *   count      COUNT <rounds> BAD <objects found overwritten>
 *   destroyloop  a thread creates and destroys a cache ctl_tmp in a loop
 *              (no objects) from now on                           -> DONE
 *   rounds     ROUNDS <caches created and destroyed so far>
 *   fork       a child checks that it serves nothing: its
 *              qslab_control_stop() fails with ENOENT, and it exits
 *              (its exit must not remove the parent's socket)     -> FORK <stop> <errno name>
 *   stop       qslab_control_stop()                               -> STOP <rc>
 *   start      qslab_control_start()                              -> START <rc>
 * It exits at the end of stdin.  It runs on one CPU (the first it may use),
 * so that its frees land in the queue its allocations came from.
 */
#define _GNU_SOURCE
#include <qslab.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static qslab_cache *a, *b;
static void *kept[100000];
static int nkept;
static unsigned long rounds, bad;
static int churning;
static unsigned long tmp_rounds;

static void *destroyloop(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&churning, __ATOMIC_RELAXED)) {
        qslab_cache *t = qslab_cache_create("ctl_tmp", 64, 0, 0, NULL);
        if (!t || qslab_cache_destroy(t) != 0)
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&tmp_rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    unsigned char *v[64];
    for (unsigned long r = 1; __atomic_load_n(&churning, __ATOMIC_RELAXED); r++) {
        for (int i = 0; i < 64; i++) {
            v[i] = qslab_cache_alloc(b);
            if (!v[i]) {
                __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            memset(v[i], (int)(r + (unsigned long)i) & 0xff, 512);
        }
        for (int i = 0; i < 64; i++) {
            if (!v[i])
                continue;
            for (int k = 0; k < 512; k++)
                if (v[i][k] != (unsigned char)((r + (unsigned long)i) & 0xff)) {
                    __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
                    break;
                }
            qslab_cache_free(b, v[i]);
        }
        __atomic_store_n(&rounds, r, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Between two commands the main thread is quiet, as qslab_cache_validate
 * wants of a cache's users: it passes qs_global (through qslab_cache_find)
 * before and after each command, and the control thread takes qs_global in
 * each request, so the order the test's pipes give between the two (a
 * request, then a command, then a request) is an order TSan sees too. */
static void quiet_point(void)
{
    (void)qslab_cache_find("ctl_a");
}

int main(int argc, char **argv)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &set)) {
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                sched_setaffinity(0, sizeof set, &set);
                break;
            }
    if (argc > 1 && strcmp(argv[1], "api") == 0 && qslab_control_start() != 0) {
        perror("qslab_control_start");
        return 1;
    }
    a = qslab_cache_create("ctl_a", 100, 0, 0, NULL);
    b = qslab_cache_create("ctl_b", 512, 0, 0, NULL);
    if (!a || !b)
        return 1;
    for (; nkept < 500; nkept++)
        kept[nkept] = qslab_cache_alloc(a);
    qslab_free(qslab_malloc(64)); /* kmalloc-64 made: a class is a cache once used */
    printf("READY\n");
    fflush(stdout);
    pthread_t t, d;
    int started = 0, dstarted = 0;
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        int n = 0;
        quiet_point();
        if (sscanf(line, "alloc %d", &n) == 1) {
            for (int i = 0; i < n && nkept < 100000; i++)
                if (!(kept[nkept++] = qslab_cache_alloc(a)))
                    return 1;
            printf("DONE\n");
        } else if (sscanf(line, "free %d", &n) == 1) {
            for (int i = 0; i < n && nkept > 0; i++)
                qslab_cache_free(a, kept[--nkept]);
            printf("DONE\n");
        } else if (strcmp(line, "churn\n") == 0) {
            if (!started) {
                churning = 1;
                started = pthread_create(&t, NULL, churn, NULL) == 0;
            }
            printf("DONE\n");
        } else if (strcmp(line, "destroyloop\n") == 0) {
            if (!dstarted) {
                __atomic_store_n(&churning, 1, __ATOMIC_RELAXED);
                dstarted = pthread_create(&d, NULL, destroyloop, NULL) == 0;
            }
            printf("DONE\n");
        } else if (strcmp(line, "rounds\n") == 0) {
            printf("ROUNDS %lu\n", __atomic_load_n(&tmp_rounds, __ATOMIC_RELAXED));
        } else if (strcmp(line, "count\n") == 0) {
            printf("COUNT %lu BAD %lu\n", __atomic_load_n(&rounds, __ATOMIC_RELAXED),
                   __atomic_load_n(&bad, __ATOMIC_RELAXED));
        } else if (strcmp(line, "fork\n") == 0) {
            int pfd[2];
            if (pipe(pfd) != 0)
                return 1;
            fflush(stdout);
            pid_t c = fork();
            if (c == 0) {
                int r = qslab_control_stop();
                char msg[64];
                int len = snprintf(msg, sizeof msg, "FORK %d %s\n", r,
                                   r != 0 && errno == ENOENT ? "ENOENT" : "other");
                if (write(pfd[1], msg, (size_t)len) != len)
                    _exit(2);
                exit(0); /* with its destructors: the parent's socket must stay */
            }
            close(pfd[1]);
            char msg[64] = "";
            ssize_t got = read(pfd[0], msg, sizeof msg - 1);
            close(pfd[0]);
            waitpid(c, NULL, 0);
            printf("%s", got > 0 ? msg : "FORK none\n");
        } else if (strcmp(line, "stop\n") == 0) {
            printf("STOP %d\n", qslab_control_stop());
        } else if (strcmp(line, "start\n") == 0) {
            printf("START %d\n", qslab_control_start());
        } else {
            printf("WHAT\n");
        }
        quiet_point();
        fflush(stdout);
    }
    __atomic_store_n(&churning, 0, __ATOMIC_RELAXED);
    if (started)
        pthread_join(t, NULL);
    if (dstarted)
        pthread_join(d, NULL);
    while (nkept > 0)
        qslab_cache_free(a, kept[--nkept]);
    return bad ? 1 : 0;
}
