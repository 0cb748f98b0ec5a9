/*
 * bench_fronts: qslab's front ends side by side, in one process, through the
 * object-cache API (qslab_cache_alloc, qslab_cache_free): the seeds' argument
 * between SLAB, SLUB and SLQB (with SLOB kept for small machines), rerun.
 *
 * Front ends.  At start the driver finds the ones this build has: for each
 * name, in the order slqb, slub, slab, slob, it creates a cache and asks for
 * that front end with qslab_tune(cache, "front", name); a name the library
 * refuses (it says so on stderr) is skipped.  `--list` prints the names
 * found, one per line, and exits.  Before the tests, every thread of the
 * driver allocates and frees one object of each of those caches, so that
 * what the library sets up once per process and per thread (its tables, the
 * page layer's first chunk, a thread's owner state) is in place before any
 * memory is measured.
 *
 * For each front end (--fronts, default every one found, in that order) and
 * each object size (--sizes), the driver creates a cache "f-<front>-<size>"
 * (front end set before its first allocation) and runs the tests (--tests):
 *
 *   batch      one CPU allocates --objs objects, then frees them
 *   pair       one CPU does --objs alloc+free pairs
 *   batch_all  batch on every CPU at once
 *   pair_all   pair on every CPU at once
 *   remote     CPUs 1..n-1 allocate --objs objects each, CPU 0 frees them all
 *   ring       every CPU allocates --objs objects, CPU i frees what CPU i-1
 *              allocated
 *
 * bench_slub's patterns (slub.c) with its method: threads pinned to their own
 * CPUs (thread 0 is the main thread), TSC ticks around each loop, one warm-up
 * round then --rounds measured rounds, medians; objects untouched except in
 * remote and ring, where the allocating thread writes each object's first
 * word after its timed loop.  Single-CPU patterns run on the main thread
 * alone; the other pinned threads sleep on a condition variable meanwhile.
 *
 *   hackbench  after hackbench: --groups groups of --senders senders and
 *              --receivers receivers (threads, unpinned).  Each receiver has
 *              a pipe of --pipe-bytes (default 4096: 256 messages in flight,
 *              about what a hackbench socket holds of its 100-byte messages;
 *              0: the kernel's 64 KiB), or with --ipc socket a Unix stream
 *              socketpair; each sender sends --loops messages to every
 *              receiver of its group.  A message is a 256-byte head (cache
 *              "f-<front>-head", --head) and a data buffer of the size under
 *              test, both allocated by the sender, which stamps them and
 *              writes the two pointers (16 bytes, one write: atomic on a
 *              pipe) to the receiver's pipe; the receiver reads what has
 *              arrived (up to 64 records a read), checks the stamps and frees
 *              both objects: every free is of another thread's object, as
 *              skbs are.  The payload is not copied (hackbench's messages are
 *              100 bytes).  One warm-up run, then --hb-rounds runs; the
 *              result gives the median wall time (secs: from the last thread
 *              to reach the start barrier to the last thread done) and
 *              msgs_per_s.
 *
 * Result lines (bench.h style), one per (test, front end, size):
 *
 *   result test=T front=F size=S alloc= free= total= minflt= live_kib=
 *          anon_peak_kib= anon_after_kib= rss_peak_kib= rss_after_kib=
 *
 * alloc, free, total as bench_slub's (ticks per operation; pair patterns
 * book the pair as alloc, free 0); hackbench has secs, msgs_per_s and msgs
 * instead.  live_kib: the objects' bytes live at the peak (objects x size;
 * 0 for pairs, absent for hackbench).  minflt: page faults per measured
 * round (median).  And one line per front end after its caches are
 * destroyed:
 *
 *   result test=front front=F anon_peak_kib= anon_kept_kib= rss_peak_kib= rss_kept_kib=
 *
 * Memory.  The front ends share one process, so memory is measured as
 * differences: Rss, and its anonymous part, the allocator's own memory (code
 * pages are shared by every front end and are charged to whichever touches
 * them first).  For each test the base is read just before its warm-up
 * round; the peak is sampled when every object of a round is allocated
 * (untimed, between barriers; pair patterns: at the end of the round), the
 * most over all rounds; "after" is read once the last round has freed
 * everything and every thread that used the caches has called
 * qslab_cache_shrink on them, twice (a thread-owned queue is flushed by its
 * own thread only, and the first pass sends the frees of other threads'
 * objects home, where the second finds them).  All are minus the base, in
 * KiB, from /proc/self/smaps_rollup (exact: a walk of the page tables;
 * statm where it is missing).  hackbench's peak is sampled every
 * --sample-ms while it runs, from statm (cheap, but the kernel updates it in
 * per-CPU batches: off by up to some 256 KiB on 2 CPUs), since a page-table
 * walk every few milliseconds would take a good part of a CPU.
 *
 * Each front end runs alone: its caches are shrunk after each test, a
 * size's cache destroyed after its tests and qslab_trim() called (a
 * destroyed cache's slabs stay warm until then), and qslab_trim() is called
 * before the next front end starts, so one front end's memory does not hide another's.  The
 * front end's line gives its peak over all its tests and what it kept once
 * its caches were destroyed, both minus what the process held before it
 * started.  What the driver itself needs (pointer arrays, thread stacks, the
 * stdout buffer) is touched before the first measurement, so it is in every
 * base.  What the library keeps for the process rather than for a cache is
 * charged to the front end that first makes it: the page layer's spare
 * chunk per slab order (its header of slab descriptors stays resident), the
 * purger thread's stack once the library starts it, tables grown at a new
 * peak; some tens of KiB.  bench/run.py rotates the order of the front ends
 * from round to round, so that its medians are not the first one's.
 *
 * The code: this file is the driver (the command line, the front ends, the
 * memory readings, the threads' job channels, the result lines' common
 * fields); fronts_patterns.c runs the slub patterns, fronts_hackbench.c
 * hackbench; fronts.h is what they share.
 *
 * Usage: bench_fronts [--list] [--fronts A,B] [--sizes 64,256,...] [--tests T,...]
 *                     [--objs N] [--rounds N] [--cpus N] [--groups G] [--senders S]
 *                     [--receivers R] [--loops M] [--hb-rounds N] [--ipc pipe|socket]
 *                     [--head BYTES] [--sample-ms MS] [--pipe-bytes N]
 */
