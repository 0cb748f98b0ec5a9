/*
 * qslabinfo_control.c - the client side of the control channel
 * (qslabinfo_control.h; the protocol: src/observe/control.h).
 *
 * The socket of process PID is DIR/PID.sock, DIR being (as the library
 * chooses it, src/observe/control.c): $QSLAB_CONTROL_DIR (ours if set, else the
 * target's), else the target's $XDG_RUNTIME_DIR/qslab, else
 * /tmp/qslab-<the target's euid>.  The target's environment is read from
 * /proc/PID/environ (its start-up environment, which the library read too);
 * when that is refused, /tmp/qslab-<euid> is tried.
 */
#define _GNU_SOURCE
#include "qslabinfo_control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define QCTL_VERSION 1        /* the protocol this client speaks */
#define QCTL_WAIT_MS 10000    /* for each line of the answer */

static char request[4096];
static const char *g_prog = "qslabinfo";

static void fail(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void fail(int status, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

/* A word of a request: printable, no space (the server refuses others too,
 * but a clear message here is better) */
static const char *word(const char *w, const char *what)
{
    if (!*w)
        fail(2, "%s is empty", what);
    for (const char *p = w; *p; p++)
        if (*p <= ' ' || *p > '~')
            fail(2, "%s '%s' has a space or a byte that is not printable ASCII", what, w);
    return w;
}

static const char *next_cache(int argc, char **argv, int *optind)
{
    if (*optind < argc && argv[*optind][0] != '-')
        return word(argv[(*optind)++], "the cache name");
    return NULL;
}

void qctl_option(int code, const char *arg, int argc, char **argv, int *optind, const char *prog)
{
    g_prog = prog;
    if (request[0])
        fail(2, "one of --set, --get, --shrink, --validate, --control-stats at a time");
    const char *cache = NULL;
    int n = 0;
    switch (code) {
    case QCTL_SET: {
        word(arg, "the cache name");
        if (*optind >= argc || !strchr(argv[*optind], '='))
            fail(2, "--set CACHE ATTR=VALUE: ATTR=VALUE missing");
        char *av = argv[(*optind)++];
        char *eq = strchr(av, '=');
        *eq = '\0';
        n = snprintf(request, sizeof request, "set %s %s %s", arg, word(av, "the attribute"),
                     word(eq + 1, "the value"));
        *eq = '=';
        break;
    }
    case QCTL_GET:
        word(arg, "the cache name");
        if (*optind >= argc)
            fail(2, "--get CACHE ATTR: ATTR missing");
        n = snprintf(request, sizeof request, "get %s %s", arg,
                     word(argv[(*optind)++], "the attribute"));
        break;
    default:
        cache = next_cache(argc, argv, optind);
        n = snprintf(request, sizeof request, "%s%s%s",
                     code == QCTL_SHRINK ? "shrink" : code == QCTL_VALIDATE ? "validate" : "stats",
                     cache ? " " : "", cache ? cache : "");
    }
    if (n < 0 || (size_t)n >= sizeof request)
        fail(2, "the request is too long");
}

bool qctl_wanted(void)
{
    return request[0] != '\0';
}

/* ---------------------------------------------------------------- where */

/* The value of `key` in /proc/PID/environ into out; 1 found, 0 not there,
 * -1 unreadable. */
static int target_env(long pid, const char *key, char *out, size_t len)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    size_t kl = strlen(key);
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, key, kl) == 0 && buf[i + kl] == '=') {
            snprintf(out, len, "%s", buf + i + kl + 1);
            return 1;
        }
    return 0;
}

static long target_euid(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    long uid = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Uid:", 4) == 0) {
            long r, e;
            if (sscanf(line + 4, "%ld %ld", &r, &e) == 2)
                uid = e;
            break;
        }
    fclose(f);
    return uid;
}

static void socket_path(long pid, long euid, char *out, size_t len)
{
    char dir[4096], v[4096];
    const char *mine = getenv("QSLAB_CONTROL_DIR");
    if (mine && *mine)
        snprintf(dir, sizeof dir, "%s", mine);
    else if (target_env(pid, "QSLAB_CONTROL_DIR", v, sizeof v) == 1 && v[0] == '/')
        snprintf(dir, sizeof dir, "%s", v);
    else if (target_env(pid, "XDG_RUNTIME_DIR", v, sizeof v) == 1 && v[0] == '/')
        snprintf(dir, sizeof dir, "%.4000s/qslab", v);
    else
        snprintf(dir, sizeof dir, "/tmp/qslab-%ld", euid);
    snprintf(out, len, "%.200s/%ld.sock", dir, pid);
}

