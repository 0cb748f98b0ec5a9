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
 * Usage: bench_fronts [--list] [--fronts A,B] [--sizes 64,256,...] [--tests T,...]
 *                     [--objs N] [--rounds N] [--cpus N] [--groups G] [--senders S]
 *                     [--receivers R] [--loops M] [--hb-rounds N] [--ipc pipe|socket]
 *                     [--head BYTES] [--sample-ms MS] [--pipe-bytes N]
 */
#define _GNU_SOURCE
#include "bench.h"
#include "cacheloops.h"
#include "patterns.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <qslab.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Memory readings */

struct mem {
    long rss, anon; /* KiB */
};

/* statm: resident and shared (file-backed) pages; resident - shared is the
 * anonymous part.  Cheap, but read from counters the kernel updates in
 * per-CPU batches (off by up to some 64 pages per CPU). */
static struct mem mem_statm(void)
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
static struct mem mem_now(void)
{
    struct mem m = {0, 0};
    if (bench_smaps_kib(&m.rss, &m.anon) == 0)
        return m;
    return mem_statm();
}

/* The base and the most seen since, for a test and for a whole front end. */
struct mem_track {
    struct mem base, peak;
};

static struct mem_track test_mem, front_mem;

static void track_begin(struct mem_track *t)
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
static void sample_peak_with(struct mem m)
{
    track(&test_mem, m);
    track(&front_mem, m);
}

static void sample_peak(void)
{
    sample_peak_with(mem_now());
}

/* ------------------------------------------------------------------------
 * Threads: pinned workers for the slub patterns (worker 0 is the main
 * thread), unpinned ones for hackbench.  Each kind sleeps on its own channel
 * until the main thread posts a job (a job of NULL: exit), so that a pattern
 * runs with nobody else awake. */

struct chan {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned long seq; /* jobs posted */
    void (*job)(void *self);
};

static void chan_post(struct chan *c, void (*job)(void *self))
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

static struct chan worker_chan = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};
static struct chan hb_chan = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};

/* Fault in the part of a thread's stack the tests use, before any base. */
#define STACK_TOUCH (32 * 1024)

static NOINLINE void touch_stack(void)
{
    volatile char buf[STACK_TOUCH];
    for (size_t i = 0; i < sizeof(buf); i += 1024)
        buf[i] = 0;
}

/* ------------------------------------------------------------------------
 * The slub_test patterns (patterns.h, slub.c's, with the cache API's loops
 * of cacheloops.h; a peak sample when every object of a round is
 * allocated, in every pattern) */

enum { HACKBENCH = NR_PATTERNS, NR_TESTS }; /* the tests: the patterns, then hackbench */

static const char *const test_name[NR_TESTS] = {
    "batch", "pair", "batch_all", "pair_all", "remote", "ring", "hackbench",
};

static qslab_cache *cache; /* the cache under test */
static long size;          /* its object size */
static long nr_objs = 10000, nr_rounds = 5, nr_cpus;
static void start_round(void);
static void worker_alloc(struct worker *w);
static void worker_free(struct worker *w, struct worker *owner);
static void worker_pairs(struct worker *w);
/* the pattern under test; pt.cpus: workers taking part, 1 or nr_cpus */
static struct patterns pt = {.alloc_objs = worker_alloc,
                             .free_objs = worker_free,
                             .alloc_free_pairs = worker_pairs,
                             .sample_peak = sample_peak,
                             .sample_all = 1,
                             .start_round = start_round};

static void worker_alloc(struct worker *w)
{
    w->alloc_ticks += alloc_objs(cache, w->objs, nr_objs);
    if (pt.pattern == REMOTE || pt.pattern == RING)
        for (long i = 0; i < nr_objs; i++)
            *(volatile long *)w->objs[i] = i;
    w->allocs += nr_objs;
}

/* Free the objects `owner` allocated; the time counts for the caller `w`. */
static void worker_free(struct worker *w, struct worker *owner)
{
    w->free_ticks += free_objs(cache, owner->objs, nr_objs);
    w->frees += nr_objs;
}

static void worker_pairs(struct worker *w)
{
    w->alloc_ticks += alloc_free_pairs(cache, nr_objs); /* the pair's cost is booked as "alloc" */
    w->allocs += nr_objs;
}

static void job_round(void *self)
{
    struct worker *w = self;
    if (w->id < pt.cpus)
        round_step(&pt, w);
}

/* The "after" step: each worker that took part flushes its queue of the
 * cache (per-CPU queues: every CPU's at once), twice: the first pass sends
 * the frees of other threads' objects home, where the second finds them. */
