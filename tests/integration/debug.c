/*
 * Debug caches (src/debug/): each misuse of the matrix in docs/debugging.md
 * gets its report, whose first line is checked exactly, then the fatal
 * handler (here a recording one, which returns: nothing may be corrupted
 * afterwards).  Also: QSLAB_DEBUG's syntax, repair mode, tracing, owner
 * tracking and its call-site lists, validation and the purger's walk, the
 * last check of a slab's objects as it goes back (shrink, trim, destroy),
 * kmalloc caches with red zones, and the layout (alignment, usable size).
 */
#include <qslab.h>

#include "../testutil.h"

#include <pthread.h>
#include <stdbool.h>

static char err[65536];

/* Run op(arg) with stderr captured; its report's first line must be
 * `first` exactly, the handler called once with "BUG <cache>: <what>" and
 * the object's address; `also` (or NULL) must appear in the report. */
static int expect_bug(const char *what_line, void (*op)(void *), void *arg, const char *handler,
                      const void *obj, const char *also)
{
    char s[32];
    int ok = tu_expect_report(err, sizeof err, what_line, op, arg, handler,
                              obj ? tu_addr(s, obj) : NULL);
    if (also)
        ok &= CHECKF(strstr(err, also) != NULL, "\"%s\" not in the report:\n%s", also, err);
    return ok;
}

struct op {
    qslab_cache *c;
    char *p;
    size_t off;
    int n;
};

static void op_free(void *a)
{
    struct op *o = a;
    qslab_cache_free(o->c, o->p);
}

static void op_alloc(void *a)
{
    struct op *o = a;
    o->p = qslab_cache_alloc(o->c);
}

static void op_validate(void *a)
{
    struct op *o = a;
    o->n = qslab_cache_validate(o->c);
}

#define SZ 50

static void red_zones(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-z", SZ, 0, QSLAB_RED_ZONE, NULL);
    CHECK(c != NULL);
    CHECK(strcmp(qslab_cache_front(c), "debug") == 0);
    struct op o = {c, NULL, 0, 0};
    char *p = qslab_cache_alloc(c);
    CHECK(((uintptr_t)p & 7) == 0);
    /* overflow by 1 */
    p[SZ] = 'x';
    o.p = p;
    expect_bug("BUG t-dbg-z: Right Redzone overwritten", op_free, &o,
               "BUG t-dbg-z: Right Redzone overwritten", p, "@offset=50. First byte 0x78 instead of 0xcc");
    /* the free went on with the red zone restored: the object is free */
    CHECK(qslab_cache_validate(c) == 0);
    /* overflow by 8 */
    p = qslab_cache_alloc(c);
    memset(p + SZ, 0, 8);
    o.p = p;
    expect_bug("BUG t-dbg-z: Right Redzone overwritten", op_free, &o, "Right Redzone overwritten", p,
               "@offset=50. First byte 0x0 instead of 0xcc");
    /* underflow by 1 */
    p = qslab_cache_alloc(c);
    p[-1] = 0;
    o.p = p;
    expect_bug("BUG t-dbg-z: Left Redzone overwritten", op_free, &o, "Left Redzone overwritten", p,
               "@offset=-1. First byte 0x0 instead of 0xcc");
    CHECK(qslab_cache_validate(c) == 0);
    /* a free object's red zone written (a neighbour's overflow after its
     * free): found by validation, then at the allocation */
    p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    p[SZ + 3] = 1;
    expect_bug("BUG t-dbg-z: Right Redzone overwritten", op_validate, &o, NULL, NULL,
               "@offset=53. First byte 0x1 instead of 0xbb");
    CHECK(o.n == -1);
    expect_bug("BUG t-dbg-z: Right Redzone overwritten", op_alloc, &o, "Right Redzone overwritten", p,
               NULL);
    /* kept out of use (quarantined): the next allocation is another object */
    CHECK(o.p != NULL && o.p != p);
    qslab_cache_free(c, o.p);
    CHECK(qslab_cache_validate(c) == 0);
}

