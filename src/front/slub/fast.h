/*
 * front/slub/fast.h - SLUB's fast paths (inline): an owner's active slab's
 * list of free objects (q->sl.freelist, the kernel's c->freelist), popped
 * by an allocation and pushed by a free of an object of that slab.  Taken
 * by the caches whose c->fast or s->fast is QS_FAST_SLUB_* (front.c
 * qs_front_fast), from front/fastpath.h and api/kmalloc.h; slub.c's slow
 * paths use them too.  slub.c's header describes the lists, the slabs and
 * who changes what.
 *
 * Budget, alloc: cpu_id, the CPU's table, its queue of the cache (3
 * dependent loads), the list's head, the head's link word (its tag bits
 * checked: a corrupt link goes to the slow path, which reports it), the
 * pop counter; 1 store commits (next, pops + 1: one 16-byte store), and 1
 * clears the object's word after the section.
 * Budget, free: before the section, the cache (the descriptor's first
 * line), its link offset and secret, and the object's word (a free
 * object's, a link with the cache's tag bits, goes to the slow path, which
 * looks for the double free; the line is written next anyway); in it, the
 * descriptor's cache id, cpu_id, the table, the queue (as alloc), the
 * active slab (compared), the head (an object freed twice in a row is the
 * head), the push counter; 2 stores: the object's link to the old head,
 * and the commit (pushes + 1, obj: one 16-byte store).  Any other free
 * (not of the active slab) takes the slow path: slub_slab_free's
 * compare-and-swap on its slab's word.
 * A thread owner does the same in C on its own queue (no section).
 * No lock, no atomic read-modify-write.  Instructions: bench/fastpath_budget.py.
 */
#ifndef QSLAB_FRONT_SLUB_FAST_H
#define QSLAB_FRONT_SLUB_FAST_H

#include "core/internal.h"
#include "owner/percpu.h"
#include "owner/owner.h"

#pragma GCC visibility push(hidden)

/* The fast free's outcomes other than done: not the active slab's object,
 * the list's head (freed twice in a row), or an object whose word looks
 * free (a link: the slow path looks for the double free).  Only the last
 * comes before the section: after one, obj's word may hold the link of an
 * aborted attempt, which no later check must take for a free object's. */
enum { QS_SLUB_DONE, QS_SLUB_MISS, QS_SLUB_SUSPECT, QS_SLUB_LOOKS_FREE };

_Static_assert(__builtin_offsetof(struct qs_queue, sl.freelist) ==
                   __builtin_offsetof(struct qs_queue, sl.pushes) + 8 &&
               __builtin_offsetof(struct qs_queue, sl.pops) ==
                   __builtin_offsetof(struct qs_queue, sl.freelist) + 8,
               "SLUB: pushes, freelist, pops in a row (one 16-byte commit each)");

/* The thread owner's: on its own queue, plain loads and stores */
static inline void *qs_slub_th_pop(unsigned long id, unsigned long link_off)
{
    struct qs_queue *q = qs_queue_fast(id);
    void *obj = q->sl.freelist; /* NULL in qs_no_queue */
    if (unlikely(obj == NULL))
        return NULL;
    uintptr_t *l = (uintptr_t *)((char *)obj + link_off);
    uintptr_t next = *l ^ q->stamp ^ QS_STAMP(0); /* the link ^ the secret */
    if (unlikely(next & QS_LINK_TAG_MASK))
        return NULL; /* corrupt: the slow path reports it */
    q->sl.freelist = (void *)next;
    QS_STORE(q->sl.pops, q->sl.pops + 1); /* stats.c reads it */
    *l = 0;
    return obj;
}

static inline int qs_slub_th_push(struct qs_slab *s, void *obj, uintptr_t *l)
{
    struct qs_queue *q = qs_queue_fast(s->cache_id);
    if (q->sl.slab != s) /* NULL in qs_no_queue */
        return QS_SLUB_MISS;
    void *head = q->sl.freelist;
    if (unlikely(head == obj))
        return QS_SLUB_SUSPECT;
    *l = (uintptr_t)head ^ q->stamp ^ QS_STAMP(0); /* head ^ the secret */
    q->sl.freelist = obj;
    QS_STORE(q->sl.pushes, q->sl.pushes + 1);
    return QS_SLUB_DONE;
}

#if QS_HAVE_PERCPU
/* (0, 1) and (1, 0): the counters' increments, added to (next, pops) and
 * (pushes, obj) in the commits' xmm register */
