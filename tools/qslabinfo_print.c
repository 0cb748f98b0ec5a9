/*
 * qslabinfo_print.c - qslabinfo's output of one snapshot, in each of its
 * modes (qslabinfo_print.h): the default line per cache (after SLUB's
 * slabinfo), -n per node, -l per owner, -X plot-ready columns, -A activity,
 * -r one cache, --proc /proc/slabinfo's text, -T the totals (where the
 * process's qslab memory is) and --json every counter.
 */
#define _GNU_SOURCE
#include "qslabinfo_print.h"
#include "observe/stats_calc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *human(unsigned long long v, char *buf, size_t len)
{
    const char *u = "KMGTP";
    if (v < 1024) {
        snprintf(buf, len, "%llu", v);
        return buf;
    }
    double d = (double)v / 1024;
    int i = 0;
    while (d >= 1024 && i < 4) {
        d /= 1024;
        i++;
    }
    snprintf(buf, len, d < 10 ? "%.1f%c" : "%.0f%c", d, u[i]);
    return buf;
}

static size_t slab_bytes_of(const struct cache_snap *c)
{
    return (size_t)1 << (root.page_shift + c->st.order);
}
static size_t space_of(const struct cache_snap *c)
{
    return c->st.num_slabs * slab_bytes_of(c);
}
static size_t loss_of(const struct cache_snap *c)
{
    size_t used = c->st.active_objs * c->st.object_size, sp = space_of(c);
    return sp > used ? sp - used : 0;
}

static void flags_of(const struct cache_snap *c, char *out)
{
    int k = 0;
    if (c->flags & QSLAB_HWCACHE_ALIGN)
        out[k++] = 'A';
    for (const char *d = c->debug; *d; d++)
        out[k++] = *d;
    if (c->is_kmalloc)
        out[k++] = 'k';
    if (c->ctor)
        out[k++] = 'c';
    out[k] = '\0';
}

