/*
 * os/linux.c - the only file that includes OS headers (see src/os/os.h).
 */
#define _GNU_SOURCE
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <linux/rseq.h>
#include <poll.h>
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
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* RUNNING_ON_VALGRIND: a client request, nothing natively */
#define QS_OS_VALGRIND 1
#endif
#endif

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
static void fault_env(void)
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
        } else {
            static const char msg[] =
                "qslab: QSLAB_FAIL_NTH ignored: expected N[,every][,release] (N a number)\n";
            qs_os_write(2, msg, sizeof(msg) - 1);
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

static const char *parse_uint(const char *s, int *out)
{
    int v = 0;
    if (*s < '0' || *s > '9')
        return NULL;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (*s++ - '0');
    *out = v;
    return s;
}

/* Calls fn(a, b, arg) for every range "a-b" or "a" of a sysfs list "0-3,8". */
static void for_each_range(const char *s, void (*fn)(int, int, void *), void *arg)
{
    while (*s) {
        int a, b;
        const char *e = parse_uint(s, &a);
        if (!e)
            break;
        b = a;
        if (*e == '-') {
            e = parse_uint(e + 1, &b);
            if (!e)
                break;
        }
        fn(a, b, arg);
        s = e;
        if (*s == ',')
            s++;
        else
            break;
    }
}

struct topo_arg {
    int *cpu_node, max_cpus, node, max_node;
};

static void mark_node(int a, int b, void *arg)
{
    struct topo_arg *t = arg;
    if (b > t->max_node)
        t->max_node = b;
}

static void mark_cpus(int a, int b, void *arg)
{
    struct topo_arg *t = arg;
    for (int c = a; c <= b && c < t->max_cpus; c++)
        t->cpu_node[c] = t->node;
}

int qs_os_numa_topology(int *cpu_node, int max_cpus)
{
    char buf[512];
    struct topo_arg t = {cpu_node, max_cpus, 0, 0};
    for (int c = 0; c < max_cpus; c++)
        cpu_node[c] = 0;
    if (qs_os_read_file("/sys/devices/system/node/online", buf, sizeof(buf)) <= 0)
        return 1;
    for_each_range(buf, mark_node, &t);
    int nodes = t.max_node + 1;
    for (int n = 0; n < nodes; n++) {
        char path[96];
        /* "/sys/devices/system/node/node%d/cpulist" without stdio */
        static const char pre[] = "/sys/devices/system/node/node";
        static const char post[] = "/cpulist";
        char num[12];
        int len = 0, v = n;
        do {
            num[len++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        size_t k = 0;
        memcpy(path, pre, sizeof(pre) - 1);
        k = sizeof(pre) - 1;
        while (len)
            path[k++] = num[--len];
        memcpy(path + k, post, sizeof(post));
        if (qs_os_read_file(path, buf, sizeof(buf)) <= 0)
            continue;
        t.node = n;
        for_each_range(buf, mark_cpus, &t);
    }
    return nodes < 1 ? 1 : nodes;
}

/* ---- memory pressure ----------------------------------------------------------- */

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

/* fn(line, len, arg) for each line of a file (lines of up to 4 KiB; a
 * longer one is skipped), until fn returns true: true then. */
static bool each_line(const char *path, bool (*fn)(const char *, size_t, void *), void *arg)
{
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t have = 0;
    bool skipping = false, found = false, eof = false;
    while (!found && !eof) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            eof = true;
            if (have && !skipping)
                buf[have++] = '\n'; /* a last line without its newline */
        } else {
            have += (size_t)n;
        }
        size_t start = 0;
        for (size_t i = 0; i < have && !found; i++) {
            if (buf[i] != '\n')
                continue;
            if (!skipping)
                found = fn(buf + start, i - start, arg);
            skipping = false;
            start = i + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf) { /* a line longer than the buffer */
            have = 0;
            skipping = true;
        }
    }
    close(fd);
    return found;
}

struct cg_find {
    char *buf;
    size_t size, len, mount_len;
    bool v1;         /* the cgroup v1 memory controller's hierarchy, not cgroup2's */
    const char *rel; /* the cgroup's path in its hierarchy, in rel_buf */
    size_t rel_len;
    char rel_buf[1024];
};

/* Is `word` one of the comma-separated words of s[0..n)? */
static bool has_word(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != ',')
            e++;
        if (e - i == wl && memcmp(s + i, word, wl) == 0)
            return true;
        i = e + 1;
    }
    return false;
}

static bool cg_line(const char *l, size_t n, void *arg) /* /proc/self/cgroup */
{
    /* ID:CONTROLLERS:PATH; cgroup2's is 0::PATH */
    struct cg_find *f = arg;
    const char *c1 = memchr(l, ':', n), *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
    if (!c2)
        return false;
    bool mine = f->v1 ? has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory")
                      : c1 - l == 1 && l[0] == '0' && c2 == c1 + 1;
    size_t len = n - (size_t)(c2 + 1 - l);
    if (!mine || len >= sizeof f->rel_buf)
        return false;
    memcpy(f->rel_buf, c2 + 1, len);
    f->rel_buf[len] = '\0';
    f->rel = f->rel_buf;
    f->rel_len = len;
    return true;
}

