/*
 * front.c - front ends: selection (QSLAB_FRONT, the `front` tunable), their
 * names in the statistics, and the SLOB front end's contract on caches
 * pinned to it, whatever QSLAB_FRONT says: contents kept, alignment, the
 * big-object path, validation, destroy, and bad frees reported with the
 * same messages as SLQB's and nothing corrupted.
 */
#include <qslab.h>

#include "../testutil.h"

#include <stdbool.h>
#include <stdint.h>

static qslab_cache *make(const char *name, size_t size, size_t align, void (*ctor)(void *), const char *front)
{
    qslab_cache *c = qslab_cache_create(name, size, align, 0, ctor);
    CHECKF(c != NULL, "create %s", name);
    if (c && front)
        CHECKF(qslab_tune(name, "front", front) == 0, "%s: front=%s before the first allocation", name, front);
    return c;
}

static void test_selection(void)
{
    const char *env = getenv("QSLAB_FRONT");
    const char *want = env && *env ? env : "slqb";
    qslab_cache *k = qslab_cache_find("kmalloc-64");
    CHECKF(k && strcmp(qslab_cache_front(k), want) == 0, "kmalloc-64 front %s, QSLAB_FRONT %s",
           k ? qslab_cache_front(k) : "?", want);
    CHECK(qslab_cache_front(NULL) == NULL);

    qslab_cache *a = make("t-front-sel", 40, 0, NULL, NULL);
    CHECK(strcmp(qslab_cache_front(a), want) == 0);
    CHECK(qslab_tune("t-front-sel", "front", "slob") == 0);
    CHECK(strcmp(qslab_cache_front(a), "slob") == 0);
    unsigned long v = 99;
    CHECK(qslab_tune_get("t-front-sel", "front", &v) == 0 && v == 1);
    CHECK(qslab_tune("t-front-sel", "front", "0") == 0 && strcmp(qslab_cache_front(a), "slqb") == 0);
    CHECK(qslab_tune("t-front-sel", "front", "slob") == 0);

    char err[512];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune("t-front-sel", "front", "slab-not-yet");
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EINVAL && strstr(err, "front=slab-not-yet refused") &&
               strstr(err, "slqb, slub, slab, slob"),
           "unknown front: %d, \"%s\"", r, err);

    void *p = qslab_cache_alloc(a);
    CHECK(p != NULL);
    tu_stderr_begin();
    errno = 0;
    r = qslab_tune("t-front-sel", "front", "slqb");
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EINVAL && strstr(err, "t-front-sel") && strstr(err, "allocated already") &&
               strstr(err, "stays slob"),
           "front after the first allocation: %d, \"%s\"", r, err);
    CHECK(strcmp(qslab_cache_front(a), "slob") == 0);
    qslab_cache_free(a, p);
    CHECK(qslab_cache_validate(a) == 0);
    CHECK(qslab_cache_destroy(a) == 0);
}

static void test_names_in_reports(void)
{
    qslab_cache *a = make("t-front-rep", 24, 0, NULL, "slob");
    void *p = qslab_cache_alloc(a);
    char buf[65536];
    int fds[2];
    CHECK(pipe(fds) == 0);
    qslab_slabinfo(fds[1]);
    qslab_stats_report(fds[1]);
    close(fds[1]);
    size_t n = tu_read_all(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    buf[n] = '\0';
    CHECKF(strstr(buf, "<sharedavail> : front <name>") != NULL, "slabinfo header names the front column");
    const char *line = strstr(buf, "\nt-front-rep ");
    const char *eol = line ? strchr(line + 1, '\n') : NULL;
    CHECKF(line && eol && eol - line > 14 && strncmp(eol - 13, " : front slob", 13) == 0,
           "slabinfo line of a SLOB cache: %.120s", line ? line + 1 : "(none)");
    CHECKF(strstr(buf, "\nslob pages ") != NULL, "report has the SLOB pages line");
    CHECKF(strstr(buf, "\nFront: ") != NULL, "report names the default front end");
    qslab_cache_free(a, p);
    CHECK(qslab_cache_destroy(a) == 0);
}

/* ---- SLOB's contract ---- */
static unsigned long ctor_calls;
static void ctor(void *o)
{
    ctor_calls++;
    memset(o, 0xc7, 48);
}

struct obj {
    void *p;
    int cache;
    uint8_t seed;
};

/* The pattern covers a whole object up to 4 KiB; of a bigger one its
 * first and last KiB, where a neighbour or a header would overlap it (an
 * 80,000-byte object written whole cost the test seconds of page faults). */
#define EDGE 1024
static bool patterned(size_t i, size_t n)
{
    return n <= 4 * EDGE || i < EDGE || i >= n - EDGE;
}
static void fill(void *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i = patterned(i + 1, n) ? i + 1 : n - EDGE)
        ((uint8_t *)p)[i] = (uint8_t)(seed + i * 7);
}
static int intact(const void *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i = patterned(i + 1, n) ? i + 1 : n - EDGE)
        if (((const uint8_t *)p)[i] != (uint8_t)(seed + i * 7))
            return 0;
    return 1;
}

