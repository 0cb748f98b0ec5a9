/*
 * owner_memory_probe.c - the C half of scripts/owner_memory.py: reads the
 * tunables the library gives a cache under each front end, and drives one
 * cache's per-owner and per-node structures to their bounds under
 * QSLAB_FAKE_NUMA to measure what the library then holds.
 *
 * Built by owner_memory.py against a build directory's libqslab.a:
 *     cc -O2 -std=gnu11 -pthread -Isrc -Iinclude \
 *        scripts/owner_memory_probe.c scripts/owner_memory_workloads.c \
 *        BUILD/libqslab.a
 * Besides the public API it includes src/front/front.h (and so src/core/internal.h),
 * read only: for the sizes of struct qs_queue and struct qs_node and, in
 * check mode, for what each structure holds (the cache's queues and nodes,
 * read once every worker is idle: the library's own counts, beside its
 * statistics) and for SLOB's arena.
 *
 * Modes (every line printed is "kind key=value ...", parsed by the script;
 * exit status 2 with a message on stderr when something fails):
 *
 *   params FRONT SPEC...
 *       SPEC is name:size[:align][:hw] (hw: QSLAB_HWCACHE_ALIGN).  Each
 *       cache is created as "om-<name>", switched to FRONT with
 *       qslab_tune(name, "front", FRONT) before its first allocation, and
 *       its tunables are read back with qslab_tune_get, its order, slot
 *       size and objects per slab with qslab_cache_stats.
 *
 *   check FRONT
 *       One cache of 256-byte objects under FRONT.  Starts (CPUs + 2)
 *       threads pinned round-robin to the CPUs this process may use; the
 *       threads that share an owner (a CPU with per-CPU queues, else each
 *       thread) run the per-owner routine one after the other, the owner's
 *       "lead" last, so that the last run sets the final state.  Every job
 *       runs alone (the main thread hands jobs out one at a time), so the
 *       final state is deterministic.  Then it prints the statistics, the
 *       anonymous RSS delta (/proc/self/smaps_rollup) and the breakdown.
 *       Run it with QSLAB_PURGE=0: the purger would otherwise empty idle
 *       CPUs' queues and stashes and reap SLAB's arrays while we measure
 *       (this measures the bound, before any reclaim).
 *
 * The routines of check mode are in owner_memory_workloads.c, with a word
 * on each; owner_memory_probe.h is what the two files share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <qslab.h>

/* struct qs_queue, struct qs_node and qslab_cache's fields: the sizes, and
 * what each structure holds (read only, once the workers are idle); SLOB's
 * arena (front.h), whose pages SLOB's caches share */
#include "front/front.h"

#include "owner_memory_probe.h"

#define EXTRA_THREADS 2 /* threads beyond the CPUs */

