/*
 * Q, the quarantine (src/debug/quarantine.c), and the hardened profile
 * (QSLAB_HARDEN=1, qslab_harden(): Z and Q on every cache).  Checked: a
 * freed object is zeroed and not handed out again while the quarantine has
 * room; the quarantine lets objects go once full, and its bytes stay
 * bounded; a second free of a quarantined object, malloc_usable_size and
 * realloc of a freed one, and a write after free are reported, naming the
 * cache, the object and (for the write) the offset and the byte; an object
 * that leaves it waits on its ready stack, still free in every sense, and
 * is checked when the next allocation takes it; shrink and destroy empty
 * it; under QSLAB_HARDEN=1 the kmalloc classes have Z
 * and Q, so an overflow past malloc_usable_size is reported at the free;
 * qslab_harden() in a program under way gives the caches in use debug
 * twins with Z and Q, and the caches made after it the flags; blocks over
 * 32 MiB made under the profile lie between guard pages and stay
 * inaccessible once freed, and a fault on either is reported.
 */
#include <qslab.h>

#include "../testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <sys/mman.h>

static char err[65536];

struct op {
    qslab_cache *c;
    char *p;
    size_t n;
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

static void op_usable(void *a)
{
    struct op *o = a;
    o->n = qslab_usable_size(o->p);
}

static void op_realloc(void *a)
{
    struct op *o = a;
    o->p = qslab_realloc(o->p, 200);
}

static void op_kfree(void *a)
{
    struct op *o = a;
    qslab_free(o->p);
}

static void op_shrink(void *a)
{
    struct op *o = a;
    qslab_cache_shrink(o->c);
}

#define SZ 48
#define N 64

/* Held back: while the quarantine has room, no freed object comes back. */
static void held_back(void)
{
    qslab_cache *c = qslab_cache_create("t-q-held", SZ, 0, QSLAB_QUARANTINE, NULL);
    CHECK(c != NULL);
    CHECK(strcmp(qslab_cache_front(c), "debug") == 0);
    char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = qslab_cache_alloc(c);
        CHECK(p[i] != NULL);
        memset(p[i], 0x77, SZ);
    }
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, p[i]);
    /* zeroed at the free (read here on purpose: a use after free) */
    int nonzero = 0;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < SZ; k++)
            nonzero += p[i][k] != 0;
    CHECKF(nonzero == 0, "%d bytes of freed objects not zero", nonzero);
    /* 64 objects of 48 bytes are far below the quarantine's bound: none
     * comes back */
    char *q[N];
    int again = 0;
    for (int i = 0; i < N; i++) {
        q[i] = qslab_cache_alloc(c);
        for (int j = 0; j < N; j++)
            again += q[i] == p[j];
    }
    CHECKF(again == 0, "%d freed objects handed out again at once", again);
    CHECK(qslab_cache_validate(c) == 0);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, q[i]);
    /* destroy with objects in quarantine: they are not live */
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Full: objects leave (each free lets one go), the bytes held stay
 * bounded: churning one object at a time never makes more than the
 * quarantine's worth of slabs. */
