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

#pragma GCC visibility pop

#endif /* QSLAB_TUNE_H */
