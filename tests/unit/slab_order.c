/*
 * unit: the slab order rule (order 0 first, but at least QS_SLAB_MIN_OBJS
 * objects or QS_SLAB_MIN_BYTES; at most 1/64 waste within five orders above
 * the minimum and 128 KiB), the SLQB watermarks and the byte bounds derived from them.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

/* bytes of the slab's touched pages that no object covers (the tail past
 * the last object's page is never written, so costs no memory) */
static size_t waste(size_t slot, unsigned order)
{
    size_t used = qs_slab_bytes(order) / slot * slot;
    return (used + 4095) / 4096 * 4096 - used;
}

int main(void)
{
    /* powers of two up to 512: order 0, no waste */
    for (size_t s = 8; s <= 512; s *= 2)
        CHECKF(qs_slab_default_order(s, 8) == 0, "size %zu", s);
    /* bigger ones: eight objects or 32 KiB, so that the 96-byte descriptor
     * and a slab's list moves are shared by enough objects (one 4 KiB
     * object per slab paid 2.3% for its descriptor) */
    CHECK(qs_slab_default_order(1024, 8) == 1);
    CHECK(qs_slab_default_order(2048, 8) == 2);
    CHECK(qs_slab_default_order(4096, 8) == 3);
    CHECK(qs_slab_default_order(8192, 8) == 3);
    CHECK(qs_slab_default_order(16384, 8) == 3);
    CHECK(qs_slab_default_order(65536, 8) == 4);
    CHECK(qs_slab_default_order(32u << 20, 8) == 13);
    /* big blocks: one per slab; the tail is address space, not memory */
    CHECK(qs_slab_default_order(3u << 19, 8) == 9);    /* 1.5 MiB in 2 MiB, not 5 in 8 MiB */
    CHECK(qs_slab_default_order(196608, 8) == 6);      /* 192 KiB in 256 KiB */
    /* odd sizes: first order within five that wastes at most 1/64 */
    CHECK(qs_slab_default_order(96, 8) == 0);
    CHECK(qs_slab_default_order(192, 8) == 0);
    CHECK(qs_slab_default_order(1408, 8) == 3); /* 11 in 16 KiB waste 5.5%: 23 in 32 KiB */
    CHECK(qs_slab_default_order(416, 8) == 2);  /* 8.6% at order 0, 1.0% at 2 */
    unsigned o = qs_slab_default_order(4696, 8); /* the netperf skb size */
    CHECKF(waste(4696, o) * QS_SLAB_WASTE_DIV <= qs_slab_bytes(o), "order %u wastes %zu", o, waste(4696, o));
    CHECK(qs_slab_default_order(1312, 8) == 5); /* 49 in 64 KiB waste 1.9%: 99 in 128 KiB 0.9% */
    CHECK(qs_slab_default_order(1000, 8) == 4); /* 2.3% up to 32 KiB, 0.8% at 64 KiB */
    for (size_t s = 8; s < 70000; s += 8) {
        unsigned d = qs_slab_default_order(s, 8), m = qs_slab_min_order(s, 8);
        size_t bytes = qs_slab_bytes(d);
        CHECK(d >= m && d <= m + QS_SLAB_ORDERS_UP && bytes >= s);
        CHECKF(bytes / s >= QS_SLAB_MIN_OBJS || bytes >= QS_SLAB_MIN_BYTES, "size %zu: order %u", s, d);
        for (unsigned k = m; k < d; k++) { /* every lower order was too small or wasteful */
            size_t b = qs_slab_bytes(k);
            bool small = b / s < QS_SLAB_MIN_OBJS && b < QS_SLAB_MIN_BYTES;
            if (!small && waste(s, k) * QS_SLAB_WASTE_DIV <= b)
                tu_fail("size %zu: order %u fits but %u chosen", s, k, d);
        }
        /* past the first order long enough, slabs grow for less waste
         * only up to QS_SLAB_WASTE_MAX_BYTES */
        unsigned e = m;
        while (qs_slab_bytes(e) / s < QS_SLAB_MIN_OBJS && qs_slab_bytes(e) < QS_SLAB_MIN_BYTES)
            e++;
        CHECKF(d == e || bytes <= QS_SLAB_WASTE_MAX_BYTES, "size %zu: order %u past %u KiB (first %u)", s, d,
               QS_SLAB_WASTE_MAX_BYTES >> 10, e);
    }
    /* alignment raises the minimum order */
    CHECK(qs_slab_min_order(64, 16384) == 2);

    /* watermarks: SLQB's formula, hiwater = 4 * freebatch, but at most
     * 256 KiB of objects (at least freebatch) */
    static const struct { const char *name; unsigned long freebatch, hiwater; } wm[] = {
        {"kmalloc-8", 2048, 8192},  {"kmalloc-64", 256, 1024},  {"kmalloc-256", 256, 1024},
        {"kmalloc-512", 256, 512},  {"kmalloc-1024", 256, 256}, {"kmalloc-4096", 64, 64},
        {"kmalloc-5120", 51, 51},   {"kmalloc-16384", 16, 16},  {"kmalloc-1048576", 1, 1},
        {"kmalloc-33554432", 1, 1},
    };
    for (size_t i = 0; i < sizeof wm / sizeof wm[0]; i++) {
        unsigned long fb = 0, hw = 0;
        CHECK(qslab_tune_get(wm[i].name, "freebatch", &fb) == 0);
        CHECK(qslab_tune_get(wm[i].name, "hiwater", &hw) == 0);
        CHECKF(fb == wm[i].freebatch && hw == wm[i].hiwater, "%s: freebatch %lu hiwater %lu", wm[i].name, fb, hw);
    }

    /* what a thread parks of other owners' objects, bounded in bytes too:
     * below min(hiwater/4, 16 KiB); a refill aims for half a batch, at
     * least 4, at most 64 KiB, at least one object; of new memory at most a
     * page's worth */
    static const struct { const char *name; unsigned park, refill, fresh; } rb[] = {
        {"kmalloc-8", 2048, 1024, 4}, {"kmalloc-256", 64, 128, 4}, {"kmalloc-1024", 16, 64, 4},
        {"kmalloc-4096", 4, 16, 1},   {"kmalloc-5120", 3, 12, 1},  {"kmalloc-1048576", 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof rb / sizeof rb[0]; i++) {
        qslab_cache *c = qslab_cache_find(rb[i].name);
        CHECKF(c && c->park == rb[i].park && c->refill == rb[i].refill && c->fresh == rb[i].fresh,
               "%s: park %u refill %u fresh %u", rb[i].name, c ? c->park : 0, c ? c->refill : 0,
               c ? c->fresh : 0);
    }
    /* one big object makes one slab, not QS_REFILL_MIN of them */
    qslab_cache *big = qslab_cache_create("t-big", 256 << 10, 0, 0, NULL);
    tf_pin_slqb("t-big"); /* SLQB's refill */
    void *bp = qslab_cache_alloc(big);
    struct qslab_cache_stats bst;
    qslab_cache_stats(big, &bst);
    CHECKF(bp && bst.num_slabs == 1, "%lu slabs for one 256 KiB object", bst.num_slabs);
    qslab_cache_free(big, bp);
    /* and they follow the tunables */
    CHECK(qslab_tune("kmalloc-4096", "freebatch", "4") == 0);
    CHECK(qslab_tune("kmalloc-4096", "hiwater", "32") == 0);
    qslab_cache *c4 = qslab_cache_find("kmalloc-4096");
    CHECK(qslab_tune("kmalloc-4096", "hiwater", "8") == 0);
    CHECKF(c4->park == 2 && c4->refill == 4, "park %u refill %u", c4->park, c4->refill);
    return tu_done();
}
