/*
 * Fault injection (qslab_fault_inject, QSLAB_FAIL_NTH): when the OS refuses
 * memory, every allocation path returns NULL with errno ENOMEM (or does what
 * qslab.h says it does without the memory), changes none of the counters,
 * corrupts nothing (qslab_cache_validate), and works again afterwards; when
 * the OS refuses a give-back (madvise, munmap), the memory is kept and the
 * refusal counted on the "Pages:" line of qslab_stats_report.
 *
 * Each part runs in a fresh process (the test re-executes itself), pinned to
 * one CPU, with the purger off (QSLAB_PURGE=0: nothing gives memory back
 * behind the test's back), so that what needs memory from the OS is known:
 * a path is driven, with the next map request armed to fail (nth 1) right
 * before each call, until a call makes a request; that call is the one
 * under test.  Nothing depends on timing.  FI_VERBOSE=1 says, per part,
 * which call failed.
 *
 * Parts: first_alloc (a process's first allocation), cache_alloc,
 * alloc_node (QSLAB_FAKE_NUMA=2: own and other node), cache_create,
 * malloc_small, malloc_large (and QSLAB_FAULT_EVERY), calloc, realloc,
 * aligned, queue (SLQB's slot arrays, SLAB's array), decommit, unmap (a
 * chunk, a large block), api, and QSLAB_FAIL_NTH (env_*).
 */
#include <qslab.h>

#include "../front.h"
#include "../testutil.h"

#define MIB ((size_t)1 << 20)

/* ---- helpers ---------------------------------------------------------------- */

struct snap {
    unsigned long alloc, free, active, slabs, objs;
};

static struct snap snap_of(qslab_cache *c)
{
    struct qslab_cache_stats st;
    struct snap s = {0, 0, 0, 0, 0};
    if (c && qslab_cache_stats(c, &st) == 0)
        s = (struct snap){st.alloc, st.free, st.active_objs, st.num_slabs, st.num_objs};
    return s;
}

#define CHECK_SAME(what, a, b)                                                                     \
    CHECKF((a).alloc == (b).alloc && (a).free == (b).free && (a).active == (b).active &&           \
               (a).slabs == (b).slabs && (a).objs == (b).objs,                                     \
           "%s: counters changed by the failed call: alloc %lu->%lu free %lu->%lu active "         \
           "%lu->%lu slabs %lu->%lu objs %lu->%lu",                                                \
           what, (a).alloc, (b).alloc, (a).free, (b).free, (a).active, (b).active, (a).slabs,      \
           (b).slabs, (a).objs, (b).objs)

static int large_same(const struct qslab_large_stats *a, const struct qslab_large_stats *b)
{
    return a->alloc == b->alloc && a->free == b->free && a->live == b->live &&
           a->live_bytes == b->live_bytes;
}

static unsigned long injected(void)
{
    return qslab_fault_injected(QSLAB_FAULT_MAP);
}

static unsigned long injected_release(void)
{
    return qslab_fault_injected(QSLAB_FAULT_RELEASE);
}

/* Arm the next map request to fail, call op, disarm.  1 if the call made a
 * request (the injection fired); *out and *err: its result and errno. */
typedef void *(*op_fn)(void *arg);
static int armed_call(op_fn op, void *arg, void **out, int *err)
{
    unsigned long before = injected();
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_MAP) == 0);
    errno = 0;
    *out = op(arg);
    *err = errno;
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_MAP) == 0);
    return injected() != before;
}

/*
 * Call op (armed) until a call needs memory from the OS: that call must
 * return NULL with ENOMEM, leave cache c's counters as they were, and leave
 * c valid.  A call whose request failed but that still succeeded (a queue's
 * metadata: the allocation goes on without it) must have counted exactly
 * one allocation.  What the calls returned is kept in keep[] (freed by the
 * caller).  Returns how many; *hit tells whether the failing call came.
 */
static size_t alloc_until_fail(const char *what, qslab_cache *c, op_fn op, void *arg, void **keep,
                               size_t max, int *hit)
{
    size_t n = 0;
    unsigned long absorbed = 0;
    *hit = 0;
    /* the first call unarmed: the caller's queue and owner are made (a
     * failure there is absorbed, and tried again at every call) */
    if (!CHECKF((keep[n] = op(arg)) != NULL, "%s: the first call failed, errno %d", what, errno))
        return n;
    n++;
    for (size_t i = 1; i < max; i++) {
        struct snap a = snap_of(c);
        void *p;
        int e;
        if (!armed_call(op, arg, &p, &e)) {
            if (!CHECKF(p != NULL, "%s: call %zu returned NULL (errno %d) without an injected failure",
                        what, i, e))
                return n;
            keep[n++] = p;
            continue;
        }
        struct snap b = snap_of(c);
        if (p) { /* absorbed (metadata): one allocation, counted once */
            keep[n++] = p;
            absorbed++;
            CHECKF(b.alloc == a.alloc + 1 && b.active == a.active + 1,
                   "%s: absorbed failure at call %zu: alloc %lu->%lu active %lu->%lu", what, i,
                   a.alloc, b.alloc, a.active, b.active);
            CHECKF(absorbed < 64, "%s: %lu failed requests absorbed", what, absorbed);
            if (absorbed >= 64)
                return n;
            continue;
        }
        CHECKF(e == ENOMEM, "%s: failed call %zu: errno %d, expected ENOMEM", what, i, e);
        CHECK_SAME(what, a, b);
        CHECKF(qslab_cache_validate(c) == 0, "%s: cache invalid after the failed call", what);
        *hit = 1;
        if (getenv("FI_VERBOSE"))
            fprintf(stderr, "%s: call %zu failed (%lu absorbed before)\n", what, i, absorbed);
        return n;
    }
    tu_fail("%s: no call needed memory from the OS in %zu calls", what, max);
    return n;
}

