/*
 * Bad frees with a fatal handler that returns: each bad free calls the
 * handler exactly once with a one-line message naming the error, the address
 * (as "%p" prints it) and the cache(s); the free then does nothing and the
 * allocator keeps working.
 */
#include <pthread.h>
#include <qslab.h>

#include "../cacheutil.h"
#include "../front.h"
#include "../testutil.h"

static qslab_cache *A, *B, *C; /* C has a constructor */
static char a_global[256];

static void ctor48(void *obj)
{
    memset(obj, 0x5a, 48);
}

/* The cache still works: 300 fresh objects, all distinct, no handler call
 * (C's written with its constructor's pattern). */
static void check_sane(qslab_cache *c, size_t size, const char *when)
{
    tc_check_sane(c, 300, size, c == C ? 0x5a : -1, when);
}

/* A free loads nothing from the object (no store-forwarding stall on the
 * program's last write), so a second free that is not right after the
 * first is caught later, before the object is handed out twice: allocate
 * n objects of c, expect exactly one report naming p and `what`, and no
 * object twice; then free them.  what NULL: expect no report (SLOB reports
 * a double free at the second free itself). */
static void reuse_expect(qslab_cache *c, int n, const void *p, const char *what, const char *name)
{
    char s[32];
    void **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++)
        v[i] = qslab_cache_alloc(c);
    if (what)
        tu_check_fatal(what, tu_addr(s, p), name);
    else
        CHECKF(tu_capture_calls() == 0, "%s: report at reuse after a double free already reported: %s", name,
               tu_fatal_msg);
    tu_capture_reset();
    int dups = tu_sorted_dups(v, n), nulls = 0;
    for (int i = 0; i < n; i++)
        nulls += !v[i];
    CHECKF(!dups && !nulls, "%s: %d objects handed out twice, %d NULL", name, dups, nulls);
    for (int i = 0; i < n; i++)
        if (v[i])
            qslab_cache_free(c, v[i]);
    free(v);
}

static void test_handler_setting(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    CHECK(qslab_set_fatal_handler(tu_fatal_capture) == tu_fatal_capture);
    tu_capture_reset();
}

static void test_not_qslab(void)
{
    char s[32];
    int on_stack[16] = {0};
    qslab_cache_free(A, &on_stack[4]);
    tu_check_fatal("not allocated by qslab", tu_addr(s, &on_stack[4]));
    qslab_free(&on_stack[4]);
    tu_check_fatal("not allocated by qslab", tu_addr(s, &on_stack[4]));

    void *m = calloc(1, 64);
    qslab_cache_free(A, m);
    tu_check_fatal("not allocated by qslab", tu_addr(s, m));
    qslab_free(m);
    tu_check_fatal("not allocated by qslab", tu_addr(s, m));
    free(m);

    qslab_free(a_global + 8);
    tu_check_fatal("not allocated by qslab", tu_addr(s, a_global + 8));

    qslab_free(NULL); /* fine */
    CHECK(tu_capture_calls() == 0);
    check_sane(A, 64, "frees of foreign memory");
}

static void test_interior(void)
{
    char s[32];
    unsigned long before = tc_active(A);
    char *p = qslab_cache_alloc(A);
    CHECK(p != NULL);
    qslab_cache_free(A, p + 8);
    tu_check_fatal("interior pointer", tu_addr(s, p + 8), "t-bad-alpha");
    qslab_free(p + 8);
    tu_check_fatal("interior pointer", tu_addr(s, p + 8), "t-bad-alpha");
    CHECKF(tc_active(A) == before + 1, "the ignored frees freed something: active %lu", tc_active(A));
    qslab_cache_free(A, p); /* the real free still works */
    CHECK(tu_capture_calls() == 0);
    CHECK(tc_active(A) == before);

    char *q = qslab_malloc(120); /* kmalloc-128 */
    CHECK(q != NULL);
    qslab_free(q + 8);
    tu_check_fatal("interior pointer", tu_addr(s, q + 8), "kmalloc-128");
    qslab_free(q);
    CHECK(tu_capture_calls() == 0);

    p = qslab_cache_alloc(C);
    qslab_cache_free(C, p + 1);
    tu_check_fatal("interior pointer", tu_addr(s, p + 1), "t-bad-ctor");
    qslab_cache_free(C, p);
    check_sane(A, 64, "interior frees");
    check_sane(C, 48, "interior frees");
}

/* Pointers the free path's lookup resolves to slots that hold no slab: the
 * chunk header, and a slab given back to the page layer. */
