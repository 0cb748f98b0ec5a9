/*
 * bench_cache: an object-cache workload.  The object is a 512-byte
 * connection: a mutex, two list heads, counters and a buffer, with an
 * expensive "constructed" state (lock initialised, lists empty, counters and
 * buffer zero).  A request takes a connection, uses it (sets its id, takes a
 * reference, links it, writes a 64-byte header into the buffer, counts),
 * and gives it back.
 *
 *   --api cache   qslab_cache_create with a constructor: the constructed
 *                 state is built once per object, when its slab is made; a
 *                 user puts back what it changed before qslab_cache_free.
 *   --api malloc  the nearest equivalent elsewhere: malloc + full
 *                 initialisation on every allocation, pthread_mutex_destroy
 *                 + free (run under each allocator with LD_PRELOAD).
 *
 *   --pattern pair   --objs requests one after the other
 *   --pattern batch  --objs connections taken, then all given back
 *
 * Result: cycles (TSC ticks) per request, median of --rounds rounds after
 * one warm-up round; minflt, page faults per round.
 *
 * Usage: bench_cache --api cache|malloc --pattern pair|batch [--objs N] [--rounds N]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <pthread.h>
#include <qslab.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct list {
    struct list *next, *prev;
};

struct conn {
    pthread_mutex_t lock;
    struct list link;    /* on the "active" list while in use */
    struct list waiters; /* empty in the constructed state */
    uint64_t id, refs, flags;
    uint64_t counters[16];
    char buf[512 - 40 - 2 * sizeof(struct list) - 19 * sizeof(uint64_t)];
};
_Static_assert(sizeof(struct conn) == 512, "struct conn is 512 bytes");

#define HEADER 64 /* bytes of buf a request writes */

static void list_init(struct list *l)
{
    l->next = l->prev = l;
}

static void list_add(struct list *l, struct list *head)
{
    l->next = head->next;
    l->prev = head;
    head->next->prev = l;
    head->next = l;
}

static void list_del_init(struct list *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    list_init(l);
}

/* The constructed state. */
static void conn_ctor(void *p)
{
    struct conn *c = p;

    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    list_init(&c->link);
    list_init(&c->waiters);
}

static struct list active;
static qslab_cache *conn_cache;
static int use_cache;

static inline struct conn *conn_get(uint64_t id)
{
    struct conn *c;

    if (use_cache) {
        c = qslab_cache_alloc(conn_cache);
    } else {
        c = malloc(sizeof(*c));
        if (c)
            conn_ctor(c);
    }
    if (!c)
        bench_die("allocation failed");
    c->id = id;
    c->refs = 1;
    list_add(&c->link, &active);
    memset(c->buf, (int)(id & 0xff), HEADER);
    c->counters[id % 16]++;
    return c;
}

/* Give a connection back; the cache path restores the constructed state. */
static inline void conn_put(struct conn *c)
{
    list_del_init(&c->link);
    if (use_cache) {
        c->counters[c->id % 16] = 0;
        memset(c->buf, 0, HEADER);
        c->id = c->refs = 0;
        qslab_cache_free(conn_cache, c);
    } else {
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
}

static long nr_objs = 10000;
static struct conn **conns;

static NOINLINE void pairs(void)
{
    for (long i = 0; i < nr_objs; i++)
        conn_put(conn_get((uint64_t)i));
}

static NOINLINE void batch(void)
{
    for (long i = 0; i < nr_objs; i++)
        conns[i] = conn_get((uint64_t)i);
    for (long i = 0; i < nr_objs; i++)
        conn_put(conns[i]);
}

int main(int argc, char **argv)
{
    const char *api = NULL, *pattern = NULL;
    long nr_rounds = 5;
    const struct bench_opt opts[] = {
        {"api", NULL, &api},
        {"pattern", NULL, &pattern},
        {"objs", &nr_objs, NULL},
        {"rounds", &nr_rounds, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "--api cache|malloc --pattern pair|batch [--objs N] [--rounds N]");
    if (!api || (strcmp(api, "cache") && strcmp(api, "malloc")))
        bench_die("need --api cache or malloc");
    if (!pattern || (strcmp(pattern, "pair") && strcmp(pattern, "batch")))
        bench_die("need --pattern pair or batch");
    if (nr_objs < 1 || nr_rounds < 1)
        bench_die("need positive --objs and --rounds");

    use_cache = strcmp(api, "cache") == 0;
    if (use_cache) {
        conn_cache =
            qslab_cache_create("conn", sizeof(struct conn), 0, QSLAB_HWCACHE_ALIGN, conn_ctor);
        if (!conn_cache)
            bench_die("qslab_cache_create failed");
    }
    list_init(&active);
    conns = bench_map(sizeof(*conns) * (size_t)nr_objs);
    void (*run)(void) = strcmp(pattern, "pair") == 0 ? pairs : batch;
    double *ticks = bench_map(sizeof(double) * 2 * (size_t)nr_rounds);
    double *faults = ticks + nr_rounds;

    bench_pin(0);
    run(); /* warm-up */
    for (long r = 0; r < nr_rounds; r++) {
        long flt = bench_minflt();
        uint64_t t0 = tsc_begin();
        run();
        uint64_t t1 = tsc_end();
        ticks[r] = (double)(t1 - t0) / (double)nr_objs;
        faults[r] = (double)(bench_minflt() - flt);
    }

    bench_result("cycles", bench_median(ticks, (int)nr_rounds));
    bench_result("minflt", bench_median(faults, (int)nr_rounds));
    bench_result_end();
    if (use_cache && qslab_cache_destroy(conn_cache) != 0)
        bench_die("qslab_cache_destroy failed");
    return 0;
}
