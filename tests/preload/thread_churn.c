/*
 * thread_churn.c - memory returns to its baseline after 5,000 short-lived
 * threads.  Run under the preload (qslab-run).
 *
 * Each thread allocates a few hundred objects of sizes across the classes
 * (seeded by its index), frees most of them itself, and swaps a batch with a
 * shared mailbox: it frees the batch another thread left there (objects freed
 * by another thread, possibly after their owner exited) and leaves part of its
 * own.  Between every two of them runs a thread that never calls malloc:
 * glibc still frees for it at exit (the thread-local storage vectors of
 * cached stacks it evicts, after the thread's key destructors ran).  At most
 * 32 threads are alive at once.
 *
 * Baseline: after a warm-up churn of 500 such threads (and 500 idle ones),
 * the mailbox emptied and malloc_trim(0), read RSS (/proc/self/statm) and
 * mallinfo2(): uordblks
 * (allocated) and arena (bytes in slabs, free objects included).  After 5,000
 * more (or argv[1]; and as many idle ones), emptied and trimmed the same way:
 *   RSS      <= baseline + 16 MiB
 *   uordblks <= baseline + 1 MiB
 *   arena    <= baseline + 128 KiB
 * Every object is freed, every thread has exited and malloc_trim gave back
 * the empty slabs, so what stays in slabs is the main thread's few objects.
 * The arena bound catches a per-thread leak of free objects (a queue never
 * retired keeps what it holds: 500-900 KiB here when idle threads' exit-time
 * frees attach queues that are never retired) that the RSS bound would only
 * see after tens of thousands of threads; a correct allocator stays within
 * a few KiB.  Nothing here is timed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ALIVE  32
#define WARMUP     500
#define THREADS    5000
#define PER_THREAD 300
#define MAILBOX    64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int alive;
static void *mailbox[MAILBOX];
static int mailbox_n;
static unsigned long failures;

static const size_t sizes[] = {8,    16,   24,    40,    64,     96,    128,  160,
                               192,  256,  300,   512,   777,    1024,  2000, 4096,
                               6000, 8192, 20000, 65536, 100000, 300000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void thread_done(void)
{
    pthread_mutex_lock(&lock);
    alive--;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
    if ((uintptr_t)arg % 2 == 1) { /* an idle thread: no allocation of its own */
        thread_done();
        return NULL;
    }
    uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 7;
    void *p[PER_THREAD];
    int n = PER_THREAD - (int)((uintptr_t)arg % 100);
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* mostly small, a few large */
        size_t s = sizes[(x % 8 == 0) ? x % NSIZES : x % 12];
        p[i] = malloc(s);
        if (!p[i]) {
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
            continue;
        }
        memset(p[i], (int)i, s < 512 ? s : 512);
        if (i % 5 == 4) { /* some die young, in another order */
            free(p[i - 2]);
            p[i - 2] = NULL;
        }
    }
    /* swap a batch with the mailbox */
    void *got[MAILBOX];
    int ngot;
    pthread_mutex_lock(&lock);
    ngot = mailbox_n;
    memcpy(got, mailbox, sizeof(void *) * (size_t)ngot);
    mailbox_n = 0;
    for (int i = 0; i < n && mailbox_n < MAILBOX; i += 5)
        if (p[i]) {
            mailbox[mailbox_n++] = p[i];
            p[i] = NULL;
        }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < ngot; i++)
        free(got[i]);
    for (int i = 0; i < n; i++)
        free(p[i]);
    thread_done();
    return NULL;
}

static int churn(int first, int count)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 2 * first; i < 2 * (first + count); i++) {
        pthread_mutex_lock(&lock);
        while (alive >= MAX_ALIVE)
            pthread_cond_wait(&cond, &lock);
        alive++;
        pthread_mutex_unlock(&lock);
        pthread_t t;
        int rc = pthread_create(&t, &attr, worker, (void *)(uintptr_t)i);
        if (rc != 0) {
            fprintf(stderr, "FAIL: pthread_create #%d: %s\n", i, strerror(rc));
            return -1;
        }
    }
    pthread_mutex_lock(&lock);
    while (alive > 0)
        pthread_cond_wait(&cond, &lock);
    for (int i = 0; i < mailbox_n; i++)
        free(mailbox[i]);
    mailbox_n = 0;
    pthread_mutex_unlock(&lock);
    pthread_attr_destroy(&attr);
    return 0;
}

