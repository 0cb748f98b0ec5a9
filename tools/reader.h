/*
 * reader: the part of qslabinfo and qslabtop that reads another process's
 * qslab (docs/observability.md): its mappings, checked process_vm_readv
 * reads and the permission messages (reader_proc.c), the ELF symbol lookup
 * of `qslab_observe_root` (reader_elf.c), and consistent snapshots of every
 * cache, retried while the generation of src/observe/observe.h moves
 * (reader.c).
 *
 * The tool sets `prog` (its name in messages) and `g_pid`, calls attach()
 * and then snapshot() as often as it likes.  Failures end the process
 * through die(), with one line on stderr; a tool with a screen to restore
 * sets `die_hook`, which die() calls first.
 */
#ifndef QSLAB_TOOLS_READER_H
#define QSLAB_TOOLS_READER_H

#include "observe/observe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXIT_CANNOT 1  /* no process, permission, no qslab in it */
#define EXIT_USAGE 2   /* bad usage: an unknown option, a bad value */
#define EXIT_TORN 3    /* no consistent snapshot */
#define EXIT_VERSION 4 /* a qslab of another observation layout */

#define MAX_QUEUES_PER_CACHE (1u << 20) /* bounded walks */
#define MAX_SEQ_TRIES 100

struct mapping {
    uint64_t lo, hi, off;
    bool r, w;
    char path[256];
};
struct root_loc {
    uint64_t addr;
    char path[256];
    bool has_symtab; /* out: the object has a .symtab (not stripped) */
};

/* One queue of a cache (qslabinfo -l): its owner, what it holds, its
 * events (the same arithmetic as the cache's sum). */
struct queue_snap {
    int cpu;   /* a CPU's queue: its id; else -1 */
    int tid;   /* a thread's queue: its thread id; -1 if unknown (exited) */
    int node;  /* the owner's node */
    bool owned; /* an owner holds it (a thread's queue outlives its thread) */
    unsigned long queued, inbox, partial, full, stash;
    unsigned long alloc, alloc_fast, free, free_fast, remote_free, refill, flush;
};

/* One node of a cache (qslabinfo -n): its lists, and its owners' share. */
struct node_snap {
    unsigned long partial, full, empty, free_slabs, shared_avail; /* the node's */
    unsigned long owner_slabs, queued, queues; /* of the queues of owners on it */
};

struct cache_snap {
    uint64_t addr;
    char name[QS_NAME_MAX];
    char front[8];
    char debug[QS_DEBUG_LETTERS_LEN];
    unsigned id, front_nr, debug_bits;
    bool is_kmalloc, ctor, queues;
    unsigned long flags;
    size_t align;
    unsigned long hiwater, freebatch, slab_limit, slab_batch, slab_shared;
    unsigned long nr_queues, nr_owned_queues, partial_slabs, owner_slabs;
    size_t meta_bytes; /* cache, nodes, queues, queue slots */
    struct qslab_cache_stats st;
    size_t q_first, q_count; /* its queues: snap.queues[q_first .. + q_count) */
    size_t node_first;       /* its nodes: snap.nodes[node_first .. + nr_nodes) */
};

struct snap {
    unsigned long generation;
    int attempts;
    int nr_nodes, owner_kind, nr_cpu_ids, front_default;
    char owner_why[160];
    struct cache_snap *caches;
    size_t n, cap;
    struct cache_snap arena;
    unsigned long large_alloc, large_free, large_live;
    size_t large_bytes, page_slab_bytes;
    size_t page_chunk_bytes, page_slot_bytes, meta_mapped; /* layout version 3 */
    size_t page_warm_bytes;                                /* layout version 5 */
    struct qs_pressure pressure;                           /* layout version 10 */
    char pressure_text[QS_PRESSURE_TEXT];
    struct qs_cached cached;                               /* layout version 11 */
    struct qs_large_bucket large_bucket[QS_LARGE_BUCKETS]; /* by size (observe.h) */
    struct queue_snap *queues; /* every cache's, in cache order */
    size_t nq, qcap;
    struct node_snap *nodes; /* nr_nodes per cache, in cache order */
    size_t nn, ncap;
    char path[256];
};

extern pid_t g_pid;
extern int g_pidfd;
extern const char *prog;
extern void (*die_hook)(void);
extern struct mapping *maps;
extern size_t nmaps;
extern char stripped_exe[256];
extern struct qs_observe_root root;
extern uint64_t root_addr;
extern char why[256];
extern int opt_retries;

void die(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* attach() found no qslab in g_pid: say so, and how to start a program
 * with qslab (qslab-run), and exit EXIT_CANNOT */
void die_no_qslab(void) __attribute__((noreturn));
pid_t parse_pid(const char *arg); /* -p's argument, or die() */
void explain_access(int err) __attribute__((noreturn));
long status_field(pid_t pid, const char *key);
bool load_maps(void);
bool readable(uint64_t addr, size_t len);
int rd(uint64_t addr, void *buf, size_t len);
bool rdc(uint64_t addr, void *buf, size_t len, size_t align);
size_t find_roots(struct root_loc *locs, size_t max);
bool read_cache(uint64_t addr, struct cache_snap *cs, int nr_nodes);
bool read_globals(struct snap *s);
bool read_all(struct snap *s);
unsigned long read_generation(void);
void pause_ms(int ms);
bool process_alive(pid_t pid);
bool exited_within(int ms); /* g_pid gone (or a zombie) within ms, polled */
bool attach(struct snap *s);
bool snapshot_try(struct snap *s); /* false: every read torn (why says how) */
void snapshot(struct snap *s);      /* or exit 3 */

#endif
