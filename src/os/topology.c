/*
 * os/topology.c - the machine's shape from sysfs: NUMA nodes and their
 * CPUs, the possible CPUs, the CPUs the process may run on (see os.h).
 */
#define _GNU_SOURCE
#include "os/os.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

QS_STARTUP int qs_os_numa_topology(int *cpu_node, int max_cpus)
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

QS_STARTUP int qs_os_cpu_possible(void)
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
