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
 * straight to its slab's own free list by compare-and-swap (slub_slab_free, slabs.c: the
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
 *                on the node, or a slab of one block): the shared
 *                empty-slab FIFO (node.c), which plays the page
 *                allocator's part with its decay
 *   PASS         a kmalloc block straight from the page layer (pass_through)
 * Transitions and who makes them:
 *   new / FIFO / node PARTIAL / CPU_PARTIAL -> ACTIVE    the owner (freeze)
 *   ACTIVE -> FULL (no remote frees, nothing left to be born) or PARTIAL/EMPTY
 *                                                        the owner (get_freelist,
 *                                                        slub_deactivate; while objects
 *                                                        are left to be born it stays
 *                                                        ACTIVE and grows: grow_active)
 *   FULL -> CPU_PARTIAL (or the node's PARTIAL for another node's slab)
 *                                                        the freer that saw it full
 *   CPU_PARTIAL -> PARTIAL or EMPTY                      the owner, when its list
 *                                                        is full (slub_put_partials)
 *   PARTIAL -> EMPTY                                     the freer that empties it,
 *                                                        under the node lock
 *   FULL -> EMPTY (a slab of one block)                  the freer that empties it
 *                                                        (discard_single)
 *   PARTIAL -> FULL                                      slub_alloc_single, under the
 *                                                        node lock
 * The node lock is taken by a free only when an unfrozen slab with free
 * objects becomes empty (the kernel's rule), before its CAS, so the check
 * "is it on the node list" and the removal are one step.
 *
 * PER-CPU OWNERS.  q->sl.freelist and q->sl.slab are changed by the fast
 * paths' sections on q->cpu (pop: freelist; push: freelist, for an object of
 * q->sl.slab), and by the slow paths, which hold q->lock: they detach
 * (the list in a section, then slab to NULL: slub_pc_detach) and install (slab, then the
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
 *
 * FILES.  One a responsibility, from the owners down to the slabs; a
 * function one file calls in another is named slub_ (declared in slub.h,
 * hidden), the rest are static:
 *   slub.c       this file: the front end's entry points (alloc, kmalloc,
 *                free, the table of hooks), the owner's active slab and
 *                list: the per-CPU sections, the owners' slow paths,
 *                kmalloc's pass-through blocks
 *   slabs.c      the slabs: the slab word's operations and the state
 *                machine (SLAB STATES above), frees by compare-and-swap to
 *                a slab's list, the owners' and nodes' partial lists, the
 *                refills from them and from the empty-slab FIFO
 *   cachewide.c  the cache-wide hooks: retire and the owners' flush,
 *                shrink, sweep, destroy, the order (calculate_order),
 *                validation
 *   slub.h       what they share: the slab word's and the state's inline
 *                accessors, the counters, the slub_ functions
 */
#include "front/slub/fast.h"
#include "front/front.h"
#include "front/slub/slub.h"
#include "owner/owner.h"

#include <errno.h>

/* The node of the caller's owner: q's, or the CPU's or thread's it runs as. */
static int owner_node(struct qs_queue *q)
{
    return q ? q->node : qs_owner_node_now();
}

/* ---- misuse ---- */

/* obj's link word looks like a free object's (a link with the cache's tag
 * bits): it is on a free list already if the link is NULL or another
 * object of its slab, which user data matches with odds of 2^-20 at most */
QS_NOINLINE static bool double_free(qslab_cache *c, struct qs_slab *s, void *obj, uintptr_t w)
{
    if (!qs_slab_link_in(c, s, w))
        return false;
    qs_fatal("double free of %p in cache %s", obj, c->name);
    return true;
}

