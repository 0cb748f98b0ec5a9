/*
 * bench/bench.h - what every benchmark driver shares.
 *
 * A driver (bench/<name>.c, built as bench_<name>) runs one case of one test
 * in its own process and prints its numbers as one line
 *
 *     result key=value key=value ...
 *
 * which the runner (bench/run.py) parses.  Drivers call malloc and free, so
 * that LD_PRELOAD chooses the allocator under test; their own bookkeeping
 * (pointer arrays, queues) lives in memory from bench_map(), outside every
 * allocator, and is not counted as the allocator's.  Drivers never pass or
 * fail on a number; they exit non-zero only when they cannot run.
 *
 * Time is read two ways: tsc_begin()/tsc_end() around short loops (time-stamp
 * counter ticks: on current x86 a fixed rate, which under turbo or in a VM is
 * not the core clock), and bench_now() (CLOCK_MONOTONIC seconds) for runs of
 * a second or so.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <x86intrin.h>

#include "../tests/xorshift.h"

#define NOINLINE __attribute__((noinline))

/* TSC before a measured region: earlier instructions have completed. */
static inline uint64_t tsc_begin(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

/* TSC after a measured region: the region's instructions have completed
 * (the LFENCE before RDTSC waits for them, as RDTSCP would; valgrind, which
 * bench/profile.py runs the drivers under, does not know RDTSCP on every
 * CPU: "unhandled instruction bytes: 0xF 0x1 0xF9" on this AMD EPYC). */
static inline uint64_t tsc_end(void)
{
    return tsc_begin();
}

/* Keep the compiler from pairing up a malloc and a free and deleting both. */
static inline void escape(void *p)
{
    __asm__ volatile("" : : "g"(p) : "memory");
}

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
void bench_sleep_ms(long ms);

/* Number of CPUs this process may run on. */
int bench_ncpus(void);
/* Pin the calling thread to the i-th CPU it may run on (i modulo their
 * number).  Returns the CPU number, or -1 (then the thread stays unpinned). */
int bench_pin(int i);

/* Memory of this process in KiB: resident now (VmRSS), resident at most so
 * far (VmHWM); -1 if /proc cannot be read. */
long bench_rss_kib(void);
long bench_peak_rss_kib(void);
/* Resident memory now and its anonymous part, in KiB, exact: from
 * /proc/self/smaps_rollup, a walk of the page tables (VmRSS and VmHWM come
 * from per-CPU counters that lag, and the kernel updates VmHWM only when
 * memory is unmapped or given back, so a peak that ends in madvise can be
 * missed).  Costs about a millisecond per 10,000 pages; read with open and
 * read, never malloc.  0, or -1 if it cannot be read. */
int bench_smaps_kib(long *rss, long *anon);
/* Minor page faults of the whole process so far (getrusage). */
long bench_minflt(void);

/* Anonymous zeroed memory from mmap, never from the allocator under test. */
void *bench_map(size_t bytes);
void bench_unmap(void *p, size_t bytes);

/* Median of v[0..n-1] (reorders v). */
double bench_median(double *v, int n);

/* xorshift64*: deterministic pseudo-random numbers, one state per thread
 * (tests/xorshift.h, the tests' too). */
static inline uint64_t bench_rand(uint64_t *state)
{
    return xorshift64s(state);
}

/* A barrier for threads pinned to distinct CPUs: spins, then yields the CPU,
 * so it also behaves when threads outnumber CPUs.  Storage starts zeroed
 * (static); bench_barrier_init sets the count, also between uses, once every
 * thread has arrived at the last phase (some may still be leaving it). */
struct bench_barrier {
    unsigned threads;
    _Atomic unsigned waiting;
    _Atomic unsigned generation;
};
void bench_barrier_init(struct bench_barrier *b, unsigned threads);
void bench_barrier_wait(struct bench_barrier *b);

/*
 * Command line: `bench_<name> [--option value]...`.  Each driver lists its
 * options with their defaults; an unknown option or a value that is not a
 * non-negative integer prints the usage line and exits 2.  String options
 * (`str` non-NULL) take any word.
 */
struct bench_opt {
    const char *name; /* without the leading "--" */
    long *num;        /* integer option, or NULL */
    const char **str; /* string option, or NULL */
};
void bench_parse(int argc, char **argv, const struct bench_opt *opts, int nopts, const char *usage);
/* A flag that takes no value (e.g. "--list"), before bench_parse: removes
 * each occurrence from argv (*argc shrinks); whether there was one. */
bool bench_take_flag(int *argc, char **argv, const char *flag);

/* The result line: bench_result("alloc", 12.5); ...; bench_result_end().
 * bench_result_str adds a word (a name: no spaces, no '='), for drivers that
 * print several result lines, e.g. "result test=batch front=slub size=64 ...". */
void bench_result(const char *key, double value);
void bench_result_str(const char *key, const char *value);
void bench_result_end(void);

/* Print "bench_<name>: message" on stderr and exit 1. */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After a timed loop filled objs[0..n): if one is NULL, die with "<the
 * allocation, fmt ...> failed". */
void bench_all_allocated(void *const *objs, long n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Name used in messages, set from argv[0] by bench_parse. */
extern const char *bench_name;

/* A --sizes argument: comma-separated object sizes of 8 bytes to max_bytes,
 * at most max of them, into out; their count (dies on a bad list). */
int bench_parse_sizes(const char *s, long *out, int max, long max_bytes);

#endif /* BENCH_H */
