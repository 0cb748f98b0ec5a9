/*
 * observe/stats.h - statistics summed on read (stats.c).
 */
#ifndef QSLAB_STATS_H
#define QSLAB_STATS_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- stats.c ---- */
void qs_stats_at_exit(void);
void qs_stats_init(void);
void qs_stats_totals(struct qs_totals *t);

#pragma GCC visibility pop

#endif /* QSLAB_STATS_H */
