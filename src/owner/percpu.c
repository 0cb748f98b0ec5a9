/*
 * percpu.c - the slow paths' batch operations on per-CPU queues, as
 * restartable sequences (see percpu.h for the contract).  Each checks that
 * it runs on the queue's CPU first: the caller holds q->lock (so no other
 * slow path touches q), but may have migrated since it chose q; fast paths
 * on q->cpu may run between any two of our sections, never inside one.
 * Budget: a few instructions plus one load and one store per object.
 * And taking a CPU's queue from its CPU (qs_percpu_take, a membarrier), for
 * a thread on another CPU to empty it as its owner would: a shrink, the
 * purger's idle CPUs, SLAB's reaping, SLUB's cache-wide work.
 */
#include "owner/percpu.h"

#if QS_HAVE_PERCPU

int qs_percpu_push(struct qs_queue *q, void *const *objs, unsigned n, unsigned cap)
{
    long k;
    QS_TSAN_RELEASE(q);
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movq " QS_STR(QS_Q_TOP) "(%[q]), %%rcx\n\t"
                         "movl %%ecx, %%edx\n\t"
                         "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%edx\n\t" /* nr */
                         "movl %[cap], %%esi\n\t"
                         "subl %%edx, %%esi\n\t" /* room (cap >= nr: the caller keeps it so) */
                         "cmpl %[n], %%esi\n\t"
                         "cmoval %[n], %%esi\n\t" /* k = min(room, n) */
                         "movq " QS_STR(QS_Q_SLOTS) "(%[q]), %%rdi\n\t"
                         "leaq (%%rdi,%%rdx,8), %%rdi\n\t"
                         "xorl %%edx, %%edx\n\t"
                         "5:\n\t"
                         "cmpl %%esi, %%edx\n\t"
                         "jae 6f\n\t"
                         "movq (%[objs],%%rdx,8), %%r8\n\t"
                         "movq %%r8, (%%rdi,%%rdx,8)\n\t"
                         "incl %%edx\n\t"
                         "jmp 5b\n\t"
                         "6:\n\t"
                         "addq %%rsi, %%rcx\n\t"
                         "movq %%rcx, " QS_STR(QS_Q_TOP) "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), [objs] "r"(objs),
                           [n] "r"(n), [cap] "r"(cap)
                         : "rax", "rcx", "rdx", "rdi", "r8", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    return (int)k;
}

int qs_percpu_pop(struct qs_queue *q, void **dst, unsigned n)
{
    long k;
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movq " QS_STR(QS_Q_TOP) "(%[q]), %%rcx\n\t"
                         "movl %%ecx, %%edx\n\t"
                         "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%edx\n\t" /* nr */
                         "movl %%edx, %%esi\n\t"
                         "cmpl %[n], %%esi\n\t"
                         "cmoval %[n], %%esi\n\t" /* k = min(nr, n) */
                         "subl %%esi, %%edx\n\t"  /* the first taken: nr - k */
                         "movq " QS_STR(QS_Q_SLOTS) "(%[q]), %%rdi\n\t"
                         "leaq (%%rdi,%%rdx,8), %%rdi\n\t"
                         "xorl %%edx, %%edx\n\t"
                         "5:\n\t"
                         "cmpl %%esi, %%edx\n\t"
                         "jae 6f\n\t"
                         "movq (%%rdi,%%rdx,8), %%r8\n\t"
                         "movq %%r8, (%[dst],%%rdx,8)\n\t"
                         "incl %%edx\n\t"
                         "jmp 5b\n\t"
                         "6:\n\t"
                         "subq %%rsi, %%rcx\n\t"
                         "movq %%rcx, " QS_STR(QS_Q_TOP) "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), [dst] "r"(dst),
                           [n] "r"(n)
                         : "rax", "rcx", "rdx", "rdi", "r8", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    QS_TSAN_ACQUIRE(q);
    return (int)k;
}

