/*
 * freelist_random.c - the tunable `random` (SLAB_FREELIST_RANDOM: the
 * objects of new slabs handed out in a shuffled order) through the public
 * API, on caches pinned to SLQB, SLUB and SLAB with the `front` tunable
 * (whatever QSLAB_FRONT says), and on a cache of the process's front end:
 *   tunable     default read back; 0 and 1 accepted, 2 and "x" refused
 *               with the range on stderr, nothing changed; QSLAB_TUNE sets
 *               it at creation (re-executed)
 *   shuffled    with random=1, each fresh slab's objects come out in no
 *               address order: the ascending adjacent pairs among a slab's
 *               objects, about half for a shuffle, are far from all (or
 *               none, as in sequential order), which fails with odds
 *               below 1e-10 per slab for a real shuffle; consecutive slabs
 *               differ in order
 *   exactly once every object of the slab is handed out once, and all of
 *               them before a new slab is taken (new_slab counts one more
 *               exactly at each slab's end); on 32-byte objects (a slab of
 *               a page), on 64-byte objects in 32 KiB slabs (indices of two
 *               256-wide digits; SLQB births them lazily, by runs), and on
 *               a constructor cache (the link word after the object; every
 *               object constructed once)
 *   in order    with random=0 a slab's objects come in the front end's
 *               usual order (monotonic in address, up to a few breaks)
 *   from now on random changed between two slabs: the first in order, the
 *               next shuffled
 *   SLOB        a SLOB cache accepts the tunable (its shared pages have no
 *               per-slab order: nothing to check but that it works)
 * qslab_cache_validate with the objects live and after they are freed.
 * The thread stays on one CPU: with per-CPU owners a migration would take
 * objects from another CPU's slab.
 */
#define _GNU_SOURCE
#include <qslab.h>
#include <stdint.h>
#include <stdlib.h>

#include "../cacheutil.h"
#include "../front.h"
#include "../testutil.h"

#define MAX_OBJS 8192

static unsigned long get_random(const char *name)
{
    unsigned long v = 0xdeadbeef;
    if (qslab_tune_get(name, "random", &v) != 0)
        return 0xdeadbeef;
    return v;
}

static int set_random(const char *name, const char *v)
{
    return CHECKF(qslab_tune(name, "random", v) == 0, "qslab_tune(%s, random, %s) errno %d", name,
                  v, errno);
}

/* A new cache, pinned to `front` (NULL: the process's) before its first
 * allocation, with random set to r (-1: left alone). */
