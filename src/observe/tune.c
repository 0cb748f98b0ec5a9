/*
 * tune.c - tunables, declared once in a table (name, unit, doc, range), set
 * with qslab_tune() at run time or QSLAB_TUNE at start-up.  A value out of
 * range is refused with a message that gives the range; nothing is changed
 * and the cache keeps working.  Changes take effect on the next slow path
 * that reads them (order: slabs made from then on; existing slabs keep
 * their order).
 *
 * QSLAB_TUNE syntax:  entry (';' entry)*
 *     entry := cache ':' attr '=' value (',' attr '=' value)*
 *     cache := a cache name, or '*' for every cache
 * e.g. QSLAB_TUNE="kmalloc-8192:order=3,hiwater=64;*:empty_decay_ms=500"
 * Entries are applied when a cache is created, in order, so later entries win.
 */
#include "core/hooks.h"
#include "front/front.h"
#include "observe/observe.h"
#include "debug/debug.h"
#include "observe/tune.h"

#include <errno.h>
#include <string.h>

/* the tunable `random` of every cache at its creation (core/slab.c) */
#define QS_RANDOM_DEFAULT 0

enum { T_ORDER, T_HIWATER, T_FREEBATCH, T_EMPTY_LIMIT, T_EMPTY_DECAY, T_STASH, T_FRONT,
       T_CPU_PARTIAL, T_MIN_PARTIAL, T_PASS_THROUGH, T_LIMIT, T_BATCHCOUNT, T_SHARED, T_RANDOM,
       T_GUARD, T_DEBUG, T_OWNER_BUDGET, T_CACHED_MAX };
/* the process's tunables, named "*" only: what each is, for messages */
#define PROCESS_T(t) ((t) == T_OWNER_BUDGET || (t) == T_CACHED_MAX)
#define PROCESS_WHAT(t) ((t) == T_OWNER_BUDGET ? "the owner budget" : "the cached-memory cap")

static const struct tunable {
    const char *name, *unit, *doc;
} tunables[] = {
    [T_ORDER] = {"order", "log2 pages", "slab size of new slabs: 4 KiB << order"},
    [T_HIWATER] = {"hiwater", "objects", "queue length over which an owner flushes"},
    [T_FREEBATCH] = {"freebatch", "objects", "objects a flush moves back to slabs"},
    [T_EMPTY_LIMIT] = {"empty_limit", "slabs", "empty slabs kept per node, at most"},
    [T_EMPTY_DECAY] = {"empty_decay_ms", "ms", "an empty slab older than this goes back"},
    [T_STASH] = {"stash_bytes", "bytes", "empty slabs an owner keeps for its next refill"},
    [T_FRONT] = {"front", "name", "front end (" QS_FRONT_NAMES "), before the first allocation"},
    [T_CPU_PARTIAL] = {"cpu_partial", "objects", "SLUB: free objects an owner keeps in partial slabs"},
    [T_MIN_PARTIAL] = {"min_partial", "slabs", "SLUB: partial slabs a node keeps even when empty"},
    [T_PASS_THROUGH] = {"pass_through", "0 or 1",
                        "SLUB kmalloc over 4 KiB: blocks straight from the page layer"},
    [T_LIMIT] = {"limit", "objects", "SLAB: objects an owner's array holds"},
    [T_BATCHCOUNT] = {"batchcount", "objects", "SLAB: objects a refill or a flush moves"},
    [T_SHARED] = {"shared", "batches", "SLAB: a node's shared array, in batchcounts (0: none)"},
    [T_RANDOM] = {"random", "0 or 1",
                  "new slabs hand their objects out in a shuffled order (SLAB_FREELIST_RANDOM; "
                  "not SLOB's shared pages)"},
    [T_GUARD] = {"guard_sample", "allocations",
                 "one allocation in about this many is a guarded sample; 0: QSLAB_GUARD_SAMPLE's rate"},
    [T_DEBUG] = {"debug", "letters",
                 "SLUB's debug flags (FZPUTRVQ, - for none) for new allocations: a cache in use "
                 "gets a debug twin <cache>:<flags> for its new slabs"},
    [T_OWNER_BUDGET] = {"owner_budget", "bytes",
                        "the process's, named \"*\": what each owner (a CPU, or a thread) keeps "
                        "of free objects and empty slabs in its queues and stashes, over all caches"},
    [T_CACHED_MAX] = {"cached_max", "bytes",
                      "the process's, named \"*\": the cap on what is kept that is not in use "
                      "(half for empty slabs, half for the owners' queues), 0 for none"},
};
#define NR_TUNABLES (sizeof(tunables) / sizeof(tunables[0]))

