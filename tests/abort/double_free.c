/*
 * Double frees with the default fatal handler: the process prints one line
 * naming the error, the address and the cache, and dies of SIGABRT.
 */
#include <qslab.h>

#include "../testutil.h"

static void ctor(void *obj)
{
    memset(obj, 0x33, 40);
}

static void immediate(void *arg)
{
    char s[32];
    qslab_cache *c = qslab_cache_create("t-abort-df", 40, 0, 0, arg ? ctor : NULL);
    void *p = qslab_cache_alloc(c);
    tu_child_expect(tu_addr(s, p));
    tu_child_expect("t-abort-df");
    qslab_cache_free(c, p);
    qslab_cache_free(c, p);
}

static void delayed(void *arg)
{
    char s[32];
    qslab_cache *c = qslab_cache_create("t-abort-df2", 40, 0, 0, arg ? ctor : NULL);
    void *a = qslab_cache_alloc(c), *b = qslab_cache_alloc(c), *d = qslab_cache_alloc(c);
    tu_child_expect(tu_addr(s, a));
    tu_child_expect("t-abort-df2");
    qslab_cache_free(c, a);
    qslab_cache_free(c, b);
    qslab_cache_free(c, d);
    qslab_cache_free(c, a);
    /* caught before a is handed out again */
    for (int i = 0; i < 4; i++)
        qslab_cache_alloc(c);
}

static void kmalloc_twice(void *arg)
{
    char s[32];
    void *p = qslab_malloc(180); /* kmalloc-192 */
    tu_child_expect(tu_addr(s, p));
    tu_child_expect("kmalloc-192");
    qslab_free(p);
    qslab_free(p);
}

int main(void)
{
    tu_expect_abort("immediate double free", immediate, NULL, "double free");
    tu_expect_abort("delayed double free", delayed, NULL, "double free");
    tu_expect_abort("immediate double free, ctor cache", immediate, (void *)1, "double free");
    tu_expect_abort("delayed double free, ctor cache", delayed, (void *)1, "double free");
    tu_expect_abort("qslab_free twice", kmalloc_twice, NULL, "double free");
    return tu_done();
}
