/*
 * conformance.c - edge cases of the glibc allocation surface, printed as
 * allocator-independent facts, one line per case.
 *
 * conformance.sh runs this program once on glibc's malloc and once under
 * qslab-run (LD_PRELOAD=libqslab-malloc.so) and requires identical output.
 * So a line never holds an address or a size that depends on the allocator:
 * it says "NULL"/"non-NULL", an errno name, a return code, "aligned", "usable>=req",
 * "contents kept".  Reference: glibc 2.36 (Debian 12).
 *
 * Where glibc 2.36 lacks a function, the case still prints the same line:
 *   - free_sized / free_aligned_sized (glibc 2.40+): found with dlsym; when
 *     absent the case frees with free() instead.
 *   - cfree (a compat-only symbol since glibc 2.26, not linkable): found with
 *     dlsym, else dlvsym(GLIBC_2.2.5).
 *   - __posix_memalign (not exported by glibc): dlsym, else posix_memalign.
 *
 * `conformance --check-qslab` (run under the preload only) prints, instead of
 * the cases, whether every entry point resolves to qslab: a pointer each one
 * returns must satisfy qslab_object_node(p) >= 0, found with dlsym.
 *
 * Built with -fno-builtin so that the compiler keeps every call (it may
 * otherwise fold malloc/free pairs and assume malloc never fails).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GCC 12 flags uses of a pointer passed to a realloc that failed (it then
 * still owns the block, which is what the cases check). */
#if defined(__GNUC__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

/* glibc exports these; the preload overrides them. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

/* Sizes go through a volatile so that the compiler sees no constant to warn
 * about (-Walloc-size-larger-than) or fold. */
static volatile size_t v_size;
static size_t sz(size_t n)
{
    v_size = n;
    return v_size;
}

static int ncase;

static void line(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("%03d %s: ", ++ncase, name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static const char *errname(int e)
{
    switch (e) {
    case 0:
        return "0";
    case ENOMEM:
        return "ENOMEM";
    case EINVAL:
        return "EINVAL";
    case EDOM:
        return "EDOM(unchanged)";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "errno%d", e);
        return buf;
    }
    }
}

static const char *nul(const void *p)
{
    return p ? "non-NULL" : "NULL";
}

static int aligned(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

/* Fill p[0..n) with a pattern depending on seed; check it. */
/* The pattern: byte i of a block is i * 31 + seed (mod 256), so it repeats
 * every 256 bytes; fill and check go a period at a time (memcpy, memcmp),
 * which the 100 MiB realloc chain needs (a byte loop: 2 s a run). */
enum { PERIOD = 256, ZEROS = 4096 };

static void period(unsigned char *blk, unsigned seed)
{
    for (size_t i = 0; i < PERIOD; i++)
        blk[i] = (unsigned char)(i * 31 + seed);
}

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char blk[PERIOD], *b = p;
    period(blk, seed);
    for (size_t i = 0; i < n; i += PERIOD)
        memcpy(b + i, blk, n - i < PERIOD ? n - i : PERIOD);
}

static int check(const void *p, size_t n, unsigned seed)
{
    unsigned char blk[PERIOD];
    const unsigned char *b = p;
    period(blk, seed);
    for (size_t i = 0; i < n; i += PERIOD)
        if (memcmp(b + i, blk, n - i < PERIOD ? n - i : PERIOD) != 0)
            return 0;
    return 1;
}

static int all_zero(const void *p, size_t n)
{
    static const unsigned char zeros[ZEROS];
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i += ZEROS)
        if (memcmp(b + i, zeros, n - i < ZEROS ? n - i : ZEROS) != 0)
            return 0;
    return 1;
}

static const char *yes(int ok)
{
    return ok ? "yes" : "NO";
}

