/*
 * slub.c - the SLUB front end, after Linux's mm/slub.c (Christoph Lameter's
 * "unqueued" slab allocator, the kernel's default from 2.6.23; this follows
 * its 6.8 form: partial slabs on an owner's list are not frozen).
 *
 * NO QUEUES OF OBJECTS.  An owner (a CPU through rseq, or a thread: the
 * owner abstraction of SLQB, owner.c) has one active slab and allocates from
 * that slab's objects, linked through their link words (q->sl.freelist, the
 * kernel's c->freelist); it frees an object of its active slab back onto
 * that list.  Both without a lock or an atomic read-modify-write: a thread's
 * list is its own, a CPU's is changed only by restartable sequences on that
 * CPU (pc_pop, pc_push below: the kernel's this_cpu_cmpxchg_double with its
 * transaction id, which detects exactly what rseq aborts on: preemption and
 * migration between reading the list and committing).  Every other free goes
 * straight to its slab's own free list by compare-and-swap (slab_free: the
 * kernel's __slab_free), whoever frees and whatever slab: no batching, no
 * inbox, no owner to route to.  That is SLUB's bet against SLAB's and SLQB's
 * queues: no memory held in queues, no queue to drain, at the price of a
 * CAS on a shared line for every free that misses the active slab.
 *
 * THE SLAB WORD.  A SLUB slab's free list and counters live in one 64-bit
 * word, s->fw (the kernel's freelist + counters pair, which needs a double
 * CAS; here the head is an object index, so one word holds it all):
 *   bits  0..23  the first free object's index + 1 (0: none)
 *   bits 24..47  inuse: objects not on this list (allocated, or on an
 *                owner's freelist)
 *   bit  48      frozen: the slab is an owner's active slab
 * Free objects link through their link words with cache->secret's encoding
 * (as everywhere in qslab), so validation, the empty-slab FIFO and the
 * double-free checks read SLUB's lists like SLQB's.  ABA: only one thread
 * at a time takes objects off a slab's list (its owner, or the holder of
 * its node's lock), and the inuse count changes with every take and free.
 *
 * SLAB STATES (s->state, written relaxed, read under the node lock or by
 * validation; each change is made by whoever holds the slab then):
 *   ACTIVE       frozen, q->sl.slab of one owner; frees by others go to fw
 *                without any list change (the kernel's FREE_FROZEN)
 *   CPU_PARTIAL  unfrozen, on one owner's partial list (q->sl.partial,
 *                ->next linked, at most cpu_partial_slabs(c) of them)
 *   PARTIAL      unfrozen, on its node's partial list (node->list.partial,
 *                under node->lock)
 *   FULL         unfrozen, no free object, on no list: nobody knows it but
 *                its objects' holders.  The free that finds it full (the
 *                CAS that sees no head) owns it and puts it on its owner's
 *                partial list (put_cpu_partial): one free in every slab's
 *                life pays for it, the rest is one CAS each.
 *   EMPTY        given back (inuse 0, more than min_partial partial slabs
 *                on the node): the shared empty-slab FIFO (node.c), which
 *                plays the page allocator's part with its decay
 *   PASS         a kmalloc block straight from the page layer (pass_through)
 * Transitions and who makes them:
 *   new / FIFO / node PARTIAL / CPU_PARTIAL -> ACTIVE    the owner (freeze)
 *   ACTIVE -> FULL (no remote frees) or PARTIAL/EMPTY    the owner
 *                                                        (get_freelist, deactivate)
 *   FULL -> CPU_PARTIAL (or the node's PARTIAL for another node's slab)
 *                                                        the freer that saw it full
 *   CPU_PARTIAL -> PARTIAL or EMPTY                      the owner, when its list
 *                                                        is full (put_partials)
 *   PARTIAL -> EMPTY                                     the freer that empties it,
 *                                                        under the node lock
 *   PARTIAL -> FULL                                      alloc_single, under the
 *                                                        node lock
 * The node lock is taken by a free only when an unfrozen slab with free
 * objects becomes empty (the kernel's rule), before its CAS, so the check
 * "is it on the node list" and the removal are one step.
 *
 * PER-CPU OWNERS.  q->sl.freelist and q->sl.slab are changed by the fast
 * paths' sections on q->cpu (pop: freelist; push: freelist, for an object of
 * q->sl.slab), and by the slow paths, which hold q->lock: they detach
 * (the list in a section, then slab to NULL: pc_detach) and install (slab, then the
 * list, only if the list is still empty: a push in between is merged) with
 * sections on q->cpu, or take the queue from its CPU (qs_percpu_take).  An
 * object on a CPU's list may belong to another slab than q->sl.slab (a slow
 * path that migrated away from q->cpu clears q->sl.slab and gives its slab
 * back while a push there may still land): every object on an owner's list
 * counts as in use in its own slab's word, so wherever it is popped or
 * given back, the counts hold.  q->sl.partial is the lock holder's only.
 *
 * COUNTERS (per owner): alloc_fast and free_fast are q->sl.pops and
 * q->sl.pushes, which a CPU's sections commit together with the list in one
 * 16-byte store (so they count exactly what was committed, without an
 * atomic instruction; stats.c reads them); the rest in q->stat: alloc_slow,
 * free_slow (to the slab's word), remote_free (the same frees: every one is
 * "remote" in SLUB), remote_batch stays 0 (no batching), refill (a new list
 * for the owner: remote frees of its active slab, an own partial slab, a
 * node partial slab, an empty or new slab), flush (slabs unfrozen),
 * node_free (frees that took the node lock), node_alloc.  A CPU's q->stat
 * words are added to atomically (the lock-free frees count on the queue of
 * the CPU they run on, and may have migrated by then); the page-layer
 * counters (new_slab, free_slab...) go through qs_stat under q->lock, or to
 * the cache's orphan counters from the lock-free paths.
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "owner/owner.h"

#include <errno.h>
#include <string.h>

/* ---- the slab word ---- */
#define FW_MASK ((1ULL << 24) - 1)
#define FW_FROZEN (1ULL << 48)
_Static_assert((QS_CHUNK_SIZE << 4) / 8 < FW_MASK, "slab word: an index for every object");

static inline uint32_t fw_head(uint64_t w)
{
    return (uint32_t)(w & FW_MASK);
}
static inline uint32_t fw_inuse(uint64_t w)
{
    return (uint32_t)((w >> 24) & FW_MASK);
}
static inline uint64_t fw_make(uint32_t head, uint32_t inuse, bool frozen)
{
    return (uint64_t)head | (uint64_t)inuse << 24 | (frozen ? FW_FROZEN : 0);
}
static inline uint64_t fw_load(struct qs_slab *s)
{
    return __atomic_load_n(&s->fw, __ATOMIC_ACQUIRE);
}
/* release: the links written before it (a free's, a deactivation's) are
 * seen by whoever takes the list after it (acquire) */
