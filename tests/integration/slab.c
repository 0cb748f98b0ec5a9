/*
 * slab.c - the SLAB front end (src/front/slab/, after mm/slab.c) through
 * the public API, on caches pinned to it whatever QSLAB_FRONT says:
 *   - selection by name and by number (3), read back;
 *   - the tunables limit, batchcount and shared: mm/slab.c's defaults by
 *     object size, refusals with the range, values read back, and the
 *     `tunables` columns of /proc/slabinfo text;
 *   - the slab order (calculate_slab_order's first fit, qslab's waste
 *     bound) and the objects per slab, recomputed here from
 *     the slot size (index arrays of 1, 2 and 4 bytes, on and off slab);
 *   - one owner's array (a pinned thread): queued_objs within limit, and
 *     the flush, refill and claim (shared array) counters;
 *   - colouring of consecutive slabs;
 *   - constructors: once per object at slab birth, contents kept;
 *   - frees by another thread, and, with two (fake) NUMA nodes, frees of
 *     another node's objects through alien arrays (a child re-executed with
 *     QSLAB_FAKE_NUMA=2 when this machine has one node);
 *   - misuse: double frees, a never-allocated slot, writes after free, each
 *     reported once through a handler that returns, nothing corrupted after;
 *   - a slab of one block goes to the FIFO as its free empties it;
 *   - validation after each phase, shrink, destroy, and the reaper.
 */
#define _GNU_SOURCE /* CPU affinity */
#include <pthread.h>
#include <qslab.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdint.h>
#include <time.h>

#include "../cacheutil.h"
#include "../front.h"
#include "../testutil.h"

#define ALIEN_LIMIT  12  /* mm/slab.c alloc_alien_cache */
#define OFF_SLAB_MIN 128 /* PAGE_SIZE >> 5 */

/* ---- helpers ---- */

static qslab_cache *make(const char *name, size_t size, size_t align, void (*ctor)(void *))
{
    qslab_cache *c = qslab_cache_create(name, size, align, 0, ctor);
    CHECKF(c != NULL, "create %s (%zu bytes)", name, size);
    if (c)
        CHECKF(qslab_tune(name, "front", "slab") == 0 && tf_is(c, "slab"),
               "%s: front=slab before the first allocation (front %s)", name, qslab_cache_front(c));
    return c;
}

#define validate(c, when)                                                                          \
    CHECKF(qslab_cache_validate(c) == 0, "validate %s %s (see above)", qslab_cache_name(c), when)

static int cpu_mode(void)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    return oi.kind == QSLAB_OWNER_CPU;
}

/* CPUs this process may use (the main thread is never pinned). */
static int ncpus;

/* Pin the calling thread to `cpu`; 0 or -1. */
static int pin_to(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one);
}

/* The n-th CPU (0-based) this process may use, or -1. */
static int nth_cpu(int n)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set) && n-- == 0)
            return cpu;
    return -1;
}

/* ---- mm/slab.c, as src/front/slab/ implements it ---- */
static size_t slab_bytes(unsigned order)
{
    return (size_t)4096 << order;
}

struct layout {
    unsigned num, ix;
    int off;
    size_t colour;
};

static unsigned idx_bytes(unsigned num)
{
    return num <= 256 ? 1 : num <= 65536 ? 2 : 4;
}

/* Objects per slab, index size, on or off slab, leftover (colour room). */
/* The free-list block: a bitmap of the free objects (64-bit words), then
 * the index array, rounded up to 8 bytes (src/front/slab/slab.h meta_bytes). */
static size_t meta_of(unsigned num, unsigned ix)
{
    size_t bm = ((size_t)num + 63) / 64 * 8;
    return (bm + (size_t)num * ix + 7) & ~(size_t)7;
}

static struct layout layout_of(size_t slot, unsigned order)
{
    struct layout L = {0, 1, 0, 0};
    size_t slab = slab_bytes(order);
    unsigned num = (unsigned)(slab / slot);
    if (!num)
        return L;
    unsigned ix = idx_bytes(num);
    size_t left = slab - num * slot;
    if (left >= meta_of(num, ix)) { /* the free-list block fits in the leftover */
        L.num = num;
        L.ix = ix;
        L.colour = left - meta_of(num, ix);
    } else if (slot >= OFF_SLAB_MIN) { /* OFF_SLAB */
        L.num = num;
        L.ix = ix;
        L.off = 1;
        L.colour = left;
    } else { /* fewer objects, the block on the slab */
        while (num && (size_t)num * slot + meta_of(num, idx_bytes(num)) > slab)
            num--;
        L.num = num;
        L.ix = idx_bytes(num);
        L.colour = slab - (size_t)num * slot - meta_of(num, L.ix);
    }
    return L;
}

/* front/slab/slabs.c slabfe_slab_order, from its statement */
#define WASTE_DIV 64
#define ORDERS_UP 5
#define WASTE_MAX_BYTES (128u << 10)
static unsigned expected_order(size_t slot)
{
    /* the first order from the least that holds one whose leftover is at
     * most 1/64 of the slab, within five orders above it and 128 KiB (or
     * the least, when longer); else the least leftover of those
     * (src/core/slab.h: QS_SLAB_WASTE_DIV, QS_SLAB_ORDERS_UP,
     * QS_SLAB_WASTE_MAX_BYTES) */
    unsigned first = 99, best = 99, best_pm = ~0u;
    for (unsigned order = 0; order <= 14; order++) {
        struct layout L = layout_of(slot, order);
        if (!L.num)
            continue;
        if (first == 99)
            first = order;
        else if (order > first + ORDERS_UP || slab_bytes(order) > WASTE_MAX_BYTES)
            break;
        if (L.colour * WASTE_DIV <= slab_bytes(order))
            return order;
        unsigned pm = (unsigned)(L.colour * 1000 / slab_bytes(order));
        if (pm < best_pm) {
            best_pm = pm;
            best = order;
        }
    }
    return best;
}

/* mm/slab.c enable_cpucache, by slot size */
static unsigned long expected_limit(size_t slot)
{
    return slot > (128u << 10) ? 1 : slot > 4096 ? 8 : slot > 1024 ? 24 : slot > 256 ? 54 : 120;
}

/* ---- selection ---- */
static void test_selection(void)
{
    qslab_cache *c = qslab_cache_create("t-slab-sel", 40, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(qslab_tune("t-slab-sel", "front", "slab") == 0);
    CHECK(tf_is(c, "slab"));
    CHECK(tc_get("t-slab-sel", "front") == 3);
    CHECK(qslab_tune("t-slab-sel", "front", "slqb") == 0 && tf_is(c, "slqb") &&
          tc_get("t-slab-sel", "front") == 0);
    CHECK(qslab_tune("t-slab-sel", "front", "3") == 0); /* by number */
    CHECKF(tf_is(c, "slab") && tc_get("t-slab-sel", "front") == 3, "front=3: %s",
           qslab_cache_front(c));
    CHECK(qslab_tune("t-slab-sel", "front", "slub") == 0 && tf_is(c, "slub"));
    CHECK(qslab_tune("t-slab-sel", "front", "slab") == 0 && tf_is(c, "slab"));

    char err[512];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune("t-slab-sel", "front", "slabby");
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EINVAL && strstr(err, "slqb, slub, slab, slob"),
           "front=slabby: %d \"%s\"", r, err);
    CHECK(tf_is(c, "slab"));

    void *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    tu_stderr_begin();
    errno = 0;
    r = qslab_tune("t-slab-sel", "front", "slqb");
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EINVAL && strstr(err, "allocated already") &&
               strstr(err, "stays slab"),
           "front after the first allocation: %d \"%s\"", r, err);
    CHECK(tf_is(c, "slab") && tc_get("t-slab-sel", "front") == 3);
    CHECK(qslab_tune("t-slab-sel", "front", "slab") == 0); /* the same: fine */
    qslab_cache_free(c, p);
    validate(c, "after selection");
    CHECK(qslab_cache_destroy(c) == 0);

    /* QSLAB_FRONT=slab: every cache, kmalloc's included, is SLAB's */
    const char *env = getenv("QSLAB_FRONT");
    if (env && strcmp(env, "slab") == 0) {
        CHECK(strcmp(tf_kmalloc_front(), "slab") == 0);
        qslab_cache *d = qslab_cache_create("t-slab-sel-env", 24, 0, 0, NULL);
        CHECK(d && tf_is(d, "slab") && tc_get("t-slab-sel-env", "front") == 3);
        if (d)
            CHECK(qslab_cache_destroy(d) == 0);
    }
}

/* ---- tunables ---- */

/* SLAB's defaults for cache `name` of `size` bytes, made by the calling
 * thread: limit by slot size, batchcount (limit + 1) / 2, shared 8 for
 * objects up to a page when the process has more than one CPU. */
