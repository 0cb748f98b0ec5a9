/*
 * bad_free.c - bad pointers through the glibc names, under the preload.
 *
 * Each case runs in a child process (core dumps off) whose stderr goes to a
 * pipe.  The child must die of SIGABRT after writing exactly one line, which
 * starts with "qslab: " and contains the expected words:
 *   free(stack pointer)                 "not allocated by qslab"
 *   realloc(stack pointer, 100)         "invalid realloc of 0x...: not allocated by qslab"
 *   malloc_usable_size(stack pointer)   "invalid malloc_usable_size of 0x...: not ..."
 *   malloc_usable_size(interior)        "...: interior pointer into object", as free
 *   free(interior pointer of a block)   "interior pointer"
 *   free(p) twice                       "double free"
 *   free(interior of a 40 MiB block)    "interior pointer"
 *   free_sized(malloc(40), 1000)        "free_sized of 0x... with size 1000"
 *   free_aligned_sized with an alignment the pointer lacks, or a size over
 *   the block                           "free_aligned_sized of 0x... with ..."
 *   C++'s sized and aligned deletes (by their mangled names), a size the
 *   object cannot have, an alignment it lacks, a size over an aligned
 *   block                               "operator delete[] of 0x... with ..."
 * (qslab's check of the size; glibc 2.36 has no free_sized, the drop-in's
 * is found with dlsym).  The last cases check that free_sized with the
 * right sizes, and a good free, exit normally in a child (the harness itself
 * is sound).  Prints one line per case; exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Keep the compiler from seeing through the bad calls. */
static void *volatile sink;
static void *launder(void *p)
{
    sink = p;
    return sink;
}

static void case_free_stack(void)
{
    char buf[64];
    free(launder(buf + 16));
}

static void case_realloc_stack(void)
{
    char buf[64];
    sink = realloc(launder(buf), 100);
}

static void case_usable_stack(void)
{
    char buf[64];
    sink = (void *)(uintptr_t)malloc_usable_size(launder(buf));
}

static void case_usable_interior(void)
{
    char *p = malloc(100);
    sink = (void *)(uintptr_t)malloc_usable_size(launder(p + 8));
}

static void case_free_interior(void)
{
    char *p = malloc(100);
    free(launder(p + 8));
}

static void case_double_free(void)
{
    void *p = malloc(48), *again = launder(p);
    free(p);
    free(again);
}

static void case_free_interior_large(void)
{
    char *p = malloc(40 << 20);
    free(launder(p + 4096));
}

typedef void (*free_sized_fn)(void *, size_t);

