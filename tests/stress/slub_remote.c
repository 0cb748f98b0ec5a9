/*
 * slub_remote.c - the SLUB front end under threads: 16 worker slots (more
 * threads than cores) allocate from four caches pinned to SLUB (32, 256 and
 * 4096 bytes, and a 96-byte cache with a constructor) and, where the kmalloc
 * caches are SLUB's, from kmalloc (24, 250 and 5000 bytes, the last with
 * pass_through switched on and off during the run).  Every object is
 * stamped by its allocator (stamp.h) and checked by its freer.  Objects
 * travel three ways: kept and freed by their allocator (the owner's active
 * slab), handed down a ring of producer/consumer pairs (slot i to slot
 * i + 1), and swapped through a shared exchange where any thread may pick
 * up any other thread's object (all-to-all remote frees, straight to the
 * slabs' words by compare-and-swap).  Each slot runs several generations
 * of threads: a thread exits mid-run, leaving objects in the rings and the
 * exchange for others to free (the owner's retire path under thread
 * owners), and a new one starts.  Meanwhile a separate thread shrinks the
 * caches (under per-CPU owners: a flush of every CPU's active and partial
 * slabs, taken from under their CPUs), now and then trims (qslab_trim:
 * every SLUB cache), and reads their statistics, while another moves the
 * workers between CPUs (their affinity changed under them: migrations at
 * any instruction, the per-CPU owners' restart and moved-away paths).
 *
 * The test runs twice: once with two fake NUMA nodes (QSLAB_FAKE_NUMA=2,
 * some objects asked for on either node), once as started.
 *
 * At the end every object is freed, each cache counted exactly the
 * allocations made and as many frees, validates, gives every slab back at
 * shrink, and is destroyed.  Under TSan this covers slub.c's lock-free
 * frees, the per-CPU sections' annotations, and the flush and retire paths.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include <qslab.h>
#include <sched.h>

#include "../front.h"
#include "../testutil.h"
#include "stamp.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NT    16 /* worker slots */
#define GENS  4  /* threads per slot, one after the other */
#define RING  128
#define NX    64 /* exchange slots */
#define LOCAL 48

enum { NC = 4, NKM = 3, NK = NC + NKM };
static const uint32_t ksize[NK] = {32, 256, 4096, 96, 24, 250, 5000};
static const char *const cname[NC] = {"t-slubr-32", "t-slubr-256", "t-slubr-4096", "t-slubr-ctor"};
#define CTOR      3
#define CTOR_BYTE 0x5c
static qslab_cache *cache[NC];
static int nkinds = NC; /* NK when the kmalloc caches are SLUB's */
static int rounds;
static unsigned long made[NK], ctor_runs;

struct item {
    struct obj o;
    int kind;
};

static struct ring {
    pthread_mutex_t m;
    struct item it[RING];
    unsigned head, tail;
} rings[NT];

static struct xslot {
    pthread_mutex_t m;
    struct item it;
    int full;
} xch[NX];

static int stop; /* the shrinker and the mover: the workers are done */
static unsigned long shrinks, toggles;
static unsigned long bad;       /* broken stamps, constructor states (reported: first few) */
static unsigned long misplaced; /* objects of another node than asked for */

static void ctor(void *p)
{
    __atomic_add_fetch(&ctor_runs, 1, __ATOMIC_RELAXED);
    memset(p, CTOR_BYTE, 96);
}

static int constructed(const unsigned char *p)
{
    for (int i = 0; i < 96; i++)
        if (p[i] != CTOR_BYTE)
            return 0;
    return 1;
}

static int nnodes = 1;

static int new_item(struct item *it, int kind, int thread, uint64_t seq, uint64_t r)
{
    void *p;
    int node = -1;
    if (kind >= NC)
        p = qslab_malloc(ksize[kind]);
    else if (nnodes > 1 && r % 8 == 0) /* another node's partial slabs, under its lock */
        p = qslab_cache_alloc_node(cache[kind], node = (int)(r / 8 % (uint64_t)nnodes));
    else
        p = qslab_cache_alloc(cache[kind]);
    if (!p) {
        tu_fail("thread %d: allocation of kind %d failed", thread, kind);
        return 0;
    }
    if (node >= 0 && qslab_object_node(p) != node &&
        __atomic_add_fetch(&misplaced, 1, __ATOMIC_RELAXED) <= 5)
        tu_fail("thread %d: qslab_cache_alloc_node(%s, %d) gave %p, of node %d", thread,
                cname[kind], node, p, qslab_object_node(p));
    if (kind == CTOR && !constructed(p) && __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED) <= 5)
        tu_fail("thread %d: constructor object %p not in its constructed state (byte 0 %#x, 8 %#x)",
                thread, p, ((unsigned char *)p)[0], ((unsigned char *)p)[8]);
    it->kind = kind;
    it->o = (struct obj){p, make_tag(thread, seq), ksize[kind], kind < NC ? K_CACHE : K_KMALLOC};
    stamp(&it->o);
    __atomic_add_fetch(&made[kind], 1, __ATOMIC_RELAXED);
    return 1;
}

