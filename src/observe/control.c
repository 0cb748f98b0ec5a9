/*
 * control.c - the opt-in control channel (control.h for the protocol;
 * docs/observability.md, "Control channel"; docs/design.md, "The control
 * channel").
 *
 * With QSLAB_CONTROL=1 (read by cache.c's constructor) or
 * qslab_control_start(), the process serves a Unix stream socket
 *     DIR/<pid>.sock, mode 0600, in DIR of mode 0700 owned by its user,
 *     DIR = $QSLAB_CONTROL_DIR, else $XDG_RUNTIME_DIR/qslab, else
 *           /tmp/qslab-<euid>
 * from one background thread.  Peers of another user (SO_PEERCRED; root is
 * let in) get one line "error: refused: ..." and are disconnected.
 *
 * Like src/os/, this file talks to the OS directly (sockets, poll,
 * pthreads): the channel is Linux's, and nothing on an allocation path
 * calls into it.
 *
 * WHO OWNS WHAT (the concurrency argument):
 *   - `ctl` (running, thread, the listening socket, the wake pipe, the
 *     path) belongs to whoever holds ctl_lock: qslab_control_start/stop,
 *     the exit destructor and the fork handlers.  The server thread never
 *     touches `ctl` nor takes ctl_lock: it gets the two descriptors it
 *     uses by value (struct server_arg) and only reads them.  They are
 *     closed only after the thread was joined (stop), or in a fork child,
 *     where the thread does not exist.  So stop's pthread_join under
 *     ctl_lock cannot wait on a thread that waits for ctl_lock.
 *   - The connections (descriptors, buffers, deadlines) belong to the
 *     server thread alone, from accept to close.
 *   - The server thread calls the public API (qslab_tune, qslab_cache_stats
 *     through qs_stats_collect, qslab_cache_validate, qslab_cache_shrink,
 *     qslab_trim) like any thread of the program; each takes and releases
 *     its locks inside.  All socket I/O is non-blocking and happens between
 *     those calls, with no qslab lock held: a stalled or hostile peer can
 *     delay only the server thread, never an allocation.  Answers are built
 *     in memory first, then sent as the peer reads them.
 *   - A cache named in a request is pinned while the thread acts on it
 *     (pin(): found in the list and recorded in qs_ctl_pinned under
 *     qs_global; unpin() with release).  qslab_cache_destroy waits, under
 *     qs_global and before it unlinks the cache, until it is not pinned, so
 *     the pointer the thread holds stays valid; once unlinked, nobody finds
 *     it to pin it again.  The wait is short (one request's work) and the
 *     destroying thread holds no lock while it waits.
 *   - fork: prepare takes ctl_lock (so `ctl` is consistent in the child;
 *     it runs before qslab's own prepare, registered earlier, and a holder
 *     of ctl_lock never waits for the forking thread), the parent releases
 *     it; the child, which has no server thread, closes the listening
 *     socket and the wake pipe, forgets the path (the parent's: not
 *     unlinked) and marks the channel stopped.  The child serves nothing
 *     until it calls qslab_control_start().  Descriptors of connections
 *     open at the fork stay open in the child (it cannot know them
 *     safely); they are the parent's peers' and the child never reads them.
 */
#define _GNU_SOURCE
#include "observe/control.h"
#include "front/front.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------------------------------------ the parser */

static const struct verb {
    const char *name;
    int verb, min, max; /* words, the verb included */
    const char *usage;
} verbs[] = {
    {"set", QS_CTL_SET, 4, 4, "set CACHE ATTR VALUE"},
    {"get", QS_CTL_GET, 3, 3, "get CACHE ATTR"},
    {"shrink", QS_CTL_SHRINK, 1, 2, "shrink [CACHE]"},
    {"validate", QS_CTL_VALIDATE, 1, 2, "validate [CACHE]"},
    {"stats", QS_CTL_STATS, 1, 2, "stats [CACHE]"},
    {"help", QS_CTL_HELP, 1, 1, "help"},
    {"quit", QS_CTL_QUIT, 1, 1, "quit"},
};
#define NR_VERBS (sizeof(verbs) / sizeof(verbs[0]))