static void test_no_slab(void)
{
    char s[32];
    char *p = qslab_malloc(64);
    char *hdr = (char *)((uintptr_t)p & ~(uintptr_t)((4u << 20) - 1));
    qslab_free(hdr + 64);
    tu_check_fatal("not an allocated object", tu_addr(s, hdr + 64));
    qslab_free(p);

    qslab_cache *d = qslab_cache_create("t-bad-gone", 200, 0, 0, NULL);
    CHECK(d != NULL);
    char *o = qslab_cache_alloc(d);
    CHECK(o != NULL);
    qslab_cache_free(d, o);
    CHECK(qslab_cache_shrink(d) > 0); /* the slab went back to the page layer */
    qslab_cache_free(d, o);
    tu_check_fatal("free slab memory", tu_addr(s, o), "t-bad-gone");
    qslab_free(o);
    tu_check_fatal("free slab memory", tu_addr(s, o));
    check_sane(d, 200, "frees into a given-back slab");
    qslab_cache_destroy(d);
}

/* A write into a free object's link word (use after free) is reported as
 * free-list corruption when qslab next follows that link, on allocation and
 * in a flush, and nothing reached through the bad link is used. */
static qslab_cache *uaf_cache;
static unsigned long uaf_n;
static uint64_t **uaf_objs;
static void *uaf_alloc(void *arg)
{
    (void)arg;
    for (unsigned long i = 0; i < uaf_n; i++)
        uaf_objs[i] = qslab_cache_alloc(uaf_cache);
    return NULL;
}

static void test_use_after_free(void)
{
    char s[32];
    qslab_cache *d = qslab_cache_create("t-bad-uaf", 64, 0, 0, NULL);
    CHECK(d != NULL);
    if (!d)
        return;
    uint64_t *p = qslab_cache_alloc(d);
    qslab_cache_free(d, p);
    p[0] = 0x4141414141414141ull; /* the queue's head now links nowhere */
    void *got = qslab_cache_alloc(d);
    if (tf_slob(d)) {
        /* SLOB keeps no link in a free object (its header is outside it):
         * the write goes unseen and harms nothing */
        CHECKF(got != NULL && tu_capture_calls() == 0, "slob: write after free: got %p, handler: %s", got,
               tu_fatal_msg);
        tu_capture_reset();
        qslab_cache_free(d, got);
        check_sane(d, 64, "a write into a free object (slob)");
        tf_note("bad_free", d, "use-after-free detection (free-list links)");
        return;
    }
    tu_check_fatal("free list corruption", tu_addr(s, p), "t-bad-uaf");
    CHECK(got == NULL || got != (void *)0x4141414141414141ull);
    check_sane(d, 64, "an overwritten queue head");

    /* in a flush (shrink flushes the whole queue) */
    unsigned long hi = 0, fb = 0;
    CHECK(qslab_tune_get("t-bad-uaf", "hiwater", &hi) == 0 && hi > 20);
    CHECK(qslab_tune_get("t-bad-uaf", "freebatch", &fb) == 0 && fb > 20);
    enum { MAXN = 4096 };
    static uint64_t *objs[MAXN];
    unsigned long n = hi + fb < MAXN ? hi + fb : MAXN;
    for (int i = 0; i < 40; i++)
        objs[i] = qslab_cache_alloc(d);
    qslab_cache_shrink(d);
    for (int i = 0; i < 40; i++)
        qslab_cache_free(d, objs[i]);
    uint64_t *x = objs[20];
    x[0] = 0x4242424242424242ull;
    qslab_cache_shrink(d);
    tu_check_fatal("free list corruption", tu_addr(s, x), "t-bad-uaf");
    check_sane(d, 64, "a flush through an overwritten object");

    /* in a batch of frees of another owner's objects (an exited thread's
     * slabs, node-owned now): batched home, freebatch at a time */
    uaf_cache = d;
    uaf_n = n;
    uaf_objs = objs;
    pthread_t t;
    pthread_create(&t, NULL, uaf_alloc, NULL);
    pthread_join(t, NULL);
    qslab_cache_shrink(d);
    for (unsigned long i = 0; i < hi + 5; i++)
        qslab_cache_free(d, objs[i]);
    x = objs[hi + 2]; /* in the batch being filled (n is hi + freebatch) */
    x[0] = 0x4343434343434343ull;
    for (unsigned long i = hi + 5; i < n; i++) /* the batch fills and is sent */
        qslab_cache_free(d, objs[i]);
    /* a CPU's queue (QSLAB_OWNER=cpu) may still hold x, or its batch may sit
     * in the owner's inbox unwalked: shrink empties every queue and inbox */
    if (!tu_capture_calls())
        qslab_cache_shrink(d);
    tu_check_fatal("free list corruption", tu_addr(s, x), "t-bad-uaf");
    check_sane(d, 64, "a batch through an overwritten object");
    /* the objects after the bad links are leaked on purpose: no destroy */
}

