/*
 * testutil.h - the little every qslab test needs, header only.
 *
 *   CHECK(expr)            count a pass, or print file:line and the expression
 *   CHECKF(expr, fmt, ...) same, with a formatted detail on failure
 *   tu_done()              print "N passed, N failed"; returns the exit code
 *   tu_fail(fmt, ...)      record a failure found in a hot loop (first few printed)
 *
 *   tu_capture_*           a fatal handler that records calls instead of aborting
 *   tu_expect_abort()      fork a child, run a function, and check that it died
 *                          of SIGABRT with one line on stderr holding the message
 *   tu_stderr_begin/end    capture what the library writes on fd 2
 *   tu_expect_report()     run an operation, check its report's first line and
 *                          the fatal handler's call (or that none came)
 *   tu_reexec()            run this executable again with one variable set
 *   tu_spawn_self()        the same, after a setup of the caller's in the child
 *   tu_wait(pid)           a child's exit status, or 128 + its signal
 *   tu_now(), tu_now_ms(), tu_sleep_ms()  CLOCK_MONOTONIC time, a sleep
 *   TU_WAIT_MS             the cap of a wait for what another thread or process
 *                          does (the purger's tick, a child's exit)
 *   tu_cmp_ptr             qsort's comparison of pointers, by address
 *   tu_sorted_dups(v, n)   objects handed out twice, for long arrays
 *   tu_kmalloc_class(n)    the kmalloc class of n bytes, from the documented
 *                          rule (kmalloc.c), not from the library's tables
 *   tu_pin_one_cpu()       keep the calling thread on one CPU: with per-CPU
 *                          queues (QSLAB_OWNER=cpu), a test that counts what
 *                          "its" queue does must not migrate
 *   tu_allowed_cpus(cpu)   the first two CPUs the thread may use: how many
 *   tu_pin_cpu(cpu)        pin the calling thread to that CPU
 *
 * Counters are atomic: CHECK may be used from any thread.  Nothing here calls
 * qslab, so a test sees only the calls it makes itself.
 */
#ifndef QSLAB_TESTUTIL_H
#define QSLAB_TESTUTIL_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xorshift.h"

/* Sanitizer builds run fewer iterations (gcc defines the __SANITIZE_ macros,
 * clang answers __has_feature). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif
/* ThreadSanitizer alone: it cannot follow a multi-threaded fork. */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif
/* n normally, n/div (at least 1) under a sanitizer. */
#define TU_SCALE(n, div) (TU_SANITIZED ? ((n) / (div) ? (n) / (div) : 1) : (n))
/* n/div (at least 1) under ThreadSanitizer only, on top of TU_SCALE: a
 * thread start, a lock or a shared access costs 5-20 times ASan's there, and
 * make test runs the concurrency tests 9 times under TSan. */
#define TU_SCALE_TSAN(n, div) (TU_TSAN ? ((n) / (div) ? (n) / (div) : 1) : (n))
/* n/div (at least 1) when QSLAB_DEBUG gives debug flags to every cache (make
 * test's FZPU runs): each object is checked at allocation and free under
 * its node's lock, U captures a stack, aligned allocations get mappings of
 * their own (docs/debugging.md), so an operation costs 10-20 times more.
 * Those runs look for false reports and broken checks under concurrency,
 * which show within thousands of operations, not for rare interleavings
 * (the other modes run the full count). */
static inline long tu_scale_debug(long n, long div)
{
    const char *d = getenv("QSLAB_DEBUG");
    if (!d || !*d || strcmp(d, "-") == 0)
        return n;
    return n / div ? n / div : 1;
}

static unsigned long tu_passed, tu_failed;

static inline void tu_vreport(const char *file, int line, const char *expr, const char *fmt, va_list ap)
{
    unsigned long n = __atomic_add_fetch(&tu_failed, 1, __ATOMIC_RELAXED);
    if (n > 50)
        return; /* enough to go on */
    char detail[512] = "";
    if (fmt)
        vsnprintf(detail, sizeof detail, fmt, ap);
    fprintf(stderr, "%s:%d: CHECK failed: %s%s%s\n", file, line, expr, fmt ? " -- " : "", detail);
    fflush(stderr);
}