static void check_defaults(const char *name, size_t size, int line)
{
    qslab_cache *c = make(name, size, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    unsigned long lim = expected_limit(st.slot_size),
                  shared = st.slot_size <= 4096 && ncpus > 1 ? 8 : 0;
    unsigned long l = tc_get(name, "limit"), b = tc_get(name, "batchcount"),
                  s = tc_get(name, "shared");
    tu_check(l == lim && b == (lim + 1) / 2 && s == shared, __FILE__, line,
             "SLAB defaults (enable_cpucache)",
             "%s (slot %zu, %d CPUs): limit %lu batchcount %lu shared %lu, expected %lu %lu %lu",
             name, st.slot_size, ncpus, l, b, s, lim, (lim + 1) / 2, shared);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void *make_pinned(void *arg)
{
    pin_to(nth_cpu(0));
    check_defaults("t-slab-def-pinned", 256, __LINE__);
    return arg;
}

static void test_defaults(void)
{
    static const size_t sizes[] = {8, 64, 256, 264, 1024, 1032, 4096, 4104, 65536, 131072, 131080};
    char name[32];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(name, sizeof name, "t-slab-def-%zu", sizes[i]);
        check_defaults(name, sizes[i], __LINE__);
    }
    /* a cache made by a thread pinned to one CPU gets the machine's
     * defaults (mm/slab.c: num_possible_cpus(), not the caller's
     * affinity) */
    pthread_t t;
    pthread_create(&t, NULL, make_pinned, NULL);
    pthread_join(t, NULL);
}

#define REFUSED(cache, attr, value, ...)                                                           \
    refused(__LINE__, cache, attr, value, __VA_ARGS__, (const char *)NULL)
static void refused(int line, const char *cache, const char *attr, const char *value, ...)
{
    char err[2048];
    tc_refused_at(__FILE__, line, cache, attr, value, err, sizeof err);
    va_list ap;
    va_start(ap, value);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        tu_check(strstr(err, s) != NULL, __FILE__, line, "refusal explained",
                 "%s %s=%s: \"%s\" not in \"%s\"", cache, attr, value, s, err);
    va_end(ap);
}

/* Allocate and free n objects of c with contents checked; 1 if all went well. */
static int exercise(qslab_cache *c, int n)
{
    void **v = calloc((size_t)n, sizeof *v);
    size_t size = qslab_cache_object_size(c);
    int ok = 1;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++)
            if ((v[i] = qslab_cache_alloc(c)))
                memset(v[i], (uint8_t)i, size);
            else
                ok = 0;
        for (int i = 0; i < n; i++) {
            const uint8_t *b = v[i];
            for (size_t k = 0; b && k < size; k++)
                if (b[k] != (uint8_t)i) {
                    ok = 0;
                    break;
                }
        }
        for (int i = 0; i < n; i++)
            if (v[i])
                qslab_cache_free(c, v[i]);
    }
    free(v);
    return ok && tc_active(c) == 0 && qslab_cache_validate(c) == 0;
}

/* The slabinfo line of cache `name`: its columns, 0 if not found. */
struct slabinfo_line {
    unsigned long active, num, objsize, perslab, pages, limit, batch, shared, aslabs, nslabs,
        savail;
    char front[16];
};
static int slabinfo_of(const char *name, struct slabinfo_line *L)
{
    static char buf[1 << 16];
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    qslab_slabinfo(fds[1]);
    close(fds[1]);
    size_t n = tu_read_all(fds[0], buf, sizeof buf);
    close(fds[0]);
    buf[n] = '\0';
    char key[48];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *line = strstr(buf, key);
    if (!line)
        return 0;
    char nm[40];
    int got = sscanf(
        line + 1,
        "%39s %lu %lu %lu %lu %lu : tunables %lu %lu %lu : slabdata %lu %lu %lu : front %15s", nm,
        &L->active, &L->num, &L->objsize, &L->perslab, &L->pages, &L->limit, &L->batch, &L->shared,
        &L->aslabs, &L->nslabs, &L->savail, L->front);
    CHECKF(got == 13, "slabinfo line of %s parsed %d of 13 fields: %.160s", name, got, line + 1);
    return got == 13;
}

static void test_tunables(void)
{
    const char *N = "t-slab-tune";
    qslab_cache *c = make(N, 100, 0, NULL);
    if (!c)
        return;
    unsigned long shared = ncpus > 1 ? 8 : 0;
    CHECK(tc_get(N, "limit") == 120 && tc_get(N, "batchcount") == 60 &&
          tc_get(N, "shared") == shared);
    CHECK(exercise(c, 500));

    REFUSED(N, "batchcount", "121", "batchcount=121 refused", "1..120");
    REFUSED(N, "limit", "59", "limit=59 refused", "60..");
    REFUSED(N, "shared", "65", "shared=65 refused", "0..64");
    REFUSED(N, "batchcount", "0", "1..120");
    REFUSED(N, "limit", "abc", "limit=abc refused");
    REFUSED(N, "shared", "-1", "0..64");
    CHECK(tc_get(N, "limit") == 120 && tc_get(N, "batchcount") == 60 &&
          tc_get(N, "shared") == shared);
    CHECK(exercise(c, 500));

    tc_accepted(N, "limit", "200", 200);
    tc_accepted(N, "batchcount", "121", 121); /* fine now */
    tc_accepted(N, "shared", "64", 64);
    CHECK(exercise(c, 2000));
    REFUSED(N, "limit", "120", "121..");
    tc_accepted(N, "batchcount", "1", 1);
    tc_accepted(N, "limit", "1", 1);
    tc_accepted(N, "shared", "0", 0);
    CHECK(exercise(c, 500));
    tc_accepted(N, "limit", "77", 77);
    tc_accepted(N, "batchcount", "30", 30);
    tc_accepted(N, "shared", "3", 3);
    CHECK(exercise(c, 700));

    struct slabinfo_line L;
    struct qslab_cache_stats st = tc_stats(c);
    if (slabinfo_of(N, &L)) {
        CHECKF(L.limit == 77 && L.batch == 30 && L.shared == 3,
               "slabinfo tunables %lu %lu %lu, tuned 77 30 3", L.limit, L.batch, L.shared);
        CHECKF(strcmp(L.front, "slab") == 0, "slabinfo front %s", L.front);
        CHECKF(L.objsize == st.slot_size && L.perslab == st.objs_per_slab &&
                   L.pages == 1ul << st.order,
               "slabinfo %lu %lu %lu, stats %zu %u %u", L.objsize, L.perslab, L.pages, st.slot_size,
               st.objs_per_slab, 1u << st.order);
        CHECKF(L.active == st.active_objs && L.nslabs == st.num_slabs && L.num == st.num_objs,
               "slabinfo %lu/%lu objects, %lu slabs; stats %lu/%lu, %lu", L.active, L.num, L.nslabs,
               st.active_objs, st.num_objs, st.num_slabs);
    }
    tc_accepted(N, "limit", "120", 120);
    tc_accepted(N, "batchcount", "60", 60);
    tc_accepted(N, "shared", "8", 8);
    if (slabinfo_of(N, &L))
        CHECKF(L.limit == 120 && L.batch == 60 && L.shared == 8 && strcmp(L.front, "slab") == 0,
               "slabinfo tunables %lu %lu %lu front %s", L.limit, L.batch, L.shared, L.front);
    CHECK(exercise(c, 500));
    validate(c, "after tuning");
    CHECK(qslab_cache_destroy(c) == 0);

    /* SLAB's tunables on another front end: accepted, not shown */
    qslab_cache *q = qslab_cache_create("t-slab-tune-slqb", 100, 0, 0, NULL);
    if (q && qslab_tune("t-slab-tune-slqb", "front", "slqb") == 0) {
        tc_accepted("t-slab-tune-slqb", "limit", "300", 300);
        if (slabinfo_of("t-slab-tune-slqb", &L))
            CHECKF(L.limit != 300 && strcmp(L.front, "slqb") == 0,
                   "slqb cache's slabinfo: limit %lu front %s", L.limit, L.front);
        CHECK(exercise(q, 300));
    }
    if (q)
        CHECK(qslab_cache_destroy(q) == 0);
}

/* active_slabs: the slabs not free (mm/slab.c: num_slabs - free slabs;
 * qslab_cache_stats: num_slabs - empty_slabs) */
