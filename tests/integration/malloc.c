/*
 * qslab_malloc / qslab_calloc / qslab_free: edge sizes, overflow, zeroing.
 */
#include <qslab.h>

#include "../testutil.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* Does touching p (a read, or a write) fault?  In a child. */
static bool faults(void *p, bool write)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        signal(SIGSEGV, SIG_DFL); /* (ASan's handler would report and exit) */
        if (write)
            *(volatile char *)p = 1;
        else
            (void)*(volatile char *)p;
        _exit(0);
    }
    int st = tu_wait(pid);
    return st == 128 + SIGSEGV;
}

static void double_free_zero(void *arg)
{
    (void)arg;
    void *p = qslab_malloc(0);
    tu_child_expect("a zero-size block");
    qslab_free(p);
    qslab_free(p);
}

static void interior_zero(void *arg)
{
    (void)arg;
    char *p = qslab_malloc(0);
    tu_child_expect("inside the range of zero-size blocks, not a block");
    qslab_free(p + 8);
}

/* A block of size zero: a pointer of its own (distinct, 16-aligned) that
 * faults on a read or a write, holds 0 bytes, and frees; realloc grows it;
 * a second free, or a pointer between blocks, is reported. */
static void test_zero_size(void)
{
    enum { N = 100 };
    void *p[N];
    int nulls = 0, usable = 0, aligned = 0;
    for (int i = 0; i < N; i++) {
        nulls += (p[i] = qslab_malloc(0)) == NULL;
        usable += p[i] && qslab_usable_size(p[i]) != 0;
        aligned += ((uintptr_t)p[i] & 15) == 0;
    }
    int dups = tu_sorted_dups(p, N);
    CHECKF(nulls == 0, "%d of %d qslab_malloc(0) returned NULL", nulls, N);
    CHECKF(dups == 0, "qslab_malloc(0) returned the same pointer %d times", dups);
    CHECKF(usable == 0, "%d of %d zero-size blocks with a usable size", usable, N);
    CHECKF(aligned == N, "%d of %d zero-size blocks 16-aligned", aligned, N);
    CHECKF(faults(p[0], false) && faults(p[N - 1], true), "a zero-size block (%p) can be read or written",
           p[0]);
    void *c = qslab_calloc(0, 100);
    CHECKF(c && qslab_usable_size(c) == 0 && faults(c, false), "qslab_calloc(0, 100): %p, usable %zu", c,
           c ? qslab_usable_size(c) : 0);
    qslab_free(c);
    for (int i = 0; i < N; i++)
        qslab_free(p[i]);
    /* freed blocks are handed out again: no range runs out */
    for (int i = 0; i < 100000; i++)
        qslab_free(qslab_malloc(0));
    void *z = qslab_malloc(0);
    char *g = qslab_realloc(z, 100); /* grows: a real object, z freed */
    CHECK(g != NULL && qslab_usable_size(g) >= 100);
    memset(g, 7, 100);
    qslab_free(g);
    z = qslab_malloc(0);
    CHECK(qslab_realloc(z, 0) == NULL); /* frees, as glibc's realloc(p, 0) */
    tu_expect_abort("double free of a zero-size block", double_free_zero, NULL, "double free");
    tu_expect_abort("free inside the zero-size range", interior_zero, NULL, "invalid free of 0x");
}

static void test_enomem(void)
{
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 100000, SIZE_MAX / 2 + 1,
                                  (size_t)1 << 62};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        errno = 0;
        void *p = qslab_malloc(huge[i]);
        CHECKF(p == NULL && errno == ENOMEM, "qslab_malloc(%zu) = %p, errno %d", huge[i], p, errno);
        if (p)
            qslab_free(p);
    }

    errno = 0;
    void *p = qslab_calloc(SIZE_MAX / 2, 3);
    CHECKF(p == NULL && errno == ENOMEM, "qslab_calloc(SIZE_MAX/2, 3) = %p, errno %d", p, errno);
    errno = 0;
    p = qslab_calloc(3, SIZE_MAX / 2);
    CHECKF(p == NULL && errno == ENOMEM, "qslab_calloc(3, SIZE_MAX/2) = %p, errno %d", p, errno);
    errno = 0;
    p = qslab_calloc((size_t)1 << 32, (size_t)1 << 32);
    CHECKF(p == NULL && errno == ENOMEM, "qslab_calloc(2^32, 2^32) = %p, errno %d", p, errno);
    errno = 0;
    p = qslab_calloc(SIZE_MAX, 1);
    CHECKF(p == NULL && errno == ENOMEM, "qslab_calloc(SIZE_MAX, 1) = %p, errno %d", p, errno);

    /* Still works afterwards. */
    p = qslab_malloc(100);
    CHECK(p != NULL);
    qslab_free(p);
}

