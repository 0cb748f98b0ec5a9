/*
 * reader: locate and read another process's qslab (reader.h); shared by
 * qslabinfo and qslabtop.  This file: attaching (the root's layout checked
 * against this build's) and the snapshot; reader_elf.c finds the root,
 * reader_proc.c reads the process (its mappings, its memory, why a read is
 * refused, whether it is alive).
 *
 * How: find the mapped ELF objects of the target in /proc/PID/maps, look
 * up `qslab_observe_root` in their .dynsym or .symtab (through
 * /proc/PID/map_files/, else the path), add the load bias, and read the
 * root and everything it points to with process_vm_readv.  Every pointer
 * followed must lie in a readable mapping of the target; every list walk
 * is bounded; a read whose generation (observe.h) was odd or moved is
 * retried a bounded number of times.  The statistics are computed by the
 * library's own arithmetic (src/observe/stats_calc.h).
 */
#define _GNU_SOURCE
#include "reader.h"
#include "observe/stats_calc.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct qs_observe_root root;
uint64_t root_addr;
char why[256]; /* why the last attempt failed */

#define BAD(...) (snprintf(why, sizeof why, __VA_ARGS__), false)

/* Brent's cycle detection for the lists walked in the target: each address
 * visited is checked against one saved address, which moves to the current
 * one after 1, 2, 4, ... steps.  A list that loops is caught within twice
 * its length's steps, instead of after the walk's bound (65536 caches: 3
 * such walks took 2.5 s before the reader could say the data is bad).  A
 * list that changed while read can repeat an address too: the caller's
 * generation check tells a torn read from bad data, as for every BAD. */
struct cycle {
    uint64_t saved;
    unsigned long power, steps;
};
#define CYCLE_INIT {0, 1, 0}

static bool cycle_seen(struct cycle *c, uint64_t addr)
{
    if (addr == c->saved)
        return true;
    if (++c->steps == c->power) {
        c->saved = addr;
        c->power *= 2;
        c->steps = 0;
    }
    return false;
}

/* The snapshot read_all is filling: read_cache appends each cache's queues
 * and nodes to its arrays (NULL: a caller outside read_all, nothing kept). */
static struct snap *cur_snap;

static void *grow(void *v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return v;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    v = realloc(v, c * size);
    if (!v)
        die(EXIT_CANNOT, "out of memory");
    *cap = c;
    return v;
}

