/*
 * stats_calc.h - the arithmetic of the statistics, over counters already
 * read: one code for the in-process readers (stats.c: atomic loads under
 * qs_global) and for the reader of another process (tools/qslabinfo:
 * process_vm_readv).  Only the gathering differs (in process, a plain
 * memcpy of live queues would be a data race for TSan and would skip the
 * inbox lock); what is computed from the values, and the /proc/slabinfo
 * line, are these functions, and a queue's contribution, qs_calc_queue,
 * which is core's (core/internal.h, beside the counters it reads: the
 * in-process sum, qs_stats_sum, is the front layer's).  No libc beyond
 * string.h: the library calls them from inside malloc.
 */
#ifndef QSLAB_STATS_CALC_H
#define QSLAB_STATS_CALC_H

#include "core/internal.h"

#include <string.h>

/* The event fields of *st from the summed counters (queues' and orphan
 * ones); the caller zeroed *st and fills the rest (empty_slabs,
 * queued_objs, sizes, order, objs_per_slab). */
static inline void qs_calc_fill(const unsigned long *sum, struct qslab_cache_stats *st)
{
    st->alloc_fast = sum[QS_ALLOC_FAST];
    st->alloc_slow = sum[QS_ALLOC_SLOW];
    st->alloc = st->alloc_fast + st->alloc_slow;
    st->free_fast = sum[QS_FREE_FAST];
    st->free_slow = sum[QS_FREE_SLOW];
    st->free = st->free_fast + st->free_slow;
    st->flush = sum[QS_FLUSH];
    st->remote_free = sum[QS_REMOTE_FREE];
    st->remote_batch = sum[QS_REMOTE_BATCH];
    st->claim = sum[QS_CLAIM];
    st->refill = sum[QS_REFILL];
    st->new_slab = sum[QS_NEW_SLAB];
    st->free_slab = sum[QS_FREE_SLAB];
    st->node_alloc = sum[QS_NODE_ALLOC];
    st->active_objs = st->alloc - st->free;
    st->num_slabs = st->new_slab - st->free_slab;
    st->num_objs = sum[QS_NEW_OBJS] - sum[QS_FREE_OBJS];
}

/* ---- /proc/slabinfo version 2.1 (qslab_slabinfo, qslabinfo --proc) ---- */
#define QS_SLABINFO_HEADER                                                                         \
    "slabinfo - version: 2.1\n"                                                                    \
    "# name            <active_objs> <num_objs> <objsize> <objperslab> "                          \
    "<pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata "                    \
    "<active_slabs> <num_slabs> <sharedavail> : front <name>\n"

/* One cache's row: its statistics and what the line shows besides. */
struct qs_slabinfo_row {
    const char *name, *front;
    const struct qslab_cache_stats *st;
    unsigned long limit, batchcount, sharedfactor;
    const char *debug; /* the debug flags' letters, or "" */
};

struct qs_line {
    char *p;
    size_t len, cap;
};
static inline void qs_line_putc(struct qs_line *b, char c)
{
    if (b->len + 1 < b->cap)
        b->p[b->len++] = c;
    b->p[b->len < b->cap ? b->len : b->cap - 1] = '\0';
}
static inline void qs_line_str(struct qs_line *b, const char *s)
{
    while (*s)
        qs_line_putc(b, *s++);
}
/* v right-aligned in width columns (left-aligned with left) */
static inline void qs_line_u64(struct qs_line *b, uint64_t v, unsigned width, bool left)
{
    char tmp[24];
    unsigned n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (unsigned i = n; !left && i < width; i++)
        qs_line_putc(b, ' ');
    while (n)
        qs_line_putc(b, tmp[--n]);
}

/* The line of one cache, with its newline, into out[cap]; returns its length. */
static inline size_t qs_slabinfo_line(char *out, size_t cap, const struct qs_slabinfo_row *r)
{
    struct qs_line b = {out, 0, cap};
    const struct qslab_cache_stats *st = r->st;
    qs_line_str(&b, r->name);
    for (size_t w = strlen(r->name); w < 17; w++)
        qs_line_putc(&b, ' ');
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, st->active_objs, 6, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, st->num_objs, 6, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, st->slot_size, 6, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, st->objs_per_slab, 4, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, 1ul << st->order, 4, false);
    qs_line_str(&b, " : tunables ");
    qs_line_u64(&b, r->limit, 4, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, r->batchcount, 4, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, r->sharedfactor, 4, false);
    qs_line_str(&b, " : slabdata ");
    qs_line_u64(&b, st->num_slabs - st->empty_slabs, 6, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, st->num_slabs, 6, false);
    qs_line_putc(&b, ' ');
    qs_line_u64(&b, 0, 6, false);
    qs_line_str(&b, " : front ");
    qs_line_str(&b, r->front);
    if (r->debug[0]) { /* every slab of the cache is a debug slab */
        qs_line_str(&b, " : debug ");
        qs_line_str(&b, r->debug);
        qs_line_putc(&b, ' ');
        qs_line_u64(&b, st->num_slabs, 0, false);
    }
    qs_line_putc(&b, '\n');
    return b.len;
}

#endif /* QSLAB_STATS_CALC_H */
