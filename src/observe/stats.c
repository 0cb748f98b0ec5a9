/*
 * stats.c - statistics gathered from the queues' counters, and the reports
 * built on them (one gatherer, thin front ends):
 *   qslab_cache_stats   one cache, as a struct
 *   qs_slabinfo         /proc/slabinfo version 2.1 text (qslab_slabinfo)
 *   qs_stats_report     SLUB "slabinfo -AD" style: most active caches first
 *                       (qslab_stats_report)
 *   qs_stats_json       every counter as JSON (qslab_stats_json)
 * The reports' entry points are the API layer's (api/entry.c), which
 * starts the library up first: everything here runs after start-up.
 * Counters live in the queues (one writer each, relaxed stores); queues are
 * never freed while their cache lives, so a sum over cache->queues under
 * qs_global sees every event, including those of exited threads (the sum
 * of a cache's counters, qs_stats_sum, is front.c's: validation takes it
 * too).
 */
#include "observe/control.h"
#include "front/front.h"
#include "observe/stats_calc.h"
#include "debug/debug.h"
#include "observe/stats.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static void fill(qslab_cache *c, struct qslab_cache_stats *st)
{
    unsigned long sum[QS_STAT_NR];
    qs_stats_sum(c, sum);
    memset(st, 0, sizeof(*st));
    qs_calc_fill(sum, st);
    for (int n = 0; n < qs_nr_nodes; n++) /* the FIFO's, and SLAB's free slabs */
        st->empty_slabs += qs_node_nr_empty(&c->nodes[n]) + QS_LOAD(c->nodes[n].nr_free_slabs);
    st->metadata_bytes = sizeof(*c) + (size_t)qs_nr_nodes * sizeof(struct qs_node);
    for (int n = 0; n < qs_nr_nodes; n++)
        st->partial_slabs += QS_LOAD(c->nodes[n].list.nr_partial);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) { /* qs_global held */
        st->empty_slabs += QS_LOAD(q->nr_stash);
        qs_lock_acquire(&q->inbox.lock);
        st->queued_objs += QS_TOP_NR(QS_LOAD(q->top)) + q->inbox.nr;
        qs_lock_release(&q->inbox.lock);
        /* the owner's list counts, read racily (as qslabinfo reads them
         * from outside, and /proc/slabinfo the kernel's) */
        unsigned long part = QS_LOAD(q->list.nr_partial) + QS_LOAD(q->sl.nr_partial);
        st->partial_slabs += part;
        st->owner_slabs += part + QS_LOAD(q->list.nr_full) + QS_LOAD(q->nr_stash) +
                           (QS_LOAD(q->sl.slab) != NULL);
        st->nr_queues++;
        st->metadata_bytes += sizeof(*q) + (size_t)(QS_LOAD(q->cap) + 1) * sizeof(void *);
    }
    st->object_size = c->obj_size;
    st->slot_size = c->slot_size;
    st->order = QS_LOAD(c->order);
    st->objs_per_slab = qs_front_objs_per_slab(c, st->order);
    st->slab_bytes = (size_t)QS_PAGE_SIZE << st->order;
    st->defrag_passes = QS_LOAD(c->defrag_passes); /* api/defrag.c */
    st->defrag_moved = QS_LOAD(c->defrag_moved);
    st->defrag_declined = QS_LOAD(c->defrag_declined);
    st->defrag_slabs = QS_LOAD(c->defrag_slabs);
}

/* The first layout of struct qslab_cache_stats ended at queued_objs. */
#define QS_STATS_V1_SIZE offsetof(struct qslab_cache_stats, partial_slabs)

QSLAB_EXPORT int qslab_cache_stats_size(qslab_cache *c, struct qslab_cache_stats *st, size_t size)
{
    if (!c || !st || size < QS_STATS_V1_SIZE) {
        errno = EINVAL;
        return -1;
    }
    struct qslab_cache_stats all;
    qs_lock_acquire(&qs_global);
    fill(c, &all);
    qs_lock_release(&qs_global);
    /* the caller's layout: ours up to its size, zeros past ours */
    memcpy(st, &all, size < sizeof all ? size : sizeof all);
    if (size > sizeof all)
        memset((char *)st + sizeof all, 0, size - sizeof all);
    return 0;
}

