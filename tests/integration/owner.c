/*
 * integration: the owner kind chosen at start-up, end to end.
 *
 * QSLAB_OWNER=cpu|thread (default: cpu where rseq works) picks per-CPU queues
 * (restartable sequences, registered by glibc or by qslab itself) or
 * per-thread queues; qslab_owner_info() says which and why, and the last
 * line of qslab_stats_report() is "Owner: <why>".
 *
 * The parent runs under whatever QSLAB_OWNER the suite sets, so every case
 * runs in a child re-executed with a precise environment (the parent's minus
 * every QSLAB_* variable and GLIBC_TUNABLES, plus the case's own), stdout
 * and stderr captured:
 *   default     QSLAB_OWNER unset: cpu if the kernel has rseq, else thread
 *   thread      QSLAB_OWNER=thread
 *   cpu         QSLAB_OWNER=cpu
 *   bogus       QSLAB_OWNER=bogus: one warning line naming it, the default
 *   self        GLIBC_TUNABLES=glibc.pthread.rseq=0, QSLAB_OWNER=cpu: qslab
 *               registers rseq in each thread; threads allocate and free
 *               across each other, a fork child allocates at once
 *   enosys ...  a seccomp filter (installed before exec) makes rseq fail:
 *               thread owner with the reason; allocation still works
 * rseq support is probed here with a raw system call (unknown flags: EINVAL
 * from a kernel that has rseq, ENOSYS from one that does not).
 */
#define _GNU_SOURCE
#include <qslab.h>

#include "../testutil.h"
#include "../deny_rseq.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef __NR_rseq
#define __NR_rseq 334 /* x86-64 */
#endif
#define RSEQ_SIG_X86 0x53053053u /* glibc's RSEQ_SIG for x86 */

/* glibc 2.35+ (<sys/rseq.h>); weak, so older glibc links too. */
extern const unsigned int __rseq_size __attribute__((weak));

extern char **environ;

static int glibc_rseq_size(void)
{
    return &__rseq_size != NULL ? (int)__rseq_size : 0;
}

/* 1 if this kernel has rseq and lets us call it. */
static int kernel_has_rseq(void)
{
    int saved = errno;
    long r = syscall(__NR_rseq, NULL, 0, 1 << 30, 0);
    int ok = r != 0 && errno == EINVAL;
    errno = saved;
    return ok;
}

/* ==== child side ========================================================== */

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int highest_allowed_cpu(void)
{
    cpu_set_t set;
    int hi = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                hi = c;
    return hi;
}

/* kind, why, nr_cpu_ids and rseq_aborts for the expected kind. */
static void check_info(const char *who, int kind)
{
    struct qslab_owner_info oi;
    memset(&oi, 0xa5, sizeof oi);
    qslab_owner_info(&oi);
    CHECKF(oi.kind == kind, "%s: kind %d, expected %d (why: %s)", who, oi.kind, kind,
           oi.kind == kind || oi.kind == QSLAB_OWNER_CPU || oi.kind == QSLAB_OWNER_THREAD ? oi.why : "?");
    CHECKF(oi.why != NULL && oi.why[0] != '\0', "%s: why is empty", who);
    if (!oi.why)
        return;
    CHECKF(strchr(oi.why, '\n') == NULL, "%s: why is not one line: \"%s\"", who, oi.why);
    if (kind == QSLAB_OWNER_CPU) {
        CHECKF(oi.nr_cpu_ids >= online_cpus(), "%s: nr_cpu_ids %d below %d online CPUs", who, oi.nr_cpu_ids,
               online_cpus());
        CHECKF(oi.nr_cpu_ids > highest_allowed_cpu(), "%s: nr_cpu_ids %d, allowed CPU %d", who, oi.nr_cpu_ids,
               highest_allowed_cpu());
        CHECKF(strncmp(oi.why, "per-CPU queues", 14) == 0, "%s: why \"%s\"", who, oi.why);
    } else {
        CHECKF(oi.nr_cpu_ids == 0, "%s: nr_cpu_ids %d in thread mode", who, oi.nr_cpu_ids);
        CHECKF(oi.rseq_aborts == 0, "%s: rseq_aborts %lu in thread mode", who, oi.rseq_aborts);
        CHECKF(strncmp(oi.why, "per-thread queues", 17) == 0, "%s: why \"%s\"", who, oi.why);
    }
}

