/*
 * qslab_tune at run time: accepted values read back, refused values change
 * nothing and print a message, and the cache works after every change.
 */
#include <qslab.h>

#include "../cacheutil.h"
#include "../front.h"
#include "../testutil.h"

static const char *const attrs[] = {"order", "hiwater", "freebatch", "empty_limit", "empty_decay_ms",
                                    "stash_bytes"};

/* Allocate and free many objects of the cache; 1 if all went well. */
static int exercise(const char *cache)
{
    qslab_cache *c = qslab_cache_find(cache);
    if (!c)
        return 0;
    size_t size = qslab_cache_object_size(c);
    int n = size >= 65536 ? 8 : 600;
    void *objs[600];
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < n; i++) {
            objs[i] = qslab_cache_alloc(c);
            if (!objs[i])
                ok = 0;
            else
                memset(objs[i], i, size < 256 ? size : 256);
        }
        for (int i = 0; i < n; i++)
            if (objs[i])
                qslab_cache_free(c, objs[i]);
    }
    struct qslab_cache_stats st;
    return ok && qslab_cache_stats(c, &st) == 0 && st.active_objs == 0;
}

/* qslab_tune must fail with EINVAL, print something, and change nothing. */
#define REFUSED(cache, attr, value) refused(__LINE__, cache, attr, value)
static void refused(int line, const char *cache, const char *attr, const char *value)
{
    char err[2048];
    tc_refused_at(__FILE__, line, cache, attr, value, err, sizeof err);
    tu_check(err[0] != '\0', __FILE__, line, "refusal explained on stderr", "qslab_tune(\"%s\", \"%s\", \"%s\")",
             cache, attr, value);
}

static void test_order(void)
{
    const char *k = "kmalloc-8192";
    CHECK(exercise(k));
    tc_accepted(k, "order", "3", 3);
    CHECK(exercise(k));
    struct qslab_cache_stats st;
    qslab_cache *c = qslab_cache_find(k);
    void *p = qslab_cache_alloc(c); /* make sure a slab of the new order exists */
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECKF(st.order == 3, "stats order %u", st.order);
    CHECKF(st.objs_per_slab >= 1 && st.objs_per_slab * st.slot_size <= (size_t)4096 << 3, "%u objects of %zu",
           st.objs_per_slab, st.slot_size);
    qslab_cache_free(c, p);

    /* 99: refused, the message names the allowed range. */
    char err[2048];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune(k, "order", "99");
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EINVAL, "order 99: %d errno %d", r, e);
    CHECKF(strstr(err, "order") != NULL, "message does not name the attribute: \"%s\"", err);
    CHECKF(strpbrk(err, "0123456789") != NULL, "message gives no range: \"%s\"", err);
    CHECK(tc_get(k, "order") == 3);
    CHECK(exercise(k));

    REFUSED(k, "order", "abc");
    REFUSED(k, "order", "");
    REFUSED(k, "order", "-1");
    REFUSED(k, "order", "3abc");
    REFUSED(k, "order", "99999999999999999999999999");
    CHECK(exercise(k));
    tc_accepted(k, "order", "2", 2);
    CHECK(exercise(k));
}

