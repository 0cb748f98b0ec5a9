/*
 * unit: the control channel (src/observe/control.c).  The request parser alone
 * (what it takes, what it refuses, that a refusal leaves nothing behind),
 * the peer check, qs_warn's capture, and the server thread in this process:
 * qslab_control_start/stop, a request over the socket while other threads
 * allocate (label concurrency, by name: TSan runs it).
 */
#include "../testutil.h"
#include "observe/control.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

static int parse(const char *s, struct qs_ctl_req *r, char *err)
{
    return qs_ctl_parse(s, strlen(s), r, err, 256);
}

static void good(void)
{
    struct qs_ctl_req r;
    char err[256];
    CHECK(parse("set kmalloc-64 order 3", &r, err) == 0 && r.verb == QS_CTL_SET &&
          !strcmp(r.cache, "kmalloc-64") && !strcmp(r.attr, "order") && !strcmp(r.value, "3"));
    CHECK(parse("set * empty_decay_ms 500\r", &r, err) == 0 && !strcmp(r.cache, "*") &&
          !strcmp(r.value, "500"));
    CHECK(parse("get a hiwater", &r, err) == 0 && r.verb == QS_CTL_GET && !r.value[0]);
    CHECK(parse("shrink", &r, err) == 0 && r.verb == QS_CTL_SHRINK && !r.cache[0]);
    CHECK(parse("shrink c", &r, err) == 0 && !strcmp(r.cache, "c"));
    CHECK(parse("validate", &r, err) == 0 && r.verb == QS_CTL_VALIDATE);
    CHECK(parse("stats x", &r, err) == 0 && r.verb == QS_CTL_STATS && !strcmp(r.cache, "x"));
    CHECK(parse("help", &r, err) == 0 && r.verb == QS_CTL_HELP);
    CHECK(parse("quit", &r, err) == 0 && r.verb == QS_CTL_QUIT);
    char name[64];
    memset(name, 'n', 63);
    name[63] = '\0';
    char line[128];
    snprintf(line, sizeof line, "stats %s", name); /* the longest word */
    CHECK(parse(line, &r, err) == 0 && strlen(r.cache) == 63);
}

static void bad(void)
{
    static const char *const lines[] = {
        "", "\r", " stats", "stats ", "stats  x", "STATS", "stat", "statsx", "set a order",
        "set a order 3 4", "set a Order 3", "set a ord-er 3", "get * order", "get a",
        "shrink a b", "validate *", "stats *", "help me", "quit now", "set a order\t3",
        "stats a\r\r", "set a b c d e", "\x7f", "caf\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct qs_ctl_req r;
        memset(&r, 0x55, sizeof r);
        char err[256] = "";
        int rc = parse(lines[i], &r, err);
        struct qs_ctl_req zero;
        memset(&zero, 0, sizeof zero);
        CHECKF(rc == -1 && err[0] && !memcmp(&r, &zero, sizeof r), "'%s' -> %d '%s'", lines[i],
               rc, err);
    }
    /* bytes past len are not read; a NUL inside is refused */
    struct qs_ctl_req r;
    char err[256];
    CHECK(qs_ctl_parse("stats\0x", 7, &r, err, sizeof err) == -1 && strstr(err, "0x00"));
    CHECK(qs_ctl_parse("helpXXXX", 4, &r, err, sizeof err) == 0 && r.verb == QS_CTL_HELP);
    char word[80];
    memset(word, 'w', 64);
    word[64] = '\0';
    char line[128];
    snprintf(line, sizeof line, "stats %s", word);
    CHECK(parse(line, &r, err) == -1 && strstr(err, "over 63 bytes"));
    static char big[QS_CTL_LINE_MAX + 8];
    memset(big, 'a', sizeof big);
    CHECK(qs_ctl_parse(big, QS_CTL_LINE_MAX, &r, err, sizeof err) == -1 && strstr(err, "over"));
    CHECK(qs_ctl_parse("x", 1, &r, NULL, 0) == -1); /* no room for the reason: fine */
}

static void peers(void)
{
    CHECK(qs_ctl_peer_ok(1000, 1000));
    CHECK(qs_ctl_peer_ok(0, 1000));
    CHECK(!qs_ctl_peer_ok(65534, 1000));
    CHECK(!qs_ctl_peer_ok(1000, 0)); /* a root process: only root */
    CHECK(qs_ctl_peer_ok(0, 0));
}

