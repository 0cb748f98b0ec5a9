/*
 * percpu.h - restartable sequences on per-CPU queues (QS_OWNER_CPU).
 *
 * A critical section is a range of instructions [1:, 2:) described by a
 * struct rseq_cs in section __rseq_cs; entering stores its address in the
 * thread's rseq area (rseq_cs at offset 8).  If the thread is preempted,
 * migrated or signalled while its instruction pointer is in the range, the
 * kernel moves it to the abort handler (4:, preceded by the signature the
 * thread registered with) instead of resuming it: nothing the section
 * stored before its last instruction is visible as a committed change, so
 * each section ends with the one store that commits it (the queue's `top`,
 * or `slots`), and everything it wrote before lies above the queue's nr,
 * where no reader looks.  The abort handler jumps back to C, which retries.
 * This is the kernel's rseq contract (kernel/rseq.c, rseq(2)) and the shape
 * of librseq's and tcmalloc's per-CPU operations; SLQB got the same from
 * running with interrupts off.
 *
 * The fast paths (front/slqb/fast.h) are inline; the batch operations of the slow
 * paths are in percpu.c.  x86-64 only: elsewhere QS_HAVE_PERCPU is 0 and
 * owner.c never picks the CPU owner.
 */
#ifndef QSLAB_PERCPU_H
#define QSLAB_PERCPU_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

#if defined(__x86_64__)
#define QS_HAVE_PERCPU 1
#else
#define QS_HAVE_PERCPU 0
#endif

#define QS_STR_(x) #x
#define QS_STR(x) QS_STR_(x)

/* Offsets of the queue's hot fields that the sections use (checked). */
#define QS_Q_TOP 0
#define QS_Q_SLOTS 8
#define QS_Q_STAMP 16
#define QS_Q_LIMIT 28
#define QS_Q_OWN 32
#define QS_Q_NODE 40
#define QS_Q_PARK 44
#define QS_Q_FB 48
#define QS_Q_FB_TO 56
#define QS_Q_FB_MAX 64
_Static_assert(__builtin_offsetof(struct qs_queue, top) == QS_Q_TOP, "rseq: top");
_Static_assert(QS_Q_TOP == 0, "rseq: the free section commits through the queue's own address");
_Static_assert(__builtin_offsetof(struct qs_queue, slots) == QS_Q_SLOTS, "rseq: slots");
_Static_assert(__builtin_offsetof(struct qs_queue, stamp) == QS_Q_STAMP, "rseq: stamp");
_Static_assert(__builtin_offsetof(struct qs_queue, limit) == QS_Q_LIMIT, "rseq: limit");
_Static_assert(__builtin_offsetof(struct qs_queue, own) == QS_Q_OWN, "rseq: own");
_Static_assert(__builtin_offsetof(struct qs_queue, node) == QS_Q_NODE, "rseq: node");
_Static_assert(__builtin_offsetof(struct qs_queue, park) == QS_Q_PARK, "rseq: park");
_Static_assert(__builtin_offsetof(struct qs_queue, fb) == QS_Q_FB, "rseq: fb");
_Static_assert(__builtin_offsetof(struct qs_queue, fb_to) == QS_Q_FB_TO, "rseq: fb_to");
_Static_assert(__builtin_offsetof(struct qs_queue, fb_max) == QS_Q_FB_MAX, "rseq: fb_max");
_Static_assert(QS_FB_SHIFT == 44, "rseq: fb's layout");
_Static_assert(__builtin_offsetof(struct qs_owner, fixed) == 0, "rseq: owner->fixed[] first");
#define QS_TOP_MASK_ASM 0x1fffff /* QS_TOP_NR_MASK, QS_TOP_POP as assembler literals */
_Static_assert(QS_TOP_NR_MASK == QS_TOP_MASK_ASM && QS_TOP_POP == QS_TOP_MASK_ASM, "rseq: top's layout");
#if defined(__x86_64__)
_Static_assert(QS_RSEQ_SIG == 0x53053053u, "rseq: the signature the sections carry");
#endif

