/*
 * lock.c - the lock's slow path (lock.h): spin a little, then yield the
 * CPU, so that a lock holder that was preempted gets to run when there are
 * more threads than cores.
 */
#include "core/lock.h"
#include "os/os.h"

void qs_lock_slow(qs_lock *l)
{
    unsigned spins = 0;
    for (;;) {
        while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
            if (spins++ < 64)
                qs_cpu_relax();
            else
                qs_os_yield();
        }
        if (!__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE))
            return;
    }
}
