/*
 * front.h (tests) - which front end serves a cache, for tests that check
 * SLQB's mechanics where the cache is SLQB's and SLOB's promises where it is
 * SLOB's (QSLAB_FRONT=slob, or the `front` tunable).  Header only; public
 * API only (unit tests also see src/front/front.h: this one has its own guard).
 *
 *   tf_is(c, "slqb")     the cache's front end is that one (0 for NULL c)
 *   tf_slob(c)           tf_is(c, "slob")
 *   tf_kmalloc_slob()    the kmalloc-<size> caches are SLOB's (they all
 *                        follow QSLAB_FRONT; kmalloc-64 stands for them)
 *   tf_slob_usable_ok(us, n)  a SLOB kmalloc block's usable size for n bytes
 *   TF_SLOB_RUN_MAX      SLOB's largest object in a run (larger: own slabs)
 *   tf_pin_slqb(name)    pin a new cache to SLQB before its first
 *                        allocation (white-box tests of SLQB internals);
 *                        CHECKs that the tunable took
 *   tf_note(test, c, what)  one line on stderr: a SLQB-only part is skipped
 *   tf_debug_skip(test, c)  c is a debug cache (QSLAB_DEBUG): say so, true
 *   tf_cpu_owner(test, argc, argv)  rerun with QSLAB_OWNER=cpu; 1: test them
 */
#ifndef QSLAB_TESTS_FRONT_H
#define QSLAB_TESTS_FRONT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "qslab.h"
#include "testutil.h"

static inline int tf_is(const qslab_cache *c, const char *front)
{
    const char *f = c ? qslab_cache_front(c) : NULL;
    return f != NULL && strcmp(f, front) == 0;
}

static inline int tf_slob(const qslab_cache *c)
{
    return tf_is(c, "slob");
}

static inline int tf_kmalloc_slob(void)
{
    return tf_slob(qslab_cache_find("kmalloc-64"));
}

static inline int tf_kmalloc_slab(void)
{
    return tf_is(qslab_cache_find("kmalloc-64"), "slab");
}

/* The kmalloc caches' front end, by name (kmalloc-64's). */
static inline const char *tf_kmalloc_front(void)
{
    qslab_cache *k = qslab_cache_find("kmalloc-64");
    return k ? qslab_cache_front(k) : "none";
}

/* SLOB's kmalloc keeps the request's size: a block of whole 16-byte units
 * holding an 8-byte header (in a page, or in a run: blocks over 528 bytes
 * and up to TF_SLOB_RUN_MAX bytes), so what is usable is the request
 * rounded up to 16n + 8, not the kmalloc class's size. */
#define TF_SLOB_RUN_MAX ((size_t)64 << 10) /* src/front/slob/slob.h SLOB_RUN_MAX: size + alignment */
static inline int tf_slob_usable_ok(size_t usable, size_t requested)
{
    return usable >= requested && usable < requested + 32;
}

/* Pin cache `name` to SLQB; CHECKed (0 and the front reads back "slqb"). */
#define tf_pin_slqb(name) tf_pin_slqb_at(__FILE__, __LINE__, (name))
static inline int tf_pin_slqb_at(const char *file, int line, const char *name)
{
    if (tf_is(qslab_cache_find(name), "debug")) /* QSLAB_DEBUG: it stays a debug cache */
        return 1;
    errno = 0;
    int r = qslab_tune(name, "front", "slqb");
    int e = errno;
    qslab_cache *c = qslab_cache_find(name);
    return tu_check(r == 0 && tf_is(c, "slqb"), file, line, "pin to slqb",
                    "qslab_tune(\"%s\", \"front\", \"slqb\") = %d errno %d, front %s", name, r, e,
                    c ? qslab_cache_front(c) : "(no cache)");
}

/* A QSLAB_DEBUG run made c a debug cache (docs/debugging.md), which keeps
 * its front end: a test of another front end's mechanics notes it and
 * skips them (the debug caches have tests of their own, and the other
 * stress tests run on them). */
static inline int tf_debug_skip(const char *test, const qslab_cache *c)
{
    if (!tf_is(c, "debug"))
        return 0;
    fprintf(stderr, "%s: debug caches (QSLAB_DEBUG): this front end's test is skipped\n", test);
    return 1;
}

/* Guarded sampling is on (QSLAB_GUARD_SAMPLE set, not 0): some allocations
 * come from guarded slots, not from the queues or slabs a test counts. */
static inline int tf_guarded(void)
{
    const char *gs = getenv("QSLAB_GUARD_SAMPLE");
    return gs && *gs && strcmp(gs, "0") != 0;
}

/* A test that counts every allocation's way through queues and slabs, with
 * guarded sampling on: say so, destroy c and return 1 (the caller returns
 * tu_done()); else 0. */
static inline int tf_guard_skip(const char *test, qslab_cache *c)
{
    if (!tf_guarded())
        return 0;
    fprintf(stderr, "%s: guarded sampling on (QSLAB_GUARD_SAMPLE=%s): nothing to test\n", test,
            getenv("QSLAB_GUARD_SAMPLE"));
    qslab_cache_destroy(c);
    return 1;
}

/* Tests of per-CPU queues: run this test again with QSLAB_OWNER=cpu (the
 * child gets argv[1] "cpu").  1 in that child where per-CPU queues are in
 * force: test them.  0 in the parent after the child ran (its exit status
 * CHECKed), and in a child where they are not (it says why on stderr and
 * CHECKs that rseq is the reason): return tu_done(). */
static inline int tf_cpu_owner(const char *test, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "cpu") != 0) {
        int st = tu_reexec("cpu", "QSLAB_OWNER", "cpu");
        CHECKF(st == 0, "the run with QSLAB_OWNER=cpu exited %d", st);
        return 0;
    }
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    if (oi.kind == QSLAB_OWNER_CPU)
        return 1;
    fprintf(stderr, "%s: per-CPU queues unavailable here (%s): nothing to test\n", test, oi.why);
    CHECK(strstr(oi.why, "rseq") != NULL);
    return 0;
}

/* One line on stderr: the part `what` of `test` is skipped for cache c's
 * front end (NULL c: the kmalloc caches'). */
static inline void tf_note(const char *test, const qslab_cache *c, const char *what)
{
    fprintf(stderr, "%s: %s front: %s skipped\n", test, c ? qslab_cache_front(c) : tf_kmalloc_front(), what);
}

#endif /* QSLAB_TESTS_FRONT_H */