static size_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2) {
        fprintf(stderr, "FAIL: cannot read /proc/self/statm\n");
        exit(1);
    }
    fclose(f);
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* A detached thread has returned from worker() but may still be exiting
 * (its qslab queues are retired in a TLS destructor after that).  Wait until
 * the kernel shows only this thread, besides qslab's own (named "qslab-*":
 * the purger, the guarded sampler, the control channel's server). */
static void wait_single_thread(void)
{
    for (;;) {
        int threads = 0;
        DIR *d = opendir("/proc/self/task");
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            char path[300], comm[32] = "";
            snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f)
                continue; /* gone meanwhile */
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
            threads += strncmp(comm, "qslab-", 6) != 0;
        }
        if (d)
            closedir(d);
        if (threads == 1)
            return;
        usleep(1000);
    }
}

int main(int argc, char **argv)
{
    int (*node)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "qslab_object_node");
    void *probe = malloc(10);
    if (!node || node(probe) < 0) {
        fprintf(stderr, "FAIL: not running on libqslab-malloc (run under qslab-run)\n");
        return 1;
    }
    free(probe);

    if (churn(0, WARMUP) != 0)
        return 1;
    wait_single_thread();
    malloc_trim(0);
    size_t rss0 = rss_bytes();
    struct mallinfo2 mi0 = mallinfo2();

    int threads = argc > 1 ? atoi(argv[1]) : THREADS;
    if (churn(WARMUP, threads) != 0)
        return 1;
    wait_single_thread();
    malloc_trim(0);
    size_t rss1 = rss_bytes();
    struct mallinfo2 mi1 = mallinfo2();

    size_t used0 = mi0.uordblks, used1 = mi1.uordblks, slab0 = mi0.arena, slab1 = mi1.arena;
    printf("baseline after %d (+ as many idle) threads: rss %zu KiB, uordblks %zu KiB, arena %zu "
           "KiB\n",
           WARMUP, rss0 >> 10, used0 >> 10, slab0 >> 10);
    printf("after %d (+ as many idle) more threads: rss %zu KiB, uordblks %zu KiB, arena %zu KiB\n",
           threads, rss1 >> 10, used1 >> 10, slab1 >> 10);
    int bad = 0;
    if (failures) {
        fprintf(stderr, "FAIL: %lu allocations failed\n", failures);
        bad = 1;
    }
    if (rss1 > rss0 + ((size_t)16 << 20)) {
        fprintf(stderr, "FAIL: RSS grew from %zu KiB to %zu KiB (bound: baseline + 16 MiB)\n",
                rss0 >> 10, rss1 >> 10);
        bad = 1;
    }
    if (used1 > used0 + ((size_t)1 << 20)) {
        fprintf(
            stderr,
            "FAIL: mallinfo2().uordblks grew from %zu KiB to %zu KiB (bound: baseline + 1 MiB)\n",
            used0 >> 10, used1 >> 10);
        bad = 1;
    }
    if (slab1 > slab0 + ((size_t)128 << 10)) {
        fprintf(stderr,
                "FAIL: mallinfo2().arena (bytes in slabs) grew from %zu KiB to %zu KiB with "
                "nothing allocated "
                "(bound: baseline + 128 KiB; of it %zu KiB free objects held in queues/inboxes, "
                "fsmblks)\n",
                slab0 >> 10, slab1 >> 10, mi1.fsmblks >> 10);
        bad = 1;
    }
    if (!bad)
        printf("PASS: memory back to its baseline after %d short-lived threads\n", threads);
    return bad;
}
