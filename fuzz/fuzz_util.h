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

/* The pattern a block of 512 bytes at a time: byte i is
 * tmpl[i & 511] ^ (i >> 9) (fz_pat: h + i * stride repeats every 256 bytes),
 * so a segment is copied (fz_fill) or compared (fz_find_bad) with memcpy
 * and memcmp from a block made once per call with 8-byte operations.  Same
 * bytes as a loop of fz_pat, but ASan checks each segment's range once in
 * its memcpy/memcmp instead of every byte: the loops took a third of
 * fuzz_ops's time. */
union fz_blk {
    uint64_t w[64];
    uint8_t b[512];
};

struct fz_gen {
    union fz_blk tmpl, blk; /* tmpl: block 0; blk: block `x` */
    unsigned words;         /* of tmpl (and blk) made */
    int x;                  /* (i >> 9) & 255 that blk holds, -1: none */
};

static inline uint64_t fz_swar_add(uint64_t a, uint64_t b) /* bytewise, mod 256 */
{
    const uint64_t hi = 0x8080808080808080ULL;
    return ((a & ~hi) + (b & ~hi)) ^ ((a ^ b) & hi);
}

/* The first `len` bytes (up to 512) of block 0 of key h. */
static inline void fz_gen_init(struct fz_gen *g, uint64_t h, size_t len)
{
    unsigned stride = (unsigned)(h >> 8) | 1u;
    g->words = (unsigned)((len < 512 ? len : 512) + 7) / 8;
    for (unsigned i = 0; i < 8; i++)
        g->tmpl.b[i] = (uint8_t)((unsigned)h + i * stride);
    uint64_t step = 0x0101010101010101ULL * (uint8_t)(8u * stride);
    for (unsigned w = 1; w < g->words; w++)
        g->tmpl.w[w] = fz_swar_add(g->tmpl.w[w - 1], step);
    g->x = -1;
}

/* The pattern's bytes i .. i+n-1 (n up to the end of i's block). */
static inline const uint8_t *fz_gen_at(struct fz_gen *g, size_t i)
{
    int x = (int)((i >> 9) & 255);
    if (x == 0)
        return g->tmpl.b + (i & 511);
    if (g->x != x) {
        uint64_t m = 0x0101010101010101ULL * (uint64_t)x;
        for (unsigned w = 0; w < g->words; w++)
            g->blk.w[w] = g->tmpl.w[w] ^ m;
        g->x = x;
    }
    return g->blk.b + (i & 511);
}

/* Call BODY with i (an offset in [from, to)), n bytes from i within one
 * block of 512, and pat, the pattern's n bytes there. */
#define FZ_BLOCKS(g, from, to, BODY)                                                               \
    for (size_t i = (from); i < (to);) {                                                           \
        size_t n = 512 - (i & 511);                                                                \
        if (n > (to) - i)                                                                          \
            n = (to) - i;                                                                          \
        const uint8_t *pat = fz_gen_at(g, i);                                                      \
        BODY;                                                                                      \
        i += n;                                                                                    \
    }

/* per thread, not on the stack: ASan poisoned and unpoisoned its 1 KiB
 * of red zones at every call (no fz_ function calls another) */
static __thread struct fz_gen fz_g;

FZ_NOCOV static void fz_fill(void *obj, size_t size, size_t skip, uint64_t h)
{
    uint8_t *p = obj;
    struct fz_gen *g = &fz_g;
    fz_gen_init(g, h, size);
    FZ_SEGMENTS(size, skip, size, { FZ_BLOCKS(g, from, to, memcpy(p + i, pat, n)); });
}

/* Offset of the first byte of [skip, limit) that does not hold the
 * pattern of an object of `size` bytes with key h, or (size_t)-1. */
FZ_NOCOV static size_t fz_find_bad(const void *obj, size_t size, size_t skip, size_t limit,
                                   uint64_t h)
{
    const uint8_t *p = obj;
    size_t bad = (size_t)-1;
    struct fz_gen *g = &fz_g;
    fz_gen_init(g, h, size);
    FZ_SEGMENTS(size, skip, limit, {
        if (bad == (size_t)-1)
            FZ_BLOCKS(g, from, to, {
                if (bad == (size_t)-1 && memcmp(p + i, pat, n) != 0)
                    for (size_t k = 0; k < n; k++)
                        if (p[i + k] != pat[k]) {
                            bad = i + k;
                            break;
                        }
            });
    });
    return bad;
}

/* Offset of the first non-zero byte (same segments), or (size_t)-1. */
FZ_NOCOV static size_t fz_find_nonzero(const void *obj, size_t size)
{
    static const uint8_t zero[512];
    const uint8_t *p = obj;
    size_t bad = (size_t)-1;
    FZ_SEGMENTS(size, 0, size, {
        for (size_t i = from; i < to && bad == (size_t)-1;) {
            size_t n = to - i < sizeof zero ? to - i : sizeof zero;
            if (memcmp(p + i, zero, n) != 0)
                for (size_t k = 0; k < n; k++)
                    if (p[i + k]) {
                        bad = i + k;
                        break;
                    }
            i += n;
        }
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
 * may use: the first whose lock file ($TMPDIR or /tmp,
 * qslab-fuzz-cpu-<uid>-<cpu>.lock, held by an open descriptor until the
 * process ends) no other process holds, else one chosen by pid.  So
 * parallel fuzzing jobs (-jobs=2) get a CPU each; by pid alone two had the
 * same one about half the time.  Per-CPU queues (QSLAB_OWNER=cpu) then
 * behave as one owner's, which is what the bad-free promises are about
 * (see fuzz_misuse.c). */
#include <sys/file.h>
static inline int fz_pin_one_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int n = CPU_COUNT(&set), pick = (int)(getpid() % (n ? n : 1)), cpu = -1;
    const char *dir = getenv("TMPDIR");
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/qslab-fuzz-cpu-%u-%d.lock", dir && *dir ? dir : "/tmp",
                 (unsigned)getuid(), c);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            break;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            cpu = c; /* fd stays open: the lock is this process's */
        else
            close(fd);
    }
    for (int c = 0, k = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &set) && k++ == pick)
            cpu = c;
    if (cpu < 0)
        return -1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

#endif /* QSLAB_FUZZ_UTIL_H */
