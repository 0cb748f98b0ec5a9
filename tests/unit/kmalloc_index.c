/*
 * The inline class computation (fastpath.h) against the caches' object
 * sizes, for every size up to 64 KiB and around every class boundary up to
 * 32 MiB: each size gets the smallest class that holds it, for qslab_malloc
 * (8-byte minimum) and for the drop-in's malloc (16-byte minimum).
 */
#include "fastpath.h"

#include "../testutil.h"

static size_t class_bytes(unsigned i)
{
    return qs_kmalloc_caches[i].obj_size;
}

static int check(size_t size, const uint8_t *table, size_t min)
{
    unsigned i = qs_kmalloc_index(size, table);
    size_t want = size < min ? min : size;
    if (i >= QS_KMALLOC_CLASSES)
        return tu_fail("size %zu (min %zu): class %u out of range", size, min, i), 0;
    if (class_bytes(i) < want || (i > 0 && class_bytes(i - 1) >= want))
        return tu_fail("size %zu (min %zu): class %u, kmalloc-%zu", size, min, i, class_bytes(i)), 0;
    if (qs_kmalloc_caches[i].id != i)
        return tu_fail("kmalloc-%zu has id %u, class %u", class_bytes(i), qs_kmalloc_caches[i].id, i), 0;
    return 1;
}

int main(void)
{
    qslab_free(qslab_malloc(1)); /* initialise */
    int bad = 0;
    for (size_t s = 0; s <= 65536; s++) {
        bad += !check(s, qs_kmalloc_small_index, 1);
        bad += !check(s, qs_kmalloc_small_index16, 16);
        if (bad > 10)
            break;
    }
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES && bad <= 10; i++)
        for (long d = -2; d <= 2; d++) {
            size_t s = class_bytes(i) + (size_t)d;
            if (s > QS_KMALLOC_MAX) /* mapped directly, no class */
                continue;
            bad += !check(s, qs_kmalloc_small_index, 1);
            bad += !check(s, qs_kmalloc_small_index16, 16);
        }
    CHECKF(bad == 0, "%d sizes in the wrong class", bad);
    CHECK(class_bytes(0) == 8 && class_bytes(QS_KMALLOC_CLASSES - 1) == QS_KMALLOC_MAX);
    return tu_done();
}
