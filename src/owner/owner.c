/*
 * owner.c - who owns a queue.
 *
 * Today the owner is a thread: struct qs_owner lives in initial-exec TLS and
 * holds an array of queue pointers indexed by cache id, so the fast path
 * finds its queue with two TLS loads and one indexed load.  Everything else
 * in qslab sees only "the caller's queue" (qs_queue_of / qs_queue_attach),
 * so a later per-CPU owner (restartable sequences) changes this file and
 * owner.h's qs_queue_of, not the slow paths.
 *
 * States: 0 new, 1 active (has or may make queues), 2 exited (its exit
 * destructor ran; it gets no queue again).
 *
 * Lifetime: a queue is made on a thread's first use of a cache and linked on
 * the cache's queue list.  When the thread exits, the front layer's retire
 * (core/hooks.h qs_front_hooks.retire) gives its objects back and hands its
 * slabs to the node lists, and the queue goes to the cache's pool for the
 * next new thread.  Queues are freed only when the
 * cache is destroyed, so a stale pointer to a queue (a sender that read a
 * slab's owner just before the handover) still finds a valid inbox.
 *
 * Locking: the slot array is written by its thread under qs_global (growth)
 * and by qslab_cache_destroy under qs_global (clearing a slot); the thread
 * reads its own slots without a lock.
 *
 * A queue's own slots (its array of objects, q->slots) are made and grown
 * here too (qs_queue_slots_grow), for the front ends that fill them.
 */
#include "core/internal.h"
#include "core/hooks.h"
#include "owner/percpu.h"
#include "owner/owner.h"

#include <string.h>

/* ---- owner kinds ---- */
int qs_owner_kind = QS_OWNER_THREAD;
const char *qs_owner_why = "per-thread queues (not initialised yet)";
long qs_rseq_off;
struct qs_queue ***qs_cpu_tables;
struct qs_owner **qs_cpu_owners;
int qs_nr_cpu_ids;
bool qs_percpu_takeable;
/* qs_no_queue for every cache id in use (qs_owner_cache_added); BSS: the
 * pages of ids never used are never touched */
static QS_BSS_APART struct qs_queue *qs_no_ids[QS_PERCPU_IDS];
static unsigned ids_in_use; /* 1 + the highest cache id made so far (qs_global) */
static char why_buf[160];

static const char *why_set(const char *a, const char *b)
{
    struct qs_buf buf = {why_buf, 0, sizeof(why_buf) - 1};
    qs_buf_str(&buf, a);
    qs_buf_str(&buf, b);
    why_buf[buf.len < sizeof(why_buf) ? buf.len : sizeof(why_buf) - 1] = 0;
    return why_buf;
}

/* Per-CPU queues need rseq (the kernel's, through glibc's registration or
 * our own), an rseq port of the fast paths (x86-64) and the per-CPU tables;
 * whatever is missing is the reason the thread owner is in force. */
static QS_STARTUP bool percpu_setup(const char **why)
{
    if (!QS_HAVE_PERCPU) {
        *why = "no rseq port of the fast paths for this architecture";
        return false;
    }
    struct qs_os_rseq_info info;
    if (qs_os_rseq_init(&info) != 0) {
        *why = info.why;
        return false;
    }
    int n = qs_os_cpu_possible();
    struct qs_queue ***tables = qs_meta_alloc((size_t)(n + 2) * sizeof(*tables));
    struct qs_owner **owners = qs_meta_alloc((size_t)n * sizeof(*owners));
    if (!tables || !owners) {
        *why = "no memory for the per-CPU tables";
        return false;
    }
    for (int i = 0; i < n + 2; i++)
        tables[i] = qs_no_ids;
    qs_rseq_off = info.offset;
    qs_nr_cpu_ids = n;
    qs_cpu_owners = owners;
    qs_cpu_tables = tables + 2;
    /* the purger takes queues from idle CPUs (queue.c qs_percpu_take) */
    qs_percpu_takeable = qs_os_membarrier_rseq_register() == 0;
    *why = info.why;
    return true;
}

/* Start-up (qs_init_slow, before any allocation): QSLAB_OWNER=cpu|thread,
 * default cpu where it works. */
