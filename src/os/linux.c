/*
 * os/linux.c - memory (mapping, giving back, moving, binding, protecting),
 * fault injection, and the process's basics: messages, randomness, the
 * environment, clocks, small files, threads.  The os layer's files
 * (linux.c, topology.c, cgroup.c, rseq.c) are the only ones that include
 * OS headers (see src/os/os.h).
 */
#define _GNU_SOURCE
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MPOL_PREFERRED
#define MPOL_PREFERRED 1
#endif
#ifndef MPOL_F_NODE
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)
#endif

/* ---- fault injection (os.h) ----------------------------------------------------
 *
 * Tests make the OS refuse: the nth request of a kind fails as if the kernel
 * had said ENOMEM, so that every caller's failure path runs on demand.  The
 * hook sits here, under every caller, so that nothing above can reach the
 * kernel around it.  State is a few words of atomics: a request of a kind
 * not armed costs one relaxed load (map requests are slow paths anyway). */
static struct {
    int env;                                   /* QSLAB_FAIL_NTH: 0 unread, 1 reading, 2 read */
    unsigned long nth[QS_OS_FAULT_KINDS];      /* 0: not armed */
    int every[QS_OS_FAULT_KINDS];              /* every nth, not just the nth */
    unsigned long seen[QS_OS_FAULT_KINDS];     /* requests since armed */
    unsigned long injected[QS_OS_FAULT_KINDS]; /* failures made, ever */
} fault;

static void fault_set(int kind, unsigned long nth, int every)
{
    /* disarmed while the count restarts: a racing request sees either
     * arming, never the new nth with the old count */
    __atomic_store_n(&fault.nth[kind], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault.seen[kind], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault.every[kind], every, __ATOMIC_RELAXED);
    __atomic_store_n(&fault.nth[kind], nth, __ATOMIC_RELEASE);
}

/* QSLAB_FAIL_NTH=N[,every][,release], read once, at the first request or
 * arming (start-up's first map: the meta allocator's first block).  No
 * stdio here: a bad value is said with write(2), and ignored. */
static QS_STARTUP void fault_env(void)
{
    int st = 0;
    if (!__atomic_compare_exchange_n(&fault.env, &st, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&fault.env, __ATOMIC_ACQUIRE) != 2)
            sched_yield();
        return;
    }
    const char *v = getenv("QSLAB_FAIL_NTH");
    if (v && *v) {
        unsigned long n = 0;
        int every = 0, kind = QS_OS_FAULT_MAP, ok = *v >= '0' && *v <= '9';
        const char *s = v;
        while (*s >= '0' && *s <= '9' && n < (1ul << 58))
            n = n * 10 + (unsigned long)(*s++ - '0');
        while (ok && *s == ',') {
            s++;
            if (strncmp(s, "every", 5) == 0 && (s[5] == ',' || !s[5])) {
                every = 1;
                s += 5;
            } else if (strncmp(s, "release", 7) == 0 && (s[7] == ',' || !s[7])) {
                kind = QS_OS_FAULT_RELEASE;
                s += 7;
            } else {
                ok = 0;
            }
        }
        if (ok && !*s) {
            fault_set(kind, n, every);
        } else { /* one line, the value in it (at most 64 bytes of it) */
            static const char pre[] = "qslab: QSLAB_FAIL_NTH=",
                              post[] = " ignored: expected N[,every][,release] (N a number)\n";
            char line[sizeof pre + 64 + sizeof post];
            size_t vl = strnlen(v, 64), k = sizeof pre - 1;
            memcpy(line, pre, k);
            memcpy(line + k, v, vl);
            memcpy(line + k + vl, post, sizeof post - 1);
            qs_os_write(2, line, k + vl + sizeof post - 1);
        }
    }
    __atomic_store_n(&fault.env, 2, __ATOMIC_RELEASE);
}

/* Is this request of `kind` one to fail?  Counts it if the kind is armed. */
static int fault_hit(int kind)
{
    if (__builtin_expect(__atomic_load_n(&fault.env, __ATOMIC_ACQUIRE) != 2, 0))
        fault_env();
    unsigned long nth = __atomic_load_n(&fault.nth[kind], __ATOMIC_ACQUIRE);
    if (__builtin_expect(nth == 0, 1))
        return 0;
    unsigned long n = __atomic_add_fetch(&fault.seen[kind], 1, __ATOMIC_RELAXED);
    int hit = __atomic_load_n(&fault.every[kind], __ATOMIC_RELAXED) ? n % nth == 0 : n == nth;
    if (hit)
        __atomic_add_fetch(&fault.injected[kind], 1, __ATOMIC_RELAXED);
    return hit;
}

void qs_os_fault_arm(int kind, unsigned long nth, int every)
{
    if (__atomic_load_n(&fault.env, __ATOMIC_ACQUIRE) != 2)
        fault_env(); /* so that the environment never overrides this later */
    fault_set(kind, nth, every);
}

unsigned long qs_os_fault_injected(int kind)
{
    return __atomic_load_n(&fault.injected[kind], __ATOMIC_RELAXED);
}

/* ---- memory ------------------------------------------------------------------- */

void *qs_os_map_aligned(size_t size, size_t align)
{
    if (fault_hit(QS_OS_FAULT_MAP)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t span = size + align;
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - size;
    /* trimming the ends of a fresh mapping splits nothing: cannot fail */
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)start + size, tail);
    return (void *)start;
}

