/*
 * bench_slub: qslab_malloc/qslab_free against glibc malloc/free on the two
 * single-thread patterns of the kernel's slub_test module, whose SLAB/SLQB/SLUB
 * numbers open the SLQB discussion (2009):
 *
 *   1. "Repeatedly allocate 10000 objs then free them": cycles per allocation
 *      and per free, printed as "alloc + free".
 *   2. "alloc/free test (repeatedly allocate and free)": cycles per
 *      allocation+free pair, 10000 pairs per round.
 *
 * Cycles are time-stamp counter ticks (lfence; rdtsc ... rdtscp; lfence), which
 * on current x86 run at a fixed rate, not the core clock.  Every (test, size)
 * runs one warm-up round, then ROUNDS rounds alternating which allocator goes
 * first; the table shows medians and the ratio qslab/glibc.  Both allocators
 * are measured in the same run on the same CPU.  Nothing passes or fails.
 *
 * Usage: bench_slub [--quick] [--csv FILE]
 */
#define _GNU_SOURCE
#include <qslab.h>

#include <errno.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define NR_OBJS      10000 /* objects per round, as in slub_test */
#define ROUNDS       15    /* measured rounds (after one warm-up round) */
#define ROUNDS_QUICK 3

#define FORCE_INLINE inline __attribute__((always_inline))
#define NOINLINE     __attribute__((noinline))

static const size_t sizes[] = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
#define NR_SIZES (sizeof(sizes) / sizeof(sizes[0]))

enum { QSLAB, GLIBC, NR_ALLOCATORS };

enum test { TEST_BATCH, TEST_PAIR, NR_TESTS };
static const char *const test_name[NR_TESTS] = {"batch", "pair"};
static const char *const test_title[NR_TESTS] = {
    "1. Repeatedly allocate 10000 objects, then free them (cycles per object: alloc + free)",
    "2. Alloc/free pairs, 10000 per round (cycles per alloc+free pair)",
};

/* Median cost of one operation, in cycles.  For TEST_PAIR only `total` is
 * known; `alloc` and `free` are NAN. */
struct cost {
    double alloc, free, total;
};

static void *objs[NR_OBJS];

