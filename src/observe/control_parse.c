/*
 * control_parse.c - the control channel's request parser (control.h for
 * the protocol): one line of printable ASCII into a verb and its words.
 * Pure: no I/O, no lock, no allocation; the unit test and the fuzz target
 * (fuzz/fuzz_control.c) call qs_ctl_parse alone.
 */
#include "observe/control.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* The usage line of the k-th request of the protocol (help); NULL past
 * the last. */
const char *qs_ctl_usage(unsigned k)
{
    return k < NR_VERBS ? verbs[k].usage : NULL;
}