/* The "Pages:" line of the statistics report: 1 and the counts if there is
 * one, 0 (counts zero) if not. */
struct pages {
    unsigned long decommit, unmap;
    size_t decommit_bytes, unmap_bytes;
};
static int pages_line(struct pages *pg)
{
    memset(pg, 0, sizeof(*pg));
    static char text[1 << 16];
    if (!tu_text_of(qslab_stats_report, text, sizeof text))
        return 0;
    const char *l = strstr(text, "\nPages: decommit failed ");
    if (!l)
        return 0;
    int n = sscanf(l + 1,
                   "Pages: decommit failed %lu (%zu bytes kept resident), unmap failed %lu (%zu "
                   "bytes kept mapped)",
                   &pg->decommit, &pg->decommit_bytes, &pg->unmap, &pg->unmap_bytes);
    CHECKF(n == 4, "the Pages line does not parse: \"%.120s\"", l + 1);
    return n == 4;
}

static void free_all(void **keep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        qslab_free(keep[i]);
}

/* Objects of `size` that fill a 4 MiB chunk, and some: the calls after
 * which a path has surely needed a new chunk. */
static size_t enough(size_t size)
{
    return ((size_t)16 << 20) / size + 1000;
}

/* ---- allocation paths --------------------------------------------------------- */

static void *op_cache_alloc(void *c)
{
    return qslab_cache_alloc(c);
}

