/*
 * slab_churn.c - the SLAB front end under churn: 16 threads (more than the
 * cores) allocate from four caches pinned to SLAB (32, 256 and 4096 bytes,
 * and a constructor cache), stamp every object (stamp.h), and hand most of
 * them to another thread to check and free: the next one in a ring, or any
 * one (all to all); the rest they keep a while and free themselves, some
 * through qslab_free.  Workers exit after a random number of rounds and new
 * ones take their place (a thread's arrays and alien arrays go back at its
 * exit), while one more thread shrinks the caches and retunes limit,
 * batchcount and shared with valid values now and then.  The run lasts
 * about 3 s, so that the reaper (every 2 s, in the purger's tick) runs at
 * least once while the others work.  With two or more NUMA nodes (real, or
 * QSLAB_FAKE_NUMA from the environment) some allocations ask for a node and
 * the frees of other nodes' objects go through alien arrays.  At the end:
 * every object freed, allocations and frees counted as the threads made
 * them, every cache validates and is destroyed.
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"
#include "stamp.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NT     16  /* worker slots */
#define BOX    256 /* objects waiting for a thread */
#define KEEP   48  /* objects a worker keeps itself */
#define HDR    16  /* the constructor cache's constructed header */
#define RUN_MS 3000
#define RUN_MAX_MS 60000

enum { NC = 4 };
static const char *const names[NC] = {"t-slabc-32", "t-slabc-256", "t-slabc-4096", "t-slabc-ctor"};
static const size_t sizes[NC] = {32, 256, 4096, 136};
static qslab_cache *caches[NC];
static int nnodes;

/* the constructor cache: a header the allocator must never touch */
static void ctor(void *p)
{
    for (int i = 0; i < HDR; i++)
        ((uint8_t *)p)[i] = (uint8_t)(0xa0 + i);
}
static int constructed(const void *p)
{
    for (int i = 0; i < HDR; i++)
        if (((const uint8_t *)p)[i] != (uint8_t)(0xa0 + i))
            return 0;
    return 1;
}

struct item {
    struct obj o; /* the stamped part */
    void *base;   /* the object */
    int ci;
};

struct box {
    pthread_mutex_t m;
    struct item it[BOX];
    unsigned head, tail;
} boxes[NT];

struct slot {
    pthread_t t;
    int running; /* atomic: 1 while its worker runs */
    int gen;
    uint64_t seq; /* stamps' sequence numbers, across generations */
    uint64_t rnd;
} slots[NT];

static int stop; /* atomic */
static unsigned long made[NC], freed[NC], bad_stamps, generations, tunes, shrinks;

static int post(int to, const struct item *it)
{
    struct box *b = &boxes[to];
    int ok = 0;
    pthread_mutex_lock(&b->m);
    if (b->head - b->tail < BOX) {
        b->it[b->head % BOX] = *it;
        b->head++;
        ok = 1;
    }
    pthread_mutex_unlock(&b->m);
    return ok;
}

/* Check an object and free it; counts in *fr. */
static void release(int me, struct item *it, unsigned long *fr, uint64_t *rnd, const char *where)
{
    unsigned long bad = 0;
    stamp_verify(&it->o, me, &bad, where);
    if (it->ci == 3 && !constructed(it->base)) {
        bad++;
        tu_fail("thread %d, %s: constructed header of %p overwritten", me, where, it->base);
    }
    if (bad)
        __atomic_add_fetch(&bad_stamps, bad, __ATOMIC_RELAXED);
    if (tu_rand(rnd) % 8 == 0)
        qslab_free(it->base);
    else
        qslab_cache_free(caches[it->ci], it->base);
    fr[it->ci]++;
}