static void bounded(void)
{
    qslab_cache *c = qslab_cache_create("t-q-bound", 256, 0, QSLAB_QUARANTINE, NULL);
    CHECK(c != NULL);
    for (int i = 0; i < 20000; i++) {
        char *p = qslab_cache_alloc(c);
        CHECK(p != NULL);
        p[0] = 1;
        qslab_cache_free(c, p);
    }
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    /* 64 KiB per node of 256-byte objects (a slot of 264 with the link
     * word) is about 248 objects; 20,000 freed: the slabs hold less
     * than twice that much */
    CHECKF(st.num_objs < 1000, "%lu objects in slabs after 20,000 churned", st.num_objs);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Misuse of a quarantined object: the second free, usable size, realloc. */
static void misuse(void)
{
    qslab_cache *c = qslab_cache_create("t-q-misuse", SZ, 0, QSLAB_QUARANTINE, NULL);
    char s[32];
    struct op o = {c, qslab_cache_alloc(c), 0};
    qslab_cache_free(c, o.p);
    tu_expect_report(err, sizeof err, "BUG t-q-misuse: Object already free", op_free, &o,
                     "BUG t-q-misuse: Object already free", tu_addr(s, o.p));
    CHECKF(strstr(err, "in quarantine") != NULL, "report:\n%s", err);
    tu_expect_report(err, sizeof err, "BUG t-q-misuse: qslab_usable_size of a free object", op_usable, &o,
                     "BUG t-q-misuse: qslab_usable_size of a free object", tu_addr(s, o.p));
    CHECK(o.n == 0);
    /* an interior pointer into a live object, as free says */
    struct op l = {c, qslab_cache_alloc(c), 0};
    l.p += 8;
    tu_expect_report(err, sizeof err, "BUG t-q-misuse: Invalid object pointer", op_usable, &l,
                     "Invalid object pointer", tu_addr(s, l.p));
    qslab_cache_free(c, l.p - 8);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A write after free: found when the object is handed out again (here:
 * shrink empties the quarantine, the next allocation takes the object),
 * naming its offset and byte. */
static void write_after_free(void)
{
    qslab_cache *c = qslab_cache_create("t-q-uaf", SZ, 0, QSLAB_QUARANTINE, NULL);
    char *keep = qslab_cache_alloc(c); /* its slab stays */
    struct op o = {c, qslab_cache_alloc(c), 0};
    char *p = o.p;
    qslab_cache_free(c, p);
    p[5] = 'w'; /* the bug */
    op_shrink(&o);
    char s[32];
    tu_expect_report(err, sizeof err, "BUG t-q-uaf: Poison overwritten", op_alloc, &o,
                     "BUG t-q-uaf: Poison overwritten", tu_addr(s, p));
    CHECKF(strstr(err, "@offset=5. First byte 0x77 instead of 0x0") != NULL, "report:\n%s", err);
    CHECK(o.p != p); /* kept out of use; another object */
    qslab_cache_free(c, o.p);
    qslab_cache_free(c, keep);
}

/* The ready stack: an object that leaves a full quarantine waits there
 * for the next allocation.  4 KiB objects, a few slabs: the quarantine has
 * room for one (its 8 KiB floor), the stack for one, so which object is
 * where is known.  While on the stack the object is free in every sense:
 * validation counts it, a second free is reported as one of a quarantined
 * object, a write after free is reported when it is handed out, and
 * shrink gives its slab back. */
#define BIG 4096
static void ready(void)
{
    qslab_cache *c = qslab_cache_create("t-q-ready", BIG, 0, QSLAB_QUARANTINE, NULL);
    char s[32];
    struct op a = {c, qslab_cache_alloc(c), 0}, b = {c, qslab_cache_alloc(c), 0};
    CHECK(a.p != NULL && b.p != NULL);
    qslab_cache_free(c, a.p); /* held */
    qslab_cache_free(c, b.p); /* held in a's place: a onto the stack */
    CHECK(qslab_cache_validate(c) == 0);
    tu_expect_report(err, sizeof err, "BUG t-q-ready: Object already free", op_free, &a,
                     "BUG t-q-ready: Object already free", tu_addr(s, a.p));
    CHECKF(strstr(err, "in quarantine") != NULL, "report:\n%s", err);
    /* both given back: their slab goes (nothing else lives in the cache) */
    op_shrink(&a);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECKF(st.num_objs == 0, "%lu objects in slabs after shrink", st.num_objs);

    /* a clean one comes back from the stack unreported, zeroed */
    a.p = qslab_cache_alloc(c);
    b.p = qslab_cache_alloc(c);
    char *was = a.p;
    memset(a.p, 0x33, BIG);
    qslab_cache_free(c, a.p);
    qslab_cache_free(c, b.p); /* a onto the stack */
    char *again = qslab_cache_alloc(c);
    CHECK(tu_capture_calls() == 0);
    CHECKF(again == was, "the next allocation is %p, not the object on the stack %p", (void *)again, (void *)was);
    int nonzero = 0;
    for (int k = 0; k < BIG; k++)
        nonzero += again[k] != 0;
    CHECKF(nonzero == 0, "%d bytes of a reused object not zero", nonzero);
    qslab_cache_free(c, again); /* b onto the stack */
    op_shrink(&a);              /* both back on their slab */

    /* a write after free, found when the stack hands the object out */
    a.p = qslab_cache_alloc(c);
    b.p = qslab_cache_alloc(c);
    was = a.p;
    qslab_cache_free(c, a.p);
    was[100] = 'w'; /* the bug */
    qslab_cache_free(c, b.p); /* a onto the stack */
    tu_expect_report(err, sizeof err, "BUG t-q-ready: Poison overwritten", op_alloc, &a,
                     "BUG t-q-ready: Poison overwritten", tu_addr(s, was));
    CHECKF(strstr(err, "@offset=100. First byte 0x77 instead of 0x0") != NULL, "report:\n%s", err);
    CHECK(a.p != NULL && a.p != was); /* kept out of use (the cache stays: it counts as live) */
    qslab_cache_free(c, a.p);
    CHECK(qslab_cache_validate(c) == 0);
}

/* With Q, Z's red zones are compact: 8 bytes past the object, none
 * before (a 32-byte object 16-aligned in a 48-byte slot); an overflow by 1
 * or 8 bytes is reported at the free, an underflow as the previous
 * object's when that one is freed. */
static void compact(void)
{
    qslab_cache *c = qslab_cache_create("t-q-zq", 32, 16, QSLAB_RED_ZONE | QSLAB_QUARANTINE, NULL);
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECKF(st.slot_size == 48, "slot of %zu bytes", st.slot_size);
    char s[32];
    for (int n = 1; n <= 8; n += 7) {
        struct op o = {c, qslab_cache_alloc(c), 0};
        CHECK(((uintptr_t)o.p & 15) == 0);
        memset(o.p + 32, 'x', (size_t)n);
        tu_expect_report(err, sizeof err, "BUG t-q-zq: Right Redzone overwritten", op_free, &o,
                         "BUG t-q-zq: Right Redzone overwritten", tu_addr(s, o.p));
        CHECKF(strstr(err, "@offset=32. First byte 0x78 instead of 0xcc") != NULL, "report:\n%s", err);
    }
    /* two neighbours: an underflow of the second by 1 byte lands in the
     * first's link word, reported at the first's free */
    char *a = qslab_cache_alloc(c), *b = qslab_cache_alloc(c);
    struct op o = {c, a < b ? a : b, 0};
    char *second = a < b ? b : a;
    if (CHECK(second == o.p + 48)) {
        second[-1] = 'u';
        tu_expect_report(err, sizeof err, "BUG t-q-zq: Freepointer corrupt", op_free, &o,
                         "BUG t-q-zq: Freepointer corrupt", tu_addr(s, o.p));
    } else {
        qslab_cache_free(c, o.p);
    }
    qslab_cache_free(c, second);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Many more threads than cores allocate and free in one Q cache, half of
 * their frees of objects another thread allocated (swapped through a
 * shared array): every free is checked and quarantined under its node's
 * lock, nothing is reported, and validation finds the counts right. */
#define THREADS 8
#define SLOTS 64
static char *shared[SLOTS];

static void *churn(void *arg)
{
    qslab_cache *c = arg;
    uint64_t r = (uint64_t)(uintptr_t)&r | 1;
    for (int i = 0; i < (TU_SANITIZED ? 3000 : 20000); i++) {
        char *p = qslab_cache_alloc(c);
        if (!CHECK(p != NULL))
            break;
        memset(p, (int)i, SZ);
        if (tu_rand(&r) & 1)
            p = __atomic_exchange_n(&shared[tu_rand(&r) % SLOTS], p, __ATOMIC_ACQ_REL);
        if (p)
            qslab_cache_free(c, p);
    }
    return NULL;
}

static void threads(void)
{
    qslab_cache *c = qslab_cache_create("t-q-threads", SZ, 0, QSLAB_QUARANTINE, NULL);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, churn, c) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++)
        if (shared[i])
            qslab_cache_free(c, shared[i]);
    CHECK(tu_capture_calls() == 0);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* A write n bytes from p (n may be negative) */
static void op_poke(void *a)
{
    struct op *o = a;
    o->p[(long)o->n] = 'x';
}

/* Is [p, p + n) mapped (at any access)?  mincore says ENOMEM if not. */
static bool mapped(const void *p, size_t n)
{
    unsigned char v[64];
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
    return mincore((void *)page, n < sizeof v * 4096 ? n : sizeof v * 4096, v) == 0;
}

/* Resident pages of [p, p + n), n at most 64 pages */
static unsigned resident(const void *p, size_t n)
{
    unsigned char v[64];
    unsigned r = 0;
    if (mincore((void *)p, n, v) != 0)
        return ~0u;
    for (size_t i = 0; i < n / 4096; i++)
        r += v[i] & 1;
    return r;
}

#define HUGE (40u << 20)

/* Blocks over 32 MiB under protection (guard: true, qslab_harden() or
 * QSLAB_HARDEN=1): between guard pages, kept inaccessible once freed;
 * each fault reported, naming the block, and (the fatal handler returns)
 * the page opened so that the program goes on.  Without: none of that. */
static void huge_blocks(bool guard)
{
    char s[32];
    struct op o = {NULL, qslab_malloc(HUGE), 0};
    CHECK(o.p != NULL);
    memset(o.p, 'a', 4096);
    size_t u = qslab_usable_size(o.p);
    if (!guard) {
        CHECK(u > HUGE); /* up to the mapping's end */
        qslab_free(o.p);
        CHECK(tu_capture_calls() == 0);
        return;
    }
    CHECK(u == HUGE); /* rounded up to pages only */
    const char *past = "BUG large: out-of-bounds access past a large block";
    o.n = u;
    tu_expect_report(err, sizeof err, past, op_poke, &o, past, tu_addr(s, o.p));
    o.n = (size_t)-1;
    const char *before = "BUG large: out-of-bounds access before a large block";
    tu_expect_report(err, sizeof err, before, op_poke, &o, before, tu_addr(s, o.p));
    /* grown (by copying, the guards go with it) */
    o.p = qslab_realloc(o.p, HUGE + 5000);
    CHECK(o.p && o.p[4095] == 'a' && qslab_usable_size(o.p) == HUGE + 8192);
    o.n = HUGE + 8192;
    tu_expect_report(err, sizeof err, past, op_poke, &o, past, tu_addr(s, o.p));
    /* freed: inaccessible, no memory kept */
    char *was = o.p;
    qslab_free(o.p);
    CHECK(mapped(was, 4096) && resident(was, 64 * 4096) == 0);
    o.n = 8;
    const char *uaf = "BUG large: use after free of a large block";
    tu_expect_report(err, sizeof err, uaf, op_poke, &o, uaf, tu_addr(s, was));
    /* a second free: reported (the range is still reserved) */
    struct op f = {NULL, was, 0};
    tu_expect_report(err, sizeof err, "", op_kfree, &f, "a large block freed before", tu_addr(s, was));
    /* 64 later frees: its range goes back to the system */
    for (int i = 0; i < 64; i++) {
        char *q = qslab_malloc(HUGE);
        CHECK(q != NULL);
        qslab_free(q);
    }
    CHECK(!mapped(was, 4096));
    CHECK(tu_capture_calls() == 0);
}

/* The program's own SIGSEGV handler, installed before qslab's: it gets
 * the faults that are not qslab's */
static sigjmp_buf own_jump;
static volatile sig_atomic_t own_faults;
static void own_handler(int sig)
{
    (void)sig;
    own_faults++;
    siglongjmp(own_jump, 1);
}

/* QSLAB_HARDEN=1: the kmalloc classes have Z and Q. */
static int harden_mode(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    char s[32], first[96];
    struct op o = {NULL, qslab_malloc(40), 0};
    CHECK(o.p != NULL);
    size_t u = qslab_usable_size(o.p);
    CHECK(u == tu_kmalloc_class(40));
    /* an overflow of 1 byte past the usable size */
    o.p[u] = 'x';
    snprintf(first, sizeof first, "BUG kmalloc-%zu: Right Redzone overwritten", u);
    tu_expect_report(err, sizeof err, first, op_kfree, &o, first, tu_addr(s, o.p));
    /* realloc of the freed (quarantined) block */
    char *was = o.p;
    snprintf(first, sizeof first, "BUG kmalloc-%zu: realloc of a free object", u);
    tu_expect_report(err, sizeof err, first, op_realloc, &o, first, tu_addr(s, was));
    CHECK(o.p == NULL);
    o.p = was;
    snprintf(first, sizeof first, "BUG kmalloc-%zu: qslab_usable_size of a free object", u);
    tu_expect_report(err, sizeof err, first, op_usable, &o, first, tu_addr(s, was));
    snprintf(first, sizeof first, "BUG kmalloc-%zu: Object already free", u);
    tu_expect_report(err, sizeof err, first, op_kfree, &o, first, tu_addr(s, was));
    huge_blocks(true);
    return tu_done();
}

/* qslab_harden() in a program under way: the caches in use get debug
 * twins with Z and Q (their new objects are checked, the old ones free as
 * before), the caches made after it get the flags themselves. */
static int harden_api_mode(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    qslab_cache *early = qslab_cache_create("t-q-early", 100, 0, 0, NULL);
    char *old = qslab_malloc(40), *old_obj = qslab_cache_alloc(early);
    huge_blocks(false);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    CHECK(qslab_harden() == 0);
    huge_blocks(true);
    /* a fault that is not qslab's goes to the handler qslab's replaced */
    char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    if (!sigsetjmp(own_jump, 1))
        none[10] = 1;
    CHECK(own_faults == 1);
    munmap(none, 4096);
    char s[32], first[96];
    /* the objects from before: freed as before, no report */
    qslab_free(old);
    qslab_cache_free(early, old_obj);
    CHECK(tu_capture_calls() == 0);
    /* a new kmalloc object comes from the twin: an overflow is reported */
    struct op o = {NULL, qslab_malloc(40), 0};
    size_t u = qslab_usable_size(o.p);
    o.p[u] = 'x';
    snprintf(first, sizeof first, "BUG kmalloc-%zu:ZQ: Right Redzone overwritten", u);
    tu_expect_report(err, sizeof err, first, op_kfree, &o, first, tu_addr(s, o.p));
    /* so is a double free of the early cache's new objects */
    o = (struct op){early, qslab_cache_alloc(early), 0};
    qslab_cache_free(early, o.p);
    tu_expect_report(err, sizeof err, "BUG t-q-early:ZQ: Object already free", op_free, &o,
                     "BUG t-q-early:ZQ: Object already free", tu_addr(s, o.p));
    /* a cache made now has the flags itself */
    qslab_cache *late = qslab_cache_create("t-q-late", 100, 0, 0, NULL);
    CHECK(strcmp(qslab_cache_front(late), "debug") == 0);
    unsigned long d = 0;
    CHECK(qslab_tune_get("t-q-late", "debug", &d) == 0 && d == (2 | 128)); /* Z, Q */
    /* again: nothing more to do */
    CHECK(qslab_harden() == 0);
    CHECK(qslab_cache_destroy(late) == 0);
    CHECK(qslab_cache_destroy(early) == 0);
    return tu_done();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "harden-api") == 0)
        return harden_api_mode();
    if (argc > 1 && strcmp(argv[1], "harden") == 0)
        return harden_mode();
    qslab_set_fatal_handler(tu_fatal_capture);
    held_back();
    bounded();
    misuse();
    write_after_free();
    ready();
    compact();
    tu_capture_reset();
    threads();
    CHECK(tu_reexec("harden", "QSLAB_HARDEN", "1") == 0);
    CHECK(tu_reexec("harden-api", "QSLAB_HARDEN", NULL) == 0);
    return tu_done();
}