static void test_unknown(void)
{
    REFUSED("kmalloc-8192", "bogus", "1");
    REFUSED("kmalloc-8192", "", "1");
    errno = 0;
    CHECK(qslab_tune("no-such-cache", "order", "1") == -1 && errno == EINVAL);
    unsigned long v;
    errno = 0;
    CHECK(qslab_tune_get("no-such-cache", "order", &v) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(qslab_tune_get("kmalloc-64", "bogus", &v) == -1 && errno == EINVAL);
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        CHECKF(qslab_tune_get("kmalloc-64", attrs[i], &v) == 0, "tune_get(kmalloc-64, %s)", attrs[i]);
}

/* stash_bytes: the empty slabs a queue keeps for itself, in bytes. */
static void test_stash(void)
{
    enum { N = 2000 };
    static void *objs[N];
    qslab_cache *c = qslab_cache_create("t-tune-stash", 1024, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(tc_get("t-tune-stash", "stash_bytes") == 128 << 10);
    REFUSED("t-tune-stash", "stash_bytes", "67108865"); /* over 64 MiB */
    REFUSED("t-tune-stash", "stash_bytes", "-1");
    tc_accepted("t-tune-stash", "stash_bytes", "0", 0);
    /* no stash: every empty slab goes to the node at once, where an
     * empty_limit of 0 gives it back */
    tc_accepted("t-tune-stash", "empty_limit", "0", 0);
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    if (tf_is(c, "slab")) /* SLAB keeps free slabs by its own free_limit, not empty_limit */
        CHECKF(st.empty_slabs * st.objs_per_slab <= 4096, "slab: %lu free slabs kept", st.empty_slabs);
    else
        CHECKF(st.empty_slabs == 0, "stash_bytes 0, empty_limit 0: %lu empty slabs kept",
               st.empty_slabs);
    tc_accepted("t-tune-stash", "stash_bytes", "4194304", 4194304);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void test_batches(void)
{
    const char *k = "kmalloc-256";
    tc_accepted(k, "freebatch", "16", 16); /* first: freebatch <= hiwater at every step */
    tc_accepted(k, "hiwater", "64", 64);
    CHECK(exercise(k));
    REFUSED(k, "hiwater", "15");   /* below freebatch */
    REFUSED(k, "freebatch", "65"); /* above hiwater */
    REFUSED(k, "hiwater", "x");
    CHECK(exercise(k));
    tc_accepted(k, "freebatch", "64", 64); /* equal is fine */
    CHECK(exercise(k));
    tc_accepted(k, "freebatch", "8", 8);
    tc_accepted(k, "hiwater", "8", 8);
    CHECK(exercise(k));
    tc_accepted(k, "hiwater", "512", 512);
    tc_accepted(k, "freebatch", "128", 128);
    CHECK(exercise(k));

    /* The other two, with a user cache. */
    qslab_cache *c = qslab_cache_create("t-tune-user", 300, 0, 0, NULL);
    CHECK(c != NULL);
    tc_accepted("t-tune-user", "empty_limit", "2", 2);
    tc_accepted("t-tune-user", "empty_decay_ms", "250", 250);
    REFUSED("t-tune-user", "empty_limit", "-3");
    REFUSED("t-tune-user", "empty_decay_ms", "ten");
    CHECK(exercise("t-tune-user"));
    tc_accepted("t-tune-user", "order", "2", 2);
    CHECK(exercise("t-tune-user"));
    tc_accepted("t-tune-user", "empty_limit", "0", 0);
    CHECK(exercise("t-tune-user"));
    CHECK(qslab_cache_destroy(c) == 0);
}

static void test_all_caches(void)
{
    qslab_cache *c = qslab_cache_create("t-tune-star", 50, 0, 0, NULL);
    CHECK(c != NULL);
    CHECK(qslab_tune("*", "empty_decay_ms", "500") == 0);
    CHECK(tc_get("kmalloc-8", "empty_decay_ms") == 500);
    CHECK(tc_get("kmalloc-96", "empty_decay_ms") == 500);
    CHECK(tc_get("kmalloc-33554432", "empty_decay_ms") == 500);
    CHECK(tc_get("t-tune-star", "empty_decay_ms") == 500);
    REFUSED("*", "empty_decay_ms", "soon");
    CHECK(tc_get("kmalloc-96", "empty_decay_ms") == 500);
    CHECK(exercise("t-tune-star"));
    CHECK(exercise("kmalloc-96"));
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A new hiwater reaches a queue that already exists: its thread's frees
 * stop pushing at the new length (the rest go straight to the slabs). */
static void test_hiwater_live(void)
{
    enum { N = 200 };
    static void *objs[N];
    qslab_cache *c = qslab_cache_create("t-tune-live", 100, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c); /* the queue exists now */
    CHECK(qslab_tune("t-tune-live", "freebatch", "4") == 0);
    CHECK(qslab_tune("t-tune-live", "hiwater", "8") == 0);
    qslab_cache_shrink(c); /* an empty queue */
    struct qslab_cache_stats a, b;
    qslab_cache_stats(c, &a);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    qslab_cache_stats(c, &b);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    if (tf_slob(c)) /* SLOB: no queue, every free a slow one (tunables accepted, unused) */
        CHECKF(b.free_fast == a.free_fast && b.free_slow - a.free_slow == N && b.flush == a.flush &&
                   b.queued_objs == 0,
               "slob: %lu pushed, %lu slow frees, %lu flushes, %lu queued", b.free_fast - a.free_fast,
               b.free_slow - a.free_slow, b.flush - a.flush, b.queued_objs);
    else if (tf_is(c, "slab")) { /* SLAB: its own limit and batchcount, not hiwater/freebatch */
        unsigned long lim = 0;
        CHECK(qslab_tune_get("t-tune-live", "limit", &lim) == 0 && lim >= 1);
        CHECKF(b.free_fast + b.free_slow - a.free_fast - a.free_slow == N && b.queued_objs <= lim,
               "slab: %lu fast, %lu slow frees, %lu queued (limit %lu)", b.free_fast - a.free_fast,
               b.free_slow - a.free_slow, b.queued_objs, lim);
    } else if (tf_is(c, "slub")) /* SLUB: no queue; every free fast or straight to its slab */
        CHECKF(b.free_fast + b.free_slow - a.free_fast - a.free_slow == N && b.flush == a.flush &&
                   b.queued_objs == 0,
               "slub: %lu fast, %lu slow frees, %lu flushes, %lu queued", b.free_fast - a.free_fast,
               b.free_slow - a.free_slow, b.flush - a.flush, b.queued_objs);
    else if (oi.kind == QSLAB_OWNER_THREAD) /* past hiwater, straight to the slab */
        CHECKF(b.free_fast - a.free_fast == 8 && b.free_slow - a.free_slow == N - 8,
               "hiwater 8: %lu pushed, %lu freed past the queue", b.free_fast - a.free_fast,
               b.free_slow - a.free_slow);
    else /* a CPU's queue flushes freebatch objects home when full (SLQB) */
        CHECKF(b.flush - a.flush >= (N - 8) / 4 && b.queued_objs <= 8,
               "hiwater 8, freebatch 4: %lu flushes, %lu objects queued", b.flush - a.flush,
               b.queued_objs);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(void)
{
    tu_pin_one_cpu(); /* per-CPU queues: these checks follow one queue */
    test_order();
    test_unknown();
    test_batches();
    test_stash();
    test_all_caches();
    test_hiwater_live();
    return tu_done();
}
