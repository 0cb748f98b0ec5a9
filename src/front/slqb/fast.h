/*
 * front/slqb/fast.h - the owners' queues' fast paths (inline): SLQB's
 * per-owner LIFO queues, which SLAB's per-owner arrays are too.  Taken by
 * the caches whose c->fast or s->fast is QS_FAST_CPU or QS_FAST_THREAD
 * (front.c qs_front_fast), from front/fastpath.h and api/kmalloc.h; the
 * queues' slow paths (queue.c, cpu.c, remote.c) and SLAB's use them too.
 *
 * Budget, alloc: 1 TLS load of the queue pointer, 3 loads from the queue
 * line (top, slots, secret), 1 of the slot, 1 of the object's word (its
 * free stamp: checked, then cleared); 1 store commits (top: nr and the pop
 * counter) and 1 clears the stamp.  No lock, no atomic read-modify-write.
 * Budget, free: the unit map (1 load) locates the slab descriptor, whose
 * first 32 bytes (1 line) validate the pointer and name the cache id, then
 * 1 TLS load, the queue line, the top slot (double-free check); 2 stores
 * (the stamp into the object, the pointer into the slot) and 1 commit.
 * Nothing is loaded from the object.  The chain of
 * dependent loads from the pointer to the queue is: unit map, descriptor,
 * slot array entry; the chunk header and the cache are off that chain.
 * Per-CPU owners (rseq): the same, the queue found through the CPU's table
 * (qs_cpu_tables[cpu_id][cache id]: 2 loads after cpu_id) instead of TLS,
 * plus 1 store of the section's descriptor into the rseq area per path.
 * Instructions: bench/fastpath_budget.py.
 */
#ifndef QSLAB_SLQB_FAST_H
#define QSLAB_SLQB_FAST_H

#include "core/internal.h"
#include "front/queue.h"
#include "owner/percpu.h"
#include "owner/owner.h"

#pragma GCC visibility push(hidden) /* as internal.h */

/* Is w, an object's word, no free object's on queue q's cache?  A free
 * object's word is the free stamp (queued) or a free-list link (w ^ secret
 * has no tag bits; the secret is stamp ^ QS_STAMP(0), bit 0).  A link's
 * w ^ stamp is the link ^ 1: it has no tag bit but bit 0, QS_WORD_TAG_MASK,
 * one test.  That test passes one more kind of word, no free object's: a
 * w ^ secret with bit 0 set and no other tag bit, so a word written after a
 * free passes it with odds of 2^-19, not 2^-20 (and 0, an object handed
 * out, never: the secret has bit 63 set).  In the alloc section, a link
 * costs three instructions and a jump fewer than testing its tag bits from
 * w ^ secret; the stamp, the word of every object a free pushed, is still
 * found by one compare. */
_Static_assert(QS_STAMP(0) == 1, "the stamp is the secret with bit 0 flipped");
static inline bool qs_queue_word_taken(const struct qs_queue *q, uintptr_t w)
{
    return w != q->stamp && ((w ^ q->stamp) & qs_tag_masks[1]) != 0; /* QS_WORD_TAG_MASK */
}

/* Pop the top of a queue, counting it as `item`, with the link
 * word at link_off (q->link_off; the constant 0 for the kmalloc caches,
 * which have no constructor).  The object's word must hold the free stamp
 * (a push writes it) or a free-list link (a refill leaves the link it had
 * on its slab's list: writing the stamp there cost 4 KiB objects 24 cycles
 * each, a store into a line of a conflicting set per object); NULL, the
 * queue untouched, if not: the object was freed twice (the first of its two
 * entries was handed out and its word cleared) or written after its free
 * (qs_queue_corrupt tells which); NULL too if the queue is empty.
 * The caller reports it (qs_queue_pop), so the kmalloc path need not know
 * its cache's address until it is on a slow path.  A fast pop counts
 * itself in `top` (one store); a slow one in stat[]. */
