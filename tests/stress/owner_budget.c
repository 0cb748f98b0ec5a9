/*
 * The owner budget (docs/design.md, "The owner budget"): one byte budget
 * per owner (a CPU, or a thread with QSLAB_OWNER=thread), shared by all its
 * SLQB caches, for the free objects its queues hold and the empty slabs its
 * stashes keep.  THREADS threads (more than the CPUs) each cycle through
 * CACHES caches of sizes from 32 bytes to 8 KiB, allocating and freeing in
 * batches big enough that every queue wants more than its share, so grants
 * grow and are stolen all the time.  At the end, from qslab_budget_stats:
 * no owner ever had more granted than the budget (peak_max), none holds
 * more in its queues and stashes than the budget (held_max), steals
 * happened; the same again after the budget is lowered at run time (used
 * and held within the new one once the owners have run), and the tunable
 * refuses what it must (a named cache, not a number, out of range) and
 * changes nothing then.  Then remote frees in transit: each thread frees
 * what the one before it allocated, in every cache, so that every owner's
 * pending and open batches fill; no owner ever reserves more for them
 * than its transit budget (transit_peak), a quarter of the owner budget,
 * also after the budget is lowered.  Every cache validates.
 */
#include <pthread.h>
#include <unistd.h>
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#define THREADS 6
#define CACHES 24
#define ROUNDS TU_SCALE(30, 6)
#define BATCH 200

static qslab_cache *caches[CACHES];
static size_t sizes[CACHES];
static int live_check = 1; /* the workers check the grants (not while a lowered budget settles) */

static void *work(void *arg)
{
    uint64_t seed = tu_seed((uint64_t)(intptr_t)arg + 11);
    static __thread void *objs[BATCH];
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < CACHES; k++) {
            int c = (int)((k + tu_rand(&seed)) % CACHES);
            int n = 1 + (int)(tu_rand(&seed) % BATCH);
            for (int i = 0; i < n; i++) {
                objs[i] = qslab_cache_alloc(caches[c]);
                if (!objs[i]) {
                    CHECKF(0, "cache %d: allocation %d failed", c, i);
                    n = i;
                    break;
                }
                *(volatile char *)objs[i] = 1;
            }
            for (int i = 0; i < n; i++)
                qslab_cache_free(caches[c], objs[i]);
        }
    /* every owner alive now (threads: this one and the others still at
     * work) has at most the budget granted (what they hold is read once
     * they are quiet: main) */
    struct qslab_budget_stats st;
    qslab_budget_stats(&st);
    if (live_check)
        CHECKF(st.used_max <= st.budget, "an owner has %lu bytes granted, budget %lu", st.used_max,
               st.budget);
    CHECKF(st.owners >= 1, "no owner while a thread works");
    return NULL;
}

/* THREADS threads at work, this one among them: with QSLAB_OWNER=thread
 * its queues stay, quiet, for the checks after */
static void run(void)
{
    pthread_t t[THREADS - 1];
    for (int i = 0; i < THREADS - 1; i++)
        CHECK(pthread_create(&t[i], NULL, work, (void *)(intptr_t)i) == 0);
    work((void *)(intptr_t)(THREADS - 1));
    for (int i = 0; i < THREADS - 1; i++)
        pthread_join(t[i], NULL);
}

/* Remote frees: each thread allocates HAND objects of every cache, then
 * frees what thread i - 1 allocated (another owner's objects: pending
 * batches, a CPU's open batch), round after round. */
#define HAND 64
static void *handed[THREADS][CACHES][HAND];
static pthread_barrier_t hand_barrier;

