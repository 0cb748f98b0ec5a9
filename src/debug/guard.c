/*
 * guard.c - sampled guarded allocations (QSLAB_GUARD_SAMPLE=N): the kernel's
 * KFENCE, GWP-ASan in user space.  docs/debugging.md, "Guarded sampling",
 * tells how to use it; docs/design.md, "Guarded sampling", argues the
 * mechanism.
 *
 * THE POOL.  One mapping, made on the first sample: a leading guard page,
 * then per slot one data page and one guard page.  Guard pages are always
 * PROT_NONE; a slot's data page is read-write while its object is live and
 * PROT_NONE otherwise.  The object lies flush against the right guard page
 * (an overflow faults at its first byte past the object), or, every other
 * sample, flush against the left one (an underflow faults); what alignment
 * leaves between the object and its page's ends is filled with a pattern
 * checked at the free (a red zone).  Freed slots are reused oldest first,
 * and only once no slot was ever used, so a use after free keeps faulting
 * for as long as the pool allows.  The pool is not in qslab's unit map:
 * qs_chunk_of and qs_slab_fast never resolve one of its pointers, so every
 * free path reaches its fallback (qs_free_other, cache_free_other, usable,
 * realloc, free_sized), where one range compare recognises it.
 *
 * WHO IS SAMPLED.  Objects up to a page (and alignments up to a page) of
 * caches without debug flags.  One allocation in about N, counted without
 * touching the fast paths: at each allocation slow path a queue's
 * allocations since its last sample (fast pops, from top, plus slow ones)
 * are compared with its threshold (N times a uniform 0.5..1.5); the front
 * ends without queues count their allocations (all slow) per thread.  A
 * workload whose allocations never leave the fast path (an alloc/free pair)
 * is reached by the sampler thread: every QS_GUARD_TICK_MS it arms the
 * queues whose count is due (guard_armed, and limit 0), the owner's next
 * own free misses its fast path, its slow path empties the queue
 * (qs_guard_armed_free), and the next allocation is a slow one.
 *
 * THE FAULT.  The debug layer's fault handler (fault.c, installed when
 * sampling is on) asks qs_guard_fault first, which reports an access to
 * the pool with the object's cache, the offset, and both owners; the
 * process then dies of SIGSEGV.  A fatal handler the program installed is
 * called instead (qslab_set_fatal_handler); if it returns, the pages are
 * opened and the slot is never reused, so the program goes on.
 */
#define _GNU_SOURCE
#include "front/fastpath.h"
#include "front/front.h"
#include "debug/debug.h"
#include "owner/owner.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define QS_GUARD_DEFAULT_SLOTS 64
#define QS_GUARD_MAX_SLOTS 16384
#define QS_GUARD_TICK_MS 10
#define QS_GUARD_FILL 0xfb /* the bytes of a data page around its object */

unsigned long qs_guard_rate;
/* qs_guard_on, the slow paths' flag, is core's (core/hooks.h): set here */
static int guard_enabled;
uintptr_t qs_guard_lo, qs_guard_hi;

enum { SLOT_UNUSED, SLOT_LIVE, SLOT_FREED, SLOT_BROKEN };

struct gslot {
    char *obj;           /* the object (in the slot's data page) */
    uint32_t size;       /* its usable size */
    uint8_t state;       /* SLOT_* */
    uint8_t left;        /* placed against the left guard page */
    int16_t node;        /* the node it counts on (qslab_object_node) */
    qslab_cache *cache;
    char name[QS_NAME_MAX]; /* the cache's name (it may be destroyed) */
    uint32_t next_freed; /* the freed FIFO's link (index + 1; 0: end) */
    _Alignas(8) unsigned char track[2][QS_TRACK_BYTES]; /* alloc, free (track.c's) */
};

static unsigned nr_slots = QS_GUARD_DEFAULT_SLOTS;
static qs_lock pool_lock;
static char *pool;                 /* the mapping, once made */
static struct gslot *slots;        /* [nr_slots] */
static unsigned next_unused;       /* slots never used: next_unused .. nr_slots */
static uint32_t freed_head, freed_tail; /* index + 1 */
static bool pool_failed;
static unsigned long nr_samples_taken; /* all pool_lock'd except faults */
static unsigned long nr_pool_full, nr_faults, nr_frees, nr_live;