int sort_mode;
static int cmp_cache(const void *a, const void *b)
{
    const struct cache_snap *x = a, *y = b;
    if (sort_mode == 1 && space_of(x) != space_of(y))
        return space_of(x) < space_of(y) ? 1 : -1;
    if (sort_mode == 2 && loss_of(x) != loss_of(y))
        return loss_of(x) < loss_of(y) ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The snapshot's caches, copied and sorted by cmp (the caller frees). */
static struct cache_snap *sorted_caches(const struct snap *s, int (*cmp)(const void *, const void *))
{
    struct cache_snap *v = malloc((s->n + 1) * sizeof(*v));
    if (!v)
        die(EXIT_CANNOT, "out of memory");
    memcpy(v, s->caches, s->n * sizeof(*v));
    qsort(v, s->n, sizeof(*v), cmp);
    return v;
}

bool opt_empty;

/* The large blocks by mapping size (observe.h: bucket b holds mappings of
 * [2^(shift0 + b), 2^(shift0 + b + 1)) bytes; the last, anything bigger):
 * one line per bucket holding or having held a block. */
static void print_large_buckets(const struct snap *s)
{
    for (unsigned b = 0; b < QS_LARGE_BUCKETS; b++) {
        const struct qs_large_bucket *k = &s->large_bucket[b];
        if (!k->alloc && !k->live)
            continue;
        char lo[16], hi[24], by[16], name[48];
        human((unsigned long long)1 << (QS_LARGE_BUCKET_SHIFT0 + b), lo, sizeof lo);
        if (b + 1 < QS_LARGE_BUCKETS)
            human((unsigned long long)1 << (QS_LARGE_BUCKET_SHIFT0 + b + 1), hi, sizeof hi);
        else
            snprintf(hi, sizeof hi, "up");
        snprintf(name, sizeof name, "  %s-%s", lo, hi);
        printf("%-20s %9lu %7s %8s %14s   (%lu allocated)\n", name, k->live, "-",
               human(k->live_bytes, by, sizeof by), "-", k->alloc);
    }
}

static void print_cached(const struct snap *s); /* below */

void print_default(struct snap *s)
{
    struct cache_snap *v = sorted_caches(s, cmp_cache);
    printf("Name                   Objects Objsize    Space Slabs/Part/Own O/S O %%Fr %%Ef Flg  "
           "Front\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &v[i];
        const struct qslab_cache_stats *st = &c->st;
        if (!opt_empty && st->num_slabs == 0 && st->active_objs == 0)
            continue;
        char sp[16], sl[40], fl[16];
        size_t space = space_of(c);
        snprintf(sl, sizeof sl, "%lu/%lu/%lu", st->num_slabs, c->partial_slabs, c->owner_slabs);
        flags_of(c, fl);
        printf("%-20s %9lu %7zu %8s %14s %3u %1u %3lu %3lu %-4s %s\n", c->name, st->active_objs,
               st->object_size, human(space, sp, sizeof sp), sl, st->objs_per_slab, st->order,
               st->num_slabs ? c->partial_slabs * 100 / st->num_slabs : 0,
               space ? (unsigned long)(st->active_objs * st->object_size * 100 / space) : 0, fl,
               c->front);
    }
    if (s->large_live || s->large_alloc) {
        char b[16];
        printf("%-20s %9lu %7s %8s %14s   (mapped blocks: %lu allocated, %lu freed)\n",
               "large (mapped)", s->large_live, "-", human(s->large_bytes, b, sizeof b), "-",
               s->large_alloc, s->large_free);
        print_large_buckets(s);
    }
    /* what the purger listens to, as the process's QSLAB_STATS says it */
    const struct qs_pressure *pr = &s->pressure;
    printf("Pressure: %s; %lu events gave back %lu bytes; %lu trims near the limit gave back %lu "
           "bytes; longest trim %lu ms\n",
           s->pressure_text, pr->events, pr->event_bytes, pr->high_trims, pr->high_bytes,
           pr->trim_ms_max);
    print_cached(s);
    free(v);
}

/* ---- -n: per NUMA node (SLUB's slabinfo -n) ----
 * For each cache with slabs, one line per node: the node's own lists
 * (partial, full, the empty FIFO, SLAB's free slabs, SLAB's shared array)
 * and what the owners on that node hold (their slabs, their queued
 * objects, how many queues). */
void print_nodes(struct snap *s)
{
    struct cache_snap *v = sorted_caches(s, cmp_cache);
    printf("%d NUMA node%s\n", s->nr_nodes, s->nr_nodes == 1 ? "" : "s");
    printf("Name                 Node  Partial     Full    Empty  FreeSlb  Shared   "
           "OwnSlb   Queued Queues\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &v[i];
        if (!opt_empty && c->st.num_slabs == 0 && c->st.active_objs == 0)
            continue;
        for (int n = 0; n < s->nr_nodes; n++) {
            const struct node_snap *ns = &s->nodes[c->node_first + (size_t)n];
            printf("%-20s %4d %8lu %8lu %8lu %8lu %7lu %8lu %8lu %6lu\n", c->name, n, ns->partial,
                   ns->full, ns->empty, ns->free_slabs, ns->shared_avail, ns->owner_slabs,
                   ns->queued, ns->queues);
        }
    }
    free(v);
}

/* ---- -l: per owner (per CPU or per thread) ----
 * One line per queue of each used cache: its owner (cpu N, thread TID, or
 * "exited" for a thread's queue that outlived it), node, what it holds,
 * and its events. */
static void owner_name(const struct queue_snap *q, char *buf, size_t len)
{
    if (q->cpu >= 0)
        snprintf(buf, len, "cpu %d", q->cpu);
    else if (!q->owned)
        snprintf(buf, len, "exited");
    else if (q->tid > 0)
        snprintf(buf, len, "thread %d", q->tid);
    else
        snprintf(buf, len, "thread ?");
}

void print_owners(struct snap *s)
{
    struct cache_snap *v = sorted_caches(s, cmp_cache);
    printf("owners: %s\n", s->owner_kind == QS_OWNER_CPU ? "CPUs (per-CPU queues)"
                                                        : "threads (per-thread queues)");
    printf("Name                 Owner          Node  Queued  Inbox Partial  Full Stash      Alloc"
           "       Free %%AFst %%FFst  Remote\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &v[i];
        if (!opt_empty && !c->st.alloc && !c->st.free)
            continue;
        for (size_t k = 0; k < c->q_count; k++) {
            const struct queue_snap *q = &s->queues[c->q_first + k];
            char who[24];
            owner_name(q, who, sizeof who);
            printf("%-20s %-14s %4d %7lu %6lu %7lu %5lu %5lu %10lu %10lu %5u %5u %7lu\n",
                   c->name, who, q->node, q->queued, q->inbox, q->partial, q->full, q->stash,
                   q->alloc, q->free, q->alloc ? (unsigned)(q->alloc_fast * 100 / q->alloc) : 0,
                   q->free ? (unsigned)(q->free_fast * 100 / q->free) : 0, q->remote_free);
        }
    }
    free(v);
}

/* ---- -X: plot-ready columns ----
 * One header line naming the columns, then one line per cache, fields
 * separated by single spaces, numbers only (bytes, counts), the name last
 * (gnuplot: `plot "<(qslabinfo -X -p PID)" using 4:xtic(12)`; awk, sort). */
void print_plot(struct snap *s)
{
    struct cache_snap *v = sorted_caches(s, cmp_cache);
    printf("# active_objs num_objs object_size space slabs partial_slabs empty_slabs alloc free "
           "alloc_fast_pct remote_free name\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &v[i];
        const struct qslab_cache_stats *st = &c->st;
        if (!opt_empty && st->num_slabs == 0 && st->active_objs == 0)
            continue;
        printf("%lu %lu %zu %zu %lu %lu %lu %lu %lu %u %lu %s\n", st->active_objs, st->num_objs,
               st->object_size, space_of(c), st->num_slabs, c->partial_slabs, st->empty_slabs,
               st->alloc, st->free, st->alloc ? (unsigned)(st->alloc_fast * 100 / st->alloc) : 0,
               st->remote_free, c->name);
    }
    free(v);
}

static unsigned pct(unsigned long part, unsigned long whole)
{
    return whole ? (unsigned)(part * 100 / whole) : 0;
}

/* -A: activity, most active first (SLUB's slabinfo -A) */
static int cmp_activity(const void *a, const void *b)
{
    const struct cache_snap *x = a, *y = b;
    unsigned long ax = x->st.alloc + x->st.free, ay = y->st.alloc + y->st.free;
    if (ax != ay)
        return ax < ay ? 1 : -1;
    return strcmp(x->name, y->name);
}

void print_activity(struct snap *s)
{
    struct cache_snap *v = sorted_caches(s, cmp_activity);
    printf("Name                   Objects      Alloc       Free %%AFst %%FFst   Remote  Batches "
           "  Flushes  Refills  Claims\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct qslab_cache_stats *st = &v[i].st;
        if (!opt_empty && !st->alloc && !st->free)
            continue;
        printf("%-20s %9lu %10lu %10lu %5u %5u %8lu %8lu %9lu %8lu %7lu\n", v[i].name,
               st->active_objs, st->alloc, st->free, pct(st->alloc_fast, st->alloc),
               pct(st->free_fast, st->free), st->remote_free, st->remote_batch, st->flush,
               st->refill, st->claim);
    }
    free(v);
}

/* -r CACHE: everything about one cache */
int print_one(struct snap *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        if (strcmp(c->name, name) != 0)
            continue;
        char fl[16], b[16];
        flags_of(c, fl);
        printf("Cache %s (process %d, id %u, front %s%s%s)\n", c->name, (int)g_pid, c->id,
               c->front, c->debug[0] ? ", debug " : "", c->debug);
        printf("  object size %zu, slot %zu, align %zu, flags %s (0x%lx)\n", st->object_size,
               st->slot_size, c->align, fl[0] ? fl : "-", c->flags);
        printf("  slabs: %lu of order %u (%zu bytes, %u objects each), %lu partial, %lu held "
               "by owners, %lu empty kept; space %s\n",
               st->num_slabs, st->order, slab_bytes_of(c), st->objs_per_slab, c->partial_slabs,
               c->owner_slabs, st->empty_slabs, human(space_of(c), b, sizeof b));
        printf("  objects: %lu in use of %lu in slabs, %lu free in queues and inboxes "
               "(%lu queues, %lu with an owner)\n",
               st->active_objs, st->num_objs, st->queued_objs, c->nr_queues, c->nr_owned_queues);
        printf("  alloc %lu (fast %lu, slow %lu, from node lists %lu), free %lu (fast %lu, slow "
               "%lu)\n",
               st->alloc, st->alloc_fast, st->alloc_slow, st->node_alloc, st->free, st->free_fast,
               st->free_slow);
        printf("  remote frees %lu in %lu batches, claims %lu, flushes %lu, refills %lu, slabs "
               "new %lu freed %lu\n",
               st->remote_free, st->remote_batch, st->claim, st->flush, st->refill, st->new_slab,
               st->free_slab);
        printf("  tunables: hiwater %lu, freebatch %lu, limit %lu, batchcount %lu, shared %lu\n",
               c->hiwater, c->freebatch, c->slab_limit, c->slab_batch, c->slab_shared);
        printf("  metadata %zu bytes; efficiency %u%%\n", c->meta_bytes,
               pct(st->active_objs * st->object_size, space_of(c)));
        if (st->defrag_passes) /* a mobile cache (qslab_cache_set_mobility) */
            printf("  defragmentation: %lu passes moved %lu objects, declined %lu, emptied %lu "
                   "slabs\n",
                   st->defrag_passes, st->defrag_moved, st->defrag_declined, st->defrag_slabs);
        return 0;
    }
    die(EXIT_CANNOT, "process %d has no cache named %s", (int)g_pid, name);
    return EXIT_CANNOT;
}

