/*
 * control.c - the opt-in control channel (control.h for the protocol;
 * docs/observability.md, "Control channel"; docs/design.md, "The control
 * channel").
 *
 * With QSLAB_CONTROL=1 (read by cache.c's constructor) or
 * qslab_control_start(), the process serves a Unix stream socket
 *     DIR/<pid>.sock, mode 0600, in DIR of mode 0700 owned by its user,
 *     DIR = $QSLAB_CONTROL_DIR, else $XDG_RUNTIME_DIR/qslab, else
 *           /tmp/qslab-<euid>
 * from one background thread.  Peers of another user (SO_PEERCRED; root is
 * let in) get one line "error: refused: ..." and are disconnected.
 *
 * Like src/os/, this file talks to the OS directly (sockets, poll,
 * pthreads): the channel is Linux's, and nothing on an allocation path
 * calls into it.
 *
 * WHO OWNS WHAT (the concurrency argument):
 *   - `ctl` (running, thread, the listening socket, the wake pipe, the
 *     path) belongs to whoever holds ctl_lock: qslab_control_start/stop,
 *     the exit destructor and the fork handlers.  The server thread never
 *     touches `ctl` nor takes ctl_lock: it gets the two descriptors it
 *     uses by value (struct server_arg) and only reads them.  They are
 *     closed only after the thread was joined (stop), or in a fork child,
 *     where the thread does not exist.  So stop's pthread_join under
 *     ctl_lock cannot wait on a thread that waits for ctl_lock.
 *   - The connections (descriptors, buffers, deadlines) belong to the
 *     server thread alone, from accept to close.
 *   - The server thread calls the public API (qslab_tune, qslab_cache_stats
 *     through qs_stats_collect, qslab_cache_validate, qslab_cache_shrink,
 *     qslab_trim) like any thread of the program; each takes and releases
 *     its locks inside.  All socket I/O is non-blocking and happens between
 *     those calls, with no qslab lock held: a stalled or hostile peer can
 *     delay only the server thread, never an allocation.  Answers are built
 *     in memory first, then sent as the peer reads them.
 *   - A cache named in a request is pinned while the thread acts on it
 *     (pin(): found in the list and recorded in qs_ctl_pinned under
 *     qs_global; unpin() with release).  qslab_cache_destroy waits, under
 *     qs_global and before it unlinks the cache, until it is not pinned, so
 *     the pointer the thread holds stays valid; once unlinked, nobody finds
 *     it to pin it again.  The wait is short (one request's work) and the
 *     destroying thread holds no lock while it waits.
 *   - fork: prepare takes ctl_lock (so `ctl` is consistent in the child;
 *     it runs before qslab's own prepare, registered earlier, and a holder
 *     of ctl_lock never waits for the forking thread), the parent releases
 *     it; the child, which has no server thread, closes the listening
 *     socket and the wake pipe, forgets the path (the parent's: not
 *     unlinked) and marks the channel stopped.  The child serves nothing
 *     until it calls qslab_control_start().  Descriptors of connections
 *     open at the fork stay open in the child (it cannot know them
 *     safely); they are the parent's peers' and the child never reads them.
 */
#define _GNU_SOURCE
#include "observe/control.h"
#include "observe/control_int.h"
#include "front/front.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void drop(struct client *c)
{
    char sink[512];
    /* what the peer sent and we will not read: taken, so that the close
     * does not turn into a reset that loses the answer */
    for (int i = 0; i < 64 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    close(c->fd);
    c->fd = -1;
    if (c->out)
        qs_meta_free(c->out, c->outcap);
    c->out = NULL;
    c->outlen = c->outoff = c->outcap = 0;
    c->inlen = 0;
    c->closing = false;
}


static void take_lines(struct server *s, struct client *c, uint64_t now)
{
    while (!c->closing) {
        char *nl = memchr(c->in, '\n', c->inlen);
        if (!nl)
            break;
        size_t n = (size_t)(nl - c->in);
        ctl_handle_line(s, c, c->in, n);
        c->inlen -= n + 1;
        memmove(c->in, nl + 1, c->inlen);
        c->deadline = now + s->a.timeout_ms; /* the next request's time starts */
    }
    if (!c->closing && c->inlen == sizeof c->in) { /* no newline in a whole line's room */
        ctl_out_printf(c, "error: request line over %d bytes: closing\n", QS_CTL_LINE_MAX);
        c->closing = true;
        c->inlen = 0;
    }
}

static void flush_out(struct server *s, struct client *c, uint64_t now)
{
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            c->closing = true; /* the peer is gone */
            c->outoff = c->outlen;
            break;
        }
        c->outoff += (size_t)n;
        c->deadline = now + s->a.timeout_ms; /* the peer reads: it gets its time */
    }
    c->outoff = c->outlen = 0;
}

