/*
 * defrag_thread.c - cooperative defragmentation (qslab_cache_set_mobility)
 * in every front end (SLOB's pages are every cache's: its moves are
 * measured by the pages that hold the survivors, as everyone's are).
 *
 *  1. A hash table of entries from a mobile cache: load, delete 90% at
 *     random, then shrink repeatedly while two threads insert, delete and
 *     look up keys of their own and look up the survivors; afterwards every
 *     key is checked (survivors present and right, deleted ones gone, each
 *     thread's own keys as it left them), the cache validates, and the
 *     shrink moved objects and gave slabs back.
 *  2. A constructor cache: moved objects come back from later allocations
 *     constructed (the constructor's mark intact), and the constructor ran
 *     once per object born, never for a move.
 *  3. A debug cache (red zones, owner tracking): the same load, delete and
 *     shrink; every key right and the cache validates (red zones intact).
 *  4. Bad calls: NULL cache, isolate without migrate.
 *  5. The purger alone: a mobile cache whose slabs hold more than twice its
 *     live objects gets a pass within a few seconds, without a shrink
 *     (skipped with QSLAB_PURGE=0).
 *  6. fork while another thread's pass runs: the child's shrink of that
 *     cache does not wait for the pass, which the child does not have.
 *  7. A shrink with mobility gives back what it empties at once: after a
 *     trim (nothing kept), the shrink leaves no more empty slabs or warm
 *     slots kept than before it (qslab_cached_stats), its pass's own
 *     arrays included.
 */
#include "../testutil.h"
#include "../front.h"

#include <pthread.h>
#include <qslab.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define TAG_KEY 0x5a5aa5a5c3c33c3cULL
#define CTOR_MARK 0xc0ffee11u
#define WORKER_KEYS 4096 /* keys of each of part 1's two threads */

struct entry {
    struct entry *next;
    _Atomic uint64_t tag; /* (uintptr_t)self ^ TAG_KEY while in the table */
    uint64_t key, value;
    uint32_t mark;        /* the constructor's (part 2) */
    char pad[28];
};

struct table {
    pthread_mutex_t lock;
    struct entry **b;
    size_t nb;
    qslab_cache *c;
    uintptr_t *live; /* the live entries' addresses (live_has) */
    size_t live_mask;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}
static struct entry **slot_of(struct table *t, uint64_t key)
{
    return &t->b[mix(key) % t->nb];
}
static bool is_mine(struct entry *e)
{
    return atomic_load_explicit(&e->tag, memory_order_relaxed) == ((uintptr_t)e ^ TAG_KEY);
}

/* The table's entries by address (t->lock held): how isolate and migrate
 * tell a live entry from an address that may be a free object, without
 * reading it (a debug cache's allocation writes the whole object outside
 * our lock, so any read of a free object races with it).  Open addressing,
 * linear probing, deletion by shifting the run back. */
static size_t live_home(const struct table *t, uintptr_t p)
{
    return (size_t)mix(p) & t->live_mask;
}

static bool live_has(const struct table *t, const void *p)
{
    for (size_t i = live_home(t, (uintptr_t)p); t->live[i]; i = (i + 1) & t->live_mask)
        if (t->live[i] == (uintptr_t)p)
            return true;
    return false;
}

static void live_add(struct table *t, const void *p)
{
    size_t i = live_home(t, (uintptr_t)p);
    while (t->live[i])
        i = (i + 1) & t->live_mask;
    t->live[i] = (uintptr_t)p;
}

static void live_del(struct table *t, const void *p)
{
    size_t i = live_home(t, (uintptr_t)p);
    while (t->live[i] != (uintptr_t)p)
        i = (i + 1) & t->live_mask;
    for (size_t j = (i + 1) & t->live_mask; t->live[j]; j = (j + 1) & t->live_mask) {
        size_t h = live_home(t, t->live[j]);
        /* an entry whose home is not in (i, j] may move back to i */
        if (((j - h) & t->live_mask) >= ((j - i) & t->live_mask)) {
            t->live[i] = t->live[j];
            i = j;
        }
    }
    t->live[i] = 0;
}