static void job_shrink(void *self)
{
    struct worker *w = self;
    if (w->id >= pt.cpus)
        return;
    for (int pass = 0; pass < 2; pass++) {
        qslab_cache_shrink(cache);
        bench_barrier_wait(&pt.barrier);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned long seen = 0;

    bench_pin(w->id);
    touch_stack();
    for (;;) {
        void (*job)(void *) = chan_wait(&worker_chan, &seen);
        if (!job)
            return NULL;
        job(w);
    }
}

/* patterns.h's start of a round: the other workers taking part wake up. */
static void start_round(void)
{
    if (pt.cpus > 1)
        chan_post(&worker_chan, job_round);
}

static void shrink_workers(void)
{
    if (pt.cpus > 1)
        chan_post(&worker_chan, job_shrink);
    job_shrink(&pt.workers[0]);
}

/* ------------------------------------------------------------------------
 * Results */

static void result_head(const char *tname, const char *front, long sz)
{
    bench_result_str("test", tname);
    bench_result_str("front", front);
    bench_result("size", (double)sz);
}

/* Peak and after of the test now ending, minus its base. */
static void result_mem(struct mem after)
{
    bench_result("anon_peak_kib", (double)(test_mem.peak.anon - test_mem.base.anon));
    bench_result("anon_after_kib", (double)(after.anon - test_mem.base.anon));
    bench_result("rss_peak_kib", (double)(test_mem.peak.rss - test_mem.base.rss));
    bench_result("rss_after_kib", (double)(after.rss - test_mem.base.rss));
}

static void run_pattern(enum pattern t, const char *front)
{
    pt.pattern = t;
    pt.cpus = (t == BATCH || t == PAIR) ? 1 : (int)nr_cpus;
    bench_barrier_init(&pt.barrier, (unsigned)pt.cpus);

    double *alloc_c = bench_map(sizeof(double) * 3 * (size_t)nr_rounds);
    double *free_c = alloc_c + nr_rounds, *faults = free_c + nr_rounds;

    track_begin(&test_mem);
    measure_rounds(&pt, nr_rounds, alloc_c, free_c, faults);
    shrink_workers();
    struct mem after = mem_now();

    long live = 0; /* threads whose objects are all live at the peak sample */
    if (t == BATCH)
        live = 1;
    else if (t == BATCH_ALL || t == RING)
        live = pt.cpus;
    else if (t == REMOTE)
        live = pt.cpus - 1;
    result_head(test_name[t], front, size);
    result_costs(alloc_c, free_c, faults, nr_rounds);
    bench_result("live_kib", (double)live * (double)nr_objs * (double)size / 1024);
    result_mem(after);
    bench_result_end();
    bench_unmap(alloc_c, sizeof(double) * 3 * (size_t)nr_rounds);
}

/* ------------------------------------------------------------------------
 * hackbench */

struct hb_thread {
    pthread_t tid;
    int group, index; /* index: the sender's or receiver's number in its group */
    bool sender;
    double end; /* bench_now() when done */
};

/* What a sender stamps on a message; the receiver checks it. */
struct hb_head {
    uint64_t stamp;
    void *data;
};

struct hb_rec { /* what goes through the pipe */
    struct hb_head *head;
    char *data;
};

#define HB_READ_RECS 64 /* records a receiver reads at most at once */

static long hb_groups = 2, hb_senders = 4, hb_receivers = 4, hb_loops = 10000, hb_rounds = 3;
static long head_size = 256, sample_ms = 5, pipe_bytes = 4096;
static int hb_use_socket;
static int nr_hb; /* hackbench threads: groups x (senders + receivers) */
static struct hb_thread *hb_threads;
static int (*hb_fds)[2]; /* receiver r of group g: [g * R + r], [0] read, [1] write */
static qslab_cache *head_cache;
static pthread_barrier_t hb_barrier; /* the hackbench threads and the main thread */
static _Atomic int hb_arrived, hb_done;
static _Atomic uint64_t hb_t0_bits; /* start time (double), set by the last to arrive */

static uint64_t hb_stamp(unsigned sender, unsigned long seq)
{
    return ((uint64_t)sender << 40 | seq) * 0x9E3779B97F4A7C15ULL;
}

/* The data buffer's first 8 bytes carry the stamp, its last 8 (from 16
 * bytes up) the stamp's complement. */
static void data_stamp(char *d, uint64_t s)
{
    uint64_t t = ~s;
    memcpy(d, &s, 8);
    if (size >= 16)
        memcpy(d + size - 8, &t, 8);
}

static bool data_ok(const char *d, uint64_t s)
{
    uint64_t a, b = ~s;
    memcpy(&a, d, 8);
    if (size >= 16)
        memcpy(&b, d + size - 8, 8);
    return a == s && b == ~s;
}

static NOINLINE void hb_send(struct hb_thread *t)
{
    unsigned me = (unsigned)(t->group * hb_senders + t->index);
    qslab_cache *hc = head_cache, *dc = cache;

    for (long l = 0; l < hb_loops; l++) {
        for (long r = 0; r < hb_receivers; r++) {
            struct hb_rec rec;
            rec.head = qslab_cache_alloc(hc);
            rec.data = qslab_cache_alloc(dc);
            if (!rec.head || !rec.data)
                bench_die("qslab_cache_alloc failed");
            uint64_t s = hb_stamp(me, (unsigned long)(l * hb_receivers + r));
            rec.head->stamp = s;
            rec.head->data = rec.data;
            data_stamp(rec.data, s);
            ssize_t n;
            while ((n = write(hb_fds[t->group * hb_receivers + r][1], &rec, sizeof(rec))) < 0 &&
                   errno == EINTR)
                ;
            if (n != (ssize_t)sizeof(rec))
                bench_die("hackbench: write to receiver: %s", n < 0 ? strerror(errno) : "short");
        }
    }
}

static NOINLINE void hb_receive(struct hb_thread *t)
{
    struct hb_rec buf[HB_READ_RECS];
    size_t have = 0; /* bytes in buf */
    long expect = hb_senders * hb_loops, got = 0;
    int fd = hb_fds[t->group * hb_receivers + t->index][0];
    qslab_cache *hc = head_cache, *dc = cache;

    while (got < expect) {
        ssize_t n = read(fd, (char *)buf + have, sizeof(buf) - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bench_die("hackbench: read: %s", n < 0 ? strerror(errno) : "end of file");
        have += (size_t)n;
        size_t k = have / sizeof(buf[0]);
        for (size_t i = 0; i < k; i++) {
            struct hb_head *h = buf[i].head;
            if (h->data != buf[i].data || !data_ok(buf[i].data, h->stamp))
                bench_die("hackbench: message with a bad stamp");
            qslab_cache_free(dc, buf[i].data);
            qslab_cache_free(hc, h);
        }
        got += (long)k;
        have -= k * sizeof(buf[0]); /* a stream socket may split a record */
        memmove(buf, (char *)buf + k * sizeof(buf[0]), have);
    }
}

/* The start of a run: the last of the hackbench threads and the main
 * thread to arrive reads the clock, before anyone may pass the barrier. */
static void hb_start(void)
{
    if (atomic_fetch_add(&hb_arrived, 1) + 1 == nr_hb + 1) {
        double now = bench_now();
        uint64_t bits;
        memcpy(&bits, &now, sizeof(bits));
        atomic_store(&hb_t0_bits, bits);
    }
    pthread_barrier_wait(&hb_barrier);
}

static void job_hb_run(void *self)
{
    struct hb_thread *t = self;

    hb_start();
    if (t->sender)
        hb_send(t);
    else
        hb_receive(t);
    t->end = bench_now();
    atomic_fetch_add(&hb_done, 1);
}

/* As job_shrink, for the hackbench threads and the main thread. */
static void job_hb_shrink(void *self)
{
    (void)self;
    for (int pass = 0; pass < 2; pass++) {
        qslab_cache_shrink(cache);
        qslab_cache_shrink(head_cache);
        pthread_barrier_wait(&hb_barrier);
    }
}

static void *hb_main(void *arg)
{
    struct hb_thread *t = arg;
    unsigned long seen = 0;

    touch_stack();
    for (;;) {
        void (*job)(void *) = chan_wait(&hb_chan, &seen);
        if (!job)
            return NULL;
        job(t);
    }
}

/* One run; returns its wall time.  The main thread samples memory while the
 * threads work, and counts as the barrier's last member. */
static double hb_round(void)
{
    atomic_store(&hb_arrived, 0);
    atomic_store(&hb_done, 0);
    chan_post(&hb_chan, job_hb_run);
    hb_start();
    while (atomic_load(&hb_done) < nr_hb) {
        bench_sleep_ms(sample_ms);
        sample_peak_with(mem_statm());
    }
    double t0, t1 = 0;
    uint64_t bits = atomic_load(&hb_t0_bits);
    memcpy(&t0, &bits, sizeof(t0));
    for (int i = 0; i < nr_hb; i++)
        if (hb_threads[i].end > t1)
            t1 = hb_threads[i].end;
    return t1 - t0;
}

static void run_hackbench(const char *front)
{
    double *secs = bench_map(sizeof(double) * 2 * (size_t)hb_rounds);
    double *faults = secs + hb_rounds;

    track_begin(&test_mem);
    hb_round(); /* warm-up */
    for (long r = 0; r < hb_rounds; r++) {
        long flt = bench_minflt();
        secs[r] = hb_round();
        faults[r] = (double)(bench_minflt() - flt);
    }
    chan_post(&hb_chan, job_hb_shrink);
    job_hb_shrink(NULL);
    struct mem after = mem_now();

    double msgs = (double)hb_groups * (double)hb_senders * (double)hb_receivers * (double)hb_loops;
    double s = bench_median(secs, (int)hb_rounds);
    result_head("hackbench", front, size);
    bench_result("secs", s);
    bench_result("msgs_per_s", s > 0 ? msgs / s : 0);
    bench_result("msgs", msgs);
    bench_result("minflt", bench_median(faults, (int)hb_rounds));
    result_mem(after);
    bench_result_end();
    bench_unmap(secs, sizeof(double) * 2 * (size_t)hb_rounds);
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
static void warm_probes(void)
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

static void job_warm_worker(void *self)
{
    (void)self;
    warm_probes();
    bench_barrier_wait(&pt.barrier);
}

static void job_warm_hb(void *self)
{
    (void)self;
    warm_probes();
    pthread_barrier_wait(&hb_barrier);
}

static void warm_up(bool hackbench)
{
    pt.cpus = (int)nr_cpus;
    bench_barrier_init(&pt.barrier, (unsigned)nr_cpus);
    if (nr_cpus > 1)
        chan_post(&worker_chan, job_warm_worker);
    job_warm_worker(NULL);
    if (hackbench) {
        chan_post(&hb_chan, job_warm_hb);
        pthread_barrier_wait(&hb_barrier);
    }
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
        hb_loops < 1 || hb_rounds < 1 || head_size < (long)sizeof(struct hb_head) || sample_ms < 1)
        bench_die("need positive counts and --head of at least %zu bytes", sizeof(struct hb_head));

    /* hackbench's threads first: they keep the process's CPU set, the main
     * thread pins itself below */
    if (run[HACKBENCH]) {
        nr_hb = (int)(hb_groups * (hb_senders + hb_receivers));
        hb_threads = bench_map(sizeof(*hb_threads) * (size_t)nr_hb);
        hb_fds = bench_map(sizeof(*hb_fds) * (size_t)(hb_groups * hb_receivers));
        for (long i = 0; i < hb_groups * hb_receivers; i++) {
            int r = hb_use_socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, hb_fds[i])
                                  : pipe2(hb_fds[i], O_CLOEXEC);
            if (r != 0)
                bench_die("%s: %s", hb_use_socket ? "socketpair" : "pipe", strerror(errno));
            if (!hb_use_socket && pipe_bytes > 0 &&
                fcntl(hb_fds[i][1], F_SETPIPE_SZ, (int)pipe_bytes) < 0)
                bench_die("F_SETPIPE_SZ %ld: %s", pipe_bytes, strerror(errno));
        }
        if (pthread_barrier_init(&hb_barrier, NULL, (unsigned)nr_hb + 1) != 0)
            bench_die("pthread_barrier_init failed");
        int k = 0;
        for (long g = 0; g < hb_groups; g++)
            for (long j = 0; j < hb_senders + hb_receivers; j++, k++) {
                struct hb_thread *t = &hb_threads[k];
                t->group = (int)g;
                t->sender = j < hb_senders;
                t->index = (int)(t->sender ? j : j - hb_senders);
                if (pthread_create(&t->tid, NULL, hb_main, t) != 0)
                    bench_die("pthread_create failed");
            }
    }
    pt.workers = bench_map(sizeof(*pt.workers) * (size_t)nr_cpus);
    for (int i = 0; i < nr_cpus; i++) {
        pt.workers[i].id = i;
        pt.workers[i].objs = bench_map(sizeof(void *) * (size_t)nr_objs);
        memset(pt.workers[i].objs, 0, sizeof(void *) * (size_t)nr_objs); /* fault it in */
    }
    bench_pin(0);
    touch_stack();
    for (int i = 1; i < nr_cpus; i++)
        if (pthread_create(&pt.workers[i].tid, NULL, worker_main, &pt.workers[i]) != 0)
            bench_die("pthread_create failed");
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

    chan_post(&worker_chan, NULL);
    for (int i = 1; i < nr_cpus; i++)
        pthread_join(pt.workers[i].tid, NULL);
    if (run[HACKBENCH]) {
        chan_post(&hb_chan, NULL);
        for (int i = 0; i < nr_hb; i++)
            pthread_join(hb_threads[i].tid, NULL);
    }
    return 0;
}
