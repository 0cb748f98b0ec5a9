/*
 * valgrind's memcheck and ASan see inside qslab's caches (debug flag V,
 * src/debug/slot.c, flags.c): a use after free, an overflow into the red zone, a read of
 * uninitialised object bytes and a leaked object are reported by the tool,
 * with the object's allocation and free stacks.
 *   - under valgrind (every cache gets V automatically): this program runs
 *     itself under `valgrind --leak-check=full` (the machine's valgrind:
 *     scripts/install-deps installs it) and reads memcheck's report;
 *   - in an ASan build: it runs itself with QSLAB_DEBUG=V and the child must
 *     die of ASan's use-after-poison report;
 *   - the TSan build has neither: the test checks V's bookkeeping only.
 */
#include <qslab.h>

#include "../testutil.h"

#include <sys/wait.h>

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

static char out[1 << 16];
static char self[4096];

static qslab_cache *cache(void)
{
    qslab_cache *c = qslab_cache_create("t-tools", 40, 0, 0, NULL);
    if (!c || strcmp(qslab_cache_front(c), "debug") != 0) {
        fprintf(stderr, "t-tools is not a debug cache (front %s)\n", c ? qslab_cache_front(c) : "-");
        exit(3);
    }
    return c;
}

/* The child's misuse, one kind per run: each tool stops at (ASan) or
 * reports (memcheck) the first. */
static __attribute__((noinline)) void use_after_free(void)
{
    qslab_cache *c = cache();
    volatile char *p = qslab_cache_alloc(c);
    p[0] = 1;
    qslab_cache_free(c, (void *)p);
    p[3] = 7;
}

static __attribute__((noinline)) void overflow(void)
{
    volatile char *p = qslab_malloc(64);
    p[64] = 1;
    qslab_free((void *)p);
}

static void *keep;

static __attribute__((noinline)) void leak(void)
{
    qslab_cache *c = cache();
    keep = qslab_cache_alloc(c); /* the slab's first object: see docs/debugging.md */
    char *p = qslab_cache_alloc(c);
    p[0] = 1;
}

static __attribute__((noinline)) void uninit(void)
{
    volatile char *p = qslab_malloc(16);
    if (p[3] == 5)
        puts("five");
    qslab_free((void *)p);
}

static void ctor(void *obj)
{
    memset(obj, 0x21, 40);
}

/* QSLAB_DEBUG=V in any build: objects come and go, constructed state kept,
 * the cache consistent, its slabs given back and reused by another cache */
static int bookkeeping(void)
{
    qslab_cache *c = qslab_cache_create("t-tools-book", 40, 0, 0, ctor);
    CHECK(strcmp(qslab_cache_front(c), "debug") == 0);
    static char *v[2000];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2000; i++) {
            v[i] = qslab_cache_alloc(c);
            CHECK(v[i][0] == 0x21 && v[i][39] == 0x21);
        }
        for (int i = 0; i < 2000; i++)
            qslab_cache_free(c, v[i]);
        CHECK(qslab_cache_validate(c) == 0);
        qslab_cache_shrink(c);
    }
    CHECK(qslab_cache_destroy(c) == 0);
    for (size_t size = 8; size <= (8u << 20); size *= 4) {
        char *p = qslab_malloc(size);
        memset(p, 1, size);
        p = qslab_realloc(p, size * 2);
        CHECK(p && p[size - 1] == 1);
        qslab_free(p);
    }
    qslab_trim();
    return tu_done();
}

static int child(const char *what)
{
    if (!strcmp(what, "book"))
        return bookkeeping();
    if (!strcmp(what, "uaf"))
        use_after_free();
    else if (!strcmp(what, "overflow"))
        overflow();
    else if (!strcmp(what, "leak"))
        leak();
    else if (!strcmp(what, "uninit"))
        uninit();
    return 0;
}

/* Run this program as `argv0 what` under `prefix` (or none), with extra
 * environment; stderr into out.  Returns the wait status. */
static int run(const char *const *prefix, const char *what, const char *env)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        dup2(fds[1], 1);
        if (env)
            putenv((char *)env);
        const char *argv[16];
        int k = 0;
        for (; prefix && prefix[k]; k++)
            argv[k] = prefix[k];
        argv[k++] = self; /* not /proc/self/exe: valgrind would open its own */
        argv[k++] = what;
        argv[k] = NULL;
        execvp(argv[0], (char **)argv);
        _exit(127);
    }
    close(fds[1]);
    tu_read_all(fds[0], out, sizeof out);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static int have_valgrind(void)
{
    return system("valgrind --version >/dev/null 2>&1") == 0;
}

static void under_valgrind(void)
{
    static const char *const vg[] = {"valgrind", "--leak-check=full", "--error-exitcode=9", NULL};
    run(vg, "uaf", NULL);
    CHECKF(strstr(out, "Invalid write of size 1") && strstr(out, "3 bytes inside a block of size 40 free'd"),
           "memcheck on a use after free:\n%s", out);
    CHECKF(strstr(out, "use_after_free (tools.c:"), "the stack names the function:\n%s", out);
    run(vg, "overflow", NULL);
    CHECKF(strstr(out, "Invalid write of size 1") && strstr(out, "0 bytes after a block of size 64 alloc'd"),
           "memcheck on an overflow:\n%s", out);
    run(vg, "uninit", NULL);
    CHECKF(strstr(out, "Conditional jump or move depends on uninitialised value"),
           "memcheck on an uninitialised read:\n%s", out);
    run(vg, "leak", NULL);
    CHECKF(strstr(out, "40 bytes in 1 blocks are definitely lost") && strstr(out, "leak (tools.c:"),
           "memcheck on a leak:\n%s", out);
}

static void under_asan(void)
{
    int st = run(NULL, "uaf", "QSLAB_DEBUG=V");
    CHECKF(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the use after free went unnoticed:\n%s", out);
    CHECKF(strstr(out, "AddressSanitizer: use-after-poison") && strstr(out, "WRITE of size 1") &&
               strstr(out, "use_after_free"),
           "ASan on a use after free:\n%s", out);
    st = run(NULL, "overflow", "QSLAB_DEBUG=V");
    CHECKF(strstr(out, "AddressSanitizer: use-after-poison") && strstr(out, "overflow"),
           "ASan on an overflow:\n%s", out);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    /* V's bookkeeping in any build: objects come and go, the cache stays
     * consistent, the memory of its slabs is given back */
    if (tu_reexec("book", "QSLAB_DEBUG", "V") != 0)
        tu_fail("V bookkeeping run failed");
    if (TU_ASAN)
        under_asan();
    else if (!TU_SANITIZED) {
        if (have_valgrind())
            under_valgrind();
        else
            tu_fail("valgrind is not installed (scripts/install-deps installs it)");
    }
    return tu_done();
}
