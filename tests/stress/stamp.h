/*
 * stamp.h - stamped objects for the stress tests (migrate.c, signals.c):
 * every object is filled with a pattern made of its address, a tag (the
 * thread and a sequence number) and words derived from both, and checked
 * before it is freed, so two owners of one object, or a write by the
 * allocator into a live object, show as a broken stamp at a known offset.
 */
#ifndef QSLAB_TEST_STAMP_H
#define QSLAB_TEST_STAMP_H

#include <stdint.h>
#include <string.h>

enum { K_CACHE, K_KMALLOC };

struct obj {
    unsigned char *p;
    uint64_t tag;
    uint32_t size;
    uint32_t kind;
};

static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* The stamp of an object at p with tag: word 0 the address, word 1 the tag,
 * then a block of STAMP_BLOCK bytes of words derived from both (each word
 * differs), repeated to the object's end (the last copy cut there).  Made
 * once per stamp and per check, then written and compared with memcpy and
 * memcmp a block at a time: a 4 KiB object costs 64 copies, not 512 hashes
 * and stores (under TSan: 64 range accesses, not 512 instrumented ones).
 * Another owner's stamp (other address or tag) differs in every word; a
 * write by the allocator into a live object shows at its offset. */
enum { STAMP_HEAD = 16, STAMP_BLOCK = 64 };

static inline void stamp_template(const unsigned char *p, uint64_t tag,
                                  unsigned char tpl[STAMP_HEAD + STAMP_BLOCK])
{
    uint64_t w[2 + STAMP_BLOCK / 8];
    w[0] = (uint64_t)(uintptr_t)p;
    w[1] = tag;
    uint64_t k = mix(tag ^ (uint64_t)(uintptr_t)p);
    for (size_t i = 0; i < STAMP_BLOCK / 8; i++)
        w[2 + i] = mix(k + i);
    memcpy(tpl, w, sizeof w);
}

/* The template's bytes for the object's bytes [off, off + n): n is at most
 * what stays of the head, or of a block. */
static inline const unsigned char *stamp_part(const unsigned char *tpl, size_t off, size_t size,
                                              size_t *n)
{
    size_t left = size - off, room;
    const unsigned char *from;
    if (off < STAMP_HEAD) {
        from = tpl + off;
        room = STAMP_HEAD + STAMP_BLOCK - off;
    } else {
        size_t in = (off - STAMP_HEAD) % STAMP_BLOCK;
        from = tpl + STAMP_HEAD + in;
        room = STAMP_BLOCK - in;
    }
    *n = left < room ? left : room;
    return from;
}

static void stamp(const struct obj *o)
{
    unsigned char tpl[STAMP_HEAD + STAMP_BLOCK];
    stamp_template(o->p, o->tag, tpl);
    size_t n;
    for (size_t off = 0; off < o->size; off += n) {
        const unsigned char *from = stamp_part(tpl, off, o->size, &n);
        memcpy(o->p + off, from, n);
    }
}

/* Offset of the first byte that differs from the stamp, or -1. */
static long stamp_diff(const struct obj *o)
{
    unsigned char tpl[STAMP_HEAD + STAMP_BLOCK];
    stamp_template(o->p, o->tag, tpl);
    size_t n;
    for (size_t off = 0; off < o->size; off += n) {
        const unsigned char *from = stamp_part(tpl, off, o->size, &n);
        if (memcmp(o->p + off, from, n) != 0)
            for (size_t k = 0; k < n; k++)
                if (o->p[off + k] != from[k])
                    return (long)(off + k);
    }
    return -1;
}

static inline uint64_t make_tag(int thread, uint64_t seq)
{
    return (uint64_t)(thread + 1) << 48 | (seq & 0xFFFFFFFFFFFFULL);
}

/* Check o (freed by thread `thread`, `where`) before it is freed; 0, after
 * reporting the first few (*bad counts them), if its stamp is broken.  The
 * includer has included testutil.h (tu_fail). */
static inline int stamp_verify(const struct obj *o, int thread, unsigned long *bad, const char *where)
{
    long off = stamp_diff(o);
    if (off < 0)
        return 1;
    uint64_t other;
    memcpy(&other, o->p + 8, 8);
    if ((*bad)++ < 5)
        tu_fail("thread %d, %s: %s object %p (%u bytes, stamped by thread %d seq %llu): stamp broken at "
                "offset %ld; word 1 now %#llx (thread %d seq %llu)",
                thread, where, o->kind == K_CACHE ? "cache" : "kmalloc", (void *)o->p, o->size,
                (int)(o->tag >> 48) - 1, (unsigned long long)(o->tag & 0xFFFFFFFFFFFFULL), off,
                (unsigned long long)other, (int)(other >> 48) - 1,
                (unsigned long long)(other & 0xFFFFFFFFFFFFULL));
    return 0;
}

/* The end of a stress run: the test cache counted exactly the threads'
 * allocations and frees, nothing is in use, the kmalloc caches km[0..nkm)
 * are back to their objects in use of km0[] and counted `km_made`
 * allocations as many frees, and every cache validates; the test cache
 * is destroyed.  The includer has included qslab.h and testutil.h. */
static inline void stamp_check_end(qslab_cache *cache, const char *name, unsigned long made,
                                   qslab_cache *const *km, const struct qslab_cache_stats *km0, int nkm,
                                   unsigned long km_made)
{
    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(cache, &st) == 0);
    CHECKF(st.alloc == made && st.free == st.alloc && st.active_objs == 0,
           "%s: counted %lu allocs %lu frees %lu in use; threads made %lu", name, st.alloc, st.free,
           st.active_objs, made);
    CHECKF(qslab_cache_validate(cache) == 0, "%s does not validate (see above)", name);
    unsigned long km_allocs = 0, km_frees = 0;
    for (int i = 0; i < nkm; i++) {
        struct qslab_cache_stats s;
        CHECK(qslab_cache_stats(km[i], &s) == 0);
        km_allocs += s.alloc - km0[i].alloc;
        km_frees += s.free - km0[i].free;
        CHECKF(s.active_objs == km0[i].active_objs, "%s: %lu objects in use, %lu before", qslab_cache_name(km[i]),
               s.active_objs, km0[i].active_objs);
        CHECKF(qslab_cache_validate(km[i]) == 0, "%s does not validate (see above)", qslab_cache_name(km[i]));
    }
    CHECKF(km_allocs == km_made && km_frees == km_allocs,
           "kmalloc-16..512: counted %lu allocs %lu frees; threads made %lu", km_allocs, km_frees, km_made);
    CHECKF(qslab_cache_destroy(cache) == 0, "destroy %s", name);
}

#endif /* QSLAB_TEST_STAMP_H */
