/*
 * caches.c - the state about the caches that every layer shares, defined
 * here, in the lowest layer that uses it, so that any layer may reference
 * it (declared in core/internal.h):
 *   qs_global          the global lock (its place among the locks:
 *                      internal.h, LOCKS)
 *   qs_caches, qs_caches_tail, qs_cache_by_id
 *                      the cache list in creation order and the live caches
 *                      by id, under qs_global: linked and unlinked by the
 *                      API layer's cache set-up and destroy (api/cache.c;
 *                      SLOB's arena is taken off the list again:
 *                      front/slob/slob.c), read by every layer's walks
 *   qs_kmalloc_caches  the kmalloc classes' caches, static (set up at
 *                      start-up by api/kmalloc.c qs_kmalloc_init)
 *   qs_initialized     start-up has run: stored once, with release, by
 *                      qs_init_slow (api/cache.c), read by qs_init
 *   qs_self            the calling thread's owner state (initial-exec
 *                      TLS): its queues by cache id for the fast paths,
 *                      every one "no queue" until owner/owner.c makes the
 *                      thread an owner; the last word a slow allocation
 *                      saw, for calloc
 * Only data lives here, and the one look-up every layer makes (a cache by
 * its name): what is done with the caches lives in the layers that do it.
 */
#include "core/internal.h"

#include <string.h>

qs_lock qs_global;
qslab_cache *qs_caches;
qslab_cache **qs_caches_tail = &qs_caches;
QS_BSS_APART qslab_cache *qs_cache_by_id[QS_MAX_CACHES];
QS_BSS_APART qslab_cache qs_kmalloc_caches[QS_KMALLOC_CLASSES];
volatile int qs_initialized;
__thread struct qs_owner qs_self __attribute__((tls_model("initial-exec"))) = {
    .fixed = {[0 ... QS_FIXED_SLOTS - 1] = &qs_no_queue},
    .cpu = -1,
};

const char *qs_kmalloc_serving(const char *name)
{
    size_t size = 0;
    const char *d = name + 8;
    if (strncmp(name, "kmalloc-", 8) != 0 || !*d)
        return NULL;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || size > QS_KMALLOC_MAX)
            return NULL;
        size = size * 10 + (size_t)(*d - '0');
    }
    for (unsigned k = 0; size && k < QS_KMALLOC_CLASSES; k++)
        if (qs_kmalloc_caches[k].obj_size >= size)
            return qs_kmalloc_caches[k].name;
    return NULL;
}

qslab_cache *qs_cache_find(const char *name)
{
    qs_lock_acquire(&qs_global);
    qslab_cache *c = qs_caches;
    while (c && strcmp(c->name, name) != 0)
        c = c->next;
    qs_lock_release(&qs_global);
    return c;
}