static inline void *qs_queue_try_pop(struct qs_queue *q, int item, uint32_t link_off)
{
    uint64_t t = q->top;
    size_t nr = QS_TOP_NR(t); /* size_t: slots[nr - 1] is one address, no 32-bit wrap */
    if (unlikely(nr == 0))
        return NULL;
    void *obj = q->slots[nr - 1];
    uintptr_t *l = (uintptr_t *)((char *)obj + link_off);
    uintptr_t w = *l;
    if (unlikely(qs_queue_word_taken(q, w)))
        return NULL; /* neither the free stamp nor a free-list link */
    if (item == QS_ALLOC_FAST) {
        QS_STORE(q->top, t + QS_TOP_POP);
    } else {
        QS_STORE(q->top, t - 1);
        QS_ADD(q->stat[item], 1);
    }
    *l = 0; /* an allocated object must not look free */
    return obj;
}

/* The slow paths' pop: as qs_queue_try_pop, reporting a bad entry, and
 * keeping the popped object's word in qs_self.last_word (calloc's:
 * kmalloc.c). */
static inline void *qs_queue_pop(qslab_cache *c, struct qs_queue *q, int item)
{
    while (QS_TOP_NR(q->top)) {
        void *top = q->slots[QS_TOP_NR(q->top) - 1];
        uintptr_t w = *(uintptr_t *)((char *)top + q->link_off);
        void *obj = qs_queue_try_pop(q, item, q->link_off);
        if (likely(obj != NULL)) {
            qs_self.last_word = w;
            return obj;
        }
        qs_queue_corrupt(c, q); /* reports; drops the entry if the handler returns */
    }
    return NULL;
}

/* ---- per-CPU fast paths (QS_OWNER_CPU; percpu.h has the rseq contract) ----
 * Alloc, one restartable sequence: cpu_id from the thread's rseq area, the
 * CPU's owner, its queue of cache `id`, top, slots, the top slot, the
 * object's word (the free stamp, or a free-list link); commit: top + pop
 * (nr - 1, pops + 1).  Then, outside it, the object is ours: clear its
 * word.  NULL for the slow path: the queue is empty (or the CPU has none:
 * qs_no_owner's queues are qs_no_queue), or the word is wrong (reported
 * there).  Free, one restartable sequence: the queue, the slab's owner (an
 * object of another owner's slab joins the queue while it is short, else
 * the CPU's open batch for its owner: remote.c slqb_percpu_fb_*), top against
 * limit (full), the top slot or the batch's head (the same object: a double
 * free), then the free stamp into
 * the object and its pointer into the slot, both above nr and so invisible
 * until the commit: top + 1.  No lock, no atomic read-modify-write; the
 * only load from the object is another owner's object's word (a free
 * object's word sends it to the slow path, which looks for a double
 * free), and that line is written next anyway. */
/* The per-CPU free fast path's outcomes (qs_percpu_free_slow's `why`). */
/* (QS_PC_REMOTE is not 1, QS_OWNER_CPU: GCC would keep the owner kind it
 * tested in a register, for a return of 1, at the cost of an instruction
 * on the common path) */
enum { QS_PC_DONE, QS_PC_FULL = 2, QS_PC_SUSPECT, QS_PC_REMOTE };
#if QS_HAVE_PERCPU

/* The alloc section; WORD is the object's word's address (its link offset:
 * the constant 0 for kmalloc's caches, which have no constructor).  [obj]
 * ends as the object or NULL (slow path); [q] as the queue.  A restart
 * (7:, from the abort handler) counts itself in qs_self.rseq_aborts and
 * runs the section again from its entry (11:, which stores the descriptor
 * the kernel cleared): the caller sees no third outcome to test for. */
