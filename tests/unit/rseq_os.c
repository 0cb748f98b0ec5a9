/*
 * unit: the operating-system layer for per-CPU queues (os.h): rseq areas
 * registered by glibc or by qslab, possible and allowed CPUs, membarrier.
 *
 * Run plainly, glibc has registered rseq; the test then runs itself again
 * with GLIBC_TUNABLES=glibc.pthread.rseq=0, where qslab must register its own
 * area in each thread.
 *
 * The CPU read through the area is compared with the CPU the thread is pinned
 * to and with the getcpu system call (not sched_getcpu(), which reads the
 * same rseq field when glibc registered).
 */
#define _GNU_SOURCE
#include "../testutil.h"
#include "../deny_rseq.h"
#include "os/os.h"

#include <dirent.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Weak, as in os/rseq.c: glibc 2.35+. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

static struct qs_os_rseq_info info;
static cpu_set_t allowed; /* the process's mask at start */

static int sys_getcpu(void)
{
    unsigned cpu = 0;
    return syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 ? (int)cpu : -1;
}

/* Pin the calling thread to each allowed CPU in turn; the rseq cpu_id must
 * name that CPU.  Restores the mask.  Returns the number of CPUs checked. */
static int check_cpu_ids(const char *who)
{
    int checked = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) {
            tu_fail("%s: sched_setaffinity(cpu %d): %s", who, c, strerror(errno));
            continue;
        }
        int seen = qs_os_rseq_cpu(info.offset);
        int real = sys_getcpu();
        CHECKF(seen == c && real == c, "%s pinned to cpu %d: rseq cpu_id %d, getcpu %d", who, c, seen, real);
        /* cpu_id_start holds the same id */
        uint32_t start = *(volatile uint32_t *)(qs_os_thread_pointer() + info.offset + QS_RSEQ_CPU_ID_START_OFF);
        CHECKF((int)start == c, "%s: cpu_id_start %u on cpu %d", who, start, c);
        checked++;
    }
    CHECK(sched_setaffinity(0, sizeof allowed, &allowed) == 0);
    return checked;
}

struct thread_result {
    int before, reg, reg_again, checked;
    uintptr_t area;
    const char *why_before, *why_after;
};

static void *thread_main(void *arg)
{
    struct thread_result *r = arg;
    r->before = info.mode != QS_RSEQ_NONE ? qs_os_rseq_cpu(info.offset) : -100;
    r->why_before = qs_os_rseq_thread_why();
    errno = 12345;
    r->reg = qs_os_rseq_register_thread();
    r->reg_again = qs_os_rseq_register_thread();
    CHECKF(errno == 12345, "register_thread changed errno to %d", errno);
    r->why_after = qs_os_rseq_thread_why();
    r->area = (uintptr_t)(qs_os_thread_pointer() + info.offset);
    if (r->reg == 0)
        r->checked = check_cpu_ids("thread");
    return NULL;
}

static struct thread_result run_thread(void)
{
    struct thread_result r = {0};
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, &r) != 0) {
        tu_fail("pthread_create failed");
        return r;
    }
    pthread_join(t, NULL);
    return r;
}

static int count_online(void)
{
    /* independent of qs_os_: the cpuN directories with online == 1 (cpu0
     * often has no "online" file) */
    int n = 0;
    DIR *d = opendir("/sys/devices/system/cpu");
    if (!d)
        return 1;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "cpu", 3) || e->d_name[3] < '0' || e->d_name[3] > '9')
            continue;
        char path[300], v = '1';
        snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/online", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fread(&v, 1, 1, f) != 1)
                v = '1';
            fclose(f);
        }
        n += v == '1';
    }
    closedir(d);
    return n;
}

static void test_cpus(void)
{
    int possible = qs_os_cpu_possible();
    int online = count_online();
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    CHECKF(possible >= online && possible >= 1, "possible %d, online %d", possible, online);
    CHECKF(possible >= conf, "possible %d, sysconf configured %ld", possible, conf);
    int highest = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            highest = c;
    CHECKF(highest < possible, "allowed cpu %d not below possible %d", highest, possible);
    CHECKF(qs_os_cpus_allowed() == CPU_COUNT(&allowed), "allowed %d, mask has %d", qs_os_cpus_allowed(),
           CPU_COUNT(&allowed));
    /* a narrower mask is seen */
    if (CPU_COUNT(&allowed) > 1) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(highest, &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
        CHECK(qs_os_cpus_allowed() == 1);
        CHECK(sched_setaffinity(0, sizeof allowed, &allowed) == 0);
    }
    printf("cpus: possible %d, online %d, allowed %d\n", possible, online, qs_os_cpus_allowed());
}

