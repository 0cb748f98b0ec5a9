/*
 * bench_debug: what SLUB's debug flags cost a cache (docs/debugging.md), on
 * slub_test's single-CPU patterns, through the object-cache API:
 *
 *   pair   --objs alloc+free pairs: each object freed as soon as allocated
 *   batch  --objs allocations, then --objs frees
 *
 * Configurations.  configs[] below is the list of rows: a name, the flags
 * given to qslab_cache_create, and optionally one qslab_tune setting made
 * right after (for a configuration that needs a parameter, e.g. a sampling
 * rate).  "plain" (no flags: the default front end's fast paths) is the one
 * the others are compared with.  T (QSLAB_TRACE) is left out: it writes a
 * line per operation to stderr, which would measure the terminal.  To add a
 * row, add a line to configs[] (bench/run.py finds the rows with --list).
 *
 * For each test and size (--sizes) the driver makes a cache per
 * configuration, "dbg-<test>-<config>-<size>", and checks what serves it: a
 * configuration with a SLUB debug flag must be served by the debug front
 * end, "plain" must not (QSLAB_DEBUG in the environment would make it a
 * debug cache: the driver refuses to run then).  All the caches exist together, and the rounds are
 * interleaved: round r runs every test, size and configuration once, the
 * configurations taking turns at going first, so a noisy neighbour slows
 * them alike.  Each measured run comes right after an unmeasured one of the
 * same test on the same cache (the warm-up): without it, a batch would find
 * its 10,000 objects evicted by the other configurations' batches and pay
 * a cache miss per object (plain's batch at 1 KiB: 4 times slower, and
 * slower than F's, whose checks hide the misses).
 *
 * bench_slub's method otherwise: the main thread pinned to the first CPU it
 * may run on, TSC ticks around each loop (bench.h), objects never touched.
 * The loops are alloc_free_pairs, alloc_objs and free_objs (cacheloops.h,
 * shared with bench_fronts), as in slub.c, so
 * `valgrind --tool=callgrind --toggle-collect='alloc_free_pairs*'` counts the
 * pair loop alone (see docs/benchmarks.md, "Debugging costs").
 *
 * Result lines (bench.h style), one per (test, configuration, size):
 *
 *   result test=T config=C size=S alloc= free= total= ratio= minflt=
 *
 * alloc, free, total as bench_slub's (ticks per operation, medians over the
 * rounds; pair books the pair as alloc, free 0).  ratio: the median over the
 * rounds of this configuration's total / plain's total in the same round
 * (absent when plain is not run).  minflt: page faults per round, median.
 *
 * `--list` prints one line per configuration, "name front-end flags",
 * e.g. "U debug U", "plain slqb -", and exits.
 *
 * Usage: bench_debug [--list] [--configs plain,F,...] [--sizes 64,1024]
 *                    [--tests pair,batch] [--objs N] [--rounds N]
 */
#define _GNU_SOURCE
#include "bench.h"
#include "cacheloops.h"

#include <errno.h>
#include <qslab.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * The rows of the table */

struct config {
    const char *name;         /* the row's name: SLUB's letters, or "plain" */
    unsigned long flags;      /* qslab_cache_create flags */
    const char *attr, *value; /* a qslab_tune setting after creation, or NULL */
};

#define DEBUG_FLAGS                                                                                \
    (QSLAB_CONSISTENCY_CHECKS | QSLAB_RED_ZONE | QSLAB_POISON | QSLAB_STORE_USER | QSLAB_TRACE)

static const struct config configs[] = {
    {"plain", 0, NULL, NULL},
    {"F", QSLAB_CONSISTENCY_CHECKS, NULL, NULL},
    {"Z", QSLAB_RED_ZONE, NULL, NULL},
    {"P", QSLAB_POISON, NULL, NULL},
    {"U", QSLAB_STORE_USER, NULL, NULL},
    {"FZPU", QSLAB_CONSISTENCY_CHECKS | QSLAB_RED_ZONE | QSLAB_POISON | QSLAB_STORE_USER, NULL,
     NULL},
    /* the hardened profile's flags (QSLAB_HARDEN=1): red zones, quarantine */
    {"ZQ", QSLAB_RED_ZONE | QSLAB_QUARANTINE, NULL, NULL},
    /* sampled guarded allocations (QSLAB_GUARD_SAMPLE's rate, per cache):
     * one allocation in about N placed in the guard pool */
    {"G1000", 0, "guard_sample", "1000"},
    {"G100000", 0, "guard_sample", "100000"},
};

#define NR_CONFIGS ((int)(sizeof(configs) / sizeof(configs[0])))
#define PLAIN      0 /* configs[PLAIN]: the base of the ratios */

