/*
 * fuzz_ops.c - libFuzzer target: correct use of the whole API, checked
 * against a shadow of every live object.
 *
 * INPUT.  Byte 0: the number of threads, 1 + b % 3 (the fuzzer's thread and
 * up to two workers, made once and reused, or made anew by RESPAWN).  Then
 * records of 4 bytes [op a b c]: op & 31 is the operation (mod OP_NR),
 * op >> 5 the thread that runs it (mod threads); a, b, c its arguments.
 * A short last record is padded with zeros.
 *
 * EXECUTION.  Records are run in rounds: each thread's records of a round
 * run on that thread while the others run theirs (the threads start and
 * end a round together).  A "serial" operation (create, destroy, tune,
 * validate, respawn, report) ends the round and runs alone on the fuzzer's
 * thread between two rounds, when no thread uses qslab.  Objects handed to
 * another thread (HANDOFF) change tables between rounds.  Each thread has
 * its own table of live objects, so which object a record names depends on
 * the input alone, not on the interleaving: a failing input replays.
 *
 * CHECKS (any failure: one "FUZZ FAILURE" line, abort()):
 *   - every object is filled with a pattern of its own (fuzz_util.h),
 *     checked before it is freed or resized and by CHECK records: an object
 *     handed out twice, or written by qslab while allocated, is caught;
 *   - qslab_realloc keeps the old prefix; qslab_calloc is zeroed;
 *   - a constructor cache hands out objects in their constructed state (the
 *     program restores it before each free, as the contract says);
 *   - alignment: 8 bytes, the cache's alignment, the cache line (as
 *     QSLAB_HWCACHE_ALIGN computes it), qslab_aligned_alloc's;
 *   - invalid arguments (create, alloc_node, malloc_node, aligned_alloc,
 *     calloc overflow, tune) fail with the documented errno;
 *   - qslab_tune `debug` (tune_debug): a cache in use gets a debug twin
 *     for its new objects, counted with the cache's in the checks below;
 *   - qslab_tune: accepted exactly within the documented ranges, and
 *     qslab_tune_get reads back what was set (refused: nothing changed);
 *   - qslab_cache_destroy: -1/EBUSY while objects live, else 0;
 *     a kmalloc cache: -1/EINVAL;
 *   - qslab_cache_validate == 0 and the statistics' active_objs equal the
 *     shadow's count, at VALIDATE records and at the end of every input;
 *   - at the end of the input every object is freed (pattern checked),
 *     every cache destroyed, tuned kmalloc caches restored, and no large
 *     block is left: the process does not grow from one input to the next.
 * Debug flags (QSLAB_RED_ZONE, QSLAB_POISON, QSLAB_STORE_USER, and
 * QSLAB_CONSISTENCY_CHECKS where the header has it) are given to some
 * caches; correct use must not trip them.
 *
 * The default fatal handler stays: any report from qslab is a crash.
 */
#include "fuzz_util.h"

#include <pthread.h>
#include <qslab.h>
#include <semaphore.h>

enum { NT = 3, NSLOTS = 8, MAX_LIVE = 2048, ROUND = 48 };
/* Memory a thread may hold in objects (and one large block besides): the
 * fuzzer stays fast and far below its RSS limit. */
#define BUDGET ((size_t)8 << 20)
#define LARGE ((size_t)32 << 20) /* over this: mapped directly */

/* ---- operations ---- */
enum {
    OP_CREATE,     /* serial */
    OP_ALLOC,      /* a: slot, c: count */
    OP_ALLOC_NODE, /* a: slot, b: node variant */
    OP_FREE,       /* a,b: index, c: count and method */
    OP_MALLOC,     /* a,b: size, c: count */
    OP_CALLOC,     /* a,b: size, c: n */
    OP_REALLOC,    /* a: index, b,c: size */
    OP_ALIGNED,    /* a: alignment, b,c: size */
    OP_MALLOC_NODE,
    OP_SHRINK,    /* a: slot, or a kmalloc cache */
    OP_TRIM,
    OP_TUNE,      /* serial: a target, b attribute, c value */
    OP_DESTROY,   /* serial */
    OP_VALIDATE,  /* serial */
    OP_HANDOFF,   /* a,b: index, c: count and receiver */
    OP_RESPAWN,   /* serial: a worker exits, a new one takes its place */
    OP_CHECK,     /* patterns of some objects */
    OP_QUERY,     /* usable_size, object_node, name, object_size, front */
    OP_REPORT,    /* serial: slabinfo, stats report, owner info */
    OP_BULK,      /* a: slot, b: count, c: free order */
    OP_FREE_SLOT, /* free every object of one cache */
    OP_NR
};

static bool op_serial(unsigned op)
{
    return op == OP_CREATE || op == OP_TUNE || op == OP_DESTROY || op == OP_VALIDATE ||
           op == OP_RESPAWN || op == OP_REPORT;
}

struct rec {
    uint8_t op, a, b, c;
};

struct obj {
    void *p;
    size_t size;  /* bytes asked for: the pattern covers them */
    size_t align; /* alignment promised */
    uint64_t key; /* pattern */
    int8_t slot;  /* cache slot, or -1: qslab_malloc & co */
    uint8_t to;   /* HANDOFF: receiving thread */
};

/* ---- caches ---- */
struct slot {
    qslab_cache *c;
    char name[16];
    size_t size, align; /* asked; align: what objects must have */
    unsigned long flags;
    int ctor; /* index in ctor_sizes, or -1 */
};
static struct slot slots[NSLOTS];

/* Constructors: one per size, filling the object with a pattern of its own
 * (the constructed state); objects are freed in it again. */
static const size_t ctor_sizes[] = {8, 16, 40, 64, 100, 256, 1000, 4096, 5000, 20000};
#define NCTOR (sizeof ctor_sizes / sizeof ctor_sizes[0])
#define CTOR_KEY(k) (0xc7c7c7c7c7c70000ULL + (uint64_t)(k) * 0x10101ULL)
#define CTOR(k)                                                                                    \
    static void ctor##k(void *p)                                                                   \
    {                                                                                              \
        fz_fill(p, ctor_sizes[k], 0, CTOR_KEY(k));                                                 \
    }
CTOR(0)
CTOR(1)
CTOR(2)
CTOR(3)
CTOR(4)
CTOR(5)
CTOR(6)
CTOR(7)
CTOR(8)
CTOR(9)
static void (*const ctors[NCTOR])(void *) = {ctor0, ctor1, ctor2, ctor3, ctor4,
                                             ctor5, ctor6, ctor7, ctor8, ctor9};