static void test_slob_contents(void)
{
    enum { NC = 5, N = 3000 };
    static const size_t size[NC] = {8, 48, 200, 6000, 80000}; /* 6000: a run; 80000: the cache's own slabs */
    static const size_t align[NC] = {0, 0, 64, 0, 0};
    const char *names[NC] = {"t-slob-8", "t-slob-ctor", "t-slob-al64", "t-slob-6000", "t-slob-80000"};
    qslab_cache *c[NC];
    for (int i = 0; i < NC; i++)
        c[i] = make(names[i], size[i], align[i], i == 1 ? ctor : NULL, "slob");
    static struct obj o[N];
    unsigned rnd = 12345;
    unsigned long allocs1 = 0;
    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < N; k++) {
            rnd = rnd * 1103515245u + 12345u;
            int i = (int)((rnd >> 16) % NC);
            if (o[k].p) {
                int ci = o[k].cache;
                size_t sz = ci == 1 ? 40 : size[ci]; /* keep the ctor's last 8 bytes */
                if (!intact(ci == 1 ? (char *)o[k].p + 8 : o[k].p, ci == 1 ? 32 : sz, o[k].seed))
                    tu_fail("object %p of %s overwritten", o[k].p, names[ci]);
                qslab_cache_free(c[ci], o[k].p);
                o[k].p = NULL;
                continue;
            }
            void *p = qslab_cache_alloc(c[i]);
            if (!p) {
                tu_fail("alloc %s failed", names[i]);
                continue;
            }
            if (align[i] && ((uintptr_t)p & (align[i] - 1)))
                tu_fail("%s object %p not aligned to %zu", names[i], p, align[i]);
            if ((uintptr_t)p & 7)
                tu_fail("%s object %p not 8-byte aligned", names[i], p);
            if (i == 1) {
                allocs1++;
                if (((uint8_t *)p)[47] != 0xc7)
                    tu_fail("t-slob-ctor object %p not constructed", p);
            }
            uint8_t seed = (uint8_t)(rnd >> 8);
            if (i == 1)
                fill((char *)p + 8, 32, seed);
            else
                fill(p, size[i], seed);
            o[k] = (struct obj){p, i, seed};
        }
        if (round % 5 == 4)
            for (int i = 0; i < NC; i++)
                CHECKF(qslab_cache_validate(c[i]) == 0, "validate %s in round %d", names[i], round);
    }
    CHECKF(ctor_calls >= allocs1, "SLOB: the constructor ran %lu times for %lu allocations", ctor_calls,
           allocs1);
    struct qslab_cache_stats st;
    void *big = qslab_cache_alloc(c[4]); /* too big for a run: its own slabs */
    CHECK(big && qslab_cache_stats(c[4], &st) == 0 && st.num_slabs > 0);
    qslab_cache_free(c[4], big);
    CHECK(qslab_cache_stats(c[3], &st) == 0 && st.num_slabs == 0); /* in runs */
    for (int k = 0; k < N; k++)
        if (o[k].p) {
            qslab_cache_free(c[o[k].cache], o[k].p);
            o[k].p = NULL;
        }
    for (int i = 0; i < NC; i++) {
        CHECK(qslab_cache_stats(c[i], &st) == 0 && st.active_objs == 0 && st.alloc == st.alloc_slow);
        CHECKF(qslab_cache_validate(c[i]) == 0, "validate %s after freeing all", names[i]);
        qslab_cache_shrink(c[i]);
        CHECKF(qslab_cache_destroy(c[i]) == 0, "destroy %s", names[i]);
    }
}