/* SLUB's letters of a configuration's flags, "-" for none. */
static void letters(unsigned long flags, char out[8])
{
    static const struct {
        unsigned long flag;
        char letter;
    } map[] = {{QSLAB_CONSISTENCY_CHECKS, 'F'}, {QSLAB_RED_ZONE, 'Z'}, {QSLAB_POISON, 'P'},
               {QSLAB_STORE_USER, 'U'},         {QSLAB_TRACE, 'T'},    {QSLAB_DEBUG_REPAIR, 'R'}};
    int n = 0;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (flags & map[i].flag)
            out[n++] = map[i].letter;
    if (n == 0)
        out[n++] = '-';
    out[n] = '\0';
}

/* The cache of configuration k for test `what`'s objects of `size` bytes,
 * checked. */
static qslab_cache *make_cache(int k, const char *what, long size)
{
    const struct config *cf = &configs[k];
    char name[32];
    snprintf(name, sizeof(name), "dbg-%s-%s-%ld", what, cf->name, size);
    qslab_cache *c = qslab_cache_create(name, (size_t)size, 0, cf->flags, NULL);
    if (!c)
        bench_die("qslab_cache_create(%s, %ld, flags %#lx) failed: %s", name, size, cf->flags,
                  strerror(errno));
    if (cf->attr && qslab_tune(name, cf->attr, cf->value) != 0)
        bench_die("qslab_tune(%s, %s, %s) refused", name, cf->attr, cf->value);
    const char *front = qslab_cache_front(c);
    bool debug = front && strcmp(front, "debug") == 0;
    if ((cf->flags & DEBUG_FLAGS) && !debug)
        bench_die("cache %s: served by front end %s, not debug", name, front ? front : "(none)");
    if (k == PLAIN && debug)
        bench_die("cache %s: the plain cache is a debug cache (QSLAB_DEBUG is set?)", name);
    return c;
}

/* ------------------------------------------------------------------------
 * The patterns (slub.c's, with the cache API: cacheloops.h) */

enum test { PAIR, BATCH, NR_TESTS };
static const char *const test_name[NR_TESTS] = {"pair", "batch"};

static long nr_objs = 10000, nr_rounds = 7;
static void **objs; /* bench_map memory */

struct ticks {
    uint64_t alloc, free;
};

static struct ticks run_once(enum test t, qslab_cache *c)
{
    struct ticks tk = {0, 0};
    if (t == PAIR) {
        tk.alloc = alloc_free_pairs(c, nr_objs);
    } else {
        tk.alloc = alloc_objs(c, objs, nr_objs);
        tk.free = free_objs(c, objs, nr_objs);
    }
    return tk;
}

/* ------------------------------------------------------------------------ */

#define MAX_SIZES 8

/* A comma-separated list of names; calls fn(name, len) for each. */
static void each_name(const char *s, void (*fn)(const char *, size_t, void *), void *arg)
{
    while (s && *s) {
        size_t len = strcspn(s, ",");
        if (len)
            fn(s, len, arg);
        s += len + (s[len] == ',');
    }
}

static int nr_run; /* configurations to run, in order */
static int run_cfg[NR_CONFIGS];

static void add_config(const char *s, size_t len, void *arg)
{
    (void)arg;
    for (int k = 0; k < NR_CONFIGS; k++)
        if (strlen(configs[k].name) == len && strncmp(configs[k].name, s, len) == 0) {
            for (int i = 0; i < nr_run; i++)
                if (run_cfg[i] == k)
                    return;
            run_cfg[nr_run++] = k;
            return;
        }
    bench_die("--configs: unknown configuration %.*s", (int)len, s);
}

static void add_test(const char *s, size_t len, void *arg)
{
    bool *run = arg;
    for (int t = 0; t < NR_TESTS; t++)
        if (strlen(test_name[t]) == len && strncmp(test_name[t], s, len) == 0) {
            run[t] = true;
            return;
        }
    bench_die("--tests: unknown test %.*s", (int)len, s);
}


static char out_buf[1 << 14]; /* stdout's buffer, set before any measurement */

