/*
 * observe/stats.h - statistics summed on read (stats.c).
 */
#ifndef QSLAB_STATS_H
#define QSLAB_STATS_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- stats.c ---- (qs_stats_init at start-up, the others after it) */
void qs_stats_at_exit(void);
void qs_stats_init(void);
void qs_stats_totals(struct qs_totals *t);
/* qslab_slabinfo, qslab_stats_report, qslab_stats_json (qslab.h; their
 * entry points: api/entry.c); qs_stats_json: fd >= 0 */
void qs_slabinfo(int fd);
void qs_stats_report(int fd);
int qs_stats_json(int fd);
/* The report's "Pressure: ..." line, without its newline (the control
 * channel's `stats` ends with it too) */
void qs_stats_pressure_line(struct qs_buf *b);
/* The report's "Cached: ..." line (the cached-memory cap), without its
 * newline; takes qs_global */
void qs_stats_cached_line(struct qs_buf *b);

#pragma GCC visibility pop

#endif /* QSLAB_STATS_H */