QS_STARTUP void qs_owner_kind_init(void)
{
    const char *v = qs_os_getenv("QSLAB_OWNER"), *why = NULL;
    bool want_cpu = true;
    if (v && !__builtin_strcmp(v, "thread")) {
        want_cpu = false;
    } else if (v && __builtin_strcmp(v, "cpu") != 0 && v[0]) {
        qs_warn("QSLAB_OWNER=%s: not an owner kind (cpu or thread); using the default", v);
    }
    if (!want_cpu) {
        qs_owner_why = "per-thread queues: QSLAB_OWNER=thread";
        return;
    }
    if (percpu_setup(&why)) {
        qs_owner_why = why_set(qs_percpu_takeable ? "per-CPU queues: " :
                               "per-CPU queues (membarrier refused: idle CPUs keep their queues): ",
                               why);
        __atomic_store_n(&qs_owner_kind, QS_OWNER_CPU, __ATOMIC_RELEASE);
    } else {
        qs_owner_why = why_set("per-thread queues: per-CPU ones need rseq: ", why);
    }
}

/* The owner of CPU `cpu`, made on its first use (qs_global held): the CPU's
 * node, and its table of queues for the fast paths. */
static struct qs_owner *cpu_owner(int cpu)
{
    struct qs_owner *o = qs_cpu_owners[cpu];
    if (o)
        return o;
    o = qs_meta_alloc(sizeof(*o));
    struct qs_queue **ids = qs_meta_alloc(QS_PERCPU_IDS * sizeof(*ids));
    if (!o || !ids) {
        /* the other back: under lasting ENOMEM every allocation on this
         * CPU comes here again (and is served from the node lists) */
        qs_meta_free(o, sizeof(*o));
        qs_meta_free(ids, QS_PERCPU_IDS * sizeof(*ids));
        return NULL;
    }
    for (unsigned i = 0; i < QS_FIXED_SLOTS; i++)
        o->fixed[i] = &qs_no_queue;
    for (unsigned i = 0; i < ids_in_use; i++) /* the ids in use; later ones: cache_added */
        ids[i] = &qs_no_queue;
    o->ids = ids;
    o->cpu = cpu;
    o->tid = -1;
    o->node = qs_node_of_cpu(cpu);
    o->state = 1;
    qs_observe_hooks.begin(); /* an owner table changes (observe/observe.h) */
    __atomic_store_n(&qs_cpu_owners[cpu], o, __ATOMIC_RELEASE);
    __atomic_store_n(&qs_cpu_tables[cpu], ids, __ATOMIC_RELEASE);
    qs_observe_hooks.end();
    return o;
}

/* A cache got id `id` (qs_global held): its entry in every CPU's table
 * (and in the table of CPUs without an owner) is qs_no_queue until a
 * CPU's queue is attached.  The fast paths index the tables with no bound
 * check: every id they see is one of these. */
void qs_owner_cache_added(unsigned id)
{
    if (id >= ids_in_use)
        ids_in_use = id + 1;
    if (!qs_percpu())
        return;
    __atomic_store_n(&qs_no_ids[id], &qs_no_queue, __ATOMIC_RELEASE);
    for (int cpu = 0; cpu < qs_nr_cpu_ids; cpu++) {
        struct qs_owner *o = qs_cpu_owners[cpu];
        if (o && (id >= o->cap || !o->slots[id])) /* a made id's queue is detached at destroy */
            __atomic_store_n(&o->ids[id], &qs_no_queue, __ATOMIC_RELEASE);
    }
}

/* The calling thread's CPU (registering its rseq area first if qslab
 * registers them), or -1: it has none and cannot use per-CPU queues. */
int qs_owner_cpu(void)
{
    int cpu = qs_os_rseq_cpu(qs_rseq_off);
    if (cpu < 0 && qs_os_rseq_register_thread() == 0)
        cpu = qs_os_rseq_cpu(qs_rseq_off);
    return cpu >= 0 && cpu < qs_nr_cpu_ids ? cpu : -1;
}

static void owner_exit(void *arg);

static unsigned long thread_owners; /* qs_owner_init to owner_exit; atomic adds */

unsigned long qs_owners_sharing(void)
{
    if (qs_percpu())
        return (unsigned long)qs_nr_cpu_ids; /* the possible CPUs (percpu_setup) */
    unsigned long n = __atomic_load_n(&thread_owners, __ATOMIC_RELAXED);
    return n ? n : 1;
}

void qs_owners_forked(void)
{
    __atomic_store_n(&thread_owners, qs_self.state == 1 ? 1 : 0, __ATOMIC_RELAXED);
}

void qs_owner_init(void)
{
    /* the destructor runs at thread exit while the key's value is non-NULL */
    static int registered;
    if (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE)) {
        qs_lock_acquire(&qs_global);
        if (!registered) {
            qs_os_thread_exit_init(owner_exit);
            __atomic_store_n(&registered, 1, __ATOMIC_RELEASE);
        }
        qs_lock_release(&qs_global);
    }
    struct qs_owner *o = &qs_self;
    o->node = qs_node_of_cpu(qs_os_current_cpu());
    o->tid = qs_os_gettid();
    o->state = 1;
    __atomic_fetch_add(&thread_owners, 1, __ATOMIC_RELAXED);
    qs_os_thread_watch(o);
}