static void drain_box(int me, unsigned long *fr, uint64_t *rnd)
{
    struct box *b = &boxes[me];
    struct item buf[64];
    for (;;) {
        unsigned n = 0;
        pthread_mutex_lock(&b->m);
        while (n < 64 && b->tail != b->head)
            buf[n++] = b->it[b->tail++ % BOX];
        pthread_mutex_unlock(&b->m);
        if (!n)
            return;
        for (unsigned i = 0; i < n; i++)
            release(me, &buf[i], fr, rnd, "from its box");
    }
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    struct slot *sl = &slots[me];
    uint64_t rnd = sl->rnd;
    unsigned long mk[NC] = {0}, fr[NC] = {0};
    struct item keep[KEEP];
    int nkeep = 0;
    long rounds = TU_SCALE(3000, 4) + (long)(tu_rand(&rnd) % TU_SCALE(12000, 4));
    for (long r = 0; r < rounds && !__atomic_load_n(&stop, __ATOMIC_RELAXED); r++) {
        uint64_t x = tu_rand(&rnd);
        int ci = (int)(x % 16);
        ci = ci < 6 ? 0 : ci < 11 ? 1 : ci < 13 ? 2 : 3; /* 4096 B: one in eight */
        void *p;
        if (nnodes > 1 && (x >> 8) % 8 == 0)
            p = qslab_cache_alloc_node(caches[ci], (int)((x >> 12) % (unsigned)nnodes));
        else
            p = qslab_cache_alloc(caches[ci]);
        if (!p) {
            tu_fail("thread %d: allocation of %s failed", me, names[ci]);
            continue;
        }
        mk[ci]++;
        if (ci == 3 && !constructed(p))
            tu_fail("thread %d: %p of %s handed out not in its constructed state", me, p,
                    names[ci]);
        struct item it = {{ci == 3 ? (unsigned char *)p + HDR : p, make_tag(me, sl->seq++),
                           (uint32_t)(ci == 3 ? sizes[ci] - HDR : sizes[ci]), K_CACHE},
                          p,
                          ci};
        stamp(&it.o);
        unsigned how = (unsigned)(x >> 20) % 10;
        int to = how < 4 ? (me + 1) % NT : how < 7 ? (int)((x >> 28) % NT) : -1;
        if (to >= 0 && post(to, &it))
            ;
        else if (nkeep < KEEP)
            keep[nkeep++] = it;
        else { /* swap with a kept one, which goes */
            int k = (int)((x >> 36) % KEEP);
            struct item old = keep[k];
            keep[k] = it;
            release(me, &old, fr, &rnd, "kept");
        }
        if ((r & 7) == 0)
            drain_box(me, fr, &rnd);
    }
    while (nkeep)
        release(me, &keep[--nkeep], fr, &rnd, "kept, at exit");
    drain_box(me, fr, &rnd);
    for (int i = 0; i < NC; i++) {
        __atomic_add_fetch(&made[i], mk[i], __ATOMIC_RELAXED);
        __atomic_add_fetch(&freed[i], fr[i], __ATOMIC_RELAXED);
    }
    sl->rnd = rnd;
    __atomic_store_n(&sl->running, 0, __ATOMIC_RELEASE);
    return NULL;
}

static unsigned long get(const char *cache, const char *attr)
{
    unsigned long v = 0;
    if (qslab_tune_get(cache, attr, &v) != 0)
        tu_fail("qslab_tune_get(%s, %s) failed", cache, attr);
    return v;
}

static void set(const char *cache, const char *attr, unsigned long v)
{
    char s[24];
    snprintf(s, sizeof s, "%lu", v);
    if (qslab_tune(cache, attr, s) != 0)
        tu_fail("qslab_tune(%s, %s, %s) refused (limit %lu, batchcount %lu)", cache, attr, s,
                get(cache, "limit"), get(cache, "batchcount"));
    else
        __atomic_add_fetch(&tunes, 1, __ATOMIC_RELAXED);
}

/* limit L and batchcount B (B <= L), in an order valid at each step */
static void set_lb(const char *n, unsigned long L, unsigned long B)
{
    if (B <= get(n, "limit")) {
        set(n, "batchcount", B);
        set(n, "limit", L);
    } else {
        set(n, "limit", L);
        set(n, "batchcount", B);
    }
}

/* Shrink and retune with valid values now and then. */
static void *tuner(void *arg)
{
    uint64_t rnd = tu_seed(777);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        tu_sleep_ms(10 + (unsigned)(tu_rand(&rnd) % 40));
        uint64_t x = tu_rand(&rnd);
        int ci = (int)(x % NC);
        const char *n = names[ci];
        switch ((x >> 8) % 4) {
        case 0:
            qslab_cache_shrink(caches[ci]);
            __atomic_add_fetch(&shrinks, 1, __ATOMIC_RELAXED);
            break;
        case 1: {
            unsigned long L = 1 + (x >> 16) % 300;
            set_lb(n, L, 1 + (x >> 32) % L);
            break;
        }
        case 2:
            set(n, "shared", (x >> 16) % 17);
            break;
        default: { /* mm/slab.c's defaults for the size */
            unsigned long L = sizes[ci] > 1024 ? 24 : sizes[ci] > 256 ? 54 : 120;
            set_lb(n, L, (L + 1) / 2);
            set(n, "shared", 8);
            break;
        }
        }
    }
    return arg;
}