static uint32_t *field(qslab_cache *c, unsigned t)
{
    switch (t) {
    case T_ORDER:
        return &c->order;
    case T_HIWATER:
        return &c->hiwater;
    case T_FREEBATCH:
        return &c->freebatch;
    case T_EMPTY_LIMIT:
        return &c->empty_limit;
    case T_STASH:
        return &c->stash_bytes;
    case T_CPU_PARTIAL:
        return &c->cpu_partial;
    case T_MIN_PARTIAL:
        return &c->min_partial;
    case T_PASS_THROUGH:
        return &c->pass_through;
    case T_LIMIT:
        return &c->slab_limit;
    case T_BATCHCOUNT:
        return &c->slab_batch;
    case T_SHARED:
        return &c->slab_shared;
    case T_RANDOM:
        return &c->random;
    case T_GUARD:
        return &c->guard_sample;
    default:
        return &c->empty_decay_ms;
    }
}

static void range(qslab_cache *c, unsigned t, unsigned long *lo, unsigned long *hi)
{
    switch (t) {
    case T_ORDER: /* free bits: objects under 128 bytes, 512 to a slab at most (core/slab.h) */
        *lo = c->min_order;
        *hi = qs_keeps_fbits(c) ? c->max_order : QS_MAX_ORDER;
        break;
    case T_HIWATER:
        *lo = QS_LOAD(c->freebatch);
        *hi = QS_MAX_HIWATER;
        break;
    case T_FREEBATCH:
        *lo = 1;
        *hi = QS_LOAD(c->hiwater);
        break;
    case T_EMPTY_LIMIT:
        *lo = 0;
        *hi = QS_MAX_EMPTY_LIMIT;
        break;
    case T_STASH:
        *lo = 0;
        *hi = QS_MAX_STASH_BYTES;
        break;
    case T_CPU_PARTIAL:
    case T_MIN_PARTIAL:
        *lo = 0;
        *hi = QS_MAX_PARTIAL;
        break;
    case T_PASS_THROUGH:
    case T_RANDOM:
        *lo = 0;
        *hi = 1;
        break;
    case T_LIMIT: /* mm/slab.c do_tune_cpucache: batchcount <= limit */
        *lo = QS_LOAD(c->slab_batch);
        *hi = QS_MAX_SLAB_LIMIT;
        break;
    case T_BATCHCOUNT:
        *lo = 1;
        *hi = QS_LOAD(c->slab_limit);
        break;
    case T_SHARED:
        *lo = 0;
        *hi = QS_MAX_SLAB_SHARED;
        break;
    case T_GUARD:
        *lo = 0;
        *hi = QS_GUARD_MAX_RATE;
        break;
    case T_OWNER_BUDGET:
        *lo = QS_OWNER_BUDGET_MIN;
        *hi = QS_OWNER_BUDGET_MAX;
        break;
    case T_CACHED_MAX:
        *lo = 0;
        *hi = QS_CACHED_MAX_MAX;
        break;
    default:
        *lo = 0;
        *hi = QS_MAX_DECAY_MS;
        break;
    }
}

/* 1 GiB of empty slabs of `order` per node, at least 4 (see below) */
static uint32_t default_empty_limit(unsigned order)
{
    size_t slabs = ((size_t)1 << 30) >> (QS_PAGE_SHIFT + order);
    return (uint32_t)(slabs < 4 ? 4 : slabs);
}