int main(int argc, char **argv)
{
    const char *configs_arg = NULL, *sizes_arg = "64,1024", *tests_arg = NULL;
    bool list = bench_take_flag(&argc, argv, "--list");
    const struct bench_opt opts[] = {
        {"configs", NULL, &configs_arg}, {"sizes", NULL, &sizes_arg},  {"tests", NULL, &tests_arg},
        {"objs", &nr_objs, NULL},        {"rounds", &nr_rounds, NULL},
    };
    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "[--list] [--configs plain,F,...] [--sizes 64,1024] [--tests pair,batch] "
                "[--objs N] [--rounds N]");
    setvbuf(stdout, out_buf, _IOLBF, sizeof(out_buf));

    if (list) {
        for (int k = 0; k < NR_CONFIGS; k++) {
            qslab_cache *c = make_cache(k, "list", 64);
            char l[8];
            letters(configs[k].flags, l);
            printf("%s %s %s\n", configs[k].name, qslab_cache_front(c), l);
            destroy_cache(c);
        }
        return 0;
    }

    if (configs_arg)
        each_name(configs_arg, add_config, NULL);
    else
        for (int k = 0; k < NR_CONFIGS; k++)
            run_cfg[nr_run++] = k;
    if (nr_run == 0)
        bench_die("--configs: no configuration");
    bool run[NR_TESTS];
    for (int t = 0; t < NR_TESTS; t++)
        run[t] = tests_arg == NULL;
    each_name(tests_arg, add_test, run);
    long sizes[MAX_SIZES];
    int nr_sizes = bench_parse_sizes(sizes_arg, sizes, MAX_SIZES, (1L << 20));
    if (nr_objs < 1 || nr_rounds < 1)
        bench_die("need positive --objs and --rounds");

    /* plain's position in the run, for the ratios; -1 if not run */
    int plain = -1;
    for (int i = 0; i < nr_run; i++)
        if (run_cfg[i] == PLAIN)
            plain = i;

    objs = bench_map(sizeof(void *) * (size_t)nr_objs);
    memset(objs, 0, sizeof(void *) * (size_t)nr_objs); /* fault it in */
    bench_pin(0);

    /* every cache, [test][size][run index]: a test's own, as if it ran
     * alone (after a batch, plain's pairs at 64 B cost 15 to 30 cycles
     * instead of 11 with the same instructions: where the batch left the
     * queue's objects) */
    static qslab_cache *caches[NR_TESTS][MAX_SIZES][NR_CONFIGS];
    for (int t = 0; t < NR_TESTS; t++)
        for (int s = 0; run[t] && s < nr_sizes; s++)
            for (int i = 0; i < nr_run; i++)
                caches[t][s][i] = make_cache(run_cfg[i], test_name[t], sizes[s]);

    /* samples[t][s][i][r]: alloc, free ticks per operation; faults */
    size_t per = (size_t)NR_TESTS * MAX_SIZES * NR_CONFIGS * (size_t)nr_rounds;
    double *a_s = bench_map(sizeof(double) * 3 * per);
    double *f_s = a_s + per, *flt_s = f_s + per;
#define AT(arr, t, s, i, r)                                                                        \
    (arr)[(((size_t)(t)*MAX_SIZES + (s)) * NR_CONFIGS + (i)) * (size_t)nr_rounds + (r)]

    for (long r = 0; r < nr_rounds; r++) {
        for (int t = 0; t < NR_TESTS; t++) {
            if (!run[t])
                continue;
            for (int s = 0; s < nr_sizes; s++)
                for (int j = 0; j < nr_run; j++) {
                    int i = (int)((j + r) % nr_run); /* taking turns at going first */
                    /* the warm-up: this cache's objects back in the CPU's
                     * caches, after the other configurations' runs */
                    run_once((enum test)t, caches[t][s][i]);
                    long flt = bench_minflt();
                    struct ticks tk = run_once((enum test)t, caches[t][s][i]);
                    AT(flt_s, t, s, i, r) = (double)(bench_minflt() - flt);
                    AT(a_s, t, s, i, r) = (double)tk.alloc / (double)nr_objs;
                    AT(f_s, t, s, i, r) = (double)tk.free / (double)nr_objs;
                }
        }
    }

    double *tmp = bench_map(sizeof(double) * 4 * (size_t)nr_rounds);
    double *ta = tmp, *tf = tmp + nr_rounds, *tr = tf + nr_rounds, *tflt = tr + nr_rounds;
    for (int t = 0; t < NR_TESTS; t++) {
        if (!run[t])
            continue;
        for (int s = 0; s < nr_sizes; s++)
            for (int i = 0; i < nr_run; i++) {
                for (long r = 0; r < nr_rounds; r++) {
                    ta[r] = AT(a_s, t, s, i, r);
                    tf[r] = AT(f_s, t, s, i, r);
                    tflt[r] = AT(flt_s, t, s, i, r);
                    if (plain >= 0) {
                        double base = AT(a_s, t, s, plain, r) + AT(f_s, t, s, plain, r);
                        tr[r] = base > 0 ? (ta[r] + tf[r]) / base : 0;
                    }
                }
                double a = bench_median(ta, (int)nr_rounds), f = bench_median(tf, (int)nr_rounds);
                bench_result_str("test", test_name[t]);
                bench_result_str("config", configs[run_cfg[i]].name);
                bench_result("size", (double)sizes[s]);
                bench_result("alloc", a);
                bench_result("free", f);
                bench_result("total", a + f);
                if (plain >= 0)
                    bench_result("ratio", bench_median(tr, (int)nr_rounds));
                bench_result("minflt", bench_median(tflt, (int)nr_rounds));
                bench_result_end();
            }
    }

    for (int t = 0; t < NR_TESTS; t++)
        for (int s = 0; run[t] && s < nr_sizes; s++)
            for (int i = 0; i < nr_run; i++)
                destroy_cache(caches[t][s][i]);
    return 0;
}