int qs_percpu_swap_slots(struct qs_queue *q, void **slots)
{
    long k;
    QS_TSAN_RELEASE(q);
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movq " QS_STR(QS_Q_TOP) "(%[q]), %%rcx\n\t"
                         "andl $" QS_STR(QS_TOP_MASK_ASM) ", %%ecx\n\t" /* nr */
                         "movq " QS_STR(QS_Q_SLOTS) "(%[q]), %%rdi\n\t"
                         "xorl %%edx, %%edx\n\t"
                         "5:\n\t"
                         "cmpl %%ecx, %%edx\n\t"
                         "jae 6f\n\t"
                         "movq (%%rdi,%%rdx,8), %%r8\n\t"
                         "movq %%r8, (%[slots],%%rdx,8)\n\t"
                         "incl %%edx\n\t"
                         "jmp 5b\n\t"
                         "6:\n\t"
                         "xorl %%esi, %%esi\n\t"
                         "movq %[slots], " QS_STR(QS_Q_SLOTS) "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), [slots] "r"(slots)
                         : "rax", "rcx", "rdx", "rdi", "r8", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    QS_TSAN_ACQUIRE(q);
    return (int)k;
}

int qs_percpu_swap_fb(struct qs_queue *q, uint64_t w, uint64_t *old)
{
    long k;
    uint64_t was;
    QS_TSAN_RELEASE(q);
    do {
        __asm__ volatile(QS_RSEQ_ENTER
                         "cmpl %%fs:4(%[off]), %[cpu]\n\t"
                         "jne 8f\n\t"
                         "movq " QS_STR(QS_Q_FB) "(%[q]), %%rcx\n\t"
                         "xorl %%esi, %%esi\n\t"
                         "movq %[w], " QS_STR(QS_Q_FB) "(%[q])\n\t" /* commit */
                         QS_RSEQ_TAIL
                         : "=&S"(k), "=&c"(was)
                         : [off] "r"(qs_rseq_off), [cpu] "r"(q->cpu), [q] "r"(q), [w] "r"(w)
                         : "rax", "memory", "cc");
        if (k == QS_RSEQ_ABORT)
            qs_self.rseq_aborts++;
    } while (k == QS_RSEQ_ABORT);
    QS_TSAN_ACQUIRE(q);
    if (k == 0)
        *old = was;
    return (int)k;
}

#else /* no rseq port: never called (owner.c picks threads) */

int qs_percpu_push(struct qs_queue *q, void *const *objs, unsigned n, unsigned cap)
{
    return -1;
}
int qs_percpu_pop(struct qs_queue *q, void **dst, unsigned n)
{
    return -1;
}
int qs_percpu_swap_slots(struct qs_queue *q, void **slots)
{
    return -1;
}
int qs_percpu_swap_fb(struct qs_queue *q, uint64_t w, uint64_t *old)
{
    return -1;
}

#endif

/* Take q from its CPU (q->lock held): its fast paths find qs_no_queue from
 * now on (and go to the slow paths, which wait for the lock), and the
 * membarrier restarts any section that found q before.  Then q's top and
 * slots are the caller's, as a thread's queue is its thread's, until
 * percpu_give.  False if membarrier is refused (nothing changed). */
bool qs_percpu_take(struct qs_queue *q)
{
    if (!qs_percpu_takeable)
        return false;
    unsigned id = q->cache->id;
    if (id < QS_PERCPU_IDS) {
        __atomic_store_n(&q->owner->ids[id], &qs_no_queue, __ATOMIC_RELEASE);
        if (qs_os_membarrier_rseq(q->cpu) != 0) {
            __atomic_store_n(&q->owner->ids[id], q, __ATOMIC_RELEASE);
            return false;
        }
    }
    return true;
}

void qs_percpu_give(struct qs_queue *q)
{
    unsigned id = q->cache->id;
    if (id < QS_PERCPU_IDS)
        __atomic_store_n(&q->owner->ids[id], q, __ATOMIC_RELEASE);
}