static void test_membarrier(void)
{
    long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q < 0 || !(q & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ)) {
        printf("SKIP membarrier: kernel lacks MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ (query %ld, Linux 5.10+)\n", q);
        CHECK(qs_os_membarrier_rseq(-1) == -1);
        return;
    }
    errno = 777;
    CHECK(qs_os_membarrier_rseq(0) == -1); /* not registered yet: EPERM */
    CHECK(qs_os_membarrier_rseq(-1) == -1);
    CHECK(errno == 777);
    CHECK(qs_os_membarrier_rseq_register() == 0);
    CHECK(qs_os_membarrier_rseq_register() == 0); /* again: harmless */
    CHECK(qs_os_membarrier_rseq(-1) == 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            CHECKF(qs_os_membarrier_rseq(c) == 0, "cpu %d", c);
    CHECK(qs_os_membarrier_rseq(qs_os_cpu_possible() + 5) == 0); /* offline id: nothing to do */
    CHECK(errno == 777);
}

/* Normal run: glibc registered. */
static int run_glibc(void)
{
    CHECKF(&__rseq_size != NULL && __rseq_size != 0, "glibc 2.35+ with rseq registered expected");
    CHECKF(info.mode == QS_RSEQ_GLIBC, "mode %d: %s", info.mode, info.why);
    CHECK(strcmp(info.why, "glibc registered rseq") == 0);
    if (info.mode != QS_RSEQ_GLIBC)
        return tu_done();
    CHECK(info.offset == (long)__rseq_offset && info.size == __rseq_size);
    CHECK(qs_os_thread_pointer() == (char *)__builtin_thread_pointer());
    CHECK(qs_os_rseq_register_thread() == 0);
    CHECK(strcmp(qs_os_rseq_thread_why(), "registered") == 0);
    CHECKF(check_cpu_ids("main") == CPU_COUNT(&allowed), "every allowed cpu checked");

    struct thread_result r = run_thread();
    CHECKF(r.before >= 0, "glibc registers new threads: cpu_id %d", r.before);
    CHECK(r.reg == 0 && r.reg_again == 0 && strcmp(r.why_after, "registered") == 0);
    CHECK(r.checked == CPU_COUNT(&allowed));

    test_cpus();
    test_membarrier();

    int st = tu_reexec("norseq", "GLIBC_TUNABLES", "glibc.pthread.rseq=0");
    CHECKF(st == 0, "re-run with GLIBC_TUNABLES=glibc.pthread.rseq=0 exited with %d", st);
    st = tu_reexec("enosys", "GLIBC_TUNABLES", "glibc.pthread.rseq=0");
    CHECKF(st == 0, "re-run with rseq denied (ENOSYS) exited with %d", st);
    st = tu_reexec("eperm", "GLIBC_TUNABLES", "glibc.pthread.rseq=0");
    CHECKF(st == 0, "re-run with rseq denied (EPERM) exited with %d", st);
    st = tu_reexec("glibc_eperm", "GLIBC_TUNABLES", NULL);
    CHECKF(st == 0, "re-run with glibc registered, then rseq denied (EPERM), exited with %d", st);
    return tu_done();
}

struct taken_result {
    int took, reg, reg_again, own_cpu;
    const char *why;
};

static void *taken_thread(void *arg)
{
    struct taken_result *r = arg;
    char *glibc_area = (char *)__builtin_thread_pointer() + __rseq_offset;
    r->took = (int)syscall(__NR_rseq, glibc_area, 32, 0, QS_RSEQ_SIG);
    r->reg = qs_os_rseq_register_thread();
    r->reg_again = qs_os_rseq_register_thread();
    r->why = qs_os_rseq_thread_why();
    r->own_cpu = qs_os_rseq_cpu(info.offset);
    return NULL;
}

