/*
 * unit: cache ids run out cleanly.  Creating caches until none is left fails
 * with ENOMEM and leaves nothing behind (a SLAB cache's shared arrays
 * included, which creation made before it asked for an id); a destroyed
 * cache's id is taken again; the cache list keeps creation order through
 * unlinks anywhere in it.  Creating and destroying is O(1) in the number of
 * caches (65,536 of them took 206 s to create when the list append walked
 * the list): the whole test takes well under a second in the normal build.
 */
#include "../testutil.h"
#include "front/front.h"
#include "core/internal.h"
#include "api/api.h"

#include <stdio.h>

extern size_t *const qs_meta_mapped_bytes; /* meta.c */

static qslab_cache *made[QS_MAX_CACHES];

static qslab_cache *last_listed(void)
{
    qslab_cache *c = qs_caches;
    while (c && c->next)
        c = c->next;
    return c;
}

static size_t meta_mapped(void)
{
    return __atomic_load_n(qs_meta_mapped_bytes, __ATOMIC_RELAXED);
}

int main(void)
{
    char name[32];
    unsigned n = 0;
    errno = 0;
    for (; n < QS_MAX_CACHES; n++) {
        snprintf(name, sizeof name, "t-id-%u", n);
        if (!(made[n] = qslab_cache_create(name, 64, 0, 0, NULL)))
            break;
    }
    int err = errno;
    CHECKF(n > QS_MAX_CACHES - 256 && n < QS_MAX_CACHES, "%u caches made", n);
    CHECKF(err == ENOMEM, "errno %d when the ids ran out", err);
    CHECK(last_listed() == made[n - 1]);
    CHECK(qslab_cache_find("t-id-0") == made[0]);
    CHECK(qs_cache_by_id[made[n - 1]->id] == made[n - 1]);

    /* out of ids, a SLAB cache's creation gives its shared arrays back (it
     * made them before it asked for an id; they leaked until 2026-12-01) */
    int front = qs_front_default;
    qs_front_default = QS_FRONT_SLAB;
    size_t before = meta_mapped();
    unsigned failed = 0;
    for (unsigned i = 0; i < 2000; i++) {
        errno = 0;
        qslab_cache *c = qslab_cache_create("t-id-slab", 64, 0, 0, NULL);
        failed += c == NULL && errno == ENOMEM;
    }
    size_t grew = meta_mapped() - before;
    qs_front_default = front;
    CHECKF(failed == 2000, "%u of 2000 creations failed with ENOMEM", failed);
    /* leaked, 2000 x the nodes' arrays (8 x 60 pointers each, on 2 CPUs)
     * would be about 7.5 MiB */
    CHECKF(grew <= 64 * 1024, "metadata grew %zu bytes over 2000 failed creations", grew);
    if (qs_os_cpu_possible() < 2)
        printf("note: one CPU, SLAB caches have no shared arrays: the leak check is weak\n");

    /* an id given back is taken again; the list keeps its order */
    unsigned mid = n / 2;
    unsigned id = made[mid]->id;
    CHECK(qslab_cache_destroy(made[mid]) == 0);
    made[mid] = qslab_cache_create("t-id-again", 64, 0, 0, NULL);
    CHECK(made[mid] != NULL && made[mid]->id == id);
    CHECK(last_listed() == made[mid]);
    CHECK(qslab_cache_destroy(made[mid]) == 0); /* the tail */
    CHECK(last_listed() == made[n - 1]);
    CHECK(qslab_cache_destroy(made[n - 1]) == 0);
    CHECK(qslab_cache_destroy(made[0]) == 0); /* and the first made */
    CHECK(last_listed() == made[n - 2]);
    made[mid] = qslab_cache_create("t-id-again", 64, 0, 0, NULL);
    CHECK(made[mid] != NULL);
    CHECK(last_listed() == made[mid]);
    made[0] = qslab_cache_create("t-id-first", 64, 0, 0, NULL);
    CHECK(made[0] != NULL);
    CHECK(last_listed() == made[0]);
    errno = 0;
    made[n - 1] = qslab_cache_create("t-id-one-more", 64, 0, 0, NULL);
    CHECK(made[n - 1] != NULL);
    CHECK(qslab_cache_create("t-id-full", 64, 0, 0, NULL) == NULL && errno == ENOMEM);

    /* objects in the newest caches work */
    for (unsigned i = 0; i < n; i += n / 7) {
        void *p = qslab_cache_alloc(made[i]);
        CHECK(p != NULL);
        if (p) {
            memset(p, 0xab, 64);
            qslab_cache_free(made[i], p);
        }
        CHECK(qslab_cache_validate(made[i]) == 0);
    }

    /* everything goes; the list is as before the test */
    for (unsigned i = 0; i < n; i++)
        CHECKF(qslab_cache_destroy(made[i]) == 0, "destroy of cache %u", i);
    for (qslab_cache *c = qs_caches; c; c = c->next)
        CHECKF(strncmp(c->name, "t-id", 4) != 0, "cache %s still listed", c->name);
    qslab_cache *c = qslab_cache_create("t-id-last", 64, 0, 0, NULL);
    CHECK(c != NULL && last_listed() == c);
    CHECK(c && qslab_cache_destroy(c) == 0);
    return tu_done();
}
