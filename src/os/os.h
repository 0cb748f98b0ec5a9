/*
 * os.h - the contract between qslab and the operating system.
 *
 * Only src/os/ includes OS headers.  Every function here is safe to call from
 * inside an allocation: none of them allocates memory through libc, none uses
 * stdio, and none takes a lock of qslab's.
 */
#ifndef QSLAB_OS_H
#define QSLAB_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a function's code goes, for the pages of the library a program
 * keeps resident (the link order: CMakeLists.txt).  QS_STARTUP: code that
 * runs once, at start-up or at exit (and when a program makes a cache or
 * sets a tunable), grouped in .text.startup, as the compiler does with
 * constructors.
 * QS_RARE: code of the files no allocation runs through that runs now and
 * then all the same (a front end's sweep, on the purger's tick, even with
 * none of its caches), beside the start-up code, whose pages every program
 * has resident.  Neither changes how the function is compiled. */
#define QS_STARTUP __attribute__((section(".text.startup")))
#define QS_RARE __attribute__((section(".text.startup.rare")))
/* A zero-initialised array of 4 KiB or more: apart from the small globals,
 * so that these, which every program touches, share few pages, and an
 * array a program touches here and there (the unit map, the tables by
 * cache id) does not keep a page of its neighbours resident beside it
 * (src/malloc/layout.ld gathers them after .bss). */
#define QS_BSS_APART __attribute__((section(".bss.qs_apart")))

/* Map `size` bytes (a multiple of the page size) of zeroed, read-write,
 * private anonymous memory whose start is a multiple of `align` (a power of
 * two, at least the page size).  NULL on failure (errno set). */
void *qs_os_map_aligned(size_t size, size_t align);
/* Reserve `size` bytes of address space that can never be read or written
 * (PROT_NONE, no memory behind it: zero-size blocks).  NULL on failure. */
void *qs_os_reserve(size_t size);
/* Unmap a range returned by qs_os_map_aligned (or a page-aligned part of it).
 * 0, or -1 if the kernel refused (munmap splitting a mapping fails with
 * ENOMEM at vm.max_map_count): the range is then still mapped.  Keeps errno. */
int qs_os_unmap(void *p, size_t size);
/* Give the pages of a mapped range back: the range stays mapped and reads as
 * zero afterwards; touching it again faults fresh pages in.  0, or -1 if the
 * kernel refused: the pages then stay as they were (resident, contents
 * kept).  Keeps errno. */
int qs_os_decommit(void *p, size_t size);
/* Fault in the pages of a mapped range that is about to be written, in
 * one call (MADV_POPULATE_WRITE): a page costs the kernel's zeroing and
 * mapping without a fault's trap and return.  Best effort: on failure (an
 * older kernel, no memory) the writes fault the pages in as before.  Keeps
 * errno. */
void qs_os_populate(void *p, size_t size);
/* Make a mapped range inaccessible (rw false: reads and writes fault) or
 * read-write again: guard pages around large blocks.  0, or -1 if the
 * kernel refused (a mapping split past vm.max_map_count): the range keeps
 * its access.  Keeps errno. */
int qs_os_protect(void *p, size_t size, bool rw);
/* Replace a mapped range by address space that can never be read or
 * written, its pages given back (a freed large block kept inaccessible):
 * 0, or -1 if the kernel refused (the range then stays as it was).  Keeps
 * errno. */
int qs_os_seal(void *p, size_t size);
/* Try to grow or shrink a mapping in place (no move).  0 on success. */
int qs_os_remap_inplace(void *p, size_t old_size, size_t new_size);
/* Move a mapping to `dst` (a reserved range of new_size bytes), without copying. */
int qs_os_remap_to(void *p, size_t old_size, void *dst, size_t new_size);

/* Fault injection, for tests (qslab_fault_inject, QSLAB_FAIL_NTH).  Two
 * kinds of request are counted, each on its own:
 *   QS_OS_FAULT_MAP      requests for memory: qs_os_map_aligned, and the
 *                        growths of qs_os_remap_inplace and qs_os_remap_to
 *                        (mremap needs new pages and VMAs: ENOMEM)
 *   QS_OS_FAULT_RELEASE  memory given back: qs_os_decommit, qs_os_unmap,
 *                        qs_os_seal
 * Armed with nth > 0, the nth request of that kind from now on fails as if
 * the kernel had said ENOMEM (a map returns NULL with errno ENOMEM; a
 * release returns -1 and changes nothing); with `every`, every nth request
 * from then on, else that one only.  nth 0 disarms.  QSLAB_FAIL_NTH=N[,every]
 * [,release] arms it at the first request of the process (start-up's
 * included).  The arming and the counts are atomic; a request that is not
 * armed for costs one relaxed load. */