static char *slot_page(unsigned i)
{
    return pool + QS_PAGE_SIZE * (1 + 2 * (size_t)i);
}

/* ---- the environment ---- */

/* A decimal number in 0..max, or -1. */
static long parse_num(const char *s, unsigned long max)
{
    unsigned long v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            return -1;
    }
    return (long)v;
}

QS_STARTUP void qs_guard_init(void)
{
    const char *v = qs_os_getenv("QSLAB_GUARD_SAMPLE");
    if (!v)
        return;
    long n = parse_num(v, QS_GUARD_MAX_RATE);
    if (n < 0) {
        qs_warn("QSLAB_GUARD_SAMPLE=%s ignored: %sallowed range is 1..%u (one allocation in N "
                "guarded), or 0 (off); sampling is off",
                v, qs_env_why(v), QS_GUARD_MAX_RATE);
        return;
    }
    if (n == 0)
        return;
    const char *sv = qs_os_getenv("QSLAB_GUARD_SLOTS");
    if (sv) {
        long k = parse_num(sv, QS_GUARD_MAX_SLOTS);
        if (k < 1)
            qs_warn("QSLAB_GUARD_SLOTS=%s ignored: %sallowed range is 1..%u; %u slots", sv, qs_env_why(sv),
                    (unsigned long)QS_GUARD_MAX_SLOTS, (unsigned long)QS_GUARD_DEFAULT_SLOTS);
        else
            nr_slots = (unsigned)k;
    }
    __atomic_store_n(&qs_guard_rate, (unsigned long)n, __ATOMIC_RELAXED);
    qs_guard_enable(false);
}

/* Sampling is wanted (the environment, or a cache's tunable guard_sample):
 * the fault handler, then the slow paths' flag. */
