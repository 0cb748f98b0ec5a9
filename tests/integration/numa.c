/*
 * Nodes: qslab_cache_alloc_node / qslab_malloc_node place objects on the node
 * asked for, bad nodes are refused, node objects can be freed from any
 * thread, a plain allocation comes from the caller's node, and fake nodes
 * split the CPUs between them.  Runs once as started, then re-executes
 * itself with QSLAB_FAKE_NUMA=1, 2 and 4.
 */
#define _GNU_SOURCE /* CPU affinity */
#include <pthread.h>
#include <qslab.h>
#include <sched.h>

#include "../testutil.h"

#define PER_NODE 500
#define MAXN 8

static qslab_cache *c;
static void *objs[MAXN][PER_NODE];
static int nnodes;

static void *free_node_objs(void *arg)
{
    void **v = arg;
    for (int i = 0; i < PER_NODE; i++)
        qslab_cache_free(c, v[i]);
    return NULL;
}

/* Allocate on node n from a thread, so the caller's node varies. */
static void *alloc_from_thread(void *arg)
{
    int bad = 0;
    for (int n = 0; n < nnodes; n++)
        for (int i = 0; i < 100; i++) {
            void *p = qslab_cache_alloc_node(c, n);
            if (!p || qslab_object_node(p) != n)
                bad++;
            qslab_cache_free(c, p);
        }
    return (void *)(intptr_t)bad;
}

/* Pinned to one CPU before its first qslab call: report the node, and check
 * that plain allocations come from it. */
static void *pinned(void *arg)
{
    int cpu = (int)(intptr_t)arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
        return (void *)(intptr_t)-2;
    int node = qslab_current_node();
    int misplaced = 0;
    void *p[64];
    for (int i = 0; i < 64; i++) {
        p[i] = qslab_cache_alloc(c);
        misplaced += !p[i] || qslab_object_node(p[i]) != node;
    }
    for (int i = 0; i < 64; i++)
        qslab_cache_free(c, p[i]);
    CHECKF(misplaced == 0, "thread on CPU %d (node %d): %d of 64 plain allocations from another node", cpu, node,
           misplaced);
    return (void *)(intptr_t)node;
}

/* With every configured CPU allowed and at least as many CPUs as nodes, the
 * threads pinned to each CPU see every node. */
static void check_cpu_split(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    int ncpu = CPU_COUNT(&allowed);
    int seen[MAXN] = {0};
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < 1024; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        pthread_t t;
        void *r;
        pthread_create(&t, NULL, pinned, (void *)(intptr_t)cpu);
        pthread_join(t, &r);
        int node = (int)(intptr_t)r;
        if (node == -2)
            continue;
        CHECKF(node >= 0 && node < nnodes, "thread on CPU %d: node %d of %d", cpu, node, nnodes);
        if (node >= 0 && node < MAXN)
            seen[node] = 1;
    }
    if (ncpu != conf || ncpu < nnodes)
        return; /* restricted CPU set: some nodes may legitimately have no allowed CPU */
    for (int n = 0; n < nnodes; n++)
        CHECKF(seen[n], "no CPU of the %d allowed is on node %d of %d", ncpu, n, nnodes);
}

/* Constructed objects keep their state on every node's paths. */
#define CSIZE 40
static void ctor(void *obj)
{
    memset(obj, 0xc5, CSIZE);
}
static int constructed(const void *obj)
{
    const unsigned char *b = obj;
    for (int k = 0; k < CSIZE; k++)
        if (b[k] != 0xc5)
            return 0;
    return 1;
}

static qslab_cache *cc;
static void *free_ctor_objs(void *arg)
{
    void **v = arg;
    for (int i = 0; i < PER_NODE; i++)
        qslab_cache_free(cc, v[i]);
    return NULL;
}

static void check_ctor_nodes(void)
{
    cc = qslab_cache_create("t-numa-ctor", CSIZE, 0, 0, ctor);
    CHECK(cc != NULL);
    if (!cc)
        return;
    for (int round = 0; round < 4; round++) {
        for (int n = 0; n < nnodes; n++) {
            int bad = 0;
            for (int i = 0; i < PER_NODE; i++) {
                objs[n][i] = qslab_cache_alloc_node(cc, n);
                if (!objs[n][i] || qslab_object_node(objs[n][i]) != n || !constructed(objs[n][i]))
                    bad++;
            }
            CHECKF(bad == 0, "round %d node %d: %d objects misplaced or not in constructed state", round, n, bad);
        }
        if (round % 2 == 0) { /* here */
            for (int n = 0; n < nnodes; n++)
                for (int i = 0; i < PER_NODE; i++)
                    qslab_cache_free(cc, objs[n][i]);
        } else { /* from other threads */
            pthread_t t[MAXN];
            for (int n = 0; n < nnodes; n++)
                pthread_create(&t[n], NULL, free_ctor_objs, objs[n]);
            for (int n = 0; n < nnodes; n++)
                pthread_join(t[n], NULL);
        }
        void *p = qslab_cache_alloc(cc);
        CHECK(p && constructed(p));
        qslab_cache_free(cc, p);
    }
    CHECK(qslab_cache_destroy(cc) == 0);
}