#define QS_PERCPU_ALLOC_ASM(WORD)                                                                  \
    "11:\n\t"                                                                                      \
    QS_RSEQ_ENTER_FAST                                                                             \
    "movslq %%fs:4(%%rcx), %%rdx\n\t"                                                              \
    "movq %[tablesm], %%rcx\n\t"                                                                   \
    "movq (%%rcx,%%rdx,8), %%rdx\n\t"                                                              \
    "movq (%%rdx,%[id],8), %[q]\n\t" /* the CPU's queue of cache id */                             \
    "movq " QS_STR(QS_Q_TOP) "(%[q]), %%rcx\n\t"                                                   \
    "movl %%ecx, %%edx\n\t"                                                                        \
    "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%edx\n\t"                                                 \
    "jz 8f\n\t"                                                                                    \
    "movq " QS_STR(QS_Q_SLOTS) "(%[q]), %[obj]\n\t"                                                \
    "movq -8(%[obj],%%rdx,8), %[obj]\n\t"                                                          \
    "movq " WORD ", %%rdx\n\t" /* the stamp, or a link: qs_queue_word_taken */                     \
    "cmpq " QS_STR(QS_Q_STAMP) "(%[q]), %%rdx\n\t"                                                 \
    "je 5f\n\t"                                                                                    \
    "xorq " QS_STR(QS_Q_STAMP) "(%[q]), %%rdx\n\t"                                                 \
    "testq %%rdx, " QS_WORD_MASK_ASM "\n\t"                                                        \
    "jnz 8f\n\t"                                                                                   \
    "5:\n\t"                                                                                       \
    "addq $" QS_STR(QS_TOP_MASK_ASM) ", %%rcx\n\t"                                                 \
    "movq %%rcx, " QS_STR(QS_Q_TOP) "(%[q])\n\t" /* commit */                                      \
    "2:\n\t"                                                                                       \
    ".pushsection " QS_RSEQ_FAILURE ", \"ax\"\n\t" /* the cold exits, out of line */                  \
    "7:\n\t" /* restarted: counted, and again */                                                   \
    "movq qs_self@gottpoff(%%rip), %%rcx\n\t"                                                      \
    "addq $1, %%fs:%c[aborts](%%rcx)\n\t"                                                          \
    "jmp 11b\n\t"                                                                                  \
    "8:\n\t" /* the slow path */                                                                   \
    "xorl %k[obj], %k[obj]\n\t"                                                                    \
    "jmp 9f\n\t"                                                                                   \
    ".popsection\n\t"                                                                              \
    "9:\n\t"

#define QS_ALLOC_ABORTS [aborts] "i"(__builtin_offsetof(struct qs_owner, rseq_aborts))

/* Returns the object (its word not cleared yet), or NULL (slow path). */
static inline void *qs_percpu_try_alloc(unsigned long id, unsigned long link_off)
{
    void *obj;
    struct qs_queue *q;
    __asm__ volatile(QS_PERCPU_ALLOC_ASM("(%[obj],%[loff])")
                     : [obj] "=&a"(obj), [q] "=&r"(q)
                     : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [id] "r"(id),
                       [loff] "r"(link_off), QS_ALLOC_ABORTS
                     : "rcx", "rdx", "memory", "cc");
    if (obj)
        QS_TSAN_ACQUIRE(q);
    return obj;
}

static inline void *qs_percpu_try_alloc0(unsigned long id)
{
    void *obj;
    struct qs_queue *q;
    __asm__ volatile(QS_PERCPU_ALLOC_ASM("(%[obj])")
                     : [obj] "=&a"(obj), [q] "=&r"(q)
                     : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [id] "r"(id), QS_ALLOC_ABORTS
                     : "rcx", "rdx", "memory", "cc");
    if (obj)
        QS_TSAN_ACQUIRE(q);
    return obj;
}
#undef QS_ALLOC_ABORTS

static inline void *qs_percpu_alloc(unsigned long id, unsigned long link_off)
{
    void *obj = __builtin_constant_p(link_off) && link_off == 0 ? qs_percpu_try_alloc0(id)
                                                                 : qs_percpu_try_alloc(id, link_off);
    if (likely(obj != NULL))
        *(uintptr_t *)((char *)obj + link_off) = 0; /* ours now */
    return obj;
}

/* The free section: no outputs, so asm goto (GCC 12's trouble is with asm
 * goto outputs), and the abort handler's label 7 jumps to C's `abort`. */
