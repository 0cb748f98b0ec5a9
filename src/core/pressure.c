/*
 * pressure.c - memory pressure: what the purger's thread listens to, and
 * what it gives back when it hears it (docs/design.md, "Memory pressure").
 *
 * SOURCES.  When the purger starts (node.c purger_main), qs_pressure_open
 * opens a PSI trigger ("some" stall of 50 ms in a 500 ms window, else 200 ms
 * in 2 s: unprivileged triggers on some kernels need a window that is a
 * multiple of 2 s) on the process's cgroup v2 `memory.pressure` (the cgroup
 * from /proc/self/cgroup, under the cgroup2 mount of /proc/self/mountinfo),
 * else on the system's /proc/pressure/memory, else on nothing; the
 * statistics say which ("cgroup DIR", "system", "none (why)").  The
 * purger's sleep between ticks is then a poll of that trigger
 * (qs_pressure_wait): an event ends it at once, everything qslab holds
 * that is not in use goes back (qs_api_hooks.trim: qslab_trim), and the
 * sleep goes on for the rest of the tick, so the tick keeps its cadence.
 *
 * THE LIMIT.  The nearest cgroup from the process's up to the mount's root
 * whose memory.high or memory.max is a number (the lower of the two) holds
 * the limit; without one in cgroup v2 (or without cgroup v2's memory
 * controller: hybrid hosts), the nearest cgroup of cgroup v1's memory
 * controller with a memory.limit_in_bytes.  It is looked for at the open
 * and every QS_LIMIT_RESCAN ticks (a limit set or raised later is seen
 * within 10 s).  At each tick, after the purger's own work, one read of
 * that cgroup's usage (memory.current, memory.usage_in_bytes): at 90%
 * of the limit or more (QS_HIGH_MARGIN_PCT, its argument there),
 * everything not in use goes back, at most once a second while usage stays
 * there (a program that lives near its limit pays a trim a second, not
 * one a tick).
 *
 * OWNERSHIP.  Everything here but the counters and the text is the purger
 * thread's alone (the descriptor, the paths, the tick count); a process
 * has one purger (node.c purger_state), and its child after fork starts
 * its own, which closes the inherited descriptor before it opens a new
 * trigger.  The counters have that one writer and are read by anyone
 * (statistics, qslabinfo from outside) with relaxed loads: each is a
 * counter of its own and no reader needs two of them to agree.  The text
 * is written into the buffer that readers are not pointed at, and then
 * published by a release store of its index (`cur`), which readers load
 * with acquire: a reader sees either text whole.  The buffer written next
 * is the one that was published before, so a reader still in it 10 s
 * later (the next change) could see it change: none is that slow.
 * The trim itself takes its locks as qslab_trim does for any thread
 * (qs_global, then queue and node locks, in their order); the purger holds
 * none when it calls it.
 */
#include "core/internal.h"
#include "core/hooks.h"

#include <errno.h>
#include <string.h>

struct qs_pressure qs_pressure;

static bool pressure_on = true; /* QSLAB_PRESSURE */
static int psi_fd = -1;         /* the purger's */
static char current_path[QS_PRESSURE_PATH + 32]; /* the limit's usage file, or "" */
/* the process's cgroups: cgroup v2's (its PSI file and limits), and cgroup
 * v1's memory controller's (limits: memory.limit_in_bytes) */
struct cg {
    char dir[QS_PRESSURE_PATH];
    size_t len, mount_len; /* len 0: none */
};
static struct cg cg2, cg1;
/* a hierarchy's limit files: two limits (the lower counts; NULL: one) and
 * the usage; a limit of 2^62 or more is none (v1's unlimited is
 * PAGE_COUNTER_MAX pages) */
struct cg_files {
    const char *limit[2], *usage;
};
static const struct cg_files v2_files = {{"/memory.high", "/memory.max"}, "/memory.current"};
static const struct cg_files v1_files = {{"/memory.limit_in_bytes", NULL}, "/memory.usage_in_bytes"};
static unsigned ticks;
static char source[QS_PRESSURE_TEXT]; /* the source's text, without the limit */
static uint64_t last_high_ms;
static bool high_trimmed;

