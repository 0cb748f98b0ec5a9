/*
 * control_cmd.c - the control channel's requests, carried out by the
 * server thread (control.c): a connection's answer buffer, the cache a
 * request names pinned while the thread acts on it, qs_warn's lines
 * captured as the answer's body, and set, get, shrink, validate, stats and
 * help.  control.c's top comment argues who owns what.
 */
#define _GNU_SOURCE
#include "observe/control.h"
#include "observe/control_int.h"
#include "observe/tune.h"
#include "core/hooks.h"
#include "front/front.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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
        char *m = qs_meta_alloc(cap); /* qslab's own memory, not the program's heap */
        if (!m) {
            c->closing = true;
            return;
        }
        if (c->out) {
            memcpy(m, c->out, c->outlen);
            qs_meta_free(c->out, c->outcap);
        }
        c->out = m;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, p, n);
    c->outlen += n;
}

void ctl_out_printf(struct client *c, const char *fmt, ...)
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
    (void)qs_cache_find(name); /* which makes a kmalloc class not used yet */
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
static size_t caches_snapshot(struct server *s, const char *name)
{
    for (;;) {
        size_t n = qs_stats_collect(name, s->snap, s->snap_max);
        if (n <= s->snap_max)
            return n;
        struct qs_ctl_cache *m = qs_meta_alloc((n + 16) * sizeof(*m));
        if (!m)
            return s->snap_max; /* as many as fit */
        if (s->snap)
            qs_meta_free(s->snap, s->snap_max * sizeof(*m));
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
    if (strcmp(attr, "debug") == 0 && len >= QS_DEBUG_LETTERS_LEN) { /* QS_DBG_* bits: their letters, - for none */
        size_t k = 0;
        for (int i = 0; i < 8; i++)
            if (v & (1ul << i))
                buf[k++] = QS_DEBUG_LETTERS[i];
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
    bool all = strcmp(r->cache, "*") == 0; /* (qs_tune walks them under qs_global) */
    /* qs_tune finds the cache by name: the first of that name, which
     * stays linked, and first, while pinned (a cache made later of the same
     * name is appended).  None: answered here, not found later by name
     * when it may be unpinned. */
    if (!all && !pin(r->cache)) {
        unpin();
        ctl_out_printf(c, "error: no cache named %s\n", r->cache);
        return;
    }
    bool had = !all && qs_tune_get(r->cache, r->attr, &before) == 0;
    capture_begin(s);
    int rc = qs_tune(r->cache, r->attr, r->value);
    int e = errno;
    qs_warn_capture(NULL);
    if (had && rc == 0 && qs_tune_get(r->cache, r->attr, &after) != 0)
        had = false;
    unpin();
    if (rc != 0) {
        char why[600];
        if (!captured(s, c, why, sizeof why)[0])
            snprintf(why, sizeof why, "tune %s %s=%s refused: %s", r->cache, r->attr, r->value,
                     strerror(e));
        ctl_out_printf(c, "error: %s\n", why);
        return;
    }
    char b1[24], b2[24];
    if (had)
        ctl_out_printf(c, "%s %s %s -> %s\n", r->cache, r->attr, value_str(r->attr, before, b1, sizeof b1),
                   value_str(r->attr, after, b2, sizeof b2));
    else
        ctl_out_printf(c, "%s %s = %s\n", r->cache, r->attr, r->value);
    ctl_out_printf(c, "ok\n");
}

static void do_get(struct client *c, const struct qs_ctl_req *r)
{
    unsigned long v;
    qslab_cache *k = pin(r->cache);
    int rc = k ? qs_tune_get(r->cache, r->attr, &v) : -1;
    unpin();
    char buf[24];
    if (rc == 0)
        ctl_out_printf(c, "%s\nok\n", value_str(r->attr, v, buf, sizeof buf));
    else if (!k)
        ctl_out_printf(c, "error: no cache named %s\n", r->cache);
    else
        ctl_out_printf(c, "error: unknown attribute %s\n", r->attr);
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
            ctl_out_printf(c, "error: no cache named %s\n", r->cache);
            return;
        }
        bytes = qs_api_hooks.cache_shrink(k);
        unpin();
    } else {
        bytes = qs_api_hooks.trim();
    }
    ctl_out_printf(c, "freed %zu bytes\nok\n", bytes);
}

static void do_validate(struct server *s, struct client *c, const struct qs_ctl_req *r)
{
    size_t n = caches_snapshot(s, r->cache[0] ? r->cache : NULL), bad = 0, done = 0;
    if (r->cache[0] && n == 0) {
        ctl_out_printf(c, "error: no cache named %s\n", r->cache);
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
    ctl_out_printf(c, "validated %zu cache%s, %zu with problems\n", done, done == 1 ? "" : "s", bad);
    if (bad)
        ctl_out_printf(c, "error: %zu cache%s with problems\n", bad, bad == 1 ? "" : "s");
    else
        ctl_out_printf(c, "ok\n");
}

static void do_stats(struct server *s, struct client *c, const struct qs_ctl_req *r)
{
    size_t n = caches_snapshot(s, r->cache[0] ? r->cache : NULL);
    if (r->cache[0] && n == 0) {
        ctl_out_printf(c, "error: no cache named %s\n", r->cache);
        return;
    }
    for (size_t i = 0; i < n && i < s->snap_max; i++) {
        const struct qs_ctl_cache *k = &s->snap[i];
        const struct qslab_cache_stats *t = &k->st;
        ctl_out_printf(c,
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
    if (!r->cache[0]) { /* every cache: the process's memory pressure too (core/pressure.c) */
        const char *src = qs_pressure_text();
        size_t kind = strcspn(src, " ");
        ctl_out_printf(c,
                       "pressure=%.*s events=%lu event_bytes=%lu high_trims=%lu high_bytes=%lu "
                       "limit=%lu trim_ms_max=%lu\n",
                       (int)kind, src, __atomic_load_n(&qs_pressure.events, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_pressure.event_bytes, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_pressure.high_trims, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_pressure.high_bytes, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_pressure.limit, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_pressure.trim_ms_max, __ATOMIC_RELAXED));
        /* and the cached-memory cap (core/page.c, node.c) */
        ctl_out_printf(c, "cached_max=%lu cached=%zu cached_walks=%lu cached_cuts=%lu "
                          "cached_cut_bytes=%lu\n",
                       __atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED), qs_node_cached_bytes(),
                       __atomic_load_n(&qs_cached.walks, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_cached.cuts, __ATOMIC_RELAXED),
                       __atomic_load_n(&qs_cached.cut_bytes, __ATOMIC_RELAXED));
    }
    ctl_out_printf(c, "ok\n");
}

void ctl_handle_line(struct server *s, struct client *c, const char *line, size_t len)
{
    struct qs_ctl_req r;
    char err[256];
    if (qs_ctl_parse(line, len, &r, err, sizeof err) != 0) {
        ctl_out_printf(c, "error: %s\n", err);
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
        for (unsigned k = 0; qs_ctl_usage(k); k++)
            ctl_out_printf(c, "%s\n", qs_ctl_usage(k));
        ctl_out_printf(c, "ok\n");
        break;
    default: /* quit */
        ctl_out_printf(c, "ok\n");
        c->closing = true;
    }
}