static inline bool fw_cas(struct qs_slab *s, uint64_t *old, uint64_t nw)
{
    return __atomic_compare_exchange_n(&s->fw, old, nw, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
static inline void *idx_obj(const qslab_cache *c, const struct qs_slab *s, uint32_t h)
{
    return h ? s->base + (size_t)(h - 1) * c->slot_size : NULL;
}
/* index + 1 of obj, an object of s: (off * recip) >> 64 is off / slot_size
 * exactly for the multiples of slot_size below 2^32 (recip's rounding
 * error times the index stays below 2^64) */
static inline uint32_t obj_idx(const struct qs_slab *s, const void *obj)
{
    uint64_t off = (uintptr_t)obj - (uintptr_t)s->base;
    return (uint32_t)(((unsigned __int128)off * s->recip) >> 64) + 1;
}
static inline void set_state(struct qs_slab *s, int st)
{
    __atomic_store_n(&s->state, (uint8_t)st, __ATOMIC_RELAXED);
}
static inline int get_state(const struct qs_slab *s)
{
    return __atomic_load_n(&s->state, __ATOMIC_RELAXED);
}
static inline uint32_t slab_objects(const struct qs_slab *s)
{
    return __atomic_load_n(&s->objects, __ATOMIC_RELAXED);
}

/* ---- counters ---- */
static inline void sl_stat(qslab_cache *c, struct qs_queue *q, int item, unsigned long n)
{
    if (!q)
        __atomic_fetch_add(&c->orphan_stat[item], n, __ATOMIC_RELAXED);
    else if (q->cpu >= 0) /* see COUNTERS above */
        __atomic_fetch_add(&q->stat[item], n, __ATOMIC_RELAXED);
    else
        QS_ADD(q->stat[item], n);
}

/* cpu_partial counted the way the seeds settled it (Vlastimil Babka, 2021,
 * in 5.16): the tunable stays in objects, and the list holds at most
 * cpu_partial * 2 / objects-per-slab slabs, whatever they hold; counting
 * the free objects of slabs as they went on the list had let it grow
 * without bound when frees refilled slabs already on it. */
static unsigned cpu_partial_slabs(const qslab_cache *c)
{
    unsigned objs = qs_slab_objects(c, QS_LOAD(c->order));
    unsigned long nr = QS_LOAD(c->cpu_partial);
    if (!nr)
        return 0;
    if (!objs)
        objs = 1;
    return (unsigned)((nr * 2 + objs - 1) / objs);
}

static int owner_node(struct qs_queue *q)
{
    if (q)
        return q->node;
    if (qs_percpu()) {
        int cpu = qs_os_rseq_cpu(qs_rseq_off);
        return qs_node_of_cpu(cpu >= 0 ? cpu : qs_os_current_cpu());
    }
    return qs_self.node;
}

/* ---- misuse ---- */

/* obj's link word looks like a free object's (a link with the cache's tag
 * bits): it is on a free list already if the link is NULL or another
 * object of its slab, which user data matches with odds of 2^-20 at most */
QS_NOINLINE static bool double_free(qslab_cache *c, struct qs_slab *s, void *obj, uintptr_t w)
{
    void *next = (void *)(w ^ c->secret);
    if (next && !qs_slab_valid_obj(s, next))
        return false;
    qs_fatal("double free of %p in cache %s", obj, c->name);
    return true;
}

static void corrupt_link(qslab_cache *c, void *obj)
{
    qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after free "
             "or double free?)",
             c->name, obj);
}

/* ---- slab word operations ---- */

/* An owner takes its active slab's remote frees (the kernel's get_freelist),
 * or freezes a slab it holds off every list or under its node lock (the
 * kernel's freeze_slab): the whole list, and inuse = objects.  None: the
 * slab is unfrozen, full, on no list (its state says so before the CAS that
 * lets a freer see it full). */
static void *get_freelist(qslab_cache *c, struct qs_slab *s)
{
    uint64_t old = fw_load(s), nw;
    do {
        uint32_t h = fw_head(old);
        set_state(s, h ? QS_SLAB_ACTIVE : QS_SLAB_FULL);
        nw = fw_make(0, slab_objects(s), h != 0);
    } while (!fw_cas(s, &old, nw));
    return idx_obj(c, s, fw_head(old));
}

/* A slab that is the caller's alone (new, or from the empty FIFO), all its
 * objects free on the list starting at `first`: frozen, the list returned. */
static void *freeze_fresh(struct qs_slab *s, void *first)
{
    s->freelist = NULL; /* the FIFO's view (node.c); SLUB keeps its head in fw */
    qs_slab_set_owner(s, NULL);
    s->inuse = 0;
    set_state(s, QS_SLAB_ACTIVE);
    __atomic_store_n(&s->fw, fw_make(0, slab_objects(s), true), __ATOMIC_RELEASE);
    return first;
}

/* Hand an empty, unfrozen slab that is on no list to its node's empty FIFO
 * (n->lock held): the FIFO's view of it, as node.c and validation read
 * empty slabs (freelist, inuse 0). */
static void discard_locked(qslab_cache *c, struct qs_node *n, struct qs_slab *s,
                           struct qs_slab **release)
{
    uint64_t w = fw_load(s);
    qs_assert(fw_inuse(w) == 0);
    s->freelist = idx_obj(c, s, fw_head(w));
    s->tail = NULL;
    s->inuse = 0;
    s->next = NULL;
    qs_node_put_empty_locked(c, n, s, release);
}

/* q: whose counters the slabs given back count in (NULL: the cache's) */
static void release_after(qslab_cache *c, struct qs_queue *q, struct qs_node *n, struct qs_slab *rel)
{
    bool kept = QS_LOAD(n->nr_empty) != 0;
    qs_node_release_list(c, q, rel, NULL);
    if (kept)
        qs_node_purger_want();
}

/* Put an unfrozen slab that is on no list on its node's partial list, or
 * give it back if it is empty and the node has min_partial partial slabs
 * (the kernel's add_partial and discard_slab). */
static void add_partial(qslab_cache *c, struct qs_queue *q, struct qs_slab *s)
{
    struct qs_node *n = &c->nodes[s->node];
    struct qs_slab *rel = NULL;
    qs_lock_acquire(&n->lock);
    /* inuse 0 is for good: nobody holds an object of it to free */
    if (fw_inuse(fw_load(s)) == 0 && n->list.nr_partial >= QS_LOAD(c->min_partial)) {
        discard_locked(c, n, s, &rel);
    } else {
        qs_slab_set_owner(s, NULL);
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    qs_lock_release(&n->lock);
    release_after(c, q, n, rel);
}

/* An owner's partial slabs (->next linked) to their nodes (the kernel's
 * __put_partials). */
static void put_partials(qslab_cache *c, struct qs_queue *q, struct qs_slab *list)
{
    while (list) {
        struct qs_slab *next = list->next;
        list->next = NULL;
        add_partial(c, q, list);
        list = next;
    }
}

static void slab_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj, bool user);

/* Give back an owner's active slab s with what is left of its list fl (the
 * kernel's deactivate_slab): the list spliced onto the slab's own, the slab
 * unfrozen, then to its node's partial list, the FIFO, or no list (full).
 * fl may hold objects of other slabs (PER-CPU OWNERS above): each goes to
 * its own slab.  s may be NULL (fl alone). */
static void deactivate(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *fl)
{
    void *mine = NULL, *tail = NULL;
    uint32_t n = 0;
    while (fl) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, fl), &bad);
        if (unlikely(bad)) {
            corrupt_link(c, fl); /* the rest of the list is lost */
            next = NULL;
        }
        struct qs_slab *t = qs_slab_lookup(fl);
        if (t == s) {
            *qs_link(c, fl) = qs_enc(c, mine);
            if (!mine)
                tail = fl;
            mine = fl;
            n++;
        } else if (t) {
            slab_free(c, q, t, fl, false);
        }
        fl = next;
    }
    if (!s)
        return;
    uint64_t old = fw_load(s), nw;
    do {
        uint32_t h = fw_head(old);
        if (tail)
            *qs_link(c, tail) = qs_enc(c, idx_obj(c, s, h));
        uint32_t nh = mine ? obj_idx(s, mine) : h;
        /* full: say so before the CAS that lets a freer see it full */
        set_state(s, nh ? QS_SLAB_ACTIVE : QS_SLAB_FULL);
        nw = fw_make(nh, fw_inuse(old) - n, false);
    } while (!fw_cas(s, &old, nw));
    sl_stat(c, q, QS_FLUSH, 1);
    if (fw_head(nw))
        add_partial(c, q, s); /* or the FIFO, if empty */
}

