/*
 * fuzz_misuse.c - libFuzzer target: bad frees, reported once each, and
 * nothing else harmed.
 *
 * A recording fatal handler is installed (qslab_set_fatal_handler): it
 * counts each report and keeps its message, then returns, and qslab then
 * leaves the bad free undone and goes on (qslab.h, src/core/report.c qs_fatal:
 * a handler that returns makes the call do nothing).
 *
 * INPUT.  Bytes 0-1: the front end of each of the input's five caches
 * (3 bits each: the process default, slqb, slub, slab or slob, set with
 * qslab_tune before the first allocation).  Then records of 4 bytes
 * [op a b c]: op & 31 is the operation (mod OP_NR), op >> 5 how a lazily
 * found misuse is drained (below).
 *
 * WHAT IS GENERATED is only misuse that qslab promises to report
 * (docs/design.md "Bad pointers and misuse", the tests in tests/abort/,
 * tests/integration/bad_free*.c): frees of memory qslab does not own
 * (stack, a global, glibc's malloc, wild addresses), interior pointers
 * (objects, large blocks), wrong caches, a slab's tail, a slot never handed
 * out, and double frees: immediate, delayed (other frees, queue flushes
 * between), after the object's slab went back (shrink), of an object first
 * freed by a thread that has exited since, of a large block, and inside a
 * thread that then exits.  Not generated, as qslab cannot promise them: a
 * second free of an object already handed out again, or one whose first
 * free left it in another live thread's queue.  So every thread is kept on
 * one CPU (per-CPU queues then act as one owner), helper threads exit
 * before the main thread goes on, and objects keep their first word zero
 * (what a pop leaves; a program's data there could, once in 2^20, pass
 * for a free-list link).
 *
 * CHECKS after each misuse: the handler ran exactly once, with a one-line
 * message holding the address as "%p" prints it.  Immediate kinds (not
 * ours, interior, wrong cache, tail, large) are reported by the bad call
 * itself; the others may be found later, "before the object is handed out
 * twice", so they are drained first: (op >> 5) & 3 chooses nothing, a
 * shrink, a qslab_trim or some legitimate frees, then enough allocations
 * of the cache to go through its queue, its slabs and its inbox (every
 * free object it holds, and 3 hiwater + 2 freebatch + 4 slabs' worth
 * more; drain_alloc).  Then: no other report, no
 * object handed out while the program holds it (a set of live pointers),
 * every live object's pattern intact, qslab_cache_validate == 0 and the
 * statistics' active_objs equal to the objects the program holds.  At the
 * end of the input everything is freed and the caches destroyed.
 */
#include "fuzz_util.h"

#include <pthread.h>
#include <qslab.h>
#include <sys/mman.h>

enum { NC = 5, MAX_LIVE = 4096, MAX_DRAIN = 24000 };

/* ---- the recording handler ---- */
static pthread_mutex_t rep_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long reports;
static char last_msg[1024];
static bool print_reports; /* FUZZ_VERBOSE: each report on stderr too */
static bool trace_ops;     /* FUZZ_TRACE: each operation on stderr */

static void record(const char *msg)
{
    pthread_mutex_lock(&rep_lock);
    if (print_reports)
        fprintf(stderr, "report %lu: %s\n", reports + 1, msg);
    reports++;
    size_t n = strlen(msg);
    if (n >= sizeof last_msg)
        n = sizeof last_msg - 1;
    memcpy(last_msg, msg, n);
    last_msg[n] = '\0';
    pthread_mutex_unlock(&rep_lock);
}

static unsigned long report_count(void)
{
    pthread_mutex_lock(&rep_lock);
    unsigned long n = reports;
    pthread_mutex_unlock(&rep_lock);
    return n;
}

/* Does msg name address p ("%p": 0x...), as a whole token? */
static bool names_addr(const char *msg, const void *p)
{
    char a[32];
    snprintf(a, sizeof a, "%p", p);
    size_t n = strlen(a);
    for (const char *s = msg; (s = strstr(s, a)); s += n) {
        char next = s[n];
        bool hex = (next >= '0' && next <= '9') || (next >= 'a' && next <= 'f');
        bool prev_hex = s > msg && ((s[-1] >= '0' && s[-1] <= '9') || (s[-1] >= 'a' && s[-1] <= 'z'));
        if (!hex && !prev_hex)
            return true;
    }
    return false;
}

