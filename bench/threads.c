/*
 * bench_threads: how throughput scales with threads, and what many threads
 * cost in memory.
 *
 *   --mode scale  --threads T threads (unpinned: more threads than CPUs is
 *                 the point) each do --ops operations on their own array of
 *                 1,000 slots: pick a slot at random, free what it holds,
 *                 malloc a new block of 16..4096 bytes (sizes spread evenly
 *                 over powers of two) and write its first word.  Result:
 *                 ops_per_s over all threads (wall time of the slowest).
 *   --mode idle   --threads T threads each allocate --objs blocks (sizes
 *                 16..4096 in turn) and free them all, then wait, idle,
 *                 while the main thread reads the process's RSS.  Result,
 *                 each minus the RSS before the threads were created:
 *                 rss_idle_kib (threads alive and idle), rss_exit_kib (right
 *                 after they exited), rss_later_kib (--wait-ms later);
 *                 per_thread_b (rss_idle per thread, bytes).  With --objs 0
 *                 the threads allocate nothing: the stacks' share of the
 *                 overhead, for reference.
 *   --mode churn  larson-like (after Larson & Krishnan, simplified): a
 *                 shared array of 1,000 slots per thread is filled by the
 *                 main thread (blocks of 16..512 bytes, seeded sizes); then
 *                 --gens generations each start --threads T threads
 *                 (default 2x the CPUs) that run at once.  Thread i of every
 *                 generation owns slots [1000 i, 1000 (i+1)), the slice the
 *                 thread i before it used, and does --ops operations: pick a
 *                 slot of its slice at random, free the block there
 *                 (allocated by an earlier thread, now exited), malloc a new
 *                 one of 16..512 bytes and write its first and last byte;
 *                 then it exits and, once all T have, the next generation
 *                 starts.  Result: ops_per_s over all generations (wall
 *                 time, thread creation and exit included).
 *   --mode phases --threads T threads (default: the CPUs), thread i pinned
 *                 to CPU i mod the CPUs, each take --objs blocks of a size of
 *                 its own (thread i: 256 B, 1 KiB, 4 KiB, 512 B, 2 KiB, in
 *                 turn from i = 0), writing a byte of each, then free them
 *                 all; the threads start each round together (a barrier,
 *                 as slub_test's batch on all CPUs) until --ops operations
 *                 (a malloc or a free each).  Working sets in size classes
 *                 of different slab orders live and die in turns: what one
 *                 thread frees, another's growth may give back, and the
 *                 first takes it again.  Result: ops_per_s over all threads
 *                 (wall time).
 *
 * Threads get 128 KiB stacks, so 1,000 of them fit anywhere.
 *
 * Usage: bench_threads --mode scale|idle|churn|phases [--threads T] [--ops N] [--objs N]
 *                      [--wait-ms MS] [--gens G]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS      1000
#define STACK_SIZE (128 * 1024)

static long nr_ops = 1000000, nr_objs = 64, wait_ms = 2000, nr_gens = 20;

/* 16, 32, ..., 4096 bytes plus up to the same again: every class is used. */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = bench_rand(rng);
    size_t base = (size_t)16 << (r % 8);
    return base + (size_t)((r >> 8) % base);
}

static void *scale_main(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    void **slot = bench_map(sizeof(void *) * SLOTS);

    for (long i = 0; i < nr_ops; i++) {
        size_t k = (size_t)(bench_rand(&rng) % SLOTS);
        free(slot[k]);
        slot[k] = malloc(random_size(&rng));
        if (!slot[k])
            bench_die("malloc failed");
        *(volatile long *)slot[k] = i;
    }
    for (size_t k = 0; k < SLOTS; k++)
        free(slot[k]);
    bench_unmap(slot, sizeof(void *) * SLOTS);
    return NULL;
}

/* churn mode: the shared slot array, and the generation now running (set by
 * the main thread before it creates that generation's threads). */
static void **churn_slot;
static long churn_gen;

static size_t churn_size(uint64_t *rng)
{
    return 16 + (size_t)(bench_rand(rng) % (512 - 16 + 1));
}

static void *churn_fill(uint64_t *rng)
{
    size_t size = churn_size(rng);
    char *p = malloc(size);

    if (!p)
        bench_die("malloc failed");
    p[0] = 1;
    p[size - 1] = 1;
    return p;
}

static void *churn_main(void *arg)
{
    long idx = (long)(uintptr_t)arg - 1;
    uint64_t rng = ((uint64_t)churn_gen * 0x10000 + (uint64_t)idx + 1) * 0x9E3779B97F4A7C15ULL + 1;
    void **slot = churn_slot + (size_t)idx * SLOTS;

    if (!rng)
        rng = 1;
    for (long i = 0; i < nr_ops; i++) {
        size_t k = (size_t)(bench_rand(&rng) % SLOTS);
        free(slot[k]);
        size_t size = churn_size(&rng);
        volatile char *p = malloc(size);
        if (!p)
            bench_die("malloc failed");
        p[0] = (char)i;
        p[size - 1] = (char)i;
        slot[k] = (void *)p;
    }
    return NULL;
}

/* phases mode: thread i's block size, its rounds of --objs mallocs then
 * --objs frees, and the barrier that starts each round. */
static struct bench_barrier phase_barrier;

static size_t phase_size(long i)
{
    static const size_t sizes[] = {256, 1024, 4096, 512, 2048};
    return sizes[i % (long)(sizeof sizes / sizeof sizes[0])];
}

static long phase_rounds(void)
{
    long r = nr_ops / (2 * nr_objs);
    return r > 0 ? r : 1;
}

