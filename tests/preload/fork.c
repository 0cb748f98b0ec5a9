/*
 * fork.c - fork while other threads allocate, with qslab linked in statically
 * (libqslab-malloc.a: malloc & co defined in the executable itself, so glibc's
 * own calls reach qslab too).
 *
 * Four threads allocate and free continuously (sizes across every class, a
 * 40 MiB block now and then, objects freed by another thread through a shared
 * ring).  The main thread forks 50 times (in each of make test's 7 modes:
 * 350 forks a run; the four threads keep both CPUs busy for as long as the
 * forks take, 8.7 CPU-s a mode at 100 forks, most of it copy-on-write
 * faults in the parent while a child lives);
 * each child, at once, allocates and frees sizes across the classes and a
 * 40 MiB block, starts a thread that does the same, uses stdio, and exits 0.
 * Every child must exit 0.  A child that deadlocks in the allocator (a lock
 * held by another thread at fork time) is killed by its 60 s alarm and
 * reported; the ctest TIMEOUT backs this up.
 */
#define _GNU_SOURCE
#include <qslab.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 4
#define NFORKS   50
#define RING     256

static atomic_int stop;
static atomic_long ops;
static _Atomic(void *) ring[RING];

static const size_t sizes[] = {1,       8,       16,      24,      64,       96,      100,   192,
                               256,     500,     1024,    3000,    4096,     5000,    16384, 70000,
                               1 << 18, 1 << 20, 3 << 20, 9 << 20, 33 << 20, 40 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static int is_qslab(const void *p)
{
    return p && qslab_object_node(p) >= 0;
}

static void *churn(void *arg)
{
    uint64_t x = (uintptr_t)arg * 2654435761u + 1;
    void *keep[64] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = sizes[x % (NSIZES - 2)]; /* the big ones below, rarely */
        if ((x >> 20) % 4096 == 0)
            n = sizes[NSIZES - 1 - (x >> 40) % 2];
        unsigned slot = (unsigned)(x >> 8) % 64;
        free(keep[slot]);
        keep[slot] = malloc(n);
        if (!keep[slot]) {
            fprintf(stderr, "FAIL: malloc(%zu) failed in a churn thread\n", n);
            exit(1);
        }
        memset(keep[slot], (int)x, n < 256 ? n : 256);
        /* swap with the ring: what we take was allocated by another thread */
        unsigned r = (unsigned)(x >> 32) % RING;
        void *mine = malloc(32 + (x >> 50) % 300);
        void *theirs = atomic_exchange(&ring[r], mine);
        free(theirs);
        atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < NSIZES; i++) {
        void *p = malloc(sizes[i]);
        if (!is_qslab(p))
            return (void *)1;
        memset(p, 1, sizes[i] < 4096 ? sizes[i] : 4096);
        free(p);
    }
    return NULL;
}

/* What each child does; returns its exit code. */
static int child(int k)
{
    alarm(60);
    void *p[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        p[i] = malloc(sizes[i]);
        if (!is_qslab(p[i])) {
            fprintf(stderr, "child %d: malloc(%zu) = %p is not qslab memory\n", k, sizes[i], p[i]);
            return 2;
        }
        memset(p[i], k, sizes[i] < 8192 ? sizes[i] : 8192);
    }
    for (size_t i = 0; i < NSIZES; i++)
        free(p[i]);
    void *big = calloc(1, 40 << 20);
    if (!big)
        return 3;
    free(big);
    char *s = NULL;
    if (asprintf(&s, "child %d", k) < 0 || !is_qslab(s))
        return 4;
    free(s);
    pthread_t t;
    void *res = (void *)1;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, &res) != 0 || res)
        return 5;
    FILE *f = fopen("/dev/null", "w"); /* glibc allocates the FILE and its buffer */
    if (!f)
        return 6;
    fprintf(f, "%d\n", k);
    fclose(f);
    return 0;
}

int main(void)
{
    /* link-time mode: malloc here, and inside glibc, is qslab's */
    char *m = malloc(100);
    if (m)
        m[0] = 0;
    char *d = strdup("x");
    if (!is_qslab(m) || !is_qslab(d)) {
        fprintf(stderr, "FAIL: malloc or glibc's strdup does not return qslab memory: "
                        "libqslab-malloc.a is not linked in\n");
        return 1;
    }
    free(m);
    free(d);

    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)(i + 1)) != 0) {
            fprintf(stderr, "FAIL: pthread_create\n");
            return 1;
        }
    /* the threads are busy before the first fork */
    while (atomic_load(&ops) < 10000)
        sched_yield();

    int bad = 0;
    for (int k = 0; k < NFORKS; k++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "FAIL: fork %d: %s\n", k, strerror(errno));
            bad++;
            break;
        }
        if (pid == 0) {
            int rc = child(k);
            if (rc == 0)
                exit(0); /* the full exit: atexit handlers, stdio, destructors */
            _exit(rc);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (WIFSIGNALED(st)) {
            fprintf(stderr, "FAIL: child %d killed by signal %d%s\n", k, WTERMSIG(st),
                    WTERMSIG(st) == SIGALRM ? " (stuck for 60 s: deadlock after fork?)" : "");
            bad++;
        } else if (WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL: child %d exited %d\n", k, WEXITSTATUS(st));
            bad++;
        }
        if (bad >= 5)
            break;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < RING; i++)
        free(atomic_exchange(&ring[i], NULL));
    if (bad) {
        fprintf(stderr, "FAIL: %d of the children failed\n", bad);
        return 1;
    }
    printf("PASS: %d forks while %d threads allocated; every child allocated and exited 0\n",
           NFORKS, NTHREADS);
    return 0;
}
