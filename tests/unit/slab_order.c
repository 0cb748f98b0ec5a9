/*
 * unit: the slab order rule (order 0 first; at most 1/8 waste within three
 * orders above the minimum) and the SLQB watermarks.
 */
#include "../testutil.h"
#include "internal.h"

static size_t waste(size_t slot, unsigned order)
{
    size_t b = qs_slab_bytes(order);
    return b - b / slot * slot;
}

int main(void)
{
    /* powers of two up to a page: order 0, no waste */
    for (size_t s = 8; s <= 4096; s *= 2)
        CHECKF(qs_slab_default_order(s, 8) == 0, "size %zu", s);
    /* bigger powers of two: the smallest order that holds one.  kmalloc-8192
     * is order 1 here: the queues, not objects per slab, make it fast (the
     * seeds' calculate_order discussion) */
    CHECK(qs_slab_default_order(8192, 8) == 1);
    CHECK(qs_slab_default_order(16384, 8) == 2);
    CHECK(qs_slab_default_order(32u << 20, 8) == 13);
    /* odd sizes: first order within three that wastes at most 1/8 */
    CHECK(qs_slab_default_order(96, 8) == 0);
    CHECK(qs_slab_default_order(192, 8) == 0);
    unsigned o = qs_slab_default_order(4696, 8); /* the netperf skb size */
    CHECKF(waste(4696, o) * 8 <= qs_slab_bytes(o), "order %u wastes %zu", o, waste(4696, o));
    for (unsigned k = qs_slab_min_order(4696, 8); k < o; k++)
        CHECKF(waste(4696, k) * 8 > qs_slab_bytes(k), "order %u was good enough", k);
    for (size_t s = 8; s < 70000; s += 8) {
        unsigned d = qs_slab_default_order(s, 8), m = qs_slab_min_order(s, 8);
        CHECK(d >= m && d <= m + 3 && qs_slab_bytes(d) >= s);
        if (d > m) /* every lower order wasted too much */
            for (unsigned k = m; k < d; k++)
                if (waste(s, k) * 8 <= qs_slab_bytes(k))
                    tu_fail("size %zu: order %u fits but %u chosen", s, k, d);
    }
    /* alignment raises the minimum order */
    CHECK(qs_slab_min_order(64, 16384) == 2);

    /* watermarks: SLQB's formula, hiwater = 4 * freebatch */
    static const struct { const char *name; unsigned long freebatch, hiwater; } wm[] = {
        {"kmalloc-8", 2048, 8192},  {"kmalloc-64", 256, 1024},  {"kmalloc-256", 256, 1024},
        {"kmalloc-1024", 256, 1024}, {"kmalloc-4096", 64, 256}, {"kmalloc-5120", 51, 204},
        {"kmalloc-16384", 16, 64},  {"kmalloc-1048576", 1, 4},
    };
    for (size_t i = 0; i < sizeof wm / sizeof wm[0]; i++) {
        unsigned long fb = 0, hw = 0;
        CHECK(qslab_tune_get(wm[i].name, "freebatch", &fb) == 0);
        CHECK(qslab_tune_get(wm[i].name, "hiwater", &hw) == 0);
        CHECKF(fb == wm[i].freebatch && hw == wm[i].hiwater, "%s: freebatch %lu hiwater %lu", wm[i].name, fb, hw);
    }
    return tu_done();
}
