/*
 * qslabtop - procps slabtop's screen for one process's qslab caches, read
 * from outside with nothing added to the program (docs/observability.md,
 * man/man1/qslabtop.1).
 *
 *   qslabtop [-d SECONDS] [-s KEY] [-o] -p PID
 *   qslabtop [-d SECONDS] [-s KEY] [-o] -- PROGRAM [ARGS...]
 *
 * The screen: slabtop's five summary lines, a line of qslab's own (the
 * process, its allocations and remote frees per second, the large blocks),
 * then one line per cache under slabtop's column header, with three more
 * columns: allocations per second and remote frees per second between the
 * last two readings, and the trend of the cache's memory (an arrow for the
 * last refresh, and the change since qslabtop first saw the cache).
 * Keys: slabtop's sort keys (a b c l v n o p s u), space to read now, q to
 * quit.  -o prints one screen on stdout, without curses.
 *
 * The reading is tools/reader.c's, as qslabinfo's.  Exit status: 0 (also
 * when the process ends while watched: qslabtop says so), 1 cannot read (no
 * such process, permission, no qslab in it, no terminal), 2 bad usage, 3 no
 * consistent snapshot, 4 a qslab of another layout version.
 */
#define _GNU_SOURCE
#include "reader.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- rows */

/* One cache as shown, with what the history adds. */
struct row {
    char name[QS_NAME_MAX];
    unsigned long objs, active, slabs, active_slabs;
    unsigned objsize, objs_per_slab, pages;
    unsigned long long size; /* cache size, bytes */
    double alloc_rate, remote_rate; /* per second; < 0: not known yet */
    long long trend;                /* bytes since first seen */
    int dir;                        /* +1 grew, -1 shrank since the last reading, 0 */
};

/* What is kept of a cache from one reading to the next. */
struct hist {
    uint64_t addr;
    unsigned id;
    char name[QS_NAME_MAX];
    unsigned long alloc, remote;
    unsigned long long size, first_size;
};

static struct row *rows;
static size_t nrows;
static struct hist *hist;
static size_t nhist;
static double last_time; /* of the previous reading; 0: none */

/* the summary and qslab's line */
static struct {
    unsigned long objs, active, slabs, active_slabs, caches, active_caches;
    unsigned long long size, active_size;
    unsigned min_obj, max_obj;
    double alloc_rate, remote_rate; /* < 0: not known yet */
    unsigned long large_live;
    size_t large_bytes;
    char path[256];
    int owner_kind;
} sum;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The screen's last refresh found no consistent snapshot (every read torn
 * by a process busy creating and destroying caches): the reading before
 * stays on the screen, and line 6 says so.  The first reading, and -o's,
 * must succeed (exit 3 otherwise, as qslabinfo). */
static bool stale;