void die(const char *what)
{
    fprintf(stderr, "owner_memory_probe: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* ---- tunables of a cache, read from the library ---- */

static const char *const attrs[] = {"hiwater",     "freebatch",   "stash_bytes", "empty_limit",
                                    "empty_decay_ms", "cpu_partial", "min_partial", "limit",
                                    "batchcount",  "shared"};
_Static_assert(sizeof(attrs) / sizeof(attrs[0]) == NR_ATTRS, "NR_ATTRS: the tunables in attrs");

unsigned long attr(const struct params *p, const char *name)
{
    for (unsigned i = 0; i < NR_ATTRS; i++)
        if (!strcmp(attrs[i], name))
            return p->v[i];
    abort();
}

static void read_params(qslab_cache *c, struct params *p)
{
    struct qslab_cache_stats st;
    if (qslab_cache_stats(c, &st) != 0)
        die("qslab_cache_stats");
    for (unsigned i = 0; i < NR_ATTRS; i++)
        if (qslab_tune_get(qslab_cache_name(c), attrs[i], &p->v[i]) != 0)
            die(attrs[i]);
    p->slot = st.slot_size;
    p->size = st.object_size;
    p->order = st.order;
    p->objs = st.objs_per_slab;
}

static void print_params(qslab_cache *c, const char *front)
{
    struct params p;
    read_params(c, &p);
    printf("cache name=%s front=%s size=%zu slot=%zu order=%u objs=%u", qslab_cache_name(c), front,
           p.size, p.slot, p.order, p.objs);
    for (unsigned i = 0; i < NR_ATTRS; i++)
        printf(" %s=%lu", attrs[i], p.v[i]);
    printf("\n");
}

static qslab_cache *make_cache(const char *name, size_t size, size_t align, unsigned long flags,
                               const char *front)
{
    qslab_cache *c = qslab_cache_create(name, size, align, flags, NULL);
    if (!c)
        die(name);
    /* the front end is chosen before the cache's first allocation */
    if (qslab_tune(name, "front", front) != 0)
        die("qslab_tune front");
    if (strcmp(qslab_cache_front(c), front) != 0) {
        fprintf(stderr, "owner_memory_probe: %s is %s, not %s\n", name, qslab_cache_front(c), front);
        exit(2);
    }
    return c;
}

/* The owner budget (src/front/slqb/budget.c): the process's, one for every cache. */
unsigned long owner_budget(void)
{
    unsigned long v;
    if (qslab_tune_get("*", "owner_budget", &v) != 0)
        die("qslab_tune_get owner_budget");
    return v;
}

static void print_machine(void)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    printf("machine nodes=%d owner=%s nr_cpu_ids=%d online=%ld", qslab_num_nodes(),
           oi.kind == QSLAB_OWNER_CPU ? "cpu" : "thread", oi.nr_cpu_ids,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf(" sizeof_queue=%zu sizeof_node=%zu", sizeof(struct qs_queue), sizeof(struct qs_node));
    /* the owner budget, and the pages SLOB's arena keeps empty (its
     * empty_limit: pages of the process, not per node) */
    printf(" owner_budget=%lu slob_empty_limit=%u", owner_budget(),
           QS_LOAD(qs_slob_arena.empty_limit));
    printf("\n");
}

static int params_mode(const char *front, int n, char **specs)
{
    qslab_cache *cs[256];
    if (n > 256)
        n = 256;
    for (int i = 0; i < n; i++) {
        /* name:size[:align][:hw] */
        char buf[128], name[64];
        snprintf(buf, sizeof buf, "%s", specs[i]);
        char *save = NULL, *tok = strtok_r(buf, ":", &save);
        char *sz = strtok_r(NULL, ":", &save);
        if (!tok || !sz) {
            fprintf(stderr, "owner_memory_probe: bad spec %s (name:size[:align][:hw])\n", specs[i]);
            return 2;
        }
        size_t size = strtoul(sz, NULL, 10), align = 0;
        unsigned long flags = 0;
        for (char *t; (t = strtok_r(NULL, ":", &save));) {
            if (!strcmp(t, "hw"))
                flags |= QSLAB_HWCACHE_ALIGN;
            else
                align = strtoul(t, NULL, 10);
        }
        snprintf(name, sizeof name, "om-%s", tok);
        cs[i] = make_cache(name, size, align, flags, front);
    }
    print_machine();
    for (int i = 0; i < n; i++)
        print_params(cs[i], front);
    return 0;
}

/* ---- check mode: workers, one job at a time ---- */

struct worker workers[MAX_THREADS];
int nthreads, nnodes, percpu;
static int ncpus, cpus[MAX_THREADS];
qslab_cache *cache;
struct params P;
size_t slab_bytes;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        die("pin");
    for (;;) {
        sem_wait(&w->go);
        if (!w->job)
            return NULL;
        w->job(w);
        sem_post(&w->done);
    }
}

void run_on(struct worker *w, void (*job)(struct worker *))
{
    w->job = job;
    sem_post(&w->go);
    while (sem_wait(&w->done) != 0 && errno == EINTR)
        ;
}

/* Run job on every owner's threads, the lead of each owner last. */
void run_owner_routine(void (*job)(struct worker *))
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nthreads; i++)
            if (workers[i].lead == (pass == 1))
                run_on(&workers[i], job);
}

void *must_alloc(void)
{
    void *p = qslab_cache_alloc(cache);
    if (!p)
        die("alloc");
    memset(p, 0x5a, CHECK_SIZE);
    return p;
}

void *must_alloc_node(int node)
{
    void *p = qslab_cache_alloc_node(cache, node);
    if (!p)
        die("alloc_node");
    memset(p, 0x5a, CHECK_SIZE);
    return p;
}

