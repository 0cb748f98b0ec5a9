/*
 * slub.c - the SLUB front end (src/front/slub/slub.c) through the public API, on caches
 * pinned to it with the `front` tunable, whatever QSLAB_FRONT says (the
 * kmalloc parts only where the kmalloc caches are SLUB's):
 *   selection      front "slub" by name and by number (2), read back;
 *                  refused after the first allocation; the order follows
 *                  the front end's rule when nobody tuned it
 *   tunables       cpu_partial, min_partial, pass_through: defaults by
 *                  slot size (mm/slub.c's set_cpu_partial and
 *                  set_min_partial), refusals naming the cache and range
 *   calculate_order the default order against mm/slub.c's rule, computed
 *                  here from the CPU count (unpinned and pinned to one CPU),
 *                  with qslab's waste bound on top (1/64 of a slab);
 *                  a tuned order reaches new slabs, old ones keep theirs
 *   contents       patterns kept, alignment, constructor: a page's worth of
 *                  a new slab's objects born (constructed) at once, then as
 *                  many again whenever the owner's list runs dry (lazy
 *                  birth), objects come back in their constructed state
 *   counters       alloc_fast/free_fast on the owner's own active slab;
 *                  frees into other slabs (by another thread or not) are
 *                  free_slow and remote_free; remote_batch stays 0
 *   cpu_partial    an owner's partial list is bounded (cpu_partial counted
 *                  in slabs, as 5.16 does); min_partial: empty slabs a node
 *                  keeps on its partial list; shrink gives everything back;
 *                  a slab of one block goes to the FIFO as its free
 *                  empties it; an idle CPU gives its slabs to the node
 *   alloc_node     objects on the node asked for (re-executed with
 *                  QSLAB_FAKE_NUMA=2 for a second node)
 *   pass_through   kmalloc-5120 blocks straight from the page layer: one
 *                  slab per block, counted, freed, double free reported
 *   owners' exits  a thread exits holding objects, active and partial
 *                  slabs (retire); a thread past its exit destructor
 *                  allocates and frees without an owner
 *   misuse         double frees (at once, after other frees, after a free
 *                  in another thread, into a non-active slab, into an empty
 *                  slab on the node's FIFO, into one given back), frees to
 *                  the wrong cache (SLUB and SLQB caches both ways), a
 *                  write after free found at the next allocation and at
 *                  shrink (owner's list, empty slab); nothing else corrupted
 *   destroy        refused with live objects (EBUSY), then works
 * qslab_cache_validate after every phase.  Under per-CPU owners the test
 * runs once more without membarrier (seccomp, as on kernels before 5.10):
 * a shrink then reaches only its own CPU's state, which is all there is
 * with every thread on one CPU.
 */
#define _GNU_SOURCE /* CPU affinity */
#include <pthread.h>
#include <qslab.h>
#include <sched.h>
#include <stdint.h>

#include "../cacheutil.h"
#include "../deny_rseq.h"
#include "../front.h"
#include "../testutil.h"

#define PAGE 4096u

static int validate(qslab_cache *c, const char *when)
{
    return CHECKF(qslab_cache_validate(c) == 0, "validate %s %s (see above)", qslab_cache_name(c),
                  when);
}

/* A new cache pinned to SLUB before its first allocation (CHECKed). */
static qslab_cache *make(const char *name, size_t size, size_t align, void (*ctor)(void *))
{
    qslab_cache *c = qslab_cache_create(name, size, align, 0, ctor);
    CHECKF(c != NULL, "create %s", name);
    if (!c)
        return NULL;
    errno = 0;
    int r = qslab_tune(name, "front", "slub");
    CHECKF(r == 0 && tf_is(c, "slub"), "%s: front=slub: %d errno %d, front %s", name, r, errno,
           qslab_cache_front(c));
    return c;
}

/* Set a tunable (CHECKed). */
static void set(const char *cache, const char *attr, const char *value)
{
    errno = 0;
    int r = qslab_tune(cache, attr, value);
    CHECKF(r == 0, "qslab_tune(%s, %s, %s) = %d errno %d", cache, attr, value, r, errno);
}

/* qslab_tune refuses: EINVAL, one message naming the cache, the attribute
 * and every further fragment, and nothing changes. */
#define REFUSED(cache, attr, value, ...)                                                           \
    refused(__LINE__, cache, attr, value, __VA_ARGS__, (const char *)NULL)
static void refused(int line, const char *cache, const char *attr, const char *value, ...)
{
    char err[2048];
    tc_refused_at(__FILE__, line, cache, attr, value, err, sizeof err);
    tu_check(strstr(err, cache) && strstr(err, attr), __FILE__, line,
             "message names cache and attribute", "\"%s\"", err);
    va_list ap;
    va_start(ap, value);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        tu_check(strstr(err, s) != NULL, __FILE__, line, "message holds expected text",
                 "\"%s\" not in \"%s\"", s, err);
    va_end(ap);
}

/* 300 fresh objects of c, written: none NULL, all distinct, no handler
 * call; freed. */
static void check_sane(qslab_cache *c, size_t size, const char *when)
{
    tc_check_sane(c, 300, size, -1, when);
}

/* ---- another thread ---- */
static qslab_cache *thr_cache;
static void **thr_objs;
static unsigned long thr_n;
static struct qslab_cache_stats thr_seen;
/* thr_objs[0..thr_n) freed to thr_cache; the statistics then in thr_seen */
static void *free_all_in_thread(void *arg)
{
    (void)arg;
    for (unsigned long i = 0; i < thr_n; i++)
        qslab_cache_free(thr_cache, thr_objs[i]);
    thr_seen = tc_stats(thr_cache); /* while this thread (and its queue) lives */
    return NULL;
}
/* Run fn in a new thread on c's objects objs[0..n) and wait for it. */
static void run_thread(void *(*fn)(void *), qslab_cache *c, void **objs, unsigned long n)
{
    thr_cache = c;
    thr_objs = objs;
    thr_n = n;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, NULL) == 0);
    pthread_join(t, NULL);
}

/* ---- mm/slub.c's rules, as src/front/slub/ and src/observe/tune.c implement them ---- */

static size_t slab_bytes(unsigned order)
{
    return (size_t)PAGE << order;
}

static unsigned fls_ul(unsigned long x)
{
    return x ? 64 - (unsigned)__builtin_clzl(x) : 0;
}

/* calc_slab_order: from the order holding min_objects objects, the first
 * order up to max_order that wastes at most 1/fract of the slab */
static unsigned calc_slab_order(size_t size, unsigned min_objects, unsigned max_order,
                                unsigned fract)
{
    unsigned order = 0;
    while (slab_bytes(order) < (size_t)min_objects * size && order < 14)
        order++;
    for (; order <= max_order; order++) {
        size_t slab = slab_bytes(order);
        if (slab >= size && slab % size <= slab / fract)
            break;
    }
    return order;
}

/* What a slab leaves unused of the pages its objects touch */
static size_t touched_waste(size_t slot, unsigned order)
{
    size_t used = slab_bytes(order) / slot * slot;
    return ((used + PAGE - 1) & ~(size_t)(PAGE - 1)) - used;
}

/* qslab's waste bound on top (docs/design.md "Slab order"): past 1/64 of
 * the slab unused, the first order up to five above with at most 1/64,
 * slabs up to 128 KiB, else the least wasteful */
static unsigned waste_bound(size_t slot, unsigned o)
{
    if (touched_waste(slot, o) * 64 <= slab_bytes(o) || slab_bytes(o) >= (128u << 10))
        return o;
    unsigned best = o;
    size_t best_pm = touched_waste(slot, o) * 1000 / slab_bytes(o);
    for (unsigned k = o + 1; k <= o + 5 && k <= 14 && slab_bytes(k) <= (128u << 10); k++) {
        size_t w = touched_waste(slot, k);
        if (w * 64 <= slab_bytes(k))
            return k;
        if (w * 1000 / slab_bytes(k) < best_pm) {
            best_pm = w * 1000 / slab_bytes(k);
            best = k;
        }
    }
    return best;
}

/* calculate_order (before 6.7): min_objects = 4 * (fls(cpus) + 1), at most
 * what an order-3 slab holds; fractions 16, 8, 4, then fewer objects; past
 * order 3 only for objects that need it; at least the order that holds one
 * object (alignment included), at most 14. */
static unsigned slub_order_for(size_t slot, size_t align, long ncpu)
{
    if (ncpu < 1)
        ncpu = 1;
    unsigned min_objects = 4 * (fls_ul((unsigned long)ncpu) + 1);
    unsigned max_objects = (unsigned)(slab_bytes(3) / slot);
    if (min_objects > max_objects)
        min_objects = max_objects;
    unsigned order = 99;
    for (; min_objects > 1 && order > 3; min_objects--)
        for (unsigned fract = 16; fract >= 4 && order > 3; fract /= 2) {
            unsigned o = calc_slab_order(slot, min_objects, 3, fract);
            if (o <= 3)
                order = o;
        }
    if (order > 3)
        order = calc_slab_order(slot, 1, 3, 1);
    if (order > 3)
        order = calc_slab_order(slot, 1, 14, 1);
    size_t need = slot > align ? slot : align;
    unsigned min_order = 0;
    while (min_order < 14 && slab_bytes(min_order) < need)
        min_order++;
    if (order < min_order)
        order = min_order;
    if (order > 14)
        order = 14;
    return waste_bound(slot, order);
}

