/*
 * node.c - NUMA topology and the per-(cache, node) lists.
 *
 * Topology comes from sysfs (/sys/devices/system/node).  QSLAB_FAKE_NUMA=N
 * splits the CPUs into N fake nodes (CPU i on node i % N) so that every NUMA
 * path runs on one-node machines; fake nodes share the real memory, so no
 * mbind is done for them.  With several real nodes, chunks are bound to their
 * node with mbind (page.c), so _node allocations really use that node's memory.
 *
 * Each cache has one qs_node per node.  It holds:
 *   - list: slabs owned by no thread (their owner exited, or they were made
 *     by qslab_cache_alloc_node for a node other than the caller's).  Their
 *     objects are allocated and freed under node->lock.
 *   - the empty FIFO: slabs with no object in use, oldest first, kept for
 *     reuse, one list per home, each under a lock of its own (FIFO HOMES,
 *     below).  Reuse takes the newest (warmest) of the taker's home; the
 *     policy gives back the oldest: beyond empty_limit slabs at once, and
 *     any slab that stayed empty longer than empty_decay_ms, checked
 *     whenever slabs are put on its home's list and at the purger's
 *     sweeps.
 *     That time hysteresis is what keeps a program that frees and reallocates
 *     its working set from paying page faults (13 us per page on these VMs)
 *     while memory left idle still goes back.
 *
 * THE PURGER.  A program that frees its working set and then goes quiet
 * touches no FIFO, so the decay would never run.  The first time empty slabs
 * are kept, a detached background thread is started (signals blocked, 64 KiB
 * stack); every QS_PURGE_TICK_MS it runs the tick, which is the front
 * layer's (qs_front_hooks.tick: front/registry.c qs_front_tick): every
 * cache's idle queues (the front ends' `idle` hooks), then the policy on
 * every node of the cache (qs_node_sweep_cache, here), then the front ends'
 * own sweeps.  Its sleep between ticks listens to memory pressure (a
 * PSI trigger; pressure.c), and after each tick it looks at the cgroup's
 * memory limit: either gives back everything not in use at once.
 * QSLAB_PURGE=0 disables it (then decay runs only on activity, and
 * nothing listens to pressure).  It takes qs_global, then each node lock, as everyone else
 * does.  Where it is started from matters (see qs_purger_wanted).  After
 * fork the child has no purger until it keeps empty slabs again.
 */
#include "core/internal.h"
#include "core/hooks.h"

#include <errno.h>

int qs_nr_nodes = 1;
bool qs_multi_node;
bool qs_real_numa;
static QS_BSS_APART int cpu_node[QS_MAX_CPUS];

static int parse_small(const char *s)
{
    int v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 1000)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

static void node_reclaim(int node, unsigned order); /* below */

static bool purge_on = true; /* QSLAB_PURGE, read at start-up (below) */

static void cached_walk(void); /* below */

/* QSLAB_CACHED_MAX: the cached-memory cap at start-up, in bytes (0: none);
 * anything else is said in one line and ignored. */
static void cached_env(void)
{
    const char *v = qs_os_getenv("QSLAB_CACHED_MAX");
    if (!v)
        return;
    unsigned long n = 0;
    bool ok = *v != '\0';
    for (const char *p = v; *p && ok; p++) {
        ok = *p >= '0' && *p <= '9' && n <= QS_CACHED_MAX_MAX;
        n = n * 10 + (unsigned long)(*p - '0');
    }
    if (ok && n <= QS_CACHED_MAX_MAX)
        qs_page_set_cached_max(n);
    else
        qs_warn("QSLAB_CACHED_MAX=%s ignored: %sallowed range is 0..%u bytes (0: no cap); "
                "no cap on cached memory",
                v, qs_env_why(v), QS_CACHED_MAX_MAX);
}

QS_STARTUP void qs_node_topology_init(void)
{
    qs_page_set_reclaim(node_reclaim);
    qs_page_set_cached_walk(cached_walk);
    cached_env();
    int real = qs_os_numa_topology(cpu_node, QS_MAX_CPUS);
    if (real > QS_MAX_NODES)
        real = QS_MAX_NODES;
    for (int i = 0; i < QS_MAX_CPUS; i++)
        if (cpu_node[i] >= QS_MAX_NODES)
            cpu_node[i] = 0;
    qs_nr_nodes = real;
    qs_real_numa = real > 1;
    purge_on = qs_env_bool("QSLAB_PURGE", 1, "the purger");
    qs_pressure_init(purge_on);
    const char *fake = qs_os_getenv("QSLAB_FAKE_NUMA");
    if (fake) {
        int n = parse_small(fake);
        if (n >= 1 && n <= QS_MAX_NODES) {
            qs_nr_nodes = n;
            qs_real_numa = false;
            for (int i = 0; i < QS_MAX_CPUS; i++)
                cpu_node[i] = i % n;
        } else {
            qs_warn("QSLAB_FAKE_NUMA=%s ignored: %sallowed range is 1..%u", fake, qs_env_why(fake),
                    (unsigned long)QS_MAX_NODES);
        }
    }
    qs_multi_node = qs_nr_nodes > 1;
}

int qs_node_of_cpu(int cpu)
{
    if (cpu < 0 || cpu >= QS_MAX_CPUS)
        return 0;
    return cpu_node[cpu];
}

void qs_node_init(struct qs_node *n, int id)
{
    n->id = id;
    n->list.node = n;
}

/* (node, order): a FIFO may hold an empty slab of it (node_reclaim; relaxed) */
static uint8_t fifo_hint[QS_MAX_NODES][QS_NR_ORDERS];

