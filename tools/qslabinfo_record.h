/*
 * qslabinfo_record.h - qslabinfo's --record mode (qslabinfo_record.c).
 */
#ifndef QSLAB_TOOLS_RECORD_H
#define QSLAB_TOOLS_RECORD_H

#include "reader.h"

/* Sample the attached process (s: attach() done) every interval_ms (10 to
 * 3600000: main checks the options) into file ("-": stdout), count samples
 * (0: until it exits or a signal); 0, or the process ends through die()
 * with one line. */
int record_run(struct snap *s, const char *file, long interval_ms, long count);

#endif