/* The report's last line is "Owner: " and the why string. */
static void check_report(void)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    static char buf[1 << 16];
    size_t n = tu_text_of(qslab_stats_report, buf, sizeof buf);
    CHECKF(n > 0 && buf[n - 1] == '\n', "report does not end with a newline (%zu bytes)", n);
    if (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    char *last = strrchr(buf, '\n');
    last = last ? last + 1 : buf;
    char want[512];
    snprintf(want, sizeof want, "Owner: %s", oi.why ? oi.why : "(null)");
    CHECKF(strcmp(last, want) == 0, "report's last line \"%s\", expected \"%s\"", last, want);
}

/* Stamped objects: a header naming the owner, then a fill pattern. */
struct stamp {
    uint64_t magic;
    uint32_t who, seq;
    size_t len;
};
#define MAGIC 0x0b1ec7ab1e5ea1edULL

static void stamp(void *p, size_t len, uint32_t who, uint32_t seq)
{
    struct stamp *s = p;
    s->magic = MAGIC ^ (uintptr_t)p;
    s->who = who;
    s->seq = seq;
    s->len = len;
    unsigned char *b = p;
    for (size_t i = sizeof *s; i < len; i++)
        b[i] = (unsigned char)(who * 31 + seq + i);
}

static int stamp_ok(const void *p, size_t len, uint32_t who, uint32_t seq)
{
    const struct stamp *s = p;
    if (s->magic != (MAGIC ^ (uintptr_t)p) || s->who != who || s->seq != seq || s->len != len)
        return 0;
    const unsigned char *b = p;
    for (size_t i = sizeof *s; i < len; i++)
        if (b[i] != (unsigned char)(who * 31 + seq + i))
            return 0;
    return 1;
}

static const size_t msizes[] = {24, 100, 700, 3000};
#define NSIZES (sizeof msizes / sizeof msizes[0])
#define OBJ 72

/* Allocate, check and free a few objects in the calling thread. */
static void exercise(const char *who, qslab_cache *c)
{
    enum { N = 300 };
    void *p[N], *m[N];
    int bad = 0, lost = 0;
    for (int i = 0; i < N; i++) {
        p[i] = qslab_cache_alloc(c);
        m[i] = qslab_malloc(msizes[i % NSIZES]);
        if (!p[i] || !m[i]) {
            lost++;
            continue;
        }
        stamp(p[i], OBJ, 7, (uint32_t)i);
        stamp(m[i], msizes[i % NSIZES], 8, (uint32_t)i);
    }
    for (int i = 0; i < N; i++) {
        if (!p[i] || !m[i])
            continue;
        bad += !stamp_ok(p[i], OBJ, 7, (uint32_t)i);
        bad += !stamp_ok(m[i], msizes[i % NSIZES], 8, (uint32_t)i);
    }
    for (int i = 0; i < N; i++) {
        qslab_cache_free(c, p[i]);
        qslab_free(m[i]);
    }
    CHECKF(lost == 0, "%s: %d allocations failed", who, lost);
    CHECKF(bad == 0, "%s: %d objects lost their stamp", who, bad);
}

static void validate_all(const char *who, qslab_cache *c)
{
    CHECKF(qslab_cache_validate(c) == 0, "%s: cache %s invalid", who, qslab_cache_name(c));
    for (size_t i = 0; i < NSIZES; i++) {
        void *p = qslab_malloc(msizes[i]);
        char name[64];
        snprintf(name, sizeof name, "kmalloc-%zu", qslab_usable_size(p));
        qslab_free(p);
        qslab_cache *k = qslab_cache_find(name);
        CHECKF(k != NULL, "%s: no cache %s", who, name);
        if (k)
            CHECKF(qslab_cache_validate(k) == 0, "%s: cache %s invalid", who, name);
    }
}