static int parse_fail(struct qs_ctl_req *req, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int parse_fail(struct qs_ctl_req *req, char *err, size_t errlen, const char *fmt, ...)
{
    memset(req, 0, sizeof(*req));
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void copy_token(char *dst, const char *src, size_t len)
{
    memcpy(dst, src, len);
    dst[len] = '\0';
}

int qs_ctl_parse(const char *line, size_t len, struct qs_ctl_req *req, char *err, size_t errlen)
{
    const char *tok[4];
    size_t tlen[4], nt = 0;
    memset(req, 0, sizeof(*req));
    if (errlen)
        err[0] = '\0';
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return parse_fail(req, err, errlen, "empty request (help lists the requests)");
    if (len >= QS_CTL_LINE_MAX)
        return parse_fail(req, err, errlen, "request line over %d bytes", QS_CTL_LINE_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < 0x20 || ch > 0x7e)
            return parse_fail(req, err, errlen,
                              "byte 0x%02x at offset %zu: a request is printable ASCII", ch, i);
    }
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && line[j] != ' ')
            j++;
        if (j == i)
            return parse_fail(req, err, errlen,
                              "space at offset %zu: words are separated by one space", i);
        if (nt == 4)
            return parse_fail(req, err, errlen, "more than 4 words");
        if (j - i >= QS_CTL_TOKEN_MAX)
            return parse_fail(req, err, errlen, "word %zu is over %d bytes", nt + 1,
                              QS_CTL_TOKEN_MAX - 1);
        tok[nt] = line + i;
        tlen[nt++] = j - i;
        if (j < len && ++j == len)
            return parse_fail(req, err, errlen, "space at the end of the request");
        i = j;
    }
    const struct verb *v = NULL;
    for (size_t k = 0; k < NR_VERBS && !v; k++)
        if (strlen(verbs[k].name) == tlen[0] && memcmp(verbs[k].name, tok[0], tlen[0]) == 0)
            v = &verbs[k];
    if (!v)
        return parse_fail(req, err, errlen, "unknown request '%.*s' (help lists the requests)",
                          (int)tlen[0], tok[0]);
    if ((int)nt < v->min || (int)nt > v->max)
        return parse_fail(req, err, errlen, "usage: %s", v->usage);
    if (nt > 1)
        copy_token(req->cache, tok[1], tlen[1]);
    if (nt > 2) {
        for (size_t i = 0; i < tlen[2]; i++)
            if (!((tok[2][i] >= 'a' && tok[2][i] <= 'z') || tok[2][i] == '_'))
                return parse_fail(req, err, errlen, "attribute '%.*s' is not a tunable's name",
                                  (int)tlen[2], tok[2]);
        copy_token(req->attr, tok[2], tlen[2]);
    }
    if (nt > 3)
        copy_token(req->value, tok[3], tlen[3]);
    if (v->verb != QS_CTL_SET && strcmp(req->cache, "*") == 0)
        return parse_fail(req, err, errlen, "'*' (every cache) is for set only");
    req->verb = v->verb;
    return 0;
}

/* ------------------------------------------------------------ the server */

struct client {
    int fd; /* -1: a free slot */
    bool closing; /* close once the output is sent */
    uint64_t deadline; /* ms: the next request (or the output) by then */
    size_t inlen;
    char in[QS_CTL_LINE_MAX];
    char *out;
    size_t outlen, outoff, outcap;
};

struct server_arg {
    int listen_fd, wake_fd; /* owned by `ctl`; only read here */
    uid_t uid;
    pid_t pid;
    unsigned timeout_ms;
};

struct server {
    struct server_arg a;
    struct client cl[QS_CTL_CLIENTS];
    struct qs_buf cap; /* qs_warn's text while a request runs */
    char *cap_mem;
    struct qs_ctl_cache *snap; /* qs_stats_collect's output */
    size_t snap_max;
};
#define CAPTURE_BYTES (64u << 10)