/* The free of an object that is not on its owner's list (the kernel's
 * __slab_free): straight onto its slab's list.  q: the caller's queue (its
 * counters), or NULL.  user: a free by the program (counted; a slab it
 * finds full goes on the caller's partial list), else an object of an
 * owner's list going home (deactivate: already counted as freed; its caller
 * may hold a queue's lock, so a full slab goes to its node). */
static void put_cpu_partial(qslab_cache *c, struct qs_slab *s);

QS_NOINLINE static void slab_free(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj, bool user)
{
    struct qs_node *n = NULL;
    uint32_t idx = obj_idx(s, obj);
    uint64_t old = fw_load(s), nw;
    for (;;) {
        uint32_t prior = fw_head(old), inuse = fw_inuse(old);
        if (unlikely(inuse == 0)) { /* nothing of it is in use: freed already */
            if (n)
                qs_lock_release(&n->lock);
            qs_fatal("double free of %p in cache %s", obj, c->name);
            return;
        }
        *qs_link(c, obj) = qs_enc(c, idx_obj(c, s, prior));
        nw = fw_make(idx, inuse - 1, old & FW_FROZEN);
        /* an unfrozen slab with free objects that this free empties may be
         * on its node's list: lock before the CAS, so that nobody takes it
         * off that list in between (the kernel's rule) */
        if (!(old & FW_FROZEN) && prior && inuse == 1 && !n) {
            n = &c->nodes[s->node];
            qs_lock_acquire(&n->lock);
        }
        if (fw_cas(s, &old, nw))
            break;
    }
    if (user) {
        sl_stat(c, q, QS_FREE_SLOW, 1);
        sl_stat(c, q, QS_REMOTE_FREE, 1);
    }
    if (old & FW_FROZEN) { /* an owner's active slab: nothing to move */
        if (n)
            qs_lock_release(&n->lock);
        return;
    }
    if (!fw_head(old)) { /* it was full: ours to list */
        if (n)
            qs_lock_release(&n->lock);
        if (user)
            put_cpu_partial(c, s);
        else
            add_partial(c, NULL, s);
        return;
    }
    if (!n)
        return;
    if (user)
        sl_stat(c, q, QS_NODE_FREE, 1);
    struct qs_slab *rel = NULL;
    /* empty now; on the node's list (not an owner's), and the node has
     * enough partial slabs: give it back */
    if (fw_inuse(nw) == 0 && get_state(s) == QS_SLAB_PARTIAL &&
        n->list.nr_partial >= QS_LOAD(c->min_partial)) {
        qs_list_del(&n->list, s);
        discard_locked(c, n, s, &rel);
    }
    qs_lock_release(&n->lock);
    if (rel)
        release_after(c, NULL, n, rel); /* no lock of q's held: the cache's counters */
}

/* ---- per-CPU sections (percpu.h has the rseq contract) ---- */
#if QS_HAVE_PERCPU
#define SL_FREE "%c[sfree]"
#define SL_SLAB "%c[sslab]"
#define SL_OFFS                                                                                    \
    [sfree] "i"(__builtin_offsetof(struct qs_queue, sl.freelist)),                                \
        [spush] "i"(__builtin_offsetof(struct qs_queue, sl.pushes)),                               \
        [spop] "i"(__builtin_offsetof(struct qs_queue, sl.pops)),                                  \
        [sslab] "i"(__builtin_offsetof(struct qs_queue, sl.slab)),                                 \
        [loff] "i"(__builtin_offsetof(struct qs_queue, link_off)),                                 \
        [stamp] "i"(__builtin_offsetof(struct qs_queue, stamp))

_Static_assert(__builtin_offsetof(struct qs_queue, sl.freelist) ==
                   __builtin_offsetof(struct qs_queue, sl.pushes) + 8 &&
               __builtin_offsetof(struct qs_queue, sl.pops) ==
                   __builtin_offsetof(struct qs_queue, sl.freelist) + 8,
               "rseq: pushes, freelist, pops in a row (one 16-byte commit each)");

/* Pop the CPU's list: the object, NULL (empty, no queue, or its link is
 * wrong: the slow path sorts it out), or 1 (restarted).  The commit stores
 * (next, pops + 1) with one movups: one instruction, so a preemption either
 * precedes it (restart) or follows it. */
static inline void *pc_pop(unsigned long id)
{
    void *obj;
    struct qs_queue *q;
    __asm__ volatile(QS_RSEQ_ENTER_FAST
                     "movslq %%fs:4(%%rcx), %%rax\n\t"
                     "movq %[tablesm], %%rcx\n\t"
                     "movq (%%rcx,%%rax,8), %%rax\n\t"
                     "movq (%%rax,%[id],8), %[q]\n\t"
                     "movq " SL_FREE "(%[q]), %[obj]\n\t"
                     "testq %[obj], %[obj]\n\t"
                     "jz 8f\n\t"
                     "movl %c[loff](%[q]), %%eax\n\t"
                     "movq (%[obj],%%rax), %%rax\n\t"
                     "xorq %c[stamp](%[q]), %%rax\n\t" /* the stamp is secret ^ 1 */
                     "xorq $1, %%rax\n\t"              /* next = word ^ secret */
                     "testb $7, %%al\n\t"
                     "jnz 8f\n\t"
                     "movq %%rax, %%rcx\n\t"
                     "shrq $47, %%rcx\n\t"
                     "jnz 8f\n\t"
                     "movq %%rax, %%xmm0\n\t"
                     "movq %c[spop](%[q]), %%rcx\n\t"
                     "incq %%rcx\n\t"
                     "movq %%rcx, %%xmm1\n\t"
                     "punpcklqdq %%xmm1, %%xmm0\n\t"
                     "movups %%xmm0, " SL_FREE "(%[q])\n\t" /* commit: next, pops + 1 */
                     "2:\n\t"
                     ".pushsection __rseq_failure, \"ax\"\n\t"
                     "7:\n\t"
                     "movl $1, %k[obj]\n\t"
                     "jmp 9f\n\t"
                     "8:\n\t"
                     "xorl %k[obj], %k[obj]\n\t"
                     "jmp 9f\n\t"
                     ".popsection\n\t"
                     "9:\n\t"
                     : [obj] "=&r"(obj), [q] "=&r"(q)
                     : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [id] "r"(id), SL_OFFS
                     : "rax", "rcx", "xmm0", "xmm1", "memory", "cc");
    if ((uintptr_t)obj > 1)
        QS_TSAN_ACQUIRE(q);
    return obj;
}