static const uint64_t qs_slub_one_hi[2] __attribute__((aligned(16), used)) = {0, 1};
static const uint64_t qs_slub_one_lo[2] __attribute__((aligned(16), used)) = {1, 0};

#define QS_SLUB_OFFS                                                                               \
    [sfree] "i"(__builtin_offsetof(struct qs_queue, sl.freelist)),                                \
        [spush] "i"(__builtin_offsetof(struct qs_queue, sl.pushes)),                               \
        [spop] "i"(__builtin_offsetof(struct qs_queue, sl.pops)),                                  \
        [sslab] "i"(__builtin_offsetof(struct qs_queue, sl.slab)),                                 \
        [stamp] "i"(__builtin_offsetof(struct qs_queue, stamp))

/* The CPU's pop, one restartable sequence: the object (its word not
 * cleared yet), or NULL: the list is empty (or the CPU has no queue:
 * qs_no_queue's list is empty), or its head's link is corrupt (the slow
 * path reports it).  A restart (7:) counts itself and runs the section
 * again, as SLQB's does (front/slqb/fast.h).  The object's word is cleared. */
#define QS_SLUB_POP_ASM(WORD)                                                                      \
    "11:\n\t"                                                                                      \
    QS_RSEQ_ENTER_FAST                                                                             \
    "movslq %%fs:4(%%rcx), %%rdx\n\t"                                                              \
    "movq %[tablesm], %%rcx\n\t"                                                                   \
    "movq (%%rcx,%%rdx,8), %%rdx\n\t"                                                              \
    "movq (%%rdx,%[id],8), %[q]\n\t"                                                               \
    "movq %c[sfree](%[q]), %[obj]\n\t"                                                             \
    "testq %[obj], %[obj]\n\t"                                                                     \
    "jz 8f\n\t"                                                                                    \
    "movq " WORD ", %%rdx\n\t"                                                                     \
    "xorq %c[stamp](%[q]), %%rdx\n\t" /* the stamp is secret ^ 1 */                                \
    "xorq $1, %%rdx\n\t"              /* next = word ^ secret */                                  \
    "testq %%rdx, " QS_TAG_MASK_ASM "\n\t" /* a link: no tag bit */                                \
    "jnz 8f\n\t"                                                                                   \
    "movq %%rdx, %%xmm0\n\t"                                                                       \
    "movhps %c[spop](%[q]), %%xmm0\n\t" /* (next, pops) */                                         \
    "paddq %[one_hi], %%xmm0\n\t"                                                                  \
    "movups %%xmm0, %c[sfree](%[q])\n\t" /* commit: next, pops + 1 */                              \
    "2:\n\t"                                                                                       \
    ".pushsection " QS_RSEQ_FAILURE ", \"ax\"\n\t"                                                      \
    "7:\n\t" /* restarted: counted, and again */                                                   \
    "movq qs_self@gottpoff(%%rip), %%rcx\n\t"                                                      \
    "addq $1, %%fs:%c[aborts](%%rcx)\n\t"                                                          \
    "jmp 11b\n\t"                                                                                  \
    "8:\n\t"                                                                                       \
    "xorl %k[obj], %k[obj]\n\t"                                                                    \
    "jmp 9f\n\t"                                                                                   \
    ".popsection\n\t"                                                                              \
    "9:\n\t"