#define QS_LIMIT_RESCAN 40 /* ticks (10 s at 250 ms) between looks for the limit */
/* 90%: memory.high throttles and reclaims only above the limit, so the
 * trim must come before usage gets there, and usage must not come there
 * between two looks.  A tick is 250 ms: 10% of a 512 MiB limit is 51 MiB,
 * more than one thread faults in in 250 ms (13 us a 4 KiB page: 77 MiB/s),
 * so a program that grows steadily is seen below the limit at least once.
 * Less margin (95%) leaves 25 MiB, a tick of such growth; more (80%) trims
 * programs that run steadily with a fifth of their limit free, for nothing.
 * memory.current counts the cgroup's page cache too, which the kernel
 * reclaims cheaply: the rate limit below keeps that case to a trim a
 * second. */
#define QS_HIGH_MARGIN_PCT 90
#define QS_HIGH_EVERY_MS 1000

static QS_STARTUP void set_text(const char *fmt, ...)
{
    unsigned next = __atomic_load_n(&qs_pressure.cur, __ATOMIC_RELAXED) ^ 1;
    struct qs_buf b = {qs_pressure.text[next], 0, sizeof qs_pressure.text[next]};
    __builtin_va_list ap;
    __builtin_va_start(ap, fmt);
    qs_vformat(&b, fmt, ap);
    __builtin_va_end(ap);
    __atomic_store_n(&qs_pressure.cur, next, __ATOMIC_RELEASE);
}

const char *qs_pressure_text(void)
{
    return qs_pressure.text[__atomic_load_n(&qs_pressure.cur, __ATOMIC_ACQUIRE) & 1];
}

QS_STARTUP void qs_pressure_init(bool purge_on)
{
    pressure_on = qs_env_bool("QSLAB_PRESSURE", 1, "the reaction to memory pressure");
    if (!pressure_on)
        set_text("none (QSLAB_PRESSURE=0)");
    else if (!purge_on)
        set_text("none (QSLAB_PURGE=0: no purger to listen)");
    else
        set_text("none (not watched yet: the purger starts once qslab keeps memory)");
}

static const char *errno_text(int e)
{
    switch (e) {
    case ENOENT:
        return "no such file";
    case EACCES:
    case EPERM:
    case EROFS:
        return "not permitted";
    case EINVAL:
        return "trigger refused";
    case EOPNOTSUPP:
        return "PSI is off (psi=0)";
    case EBUSY:
        return "busy";
    default:
        return "cannot be opened";
    }
}

/* s joined with t into out (bounded): its length, or 0 if it did not fit */
static size_t join(char *out, size_t size, const char *s, size_t slen, const char *t)
{
    size_t tl = strlen(t);
    if (slen + tl + 1 > size)
        return 0;
    memcpy(out, s, slen);
    memcpy(out + slen, t, tl + 1);
    return slen + tl;
}

/* A trigger on path: the short window first, then the 2 s one; fd or -1
 * (errno of the last try), *trig the trigger that took. */
static int open_trigger(const char *path, const char **trig)
{
    static const char *const triggers[] = {"some 50000 500000", "some 200000 2000000"};
    int fd = -1;
    for (unsigned i = 0; i < 2 && fd < 0; i++) {
        *trig = triggers[i];
        fd = qs_os_psi_open(path, triggers[i]);
        if (fd < 0 && errno != EINVAL && errno != EPERM && errno != EACCES)
            break; /* another window would not help */
    }
    return fd;
}