static void drop(struct client *c)
{
    char sink[512];
    /* what the peer sent and we will not read: taken, so that the close
     * does not turn into a reset that loses the answer */
    for (int i = 0; i < 64 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    close(c->fd);
    c->fd = -1;
    free(c->out);
    c->out = NULL;
    c->outlen = c->outoff = c->outcap = 0;
    c->inlen = 0;
    c->closing = false;
}

static void out_bytes(struct client *c, const char *p, size_t n)
{
    if (c->outlen + n > QS_CTL_OUT_MAX) { /* the peer reads nothing: it goes */
        c->closing = true;
        c->outlen = c->outoff; /* nothing more is sent */
        return;
    }
    if (c->outlen + n > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 1024;
        while (cap < c->outlen + n)
            cap *= 2;
        char *m = realloc(c->out, cap);
        if (!m) {
            c->closing = true;
            return;
        }
        c->out = m;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, p, n);
    c->outlen += n;
}

static void out_printf(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct client *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    out_bytes(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A line of an answer's body: never a terminator ("ok", "error: ...") */
static void out_body(struct client *c, const char *line, size_t n)
{
    if ((n == 2 && memcmp(line, "ok", 2) == 0) || (n >= 6 && memcmp(line, "error:", 6) == 0))
        out_bytes(c, "  ", 2);
    out_bytes(c, line, n);
    out_bytes(c, "\n", 1);
}

/* The captured qs_warn lines, each without its "qslab: ": as body lines,
 * or (first_only) the first one into buf. */
static const char *captured(struct server *s, struct client *c, char *buf, size_t len)
{
    const char *p = s->cap.p, *end = s->cap.p + s->cap.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        const char *t = p;
        if ((size_t)(nl - t) >= 7 && memcmp(t, "qslab: ", 7) == 0)
            t += 7;
        if (buf) {
            snprintf(buf, len, "%.*s", (int)(nl - t), t);
            return buf;
        }
        out_body(c, t, (size_t)(nl - t));
        p = nl + 1;
    }
    if (buf && len)
        buf[0] = '\0';
    return buf;
}

/* ---- acting on a cache by name: pinned (control.h) ---- */
qslab_cache *qs_ctl_pinned;

/* The live cache named `name`, pinned until unpin(); NULL if none. */
static qslab_cache *pin(const char *name)
{
    qs_lock_acquire(&qs_global);
    qslab_cache *c = qs_caches;
    while (c && strcmp(c->name, name) != 0)
        c = c->next;
    __atomic_store_n(&qs_ctl_pinned, c, __ATOMIC_RELAXED); /* read under qs_global */
    qs_lock_release(&qs_global);
    return c;
}

static void unpin(void)
{
    /* what this thread read of the cache happens before its destroy's frees */
    __atomic_store_n(&qs_ctl_pinned, NULL, __ATOMIC_RELEASE);
}

static void capture_begin(struct server *s)
{
    s->cap.len = 0;
    s->cap.p[0] = '\0';
    qs_warn_capture(&s->cap);
}

/* The caches' figures, one cache (name) or every one; NULL on ENOMEM. */
static size_t snapshot(struct server *s, const char *name)
{
    for (;;) {
        size_t n = qs_stats_collect(name, s->snap, s->snap_max);
        if (n <= s->snap_max)
            return n;
        struct qs_ctl_cache *m = realloc(s->snap, (n + 16) * sizeof(*m));
        if (!m)
            return s->snap_max; /* as many as fit */
        s->snap = m;
        s->snap_max = n + 16;
    }
}

/* A tunable's value as its setter spells it: the front end by name (what
 * set accepts and qslabinfo shows), the others as numbers. */
static const char *value_str(const char *attr, unsigned long v, char *buf, size_t len)
{
    if (strcmp(attr, "front") == 0 && v < QS_FRONT_NR)
        return qs_fronts[v]->name;
    if (strcmp(attr, "debug") == 0 && len >= 8) { /* QS_DBG_* bits: their letters, - for none */
        size_t k = 0;
        for (int i = 0; i < 7; i++)
            if (v & (1ul << i))
                buf[k++] = "FZPUTRV"[i];
        if (!k)
            buf[k++] = '-';
        buf[k] = '\0';
        return buf;
    }
    snprintf(buf, len, "%lu", v);
    return buf;
}

static void do_set(struct server *s, struct client *c, const struct qs_ctl_req *r)
{
    unsigned long before = 0, after = 0;
    bool all = strcmp(r->cache, "*") == 0; /* (qslab_tune walks them under qs_global) */
    /* qslab_tune finds the cache by name: the first of that name, which
     * stays linked, and first, while pinned (a cache made later of the same
     * name is appended).  None: answered here, not found later by name
     * when it may be unpinned. */
    if (!all && !pin(r->cache)) {
        unpin();
        out_printf(c, "error: no cache named %s\n", r->cache);
        return;
    }
    bool had = !all && qslab_tune_get(r->cache, r->attr, &before) == 0;
    capture_begin(s);
    int rc = qslab_tune(r->cache, r->attr, r->value);
    int e = errno;
    qs_warn_capture(NULL);
    if (had && rc == 0 && qslab_tune_get(r->cache, r->attr, &after) != 0)
        had = false;
    unpin();
    if (rc != 0) {
        char why[600];
        if (!captured(s, c, why, sizeof why)[0])
            snprintf(why, sizeof why, "tune %s %s=%s refused: %s", r->cache, r->attr, r->value,
                     strerror(e));
        out_printf(c, "error: %s\n", why);
        return;
    }
    char b1[24], b2[24];
    if (had)
        out_printf(c, "%s %s %s -> %s\n", r->cache, r->attr, value_str(r->attr, before, b1, sizeof b1),
                   value_str(r->attr, after, b2, sizeof b2));
    else
        out_printf(c, "%s %s = %s\n", r->cache, r->attr, r->value);
    out_printf(c, "ok\n");
}

static void do_get(struct client *c, const struct qs_ctl_req *r)
{
    unsigned long v;
    qslab_cache *k = pin(r->cache);
    int rc = k ? qslab_tune_get(r->cache, r->attr, &v) : -1;
    unpin();
    char buf[24];
    if (rc == 0)
        out_printf(c, "%s\nok\n", value_str(r->attr, v, buf, sizeof buf));
    else if (!k)
        out_printf(c, "error: no cache named %s\n", r->cache);
    else
        out_printf(c, "error: unknown attribute %s\n", r->attr);
}

/* A request naming a cache acts on it pinned (pin(): a destroy of it waits);
 * stats copy under qs_global. */
static void do_shrink(struct client *c, const struct qs_ctl_req *r)
{
    size_t bytes;
    if (r->cache[0]) {
        qslab_cache *k = pin(r->cache);
        if (!k) {
            unpin();
            out_printf(c, "error: no cache named %s\n", r->cache);
            return;
        }
        bytes = qslab_cache_shrink(k);
        unpin();
    } else {
        bytes = qslab_trim();
    }
    out_printf(c, "freed %zu bytes\nok\n", bytes);
}

static void do_validate(struct server *s, struct client *c, const struct qs_ctl_req *r)
{
    size_t n = snapshot(s, r->cache[0] ? r->cache : NULL), bad = 0, done = 0;
    if (r->cache[0] && n == 0) {
        out_printf(c, "error: no cache named %s\n", r->cache);
        return;
    }
    for (size_t i = 0; i < n && i < s->snap_max; i++) {
        qslab_cache *k = pin(s->snap[i].name);
        if (!k) {
            unpin();
            continue; /* destroyed since */
        }
        capture_begin(s);
        int rc = qslab_cache_validate(k);
        qs_warn_capture(NULL);
        unpin();
        done++;
        if (rc != 0) {
            bad++;
            captured(s, c, NULL, 0);
        }
    }
    out_printf(c, "validated %zu cache%s, %zu with problems\n", done, done == 1 ? "" : "s", bad);
    if (bad)
        out_printf(c, "error: %zu cache%s with problems\n", bad, bad == 1 ? "" : "s");
    else
        out_printf(c, "ok\n");
}

static void do_stats(struct server *s, struct client *c, const struct qs_ctl_req *r)
{
    size_t n = snapshot(s, r->cache[0] ? r->cache : NULL);
    if (r->cache[0] && n == 0) {
        out_printf(c, "error: no cache named %s\n", r->cache);
        return;
    }
    for (size_t i = 0; i < n && i < s->snap_max; i++) {
        const struct qs_ctl_cache *k = &s->snap[i];
        const struct qslab_cache_stats *t = &k->st;
        out_printf(c,
                   "name=%s front=%s kmalloc=%d object_size=%zu slot_size=%zu objs_per_slab=%u "
                   "order=%u hiwater=%lu freebatch=%lu active_objs=%lu num_objs=%lu "
                   "num_slabs=%lu empty_slabs=%lu queued_objs=%lu alloc=%lu alloc_fast=%lu "
                   "alloc_slow=%lu free=%lu free_fast=%lu free_slow=%lu flush=%lu "
                   "remote_free=%lu remote_batch=%lu claim=%lu refill=%lu new_slab=%lu "
                   "free_slab=%lu node_alloc=%lu\n",
                   k->name, k->front, k->kmalloc, t->object_size, t->slot_size, t->objs_per_slab,
                   t->order, k->hiwater, k->freebatch, t->active_objs, t->num_objs, t->num_slabs,
                   t->empty_slabs, t->queued_objs, t->alloc, t->alloc_fast, t->alloc_slow, t->free,
                   t->free_fast, t->free_slow, t->flush, t->remote_free, t->remote_batch, t->claim,
                   t->refill, t->new_slab, t->free_slab, t->node_alloc);
    }
    out_printf(c, "ok\n");
}

static void handle_line(struct server *s, struct client *c, const char *line, size_t len)
{
    struct qs_ctl_req r;
    char err[256];
    if (qs_ctl_parse(line, len, &r, err, sizeof err) != 0) {
        out_printf(c, "error: %s\n", err);
        return;
    }
    switch (r.verb) {
    case QS_CTL_SET:
        do_set(s, c, &r);
        break;
    case QS_CTL_GET:
        do_get(c, &r);
        break;
    case QS_CTL_SHRINK:
        do_shrink(c, &r);
        break;
    case QS_CTL_VALIDATE:
        do_validate(s, c, &r);
        break;
    case QS_CTL_STATS:
        do_stats(s, c, &r);
        break;
    case QS_CTL_HELP:
        for (size_t k = 0; k < NR_VERBS; k++)
            out_printf(c, "%s\n", verbs[k].usage);
        out_printf(c, "ok\n");
        break;
    default: /* quit */
        out_printf(c, "ok\n");
        c->closing = true;
    }
}

static void take_lines(struct server *s, struct client *c, uint64_t now)
{
    while (!c->closing) {
        char *nl = memchr(c->in, '\n', c->inlen);
        if (!nl)
            break;
        size_t n = (size_t)(nl - c->in);
        handle_line(s, c, c->in, n);
        c->inlen -= n + 1;
        memmove(c->in, nl + 1, c->inlen);
        c->deadline = now + s->a.timeout_ms; /* the next request's time starts */
    }
    if (!c->closing && c->inlen == sizeof c->in) { /* no newline in a whole line's room */
        out_printf(c, "error: request line over %d bytes: closing\n", QS_CTL_LINE_MAX);
        c->closing = true;
        c->inlen = 0;
    }
}

static void flush_out(struct server *s, struct client *c, uint64_t now)
{
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            c->closing = true; /* the peer is gone */
            c->outoff = c->outlen;
            break;
        }
        c->outoff += (size_t)n;
        c->deadline = now + s->a.timeout_ms; /* the peer reads: it gets its time */
    }
    c->outoff = c->outlen = 0;
}