/* FIFO HOMES.  A node's empty FIFO is QS_FIFO_HOMES lists, one per home
 * (a CPU's home is its id modulo QS_FIFO_HOMES): the slabs put on it from
 * a CPU join that CPU's home's list, and a CPU takes the newest slab of
 * its own home's list first, another home's only when its own has none.
 * A slab goes empty on the CPU that used it last, and its objects, free
 * bits and descriptor are in that CPU's cache: one shared list handed each
 * CPU the other's newest slabs, and two CPUs each taking and freeing
 * 10,000 blocks of 256 bytes in rounds moved half their slabs from one
 * CPU's cache to the other's every round (bench_slub batch_all, with the
 * page layer's homes, page.c: 120 cycles an allocation and free with one
 * list, 37 with homes, 35 on one CPU alone).  Any CPU still takes any
 * empty slab before it makes a new one, and the policy goes oldest first
 * over all the lists (fifo_oldest compares their heads).
 *
 * Each home's list has its own lock, count and appended count, in a cache
 * line of its own (struct qs_fifo), so that a CPU that puts its empties
 * on its home's list and takes them back from there touches no line the
 * other CPUs write: a take reads another home's count only when its own
 * list is short (qs_node_take), a put only when its own list is past its
 * share of the limit (below).  Under node->lock, as the lists were at
 * first, two CPUs each taking and freeing 10,000 blocks of 16 KiB (2 to a
 * slab: nearly every free empties a slab, every refill takes from the
 * node) spent half their time moving that lock's line and the counts
 * beside it between them, or waiting for it: 368 cycles an allocation and
 * free against 140 on one CPU; 132 with a lock per home (8 KiB: 182, 115
 * on one CPU, 101).  With a lock per home but every refill summing the
 * homes' counts first, 310: one read of the other CPU's line a refill.
 *
 * LOCKS.  fifo[h].lock guards home h's list: head, tail, nr, appended, and
 * the links of its slabs (prev, next, home, empty_ms).  node->lock guards
 * the rest of the node (its slab list above) and is taken before any home
 * lock, never after one; several home locks are taken in increasing h
 * (fifo_lock_all).  A put and a take hold one home lock at a time; what
 * needs the whole FIFO (the policy's limit and its sweep, detach, the
 * retention cuts, the walks of debug.c and validate.c) holds them all,
 * and so does the CYCLING state (cut_mark, cut_ms, cut_nr: also under
 * qs_global).  A home's nr is read without its lock (qs_node_nr_empty, a
 * take passing over an empty list): a slab put meanwhile is missed by that
 * take, which then takes another or makes one.
 *
 * THE LIMIT AT A PUT.  A put gives back its own home's decayed slabs; it
 * sums every home's count (reading the other homes' lines) only once its
 * own list holds more than its share of empty_limit (limit /
 * QS_FIFO_HOMES), and then applies the whole policy under every home's
 * lock.  A FIFO over the limit has a home over its share, and that home's
 * next put (or the purger's sweep, every QS_PURGE_TICK_MS) brings it back
 * under: the lists may pass the limit by the other homes' shares until
 * then.  On one CPU (one home) the limit holds at every put.
 *
 * The CPU is read before a lock is taken: a thread that moved meanwhile
 * puts on or takes from another home's list, which costs that slab's
 * locality and nothing else. */
static unsigned fifo_here(void)
{
    return (unsigned)qs_os_current_cpu() % QS_FIFO_HOMES;
}

void qs_node_fifo_lock(struct qs_node *n)
{
    for (int h = 0; h < QS_FIFO_HOMES; h++)
        qs_lock_acquire(&n->fifo[h].lock);
}

void qs_node_fifo_unlock(struct qs_node *n)
{
    for (int h = QS_FIFO_HOMES - 1; h >= 0; h--)
        qs_lock_release(&n->fifo[h].lock);
}

/* Every home's lock, or none (false: one was busy) */
static bool fifo_try_all(struct qs_node *n)
{
    for (int h = 0; h < QS_FIFO_HOMES; h++)
        if (!qs_lock_try(&n->fifo[h].lock)) {
            while (--h >= 0)
                qs_lock_release(&n->fifo[h].lock);
            return false;
        }
    return true;
}

/* The oldest slab of n's FIFO (the head that went empty first), or NULL;
 * every home's lock held */
static struct qs_slab *fifo_oldest(const struct qs_node *n, uint64_t now)
{
    struct qs_slab *old = NULL;
    uint32_t age = 0;
    for (int h = 0; h < QS_FIFO_HOMES; h++) {
        struct qs_slab *s = n->fifo[h].head;
        uint32_t a = s ? qs_ms_age(now, s->empty_ms) : 0;
        if (s && (!old || a > age)) {
            old = s;
            age = a;
        }
    }
    return old;
}

/* The newest slab of `order` (any: QS_NR_ORDERS) of list f, or NULL; a
 * cache's FIFO holds slabs of another order only after its order was
 * tuned (REUSE looks for one).  f's lock held, or a quiet cache. */
static struct qs_slab *home_newest(const struct qs_fifo *f, unsigned order)
{
    for (struct qs_slab *s = f->tail; s; s = s->prev)
        if (order == QS_NR_ORDERS || s->order == order)
            return s;
    return NULL;
}

struct qs_slab *qs_node_fifo_peek(const struct qs_node *n)
{
    unsigned h = fifo_here();
    for (unsigned i = 0; i < QS_FIFO_HOMES; i++) {
        struct qs_slab *s = home_newest(&n->fifo[(h + i) % QS_FIFO_HOMES], QS_NR_ORDERS);
        if (s)
            return s;
    }
    return NULL;
}