/* A case that expects failure: "NULL errno=..." (and frees by mistake). */
static void expect_fail(const char *name, void *p)
{
    int e = errno;
    line(name, "%s errno=%s", nul(p), errname(e));
    if (p)
        free(p);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* ---- malloc ---- */

static void case_malloc(void)
{
    void *a = malloc(sz(0)), *b = malloc(sz(0));
    line("malloc(0) twice", "%s %s distinct=%s", nul(a), nul(b), yes(a != b));
    free(a);
    free(b);

    /* Every size from 1 to 1024 and then powers of two and odd sizes up to
     * 64 MiB: aligned to alignof(max_align_t), usable >= request, writable. */
    static const size_t big[] = {1500,    2048,     4095,     4096,     4097,    8191,
                                 65536,   100000,   131072,   262145,   1 << 20, (1 << 21) + 1,
                                 4 << 20, 16 << 20, 33 << 20, 40 << 20, 64 << 20};
    int al = 1, us = 1, ok = 1;
    for (size_t n = 1; n <= 1024 + sizeof big / sizeof big[0]; n++) {
        size_t req = n <= 1024 ? n : big[n - 1025];
        unsigned char *p = malloc(sz(req));
        if (!p) {
            ok = 0;
            continue;
        }
        al &= aligned(p, alignof(max_align_t));
        us &= malloc_usable_size(p) >= req;
        p[0] = 1;
        p[req - 1] = 2;
        free(p);
    }
    line("malloc(1..1024, 1500..64M) non-NULL", "%s", yes(ok));
    line("malloc(1..1024, 1500..64M) aligned to alignof(max_align_t)=16", "%s", yes(al));
    line("malloc(1..1024, 1500..64M) usable>=req", "%s", yes(us));

    /* the smallest sizes on their own: 1..8 bytes must still be 16-aligned */
    al = 1;
    void *keep[64];
    for (int i = 0; i < 64; i++) {
        keep[i] = malloc(sz((size_t)(i % 8) + 1));
        al &= aligned(keep[i], 16);
    }
    line("malloc(1..8) x64 all 16-aligned", "%s", yes(al));
    for (int i = 0; i < 64; i++)
        free(keep[i]);

    /* 1000 live objects never overlap */
    enum { N = 1000 };
    static void *ptrs[N];
    for (int i = 0; i < N; i++)
        ptrs[i] = malloc(sz(48));
    qsort(ptrs, N, sizeof ptrs[0], cmp_ptr);
    ok = ptrs[0] != NULL;
    for (int i = 1; i < N; i++)
        ok &= (uintptr_t)ptrs[i] - (uintptr_t)ptrs[i - 1] >= 48;
    line("malloc(48) x1000 disjoint", "%s", yes(ok));
    for (int i = 0; i < N; i++)
        free(ptrs[i]);

    errno = 0;
    expect_fail("malloc(SIZE_MAX)", malloc(sz(SIZE_MAX)));
    errno = 0;
    expect_fail("malloc(SIZE_MAX-4095)", malloc(sz(SIZE_MAX - 4095)));
    errno = 0;
    expect_fail("malloc(PTRDIFF_MAX+1)", malloc(sz((size_t)PTRDIFF_MAX + 1)));
    errno = 0;
    expect_fail("malloc(PTRDIFF_MAX)", malloc(sz(PTRDIFF_MAX)));
    errno = 0;
    expect_fail("malloc(2^50)", malloc(sz((size_t)1 << 50)));

    void *p = malloc(sz(100));
    line("malloc after failures", "%s", nul(p));
    free(p);
}

/* ---- free ---- */

static void case_free(void)
{
    errno = EDOM;
    free(NULL);
    line("free(NULL) keeps errno", "errno=%s", errname(errno));

    /* errno survives frees of every kind: small, a slab emptied and
     * flushed, large (munmap) */
    static void *p[20000];
    for (int i = 0; i < 20000; i++)
        p[i] = malloc(sz((size_t)(i % 37) * 29 + 1));
    void *large = malloc(sz(40 << 20));
    memset(large, 1, 40 << 20);
    errno = EDOM;
    int kept = 1;
    for (int i = 0; i < 20000; i++) {
        free(p[i]);
        kept &= errno == EDOM;
    }
    free(large);
    kept &= errno == EDOM;
    line("free of 20000 small + 40 MiB keeps errno", "%s", yes(kept));
}

/* ---- calloc ---- */

static void case_calloc(void)
{
    void *a = calloc(sz(0), sz(0)), *b = calloc(sz(0), sz(5)), *c = calloc(sz(5), sz(0));
    line("calloc(0,0) calloc(0,5) calloc(5,0)", "%s %s %s", nul(a), nul(b), nul(c));
    free(a);
    free(b);
    free(c);

    /* dirty memory of each size, freed, then calloc'd: all zero */
    static const size_t sizes[] = {1,    8,    16,    24,     100,     192,     1000,
                                   4096, 5000, 65536, 300000, 2 << 20, 3 << 20, 40 << 20};
    int zero = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *d[4];
        for (int k = 0; k < 4; k++) {
            d[k] = malloc(sz(n));
            memset(d[k], 0xa5, n);
        }
        for (int k = 3; k >= 0; k--)
            free(d[k]);
        for (int k = 0; k < 4; k++) {
            d[k] = calloc(sz(1), sz(n));
            zero &= d[k] && all_zero(d[k], n);
        }
        for (int k = 0; k < 4; k++)
            free(d[k]);
    }
    line("calloc after dirty frees is zeroed (1 B .. 40 MiB)", "%s", yes(zero));

    struct {
        const char *name;
        size_t n, s;
    } of[] = {
        {"calloc(SIZE_MAX/2+1, 2)", SIZE_MAX / 2 + 1, 2},
        {"calloc(2, SIZE_MAX/2+1)", 2, SIZE_MAX / 2 + 1},
        {"calloc(2^32, 2^32)", (size_t)1 << 32, (size_t)1 << 32},
        {"calloc(SIZE_MAX, SIZE_MAX)", SIZE_MAX, SIZE_MAX},
        {"calloc(2^62, 2) (no overflow, > PTRDIFF_MAX)", (size_t)1 << 62, 2},
    };
    for (size_t i = 0; i < sizeof of / sizeof of[0]; i++) {
        errno = 0;
        expect_fail(of[i].name, calloc(sz(of[i].n), sz(of[i].s)));
    }
}