/* What every child does: check the kind, the report, allocate. */
static void common(const char *who, int kind)
{
    check_info(who, kind);
    check_report();
    qslab_cache *c = qslab_cache_create("owner-test", OBJ, 0, 0, NULL);
    if (!CHECK(c != NULL))
        return;
    exercise(who, c);
    validate_all(who, c);
    CHECKF(qslab_cache_destroy(c) == 0, "%s: destroy", who);
    check_info(who, kind); /* nothing changed after allocating */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    printf("why=%s\n", oi.why);
}

/* Default expectation: cpu with glibc's or our own registration, or thread
 * with an rseq reason. */
static void expect_default(const char *who, int rseq)
{
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    if (rseq) {
        common(who, QSLAB_OWNER_CPU);
        const char *reg = glibc_rseq_size() ? "glibc registered rseq" : "qslab registered rseq";
        CHECKF(oi.why && strstr(oi.why, reg), "%s: \"%s\" not in why \"%s\"", who, reg, oi.why);
    } else {
        common(who, QSLAB_OWNER_THREAD);
        CHECKF(oi.why && strstr(oi.why, "rseq"), "%s: why \"%s\" does not mention rseq", who, oi.why);
    }
}

/* ---- self: qslab registers rseq in each thread ---- */

enum { NT = 4, ROUNDS = 60, K = 48 };
static qslab_cache *xc;
static pthread_barrier_t bar;
static void *slot_c[NT][K], *slot_m[NT][K];
static int registered_before[NT], registered[NT], cpu_kind[NT];

/* Is the calling thread's rseq registered (by somebody else)?  Registering
 * another area then fails with EINVAL; if it succeeds the thread was not
 * registered, and the area is unregistered at once. */
static int thread_has_rseq(void)
{
    static __thread struct {
        uint32_t a, cpu_id;
        uint64_t cs;
        uint32_t f[4];
    } area __attribute__((aligned(32))) = {0, (uint32_t)-1, 0, {0}};
    long r = syscall(__NR_rseq, &area, 32, 0, RSEQ_SIG_X86);
    if (r == 0) {
        syscall(__NR_rseq, &area, 32, 1 /* RSEQ_FLAG_UNREGISTER */, RSEQ_SIG_X86);
        return 0;
    }
    return errno == EINVAL;
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg, bad = 0, lost = 0;
    registered_before[me] = thread_has_rseq(); /* the probe's control: nobody registered yet */
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < K; i++) {
            uint32_t seq = (uint32_t)(r * K + i);
            size_t ms = msizes[(i + me) % NSIZES];
            slot_c[me][i] = qslab_cache_alloc(xc);
            slot_m[me][i] = qslab_malloc(ms);
            if (slot_c[me][i])
                stamp(slot_c[me][i], OBJ, (uint32_t)me, seq);
            else
                lost++;
            if (slot_m[me][i])
                stamp(slot_m[me][i], ms, (uint32_t)me + 100, seq);
            else
                lost++;
        }
        pthread_barrier_wait(&bar);
        /* free the next thread's objects: remote frees */
        int from = (me + 1) % NT;
        for (int i = 0; i < K; i++) {
            uint32_t seq = (uint32_t)(r * K + i);
            size_t ms = msizes[(i + from) % NSIZES];
            if (slot_c[from][i] && !stamp_ok(slot_c[from][i], OBJ, (uint32_t)from, seq))
                bad++;
            if (slot_m[from][i] && !stamp_ok(slot_m[from][i], ms, (uint32_t)from + 100, seq))
                bad++;
            qslab_cache_free(xc, slot_c[from][i]);
            qslab_free(slot_m[from][i]);
        }
        pthread_barrier_wait(&bar);
    }
    CHECKF(lost == 0, "thread %d: %d allocations failed", me, lost);
    CHECKF(bad == 0, "thread %d: %d objects lost their stamp", me, bad);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    cpu_kind[me] = oi.kind;
    registered[me] = thread_has_rseq();
    return NULL;
}