static int child_cache_alloc(void)
{
    qslab_cache *c = qslab_cache_create("fi-alloc", 200, 0, 0, NULL);
    CHECK(c != NULL);
    void **keep = calloc(enough(200), sizeof(void *));
    int hit;
    size_t n = alloc_until_fail("qslab_cache_alloc", c, op_cache_alloc, c, keep, enough(200), &hit);
    CHECK(hit);
    void *p = qslab_cache_alloc(c); /* works again */
    CHECK(p != NULL);
    struct snap s = snap_of(c);
    CHECKF(s.active == n + 1, "active %lu, expected %zu", s.active, n + 1);
    qslab_cache_free(c, p);
    for (size_t i = 0; i < n; i++)
        qslab_cache_free(c, keep[i]);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(snap_of(c).active == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    free(keep);
    return tu_done();
}

struct node_arg {
    qslab_cache *c;
    int node;
};

static void *op_alloc_node(void *arg)
{
    struct node_arg *a = arg;
    return qslab_cache_alloc_node(a->c, a->node);
}

/* qslab_cache_alloc_node for the caller's node, and (QSLAB_FAKE_NUMA=2) for
 * the other one: its node list, its own pool of chunks. */
static int child_alloc_node(void)
{
    int nodes = qslab_num_nodes(), here = qslab_current_node();
    for (int k = 0; k < (nodes > 1 ? 2 : 1); k++) {
        struct node_arg a = {qslab_cache_create(k ? "fi-node-other" : "fi-node-here", 300, 0, 0, NULL),
                             k ? (here + 1) % nodes : here};
        CHECK(a.c != NULL);
        void **keep = calloc(enough(300), sizeof(void *));
        int hit;
        char what[64];
        snprintf(what, sizeof what, "qslab_cache_alloc_node(%s node %d)", k ? "other" : "own", a.node);
        size_t n = alloc_until_fail(what, a.c, op_alloc_node, &a, keep, enough(300), &hit);
        CHECK(hit);
        void *p = qslab_cache_alloc_node(a.c, a.node);
        CHECK(p != NULL && qslab_object_node(p) == a.node);
        qslab_cache_free(a.c, p);
        for (size_t i = 0; i < n; i++)
            qslab_cache_free(a.c, keep[i]);
        CHECK(qslab_cache_validate(a.c) == 0);
        CHECK(snap_of(a.c).active == 0);
        CHECK(qslab_cache_destroy(a.c) == 0);
        free(keep);
    }
    return tu_done();
}

/* qslab_cache_create: its own structures come from qslab's metadata
 * allocator, which maps a block when its current one is used up.  Create
 * caches (armed) until a create needs a block: it must fail with ENOMEM and
 * leave no trace (no cache of that name); then it works. */
static int child_cache_create(void)
{
    enum { MAX = 20000 };
    static qslab_cache *made[MAX];
    int n = 0, hit = 0;
    char name[32];
    for (; n < MAX && !hit; n++) {
        snprintf(name, sizeof name, "fi-cc-%d", n);
        unsigned long before = injected();
        CHECK(qslab_fault_inject(1, 0) == 0);
        errno = 0;
        qslab_cache *c = qslab_cache_create(name, 64 + (size_t)n % 512, 0, 0, NULL);
        int e = errno;
        qslab_fault_inject(0, 0);
        if (injected() == before) {
            if (!CHECKF(c != NULL, "create %s: NULL (errno %d) without an injected failure", name, e))
                break;
            made[n] = c;
            continue;
        }
        hit = 1;
        if (c) { /* absorbed: a cache that works */
            made[n] = c;
            hit = 0;
            continue;
        }
        CHECKF(e == ENOMEM, "create %s: errno %d, expected ENOMEM", name, e);
        CHECKF(qslab_cache_find(name) == NULL, "a failed create left cache %s behind", name);
        made[n] = NULL;
    }
    CHECKF(hit, "no create needed memory from the OS in %d creates", n);
    if (getenv("FI_VERBOSE"))
        fprintf(stderr, "qslab_cache_create: create %d failed\n", n - 1);
    /* the name is free: created now */
    qslab_cache *c = qslab_cache_create(name, 64, 0, 0, NULL);
    CHECK(c != NULL && qslab_cache_find(name) == c);
    void *p = c ? qslab_cache_alloc(c) : NULL;
    CHECK(p != NULL);
    qslab_cache_free(c, p);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    for (int i = 0; i < n; i++)
        if (made[i]) {
            CHECK(qslab_cache_validate(made[i]) == 0);
            CHECK(qslab_cache_destroy(made[i]) == 0);
        }
    return tu_done();
}

static void *op_malloc(void *size)
{
    return qslab_malloc(*(size_t *)size);
}

/* qslab_malloc of a small size: its class needs a new slab */
static int child_malloc_small(void)
{
    size_t size = 500;
    qslab_cache *k = qslab_cache_find("kmalloc-512");
    CHECK(k != NULL);
    void **keep = calloc(enough(size), sizeof(void *));
    int hit;
    size_t n = alloc_until_fail("qslab_malloc(500)", k, op_malloc, &size, keep, enough(size), &hit);
    CHECK(hit);
    void *p = qslab_malloc(size);
    CHECK(p != NULL);
    qslab_free(p);
    free_all(keep, n);
    CHECK(qslab_cache_validate(k) == 0);
    CHECK(snap_of(k).active == 0);
    free(keep);
    return tu_done();
}

/* qslab_malloc over 32 MiB (mapped directly), qslab_calloc small and large:
 * a large block is a request of its own every time */
static int child_malloc_large(void)
{
    struct qslab_large_stats a, b;
    size_t sizes[] = {40 * MIB, 33 * MIB, 100 * MIB};
    for (int i = 0; i < 3; i++) {
        qslab_large_stats(&a);
        void *p;
        int e;
        CHECK(armed_call(op_malloc, &sizes[i], &p, &e));
        qslab_large_stats(&b);
        CHECKF(p == NULL && e == ENOMEM, "qslab_malloc(%zu) = %p errno %d", sizes[i], p, e);
        CHECKF(large_same(&a, &b), "large stats changed: alloc %lu->%lu live %lu->%lu bytes %zu->%zu",
               a.alloc, b.alloc, a.live, b.live, a.live_bytes, b.live_bytes);
        p = qslab_malloc(sizes[i]); /* works again */
        CHECK(p != NULL);
        if (p)
            memset(p, 1, 4096);
        qslab_free(p);
    }
    /* QSLAB_FAULT_EVERY: every 2nd request, from the arming on */
    CHECK(qslab_fault_inject(2, QSLAB_FAULT_EVERY) == 0);
    for (int i = 1; i <= 6; i++) {
        errno = 0;
        void *p = qslab_malloc(40 * MIB);
        CHECKF((i % 2 == 0) == (p == NULL) && (p || errno == ENOMEM), "every 2nd: call %d = %p errno %d",
               i, p, errno);
        qslab_free(p);
    }
    CHECK(qslab_fault_inject(0, 0) == 0);
    void *p = qslab_malloc(40 * MIB);
    CHECK(p != NULL);
    qslab_free(p);
    return tu_done();
}

static void *op_calloc(void *arg)
{
    size_t *ns = arg;
    return qslab_calloc(ns[0], ns[1]);
}

static int child_calloc(void)
{
    size_t small[2] = {10, 50}; /* 500 bytes: kmalloc-512 */
    qslab_cache *k = qslab_cache_find("kmalloc-512");
    void **keep = calloc(enough(500), sizeof(void *));
    int hit;
    size_t n = alloc_until_fail("qslab_calloc(10, 50)", k, op_calloc, small, keep, enough(500), &hit);
    CHECK(hit);
    char *p = qslab_calloc(10, 50);
    CHECK(p != NULL);
    int zero = 1;
    for (int i = 0; p && i < 500; i++)
        zero &= p[i] == 0;
    CHECK(zero);
    qslab_free(p);
    free_all(keep, n);
    CHECK(qslab_cache_validate(k) == 0);
    free(keep);

    size_t large[2] = {1, 40 * MIB};
    struct qslab_large_stats a, b;
    qslab_large_stats(&a);
    void *q;
    int e;
    CHECK(armed_call(op_calloc, large, (void **)&q, &e));
    qslab_large_stats(&b);
    CHECKF(q == NULL && e == ENOMEM, "qslab_calloc(1, 40 MiB) = %p errno %d", q, e);
    CHECK(large_same(&a, &b));
    q = qslab_calloc(4, 10 * MIB);
    CHECK(q != NULL && ((char *)q)[40 * MIB - 1] == 0);
    qslab_free(q);
    return tu_done();
}

static void fill(void *p, size_t n, unsigned char v)
{
    memset(p, v, n);
}

static int same(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

static void *op_realloc(void *arg)
{
    void **a = arg;
    return qslab_realloc(a[0], *(size_t *)a[1]);
}

/* qslab_realloc growing: slab to slab (a new class's slab), slab to large,
 * large to large (mremap: in place, or a new range and a move); shrinking a
 * large block whose tail the kernel will not unmap.  A failed realloc
 * leaves the block as it was. */
static int child_realloc(void)
{
    qslab_cache *k128 = qslab_cache_find("kmalloc-128"), *k3k = qslab_cache_find("kmalloc-3072");
    size_t to = 3000, max = enough(3072);
    void **keep = calloc(max, sizeof(void *));
    size_t n = 0;
    int hit = 0;
    for (size_t i = 0; i < max && !hit; i++) {
        void *src = qslab_malloc(120); /* kmalloc-128 */
        CHECK(src != NULL);
        fill(src, 100, 0x5a);
        struct snap a1 = snap_of(k128), a2 = snap_of(k3k);
        void *args[2] = {src, &to}, *q;
        int e;
        if (!armed_call(op_realloc, args, &q, &e)) {
            CHECKF(q != NULL && same(q, 100, 0x5a), "realloc %zu: %p", i, q);
            keep[n++] = q;
            continue;
        }
        struct snap b1 = snap_of(k128), b2 = snap_of(k3k);
        if (q) { /* absorbed: metadata */
            keep[n++] = q;
            continue;
        }
        hit = 1;
        CHECKF(e == ENOMEM, "realloc(100 -> 3000): errno %d", e);
        CHECK_SAME("realloc kmalloc-128", a1, b1);
        CHECK_SAME("realloc kmalloc-3072", a2, b2);
        CHECK(same(src, 100, 0x5a) && qslab_usable_size(src) >= 100);
        CHECK(qslab_cache_validate(k128) == 0 && qslab_cache_validate(k3k) == 0);
        void *q2 = qslab_realloc(src, to); /* works again */
        CHECK(q2 != NULL && same(q2, 100, 0x5a));
        qslab_free(q2);
    }
    CHECK(hit);
    free_all(keep, n);
    free(keep);
    CHECK(snap_of(k128).active == 0 && snap_of(k3k).active == 0);

    /* slab to large: the new block's mapping fails */
    struct qslab_large_stats a, b;
    void *src = qslab_malloc(1000);
    fill(src, 1000, 0x33);
    size_t big = 40 * MIB;
    void *args[2] = {src, &big}, *q;
    int e;
    qslab_large_stats(&a);
    CHECK(armed_call(op_realloc, args, &q, &e));
    qslab_large_stats(&b);
    CHECKF(q == NULL && e == ENOMEM, "realloc(1000 -> 40 MiB) = %p errno %d", q, e);
    CHECK(large_same(&a, &b) && same(src, 1000, 0x33));
    q = qslab_realloc(src, big);
    CHECK(q != NULL && same(q, 1000, 0x33));

    /* large to larger, every request failing: in place, the new range and
     * the move all refused */
    char *l = q;
    fill(l + 40 * MIB - 4096, 4096, 0x44);
    size_t bigger = 90 * MIB;
    qslab_large_stats(&a);
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_EVERY) == 0);
    errno = 0;
    q = qslab_realloc(l, bigger);
    e = errno;
    CHECK(qslab_fault_inject(0, 0) == 0);
    qslab_large_stats(&b);
    CHECKF(q == NULL && e == ENOMEM, "realloc(40 -> 90 MiB), every request failing: %p errno %d", q, e);
    CHECK(large_same(&a, &b));
    CHECK(same(l, 1000, 0x33) && same(l + 40 * MIB - 4096, 4096, 0x44));
    CHECK(qslab_usable_size(l) >= 40 * MIB);
    /* the first request only (in place, or the new range): the next ones
     * succeed, so the block grows, moved if need be, contents kept */
    unsigned long before = injected();
    CHECK(qslab_fault_inject(1, 0) == 0);
    q = qslab_realloc(l, bigger);
    CHECK(qslab_fault_inject(0, 0) == 0);
    CHECK(injected() == before + 1);
    CHECKF(q != NULL, "realloc(40 -> 90 MiB), first request failing: NULL errno %d", errno);
    if (q) {
        l = q;
        CHECK(same(l, 1000, 0x33) && same(l + 40 * MIB - 4096, 4096, 0x44));
        CHECK(qslab_usable_size(l) >= bigger);
        l[bigger - 1] = 1;
    }
    /* shrinking: the kernel refuses to unmap the tail, the block keeps its
     * size (and the refusal is counted) */
    struct pages p0, p1;
    pages_line(&p0);
    qslab_large_stats(&a);
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_RELEASE) == 0);
    q = qslab_realloc(l, 40 * MIB);
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
    qslab_large_stats(&b);
    CHECKF(q == l && qslab_usable_size(l) >= bigger, "shrink with the tail's unmap refused: %p (was %p), "
           "usable %zu", q, (void *)l, qslab_usable_size(l));
    CHECK(large_same(&a, &b));
    CHECK(pages_line(&p1) && p1.unmap == p0.unmap + 1 && p1.unmap_bytes >= p0.unmap_bytes + 48 * MIB);
    CHECK(same(l, 1000, 0x33));
    q = qslab_realloc(l, 40 * MIB); /* now it shrinks */
    CHECK(q == l && qslab_usable_size(l) < bigger && qslab_usable_size(l) >= 40 * MIB);
    qslab_free(l);
    return tu_done();
}

