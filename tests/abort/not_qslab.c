/*
 * Freeing memory qslab never handed out, with the default fatal handler: one
 * line naming the error and the address, then SIGABRT.
 */
#include <qslab.h>

#include "../testutil.h"

static void stack_to_cache(void *arg)
{
    char s[32];
    long on_stack[8] = {0};
    qslab_cache *c = qslab_cache_create("t-abort-nq", 64, 0, 0, NULL);
    void *keep = qslab_cache_alloc(c); /* the cache has a slab */
    (void)keep;
    tu_child_expect(tu_addr(s, &on_stack[2]));
    qslab_cache_free(c, &on_stack[2]);
}

static void stack_to_free(void *arg)
{
    char s[32];
    long on_stack[8] = {0};
    tu_child_expect(tu_addr(s, &on_stack[2]));
    qslab_free(&on_stack[2]);
}

static void libc_malloc(void *arg)
{
    char s[32];
    void *m = calloc(1, 100);
    tu_child_expect(tu_addr(s, m));
    qslab_free(m);
}

int main(void)
{
    tu_expect_abort("stack address to qslab_cache_free", stack_to_cache, NULL, "not allocated by qslab");
    tu_expect_abort("stack address to qslab_free", stack_to_free, NULL, "not allocated by qslab");
    tu_expect_abort("glibc malloc pointer to qslab_free", libc_malloc, NULL, "not allocated by qslab");
    return tu_done();
}