static int child_self(void)
{
    CHECKF(glibc_rseq_size() == 0, "GLIBC_TUNABLES=glibc.pthread.rseq=0 ignored: __rseq_size %d",
           glibc_rseq_size());
    common("self", QSLAB_OWNER_CPU);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    CHECKF(oi.why && strstr(oi.why, "qslab registered rseq"), "why \"%s\"", oi.why);
    CHECKF(thread_has_rseq(), "main thread: qslab did not register rseq");

    xc = qslab_cache_create("owner-xthread", OBJ, 0, 0, NULL);
    if (!CHECK(xc != NULL))
        return tu_done();
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);

    /* fork while the workers run: the child allocates at once */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        void *p = qslab_cache_alloc(xc), *m = qslab_malloc(700);
        int ok = p && m;
        if (ok) {
            stamp(p, OBJ, 55, 1);
            stamp(m, 700, 56, 2);
            ok = stamp_ok(p, OBJ, 55, 1) && stamp_ok(m, 700, 56, 2);
        }
        qslab_cache_free(xc, p);
        qslab_free(m);
        struct qslab_owner_info ci;
        qslab_owner_info(&ci);
        ok = ok && ci.kind == QSLAB_OWNER_CPU;
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    int st = -1;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    CHECKF(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child status %#x", st);

    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) {
        CHECKF(cpu_kind[i] == QSLAB_OWNER_CPU, "thread %d sees kind %d", i, cpu_kind[i]);
        CHECKF(!registered_before[i], "thread %d: rseq registered before its first allocation", i);
        CHECKF(registered[i], "thread %d: qslab did not register rseq for it", i);
    }
    struct qslab_cache_stats s;
    CHECK(qslab_cache_stats(xc, &s) == 0);
    CHECKF(s.alloc == (unsigned long)NT * ROUNDS * K && s.free == s.alloc && s.active_objs == 0,
           "alloc %lu free %lu active %lu", s.alloc, s.free, s.active_objs);
    CHECKF(s.alloc_fast > s.alloc / 2, "alloc_fast %lu of %lu: threads without per-CPU queues?", s.alloc_fast,
           s.alloc);
    validate_all("self", xc);
    CHECK(qslab_cache_destroy(xc) == 0);
    pthread_barrier_destroy(&bar);
    return tu_done();
}

/* ---- rseq refused: the thread owner, and everything still works ---- */

static void *denied_thread(void *arg)
{
    qslab_cache *c = arg;
    exercise("denied thread", c);
    check_info("denied thread", QSLAB_OWNER_THREAD);
    return NULL;
}

static int child_denied(const char *word, int threads)
{
    common(word, QSLAB_OWNER_THREAD);
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    CHECKF(oi.why && strstr(oi.why, "rseq") && strstr(oi.why, word), "why \"%s\" should name rseq and %s",
           oi.why, word);
    if (threads) { /* glibc does not register (tunable): threads may start */
        qslab_cache *c = qslab_cache_create("owner-denied", OBJ, 0, 0, NULL);
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&t[i], NULL, denied_thread, c) == 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        validate_all(word, c);
        CHECK(qslab_cache_destroy(c) == 0);
    }
    return tu_done();
}