/* free() must keep errno: the calls made on free paths restore it. */
void *qs_os_reserve(size_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int qs_os_unmap(void *p, size_t size)
{
    if (fault_hit(QS_OS_FAULT_RELEASE))
        return -1;
    int e = errno;
    int r = munmap(p, size);
    errno = e;
    return r == 0 ? 0 : -1;
}

int qs_os_decommit(void *p, size_t size)
{
    if (fault_hit(QS_OS_FAULT_RELEASE))
        return -1;
    int e = errno;
    int r = madvise(p, size, MADV_DONTNEED);
    errno = e;
    return r == 0 ? 0 : -1;
}

/* MADV_POPULATE_WRITE (Linux 5.14): without it (EINVAL: an older kernel,
 * or a tool that does not know it) the next calls do nothing */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static int populate_off;

void qs_os_populate(void *p, size_t size)
{
    if (__atomic_load_n(&populate_off, __ATOMIC_RELAXED))
        return;
    int e = errno;
    if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        __atomic_store_n(&populate_off, 1, __ATOMIC_RELAXED);
    errno = e;
}

int qs_os_protect(void *p, size_t size, bool rw)
{
    int e = errno;
    int r = mprotect(p, size, rw ? PROT_READ | PROT_WRITE : PROT_NONE);
    errno = e;
    return r == 0 ? 0 : -1;
}

int qs_os_seal(void *p, size_t size)
{
    if (fault_hit(QS_OS_FAULT_RELEASE))
        return -1;
    /* not mmap(MAP_FIXED) over it: that may fail with the old mapping gone */
    int e = errno;
    int r = mprotect(p, size, PROT_NONE);
    if (r == 0)
        madvise(p, size, MADV_DONTNEED); /* refused: the pages stay, inaccessible */
    errno = e;
    return r == 0 ? 0 : -1;
}

int qs_os_remap_inplace(void *p, size_t old_size, size_t new_size)
{
    /* a growth needs pages and address space; a shrink gives them back */
    if (new_size > old_size && fault_hit(QS_OS_FAULT_MAP)) {
        errno = ENOMEM;
        return -1;
    }
    void *r = mremap(p, old_size, new_size, 0);
    return r == MAP_FAILED ? -1 : 0;
}

int qs_os_remap_to(void *p, size_t old_size, void *dst, size_t new_size)
{
    if (fault_hit(QS_OS_FAULT_MAP)) {
        errno = ENOMEM;
        return -1;
    }
    void *r = mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    return r == MAP_FAILED ? -1 : 0;
}

void qs_os_bind_node(void *p, size_t size, int node)
{
    unsigned long mask[16] = {0};
    if (node < 0 || node >= (int)(sizeof(mask) * 8))
        return;
    mask[node / (8 * sizeof(long))] = 1UL << (node % (8 * sizeof(long)));
    syscall(SYS_mbind, p, size, MPOL_PREFERRED, mask, sizeof(mask) * 8, 0);
}

int qs_os_page_node(const void *p)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return -1;
    return node;
}

void qs_os_write(int fd, const char *buf, size_t len)
{
    int saved = errno;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        buf += n;
        len -= (size_t)n;
    }
    errno = saved;
}

int qs_os_dup_fd(int fd)
{
    int saved = errno;
    int r = fcntl(fd, F_DUPFD_CLOEXEC, 64);
    errno = saved;
    return r;
}

void qs_os_abort(void)
{
    abort();
}

uint64_t qs_os_random64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
        return r;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&r ^ (uint64_t)getpid() << 32;
    r ^= r >> 29;
    r *= 0xbf58476d1ce4e5b9ULL;
    return r ^ (r >> 32);
}

const char *qs_os_getenv(const char *name)
{
    return getenv(name); /* reads environ; never allocates */
}

uint64_t qs_os_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int qs_os_current_cpu(void)
{
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : cpu;
}

int qs_os_gettid(void)
{
    return (int)syscall(SYS_gettid);
}

void qs_os_yield(void)
{
    sched_yield();
}

/* ---- files and threads ------------------------------------------------------- */

int qs_os_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (int)got;
}

static pthread_key_t exit_key;

int qs_os_thread_exit_init(void (*fn)(void *))
{
    return pthread_key_create(&exit_key, fn);
}

void qs_os_thread_watch(void *arg)
{
    pthread_setspecific(exit_key, arg);
}

#ifdef __GLIBC__
/* glibc's pthread_atfork is a stub in libc_nonshared.a, which the link puts
 * after the library's own code, so that calling it at start-up keeps a
 * 64 KiB fault-around window of the library's code resident for nothing
 * else (os.h QS_STARTUP); the stub calls __register_atfork with the
 * object's __dso_handle, and so does this. */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso);
extern void *__dso_handle __attribute__((weak, visibility("hidden")));
#endif

void qs_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
#ifdef __GLIBC__
    __register_atfork(prepare, parent, child, &__dso_handle ? __dso_handle : NULL);
#else
    pthread_atfork(prepare, parent, child);
#endif
}

/* glibc 2.32 and later: nonzero until the process creates its first thread
 * (pthread_create clears it before the new thread runs; it is not set again
 * when threads exit).  Weak, so that a libc without it (musl, older glibc)
 * or a static link that did not pull it in leaves its address null: then
 * we cannot tell, and say "not single-threaded". */
extern char __libc_single_threaded __attribute__((weak));

bool qs_os_single_threaded(void)
{
    char *flag = &__libc_single_threaded;
    return flag && __atomic_load_n(flag, __ATOMIC_RELAXED);
}

int qs_os_thread_start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    /* the purger must not take signals meant for the program's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&t, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return r == 0 ? 0 : -1;
}

void qs_os_thread_name(const char *name)
{
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

void qs_os_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