/* The n-th (from 0) space-separated field of l: its start and length. */
static const char *field(const char *l, size_t n, int k, size_t *len)
{
    size_t i = 0;
    for (int f = 0; i < n; f++) {
        size_t s = i;
        while (i < n && l[i] != ' ')
            i++;
        if (f == k) {
            *len = i - s;
            return l + s;
        }
        i++;
    }
    return NULL;
}

static bool mount_line(const char *l, size_t n, void *arg) /* /proc/self/mountinfo */
{
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER */
    struct cg_find *f = arg;
    const char *type = f->v1 ? " - cgroup " : " - cgroup2 ";
    size_t tl = strlen(type), i;
    for (i = 0; i + tl <= n; i++)
        if (memcmp(l + i, type, tl) == 0)
            break;
    if (i + tl > n)
        return false;
    size_t rl = 0, ml = 0, sl = 0;
    const char *root = field(l, n, 3, &rl), *mnt = field(l, n, 4, &ml);
    const char *super = field(l + i + tl, n - i - tl, 1, &sl); /* after SOURCE */
    if (!root || !mnt || memchr(mnt, '\\', ml)) /* an escaped name: not followed */
        return false;
    if (f->v1 && (!super || !has_word(super, sl, "memory")))
        return false;
    /* the cgroup's path below the mount's root */
    const char *rel = f->rel;
    size_t rel_len = f->rel_len;
    if (!(rl == 1 && root[0] == '/')) {
        if (rel_len < rl || memcmp(rel, root, rl) != 0 || (rel_len > rl && rel[rl] != '/'))
            return false; /* the cgroup is not under this mount */
        rel += rl;
        rel_len -= rl;
    }
    if (rel_len == 1 && rel[0] == '/')
        rel_len = 0;
    if (ml + rel_len + 1 > f->size)
        return false;
    memcpy(f->buf, mnt, ml);
    memcpy(f->buf + ml, rel, rel_len);
    f->buf[ml + rel_len] = '\0';
    f->len = ml + rel_len;
    f->mount_len = ml;
    return true;
}

size_t qs_os_cgroup_dir(bool v1_memory, char *buf, size_t size, size_t *mount_len, const char **why)
{
    struct cg_find f = {.buf = buf, .size = size, .v1 = v1_memory};
    if (!each_line("/proc/self/cgroup", cg_line, &f)) {
        *why = v1_memory ? "no cgroup v1 memory line in /proc/self/cgroup"
                         : "no cgroup v2 line in /proc/self/cgroup";
        return 0;
    }
    if (!each_line("/proc/self/mountinfo", mount_line, &f)) {
        *why = v1_memory ? "no cgroup v1 memory mount holds the process's cgroup"
                         : "no cgroup2 mount holds the process's cgroup";
        return 0;
    }
    *mount_len = f.mount_len;
    return f.len;
}

int qs_os_psi_open(const char *path, const char *trigger)
{
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(trigger) + 1; /* with its NUL, as the kernel's example writes it */
    ssize_t n;
    while ((n = write(fd, trigger, len)) < 0 && errno == EINTR)
        ;
    if (n < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int qs_os_psi_wait(int fd, unsigned ms)
{
    struct pollfd p = {.fd = fd, .events = POLLPRI};
    uint64_t end = qs_os_now_ms() + ms;
    for (;;) {
        int r = poll(&p, 1, (int)ms);
        if (r > 0)
            return (p.revents & (POLLERR | POLLNVAL | POLLHUP)) ? -1 : 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
        uint64_t now = qs_os_now_ms();
        if (now >= end)
            return 0;
        ms = (unsigned)(end - now);
    }
}

void qs_os_close(int fd)
{
    close(fd);
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

void qs_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    pthread_atfork(prepare, parent, child);
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

/* ---- CPUs -------------------------------------------------------------------- */

static void max_range(int a, int b, void *arg)
{
    int *max = arg;
    if (b > *max)
        *max = b;
}

/* The possible CPUs are fixed at boot (hotplug changes the online and
 * present sets, not the possible one), so the file is read once: every
 * cache's setup asks (tune.c, slub/cachewide.c, slab/slabs.c), 17 times at the
 * drop-in's start-up alone, four system calls each.  Threads that race on
 * the first call compute the same value; the relaxed atomic only keeps
 * the word whole. */
static int cpu_possible_seen;

int qs_os_cpu_possible(void)
{
    int seen = __atomic_load_n(&cpu_possible_seen, __ATOMIC_RELAXED);
    if (seen > 0)
        return seen;
    int saved = errno;
    char buf[512];
    int max = -1;
    if (qs_os_read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf)) > 0)
        for_each_range(buf, max_range, &max);
    if (max < 0) {
        /* No sysfs: the raw system call returns the size of the kernel's CPU
         * mask in bytes, which covers every possible id (glibc's wrapper
         * returns 0 instead). */
        cpu_set_t set;
        long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(set), &set);
        max = bytes > 0 ? (int)(bytes * 8) - 1 : 0;
    }
    errno = saved;
    __atomic_store_n(&cpu_possible_seen, max + 1, __ATOMIC_RELAXED);
    return max + 1;
}

int qs_os_cpus_allowed(void)
{
    int saved = errno;
    cpu_set_t set; /* 1024 CPUs, on the stack: no allocation */
    int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    errno = saved;
    return n > 0 ? n : 1;
}

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

int qs_os_membarrier_rseq_register(void)
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