static size_t t_isolate(qslab_cache *c, void **objs, size_t n, void *arg)
{
    struct table *t = arg;
    size_t k = 0;
    CHECK(c == t->c);
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++)
        if (live_has(t, objs[i]))
            objs[k++] = objs[i];
    pthread_mutex_unlock(&t->lock);
    return k;
}

static atomic_ulong migrations;

static int t_migrate(qslab_cache *c, void *old_obj, void *new_obj, void *arg)
{
    struct table *t = arg;
    struct entry *old = old_obj, *nu = new_obj;
    (void)c;
    pthread_mutex_lock(&t->lock);
    if (!live_has(t, old)) {
        pthread_mutex_unlock(&t->lock);
        return 1;
    }
    struct entry **pp = slot_of(t, old->key);
    while (*pp != old)
        pp = &(*pp)->next;
    nu->next = old->next;
    nu->key = old->key;
    nu->value = old->value;
    nu->mark = old->mark;
    atomic_store_explicit(&nu->tag, (uintptr_t)nu ^ TAG_KEY, memory_order_relaxed);
    *pp = nu;
    atomic_store_explicit(&old->tag, 0, memory_order_relaxed);
    live_del(t, old);
    live_add(t, nu);
    pthread_mutex_unlock(&t->lock);
    atomic_fetch_add(&migrations, 1);
    return 0;
}

static bool insert(struct table *t, uint64_t key)
{
    struct entry *e = qslab_cache_alloc(t->c);
    if (!e)
        return false;
    e->key = key;
    e->value = key * 7 + 1;
    pthread_mutex_lock(&t->lock);
    struct entry **pp = slot_of(t, key);
    e->next = *pp;
    atomic_store_explicit(&e->tag, (uintptr_t)e ^ TAG_KEY, memory_order_relaxed);
    *pp = e;
    live_add(t, e);
    pthread_mutex_unlock(&t->lock);
    return true;
}

static bool erase(struct table *t, uint64_t key)
{
    pthread_mutex_lock(&t->lock);
    struct entry **pp = slot_of(t, key);
    while (*pp && (*pp)->key != key)
        pp = &(*pp)->next;
    struct entry *e = *pp;
    if (e) {
        *pp = e->next;
        atomic_store_explicit(&e->tag, 0, memory_order_relaxed);
        live_del(t, e);
    }
    pthread_mutex_unlock(&t->lock);
    if (e)
        qslab_cache_free(t->c, e);
    return e != NULL;
}

/* 1: right value, 0: absent, -1: wrong */
static int look(struct table *t, uint64_t key)
{
    pthread_mutex_lock(&t->lock);
    struct entry *e = *slot_of(t, key);
    while (e && e->key != key)
        e = e->next;
    int r = !e ? 0 : e->value == key * 7 + 1 && is_mine(e) ? 1 : -1;
    pthread_mutex_unlock(&t->lock);
    return r;
}

static size_t N = 60000;
static uint8_t *kept; /* survivor bit of key index i (keys 1..N) */
static atomic_int stop;

struct worker {
    struct table *t;
    int id;
    uint8_t *have; /* its own keys: present or not */
    size_t nkeys;
    unsigned long ops;
};

static uint64_t wkey(int id, size_t i)
{
    return ((uint64_t)(id + 1) << 40) + i + 1;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t r = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);
    while (!atomic_load(&stop) || w->ops < 2000) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t i = r % w->nkeys;
        uint64_t key = wkey(w->id, i);
        switch (r >> 60 & 3) {
        case 0:
            if (!w->have[i])
                w->have[i] = insert(w->t, key);
            break;
        case 1:
            if (w->have[i]) {
                CHECK(erase(w->t, key));
                w->have[i] = 0;
            }
            break;
        default: { /* a lookup of its own key and of a survivor */
            int got = look(w->t, key);
            if (got != w->have[i])
                tu_fail("thread %d: key %zu: %d, expected %d", w->id, i, got, w->have[i]);
            size_t j = (r >> 20) % N;
            int s = look(w->t, j + 1);
            if (s != (kept[j / 8] >> (j % 8) & 1))
                tu_fail("survivor %zu: %d", j, s);
        }
        }
        w->ops++;
    }
    return NULL;
}