/* A number of bytes from a cgroup file ("max" or anything else: 0) */
static uint64_t read_bytes(const char *path)
{
    char b[32];
    if (qs_os_read_file(path, b, sizeof b) <= 0 || b[0] < '0' || b[0] > '9')
        return 0;
    uint64_t v = 0;
    for (const char *s = b; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

/* In hierarchy g (files f): the nearest cgroup from ours up with a limit;
 * its limit (0: none), *len its directory's length, *which the file. */
static uint64_t walk_limit(const struct cg *g, const struct cg_files *f, size_t *len,
                           const char **which)
{
    char path[QS_PRESSURE_PATH + 32];
    for (*len = g->len; g->len;) {
        uint64_t best = 0;
        for (int i = 0; i < 2 && f->limit[i]; i++) {
            uint64_t v = join(path, sizeof path, g->dir, *len, f->limit[i]) ? read_bytes(path) : 0;
            if (v >= (uint64_t)1 << 62)
                v = 0;
            if (v && (!best || v < best)) {
                best = v;
                *which = f->limit[i] + 1;
            }
        }
        if (best)
            return best;
        if (*len <= g->mount_len)
            return 0;
        while (*len > g->mount_len && g->dir[*len - 1] != '/')
            (*len)--;
        if (*len > g->mount_len)
            (*len)--; /* the '/' */
    }
    return 0;
}

/* The limit (above): cgroup v2's nearest memory.high or memory.max, else
 * cgroup v1's nearest memory.limit_in_bytes. */
static QS_STARTUP void find_limit(void)
{
    size_t len = 0;
    const char *which = NULL;
    const struct cg *g = &cg2;
    const struct cg_files *f = &v2_files;
    uint64_t limit = walk_limit(g, f, &len, &which);
    if (!limit) {
        g = &cg1;
        f = &v1_files;
        limit = walk_limit(g, f, &len, &which);
    }
    uint64_t old = __atomic_load_n(&qs_pressure.limit, __ATOMIC_RELAXED);
    if (!limit || !join(current_path, sizeof current_path, g->dir, len, f->usage)) {
        current_path[0] = '\0';
        limit = 0;
    }
    if (limit != old) {
        __atomic_store_n(&qs_pressure.limit, limit, __ATOMIC_RELAXED);
        if (limit) {
            char dir[QS_PRESSURE_PATH];
            memcpy(dir, g->dir, len);
            dir[len] = '\0';
            set_text("%s; limit %s %u of %s", source, which, (unsigned long)limit, dir);
        } else {
            set_text("%s", source);
        }
    }
}

/* g: the stand-in directory `test` (tests/unit/pressure.c), or the
 * process's own in that hierarchy; *why when there is none */
static void find_cgroup(struct cg *g, const char *test, bool v1, const char **why)
{
    if (test) {
        g->len = strlen(test);
        g->len = g->len < sizeof g->dir ? g->len : 0;
        memcpy(g->dir, test, g->len);
        g->dir[g->len] = '\0';
        g->mount_len = g->len;
        if (!g->len)
            *why = "path too long";
    } else {
        g->len = qs_os_cgroup_dir(v1, g->dir, sizeof g->dir, &g->mount_len, why);
    }
}

QS_STARTUP void qs_pressure_open(void)
{
    if (psi_fd >= 0) { /* a fork's child: the parent's trigger */
        qs_os_close(psi_fd);
        psi_fd = -1;
    }
    __atomic_store_n(&qs_pressure.limit, 0, __ATOMIC_RELAXED);
    current_path[0] = '\0';
    ticks = 0;
    if (!pressure_on)
        return;
    const char *why = NULL, *trig = NULL;
    char path[QS_PRESSURE_PATH + 32];
    const char *sys = qs_pressure_paths.system ? qs_pressure_paths.system : "/proc/pressure/memory";
    const char *why1 = NULL;
    find_cgroup(&cg2, qs_pressure_paths.cgroup, false, &why);
    find_cgroup(&cg1, qs_pressure_paths.v1, true, &why1);
    char cg_why[QS_PRESSURE_PATH + 64] = "";
    if (cg2.len && join(path, sizeof path, cg2.dir, cg2.len, "/memory.pressure")) {
        psi_fd = open_trigger(path, &trig);
        if (psi_fd >= 0) {
            struct qs_buf b = {source, 0, sizeof source};
            qs_buf_str(&b, "cgroup ");
            qs_buf_str(&b, cg2.dir);
            qs_buf_str(&b, " (");
            qs_buf_str(&b, trig);
            qs_buf_str(&b, ")");
        } else {
            struct qs_buf b = {cg_why, 0, sizeof cg_why};
            qs_buf_str(&b, path);
            qs_buf_str(&b, ": ");
            qs_buf_str(&b, errno_text(errno));
        }
    } else {
        struct qs_buf b = {cg_why, 0, sizeof cg_why};
        qs_buf_str(&b, why ? why : "cgroup path too long");
    }
    if (psi_fd < 0) {
        psi_fd = open_trigger(sys, &trig);
        struct qs_buf b = {source, 0, sizeof source};
        if (psi_fd >= 0) {
            qs_buf_str(&b, "system (");
            qs_buf_str(&b, trig);
            qs_buf_str(&b, "; cgroup: ");
        } else {
            qs_buf_str(&b, "none (");
            qs_buf_str(&b, sys);
            qs_buf_str(&b, ": ");
            qs_buf_str(&b, errno_text(errno));
            qs_buf_str(&b, "; cgroup: ");
        }
        qs_buf_str(&b, cg_why);
        qs_buf_str(&b, ")");
    }
    set_text("%s", source);
    find_limit();
}

/* Give back everything not in use; its bytes on *bytes, its count on *n. */
static void trim(unsigned long *n, unsigned long *bytes)
{
    uint64_t t0 = qs_os_now_ms();
    size_t b = qs_api_hooks.trim(); /* qslab_trim: every CPU's queues, FIFOs, warm slots */
    uint64_t took = qs_os_now_ms() - t0;
    __atomic_store_n(n, *n + 1, __ATOMIC_RELAXED);
    __atomic_store_n(bytes, *bytes + b, __ATOMIC_RELAXED);
    if (took > qs_pressure.trim_ms_max)
        __atomic_store_n(&qs_pressure.trim_ms_max, took, __ATOMIC_RELAXED);
    /* then the mobile caches' sparse slabs, after the trim, which the
     * reaction's delay is about: their moves cost the owners' time */
    if (qs_api_hooks.defrag) {
        b = qs_api_hooks.defrag(true); /* api/defrag.c qs_defrag_tick */
        __atomic_store_n(bytes, *bytes + b, __ATOMIC_RELAXED);
    }
}

void qs_pressure_wait(unsigned ms)
{
    if (psi_fd < 0) {
        qs_os_sleep_ms(ms);
        return;
    }
    uint64_t end = qs_os_now_ms() + ms;
    for (;;) {
        int r = qs_os_psi_wait(psi_fd, ms);
        if (r > 0) {
            trim(&qs_pressure.events, &qs_pressure.event_bytes);
        } else if (r < 0) { /* the cgroup went away: no more events */
            qs_os_close(psi_fd);
            psi_fd = -1;
            struct qs_buf b = {source, 0, sizeof source};
            qs_buf_str(&b, "none (the trigger failed: its cgroup was removed)");
            set_text("%s", source);
            __atomic_store_n(&qs_pressure.limit, 0, __ATOMIC_RELAXED);
            current_path[0] = '\0';
            cg2.len = cg1.len = 0;
        }
        uint64_t now = qs_os_now_ms();
        if (now >= end)
            return;
        ms = (unsigned)(end - now);
        if (psi_fd < 0) {
            qs_os_sleep_ms(ms);
            return;
        }
    }
}

void qs_pressure_tick(void)
{
    if (!pressure_on || (!cg2.len && !cg1.len))
        return;
    if (++ticks % QS_LIMIT_RESCAN == 0)
        find_limit();
    uint64_t limit = qs_pressure.limit;
    if (!limit || !current_path[0])
        return;
    uint64_t cur = read_bytes(current_path);
    if (cur < limit / 100 * QS_HIGH_MARGIN_PCT) {
        high_trimmed = false;
        return;
    }
    uint64_t now = qs_os_now_ms();
    if (high_trimmed && now - last_high_ms < QS_HIGH_EVERY_MS)
        return;
    trim(&qs_pressure.high_trims, &qs_pressure.high_bytes);
    high_trimmed = true;
    last_high_ms = now;
}

struct qs_pressure_paths qs_pressure_paths;