/* ---- realloc, reallocarray ---- */

static void case_realloc(void)
{
    void *p = realloc(NULL, sz(100));
    line("realloc(NULL, 100)", "%s usable>=req=%s", nul(p), yes(malloc_usable_size(p) >= 100));
    free(p);
    p = realloc(NULL, sz(0));
    line("realloc(NULL, 0)", "%s", nul(p));
    free(p);

    p = malloc(sz(100));
    errno = EDOM;
    void *q = realloc(p, sz(0));
    line("realloc(p, 0) frees", "%s errno=%s", nul(q), errname(errno));
    free(q);

    /* contents kept across every kind of move: within a class, across classes,
     * slab to large, large to larger, large to slab */
    static const size_t steps[] = {
        1,  7,       8, 9,        24,      100,       64,       1000,     4096, 5000,     100000,
        50, 3 << 20, 1, 40 << 20, 1 << 26, 100 << 20, 40 << 20, 33 << 20, 1000, 70 << 20, 16};
    int kept = 1, us = 1;
    size_t have = 0;
    unsigned char *r = NULL;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        unsigned char *nr = realloc(r, sz(n));
        if (!nr) {
            kept = 0;
            break;
        }
        size_t common = have < n ? have : n;
        kept &= check(nr, common, 7);
        us &= malloc_usable_size(nr) >= n;
        fill(nr, n, 7);
        r = nr;
        have = n;
    }
    line("realloc chain 1 B .. 100 MiB keeps contents", "%s", yes(kept));
    line("realloc chain usable>=req", "%s", yes(us));
    free(r);

    /* failures leave the block alone */
    static const size_t olds[] = {100, 40 << 20};
    static const char *oldn[] = {"small", "40 MiB"};
    for (int k = 0; k < 2; k++) {
        char name[80];
        p = malloc(sz(olds[k]));
        fill(p, olds[k], 3);
        struct {
            const char *n;
            size_t s;
        } big[] = {{"SIZE_MAX", SIZE_MAX},
                   {"PTRDIFF_MAX+1", (size_t)PTRDIFF_MAX + 1},
                   {"2^50", (size_t)1 << 50}};
        for (int j = 0; j < 3; j++) {
            errno = 0;
            q = realloc(p, sz(big[j].s));
            int e = errno;
            snprintf(name, sizeof name, "realloc(%s, %s)", oldn[k], big[j].n);
            line(name, "%s errno=%s old kept=%s", nul(q), errname(e), yes(check(p, olds[k], 3)));
            if (q)
                p = q;
        }
        free(p);
    }

    p = reallocarray(NULL, sz(10), sz(10));
    line("reallocarray(NULL, 10, 10)", "%s usable>=100=%s", nul(p),
         yes(malloc_usable_size(p) >= 100));
    fill(p, 100, 9);
    q = reallocarray(p, sz(1000), sz(1000));
    line("reallocarray(p, 1000, 1000)", "%s kept=%s", nul(q), yes(q && check(q, 100, 9)));
    if (q)
        p = q;
    errno = 0;
    q = reallocarray(p, sz(SIZE_MAX / 2 + 1), sz(2));
    int e = errno;
    line("reallocarray(p, SIZE_MAX/2+1, 2)", "%s errno=%s old kept=%s", nul(q), errname(e),
         yes(check(p, 100, 9)));
    errno = 0;
    q = reallocarray(p, sz((size_t)1 << 32), sz((size_t)1 << 32));
    e = errno;
    line("reallocarray(p, 2^32, 2^32)", "%s errno=%s old kept=%s", nul(q), errname(e),
         yes(check(p, 100, 9)));
    errno = EDOM;
    q = reallocarray(p, sz(0), sz(10));
    line("reallocarray(p, 0, 10) frees", "%s errno=%s", nul(q), errname(errno));
    free(q);

    /* overflow without a block: reallocarray(NULL, ...) is malloc's */
    struct {
        const char *n;
        size_t a, b;
    } ov[] = {
        {"(NULL, SIZE_MAX/2+1, 2)", SIZE_MAX / 2 + 1, 2},
        {"(NULL, 2, SIZE_MAX/2+1)", 2, SIZE_MAX / 2 + 1},
        {"(NULL, SIZE_MAX, SIZE_MAX)", SIZE_MAX, SIZE_MAX},
        {"(NULL, 2^32, 2^32)", (size_t)1 << 32, (size_t)1 << 32},
        {"(NULL, 2^23, 2^23) (no overflow, 2^46 bytes)", (size_t)1 << 23, (size_t)1 << 23},
    };
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "reallocarray%s", ov[i].n);
        errno = 0;
        expect_fail(name, reallocarray(NULL, sz(ov[i].a), sz(ov[i].b)));
    }
    p = reallocarray(NULL, sz(0), sz(SIZE_MAX));
    line("reallocarray(NULL, 0, SIZE_MAX)", "%s", nul(p));
    free(p);
    p = reallocarray(NULL, sz(SIZE_MAX), sz(0));
    line("reallocarray(NULL, SIZE_MAX, 0)", "%s", nul(p));
    free(p);
}

