/*
 * owner_memory_workloads.c - check mode's routines of owner_memory_probe,
 * one per front end: each drives the check cache's per-owner and per-node
 * structures to their bounds (constants from the cache's own tunables):
 *   slqb  the queue to its grant (hiwater, or what the owner budget
 *         allows), the stash to its largest size short of a hand-over
 *         (stash_bytes) within what the grant leaves of the owner budget
 *         (with the default tunables the grant of 1,024 x 256 B takes the
 *         whole 256 KiB budget, so no stash), and remote frees in transit:
 *         freebatch-1 objects for each other owner of its objects (every
 *         node's list, reached through qslab_cache_alloc_node, and the other
 *         owners), of which the open batch and the QS_PENDING pending
 *         batches keep QS_PENDING + 1
 *   slub  the active slab all free and cpu_partial_slabs empty slabs on the
 *         owner's partial list; per node, min_partial slabs left on the
 *         node's partial list (one object of the last kept live)
 *   slab  the array to limit, the node's shared array full and free_limit
 *         free objects in its slabs; an alien array of 12 for every other
 *         node (frees of objects from qslab_cache_alloc_node)
 *   slob  allocations and frees only: no per-owner or per-node structure
 *
 * They run on owner_memory_probe.c's workers, one job at a time; the
 * model they are measured against is scripts/owner_memory_model.py's.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qslab.h>

/* struct qs_queue and struct qs_node: what each structure holds (read
 * only) */
#include "front/front.h"

#include "owner_memory_probe.h"

#define PERCPU_BATCH 256 /* src/front/slqb/cpu.c QS_PERCPU_BATCH: a CPU's flush, at most */

/* n objects of the check's cache into w's buf, past those it holds (the
 * caller counts what stays); `what` names the run when buf is too small. */