void qs_guard_enable(bool locked)
{
    int st = 0;
    if (__atomic_compare_exchange_n(&guard_enabled, &st, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        qs_fault_install();
        __atomic_store_n(&qs_guard_on, 1, __ATOMIC_RELEASE);
        /* SLUB's allocations to their slow path, where they are counted */
        if (!locked)
            qs_lock_acquire(&qs_global);
        qs_front_fast_all();
        if (!locked)
            qs_lock_release(&qs_global);
    }
}

/* ---- sampling: when ---- */

/* A threshold: n times a uniform 0.5 .. 1.5, at least 1. */
static uint32_t threshold(unsigned long n)
{
    static __thread uint64_t rnd;
    if (!rnd)
        rnd = qs_os_random64() | 1;
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    unsigned long t = n / 2 + (unsigned long)((rnd >> 11) % (n + 1));
    return t ? (t > UINT32_MAX ? UINT32_MAX : (uint32_t)t) : 1;
}

/* A queue's allocations so far: fast pops (top) and slow ones. */
static unsigned long queue_allocs(struct qs_queue *q)
{
    return (unsigned long)QS_TOP_POPS(QS_LOAD(q->top)) + QS_LOAD(q->stat[QS_ALLOC_SLOW]);
}

/* Is a sample due on q (the owner: a CPU's queue locked)?  Consumes it. */
static bool queue_due(struct qs_queue *q, unsigned long rate)
{
    unsigned long now = queue_allocs(q) + 1; /* and this one */
    if (!q->guard_thresh) { /* the first look: start counting */
        __atomic_store_n(&q->guard_mark, now - 1, __ATOMIC_RELAXED);
        __atomic_store_n(&q->guard_thresh, threshold(rate), __ATOMIC_RELAXED);
    }
    bool armed = __atomic_load_n(&q->guard_armed, __ATOMIC_RELAXED);
    if (!armed && now - q->guard_mark < q->guard_thresh)
        return false;
    /* the sample never reaches the queue's counts: the mark leaves it out */
    __atomic_store_n(&q->guard_mark, now - 1, __ATOMIC_RELAXED);
    __atomic_store_n(&q->guard_thresh, threshold(rate), __ATOMIC_RELAXED);
    if (armed) {
        __atomic_store_n(&q->guard_armed, 0, __ATOMIC_RELAXED);
        qs_queue_limit_set(q); /* as the slow frees do */
    }
    return true;
}

static __thread long thread_countdown;
static int sampler_state; /* 0 not started, 1 running */

static void sampler_start(void);

/* Is a sample due for an allocation of c by the caller?  *node: the node
 * the allocation is for (the queue's, or the caller's CPU's). */
static bool due(qslab_cache *c, int *node)
{
    int cpu = qs_os_current_cpu();
    *node = qs_node_of_cpu(cpu >= 0 ? cpu : 0);
    unsigned long rate = QS_LOAD(c->guard_sample);
    if (!rate)
        rate = qs_guard_rate;
    if (!rate)
        return false;
    if (qs_front_of(c)->queues) { /* SLQB's, SLAB's arrays */
        if (qs_front_of(c)->owns_slabs)
            sampler_start();
        struct qs_queue *q = qs_queue_of(c);
        if (!q)
            q = qs_queue_attach(c); /* what the slow path does next */
        if (q)
            *node = q->node;
        if (q && qs_percpu()) {
            qs_lock_acquire(&q->lock);
            bool d = queue_due(q, rate);
            qs_lock_release(&q->lock);
            return d;
        }
        if (q)
            return queue_due(q, rate);
    }
    /* no queue (another front end, or none yet): the thread counts */
    if (--thread_countdown > 0)
        return false;
    thread_countdown = threshold(rate);
    return true;
}

/* ---- the sampler thread ---- */

static void *sampler_main(void *arg)
{
    qs_os_thread_name("qslab-sampler");
    for (;;) {
        qs_os_sleep_ms(QS_GUARD_TICK_MS);
        qs_lock_acquire(&qs_global);
        for (qslab_cache *c = qs_caches; c; c = c->next) {
            if (!qs_front_of(c)->owns_slabs || c->debug)
                continue;
            for (struct qs_queue *q = c->queues; q; q = q->all_next) {
                uint32_t t = __atomic_load_n(&q->guard_thresh, __ATOMIC_RELAXED);
                if (!t || !q->owner || __atomic_load_n(&q->guard_armed, __ATOMIC_RELAXED))
                    continue;
                if (queue_allocs(q) - __atomic_load_n(&q->guard_mark, __ATOMIC_RELAXED) < t)
                    continue;
                /* the flag first: an owner that meets limit 0 without it
                 * restores limit, and the arm waits for its next slow path */
                __atomic_store_n(&q->guard_armed, 1, __ATOMIC_RELAXED);
                QS_STORE(q->limit, 0);
            }
        }
        qs_lock_release(&qs_global);
    }
    return arg;
}

/* From an allocation slow path: pthread_create is safe there (node.c). */
static void sampler_start(void)
{
    if (likely(__atomic_load_n(&sampler_state, __ATOMIC_RELAXED)))
        return;
    int st = 0;
    if (!__atomic_compare_exchange_n(&sampler_state, &st, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (qs_os_thread_start(sampler_main, NULL) != 0)
        __atomic_store_n(&sampler_state, 0, __ATOMIC_RELAXED);
}

void qs_guard_armed_free(qslab_cache *c, struct qs_queue *q)
{
    unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
    if (!nr) /* emptied by an earlier free: frees go to their slabs meanwhile */
        return;
    if (q->cpu < 0)
        qs_queue_flush(c, q, nr);
    else
        qs_percpu_empty(c, q); /* q->lock held: as a shrink empties it */
}

/* ---- the pool ---- */

/* pool_lock held: map the pool (once). */
static bool pool_map(void)
{
    if (pool)
        return true;
    if (pool_failed)
        return false;
    size_t len = QS_PAGE_SIZE * (1 + 2 * (size_t)nr_slots);
    size_t meta = (sizeof(struct gslot) * nr_slots + QS_PAGE_SIZE - 1) & ~(QS_PAGE_SIZE - 1);
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *m = mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || m == MAP_FAILED) {
        if (p != MAP_FAILED)
            munmap(p, len);
        if (m != MAP_FAILED)
            munmap(m, meta);
        pool_failed = true;
        qs_warn("QSLAB_GUARD_SAMPLE: the guard pool (%u slots) could not be mapped; no samples",
                (unsigned long)nr_slots);
        return false;
    }
    slots = m;
    pool = p;
    __atomic_store_n(&qs_guard_lo, (uintptr_t)p, __ATOMIC_RELAXED);
    __atomic_store_n(&qs_guard_hi, (uintptr_t)p + len, __ATOMIC_RELEASE);
    return true;
}

/* The alignment a sample of c keeps: the cache's, and malloc's 16 bytes
 * for a kmalloc class of 16 bytes and more (8 below). */
static size_t sample_align(const qslab_cache *c)
{
    size_t a = c->align > 8 ? c->align : 8;
    if (c->is_kmalloc && c->slot_size >= 16 && a < 16)
        a = 16;
    return a;
}

void *qs_guard_alloc(qslab_cache *c, size_t size)
{
    if (c->debug)
        return NULL;
    size_t a = sample_align(c);
    if (!size)
        size = c->is_kmalloc ? c->slot_size : c->obj_size;
    int node;
    if (size > QS_PAGE_SIZE || a > QS_PAGE_SIZE || c->obj_size > QS_PAGE_SIZE || !due(c, &node))
        return NULL;
    qs_lock_acquire(&pool_lock);
    if (!pool_map()) {
        qs_lock_release(&pool_lock);
        return NULL;
    }
    unsigned i;
    if (next_unused < nr_slots) {
        i = next_unused++;
    } else if (freed_head) {
        i = freed_head - 1;
        freed_head = slots[i].next_freed;
        if (!freed_head)
            freed_tail = 0;
    } else {
        nr_pool_full++;
        qs_lock_release(&pool_lock);
        return NULL;
    }
    struct gslot *g = &slots[i];
    char *page = slot_page(i);
    bool left = nr_samples_taken & 1; /* every other sample */
    nr_samples_taken++;
    nr_live++;
    g->state = SLOT_LIVE;
    g->left = left;
    g->cache = c;
    g->node = (int16_t)node;
    g->size = (uint32_t)size;
    memcpy(g->name, c->name, QS_NAME_MAX);
    g->name[QS_NAME_MAX - 1] = '\0';
    g->obj = left ? page : page + ((QS_PAGE_SIZE - size) & ~(a - 1));
    memset(g->track[1], 0, QS_TRACK_BYTES);
    qs_lock_release(&pool_lock);
    /* the slot is ours now */
    mprotect(page, QS_PAGE_SIZE, PROT_READ | PROT_WRITE);
    memset(page, QS_GUARD_FILL, QS_PAGE_SIZE);
    if (!c->ctor)
        memset(g->obj, 0, size);
    qs_track_record(g->track[0]);
    if (c->ctor)
        c->ctor(g->obj);
    /* counted as the cache's allocation (a slow one, with no queue: its
     * counts stay the owner's), and as a sample that is in no slab
     * (validate.c adds these to what it finds in slabs) */
    __atomic_fetch_add(&c->guard_live, 1, __ATOMIC_RELAXED);
    qs_stat(c, NULL, QS_ALLOC_SLOW, 1);
    if (qs_real_numa) /* where its page really is (first touched here, or kept) */
        g->node = (int16_t)qs_os_page_node(page);
    return g->obj;
}

/* ---- reports ---- */

static void put_line(struct qs_buf *b, const char *a, const char *s)
{
    qs_buf_str(b, a);
    if (s)
        qs_buf_str(b, s);
    qs_report_line(b);
}

static void put_off(struct qs_buf *b, long off)
{
    if (off < 0) {
        qs_buf_putc(b, '-');
        qs_buf_u64(b, (uint64_t)-off);
    } else {
        qs_buf_u64(b, (uint64_t)off);
    }
}

/* The report of slot i: first line, the access (addr, or none), the object
 * and its owners. */
static void report(unsigned i, const char *cache, const char *what, const void *addr,
                   const char *access, const char *detail)
{
    struct gslot *g = &slots[i];
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "BUG ");
    qs_buf_str(&b, cache);
    qs_buf_str(&b, ": ");
    put_line(&b, what, NULL);
    put_line(&b, "-----------------------------------------------------------------------------",
             NULL);
    if (addr) {
        qs_buf_str(&b, access);
        qs_buf_str(&b, " at ");
        qs_buf_hex(&b, (uintptr_t)addr);
        qs_buf_str(&b, " @offset=");
        put_off(&b, (long)((const char *)addr - g->obj));
        qs_report_line(&b);
    }
    if (detail)
        put_line(&b, detail, NULL);
    qs_buf_str(&b, "Object ");
    qs_buf_hex(&b, (uintptr_t)g->obj);
    qs_buf_str(&b, " (");
    qs_buf_u64(&b, g->size);
    qs_buf_str(&b, " bytes) of cache ");
    qs_buf_str(&b, g->name);
    qs_buf_str(&b, ", guarded: slot ");
    qs_buf_u64(&b, i);
    qs_buf_str(&b, " of ");
    qs_buf_u64(&b, nr_slots);
    qs_buf_str(&b, g->left ? ", against its left guard page" : ", against its right guard page");
    qs_buf_str(&b, g->state == SLOT_LIVE ? ", allocated" : ", free");
    qs_report_line(&b);
    qs_track_print(&b, "Allocated", g->track[0]);
    qs_track_print(&b, "Freed", g->track[1]);
}

/* After a report at a free of p: the fatal handler (by default: abort),
 * naming the object, and p when it is not the object's start. */
static void conclude(const char *cache, const char *what, const void *p, const void *obj)
{
    if (p == obj)
        qs_fatal("BUG %s: %s (object %p)", cache, what, obj);
    else
        qs_fatal("BUG %s: %s (pointer %p, object %p)", cache, what, p, obj);
}

/* ---- frees ---- */

/* The slot of a pointer into a data page; -1 for a guard page. */
static long slot_of(const void *p)
{
    size_t page = ((uintptr_t)p - (uintptr_t)pool) / QS_PAGE_SIZE;
    return (page & 1) ? (long)(page / 2) : -1;
}

/* The first byte of [p, p + n) that is not the fill, or NULL. */
static const uint8_t *fill_broken(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != QS_GUARD_FILL)
            return p + i;
    return NULL;
}