/* ---- aligned allocation ---- */

typedef void *(*align_fn)(size_t, size_t);

static void case_aligned_one(const char *fname, align_fn fn)
{
    char name[96];
    /* powers of two from 1 to 64 MiB, sizes below, at and above the alignment */
    int ok = 1, al = 1, us = 1;
    for (size_t a = 1; a <= ((size_t)64 << 20); a <<= 1) {
        size_t sizes[] = {1, a / 2 + 1, a, 3 * a + 1, 100};
        for (int k = 0; k < 5; k++) {
            if (sizes[k] > ((size_t)200 << 20))
                continue;
            unsigned char *p = fn(sz(a), sz(sizes[k]));
            if (!p) {
                ok = 0;
                continue;
            }
            al &= aligned(p, a);
            us &= malloc_usable_size(p) >= sizes[k];
            p[0] = 1;
            p[sizes[k] - 1] = 1;
            free(p);
        }
    }
    snprintf(name, sizeof name, "%s(2^0..2^26, sizes around align)", fname);
    line(name, "non-NULL=%s aligned=%s usable>=req=%s", yes(ok), yes(al), yes(us));

    /* alignment 16 for the smallest sizes: must be 16, not just the size class */
    al = 1;
    void *keep[32];
    for (int i = 0; i < 32; i++) {
        keep[i] = fn(sz(16), sz((size_t)(i % 8) + 1));
        al &= aligned(keep[i], 16);
    }
    for (int i = 0; i < 32; i++)
        free(keep[i]);
    snprintf(name, sizeof name, "%s(16, 1..8) 16-aligned", fname);
    line(name, "%s", yes(al));

    /* alignment 0: served like malloc */
    void *p = fn(sz(0), sz(10));
    snprintf(name, sizeof name, "%s(0, 10)", fname);
    line(name, "%s", nul(p));
    free(p);

    /* size 0 */
    p = fn(sz(64), sz(0));
    snprintf(name, sizeof name, "%s(64, 0)", fname);
    line(name, "%s aligned=%s", nul(p), yes(p && aligned(p, 64)));
    free(p);

    /* not a power of two: glibc 2.36 rounds up to the next power of two */
    static const size_t odd[] = {3, 24, 48, 100, 1000, 3000, 5000, 40000, 3 << 20};
    int rounded = 1;
    ok = 1;
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        size_t a = odd[i], pow2 = 1;
        while (pow2 < a)
            pow2 <<= 1;
        p = fn(sz(a), sz(a + 5));
        ok &= p != NULL;
        rounded &= p && aligned(p, pow2) && malloc_usable_size(p) >= a + 5;
        free(p);
    }
    snprintf(name, sizeof name, "%s(non-power-of-two 3..3M)", fname);
    line(name, "non-NULL=%s aligned to next pow2=%s", yes(ok), yes(rounded));

    struct {
        const char *n;
        size_t a, s;
    } bad[] = {
        {"(SIZE_MAX, 1)", SIZE_MAX, 1},
        {"(SIZE_MAX/2+2, 1)", SIZE_MAX / 2 + 2, 1},
        {"(SIZE_MAX/2+1, 1)", SIZE_MAX / 2 + 1, 1},
        {"(2^50, 1)", (size_t)1 << 50, 1},
        {"(2^62, 1)", (size_t)1 << 62, 1},
        {"(2^46, 1)", (size_t)1 << 46, 1},
        {"(2^46+1, 1) (rounds to 2^47)", ((size_t)1 << 46) + 1, 1},
        {"(64, SIZE_MAX)", 64, SIZE_MAX},
        {"(4096, PTRDIFF_MAX)", 4096, PTRDIFF_MAX},
        {"(2^22, SIZE_MAX-2^21)", (size_t)1 << 22, SIZE_MAX - ((size_t)1 << 21)},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(name, sizeof name, "%s%s", fname, bad[i].n);
        errno = 0;
        expect_fail(name, fn(sz(bad[i].a), sz(bad[i].s)));
    }
}

