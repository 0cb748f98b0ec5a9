/*
 * bench/fronts_hackbench.c - bench_fronts' hackbench: groups of sender and
 * receiver threads (unpinned) over pipes or Unix stream sockets, every
 * message a head and a data buffer from the caches under test, freed by the
 * receiver; the threads sleep on their channel between runs, and the main
 * thread samples memory while they work.  fronts.c describes the test and
 * its result line.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "fronts.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <qslab.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

long hb_groups = 2, hb_senders = 4, hb_receivers = 4, hb_loops = 10000, hb_rounds = 3;
long head_size = 256, sample_ms = 5, pipe_bytes = 4096;
int hb_use_socket;
const size_t hb_head_bytes = sizeof(struct hb_head);
static int nr_hb; /* hackbench threads: groups x (senders + receivers) */
static struct hb_thread *hb_threads;
static int (*hb_fds)[2]; /* receiver r of group g: [g * R + r], [0] read, [1] write */
qslab_cache *head_cache;
static struct chan hb_chan = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};
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

/* As fronts_patterns.c's job_shrink, for the hackbench threads and the
 * main thread. */
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
    touch_stack();
    chan_serve(&hb_chan, arg);
    return NULL;
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

void run_hackbench(const char *front)
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

/* The receivers' pipes (or socketpairs), the barrier and the threads.  They
 * are started before the main thread pins itself (patterns_start), so they
 * keep the process's CPU set. */
void hackbench_start(void)
{
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

static void job_warm(void *self)
{
    (void)self;
    warm_probes();
    pthread_barrier_wait(&hb_barrier);
}

void hackbench_warm(void)
{
    chan_post(&hb_chan, job_warm);
    pthread_barrier_wait(&hb_barrier);
}

void hackbench_stop(void)
{
    chan_post(&hb_chan, NULL);
    for (int i = 0; i < nr_hb; i++)
        pthread_join(hb_threads[i].tid, NULL);
}