QS_STARTUP void qs_tune_defaults(qslab_cache *c)
{
    /* SLQB's watermarks, freebatch = max(4*PAGE/size, min(256, 64*PAGE/size))
     * and hiwater = 4 * freebatch, but a queue holds at most QS_QUEUE_BYTES
     * (256 KiB; at least freebatch objects).  Objects in a queue are its
     * thread's alone: nobody else can use them or give their slabs back,
     * and after a program frees its working set and goes quiet they stay
     * (each pinning its slab).  At SLQB's 1 MiB per class, an idle thread
     * kept 19.6% of a freed 256 MiB working set 2 s later; at 256 KiB, 7.0%.
     * (The cap was tried once before and cost 3.5 MiB in the 4-thread
     * Python run: big blocks then came four or five to a slab, and a block
     * freed past hiwater went to its slab while the thread's next malloc
     * took a cold one from the queue.  With one big block per slab (core/slab.c)
     * the Python run peaks at 47.5 to 48.9 MiB with the cap, 47.6 to 49.3
     * without.) */
    size_t size = c->slot_size;
    size_t a = 4 * QS_PAGE_SIZE / size, b = 64 * QS_PAGE_SIZE / size;
    size_t fb = b < 256 ? b : 256;
    if (a > fb)
        fb = a;
    if (fb < 1)
        fb = 1;
    size_t hw = 4 * fb;
    size_t hw_b = QS_QUEUE_BYTES / size;
    if (hw > hw_b)
        hw = hw_b > fb ? hw_b : fb;
    c->freebatch = (uint32_t)fb;
    c->hiwater = (uint32_t)hw;
    qs_tune_derive(c);
    /* keep up to 1 GiB of empty slabs per node, at least 4, for 1 s: they
     * keep their born objects for the cache's next refills (two CPUs
     * freeing 10,000 16 KiB objects each already keep 320 MiB, and take it
     * again at once); the decay (and the purger) bounds the time, the
     * limit a burst, and the retention rule what they keep while another
     * cache grows (node.c qs_node_reclaim) */
    c->empty_limit = default_empty_limit(c->order);
    c->empty_decay_ms = 1000;
    c->stash_bytes = QS_STASH_BYTES;
    /* SLUB's (mm/slub.c set_cpu_partial and set_min_partial, as of 5.16):
     * free objects kept in an owner's partial slabs by object size, and
     * partial slabs a node keeps even when empty, log2(size) / 2 in 5..10.
     * The kernel's rules are for the blocks its SLUB serves (kmalloc up to
     * two pages, slabs up to 32 KiB); qslab's SLUB serves blocks up to
     * 32 MiB in slabs up to 2 MiB, so both are also bounded in bytes, at
     * what the kernel's rules give there: an owner's partial objects at
     * most QS_SLUB_CPU_PARTIAL_BYTES (six 8 KiB objects), a node's kept
     * partial slabs at most QS_SLUB_MIN_PARTIAL_BYTES (ten 32 KiB slabs).
     * Unbounded, a class of 1 MiB blocks kept ten empty 2 MiB slabs a node
     * and twelve a CPU (the 4-thread Python program of make bench held 12
     * MiB of empty big slabs at its peak) */
    c->cpu_partial = size >= QS_PAGE_SIZE ? 6 : size >= 1024 ? 24 : size >= 256 ? 52 : 120;
    if (c->cpu_partial * size > QS_SLUB_CPU_PARTIAL_BYTES)
        c->cpu_partial = (uint32_t)(QS_SLUB_CPU_PARTIAL_BYTES / size);
    unsigned lg = 63 - (unsigned)__builtin_clzl(size);
    c->min_partial = lg / 2 < 5 ? 5 : lg / 2 > 10 ? 10 : lg / 2;
    if (c->min_partial * qs_slab_bytes(c->order) > QS_SLUB_MIN_PARTIAL_BYTES)
        c->min_partial = (uint32_t)(QS_SLUB_MIN_PARTIAL_BYTES / qs_slab_bytes(c->order));
    c->pass_through = 0;
    /* SLAB's (mm/slab.c enable_cpucache): the array by object size, half
     * of it per batch, a shared array of 8 batches per node on SMP for
     * objects up to a page */
    c->slab_limit = size > (128u << 10) ? 1 : size > QS_PAGE_SIZE ? 8 : size > 1024 ? 24 : size > 256 ? 54 : 120;
    c->slab_batch = (c->slab_limit + 1) / 2;
    c->slab_shared = size <= QS_PAGE_SIZE && qs_os_cpu_possible() > 1 ? 8 : 0;
    /* SLAB_FREELIST_RANDOM (core/slab.c): off until qs_tune_apply_env, which
     * runs once the cache has its id (QS_RANDOM_DEFAULT) */
    c->random = 0;
}

/* What derives from the tunables and the slot size, kept current by tune:
 * - park: other owners' objects a queue takes while it is shorter than
 *   hiwater / QS_REMOTE_LOW objects and QS_PARK_BYTES (queue.c
 *   qs_free_remote); the rest go home in pending batches of freebatch.  In
 *   objects alone, a consumer of 4 KiB blocks parked 64 of them (0.25 MiB
 *   its producer had to make anew).  (Pending batches were bounded in bytes
 *   too, at 16 KiB: producer/consumer on one CPU 3704 -> 3448 KiB of peak
 *   RSS, but one inbox lock per one or two big objects made the ring of 8
 *   and 16 KiB objects 1.5 to 2x slower, 446 -> 710 and 749 -> 1096 cycles
 *   per object, medians of 5; SLQB's freebatch it is.)
 * - refill (queue.c): half a batch, at least QS_REFILL_MIN objects, at most
 *   QS_REFILL_BYTES, at least one object; fresh: of new memory, at most a
 *   page's worth.
 * Called with qs_global held (or before the cache is published). */