struct al_arg {
    size_t align, size;
};

static void *op_aligned(void *arg)
{
    struct al_arg *a = arg;
    return qslab_aligned_alloc(a->align, a->size);
}

/* qslab_aligned_alloc: from a power-of-two class (kmalloc-128 for 100
 * bytes aligned to 64; SLOB: its pages), and from the large path (an
 * alignment over 2 MiB) */
static int child_aligned(void)
{
    struct al_arg small = {64, 100};
    qslab_cache *k = qslab_cache_find("kmalloc-128");
    void **keep = calloc(enough(128), sizeof(void *));
    int hit;
    size_t n = alloc_until_fail("qslab_aligned_alloc(64, 100)", k, op_aligned, &small, keep,
                                enough(128), &hit);
    CHECK(hit);
    for (size_t i = 0; i < n; i++)
        CHECK(((uintptr_t)keep[i] & 63) == 0);
    void *p = qslab_aligned_alloc(64, 100);
    CHECK(p != NULL && ((uintptr_t)p & 63) == 0);
    qslab_free(p);
    free_all(keep, n);
    free(keep);
    CHECK(qslab_cache_validate(k) == 0);

    struct al_arg big = {8 * MIB, 100};
    struct qslab_large_stats a, b;
    qslab_large_stats(&a);
    int e;
    CHECK(armed_call(op_aligned, &big, &p, &e));
    qslab_large_stats(&b);
    CHECKF(p == NULL && e == ENOMEM, "qslab_aligned_alloc(8 MiB, 100) = %p errno %d", p, e);
    CHECK(large_same(&a, &b));
    p = qslab_aligned_alloc(8 * MIB, 100);
    CHECK(p != NULL && ((uintptr_t)p & (8 * MIB - 1)) == 0);
    qslab_free(p);
    return tu_done();
}

