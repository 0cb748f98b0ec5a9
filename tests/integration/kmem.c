/*
 * <qslab/kmem.h>: kernel-style names over qslab build and behave.
 */
#include <qslab/kmem.h>

#include "../front.h"
#include "../testutil.h"

struct thing {
    int id;
    char tag[52];
    struct thing *next;
};

static int ctor_runs;
static void thing_ctor(void *p)
{
    struct thing *t = p;
    t->id = -1;
    strcpy(t->tag, "fresh");
    t->next = NULL;
    ctor_runs++;
}

static void test_caches(void)
{
    struct kmem_cache *cache = kmem_cache_create("t-kmem-thing", sizeof(struct thing), 0, SLAB_HWCACHE_ALIGN, NULL);
    CHECK(cache != NULL);
    if (!cache)
        return;
    struct thing *list = NULL;
    for (int i = 0; i < 100; i++) {
        struct thing *t = kmem_cache_alloc(cache, GFP_KERNEL);
        CHECK(t != NULL && (uintptr_t)t % 64 == 0);
        if (!t)
            continue;
        t->id = i;
        t->next = list;
        list = t;
    }
    struct thing *z = kmem_cache_zalloc(cache, GFP_KERNEL);
    CHECK(z && z->id == 0 && z->next == NULL && z->tag[0] == 0);
    memset(z, 0xff, sizeof *z);
    kmem_cache_free(cache, z);
    z = kmem_cache_alloc(cache, GFP_ATOMIC | __GFP_ZERO);
    CHECK(z && z->id == 0 && z->next == NULL);
    kmem_cache_free(cache, z);
    z = kmem_cache_alloc_node(cache, GFP_KERNEL, 0);
    CHECK(z != NULL);
    kmem_cache_free(cache, z);
    z = kmem_cache_alloc_node(cache, GFP_KERNEL, NUMA_NO_NODE);
    CHECK(z != NULL);
    kmem_cache_free(cache, z);

    int n = 0;
    while (list) {
        struct thing *next = list->next;
        n += list->id == 99 - n;
        kmem_cache_free(cache, list);
        list = next;
    }
    CHECK(n == 100);
    CHECK(kmem_cache_shrink(cache) == 0);
    kmem_cache_destroy(cache);
    CHECK(qslab_cache_find("t-kmem-thing") == NULL);
    kmem_cache_destroy(NULL); /* a no-op, as in the kernel */

    struct kmem_cache *cc = kmem_cache_create("t-kmem-ctor", sizeof(struct thing), 0, 0, thing_ctor);
    CHECK(cc != NULL);
    struct thing *t = kmem_cache_alloc(cc, GFP_KERNEL);
    CHECK(t && t->id == -1 && strcmp(t->tag, "fresh") == 0);
    CHECK(ctor_runs > 0);
    kmem_cache_free(cc, t);
    kmem_cache_destroy(cc);
}

static void test_kmalloc(void)
{
    char *p = kmalloc(120, GFP_KERNEL); /* kmalloc-128 */
    CHECK(p != NULL);
    if (tf_kmalloc_slob()) /* SLOB keeps the request's size, not the class's */
        CHECKF(tf_slob_usable_ok(ksize(p), 120), "slob: ksize %zu for 120", ksize(p));
    else
        CHECK(ksize(p) == 128);
    memset(p, 'x', ksize(p));
    kfree(p);
    kfree(NULL);

    /* kzalloc after a dirty free of the same class. */
    for (int i = 0; i < 10; i++) {
        char *d = kmalloc(500, GFP_KERNEL);
        memset(d, 0xab, 500);
        kfree(d);
        unsigned char *zz = kzalloc(500, GFP_KERNEL);
        int zero = zz != NULL;
        for (int k = 0; zz && k < 500; k++)
            zero &= zz[k] == 0;
        CHECK(zero);
        kfree(zz);
    }

    int *a = kcalloc(10, sizeof(int), GFP_KERNEL);
    CHECK(a && a[0] == 0 && a[9] == 0);
    kfree(a);
    CHECK(kmalloc_array(SIZE_MAX / 4, 8, GFP_KERNEL) == NULL);
    int *arr = kmalloc_array(16, sizeof(int), GFP_KERNEL);
    CHECK(arr != NULL && ksize(arr) >= 64);
    for (int i = 0; i < 16; i++)
        arr[i] = i;
    arr = krealloc(arr, 4000, GFP_KERNEL);
    CHECK(arr && arr[15] == 15 && ksize(arr) >= 4000);
    kfree(arr);

    void *n0 = kmalloc_node(256, GFP_KERNEL, 0);
    CHECK(n0 != NULL && qslab_object_node(n0) == 0);
    kfree(n0);
    unsigned char *nz = kzalloc_node(256, GFP_KERNEL, NUMA_NO_NODE);
    CHECK(nz && nz[0] == 0 && nz[255] == 0);
    kfree(nz);
}

int main(void)
{
    test_caches();
    test_kmalloc();
    return tu_done();
}
