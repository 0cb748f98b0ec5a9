/*
 * Debugging turned on for a cache in use (src/debug/twin.c): the tunable `debug`
 * gives the cache a debug twin `<cache>:<flags>` whose slabs take the
 * cache's new allocations; its old objects keep working and go back to
 * their own slabs.  Checked: reports name the twin and find the misuse on
 * new objects; old objects free without a report; turning it off, on again
 * (the same twin) and with other flags (another); statistics and slabinfo
 * list the twin; validate, shrink and destroy take the twins along;
 * refusals; kmalloc caches; and toggling under eight threads that allocate
 * and free all the while (TSan: the label "concurrency").
 */
#include <qslab.h>

#include "../testutil.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

static char err[65536];

/* stderr of op(arg): first line exactly `first`; the handler called once
 * (with `handler` in its message) or, if handler is NULL, not at all */
static int expect_report(const char *first, void (*op)(void *), void *arg, const char *handler)
{
    return tu_expect_report(err, sizeof err, first, op, arg, handler, NULL);
}

struct op {
    qslab_cache *c;
    char *p;
    int r;
    const char *name, *attr, *value;
};

static void op_free(void *a)
{
    struct op *o = a;
    qslab_cache_free(o->c, o->p);
}

static void op_kfree(void *a)
{
    struct op *o = a;
    qslab_free(o->p);
}

static void *alloc_unsampled(qslab_cache *c, size_t size);

static void op_alloc(void *a)
{
    struct op *o = a;
    o->p = alloc_unsampled(o->c, 0);
}

static void op_tune(void *a)
{
    struct op *o = a;
    errno = 0;
    o->r = qslab_tune(o->name, o->attr, o->value);
    if (o->r)
        o->r = -errno;
}

static void op_destroy(void *a)
{
    struct op *o = a;
    errno = 0;
    o->r = qslab_cache_destroy(o->c);
    if (o->r)
        o->r = -errno;
}

/* An allocation that is not a guarded sample (QSLAB_GUARD_SAMPLE: those
 * are the guard pool's, taken before the twin is asked) */
static void *alloc_unsampled(qslab_cache *c, size_t size)
{
    void *held[64];
    int n = 0;
    void *p;
    while ((p = c ? qslab_cache_alloc(c) : qslab_malloc(size)) != NULL && qslab_guarded(p) &&
           n < 64)
        held[n++] = p;
    while (n--)
        c ? qslab_cache_free(c, held[n]) : qslab_free(held[n]);
    return p;
}

static unsigned long flags_of(const char *cache)
{
    unsigned long v = 99;
    CHECK(qslab_tune_get(cache, "debug", &v) == 0);
    return v;
}

static unsigned long live_of(qslab_cache *c)
{
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    return st.active_objs;
}

#define SZ   50
#define NOLD 200

/* A cache made with debug flags (QSLAB_DEBUG for every cache) keeps them */
static void made_debug(qslab_cache *c)
{
    unsigned long f = flags_of("t-live");
    char line[200], fl[8];
    int k = 0;
    for (int i = 0; i < 7; i++)
        if (f & (1ul << i))
            fl[k++] = "FZPUTRV"[i];
    fl[k] = '\0';
    snprintf(line, sizeof line,
             "qslab: tune t-live debug=- refused: the cache was made with debug flags %s (its "
             "flags or QSLAB_DEBUG), which it keeps",
             fl);
    struct op o = {c, NULL, 0, "t-live", "debug", "-"};
    expect_report(line, op_tune, &o, NULL);
    CHECK(o.r == -EINVAL);
    /* the same flags again: nothing to do */
    CHECK(qslab_tune("t-live", "debug", fl) == 0);
}

