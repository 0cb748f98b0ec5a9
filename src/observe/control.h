/*
 * control.h - the opt-in control channel (control.c; docs/observability.md,
 * "Control channel"): a Unix stream socket a process serves when
 * QSLAB_CONTROL=1 or qslab_control_start(), through which `qslabinfo -p PID
 * --set/--get/--shrink/--validate/--control-stats` steer it.
 *
 * The protocol (version QS_CTL_VERSION): the server greets with one line
 *     qslab-control 1 pid <PID>
 * (or, to a peer it refuses, one line "error: refused: ..." and closes);
 * then each request is one line of printable ASCII (tokens separated by one
 * space, at most QS_CTL_LINE_MAX bytes with its '\n'; one '\r' before the
 * '\n' is allowed) and each answer is zero or more lines ended by a line
 * "ok" or "error: <why>":
 *     set CACHE ATTR VALUE   qslab_tune (CACHE may be "*")
 *     get CACHE ATTR         qslab_tune_get
 *     shrink [CACHE]         qslab_cache_shrink, or qslab_trim
 *     validate [CACHE]       qslab_cache_validate, one or every cache
 *     stats [CACHE]          one line per cache: name=... key=value ...
 *     help                   the requests
 *     quit                   "ok", then the server closes
 *
 * Shared by the library and by the parser's unit test and fuzz target
 * (fuzz/fuzz_control.c), which call qs_ctl_parse() alone.
 */
#ifndef QSLAB_CONTROL_H
#define QSLAB_CONTROL_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

#define QS_CTL_VERSION 1
#define QS_CTL_LINE_MAX 4096   /* a request line, its '\n' included */
#define QS_CTL_TOKEN_MAX 64    /* a token, its terminating NUL included */
#define QS_CTL_CLIENTS 16      /* connections served at once; more: "busy" */
#define QS_CTL_TIMEOUT_MS 5000 /* a request must arrive whole within this */
#define QS_CTL_OUT_MAX (1u << 20) /* answers a peer leaves unread, at most */

enum qs_ctl_verb {
    QS_CTL_SET = 1,
    QS_CTL_GET,
    QS_CTL_SHRINK,
    QS_CTL_VALIDATE,
    QS_CTL_STATS,
    QS_CTL_HELP,
    QS_CTL_QUIT,
};

/* A parsed request: the verb and its tokens, each NUL-terminated ("" when
 * absent), each of printable ASCII without spaces. */
struct qs_ctl_req {
    int verb; /* enum qs_ctl_verb */
    char cache[QS_CTL_TOKEN_MAX];
    char attr[QS_CTL_TOKEN_MAX];
    char value[QS_CTL_TOKEN_MAX];
};

/* Parse one request line, the bytes [line, line + len) without the '\n'
 * (a last '\r' is dropped).  Pure: reads only those bytes, writes only *req
 * and err[0..errlen).  0, or -1 with a one-line reason in err (no "error: "
 * prefix, no newline) and *req zeroed. */
int qs_ctl_parse(const char *line, size_t len, struct qs_ctl_req *req, char *err, size_t errlen);
/* The usage line of the k-th request (help); NULL past the last. */
const char *qs_ctl_usage(unsigned k);

/* Whether a peer of uid `peer` may use the channel of a process whose
 * effective uid is `own`: the same user, or root. */
static inline bool qs_ctl_peer_ok(uint32_t peer, uint32_t own)
{
    return peer == own || peer == 0;
}

/* The cache the control thread acts on by pointer (NULL: none).  Set by
 * the control thread under qs_global, after finding the cache in the list;
 * cleared (release) when it is done.  qslab_cache_destroy (cache.c) waits,
 * before it unlinks a cache under qs_global, while the cache is pinned, so
 * the control thread never acts on a destroyed cache: after the unlink
 * nobody can pin it again, and a pin made before is waited for. */
extern qslab_cache *qs_ctl_pinned;

/* Start the channel at start-up when QSLAB_CONTROL=1 (cache.c's
 * constructor: a point where starting a thread is safe). */
void qs_control_init(void);
/* qslab_control_start (qslab.h), after start-up (its entry point, which
 * starts the library up: api/entry.c) */
int qs_control_start(void);

/* stats.c: the figures of caches gathered under qs_global (so no cache is
 * destroyed while it is read): the cache named `name`, or every cache
 * (name NULL).  Fills out[0..max) in list order; returns how many caches
 * matched (more than max: only max filled). */
struct qs_ctl_cache {
    char name[QS_NAME_MAX];
    const char *front; /* a static string */
    struct qslab_cache_stats st;
    unsigned long hiwater, freebatch;
    bool kmalloc;
};
size_t qs_stats_collect(const char *name, struct qs_ctl_cache *out, size_t max);

#pragma GCC visibility pop

#endif /* QSLAB_CONTROL_H */