bool read_cache(uint64_t addr, struct cache_snap *cs, int nr_nodes)
{
    struct qslab_cache c;
    if (!rdc(addr, &c, sizeof c, 8))
        return BAD("cache at 0x%" PRIx64 " is not readable", addr);
    memset(cs, 0, sizeof(*cs));
    cs->addr = addr;
    if (!memchr(c.name, '\0', sizeof c.name))
        return BAD("cache at 0x%" PRIx64 ": its name is not terminated", addr);
    for (size_t i = 0; c.name[i]; i++) /* printable, for every output mode */
        cs->name[i] = (c.name[i] > ' ' && c.name[i] < 127) ? c.name[i] : '?';
    if (c.id >= root.max_caches || c.front >= QS_FRONT_NR || c.front >= QS_OBSERVE_FRONTS ||
        c.order > QS_MAX_ORDER || c.slot_size < 8 || c.slot_size > (QS_PAGE_SIZE << QS_MAX_ORDER))
        return BAD("cache %s: id, front, order or slot size out of range", cs->name);
    cs->id = c.id;
    cs->front_nr = c.front;
    memcpy(cs->front, root.front_names[c.front], 7);
    cs->front[7] = '\0';
    cs->queues = (root.front_queues >> c.front) & 1;
    cs->debug_bits = c.debug;
    qs_debug_letters(c.debug, cs->debug);
    uint8_t km; /* a bool of the target's: any byte value, read as a byte */
    memcpy(&km, (const char *)&c + offsetof(struct qslab_cache, is_kmalloc), 1);
    cs->is_kmalloc = km != 0;
    cs->ctor = c.ctor != NULL;
    cs->flags = c.flags;
    cs->align = c.align;
    cs->hiwater = c.hiwater;
    cs->freebatch = c.freebatch;
    cs->slab_limit = c.slab_limit;
    cs->slab_batch = c.slab_batch;
    cs->slab_shared = c.slab_shared;
    cs->meta_bytes = sizeof(c) + (size_t)nr_nodes * sizeof(struct qs_node);
    struct snap *S = cur_snap;
    struct node_snap *ns = NULL; /* this cache's nodes, when kept */
    if (S) {
        cs->q_first = S->nq;
        cs->node_first = S->nn;
        S->nodes = grow(S->nodes, &S->ncap, S->nn + (size_t)nr_nodes, sizeof(*S->nodes));
        ns = S->nodes + S->nn;
        memset(ns, 0, (size_t)nr_nodes * sizeof(*ns));
        S->nn += (size_t)nr_nodes;
    }

    unsigned long sum[QS_STAT_NR] = {0};
    struct qslab_cache_stats *st = &cs->st;
    uint64_t qa = (uint64_t)(uintptr_t)c.queues;
    unsigned long nq = 0;
    struct cycle qcyc = CYCLE_INIT;
    while (qa) {
        if (cycle_seen(&qcyc, qa))
            return BAD("cache %s: its queue list is a cycle (0x%" PRIx64 " again)", cs->name, qa);
        if (++nq > MAX_QUEUES_PER_CACHE)
            return BAD("cache %s: more than %u queues (a cycle?)", cs->name, MAX_QUEUES_PER_CACHE);
        static struct qs_queue q; /* 640 bytes, 64-aligned */
        bool got = false;
        for (int t = 0; t < MAX_SEQ_TRIES && !got; t++) {
            if (!rdc(qa, &q, sizeof q, 64))
                return BAD("cache %s: queue at 0x%" PRIx64 " is not readable", cs->name, qa);
            unsigned seq2;
            if (rd(qa + offsetof(struct qs_queue, nr_seq), &seq2, sizeof seq2) != 0)
                return BAD("cache %s: queue at 0x%" PRIx64 " went away", cs->name, qa);
            got = !(q.nr_seq & 1) && seq2 == q.nr_seq;
        } /* else its last reading, as the in-process reader does */
        if ((uint64_t)(uintptr_t)q.cache != addr)
            return BAD("cache %s: queue at 0x%" PRIx64 " belongs to another cache", cs->name, qa);
        struct qs_queue_raw r;
        memcpy(r.stat, q.stat, sizeof r.stat);
        r.moved = q.moved;
        r.top = q.top;
        r.fb = q.fb;
        r.fb_base = q.fb_base;
        r.sl_pops = q.sl.pops;
        r.sl_pushes = q.sl.pushes;
        unsigned long pops_seen = q.pops_seen;
        uint64_t pops_raw = q.pops_raw;
        unsigned long qsum[QS_STAT_NR] = {0};
        qs_calc_queue(&r, cs->queues, &pops_seen, &pops_raw, qsum);
        for (int i = 0; i < QS_STAT_NR; i++)
            sum[i] += qsum[i];
        if (S) { /* the queue's own line (-l) and its node's share (-n) */
            S->queues = grow(S->queues, &S->qcap, S->nq + 1, sizeof(*S->queues));
            struct queue_snap *o = &S->queues[S->nq++];
            cs->q_count++;
            struct qslab_cache_stats qst;
            memset(&qst, 0, sizeof qst);
            qs_calc_fill(qsum, &qst);
            o->cpu = q.cpu;
            o->tid = -1;
            o->node = q.node;
            o->owned = q.owner != NULL;
            if (q.owner && q.cpu < 0) { /* a thread's: its id, if its owner is still mapped */
                int tid;
                if (rd((uint64_t)(uintptr_t)q.owner + offsetof(struct qs_owner, tid), &tid,
                       sizeof tid) == 0 && tid > 0)
                    o->tid = tid;
            }
            o->queued = QS_TOP_NR(q.top);
            o->inbox = q.inbox.nr;
            o->partial = q.list.nr_partial + q.sl.nr_partial;
            o->full = q.list.nr_full;
            o->stash = q.nr_stash;
            o->alloc = qst.alloc;
            o->alloc_fast = qst.alloc_fast;
            o->free = qst.free;
            o->free_fast = qst.free_fast;
            o->remote_free = qst.remote_free;
            o->refill = qst.refill;
            o->flush = qst.flush;
            if (q.node >= 0 && q.node < nr_nodes) {
                ns[q.node].owner_slabs += q.list.nr_partial + q.list.nr_full + q.nr_stash +
                                          q.sl.nr_partial + (q.sl.slab != NULL);
                ns[q.node].queued += QS_TOP_NR(q.top) + q.inbox.nr;
                ns[q.node].queues++;
            }
        }
        st->empty_slabs += q.nr_stash;
        st->queued_objs += QS_TOP_NR(q.top) + q.inbox.nr;
        cs->partial_slabs += q.list.nr_partial + q.sl.nr_partial;
        cs->owner_slabs += q.list.nr_partial + q.list.nr_full + q.nr_stash + q.sl.nr_partial +
                           (q.sl.slab != NULL);
        cs->nr_queues++;
        cs->nr_owned_queues += q.owner != NULL;
        cs->meta_bytes += sizeof q + (size_t)(q.cap + 1) * sizeof(void *);
        qa = (uint64_t)(uintptr_t)q.all_next;
    }
    for (int i = 0; i < QS_STAT_NR; i++)
        sum[i] += c.orphan_stat[i];
    static struct qs_node nodes[QS_MAX_NODES];
    if (nr_nodes > 0 &&
        !rdc((uint64_t)(uintptr_t)c.nodes, nodes, (size_t)nr_nodes * sizeof(struct qs_node), 64))
        return BAD("cache %s: its node array is not readable", cs->name);
    for (int n = 0; n < nr_nodes; n++)
        qs_node_events_sum(&nodes[n], sum); /* the node paths' events */
    st->alloc_fast = 0; /* qs_calc_fill sets every event field */
    qs_calc_fill(sum, st);
    st->defrag_passes = c.defrag_passes; /* a mobile cache's (api/defrag.c) */
    st->defrag_moved = c.defrag_moved;
    st->defrag_declined = c.defrag_declined;
    st->defrag_slabs = c.defrag_slabs;
    if (nr_nodes > 0) {
        for (int n = 0; n < nr_nodes; n++) {
            st->empty_slabs += qs_node_nr_empty(&nodes[n]) + nodes[n].nr_free_slabs;
            cs->partial_slabs += nodes[n].list.nr_partial;
            if (ns) {
                ns[n].partial = nodes[n].list.nr_partial;
                ns[n].full = nodes[n].list.nr_full;
                ns[n].empty = qs_node_nr_empty(&nodes[n]);
                ns[n].free_slabs = nodes[n].nr_free_slabs;
                ns[n].shared_avail = nodes[n].shared_avail;
            }
        }
    }
    st->object_size = c.obj_size;
    st->slot_size = c.slot_size;
    st->order = c.order;
    uint32_t ops = 0;
    if (!rdc((uint64_t)(uintptr_t)root.objs_per_slab + (uint64_t)c.id * 4, &ops, 4, 4))
        return BAD("the objects-per-slab table is not readable");
    st->objs_per_slab = ops;
    return true;
}

