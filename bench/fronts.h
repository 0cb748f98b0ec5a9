/*
 * bench/fronts.h - what the three files of bench_fronts share.  fronts.c is
 * the driver (its header describes the tests, the result lines and how
 * memory is measured): the command line, the front ends, the cache under
 * test, the memory readings, the threads' job channels and the result lines'
 * common fields.  fronts_patterns.c runs the slub_test patterns on pinned
 * workers, fronts_hackbench.c runs hackbench on unpinned threads.
 */
#ifndef BENCH_FRONTS_H
#define BENCH_FRONTS_H

#include <pthread.h>
#include <qslab.h>
#include <stdbool.h>
#include <stddef.h>

#include "patterns.h"

/* ---- fronts.c ---- */

enum { HACKBENCH = NR_PATTERNS, NR_TESTS }; /* the tests: the patterns, then hackbench */

extern const char *const test_name[NR_TESTS];

extern qslab_cache *cache; /* the cache under test */
extern long size;          /* its object size */
extern long nr_cpus;       /* --cpus: CPUs with a pinned worker */

struct mem {
    long rss, anon; /* KiB */
};

/* The base and the most seen since, for a test and for a whole front end. */
struct mem_track {
    struct mem base, peak;
};

extern struct mem_track test_mem, front_mem;

struct mem mem_statm(void);
struct mem mem_now(void);
void track_begin(struct mem_track *t);
void sample_peak_with(struct mem m);
void sample_peak(void);

/* A kind of thread's channel: its threads sleep on it until the main thread
 * posts a job (a job of NULL: exit). */
struct chan {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned long seq; /* jobs posted */
    void (*job)(void *self);
};

void chan_post(struct chan *c, void (*job)(void *self));
void chan_serve(struct chan *c, void *self);
void touch_stack(void);

void result_head(const char *tname, const char *front, long sz);
void result_mem(struct mem after);

/* Every thread's share of the warm-up (fronts.c's header). */
void warm_probes(void);

/* ---- fronts_patterns.c ---- */

extern long nr_objs, nr_rounds; /* --objs, --rounds */

void patterns_start(void); /* the workers; the main thread, worker 0, pins itself */
void patterns_warm(void);  /* every worker runs warm_probes */
void run_pattern(enum pattern t, const char *front);
void patterns_stop(void);

/* ---- fronts_hackbench.c ---- */

extern long hb_groups, hb_senders, hb_receivers, hb_loops, hb_rounds; /* the options */
extern long head_size, sample_ms, pipe_bytes;
extern int hb_use_socket;          /* --ipc socket */
extern const size_t hb_head_bytes; /* what a head holds: --head's least */
extern qslab_cache *head_cache;    /* the messages' heads, one cache per front end */

void hackbench_start(void); /* the channels and the threads */
void hackbench_warm(void);  /* every hackbench thread runs warm_probes */
void run_hackbench(const char *front);
void hackbench_stop(void);

#endif /* BENCH_FRONTS_H */