static struct table *table_new(qslab_cache *c, size_t n)
{
    struct table *t = calloc(1, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->nb = n / 4 + 1;
    t->b = calloc(t->nb, sizeof(*t->b));
    t->c = c;
    size_t cap = 1024; /* a quarter full at most: n, and the workers' keys */
    while (cap < 4 * (n + 2 * WORKER_KEYS))
        cap *= 2;
    t->live = calloc(cap, sizeof(*t->live));
    t->live_mask = cap - 1;
    return t;
}

/* After its cache's destroy: the purger's defragmentation pass may call
 * t_isolate until then (destroy waits for a pass under way) */
static void table_free(struct table *t)
{
    pthread_mutex_destroy(&t->lock);
    free(t->live);
    free(t->b);
    free(t);
}

/* The survivors of keys 1..n erased, the cache destroyed empty, the table
 * freed */
static void table_end(struct table *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kept[i / 8] >> (i % 8) & 1)
            CHECK(erase(t, i + 1));
    CHECK(qslab_cache_destroy(t->c) == 0);
    table_free(t);
}

/* load keys 1..n, delete 90% at random; kept[] their survivors */
static void load_delete(struct table *t, size_t n)
{
    uint32_t *order = malloc(n * sizeof(*order));
    for (size_t i = 0; i < n; i++) {
        CHECK(insert(t, i + 1));
        order[i] = (uint32_t)i;
    }
    uint64_t r = 88172645463325252ULL;
    for (size_t i = n - 1; i > 0; i--) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t j = r % (i + 1);
        uint32_t k = order[i];
        order[i] = order[j];
        order[j] = k;
    }
    memset(kept, 0, n / 8 + 1);
    size_t gone = n - n / 10;
    for (size_t i = 0; i < n; i++)
        if (i < gone)
            CHECK(erase(t, (uint64_t)order[i] + 1));
        else
            kept[order[i] / 8] |= (uint8_t)(1u << (order[i] % 8));
    free(order);
}

/* A table of cache c for keys 1..n, mobile with t_isolate and t_migrate
 * if asked, loaded and thinned (load_delete) */
static struct table *table_loaded(qslab_cache *c, size_t n, bool mobile)
{
    struct table *t = table_new(c, n);
    if (mobile)
        CHECK(qslab_cache_set_mobility(c, t_isolate, t_migrate, t) == 0);
    load_delete(t, n);
    return t;
}

static size_t check_survivors(struct table *t, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += look(t, i + 1) != (kept[i / 8] >> (i % 8) & 1);
    return bad;
}

static int by_value(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The 4 KiB pages that hold the survivors among keys 1..n: a measure of
 * how packed they are in every front end (a SLOB cache has no slabs of
 * its own to count) */
static size_t survivor_pages(struct table *t, size_t n)
{
    uintptr_t *pg = malloc(n * sizeof(*pg));
    size_t k = 0, pages = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        if (!(kept[i / 8] >> (i % 8) & 1))
            continue;
        struct entry *e = *slot_of(t, i + 1);
        while (e && e->key != i + 1)
            e = e->next;
        if (e)
            pg[k++] = (uintptr_t)e >> 12;
    }
    pthread_mutex_unlock(&t->lock);
    qsort(pg, k, sizeof(*pg), by_value);
    for (size_t i = 0; i < k; i++)
        pages += !i || pg[i] != pg[i - 1];
    free(pg);
    return pages;
}

