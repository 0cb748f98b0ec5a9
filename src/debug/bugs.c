/*
 * bugs.c - the debug front end's reports, on stderr: a bad object (BUG,
 * with its slab, tracks and hexdumps), what follows it (FIX in repair mode,
 * else the fatal handler), the trace of every allocation and free (T), a
 * corrupt free-list link, a pointer into a debug cache's slab that is not
 * an object's start, and a track's lines (also guard.c's).  Apart from the
 * checks (slot.c), which call them only when something is wrong.
 *
 * REPORTS are SLUB's: a first line "BUG <cache>: <what>", the bad range and
 * first bad byte, the slab, the owners (U), a hexdump of the object and its
 * red zones; written with write(2) (no stdio, no allocation).  Then the
 * fatal handler (default: abort).  If the handler returns, nothing is
 * corrupted: a bad free is not done (a double free) or done after the red
 * zones are restored (an overflow); a bad object on allocation is kept out
 * of use ("quarantined", counted as allocated).  Repair mode (R) prints
 * "FIX <cache>: Restoring ..." instead of calling the handler, restores,
 * counts and goes on.
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"

#include <dlfcn.h>
#include <string.h>

#define QS_DUMP_MAX 256 /* object bytes in a report's hexdump */

static const int report_fd = 2;

static void out(struct qs_buf *b)
{
    qs_buf_putc(b, '\n');
    qs_os_write(report_fd, b->p, b->len);
    b->len = 0;
}

static void put_hex2(struct qs_buf *b, unsigned v)
{
    qs_buf_putc(b, "0123456789abcdef"[(v >> 4) & 15]);
    qs_buf_putc(b, "0123456789abcdef"[v & 15]);
}

/* "0x55d0c1a2b3c4 func+0x1a (module+0x1234)" */
void dbg_put_addr(struct qs_buf *b, uintptr_t a)
{
    qs_buf_hex(b, a);
    Dl_info info;
    if (dladdr((void *)a, &info)) {
        if (info.dli_sname) {
            qs_buf_putc(b, ' ');
            qs_buf_str(b, info.dli_sname);
            qs_buf_putc(b, '+');
            qs_buf_hex(b, a - (uintptr_t)info.dli_saddr);
        }
        const char *f = info.dli_fname ? info.dli_fname : "?";
        const char *slash = strrchr(f, '/');
        qs_buf_str(b, " (");
        qs_buf_str(b, slash ? slash + 1 : f);
        qs_buf_putc(b, '+');
        qs_buf_hex(b, a - (uintptr_t)info.dli_fbase);
        qs_buf_putc(b, ')');
    }
}

static void put_track(struct qs_buf *b, const char *what, const struct qs_track *t)
{
    if (!t->when_ms) {
        qs_buf_str(b, what);
        qs_buf_str(b, ": never");
        out(b);
        return;
    }
    uint64_t now = qs_os_now_ms();
    qs_buf_str(b, what);
    qs_buf_str(b, " by thread ");
    qs_buf_u64(b, (uint64_t)t->tid);
    qs_buf_str(b, " on CPU ");
    qs_buf_u64(b, (uint64_t)t->cpu);
    qs_buf_str(b, ", ");
    qs_buf_u64(b, now - t->when_ms);
    qs_buf_str(b, " ms ago:");
    out(b);
    for (int i = 0; i < QS_TRACK_DEPTH && t->addrs[i]; i++) {
        qs_buf_str(b, i ? "  ? " : "    ");
        dbg_put_addr(b, t->addrs[i]);
        out(b);
    }
}

void qs_track_print(struct qs_buf *b, const char *what, const void *track)
{
    put_track(b, what, track);
}

void qs_report_line(struct qs_buf *b)
{
    out(b);
}

/* Hexdump [p, p+n) as lines of 16: "<label> 0x...: bb bb ...  ........"
 * (bytes the tools guard too: their reports are off meanwhile) */
