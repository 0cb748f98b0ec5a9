/*
 * api/zero.h - blocks of size zero (zero.c): a pointer of their own into a
 * range that faults on any access.
 */
#ifndef QSLAB_API_ZERO_H
#define QSLAB_API_ZERO_H

#include "core/internal.h"

#pragma GCC visibility push(hidden)

#define QS_ZERO_GRAIN 16 /* blocks are this far apart (malloc's alignment) */
extern char *qs_zero_base; /* NULL until the first zero-size block */
bool qs_zero_in(const void *p);                       /* in the range? (a block or not) */
void *qs_zero_alloc(void);                            /* NULL: none left (or no range) */
bool qs_zero_live(const void *p, const char *what);   /* p in the range: a live block? else reported */
void qs_zero_free(void *p, const char *what);         /* p in the range: freed, or reported */
unsigned long qs_zero_live_count(void);               /* blocks live now */
void *qs_zero_block(uintptr_t a);                     /* the block holding a, or NULL (faults) */
void qs_zero_fork(bool before);                       /* fork.c: the lock around fork */

#pragma GCC visibility pop

#endif /* QSLAB_API_ZERO_H */
