/*
 * unit: memory pressure's source and the trim near the cgroup's limit
 * (core/pressure.c), on any machine.  Each case runs in a child of its own
 * (the purger picks its source once, when it starts):
 *   own       the process's own sources: the text names one of "cgroup
 *             DIR" (an existing directory), "system" or "none (why)"
 *   cgroup    a directory standing for the cgroup (qs_pressure_paths), its
 *             memory.pressure a plain file (a trigger is written, it never
 *             fires), memory.high set: "cgroup DIR" with the limit; empty
 *             slabs kept (a long decay), then memory.current written at
 *             95% of the limit: the purger's next ticks trim, the counters
 *             move, the slabs go back; below 90%, no trim
 *   v1        no cgroup v2 directory, a directory standing for cgroup v1's
 *             memory cgroup with memory.limit_in_bytes: "system" with that
 *             limit, and the same trim at 95% of memory.usage_in_bytes
 *   system    the cgroup's memory.pressure absent: "system", and why not
 *             the cgroup
 *   none      no file at all: "none (...)" naming both
 *   off       QSLAB_PRESSURE=0: "none (QSLAB_PRESSURE=0)", and no trim
 *             at 95% of the limit
 * Each wait for the purger (its start, its trim) polls until what it waits
 * for is seen, up to TU_WAIT_MS (a loaded machine schedules the purger
 * late); the checks then test what the poll saw.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <sys/stat.h>

static char dir[256];

static void put(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECKF(f != NULL, "cannot write %s", p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Keep empty slabs (a long decay) so that the purger starts; returns the cache. */
/* Empty slabs of a cache of our own, kept (a long decay). */
static void fill_empties(qslab_cache *c)
{
    static void *objs[2000];
    for (int i = 0; i < 2000; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 2000; i++)
        qslab_cache_free(c, objs[i]);
}

static qslab_cache *keep_empties(void)
{
    qslab_cache *c = qslab_cache_create("t-pressure", 2048, 0, 0, NULL);
    tf_pin_slqb("t-pressure");
    CHECK(c && qslab_tune("t-pressure", "empty_decay_ms", "600000") == 0);
    fill_empties(c);
    return c;
}

/* Wait until the purger has picked its source (text no longer "not
 * watched yet"): the text. */
static const char *source(void)
{
    const char *t;
    for (uint64_t end = tu_now_ms() + TU_WAIT_MS;
         strstr(t = qs_pressure_text(), "not watched yet") && tu_now_ms() < end;) {
        qslab_trim(); /* a safe point to start the purger (node.c) */
        tu_sleep_ms(100);
    }
    return t;
}

/* the purger writes them (relaxed): read them so */
#define P(field) __atomic_load_n(&qs_pressure.field, __ATOMIC_RELAXED)

static unsigned long empty_slabs(qslab_cache *c)
{
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    return st.empty_slabs;
}

