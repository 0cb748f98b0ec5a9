/*
 * unit: homes.  The page layer's (core/page.c, HOMES): the slabs a CPU
 * makes lie in chunks of its home, never beside another home's, a home
 * moves on to another chunk when its own is full, and a home chunk given
 * back leaves no trace (its home takes a new one).  The FIFO's
 * (core/node.c, FIFO HOMES): an empty slab put on a node's FIFO from a
 * CPU is taken back by that CPU's home first, by another home only when
 * that one's list is empty, and the policy gives back the oldest slabs
 * of all the lists first, at the puts of a home past its share of the
 * limit.  Needs two CPUs of different homes on one node;
 * says so and passes otherwise.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <time.h>

enum { K = 70, ORDER = 4 }; /* 64 KiB slabs: 64 slots a chunk, so K spans two */

static struct qs_chunk *chunk(const struct qs_slab *s)
{
    return qs_chunk_of(s->mem);
}

static bool shares_chunk(struct qs_slab **a, int na, struct qs_slab **b, int nb)
{
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (chunk(a[i]) == chunk(b[j]))
                return true;
    return false;
}

static void take(int node, struct qs_slab **out, int n)
{
    for (int i = 0; i < n; i++)
        CHECK((out[i] = qs_page_alloc_slab(node, ORDER)) != NULL);
}

static void give_back(struct qs_slab **s, int n)
{
    struct qs_slab *list = NULL;
    for (int i = 0; i < n; i++) {
        s[i]->next = list;
        list = s[i];
    }
    qs_page_free_slabs(list);
}

static void page_homes(const int cpu[2], int node)
{
    static struct qs_slab *a[K], *b[K], *c[K];
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    take(node, a, K);
    CHECK(tu_pin_cpu(cpu[1]) == 0);
    take(node, b, K);
    CHECKF(!shares_chunk(a, K, b, K), "CPUs %d and %d got slabs in one chunk", cpu[0], cpu[1]);
    /* each home's K slabs fill its first chunk and go on in a second */
    int moved = 0;
    for (int i = 1; i < K; i++)
        moved += chunk(a[i]) != chunk(a[i - 1]);
    CHECKF(moved == 1, "CPU %d's %d slabs of order %d changed chunks %d times", cpu[0], K, ORDER,
           moved);
    /* CPU 0's chunks given back (all but the pool's spare unmapped): its
     * home takes another chunk, and CPU 1's stays its own */
    give_back(a, K);
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    take(node, c, K);
    CHECKF(!shares_chunk(c, K, b, K), "CPU %d's new slabs share a chunk with CPU %d's", cpu[0],
           cpu[1]);
    give_back(b, K);
    give_back(c, K);
}

static unsigned nr_on(const struct qs_node *n, unsigned h)
{
    unsigned k = 0;
    for (struct qs_slab *s = n->fifo[h].head; s; s = s->next) {
        CHECKF(s->home == h, "a slab of home %u on home %u's list", s->home, h);
        k++;
    }
    return k;
}

/* Empty slabs of c (no object born), made before any is put on the FIFO:
 * a slab made while the FIFO holds one of its order would be that one
 * (node.c, REUSE) */
static void make(qslab_cache *c, struct qs_node *n, struct qs_slab **made, int k)
{
    for (int i = 0; i < k; i++)
        CHECK((made[i] = qs_slab_new(c, NULL, n->id, false)) != NULL);
}

static struct qs_slab *put(qslab_cache *c, struct qs_node *n, struct qs_slab **made, int k)
{
    struct qs_slab *list = NULL;
    for (int i = 0; i < k; i++) {
        made[i]->next = list;
        list = made[i];
    }
    qs_node_put_empty(c, NULL, n, list);
    return made[0]; /* the newest: the last appended */
}

static void sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A cache of 256-byte objects with SLQB's FIFO, or NULL (debugging on:
 * its slabs take other paths) */
static qslab_cache *fifo_cache(const char *name)
{
    qslab_cache *c = qslab_cache_create(name, 256, 0, 0, NULL);
    CHECK(c != NULL);
    if (tf_debug_skip("homes", c)) {
        qslab_cache_destroy(c);
        return NULL;
    }
    tf_pin_slqb(name);
    return c;
}

