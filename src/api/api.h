/*
 * api/api.h - what the entry points' files (cache.c, kmalloc.c) share:
 * cache set-up (the layers below reach it through core/hooks.h's
 * qs_api_hooks.cache_setup), bad-free reports, kmalloc's start-up.
 */
#ifndef QSLAB_API_H
#define QSLAB_API_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- cache.c ---- */
bool qs_cache_setup(qslab_cache *c, const char *name, size_t size, size_t align, unsigned long flags,
                    void (*ctor)(void *), bool is_kmalloc);
void qs_bad_free(qslab_cache *expected, const void *p);

/* ---- kmalloc.c ---- */
void qs_kmalloc_init(void);

#pragma GCC visibility pop

#endif /* QSLAB_API_H */