static void *hand_work(void *arg)
{
    int me = (int)(intptr_t)arg, from = (me + THREADS - 1) % THREADS;
    for (int r = 0; r < ROUNDS; r++) {
        for (int c = 0; c < CACHES; c++)
            for (int i = 0; i < HAND; i++) {
                handed[me][c][i] = qslab_cache_alloc(caches[c]);
                CHECKF(handed[me][c][i] != NULL, "cache %d: allocation %d failed", c, i);
            }
        pthread_barrier_wait(&hand_barrier);
        for (int c = 0; c < CACHES; c++)
            for (int i = 0; i < HAND; i++)
                qslab_cache_free(caches[c], handed[from][c][i]);
        pthread_barrier_wait(&hand_barrier);
        struct qslab_budget_stats st;
        qslab_budget_stats(&st);
        if (live_check)
            CHECKF(st.transit_max <= st.transit_budget,
                   "an owner reserves %lu bytes for remote frees, transit budget %lu", st.transit_max,
                   st.transit_budget);
    }
    return NULL;
}

static void run_handed(void)
{
    pthread_t t[THREADS - 1];
    pthread_barrier_init(&hand_barrier, NULL, THREADS);
    for (int i = 0; i < THREADS - 1; i++)
        CHECK(pthread_create(&t[i], NULL, hand_work, (void *)(intptr_t)i) == 0);
    hand_work((void *)(intptr_t)(THREADS - 1));
    for (int i = 0; i < THREADS - 1; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&hand_barrier);
}

/* /sys/devices/system/cpu/possible's last CPU + 1, as the library reads it */
static long possible_cpus(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    char buf[256] = "";
    if (!f)
        return sysconf(_SC_NPROCESSORS_CONF);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    long last = -1;
    for (char *p = buf; *p;) {
        long v = strtol(p, &p, 10);
        if (v > last)
            last = v;
        while (*p && (*p < '0' || *p > '9'))
            p++;
    }
    return last + 1;
}

static struct qslab_budget_stats stats(void)
{
    struct qslab_budget_stats st;
    qslab_budget_stats(&st);
    return st;
}

static void tune_refused(const char *cache, const char *value, const char *say)
{
    unsigned long before, after;
    CHECK(qslab_tune_get("*", "owner_budget", &before) == 0);
    char err[1024];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune(cache, "owner_budget", value);
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECK(qslab_tune_get("*", "owner_budget", &after) == 0);
    CHECKF(r == -1 && e == EINVAL && after == before, "owner_budget=%s on %s: %d errno %d, %lu -> %lu",
           value, cache, r, e, before, after);
    CHECKF(strstr(err, say) != NULL, "owner_budget=%s on %s: \"%s\" not in \"%s\"", value, cache, say,
           err);
}