static void case_free_sized_wrong(void)
{
    free_sized_fn fs = (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized");
    if (fs)
        fs(launder(malloc(40)), 1000);
}

static void case_free_sized_right(void)
{
    free_sized_fn fs = (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized");
    if (fs) {
        fs(launder(malloc(40)), 40);
        fs(launder(malloc(5)), 5);
        fs(launder(calloc(10, 10)), 100);
        fs(launder(malloc(40 << 20)), 40 << 20);
    }
}

typedef void (*free_aligned_sized_fn)(void *, size_t, size_t);

static void case_free_aligned_sized_align(void)
{
    free_aligned_sized_fn fs = (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
    if (fs) { /* 64-aligned, freed as 4096-aligned: one of two neighbours is not */
        char *a = launder(aligned_alloc(64, 64)), *b = launder(aligned_alloc(64, 64));
        char *p = ((uintptr_t)a & 4095) ? a : b;
        free(p == a ? b : a);
        fs(p, 4096, 64);
    }
}

static void case_free_aligned_sized_size(void)
{
    free_aligned_sized_fn fs = (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
    if (fs)
        fs(launder(aligned_alloc(64, 64)), 64, 5000);
}

static void case_free_aligned_sized_right(void)
{
    free_aligned_sized_fn fs = (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
    if (fs) {
        fs(launder(aligned_alloc(64, 64)), 64, 64);
        fs(launder(aligned_alloc(4096, 100)), 4096, 100);
        fs(launder(aligned_alloc(16, 40 << 20)), 16, 40 << 20);
        fs(NULL, 64, 64);
    }
}

/* C++'s sized and aligned deletes, by their mangled names, found as a C++
 * program's calls find them (the drop-in's, ahead of libstdc++'s) */
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_aligned_fn)(void *, size_t);                  /* (void *, align_val_t) */
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);    /* (void *, size_t, align_val_t) */

static void *sym(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "%s not found\n", name);
        _exit(3);
    }
    return f;
}

static void case_delete_sized_wrong(void) /* delete through a pointer to a smaller type */
{
    ((delete_sized_fn)sym("_ZdlPvm"))(launder(malloc(100)), 8);
}

static void case_delete_array_sized_wrong(void)
{
    ((delete_sized_fn)sym("_ZdaPvm"))(launder(malloc(1000)), 4000);
}

static void case_delete_sized_foreign(void)
{
    char buf[64];
    ((delete_sized_fn)sym("_ZdlPvm"))(launder(buf + 16), 16);
}

static void case_delete_aligned_wrong(void)
{ /* 64-aligned, deleted as 4096-aligned: one of two neighbours is not */
    char *a = launder(aligned_alloc(64, 64)), *b = launder(aligned_alloc(64, 64));
    char *p = ((uintptr_t)a & 4095) ? a : b;
    free(p == a ? b : a);
    ((delete_aligned_fn)sym("_ZdlPvSt11align_val_t"))(p, 4096);
}

static void case_delete_sized_aligned_wrong(void)
{
    ((delete_sized_aligned_fn)sym("_ZdaPvmSt11align_val_t"))(launder(aligned_alloc(64, 64)), 5000, 64);
}

static void case_deletes_right(void)
{
    ((delete_sized_fn)sym("_ZdlPvm"))(launder(malloc(100)), 100);
    ((delete_sized_fn)sym("_ZdlPvm"))(launder(malloc(5)), 5);
    ((delete_sized_fn)sym("_ZdaPvm"))(launder(malloc(1000)), 1000);
    ((delete_sized_fn)sym("_ZdlPvm"))(launder(malloc(40 << 20)), 40 << 20);
    ((delete_sized_fn)sym("_ZdlPvm"))(NULL, 8);
    ((delete_aligned_fn)sym("_ZdlPvSt11align_val_t"))(launder(aligned_alloc(64, 64)), 64);
    ((delete_aligned_fn)sym("_ZdaPvSt11align_val_t"))(launder(aligned_alloc(4096, 8192)), 4096);
    ((delete_sized_aligned_fn)sym("_ZdlPvmSt11align_val_t"))(launder(aligned_alloc(64, 192)), 130, 64);
    ((delete_sized_aligned_fn)sym("_ZdaPvmSt11align_val_t"))(launder(aligned_alloc(256, 256)), 256, 256);
    ((delete_aligned_fn)sym("_ZdlPvSt11align_val_tRKSt9nothrow_t"))(launder(aligned_alloc(32, 32)), 32);
    ((delete_aligned_fn)sym("_ZdaPvSt11align_val_tRKSt9nothrow_t"))(launder(aligned_alloc(32, 32)), 32);
}

static void case_good(void)
{
    free(launder(malloc(100)));
}

struct bad_case {
    const char *name;
    void (*fn)(void);
    const char *words; /* NULL: must exit 0 silently */
};

static const struct bad_case cases[] = {
    {"free(stack pointer)", case_free_stack, "not allocated by qslab"},
    {"realloc(stack pointer, 100)", case_realloc_stack, "invalid realloc of 0x"},
    {"malloc_usable_size(stack pointer)", case_usable_stack, ": not allocated by qslab"},
    {"malloc_usable_size(malloc(100) + 8)", case_usable_interior, "interior pointer into object"},
    {"free(malloc(100) + 8)", case_free_interior, "interior pointer"},
    {"free(p) twice", case_double_free, "double free"},
    {"free(malloc(40 MiB) + 4096)", case_free_interior_large, "interior pointer"},
    {"free_sized(malloc(40), 1000)", case_free_sized_wrong, "with size 1000: the object is in cache"},
    {"free_sized(malloc(n), n) (control)", case_free_sized_right, NULL},
    {"free_aligned_sized(64-aligned, 4096, 64)", case_free_aligned_sized_align,
     "with alignment 4096: the pointer does not have it"},
    {"free_aligned_sized(aligned_alloc(64, 64), 64, 5000)", case_free_aligned_sized_size,
     "with size 5000: the block holds"},
    {"free_aligned_sized(aligned_alloc(a, n), a, n) (control)", case_free_aligned_sized_right, NULL},
    {"operator delete(malloc(100), 8)", case_delete_sized_wrong,
     "with size 8: the object is in cache"},
    {"operator delete[](malloc(1000), 4000)", case_delete_array_sized_wrong,
     "with size 4000: the object is in cache"},
    {"operator delete(stack pointer, 16)", case_delete_sized_foreign, "not allocated by qslab"},
    {"operator delete(64-aligned, align_val_t(4096))", case_delete_aligned_wrong,
     "with alignment 4096: the pointer does not have it"},
    {"operator delete[](aligned_alloc(64, 64), 5000, align_val_t(64))", case_delete_sized_aligned_wrong,
     "with size 5000: the block holds"},
    {"sized and aligned deletes of the right sizes (control)", case_deletes_right, NULL},
    {"free(malloc(100)) (control)", case_good, NULL},
};

static int run_case(const struct bad_case *c)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 0;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        c->fn();
        _exit(0);
    }
    close(fds[1]);
    char out[4096];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof out - 1 &&
           ((r = read(fds[0], out + len, sizeof out - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            len += (size_t)r;
    out[len] = 0;
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;

    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += out[i] == '\n';
    int ok;
    const char *why = "";
    if (!c->words) {
        ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && len == 0;
        why = "expected a normal exit and no output";
    } else if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) {
        ok = 0;
        why = "expected death by SIGABRT";
    } else if (lines != 1 || out[len - 1] != '\n') {
        ok = 0;
        why = "expected exactly one line on stderr";
    } else if (strncmp(out, "qslab: ", 7) != 0 || !strstr(out, c->words)) {
        ok = 0;
        why = "expected a line starting \"qslab: \" with the words";
    } else {
        ok = 1;
    }
    if (ok) {
        printf("ok   %-36s %s", c->name, c->words ? out : "exit 0\n");
    } else {
        printf("FAIL %-36s %s%s%s: ", c->name, why, c->words ? " " : "", c->words ? c->words : "");
        if (WIFSIGNALED(st))
            printf("got signal %d, ", WTERMSIG(st));
        else
            printf("got exit %d, ", WEXITSTATUS(st));
        printf("%d line(s) on stderr:\n%s%s", lines, out, len && out[len - 1] != '\n' ? "\n" : "");
    }
    return ok;
}

int main(void)
{
    int (*node)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "qslab_object_node");
    if (!node) {
        fprintf(stderr, "FAIL: not running on libqslab-malloc (run under qslab-run)\n");
        return 1;
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failed += !run_case(&cases[i]);
    if (failed)
        printf("FAIL: %d of %zu cases\n", failed, sizeof cases / sizeof cases[0]);
    else
        printf("PASS: every bad pointer aborted with one qslab line\n");
    return failed != 0;
}