/* Check and free an item; a constructor object goes back constructed. */
static void release(const struct item *it, int thread, const char *where, uint64_t r)
{
    unsigned long b = __atomic_load_n(&bad, __ATOMIC_RELAXED);
    if (!stamp_verify(&it->o, thread, &b, where))
        __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    if (it->kind == CTOR)
        memset(it->o.p, CTOR_BYTE, 96);
    if (it->kind >= NC)
        qslab_free(it->o.p);
    else if (r & 1)
        qslab_cache_free(cache[it->kind], it->o.p);
    else
        qslab_free(it->o.p); /* any cache's object */
}

static int ring_put(struct ring *g, const struct item *it)
{
    int ok = 0;
    pthread_mutex_lock(&g->m);
    if (g->head - g->tail < RING) {
        g->it[g->head++ % RING] = *it;
        ok = 1;
    }
    pthread_mutex_unlock(&g->m);
    return ok;
}

static void ring_drain(struct ring *g, int thread, uint64_t *rnd)
{
    struct item got[RING];
    unsigned n = 0;
    pthread_mutex_lock(&g->m);
    while (g->tail != g->head)
        got[n++] = g->it[g->tail++ % RING];
    pthread_mutex_unlock(&g->m);
    for (unsigned i = 0; i < n; i++)
        release(&got[i], thread, "ring", tu_rand(rnd));
}

/* Swap *it into a random exchange slot; what was there (another thread's,
 * usually) is freed here.  *it is no longer ours. */
static void exchange(const struct item *it, int thread, uint64_t *rnd)
{
    struct xslot *x = &xch[tu_rand(rnd) % NX];
    struct item old;
    pthread_mutex_lock(&x->m);
    int had = x->full;
    old = x->it;
    x->it = *it;
    x->full = 1;
    pthread_mutex_unlock(&x->m);
    if (had)
        release(&old, thread, "exchange", tu_rand(rnd));
}