void slub_corrupt_link(qslab_cache *c, void *obj)
{
    qs_fatal("free list corruption in cache %s: free object %p was overwritten (use after free "
             "or double free?)",
             c->name, obj);
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
int slub_pc_detach(struct qs_queue *q, void **fl)
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
struct qs_queue *slub_my_queue(qslab_cache *c)
{
    struct qs_queue *q = qs_queue_of(c);
    return q ? q : qs_queue_attach(c);
}

/* Take the head of list *fl (checked); NULL if its link is corrupt. */
static void *list_pop(qslab_cache *c, void **fl)
{
    void *obj = *fl;
    bool bad;
    void *next = qs_dec(c, *qs_link(c, obj), &bad);
    if (unlikely(bad)) {
        slub_corrupt_link(c, obj);
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
 * path takes the block from the node (partial, FIFO, new: slub_alloc_single);
 * its free finds the slab full (slub_slab_free) and sends it to the FIFO
 * (discard_single, slabs.c), under the retention rule and the decay. */
/* calloc's miss (api/kmalloc.h: QS_WORD_CALLOC): a new list would be born
 * from zero memory, so one object is born bare instead (slub_new_freelist). */
static inline bool calloc_miss(void)
{
    return qs_self.last_word == QS_WORD_CALLOC;
}

QS_SLOW static void *th_alloc_slow(qslab_cache *c, struct qs_queue *q)
{
    if (!q && !(q = slub_my_queue(c)))
        return slub_alloc_single(c, NULL, qs_self.node); /* an exited thread */
    if (unlikely(qs_one_per_slab(c)))
        return slub_alloc_single(c, q, q->node);
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
        void *bare = NULL;
        if (!(fl = slub_new_freelist(c, q, old, &s, calloc_miss() ? &bare : NULL))) {
            if (bare) { /* born bare for calloc: s stays active, its list empty */
                QS_STORE(q->sl.slab, s);
                sl_stat(c, q, QS_ALLOC_SLOW, 1);
                qs_self.last_word = QS_FRESH_WORD(c->secret);
                return bare;
            }
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
        if (r == PC_BUSY && slub_pc_detach(q, &more) == 0) {
            if (more) { /* objects pushed in between: more, then fl */
                void *t = more;
                bool bad = false;
                for (void *nx; (nx = qs_dec(c, *qs_link(c, t), &bad)) && !bad;)
                    t = nx;
                if (bad) {
                    slub_corrupt_link(c, t);
                    *qs_link(c, t) = qs_enc(c, NULL);
                }
                *qs_link(c, t) = qs_enc(c, fl);
                fl = more;
            }
            continue;
        }
        __atomic_store_n(&q->sl.slab, NULL, __ATOMIC_RELAXED);
        slub_deactivate(c, q, s, fl);
        return;
    }
}

QS_SLOW static void *pc_alloc_slow(qslab_cache *c)
{
    for (;;) {
        struct qs_queue *q = slub_my_queue(c);
        if (!q || unlikely(qs_one_per_slab(c))) /* no active slab (th_alloc_slow) */
            return slub_alloc_single(c, q, owner_node(q));
        qs_lock_acquire(&q->lock);
        struct qs_slab *old = q->sl.slab, *s = old;
        void *fl;
        if (slub_pc_detach(q, &fl) < 0) { /* migrated: the new CPU's queue */
            qs_lock_release(&q->lock);
            continue;
        }
        /* a list now (pushed since the fast path looked, or a head with a
         * corrupt link): take from it; else a new one */
        void *bare = NULL;
        if (!fl && !(fl = slub_new_freelist(c, q, old, &s, calloc_miss() ? &bare : NULL))) {
            if (bare) { /* born bare for calloc: s installed, its list empty */
                pc_install_or_give(c, q, s, NULL);
                sl_stat(c, q, QS_ALLOC_SLOW, 1);
                qs_lock_release(&q->lock);
                qs_self.last_word = QS_FRESH_WORD(c->secret);
                return bare;
            }
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
    struct qs_queue *q = slub_my_queue(c); /* its node: the owner's */
    if (!q || node != q->node)
        return slub_alloc_single(c, q, node);
    /* the owner's node, but a CPU owner may change before the pop (the
     * thread migrates): the object is checked, and given back if it is of
     * another node (neither counted) */
    void *obj = slub_alloc_any(c);
    struct qs_slab *s = obj ? qs_slab_lookup(obj) : NULL;
    if (!obj || !s || s->node == node)
        return obj;
    slub_slab_free(c, NULL, s, obj, false); /* back to its slab, not counted */
    __atomic_fetch_sub(&c->orphan_stat[QS_ALLOC_SLOW], 1, __ATOMIC_RELAXED);
    return slub_alloc_single(c, qs_queue_of(c), node);
}

static void *slub_alloc_any(qslab_cache *c)
{
#if QS_HAVE_PERCPU
    if (qs_percpu()) {
        void *obj = qs_slub_pc_pop(c->id, c->link_off);
        return likely(obj != NULL) ? obj : pc_alloc_slow(c);
    }
#endif
    void *obj = qs_slub_th_pop(c->id, c->link_off);
    return likely(obj != NULL) ? obj : th_alloc_slow(c, qs_queue_of(c));
}

/* pass_through: a kmalloc block of its own pages, from the page layer and
 * back to it at free (decommitted there: faulted in again next time), as
 * SLUB's kmalloc handed requests over a page to the page allocator from
 * 2.6.24 until the seeds' netperf UDP-4k regression reverted it (2.6.29).
 * Counted as a slab of one object of the class's cache. */
QS_SLOW static void *pass_alloc(qslab_cache *c, size_t size)
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
    s->fast = c->free_fast;
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

/* A free whose word was checked (it is no free object's): onto the
 * owner's list if obj is of its active slab (front/slub/fast.h), else to
 * its slab (or the page layer: a pass-through block).  An aborted push
 * may have left a link in obj's word, so nothing here reads it. */
static void free_checked(qslab_cache *c, struct qs_slab *s, void *obj, int r)
{
    if (unlikely(get_state(s) == QS_SLAB_PASS)) {
        sl_stat(c, NULL, QS_FREE_SLOW, 1);
        sl_stat(c, NULL, QS_FREE_SLAB, 1);
        sl_stat(c, NULL, QS_FREE_OBJS, 1);
        qs_page_free_slab(s);
        return;
    }
    if (r == QS_SLUB_LOOKS_FREE)
        r = qs_slub_push_checked(s, obj, qs_link(c, obj));
    if (likely(r == QS_SLUB_DONE))
        return;
    if (r == QS_SLUB_SUSPECT) {
        qs_fatal("double free of %p in cache %s", obj, c->name);
        return;
    }
    slub_slab_free(c, qs_queue_of(c), s, obj, true);
}

/* The front end's free (front.h): the word checked here (a free object's
 * is looked for on its slab: double_free), then free_checked. */
static void slub_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    uintptr_t w = *qs_link(c, obj);
    if (unlikely(qs_looks_free(c, w)) && get_state(s) != QS_SLAB_PASS && double_free(c, s, obj, w))
        return;
    free_checked(c, s, obj, QS_SLUB_LOOKS_FREE);
}

/* The free fast path (front/slub/fast.h).  A miss: its word looks free
 * (slub_free looks for the double free), obj is not of the owner's active
 * slab, or it is the list's head (a double free). */
void qs_slub_free(struct qs_slab *s, void *obj)
{
    int r = qs_slub_push(s, obj);
    if (likely(r == QS_SLUB_DONE))
        return;
    qslab_cache *c = __atomic_load_n(&s->cache, __ATOMIC_RELAXED);
    if (r == QS_SLUB_LOOKS_FREE)
        slub_free(c, s, obj);
    else
        free_checked(c, s, obj, r);
}

const struct qs_front qs_front_slub = {
    .name = "slub",
    .what = "an active slab per owner, frees straight to their slab (SLUB)",
    .alloc = slub_alloc,
    .kmalloc = slub_kmalloc,
    .free_obj = slub_free,
    .shrink = slub_shrink,
    .sweep = slub_sweep,
    .validate = slub_validate,
    .retire = slub_retire,
    .idle = slub_idle,
    .destroy = slub_destroy,
    .order = slub_order,
    .own_node_lists = true,
    .own_free_state = true,
};