static inline int qs_percpu_free(struct qs_slab *s, void *obj)
{
again:;
    /* TSan: the push is told as a release of the queue (percpu.h), made
     * before the section, so the section must use that queue: if the
     * thread moved to another CPU in between, it restarts (label 7) and
     * the release is made again on the new CPU's queue */
    QS_TSAN_FREE_BEGIN(s);
    __asm__ goto(QS_PERCPU_FREE_ENTER
                 "movq " QS_STR(QS_Q_TOP) "(%%rdx), %%rcx\n\t"
                 "movl %%ecx, %%eax\n\t"
                 "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%eax\n\t" /* nr */
                 "movq " QS_STR(QS_Q_OWN) "(%%rdx), %%rsi\n\t" /* the list of its own */
                 "cmpq %%rsi, %c[sown](%[s])\n\t"
                 "je 5f\n\t"
                 /* another owner's object.  Its word first: the free stamp
                  * or a free-list link is a free object's (a double free,
                  * most likely: qs_free_remote's test), for the slow path
                  * to look for it; both routes below write the word, so
                  * the load costs no extra miss */
                 "movl %c[loff](%%rdx), %%eax\n\t"
                 "movq (%[obj],%%rax), %%rsi\n\t"
                 "xorq " QS_STR(QS_Q_STAMP) "(%%rdx), %%rsi\n\t" /* qs_queue_word_taken */
                 "testq %%rsi, " QS_WORD_MASK_ASM "\n\t"
                 "jz %l[remote]\n\t"
                 "movl %%ecx, %%eax\n\t"
                 "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%eax\n\t" /* nr again */
                 /* a short queue takes it if it is of our node
                  * (qs_free_remote's rule); else it joins the open batch
                  * of its owner (8:), else the slow path */
                 "cmpl " QS_STR(QS_Q_PARK) "(%%rdx), %%eax\n\t"
                 "jae 8f\n\t"
                 "cmpl " QS_STR(QS_Q_LIMIT) "(%%rdx), %%eax\n\t"
                 "jae 8f\n\t"
                 "movzwl %c[snode](%[s]), %%esi\n\t"
                 "cmpl " QS_STR(QS_Q_NODE) "(%%rdx), %%esi\n\t"
                 "je 6f\n\t"
                 "8:\n\t" /* the open batch: its owner's, not full */
                 "movq " QS_STR(QS_Q_FB) "(%%rdx), %%rcx\n\t"
                 "movq %%rcx, %%rax\n\t"
                 "shrq $44, %%rax\n\t"
                 "jz %l[remote]\n\t" /* closed */
                 "cmpl " QS_STR(QS_Q_FB_MAX) "(%%rdx), %%eax\n\t"
                 "jae %l[remote]\n\t"
                 "movq " QS_STR(QS_Q_FB_TO) "(%%rdx), %%rsi\n\t"
                 "cmpq %%rsi, %c[sown](%[s])\n\t"
                 "jne %l[remote]\n\t"
                 "movq %%rcx, %%rsi\n\t" /* the head: (fb << 20) >> 17 */
                 "shlq $20, %%rsi\n\t"
                 "shrq $17, %%rsi\n\t"
                 "cmpq %%rsi, %[obj]\n\t" /* freed twice in a row */
                 "je %l[suspect]\n\t"
                 "xorq " QS_STR(QS_Q_STAMP) "(%%rdx), %%rsi\n\t" /* its link: head ^ secret */
                 "xorq $1, %%rsi\n\t"
                 "movl %c[loff](%%rdx), %%eax\n\t"
                 "movq %%rsi, (%[obj],%%rax)\n\t"
                 "shrq $44, %%rcx\n\t" /* fb = obj >> 3 | (n + 1) << 44 */
                 "incq %%rcx\n\t"
                 "shlq $44, %%rcx\n\t"
                 "movq %[obj], %%rsi\n\t"
                 "shrq $3, %%rsi\n\t"
                 "orq %%rsi, %%rcx\n\t"
                 "leaq " QS_STR(QS_Q_FB) "(%%rdx), %%rdx\n\t" /* ... into fb */
                 "jmp 9f\n\t"
                 "5:\n\t" /* our own object */
                 "cmpl " QS_STR(QS_Q_LIMIT) "(%%rdx), %%eax\n\t"
                 "jae %l[full]\n\t"
                 "6:\n\t" /* the push */
                 "movq " QS_STR(QS_Q_SLOTS) "(%%rdx), %%rsi\n\t"
                 "cmpq -8(%%rsi,%%rax,8), %[obj]\n\t"
                 "je %l[suspect]\n\t"
                 "movq %[obj], (%%rsi,%%rax,8)\n\t"
                 "movl %c[loff](%%rdx), %%eax\n\t"
                 "movq " QS_STR(QS_Q_STAMP) "(%%rdx), %%rsi\n\t"
                 "movq %%rsi, (%[obj],%%rax)\n\t" /* the free stamp */
                 "addq $1, %%rcx\n\t"             /* top + 1: into top (QS_Q_TOP 0) */
                 "9:\n\t"
                 "movq %%rcx, (%%rdx)\n\t" /* commit: top, or fb */
                 "2:\n\t"
                 ".pushsection " QS_RSEQ_FAILURE ", \"ax\"\n\t" /* label 7: back to C */
                 "7:\n\t"
                 "jmp %l[abort]\n\t"
                 ".popsection\n\t"
                 :
                 : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [s] "r"(s),
                   [obj] "r"(obj),
                   [scid] "i"(__builtin_offsetof(struct qs_slab, cache_id)),
                   [sown] "i"(__builtin_offsetof(struct qs_slab, owner)),
                   [snode] "i"(__builtin_offsetof(struct qs_slab, node)),
                   [loff] "i"(__builtin_offsetof(struct qs_queue, link_off)) QS_TSAN_FREE_EXPECT
                 : "rax", "rcx", "rdx", "rsi", "memory", "cc"
                 : remote, full, suspect, abort);
    return QS_PC_DONE;
remote:
    return QS_PC_REMOTE;
full:
    return QS_PC_FULL;
suspect:
    return QS_PC_SUSPECT;
abort:
    qs_self.rseq_aborts++;
    goto again;
}
#endif