static void say_and_close(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say_and_close(int fd, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!send(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1,
                    MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
}

static void accept_all(struct server *s, uint64_t now)
{
    for (;;) {
        int fd = accept4(s->a.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or an error the next poll shows again */
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) {
            say_and_close(fd, "error: refused: the peer's credentials cannot be read\n");
            continue;
        }
        if (!qs_ctl_peer_ok(cr.uid, s->a.uid)) {
            say_and_close(fd,
                          "error: refused: uid %u is neither the user of process %d (uid %u) "
                          "nor root\n",
                          (unsigned)cr.uid, (int)s->a.pid, (unsigned)s->a.uid);
            continue;
        }
        struct client *c = NULL;
        for (int pass = 0; pass < 2 && !c; pass++) {
            for (int i = 0; i < QS_CTL_CLIENTS && !c; i++)
                if (s->cl[i].fd < 0)
                    c = &s->cl[i];
            for (int i = 0; i < QS_CTL_CLIENTS && !c && pass == 0; i++) {
                /* full: first let go of peers that hung up since the poll */
                struct pollfd p = {.fd = s->cl[i].fd, .events = POLLIN};
                if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
                    s->cl[i].outoff = s->cl[i].outlen = 0;
                    drop(&s->cl[i]);
                }
            }
        }
        if (!c) {
            say_and_close(fd, "error: busy: %d connections are served already; try again\n",
                          QS_CTL_CLIENTS);
            continue;
        }
        c->fd = fd;
        c->deadline = now + s->a.timeout_ms;
        ctl_out_printf(c, "qslab-control %d pid %d\n", QS_CTL_VERSION, (int)s->a.pid);
        flush_out(s, c, now);
    }
}

static void serve_client(struct server *s, struct client *c, short revents, uint64_t now)
{
    if (revents & POLLOUT)
        flush_out(s, c, now);
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && !c->closing) {
        ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, MSG_DONTWAIT);
        if (n > 0) {
            c->inlen += (size_t)n;
            take_lines(s, c, now);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            c->closing = true; /* the peer said all it will; queued answers still go */
        }
        flush_out(s, c, now);
    } else if ((revents & (POLLHUP | POLLERR)) && c->closing) {
        c->outoff = c->outlen = 0; /* nobody to send to */
    }
    if (c->closing && c->outoff == c->outlen)
        drop(c);
}

static void *server_main(void *arg)
{
    qs_os_thread_name("qslab-control");
    struct server *s = arg;
    struct pollfd pf[2 + QS_CTL_CLIENTS];
    int who[2 + QS_CTL_CLIENTS];
    for (;;) {
        uint64_t now = qs_os_now_ms();
        int np = 0, timeout = 1000;
        pf[np++] = (struct pollfd){.fd = s->a.wake_fd, .events = POLLIN};
        pf[np++] = (struct pollfd){.fd = s->a.listen_fd, .events = POLLIN};
        for (int i = 0; i < QS_CTL_CLIENTS; i++) {
            struct client *c = &s->cl[i];
            if (c->fd < 0)
                continue;
            if (now >= c->deadline) {
                if (c->closing) { /* its time to take the answer is over too */
                    c->outoff = c->outlen = 0;
                    drop(c);
                    continue;
                }
                ctl_out_printf(c, "error: no whole request within %u ms: closing\n",
                           s->a.timeout_ms);
                c->closing = true;
                c->deadline = now + s->a.timeout_ms; /* to read that line */
                flush_out(s, c, now);
                if (c->outoff == c->outlen) {
                    drop(c);
                    continue;
                }
            }
            uint64_t left = c->deadline - now;
            if (left < (uint64_t)timeout)
                timeout = (int)left + 1;
            who[np] = i;
            pf[np++] = (struct pollfd){
                .fd = c->fd,
                .events = (short)((c->closing ? 0 : POLLIN) | (c->outoff < c->outlen ? POLLOUT : 0)),
            };
        }
        int r = poll(pf, (nfds_t)np, timeout);
        if (r < 0 && errno != EINTR)
            qs_os_sleep_ms(10); /* (ENOMEM) not a busy loop */
        if (r <= 0)
            continue;
        if (pf[0].revents)
            break; /* stop */
        now = qs_os_now_ms();
        for (int k = 2; k < np; k++)
            if (pf[k].revents && s->cl[who[k]].fd >= 0)
                serve_client(s, &s->cl[who[k]], pf[k].revents, now);
        if (pf[1].revents & POLLIN)
            accept_all(s, now);
    }
    for (int i = 0; i < QS_CTL_CLIENTS; i++)
        if (s->cl[i].fd >= 0) {
            s->cl[i].outoff = s->cl[i].outlen = 0;
            drop(&s->cl[i]);
        }
    qs_meta_free(s->cap_mem, CAPTURE_BYTES);
    if (s->snap)
        qs_meta_free(s->snap, s->snap_max * sizeof(*s->snap));
    qs_meta_free(s, sizeof(*s));
    return NULL;
}