#define _GNU_SOURCE
#include "bench.h"
#include "cacheloops.h"
#include "fronts.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <qslab.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const test_name[NR_TESTS] = {
    "batch", "pair", "batch_all", "pair_all", "remote", "ring", "hackbench",
};

qslab_cache *cache; /* the cache under test */
long size;          /* its object size */
long nr_cpus;

/* ------------------------------------------------------------------------
 * Memory readings */

/* statm: resident and shared (file-backed) pages; resident - shared is the
 * anonymous part.  Cheap, but read from counters the kernel updates in
 * per-CPU batches (off by up to some 64 pages per CPU). */
struct mem mem_statm(void)
{
    struct mem m = {0, 0};
    char buf[256];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return m;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return m;
    buf[n] = '\0';
    long size, resident, shared, page_kib = sysconf(_SC_PAGESIZE) / 1024;
    if (sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) == 3) {
        m.rss = resident * page_kib;
        m.anon = (resident - shared) * page_kib;
    }
    return m;
}

/* Exact (smaps_rollup: a walk of the page tables, about a millisecond per
 * 10,000 pages); statm before Linux 4.14. */
struct mem mem_now(void)
{
    struct mem m = {0, 0};
    if (bench_smaps_kib(&m.rss, &m.anon) == 0)
        return m;
    return mem_statm();
}

struct mem_track test_mem, front_mem;

void track_begin(struct mem_track *t)
{
    t->base = t->peak = mem_now();
}