/* ---- caches of the input ---- */
struct cache {
    qslab_cache *c;
    const char *name;
    size_t size;
    bool ctor;
    unsigned long slot, per_slab, order; /* from the statistics */
    bool slob; /* its front end */
    bool cut;  /* a report said a free list was cut there: objects leaked */
};
static struct cache C[NC];
static const char *const cache_names[NC] = {"fm-a", "fm-b", "fm-c", "fm-d", "fm-e"};
static const size_t cache_sizes[NC] = {64, 64, 48, 200, 1000};
#define CTOR_KEY 0x3c3c3c3c3c3c3c00ULL
static void ctor48(void *p)
{
    fz_fill(p, 48, 0, CTOR_KEY);
}

/* ---- live objects ---- */
struct obj {
    void *p;
    size_t size;
    int cache; /* 0..NC-1, or -1: qslab_malloc */
    uint64_t key;
};
static struct obj live[MAX_LIVE];
static int nlive;
static uint64_t seq;
/* FUZZ_STATS: drains, objects they allocated, shrinks after them (at exit) */
static unsigned long drains, drained, drain_shrinks;

/* Open-addressing set of the live pointers (and of the drain's). */
enum { SET_BITS = 16, SET_SIZE = 1 << SET_BITS };
static void *set[SET_SIZE];
static unsigned set_n;

static unsigned set_hash(const void *p)
{
    return (unsigned)(fz_mix((uintptr_t)p) >> (64 - SET_BITS));
}

static void set_add(void *p, const char *what)
{
    FZ_CHECK(set_n < SET_SIZE / 2, "live set full");
    unsigned i = set_hash(p);
    for (; set[i]; i = (i + 1) & (SET_SIZE - 1))
        if (set[i] == p)
            fz_fail("%s returned %p, which the program still holds (handed out twice; last "
                    "report: \"%s\")",
                    what, p, last_msg);
    set[i] = p;
    set_n++;
}

static bool set_has(const void *p)
{
    for (unsigned i = set_hash(p);; i = (i + 1) & (SET_SIZE - 1)) {
        if (set[i] == p)
            return true;
        if (!set[i])
            return false;
    }
}

/* Deletion shifts the entries after p back (linear probing without
 * tombstones): a drain adds and deletes thousands of pointers, and
 * tombstones made every later probe walk them. */
static void set_del(const void *p)
{
    unsigned i = set_hash(p);
    for (; set[i] != p; i = (i + 1) & (SET_SIZE - 1))
        FZ_CHECK(set[i], "live set: %p missing", p);
    for (unsigned j = i;;) {
        j = (j + 1) & (SET_SIZE - 1);
        if (!set[j])
            break;
        unsigned h = set_hash(set[j]); /* set[j] may move to i if h is not in (i, j] */
        if (((j - h) & (SET_SIZE - 1)) >= ((j - i) & (SET_SIZE - 1))) {
            set[i] = set[j];
            i = j;
        }
    }
    set[i] = NULL;
    set_n--;
}

static void set_clear(void)
{
    if (set_n) /* else empty already */
        memset(set, 0, sizeof set);
    set_n = 0;
}

/* ---- objects: filled past their first word (kept zero), constructed
 * objects keep their constructed state ---- */
static void obj_fill(struct obj *o)
{
    if (o->cache >= 0 && C[o->cache].ctor)
        return;
    if (o->size >= 8)
        memset(o->p, 0, 8);
    fz_fill(o->p, o->size, 8, o->key);
}

static void obj_check(const struct obj *o, const char *when)
{
    uint64_t key = o->key;
    size_t skip = 8;
    if (o->cache >= 0 && C[o->cache].ctor) {
        key = CTOR_KEY;
        skip = 0;
    } else if (o->size >= 8) {
        for (int i = 0; i < 8; i++)
            if (((uint8_t *)o->p)[i])
                fz_fail("%s: object %p (%zu bytes) changed at offset %d (last report: \"%s\")",
                        when, o->p, o->size, i, last_msg);
    }
    size_t bad = fz_find_bad(o->p, o->size, skip, o->size, key);
    if (bad != (size_t)-1)
        fz_fail("%s: object %p (%zu bytes, %s) changed at offset %zu: 0x%02x, expected 0x%02x "
                "(last report: \"%s\")",
                when, o->p, o->size, o->cache >= 0 ? C[o->cache].name : "general", bad,
                ((uint8_t *)o->p)[bad], fz_pat(key, bad), last_msg);
}