static void poison(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-p", 96, 0, QSLAB_POISON | QSLAB_RED_ZONE, NULL);
    struct op o = {c, NULL, 0, 0};
    unsigned char *p = qslab_cache_alloc(c);
    /* fresh objects are 0x5a */
    int all5a = 1;
    for (int i = 0; i < 96; i++)
        all5a &= p[i] == 0x5a;
    CHECK(all5a);
    qslab_cache_free(c, p);
    CHECK(p[0] == 0x6b && p[94] == 0x6b && p[95] == 0xa5);
    /* write after free at the first word */
    memset(p, 0, 8);
    expect_bug("BUG t-dbg-p: Poison overwritten", op_alloc, &o, "BUG t-dbg-p: Poison overwritten", p,
               "@offset=0. First byte 0x0 instead of 0x6b");
    CHECK(o.p != (char *)p);
    qslab_cache_free(c, o.p);
    /* ... and at byte 50 */
    unsigned char *q = qslab_cache_alloc(c);
    qslab_cache_free(c, q);
    q[50] = 0x41;
    expect_bug("BUG t-dbg-p: Poison overwritten", op_alloc, &o, "Poison overwritten", q,
               "@offset=50. First byte 0x41 instead of 0x6b");
    qslab_cache_free(c, o.p);
    /* the end byte */
    q = qslab_cache_alloc(c);
    qslab_cache_free(c, q);
    q[95] = 0x6b;
    expect_bug("BUG t-dbg-p: Poison overwritten", op_alloc, &o, "Poison overwritten", q,
               "@offset=95. First byte 0x6b instead of 0xa5");
    qslab_cache_free(c, o.p);
    CHECK(qslab_cache_validate(c) == 0);
    /* two quarantined objects stay allocated: destroy refuses */
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECKF(st.active_objs == 3, "active %lu", st.active_objs);
}

struct df {
    qslab_cache *c;
    void *p;
};

static void *free_in_thread(void *a)
{
    struct df *d = a;
    qslab_cache_free(d->c, d->p);
    return NULL;
}