void print_proc(struct snap *s)
{
    fputs(QS_SLABINFO_HEADER, stdout);
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        bool slab = c->front_nr == QS_FRONT_SLAB;
        struct qs_slabinfo_row row = {
            .name = c->name,
            .front = c->front,
            .st = &c->st,
            .limit = slab ? c->slab_limit : c->hiwater,
            .batchcount = slab ? c->slab_batch : c->freebatch,
            .sharedfactor = slab ? c->slab_shared : 0,
            .debug = c->debug,
        };
        char line[256];
        size_t n = qs_slabinfo_line(line, sizeof line, &row);
        fwrite(line, 1, n, stdout);
    }
}

/* -T: where the process's qslab memory is. */
struct totals {
    size_t inuse, partial_free, queued, empty, overhead, slob_free, slabs, large, meta;
    size_t warm, free_slots, chunk_meta, meta_mapped; /* the page layer's and metadata's rest */
    unsigned long inuse_objs, queued_objs, partial_free_objs, empty_slabs;
    long long unaccounted; /* page layer's slab bytes - the caches' slabs */
    size_t total;
    long rss_anon_kb;
};

static size_t take(size_t *left, size_t want)
{
    size_t t = want < *left ? want : *left;
    *left -= t;
    return t;
}

static void compute_totals(const struct snap *s, struct totals *t)
{
    memset(t, 0, sizeof(*t));
    size_t slob_inuse = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        t->meta += c->meta_bytes;
        if (c->front_nr == QS_FRONT_SLOB) { /* its objects sit in the arena's pages */
            slob_inuse += st->active_objs * st->slot_size;
            t->inuse_objs += st->active_objs;
            continue;
        }
        size_t left = space_of(c), slot = st->slot_size;
        t->slabs += left;
        t->inuse += take(&left, st->active_objs * slot);
        t->queued += take(&left, st->queued_objs * slot);
        t->empty += take(&left, st->empty_slabs * slab_bytes_of(c));
        unsigned long free_born = st->num_objs > st->active_objs + st->queued_objs
                                      ? st->num_objs - st->active_objs - st->queued_objs
                                      : 0;
        unsigned long in_empty = st->empty_slabs * st->objs_per_slab;
        free_born = free_born > in_empty ? free_born - in_empty : 0;
        t->partial_free += take(&left, free_born * slot);
        t->overhead += left; /* tails past the last object, objects not born yet */
        t->inuse_objs += st->active_objs;
        t->queued_objs += st->queued_objs;
        t->partial_free_objs += free_born;
        t->empty_slabs += st->empty_slabs;
    }
    /* SLOB's pages: the arena's slabs, holding its caches' objects */
    size_t arena = space_of(&s->arena), left = arena;
    t->meta += s->arena.meta_bytes;
    t->slabs += arena;
    t->inuse += take(&left, slob_inuse);
    t->slob_free = left;
    t->unaccounted = (long long)(s->page_slab_bytes - t->slabs); /* unsigned: no overflow */
    t->large = s->large_bytes;
    /* the page layer's chunks: slots (slabs handed out, the rows above; the
     * rest free, given back to the OS) and headers (descriptors, free bits);
     * the metadata allocator's mappings hold the structures counted in
     * t->meta (all but the kmalloc caches', which are the library's data) */
    size_t free_all = s->page_slot_bytes > s->page_slab_bytes ? s->page_slot_bytes - s->page_slab_bytes : 0;
    /* of the free slots, the warm ones are resident (docs/design.md, "Warm
     * slots"); read a moment apart, warm may pass free_all: capped */
    t->warm = s->page_warm_bytes < free_all ? s->page_warm_bytes : free_all;
    t->free_slots = free_all - t->warm;
    t->chunk_meta = s->page_chunk_bytes > s->page_slot_bytes ? s->page_chunk_bytes - s->page_slot_bytes : 0;
    t->meta_mapped = s->meta_mapped;
    t->total = t->inuse + t->partial_free + t->queued + t->empty + t->overhead + t->slob_free +
               t->warm + t->free_slots + t->chunk_meta + t->large + t->meta_mapped;
    if (t->unaccounted > 0)
        t->total += (size_t)t->unaccounted;
    t->rss_anon_kb = status_field(g_pid, "RssAnon");
}

