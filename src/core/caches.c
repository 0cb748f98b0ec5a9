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
 *   qs_kmalloc_cache_of  the kmalloc classes' caches by class, each set
 *                      up on its first use (api/kmalloc.c qs_kmalloc_cache)
 *                      in qs_kmalloc_store, in the order they are made;
 *                      qs_kmalloc_unmade until then; qs_kmalloc_bytes
 *                      their object sizes (start-up)
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
#include "core/hooks.h"

#include <string.h>

qs_lock qs_global;
qslab_cache *qs_caches;
qslab_cache **qs_caches_tail = &qs_caches;
QS_BSS_APART qslab_cache *qs_cache_by_id[QS_MAX_CACHES];
QS_BSS_APART qslab_cache qs_kmalloc_store[QS_KMALLOC_CLASSES];
const qslab_cache qs_kmalloc_unmade;
qslab_cache *qs_kmalloc_cache_of[QS_KMALLOC_CLASSES] = {
    [0 ... QS_KMALLOC_CLASSES - 1] = (qslab_cache *)&qs_kmalloc_unmade};
uint32_t qs_kmalloc_bytes[QS_KMALLOC_CLASSES];
volatile int qs_initialized;
__thread struct qs_owner qs_self __attribute__((tls_model("initial-exec"))) = {
    .fixed = {[0 ... QS_FIXED_SLOTS - 1] = &qs_no_queue},
    .cpu = -1,
};

const char *qs_kmalloc_class_name(unsigned i, char *buf, size_t cap)
{
    struct qs_buf b = {buf, 0, cap};
    qs_buf_str(&b, "kmalloc-");
    qs_buf_u64(&b, qs_kmalloc_bytes[i]);
    buf[b.len < cap ? b.len : cap - 1] = '\0';
    return buf;
}

/* The digits after "kmalloc-" as a size (0: none, not all digits, or past
 * the largest class) */
static size_t kmalloc_name_bytes(const char *name, size_t len)
{
    if (len <= 8 || strncmp(name, "kmalloc-", 8) != 0)
        return 0;
    size_t size = 0;
    for (size_t k = 8; k < len; k++) {
        if (name[k] < '0' || name[k] > '9' || size > QS_KMALLOC_MAX)
            return 0;
        size = size * 10 + (size_t)(name[k] - '0');
    }
    return size <= QS_KMALLOC_MAX ? size : 0;
}

int qs_kmalloc_class_named(const char *name, size_t len)
{
    size_t size = kmalloc_name_bytes(name, len);
    if (len > 9 && name[8] == '0') /* "kmalloc-064" is no name */
        return -1;
    for (unsigned k = 0; size && k < QS_KMALLOC_CLASSES; k++)
        if (qs_kmalloc_bytes[k] == size)
            return (int)k;
    return -1;
}

bool qs_kmalloc_class_matches(const char *p, size_t len)
{
    if (!len || p[len - 1] != '*')
        return qs_kmalloc_class_named(p, len) >= 0;
    char name[QS_NAME_MAX];
    for (unsigned k = 0; k < QS_KMALLOC_CLASSES; k++)
        if (strncmp(qs_kmalloc_class_name(k, name, sizeof name), p, len - 1) == 0)
            return true;
    return false;
}

const char *qs_kmalloc_serving(const char *name, char *buf, size_t cap)
{
    size_t size = kmalloc_name_bytes(name, strlen(name));
    for (unsigned k = 0; size && k < QS_KMALLOC_CLASSES; k++)
        if (qs_kmalloc_bytes[k] >= size)
            return qs_kmalloc_class_name(k, buf, cap);
    return NULL;
}

qslab_cache *qs_cache_find(const char *name)
{
    qs_lock_acquire(&qs_global);
    qslab_cache *c = qs_caches;
    while (c && strcmp(c->name, name) != 0)
        c = c->next;
    qs_lock_release(&qs_global);
    if (!c && qs_api_hooks.kmalloc_make) { /* a class not made yet */
        int k = qs_kmalloc_class_named(name, strlen(name));
        if (k >= 0)
            c = qs_api_hooks.kmalloc_make((unsigned)k);
    }
    return c;
}