/* ---- threads ---- */
enum { CMD_RUN, CMD_FREE_ALL, CMD_EXIT };
struct thr {
    struct obj live[MAX_LIVE];
    int nlive;
    size_t bytes; /* in live[] objects up to LARGE */
    int nlarge;   /* large blocks in live[] */
    struct obj out[MAX_LIVE]; /* handed off, moved between rounds */
    int nout;
    struct rec ops[ROUND];
    int nops;
    uint64_t seq;            /* objects made: pattern keys */
    bool touched[NSLOTS];    /* allocated, shrunk, ...: front no longer tunable */
    size_t kmsize[160];      /* usable sizes of general objects: kmalloc-<n> */
    int nkm;
    int cmd;
    bool started;
    pthread_t tid;
    sem_t go;
};
static struct thr T[NT];
static int nthreads;
static sem_t done;
static int nodes;
static unsigned long large_live0;
static int devnull = -1;
static bool skip_known; /* FUZZ_SKIP_KNOWN=1: not what triggers the open bugs of README.md */

/* ---- kmalloc caches: names, and their tunables to restore ---- */
static const char *const attr_names[] = {
    "order",       "hiwater",      "freebatch",    "empty_limit", "empty_decay_ms",
    "stash_bytes", "cpu_partial",  "min_partial",  "pass_through", "limit",
    "batchcount",  "shared",       "front",        "no_such_attr", "",
    "debug",       "owner_budget"};
enum { A_ORDER, A_HIWATER, A_FREEBATCH, A_EMPTY_LIMIT, A_DECAY, A_STASH, A_CPU_PARTIAL,
       A_MIN_PARTIAL, A_PASS, A_LIMIT, A_BATCH, A_SHARED, A_FRONT, A_BOGUS1, A_BOGUS2, A_DEBUG,
       A_BUDGET, A_NR };
#define NUMERIC_ATTRS A_FRONT /* attr_names[0 .. A_FRONT) are numbers */
static const unsigned long attr_max[NUMERIC_ATTRS] = {
    14, 1ul << 20, 0 /* hiwater */, 1ul << 20, 3600000, 64ul << 20, 1ul << 20, 1ul << 20, 1,
    32768, 0 /* limit */, 64};

enum { NKM = 153 };
static char km_name[NKM][24];
static int nkm;
static unsigned long km_default[NKM][NUMERIC_ATTRS];
static bool km_dirty[NKM];
/* the process's owner budget ("*" owner_budget) at start-up, and whether
 * an input changed it */
static unsigned long budget_default;
static bool budget_dirty;
/* kmalloc caches a TUNE record may name (indexes in km_name, found at init) */
static const char *const km_tune_names[] = {"kmalloc-8",    "kmalloc-64",   "kmalloc-192",
                                            "kmalloc-1024", "kmalloc-4096", "kmalloc-32768"};

static void km_init(void)
{
    /* the classes of kmalloc.c: 8, 16 bytes apart to 128, then eight per
     * power of two to 32 MiB */
    static const size_t small[] = {8, 16, 32, 48, 64, 80, 96, 112, 128};
    size_t sizes[NKM];
    int n = 0;
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        sizes[n++] = small[i];
    for (size_t p = 128; p < ((size_t)32 << 20); p *= 2)
        for (size_t e = 1; e <= 8; e++)
            sizes[n++] = p + e * (p / 8);
    for (int i = 0; i < n && nkm < NKM; i++) {
        char name[24];
        snprintf(name, sizeof name, "kmalloc-%zu", sizes[i]);
        if (!qslab_cache_find(name))
            continue;
        memcpy(km_name[nkm], name, sizeof name);
        for (int a = 0; a < NUMERIC_ATTRS; a++)
            if (qslab_tune_get(name, attr_names[a], &km_default[nkm][a]) != 0)
                fz_fail("init: qslab_tune_get(%s, %s) failed", name, attr_names[a]);
        nkm++;
    }
    FZ_CHECK(nkm == NKM, "init: only %d kmalloc caches found", nkm);
    if (qslab_tune_get("*", "owner_budget", &budget_default) != 0)
        fz_fail("init: qslab_tune_get(*, owner_budget) failed");
}

static int km_index(const char *name)
{
    for (int i = 0; i < nkm; i++)
        if (strcmp(km_name[i], name) == 0)
            return i;
    return -1;
}

static void tune_ok(const char *cache, const char *attr, unsigned long v)
{
    char val[32];
    snprintf(val, sizeof val, "%lu", v);
    fz_quiet_begin();
    int r = qslab_tune(cache, attr, val);
    fz_quiet_end();
    FZ_CHECK(r == 0, "restoring %s %s=%s failed (errno %d)", cache, attr, val, errno);
}

/* Back to the values at start-up (hiwater and limit are raised first, so
 * that freebatch and batchcount can always be set). */
static void km_restore(void)
{
    for (int i = 0; i < nkm; i++) {
        if (!km_dirty[i])
            continue;
        const char *n = km_name[i];
        unsigned long *d = km_default[i];
        tune_ok(n, "hiwater", 1ul << 20);
        tune_ok(n, "limit", 32768);
        for (int a = 0; a < NUMERIC_ATTRS; a++)
            if (a != A_HIWATER && a != A_LIMIT)
                tune_ok(n, attr_names[a], d[a]);
        tune_ok(n, "hiwater", d[A_HIWATER]);
        tune_ok(n, "limit", d[A_LIMIT]);
        if (strcmp(qslab_cache_front(qslab_cache_find(n)), "debug") != 0) {
            /* its allocations back from a debug twin (src/debug/twin.c) */
            fz_quiet_begin();
            int r = qslab_tune(n, "debug", "-");
            fz_quiet_end();
            FZ_CHECK(r == 0, "restoring %s debug=- failed (errno %d)", n, errno);
        }
        km_dirty[i] = false;
    }
    if (budget_dirty)
        tune_ok("*", "owner_budget", budget_default);
    budget_dirty = false;
}

/* ---- sizes ---- */
static const size_t edges[] = {8,     16,    32,    64,     96,     128,    192,     256,
                               384,   512,   768,   1024,   1536,   2048,   3072,    4096,
                               5120,  6144,  7168,  8192,   10240,  12288,  14336,   16384,
                               20480, 24576, 28672, 32768,  49152,  65536,  98304,   131072,
                               196608, 262144, 524288, 1 << 20, 2 << 20, 4 << 20};
#define NEDGES (sizeof edges / sizeof edges[0])

static size_t gen_size(unsigned a, unsigned b)
{
    switch (a & 7) {
    case 0:
    case 1:
    case 2:
        return b; /* 0 .. 255 */
    case 3:
        return ((size_t)(a >> 3) << 8 | b) & 0x1fff; /* .. 8 KiB */
    case 4:
        return (((size_t)(a >> 3) << 8 | b) << 3) & 0x3ffff; /* .. 256 KiB */
    case 5:
    case 6: { /* a class boundary, -1, 0 or +1 */
        size_t e = edges[b % NEDGES];
        return e + (a >> 3) % 3 - 1;
    }
    default:
        if ((a >> 3) == 31) /* mapped directly (over 32 MiB) */
            return ((size_t)32 << 20) + 1 + (size_t)b * 4096;
        return (size_t)(b % 64 + 1) << 14; /* .. 1 MiB */
    }
}

