/*
 * unit: warm slots and the retention rule (page.c).  Empty slabs no cache
 * keeps stay resident in the page layer, and the next slab of the same
 * (node, order), of any cache, takes the newest of them; a pointer into
 * one is still a freed slab's (its free is reported); qslab_trim gives
 * every warm slot back at once, the purger those warm for QS_WARM_MS.
 * They come from a cache's empty-slab FIFO past its limit, and from a
 * destroyed cache, which keeps them only within the retention cap: a
 * sixteenth of the bytes still in slabs (with nothing else in use, a destroy
 * gives everything back at once).  When the page layer hands out memory
 * that is not resident, an empty slab of that order on any cache's FIFO
 * serves instead, and the FIFOs and the warm pool together are first
 * brought down to the cap (fifo_cap: after a phase change); empty slabs
 * of 256 KiB and more of other orders go back once they lay unused
 * through a step of that growth.  The
 * statistics report says how many bytes are warm.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

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

static size_t slab_bytes_of(qslab_cache *c)
{
    return qs_slab_bytes(QS_LOAD(c->order));
}

static char out[16384];

static void report(void)
{
    tu_stderr_begin();
    qslab_stats_report(2);
    tu_stderr_end(out, sizeof out);
}

/* Live objects that hold `mib` MiB of slabs in a cache of their own: the
 * working set the retention cap is a sixteenth of. */
static qslab_cache *ballast(size_t mib, void ***objs, size_t *n)
{
    qslab_cache *c = qslab_cache_create("t-warm-ballast", 4096, 0, 0, NULL);
    CHECK(c != NULL);
    *n = (mib << 20) / 4096;
    *objs = calloc(*n, sizeof **objs);
    for (size_t i = 0; i < *n; i++) {
        CHECK(((*objs)[i] = qslab_cache_alloc(c)) != NULL);
        memset((*objs)[i], 3, 64);
    }
    return c;
}

