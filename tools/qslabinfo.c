/*
 * qslabinfo - read a running process's qslab counters from outside, with
 * nothing added to the program (docs/observability.md).
 *
 *   qslabinfo [-e] [-T] [-S] [-L] [--proc] [--json] -p PID
 *   qslabinfo [options] [--delay MS] -- PROGRAM [ARGS...]
 *
 * How (tools/reader.c, shared with qslabtop): find the mapped ELF objects
 * of the target in /proc/PID/maps, look up `qslab_observe_root` in their
 * .dynsym or .symtab (through /proc/PID/map_files/, else the path), add
 * the load bias, and read the
 * root and everything it points to with process_vm_readv.  Every pointer
 * followed must lie in a readable mapping of the target; every list walk
 * is bounded; a read whose generation (observe.h) was odd or moved is
 * retried a bounded number of times.  The statistics are computed by the
 * library's own arithmetic (src/observe/stats_calc.h).
 *
 * This file: the command line, a PROGRAM run under trace and read at its
 * exit, and the choice of output mode (qslabinfo_print.c prints them).
 *
 * Exit status: 0 read and printed; 1 cannot read (no such process,
 * permission, no qslab in it); 2 bad usage; 3 no consistent snapshot (the
 * target kept changing, or its data does not hold together); 4 a qslab of
 * another layout version.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qslabinfo_control.h"
#include "qslabinfo_print.h"
#include "qslabinfo_record.h"
#include "reader.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-T|-A|-n|-l|-X|-r CACHE|--proc|--json] [-e] [-S|-L] -p PID\n"
            "       %s --record FILE [--interval MS] [--count N] -p PID\n"
            "       %s [options] [--delay MS] -- PROGRAM [ARGS...]\n"
            "Read the qslab counters of a running process (docs/observability.md).\n"
            "  (default)   one line per cache, after SLUB's slabinfo\n"
            "  -T          totals: where the process's qslab memory is\n"
            "  -A          activity: allocs, frees, %% fast, remote frees, flushes, refills\n"
            "  -n          per NUMA node: the nodes' lists, the owners' slabs on each\n"
            "  -l          per owner (CPU or thread): queued objects, slabs, events\n"
            "  -X          plot-ready columns: numbers only, the cache name last\n"
            "  -r CACHE    everything about one cache\n"
            "  --proc      /proc/slabinfo version 2.1 text\n"
            "  --json      every counter, for scripts\n"
            "  -e          caches without slabs too\n"
            "  -S, -L      sort by space, by loss (default: by name)\n"
            "  --retries N reads before giving up on a changing target (default 50)\n"
            "  --delay MS  with PROGRAM: read after MS ms instead of at its exit\n"
            "  --record FILE  sample the counters into FILE (- for stdout) every --interval MS\n"
            "              (default 1000) for --count N samples (default: until the process\n"
            "              exits or a signal); scripts/qslab-plot draws PNG charts of it\n"
            "Steer a process that serves the control channel (QSLAB_CONTROL=1), with -p PID:\n"
            "  --set CACHE ATTR=VALUE   change a tunable (qslab_tune; CACHE * for every cache)\n"
            "  --get CACHE ATTR         read a tunable\n"
            "  --shrink [CACHE]         give empty slabs back (every cache: qslab_trim)\n"
            "  --validate [CACHE]       check a cache's invariants (or every cache's)\n"
            "  --control-stats [CACHE]  the counters as key=value, from the process itself\n"
            "Exit: 0 ok, 1 cannot read (no process, permission, no qslab), 2 bad usage,\n"
            "3 no consistent snapshot, 4 another layout version.\n",
            prog, prog, prog);
}

enum { MODE_DEFAULT, MODE_TOTALS, MODE_PROC, MODE_JSON, MODE_ACTIVITY, MODE_ONE, MODE_NODES,
       MODE_OWNERS, MODE_PLOT, MODE_RECORD };
static const char *opt_record;      /* --record FILE */
static long opt_interval = 1000;    /* --interval MS */
static long opt_count;              /* --count N (0: until the process exits) */
static const char *opt_cache;
static int mode = MODE_DEFAULT;

static int report(void)
{
    static struct snap s;
    if (!attach(&s))
        die_no_qslab();
    if (mode == MODE_RECORD) /* its samples: snapshots it may skip */
        return record_run(&s, opt_record, opt_interval, opt_count);
    snapshot(&s);
    switch (mode) {
    case MODE_TOTALS:
        print_totals(&s);
        break;
    case MODE_PROC:
        print_proc(&s);
        break;
    case MODE_JSON:
        print_json(&s);
        break;
    case MODE_ACTIVITY:
        print_activity(&s);
        break;
    case MODE_ONE:
        print_one(&s, opt_cache);
        break;
    case MODE_NODES:
        print_nodes(&s);
        break;
    case MODE_OWNERS:
        print_owners(&s);
        break;
    case MODE_PLOT:
        print_plot(&s);
        break;
    default:
        print_default(&s);
    }
    fflush(stdout);
    return 0;
}

/* Run PROGRAM as a traced child and read it when it exits (PTRACE_EVENT_EXIT:
 * its memory is still there), or after --delay MS. */