static void say_and_close(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say_and_close(int fd, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!send(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1,
                    MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
}

static void accept_all(struct server *s, uint64_t now)
{
    for (;;) {
        int fd = accept4(s->a.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or an error the next poll shows again */
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) {
            say_and_close(fd, "error: refused: the peer's credentials cannot be read\n");
            continue;
        }
        if (!qs_ctl_peer_ok(cr.uid, s->a.uid)) {
            say_and_close(fd,
                          "error: refused: uid %u is neither the user of process %d (uid %u) "
                          "nor root\n",
                          (unsigned)cr.uid, (int)s->a.pid, (unsigned)s->a.uid);
            continue;
        }
        struct client *c = NULL;
        for (int pass = 0; pass < 2 && !c; pass++) {
            for (int i = 0; i < QS_CTL_CLIENTS && !c; i++)
                if (s->cl[i].fd < 0)
                    c = &s->cl[i];
            for (int i = 0; i < QS_CTL_CLIENTS && !c && pass == 0; i++) {
                /* full: first let go of peers that hung up since the poll */
                struct pollfd p = {.fd = s->cl[i].fd, .events = POLLIN};
                if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
                    s->cl[i].outoff = s->cl[i].outlen = 0;
                    drop(&s->cl[i]);
                }
            }
        }
        if (!c) {
            say_and_close(fd, "error: busy: %d connections are served already; try again\n",
                          QS_CTL_CLIENTS);
            continue;
        }
        c->fd = fd;
        c->deadline = now + s->a.timeout_ms;
        out_printf(c, "qslab-control %d pid %d\n", QS_CTL_VERSION, (int)s->a.pid);
        flush_out(s, c, now);
    }
}

static void serve_client(struct server *s, struct client *c, short revents, uint64_t now)
{
    if (revents & POLLOUT)
        flush_out(s, c, now);
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && !c->closing) {
        ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, MSG_DONTWAIT);
        if (n > 0) {
            c->inlen += (size_t)n;
            take_lines(s, c, now);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            c->closing = true; /* the peer said all it will; queued answers still go */
        }
        flush_out(s, c, now);
    } else if ((revents & (POLLHUP | POLLERR)) && c->closing) {
        c->outoff = c->outlen = 0; /* nobody to send to */
    }
    if (c->closing && c->outoff == c->outlen)
        drop(c);
}