void qs_guard_free(qslab_cache *expected, void *p)
{
    long si = slot_of(p);
    if (si < 0 || (unsigned long)si >= nr_slots) {
        qs_fatal("invalid free of %p: not an allocated object (a guard page of the guard pool)", p);
        return;
    }
    unsigned i = (unsigned)si;
    struct gslot *g = &slots[i];
    qs_lock_acquire(&pool_lock);
    if (g->state == SLOT_UNUSED) { /* no object, no cache to name */
        qs_lock_release(&pool_lock);
        qs_fatal("invalid free of %p: not an allocated object (a guarded slot never used)", p);
        return;
    }
    const char *problem = NULL, *cache = g->name;
    const void *obj = g->obj;
    char detail[160];
    struct qs_buf d = {detail, 0, sizeof(detail)};
    detail[0] = '\0';
    if (g->state == SLOT_FREED) {
        problem = "Object already free";
    } else if (g->state != SLOT_LIVE) {
        problem = "Invalid object pointer";
        qs_buf_str(&d, "No object in this guard slot");
    } else if ((char *)p != g->obj) {
        problem = "Invalid object pointer";
        qs_buf_str(&d, "Pointer ");
        qs_buf_hex(&d, (uintptr_t)p);
        qs_buf_str(&d, " @offset=");
        put_off(&d, (long)((char *)p - g->obj));
        qs_buf_str(&d, ": not the object's start");
    } else if (expected && expected != g->cache) {
        problem = "Wrong cache";
        qs_buf_str(&d, "Freed to cache ");
        qs_buf_str(&d, expected->name);
    }
    if (problem) {
        report(i, cache, problem, NULL, NULL, detail[0] ? detail : NULL);
        qs_lock_release(&pool_lock);
        conclude(cache, problem, p, obj);
        return; /* the handler returned: not freed */
    }
    /* the red zones: the page's bytes around the object */
    char *page = (char *)((uintptr_t)g->obj & ~(QS_PAGE_SIZE - 1));
    const uint8_t *bad = fill_broken((uint8_t *)page, (size_t)(g->obj - page));
    const char *zone = "Left Redzone overwritten";
    if (!bad) {
        char *end = g->obj + g->size;
        bad = fill_broken((uint8_t *)end, (size_t)(page + QS_PAGE_SIZE - end));
        zone = "Right Redzone overwritten";
    }
    g->state = SLOT_FREED;
    nr_frees++;
    nr_live--;
    /* a fast free in the counts: SLUB's slow frees are its remote ones */
    qs_stat(g->cache, NULL, QS_FREE_FAST, 1);
    __atomic_fetch_sub(&g->cache->guard_live, 1, __ATOMIC_RELAXED);
    qs_track_record(g->track[1]);
    if (bad) {
        qs_buf_str(&d, "First byte ");
        qs_buf_hex(&d, *bad);
        qs_buf_str(&d, " instead of ");
        qs_buf_hex(&d, QS_GUARD_FILL);
        report(i, cache, zone, bad, "Overwritten byte", detail);
    }
    mprotect(page, QS_PAGE_SIZE, PROT_NONE);
    g->next_freed = 0;
    if (freed_tail)
        slots[freed_tail - 1].next_freed = i + 1;
    else
        freed_head = i + 1;
    freed_tail = i + 1;
    qs_lock_release(&pool_lock);
    if (bad)
        conclude(cache, zone, p, p); /* freed all the same */
}

