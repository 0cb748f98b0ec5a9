/*
 * Many more threads than cores pass objects through a shared ring: most
 * objects are freed by a thread other than the one that allocated them.
 * Objects come from several caches of odd sizes and alignments, from
 * qslab_malloc of random sizes and from qslab_aligned_alloc, and some are
 * grown or shrunk with qslab_realloc on the way.  Every object is stamped at
 * allocation (owner, kind, sequence number, size, and a pattern derived
 * from them all) and verified before it is freed.  At the end the
 * caches' counters match what the threads did and every cache is destroyed.
 *
 * Deterministic seeds: one xorshift state per thread, seeded by its index
 * (the interleaving still varies from run to run).
 */
#include <pthread.h>
#include <qslab.h>

#include "../testutil.h"

#define NTHREADS 48
#define RING 4096
#define HDR 16 /* tag, size */

struct kind {
    const char *name;
    size_t size, align;
    unsigned long flags;
    size_t want_align; /* alignment every object must have */
    qslab_cache *c;
};

static struct kind kinds[] = {
    {"t-ring-24", 24, 0, 0, 8, NULL},
    {"t-ring-40a16", 40, 16, 0, 16, NULL},
    {"t-ring-100hw", 100, 0, QSLAB_HWCACHE_ALIGN, 64, NULL},
    {"t-ring-136", 136, 8, 0, 8, NULL},
    {"t-ring-250a32", 250, 32, 0, 32, NULL},
    {"t-ring-1000a128", 1000, 128, 0, 128, NULL},
    {"t-ring-3000a512", 3000, 512, 0, 512, NULL},
    {"t-ring-4000a4k", 4000, 4096, 0, 4096, NULL},
    {"t-ring-9000", 9000, 0, 0, 8, NULL},
};
#define NCACHES (int)(sizeof kinds / sizeof kinds[0])
#define K_MALLOC NCACHES       /* qslab_malloc, random size */
#define K_ALIGNED (NCACHES + 1) /* qslab_aligned_alloc */
#define NKINDS (NCACHES + 2)

static void *ring[RING];

struct worker {
    pthread_t t;
    int id;
    unsigned long allocs[NKINDS]; /* per kind */
    unsigned long bad, reallocs, failed;
};

/* ---- stamps ---- */

static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t make_tag(int owner, int kind, uint64_t seq)
{
    return (uint64_t)owner << 48 | (uint64_t)kind << 40 | (seq & 0xFFFFFFFFFFULL);
}
static inline int tag_owner(uint64_t tag)
{
    return (int)(tag >> 48);
}
static inline int tag_kind(uint64_t tag)
{
    return (int)(tag >> 40 & 0xff);
}

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void store64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* The pattern after the header: the 8-byte word at offset i (a multiple of
 * 8) is mix(key ^ i), the key made of the tag and the size, so that a
 * changed tag or size word shows as a changed body (no checksum: that was
 * a third and fourth pass over every object, most of this test's time under
 * TSan); a tail shorter than a word holds the first bytes of that word. */
static inline uint64_t body_key(uint64_t tag, size_t size)
{
    return tag ^ mix(size);
}

static inline unsigned char pattern_byte(uint64_t key, size_t i)
{
    uint64_t word = mix(key ^ (i & ~(size_t)7));
    unsigned char b[8];
    memcpy(b, &word, 8);
    return b[i & 7];
}

static void fill_body(unsigned char *p, size_t from, size_t size, uint64_t key)
{
    size_t i = from; /* a multiple of 8 */
    for (; i + 8 <= size; i += 8)
        store64(p + i, mix(key ^ i));
    for (; i < size; i++)
        p[i] = pattern_byte(key, i);
}

/* Offset of the first byte in [from, to) that differs from the pattern, or to. */
static size_t check_body(const unsigned char *p, size_t from, size_t to, uint64_t key)
{
    size_t i = from;
    for (; i + 8 <= to; i += 8)
        if (load64(p + i) != mix(key ^ i))
            break;
    for (; i < to; i++)
        if (p[i] != pattern_byte(key, i))
            return i;
    return to;
}

static void stamp(unsigned char *p, size_t size, uint64_t tag)
{
    store64(p, tag);
    store64(p + 8, size);
    fill_body(p, HDR, size, body_key(tag, size));
}