/* The symbol programs built before the sized call use: the first layout. */
QSLAB_EXPORT int(qslab_cache_stats)(qslab_cache *c, struct qslab_cache_stats *st)
{
    return qslab_cache_stats_size(c, st, QS_STATS_V1_SIZE);
}

static void col(struct qs_buf *b, uint64_t v, size_t width)
{
    size_t from = b->len;
    qs_buf_u64(b, v);
    qs_buf_pad(b, width, true, from);
}

/* The reports gather their lines in a buffer of QS_REPORT_BUF bytes and
 * write it when a line might not fit: one write for about sixteen caches,
 * not one a cache, while qs_global is held (cache creation and a thread's
 * first use of a cache wait for it). */
#define QS_REPORT_BUF 4096
#define QS_REPORT_LINE 256 /* the longest line */

static void flush_line(int fd, struct qs_buf *b)
{
    if (b->len)
        qs_os_write(fd, b->p, b->len);
    b->len = 0;
}

/* A line is done: write the buffer only when the next one might not fit. */
static void line_done(int fd, struct qs_buf *b)
{
    if (b->cap - b->len < QS_REPORT_LINE)
        flush_line(fd, b);
}

void qs_slabinfo(int fd)
{
    char out[QS_REPORT_BUF];
    struct qs_buf b = {out, 0, sizeof(out)};
    qs_buf_str(&b, QS_SLABINFO_HEADER);
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qslab_cache_stats st;
        fill(c, &st);
        unsigned long tun[3] = {QS_LOAD(c->hiwater), QS_LOAD(c->freebatch), 0};
        if (qs_front_of(c)->slabinfo_tunables) /* SLAB's own: limit, batchcount, shared */
            qs_front_of(c)->slabinfo_tunables(c, tun);
        char fl[QS_DEBUG_LETTERS_LEN] = "";
        if (c->debug) /* every slab of the cache is a debug slab */
            qs_debug_letters(c->debug, fl);
        struct qs_slabinfo_row row = {
            .name = c->name,
            .front = qs_front_of(c)->name,
            .st = &st,
            .limit = tun[0],
            .batchcount = tun[1],
            .sharedfactor = tun[2],
            .debug = fl,
        };
        b.len += qs_slabinfo_line(out + b.len, b.cap - b.len, &row);
        line_done(fd, &b);
    }
    qs_lock_release(&qs_global);
    flush_line(fd, &b);
}

static unsigned pct(unsigned long part, unsigned long whole)
{
    return whole ? (unsigned)(part * 100 / whole) : 0;
}

