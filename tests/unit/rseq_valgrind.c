/*
 * unit: rseq emulated under valgrind (os.h QS_RSEQ_VALGRIND), which lets
 * callgrind count the per-CPU fast paths' instructions.
 *
 * Run plainly, the test runs itself again under `valgrind --tool=none`
 * (scripts/install-deps installs valgrind) and checks there:
 *   - the mode is QS_RSEQ_VALGRIND, and the main thread has a virtual CPU
 *     id below the number of possible CPUs;
 *   - every other thread that asks gets an id of its own until all are
 *     taken, then is refused with the reason; an exiting thread's id goes
 *     to the next thread that asks;
 *   - membarrier is refused (no section is the kernel's to restart);
 *   - the library runs with per-CPU queues there, more threads than ids
 *     allocating, writing, checking and freeing (the threads without an id
 *     run without a queue).
 * Sanitizer builds cannot run under valgrind: there it says so and passes
 * (the normal builds run it).
 */
#define _GNU_SOURCE
#include "../testutil.h"
#include "os/os.h"
#include "qslab.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long rseq_off;

#define CHECKF(expr, ...) tu_check(!!(expr), __FILE__, __LINE__, #expr, __VA_ARGS__)

struct claim {
    pthread_barrier_t *claimed, *hold; /* wait at both after the claim, if set */
    int got, cpu;
    char why[160];
};

static void *claim_thread(void *arg)
{
    struct claim *c = arg;
    c->got = qs_os_rseq_register_thread() == 0;
    c->cpu = qs_os_rseq_cpu(rseq_off);
    snprintf(c->why, sizeof c->why, "%s", qs_os_rseq_thread_why());
    if (c->hold) {
        pthread_barrier_wait(c->claimed);
        pthread_barrier_wait(c->hold);
    }
    return NULL;
}

#define WORKERS 6
#define ROUNDS 2000

static void *alloc_thread(void *arg)
{
    uintptr_t seed = (uintptr_t)arg, bad = 0;
    void *held[64] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int i = (int)(tu_rand((uint64_t *)&seed) % 64);
        if (held[i]) {
            unsigned char *p = held[i];
            size_t n = p[0] * 8 + 16;
            for (size_t k = 1; k < n; k++)
                bad += p[k] != (unsigned char)(k ^ p[0]);
            qslab_free(p);
        }
        unsigned char tag = (unsigned char)(tu_rand((uint64_t *)&seed) % 120 + 1);
        size_t n = tag * 8 + 16;
        unsigned char *p = qslab_malloc(n);
        if (!p)
            return (void *)(uintptr_t)-1;
        p[0] = tag;
        for (size_t k = 1; k < n; k++)
            p[k] = (unsigned char)(k ^ tag);
        held[i] = p;
    }
    for (int i = 0; i < 64; i++)
        qslab_free(held[i]);
    return (void *)bad;
}

static __attribute__((unused)) int inside(void) /* not called in sanitizer builds */
{
    struct qs_os_rseq_info info;
    int usable = qs_os_rseq_init(&info) == 0;
    CHECKF(usable, "rseq usable: %s", info.why);
    CHECKF(info.mode == QS_RSEQ_VALGRIND, "mode %d (%s), want the emulation", info.mode, info.why);
    rseq_off = info.offset;
    int n = qs_os_cpu_possible(), cpu0 = qs_os_rseq_cpu(rseq_off);
    CHECKF(cpu0 >= 0 && cpu0 < n, "main thread's virtual CPU %d (possible %d)", cpu0, n);
    CHECKF(qs_os_membarrier_rseq_register() != 0, "membarrier registered under the emulation");

    /* every id taken: n - 1 more threads hold theirs, the next is refused */
    int held = n - 1 < 63 ? n - 1 : 63;
    pthread_barrier_t claimed, hold;
    pthread_barrier_init(&claimed, NULL, (unsigned)held + 1);
    pthread_barrier_init(&hold, NULL, (unsigned)held + 1);
    struct claim c[64];
    pthread_t t[64];
    unsigned long seen = 1ul << cpu0;
    for (int i = 0; i < held; i++) {
        c[i] = (struct claim){.claimed = &claimed, .hold = &hold};
        pthread_create(&t[i], NULL, claim_thread, &c[i]);
    }
    struct claim extra = {0};
    pthread_barrier_wait(&claimed); /* every holder has its id */
    if (held == n - 1) { /* all ids out: one more is refused */
        pthread_t x;
        pthread_create(&x, NULL, claim_thread, &extra);
        pthread_join(x, NULL);
        CHECKF(!extra.got && extra.cpu < 0, "a thread past %d ids got cpu %d", n, extra.cpu);
        CHECKF(strstr(extra.why, "every virtual CPU is taken") != NULL, "refusal: %s", extra.why);
    }
    pthread_barrier_wait(&hold);
    for (int i = 0; i < held; i++) {
        pthread_join(t[i], NULL);
        CHECKF(c[i].got && c[i].cpu >= 0 && c[i].cpu < n, "thread %d: got %d cpu %d (%s)", i, c[i].got,
              c[i].cpu, c[i].why);
        if (c[i].cpu >= 0 && c[i].cpu < 64) {
            CHECKF(!(seen & (1ul << c[i].cpu)), "virtual CPU %d given twice", c[i].cpu);
            seen |= 1ul << c[i].cpu;
        }
    }
    /* the holders exited: their ids are free again */
    if (held >= 1) {
        struct claim again = {0};
        pthread_t x;
        pthread_create(&x, NULL, claim_thread, &again);
        pthread_join(x, NULL);
        CHECKF(again.got && again.cpu >= 0 && again.cpu != cpu0, "after the exits: got %d cpu %d (%s)",
              again.got, again.cpu, again.why);
    }

    /* the library, with more threads than ids */
    struct qslab_owner_info oi;
    qslab_owner_info(&oi);
    CHECKF(strstr(oi.why, "emulated under valgrind") != NULL, "owner: %s", oi.why);
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, alloc_thread, (void *)(uintptr_t)(i * 7919 + 1));
    for (int i = 0; i < WORKERS; i++) {
        void *r;
        pthread_join(w[i], &r);
        CHECKF(r == NULL, "worker %d: %s", i, r == (void *)(uintptr_t)-1 ? "allocation failed" : "bytes changed");
    }
    return tu_done();
}

int main(int argc, char **argv)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)argc;
    (void)argv;
    printf("sanitizer build: valgrind cannot run it (the normal builds run this test)\n");
    return 0;
#else
    if (argc > 1 && !strcmp(argv[1], "--inside"))
        return inside();
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        tu_fail("valgrind is not installed (scripts/install-deps installs it)");
        return tu_done();
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECKF(len > 0, "readlink /proc/self/exe");
    self[len > 0 ? len : 0] = 0;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("QSLAB_OWNER", "cpu", 1);
        execlp("valgrind", "valgrind", "--tool=none", "-q", self, "--inside", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the run under valgrind: status %#x", st);
    return tu_done();
#endif
}
