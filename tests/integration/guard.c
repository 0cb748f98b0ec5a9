/*
 * Sampled guarded allocations (QSLAB_GUARD_SAMPLE, src/debug/guard.c).  The
 * environment is read at start-up, so each case runs this program again
 * with it set (run()): QSLAB_GUARD_SAMPLE=1 makes every allocation of a
 * fresh cache a sample, until the pool is full.  A fault on a sample kills
 * the process with SIGSEGV after its report, whose first line is checked
 * exactly; misuse found at a free goes to the fatal handler (here a
 * recording one).  Also: off by default, about one in N (not timed), the
 * pool full, bad values refused, the drop-in's entry points (qslab_malloc,
 * realloc, usable_size, free_sized), a constructor, fork.
 */
#include <qslab.h>

#include "../testutil.h"

static char out[16384];

struct child {
    int pipefd[2];
    const char *const *env;
};

/* run()'s child before its exec: no core file, stderr into the pipe, the
 * guard variables only as env sets them. */
static void child_setup(void *arg)
{
    struct child *ch = arg;
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    close(ch->pipefd[0]);
    dup2(ch->pipefd[1], 2);
    close(ch->pipefd[1]);
    unsetenv("QSLAB_GUARD_SAMPLE");
    unsetenv("QSLAB_GUARD_SLOTS");
    for (int i = 0; ch->env && ch->env[i]; i++)
        putenv((char *)ch->env[i]);
}

/* Run this program with argv[1] = mode and the given environment
 * ("NAME=value" strings, NULL-terminated); its stderr into out.  Returns
 * the exit status, or 128 + the signal. */
static int run(const char *mode, const char *const *env)
{
    struct child ch = {.env = env};
    if (pipe(ch.pipefd))
        return -1;
    pid_t pid = tu_spawn_self(mode, child_setup, &ch);
    close(ch.pipefd[1]);
    if (pid < 0) {
        close(ch.pipefd[0]);
        return -1;
    }
    tu_read_all(ch.pipefd[0], out, sizeof out);
    close(ch.pipefd[0]);
    return tu_wait(pid);
}

static const char *const every[] = {"QSLAB_GUARD_SAMPLE=1", NULL};

/* A child that must die of SIGSEGV with `first` as its report's first
 * line, and `also`, `also2` in the report. */
static void expect_fault(const char *mode, const char *first, const char *also, const char *also2)
{
    int st = run(mode, every);
    char *nl = strchr(out, '\n');
    size_t n = nl ? (size_t)(nl - out) : strlen(out);
    CHECKF(st == 128 + SIGSEGV, "%s: status %d, not a SIGSEGV death; stderr:\n%s", mode, st, out);
    CHECKF(n == strlen(first) && strncmp(out, first, n) == 0,
           "%s: first line \"%.*s\", expected \"%s\"; report:\n%s", mode, (int)n, out, first, out);
    CHECKF(strstr(out, also) != NULL, "%s: \"%s\" not in the report:\n%s", mode, also, out);
    if (also2)
        CHECKF(strstr(out, also2) != NULL, "%s: \"%s\" not in the report:\n%s", mode, also2, out);
}

/* ---- the children (QSLAB_GUARD_SAMPLE=1 unless said) ---- */

static qslab_cache *fresh(const char *name, size_t size)
{
    qslab_cache *c = qslab_cache_create(name, size, 0, 0, NULL);
    if (!c)
        _exit(3);
    return c;
}

static volatile char sink;

