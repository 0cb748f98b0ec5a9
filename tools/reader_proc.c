/*
 * reader_proc.c - the target process, for the reader (reader.h): its id from
 * the command line, its mappings (/proc/PID/maps) and which addresses they
 * make readable, reads of its memory (process_vm_readv), why the kernel
 * refuses them (the target's owner, CAP_SYS_PTRACE, Yama's ptrace_scope),
 * and whether it is still alive; die(), the tools' one way out.
 */
#define _GNU_SOURCE
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

pid_t g_pid;
int g_pidfd = -1; /* g_pid's pidfd once attached (-1: none, or no pidfd_open) */
const char *prog = "qslabinfo";
void (*die_hook)(void);

void die(int status, const char *fmt, ...)
{
    if (die_hook)
        die_hook();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

/* A process id from the command line (-p), or the process ends with one
 * line. */
void die_no_qslab(void)
{
    die(EXIT_CANNOT, "process %d does not use qslab (no qslab_observe_root in its mapped objects%s%s%s): start "
        "the program with qslab-run (e.g. qslabinfo -- qslab-run PROGRAM), or with libqslab-malloc.so in "
        "LD_PRELOAD", (int)g_pid, stripped_exe[0] ? "; its executable " : "", stripped_exe,
        stripped_exe[0] ? " has no symbol table, so a qslab linked into it statically cannot be found" : "");
}

pid_t parse_pid(const char *arg)
{
    char *end;
    errno = 0;
    long pid = strtol(arg, &end, 10);
    if (errno || *end || pid <= 0 || pid > INT_MAX)
        die(EXIT_USAGE, "bad process id '%s': a number from 1", arg);
    return (pid_t)pid;
}

/* ---------------------------------------------------------------- maps */

struct mapping *maps;
size_t nmaps;

bool load_maps(void)
{
    char fn[64];
    snprintf(fn, sizeof fn, "/proc/%d/maps", (int)g_pid);
    FILE *f = fopen(fn, "r");
    if (!f) {
        if (errno == ENOENT)
            explain_access(ESRCH);
        explain_access(errno);
    }
    size_t cap = nmaps ? nmaps + 64 : 256;
    struct mapping *m = malloc(cap * sizeof(*m));
    size_t n = 0;
    char line[4096 + 512];
    while (m && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n')) { /* an over-long line: skip its rest */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
        }
        unsigned long long lo, hi, off;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &lo, &hi, perms, &off, &pos) != 4)
            continue;
        if (n == cap) {
            if (cap > (1u << 24))
                break; /* a hostile map count: what we have */
            cap *= 2;
            struct mapping *g = realloc(m, cap * sizeof(*m));
            if (!g)
                break;
            m = g;
        }
        struct mapping *e = &m[n++];
        e->lo = lo;
        e->hi = hi;
        e->off = off;
        e->r = perms[0] == 'r';
        e->w = perms[1] == 'w';
        const char *p = line + pos;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, "\n");
        if (len >= sizeof e->path)
            len = sizeof e->path - 1;
        memcpy(e->path, p, len);
        e->path[len] = '\0';
    }
    fclose(f);
    if (!m)
        die(EXIT_CANNOT, "out of memory");
    free(maps);
    maps = m;
    nmaps = n;
    if (n == 0) /* a zombie, or a kernel thread: nothing mapped */
        return false;
    return true;
}

/* [addr, addr + len) inside readable mappings with no gap between them.
 * One object may span two: a program's .data/.bss ends in the last page
 * of its file's writable mapping and goes on in the anonymous mapping
 * after it (a structure across that boundary was refused as unreadable
 * once obs_fake's globals moved: the ASan build, 2026-12-01).  The list is
 * in address order, as /proc/PID/maps gives it. */
bool readable(uint64_t addr, size_t len)
{
    if (!addr || addr + len < addr)
        return false;
    uint64_t end = addr + len;
    for (size_t i = 0; i < nmaps && addr < end; i++)
        if (addr >= maps[i].lo && addr < maps[i].hi) {
            if (!maps[i].r)
                return false;
            addr = maps[i].hi; /* the rest must start where this one ends */
        }
    return addr >= end;
}

