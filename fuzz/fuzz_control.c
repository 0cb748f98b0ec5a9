/*
 * fuzz_control.c - the control channel's request parser
 * (src/observe/control_parse.c, qs_ctl_parse) on its own: no socket, no
 * thread, no allocator state.
 *
 * Input: any bytes, cut into lines at '\n' as the server cuts them (a line
 * of QS_CTL_LINE_MAX bytes or more without a newline is given whole too: the
 * parser must refuse it), each copied into a buffer of exactly its length
 * (ASan sees any read past it) and parsed with a room for the reason that
 * the input's first byte chooses (0 to 300 bytes).  Checked:
 *   - accepted: the verb is known, every token is NUL-terminated inside its
 *     field, non-empty where the verb needs it and empty where it takes
 *     none, of printable ASCII without spaces; '*' only for set; the
 *     attribute of [a-z_]; and the line (less one final '\r') is exactly the
 *     canonical text of the request: the parser accepts one spelling only;
 *   - refused: *req is all zeros and the reason is a NUL-terminated line of
 *     printable ASCII inside the room given (none with no room).
 */
#include "fuzz_util.h"

#include "observe/control.h"

static const char *const names[] = {
    [QS_CTL_SET] = "set",     [QS_CTL_GET] = "get",     [QS_CTL_SHRINK] = "shrink",
    [QS_CTL_VALIDATE] = "validate", [QS_CTL_STATS] = "stats", [QS_CTL_HELP] = "help",
    [QS_CTL_QUIT] = "quit",
};

static void check_token(const char *t, const char *what)
{
    size_t n = strnlen(t, QS_CTL_TOKEN_MAX);
    if (n == QS_CTL_TOKEN_MAX)
        fz_fail("%s is not terminated inside its field", what);
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~')
            fz_fail("%s has byte 0x%02x", what, (unsigned char)t[i]);
}

static void one(const char *line, size_t len, size_t errlen)
{
    struct qs_ctl_req r;
    char err[300];
    memset(err, 0x5a, sizeof err);
    int rc = qs_ctl_parse(line, len, &r, errlen ? err : NULL, errlen);
    if (rc != 0) {
        if (rc != -1)
            fz_fail("parse returned %d", rc);
        static const struct qs_ctl_req zero;
        if (memcmp(&r, &zero, sizeof r) != 0)
            fz_fail("a refused request left fields set");
        if (errlen) {
            size_t n = strnlen(err, errlen);
            if (n == errlen)
                fz_fail("the reason is not terminated inside its room");
            if (errlen > 1 && n == 0)
                fz_fail("a refusal without a reason");
            for (size_t i = 0; i < n; i++)
                if (err[i] < ' ' || err[i] > '~')
                    fz_fail("the reason has byte 0x%02x", (unsigned char)err[i]);
            for (size_t i = errlen; i < sizeof err; i++)
                if (err[i] != 0x5a)
                    fz_fail("the reason was written past its room");
        }
        return;
    }
    if (r.verb < QS_CTL_SET || r.verb > QS_CTL_QUIT)
        fz_fail("accepted with verb %d", r.verb);
    check_token(r.cache, "cache");
    check_token(r.attr, "attr");
    check_token(r.value, "value");
    bool need_attr = r.verb == QS_CTL_SET || r.verb == QS_CTL_GET;
    if (need_attr != (r.attr[0] != 0) || (r.verb == QS_CTL_SET) != (r.value[0] != 0) ||
        (need_attr && !r.cache[0]) || ((r.verb == QS_CTL_HELP || r.verb == QS_CTL_QUIT) && r.cache[0]))
        fz_fail("%s accepted with the wrong words", names[r.verb]);
    if (r.verb != QS_CTL_SET && !strcmp(r.cache, "*"))
        fz_fail("'*' accepted for %s", names[r.verb]);
    for (const char *a = r.attr; *a; a++)
        if (!((*a >= 'a' && *a <= 'z') || *a == '_'))
            fz_fail("attribute byte 0x%02x accepted", (unsigned char)*a);
    char canon[4 * QS_CTL_TOKEN_MAX + 16];
    int n = snprintf(canon, sizeof canon, "%s%s%s%s%s%s%s", names[r.verb], r.cache[0] ? " " : "",
                     r.cache, r.attr[0] ? " " : "", r.attr, r.value[0] ? " " : "", r.value);
    size_t l = len && line[len - 1] == '\r' ? len - 1 : len;
    if ((size_t)n != l || memcmp(canon, line, l) != 0)
        fz_fail("accepted a spelling that is not the canonical '%s'", canon);
    struct qs_ctl_req again;
    if (qs_ctl_parse(canon, (size_t)n, &again, NULL, 0) != 0 || memcmp(&again, &r, sizeof r))
        fz_fail("the canonical text '%s' does not parse to the same request", canon);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t errlen = size ? data[0] % 301 : 256;
    for (size_t off = 0; off <= size;) {
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t len = nl ? (size_t)(nl - (data + off)) : size - off;
        char *buf = malloc(len ? len : 1);
        if (!buf)
            return 0;
        memcpy(buf, data + off, len);
        one(buf, len, errlen);
        free(buf);
        if (!nl)
            break;
        off += len + 1;
    }
    return 0;
}