/* The root's globals: node count, owner kind (and why), CPU ids, default
 * front end.  Part of read_all; alone for a record's header when the first
 * snapshot is torn. */
bool read_globals(struct snap *s)
{
    if (!rdc((uint64_t)(uintptr_t)root.nr_nodes, &s->nr_nodes, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.owner_kind, &s->owner_kind, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.nr_cpu_ids, &s->nr_cpu_ids, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.front_default, &s->front_default, sizeof(int), 4))
        return BAD("the root's globals are not readable");
    if (s->nr_nodes < 1 || s->nr_nodes > (int)root.max_nodes || s->nr_nodes > QS_MAX_NODES)
        return BAD("node count %d out of range", s->nr_nodes);
    if (s->front_default < 0 || s->front_default >= QS_FRONT_NR)
        return BAD("default front end %d out of range", s->front_default);
    uint64_t whyp = 0;
    s->owner_why[0] = '\0';
    if (rdc((uint64_t)(uintptr_t)root.owner_why, &whyp, 8, 8) && whyp) {
        /* a string of unknown length: read up to the end of its mapping */
        char buf[sizeof s->owner_why];
        size_t len = sizeof buf - 1;
        while (len && !readable(whyp, len))
            len /= 2;
        if (len && rd(whyp, buf, len) == 0) {
            buf[len] = '\0';
            for (size_t i = 0; buf[i]; i++)
                s->owner_why[i] = (buf[i] >= ' ' && buf[i] < 127) ? buf[i] : '?',
                s->owner_why[i + 1] = '\0';
        }
    }
    return true;
}