/* Re-run with glibc.pthread.rseq=0: qslab registers its own area. */
static int run_self(void)
{
    CHECKF(&__rseq_size == NULL || __rseq_size == 0, "the tunable took effect: __rseq_size %u",
           &__rseq_size ? __rseq_size : 0);
    if (&__rseq_offset != NULL) /* glibc's own area says it did not register */
        CHECK(*(volatile int32_t *)((char *)__builtin_thread_pointer() + __rseq_offset + 4) == -2);
    CHECKF(info.mode == QS_RSEQ_SELF, "mode %d: %s", info.mode, info.why);
    CHECK(strstr(info.why, "qslab registered rseq") && strstr(info.why, "glibc.pthread.rseq=0"));
    if (info.mode != QS_RSEQ_SELF)
        return tu_done();
    CHECK(info.size == 32 && info.offset != (long)(&__rseq_offset ? __rseq_offset : 0));
    CHECK((((uintptr_t)qs_os_thread_pointer() + info.offset) & 31) == 0);
    /* init registered the main thread */
    CHECK(qs_os_rseq_cpu(info.offset) >= 0);
    CHECK(qs_os_rseq_register_thread() == 0);
    CHECKF(check_cpu_ids("main") == CPU_COUNT(&allowed), "every allowed cpu checked");
    /* a second init changes nothing */
    struct qs_os_rseq_info again;
    CHECK(qs_os_rseq_init(&again) == 0 && again.mode == QS_RSEQ_SELF && again.offset == info.offset);

    /* new threads start unregistered and register on demand; threads in turn
     * (their stacks, TLS included, are reused) */
    uintptr_t first_area = 0;
    int reused = 0;
    for (int i = 0; i < 3; i++) {
        struct thread_result r = run_thread();
        if (i == 0)
            first_area = r.area;
        else
            reused += r.area == first_area;
        CHECKF(r.before == -1, "thread %d: cpu_id %d before registering", i, r.before);
        CHECKF(strcmp(r.why_before, "not registered yet") == 0, "%s", r.why_before);
        CHECKF(r.reg == 0 && r.reg_again == 0, "thread %d: register %d/%d: %s", i, r.reg, r.reg_again,
               r.why_after);
        CHECK(strcmp(r.why_after, "registered") == 0);
        CHECK(r.checked == CPU_COUNT(&allowed));
        CHECK((r.area & 31) == 0);
    }
    printf("self-registered threads: %d of 2 reused the first thread's area\n", reused);

    /* a thread that already has another rseq area (here glibc's, as another
     * library might have done) is refused, once, with the reason */
    pthread_t t;
    struct taken_result tr = {0};
    CHECK(pthread_create(&t, NULL, taken_thread, &tr) == 0 && pthread_join(t, NULL) == 0);
    CHECKF(tr.took == 0, "registering glibc's area by hand failed");
    CHECKF(tr.reg == -1 && tr.reg_again == -1, "register %d/%d", tr.reg, tr.reg_again);
    CHECKF(tr.why && strstr(tr.why, "EINVAL"), "why: %s", tr.why ? tr.why : "(null)");
    CHECKF(tr.own_cpu == -2, "own area cpu_id %d after refusal", tr.own_cpu);

    /* a fork child inherits the registration: cpu_id follows its moves */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CHECK(qs_os_rseq_register_thread() == 0);
        CHECK(check_cpu_ids("fork child") == CPU_COUNT(&allowed));
        fflush(stderr);
        _exit(tu_failures() ? 1 : 0);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child status %#x", st);
    return tu_done();
}

/* Re-run with glibc.pthread.rseq=0 and rseq failing with ENOSYS or EPERM:
 * rseq is unavailable, with the reason. */
static int run_denied(int err, const char *word)
{
    if (deny_rseq(err) != 0) {
        printf("SKIP %s: cannot install a seccomp filter: %s\n", word, strerror(errno));
        return 0;
    }
    int r = qs_os_rseq_init(&info);
    CHECKF(r == -1 && info.mode == QS_RSEQ_NONE, "init %d, mode %d: %s", r, info.mode, info.why);
    CHECKF(strstr(info.why, word) != NULL, "\"%s\" not in \"%s\"", word, info.why);
    CHECK(qs_os_rseq_register_thread() == -1);
    CHECK(strcmp(qs_os_rseq_thread_why(), info.why) == 0);
    struct thread_result t = run_thread();
    CHECK(t.reg == -1 && t.reg_again == -1 && strcmp(t.why_after, info.why) == 0);
    printf("denied (%s): %s\n", word, info.why);
    return tu_done();
}

/* glibc registered, then a seccomp filter makes rseq answer EPERM: init's
 * signature check must not mistake that for a signature mismatch.  (No new
 * threads here: glibc would abort on their failed registration.) */
static int run_glibc_filtered(void)
{
    if (deny_rseq(EPERM) != 0) {
        printf("SKIP glibc_eperm: cannot install a seccomp filter: %s\n", strerror(errno));
        return 0;
    }
    int r = qs_os_rseq_init(&info);
    CHECKF(r == 0 && info.mode == QS_RSEQ_GLIBC, "mode %d: %s", info.mode, info.why);
    if (info.mode == QS_RSEQ_GLIBC)
        CHECK(check_cpu_ids("filtered main") == CPU_COUNT(&allowed));
    return tu_done();
}

int main(int argc, char **argv)
{
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    if (argc > 1 && strcmp(argv[1], "glibc_eperm") == 0)
        return run_glibc_filtered();
    if (argc > 1 && strcmp(argv[1], "enosys") == 0)
        return run_denied(ENOSYS, "ENOSYS");
    if (argc > 1 && strcmp(argv[1], "eperm") == 0)
        return run_denied(EPERM, "EPERM");
    errno = 4242;
    int r = qs_os_rseq_init(&info);
    CHECK(errno == 4242);
    CHECK(info.why != NULL);
    CHECKF(r == 0, "rseq unavailable: %s", info.why);
    printf("rseq: mode %d, offset %ld, size %u: %s\n", info.mode, info.offset, info.size, info.why);
    if (argc > 1 && strcmp(argv[1], "norseq") == 0)
        return run_self();
    return run_glibc();
}