static void live_cache(void)
{
    qslab_cache *c = qslab_cache_create("t-live", SZ, 0, 0, NULL);
    CHECK(c != NULL);
    if (strcmp(qslab_cache_front(c), "debug") == 0) {
        made_debug(c);
        CHECK(qslab_cache_destroy(c) == 0);
        return;
    }
    CHECK(flags_of("t-live") == 0);
    char *old[NOLD];
    for (int i = 0; i < NOLD; i++) {
        old[i] = qslab_cache_alloc(c);
        CHECK(old[i] != NULL);
        memset(old[i], i & 0xff, SZ);
    }
    /* free some, so the queues and slabs hold free plain objects */
    for (int i = 0; i < NOLD; i += 2)
        qslab_cache_free(c, old[i]);

    CHECK(qslab_tune("t-live", "debug", "FZP") == 0);
    CHECK(flags_of("t-live") == 7); /* F 1, Z 2, P 4 */
    qslab_cache *t = qslab_cache_find("t-live:FZP");
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK(strcmp(qslab_cache_front(t), "debug") == 0);
    CHECK(qslab_cache_object_size(t) == SZ);
    CHECK(flags_of("t-live:FZP") == 7);

    /* a new object is the twin's: fresh poison, red zones */
    unsigned long before = live_of(t);
    unsigned char *p = alloc_unsampled(c, 0);
    CHECK(p != NULL);
    CHECK(live_of(t) == before + 1);
    int all5a = 1;
    for (int i = 0; i < SZ; i++)
        all5a &= p[i] == 0x5a;
    CHECK(all5a);
    p[SZ] = 'x'; /* overflow by 1 */
    struct op o = {c, (char *)p, 0, NULL, NULL, NULL};
    expect_report("BUG t-live:FZP: Right Redzone overwritten", op_free, &o,
                  "BUG t-live:FZP: Right Redzone overwritten");
    CHECK(live_of(t) == before);

    /* the old objects: intact, and freed without a report */
    int intact = 1;
    for (int i = 1; i < NOLD; i += 2)
        for (int k = 0; k < SZ; k++)
            intact &= (unsigned char)old[i][k] == (i & 0xff);
    CHECK(intact);
    tu_capture_reset();
    for (int i = 1; i < NOLD; i += 2)
        qslab_cache_free(c, old[i]);
    CHECK(tu_capture_calls() == 0);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(live_of(c) == 0);
    /* ... and none of them stayed in a queue: the queues take nothing while
     * the twin takes the allocations */
    struct qslab_cache_stats cs;
    CHECK(qslab_cache_stats(c, &cs) == 0);
    CHECKF(cs.queued_objs == 0, "%lu objects queued", cs.queued_objs);

    /* the statistics: the twin holds the debug slabs, and slabinfo lists it */
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(t, &st) == 0);
    CHECK(st.new_slab >= 1);
    CHECK(st.slot_size > SZ); /* red zones */
    int fds[2];
    CHECK(pipe(fds) == 0);
    qslab_slabinfo(fds[1]);
    close(fds[1]);
    size_t got = tu_read_all(fds[0], err, sizeof err - 1);
    err[got] = '\0';
    close(fds[0]);
    CHECKF(strstr(err, "\nt-live:FZP ") != NULL, "slabinfo without the twin:\n%s", err);

    /* off: new objects are the cache's own again; the twin keeps its own */
    char *keep = alloc_unsampled(c, 0); /* a twin object */
    before = live_of(t);
    CHECK(qslab_tune("t-live", "debug", "-") == 0);
    CHECK(flags_of("t-live") == 0);
    char *plain = alloc_unsampled(c, 0);
    CHECK(plain != NULL && live_of(t) == before && live_of(c) == 1);
    qslab_cache_free(c, plain);
    /* on again with the same flags: the same twin */
    CHECK(qslab_tune("t-live", "debug", "PZF") == 0);
    CHECK(qslab_cache_find("t-live:FZP") == t);
    /* other flags: another twin, which tracks owners */
    CHECK(qslab_tune("t-live", "debug", "U") == 0);
    qslab_cache *tu = qslab_cache_find("t-live:U");
    CHECK(tu != NULL && tu != t);
    char *u = alloc_unsampled(c, 0);
    CHECK(tu && live_of(tu) == 1);

    /* refusals */
    o = (struct op){c, NULL, 0, "t-live", "debug", "FX"};
    expect_report("qslab: tune t-live debug=FX refused: the flags are letters of FZPUTRVQ (SLUB's: "
                  "consistency checks, red zones, poison, user tracking, trace; R repair, V memory "
                  "checkers, Q quarantine), or - for none",
                  op_tune, &o, NULL);
    CHECK(o.r == -EINVAL);
    o.name = "t-live:U";
    o.value = "F";
    expect_report("qslab: tune t-live:U debug=F refused: it is the debug twin of t-live; tune that "
                  "cache's debug",
                  op_tune, &o, NULL);
    CHECK(o.r == -EINVAL);
    o.name = "*";
    expect_report("qslab: tune kmalloc-8 debug: refused for every cache at once (\"*\"); name each "
                  "cache, or use QSLAB_DEBUG when the caches are made",
                  op_tune, &o, NULL);
    CHECK(o.r == -EINVAL);
    o.c = tu;
    expect_report(
        "qslab: cache t-live:U is the debug twin of cache t-live and goes when that cache "
        "is destroyed",
        op_destroy, &o, NULL);
    CHECK(o.r == -EINVAL);
    /* destroy with a twin's objects live: refused, with the call site */
    o.c = c;
    expect_report("qslab: cache t-live destroyed with 2 objects still allocated; cache left intact",
                  op_destroy, &o, NULL);
    CHECK(o.r == -EBUSY);
    CHECKF(strstr(err, "qslab: objects still allocated, by call site") != NULL &&
               strstr(err, "\n       1 0x") != NULL,
           "no call sites for t-live:U:\n%s", err);
    qslab_cache_free(c, keep); /* a twin's object, freed to its cache */
    qslab_cache_free(c, u);
    CHECK(tu_capture_calls() == 0);
    CHECK(qslab_cache_validate(c) == 0);
    qslab_cache_shrink(c); /* the cache's and its twins' */
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    CHECK(qslab_cache_find("t-live:FZP") == NULL && qslab_cache_find("t-live:U") == NULL);
}