/* Queue metadata.  SLQB: a queue's slot array grows (doubling) as frees
 * fill it, up to hiwater; arrays over 64 KiB are mapped.  A growth that
 * fails leaves the free to go to its slab instead: every free is counted
 * once, nothing is lost.  SLAB: the owner's array is reserved at attach
 * (limit); if that fails the array is smaller, and the allocation goes on. */
static int child_queue(void)
{
    qslab_cache *c = qslab_cache_create("fi-queue", 64, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_is(c, "slqb")) {
        /* a queue of 16,384 objects: its slot array over 64 KiB, mapped;
         * an owner budget that lets one queue hold 1 MiB */
        CHECK(qslab_tune("fi-queue", "hiwater", "16384") == 0);
        CHECK(qslab_tune("*", "owner_budget", "2097152") == 0);
        enum { N = 12000 };
        static void *objs[N];
        for (int i = 0; i < N; i++)
            CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
        unsigned long hits = 0;
        for (int i = 0; i < N; i++) {
            struct snap a = snap_of(c);
            unsigned long before = injected();
            CHECK(qslab_fault_inject(1, 0) == 0);
            qslab_cache_free(c, objs[i]);
            qslab_fault_inject(0, 0);
            if (injected() == before)
                continue;
            hits++;
            struct snap b = snap_of(c);
            CHECKF(b.free == a.free + 1 && b.active == a.active - 1,
                   "free %d with the queue's growth failing: free %lu->%lu active %lu->%lu", i,
                   a.free, b.free, a.active, b.active);
            CHECK(qslab_cache_validate(c) == 0);
        }
        CHECKF(hits >= 1, "%lu frees grew the queue's slots from the OS", hits);
        if (getenv("FI_VERBOSE"))
            fprintf(stderr, "queue: %lu frees failed to grow the slots\n", hits);
        CHECK(snap_of(c).active == 0 && snap_of(c).free == N);
        /* and it grows once it can */
        for (int i = 0; i < N; i++)
            CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
        for (int i = 0; i < N; i++)
            qslab_cache_free(c, objs[i]);
        CHECK(qslab_cache_validate(c) == 0);
    } else if (tf_is(c, "slab")) {
        CHECK(qslab_tune("fi-queue", "limit", "16384") == 0);
        void *p;
        int e;
        CHECK(armed_call(op_cache_alloc, c, &p, &e));
        CHECKF(p != NULL, "first alloc with the array's reservation failing: NULL errno %d", e);
        struct snap s = snap_of(c);
        CHECK(s.alloc == 1 && s.active == 1);
        CHECK(qslab_cache_validate(c) == 0);
        void *more[100];
        for (int i = 0; i < 100; i++)
            CHECK((more[i] = qslab_cache_alloc(c)) != NULL);
        for (int i = 0; i < 100; i++)
            qslab_cache_free(c, more[i]);
        qslab_cache_free(c, p);
        CHECK(qslab_cache_validate(c) == 0 && snap_of(c).active == 0);
    } else {
        tf_note("integration_fault_inject", c, "queue growth (no queues)");
    }
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

/* The first allocation of a process, its first map request failing: a
 * CPU's first queue needs the CPU's owner (its table is mapped), and
 * without it the allocation is served from the node lists (per-CPU
 * owners); a thread's owner and queue come from the metadata block, so the
 * request that fails is the slab's (NULL, ENOMEM), as it is for SLOB and
 * the debug front end, which have no queues.  Either way nothing is
 * counted but what was handed out, and the next call works. */
static int child_first_alloc(void)
{
    qslab_cache *k = qslab_cache_find("kmalloc-64");
    struct snap a = snap_of(k);
    size_t size = 64;
    void *p;
    int e;
    CHECK(armed_call(op_malloc, &size, &p, &e));
    struct snap b = snap_of(k);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    /* SLOB and the debug front end have no queues: no owner to make */
    int served = oi.kind == QSLAB_OWNER_CPU && !tf_kmalloc_slob() &&
                 strcmp(tf_kmalloc_front(), "debug") != 0;
    CHECKF(!p == !served, "first qslab_malloc(64), %s owner, %s: %s (errno %d)",
           oi.kind == QSLAB_OWNER_CPU ? "CPU" : "thread", tf_kmalloc_front(), p ? "served" : "NULL", e);
    if (p) {
        CHECKF(b.alloc == a.alloc + 1 && b.active == a.active + 1, "alloc %lu->%lu", a.alloc, b.alloc);
    } else {
        CHECKF(e == ENOMEM, "errno %d", e);
        CHECK_SAME("first qslab_malloc(64)", a, b);
    }
    if (getenv("FI_VERBOSE"))
        fprintf(stderr, "first qslab_malloc(64): %s\n", p ? "served" : "ENOMEM");
    CHECK(qslab_cache_validate(k) == 0);
    void *q = qslab_malloc(64);
    CHECK(q != NULL);
    qslab_free(q);
    qslab_free(p);
    CHECK(qslab_cache_validate(k) == 0 && snap_of(k).active == 0);
    return tu_done();
}

/* ---- give-backs the kernel refuses ----------------------------------------- */

/* A decommit (madvise) refused while shrink gives empty slabs back: the
 * slabs still leave the cache, the bytes are not counted as given back, the
 * Pages line counts the refusal, and the kept memory serves again.  One
 * request covers a run of adjacent slabs (page.c qs_page_free_slabs): the
 * refusal keeps the whole run, and with every request refused, the count
 * of requests shows the runs, fewer than the slabs (SLOB's pages are the
 * arena's, not counted as the cache's slabs). */
static int child_decommit(void)
{
    qslab_cache *c = qslab_cache_create("fi-decommit", 256, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_is(c, "slub"))
        qslab_tune("fi-decommit", "min_partial", "0"); /* SLUB would keep some */
    enum { N = 400 };
    static void *objs[N];
    for (int i = 0; i < N; i++)
        CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    struct pages p0, p1;
    CHECK(!pages_line(&p0)); /* no refusal yet: no line */
    unsigned long before = injected_release();
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_RELEASE) == 0);
    size_t got = qslab_cache_shrink(c);
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
    CHECKF(injected_release() == before + 1, "shrink made no give-back request");
    CHECK(pages_line(&p1));
    size_t slab = (size_t)4096 << (tf_slob(c) ? 0 : st.order);
    CHECKF(p1.decommit == 1 && p1.decommit_bytes >= slab && p1.decommit_bytes % slab == 0 &&
               (tf_slob(c) || p1.decommit_bytes <= st.num_slabs * slab) && p1.unmap == 0,
           "Pages: decommit failed %lu (%zu bytes), unmap failed %lu; one run of slabs of %zu "
           "expected",
           p1.decommit, p1.decommit_bytes, p1.unmap, slab);
    if (tf_is(c, "slqb")) /* every slab went back, but the refused run */
        CHECKF(got == st.num_slabs * slab - p1.decommit_bytes,
               "shrink gave back %zu bytes of %lu slabs of %zu, %zu refused", got, st.num_slabs,
               slab, p1.decommit_bytes);
    CHECK(got % 4096 == 0);
    struct snap s = snap_of(c);
    if (!tf_slob(c))
        CHECKF(s.slabs == 0, "%lu slabs left after shrink", s.slabs);
    CHECK(s.active == 0);
    CHECK(qslab_cache_validate(c) == 0);
    /* the memory serves again; then every give-back refused: one request
     * a run, the whole run kept */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            objs[i] = qslab_cache_alloc(c);
            CHECK(objs[i] != NULL);
            if (objs[i])
                memset(objs[i], 0x11, 256);
        }
        for (int i = 0; i < N; i++)
            qslab_cache_free(c, objs[i]);
        CHECK(qslab_cache_validate(c) == 0);
        if (round == 1)
            break;
        qslab_cache_stats(c, &st);
        pages_line(&p0);
        before = injected_release();
        CHECK(qslab_fault_inject(1, QSLAB_FAULT_RELEASE | QSLAB_FAULT_EVERY) == 0);
        got = qslab_cache_shrink(c);
        CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
        CHECK(pages_line(&p1));
        unsigned long requests = injected_release() - before;
        unsigned long runs = requests - (p1.unmap - p0.unmap);
        CHECKF(got == 0 && runs == p1.decommit - p0.decommit,
               "every give-back refused: shrink gave back %zu bytes; %lu requests, %lu decommits "
               "and %lu unmaps counted",
               got, requests, p1.decommit - p0.decommit, p1.unmap - p0.unmap);
        if (tf_is(c, "slqb"))
            CHECKF(p1.decommit_bytes - p0.decommit_bytes == st.num_slabs * slab,
                   "%zu bytes kept resident of %lu slabs of %zu",
                   p1.decommit_bytes - p0.decommit_bytes, st.num_slabs, slab);
        if (!tf_slob(c) && st.num_slabs >= 2)
            CHECKF(runs >= 1 && runs < st.num_slabs,
                   "%lu decommit requests for %lu slabs: adjacent slabs were not given back "
                   "together",
                   runs, st.num_slabs);
        printf("fi-decommit (%s): %lu slabs given back in %lu decommit requests\n", qslab_cache_front(c), st.num_slabs, runs);
    }
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

