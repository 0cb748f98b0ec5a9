/*
 * unit: the metadata allocator's block sizes (core/meta.c).  A request
 * takes a multiple of a cache line up to 4 KiB and an eighth of a power of
 * two above, not the next power of two: blocks bumped one after another
 * from a fresh block lie exactly that far apart.  Every block comes back
 * zeroed (fresh or reused), cache-line aligned from 64 bytes up, and writing
 * all of it leaves its neighbours alone.
 */
#include "../testutil.h"
#include "core/internal.h"

#include <string.h>

#define RUN 8

static size_t expected(size_t size)
{
    if (size <= 4096)
        return (size + 63) & ~(size_t)63;
    size_t p = 8192;
    while (p < size)
        p *= 2;
    size_t step = p / 16; /* an eighth of the power of two below p */
    return (size + step - 1) & ~(step - 1);
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void check_size(size_t size)
{
    unsigned char *b[RUN];
    size_t want = expected(size);
    unsigned apart = 0;
    for (int i = 0; i < RUN; i++) {
        b[i] = qs_meta_alloc(size);
        CHECKF(b[i] != NULL, "size %zu: no block", size);
        if (!b[i])
            return;
        CHECKF(all_zero(b[i], size), "size %zu: block %d not zeroed", size, i);
        CHECKF(((uintptr_t)b[i] & 63) == 0, "size %zu: block %p not line-aligned", size,
               (void *)b[i]);
        if (i > 0 && b[i] == b[i - 1] + want)
            apart++;
    }
    /* the run is bumped from one 256 KiB block, or two when it crosses a
     * block's end: every neighbour but at most one lies `want` on */
    CHECKF(apart >= RUN - 2, "size %zu: %u of %d neighbours %zu bytes apart", size, apart,
           RUN - 1, want);
    for (int i = 0; i < RUN; i++)
        memset(b[i], 0xa5 + i, size);
    for (int i = 0; i < RUN; i++) {
        int intact = 1;
        for (size_t j = 0; j < size; j++)
            intact &= b[i][j] == (unsigned char)(0xa5 + i);
        CHECKF(intact, "size %zu: block %d overwritten by a neighbour", size, i);
    }
    for (int i = 0; i < RUN; i++)
        qs_meta_free(b[i], size);
    unsigned char *again = qs_meta_alloc(size); /* from the free list: cleared */
    CHECKF(again && all_zero(again, size), "size %zu: a reused block not zeroed", size);
    qs_meta_free(again, size);
}

int main(void)
{
    qslab_free(qslab_malloc(1)); /* start-up */
    /* sizes no structure of qslab's asks for, each in a bin of its own, so
     * no free list has blocks of their bins: each run is bumped */
    static const size_t sizes[] = {321, 1100, 2100, 4097, 5000, 9000, 17000, 40000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        check_size(sizes[i]);
    /* every size from 1 byte to 64 KiB gets a usable, zeroed block */
    for (size_t s = 1; s <= 65536; s += s < 4200 ? 1 : 61) {
        unsigned char *p = qs_meta_alloc(s);
        CHECKF(p && all_zero(p, s), "size %zu", s);
        if (p) {
            p[s - 1] = 1;
            qs_meta_free(p, s);
        }
    }
    return tu_done();
}