/* ------------------------------------------------------------ start, stop */

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ctl_once = PTHREAD_ONCE_INIT;
static struct {
    bool running;
    pthread_t thread;
    int listen_fd, wake_rd, wake_wr;
    pid_t pid;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} ctl = {false, 0, -1, -1, -1, 0, ""};

static void fork_prepare(void)
{
    pthread_mutex_lock(&ctl_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&ctl_lock);
}

static void fork_child(void)
{
    if (ctl.running) { /* the thread is the parent's; so are the socket and its name */
        close(ctl.listen_fd);
        close(ctl.wake_rd);
        close(ctl.wake_wr);
        ctl.listen_fd = ctl.wake_rd = ctl.wake_wr = -1;
        ctl.path[0] = '\0';
        ctl.running = false;
    }
    pthread_mutex_unlock(&ctl_lock);
}

static void ctl_register_fork(void)
{
    qs_os_atfork(fork_prepare, fork_parent, fork_child);
}

/* A decimal number in [lo, hi], or dflt (with a warning if set but bad). */
static unsigned env_ms(const char *name, unsigned dflt, unsigned lo, unsigned hi)
{
    const char *v = qs_os_getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || v[0] < '0' || v[0] > '9' || n < lo || n > hi) {
        qs_warn("%s=%s ignored: allowed range is %u..%u ms", name, v, (unsigned long)lo,
                (unsigned long)hi);
        return dflt;
    }
    return (unsigned)n;
}