static const size_t cache_sizes[] = {1,    7,    8,     12,    16,    24,     32,     40,     48,
                                     64,   72,   96,    100,   128,   192,    200,    256,    320,
                                     500,  512,  640,   1000,  1024,  2000,   2048,   3000,   4096,
                                     5000, 8192, 10000, 16384, 32768, 65536, 100000, 262144, 1 << 20};
#define NCACHE_SIZES (sizeof cache_sizes / sizeof cache_sizes[0])

/* ---- shadow ---- */
static uint64_t new_key(int t)
{
    return fz_mix(((uint64_t)t << 40) ^ ++T[t].seq ^ 0x5eed5eed5eedULL);
}

static void check_pattern(int t, const struct obj *o, const char *when)
{
    size_t bad = fz_find_bad(o->p, o->size, 0, o->size, o->key);
    if (bad != (size_t)-1)
        fz_fail("thread %d, %s: object %p (%zu bytes, %s) changed at offset %zu: 0x%02x, expected "
                "0x%02x (handed out twice, or written by qslab while allocated)",
                t, when, o->p, o->size, o->slot >= 0 ? slots[o->slot].name : "general", bad,
                ((uint8_t *)o->p)[bad], fz_pat(o->key, bad));
}

static void check_align(const void *p, size_t align, const char *what, size_t size)
{
    if ((uintptr_t)p & (align - 1))
        fz_fail("%s(%zu) returned %p, not aligned to %zu", what, size, p, align);
}

/* Room for one more object of `size` bytes in thread t's table? */
static bool room(int t, size_t size)
{
    struct thr *th = &T[t];
    if (th->nlive + th->nout >= MAX_LIVE) /* handed-off objects may come back */
        return false;
    return size > LARGE ? th->nlarge == 0 : th->bytes + size <= BUDGET;
}

static void account(struct thr *th, size_t size, int sign)
{
    if (size > LARGE)
        th->nlarge += sign;
    else
        th->bytes += sign > 0 ? size : -size;
}

static void note_kmalloc(int t, const void *p)
{
    size_t u = qslab_usable_size(p);
    struct thr *th = &T[t];
    for (int i = 0; i < th->nkm; i++)
        if (th->kmsize[i] == u)
            return;
    if (th->nkm < (int)(sizeof th->kmsize / sizeof th->kmsize[0]))
        th->kmsize[th->nkm++] = u;
}

static void add_obj(int t, void *p, size_t size, size_t align, int slot)
{
    struct thr *th = &T[t];
    struct obj *o = &th->live[th->nlive++];
    o->p = p;
    o->size = size;
    o->align = align;
    o->slot = (int8_t)slot;
    o->key = new_key(t);
    o->to = 0;
    account(th, size, 1);
    fz_fill(p, size, 0, o->key);
}

static void free_obj(int t, int i, unsigned method)
{
    struct thr *th = &T[t];
    struct obj o = th->live[i];
    check_pattern(t, &o, "free");
    th->live[i] = th->live[--th->nlive];
    account(th, o.size, -1);
    if (o.slot < 0) {
        qslab_free(o.p);
        return;
    }
    struct slot *s = &slots[o.slot];
    if (s->ctor >= 0) /* back to the constructed state */
        fz_fill(o.p, o.size, 0, CTOR_KEY(s->ctor));
    if (method & 1) /* qslab_free takes an object of any cache */
        qslab_free(o.p);
    else
        qslab_cache_free(s->c, o.p);
}

static struct slot *pick_slot(unsigned a)
{
    for (int k = 0; k < NSLOTS; k++) {
        struct slot *s = &slots[(a + (unsigned)k) % NSLOTS];
        if (s->c)
            return s;
    }
    return NULL;
}

static int slot_index(const struct slot *s)
{
    return (int)(s - slots);
}

/* ---- parallel operations (any thread) ---- */
static void cache_alloc(int t, struct slot *s, int node, bool by_node)
{
    if (!room(t, s->size))
        return;
    errno = 0;
    void *p = by_node ? qslab_cache_alloc_node(s->c, node) : qslab_cache_alloc(s->c);
    T[t].touched[slot_index(s)] = true;
    if (by_node && (node < QSLAB_NUMA_NO_NODE || node >= nodes)) {
        FZ_CHECK(!p && errno == EINVAL, "qslab_cache_alloc_node(%s, %d) of %d nodes: %p, errno %d",
                 s->name, node, nodes, p, errno);
        return;
    }
    if (!p)
        fz_fail("qslab_cache_alloc%s(%s) returned NULL (errno %d)", by_node ? "_node" : "",
                s->name, errno);
    check_align(p, s->align, s->name, s->size);
    if (s->ctor >= 0) {
        size_t bad = fz_find_bad(p, s->size, 0, s->size, CTOR_KEY(s->ctor));
        if (bad != (size_t)-1)
            fz_fail("cache %s: object %p not in its constructed state at offset %zu: 0x%02x, "
                    "expected 0x%02x",
                    s->name, p, bad, ((uint8_t *)p)[bad], fz_pat(CTOR_KEY(s->ctor), bad));
    }
    add_obj(t, p, s->size, s->align, slot_index(s));
}

static int node_variant(unsigned b)
{
    switch (b % 6) {
    case 0:
        return QSLAB_NUMA_NO_NODE;
    case 1:
        return nodes; /* none */
    case 2:
        return -2; /* none */
    default:
        return (int)(b / 6) % nodes;
    }
}

static void do_malloc(int t, size_t size, int node, bool by_node)
{
    if (!room(t, size))
        return;
    errno = 0;
    void *p = by_node ? qslab_malloc_node(size, node) : qslab_malloc(size);
    if (by_node && (node < QSLAB_NUMA_NO_NODE || node >= nodes)) {
        FZ_CHECK(!p && errno == EINVAL, "qslab_malloc_node(%zu, %d) of %d nodes: %p, errno %d",
                 size, node, nodes, p, errno);
        return;
    }
    if (!p)
        fz_fail("qslab_malloc%s(%zu) returned NULL (errno %d)", by_node ? "_node" : "", size, errno);
    check_align(p, 8, "qslab_malloc", size);
    FZ_CHECK(qslab_usable_size(p) >= size, "qslab_usable_size(%p) = %zu < %zu", p,
             qslab_usable_size(p), size);
    note_kmalloc(t, p);
    add_obj(t, p, size, 8, -1);
}

