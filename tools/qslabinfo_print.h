/*
 * qslabinfo_print.h - qslabinfo's output modes (qslabinfo_print.c): each
 * prints one snapshot (s: snapshot() done) to stdout.
 */
#ifndef QSLAB_TOOLS_PRINT_H
#define QSLAB_TOOLS_PRINT_H

#include "reader.h"

extern int sort_mode;  /* the caches' order: 0 by name, 1 by space (-S), 2 by loss (-L) */
extern bool opt_empty; /* -e: caches without slabs too */

void print_default(struct snap *s);  /* a line per cache, after SLUB's slabinfo */
void print_nodes(struct snap *s);    /* -n: per NUMA node */
void print_owners(struct snap *s);   /* -l: per owner (CPU or thread) */
void print_plot(struct snap *s);     /* -X: plot-ready columns */
void print_activity(struct snap *s); /* -A: allocs, frees, % fast, ... */
int print_one(struct snap *s, const char *name); /* -r CACHE: everything about one cache */
void print_proc(struct snap *s);     /* --proc: /proc/slabinfo version 2.1 text */
void print_totals(const struct snap *s); /* -T: where the process's qslab memory is */
void print_json(const struct snap *s);   /* --json: every counter */

#endif