static inline uint64_t tsc_begin(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static inline uint64_t tsc_end(void)
{
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

/* Keep the compiler from pairing up and deleting a malloc/free. */
static inline void escape(void *p)
{
    __asm__ volatile("" : : "g"(p) : "memory");
}

/*
 * The measured loops, inlined into one function per allocator so that both make
 * direct calls.  Results are cycles per operation.
 */
static FORCE_INLINE void batch_round(void *(*alloc_fn)(size_t), void (*free_fn)(void *),
                                     size_t size, double *alloc_c, double *free_c)
{
    uint64_t t0 = tsc_begin();
    for (int i = 0; i < NR_OBJS; i++)
        objs[i] = alloc_fn(size);
    uint64_t t1 = tsc_end();

    for (int i = 0; i < NR_OBJS; i++) {
        if (!objs[i]) {
            fprintf(stderr, "bench_slub: allocation of %zu bytes failed\n", size);
            exit(1);
        }
    }

    uint64_t t2 = tsc_begin();
    for (int i = 0; i < NR_OBJS; i++)
        free_fn(objs[i]);
    uint64_t t3 = tsc_end();

    *alloc_c = (double)(t1 - t0) / NR_OBJS;
    *free_c = (double)(t3 - t2) / NR_OBJS;
}

static FORCE_INLINE double pair_round(void *(*alloc_fn)(size_t), void (*free_fn)(void *),
                                      size_t size)
{
    uint64_t t0 = tsc_begin();
    for (int i = 0; i < NR_OBJS; i++) {
        void *p = alloc_fn(size);
        escape(p);
        free_fn(p);
    }
    uint64_t t1 = tsc_end();
    return (double)(t1 - t0) / NR_OBJS;
}

static NOINLINE void batch_qslab(size_t size, double *a, double *f)
{
    batch_round(qslab_malloc, qslab_free, size, a, f);
}

static NOINLINE void batch_glibc(size_t size, double *a, double *f)
{
    batch_round(malloc, free, size, a, f);
}

static NOINLINE double pair_qslab(size_t size)
{
    return pair_round(qslab_malloc, qslab_free, size);
}

static NOINLINE double pair_glibc(size_t size)
{
    return pair_round(malloc, free, size);
}

/* One round of `test` for allocator `a`. */
static struct cost run_round(enum test test, int a, size_t size)
{
    struct cost c;

    if (test == TEST_BATCH) {
        if (a == QSLAB)
            batch_qslab(size, &c.alloc, &c.free);
        else
            batch_glibc(size, &c.alloc, &c.free);
        c.total = c.alloc + c.free;
    } else {
        c.total = a == QSLAB ? pair_qslab(size) : pair_glibc(size);
        c.alloc = c.free = NAN;
    }
    return c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Warm-up round, then `rounds` rounds with the allocators taking turns going first. */
static void measure(enum test test, size_t size, int rounds, struct cost out[NR_ALLOCATORS])
{
    double alloc_c[NR_ALLOCATORS][rounds], free_c[NR_ALLOCATORS][rounds];
    double total_c[NR_ALLOCATORS][rounds];

    for (int i = 0; i < NR_ALLOCATORS; i++)
        run_round(test, i, size);

    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < NR_ALLOCATORS; k++) {
            int i = (r + k) % NR_ALLOCATORS;
            struct cost c = run_round(test, i, size);

            alloc_c[i][r] = c.alloc;
            free_c[i][r] = c.free;
            total_c[i][r] = c.total;
        }
    }

    for (int i = 0; i < NR_ALLOCATORS; i++) {
        if (test == TEST_BATCH) {
            /* The total is the sum of the two medians, as the table prints them. */
            out[i].alloc = median(alloc_c[i], rounds);
            out[i].free = median(free_c[i], rounds);
            out[i].total = out[i].alloc + out[i].free;
        } else {
            out[i].alloc = out[i].free = NAN;
            out[i].total = median(total_c[i], rounds);
        }
    }
}

/* "model name" of the first CPU in /proc/cpuinfo, or "unknown". */
static void cpu_model(char *buf, size_t len)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");

    snprintf(buf, len, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(buf, len, "%s", colon + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

static void print_header(int rounds, int cpu)
{
    char model[128], date[64];
    struct utsname u;
    time_t now = time(NULL);

    cpu_model(model, sizeof(model));
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    if (uname(&u) != 0)
        snprintf(u.release, sizeof(u.release), "?");

    printf("bench_slub: slub_test single-thread patterns, qslab %d.%d vs glibc %s malloc\n",
           QSLAB_VERSION_MAJOR, QSLAB_VERSION_MINOR, gnu_get_libc_version());
    printf("machine: %s, nproc %ld, Linux %s", model, sysconf(_SC_NPROCESSORS_ONLN), u.release);
    if (cpu >= 0)
        printf(", pinned to CPU %d", cpu);
    printf("\ndate:    %s\n", date);
    printf("cycles:  TSC ticks per operation, median of %d rounds after 1 warm-up round\n", rounds);
}

static void print_row(enum test test, size_t size, const struct cost c[NR_ALLOCATORS])
{
    double ratio = c[QSLAB].total / c[GLIBC].total;

    if (test == TEST_BATCH)
        printf("%8zu | %7.0f + %6.0f | %7.0f + %6.0f | %5.2f\n", size, c[QSLAB].alloc,
               c[QSLAB].free, c[GLIBC].alloc, c[GLIBC].free, ratio);
    else
        printf("%8zu | %16.0f | %16.0f | %5.2f\n", size, c[QSLAB].total, c[GLIBC].total, ratio);
}

static void csv_row(FILE *csv, enum test test, size_t size, const struct cost c[NR_ALLOCATORS])
{
    fprintf(csv, "%s,%zu", test_name[test], size);
    for (int i = 0; i < NR_ALLOCATORS; i++) {
        if (test == TEST_BATCH)
            fprintf(csv, ",%.1f,%.1f,%.1f", c[i].alloc, c[i].free, c[i].total);
        else
            fprintf(csv, ",,,%.1f", c[i].total);
    }
    fprintf(csv, ",%.3f\n", c[QSLAB].total / c[GLIBC].total);
}

/* Pin to the CPU we run on, so that every round sees the same TSC and caches. */
static int pin_cpu(void)
{
    int cpu = sched_getcpu();
    cpu_set_t set;

    if (cpu < 0)
        return -1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? cpu : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_slub [--quick] [--csv FILE]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int rounds = ROUNDS;
    const char *csv_path = NULL;
    FILE *csv = NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            rounds = ROUNDS_QUICK;
        else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
            csv_path = argv[++i];
        else
            usage();
    }
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "bench_slub: %s: %s\n", csv_path, strerror(errno));
            return 1;
        }
        fprintf(csv, "test,size,qslab_alloc,qslab_free,qslab_total,"
                     "glibc_alloc,glibc_free,glibc_total,ratio\n");
    }

    print_header(rounds, pin_cpu());
    for (int test = 0; test < NR_TESTS; test++) {
        printf("\n%s\n", test_title[test]);
        printf("    size | %16s | %16s | ratio (qslab/glibc)\n", "qslab alloc+free",
               "glibc alloc+free");
        for (size_t s = 0; s < NR_SIZES; s++) {
            struct cost c[NR_ALLOCATORS];

            measure(test, sizes[s], rounds, c);
            print_row(test, sizes[s], c);
            fflush(stdout);
            if (csv)
                csv_row(csv, test, sizes[s], c);
        }
    }

    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "bench_slub: %s: %s\n", csv_path, strerror(errno));
        return 1;
    }
    return 0;
}