static void do_calloc(int t, size_t size, unsigned c)
{
    size_t n = c % 5;
    if (c >= 0xf8) { /* n * size overflows */
        n = SIZE_MAX / 2 + (c & 7);
        size = 2 + (size & 0xff);
        errno = 0;
        void *p = qslab_calloc(n, size);
        FZ_CHECK(!p && errno == ENOMEM, "qslab_calloc(%zu, %zu) (overflow): %p, errno %d", n, size,
                 p, errno);
        return;
    }
    if (n > 1 && size > (1u << 20))
        size >>= 4;
    if (!room(t, n * size))
        return;
    errno = 0;
    void *p = qslab_calloc(n, size);
    if (!p)
        fz_fail("qslab_calloc(%zu, %zu) returned NULL (errno %d)", n, size, errno);
    check_align(p, 8, "qslab_calloc", n * size);
    size_t bad = fz_find_nonzero(p, n * size);
    if (bad != (size_t)-1)
        fz_fail("qslab_calloc(%zu, %zu) = %p: byte %zu is 0x%02x, not 0", n, size, p, bad,
                ((uint8_t *)p)[bad]);
    note_kmalloc(t, p);
    add_obj(t, p, n * size, 8, -1);
}

static void do_realloc(int t, unsigned a, size_t size)
{
    struct thr *th = &T[t];
    int i = -1;
    for (int k = 0; k < th->nlive && i < 0; k++) { /* a general object */
        int j = (int)((a + (unsigned)k) % (unsigned)th->nlive);
        if (th->live[j].slot < 0)
            i = j;
    }
    if (i < 0) { /* realloc(NULL, size) is malloc */
        if (!room(t, size))
            return;
        void *p = qslab_realloc(NULL, size);
        if (!p)
            fz_fail("qslab_realloc(NULL, %zu) returned NULL", size);
        check_align(p, 8, "qslab_realloc", size);
        note_kmalloc(t, p);
        add_obj(t, p, size, 8, -1);
        return;
    }
    struct obj *o = &th->live[i];
    account(th, o->size, -1);
    if (!room(t, size)) {
        account(th, o->size, 1);
        return;
    }
    check_pattern(t, o, "realloc");
    errno = 0;
    void *p = qslab_realloc(o->p, size);
    if (size == 0) { /* frees */
        FZ_CHECK(!p, "qslab_realloc(%p, 0) returned %p, not NULL", o->p, p);
        th->live[i] = th->live[--th->nlive];
        return;
    }
    if (!p)
        fz_fail("qslab_realloc(%p, %zu) returned NULL (errno %d)", o->p, size, errno);
    check_align(p, 8, "qslab_realloc", size);
    size_t keep = o->size < size ? o->size : size;
    size_t bad = fz_find_bad(p, o->size, 0, keep, o->key);
    if (bad != (size_t)-1)
        fz_fail("qslab_realloc(%p, %zu) = %p (was %zu bytes): the prefix changed at offset %zu",
                o->p, size, p, o->size, bad);
    FZ_CHECK(qslab_usable_size(p) >= size, "qslab_usable_size(%p) = %zu < %zu after realloc", p,
             qslab_usable_size(p), size);
    note_kmalloc(t, p);
    o->p = p;
    o->size = size;
    o->align = 8;
    account(th, size, 1);
    o->key = new_key(t);
    fz_fill(p, size, 0, o->key);
}

static const size_t aligns[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192, 65536,
                                1 << 20, 3, 24, 4 << 20, 48};
#define NALIGNS (sizeof aligns / sizeof aligns[0])

static void do_aligned(int t, unsigned a, size_t size)
{
    size_t al = aligns[a % NALIGNS];
    if (al >= (1u << 20) && size > (1u << 16))
        size >>= 8;
    if (!room(t, size))
        return;
    errno = 0;
    void *p = qslab_aligned_alloc(al, size);
    if (al == 0 || (al & (al - 1))) {
        FZ_CHECK(!p && errno == EINVAL, "qslab_aligned_alloc(%zu, %zu): %p, errno %d", al, size, p,
                 errno);
        return;
    }
    if (!p)
        fz_fail("qslab_aligned_alloc(%zu, %zu) returned NULL (errno %d)", al, size, errno);
    check_align(p, al, "qslab_aligned_alloc", size);
    FZ_CHECK(qslab_usable_size(p) >= size, "qslab_usable_size(%p) = %zu < %zu (aligned_alloc)", p,
             qslab_usable_size(p), size);
    note_kmalloc(t, p);
    add_obj(t, p, size, al < 8 ? 8 : al, -1);
}

static void do_free(int t, unsigned idx, unsigned c)
{
    struct thr *th = &T[t];
    int n = c >= 0xf0 ? 64 << (c & 3) : 1 + (int)(c & 3);
    for (int k = 0; k < n && th->nlive; k++) {
        int i = (int)((idx + (unsigned)k * 7) % (unsigned)th->nlive);
        free_obj(t, i, c >> 2);
    }
}

/* Many objects of one cache at once, then freed in some order (or kept):
 * queues fill past hiwater and flush, slabs fill and empty. */
static void do_bulk(int t, struct slot *s, unsigned b, unsigned c)
{
    struct thr *th = &T[t];
    int want = 1 + (int)b * 4, first = th->nlive;
    for (int k = 0; k < want && room(t, s->size); k++)
        cache_alloc(t, s, QSLAB_NUMA_NO_NODE, false);
    int got = th->nlive - first;
    switch (c % 4) {
    case 0: /* LIFO */
        while (th->nlive > first)
            free_obj(t, th->nlive - 1, c >> 2);
        break;
    case 1: /* FIFO: free_obj moves the last into the hole */
        for (int k = 0; k < got; k++) {
            struct obj tmp = th->live[first];
            th->live[first] = th->live[th->nlive - 1];
            th->live[th->nlive - 1] = tmp;
            free_obj(t, th->nlive - 1, c >> 2);
        }
        break;
    case 2: /* every other one: partial slabs */
        for (int k = first; k < th->nlive; k++)
            free_obj(t, k, c >> 2);
        break;
    default: /* kept */
        break;
    }
}

static void do_free_slot(int t, unsigned a)
{
    struct thr *th = &T[t];
    int slot = (int)(a % (NSLOTS + 1)) - 1; /* -1: the general objects */
    for (int i = th->nlive; i-- > 0;)
        if (th->live[i].slot == slot)
            free_obj(t, i, a >> 4);
}

static void do_handoff(int t, unsigned idx, unsigned c)
{
    struct thr *th = &T[t];
    if (nthreads < 2)
        return;
    int to = (t + 1 + (int)(c >> 6) % (nthreads - 1)) % nthreads;
    int n = (c & 0x20) ? 16 << (c & 3) : 1 + (int)(c & 7);
    for (int k = 0; k < n && th->nlive; k++) {
        int i = (int)((idx + (unsigned)k) % (unsigned)th->nlive);
        struct obj o = th->live[i];
        th->live[i] = th->live[--th->nlive];
        account(th, o.size, -1);
        o.to = (uint8_t)to;
        th->out[th->nout++] = o;
    }
}

static void do_check(int t, unsigned idx, unsigned c)
{
    struct thr *th = &T[t];
    int n = c >= 0xc0 ? th->nlive : 1 + (int)(c & 15);
    for (int k = 0; k < n && k < th->nlive; k++)
        check_pattern(t, &th->live[(idx + (unsigned)k) % (unsigned)th->nlive], "check");
}

