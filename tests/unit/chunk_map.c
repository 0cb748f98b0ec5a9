/*
 * unit: the chunk map tells qslab's memory from everything else in O(1).
 */
#include "../testutil.h"
#include "core/internal.h"

#include <stdlib.h>

static int global_var;

int main(void)
{
    int stack_var;
    void *libc = malloc(64);
    /* nothing of ours yet, or not at these addresses */
    CHECK(qs_chunk_of(NULL) == NULL);
    CHECK(qs_chunk_of(&stack_var) == NULL);
    CHECK(qs_chunk_of(&global_var) == NULL);
    CHECK(qs_chunk_of(libc) == NULL);
    CHECK(qs_chunk_of((void *)(uintptr_t)0xffff800000001000ull) == NULL); /* kernel half */
    CHECK(qs_chunk_of((void *)(uintptr_t)(1ull << 47)) == NULL);

    /* every object maps to a slab chunk whose slab descriptor holds it */
    static const size_t sizes[] = {8, 96, 192, 4096, 8192, 65536, 2 << 20, 8 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = qslab_malloc(sizes[i]);
        struct qs_chunk *ch = qs_chunk_of(p);
        CHECKF(ch && ch->magic == QS_CHUNK_MAGIC && ch->kind == QS_CHUNK_SLABS, "size %zu", sizes[i]);
        if (!ch)
            continue;
        struct qs_slab *s = qs_chunk_slab(ch, p);
        CHECK(s && s->cache && qs_slab_valid_obj(s, p));
        CHECK(s && !qs_slab_valid_obj(s, p + 4)); /* interior */
        CHECK(qs_chunk_of(p + sizes[i] - 1) == ch);
        /* the chunk header is the chunk's, but no slab's */
        CHECK(qs_chunk_of(ch) == ch && qs_chunk_slab(ch, ch) == NULL);
        /* the free path's lookup: the same descriptor from the unit map
         * alone for one-unit chunks; nothing for chunks of big slabs; and
         * no pointer into the header is an object */
        if (ch->map_size == QS_CHUNK_SIZE) {
            CHECK(qs_slab_fast(p) == s);
            CHECK(qs_slab_fast(p + sizes[i] - 1) == s);
            CHECK(qs_slab_fast(ch) != NULL && !qs_slab_valid_obj(qs_slab_fast(ch), ch));
            char *hdr_end = ch->data + ((size_t)ch->first_slot << (QS_PAGE_SHIFT + ch->order));
            CHECK(!qs_slab_valid_obj(qs_slab_fast(hdr_end - 8), hdr_end - 8));
        } else {
            CHECK(qs_slab_fast(p) == NULL);
        }
        /* the chunk is aligned and covers whole 4 MiB units */
        CHECK(((uintptr_t)ch & (QS_CHUNK_SIZE - 1)) == 0 && ch->map_size % QS_CHUNK_SIZE == 0);
        qslab_free(p);
    }

    /* large blocks: the block's start only */
    char *big = qslab_malloc(40u << 20);
    struct qs_chunk *ch = qs_chunk_of(big);
    CHECK(ch && ch->kind == QS_CHUNK_LARGE && ch->large_ptr == big);
    CHECK(qs_chunk_of(big + (39u << 20)) == ch);
    qslab_free(big);
    CHECK(qs_chunk_of(big) == NULL); /* unmapped and unregistered */

    /* a block of more than 254 units: interior units step back in 254s */
    size_t huge = (size_t)3 << 30; /* 3 GiB, never touched */
    char *h = qslab_malloc(huge);
    CHECK(h != NULL);
    if (h) {
        struct qs_chunk *hc = qs_chunk_of(h);
        CHECK(hc && hc->kind == QS_CHUNK_LARGE);
        for (size_t off = 0; off < huge; off += (size_t)97 << 20)
            if (qs_chunk_of(h + off) != hc)
                tu_fail("offset %zu MiB maps elsewhere", off >> 20);
        CHECK(qs_chunk_of(h + huge - 1) == hc);
        qslab_free(h);
        CHECK(qs_chunk_of(h + ((size_t)2 << 30)) == NULL);
    }
    free(libc);
    return tu_done();
}
