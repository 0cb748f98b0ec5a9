/*
 * observe/tune.h - the tunables table (tune.c): defaults, derived values,
 * QSLAB_TUNE applied to a new cache.
 */
#ifndef QSLAB_TUNE_H
#define QSLAB_TUNE_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

/* ---- tune.c ---- */
void qs_tune_defaults(qslab_cache *c);
void qs_tune_derive(qslab_cache *c);
void qs_tune_apply_env(qslab_cache *c);
void qs_tune_env_check(void);  /* start-up: QSLAB_TUNE names that name no kmalloc class */
void qs_tune_env_unused(void); /* at exit */
/* qslab_tune, qslab_tune_get (qslab.h), after start-up (their entry
 * points, which start the library up: api/entry.c) */
int qs_tune(const char *cache, const char *attr, const char *value);
int qs_tune_get(const char *cache, const char *attr, unsigned long *out);

#pragma GCC visibility pop

#endif /* QSLAB_TUNE_H */