/* Slab s off its home's list (that list's lock held) */
static void fifo_del(struct qs_node *n, struct qs_slab *s)
{
    struct qs_fifo *f = &n->fifo[s->home];
    if (s->prev)
        s->prev->next = s->next;
    else
        f->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        f->tail = s->prev;
    s->next = s->prev = NULL;
    QS_STORE(f->nr, f->nr - 1);
}

/* The newest slab of `order` (any: QS_NR_ORDERS) of home h's list, else
 * of the next home's that has one, taken off it; NULL: none.  The homes'
 * locks are taken one at a time (the caller may hold node->lock, no home
 * lock); with `busy`, only tried: a busy home is passed over and *busy
 * set. */
static struct qs_slab *fifo_take_newest(struct qs_node *n, unsigned h, unsigned order, bool *busy)
{
    for (unsigned i = 0; i < QS_FIFO_HOMES; i++) {
        struct qs_fifo *f = &n->fifo[(h + i) % QS_FIFO_HOMES];
        if (!QS_LOAD(f->nr))
            continue;
        if (!busy)
            qs_lock_acquire(&f->lock);
        else if (!qs_lock_try(&f->lock)) {
            *busy = true;
            continue;
        }
        struct qs_slab *s = home_newest(f, order);
        if (s)
            fifo_del(n, s);
        qs_lock_release(&f->lock);
        if (s)
            return s;
    }
    return NULL;
}

/* Apply the empty-slab policy to the whole FIFO at time `now` (ms): slabs
 * to give back are pushed on *release.  Every home's lock held. */
static void fifo_policy_all(qslab_cache *c, struct qs_node *n, struct qs_slab **release, uint64_t now)
{
    unsigned long limit = QS_LOAD(c->empty_limit);
    if (unlikely(__atomic_load_n(&c->shrinking, __ATOMIC_RELAXED)))
        limit = ~0ul; /* a shrink gives them all back (cache.c shrink_one) */
    uint64_t decay = QS_LOAD(c->empty_decay_ms);
    unsigned long nr = qs_node_nr_empty(n); /* exact: every lock held */
    struct qs_slab *s;
    while ((s = fifo_oldest(n, now)) && (nr > limit || qs_ms_age(now, s->empty_ms) >= decay)) {
        fifo_del(n, s);
        nr--;
        s->next = *release;
        *release = s;
    }
}

/* Append empty slabs (a ->next list) to home h's list at `now`; its lock
 * held */
static void fifo_append(struct qs_node *n, unsigned h, struct qs_slab *list, uint64_t now)
{
    size_t kept = 0;
    struct qs_fifo *f = &n->fifo[h];
    while (list) {
        struct qs_slab *s = list;
        list = list->next;
        qs_assert(s->inuse == 0);
        qs_slab_set_owner(s, &n->list);
        __atomic_store_n(&s->state, (uint8_t)QS_SLAB_EMPTY, __ATOMIC_RELAXED);
        s->empty_ms = qs_ms_stamp(now, s->empty_ms); /* its zero mark stays (internal.h) */
        s->next = NULL;
        if (unlikely(!QS_LOAD(fifo_hint[s->node][s->order]))) /* a read, mostly */
            QS_STORE(fifo_hint[s->node][s->order], 1);
        s->home = (uint8_t)h;
        s->prev = f->tail;
        if (f->tail)
            f->tail->next = s;
        else
            f->head = s;
        f->tail = s;
        QS_STORE(f->nr, f->nr + 1);
        f->appended++;
        kept += qs_slab_bytes(s->order);
    }
    qs_page_cached_kept(kept); /* the cached-memory cap's estimate (warm.c) */
}

static struct qs_slab *fifo_detach_all(struct qs_node *n) /* every home's lock held */
{
    struct qs_slab *list = NULL;
    for (int h = 0; h < QS_FIFO_HOMES; h++) {
        struct qs_fifo *f = &n->fifo[h];
        if (f->tail) {
            f->tail->next = list;
            list = f->head;
        }
        f->head = f->tail = NULL;
        QS_STORE(f->nr, 0);
    }
    return list;
}

/* Every slab of n's FIFO, detached (no home lock held; node->lock may be):
 * a ->next list, home by home. */
struct qs_slab *qs_node_fifo_detach(struct qs_node *n)
{
    qs_node_fifo_lock(n);
    struct qs_slab *list = fifo_detach_all(n);
    qs_node_fifo_unlock(n);
    return list;
}

/* Append empty slabs (a list linked by ->next) to this CPU's home's list,
 * one clock read for the lot, then the policy (THE LIMIT AT A PUT):
 * slabs to give back pushed on *release; true if the FIFO keeps slabs.
 * No home lock held; node->lock may be. */
bool qs_node_put_empty_locked(qslab_cache *c, struct qs_node *n, struct qs_slab *list,
                              struct qs_slab **release)
{
    uint64_t now = qs_os_now_ms();
    unsigned h = fifo_here();
    struct qs_fifo *f = &n->fifo[h];
    unsigned long limit = QS_LOAD(c->empty_limit);
    uint64_t decay = QS_LOAD(c->empty_decay_ms);
    qs_lock_acquire(&f->lock);
    fifo_append(n, h, list, now);
    struct qs_slab *s;
    while ((s = f->head) && qs_ms_age(now, s->empty_ms) >= decay) {
        fifo_del(n, s);
        s->next = *release;
        *release = s;
    }
    /* (a shrink keeps them all for itself: fifo_policy_all) */
    bool over = (unsigned long)f->nr * QS_FIFO_HOMES > limit &&
                likely(!__atomic_load_n(&c->shrinking, __ATOMIC_RELAXED));
    bool kept = f->nr != 0;
    qs_lock_release(&f->lock);
    if (over && qs_node_nr_empty(n) > limit) {
        qs_node_fifo_lock(n);
        fifo_policy_all(c, n, release, now);
        kept = qs_node_nr_empty(n) != 0;
        qs_node_fifo_unlock(n);
    }
    return kept;
}