/* Push a free object of slab s on the owner's queue: store its free stamp
 * (QS_STAMP: the word looks free) and its pointer, then commit
 * with `top`.  Nothing is loaded from the object.  An object equal to the
 * top entry is freed twice in a row: qs_free_suspect checks and reports
 * (slots[-1] is a NULL sentinel, so an empty queue needs no test).  Older
 * double frees are caught when the second entry is popped
 * (qs_queue_try_pop) or, on every slower path, by the free stamp.  A queue
 * at its limit takes no more: qs_free_full frees an object of one of our
 * own slabs straight to it (no queue round trip: a burst of frees touches
 * each object once). */
/* The push itself, below the limit (t: q->top, just loaded). */
/* (c may be NULL: the slab's cache, read only for the report) */
static inline void qs_queue_push_at(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj,
                                    uint64_t t)
{
    unsigned nr = QS_TOP_NR(t);
    void **sl = q->slots;
    if (unlikely(sl[(int)nr - 1] == obj)) {
        qs_free_suspect(c ? c : __atomic_load_n(&s->cache, __ATOMIC_RELAXED), q, s, obj);
        return;
    }
    *(uintptr_t *)((char *)obj + q->link_off) = q->stamp;
    sl[nr] = obj;
    /* not counted: FREE_FAST is derived from nr (qs_queue_nr_set) */
    QS_STORE(q->top, t + 1); /* read by statistics: relaxed store, a plain mov */
}

static inline void qs_queue_push(qslab_cache *c, struct qs_queue *q, struct qs_slab *s, void *obj)
{
    uint64_t t = q->top;
    if (unlikely(QS_TOP_NR(t) >= QS_LOAD(q->limit))) { /* relaxed: tune lowers it */
        qs_free_full(c, q, s, obj);
        return;
    }
    qs_queue_push_at(c, q, s, obj, t);
}

/* The cache of a free, c or, where c is NULL (front/fastpath.h
 * qs_free_fast_slab), read from the slab only on the paths that need it,
 * none of them the common one. */
#define QS_FREE_CACHE(c, s) ((c) ? (c) : __atomic_load_n(&(s)->cache, __ATOMIC_RELAXED))

/* The per-thread queue's free: obj (validated: an object of slab s of
 * cache c, or NULL: read from the slab where a slow path needs it) on the
 * calling thread's queue, or to the slow paths. */