/* Make (or check) the private directory; its descriptor, or -1 (warned). */
static int private_dir(char *dir, size_t len, mode_t mode)
{
    const char *d = qs_os_getenv("QSLAB_CONTROL_DIR");
    const char *x = qs_os_getenv("XDG_RUNTIME_DIR");
    int n;
    if (d && *d) {
        if (d[0] != '/') {
            qs_warn("control: QSLAB_CONTROL_DIR=%s is not an absolute path", d);
            errno = EINVAL;
            return -1;
        }
        n = snprintf(dir, len, "%s", d);
    } else if (x && x[0] == '/') {
        n = snprintf(dir, len, "%s/qslab", x);
    } else {
        n = snprintf(dir, len, "/tmp/qslab-%u", (unsigned)geteuid());
    }
    if (n < 0 || (size_t)n >= len) {
        qs_warn("control: the directory name is too long for a socket");
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(dir, mode) != 0 && errno != EEXIST) {
        qs_warn("control: cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        qs_warn("control: %s is not a directory of uid %u (a symbolic link, or another "
                "user's): the control channel is not started",
                dir, (unsigned long)geteuid());
        if (fd >= 0)
            close(fd);
        errno = EPERM;
        return -1;
    }
    if ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0) {
        qs_warn("control: cannot make %s private: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Remove the sockets of processes that no longer exist (killed before
 * they could remove theirs). */
static void sweep_stale(int dfd)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        struct stat st;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || strcmp(end, ".sock") != 0 || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
            st.st_uid == geteuid())
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

/* ctl_lock held */
static int start_locked(void)
{
    if (ctl.running && ctl.pid == getpid())
        return 0;
    /* QSLAB_CONTROL_TEST_OPEN=1 (tests only): directory 0711, socket 0666,
     * so that another user reaches connect() and SO_PEERCRED alone refuses */
    const char *open_v = qs_os_getenv("QSLAB_CONTROL_TEST_OPEN");
    bool open_mode = open_v && strcmp(open_v, "1") == 0;
    char dir[sizeof(ctl.path)];
    int dfd = private_dir(dir, sizeof dir - 16, open_mode ? 0711 : 0700);
    if (dfd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int pn = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
    if (pn < 0 || (size_t)pn >= sizeof sa.sun_path) { /* (private_dir left room) */
        close(dfd);
        errno = ENAMETOOLONG;
        return -1;
    }
    sweep_stale(dfd);
    close(dfd);
    /* the server's memory is qslab's own (meta.c), not the program's heap:
     * it never shows in the caches it reports on */
    struct server *s = qs_meta_alloc(sizeof(*s));
    char *cap = qs_meta_alloc(CAPTURE_BYTES);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int wake[2] = {-1, -1};
    const char *what = "socket";
    if (!s || !cap || lfd < 0)
        goto fail;
    /* a file of this name is a dead process's that had our pid: replaced */
    if (unlink(sa.sun_path) != 0 && errno != ENOENT) {
        what = "unlink of the old socket";
        goto fail;
    }
    what = "bind";
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0)
        goto fail;
    what = "chmod";
    if (chmod(sa.sun_path, open_mode ? 0666 : 0600) != 0)
        goto fail_unlink;
    what = "listen";
    if (listen(lfd, 64) != 0)
        goto fail_unlink;
    what = "pipe";
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        goto fail_unlink;
    s->a = (struct server_arg){lfd, wake[0], geteuid(), getpid(),
                               env_ms("QSLAB_CONTROL_TIMEOUT_MS", QS_CTL_TIMEOUT_MS, 100, 600000)};
    s->cap = (struct qs_buf){cap, 0, CAPTURE_BYTES};
    s->cap_mem = cap;
    for (int i = 0; i < QS_CTL_CLIENTS; i++)
        s->cl[i].fd = -1;
    pthread_attr_t attr;
    sigset_t all, old;
    what = "pthread_create";
    if (pthread_attr_init(&attr) != 0)
        goto fail_unlink;
    pthread_attr_setstacksize(&attr, 256 << 10);
    /* the server takes none of the program's signals */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&ctl.thread, &attr, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        goto fail_unlink;
    }
    ctl.listen_fd = lfd;
    ctl.wake_rd = wake[0];
    ctl.wake_wr = wake[1];
    ctl.pid = getpid();
    memcpy(ctl.path, sa.sun_path, sizeof ctl.path);
    ctl.running = true;
    return 0;
fail_unlink:
    unlink(sa.sun_path);
fail:;
    int e = errno;
    qs_warn("control: %s of %s failed: %s", what, sa.sun_path, strerror(e));
    if (lfd >= 0)
        close(lfd);
    if (wake[0] >= 0) {
        close(wake[0]);
        close(wake[1]);
    }
    if (cap)
        qs_meta_free(cap, CAPTURE_BYTES);
    if (s)
        qs_meta_free(s, sizeof(*s));
    errno = e;
    return -1;
}

/* ctl_lock held */
static void stop_locked(void)
{
    if (!ctl.running)
        return;
    /* the thread ends at its next poll (it holds no lock we hold) */
    (void)!write(ctl.wake_wr, "x", 1);
    pthread_join(ctl.thread, NULL);
    close(ctl.listen_fd);
    close(ctl.wake_rd);
    close(ctl.wake_wr);
    ctl.listen_fd = ctl.wake_rd = ctl.wake_wr = -1;
    unlink(ctl.path);
    ctl.path[0] = '\0';
    ctl.running = false;
}

int qs_control_start(void)
{
    pthread_once(&ctl_once, ctl_register_fork);
    pthread_mutex_lock(&ctl_lock);
    int r = start_locked();
    pthread_mutex_unlock(&ctl_lock);
    return r;
}

QSLAB_EXPORT int qslab_control_stop(void)
{
    pthread_mutex_lock(&ctl_lock);
    bool was = ctl.running;
    stop_locked();
    pthread_mutex_unlock(&ctl_lock);
    if (!was) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

QS_STARTUP void qs_control_init(void)
{
    if (qs_env_bool("QSLAB_CONTROL", 0, "the control channel"))
        (void)qs_control_start(); /* a failure said why on stderr */
}

/* At exit (and at dlclose of libqslab.so, which must not leave the thread
 * running its unmapped code): stop the thread, remove the socket. */
__attribute__((destructor)) static QS_STARTUP void ctl_exit(void)
{
    pthread_mutex_lock(&ctl_lock);
    if (ctl.running && ctl.pid == getpid())
        stop_locked();
    pthread_mutex_unlock(&ctl_lock);
}
