/*
 * unit: warm slots (page.c).  A destroyed cache's slabs stay resident in
 * the page layer and the next slab of the same (node, order) takes the
 * newest of them; a pointer into one is still a freed slab's (its free is
 * reported); qslab_trim gives every warm slot back at once, the purger
 * those warm for QS_WARM_MS, and no more than QS_WARM_LIMIT bytes are
 * ever warm.  The statistics report says how many bytes are warm.
 */
#include "../testutil.h"
#include "../front.h"
#include "internal.h"

#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { N = 64, SIZE = 256, MAXSLABS = N };

static size_t warm(void)
{
    return __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);
}

static bool resident(const void *p)
{
    unsigned char v = 0;
    CHECK(mincore((void *)((uintptr_t)p & ~(uintptr_t)(QS_PAGE_SIZE - 1)), QS_PAGE_SIZE, &v) == 0);
    return v & 1;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* A cache of N objects of SIZE bytes made and destroyed: its slabs' starts
 * in mem[] (distinct), how many returned. */
static unsigned make_and_destroy(const char *name, char **mem, void **one_obj)
{
    qslab_cache *c = qslab_cache_create(name, SIZE, 0, 0, NULL);
    CHECK(c != NULL);
    void *obj[N];
    unsigned n = 0;
    for (int i = 0; i < N; i++) {
        CHECK((obj[i] = qslab_cache_alloc(c)) != NULL);
        memset(obj[i], 0x5c, SIZE);
        struct qs_slab *s = qs_slab_lookup(obj[i]);
        if (!s) /* a guarded sample (QSLAB_GUARD_SAMPLE): no slab */
            continue;
        bool known = false;
        for (unsigned k = 0; k < n; k++)
            known |= mem[k] == s->mem;
        if (!known && n < MAXSLABS)
            mem[n++] = s->mem;
    }
    if (one_obj) /* an object of a slab */
        for (int i = 0; i < N; i++)
            if (qs_slab_lookup(obj[i]))
                *one_obj = obj[i];
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, obj[i]);
    CHECK(qslab_cache_destroy(c) == 0);
    return n;
}

static char out[16384];

static void report(void)
{
    tu_stderr_begin();
    qslab_stats_report(2);
    tu_stderr_end(out, sizeof out);
}