static void test_slob_bad_frees(void)
{
    char s[32];
    qslab_cache *a = make("t-slob-bad-a", 32, 0, NULL, "slob");
    qslab_cache *b = make("t-slob-bad-b", 32, 0, NULL, "slob");
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();

    void *p = qslab_cache_alloc(a);
    qslab_cache_free(a, p);
    qslab_cache_free(a, p); /* at once: its header says free */
    tu_check_fatal("double free", tu_addr(s, p), "t-slob-bad-a");

    void *x = qslab_cache_alloc(a), *y = qslab_cache_alloc(a), *z = qslab_cache_alloc(a);
    qslab_cache_free(a, x);
    qslab_cache_free(a, y);
    qslab_cache_free(a, z); /* merged into one free block: y's header is a dead one */
    CHECK(tu_capture_calls() == 0);
    qslab_cache_free(a, y);
    tu_check_fatal("double free", tu_addr(s, y), "t-slob-bad-a");
    qslab_free(z); /* through qslab_free: named by the header */
    tu_check_fatal("double free", tu_addr(s, z), "t-slob-bad-a");

    char *q = qslab_cache_alloc(a);
    qslab_cache_free(a, q + 8);
    tu_check_fatal("interior pointer", tu_addr(s, q + 8), "t-slob-bad-a");
    qslab_cache_free(a, q + 3);
    tu_check_fatal("interior pointer", tu_addr(s, q + 3), "t-slob-bad-a");
    qslab_cache_free(b, q);
    tu_check_fatal("belongs to cache", tu_addr(s, q), "t-slob-bad-a", "t-slob-bad-b");
    int on_stack;
    qslab_cache_free(a, &on_stack);
    tu_check_fatal("not allocated by qslab", tu_addr(s, &on_stack));
    qslab_cache_free(a, q);
    CHECK(tu_capture_calls() == 0);

    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(a, &st) == 0 && st.active_objs == 0);
    CHECK(qslab_cache_validate(a) == 0 && qslab_cache_validate(b) == 0);
    qslab_set_fatal_handler(NULL);
    CHECK(qslab_cache_destroy(a) == 0 && qslab_cache_destroy(b) == 0);
}

/* The index: tens of thousands of blocks of every size up to a page on
 * hundreds of pages, and of sizes up to 32 KiB on runs, freed in random
 * order and allocated again, so that pages move between the buckets of
 * their largest free block, fill, empty and are kept or given back; the
 * arena is validated (every page's blocks, free list, records of the free
 * block before each object, bucket) as it goes, and every object keeps its
 * contents.  Caches pinned to SLOB of sizes 8 to 32,744 and alignments to
 * 256; under QSLAB_FRONT=slob malloc's blocks of every size from 1 to 4,096
 * bytes and of random ones to 33,000 as well, and aligned ones. */
