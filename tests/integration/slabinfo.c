/*
 * qslab_slabinfo (the /proc/slabinfo 2.1 format) and qslab_stats_report:
 * parsed back and compared with what the test allocated.
 */
#include <qslab.h>

#include "../testutil.h"

/* fn(fd)'s text (a static buffer) */
static char *capture(void (*fn)(int))
{
    static char buf[1 << 18];
    tu_text_of(fn, buf, sizeof buf);
    return buf;
}

struct row {
    char name[64];
    unsigned long active_objs, num_objs, objsize, objperslab, pagesperslab;
    unsigned long limit, batchcount, sharedfactor;
    unsigned long active_slabs, num_slabs, sharedavail;
};

/* Find the line of cache `name` and parse it; 1 if found and well formed. */
static int find_row(const char *text, const char *name, struct row *r)
{
    size_t len = strlen(name);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, name, len) != 0 || (line[len] != ' ' && line[len] != '\t'))
            continue;
        int n = sscanf(line,
                       "%63s %lu %lu %lu %lu %lu : tunables %lu %lu %lu : slabdata %lu %lu %lu", r->name,
                       &r->active_objs, &r->num_objs, &r->objsize, &r->objperslab, &r->pagesperslab, &r->limit,
                       &r->batchcount, &r->sharedfactor, &r->active_slabs, &r->num_slabs, &r->sharedavail);
        if (n != 12)
            fprintf(stderr, "cannot parse slabinfo line: %.200s\n", line);
        return n == 12;
    }
    return 0;
}

static void test_format(void)
{
    /* a kmalloc class is a cache once used (or named): kmalloc-96 and the
     * largest here; kmalloc-7936 is used by no test before this one */
    const char *text = capture(qslab_slabinfo);
    struct row r;
    CHECKF(!find_row(text, "kmalloc-7936", &r), "kmalloc-7936, never used, is listed");
    qslab_free(qslab_malloc(96));
    qslab_free(qslab_malloc(33554432));
    text = capture(qslab_slabinfo);
    CHECKF(strncmp(text, "slabinfo - version: 2.1\n", 24) == 0, "first line: %.60s", text);
    const char *l2 = strchr(text, '\n');
    l2 = l2 ? l2 + 1 : text + strlen(text);
    CHECKF(strncmp(l2, "# name", 6) == 0, "second line: %.100s", l2);
    const char *cols[] = {"<active_objs>", "<num_objs>", "<objsize>", "<objperslab>", "<pagesperslab>",
                          ": tunables", "<limit>", "<batchcount>", "<sharedfactor>", ": slabdata",
                          "<active_slabs>", "<num_slabs>", "<sharedavail>"};
    const char *end = strchr(l2, '\n');
    size_t l2len = end ? (size_t)(end - l2) : strlen(l2);
    char header[512];
    snprintf(header, sizeof header, "%.*s", (int)(l2len < 511 ? l2len : 511), l2);
    const char *at = header;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        const char *f = strstr(at, cols[i]);
        CHECKF(f != NULL, "header lacks %s (in order): %s", cols[i], header);
        if (f)
            at = f;
    }

    /* Every line after the header parses; kmalloc caches are listed. */
    int lines = 0, bad = 0;
    for (const char *line = end ? end + 1 : l2 + strlen(l2); *line;) {
        struct row r;
        char name[64];
        if (sscanf(line, "%63s", name) == 1 && find_row(line, name, &r)) {
            lines++;
            if (r.active_objs > r.num_objs || r.active_slabs > r.num_slabs || r.objperslab == 0 ||
                r.pagesperslab == 0)
                bad++;
        } else {
            bad++;
        }
        const char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    CHECKF(bad == 0, "%d malformed or inconsistent slabinfo lines", bad);
    CHECKF(lines >= 3, "only %d cache lines", lines);
    CHECK(find_row(text, "kmalloc-8", &r));
    CHECK(find_row(text, "kmalloc-96", &r));
    CHECK(find_row(text, "kmalloc-33554432", &r));
    /* the classes, whenever made, are listed first, in order of size */
    const char *k8 = strstr(text, "\nkmalloc-8 "), *k96 = strstr(text, "\nkmalloc-96 "),
               *kmax = strstr(text, "\nkmalloc-33554432 ");
    CHECKF(k8 && k96 && kmax && k8 < k96 && k96 < kmax, "the classes out of order: %p %p %p",
           (const void *)k8, (const void *)k96, (const void *)kmax);
    /* a look-up by name makes a class that was not used */
    qslab_cache *c = qslab_cache_find("kmalloc-7936");
    CHECKF(c && qslab_cache_object_size(c) == 7936, "qslab_cache_find(\"kmalloc-7936\"): %p", (void *)c);
    text = capture(qslab_slabinfo);
    CHECK(find_row(text, "kmalloc-7936", &r));
    CHECK(qslab_cache_find("kmalloc-7937") == NULL && qslab_cache_find("kmalloc-07936") == NULL);
}