static void do_query(int t, unsigned idx)
{
    struct thr *th = &T[t];
    int here = 0;
    FZ_CHECK(qslab_object_node(&here) == -1, "qslab_object_node(stack) != -1");
    int cur = qslab_current_node();
    FZ_CHECK(cur >= 0 && cur < nodes, "qslab_current_node() = %d of %d", cur, nodes);
    if (!th->nlive)
        return;
    struct obj *o = &th->live[idx % (unsigned)th->nlive];
    int n = qslab_object_node(o->p);
    FZ_CHECK(n >= 0 && n < nodes, "qslab_object_node(%p) = %d of %d nodes", o->p, n, nodes);
    size_t u = qslab_usable_size(o->p);
    FZ_CHECK(u >= o->size, "qslab_usable_size(%p) = %zu < %zu", o->p, u, o->size);
    if (o->slot >= 0) {
        struct slot *s = &slots[o->slot];
        FZ_CHECK(strcmp(qslab_cache_name(s->c), s->name) == 0, "qslab_cache_name: %s, not %s",
                 qslab_cache_name(s->c), s->name);
        FZ_CHECK(qslab_cache_object_size(s->c) == s->size, "qslab_cache_object_size(%s) = %zu, not %zu",
                 s->name, qslab_cache_object_size(s->c), s->size);
        FZ_CHECK(qslab_cache_front(s->c) != NULL, "qslab_cache_front(%s) = NULL", s->name);
    }
}

static void run_op(int t, const struct rec *r)
{
    struct thr *th = &T[t];
    struct slot *s;
    switch (r->op) {
    case OP_ALLOC:
        if ((s = pick_slot(r->a)))
            for (int k = 0; k < 1 + (r->c & 3); k++)
                cache_alloc(t, s, QSLAB_NUMA_NO_NODE, false);
        else
            do_malloc(t, gen_size(r->b, r->c), 0, false);
        break;
    case OP_ALLOC_NODE:
        if ((s = pick_slot(r->a)))
            cache_alloc(t, s, node_variant(r->b), true);
        break;
    case OP_FREE:
        do_free(t, r->a | (unsigned)r->b << 8, r->c);
        break;
    case OP_MALLOC:
        for (int k = 0; k < 1 + (r->c & 3); k++)
            do_malloc(t, gen_size(r->a, r->b) + (size_t)(r->c >> 2) * (size_t)k, 0, false);
        break;
    case OP_CALLOC:
        do_calloc(t, gen_size(r->a, r->b), r->c);
        break;
    case OP_REALLOC:
        do_realloc(t, r->a, gen_size(r->b, r->c));
        break;
    case OP_ALIGNED:
        do_aligned(t, r->a, gen_size(r->b, r->c));
        break;
    case OP_MALLOC_NODE:
        do_malloc(t, gen_size(r->a, r->b), node_variant(r->c), true);
        break;
    case OP_SHRINK:
        if (r->a & 0x80) {
            if (th->nkm) {
                char name[32];
                snprintf(name, sizeof name, "kmalloc-%zu", th->kmsize[r->a % th->nkm]);
                qslab_cache *c = qslab_cache_find(name);
                if (c)
                    qslab_cache_shrink(c);
            }
        } else if ((s = pick_slot(r->a))) {
            qslab_cache_shrink(s->c);
            th->touched[slot_index(s)] = true;
        }
        break;
    case OP_TRIM:
        qslab_trim();
        break;
    case OP_HANDOFF:
        do_handoff(t, r->a | (unsigned)r->b << 8, r->c);
        break;
    case OP_CHECK:
        do_check(t, r->a | (unsigned)r->b << 8, r->c);
        break;
    case OP_QUERY:
        do_query(t, r->a | (unsigned)r->b << 8);
        break;
    case OP_BULK:
        if ((s = pick_slot(r->a)))
            do_bulk(t, s, r->b, r->c);
        break;
    case OP_FREE_SLOT:
        do_free_slot(t, r->a);
        break;
    default:
        break;
    }
}

static void run_thread(int t)
{
    struct thr *th = &T[t];
    if (th->cmd == CMD_FREE_ALL) {
        while (th->nlive)
            free_obj(t, th->nlive - 1, (unsigned)th->nlive);
        return;
    }
    for (int i = 0; i < th->nops; i++)
        run_op(t, &th->ops[i]);
    th->nops = 0;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (;;) {
        while (sem_wait(&T[t].go) != 0)
            ;
        if (T[t].cmd == CMD_EXIT)
            return NULL;
        run_thread(t);
        sem_post(&done);
    }
}

static void start_worker(int t)
{
    T[t].cmd = CMD_RUN;
    if (pthread_create(&T[t].tid, NULL, worker, (void *)(intptr_t)t) != 0)
        fz_fail("pthread_create failed");
    T[t].started = true;
}

/* Run every thread's records (or CMD_FREE_ALL), then hand objects over. */
static void run_round(int cmd)
{
    for (int t = 0; t < nthreads; t++)
        T[t].cmd = cmd;
    for (int t = 1; t < nthreads; t++)
        sem_post(&T[t].go);
    run_thread(0);
    for (int t = 1; t < nthreads; t++)
        while (sem_wait(&done) != 0)
            ;
    for (int t = 0; t < nthreads; t++) {
        struct thr *th = &T[t];
        for (int i = 0; i < th->nout; i++) {
            /* a receiver keeps room for its own hand-offs, which come back
             * to it when their receiver is full: the sender's room always
             * holds its own (room() counts them) */
            struct thr *to = &T[th->out[i].to];
            if (to->nlive + to->nout >= MAX_LIVE)
                to = th;
            to->live[to->nlive++] = th->out[i];
            account(to, th->out[i].size, 1);
        }
        th->nout = 0;
    }
}

/* ---- serial operations (the fuzzer's thread, nobody else in qslab) ---- */
static unsigned long shadow_count(int slot)
{
    unsigned long n = 0;
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < T[t].nlive; i++)
            n += T[t].live[i].slot == slot;
    return n;
}

static bool touched(int slot)
{
    for (int t = 0; t < NT; t++)
        if (T[t].touched[slot])
            return true;
    return false;
}

/* Objects of the debug twins <name>:<flags> that tune_debug made (their
 * allocations count in the twin: src/debug/twin.c) */
static unsigned long twins_active(const char *name)
{
    unsigned long n = 0;
    for (unsigned m = 1; m < 32; m++) { /* the flags tune_debug asks: FZPUQ */
        char tn[48];
        int k = snprintf(tn, sizeof tn, "%s:", name);
        for (int i = 0; i < 5; i++)
            if (m & (1u << i))
                tn[k++] = "FZPUQ"[i];
        tn[k] = '\0';
        qslab_cache *t = qslab_cache_find(tn);
        struct qslab_cache_stats st;
        if (t && qslab_cache_stats(t, &st) == 0)
            n += st.active_objs;
    }
    return n;
}