/* The CPU count src/front/slub/cachewide.c uses: CPUs the calling thread may run on, or
 * the per-CPU tables' possible CPU ids if more. */
static long cpus_allowed(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}
static long slub_cpus(void)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    long n = cpus_allowed();
    return oi.nr_cpu_ids > n ? oi.nr_cpu_ids : n;
}

/* The CPU count the kernel's rule means: the possible CPUs (5.12), which
 * the configured ones stand for here. */
static long possible_cpus(void)
{
    long conf = sysconf(_SC_NPROCESSORS_CONF), n = cpus_allowed();
    return conf > n ? conf : n;
}

/* Is o the order calculate_order gives for this slot size, with the CPU
 * count src/front/slub/cachewide.c takes (the allowed CPUs, or the per-CPU tables' ids if
 * more: under thread owners there are none, so a process pinned to one CPU
 * gets one CPU's orders), or with the possible CPUs (the kernel's count)? */
static int order_ok(size_t slot, size_t align, unsigned long o)
{
    return o == slub_order_for(slot, align, slub_cpus()) ||
           o == slub_order_for(slot, align, possible_cpus());
}

/* the kernel's rules, bounded in bytes past the blocks its SLUB serves
 * (src/observe/tune.c: six 8 KiB objects, ten 32 KiB slabs) */
static unsigned long expect_cpu_partial(size_t slot)
{
    unsigned long k = slot >= 4096 ? 6 : slot >= 1024 ? 24 : slot >= 256 ? 52 : 120;
    return k * slot > 6 * 8192 ? 6 * 8192 / slot : k;
}
static unsigned long expect_min_partial(size_t slot, size_t slab_bytes)
{
    unsigned lg = fls_ul(slot) - 1;
    unsigned long k = lg / 2 < 5 ? 5 : lg / 2 > 10 ? 10 : lg / 2;
    return k * slab_bytes > 10 * 32768 ? 10 * 32768 / slab_bytes : k;
}
/* slabs an owner's partial list holds at most (src/front/slub/slabs.c cpu_partial_slabs) */
static unsigned long partial_slabs(unsigned long cpu_partial, unsigned objs)
{
    return cpu_partial ? (cpu_partial * 2 + objs - 1) / objs : 0;
}

/* ---- selection ---- */

