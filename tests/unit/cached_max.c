/*
 * unit: the cached-memory cap (tunable cached_max, QSLAB_CACHED_MAX;
 * core/page.c, core/node.c cached_walk).  Each case runs in a child of its
 * own, without the purger (QSLAB_PURGE=0: no other thread takes the locks
 * the cap's walk only tries), pinned to one CPU:
 *   nocap   the default: no cap, no walk; a population of CACHE_MB MiB
 *           freed stays kept (a long decay), as without the cap's code
 *   tune    qslab_tune("*", "cached_max", 1 MiB) first: after the same free,
 *           what is kept empty (qslab_cached_stats) is at most half the cap
 *           and a keep's slabs, the walks gave the rest back, the owner
 *           budget in force is at most each owner's share of the other half
 *           (qslab_budget_stats), and the resident memory grew by at most
 *           the cap and what the front end's own lists may hold (SLACK)
 *   env     QSLAB_CACHED_MAX=1 MiB: the same
 *   lower   no cap while the population is freed (all of it kept), then a
 *           cap of 2 MiB set: what is kept is at once under its half; after
 *           a short churn (its misses give back the excess) the owners hold
 *           no more than their shares of the other half
 *   bad     qslab_tune refuses a value that is not a number, one over the
 *           range, and a cache's name, each with its one line; a refusal
 *           leaves the cap as it was; qslab_tune_get reads it
 * The same cases run in every mode of the suite (owner kinds, front ends).
 */
#include "../testutil.h"
#include "core/internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define CACHE_MB 48
#define OBJ 256
#define NOBJ ((size_t)CACHE_MB << 20) / OBJ
#define CAP (1ul << 20)

static void *objs[NOBJ];
/* SLOB's shared pages: its own rule keeps an eighth of the pages in use
 * (front/slob/arena.c), within half the cap each kind; no FIFO holds them,
 * so only the resident memory shows them */
static bool slob;

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The population: NOBJ objects of a cache that keeps its empty slabs for
 * ten minutes, made and freed; the RSS growth it leaves, in KiB. */
static long churn(void)
{
    qslab_cache *c = qslab_cache_create("t-cached", OBJ, 0, 0, NULL);
    CHECK(c != NULL);
    slob = strcmp(qslab_cache_front(c), "slob") == 0;
    CHECK(qslab_tune("t-cached", "empty_decay_ms", "600000") == 0);
    long before = rss_kb();
    for (size_t i = 0; i < NOBJ; i++) {
        objs[i] = qslab_cache_alloc(c);
        if (!objs[i]) {
            CHECK(objs[i] != NULL);
            break;
        }
        memset(objs[i], 0x5a, OBJ);
    }
    for (size_t i = 0; i < NOBJ; i++)
        qslab_cache_free(c, objs[i]);
    return rss_kb() - before;
}

/* What may be resident besides the cap, in bytes: what a front end keeps
 * per cache of its own (SLUB's partial slabs, SLAB's arrays) and the
 * slabs' metadata, 1 MiB, and this test's own array of pointers, which
 * the churn writes.  (The owners' queues are within the cap.) */
static unsigned long slack(void)
{
    return (1ul << 20) + sizeof(objs);
}

/* The owners sharing the cap's half for their budgets (owner/owner.h) */
static unsigned long owners(void)
{
    struct qslab_owner_info info;
    qslab_owner_info(&info);
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return info.kind == QSLAB_OWNER_CPU && n > 0 ? (unsigned long)n : 1;
}

/* The owners' budgets within their share of the cap, and what they hold
 * within the budget; `peak`: never more, since start-up */
static void check_owners(unsigned long cap, bool peak)
{
    struct qslab_budget_stats b;
    qslab_budget_stats(&b);
    CHECKF(b.budget <= cap / 2 / owners(), "budget %lu with a cap of %lu, %lu owners", b.budget, cap,
           owners());
    CHECKF(b.used_max <= b.budget, "an owner has %lu bytes granted, budget %lu", b.used_max, b.budget);
    CHECKF(!peak || b.peak_max <= b.budget, "an owner had %lu bytes granted, budget %lu", b.peak_max,
           b.budget);
}

static int check_capped(unsigned long cap)
{
    long grew = churn();
    struct qslab_cached_stats st;
    qslab_cached_stats(&st);
    CHECKF(st.max == cap, "cap %lu, set %lu", st.max, cap);
    /* half of it kept empty, a keep's list at most past that: a flush's
     * slabs (256 KiB) */
    CHECKF(st.cached <= cap / 2 + (256ul << 10), "%lu bytes kept with a cap of %lu", st.cached, cap);
    check_owners(cap, true);
    CHECKF(slob || (st.walks > 0 && st.cuts > 0), "walks %lu, cuts %lu", st.walks, st.cuts);
    CHECKF(slob || st.cut_bytes >= ((unsigned long)CACHE_MB << 20) / 2, "the cap gave back %lu bytes",
           st.cut_bytes);
    /* a sanitizer's shadow of the population stays resident */
    if (!TU_SANITIZED)
        CHECKF(grew >= 0 && (unsigned long)grew * 1024 <= cap + slack(),
               "the resident memory grew by %ld KiB with a cap of %lu bytes (slack %lu)", grew, cap,
               slack());
    return tu_done();
}

