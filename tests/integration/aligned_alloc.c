/*
 * qslab_aligned_alloc: power-of-two alignments from 1 byte to 4 MiB, for
 * small, odd and large sizes; other alignments are refused with EINVAL.
 */
#include <qslab.h>

#include "../testutil.h"

static void test_bad_align(void)
{
    static const size_t bad[] = {3, 5, 6, 12, 24, 48, 96, 1000, 4097, ((size_t)1 << 20) + 4096};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        void *p = qslab_aligned_alloc(bad[i], 64);
        CHECKF(p == NULL && errno == EINVAL, "aligned_alloc(%zu, 64) = %p errno %d", bad[i], p, errno);
        if (p)
            qslab_free(p);
    }
    errno = 0;
    void *p = qslab_aligned_alloc(64, SIZE_MAX);
    CHECKF(p == NULL && errno == ENOMEM, "aligned_alloc(64, SIZE_MAX) = %p errno %d", p, errno);
}

static void test_alignments(void)
{
    int total = 0;
    for (size_t align = 1; align <= ((size_t)4 << 20); align *= 2) {
        size_t sizes[] = {1, 8, 24, align > 1 ? align - 1 : 1, align, align + 1, 3 * align + 5, 100, 3000};
        size_t ns = sizeof sizes / sizeof sizes[0];
        enum { K = 4 };
        for (size_t i = 0; i < ns; i++) {
            size_t n = sizes[i];
            unsigned char *p[K];
            int nrep = align >= ((size_t)1 << 20) ? 2 : K; /* a few of each, so not only the first slot */
            for (int k = 0; k < nrep; k++) {
                p[k] = qslab_aligned_alloc(align, n);
                total++;
                CHECKF(p[k] != NULL, "aligned_alloc(%zu, %zu) failed, errno %d", align, n, errno);
                if (!p[k])
                    continue;
                CHECKF((uintptr_t)p[k] % align == 0, "aligned_alloc(%zu, %zu) = %p", align, n, (void *)p[k]);
                CHECKF(qslab_usable_size(p[k]) >= n, "usable %zu < %zu", qslab_usable_size(p[k]), n);
                p[k][0] = 1;
                p[k][n - 1] = 2;
            }
            for (int k = 0; k < nrep; k++)
                qslab_free(p[k]);
        }
    }
    CHECK(total > 0);
}

static void test_large(void)
{
    static const size_t aligns[] = {64, 4096, (size_t)2 << 20, (size_t)4 << 20};
    size_t n = ((size_t)33 << 20) + 123; /* over the largest class */
    for (size_t i = 0; i < 4; i++) {
        unsigned char *p = qslab_aligned_alloc(aligns[i], n);
        CHECKF(p && (uintptr_t)p % aligns[i] == 0, "aligned_alloc(%zu, %zu) = %p", aligns[i], n, (void *)p);
        if (!p)
            continue;
        CHECK(qslab_usable_size(p) >= n);
        p[0] = 1;
        p[n - 1] = 2;
        qslab_free(p);
    }
}

/* Many at once, interleaved with plain allocations of the same sizes. */
static void test_mixed(void)
{
    enum { N = 1000 };
    static void *p[N];
    static size_t al[N];
    uint64_t seed = tu_seed(7);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r = tu_rand(&seed);
        al[i] = (size_t)1 << (r % 14); /* 1 .. 8192 */
        size_t n = (r >> 16) % 5000 + 1;
        p[i] = (r >> 40) & 1 ? qslab_aligned_alloc(al[i], n) : qslab_malloc(n);
        if (!p[i])
            bad++;
        else if ((r >> 40) & 1 && (uintptr_t)p[i] % al[i])
            bad++;
        else
            memset(p[i], 0x11, n);
    }
    for (int i = 0; i < N; i++)
        qslab_free(p[i]);
    CHECKF(bad == 0, "%d bad allocations", bad);
}

int main(void)
{
    test_bad_align();
    test_alignments();
    test_large();
    test_mixed();
    return tu_done();
}