/* Another thread's old objects freed by us go home to its inbox; its next
 * (diverted) allocation claims them back onto its slabs */
#define NRM 500
static qslab_cache *rm;
static char *rm_objs[NRM];
static int rm_step;

static void wait_step(int want)
{
    while (__atomic_load_n(&rm_step, __ATOMIC_ACQUIRE) != want) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static void *rm_owner(void *arg)
{
    (void)arg;
    for (int i = 0; i < NRM; i++)
        rm_objs[i] = qslab_cache_alloc(rm);
    __atomic_store_n(&rm_step, 1, __ATOMIC_RELEASE);
    wait_step(2); /* debug on, and the objects freed by main */
    /* our queue hands out what it still holds first, then the twin */
    qslab_cache *t = qslab_cache_find("t-live-rm:F");
    static void *held[NRM];
    int n = 0;
    while (n < NRM && t && live_of(t) == 0)
        held[n++] = alloc_unsampled(rm, 0);
    CHECKF(n < NRM && t && live_of(t) == 1, "no object of the twin after %d allocations", n);
    while (n)
        qslab_cache_free(rm, held[--n]);
    __atomic_store_n(&rm_step, 3, __ATOMIC_RELEASE);
    wait_step(4); /* main has looked */
    return NULL;
}

static void remote_home(void)
{
    rm = qslab_cache_create("t-live-rm", 64, 0, 0, NULL);
    CHECK(rm != NULL);
    if (strcmp(qslab_cache_front(rm), "debug") == 0) {
        CHECK(qslab_cache_destroy(rm) == 0);
        return;
    }
    pthread_t th;
    CHECK(pthread_create(&th, NULL, rm_owner, NULL) == 0);
    wait_step(1);
    CHECK(qslab_tune("t-live-rm", "debug", "F") == 0);
    for (int i = 0; i < NRM; i++)
        qslab_cache_free(rm, rm_objs[i]);
    qslab_cache_shrink(rm); /* our batches home */
    __atomic_store_n(&rm_step, 2, __ATOMIC_RELEASE);
    wait_step(3);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(rm, &st) == 0);
    CHECKF(st.active_objs == 0 && st.queued_objs == 0,
           "%lu objects live, %lu queued (an inbox not claimed)", st.active_objs, st.queued_objs);
    CHECK(qslab_cache_validate(rm) == 0);
    __atomic_store_n(&rm_step, 4, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK(qslab_cache_destroy(rm) == 0);
}

/* kmalloc: the class's twin; free() finds it by the slab */
static void kmalloc_live(void)
{
    unsigned long f = flags_of("kmalloc-64");
    if (f != 0)
        return; /* made with debug flags (QSLAB_DEBUG) */
    void *old = qslab_malloc(64);
    CHECK(qslab_tune("kmalloc-64", "debug", "ZP") == 0);
    char *p = alloc_unsampled(NULL, 60);
    CHECK(p != NULL);
    CHECK(qslab_usable_size(p) == 64);
    p[64] = 'x';
    struct op o = {NULL, p, 0, NULL, NULL, NULL};
    expect_report("BUG kmalloc-64:ZP: Right Redzone overwritten", op_kfree, &o,
                  "BUG kmalloc-64:ZP: Right Redzone overwritten");
    /* a write after free of a new object, found when it is handed out
     * (which keeps it out of use for good: a kmalloc cache is never
     * destroyed) */
    p = alloc_unsampled(NULL, 64);
    qslab_free(p);
    p[10] = 1;
    o.c = qslab_cache_find("kmalloc-64");
    o.p = NULL;
    expect_report("BUG kmalloc-64:ZP: Poison overwritten", op_alloc, &o, "Poison overwritten");
    CHECK(o.p != NULL && o.p != p);
    qslab_cache_free(o.c, o.p);
    p = qslab_malloc(64);
    char *q = qslab_realloc(p, 48); /* stays: same class */
    CHECK(q != NULL);
    qslab_free(q);
    qslab_free(old);
    CHECK(qslab_tune("kmalloc-64", "debug", "-") == 0);
    CHECK(qslab_cache_validate(qslab_cache_find("kmalloc-64")) == 0);
    CHECK(tu_capture_calls() == 0);
}

/* Eight threads allocate and free while the main thread toggles the flags */
#define NT 8
static qslab_cache *mt;
static int stop;

static void *worker(void *arg)
{
    uint64_t s = tu_seed((uintptr_t)arg);
    unsigned char *held[64] = {0};
    unsigned long rounds = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED) || rounds < 1000) {
        unsigned k = (unsigned)(tu_rand(&s) % 64);
        int kind = k & 1; /* the cache, or kmalloc-128 */
        if (held[k]) {
            int ok = 1;
            for (int i = 0; i < 40; i++)
                ok &= held[k][i] == (unsigned char)k;
            if (!ok)
                tu_fail("object %p changed under its owner", (void *)held[k]);
            if (kind)
                qslab_free(held[k]);
            else
                qslab_cache_free(mt, held[k]);
            held[k] = NULL;
        } else {
            held[k] = kind ? qslab_malloc(100) : qslab_cache_alloc(mt);
            if (!held[k]) {
                tu_fail("allocation failed");
                break;
            }
            memset(held[k], (int)k, 40);
        }
        rounds++;
    }
    for (unsigned k = 0; k < 64; k++)
        if (held[k]) {
            if (k & 1)
                qslab_free(held[k]);
            else
                qslab_cache_free(mt, held[k]);
        }
    return NULL;
}