static qslab_cache *make(const char *name, size_t size, const char *front, int r,
                         void (*ctor)(void *))
{
    qslab_cache *c = qslab_cache_create(name, size, 0, 0, ctor);
    CHECKF(c != NULL, "create %s", name);
    if (!c)
        return NULL;
    if (front)
        CHECKF(qslab_tune(name, "front", front) == 0 && tf_is(c, front), "%s pinned to %s", name,
               front);
    if (r >= 0)
        set_random(name, r ? "1" : "0");
    return c;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Ascending adjacent pairs of v[0..n) */
static unsigned ascending(void *const *v, unsigned n)
{
    unsigned a = 0;
    for (unsigned i = 0; i + 1 < n; i++)
        a += (uintptr_t)v[i + 1] > (uintptr_t)v[i];
    return a;
}

/* The objects v[0..n) are exactly n slots of `slot` bytes, contiguous
 * (one slab's, up to its colour): distinct, slot-aligned apart, spanning
 * (n - 1) slots. */
static int one_slab(const char *what, void *const *v, unsigned n, size_t slot)
{
    static uintptr_t s[MAX_OBJS];
    for (unsigned i = 0; i < n; i++)
        s[i] = (uintptr_t)v[i];
    qsort(s, n, sizeof s[0], cmp_ptr);
    unsigned dups = 0, gaps = 0;
    for (unsigned i = 0; i + 1 < n; i++) {
        dups += s[i + 1] == s[i];
        gaps += s[i + 1] - s[i] != slot;
    }
    return CHECKF(dups == 0 && gaps == 0 && s[n - 1] - s[0] == (n - 1) * slot,
                  "%s: %u objects, %u duplicates, %u gaps, span %zu bytes for slots of %zu", what,
                  n, dups, gaps, (size_t)(s[n - 1] - s[0]), slot);
}

static unsigned ctor_calls;
static void ctor(void *p)
{
    __atomic_add_fetch(&ctor_calls, 1, __ATOMIC_RELAXED);
    memcpy(p, "ctor-ok", 8);
}

/*
 * Allocate `slabs` slabs' worth of c's objects, one slab at a time: each
 * slab's objects are all handed out before the next slab is made
 * (new_slab: one more exactly at each slab's start), they are exactly one
 * slab's slots, and their order is shuffled (want 1) or the usual
 * monotonic one (want 0; -1: not checked).  From slab flip_at on (-1:
 * never), random is set to 1 before the slab's first allocation and the
 * slabs are to be shuffled.  Then validate, free, validate.  Returns the
 * ascending pairs of the first slab.
 */
static unsigned run_slabs(qslab_cache *c, const char *what, unsigned slabs, int want, int flip_at)
{
    static void *v[4 * MAX_OBJS];
    struct qslab_cache_stats st = tc_stats(c);
    unsigned n = st.objs_per_slab, first_asc = 0;
    size_t slot = st.slot_size;
    unsigned long base = st.new_slab;
    if (!CHECKF(n >= 64 && n * slabs <= 4 * MAX_OBJS, "%s: %u objects per slab", what, n))
        return 0;
    unsigned bad_count = 0;
    for (unsigned k = 0; k < slabs; k++) {
        void **o = v + (size_t)k * n;
        if ((int)k == flip_at) {
            set_random(qslab_cache_name(c), "1");
            want = 1;
        }
        for (unsigned i = 0; i < n; i++) {
            o[i] = qslab_cache_alloc(c);
            if (!o[i]) {
                tu_fail("%s: allocation %u of slab %u failed", what, i, k);
                return 0;
            }
            /* new_slab: slab k was taken at its first object, no other */
            unsigned long ns = tc_stats(c).new_slab;
            if (ns != base + k + 1 && bad_count++ < 3)
                tu_fail("%s: slab %u object %u: new_slab %lu, want %lu", what, k, i, ns,
                        base + k + 1);
        }
        char w[96];
        snprintf(w, sizeof w, "%s slab %u", what, k);
        one_slab(w, o, n, slot);
        unsigned a = ascending(o, n);
        if (k == 0)
            first_asc = a;
        if (want == 1)
            CHECKF(a >= (n - 1) / 4 && a <= 3 * (n - 1) / 4,
                   "%s: shuffled: %u ascending pairs of %u (about half expected)", w, a, n - 1);
        else if (want == 0)
            /* a break per refill: a queue's grant doubles from a page's
             * worth, so a slab's objects come in up to log2(n) runs */
            CHECKF(a <= 8 || a >= n - 1 - 8,
                   "%s: in order: %u ascending pairs of %u (monotonic expected)", w, a, n - 1);
        if (want == 1 && (int)k > flip_at && k > 0) { /* a slab's own start: orders differ */
            unsigned same = 0;
            void **p = v + (size_t)(k - 1) * n;
            for (unsigned i = 0; i < n; i++)
                same += (uintptr_t)o[i] - (uintptr_t)o[0] == (uintptr_t)p[i] - (uintptr_t)p[0];
            CHECKF(same < n / 2, "%s: %u of %u objects at the previous slab's offsets", w, same, n);
        }
    }
    CHECKF(qslab_cache_validate(c) == 0, "%s: validate with objects live", what);
    for (unsigned i = 0; i < n * slabs; i++)
        qslab_cache_free(c, v[i]);
    CHECKF(qslab_cache_validate(c) == 0, "%s: validate after the frees", what);
    return first_asc;
}

static void destroy(qslab_cache *c)
{
    if (c)
        CHECKF(qslab_cache_destroy(c) == 0, "destroy %s", qslab_cache_name(c));
}

static void front_end(const char *front)
{
    char name[32], what[64];

    /* random=1: 32-byte objects, a page of them per slab */
    snprintf(name, sizeof name, "fr-%s-on", front);
    qslab_cache *c = make(name, 32, front, 1, NULL);
    CHECK(get_random(name) == 1);
    snprintf(what, sizeof what, "%s random=1", front);
    if (c)
        run_slabs(c, what, 4, 1, -1);
    destroy(c);

    /* random=0: the usual order */
    snprintf(name, sizeof name, "fr-%s-off", front);
    c = make(name, 32, front, 0, NULL);
    CHECK(get_random(name) == 0);
    snprintf(what, sizeof what, "%s random=0", front);
    if (c)
        run_slabs(c, what, 2, 0, -1);
    destroy(c);
    /* changed between slabs: slabs made from then on are shuffled */
    snprintf(name, sizeof name, "fr-%s-flip", front);
    c = make(name, 32, front, 0, NULL);
    snprintf(what, sizeof what, "%s random=0 then 1", front);
    if (c)
        run_slabs(c, what, 3, 0, 1);
    destroy(c);

    /* 64-byte objects in 32 KiB slabs: 512 per slab, indices of two
     * digits (SLQB: born lazily, run by run; 512 is the most a slab of a
     * front end with free bits holds: core/slab.h) */
    snprintf(name, sizeof name, "fr-%s-big", front);
    c = make(name, 64, front, 1, NULL);
    if (c && CHECK(qslab_tune(name, "order", "3") == 0)) {
        snprintf(what, sizeof what, "%s random=1 order 3", front);
        run_slabs(c, what, 2, 1, -1);
    }
    destroy(c);

    /* a constructor cache: the link word after the object */
    snprintf(name, sizeof name, "fr-%s-ctor", front);
    __atomic_store_n(&ctor_calls, 0, __ATOMIC_RELAXED);
    c = make(name, 40, front, 1, ctor);
    if (c) {
        struct qslab_cache_stats st = tc_stats(c);
        unsigned n = st.objs_per_slab;
        static void *v[MAX_OBJS];
        unsigned bad = 0;
        for (unsigned i = 0; i < n && i < MAX_OBJS; i++) {
            v[i] = qslab_cache_alloc(c);
            bad += !v[i] || memcmp(v[i], "ctor-ok", 8) != 0;
        }
        CHECKF(bad == 0, "%s ctor: %u objects not constructed", front, bad);
        CHECKF(__atomic_load_n(&ctor_calls, __ATOMIC_RELAXED) == n,
               "%s ctor: %u constructor calls for a slab of %u", front, ctor_calls, n);
        CHECK(tc_stats(c).new_slab == 1);
        snprintf(what, sizeof what, "%s ctor", front);
        one_slab(what, v, n, st.slot_size);
        unsigned a = ascending(v, n);
        CHECKF(a >= (n - 1) / 4 && a <= 3 * (n - 1) / 4, "%s ctor: %u ascending pairs of %u", front,
               a, n - 1);
        CHECKF(qslab_cache_validate(c) == 0, "%s ctor: validate", front);
        for (unsigned i = 0; i < n; i++)
            qslab_cache_free(c, v[i]);
        CHECKF(qslab_cache_validate(c) == 0, "%s ctor: validate after the frees", front);
    }
    destroy(c);
}

/* The tunable itself: default, range, refusals. */
static void tunable(void)
{
    qslab_cache *c = make("fr-tune", 64, NULL, -1, NULL);
    unsigned long def = get_random("fr-tune");
    CHECKF(def == 0 || def == 1, "default random %lu", def);
    CHECK(get_random("kmalloc-64") == def);
    char err[1024];
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune("fr-tune", "random", "2");
    int e = errno;
    tu_stderr_end(err, sizeof err);
    CHECKF(r == -1 && e == EINVAL, "random=2: %d errno %d", r, e);
    CHECKF(strstr(err, "random") && strstr(err, "0..1") && strstr(err, "fr-tune"),
           "the refusal names the cache and the range: \"%s\"", err);
    CHECK(get_random("fr-tune") == def);
    tu_stderr_begin();
    r = qslab_tune("fr-tune", "random", "x");
    tu_stderr_end(err, sizeof err);
    CHECK(r == -1 && strstr(err, "0..1"));
    CHECK(get_random("fr-tune") == def);
    CHECK(qslab_tune("fr-tune", "random", "1") == 0 && get_random("fr-tune") == 1);
    CHECK(qslab_tune("fr-tune", "random", "0") == 0 && get_random("fr-tune") == 0);
    destroy(c);
}

/* The process's own front end; SLOB accepts the tunable and works. */
static void process_front(void)
{
    qslab_cache *c = make("fr-default", 32, NULL, 1, NULL);
    if (!c)
        return;
    CHECK(get_random("fr-default") == 1);
    if (tf_slob(c)) {
        tf_note("integration_freelist_random", c, "the order of a slab (SLOB has none)");
        static void *v[512];
        for (unsigned i = 0; i < 512; i++)
            CHECK((v[i] = qslab_cache_alloc(c)) != NULL);
        CHECK(qslab_cache_validate(c) == 0);
        for (unsigned i = 0; i < 512; i++)
            qslab_cache_free(c, v[i]);
        CHECK(qslab_cache_validate(c) == 0);
    } else {
        run_slabs(c, "process front end, random=1", 2, 1, -1);
    }
    destroy(c);
}

/* Re-executed with QSLAB_TUNE="fr-env:random=1" */
static int env_child(void)
{
    tu_pin_one_cpu();
    qslab_cache *c = make("fr-env", 32, "slub", -1, NULL);
    CHECK(get_random("fr-env") == 1);
    if (c)
        run_slabs(c, "QSLAB_TUNE random=1", 1, 1, -1);
    destroy(c);
    qslab_cache *d = make("fr-env-not", 32, "slub", -1, NULL);
    CHECK(get_random("fr-env-not") == get_random("kmalloc-64"));
    destroy(d);
    return tu_done();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "env") == 0)
        return env_child();
    tu_pin_one_cpu();
    tunable();
    front_end("slqb");
    front_end("slub");
    front_end("slab");
    process_front();
    CHECKF(tu_reexec("env", "QSLAB_TUNE", "fr-env:random=1") == 0,
           "QSLAB_TUNE run failed (its output above)");
    return tu_done();
}
