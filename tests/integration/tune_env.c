/*
 * QSLAB_TUNE at start-up: "cache:attr=value,attr=value;cache2:attr=value",
 * "*" for every cache, applied left to right.  The test re-executes itself
 * with the variable set and checks the values from inside.
 */
#include <qslab.h>

#include "../cacheutil.h"
#include "../testutil.h"

static void exercise(size_t size)
{
    void *p[200];
    int bad = 0;
    for (int i = 0; i < 200; i++)
        bad += (p[i] = qslab_malloc(size)) == NULL;
    for (int i = 0; i < 200; i++)
        qslab_free(p[i]);
    CHECKF(bad == 0, "%d allocations of %zu failed", bad, size);
}

#define EXPECT(cache, attr, v) CHECKF(tc_get(cache, attr) == (v), "%s %s = %lu, expected %lu", cache, attr, \
                                      tc_get(cache, attr), (unsigned long)(v))

/* QSLAB_TUNE="kmalloc-8192:order=3,hiwater=64;*:empty_decay_ms=500" */
static int child_example(void)
{
    EXPECT("kmalloc-8192", "order", 3);
    EXPECT("kmalloc-8192", "hiwater", 64);
    EXPECT("kmalloc-8192", "empty_decay_ms", 500);
    EXPECT("kmalloc-8", "empty_decay_ms", 500);
    EXPECT("kmalloc-96", "empty_decay_ms", 500);
    EXPECT("kmalloc-33554432", "empty_decay_ms", 500);
    exercise(8192);
    exercise(96);
    struct qslab_cache_stats st;
    qslab_cache *c = qslab_cache_find("kmalloc-8192");
    void *p = qslab_malloc(8000);
    CHECK(c && qslab_cache_stats(c, &st) == 0 && st.order == 3);
    qslab_free(p);
    /* Run-time changes still work on top. */
    CHECK(qslab_tune("kmalloc-8192", "order", "2") == 0);
    EXPECT("kmalloc-8192", "order", 2);
    exercise(8192);
    return tu_done();
}

/* QSLAB_TUNE="*:empty_decay_ms=700;kmalloc-96:freebatch=20,hiwater=100,empty_decay_ms=100" */
static int child_override(void)
{
    EXPECT("kmalloc-96", "empty_decay_ms", 100);
    EXPECT("kmalloc-96", "freebatch", 20);
    EXPECT("kmalloc-96", "hiwater", 100);
    EXPECT("kmalloc-192", "empty_decay_ms", 700);
    EXPECT("kmalloc-64", "empty_decay_ms", 700);
    exercise(96);
    exercise(100);
    return tu_done();
}

/* QSLAB_TUNE with a problem in every entry (main): refused settings change
 * nothing; the program runs. */
static int child_bad(void)
{
    unsigned long order = tc_get("kmalloc-8192", "order");
    CHECKF(order != 99 && order != 0xdeadbeef, "kmalloc-8192 order %lu", order);
    exercise(8192);
    exercise(64);
    /* debug is QSLAB_DEBUG's at start-up: no twin (src/debug/twin.c) */
    CHECK(qslab_cache_find("kmalloc-64:FZ") == NULL);
    CHECK(qslab_tune("kmalloc-8192", "order", "3") == 0);
    EXPECT("kmalloc-8192", "order", 3);
    return tu_done();
}

/* No QSLAB_TUNE: the defaults, which the other runs must differ from for the
 * test to mean anything. */