/* May empty slab s go back to the page layer: does every object's word
 * look like a free-list link?  Checked before a slab's memory goes back
 * (the policy, the purger, shrink, trim).  The fast frees of SLQB and SLAB
 * push without loading the object's word, so a second free of an object
 * of an empty slab puts it in a queue (or array) while the slab is on the
 * FIFO, its link overwritten by the stamp (0 once handed out from there).
 * Given back then, the slab's memory could become a new slab of the cache
 * while that entry waits: the entry would then hand out an object that the
 * new slab hands out too (fuzz_misuse found it, 2026-12-01:
 * fuzz/corpus/misuse/found-fixed-bug13-*; tests/unit/empty_slab_entry.c).
 * Such a slab stays on the FIFO (fifo_keep), where its next reuse walks
 * its list with the front end's checks (SLQB's take, SLAB's
 * slab_init_free): they report the second free once and keep the object
 * in use.  The scan reads one word per object in address order (no list
 * walk: independent loads the prefetcher follows), of a slab about to go.
 * Only front ends with queues push blindly; SLUB checks its FIFO at
 * shrink itself (check_empty), SLOB and the debug front end load the word.
 * What this cannot see: a second free that another CPU pushes between the
 * scan and the giving back (the fast path takes no lock).  The window was
 * the slab's whole time on the FIFO (up to empty_decay_ms); it is the
 * scan's few microseconds now, and a double free racing with its own
 * slab's release is the kind qslab reports when it can, not always. */
static bool fifo_whole(const qslab_cache *c, struct qs_slab *s)
{
    if (!(qs_front_hooks.queues >> c->front & 1)) /* front.h `queues` */
        return true;
    const char *obj = s->base;
    for (uint32_t i = 0; i < s->objects; i++, obj += c->slot_size)
        if (unlikely(!qs_looks_free(c, *qs_link(c, (void *)obj))))
            return false;
    return true;
}

/* A slab that left the FIFO to go back: if fifo_whole refuses it, it goes
 * back on its node's FIFO as the newest (the next reuse takes it), without
 * the policy (which could pick it again at once), and true is returned.
 * Every slab that leaves a FIFO passes here, so a debug cache's objects
 * get their last check here too (qs_debug_hooks.slab_leaving: the
 * purger's walk covers the FIFO, not what has left it).  The caller holds
 * no node lock; c is alive. */
static bool fifo_keep(qslab_cache *c, struct qs_slab *s)
{
    if (unlikely(c->debug))
        qs_debug_hooks.slab_leaving(c, s);
    if (likely(fifo_whole(c, s)))
        return false;
    struct qs_node *n = &c->nodes[s->node];
    uint64_t now = qs_os_now_ms();
    unsigned h = fifo_here();
    s->next = NULL;
    qs_lock_acquire(&n->fifo[h].lock);
    fifo_append(n, h, s, now);
    qs_lock_release(&n->fifo[h].lock);
    return true;
}

/* Give back empty slabs that left a FIFO (c alive: the caller holds
 * qs_global or uses c); those fifo_whole refuses stay (fifo_keep).  With
 * `bytes` (shrink, trim) every slab goes back to the OS; without (the
 * policy's list) a slab that left by the FIFO's limit before its decay
 * stays warm in the page layer, for the next slab of its order of any
 * cache (warm.c: the retention rule), and only the decayed go back. */
void qs_node_release_list(qslab_cache *c, struct qs_queue *q, struct qs_slab *list, size_t *bytes)
{
    struct qs_slab *go = NULL, *warm = NULL;
    uint32_t now = bytes ? 0 : (uint32_t)qs_os_now_ms(), decay = QS_LOAD(c->empty_decay_ms);
    while (list) {
        struct qs_slab *next = list->next;
        if (likely(!fifo_keep(c, list))) {
            qs_stat(c, q, QS_FREE_SLAB, 1);
            qs_stat(c, q, QS_FREE_OBJS, list->objects);
            if (!bytes && qs_ms_age(now, list->empty_ms) < decay) {
                list->next = warm;
                warm = list;
            } else {
                list->next = go;
                go = list;
            }
        }
        list = next;
    }
    size_t b = qs_page_free_slabs(go); /* adjacent slabs: one madvise */
    if (warm)
        b += qs_page_keep_empties(warm);
    if (bytes)
        *bytes += b;
    else /* after a keep (qs_node_put_empty_locked's callers end here) */
        qs_page_cached_check();
}