/* Turn a snapshot into rows, against the previous reading. */
static void compute(const struct snap *s)
{
    double t = now_s(), dt = last_time > 0 ? t - last_time : 0;
    struct row *r = realloc(rows, (s->n + 1) * sizeof(*r));
    struct hist *h = malloc((s->n + 1) * sizeof(*h));
    if (!r || !h)
        die(EXIT_CANNOT, "out of memory");
    rows = r;
    memset(&sum, 0, sizeof sum);
    sum.alloc_rate = sum.remote_rate = dt > 0 ? 0 : -1;
    sum.min_obj = UINT_MAX;
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        struct row *w = &r[i];
        memcpy(w->name, c->name, sizeof w->name);
        w->objs = st->num_objs;
        w->active = st->active_objs;
        w->slabs = st->num_slabs;
        w->active_slabs = st->num_slabs > st->empty_slabs ? st->num_slabs - st->empty_slabs : 0;
        w->objsize = (unsigned)st->slot_size;
        w->objs_per_slab = st->objs_per_slab;
        w->pages = 1u << st->order;
        w->size = (unsigned long long)st->num_slabs << (root.page_shift + st->order);
        /* the same cache in the previous reading: address, id and name */
        const struct hist *p = NULL;
        for (size_t j = 0; j < nhist && !p; j++)
            if (hist[j].addr == c->addr && hist[j].id == c->id &&
                strcmp(hist[j].name, c->name) == 0)
                p = &hist[j];
        struct hist *n = &h[i];
        n->addr = c->addr;
        n->id = c->id;
        memcpy(n->name, c->name, sizeof n->name);
        n->alloc = st->alloc;
        n->remote = st->remote_free;
        n->size = w->size;
        n->first_size = p ? p->first_size : w->size;
        w->trend = (long long)(w->size - n->first_size);
        w->dir = !p || p->size == w->size ? 0 : p->size < w->size ? 1 : -1;
        if (p && dt > 0) {
            w->alloc_rate = (double)(st->alloc - p->alloc) / dt;
            w->remote_rate = (double)(st->remote_free - p->remote) / dt;
            sum.alloc_rate += w->alloc_rate;
            sum.remote_rate += w->remote_rate;
        } else {
            w->alloc_rate = w->remote_rate = -1;
        }
        sum.objs += w->objs;
        sum.active += w->active;
        sum.slabs += w->slabs;
        sum.active_slabs += w->active_slabs;
        sum.caches++;
        sum.active_caches += w->active != 0;
        sum.size += w->size;
        sum.active_size += (unsigned long long)w->active * w->objsize;
        if (w->objs && w->objsize < sum.min_obj) /* of the caches holding objects: a */
            sum.min_obj = w->objsize;            /* class's may be empty (kmalloc-8's) */
        if (w->objs && w->objsize > sum.max_obj)
            sum.max_obj = w->objsize;
    }
    if (sum.min_obj == UINT_MAX)
        sum.min_obj = 0;
    sum.large_live = s->large_live;
    sum.large_bytes = s->large_bytes;
    sum.owner_kind = s->owner_kind;
    snprintf(sum.path, sizeof sum.path, "%s", s->path);
    nrows = s->n;
    free(hist);
    hist = h;
    nhist = s->n;
    last_time = t;
}

/* ---------------------------------------------------------------- sorting */

static const struct {
    char key;
    const char *what;
} sort_keys[] = {
    {'a', "active objects"}, {'b', "objects per slab"}, {'c', "cache size"},
    {'l', "slabs"},          {'v', "active slabs"},     {'n', "name"},
    {'o', "objects"},        {'p', "pages per slab"},   {'s', "object size"},
    {'u', "utilisation"},
};
static char sort_key = 'o'; /* slabtop's default: the number of objects */

static const char *sort_what(char k)
{
    for (size_t i = 0; i < sizeof sort_keys / sizeof sort_keys[0]; i++)
        if (sort_keys[i].key == k)
            return sort_keys[i].what;
    return NULL;
}

static double use_of(const struct row *r)
{
    return r->objs ? (double)r->active * 100 / (double)r->objs : 0;
}

#define DESC(x, y)                                                                                 \
    do {                                                                                           \
        if ((x) != (y))                                                                            \
            return (x) < (y) ? 1 : -1;                                                             \
    } while (0)

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    switch (sort_key) {
    case 'a': DESC(x->active, y->active); break;
    case 'b': DESC(x->objs_per_slab, y->objs_per_slab); break;
    case 'c': DESC(x->size, y->size); break;
    case 'l': DESC(x->slabs, y->slabs); break;
    case 'v': DESC(x->active_slabs, y->active_slabs); break;
    case 'o': DESC(x->objs, y->objs); break;
    case 'p': DESC(x->pages, y->pages); break;
    case 's': DESC(x->objsize, y->objsize); break;
    case 'u': DESC(use_of(x), use_of(y)); break;
    default: break; /* 'n' */
    }
    return strcmp(x->name, y->name);
}

/* ---------------------------------------------------------------- lines */

static double delay_s = 3; /* slabtop's default */

/* "+1.5M", "-12K", "0": a signed byte count, short */
static void signed_bytes(long long v, char *buf, size_t len)
{
    unsigned long long a = v < 0 ? (unsigned long long)-v : (unsigned long long)v;
    const char *sign = v < 0 ? "-" : v > 0 ? "+" : "";
    if (a < 1024) {
        snprintf(buf, len, "%s%llu", sign, a);
        return;
    }
    double d = (double)a / 1024;
    const char *u = "KMGTP";
    int i = 0;
    while (d >= 1024 && i < 4) {
        d /= 1024;
        i++;
    }
    snprintf(buf, len, d < 10 ? "%s%.1f%c" : "%s%.0f%c", sign, d, u[i]);
}

