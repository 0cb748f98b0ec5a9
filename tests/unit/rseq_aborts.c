/*
 * unit: every restartable sequence of the per-CPU queues is restarted, many
 * times, and comes out right.  A thread pinned to one CPU runs each section
 * in a loop while a per-thread timer signals it every 50..100 us (the
 * handler only counts): the alloc and free fast paths, and the slow paths'
 * batch operations (push, pop, replace the slots, swap the open batch).
 * Each phase must see restarts (counted per thread in qs_self.rseq_aborts),
 * and the queue must hold exactly what the phase put there.  The test runs
 * itself again with QSLAB_OWNER=cpu, so it checks the CPU owner whatever
 * the suite's mode; it passes with a note where the kernel has no rseq.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "front/fastpath.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

static volatile sig_atomic_t ticks;
static void on_tick(int sig)
{
    (void)sig;
    ticks++;
}

/* A per-thread timer: SIGRTMIN at this thread every `us` microseconds. */
static bool start_timer(long us, timer_t *t)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGRTMIN, &sa, NULL);
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGRTMIN;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &ev, t) != 0)
        return false;
    struct itimerspec it = {{0, us * 1000}, {0, us * 1000}};
    return timer_settime(*t, 0, &it, NULL) == 0;
}

/* Run a phase's loop body in runs of 256 between clock reads (the clock
 * would otherwise take most of the time, and few signals would land inside
 * the short sections): PHASE_S seconds, longer (up to PHASE_MAX_S) until
 * WANT restarts were seen.  The timer counts CLOCK_MONOTONIC: while the
 * thread waits for its CPU the expiries come as one signal, so on a loaded
 * machine far fewer land a second (a make test at load average 59 on 2
 * vCPUs: 9 restarts of the open batch swap in its 2 s, the cap then). */
#define PHASE(a0)                                                                                  \
    for (double t0_ = tu_now();                                                                    \
         tu_now() - t0_ < PHASE_S || (aborts() - (a0) < WANT && tu_now() - t0_ < PHASE_MAX_S);)    \
        for (int r_ = 0; r_ < 256; r_++)

#define PHASE_S 0.25    /* seconds per phase, longer until enough restarts */
/* at most: four phases, and the run again under QSLAB_OWNER=cpu, 160 s, below ctest's 300 */
#define PHASE_MAX_S 20
#define WANT 20         /* restarts each phase must see */

static unsigned long aborts(void)
{
    return qs_self.rseq_aborts;
}

int main(int argc, char **argv)
{
    if (!tf_cpu_owner("rseq_aborts", argc, argv))
        return tu_done();
    tu_pin_one_cpu();
    qslab_cache *c = qslab_cache_create("t-rseq-aborts", 64, 0, 0, NULL);
    CHECK(c != NULL);
    tf_pin_slqb("t-rseq-aborts"); /* SLQB's per-CPU queues */
    void *p = qslab_cache_alloc(c); /* the CPU's queue exists now */
    qslab_cache_free(c, p);
    struct qs_queue *q = qs_queue_of(c);
    CHECK(q != NULL && q->cpu >= 0);
    if (!q)
        return tu_done();
    timer_t t;
    CHECK(start_timer(50 + (long)(tu_seed(1) % 50), &t));

    /* fast paths: alloc + free pairs (the objects come back stamped) */
    unsigned long a0 = aborts(), pairs = 0;
    PHASE(a0) {
        void *o[4];
        for (int i = 0; i < 4; i++)
            o[i] = qslab_cache_alloc(c);
        for (int i = 0; i < 4; i++)
            qslab_cache_free(c, o[i]);
        pairs += 4;
    }
    unsigned long fast = aborts() - a0;

    /* slow paths' sections, under the queue's lock as the slow paths run
     * them: push n then pop n (the same objects back, in order) */
    enum { B = 64 };
    void *objs[B], *back[B];
    for (int i = 0; i < B; i++)
        objs[i] = qslab_cache_alloc(c);
    qs_lock_acquire(&q->lock);
    qs_percpu_pop(q, back, QS_TOP_NR(q->top)); /* start empty: */
    unsigned keep = QS_TOP_NR(q->top);          /* (what the pop left: 0) */
    CHECK(keep == 0);
    unsigned long a1 = aborts(), rounds = 0, wrong = 0;
    PHASE(a1) {
        rounds++;
        int k = qs_percpu_push(q, objs, B, q->cap);
        int m = qs_percpu_pop(q, back, B);
        wrong += k != (int)(q->cap < B ? q->cap : B) || m != k || memcmp(back, objs, (size_t)m * sizeof(void *));
    }
    unsigned long batch = aborts() - a1;
    CHECKF(wrong == 0, "push/pop: %lu of %lu rounds moved the wrong objects", wrong, rounds);

    /* replacing the slots (what a growth does), with objects in them */
    int k = qs_percpu_push(q, objs, B, q->cap);
    CHECK(k > 0);
    unsigned long a2 = aborts(), swaps = 0, swfail = 0;
    void **alt = qs_meta_alloc(((size_t)q->cap + 1) * sizeof(void *)), **cur = q->slots - 1;
    PHASE(a2) {
        swaps++;
        swfail += qs_percpu_swap_slots(q, alt + 1) != 0;
        void **tmp = cur;
        cur = alt;
        alt = tmp;
    }
    unsigned long swap = aborts() - a2;
    CHECKF(swfail == 0, "%lu slot replacements failed", swfail);
    CHECKF(q->slots == cur + 1 && QS_TOP_NR(q->top) == (unsigned)k &&
               !memcmp(q->slots, objs, (size_t)k * sizeof(void *)),
           "after %lu slot replacements the queue does not hold its %d objects", swaps, k);
    qs_meta_free(alt, ((size_t)q->cap + 1) * sizeof(void *));
    CHECK(qs_percpu_pop(q, back, B) == k);

    /* the open batch's word: swap it back and forth (closed while we hold it) */
    unsigned long a3 = aborts(), fbs = 0, fbwrong = 0;
    uint64_t w = QS_FB_PACK(objs[0], 0), old = 0;
    PHASE(a3) {
        fbs++;
        fbwrong += qs_percpu_swap_fb(q, w, &old) != 0 || old != 0;
        fbwrong += qs_percpu_swap_fb(q, 0, &old) != 0 || old != w;
    }
    unsigned long fb = aborts() - a3;
    CHECKF(fbwrong == 0, "open batch swaps: %lu of %lu wrong", fbwrong, fbs);
    qs_lock_release(&q->lock);
    timer_delete(t);

    for (int i = 0; i < B; i++)
        qslab_cache_free(c, objs[i]);
    fprintf(stderr,
            "rseq_aborts: %ld signals; restarts: fast paths %lu (%lu pairs), push/pop %lu (%lu rounds), "
            "slots %lu (%lu swaps), open batch %lu (%lu swaps)\n",
            (long)ticks, fast, pairs, batch, rounds, swap, swaps, fb, fbs);
    CHECKF(fast >= WANT, "fast paths restarted %lu times", fast);
    CHECKF(batch >= WANT, "push/pop restarted %lu times", batch);
    CHECKF(swap >= WANT, "slot replacement restarted %lu times", swap);
    CHECKF(fb >= WANT, "open batch swap restarted %lu times", fb);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
