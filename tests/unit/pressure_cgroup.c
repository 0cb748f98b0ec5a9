/*
 * unit: a process in a cgroup with a memory limit gives back what qslab
 * keeps when its usage comes near the limit (core/pressure.c), where the
 * test can make such a cgroup: root, and a writable cgroup2 mount whose
 * root offers the memory controller (memory.high), else a writable mount
 * of cgroup v1's memory controller (memory.limit_in_bytes: hybrid hosts
 * such as these VMs).  Elsewhere it says why for each and skips.
 *
 * The cgroup is made under the mount's root (the root cgroup may hold
 * processes and enable controllers for its children), named after the
 * test's pid, its limit 256 MiB.  The child moves itself in, then runs
 * this program again (so qslab starts inside the cgroup): it allocates
 * 96 MiB of 2 KiB objects and frees them (kept as empty slabs: a decay of
 * 10 minutes), checks that the purger names the limit, then touches
 * anonymous memory outside qslab until the cgroup's usage (memory.current,
 * memory.usage_in_bytes) is at 92% of the limit (or a trim came first,
 * past 90%).  Within TU_WAIT_MS the purger must have trimmed (the
 * counters moved, at least 64 MiB given back), and usage must be at least
 * that much below what it was before the hog plus the hog.  The parent
 * removes the cgroup.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define HIGH (256ul << 20)
#define SET (96ul << 20)
#define OBJ 2048

static char cg[600];

static int put(const char *dir, const char *name, const char *text)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static unsigned long get(const char *dir, const char *name)
{
    char p[700], b[64] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (f) {
        if (!fgets(b, sizeof b, f))
            b[0] = '\0';
        fclose(f);
    }
    return strtoul(b, NULL, 10);
}

static int has_word(const char *dir, const char *name, const char *word)
{
    char p[700], b[512] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    if (!fgets(b, sizeof b, f))
        b[0] = '\0';
    fclose(f);
    for (char *t = strtok(b, " \n"); t; t = strtok(NULL, " \n"))
        if (!strcmp(t, word))
            return 1;
    return 0;
}

#define P(field) __atomic_load_n(&qs_pressure.field, __ATOMIC_RELAXED)

static int inside(void)
{
    const char *dir = getenv("PT_CGROUP");
    CHECK(dir != NULL);
    if (!dir)
        return tu_done();
    static void *objs[SET / OBJ];
    enum { N = SET / OBJ };
    qslab_cache *c = qslab_cache_create("t-pressure-cg", OBJ, 0, 0, NULL);
    tf_pin_slqb("t-pressure-cg"); /* a FIFO of empty slabs whatever QSLAB_FRONT (SLOB's pages go at once) */
    CHECK(c && qslab_tune("t-pressure-cg", "empty_decay_ms", "600000") == 0);
    int got = 0;
    for (int i = 0; i < N; i++)
        got += (objs[i] = qslab_cache_alloc(c)) != NULL;
    CHECKF(got == N, "%d of %d objects allocated", got, N);
    for (int i = 0; i < N; i++)
        if (objs[i])
            qslab_cache_free(c, objs[i]);
    const char *t = qs_pressure_text();
    for (uint64_t end = tu_now_ms() + TU_WAIT_MS;
         strstr(t, "not watched yet") && tu_now_ms() < end;) {
        qslab_cache_free(c, qslab_cache_alloc(c)); /* a slow path may start the purger */
        tu_sleep_ms(100);
        t = qs_pressure_text();
    }
    char want[700];
    bool v1 = getenv("PT_KIND") && !strcmp(getenv("PT_KIND"), "v1");
    const char *usage = v1 ? "memory.usage_in_bytes" : "memory.current";
    snprintf(want, sizeof want, "cgroup %s (", dir);
    CHECKF(v1 || !strncmp(t, want, strlen(want)), "source: %s", t);
    snprintf(want, sizeof want, "; limit %s %lu of %s", v1 ? "memory.limit_in_bytes" : "memory.high",
             HIGH, dir);
    CHECKF(strstr(t, want) != NULL, "no \"%s\" in: %s", want, t);
    unsigned long before = get(dir, usage), trims = P(high_trims);
    CHECKF(before >= SET, "%s %lu: the freed %lu bytes are not kept", usage, before, SET);
    printf("inside: %s; %s %lu with %lu bytes of empty slabs\n", t, usage, before, SET);
    /* the hog: anonymous memory outside qslab, touched a page at a time
     * until usage is at 92% of memory.high */
    size_t hog_size = HIGH, touched = 0;
    char *hog = mmap(NULL, hog_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hog != MAP_FAILED);
    while (hog != MAP_FAILED && touched < hog_size && P(high_trims) == trims &&
           get(dir, usage) < HIGH / 100 * 92)
        for (size_t end = touched + (1u << 20); touched < end; touched += 4096)
            hog[touched] = 1;
    unsigned long peak = get(dir, usage);
    double t0 = tu_now();
    for (uint64_t end = tu_now_ms() + TU_WAIT_MS; P(high_trims) == trims && tu_now_ms() < end;)
        tu_sleep_ms(50);
    double waited = tu_now() - t0;
    unsigned long after = get(dir, usage);
    printf("inside: %zu bytes of hog, usage %lu at the peak, %lu after %.2f s; %lu trims "
           "gave back %lu bytes (longest %lu ms); %lu pressure events gave back %lu bytes\n",
           touched, peak, after, waited, P(high_trims) - trims, P(high_bytes), P(trim_ms_max),
           P(events), P(event_bytes));
    CHECKF(P(high_trims) > trims, "no trim near the limit in %d s (usage %lu)", TU_WAIT_MS / 1000,
           after);
    CHECKF(P(high_bytes) >= SET * 2 / 3, "%lu bytes given back of %lu kept", P(high_bytes), SET);
    /* without the trim, usage would be what it was plus the hog */
    CHECKF(after + SET * 2 / 3 <= before + touched + (8ul << 20),
           "usage %lu after the trim, %lu before the hog of %zu bytes", after, before,
           touched);
    if (hog != MAP_FAILED)
        munmap(hog, hog_size);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

