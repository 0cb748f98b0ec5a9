/*
 * stats_api.c - the extensible statistics API (qslab_cache_stats_size: the
 * ABI of a growing struct) and qslab_stats_json (one JSON document, parsed
 * here by a strict recursive-descent checker and compared with the structs).
 */
#define _GNU_SOURCE
#include "../testutil.h"

#include <errno.h>
#include <qslab.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define V1_SIZE offsetof(struct qslab_cache_stats, partial_slabs)

static void test_sizes(void)
{
    qslab_cache *c = qslab_cache_create("t-stats-api", 100, 0, 0, NULL);
    CHECK(c != NULL);
    void *objs[50];
    for (int i = 0; i < 50; i++)
        objs[i] = qslab_cache_alloc(c);

    /* the full layout: the new fields filled */
    struct qslab_cache_stats st;
    memset(&st, 0xab, sizeof st);
    CHECK(qslab_cache_stats(c, &st) == 0);
    CHECKF(st.active_objs == 50, "active %lu", st.active_objs);
    CHECKF(st.slab_bytes == (size_t)4096 << st.order, "slab_bytes %zu order %u", st.slab_bytes,
           st.order);
    const char *front = qslab_cache_front(c);
    int queues = !strcmp(front, "slqb") || !strcmp(front, "slub") || !strcmp(front, "slab");
    CHECKF(!queues || st.nr_queues >= 1, "nr_queues %lu after allocations of this thread (%s)",
           st.nr_queues, front);
    CHECKF(st.metadata_bytes > sizeof(void *) * 8 && st.metadata_bytes < ((size_t)1 << 30),
           "metadata_bytes %zu", st.metadata_bytes);
    CHECKF(st.partial_slabs <= st.num_slabs && st.owner_slabs <= st.num_slabs,
           "partial %lu owner %lu of %lu slabs", st.partial_slabs, st.owner_slabs, st.num_slabs);

    /* an older caller: the first layout only, nothing written past it */
    struct qslab_cache_stats old;
    memset(&old, 0xab, sizeof old);
    CHECK(qslab_cache_stats_size(c, &old, V1_SIZE) == 0);
    CHECK(old.active_objs == 50 && old.objs_per_slab == st.objs_per_slab);
    const unsigned char *tail = (const unsigned char *)&old + V1_SIZE;
    int untouched = 1;
    for (size_t i = 0; i < sizeof old - V1_SIZE; i++)
        untouched &= tail[i] == 0xab;
    CHECKF(untouched, "a first-layout call wrote past byte %zu", (size_t)V1_SIZE);

    /* the symbol programs built before the macro call: the first layout */
    memset(&old, 0xab, sizeof old);
    CHECK((qslab_cache_stats)(c, &old) == 0);
    CHECK(old.active_objs == 50);
    untouched = 1;
    for (size_t i = 0; i < sizeof old - V1_SIZE; i++)
        untouched &= tail[i] == 0xab;
    CHECKF(untouched, "qslab_cache_stats (the function) wrote past byte %zu", (size_t)V1_SIZE);

    /* a newer caller: its fields past ours zeroed */
    struct {
        struct qslab_cache_stats st;
        unsigned long future[6];
    } big;
    memset(&big, 0xab, sizeof big);
    CHECK(qslab_cache_stats_size(c, &big.st, sizeof big) == 0);
    CHECK(big.st.active_objs == 50 && big.st.slab_bytes == st.slab_bytes);
    int zero = 1;
    for (int i = 0; i < 6; i++)
        zero &= big.future[i] == 0;
    CHECKF(zero, "a newer caller's fields past the library's were not zeroed");

    /* too small, or NULL */
    errno = 0;
    CHECK(qslab_cache_stats_size(c, &st, V1_SIZE - 1) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_stats_size(NULL, &st, sizeof st) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_stats_size(c, NULL, sizeof st) == -1 && errno == EINVAL);

    for (int i = 0; i < 50; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* ---- a strict JSON checker (RFC 8259 syntax), remembering one object's
 * numbers by key: the cache object whose "name" is `want` ---- */
struct js {
    const char *p, *end;
    int depth;
    const char *want;
    int in_want;       /* depth of the wanted cache object, or 0 */
    char last_key[64]; /* the key of the value being parsed */
    unsigned long active, num_objs, slot, order_found;
    int found;
};

static void ws(struct js *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r'))
        j->p++;
}

static int str(struct js *j, char *out, size_t cap)
{
    if (j->p >= j->end || *j->p != '"')
        return 0;
    j->p++;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        unsigned char ch = (unsigned char)*j->p;
        if (ch < 0x20)
            return 0;
        if (ch == '\\') { /* decoded: \" and \\ as themselves, \uXXXX as '?' */
            j->p++;
            if (j->p >= j->end || !strchr("\"\\/bfnrtu", *j->p))
                return 0;
            ch = (unsigned char)*j->p;
            if (ch == 'u') {
                for (int i = 0; i < 4; i++)
                    if (++j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p))
                        return 0;
                ch = '?';
            }
        }
        if (out && n + 1 < cap)
            out[n++] = (char)ch;
        j->p++;
    }
    if (out)
        out[n] = '\0';
    if (j->p >= j->end)
        return 0;
    j->p++;
    return 1;
}

static int value(struct js *j);

static int number(struct js *j, unsigned long *out)
{
    const char *s = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return 0;
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return 0; /* no leading zeros */
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    *out = strtoul(s, NULL, 10);
    return 1;
}