static int child_defaults(void)
{
    CHECKF(tc_get("kmalloc-8192", "order") != 0xdeadbeef, "no order for kmalloc-8192");
    CHECKF(tc_get("kmalloc-8192", "empty_decay_ms") != 500 || tc_get("kmalloc-8192", "order") != 3,
           "defaults equal the tuned values; pick other values in this test");
    exercise(8192);
    return tu_done();
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "example"))
            return child_example();
        if (!strcmp(argv[1], "override"))
            return child_override();
        if (!strcmp(argv[1], "bad"))
            return child_bad();
        if (!strcmp(argv[1], "defaults"))
            return child_defaults();
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    int r = tu_reexec("defaults", "QSLAB_TUNE", NULL);
    CHECKF(r == 0, "child without QSLAB_TUNE: status %d", r);
    r = tu_reexec("example", "QSLAB_TUNE", "kmalloc-8192:order=3,hiwater=64;*:empty_decay_ms=500");
    CHECKF(r == 0, "child with the example QSLAB_TUNE: status %d", r);
    r = tu_reexec("override", "QSLAB_TUNE", "*:empty_decay_ms=700;kmalloc-96:freebatch=20,hiwater=100,empty_decay_ms=100");
    CHECKF(r == 0, "child with overriding QSLAB_TUNE: status %d", r);

    /* Bad entries: one line each, once (not once per cache), that names
     * the entry and what is wrong; the program runs as without them. */
    static char err[1 << 16];
    static const char bad[] = "kmalloc-8192:order=99;no-such-cache:order=1;kmalloc-64:bogus=1;kmalloc-64:debug=FZ;"
                              "junk;*:hiwater=abc;*:hiwatr=5;kmalloc-77:hiwater=5;*:freebatch=0;*:order;"
                              "*:front=slxb;kmalloc-64:owner_budget=5;:order=1";
    static const char *const said[] = {
        "qslab: QSLAB_TUNE entry 'kmalloc-8192:order=99': tune kmalloc-8192 order=99 refused: allowed range is ",
        "qslab: QSLAB_TUNE entry 'no-such-cache:order=1' was not used: no cache named 'no-such-cache' was made\n",
        "qslab: QSLAB_TUNE entry 'kmalloc-64:bogus=1': unknown attribute 'bogus' (the attributes: order, hiwater, ",
        "qslab: QSLAB_TUNE entry 'kmalloc-64:debug=FZ': debug ignored: QSLAB_DEBUG gives caches their debug flags "
        "when they are made (docs/debugging.md)\n",
        "qslab: QSLAB_TUNE entry 'junk' ignored: no ':' (the form is cache:attr=value[,attr=value...], cache * for "
        "every cache)\n",
        "qslab: QSLAB_TUNE entry '*:hiwater=abc': hiwater=abc ignored: not a number (queue length over which an "
        "owner flushes, in objects)\n",
        "qslab: QSLAB_TUNE entry '*:hiwatr=5': unknown attribute 'hiwatr' (did you mean 'hiwater'?)\n",
        "qslab: QSLAB_TUNE entry 'kmalloc-77:hiwater=5' ignored: unknown cache 'kmalloc-77' (a request of 77 bytes "
        "is served by kmalloc-80)\n",
        "qslab: QSLAB_TUNE entry '*:freebatch=0': tune kmalloc-8 freebatch=0 refused: allowed range is 1..",
        "qslab: QSLAB_TUNE entry '*:order': order has no value (order=N: slab size of new slabs: 4 KiB << order)\n",
        "qslab: QSLAB_TUNE entry '*:front=slxb': front=slxb ignored: not a front end (slqb, slub, slab, slob)\n",
        "qslab: QSLAB_TUNE entry 'kmalloc-64:owner_budget=5': owner_budget ignored: the owner budget is the "
        "process's, one for every cache: name \"*\"\n",
        "qslab: QSLAB_TUNE entry ':order=1' ignored: no cache name (the form is cache:attr=value[,attr=value...], "
        "cache * for every cache)\n",
    };
    tu_stderr_begin();
    r = tu_reexec("bad", "QSLAB_TUNE", bad);
    tu_stderr_end(err, sizeof err);
    CHECKF(r == 0, "child with a bad QSLAB_TUNE: status %d", r);
    int lines = 0;
    for (const char *l = err; (l = strstr(l, "qslab: ")) != NULL; l++)
        lines++;
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) {
        const char *at = strstr(err, said[i]);
        CHECKF(at && (at == err || at[-1] == '\n'), "no line \"%s\" in:\n%s", said[i], err);
    }
    CHECKF(lines == (int)(sizeof said / sizeof said[0]), "%d lines for %zu problems:\n%s", lines,
           sizeof said / sizeof said[0], err);
    return tu_done();
}