static void test_free_slabs_reported(void)
{
    const char *N = "t-slab-freeslabs";
    qslab_cache *c = make(N, 256, 0, NULL);
    if (!c)
        return;
    tc_accepted(N, "batchcount", "1", 1);
    tc_accepted(N, "limit", "1", 1);
    tc_accepted(N, "shared", "0", 0);
    struct qslab_cache_stats st = tc_stats(c);
    unsigned per = st.objs_per_slab;
    void **v = calloc(2 * per, sizeof *v);
    for (unsigned i = 0; i < 2 * per; i++)
        v[i] = qslab_cache_alloc(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 2, "%u objects of %u per slab: %lu slabs", 2 * per, per, st.num_slabs);
    uintptr_t mask = ~(uintptr_t)(slab_bytes(st.order) - 1);
    /* free every object of v[0]'s slab, then one more so the array (limit
     * 1) gives the last of them back: that slab is free, kept (under
     * free_limit) */
    uintptr_t first = (uintptr_t)v[0] & mask;
    unsigned freed = 0, other = 2 * per;
    for (unsigned i = 0; i < 2 * per; i++)
        if (((uintptr_t)v[i] & mask) == first) {
            qslab_cache_free(c, v[i]);
            v[i] = NULL;
            freed++;
        } else if (other == 2 * per) {
            other = i;
        }
    CHECK(freed == per && other < 2 * per);
    if (other < 2 * per) {
        qslab_cache_free(c, v[other]);
        v[other] = NULL;
    }
    st = tc_stats(c);
    CHECKF(st.num_slabs == 2, "a free slab under free_limit is kept: %lu slabs", st.num_slabs);
    CHECKF(st.empty_slabs == 1, "stats: %lu slabs, %lu empty; one slab is free (SLAB's slabs_free)",
           st.num_slabs, st.empty_slabs);
    struct slabinfo_line L;
    if (slabinfo_of(N, &L))
        CHECKF(L.aslabs == 1 && L.nslabs == 2,
               "slabinfo slabdata %lu %lu: one of two slabs is free", L.aslabs, L.nslabs);
    validate(c, "with a free slab");
    for (unsigned i = 0; i < 2 * per; i++)
        if (v[i])
            qslab_cache_free(c, v[i]);
    free(v);
    qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0 && st.active_objs == 0, "after shrink: %lu slabs %lu active",
           st.num_slabs, st.active_objs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Lazy birth (front/slab/slab.h): a new slab's objects are born as refills
 * take them, so one object in use makes resident the pages of that object
 * and of the free-list block, not the whole slab; the slab is born the
 * rest of the way as it fills, and its born objects go to the FIFO and
 * come back from it as the same.  A cache with a constructor is born
 * whole (test_ctor). */
static int resident_pages(const void *p, size_t bytes)
{
    unsigned char vec[64];
    size_t pages = bytes / 4096;
    if (pages > sizeof vec || mincore((void *)p, bytes, vec) != 0)
        return -1;
    int n = 0;
    for (size_t i = 0; i < pages; i++)
        n += vec[i] & 1;
    return n;
}

static void test_lazy_birth(void)
{
    const char *N = "t-slab-lazy";
    qslab_cache *c = make(N, 1000, 0, NULL);
    if (!c)
        return;
    tc_accepted(N, "order", "5", 5); /* 128 KiB: 131 objects, the index block on the slab */
    tc_accepted(N, "batchcount", "1", 1);
    tc_accepted(N, "limit", "1", 1);
    tc_accepted(N, "shared", "0", 0);
    qslab_trim(); /* no warm slot: the new slab's pages are not resident */
    struct qslab_cache_stats st = tc_stats(c);
    unsigned per = st.objs_per_slab;
    size_t bytes = slab_bytes(st.order);
    char *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    if (!p) {
        qslab_cache_destroy(c);
        return;
    }
    memset(p, 0x5a, 1000);
    char *slab = (char *)((uintptr_t)p & ~(uintptr_t)(bytes - 1));
    st = tc_stats(c);
    CHECKF(st.num_slabs == 1 && st.num_objs == 1 && per > 100,
           "one object in use: %lu objects born in %lu slabs of %u (one born)", st.num_objs,
           st.num_slabs, per);
    int res = resident_pages(slab, bytes);
    CHECKF(res >= 1 && res <= 4, "one object in use: %d of %zu pages of its slab resident", res,
           bytes / 4096);
    validate(c, "with one object born");
    /* the rest of the slab and one more: born as taken, contents kept */
    unsigned n = per + 1;
    char **v = calloc(n, sizeof *v);
    v[0] = p;
    for (unsigned i = 1; i < n; i++) {
        v[i] = qslab_cache_alloc(c);
        CHECK(v[i] != NULL);
        if (v[i])
            memset(v[i], (int)(i & 0x7f), 1000);
    }
    st = tc_stats(c);
    CHECKF(st.num_slabs == 2 && st.num_objs >= n && st.num_objs <= n + 1,
           "%u objects in use: %lu born in %lu slabs of %u", n, st.num_objs, st.num_slabs, per);
    validate(c, "with a slab born whole and one in part");
    int bad = 0;
    for (unsigned i = 1; i < n; i++)
        for (int k = 0; v[i] && k < 1000; k++)
            if ((unsigned char)v[i][k] != (i & 0x7f)) {
                bad++;
                break;
            }
    CHECKF(bad == 0, "%d objects overwritten", bad);
    /* the second slab empty (its one object back): to the FIFO through the
     * free limit, its born objects linked; taken again, the same */
    tc_accepted(N, "limit", "1", 1);
    for (unsigned i = 0; i < n; i++)
        qslab_cache_free(c, v[i]);
    validate(c, "with every object free");
    for (unsigned i = 0; i < n; i++)
        CHECK((v[i] = qslab_cache_alloc(c)) != NULL);
    validate(c, "after the slabs' reuse");
    for (unsigned i = 0; i < n; i++)
        if (v[i])
            qslab_cache_free(c, v[i]);
    free(v);
    qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0 && st.num_objs == 0 && st.active_objs == 0,
           "after shrink: %lu slabs, %lu objects born, %lu active", st.num_slabs, st.num_objs,
           st.active_objs);
    validate(c, "after shrink");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A slab of one block (the big kmalloc classes: no arrays) that a free
 * empties goes to the node's FIFO at once, not to the node's free slabs
 * within free_limit: with empty_decay_ms 1 the purger gives it back within
 * its next ticks, where free slabs would wait for the reaper. */
static void test_single_block(void)
{
    const char *N = "t-slab-single";
    qslab_cache *c = make(N, 100000, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    CHECKF(st.objs_per_slab == 1, "100,000-byte objects: %u per slab", st.objs_per_slab);
    tc_accepted(N, "empty_decay_ms", "1", 1);
    void *v[6];
    for (int i = 0; i < 6; i++)
        v[i] = qslab_cache_alloc(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 6 && st.queued_objs == 0, "6 blocks: %lu slabs, %lu queued",
           st.num_slabs, st.queued_objs);
    for (int i = 0; i < 6; i++)
        qslab_cache_free(c, v[i]);
    for (int ms = 0; ms < 1500 && tc_stats(c).num_slabs; ms += 10) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0 && st.free_slab == 6,
           "one block a slab, all freed, 1.5 s later: %lu slabs (%lu empty), %lu given back",
           st.num_slabs, st.empty_slabs, st.free_slab);
    validate(c, "single blocks freed");
    CHECK(qslab_cache_destroy(c) == 0);

    /* a 4 KiB block is alone in its slab too (a page), but blocks up to
     * 32 KiB go through the arrays (core/page.h qs_slab_unarrayed): the
     * frees stay in the arrays, and the next allocations take them back
     * without a new slab */
    const char *M = "t-slab-single-4k";
    c = make(M, 4096, 0, NULL);
    if (!c)
        return;
    st = tc_stats(c);
    CHECKF(st.objs_per_slab == 1 && tc_get(M, "limit") == 24,
           "4,096-byte objects: %u per slab, limit %lu", st.objs_per_slab, tc_get(M, "limit"));
    for (int i = 0; i < 6; i++)
        v[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 6; i++)
        qslab_cache_free(c, v[i]);
    st = tc_stats(c);
    CHECKF(st.queued_objs >= 1, "4 KiB blocks, one a slab, all freed: %lu in arrays", st.queued_objs);
    unsigned long made = st.new_slab;
    for (int i = 0; i < 6; i++)
        v[i] = qslab_cache_alloc(c);
    st = tc_stats(c);
    CHECKF(st.alloc_fast >= 1 && st.new_slab == made,
           "4 KiB blocks taken again: %lu from the arrays' fast path, %lu new slabs", st.alloc_fast,
           st.new_slab - made);
    for (int i = 0; i < 6; i++)
        qslab_cache_free(c, v[i]);
    validate(c, "4 KiB single blocks freed");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- slab order, objects per slab, index arrays ---- */
static void check_layout(const char *name, size_t size, unsigned tuned_order, int allocate)
{
    qslab_cache *c = make(name, size, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    unsigned want = expected_order(st.slot_size);
    CHECKF(st.order == want && tc_get(name, "order") == want,
           "%s: slot %zu, order %u (tunable %lu), expected %u", name, st.slot_size, st.order,
           tc_get(name, "order"), want);
    CHECKF(st.objs_per_slab == layout_of(st.slot_size, want).num,
           "%s: %u objects per slab at order %u, expected %u", name, st.objs_per_slab, want,
           layout_of(st.slot_size, want).num);
    if (tuned_order != ~0u) {
        char v[16];
        snprintf(v, sizeof v, "%u", tuned_order);
        tc_accepted(name, "order", v, tuned_order);
        st = tc_stats(c);
        want = tuned_order;
        CHECKF(st.order == want && st.objs_per_slab == layout_of(st.slot_size, want).num,
               "%s: tuned order %u: stats order %u, %u objects per slab, expected %u", name,
               tuned_order, st.order, st.objs_per_slab, layout_of(st.slot_size, want).num);
    }
    if (allocate) {
        /* a whole slab and some: contents intact, every object of the
         * slab's bytes, none over the index array at its end */
        struct layout L = layout_of(st.slot_size, want);
        unsigned n = L.num + L.num / 2 + 1;
        uint32_t **v = calloc(n, sizeof *v);
        size_t size4 = size / 4;
        uintptr_t mask = ~(uintptr_t)(slab_bytes(want) - 1);
        unsigned bad = 0, over = 0;
        for (unsigned i = 0; i < n; i++) {
            v[i] = qslab_cache_alloc(c);
            if (!v[i]) {
                bad++;
                continue;
            }
            size_t off = (uintptr_t)v[i] & ~mask;
            if (off + st.slot_size > slab_bytes(want) - (L.off ? 0 : meta_of(L.num, L.ix)))
                over++;
            for (size_t k = 0; k < size4; k++)
                v[i][k] = i ^ (uint32_t)k << 20;
        }
        st = tc_stats(c);
        /* objects are born as refills take them (lazy birth): the
         * first slab whole, the second in part or whole */
        CHECKF(st.num_objs >= n - bad && st.num_objs <= st.num_slabs * L.num && st.num_slabs >= 2,
               "%s: %lu objects born in %lu slabs of %u, %u allocated", name, st.num_objs,
               st.num_slabs, L.num, n - bad);
        for (unsigned i = 0; i < n; i += 2) /* every other one: index entries written */
            if (v[i]) {
                qslab_cache_free(c, v[i]);
                v[i] = NULL;
            }
        qslab_cache_shrink(c); /* the arrays' objects to their slabs' index arrays */
        for (unsigned i = 1; i < n; i += 2)
            for (size_t k = 0; v[i] && k < size4; k++)
                if (v[i][k] != (i ^ (uint32_t)k << 20)) {
                    bad++;
                    break;
                }
        CHECKF(bad == 0 && over == 0, "%s: %u objects NULL or overwritten, %u over the index array",
               name, bad, over);
        validate(c, "with half of its objects");
        for (unsigned i = 1; i < n; i += 2)
            if (v[i])
                qslab_cache_free(c, v[i]);
        free(v);
        tc_check_sane(c, (int)(n < 3000 ? n : 3000), 0, 0, "a layout check");
        validate(c, "after the layout check");
    }
    CHECK(qslab_cache_destroy(c) == 0);
}

static void test_order(void)
{
    static const size_t sizes[] = {8,    24,   64,   100,  200,  256,   500,
                                   700,  1000, 1100, 1500, 2000, 2100,  2800,
                                   3000, 4000, 4096, 5000, 9000, 17000, 40000};
    char name[32];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(name, sizeof name, "t-slab-ord-%zu", sizes[i]);
        check_layout(name, sizes[i], ~0u, sizes[i] == 64 || sizes[i] == 256 || sizes[i] == 3000);
    }
    /* index entries of 1 (64 B at order 0), 2 (8 B: 409 objects) and 4
     * bytes (8 B at order 8: 87381 objects), on slab and off (256 B) */
    check_layout("t-slab-ix1", 64, ~0u, 1);
    check_layout("t-slab-ix2", 8, ~0u, 1);
    check_layout("t-slab-ix4", 8, 8, TU_SANITIZED ? 0 : 1);
    check_layout("t-slab-off", 256, 2, 1);
    check_layout("t-slab-o2", 200, 2, 1);
}

/* ---- one owner's array ---- */
struct array_run {
    qslab_cache *c;
    const char *name;
};

static void *array_thread(void *arg)
{
    struct array_run *r = arg;
    qslab_cache *c = r->c;
    if (tu_pin_one_cpu() < 0)
        fprintf(stderr, "slab: could not pin the array thread\n");
    enum { N = 1000 };
    static void *v[N];
    const unsigned long limit = tc_get(r->name, "limit"), batch = tc_get(r->name, "batchcount"),
                        shared = tc_get(r->name, "shared");
    struct qslab_cache_stats a = tc_stats(c), b;
    unsigned long maxq = 0;
    for (int i = 0; i < N; i++) {
        v[i] = qslab_cache_alloc(c);
        b = tc_stats(c);
        if (b.queued_objs > maxq)
            maxq = b.queued_objs;
    }
    b = tc_stats(c);
    CHECKF(b.alloc - a.alloc == N && b.active_objs == N, "%lu allocations counted, %lu active",
           b.alloc - a.alloc, b.active_objs);
    CHECKF(b.refill - a.refill >= N / batch && b.refill - a.refill <= N,
           "%d allocations, batch %lu: %lu refills", N, batch, b.refill - a.refill);
    CHECKF(b.flush == a.flush, "allocations alone flushed %lu times", b.flush - a.flush);
    a = b;
    for (int i = 0; i < N; i++) {
        qslab_cache_free(c, v[i]);
        b = tc_stats(c);
        if (b.queued_objs > maxq)
            maxq = b.queued_objs;
    }
    CHECKF(maxq <= limit, "queued_objs reached %lu, limit %lu", maxq, limit);
    CHECKF(maxq >= limit / 2, "queued_objs at most %lu: the array (limit %lu) was not used", maxq,
           limit);
    CHECKF(b.active_objs == 0 && b.free - a.free == N, "%lu frees counted, %lu active",
           b.free - a.free, b.active_objs);
    CHECKF(b.flush - a.flush >= (N - limit) / batch && b.flush - a.flush <= N,
           "%d frees, limit %lu batch %lu: %lu flushes", N, limit, batch, b.flush - a.flush);
    validate(c, "after the frees");

    /* the flushes' batches went to the shared array (shared * batch
     * objects): the next refills are served from it */
    a = b;
    for (int i = 0; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    b = tc_stats(c);
    if (shared)
        CHECKF(b.claim - a.claim >= 1 && b.claim - a.claim <= b.refill - a.refill,
               "shared %lu: %lu refills, %lu from the shared array", shared, b.refill - a.refill,
               b.claim - a.claim);
    else
        CHECKF(b.claim == a.claim, "no shared array, %lu claims", b.claim - a.claim);
    /* the array held `limit` or so, the shared array up to shared*batch:
     * fewer new slabs than a cold start */
    CHECKF(b.new_slab == a.new_slab || b.new_slab - a.new_slab < (N - limit) / b.objs_per_slab,
           "second round: %lu new slabs", b.new_slab - a.new_slab);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, v[i]);

    /* limit lowered while the array is full: the array keeps to it */
    b = tc_stats(c);
    CHECKF(b.queued_objs > 20, "array holds %lu before the tune", b.queued_objs);
    CHECK(qslab_tune(r->name, "batchcount", "10") == 0 && qslab_tune(r->name, "limit", "20") == 0);
    b = tc_stats(c);
    /* mm/slab.c do_tune_cpucache swaps in new arrays and frees the old
     * ones' objects: the new limit holds at once */
    CHECKF(b.queued_objs <= 20, "limit lowered to 20: the array still holds %lu", b.queued_objs);
    for (int i = 0; i < 100; i++)
        v[i] = qslab_cache_alloc(c);
    maxq = 0;
    for (int i = 0; i < 100; i++) {
        qslab_cache_free(c, v[i]);
        b = tc_stats(c);
        if (b.queued_objs > maxq)
            maxq = b.queued_objs;
    }
    CHECKF(b.queued_objs <= 20,
           "limit 20: the array holds %lu after 100 allocations and frees (most %lu)",
           b.queued_objs, maxq);
    validate(c, "after lowering limit");
    /* and raised again */
    CHECK(qslab_tune(r->name, "limit", "300") == 0 &&
          qslab_tune(r->name, "batchcount", "100") == 0);
    for (int i = 0; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    maxq = 0;
    for (int i = 0; i < N; i++) {
        qslab_cache_free(c, v[i]);
        if (i % 10 == 0) {
            b = tc_stats(c);
            if (b.queued_objs > maxq)
                maxq = b.queued_objs;
        }
    }
    CHECKF(maxq <= 300 && maxq > 120, "limit 300: queued_objs at most %lu", maxq);
    validate(c, "after raising limit");
    qslab_cache_shrink(c);
    b = tc_stats(c);
    CHECKF(b.num_slabs == 0 && b.queued_objs == 0 && b.active_objs == 0,
           "after shrink: %lu slabs, %lu queued, %lu active", b.num_slabs, b.queued_objs,
           b.active_objs);
    return NULL;
}

/* An array's grant (front/slab/slab.c array_grow): a class with one object
 * in use keeps a page's worth of objects in its array at most, not a
 * batch; its misses grow the array up to `limit`. */
static void *grant_thread(void *arg)
{
    struct array_run *r = arg;
    qslab_cache *c = r->c;
    if (tu_pin_one_cpu() < 0)
        fprintf(stderr, "slab: could not pin the grant thread\n");
    const unsigned long limit = tc_get(r->name, "limit"), batch = tc_get(r->name, "batchcount");
    CHECKF(limit == 54 && batch == 27, "1000-byte objects: limit %lu batchcount %lu", limit, batch);
    enum { N = 300 };
    static void *v[N];
    struct qslab_cache_stats b;
    v[0] = qslab_cache_alloc(c);
    b = tc_stats(c);
    CHECKF(v[0] && b.queued_objs <= 3 && b.num_objs <= 4,
           "one object in use: %lu queued (a batch is %lu), %lu born", b.queued_objs, batch,
           b.num_objs);
    unsigned long maxq = 0;
    for (int i = 1; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N; i++) {
        qslab_cache_free(c, v[i]);
        b = tc_stats(c);
        if (b.queued_objs > maxq)
            maxq = b.queued_objs;
    }
    CHECKF(maxq >= batch && maxq <= limit, "the array grew to %lu (batch %lu, limit %lu)", maxq,
           batch, limit);
    validate(c, "after the grant thread");
    return NULL;
}

/* A refill that reaches objects not born yet takes a page's worth of them
 * (front/slab/slabs.c slabfe_take_locked), not a batch: 256-byte objects,
 * 16 a page, batches of 60, 127 a slab. */
static void *born_cap_thread(void *arg)
{
    struct array_run *r = arg;
    qslab_cache *c = r->c;
    if (tu_pin_one_cpu() < 0)
        fprintf(stderr, "slab: could not pin the birth thread\n");
    CHECKF(tc_get(r->name, "batchcount") == 60, "256-byte objects: batchcount %lu",
           tc_get(r->name, "batchcount"));
    enum { N = 600 };
    static void *v[N];
    unsigned long maxq = 0;
    for (int i = 0; i < N; i++) {
        v[i] = qslab_cache_alloc(c);
        struct qslab_cache_stats b = tc_stats(c);
        if (b.queued_objs > maxq)
            maxq = b.queued_objs;
    }
    struct qslab_cache_stats b = tc_stats(c);
    CHECKF(maxq <= 15 && b.num_objs <= N + 15,
           "%d allocations from new slabs: up to %lu queued, %lu born (a page holds 16)", N, maxq,
           b.num_objs);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, v[i]);
    validate(c, "after the birth thread");
    return NULL;
}

static void test_array_grant(void)
{
    struct array_run rb = {make("t-slab-borncap", 256, 0, NULL), "t-slab-borncap"};
    if (rb.c) {
        tc_accepted(rb.name, "order", "3", 3); /* 32 KiB slabs: a batch fits in one */
        pthread_t t;
        pthread_create(&t, NULL, born_cap_thread, &rb);
        pthread_join(t, NULL);
        qslab_cache_shrink(rb.c);
        CHECK(tc_active(rb.c) == 0 && qslab_cache_destroy(rb.c) == 0);
    }
    struct array_run r = {make("t-slab-grant", 1000, 0, NULL), "t-slab-grant"};
    if (!r.c)
        return;
    pthread_t t;
    pthread_create(&t, NULL, grant_thread, &r);
    pthread_join(t, NULL);
    qslab_cache_shrink(r.c);
    CHECK(tc_active(r.c) == 0 && qslab_cache_destroy(r.c) == 0);
}

static void test_array(void)
{
    struct array_run r = {make("t-slab-array", 128, 0, NULL), "t-slab-array"};
    if (!r.c)
        return;
    CHECK(tc_get(r.name, "limit") == 120 && tc_get(r.name, "batchcount") == 60);
    pthread_t t;
    pthread_create(&t, NULL, array_thread, &r);
    pthread_join(t, NULL);
    validate(r.c, "after the array thread");
    CHECK(tc_active(r.c) == 0 && qslab_cache_destroy(r.c) == 0);
}

/* ---- colouring ---- */
static void check_colours(const char *name, size_t size, unsigned nslabs_want)
{
    qslab_cache *c = make(name, size, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    struct layout L = layout_of(st.slot_size, st.order);
    size_t sb = slab_bytes(st.order);
    unsigned ncolours = (unsigned)(L.colour / 64 + 1);
    CHECKF(L.colour >= 64, "%s: %zu bytes of colour room, none to colour with (test setup)", name,
           L.colour);
    unsigned n = L.num * nslabs_want + 400;
    void **v = calloc(n, sizeof *v);
    for (unsigned i = 0; i < n; i++)
        v[i] = qslab_cache_alloc(c);
    /* group by slab; a slab all of whose objects we hold shows its first
     * object's offset: its colour */
    void **s = calloc(n, sizeof *s);
    memcpy(s, v, n * sizeof *v);
    qsort(s, n, sizeof *s, tu_cmp_ptr);
    size_t colours[256];
    unsigned nfull = 0, bad = 0;
    for (unsigned i = 0; i < n;) {
        uintptr_t base = (uintptr_t)s[i] & ~(uintptr_t)(sb - 1);
        unsigned j = i;
        while (j < n && ((uintptr_t)s[j] & ~(uintptr_t)(sb - 1)) == base)
            j++;
        size_t off = (uintptr_t)s[i] - base;
        if (j - i == L.num && nfull < 256) {
            colours[nfull++] = off;
            if (off % 64 || off > L.colour)
                bad++;
        }
        i = j;
    }
    CHECKF(nfull >= nslabs_want / 2, "%s: %u whole slabs among %u objects", name, nfull, n);
    CHECKF(bad == 0, "%s: %u slabs start at an offset that is no multiple of 64 within %zu bytes",
           name, bad, L.colour);
    unsigned distinct = 0;
    for (unsigned i = 0; i < nfull; i++) {
        unsigned k = 0;
        while (k < i && colours[k] != colours[i])
            k++;
        distinct += k == i;
    }
    unsigned want = nfull < ncolours ? nfull : ncolours;
    CHECKF(distinct >= want, "%s: %u whole slabs show %u colours, %u available: %zu %zu %zu %zu",
           name, nfull, distinct, ncolours, nfull > 0 ? colours[0] : 0, nfull > 1 ? colours[1] : 0,
           nfull > 2 ? colours[2] : 0, nfull > 3 ? colours[3] : 0);
    for (unsigned i = 0; i < n; i++)
        qslab_cache_free(c, v[i]);
    free(v);
    free(s);
    validate(c, "after the colour check");
    CHECK(qslab_cache_destroy(c) == 0);
}

static void test_colour(void)
{
    /* 200 B at order 0: 20 objects, 96 bytes left, 20 of them the index
     * array: colours 0 and 64 */
    check_colours("t-slab-col-200", 200, 8);
    /* 3000 B at order 1: 2 objects, 2190 bytes of colour room: 35 colours */
    check_colours("t-slab-col-3000", 3000, 20);
}

/* ---- constructors ---- */
#define CSIZE 48
static unsigned long ctor_calls;
static void ctor(void *p)
{
    __atomic_add_fetch(&ctor_calls, 1, __ATOMIC_RELAXED);
    memset(p, 0xc5, CSIZE);
}
static int constructed(const void *p)
{
    const uint8_t *b = p;
    for (int i = 0; i < CSIZE; i++)
        if (b[i] != 0xc5)
            return 0;
    return 1;
}
static uint8_t mine_byte(const void *p, int i)
{
    return (uint8_t)(((uintptr_t)p >> 4) + (unsigned)i * 13 + 1) |
           1; /* never 0xc5's pattern everywhere */
}
static int mine(const void *p)
{
    const uint8_t *b = p;
    for (int i = 0; i < CSIZE; i++)
        if (b[i] != mine_byte(p, i))
            return 0;
    return 1;
}

static void *free_all_thread(void *arg);
struct vec {
    qslab_cache *c;
    void **v;
    int n;
};

static void test_ctor(void)
{
    enum { N = 700 };
    static void *v[N];
    qslab_cache *c = make("t-slab-ctor", CSIZE, 0, ctor);
    if (!c)
        return;
    __atomic_store_n(&ctor_calls, 0, __ATOMIC_RELAXED);
    for (int round = 0; round < 4; round++) {
        unsigned long born0 = ctor_calls;
        struct qslab_cache_stats a = tc_stats(c);
        int ctor_state = 0, ours = 0, other = 0;
        for (int i = 0; i < N; i++) {
            v[i] = qslab_cache_alloc(c);
            if (!v[i])
                other++;
            else if (constructed(v[i]))
                ctor_state++;
            else if (mine(v[i]))
                ours++;
            else
                other++;
        }
        struct qslab_cache_stats b = tc_stats(c);
        unsigned long born = ctor_calls - born0;
        CHECKF(ctor_calls == b.new_slab * b.objs_per_slab,
               "round %d: the constructor ran %lu times for %lu slabs of %u objects", round,
               ctor_calls, b.new_slab, b.objs_per_slab);
        CHECKF(born == (b.new_slab - a.new_slab) * b.objs_per_slab,
               "round %d: %lu constructed for %lu new slabs", round, born, b.new_slab - a.new_slab);
        CHECKF(other == 0 && ctor_state + ours == N && (round > 0 || ours == 0),
               "round %d: %d objects neither constructed nor as freed; %d constructed (%lu born), "
               "%d as freed",
               round, other, ctor_state, born, ours);
        if (round > 0)
            CHECKF(ours > 0, "round %d: no object came back as it was freed", round);
        for (int i = 0; i < N; i++)
            for (int k = 0; v[i] && k < CSIZE; k++)
                ((uint8_t *)v[i])[k] = mine_byte(v[i], k);
        if (round % 2 == 0) {
            for (int i = 0; i < N; i++)
                qslab_cache_free(c, v[i]);
        } else { /* by another thread */
            struct vec a2 = {c, v, N};
            pthread_t t;
            pthread_create(&t, NULL, free_all_thread, &a2);
            pthread_join(t, NULL);
        }
        validate(c, "after a ctor round");
    }
    CHECK(tc_active(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- frees by another thread ---- */
static void *free_all_thread(void *arg)
{
    struct vec *a = arg;
    for (int i = 0; i < a->n; i++)
        qslab_cache_free(a->c, a->v[i]);
    return NULL;
}

static void test_other_thread(void)
{
    enum { N = 1500 };
    static void *v[N];
    qslab_cache *c = make("t-slab-xthread", 72, 0, NULL);
    if (!c)
        return;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            v[i] = qslab_cache_alloc(c);
            if (v[i])
                memset(v[i], round + 1, 72);
        }
        struct vec a = {c, v, N};
        pthread_t t;
        pthread_create(&t, NULL, free_all_thread, &a);
        pthread_join(t, NULL);
        struct qslab_cache_stats st = tc_stats(c);
        CHECKF(st.active_objs == 0 && st.alloc == st.free, "round %d: %lu active", round,
               st.active_objs);
        if (qslab_num_nodes() == 1)
            CHECKF(st.remote_free == 0, "one node: %lu frees went to alien arrays", st.remote_free);
        validate(c, "after frees by another thread");
        tc_check_sane(c, 600, 0, 0, "frees by another thread");
    }
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- alien arrays (two nodes or more) ---- */
struct alien_run {
    qslab_cache *c;
    void **v;
    int n, cpu, node;
};

static void *alien_helper(void *arg)
{
    struct alien_run *r = arg;
    if (pin_to(r->cpu) != 0) {
        r->node = -1;
        return NULL;
    }
    r->node = qslab_current_node();
    for (int i = 0; i < r->n; i++)
        qslab_cache_free(r->c, r->v[i]);
    return NULL;
}

static void *alien_thread(void *arg)
{
    (void)arg;
    enum { N = 300 };
    static void *v[N];
    char s[32];
    int nn = qslab_num_nodes();
    CHECK(nn >= 2);
    qslab_cache *c = make("t-slab-alien", 96, 0, NULL);
    if (!c || nn < 2)
        return NULL;
    int cpus[64], ncpu = 0;
    for (int k = 0; ncpu < 64 && (cpus[ncpu] = nth_cpu(k)) >= 0; k++)
        ncpu++;
    CHECK(ncpu >= 1 &&
          pin_to(cpus[0]) == 0); /* one CPU, one node: every free of the other node's is remote */
    int me = qslab_current_node(), other = (me + 1) % nn;
    CHECK(me >= 0 && me < nn);

    /* every node's memory on demand */
    for (int n = 0; n < nn; n++)
        for (int i = 0; i < 50; i++) {
            void *p = qslab_cache_alloc_node(c, n);
            if (!p || qslab_object_node(p) != n) {
                tu_fail("alloc_node(%d): %p on node %d", n, p, p ? qslab_object_node(p) : -9);
                break;
            }
            qslab_cache_free(c, p);
        }
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, nn) == NULL && errno == EINVAL);
    validate(c, "after node allocations");

    /* the other node's objects, freed here: alien arrays of 12 */
    struct qslab_cache_stats a = tc_stats(c), b;
    for (int i = 0; i < N; i++) {
        v[i] = qslab_cache_alloc_node(c, other);
        if (!v[i] || qslab_object_node(v[i]) != other)
            tu_fail("alloc_node(%d) gave %p on node %d", other, v[i],
                    v[i] ? qslab_object_node(v[i]) : -9);
        else
            memset(v[i], 0x5a, 96);
    }
    b = tc_stats(c);
    CHECKF(b.node_alloc - a.node_alloc == N && b.alloc - a.alloc == N,
           "%d node allocations: %lu counted, %lu allocs", N, b.node_alloc - a.node_alloc,
           b.alloc - a.alloc);
    a = b;
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, v[i]);
    b = tc_stats(c);
    CHECKF(b.remote_free - a.remote_free == N,
           "%d frees of node %d's objects on node %d: remote_free %lu", N, other, me,
           b.remote_free - a.remote_free);
    CHECKF(b.remote_batch - a.remote_batch >= N / ALIEN_LIMIT - 1 &&
               b.remote_batch - a.remote_batch <= N,
           "%d remote frees: %lu alien batches (12 each)", N, b.remote_batch - a.remote_batch);
    CHECKF(b.active_objs == 0 && b.free - a.free == N, "%lu frees counted, %lu active",
           b.free - a.free, b.active_objs);
    validate(c, "with objects in alien arrays");

    /* a local allocation never gets the other node's objects */
    for (int i = 0; i < N; i++) {
        v[i] = qslab_cache_alloc(c);
        if (!v[i] || qslab_object_node(v[i]) != me)
            tu_fail("plain allocation on node %d: %p on node %d", me, v[i],
                    v[i] ? qslab_object_node(v[i]) : -9);
    }
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, v[i]);

    /* the alien arrays are drained by shrink: every slab goes back */
    qslab_cache_shrink(c);
    b = tc_stats(c);
    CHECKF(b.num_slabs == 0 && b.active_objs == 0 && b.queued_objs == 0,
           "after shrink: %lu slabs, %lu active, %lu queued", b.num_slabs, b.active_objs,
           b.queued_objs);
    validate(c, "after shrink with alien arrays");

    /* another thread, on the other node, frees this node's objects */
    int cpu1 = -1;
    for (int k = 1; k < ncpu && cpu1 < 0; k++) {
        struct alien_run probe = {c, NULL, 0, cpus[k], -1};
        pthread_t t;
        pthread_create(&t, NULL, alien_helper, &probe);
        pthread_join(t, NULL);
        if (probe.node >= 0 && probe.node != me)
            cpu1 = cpus[k];
    }
    if (cpu1 >= 0) {
        for (int i = 0; i < N; i++)
            v[i] = qslab_cache_alloc(c);
        a = tc_stats(c);
        struct alien_run r = {c, v, N, cpu1, -1};
        pthread_t t;
        pthread_create(&t, NULL, alien_helper, &r);
        pthread_join(t, NULL);
        b = tc_stats(c);
        CHECKF(r.node != me && b.remote_free - a.remote_free == N,
               "a thread on node %d freed %d objects of node %d: remote_free %lu", r.node, N, me,
               b.remote_free - a.remote_free);
        CHECK(b.active_objs == 0);
        validate(c, "after another node's thread freed ours");
        tc_check_sane(c, 500, 0, 0, "frees from another node");
    } else {
        fprintf(stderr,
                "slab: no allowed CPU on another node: alien frees by another thread skipped\n");
    }

    /* misuse through an alien array: a second free of an object sitting in
     * one is found (thread and CPU owners both load the word on this path) */
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    void *x = qslab_cache_alloc_node(c, other), *y = qslab_cache_alloc_node(c, other);
    qslab_cache_free(c, x);
    qslab_cache_free(c, y);
    qslab_cache_free(c, x);
    tu_check_fatal("double free", tu_addr(s, x), "t-slab-alien");
    CHECK(tc_active(c) == 0);
    validate(c, "after a double free into an alien array");
    tc_check_sane(c, 300, 0, 0, "a double free into an alien array");
    qslab_set_fatal_handler(NULL);

    qslab_cache_shrink(c);
    CHECK(tc_active(c) == 0 && tc_stats(c).num_slabs == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return NULL;
}

static void test_alien(void)
{
    pthread_t t;
    pthread_create(&t, NULL, alien_thread, NULL);
    pthread_join(t, NULL);
}

/* ---- misuse ---- */

/* An object of keep's slab (allocating until one comes; the others freed),
 * or NULL. */
static void *alloc_in_slab_of(qslab_cache *c, void *keep)
{
    struct qslab_cache_stats st = tc_stats(c);
    uintptr_t mask = ~(uintptr_t)(slab_bytes(st.order) - 1);
    int n = 1000;
    void **v = calloc((size_t)n, sizeof *v), *got = NULL;
    int k = 0;
    for (; k < n && !got; k++) {
        v[k] = qslab_cache_alloc(c);
        if (v[k] && ((uintptr_t)v[k] & mask) == ((uintptr_t)keep & mask)) {
            got = v[k];
            v[k] = NULL;
        }
    }
    for (int i = 0; i < k; i++)
        if (v[i])
            qslab_cache_free(c, v[i]);
    free(v);
    return got;
}
/* A 64-byte SLAB cache for misuse: the fatal handler capturing. */
static qslab_cache *make_misused(const char *name)
{
    qslab_cache *c = make(name, 64, 0, NULL);
    if (c) {
        qslab_set_fatal_handler(tu_fatal_capture);
        tu_capture_reset();
    }
    return c;
}

/* A double free of p (cache N): reported at once, or, where it was queued
 * unchecked (a CPU's blind push), before p is handed out twice among n
 * allocations, which are freed again. */
#define double_free_caught(c, N, p, n, what) double_free_caught_at(__LINE__, c, N, p, n, what)
static void double_free_caught_at(int line, qslab_cache *c, const char *N, void *p, int n,
                                  const char *what)
{
    char s[32];
    if (tu_capture_calls()) {
        tu_check_fatal_at(__FILE__, line, "double free", tu_addr(s, p), N, (const char *)NULL);
        return;
    }
    int times = 0;
    void **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++)
        times += (v[i] = qslab_cache_alloc(c)) == p;
    tu_check(times <= 1, __FILE__, line, "times <= 1", "%s owner: p handed out %d times after %s",
             cpu_mode() ? "CPU" : "thread", times, what);
    tu_check_fatal_at(__FILE__, line, "double free", tu_addr(s, p), N, (const char *)NULL);
    for (int i = 0; i < n; i++)
        qslab_cache_free(c, v[i]);
    free(v);
}

static void test_double_free(void)
{
    char s[32];
    const char *N = "t-slab-bad";
    qslab_cache *c = make_misused(N);
    if (!c)
        return;
    unsigned long limit = tc_get(N, "limit");

    /* at once */
    void *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    qslab_cache_free(c, p);
    tu_check_fatal("double free", tu_addr(s, p), N);
    CHECK(tc_active(c) == 0);
    validate(c, "after an immediate double free");
    tc_check_sane(c, 300, 0, 0, "an immediate double free");

    /* after other frees: at once (a thread's array: the free loads the
     * word), or before p is handed out twice (a CPU's fast path pushes
     * blindly; the pop that finds the cleared word reports) */
    enum { K = 10 };
    void *o[K];
    p = qslab_cache_alloc(c);
    for (int i = 0; i < K; i++)
        o[i] = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    for (int i = 0; i < K; i++)
        qslab_cache_free(c, o[i]);
    qslab_cache_free(c, p);
    double_free_caught(c, N, p, (int)(2 * limit + 10), "its double free");
    CHECK(tc_active(c) == 0);
    validate(c, "after a double free behind other frees");
    tc_check_sane(c, 300, 0, 0, "a double free behind other frees");

    /* through qslab_free */
    p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    qslab_free(p);
    tu_check_fatal("double free", tu_addr(s, p), N);
    CHECK(tc_active(c) == 0);

    /* after the object went back to its slab (shrink), its slab kept
     * alive by a neighbour: at once where the free loads the word (a
     * thread's), else (a CPU's blind push) before it is handed out twice */
    void *keep = qslab_cache_alloc(c);
    for (int how = 0; how < 2; how++) {
        p = alloc_in_slab_of(c, keep);
        CHECKF(p != NULL, "no object in the slab of %p (test setup)", keep);
        if (!p)
            break;
        qslab_cache_free(c, p);
        qslab_cache_shrink(c);
        if (how == 0)
            qslab_cache_free(c, p);
        else
            qslab_free(p);
        double_free_caught(c, N, p, (int)(2 * limit + 70), "its double free into its slab");
    }
    CHECK(tc_active(c) == 1);
    validate(c, "after double frees into a slab");
    qslab_cache_free(c, keep);
    CHECK(tc_active(c) == 0);
    tc_check_sane(c, 500, 0, 0, "double frees into a slab");
    validate(c, "after double frees");
    CHECK(tu_capture_calls() == 0);
    qslab_set_fatal_handler(NULL);
    CHECK(qslab_cache_destroy(c) == 0);
}

enum { PART_L = 16, PART_M = 3 * PART_L }; /* the tuned limit; the objects held */

struct parted {
    const char *name;
    void (*body)(qslab_cache *c, const char *N, void *p); /* run once p's double free is parted */
};

/* In a thread pinned to one CPU (so one array sees every step), with limit
 * PART_L and batchcount 4: p and o[PART_M] allocated, every array emptied,
 * then p freed, PART_L - 2 others, p again (the array full), and one more:
 * a flush moves a batch holding one of p's two entries to the shared array
 * (a CPU's array flushes its top batch, where the second free sits; a
 * thread's its bottom one, the first free).  Then the body; then the rest
 * of o freed. */
static void *parted_thread(void *arg)
{
    const struct parted *pt = arg;
    qslab_cache *c = qslab_cache_find(pt->name);
    void *o[PART_M];
    pin_to(nth_cpu(0));
    void *p = qslab_cache_alloc(c);
    for (int i = 0; i < PART_M; i++)
        o[i] = qslab_cache_alloc(c);
    qslab_cache_shrink(c); /* every array and the shared one empty */
    qslab_cache_free(c, p);
    for (int i = 0; i < PART_L - 2; i++) /* PART_L - 1 entries */
        qslab_cache_free(c, o[i]);
    qslab_cache_free(c, p);                 /* PART_L: full */
    qslab_cache_free(c, o[PART_L - 2]);     /* a flush, one of p's entries in it */
    pt->body(c, pt->name, p);
    for (int i = PART_L - 1; i < PART_M; i++)
        qslab_cache_free(c, o[i]);
    return NULL;
}

/* A SLAB cache tuned for parted_thread, which runs body on it (the fatal
 * handler capturing); then nothing is live (the body freed everything),
 * the cache validates and works after `what`.  The cache, or NULL. */
static qslab_cache *run_parted(const char *name, void (*body)(qslab_cache *, const char *, void *),
                               const char *what)
{
    qslab_cache *c = make_misused(name);
    if (!c)
        return NULL;
    CHECK(qslab_tune(name, "batchcount", "4") == 0 && qslab_tune(name, "limit", "16") == 0 &&
          qslab_tune(name, "shared", "8") == 0);
    struct parted pt = {name, body};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, parted_thread, &pt) == 0);
    pthread_join(t, NULL);
    char after[128];
    snprintf(after, sizeof after, "after %s", what);
    CHECKF(tc_active(c) == 0, "active %lu %s, everything freed", tc_active(c), after);
    validate(c, after);
    tc_check_sane(c, 300, 0, 0, what);
    qslab_set_fatal_handler(NULL);
    return c;
}