static bool slots_grow(struct qs_owner *o, unsigned id)
{
    unsigned cap = o->cap ? o->cap : 32;
    while (cap <= id)
        cap *= 2;
    struct qs_queue **slots = qs_meta_alloc(cap * sizeof(*slots));
    if (!slots)
        return false;
    if (o->slots)
        memcpy(slots, o->slots, o->cap * sizeof(*slots));
    struct qs_queue **old = o->slots;
    unsigned old_cap = o->cap;
    __atomic_store_n(&o->slots, slots, __ATOMIC_RELEASE);
    __atomic_store_n(&o->cap, cap, __ATOMIC_RELEASE);
    /* a CPU's slot array is read by every thread running there, without a
     * lock: the old one stays (it is small and grows by doubling) */
    if (o->cpu < 0)
        qs_meta_free(old, old_cap * sizeof(*old));
    return true;
}

/* Room in q's slots for n objects more: the array grows (doubling from 32)
 * on demand, so a queue costs what it holds, not its hiwater.  The new
 * slots are installed plainly (a thread's queue, or one nobody else sees
 * yet) or, `in_section`, by a section on the queue's CPU that copies the
 * entries and swaps the pointer (percpu.c): fast pushes stay below limit
 * <= the old capacity meanwhile, so the copy holds them all, and a section
 * that had loaded the old slots was restarted when ours ran there, so they
 * can go at once.  False on ENOMEM, or if the caller left q->cpu. */
bool qs_queue_slots_grow(struct qs_queue *q, unsigned n, bool in_section)
{
    unsigned nr = QS_TOP_NR(QS_LOAD(q->top));
    if (nr + n <= q->cap)
        return true;
    unsigned cap = q->cap ? q->cap * 2 : 32;
    while (cap < nr + n)
        cap *= 2;
    void **mem = qs_meta_alloc(((size_t)cap + 1) * sizeof(void *));
    if (!mem)
        return false;
    mem[0] = NULL; /* the sentinel slots[-1] */
    void **old = q->slots;
    unsigned old_cap = q->cap;
    if (!in_section) {
        if (nr)
            __builtin_memcpy(mem + 1, old, nr * sizeof(void *));
        q->slots = mem + 1;
    } else if (qs_percpu_swap_slots(q, mem + 1) != 0) { /* migrated */
        qs_meta_free(mem, ((size_t)cap + 1) * sizeof(void *));
        return false;
    }
    QS_STORE(q->cap, cap); /* read racily by the statistics (stats.c) */
    qs_queue_limit_set(q);
    if (old)
        qs_meta_free(old - 1, ((size_t)old_cap + 1) * sizeof(void *));
    return true;
}

bool qs_queue_reserve(struct qs_queue *q, unsigned n)
{
    return qs_queue_slots_grow(q, n, false);
}

void qs_queue_free_slots(struct qs_queue *q)
{
    if (q->slots)
        qs_meta_free(q->slots - 1, ((size_t)q->cap + 1) * sizeof(void *));
    q->slots = NULL;
    QS_STORE(q->cap, 0);
    QS_STORE(q->limit, 0);
}