static void fifo_homes(const int cpu[2], int node)
{
    qslab_cache *c = fifo_cache("t-homes");
    if (!c)
        return;
    struct qs_node *n = &c->nodes[node];
    unsigned h0 = (unsigned)cpu[0] % QS_FIFO_HOMES, h1 = (unsigned)cpu[1] % QS_FIFO_HOMES;
    struct qs_slab *s0[4], *s1[4], *s2[1];
    make(c, n, s0, 4);
    make(c, n, s1, 4);
    make(c, n, s2, 1);
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    struct qs_slab *new0 = put(c, n, s0, 4);
    sleep_ms(30); /* the clock the FIFO stamps with is coarse (a few ms) */
    CHECK(tu_pin_cpu(cpu[1]) == 0);
    struct qs_slab *new1 = put(c, n, s1, 4);
    CHECKF(nr_on(n, h0) == 4 && nr_on(n, h1) == 4,
           "homes %u and %u hold %u and %u slabs, not 4 each", h0, h1, nr_on(n, h0), nr_on(n, h1));
    CHECKF(qs_node_fifo_peek(n) == new1, "CPU %d would take %p, not its newest %p", cpu[1],
           (void *)qs_node_fifo_peek(n), (void *)new1);
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    CHECKF(qs_node_fifo_peek(n) == new0, "CPU %d would take %p, not its newest %p", cpu[0],
           (void *)qs_node_fifo_peek(n), (void *)new0);

    /* the policy: at most 6, the oldest first, whichever home they are of
     * (home h0's, put 30 ms before h1's); one more put from CPU 1 */
    CHECK(qslab_tune("t-homes", "empty_limit", "6") == 0);
    CHECK(tu_pin_cpu(cpu[1]) == 0);
    put(c, n, s2, 1);
    CHECKF(nr_on(n, h0) == 1 && nr_on(n, h1) == 5,
           "after a limit of 6: homes %u and %u hold %u and %u slabs (the oldest, home %u's, go "
           "first: "
           "1 and 5)",
           h0, h1, nr_on(n, h0), nr_on(n, h1), h0);
    CHECKF(n->fifo[h0].head == new0, "home %u kept %p, not its newest %p", h0,
           (void *)n->fifo[h0].head, (void *)new0);

    /* takes: CPU 0 its own slab, then, its list empty, CPU 1's newest */
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    struct qs_slab *t = qs_node_take_empty(n);
    CHECKF(t == new0, "CPU %d took %p, not its own %p", cpu[0], (void *)t, (void *)new0);
    struct qs_slab *u = qs_node_take_empty(n);
    CHECKF(u == s2[0], "CPU %d, its list empty, took %p, not the newest of home %u, %p", cpu[0],
           (void *)u, h1, (void *)s2[0]);
    t->next = u;
    u->next = NULL;
    qs_node_put_empty(c, NULL, n, t); /* both now on home h0's list */
    CHECKF(nr_on(n, h0) == 2 && nr_on(n, h1) == 4,
           "homes %u and %u hold %u and %u slabs, not 2 and 4", h0, h1, nr_on(n, h0), nr_on(n, h1));
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

/* The limit at a put (node.c, THE LIMIT AT A PUT): a home sums the others'
 * counts only once its own list passes its share (limit / QS_FIFO_HOMES);
 * then the whole FIFO goes back under the limit, oldest first */
static void fifo_limit_share(const int cpu[2], int node)
{
    qslab_cache *c = fifo_cache("t-homes-limit");
    if (!c)
        return;
    CHECK(qslab_tune("t-homes-limit", "empty_decay_ms", "600000") == 0);
    CHECK(qslab_tune("t-homes-limit", "empty_limit", "8") == 0); /* a share of 2 */
    struct qs_node *n = &c->nodes[node];
    unsigned h0 = (unsigned)cpu[0] % QS_FIFO_HOMES, h1 = (unsigned)cpu[1] % QS_FIFO_HOMES;
    struct qs_slab *a[7], *b[2], *d[1];
    make(c, n, a, 7);
    make(c, n, b, 2);
    make(c, n, d, 1);
    CHECK(tu_pin_cpu(cpu[0]) == 0);
    put(c, n, a, 7);
    CHECKF(nr_on(n, h0) == 7, "home %u holds %u slabs, not 7 (a limit of 8)", h0, nr_on(n, h0));
    sleep_ms(30); /* home h0's are the oldest */
    CHECK(tu_pin_cpu(cpu[1]) == 0);
    put(c, n, b, 2); /* home h1 at its share: no look at the others */
    CHECKF(nr_on(n, h0) == 7 && nr_on(n, h1) == 2,
           "homes %u and %u hold %u and %u slabs, not 7 and 2 (home %u at its share of the "
           "limit 8 leaves the others alone)",
           h0, h1, nr_on(n, h0), nr_on(n, h1), h1);
    put(c, n, d, 1); /* past its share: the whole FIFO to 8, the oldest first */
    CHECKF(nr_on(n, h0) == 5 && nr_on(n, h1) == 3,
           "homes %u and %u hold %u and %u slabs, not 5 and 3 (home %u past its share: the "
           "two oldest, home %u's, go back)",
           h0, h1, nr_on(n, h0), nr_on(n, h1), h1, h0);
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
}

int main(void)
{
    int cpu[2];
    if (tu_allowed_cpus(cpu) < 2) {
        fprintf(stderr, "homes: one CPU allowed: nothing to test\n");
        return tu_done();
    }
    int node = qs_node_of_cpu(cpu[0]);
    if (node != qs_node_of_cpu(cpu[1])) { /* QSLAB_FAKE_NUMA: the next CPU is another node's */
        fprintf(stderr, "homes: CPUs %d and %d are on different nodes: nothing to test\n", cpu[0],
                cpu[1]);
        return tu_done();
    }
    if (cpu[0] % QS_PAGE_HOMES != cpu[1] % QS_PAGE_HOMES)
        page_homes(cpu, node);
    if (cpu[0] % QS_FIFO_HOMES != cpu[1] % QS_FIFO_HOMES) {
        fifo_homes(cpu, node);
        fifo_limit_share(cpu, node);
    }
    return tu_done();
}