enum { PC_DONE, PC_MISS, PC_SUSPECT, PC_ABORT };

/* Push obj (of slab s) on the CPU's list if s is its active slab; the
 * commit stores (pushes + 1, obj) with one movups. */
static inline int pc_push(unsigned long id, struct qs_slab *s, void *obj)
{
    long r;
    struct qs_queue *q;
#if defined(__SANITIZE_THREAD__)
    struct qs_queue *expect = qs_tsan_release_cpu_queue(id); /* percpu.h */
#define SL_SAME_QUEUE "cmpq %[expect], %[q]\n\t" "jne 7f\n\t"
#define SL_EXPECT , [expect] "r"(expect)
#else
#define SL_SAME_QUEUE ""
#define SL_EXPECT
#endif
    __asm__ volatile(QS_RSEQ_ENTER_FAST
                     "movslq %%fs:4(%%rcx), %%rax\n\t"
                     "movq %[tablesm], %%rcx\n\t"
                     "movq (%%rcx,%%rax,8), %%rax\n\t"
                     "movq (%%rax,%[id],8), %[q]\n\t"
                     SL_SAME_QUEUE
                     "movl $1, %k[r]\n\t"
                     "cmpq %[s], " SL_SLAB "(%[q])\n\t"
                     "jne 9f\n\t" /* not the active slab: PC_MISS */
                     "movl $2, %k[r]\n\t"
                     "movq " SL_FREE "(%[q]), %%rax\n\t"
                     "cmpq %%rax, %[obj]\n\t"
                     "je 9f\n\t" /* the head: freed twice, PC_SUSPECT */
                     "xorq %c[stamp](%[q]), %%rax\n\t"
                     "xorq $1, %%rax\n\t" /* its link: head ^ secret */
                     "movl %c[loff](%[q]), %%ecx\n\t"
                     "movq %%rax, (%[obj],%%rcx)\n\t"
                     "movq %c[spush](%[q]), %%rcx\n\t"
                     "incq %%rcx\n\t"
                     "movq %%rcx, %%xmm0\n\t"
                     "movq %[obj], %%xmm1\n\t"
                     "punpcklqdq %%xmm1, %%xmm0\n\t"
                     "xorl %k[r], %k[r]\n\t"
                     "movups %%xmm0, %c[spush](%[q])\n\t" /* commit: pushes + 1, obj */
                     "2:\n\t"
                     ".pushsection __rseq_failure, \"ax\"\n\t"
                     "7:\n\t"
                     "movl $3, %k[r]\n\t"
                     "jmp 9f\n\t"
                     ".popsection\n\t"
                     "9:\n\t"
                     : [r] "=&r"(r), [q] "=&r"(q)
                     : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [id] "r"(id),
                       [s] "r"(s), [obj] "r"(obj), SL_OFFS SL_EXPECT
                     : "rax", "rcx", "xmm0", "xmm1", "memory", "cc");
#undef SL_SAME_QUEUE
#undef SL_EXPECT
    (void)q;
    return (int)r;
}

/* The lock holder's sections on q (QS_RSEQ_MOVED: not on q's CPU).
 * Detach: the list is taken by the section's one store, its commit; the
 * active slab is cleared after it, by the lock holder.  A store before the
 * commit would stay done in an attempt that aborts (rseq undoes nothing),
 * and an abort that ends on another CPU returns MOVED: the slab cleared
 * there while its list stayed would have left the slab frozen and nobody's
 * (once its list ran dry, no slow path would unfreeze it: a slab leaked,
 * "active slabs that no owner holds" to validate; seen once in CI, under
 * ASan with guarded sampling).  Between the commit and the clear a push of
 * the slab's object may land on the emptied list: an object on the list of
 * another slab than q->sl.slab, which the design allows (the comment at the
 * top). */
static int pc_detach(struct qs_queue *q, void **fl)
{
    long k;
    void *got;
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movq " SL_FREE "(%[q]), %%rcx\n\t"
                         "xorl %%esi, %%esi\n\t"
                         "movq $0, " SL_FREE "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k), "=&c"(got)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), SL_OFFS
                         : "rax", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    QS_TSAN_ACQUIRE(q);
    if (k == 0) {
        __atomic_store_n(&q->sl.slab, NULL, __ATOMIC_RELAXED);
        *fl = got;
    }
    return (int)k;
}

#define PC_BUSY 1
static int pc_install(struct qs_queue *q, struct qs_slab *s, void *fl)
{
    long k;
    QS_TSAN_RELEASE(q);
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movl $1, %%esi\n\t"
                         "cmpq $0, " SL_FREE "(%[q])\n\t"
                         "jne 9f\n\t" /* pushed meanwhile: PC_BUSY */
                         "movq %[s], " SL_SLAB "(%[q])\n\t"
                         "xorl %%esi, %%esi\n\t"
                         "movq %[fl], " SL_FREE "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), [s] "r"(s),
                           [fl] "r"(fl), SL_OFFS
                         : "rax", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    return (int)k;
}
#endif

/* ---- the owner's slow paths ---- */

/* The caller's queue for c (attached if it has none); NULL: it cannot have
 * one (a thread past its exit, a CPU without rseq). */
static struct qs_queue *my_queue(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    return q ? q : qs_queue_attach(c);
}

/* One object from node `node` without an owner (qslab_cache_alloc_node for
 * another node, or a caller without a queue): popped off a partial slab of
 * that node under its lock, the slab staying there (the kernel freezes a
 * slab of that node as the CPU's, and keeps switching between nodes; this
 * takes the object and leaves the active slab alone). */