bool read_all(struct snap *s)
{
    s->n = 0;
    s->nq = s->nn = 0;
    cur_snap = NULL; /* until the node count is known */
    if (!read_globals(s))
        return false;
    uint64_t head = 0;
    if (!rdc((uint64_t)(uintptr_t)root.caches, &head, 8, 8))
        return BAD("the cache list head is not readable");
    cur_snap = s;
    struct cycle cyc = CYCLE_INIT;
    for (uint64_t a = head; a;) {
        if (cycle_seen(&cyc, a))
            return BAD("the cache list is a cycle (0x%" PRIx64 " again)", a);
        if (s->n >= root.max_caches)
            return BAD("more than %u caches on the list (a cycle?)", root.max_caches);
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 64;
            s->caches = realloc(s->caches, s->cap * sizeof(*s->caches));
            if (!s->caches)
                die(EXIT_CANNOT, "out of memory");
        }
        if (!read_cache(a, &s->caches[s->n], s->nr_nodes))
            return false;
        uint64_t next;
        if (!rdc(a + offsetof(struct qslab_cache, next), &next, 8, 8))
            return BAD("cache list link not readable");
        s->n++;
        a = next;
    }
    cur_snap = NULL; /* SLOB's pages: no queues, its nodes not shown */
    bool arena_ok = read_cache((uint64_t)(uintptr_t)root.slob_arena, &s->arena, s->nr_nodes);
    if (!arena_ok)
        return false;
    uint64_t lp = 0, sp = 0;
    struct qs_large_counters large;
    uint64_t cp = 0, tp = 0, mp = 0, wp = 0;
    if (!rdc((uint64_t)(uintptr_t)root.large, &lp, 8, 8) || !rdc(lp, &large, sizeof large, 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_slab_bytes, &sp, 8, 8) ||
        !rdc(sp, &s->page_slab_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_chunk_bytes, &cp, 8, 8) ||
        !rdc(cp, &s->page_chunk_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_slot_bytes, &tp, 8, 8) ||
        !rdc(tp, &s->page_slot_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_warm_bytes, &wp, 8, 8) ||
        !rdc(wp, &s->page_warm_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.meta_mapped_bytes, &mp, 8, 8) ||
        !rdc(mp, &s->meta_mapped, sizeof(size_t), 8))
        return BAD("the large-block, page-layer or metadata counters are not readable");
    /* memory pressure (core/pressure.c): the published text, bounded and
     * printable whatever was read */
    struct qs_pressure pr;
    if (!rdc((uint64_t)(uintptr_t)root.pressure, &pr, sizeof pr, 8))
        return BAD("the memory pressure counters are not readable");
    s->pressure = pr;
    if (!rdc((uint64_t)(uintptr_t)root.cached, &s->cached, sizeof s->cached, 8))
        return BAD("the cached-memory cap's counters are not readable");
    char *t = pr.text[pr.cur & 1];
    t[sizeof pr.text[0] - 1] = '\0';
    size_t i = 0;
    for (; t[i]; i++)
        s->pressure_text[i] = (t[i] >= ' ' && t[i] < 127) ? t[i] : '?';
    s->pressure_text[i] = '\0';
    s->large_alloc = large.alloc;
    s->large_free = large.free;
    s->large_live = large.live;
    s->large_bytes = large.live_bytes;
    memcpy(s->large_bucket, large.bucket, sizeof large.bucket);
    return true;
}

unsigned long read_generation(void)
{
    unsigned long g = 1;
    int r = rd(root_addr + offsetof(struct qs_observe_root, generation), &g, sizeof g);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0 ? g : 1; /* unreadable: as if changing */
}

int opt_retries = 50;

/* The front ends' names as printed: terminated, printable. */
static void clean_front_names(void)
{
    for (int f = 0; f < QS_OBSERVE_FRONTS; f++)
        for (int i = 0; i < 8; i++) {
            char *ch = &root.front_names[f][i];
            if (i == 7)
                *ch = '\0';
            else if (*ch && (*ch <= ' ' || *ch >= 127))
                *ch = '?';
        }
}