/* Verify a stamped object; returns its size, 0 if bad (reported). */
static size_t verify(struct worker *w, const unsigned char *p, const char *where)
{
    uint64_t tag = load64(p);
    size_t size = load64(p + 8);
    int kind = tag_kind(tag), owner = tag_owner(tag);
    const char *why = NULL;
    if (owner >= NTHREADS || kind >= NKINDS)
        why = "bad tag";
    else if (kind < NCACHES && size != kinds[kind].size)
        why = "size does not match the cache";
    else if (size < HDR || size > ((size_t)8 << 20))
        why = "bad size";
    else if (kind < NCACHES && (uintptr_t)p % kinds[kind].want_align)
        why = "misaligned";
    else if (kind >= NCACHES && qslab_usable_size(p) < size)
        why = "usable size below the size asked";
    else if (check_body(p, HDR, size, body_key(tag, size)) != size)
        why = "pattern mismatch";
    if (!why)
        return size;
    if (w->bad++ < 5)
        tu_fail("thread %d, %s: object %p: %s (tag %#llx size %zu)", w->id, where, (const void *)p, why,
                (unsigned long long)tag, size);
    return 0;
}

/* ---- allocation ---- */

static size_t random_size(uint64_t *seed)
{
    uint64_t r = tu_rand(seed);
    if (r % 4096 == 0)
        return 262144 + (r >> 16) % TU_SCALE((size_t)4 << 20, 8);
    if (r % 64 == 0)
        return 8192 + (r >> 16) % 262144;
    return HDR + (r >> 16) % 2048;
}

static unsigned char *new_object(struct worker *w, uint64_t *seed, int kind, uint64_t seq)
{
    unsigned char *p;
    size_t size;
    if (kind < NCACHES) {
        size = kinds[kind].size;
        p = qslab_cache_alloc(kinds[kind].c);
    } else if (kind == K_MALLOC) {
        size = random_size(seed);
        p = qslab_malloc(size);
    } else {
        size_t align = (size_t)1 << (tu_rand(seed) % 13); /* 1 .. 4096 */
        size = HDR + tu_rand(seed) % 5000;
        p = qslab_aligned_alloc(align, size);
        if (p && (uintptr_t)p % align) {
            w->bad++;
            tu_fail("aligned_alloc(%zu, %zu) = %p", align, size, (void *)p);
        }
    }
    if (!p) {
        w->failed++;
        return NULL;
    }
    w->allocs[kind]++;
    stamp(p, size, make_tag(w->id, kind, seq));
    return p;
}

static void free_object(unsigned char *p)
{
    int kind = tag_kind(load64(p));
    if (kind < NCACHES)
        qslab_cache_free(kinds[kind].c, p);
    else
        qslab_free(p);
}

/* Grow or shrink a malloc object, check the kept prefix, stamp it anew. */
static unsigned char *resize(struct worker *w, uint64_t *seed, unsigned char *p, size_t old, uint64_t seq)
{
    uint64_t tag = load64(p);
    size_t want = random_size(seed);
    unsigned char *q = qslab_realloc(p, want);
    if (!q) {
        w->failed++;
        return p;
    }
    w->reallocs++;
    size_t keep = old < want ? old : want;
    if (load64(q) != tag || check_body(q, HDR, keep, body_key(tag, old)) != keep) {
        if (w->bad++ < 5)
            tu_fail("thread %d: realloc %zu -> %zu lost contents", w->id, old, want);
    }
    stamp(q, want, make_tag(w->id, K_MALLOC, seq));
    return q;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = tu_seed((uint64_t)w->id + 100);
    /* With every cache a debug cache (QSLAB_DEBUG=FZPU), an aligned
     * allocation is mapped (kmalloc.c class_aligns: 34,000 mmaps and 72,000
     * munmaps in a run of the normal build), and TSan clears its metadata
     * of every range unmapped: about 1 ms of CPU an operation there.  So 200
     * iterations a thread under TSan with FZPU (9,600 operations; 800 took
     * 25 s alone, 43 s of CPU), 800 under FZPU elsewhere. */
    int iters = (int)tu_scale_debug(TU_SCALE(20000, 5), TU_TSAN ? 20 : 5);
    uint64_t seq = 0;
    for (int it = 0; it < iters; it++) {
        uint64_t r = tu_rand(&seed);
        unsigned op = r % 100;
        if (op < 70) {
            /* New object into the ring; whatever was there is freed here. */
            int kind = (int)((r >> 8) % NKINDS);
            unsigned char *p = new_object(w, &seed, kind, ++seq);
            if (!p)
                continue;
            unsigned char *old = __atomic_exchange_n(&ring[(r >> 20) % RING], p, __ATOMIC_ACQ_REL);
            if (old && verify(w, old, "ring"))
                free_object(old);
        } else if (op < 85) {
            /* Take one out; maybe resize it and put it back. */
            unsigned char *p = __atomic_exchange_n(&ring[(r >> 20) % RING], NULL, __ATOMIC_ACQ_REL);
            if (!p)
                continue;
            size_t size = verify(w, p, "taken");
            if (!size)
                continue; /* leak it: it is corrupt */
            if (tag_kind(load64(p)) == K_MALLOC && (r >> 40) % 2) {
                p = resize(w, &seed, p, size, ++seq);
                p = __atomic_exchange_n(&ring[(r >> 20) % RING], p, __ATOMIC_ACQ_REL);
                if (p && verify(w, p, "ring after resize"))
                    free_object(p);
            } else {
                free_object(p);
            }
        } else {
            /* A local burst: LIFO reuse in one thread. */
            enum { B = 32 };
            unsigned char *v[B];
            int kind = (int)((r >> 8) % NKINDS), n = 1 + (int)((r >> 16) % B);
            for (int i = 0; i < n; i++)
                v[i] = new_object(w, &seed, kind, ++seq);
            for (int pass = 1; pass >= 0; pass--) /* odd indices down, then even up */
                for (int j = 0; j < n; j++) {
                    int i = pass ? n - 1 - j : j;
                    if (v[i] && i % 2 == pass && verify(w, v[i], "burst"))
                        free_object(v[i]);
                }
        }
    }
    return NULL;
}

