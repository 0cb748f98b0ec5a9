/*
 * os/rseq.c - restartable sequences (the kernel's rseq: the thread's area,
 * glibc's registration or ours, virtual CPU ids under valgrind) and the
 * membarrier that restarts another CPU's sections (see os.h and
 * owner/percpu.h).
 */
#define _GNU_SOURCE
#include "os/os.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <linux/rseq.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* RUNNING_ON_VALGRIND: a client request, nothing natively */
#define QS_OS_VALGRIND 1
#endif
#endif

/* ---- restartable sequences --------------------------------------------------- */

_Static_assert(offsetof(struct rseq, cpu_id_start) == QS_RSEQ_CPU_ID_START_OFF, "rseq ABI");
_Static_assert(offsetof(struct rseq, cpu_id) == QS_RSEQ_CPU_ID_OFF, "rseq ABI");
_Static_assert(offsetof(struct rseq, rseq_cs) == QS_RSEQ_CS_OFF, "rseq ABI");

#ifndef RSEQ_CPU_ID_UNINITIALIZED
#define RSEQ_CPU_ID_UNINITIALIZED -1
#endif
#define QS_RSEQ_CPU_ID_FAILED -2 /* glibc's RSEQ_CPU_ID_REGISTRATION_FAILED */

/* glibc 2.35+ (<sys/rseq.h>, which older glibc lacks), defined in ld.so.
 * Referenced weakly, so the library still loads on an older glibc, where
 * their address is NULL: glibc did not register.  (libqslab.so then has them
 * as WEAK UND without a version requirement.) */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* Why the calling thread's registration failed (QS_RSEQ_SELF). */
static __thread const char *qs_rseq_thread_err __attribute__((tls_model("initial-exec")));

/* Set once by qs_os_rseq_init (release), read by every thread (acquire). */
static int rseq_inited;
static struct qs_os_rseq_info rseq_info;

#ifdef QS_RSEQ_SIG
static const char why_glibc[] = "glibc registered rseq";
/* qslab's own area, used in QS_RSEQ_SELF mode only.  Static TLS (initial-exec)
 * so that its offset from the thread pointer is one constant; a new thread's
 * copy starts with cpu_id = -1 (glibc initialises static TLS of reused stacks
 * too).  The exact 32-byte layout the kernel registers. */
static __thread struct {
    uint32_t cpu_id_start, cpu_id;
    uint64_t rseq_cs;
    uint32_t flags, node_id, mm_cid, pad;
} qs_rseq_area __attribute__((tls_model("initial-exec"), aligned(QS_RSEQ_AREA_SIZE))) = {
    .cpu_id = (uint32_t)RSEQ_CPU_ID_UNINITIALIZED,
};
_Static_assert(sizeof(qs_rseq_area) == QS_RSEQ_AREA_SIZE, "rseq area size");
_Static_assert(sizeof(struct rseq) >= QS_RSEQ_AREA_SIZE, "rseq ABI");

static const char why_self[] =
    "qslab registered rseq (glibc did not: GLIBC_TUNABLES=glibc.pthread.rseq=0 or old glibc)";

static long sys_rseq(void *area, unsigned len, int flags, uint32_t sig)
{
    return syscall(__NR_rseq, area, len, flags, sig);
}

/* Text for a refused registration of our own area (flags 0). */
static const char *rseq_refusal(int err)
{
    switch (err) {
    case ENOSYS:
        return "kernel has no rseq (ENOSYS; before Linux 4.18, or filtered by seccomp)";
    case EPERM:
        return "rseq refused (EPERM; seccomp filter?)";
    case EINVAL:
        return "rseq refused (EINVAL; another library registered an rseq area for this thread?)";
    case EFAULT:
        return "rseq refused (EFAULT)";
    default:
        return "rseq registration failed (unexpected error)";
    }
}

/* Register qs_rseq_area for the calling thread; NULL or the reason. */
static const char *self_register(void)
{
    long r = sys_rseq(&qs_rseq_area, QS_RSEQ_AREA_SIZE, 0, QS_RSEQ_SIG);
    if (r == 0 || errno == EBUSY) /* EBUSY: this very area and signature */
        return NULL;
    /* not registered, so the kernel does not own cpu_id: mark the refusal */
    __atomic_store_n(&qs_rseq_area.cpu_id, (uint32_t)QS_RSEQ_CPU_ID_FAILED, __ATOMIC_RELAXED);
    qs_rseq_thread_err = rseq_refusal(errno);
    return qs_rseq_thread_err;
}