static int child(const char *mode)
{
    if (!strcmp(mode, "overflow")) {
        qslab_cache *c = fresh("t-guard", 64);
        char *p = qslab_cache_alloc(c);
        if (!qslab_guarded(p) || ((uintptr_t)p + 64) % 4096 != 0)
            return 4;
        p[63] = 1;
        p[64] = 1; /* faults */
        return 5;
    }
    if (!strcmp(mode, "uaf")) {
        qslab_cache *c = fresh("t-guard", 64);
        char *p = qslab_cache_alloc(c);
        if (!qslab_guarded(p))
            return 4;
        qslab_cache_free(c, p);
        p[8] = 1; /* faults */
        return 5;
    }
    if (!strcmp(mode, "uaf_read")) {
        char *p = qslab_malloc(120);
        if (!qslab_guarded(p))
            return 4;
        qslab_free(p);
        sink = p[0]; /* faults */
        return 5;
    }
    if (!strcmp(mode, "underflow")) {
        qslab_cache *c = fresh("t-guard", 64);
        char *p = qslab_cache_alloc(c), *q = qslab_cache_alloc(c);
        if (!qslab_guarded(q) || ((uintptr_t)q % 4096) != 0) /* the second: left */
            return 4;
        (void)p;
        q[-1] = 1; /* faults */
        return 5;
    }
    if (!strcmp(mode, "malloc_overflow")) {
        char *p = qslab_malloc(48); /* kmalloc-48 */
        if (!qslab_guarded(p) || ((uintptr_t)p + 48) % 4096 != 0)
            return 4;
        p[48] = 1; /* faults */
        return 5;
    }
    if (!strcmp(mode, "off")) { /* no QSLAB_GUARD_SAMPLE */
        void *v[1000];
        for (int r = 0; r < 10; r++) {
            for (int i = 0; i < 1000; i++)
                v[i] = qslab_malloc(64);
            for (int i = 0; i < 1000; i++)
                qslab_free(v[i]);
        }
        struct qslab_guard_stats st;
        qslab_guard_stats(&st);
        return st.rate == 0 && st.samples == 0 && st.slots == 0 ? 0 : 6;
    }
    if (!strcmp(mode, "rate")) { /* QSLAB_GUARD_SAMPLE=100: 100,000 allocations */
        static void *v[5000];
        for (int r = 0; r < 20; r++) {
            for (int i = 0; i < 5000; i++)
                v[i] = qslab_malloc(64);
            for (int i = 0; i < 5000; i++)
                qslab_free(v[i]);
        }
        struct qslab_guard_stats st;
        qslab_guard_stats(&st);
        fprintf(stderr, "samples %lu pool_full %lu live %lu\n", st.samples, st.pool_full, st.live);
        return st.rate == 100 && st.samples >= 100 && st.samples <= 5000 && st.live == 0 ? 0 : 6;
    }
    if (!strcmp(mode, "full")) { /* the default 64 slots */
        qslab_cache *c = fresh("t-guard-full", 64);
        void *v[100];
        int guarded = 0;
        for (int i = 0; i < 100; i++) {
            v[i] = qslab_cache_alloc(c);
            if (!v[i])
                return 4;
            memset(v[i], i, 64);
            guarded += qslab_guarded(v[i]);
        }
        struct qslab_guard_stats st;
        qslab_guard_stats(&st);
        fprintf(stderr, "guarded %d samples %lu pool_full %lu live %lu\n", guarded, st.samples,
                st.pool_full, st.live);
        if (guarded != 64 || st.samples != 64 || st.pool_full < 1 || st.live != 64 || st.slots != 64)
            return 6;
        for (int i = 0; i < 100; i++)
            qslab_cache_free(c, v[i]);
        qslab_guard_stats(&st);
        if (st.live != 0 || st.frees != 64)
            return 7;
        /* the pool has room again (c's queue holds a refill now: a fresh
         * cache's first allocation) */
        qslab_cache *c2 = fresh("t-guard-full2", 64);
        void *p = qslab_cache_alloc(c2);
        int ok = qslab_guarded(p);
        qslab_cache_free(c2, p);
        return ok ? 0 : 8;
    }
    if (!strcmp(mode, "api")) { /* misuse found at frees, recorded; the entry points */
        qslab_set_fatal_handler(tu_fatal_capture);
        qslab_cache *c = fresh("t-guard", 64), *other = fresh("t-other", 64);
        char *p = qslab_cache_alloc(c);
        CHECK(qslab_guarded(p));
        /* interior pointer: not freed */
        tu_capture_reset();
        qslab_cache_free(c, p + 8);
        char both[64];
        snprintf(both, sizeof both, "(pointer %p, object %p)", (void *)(p + 8), (void *)p);
        tu_check_fatal("BUG t-guard: Invalid object pointer", both);
        CHECK(qslab_guarded(p));
        /* a slot no sample has used yet (slots are taken in order; data
         * pages every other page): no object, no cache to name */
        struct qslab_guard_stats gs;
        qslab_guard_stats(&gs);
        CHECKF(gs.samples + 20 < gs.slots, "%lu samples of %lu slots: no slot 20 past this one is unused",
               (unsigned long)gs.samples, (unsigned long)gs.slots);
        char *unused = (char *)((uintptr_t)p & ~(uintptr_t)4095) + 2 * 4096 * 20 + 64;
        tu_capture_reset();
        qslab_free(unused);
        tu_check_fatal("invalid free of 0x", ": not an allocated object (a guarded slot never used)");
        /* wrong cache: not freed */
        tu_capture_reset();
        qslab_cache_free(other, p);
        tu_check_fatal("BUG t-guard: Wrong cache");
        CHECK(qslab_guarded(p));
        /* double free: the second is not done */
        qslab_cache_free(c, p);
        CHECK(!qslab_guarded(p));
        tu_capture_reset();
        qslab_cache_free(c, p);
        tu_check_fatal("BUG t-guard: Object already free");
        /* overflow into the padding (50 bytes, 8-aligned: 6 bytes of red
         * zone before the guard page, or the page's rest when placed left),
         * found at the free, which is done */
        qslab_cache *c50 = fresh("t-guard50", 50);
        char *q = qslab_cache_alloc(c50);
        CHECK(qslab_guarded(q) && (((uintptr_t)q + 56) % 4096 == 0 || (uintptr_t)q % 4096 == 0));
        q[50] = 'x';
        tu_capture_reset();
        qslab_cache_free(c50, q);
        tu_check_fatal("BUG t-guard50: Right Redzone overwritten");
        CHECK(!qslab_guarded(q));
        /* kmalloc: usable size, realloc (moves: the contents go along),
         * free_sized */
        char *m = qslab_malloc(100);
        CHECK(qslab_guarded(m));
        CHECK(qslab_usable_size(m) == 100);
        memset(m, 7, 100);
        char *n = qslab_realloc(m, 60); /* fits, over half: kept */
        CHECK(n == m);
        n = qslab_realloc(m, 300);
        CHECK(n != m && !qslab_guarded(m) && qslab_guarded(n) && n[99] == 7 && n[0] == 7);
        CHECK(qslab_usable_size(n) == 300);
        tu_capture_reset();
        qslab_free_sized(n, 1000);
        tu_check_fatal("free_sized of", "guarded sample of 300 bytes");
        CHECK(qslab_guarded(n));
        qslab_free_sized(n, 300);
        CHECK(!qslab_guarded(n));
        char *z = qslab_calloc(10, 10);
        CHECK(qslab_guarded(z));
        for (int i = 0; i < 100; i++)
            CHECK(z[i] == 0);
        qslab_free(z);
        /* a use after free with a handler that returns: reported, then the
         * page is opened and the program goes on */
        char *u = qslab_malloc(64);
        qslab_free(u);
        tu_capture_reset();
        u[1] = 3;
        tu_check_fatal("BUG kmalloc-64: use after free in guarded object");
        CHECK(u[1] == 3);
        struct qslab_guard_stats st;
        qslab_guard_stats(&st);
        CHECK(st.faults == 1);
        qslab_set_fatal_handler(NULL);
        /* the statistics report's line */
        tu_stderr_begin();
        qslab_stats_report(2);
        static char rep[65536];
        tu_stderr_end(rep, sizeof rep);
        CHECKF(strstr(rep, "Guard: 1 in 1, samples ") != NULL, "no Guard: line:\n%s", rep);
        return tu_failures() ? 9 : 0;
    }
    if (!strcmp(mode, "fork")) { /* the child inherits the pool */
        char *p = qslab_malloc(64);
        if (!qslab_guarded(p))
            return 4;
        p[0] = 42;
        pid_t pid = fork();
        if (pid == 0) {
            int ok = qslab_guarded(p) && p[0] == 42;
            qslab_free(p);
            char *q = qslab_malloc(64);
            ok &= qslab_guarded(q) && !qslab_guarded(p);
            qslab_free(q);
            _exit(ok ? 0 : 1);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && qslab_guarded(p) && p[0] == 42;
        qslab_free(p);
        return ok ? 0 : 6;
    }
    return 2;
}

static int ctor_calls;
static void ctor(void *p)
{
    ctor_calls++;
    memset(p, 0x11, 40);
}

static int child2(const char *mode)
{
    if (!strcmp(mode, "ctor")) {
        qslab_cache *c = qslab_cache_create("t-guard-ctor", 40, 0, 0, ctor);
        unsigned char *p = qslab_cache_alloc(c);
        int ok = qslab_guarded(p) && ctor_calls == 1 && p[0] == 0x11 && p[39] == 0x11;
        qslab_cache_free(c, p);
        return ok ? 0 : 6;
    }
    return child(mode);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child2(argv[1]);

    /* off by default */
    CHECKF(run("off", NULL) == 0, "with no QSLAB_GUARD_SAMPLE, a sample was taken: %s", out);

    /* faults: the first line, the offset, the owners */
    expect_fault("overflow", "BUG t-guard: out-of-bounds access to guarded object",
                 "Write at ", "@offset=64\n");
    CHECKF(strstr(out, "Allocated by thread ") && strstr(out, "Freed: never"), "owners:\n%s", out);
    CHECKF(strstr(out, "qslab: BUG t-guard: out-of-bounds access to guarded object (object "),
           "the last line:\n%s", out);
    expect_fault("uaf", "BUG t-guard: use after free in guarded object", "@offset=8\n",
                 "Freed by thread ");
    CHECKF(strstr(out, "Allocated by thread ") != NULL, "no alloc owner:\n%s", out);
    expect_fault("uaf_read", "BUG kmalloc-128: use after free in guarded object", "Read at ",
                 "@offset=0\n");
    expect_fault("underflow", "BUG t-guard: out-of-bounds access to guarded object", "@offset=-1\n",
                 "against its left guard page");
    expect_fault("malloc_overflow", "BUG kmalloc-48: out-of-bounds access to guarded object",
                 "@offset=48\n", NULL);

    /* misuse found at frees, and the entry points */
    int st = run("api", every);
    CHECKF(st == 0, "api: status %d; stderr:\n%s", st, out);
    st = run("ctor", every);
    CHECKF(st == 0, "ctor: status %d; stderr:\n%s", st, out);
    if (!TU_TSAN) { /* TSan: the child's sampler thread after a fork is refused */
        st = run("fork", every);
        CHECKF(st == 0, "fork: status %d; stderr:\n%s", st, out);
    }

    /* the pool full: no sample, counted */
    st = run("full", every);
    CHECKF(st == 0, "full: status %d; stderr:\n%s", st, out);

    /* about one in N: 100,000 allocations at N = 100 */
    static const char *const rate[] = {"QSLAB_GUARD_SAMPLE=100", NULL};
    st = run("rate", rate);
    CHECKF(st == 0, "rate: status %d; stderr:\n%s", st, out);

    /* one cache's rate (the tunable guard_sample), here, without the
     * environment: that cache is sampled, another is not */
    qslab_cache *t = qslab_cache_create("t-guard-tune", 64, 0, 0, NULL);
    qslab_cache *u = qslab_cache_create("t-guard-untuned", 64, 0, 0, NULL);
    CHECK(t && u);
    CHECK(qslab_tune("t-guard-tune", "guard_sample", "2000000000") == -1 && errno == EINVAL);
    CHECK(qslab_tune("t-guard-tune", "guard_sample", "1") == 0);
    unsigned long gs = 0;
    CHECK(qslab_tune_get("t-guard-tune", "guard_sample", &gs) == 0 && gs == 1);
    char *tp = qslab_cache_alloc(t), *up = qslab_cache_alloc(u);
    CHECK(qslab_guarded(tp) && !qslab_guarded(up));
    struct qslab_guard_stats gst;
    qslab_guard_stats(&gst);
    CHECK(gst.rate == 0 && gst.samples == 1 && gst.live == 1 && gst.slots == 64);
    /* a live sample is an allocated object of its cache */
    struct qslab_cache_stats cst;
    qslab_cache_stats(t, &cst);
    CHECKF(cst.active_objs == 1, "active objects %lu", cst.active_objs);
    CHECK(qslab_cache_validate(t) == 0);
    qslab_cache_free(t, tp);
    qslab_cache_free(u, up);
    qslab_cache_stats(t, &cst);
    CHECK(cst.active_objs == 0 && qslab_cache_validate(t) == 0);
    CHECK(qslab_cache_destroy(t) == 0 && qslab_cache_destroy(u) == 0);

    /* bad values: refused with the range, sampling (or the slots) as without */
    static const char *const bad1[] = {"QSLAB_GUARD_SAMPLE=abc", NULL};
    st = run("off", bad1);
    CHECKF(st == 0 && strstr(out, "qslab: QSLAB_GUARD_SAMPLE=abc ignored: not a number; allowed range is 1..") != NULL,
           "QSLAB_GUARD_SAMPLE=abc: status %d; stderr:\n%s", st, out);
    static const char *const bad2[] = {"QSLAB_GUARD_SAMPLE=-5", NULL};
    st = run("off", bad2);
    CHECKF(st == 0 && strstr(out, "QSLAB_GUARD_SAMPLE=-5 ignored") != NULL,
           "QSLAB_GUARD_SAMPLE=-5: status %d; stderr:\n%s", st, out);
    static const char *const bad3[] = {"QSLAB_GUARD_SAMPLE=1", "QSLAB_GUARD_SLOTS=0", NULL};
    st = run("full", bad3);
    CHECKF(st == 0 && strstr(out, "qslab: QSLAB_GUARD_SLOTS=0 ignored: allowed range is 1..16384; 64 slots"),
           "QSLAB_GUARD_SLOTS=0: status %d; stderr:\n%s", st, out);
    static const char *const bad4[] = {"QSLAB_GUARD_SAMPLE=1", "QSLAB_GUARD_SLOTS=99999999", NULL};
    st = run("full", bad4);
    CHECKF(st == 0 && strstr(out, "QSLAB_GUARD_SLOTS=99999999 ignored"),
           "QSLAB_GUARD_SLOTS=99999999: status %d; stderr:\n%s", st, out);
    return tu_done();
}