void qs_stats_report(int fd)
{
    char out[QS_REPORT_BUF];
    struct qs_buf b = {out, 0, sizeof(out)};
    qs_buf_str(&b, "Name                   Objects      Alloc       Free %Fast   Remote  Batches   "
                   "Claims  Slabs O Front\n");
    qs_lock_acquire(&qs_global);
    /* most active first (slabinfo -A), caches without activity left out;
     * selection by repeated maximum keeps this allocation-free.  Each
     * cache's activity is summed once, into its scratch: summing it at
     * every selection cost lines x caches sums (most of a report's time
     * with 180 kmalloc classes) */
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qslab_cache_stats st;
        fill(c, &st);
        c->report_act = st.alloc + st.free;
    }
    unsigned long last = ~0ul;
    const qslab_cache *last_c = NULL;
    for (;;) {
        qslab_cache *best = NULL;
        unsigned long best_act = 0;
        bool passed = last_c == NULL;
        for (qslab_cache *c = qs_caches; c; c = c->next) {
            unsigned long act = c->report_act;
            if (!act)
                continue;
            /* order: activity descending, then list order */
            bool after = act < last || (act == last && passed);
            if (c == last_c)
                passed = true;
            if (after && (!best || act > best_act)) {
                best = c;
                best_act = act;
            }
        }
        if (!best)
            break;
        struct qslab_cache_stats st;
        fill(best, &st);
        size_t from = b.len;
        qs_buf_str(&b, best->name);
        qs_buf_pad(&b, 20, false, from);
        col(&b, st.active_objs, 10);
        col(&b, st.alloc, 11);
        col(&b, st.free, 11);
        col(&b, pct(st.alloc_fast, st.alloc), 4);
        col(&b, pct(st.free_fast, st.free), 4);
        col(&b, st.remote_free, 9);
        col(&b, st.remote_batch, 9);
        col(&b, st.claim, 9);
        col(&b, st.num_slabs, 7);
        col(&b, st.order, 2);
        qs_buf_putc(&b, ' ');
        qs_buf_str(&b, qs_front_of(best)->name);
        if (best->debug) {
            char fl[QS_DEBUG_LETTERS_LEN];
            qs_debug_letters(best->debug, fl);
            qs_buf_putc(&b, ' ');
            qs_buf_str(&b, fl);
        }
        qs_buf_putc(&b, '\n');
        line_done(fd, &b);
        last = best_act;
        last_c = best;
    }
    /* "Defrag: NAME: N passes moved N, declined N, slabs emptied N": the
     * mobile caches that have had a pass (api/defrag.c) */
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        unsigned long passes = QS_LOAD(c->defrag_passes);
        if (!passes)
            continue;
        qs_buf_str(&b, "Defrag: ");
        qs_buf_str(&b, c->name);
        qs_buf_str(&b, ": ");
        qs_buf_u64(&b, passes);
        qs_buf_str(&b, " passes moved ");
        qs_buf_u64(&b, QS_LOAD(c->defrag_moved));
        qs_buf_str(&b, ", declined ");
        qs_buf_u64(&b, QS_LOAD(c->defrag_declined));
        qs_buf_str(&b, ", slabs emptied ");
        qs_buf_u64(&b, QS_LOAD(c->defrag_slabs));
        qs_buf_putc(&b, '\n');
        line_done(fd, &b);
    }
    qs_lock_release(&qs_global);
    flush_line(fd, &b);
    struct qslab_large_stats ls;
    qslab_large_stats(&ls);
    if (ls.alloc) {
        qs_buf_str(&b, "large (mapped)      ");
        col(&b, ls.live, 10);
        col(&b, ls.alloc, 11);
        col(&b, ls.free, 11);
        qs_buf_str(&b, "   live bytes ");
        qs_buf_u64(&b, ls.live_bytes);
        qs_buf_putc(&b, '\n');
        flush_line(fd, &b);
    }
    /* the page layer's give-backs the kernel refused (page.c): the memory
     * was kept; a line only once there is one, like the large line */
    struct qs_page_failures pf;
    qs_page_failures(&pf);
    if (pf.decommit || pf.unmap) {
        qs_buf_str(&b, "Pages: decommit failed ");
        qs_buf_u64(&b, pf.decommit);
        qs_buf_str(&b, " (");
        qs_buf_u64(&b, pf.decommit_bytes);
        qs_buf_str(&b, " bytes kept resident), unmap failed ");
        qs_buf_u64(&b, pf.unmap);
        qs_buf_str(&b, " (");
        qs_buf_u64(&b, pf.unmap_bytes);
        qs_buf_str(&b, " bytes kept mapped)\n");
        flush_line(fd, &b);
    }
    /* destroyed caches' slabs kept resident for the next ones (page.c) */
    size_t warm = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);
    if (warm) {
        qs_buf_str(&b, "Pages: ");
        qs_buf_u64(&b, warm);
        qs_buf_str(&b, " bytes warm (slabs freed whole, reused first, given back after ");
        qs_buf_u64(&b, QS_WARM_MS);
        qs_buf_str(&b, " ms)\n");
        flush_line(fd, &b);
    }
    qs_guard_report(fd); /* QSLAB_GUARD_SAMPLE's line (guard.c), when on */
    for (int f = 0; f < QS_FRONT_NR; f++) /* lines of the front ends' own (SLOB's pages) */
        if (qs_fronts[f]->report)
            qs_fronts[f]->report(fd);
    qs_buf_str(&b, "Front: "); /* the default front end (caches may differ: column Front) */
    qs_buf_str(&b, qs_fronts[qs_front_default]->name);
    qs_buf_str(&b, ", ");
    qs_buf_str(&b, qs_fronts[qs_front_default]->what);
    qs_buf_putc(&b, '\n');
    flush_line(fd, &b);
    qs_stats_pressure_line(&b); /* what the purger listens to (core/pressure.c) */
    qs_buf_putc(&b, '\n');
    flush_line(fd, &b);
    qs_stats_cached_line(&b); /* the cached-memory cap (core/page.c, node.c) */
    qs_buf_putc(&b, '\n');
    flush_line(fd, &b);
    qs_buf_str(&b, "Owner: "); /* which owner kind is in force, and why */
    qs_buf_str(&b, qs_owner_why);
    qs_buf_putc(&b, '\n');
    flush_line(fd, &b);
}

