/*
 * bench/bench.c - the helpers of bench/bench.h.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

const char *bench_name = "bench";

void bench_die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", bench_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void bench_all_allocated(void *const *objs, long n, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    for (long i = 0; i < n; i++)
        if (!objs[i]) {
            va_start(ap, fmt);
            vsnprintf(what, sizeof(what), fmt, ap);
            va_end(ap);
            bench_die("%s failed", what);
        }
}

double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The CPUs the process may run on, read before any thread pins itself. */
static cpu_set_t allowed_cpus;

__attribute__((constructor)) static void read_allowed_cpus(void)
{
    if (sched_getaffinity(0, sizeof(allowed_cpus), &allowed_cpus) != 0 ||
        CPU_COUNT(&allowed_cpus) == 0) {
        CPU_ZERO(&allowed_cpus);
        CPU_SET(0, &allowed_cpus);
    }
}

int bench_ncpus(void)
{
    return CPU_COUNT(&allowed_cpus);
}

int bench_pin(int i)
{
    cpu_set_t set;

    i %= bench_ncpus();
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed_cpus) || i-- > 0)
            continue;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return sched_setaffinity(0, sizeof(set), &set) == 0 ? cpu : -1;
    }
    return -1;
}

/* A "Field:   1234 kB" line of /proc/self/status. */
static long status_kib(const char *field)
{
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

long bench_rss_kib(void)
{
    return status_kib("VmRSS");
}

long bench_peak_rss_kib(void)
{
    return status_kib("VmHWM");
}

int bench_smaps_kib(long *rss, long *anon)
{
    char buf[4096];
    int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *r = strstr(buf, "\nRss:"), *a = strstr(buf, "\nAnonymous:");
    if (!r || !a)
        return -1;
    *rss = strtol(r + 5, NULL, 10);
    *anon = strtol(a + 11, NULL, 10);
    return 0;
}

long bench_minflt(void)
{
    struct rusage ru;

    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

void *bench_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        bench_die("mmap of %zu bytes: %s", bytes, strerror(errno));
    return p;
}

void bench_unmap(void *p, size_t bytes)
{
    munmap(p, bytes);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Called again between uses (fronts_patterns.c sets one count per pattern)
 * while a thread released by the last phase of the use before may not have
 * seen its release yet: it still spins until the generation differs from
 * the one it read.  So the generation is never reset, only counted on: a
 * reset to 0 when that thread had read 0 would keep it spinning for good,
 * and the next phase would wait for it for ever (a worker still in the
 * warm-up's barrier when the next test begins).  `waiting` is 0 already
 * once every thread of a phase has arrived. */
void bench_barrier_init(struct bench_barrier *b, unsigned threads)
{
    b->threads = threads;
    atomic_store(&b->waiting, 0);
}

void bench_barrier_wait(struct bench_barrier *b)
{
    unsigned gen = atomic_load(&b->generation);

    if (atomic_fetch_add(&b->waiting, 1) + 1 == b->threads) {
        atomic_store(&b->waiting, 0);
        atomic_fetch_add(&b->generation, 1);
        return;
    }
    for (unsigned spins = 0; atomic_load(&b->generation) == gen; spins++) {
        if (spins < 1000)
            _mm_pause();
        else
            sched_yield();
    }
}

static _Noreturn void usage_exit(const char *usage)
{
    fprintf(stderr, "usage: %s %s\n", bench_name, usage);
    exit(2);
}

bool bench_take_flag(int *argc, char **argv, const char *flag)
{
    bool seen = false;

    for (int i = 1; i < *argc; i++)
        if (strcmp(argv[i], flag) == 0) {
            seen = true;
            memmove(&argv[i], &argv[i + 1], sizeof(*argv) * (size_t)(*argc - i));
            (*argc)--;
            i--;
        }
    return seen;
}

void bench_parse(int argc, char **argv, const struct bench_opt *opts, int nopts, const char *usage)
{
    const char *slash = strrchr(argv[0], '/');

    bench_name = slash ? slash + 1 : argv[0];
    for (int i = 1; i < argc; i++) {
        const struct bench_opt *o = NULL;

        if (strncmp(argv[i], "--", 2) == 0)
            for (int k = 0; k < nopts && !o; k++)
                if (strcmp(argv[i] + 2, opts[k].name) == 0)
                    o = &opts[k];
        if (!o || i + 1 >= argc)
            usage_exit(usage);

        const char *value = argv[++i];
        if (o->str) {
            *o->str = value;
        } else {
            char *end;
            errno = 0;
            long v = strtol(value, &end, 10);
            if (errno || end == value || *end || v < 0)
                usage_exit(usage);
            *o->num = v;
        }
    }
}

static int result_started;

void bench_result(const char *key, double value)
{
    if (!result_started) {
        fputs("result", stdout);
        result_started = 1;
    }
    printf(" %s=%.6g", key, value);
}

void bench_result_str(const char *key, const char *value)
{
    if (!result_started) {
        fputs("result", stdout);
        result_started = 1;
    }
    printf(" %s=%s", key, value);
}

void bench_result_end(void)
{
    putchar('\n');
    fflush(stdout);
    result_started = 0;
}

int bench_parse_sizes(const char *s, long *out, int max, long max_bytes)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 8 || v > max_bytes || (*end && *end != ',') || n == max)
            bench_die("--sizes: comma-separated sizes of 8 to %ld bytes (at most %d)", max_bytes, max);
        out[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n;
}