int main(void)
{
    tu_pin_one_cpu(); /* one node's pools: the next cache's slabs come from the same one */
    qslab_set_fatal_handler(tu_fatal_capture);
    qslab_cache *probe = qslab_cache_create("t-warm-probe", SIZE, 0, 0, NULL);
    CHECK(probe != NULL);
    if (tf_slob(probe)) { /* SLOB's pages are its own (slob.c keeps them) */
        tf_note("warm_slots", probe, "warm slots of destroyed caches");
        qslab_cache_destroy(probe);
        return tu_done();
    }
    unsigned order = probe->order;
    CHECK(qslab_cache_destroy(probe) == 0);
    qslab_trim();
    CHECKF(warm() == 0, "%zu bytes warm after qslab_trim", warm());

    /* a destroy keeps its slabs resident */
    char *mem[MAXSLABS];
    void *stale;
    unsigned n = make_and_destroy("t-warm-a", mem, &stale);
    size_t slab = qs_slab_bytes(order);
    CHECKF(n >= 1 && warm() == n * slab, "%zu bytes warm after a destroy of %u slabs of %zu", warm(), n,
           slab);
    for (unsigned k = 0; k < n; k++) {
        CHECKF(resident(mem[k]), "slab %u (%p) of the destroyed cache not resident", k, (void *)mem[k]);
        struct qs_slab *s = qs_slab_lookup(mem[k]);
        CHECK(s && s->cache == NULL && s->span == 0);
    }
    report();
    char line[128];
    snprintf(line, sizeof line, "Pages: %zu bytes warm (", warm());
    CHECKF(strstr(out, line) != NULL, "the report has no \"%s\":\n%s", line, out);

    /* a pointer into a warm slot is a freed slab's: reported, nothing changes */
    char s[32];
    qslab_free(stale);
    tu_check_fatal("free slab memory", tu_addr(s, stale));
    CHECK(warm() == n * slab);

    /* the next cache of that order takes the newest warm slot */
    qslab_cache *b = qslab_cache_create("t-warm-b", SIZE, 0, 0, NULL);
    CHECK(b != NULL && b->order == order);
    void *o = qslab_cache_alloc(b), *sampled[8];
    int nsampled = 0;
    while (o && !qs_slab_lookup(o) && nsampled < 8) { /* guarded samples have no slab */
        sampled[nsampled++] = o;
        o = qslab_cache_alloc(b);
    }
    CHECK(o != NULL && qs_slab_lookup(o) != NULL);
    while (nsampled)
        qslab_cache_free(b, sampled[--nsampled]);
    struct qs_slab *sb = qs_slab_lookup(o);
    bool reused = false;
    for (unsigned k = 0; k < n; k++)
        reused |= sb->mem == mem[k];
    CHECKF(reused && warm() == (n - 1) * slab, "new slab %p, one of the destroyed cache's: %d; %zu warm",
           (void *)sb->mem, reused, warm());
    CHECK(qslab_cache_validate(b) == 0);

    /* qslab_trim: every warm slot back at once */
    size_t before = warm();
    size_t back = qslab_trim();
    CHECKF(warm() == 0 && back >= before, "qslab_trim: %zu bytes back, %zu were warm, %zu still warm", back,
           before, warm());
    for (unsigned k = 0; k < n; k++)
        if (mem[k] != sb->mem)
            CHECKF(!resident(mem[k]), "slab %u (%p) resident after qslab_trim", k, (void *)mem[k]);
    report();
    CHECKF(strstr(out, "bytes warm") == NULL, "a warm line with nothing warm:\n%s", out);
    qslab_cache_free(b, o);
    CHECK(qslab_cache_destroy(b) == 0);
    qslab_trim();

    /* the purger: warm slots go back once QS_WARM_MS old, not before */
    const char *pv = getenv("QSLAB_PURGE");
    if (!(pv && pv[0] == '0')) {
        n = make_and_destroy("t-warm-c", mem, NULL);
        uint64_t t0 = now_ms();
        CHECK(warm() == n * slab);
        for (;;) {
            usleep(50000);
            size_t w = warm();
            uint64_t t = now_ms() - t0;
            if (t < QS_WARM_MS - 50)
                CHECKF(w == n * slab, "%zu bytes of %zu warm after %llu ms (given back before %d ms)", w,
                       n * slab, (unsigned long long)t, QS_WARM_MS);
            if (w == 0 || t > 10000)
                break;
        }
        CHECKF(warm() == 0, "%zu bytes warm %llu ms after the destroy", warm(),
               (unsigned long long)(now_ms() - t0));
        for (unsigned k = 0; k < n; k++)
            CHECKF(!resident(mem[k]), "slab %u (%p) resident after the purger", k, (void *)mem[k]);
    }

    /* the limit: a destroy of more than QS_WARM_LIMIT keeps no more */
    size_t big = (size_t)1 << 20, nbig = QS_WARM_LIMIT / big + 16;
    qslab_cache *d = qslab_cache_create("t-warm-big", big, 0, 0, NULL);
    CHECK(d != NULL);
    void **v = calloc(nbig, sizeof *v);
    CHECK(v != NULL);
    for (size_t i = 0; i < nbig; i++) {
        CHECK((v[i] = qslab_cache_alloc(d)) != NULL);
        memset(v[i], 1, 64); /* (the rest need not be faulted in) */
    }
    for (size_t i = 0; i < nbig; i++)
        qslab_cache_free(d, v[i]);
    CHECK(qslab_cache_destroy(d) == 0);
    CHECKF(warm() > 0 && warm() <= QS_WARM_LIMIT, "%zu bytes warm after a destroy of %zu MiB (limit %zu)",
           warm(), nbig, (size_t)QS_WARM_LIMIT);
    free(v);
    qslab_trim();
    CHECK(warm() == 0);
    CHECKF(tu_capture_calls() == 0, "unexpected reports: %s", tu_fatal_msg);
    return tu_done();
}
