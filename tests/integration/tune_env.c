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

/* QSLAB_TUNE="kmalloc-8192:order=99;no-such-cache:order=1;kmalloc-64:bogus=1;kmalloc-64:debug=FZ;junk"
 * Refused settings change nothing; the program runs. */
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

    /* Bad entries: refused with a message each, once (not once per cache). */
    static char err[1 << 16];
    tu_stderr_begin();
    r = tu_reexec("bad", "QSLAB_TUNE", "kmalloc-8192:order=99;no-such-cache:order=1;kmalloc-64:bogus=1;kmalloc-64:debug=FZ;junk");
    tu_stderr_end(err, sizeof err);
    CHECKF(r == 0, "child with a bad QSLAB_TUNE: status %d", r);
    CHECKF(strstr(err, "order") != NULL, "no message for order=99: \"%s\"", err);
    CHECKF(strstr(err, "QSLAB_TUNE: debug for kmalloc-64 ignored: QSLAB_DEBUG gives caches their "
                       "debug flags when they are made") != NULL,
           "no message for debug=FZ: \"%s\"", err);
    int lines = 0, repeated = 0;
    for (char *l = err, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        if (!nl)
            break;
        *nl = '\0';
        lines++;
        for (char *m = err; m < l; m += strlen(m) + 1)
            if (!strcmp(m, l) && strchr(l, ':')) {
                if (repeated++ == 0)
                    fprintf(stderr, "repeated message: %s\n", l);
                break;
            }
    }
    CHECKF(repeated == 0, "%d of %d lines on stderr repeat an earlier one", repeated, lines);
    return tu_done();
}