static void *server_main(void *arg)
{
    qs_os_thread_name("qslab-control");
    struct server *s = arg;
    struct pollfd pf[2 + QS_CTL_CLIENTS];
    int who[2 + QS_CTL_CLIENTS];
    for (;;) {
        uint64_t now = qs_os_now_ms();
        int np = 0, timeout = 1000;
        pf[np++] = (struct pollfd){.fd = s->a.wake_fd, .events = POLLIN};
        pf[np++] = (struct pollfd){.fd = s->a.listen_fd, .events = POLLIN};
        for (int i = 0; i < QS_CTL_CLIENTS; i++) {
            struct client *c = &s->cl[i];
            if (c->fd < 0)
                continue;
            if (now >= c->deadline) {
                if (c->closing) { /* its time to take the answer is over too */
                    c->outoff = c->outlen = 0;
                    drop(c);
                    continue;
                }
                out_printf(c, "error: no whole request within %u ms: closing\n",
                           s->a.timeout_ms);
                c->closing = true;
                c->deadline = now + s->a.timeout_ms; /* to read that line */
                flush_out(s, c, now);
                if (c->outoff == c->outlen) {
                    drop(c);
                    continue;
                }
            }
            uint64_t left = c->deadline - now;
            if (left < (uint64_t)timeout)
                timeout = (int)left + 1;
            who[np] = i;
            pf[np++] = (struct pollfd){
                .fd = c->fd,
                .events = (short)((c->closing ? 0 : POLLIN) | (c->outoff < c->outlen ? POLLOUT : 0)),
            };
        }
        int r = poll(pf, (nfds_t)np, timeout);
        if (r < 0 && errno != EINTR)
            qs_os_sleep_ms(10); /* (ENOMEM) not a busy loop */
        if (r <= 0)
            continue;
        if (pf[0].revents)
            break; /* stop */
        now = qs_os_now_ms();
        for (int k = 2; k < np; k++)
            if (pf[k].revents && s->cl[who[k]].fd >= 0)
                serve_client(s, &s->cl[who[k]], pf[k].revents, now);
        if (pf[1].revents & POLLIN)
            accept_all(s, now);
    }
    for (int i = 0; i < QS_CTL_CLIENTS; i++)
        if (s->cl[i].fd >= 0) {
            s->cl[i].outoff = s->cl[i].outlen = 0;
            drop(&s->cl[i]);
        }
    free(s->cap_mem);
    free(s->snap);
    free(s);
    return NULL;
}

