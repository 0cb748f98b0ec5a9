/*
 * Signal storm: every allocating thread has its own POSIX timer
 * (timer_create, SIGEV_THREAD_ID) firing every 5 to 20 microseconds, so the
 * thread is interrupted at arbitrary instructions, inside the allocator too.
 * The handler only counts (atomic counters; it never calls the allocator).
 * 2 x CPUs + 2 threads run, for about a second, malloc/free pairs, batches
 * (allocate 1000, free 1000) and cross-thread frees through a lock-protected
 * exchange.
 *
 * The periods are 5 to 20 microseconds where the machine can take that.  A
 * timer signal costs about 20 microseconds in some virtual machines, where a
 * 5 to 20 microsecond timer leaves the thread no time at all (it only takes
 * signals, for minutes).  So the test first measures, on the main thread, the
 * shortest period (640, 320, ... down to 5 us) at which a busy loop keeps at
 * least half its speed, and uses it as the floor of the periods (the summary
 * line says which periods were used).
 *
 * Every object is stamped over its whole size at allocation (word 0 its
 * address, word 1 a tag holding the thread id and a sequence number, the rest
 * derived from both) and checked against the expected tag, kept apart from
 * the object, before it is freed.  The test checks that every thread took at
 * least MIN_SIGNALS signals (it runs on, up to MAX_SECONDS, until each has)
 * and that at the end nothing is in use, the counters match what the threads
 * did and the caches validate.
 *
 * Deterministic seeds: one xorshift state per thread (how many operations
 * fit in the time, and where the signals land, vary from run to run).
 */
#define _GNU_SOURCE /* gettid, SIGEV_THREAD_ID */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"
#include "stamp.h"

#ifndef sigev_notify_thread_id /* glibc < 2.41 lacks the name */
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define RUN_SECONDS 1.0
/* A thread short of MIN_SIGNALS runs on until MAX_SECONDS.  The timers
 * count CLOCK_MONOTONIC: the expiries while a thread waits for a CPU come as
 * one signal (the rest are overruns), so on a loaded machine a thread takes
 * far fewer signals a second than its period says (an ASan run at load
 * average 16 on 2 vCPUs: 740 to 1,000 in 10 s at periods of 800 to 1,120
 * us).  A thread that has its signals still stops at RUN_SECONDS. */
#define MAX_SECONDS 60.0
#define MIN_SIGNALS 1000UL /* per thread */
#define BATCH 1000
#define XCH 256
#define OBJ_SIZE 72 /* the test cache */

struct worker {
    pthread_t t;
    struct stamp_tally tl; /* tl.id: the thread's number */
    long period_ns;
    unsigned long sigs, in_call; /* written by the signal handler (atomics) */
    int in_qslab;                /* 1 while in a qslab call (atomics: the handler reads it) */
    unsigned long ops, timer_errors;
    unsigned long aborts; /* its restartable sequences the kernel restarted */
    double secs;
    struct obj batch[BATCH];
};

static qslab_cache *cache;
static pthread_barrier_t start;
static int sig;
static struct stamp_slot xch[XCH];

/* ---- the handler: counts, nothing else ---- */

static _Thread_local struct worker *me;

static void on_tick(int signo)
{
    struct worker *w = me;
    if (!w)
        return;
    __atomic_add_fetch(&w->sigs, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&w->in_qslab, __ATOMIC_RELAXED))
        __atomic_add_fetch(&w->in_call, 1, __ATOMIC_RELAXED);
}

#define IN_QSLAB(w, call)                                         \
    do {                                                          \
        __atomic_store_n(&(w)->in_qslab, 1, __ATOMIC_RELAXED);    \
        call;                                                     \
        __atomic_store_n(&(w)->in_qslab, 0, __ATOMIC_RELAXED);    \
    } while (0)

/* ---- objects (stamp.h) ---- */

static int new_object(struct worker *w, uint64_t *seed, int kind, struct obj *o)
{
    o->kind = (uint32_t)kind;
    if (kind == K_CACHE) {
        o->size = OBJ_SIZE;
        IN_QSLAB(w, o->p = qslab_cache_alloc(cache));
    } else {
        o->size = stamp_km_size(seed);
        IN_QSLAB(w, o->p = qslab_malloc(o->size));
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
            IN_QSLAB(w, qslab_cache_free(cache, o->p));
        else
            IN_QSLAB(w, qslab_free(o->p));
    }
    o->p = NULL;
}

/* A timer (not armed) that sends sig to the calling thread; 0 or -1. */
static int thread_timer(timer_t *timer)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev.sigev_notify_thread_id = gettid();
    return timer_create(CLOCK_MONOTONIC, &sev, timer);
}

/* ---- the worker ---- */