static void track(struct mem_track *t, struct mem m)
{
    if (m.rss > t->peak.rss)
        t->peak.rss = m.rss;
    if (m.anon > t->peak.anon)
        t->peak.anon = m.anon;
}

/* A peak sample: counts for the test and its front end.  Exact, untimed
 * (between barriers) for the slub patterns; statm's reading while
 * hackbench runs, where a page-table walk every few milliseconds would take
 * a good part of a CPU from the threads measured. */
void sample_peak_with(struct mem m)
{
    track(&test_mem, m);
    track(&front_mem, m);
}

void sample_peak(void)
{
    sample_peak_with(mem_now());
}

/* ------------------------------------------------------------------------
 * Threads: pinned workers for the slub patterns (fronts_patterns.c; worker
 * 0 is the main thread), unpinned ones for hackbench (fronts_hackbench.c).
 * Each kind sleeps on its own channel until the main thread posts a job (a
 * job of NULL: exit), so that a pattern runs with nobody else awake. */

void chan_post(struct chan *c, void (*job)(void *self))
{
    pthread_mutex_lock(&c->lock);
    c->job = job;
    c->seq++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Wait for the job after the one *seen; NULL means exit. */
static void (*chan_wait(struct chan *c, unsigned long *seen))(void *)
{
    pthread_mutex_lock(&c->lock);
    while (c->seq == *seen)
        pthread_cond_wait(&c->cond, &c->lock);
    *seen = c->seq;
    void (*job)(void *) = c->job;
    pthread_mutex_unlock(&c->lock);
    return job;
}

/* A thread's loop: run each job posted on c, as `self`, until the exit. */
void chan_serve(struct chan *c, void *self)
{
    unsigned long seen = 0;

    for (;;) {
        void (*job)(void *) = chan_wait(c, &seen);
        if (!job)
            return;
        job(self);
    }
}

/* Fault in the part of a thread's stack the tests use, before any base. */
#define STACK_TOUCH (32 * 1024)

NOINLINE void touch_stack(void)
{
    volatile char buf[STACK_TOUCH];
    for (size_t i = 0; i < sizeof(buf); i += 1024)
        buf[i] = 0;
}

/* ------------------------------------------------------------------------
 * Results */

void result_head(const char *tname, const char *front, long sz)
{
    bench_result_str("test", tname);
    bench_result_str("front", front);
    bench_result("size", (double)sz);
}

/* Peak and after of the test now ending, minus its base. */
void result_mem(struct mem after)
{
    bench_result("anon_peak_kib", (double)(test_mem.peak.anon - test_mem.base.anon));
    bench_result("anon_after_kib", (double)(after.anon - test_mem.base.anon));
    bench_result("rss_peak_kib", (double)(test_mem.peak.rss - test_mem.base.rss));
    bench_result("rss_after_kib", (double)(after.rss - test_mem.base.rss));
}

/* ------------------------------------------------------------------------
 * Front ends and caches */

#define NR_FRONTS 4
static const char *const front_names[NR_FRONTS] = {"slqb", "slub", "slab", "slob"};

/* A cache of `bytes` objects served by front end `front`; NULL if the
 * library refuses that front end (its message is on stderr). */
static qslab_cache *make_cache(const char *front, const char *what, long bytes)
{
    char name[32];
    snprintf(name, sizeof(name), "f-%s-%s", front, what);
    qslab_cache *c = qslab_cache_create(name, (size_t)bytes, 0, 0, NULL);
    if (!c)
        bench_die("qslab_cache_create(%s, %ld) failed: %s", name, bytes, strerror(errno));
    if (qslab_tune(name, "front", front) != 0) {
        qslab_cache_destroy(c);
        return NULL;
    }
    const char *got = qslab_cache_front(c);
    if (!got || strcmp(got, front) != 0)
        bench_die("cache %s: front end %s, not %s", name, got ? got : "(none)", front);
    return c;
}

/* The front ends the library accepts, in front_names order: a probe cache
 * for each, kept for the warm-up. */
static qslab_cache *probe[NR_FRONTS];

static int discover(bool available[NR_FRONTS])
{
    int n = 0;
    for (int i = 0; i < NR_FRONTS; i++) {
        probe[i] = make_cache(front_names[i], "probe", 64);
        available[i] = probe[i] != NULL;
        n += available[i];
    }
    return n;
}

/* The warm-up (see the header): every thread allocates and frees one object
 * of each front end's probe cache and flushes its queue of it, so that what
 * the library sets up per process and per thread is there before the first
 * base is read. */
void warm_probes(void)
{
    for (int i = 0; i < NR_FRONTS; i++) {
        if (!probe[i])
            continue;
        void *p = qslab_cache_alloc(probe[i]);
        if (!p)
            bench_die("front end %s: qslab_cache_alloc failed", front_names[i]);
        qslab_cache_free(probe[i], p);
        qslab_cache_shrink(probe[i]);
    }
}

static void warm_up(bool hackbench)
{
    patterns_warm();
    if (hackbench)
        hackbench_warm();
    for (int i = 0; i < NR_FRONTS; i++)
        if (probe[i])
            destroy_cache(probe[i]);
    qslab_trim();
}

static int front_index(const char *name, size_t len)
{
    for (int i = 0; i < NR_FRONTS; i++)
        if (strlen(front_names[i]) == len && strncmp(front_names[i], name, len) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------------------ */

#define MAX_SIZES 32

static char out_buf[1 << 14]; /* stdout's buffer: not malloc'ed during a test */

int main(int argc, char **argv)
{
    const char *fronts_arg = NULL, *sizes_arg = "64,256,1024,4096", *tests_arg = NULL;
    const char *ipc = "pipe";
    bool list = bench_take_flag(&argc, argv, "--list"); /* bench_parse handles the rest */

    const struct bench_opt opts[] = {
        {"fronts", NULL, &fronts_arg},      {"sizes", NULL, &sizes_arg},
        {"tests", NULL, &tests_arg},        {"objs", &nr_objs, NULL},
        {"rounds", &nr_rounds, NULL},       {"cpus", &nr_cpus, NULL},
        {"groups", &hb_groups, NULL},       {"senders", &hb_senders, NULL},
        {"receivers", &hb_receivers, NULL}, {"loops", &hb_loops, NULL},
        {"hb-rounds", &hb_rounds, NULL},    {"ipc", NULL, &ipc},
        {"head", &head_size, NULL},         {"sample-ms", &sample_ms, NULL},
        {"pipe-bytes", &pipe_bytes, NULL},
    };
    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "[--list] [--fronts A,B] [--sizes 64,256,...] [--tests T,...] [--objs N] "
                "[--rounds N] [--cpus N] [--groups G] [--senders S] [--receivers R] "
                "[--loops M] [--hb-rounds N] [--ipc pipe|socket] [--head BYTES] "
                "[--sample-ms MS] [--pipe-bytes N]");

    memset(out_buf, 0, sizeof(out_buf));
    setvbuf(stdout, out_buf, _IOLBF, sizeof(out_buf));

    bool available[NR_FRONTS];
    int nr_available = discover(available);
    if (list) {
        for (int i = 0; i < NR_FRONTS; i++)
            if (available[i]) {
                printf("%s\n", front_names[i]);
                destroy_cache(probe[i]);
            }
        return 0;
    }
    if (nr_available == 0)
        bench_die("the library accepts none of the front ends slqb, slub, slab, slob");

    /* the front ends to run, in order */
    int order[NR_FRONTS], nr_order = 0;
    if (fronts_arg) {
        for (const char *s = fronts_arg; *s;) {
            size_t len = strcspn(s, ",");
            int f = front_index(s, len);
            if (f < 0)
                bench_die("--fronts: unknown front end %.*s", (int)len, s);
            if (!available[f])
                fprintf(stderr, "%s: front end %s not in this build, skipped\n", bench_name,
                        front_names[f]);
            else if (nr_order < NR_FRONTS)
                order[nr_order++] = f;
            s += len + (s[len] == ',');
        }
    } else {
        for (int i = 0; i < NR_FRONTS; i++)
            if (available[i])
                order[nr_order++] = i;
    }

    long sizes[MAX_SIZES];
    int nr_sizes = bench_parse_sizes(sizes_arg, sizes, MAX_SIZES, (1L << 24));

    bool run[NR_TESTS];
    for (int t = 0; t < NR_TESTS; t++)
        run[t] = tests_arg == NULL;
    for (const char *s = tests_arg; s && *s;) {
        size_t len = strcspn(s, ",");
        int t = 0;
        while (t < NR_TESTS && !(strlen(test_name[t]) == len && strncmp(test_name[t], s, len) == 0))
            t++;
        if (t == NR_TESTS)
            bench_die("--tests: unknown test %.*s", (int)len, s);
        run[t] = true;
        s += len + (s[len] == ',');
    }

    if (nr_cpus == 0 || nr_cpus > bench_ncpus())
        nr_cpus = bench_ncpus();
    if (nr_cpus < 2 && (run[REMOTE] || run[RING])) {
        fprintf(stderr, "%s: remote and ring need 2 CPUs, skipped\n", bench_name);
        run[REMOTE] = run[RING] = false;
    }
    if (strcmp(ipc, "pipe") == 0)
        hb_use_socket = 0;
    else if (strcmp(ipc, "socket") == 0)
        hb_use_socket = 1;
    else
        bench_die("unknown --ipc %s", ipc);
    if (nr_objs < 1 || nr_rounds < 1 || hb_groups < 1 || hb_senders < 1 || hb_receivers < 1 ||
        hb_loops < 1 || hb_rounds < 1 || head_size < (long)hb_head_bytes || sample_ms < 1)
        bench_die("need positive counts and --head of at least %zu bytes", hb_head_bytes);

    /* hackbench's threads first: they keep the process's CPU set, the main
     * thread pins itself below */
    if (run[HACKBENCH])
        hackbench_start();
    patterns_start();
    warm_up(run[HACKBENCH]);

    for (int k = 0; k < nr_order; k++) {
        const char *front = front_names[order[k]];

        track_begin(&front_mem);
        head_cache = NULL;
        if (run[HACKBENCH] && !(head_cache = make_cache(front, "head", head_size)))
            bench_die("front end %s refused for its head cache", front);
        for (int s = 0; s < nr_sizes; s++) {
            char what[24];
            size = sizes[s];
            snprintf(what, sizeof(what), "%ld", size);
            if (!(cache = make_cache(front, what, size)))
                bench_die("front end %s refused for cache f-%s-%s", front, front, what);
            for (int t = 0; t < HACKBENCH; t++)
                if (run[t])
                    run_pattern((enum pattern)t, front);
            if (run[HACKBENCH])
                run_hackbench(front);
            destroy_cache(cache);
            /* its slabs would stay warm (docs/design.md, "Warm slots"), and
             * the next size's test would reuse them inside its own base */
            qslab_trim();
        }
        if (head_cache)
            destroy_cache(head_cache);
        qslab_trim();
        struct mem kept = mem_now();

        bench_result_str("test", "front");
        bench_result_str("front", front);
        bench_result("anon_peak_kib", (double)(front_mem.peak.anon - front_mem.base.anon));
        bench_result("anon_kept_kib", (double)(kept.anon - front_mem.base.anon));
        bench_result("rss_peak_kib", (double)(front_mem.peak.rss - front_mem.base.rss));
        bench_result("rss_kept_kib", (double)(kept.rss - front_mem.base.rss));
        bench_result_end();
    }

    patterns_stop();
    if (run[HACKBENCH])
        hackbench_stop();
    return 0;
}