static int child(const char *mode)
{
    const char *d = getenv("PT_DIR");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    char sys[300];
    snprintf(sys, sizeof sys, "%s/system-memory", dir);
    qs_pressure_paths.v1 = "/nonexistent/v1";
    if (!strcmp(mode, "cgroup") || !strcmp(mode, "off")) {
        qs_pressure_paths.cgroup = dir;
        qs_pressure_paths.system = "/nonexistent/pressure/memory";
    } else if (!strcmp(mode, "v1")) {
        qs_pressure_paths.cgroup = "/nonexistent/cgroup";
        qs_pressure_paths.v1 = dir;
        qs_pressure_paths.system = sys;
    } else if (!strcmp(mode, "system")) {
        qs_pressure_paths.cgroup = "/nonexistent/cgroup";
        qs_pressure_paths.system = sys;
    } else if (!strcmp(mode, "none")) {
        qs_pressure_paths.cgroup = "/nonexistent/cgroup";
        qs_pressure_paths.system = "/nonexistent/pressure/memory";
    }
    qslab_cache *c = keep_empties(); /* kept empties start the purger */
    const char *t = source();
    /* again: source() trims while it waits for the purger (a loaded
     * machine may take a while to start it), which gave them back */
    fill_empties(c);
    printf("%s: %s\n", mode, t);
    if (!strcmp(mode, "own")) {
        if (!strncmp(t, "cgroup /", 8)) {
            char p[QS_PRESSURE_TEXT];
            snprintf(p, sizeof p, "%s", t + 7);
            *strchr(p, ' ') = '\0';
            struct stat sb;
            CHECKF(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode), "%s: not a directory", p);
        } else {
            CHECKF(!strncmp(t, "system (", 8) || !strncmp(t, "none (", 6), "source: %s", t);
        }
    } else if (!strcmp(mode, "cgroup") || !strcmp(mode, "v1")) {
        bool v1 = !strcmp(mode, "v1");
        char want[300];
        snprintf(want, sizeof want, v1 ? "system (some " : "cgroup %s (some ", dir);
        CHECKF(!strncmp(t, want, strlen(want)), "source: %s", t);
        snprintf(want, sizeof want, "; limit %s 100000000 of %s",
                 v1 ? "memory.limit_in_bytes" : "memory.high", dir);
        CHECKF(strstr(t, want) != NULL, "no \"%s\" in: %s", want, t);
        const char *usage = v1 ? "memory.usage_in_bytes" : "memory.current";
        unsigned long kept = empty_slabs(c), trims = P(high_trims);
        CHECKF(kept > 0, "no empty slab kept (%lu)", kept);
        tu_sleep_ms(600); /* two ticks below the margin: no trim (the idle
                            * queues may empty into more slabs meanwhile) */
        CHECKF(P(high_trims) == trims && empty_slabs(c) >= kept,
               "a trim below 90%% of the limit (%lu trims, %lu of %lu slabs kept)",
               P(high_trims) - trims, empty_slabs(c), kept);
        put(usage, "95000000\n");
        /* until a trim is counted and no empty slab is kept, both seen at
         * once; the checks test what the poll saw (a read after it may
         * find a slab that a queue emptied into since, which the next
         * second's trim takes) */
        unsigned long trims_seen, left;
        for (uint64_t end = tu_now_ms() + TU_WAIT_MS;; tu_sleep_ms(100)) {
            trims_seen = P(high_trims);
            left = empty_slabs(c);
            if ((trims_seen > trims && left == 0) || tu_now_ms() >= end)
                break;
        }
        CHECKF(trims_seen > trims, "no trim at 95%% of the limit in %d s", TU_WAIT_MS / 1000);
        CHECKF(left == 0, "%lu of %lu empty slabs still kept", left, kept);
        CHECKF(P(high_bytes) >= kept * 4096, "%lu bytes given back for %lu slabs",
               P(high_bytes), kept);
        CHECK(P(events) == 0); /* a plain file never fires */
        put(usage, "0\n");
    } else if (!strcmp(mode, "system")) {
        CHECKF(!strncmp(t, "system (some ", 13) &&
                   strstr(t, "cgroup: /nonexistent/cgroup/memory.pressure: no such file"),
               "source: %s", t);
    } else if (!strcmp(mode, "none")) {
        CHECKF(!strcmp(t, "none (/nonexistent/pressure/memory: no such file; cgroup: "
                          "/nonexistent/cgroup/memory.pressure: no such file)"),
               "source: %s", t);
    } else if (!strcmp(mode, "off")) {
        CHECKF(!strcmp(t, "none (QSLAB_PRESSURE=0)"), "source: %s", t);
        unsigned long kept = empty_slabs(c);
        tu_sleep_ms(1000); /* four ticks at 95% of a limit it does not watch */
        CHECKF(P(high_trims) == 0 && empty_slabs(c) >= kept,
               "QSLAB_PRESSURE=0 trimmed (%lu trims, %lu of %lu slabs kept)",
               P(high_trims), empty_slabs(c), kept);
    }
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    snprintf(dir, sizeof dir, "/tmp/qslab-pressure-%d", (int)getpid());
    CHECK(mkdir(dir, 0700) == 0);
    setenv("PT_DIR", dir, 1);
    put("memory.pressure", "");
    put("memory.high", "100000000\n");
    put("memory.max", "max\n");
    put("memory.current", "0\n");
    put("memory.limit_in_bytes", "100000000\n");
    put("memory.usage_in_bytes", "0\n");
    put("system-memory", "");
    static const char *const modes[] = {"own", "cgroup", "v1", "system", "none"};
    for (unsigned i = 0; i < sizeof modes / sizeof modes[0]; i++)
        CHECKF(tu_reexec(modes[i], "QSLAB_PRESSURE", NULL) == 0, "case %s failed", modes[i]);
    put("memory.current", "95000000\n");
    CHECKF(tu_reexec("off", "QSLAB_PRESSURE", "0") == 0, "case off failed");
    static const char *const files[] = {"memory.pressure", "memory.high", "memory.max",
                                        "memory.current", "memory.limit_in_bytes",
                                        "memory.usage_in_bytes", "system-memory"};
    for (unsigned i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return tu_done();
}