/* A new object from cache k (-1: qslab_malloc(size)); NULL if the table is
 * full.  Not recorded in live[] when `keep` is false (the caller frees it). */
static void *obj_new(int k, size_t size, struct obj *out)
{
    void *p;
    if (k >= 0) {
        p = qslab_cache_alloc(C[k].c);
        size = C[k].size;
    } else {
        p = qslab_malloc(size);
    }
    if (!p)
        fz_fail("allocation from %s (%zu bytes) returned NULL (last report: \"%s\")",
                k >= 0 ? C[k].name : "qslab_malloc", size, last_msg);
    set_add(p, k >= 0 ? C[k].name : "qslab_malloc");
    if (k >= 0 && C[k].ctor) {
        size_t bad = fz_find_bad(p, size, 0, size, CTOR_KEY);
        if (bad != (size_t)-1)
            fz_fail("%s: object %p not in its constructed state at offset %zu", C[k].name, p, bad);
    }
    out->p = p;
    out->size = size;
    out->cache = k;
    out->key = fz_mix(++seq ^ 0x6d69737573650000ULL);
    obj_fill(out);
    return p;
}

static bool alloc_live(int k, size_t size)
{
    if (nlive >= MAX_LIVE)
        return false;
    obj_new(k, size, &live[nlive]);
    nlive++;
    return true;
}

/* Free a live object (checked) the right way; `via_free`: qslab_free. */
static void obj_free(struct obj *o, bool via_free)
{
    obj_check(o, "free");
    set_del(o->p);
    if (o->cache >= 0 && !via_free)
        qslab_cache_free(C[o->cache].c, o->p);
    else
        qslab_free(o->p);
}

static void free_live(int i, bool via_free)
{
    struct obj o = live[i];
    live[i] = live[--nlive];
    obj_free(&o, via_free);
}

/* Take live object i out of the table (the caller misuses it). */
static struct obj take_live(int i)
{
    struct obj o = live[i];
    live[i] = live[--nlive];
    obj_check(&o, "take");
    set_del(o.p);
    return o;
}

static size_t kmalloc_size(unsigned b)
{
    static const size_t sizes[] = {8, 20, 64, 100, 150, 256, 1000, 3000, 5000, 20000};
    return sizes[b % (sizeof sizes / sizeof sizes[0])];
}

/* The class of a qslab_malloc(size) object whose usable size is u: u,
 * unless the object is alone in its slab (the classes from 20 KiB up),
 * whose usable size is its slab's room up to the power of two
 * (api/kmalloc.c kmalloc_room): then the smallest kmalloc-<bytes> cache
 * that holds size. */
static size_t class_of_usable(size_t size, size_t u)
{
    if (u < 16384 || (u & (u - 1)) || u <= size)
        return u;
    for (size_t n = (size + 7) & ~(size_t)7; n < u; n += 8) {
        char name[32];
        snprintf(name, sizeof name, "kmalloc-%zu", n);
        if (qslab_cache_find(name))
            return n;
    }
    return u;
}

/* The class of a qslab_malloc(size) object. */
static size_t kmalloc_class(size_t size)
{
    void *p = qslab_malloc(size);
    FZ_CHECK(p, "qslab_malloc(%zu) failed", size);
    size_t u = qslab_usable_size(p);
    qslab_free(p);
    return class_of_usable(size, u);
}

/* A fresh object to misuse: from cache k, or qslab_malloc for k == NC. */
static struct obj fresh(unsigned k, unsigned b)
{
    struct obj o;
    k %= NC + 1;
    obj_new(k < NC ? (int)k : -1, kmalloc_size(b), &o);
    set_del(o.p);
    return o;
}

/* A new object held in live[] while it is misused (counted as the
 * program's); NULL if the table is full.  release() frees it (if a drain
 * did not already). */
static struct obj *held(unsigned k, unsigned b)
{
    k %= NC + 1;
    if (!alloc_live(k < NC ? (int)k : -1, kmalloc_size(b)))
        return NULL;
    return &live[nlive - 1];
}

static void release(const void *p)
{
    for (int i = 0; i < nlive; i++)
        if (live[i].p == p) {
            free_live(i, false);
            return;
        }
}

/* ---- helper threads: each runs one function and exits; the caller joins
 * it before it goes on (no object waits in a live thread's queue) ---- */
struct job {
    void (*fn)(struct job *);
    int k;
    int n;
    struct obj objs[256];
    void *p;
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    j->fn(j);
    return NULL;
}

