/*
 * inproc.c - allocators side by side in one process, interleaved.
 *
 *     bench_inproc [--test pair|batch] [--size BYTES] [--rounds N] ALLOC...
 *
 * ALLOC is the path of an allocator's shared library (loaded with
 * dlopen(RTLD_LOCAL); its own malloc and free are called through pointers)
 * or "glibc" (the process's malloc: run it without LD_PRELOAD).  Every round
 * runs each allocator once, in turn, so a noisy neighbour slows all of them
 * alike; the report gives the minimum, first quartile and median over the
 * rounds, in cycles per pair (pair) or per object alloc+free (batch), and
 * the ratio of medians to the first allocator.  On the shared 2-core VMs
 * this settles a few-cycle question that separate processes cannot (their
 * medians move by 20-60% between runs).  Libraries with initial-exec TLS
 * too large for the loader's surplus (jemalloc) cannot be loaded this way:
 * they are reported and skipped.  Batch results include the cache misses
 * the other allocators' rounds cause (every round starts cold), so compare
 * pairs here and batches with bench_slub.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

#define MAX_ALLOCS 8
#define BATCH 10000

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double run_pair(malloc_fn m, free_fn f, size_t size)
{
    enum { N = 100000 };
    uint64_t t0 = tsc_begin();
    for (int i = 0; i < N; i++) {
        void *p = m(size);
        __asm__ volatile("" : : "r"(p) : "memory");
        f(p);
    }
    return (double)(tsc_end() - t0) / N;
}

static double run_batch(malloc_fn m, free_fn f, size_t size)
{
    static void *objs[BATCH];
    uint64_t t0 = tsc_begin();
    for (int i = 0; i < BATCH; i++) {
        objs[i] = m(size);
        __asm__ volatile("" : : "r"(objs[i]) : "memory");
    }
    for (int i = 0; i < BATCH; i++)
        f(objs[i]);
    return (double)(tsc_end() - t0) / BATCH;
}

int main(int argc, char **argv)
{
    const char *test = "pair";
    size_t size = 64;
    int rounds = 60, n = 0;
    const char *name[MAX_ALLOCS];
    malloc_fn m[MAX_ALLOCS];
    free_fn f[MAX_ALLOCS];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--test") && i + 1 < argc) {
            test = argv[++i];
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (n < MAX_ALLOCS) {
            if (!strcmp(argv[i], "glibc")) {
                m[n] = malloc;
                f[n] = free;
            } else {
                void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                    fprintf(stderr, "bench_inproc: skipping %s: %s\n", argv[i], dlerror());
                    continue;
                }
                m[n] = (malloc_fn)dlsym(h, "malloc");
                f[n] = (free_fn)dlsym(h, "free");
                if (!m[n] || !f[n]) {
                    fprintf(stderr, "bench_inproc: skipping %s: no malloc/free\n", argv[i]);
                    continue;
                }
            }
            name[n++] = argv[i];
        }
    }
    if (n == 0 || rounds < 1 || (strcmp(test, "pair") && strcmp(test, "batch"))) {
        fprintf(stderr, "usage: bench_inproc [--test pair|batch] [--size BYTES] [--rounds N] "
                        "ALLOC...\n");
        return 2;
    }
    double (*run)(malloc_fn, free_fn, size_t) = strcmp(test, "pair") ? run_batch : run_pair;
    double *t = calloc((size_t)n * (size_t)rounds, sizeof(double));
    if (!t)
        return 1;
    for (int i = 0; i < n; i++) /* warm-up */
        run(m[i], f[i], size);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++)
            t[i * rounds + r] = run(m[i], f[i], size);
    printf("%s, %zu bytes, %d interleaved rounds, cycles per %s\n", test, size, rounds,
           strcmp(test, "pair") ? "object (alloc+free)" : "malloc+free pair");
    double first = 0;
    for (int i = 0; i < n; i++) {
        double *v = &t[i * rounds];
        qsort(v, (size_t)rounds, sizeof(double), cmp_double);
        double med = v[rounds / 2];
        if (i == 0)
            first = med;
        printf("%-64s min %7.1f  q1 %7.1f  median %7.1f  ratio %.2f\n", name[i], v[0],
               v[rounds / 4], med, med / first);
    }
    free(t);
    return 0;
}