/* ---------------------------------------------------------------- talk */

static char inbuf[1 << 16];
static size_t inlen;

/* The next line (without '\n') into line; false at EOF or timeout (*why). */
static bool get_line(int fd, char *line, size_t len, const char **why)
{
    for (;;) {
        char *nl = memchr(inbuf, '\n', inlen);
        if (nl) {
            size_t n = (size_t)(nl - inbuf);
            snprintf(line, len, "%.*s", (int)n, inbuf);
            inlen -= n + 1;
            memmove(inbuf, nl + 1, inlen);
            return true;
        }
        if (inlen == sizeof inbuf) {
            *why = "an answer line over 64 KiB";
            return false;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, QCTL_WAIT_MS);
        if (r == 0) {
            *why = "no answer within 10 s";
            return false;
        }
        if (r < 0 && errno == EINTR)
            continue;
        ssize_t n = r < 0 ? -1 : read(fd, inbuf + inlen, sizeof inbuf - inlen);
        if (n <= 0) {
            *why = n == 0 ? "it closed the connection" : strerror(errno);
            return false;
        }
        inlen += (size_t)n;
    }
}

int qctl_run(long pid, const char *prog)
{
    g_prog = prog;
    char path[512], proc[64];
    struct stat st;
    snprintf(proc, sizeof proc, "/proc/%ld", pid);
    if (stat(proc, &st) != 0)
        fail(1, "no process %ld (ESRCH: no such process)", pid);
    long euid = target_euid(pid);
    if (euid < 0)
        euid = (long)st.st_uid;
    socket_path(pid, euid, path, sizeof path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        fail(1, "the socket path %s is too long", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail(1, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            fail(1, "process %ld serves no qslab control socket (no %s): start it with "
                    "QSLAB_CONTROL=1 or qslab_control_start()", pid, path);
        if (e == ECONNREFUSED)
            fail(1, "process %ld serves no qslab control socket (%s is left over, nobody "
                    "listens): start it with QSLAB_CONTROL=1 or qslab_control_start()", pid, path);
        if (e == EACCES || e == EPERM)
            fail(1, "cannot reach the control socket of process %ld (%s: %s): it serves uid %ld "
                    "and root only; you are uid %ld (run as that user, or as root)",
                 pid, e == EACCES ? "EACCES" : "EPERM", path, euid, (long)geteuid());
        fail(1, "cannot connect to %s: %s", path, strerror(e));
    }
    char line[65536];
    const char *why = "";
    if (!get_line(fd, line, sizeof line, &why))
        fail(1, "process %ld: no greeting on %s (%s)", pid, path, why);
    if (strncmp(line, "error: refused: ", 16) == 0)
        fail(1, "process %ld refused the control connection: %s (run as that user, or as root)",
             pid, line + 16);
    if (strncmp(line, "error: ", 7) == 0)
        fail(1, "process %ld: %s", pid, line + 7);
    int ver, gpid;
    if (sscanf(line, "qslab-control %d pid %d", &ver, &gpid) != 2)
        fail(1, "process %ld: %s is not a qslab control socket (it said \"%.80s\")", pid, path,
             line);
    if (ver != QCTL_VERSION)
        fail(4, "process %ld speaks control protocol version %d; this qslabinfo speaks version %d: "
                "use the qslabinfo of its qslab", pid, ver, QCTL_VERSION);
    size_t rl = strlen(request);
    request[rl] = '\n';
    for (size_t off = 0; off < rl + 1;) {
        ssize_t n = send(fd, request + off, rl + 1 - off, MSG_NOSIGNAL);
        if (n <= 0) {
            /* the server may have said why it closed (a request that came
             * too late): that line, rather than EPIPE */
            int e = errno;
            if (get_line(fd, line, sizeof line, &why) && strncmp(line, "error: ", 7) == 0)
                fail(1, "process %ld: %s", pid, line + 7);
            fail(1, "process %ld: sending the request: %s", pid, strerror(e));
        }
        off += (size_t)n;
    }
    request[rl] = '\0';
    for (;;) {
        if (!get_line(fd, line, sizeof line, &why))
            fail(1, "process %ld: no whole answer (%s)", pid, why);
        if (strcmp(line, "ok") == 0)
            break;
        if (strncmp(line, "error: ", 7) == 0)
            fail(1, "process %ld: %s", pid, line + 7);
        puts(line);
    }
    (void)!send(fd, "quit\n", 5, MSG_NOSIGNAL);
    close(fd);
    fflush(stdout);
    return 0;
}