#ifdef QS_OS_VALGRIND
/* QS_RSEQ_VALGRIND (os.h): virtual CPU ids, one per thread.  A bit per id,
 * set by the thread that claims it (compare-and-swap: ids are claimed by
 * threads at once), cleared by the same thread at its exit (the key's
 * destructor), after its cpu_id reads "refused": from then on its fast
 * paths find no queue, so the next owner of the id is alone on it.  The
 * claim's acquire pairs with the release of the clear. */
#define VCPU_MAX 4096
static uint64_t vcpu_used[VCPU_MAX / 64];
static pthread_key_t vcpu_key;
static const char why_valgrind[] =
    "rseq emulated under valgrind (one virtual CPU per thread, as many as CPUs)";
static const char why_no_vcpu[] = "valgrind: every virtual CPU is taken (one per thread, as many as CPUs)";

static void vcpu_release(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg - 1;
    __atomic_store_n(&qs_rseq_area.cpu_id, (uint32_t)QS_RSEQ_CPU_ID_FAILED, __ATOMIC_RELAXED);
    qs_rseq_thread_err = "valgrind: the thread gave its virtual CPU back (exiting)";
    __atomic_fetch_and(&vcpu_used[id / 64], ~((uint64_t)1 << (id % 64)), __ATOMIC_RELEASE);
}

/* Give the calling thread a free virtual CPU id; NULL or the reason not. */
static const char *vcpu_claim(void)
{
    int n = qs_os_cpu_possible();
    if (n > VCPU_MAX)
        n = VCPU_MAX;
    for (int id = 0; id < n; id++) {
        uint64_t bit = (uint64_t)1 << (id % 64), w = __atomic_load_n(&vcpu_used[id / 64], __ATOMIC_RELAXED);
        while (!(w & bit)) {
            if (__atomic_compare_exchange_n(&vcpu_used[id / 64], &w, w | bit, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                if (pthread_setspecific(vcpu_key, (void *)(uintptr_t)(id + 1)) != 0) {
                    __atomic_fetch_and(&vcpu_used[id / 64], ~bit, __ATOMIC_RELEASE);
                    break;
                }
                __atomic_store_n(&qs_rseq_area.cpu_id_start, (uint32_t)id, __ATOMIC_RELAXED);
                __atomic_store_n(&qs_rseq_area.cpu_id, (uint32_t)id, __ATOMIC_RELAXED);
                return NULL;
            }
        }
    }
    __atomic_store_n(&qs_rseq_area.cpu_id, (uint32_t)QS_RSEQ_CPU_ID_FAILED, __ATOMIC_RELAXED);
    qs_rseq_thread_err = why_no_vcpu;
    return why_no_vcpu;
}

/* Start-up under valgrind, whose kernel refused rseq: emulate it (os.h). */
static bool vcpu_init(void)
{
    if (!RUNNING_ON_VALGRIND || pthread_key_create(&vcpu_key, vcpu_release) != 0)
        return false;
    return vcpu_claim() == NULL;
}
#endif

/* glibc registered its area with its own RSEQ_SIG.  Ask the kernel whether
 * that is ours: registering the same area again answers EBUSY when the
 * signature matches and EPERM when it differs (EINVAL if the length differs:
 * try the sizes glibc may have used).  NULL or the reason not to use it. */
static const char *check_glibc_sig(char *area)
{
    unsigned lens[2] = {QS_RSEQ_AREA_SIZE, (__rseq_size + QS_RSEQ_AREA_SIZE - 1) & ~(QS_RSEQ_AREA_SIZE - 1u)};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && lens[1] <= lens[0])
            break;
        long r = sys_rseq(area, lens[i], 0, QS_RSEQ_SIG);
        if (r == 0 || errno == EBUSY)
            return NULL; /* r == 0: was not registered after all; now it is, as glibc would have */
        if (errno == EPERM) {
            /* or a seccomp filter answered: the kernel itself answers
             * EINVAL to unknown flags */
            if (sys_rseq(NULL, 0, 1 << 30, 0) != 0 && errno == EINVAL)
                return "glibc registered rseq with another signature than QS_RSEQ_SIG";
            break;
        }
        if (errno != EINVAL)
            break;
    }
    return NULL; /* cannot tell: glibc's RSEQ_SIG for this architecture is QS_RSEQ_SIG */
}
#endif

