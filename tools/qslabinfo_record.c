/*
 * qslabinfo_record.c - `qslabinfo -p PID --record FILE --interval MS`:
 * sample a running process's counters over time into a text record that
 * `qslab-plot` (scripts/qslab-plot) turns into PNG charts
 * (docs/observability.md, "Recording and plotting").
 *
 * THE RECORD (version 1): lines of tab-separated fields.
 *   # qslab-record 1                           first line
 *   # pid <PID> interval_ms <MS> library <path> owner <cpu|thread> nodes <N>
 *   # started <UTC time, ISO 8601>
 *   # columns t_ms cache active_objs num_objs space alloc free alloc_fast free_fast remote_free queued_objs
 *   <t_ms> <cache> <active_objs> ... (one line per cache with slabs or
 *                                      events, per sample)
 *   <t_ms> [large] <live> 0 <live_bytes> <alloc> <free> 0 0 0 0
 *   # <t_ms> skipped: no consistent snapshot in <N> reads (<why>)
 * Samples keep to a grid of the interval from the first; a late one (the
 * tool descheduled or stopped, a slow read) starts the grid again, an
 * interval after it: the ticks it missed are left out, not taken at once.
 * A sample whose every read (--retries) changed under the reader (a process
 * creating and destroying caches without pause) is skipped with that
 * comment line; the record goes on at the next interval.
 * t_ms counts from the first sample (CLOCK_MONOTONIC).  Control bytes of a
 * cache name (a tab, a newline) are written as '?', so that a line is
 * always 11 fields.  The counters are the cumulative ones of the snapshot;
 * qslab-plot derives the rates.
 *
 * The record ends when the count is reached, on SIGINT/SIGTERM (the lines so
 * far are flushed: a record is always whole lines), or when the process
 * exits; each sample is flushed, so a record can be plotted while it grows.
 */
#include "qslabinfo_record.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

/* The record being written, for the die hook: a process that exits while
 * a snapshot reads it ends the record like an exit seen between samples. */
static FILE *rec_file;
static const char *rec_name;
static long rec_samples, rec_skipped;

static void end_record(const char *end)
{
    char skipped[64] = "";
    if (rec_skipped)
        snprintf(skipped, sizeof skipped, "; %ld skipped: no consistent snapshot", rec_skipped);
    if (rec_file != stdout && fclose(rec_file) != 0)
        fprintf(stderr, "%s: cannot write the record %s: %s\n", prog, rec_name, strerror(errno));
    else if (rec_file != stdout)
        fprintf(stderr, "%s: %ld samples of PID %d in %s (%s%s)\n", prog, rec_samples,
                (int)g_pid, rec_name, end, skipped);
    rec_file = NULL;
}

static void record_die_hook(void)
{
    if (rec_file && exited_within(200)) {
        end_record("the process exited");
        exit(0);
    }
}

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A name as one field: tabs, newlines and other control bytes as '?'. */
static void put_name(FILE *f, const char *name)
{
    for (const char *s = name; *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void write_sample(FILE *f, const struct snap *s, uint64_t t)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        if (!st->num_slabs && !st->alloc && !st->free)
            continue; /* never used: it would only lengthen the record */
        size_t space = st->num_slabs * ((size_t)1 << (root.page_shift + st->order));
        fprintf(f, "%llu\t", (unsigned long long)t);
        put_name(f, c->name);
        fprintf(f, "\t%lu\t%lu\t%zu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\n", st->active_objs,
                st->num_objs, space, st->alloc, st->free, st->alloc_fast, st->free_fast,
                st->remote_free, st->queued_objs);
    }
    fprintf(f, "%llu\t[large]\t%lu\t0\t%zu\t%lu\t%lu\t0\t0\t0\t0\n", (unsigned long long)t,
            s->large_live, s->large_bytes, s->large_alloc, s->large_free);
}

int record_run(struct snap *s, const char *file, long interval_ms, long count)
{
    /* the first sample, before the header, which names the owner kind and
     * node count: from that snapshot, or, if every read of it was torn,
     * from the root's globals alone (a failure here is the tool's, as for
     * any read: no record is begun) */
    uint64_t t0 = now_ms(), next = t0;
    bool first = snapshot_try(s);
    if (!first && !read_globals(s))
        die(EXIT_TORN, "process %d: its qslab data does not hold together (%s)", (int)g_pid, why);

    FILE *f = strcmp(file, "-") == 0 ? stdout : fopen(file, "w");
    if (!f)
        die(EXIT_CANNOT, "cannot write the record %s: %s", file, strerror(errno));
    rec_file = f;
    rec_name = file;
    die_hook = record_die_hook;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    char started[64] = "?";
    time_t wall = time(NULL);
    struct tm tm;
    if (gmtime_r(&wall, &tm))
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "# qslab-record 1\n# pid %d interval_ms %ld library %s owner %s nodes %d\n",
            (int)g_pid, interval_ms, s->path, s->owner_kind == QS_OWNER_CPU ? "cpu" : "thread",
            s->nr_nodes);
    fprintf(f, "# started %s\n# columns t_ms cache active_objs num_objs space alloc free "
               "alloc_fast free_fast remote_free queued_objs\n",
            started);
    const char *end = "the count was reached";
    fflush(f);
    for (;;) {
        if (!process_alive(g_pid)) {
            end = "the process exited";
            break;
        }
        /* dies with a message if the process goes mid-read */
        bool got = rec_samples + rec_skipped == 0 ? first : snapshot_try(s);
        if (got) {
            write_sample(f, s, now_ms() - t0);
            rec_samples++;
        } else {
            fprintf(f, "# %llu skipped: no consistent snapshot in %d reads (%s)\n",
                    (unsigned long long)(now_ms() - t0), opt_retries, why);
            rec_skipped++;
        }
        fflush(f);
        if (rec_samples + rec_skipped == count)
            break;
        /* a sample that came late (the tool was descheduled or stopped, or
         * a read took longer than the interval) is followed an interval
         * after it, not by the ticks it missed, taken at once with the
         * same time */
        next += (uint64_t)interval_ms;
        uint64_t after = now_ms();
        if (next <= after)
            next = after + (uint64_t)interval_ms;
        while (!stop_requested) {
            uint64_t now = now_ms();
            if (now >= next)
                break;
            pause_ms((int)(next - now < 100 ? next - now : 100));
            if (!process_alive(g_pid))
                break;
        }
        if (stop_requested) {
            end = "interrupted";
            break;
        }
    }
    die_hook = NULL;
    end_record(end);
    return 0;
}
