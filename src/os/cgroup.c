/*
 * os/cgroup.c - memory pressure from the kernel: the process's cgroup
 * directory (v2, else v1's memory controller) and its limits' files, PSI
 * triggers (the cgroup's memory.pressure or /proc/pressure/memory) and
 * their waits (see os.h; core/pressure.c uses them).
 */
#define _GNU_SOURCE
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* ---- memory pressure ----------------------------------------------------------- */

/* fn(line, len, arg) for each line of a file (lines of up to 4 KiB; a
 * longer one is skipped), until fn returns true: true then. */
static bool each_line(const char *path, bool (*fn)(const char *, size_t, void *), void *arg)
{
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t have = 0;
    bool skipping = false, found = false, eof = false;
    while (!found && !eof) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            eof = true;
            if (have && !skipping)
                buf[have++] = '\n'; /* a last line without its newline */
        } else {
            have += (size_t)n;
        }
        size_t start = 0;
        for (size_t i = 0; i < have && !found; i++) {
            if (buf[i] != '\n')
                continue;
            if (!skipping)
                found = fn(buf + start, i - start, arg);
            skipping = false;
            start = i + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf) { /* a line longer than the buffer */
            have = 0;
            skipping = true;
        }
    }
    close(fd);
    return found;
}

struct cg_find {
    char *buf;
    size_t size, len, mount_len;
    bool v1;         /* the cgroup v1 memory controller's hierarchy, not cgroup2's */
    const char *rel; /* the cgroup's path in its hierarchy, in rel_buf */
    size_t rel_len;
    char rel_buf[1024];
};

/* Is `word` one of the comma-separated words of s[0..n)? */
static bool has_word(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != ',')
            e++;
        if (e - i == wl && memcmp(s + i, word, wl) == 0)
            return true;
        i = e + 1;
    }
    return false;
}

static bool cg_line(const char *l, size_t n, void *arg) /* /proc/self/cgroup */
{
    /* ID:CONTROLLERS:PATH; cgroup2's is 0::PATH */
    struct cg_find *f = arg;
    const char *c1 = memchr(l, ':', n), *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
    if (!c2)
        return false;
    bool mine = f->v1 ? has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory")
                      : c1 - l == 1 && l[0] == '0' && c2 == c1 + 1;
    size_t len = n - (size_t)(c2 + 1 - l);
    if (!mine || len >= sizeof f->rel_buf)
        return false;
    memcpy(f->rel_buf, c2 + 1, len);
    f->rel_buf[len] = '\0';
    f->rel = f->rel_buf;
    f->rel_len = len;
    return true;
}

/* The n-th (from 0) space-separated field of l: its start and length. */
static const char *field(const char *l, size_t n, int k, size_t *len)
{
    size_t i = 0;
    for (int f = 0; i < n; f++) {
        size_t s = i;
        while (i < n && l[i] != ' ')
            i++;
        if (f == k) {
            *len = i - s;
            return l + s;
        }
        i++;
    }
    return NULL;
}

static bool mount_line(const char *l, size_t n, void *arg) /* /proc/self/mountinfo */
{
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER */
    struct cg_find *f = arg;
    const char *type = f->v1 ? " - cgroup " : " - cgroup2 ";
    size_t tl = strlen(type), i;
    for (i = 0; i + tl <= n; i++)
        if (memcmp(l + i, type, tl) == 0)
            break;
    if (i + tl > n)
        return false;
    size_t rl = 0, ml = 0, sl = 0;
    const char *root = field(l, n, 3, &rl), *mnt = field(l, n, 4, &ml);
    const char *super = field(l + i + tl, n - i - tl, 1, &sl); /* after SOURCE */
    if (!root || !mnt || memchr(mnt, '\\', ml)) /* an escaped name: not followed */
        return false;
    if (f->v1 && (!super || !has_word(super, sl, "memory")))
        return false;
    /* the cgroup's path below the mount's root */
    const char *rel = f->rel;
    size_t rel_len = f->rel_len;
    if (!(rl == 1 && root[0] == '/')) {
        if (rel_len < rl || memcmp(rel, root, rl) != 0 || (rel_len > rl && rel[rl] != '/'))
            return false; /* the cgroup is not under this mount */
        rel += rl;
        rel_len -= rl;
    }
    if (rel_len == 1 && rel[0] == '/')
        rel_len = 0;
    if (ml + rel_len + 1 > f->size)
        return false;
    memcpy(f->buf, mnt, ml);
    memcpy(f->buf + ml, rel, rel_len);
    f->buf[ml + rel_len] = '\0';
    f->len = ml + rel_len;
    f->mount_len = ml;
    return true;
}

QS_STARTUP size_t qs_os_cgroup_dir(bool v1_memory, char *buf, size_t size, size_t *mount_len,
                                   const char **why)
{
    struct cg_find f = {.buf = buf, .size = size, .v1 = v1_memory};
    if (!each_line("/proc/self/cgroup", cg_line, &f)) {
        *why = v1_memory ? "no cgroup v1 memory line in /proc/self/cgroup"
                         : "no cgroup v2 line in /proc/self/cgroup";
        return 0;
    }
    if (!each_line("/proc/self/mountinfo", mount_line, &f)) {
        *why = v1_memory ? "no cgroup v1 memory mount holds the process's cgroup"
                         : "no cgroup2 mount holds the process's cgroup";
        return 0;
    }
    *mount_len = f.mount_len;
    return f.len;
}

QS_STARTUP int qs_os_psi_open(const char *path, const char *trigger)
{
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(trigger) + 1; /* with its NUL, as the kernel's example writes it */
    ssize_t n;
    while ((n = write(fd, trigger, len)) < 0 && errno == EINTR)
        ;
    if (n < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int qs_os_psi_wait(int fd, unsigned ms)
{
    struct pollfd p = {.fd = fd, .events = POLLPRI};
    uint64_t end = qs_os_now_ms() + ms;
    for (;;) {
        int r = poll(&p, 1, (int)ms);
        if (r > 0)
            return (p.revents & (POLLERR | POLLNVAL | POLLHUP)) ? -1 : 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
        uint64_t now = qs_os_now_ms();
        if (now >= end)
            return 0;
        ms = (unsigned)(end - now);
    }
}

void qs_os_close(int fd)
{
    close(fd);
}