static void case_aligned(void)
{
    case_aligned_one("aligned_alloc", aligned_alloc);
    case_aligned_one("memalign", memalign);
}

static void case_posix_memalign(void)
{
    struct {
        const char *n;
        size_t a, s;
    } c[] = {
        {"(0, 10)", 0, 10},
        {"(1, 10)", 1, 10},
        {"(3, 10)", 3, 10},
        {"(4, 10)", 4, 10},
        {"(sizeof(void*), 10)", sizeof(void *), 10},
        {"(16, 1)", 16, 1},
        {"(24, 10)", 24, 10},
        {"(48, 10)", 48, 10},
        {"(64, 0)", 64, 0},
        {"(64, 100)", 64, 100},
        {"(4096, 5000)", 4096, 5000},
        {"(2^21, 10)", (size_t)1 << 21, 10},
        {"(2^22, 3 MiB)", (size_t)1 << 22, 3 << 20},
        {"(2^26, 40 MiB)", (size_t)1 << 26, 40 << 20},
        {"(SIZE_MAX, 10)", SIZE_MAX, 10},
        {"(SIZE_MAX/2+1, 10)", SIZE_MAX / 2 + 1, 10},
        {"(2^62, 10)", (size_t)1 << 62, 10},
        {"(2^46, 10)", (size_t)1 << 46, 10},
        {"(2^46+8, 10)", ((size_t)1 << 46) + 8, 10},
        {"(64, SIZE_MAX)", 64, SIZE_MAX},
        {"(64, 2^50)", 64, (size_t)1 << 50},
    };
    void *sentinel = &ncase;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char name[80];
        snprintf(name, sizeof name, "posix_memalign%s", c[i].n);
        void *p = sentinel;
        errno = EDOM;
        int rc = posix_memalign(&p, sz(c[i].a), sz(c[i].s));
        int e = errno;
        if (rc == 0) {
            line(name, "rc=0 errno=%s aligned=%s usable>=req=%s", errname(e),
                 yes(aligned(p, c[i].a)), yes(malloc_usable_size(p) >= c[i].s));
            free(p);
        } else {
            /* glibc 2.36 leaves errno alone on EINVAL but sets it to ENOMEM on
             * an ENOMEM failure (its internal allocation sets it); print it */
            line(name, "rc=%s errno=%s out untouched=%s", errname(rc), errname(e),
                 yes(p == sentinel));
        }
    }
}