static int all_zero(const unsigned char *b, size_t n)
{
    static const unsigned char zero[4096];
    for (size_t i = 0; i < n; i += sizeof zero)
        if (memcmp(b + i, zero, n - i < sizeof zero ? n - i : sizeof zero) != 0)
            return 0;
    return 1;
}

static void test_calloc_zero(void)
{
    static const size_t sizes[] = {1, 8, 24, 96, 100, 192, 1000, 4096, 5000, 65536, 300000, (size_t)2 << 20,
                                   (size_t)40 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        /* Dirty memory of the same class, freed, then calloc'd. */
        enum { K = 8 };
        void *dirty[K];
        int k_max = n > (1 << 20) ? 2 : K;
        for (int k = 0; k < k_max; k++) {
            dirty[k] = qslab_malloc(n);
            if (dirty[k])
                memset(dirty[k], 0xa5, qslab_usable_size(dirty[k]));
        }
        for (int k = 0; k < k_max; k++)
            qslab_free(dirty[k]);
        int bad = 0;
        void *z[K];
        for (int k = 0; k < k_max; k++) {
            z[k] = qslab_calloc(1, n);
            if (!z[k] || !all_zero(z[k], n))
                bad++;
        }
        CHECKF(bad == 0, "calloc(1, %zu): %d of %d results not zeroed (or NULL)", n, bad, k_max);
        for (int k = 0; k < k_max; k++)
            qslab_free(z[k]);

        /* calloc(n, size) form, same total. */
        void *d = qslab_malloc(n);
        if (d)
            memset(d, 0x5a, n);
        qslab_free(d);
        unsigned char *q = n % 8 == 0 ? qslab_calloc(n / 8, 8) : qslab_calloc(n, 1);
        CHECKF(q && all_zero(q, n), "calloc of %zu bytes after a dirty free", n);
        qslab_free(q);
    }
}

static void test_free_null(void)
{
    qslab_free(NULL);
    CHECK(1);
}

/* Freeing never changes errno (POSIX asks it of free). */
static void test_free_keeps_errno(void)
{
    static const size_t sizes[] = {0, 8, 100, 5000, 300000, (size_t)40 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = qslab_malloc(sizes[i]);
        errno = 4242;
        qslab_free(p);
        CHECKF(errno == 4242, "qslab_free of a %zu-byte block set errno to %d", sizes[i], errno);
    }
    /* Frees that give memory back: a whole cache's worth, then shrink. */
    qslab_cache *c = qslab_cache_create("t-errno", 2000, 0, 0, NULL);
    void *v[300];
    for (int i = 0; i < 300; i++)
        v[i] = qslab_cache_alloc(c);
    int changed = 0;
    for (int i = 0; i < 300; i++) {
        errno = 4242;
        qslab_cache_free(c, v[i]);
        changed += errno != 4242;
    }
    CHECKF(changed == 0, "%d of 300 qslab_cache_free calls changed errno", changed);
    qslab_cache_destroy(c);
}

/* Many sizes at once: distinct, writable, no overlap. */
static void test_many_sizes(void)
{
    enum { N = 2000 };
    static unsigned char *p[N];
    static size_t sz[N];
    uint64_t seed = tu_seed(42);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r = tu_rand(&seed);
        sz[i] = (r & 3) == 0 ? r % 70000 : (r >> 8) % 600;
        p[i] = qslab_malloc(sz[i]);
        if (!p[i]) {
            bad++;
            continue;
        }
        if (qslab_usable_size(p[i]) < sz[i])
            bad++;
        memset(p[i], i & 0xff, sz[i]);
    }
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; p[i] && k < sz[i]; k++)
            if (p[i][k] != (i & 0xff)) {
                bad++;
                break;
            }
        qslab_free(p[i]);
    }
    CHECKF(bad == 0, "%d of %d random-size allocations bad", bad, N);
}

int main(void)
{
    test_zero_size();
    test_enomem();
    test_calloc_zero();
    test_free_null();
    test_free_keeps_errno();
    test_many_sizes();
    return tu_done();
}
