/*
 * inproc.c - allocators side by side in one process, interleaved.
 *
 *     bench_inproc [--test pair|batch|lastwrite] [--size BYTES] [--rounds N]
 *                  [--write 0|1|2|8|all] [--result] [[--name LABEL] [--env VAR=VALUE]... ALLOC]...
 *
 * ALLOC is the path of an allocator's shared library (loaded with
 * dlopen(RTLD_LOCAL); its own malloc and free are called through pointers)
 * or "glibc" (the process's malloc: run it without LD_PRELOAD).  Every round
 * runs each allocator once, in turn, the allocators taking turns at going
 * first, so a noisy neighbour slows all of them alike; the report gives the
 * minimum, first quartile and median over the rounds, in cycles per pair
 * (pair, lastwrite) or per object alloc+free (batch), and the ratio of
 * medians to the first allocator.  On the shared 2-core VMs this settles a
 * few-cycle question that separate processes cannot (their medians move by
 * 20-60% between runs).  Batch results include the cache misses the other
 * allocators' rounds cause (every round starts cold), so compare pairs here
 * and batches with bench_slub.
 *
 * lastwrite: malloc(size), store to the block's first bytes, free, repeated:
 * the program's last write to an object just before it frees it.  --write
 * gives the store's width in bytes (0: no store, the pair loop; all: the four
 * variants, interleaved round by round).  A free that reads the object's first
 * word right after a narrower store to it cannot take the value from the store
 * buffer (a store-forwarding stall, about 10 cycles on current x86); an 8-byte
 * store forwards.
 *
 * --name LABEL names the next ALLOC in the report (default: its path).
 * --env VAR=VALUE sets VAR for the next ALLOC only: while it is loaded and
 * makes its first malloc and free (where an allocator reads its settings),
 * then the environment is restored.  The same library may be given more than
 * once (e.g. qslab with QSLAB_OWNER=cpu and =thread): the second and later
 * loads are private copies (a memfd), each with its own state.  An allocator
 * that reads its environment later than its first malloc would see the
 * environment bench_inproc started with.
 *
 * Libraries with initial-exec TLS (jemalloc, qslab) need the loader's static
 * TLS surplus: bench_inproc re-executes itself once with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 unless that tunable is
 * already set.  A library that still cannot be loaded is reported and skipped.
 *
 * --result prints, instead of the table, one line per allocator and variant
 * for bench/run.py:
 *
 *     result name=LABEL write=W median=... q1=... min=...
 */
#define _GNU_SOURCE
#include "bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

#define MAX_ALLOCS 16
#define MAX_ENV 8
#define BATCH 10000
#define TLS_TUNABLE "glibc.rtld.optional_static_tls"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { PAIRS = 100000 };

static NOINLINE double run_pair(malloc_fn m, free_fn f, size_t size)
{
    uint64_t t0 = tsc_begin();
    for (int i = 0; i < PAIRS; i++) {
        void *p = m(size);
        __asm__ volatile("" : : "r"(p) : "memory");
        f(p);
    }
    return (double)(tsc_end() - t0) / PAIRS;
}

static NOINLINE double run_batch(malloc_fn m, free_fn f, size_t size)
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

/* malloc, one volatile store of TYPE at offset 0, free. */
#define LASTWRITE(fn, type)                                                                   \
    static NOINLINE double fn(malloc_fn m, free_fn f, size_t size)                            \
    {                                                                                         \
        uint64_t t0 = tsc_begin();                                                            \
        for (int i = 0; i < PAIRS; i++) {                                                     \
            void *p = m(size);                                                                \
            *(volatile type *)p = (type)i;                                                    \
            f(p);                                                                             \
        }                                                                                     \
        return (double)(tsc_end() - t0) / PAIRS;                                              \
    }
LASTWRITE(run_write1, uint8_t)
LASTWRITE(run_write2, uint16_t)
LASTWRITE(run_write8, uint64_t)

typedef double (*run_fn)(malloc_fn, free_fn, size_t);

struct alloc {
    const char *name;
    malloc_fn m;
    free_fn f;
};

/* Re-execute with a static TLS surplus large enough for jemalloc and several
 * qslab copies, unless the tunable is set (then the caller knows best). */
static void ensure_tls_surplus(char **argv)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, TLS_TUNABLE))
        return;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s" TLS_TUNABLE "=65536", t ? t : "", t && *t ? ":" : "");
    if (setenv("GLIBC_TUNABLES", buf, 1) == 0)
        execv("/proc/self/exe", argv);
    /* exec failed: go on with the default surplus */
}

/* A private copy of a library already loaded (dlopen would return the same
 * handle for the same file): its bytes in a memfd, loaded by its /proc path. */