size_t qs_guard_usable(const void *p, const char *what)
{
    long si = slot_of(p);
    if (si >= 0 && (unsigned long)si < nr_slots) {
        struct gslot *g = &slots[si];
        if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == SLOT_LIVE && g->obj == p)
            return g->size;
    }
    qs_fatal("invalid %s of %p: not a live guarded object", what, p);
    return 0;
}

/* ---- the fault ---- */

bool qs_guard_fault(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    uintptr_t lo = __atomic_load_n(&qs_guard_lo, __ATOMIC_RELAXED),
              hi = __atomic_load_n(&qs_guard_hi, __ATOMIC_ACQUIRE);
    if (!hi || a - lo >= hi - lo || (sig == SIGSEGV && si->si_code != SEGV_ACCERR))
        return false;
    __atomic_fetch_add(&nr_faults, 1, __ATOMIC_RELAXED);
    const char *access = qs_fault_access(uc);
    size_t page = (a - lo) / QS_PAGE_SIZE;
    long i;
    const char *what;
    char *open = (char *)(lo + page * QS_PAGE_SIZE);
    if (page & 1) { /* a data page: its object was freed (or never given) */
        i = (long)(page / 2);
        what = "use after free in guarded object";
        if (slots[i].state != SLOT_FREED) {
            what = "access to an unused guarded slot";
            i = -1;
        }
    } else { /* a guard page: the nearer of its two neighbours' objects */
        long l = (long)page / 2 - 1, r = (long)page / 2;
        uintptr_t dl = UINTPTR_MAX, dr = UINTPTR_MAX;
        if (l >= 0 && slots[l].state != SLOT_UNUSED)
            dl = a - (uintptr_t)(slots[l].obj + slots[l].size);
        if ((unsigned long)r < nr_slots && slots[r].state != SLOT_UNUSED)
            dr = (uintptr_t)slots[r].obj - a;
        i = dl <= dr ? l : r;
        what = "out-of-bounds access to guarded object";
        if (dl == UINTPTR_MAX && dr == UINTPTR_MAX)
            i = -1;
        else if (slots[i].state == SLOT_FREED)
            what = "out-of-bounds access to freed guarded object";
    }
    const char *cache = i >= 0 ? slots[i].name : "guard";
    if (i >= 0) {
        char detail[128];
        struct qs_buf d = {detail, 0, sizeof(detail)};
        qs_buf_str(&d, slots[i].left ? "Placed left: " : "Placed right: ");
        qs_buf_u64(&d, slots[i].size);
        qs_buf_str(&d, "-byte object, guard page fault");
        if (page & 1) {
            d.len = 0;
            qs_buf_str(&d, "The object's page is protected since its free");
        }
        report((unsigned)i, cache, what, (void *)a, access, detail);
    } else {
        char text[160];
        struct qs_buf b = {text, 0, sizeof(text)};
        qs_buf_str(&b, "BUG guard: ");
        put_line(&b, what, NULL);
    }
    if (qs_fault_conclude(sig, cache, what, i >= 0 ? slots[i].obj : NULL, a)) {
        /* the program's fatal handler returned: open the page for good
         * (the slot is never reused; a guard page's neighbours lose that
         * guard) and retry the access */
        if (i >= 0)
            slots[i].state = SLOT_BROKEN;
        mprotect(open, QS_PAGE_SIZE, PROT_READ | PROT_WRITE);
    }
    return true;
}

