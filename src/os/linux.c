/*
 * os/linux.c - the only file that includes OS headers (see src/os.h).
 */
#define _GNU_SOURCE
#include "../os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

void *qs_os_map_aligned(size_t size, size_t align)
{
    size_t span = size + align;
    if (span < size)
        return NULL;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - size;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)start + size, tail);
    return (void *)start;
}

/* free() must keep errno: the calls made on free paths restore it. */
void qs_os_unmap(void *p, size_t size)
{
    int e = errno;
    munmap(p, size);
    errno = e;
}

void qs_os_decommit(void *p, size_t size)
{
    int e = errno;
    madvise(p, size, MADV_DONTNEED);
    errno = e;
}

int qs_os_remap_inplace(void *p, size_t old_size, size_t new_size)
{
    void *r = mremap(p, old_size, new_size, 0);
    return r == MAP_FAILED ? -1 : 0;
}

int qs_os_remap_to(void *p, size_t old_size, void *dst, size_t new_size)
{
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

void qs_os_yield(void)
{
    sched_yield();
}

/* Read a small sysfs file into buf (NUL-terminated); length or -1. */
static int read_small_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (int)got;
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
    if (read_small_file("/sys/devices/system/node/online", buf, sizeof(buf)) <= 0)
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
        if (read_small_file(path, buf, sizeof(buf)) <= 0)
            continue;
        t.node = n;
        for_each_range(buf, mark_cpus, &t);
    }
    return nodes < 1 ? 1 : nodes;
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

void qs_os_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