/* ------------------------------------------------------------ start, stop */

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ctl_once = PTHREAD_ONCE_INIT;
static struct {
    bool running;
    pthread_t thread;
    int listen_fd, wake_rd, wake_wr;
    pid_t pid;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} ctl = {false, 0, -1, -1, -1, 0, ""};

static void fork_prepare(void)
{
    pthread_mutex_lock(&ctl_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&ctl_lock);
}

static void fork_child(void)
{
    if (ctl.running) { /* the thread is the parent's; so are the socket and its name */
        close(ctl.listen_fd);
        close(ctl.wake_rd);
        close(ctl.wake_wr);
        ctl.listen_fd = ctl.wake_rd = ctl.wake_wr = -1;
        ctl.path[0] = '\0';
        ctl.running = false;
    }
    pthread_mutex_unlock(&ctl_lock);
}

static void ctl_register_fork(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* A decimal number in [lo, hi], or dflt (with a warning if set but bad). */
static unsigned env_ms(const char *name, unsigned dflt, unsigned lo, unsigned hi)
{
    const char *v = qs_os_getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || v[0] < '0' || v[0] > '9' || n < lo || n > hi) {
        qs_warn("%s=%s ignored: allowed range is %u..%u ms", name, v, (unsigned long)lo,
                (unsigned long)hi);
        return dflt;
    }
    return (unsigned)n;
}