static void case_page(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    static const size_t sizes[] = {0, 1, 4095, 4096, 4097, 100000, 5 << 20, 40 << 20};
    int ok = 1, al = 1, us = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = valloc(sz(sizes[i]));
        ok &= p != NULL;
        al &= aligned(p, page);
        us &= malloc_usable_size(p) >= sizes[i];
        free(p);
    }
    line("valloc(0..40 MiB)", "non-NULL=%s page-aligned=%s usable>=req=%s", yes(ok), yes(al),
         yes(us));

    /* pvalloc rounds the size up to a page in principle; glibc 2.36 masks with
     * -(pagesize - 1), so only pvalloc(1..4096) is sure to give a page.  We
     * print usable >= page for those and usable >= request for the others. */
    void *p = pvalloc(sz(0));
    line("pvalloc(0)", "%s page-aligned=%s", nul(p), yes(p && aligned(p, page)));
    free(p);
    p = pvalloc(sz(1));
    line("pvalloc(1)", "%s page-aligned=%s usable>=page=%s", nul(p), yes(p && aligned(p, page)),
         yes(malloc_usable_size(p) >= page));
    free(p);
    p = pvalloc(sz(3 * page + 1));
    line("pvalloc(3 pages + 1)", "%s page-aligned=%s usable>=req=%s", nul(p),
         yes(p && aligned(p, page)), yes(malloc_usable_size(p) >= 3 * page + 1));
    free(p);

    errno = 0;
    expect_fail("valloc(SIZE_MAX)", valloc(sz(SIZE_MAX)));
    errno = 0;
    expect_fail("pvalloc(SIZE_MAX)", pvalloc(sz(SIZE_MAX)));
    errno = 0;
    expect_fail("pvalloc(SIZE_MAX-4096)", pvalloc(sz(SIZE_MAX - 4096)));
}

/* ---- malloc_usable_size ---- */

static void case_usable(void)
{
    line("malloc_usable_size(NULL)", "%s", malloc_usable_size(NULL) == 0 ? "0" : "not 0");
    /* the whole usable area can be written and survives a realloc to it */
    int ok = 1;
    for (size_t n = 1; n < 70000; n = n * 3 + 1) {
        unsigned char *p = malloc(sz(n));
        size_t u = malloc_usable_size(p);
        fill(p, u, 5);
        unsigned char *q = realloc(p, sz(u));
        ok &= q && check(q, u, 5);
        free(q);
    }
    line("usable area writable and kept by realloc(p, usable)", "%s", yes(ok));
}

/* ---- statistics ---- */

static void case_stats(void)
{
    static void *p[2000];
    struct mallinfo2 a = mallinfo2();
    for (int i = 0; i < 2000; i++) {
        p[i] = malloc(sz(1000));
        memset(p[i], 1, 1000);
    }
    struct mallinfo2 b = mallinfo2();
    line("mallinfo2: uordblks grows by >= 2000 x 1000 B", "%s",
         yes(b.uordblks >= a.uordblks + 2000 * 1000));
    line("mallinfo2: arena == uordblks + fordblks", "%s", yes(b.arena == b.uordblks + b.fordblks));
    line("mallinfo2: fsmblks <= fordblks, keepcost <= arena", "%s",
         yes(b.fsmblks <= b.fordblks && b.keepcost <= b.arena));
    for (int i = 0; i < 2000; i++)
        free(p[i]);
    struct mallinfo2 c = mallinfo2();
    line("mallinfo2: uordblks shrinks after free", "%s",
         yes(c.uordblks + 1000 * 1000 <= b.uordblks));

    void *big = malloc(sz(40 << 20));
    struct mallinfo2 d = mallinfo2();
    line("mallinfo2: 40 MiB block counted in hblks/hblkhd", "%s",
         yes(d.hblks == c.hblks + 1 && d.hblkhd >= c.hblkhd + (40 << 20)));
    free(big);
    struct mallinfo2 e = mallinfo2();
    line("mallinfo2: hblks back after free", "%s", yes(e.hblks == c.hblks && e.hblkhd == c.hblkhd));

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo m1 = mallinfo();
    for (int i = 0; i < 100; i++)
        p[i] = malloc(sz(4000));
    struct mallinfo m2 = mallinfo();
#pragma GCC diagnostic pop
    line("mallinfo: uordblks grows by >= 100 x 4000 B", "%s",
         yes(m2.uordblks >= m1.uordblks + 400000));
    for (int i = 0; i < 100; i++)
        free(p[i]);

    /* malloc_trim returns 1 when it gave memory back, else 0 */
    for (int i = 0; i < 2000; i++)
        p[i] = malloc(sz(5000));
    for (int i = 0; i < 2000; i++)
        free(p[i]);
    int t1 = malloc_trim(0), t2 = malloc_trim(0);
    line("malloc_trim(0) x2 returns 0 or 1", "%s",
         yes((t1 == 0 || t1 == 1) && (t2 == 0 || t2 == 1)));
    p[0] = malloc(sz(100));
    line("malloc after malloc_trim", "%s", nul(p[0]));
    free(p[0]);

    /* malloc_info: XML on success; options != 0 is refused */
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    int rc = malloc_info(0, fp);
    fclose(fp);
    line("malloc_info(0, fp)", "rc=%d starts \"<malloc\"=%s ends \"</malloc>\\n\"=%s", rc,
         yes(buf && strncmp(buf, "<malloc", 7) == 0),
         yes(buf && len >= 10 && strcmp(buf + len - 10, "</malloc>\n") == 0));
    free(buf);
    /* glibc 2.36 returns EINVAL (22) and leaves errno alone here, although
     * its manual page says -1 with errno EINVAL; glibc is the reference */
    fp = fopen("/dev/null", "w");
    errno = EDOM;
    rc = malloc_info(1, fp);
    int e1 = errno;
    fclose(fp);
    line("malloc_info(1, fp)", "rc=%d errno=%s", rc, errname(e1));

    /* malloc_stats writes its report on stderr: catch it in a pipe-less temp file */
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = {0};
    rewind(tmp);
    size_t got = fread(text, 1, sizeof text - 1, tmp);
    fclose(tmp);
    text[got] = 0;
    line("malloc_stats() on stderr",
         "\"Arena 0:\" first=%s \"in use bytes\"=%s \"Total (incl. mmap):\"=%s",
         yes(strncmp(text, "Arena 0:\n", 9) == 0), yes(strstr(text, "in use bytes") != NULL),
         yes(strstr(text, "Total (incl. mmap):\n") != NULL));
}

