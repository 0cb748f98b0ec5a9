/*
 * core/lock.h - qslab's lock, a test-and-test-and-set spinlock whose slow
 * path (lock.c qs_lock_slow) yields the CPU after a short spin, so it
 * behaves with more threads than cores; and the relaxed loads and stores of
 * single-writer counters.  It stands on nothing of qslab's: core/internal.h
 * includes it before the structures that hold locks.
 */
#ifndef QSLAB_CORE_LOCK_H
#define QSLAB_CORE_LOCK_H

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#define qs_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define qs_cpu_relax() __asm__ __volatile__("yield")
#else
#define qs_cpu_relax() ((void)0)
#endif
typedef struct {
    int v;
} qs_lock;
void qs_lock_slow(qs_lock *l) __attribute__((visibility("hidden")));
static inline void qs_lock_acquire(qs_lock *l)
{
    if (__builtin_expect(!__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE), 1))
        return;
    qs_lock_slow(l);
}
static inline bool qs_lock_try(qs_lock *l)
{
    return !__atomic_load_n(&l->v, __ATOMIC_RELAXED) && !__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE);
}
static inline void qs_lock_release(qs_lock *l)
{
    __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}

/* relaxed single-writer counters */
#define QS_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define QS_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define QS_ADD(x, n) QS_STORE(x, QS_LOAD(x) + (n))

#endif /* QSLAB_CORE_LOCK_H */