/* the cached-memory cap, as the process's QSLAB_STATS says it (what is
 * kept counted from the snapshot: empty slabs and warm slots) */
static void print_cached(const struct snap *s)
{
    struct totals t;
    compute_totals(s, &t);
    char cap[32] = "none";
    if (s->cached.max)
        snprintf(cap, sizeof cap, "%lu bytes", s->cached.max);
    printf("Cached: cap %s; %zu bytes of empty slabs kept (FIFOs, stashes, warm slots); the cap gave "
           "back %lu bytes in %lu of %lu walks\n",
           cap, t.empty + t.warm, s->cached.cut_bytes, s->cached.cuts, s->cached.walks);
}

void print_totals(const struct snap *s)
{
    struct totals t;
    compute_totals(s, &t);
    char b[16];
    printf("qslab memory of process %d (%s)\n", (int)g_pid, s->path);
#define ROW(label, bytes, extra)                                                                   \
    printf("  %-40s %10s %14zu%s\n", label, human(bytes, b, sizeof b), (size_t)(bytes), extra)
    char x[96];
    snprintf(x, sizeof x, "  (%lu objects)", t.inuse_objs);
    ROW("objects in use", t.inuse, x);
    snprintf(x, sizeof x, "  (%lu objects)", t.partial_free_objs);
    ROW("free objects in partial slabs", t.partial_free, x);
    snprintf(x, sizeof x, "  (%lu objects)", t.queued_objs);
    ROW("free objects held in queues (per owner)", t.queued, x);
    snprintf(x, sizeof x, "  (%lu slabs)", t.empty_slabs);
    ROW("empty slabs kept", t.empty, x);
    ROW("slab tails and objects not born yet", t.overhead, "");
    if (t.slob_free)
        ROW("free space in SLOB pages", t.slob_free, "");
    if (t.unaccounted > 0)
        ROW("other page-layer slabs", (size_t)t.unaccounted, "");
    ROW("warm slots (slabs freed whole)", t.warm, "  (resident, reused first)");
    ROW("free slots in slab chunks (given back)", t.free_slots, "  (not resident)");
    ROW("chunk headers, descriptors, free bits", t.chunk_meta, "");
    snprintf(x, sizeof x, "  (%lu blocks)", s->large_live);
    ROW("large blocks (mapped)", t.large, x);
    snprintf(x, sizeof x, "  (caches, nodes, queues: %zu)", t.meta);
    ROW("metadata mappings", t.meta_mapped, x);
    ROW("total held from the OS", t.total, "");
    printf("  slabs: %zu bytes from the page layer, %zu in the caches' slabs (%s)\n",
           s->page_slab_bytes, t.slabs,
           t.unaccounted == 0 ? "they match"
                               : "they differ: the rest is the other page-layer slabs above");
    if (t.rss_anon_kb >= 0) {
        size_t rss = (size_t)t.rss_anon_kb * 1024;
        char o[16];
        size_t resident = t.total - t.free_slots; /* at most: pages never touched are not */
        printf("  resident at most: %s (the total less the free slots)\n",
               human(resident, b, sizeof b));
        if (rss >= resident)
            printf("  process anonymous RSS: %s (%ld kB): %s of it outside qslab (other "
                   "allocators, stacks, data)\n",
                   human(rss, b, sizeof b), t.rss_anon_kb, human(rss - resident, o, sizeof o));
        else
            printf("  process anonymous RSS: %s (%ld kB): below that (pages never "
                   "touched, e.g. of large blocks, are not resident)\n",
                   human(rss, b, sizeof b), t.rss_anon_kb);
    }
#undef ROW
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

void print_json(const struct snap *s)
{
    struct totals t;
    compute_totals(s, &t);
    printf("{\"pid\": %d, \"layout_version\": %u, \"library\": ", (int)g_pid, root.version);
    json_str(s->path);
    printf(", \"generation\": %lu, \"attempts\": %d, \"nr_nodes\": %d, \"owner\": \"%s\", "
           "\"owner_why\": ",
           s->generation, s->attempts, s->nr_nodes,
           s->owner_kind == QS_OWNER_CPU ? "cpu" : "thread");
    json_str(s->owner_why);
    printf(", \"nr_cpu_ids\": %d, \"front_default\": ", s->nr_cpu_ids);
    char fd[8];
    memcpy(fd, root.front_names[s->front_default], 7);
    fd[7] = '\0';
    json_str(fd);
    printf(",\n \"caches\": [");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_str(c->name);
        printf(", \"id\": %u, \"front\": \"%s\", \"debug\": \"%s\", \"kmalloc\": %s, "
               "\"ctor\": %s, \"flags\": %lu, \"align\": %zu, \"object_size\": %zu, "
               "\"slot_size\": %zu, \"objs_per_slab\": %u, \"order\": %u, \"slab_bytes\": %zu,"
               " \"active_objs\": %lu, \"num_objs\": %lu, \"num_slabs\": %lu, "
               "\"empty_slabs\": %lu, \"partial_slabs\": %lu, \"owner_slabs\": %lu, "
               "\"queued_objs\": %lu, \"queues\": %lu, \"owned_queues\": %lu, "
               "\"space\": %zu, \"metadata_bytes\": %zu,",
               c->id, c->front, c->debug, c->is_kmalloc ? "true" : "false",
               c->ctor ? "true" : "false", c->flags, c->align, st->object_size, st->slot_size,
               st->objs_per_slab, st->order, slab_bytes_of(c), st->active_objs, st->num_objs,
               st->num_slabs, st->empty_slabs, c->partial_slabs, c->owner_slabs, st->queued_objs,
               c->nr_queues, c->nr_owned_queues, space_of(c), c->meta_bytes);
        if (st->defrag_passes) /* as the library's JSON: a cache that has had a pass */
            printf(" \"defrag_passes\": %lu, \"defrag_moved\": %lu, \"defrag_declined\": %lu, "
                   "\"defrag_slabs\": %lu,",
                   st->defrag_passes, st->defrag_moved, st->defrag_declined, st->defrag_slabs);
        printf("\n   \"alloc\": %lu, \"alloc_fast\": %lu, \"alloc_slow\": %lu, \"free\": %lu, "
               "\"free_fast\": %lu, \"free_slow\": %lu, \"flush\": %lu, \"remote_free\": %lu, "
               "\"remote_batch\": %lu, \"claim\": %lu, \"refill\": %lu, \"new_slab\": %lu, "
               "\"free_slab\": %lu, \"node_alloc\": %lu,",
               st->alloc, st->alloc_fast, st->alloc_slow, st->free, st->free_fast, st->free_slow,
               st->flush, st->remote_free, st->remote_batch, st->claim, st->refill,
               st->new_slab, st->free_slab, st->node_alloc);
        printf("\n   \"tunables\": {\"hiwater\": %lu, \"freebatch\": %lu, \"limit\": %lu, "
               "\"batchcount\": %lu, \"shared\": %lu},",
               c->hiwater, c->freebatch, c->slab_limit, c->slab_batch, c->slab_shared);
        printf("\n   \"nodes\": [");
        for (int n = 0; n < s->nr_nodes; n++) {
            const struct node_snap *ns = &s->nodes[c->node_first + (size_t)n];
            printf("%s{\"node\": %d, \"partial\": %lu, \"full\": %lu, \"empty\": %lu, "
                   "\"free_slabs\": %lu, \"shared_avail\": %lu, \"owner_slabs\": %lu, "
                   "\"queued\": %lu, \"queues\": %lu}",
                   n ? ", " : "", n, ns->partial, ns->full, ns->empty, ns->free_slabs,
                   ns->shared_avail, ns->owner_slabs, ns->queued, ns->queues);
        }
        printf("],\n   \"owners\": [");
        for (size_t k = 0; k < c->q_count; k++) {
            const struct queue_snap *q = &s->queues[c->q_first + k];
            printf("%s\n    {\"cpu\": %d, \"tid\": %d, \"node\": %d, \"owned\": %s, "
                   "\"queued\": %lu, \"inbox\": %lu, \"partial\": %lu, \"full\": %lu, "
                   "\"stash\": %lu, \"alloc\": %lu, \"alloc_fast\": %lu, \"free\": %lu, "
                   "\"free_fast\": %lu, \"remote_free\": %lu, \"refill\": %lu, \"flush\": %lu}",
                   k ? "," : "", q->cpu, q->tid, q->node, q->owned ? "true" : "false", q->queued,
                   q->inbox, q->partial, q->full, q->stash, q->alloc, q->alloc_fast, q->free,
                   q->free_fast, q->remote_free, q->refill, q->flush);
        }
        printf("]}");
    }
    printf("],\n \"slob_pages\": {\"slabs\": %lu, \"bytes\": %zu},\n", s->arena.st.num_slabs,
           space_of(&s->arena));
    printf(" \"large\": {\"alloc\": %lu, \"free\": %lu, \"live\": %lu, \"live_bytes\": %zu, "
           "\"buckets\": [",
           s->large_alloc, s->large_free, s->large_live, s->large_bytes);
    for (unsigned b = 0; b < QS_LARGE_BUCKETS; b++) { /* every bucket: a fixed shape */
        const struct qs_large_bucket *k = &s->large_bucket[b];
        unsigned long long lo = 1ull << (QS_LARGE_BUCKET_SHIFT0 + b);
        printf("%s{\"from\": %llu, \"to\": %llu, \"alloc\": %lu, \"live\": %lu, "
               "\"live_bytes\": %zu}",
               b ? ", " : "", lo, b + 1 < QS_LARGE_BUCKETS ? 2 * lo : 0ull, k->alloc, k->live,
               k->live_bytes);
    }
    printf("]},\n");
    printf(" \"pressure\": {\"source\": ");
    json_str(s->pressure_text);
    printf(", \"limit\": %lu, \"events\": %lu, \"event_bytes\": %lu, \"high_trims\": %lu, "
           "\"high_bytes\": %lu, \"trim_ms_max\": %lu},\n",
           s->pressure.limit, s->pressure.events, s->pressure.event_bytes, s->pressure.high_trims,
           s->pressure.high_bytes, s->pressure.trim_ms_max);
    printf(" \"cached\": {\"max\": %lu, \"cached\": %zu, \"walks\": %lu, \"cuts\": %lu, "
           "\"cut_bytes\": %lu},\n",
           s->cached.max, t.empty + t.warm, s->cached.walks, s->cached.cuts, s->cached.cut_bytes);
    printf(" \"totals\": {\"objects_in_use\": %zu, \"free_in_partial_slabs\": %zu, "
           "\"held_in_queues\": %zu, \"empty_slabs\": %zu, \"slab_overhead\": %zu, "
           "\"slob_free\": %zu, \"warm_slots\": %zu, \"free_slots\": %zu, \"chunk_headers\": %zu, \"large\": %zu, "
           "\"metadata\": %zu, \"metadata_structures\": %zu, \"total\": %zu, "
           "\"slabs\": %zu, \"page_layer_slab_bytes\": %zu, \"page_layer_chunk_bytes\": %zu, "
           "\"unaccounted\": %lld, \"rss_anon_kb\": %ld}}\n",
           t.inuse, t.partial_free, t.queued, t.empty, t.overhead, t.slob_free, t.warm, t.free_slots,
           t.chunk_meta, t.large, t.meta_mapped, t.meta, t.total, t.slabs, s->page_slab_bytes,
           s->page_chunk_bytes, t.unaccounted, t.rss_anon_kb);
}