static void ballast_free(qslab_cache *c, void **objs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        qslab_cache_free(c, objs[i]);
    free(objs);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* Bytes on every node's empty FIFO of c. */
static size_t fifo_bytes(qslab_cache *c)
{
    size_t b = 0;
    for (int i = 0; i < qs_nr_nodes; i++)
        b += qs_node_nr_empty(&c->nodes[i]) * slab_bytes_of(c);
    return b;
}

/* The cap over the FIFOs after a phase change: beside 40 MiB of slabs in
 * use (so the cap is the fraction, not the floor), 6 MiB of one cache's
 * empty slabs wait on its FIFO (no decay, no limit) while another cache,
 * of another order, grows the process by three steps; each step's walk
 * brings the FIFOs and the warm slots down to the cap, so after the last
 * they hold the cap and a slab at most. */
static void fifo_cap(void)
{
    qslab_trim();
    enum { NB = 32, NF = 96, NG = 4096 };
    qslab_cache *b = qslab_cache_create("t-cap-ballast", 1 << 20, 0, 0, NULL); /* a slab each */
    qslab_cache *f = qslab_cache_create("t-cap-fifo", 64 << 10, 0, 0, NULL);
    qslab_cache *g = qslab_cache_create("t-cap-grow", 20000, 0, 0, NULL);
    CHECK(b && f && g);
    if (tf_is(f, "slab") || QS_LOAD(f->order) == QS_LOAD(g->order)) { /* SLAB: its own free lists */
        tf_note("warm_slots", f, "the cap over the FIFOs");
        CHECK(qslab_cache_destroy(b) == 0 && qslab_cache_destroy(f) == 0 && qslab_cache_destroy(g) == 0);
        return;
    }
    CHECK(qslab_tune("t-cap-fifo", "empty_limit", "1048576") == 0);
    CHECK(qslab_tune("t-cap-fifo", "empty_decay_ms", "600000") == 0); /* the cap alone */
    CHECK(qslab_tune("t-cap-fifo", "stash_bytes", "0") == 0);         /* straight to the FIFO */
    void *bv[NB], *fv[NF], **gv = calloc(NG, sizeof *gv);
    CHECK(gv != NULL);
    for (int i = 0; i < NB; i++) { /* a 1 MiB slab each, one page of it touched */
        CHECK((bv[i] = qslab_cache_alloc(b)) != NULL);
        memset(bv[i], 6, 64);
    }
    for (int i = 0; i < NF; i++) {
        CHECK((fv[i] = qslab_cache_alloc(f)) != NULL);
        memset(fv[i], 7, 64);
    }
    for (int i = 0; i < NF; i++)
        qslab_cache_free(f, fv[i]);
    size_t kept = fifo_bytes(f), fslab = slab_bytes_of(f);
    size_t cap = qs_page_retain_cap();
    CHECKF(cap > QS_RETAIN_FLOOR && kept > cap + fslab, "%zu bytes on %s's FIFO, the cap %zu (floor %zu)",
           kept, f->name, cap, QS_RETAIN_FLOOR);
    unsigned long walks = QS_LOAD(*qs_node_walks), reclaims = QS_LOAD(*qs_node_reclaims);
    size_t ng = 0;
    while (QS_LOAD(*qs_node_walks) < walks + 3 && ng < NG) { /* (a busy qs_global skips a walk) */
        CHECK((gv[ng] = qslab_cache_alloc(g)) != NULL);
        memset(gv[ng++], 8, 64);
    }
    cap = qs_page_retain_cap();
    CHECKF(QS_LOAD(*qs_node_walks) >= walks + 3 && QS_LOAD(*qs_node_reclaims) > reclaims,
           "%zu blocks of %s: %lu walks, %lu of them over the cap", ng, g->name,
           QS_LOAD(*qs_node_walks) - walks, QS_LOAD(*qs_node_reclaims) - reclaims);
    CHECKF(fifo_bytes(f) + warm() <= cap + fslab,
           "%zu bytes on %s's FIFO and %zu warm after the process grew: over the cap %zu (1/%d of %zu "
           "bytes of slabs) and a slab", fifo_bytes(f), f->name, warm(), cap, QS_RETAIN_FRACTION,
           __atomic_load_n(qs_page_slab_bytes, __ATOMIC_RELAXED));
    while (ng)
        qslab_cache_free(g, gv[--ng]);
    free(gv);
    for (int i = 0; i < NB; i++)
        qslab_cache_free(b, bv[i]);
    CHECK(qslab_cache_destroy(g) == 0 && qslab_cache_destroy(f) == 0 && qslab_cache_destroy(b) == 0);
    qslab_trim();
}

/* CYCLING (node.c): two caches of two orders take and free their working
 * sets in turn, 3 MiB each, beside the 8 MiB ballast (a cap of 1 MiB).
 * Round 0: a's slabs wait on its FIFO while b grows, and the walks cut
 * a's FIFO to the cap.  Round 1: a faults in what was cut (its growth
 * cuts b's FIFO), uses it and frees it: its FIFO is cycling now, and b's
 * growth leaves it whole.  Round 2: neither grows, both FIFOs stay whole.
 * The rate is lowered for the test (the sanitizer builds are slower); the
 * hold is not, so a run slower than half of it says so and checks
 * nothing. */
static void fifo_cycle(void)
{
    qslab_trim();
    enum { NA = 12288, NB = 3072 }; /* 3 MiB of 256 and of 1,024-byte blocks */
    qslab_cache *a = qslab_cache_create("t-cyc-a", 256, 0, 0, NULL);
    qslab_cache *b = qslab_cache_create("t-cyc-b", 1024, 0, 0, NULL);
    CHECK(a && b);
    if (tf_is(a, "slab") || QS_LOAD(a->order) == QS_LOAD(b->order)) {
        tf_note("warm_slots", a, "a cycling FIFO");
        CHECK(qslab_cache_destroy(a) == 0 && qslab_cache_destroy(b) == 0);
        return;
    }
    for (int k = 0; k < 2; k++) {
        const char *name = (k ? b : a)->name;
        CHECK(qslab_tune(name, "empty_limit", "1048576") == 0);
        CHECK(qslab_tune(name, "empty_decay_ms", "600000") == 0); /* the cap alone */
        CHECK(qslab_tune(name, "stash_bytes", "0") == 0);         /* straight to the FIFO */
    }
    uint64_t rate = QS_LOAD(*qs_node_cut_rate);
    QS_STORE(*qs_node_cut_rate, (uint64_t)1 << 20);
    void **av = calloc(NA, sizeof *av), **bv = calloc(NB, sizeof *bv);
    CHECK(av && bv);
    size_t a_fifo = 0, b_fifo = 0;
    uint64_t t0 = tu_now_ms();
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NA; i++) {
            CHECK((av[i] = qslab_cache_alloc(a)) != NULL);
            memset(av[i], 9, 64);
        }
        /* past half the hold, a cycling FIFO may be cut again: not checked */
        bool timely = tu_now_ms() - t0 < QS_CUT_HOLD_MS / 2;
        if (round == 2 && timely) /* a took its working set from its FIFO: nothing grew */
            CHECKF(fifo_bytes(b) == b_fifo, "round %d: %zu bytes on %s's FIFO after %s took its working set, "
                   "%zu before", round, fifo_bytes(b), b->name, a->name, b_fifo);
        for (int i = 0; i < NA; i++)
            qslab_cache_free(a, av[i]);
        a_fifo = fifo_bytes(a);
        for (int i = 0; i < NB; i++) {
            CHECK((bv[i] = qslab_cache_alloc(b)) != NULL);
            memset(bv[i], 10, 64);
        }
        if (round == 0)
            CHECKF(fifo_bytes(a) < a_fifo, "round 0: %zu bytes on %s's FIFO after %s grew by 3 MiB, %zu "
                   "before: not cut to the cap %zu", fifo_bytes(a), a->name, b->name, a_fifo,
                   qs_page_retain_cap());
        else if (tu_now_ms() - t0 < QS_CUT_HOLD_MS / 2)
            CHECKF(fifo_bytes(a) == a_fifo, "round %d: %zu bytes on %s's FIFO after %s grew, %zu before: "
                   "a cycling FIFO cut", round, fifo_bytes(a), a->name, b->name, a_fifo);
        else
            fprintf(stderr, "warm_slots: round %d after %llu ms, past half the hold: not checked\n", round,
                    (unsigned long long)(tu_now_ms() - t0));
        for (int i = 0; i < NB; i++)
            qslab_cache_free(b, bv[i]);
        b_fifo = fifo_bytes(b);
    }
    QS_STORE(*qs_node_cut_rate, rate);
    free(av);
    free(bv);
    CHECK(qslab_cache_destroy(a) == 0 && qslab_cache_destroy(b) == 0);
    qslab_trim();
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
    size_t slab = qs_slab_bytes(order);

    /* with nothing else in use, a destroy gives its slabs back at once */
    char *mem[MAXSLABS];
    unsigned n = make_and_destroy("t-warm-0", mem, NULL);
    CHECKF(n >= 1 && warm() == 0, "%zu bytes warm after a destroy of %u slabs, nothing else in use",
           warm(), n);
    for (unsigned k = 0; k < n; k++)
        CHECKF(!resident(mem[k]), "slab %u (%p) of the destroyed cache resident", k, (void *)mem[k]);

    /* with 8 MiB in use elsewhere (a cap of 1 MiB), a small destroy keeps
     * its slabs resident */
    void **bobjs;
    size_t nb;
    qslab_cache *bal = ballast(8, &bobjs, &nb);
    void *stale;
    n = make_and_destroy("t-warm-a", mem, &stale);
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
        uint64_t t0 = tu_now_ms();
        CHECK(warm() == n * slab);
        for (;;) {
            usleep(50000);
            size_t w = warm();
            uint64_t t = tu_now_ms() - t0;
            if (t < QS_WARM_MS - 50)
                CHECKF(w == n * slab, "%zu bytes of %zu warm after %llu ms (given back before %d ms)", w,
                       n * slab, (unsigned long long)t, QS_WARM_MS);
            if (w == 0 || t > 10000)
                break;
        }
        CHECKF(warm() == 0, "%zu bytes warm %llu ms after the destroy", warm(),
               (unsigned long long)(tu_now_ms() - t0));
        for (unsigned k = 0; k < n; k++)
            CHECKF(!resident(mem[k]), "slab %u (%p) resident after the purger", k, (void *)mem[k]);
    }

    /* the cap at a destroy: 24 MiB of 64 KiB objects destroyed beside the
     * 8 MiB ballast keep at most a sixteenth of the ballast's slabs warm */
    size_t big = (size_t)64 << 10, nbig = ((size_t)24 << 20) / big;
    qslab_cache *d = qslab_cache_create("t-warm-big", big, 0, 0, NULL);
    CHECK(d != NULL && qslab_tune("t-warm-big", "empty_limit", "1048576") == 0); /* all in its FIFO */
    void **v = calloc(nbig, sizeof *v);
    CHECK(v != NULL);
    for (size_t i = 0; i < nbig; i++) {
        CHECK((v[i] = qslab_cache_alloc(d)) != NULL);
        memset(v[i], 1, 64); /* (the rest need not be faulted in) */
    }
    for (size_t i = 0; i < nbig; i++)
        qslab_cache_free(d, v[i]);
    free(v);
    CHECK(qslab_cache_destroy(d) == 0);
    size_t held = __atomic_load_n(qs_page_slab_bytes, __ATOMIC_RELAXED); /* what stays in slabs */
    CHECKF(warm() > 0 && warm() <= held / QS_RETAIN_FRACTION + big, "%zu bytes warm after a destroy of %zu MiB beside "
           "%zu bytes of slabs in use", warm(), nbig * big >> 20, held);
    qslab_trim();
    CHECK(warm() == 0);

    /* a FIFO's overflow: freed past the cache's empty_limit, its slabs stay
     * warm, and the cache of another size with slabs of that order takes
     * them before any cold slot */
    d = qslab_cache_create("t-warm-fifo", big, 0, 0, NULL);
    CHECK(d != NULL && qslab_tune("t-warm-fifo", "empty_limit", "1") == 0);
    if (tf_is(d, "slab")) { /* SLAB keeps its free slabs on its own lists (free_limit) */
        tf_note("warm_slots", d, "a FIFO's overflow");
        CHECK(qslab_cache_destroy(d) == 0);
        ballast_free(bal, bobjs, nb);
        qslab_trim();
        return tu_done();
    }
    enum { NF = 16 };
    void *f[NF];
    for (int i = 0; i < NF; i++) {
        CHECK((f[i] = qslab_cache_alloc(d)) != NULL);
        memset(f[i], 2, 64);
    }
    for (int i = 0; i < NF; i++)
        qslab_cache_free(d, f[i]);
    struct qslab_cache_stats st;
    qslab_cache_stats(d, &st);
    size_t dslab = slab_bytes_of(d);
    CHECKF(warm() >= (NF - 2 - st.num_slabs) * dslab, "%zu bytes warm after %d frees of slabs of %zu "
           "(empty_limit 1, %lu slabs left in the cache)", warm(), NF, dslab, st.num_slabs);
    qslab_cache *e = qslab_cache_create("t-warm-fifo2", big - 4096, 0, 0, NULL);
    CHECK(e != NULL);
    size_t w0 = warm();
    void *eo = qslab_cache_alloc(e);
    if (slab_bytes_of(e) == dslab) /* (a debug cache's slots are bigger) */
        CHECKF(eo && warm() == w0 - dslab, "another cache's first slab: %zu warm, %zu before", warm(), w0);
    qslab_cache_free(e, eo);
    CHECK(qslab_cache_destroy(e) == 0);
    CHECK(qslab_cache_destroy(d) == 0);

    /* reuse: a slab on one cache's FIFO (within its empty_limit) serves
     * another cache's first slab of its order before any cold slot */
    qslab_trim();
    d = qslab_cache_create("t-warm-reuse", big, 0, 0, NULL);
    CHECK(d != NULL);
    char *dmem[NF];
    for (int i = 0; i < NF; i++) {
        CHECK((f[i] = qslab_cache_alloc(d)) != NULL);
        memset(f[i], 3, 64);
        struct qs_slab *s = qs_slab_lookup(f[i]);
        dmem[i] = s ? s->mem : NULL;
    }
    for (int i = 0; i < NF; i++)
        qslab_cache_free(d, f[i]);
    unsigned long fifo0 = qs_node_nr_empty(&d->nodes[0]);
    CHECKF(fifo0 > 0, "no empty slab on the FIFO of %s after %d frees of its one-block slabs", d->name, NF);
    e = qslab_cache_create("t-warm-reuse2", big - 4096, 0, 0, NULL);
    CHECK(e != NULL);
    if (slab_bytes_of(e) == dslab) { /* (a debug cache's slots are bigger) */
        eo = qslab_cache_alloc(e);
        struct qs_slab *es = eo ? qs_slab_lookup(eo) : NULL;
        bool was_d = false;
        for (int i = 0; i < NF && es; i++)
            was_d |= dmem[i] == es->mem;
        CHECKF(es && was_d && qs_node_nr_empty(&d->nodes[0]) == fifo0 - 1,
               "%s's first slab: %p, one of %s's FIFO slabs: %s (FIFO %lu, was %lu)", e->name,
               es ? (void *)es->mem : NULL, d->name, was_d ? "yes" : "no", qs_node_nr_empty(&d->nodes[0]),
               fifo0);
        qslab_cache_free(e, eo);
    }
    CHECK(qslab_cache_destroy(e) == 0);
    CHECK(qslab_cache_destroy(d) == 0);

    /* the cap when the process grows: warm slots over it go back before a
     * cold slot is handed out */
    qslab_trim();
    qslab_cache *g = qslab_cache_create("t-warm-grow", 20000, 0, 0, NULL); /* another order */
    CHECK(g != NULL);
    d = qslab_cache_create("t-warm-fifo3", big, 0, 0, NULL);
    CHECK(qslab_tune("t-warm-fifo3", "empty_limit", "0") == 0);
    void **w = calloc(64, sizeof *w);
    for (int i = 0; i < 64; i++) {
        CHECK((w[i] = qslab_cache_alloc(d)) != NULL);
        memset(w[i], 2, 64);
    }
    for (int i = 0; i < 64; i++)
        qslab_cache_free(d, w[i]);
    size_t w1 = warm();
    size_t cap = qs_page_retain_cap();
    CHECKF(w1 > cap, "%zu bytes warm, not over the cap %zu", w1, cap);
    unsigned long trims = __atomic_load_n(qs_page_warm_trims, __ATOMIC_RELAXED);
    void *go = qslab_cache_alloc(g); /* a cold slab of its order */
    CHECKF(warm() <= qs_page_retain_cap() + dslab, "%zu bytes warm after the process grew (cap %zu)", warm(),
           qs_page_retain_cap());
    CHECK(__atomic_load_n(qs_page_warm_trims, __ATOMIC_RELAXED) > trims);
    qslab_cache_free(g, go);
    free(w);
    CHECK(qslab_cache_destroy(g) == 0);
    CHECK(qslab_cache_destroy(d) == 0);

    /* big empties: empty slabs of 256 KiB and more on a FIFO stay through
     * the first walk after they emptied and go back at the second (the
     * process grew by a step meanwhile), when it serves another order */
    qslab_trim();
    qslab_cache *h = qslab_cache_create("t-warm-huge", 200 << 10, 0, 0, NULL);
    g = qslab_cache_create("t-warm-grow2", 20000, 0, 0, NULL);
    CHECK(h != NULL && g != NULL);
    if (QS_LOAD(h->order) >= QS_BIG_EMPTY_ORDER && QS_LOAD(g->order) != QS_LOAD(h->order)) {
        enum { NH = 3, NG = 4096 }; /* 768 KiB of 256 KiB slabs: within the cap (1 MiB here) */
        void *hv[NH], **gv = calloc(NG, sizeof *gv);
        char *hmem[NH];
        size_t ng = 0;
        for (int i = 0; i < NH; i++) {
            CHECK((hv[i] = qslab_cache_alloc(h)) != NULL);
            memset(hv[i], 4, 200 << 10);
            struct qs_slab *hs = qs_slab_lookup(hv[i]);
            hmem[i] = hs ? hs->mem : NULL; /* (a guarded sample has none) */
        }
        for (int i = 0; i < NH; i++)
            qslab_cache_free(h, hv[i]);
        unsigned long fifo = qs_node_nr_empty(&h->nodes[0]), cuts = QS_LOAD(*qs_node_big_cuts);
        unsigned long walks = QS_LOAD(*qs_node_walks);
        /* (a walk skips a node whose lock is busy, the purger's say: a
         * few more walks for the second) */
        int round;
        for (round = 1; round <= 6 && (round < 3 || qs_node_nr_empty(&h->nodes[0])); round++) {
            usleep(3000); /* the walk's time is a later millisecond */
            while (QS_LOAD(*qs_node_walks) < walks + (unsigned long)round && ng < NG) {
                CHECK((gv[ng] = qslab_cache_alloc(g)) != NULL);
                memset(gv[ng++], 5, 64);
            }
            CHECKF(QS_LOAD(*qs_node_walks) >= walks + (unsigned long)round, "%zu blocks of %s made no walk",
                   ng, g->name);
            if (round == 1)
                CHECKF(qs_node_nr_empty(&h->nodes[0]) == fifo, "%s: %lu empty slabs after the first walk, %lu "
                       "before", h->name, qs_node_nr_empty(&h->nodes[0]), fifo);
        }
        CHECKF(qs_node_nr_empty(&h->nodes[0]) == 0 && QS_LOAD(*qs_node_big_cuts) >= cuts + fifo,
               "%s: %lu empty slabs after %d walks (%lu before), %lu given back", h->name,
               qs_node_nr_empty(&h->nodes[0]), round - 1, fifo, QS_LOAD(*qs_node_big_cuts) - cuts);
        for (int i = 0; i < NH && fifo == NH; i++)
            CHECKF(!hmem[i] || !resident(hmem[i]), "big empty slab %d (%p) still resident", i, (void *)hmem[i]);
        while (ng)
            qslab_cache_free(g, gv[--ng]);
        free(gv);
    } else {
        tf_note("warm_slots", h, "big empties (slab orders)");
    }
    CHECK(qslab_cache_destroy(g) == 0);
    CHECK(qslab_cache_destroy(h) == 0);

    fifo_cap();
    fifo_cycle();

    ballast_free(bal, bobjs, nb);
    qslab_trim();
    CHECK(warm() == 0);
    CHECKF(tu_capture_calls() == 0, "unexpected reports: %s", tu_fatal_msg);
    return tu_done();
}