QS_STARTUP void qs_tune_derive(qslab_cache *c)
{
    uint32_t slot = c->slot_size;
    uint32_t park = QS_LOAD(c->hiwater) / QS_REMOTE_LOW, park_b = QS_PARK_BYTES / slot;
    uint32_t batch = QS_LOAD(c->freebatch);
    QS_STORE(c->park, park < park_b ? park : park_b);
    /* a refill: half a batch, at least 4 objects, at most 64 KiB, at least 1 */
    uint32_t refill = batch / 2, refill_b = QS_REFILL_BYTES / slot;
    if (refill < QS_REFILL_MIN)
        refill = QS_REFILL_MIN;
    if (refill > refill_b)
        refill = refill_b;
    refill = refill < 1 ? 1 : refill;
    QS_STORE(c->refill, refill);
    /* of new memory, a refill takes QS_REFILL_MIN objects, but no more than
     * a page's worth (at least one): a new slab's objects are born as they
     * are needed (core/slab.c), and one 4 KiB malloc should touch one page */
    uint32_t fresh = QS_PAGE_SIZE / slot;
    if (fresh > QS_REFILL_MIN)
        fresh = QS_REFILL_MIN;
    if (fresh > refill)
        fresh = refill;
    QS_STORE(c->fresh, fresh < 1 ? 1 : fresh);
}

static int find_tunable(const char *attr, size_t len)
{
    for (unsigned t = 0; t < NR_TUNABLES; t++)
        if (strlen(tunables[t].name) == len && memcmp(tunables[t].name, attr, len) == 0)
            return (int)t;
    return -1;
}