static QS_NO_SANITIZE void dump(struct qs_buf *b, const char *label, const uint8_t *p, size_t n)
{
    VALGRIND_DISABLE_ERROR_REPORTING;
    for (size_t i = 0; i < n; i += 16) {
        size_t from = b->len;
        qs_buf_str(b, label);
        qs_buf_pad(b, 8, false, from);
        qs_buf_hex(b, (uintptr_t)(p + i));
        qs_buf_str(b, ": ");
        size_t k = n - i < 16 ? n - i : 16;
        for (size_t j = 0; j < 16; j++) {
            if (j < k) {
                put_hex2(b, p[i + j]);
                qs_buf_putc(b, ' ');
            } else {
                qs_buf_str(b, "   ");
            }
        }
        qs_buf_putc(b, ' ');
        for (size_t j = 0; j < k; j++)
            qs_buf_putc(b, p[i + j] >= 0x20 && p[i + j] < 0x7f ? (char)p[i + j] : '.');
        out(b);
    }
    VALGRIND_ENABLE_ERROR_REPORTING;
}

void dbg_report(qslab_cache *c, struct qs_slab *s, const char *obj, const struct problem *pb)
{
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "BUG ");
    qs_buf_str(&b, c->name);
    qs_buf_str(&b, ": ");
    qs_buf_str(&b, pb->what);
    out(&b);
    qs_buf_str(&b, "-----------------------------------------------------------------------------");
    out(&b);
    if (pb->bad) {
        qs_buf_hex(&b, (uintptr_t)pb->bad);
        qs_buf_putc(&b, '-');
        qs_buf_hex(&b, (uintptr_t)pb->bad_end - 1);
        qs_buf_str(&b, " @offset=");
        long off = (long)(pb->bad - (const uint8_t *)obj);
        if (off < 0) {
            qs_buf_putc(&b, '-');
            qs_buf_u64(&b, (uint64_t)-off);
        } else {
            qs_buf_u64(&b, (uint64_t)off);
        }
        qs_buf_str(&b, ". First byte ");
        qs_buf_hex(&b, *pb->bad);
        qs_buf_str(&b, " instead of ");
        qs_buf_hex(&b, (uint64_t)pb->expect);
        out(&b);
    }
    if (pb->detail) {
        qs_buf_str(&b, pb->detail);
        out(&b);
    }
    char fl[QS_DEBUG_LETTERS_LEN];
    qs_debug_letters(c->debug, fl);
    qs_buf_str(&b, "Object ");
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " (");
    qs_buf_u64(&b, c->obj_size);
    qs_buf_str(&b, " bytes) in slab ");
    qs_buf_hex(&b, (uintptr_t)s->mem);
    qs_buf_str(&b, " objects=");
    qs_buf_u64(&b, s->objects);
    qs_buf_str(&b, " used=");
    qs_buf_u64(&b, s->inuse);
    qs_buf_str(&b, " node=");
    qs_buf_u64(&b, s->node);
    qs_buf_str(&b, " flags=");
    qs_buf_str(&b, fl);
    out(&b);
    if (c->debug & QS_DBG_U) {
        put_track(&b, "Allocated", track_of(c, (void *)obj, 0));
        put_track(&b, "Freed", track_of(c, (void *)obj, 1));
    }
    const uint8_t *o = (const uint8_t *)obj;
    if (c->red_left)
        dump(&b, "Redzone", o - c->red_left, c->red_left);
    size_t n = c->obj_size < QS_DUMP_MAX ? c->obj_size : QS_DUMP_MAX;
    dump(&b, "Object", o, n);
    if (pb->bad && pb->bad >= o + n && pb->bad < o + c->obj_size) { /* the bad bytes too */
        const uint8_t *from = o + ((size_t)(pb->bad - o) & ~(size_t)15);
        dump(&b, "Object", from, (size_t)(o + c->obj_size - from) < 32 ? (size_t)(o + c->obj_size - from) : 32);
    }
    if (c->link_off > c->obj_size)
        dump(&b, "Redzone", o + c->obj_size, c->link_off - c->obj_size);
    dump(&b, "Freeptr", o + c->link_off, sizeof(uintptr_t));
}