/* the warm-up, on another cache: each CPU's owner and its tables exist
 * before the baseline (they do not depend on the cache measured).  Its
 * objects are big (WARM_SIZE: slabs of order 5), so that it leaves the page
 * layer's order-0 chunks (the check's and SLOB's) to the workload. */
#define WARM_SIZE (128 << 10)
static qslab_cache *warm;
static void job_warm(struct worker *w)
{
    void *p = qslab_cache_alloc(warm);
    qslab_cache_free(warm, p);
    w->node = qslab_current_node();
}


/* Possible CPUs (/sys/devices/system/cpu/possible: the last id + 1), as
 * the library's qs_os_cpu_possible counts them; read before the baseline
 * (stdio mallocs). */
static long possible_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    char buf[256];
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f)) {
            char *last = strrchr(buf, ',');
            last = last ? last + 1 : buf;
            char *dash = strchr(last, '-');
            n = strtol(dash ? dash + 1 : last, NULL, 10) + 1;
        }
        fclose(f);
    }
    return n;
}
long ncpu_possible;

/* ---- measurement ---- */

/* Anonymous resident memory of the process, in KiB. */
static long anon_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Anonymous: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static size_t live_objects(void)
{
    size_t n = 0;
    for (int i = 0; i < nthreads; i++)
        n += workers[i].nbuf + workers[i].nkeep;
    return n;
}

/* What each structure holds, read from the cache once every worker is idle
 * (no lock is needed for a quiescent cache; the counts are the library's). */
static void print_breakdown(void)
{
    qslab_cache *c = cache;
    unsigned long queues = 0, qobjs = 0, stash = 0, transit_objs = 0, inbox = 0, slots = 0;
    unsigned long alien = 0, active_slabs = 0, cpu_partial = 0;
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        queues++;
        qobjs += QS_TOP_NR(q->top);
        stash += q->nr_stash;
        inbox += q->inbox.nr;
        slots += q->cap;
        for (int k = 0; k < QS_PENDING; k++)
            transit_objs += q->pending[k].n;
        transit_objs += QS_FB_N(q->fb);
        if (q->alien)
            for (int n = 0; n < qs_nr_nodes; n++)
                alien += (uintptr_t)q->alien[(size_t)n * (ALIEN_LIMIT + 1)];
        active_slabs += q->sl.slab != NULL;
        cpu_partial += q->sl.nr_partial;
        /* one line per queue (owner) */
        printf("queue cpu=%d node=%d nr=%u cap=%u grant=%u budget_used=%lu stash_slabs=%u fb=%u "
               "pending=%lu,%lu,%lu,%lu inbox=%lu nr_partial=%u\n",
               q->cpu, q->node, QS_TOP_NR(q->top), q->cap, q->grant,
               q->owner ? q->owner->budget_used : 0, q->nr_stash, QS_FB_N(q->fb),
               q->pending[0].n, q->pending[1].n, q->pending[2].n, q->pending[3].n, q->inbox.nr,
               q->sl.nr_partial);
    }
    unsigned long fifo = 0, node_partial = 0, node_full = 0, shared = 0, free_objects = 0,
                  free_slabs = 0;
    for (int n = 0; n < qs_nr_nodes; n++) {
        struct qs_node *nd = &c->nodes[n];
        fifo += qs_node_nr_empty(nd);
        node_partial += nd->list.nr_partial;
        node_full += nd->list.nr_full;
        shared += nd->shared_avail;
        free_objects += nd->free_objects;
        free_slabs += nd->nr_free_slabs;
    }
    printf("detail queues=%lu queue_objs=%lu slots_cap=%lu stash_slabs=%lu transit_objs=%lu "
           "inbox_objs=%lu alien_objs=%lu active_slabs=%lu cpu_partial_slabs=%lu fifo_slabs=%lu "
           "node_partial_slabs=%lu node_full_slabs=%lu shared_objs=%lu node_free_objs=%lu "
           "node_free_slabs=%lu\n",
           queues, qobjs, slots, stash, transit_objs, inbox, alien, active_slabs, cpu_partial, fifo,
           node_partial, node_full, shared, free_objects, free_slabs);
}