/* THE RETENTION RULE's part here (page.c has the whole rule): the page
 * layer is about to hand out memory that is not resident, for node `node`
 * and slabs of `order`.  First:
 *   - REUSE: an empty slab of (node, order) on any cache's FIFO goes warm
 *     for this very allocation (the newest of the first FIFO that has
 *     one), so the process does not grow while memory it already holds
 *     sits empty: a cache's empty slabs serve its own next refills only
 *     as long as no other cache of their order grows.  Python building a
 *     dict of strings while the previous generation's holes empty other
 *     size classes' slabs kept 4.4 MiB of FIFO slabs at its peak (5% of
 *     its slabs) while its new classes faulted in fresh pages.  A hint per
 *     (node, order), set when a slab enters a FIFO and cleared by a walk
 *     that finds none, spares a growing program the walk when no FIFO has
 *     a slab of its order: the walk clears it before it looks, so a slab
 *     put on a FIFO meanwhile sets it again (a lost hint would only cost
 *     a reuse, never correctness).
 *   - BIG EMPTIES: at each walk (below), the empty slabs of 256 KiB and
 *     more (QS_BIG_EMPTY_ORDER) of other orders than the one asked for,
 *     on a FIFO or warm, that went empty before the previous walk go back
 *     to the OS: they lay unused while the process grew by a step, and a
 *     slab that size serves only its own order.  Such slabs hold one
 *     block each, and blocks that big come and go with a program's
 *     growth: buffers doubled by realloc, hash tables resized.  sqlite
 *     building an indexed table kept 3.8 MiB of its doubling buffers'
 *     slabs (256 KiB to 2 MiB, each order asked for once) at its peak,
 *     within the cap.  Emptied since the previous walk, they stay: a
 *     program that frees a big block and takes one again soon keeps
 *     its pages, and one that does not grow never walks.
 *   - THE CAP: if the caches' FIFOs and the warm slots together keep more
 *     than the retention cap, the oldest slab of each FIFO in turn goes
 *     back to the OS until they fit (warm.c cuts the warm slots itself),
 *     but for the FIFOs that are CYCLING: within QS_CUT_HOLD_MS of a run
 *     of cuts of a FIFO, at least half as many slabs as that run took went
 *     empty onto it again, at 32 MiB a second or faster (cut_rate).  The
 *     memory the cuts gave back was faulted in again by its cache, used
 *     and freed: it is a working set that the cache frees and takes
 *     again, not memory a program left behind, and cutting it again makes
 *     the cache fault it in again, which grows the process, whose next
 *     walk cuts another such FIFO: two threads taking and freeing 10,000
 *     blocks in turn, of 256 bytes and of 1 KiB, would give back and
 *     fault in both working sets on every round (docs/design.md has the
 *     numbers).  Such a FIFO is cut once a QS_CUT_HOLD_MS at most.  The
 *     rate keeps the exception to working sets whose faults would cost:
 *     slower returns (the 4-thread Python program's FIFOs) are cut as
 *     before, which keeps that program's peak.
 * The FIFOs' bytes are not counted as they change (a shared counter on
 * every FIFO's slab in and out cost the batch benchmarks on both CPUs up
 * to a third of their time): the cap's walk sums them (the homes' counts of empty slabs of
 * the cache's order), and it runs once the process has grown by a step
 * since the last (QS_RECLAIM_STEP, or an eighth of the cap), so a growing
 * program pays one walk a step, and the cap may be passed by a step.
 * Locks: the caller may hold a queue lock or (SLAB's, SLOB's) a node lock
 * or slob_lock, so qs_global and the node locks are only tried, never
 * waited for (a busy one skips the reclaim, or that node, this time);
 * qs_global keeps the caches alive while their FIFOs are walked. */
#define QS_RECLAIM_STEP ((size_t)1 << 20)
static size_t cold_since; /* atomic: bytes handed out cold since the last walk */
static unsigned long reclaims; /* atomic: walks that found FIFOs over the cap */
static unsigned long big_cuts; /* atomic: big empties given back (BIG EMPTIES) */
static unsigned long walks; /* written under qs_global: the walks so far */
unsigned long *const qs_node_reclaims = &reclaims;
unsigned long *const qs_node_big_cuts = &big_cuts;
unsigned long *const qs_node_walks = &walks;

static size_t fifo_sum(void) /* qs_global held */
{
    size_t b = 0;
    for (qslab_cache *c = qs_caches; c; c = c->next)
        for (int i = 0; i < qs_nr_nodes; i++)
            b += qs_node_nr_empty(&c->nodes[i]) * qs_slab_bytes(QS_LOAD(c->order));
    return b;
}

size_t qs_node_cached_bytes(void)
{
    qs_lock_acquire(&qs_global);
    size_t b = fifo_sum();
    for (qslab_cache *c = qs_caches; c; c = c->next)
        for (struct qs_queue *q = c->queues; q; q = q->all_next)
            b += QS_LOAD(q->stash_bytes);
    qs_lock_release(&qs_global);
    return b + __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);
}

/* REUSE (above): one FIFO slab of (node, order) goes warm; qs_global held */
static void reuse_one(int node, unsigned order)
{
    bool busy = false;
    QS_STORE(fifo_hint[node][order], 0);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        struct qs_node *n = &c->nodes[node];
        /* a busy home may hold one: the hint stays */
        struct qs_slab *s = fifo_take_newest(n, fifo_here(), order, &busy);
        if (s) { /* there may be more */
            QS_STORE(fifo_hint[node][order], 1);
            s->next = NULL;
            qs_node_release_list(c, NULL, s, NULL); /* young: to the warm slots */
            return;
        }
    }
    if (busy)
        QS_STORE(fifo_hint[node][order], 1);
}

/* BIG EMPTIES (above), at a walk that serves a slab of `order`: qs_global
 * held.  A cache's FIFO holds slabs of its order, oldest first (empty_ms
 * order), so each FIFO gives back from its head while the head went empty
 * before the previous walk. */
static uint32_t last_walk_ms; /* qs_global */
static void big_cut(unsigned order)
{
    uint64_t now = qs_os_now_ms();
    uint32_t age = qs_ms_age(now, last_walk_ms) + 1; /* empty since before the last walk */
    last_walk_ms = (uint32_t)now & QS_MS_MASK;
    QS_STORE(walks, walks + 1);
    unsigned long cut = 0;
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        unsigned o = QS_LOAD(c->order);
        if (o < QS_BIG_EMPTY_ORDER || o == order)
            continue;
        for (int i = 0; i < qs_nr_nodes; i++) {
            struct qs_node *n = &c->nodes[i];
            if (!qs_node_nr_empty(n) || !fifo_try_all(n))
                continue;
            struct qs_slab *go = NULL, *s;
            while ((s = fifo_oldest(n, now)) && s->order == o &&
                   qs_ms_age(now, s->empty_ms) >= age) {
                fifo_del(n, s);
                s->next = go;
                go = s;
                cut++;
            }
            qs_node_fifo_unlock(n);
            if (go) {
                size_t bytes = 0; /* with bytes: back to the OS, not warm */
                qs_node_release_list(c, NULL, go, &bytes);
            }
        }
    }
    qs_page_sweep_warm_orders(QS_BIG_EMPTY_ORDER, order, age, now);
    if (cut)
        __atomic_fetch_add(&big_cuts, cut, __ATOMIC_RELAXED);
}

