/*
 * qslabinfo_control.h - qslabinfo's client of the control channel
 * (src/observe/control.h: the protocol; docs/observability.md, "Control channel"):
 *   --set CACHE ATTR=VALUE, --get CACHE ATTR, --shrink [CACHE],
 *   --validate [CACHE], --control-stats [CACHE]   (with -p PID)
 */
#ifndef QSLABINFO_CONTROL_H
#define QSLABINFO_CONTROL_H

#include <stdbool.h>

/* getopt_long codes of the options above */
enum { QCTL_SET = 0x100, QCTL_GET, QCTL_SHRINK, QCTL_VALIDATE, QCTL_STATS };

/* Take option `code` (its argument `arg`, and the words it reads after it
 * from argv[*optind], advancing *optind).  Exits with status 1 and one line
 * on a bad use. */
void qctl_option(int code, const char *arg, int argc, char **argv, int *optind, const char *prog);
/* Was a control option given? */
bool qctl_wanted(void);
/* Send the request to process pid and print its answer: the exit status
 * (0 ok; 1 refused, no socket, the request failed; 2 another protocol
 * version). */
int qctl_run(long pid, const char *prog);

#endif