static void validate_slot(struct slot *s, const char *when)
{
    if (qslab_cache_validate(s->c) != 0)
        fz_fail("%s: qslab_cache_validate(%s) failed (problems above)", when, s->name);
    struct qslab_cache_stats st;
    FZ_CHECK(qslab_cache_stats(s->c, &st) == 0, "qslab_cache_stats(%s) failed", s->name);
    unsigned long want = shadow_count(slot_index(s)), twins = twins_active(s->name);
    if (st.active_objs + twins != want)
        fz_fail("%s: cache %s has %lu active objects (and %lu in its debug twins), the program "
                "holds %lu",
                when, s->name, st.active_objs, twins, want);
}

static void validate_all(const char *when)
{
    for (int i = 0; i < NSLOTS; i++)
        if (slots[i].c)
            validate_slot(&slots[i], when);
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < T[t].nkm; i++) {
            char name[32];
            snprintf(name, sizeof name, "kmalloc-%zu", T[t].kmsize[i]);
            qslab_cache *c = qslab_cache_find(name);
            if (c && qslab_cache_validate(c) != 0)
                fz_fail("%s: qslab_cache_validate(%s) failed (problems above)", when, name);
        }
}

static void op_create(const struct rec *r)
{
    int slot = -1;
    for (int k = 0; k < NSLOTS && slot < 0; k++)
        if (!slots[((r->c >> 5) + k) & (NSLOTS - 1)].c)
            slot = ((r->c >> 5) + k) & (NSLOTS - 1);
    if ((r->c & 0x1f) == 0x1f) { /* invalid arguments */
        static const struct {
            const char *name;
            size_t size, align;
            unsigned long flags;
        } bad[] = {{"fzbad", 0, 0, 0},         {"fzbad", 40, 3, 0},
                   {"fzbad", 40, 24, 0},       {"fzbad", 40, (size_t)4 << 20, 0},
                   {"fzbad", 40, 0, 1ul << 30}, {"fzbad", ((size_t)64 << 20) + 1, 0, 0},
                   {NULL, 40, 0, 0}};
        unsigned k = r->a % (sizeof bad / sizeof bad[0]);
        errno = 0;
        qslab_cache *c = qslab_cache_create(bad[k].name, bad[k].size, bad[k].align, bad[k].flags, NULL);
        FZ_CHECK(!c && errno == EINVAL,
                 "qslab_cache_create(%s, %zu, %zu, %#lx) with bad arguments: %p, errno %d",
                 bad[k].name ? bad[k].name : "NULL", bad[k].size, bad[k].align, bad[k].flags,
                 (void *)c, errno);
        return;
    }
    if (slot < 0)
        return;
    struct slot *s = &slots[slot];
    static const size_t align_of[8] = {0, 0, 8, 16, 32, 64, 256, 4096};
    size_t size, align = align_of[r->b & 7];
    int ctor = -1;
    if (r->c & 1) {
        ctor = (int)(r->a % NCTOR);
        size = ctor_sizes[ctor];
    } else {
        size = cache_sizes[r->a % NCACHE_SIZES];
        static const int delta[4] = {0, 1, -1, 8};
        size = (size_t)((long)size + delta[(r->c >> 1) & 3]);
        if (size == 0)
            size = 1;
    }
    unsigned long flags = 0;
    if (r->b & 8)
        flags |= QSLAB_HWCACHE_ALIGN;
    if (r->b & 0x80) { /* debug flags */
        if (r->b & 0x10)
            flags |= QSLAB_RED_ZONE;
        if (r->b & 0x20)
            flags |= QSLAB_POISON;
        if (r->b & 0x40)
            flags |= QSLAB_STORE_USER;
#ifdef QSLAB_CONSISTENCY_CHECKS
        if ((r->b & 0x70) == 0)
            flags |= QSLAB_CONSISTENCY_CHECKS;
#endif
    }
    snprintf(s->name, sizeof s->name, "fz%d", slot);
    errno = 0;
    qslab_cache *c = qslab_cache_create(s->name, size, align, flags, ctor >= 0 ? ctors[ctor] : NULL);
    if (!c)
        fz_fail("qslab_cache_create(%s, %zu, %zu, %#lx, %s) failed, errno %d", s->name, size, align,
                flags, ctor >= 0 ? "ctor" : "NULL", errno);
    FZ_CHECK(qslab_cache_find(s->name) == c, "qslab_cache_find(%s) is not the new cache", s->name);
    FZ_CHECK(strcmp(qslab_cache_name(c), s->name) == 0 && qslab_cache_object_size(c) == size,
             "qslab_cache_name/object_size of %s: %s, %zu", s->name, qslab_cache_name(c),
             qslab_cache_object_size(c));
    size_t want = align < 8 ? 8 : align;
    if (flags & QSLAB_HWCACHE_ALIGN) { /* the cache line, or half of it for small objects... */
        size_t a = 64;
        while (size <= a / 2 && a > 8)
            a /= 2;
        if (a > want)
            want = a;
    }
    s->c = c;
    s->size = size;
    s->align = want;
    s->flags = flags;
    s->ctor = ctor;
    for (int t = 0; t < NT; t++)
        T[t].touched[slot] = false;
}

static bool parse_num(const char *v, unsigned long *out)
{
    size_t n = strlen(v);
    if (n == 0 || n > 12)
        return false;
    unsigned long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (unsigned long)(v[i] - '0');
    }
    *out = x;
    return true;
}

static const char *const special_values[] = {
    "0",         "1",          "2",          "3",             "4",  "5",       "7",    "8",
    "14",        "15",         "63",         "64",            "65", "1000",    "32768", "32769",
    "1048576",   "1048577",    "3600000",    "3600001",       "67108864", "67108865",
    "4294967295", "4294967296", "999999999999", "9999999999999", "",   "-1",      "+1",   "x",
    "12x",       " 3",         "slqb",       "slub",          "slab", "slob",    "debug", "SLUB"};
#define NSPECIAL (sizeof special_values / sizeof special_values[0])