/* ---- fork, statistics ---- */

void qs_guard_fork(int phase)
{
    if (!QS_LOAD(qs_guard_on))
        return;
    if (phase == 0)
        qs_lock_acquire(&pool_lock);
    else if (phase == 1)
        qs_lock_release(&pool_lock);
    else /* the child, after phase 1: threads do not survive fork */
        __atomic_store_n(&sampler_state, 0, __ATOMIC_RELAXED);
}

QSLAB_EXPORT void qslab_guard_stats(struct qslab_guard_stats *st)
{
    qs_lock_acquire(&pool_lock);
    st->rate = qs_guard_rate;
    st->slots = QS_LOAD(qs_guard_on) ? nr_slots : 0;
    st->samples = nr_samples_taken;
    st->pool_full = nr_pool_full;
    st->frees = nr_frees;
    st->live = nr_live;
    st->faults = __atomic_load_n(&nr_faults, __ATOMIC_RELAXED);
    qs_lock_release(&pool_lock);
}

int qs_guard_node(const void *p)
{
    long si = slot_of(p);
    return si >= 0 && (unsigned long)si < nr_slots ? slots[si].node : -1;
}

QSLAB_EXPORT int qslab_guarded(const void *p)
{
    if (!qs_guard_owns(p))
        return 0;
    long si = slot_of(p);
    return si >= 0 && (unsigned long)si < nr_slots &&
           __atomic_load_n(&slots[si].state, __ATOMIC_ACQUIRE) == SLOT_LIVE;
}

void qs_guard_report(int fd)
{
    if (!QS_LOAD(qs_guard_on))
        return;
    struct qslab_guard_stats st;
    qslab_guard_stats(&st);
    char text[256];
    struct qs_buf b = {text, 0, sizeof(text)};
    if (st.rate) {
        qs_buf_str(&b, "Guard: 1 in ");
        qs_buf_u64(&b, st.rate);
    } else {
        qs_buf_str(&b, "Guard: per cache (guard_sample)");
    }
    qs_buf_str(&b, ", samples ");
    qs_buf_u64(&b, st.samples);
    qs_buf_str(&b, ", live ");
    qs_buf_u64(&b, st.live);
    qs_buf_str(&b, " of ");
    qs_buf_u64(&b, st.slots);
    qs_buf_str(&b, " slots, pool full ");
    qs_buf_u64(&b, st.pool_full);
    qs_buf_str(&b, ", faults ");
    qs_buf_u64(&b, st.faults);
    qs_buf_putc(&b, '\n');
    qs_os_write(fd, text, b.len);
}