QS_NOINLINE static void *alloc_single(qslab_cache *c, struct qs_queue *q, int node)
{
    struct qs_node *n = &c->nodes[node];
    void *obj = NULL;
    bool fresh = false; /* obj born now from zero memory: calloc need not clear it */
    qs_lock_acquire(&n->lock);
    struct qs_slab *s = n->list.partial;
    if (!s) {
        qs_lock_release(&n->lock);
        s = qs_node_take_empty(n);
        void *first;
        if (s) {
            first = s->freelist;
        } else {
            if (!(s = qs_slab_new(c, NULL, node, false)))
                return NULL;
            fresh = qs_slab_born_zero(c, s); /* its first object is ours below */
            qs_slab_grow(c, NULL, s, UINT32_MAX);
            first = s->freelist;
        }
        s->freelist = NULL;
        qs_slab_set_owner(s, NULL);
        s->inuse = 0;
        __atomic_store_n(&s->fw, fw_make(obj_idx(s, first), 0, false), __ATOMIC_RELEASE);
        qs_lock_acquire(&n->lock);
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    /* the only taker of s's objects while we hold the lock; frees may add */
    uint64_t old = fw_load(s), nw;
    for (;;) {
        uint32_t h = fw_head(old);
        obj = idx_obj(c, s, h);
        bool bad;
        void *next = qs_dec(c, *qs_link(c, obj), &bad);
        if (unlikely(bad || (next && !qs_slab_valid_obj(s, next)))) {
            qs_lock_release(&n->lock);
            corrupt_link(c, obj);
            return NULL;
        }
        nw = fw_make(next ? obj_idx(s, next) : 0, fw_inuse(old) + 1, false);
        if (next) {
            if (fw_cas(s, &old, nw))
                break;
            continue;
        }
        /* its last free object: off the list before the CAS that makes it
         * full (a freer who then finds it full lists it elsewhere) */
        qs_list_del(&n->list, s);
        set_state(s, QS_SLAB_FULL);
        if (fw_cas(s, &old, nw))
            break;
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    qs_lock_release(&n->lock);
    *qs_link(c, obj) = 0;
    qs_self.last_word = fresh ? QS_FRESH_WORD(c->secret) : 0;
    sl_stat(c, q, QS_ALLOC_SLOW, 1);
    sl_stat(c, q, QS_NODE_ALLOC, 1);
    return obj;
}

/* A new list for owner q, whose active slab `old` (frozen, or NULL) was
 * detached with an empty list (the kernel's ___slab_alloc after the fast
 * path): old's remote frees; else old is given up (full) and the list comes
 * from an own partial slab, a node partial slab (taking more for the own
 * list, up to half of cpu_partial_slabs), an empty slab of the FIFO, or a
 * new slab, all of whose objects are born at once (as the kernel writes
 * every free pointer of a new slab; with `random`, in the cache's random
 * order, core/slab.c: the kernel's shuffle_freelist).  Returns the list, *sp
 * its frozen slab; NULL on ENOMEM. */
static void *new_freelist(qslab_cache *c, struct qs_queue *q, struct qs_slab *old, struct qs_slab **sp)
{
    void *fl;
    struct qs_slab *s;
    sl_stat(c, q, QS_REFILL, 1);
    if (old && (fl = get_freelist(c, old))) {
        *sp = old;
        return fl;
    }
    while ((s = q->sl.partial)) {
        q->sl.partial = s->next;
        s->next = NULL;
        QS_STORE(q->sl.nr_partial, q->sl.nr_partial - 1);
        if ((fl = get_freelist(c, s))) {
            *sp = s;
            return fl;
        }
    }
    struct qs_node *n = &c->nodes[q->node];
    if (QS_LOAD(n->list.nr_partial)) {
        qs_lock_acquire(&n->lock);
        s = NULL;
        fl = NULL;
        while (!fl && (s = n->list.partial)) {
            qs_list_del(&n->list, s);
            fl = get_freelist(c, s); /* a node partial slab has free objects */
        }
        if (fl) {
            unsigned max = cpu_partial_slabs(c), moved = 0;
            struct qs_slab *t;
            while (q->sl.nr_partial < max && moved <= max / 2 && (t = n->list.partial)) {
                qs_list_del(&n->list, t);
                set_state(t, QS_SLAB_CPU_PARTIAL);
                t->next = q->sl.partial;
                q->sl.partial = t;
                QS_STORE(q->sl.nr_partial, q->sl.nr_partial + 1);
                moved++;
            }
        }
        qs_lock_release(&n->lock);
        if (fl) {
            *sp = s;
            return fl;
        }
    }
    if ((s = qs_node_take_empty(n))) {
        *sp = s;
        return freeze_fresh(s, s->freelist);
    }
    if (!(s = qs_slab_new(c, q, q->node, false)))
        return NULL;
    qs_slab_grow(c, q, s, UINT32_MAX);
    *sp = s;
    return freeze_fresh(s, s->freelist);
}

/* Take the head of list *fl (checked); NULL if its link is corrupt. */
static void *list_pop(qslab_cache *c, void **fl)
{
    void *obj = *fl;
    bool bad;
    void *next = qs_dec(c, *qs_link(c, obj), &bad);
    if (unlikely(bad)) {
        corrupt_link(c, obj);
        *fl = NULL;
        return NULL;
    }
    *fl = next;
    *qs_link(c, obj) = 0;
    return obj;
}

/* A slab of one block (blocks over half a slab: the big kmalloc classes)
 * is never an owner's active slab, which would keep its memory while its
 * block is free (an owner that used many big classes kept one big slab
 * each): with no active slab the fast path always misses, and the slow
 * path takes the block from the node (partial, FIFO, new: alloc_single);
 * its free finds the slab full (slab_free) and, with the byte-bounded
 * cpu_partial and min_partial (tune.c), sends it to the FIFO, under the
 * retention rule and the decay. */
QS_NOINLINE static void *th_alloc_slow(qslab_cache *c, struct qs_queue *q)
{
    if (!q && !(q = my_queue(c)))
        return alloc_single(c, NULL, qs_self.node); /* an exited thread */
    if (unlikely(qs_one_per_slab(c)))
        return alloc_single(c, q, q->node);
    for (;;) {
        void *fl = q->sl.freelist;
        q->sl.freelist = NULL;
        if (fl) { /* its head's link was corrupt (the fast path's miss) */
            void *obj = list_pop(c, &fl);
            q->sl.freelist = fl;
            if (obj) {
                sl_stat(c, q, QS_ALLOC_SLOW, 1);
                return obj;
            }
            continue;
        }
        struct qs_slab *old = q->sl.slab, *s;
        QS_STORE(q->sl.slab, NULL);
        if (!(fl = new_freelist(c, q, old, &s))) {
            errno = ENOMEM;
            return NULL;
        }
        QS_STORE(q->sl.slab, s);
        void *obj = list_pop(c, &fl);
        q->sl.freelist = fl;
        if (obj) {
            sl_stat(c, q, QS_ALLOC_SLOW, 1);
            return obj;
        }
    }
}

#if QS_HAVE_PERCPU
/* Install (s, fl) as q's active slab and list (q->lock held, q's list
 * detached).  A push that landed in an aborted attempt is merged; if the
 * caller left q's CPU, s is given back with fl (q->sl.slab cleared first,
 * so that no more pushes land: one in flight still may, harmlessly). */
static void pc_install_or_give(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *fl)
{
    for (;;) {
        int r = pc_install(q, s, fl);
        if (r == 0)
            return;
        void *more = NULL;
        if (r == PC_BUSY && pc_detach(q, &more) == 0) {
            if (more) { /* objects pushed in between: more, then fl */
                void *t = more;
                bool bad = false;
                for (void *nx; (nx = qs_dec(c, *qs_link(c, t), &bad)) && !bad;)
                    t = nx;
                if (bad) {
                    corrupt_link(c, t);
                    *qs_link(c, t) = qs_enc(c, NULL);
                }
                *qs_link(c, t) = qs_enc(c, fl);
                fl = more;
            }
            continue;
        }
        __atomic_store_n(&q->sl.slab, NULL, __ATOMIC_RELAXED);
        deactivate(c, q, s, fl);
        return;
    }
}

QS_NOINLINE static void *pc_alloc_slow(qslab_cache *c)
{
    for (;;) {
        struct qs_queue *q = my_queue(c);
        if (!q || unlikely(qs_one_per_slab(c))) /* no active slab (th_alloc_slow) */
            return alloc_single(c, q, owner_node(q));
        qs_lock_acquire(&q->lock);
        struct qs_slab *old = q->sl.slab, *s = old;
        void *fl;
        if (pc_detach(q, &fl) < 0) { /* migrated: the new CPU's queue */
            qs_lock_release(&q->lock);
            continue;
        }
        /* a list now (pushed since the fast path looked, or a head with a
         * corrupt link): take from it; else a new one */
        if (!fl && !(fl = new_freelist(c, q, old, &s))) {
            qs_lock_release(&q->lock);
            errno = ENOMEM;
            return NULL;
        }
        void *obj = list_pop(c, &fl);
        pc_install_or_give(c, q, s, fl);
        if (obj)
            sl_stat(c, q, QS_ALLOC_SLOW, 1);
        qs_lock_release(&q->lock);
        if (obj)
            return obj;
    }
}
#endif

/* ---- the front end's hooks ---- */

static void *slub_alloc_any(qslab_cache *c);

static void *slub_alloc(qslab_cache *c, int node)
{
    if (node == QSLAB_NUMA_NO_NODE)
        return slub_alloc_any(c);
    struct qs_queue *q = my_queue(c); /* its node: the owner's */
    if (!q || node != q->node)
        return alloc_single(c, q, node);
    /* the owner's node, but a CPU owner may change before the pop (the
     * thread migrates): the object is checked, and given back if it is of
     * another node (neither counted) */
    void *obj = slub_alloc_any(c);
    struct qs_slab *s = obj ? qs_slab_lookup(obj) : NULL;
    if (!obj || !s || s->node == node)
        return obj;
    slab_free(c, NULL, s, obj, false); /* back to its slab, not counted */
    __atomic_fetch_sub(&c->orphan_stat[QS_ALLOC_SLOW], 1, __ATOMIC_RELAXED);
    return alloc_single(c, qs_queue_of(c), node);
}

static void *slub_alloc_any(qslab_cache *c)
{
#if QS_HAVE_PERCPU
    if (qs_percpu()) {
        for (;;) {
            void *obj = pc_pop(c->id);
            if (likely((uintptr_t)obj > 1)) {
                *qs_link(c, obj) = 0;
                return obj;
            }
            if (!obj)
                return pc_alloc_slow(c);
            qs_self.rseq_aborts++;
        }
    }
#endif
    struct qs_queue *q = qs_queue_of(c);
    if (likely(q != NULL)) {
        void *obj = q->sl.freelist;
        if (likely(obj != NULL)) {
            bool bad;
            void *next = qs_dec(c, *qs_link(c, obj), &bad);
            if (likely(!bad)) {
                q->sl.freelist = next;
                *qs_link(c, obj) = 0;
                QS_STORE(q->sl.pops, q->sl.pops + 1); /* stats.c reads it */
                return obj;
            }
        }
    }
    return th_alloc_slow(c, q);
}

/* pass_through: a kmalloc block of its own pages, from the page layer and
 * back to it at free (decommitted there: faulted in again next time), as
 * SLUB's kmalloc handed requests over a page to the page allocator from
 * 2.6.24 until the seeds' netperf UDP-4k regression reverted it (2.6.29).
 * Counted as a slab of one object of the class's cache. */
QS_NOINLINE static void *pass_alloc(qslab_cache *c, size_t size)
{
    unsigned order = 0;
    while (qs_slab_bytes(order) < size)
        order++;
    struct qs_slab *s = qs_page_alloc_slab(owner_node(qs_queue_of(c)), order);
    if (!s)
        return NULL;
    size_t bytes = qs_slab_bytes(order);
    s->base = s->mem;
    s->objects = 1;
    s->recip = ~(uint64_t)0 / bytes + 1;
    s->cache_id = c->id;
    s->inuse = 1;
    s->freelist = NULL;
    s->fw = 0;
    qs_slab_set_owner(s, NULL);
    set_state(s, QS_SLAB_PASS);
    __atomic_store_n(&s->span, (uint32_t)bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
    sl_stat(c, NULL, QS_ALLOC_SLOW, 1);
    sl_stat(c, NULL, QS_NEW_SLAB, 1);
    sl_stat(c, NULL, QS_NEW_OBJS, 1);
    return s->mem;
}

static void *slub_kmalloc(qslab_cache *c, size_t size, size_t align)
{
    (void)align; /* 0: kmalloc_exact is not set */
    if (c->slot_size > QS_PAGE_SIZE && QS_LOAD(c->pass_through))
        return pass_alloc(c, size);
    return slub_alloc(c, QSLAB_NUMA_NO_NODE);
}

static void slub_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    if (unlikely(get_state(s) == QS_SLAB_PASS)) {
        sl_stat(c, NULL, QS_FREE_SLOW, 1);
        sl_stat(c, NULL, QS_FREE_SLAB, 1);
        sl_stat(c, NULL, QS_FREE_OBJS, 1);
        qs_page_free_slab(s);
        return;
    }
    uintptr_t w = *qs_link(c, obj);
    if (unlikely(qs_looks_free(c, w)) && double_free(c, s, obj, w))
        return;
#if QS_HAVE_PERCPU
    if (qs_percpu()) {
        for (;;) {
            int r = pc_push(c->id, s, obj);
            if (likely(r == PC_DONE))
                return;
            if (r == PC_SUSPECT) {
                qs_fatal("double free of %p in cache %s", obj, c->name);
                return;
            }
            if (r == PC_MISS)
                break;
            qs_self.rseq_aborts++;
        }
        slab_free(c, qs_queue_of(c), s, obj, true);
        return;
    }
#endif
    struct qs_queue *q = qs_queue_of(c);
    if (likely(q && q->sl.slab == s)) {
        void *head = q->sl.freelist;
        if (unlikely(head == obj)) {
            qs_fatal("double free of %p in cache %s", obj, c->name);
            return;
        }
        *qs_link(c, obj) = qs_enc(c, head);
        q->sl.freelist = obj;
        QS_STORE(q->sl.pushes, q->sl.pushes + 1);
        return;
    }
    slab_free(c, q, s, obj, true);
}

/* A free found slab s full: the freer lists it (the kernel's
 * put_cpu_partial): on its owner's partial list, which, when it holds
 * cpu_partial_slabs(c) already, first goes to the nodes; another node's slab
 * (or a caller without an owner, or cpu_partial 0) on its node's list. */
static void put_cpu_partial(qslab_cache *c, struct qs_slab *s)
{
    /* a thread without a queue gets none here: a free may come after its
     * exit destructor (glibc's), and a queue attached then is never
     * retired (queue.c QS_FREE_ONLY_ATTACH) */
    struct qs_queue *q = qs_percpu() ? my_queue(c) : qs_queue_of(c);
    unsigned max = cpu_partial_slabs(c);
    if (!q || s->node != q->node || !max) {
        add_partial(c, NULL, s);
        return;
    }
    bool pc = q->cpu >= 0;
    if (pc)
        qs_lock_acquire(&q->lock);
    struct qs_slab *drain = NULL;
    if (q->sl.nr_partial >= max) {
        drain = q->sl.partial;
        q->sl.partial = NULL;
        QS_STORE(q->sl.nr_partial, 0);
    }
    set_state(s, QS_SLAB_CPU_PARTIAL);
    s->next = q->sl.partial;
    q->sl.partial = s;
    QS_STORE(q->sl.nr_partial, q->sl.nr_partial + 1);
    if (pc)
        qs_lock_release(&q->lock);
    put_partials(c, pc ? NULL : q, drain);
}

/* Everything owner q holds (its active slab, list and partial slabs) back
 * to the slabs and nodes (the kernel's flush_cpu_slab + put_partials): the
 * owner itself (a thread), a CPU's queue's lock holder with the queue taken
 * from its CPU, or anyone when the owner is gone. */
static void flush_owner(qslab_cache *c, struct qs_queue *q)
{
    struct qs_slab *s = q->sl.slab, *list = q->sl.partial;
    void *fl = q->sl.freelist;
    QS_STORE(q->sl.slab, NULL);
    q->sl.freelist = NULL;
    q->sl.partial = NULL;
    QS_STORE(q->sl.nr_partial, 0);
    deactivate(c, q, s, fl);
    put_partials(c, q, list);
}

static void slub_retire(qslab_cache *c, struct qs_queue *q)
{
    flush_owner(c, q);
}

/* Every owner's state we may touch: a thread, its own; per-CPU, every
 * CPU's queue, taken from its CPU (or only ours, without membarrier). */
static void flush_all(qslab_cache *c)
{
    if (!qs_percpu()) {
        struct qs_queue *q = qs_queue_of(c);
        if (q)
            flush_owner(c, q);
        return;
    }
#if QS_HAVE_PERCPU
    qs_lock_acquire(&qs_global);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        qs_lock_acquire(&q->lock);
        /* nothing on the CPU (no active slab, no list, no partial slab): no
         * take, whose membarrier interrupts the CPU.  A push lands only on
         * a list of an active slab, or just after a slow path that migrated
         * cleared it: a free racing with the flush, which a take could
         * miss as well */
        if (!QS_LOAD(q->sl.slab) && !QS_LOAD(q->sl.freelist) && !q->sl.partial) {
            qs_lock_release(&q->lock);
            continue;
        }
        if (qs_percpu_take(q)) {
            /* TSan: what the CPU's sections published (percpu.h) */
            QS_TSAN_ACQUIRE(q);
            flush_owner(c, q);
            QS_TSAN_RELEASE(q);
            qs_percpu_give(q);
        } else { /* no membarrier: only the queue of the CPU we run on */
            struct qs_slab *old = q->sl.slab, *list = q->sl.partial;
            void *fl;
            if (pc_detach(q, &fl) == 0) {
                q->sl.partial = NULL;
                QS_STORE(q->sl.nr_partial, 0);
                deactivate(c, q, old, fl);
                put_partials(c, q, list);
            }
        }
        qs_lock_release(&q->lock);
    }
    qs_lock_release(&qs_global);
#endif
}

/* Before an empty slab goes back to the page layer for good: its list, the
 * one place where SLUB sees all of a slab's free objects at once, followed
 * to its end, so that a write into a free object (a use after free) that
 * no allocation met is reported before the evidence is gone. */
static void check_empty(qslab_cache *c, struct qs_slab *s)
{
    uint32_t n = 0, objs = slab_objects(s);
    for (void *p = s->freelist; p && n <= objs; n++) {
        bool bad;
        void *next = qs_dec(c, *qs_link(c, p), &bad);
        if (unlikely(bad || (next && !qs_slab_valid_obj(s, next)))) {
            corrupt_link(c, p);
            return;
        }
        p = next;
    }
}

/* The nodes' empty partial slabs, all of them (kmem_cache_shrink ignores
 * min_partial), then the FIFOs, each slab's list checked. */
static size_t shrink_nodes(qslab_cache *c)
{
    size_t bytes = 0;
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        struct qs_slab *rel = NULL;
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial, *next; s; s = next) {
            next = s->next;
            if (fw_inuse(fw_load(s)) == 0) {
                qs_list_del(&n->list, s);
                discard_locked(c, n, s, &rel);
            }
        }
        qs_lock_release(&n->lock);
        release_after(c, NULL, n, rel);
        qs_lock_acquire(&n->lock);
        struct qs_slab *list = qs_node_fifo_detach(n);
        qs_lock_release(&n->lock);
        for (struct qs_slab *s = list; s; s = s->next)
            check_empty(c, s);
        qs_node_release_list(c, NULL, list, &bytes);
    }
    return bytes;
}

