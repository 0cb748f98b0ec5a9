/* examples/kvcache.c - cooperative defragmentation (qslab_cache_set_mobility).
 *
 * A small in-memory key-value cache: a chained hash table whose entries
 * come from a qslab cache.  It loads many entries, deletes 90% of them at
 * random and shrinks the cache.  Every slab then keeps a few survivors, so
 * without mobility almost nothing can go back; with it, the cache offers
 * the survivors of its sparse slabs to the table, which moves them into
 * fuller slabs (copy, relink), and the emptied slabs go back to the OS.
 * Then every remaining key is looked up, and every deleted one must be
 * gone.
 *
 * The callbacks run in the thread that shrinks, or in qslab's purger
 * thread (which defragments a cache whose slabs hold more than twice its
 * live objects): the table's lock is taken by every operation and by each
 * callback.
 *
 * How the table recognises its entries by address (the callbacks' rule:
 * an address may hold a free object's bytes): each entry carries a tag,
 * its own address XOR a constant, stored when it joins the table and
 * cleared before it leaves, both with atomic stores; any other word there
 * (a free object's, a deleted entry's) does not match.
 *
 *     kvcache [ENTRIES] [--no-mobility]
 * prints one line: the entries kept, the live bytes (entries, buckets and
 * the bitmap of kept keys),
 * the growth of the resident set over the start before the shrink, right
 * after it and 1.5 s later (the retention rule's second passed), the
 * ratios to the live bytes, the shrink's time, the objects moved; then
 * the same as a "result key=value ..." line.  `make bench` runs it
 * (bench_defrag; bench/run.py, the section defrag).
 *
 * Build it against an installed qslab:
 *     cc -std=c11 kvcache.c $(pkg-config --cflags --libs qslab)
 */
#define _POSIX_C_SOURCE 200809L
#include <qslab.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_KEY 0x5a5aa5a5c3c33c3cULL

struct entry {
    struct entry *next;  /* the bucket's chain (word 0: a free object's link lies there) */
    _Atomic uint64_t tag; /* (uintptr_t)self ^ TAG_KEY while in the table, else 0 */
    uint64_t key, value;
    char text[32];        /* the value as text */
};

struct table {
    pthread_mutex_t lock;
    struct entry **buckets;
    size_t nbuckets;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static struct entry **slot_of(struct table *t, uint64_t key)
{
    return &t->buckets[mix(key) % t->nbuckets];
}

static struct entry *lookup(struct table *t, uint64_t key)
{
    for (struct entry *e = *slot_of(t, key); e; e = e->next)
        if (e->key == key)
            return e;
    return NULL;
}

static bool is_mine(struct entry *e)
{
    return atomic_load_explicit(&e->tag, memory_order_relaxed) == ((uintptr_t)e ^ TAG_KEY);
}

/* isolate: keep the addresses that are live entries of the table */
static size_t kv_isolate(qslab_cache *c, void **objs, size_t n, void *arg)
{
    (void)c;
    struct table *t = arg;
    size_t k = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++)
        if (is_mine(objs[i]))
            objs[k++] = objs[i];
    pthread_mutex_unlock(&t->lock);
    return k;
}

/* migrate: copy the entry to its new place and relink it; 0: moved */
static int kv_migrate(qslab_cache *c, void *old_obj, void *new_obj, void *arg)
{
    (void)c;
    struct table *t = arg;
    struct entry *old = old_obj, *nu = new_obj;
    pthread_mutex_lock(&t->lock);
    if (!is_mine(old)) {
        pthread_mutex_unlock(&t->lock);
        return -1; /* deleted since isolate: decline */
    }
    struct entry **pp = slot_of(t, old->key);
    while (*pp != old)
        pp = &(*pp)->next;
    nu->next = old->next;
    nu->key = old->key;
    nu->value = old->value;
    memcpy(nu->text, old->text, sizeof nu->text);
    atomic_store_explicit(&nu->tag, (uintptr_t)nu ^ TAG_KEY, memory_order_relaxed);
    *pp = nu;
    atomic_store_explicit(&old->tag, 0, memory_order_relaxed);
    pthread_mutex_unlock(&t->lock);
    return 0;
}