static void test_selection(void)
{
    const char *name = "t-slub-sel";
    qslab_cache *c = qslab_cache_create(name, 40, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(qslab_tune(name, "front", "slub") == 0 && tf_is(c, "slub"));
    CHECK(tc_get(name, "front") == 2);
    CHECK(qslab_tune(name, "front", "0") == 0 && tf_is(c, "slqb") && tc_get(name, "front") == 0);
    CHECK(qslab_tune(name, "front", "2") == 0 && tf_is(c, "slub") && tc_get(name, "front") == 2);
    CHECK(qslab_tune(name, "front", "slob") == 0 && tf_is(c, "slob") && tc_get(name, "front") == 1);
    CHECK(qslab_tune(name, "front", "slub") == 0 && tf_is(c, "slub"));
    REFUSED(name, "front", "99", "slqb, slub"); /* the message lists the front ends */
    REFUSED(name, "front", "slub2", "slqb, slub");
    CHECK(tf_is(c, "slub"));

    void *p = qslab_cache_alloc(c);
    CHECK(p != NULL);
    memset(p, 0x11, 40);
    REFUSED(name, "front", "slqb", "allocated already", "stays slub");
    REFUSED(name, "front", "0", "allocated already", "stays slub");
    CHECK(tf_is(c, "slub") && tc_get(name, "front") == 2);
    CHECK(qslab_tune(name, "front", "slub") == 0); /* the same one: nothing to change */

    /* slabinfo names it */
    char buf[65536];
    int fds[2];
    CHECK(pipe(fds) == 0);
    qslab_slabinfo(fds[1]);
    close(fds[1]);
    size_t n = tu_read_all(fds[0], buf, sizeof buf);
    close(fds[0]);
    buf[n] = '\0';
    const char *line = strstr(buf, "\nt-slub-sel ");
    const char *eol = line ? strchr(line + 1, '\n') : NULL;
    CHECKF(line && eol && eol - line > 14 && strncmp(eol - 13, " : front slub", 13) == 0,
           "slabinfo line of a SLUB cache: %.140s", line ? line + 1 : "(none)");
    qslab_cache_free(c, p);
    validate(c, "after selection");
    CHECK(qslab_cache_destroy(c) == 0);

    /* the order nobody tuned follows the front end's rule both ways */
    const char *name2 = "t-slub-sel-order";
    c = qslab_cache_create(name2, 1000, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    const char *first = qslab_cache_front(c);
    unsigned long o_first = tc_get(name2, "order");
    CHECK(qslab_tune(name2, "front", "slub") == 0);
    CHECKF(order_ok(1000, 8, tc_get(name2, "order")),
           "1000-byte objects under slub: order %lu, calculate_order %u", tc_get(name2, "order"),
           slub_order_for(1000, 8, slub_cpus()));
    if (strcmp(first, "slub") != 0) {
        CHECK(qslab_tune(name2, "front", first) == 0);
        CHECKF(tc_get(name2, "order") == o_first, "back to %s: order %lu, was %lu", first,
               tc_get(name2, "order"), o_first);
    }
    /* a tuned order is kept (5: neither SLQB's default for 1000 bytes nor
     * any calculate_order's, which stops at 3) */
    CHECK(qslab_tune(name2, "front", "slqb") == 0);
    set(name2, "order", "5");
    CHECK(qslab_tune(name2, "front", "slub") == 0);
    CHECKF(tc_get(name2, "order") == 5, "a tuned order under slub: %lu", tc_get(name2, "order"));
    void *q = qslab_cache_alloc(c);
    CHECK(q != NULL);
    struct qslab_cache_stats st = tc_stats(c);
    CHECKF(st.order == 5 && st.objs_per_slab == (PAGE << 5) / 1000, "order %u, %u objects",
           st.order, st.objs_per_slab);
    qslab_cache_free(c, q);
    validate(c, "order 5");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- tunables ---- */

static void test_tunables(void)
{
    static const size_t sizes[] = {8,    64,   200,  248,  256,   1000,
                                   1024, 4000, 4096, 8192, 65536, 1 << 21};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t-slub-tun-%zu", sizes[i]);
        qslab_cache *c = make(name, sizes[i], 0, NULL);
        if (!c)
            continue;
        struct qslab_cache_stats st = tc_stats(c);
        CHECKF(st.slot_size == sizes[i], "%s: slot %zu", name, st.slot_size);
        CHECKF(tc_get(name, "cpu_partial") == expect_cpu_partial(st.slot_size),
               "%s: cpu_partial %lu, expected %lu", name, tc_get(name, "cpu_partial"),
               expect_cpu_partial(st.slot_size));
        CHECKF(tc_get(name, "min_partial") == expect_min_partial(st.slot_size, st.slab_bytes),
               "%s: min_partial %lu, expected %lu", name, tc_get(name, "min_partial"),
               expect_min_partial(st.slot_size, st.slab_bytes));
        CHECKF(tc_get(name, "pass_through") == 0, "%s: pass_through %lu", name,
               tc_get(name, "pass_through"));
        CHECK(qslab_cache_destroy(c) == 0);
    }

    const char *name = "t-slub-tun";
    qslab_cache *c = make(name, 128, 0, NULL);
    if (!c)
        return;
    REFUSED(name, "cpu_partial", "1048577", "0..1048576");
    REFUSED(name, "cpu_partial", "-1", "0..1048576");
    REFUSED(name, "cpu_partial", "many", "0..1048576");
    REFUSED(name, "min_partial", "99999999", "0..1048576");
    REFUSED(name, "min_partial", "", "0..1048576");
    REFUSED(name, "pass_through", "2", "0..1");
    REFUSED(name, "pass_through", "yes", "0..1");
    set(name, "cpu_partial", "0");
    CHECK(tc_get(name, "cpu_partial") == 0);
    set(name, "cpu_partial", "1048576");
    CHECK(tc_get(name, "cpu_partial") == 1048576);
    set(name, "min_partial", "0");
    CHECK(tc_get(name, "min_partial") == 0);
    set(name, "min_partial", "1048576");
    CHECK(tc_get(name, "min_partial") == 1048576);
    set(name, "pass_through", "1");
    CHECK(tc_get(name, "pass_through") == 1);
    /* pass_through changes nothing for a cache that is not kmalloc's */
    struct qslab_cache_stats a = tc_stats(c);
    void *p[40];
    for (int i = 0; i < 40; i++)
        p[i] = qslab_cache_alloc(c);
    struct qslab_cache_stats b = tc_stats(c);
    CHECKF(b.new_slab - a.new_slab <= 2,
           "pass_through on a 128-byte cache: %lu new slabs for 40 objects",
           b.new_slab - a.new_slab);
    for (int i = 0; i < 40; i++)
        qslab_cache_free(c, p[i]);
    set(name, "pass_through", "0");
    set(name, "cpu_partial", "30");
    set(name, "min_partial", "5");
    validate(c, "after tunables");
    CHECK(qslab_cache_destroy(c) == 0);

    /* the kmalloc classes have them too */
    unsigned long v;
    CHECK(qslab_tune_get("kmalloc-5120", "pass_through", &v) == 0 && v == 0);
    CHECK(qslab_tune_get("kmalloc-64", "cpu_partial", &v) == 0 && v == 120);
    CHECK(qslab_tune_get("kmalloc-64", "min_partial", &v) == 0 && v == 5);
}

/* ---- calculate_order ---- */

static void test_order(const char *when)
{
    static const size_t sizes[] = {8,    64,   192,  700,   1000,  1312,  3000,
                                   4096, 5120, 8192, 12000, 40000, 200000};
    long ncpu = slub_cpus(), all = possible_cpus() > ncpu ? possible_cpus() : ncpu;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t-slub-ord-%zu", sizes[i]);
        qslab_cache *c = make(name, sizes[i], 0, NULL);
        if (!c)
            continue;
        unsigned long o = tc_get(name, "order");
        size_t slot = tc_stats(c).slot_size; /* the size mm/slub.c's rule sees (s->size) */
        unsigned want = slub_order_for(slot, 8, ncpu);
        /* the rule's range: from one CPU to every possible one */
        unsigned lo = slub_order_for(slot, 8, 1), hi = slub_order_for(slot, 8, all);
        CHECKF(order_ok(slot, 8, o),
               "%s: %zu-byte objects: order %lu, calculate_order for %ld CPUs %u, for the %ld "
               "possible %u (1 CPU: %u)",
               when, sizes[i], o, ncpu, want, possible_cpus(),
               slub_order_for(slot, 8, possible_cpus()), lo);
        CHECKF(o >= lo && o <= hi, "%s: %zu-byte objects: order %lu outside %u..%u", when, sizes[i],
               o, lo, hi);
        if (sizes[i] == 64)
            CHECK(o == 0);
        if (sizes[i] == 8192)
            CHECKF(o == 3, "%zu-byte objects: order %lu (order 3 holds 4, for any CPU count)",
                   sizes[i], o);
        if (sizes[i] == 5120) /* order 3 holds 6, 2 KiB unused: order 4's 12 fill 15 pages */
            CHECKF(o == 4, "%zu-byte objects: order %lu (the waste bound)", sizes[i], o);
        if (sizes[i] == 1312) /* SQLite's page-cache blocks: 99 to a 128 KiB slab */
            CHECKF(o == 5, "%zu-byte objects: order %lu (the waste bound)", sizes[i], o);
        if (sizes[i] == 40000 || sizes[i] == 200000) /* over order 3: one object's order */
            CHECKF(o == (sizes[i] == 40000 ? 4 : 6), "%zu-byte objects: order %lu", sizes[i], o);
        /* a slab of that order is what allocation makes, a page's worth
         * of its objects born (at least one); then, as its owner's list
         * runs dry, as many again each time, until the slab is full */
        void *p = qslab_cache_alloc(c);
        CHECK(p != NULL);
        struct qslab_cache_stats st = tc_stats(c);
        unsigned long page_worth = PAGE / slot ? PAGE / slot : 1;
        if (page_worth > st.objs_per_slab)
            page_worth = st.objs_per_slab;
        CHECKF(st.order == o && st.objs_per_slab == slab_bytes((unsigned)o) / slot &&
                   st.num_slabs == 1 && st.num_objs == page_worth,
               "%s: order %u, %u objects per slab, %lu slabs, %lu objects born (a page's "
               "worth: %lu)",
               name, st.order, st.objs_per_slab, st.num_slabs, st.num_objs, page_worth);
        unsigned n = st.objs_per_slab > 256 ? 256 : st.objs_per_slab;
        void *more[256];
        unsigned long born = st.num_objs;
        for (unsigned k = 1; k < n; k++) {
            more[k] = qslab_cache_alloc(c);
            CHECK(more[k] != NULL);
            st = tc_stats(c);
            if (k + 1 > born) { /* the owner's list ran dry: born doubles */
                unsigned long want = born * 2 > st.objs_per_slab ? st.objs_per_slab : born * 2;
                CHECKF(st.num_objs == want && st.num_slabs == 1,
                       "%s: %u allocated, %lu objects born in %lu slabs (want %lu in 1)", name,
                       k + 1, st.num_objs, st.num_slabs, want);
                born = st.num_objs;
            }
        }
        validate(c, "a slab grown");
        for (unsigned k = 1; k < n; k++)
            qslab_cache_free(c, more[k]);
        qslab_cache_free(c, p);
        validate(c, when);
        CHECK(qslab_cache_destroy(c) == 0);
    }
    /* an aligned cache: the order holds its alignment */
    qslab_cache *c = make("t-slub-ord-al", 100, 8192, NULL);
    if (c) {
        unsigned long o = tc_get("t-slub-ord-al", "order");
        CHECKF(o >= 1, "100-byte objects aligned to 8 KiB: order %lu", o);
        void *p = qslab_cache_alloc(c);
        CHECKF(p && ((uintptr_t)p & 8191) == 0, "object %p not aligned to 8 KiB", p);
        qslab_cache_free(c, p);
        validate(c, "aligned order");
        CHECK(qslab_cache_destroy(c) == 0);
    }
}

/* A new order reaches the slabs made from then on; slabs of both orders
 * serve, take frees, validate and go back. */
static void test_order_change(void)
{
    const char *name = "t-slub-reorder";
    qslab_cache *c = make(name, 256, 0, NULL);
    if (!c)
        return;
    enum { N = 600 };
    static void *o[N];
    for (int i = 0; i < N / 3; i++)
        o[i] = qslab_cache_alloc(c);
    struct qslab_cache_stats a = tc_stats(c);
    set(name, "order", "2");
    for (int i = N / 3; i < N; i++)
        o[i] = qslab_cache_alloc(c);
    struct qslab_cache_stats b = tc_stats(c);
    /* every new slab whole but the newest (lazy birth) */
    CHECKF(b.order == 2 && b.objs_per_slab == 64 && b.num_slabs > a.num_slabs &&
               b.num_objs - a.num_objs > (b.num_slabs - a.num_slabs - 1) * 64 &&
               b.num_objs - a.num_objs <= (b.num_slabs - a.num_slabs) * 64,
           "order 2: %u objects per slab; %lu new objects in %lu new slabs", b.objs_per_slab,
           b.num_objs - a.num_objs, b.num_slabs - a.num_slabs);
    validate(c, "slabs of two orders");
    run_thread(free_all_in_thread, c, o, N / 2); /* half freed by another thread */
    set(name, "order", "0");
    for (int i = 0; i < N / 2; i++)
        o[i] = qslab_cache_alloc(c);
    validate(c, "slabs of two orders, refilled");
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, o[i]);
    validate(c, "slabs of two orders, freed");
    qslab_cache_shrink(c);
    b = tc_stats(c);
    CHECKF(b.num_slabs == 0 && b.num_objs == 0, "after shrink: %lu slabs, %lu objects", b.num_slabs,
           b.num_objs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- contents, alignment, constructor ---- */

static unsigned long ctor_calls;
static void ctor(void *o)
{
    __atomic_add_fetch(&ctor_calls, 1, __ATOMIC_RELAXED);
    memset(o, 0xc7, 48);
}

static void fill(void *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = (uint8_t)(seed + i * 7);
}
static int intact(const void *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != (uint8_t)(seed + i * 7))
            return 0;
    return 1;
}
static int constructed(const uint8_t *p)
{
    for (int i = 0; i < 8; i++)
        if (p[i] != 0xc7 || p[40 + i] != 0xc7)
            return 0;
    return 1;
}

struct obj {
    void *p;
    int cache;
    uint8_t seed;
};

static void test_contents(void)
{
    enum { NC = 7, N = 4000 };
    static const size_t size[NC] = {8, 48, 40, 200, 3000, 5000, 20000};
    static const size_t align[NC] = {0, 0, 64, 0, 0, 0, 4096};
    const char *names[NC] = {"t-slub-8",    "t-slub-ctor", "t-slub-al64", "t-slub-200",
                             "t-slub-3000", "t-slub-5000", "t-slub-al4k"};
    qslab_cache *c[NC];
    for (int i = 0; i < NC; i++) {
        c[i] = make(names[i], size[i], align[i], i == 1 ? ctor : NULL);
        if (!c[i])
            return;
    }
    set("t-slub-ctor", "empty_decay_ms", "3600000"); /* no slab goes back while counted */

    /* a new slab: a page's worth of objects constructed at once (the
     * whole of this order-0 slab) */
    void *first = qslab_cache_alloc(c[1]);
    struct qslab_cache_stats st = tc_stats(c[1]);
    CHECKF(first && constructed(first), "first ctor object not constructed");
    CHECKF(st.num_slabs == 1 && ctor_calls == st.objs_per_slab && st.num_objs == st.objs_per_slab,
           "SLUB: a new order-0 slab's objects are born at once: %lu constructor calls, %u objects per "
           "slab, %lu objects",
           ctor_calls, st.objs_per_slab, st.num_objs);
    CHECK(st.slot_size == 56); /* 48 bytes and the link word past them */
    qslab_cache_free(c[1], first);

    static struct obj o[N];
    unsigned rnd = 4242;
    unsigned long bad_ctor = 0;
    for (int round = 0; round < 16; round++) {
        for (int k = 0; k < N; k++) {
            rnd = rnd * 1103515245u + 12345u;
            int i = (int)((rnd >> 16) % NC);
            if (o[k].p) {
                int ci = o[k].cache;
                if (ci == 1) {
                    if (!intact((char *)o[k].p + 8, 32, o[k].seed))
                        tu_fail("object %p of %s overwritten", o[k].p, names[ci]);
                } else if (!intact(o[k].p, size[ci], o[k].seed)) {
                    tu_fail("object %p of %s overwritten", o[k].p, names[ci]);
                }
                qslab_cache_free(c[ci], o[k].p);
                o[k].p = NULL;
                continue;
            }
            void *p = qslab_cache_alloc(c[i]);
            if (!p) {
                tu_fail("alloc %s failed", names[i]);
                continue;
            }
            size_t al = align[i] ? align[i] : 8;
            if ((uintptr_t)p & (al - 1))
                tu_fail("%s object %p not aligned to %zu", names[i], p, al);
            uint8_t seed = (uint8_t)(rnd >> 8);
            if (i == 1) {
                if (!constructed(p) && bad_ctor++ < 3)
                    tu_fail("t-slub-ctor object %p not in its constructed state", p);
                fill((char *)p + 8, 32, seed); /* freed with 0..7 and 40..47 as constructed */
            } else {
                fill(p, size[i], seed);
            }
            o[k] = (struct obj){p, i, seed};
        }
        if (round % 4 == 3)
            for (int i = 0; i < NC; i++)
                validate(c[i], "in the contents rounds");
    }
    st = tc_stats(c[1]);
    CHECKF(st.free_slab == 0 ? ctor_calls == st.num_objs : ctor_calls >= st.num_objs,
           "constructor ran %lu times for %lu objects born (%lu slabs given back)", ctor_calls,
           st.num_objs, st.free_slab);
    CHECKF(st.num_objs == st.num_slabs * st.objs_per_slab,
           "SLUB order-0 slabs are born whole: %lu objects in %lu slabs of %u", st.num_objs, st.num_slabs,
           st.objs_per_slab);
    for (int k = 0; k < N; k++)
        if (o[k].p) {
            qslab_cache_free(c[o[k].cache], o[k].p);
            o[k].p = NULL;
        }
    for (int i = 0; i < NC; i++) {
        st = tc_stats(c[i]);
        CHECKF(st.active_objs == 0 && st.alloc == st.free &&
                   st.alloc == st.alloc_fast + st.alloc_slow && st.queued_objs == 0,
               "%s: %lu active, %lu allocs, %lu frees, %lu queued", names[i], st.active_objs,
               st.alloc, st.free, st.queued_objs);
        validate(c[i], "after freeing all");
        qslab_cache_shrink(c[i]);
        st = tc_stats(c[i]);
        CHECKF(st.num_slabs == 0 && st.empty_slabs == 0, "%s after shrink: %lu slabs, %lu empty",
               names[i], st.num_slabs, st.empty_slabs);
        validate(c[i], "after shrink");
        CHECKF(qslab_cache_destroy(c[i]) == 0, "destroy %s", names[i]);
    }
}

/* ---- counters ---- */

static void test_counters(void)
{
    qslab_cache *c = make("t-slub-cnt", 64, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats a = tc_stats(c), b;
    unsigned P = a.objs_per_slab;
    CHECKF(P == 64 && a.order == 0, "64-byte objects: %u per slab, order %u", P, a.order);
    static void *o[5 * 64 + 2];

    /* the owner's own active slab: one slow allocation (the new slab), the
     * rest popped off the owner's list; every free pushed back on it */
    for (unsigned i = 0; i < P; i++)
        o[i] = qslab_cache_alloc(c);
    b = tc_stats(c);
    CHECKF(b.alloc == P && b.alloc_slow == 1 && b.alloc_fast == P - 1 && b.new_slab == 1 &&
               b.refill == 1,
           "%u allocations from a new cache: %lu fast, %lu slow, %lu new slabs, %lu refills", P,
           b.alloc_fast, b.alloc_slow, b.new_slab, b.refill);
    for (unsigned i = 0; i < P; i++)
        qslab_cache_free(c, o[P - 1 - i]);
    b = tc_stats(c);
    CHECKF(b.free == P && b.free_fast == P && b.free_slow == 0 && b.remote_free == 0 &&
               b.queued_objs == 0,
           "%u frees to the active slab: %lu fast, %lu slow, %lu remote", P, b.free_fast,
           b.free_slow, b.remote_free);
    validate(c, "after frees to the active slab");

    /* the owner frees into a slab that is no longer its active one: slow,
     * straight to the slab (every such free is "remote" in SLUB) */
    for (unsigned i = 0; i < P + 1; i++)
        o[i] = qslab_cache_alloc(c); /* the first P fill a slab; the last starts another */
    a = tc_stats(c);
    CHECKF(a.new_slab == 2 && a.num_slabs == 2, "%lu new slabs, %lu slabs", a.new_slab,
           a.num_slabs);
    for (unsigned i = 0; i < P; i++)
        qslab_cache_free(c, o[i]);
    qslab_cache_free(c, o[P]);
    b = tc_stats(c);
    CHECKF(
        b.free_slow - a.free_slow == P && b.remote_free - a.remote_free == P &&
            b.free_fast - a.free_fast == 1 && b.remote_batch == 0,
        "frees into a full slab: %lu slow, %lu remote, %lu fast (the active slab's), %lu batches",
        b.free_slow - a.free_slow, b.remote_free - a.remote_free, b.free_fast - a.free_fast,
        b.remote_batch);
    validate(c, "after frees to a non-active slab");

    /* another thread frees 4 slabs' worth: every free straight to its
     * slab, no batching (remote_batch stays 0), none on the freer's list */
    unsigned n = 4 * P;
    for (unsigned i = 0; i < n + 1; i++)
        o[i] = qslab_cache_alloc(c); /* o[n]: the owner's active slab is not theirs */
    a = tc_stats(c);
    run_thread(free_all_in_thread, c, o, n);
    b = tc_stats(c);
    CHECKF(b.free - a.free == n && b.free_slow - a.free_slow == n &&
               b.remote_free - a.remote_free == n && b.free_fast == a.free_fast &&
               b.remote_batch == 0 && b.claim == 0,
           "%u frees by another thread: %lu slow, %lu remote, %lu fast, %lu batches, %lu claims", n,
           b.free_slow - a.free_slow, b.remote_free - a.remote_free, b.free_fast - a.free_fast,
           b.remote_batch, b.claim);
    CHECKF(thr_seen.free - a.free == n && thr_seen.queued_objs == 0,
           "seen by the freeing thread: %lu frees, %lu queued", thr_seen.free - a.free,
           thr_seen.queued_objs);
    validate(c, "after remote frees");
    /* and the objects are the owner's again, without new slabs */
    a = tc_stats(c);
    for (unsigned i = 0; i < n; i++)
        o[i] = qslab_cache_alloc(c);
    b = tc_stats(c);
    CHECKF(b.new_slab == a.new_slab, "reallocating what another thread freed: %lu new slabs",
           b.new_slab - a.new_slab);
    for (unsigned i = 0; i < n + 1; i++)
        qslab_cache_free(c, o[i]);
    b = tc_stats(c);
    CHECKF(b.active_objs == 0 && b.alloc == b.alloc_fast + b.alloc_slow &&
               b.free == b.free_fast + b.free_slow && b.remote_batch == 0 && b.claim == 0,
           "end: %lu active, %lu batches", b.active_objs, b.remote_batch);
    validate(c, "after the counters");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- cpu_partial, min_partial ---- */

/* Slabs neither on a node's empty FIFO nor given back: active slabs, owners'
 * partial slabs and nodes' partial slabs (the report's num_slabs counts
 * every slab held, empty_slabs the FIFO's). */
static unsigned long held(qslab_cache *c)
{
    struct qslab_cache_stats st = tc_stats(c);
    return st.num_slabs - st.empty_slabs;
}

static unsigned long held_in_thread;
static void *free_all_and_look(void *arg)
{
    (void)arg;
    /* an owner first (a thread that only frees gets no queue, hence no
     * partial list, under thread owners: src/front/slub/slabs.c put_cpu_partial) */
    void *mine = qslab_cache_alloc(thr_cache);
    for (unsigned long i = 0; i < thr_n; i++)
        qslab_cache_free(thr_cache, thr_objs[i]);
    qslab_cache_free(thr_cache, mine);
    held_in_thread = held(thr_cache); /* before this thread's exit flushes its partial slabs */
    return NULL;
}

/* Another thread (an owner: it allocates one object first) frees every
 * object of `slabs` full slabs of c (while we keep one object of our active
 * slab): the slabs it found full go on its partial list, at most
 * cpu_partial_slabs of them; the rest to the node, where min_partial 0
 * gives the empty ones back.  Returns the slabs held (active and partial
 * slabs of both owners) while the freeing thread lived. */
static unsigned long partial_round(qslab_cache *c, unsigned slabs, unsigned P, void **o)
{
    unsigned n = slabs * P;
    for (unsigned i = 0; i < n + 1; i++)
        o[i] = qslab_cache_alloc(c);
    run_thread(free_all_and_look, c, o, n);
    qslab_cache_free(c, o[n]);
    return held_in_thread;
}

static void test_partial(void)
{
    enum { SLABS = 200 };
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    /* owners that may hold partial slabs: the freeing thread's (a CPU's:
     * any it ran on) and ours */
    long owners = oi.kind == QSLAB_OWNER_CPU ? (oi.nr_cpu_ids > 2 ? oi.nr_cpu_ids : 2) : 2;
    static void *o[SLABS * 16 + 1];

    qslab_cache *c = make("t-slub-cpup", 256, 0, NULL);
    if (!c)
        return;
    struct qslab_cache_stats st = tc_stats(c);
    unsigned P = st.objs_per_slab;
    CHECKF(P == 16, "256-byte objects: %u per slab", P);
    if (P != 16)
        return;
    set("t-slub-cpup", "min_partial", "0");

    /* cpu_partial 2 objects: one slab per owner */
    set("t-slub-cpup", "cpu_partial", "2");
    unsigned long h = partial_round(c, SLABS, P, o);
    unsigned long bound = (unsigned long)owners * (partial_slabs(2, P) + 1);
    CHECKF(h <= bound, "cpu_partial 2: %lu slabs held after freeing %d slabs' objects (bound %lu)",
           h, SLABS, bound);
    validate(c, "cpu_partial 2");
    CHECKF(held(c) <= (unsigned long)owners, "after the freeing thread's exit: %lu slabs held",
           held(c));

    /* cpu_partial 1000 objects: 125 slabs, empty ones kept there */
    set("t-slub-cpup", "cpu_partial", "1000");
    h = partial_round(c, SLABS, P, o);
    unsigned long big = partial_slabs(1000, P);
    CHECKF(h >= SLABS - big && h <= (unsigned long)owners * (big + 1),
           "cpu_partial 1000 (%lu slabs): %lu slabs held after freeing %d slabs' objects", big, h,
           SLABS);
    validate(c, "cpu_partial 1000");

    /* cpu_partial 0: no owner partial list at all */
    set("t-slub-cpup", "cpu_partial", "0");
    h = partial_round(c, SLABS, P, o);
    CHECKF(h <= (unsigned long)owners, "cpu_partial 0: %lu slabs held", h);
    validate(c, "cpu_partial 0");

    /* partly freed slabs: reused by the owner without new slabs */
    set("t-slub-cpup", "cpu_partial", "2");
    unsigned n = SLABS * P;
    for (unsigned i = 0; i < n; i++)
        o[i] = qslab_cache_alloc(c);
    static void *half[SLABS * 8];
    for (unsigned i = 0; i < n / 2; i++)
        half[i] = o[2 * i + 1];
    run_thread(free_all_in_thread, c, half, n / 2);
    validate(c, "half of every slab freed by another thread");
    struct qslab_cache_stats a = tc_stats(c);
    for (unsigned i = 0; i < n / 2; i++)
        o[2 * i + 1] = qslab_cache_alloc(c);
    struct qslab_cache_stats b = tc_stats(c);
    CHECKF(b.new_slab - a.new_slab <= (unsigned long)owners - 1,
           "refilling half-free slabs: %lu new slabs (%lu slabs, %lu free objects before)",
           b.new_slab - a.new_slab, a.num_slabs, a.num_objs - a.active_objs);
    for (unsigned i = 0; i < n; i++)
        qslab_cache_free(c, o[i]);
    validate(c, "partial slabs refilled and freed");
    qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0 && st.empty_slabs == 0 && st.active_objs == 0,
           "after shrink: %lu slabs, %lu empty", st.num_slabs, st.empty_slabs);
    validate(c, "after shrink");
    CHECK(qslab_cache_destroy(c) == 0);

    /* min_partial: the owner frees 20 slabs' objects itself (cpu_partial
     * 0: each slab it finds full goes to the node); the node keeps empty
     * partial slabs while it has fewer than min_partial */
    static const char *const mins[] = {"0", "3", "8"};
    for (int m = 0; m < 3; m++) {
        char name[32];
        snprintf(name, sizeof name, "t-slub-minp-%s", mins[m]);
        c = make(name, 256, 0, NULL);
        if (!c)
            return;
        CHECK(tc_get(name, "min_partial") == 5);
        set(name, "min_partial", mins[m]);
        set(name, "cpu_partial", "0");
        unsigned long mp = strtoul(mins[m], NULL, 10);
        n = 20 * P;
        for (unsigned i = 0; i < n; i++)
            o[i] = qslab_cache_alloc(c);
        for (unsigned i = 0; i < n; i++)
            qslab_cache_free(c, o[i]);
        st = tc_stats(c);
        /* the active slab, and what the node kept (kernel rule: an emptied
         * slab goes while the node has min_partial partial slabs, itself
         * included) */
        unsigned long kept = st.num_slabs - st.empty_slabs;
        CHECKF(
            kept <= mp + 1 && kept + 1 >= (mp ? mp : 1),
            "min_partial %lu: %lu slabs held besides %lu empty ones after freeing all (%lu slabs)",
            mp, kept, st.empty_slabs, st.num_slabs);
        CHECKF(st.num_slabs == 20 || st.free_slab > 0, "min_partial %lu: %lu slabs, %lu given back",
               mp, st.num_slabs, st.free_slab);
        validate(c, "min_partial, everything free");
        /* shrink ignores min_partial (kmem_cache_shrink) */
        size_t bytes = qslab_cache_shrink(c);
        st = tc_stats(c);
        CHECKF(st.num_slabs == 0 && st.empty_slabs == 0 && bytes > 0,
               "min_partial %lu after shrink: %lu slabs, %lu empty, %zu bytes given back", mp,
               st.num_slabs, st.empty_slabs, bytes);
        validate(c, "min_partial, after shrink");
        CHECK(qslab_cache_destroy(c) == 0);
    }
}

/* A slab of one block (blocks over half a slab) that its free empties
 * goes to the node's FIFO at once, whoever frees it: no owner's partial
 * list nor the node's keeps it (their bounds count slabs, and such a slab
 * is 32 KiB to 2 MiB). */
static void single_free_all(void **o, int n, qslab_cache *c)
{
    for (int i = 0; i < n; i++)
        qslab_cache_free(c, o[i]);
}
static void *single_free_thread(void *arg)
{
    void **a = arg;
    single_free_all((void **)a[1], 4, a[0]);
    return NULL;
}

static void test_single_block(void)
{
    qslab_cache *c = make("t-slub-single", 40000, 0, NULL);
    if (!c)
        return;
    set("t-slub-single", "empty_decay_ms", "3600000"); /* nothing leaves the FIFO meanwhile */
    struct qslab_cache_stats st = tc_stats(c);
    CHECKF(st.objs_per_slab == 1, "40,000-byte objects: %u per slab", st.objs_per_slab);
    void *o[8];
    for (int i = 0; i < 8; i++)
        o[i] = qslab_cache_alloc(c);
    single_free_all(o, 4, c); /* by the allocating thread */
    void *arg[2] = {c, o + 4};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, single_free_thread, arg) == 0); /* by another */
    pthread_join(t, NULL);
    st = tc_stats(c);
    CHECKF(st.partial_slabs == 0 && st.owner_slabs == 0 && st.empty_slabs == 8 &&
               st.num_slabs == 8,
           "one block a slab, all freed: %lu partial, %lu on owners' lists, %lu empty of %lu "
           "slabs (want 0, 0, 8 of 8)",
           st.partial_slabs, st.owner_slabs, st.empty_slabs, st.num_slabs);
    validate(c, "single blocks freed");
    /* and they serve the next allocations */
    for (int i = 0; i < 8; i++)
        o[i] = qslab_cache_alloc(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 8 && st.empty_slabs == 0, "reused: %lu slabs, %lu empty", st.num_slabs,
           st.empty_slabs);
    single_free_all(o, 8, c);
    validate(c, "single blocks freed again");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A CPU that no thread uses the cache on (this thread stops using it)
 * gives its active slab, list and partial slabs back to the node within a
 * few purger ticks (slub_idle), where any CPU's refill takes them. */
static void test_idle_cpu(void)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    if (oi.kind != QSLAB_OWNER_CPU)
        return;
    qslab_cache *c = make("t-slub-idle", 256, 0, NULL);
    if (!c)
        return;
    enum { N = 400 };
    static void *o[N];
    for (int i = 0; i < N; i++)
        o[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N - 40; i += 2) { /* full slabs to this CPU's partial list */
        qslab_cache_free(c, o[i]);
        o[i] = NULL;
    }
    struct qslab_cache_stats st = tc_stats(c);
    CHECKF(st.owner_slabs > 1, "an active slab and partial slabs on this CPU: %lu",
           st.owner_slabs);
    for (int ms = 0; ms < 3000 && tc_stats(c).owner_slabs; ms += 10) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    st = tc_stats(c);
    CHECKF(st.owner_slabs == 0 && st.partial_slabs > 0,
           "an idle CPU's slabs after 3 s: %lu on owners, %lu partial on the node",
           st.owner_slabs, st.partial_slabs);
    validate(c, "an idle CPU's slabs given back");
    for (int i = 0; i < N; i++)
        if (o[i])
            qslab_cache_free(c, o[i]);
    validate(c, "an idle CPU's slabs, all freed");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- nodes ---- */

static void test_alloc_node(void)
{
    qslab_cache *c = make("t-slub-node", 128, 0, NULL);
    if (!c)
        return;
    int nodes = qslab_num_nodes(), here = qslab_current_node();
    CHECK(nodes >= 1 && here >= 0 && here < nodes);
    void *p = qslab_cache_alloc_node(c, here);
    CHECKF(p && qslab_object_node(p) == here, "alloc_node(%d): %p on node %d", here, p,
           qslab_object_node(p));
    void *q = qslab_cache_alloc_node(c, QSLAB_NUMA_NO_NODE);
    CHECK(q && qslab_object_node(q) == here);
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, nodes) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, -5) == NULL && errno == EINVAL);
    qslab_cache_free(c, p);
    qslab_cache_free(c, q);
    enum { N = 300 };
    static void *o[N];
    for (int node = 0; node < nodes; node++) {
        struct qslab_cache_stats a = tc_stats(c);
        int misplaced = 0;
        for (int i = 0; i < N; i++) {
            o[i] = qslab_cache_alloc_node(c, node);
            misplaced += !o[i] || qslab_object_node(o[i]) != node;
            if (o[i])
                memset(o[i], node + 1, 128);
        }
        CHECKF(misplaced == 0, "alloc_node(%d): %d of %d objects elsewhere", node, misplaced, N);
        struct qslab_cache_stats b = tc_stats(c);
        if (node != here) /* another node's objects: its partial slabs, under its lock */
            CHECKF(b.node_alloc - a.node_alloc == N && b.alloc - a.alloc == N,
                   "alloc_node(%d) from node %d: %lu node allocations of %lu", node, here,
                   b.node_alloc - a.node_alloc, b.alloc - a.alloc);
        validate(c, "objects on a node");
        /* half freed here, half by another thread */
        run_thread(free_all_in_thread, c, o, N / 2);
        for (int i = N / 2; i < N; i++)
            qslab_cache_free(c, o[i]);
        validate(c, "node objects freed");
    }
    struct qslab_cache_stats st = tc_stats(c);
    CHECK(st.active_objs == 0);
    qslab_cache_shrink(c);
    st = tc_stats(c);
    CHECKF(st.num_slabs == 0, "%lu slabs after shrink", st.num_slabs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- pass_through ---- */

static void test_pass_through(void)
{
    qslab_cache *k = qslab_cache_find("kmalloc-5120");
    CHECK(k != NULL);
    if (!k)
        return;
    if (!tf_is(k, "slub")) {
        tf_note("integration_slub", k, "pass_through (kmalloc caches not SLUB's)");
        return;
    }
    char s[32];
    set("kmalloc-5120", "pass_through", "1");
    struct qslab_cache_stats a = tc_stats(k), b;
    unsigned char *p = qslab_malloc(5000);
    b = tc_stats(k);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECKF(((uintptr_t)p & (PAGE - 1)) == 0, "a pass-through block starts a page: %p", (void *)p);
    size_t us = qslab_usable_size(p);
    CHECKF(us >= 5000, "usable %zu", us);
    memset(p, 0xab, us);
    CHECKF(b.new_slab - a.new_slab == 1 && b.alloc - a.alloc == 1 && b.num_slabs - a.num_slabs == 1,
           "one pass-through block: %lu new slabs, %lu allocs", b.new_slab - a.new_slab,
           b.alloc - a.alloc);
    CHECKF(qslab_object_node(p) >= 0, "node of a pass-through block: %d", qslab_object_node(p));
    validate(k, "a live pass-through block");
    qslab_free(p);
    b = tc_stats(k);
    CHECKF(b.free_slab - a.free_slab == 1 && b.free - a.free == 1 && b.num_slabs == a.num_slabs &&
               b.active_objs == a.active_objs,
           "its free: %lu slabs given back, %lu frees", b.free_slab - a.free_slab, b.free - a.free);

    /* several, written in full, realloc'ed, freed from another thread */
    enum { M = 10 };
    static void *v[M];
    a = tc_stats(k);
    for (int i = 0; i < M; i++) { /* 4,865 .. 5,120 bytes: kmalloc-5120's */
        v[i] = qslab_malloc(4880 + (size_t)i * 24);
        if (v[i])
            memset(v[i], i, 4880 + (size_t)i * 24);
    }
    b = tc_stats(k);
    CHECKF(b.new_slab - a.new_slab == M, "%d pass-through blocks: %lu new slabs", M,
           b.new_slab - a.new_slab);
    validate(k, "live pass-through blocks");
    unsigned char *r = qslab_realloc(v[0], 6000);
    int same = r != NULL;
    for (size_t i = 0; r && i < 4880; i++)
        same &= r[i] == 0;
    CHECKF(same, "realloc of a pass-through block kept its contents");
    v[0] = r;
    qslab_free(v[0]);
    run_thread(free_all_in_thread, k, v + 1, M - 1);
    b = tc_stats(k);
    CHECKF(b.free_slab - a.free_slab == M && b.active_objs == a.active_objs,
           "%d pass-through blocks freed: %lu slabs given back, %lu active (before %lu)", M,
           b.free_slab - a.free_slab, b.active_objs, a.active_objs);

    /* a double free of one is reported, once */
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    p = qslab_malloc(5000);
    qslab_free(p);
    qslab_free(p);
    CHECKF(tu_capture_calls() == 1 && strstr(tu_fatal_msg, tu_addr(s, p)) &&
               (strstr(tu_fatal_msg, "double free") || strstr(tu_fatal_msg, "free slab memory")),
           "double free of a pass-through block: %lu reports, \"%s\"", tu_capture_calls(),
           tu_fatal_msg);
    tu_capture_reset();
    qslab_set_fatal_handler(NULL);
    validate(k, "after a pass-through double free");

    /* a class of a page or less never passes through */
    set("kmalloc-4096", "pass_through", "1");
    qslab_cache *k4 = qslab_cache_find("kmalloc-4096");
    a = tc_stats(k4);
    for (int i = 0; i < M; i++)
        v[i] = qslab_malloc(4000);
    b = tc_stats(k4);
    CHECKF(b.new_slab - a.new_slab <= 2,
           "kmalloc-4096 with pass_through: %lu new slabs for %d blocks", b.new_slab - a.new_slab,
           M);
    for (int i = 0; i < M; i++)
        qslab_free(v[i]);
    set("kmalloc-4096", "pass_through", "0");

    /* pass_through 0: the class's slabs again */
    set("kmalloc-5120", "pass_through", "0");
    a = tc_stats(k);
    for (int i = 0; i < M; i++) {
        v[i] = qslab_malloc(5000);
        if (v[i])
            memset(v[i], i, 5000);
    }
    b = tc_stats(k);
    CHECKF(b.new_slab - a.new_slab <= 2 && b.alloc - a.alloc == M,
           "pass_through 0: %lu new slabs for %d blocks of 5000 bytes", b.new_slab - a.new_slab, M);
    for (int i = 0; i < M; i++)
        qslab_free(v[i]);
    validate(k, "after pass_through");
}

/* ---- misuse ---- */

static unsigned long active(qslab_cache *c)
{
    return tc_stats(c).active_objs;
}

static void *free_one(void *arg)
{
    (void)arg;
    qslab_cache_free(thr_cache, thr_objs[0]);
    return NULL;
}

static void test_misuse(void)
{
    char s[32];
    qslab_cache *A = make("t-slub-bad-a", 64, 0, NULL), *B = make("t-slub-bad-b", 64, 0, NULL);
    qslab_cache *C = make("t-slub-bad-ctor", 48, 0, ctor);
    if (!A || !B || !C)
        return;
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    check_sane(A, 64, "start");

    /* at once: the active slab's list head */
    void *p = qslab_cache_alloc(A);
    qslab_cache_free(A, p);
    qslab_cache_free(A, p);
    tu_check_fatal("double free", tu_addr(s, p), "t-slub-bad-a");
    CHECK(active(A) == 0);
    check_sane(A, 64, "an immediate double free");

    /* after other frees: the free loads the link word, which is a free
     * object's: reported at the second free, not at reuse */
    void *x = qslab_cache_alloc(A), *y = qslab_cache_alloc(A), *z = qslab_cache_alloc(A);
    qslab_cache_free(A, x);
    qslab_cache_free(A, y);
    qslab_cache_free(A, z);
    CHECK(tu_capture_calls() == 0);
    qslab_cache_free(A, x);
    tu_check_fatal("double free", tu_addr(s, x), "t-slub-bad-a");
    qslab_free(y); /* through qslab_free */
    tu_check_fatal("double free", tu_addr(s, y), "t-slub-bad-a");
    void *g[4];
    for (int i = 0; i < 4; i++)
        g[i] = qslab_cache_alloc(A);
    CHECKF(tu_capture_calls() == 0, "reported again at reuse: %s", tu_fatal_msg);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            CHECKF(g[i] && g[i] != g[j], "objects %d and %d after a double free: %p %p", j, i, g[j],
                   g[i]);
    for (int i = 0; i < 4; i++)
        qslab_cache_free(A, g[i]);
    CHECK(active(A) == 0);
    check_sane(A, 64, "a double free after other frees");

    /* into a slab that is not the active one (the slab's own list), and
     * into a slab left empty on the node */
    enum { P = 64 };
    static void *o[P + 1];
    for (int i = 0; i < P + 1; i++)
        o[i] = qslab_cache_alloc(A);
    qslab_cache_free(A, o[0]);
    qslab_cache_free(A, o[0]);
    tu_check_fatal("double free", tu_addr(s, o[0]), "t-slub-bad-a");
    for (int i = 1; i < P; i++)
        qslab_cache_free(A, o[i]);
    qslab_cache_free(A, o[5]);
    tu_check_fatal("double free", tu_addr(s, o[5]), "t-slub-bad-a");
    qslab_cache_free(A, o[P]);
    CHECK(active(A) == 0);
    validate(A, "double frees into a non-active slab");
    check_sane(A, 64, "double frees into a non-active slab");

    /* the first free in another thread */
    p = qslab_cache_alloc(A);
    thr_cache = A;
    thr_objs = &p;
    pthread_t t;
    pthread_create(&t, NULL, free_one, NULL);
    pthread_join(t, NULL);
    qslab_cache_free(A, p);
    tu_check_fatal("double free", tu_addr(s, p), "t-slub-bad-a");
    CHECK(active(A) == 0);
    check_sane(A, 64, "a double free after a free in another thread");

    /* constructor cache: the link word lies past the object */
    p = qslab_cache_alloc(C);
    qslab_cache_free(C, p);
    qslab_cache_free(C, p);
    tu_check_fatal("double free", tu_addr(s, p), "t-slub-bad-ctor");
    check_sane(C, 0, "a double free in a constructor cache");

    /* the wrong cache */
    p = qslab_cache_alloc(A);
    qslab_cache_free(B, p);
    tu_check_fatal("belongs to cache", tu_addr(s, p), "t-slub-bad-a", "t-slub-bad-b");
    CHECK(active(A) == 1 && active(B) == 0);
    qslab_cache_free(A, p);
    CHECK(tu_capture_calls() == 0 && active(A) == 0);
    void *km = qslab_malloc(64);
    qslab_cache_free(A, km);
    tu_check_fatal("belongs to cache", tu_addr(s, km), "kmalloc-64", "t-slub-bad-a");
    qslab_free(km);
    p = qslab_cache_alloc(C);
    qslab_cache_free(A, p);
    tu_check_fatal("belongs to cache", tu_addr(s, p), "t-slub-bad-ctor", "t-slub-bad-a");
    qslab_cache_free(C, p);
    char *in = qslab_cache_alloc(A);
    qslab_cache_free(A, in + 8);
    tu_check_fatal("interior pointer", tu_addr(s, in + 8), "t-slub-bad-a");
    qslab_cache_free(A, in);
    int on_stack;
    qslab_cache_free(A, &on_stack);
    tu_check_fatal("not allocated by qslab", tu_addr(s, &on_stack));
    p = qslab_cache_alloc(B);
    qslab_free(p); /* any cache: fine */
    CHECK(tu_capture_calls() == 0);
    check_sane(A, 64, "frees to the wrong cache");
    check_sane(B, 64, "frees to the wrong cache");

    /* objects of a SLQB cache and a SLUB cache freed to each other */
    qslab_cache *Q = qslab_cache_create("t-slub-bad-slqb", 64, 0, 0, NULL);
    if (Q && qslab_tune("t-slub-bad-slqb", "front", "slqb") == 0) {
        void *qa = qslab_cache_alloc(Q), *aa = qslab_cache_alloc(A);
        qslab_cache_free(A, qa);
        tu_check_fatal("belongs to cache", tu_addr(s, qa), "t-slub-bad-slqb", "t-slub-bad-a");
        qslab_cache_free(Q, aa);
        tu_check_fatal("belongs to cache", tu_addr(s, aa), "t-slub-bad-a", "t-slub-bad-slqb");
        qslab_cache_free(Q, qa);
        qslab_cache_free(A, aa);
        CHECK(tu_capture_calls() == 0 && active(A) == 0 && active(Q) == 0);
        validate(Q, "cross-front frees");
        CHECK(qslab_cache_destroy(Q) == 0);
    } else {
        CHECK(0 && "t-slub-bad-slqb");
    }

    /* into a slab emptied and given to the node's empty FIFO (cpu_partial
     * and min_partial 0: at once), whether its link word still looks free
     * or not (inuse 0 in the slab's word), then into one given back */
    qslab_cache *D = make("t-slub-bad-fifo", 64, 0, NULL);
    if (D) {
        set("t-slub-bad-fifo", "cpu_partial", "0");
        set("t-slub-bad-fifo", "min_partial", "0");
        for (int i = 0; i < P + 1; i++)
            o[i] = qslab_cache_alloc(D);
        for (int i = 0; i < P; i++)
            qslab_cache_free(D, o[i]);
        struct qslab_cache_stats st = tc_stats(D);
        CHECKF(st.empty_slabs == 1 && st.num_slabs == 2,
               "an emptied slab with min_partial 0: %lu empty, %lu slabs", st.empty_slabs,
               st.num_slabs);
        qslab_cache_free(D, o[3]);
        tu_check_fatal("double free", tu_addr(s, o[3]), "t-slub-bad-fifo");
        uint64_t *w = o[7], saved = w[0];
        w[0] = 0x1234; /* the program wrote into it: not a link any more */
        qslab_cache_free(D, w);
        tu_check_fatal("double free", tu_addr(s, w), "t-slub-bad-fifo");
        w[0] = saved;
        CHECK(active(D) == 1);
        validate(D, "double frees into an empty slab");
        qslab_cache_shrink(D);
        CHECKF(tu_capture_calls() == 0, "shrink after the double frees: %s", tu_fatal_msg);
        st = tc_stats(D);
        CHECKF(st.num_slabs == 1 && st.empty_slabs == 0, "after shrink: %lu slabs, %lu empty",
               st.num_slabs, st.empty_slabs);
        qslab_cache_free(D, o[3]);
        tu_check_fatal("free slab memory", tu_addr(s, o[3]), "t-slub-bad-fifo");
        qslab_cache_free(D, o[P]);
        CHECK(active(D) == 0);
        check_sane(D, 64, "double frees into empty and given-back slabs");
        validate(D, "after double frees into empty slabs");
        CHECK(qslab_cache_destroy(D) == 0);
    }

    /* ... into the tail of the owner's list (its oldest free): found when
     * shrink gives the active slab back, and nothing is lost */
    qslab_cache *U2 = make("t-slub-uaf2", 64, 0, NULL);
    if (U2) {
        for (int i = 0; i < P; i++)
            o[i] = qslab_cache_alloc(U2); /* exactly one slab */
        for (int i = 0; i < P; i++)
            qslab_cache_free(U2, o[i]);
        uint64_t *u = o[0];
        u[0] = 0x4242424242424242ull;
        CHECK(tu_capture_calls() == 0);
        qslab_cache_shrink(U2);
        tu_check_fatal("free list corruption", tu_addr(s, u), "t-slub-uaf2");
        validate(U2, "a write after free found at shrink");
        struct qslab_cache_stats st = tc_stats(U2);
        CHECKF(st.num_slabs == 0 && st.active_objs == 0, "after the shrink: %lu slabs, %lu active",
               st.num_slabs, st.active_objs);
        check_sane(U2, 64, "an overwritten list tail");
        validate(U2, "after the overwritten list tail");
        CHECK(qslab_cache_destroy(U2) == 0);
    }

    /* ... into an object of a slab emptied on the owner's partial list:
     * found when shrink gives the empty slab back (its list checked) */
    qslab_cache *U3 = make("t-slub-uaf3", 64, 0, NULL);
    if (U3) {
        for (int i = 0; i < P + 1; i++)
            o[i] = qslab_cache_alloc(U3); /* a full slab, and o[P] in the active one */
        for (int i = 0; i < P; i++)
            qslab_cache_free(U3, o[i]);
        uint64_t *u = o[P - 1]; /* the head of its slab's list */
        u[0] = 0x4343434343434343ull;
        CHECK(tu_capture_calls() == 0);
        qslab_cache_shrink(U3);
        tu_check_fatal("free list corruption", tu_addr(s, u), "t-slub-uaf3");
        validate(U3, "a write after free found in an empty slab");
        CHECK(active(U3) == 1);
        qslab_cache_free(U3, o[P]);
        check_sane(U3, 64, "an overwritten object of an empty slab");
        validate(U3, "after the overwritten empty slab");
        CHECK(qslab_cache_destroy(U3) == 0);
    }

    CHECK(active(A) == 0 && active(B) == 0 && active(C) == 0);
    validate(A, "after misuse");
    validate(B, "after misuse");
    validate(C, "after misuse");
    CHECK(tu_capture_calls() == 0);
    qslab_set_fatal_handler(NULL);
    CHECK(qslab_cache_destroy(A) == 0 && qslab_cache_destroy(B) == 0 &&
          qslab_cache_destroy(C) == 0);
}

/* A write after free into the link word of the owner's list head: found
 * at the next allocation, whose list is dropped (its objects leaked: the
 * cache does not validate any more).  Destroyed then, the cache must take
 * its slabs along, the one with the dropped list included: a cache made
 * next (at the same address, likely) validates.  Last: a slab left behind
 * would spoil every later cache made at that address. */
static void test_uaf_then_destroy(void)
{
    char s[32];
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_capture_reset();
    qslab_cache *U = make("t-slub-uaf", 64, 0, NULL);
    if (U) {
        uint64_t *u = qslab_cache_alloc(U);
        qslab_cache_free(U, u);
        u[0] = 0x4141414141414141ull;
        void *got = qslab_cache_alloc(U);
        tu_check_fatal("free list corruption", tu_addr(s, u), "t-slub-uaf");
        CHECKF(got != NULL && got != (void *)u && got != (void *)0x4141414141414141ull,
               "got %p after the report", got);
        if (got)
            qslab_cache_free(U, got);
        check_sane(U, 64, "an overwritten list head");
        CHECK(active(U) == 0 && qslab_cache_destroy(U) == 0);
        qslab_cache *V = make("t-slub-after-uaf", 64, 0, NULL);
        if (V) {
            qslab_cache_free(V, qslab_cache_alloc(V));
            CHECKF(qslab_cache_validate(V) == 0,
                   "a new cache (%p) after one destroyed with a dropped list (%p): slabs of the "
                   "old one left "
                   "behind? (see above)",
                   (void *)V, (void *)U);
            CHECK(qslab_cache_destroy(V) == 0);
        }
    }
    CHECK(tu_capture_calls() == 0);
    qslab_set_fatal_handler(NULL);
}

/* ---- an owner's exit ---- */

static void *alloc_some_free_third(void *arg)
{
    (void)arg;
    for (unsigned long i = 0; i < thr_n; i++)
        thr_objs[i] = qslab_cache_alloc(thr_cache);
    for (unsigned long i = 0; i < thr_n; i += 3) {
        qslab_cache_free(thr_cache, thr_objs[i]);
        thr_objs[i] = NULL;
    }
    return NULL; /* exits with its active slab and partial slabs */
}

static void test_retire(void)
{
    qslab_cache *c = make("t-slub-retire", 64, 0, NULL);
    if (!c)
        return;
    enum { P = 64, N = 3 * P };
    static void *o[N], *more[N];
    run_thread(alloc_some_free_third, c, o, N);
    struct qslab_cache_stats a = tc_stats(c);
    CHECKF(a.active_objs == N - N / 3 && a.num_slabs == 3,
           "after the thread's exit: %lu live, %lu slabs", a.active_objs, a.num_slabs);
    validate(c, "after an owner's exit with live objects");
    /* its slabs' free objects are ours now, no new slab needed */
    for (int i = 0; i < N / 3; i++)
        more[i] = qslab_cache_alloc(c);
    struct qslab_cache_stats b = tc_stats(c);
    CHECKF(b.new_slab == a.new_slab, "reusing an exited owner's slabs: %lu new slabs",
           b.new_slab - a.new_slab);
    validate(c, "reusing an exited owner's slabs");
    for (int i = 0; i < N; i++)
        if (o[i])
            qslab_cache_free(c, o[i]);
    for (int i = 0; i < N / 3; i++)
        qslab_cache_free(c, more[i]);
    validate(c, "everything freed after an owner's exit");
    qslab_cache_shrink(c);
    b = tc_stats(c);
    CHECKF(b.num_slabs == 0 && b.active_objs == 0, "after shrink: %lu slabs, %lu live", b.num_slabs,
           b.active_objs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- a thread past its exit (later key destructors, libc's clean-up):
 * no owner any more; allocations from the node lists, frees straight to
 * the slabs, nothing leaked, counts exact ---- */

static qslab_cache *late_cache;
static pthread_key_t late_key;
enum { LATE_KEEP = 8, LATE_ROUNDS = 20, LATE_PAR = 4 };
static void *late_kept[LATE_ROUNDS * LATE_PAR * LATE_KEEP];
static unsigned late_nkept, late_bad;

static void late_destructor(void *arg)
{
    /* runs after qslab's own destructor: our key was made after qslab's */
    void *objs[100];
    for (int i = 0; i < 100; i++) {
        objs[i] = qslab_cache_alloc(late_cache);
        if (!objs[i])
            __atomic_add_fetch(&late_bad, 1, __ATOMIC_RELAXED);
        else
            memset(objs[i], 0x6b, 80);
    }
    for (int i = LATE_KEEP; i < 100; i++)
        qslab_cache_free(late_cache, objs[i]);
    unsigned at = __atomic_fetch_add(&late_nkept, LATE_KEEP, __ATOMIC_RELAXED);
    for (int i = 0; i < LATE_KEEP; i++)
        late_kept[at + (unsigned)i] = objs[i]; /* freed by main */
    qslab_cache_free(late_cache, arg);         /* allocated while the thread lived */
}

static void *late_worker(void *arg)
{
    (void)arg;
    void *keep = qslab_cache_alloc(late_cache);
    for (int i = 0; i < 200; i++)
        qslab_cache_free(late_cache, qslab_cache_alloc(late_cache));
    pthread_setspecific(late_key, keep);
    return NULL;
}

static void test_after_exit(void)
{
    late_cache = make("t-slub-late", 80, 0, NULL);
    if (!late_cache)
        return;
    qslab_cache_free(late_cache, qslab_cache_alloc(late_cache)); /* qslab's key exists now */
    CHECK(pthread_key_create(&late_key, late_destructor) == 0);
    for (int r = 0; r < LATE_ROUNDS; r++) {
        pthread_t t[LATE_PAR];
        for (int i = 0; i < LATE_PAR; i++)
            pthread_create(&t[i], NULL, late_worker, NULL);
        for (int i = 0; i < LATE_PAR; i++)
            pthread_join(t[i], NULL);
    }
    CHECK(late_bad == 0 && late_nkept == LATE_ROUNDS * LATE_PAR * LATE_KEEP);
    struct qslab_cache_stats st = tc_stats(late_cache);
    CHECKF(st.active_objs == late_nkept,
           "after the threads' exits: %lu live, %u kept by their destructors", st.active_objs,
           late_nkept);
    validate(late_cache, "after allocations past threads' exits");
    for (unsigned i = 0; i < late_nkept; i++) {
        const unsigned char *b = late_kept[i];
        if (b[0] != 0x6b || b[79] != 0x6b)
            tu_fail("object %p kept by a late destructor overwritten", (void *)b);
        qslab_cache_free(late_cache, late_kept[i]);
    }
    st = tc_stats(late_cache);
    CHECKF(st.active_objs == 0 && st.alloc == st.free, "%lu live, %lu allocs, %lu frees",
           st.active_objs, st.alloc, st.free);
    validate(late_cache, "everything freed after the late destructors");
    qslab_cache_shrink(late_cache);
    st = tc_stats(late_cache);
    CHECKF(st.num_slabs == 0, "after shrink: %lu slabs", st.num_slabs);
    pthread_key_delete(late_key);
    CHECK(qslab_cache_destroy(late_cache) == 0);
}

/* ---- destroy ---- */

static void test_destroy_busy(void)
{
    qslab_cache *c = make("t-slub-busy", 100, 0, NULL);
    if (!c)
        return;
    void *p = qslab_cache_alloc(c), *q = qslab_cache_alloc(c);
    char err[256];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_cache_destroy(c);
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EBUSY && strstr(err, "2 objects still allocated") &&
               strstr(err, "t-slub-busy"),
           "%d errno %d \"%s\"", r, e, err);
    CHECK(tf_is(c, "slub"));
    qslab_cache_free(c, p);
    void *again = qslab_cache_alloc(c); /* still usable */
    CHECK(again != NULL);
    qslab_cache_free(c, again);
    /* the last live object freed by another thread */
    run_thread(free_all_in_thread, c, &q, 1);
    validate(c, "before destroy");
    CHECK(qslab_cache_destroy(c) == 0);
}

/* run_without_membarrier's child before its exec: membarrier fails with
 * ENOSYS in it (seccomp), as on kernels before 5.10: per-CPU owners cannot
 * take another CPU's queue, and a shrink flushes only the caller's CPU's
 * state (src/front/slub/cachewide.c flush_all) */
static void deny_membarrier(void *arg)
{
    (void)arg;
    if (deny_syscall(__NR_membarrier, ENOSYS) != 0) {
        perror("seccomp");
        _exit(126);
    }
    setenv("QSLAB_OWNER", "cpu", 1);
}

/* This executable again, in mode "nomembarrier", per-CPU owners, with
 * membarrier denied from its start (before qslab's start-up registers for
 * it); its exit status. */
static int run_without_membarrier(void)
{
    pid_t pid = tu_spawn_self("nomembarrier", deny_membarrier, NULL);
    return pid < 0 ? -1 : tu_wait(pid);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "numa") == 0) { /* re-executed with QSLAB_FAKE_NUMA=2 */
        tu_pin_one_cpu();
        CHECKF(qslab_num_nodes() == 2, "QSLAB_FAKE_NUMA=2: %d nodes", qslab_num_nodes());
        test_alloc_node();
        return tu_done();
    }
    if (argc == 2 && strcmp(argv[1], "nomembarrier") == 0) { /* run_without_membarrier's child */
        tu_pin_one_cpu(); /* every thread on one CPU: a shrink can reach all */
        struct qslab_owner_info oi;
        qslab_owner_info(&oi);
        CHECKF(oi.kind == QSLAB_OWNER_CPU, "owner: %s", oi.why);
        test_contents();
        test_counters();
        test_partial();
        test_retire();
        test_after_exit();
        test_misuse();
        test_destroy_busy();
        test_uaf_then_destroy();
        return tu_done();
    }
    test_order("unpinned");
    tu_pin_one_cpu(); /* per-CPU owners: these checks follow one owner */
    test_order("pinned to one CPU");
    test_selection();
    test_tunables();
    test_order_change();
    test_contents();
    test_counters();
    test_partial();
    test_single_block();
    test_idle_cpu();
    test_alloc_node();
    test_pass_through();
    test_retire();
    test_after_exit();
    test_misuse();
    test_destroy_busy();
    test_uaf_then_destroy(); /* last (see there) */
    int r = tu_reexec("numa", "QSLAB_FAKE_NUMA", "2");
    CHECKF(r == 0, "the run with QSLAB_FAKE_NUMA=2 failed (%d)", r);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    if (oi.kind == QSLAB_OWNER_CPU) {
        r = run_without_membarrier();
        CHECKF(r == 0, "the run without membarrier failed (%d)", r);
    }
    return tu_done();
}