int qs_os_rseq_init(struct qs_os_rseq_info *out)
{
    if (__atomic_load_n(&rseq_inited, __ATOMIC_ACQUIRE)) {
        *out = rseq_info;
        return rseq_info.mode == QS_RSEQ_NONE ? -1 : 0;
    }
    int saved = errno;
    struct qs_os_rseq_info info = {QS_RSEQ_NONE, "no rseq signature known for this architecture", 0, 0};
#ifdef QS_RSEQ_SIG
    if (&__rseq_size != NULL && &__rseq_offset != NULL && __rseq_size != 0) {
        char *area = qs_os_thread_pointer() + __rseq_offset;
        const char *bad = check_glibc_sig(area);
        if (bad)
            info.why = bad;
        else if ((int32_t)__atomic_load_n((uint32_t *)(area + QS_RSEQ_CPU_ID_OFF), __ATOMIC_RELAXED) < 0)
            info.why = "glibc registered rseq, but cpu_id of this thread is not valid";
        else
            info = (struct qs_os_rseq_info){QS_RSEQ_GLIBC, why_glibc, (long)__rseq_offset, __rseq_size};
    } else {
        const char *bad = self_register();
        long off = (long)((char *)&qs_rseq_area - qs_os_thread_pointer());
#ifdef QS_OS_VALGRIND
        if (bad && errno == ENOSYS && vcpu_init())
            info = (struct qs_os_rseq_info){QS_RSEQ_VALGRIND, why_valgrind, off, QS_RSEQ_AREA_SIZE};
        else
#endif
        if (bad) {
            info.why = bad;
        } else {
            info = (struct qs_os_rseq_info){QS_RSEQ_SELF, why_self, off, QS_RSEQ_AREA_SIZE};
        }
    }
#endif
    rseq_info = info;
    __atomic_store_n(&rseq_inited, 1, __ATOMIC_RELEASE);
    *out = info;
    errno = saved;
    return info.mode == QS_RSEQ_NONE ? -1 : 0;
}

int qs_os_rseq_register_thread(void)
{
    if (!__atomic_load_n(&rseq_inited, __ATOMIC_ACQUIRE))
        return -1;
    switch (rseq_info.mode) {
    case QS_RSEQ_GLIBC: /* glibc registers every thread it creates */
        return qs_os_rseq_cpu(rseq_info.offset) >= 0 ? 0 : -1;
#ifdef QS_RSEQ_SIG
#ifdef QS_OS_VALGRIND
    case QS_RSEQ_VALGRIND: /* qslab's area as well: a virtual CPU instead of the kernel's */
#endif
    case QS_RSEQ_SELF: {
        int32_t cpu = (int32_t)__atomic_load_n(&qs_rseq_area.cpu_id, __ATOMIC_RELAXED);
        if (cpu >= 0)
            return 0;
        if (cpu == QS_RSEQ_CPU_ID_FAILED)
            return -1;
        int saved = errno;
#ifdef QS_OS_VALGRIND
        const char *bad = rseq_info.mode == QS_RSEQ_VALGRIND ? vcpu_claim() : self_register();
#else
        const char *bad = self_register();
#endif
        errno = saved;
        return bad ? -1 : 0;
    }
#endif
    default:
        return -1;
    }
}

const char *qs_os_rseq_thread_why(void)
{
    if (!__atomic_load_n(&rseq_inited, __ATOMIC_ACQUIRE))
        return "qs_os_rseq_init has not run";
    if (rseq_info.mode == QS_RSEQ_NONE)
        return rseq_info.why;
    if (qs_os_rseq_cpu(rseq_info.offset) >= 0)
        return "registered";
    if (rseq_info.mode == QS_RSEQ_GLIBC)
        return "glibc did not register this thread";
    return qs_rseq_thread_err ? qs_rseq_thread_err : "not registered yet";
}

/* ---- membarrier -------------------------------------------------------------- */

#ifndef MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ (1 << 7)
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ (1 << 8)
#endif
#ifndef MEMBARRIER_CMD_FLAG_CPU
#define MEMBARRIER_CMD_FLAG_CPU (1 << 0)
#endif

/* Set when the kernel refused MEMBARRIER_CMD_FLAG_CPU: use the all-CPU form. */
static int membarrier_no_cpu_flag;

QS_STARTUP int qs_os_membarrier_rseq_register(void)
{
    if (rseq_info.mode == QS_RSEQ_VALGRIND)
        return -1; /* no section is the kernel's to restart */
    int saved = errno;
    long r = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0);
    errno = saved;
    return r == 0 ? 0 : -1;
}

int qs_os_membarrier_rseq(int cpu)
{
    int saved = errno;
    long r = -1;
    if (cpu >= 0 && !__atomic_load_n(&membarrier_no_cpu_flag, __ATOMIC_RELAXED)) {
        r = syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, cpu);
        if (r != 0 && errno != EINVAL) {
            errno = saved;
            return -1; /* EPERM: not registered */
        }
    }
    if (r != 0) {
        r = syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
        if (r == 0 && cpu >= 0) /* the command works, the CPU flag does not */
            __atomic_store_n(&membarrier_no_cpu_flag, 1, __ATOMIC_RELAXED);
    }
    errno = saved;
    return r == 0 ? 0 : -1;
}
