/* examples/object_cache.c - qslab's object-cache API, with a constructor.
 *
 * A server keeps its connections in a cache.  The constructor gives each
 * object the state that is costly to make and the same for every
 * connection (here a mutex and "no socket": fd -1) when qslab makes the
 * object; qslab_cache_alloc then hands objects out in the state they were
 * freed in, so the program puts each one back in that state before
 * qslab_cache_free, and no allocation repeats the set-up.  (The SLOB front
 * end, QSLAB_FRONT=slob, runs the constructor at every allocation instead.)
 *
 * Build it against an installed qslab:
 *     cc -std=c11 object_cache.c $(pkg-config --cflags --libs qslab)
 * `make examples` builds it against the build tree and through pkg-config
 * (examples/build-examples), and runs it.
 */
#include <qslab.h>
#include <pthread.h>
#include <stdio.h>

struct conn {
    pthread_mutex_t lock; /* made by the constructor, kept across free and alloc */
    int fd;               /* -1 while the connection is free */
    unsigned long served; /* requests served */
    char peer[64];
};

static unsigned long constructed; /* objects the constructor made */

static void conn_ctor(void *obj)
{
    struct conn *c = obj;
    pthread_mutex_init(&c->lock, NULL);
    c->fd = -1;
    c->served = 0;
    c->peer[0] = '\0';
    constructed++;
}

enum { CONNS = 1000, ROUNDS = 3 };

int main(void)
{
    qslab_cache *conns = qslab_cache_create("example_conn", sizeof(struct conn), 0,
                                            QSLAB_HWCACHE_ALIGN, conn_ctor);
    if (!conns) {
        perror("qslab_cache_create");
        return 1;
    }

    static struct conn *open[CONNS];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < CONNS; i++) {
            struct conn *c = qslab_cache_alloc(conns);
            if (!c) {
                perror("qslab_cache_alloc");
                return 1;
            }
            if (c->fd != -1) { /* every free object is in its constructed state */
                fprintf(stderr, "object_cache: an object came back with fd %d\n", c->fd);
                return 1;
            }
            pthread_mutex_lock(&c->lock);
            c->fd = 100 + i;
            c->served++;
            snprintf(c->peer, sizeof c->peer, "10.0.0.%d:%d", i % 250 + 1, 40000 + i);
            pthread_mutex_unlock(&c->lock);
            open[i] = c;
        }
        for (int i = 0; i < CONNS; i++) {
            open[i]->fd = -1; /* back to the constructed state, then free */
            qslab_cache_free(conns, open[i]);
        }
    }

    struct qslab_cache_stats st;
    if (qslab_cache_stats(conns, &st) != 0 || st.active_objs != 0) {
        fprintf(stderr, "object_cache: %lu objects still active after the frees\n",
                st.active_objs);
        return 1;
    }
    printf("%d allocations of %zu-byte objects from cache %s (front end %s); "
           "the constructor ran %lu times\n", CONNS * ROUNDS, qslab_cache_object_size(conns),
           qslab_cache_name(conns), qslab_cache_front(conns), constructed);
    if (constructed < CONNS) {
        fprintf(stderr, "object_cache: the constructor ran %lu times for %d live objects\n",
                constructed, CONNS);
        return 1;
    }
    if (qslab_cache_destroy(conns) != 0) {
        fprintf(stderr, "object_cache: qslab_cache_destroy failed\n");
        return 1;
    }
    return 0;
}