static void run_job(struct job *j)
{
    pthread_t t;
    if (pthread_create(&t, NULL, job_main, j) != 0)
        fz_fail("pthread_create failed");
    pthread_join(t, NULL);
}

static void job_alloc(struct job *j)
{
    for (int i = 0; i < j->n; i++)
        obj_new(j->k, kmalloc_size((unsigned)i), &j->objs[i]);
}

static void job_free(struct job *j)
{
    for (int i = 0; i < j->n; i++)
        obj_free(&j->objs[i], i & 1);
}

static void job_free_p(struct job *j)
{
    if (j->k >= 0)
        qslab_cache_free(C[j->k].c, j->p);
    else
        qslab_free(j->p);
}

/* In the thread: n objects, freed, then the first freed again (delayed). */
static void job_double_free(struct job *j)
{
    for (int i = 0; i < j->n; i++) {
        obj_new(j->k, kmalloc_size(3), &j->objs[i]);
        set_del(j->objs[i].p);
    }
    for (int i = 0; i < j->n; i++) {
        obj_check(&j->objs[i], "thread free");
        if (j->k >= 0)
            qslab_cache_free(C[j->k].c, j->objs[i].p);
        else
            qslab_free(j->objs[i].p);
    }
    j->p = j->objs[0].p;
    job_free_p(j);
}

/* ---- checks ---- */
static unsigned long cache_active(int k)
{
    struct qslab_cache_stats st;
    FZ_CHECK(qslab_cache_stats(C[k].c, &st) == 0, "qslab_cache_stats(%s) failed", C[k].name);
    return st.active_objs;
}

/* qslab_cache_validate(k) == 0; or, once a report said that a free list
 * was cut in cache k, that its only complaint is the objects lost past the
 * cut (docs/design.md: "the objects past the cut (leaked, never handed
 * out)"): they are in use for their slabs and free for the statistics. */
static void validate(int k, const char *when)
{
    if (!C[k].cut) {
        if (qslab_cache_validate(C[k].c) != 0)
            fz_fail("%s: qslab_cache_validate(%s) failed (problems above; last report: \"%s\")",
                    when, C[k].name, last_msg);
        return;
    }
    int fd = memfd_create("validate", MFD_CLOEXEC);
    FZ_CHECK(fd >= 0, "memfd_create failed");
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int r = qslab_cache_validate(C[k].c);
    dup2(saved, 2);
    close(saved);
    static char out[8192];
    ssize_t n = pread(fd, out, sizeof out - 1, 0);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    if (r == 0)
        return;
    for (char *line = out; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        if (!strstr(line, "objects in use differ from allocated + queued"))
            fz_fail("%s: qslab_cache_validate(%s) failed: \"%s\" (a list was cut there before; "
                    "last report: \"%s\")",
                    when, C[k].name, line, last_msg);
        line = end ? end + 1 : line + strlen(line);
    }
}

static void check_all(const char *when)
{
    for (int i = 0; i < nlive; i++)
        obj_check(&live[i], when);
    for (int k = 0; k < NC; k++) {
        validate(k, when);
        unsigned long held = 0;
        for (int i = 0; i < nlive; i++)
            held += live[i].cache == k;
        unsigned long act = cache_active(k);
        if (act != held)
            fz_fail("%s: cache %s counts %lu active objects, the program holds %lu (last report: "
                    "\"%s\")",
                    when, C[k].name, act, held, last_msg);
    }
}

/* Allocate enough objects of cache k (-1: the kmalloc class of `size`) to
 * go through its queue, its slabs and its inbox, then free them.
 *
 * What it allocates past the objects the cache held comes from new slabs,
 * and after the frees those stay as empty slabs kept for reuse (up to
 * 1 GiB of them, for a second: empty_limit, empty_decay_ms), counted in
 * num_objs by the next drain, which so allocated more again: drains grew
 * to MAX_DRAIN objects each (19,000 on average in kmalloc-128 after two
 * minutes; the rate fell from 200 exec/s to 17 in 30 minutes, RSS 465 MB).
 * So once the empty slabs hold more objects than the drain's margin (what
 * it allocates past the cache's free objects), they are given back: returns
 * the cache then, for expect_report to shrink once the reports are counted
 * and the caches checked (a report at the shrink is one too many and
 * fails); else NULL. */
