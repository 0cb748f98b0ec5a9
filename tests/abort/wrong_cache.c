/*
 * Freeing an object to a cache it does not belong to, with the default fatal
 * handler: one line naming the error, the address and both caches, SIGABRT.
 */
#include <qslab.h>

#include "../testutil.h"

static void other_cache(void *arg)
{
    char s[32];
    qslab_cache *a = qslab_cache_create("t-abort-wc-a", 64, 0, 0, NULL);
    qslab_cache *b = qslab_cache_create("t-abort-wc-b", 64, 0, 0, NULL);
    void *p = qslab_cache_alloc(a);
    void *keep = qslab_cache_alloc(b);
    (void)keep;
    tu_child_expect(tu_addr(s, p));
    tu_child_expect("t-abort-wc-a");
    tu_child_expect("t-abort-wc-b");
    qslab_cache_free(b, p);
}

static void kmalloc_to_cache(void *arg)
{
    char s[32];
    qslab_cache *a = qslab_cache_create("t-abort-wc-k", 96, 0, 0, NULL);
    void *p = qslab_malloc(96);
    tu_child_expect(tu_addr(s, p));
    tu_child_expect("kmalloc-96");
    tu_child_expect("t-abort-wc-k");
    qslab_cache_free(a, p);
}

int main(void)
{
    tu_expect_abort("object of one cache freed to another", other_cache, NULL, "belongs to cache");
    tu_expect_abort("kmalloc object freed to a cache", kmalloc_to_cache, NULL, "belongs to cache");
    return tu_done();
}