static inline int tu_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    if (ok) {
        __atomic_add_fetch(&tu_passed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    va_list ap;
    va_start(ap, fmt);
    tu_vreport(file, line, expr, fmt, ap);
    va_end(ap);
    return 0;
}

#define CHECK(expr) tu_check(!!(expr), __FILE__, __LINE__, #expr, NULL)
#define CHECKF(expr, ...) tu_check(!!(expr), __FILE__, __LINE__, #expr, __VA_ARGS__)
/* A failure found by hand (hot loops check silently and report only this). */
#define tu_fail(...) tu_check(0, __FILE__, __LINE__, "failure", __VA_ARGS__)

static inline unsigned long tu_failures(void)
{
    return __atomic_load_n(&tu_failed, __ATOMIC_RELAXED);
}

static inline int tu_done(void)
{
    fflush(stderr);
    printf("%lu passed, %lu failed\n", __atomic_load_n(&tu_passed, __ATOMIC_RELAXED), tu_failures());
    fflush(stdout);
    return tu_failures() ? 1 : 0;
}

/* "%p" text of an address, as the library prints it. */
static inline const char *tu_addr(char buf[32], const void *p)
{
    snprintf(buf, 32, "%p", p);
    return buf;
}

/* qsort's comparison of two void * elements, by address. */
static inline int tu_cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Seconds, and milliseconds, on CLOCK_MONOTONIC. */
static inline double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static inline uint64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The cap, in milliseconds, of a test's wait for something another thread
 * or process does in its own time (the purger's next tick, its walk of the
 * debug caches, a child's exit seen by the kernel).  Such a wait polls its
 * condition and ends as soon as it holds, so the cap costs a passing test
 * nothing; it only bounds a wait that would never end.  Generous: make
 * test shares a loaded machine, where a thread that asked to wake in
 * 250 ms may run seconds later. */
#define TU_WAIT_MS 120000

/* Sleep ms milliseconds, signals or not. */
static inline void tu_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* How many of v[0..n) are non-NULL and equal to the one before them in
 * address order (objects handed out twice), by a sorted copy: for arrays
 * too long for tu_dups' pairs. */
static inline int tu_sorted_dups(void *const *v, int n)
{
    void **s = calloc((size_t)n + 1, sizeof *s);
    int d = 0;
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, tu_cmp_ptr);
    for (int i = 1; i < n; i++)
        d += s[i] && s[i] == s[i - 1];
    free(s);
    return d;
}

/* How many pairs of a[0..n) are equal (objects handed out twice). */
static inline int tu_dups(void *const *a, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            d += a[i] == a[j];
    return d;
}

/* The kmalloc class of n bytes (n <= 32 MiB): 8, then 16 bytes apart up to
 * 128, then eight classes per power of two, 2^k/8 apart. */
static inline size_t tu_kmalloc_class(size_t n)
{
    if (n <= 8)
        return 8;
    if (n <= 128)
        return (n + 15) & ~(size_t)15;
    size_t p = 128;
    while (2 * p < n)
        p *= 2;
    size_t step = p / 8;
    return (n + step - 1) / step * step;
}

/* Deterministic pseudo-random numbers (xorshift64*), one state per thread. */
static inline uint64_t tu_rand(uint64_t *s)
{
    return xorshift64s(s);
}
static inline uint64_t tu_seed(uint64_t n)
{
    uint64_t s = n * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    return s ? s : 1;
}

/* ---- capture fatal handler ------------------------------------------------ */

static unsigned long tu_fatal_calls;
static char tu_fatal_msg[1024];

/* Does not allocate: it may run inside the allocator. */
static inline void tu_fatal_capture(const char *msg)
{
    __atomic_add_fetch(&tu_fatal_calls, 1, __ATOMIC_RELAXED);
    size_t n = msg ? strlen(msg) : 0;
    if (n >= sizeof tu_fatal_msg)
        n = sizeof tu_fatal_msg - 1;
    if (n)
        memcpy(tu_fatal_msg, msg, n);
    tu_fatal_msg[n] = '\0';
}

static inline void tu_capture_reset(void)
{
    __atomic_store_n(&tu_fatal_calls, 0, __ATOMIC_RELAXED);
    tu_fatal_msg[0] = '\0';
}

static inline unsigned long tu_capture_calls(void)
{
    return __atomic_load_n(&tu_fatal_calls, __ATOMIC_RELAXED);
}

/*
 * Check that the handler was called exactly once since the last reset, with a
 * one-line message holding `kind` and each further string (NULL-terminated
 * list).  Resets the capture.  Returns 1 if everything matched.
 */
#define tu_check_fatal(...) tu_check_fatal_at(__FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)
static inline int tu_check_fatal_at(const char *file, int line, const char *kind, ...)
{
    int ok = 1;
    unsigned long calls = tu_capture_calls();
    ok &= tu_check(calls == 1, file, line, "fatal handler called once", "called %lu times, message \"%s\"",
                   calls, tu_fatal_msg);
    ok &= tu_check(strstr(tu_fatal_msg, kind) != NULL, file, line, "message names the error",
                   "\"%s\" not in \"%s\"", kind, tu_fatal_msg);
    ok &= tu_check(strchr(tu_fatal_msg, '\n') == NULL, file, line, "message is one line", "\"%s\"", tu_fatal_msg);
    va_list ap;
    va_start(ap, kind);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        ok &= tu_check(strstr(tu_fatal_msg, s) != NULL, file, line, "message holds expected text",
                       "\"%s\" not in \"%s\"", s, tu_fatal_msg);
    va_end(ap);
    tu_capture_reset();
    return ok;
}

/* ---- forked children that must abort -------------------------------------- */

static int tu_child_info_fd = -1;

/* In a tu_expect_abort child: the message must also contain `s`. */
static inline void tu_child_expect(const char *s)
{
    if (tu_child_info_fd < 0)
        return;
    size_t n = strlen(s);
    if (write(tu_child_info_fd, s, n) != (ssize_t)n || write(tu_child_info_fd, "\n", 1) != 1)
        _exit(99);
}

static inline size_t tu_read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap - 1) { /* drain the rest so the writer never blocks */
            char sink[256];
            while (read(fd, sink, sizeof sink) > 0)
                ;
            break;
        }
    }
    buf[len] = '\0';
    return len;
}

