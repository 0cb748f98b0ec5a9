/*
 * unit: a SLOB run's free lists by bin (front/slob/blocks.c run_take, the
 * bins of front/slob/slob.h).  White box: a run's first bytes are its
 * struct slob_run_ix, runs are 256 KiB slabs aligned to their size.
 *
 * The bins: every size of a run's block has one, in order, a bin's sizes
 * within 1/RUN_SUB of each other.  The take: in a run whose free list has
 * dozens of holes, a request is served from the hole of its size (exact:
 * every hole is filled again before the run's large free block is cut),
 * a larger one from the smallest free block that fits (the hole of a few
 * merged blocks, not the run's end), without a new run.  Validation checks
 * the bitmap against the lists and each block's bin, and finds a bit
 * flipped and a head overwritten.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "front/front.h"
#include "front/slob/slob.h"

#include <string.h>

#define RUN_BYTES ((uintptr_t)256 << 10)
enum { A_SIZE = 1000, A_N = 200, HOLES = 80, B_SIZE = 8000, B_FIRST = 190, B_LAST = 197 };

static char out[8192];

static void test_bins(void)
{
    unsigned units = kinds[K_RUN].units, lo = 0;
    CHECKF(run_bin(units) < RUN_BINS, "the run's largest block, %u units, in bin %u of %u", units,
           run_bin(units), RUN_BINS);
    for (unsigned n = 2; n <= units; n++) {
        unsigned b = run_bin(n);
        if (b == run_bin(n - 1))
            continue;
        if (!CHECKF(b == run_bin(n - 1) + 1 || n == 2, "bin %u after bin %u at %u units", b,
                    run_bin(n - 1), n))
            return;
        /* bin run_bin(n - 1) held lo .. n - 1 */
        if (lo >= RUN_EXACT && !CHECKF((n - 1 - lo) * RUN_SUB < lo, "bin of %u .. %u units wider than 1/%u",
                                       lo, n - 1, RUN_SUB))
            return;
        lo = n;
    }
    CHECK(run_bin(RUN_EXACT - 1) == RUN_EXACT - 1 && run_bin(RUN_EXACT) == RUN_EXACT);
}

static struct slob_run_ix *run_of(const void *p)
{
    return (struct slob_run_ix *)((uintptr_t)p & ~(RUN_BYTES - 1));
}

/* validate must fail and say `what` */
static void expect_problem(qslab_cache *c, const char *what, const char *case_name)
{
    tu_stderr_begin();
    int r = qslab_cache_validate(c);
    tu_stderr_end(out, sizeof out);
    CHECKF(r != 0 && strstr(out, what) != NULL, "%s: validate returned %d, expected \"%s\"; stderr:\n%s",
           case_name, r, what, out);
}

static void test_take(void)
{
    qslab_cache *a = qslab_cache_create("t-runbin-a", A_SIZE, 0, 0, NULL);
    qslab_cache *b = qslab_cache_create("t-runbin-b", B_SIZE, 0, 0, NULL);
    if (!CHECK(a && b) || tf_is(a, "debug")) /* QSLAB_DEBUG: it stays a debug cache */
        return;
    if (!CHECK(qslab_tune("t-runbin-a", "front", "slob") == 0) ||
        !CHECK(qslab_tune("t-runbin-b", "front", "slob") == 0) || !CHECK(tf_slob(a) && tf_slob(b)))
        return;
    static void *o[A_N], *hole[HOLES];
    for (int i = 0; i < A_N; i++) {
        o[i] = qslab_cache_alloc(a);
        if (!CHECK(o[i]))
            return;
    }
    /* one run, a fresh one (nothing else of this process is in SLOB's runs) */
    struct slob_run_ix *rx = run_of(o[0]);
    for (int i = 1; i < A_N; i++)
        if (!CHECKF(run_of(o[i]) == rx, "object %d in another run", i))
            return;
    CHECKF((char *)o[0] == (char *)rx + RUN_SKIP + 16, "the first block right after the heads");

    /* 80 holes of one block each, and one of 8 blocks merged */
    for (int i = 0; i < HOLES; i++) {
        hole[i] = o[2 * i];
        qslab_cache_free(a, o[2 * i]);
        o[2 * i] = NULL;
    }
    for (int i = B_FIRST; i <= B_LAST; i++) {
        qslab_cache_free(a, o[i]);
        o[i] = NULL;
    }
    CHECK(qslab_cache_validate(a) == 0);
    unsigned hole_units = (A_SIZE + SLOB_HDR + 15) / 16, hole_bin = run_bin(hole_units);
    CHECKF((rx->map[hole_bin / 64] >> (hole_bin % 64)) & 1, "the holes' bin %u not in the bitmap", hole_bin);

    /* the larger request: the merged hole (8 blocks), the smallest that fits */
    char *big = qslab_cache_alloc(b);
    CHECKF(big && run_of(big) == rx && big >= (char *)o[B_FIRST - 1] && big < (char *)o[B_LAST + 1],
           "%d-byte object %p not in the hole of 8 %d-byte blocks (%p .. %p)", B_SIZE, (void *)big, A_SIZE,
           o[B_FIRST - 1], o[B_LAST + 1]);

    /* the request of the holes' size: every hole again, in some order */
    for (int i = 0; i < HOLES; i++) {
        char *p = qslab_cache_alloc(a);
        int k = 0;
        while (k < HOLES && hole[k] != p)
            k++;
        if (!CHECKF(k < HOLES, "allocation %d: %p is no hole", i, (void *)p))
            break;
        hole[k] = NULL;
        o[2 * i] = p;
    }
    CHECKF(!((rx->map[hole_bin / 64] >> (hole_bin % 64)) & 1), "the holes' bin %u still in the bitmap", hole_bin);
    CHECK(qslab_cache_validate(a) == 0);

    /* validation: a bit of the bitmap flipped, a head overwritten */
    unsigned top = 0;
    for (unsigned k = 0; k < RUN_BINS; k++)
        if (rx->head[k])
            top = k;
    CHECKF(top > hole_bin, "the run's end is free (bin %u)", top);
    rx->map[top / 64] ^= (uint64_t)1 << (top % 64);
    expect_problem(a, "bitmap does not match", "a bit cleared");
    rx->map[top / 64] ^= (uint64_t)1 << (top % 64);
    CHECK(qslab_cache_validate(a) == 0);
    uint16_t h = rx->head[top];
    rx->head[top] = (uint16_t)(h + 1);
    expect_problem(a, "SLOB free list corrupt", "a head moved by a unit");
    rx->head[top] = h;
    CHECK(qslab_cache_validate(a) == 0);

    qslab_cache_free(b, big);
    for (int i = 0; i < A_N; i++)
        if (o[i])
            qslab_cache_free(a, o[i]);
    CHECK(qslab_cache_validate(a) == 0);
    CHECK(qslab_cache_destroy(a) == 0 && qslab_cache_destroy(b) == 0);
}

int main(void)
{
    test_bins();
    test_take();
    return tu_done();
}
