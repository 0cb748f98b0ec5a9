/*
 * bench_prodcons: the netperf UDP_STREAM story of the SLQB discussion (2009).
 * A sender allocates a 4,696-byte buffer (what __alloc_skb asked kmalloc for
 * a 4 KiB datagram) and a 256-byte head (skbuff_head_cache), copies the
 * payload in, and queues the message; a receiver copies the payload out and
 * frees both.  Every free is of memory another thread allocated.
 *
 *   --mode stream  --pairs P producer/consumer pairs, each with its own
 *                  bounded queue of --depth messages (a socket buffer).
 *                  --pin split: pair k's producer on CPU 2k, its consumer on
 *                  CPU 2k+1; same: both on CPU k; none: unpinned.
 *   --mode batch   one thread allocates batches of --batch messages and
 *                  hands each whole batch to a second thread, which frees it
 *                  while the next one is built (one more batch may wait in
 *                  the queue); --pin as above, one pair.
 *
 * A warm-up of a tenth of --msgs messages runs first; then --msgs messages
 * (per pair) are timed.  The result line gives msgs_per_s (all pairs),
 * peak_rss_kib (VmHWM of the whole run) and minflt (page faults, timed part).
 *
 * Usage: bench_prodcons [--mode stream|batch] [--pairs P] [--pin split|same|none]
 *                       [--msgs N] [--depth N] [--batch N] [--payload BYTES]
 */
#define _GNU_SOURCE
#include "bench.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DATA_SIZE 4696 /* kmalloc size of a 4 KiB UDP datagram's skb data */
#define HEAD_SIZE 256  /* sizeof(struct sk_buff) then: skbuff_head_cache */

struct msg {
    struct msg *next; /* batch mode: the next message of the batch */
    char *data;
    size_t len;
    uint64_t seq;
};

/*
 * A bounded single-producer single-consumer queue of pointers.  Each side
 * spins briefly when it cannot go on, then sleeps on the other side's index
 * (a futex); the other side wakes it after moving its index.  The sleeper
 * announces itself in `sleeping` before its last check, and the waker reads
 * `sleeping` after its index store (both sequentially consistent), so one of
 * the two sees the other: no wake-up is lost.
 */
struct chan {
    _Alignas(64) _Atomic uint32_t tail; /* written by the producer */
    _Atomic int consumer_sleeping;
    _Alignas(64) _Atomic uint32_t head; /* written by the consumer */
    _Atomic int producer_sleeping;
    _Alignas(64) uint32_t depth; /* a power of two */
    void **slot;
};

static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#define SPINS 200

/* Wait until *word != seen: spin a little, then sleep on the futex. */
static void wait_for(_Atomic uint32_t *word, uint32_t seen, _Atomic int *sleeping)
{
    for (int i = 0; i < SPINS; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return;
        _mm_pause();
    }
    atomic_store(sleeping, 1);
    while (atomic_load(word) == seen)
        futex_wait(word, seen);
    atomic_store_explicit(sleeping, 0, memory_order_relaxed);
}

static void chan_send(struct chan *c, void *p)
{
    uint32_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
    uint32_t h;

    while (t - (h = atomic_load_explicit(&c->head, memory_order_acquire)) == c->depth)
        wait_for(&c->head, h, &c->producer_sleeping);
    c->slot[t & (c->depth - 1)] = p;
    atomic_store(&c->tail, t + 1);
    if (atomic_load(&c->consumer_sleeping))
        futex_wake(&c->tail);
}

static void *chan_recv(struct chan *c)
{
    uint32_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
    uint32_t t;

    while ((t = atomic_load_explicit(&c->tail, memory_order_acquire)) == h)
        wait_for(&c->tail, t, &c->consumer_sleeping);
    void *p = c->slot[h & (c->depth - 1)];
    atomic_store(&c->head, h + 1);
    if (atomic_load(&c->producer_sleeping))
        futex_wake(&c->head);
    return p;
}

enum { STREAM, BATCH };

struct pair {
    pthread_t producer, consumer;
    int producer_cpu, consumer_cpu; /* CPU index to pin to, or -1 */
    struct chan chan;
    long msgs;         /* messages to send in this phase */
    uint64_t checksum; /* consumer's sum over the payloads it read */
};

static int mode = STREAM;
static long payload = 4096, batch_len = 10000;
static char *source; /* the "user buffer" copied into each message */

static NOINLINE struct msg *new_msg(uint64_t seq)
{
    struct msg *m = malloc(HEAD_SIZE);
    char *data = malloc(DATA_SIZE);

    if (!m || !data)
        bench_die("malloc failed");
    memcpy(data, source, (size_t)payload);
    m->data = data;
    m->len = (size_t)payload;
    m->seq = seq;
    m->next = NULL;
    return m;
}

