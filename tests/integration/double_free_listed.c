/*
 * A double free of an object that has gone back to its slab's free list
 * (fuzz/README.md, bugs 1, 3 and 4): the free fast path pushes it without
 * loading its word, so the queue holds it while the list does too.
 *   - listed: the first free reached the slab (a shrink), the second is
 *     pushed, then a shrink, a trim or a queue overflow routes it home: the
 *     route finds its free bit (docs/design.md, "Free bits") and reports;
 *   - popped: the second entry is handed out before any route; the list
 *     walk that meets it later reports, and stops there;
 *   - repeated: three rounds of a delayed double free in one cache.
 * Each is reported exactly once, naming the object; nothing is ever handed
 * out twice; the cache validates after (objects past a cut are lost, in use
 * for good, which the statistics count as allocated: validation is checked
 * only where nothing was cut).  Every front end and owner kind.
 */
#include <qslab.h>

#include "../testutil.h"

enum { SHRINK, TRIM, OVERFLOW };
enum { N = 600 };
static void *v[N];

static void expect_one(const char *what, void *victim, unsigned long calls)
{
    char s[32];
    CHECKF(tu_capture_calls() == calls, "%s: %lu reports, not %lu (last \"%s\")", what,
           tu_capture_calls(), calls, tu_fatal_msg);
    CHECKF(strstr(tu_fatal_msg, tu_addr(s, victim)) != NULL, "%s: message \"%s\" names not %s",
           what, tu_fatal_msg, s);
}

/* Allocate everything the cache can hand out in a few slabs' worth and
 * check nothing comes twice and nothing held comes again. */
static void drain(qslab_cache *c, const char *what, void **held, int nheld)
{
    for (int i = 0; i < N; i++)
        v[i] = qslab_cache_alloc(c);
    CHECKF(tu_dups(v, N) == 0, "%s: an object handed out twice", what);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < nheld; j++)
            CHECKF(v[i] != held[j], "%s: a held object %p handed out", what, held[j]);
    for (int i = N; i-- > 0;)
        qslab_cache_free(c, v[i]);
}

static void listed(int how)
{
    static const char *names[] = {"t-dfl-shrink", "t-dfl-trim", "t-dfl-overflow"};
    const char *name = names[how];
    qslab_cache *c = qslab_cache_create(name, 64, 0, 0, NULL);
    CHECK(c != NULL);
    tu_capture_reset();
    void *keep = qslab_cache_alloc(c), *x = qslab_cache_alloc(c);
    qslab_cache_free(c, x);
    qslab_cache_shrink(c); /* x goes home: keep holds its slab */
    qslab_cache_free(c, x); /* double free */
    if (how == SHRINK) {
        qslab_cache_shrink(c);
    } else if (how == TRIM) {
        qslab_trim();
    } else { /* frees past hiwater: the queue overflows home */
        for (int i = 0; i < N; i++)
            v[i] = qslab_cache_alloc(c);
        for (int i = 0; i < N; i++)
            qslab_cache_free(c, v[i]);
        qslab_cache_shrink(c);
    }
    void *held[1] = {keep};
    drain(c, name, held, 1);
    qslab_cache_shrink(c);
    expect_one(name, x, 1);
    qslab_cache_free(c, keep); /* the cache stays: objects past a cut are lost to it */
    tu_capture_reset();
}

/* Fuzz bug 10: the second entry comes home after the other frees emptied
 * the slab (the router had moved it to its empty slabs already); it was
 * moved there a second time, and two refills took it.  Now: one report,
 * the slab whole on its empty list, nothing handed out twice, and it
 * validates (nothing was cut: every object was free). */