enum { QS_OS_FAULT_MAP = 0, QS_OS_FAULT_RELEASE = 1, QS_OS_FAULT_KINDS = 2 };
void qs_os_fault_arm(int kind, unsigned long nth, int every);
/* Failures injected so far (since the process started) of a kind. */
unsigned long qs_os_fault_injected(int kind);
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
/* The calling thread's id (the kernel's: what top -H and /proc/PID/task show). */
int qs_os_gettid(void);
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
/* Name the calling thread (at most 15 bytes kept): qslab's own threads are
 * "qslab-purger", "qslab-sampler" and "qslab-control" in ps, top and gdb. */
void qs_os_thread_name(const char *name);
void qs_os_sleep_ms(unsigned ms);

/* Install fork handlers (prepare, parent, child). */
void qs_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* True only when the process has certainly never had a second thread (libc
 * says so); false when it has, or when libc cannot tell. */
bool qs_os_single_threaded(void);

/* ---- memory pressure (PSI, cgroup v2): core/pressure.c ----------------------
 *
 * The purger's thread alone calls these (they may take a few system calls:
 * never from an allocation). */

/* Read a small file (a few lines: memory.current, memory.high) into buf,
 * NUL-terminated: its length, or -1 (errno set). */
int qs_os_read_file(const char *path, char *buf, size_t size);
/* The calling process's cgroup directory: cgroup v2's (v1_memory false:
 * the cgroup2 mount point, from /proc/self/mountinfo, joined with the "0::"
 * path of /proc/self/cgroup), or that of cgroup v1's memory controller
 * (v1_memory: the mount of type cgroup with option "memory", and the
 * line whose controllers name memory), into buf; its length, with
 * *mount_len the length of the mount point's part (a walk up to ancestors
 * stops there).  0 and a static reason in *why when there is none. */
size_t qs_os_cgroup_dir(bool v1_memory, char *buf, size_t size, size_t *mount_len, const char **why);
/* Open a PSI file (memory.pressure, /proc/pressure/memory) and write a
 * trigger to it ("some STALL_US WINDOW_US"): its descriptor (close-on-exec),
 * or -1 with errno (ENOENT: no such file; EINVAL: window refused; EACCES,
 * EPERM: not permitted; EOPNOTSUPP: PSI off). */
int qs_os_psi_open(const char *path, const char *trigger);
/* Wait up to `ms` for the trigger of fd to fire (POLLPRI): 1 it fired, 0
 * it did not in that time, -1 it cannot fire any more (POLLERR: its cgroup
 * was removed; or poll failed).  EINTR waits on for the rest. */
int qs_os_psi_wait(int fd, unsigned ms);
void qs_os_close(int fd);

/* ---- CPUs ------------------------------------------------------------------ */

/* Number of possible CPU ids: highest possible id + 1, from
 * /sys/devices/system/cpu/possible; without sysfs, an upper bound from the
 * kernel's affinity mask size; at least 1.  Every id the kernel reports (rseq
 * cpu_id, sched_getcpu) is below it, but callers indexing per-CPU arrays
 * should still range-check. */
int qs_os_cpu_possible(void);
/* Number of CPUs in the calling thread's affinity mask (at start-up: the
 * process's), counted in a fixed mask of 1024 CPUs; at least 1. */
int qs_os_cpus_allowed(void);

/* ---- restartable sequences (rseq) -------------------------------------------
 *
 * Each thread has one `struct rseq` (32 bytes, 32-byte aligned) that the
 * kernel keeps up to date; it lies at qs_os_thread_pointer() + offset, the
 * offset being the same for every thread.  Whose area it is depends on who
 * registered it:
 *
 *   QS_RSEQ_GLIBC  glibc 2.35+ registered its own area for every thread
 *                  (__rseq_size != 0); offset = __rseq_offset.
 *   QS_RSEQ_SELF   glibc did not (GLIBC_TUNABLES=glibc.pthread.rseq=0, or an
 *                  older glibc): the area is a static-TLS variable of qslab's,
 *                  registered by each thread in qs_os_rseq_register_thread().
 *                  It is never unregistered: static TLS lives exactly as long
 *                  as its thread, and the kernel stops touching the area when
 *                  the thread exits (kernel/rseq.c skips tasks with
 *                  PF_EXITING; rseq(2): "reclaim ... after either an explicit
 *                  rseq unregistration is performed or after the thread
 *                  exits").  fork() children inherit the registration; execve
 *                  drops it; a new thread starts unregistered.
 *   QS_RSEQ_VALGRIND  under valgrind, which refuses rseq (ENOSYS), when
 *                  valgrind's headers were there at build time: qslab's area
 *                  again, never registered; each thread that asks gets a
 *                  virtual CPU id of its own, below qs_os_cpu_possible(),
 *                  written into cpu_id by qslab and given back when the thread
 *                  exits.  No two threads share an id and nothing else writes
 *                  it, so no section can be interrupted by another on its
 *                  queue: the kernel's restarts are not needed (a signal
 *                  handler that allocates while its thread is inside one
 *                  would break it, as it breaks any malloc: not async-signal-
 *                  safe).  A thread that finds no id left runs without a
 *                  queue.  membarrier is refused (nothing to restart), so
 *                  queues are never taken from their CPU.  It exists so that
 *                  callgrind can count the per-CPU fast paths' instructions.
 *   QS_RSEQ_NONE   unusable (no kernel support, seccomp, another library holds
 *                  the registration, signature mismatch, unknown architecture).
 *
 * The fields qslab reads, as byte offsets into the area (the ABI of
 * <linux/rseq.h>, checked in os/rseq.c): */
