/*
 * observe/control_int.h - what control.c (the server: sockets, the thread,
 * start and stop) and control_cmd.c (the requests) share: a connection,
 * the server's state, and the calls between them.
 */
#ifndef QSLAB_CONTROL_INT_H
#define QSLAB_CONTROL_INT_H

#include "observe/control.h"

#include <sys/types.h>

#pragma GCC visibility push(hidden)


struct client {
    int fd; /* -1: a free slot */
    bool closing; /* close once the output is sent */
    uint64_t deadline; /* ms: the next request (or the output) by then */
    size_t inlen;
    char in[QS_CTL_LINE_MAX];
    char *out;
    size_t outlen, outoff, outcap;
};

struct server_arg {
    int listen_fd, wake_fd; /* owned by `ctl`; only read here */
    uid_t uid;
    pid_t pid;
    unsigned timeout_ms;
};

struct server {
    struct server_arg a;
    struct client cl[QS_CTL_CLIENTS];
    struct qs_buf cap; /* qs_warn's text while a request runs */
    char *cap_mem;
    struct qs_ctl_cache *snap; /* qs_stats_collect's output */
    size_t snap_max;
};
#define CAPTURE_BYTES (64u << 10)

/* control_cmd.c: carry out one request line of connection c, its answer
 * into c's output; and a formatted line of an answer */
void ctl_handle_line(struct server *s, struct client *c, const char *line, size_t len);
void ctl_out_printf(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#pragma GCC visibility pop

#endif /* QSLAB_CONTROL_INT_H */