/* "Pressure: SOURCE[; limit ...]; N events gave back B bytes; N trims
 * near the limit gave back B bytes; longest trim N ms" (no newline) */
void qs_stats_pressure_line(struct qs_buf *b)
{
    qs_buf_str(b, "Pressure: ");
    qs_buf_str(b, qs_pressure_text());
    qs_buf_str(b, "; ");
    qs_buf_u64(b, __atomic_load_n(&qs_pressure.events, __ATOMIC_RELAXED));
    qs_buf_str(b, " events gave back ");
    qs_buf_u64(b, __atomic_load_n(&qs_pressure.event_bytes, __ATOMIC_RELAXED));
    qs_buf_str(b, " bytes; ");
    qs_buf_u64(b, __atomic_load_n(&qs_pressure.high_trims, __ATOMIC_RELAXED));
    qs_buf_str(b, " trims near the limit gave back ");
    qs_buf_u64(b, __atomic_load_n(&qs_pressure.high_bytes, __ATOMIC_RELAXED));
    qs_buf_str(b, " bytes; longest trim ");
    qs_buf_u64(b, __atomic_load_n(&qs_pressure.trim_ms_max, __ATOMIC_RELAXED));
    qs_buf_str(b, " ms");
}

/* "Cached: cap N bytes|none; N bytes of empty slabs kept (FIFOs, stashes,
 * warm slots); the cap gave back N bytes in N of N walks" (no newline) */
void qs_stats_cached_line(struct qs_buf *b)
{
    unsigned long max = __atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED);
    qs_buf_str(b, "Cached: cap ");
    if (max) {
        qs_buf_u64(b, max);
        qs_buf_str(b, " bytes; ");
    } else {
        qs_buf_str(b, "none; ");
    }
    qs_buf_u64(b, qs_node_cached_bytes());
    qs_buf_str(b, " bytes of empty slabs kept (FIFOs, stashes, warm slots); the cap gave back ");
    qs_buf_u64(b, __atomic_load_n(&qs_cached.cut_bytes, __ATOMIC_RELAXED));
    qs_buf_str(b, " bytes in ");
    qs_buf_u64(b, __atomic_load_n(&qs_cached.cuts, __ATOMIC_RELAXED));
    qs_buf_str(b, " of ");
    qs_buf_u64(b, __atomic_load_n(&qs_cached.walks, __ATOMIC_RELAXED));
    qs_buf_str(b, " walks");
}

void qs_stats_totals(struct qs_totals *t)
{
    memset(t, 0, sizeof(*t));
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qslab_cache_stats st;
        fill(c, &st);
        t->slab_bytes += st.num_objs * st.slot_size;
        t->inuse_bytes += st.active_objs * st.slot_size;
        t->slabs += st.num_slabs;
        /* the objects' slots of the empty slabs, as slab_bytes counts them
         * (so keepcost <= arena) */
        t->empty_bytes += st.empty_slabs * st.objs_per_slab * st.slot_size;
        for (struct qs_queue *q = c->queues; q; q = q->all_next) {
            qs_lock_acquire(&q->inbox.lock);
            size_t n = QS_TOP_NR(QS_LOAD(q->top)) + q->inbox.nr;
            qs_lock_release(&q->inbox.lock);
            t->queued_bytes += n * st.slot_size;
        }
    }
    qs_lock_release(&qs_global);
    for (int f = 0; f < QS_FRONT_NR; f++)
        if (qs_fronts[f]->totals)
            qs_fronts[f]->totals(t);
    struct qslab_large_stats ls;
    qslab_large_stats(&ls);
    t->large_count = ls.live;
    t->large_bytes = ls.live_bytes;
}

/* QSLAB_STATS=1: the report goes to a copy of stderr made at start-up, since
 * programs (coreutils among them) close stderr in their own exit handlers,
 * which run before qslab's destructor. */
static int stats_fd = -1;

QS_STARTUP void qs_stats_init(void)
{
    if (qs_env_bool("QSLAB_STATS", 0, "the statistics report at exit"))
        stats_fd = qs_os_dup_fd(2);
}