#define QS_SLUB_POP_IN                                                                             \
    [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [id] "r"(id), [one_hi] "m"(qs_slub_one_hi), \
        [aborts] "i"(__builtin_offsetof(struct qs_owner, rseq_aborts)), QS_SLUB_OFFS

static inline void *qs_slub_pc_pop(unsigned long id, unsigned long link_off)
{
    void *obj;
    struct qs_queue *q;
    if (__builtin_constant_p(link_off) && link_off == 0) /* kmalloc's: no constructor */
        __asm__ volatile(QS_SLUB_POP_ASM("(%[obj])")
                         : [obj] "=&a"(obj), [q] "=&r"(q)
                         : QS_SLUB_POP_IN
                         : "rcx", "rdx", "xmm0", "memory", "cc");
    else
        __asm__ volatile(QS_SLUB_POP_ASM("(%[obj],%[loff])")
                         : [obj] "=&a"(obj), [q] "=&r"(q)
                         : [loff] "r"(link_off), QS_SLUB_POP_IN
                         : "rcx", "rdx", "xmm0", "memory", "cc");
    if (obj) {
        QS_TSAN_ACQUIRE(q);
        *(uintptr_t *)((char *)obj + link_off) = 0; /* ours now */
    }
    return obj;
}
#undef QS_SLUB_POP_ASM
#undef QS_SLUB_POP_IN

/* The CPU's push of obj, of slab s, its link word at l, one restartable
 * sequence: onto the list if s is the CPU's active slab of its cache;
 * QS_SLUB_MISS if not; QS_SLUB_SUSPECT if obj is the head.  An abort (7:)
 * runs it again from the start.  The link is stored before the commit, so
 * an aborted attempt may leave it in obj's word: the word is checked
 * before the section (qs_slub_push), never in it, where a retry would
 * take its own link for a free object's. */
static inline int qs_slub_pc_push(struct qs_slab *s, void *obj, uintptr_t *l)
{
again:;
    QS_TSAN_FREE_BEGIN(s); /* percpu.h */
    __asm__ goto(QS_PERCPU_FREE_ENTER
                 "cmpq %[s], %c[sslab](%%rdx)\n\t"
                 "jne %l[miss]\n\t" /* not the active slab */
                 "movq %c[sfree](%%rdx), %%rax\n\t"
                 "cmpq %%rax, %[obj]\n\t"
                 "je %l[suspect]\n\t" /* the head: freed twice */
                 "xorq %c[stamp](%%rdx), %%rax\n\t"
                 "xorq $1, %%rax\n\t" /* its link: head ^ secret */
                 "movq %%rax, (%[l])\n\t"
                 "movq %c[spush](%%rdx), %%xmm0\n\t"
                 "movq %[obj], %%xmm1\n\t"
                 "punpcklqdq %%xmm1, %%xmm0\n\t" /* (pushes, obj) */
                 "paddq %[one_lo], %%xmm0\n\t"
                 "movups %%xmm0, %c[spush](%%rdx)\n\t" /* commit: pushes + 1, obj */
                 "2:\n\t"
                 ".pushsection " QS_RSEQ_FAILURE ", \"ax\"\n\t"
                 "7:\n\t"
                 "jmp %l[abort]\n\t"
                 ".popsection\n\t"
                 :
                 : [offm] "m"(qs_rseq_off), [tablesm] "m"(qs_cpu_tables), [s] "r"(s),
                   [obj] "r"(obj), [l] "r"(l), [one_lo] "m"(qs_slub_one_lo),
                   [scid] "i"(__builtin_offsetof(struct qs_slab, cache_id)),
                   QS_SLUB_OFFS QS_TSAN_FREE_EXPECT
                 : "rax", "rcx", "rdx", "xmm0", "xmm1", "memory", "cc"
                 : miss, suspect, abort);
    return QS_SLUB_DONE;
miss:
    return QS_SLUB_MISS;
suspect:
    return QS_SLUB_SUSPECT;
abort:
    qs_self.rseq_aborts++;
    goto again;
}
#undef QS_SLUB_OFFS
#endif

/* The fast paths: QS_FAST_SLUB_CPU exactly when the owners are CPUs
 * (front.c qs_front_fast), so the owner kind tells which.  The object,
 * its word cleared, or NULL (the slow path). */
static inline void *qs_slub_alloc_fast(unsigned long id, unsigned long link_off)
{
#if QS_HAVE_PERCPU
    if (likely(qs_percpu()))
        return qs_slub_pc_pop(id, link_off);
#endif
    return qs_slub_th_pop(id, link_off);
}

/* The push of an object whose word was checked, its link word at l */
static inline int qs_slub_push_checked(struct qs_slab *s, void *obj, uintptr_t *l)
{
#if QS_HAVE_PERCPU
    if (likely(qs_percpu()))
        return qs_slub_pc_push(s, obj, l);
#endif
    return qs_slub_th_push(s, obj, l);
}

/* The push, after a look at obj's word (its cache's line: the link
 * offset and the secret): a free object's word (a link with the cache's
 * tag bits) is QS_SLUB_LOOKS_FREE, for the slow path to look for the
 * double free. */
static inline int qs_slub_push(struct qs_slab *s, void *obj)
{
    const qslab_cache *c = __atomic_load_n(&s->cache, __ATOMIC_RELAXED);
    uintptr_t *l = qs_link(c, obj);
    if (unlikely(qs_looks_free(c, *l)))
        return QS_SLUB_LOOKS_FREE;
    return qs_slub_push_checked(s, obj, l);
}

/* The free fast path, out of line (slub.c): the free paths that inline
 * every front end's fast path keep the others' registers free */
void qs_slub_free(struct qs_slab *s, void *obj);

#pragma GCC visibility pop

#endif /* QSLAB_FRONT_SLUB_FAST_H */