static void capture_fatal(const char *msg)
{
    tu_fatal_capture(msg);
}

/* 20,000 objects of 64-byte cache c allocated, written with `fill`, freed. */
static void churn(qslab_cache *c, int fill)
{
    enum { N = 20000 };
    static void *objs[N];
    for (int i = 0; i < N; i++) {
        CHECK((objs[i] = qslab_cache_alloc(c)) != NULL);
        if (objs[i])
            memset(objs[i], fill, 64);
    }
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
}

/* Metadata mapped on its own (over 64 KiB): a SLAB cache's shared arrays of
 * 8 x 4096 pointers (256 KiB a node).  When `shared` changes the old arrays
 * go; the unmap of one refused keeps it mapped and counts it, and the
 * objects it held go home all the same. */
static void meta_unmap_refused(void)
{
    qslab_cache *m = qslab_cache_create("fi-meta", 64, 0, 0, NULL);
    CHECK(m != NULL);
    if (!m)
        return;
    if (qslab_tune("fi-meta", "front", "slab") != 0) { /* a debug cache (QSLAB_DEBUG) */
        CHECK(qslab_cache_destroy(m) == 0);
        return;
    }
    CHECK(qslab_tune("fi-meta", "limit", "8192") == 0);
    CHECK(qslab_tune("fi-meta", "batchcount", "4096") == 0);
    CHECK(qslab_tune("fi-meta", "shared", "8") == 0);
    churn(m, 0x5c); /* the arrays fill */
    struct pages p0, p1;
    pages_line(&p0);
    unsigned long before = injected_release();
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_RELEASE) == 0);
    CHECK(qslab_tune("fi-meta", "shared", "0") == 0);
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
    CHECKF(injected_release() == before + 1, "%lu give-backs refused", injected_release() - before);
    CHECK(pages_line(&p1));
    CHECKF(p1.unmap == p0.unmap + 1 && p1.unmap_bytes - p0.unmap_bytes == 8 * 4096 * sizeof(void *) &&
               p1.decommit == p0.decommit,
           "Pages: unmap failed %lu (%zu bytes), was %lu (%zu)", p1.unmap, p1.unmap_bytes, p0.unmap,
           p0.unmap_bytes);
    CHECK(qslab_cache_validate(m) == 0);
    /* new arrays, and they serve */
    CHECK(qslab_tune("fi-meta", "shared", "8") == 0);
    churn(m, 0x5d);
    CHECK(qslab_cache_validate(m) == 0);
    CHECK(qslab_cache_destroy(m) == 0);
}