static struct obj drain_objs[MAX_DRAIN];
static qslab_cache *drain_alloc(int k, size_t size)
{
    unsigned long hiwater = 1024, freebatch = 256;
    char name[32];
    const char *cn = name;
    unsigned long per_slab = 64;
    if (k >= 0) {
        cn = C[k].name;
        per_slab = C[k].per_slab;
    } else {
        snprintf(name, sizeof name, "kmalloc-%zu", size);
    }
    qslab_cache *c = k >= 0 ? C[k].c : qslab_cache_find(cn);
    qslab_tune_get(cn, "hiwater", &hiwater);
    qslab_tune_get(cn, "freebatch", &freebatch);
    unsigned long margin = 3 * hiwater + 2 * freebatch + 4 * per_slab + 256, n = margin;
    /* and every object its slabs hold: a second free pushed while the
     * object sat on an empty slab's list kept by the queue (its stash) is
     * found when a refill walks that list (docs/design.md, "Free bits") */
    struct qslab_cache_stats st;
    if (qslab_cache_stats(c, &st) == 0) /* less the ones the program holds (a
                                        * free not found yet counts one less:
                                        * 2^64-1 for 0) */
        n += st.num_objs - (st.active_objs <= st.num_objs ? st.active_objs : 0);
    if (n > MAX_DRAIN)
        n = MAX_DRAIN;
    drains++;
    drained += n;
    for (unsigned long i = 0; i < n; i++)
        obj_new(k, size, &drain_objs[i]);
    for (unsigned long i = n; i-- > 0;)
        obj_free(&drain_objs[i], false);
    if (qslab_cache_stats(c, &st) == 0 && st.empty_slabs * st.objs_per_slab > margin) {
        drain_shrinks++;
        return c;
    }
    return NULL;
}

/* The misuse of p (an object of cache k, or of kmalloc class `usable`) was
 * reported, or is after a drain: exactly once, naming p. */
static void expect_report(unsigned long before, const void *p, const char *what, bool lazy,
                          unsigned style, int k, size_t usable)
{
    qslab_cache *shrink = NULL;
    if (lazy && report_count() == before) {
        switch (style & 3) {
        case 1:
            if (k >= 0)
                qslab_cache_shrink(C[k].c);
            break;
        case 2:
            qslab_trim();
            break;
        case 3:
            for (int i = 0; i < 8 && nlive; i++)
                free_live(nlive - 1, false);
            break;
        default:
            break;
        }
        shrink = drain_alloc(k, usable);
    }
    unsigned long n = report_count() - before;
    if (n != 1)
        fz_fail("%s of %p: %lu reports, not 1 (last: \"%s\")", what, p, n, last_msg);
    if (!names_addr(last_msg, p) || strchr(last_msg, '\n'))
        fz_fail("%s of %p: the report does not name the address on one line: \"%s\"", what, p,
                last_msg);
    if (lazy && k >= 0 && (strstr(last_msg, "while it was free") || strstr(last_msg, "corruption")))
        C[k].cut = true;
    check_all(what);
    if (shrink) /* the drain's empty slabs (drain_alloc); checked by the next check_all */
        qslab_cache_shrink(shrink);
    FZ_CHECK(report_count() == before + 1, "%s of %p: checking made %lu more reports (\"%s\")",
             what, p, report_count() - before - 1, last_msg);
}

/* ---- operations ---- */
enum {
    OP_ALLOC,
    OP_FREE,
    OP_SHRINK,
    OP_TUNE,
    OP_THREAD_ALLOC,
    OP_THREAD_FREE,
    OP_DF_IMMEDIATE,
    OP_DF_DELAYED,
    OP_DF_REMOTE,
    OP_DF_THREAD,
    OP_DF_SHRUNK,
    OP_INTERIOR,
    OP_FOREIGN,
    OP_WRONG_CACHE,
    OP_TAIL,
    OP_SLOT,
    OP_DF_LARGE,
    OP_CHECK,
    OP_NR
};

static void free_two(const struct obj *o, unsigned how, bool second)
{
    bool via_free = second ? (how >> 1) & 1 : how & 1;
    if (o->cache >= 0 && !via_free)
        qslab_cache_free(C[o->cache].c, o->p);
    else
        qslab_free(o->p);
}

static size_t usable_of(const struct obj *o)
{
    return o->cache >= 0 ? 0 : class_of_usable(o->size, qslab_usable_size(o->p));
}

static char global_buf[256];

