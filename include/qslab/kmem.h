/*
 * Linux-style names over the qslab API, so that kernel-style code builds in
 * user space.  Header only; every function is a static inline wrapper.
 * GFP flags are accepted and ignored except __GFP_ZERO.
 */
#ifndef QSLAB_KMEM_H
#define QSLAB_KMEM_H

#include <qslab.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned int gfp_t;
#define GFP_KERNEL 0x0u
#define GFP_ATOMIC 0x1u
#define GFP_NOWAIT 0x2u
#define __GFP_ZERO 0x100u
#define NUMA_NO_NODE QSLAB_NUMA_NO_NODE

#define SLAB_HWCACHE_ALIGN QSLAB_HWCACHE_ALIGN
#define SLAB_RED_ZONE      QSLAB_RED_ZONE
#define SLAB_POISON        QSLAB_POISON
#define SLAB_STORE_USER    QSLAB_STORE_USER
#define SLAB_CONSISTENCY_CHECKS QSLAB_CONSISTENCY_CHECKS
#define SLAB_TRACE         QSLAB_TRACE

struct kmem_cache;
/* struct kmem_cache is qslab_cache under another name. */
#define kmem_cache qslab_cache

static inline qslab_cache *kmem_cache_create(const char *name, size_t size, size_t align,
                                             unsigned long flags, void (*ctor)(void *))
{
    return qslab_cache_create(name, size, align, flags, ctor);
}
static inline void kmem_cache_destroy(qslab_cache *c)
{
    if (c)
        (void)qslab_cache_destroy(c);
}
static inline void *kmem_cache_alloc(qslab_cache *c, gfp_t flags)
{
    void *p = qslab_cache_alloc(c);
    if (p && (flags & __GFP_ZERO))
        memset(p, 0, qslab_cache_object_size(c));
    return p;
}
static inline void *kmem_cache_zalloc(qslab_cache *c, gfp_t flags)
{
    return kmem_cache_alloc(c, flags | __GFP_ZERO);
}
static inline void *kmem_cache_alloc_node(qslab_cache *c, gfp_t flags, int node)
{
    void *p = qslab_cache_alloc_node(c, node);
    if (p && (flags & __GFP_ZERO))
        memset(p, 0, qslab_cache_object_size(c));
    return p;
}
static inline void kmem_cache_free(qslab_cache *c, void *obj)
{
    qslab_cache_free(c, obj);
}
static inline int kmem_cache_shrink(qslab_cache *c)
{
    (void)qslab_cache_shrink(c);
    return 0;
}
/*
 * Movable objects (the "slab defrag" series' kmem_cache_setup_defrag, with
 * qslab's callbacks: qslab_cache_set_mobility in qslab.h, where the rules
 * are stated in full).  In short: kmem_cache_shrink then hands `isolate`
 * the addresses of the objects that may be live in the cache's sparsest
 * slabs; it keeps (moves to the front, counts) those it will move,
 * recognising its objects by address without trusting their bytes.
 * `migrate(c, old, new, arg)` then copies each into a new object of a
 * fuller slab and repoints every reference, under whatever lock keeps the
 * owner's other threads from freeing old meanwhile, and returns 0: qslab
 * frees old (left in its constructed state in a constructor cache).  Any
 * other return declines, and qslab frees new.  The callbacks run in the
 * shrinking thread or qslab's purger thread, with no qslab lock held, and
 * must not shrink, destroy or set up mobility on the same cache.
 */
static inline int kmem_cache_setup_mobility(qslab_cache *c, qslab_isolate_fn isolate,
                                            qslab_migrate_fn migrate, void *arg)
{
    return qslab_cache_set_mobility(c, isolate, migrate, arg);
}
static inline void *kmalloc(size_t size, gfp_t flags)
{
    return (flags & __GFP_ZERO) ? qslab_calloc(1, size) : qslab_malloc(size);
}
static inline void *kzalloc(size_t size, gfp_t flags)
{
    return kmalloc(size, flags | __GFP_ZERO);
}
static inline void *kmalloc_node(size_t size, gfp_t flags, int node)
{
    void *p = qslab_malloc_node(size, node);
    if (p && (flags & __GFP_ZERO))
        memset(p, 0, size);
    return p;
}
static inline void *kzalloc_node(size_t size, gfp_t flags, int node)
{
    return kmalloc_node(size, flags | __GFP_ZERO, node);
}
static inline void *kcalloc(size_t n, size_t size, gfp_t flags)
{
    (void)flags;
    return qslab_calloc(n, size);
}
static inline void *kmalloc_array(size_t n, size_t size, gfp_t flags)
{
    if (size && n > (size_t)-1 / size)
        return NULL;
    return kmalloc(n * size, flags);
}
static inline void *krealloc(const void *p, size_t size, gfp_t flags)
{
    (void)flags;
    return qslab_realloc((void *)p, size);
}
static inline void kfree(const void *p)
{
    qslab_free((void *)p);
}
static inline size_t ksize(const void *p)
{
    return qslab_usable_size(p);
}

#ifdef __cplusplus
}
#endif
#endif /* QSLAB_KMEM_H */