/* ---- other entry points ---- */

static void fallback_free_sized(void *p, size_t n)
{
    (void)n;
    free(p);
}

static void fallback_free_aligned_sized(void *p, size_t a, size_t n)
{
    (void)a;
    (void)n;
    free(p);
}

static void case_other(void)
{
    void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    void (*fas)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
    void (*cf)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "cfree");
    if (!cf)
        cf = (void (*)(void *))dlvsym(RTLD_DEFAULT, "cfree", "GLIBC_2.2.5");
    int (*pm)(void **, size_t, size_t) =
        (int (*)(void **, size_t, size_t))dlsym(RTLD_DEFAULT, "__posix_memalign");
    if (!fs)
        fs = fallback_free_sized;
    if (!fas)
        fas = fallback_free_aligned_sized;
    if (!pm)
        pm = posix_memalign;

    int ok = 1;
    errno = EDOM;
    for (size_t n = 1; n < (1 << 20); n = n * 5 + 3) {
        void *p = malloc(sz(n));
        fs(p, n);
        p = aligned_alloc(sz(256), sz(n));
        ok &= aligned(p, 256);
        fas(p, 256, n);
    }
    void *big = malloc(sz(40 << 20));
    fs(big, 40 << 20);
    fs(NULL, 0);
    fas(NULL, 64, 0);
    line("free_sized / free_aligned_sized (1 B .. 40 MiB, NULL)", "ok=%s errno=%s", yes(ok),
         errname(errno));

    line("cfree found", "%s", yes(cf != NULL));
    if (cf) {
        void *p = malloc(sz(77));
        errno = EDOM;
        cf(p);
        cf(NULL);
        line("cfree(p), cfree(NULL)", "errno=%s", errname(errno));
    }

    void *p = NULL;
    int rc = pm(&p, sz(128), sz(1000));
    line("__posix_memalign(128, 1000)", "rc=%d aligned=%s", rc, yes(p && aligned(p, 128)));
    free(p);

    p = __libc_malloc(sz(123));
    fill(p, 123, 1);
    line("__libc_malloc(123) then free", "%s usable>=req=%s", nul(p),
         yes(malloc_usable_size(p) >= 123));
    free(p);
    p = malloc(sz(321));
    errno = EDOM;
    __libc_free(p);
    line("malloc(321) then __libc_free", "errno=%s", errname(errno));
    p = __libc_calloc(sz(10), sz(100));
    line("__libc_calloc(10, 100)", "%s zero=%s", nul(p), yes(p && all_zero(p, 1000)));
    fill(p, 1000, 4);
    void *q = __libc_realloc(p, sz(100000));
    line("__libc_realloc(p, 100000)", "%s kept=%s", nul(q), yes(q && check(q, 1000, 4)));
    __libc_free(q);
    p = __libc_memalign(sz(512), sz(700));
    line("__libc_memalign(512, 700)", "%s aligned=%s", nul(p), yes(p && aligned(p, 512)));
    free(p);
    p = __libc_valloc(sz(10));
    line("__libc_valloc(10)", "%s aligned=%s", nul(p), yes(p && aligned(p, 4096)));
    free(p);
    p = __libc_pvalloc(sz(10));
    line("__libc_pvalloc(10)", "%s aligned=%s usable>=page=%s", nul(p), yes(p && aligned(p, 4096)),
         yes(malloc_usable_size(p) >= 4096));
    free(p);

    /* libc functions that allocate on our behalf: what they return is freed
     * with free() */
    char *s = strdup("conformance");
    char *t = NULL;
    int n = asprintf(&t, "%s-%d", s, 42);
    line("strdup + asprintf + free", "%s %d %s", s, n, t);
    free(s);
    free(t);
}