static void *run(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = tu_seed((uint64_t)w->tl.id + 9000);
    me = w;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);

    timer_t timer;
    int have_timer = thread_timer(&timer) == 0;
    if (!have_timer) {
        w->timer_errors++;
        tu_fail("thread %d: timer_create: %s", w->tl.id, strerror(errno));
    }
    pthread_barrier_wait(&start);
    if (have_timer) {
        struct itimerspec its = {.it_interval = {0, w->period_ns}, .it_value = {0, w->period_ns}};
        if (timer_settime(timer, 0, &its, NULL) != 0) {
            w->timer_errors++;
            tu_fail("thread %d: timer_settime: %s", w->tl.id, strerror(errno));
        }
    }

    double t0 = tu_now(), t = t0;
    for (unsigned long it = 0;; it++) {
        if (it % 64 == 0) {
            t = tu_now() - t0;
            if (t >= MAX_SECONDS ||
                (t >= RUN_SECONDS && __atomic_load_n(&w->sigs, __ATOMIC_RELAXED) >= MIN_SIGNALS))
                break;
        }
        uint64_t r = tu_rand(&seed);
        unsigned op = r % 100;
        int kind = (r >> 8) & 1;
        if (op < 55) { /* a pair */
            struct obj o;
            if (new_object(w, &seed, kind, &o))
                free_object(w, &o, "pair");
        } else if (op < 57) { /* a batch: 1000 allocations, then 1000 frees */
            for (int i = 0; i < BATCH; i++)
                if (!new_object(w, &seed, (int)(tu_rand(&seed) & 1), &w->batch[i]))
                    w->batch[i].p = NULL;
            switch ((r >> 16) % 3) {
            case 0: /* LIFO */
                for (int i = BATCH - 1; i >= 0; i--)
                    free_object(w, &w->batch[i], "batch");
                break;
            case 1: /* FIFO */
                for (int i = 0; i < BATCH; i++)
                    free_object(w, &w->batch[i], "batch");
                break;
            default: /* strided */
                for (int s = 0; s < 7; s++)
                    for (int i = s; i < BATCH; i += 7)
                        free_object(w, &w->batch[i], "batch");
            }
        } else { /* through the exchange: ours goes in, another thread's is freed here */
            struct obj o;
            if (!new_object(w, &seed, kind, &o))
                continue;
            struct obj got = stamp_swap(&xch[(r >> 24) % XCH], o);
            free_object(w, &got, "exchange");
        }
        w->ops++;
    }
    w->secs = tu_now() - t0;
    if (have_timer)
        timer_delete(timer);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    w->aborts = oi.rseq_aborts;
    return NULL;
}

/* ---- calibration: the shortest period a thread survives ---- */

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Busy loop for `cpu` seconds of this thread's CPU time (at most `wall`
 * seconds): its speed, in steps per CPU second. */
static double spin_rate(double cpu, double wall)
{
    volatile unsigned long steps = 0;
    double c0 = cpu_now(), t0 = tu_now(), c;
    while ((c = cpu_now() - c0) < cpu && tu_now() - t0 < wall)
        for (int k = 0; k < 200; k++)
            steps++;
    return c > 0 ? (double)steps / c : 0;
}

/* The shortest period, from 640 us halving down to 5 us, at which the busy
 * loop keeps at least half its speed; *cost_us: the CPU time a signal took at
 * it.  Downwards, because a period far too short can stall the thread for
 * seconds (here, 5 us: the timer re-arms already expired, and the thread
 * takes nothing but signals). */
static long calibrate(double *cost_us)
{
    static struct worker calw;
    timer_t timer;
    *cost_us = 0;
    if (thread_timer(&timer) != 0)
        return 5000; /* the workers will report it */
    me = &calw;
    double base = spin_rate(0.005, 0.05); /* warm up */
    base = spin_rate(0.01, 0.1);
    double again = spin_rate(0.01, 0.1);
    base = again > base ? again : base;
    long best = 5000L << 7;
    for (long period = best; period >= 5000; period /= 2) {
        struct itimerspec on = {.it_interval = {0, period}, .it_value = {0, period}}, off = {{0, 0}, {0, 0}};
        timer_settime(timer, 0, &on, NULL);
        double rate = spin_rate(0.01, 0.1);
        timer_settime(timer, 0, &off, NULL);
        double f = base > 0 ? rate / base : 1;
        if (f < 0.5)
            break;
        best = period;
        *cost_us = (1 - (f > 1 ? 1 : f)) * (double)period / 1000;
    }
    timer_delete(timer);
    me = NULL;
    return best;
}

/* ---- main ---- */