/* 1. */
static void concurrent(bool *mobile)
{
    qslab_cache *c = qslab_cache_create("defrag_kv", sizeof(struct entry), 0, 0, NULL);
    CHECK(c != NULL);
    struct table *t = table_new(c, N);
    int rc = qslab_cache_set_mobility(c, t_isolate, t_migrate, t);
    CHECKF(rc == 0, "set_mobility: errno %d", errno);
    *mobile = rc == 0;
    load_delete(t, N);
    struct qslab_cache_stats before;
    CHECK(qslab_cache_stats(c, &before) == 0);
    size_t pages_before = survivor_pages(t, N);

    struct worker w[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct worker){.t = t, .id = i, .nkeys = WORKER_KEYS};
        w[i].have = calloc(w[i].nkeys, 1);
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    /* four shrinks while the workers run, and more (up to 40) while the
     * survivors still fill half their pages or more: a pass moves what is
     * sparse when it looks, and under a sanitizer with full debugging on a
     * loaded machine the workers' frees may make slabs sparse after it */
    for (int k = 0; k < 4 || (*mobile && k < 40 && survivor_pages(t, N) >= pages_before / 2); k++) {
        qslab_cache_shrink(c);
        tu_sleep_ms(20);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    CHECKF(check_survivors(t, N) == 0, "survivors wrong: %zu", check_survivors(t, N));
    for (int i = 0; i < 2; i++) {
        size_t bad = 0;
        for (size_t k = 0; k < w[i].nkeys; k++)
            bad += look(t, wkey(i, k)) != w[i].have[k];
        CHECKF(bad == 0, "thread %d: %zu keys wrong", i, bad);
    }
    CHECK(qslab_cache_validate(c) == 0);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    if (*mobile) {
        CHECKF(st.defrag_passes >= 4, "passes %lu", st.defrag_passes);
        CHECKF(st.defrag_moved > N / 40, "moved %lu", st.defrag_moved);
        CHECKF(st.defrag_slabs > 0, "slabs %lu", st.defrag_slabs);
        size_t pages = survivor_pages(t, N);
        CHECKF(pages < pages_before / 2, "survivors in %zu pages, %zu before", pages, pages_before);
        CHECK(st.defrag_moved == atomic_load(&migrations));
        /* one pass more with the workers gone: the slabs in use half full
         * or more on average for the objects the test holds, survivors and
         * workers' (what the workers churned around the concurrent passes
         * leaves holes that a pass beside them may not reach; the count
         * after the load, before the purger gave empties back or after, is
         * no bound); the slack covers slabs the owners hold half used */
        qslab_cache_shrink(c);
        CHECK(qslab_cache_stats(c, &st) == 0);
        size_t live = 0;
        for (size_t i = 0; i < N; i++)
            live += kept[i / 8] >> (i % 8) & 1;
        for (int i = 0; i < 2; i++)
            for (size_t k = 0; k < w[i].nkeys; k++)
                live += w[i].have[k] != 0;
        size_t need = (live + st.objs_per_slab - 1) / st.objs_per_slab;
        if (!tf_slob(c)) /* SLOB's caches have no slabs of their own (but big objects') */
            CHECKF(st.num_slabs - st.empty_slabs <= 2 * need + 16,
                   "slabs %lu (%lu empty, %lu partial) for %zu objects of %u a slab", st.num_slabs,
                   st.empty_slabs, st.partial_slabs, live, st.objs_per_slab);
    } else {
        CHECK(st.defrag_passes == 0 && st.defrag_moved == 0);
    }
    /* everything out: the cache is destroyed empty */
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < w[i].nkeys; k++)
            if (w[i].have[k])
                CHECK(erase(t, wkey(i, k)));
    for (size_t i = 0; i < N; i++)
        if (kept[i / 8] >> (i % 8) & 1)
            CHECK(erase(t, i + 1));
    for (int i = 0; i < 2; i++)
        free(w[i].have);
    CHECK(qslab_cache_destroy(c) == 0);
    table_free(t);
}

/* 2. */
static atomic_ulong constructed;
static void ctor(void *obj)
{
    struct entry *e = obj;
    e->mark = CTOR_MARK;
    atomic_store_explicit(&e->tag, 0, memory_order_relaxed);
    atomic_fetch_add(&constructed, 1);
}

