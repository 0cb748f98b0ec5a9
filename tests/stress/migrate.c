/*
 * Migration torture: 16 threads per allowed CPU, each moving itself to another
 * CPU of the allowed set (sched_setaffinity, chosen at random with a fixed
 * seed, never the CPU it is on) every 1 to 8 operations, while it allocates and frees objects of a
 * cache and kmalloc objects of 16 to 512 bytes.  Objects also pass between
 * threads through a lock-protected exchange, so that many frees are
 * cross-thread (and, once queues are per CPU, cross-CPU).
 *
 * Every object is stamped over its whole size at allocation (word 0 its
 * address, word 1 a tag holding the thread id and a sequence number, the rest
 * derived from both) and checked against the expected tag, kept apart from
 * the object, before it is freed: an object handed to two owners, or written
 * by the allocator while live, is caught.  At the end every object has been
 * freed, the caches validate, and their counters match what the threads did.
 *
 * With one allowed CPU the test still runs (hopping is then a no-op) and says
 * so on stderr.  Deterministic seeds: one xorshift state per thread (the
 * interleaving still varies from run to run).
 */
#define _GNU_SOURCE /* CPU affinity, sched_getcpu */
#include <pthread.h>
#include <sched.h>
#include <qslab.h>

#include "../testutil.h"
#include "stamp.h"

#define THREADS_PER_CPU 16
#define MAX_THREADS 4096 /* past 256 CPUs, 4096 threads (the tag has 16 bits for the thread) */
#define LOCAL 64         /* objects a thread holds */
#define XCH 256          /* exchange slots */
#define BURST 32
#define OBJ_SIZE 104 /* the test cache */

struct worker {
    pthread_t t;
    struct stamp_tally tl; /* tl.id: the thread's number */
    unsigned long ops, hops, moves, hop_errors;
    struct obj local[LOCAL];
};

static qslab_cache *cache;
static int *cpus, ncpus;
static cpu_set_t **one_cpu; /* one_cpu[k]: the set of cpus[k] alone */
static size_t setsize;
static struct stamp_slot xch[XCH];

/* ---- objects (stamp.h) ---- */

static int new_object(struct worker *w, uint64_t *seed, int kind, struct obj *o)
{
    o->kind = (uint32_t)kind;
    if (kind == K_CACHE) {
        o->size = OBJ_SIZE;
        o->p = qslab_cache_alloc(cache);
    } else {
        o->size = stamp_km_size(seed);
        o->p = qslab_malloc(o->size);
    }
    return stamp_made(&w->tl, o);
}

/* Check and free; a broken object is leaked (it is reported). */
static void free_object(struct worker *w, struct obj *o, const char *where)
{
    if (!o->p)
        return;
    if (stamp_freeing(&w->tl, o, where)) {
        if (o->kind == K_CACHE)
            qslab_cache_free(cache, o->p);
        else
            qslab_free(o->p);
    }
    o->p = NULL;
}

/* ---- hopping ---- */

static void hop(struct worker *w, uint64_t *seed)
{
    int before = sched_getcpu();
    int k = (int)(tu_rand(seed) % (uint64_t)ncpus);
    if (cpus[k] == before) /* always a move, when there is somewhere to go */
        k = (k + 1) % ncpus;
    int cpu = cpus[k];
    if (sched_setaffinity(0, setsize, one_cpu[k]) != 0) {
        if (w->hop_errors++ == 0)
            tu_fail("thread %d: sched_setaffinity(CPU %d): %s", w->tl.id, cpu, strerror(errno));
    } else {
        w->hops++;
        if (sched_getcpu() != before)
            w->moves++;
    }
}

/* ---- the worker ---- */

static int ops_per_thread;

static void *run(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = tu_seed((uint64_t)w->tl.id + 7000);
    int until_hop = 1 + (int)(tu_rand(&seed) % 8);
    for (int it = 0; it < ops_per_thread; it++) {
        uint64_t r = tu_rand(&seed);
        unsigned op = r % 100;
        int kind = (r >> 8) & 1;
        struct obj *slot = &w->local[(r >> 16) % LOCAL];
        if (op < 45) { /* allocate into a local slot */
            free_object(w, slot, "replaced");
            new_object(w, &seed, kind, slot);
        } else if (op < 62) { /* free a local object */
            free_object(w, slot, "local free");
        } else if (op < 92) { /* swap with the exchange: give ours, take another thread's */
            if (!slot->p && !new_object(w, &seed, kind, slot))
                continue;
            struct obj got = stamp_swap(&xch[(r >> 24) % XCH], *slot);
            slot->p = NULL;
            if (got.p) {
                if ((r >> 40) % 3) /* mostly freed here: a cross-thread free */
                    free_object(w, &got, "taken from the exchange");
                else if (stamp_verify(&got, w->tl.id, &w->tl.bad, "kept from the exchange"))
                    *slot = got; /* freed later, by this thread or the next */
            }
        } else { /* a burst, freed in an order of its own */
            struct obj v[BURST];
            int n = 1 + (int)((r >> 24) % BURST);
            for (int i = 0; i < n; i++)
                if (!new_object(w, &seed, kind, &v[i]))
                    v[i].p = NULL;
            if ((r >> 40) & 1) /* LIFO */
                for (int i = n - 1; i >= 0; i--)
                    free_object(w, &v[i], "burst");
            else /* odd indices up, then even ones up */
                for (int pass = 1; pass >= 0; pass--)
                    for (int i = pass; i < n; i += 2)
                        free_object(w, &v[i], "burst");
        }
        w->ops++;
        if (--until_hop == 0) {
            hop(w, &seed);
            until_hop = 1 + (int)(tu_rand(&seed) % 8);
        }
    }
    for (int i = 0; i < LOCAL; i++)
        free_object(w, &w->local[i], "thread end");
    return NULL;
}