/* A double free whose two entries a flush parts (parted_thread): the
 * program gets the object from the entry left in the array and writes it,
 * then a refill claims the other entry.  It must be reported, never handed
 * out again (a refill hands its last object out unchecked: fuzz bug 8). */
static void double_free_shared_body(qslab_cache *c, const char *N, void *p)
{
    char s[32];
    CHECKF(tu_capture_calls() == 0 || strstr(tu_fatal_msg, "double free"),
           "unexpected report: %s", tu_fatal_msg);
    int n = 2 * PART_L + PART_M, times = 0;
    void **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) {
        v[i] = qslab_cache_alloc(c);
        if (v[i] == p)
            times++;
        if (v[i])
            memset(v[i], i & 0x7f ? 0 : 0x5c, 64); /* the program's data: a 0 word */
    }
    CHECKF(times <= 1, "%s owner: p handed out %d times after its double free", cpu_mode() ? "CPU" : "thread",
           times);
    tu_check_fatal("double free", tu_addr(s, p), N);
    for (int i = 0; i < n; i++)
        if (v[i] && (v[i] != p || times-- == 1))
            qslab_cache_free(c, v[i]);
    free(v);
}

/* The same parting, then a tune that replaces the shared array while the
 * program holds the object (got from the entry left in the CPU's or
 * thread's array) and has written it: the old array's entries go back to
 * their slabs; this one must be reported and left alone, its memory
 * untouched (fuzz bug 9: it was written with the slab mark and freed). */
