/*
 * slob.c - the SLOB front end under threads: 16 threads (more than cores)
 * allocate from three caches pinned to SLOB and from kmalloc, hand half of
 * their objects to a neighbour through a ring to free there, and check every
 * object's contents before it goes; at the end every cache validates and
 * holds no object.  Under TSan this covers slob_lock's rules.
 */
#include <qslab.h>

#include "../testutil.h"
#include "../front.h"

#include <pthread.h>
#include <stdint.h>

#define NT 16
#define RING 256
enum { NC = 3 };
static const size_t size[NC] = {24, 136, 1000};
static qslab_cache *c[NC];
static int rounds;

struct ring {
    pthread_mutex_t m;
    void *slot[RING];
    int cache[RING];
    unsigned head, tail;
} rings[NT];

static void stamp(void *p, size_t n, uintptr_t key)
{
    for (size_t i = 0; i + 8 <= n; i += 8)
        *(uintptr_t *)((char *)p + i) = key ^ i;
}
static int stamped(const void *p, size_t n, uintptr_t key)
{
    for (size_t i = 0; i + 8 <= n; i += 8)
        if (*(const uintptr_t *)((const char *)p + i) != (key ^ i))
            return 0;
    return 1;
}

static void release(void *p, int ci)
{
    size_t n = ci < NC ? size[ci] : 72;
    if (!stamped(p, n, (uintptr_t)p))
        tu_fail("object %p (cache %d) overwritten", p, ci);
    if (ci < NC)
        qslab_cache_free(c[ci], p);
    else
        qslab_free(p);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    struct ring *out = &rings[(me + 1) % NT], *in = &rings[me];
    unsigned rnd = (unsigned)me * 7919u + 1;
    void *mine[64];
    int mc[64], nmine = 0;
    for (int r = 0; r < rounds; r++) {
        rnd = rnd * 1103515245u + 12345u;
        int ci = (int)((rnd >> 16) % (NC + 1));
        void *p = ci < NC ? qslab_cache_alloc(c[ci]) : qslab_malloc(72);
        if (!p) {
            tu_fail("allocation failed");
            continue;
        }
        stamp(p, ci < NC ? size[ci] : 72, (uintptr_t)p);
        if (rnd & 0x100000) { /* to the neighbour */
            pthread_mutex_lock(&out->m);
            if (out->head - out->tail < RING) {
                out->slot[out->head % RING] = p;
                out->cache[out->head % RING] = ci;
                out->head++;
                p = NULL;
            }
            pthread_mutex_unlock(&out->m);
        }
        if (p) {
            if (nmine == 64) {
                release(mine[0], mc[0]);
                mine[0] = mine[--nmine];
                mc[0] = mc[nmine];
            }
            mine[nmine] = p;
            mc[nmine++] = ci;
        }
        pthread_mutex_lock(&in->m);
        while (in->tail != in->head) {
            release(in->slot[in->tail % RING], in->cache[in->tail % RING]);
            in->tail++;
        }
        pthread_mutex_unlock(&in->m);
    }
    while (nmine--)
        release(mine[nmine], mc[nmine]);
    return NULL;
}

int main(void)
{
    rounds = TU_SCALE(40000, 8);
    const char *names[NC] = {"t-slobs-24", "t-slobs-136", "t-slobs-1000"};
    for (int i = 0; i < NC; i++) {
        c[i] = qslab_cache_create(names[i], size[i], 0, 0, NULL);
        if (tf_debug_skip("stress_slob", c[i]))
            return tu_done();
        CHECK(c[i] && qslab_tune(names[i], "front", "slob") == 0);
    }
    for (int i = 0; i < NT; i++)
        pthread_mutex_init(&rings[i].m, NULL);
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) /* what was posted after its owner stopped */
        while (rings[i].tail != rings[i].head) {
            release(rings[i].slot[rings[i].tail % RING], rings[i].cache[rings[i].tail % RING]);
            rings[i].tail++;
        }
    for (int i = 0; i < NC; i++) {
        struct qslab_cache_stats st;
        CHECK(qslab_cache_stats(c[i], &st) == 0);
        CHECKF(st.active_objs == 0 && st.alloc > 0, "%s: %lu live of %lu", names[i], st.active_objs, st.alloc);
        CHECKF(qslab_cache_validate(c[i]) == 0, "validate %s", names[i]);
        CHECK(qslab_cache_destroy(c[i]) == 0);
    }
    return tu_done();
}
