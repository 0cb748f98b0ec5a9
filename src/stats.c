/*
 * stats.c - statistics gathered from the queues' counters, and the reports
 * built on them (one gatherer, thin front ends):
 *   qslab_cache_stats   one cache, as a struct
 *   qslab_slabinfo      /proc/slabinfo version 2.1 text
 *   qslab_stats_report  SLUB "slabinfo -AD" style: most active caches first
 * Counters live in the queues (one writer each, relaxed stores); queues are
 * never freed while their cache lives, so a sum over cache->queues under
 * qs_global sees every event, including those of exited threads.
 */
#include "front.h"
#include "stats_calc.h"

#include <errno.h>
#include <string.h>

void qs_stats_sum(qslab_cache *c, unsigned long *sum)
{
    memset(sum, 0, sizeof(unsigned long) * QS_STAT_NR);
    bool queues = qs_front_of(c)->queues;
    for (struct qs_queue *q = c->queues; q; q = q->all_next) {
        struct qs_queue_raw r;
        /* the seqcount pairs nr with moved (qs_queue_nr_set); an owner busy
         * in its slow paths gets a few tries, then its last reading */
        for (int tries = 0;; tries++) {
            unsigned seq = __atomic_load_n(&q->nr_seq, __ATOMIC_ACQUIRE);
            r.moved = QS_LOAD(q->moved);
            for (int i = 0; i < QS_STAT_NR; i++)
                r.stat[i] = QS_LOAD(q->stat[i]);
            r.top = QS_LOAD(q->top); /* after the slow pops: undercount, never over */
            r.fb = QS_LOAD(q->fb); /* a CPU's open batch: fast frees not counted yet */
            r.fb_base = QS_LOAD(q->fb_base);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if ((!(seq & 1) && QS_LOAD(q->nr_seq) == seq) || tries >= 1000)
                break;
        }
        r.sl_pops = QS_LOAD(q->sl.pops);
        r.sl_pushes = QS_LOAD(q->sl.pushes);
        /* fast pops count in top and wrap at 2^43: accumulate what moved
         * since the last reading (exact while every queue is read at least
         * once per 2^43 of its allocations; the purger reads them all) */
        qs_calc_queue(&r, queues, &q->pops_seen, &q->pops_raw, sum);
    }
    for (int i = 0; i < QS_STAT_NR; i++)
        sum[i] += QS_LOAD(c->orphan_stat[i]);
}

static void fill(qslab_cache *c, struct qslab_cache_stats *st)
{
    unsigned long sum[QS_STAT_NR];
    qs_stats_sum(c, sum);
    memset(st, 0, sizeof(*st));
    qs_calc_fill(sum, st);
    for (int n = 0; n < qs_nr_nodes; n++) /* the FIFO's, and SLAB's free slabs */
        st->empty_slabs += QS_LOAD(c->nodes[n].nr_empty) + QS_LOAD(c->nodes[n].nr_free_slabs);
    for (struct qs_queue *q = c->queues; q; q = q->all_next) { /* qs_global held */
        st->empty_slabs += QS_LOAD(q->nr_stash);
        qs_lock_acquire(&q->inbox.lock);
        st->queued_objs += QS_TOP_NR(QS_LOAD(q->top)) + q->inbox.nr;
        qs_lock_release(&q->inbox.lock);
    }
    st->object_size = c->obj_size;
    st->slot_size = c->slot_size;
    st->order = QS_LOAD(c->order);
    st->objs_per_slab = qs_front_objs_per_slab(c, st->order);
}

QSLAB_EXPORT int qslab_cache_stats(qslab_cache *c, struct qslab_cache_stats *st)
{
    if (!c || !st) {
        errno = EINVAL;
        return -1;
    }
    qs_lock_acquire(&qs_global);
    fill(c, st);
    qs_lock_release(&qs_global);
    return 0;
}

static void col(struct qs_buf *b, uint64_t v, size_t width)
{
    size_t from = b->len;
    qs_buf_u64(b, v);
    qs_buf_pad(b, width, true, from);
}

static void flush_line(int fd, struct qs_buf *b)
{
    qs_os_write(fd, b->p, b->len);
    b->len = 0;
}

QSLAB_EXPORT void qslab_slabinfo(int fd)
{
    char line[256];
    struct qs_buf b = {line, 0, sizeof(line)};
    qs_init();
    qs_buf_str(&b, QS_SLABINFO_HEADER);
    flush_line(fd, &b);
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qslab_cache_stats st;
        fill(c, &st);
        bool slab = c->front == QS_FRONT_SLAB; /* SLAB's own: limit, batchcount, shared */
        char fl[8] = "";
        if (c->debug) /* every slab of the cache is a debug slab */
            qs_debug_flags_str(c, fl);
        struct qs_slabinfo_row row = {
            .name = c->name,
            .front = qs_front_of(c)->name,
            .st = &st,
            .limit = slab ? QS_LOAD(c->slab_limit) : QS_LOAD(c->hiwater),
            .batchcount = slab ? QS_LOAD(c->slab_batch) : QS_LOAD(c->freebatch),
            .sharedfactor = slab ? QS_LOAD(c->slab_shared) : 0,
            .debug = fl,
        };
        b.len = qs_slabinfo_line(line, sizeof(line), &row);
        flush_line(fd, &b);
    }
    qs_lock_release(&qs_global);
}

static unsigned pct(unsigned long part, unsigned long whole)
{
    return whole ? (unsigned)(part * 100 / whole) : 0;
}

QSLAB_EXPORT void qslab_stats_report(int fd)
{
    char line[256];
    struct qs_buf b = {line, 0, sizeof(line)};
    qs_init();
    qs_buf_str(&b, "Name                   Objects      Alloc       Free %Fast   Remote  Batches   "
                   "Claims  Slabs O Front\n");
    flush_line(fd, &b);
    qs_lock_acquire(&qs_global);
    /* most active first (slabinfo -A), caches without activity left out;
     * selection by repeated maximum keeps this allocation-free */
    unsigned long last = ~0ul;
    const qslab_cache *last_c = NULL;
    for (;;) {
        qslab_cache *best = NULL;
        unsigned long best_act = 0;
        bool passed = last_c == NULL;
        for (qslab_cache *c = qs_caches; c; c = c->next) {
            struct qslab_cache_stats st;
            fill(c, &st);
            unsigned long act = st.alloc + st.free;
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
            char fl[8];
            qs_debug_flags_str(best, fl);
            qs_buf_putc(&b, ' ');
            qs_buf_str(&b, fl);
        }
        qs_buf_putc(&b, '\n');
        flush_line(fd, &b);
        last = best_act;
        last_c = best;
    }
    qs_lock_release(&qs_global);
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
    qs_buf_str(&b, "Owner: "); /* which owner kind is in force, and why */
    qs_buf_str(&b, qs_owner_why);
    qs_buf_putc(&b, '\n');
    flush_line(fd, &b);
}

void qs_stats_totals(struct qs_totals *t)
{
    memset(t, 0, sizeof(*t));
    qs_init();
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

void qs_stats_init(void)
{
    const char *v = qs_os_getenv("QSLAB_STATS");
    if (v && v[0] == '1')
        stats_fd = qs_os_dup_fd(2);
}

void qs_stats_at_exit(void)
{
    if (stats_fd >= 0)
        qslab_stats_report(stats_fd);
}