struct qs_queue *qs_queue_attach(qslab_cache *c) /* c exists: start-up has run */
{
    struct qs_owner *o = &qs_self;
    struct qs_queue *q = NULL;
    int cpu = -1;
    if (qs_percpu()) {
        /* the CPU's queue: made once, kept for good (threads come and go;
         * a thread without rseq works without a queue, like an exited one) */
        if ((cpu = qs_owner_cpu()) < 0)
            return NULL;
        qs_lock_acquire(&qs_global);
        if (!(o = cpu_owner(cpu)))
            goto out;
    } else {
        /* Past its exit destructor a thread still frees (and may allocate)
         * from later destructors and libc's own clean-up; a queue made now
         * would never be retired, so such a thread works without one (node
         * lists, orphan counters). */
        if (o->state == 2)
            return NULL;
        if (o->state != 1)
            qs_owner_init();
        qs_lock_acquire(&qs_global);
    }
    if (c->id >= o->cap && !slots_grow(o, c->id))
        goto out;
    if ((q = o->slots[c->id]))
        goto out;
    if ((q = c->pool)) {
        c->pool = q->pool_next;
        q->pool_next = NULL;
    } else {
        q = qs_meta_alloc(sizeof(*q));
        if (!q)
            goto out;
        q->cache = c;
        qs_observe_hooks.begin(); /* the cache's queue list changes (observe/observe.h) */
        q->all_next = c->queues;
        c->queues = q;
        qs_observe_hooks.end();
    }
    q->owner = o;
    q->node = o->node;
    q->cpu = cpu;
    q->stamp = QS_STAMP(c->secret);
    q->link_off = c->link_off;
    QS_STORE(q->own, &q->list); /* its own slabs (a front end's queue_knobs may say otherwise) */
    /* inert until its front end sets the knobs the fast paths read: nothing
     * pushed (limit 0), nothing parked, no open batch, so they miss and call
     * the slow paths; a front end without `queue_knobs` (SLUB's per-owner
     * state) leaves it so (front.h) */
    QS_STORE(q->hiwater, 0);
    QS_STORE(q->limit, 0);
    QS_STORE(q->park, 0);
    QS_STORE(q->fb_max, 0); /* set when a batch opens (remote.c) */
    if (!q->slots && !qs_queue_reserve(q, 1)) { /* a first few slots; they grow */
        q->owner = NULL;
        q->pool_next = c->pool;
        c->pool = q;
        q = NULL;
        goto out;
    }
    /* queues start with no grant (SLQB's of the owner budget, queue.c;
     * SLAB's arrays, front/slab/slab.c): the first misses ask for it */
    QS_STORE(q->grant, 0);
    QS_STORE(q->misses, 0);
    /* hiwater, limit, park (0 while a debug twin takes the allocations,
     * twin.c): the front end's */
    qs_front_hooks.attached(c, q);
    qs_lock_acquire(&q->inbox.lock);
    q->inbox.dead = 0;
    qs_lock_release(&q->inbox.lock);
    qs_owner_set_slot(o, c->id, q);
out:
    qs_lock_release(&qs_global);
    return q;
}

static void owner_exit(void *arg)
{
    struct qs_owner *o = &qs_self;
    o->state = 2; /* exiting: e.g. no purger start from under qs_global */
    __atomic_fetch_sub(&thread_owners, 1, __ATOMIC_RELAXED);
    qs_lock_acquire(&qs_global);
    qs_observe_hooks.begin(); /* the owner's queues retire (observe/observe.h) */
    for (unsigned i = 0; i < o->cap; i++) {
        struct qs_queue *q = o->slots[i];
        if (!q)
            continue;
        qslab_cache *c = q->cache;
        qs_front_hooks.retire(c, q); /* front/registry.c: the front end's, then SLQB's queue.c */
        q->owner = NULL;
        q->pool_next = c->pool;
        c->pool = q;
        qs_owner_set_slot(o, i, NULL);
    }
    struct qs_queue **slots = o->slots;
    unsigned cap = o->cap;
    __atomic_store_n(&o->cap, 0, __ATOMIC_RELEASE);
    o->slots = NULL;
    qs_observe_hooks.end();
    qs_lock_release(&qs_global);
    qs_meta_free(slots, cap * sizeof(*slots));
    /* the slabs this thread gave back are on the empty FIFOs: make sure the
     * purger runs even if nothing else ever touches them */
    qs_node_purger_start_wanted();
}

void qs_owner_detach_cache(qslab_cache *c)
{
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        if (q->owner) {
            qs_front_hooks.budget_drop(c, q); /* front/slqb/budget.c qs_queue_budget_drop */
            qs_owner_set_slot(q->owner, c->id, NULL);
        }
}

/* The node of the caller's queues (start-up has run) */
int qs_owner_current_node(void)
{
    if (qs_percpu()) { /* the node of the CPU (and so of the queue) it runs on */
        int cpu = qs_owner_cpu();
        return qs_node_of_cpu(cpu >= 0 ? cpu : qs_os_current_cpu());
    }
    if (qs_self.state != 1)
        qs_owner_init();
    return qs_self.node;
}

int qs_owner_node_now(void)
{
    if (!qs_percpu() && qs_self.state != 0)
        return qs_self.node;
    int cpu = qs_percpu() ? qs_os_rseq_cpu(qs_rseq_off) : -1;
    return qs_node_of_cpu(cpu >= 0 ? cpu : qs_os_current_cpu());
}

/* qslab_owner_info's figures (api/entry.c; start-up has run) */
void qs_owner_info(struct qslab_owner_info *info)
{
    info->kind = qs_percpu() ? QSLAB_OWNER_CPU : QSLAB_OWNER_THREAD;
    info->why = qs_owner_why;
    info->nr_cpu_ids = qs_percpu() ? qs_nr_cpu_ids : 0;
    info->rseq_aborts = qs_self.rseq_aborts;
}
