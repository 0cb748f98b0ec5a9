/*
 * bench_giveback: how much memory an allocator gives back to the OS once a
 * program has freed its working set and gone quiet.
 *
 * --threads T threads together allocate --mib MiB of blocks (16 bytes to
 * 32 KiB, spread evenly over powers of two, so most bytes are in the larger
 * blocks), writing each, then each thread frees its own blocks in a shuffled
 * order (--order reverse: newest first).  The threads stay alive and idle
 * (with T = 1 the main thread does the work, as a single-threaded program).
 * The main thread then samples the RSS right away and every 500 ms up to
 * --wait-ms.
 *
 * Result (KiB, each minus the RSS before the first allocation):
 *   ws_kib         the working set, resident, before the frees
 *   kept_<ms>_kib  resident after <ms> milliseconds of idle (kept_0_kib ...)
 *   kept_<ms>_pct  the same as a percentage of ws_kib
 *
 * Usage: bench_giveback [--mib N] [--threads T] [--wait-ms MS] [--order shuffle|reverse]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_MS 500

struct worker {
    pthread_t tid;
    uint64_t rng;
    size_t bytes; /* this thread's share of the working set */
    void **objs;
    size_t nr, cap;
};

static pthread_barrier_t barrier; /* workers and main; blocking, so idle is idle */

static size_t random_size(uint64_t *rng)
{
    uint64_t r = bench_rand(rng);
    size_t base = (size_t)16 << (r % 12); /* 16 .. 32 KiB */
    return base + (size_t)((r >> 8) % base);
}

/* Allocate and write this worker's share of the working set. */
static void build(struct worker *w)
{
    for (size_t total = 0; total < w->bytes;) {
        size_t size = random_size(&w->rng);
        char *p = malloc(size);
        if (!p)
            bench_die("malloc(%zu) failed", size);
        memset(p, 1, size);
        if (w->nr == w->cap)
            bench_die("pointer array full");
        w->objs[w->nr++] = p;
        total += size;
    }
}

static int reverse_order; /* --order reverse: free the newest block first */

/* Free this worker's blocks in a shuffled (or reverse) order. */
static void release(struct worker *w)
{
    for (size_t i = w->nr; i > 1 && !reverse_order; i--) { /* Fisher-Yates */
        size_t k = (size_t)(bench_rand(&w->rng) % i);
        void *t = w->objs[i - 1];
        w->objs[i - 1] = w->objs[k];
        w->objs[k] = t;
    }
    for (size_t i = 0; i < w->nr; i++)
        free(w->objs[reverse_order ? w->nr - 1 - i : i]);
    bench_unmap(w->objs, sizeof(void *) * w->cap);
}

/* With several threads, each runs this; the main thread measures between
 * the barriers. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;

    build(w);
    pthread_barrier_wait(&barrier); /* the working set is complete */
    pthread_barrier_wait(&barrier); /* the main thread has measured it */
    release(w);
    pthread_barrier_wait(&barrier); /* everything is freed */
    pthread_barrier_wait(&barrier); /* the main thread is done: exit */
    return NULL;
}

int main(int argc, char **argv)
{
    long mib = 256, nr_threads = 1, wait_ms = 2000;
    const char *order = "shuffle";
    const struct bench_opt opts[] = {
        {"order", NULL, &order},
        {"mib", &mib, NULL},
        {"threads", &nr_threads, NULL},
        {"wait-ms", &wait_ms, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "[--mib N] [--threads T] [--wait-ms MS] [--order shuffle|reverse]");
    if (mib < 1 || nr_threads < 1)
        bench_die("need --mib and --threads of at least 1");
    if (strcmp(order, "shuffle") && strcmp(order, "reverse"))
        bench_die("unknown --order %s", order);
    reverse_order = strcmp(order, "reverse") == 0;

    /* One thread: the main thread does the work, as a single-threaded
     * program would (glibc then uses its main arena, which trims at free). */
    int threaded = nr_threads > 1;
    struct worker *workers = bench_map(sizeof(*workers) * (size_t)nr_threads);
    long base = bench_rss_kib();
    pthread_barrier_init(&barrier, NULL, (unsigned)nr_threads + 1);
    for (long i = 0; i < nr_threads; i++) {
        struct worker *w = &workers[i];
        w->rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
        w->bytes = ((size_t)mib << 20) / (size_t)nr_threads;
        w->cap = w->bytes / 16 + 1;
        w->objs = bench_map(sizeof(void *) * w->cap);
        if (threaded && pthread_create(&w->tid, NULL, worker_main, w) != 0)
            bench_die("pthread_create failed");
    }

    if (threaded)
        pthread_barrier_wait(&barrier);
    else
        build(&workers[0]);
    long ws = bench_rss_kib() - base;
    if (threaded) {
        pthread_barrier_wait(&barrier);
        pthread_barrier_wait(&barrier);
    } else {
        release(&workers[0]);
    }

    double t0 = bench_now();
    bench_result("ws_kib", (double)ws);
    for (long ms = 0; ms <= wait_ms; ms += SAMPLE_MS) {
        long left = (long)((t0 - bench_now()) * 1000) + ms;
        if (left > 0)
            bench_sleep_ms(left);
        long kept = bench_rss_kib() - base;
        char key[32];
        snprintf(key, sizeof(key), "kept_%ld_kib", ms);
        bench_result(key, (double)kept);
        snprintf(key, sizeof(key), "kept_%ld_pct", ms);
        bench_result(key, ws > 0 ? 100.0 * (double)kept / (double)ws : 0);
    }
    bench_result_end();

    if (threaded) {
        pthread_barrier_wait(&barrier);
        for (long i = 0; i < nr_threads; i++)
            pthread_join(workers[i].tid, NULL);
    }
    return 0;
}
