/*
 * api/api.h - what the entry points' files (cache.c, kmalloc.c, entry.c,
 * the drop-in) share: start-up (qs_init), cache set-up (the layers below
 * reach it through core/hooks.h's qs_api_hooks.cache_setup), bad-free
 * reports, kmalloc's start-up.
 */
#ifndef QSLAB_API_H
#define QSLAB_API_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* START-UP runs on first use: a program's first call into qslab may be
 * any entry point, and the malloc drop-in's first malloc may come before
 * qslab's constructor.  qs_init_slow (api/cache.c) sets up every layer,
 * the tables of core/hooks.h first, so it is the API layer's; and so are
 * its triggers, qs_init at the entry points that may be a first call and
 * need it (api/cache.c; api/kmalloc.c, where qs_kmalloc_slow takes the
 * first allocation; api/entry.c, the entry points whose work lies below;
 * the drop-in's mallinfo).  What they call in the layers below may count
 * on start-up having run.  The trigger cannot be a hook of core/hooks.h:
 * qs_init_slow fills those in, and a pointer set by a constructor would
 * still be NULL for a malloc before it.  Nothing below the API layer
 * calls it. */
void qs_init_slow(void);
static inline void qs_init(void)
{
    if (unlikely(!__atomic_load_n(&qs_initialized, __ATOMIC_ACQUIRE)))
        qs_init_slow();
}

/* ---- cache.c ---- */
/* id: the cache's (one qs_cache_ids_reserve kept), or -1 for a free one */
bool qs_cache_setup(qslab_cache *c, const char *name, size_t size, size_t align, unsigned long flags,
                    void (*ctor)(void *), bool is_kmalloc, int id);
void qs_cache_ids_reserve(unsigned n);
void qs_bad_free(qslab_cache *expected, const void *p);
void qs_bad_pointer(qslab_cache *expected, const void *p, const char *what); /* as `what` of p */

/* qslab_cache_shrink's work without a defragmentation pass */
size_t qs_cache_shrink_all(qslab_cache *c);

/* ---- defrag.c ---- */
size_t qs_defrag_shrink(qslab_cache *c); /* qslab_cache_shrink of a mobile cache */
size_t qs_defrag_tick(bool pressure);    /* the purger's: qs_api_hooks.defrag */
void qs_defrag_forked(void);             /* fork's child (fork.c) */

/* ---- kmalloc.c ---- */
void qs_kmalloc_init(void);
/* Class i's cache, set up on the first call (NULL, errno ENOMEM: no
 * memory for it); every class's (a tunable set on every cache) */
qslab_cache *qs_kmalloc_cache(unsigned i);
void qs_kmalloc_make_all(void);
/* fork's prepare (true) and parent and child (false): the lock that
 * makes classes (it comes before qs_global) */
void qs_kmalloc_fork(bool lock);

/* ---- fork.c ---- */
void qs_fork_init(void); /* start-up's last step: pthread_atfork's handlers */

#pragma GCC visibility pop

#endif /* QSLAB_API_H */