static inline __attribute__((always_inline)) void qs_queue_free_thread(qslab_cache *c, struct qs_slab *s,
                                                                       void *obj)
{
    struct qs_queue *q = qs_queue_fast(s->cache_id);
    uint64_t t = q->top;
    /* objects of our own slabs go on our queue (our slabs are on our node);
     * another owner's object of our node too while the queue is short (below
     * park, a copy of the cache's: SLQB's rule, qs_free_remote's, and the
     * per-CPU section's; SLAB's arrays, whose park is their limit, take any
     * object of their node this way), unless its word is a free object's
     * (the slow path looks for the double free); anything else takes the
     * slow path (batched home), and so does everything when we have no
     * queue (qs_no_queue owns no slab and parks nothing).  A relaxed load:
     * only we make a slab ours, so equality needs no ordering. */
    if (unlikely(__atomic_load_n(&s->owner, __ATOMIC_RELAXED) != &q->list)) {
        if (QS_TOP_NR(t) < QS_LOAD(q->park)) { /* (qs_no_queue's park is 0) */
            uintptr_t w = *(uintptr_t *)((char *)obj + q->link_off);
            if (QS_TOP_NR(t) < QS_LOAD(q->limit) && s->node == q->node && qs_queue_word_taken(q, w))
                goto push;
        }
        qs_free_remote(QS_FREE_CACHE(c, s), q, s, obj);
        return;
    }
    if (unlikely(QS_TOP_NR(t) >= QS_LOAD(q->limit))) {
        /* full: straight onto our slab's free list (qs_free_full), inline
         * while the queue is at hiwater (not only at its slots' end), the
         * slab stays partial (an own slab with a free list is partial; one
         * left with no object in use becomes empty), and the object's word
         * is no free object's (this path may load it: it is not the common
         * one) */
        uintptr_t *l = (uintptr_t *)((char *)obj + q->link_off);
        uintptr_t secret = q->stamp ^ QS_STAMP(0), w = *l;
        void *fl = s->freelist;
        uint32_t inuse = s->inuse - 1;
        if (likely(fl != NULL && inuse != 0 && QS_TOP_NR(t) >= QS_LOAD(q->hiwater) &&
                   ((w ^ secret) & QS_LINK_TAG_MASK) != 0 && w != q->stamp)) {
            /* (qs_queue_word_taken's test, with the secret the link needs) */
            *l = (uintptr_t)fl ^ secret;
            s->freelist = obj;
            s->inuse = inuse;
            QS_ADD(q->stat[QS_FREE_SLOW], 1);
            qs_fbit_set_cold(s, obj); /* a tail call: the pair's code stays as it was */
            return;
        }
        qs_free_full(QS_FREE_CACHE(c, s), q, s, obj);
        return;
    }
push:
    qs_queue_push_at(c, q, s, obj, t);
}

#if QS_HAVE_PERCPU
/* The per-CPU queue's free, as qs_queue_free_thread. */
static inline __attribute__((always_inline)) void qs_queue_free_cpu(qslab_cache *c, struct qs_slab *s,
                                                                    void *obj)
{
    int r = qs_percpu_free(s, obj); /* the section reads s->cache_id */
    /* the cache is read after the section (its memory clobber keeps the
     * load there): nothing of ours lives across it in a callee-saved
     * register */
    if (unlikely(r != QS_PC_DONE))
        qs_percpu_free_slow(QS_FREE_CACHE(c, s), s, obj, r);
}
#endif

/* The queues' own fast paths, for the slow paths of the front ends with
 * queues (SLQB, SLAB), whose caches take no other: by the owner kind, with
 * no test of the kind byte (front/fastpath.h chooses among every front
 * end's). */
static inline void qs_queue_free_fast(qslab_cache *c, struct qs_slab *s, void *obj)
{
#if QS_HAVE_PERCPU
    if (qs_percpu()) {
        qs_queue_free_cpu(c, s, obj);
        return;
    }
#endif
    qs_queue_free_thread(c, s, obj);
}

static inline void *qs_queue_alloc_fast(qslab_cache *c)
{
    void *obj;
#if QS_HAVE_PERCPU
    if (qs_percpu())
        obj = qs_percpu_alloc(c->id, c->link_off);
    else
#endif
        obj = qs_queue_try_pop(qs_queue_fast(c->id), QS_ALLOC_FAST, (uint32_t)c->link_off);
    return likely(obj != NULL) ? obj : qs_alloc_slow(c);
}
#undef QS_FREE_CACHE

#pragma GCC visibility pop

#endif /* QSLAB_SLQB_FAST_H */
