/*
 * os.h - the contract between qslab and the operating system.
 *
 * Only src/os/ includes OS headers.  Every function here is safe to call from
 * inside an allocation: none of them allocates memory through libc, none uses
 * stdio, and none takes a lock of qslab's.
 */
#ifndef QSLAB_OS_H
#define QSLAB_OS_H

#include <stddef.h>
#include <stdint.h>

/* Map `size` bytes (a multiple of the page size) of zeroed, read-write,
 * private anonymous memory whose start is a multiple of `align` (a power of
 * two, at least the page size).  NULL on failure (errno set). */
void *qs_os_map_aligned(size_t size, size_t align);
/* Unmap a range returned by qs_os_map_aligned (or a page-aligned part of it). */
void qs_os_unmap(void *p, size_t size);
/* Give the pages of a mapped range back: the range stays mapped and reads as
 * zero afterwards; touching it again faults fresh pages in. */
void qs_os_decommit(void *p, size_t size);
/* Try to grow or shrink a mapping in place (no move).  0 on success. */
int qs_os_remap_inplace(void *p, size_t old_size, size_t new_size);
/* Move a mapping to `dst` (a reserved range of new_size bytes), without copying. */
int qs_os_remap_to(void *p, size_t old_size, void *dst, size_t new_size);
/* Ask the kernel to place the pages of a range on `node` (MPOL_PREFERRED). */
void qs_os_bind_node(void *p, size_t size, int node);
/* Node that holds the page at p, or -1 (get_mempolicy). */
int qs_os_page_node(const void *p);

/* Write all of buf to fd (retrying on EINTR and short writes). */
void qs_os_write(int fd, const char *buf, size_t len);
/* A close-on-exec duplicate of fd (numbered 64 or above), or -1. */
int qs_os_dup_fd(int fd);
/* Abort the process (SIGABRT). */
void qs_os_abort(void) __attribute__((noreturn));
/* 64 random bits (getrandom, or a fallback mixed from addresses and time). */
uint64_t qs_os_random64(void);
/* Value of an environment variable, or NULL.  Never allocates. */
const char *qs_os_getenv(const char *name);
/* Milliseconds of a coarse monotonic clock. */
uint64_t qs_os_now_ms(void);
/* CPU the caller runs on (0 if unknown). */
int qs_os_current_cpu(void);
/* Give the CPU to another thread (lock back-off). */
void qs_os_yield(void);

/* NUMA topology from sysfs: fills cpu_node[0..max_cpus) with the node of each
 * CPU and returns the number of nodes (at least 1). */
int qs_os_numa_topology(int *cpu_node, int max_cpus);

/* Register `fn` to run when a thread that called qs_os_thread_watch() exits. */
int qs_os_thread_exit_init(void (*fn)(void *));
void qs_os_thread_watch(void *arg);

/* Start a detached thread running fn(arg) with every signal blocked; 0 or -1. */
int qs_os_thread_start(void *(*fn)(void *), void *arg);
void qs_os_sleep_ms(unsigned ms);

/* Install fork handlers (prepare, parent, child). */
void qs_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif /* QSLAB_OS_H */