static void emptied(void)
{
    const char *name = "t-dfl-emptied";
    qslab_cache *c = qslab_cache_create(name, 64, 0, 0, NULL);
    CHECK(c != NULL);
    tu_capture_reset();
    enum { M = 64 }; /* one order-0 slab of 64-byte objects */
    void *o[M];
    for (int i = 0; i < M; i++)
        o[i] = qslab_cache_alloc(c);
    void *x = o[0];
    qslab_cache_free(c, x);
    qslab_cache_shrink(c); /* x goes home: the others hold its slab */
    for (int i = 1; i < M; i++)
        qslab_cache_free(c, o[i]);
    qslab_cache_free(c, x); /* double free, pushed after the others */
    qslab_cache_shrink(c); /* the others empty the slab, then x comes home */
    drain(c, name, NULL, 0);
    expect_one(name, x, 1);
    CHECK(qslab_cache_validate(c) == 0);
    tu_capture_reset();
}

/* The second entry handed out before any route: x is then live and on its
 * slab's list; the walk that meets it reports and stops there.  The
 * program's x stays its own: never handed out again while held. */
static void popped(void)
{
    const char *name = "t-dfl-popped";
    qslab_cache *c = qslab_cache_create(name, 64, 0, 0, NULL);
    CHECK(c != NULL);
    tu_capture_reset();
    void *keep = qslab_cache_alloc(c), *x = qslab_cache_alloc(c);
    qslab_cache_free(c, x);
    qslab_cache_shrink(c);
    qslab_cache_free(c, x);          /* double free: queued and listed */
    void *y = qslab_cache_alloc(c);  /* the queue's x, or (without queues) the report */
    memset(y, 0x5c, 64);             /* the program writes it */
    void *held[2] = {keep, y};
    drain(c, name, held, 2);
    drain(c, name, held, 2);
    CHECKF(tu_capture_calls() <= 1, "%s: %lu reports (last \"%s\")", name, tu_capture_calls(),
           tu_fatal_msg);
    if (tu_capture_calls())
        expect_one(name, x, 1);
    qslab_cache_free(c, keep);
    qslab_cache_free(c, y); /* the program's own allocation */
    CHECKF(tu_capture_calls() <= 1, "%s: freeing y: %lu reports (last \"%s\")", name,
           tu_capture_calls(), tu_fatal_msg);
    tu_capture_reset();
}

/* fuzz bug 3: three rounds of a delayed double free of a fresh object,
 * then 4000 allocations; each round reported once, nothing held handed out. */
static void repeated(void)
{
    const char *name = "t-dfl-repeated";
    qslab_cache *c = qslab_cache_create(name, 200, 0, 0, NULL);
    CHECK(c != NULL);
    static void *hold[256], *many[4000];
    for (int i = 0; i < 256; i++)
        hold[i] = qslab_cache_alloc(c);
    int nhold = 256;
    tu_capture_reset();
    for (int round = 1; round <= 3; round++) {
        void *x = qslab_cache_alloc(c);
        qslab_cache_free(c, x);
        for (int i = 0; i < 63 && nhold; i++)
            qslab_cache_free(c, hold[--nhold]);
        qslab_cache_free(c, x); /* delayed double free */
        for (int i = 0; i < 4000; i++) {
            many[i] = qslab_cache_alloc(c);
            for (int j = 0; j < nhold; j++)
                CHECKF(many[i] != hold[j], "round %d: held %p handed out", round, hold[j]);
        }
        CHECKF(tu_dups(many, 4000) == 0, "round %d: an object handed out twice (x %p, %lu reports, \"%s\")",
               round, x, tu_capture_calls(), tu_fatal_msg);
        for (int i = 4000; i-- > 0;)
            qslab_cache_free(c, many[i]);
        if (tu_capture_calls() < (unsigned long)round) /* not yet: a shrink routes it */
            qslab_cache_shrink(c);
        char what[32];
        snprintf(what, sizeof what, "repeated, round %d", round);
        expect_one(what, x, (unsigned long)round);
    }
    qslab_cache_shrink(c);
    while (nhold)
        qslab_cache_free(c, hold[--nhold]);
    tu_capture_reset();
}

int main(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    tu_pin_one_cpu(); /* bug 3 wants one CPU's queue */
    listed(SHRINK);
    listed(TRIM);
    listed(OVERFLOW);
    popped();
    repeated();
    emptied();
    return tu_done();
}