static void run(const uint8_t r[4])
{
    unsigned op = (r[0] & 31) % OP_NR, style = r[0] >> 5, a = r[1], b = r[2], c = r[3];
    unsigned long before = report_count();
    if (trace_ops)
        fprintf(stderr, "op %u style %u a %u b %u c %u (%d live)\n", op, style, a, b, c, nlive);
    switch (op) {
    case OP_ALLOC: {
        int n = c >= 0xf0 ? 32 << (c & 3) : 1 + (int)(c & 7);
        unsigned k = a % (NC + 1);
        for (int i = 0; i < n; i++)
            if (!alloc_live(k < NC ? (int)k : -1, kmalloc_size(b + (unsigned)i)))
                break;
        break;
    }
    case OP_FREE: {
        int n = c >= 0xf0 ? 32 << (c & 3) : 1 + (int)(c & 7);
        for (int i = 0; i < n && nlive; i++)
            free_live((int)((a | b << 8) % (unsigned)nlive), (c >> 3) & 1);
        break;
    }
    case OP_SHRINK:
        if (a & 0x80)
            qslab_trim();
        else
            qslab_cache_shrink(C[a % NC].c);
        break;
    case OP_TUNE: {
        char v[16];
        unsigned long fb = 1ul << (b % 7), hw = fb << (c % 4);
        const char *n = C[a % NC].name;
        fz_quiet_begin();
        snprintf(v, sizeof v, "%lu", 1ul << 20);
        qslab_tune(n, "hiwater", v);
        snprintf(v, sizeof v, "%lu", fb);
        qslab_tune(n, "freebatch", v);
        snprintf(v, sizeof v, "%lu", hw);
        qslab_tune(n, "hiwater", v);
        fz_quiet_end();
        break;
    }
    case OP_THREAD_ALLOC: {
        static struct job j;
        unsigned k = a % (NC + 1);
        j.fn = job_alloc;
        j.k = k < NC ? (int)k : -1;
        j.n = 1 + (int)(b % 64);
        if (nlive + j.n > MAX_LIVE)
            break;
        run_job(&j);
        for (int i = 0; i < j.n; i++)
            live[nlive++] = j.objs[i];
        break;
    }
    case OP_THREAD_FREE: {
        static struct job j;
        j.fn = job_free;
        j.n = 0;
        for (int i = 0; i < 1 + (int)(b % 64) && nlive; i++) {
            int x = (int)((a + (unsigned)i * 5) % (unsigned)nlive);
            j.objs[j.n++] = live[x];
            live[x] = live[--nlive];
        }
        run_job(&j);
        break;
    }
    case OP_DF_IMMEDIATE: {
        struct obj o = fresh(a, b);
        size_t usable = usable_of(&o);
        free_two(&o, c, false);
        free_two(&o, c, true);
        expect_report(before, o.p, "immediate double free", true, style, o.cache, usable);
        break;
    }
    case OP_DF_DELAYED: {
        struct obj o = (a & 0x80) && nlive ? take_live((int)(b % (unsigned)nlive)) : fresh(a, b);
        size_t usable = usable_of(&o);
        free_two(&o, c, false);
        if (a & 0x40) { /* new objects of its cache, freed: the queue flushes */
            int n = 1 + (int)(c >> 2) * 16;
            for (int i = 0; i < n && nlive < MAX_LIVE; i++)
                alloc_live(o.cache, usable ? usable : 64);
            for (int i = 0; i < n && nlive; i++)
                free_live(nlive - 1, false);
        } else { /* other objects the program holds */
            for (int i = 0; i < (int)(c >> 2) && nlive; i++)
                free_live((int)((a + (unsigned)i) % (unsigned)nlive), false);
        }
        free_two(&o, c, true);
        expect_report(before, o.p, "delayed double free", true, style, o.cache, usable);
        break;
    }
    case OP_DF_REMOTE: {
        static struct job j;
        struct obj o = fresh(a, b);
        size_t usable = usable_of(&o);
        j.fn = job_free_p;
        j.k = o.cache;
        j.p = o.p;
        run_job(&j);
        free_two(&o, 0, false);
        expect_report(before, o.p, "double free after a free in an exited thread", true, style,
                      o.cache, usable);
        break;
    }
    case OP_DF_THREAD: {
        static struct job j;
        unsigned k = a % (NC + 1);
        j.fn = job_double_free;
        j.k = k < NC ? (int)k : -1;
        j.n = 2 + (int)(b % 16);
        run_job(&j);
        expect_report(before, j.p, "delayed double free in an exiting thread", true, style, j.k,
                      j.k < 0 ? kmalloc_class(kmalloc_size(3)) : 0);
        break;
    }
    case OP_DF_SHRUNK: {
        unsigned k = a % NC;
        int n = 1 + (int)(b % 200);
        if (nlive + n + 1 > MAX_LIVE)
            break;
        alloc_live((int)k, 0); /* keeps the cache's memory */
        int first = nlive;
        for (int i = 0; i < n; i++)
            alloc_live((int)k, 0);
        struct obj victim = live[first + (int)(c % (unsigned)n)];
        while (nlive > first)
            free_live(nlive - 1, false);
        qslab_cache_shrink(C[k].c);
        free_two(&victim, c >> 6, false);
        expect_report(before, victim.p, "double free after shrink", true, style, (int)k, 0);
        break;
    }
    case OP_INTERIOR: {
        bool from_live = nlive && (a & 1);
        struct obj *h = from_live ? NULL : held(a >> 1, b);
        if (!from_live && !h)
            break;
        struct obj o = from_live ? live[b % (unsigned)nlive] : *h;
        if (o.size >= 2) {
            size_t off = 1 + c % (o.size - 1);
            if (o.cache >= 0 && !(c & 0x80))
                qslab_cache_free(C[o.cache].c, (char *)o.p + off);
            else
                qslab_free((char *)o.p + off);
            expect_report(before, (char *)o.p + off, "interior pointer", false, 0, 0, 0);
        }
        if (!from_live)
            release(o.p);
        break;
    }
    case OP_FOREIGN: {
        long on_stack[8] = {0};
        void *m = NULL, *big = NULL, *p;
        switch (a % 9) {
        case 0:
            p = &on_stack[b % 8];
            break;
        case 1:
            p = global_buf + (b % 32) * 8;
            break;
        case 2:
            p = m = malloc(16 + b);
            break;
        case 3:
            m = malloc(64);
            p = (char *)m + 8;
            break;
        case 4:
            p = (void *)(uintptr_t)(8 + 8 * b);
            break;
        case 5:
            p = (void *)(uintptr_t)-16;
            break;
        case 6:
            p = (void *)((uintptr_t)1 << 47);
            break;
        case 7:
            p = (void *)(((uintptr_t)1 << 47) - 4096);
            break;
        default: /* inside a large block */
            big = qslab_malloc(((size_t)33 << 20) + 1);
            FZ_CHECK(big, "qslab_malloc(33 MiB) failed");
            p = (char *)big + 8 + 4096 * (size_t)b;
            break;
        }
        if (c & 1)
            qslab_cache_free(C[(c >> 1) % NC].c, p);
        else
            qslab_free(p);
        expect_report(before, p, "free of memory qslab does not own", false, 0, 0, 0);
        free(m);
        qslab_free(big);
        FZ_CHECK(report_count() == before + 1, "freeing what was left: \"%s\"", last_msg);
        break;
    }
    case OP_WRONG_CACHE: {
        unsigned x = a % (NC + 1), y = b % NC;
        if (x == y)
            y = (y + 1) % NC;
        struct obj *h = held(x, c);
        if (!h)
            break;
        void *p = h->p;
        qslab_cache_free(C[y].c, p);
        expect_report(before, p, "free to the wrong cache", false, 0, 0, 0);
        release(p);
        break;
    }
    case OP_TAIL: {
        struct cache *e = &C[4];
        if (e->slob)
            break;
        struct obj *h = held(4, 0);
        if (!h)
            break;
        struct obj o = *h;
        size_t slab = (size_t)4096 << e->order;
        char *base = (char *)((uintptr_t)o.p & ~(uintptr_t)(slab - 1));
        char *tail = base + slab - 8 - 8 * (b % 4);
        if (e->per_slab * e->slot <= slab - 8 * (b % 4 + 1)) {
            if (c & 1)
                qslab_free(tail);
            else
                qslab_cache_free(e->c, tail);
            expect_report(before, tail, "free of a slab's tail", false, 0, 0, 0);
        }
        release(o.p);
        break;
    }
    case OP_SLOT: {
        unsigned k = a % NC;
        struct cache *e = &C[k];
        /* not after a list of this cache was cut: the neighbour may be one
         * of the objects lost past the cut, which qslab no longer sees */
        if (e->slob || e->cut)
            break;
        struct obj *h = held(k, 0);
        if (!h)
            break;
        struct obj o = *h;
        size_t slab = (size_t)4096 << e->order;
        uintptr_t base = (uintptr_t)o.p & ~(uintptr_t)(slab - 1);
        long d = (long)(b % 4) + 1;
        if (c & 1)
            d = -d;
        char *q = (char *)o.p + d * (long)e->slot;
        if ((uintptr_t)q >= base && (uintptr_t)q + e->slot <= base + slab && !set_has(q)) {
            qslab_cache_free(e->c, q);
            expect_report(before, q, "free of a slot not handed out", true, style, (int)k, 0);
        }
        release(o.p);
        break;
    }
    case OP_DF_LARGE: {
        void *p = qslab_malloc(((size_t)33 << 20) + 4096 * (size_t)b);
        FZ_CHECK(p, "qslab_malloc(33 MiB) failed");
        qslab_free(p);
        qslab_free(p);
        expect_report(before, p, "double free of a large block", false, 0, 0, 0);
        break;
    }
    case OP_CHECK:
        check_all("CHECK");
        break;
    }
    FZ_CHECK(report_count() == before || report_count() == before + 1,
             "op %u: %lu reports (\"%s\")", op, report_count() - before, last_msg);
    if (report_count() != before && op < OP_DF_IMMEDIATE)
        fz_fail("legitimate op %u reported: \"%s\"", op, last_msg);
}