static void test_wrong_cache(void)
{
    char s[32];
    unsigned long a0 = tc_active(A), b0 = tc_active(B);
    void *p = qslab_cache_alloc(A);
    qslab_cache_free(B, p);
    tu_check_fatal("belongs to cache", tu_addr(s, p), "t-bad-alpha", "t-bad-beta");
    CHECK(tc_active(A) == a0 + 1 && tc_active(B) == b0);
    qslab_cache_free(A, p);
    CHECK(tu_capture_calls() == 0);

    void *q = qslab_malloc(64); /* kmalloc-64, same size as A */
    qslab_cache_free(A, q);
    tu_check_fatal("belongs to cache", tu_addr(s, q), "kmalloc-64", "t-bad-alpha");
    qslab_free(q);
    CHECK(tu_capture_calls() == 0);

    void *r = qslab_cache_alloc(C);
    qslab_cache_free(A, r);
    tu_check_fatal("belongs to cache", tu_addr(s, r), "t-bad-ctor", "t-bad-alpha");
    qslab_cache_free(C, r);

    /* qslab_free() takes an object of any cache: not an error. */
    void *t = qslab_cache_alloc(B);
    qslab_free(t);
    CHECK(tu_capture_calls() == 0);
    CHECK(tc_active(B) == b0);
    check_sane(A, 64, "wrong-cache frees");
    check_sane(B, 64, "wrong-cache frees");
}

static void test_double_free(qslab_cache *c, size_t size, const char *name)
{
    char s[32];
    unsigned long before = tc_active(c);

    void *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    qslab_cache_free(c, p);
    tu_check_fatal("double free", tu_addr(s, p), name);
    CHECKF(tc_active(c) == before, "%s: active %lu, expected %lu", name, tc_active(c), before);
    check_sane(c, size, "an immediate double free");

    void *a = qslab_cache_alloc(c), *b = qslab_cache_alloc(c), *d = qslab_cache_alloc(c);
    qslab_cache_free(c, a);
    qslab_cache_free(c, b);
    qslab_cache_free(c, d);
    qslab_cache_free(c, a);
    /* SLOB: the block's header says free; SLUB: a free loads the object's
     * link word (it writes it anyway), which is a free object's: reported
     * at the second free */
    /* SLAB: a thread's array takes every object as another owner's (SLAB's
     * slabs are the node's) and loads the word; a CPU's array takes its
     * node's objects as its own (q->own) and, as SLQB's push of an object
     * of its own slab, loads nothing */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    int slob = tf_slob(c) || tf_is(c, "slub") || (tf_is(c, "slab") && oi.kind != QSLAB_OWNER_CPU);
    if (slob) {
        tu_check_fatal("double free", tu_addr(s, a), name);
    } else {
        /* a free never loads from the object (no store-forwarding stall on
         * the program's last write): a second free that is not next to the
         * first is caught when the object would be handed out again */
        CHECK(tu_capture_calls() == 0);
    }
    void *g[4];
    for (int i = 0; i < 4; i++)
        g[i] = qslab_cache_alloc(c);
    if (slob)
        CHECKF(tu_capture_calls() == 0, "%s: reported again at reuse: %s", name, tu_fatal_msg);
    else
        tu_check_fatal("double free", tu_addr(s, a), name);
    tu_capture_reset();
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            CHECKF(g[i] && g[i] != g[j], "%s: objects %d and %d after a delayed double free: %p %p",
                   name, j, i, g[j], g[i]);
    for (int i = 0; i < 4; i++)
        qslab_cache_free(c, g[i]);
    CHECKF(tc_active(c) == before, "%s: active %lu, expected %lu", name, tc_active(c), before);
    check_sane(c, size, "a delayed double free");

    /* A double free through qslab_free() too. */
    p = qslab_cache_alloc(c);
    qslab_free(p);
    qslab_free(p);
    tu_check_fatal("double free", tu_addr(s, p), name);
    CHECK(tc_active(c) == before);
    check_sane(c, size, "a double free through qslab_free");
}