static void test_counts(void)
{
    enum { N = 777 };
    static void *objs[N];
    qslab_cache *c = qslab_cache_create("t-slabinfo", 136, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    /* No slab may go back in the background between two readings. */
    CHECK(qslab_tune("t-slabinfo", "empty_decay_ms", "600000") == 0);
    struct row r;
    CHECK(find_row(capture(qslab_slabinfo), "t-slabinfo", &r));
    CHECK(r.active_objs == 0);

    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECK(find_row(capture(qslab_slabinfo), "t-slabinfo", &r));
    CHECKF(r.active_objs == N, "active_objs %lu, allocated %d", r.active_objs, N);
    CHECKF(r.num_objs == st.num_objs, "num_objs %lu, stats %lu", r.num_objs, st.num_objs);
    CHECKF(r.num_slabs == st.num_slabs, "num_slabs %lu, stats %lu", r.num_slabs, st.num_slabs);
    CHECKF(r.objsize >= 136, "objsize %lu", r.objsize);
    CHECKF(r.objperslab == st.objs_per_slab, "objperslab %lu, stats %u", r.objperslab, st.objs_per_slab);
    CHECKF(r.pagesperslab == 1UL << st.order, "pagesperslab %lu, order %u", r.pagesperslab, st.order);
    CHECK(r.num_objs >= N);

    for (int i = 0; i < N; i += 2)
        qslab_cache_free(c, objs[i]);
    CHECK(find_row(capture(qslab_slabinfo), "t-slabinfo", &r));
    CHECKF(r.active_objs == N / 2, "active_objs %lu after freeing half, expected %d", r.active_objs, N / 2);
    for (int i = 1; i < N; i += 2)
        qslab_cache_free(c, objs[i]);
    CHECK(find_row(capture(qslab_slabinfo), "t-slabinfo", &r));
    CHECK(r.active_objs == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    CHECK(!find_row(capture(qslab_slabinfo), "t-slabinfo", &r));
}

static void test_report(void)
{
    qslab_cache *c = qslab_cache_create("t-report", 48, 0, 0, NULL);
    void *p[100];
    for (int i = 0; i < 100; i++)
        p[i] = qslab_cache_alloc(c);
    const char *text = capture(qslab_stats_report);
    CHECKF(strncmp(text, "Name", 4) == 0, "report starts with: %.80s", text);
    const char *end = strchr(text, '\n');
    char header[512];
    snprintf(header, sizeof header, "%.*s", end ? (int)(end - text) : 200, text);
    CHECKF(strstr(header, "Objects") && strstr(header, "Alloc") && strstr(header, "Free") && strstr(header, "%Fast"),
           "header: %s", header);
    CHECKF(end && end[1] != '\0', "report has no rows");
    /* the last line says which owner kind is in force, and why */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    const char *own = strstr(text, "\nOwner: ");
    CHECKF(own && strstr(own, oi.why) && strstr(own, oi.kind == QSLAB_OWNER_CPU ? "per-CPU" : "per-thread"),
           "report's owner line: %s", own ? own : text);
    for (int i = 0; i < 100; i++)
        qslab_cache_free(c, p[i]);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(void)
{
    test_format();
    test_counts();
    test_report();
    return tu_done();
}