/* ---------------------------------------------------------------- reads */

int rd(uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(g_pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return 0;
    return n < 0 ? -errno : -EFAULT;
}

/* A checked read: the range must be mapped readable, the read complete. */
bool rdc(uint64_t addr, void *buf, size_t len, size_t align)
{
    if ((align && addr % align) || !readable(addr, len))
        return false;
    int r = rd(addr, buf, len);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0;
}

/* ---------------------------------------------------------------- permission */

long status_field(pid_t pid, const char *key)
{
    char fn[64], line[512];
    snprintf(fn, sizeof fn, pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
    FILE *f = fopen(fn, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static bool have_cap_sys_ptrace(void)
{
    char line[512];
    FILE *f = fopen("/proc/self/status", "r");
    bool cap = false;
    if (!f)
        return false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "CapEff:", 7) == 0) {
            unsigned long long v = strtoull(line + 7, NULL, 16);
            cap = (v >> 19) & 1; /* CAP_SYS_PTRACE */
        }
    fclose(f);
    return cap;
}

void explain_access(int err)
{
    if (err == ESRCH || (kill(g_pid, 0) != 0 && errno == ESRCH))
        die(EXIT_CANNOT, "no process %d (ESRCH: no such process)", (int)g_pid);
    if (err != EPERM && err != EACCES)
        die(EXIT_CANNOT, "cannot read process %d: %s", (int)g_pid, strerror(err));
    long uid = status_field(g_pid, "Uid"), me = (long)geteuid();
    bool cap = have_cap_sys_ptrace();
    int scope = -1;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    if (uid >= 0 && uid != me && !cap)
        die(EXIT_CANNOT,
            "cannot read process %d (EPERM): it runs as uid %ld and you are uid %ld without "
            "CAP_SYS_PTRACE (run as that user, or as root)",
            (int)g_pid, uid, me);
    if (scope == 3)
        die(EXIT_CANNOT, "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 3 (no "
                         "process may read another)", (int)g_pid);
    if (scope == 2 && !cap)
        die(EXIT_CANNOT, "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 2 (only "
                         "with CAP_SYS_PTRACE)", (int)g_pid);
    if (scope == 1 && !cap)
        die(EXIT_CANNOT,
            "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 1 (only its ancestors, "
            "or a process it named with prctl(PR_SET_PTRACER), may read it; or use "
            "CAP_SYS_PTRACE)", (int)g_pid);
    die(EXIT_CANNOT, "cannot read process %d (%s): the kernel refused (a process that is not "
                     "dumpable, e.g. setuid, or a security module)",
        (int)g_pid, err == EPERM ? "EPERM" : "EACCES");
}

void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Is pid still there: not gone, not a zombie (a zombie's memory is gone;
 * its parent has not reaped it yet)?  An unreadable /proc entry other than
 * a missing one counts as alive. */
bool process_alive(pid_t pid)
{
    if (pid == g_pid && g_pidfd >= 0) {
        struct pollfd p = {.fd = g_pidfd, .events = POLLIN};
        return poll(&p, 1, 0) == 0; /* readable once it has exited */
    }
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    char fn[64], buf[512];
    snprintf(fn, sizeof fn, "/proc/%d/stat", (int)pid);
    int fd = open(fn, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold anything: the state follows its ')' */
    return !(p && (p[2] == 'Z' || p[2] == 'X'));
}

/* A process on its way out fails reads (ESRCH: its memory is gone) before
 * it is a zombie: has the target finished exiting within ms?  The die
 * hooks ask this before a failed read counts as one (a CI run saw "no
 * process N (ESRCH)" for a target stopped while watched, 2026-12-01). */
bool exited_within(int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (!process_alive(g_pid))
            return true;
        pause_ms(10);
    }
    return false;
}