/* What fn(fd) writes (qslab_slabinfo, qslab_stats_report), into buf[cap]
 * through a temporary file: its length (0 if there is no file). */
static inline size_t tu_text_of(void (*fn)(int), char *buf, size_t cap)
{
    FILE *f = tmpfile();
    buf[0] = '\0';
    if (!f)
        return 0;
    fn(fileno(f));
    lseek(fileno(f), 0, SEEK_SET);
    size_t n = tu_read_all(fileno(f), buf, cap);
    fclose(f);
    return n;
}

/*
 * Run fn(arg) in a forked child whose stderr goes to a pipe.  The child must
 * die of SIGABRT, and its stderr must be exactly one line containing `kind`
 * and every string the child declared with tu_child_expect().
 */
#define tu_expect_abort(what, fn, arg, kind) tu_expect_abort_at(__FILE__, __LINE__, what, fn, arg, kind)
static inline int tu_expect_abort_at(const char *file, int line, const char *what, void (*fn)(void *), void *arg,
                                     const char *kind)
{
    int errp[2], infop[2];
    if (pipe(errp) || pipe(infop)) {
        perror("pipe");
        return tu_check(0, file, line, what, "pipe failed");
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return tu_check(0, file, line, what, "fork failed");
    }
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        close(errp[0]);
        close(infop[0]);
        dup2(errp[1], 2);
        close(errp[1]);
        tu_child_info_fd = infop[1];
        fn(arg);
        _exit(0); /* survived: the parent reports it */
    }
    close(errp[1]);
    close(infop[1]);
    static char err[8192], info[2048];
    tu_read_all(errp[0], err, sizeof err);
    tu_read_all(infop[0], info, sizeof info);
    close(errp[0]);
    close(infop[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;

    int ok = 1;
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)) {
        if (WIFSIGNALED(st))
            ok &= tu_check(0, file, line, what, "child died of signal %d, not SIGABRT; stderr: \"%s\"",
                           WTERMSIG(st), err);
        else
            ok &= tu_check(0, file, line, what, "child exited with %d instead of aborting; stderr: \"%s\"",
                           WEXITSTATUS(st), err);
    } else {
        tu_check(1, file, line, what, NULL);
    }
    size_t len = strlen(err);
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        if (err[i] == '\n' || i + 1 == len)
            lines++;
    ok &= tu_check(lines == 1, file, line, what, "stderr should be exactly one line, got %d: \"%s\"", lines, err);
    ok &= tu_check(strstr(err, kind) != NULL, file, line, what, "\"%s\" not on stderr: \"%s\"", kind, err);
    for (char *s = info, *nl; *s; s = nl + 1) {
        nl = strchr(s, '\n');
        if (!nl)
            break;
        *nl = '\0';
        ok &= tu_check(strstr(err, s) != NULL, file, line, what, "\"%s\" not on stderr: \"%s\"", s, err);
    }
    return ok;
}

/* ---- capturing stderr ------------------------------------------------------ */

static int tu_saved_stderr = -1;
static FILE *tu_stderr_file;

/* Send fd 2 to a temporary file until tu_stderr_end(). */
static inline void tu_stderr_begin(void)
{
    fflush(stderr);
    tu_stderr_file = tmpfile();
    if (!tu_stderr_file) {
        perror("tmpfile");
        exit(2);
    }
    tu_saved_stderr = dup(2);
    dup2(fileno(tu_stderr_file), 2);
}