static void double_frees(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-df", 40, 0, QSLAB_CONSISTENCY_CHECKS, NULL);
    struct op o = {c, NULL, 0, 0};
    /* immediate */
    char *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    o.p = p;
    expect_bug("BUG t-dbg-df: Object already free", op_free, &o, "BUG t-dbg-df: Object already free",
               p, NULL);
    /* after other frees */
    char *a = qslab_cache_alloc(c), *b = qslab_cache_alloc(c), *d = qslab_cache_alloc(c);
    qslab_cache_free(c, a);
    qslab_cache_free(c, b);
    qslab_cache_free(c, d);
    o.p = a;
    expect_bug("BUG t-dbg-df: Object already free", op_free, &o, "Object already free", a, NULL);
    /* freed by another thread first */
    char *e = qslab_cache_alloc(c);
    struct df arg = {c, e};
    pthread_t t;
    pthread_create(&t, NULL, free_in_thread, &arg);
    pthread_join(t, NULL);
    o.p = e;
    expect_bug("BUG t-dbg-df: Object already free", op_free, &o, "Object already free", e, NULL);
    /* nothing was freed twice: every object is handed out once */
    void *v[64];
    int dup = 0;
    for (int i = 0; i < 64; i++) {
        v[i] = qslab_cache_alloc(c);
        for (int j = 0; j < i; j++)
            dup += v[i] == v[j];
    }
    CHECK(dup == 0);
    for (int i = 0; i < 64; i++)
        qslab_cache_free(c, v[i]);
    CHECK(qslab_cache_validate(c) == 0);
    /* interior pointer */
    p = qslab_cache_alloc(c);
    o.p = p + 8;
    expect_bug("BUG t-dbg-df: Invalid object pointer", op_free, &o,
               "BUG t-dbg-df: Invalid object pointer", p, "at offset 8");
    qslab_cache_free(c, p);
    /* wrong cache: the common message, one line */
    qslab_cache *other = qslab_cache_create("t-dbg-other", 40, 0, 0, NULL);
    p = qslab_cache_alloc(c);
    tu_capture_reset();
    qslab_cache_free(other, p);
    tu_check_fatal("freed to cache t-dbg-other but it belongs to cache t-dbg-df");
    qslab_cache_free(c, p);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(other) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void freepointer(void)
{
    /* no red zone: the link word follows the object (40 bytes: at 40) */
    qslab_cache *c = qslab_cache_create("t-dbg-fp", 40, 0, QSLAB_CONSISTENCY_CHECKS, NULL);
    struct op o = {c, NULL, 0, 0};
    char *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    memset(p + 40, 0x77, 8); /* an overflow into the free object's link */
    expect_bug("BUG t-dbg-fp: Freepointer corrupt", op_alloc, &o, "BUG t-dbg-fp: Freepointer corrupt",
               p, NULL);
    /* the slab is isolated; another one serves */
    CHECK(o.p != NULL);
    qslab_cache_free(c, o.p);
    CHECK(qslab_cache_validate(c) == 0);
    /* an allocated object's link word overwritten: found at its free */
    p = qslab_cache_alloc(c);
    memset(p + 40, 0x11, 8);
    o.p = p;
    expect_bug("BUG t-dbg-fp: Freepointer corrupt", op_free, &o, "Freepointer corrupt", p, NULL);
    CHECK(qslab_cache_validate(c) == 0);
}

static void ctor40(void *obj)
{
    memset(obj, 0x33, 40);
}

static void constructor(void)
{
    qslab_cache *c =
        qslab_cache_create("t-dbg-ctor", 40, 0, QSLAB_CONSISTENCY_CHECKS | QSLAB_POISON | QSLAB_RED_ZONE,
                           ctor40);
    struct op o = {c, NULL, 0, 0};
    char *p = qslab_cache_alloc(c);
    /* constructed, and never poisoned */
    CHECK(p[0] == 0x33 && p[39] == 0x33);
    qslab_cache_free(c, p);
    p = qslab_cache_alloc(c);
    CHECK(p[0] == 0x33 && p[39] == 0x33);
    p[7] = 1;
    o.p = p;
    expect_bug("BUG t-dbg-ctor: Object not in its constructed state", op_free, &o,
               "Object not in its constructed state", p, "@offset=7. First byte 0x1 instead of 0x33");
    p[7] = 0x33;
    qslab_cache_free(c, p);
    CHECK(qslab_cache_validate(c) == 0);
}

/* A constructor as kernel code writes them: an empty list head (pointers
 * to the object itself), one field set, the rest left to the user.  Only
 * what the constructor sets, the same wherever it runs, is checked. */
struct lnode {
    struct lnode *next, *prev;
    int state;
    char data[44];
};

static void lnode_ctor(void *obj)
{
    struct lnode *n = obj;
    n->next = n->prev = n;
    n->state = 7;
}

static void constructor_partial(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-lnode", sizeof(struct lnode), 0,
                                        QSLAB_CONSISTENCY_CHECKS | QSLAB_RED_ZONE, lnode_ctor);
    struct op o = {c, NULL, 0, 0};
    struct lnode *n = qslab_cache_alloc(c);
    CHECK(n && n->next == n && n->prev == n && n->state == 7);
    memset(n->data, 0x5e, sizeof n->data); /* the user's bytes */
    o.p = (char *)n;
    expect_bug("", op_free, &o, NULL, NULL, NULL); /* freed as constructed: no report */
    n = qslab_cache_alloc(c);
    CHECK(n && n->next == n && n->state == 7);
    n->state = 8;
    o.p = (char *)n;
    expect_bug("BUG t-dbg-lnode: Object not in its constructed state", op_free, &o,
               "Object not in its constructed state", n, "@offset=16. First byte 0x8 instead of 0x7");
    n->state = 7;
    qslab_cache_free(c, n);
    /* an empty list head no longer empty */
    n = qslab_cache_alloc(c);
    CHECK(n && n->prev == n);
    n->prev = NULL;
    o.p = (char *)n;
    expect_bug("BUG t-dbg-lnode: Object not in its constructed state", op_free, &o,
               "Object not in its constructed state", n, "@offset=8. First byte 0x0 instead of 0x");
    n->prev = n;
    qslab_cache_free(c, n);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void repair(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-r", 64, 0,
                                        QSLAB_RED_ZONE | QSLAB_POISON | QSLAB_DEBUG_REPAIR, NULL);
    struct op o = {c, NULL, 0, 0};
    char *p = qslab_cache_alloc(c);
    p[64] = 1;
    o.p = p;
    expect_bug("BUG t-dbg-r: Right Redzone overwritten", op_free, &o, NULL, NULL, "FIX t-dbg-r: Restoring");
    /* freed and restored: it comes back, and its poison is checked */
    p[3] = 9;
    expect_bug("BUG t-dbg-r: Poison overwritten", op_alloc, &o, NULL, NULL, "FIX t-dbg-r: Restoring");
    CHECK(o.p == p);
    qslab_cache_free(c, o.p);
    o.p = p;
    expect_bug("BUG t-dbg-r: Object already free", op_free, &o, NULL, NULL, "left alone");
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

static void trace(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-t", 24, 0, QSLAB_TRACE, NULL);
    char s[32];
    tu_stderr_begin();
    void *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    tu_stderr_end(err, sizeof err);
    char want[96];
    snprintf(want, sizeof want, "TRACE t-dbg-t alloc %s inuse=1", tu_addr(s, p));
    CHECKF(strncmp(err, want, strlen(want)) == 0, "trace: %s", err);
    snprintf(want, sizeof want, "\nTRACE t-dbg-t free %s inuse=1", tu_addr(s, p));
    CHECKF(strstr(err, want) != NULL, "trace: %s", err);
    CHECK(qslab_cache_destroy(c) == 0);
}

static __attribute__((noinline)) void *alloc_here_a(qslab_cache *c)
{
    void *p = qslab_cache_alloc(c);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return p;
}

static volatile int calls_b;

static __attribute__((noinline)) void *alloc_here_b(qslab_cache *c)
{
    void *p = qslab_cache_alloc(c);
    calls_b++; /* not the same code as alloc_here_a (identical code folding) */
    return p;
}

static void store_user(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-u", 32, 0, QSLAB_STORE_USER, NULL);
    void *v[10];
    for (int i = 0; i < 10; i++)
        v[i] = i < 7 ? alloc_here_a(c) : alloc_here_b(c);
    int fds[2];
    CHECK(pipe(fds) == 0);
    int sites = qslab_cache_alloc_calls(c, fds[1]);
    close(fds[1]);
    tu_read_all(fds[0], err, sizeof err);
    close(fds[0]);
    CHECKF(sites == 2, "sites %d: %s", sites, err);
    /* most first: 7 then 3 */
    CHECKF(strncmp(err, "       7 0x", 11) == 0 && strstr(err, "\n       3 0x") != NULL, "calls: %s", err);
    /* destroy with live objects lists them */
    tu_stderr_begin();
    int r = qslab_cache_destroy(c);
    tu_stderr_end(err, sizeof err);
    CHECK(r == -1);
    CHECKF(strstr(err, "qslab: cache t-dbg-u destroyed with 10 objects still allocated; cache left intact\n"
                       "qslab: objects still allocated, by call site") == err,
           "destroy: %s", err);
    CHECKF(strstr(err, "\n       7 0x") != NULL && strstr(err, "\n       3 0x") != NULL, "destroy: %s", err);
    for (int i = 0; i < 10; i++)
        qslab_cache_free(c, v[i]);
    CHECK(qslab_cache_free_calls(c, -1) == 1); /* one loop frees them all */
    CHECK(qslab_cache_destroy(c) == 0);
    /* a cache without tracking refuses */
    qslab_cache *plain = qslab_cache_create("t-dbg-plain", 32, 0, 0, NULL);
    errno = 0;
    CHECK(qslab_cache_alloc_calls(plain, 1) == -1 && errno == EINVAL);
    CHECK(qslab_cache_destroy(plain) == 0);
}

/* A report names the allocating call site (U) in its Allocated line. */
static void report_owner(void)
{
    qslab_cache *c = qslab_cache_create("t-dbg-owner", 32, 0, QSLAB_STORE_USER | QSLAB_RED_ZONE, NULL);
    struct op o = {c, NULL, 0, 0};
    char *p = alloc_here_a(c);
    p[32] = 0;
    o.p = p;
    expect_bug("BUG t-dbg-owner: Right Redzone overwritten", op_free, &o, "Right Redzone overwritten", p,
               "\nAllocated by thread ");
    CHECK(strstr(err, "\nFreed: never") != NULL);
}

/* The purger's walk finds a write after free in a slab that stays in the
 * cache: a partial one (another object of it held), and an empty one on
 * the FIFO (a decay of an hour keeps it there; a slab that goes back is
 * checked as it goes: release_mode). */
static void purger_walk(const char *name, bool partial)
{
    qslab_cache *c = qslab_cache_create(name, 64, 0, QSLAB_POISON, NULL);
    CHECK(qslab_tune(name, "empty_decay_ms", "3600000") == 0);
    char *held = partial ? qslab_cache_alloc(c) : NULL;
    char *p = qslab_cache_alloc(c);
    qslab_cache_free(c, p);
    char first[64];
    snprintf(first, sizeof first, "BUG %s: Poison overwritten\n", name);
    tu_capture_reset();
    tu_stderr_begin();
    p[10] = 0;
    /* the purger checks debug caches every second: wait for its report,
     * up to TU_WAIT_MS (a loaded machine), not a timing check */
    for (uint64_t end = tu_now_ms() + TU_WAIT_MS; tu_capture_calls() == 0 && tu_now_ms() < end;)
        tu_sleep_ms(10);
    tu_stderr_end(err, sizeof err);
    CHECKF(strncmp(err, first, strlen(first)) == 0, "walk: %s", err);
    CHECKF(strstr(err, "@offset=10. First byte 0x0 instead of 0x6b") != NULL, "walk: %s", err);
    first[strlen(first) - 1] = '\0';
    tu_check_fatal(first, "");
    /* restored after its report: the allocation finds it intact */
    void *q = qslab_cache_alloc(c);
    CHECK(q == p);
    CHECK(tu_capture_calls() == 0);
    qslab_cache_free(c, q);
    if (held)
        qslab_cache_free(c, held);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A write after free in an object whose slab then leaves its cache, with
 * no purger (QSLAB_PURGE=0, so no walk can find it first): the slab's
 * objects get their last check as it goes, by shrink, by trim (the purger's
 * own path: the tick gives back empty slabs before it walks) and by
 * destroy; one report each, naming the object. */
static void op_shrink(void *a)
{
    qslab_cache_shrink(((struct op *)a)->c);
}

static void op_trim(void *a)
{
    (void)a;
    qslab_trim();
}

static void op_destroy(void *a)
{
    struct op *o = a;
    o->n = qslab_cache_destroy(o->c);
}

static int release_mode(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    static const struct {
        const char *name;
        unsigned flags;
        void (*op)(void *);
        size_t off;
        const char *what, *also;
    } ways[] = {
        {"t-rel-shrink", QSLAB_POISON, op_shrink, 10, "Poison overwritten",
         "@offset=10. First byte 0x42 instead of 0x6b"},
        {"t-rel-trim", QSLAB_POISON, op_trim, 0, "Poison overwritten",
         "@offset=0. First byte 0x42 instead of 0x6b"},
        {"t-rel-zone", QSLAB_RED_ZONE, op_trim, 64, "Right Redzone overwritten",
         "First byte 0x42 instead of 0xbb"},
        {"t-rel-destroy", QSLAB_POISON, op_destroy, 63, "Poison overwritten",
         "@offset=63. First byte 0x42 instead of 0xa5"},
    };
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        qslab_cache *c = qslab_cache_create(ways[i].name, 64, 0, ways[i].flags, NULL);
        struct op o = {c, qslab_cache_alloc(c), 0, -1};
        qslab_cache_free(c, o.p);
        o.p[ways[i].off] = 0x42;
        char line[96], handler[96];
        snprintf(line, sizeof line, "BUG %s: %s", ways[i].name, ways[i].what);
        snprintf(handler, sizeof handler, "%s", ways[i].what);
        expect_bug(line, ways[i].op, &o, handler, o.p, ways[i].also);
        if (ways[i].op == op_destroy) {
            CHECK(o.n == 0);
            continue;
        }
        /* the cache goes on: a new slab, nothing to report */
        tu_capture_reset();
        void *q = qslab_cache_alloc(c);
        CHECK(q != NULL && tu_capture_calls() == 0);
        qslab_cache_free(c, q);
        CHECK(qslab_cache_validate(c) == 0);
        CHECK(qslab_cache_destroy(c) == 0);
    }
    return tu_done();
}

/* Does the line of text starting with `start` hold `what`? */
static int line_has(const char *text, const char *start, const char *what)
{
    const char *line = strstr(text, start);
    if (!line)
        return 0;
    const char *end = strchr(line + 1, '\n'), *hit = strstr(line, what);
    return hit && (!end || hit < end);
}

static void kmalloc_red(void)
{
    /* QSLAB_DEBUG="Z,kmalloc-64": the class is a debug cache */
    char s[32];
    char *p = qslab_malloc(50);
    CHECK(qslab_usable_size(p) == 64);
    CHECK(((uintptr_t)p & 15) == 0);
    p[63] = 1; /* usable */
    p[64] = 2;
    tu_capture_reset();
    tu_stderr_begin();
    qslab_free(p);
    tu_stderr_end(err, sizeof err);
    CHECKF(strncmp(err, "BUG kmalloc-64: Right Redzone overwritten\n", 42) == 0, "%s", err);
    tu_check_fatal("BUG kmalloc-64: Right Redzone overwritten", tu_addr(s, p));
    /* every object of the class is 16-aligned (the stride is) */
    void *v[64];
    int misaligned = 0;
    for (int i = 0; i < 64; i++)
        misaligned += ((uintptr_t)(v[i] = qslab_malloc(50)) & 15) != 0;
    CHECKF(misaligned == 0, "%d of 64 not 16-aligned", misaligned);
    for (int i = 0; i < 64; i++)
        qslab_free(v[i]);
    /* others are not debug caches */
    void *q = qslab_malloc(100);
    qslab_free(q);
    /* aligned allocations from a debug class stay aligned */
    void *a = qslab_aligned_alloc(64, 64);
    CHECK(a && ((uintptr_t)a & 63) == 0);
    qslab_free(a);
    /* the slabinfo line says debug, with its flags */
    int fds[2];
    CHECK(pipe(fds) == 0);
    if (fork() == 0) {
        close(fds[0]);
        qslab_slabinfo(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    tu_read_all(fds[0], err, sizeof err);
    close(fds[0]);
    wait(NULL);
    CHECKF(line_has(err, "\nkmalloc-64 ", " : front debug : debug Z "), "%s", err);
    CHECKF(!line_has(err, "\nkmalloc-96 ", " : front debug"), "%s", err);
}

/* QSLAB_DEBUG="FZ,t-env-a,t-pre*;P,*": named caches get FZ, the rest P */
static int env_mode(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    qslab_cache *a = qslab_cache_create("t-env-a", 32, 0, 0, NULL);
    qslab_cache *b = qslab_cache_create("t-prefix-b", 32, 0, 0, NULL);
    qslab_cache *d = qslab_cache_create("t-env-d", 32, 0, QSLAB_STORE_USER, NULL);
    CHECK(strcmp(qslab_cache_front(a), "debug") == 0);
    char *p = qslab_cache_alloc(a);
    p[32] = 1;
    tu_stderr_begin();
    qslab_cache_free(a, p);
    tu_stderr_end(err, sizeof err);
    CHECKF(strncmp(err, "BUG t-env-a: Right Redzone overwritten\n", 39) == 0, "%s", err);
    CHECK(strstr(err, "flags=FZ\n") != NULL);
    tu_capture_reset();
    p = qslab_cache_alloc(b);
    p[32] = 1;
    tu_stderr_begin();
    qslab_cache_free(b, p);
    tu_stderr_end(err, sizeof err);
    CHECKF(strncmp(err, "BUG t-prefix-b: Right Redzone overwritten\n", 42) == 0, "%s", err);
    tu_capture_reset();
    /* P for the others, added to their own U */
    p = qslab_cache_alloc(d);
    qslab_cache_free(d, p);
    p[0] = 0;
    tu_stderr_begin();
    p = qslab_cache_alloc(d);
    tu_stderr_end(err, sizeof err);
    CHECKF(strncmp(err, "BUG t-env-d: Poison overwritten\n", 32) == 0, "%s", err);
    CHECK(strstr(err, "flags=PU\n") != NULL);
    /* objects no slab holds with the environment's flags: the cache is made
     * without them, and says so (a program run with QSLAB_DEBUG must not
     * lose a cache it could make without) */
    tu_stderr_begin();
    qslab_cache *h = qslab_cache_create("t-env-huge", 64 << 20, 0, 0, NULL);
    tu_stderr_end(err, sizeof err);
    CHECK(h != NULL && strcmp(qslab_cache_front(h), "debug") != 0);
    CHECKF(strcmp(err, "qslab: cache t-env-huge: objects of 67108864 bytes with debug flags P do "
                       "not fit in a slab; made with no debug flags\n") == 0,
           "%s", err);
    p = h ? qslab_cache_alloc(h) : NULL;
    CHECK(p != NULL);
    if (p) {
        p[0] = p[(64 << 20) - 1] = 1;
        qslab_cache_free(h, p);
    }
    CHECK(h && qslab_cache_destroy(h) == 0);
    /* the cache's own flags are its own: refused */
    errno = 0;
    CHECK(qslab_cache_create("t-env-huge", 64 << 20, 0, QSLAB_POISON, NULL) == NULL && errno == EINVAL);
    return tu_done();
}

/* QSLAB_DEBUG="-": every debugging off, the caches' own flags too */
static int env_off_mode(void)
{
    qslab_cache *a = qslab_cache_create("t-off", 32, 0, QSLAB_RED_ZONE, NULL);
    CHECK(strcmp(qslab_cache_front(a), "debug") != 0);
    return tu_done();
}

/* With the default handler: the report, then the fatal line, then SIGABRT.
 * In a process of its own (this program run again), not a fork of this
 * threaded one: the debug cache's allocation starts the purger, and TSan
 * refuses a thread started after a multi-threaded fork. */
static int default_handler_mode(void)
{
    qslab_set_fatal_handler(NULL);
    qslab_cache *c = qslab_cache_create("t-dbg-abort", 24, 0, QSLAB_RED_ZONE, NULL);
    char *p = qslab_cache_alloc(c);
    p[24] = 0;
    qslab_cache_free(c, p);
    return 0;
}

static void default_handler(void)
{
    tu_stderr_begin();
    pid_t pid = tu_spawn_self("default-handler", NULL, NULL);
    int st = pid < 0 ? -1 : tu_wait(pid);
    tu_stderr_end(err, sizeof err);
    CHECKF(st == 128 + SIGABRT, "status %d: %s", st, err);
    CHECKF(strncmp(err, "BUG t-dbg-abort: Right Redzone overwritten\n---", 46) == 0, "%s", err);
    const char *last = strstr(err, "\nqslab: BUG t-dbg-abort: Right Redzone overwritten (object 0x");
    CHECKF(last && strchr(last + 1, '\n') == err + strlen(err) - 1, "last line: %s", err);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "default-handler") == 0)
        return default_handler_mode();
    if (argc > 1 && strcmp(argv[1], "env") == 0)
        return env_mode();
    if (argc > 1 && strcmp(argv[1], "release") == 0)
        return release_mode();
    if (argc > 1 && strcmp(argv[1], "env-off") == 0)
        return env_off_mode();
    if (argc > 1 && strcmp(argv[1], "kmalloc") == 0) {
        qslab_set_fatal_handler(tu_fatal_capture);
        kmalloc_red();
        return tu_done();
    }
    qslab_set_fatal_handler(tu_fatal_capture);
    red_zones();
    poison();
    double_frees();
    freepointer();
    constructor();
    constructor_partial();
    repair();
    trace();
    store_user();
    report_owner();
    /* the write after free the purger finds is, to TSan, a race with the
     * purger's read (it is the bug being caught); skip it there */
    if (!TU_TSAN) {
        purger_walk("t-dbg-walk", true);
        purger_walk("t-dbg-walk-empty", false);
    }
    default_handler();
    CHECK(tu_reexec("env", "QSLAB_DEBUG", "FZ,t-env-a,t-pre*;P,*") == 0);
    CHECK(tu_reexec("env-off", "QSLAB_DEBUG", "-") == 0);
    CHECK(tu_reexec("kmalloc", "QSLAB_DEBUG", "Z,kmalloc-64") == 0);
    CHECK(tu_reexec("release", "QSLAB_PURGE", "0") == 0);
    return tu_done();
}