int main(void)
{
    for (int k = 0; k < NCACHES; k++) {
        kinds[k].c = qslab_cache_create(kinds[k].name, kinds[k].size, kinds[k].align, kinds[k].flags, NULL);
        CHECKF(kinds[k].c != NULL, "create %s", kinds[k].name);
        if (!kinds[k].c)
            return tu_done();
    }
    /* kmalloc caches and the large path: live counts to compare at the end. */
    enum { NKM = 25 };
    qslab_cache *km[NKM];
    unsigned long km_live[NKM];
    for (int i = 0; i < NKM; i++) {
        static const size_t small[] = {8, 16, 32, 64, 96, 128, 192, 256};
        char name[40];
        snprintf(name, sizeof name, "kmalloc-%zu", i < 8 ? small[i] : (size_t)512 << (i - 8));
        struct qslab_cache_stats st;
        km[i] = qslab_cache_find(name);
        CHECKF(km[i] != NULL, "no cache %s", name);
        km_live[i] = km[i] && qslab_cache_stats(km[i], &st) == 0 ? st.active_objs : 0;
    }
    struct qslab_large_stats large0, large1;
    qslab_large_stats(&large0);

    static struct worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].t, NULL, run, &w[i])) {
            tu_fail("pthread_create %d", i);
            return tu_done();
        }
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(w[i].t, NULL);

    struct worker mainw = {.id = 0};
    for (int i = 0; i < RING; i++)
        if (ring[i] && verify(&mainw, ring[i], "drain"))
            free_object(ring[i]);

    unsigned long bad = mainw.bad, allocs[NKINDS] = {0}, reallocs = 0, failed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        bad += w[i].bad;
        reallocs += w[i].reallocs;
        failed += w[i].failed;
        for (int k = 0; k < NKINDS; k++)
            allocs[k] += w[i].allocs[k];
    }
    CHECKF(bad == 0, "%lu corrupt objects", bad);
    CHECKF(failed == 0, "%lu allocations failed", failed);

    unsigned long total = 0;
    for (int k = 0; k < NCACHES; k++) {
        struct qslab_cache_stats st;
        CHECK(qslab_cache_stats(kinds[k].c, &st) == 0);
        total += st.alloc;
        CHECKF(st.alloc == allocs[k] && st.free == st.alloc && st.active_objs == 0,
               "%s: counted %lu allocs %lu frees %lu active; threads made %lu", kinds[k].name, st.alloc, st.free,
               st.active_objs, allocs[k]);
        CHECKF(qslab_cache_destroy(kinds[k].c) == 0, "destroy %s", kinds[k].name);
    }
    for (int i = 0; i < NKM; i++) {
        struct qslab_cache_stats st;
        if (km[i] && qslab_cache_stats(km[i], &st) == 0)
            CHECKF(st.active_objs == km_live[i], "%s: %lu live, %lu before", qslab_cache_name(km[i]), st.active_objs,
                   km_live[i]);
    }
    qslab_large_stats(&large1);
    CHECKF(large1.live == large0.live && large1.alloc - large0.alloc == large1.free - large0.free,
           "large: live %lu (was %lu), %lu allocs %lu frees", large1.live, large0.live, large1.alloc - large0.alloc,
           large1.free - large0.free);
    printf("%d threads: %lu cache objects, %lu malloc, %lu aligned, %lu reallocs\n", NTHREADS, total,
           allocs[K_MALLOC], allocs[K_ALIGNED], reallocs);
    return tu_done();
}