#if QS_HAVE_PERCPU
/* The section of the abort handlers and of the fast paths' other exits out
 * of line (to the slow paths): a section of its own, which the link keeps
 * among its file's code, near the slow paths the exits go to, and not
 * with the cold functions past the end of the library's code
 * (src/malloc/layout.ld), where it would keep a fault-around window of
 * its own resident. */
#define QS_RSEQ_FAILURE ".text.qs_rseq_exit"
/* Descriptor, abort handler (signature first) and entry of a critical
 * section whose body starts at 1: and whose committing store ends at 2:;
 * the abort handler jumps to the body's label 7 (forward).  Uses %rax; the
 * operand [off] is qs_rseq_off.  Bodies use labels 5-10.  No asm goto: GCC
 * 12 miscompiles asm goto with outputs (a value from the fall-through path
 * reached a goto label), so each section returns a status in a register. */
#define QS_RSEQ_DESC                                                                               \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                                           \
    ".balign 32\n\t"                                                                               \
    "3:\n\t"                                                                                       \
    ".long 0x0, 0x0\n\t"                                                                           \
    ".quad 1f, (2f - 1f), 4f\n\t"                                                                  \
    ".popsection\n\t"                                                                              \
    ".pushsection " QS_RSEQ_FAILURE ", \"ax\"\n\t"                                                      \
    ".byte 0x0f, 0xb9, 0x3d\n\t"                                                                   \
    ".long 0x53053053\n\t"                                                                         \
    "4:\n\t"                                                                                       \
    "jmp 7f\n\t"                                                                                   \
    ".popsection\n\t"
#define QS_RSEQ_ENTER                                                                              \
    QS_RSEQ_DESC                                                                                   \
    "leaq 3b(%%rip), %%rax\n\t"                                                                    \
    "movq %%rax, %%fs:8(%[off])\n\t"                                                               \
    "1:\n\t"
/* The fast paths' entry: qs_rseq_off read from memory ([offm]) into %rcx,
 * which the body reads cpu_id through and may reuse after: two input
 * registers fewer than QS_RSEQ_ENTER with the table as a memory operand
 * too, so that the inlined fast paths need no callee-saved register. */
#define QS_RSEQ_ENTER_FAST                                                                         \
    QS_RSEQ_DESC                                                                                   \
    "movq %[offm], %%rcx\n\t"                                                                      \
    "leaq 3b(%%rip), %%rax\n\t"                                                                    \
    "movq %%rax, %%fs:8(%%rcx)\n\t"                                                                \
    "1:\n\t"
#endif

#if QS_HAVE_PERCPU
/* The end of a slow-path section whose status is in %rsi: its value at the
 * commit (a count, 0), QS_RSEQ_ABORT from the abort handler (7:), or
 * QS_RSEQ_MOVED when the caller is not on the queue's CPU (8:). */
#define QS_RSEQ_TAIL                                                                               \
    "2:\n\t"                                                                                       \
    "jmp 9f\n\t"                                                                                   \
    "7:\n\t" /* from the abort handler */                                                          \
    "movq $-2, %%rsi\n\t"                                                                          \
    "jmp 9f\n\t"                                                                                   \
    "8:\n\t" /* not on the queue's CPU */                                                          \
    "movq $-1, %%rsi\n\t"                                                                          \
    "9:\n\t"
#endif

/* ThreadSanitizer cannot see inside a restartable sequence, nor the order
 * that running on one CPU gives two of them: the sections are told to it as
 * a release of the queue (before a push publishes objects) and an acquire
 * (after a pop takes them).  No-ops in other builds. */
#if defined(__SANITIZE_THREAD__)
__attribute__((visibility("default"))) void __tsan_acquire(void *addr);
__attribute__((visibility("default"))) void __tsan_release(void *addr);
#define QS_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define QS_TSAN_RELEASE(p) __tsan_release((void *)(p))
#else
#define QS_TSAN_ACQUIRE(p) ((void)(p))
#define QS_TSAN_RELEASE(p) ((void)(p))
#endif