static size_t slub_shrink(qslab_cache *c)
{
    flush_all(c);
    size_t bytes = shrink_nodes(c);
    qs_purger_check();
    return bytes;
}

/* trim (all): every SLUB cache shrunk; the purger's tick: nothing (SLUB
 * has no reaper; what owners keep is bounded by cpu_partial, what nodes
 * keep by min_partial and the FIFO's decay) */
static size_t slub_sweep(bool all)
{
    if (!all)
        return 0;
    qslab_cache *list[64];
    size_t bytes = 0;
    unsigned skip = 0;
    for (;;) { /* in groups, without qs_global held while shrinking */
        unsigned n = 0, seen = 0;
        qs_lock_acquire(&qs_global);
        for (qslab_cache *c = qs_caches; c && n < 64; c = c->next)
            if (c->front == QS_FRONT_SLUB && seen++ >= skip)
                list[n++] = c;
        qs_lock_release(&qs_global);
        for (unsigned i = 0; i < n; i++)
            bytes += slub_shrink(list[i]);
        if (n < 64)
            return bytes;
        skip += n;
    }
}

/* destroy: every slab of c that is on no shared list (active, owners'
 * partial, full: on no list at all, pass-through) found through the page
 * layer, collected, then given back (the node lists and the FIFO are the
 * shared destroy's) */