static void toggling(void)
{
    mt = qslab_cache_create("t-live-mt", 40, 0, 0, NULL);
    CHECK(mt != NULL);
    bool made_debug = strcmp(qslab_cache_front(mt), "debug") == 0;
    bool kdebug = flags_of("kmalloc-128") != 0;
    pthread_t th[NT];
    for (long i = 0; i < NT; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(i + 1)) == 0);
    static const char *const steps[] = {"FZP", "-", "F", "FZPU", "-", "FZP", "Z", "-"};
    int rounds = TU_SANITIZED ? 16 : 64;
    for (int i = 0; i < rounds; i++) {
        const char *v = steps[i % 8];
        if (!made_debug)
            CHECKF(qslab_tune("t-live-mt", "debug", v) == 0, "debug=%s", v);
        if (!kdebug)
            CHECKF(qslab_tune("kmalloc-128", "debug", v) == 0, "kmalloc-128 debug=%s", v);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    CHECK(tu_capture_calls() == 0);
    CHECK(qslab_cache_validate(mt) == 0);
    CHECK(qslab_cache_validate(qslab_cache_find("kmalloc-128")) == 0);
    CHECK(live_of(mt) == 0);
    CHECK(qslab_cache_destroy(mt) == 0);
    if (!kdebug)
        CHECK(qslab_tune("kmalloc-128", "debug", "-") == 0);
}

int main(int argc, char **argv)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    if (argc > 1 && !strcmp(argv[1], "kmalloc-live")) {
        kmalloc_live();
        return tu_done();
    }
    live_cache();
    remote_home();
    /* without the purger: its walk of debug objects, about once a second,
     * would find the write after free first (and, under TSan, race with
     * the write), where the test wants the hand-out to find it */
    CHECK(tu_reexec("kmalloc-live", "QSLAB_PURGE", "0") == 0);
    toggling();
    return tu_done();
}