/* Why the test cannot make its cgroup in cgroup v2 (v1: in cgroup v1's
 * memory controller) here, or NULL (cg set). */
static const char *setup(bool v1)
{
    if (geteuid() != 0)
        return "not root";
    char dir[QS_PRESSURE_PATH];
    size_t mount_len = 0;
    const char *why = NULL;
    if (!qs_os_cgroup_dir(v1, dir, sizeof dir, &mount_len, &why))
        return why;
    dir[mount_len] = '\0'; /* the mount's root */
    if (!v1 && !has_word(dir, "cgroup.controllers", "memory"))
        return "its hierarchy has no memory controller";
    if (access(dir, W_OK) != 0)
        return "its mount is not writable";
    if (!v1 && !has_word(dir, "cgroup.subtree_control", "memory") &&
        put(dir, "cgroup.subtree_control", "+memory") != 0)
        return "the memory controller cannot be enabled for the root's children";
    snprintf(cg, sizeof cg, "%s/qslab-test-%d", dir, (int)getpid());
    if (mkdir(cg, 0755) != 0)
        return "cannot make a cgroup";
    char v[32];
    snprintf(v, sizeof v, "%lu", HIGH);
    if (put(cg, v1 ? "memory.limit_in_bytes" : "memory.high", v) != 0) {
        rmdir(cg);
        return v1 ? "memory.limit_in_bytes cannot be written" : "memory.high cannot be written";
    }
    return NULL;
}

static void move_in(void *arg)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (put(cg, "cgroup.procs", pid) != 0) {
        perror("cgroup.procs");
        _exit(3);
    }
    setenv("PT_CGROUP", arg, 1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return inside();
    const char *why = setup(false), *why1 = NULL;
    if (why && (why1 = setup(true)) != NULL) {
        printf("pressure_cgroup: skipped: cgroup v2: %s; cgroup v1: %s\n", why, why1);
        return tu_done();
    }
    setenv("PT_KIND", why ? "v1" : "v2", 1);
    printf("pressure_cgroup: in %s (cgroup %s)\n", cg, why ? "v1" : "v2");
    pid_t pid = tu_spawn_self("inside", move_in, cg);
    int st = pid < 0 ? -1 : tu_wait(pid);
    CHECKF(st == 0, "the child in %s: status %d", cg, st);
    /* the child's exit is seen a little later */
    for (uint64_t end = tu_now_ms() + TU_WAIT_MS; rmdir(cg) != 0 && tu_now_ms() < end;)
        tu_sleep_ms(100);
    struct stat sb;
    CHECKF(stat(cg, &sb) != 0, "%s is still there", cg);
    return tu_done();
}