static int front_number(const char *v)
{
    static const char *const names[] = {"slqb", "slob", "slub", "slab"}; /* tune_get's numbers */
    for (int i = 0; i < 4; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    unsigned long x;
    if (parse_num(v, &x) && x < 4)
        return (int)x;
    return -1;
}

/* The tunable `debug` (src/debug/twin.c): letters of FZPUQ from c's low bits
 * ("-" for none; Q is bit 7 of the tunable's value), or a bad letter (c >= 0xf0).  A cache in use gets a debug twin
 * <cache>:<flags> for its new objects, which the rest of the input then
 * allocates, frees and validates through the cache; a cache made with
 * debug flags keeps them (refused unless the same); "*" and unknown caches
 * are refused. */
static void tune_debug(const char *cache, struct slot *s, int km, unsigned c)
{
    char v[8];
    int k = 0;
    unsigned long bits = 0;
    bool bad = c >= 0xf0;
    static const unsigned long value[5] = {1, 2, 4, 8, 128}; /* QS_DBG_F .. U, Q */
    for (int i = 0; i < 5 && !bad; i++)
        if (c & (1u << i)) {
            v[k++] = "FZPUQ"[i];
            bits |= value[i];
        }
    if (bad)
        v[k++] = 'X';
    if (!k)
        v[k++] = '-';
    v[k] = '\0';
    qslab_cache *cc = s ? s->c : km >= 0 ? qslab_cache_find(cache) : NULL;
    unsigned long before = 0, after = 0;
    if (cc)
        FZ_CHECK(qslab_tune_get(cache, "debug", &before) == 0, "qslab_tune_get(%s, debug) failed",
                 cache);
    if (km >= 0)
        km_dirty[km] = true;
    fz_quiet_begin();
    errno = 0;
    int ret = qslab_tune(cache, "debug", v);
    int err = errno;
    fz_quiet_end();
    FZ_CHECK(ret == 0 || (ret == -1 && (err == EINVAL || err == ENOMEM)),
             "qslab_tune(%s, debug, \"%s\") = %d, errno %d", cache, v, ret, err);
    if (!cc || bad) {
        FZ_CHECK(ret == -1 && err == EINVAL, "qslab_tune(%s, debug, \"%s\"): accepted", cache, v);
        return;
    }
    FZ_CHECK(qslab_tune_get(cache, "debug", &after) == 0, "qslab_tune_get(%s, debug) failed", cache);
    if (strcmp(qslab_cache_front(cc), "debug") == 0) { /* made with debug flags */
        FZ_CHECK((ret == 0) == (bits == before) && after == before,
                 "qslab_tune(%s, debug, \"%s\") on a debug cache (%lu): %d, now %lu", cache, v,
                 before, ret, after);
        return;
    }
    if (ret == 0)
        FZ_CHECK(after == bits, "qslab_tune(%s, debug, \"%s\") accepted: reads back %lu", cache, v,
                 after);
    else
        FZ_CHECK(err == ENOMEM && after == before, "qslab_tune(%s, debug, \"%s\") refused (%d)",
                 cache, v, err);
}

/* The process's owner budget (src/front/slqb/budget.c): only "*" takes it, 16 KiB to
 * 1 GiB; every cache reads it back.  Lowering it while the workers hold
 * full queues makes their next misses shed the excess. */
static void tune_budget(const char *cache, bool known, const char *value)
{
    unsigned long before = 0, after = 0, v = 0;
    FZ_CHECK(qslab_tune_get("*", "owner_budget", &before) == 0,
             "qslab_tune_get(*, owner_budget) failed");
    budget_dirty = true;
    fz_quiet_begin();
    errno = 0;
    int ret = qslab_tune(cache, "owner_budget", value);
    int err = errno;
    fz_quiet_end();
    bool ok = strcmp(cache, "*") == 0 && parse_num(value, &v) && v >= (16ul << 10) &&
              v <= (1ul << 30);
    FZ_CHECK(ok ? ret == 0 : ret == -1 && err == EINVAL,
             "qslab_tune(%s, owner_budget, \"%s\") = %d, errno %d", cache, value, ret, err);
    FZ_CHECK(qslab_tune_get("*", "owner_budget", &after) == 0,
             "qslab_tune_get(*, owner_budget) failed");
    FZ_CHECK(after == (ok ? v : before), "qslab_tune(%s, owner_budget, \"%s\"): reads back %lu, "
             "was %lu", cache, value, after, before);
    if (known) {
        unsigned long mine = 0;
        FZ_CHECK(qslab_tune_get(cache, "owner_budget", &mine) == 0 && mine == after,
                 "qslab_tune_get(%s, owner_budget): %lu, \"*\" has %lu", cache, mine, after);
    }
}

/* A cache whose front end keeps free bits and whose objects are under 128
 * bytes: its orders stop where a slab would hold more than 512 of them
 * (core/slab.h, free bits) */
static bool fine_grained(qslab_cache *c)
{
    struct qslab_cache_stats st;
    if (!c || qslab_cache_stats(c, &st) != 0)
        return false;
    const char *f = qslab_cache_front(c);
    return st.slot_size < 128 && strcmp(f, "slub") != 0 && strcmp(f, "slab") != 0;
}

static void op_tune(const struct rec *r)
{
    char value[32];
    const char *cache;
    struct slot *s = NULL;
    int km = -1;
    unsigned target = r->a % 16;
    if (target < 8) {
        s = pick_slot(target);
        if (!s)
            return;
        cache = s->name;
    } else if (target < 14) {
        cache = km_tune_names[target - 8];
        km = km_index(cache);
        if (km < 0)
            return;
    } else if (target == 14) {
        cache = "*";
    } else {
        cache = "no-such-cache";
    }
    int attr = (int)(r->b % A_NR);
    const char *an = attr_names[attr];
    if (attr == A_DEBUG) {
        tune_debug(cache, s, km, r->c);
        return;
    }
    if (r->c < 128)
        snprintf(value, sizeof value, "%u", attr == A_ORDER ? r->c % 8 : r->c);
    else
        snprintf(value, sizeof value, "%s", special_values[(r->c - 128) % NSPECIAL]);
    if (attr == A_BUDGET) {
        tune_budget(cache, s || km >= 0, value);
        return;
    }

    unsigned long before = 0, after = 0, hiwater = 0, freebatch = 0, limit = 0, batch = 0;
    bool named = s || km >= 0;
    if (named && attr <= A_FRONT) {
        FZ_CHECK(qslab_tune_get(cache, an, &before) == 0, "qslab_tune_get(%s, %s) failed", cache, an);
        qslab_tune_get(cache, "hiwater", &hiwater);
        qslab_tune_get(cache, "freebatch", &freebatch);
        qslab_tune_get(cache, "limit", &limit);
        qslab_tune_get(cache, "batchcount", &batch);
    }
    if (target == 14)
        for (int i = 0; i < nkm; i++)
            km_dirty[i] = true;
    if (km >= 0)
        km_dirty[km] = true;
    fz_quiet_begin();
    errno = 0;
    int ret = qslab_tune(cache, an, value);
    int err = errno;
    fz_quiet_end();
    FZ_CHECK(ret == 0 || (ret == -1 && err == EINVAL), "qslab_tune(%s, %s, \"%s\") = %d, errno %d",
             cache, an, value, ret, err);
    if (attr > A_FRONT || target == 15) {
        FZ_CHECK(ret == -1, "qslab_tune(%s, \"%s\", \"%s\"): accepted", cache, an, value);
        return;
    }
    if (!named) /* "*": stops at the first cache that refuses */
        return;
    FZ_CHECK(qslab_tune_get(cache, an, &after) == 0, "qslab_tune_get(%s, %s) failed", cache, an);
    if (ret != 0)
        FZ_CHECK(after == before, "qslab_tune(%s, %s, \"%s\") refused but changed %lu -> %lu",
                 cache, an, value, before, after);
    if (attr == A_FRONT) {
        int f = front_number(value);
        if (ret == 0)
            FZ_CHECK(f >= 0 && after == (unsigned long)f,
                     "qslab_tune(%s, front, \"%s\") accepted: front now %lu", cache, value, after);
        /* a debug cache (flags, or QSLAB_DEBUG) keeps the debug front end */
        bool debug = s && ((s->flags & ~QSLAB_HWCACHE_ALIGN) ||
                           strcmp(qslab_cache_front(s->c), "debug") == 0);
        if (s && !debug && !touched(slot_index(s)) && f >= 0)
            FZ_CHECK(ret == 0, "qslab_tune(%s, front, \"%s\") refused before the first allocation",
                     cache, value);
        return;
    }
    unsigned long v = 0, lo = 0, hi = attr_max[attr];
    bool num = parse_num(value, &v);
    switch (attr) {
    case A_HIWATER:
        lo = freebatch;
        hi = 1ul << 20;
        break;
    case A_FREEBATCH:
        lo = 1;
        hi = hiwater;
        break;
    case A_LIMIT:
        lo = batch;
        break;
    case A_BATCH:
        lo = 1;
        hi = limit;
        break;
    default:
        break;
    }
    if (ret == 0)
        FZ_CHECK(num && after == v, "qslab_tune(%s, %s, \"%s\") accepted: reads back %lu", cache, an,
                 value, after);
    if (!num || v > hi)
        FZ_CHECK(ret == -1, "qslab_tune(%s, %s, \"%s\") accepted, out of 0..%lu", cache, an, value,
                 hi);
    else if (attr != A_ORDER && v >= lo) /* order's lower bound is the cache's own */
        FZ_CHECK(ret == 0, "qslab_tune(%s, %s, \"%s\") refused, in %lu..%lu", cache, an, value, lo,
                 hi);
    else if (attr == A_ORDER && v == 14 && !fine_grained(s ? s->c : qslab_cache_find(cache)))
        FZ_CHECK(ret == 0, "qslab_tune(%s, order, 14) refused", cache);
}

static void op_destroy(const struct rec *r)
{
    if (r->a & 0x10) { /* a kmalloc cache cannot be destroyed */
        qslab_cache *c = qslab_cache_find(km_name[r->b % nkm]);
        if (!c)
            return;
        fz_quiet_begin();
        errno = 0;
        int ret = qslab_cache_destroy(c);
        int err = errno;
        fz_quiet_end();
        FZ_CHECK(ret == -1 && err == EINVAL, "qslab_cache_destroy(%s) = %d, errno %d",
                 km_name[r->b % nkm], ret, err);
        return;
    }
    struct slot *s = pick_slot(r->a);
    if (!s)
        return;
    unsigned long live = shadow_count(slot_index(s));
    if (live) {
        fz_quiet_begin();
        errno = 0;
        int ret = qslab_cache_destroy(s->c);
        int err = errno;
        fz_quiet_end();
        FZ_CHECK(ret == -1 && err == EBUSY,
                 "qslab_cache_destroy(%s) with %lu objects allocated: %d, errno %d", s->name, live,
                 ret, err);
        T[0].touched[slot_index(s)] = true;
        return;
    }
    validate_slot(s, "destroy");
    if (qslab_cache_destroy(s->c) != 0)
        fz_fail("qslab_cache_destroy(%s) of an empty cache failed, errno %d", s->name, errno);
    FZ_CHECK(qslab_cache_find(s->name) == NULL, "cache %s still found after destroy", s->name);
    s->c = NULL;
}

static void op_respawn(const struct rec *r)
{
    int t = 1 + r->a % (NT - 1);
    if (!T[t].started)
        return;
    T[t].cmd = CMD_EXIT;
    sem_post(&T[t].go);
    pthread_join(T[t].tid, NULL);
    start_worker(t);
}

static void op_report(const struct rec *r)
{
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if ((r->a & 7) == 0) /* every cache, every owner: slow */
        qslab_stats_report(devnull);
    else if ((r->a & 7) == 1)
        qslab_slabinfo(devnull);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    FZ_CHECK((oi.kind == QSLAB_OWNER_CPU || oi.kind == QSLAB_OWNER_THREAD) && oi.why,
             "qslab_owner_info: kind %d", oi.kind);
}

static void run_serial(const struct rec *r)
{
    switch (r->op) {
    case OP_CREATE:
        op_create(r);
        break;
    case OP_TUNE:
        op_tune(r);
        break;
    case OP_DESTROY:
        op_destroy(r);
        break;
    case OP_VALIDATE:
        validate_all("VALIDATE");
        break;
    case OP_RESPAWN:
        op_respawn(r);
        break;
    case OP_REPORT:
        op_report(r);
        break;
    }
}

static void init_once(void)
{
    static bool done_init;
    if (done_init)
        return;
    done_init = true;
    skip_known = getenv("FUZZ_SKIP_KNOWN") && strcmp(getenv("FUZZ_SKIP_KNOWN"), "0") != 0;
    nodes = qslab_num_nodes();
    FZ_CHECK(nodes >= 1, "qslab_num_nodes() = %d", nodes);
    km_init();
    sem_init(&done, 0, 0);
    for (int t = 0; t < NT; t++)
        sem_init(&T[t].go, 0, 0);
    struct qslab_large_stats ls;
    qslab_large_stats(&ls);
    large_live0 = ls.live;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    struct fz_in in = {data, size, 0};
    nthreads = 1 + (int)(fz_u8(&in) % NT);
    for (int t = 1; t < nthreads; t++)
        if (!T[t].started)
            start_worker(t);
    for (int t = 0; t < NT; t++) {
        T[t].seq = 0;
        T[t].nkm = 0;
        T[t].nops = 0;
    }

    while (fz_more(&in)) {
        struct rec r;
        r.op = (uint8_t)fz_u8(&in);
        r.a = (uint8_t)fz_u8(&in);
        r.b = (uint8_t)fz_u8(&in);
        r.c = (uint8_t)fz_u8(&in);
        int t = (r.op >> 5) % nthreads;
        r.op = (uint8_t)((r.op & 31) % OP_NR);
        if (op_serial(r.op)) {
            run_round(CMD_RUN);
            run_serial(&r);
            continue;
        }
        T[t].ops[T[t].nops++] = r;
        if (T[t].nops == ROUND)
            run_round(CMD_RUN);
    }
    run_round(CMD_RUN);

    /* everything back: objects, caches, tunables */
    run_round(CMD_FREE_ALL);
    validate_all("end of input");
    for (int i = 0; i < NSLOTS; i++) {
        struct slot *s = &slots[i];
        if (!s->c)
            continue;
        if (qslab_cache_destroy(s->c) != 0)
            fz_fail("end of input: qslab_cache_destroy(%s) failed, errno %d", s->name, errno);
        s->c = NULL;
    }
    km_restore();
    struct qslab_large_stats ls;
    qslab_large_stats(&ls);
    FZ_CHECK(ls.live == large_live0, "end of input: %lu large blocks live, %lu at start", ls.live,
             large_live0);
    return 0;
}