struct slot {
    pthread_mutex_t m; /* t, running: main (start, join) and the mover */
    pthread_t t;
    int gen, running, done; /* done: atomic */
};
static struct slot slots[NT];

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    int gen = slots[me].gen;
    int thread = me + NT * gen; /* a tag per thread, not per slot */
    uint64_t rnd = tu_seed((uint64_t)thread + 1);
    struct ring *out = &rings[(me + 1) % NT], *in = &rings[me];
    struct item local[LOCAL];
    int nlocal = 0;
    int n =
        rounds / 2 + (int)(tu_rand(&rnd) % (uint64_t)rounds); /* threads end at different times */
    for (int r = 0; r < n; r++) {
        struct item it;
        int kind = (int)(tu_rand(&rnd) % (uint64_t)nkinds);
        if (!new_item(&it, kind, thread, (uint64_t)r, tu_rand(&rnd)))
            continue;
        uint64_t how = tu_rand(&rnd) % 10;
        if (how < 4) { /* kept: freed by its allocator later */
            if (nlocal == LOCAL) {
                int k = (int)(tu_rand(&rnd) % LOCAL);
                release(&local[k], thread, "local", tu_rand(&rnd));
                local[k] = local[--nlocal];
            }
            local[nlocal++] = it;
        } else if (how < 7) { /* to the next slot's consumer */
            if (!ring_put(out, &it))
                release(&it, thread, "ring full", tu_rand(&rnd));
        } else { /* all to all */
            exchange(&it, thread, &rnd);
        }
        if ((r & 7) == 7)
            ring_drain(in, thread, &rnd);
        if (tu_rand(&rnd) % 512 == 0) /* a burst of frees: slabs emptied, partial lists move */
            while (nlocal)
                release(&local[--nlocal], thread, "burst", tu_rand(&rnd));
    }
    ring_drain(in, thread, &rnd);
    /* at exit: half of what is kept goes to others (freed after this
     * thread is gone), half is freed here */
    while (nlocal) {
        --nlocal;
        if (nlocal & 1)
            exchange(&local[nlocal], thread, &rnd);
        else
            release(&local[nlocal], thread, "exit", tu_rand(&rnd));
    }
    __atomic_store_n(&slots[me].done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *shrinker(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 1000000};
    unsigned i = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        qslab_cache *c = cache[i % NC];
        qslab_cache_shrink(c);
        shrinks++;
        struct qslab_cache_stats st;
        if (qslab_cache_stats(c, &st) != 0 || st.remote_batch != 0)
            tu_fail("%s: statistics %lu remote batches (SLUB has none)", cname[i % NC],
                    st.remote_batch);
        if (nkinds > NC && i % 8 == 7) {
            qslab_tune("kmalloc-5120", "pass_through", (i / 8) & 1 ? "0" : "1");
            toggles++;
        }
        if (i % 16 == 5)
            qslab_trim(); /* malloc_trim: every SLUB cache shrunk */
        i++;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Moves workers between CPUs at any instruction (the kernel migrates a
 * running thread whose affinity changes): per-CPU owners' sections restart
 * and their slow paths find themselves on another CPU than their queue's
 * (src/front/slub/slub.c slub_pc_detach, pc_install_or_give). */
static cpu_set_t allowed;
static unsigned long moves;
static void *mover(void *arg)
{
    (void)arg;
    int cpus[CPU_SETSIZE], n = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &allowed))
            cpus[n++] = i;
    if (n < 2)
        return NULL;
    uint64_t rnd = tu_seed(4242);
    struct timespec ts = {0, 200000};
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        struct slot *sl = &slots[tu_rand(&rnd) % NT];
        cpu_set_t to;
        if (tu_rand(&rnd) % 4 == 0) {
            to = allowed; /* free again */
        } else {
            CPU_ZERO(&to);
            CPU_SET(cpus[tu_rand(&rnd) % (uint64_t)n], &to);
        }
        pthread_mutex_lock(&sl->m);
        if (sl->running && pthread_setaffinity_np(sl->t, sizeof to, &to) == 0)
            moves++;
        pthread_mutex_unlock(&sl->m);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void start(int s)
{
    slots[s].done = 0;
    slots[s].running = 1;
    if (pthread_create(&slots[s].t, NULL, worker, (void *)(intptr_t)s) != 0) {
        tu_fail("pthread_create");
        slots[s].running = 0;
    }
}