int main(void)
{
    for (int i = 0; i < CACHES; i++) {
        char name[32];
        sizes[i] = (size_t)32 << (i % 9); /* 32 B .. 8 KiB */
        sizes[i] += (size_t)(i / 9) * 8;
        snprintf(name, sizeof name, "t-budget-%d", i);
        caches[i] = qslab_cache_create(name, sizes[i], 0, 0, NULL);
        CHECK(caches[i] != NULL);
        if (!caches[i])
            return tu_done();
    }
    if (!tf_is(caches[0], "slqb")) { /* the budget is SLQB's queues' */
        tf_note("stress_owner_budget", caches[0], "the owner budget");
        for (int i = 0; i < CACHES; i++)
            qslab_cache_destroy(caches[i]);
        return tu_done();
    }

    /* the default budget: 16 MiB over the possible CPUs, 256 KiB to 4 MiB
     * each; then 256 KiB, which the 24 caches' queues overrun */
    struct qslab_budget_stats st = stats();
    long cpus = possible_cpus();
    unsigned long want = cpus > 0 ? (16ul << 20) / (unsigned long)cpus : 0;
    want = want < (256ul << 10) ? 256ul << 10 : want > (4ul << 20) ? 4ul << 20 : want;
    CHECKF(st.budget == want, "default budget %lu, %ld CPUs: %lu", st.budget, cpus, want);
    CHECK(qslab_tune("*", "owner_budget", "262144") == 0);
    run();
    st = stats();
    CHECKF(st.peak_max > 0, "no owner had a grant (peak %lu)", st.peak_max);
    CHECKF(st.peak_max <= st.budget, "an owner had %lu bytes granted, budget %lu", st.peak_max, st.budget);
    CHECKF(st.used_max <= st.budget && st.held_max <= st.budget,
           "an owner has %lu bytes granted and holds %lu, budget %lu", st.used_max, st.held_max, st.budget);
    CHECKF(st.steals > 0, "no grant was ever stolen (%lu owners, peak %lu)", st.owners, st.peak_max);

    /* refusals change nothing */
    tune_refused("t-budget-0", "65536", "name \"*\"");
    tune_refused("*", "abc", "owner_budget=abc refused");
    tune_refused("*", "1024", "allowed range is 16384..1073741824");
    tune_refused("*", "4294967296", "owner_budget=4294967296 refused");

    /* lowered at run time: the owners' next misses give the excess back */
    CHECK(qslab_tune("*", "owner_budget", "65536") == 0);
    unsigned long v = 0;
    CHECK(qslab_tune_get("t-budget-3", "owner_budget", &v) == 0 && v == 65536);
    live_check = 0; /* owners that had more settle at their misses */
    run();
    qslab_trim(); /* and what the owners that ran last keep */
    live_check = 1;
    run();
    st = stats();
    CHECKF(st.budget == 65536, "budget %lu after the tune", st.budget);
    CHECKF(st.held_max <= st.budget, "an owner holds %lu bytes, budget %lu", st.held_max, st.budget);
    CHECKF(st.used_max <= st.budget, "an owner has %lu bytes granted, budget %lu", st.used_max, st.budget);

    /* remote frees in transit, within a quarter of the budget: at 256 KiB
     * (a 64 KiB transit budget, which 24 caches' batches of up to freebatch
     * objects overrun), then at 64 KiB (16 KiB, the least) */
    CHECK(qslab_tune("*", "owner_budget", "262144") == 0);
    run_handed();
    st = stats();
    CHECKF(st.transit_budget == 65536, "transit budget %lu, owner budget %lu", st.transit_budget, st.budget);
    CHECKF(st.transit_peak > 0, "no owner reserved anything for remote frees");
    CHECKF(st.transit_peak <= st.transit_budget, "an owner reserved %lu bytes for remote frees, transit budget %lu",
           st.transit_peak, st.transit_budget);
    /* lowered: batches that reserved more before keep it until they are
     * posted (a trim posts every owner's) */
    CHECK(qslab_tune("*", "owner_budget", "65536") == 0);
    live_check = 0;
    run_handed();
    qslab_trim();
    live_check = 1;
    run_handed();
    st = stats();
    CHECKF(st.transit_budget == 16384, "transit budget %lu, owner budget %lu", st.transit_budget, st.budget);
    CHECKF(st.transit_max <= st.transit_budget, "an owner reserves %lu bytes for remote frees, transit budget %lu",
           st.transit_max, st.transit_budget);

    for (int i = 0; i < CACHES; i++) {
        CHECKF(qslab_cache_validate(caches[i]) == 0, "t-budget-%d does not validate", i);
        struct qslab_cache_stats cs;
        qslab_cache_stats(caches[i], &cs);
        CHECKF(cs.active_objs == 0, "t-budget-%d: %lu objects in use", i, cs.active_objs);
    }
    /* objects still in batches on their way home are free: their caches
     * can go, and the batches' reservations go with them (with one cache
     * left, whose batches a trim posts, no owner reserves anything; the
     * caches freed first in each round hold the reservations) */
    run_handed();
    for (int i = 0; i < CACHES - 1; i++) /* the first ones hold the reservations */
        CHECK(qslab_cache_destroy(caches[i]) == 0);
    qslab_trim();
    st = stats();
    CHECKF(st.transit_max == 0, "an owner reserves %lu bytes for remote frees after the destroys and a trim",
           st.transit_max);
    CHECK(qslab_cache_destroy(caches[CACHES - 1]) == 0);
    /* the destroyed caches' grants and stashes left the budgets */
    st = stats();
    CHECKF(st.used == 0, "%lu bytes granted once every cache that used queues is gone", st.used);
    CHECK(qslab_tune("*", "owner_budget", "262144") == 0);
    return tu_done();
}