static void test_double_free_kmalloc(void)
{
    char s[32];
    void *p = qslab_malloc(120); /* kmalloc-128 */
    qslab_free(p);
    qslab_free(p);
    tu_check_fatal("double free", tu_addr(s, p), "kmalloc-128");

    void *x = qslab_malloc(20), *y = qslab_malloc(20), *z = qslab_malloc(20);
    qslab_free(x);
    qslab_free(y);
    qslab_free(z);
    qslab_free(y);
    int slob = tf_kmalloc_slob();
    if (slob) /* SLOB: at the second free itself */
        tu_check_fatal("double free", tu_addr(s, y), "kmalloc-32");

    /* Caught before it is handed out twice (see test_double_free). */
    enum { N = 200 };
    void *v[N];
    for (int i = 0; i < N; i++)
        v[i] = qslab_malloc(20);
    if (slob)
        CHECKF(tu_capture_calls() == 0, "kmalloc-32: reported again at reuse: %s", tu_fatal_msg);
    else
        tu_check_fatal("double free", tu_addr(s, y), "kmalloc-32");
    tu_capture_reset();
    qsort(v, N, sizeof v[0], tu_cmp_ptr);
    int dups = 0;
    for (int i = 1; i < N; i++)
        dups += v[i] == v[i - 1];
    CHECKF(dups == 0, "%d duplicate kmalloc-32 objects after a double free", dups);
    for (int i = 0; i < N; i++)
        qslab_free(v[i]);
    CHECK(tu_capture_calls() == 0);

}

/*
 * A large (directly mapped) allocation freed twice is reported as a double
 * free or as memory qslab does not own; either way, once.  Run in a child:
 * the mapping is gone after the first free.
 */
static void test_double_free_large(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        char s[32];
        size_t big = (size_t)40 << 20;
        tu_capture_reset();
        void *l = qslab_malloc(big);
        qslab_free(l);
        qslab_free(l);
        int ok = l && tu_capture_calls() == 1 &&
                 (strstr(tu_fatal_msg, "double free") || strstr(tu_fatal_msg, "not allocated by qslab")) &&
                 strstr(tu_fatal_msg, tu_addr(s, l));
        if (!ok)
            fprintf(stderr, "large double free: %lu calls, \"%s\"\n", tu_capture_calls(), tu_fatal_msg);
        tu_capture_reset();
        void *l2 = qslab_malloc(big);
        qslab_free(l2);
        ok &= l2 != NULL && tu_capture_calls() == 0;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "large double free child: %s %d",
           WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Beyond the listed cases: the first free happens in another thread. */
static void *free_in_thread(void *p)
{
    qslab_cache_free(A, p);
    return NULL;
}

static void test_double_free_remote(void)
{
    char s[32];
    unsigned long before = tc_active(A);
    void *p = qslab_cache_alloc(A);
    pthread_t t;
    pthread_create(&t, NULL, free_in_thread, p);
    pthread_join(t, NULL);
    /* p waits in our inbox (posted home by the other thread): the free
     * stamp the second free stores cuts that list there, and whoever walks
     * it reports the double free (shrink claims the inbox at once) */
    qslab_cache_free(A, p);
    if (tf_slob(A)) { /* SLOB: no inbox, reported at the second free itself */
        tu_check_fatal("double free", tu_addr(s, p), "t-bad-alpha");
        reuse_expect(A, 300, p, NULL, "t-bad-alpha");
    } else {
        qslab_cache_shrink(A);
        reuse_expect(A, 300, p, "double free", "t-bad-alpha");
    }
    CHECKF(tc_active(A) == before, "active %lu, expected %lu", tc_active(A), before);
    check_sane(A, 64, "a double free after a free in another thread");
}

int main(void)
{
    tu_pin_one_cpu(); /* per-CPU queues: these checks follow one queue */
    A = qslab_cache_create("t-bad-alpha", 64, 0, 0, NULL);
    B = qslab_cache_create("t-bad-beta", 64, 0, 0, NULL);
    C = qslab_cache_create("t-bad-ctor", 48, 0, 0, ctor48);
    CHECK(A && B && C);
    if (!A || !B || !C)
        return tu_done();

    test_handler_setting();
    check_sane(A, 64, "start");
    test_not_qslab();
    test_interior();
    test_wrong_cache();
    test_no_slab();
    test_use_after_free();
    test_double_free(A, 64, "t-bad-alpha");
    test_double_free(C, 48, "t-bad-ctor");
    test_double_free_kmalloc();
    test_double_free_large();
    test_double_free_remote();

    CHECK(tc_active(A) == 0 && tc_active(B) == 0 && tc_active(C) == 0);
    CHECK(qslab_cache_destroy(A) == 0);
    CHECK(qslab_cache_destroy(B) == 0);
    CHECK(qslab_cache_destroy(C) == 0);
    CHECK(qslab_set_fatal_handler(NULL) == tu_fatal_capture);
    return tu_done();
}
