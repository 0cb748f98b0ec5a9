/*
 * fuzz_util.h - what both fuzz targets share (header only): the input
 * reader, the object patterns, failing loudly, quieting qslab's expected
 * warnings, pinning to one CPU.
 *
 * A target fails with fz_fail(): one line "FUZZ FAILURE: ..." on stderr,
 * then abort(), which libFuzzer reports as a crash (and replay_main as a
 * failed test).
 */
#ifndef QSLAB_FUZZ_UTIL_H
#define QSLAB_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The pattern loops run over every byte of every object: without coverage
 * instrumentation (libFuzzer's compare tracing there cost two thirds of the
 * time), and not inlined into instrumented callers. */
#if defined(__clang__) && __clang_major__ >= 13
#define FZ_NOCOV __attribute__((noinline, unused, no_sanitize("coverage")))
#else
#define FZ_NOCOV __attribute__((noinline, unused))
#endif

__attribute__((noreturn, unused, format(printf, 1, 2))) static void fz_fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FUZZ FAILURE: %s\n", line);
    fflush(stderr);
    abort();
}

#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fz_fail(__VA_ARGS__);                                                                  \
    } while (0)

/* ---- input: a byte string read front to back; 0 once it is used up ---- */
struct fz_in {
    const uint8_t *p;
    size_t n, i;
};

static inline unsigned fz_u8(struct fz_in *in)
{
    return in->i < in->n ? in->p[in->i++] : 0;
}

static inline unsigned fz_u16(struct fz_in *in)
{
    unsigned lo = fz_u8(in);
    return lo | fz_u8(in) << 8;
}

static inline bool fz_more(const struct fz_in *in)
{
    return in->i < in->n;
}

/* ---- object patterns ----
 * Byte i of an object with key h is (h0 + i * stride) ^ (i >> 9), stride odd
 * and taken from h: two objects with different keys differ almost
 * everywhere.  Objects up to FZ_FULL bytes are filled and checked whole;
 * larger ones at their first and last FZ_EDGE bytes and 16 bytes of every
 * 4 KiB in between (of every 1/16th over 64 KiB: big objects touch few pages).  `skip` bytes at the
 * start are left alone (fuzz_misuse keeps the link word's bytes zero). */
enum { FZ_FULL = 4096, FZ_EDGE = 2048, FZ_STEP = 4096, FZ_SAMPLE = 16 };

static inline uint64_t fz_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline uint8_t fz_pat(uint64_t h, size_t i)
{
    unsigned stride = (unsigned)(h >> 8) | 1u;
    return (uint8_t)(((unsigned)h + (unsigned)i * stride) ^ (unsigned)(i >> 9));
}

/* Call fn(from, to) for each segment of an object of `size` bytes that the
 * pattern covers, clipped to [skip, limit). */
#define FZ_SEGMENTS(size, skip, limit, BODY)                                                       \
    do {                                                                                           \
        size_t fz_sz_ = (size), fz_sk_ = (skip), fz_lim_ = (limit);                                \
        size_t fz_from_, fz_to_;                                                                   \
        size_t fz_step_ = fz_sz_ <= ((size_t)64 << 10) ? (size_t)FZ_STEP                           \
                                                       : (fz_sz_ >> 4) & ~(size_t)4095;            \
        if (fz_lim_ > fz_sz_)                                                                      \
            fz_lim_ = fz_sz_;                                                                      \
        for (size_t fz_k_ = 0;; fz_k_++) {                                                         \
            if (fz_sz_ <= FZ_FULL) {                                                               \
                if (fz_k_)                                                                         \
                    break;                                                                         \
                fz_from_ = 0;                                                                      \
                fz_to_ = fz_sz_;                                                                   \
            } else if (fz_k_ == 0) {                                                               \
                fz_from_ = 0;                                                                      \
                fz_to_ = FZ_EDGE;                                                                  \
            } else if (fz_k_ == 1) {                                                               \
                fz_from_ = fz_sz_ - FZ_EDGE;                                                       \
                fz_to_ = fz_sz_;                                                                   \
            } else {                                                                               \
                fz_from_ = (fz_k_ - 1) * fz_step_;                                                  \
                fz_to_ = fz_from_ + FZ_SAMPLE;                                                     \
                if (fz_to_ > fz_sz_ - FZ_EDGE)                                                     \
                    break;                                                                         \
            }                                                                                      \
            if (fz_from_ < fz_sk_)                                                                 \
                fz_from_ = fz_sk_;                                                                 \
            if (fz_to_ > fz_lim_)                                                                  \
                fz_to_ = fz_lim_;                                                                  \
            if (fz_from_ < fz_to_) {                                                               \
                size_t from = fz_from_, to = fz_to_;                                               \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

FZ_NOCOV static void fz_fill(void *obj, size_t size, size_t skip, uint64_t h)
{
    uint8_t *p = obj;
    FZ_SEGMENTS(size, skip, size, {
        for (size_t i = from; i < to; i++)
            p[i] = fz_pat(h, i);
    });
}

/* Offset of the first byte of [skip, limit) that does not hold the
 * pattern of an object of `size` bytes with key h, or (size_t)-1. */
FZ_NOCOV static size_t fz_find_bad(const void *obj, size_t size, size_t skip, size_t limit,
                                 uint64_t h)
{
    const uint8_t *p = obj;
    size_t bad = (size_t)-1;
    FZ_SEGMENTS(size, skip, limit, {
        uint8_t acc = 0;
        for (size_t i = from; i < to; i++)
            acc |= (uint8_t)(p[i] ^ fz_pat(h, i));
        if (acc && bad == (size_t)-1)
            for (size_t i = from; i < to && bad == (size_t)-1; i++)
                if (p[i] != fz_pat(h, i))
                    bad = i;
    });
    return bad;
}

/* Offset of the first non-zero byte (same segments), or (size_t)-1. */
FZ_NOCOV static size_t fz_find_nonzero(const void *obj, size_t size)
{
    const uint8_t *p = obj;
    size_t bad = (size_t)-1;
    FZ_SEGMENTS(size, 0, size, {
        for (size_t i = from; i < to && bad == (size_t)-1; i++)
            if (p[i])
                bad = i;
    });
    return bad;
}

/* ---- qslab's expected warnings (refused tunes, a destroy with live
 * objects) go to /dev/null unless FUZZ_VERBOSE is set; only from a thread
 * that runs alone ---- */
static int fz_saved_stderr = -1;
static int fz_verbose = -1;

static inline void fz_quiet_begin(void)
{
    static int devnull = -1;
    if (fz_verbose < 0)
        fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (fz_verbose)
        return;
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    fflush(stderr);
    fz_saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 10);
    if (devnull >= 0)
        dup2(devnull, 2);
}

static inline void fz_quiet_end(void)
{
    if (fz_saved_stderr < 0)
        return;
    dup2(fz_saved_stderr, 2);
    close(fz_saved_stderr);
    fz_saved_stderr = -1;
}

/* Keep the calling thread (and the threads it makes) on one of the CPUs it
 * may use, chosen by pid: parallel fuzzing jobs spread over the CPUs.
 * Per-CPU queues (QSLAB_OWNER=cpu) then behave as one owner's, which is
 * what the bad-free promises are about (see fuzz_misuse.c). */
static inline int fz_pin_one_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int n = CPU_COUNT(&set), pick = (int)(getpid() % (n ? n : 1)), cpu = -1;
    for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && k++ == pick) {
            cpu = c;
            break;
        }
    if (cpu < 0)
        return -1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

#endif /* QSLAB_FUZZ_UTIL_H */