static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    size_t n = 200000;
    bool mobility = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-mobility") == 0)
            mobility = false;
        else if ((n = strtoul(argv[i], NULL, 10)) < 10) {
            fprintf(stderr, "kvcache: ENTRIES must be a number of at least 10, not '%s'\n", argv[i]);
            return 2;
        }
    }
    long rss0 = rss_bytes();
    qslab_cache *c = qslab_cache_create("kv_entry", sizeof(struct entry), 0, 0, NULL);
    struct table t = {.lock = PTHREAD_MUTEX_INITIALIZER, .nbuckets = n / 4 + 1};
    t.buckets = qslab_calloc(t.nbuckets, sizeof(*t.buckets));
    uint32_t *order = malloc(n * sizeof(*order)); /* the deletion order */
    uint8_t *kept = calloc(n / 8 + 1, 1);          /* bit i: key i kept */
    if (!c || !t.buckets || !order || !kept) {
        fprintf(stderr, "kvcache: out of memory\n");
        return 1;
    }
    if (mobility && qslab_cache_set_mobility(c, kv_isolate, kv_migrate, &t) != 0) {
        /* SLOB (QSLAB_FRONT=slob) has no slabs of one cache: run without */
        mobility = false;
    }
    for (size_t i = 0; i < n; i++) { /* load key i */
        struct entry *e = qslab_cache_alloc(c);
        if (!e) {
            fprintf(stderr, "kvcache: out of memory\n");
            return 1;
        }
        e->key = mix(i + 1) | 1;
        e->value = e->key * 7;
        snprintf(e->text, sizeof e->text, "v%llu", (unsigned long long)(e->key % 1000000));
        pthread_mutex_lock(&t.lock);
        struct entry **pp = slot_of(&t, e->key);
        e->next = *pp;
        atomic_store_explicit(&e->tag, (uintptr_t)e ^ TAG_KEY, memory_order_relaxed);
        *pp = e;
        pthread_mutex_unlock(&t.lock);
        order[i] = (uint32_t)i;
    }
    uint64_t r = 88172645463325252ULL; /* a random order; the first 90% are deleted */
    for (size_t i = n - 1; i > 0; i--) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t j = r % (i + 1);
        uint32_t k = order[i];
        order[i] = order[j];
        order[j] = k;
    }
    size_t gone = n - n / 10;
    for (size_t i = gone; i < n; i++)
        kept[order[i] / 8] |= (uint8_t)(1u << (order[i] % 8));
    for (size_t i = 0; i < gone; i++) {
        uint64_t key = mix((uint64_t)order[i] + 1) | 1;
        pthread_mutex_lock(&t.lock);
        struct entry **pp = slot_of(&t, key);
        while ((*pp)->key != key)
            pp = &(*pp)->next;
        struct entry *e = *pp;
        *pp = e->next;
        atomic_store_explicit(&e->tag, 0, memory_order_relaxed);
        pthread_mutex_unlock(&t.lock);
        qslab_cache_free(c, e);
    }
    free(order);
    long before = rss_bytes() - rss0;
    double t0 = now_ms();
    qslab_cache_shrink(c);
    double took = now_ms() - t0;
    long after = rss_bytes() - rss0;
    /* slabs that emptied while the shrink ran may wait for the retention
     * rule's second (warm slots, docs/design.md): the resident set once
     * it has passed */
    nanosleep(&(struct timespec){1, 500000000}, NULL);
    long settled = rss_bytes() - rss0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) { /* every key: kept ones found and right, deleted ones gone */
        uint64_t key = mix(i + 1) | 1;
        pthread_mutex_lock(&t.lock);
        struct entry *e = lookup(&t, key);
        bool ok = kept[i / 8] >> (i % 8) & 1 ? e && e->value == key * 7 && is_mine(e) : !e;
        pthread_mutex_unlock(&t.lock);
        bad += !ok;
    }
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    double live = (double)(n - gone) * sizeof(struct entry) + (double)t.nbuckets * sizeof(void *) +
                  (double)(n / 8 + 1);
    printf("kvcache: %s: %zu of %zu entries kept; live %.1f MiB; RSS growth %.1f MiB before "
           "shrink, %.1f MiB after (%.2fx live), %.1f MiB 1.5 s later (%.2fx live); shrink %.1f ms; "
           "moved %lu, declined %lu, slabs emptied %lu\n",
           mobility ? "mobility" : "no mobility", n - gone, n, live / 1048576.0,
           before / 1048576.0, after / 1048576.0, after / live, settled / 1048576.0,
           settled / live, took, st.defrag_moved,
           st.defrag_declined, st.defrag_slabs);
    /* the same numbers for bench/run.py */
    printf("result entries=%zu live_kib=%.0f before_kib=%ld after_kib=%ld settled_kib=%ld "
           "after_ratio=%.3f settled_ratio=%.3f shrink_ms=%.2f moved=%lu\n",
           n, live / 1024, before / 1024, after / 1024, settled / 1024, after / live,
           settled / live, took, st.defrag_moved);
    if (bad) {
        fprintf(stderr, "kvcache: %zu keys wrong after the shrink\n", bad);
        return 1;
    }
    return 0;
}
