/*
 * Harder bad frees, beyond the simple cases of bad_free.c: a double free
 * after the object went back to its slab (queue flush, shrink), a free of a
 * slot that was never handed out, a pointer into a slab's unused tail.  Each
 * is reported exactly once through a handler that returns, the bad free does
 * nothing, and nothing is handed out twice afterwards.
 */
#include <qslab.h>

#include <pthread.h>
#include <sys/syscall.h>

#include "../cacheutil.h"
#include "../front.h"
#include "../testutil.h"

static qslab_cache *A;

/* The handler was called once, with a one-line message holding the address.
 * (Which words describe these cases is not part of the contract.) */
static void check_reported(const void *p, const char *what)
{
    char s[32];
    CHECKF(tu_capture_calls() == 1 && strstr(tu_fatal_msg, tu_addr(s, p)) && !strchr(tu_fatal_msg, '\n'),
           "%s: handler called %lu times, message \"%s\"", what, tu_capture_calls(), tu_fatal_msg);
    tu_capture_reset();
}

/* Free a, then enough other objects that a is flushed from the queue back
 * to its slab, then free a again. */
static void test_double_free_after_flush(void)
{
    char s[32];
    unsigned long hi = 1024;
    qslab_tune_get("t-hard", "hiwater", &hi);
    int n = (int)hi * 3 + 100;
    void **v = calloc((size_t)n, sizeof *v);
    void *a = qslab_cache_alloc(A);
    for (int i = 0; i < n; i++)
        v[i] = qslab_cache_alloc(A);
    qslab_cache_free(A, a);
    for (int i = 0; i < n; i++)
        qslab_cache_free(A, v[i]);
    qslab_cache_free(A, a);
    /* a CPU's queue (QSLAB_OWNER=cpu) flushes its newest objects when full
     * (SLQB), so a may still be queued: then the second free is caught
     * before a is handed out again */
    if (!tu_capture_calls()) {
        for (int i = 0; i < n; i++)
            v[i] = qslab_cache_alloc(A);
        int times = 0;
        for (int i = 0; i < n; i++)
            times += v[i] == a;
        CHECKF(times <= 1, "a handed out %d times after its double free", times);
        tu_check_fatal("double free", tu_addr(s, a), "t-hard");
        for (int i = 0; i < n; i++)
            qslab_cache_free(A, v[i]);
        CHECK(tc_active(A) == 0);
        tc_check_sane(A, n, 0, 0, "a double free after a queue flush");
        free(v);
        return;
    }
    if (tf_is(A, "slab") && strstr(tu_fatal_msg, "free slab memory")) {
        /* SLAB gives an empty slab back at once past free_limit: a's slab
         * may be gone, and the second free is then one into free memory */
        tu_check_fatal("free slab memory", tu_addr(s, a), "t-hard");
    } else {
        tu_check_fatal("double free", tu_addr(s, a), "t-hard");
    }
    CHECK(tc_active(A) == 0);
    tc_check_sane(A, n, 0, 0, "a double free after a queue flush");
    free(v);
}

