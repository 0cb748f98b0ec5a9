/* A program using an installed qslab (tests/package/package_test.sh): a
 * cache, objects, the kmalloc-style calls, a clean destroy. */
#include <qslab.h>
#include <qslab/kmem.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct item { long id; char name[40]; };

static void *worker(void *arg)
{
    void *p = qslab_malloc(200);
    qslab_free(p);
    return arg;
}

int main(void)
{
    qslab_cache *c = qslab_cache_create("consumer_item", sizeof(struct item), 0,
                                        QSLAB_HWCACHE_ALIGN, NULL);
    if (!c) {
        perror("qslab_cache_create");
        return 1;
    }
    struct item *v[100];
    for (int i = 0; i < 100; i++) {
        v[i] = qslab_cache_alloc(c);
        if (!v[i])
            return 1;
        v[i]->id = i;
        snprintf(v[i]->name, sizeof v[i]->name, "item %d", i);
    }
    struct qslab_cache_stats st;
    if (qslab_cache_stats(c, &st) != 0 || st.active_objs != 100) {
        fprintf(stderr, "consumer: %lu objects active, want 100\n", st.active_objs);
        return 1;
    }
    for (int i = 0; i < 100; i++)
        qslab_cache_free(c, v[i]);
    if (qslab_cache_destroy(c) != 0) {
        fprintf(stderr, "consumer: qslab_cache_destroy failed\n");
        return 1;
    }

    char *s = kmalloc(100, GFP_KERNEL); /* qslab/kmem.h */
    s = qslab_realloc(s, 1000);
    strcpy(s, "hello");
    if (qslab_usable_size(s) < 1000)
        return 1;
    kfree(s);

    pthread_t t; /* Threads::Threads / -pthread reach the program */
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    printf("consumer: ok\n");
    return 0;
}