static void rate(double r, char *buf, size_t len)
{
    if (r < 0)
        snprintf(buf, len, "-");
    else if (r < 1e7)
        snprintf(buf, len, "%.0f", r);
    else
        snprintf(buf, len, "%.0fM", r / 1e6);
}

static double pct(double part, double whole)
{
    return whole > 0 ? part * 100 / whole : 0;
}

#define LINE_MAX_ 512
#define HEAD_LINES 8 /* summary (5), qslab's line, blank, column header */
static const char header[] = "  OBJS ACTIVE  USE OBJ SIZE  SLABS OBJ/SLAB CACHE SIZE NAME"
                             "                  ALLOC/S  RFREE/S   TREND";

/* Line i of the screen (0-based) into buf; false past the end. */
static bool screen_line(size_t i, char *buf, size_t len)
{
    char a[24], b[24], t[32];
    switch (i) {
    case 0:
        snprintf(buf, len, " Active / Total Objects (%% used)    : %lu / %lu (%.1f%%)", sum.active,
                 sum.objs, pct(sum.active, sum.objs));
        return true;
    case 1:
        snprintf(buf, len, " Active / Total Slabs (%% used)      : %lu / %lu (%.1f%%)",
                 sum.active_slabs, sum.slabs, pct(sum.active_slabs, sum.slabs));
        return true;
    case 2:
        snprintf(buf, len, " Active / Total Caches (%% used)     : %lu / %lu (%.1f%%)",
                 sum.active_caches, sum.caches, pct(sum.active_caches, sum.caches));
        return true;
    case 3:
        snprintf(buf, len, " Active / Total Size (%% used)       : %.2fK / %.2fK (%.1f%%)",
                 sum.active_size / 1024.0, sum.size / 1024.0,
                 pct((double)sum.active_size, (double)sum.size));
        return true;
    case 4:
        snprintf(buf, len, " Minimum / Average / Maximum Object : %.2fK / %.2fK / %.2fK",
                 sum.min_obj / 1024.0,
                 sum.active ? (double)sum.active_size / (double)sum.active / 1024.0 : 0.0,
                 sum.max_obj / 1024.0);
        return true;
    case 5:
        rate(sum.alloc_rate, a, sizeof a);
        rate(sum.remote_rate, b, sizeof b);
        signed_bytes((long long)sum.large_bytes, t, sizeof t);
        snprintf(buf, len,
                 " Process %d (%s, %s owners): allocs/s %s, remote frees/s %s, large blocks "
                 "%lu (%s); sort: %s",
                 (int)g_pid, strrchr(sum.path, '/') ? strrchr(sum.path, '/') + 1 : sum.path,
                 sum.owner_kind == QS_OWNER_CPU ? "cpu" : "thread", a, b,
                 sum.large_live, t[0] == '+' ? t + 1 : t, sort_what(sort_key));
        return true;
    case 6:
        if (stale)
            snprintf(buf, len, " (no consistent snapshot at this refresh in %d reads: the reading "
                               "before is shown)", opt_retries);
        else
            buf[0] = '\0';
        return true;
    case 7:
        snprintf(buf, len, "%s", header);
        return true;
    }
    i -= HEAD_LINES;
    if (i >= nrows)
        return false;
    const struct row *r = &rows[i];
    rate(r->alloc_rate, a, sizeof a);
    rate(r->remote_rate, b, sizeof b);
    char tr[24];
    signed_bytes(r->trend, tr, sizeof tr);
    snprintf(t, sizeof t, "%c%s", r->dir > 0 ? '^' : r->dir < 0 ? 'v' : ' ', tr);
    snprintf(buf, len, "%6lu %6lu %3.0f%% %7.2fK %6lu %8u %9lluK %-20s %8s %8s %7s", r->objs,
             r->active, use_of(r), r->objsize / 1024.0, r->slabs, r->objs_per_slab,
             r->size / 1024, r->name, a, b, t);
    return true;
}

/* ---------------------------------------------------------------- target */