#if defined(__SANITIZE_THREAD__)
/* TSan: a fast push is a release of the queue, told before its section;
 * the section then restarts (7:) if it finds another queue than this one
 * (the thread moved to another CPU in between). */
static inline struct qs_queue *qs_tsan_release_cpu_queue(unsigned long id)
{
    int cpu = qs_os_rseq_cpu(qs_rseq_off);
    struct qs_queue **t = __atomic_load_n(&qs_cpu_tables[cpu], __ATOMIC_ACQUIRE);
    struct qs_queue *q = __atomic_load_n(&t[id], __ATOMIC_ACQUIRE);
    QS_TSAN_RELEASE(q);
    return q;
}
#endif

#if QS_HAVE_PERCPU
/* The free sections' start (front/slqb/fast.h, front/slub/fast.h): the
 * CPU's queue of slab [s]'s cache (cache_id at [scid]) into %rdx, through
 * the CPU's table; %rax and %rcx are scratch.  Under TSan the section
 * restarts (7:) unless that is the queue QS_TSAN_FREE_BEGIN released; a
 * section using this names QS_TSAN_FREE_EXPECT among its inputs. */
#if defined(__SANITIZE_THREAD__)
#define QS_TSAN_FREE_BEGIN(s) struct qs_queue *qs_expect_q = qs_tsan_release_cpu_queue((s)->cache_id)
#define QS_TSAN_FREE_EXPECT , [expect] "r"(qs_expect_q)
#define QS_TSAN_FREE_SAME "cmpq %[expect], %%rdx\n\t" "jne 7f\n\t"
#else
#define QS_TSAN_FREE_BEGIN(s) ((void)0)
#define QS_TSAN_FREE_EXPECT
#define QS_TSAN_FREE_SAME ""
#endif
#define QS_PERCPU_FREE_ENTER                                                                       \
    QS_RSEQ_ENTER_FAST                                                                             \
    "movslq %%fs:4(%%rcx), %%rax\n\t"                                                              \
    "movq %[tablesm], %%rcx\n\t"                                                                   \
    "movq (%%rcx,%%rax,8), %%rax\n\t"                                                              \
    "movzwl %c[scid](%[s]), %%edx\n\t" /* the slab's cache id */                                   \
    "movq (%%rax,%%rdx,8), %%rdx\n\t"  /* the queue */                                             \
    QS_TSAN_FREE_SAME
#endif

#define QS_RSEQ_MOVED (-1) /* the caller does not run on the queue's CPU */
#define QS_RSEQ_ABORT (-2) /* restarted by the kernel: try again */

/* Batch operations on queue q, run on q's CPU (the caller holds q->lock,
 * so no other slow path changes q meanwhile).  Each returns -1, having
 * changed nothing, when the caller does not run on q->cpu (it migrated). */
/* Push objs[0..n) while nr < cap; returns how many were pushed. */
int qs_percpu_push(struct qs_queue *q, void *const *objs, unsigned n, unsigned cap);
/* Pop up to n objects from the top into dst; returns how many. */
int qs_percpu_pop(struct qs_queue *q, void **dst, unsigned n);
/* Replace q->slots by `slots` (room for at least nr), copying the entries. */
int qs_percpu_swap_slots(struct qs_queue *q, void **slots);
/* Replace q->fb by `w`; its old value in *old. */
int qs_percpu_swap_fb(struct qs_queue *q, uint64_t w, uint64_t *old);
/* Take a CPU's queue from its CPU (its fast paths miss until given back:
 * a membarrier restarts any section running there); false: impossible
 * (no membarrier).  The caller holds q->lock. */
bool qs_percpu_take(struct qs_queue *q);
void qs_percpu_give(struct qs_queue *q);

#pragma GCC visibility pop

#endif /* QSLAB_PERCPU_H */