/* Parse a decimal number of [s, s+len); false if not one. */
static bool parse_ulong(const char *s, size_t len, unsigned long *out)
{
    unsigned long v = 0;
    if (len == 0 || len > 13)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Has c allocated (or been given a queue) yet?  qs_global held. */
static bool qs_cache_used(const qslab_cache *c)
{
    unsigned long sum[QS_STAT_NR];
    if (c->queues)
        return true;
    qs_stats_sum((qslab_cache *)c, sum);
    return sum[QS_ALLOC_FAST] || sum[QS_ALLOC_SLOW] || sum[QS_NEW_SLAB];
}

/* The front end: a name (or its number), before the cache's first
 * allocation; qs_global held. */
static int set_front_locked(qslab_cache *c, const char *value, size_t vlen)
{
    char val[32];
    size_t n = vlen < sizeof(val) - 1 ? vlen : sizeof(val) - 1;
    memcpy(val, value, n);
    val[n] = '\0';
    int f = qs_front_find(value, vlen);
    unsigned long num;
    if (f < 0 && parse_ulong(value, vlen, &num) && num < QS_FRONT_NAMED)
        f = (int)num;
    if (f < 0) {
        qs_warn("tune %s front=%s refused: the front ends are " QS_FRONT_NAMES, c->name, val);
        errno = EINVAL;
        return -1;
    }
    if (f == c->front)
        return 0;
    if (c->debug) { /* its layout is the debug front end's (debug/slot.c) */
        qs_warn("tune %s front=%s refused: the cache has debug flags and stays on the debug "
                "front end", c->name, val);
        errno = EINVAL;
        return -1;
    }
    if (qs_cache_used(c)) {
        qs_warn("tune %s front=%s refused: the cache has allocated already (a front end is "
                "chosen before a cache's first allocation; it stays %s)",
                c->name, val, qs_front_of(c)->name);
        errno = EINVAL;
        return -1;
    }
    /* an order nobody tuned follows the front end's rule (SLUB's
     * calculate_order) */
    unsigned old_order = QS_LOAD(c->order);
    if (old_order == qs_front_order(c, c->front)) {
        QS_STORE(c->order, qs_front_order(c, f));
        /* and an empty_limit nobody tuned, which counts slabs of the order */
        if (QS_LOAD(c->empty_limit) == default_empty_limit(old_order))
            QS_STORE(c->empty_limit, default_empty_limit(QS_LOAD(c->order)));
    }
    const struct qs_front *old = qs_front_of(c), *fe = qs_fronts[f];
    qs_front_set(c, f);
    if (old->tuned) /* what the old front end made for c given back (SLAB's arrays) */
        old->tuned(c);
    if (fe->tuned && fe != old) /* and the new one's made */
        fe->tuned(c);
    return 0;
}

/* qs_global held */
static int set_one_locked(qslab_cache *c, int t, const char *value, size_t vlen)
{
    if (t == T_DEBUG) { /* set_one's: it makes a cache (twin.c) */
        qs_warn("tune %s debug: refused for every cache at once (\"*\"); name each cache, or "
                "use QSLAB_DEBUG when the caches are made", c->name);
        errno = EINVAL;
        return -1;
    }
    if (t == T_FRONT) {
        int r = set_front_locked(c, value, vlen);
        qs_observe_cache(c); /* objects per slab follow the front end */
        return r;
    }
    unsigned long v, lo, hi;
    range(c, (unsigned)t, &lo, &hi);
    bool num = parse_ulong(value, vlen, &v);
    if (!num || v < lo || v > hi) {
        char val[32];
        size_t n = vlen < sizeof(val) - 1 ? vlen : sizeof(val) - 1;
        memcpy(val, value, n);
        val[n] = '\0';
        qs_warn("tune %s %s=%s refused: %sallowed range is %u..%u %s (%s)", c->name, tunables[t].name,
                val, num ? "" : vlen ? "not a number; " : "empty; ", lo, hi, tunables[t].unit,
                tunables[t].doc);
        errno = EINVAL;
        return -1;
    }
    if (t == T_OWNER_BUDGET) { /* the process's (queue.c): the owners' next misses follow it */
        QS_STORE(qs_owner_budget, v);
        return 0;
    }
    if (t == T_CACHED_MAX) { /* the process's (core/page.c): its walk follows at once (qs_tune) */
        qs_page_set_cached_max(v);
        return 0;
    }
    if (t == T_RANDOM && v && !qs_slab_random_init(c)) { /* `random` publishes it */
        qs_warn("tune %s random=1 refused: out of memory for its permutation", c->name);
        errno = ENOMEM;
        return -1;
    }
    __atomic_store_n(field(c, (unsigned)t), (uint32_t)v, __ATOMIC_RELEASE);
    if (t == T_GUARD && v)
        qs_guard_enable(true); /* guard.c: the fault handler, the slow paths' test */
    qs_tune_derive(c);
    qs_observe_cache(c); /* objects per slab follow the order */
    if (qs_front_of(c)->tuned && (t == T_LIMIT || t == T_BATCHCOUNT || t == T_SHARED))
        qs_front_of(c)->tuned(c); /* SLAB's arrays' limits, its shared arrays */
    /* the queues' copies of hiwater, limit and park (the front end's
     * queue_knobs, front.h: a limit is lowered at once and raised by its
     * owner; 0 while there is a debug twin; other front ends' queues stay
     * inert).  (An open batch's room, fb_max, is its transit reservation: a
     * new freebatch bounds the next one opened, front/slqb/remote.c.) */
    void (*knobs)(qslab_cache *, struct qs_queue *, bool) = qs_front_of(c)->queue_knobs;
    for (struct qs_queue *q = c->queues; q && knobs; q = q->all_next)
        knobs(c, q, false);
    return 0;
}

static int set_one(qslab_cache *c, int t, const char *value, size_t vlen)
{
    if (t == T_DEBUG) /* makes a cache, which takes qs_global (twin.c) */
        return qs_twin_tune(c, value, vlen);
    qs_lock_acquire(&qs_global);
    int r = set_one_locked(c, t, value, vlen);
    qs_lock_release(&qs_global);
    return r;
}

/* Edit distance of two short names (at most 31 bytes; else "far") */
static unsigned distance(const char *a, size_t la, const char *b, size_t lb)
{
    unsigned row[32];
    if (la > 31 || lb > 31)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* "unknown attribute 'x'" and, for a near name, " (did you mean 'y'?)" */
static void unknown_attribute(const char *who, const char *attr, size_t len)
{
    char a[32];
    size_t n = len < sizeof(a) - 1 ? len : sizeof(a) - 1;
    memcpy(a, attr, n);
    a[n] = '\0';
    int best = -1;
    unsigned bd = 3; /* at most two edits away */
    for (unsigned t = 0; t < NR_TUNABLES; t++) {
        unsigned d = distance(attr, len, tunables[t].name, strlen(tunables[t].name));
        if (d < bd) {
            bd = d;
            best = (int)t;
        }
    }
    if (best >= 0)
        qs_warn("%s: unknown attribute '%s' (did you mean '%s'?)", who, a, tunables[best].name);
    else
        qs_warn("%s: unknown attribute '%s' (the attributes: order, hiwater, freebatch, empty_limit, "
                "empty_decay_ms, stash_bytes, front, cpu_partial, min_partial, pass_through, limit, "
                "batchcount, shared, random, guard_sample, debug, owner_budget, cached_max)",
                who, a);
}

int qs_tune(const char *cache, const char *attr, const char *value)
{
    if (!cache || !attr || !value) {
        errno = EINVAL;
        return -1;
    }
    int t = find_tunable(attr, strlen(attr));
    if (t < 0) {
        char who[80];
        struct qs_buf b = {who, 0, sizeof who};
        qs_buf_str(&b, "tune ");
        qs_buf_str(&b, cache);
        unknown_attribute(who, attr, strlen(attr));
        errno = EINVAL;
        return -1;
    }
    if (PROCESS_T(t) && strcmp(cache, "*") != 0) {
        qs_warn("tune %s %s refused: %s is the process's, one for every cache: name \"*\"", cache,
                tunables[t].name, PROCESS_WHAT(t));
        errno = EINVAL;
        return -1;
    }
    if (PROCESS_T(t)) { /* once, whatever the caches */
        qs_lock_acquire(&qs_global);
        /* (on kmalloc-8, made at start-up: the process's tunables are no
         * cache's, and set_one_locked sets them whatever the cache) */
        int r = set_one_locked(qs_kmalloc_cache_of[0], t, value, strlen(value));
        qs_lock_release(&qs_global);
        if (r == 0 && t == T_CACHED_MAX)
            qs_page_cached_apply(); /* a cap below what is kept: given back now (node.c) */
        return r;
    }
    if (strcmp(cache, "*") == 0) {
        /* every cache, the kmalloc classes not used yet too (made now:
         * one made later would not have the value); stop at the first
         * refusal */
        qs_api_hooks.kmalloc_make_all();
        int r = 0;
        qs_lock_acquire(&qs_global);
        for (qslab_cache *c = qs_caches; c && r == 0; c = c->next)
            r = set_one_locked(c, t, value, strlen(value));
        qs_lock_release(&qs_global);
        return r;
    }
    qslab_cache *c = qs_cache_find(cache);
    if (!c) {
        qs_warn("tune: no cache named %s", cache);
        errno = EINVAL;
        return -1;
    }
    return set_one(c, t, value, strlen(value));
}

int qs_tune_get(const char *cache, const char *attr, unsigned long *out)
{
    if (!cache || !attr || !out) {
        errno = EINVAL;
        return -1;
    }
    int t = find_tunable(attr, strlen(attr));
    if (PROCESS_T(t) && (strcmp(cache, "*") == 0 || qs_cache_find(cache))) {
        /* the process's: the same for every cache */
        *out = t == T_OWNER_BUDGET ? QS_LOAD(qs_owner_budget) : QS_LOAD(qs_cached.max);
        return 0;
    }
    qslab_cache *c = qs_cache_find(cache);
    if (t < 0 || !c) {
        errno = EINVAL;
        return -1;
    }
    *out = t == T_FRONT   ? c->front
           : t == T_DEBUG ? qs_twin_flags(c) /* QS_DBG_* bits, in FZPUTRVQ order */
                          : QS_LOAD(*field(c, (unsigned)t));
    return 0;
}

/* QSLAB_TUNE, read once: at the first cache (kmalloc-8, made by start-up,
 * before any other thread can make one: qs_init_slow's lock) the string is
 * copied and cut into its attr=value pairs, each with its entry's cache
 * name.  What is wrong in it is said then, once, one line a problem, and
 * the pair dropped: an entry without ':', a pair without '=', an unknown
 * attribute (with the nearest name), a value that is not a number (or not a
 * front end), debug (QSLAB_DEBUG's), owner_budget for one cache.  A value
 * out of a cache's range is refused by that cache (set_one_locked's
 * message, for the first cache that refuses that pair only); a cache name
 * is checked at start-up against the kmalloc classes' names
 * (qs_tune_env_check: an unknown kmalloc class) and at exit
 * (qs_tune_env_unused: no cache of another name was made).  Written before any other reader (the first cache), read-only
 * after, but for `refused` and `matched`, relaxed flags. */
#define TUNE_ENV_BYTES 4096
#define TUNE_ENV_SETS 128
static QS_BSS_APART char env_copy[TUNE_ENV_BYTES];
static struct env_set {
    const char *cache, *val, *entry;
    unsigned short clen, vlen, elen;
    signed char t;
    uint8_t refused, matched; /* relaxed */
} env_sets[TUNE_ENV_SETS] QS_BSS_APART;
static unsigned nr_env_sets;

/* "QSLAB_TUNE entry 'e'" (cut at 64 bytes) into buf */
static const char *entry_who(char *buf, size_t cap, const char *e, size_t len)
{
    struct qs_buf b = {buf, 0, cap};
    qs_buf_str(&b, "QSLAB_TUNE entry '");
    for (size_t i = 0; i < len && i < 64; i++)
        qs_buf_putc(&b, e[i]);
    qs_buf_str(&b, len > 64 ? "...'" : "'");
    return buf;
}

static void env_parse(qslab_cache *first)
{
    const char *v = qs_os_getenv("QSLAB_TUNE");
    if (!v)
        return;
    size_t len = strlen(v);
    if (len >= TUNE_ENV_BYTES) {
        qs_warn("QSLAB_TUNE ignored: %u bytes long, at most %u", (unsigned long)len,
                (unsigned long)TUNE_ENV_BYTES - 1);
        return;
    }
    memcpy(env_copy, v, len + 1);
    char who[96];
    for (const char *e = env_copy; *e;) {
        const char *end = strchr(e, ';');
        if (!end)
            end = e + strlen(e);
        size_t elen = (size_t)(end - e);
        const char *colon = memchr(e, ':', elen);
        if (elen == 0) {
            /* an empty entry ("a;;b", a trailing ';'): nothing to say */
        } else if (!colon || colon == e) {
            qs_warn("%s ignored: %s (the form is cache:attr=value[,attr=value...], cache * for every "
                    "cache)", entry_who(who, sizeof who, e, elen), colon ? "no cache name" : "no ':'");
        } else {
            size_t clen = (size_t)(colon - e);
            bool all = clen == 1 && e[0] == '*';
            entry_who(who, sizeof who, e, elen);
            for (const char *a = colon + 1; a < end;) {
                const char *aend = memchr(a, ',', (size_t)(end - a));
                if (!aend)
                    aend = end;
                const char *eq = memchr(a, '=', (size_t)(aend - a));
                const char *val = eq ? eq + 1 : NULL;
                size_t alen = (size_t)((eq ? eq : aend) - a), vlen = eq ? (size_t)(aend - val) : 0;
                int t = find_tunable(a, alen);
                unsigned long num;
                if (alen == 0 && !eq) {
                    /* "cache:" or "a=1,,b=2": nothing */
                } else if (t < 0) {
                    unknown_attribute(who, a, alen);
                } else if (!eq || vlen == 0) {
                    qs_warn("%s: %s has no value (%s=N: %s)", who, tunables[t].name, tunables[t].name,
                            tunables[t].doc);
                } else if (t == T_DEBUG) { /* a twin now would take a kmalloc class's id */
                    qs_warn("%s: debug ignored: QSLAB_DEBUG gives caches their debug flags when they are "
                            "made (docs/debugging.md)", who);
                } else if (PROCESS_T(t) && !all) {
                    qs_warn("%s: %s ignored: %s is the process's, one for every cache: name \"*\"",
                            who, tunables[t].name, PROCESS_WHAT(t));
                } else if (t == T_FRONT && qs_front_find(val, vlen) < 0 &&
                           !(parse_ulong(val, vlen, &num) && num < QS_FRONT_NAMED)) {
                    char f[32];
                    size_t n = vlen < sizeof(f) - 1 ? vlen : sizeof(f) - 1;
                    memcpy(f, val, n);
                    f[n] = '\0';
                    qs_warn("%s: front=%s ignored: not a front end (" QS_FRONT_NAMES ")", who, f);
                } else if (t != T_FRONT && !parse_ulong(val, vlen, &num)) {
                    char f[32];
                    size_t n = vlen < sizeof(f) - 1 ? vlen : sizeof(f) - 1;
                    memcpy(f, val, n);
                    f[n] = '\0';
                    qs_warn("%s: %s=%s ignored: not a number (%s, in %s)", who, tunables[t].name, f,
                            tunables[t].doc, tunables[t].unit);
                } else if (PROCESS_T(t)) { /* the process's: once, now */
                    (void)set_one(first, t, val, vlen);
                } else if (nr_env_sets == TUNE_ENV_SETS) {
                    qs_warn("%s: %s ignored: QSLAB_TUNE sets at most %u attributes", who,
                            tunables[t].name, (unsigned long)TUNE_ENV_SETS);
                } else {
                    env_sets[nr_env_sets++] = (struct env_set){
                        .cache = e, .clen = (unsigned short)clen, .val = val, .vlen = (unsigned short)vlen,
                        .entry = e, .elen = (unsigned short)elen, .t = (signed char)t};
                }
                a = aend + 1;
            }
        }
        e = end + (*end == ';');
    }
}

/* Apply the QSLAB_TUNE entries that name cache c (or '*'), in order. */
QS_STARTUP void qs_tune_apply_env(qslab_cache *c)
{
    static int parsed;
    if (!__atomic_exchange_n(&parsed, 1, __ATOMIC_RELAXED))
        env_parse(c);
    if (QS_RANDOM_DEFAULT) /* the default `random`, once c has its id (core/slab.c) */
        (void)set_one(c, T_RANDOM, "1", 1);
    size_t nlen = strlen(c->name);
    for (unsigned i = 0; i < nr_env_sets; i++) {
        struct env_set *e = &env_sets[i];
        bool all = e->clen == 1 && e->cache[0] == '*';
        if (!all && (e->clen != nlen || memcmp(e->cache, c->name, nlen) != 0))
            continue;
        if (!all && !__atomic_load_n(&e->matched, __ATOMIC_RELAXED))
            __atomic_store_n(&e->matched, 1, __ATOMIC_RELAXED);
        /* a refusal (a range, which may depend on the object size) is
         * said for the first cache that refuses the pair, with its entry */
        char text[512], who[96];
        struct qs_buf b = {text, 0, sizeof text};
        struct qs_buf *outer = qs_warn_capture(&b);
        int r = set_one(c, e->t, e->val, e->vlen);
        qs_warn_capture(outer);
        if (r != 0 && b.len > 7 && !__atomic_exchange_n(&e->refused, 1, __ATOMIC_RELAXED)) {
            if (text[b.len - 1] == '\n')
                text[b.len - 1] = '\0';
            qs_warn("%s: %s", entry_who(who, sizeof who, e->entry, e->elen), text + 7 /* "qslab: " */);
        }
    }
}

/* Is env_sets[i] its entry's first pair (one line an entry)?  Its cache
 * name into name[cap] then. */
static bool entry_first(unsigned i, char *name, size_t cap)
{
    const struct env_set *e = &env_sets[i];
    for (unsigned k = 0; k < i; k++)
        if (env_sets[k].entry == e->entry)
            return false;
    size_t n = e->clen < cap - 1 ? e->clen : cap - 1;
    memcpy(name, e->cache, n);
    name[n] = '\0';
    return true;
}

/* Start-up: a QSLAB_TUNE entry naming a kmalloc class that is none is
 * said now, with the nearest class. */
QS_STARTUP void qs_tune_env_check(void)
{
    for (unsigned i = 0; i < nr_env_sets; i++) {
        struct env_set *e = &env_sets[i];
        /* (a class is made on its first use, its entries applied then) */
        if (e->clen <= 8 || memcmp(e->cache, "kmalloc-", 8) != 0 ||
            qs_kmalloc_class_named(e->cache, e->clen) >= 0)
            continue;
        char who[96], name[64];
        if (!entry_first(i, name, sizeof name))
            continue;
        char served[QS_NAME_MAX];
        const char *near = qs_kmalloc_serving(name, served, sizeof served);
        if (near)
            qs_warn("%s ignored: unknown cache '%s' (a request of %s bytes is served by %s)",
                    entry_who(who, sizeof who, e->entry, e->elen), name, name + 8, near);
        else
            qs_warn("%s ignored: unknown cache '%s' (the kmalloc classes are kmalloc-8 to "
                    "kmalloc-33554432, named by their object size)",
                    entry_who(who, sizeof who, e->entry, e->elen), name);
    }
}

/* At exit: an entry naming a cache that was never made. */
QS_STARTUP void qs_tune_env_unused(void)
{
    for (unsigned i = 0; i < nr_env_sets; i++) {
        struct env_set *e = &env_sets[i];
        if (__atomic_load_n(&e->matched, __ATOMIC_RELAXED) || (e->clen == 1 && e->cache[0] == '*') ||
            (e->clen > 8 && memcmp(e->cache, "kmalloc-", 8) == 0)) /* (said at start-up) */
            continue;
        char who[96], name[64];
        if (!entry_first(i, name, sizeof name))
            continue;
        qs_warn("%s was not used: no cache named '%s' was made", entry_who(who, sizeof who, e->entry, e->elen),
                name);
    }
}