static void double_free_tune_body(qslab_cache *c, const char *N, void *p)
{
    char s[32];
    enum { L = PART_L };
    /* take objects until p comes from the entry left in the array */
    void *got[2 * L];
    int n = 0, have = 0;
    while (n < 2 * L && !have) {
        got[n] = qslab_cache_alloc(c);
        have = got[n] == p;
        n++;
    }
    CHECKF(have, "p not handed out from its array entry (test setup)");
    if (have) {
        memset(p, 0x5c, 64); /* the program's data, its first word too */
        CHECK(qslab_tune(N, "shared", "4") == 0); /* a new shared array: the old one drained */
        int intact = 1;
        for (int i = 0; i < 64; i++)
            intact &= ((unsigned char *)p)[i] == 0x5c;
        CHECKF(intact, "%s owner: a live object was written by the shared array's drain",
               cpu_mode() ? "CPU" : "thread");
        /* its second free was refused at once: a thread's free loads the
         * word, and a CPU's checks the word of an object not of its own
         * slabs (SLAB's slabs are the node's), here the stamp */
        tu_check_fatal("double free", tu_addr(s, p), N);
        int times = 0, k = 3 * L;
        void **v = calloc((size_t)k, sizeof *v);
        for (int i = 0; i < k; i++)
            times += (v[i] = qslab_cache_alloc(c)) == p;
        CHECKF(times == 0, "p handed out %d more times while the program holds it", times);
        for (int i = 0; i < k; i++)
            if (v[i] != p)
                qslab_cache_free(c, v[i]);
        free(v);
    }
    for (int i = 0; i < n; i++)
        qslab_cache_free(c, got[i]);
}