/* CYCLING (above), every home's lock held.  A rate of 32 MiB/s, cut each time,
 * would cost 8,192 page faults a second, a tenth of a CPU at the VMs'
 * 13 us each. */
#define QS_CUT_SET 0x80000000u /* n->cut_ms: a cut was made */
static uint64_t cut_rate = (uint64_t)32 << 20; /* bytes a second; a unit test lowers it */
uint64_t *const qs_node_cut_rate = &cut_rate;
static unsigned long fifo_appended(const struct qs_node *n) /* every home's lock held */
{
    unsigned long a = 0;
    for (int h = 0; h < QS_FIFO_HOMES; h++)
        a += n->fifo[h].appended;
    return a;
}

static bool fifo_cycling(const struct qs_node *n, uint64_t now, unsigned order)
{
    if (!(n->cut_ms & QS_CUT_SET))
        return false;
    uint64_t since = qs_ms_age(now, n->cut_ms), back = fifo_appended(n) - n->cut_mark;
    return since < QS_CUT_HOLD_MS && back && 2 * back >= n->cut_nr &&
           back * qs_slab_bytes(order) * 1000 >= QS_LOAD(cut_rate) * (since ? since : 1);
}

/* The oldest slab of each FIFO in turn back to the OS while the FIFOs
 * (*fifo bytes) and the warm slots (warm) keep more than cap; *fifo
 * follows; bytes the OS took.  With `spare` (the retention cap's walk; the
 * cached-memory cap's cuts any), the cycling FIFOs are passed over; a
 * cut of a FIFO that nothing was appended to since its last one adds to
 * that run of cuts.  qs_global held; the FIFOs' locks tried. */
static size_t fifo_cut(size_t cap, size_t *fifo, size_t warm, bool spare)
{
    size_t back = 0;
    uint64_t now = qs_os_now_ms();
    for (bool took = true; took && *fifo + warm > cap;) {
        took = false;
        for (qslab_cache *c = qs_caches; c && *fifo + warm > cap; c = c->next)
            for (int i = 0; i < qs_nr_nodes && *fifo + warm > cap; i++) {
                struct qs_node *n = &c->nodes[i];
                if (!qs_node_nr_empty(n) || !fifo_try_all(n))
                    continue;
                struct qs_slab *s = fifo_oldest(n, now);
                if (s && spare && fifo_cycling(n, now, s->order))
                    s = NULL;
                if (s) {
                    unsigned long appended = fifo_appended(n);
                    fifo_del(n, s);
                    bool run = appended == n->cut_mark && (n->cut_ms & QS_CUT_SET);
                    n->cut_nr = run ? n->cut_nr + 1 : 1;
                    n->cut_mark = appended;
                    n->cut_ms = QS_CUT_SET | ((uint32_t)now & QS_MS_MASK);
                }
                qs_node_fifo_unlock(n);
                if (s) {
                    size_t sb = qs_slab_bytes(s->order);
                    s->next = NULL;
                    qs_node_release_list(c, NULL, s, &back);
                    *fifo = *fifo > sb ? *fifo - sb : 0;
                    took = true;
                }
            }
    }
    return back;
}

static void node_reclaim(int node, unsigned order)
{
    size_t cap = qs_page_retain_cap(), step = cap / 8 > QS_RECLAIM_STEP ? cap / 8 : QS_RECLAIM_STEP;
    bool walk = __atomic_add_fetch(&cold_since, qs_slab_bytes(order), __ATOMIC_RELAXED) >= step;
    bool reuse = node < qs_nr_nodes && QS_LOAD(fifo_hint[node][order]);
    if ((!walk && !reuse) || !qs_lock_try(&qs_global))
        return;
    if (reuse)
        reuse_one(node, order);
    if (walk) {
        QS_STORE(cold_since, 0);
        big_cut(order);
    }
    size_t warm = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED), fifo;
    if (!walk || (fifo = fifo_sum()) + warm <= cap) {
        qs_lock_release(&qs_global);
        return;
    }
    __atomic_fetch_add(&reclaims, 1, __ATOMIC_RELAXED);
    fifo_cut(cap, &fifo, warm, true); /* then the oldest of each FIFO in turn, back to the OS */
    qs_lock_release(&qs_global);
}

/* THE CACHED-MEMORY CAP's walk (page.c keeps its state; docs/design.md,
 * "The cached-memory cap"): what the FIFOs and the warm slots keep,
 * summed exactly, goes back down to seven eighths of the cap (the oldest
 * slab of each FIFO in turn, then the warm slots, biggest first) whenever
 * it is over that, so that the next walk comes once an eighth of the cap
 * has been kept again rather than at every keep of a program that runs
 * near its cap.  Called after a keep (qs_page_cached_check: held + kept
 * over the cap) and when the cap is set.  Locks as node_reclaim's: the
 * caller may hold a queue lock, a node lock or SLOB's, so qs_global and
 * the node locks are only tried (a busy qs_global skips the walk: `kept`
 * stays, and the next keep tries again; a busy node is passed over this
 * time).  kept is zeroed before the sum: a keep whose add the store
 * erases appended its slabs before its add (fifo_append, under its home's
 * lock) and so before the sum reads the homes' counts, give or take the
 * reordering of relaxed accesses on other CPUs, which only makes the
 * figure an estimate that the next walk corrects.  held and the counters
 * are written under qs_global, by one walk at a time. */