#define QS_RSEQ_CPU_ID_START_OFF 0 /* u32, always a possible CPU id */
#define QS_RSEQ_CPU_ID_OFF 4       /* s32: >= 0 current CPU; -1 not registered
                                      (yet), -2 registration failed */
#define QS_RSEQ_CS_OFF 8           /* u64, pointer to the active struct rseq_cs */
#define QS_RSEQ_AREA_SIZE 32

/* The 32-bit word that must precede every abort handler, as a data word in
 * the code (`.long QS_RSEQ_SIG` on x86-64, `.inst` on aarch64).  The kernel
 * kills the thread (SIGSEGV) on an abort whose handler is not preceded by the
 * signature the thread registered with.  When glibc registered, that is
 * glibc's RSEQ_SIG for the architecture (qs_os_rseq_init verifies it with the
 * kernel); qslab's own registration uses the same value.  These are the
 * values of glibc's <bits/rseq.h>: x86 "ud1 0x53053053(%rip),%edi" bytes;
 * aarch64 "brk #0x45e0", byte-swapped as data on big-endian.  Undefined on
 * other architectures, where rseq is reported unavailable. */
#if defined(__x86_64__) || defined(__i386__)
#define QS_RSEQ_SIG 0x53053053u
#elif defined(__aarch64__) && defined(__AARCH64EB__)
#define QS_RSEQ_SIG 0x00bc28d4u
#elif defined(__aarch64__)
#define QS_RSEQ_SIG 0xd428bc00u
#endif

enum { QS_RSEQ_NONE = 0, QS_RSEQ_GLIBC = 1, QS_RSEQ_SELF = 2, QS_RSEQ_VALGRIND = 3 };

struct qs_os_rseq_info {
    int mode;        /* QS_RSEQ_NONE, _GLIBC, _SELF or _VALGRIND */
    const char *why; /* static text naming the outcome (never NULL) */
    long offset;     /* area at qs_os_thread_pointer() + offset (mode != NONE) */
    unsigned size;   /* glibc's __rseq_size (may be 20, the feature size, on
                        newer glibc), or QS_RSEQ_AREA_SIZE; 0 when NONE */
};

/* Decide how threads get their rseq area; call once, from the main thread at
 * start-up, before any qs_os_rseq_register_thread().  In QS_RSEQ_SELF mode
 * this registers the calling thread (VALGRIND: gives it a virtual CPU).
 * Fills *out (every outcome has a `why`); 0 if rseq is usable (any mode but
 * NONE), -1 if not.  Later calls change nothing
 * and return the first result.  Keeps errno. */
int qs_os_rseq_init(struct qs_os_rseq_info *out);
/* Make sure the calling thread's area is registered: 0 when cpu_id is valid
 * from now on, -1 if not (mode NONE, init not run, or the kernel refused this
 * thread; see qs_os_rseq_thread_why).  Cheap once decided: a TLS load and a
 * compare, no system call (a refusal is remembered, never retried).  Keeps
 * errno. */
int qs_os_rseq_register_thread(void);
/* Static text for the calling thread's state: "registered", or why not. */
const char *qs_os_rseq_thread_why(void);

/* The thread pointer (x86-64: %fs base; aarch64: TPIDR_EL0). */
static inline char *qs_os_thread_pointer(void)
{
#if defined(__x86_64__)
    char *tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#elif defined(__i386__)
    char *tp;
    __asm__("mov %%gs:0, %0" : "=r"(tp));
    return tp;
#else
    return (char *)__builtin_thread_pointer();
#endif
}

/* cpu_id of the calling thread's rseq area (offset from qs_os_rseq_info):
 * the current CPU, or negative when this thread is not registered. */
static inline int qs_os_rseq_cpu(long offset)
{
    return *(volatile const int32_t *)(qs_os_thread_pointer() + offset + QS_RSEQ_CPU_ID_OFF);
}

/* ---- membarrier ------------------------------------------------------------ */

/* Register the process for qs_os_membarrier_rseq (Linux 5.10+); 0 or -1. */
int qs_os_membarrier_rseq_register(void);
/* Abort any rseq critical section running in a thread of this process on
 * `cpu` (every CPU if cpu < 0) and wait until that is done: afterwards no
 * thread is inside a critical section it entered before the call.  Uses the
 * CPU-targeted form when the kernel has it, else all CPUs.  0 or -1 (not
 * registered, or no kernel support).  Keeps errno. */
int qs_os_membarrier_rseq(int cpu);

#endif /* QSLAB_OS_H */