/* After dbg_report(): repair mode restores and counts; else the fatal handler. */
void dbg_conclude(qslab_cache *c, const char *obj, const struct problem *pb)
{
    if (c->debug & QS_DBG_R) {
        char text[256];
        struct qs_buf b = {text, 0, sizeof(text)};
        qs_buf_str(&b, "FIX ");
        qs_buf_str(&b, c->name);
        qs_buf_str(&b, ": ");
        if (pb->bad && pb->expect >= 0) {
            qs_buf_str(&b, "Restoring ");
            qs_buf_hex(&b, (uintptr_t)pb->bad);
            qs_buf_putc(&b, '-');
            qs_buf_hex(&b, (uintptr_t)pb->bad_end - 1);
            qs_buf_putc(&b, '=');
            qs_buf_hex(&b, (uint64_t)pb->expect);
        } else {
            qs_buf_str(&b, "Object ");
            qs_buf_hex(&b, (uintptr_t)obj);
            qs_buf_str(&b, " left alone");
        }
        out(&b);
        __atomic_fetch_add(&c->debug_repairs, 1, __ATOMIC_RELAXED);
        return;
    }
    qs_fatal("BUG %s: %s (object %p)", c->name, pb->what, obj);
}

void dbg_trace(qslab_cache *c, struct qs_slab *s, void *obj, const char *what)
{
    char text[256];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "TRACE ");
    qs_buf_str(&b, c->name);
    qs_buf_putc(&b, ' ');
    qs_buf_str(&b, what);
    qs_buf_putc(&b, ' ');
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " inuse=");
    qs_buf_u64(&b, s->inuse);
    qs_buf_str(&b, " fp=");
    qs_buf_hex(&b, (uintptr_t)s->freelist);
    out(&b);
    if (what[0] == 'f') /* the object as it is freed (SLUB's trace does so) */
        dump(&b, "Object", obj, c->obj_size < 64 ? c->obj_size : 64);
}

void qs_debug_bad_link(qslab_cache *c, void *obj)
{
    struct qs_slab *s = qs_slab_lookup(obj);
    struct problem pb = {"Freepointer corrupt", (const uint8_t *)qs_link(c, obj),
                         (const uint8_t *)qs_link(c, obj) + sizeof(uintptr_t), -1,
                         "A free object's free-list link does not decode (written after free?)"};
    if (s)
        dbg_report(c, s, obj, &pb);
    pb.bad = NULL; /* nothing to restore: the list after it is lost */
    dbg_conclude(c, obj, &pb);
}

bool qs_debug_bad_pointer(qslab_cache *c, struct qs_slab *s, const void *p)
{
    uintptr_t off = (uintptr_t)p + c->red_left - (uintptr_t)s->base;
    if ((uintptr_t)p + c->red_left < (uintptr_t)s->base ||
        off >= __atomic_load_n(&s->span, __ATOMIC_RELAXED))
        return false; /* not near an object born: the common message */
    char *obj = s->base + off / c->slot_size * c->slot_size;
    char detail[160];
    struct qs_buf b = {detail, 0, sizeof(detail)};
    qs_buf_hex(&b, (uintptr_t)p);
    qs_buf_str(&b, " is not an object: it points into object ");
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " at offset ");
    long o = (long)((const char *)p - obj);
    if (o < 0) {
        qs_buf_putc(&b, '-');
        o = -o;
    }
    qs_buf_u64(&b, (uint64_t)o);
    struct problem pb = {"Invalid object pointer", NULL, NULL, -1, detail};
    dbg_report(c, s, obj, &pb);
    qs_fatal("BUG %s: Invalid object pointer %p (object %p)", c->name, p, obj);
    return true;
}