/* Restore fd 2; copy what was written into buf (NUL-terminated). */
static inline size_t tu_stderr_end(char *buf, size_t cap)
{
    fflush(stderr);
    dup2(tu_saved_stderr, 2);
    close(tu_saved_stderr);
    tu_saved_stderr = -1;
    int fd = fileno(tu_stderr_file);
    lseek(fd, 0, SEEK_SET);
    size_t n = tu_read_all(fd, buf, cap);
    fclose(tu_stderr_file);
    tu_stderr_file = NULL;
    return n;
}

/*
 * Run op(arg) with stderr captured into buf: its first line must be `first`
 * exactly.  Then the fatal handler: called once, its message holding
 * `handler` and `in_msg` (NULL: either unchecked); or, handler NULL, never
 * called.  Resets the capture.  Returns 1 if everything held.
 */
#define tu_expect_report(buf, cap, first, op, arg, handler, in_msg)                                 \
    tu_expect_report_at(__FILE__, __LINE__, buf, cap, first, op, arg, handler, in_msg)
static inline int tu_expect_report_at(const char *file, int line, char *buf, size_t cap,
                                      const char *first, void (*op)(void *), void *arg,
                                      const char *handler, const char *in_msg)
{
    tu_capture_reset();
    tu_stderr_begin();
    op(arg);
    tu_stderr_end(buf, cap);
    char *nl = strchr(buf, '\n');
    size_t n = nl ? (size_t)(nl - buf) : strlen(buf);
    int ok = tu_check(n == strlen(first) && strncmp(buf, first, n) == 0, file, line,
                      "first line of the report", "first line \"%.*s\", expected \"%s\"; stderr:\n%s",
                      (int)n, buf, first, buf);
    if (handler)
        ok &= tu_check_fatal_at(file, line, handler, in_msg ? in_msg : "", (const char *)NULL);
    else
        ok &= tu_check(tu_capture_calls() == 0, file, line, "no fatal handler call",
                       "handler called: %s", tu_fatal_msg);
    tu_capture_reset();
    return ok;
}

/* ---- re-executing this program --------------------------------------------- */

/* Wait for child pid: its exit status, or 128 + the signal that ended it. */
static inline int tu_wait(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Fork a child that calls setup(arg) (if not NULL), then runs
 * /proc/self/exe with argv[1] = mode.  Returns its pid, or -1. */
static inline pid_t tu_spawn_self(const char *mode, void (*setup)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (setup)
            setup(arg);
        char *argv[] = {(char *)"reexec", (char *)mode, NULL};
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        _exit(127);
    }
    return pid;
}

/* tu_reexec's setup: the variable arg[0] set to arg[1] (NULL: removed). */
static inline void tu_setenv_setup(void *arg)
{
    const char *const *nv = arg;
    if (nv[1])
        setenv(nv[0], nv[1], 1);
    else
        unsetenv(nv[0]);
}

/*
 * Run /proc/self/exe with argv[1] = mode and the environment variable `name`
 * set to `value` (NULL: removed).  Returns the exit status, or 128 + signal.
 */
static inline int tu_reexec(const char *mode, const char *name, const char *value)
{
    const char *nv[2] = {name, value};
    pid_t pid = tu_spawn_self(mode, tu_setenv_setup, nv);
    return pid < 0 ? -1 : tu_wait(pid);
}

/* The first two CPUs the calling thread may run on, into cpu[]: how many
 * (0 to 2).  (Raw system calls: includers need not define _GNU_SOURCE
 * first.) */
static inline int tu_allowed_cpus(int cpu[2])
{
    unsigned long set[1024 / (8 * sizeof(unsigned long))] = {0};
    long n = syscall(SYS_sched_getaffinity, 0, sizeof set, set);
    int k = 0;
    for (int i = 0; n > 0 && i < (int)(n * 8) && k < 2; i++)
        if (set[i / (8 * sizeof(unsigned long))] >> (i % (8 * sizeof(unsigned long))) & 1)
            cpu[k++] = i;
    return k;
}

/* Pin the calling thread to `cpu`: 0, or -1. */
static inline int tu_pin_cpu(int cpu)
{
    unsigned long set[1024 / (8 * sizeof(unsigned long))] = {0};
    set[cpu / (8 * sizeof(unsigned long))] = 1ul << (cpu % (8 * sizeof(unsigned long)));
    return syscall(SYS_sched_setaffinity, 0, sizeof set, set) == 0 ? 0 : -1;
}

/* Pin the calling thread to the first CPU it may use; returns that CPU. */
static inline int tu_pin_one_cpu(void)
{
    int cpu[2];
    if (tu_allowed_cpus(cpu) < 1)
        return -1;
    return tu_pin_cpu(cpu[0]) == 0 ? cpu[0] : -1;
}

#endif /* QSLAB_TESTUTIL_H */
