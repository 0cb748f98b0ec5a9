/*
 * owner_memory_probe.h - what the two files of the probe share
 * (owner_memory_probe.c: the modes, the workers, the measurement;
 * owner_memory_workloads.c: the per-front-end routines of check mode): a
 * cache's tunables, the workers and the check's cache.
 */
#ifndef OWNER_MEMORY_PROBE_H
#define OWNER_MEMORY_PROBE_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>

#include <qslab.h>

#define CHECK_SIZE  256        /* the check's cache: objects of 256 bytes */
#define ALIEN_LIMIT 12         /* src/front/slab/slab.h: objects per alien array */
#define BUF_OBJS    (1u << 16) /* per-thread bookkeeping array (pointers) */
#define MAX_THREADS 64
#define NR_ATTRS    10 /* the tunables read (owner_memory_probe.c attrs) */

/* ---- owner_memory_probe.c ---- */

struct params {
    unsigned long v[NR_ATTRS];
    size_t slot, size;
    unsigned order, objs;
};

unsigned long attr(const struct params *p, const char *name);
unsigned long owner_budget(void);
void die(const char *what);

struct worker {
    int idx, cpu, node;
    bool lead; /* the last of its owner's threads (a CPU's; a thread owner: itself) */
    pthread_t th;
    sem_t go, done;
    void (*job)(struct worker *);
    void **buf;  /* BUF_OBJS pointers, touched before the baseline */
    size_t nbuf; /* objects the worker holds (live) in buf */
    void **keep; /* objects kept live to the end (SLQB's stash fillers' slab mates) */
    size_t nkeep;
};

extern struct worker workers[MAX_THREADS];
extern int nthreads, nnodes, percpu;
extern qslab_cache *cache; /* the check's */
extern struct params P;    /* its tunables */
extern size_t slab_bytes;  /* its slabs' size */
extern long ncpu_possible; /* possible CPUs */

void run_on(struct worker *w, void (*job)(struct worker *));
void run_owner_routine(void (*job)(struct worker *));
void *must_alloc(void);
void *must_alloc_node(int node);

/* ---- owner_memory_workloads.c ---- */

void workloads_touch(void); /* the scratch arrays, before the baseline */
void workload_slqb(void);
void workload_slub(void);
void workload_slab(void);
void workload_slob(void);

#endif /* OWNER_MEMORY_PROBE_H */