static pid_t child; /* the PROGRAM we started, or 0 */
static bool watching;  /* after the first reading: the end of the target is news, not an error */
static bool curses_on;

/* Is the target still there (not gone, not a zombie)?  A child of ours
 * is reaped here. */
static bool alive(void)
{
    if (child) {
        int st;
        if (waitpid(child, &st, WNOHANG) == child)
            return false;
    }
    return process_alive(g_pid);
}

static void screen_end(void)
{
    if (curses_on) {
        endwin();
        curses_on = false;
    }
}

static void ended(void)
{
    screen_end();
    fprintf(stderr, "%s: process %d exited\n", prog, (int)g_pid);
    exit(0);
}

/* die() calls this first: restore the terminal, and if the target went
 * away while it was read (given 200 ms to finish exiting, as qslabinfo
 * --record gives it: reader_proc.c exited_within), that is the news. */
static void on_die(void)
{
    screen_end();
    if (watching && exited_within(200))
        ended();
}

static void no_qslab(void)
{
    die_no_qslab();
}

static struct snap snapshot_buf;

static void read_target(bool may_keep_last)
{
    if (watching && !alive())
        ended();
    if (may_keep_last && watching) {
        stale = !snapshot_try(&snapshot_buf);
        if (stale)
            return;
    } else {
        snapshot(&snapshot_buf);
    }
    compute(&snapshot_buf);
    watching = true;
}

/* Start PROGRAM and wait for its exec; g_pid is then its pid.  Its output
 * goes to /dev/null, and so does its input for the screen (the keys are
 * qslabtop's); with -o it keeps qslabtop's stdin and stderr. */
