/*
 * Freeing a pointer inside an object, with the default fatal handler: one
 * line naming the error, the address and the cache, then SIGABRT.
 */
#include <qslab.h>

#include "../testutil.h"

static void cache_interior(void *arg)
{
    char s[32];
    qslab_cache *c = qslab_cache_create("t-abort-ip", 64, 0, 0, NULL);
    char *p = qslab_cache_alloc(c);
    tu_child_expect(tu_addr(s, p + 8));
    tu_child_expect("t-abort-ip");
    qslab_cache_free(c, p + 8);
}

static void kmalloc_interior(void *arg)
{
    char s[32];
    char *p = qslab_malloc(1000); /* kmalloc-1024 */
    tu_child_expect(tu_addr(s, p + 8));
    tu_child_expect("kmalloc-1024");
    qslab_free(p + 8);
}

int main(void)
{
    tu_expect_abort("interior pointer to qslab_cache_free", cache_interior, NULL, "interior pointer");
    tu_expect_abort("interior pointer to qslab_free", kmalloc_interior, NULL, "interior pointer");
    return tu_done();
}