static int child_main(const char *mode, int rseq)
{
    if (!strcmp(mode, "default") || !strcmp(mode, "bogus")) {
        expect_default(mode, rseq);
    } else if (!strcmp(mode, "thread")) {
        common(mode, QSLAB_OWNER_THREAD);
        struct qslab_owner_info oi;
        qslab_owner_info(&oi);
        CHECKF(oi.why && strstr(oi.why, "QSLAB_OWNER=thread"), "why \"%s\"", oi.why);
    } else if (!strcmp(mode, "cpu")) {
        CHECKF(rseq, "cpu mode run without rseq");
        expect_default(mode, rseq);
    } else if (!strcmp(mode, "self")) {
        return child_self();
    } else if (!strcmp(mode, "enosys")) {
        return child_denied("ENOSYS", 1);
    } else if (!strcmp(mode, "eperm")) {
        return child_denied("EPERM", 1);
    } else if (!strcmp(mode, "enosys-glibc")) {
        /* glibc tried to register too and failed: no new threads here
         * (glibc may refuse to start them) */
        return child_denied("rseq", 0);
    } else {
        tu_fail("unknown mode %s", mode);
    }
    return tu_done();
}

/* ==== parent side ========================================================= */

struct run {
    int status;
    char out[8192], err[8192];
    char why[512];
};

/* Run this program as "child <mode> <rseq>" with the parent's environment
 * minus QSLAB_* and GLIBC_TUNABLES, plus `env` (NULL-terminated), rseq made
 * to fail with deny_err if not 0.  Captures stdout and stderr. */
static void run_child(struct run *r, const char *mode, int rseq, int deny_err, const char **env)
{
    memset(r, 0, sizeof *r);
    r->status = -1;
    FILE *out = tmpfile(), *err = tmpfile();
    if (!out || !err) {
        tu_fail("tmpfile: %s", strerror(errno));
        return;
    }
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    const char **envp = calloc(n + 16, sizeof *envp);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "QSLAB_", 6) != 0 && strncmp(*e, "GLIBC_TUNABLES=", 15) != 0)
            envp[k++] = *e;
    for (; env && *env; env++)
        envp[k++] = *env;
    envp[k] = NULL;

    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(out), 1);
        dup2(fileno(err), 2);
        if (deny_err && deny_rseq(deny_err) != 0) {
            fprintf(stderr, "cannot install a seccomp filter: %s\n", strerror(errno));
            _exit(77);
        }
        char *argv[] = {(char *)"owner-child", (char *)"child", (char *)mode, (char *)(rseq ? "1" : "0"), NULL};
        execve("/proc/self/exe", argv, (char **)envp);
        fprintf(stderr, "execve: %s\n", strerror(errno));
        _exit(127);
    }
    free(envp);
    if (pid < 0) {
        tu_fail("fork: %s", strerror(errno));
    } else {
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    lseek(fileno(out), 0, SEEK_SET);
    lseek(fileno(err), 0, SEEK_SET);
    tu_read_all(fileno(out), r->out, sizeof r->out);
    tu_read_all(fileno(err), r->err, sizeof r->err);
    fclose(out);
    fclose(err);
    char *w = strstr(r->out, "why=");
    if (w) {
        w += 4;
        size_t len = strcspn(w, "\n");
        if (len >= sizeof r->why)
            len = sizeof r->why - 1;
        memcpy(r->why, w, len);
    }
    printf("[%s] status %d, owner: %s\n", mode, r->status, r->why[0] ? r->why : "?");
}

/* The child passed and wrote nothing on stderr (no warning). */
static void dump(const char *what, struct run *r)
{
    fprintf(stderr, "--- %s: child stdout:\n%s--- child stderr:\n%s---\n", what, r->out, r->err);
}