/* Make (or check) the private directory; its descriptor, or -1 (warned). */
static int private_dir(char *dir, size_t len, mode_t mode)
{
    const char *d = qs_os_getenv("QSLAB_CONTROL_DIR");
    const char *x = qs_os_getenv("XDG_RUNTIME_DIR");
    int n;
    if (d && *d) {
        if (d[0] != '/') {
            qs_warn("control: QSLAB_CONTROL_DIR=%s is not an absolute path", d);
            errno = EINVAL;
            return -1;
        }
        n = snprintf(dir, len, "%s", d);
    } else if (x && x[0] == '/') {
        n = snprintf(dir, len, "%s/qslab", x);
    } else {
        n = snprintf(dir, len, "/tmp/qslab-%u", (unsigned)geteuid());
    }
    if (n < 0 || (size_t)n >= len) {
        qs_warn("control: the directory name is too long for a socket");
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(dir, mode) != 0 && errno != EEXIST) {
        qs_warn("control: cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        qs_warn("control: %s is not a directory of uid %u (a symbolic link, or another "
                "user's): the control channel is not started",
                dir, (unsigned long)geteuid());
        if (fd >= 0)
            close(fd);
        errno = EPERM;
        return -1;
    }
    if ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0) {
        qs_warn("control: cannot make %s private: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Remove the sockets of processes that no longer exist (killed before
 * they could remove theirs). */
static void sweep_stale(int dfd)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        struct stat st;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || strcmp(end, ".sock") != 0 || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
            st.st_uid == geteuid())
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

/* ctl_lock held */
static int start_locked(void)
{
    if (ctl.running && ctl.pid == getpid())
        return 0;
    /* QSLAB_CONTROL_TEST_OPEN=1 (tests only): directory 0711, socket 0666,
     * so that another user reaches connect() and SO_PEERCRED alone refuses */
    const char *open_v = qs_os_getenv("QSLAB_CONTROL_TEST_OPEN");
    bool open_mode = open_v && strcmp(open_v, "1") == 0;
    char dir[sizeof(ctl.path)];
    int dfd = private_dir(dir, sizeof dir - 16, open_mode ? 0711 : 0700);
    if (dfd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int pn = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
    if (pn < 0 || (size_t)pn >= sizeof sa.sun_path) { /* (private_dir left room) */
        close(dfd);
        errno = ENAMETOOLONG;
        return -1;
    }
    sweep_stale(dfd);
    close(dfd);
    struct server *s = calloc(1, sizeof(*s));
    char *cap = malloc(CAPTURE_BYTES);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int wake[2] = {-1, -1};
    const char *what = "socket";
    if (!s || !cap || lfd < 0)
        goto fail;
    /* a file of this name is a dead process's that had our pid: replaced */
    if (unlink(sa.sun_path) != 0 && errno != ENOENT) {
        what = "unlink of the old socket";
        goto fail;
    }
    what = "bind";
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0)
        goto fail;
    what = "chmod";
    if (chmod(sa.sun_path, open_mode ? 0666 : 0600) != 0)
        goto fail_unlink;
    what = "listen";
    if (listen(lfd, 64) != 0)
        goto fail_unlink;
    what = "pipe";
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        goto fail_unlink;
    s->a = (struct server_arg){lfd, wake[0], geteuid(), getpid(),
                               env_ms("QSLAB_CONTROL_TIMEOUT_MS", QS_CTL_TIMEOUT_MS, 100, 600000)};
    s->cap = (struct qs_buf){cap, 0, CAPTURE_BYTES};
    s->cap_mem = cap;
    for (int i = 0; i < QS_CTL_CLIENTS; i++)
        s->cl[i].fd = -1;
    pthread_attr_t attr;
    sigset_t all, old;
    what = "pthread_create";
    if (pthread_attr_init(&attr) != 0)
        goto fail_unlink;
    pthread_attr_setstacksize(&attr, 256 << 10);
    /* the server takes none of the program's signals */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&ctl.thread, &attr, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        goto fail_unlink;
    }
    ctl.listen_fd = lfd;
    ctl.wake_rd = wake[0];
    ctl.wake_wr = wake[1];
    ctl.pid = getpid();
    memcpy(ctl.path, sa.sun_path, sizeof ctl.path);
    ctl.running = true;
    return 0;
fail_unlink:
    unlink(sa.sun_path);
fail:;
    int e = errno;
    qs_warn("control: %s of %s failed: %s", what, sa.sun_path, strerror(e));
    if (lfd >= 0)
        close(lfd);
    if (wake[0] >= 0) {
        close(wake[0]);
        close(wake[1]);
    }
    free(cap);
    free(s);
    errno = e;
    return -1;
}