/* A slot next to a live object, never handed out. */
static void test_never_allocated_slot(void)
{
    qslab_cache *c = qslab_cache_create("t-hard-slot", 64, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    struct qslab_cache_stats st;
    char *p = qslab_cache_alloc(c);
    qslab_cache_stats(c, &st);
    char *q = p + st.slot_size; /* the next slot of the same slab, or the one before */
    if (st.objs_per_slab < 2)
        q = NULL;
    else if (((uintptr_t)q & ~(((uintptr_t)4096 << st.order) - 1)) != ((uintptr_t)p & ~(((uintptr_t)4096 << st.order) - 1)))
        q = p - st.slot_size;
    if (q) {
        qslab_cache_free(c, q);
        /* the free loads nothing from q (free already, in our queue): it is
         * caught before q is handed out twice */
        enum { N = 300 };
        void *g[N];
        for (int i = 0; i < N; i++)
            g[i] = qslab_cache_alloc(c);
        check_reported(q, "free of a slot never handed out");
        for (int i = 0; i < N; i++)
            for (int j = 0; j < i; j++)
                CHECKF(g[i] != g[j], "slot never handed out: %p handed out twice", g[i]);
        for (int i = 0; i < N; i++)
            qslab_cache_free(c, g[i]);
        CHECK(tc_active(c) == 1);
        tc_check_sane(c, 500, 0, 0, "a free of a slot never handed out");
    }
    qslab_cache_free(c, p);
    CHECK(tu_capture_calls() == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* After a shrink gave the object's slab back, free it again. */
static void test_double_free_after_shrink(void)
{
    qslab_cache *c = qslab_cache_create("t-hard-shrunk", 256, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    void *keep = qslab_cache_alloc(c); /* keeps the cache's memory around */
    void *v[200];
    for (int i = 0; i < 200; i++)
        v[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 200; i++)
        qslab_cache_free(c, v[i]);
    qslab_cache_shrink(c);
    qslab_cache_free(c, v[199]);
    check_reported(v[199], "double free after shrink");
    qslab_free(v[100]);
    check_reported(v[100], "qslab_free after shrink");
    tc_check_sane(c, 500, 0, 0, "a double free after shrink");
    qslab_cache_free(c, keep);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Pointers inside a slab but in no object: the slab's unused tail. */
static void test_slab_tail(void)
{
    /* 1000-byte slots: a 4 KiB slab has a tail of at least 96 bytes. */
    qslab_cache *c = qslab_cache_create("t-hard-tail", 1000, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    struct qslab_cache_stats st;
    char *p = qslab_cache_alloc(c);
    qslab_cache_stats(c, &st);
    size_t slab = (size_t)4096 << st.order;
    char *base = (char *)((uintptr_t)p & ~(uintptr_t)(slab - 1));
    char *tail = base + slab - 8;
    if ((size_t)st.objs_per_slab * st.slot_size <= slab - 8 && (uintptr_t)p >= (uintptr_t)base) {
        qslab_cache_free(c, tail);
        check_reported(tail, "free of a slab's tail");
        qslab_free(tail);
        check_reported(tail, "qslab_free of a slab's tail");
    }
    CHECK(tc_active(c) == 1);
    qslab_cache_free(c, p);
    tc_check_sane(c, 100, 0, 0, "frees of a slab's tail");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Per-CPU queues: another CPU's objects freed on this one join this CPU's
 * open batch for their owner once the queue holds `park` of them (remote.c
 * slqb_percpu_fb_*); an object freed twice in a row there is caught at once. */
enum { REMOTE_N = 600 };
static void *remote_objs[REMOTE_N];
static int pin_to(int cpu)
{
    unsigned long set[16] = {0};
    set[cpu / 64] = 1ul << (cpu % 64);
    return (int)syscall(SYS_sched_setaffinity, 0, sizeof set, set);
}
static void *free_remotely(void *arg)
{
    int cpu = *(int *)arg;
    if (pin_to(cpu) != 0)
        return (void *)1;
    for (int i = 0; i < REMOTE_N; i++)
        qslab_cache_free(A, remote_objs[i]);
    qslab_cache_free(A, remote_objs[REMOTE_N - 1]); /* again, right after */
    return NULL;
}

static unsigned long allowed[16]; /* the CPUs the test may use, before main pins itself */

static void test_double_free_remote_batch(int home)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    unsigned long *set = allowed;
    int other = -1;
    if (oi.kind == QSLAB_OWNER_CPU)
        for (int cpu = 0; cpu < 1024 && other < 0; cpu++)
            if (cpu != home && (set[cpu / 64] >> (cpu % 64) & 1))
                other = cpu;
    if (other < 0) { /* the thread owner, or one CPU: nothing of this kind here */
        fprintf(stderr, "bad_free_hard: remote batch double free: not applicable (%s)\n",
                oi.kind == QSLAB_OWNER_CPU ? "one CPU" : "thread owner");
        return;
    }
    char s[32];
    qslab_cache_shrink(A); /* every queue empty: the other CPU's queue fills to park */
    unsigned long before = tc_active(A);
    for (int i = 0; i < REMOTE_N; i++)
        remote_objs[i] = qslab_cache_alloc(A);
    pthread_t t;
    void *r = NULL;
    CHECK(pthread_create(&t, NULL, free_remotely, &other) == 0);
    pthread_join(t, &r);
    CHECK(r == NULL);
    tu_check_fatal("double free", tu_addr(s, remote_objs[REMOTE_N - 1]), "t-hard");
    CHECKF(tc_active(A) == before, "active %lu, expected %lu", tc_active(A), before);
    qslab_cache_shrink(A);
    tc_check_sane(A, REMOTE_N, 0, 0, "a double free in a remote batch");
    CHECK(qslab_cache_validate(A) == 0);
}

int main(void)
{
    syscall(SYS_sched_getaffinity, 0, sizeof allowed, allowed);
    int home = tu_pin_one_cpu(); /* per-CPU queues: these checks follow one queue */
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    A = qslab_cache_create("t-hard", 48, 0, 0, NULL);
    CHECK(A != NULL);
    if (!A)
        return tu_done();
    test_double_free_after_flush();
    test_never_allocated_slot();
    test_double_free_after_shrink();
    test_slab_tail();
    test_double_free_remote_batch(home);
    CHECK(qslab_cache_destroy(A) == 0);
    qslab_set_fatal_handler(NULL);
    return tu_done();
}