QS_STARTUP void qs_stats_at_exit(void)
{
    if (stats_fd >= 0)
        qs_stats_report(stats_fd);
}

/* control.c's snapshot (control.h): under qs_global, so that a cache being
 * destroyed waits until its figures are copied. */
size_t qs_stats_collect(const char *name, struct qs_ctl_cache *out, size_t max)
{
    size_t n = 0;
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        if (name && strcmp(c->name, name) != 0)
            continue;
        if (n < max) {
            struct qs_ctl_cache *o = &out[n];
            memcpy(o->name, c->name, sizeof(o->name));
            o->front = qs_front_of(c)->name;
            fill(c, &o->st);
            o->hiwater = QS_LOAD(c->hiwater);
            o->freebatch = QS_LOAD(c->freebatch);
            o->kmalloc = c->is_kmalloc;
        }
        n++;
    }
    qs_lock_release(&qs_global);
    return n;
}

/* ---- qslab_stats_json: every counter as one JSON document ----
 * Written through a small buffer flushed with write(2) (no allocation, no
 * stdio: callers may be inside malloc's users).  Caches are read under
 * qs_global, one fill() each, as qslab_slabinfo reads them; the keys of a
 * cache are those of `qslabinfo --json` (tools/qslabinfo_print.c), so that a
 * script reads either. */
struct jw {
    int fd;
    size_t len;
    char buf[512];
};

static void jw_flush(struct jw *w)
{
    qs_os_write(w->fd, w->buf, w->len);
    w->len = 0;
}

static void jw_putc(struct jw *w, char ch)
{
    if (w->len == sizeof w->buf)
        jw_flush(w);
    w->buf[w->len++] = ch;
}

static void jw_raw(struct jw *w, const char *s)
{
    while (*s)
        jw_putc(w, *s++);
}

static void jw_u64(struct jw *w, uint64_t v)
{
    char tmp[24];
    struct qs_buf b = {tmp, 0, sizeof tmp};
    qs_buf_u64(&b, v);
    jw_raw(w, tmp);
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void jw_str(struct jw *w, const char *s)
{
    jw_putc(w, '"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            jw_putc(w, '\\');
            jw_putc(w, (char)ch);
        } else if (ch < 0x20) {
            jw_raw(w, "\\u00");
            jw_putc(w, "0123456789abcdef"[ch >> 4]);
            jw_putc(w, "0123456789abcdef"[ch & 15]);
        } else {
            jw_putc(w, (char)ch);
        }
    }
    jw_putc(w, '"');
}

/* `, "key": v` (first: no comma) */
static void jw_key(struct jw *w, const char *key, bool first)
{
    if (!first)
        jw_raw(w, ", ");
    jw_putc(w, '"');
    jw_raw(w, key);
    jw_raw(w, "\": ");
}

static void jw_kv(struct jw *w, const char *key, uint64_t v)
{
    jw_key(w, key, false);
    jw_u64(w, v);
}