static void cached_walk(void)
{
    size_t cap = qs_cached_empty_max(); /* the share of the cap kept empty (page.h) */
    if (!cap || !qs_lock_try(&qs_global))
        return;
    __atomic_store_n(&qs_cached.kept, 0, __ATOMIC_RELAXED);
    QS_STORE(qs_cached.walks, qs_cached.walks + 1);
    size_t low = cap - cap / 8, fifo = fifo_sum(),
           warm = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED), back = 0;
    if (fifo + warm > low) {
        back = fifo_cut(low, &fifo, warm, false);
        if (fifo + warm > low)
            back += qs_page_warm_cut(low > fifo ? low - fifo : 0);
        warm = __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED);
        QS_STORE(qs_cached.cuts, qs_cached.cuts + 1);
        QS_STORE(qs_cached.cut_bytes, qs_cached.cut_bytes + back);
    }
    QS_STORE(qs_cached.held, fifo + warm);
    qs_lock_release(&qs_global);
}

#ifndef QS_PURGE_TICK_MS /* -D for stress builds */
#define QS_PURGE_TICK_MS 250
#endif
static int purger_state; /* 0 not started, 1 running, -1 disabled */
/* A look at the mobile caches (cooperative defragmentation) every second */
#define QS_DEFRAG_TICKS (1000 / QS_PURGE_TICK_MS > 0 ? 1000 / QS_PURGE_TICK_MS : 1)

static void *purger_main(void *arg)
{
    qs_os_thread_name("qslab-purger");
    qs_pressure_open(); /* its source of pressure events (pressure.c) */
    for (unsigned ticks = 1;; ticks++) {
        qs_pressure_wait(QS_PURGE_TICK_MS); /* a pressure event meanwhile: a trim at once */
        qs_front_hooks.tick(false); /* front/registry.c qs_front_tick */
        qs_pressure_tick(); /* near the cgroup's memory limit: a trim */
        if (ticks % QS_DEFRAG_TICKS == 0) /* the mobile caches much emptier than in use */
            if (qs_api_hooks.defrag)
                qs_api_hooks.defrag(false); /* api/defrag.c qs_defrag_tick */
    }
    return arg;
}

/* Core's part of the purger's tick and of malloc_trim (the tick is the
 * front layer's: front/registry.c qs_front_tick, which holds qs_global over
 * every cache, calls this for each after the cache's queues, and
 * qs_node_sweep_end once qs_global is released): give back the empty slabs
 * of every node of c, by the policy at `now` (all == false, the purger) or
 * all of them (malloc_trim).  The slabs are detached under the node locks
 * and given back after: those to go back to the OS are pushed on *release
 * (for qs_node_sweep_end), those the policy took by the limit before their
 * decay are kept warm here (as in qs_node_release_list); bytes kept warm.
 * qs_global held (c is alive), no other lock. */
size_t qs_node_sweep_cache(qslab_cache *c, bool all, uint64_t now, struct qs_slab **release)
{
    size_t bytes = 0;
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        struct qs_slab *mine = NULL;
        if (!qs_node_nr_empty(n))
            continue;
        qs_node_fifo_lock(n);
        if (all) {
            mine = fifo_detach_all(n);
        } else {
            fifo_policy_all(c, n, &mine, now);
        }
        qs_node_fifo_unlock(n);
        /* the sweeper owns no queue: orphan counters; a slab the
         * policy took by the limit before its decay stays warm (as in
         * qs_node_release_list) */
        struct qs_slab *warm = NULL;
        while (mine) {
            struct qs_slab *next = mine->next;
            if (unlikely(fifo_keep(c, mine))) { /* c is alive: qs_global */
                mine = next;
                continue;
            }
            qs_stat(c, NULL, QS_FREE_SLAB, 1);
            qs_stat(c, NULL, QS_FREE_OBJS, mine->objects);
            if (!all && qs_ms_age(now, mine->empty_ms) < QS_LOAD(c->empty_decay_ms)) {
                mine->next = warm;
                warm = mine;
            } else {
                mine->next = *release;
                *release = mine;
            }
            mine = next;
        }
        if (warm)
            bytes += qs_page_keep_empties(warm);
    }
    return bytes;
}

/* The end of a sweep, qs_global released: the slabs qs_node_sweep_cache
 * pushed on `release` go back to the OS, then the destroyed caches' slabs
 * kept warm (page.c); bytes given back. */
size_t qs_node_sweep_end(struct qs_slab *release, bool all)
{
    size_t bytes = qs_page_free_slabs(release);
    bytes += qs_page_sweep_warm(all); /* destroyed caches' slabs kept warm (page.c) */
    return bytes;
}

/* Start the purger once empty slabs are kept, or once slabs hold more than
 * QS_PURGER_AT bytes (page.c: a heap that size will want its empties given
 * back one day, maybe from a thread that then only sleeps).  The wish is
 * recorded here (qs_purger_wanted) and acted on only where pthread_create
 * is known to be safe: the allocation slow path, thread exit once qs_global
 * is released, qslab_trim and shrink.  Never from a free: glibc frees a dead
 * thread's TLS vector while it holds its thread-stack lock (pthread_join),
 * and pthread_create from there waits for that lock forever.  glibc never
 * allocates under that lock.  Never under a qslab lock either
 * (pthread_create may allocate). */
int qs_purger_wanted;