static void *dlopen_copy(const char *path)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return NULL;
    int fd = memfd_create("bench_inproc-copy", MFD_CLOEXEC);
    if (fd < 0) {
        fclose(in);
        return NULL;
    }
    char buf[65536];
    size_t got;
    int ok = 1;
    while (ok && (got = fread(buf, 1, sizeof buf, in)) > 0)
        ok = write(fd, buf, got) == (ssize_t)got;
    fclose(in);
    void *h = NULL;
    if (ok) {
        char name[64];
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    close(fd); /* the mapping stays */
    return h;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_inproc [--test pair|batch|lastwrite] [--size BYTES] "
                    "[--rounds N] [--write 0|1|2|8|all] [--result] "
                    "[[--name LABEL] [--env VAR=VALUE]... ALLOC]...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    ensure_tls_surplus(argv);

    const char *test = "pair", *wsel = "all";
    size_t size = 64;
    int rounds = 60, n = 0, result = 0;
    struct alloc a[MAX_ALLOCS];
    const char *next_name = NULL;
    char *env[MAX_ENV];
    int nenv = 0;
    struct stat loaded[MAX_ALLOCS]; /* files dlopen'ed so far */
    int nloaded = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--test") && i + 1 < argc) {
            test = argv[++i];
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--write") && i + 1 < argc) {
            wsel = argv[++i];
        } else if (!strcmp(argv[i], "--result")) {
            result = 1;
        } else if (!strcmp(argv[i], "--name") && i + 1 < argc) {
            next_name = argv[++i];
        } else if (!strcmp(argv[i], "--env") && i + 1 < argc) {
            if (nenv == MAX_ENV || !strchr(argv[i + 1], '='))
                usage();
            env[nenv++] = argv[++i];
        } else if (argv[i][0] == '-') {
            usage();
        } else if (n < MAX_ALLOCS) {
            const char *path = argv[i], *name = next_name ? next_name : path;
            next_name = NULL;
            /* the environment this allocator starts with */
            char *saved[MAX_ENV];
            for (int e = 0; e < nenv; e++) {
                char *eq = strchr(env[e], '=');
                *eq = '\0';
                const char *old = getenv(env[e]);
                saved[e] = old ? strdup(old) : NULL;
                setenv(env[e], eq + 1, 1);
                *eq = '=';
            }
            int ok = 1;
            if (!strcmp(path, "glibc")) {
                a[n].m = malloc;
                a[n].f = free;
            } else {
                struct stat st; /* st_ino 0: not a file here (a name the loader searches) */
                int dup = 0;
                if (stat(path, &st) != 0)
                    memset(&st, 0, sizeof st);
                for (int j = 0; j < nloaded && st.st_ino; j++)
                    dup |= loaded[j].st_dev == st.st_dev && loaded[j].st_ino == st.st_ino;
                void *h = dup ? dlopen_copy(path) : dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                    fprintf(stderr, "bench_inproc: skipping %s: %s\n", name,
                            dup ? "cannot load a private copy" : dlerror());
                    ok = 0;
                } else {
                    loaded[nloaded++] = st;
                    a[n].m = (malloc_fn)dlsym(h, "malloc");
                    a[n].f = (free_fn)dlsym(h, "free");
                    if (!a[n].m || !a[n].f) {
                        fprintf(stderr, "bench_inproc: skipping %s: no malloc/free\n", name);
                        ok = 0;
                    }
                }
            }
            if (ok) /* the first call, where a lazy allocator initialises */
                a[n].f(a[n].m(size));
            for (int e = 0; e < nenv; e++) {
                char *eq = strchr(env[e], '=');
                *eq = '\0';
                if (saved[e])
                    setenv(env[e], saved[e], 1);
                else
                    unsetenv(env[e]);
                *eq = '=';
                free(saved[e]);
            }
            nenv = 0;
            if (ok)
                a[n++].name = name;
        }
    }

    /* the variants: one loop per variant, run side by side */
    run_fn run[4];
    int widths[4], nv = 0;
    const char *unit;
    if (!strcmp(test, "pair")) {
        run[nv] = run_pair, widths[nv++] = 0;
        unit = "malloc+free pair";
    } else if (!strcmp(test, "batch")) {
        run[nv] = run_batch, widths[nv++] = 0;
        unit = "object (alloc+free)";
    } else if (!strcmp(test, "lastwrite")) {
        static const run_fn by_width[9] = {
            [0] = run_pair, [1] = run_write1, [2] = run_write2, [8] = run_write8,
        };
        unit = "malloc+write+free";
        if (!strcmp(wsel, "all")) {
            static const int all[] = {0, 1, 2, 8};
            for (int v = 0; v < 4; v++)
                run[nv] = by_width[all[v]], widths[nv++] = all[v];
        } else {
            char *end;
            long w = strtol(wsel, &end, 10);
            if (*end || w < 0 || w > 8 || !by_width[w])
                usage();
            run[nv] = by_width[w], widths[nv++] = (int)w;
        }
    } else {
        usage();
    }
    if (n == 0 || rounds < 1)
        usage();

    double *t = calloc((size_t)nv * (size_t)n * (size_t)rounds, sizeof(double));
    if (!t)
        return 1;
#define T(v, i, r) t[((size_t)(v) * (size_t)n + (size_t)(i)) * (size_t)rounds + (size_t)(r)]
    for (int v = 0; v < nv; v++) /* warm-up */
        for (int i = 0; i < n; i++)
            run[v](a[i].m, a[i].f, size);
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < nv; v++)
            for (int k = 0; k < n; k++) {
                int i = (r + k) % n; /* taking turns at going first */
                T(v, i, r) = run[v](a[i].m, a[i].f, size);
            }

    for (int v = 0; v < nv; v++) {
        if (!result) {
            if (!strcmp(test, "lastwrite"))
                printf("%s%s, %d-byte write, %zu bytes, %d interleaved rounds, cycles per %s\n",
                       v ? "\n" : "", test, widths[v], size, rounds, unit);
            else
                printf("%s, %zu bytes, %d interleaved rounds, cycles per %s\n", test, size,
                       rounds, unit);
        }
        double first = 0;
        for (int i = 0; i < n; i++) {
            double *s = &T(v, i, 0);
            qsort(s, (size_t)rounds, sizeof(double), cmp_double);
            double med = s[rounds / 2];
            if (i == 0)
                first = med;
            if (result)
                printf("result name=%s write=%d median=%.2f q1=%.2f min=%.2f\n", a[i].name,
                       widths[v], med, s[rounds / 4], s[0]);
            else
                printf("%-64s min %7.1f  q1 %7.1f  median %7.1f  ratio %.2f\n", a[i].name,
                       s[0], s[rounds / 4], med, med / first);
        }
    }
    free(t);
    return 0;
}