static void test_double_free_shared_tune(void)
{
    /* the program freed p, which it held, at the end: nothing is left */
    run_parted("t-slab-bad-tune", double_free_tune_body,
               "a double free parted by a flush, then a tune");
}

static void test_double_free_shared(void)
{
    qslab_cache *c = run_parted("t-slab-bad-shared", double_free_shared_body,
                                "a double free parted by a flush to the shared array");
    if (c)
        CHECK(qslab_cache_destroy(c) == 0);
}

/* A double free behind other frees, then a shrink: on a CPU's array both
 * entries are queued; the shrink must not give the object to its slab
 * twice (the slab would count one object too few in use: its last live
 * neighbour's memory could go back with it). */
static void test_double_free_then_shrink(void)
{
    char s[32];
    const char *N = "t-slab-bad-shrink";
    qslab_cache *c = make_misused(N);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    uintptr_t mask = ~(uintptr_t)(slab_bytes(st.order) - 1);
    void *p = qslab_cache_alloc(c), *z = qslab_cache_alloc(c), *w = qslab_cache_alloc(c);
    CHECKF(((uintptr_t)p & mask) == ((uintptr_t)z & mask) &&
               ((uintptr_t)w & mask) == ((uintptr_t)z & mask),
           "p %p, z %p and w %p from one slab (test setup)", p, z, w);
    memset(z, 0x7e, 64);
    qslab_cache_shrink(c); /* the array's other objects back: the slab holds p, z, w */
    qslab_cache_free(c, p);
    qslab_cache_free(c, w);
    qslab_cache_free(c, p); /* a thread: reported here; a CPU: queued again */
    qslab_cache_shrink(c);
    CHECKF(tu_capture_calls() == 1 && strstr(tu_fatal_msg, "double free") &&
               strstr(tu_fatal_msg, tu_addr(s, p)),
           "double free of p %p (z %p) then shrink: handler called %lu times, last \"%s\"", p, z,
           tu_capture_calls(), tu_fatal_msg);
    tu_capture_reset();
    st = tc_stats(c);
    CHECKF(st.active_objs == 1 && st.num_slabs == 1, "z still allocated: %lu active, %lu slabs",
           st.active_objs, st.num_slabs);
    validate(c, "after a double free and a shrink");
    if (st.num_slabs == 1 && qslab_object_node(z) >= 0) {
        unsigned bad = 0;
        for (int i = 0; i < 64; i++)
            bad += ((uint8_t *)z)[i] != 0x7e;
        CHECKF(bad == 0, "z %p: %u bytes changed", z, bad);
    }
    qslab_cache_free(c, z);
    CHECKF(tu_capture_calls() == 0, "free of z %p, still allocated: \"%s\"", z, tu_fatal_msg);
    tu_capture_reset();
    CHECK(tc_active(c) == 0);
    tc_check_sane(c, 300, 0, 0, "a double free and a shrink");
    validate(c, "after a double free and a shrink");
    qslab_set_fatal_handler(NULL);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A free of a slot next to a live object, never handed out: reported
 * before it is handed out twice (bad_free_hard.c's case), with
 * allocations after it, and with a shrink after it. */
static void never_allocated(int then_shrink)
{
    char s[32];
    const char *N = then_shrink ? "t-slab-slot-shrink" : "t-slab-slot";
    qslab_cache *c = make_misused(N);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    size_t sb = slab_bytes(st.order);
    char *p = qslab_cache_alloc(c);
    char *q = p + st.slot_size;
    if (((uintptr_t)q & ~(uintptr_t)(sb - 1)) != ((uintptr_t)p & ~(uintptr_t)(sb - 1)) ||
        ((uintptr_t)q & (sb - 1)) + st.slot_size > sb - (size_t)st.objs_per_slab)
        q = p - st.slot_size;
    memset(p, 0x33, 64);
    qslab_cache_free(c, q);
    if (then_shrink)
        qslab_cache_shrink(c);
    enum { M = 300 };
    void *g[M];
    for (int i = 0; i < M; i++)
        g[i] = qslab_cache_alloc(c);
    CHECKF(
        tu_capture_calls() == 1 && strstr(tu_fatal_msg, tu_addr(s, q)) &&
            !strchr(tu_fatal_msg, '\n'),
        "free of a slot never handed out (%p, next to %p)%s: handler called %lu times, last \"%s\"",
        (void *)q, (void *)p, then_shrink ? ", then a shrink" : "", tu_capture_calls(),
        tu_fatal_msg);
    if (tu_capture_calls())
        CHECKF(strstr(tu_fatal_msg, "double free") || strstr(tu_fatal_msg, "invalid free"),
               "message \"%s\"", tu_fatal_msg);
    tu_capture_reset();
    int twice = 0, isp = 0;
    for (int i = 0; i < M; i++) {
        isp += g[i] == p;
        for (int j = 0; j < i; j++)
            twice += g[i] == g[j];
    }
    CHECKF(twice == 0 && isp == 0,
           "slot never handed out%s: %d handed out twice, p (live) handed out %d times",
           then_shrink ? " then shrink" : "", twice, isp);
    for (int i = 0; i < M; i++)
        if (g[i] != p)
            qslab_cache_free(c, g[i]);
    CHECKF(tu_capture_calls() == 0, "frees after: \"%s\"", tu_fatal_msg);
    tu_capture_reset();
    CHECK(tc_active(c) == 1);
    unsigned bad = 0;
    for (int i = 0; i < 64 && qslab_object_node(p) >= 0; i++)
        bad += (uint8_t)p[i] != 0x33;
    CHECKF(bad == 0, "live neighbour %p: %u bytes changed", (void *)p, bad);
    validate(c, "after a free of a slot never handed out");
    qslab_cache_free(c, p);
    CHECKF(tu_capture_calls() == 0, "free of the live neighbour %p: \"%s\"", (void *)p,
           tu_fatal_msg);
    tu_capture_reset();
    CHECK(tc_active(c) == 0);
    tc_check_sane(c, 500, 0, 0, "a free of a slot never handed out");
    validate(c, "after a free of a slot never handed out");
    qslab_set_fatal_handler(NULL);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void test_never_allocated(void)
{
    never_allocated(0);
    never_allocated(1);
}

/* A write into a free object's first word: found at the latest by the
 * shrink, whether the object sits in an array or in its slab; each case on
 * a cache of its own.  The object is never handed out again: a write into
 * it may be the program's own, into an object a second free's entry handed
 * out meanwhile (tests/integration/double_free_listed.c), so it stays in
 * use in its slab for good, and the statistics count it as allocated (one
 * active object), so that validation still holds. */
static int handed_out(qslab_cache *c, const void *p, int n)
{
    void **v = calloc((size_t)n, sizeof *v);
    int seen = 0;
    for (int i = 0; i < n; i++)
        seen |= (v[i] = qslab_cache_alloc(c)) == p;
    for (int i = 0; i < n; i++)
        qslab_cache_free(c, v[i]);
    free(v);
    return seen;
}

static void test_write_after_free(void)
{
    char s[32];
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();

    /* in the owner's array: the shrink that flushes it */
    qslab_cache *c = make("t-slab-uaf1", 64, 0, NULL);
    if (c) {
        uint64_t *keep = qslab_cache_alloc(c);
        uint64_t *p = qslab_cache_alloc(c);
        qslab_cache_free(c, p);
        p[0] = 0x4141414141414141ull;
        qslab_cache_shrink(c);
        tu_check_fatal("free list corruption", tu_addr(s, p), "t-slab-uaf1");
        tc_check_sane(c, 300, 0, 0, "a write after free into an array's object");
        CHECK(!handed_out(c, p, 300));
        qslab_cache_free(c, keep);
        CHECK(tc_active(c) == 1); /* p: lost, counted as allocated */
        validate(c, "after a write after free into an array's object");
    }

    /* in its slab: the shrink that gives the slab back */
    c = make("t-slab-uaf2", 64, 0, NULL);
    if (c) {
        uint64_t *a = qslab_cache_alloc(c);
        uint64_t *p = qslab_cache_alloc(c);
        qslab_cache_free(c, p);
        qslab_cache_shrink(c); /* p to its slab, kept by a */
        p[0] = 0x4242424242424242ull;
        CHECK(tu_capture_calls() == 0);
        qslab_cache_free(c, a);
        qslab_cache_shrink(c);
        tu_check_fatal("free list corruption", tu_addr(s, p), "t-slab-uaf2");
        struct qslab_cache_stats st = tc_stats(c);
        /* p's slab stays, p in use in it */
        CHECKF(st.num_slabs == 1 && st.active_objs == 1, "after the shrink: %lu slabs, %lu active",
               st.num_slabs, st.active_objs);
        tc_check_sane(c, 300, 0, 0, "a write after free into a slab's object");
        CHECK(!handed_out(c, p, 300));
        CHECK(tc_active(c) == 1);
        validate(c, "after a write after free into a slab's object");
    }

    /* in its slab: the refill that reaches it (it is not handed out) */
    c = make("t-slab-uaf3", 64, 0, NULL);
    if (c) {
        uint64_t *a = qslab_cache_alloc(c);
        uint64_t *p = qslab_cache_alloc(c);
        qslab_cache_free(c, p);
        qslab_cache_shrink(c);
        p[0] = 0x4343434343434343ull;
        enum { M = 300 };
        void *g[M];
        int gotp = 0;
        for (int i = 0; i < M; i++)
            gotp += (g[i] = qslab_cache_alloc(c)) == (void *)p;
        /* reported, and never handed out (someone may hold it) */
        CHECKF(gotp == 0, "the overwritten object was handed out %d times", gotp);
        tu_check_fatal("free list corruption", tu_addr(s, p), "t-slab-uaf3");
        for (int i = 0; i < M; i++)
            qslab_cache_free(c, g[i]);
        qslab_cache_free(c, a);
        tc_check_sane(c, 300, 0, 0, "a write after free found by a refill");
        CHECK(tc_active(c) == 1);
        validate(c, "after a write after free found by a refill");
    }
    CHECK(tu_capture_calls() == 0);
    qslab_set_fatal_handler(NULL);
    /* t-slab-uaf1, 2 and 3: their overwritten objects are dropped (leaked)
     * on purpose: not destroyed */
}

/* ---- shrink, destroy ---- */
static void test_shrink_destroy(void)
{
    enum { N = 3000, EVERY = 50 };
    static void *v[N];
    qslab_cache *c = make("t-slab-shrink", 256, 0, NULL);
    if (!c)
        return;
    for (int i = 0; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N; i++)
        if (i % EVERY) {
            qslab_cache_free(c, v[i]);
            v[i] = NULL;
        }
    struct qslab_cache_stats st = tc_stats(c);
    size_t sb = slab_bytes(st.order);
    uintptr_t slabs[N / EVERY + 1];
    unsigned ns = 0;
    for (int i = 0; i < N; i += EVERY) {
        uintptr_t b = (uintptr_t)v[i] & ~(uintptr_t)(sb - 1);
        unsigned k = 0;
        while (k < ns && slabs[k] != b)
            k++;
        if (k == ns)
            slabs[ns++] = b;
    }
    unsigned long before = st.num_slabs;
    size_t bytes = qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == ns && st.num_objs == ns * (unsigned long)st.objs_per_slab,
           "after shrink: %lu slabs (%lu before), the %d live objects are in %u", st.num_slabs,
           before, N / EVERY, ns);
    CHECKF(bytes >= (before - st.num_slabs) * sb, "shrink gave back %zu bytes for %lu slabs", bytes,
           before - st.num_slabs);
    CHECKF(st.queued_objs == 0 && st.active_objs == N / EVERY,
           "after shrink: %lu queued, %lu active", st.queued_objs, st.active_objs);
    validate(c, "after shrink");

    char err[512];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_cache_destroy(c);
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && errno == EBUSY && strstr(err, "60 objects still allocated"),
           "destroy with 60 live: %d \"%s\"", r, err);
    CHECK(tf_is(c, "slab"));
    tc_check_sane(c, 500, 0, 0, "a refused destroy");
    for (int i = 0; i < N; i += EVERY)
        qslab_cache_free(c, v[i]);
    validate(c, "after freeing everything");
    qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0 && st.active_objs == 0, "after the last shrink: %lu slabs, %lu active",
           st.num_slabs, st.active_objs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- the reaper ---- */
static void test_reaper(void)
{
    const char *purge = getenv("QSLAB_PURGE");
    if (purge && purge[0] == '0') {
        fprintf(stderr, "slab: QSLAB_PURGE=0: the reaper test skipped\n");
        return;
    }
    enum { N = 6000 }; /* 1.5 MiB of slabs: the purger starts (page.c) */
    static void *v[N];
    qslab_cache *c = make("t-slab-reap", 256, 0, NULL);
    if (!c)
        return;
    for (int i = 0; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, v[i]);
    struct qslab_cache_stats st = tc_stats(c);
    unsigned long s0 = st.num_slabs, q0 = st.queued_objs;
    /* QS_REAP_MS 2000 plus a purger tick of 250 ms: a reap within 2.25 s
     * of any moment, and another one 2 to 2.25 s after it.  Nothing here
     * touches the cache's arrays meanwhile (statistics only). */
    /* the waits end as soon as the reap is seen; their bounds are generous
     * (a loaded machine delays the purger's ticks), not part of the check */
    uint64_t t0 = tu_now_ms(), t = t0, t1 = 0;
    while (t - t0 < 10000) {
        tu_sleep_ms(25);
        t = tu_now_ms();
        st = tc_stats(c);
        if (st.num_slabs < s0)
            break;
    }
    unsigned long s1 = st.num_slabs, q1 = st.queued_objs;
    CHECKF(s1 < s0, "no reap in %llu ms: %lu slabs (%lu queued) after freeing %d objects",
           (unsigned long long)(t - t0), s1, q0, N);
    t1 = t;
    if (s1 < s0) { /* the next reap: more free slabs and shared objects; idle CPU arrays a fifth */
        while (t - t1 < 10000) {
            tu_sleep_ms(25);
            t = tu_now_ms();
            st = tc_stats(c);
            if (st.num_slabs < s1 && (!cpu_mode() || st.queued_objs < q0))
                break;
        }
        CHECKF(st.num_slabs < s1, "no second reap %llu ms after the first: %lu slabs",
               (unsigned long long)(t - t1), st.num_slabs);
        if (cpu_mode())
            CHECKF(st.queued_objs < q0,
                   "CPU arrays idle for two reaps: still %lu queued (%lu before)", st.queued_objs,
                   q0);
    }
    fprintf(stderr,
            "slab: reaper: %lu -> %lu (%llu ms) -> %lu slabs (%llu ms), queued %lu -> %lu -> %lu\n",
            s0, s1, (unsigned long long)(t1 - t0), st.num_slabs, (unsigned long long)(t - t0), q0,
            q1, st.queued_objs);
    validate(c, "after a reap");
    qslab_cache_shrink(c);
    CHECK(tc_stats(c).num_slabs == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(int argc, char **argv)
{
    cpu_set_t set;
    ncpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    if (argc > 1 && strcmp(argv[1], "numa") == 0) { /* the child: two fake nodes */
        CHECKF(qslab_num_nodes() == 2, "QSLAB_FAKE_NUMA=2: %d nodes", qslab_num_nodes());
        test_alien();
        return tu_done();
    }
    test_lazy_birth(); /* first: its slab's pages fresh */
    test_selection();
    test_defaults();
    test_tunables();
    test_order();
    test_array();
    test_array_grant();
    test_colour();
    test_ctor();
    test_other_thread();
    test_double_free();
    test_double_free_then_shrink();
    test_double_free_shared();
    test_double_free_shared_tune();
    test_never_allocated();
    test_write_after_free();
    test_shrink_destroy();
    test_single_block();
    if (qslab_num_nodes() > 1) {
        test_alien();
    } else {
        int r = tu_reexec("numa", "QSLAB_FAKE_NUMA", "2");
        CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=2 (alien arrays): status %d", r);
    }
    test_reaper();
    /* last: its shrink of a cache without a shared array is where UBSan
     * builds stopped (memcpy from a NULL shared array, front/slab/shared.c
     * slabfe_drain_shared) */
    test_free_slabs_reported();
    return tu_done();
}
