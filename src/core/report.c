/*
 * report.c - messages without stdio (the allocator may be running inside
 * malloc), a thread's warnings captured when it asks (qs_warn_capture: the
 * control channel's answers) and the replaceable fatal handler.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <string.h>
#include <strings.h>

static qslab_fatal_fn fatal_handler;
/* qs_warn's text, captured instead of written (qs_warn_capture): one thread's own */
static __thread struct qs_buf *warn_capture __attribute__((tls_model("initial-exec")));

struct qs_buf *qs_warn_capture(struct qs_buf *b)
{
    struct qs_buf *old = warn_capture;
    warn_capture = b;
    return old;
}

void qs_buf_putc(struct qs_buf *b, char c)
{
    if (b->len + 1 < b->cap)
        b->p[b->len++] = c;
    b->p[b->len < b->cap ? b->len : b->cap - 1] = '\0';
}

void qs_buf_str(struct qs_buf *b, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s)
        qs_buf_putc(b, *s++);
}

void qs_buf_u64(struct qs_buf *b, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        qs_buf_putc(b, tmp[--n]);
}

QS_NOINLINE void qs_buf_hex(struct qs_buf *b, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    qs_buf_str(b, "0x");
    while (n)
        qs_buf_putc(b, tmp[--n]);
}

/* Pad the text written since `from` to `upto` columns (right_align: pad
 * on the left by shifting the text). */
QS_NOINLINE void qs_buf_pad(struct qs_buf *b, size_t upto, bool right_align, size_t from)
{
    size_t w = b->len - from;
    if (w >= upto)
        return;
    size_t pad = upto - w;
    if (b->len + pad + 1 > b->cap)
        return;
    if (right_align) {
        for (size_t i = b->len; i-- > from;)
            b->p[i + pad] = b->p[i];
        for (size_t i = 0; i < pad; i++)
            b->p[from + i] = ' ';
        b->len += pad;
        b->p[b->len] = '\0';
    } else {
        while (pad--)
            qs_buf_putc(b, ' ');
    }
}

/* %s string, %u unsigned long, %d long, %p pointer (0x...), %% */
void qs_vformat(struct qs_buf *b, const char *fmt, va_list ap)
{
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            qs_buf_putc(b, *fmt);
            continue;
        }
        switch (*++fmt) {
        case 's':
            qs_buf_str(b, va_arg(ap, const char *));
            break;
        case 'u':
            qs_buf_u64(b, va_arg(ap, unsigned long));
            break;
        case 'd': {
            long v = va_arg(ap, long);
            if (v < 0) {
                qs_buf_putc(b, '-');
                qs_buf_u64(b, (uint64_t)0 - (uint64_t)v);
            } else {
                qs_buf_u64(b, (uint64_t)v);
            }
            break;
        }
        case 'p':
            qs_buf_hex(b, (uintptr_t)va_arg(ap, const void *));
            break;
        case '%':
            qs_buf_putc(b, '%');
            break;
        default:
            return;
        }
    }
}

QSLAB_EXPORT qslab_fatal_fn qslab_set_fatal_handler(qslab_fatal_fn fn)
{
    return __atomic_exchange_n(&fatal_handler, fn, __ATOMIC_ACQ_REL);
}

qslab_fatal_fn qs_fatal_handler(void)
{
    return __atomic_load_n(&fatal_handler, __ATOMIC_ACQUIRE);
}

/* "qslab: " + the formatted message into b */
static void message(struct qs_buf *b, const char *fmt, va_list ap)
{
    qs_buf_str(b, "qslab: ");
    qs_vformat(b, fmt, ap);
}

QS_NOINLINE void qs_fatal(const char *fmt, ...)
{
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    va_list ap;
    va_start(ap, fmt);
    message(&b, fmt, ap);
    va_end(ap);
    qslab_fatal_fn fn = __atomic_load_n(&fatal_handler, __ATOMIC_ACQUIRE);
    if (fn) {
        fn(text);
        return;
    }
    qs_buf_putc(&b, '\n');
    qs_os_write(2, text, b.len);
    qs_os_abort();
}

QS_NOINLINE void qs_warn(const char *fmt, ...)
{
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    va_list ap;
    va_start(ap, fmt);
    message(&b, fmt, ap);
    va_end(ap);
    qs_buf_putc(&b, '\n');
    if (warn_capture) {
        qs_buf_str(warn_capture, text);
        return;
    }
    qs_os_write(2, text, b.len);
}

QS_NOINLINE void qs_assert_fail(const char *expr, const char *file, int line)
{
    char text[256];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "qslab: assertion failed: ");
    qs_buf_str(&b, expr);
    qs_buf_str(&b, " at ");
    qs_buf_str(&b, file);
    qs_buf_putc(&b, ':');
    qs_buf_u64(&b, (uint64_t)line);
    qs_buf_putc(&b, '\n');
    qs_os_write(2, text, b.len);
    qs_os_abort();
}

/* One boolean word of the environment, any case: 1 on, 0 off, -1 none. */
static int bool_word(const char *v)
{
    static const char *const on[] = {"1", "yes", "on", "true"}, *const off[] = {"0", "no", "off", "false"};
    for (unsigned i = 0; i < 4; i++) {
        if (!strcasecmp(v, on[i]))
            return 1;
        if (!strcasecmp(v, off[i]))
            return 0;
    }
    return -1;
}

const char *qs_env_why(const char *v)
{
    if (!*v)
        return "empty; ";
    if (*v == '-' && v[1] >= '0' && v[1] <= '9')
        return "negative; ";
    for (const char *s = v; *s; s++)
        if (*s < '0' || *s > '9')
            return "not a number; ";
    return "";
}

int qs_env_bool(const char *name, int dflt, const char *what)
{
    const char *v = qs_os_getenv(name);
    if (!v || !*v)
        return dflt;
    int b = bool_word(v);
    if (b >= 0)
        return b;
    qs_warn("%s=%s ignored: not a boolean (1, yes, on, true or 0, no, off, false); %s stays %s", name, v, what,
            dflt ? "on" : "off");
    return dflt;
}