/* ctl_lock held */
static void stop_locked(void)
{
    if (!ctl.running)
        return;
    /* the thread ends at its next poll (it holds no lock we hold) */
    (void)!write(ctl.wake_wr, "x", 1);
    pthread_join(ctl.thread, NULL);
    close(ctl.listen_fd);
    close(ctl.wake_rd);
    close(ctl.wake_wr);
    ctl.listen_fd = ctl.wake_rd = ctl.wake_wr = -1;
    unlink(ctl.path);
    ctl.path[0] = '\0';
    ctl.running = false;
}

QSLAB_EXPORT int qslab_control_start(void)
{
    qs_init();
    pthread_once(&ctl_once, ctl_register_fork);
    pthread_mutex_lock(&ctl_lock);
    int r = start_locked();
    pthread_mutex_unlock(&ctl_lock);
    return r;
}

QSLAB_EXPORT int qslab_control_stop(void)
{
    pthread_mutex_lock(&ctl_lock);
    bool was = ctl.running;
    stop_locked();
    pthread_mutex_unlock(&ctl_lock);
    if (!was) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

void qs_control_init(void)
{
    const char *v = qs_os_getenv("QSLAB_CONTROL");
    if (!v || !*v || strcmp(v, "0") == 0)
        return;
    if (strcmp(v, "1") != 0) {
        qs_warn("QSLAB_CONTROL=%s ignored (1 starts the control channel)", v);
        return;
    }
    (void)qslab_control_start(); /* a failure said why on stderr */
}

/* At exit (and at dlclose of libqslab.so, which must not leave the thread
 * running its unmapped code): stop the thread, remove the socket. */
__attribute__((destructor)) static void ctl_exit(void)
{
    pthread_mutex_lock(&ctl_lock);
    if (ctl.running && ctl.pid == getpid())
        stop_locked();
    pthread_mutex_unlock(&ctl_lock);
}