static int object(struct js *j)
{
    j->p++; /* { */
    int depth = ++j->depth;
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        j->depth--;
        return 1;
    }
    for (;;) {
        ws(j);
        char key[64];
        if (!str(j, key, sizeof key))
            return 0;
        ws(j);
        if (j->p >= j->end || *j->p++ != ':')
            return 0;
        ws(j);
        memcpy(j->last_key, key, sizeof key);
        if (!strcmp(key, "name") && j->p < j->end && *j->p == '"') {
            char name[64];
            if (!str(j, name, sizeof name))
                return 0;
            if (!strcmp(name, j->want)) {
                j->in_want = depth;
                j->found++;
            }
        } else if (!value(j)) {
            return 0;
        }
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            if (j->in_want == depth)
                j->in_want = 0;
            j->depth--;
            return 1;
        }
        return 0;
    }
}

static int array(struct js *j)
{
    j->p++; /* [ */
    ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return 1;
    }
    for (;;) {
        ws(j);
        if (!value(j))
            return 0;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            return 1;
        }
        return 0;
    }
}

static int value(struct js *j)
{
    if (j->p >= j->end || j->depth > 16)
        return 0;
    char ch = *j->p;
    if (ch == '{')
        return object(j);
    if (ch == '[')
        return array(j);
    if (ch == '"')
        return str(j, NULL, 0);
    for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
        if ((size_t)(j->end - j->p) >= strlen(lit) && !memcmp(j->p, lit, strlen(lit))) {
            j->p += strlen(lit);
            return 1;
        }
    unsigned long v;
    if (!number(j, &v))
        return 0;
    if (j->in_want && j->in_want == j->depth) {
        if (!strcmp(j->last_key, "active_objs"))
            j->active = v;
        else if (!strcmp(j->last_key, "num_objs"))
            j->num_objs = v;
        else if (!strcmp(j->last_key, "slot_size"))
            j->slot = v;
    }
    return 1;
}

static int check_json(const char *text, size_t len, struct js *j)
{
    j->p = text;
    j->end = text + len;
    ws(j);
    if (j->p >= j->end || *j->p != '{' || !object(j))
        return 0;
    ws(j);
    return j->p == j->end;
}

static char *json_of_process(size_t *len)
{
    int fd = memfd_create("json", 0);
    CHECK(fd >= 0);
    CHECK(qslab_stats_json(fd) == 0);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = malloc((size_t)n + 1);
    CHECK(pread(fd, buf, (size_t)n, 0) == n);
    buf[n] = '\0';
    close(fd);
    *len = (size_t)n;
    return buf;
}

static void test_json(void)
{
    /* a name that needs escaping */
    const char *name = "t-json \"quoted\\name\"";
    qslab_cache *c = qslab_cache_create(name, 72, 0, 0, NULL);
    CHECK(c != NULL);
    void *objs[37];
    for (int i = 0; i < 37; i++)
        objs[i] = qslab_cache_alloc(c);
    void *big = qslab_malloc(40u << 20); /* a large block */
    CHECK(big != NULL);
    qslab_free(qslab_malloc(64)); /* kmalloc-64 in use (a class is a cache once used) */
    size_t len;
    char *text = json_of_process(&len);
    struct js j;
    memset(&j, 0, sizeof j);
    j.want = name; /* the checker decodes escapes */
    int ok = check_json(text, len, &j);
    CHECKF(ok, "qslab_stats_json is not valid JSON at byte %zu: ...%.40s", (size_t)(j.p - text),
           j.p > text + 20 ? j.p - 20 : text);
    CHECKF(j.found == 1, "cache %s found %d times in the JSON", name, j.found);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECKF(j.active == 37 && j.num_objs == st.num_objs && j.slot == st.slot_size,
           "JSON: active %lu num_objs %lu slot %lu; stats: 37 %lu %zu", j.active, j.num_objs,
           j.slot, st.num_objs, st.slot_size);
    CHECKF(strstr(text, "\"large\": {") && strstr(text, "\"live\": 1"),
           "the large block is not in the JSON's large section");
    CHECKF(strstr(text, "{\"from\": 33554432, \"to\": 67108864, \"alloc\": 1, \"live\": 1, "),
           "the 40 MiB block is not in the large bucket [32 MiB, 64 MiB)");
    CHECK(strstr(text, "\"kmalloc-64\"") != NULL);
    CHECK(strstr(text, "\"totals\": {") != NULL && strstr(text, "\"guard\": {") != NULL);
    CHECKF(strstr(text, "\"chunk_bytes\": ") && !strstr(text, "\"chunk_bytes\": 0,") &&
               strstr(text, "\"metadata_mapped\": ") && !strstr(text, "\"metadata_mapped\": 0}"),
           "the JSON's totals lack the page layer's chunks or the metadata mappings");
    free(text);
    /* a realloc that grows the mapping moves the block to its new bucket */
    big = qslab_realloc(big, 100u << 20);
    CHECK(big != NULL);
    text = json_of_process(&len);
    CHECKF(strstr(text, "{\"from\": 33554432, \"to\": 67108864, \"alloc\": 1, \"live\": 0, ") &&
               strstr(text, "{\"from\": 67108864, \"to\": 134217728, \"alloc\": 0, \"live\": 1, "),
           "after a realloc to 100 MiB the block is not counted in [64 MiB, 128 MiB) alone");
    free(text);
    qslab_free(big);
    for (int i = 0; i < 37; i++)
        qslab_cache_free(c, objs[i]);
    CHECK(qslab_cache_destroy(c) == 0);
    errno = 0;
    CHECK(qslab_stats_json(-1) == -1 && errno == EBADF);
}

int main(void)
{
    test_sizes();
    test_json();
    return tu_done();
}