static void print_stats(void)
{
    fprintf(stderr, "fuzz_misuse: %lu drains, %lu objects (%.0f each), %lu shrinks after one\n",
            drains, drained, drains ? (double)drained / (double)drains : 0.0, drain_shrinks);
}

static void init_once(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    fz_pin_one_cpu();
    print_reports = getenv("FUZZ_VERBOSE") != NULL;
    trace_ops = getenv("FUZZ_TRACE") != NULL;
    if (getenv("FUZZ_STATS"))
        atexit(print_stats);
    qslab_set_fatal_handler(record);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    struct fz_in in = {data, size, 0};
    unsigned fronts = fz_u16(&in);
    static const char *const front_names[8] = {NULL, "slqb", "slub", "slab", "slob", NULL, NULL, NULL};
    for (int k = 0; k < NC; k++) {
        struct cache *e = &C[k];
        e->name = cache_names[k];
        e->size = cache_sizes[k];
        e->ctor = k == 2;
        e->cut = false;
        e->c = qslab_cache_create(e->name, e->size, 0, 0, e->ctor ? ctor48 : NULL);
        FZ_CHECK(e->c, "qslab_cache_create(%s) failed", e->name);
        const char *f = front_names[(fronts >> (3 * k)) & 7];
        if (f && strcmp(qslab_cache_front(e->c), "debug") != 0) { /* QSLAB_DEBUG: kept */
            fz_quiet_begin();
            int r = qslab_tune(e->name, "front", f);
            fz_quiet_end();
            FZ_CHECK(r == 0, "qslab_tune(%s, front, %s) refused on a new cache", e->name, f);
        }
        e->slob = strcmp(qslab_cache_front(e->c), "slob") == 0;
        /* the slab geometry, from one object's statistics */
        void *p = qslab_cache_alloc(e->c);
        struct qslab_cache_stats st;
        qslab_cache_stats(e->c, &st);
        e->slot = st.slot_size;
        e->per_slab = st.objs_per_slab;
        e->order = st.order;
        qslab_cache_free(e->c, p);
    }
    unsigned long before = report_count();
    while (fz_more(&in)) {
        uint8_t r[4];
        for (int i = 0; i < 4; i++)
            r[i] = (uint8_t)fz_u8(&in);
        run(r);
        before = report_count();
    }
    check_all("end of input");
    while (nlive)
        free_live(nlive - 1, nlive & 1);
    check_all("end of input, all freed");
    for (int k = 0; k < NC; k++) {
        fz_quiet_begin();
        int r = qslab_cache_destroy(C[k].c);
        fz_quiet_end();
        FZ_CHECK(r == 0, "end of input: qslab_cache_destroy(%s) failed, errno %d", C[k].name, errno);
        C[k].c = NULL;
    }
    FZ_CHECK(report_count() == before, "end of input: %lu reports (\"%s\")", report_count() - before,
             last_msg);
    set_clear();
    seq = 0;
    return 0;
}
