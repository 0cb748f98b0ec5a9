/*
 * stamp.h - stamped objects for the stress tests (migrate.c, signals.c):
 * every object is filled with a pattern made of its address, a tag (the
 * thread and a sequence number) and words derived from both, and checked
 * before it is freed, so two owners of one object, or a write by the
 * allocator into a live object, show as a broken stamp at a known offset.
 * Also what both tests share around them: each thread's tally, the
 * exchange that passes objects between threads, the kmalloc caches their
 * sizes land in.  The includer has included qslab.h and testutil.h.
 */
#ifndef QSLAB_TEST_STAMP_H
#define QSLAB_TEST_STAMP_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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

/* A kmalloc object's size, drawn from STAMP_KM_MIN..STAMP_KM_MAX bytes. */
enum { STAMP_KM_MIN = 16, STAMP_KM_MAX = 512 };
static inline uint32_t stamp_km_size(uint64_t *seed)
{
    return STAMP_KM_MIN + (uint32_t)(tu_rand(seed) % (STAMP_KM_MAX - STAMP_KM_MIN + 1));
}

/* What a thread did with its objects (summed over the threads at the end). */
struct stamp_tally {
    int id;       /* the thread's number; -1: the main thread */
    uint64_t seq; /* the last sequence number it tagged */
    unsigned long allocs[2], frees, xfrees, bad, failed; /* allocs by kind; xfrees: other threads' */
};

/* Just after o->p was allocated (NULL: failed) for thread t: tag and stamp
 * it; 1, or 0 (counted) if the allocation failed. */
static inline int stamp_made(struct stamp_tally *t, struct obj *o)
{
    if (!o->p) {
        t->failed++;
        return 0;
    }
    t->allocs[o->kind]++;
    o->tag = make_tag(t->id, ++t->seq);
    stamp(o);
    return 1;
}

/* Just before thread t frees o: 1 if its stamp is intact (the free is
 * counted), 0 if broken (reported; the caller leaks the object). */
static inline int stamp_freeing(struct stamp_tally *t, const struct obj *o, const char *where)
{
    if (!stamp_verify(o, t->id, &t->bad, where))
        return 0;
    t->frees++;
    if ((int)(o->tag >> 48) - 1 != t->id)
        t->xfrees++;
    return 1;
}

/* sum += t */
static inline void stamp_tally_add(struct stamp_tally *sum, const struct stamp_tally *t)
{
    sum->allocs[0] += t->allocs[0];
    sum->allocs[1] += t->allocs[1];
    sum->frees += t->frees;
    sum->xfrees += t->xfrees;
    sum->bad += t->bad;
    sum->failed += t->failed;
}

/* The threads' sum: no broken stamp, no failed allocation, a free for
 * every allocation, some of them cross-thread. */
static inline void stamp_tally_check(const struct stamp_tally *sum)
{
    CHECKF(sum->bad == 0, "%lu objects with a broken stamp", sum->bad);
    CHECKF(sum->failed == 0, "%lu allocations failed", sum->failed);
    CHECKF(sum->frees == sum->allocs[0] + sum->allocs[1], "%lu frees for %lu allocations", sum->frees,
           sum->allocs[0] + sum->allocs[1]);
    CHECKF(sum->xfrees > 0, "no cross-thread free happened");
}

/* A slot of an exchange through which objects pass between threads. */
struct stamp_slot {
    pthread_mutex_t lock;
    struct obj o;
};

/* The locks of x[0..n), before the threads start. */
static inline void stamp_slots_init(struct stamp_slot *x, int n)
{
    for (int i = 0; i < n; i++)
        pthread_mutex_init(&x[i].lock, NULL);
}

/* Put o into slot x; what the slot held (p NULL: nothing). */
static inline struct obj stamp_swap(struct stamp_slot *x, struct obj o)
{
    pthread_mutex_lock(&x->lock);
    struct obj got = x->o;
    x->o = o;
    pthread_mutex_unlock(&x->lock);
    return got;
}

/* The kmalloc caches the objects of STAMP_KM_MIN..STAMP_KM_MAX bytes land
 * in, kmalloc-16 .. kmalloc-512, into km[], and their statistics now into
 * km0[]: 1, or 0 (CHECKed) if one cannot be found or read. */
enum { STAMP_NKM = 24 };
static inline int stamp_kmalloc_caches(qslab_cache *km[STAMP_NKM],
                                       struct qslab_cache_stats km0[STAMP_NKM])
{
    size_t sizes[STAMP_NKM] = {0};
    int n = 0;
    for (size_t s = STAMP_KM_MIN; s <= STAMP_KM_MAX && n < STAMP_NKM; s = sizes[n++] + 1)
        sizes[n] = tu_kmalloc_class(s);
    CHECKF(n == STAMP_NKM && sizes[STAMP_NKM - 1] == STAMP_KM_MAX, "%d classes from 16 to 512 bytes",
           n);
    for (int i = 0; i < STAMP_NKM; i++) {
        char name[32];
        snprintf(name, sizeof name, "kmalloc-%zu", sizes[i]);
        km[i] = qslab_cache_find(name);
        CHECKF(km[i] != NULL, "no cache %s", name);
        if (!km[i] || qslab_cache_stats(km[i], &km0[i]) != 0)
            return 0;
    }
    return 1;
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
