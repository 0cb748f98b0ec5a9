/*
 * bench_pressure: the two programs of bench/pressure.py, which runs them
 * side by side in a cgroup with a memory limit (docs/benchmarks.md,
 * "Memory pressure").
 *
 *   bench_pressure hold BIG SMALL SECONDS
 *       a program past its peak: BIG MiB of 2 KiB blocks through malloc,
 *       written, freed; "freed" on stdout; then SMALL MiB taken, written
 *       and freed every 100 ms for SECONDS; prints its slowest small pass
 *   bench_pressure hog MIB
 *       a neighbour that needs memory at once: MIB MiB of anonymous memory
 *       touched a MiB at a time; prints the time taken and the slowest MiB
 *       (a MiB that waits for reclaim shows here)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void pass(void **p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = malloc(2048);
        if (!p[i]) {
            fprintf(stderr, "bench_pressure: out of memory\n");
            exit(1);
        }
        memset(p[i], 1, 2048);
    }
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "hold")) {
        size_t big = strtoul(argv[2], NULL, 10) << 9, small = strtoul(argv[3], NULL, 10) << 9;
        double secs = atof(argv[4]), worst = 0;
        void **p = calloc(big > small ? big : small, sizeof *p);
        if (!p)
            return 1;
        pass(p, big);
        printf("freed\n");
        fflush(stdout);
        int n = 0;
        for (double end = now() + secs; now() < end; n++) {
            double t0 = now();
            pass(p, small);
            if (now() - t0 > worst)
                worst = now() - t0;
            usleep(100000);
        }
        printf("hold: %d small passes, slowest %.1f ms\n", n, worst * 1e3);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "hog")) {
        size_t mib = strtoul(argv[2], NULL, 10);
        char *m = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return 1;
        double t0 = now(), worst = 0;
        for (size_t i = 0; i < mib; i++) {
            double a = now();
            for (size_t o = 0; o < (1u << 20); o += 4096)
                m[(i << 20) + o] = 1;
            if (now() - a > worst)
                worst = now() - a;
        }
        printf("hog: %zu MiB in %.3f s, slowest MiB %.2f ms\n", mib, now() - t0, worst * 1e3);
        return 0;
    }
    fprintf(stderr, "usage: bench_pressure hold BIG SMALL SECONDS | hog MIB\n");
    return 2;
}