static void start(int i)
{
    struct slot *sl = &slots[i];
    sl->gen++;
    __atomic_store_n(&sl->running, 1, __ATOMIC_RELAXED);
    if (pthread_create(&sl->t, NULL, worker, (void *)(intptr_t)i) != 0) {
        tu_fail("pthread_create failed");
        __atomic_store_n(&sl->running, 0, __ATOMIC_RELAXED);
        sl->gen = -1000000;
    }
    generations++;
}

int main(void)
{
    nnodes = qslab_num_nodes();
    for (int i = 0; i < NC; i++) {
        caches[i] = qslab_cache_create(names[i], sizes[i], 0, 0, i == 3 ? ctor : NULL);
        CHECKF(caches[i] != NULL, "create %s", names[i]);
        if (!caches[i])
            return tu_done();
        if (tf_debug_skip("stress_slab_churn", caches[i]))
            return tu_done();
        CHECKF(qslab_tune(names[i], "front", "slab") == 0 && tf_is(caches[i], "slab"),
               "%s pinned to slab", names[i]);
    }
    for (int i = 0; i < NT; i++) {
        pthread_mutex_init(&boxes[i].m, NULL);
        slots[i].rnd = tu_seed((uint64_t)i + 1);
        slots[i].seq = 0;
    }
    pthread_t tt;
    pthread_create(&tt, NULL, tuner, NULL);
    uint64_t t0 = tu_now_ms();
    for (int i = 0; i < NT; i++)
        start(i);
    /* workers come and go: a finished one is joined and replaced while the
     * run lasts; on a loaded machine (TSan, other jobs) no worker may have
     * reached its last round by RUN_MS: the run goes on until one has been
     * replaced, up to RUN_MAX_MS (then the check below fails) */
    while (tu_now_ms() - t0 < RUN_MS || (generations <= NT && tu_now_ms() - t0 < RUN_MAX_MS)) {
        tu_sleep_ms(5);
        for (int i = 0; i < NT; i++)
            if (slots[i].gen > 0 && !__atomic_load_n(&slots[i].running, __ATOMIC_ACQUIRE)) {
                pthread_join(slots[i].t, NULL);
                start(i);
            }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < NT; i++)
        if (slots[i].gen > 0)
            pthread_join(slots[i].t, NULL);
    pthread_join(tt, NULL);
    uint64_t ran = tu_now_ms() - t0;

    /* what was posted after its thread's last drain */
    unsigned long fr[NC] = {0};
    uint64_t rnd = tu_seed(99);
    for (int i = 0; i < NT; i++)
        drain_box(i, fr, &rnd);
    for (int i = 0; i < NC; i++)
        freed[i] += fr[i];

    CHECKF(bad_stamps == 0, "%lu objects found overwritten", bad_stamps);
    CHECKF(generations > NT, "only %lu worker threads in %llu ms: none exited and was replaced",
           generations, (unsigned long long)ran);
    CHECKF(tunes > 0 && shrinks > 0, "tuner: %lu tunes, %lu shrinks", tunes, shrinks);
    CHECKF(ran >= 2500, "ran %llu ms: the reaper (every 2 s) may not have run",
           (unsigned long long)ran);
    for (int i = 0; i < NC; i++) {
        struct qslab_cache_stats st;
        CHECK(qslab_cache_stats(caches[i], &st) == 0);
        CHECKF(made[i] > 0 && freed[i] == made[i], "%s: threads made %lu, freed %lu", names[i],
               made[i], freed[i]);
        CHECKF(st.alloc == made[i] && st.free == st.alloc && st.active_objs == 0,
               "%s: counted %lu allocs %lu frees %lu in use; threads made %lu", names[i], st.alloc,
               st.free, st.active_objs, made[i]);
        CHECKF(qslab_cache_validate(caches[i]) == 0, "%s does not validate (see above)", names[i]);
        qslab_cache_shrink(caches[i]);
        CHECKF(qslab_cache_validate(caches[i]) == 0,
               "%s does not validate after shrink (see above)", names[i]);
        CHECKF(qslab_cache_destroy(caches[i]) == 0, "destroy %s", names[i]);
    }
    fprintf(stderr,
            "slab_churn: %d nodes, %llu ms, %lu threads, %lu tunes, %lu shrinks, allocs %lu %lu "
            "%lu %lu\n",
            nnodes, (unsigned long long)ran, generations, tunes, shrinks, made[0], made[1], made[2],
            made[3]);
    return tu_done();
}
