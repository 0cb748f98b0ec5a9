/*
 * api/api.h - what the entry points' files (cache.c, kmalloc.c) give the
 * layers below: cache set-up, bad-free reports, the live caches by id.
 */
#ifndef QSLAB_API_H
#define QSLAB_API_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- cache.c ---- */
bool qs_cache_setup(qslab_cache *c, const char *name, size_t size, size_t align, unsigned long flags,
                    void (*ctor)(void *), bool is_kmalloc);
bool qs_cache_setup_debug(qslab_cache *c, const char *name, size_t size, size_t align,
                          unsigned long flags, void (*ctor)(void *), bool is_kmalloc, int debug);
void qs_bad_free(qslab_cache *expected, const void *p);
extern qslab_cache *qs_cache_by_id[QS_MAX_CACHES]; /* live caches by id (qs_global) */

void qs_cache_unlist(qslab_cache *c); /* off qs_caches (qs_global held) */

/* ---- kmalloc.c ---- */
void qs_kmalloc_init(void);

#pragma GCC visibility pop

#endif /* QSLAB_API_H */