/* --check-qslab: under the preload, every entry point returns qslab memory. */
static int check_qslab(void)
{
    int (*node)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "qslab_object_node");
    if (!node) {
        printf("qslab_object_node not found: not running under libqslab-malloc\n");
        return 1;
    }
    int bad = 0;
    void *p;
#define ISQ(name, expr)                                                                            \
    do {                                                                                           \
        p = (expr);                                                                                \
        int ok_ = p && node(p) >= 0;                                                               \
        printf("%-28s %s\n", name, ok_ ? "qslab" : "NOT qslab");                                   \
        bad += !ok_;                                                                               \
        free(p);                                                                                   \
    } while (0)
    ISQ("malloc", malloc(sz(10)));
    ISQ("malloc large", malloc(sz(40 << 20)));
    ISQ("calloc", calloc(sz(3), sz(10)));
    ISQ("realloc", realloc(NULL, sz(10)));
    ISQ("reallocarray", reallocarray(NULL, sz(3), sz(10)));
    ISQ("aligned_alloc", aligned_alloc(sz(64), sz(10)));
    ISQ("memalign", memalign(sz(64), sz(10)));
    ISQ("valloc", valloc(sz(10)));
    ISQ("pvalloc", pvalloc(sz(10)));
    ISQ("__libc_malloc", __libc_malloc(sz(10)));
    ISQ("__libc_calloc", __libc_calloc(sz(1), sz(10)));
    ISQ("__libc_realloc", __libc_realloc(NULL, sz(10)));
    ISQ("__libc_memalign", __libc_memalign(sz(64), sz(10)));
    ISQ("__libc_valloc", __libc_valloc(sz(10)));
    ISQ("__libc_pvalloc", __libc_pvalloc(sz(10)));
    ISQ("strdup", strdup("x"));
    void *pm = NULL;
    ISQ("posix_memalign", (posix_memalign(&pm, sz(64), sz(10)), pm));
    int (*ppm)(void **, size_t, size_t) =
        (int (*)(void **, size_t, size_t))dlsym(RTLD_DEFAULT, "__posix_memalign");
    pm = NULL;
    ISQ("__posix_memalign", ppm && ppm(&pm, sz(64), sz(10)) == 0 ? pm : NULL);
#undef ISQ
    static const char *syms[] = {"free_sized",  "free_aligned_sized", "cfree",
                                 "malloc_trim", "malloc_stats",       "mallinfo",
                                 "mallinfo2",   "malloc_info",        "malloc_usable_size",
                                 "free",        "__libc_free"};
    void *self = dlopen(NULL, RTLD_NOW); /* the global scope, preload first */
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(self, syms[i]);
        Dl_info info;
        int ok =
            f && dladdr(f, &info) && info.dli_fname && strstr(info.dli_fname, "libqslab-malloc");
        printf("%-28s %s\n", syms[i], ok ? "qslab" : "NOT qslab");
        bad += !ok;
    }
    printf("%s\n", bad ? "FAIL: entry points not served by qslab" : "all entry points are qslab's");
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--check-qslab") == 0)
        return check_qslab();
    case_malloc();
    case_free();
    case_calloc();
    case_realloc();
    case_aligned();
    case_posix_memalign();
    case_page();
    case_usable();
    case_stats();
    case_other();
    printf("%d cases\n", ncase);
    return 0;
}