static void jw_cache(struct jw *w, qslab_cache *c, const struct qslab_cache_stats *st)
{
    char fl[QS_DEBUG_LETTERS_LEN] = "";
    if (c->debug)
        qs_debug_letters(c->debug, fl);
    jw_raw(w, "  {");
    jw_key(w, "name", true);
    jw_str(w, c->name);
    jw_kv(w, "id", c->id);
    jw_key(w, "front", false);
    jw_str(w, qs_front_of(c)->name);
    jw_key(w, "debug", false);
    jw_str(w, fl);
    jw_key(w, "kmalloc", false);
    jw_raw(w, c->is_kmalloc ? "true" : "false");
    jw_key(w, "ctor", false);
    jw_raw(w, c->ctor ? "true" : "false");
    jw_kv(w, "flags", c->flags);
    jw_kv(w, "align", c->align);
    jw_kv(w, "object_size", st->object_size);
    jw_kv(w, "slot_size", st->slot_size);
    jw_kv(w, "objs_per_slab", st->objs_per_slab);
    jw_kv(w, "order", st->order);
    jw_kv(w, "slab_bytes", st->slab_bytes);
    jw_kv(w, "active_objs", st->active_objs);
    jw_kv(w, "num_objs", st->num_objs);
    jw_kv(w, "num_slabs", st->num_slabs);
    jw_kv(w, "empty_slabs", st->empty_slabs);
    jw_kv(w, "partial_slabs", st->partial_slabs);
    jw_kv(w, "owner_slabs", st->owner_slabs);
    jw_kv(w, "queued_objs", st->queued_objs);
    jw_kv(w, "queues", st->nr_queues);
    jw_kv(w, "space", st->num_slabs * st->slab_bytes);
    jw_kv(w, "metadata_bytes", st->metadata_bytes);
    if (st->defrag_passes) { /* a mobile cache's defragmentation (api/defrag.c) */
        jw_kv(w, "defrag_passes", st->defrag_passes);
        jw_kv(w, "defrag_moved", st->defrag_moved);
        jw_kv(w, "defrag_declined", st->defrag_declined);
        jw_kv(w, "defrag_slabs", st->defrag_slabs);
    }
    jw_raw(w, ",\n   ");
    jw_key(w, "alloc", true);
    jw_u64(w, st->alloc);
    jw_kv(w, "alloc_fast", st->alloc_fast);
    jw_kv(w, "alloc_slow", st->alloc_slow);
    jw_kv(w, "free", st->free);
    jw_kv(w, "free_fast", st->free_fast);
    jw_kv(w, "free_slow", st->free_slow);
    jw_kv(w, "flush", st->flush);
    jw_kv(w, "remote_free", st->remote_free);
    jw_kv(w, "remote_batch", st->remote_batch);
    jw_kv(w, "claim", st->claim);
    jw_kv(w, "refill", st->refill);
    jw_kv(w, "new_slab", st->new_slab);
    jw_kv(w, "free_slab", st->free_slab);
    jw_kv(w, "node_alloc", st->node_alloc);
    jw_raw(w, ",\n   \"tunables\": {");
    jw_key(w, "hiwater", true);
    jw_u64(w, QS_LOAD(c->hiwater));
    jw_kv(w, "freebatch", QS_LOAD(c->freebatch));
    jw_kv(w, "limit", QS_LOAD(c->slab_limit));
    jw_kv(w, "batchcount", QS_LOAD(c->slab_batch));
    jw_kv(w, "shared", QS_LOAD(c->slab_shared));
    jw_raw(w, "}}");
}

extern size_t *const qs_page_chunk_bytes, *const qs_page_slot_bytes; /* page.c */
extern size_t *const qs_meta_mapped_bytes;                          /* meta.c */

