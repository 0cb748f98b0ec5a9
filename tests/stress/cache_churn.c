/*
 * Caches created and destroyed all the time while other threads walk the
 * cache list (qslab_slabinfo, qslab_stats_report, qslab_cache_find,
 * qslab_tune on "*") and use long-lived caches.  Every short-lived cache is
 * destroyed cleanly (destroy returns 0) and its name disappears.
 *
 * A walker walks at most WALK_PACE times per churner round finished (any
 * churner's): the walks run all through the churn, between and during
 * creates and destroys (some 7,000 of them against 4,800 rounds in the
 * normal build alone), but a walker cannot keep the CPU from the churners.
 * Unpaced (8 walks a round alone, 170 when starved), with more threads than
 * CPUs (the 15 threads here, and ctest running other tests beside), the
 * walks took the CPU from the churners, so the test ran longer and walked
 * more: 3 s alone under TSan, 18.6 s three at once (7.0 s paced), and it
 * was the critical path of make test's TSan runs (26-33 s of them) even at
 * 4 walks a round.
 */
#include <fcntl.h>
#include <time.h>
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

#define CHURNERS 12
#define WALKERS 3
#define ROUNDS TU_SCALE(400, 4) /* caches each churner creates */
#define WALK_PACE 1             /* walks of each walker per churner round */

static int stop;
static unsigned long destroyed, walks;
static unsigned long progress; /* churner rounds finished, all churners */

static void *churn(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = tu_seed((uint64_t)id + 7);
    int rounds = ROUNDS;
    char name[32];
    void *objs[200];
    for (int r = 0; r < rounds; r++) {
        snprintf(name, sizeof name, "t-churn-%d-%d", id, r);
        size_t size = 8 + tu_rand(&seed) % 600, align = (size_t)8 << tu_rand(&seed) % 6;
        qslab_cache *c = qslab_cache_create(name, size, align, tu_rand(&seed) % 2 ? QSLAB_HWCACHE_ALIGN : 0, NULL);
        if (!c) {
            tu_fail("create %s (size %zu align %zu): errno %d", name, size, align, errno);
            continue;
        }
        if (qslab_cache_find(name) != c)
            tu_fail("%s not found after create", name);
        int n = 1 + (int)(tu_rand(&seed) % 200);
        for (int i = 0; i < n; i++) {
            objs[i] = qslab_cache_alloc(c);
            if (!objs[i] || (uintptr_t)objs[i] % align) {
                tu_fail("%s: object %p (align %zu)", name, objs[i], align);
                continue;
            }
            memset(objs[i], id, size);
        }
        for (int i = 0; i < n; i++) {
            const unsigned char *b = objs[i];
            if (b && (b[0] != id || b[size - 1] != id))
                tu_fail("%s: object %d overwritten", name, i);
            if (b)
                qslab_cache_free(c, objs[i]);
        }
        if (r % 3 == 0)
            qslab_cache_shrink(c);
        int d = qslab_cache_destroy(c);
        if (d != 0)
            tu_fail("destroy %s = %d errno %d", name, d, errno);
        else
            __atomic_add_fetch(&destroyed, 1, __ATOMIC_RELAXED);
        if (qslab_cache_find(name) != NULL)
            tu_fail("%s still found after destroy", name);
        /* Some kmalloc traffic too. */
        void *m = qslab_malloc(tu_rand(&seed) % 5000);
        qslab_free(m);
        __atomic_add_fetch(&progress, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *walk(void *arg)
{
    int id = (int)(intptr_t)arg;
    int devnull = open("/dev/null", O_WRONLY);
    char name[32];
    unsigned long mine = 0; /* this walker's walks */
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        if (mine >= WALK_PACE * (__atomic_load_n(&progress, __ATOMIC_RELAXED) + 1)) {
            struct timespec ts = {0, 50000}; /* ahead of the churners: let them run */
            nanosleep(&ts, NULL);
            continue;
        }
        mine++;
        switch (id) {
        case 0:
            qslab_slabinfo(devnull);
            break;
        case 1:
            qslab_stats_report(devnull);
            break;
        default: {
            unsigned long n = __atomic_load_n(&walks, __ATOMIC_RELAXED);
            snprintf(name, sizeof name, "t-churn-%d-%d", (int)(n % CHURNERS), (int)(n % 50));
            qslab_cache *c = qslab_cache_find(name);
            (void)c; /* may be gone already: only the lookup itself is tested */
            if (qslab_tune("*", "empty_decay_ms", n % 2 ? "100" : "200") != 0)
                tu_fail("tune * failed, errno %d", errno);
            break;
        }
        }
        __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED);
    }
    close(devnull);
    return NULL;
}

int main(void)
{
    pthread_t c[CHURNERS], w[WALKERS];
    for (int i = 0; i < WALKERS; i++)
        pthread_create(&w[i], NULL, walk, (void *)(intptr_t)i);
    for (int i = 0; i < CHURNERS; i++)
        pthread_create(&c[i], NULL, churn, (void *)(intptr_t)i);
    for (int i = 0; i < CHURNERS; i++)
        pthread_join(c[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < WALKERS; i++)
        pthread_join(w[i], NULL);

    int rounds = ROUNDS;
    CHECKF(destroyed == (unsigned long)CHURNERS * rounds, "%lu of %d caches destroyed", destroyed,
           CHURNERS * rounds);
    CHECK(walks > 0);
    CHECK(qslab_cache_find("t-churn-0-0") == NULL);
    printf("%lu caches created and destroyed, %lu walks\n", destroyed, walks);
    return tu_done();
}