static void with_ctor(bool mobile)
{
    qslab_cache *c = qslab_cache_create("defrag_ctor", sizeof(struct entry), 0, 0, ctor);
    CHECK(c != NULL);
    size_t n = N / 2;
    struct table *t = table_loaded(c, n, mobile);
    unsigned long born = atomic_load(&constructed), moved0 = atomic_load(&migrations);
    struct qslab_cache_stats st0, st;
    CHECK(qslab_cache_stats(c, &st0) == 0);
    qslab_cache_shrink(c);
    CHECK(qslab_cache_stats(c, &st) == 0);
    unsigned long moved = atomic_load(&migrations) - moved0;
    CHECKF(!mobile || moved > 0, "moved %lu", moved);
    /* the constructor ran for objects born in new slabs only: at most a
     * slab's worth per slab made during the shrink, never per move (not
     * counted on a debug cache, QSLAB_DEBUG with F: its constructed-state
     * check runs the constructor on a copy at every free,
     * docs/debugging.md; nor with guarded sampling, whose samples are
     * constructed in their guarded slots, moves' new objects among them) */
    unsigned long made = st.new_slab - st0.new_slab;
    if (tf_slob(c)) /* SLOB keeps no constructed free objects: one run per allocation */
        CHECKF(atomic_load(&constructed) - born == st.alloc - st0.alloc,
               "constructed %lu for %lu allocations", atomic_load(&constructed) - born,
               st.alloc - st0.alloc);
    else if (!tf_is(c, "debug") && !tf_guarded())
        CHECKF(atomic_load(&constructed) - born <= made * st.objs_per_slab,
               "constructed %lu in %lu new slabs", atomic_load(&constructed) - born, made);
    CHECKF(check_survivors(t, n) == 0, "survivors wrong");
    /* the objects the moves freed come back constructed */
    size_t again = n;
    void **v = malloc(again * sizeof(*v));
    size_t bad = 0;
    for (size_t i = 0; i < again; i++) {
        struct entry *e = v[i] = qslab_cache_alloc(c);
        CHECK(e != NULL);
        bad += e->mark != CTOR_MARK;
    }
    CHECKF(bad == 0, "%zu objects not in their constructed state", bad);
    for (size_t i = 0; i < again; i++)
        qslab_cache_free(c, v[i]);
    free(v);
    table_end(t, n);
}

/* 3. */
static void with_debug(bool mobile)
{
    qslab_cache *c = qslab_cache_create("defrag_dbg", sizeof(struct entry), 0,
                                        QSLAB_RED_ZONE | QSLAB_STORE_USER, NULL);
    CHECK(c != NULL);
    size_t n = N / 4;
    struct table *t = table_loaded(c, n, mobile);
    unsigned long moved0 = atomic_load(&migrations);
    qslab_cache_shrink(c);
    CHECKF(!mobile || atomic_load(&migrations) > moved0, "nothing moved");
    CHECKF(check_survivors(t, n) == 0, "survivors wrong");
    CHECK(qslab_cache_validate(c) == 0);
    table_end(t, n);
}

static size_t iso_any(qslab_cache *c, void **o, size_t n, void *a)
{
    (void)c, (void)o, (void)a;
    return n;
}

/* 4. */
static void bad_calls(void)
{
    tu_stderr_begin();
    errno = 0;
    CHECK(qslab_cache_set_mobility(NULL, NULL, t_migrate, NULL) == -1 && errno == EINVAL);
    qslab_cache *c = qslab_cache_create("defrag_bad", 64, 0, 0, NULL);
    errno = 0;
    CHECK(qslab_cache_set_mobility(c, iso_any, NULL, NULL) == -1 && errno == EINVAL);
    char out[1024];
    tu_stderr_end(out, sizeof out);
    CHECKF(strstr(out, "cache is NULL") && strstr(out, "isolate without migrate"), "stderr: %s",
           out);
    CHECK(qslab_cache_set_mobility(c, NULL, NULL, NULL) == 0); /* off: always allowed */
    CHECK(qslab_cache_destroy(c) == 0);
}