static void capture(void)
{
    char text[1024], err[512];
    struct qs_buf b = {text, 0, sizeof text};
    text[0] = '\0';
    tu_stderr_begin();
    qs_warn_capture(&b);
    int rc = qslab_tune("kmalloc-64", "order", "99");
    qs_warn_capture(NULL);
    size_t n = tu_stderr_end(err, sizeof err);
    CHECKF(rc == -1 && strstr(text, "qslab: tune kmalloc-64 order=99 refused: allowed range is"),
           "%s", text);
    CHECKF(n == 0, "stderr got: %s", err);
}

/* qslab_cache_destroy waits while the control thread has the cache pinned */
static int destroyed = -2;

static void *destroyer(void *arg)
{
    __atomic_store_n(&destroyed, qslab_cache_destroy(arg), __ATOMIC_RELEASE);
    return NULL;
}

static void pinned(void)
{
    qslab_cache *c = qslab_cache_create("pinned", 64, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    __atomic_store_n(&qs_ctl_pinned, c, __ATOMIC_RELEASE);
    pthread_t t;
    pthread_create(&t, NULL, destroyer, c);
    usleep(100000);
    CHECK(__atomic_load_n(&destroyed, __ATOMIC_ACQUIRE) == -2); /* still waiting */
    CHECK(qslab_cache_find("pinned") == c);
    __atomic_store_n(&qs_ctl_pinned, NULL, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK(__atomic_load_n(&destroyed, __ATOMIC_ACQUIRE) == 0);
    CHECK(qslab_cache_find("pinned") == NULL);
}

static int stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p[32];
        for (int i = 0; i < 32; i++)
            p[i] = qslab_malloc(64);
        for (int i = 0; i < 32; i++)
            qslab_free(p[i]);
    }
    return NULL;
}

static int ask(const char *path, const char *req, char *out, size_t cap)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    size_t n = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0)
            break;
        ssize_t r = read(fd, out + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        out[n] = '\0';
        if (strstr(out, "\nok\n") || strstr(out, "\nerror: ") || n == cap - 1)
            break;
    }
    out[n] = '\0';
    close(fd);
    return (int)n;
}

static void server(void)
{
    char dir[] = "/tmp/qslab-unit-XXXXXX";
    if (!mkdtemp(dir)) {
        tu_fail("mkdtemp");
        return;
    }
    char cdir[64], path[128];
    snprintf(cdir, sizeof cdir, "%s/c", dir);
    snprintf(path, sizeof path, "%s/%d.sock", cdir, (int)getpid());
    setenv("QSLAB_CONTROL_DIR", cdir, 1);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    CHECK(qslab_control_start() == 0);
    CHECK(qslab_control_start() == 0); /* running already */
    struct stat st;
    CHECK(stat(cdir, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
    static char out[1 << 16];
    unsigned long order = 99;
    char want[32];
    CHECK(qslab_tune_get("kmalloc-64", "order", &order) == 0); /* 0, 1 for a debug cache */
    snprintf(want, sizeof want, "\n%lu\nok\n", order);
    CHECK(ask(path, "get kmalloc-64 order\n", out, sizeof out) > 0);
    CHECKF(!strncmp(out, "qslab-control 1 pid ", 20) && strstr(out, want), "%s", out);
    CHECK(ask(path, "set kmalloc-64 hiwater 1\n", out, sizeof out) > 0);
    CHECKF(strstr(out, "\nerror: tune kmalloc-64 hiwater=1 refused: allowed range is "), "%s",
           out);
    CHECK(ask(path, "stats kmalloc-64\n", out, sizeof out) > 0);
    CHECKF(strstr(out, "\nname=kmalloc-64 front=") && strstr(out, "\nok\n"), "%s", out);
    CHECK(ask(path, "shrink\n", out, sizeof out) > 0 && strstr(out, "\nfreed "));
    CHECK(ask(path, "frobnicate\n", out, sizeof out) > 0 && strstr(out, "\nerror: unknown request"));
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(qslab_control_stop() == 0);
    CHECK(stat(path, &st) != 0 && errno == ENOENT);
    errno = 0;
    CHECK(qslab_control_stop() == -1 && errno == ENOENT);
    rmdir(cdir);
    rmdir(dir);
    unsetenv("QSLAB_CONTROL_DIR");
}

int main(void)
{
    good();
    bad();
    peers();
    capture();
    pinned();
    server();
    return tu_done();
}