static int check_mode(const char *front)
{
    /* the CPUs this process may use */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        die("sched_getaffinity");
    for (int i = 0; i < CPU_SETSIZE && ncpus < MAX_THREADS - EXTRA_THREADS; i++)
        if (CPU_ISSET(i, &set))
            cpus[ncpus++] = i;
    nthreads = ncpus + EXTRA_THREADS;
    nnodes = qslab_num_nodes();
    ncpu_possible = possible_cpus();
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    percpu = oi.kind == QSLAB_OWNER_CPU;

    warm = qslab_cache_create("om-warm", WARM_SIZE, 0, 0, NULL);
    cache = make_cache("om-check", CHECK_SIZE, 0, 0, front);
    read_params(cache, &P);
    slab_bytes = (size_t)4096 << P.order;

    for (int i = 0; i < nthreads; i++) {
        struct worker *w = &workers[i];
        w->idx = i;
        w->cpu = cpus[i % ncpus];
        /* the lead of an owner: its last thread (per-CPU: the last pinned
         * to that CPU; a thread owner: itself) */
        w->lead = percpu ? i + ncpus >= nthreads : true;
        w->buf = mmap(NULL, BUF_OBJS * sizeof(void *), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        w->keep = mmap(NULL, BUF_OBJS * sizeof(void *), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w->buf == MAP_FAILED || w->keep == MAP_FAILED)
            die("mmap");
        memset(w->buf, 0, BUF_OBJS * sizeof(void *)); /* in the baseline */
        memset(w->keep, 0, BUF_OBJS * sizeof(void *));
        sem_init(&w->go, 0, 0);
        sem_init(&w->done, 0, 0);
        if (pthread_create(&w->th, NULL, worker_main, w) != 0)
            die("pthread_create");
    }
    for (int i = 0; i < nthreads; i++)
        run_on(&workers[i], job_warm);
    int owners = 0;
    for (int i = 0; i < nthreads; i++)
        owners += workers[i].lead;

    workloads_touch(); /* the scratch arrays: in the baseline */
    long base = anon_kb();
    /* warm slots (src/core/page.c): empty slabs past a FIFO's empty_limit stay
     * resident in the page layer, no cache's */
    size_t warm_base = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);
    if (!strcmp(front, "slqb"))
        workload_slqb();
    else if (!strcmp(front, "slub"))
        workload_slub();
    else if (!strcmp(front, "slab"))
        workload_slab();
    else
        workload_slob();
    long after = anon_kb();
    size_t warm_after = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);

    struct qslab_cache_stats st;
    qslab_cache_stats(cache, &st);
    print_machine();
    printf("check front=%s nodes=%d threads=%d owners=%d cpus=%d\n", front, nnodes, nthreads,
           owners, ncpus);
    for (int i = 0; i < nthreads; i++)
        printf("worker idx=%d cpu=%d node=%d lead=%d\n", i, workers[i].cpu, workers[i].node,
               workers[i].lead);
    print_params(cache, front);
    printf("stats num_objs=%lu active_objs=%lu queued_objs=%lu empty_slabs=%lu num_slabs=%lu "
           "new_slab=%lu free_slab=%lu slot=%zu objs=%u order=%u live=%zu\n",
           st.num_objs, st.active_objs, st.queued_objs, st.empty_slabs, st.num_slabs, st.new_slab,
           st.free_slab, st.slot_size, st.objs_per_slab, st.order, live_objects());
    struct qslab_cache_stats ar;
    qslab_cache_stats(&qs_slob_arena, &ar); /* SLOB's pages: slabs of its arena */
    printf("arena new_slab=%lu num_slabs=%lu\n", ar.new_slab, ar.num_slabs);
    printf("rss base_kb=%ld after_kb=%ld\n", base, after);
    printf("warm base_b=%zu after_b=%zu\n", warm_base, warm_after);
    print_breakdown();
    if (qslab_cache_validate(cache) != 0)
        printf("validate failed\n");
    fflush(stdout);
    for (int i = 0; i < nthreads; i++) {
        workers[i].job = NULL;
        sem_post(&workers[i].go);
        pthread_join(workers[i].th, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "params"))
        return params_mode(argv[2], argc - 3, argv + 3);
    if (argc == 3 && !strcmp(argv[1], "check"))
        return check_mode(argv[2]);
    fprintf(stderr, "usage: owner_memory_probe params FRONT name:size[:align][:hw]...\n"
                    "       owner_memory_probe check FRONT   (slqb, slub, slab, slob)\n");
    return 2;
}