static void start_program(char **argv, bool screen)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        die(EXIT_CANNOT, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die(EXIT_CANNOT, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(pfd[0]);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            if (screen) {
                dup2(nul, 0);
                dup2(nul, 2);
            }
            dup2(nul, 1);
        }
        execvp(argv[0], argv);
        int e = errno;
        if (write(pfd[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t n;
    while ((n = read(pfd[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    if (n == (ssize_t)sizeof e)
        die(EXIT_CANNOT, "cannot run %s: %s", argv[0], strerror(e));
    child = g_pid = pid;
}

/* The program just exec'd: wait (up to 5 s) until its qslab can be read. */
static void wait_for_program(struct snap *s)
{
    for (int i = 0; i < 500; i++) {
        if (!alive())
            die(EXIT_CANNOT, "%s (process %d) exited before its qslab could be read", "the program",
                (int)g_pid);
        if (attach(s)) {
            unsigned long g = read_generation();
            if (!(g & 1) && read_all(s))
                return;
        }
        pause_ms(10);
    }
    no_qslab();
}

/* ---------------------------------------------------------------- screen */

static volatile sig_atomic_t stop_sig;
static void on_signal(int sig)
{
    stop_sig = sig;
}

static void draw(void)
{
    qsort(rows, nrows, sizeof(*rows), cmp_row);
    erase();
    char buf[LINE_MAX_];
    for (int y = 0; y < LINES && screen_line((size_t)y, buf, sizeof buf); y++) {
        if (y == 7)
            attron(A_REVERSE);
        mvaddnstr(y, 0, buf, COLS);
        if (y == 7) {
            for (int x = (int)strlen(buf); x < COLS; x++)
                addch(' ');
            attroff(A_REVERSE);
        }
    }
    refresh();
}

static void print_once(void)
{
    qsort(rows, nrows, sizeof(*rows), cmp_row);
    char buf[LINE_MAX_];
    for (size_t i = 0; screen_line(i, buf, sizeof buf); i++)
        printf("%s\n", buf);
    fflush(stdout);
}

static int run_screen(void)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        die(EXIT_CANNOT, "not a terminal: use -o to print one screen");
    if (!newterm(NULL, stdout, stdin))
        die(EXIT_CANNOT, "cannot drive the terminal (TERM=%s): use -o to print one screen",
            getenv("TERM") ? getenv("TERM") : "");
    curses_on = true;
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    for (;;) {
        read_target(true);
        draw();
        double deadline = now_s() + delay_s;
        for (;;) {
            if (stop_sig) {
                screen_end();
                return 0;
            }
            double left = deadline - now_s();
            if (left <= 0)
                break;
            timeout((int)(left * 1000) + 1);
            int ch = getch();
            if (ch == ERR)
                continue;
            if (ch == 'q' || ch == 'Q') {
                screen_end();
                return 0;
            }
            if (ch == ' ')
                break;
            if (ch == KEY_RESIZE || (ch < 256 && sort_what((char)ch))) {
                if (ch != KEY_RESIZE)
                    sort_key = (char)ch;
                draw();
            }
        }
    }
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-d SECONDS] [-s KEY] [-o] -p PID\n"
            "       %s [-d SECONDS] [-s KEY] [-o] -- PROGRAM [ARGS...]\n"
            "slabtop's screen for the qslab caches of one process (docs/observability.md).\n"
            "  -p, --pid PID       the process to watch\n"
            "  -d, --delay SECONDS between readings (default 3; fractions allowed)\n"
            "  -s, --sort KEY      sort key (default o):\n"
            "        a active objects   b objects per slab   c cache size   l slabs\n"
            "        v active slabs     n name               o objects      p pages per slab\n"
            "        s object size      u utilisation\n"
            "  -o, --once          print one screen on stdout and exit (with -d: read twice,\n"
            "                      SECONDS apart, for the rates)\n"
            "  --retries N         reads before a refresh gives up on a changing process\n"
            "                      (default 50; the screen then keeps the reading before)\n"
            "Keys: the sort keys, space to read now, q to quit.  With PROGRAM, qslabtop starts\n"
            "it (its output to /dev/null), watches it, and ends it (SIGTERM) when it quits;\n"
            "with -o it reads it once, after the delay.\n"
            "Exit: 0 ok (also when the process ends while watched), 1 cannot read (no process,\n"
            "permission, no qslab, no terminal), 2 bad usage, 3 no consistent snapshot, 4 another\n"
            "layout version.\n",
            prog, prog);
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"pid", required_argument, NULL, 'p'},  {"delay", required_argument, NULL, 'd'},
        {"sort", required_argument, NULL, 's'}, {"once", no_argument, NULL, 'o'},
        {"retries", required_argument, NULL, 'R'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    prog = "qslabtop";
    long pid = -1;
    bool once = false, delay_given = false;
    int o;
    while ((o = getopt_long(argc, argv, "+p:d:s:oh", longs, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'p':
            pid = parse_pid(optarg);
            break;
        case 'd':
            errno = 0;
            delay_s = strtod(optarg, &end);
            if (errno || *end || end == optarg || !(delay_s >= 0.05 && delay_s <= 86400))
                die(EXIT_USAGE, "bad delay '%s': seconds, from 0.05 to 86400", optarg);
            delay_given = true;
            break;
        case 's':
            if (strlen(optarg) != 1 || !sort_what(optarg[0]))
                die(EXIT_USAGE, "bad sort key '%s': one of a b c l v n o p s u", optarg);
            sort_key = optarg[0];
            break;
        case 'o':
            once = true;
            break;
        case 'R':
            errno = 0;
            opt_retries = (int)strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || opt_retries < 1 || opt_retries > 100000)
                die(EXIT_USAGE, "--retries wants 1..100000");
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    die_hook = on_die;
    if (pid > 0) {
        if (optind < argc)
            die(EXIT_USAGE, "-p and a program to run: choose one");
        g_pid = (pid_t)pid;
        if (!attach(&snapshot_buf))
            no_qslab();
    } else if (optind < argc) {
        start_program(argv + optind, !once);
        if (once) { /* read it after the delay */
            pause_ms((int)(delay_s * 1000));
            if (!alive())
                die(EXIT_CANNOT, "%s exited before %g s", argv[optind], delay_s);
            if (!attach(&snapshot_buf))
                no_qslab();
            delay_given = false;
        } else {
            wait_for_program(&snapshot_buf);
        }
    } else {
        usage(stderr);
        return EXIT_USAGE;
    }
    int rc;
    if (once) {
        read_target(false);
        if (delay_given) {
            pause_ms((int)(delay_s * 1000));
            read_target(false);
        }
        screen_end();
        print_once();
        rc = 0;
    } else {
        rc = run_screen();
    }
    if (child) {
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
    }
    return rc;
}