static void check_nodes(int expect_nodes)
{
    nnodes = qslab_num_nodes();
    if (expect_nodes)
        CHECKF(nnodes == expect_nodes, "qslab_num_nodes() = %d, expected %d", nnodes, expect_nodes);
    CHECK(nnodes >= 1);
    if (nnodes < 1 || nnodes > MAXN)
        return;
    int cur = qslab_current_node();
    CHECKF(cur >= 0 && cur < nnodes, "current node %d of %d", cur, nnodes);

    c = qslab_cache_create("t-numa", 88, 0, 0, NULL);
    CHECK(c != NULL);
    if (!c)
        return;

    /* Out of range. */
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, nnodes) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, 1000) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(qslab_cache_alloc_node(c, -2) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(qslab_malloc_node(100, nnodes) == NULL && errno == EINVAL);

    /* Any node. */
    void *any = qslab_cache_alloc_node(c, QSLAB_NUMA_NO_NODE);
    CHECK(any != NULL);
    int an = qslab_object_node(any);
    CHECKF(an >= 0 && an < nnodes, "object node %d", an);
    qslab_cache_free(c, any);

    /* Each node, many objects (several slabs). */
    for (int n = 0; n < nnodes; n++) {
        int bad = 0;
        for (int i = 0; i < PER_NODE; i++) {
            objs[n][i] = qslab_cache_alloc_node(c, n);
            if (!objs[n][i] || qslab_object_node(objs[n][i]) != n)
                bad++;
            else
                memset(objs[n][i], n + 1, 88);
        }
        CHECKF(bad == 0, "%d of %d objects asked on node %d are elsewhere (or NULL)", bad, PER_NODE, n);
    }
    for (int n = 0; n < nnodes; n++) {
        int bad = 0;
        for (int i = 0; i < PER_NODE; i++) {
            const unsigned char *b = objs[n][i];
            for (int k = 0; b && k < 88; k++)
                if (b[k] != n + 1) {
                    bad++;
                    break;
                }
        }
        CHECKF(bad == 0, "%d node-%d objects overwritten", bad, n);
    }
    /* Free every node's objects from another thread, all at once. */
    pthread_t t[MAXN];
    for (int n = 0; n < nnodes; n++)
        pthread_create(&t[n], NULL, free_node_objs, objs[n]);
    for (int n = 0; n < nnodes; n++)
        pthread_join(t[n], NULL);
    /* And node allocations made from other threads. */
    for (int n = 0; n < nnodes; n++)
        pthread_create(&t[n], NULL, alloc_from_thread, NULL);
    for (int n = 0; n < nnodes; n++) {
        void *bad;
        pthread_join(t[n], &bad);
        CHECKF(bad == NULL, "%ld node allocations from a thread misplaced", (long)(intptr_t)bad);
    }

    /* Plain allocations come from the caller's node (read before and after:
     * this thread is not pinned; with per-CPU queues the node is the CPU's,
     * and a thread that moved there and back between the reads took its
     * object on the other node: a few tries, a wrong node fails them all) */
    int before = -1, after = -1, on = -9;
    for (int tries = 0; tries < 5 && on != before && on != after; tries++) {
        before = qslab_current_node();
        void *mine = qslab_cache_alloc(c);
        after = qslab_current_node();
        on = mine ? qslab_object_node(mine) : -9;
        qslab_cache_free(c, mine);
    }
    CHECKF(on == before || on == after, "plain allocation on node %d, caller on %d/%d", on, before, after);
    check_cpu_split();
    check_ctor_nodes();

    /* kmalloc on a node, small and big classes. */
    static const size_t sizes[] = {8, 100, 5000, 300000};
    for (int n = 0; n < nnodes; n++)
        for (size_t i = 0; i < 4; i++) {
            void *p = qslab_malloc_node(sizes[i], n);
            CHECKF(p && qslab_object_node(p) == n, "qslab_malloc_node(%zu, %d) on node %d", sizes[i], n,
                   p ? qslab_object_node(p) : -9);
            CHECK(!p || qslab_usable_size(p) >= sizes[i]);
            qslab_free(p);
        }

    struct qslab_cache_stats st;
    CHECK(qslab_cache_stats(c, &st) == 0 && st.active_objs == 0);
    CHECK(qslab_cache_destroy(c) == 0);

    /* Not a qslab object. */
    long on_stack = 0;
    CHECK(qslab_object_node(&on_stack) == -1);
    void *m = malloc(32);
    CHECK(qslab_object_node(m) == -1);
    free(m);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        check_nodes(atoi(argv[1])); /* "any": 0, no expectation */
        return tu_done();
    }
    check_nodes(0); /* whatever this machine has */
    int r = tu_reexec("1", "QSLAB_FAKE_NUMA", "1");
    CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=1: status %d", r);
    r = tu_reexec("2", "QSLAB_FAKE_NUMA", "2");
    CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=2: status %d", r);
    r = tu_reexec("4", "QSLAB_FAKE_NUMA", "4");
    CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=4: status %d", r);
    /* Values that make no sense are ignored: the machine's nodes are used. */
    r = tu_reexec("any", "QSLAB_FAKE_NUMA", "0");
    CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=0: status %d", r);
    r = tu_reexec("any", "QSLAB_FAKE_NUMA", "two");
    CHECKF(r == 0, "child with QSLAB_FAKE_NUMA=two: status %d", r);
    return tu_done();
}