/* ---- main ---- */

int main(void)
{
    /* The allowed CPUs (sets larger than cpu_set_t handled). */
    cpu_set_t *allowed = NULL;
    size_t ncap = 1024;
    for (;;) {
        allowed = CPU_ALLOC(ncap);
        setsize = CPU_ALLOC_SIZE(ncap);
        if (sched_getaffinity(0, setsize, allowed) == 0)
            break;
        CPU_FREE(allowed);
        if (errno != EINVAL || ncap >= (1u << 20)) {
            tu_fail("sched_getaffinity: %s", strerror(errno));
            return tu_done();
        }
        ncap *= 2;
    }
    ncpus = CPU_COUNT_S(setsize, allowed);
    cpus = calloc((size_t)ncpus, sizeof *cpus);
    one_cpu = calloc((size_t)ncpus, sizeof *one_cpu);
    CHECK(cpus != NULL && one_cpu != NULL && ncpus > 0);
    if (!cpus || !one_cpu || ncpus <= 0)
        return tu_done();
    for (size_t c = 0, k = 0; c < ncap && k < (size_t)ncpus; c++)
        if (CPU_ISSET_S(c, setsize, allowed)) {
            cpus[k] = (int)c;
            one_cpu[k] = CPU_ALLOC(ncap);
            if (!one_cpu[k]) {
                tu_fail("CPU_ALLOC");
                return tu_done();
            }
            CPU_ZERO_S(setsize, one_cpu[k]);
            CPU_SET_S(c, setsize, one_cpu[k]);
            k++;
        }
    CPU_FREE(allowed);
    if (ncpus == 1)
        fprintf(stderr, "migrate: only one CPU (%d) is allowed: hopping is a no-op, the test runs anyway\n",
                cpus[0]);

    int nthreads = THREADS_PER_CPU * ncpus;
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;
    ops_per_thread = (int)tu_scale_debug(TU_SCALE(30000, 4), 3);

    cache = qslab_cache_create("t-migrate", OBJ_SIZE, 0, 0, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return tu_done();
    qslab_cache *km[STAMP_NKM];
    struct qslab_cache_stats km0[STAMP_NKM];
    if (!stamp_kmalloc_caches(km, km0))
        return tu_done();
    stamp_slots_init(xch, XCH);

    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    CHECK(w != NULL);
    if (!w)
        return tu_done();
    double t0 = tu_now();
    int started = 0;
    for (int i = 0; i < nthreads; i++, started++) {
        w[i].tl.id = i;
        int e = pthread_create(&w[i].t, NULL, run, &w[i]);
        if (e) {
            tu_fail("pthread_create %d of %d: %s", i, nthreads, strerror(e));
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(w[i].t, NULL);

    /* Drain the exchange from this thread: more cross-thread frees. */
    struct worker mainw = {.tl.id = -1};
    for (int i = 0; i < XCH; i++)
        free_object(&mainw, &xch[i].o, "exchange drain");
    double secs = tu_now() - t0;

    struct stamp_tally sum = mainw.tl;
    unsigned long ops = 0, hops = 0, moves = 0, hop_errors = 0;
    for (int i = 0; i < started; i++) {
        stamp_tally_add(&sum, &w[i].tl);
        ops += w[i].ops;
        hops += w[i].hops;
        moves += w[i].moves;
        hop_errors += w[i].hop_errors;
    }
    stamp_tally_check(&sum);
    CHECKF(hop_errors == 0, "%lu sched_setaffinity calls failed", hop_errors);
    if (ncpus > 1)
        CHECKF(hops > 0 && moves > 0, "%lu hops, %lu of them changed CPU", hops, moves);

    stamp_check_end(cache, "t-migrate", sum.allocs[K_CACHE], km, km0, STAMP_NKM, sum.allocs[K_KMALLOC]);

    fprintf(stderr,
            "migrate: %d threads on %d CPUs, %.2f s: %lu ops, %lu cache + %lu kmalloc objects, %lu cross-thread "
            "frees, %lu hops (%lu changed CPU), 0 signals\n",
            started, ncpus, secs, ops, sum.allocs[K_CACHE], sum.allocs[K_KMALLOC], sum.xfrees, hops, moves);
    free(w);
    for (int k = 0; k < ncpus; k++)
        CPU_FREE(one_cpu[k]);
    free(one_cpu);
    free(cpus);
    return tu_done();
}
