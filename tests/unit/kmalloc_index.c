/*
 * The inline class computation (fastpath.h) against the caches' object
 * sizes, for every size up to 32 MiB and around every class boundary: each
 * size gets the smallest class that holds it, for qslab_malloc (8-byte
 * minimum) and for the drop-in's malloc (16-byte minimum); and no request
 * from 128 bytes to 32 MiB wastes more than an eighth of its block
 * (kmalloc.c: less than a ninth, just past each power of two), none from
 * 2 KiB to 8 KiB a sixteenth, none from 1 KiB to 2 KiB a thirty-second.
 */
#include "api/kmalloc.h"
#include "api/api.h"

#include <string.h>

#include "../testutil.h"

static size_t class_bytes(unsigned i)
{
    return qs_kmalloc_bytes[i];
}

static int check(size_t size, const uint8_t *table, size_t min)
{
    unsigned i = qs_kmalloc_index(size, table);
    size_t want = size < min ? min : size;
    if (i >= QS_KMALLOC_CLASSES)
        return tu_fail("size %zu (min %zu): class %u out of range", size, min, i), 0;
    if (class_bytes(i) < want || (i > 0 && class_bytes(i - 1) >= want))
        return tu_fail("size %zu (min %zu): class %u, kmalloc-%zu", size, min, i, class_bytes(i)), 0;
    return 1;
}

int main(void)
{
    qslab_free(qslab_malloc(1)); /* initialise */
    int bad = 0;
    size_t worst_size = 1, worst_block = 1; /* the largest share of its block wasted */
    for (size_t s = 0; s <= QS_KMALLOC_MAX && bad <= 10; s++) {
        bad += !check(s, qs_kmalloc_small_index, 1);
        bad += !check(s, qs_kmalloc_small_index16, 16);
        if (s < 128)
            continue;
        size_t b = class_bytes(qs_kmalloc_index(s, qs_kmalloc_small_index16));
        if ((b - s) * worst_block > (worst_block - worst_size) * b) { /* a larger share */
            worst_size = s;
            worst_block = b;
        }
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
    /* each class's cache, made on its first use: id i, its name, its size */
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES; i++) {
        qslab_cache *c = qs_kmalloc_cache(i);
        char name[QS_NAME_MAX];
        CHECKF(c && c == qs_kmalloc_cache_of[i] && c != &qs_kmalloc_unmade, "class %u: cache %p", i,
               (void *)c);
        CHECKF(c->id == i && c->obj_size == class_bytes(i) && c->is_kmalloc &&
                   strcmp(c->name, qs_kmalloc_class_name(i, name, sizeof name)) == 0,
               "class %u: id %u, %zu bytes, name %s", i, c->id, c->obj_size, c->name);
        CHECKF(qs_kmalloc_class_named(name, strlen(name)) == (int)i, "%s: class %d", name,
               qs_kmalloc_class_named(name, strlen(name)));
    }
    CHECK(class_bytes(0) == 8 && class_bytes(QS_KMALLOC_CLASSES - 1) == QS_KMALLOC_MAX);
    /* the bound: at most an eighth of the block (the worst is 2^k + 1 in a
     * block of 2^k + 2^k/8: 2^k/8 - 1 bytes, a ninth less a little) */
    CHECKF((worst_block - worst_size) * 8 <= worst_block,
           "malloc(%zu) gets %zu bytes: %zu wasted, more than an eighth", worst_size, worst_block,
           worst_block - worst_size);
    CHECKF(((worst_size - 1) & (worst_size - 2)) == 0,
           "the worst waste is at %zu, not just past a power of two", worst_size);
    /* from 1 KiB to 2 KiB, thirty-two classes per power of two: less than a
     * thirty-third wasted (2^k + 1 in a block of 2^k + 2^k/32); from 2 KiB
     * to 8 KiB, sixteen: less than a seventeenth */
    for (size_t s = 1025; s <= 8192; s++) {
        size_t b = class_bytes(qs_kmalloc_index(s, qs_kmalloc_small_index16));
        size_t part = s <= 2048 ? 32 : 16;
        CHECKF((b - s) * part < b, "malloc(%zu) gets %zu bytes: a %zu-th or more wasted", s, b, part);
    }
    CHECKF(class_bytes(qs_kmalloc_index(1296, qs_kmalloc_small_index16)) == 1312,
           "SQLite's 1,296-byte page buffer gets %zu bytes",
           class_bytes(qs_kmalloc_index(1296, qs_kmalloc_small_index16)));
    /* classes up to 1 KiB are multiples of 8, up to 32 KiB of 32: the tables' steps */
    for (unsigned i = 0; i < QS_KMALLOC_CLASSES; i++) {
        size_t b = class_bytes(i);
        CHECKF(b > 1024 || b % 8 == 0, "kmalloc-%zu is not a multiple of 8", b);
        CHECKF(b <= 1024 || b > 32768 || b % 32 == 0, "kmalloc-%zu is not a multiple of 32", b);
        CHECKF(i < 1 || b % 16 == 0, "kmalloc-%zu breaks malloc's 16-byte alignment", b);
    }
    return tu_done();
}
