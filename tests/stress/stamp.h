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

/* Word i of an object at p stamped with tag. */
static inline uint64_t stamp_word(const unsigned char *p, uint64_t tag, size_t i)
{
    if (i == 0)
        return (uint64_t)(uintptr_t)p;
    if (i == 1)
        return tag;
    return mix(tag ^ (uint64_t)(uintptr_t)p ^ (uint64_t)i << 52);
}

static void stamp(const struct obj *o)
{
    size_t words = o->size / 8, i;
    for (i = 0; i < words; i++) {
        uint64_t w = stamp_word(o->p, o->tag, i);
        memcpy(o->p + 8 * i, &w, 8);
    }
    if (o->size % 8) {
        uint64_t w = stamp_word(o->p, o->tag, i);
        memcpy(o->p + 8 * i, &w, o->size % 8);
    }
}

/* Offset of the first byte that differs from the stamp, or -1. */
static long stamp_diff(const struct obj *o)
{
    for (size_t off = 0; off < o->size; off += 8) {
        uint64_t want = stamp_word(o->p, o->tag, off / 8), have = 0;
        size_t n = o->size - off < 8 ? o->size - off : 8;
        memcpy(&have, o->p + off, n);
        if (n < 8)
            want &= ((uint64_t)1 << (8 * n)) - 1;
        if (have != want) {
            for (size_t k = 0; k < n; k++)
                if ((unsigned char)(have >> 8 * k) != (unsigned char)(want >> 8 * k))
                    return (long)(off + k);
        }
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