/* How long a snapshot waits for a starting process's qslab to run. */
#define READY_WAIT_MS 1000

/* Read the root again (attach checked its layout; what changes after load
 * is `ready`, the generation and the front ends' names, filled at the first
 * cache), and wait until the library has run: before that the process is
 * starting, and the root's addresses are link-time values the dynamic
 * loader has not yet relocated (observe.h, `ready`). */
static void reread_root(void)
{
    for (int waited = 0;; waited += 5) {
        struct qs_observe_root r;
        /* its fixed part (magic to offsets) as attach checked it: else
         * another root, or a process rewriting it.  /proc/PID/maps is read
         * in pieces and is no consistent view while the process maps and
         * unmaps (a thread starting): one read can miss the library's
         * mapping, so a failed read is retried with the maps read again. */
        bool same = false;
        for (int tries = 0; tries < 20 && !same; tries++) {
            if (tries) {
                pause_ms(5);
                load_maps();
            }
            same = rdc(root_addr, &r, sizeof r, 8) &&
                   memcmp(&r, &root, offsetof(struct qs_observe_root, generation)) == 0;
        }
        if (!same)
            die(EXIT_TORN, "process %d: its qslab root (0x%" PRIx64 ") is no longer the one "
                           "attached to (the library was unmapped, or the process ran another "
                           "program)",
                (int)g_pid, root_addr);
        root = r;
        clean_front_names();
        if (root.ready)
            return;
        if (waited >= READY_WAIT_MS)
            die(EXIT_TORN, "process %d: its qslab is loaded but not initialised after %d ms "
                           "(the process is starting, or stopped before qslab's "
                           "initialisation ended); try again",
                (int)g_pid, READY_WAIT_MS);
        pause_ms(5);
        load_maps();
    }
}

/* Attach: locate and validate the root.  Returns false if the process has
 * no qslab (the caller explains). */