static void **alloc_run(struct worker *w, size_t n, const char *what)
{
    void **v = w->buf + w->nbuf;
    if (w->nbuf + n > BUF_OBJS) {
        fprintf(stderr, "owner_memory_probe: %s of %zu objects too big\n", what, n);
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        v[i] = must_alloc();
    return v;
}

static uintptr_t slab_key(const void *p)
{
    return (uintptr_t)p / slab_bytes; /* slabs are aligned to their size (src/core/page.c) */
}

/* ---- SLQB ---- */

/* Scratch arrays of the SLQB routine (touched before the baseline). */
#define MAX_WHOLE 4096
static void *scr_order[BUF_OBJS], *scr_stay[BUF_OBJS];
static unsigned char scr_used[BUF_OBJS];
static size_t scr_wstart[MAX_WHOLE]; /* where each whole slab's run starts */

/* Sort objects by address (so by slab): a shell sort, in place (qsort
 * would malloc, and the RSS delta would see it). */
static void sort_ptrs(void **a, size_t n)
{
    static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (unsigned g = 0; g < sizeof gaps / sizeof gaps[0]; g++)
        for (size_t i = gaps[g]; i < n; i++) {
            void *t = a[i];
            size_t j = i;
            for (; j >= gaps[g] && (uintptr_t)a[j - gaps[g]] > (uintptr_t)t; j -= gaps[g])
                a[j] = a[j - gaps[g]];
            a[j] = t;
        }
}

/* The caller's queue of the check's cache (its CPU's, or its thread's). */
static struct qs_queue *my_queue(struct worker *w)
{
    for (struct qs_queue *q = cache->queues; q; q = q->all_next)
        if (percpu ? q->cpu == w->cpu : q->owner == &qs_self)
            return q;
    return NULL;
}

/*
 * Fill the owner's queue to its grant and its stash to its largest size:
 * allocate a pool, sort it by slab, and free it in an order that decides
 * which slabs go home.
 *   A CPU's queue at hiwater flushes k = min(freebatch, 256) objects from
 *   its top home before it pushes (src/front/slqb/cpu.c qs_percpu_free_slow), so the
 *   stash grows by the slabs each flush empties.  It is handed to the
 *   node's FIFO when it reaches stash_bytes (or empty_limit slabs), so the
 *   largest stash kept is one slab short of that (stash_keep).  The frees:
 *   hiwater - k - (objects left in the queue by the pool's last refill)
 *   objects that stay; the first flush's k objects (fillers, objects of
 *   slabs that keep live objects, and whole slabs); for each later flush,
 *   k objects of whole slabs (the first of them flushes the k before); then
 *   k objects that stay (the first flushes the last whole slabs home): the
 *   queue ends at hiwater, the stash at stash_keep slabs.
 *   The owner budget (src/front/slqb/budget.c) holds the queue's grant and the stash:
 *   the queue's misses on its way up grow the grant to grant_cap() (the
 *   only queue of the owner with a grant, it steals from no one), and the
 *   stash keeps only the slabs the rest of the budget has room for; the
 *   others go to the node.  So stash_keep counts those only, and hiwater
 *   above is the grant.
 *   A thread's queue at its grant sends each free of its own objects
 *   straight to its slab (qs_free_full): objects that stay up to the
 *   grant, then whole slabs.
 * Pool objects not needed stay live to the end (with the fillers' slab
 * mates), counted as live.
 */
/* The grant a cache's queue reaches when it is the only one of its owner
 * with a grant (src/front/slqb/budget.c slqb_grant_grow): each miss doubles it (from a
 * refill's worth: half a batch, 4 to 64 KiB of objects, at least one), at
 * most budget / 16 bytes a step (at least one object; none for objects
 * over budget / 8), the last one short of hiwater, while the budget has
 * room. */
static unsigned long grant_cap(void)
{
    unsigned long budget = owner_budget(), slot = P.slot, hw = attr(&P, "hiwater");
    unsigned long fb = attr(&P, "freebatch"), g = 0;
    if (slot > budget / 8)
        return 0;
    unsigned long refill = fb / 2 > 4 ? fb / 2 : 4;
    if (refill > (64ul << 10) / slot)
        refill = (64ul << 10) / slot;
    if (!refill)
        refill = 1;
    unsigned long most = budget / 16 / slot ? budget / 16 / slot : 1;
    while (g < hw) {
        unsigned long s = g > refill ? g : refill;
        if (s > most)
            s = most;
        if (s > hw - g)
            s = hw - g;
        if ((g + s) * slot > budget)
            break;
        g += s;
    }
    return g;
}

static unsigned long stash_keep(void)
{
    unsigned long el = attr(&P, "empty_limit"), sb = attr(&P, "stash_bytes");
    unsigned long by_bytes = (sb + slab_bytes - 1) / slab_bytes; /* stash_add's hand-over */
    unsigned long lim = by_bytes < el ? by_bytes : el;
    if (!sb || !attr(&P, "empty_decay_ms") || !lim)
        return 0;
    /* the slabs the owner budget has room for beside the grant */
    unsigned long room = (owner_budget() - grant_cap() * P.slot) / slab_bytes;
    return lim - 1 < room ? lim - 1 : room;
}

static void job_slqb_fill(struct worker *w)
{
    unsigned long hw = grant_cap(), fb = attr(&P, "freebatch"), objs = P.objs;
    unsigned long k = fb < PERCPU_BATCH ? fb : PERCPU_BATCH;
    unsigned long keep = stash_keep(), per_flush = k / objs;
    bool flushing = percpu && per_flush && keep;
    unsigned long flushes = flushing ? (keep + per_flush - 1) / per_flush : 0;
    unsigned long first = flushing ? keep - (flushes - 1) * per_flush : 0; /* slabs, 1st flush */
    unsigned long fillers = flushing ? k - first * objs : 0;
    unsigned long filler_slabs = fillers ? (fillers + objs / 2 - 1) / (objs / 2) : 0;
    /* hiwater objects that stay, the whole slabs needed, two slabs' slack
     * (the pool's first and last slabs are seldom whole) */
    size_t pool = hw + (keep + filler_slabs + 2) * objs;
    void **a = alloc_run(w, pool, "slqb pool");
    struct qs_queue *q = my_queue(w);
    unsigned long left = q ? QS_TOP_NR(q->top) : 0; /* the last refill's rest */
    sort_ptrs(a, pool);
    /* whole slabs: runs of objs objects of one slab */
    size_t *wstart = scr_wstart;
    unsigned long nwhole = 0, need = keep + filler_slabs;
    for (size_t i = 0; i < pool && nwhole < need && nwhole < MAX_WHOLE;) {
        size_t j = i;
        while (j < pool && slab_key(a[j]) == slab_key(a[i]))
            j++;
        if (j - i == objs)
            wstart[nwhole++] = i;
        i = j;
    }
    if (nwhole < need) {
        fprintf(stderr, "owner_memory_probe: slqb: %lu whole slabs, %lu needed\n", nwhole, need);
        exit(2);
    }
    memset(scr_used, 0, pool);
    /* whole slabs [0, keep) go home; the next filler_slabs give half
     * their objects as fillers and keep the rest live */
    void *fill[PERCPU_BATCH];
    size_t nfill = 0;
    for (unsigned long s = 0; s < need; s++)
        for (size_t t = 0; t < objs; t++) {
            size_t i = wstart[s] + t;
            scr_used[i] = 1;
            if (s < keep)
                continue;
            if (t < objs / 2 && nfill < fillers)
                fill[nfill++] = a[i];
            else
                w->keep[w->nkeep++] = a[i];
        }
    size_t nstay = 0, si = 0, no = 0;
    for (size_t i = 0; i < pool; i++)
        if (!scr_used[i])
            scr_stay[nstay++] = a[i];
    void **order = scr_order;
    if (!flushing) {
        for (; si < nstay && no + left < hw; si++)
            order[no++] = scr_stay[si];
        for (unsigned long s = 0; s < keep; s++)
            for (size_t t = 0; t < objs; t++)
                order[no++] = a[wstart[s] + t];
    } else {
        for (; si < nstay && no + left < hw - k; si++)
            order[no++] = scr_stay[si];
        for (size_t f = 0; f < nfill; f++)
            order[no++] = fill[f];
        unsigned long s = 0;
        for (; s < first; s++)
            for (size_t t = 0; t < objs; t++)
                order[no++] = a[wstart[s] + t];
        for (unsigned long f = 1; f < flushes; f++)
            for (unsigned long m = 0; m < per_flush; m++, s++)
                for (size_t t = 0; t < objs; t++)
                    order[no++] = a[wstart[s] + t];
        for (size_t t = 0; t < k && si < nstay; t++)
            order[no++] = scr_stay[si++];
    }
    for (size_t i = 0; i < no; i++)
        qslab_cache_free(cache, order[i]);
    for (; si < nstay; si++)
        w->keep[w->nkeep++] = scr_stay[si]; /* not needed: live */
}

/* Remote frees in transit: each owner's lead frees freebatch-1 objects for
 * every other owner of its objects, so that each stays one short of a
 * batch (src/front/slqb/remote.c: a batch is posted at freebatch objects).  Two kinds
 * of groups: objects of another owner's slabs (that owner allocates them
 * for us, before its queue is filled: afterwards its allocations would
 * take from the queue), and objects of every node's node list, the own
 * node's included (qslab_cache_alloc_node by an owner of another node, the
 * only way to reach a node's list; after the queues are filled: a refill
 * of that node's owners would otherwise take the last, partial slab of
 * them into its own ownership, and merge two groups; and a queue below
 * `park` would keep the own node's objects).  The node lists' groups are
 * freed first, so that with more than QS_PENDING + 1 groups (the open batch
 * and the pending batches) the batches posted to make room are the node
 * lists' (their objects go back to their slabs). */
#define MAX_GROUPS 80
struct groups {
    int n;
    bool node[MAX_GROUPS]; /* a node list's group (else an owner's) */
    void **obj[MAX_GROUPS];
    size_t cnt[MAX_GROUPS];
};
static struct groups transit[MAX_THREADS];
static struct worker *target; /* job arguments */
static int target_node;

static void add_group(struct groups *g, bool node, void **v, size_t n)
{
    if (g->n >= MAX_GROUPS)
        return;
    g->node[g->n] = node;
    g->obj[g->n] = v;
    g->cnt[g->n++] = n;
}

static void job_slqb_transit_node(struct worker *w)
{
    /* objects of target_node's list, for target's lead to free */
    unsigned long per = attr(&P, "freebatch") - 1;
    void **v = w->buf + w->nbuf;
    for (unsigned long i = 0; i < per; i++)
        v[i] = must_alloc_node(target_node);
    w->nbuf += per;
    add_group(&transit[target->idx], true, v, per);
}

static void job_slqb_transit_for(struct worker *w)
{
    /* objects of w's slabs, for target's lead to free */
    unsigned long per = attr(&P, "freebatch") - 1;
    void **v = w->buf + w->nbuf;
    for (unsigned long i = 0; i < per; i++)
        v[i] = must_alloc();
    w->nbuf += per;
    add_group(&transit[target->idx], false, v, per);
}

static void job_slqb_transit_free(struct worker *w)
{
    struct groups *g = &transit[w->idx];
    for (int pass = 0; pass < 2; pass++) /* node lists' groups first */
        for (int i = 0; i < g->n; i++)
            if (g->node[i] == (pass == 0))
                for (size_t j = 0; j < g->cnt[i]; j++)
                    qslab_cache_free(cache, g->obj[i][j]);
}

void workload_slqb(void)
{
    for (int i = 0; i < nthreads; i++)
        for (int j = 0; j < nthreads; j++)
            if (i != j && workers[i].lead && workers[j].lead) {
                target = &workers[j];
                run_on(&workers[i], job_slqb_transit_for);
            }
    run_owner_routine(job_slqb_fill);
    for (int i = 0; i < nthreads; i++) {
        if (!workers[i].lead)
            continue;
        target = &workers[i];
        for (target_node = 0; target_node < nnodes; target_node++) {
            /* the giver: the target itself for another node, else a lead
             * of another node (none on a one-node machine) */
            struct worker *giver = target->node != target_node ? target : NULL;
            for (int j = 0; j < nthreads && !giver; j++)
                if (workers[j].lead && workers[j].node != target_node)
                    giver = &workers[j];
            if (giver)
                run_on(giver, job_slqb_transit_node);
        }
    }
    for (int i = 0; i < nthreads; i++)
        if (workers[i].lead)
            run_on(&workers[i], job_slqb_transit_free);
    /* the transit objects were freed (those in buf) */
    for (int i = 0; i < nthreads; i++)
        workers[i].nbuf = 0;
}

/* ---- SLUB ---- */

static unsigned long cpu_partial_slabs(void)
{
    /* src/front/slub/slabs.c cpu_partial_slabs: cpu_partial * 2 / objects per slab, rounded up */
    unsigned long cp = attr(&P, "cpu_partial");
    return cp ? (cp * 2 + P.objs - 1) / P.objs : 0;
}

/* (cpu_partial_slabs + 1) slabs' worth, freed slab by slab: the first
 * cpu_partial_slabs, full and unfrozen, go on the owner's partial list as
 * their first free finds them full (put_cpu_partial) and stay there empty;
 * the last is the active slab, whose objects are pushed on the owner's
 * list: all free. */
static void job_slub_owner(struct worker *w)
{
    size_t k = (cpu_partial_slabs() + 1) * P.objs;
    void **v = w->buf + w->nbuf;
    for (size_t i = 0; i < k; i++)
        v[i] = must_alloc();
    for (size_t i = 0; i < k; i++)
        qslab_cache_free(cache, v[i]);
}

/* Node `target_node`'s partial list: min_partial slabs made there by
 * qslab_cache_alloc_node from an owner of another node (src/front/slub/slabs.c
 * slub_alloc_single), then freed by it: each full slab's first free puts it on
 * its node's list (another node's slab), the free that empties it keeps it
 * there while the node has fewer than min_partial partial slabs (the slab
 * itself counted), so the last slab keeps one object live. */
static void job_slub_node(struct worker *w)
{
    unsigned long mp = attr(&P, "min_partial");
    size_t k = mp * P.objs;
    void **v = w->buf + w->nbuf;
    for (size_t i = 0; i < k; i++)
        v[i] = must_alloc_node(target_node);
    for (size_t i = 0; i + 1 < k; i++)
        qslab_cache_free(cache, v[i]);
    v[0] = v[k - 1]; /* live to the end */
    w->nbuf += 1;
}

void workload_slub(void)
{
    run_owner_routine(job_slub_owner);
    for (int n = 0; n < nnodes; n++)
        for (int i = 0; i < nthreads; i++)
            if (workers[i].lead && workers[i].node != n) {
                target_node = n;
                run_on(&workers[i], job_slub_node);
                break;
            }
}

/* ---- SLAB ---- */

static unsigned long free_limit(void)
{
    /* src/front/slab/slabs.c slabfe_free_limit: (1 + CPUs per node) * batchcount +
     * objects per slab, a node's CPUs counted as possible CPUs / nodes */
    long per_node = ncpu_possible / nnodes;
    if (per_node < 1)
        per_node = 1;
    return (unsigned long)(1 + per_node) * attr(&P, "batchcount") + P.objs;
}

/* The array to limit, and batches enough for the shared array and
 * free_limit: allocate limit + batchcount * (m + 1) objects, m = shared +
 * ceil((free_limit + objs) / batchcount), then free limit - r + batchcount
 * * m of them, r being what the array holds after the allocations (refills
 * bring whole batches, or less when the node's slabs run short): the frees
 * fill the array to limit, then each free at limit flushes a batch from the
 * top to the shared array, then to the slabs (src/front/slab/slab.c pc_free),
 * and the array ends at limit.  The rest stay live. */
static void job_slab_owner(struct worker *w)
{
    unsigned long lim = attr(&P, "limit"), b = attr(&P, "batchcount"), sh = attr(&P, "shared");
    unsigned long m = sh + (free_limit() + P.objs + b - 1) / b;
    size_t k = lim + b * (m + 1);
    void **v = alloc_run(w, k, "slab routine");
    struct qs_queue *q = my_queue(w);
    unsigned long r = q ? QS_TOP_NR(q->top) : 0;
    size_t f = r < lim ? lim - r + b * m : b * m; /* (a refill leaves r < limit) */
    for (size_t i = 0; i < f; i++)
        qslab_cache_free(cache, v[i]);
    for (size_t i = f; i < k; i++)
        w->keep[w->nkeep++] = v[i];
}

/* An alien array of ALIEN_LIMIT for every other node: objects of that node
 * (qslab_cache_alloc_node) freed here; the drains before (12 at a time, to
 * the node's shared array first, then its slabs) fill that node's shared
 * array and free_limit too. */
static void job_slab_alien(struct worker *w)
{
    unsigned long b = attr(&P, "batchcount"), sh = attr(&P, "shared");
    unsigned long drain = sh * b + free_limit() + P.objs;
    size_t x = ALIEN_LIMIT * ((drain + ALIEN_LIMIT - 1) / ALIEN_LIMIT + 1);
    void **v = w->buf + w->nbuf;
    for (int n = 0; n < nnodes; n++) {
        if (n == w->node)
            continue;
        for (size_t i = 0; i < x; i++)
            v[i] = must_alloc_node(n);
        for (size_t i = 0; i < x; i++)
            qslab_cache_free(cache, v[i]);
    }
}

void workload_slab(void)
{
    run_owner_routine(job_slab_owner);
    for (int i = 0; i < nthreads; i++)
        if (workers[i].lead)
            run_on(&workers[i], job_slab_alien);
}

/* ---- SLOB ---- */

#define SLOB_JOB_OBJS 1024 /* objects a thread allocates, then frees (owner_memory_model.py) */
static void job_slob(struct worker *w)
{
    void **v = w->buf + w->nbuf;
    for (size_t i = 0; i < SLOB_JOB_OBJS; i++)
        v[i] = must_alloc();
    for (size_t i = 0; i < SLOB_JOB_OBJS; i++)
        qslab_cache_free(cache, v[i]);
}

void workload_slob(void)
{
    run_owner_routine(job_slob);
}

void workloads_touch(void)
{
    memset(scr_order, 0, sizeof scr_order);
    memset(scr_stay, 0, sizeof scr_stay);
    memset(scr_used, 0, sizeof scr_used);
    memset(scr_wstart, 0, sizeof scr_wstart);
}