struct sl_collect {
    qslab_cache *c;
    struct qs_slab *list;
};
static void collect_slab(struct qs_slab *s, void *arg)
{
    struct sl_collect *k = arg;
    if (__atomic_load_n(&s->cache, __ATOMIC_RELAXED) != k->c) /* another cache's: not read */
        return;
    int st = get_state(s);
    if (st == QS_SLAB_PARTIAL || st == QS_SLAB_EMPTY)
        return;
    s->next = k->list;
    k->list = s;
}

static void slub_destroy(qslab_cache *c, struct qs_slab **all)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        memset(&q->sl, 0, sizeof(q->sl));
    struct sl_collect k = {c, NULL};
    qs_page_walk(collect_slab, &k);
    qs_slabs_gather(all, k.list);
}

/* ---- calculate_order (mm/slub.c, as fixed in 5.12: the CPU count is the
 * possible CPUs', not the online ones', which during boot was 1 and gave
 * every cache of the boot the orders of a one-CPU machine) ----
 * Try for at least min_objects = 4 * (fls(CPUs) + 1) objects per slab, at
 * most order 3 (PAGE_ALLOC_COSTLY_ORDER), wasting at most 1/16 of the slab,
 * then 1/8, 1/4, then with fewer objects; past order 3 only objects that
 * need it. */