/* Read the payload out (copy_to_user), then free the message. */
static NOINLINE uint64_t consume_msg(struct msg *m, char *sink)
{
    uint64_t sum = m->seq;

    memcpy(sink, m->data, m->len);
    sum += (unsigned char)sink[0] + (unsigned char)sink[m->len - 1];
    free(m->data);
    free(m);
    return sum;
}

static void *producer_main(void *arg)
{
    struct pair *p = arg;

    if (p->producer_cpu >= 0)
        bench_pin(p->producer_cpu);
    if (mode == STREAM) {
        for (long i = 0; i < p->msgs; i++)
            chan_send(&p->chan, new_msg((uint64_t)i));
        return NULL;
    }
    for (long sent = 0; sent < p->msgs;) {
        struct msg *first = NULL, **link = &first;
        for (long k = 0; k < batch_len && sent < p->msgs; k++, sent++) {
            *link = new_msg((uint64_t)sent);
            link = &(*link)->next;
        }
        chan_send(&p->chan, first);
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct pair *p = arg;
    char *sink = bench_map((size_t)payload);

    if (p->consumer_cpu >= 0)
        bench_pin(p->consumer_cpu);
    for (long got = 0; got < p->msgs;) {
        struct msg *m = chan_recv(&p->chan);
        do {
            struct msg *next = mode == BATCH ? m->next : NULL;
            p->checksum += consume_msg(m, sink);
            got++;
            m = next;
        } while (m);
    }
    bench_unmap(sink, (size_t)payload);
    return NULL;
}

/* Run every pair through `msgs` messages; returns the wall time. */
static double run_phase(struct pair *pairs, long nr_pairs, long msgs)
{
    double t0 = bench_now();

    for (long i = 0; i < nr_pairs; i++) {
        pairs[i].msgs = msgs;
        if (pthread_create(&pairs[i].consumer, NULL, consumer_main, &pairs[i]) ||
            pthread_create(&pairs[i].producer, NULL, producer_main, &pairs[i]))
            bench_die("pthread_create failed");
    }
    for (long i = 0; i < nr_pairs; i++) {
        pthread_join(pairs[i].producer, NULL);
        pthread_join(pairs[i].consumer, NULL);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    const char *mode_arg = "stream", *pin = "split";
    long nr_pairs = 1, msgs = 200000, depth = 256;
    const struct bench_opt opts[] = {
        {"mode", NULL, &mode_arg},   {"pairs", &nr_pairs, NULL}, {"pin", NULL, &pin},
        {"msgs", &msgs, NULL},       {"depth", &depth, NULL},    {"batch", &batch_len, NULL},
        {"payload", &payload, NULL},
    };

    bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                "[--mode stream|batch] [--pairs P] [--pin split|same|none] [--msgs N] "
                "[--depth N] [--batch N] [--payload BYTES]");
    if (strcmp(mode_arg, "stream") == 0)
        mode = STREAM;
    else if (strcmp(mode_arg, "batch") == 0)
        mode = BATCH, nr_pairs = 1, depth = 1;
    else
        bench_die("unknown --mode %s", mode_arg);
    if (strcmp(pin, "split") && strcmp(pin, "same") && strcmp(pin, "none"))
        bench_die("unknown --pin %s", pin);
    if (nr_pairs < 1 || msgs < 1 || batch_len < 1 || payload < 1 || payload > DATA_SIZE ||
        depth < 1 || depth > (1L << 20) || (depth & (depth - 1)))
        bench_die("bad counts (depth must be a power of two, payload at most %d)", DATA_SIZE);

    source = bench_map((size_t)payload);
    memset(source, 'x', (size_t)payload);
    struct pair *pairs = bench_map(sizeof(*pairs) * (size_t)nr_pairs);
    for (long i = 0; i < nr_pairs; i++) {
        struct pair *p = &pairs[i];
        p->chan.depth = (uint32_t)depth;
        p->chan.slot = bench_map(sizeof(void *) * (size_t)depth);
        p->producer_cpu = p->consumer_cpu = -1;
        if (strcmp(pin, "split") == 0) {
            p->producer_cpu = (int)(2 * i);
            p->consumer_cpu = (int)(2 * i + 1);
        } else if (strcmp(pin, "same") == 0) {
            p->producer_cpu = p->consumer_cpu = (int)i;
        }
    }

    run_phase(pairs, nr_pairs, msgs / 10 > 0 ? msgs / 10 : 1); /* warm-up */
    long flt = bench_minflt();
    double secs = run_phase(pairs, nr_pairs, msgs);
    flt = bench_minflt() - flt;

    uint64_t check = 0;
    for (long i = 0; i < nr_pairs; i++)
        check += pairs[i].checksum;
    if (check == 0)
        bench_die("consumers read nothing");

    bench_result("msgs_per_s", (double)(msgs * nr_pairs) / secs);
    bench_result("peak_rss_kib", (double)bench_peak_rss_kib());
    bench_result("minflt", (double)flt);
    bench_result_end();
    return 0;
}