static void test_slob_index(void)
{
    enum { NC = 15, N = 24000 };
    static const size_t size[NC] = {8, 16, 24, 40, 72, 136, 264, 520, 1032, 2056, 4064, 100, 4500, 12008, 32744};
    static const size_t align[NC] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256, 0, 0, 0};
    qslab_cache *c[NC];
    char name[32];
    for (int i = 0; i < NC; i++) {
        snprintf(name, sizeof name, "t-slob-ix-%d", i);
        c[i] = make(name, size[i], align[i], NULL, "slob");
    }
    const char *env = getenv("QSLAB_FRONT");
    bool kmalloc = env && strcmp(env, "slob") == 0;
    struct blk {
        void *p;
        size_t n; /* bytes filled */
        int cache; /* -1: malloc's, -2: aligned */
        uint8_t seed;
    };
    static struct blk o[N];
    unsigned rnd = 777, sz = 0;
    for (int round = 0; round < 8; round++) {
        /* free in random order about half, then fill every slot again */
        for (int k = 0; k < N; k++) {
            rnd = rnd * 1103515245u + 12345u;
            if (!o[k].p || (round < 7 && (rnd >> 16) % 2))
                continue;
            if (!intact(o[k].p, o[k].n, o[k].seed))
                tu_fail("SLOB index: object %p overwritten", o[k].p);
            if (o[k].cache >= 0)
                qslab_cache_free(c[o[k].cache], o[k].p);
            else
                qslab_free(o[k].p);
            o[k].p = NULL;
        }
        if (round == 7)
            break;
        CHECKF(qslab_cache_validate(c[0]) == 0, "validate the SLOB arena after the frees of round %d", round);
        for (int k = 0; k < N; k++) {
            if (o[k].p)
                continue;
            rnd = rnd * 1103515245u + 12345u;
            int i = (int)((rnd >> 16) % (NC + 2));
            void *p;
            size_t n;
            if (i < NC || !kmalloc) {
                i %= NC;
                p = qslab_cache_alloc(c[i]);
                n = size[i];
                if (p && align[i] && ((uintptr_t)p & (align[i] - 1)))
                    tu_fail("t-slob-ix-%d object %p not aligned to %zu", i, p, align[i]);
            } else if (i == NC) { /* every size in turn */
                n = sz % 4 ? sz % 4096 + 1 : 4097 + (rnd >> 4) % 28904;
                sz++;
                p = qslab_malloc(n);
                i = -1;
                if (p && ((uintptr_t)p & 15))
                    tu_fail("malloc(%zu) = %p not 16-byte aligned", n, p);
            } else {
                size_t al = (size_t)32 << ((rnd >> 8) % 5); /* 32..512 */
                n = (rnd >> 4) % 1500 + 1;
                p = qslab_aligned_alloc(al, n);
                i = -2;
                if (p && ((uintptr_t)p & (al - 1)))
                    tu_fail("aligned_alloc(%zu, %zu) = %p", al, n, p);
            }
            if (!p) {
                tu_fail("SLOB index: allocation %d failed", i);
                continue;
            }
            uint8_t seed = (uint8_t)(rnd >> 3);
            fill(p, n, seed);
            o[k] = (struct blk){p, n, i, seed};
            if (k % 4000 == 0)
                CHECKF(qslab_cache_validate(c[0]) == 0, "validate the SLOB arena in round %d", round);
        }
        CHECKF(qslab_cache_validate(c[0]) == 0, "validate the SLOB arena after round %d", round);
    }
    if (kmalloc) {
        /* blocks too big for a run: their class's slabs, each given back
         * as it empties (as glibc unmaps a block over its mmap threshold):
         * none kept empty */
        enum { NB = 16 };
        void *big[NB];
        struct qslab_cache_stats st = {0};
        for (int i = 0; i < NB; i++)
            big[i] = qslab_malloc(100000);
        /* their class: the first kmalloc class of 100,000 bytes or more (the
         * usable size is the slab's room, up to the power of two) */
        qslab_cache *k = NULL;
        for (size_t sz = 100000; !k && sz <= 131072; sz += 16) {
            snprintf(name, sizeof name, "kmalloc-%zu", sz);
            k = qslab_cache_find(name);
        }
        CHECKF(big[NB - 1] && k && qslab_cache_stats(k, &st) == 0 && st.num_slabs >= 2,
               "%s: %lu slabs", name, st.num_slabs);
        for (int i = 0; i < NB; i++)
            qslab_free(big[i]);
        size_t slab = (size_t)4096 << st.order;
        CHECKF(k && qslab_cache_stats(k, &st) == 0 && st.empty_slabs == 0,
               "%s keeps %lu empty slabs of %zu bytes under SLOB", name, st.empty_slabs, slab);
    }
    for (int i = 0; i < NC; i++) {
        struct qslab_cache_stats st;
        CHECK(qslab_cache_stats(c[i], &st) == 0 && st.active_objs == 0);
        CHECKF(qslab_cache_validate(c[i]) == 0, "validate t-slob-ix-%d after freeing all", i);
        CHECK(qslab_cache_destroy(c[i]) == 0);
    }
}

static void test_slob_destroy_busy(void)
{
    qslab_cache *a = make("t-slob-busy", 100, 0, NULL, "slob");
    void *p = qslab_cache_alloc(a);
    char err[256];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_cache_destroy(a);
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EBUSY && strstr(err, "1 objects still allocated"), "%d \"%s\"", r, err);
    qslab_cache_free(a, p);
    CHECK(qslab_cache_destroy(a) == 0);
}

int main(void)
{
    test_selection();
    test_names_in_reports();
    test_slob_contents();
    test_slob_bad_frees();
    test_slob_index();
    test_slob_destroy_busy();
    return tu_done();
}