static int run(const char *mode)
{
    tu_pin_one_cpu();
    if (strcmp(mode, "nocap") == 0) {
        long grew = churn();
        struct qslab_cached_stats st;
        qslab_cached_stats(&st);
        CHECKF(st.max == 0 && st.walks == 0 && st.cuts == 0 && st.cut_bytes == 0,
               "no cap: max %lu, walks %lu, cuts %lu", st.max, st.walks, st.cuts);
        if (slob)
            return tu_done();
        CHECKF(st.cached >= ((unsigned long)CACHE_MB << 20) / 2, "no cap: %lu bytes kept", st.cached);
        if (!TU_SANITIZED)
            CHECKF(grew * 1024 >= ((long)CACHE_MB << 20) / 2, "no cap: the RSS grew by %ld KiB", grew);
        return tu_done();
    }
    if (strcmp(mode, "tune") == 0) {
        CHECK(qslab_tune("*", "cached_max", "1048576") == 0);
        return check_capped(CAP);
    }
    if (strcmp(mode, "env") == 0)
        return check_capped(CAP);
    if (strcmp(mode, "lower") == 0) {
        churn();
        struct qslab_cached_stats st;
        qslab_cached_stats(&st);
        CHECKF(slob || st.cached >= ((unsigned long)CACHE_MB << 20) / 2, "no cap: %lu bytes kept",
               st.cached);
        CHECK(qslab_tune("*", "cached_max", "2097152") == 0);
        qslab_cached_stats(&st);
        CHECKF(st.max == 2ul << 20 && st.cached <= 1ul << 20, "cap %lu: %lu bytes kept", st.max,
               st.cached);
        CHECKF(st.walks == 1 && (slob || st.cuts == 1), "walks %lu, cuts %lu", st.walks, st.cuts);
        /* a short churn: the hot queue misses and gives its excess back */
        qslab_cache *c = qslab_cache_create("t-cached-lower", OBJ, 0, 0, NULL);
        CHECK(c != NULL);
        for (int round = 0; round < 4; round++) {
            for (size_t i = 0; i < 4096; i++)
                objs[i] = qslab_cache_alloc(c);
            for (size_t i = 0; i < 4096; i++)
                qslab_cache_free(c, objs[i]);
        }
        check_owners(2ul << 20, false);
        return tu_done();
    }
    return 2;
}

static char err[4096];

/* op refused with errno EINVAL and exactly `line` on stderr */
static void refused(const char *cache, const char *value, const char *line)
{
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune(cache, "cached_max", value);
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EINVAL, "tune %s cached_max=%s: %d, errno %d", cache, value, r, e);
    CHECKF(strcmp(err, line) == 0, "tune %s cached_max=%s said:\n%s\nnot:\n%s", cache, value, err, line);
}

static void bad_values(void)
{
    CHECK(qslab_cache_create("t-cached-bad", 64, 0, 0, NULL) != NULL);
    CHECK(qslab_tune("*", "cached_max", "4194304") == 0);
    refused("*", "4M",
            "qslab: tune kmalloc-8 cached_max=4M refused: not a number; allowed range is "
            "0..1099511627776 bytes (the process's, named \"*\": the cap on what is kept that is "
            "not in use (half for empty slabs, half for the owners' queues), 0 for none)\n");
    refused("*", "1099511627777",
            "qslab: tune kmalloc-8 cached_max=1099511627777 refused: allowed range is "
            "0..1099511627776 bytes (the process's, named \"*\": the cap on what is kept that is "
            "not in use (half for empty slabs, half for the owners' queues), 0 for none)\n");
    refused("t-cached-bad", "1048576",
            "qslab: tune t-cached-bad cached_max refused: the cached-memory cap is the process's, "
            "one for every cache: name \"*\"\n");
    unsigned long v = 0;
    CHECK(qslab_tune_get("*", "cached_max", &v) == 0 && v == 4194304);
    CHECK(qslab_tune_get("t-cached-bad", "cached_max", &v) == 0 && v == 4194304);
    CHECK(qslab_tune("*", "cached_max", "0") == 0);
    CHECK(qslab_tune_get("*", "cached_max", &v) == 0 && v == 0);
}

/* the child's environment: no purger, and the case's variable */
static void setup(void *arg)
{
    setenv("QSLAB_PURGE", "0", 1);
    if (arg)
        setenv("QSLAB_CACHED_MAX", arg, 1);
    else
        unsetenv("QSLAB_CACHED_MAX");
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return run(argv[1]);
    if (getenv("QSLAB_TUNE") || getenv("QSLAB_DEBUG")) {
        printf("cached_max: skipped, QSLAB_TUNE or QSLAB_DEBUG is set for the whole run\n");
        return 0;
    }
    static const struct {
        const char *mode, *env;
    } cases[] = {{"nocap", NULL}, {"tune", NULL}, {"env", "1048576"}, {"lower", NULL}};
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t pid = tu_spawn_self(cases[i].mode, setup, (void *)cases[i].env);
        int r = pid < 0 ? -1 : tu_wait(pid);
        CHECKF(r == 0, "case %s: status %d", cases[i].mode, r);
    }
    bad_values();
    return tu_done();
}