int qs_stats_json(int fd)
{
    struct jw w = {.fd = fd};
    jw_raw(&w, "{");
    jw_key(&w, "pid", true);
    jw_u64(&w, (uint64_t)getpid());
    jw_kv(&w, "nr_nodes", (uint64_t)qs_nr_nodes);
    jw_key(&w, "owner", false);
    jw_str(&w, qs_owner_kind == QS_OWNER_CPU ? "cpu" : "thread");
    jw_key(&w, "owner_why", false);
    jw_str(&w, qs_owner_why);
    jw_kv(&w, "nr_cpu_ids", (uint64_t)(qs_nr_cpu_ids > 0 ? qs_nr_cpu_ids : 0));
    jw_key(&w, "front_default", false);
    jw_str(&w, qs_fronts[qs_front_default]->name);
    jw_raw(&w, ",\n \"caches\": [");
    qs_lock_acquire(&qs_global);
    bool first = true;
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qslab_cache_stats st;
        fill(c, &st);
        jw_raw(&w, first ? "\n" : ",\n");
        first = false;
        jw_cache(&w, c, &st);
    }
    qs_lock_release(&qs_global);
    jw_raw(&w, "],\n");
    struct qslab_large_stats ls;
    qslab_large_stats(&ls);
    jw_raw(&w, " \"large\": {");
    jw_key(&w, "alloc", true);
    jw_u64(&w, ls.alloc);
    jw_kv(&w, "free", ls.free);
    jw_kv(&w, "live", ls.live);
    jw_kv(&w, "live_bytes", ls.live_bytes);
    jw_raw(&w, ", \"buckets\": [");
    const struct qs_large_counters *lc = &qs_large;
    for (unsigned b = 0; b < QS_LARGE_BUCKETS; b++) { /* as qslabinfo --json: every bucket */
        const struct qs_large_bucket *k = &lc->bucket[b];
        uint64_t lo = (uint64_t)1 << (QS_LARGE_BUCKET_SHIFT0 + b);
        jw_raw(&w, b ? ", {" : "{");
        jw_key(&w, "from", true);
        jw_u64(&w, lo);
        jw_kv(&w, "to", b + 1 < QS_LARGE_BUCKETS ? 2 * lo : 0);
        jw_kv(&w, "alloc", __atomic_load_n(&k->alloc, __ATOMIC_RELAXED));
        jw_kv(&w, "live", __atomic_load_n(&k->live, __ATOMIC_RELAXED));
        jw_kv(&w, "live_bytes", __atomic_load_n(&k->live_bytes, __ATOMIC_RELAXED));
        jw_putc(&w, '}');
    }
    jw_raw(&w, "]},\n");
    struct qslab_guard_stats gs;
    qslab_guard_stats(&gs);
    jw_raw(&w, " \"guard\": {");
    jw_key(&w, "rate", true);
    jw_u64(&w, gs.rate);
    jw_kv(&w, "slots", gs.slots);
    jw_kv(&w, "samples", gs.samples);
    jw_kv(&w, "pool_full", gs.pool_full);
    jw_kv(&w, "frees", gs.frees);
    jw_kv(&w, "live", gs.live);
    jw_kv(&w, "faults", gs.faults);
    jw_raw(&w, "},\n");
    jw_raw(&w, " \"pressure\": {");
    jw_key(&w, "source", true);
    jw_str(&w, qs_pressure_text());
    jw_kv(&w, "limit", __atomic_load_n(&qs_pressure.limit, __ATOMIC_RELAXED));
    jw_kv(&w, "events", __atomic_load_n(&qs_pressure.events, __ATOMIC_RELAXED));
    jw_kv(&w, "event_bytes", __atomic_load_n(&qs_pressure.event_bytes, __ATOMIC_RELAXED));
    jw_kv(&w, "high_trims", __atomic_load_n(&qs_pressure.high_trims, __ATOMIC_RELAXED));
    jw_kv(&w, "high_bytes", __atomic_load_n(&qs_pressure.high_bytes, __ATOMIC_RELAXED));
    jw_kv(&w, "trim_ms_max", __atomic_load_n(&qs_pressure.trim_ms_max, __ATOMIC_RELAXED));
    jw_raw(&w, "},\n");
    jw_raw(&w, " \"cached\": {");
    jw_key(&w, "max", true);
    jw_u64(&w, __atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED));
    jw_kv(&w, "cached", qs_node_cached_bytes());
    jw_kv(&w, "walks", __atomic_load_n(&qs_cached.walks, __ATOMIC_RELAXED));
    jw_kv(&w, "cuts", __atomic_load_n(&qs_cached.cuts, __ATOMIC_RELAXED));
    jw_kv(&w, "cut_bytes", __atomic_load_n(&qs_cached.cut_bytes, __ATOMIC_RELAXED));
    jw_raw(&w, "},\n");
    struct qs_totals t;
    qs_stats_totals(&t);
    jw_raw(&w, " \"totals\": {");
    jw_key(&w, "slab_bytes", true);
    jw_u64(&w, t.slab_bytes);
    jw_kv(&w, "inuse_bytes", t.inuse_bytes);
    jw_kv(&w, "queued_bytes", t.queued_bytes);
    jw_kv(&w, "empty_bytes", t.empty_bytes);
    jw_kv(&w, "slabs", t.slabs);
    jw_kv(&w, "large_count", t.large_count);
    jw_kv(&w, "large_bytes", t.large_bytes);
    /* what qslab has mapped besides: its slab chunks (their slots and
     * headers), and the metadata allocator's mappings (qslabinfo -T) */
    jw_kv(&w, "chunk_bytes", __atomic_load_n(qs_page_chunk_bytes, __ATOMIC_RELAXED));
    jw_kv(&w, "chunk_slot_bytes", __atomic_load_n(qs_page_slot_bytes, __ATOMIC_RELAXED));
    jw_kv(&w, "metadata_mapped", __atomic_load_n(qs_meta_mapped_bytes, __ATOMIC_RELAXED));
    jw_raw(&w, "}}\n");
    jw_flush(&w);
    return 0;
}
