/*
 * bench_spawn: run a program in a process of its own and report its peak
 * RSS, page faults and times (bench/programs/programs.py runs every program
 * through it).
 *
 *     bench_spawn --fd N [-e NAME=VALUE]... [-u NAME]... -- COMMAND [ARGS...]
 *
 * Forks, sets the -e variables and unsets the -u ones in the child, and
 * execs COMMAND there (searched in PATH); stdin, stdout and stderr are the
 * child's.  On descriptor N it writes
 *
 *     pid PID
 *     exit CODE maxrss_kib K minflt F majflt J utime S stime S wall S
 *
 * the first line at once (the caller samples /proc/PID/statm while it runs),
 * the second once the child has exited (CODE: its exit status, or minus
 * the signal that ended it; the rest from wait4 and CLOCK_MONOTONIC).
 *
 * Why a helper: the kernel's peak RSS of a process (ru_maxrss, VmHWM at its
 * exit) includes the memory of the process it was forked from, as it was at
 * the exec.  Forked from the Python runner, every program would be charged
 * the runner's own 16 MiB or more; forked from this program, at most its
 * own: about 1.6 MiB, less than any program measured.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: bench_spawn --fd N [-e NAME=VALUE]... [-u NAME]... -- COMMAND "
                    "[ARGS...]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int fd = -1, i = 1;

    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--fd") == 0)
            fd = atoi(argv[++i]);
        else if (strcmp(argv[i], "-e") != 0 && strcmp(argv[i], "-u") != 0)
            usage();
        else
            i++; /* applied in the child */
    }
    if (fd < 0 || i + 1 >= argc)
        usage();
    char **cmd = argv + i + 1;

    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bench_spawn: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        for (int j = 1; j < i; j++) {
            if (strcmp(argv[j], "-e") == 0) {
                char *eq = strchr(argv[j + 1], '=');
                if (eq) {
                    *eq = '\0';
                    setenv(argv[j + 1], eq + 1, 1);
                }
                j++;
            } else if (strcmp(argv[j], "-u") == 0) {
                unsetenv(argv[++j]);
            } else {
                j++; /* --fd N */
            }
        }
        close(fd);
        execvp(cmd[0], cmd);
        fprintf(stderr, "bench_spawn: %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    dprintf(fd, "pid %d\n", (int)pid);

    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "bench_spawn: wait4: %s\n", strerror(errno));
            return 1;
        }
    }
    double wall = now() - t0;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    dprintf(fd, "exit %d maxrss_kib %ld minflt %ld majflt %ld utime %.6f stime %.6f wall %.6f\n",
            code, ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6, wall);
    return 0;
}