static int run_program(char **argv, long delay_ms)
{
    pid_t pid = fork();
    if (pid < 0)
        die(EXIT_CANNOT, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (delay_ms < 0) {
            if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
                fprintf(stderr, "%s: cannot trace %s (ptrace: %s): use --delay MS to read it "
                                "while it runs\n", prog, argv[0], strerror(errno));
                _exit(126);
            }
            raise(SIGSTOP);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[0], strerror(errno));
        _exit(127);
    }
    g_pid = pid;
    int status, rc = EXIT_CANNOT;
    if (delay_ms >= 0) {
        pause_ms((int)delay_ms);
        if (waitpid(pid, &status, WNOHANG) == pid)
            die(EXIT_CANNOT, "%s exited before %ld ms", argv[0], delay_ms);
        rc = report();
        waitpid(pid, &status, 0);
        return rc;
    }
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
        exit(EXIT_CANNOT); /* the child said why */
    ptrace(PTRACE_SETOPTIONS, pid, NULL,
           (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL));
    ptrace(PTRACE_CONT, pid, NULL, NULL);
    bool done = false;
    for (;;) {
        if (waitpid(pid, &status, 0) != pid)
            break;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (sig == SIGTRAP && event == PTRACE_EVENT_EXIT) {
            if (!done) {
                rc = report();
                done = true;
            }
            sig = 0;
        } else if (sig == SIGTRAP && event) {
            sig = 0; /* exec */
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    if (!done)
        die(EXIT_CANNOT, "%s ended without an exit to read at", argv[0]);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"proc", no_argument, NULL, 'P'},   {"json", no_argument, NULL, 'J'},
        {"retries", required_argument, NULL, 'R'}, {"delay", required_argument, NULL, 'D'},
        {"pid", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
        {"set", required_argument, NULL, QCTL_SET}, {"get", required_argument, NULL, QCTL_GET},
        {"shrink", no_argument, NULL, QCTL_SHRINK}, {"validate", no_argument, NULL, QCTL_VALIDATE},
        {"control-stats", no_argument, NULL, QCTL_STATS},
        {"record", required_argument, NULL, 'W'}, {"interval", required_argument, NULL, 'I'},
        {"count", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    long pid = -1, delay = -1;
    int o;
    while ((o = getopt_long(argc, argv, "+p:TeSLAr:nlXh", longs, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'p':
            pid = parse_pid(optarg);
            break;
        case 'T':
            mode = MODE_TOTALS;
            break;
        case 'A':
            mode = MODE_ACTIVITY;
            break;
        case 'r':
            mode = MODE_ONE;
            opt_cache = optarg;
            break;
        case 'P':
            mode = MODE_PROC;
            break;
        case 'J':
            mode = MODE_JSON;
            break;
        case 'n':
            mode = MODE_NODES;
            break;
        case 'l':
            mode = MODE_OWNERS;
            break;
        case 'X':
            mode = MODE_PLOT;
            break;
        case 'W':
            mode = MODE_RECORD;
            opt_record = optarg;
            break;
        case 'I':
            errno = 0;
            opt_interval = strtol(optarg, &end, 10);
            if (errno || *end || opt_interval < 10 || opt_interval > 3600000)
                die(EXIT_USAGE, "--interval %s: give milliseconds from 10 to 3600000", optarg);
            break;
        case 'C':
            errno = 0;
            opt_count = strtol(optarg, &end, 10);
            if (errno || *end || opt_count < 0)
                die(EXIT_USAGE, "--count %s: give a number of samples (0: until the process "
                                 "exits)", optarg);
            break;
        case 'e':
            opt_empty = true;
            break;
        case 'S':
            sort_mode = 1;
            break;
        case 'L':
            sort_mode = 2;
            break;
        case 'R':
            opt_retries = atoi(optarg);
            if (opt_retries < 1 || opt_retries > 100000)
                die(EXIT_USAGE, "--retries wants 1..100000");
            break;
        case 'D':
            delay = strtol(optarg, &end, 10);
            if (*end || delay < 0 || delay > 86400000)
                die(EXIT_USAGE, "--delay wants milliseconds");
            break;
        case QCTL_SET:
        case QCTL_GET:
        case QCTL_SHRINK:
        case QCTL_VALIDATE:
        case QCTL_STATS:
            qctl_option(o, optarg, argc, argv, &optind, prog);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (qctl_wanted()) { /* the control channel (qslabinfo_control.c) */
        if (pid <= 0 || optind < argc)
            die(EXIT_USAGE, "--set, --get, --shrink, --validate and --control-stats want -p PID "
                             "(and no program)");
        return qctl_run(pid, prog);
    }
    if (mode == MODE_RECORD && (pid <= 0 || optind < argc))
        die(EXIT_USAGE, "--record wants -p PID (and no program)");
    if (pid > 0) {
        if (optind < argc)
            die(EXIT_USAGE, "-p and a program to run: choose one");
        g_pid = (pid_t)pid;
        return report();
    }
    if (optind < argc)
        return run_program(argv + optind, delay);
    usage(stderr);
    return EXIT_USAGE;
}