int main(void)
{
    cpu_set_t allowed;
    int ncpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
    if (ncpus <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        ncpus = n > 0 ? (int)n : 1;
    }
    int nthreads = 2 * ncpus + 2;

    /* The handler, and the signal blocked here (and so in every thread until
     * it unblocks it): only the workers' own timers deliver it. */
    sig = SIGRTMIN;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(sig, &sa, NULL) == 0);
    double cost_us;
    long floor_ns = calibrate(&cost_us);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    cache = qslab_cache_create("t-signals", OBJ_SIZE, 0, 0, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return tu_done();
    /* its sections are what the signals must restart, whatever the
     * kmalloc caches' front end (QSLAB_FRONT=slob has no sections) */
    tf_pin_slqb("t-signals");
    qslab_cache *km[STAMP_NKM];
    struct qslab_cache_stats km0[STAMP_NKM];
    if (!stamp_kmalloc_caches(km, km0))
        return tu_done();
    stamp_slots_init(xch, XCH);

    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    CHECK(w != NULL);
    if (!w)
        return tu_done();
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) {
        w[i].tl.id = i;
        w[i].period_ns = 5000 + (long)(i * 7 % 16) * 1000; /* 5 .. 20 us */
        if (floor_ns > 5000) /* this machine cannot take that: floor .. 1.75 x floor */
            w[i].period_ns = floor_ns + floor_ns * (i % 4) / 4;
        int e = pthread_create(&w[i].t, NULL, run, &w[i]);
        if (e) {
            /* The barrier would never open: give up at once. */
            fprintf(stderr, "signals: pthread_create %d of %d: %s\n", i, nthreads, strerror(e));
            return 1;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].t, NULL);

    /* Drain the exchange from this thread: more cross-thread frees. */
    struct worker mainw = {.tl.id = -1};
    for (int i = 0; i < XCH; i++)
        free_object(&mainw, &xch[i].o, "exchange drain");

    struct stamp_tally sum = mainw.tl;
    unsigned long ops = 0, sigs = 0, in_call = 0, smin = (unsigned long)-1, smax = 0;
    double secs = 0;
    long pmin = w[0].period_ns, pmax = w[0].period_ns;
    for (int i = 0; i < nthreads; i++) {
        unsigned long s = __atomic_load_n(&w[i].sigs, __ATOMIC_RELAXED);
        stamp_tally_add(&sum, &w[i].tl);
        ops += w[i].ops;
        sigs += s;
        in_call += __atomic_load_n(&w[i].in_call, __ATOMIC_RELAXED);
        smin = s < smin ? s : smin;
        smax = s > smax ? s : smax;
        secs = w[i].secs > secs ? w[i].secs : secs;
        pmin = w[i].period_ns < pmin ? w[i].period_ns : pmin;
        pmax = w[i].period_ns > pmax ? w[i].period_ns : pmax;
        CHECKF(s >= MIN_SIGNALS, "thread %d (timer every %ld us): %lu signals in %.2f s, want at least %lu", i,
               w[i].period_ns / 1000, s, w[i].secs, MIN_SIGNALS);
        CHECKF(w[i].timer_errors == 0, "thread %d: timer not set", i);
    }
    stamp_tally_check(&sum);
    CHECKF(in_call > 0, "of %lu signals none landed inside an allocator call", sigs);
    /* per-CPU queues: signals inside the fast and slow paths' restartable
     * sequences restart them; every thread must have seen that happen */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    unsigned long aborts = 0, least = ~0ul;
    for (int i = 0; i < nthreads; i++) {
        aborts += w[i].aborts;
        if (w[i].aborts < least)
            least = w[i].aborts;
    }
    if (oi.kind == QSLAB_OWNER_CPU && tf_is(cache, "debug"))
        tf_note("stress_signals", cache, "the restarted sections' check (a debug cache has none)");
    else if (oi.kind == QSLAB_OWNER_CPU)
        CHECKF(least > 0, "per-CPU queues: a thread saw no restarted critical section (%lu in all)",
               aborts);
    else
        CHECKF(aborts == 0, "per-thread queues: %lu restarted critical sections", aborts);
    fprintf(stderr, "signals: owner %s; %lu critical sections restarted (at least %lu per thread)\n",
            oi.kind == QSLAB_OWNER_CPU ? "cpu" : "thread", aborts, least);

    stamp_check_end(cache, "t-signals", sum.allocs[K_CACHE], km, km0, STAMP_NKM, sum.allocs[K_KMALLOC]);

    fprintf(stderr,
            "signals: %d threads on %d CPUs, %.2f s: %lu ops, %lu cache + %lu kmalloc objects, %lu cross-thread "
            "frees, %lu signals delivered (per thread %lu..%lu, %lu inside an allocator call; timers every "
            "%ld..%ld us, a signal costs ~%.1f us here), 0 hops\n",
            nthreads, ncpus, secs, ops, sum.allocs[K_CACHE], sum.allocs[K_KMALLOC], sum.xfrees, sigs, smin, smax, in_call,
            pmin / 1000, pmax / 1000, cost_us);
    pthread_barrier_destroy(&start);
    free(w);
    return tu_done();
}