/* An unmap refused: a chunk of slabs (it goes back to its pool, and serves
 * again without a new mapping) and a large block (its pages go back, its
 * range stays mapped and is no longer qslab's). */
static int child_unmap(void)
{
    /* objects of 1.5 MiB: one 2 MiB slab per 4 MiB chunk (its header takes
     * the first slot), so two objects are two chunks; the pool keeps one
     * fully free chunk and unmaps the other */
    size_t size = 3 * MIB / 2;
    qslab_cache *c = qslab_cache_create("fi-unmap", size, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_is(c, "slub"))
        qslab_tune("fi-unmap", "min_partial", "0");
    /* the empty slabs stay the cache's (its FIFO) for the shrink, not warm
     * in the page layer */
    CHECK(qslab_tune("fi-unmap", "empty_limit", "4") == 0);
    void *a = qslab_cache_alloc(c), *b = qslab_cache_alloc(c);
    CHECK(a && b);
    qslab_cache_free(c, a);
    qslab_cache_free(c, b);
    struct pages p0, p1;
    pages_line(&p0);
    /* two decommits, then the second chunk's unmap */
    unsigned long before = injected_release();
    CHECK(qslab_fault_inject(3, QSLAB_FAULT_RELEASE) == 0);
    qslab_cache_shrink(c);
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
    CHECK(injected_release() == before + 1);
    CHECK(pages_line(&p1));
    CHECKF(p1.unmap == p0.unmap + 1 && p1.unmap_bytes - p0.unmap_bytes >= 4 * MIB &&
               p1.decommit == p0.decommit,
           "Pages: decommit failed %lu, unmap failed %lu (%zu bytes)", p1.decommit, p1.unmap,
           p1.unmap_bytes);
    CHECK(qslab_cache_validate(c) == 0);
    /* both chunks serve again: no map request */
    unsigned long maps = injected();
    CHECK(qslab_fault_inject(1, 0) == 0);
    a = qslab_cache_alloc(c);
    b = qslab_cache_alloc(c);
    CHECK(qslab_fault_inject(0, 0) == 0);
    CHECKF(a && b && injected() == maps, "after the kept chunk: %p %p, %lu map requests failed", a, b,
           injected() - maps);
    if (a)
        memset(a, 1, size);
    if (b)
        memset(b, 2, size);
    qslab_cache_free(c, a);
    qslab_cache_free(c, b);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);

    /* a large block */
    char *l = qslab_malloc(40 * MIB);
    CHECK(l != NULL);
    l[0] = 1;
    struct qslab_large_stats la, lb;
    qslab_large_stats(&la);
    pages_line(&p0);
    CHECK(qslab_fault_inject(1, QSLAB_FAULT_RELEASE) == 0);
    qslab_free(l);
    CHECK(qslab_fault_inject(0, QSLAB_FAULT_RELEASE) == 0);
    qslab_large_stats(&lb);
    CHECK(lb.free == la.free + 1 && lb.live == la.live - 1);
    if (getenv("QSLAB_DEBUG")) /* P: a freed large block is kept sealed; the seal refused, it is unmapped */
        CHECK(pages_line(&p1) && p1.unmap == p0.unmap && p1.decommit == p0.decommit);
    else
        CHECK(pages_line(&p1) && p1.unmap == p0.unmap + 1 && p1.unmap_bytes - p0.unmap_bytes >= 40 * MIB &&
              p1.decommit == p0.decommit);
    /* no longer qslab's: a second free is reported as one */
    CHECK(qslab_object_node(l) == -1);
    qslab_set_fatal_handler(capture_fatal);
    tu_capture_reset();
    qslab_free(l);
    char addr[32];
    tu_check_fatal("invalid free", tu_addr(addr, l), "a large block freed before");
    qslab_set_fatal_handler(NULL);
    meta_unmap_refused();
    return tu_done();
}

/* ---- the API and the environment ---------------------------------------------- */

static int child_api(void)
{
    errno = 0;
    CHECK(qslab_fault_inject(1, 0x4) == -1 && errno == EINVAL);
    CHECK(qslab_fault_inject(1, ~0u) == -1 && errno == EINVAL);
    /* nothing armed by a refused call */
    void *p = qslab_malloc(40 * MIB);
    CHECK(p != NULL);
    qslab_free(p);
    /* nth 0 disarms */
    CHECK(qslab_fault_inject(1, 0) == 0);
    CHECK(qslab_fault_inject(0, 0) == 0);
    p = qslab_malloc(40 * MIB);
    CHECK(p != NULL);
    qslab_free(p);
    /* the nth, counted from the arming */
    unsigned long before = injected();
    CHECK(qslab_fault_inject(3, 0) == 0);
    void *q[4];
    for (int i = 0; i < 4; i++)
        q[i] = qslab_malloc(40 * MIB);
    CHECK(q[0] && q[1] && !q[2] && q[3]);
    CHECK(injected() == before + 1);
    for (int i = 0; i < 4; i++)
        qslab_free(q[i]);
    /* kinds are counted apart: release requests do not count for maps */
    CHECK(qslab_fault_inject(2, 0) == 0);
    p = qslab_malloc(40 * MIB);
    qslab_free(p); /* an unmap: a release request */
    q[0] = qslab_malloc(40 * MIB);
    CHECK(p != NULL && q[0] == NULL);
    CHECK(qslab_fault_inject(0, 0) == 0);
    return tu_done();
}