bool attach(struct snap *s)
{
#ifdef SYS_pidfd_open
    /* the process itself, not its number: a busy machine reuses a number
     * within milliseconds of the process's exit, and a record would go on
     * reading whatever process got it */
    if (g_pidfd < 0)
        g_pidfd = (int)syscall(SYS_pidfd_open, g_pid, 0);
#endif
    if (kill(g_pid, 0) != 0 && errno == ESRCH)
        explain_access(ESRCH);
    if (!load_maps())
        return false;
    struct root_loc locs[8];
    size_t n = find_roots(locs, 8);
    if (n == 0)
        return false;
    if (n > 1)
        fprintf(stderr, "%s: process %d holds %zu qslab instances; reading the one in %s\n", prog,
                (int)g_pid, n, locs[0].path);
    root_addr = locs[0].addr;
    snprintf(s->path, sizeof s->path, "%s", locs[0].path);
    /* the root's fixed part first: magic and version decide how to read on */
    struct {
        uint64_t magic;
        uint32_t version, root_size, ptr_size;
    } head;
    if (!rdc(root_addr, &head, sizeof head, 8)) {
        int r = rd(root_addr, &head, sizeof head);
        if (r == -EPERM || r == -EACCES || r == -ESRCH)
            explain_access(-r);
        die(EXIT_CANNOT, "process %d: the qslab root in %s (0x%" PRIx64 ") is not readable: %s",
            (int)g_pid, s->path, root_addr, strerror(-r ? -r : EFAULT));
    }
    if (head.magic != QS_OBSERVE_MAGIC)
        die(EXIT_VERSION, "process %d: %s has a qslab_observe_root without qslab's magic "
                          "(0x%016" PRIx64 "): not a layout this qslabinfo knows",
            (int)g_pid, s->path, head.magic);
    if (head.version != QS_OBSERVE_VERSION)
        die(EXIT_VERSION, "process %d: its qslab (%s) has observation layout version %u; this "
                          "qslabinfo reads version %u: use the qslabinfo of that qslab",
            (int)g_pid, s->path, head.version, QS_OBSERVE_VERSION);
    if (head.root_size != sizeof root || !rdc(root_addr, &root, sizeof root, 8))
        die(EXIT_VERSION, "process %d: layout version %u but a root of %u bytes (this qslabinfo: "
                          "%zu): a mismatched build",
            (int)g_pid, head.version, head.root_size, sizeof root);
    static const uint32_t mine[] = {
#define OFF_(st, f) (uint32_t) offsetof(struct st, f),
        QS_OBSERVE_OFFSETS(OFF_)
#undef OFF_
    };
    struct {
        const char *what;
        uint32_t theirs, ours;
    } chk[] = {
        {"pointer size", root.ptr_size, sizeof(void *)},
        {"statistics items", root.stat_nr, QS_STAT_NR},
        {"sizeof(qslab_cache)", root.sizeof_cache, sizeof(struct qslab_cache)},
        {"sizeof(qs_queue)", root.sizeof_queue, sizeof(struct qs_queue)},
        {"sizeof(qs_node)", root.sizeof_node, sizeof(struct qs_node)},
        {"sizeof(qs_list)", root.sizeof_list, sizeof(struct qs_list)},
        {"sizeof(qs_owner)", root.sizeof_owner, sizeof(struct qs_owner)},
        {"sizeof(qs_inbox)", root.sizeof_inbox, sizeof(struct qs_inbox)},
        {"cache ids", root.max_caches, QS_MAX_CACHES},
        {"nodes", root.max_nodes, QS_MAX_NODES},
        {"page shift", root.page_shift, QS_PAGE_SHIFT},
        {"name length", root.name_max, QS_NAME_MAX},
        {"front ends", root.front_nr, QS_FRONT_NR},
        {"field offsets", root.nr_offsets, QS_OBSERVE_NR_OFFSETS},
        {"large buckets", root.large_buckets, QS_LARGE_BUCKETS},
        {"large bucket shift", root.large_bucket_shift0, QS_LARGE_BUCKET_SHIFT0},
        {"sizeof(qs_large_counters)", root.sizeof_large, sizeof(struct qs_large_counters)},
        {"sizeof(qs_pressure)", root.sizeof_pressure, sizeof(struct qs_pressure)},
        {"sizeof(qs_cached)", root.sizeof_cached, sizeof(struct qs_cached)},
    };
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
        if (chk[i].theirs != chk[i].ours)
            die(EXIT_VERSION, "process %d: layout version %u, but its %s is %u where this "
                              "qslabinfo has %u: a mismatched build (the layout version should "
                              "have been bumped)",
                (int)g_pid, root.version, chk[i].what, chk[i].theirs, chk[i].ours);
    clean_front_names();
    for (unsigned i = 0; i < QS_OBSERVE_NR_OFFSETS; i++)
        if (root.offsets[i] != mine[i])
            die(EXIT_VERSION, "process %d: layout version %u, but field offset %u is %u where "
                              "this qslabinfo has %u: a mismatched build",
                (int)g_pid, root.version, i, root.offsets[i], mine[i]);
    return true;
}

/* One consistent snapshot; false when --retries reads all changed under
 * the reader (why: the last reason); data that does not hold together,
 * or a process gone, exits as below. */
bool snapshot_try(struct snap *s)
{
    unsigned long g = 0;
    int stable_failures = 0;
    for (int attempt = 1; attempt <= opt_retries; attempt++) {
        s->attempts = attempt;
        if (attempt > 1) {
            pause_ms(attempt < 10 ? 1 : 5);
            load_maps(); /* new mappings since (meta blocks, queues) */
        }
        reread_root();
        g = read_generation();
        if (g & 1) {
            snprintf(why, sizeof why, "a change was in progress (generation odd)");
            continue;
        }
        bool ok = read_all(s);
        unsigned long g2 = read_generation();
        if (ok && g2 == g) {
            s->generation = g;
            return true;
        }
        if (ok)
            snprintf(why, sizeof why, "the caches changed while read (generation %lu -> %lu)", g,
                     g2);
        else if (g2 == g && ++stable_failures >= 3) /* nothing changed: the data is bad */
            die(EXIT_TORN, "process %d: its qslab data does not hold together (%s), though "
                           "nothing changed while it was read (generation %lu)",
                (int)g_pid, why, g);
    }
    return false;
}

/* One consistent snapshot, or exit 3. */
void snapshot(struct snap *s)
{
    if (!snapshot_try(s))
        die(EXIT_TORN, "process %d: no consistent snapshot in %d reads (last: %s); try again",
            (int)g_pid, opt_retries, why);
}