int main(int argc, char **argv)
{
    /* half the run with two fake NUMA nodes (objects of both nodes freed
     * anywhere, alloc_node), started first: no thread yet to fork */
    int numa = argc == 2 && strcmp(argv[1], "numa") == 0;
    if (!numa) {
        int r = tu_reexec("numa", "QSLAB_FAKE_NUMA", "2");
        CHECKF(r == 0, "the run with QSLAB_FAKE_NUMA=2 failed (%d)", r);
    } else {
        nnodes = qslab_num_nodes();
        CHECKF(nnodes == 2, "QSLAB_FAKE_NUMA=2: %d nodes", nnodes);
    }
    rounds = TU_SCALE_TSAN(TU_SCALE(50000, 5), 2);
    for (int i = 0; i < NC; i++) {
        cache[i] = qslab_cache_create(cname[i], ksize[i], 0, 0, i == CTOR ? ctor : NULL);
        CHECK(cache[i] != NULL);
        if (!cache[i])
            return tu_done();
        if (tf_debug_skip("stress_slub_remote", cache[i]))
            return tu_done();
        CHECKF(qslab_tune(cname[i], "front", "slub") == 0 && tf_is(cache[i], "slub"),
               "%s pinned to slub", cname[i]);
    }
    /* small partial lists for one cache, none for another: the bounds and
     * the node paths get their share */
    CHECK(qslab_tune("t-slubr-256", "cpu_partial", "4") == 0);
    CHECK(qslab_tune("t-slubr-32", "cpu_partial", "0") == 0);
    CHECK(qslab_tune("t-slubr-32", "min_partial", "1") == 0);

    static const char *const kmname[NKM] = {"kmalloc-32", "kmalloc-256", "kmalloc-5120"};
    qslab_cache *km[NKM] = {0};
    struct qslab_cache_stats km0[NKM];
    if (tf_is(qslab_cache_find("kmalloc-64"), "slub")) {
        nkinds = NK;
        for (int i = 0; i < NKM; i++) {
            km[i] = qslab_cache_find(kmname[i]);
            CHECK(km[i] != NULL && qslab_cache_stats(km[i], &km0[i]) == 0);
        }
    } else {
        tf_note("stress_slub_remote", NULL,
                "kmalloc objects and pass_through (kmalloc caches not SLUB's)");
    }
    for (int i = 0; i < NT; i++)
        pthread_mutex_init(&rings[i].m, NULL);
    for (int i = 0; i < NX; i++)
        pthread_mutex_init(&xch[i].m, NULL);
    for (int i = 0; i < NT; i++)
        pthread_mutex_init(&slots[i].m, NULL);
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);

    pthread_t sh, mv;
    CHECK(pthread_create(&sh, NULL, shrinker, NULL) == 0);
    for (int s = 0; s < NT; s++) {
        pthread_mutex_lock(&slots[s].m);
        start(s);
        pthread_mutex_unlock(&slots[s].m);
    }
    CHECK(pthread_create(&mv, NULL, mover, NULL) == 0);
    /* a slot whose thread finished gets its next generation */
    struct timespec ts = {0, 500000};
    for (int live = NT; live;) {
        live = 0;
        for (int s = 0; s < NT; s++) {
            if (!slots[s].running)
                continue;
            if (__atomic_load_n(&slots[s].done, __ATOMIC_ACQUIRE)) {
                pthread_mutex_lock(&slots[s].m);
                pthread_join(slots[s].t, NULL);
                slots[s].running = 0;
                if (++slots[s].gen < GENS)
                    start(s);
                pthread_mutex_unlock(&slots[s].m);
            }
            live += slots[s].running;
        }
        if (live)
            nanosleep(&ts, NULL);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(sh, NULL);
    pthread_join(mv, NULL);
    if (nkinds > NC)
        CHECK(qslab_tune("kmalloc-5120", "pass_through", "0") == 0);

    /* what was left in flight, freed by a thread that made none of it */
    uint64_t rnd = tu_seed(999);
    for (int i = 0; i < NT; i++)
        ring_drain(&rings[i], -1, &rnd);
    for (int i = 0; i < NX; i++)
        if (xch[i].full) {
            release(&xch[i].it, -1, "exchange at the end", tu_rand(&rnd));
            xch[i].full = 0;
        }
    CHECKF(bad == 0, "%lu broken objects", bad);
    CHECKF(misplaced == 0, "%lu objects from another node than alloc_node asked for", misplaced);
    CHECKF(shrinks > 0 && (nkinds == NC || toggles > 0),
           "the shrinker ran %lu times, switched pass_through %lu times", shrinks, toggles);
    CHECKF(moves > 0 || CPU_COUNT(&allowed) < 2, "the mover moved %lu threads", moves);

    unsigned long km_made = 0;
    for (int k = NC; k < nkinds; k++)
        km_made += made[k];
    for (int i = 0; i < NC; i++) {
        struct qslab_cache_stats st;
        CHECK(qslab_cache_stats(cache[i], &st) == 0);
        CHECKF(st.remote_batch == 0 && st.claim == 0 && st.queued_objs == 0,
               "%s: %lu batches, %lu claims, %lu queued (SLUB has none)", cname[i], st.remote_batch,
               st.claim, st.queued_objs);
        CHECKF(st.free_slow > 0 && st.remote_free == st.free_slow, "%s: %lu slow frees, %lu remote",
               cname[i], st.free_slow, st.remote_free);
        if (i == CTOR)
            CHECKF(__atomic_load_n(&ctor_runs, __ATOMIC_RELAXED) >= st.num_objs,
                   "constructor ran %lu times, %lu objects in slabs", ctor_runs, st.num_objs);
        /* every owner's active and partial slabs back: nothing held */
        qslab_cache_shrink(cache[i]);
        CHECK(qslab_cache_stats(cache[i], &st) == 0);
        CHECKF(st.num_slabs == 0 && st.empty_slabs == 0 && st.num_objs == 0,
               "%s after the last shrink: %lu slabs (%lu empty), %lu objects", cname[i],
               st.num_slabs, st.empty_slabs, st.num_objs);
        /* counted exactly, validates, destroyed (stamp.h) */
        stamp_check_end(cache[i], cname[i], made[i], km, km0, i == 0 ? nkinds - NC : 0,
                        i == 0 ? km_made : 0);
    }
    return tu_done();
}