/* QSLAB_FAIL_NTH, read at the first request of the process */
static int child_env_release(void)
{
    /* "1,release": the first give-back fails */
    qslab_cache *c = qslab_cache_create("fi-env", 256, 0, 0, NULL);
    void *objs[64];
    for (int i = 0; i < 64; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 64; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(injected_release() == 0);
    qslab_cache_shrink(c);
    struct pages pg;
    CHECK(injected_release() == 1);
    CHECK(pages_line(&pg) && pg.decommit == 1 && pg.unmap == 0);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

static int child_env_far(void)
{
    /* a count never reached: runs as usual; the API arms over it */
    void *p = qslab_malloc(40 * MIB);
    CHECK(p != NULL);
    qslab_free(p);
    CHECK(injected() == 0);
    CHECK(qslab_fault_inject(1, 0) == 0);
    errno = 0;
    p = qslab_malloc(40 * MIB);
    CHECK(p == NULL && errno == ENOMEM && injected() == 1);
    return tu_done();
}

static int child_env_ignored(void)
{
    void *p = qslab_malloc(40 * MIB);
    CHECK(p != NULL);
    qslab_free(p);
    CHECK(injected() == 0 && injected_release() == 0);
    return tu_done();
}

static int child_env_startup(void)
{
    return 0; /* never reached: start-up aborts */
}

static const struct {
    const char *name;
    int (*fn)(void);
} children[] = {
    {"first_alloc", child_first_alloc},   {"cache_alloc", child_cache_alloc},
    {"alloc_node", child_alloc_node},
    {"cache_create", child_cache_create}, {"malloc_small", child_malloc_small},
    {"malloc_large", child_malloc_large}, {"calloc", child_calloc},
    {"realloc", child_realloc},           {"aligned", child_aligned},
    {"queue", child_queue},               {"decommit", child_decommit},
    {"unmap", child_unmap},               {"api", child_api},
    {"env_release", child_env_release},   {"env_far", child_env_far},
    {"env_ignored", child_env_ignored},   {"env_startup", child_env_startup},
};

/* Run part `name` in a fresh process with `var` set; its exit status */
static int run(const char *name, const char *var, const char *value)
{
    int rc = tu_reexec(name, var, value);
    CHECKF(rc == 0, "part %s (%s=%s) exited %d", name, var, value ? value : "(unset)", rc);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        tu_pin_one_cpu();
        for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
            if (strcmp(argv[1], children[i].name) == 0)
                return children[i].fn();
        fprintf(stderr, "unknown part %s\n", argv[1]);
        return 2;
    }
    setenv("QSLAB_PURGE", "0", 1); /* inherited by every part */
    run("first_alloc", "QSLAB_FAIL_NTH", NULL);
    run("cache_alloc", "QSLAB_FAIL_NTH", NULL);
    run("alloc_node", "QSLAB_FAKE_NUMA", "2");
    run("cache_create", "QSLAB_FAIL_NTH", NULL);
    run("malloc_small", "QSLAB_FAIL_NTH", NULL);
    run("malloc_large", "QSLAB_FAIL_NTH", NULL);
    run("calloc", "QSLAB_FAIL_NTH", NULL);
    run("realloc", "QSLAB_FAIL_NTH", NULL);
    run("aligned", "QSLAB_FAIL_NTH", NULL);
    run("queue", "QSLAB_FAIL_NTH", NULL);
    run("decommit", "QSLAB_FAIL_NTH", NULL);
    run("unmap", "QSLAB_FAIL_NTH", NULL);
    run("api", "QSLAB_FAIL_NTH", NULL);
    /* the same with every cache a debug cache (the debug front end's own
     * paths; its retry after a corrupt free list once absorbed an OS
     * failure, and `make test` runs only the concurrency tests so) */
    if (!getenv("QSLAB_DEBUG")) {
        static const char *const dbg[] = {"first_alloc", "cache_alloc", "cache_create",
                                          "malloc_small", "malloc_large", "calloc", "realloc",
                                          "aligned", "decommit", "unmap"};
        for (size_t i = 0; i < sizeof dbg / sizeof dbg[0]; i++)
            run(dbg[i], "QSLAB_DEBUG", "FZPU");
        setenv("QSLAB_FAKE_NUMA", "2", 1);
        run("alloc_node", "QSLAB_DEBUG", "FZPU");
        unsetenv("QSLAB_FAKE_NUMA");
    }
    run("env_release", "QSLAB_FAIL_NTH", "1,release");
    run("env_far", "QSLAB_FAIL_NTH", "1000000000");
    /* a value that does not parse: one line on stderr, ignored */
    char err[2048];
    tu_stderr_begin();
    int rc = tu_reexec("env_ignored", "QSLAB_FAIL_NTH", "3,sometimes");
    tu_stderr_end(err, sizeof err);
    CHECKF(rc == 0 && strstr(err, "qslab: QSLAB_FAIL_NTH=3,sometimes ignored: expected "
                                  "N[,every][,release] (N a number)\n"),
           "QSLAB_FAIL_NTH=3,sometimes: exit %d, stderr \"%s\"", rc, err);
    /* every map request failing from the start: start-up cannot set up
     * its caches, and says so before it aborts */
    tu_stderr_begin();
    rc = tu_reexec("env_startup", "QSLAB_FAIL_NTH", "1,every");
    tu_stderr_end(err, sizeof err);
    CHECKF(rc == 128 + SIGABRT && strstr(err, "cannot set up kmalloc-8"),
           "QSLAB_FAIL_NTH=1,every: exit %d, stderr \"%s\"", rc, err);
    return tu_done();
}