/* 5. */
static void by_purger(bool mobile)
{
    const char *purge = getenv("QSLAB_PURGE");
    if (!mobile || (purge && strcmp(purge, "0") == 0))
        return;
    qslab_cache *c = qslab_cache_create("defrag_purged", sizeof(struct entry), 0, 0, NULL);
    size_t n = N;
    struct table *t = table_loaded(c, n, true);
    struct qslab_cache_stats st = {0};
    for (int i = 0; i < 100 && !st.defrag_moved; i++) { /* the purger looks once a second */
        tu_sleep_ms(100);
        CHECK(qslab_cache_stats(c, &st) == 0);
    }
    CHECKF(st.defrag_passes >= 1 && st.defrag_moved > 0, "purger: %lu passes moved %lu",
           st.defrag_passes, st.defrag_moved);
    CHECKF(check_survivors(t, n) == 0, "survivors wrong after the purger's pass");
    table_end(t, n);
}

/* 6. */
static atomic_int in_pass;
static int slow_migrate(qslab_cache *c, void *old_obj, void *new_obj, void *arg)
{
    if (!atomic_exchange(&in_pass, 1))
        tu_sleep_ms(300); /* outside the table's lock: the fork comes meanwhile */
    return t_migrate(c, old_obj, new_obj, arg);
}
static void *shrinker(void *arg)
{
    qslab_cache_shrink(arg);
    return NULL;
}
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
static void fork_in_pass(bool mobile)
{
#ifdef TSAN_BUILD /* the child starts its purger: TSan refuses threads after such a fork */
    mobile = false;
#endif
    if (!mobile)
        return;
    qslab_cache *c = qslab_cache_create("defrag_fork", sizeof(struct entry), 0, 0, NULL);
    size_t n = 20000;
    struct table *t = table_new(c, n);
    CHECK(qslab_cache_set_mobility(c, t_isolate, slow_migrate, t) == 0);
    load_delete(t, n);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, shrinker, c) == 0);
    while (!atomic_load(&in_pass))
        tu_sleep_ms(1);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a shrink that waits for the parent's pass would hang */
        qslab_cache_shrink(c); /* a pass of its own, in the child */
        _exit(qslab_cache_set_mobility(c, NULL, NULL, NULL) == 0 &&
                      check_survivors(t, n) == 0 ? 0 : 1);
    }
    CHECK(pid > 0);
    int st = tu_wait(pid);
    CHECKF(st == 0, "child: status %d", st);
    CHECK(pthread_join(th, NULL) == 0);
    CHECKF(check_survivors(t, n) == 0, "survivors wrong");
    table_end(t, n);
}

/* 7. */
static void nothing_kept(bool mobile)
{
    if (!mobile)
        return; /* no pass: nothing of its own to keep */
    qslab_cache *c = qslab_cache_create("defrag_kept", sizeof(struct entry), 0, 0, NULL);
    size_t n = N;
    struct table *t = table_loaded(c, n, true);
    struct qslab_cached_stats before, after;
    qslab_trim(); /* every cache's empty slabs and warm slots back to the OS */
    qslab_cached_stats(&before);
    qslab_cache_shrink(c);
    qslab_cached_stats(&after);
    CHECKF(after.cached <= before.cached, "%lu bytes kept after the shrink, %lu before",
           after.cached, before.cached);
    CHECKF(check_survivors(t, n) == 0, "survivors wrong");
    table_end(t, n);
}

int main(void)
{
    if (getenv("QSLAB_TEST_QUICK") || getenv("TSAN_OPTIONS"))
        N = 20000;
    kept = calloc(N / 8 + 1, 1);
    bool mobile = false;
    concurrent(&mobile);
    with_ctor(mobile);
    with_debug(mobile);
    bad_calls();
    by_purger(mobile);
    fork_in_pass(mobile);
    nothing_kept(mobile);
    free(kept);
    return tu_done();
}