void qs_node_purger_start(void)
{
    int st = __atomic_load_n(&purger_state, __ATOMIC_RELAXED);
    if (likely(st != 0))
        return;
    int next = purge_on ? 1 : -1;
    if (!__atomic_compare_exchange_n(&purger_state, &st, next, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (next == 1 && qs_os_thread_start(purger_main, NULL) != 0)
        __atomic_store_n(&purger_state, 0, __ATOMIC_RELAXED); /* try again later */
}

void qs_node_purger_want(void)
{
    if (likely(__atomic_load_n(&purger_state, __ATOMIC_RELAXED) != 0))
        return;
    __atomic_store_n(&qs_purger_wanted, 1, __ATOMIC_RELAXED);
}

void qs_node_purger_start_wanted(void)
{
    if (__atomic_exchange_n(&qs_purger_wanted, 0, __ATOMIC_RELAXED))
        qs_node_purger_start();
}

void qs_purger_kick(void)
{
    if (qs_self.state == 2)
        return; /* an exiting thread holding qs_global: its exit destructor acts */
    qs_node_purger_start_wanted();
}

void qs_node_purger_forked(void)
{
    /* no store when there is nothing to forget: a child that only execs
     * then takes no copy-on-write fault on this page */
    if (__atomic_load_n(&purger_state, __ATOMIC_RELAXED) != 0)
        __atomic_store_n(&purger_state, 0, __ATOMIC_RELAXED);
}

void qs_node_put_empty(qslab_cache *c, struct qs_queue *q, struct qs_node *n, struct qs_slab *list)
{
    struct qs_slab *release = NULL;
    bool kept = qs_node_put_empty_locked(c, n, list, &release);
    qs_node_release_list(c, q, release, NULL);
    if (kept)
        qs_node_purger_want();
}

struct qs_slab *qs_node_take(qslab_cache *c, struct qs_queue *q, struct qs_node *n, unsigned want)
{
    struct qs_slab *out = NULL, *s;
    unsigned got = 0, h = fifo_here();
    /* partial slabs first (read without the lock: one put there meanwhile
     * waits for the next take), then the FIFO's, a home at a time */
    if (QS_LOAD(n->list.nr_partial)) {
        qs_lock_acquire(&n->lock);
        while (got < want && (s = n->list.partial)) {
            qs_list_del(&n->list, s);
            got += qs_slab_hand_to(s, &q->list, &out);
        }
        qs_lock_release(&n->lock);
    }
    for (unsigned i = 0; i < QS_FIFO_HOMES && got < want; i++) {
        struct qs_fifo *f = &n->fifo[(h + i) % QS_FIFO_HOMES];
        if (!QS_LOAD(f->nr))
            continue;
        qs_lock_acquire(&f->lock);
        while (got < want && (s = f->tail)) {
            fifo_del(n, s);
            got += qs_slab_hand_to(s, &q->list, &out);
        }
        qs_lock_release(&f->lock);
    }
    return out;
}

size_t qs_node_shrink(qslab_cache *c, struct qs_queue *q, struct qs_node *n)
{
    size_t bytes = 0;
    struct qs_slab *list = qs_node_fifo_detach(n);
    qs_node_release_list(c, q, list, &bytes);
    return bytes;
}

struct qs_slab *qs_node_take_empty(struct qs_node *n)
{
    return fifo_take_newest(n, fifo_here(), QS_NR_ORDERS, NULL);
}

/* One object from node `node`'s own list (qslab_cache_alloc_node for a node
 * other than the caller's): the slab stays node-owned. */
void *qs_node_alloc(qslab_cache *c, struct qs_queue *q, int node)
{
    struct qs_node *n = &c->nodes[node];
    void *obj = NULL;
    bool fresh = false; /* obj born now from zero memory: calloc need not clear it */
    unsigned h = fifo_here();
    qs_lock_acquire(&n->lock);
    struct qs_slab *s = n->list.partial;
    if (!s && (s = fifo_take_newest(n, h, QS_NR_ORDERS, NULL))) {
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    if (!s) {
        qs_lock_release(&n->lock);
        s = qs_slab_new(c, q, node, true); /* its one born object taken below */
        if (!s)
            return NULL;
        fresh = qs_slab_born_zero(c, s);
        qs_lock_acquire(&n->lock);
        qs_slab_set_owner(s, &n->list);
        qs_list_add(&n->list, s, QS_SLAB_PARTIAL);
    }
    /* s is on n's partial list: it has a free object, or can grow one (we
     * hold the lock); NULL only from a corrupt free list, whose slab is now
     * full and out of use (core/slab.c qs_slab_take_one): another slab then */
    fresh |= !s->freelist && qs_slab_born_zero(c, s);
    obj = qs_slab_take_one(c, q, s);
    bool lost = !obj;
    /* a debug cache checks the object (under the lock: its validation
     * walks slabs under it too); one that fails is kept out of use,
     * counted as allocated (debug/slot.c), and another is taken */
    bool quarantined = obj && unlikely(c->debug) && !qs_debug_hooks.alloc_locked(c, s, obj);
    if (!s->freelist && !qs_slab_growable(c, s)) {
        qs_list_del(&n->list, s);
        qs_list_add(&n->list, s, QS_SLAB_FULL);
    }
    if (obj) {
        qs_stat_locked(q, n, QS_NEV_ALLOC_SLOW, 1);
        qs_stat_locked(q, n, QS_NEV_NODE_ALLOC, 1);
    }
    qs_lock_release(&n->lock);
    if (quarantined || lost) /* each time one slab fewer to take from */
        return qs_node_alloc(c, q, node);
    qs_self.last_word = fresh ? QS_FRESH_WORD(c->secret) : 0;
    return obj;
}