static void *phases_main(void *arg)
{
    long idx = (long)(uintptr_t)arg - 1;
    size_t size = phase_size(idx);
    void **objs = bench_map(sizeof(void *) * (size_t)nr_objs);

    bench_pin((int)(idx % bench_ncpus()));
    for (long r = phase_rounds(); r > 0; r--) {
        bench_barrier_wait(&phase_barrier);
        for (long i = 0; i < nr_objs; i++) {
            objs[i] = malloc(size);
            if (!objs[i])
                bench_die("malloc failed");
            *(volatile char *)objs[i] = (char)r;
        }
        for (long i = 0; i < nr_objs; i++)
            free(objs[i]);
    }
    bench_unmap(objs, sizeof(void *) * (size_t)nr_objs);
    return NULL;
}

/* idle mode: the threads park here until the main thread has measured. */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER, all_parked = PTHREAD_COND_INITIALIZER;
static long parked, nr_threads = 0; /* 0: not given, the mode's default */
static int released;

static void *idle_main(void *arg)
{
    void **objs = nr_objs ? bench_map(sizeof(void *) * (size_t)nr_objs) : NULL;

    for (long i = 0; i < nr_objs; i++) {
        objs[i] = malloc((size_t)16 << (i % 9));
        if (!objs[i])
            bench_die("malloc failed");
        *(volatile char *)objs[i] = 1;
    }
    for (long i = 0; i < nr_objs; i++)
        free(objs[i]);
    if (objs)
        bench_unmap(objs, sizeof(void *) * (size_t)nr_objs);

    pthread_mutex_lock(&park_lock);
    if (++parked == nr_threads)
        pthread_cond_signal(&all_parked);
    while (!released)
        pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
    return arg;
}

static void start_threads(pthread_t *tids, void *(*fn)(void *))
{
    pthread_attr_t attr;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_SIZE);
    for (long i = 0; i < nr_threads; i++)
        if (pthread_create(&tids[i], &attr, fn, (void *)(uintptr_t)(i + 1)) != 0)
            bench_die("pthread_create of thread %ld failed", i + 1);
    pthread_attr_destroy(&attr);
}

static void join_threads(pthread_t *tids)
{
    for (long i = 0; i < nr_threads; i++)
        pthread_join(tids[i], NULL);
}

int main(int argc, char **argv)
{
    const char *mode = NULL;
    const struct bench_opt opts[] = {
        {"mode", NULL, &mode},    {"threads", &nr_threads, NULL}, {"ops", &nr_ops, NULL},
        {"objs", &nr_objs, NULL}, {"wait-ms", &wait_ms, NULL}, {"gens", &nr_gens, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "--mode scale|idle|churn|phases [--threads T] [--ops N] [--objs N] [--wait-ms MS] "
                "[--gens G]");
    if (!mode)
        bench_die("need --mode");
    if (nr_threads == 0)
        nr_threads = strcmp(mode, "churn") == 0    ? 2 * (long)bench_ncpus()
                     : strcmp(mode, "phases") == 0 ? (long)bench_ncpus()
                                                   : 1;
    if (nr_threads < 1)
        bench_die("need at least one thread");
    pthread_t *tids = bench_map(sizeof(pthread_t) * (size_t)nr_threads);

    if (strcmp(mode, "scale") == 0) {
        double t0 = bench_now();
        start_threads(tids, scale_main);
        join_threads(tids);
        double secs = bench_now() - t0;
        bench_result("ops_per_s", (double)(nr_ops * nr_threads) / secs);
    } else if (strcmp(mode, "phases") == 0) {
        if (nr_objs < 1)
            bench_die("phases: need --objs of 1 or more");
        bench_barrier_init(&phase_barrier, (unsigned)nr_threads);
        double t0 = bench_now();
        start_threads(tids, phases_main);
        join_threads(tids);
        double secs = bench_now() - t0;
        bench_result("ops_per_s", 2.0 * (double)phase_rounds() * (double)nr_objs * (double)nr_threads / secs);
    } else if (strcmp(mode, "churn") == 0) {
        size_t nslots = (size_t)nr_threads * SLOTS;
        uint64_t rng = 0x5EED5EED5EEDULL;
        churn_slot = bench_map(sizeof(void *) * nslots);
        for (size_t k = 0; k < nslots; k++)
            churn_slot[k] = churn_fill(&rng);
        double t0 = bench_now();
        for (churn_gen = 0; churn_gen < nr_gens; churn_gen++) {
            start_threads(tids, churn_main);
            join_threads(tids);
        }
        double secs = bench_now() - t0;
        for (size_t k = 0; k < nslots; k++)
            free(churn_slot[k]);
        bench_unmap(churn_slot, sizeof(void *) * nslots);
        bench_result("ops_per_s", (double)nr_ops * (double)nr_threads * (double)nr_gens / secs);
    } else if (strcmp(mode, "idle") == 0) {
        long before = bench_rss_kib();
        start_threads(tids, idle_main);
        pthread_mutex_lock(&park_lock);
        while (parked < nr_threads)
            pthread_cond_wait(&all_parked, &park_lock);
        long idle = bench_rss_kib();
        released = 1;
        pthread_cond_broadcast(&park_cond);
        pthread_mutex_unlock(&park_lock);
        join_threads(tids);
        long exited = bench_rss_kib();
        bench_sleep_ms(wait_ms);
        long later = bench_rss_kib();
        bench_result("rss_idle_kib", (double)(idle - before));
        bench_result("rss_exit_kib", (double)(exited - before));
        bench_result("rss_later_kib", (double)(later - before));
        bench_result("per_thread_b", (double)(idle - before) * 1024 / (double)nr_threads);
    } else {
        bench_die("unknown --mode %s", mode);
    }
    bench_result("minflt", (double)bench_minflt());
    bench_result_end();
    return 0;
}