static unsigned calc_slab_order(size_t size, unsigned min_objects, unsigned max_order, unsigned fract)
{
    unsigned order = 0;
    while (qs_slab_bytes(order) < (size_t)min_objects * size && order < QS_MAX_ORDER)
        order++;
    for (; order <= max_order; order++) {
        size_t slab = qs_slab_bytes(order);
        if (slab >= size && slab % size <= slab / fract)
            break;
    }
    return order;
}

static unsigned slub_calculate_order(size_t size)
{
    long ncpu = qs_os_cpu_possible(); /* 5.12's fix: possible CPUs */
    if (ncpu < 1)
        ncpu = 1;
    unsigned fls = 64 - (unsigned)__builtin_clzl((unsigned long)ncpu);
    unsigned min_objects = 4 * (fls + 1);
    unsigned max_objects = (unsigned)(qs_slab_bytes(3) / size);
    if (min_objects > max_objects)
        min_objects = max_objects;
    for (; min_objects > 1; min_objects--)
        for (unsigned fract = 16; fract >= 4; fract /= 2) {
            unsigned order = calc_slab_order(size, min_objects, 3, fract);
            if (order <= 3)
                return order;
        }
    unsigned order = calc_slab_order(size, 1, 3, 1);
    if (order <= 3)
        return order;
    return calc_slab_order(size, 1, QS_MAX_ORDER, 1);
}

static unsigned slub_order(const qslab_cache *c)
{
    unsigned o = slub_calculate_order(c->slot_size);
    if (o < c->min_order)
        o = c->min_order;
    return o > QS_MAX_ORDER ? QS_MAX_ORDER : o;
}

/* ---- validation (qs_global held; a cache nobody uses at the moment) ----
 * Every slab of the cache is found through the page layer (qs_page_walk:
 * the full ones are on no list) and checked against its state: its word's
 * list (objects of this slab, valid links) plus inuse == objects; frozen
 * exactly when ACTIVE; a list head for the partial ones, none for the full
 * ones.  The slabs found in each state must be the ones the owners' and
 * nodes' lists hold. */
struct sl_walk {
    struct qs_walk *w;
    unsigned long by_state[8];
};

static void check_slab(struct qs_walk *w, struct qs_slab *s, int state)
{
    qslab_cache *c = w->c;
    uint64_t fw = fw_load(s);
    uint32_t objs = slab_objects(s), nfree = 0;
    w->slabs++;
    w->inuse += fw_inuse(fw);
    if (get_state(s) != state)
        qs_walk_problem(w, "slab state does not match its list", s->mem);
    if (!!(fw & FW_FROZEN) != (state == QS_SLAB_ACTIVE))
        qs_walk_problem(w, "slab frozen but not active, or active but not frozen", s->mem);
    for (void *p = idx_obj(c, s, fw_head(fw)); p && nfree <= objs; nfree++) {
        if (!qs_slab_valid_obj(s, p)) {
            qs_walk_problem(w, "slab's free list holds a pointer that is not its object", p);
            break;
        }
        bool bad;
        p = qs_dec(c, *qs_link(c, p), &bad);
        if (bad) {
            qs_walk_problem(w, "corrupt free-list link", p);
            break;
        }
    }
    if (nfree + fw_inuse(fw) != objs)
        qs_walk_problem(w, "inuse + free != objects", s->mem);
    if ((state == QS_SLAB_PARTIAL || state == QS_SLAB_CPU_PARTIAL) && !fw_head(fw))
        qs_walk_problem(w, "partial slab without a free object", s->mem);
    if (state == QS_SLAB_FULL && fw_head(fw))
        qs_walk_problem(w, "full slab with a free object", s->mem);
    if (__atomic_load_n(&s->span, __ATOMIC_RELAXED) != objs * c->slot_size)
        qs_walk_problem(w, "span does not match the objects born", s->mem);
}

static void walk_page_slab(struct qs_slab *s, void *arg)
{
    struct sl_walk *sw = arg;
    if (__atomic_load_n(&s->cache, __ATOMIC_RELAXED) != sw->w->c)
        return;
    int st = get_state(s);
    if (st < 8)
        sw->by_state[st]++;
    if (st == QS_SLAB_FULL) {
        check_slab(sw->w, s, QS_SLAB_FULL);
    } else if (st == QS_SLAB_PASS) {
        sw->w->slabs++;
        sw->w->inuse++;
    } else if (st != QS_SLAB_ACTIVE && st != QS_SLAB_CPU_PARTIAL && st != QS_SLAB_PARTIAL &&
               st != QS_SLAB_EMPTY) {
        qs_walk_problem(sw->w, "slab in a state SLUB does not use", s->mem);
    }
}

static void slub_validate(qslab_cache *c, struct qs_walk *w)
{
    unsigned long act = 0, cpup = 0, nodep = 0;
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        unsigned long n = 0;
        for (void *p = q->sl.freelist; p; n++) {
            struct qs_chunk *ch = qs_chunk_of(p);
            struct qs_slab *s = ch && ch->kind == QS_CHUNK_SLABS ? qs_obj_slab(ch, p) : NULL;
            if (!s || s->cache != c) {
                qs_walk_problem(w, "owner's list holds a pointer that is not an object of this cache", p);
                break;
            }
            bool bad;
            p = qs_dec(c, *qs_link(c, p), &bad);
            if (bad) {
                qs_walk_problem(w, "corrupt link on an owner's list", p);
                break;
            }
        }
        w->queued += n;
        if (q->sl.slab) {
            act++;
            check_slab(w, q->sl.slab, QS_SLAB_ACTIVE);
        }
        unsigned long np = 0;
        for (struct qs_slab *s = q->sl.partial; s; s = s->next, np++)
            check_slab(w, s, QS_SLAB_CPU_PARTIAL);
        if (np != q->sl.nr_partial)
            qs_walk_problem(w, "owner's partial count does not match its list", q);
        cpup += np;
    }
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        unsigned long np = 0;
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial; s; s = s->next, np++)
            check_slab(w, s, QS_SLAB_PARTIAL);
        if (np != n->list.nr_partial || n->list.full || n->list.nr_full)
            qs_walk_problem(w, "node list counts do not match", n);
        qs_lock_release(&n->lock);
        nodep += np;
    }
    struct sl_walk sw = {w, {0}};
    qs_page_walk(walk_page_slab, &sw);
    if (sw.by_state[QS_SLAB_ACTIVE] != act)
        qs_walk_problem(w, "active slabs that no owner holds", c);
    if (sw.by_state[QS_SLAB_CPU_PARTIAL] != cpup)
        qs_walk_problem(w, "owner-partial slabs on no owner's list", c);
    if (sw.by_state[QS_SLAB_PARTIAL] != nodep)
        qs_walk_problem(w, "partial slabs not on their node's list", c);
}

const struct qs_front qs_front_slub = {
    .name = "slub",
    .what = "an active slab per owner, frees straight to their slab (SLUB)",
    .alloc = slub_alloc,
    .kmalloc = slub_kmalloc,
    .free = slub_free,
    .shrink = slub_shrink,
    .sweep = slub_sweep,
    .validate = slub_validate,
    .retire = slub_retire,
    .destroy = slub_destroy,
    .order = slub_order,
    .own_node_lists = true,
};