static void check_clean(const char *what, struct run *r)
{
    if (!CHECKF(r->status == 0, "%s: child exited with %d", what, r->status))
        dump(what, r);
    CHECKF(r->err[0] == '\0', "%s: unexpected stderr: \"%s\"", what, r->err);
    CHECKF(r->why[0] != '\0', "%s: child printed no why", what);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "child"))
        return child_main(argv[2], argv[3][0] == '1');

    int rseq = kernel_has_rseq();
    printf("kernel rseq: %s; glibc __rseq_size %d\n", rseq ? "yes" : "no", glibc_rseq_size());

    /* the parent itself follows the suite's QSLAB_OWNER */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    const char *suite = getenv("QSLAB_OWNER");
    if (suite && !strcmp(suite, "thread"))
        CHECKF(oi.kind == QSLAB_OWNER_THREAD, "parent under QSLAB_OWNER=thread: %s", oi.why);
    else if (suite && !strcmp(suite, "cpu") && rseq)
        CHECKF(oi.kind == QSLAB_OWNER_CPU, "parent under QSLAB_OWNER=cpu: %s", oi.why);

    struct run *def = calloc(1, sizeof *def), *r = calloc(1, sizeof *r);

    /* 1. unset */
    run_child(def, "default", rseq, 0, NULL);
    check_clean("QSLAB_OWNER unset", def);
    CHECKF(strstr(def->why, rseq ? "per-CPU queues" : "per-thread queues"), "default why \"%s\"", def->why);

    /* 2. thread */
    run_child(r, "thread", rseq, 0, (const char *[]){"QSLAB_OWNER=thread", NULL});
    check_clean("QSLAB_OWNER=thread", r);

    /* 3. cpu */
    if (rseq) {
        run_child(r, "cpu", rseq, 0, (const char *[]){"QSLAB_OWNER=cpu", NULL});
        check_clean("QSLAB_OWNER=cpu", r);
        CHECKF(strcmp(r->why, def->why) == 0, "cpu why \"%s\", default \"%s\"", r->why, def->why);
    } else {
        printf("SKIP QSLAB_OWNER=cpu: the kernel has no rseq\n");
    }

    /* 4. bogus: one warning line naming the value, then the default */
    run_child(r, "bogus", rseq, 0, (const char *[]){"QSLAB_OWNER=bogus", NULL});
    if (!CHECKF(r->status == 0, "bogus: child exited with %d", r->status))
        dump("bogus", r);
    size_t len = strlen(r->err);
    CHECKF(len > 0 && r->err[len - 1] == '\n' && strchr(r->err, '\n') == r->err + len - 1,
           "bogus: stderr should be one line: \"%s\"", r->err);
    CHECKF(strstr(r->err, "QSLAB_OWNER=bogus"), "bogus: warning does not name the value: \"%s\"", r->err);
    CHECKF(strcmp(r->why, def->why) == 0, "bogus why \"%s\", default \"%s\"", r->why, def->why);

    /* 5. glibc does not register: qslab does, in every thread */
    if (rseq) {
        run_child(r, "self", rseq, 0, (const char *[]){"QSLAB_OWNER=cpu", "GLIBC_TUNABLES=glibc.pthread.rseq=0", NULL});
        check_clean("GLIBC_TUNABLES=glibc.pthread.rseq=0", r);
    } else {
        printf("SKIP self-registered rseq: the kernel has no rseq\n");
    }

    /* 6. rseq refused by the kernel (seccomp) */
    struct {
        const char *mode, *what;
        int err;
        const char *env[3];
    } denied[] = {
        {"enosys", "ENOSYS, unset", ENOSYS, {"GLIBC_TUNABLES=glibc.pthread.rseq=0", NULL}},
        {"enosys", "ENOSYS, QSLAB_OWNER=cpu", ENOSYS,
         {"GLIBC_TUNABLES=glibc.pthread.rseq=0", "QSLAB_OWNER=cpu", NULL}},
        {"eperm", "EPERM, unset", EPERM, {"GLIBC_TUNABLES=glibc.pthread.rseq=0", NULL}},
        {"enosys-glibc", "ENOSYS, glibc registering", ENOSYS, {NULL}},
    };
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        run_child(r, denied[i].mode, rseq, denied[i].err, denied[i].env);
        if (r->status == 77) {
            printf("SKIP rseq %s: %s", denied[i].what, r->err);
            continue;
        }
        check_clean(denied[i].what, r);
    }

    free(def);
    free(r);
    return tu_done();
}
