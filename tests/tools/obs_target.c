/*
 * obs_target: a process with known caches and object counts, for
 * qslabinfo_test.py.  It lets any process read it (PR_SET_PTRACER_ANY, for
 * kernel.yama.ptrace_scope 1), makes its caches, prints what it sees of
 * itself (its own statistics and qslab_slabinfo text) and "READY", then
 * waits until its stdin closes.  With argument "exit" it exits at once
 * instead (qslabinfo -- PROGRAM reads it at its exit).
 *
 *   obs_a      100 bytes, 1000 objects allocated
 *   obs_b      4000 bytes, HWCACHE_ALIGN, a constructor, 37 objects
 *   obs_freed  256 bytes, 300 allocated then 200 freed: 100 live
 *   obs_empty  48 bytes, never used
 *   kmalloc-64 500 qslab_malloc(64)
 *   large      one 40 MiB qslab_malloc
 */
#include <qslab.h>

#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void ctor(void *p)
{
    memset(p, 0, 16);
}

static void *keep[4096];

int main(int argc, char **argv)
{
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    int k = 0;
    qslab_cache *a = qslab_cache_create("obs_a", 100, 0, 0, NULL);
    qslab_cache *b = qslab_cache_create("obs_b", 4000, 0, QSLAB_HWCACHE_ALIGN, ctor);
    qslab_cache *f = qslab_cache_create("obs_freed", 256, 0, 0, NULL);
    qslab_cache *e = qslab_cache_create("obs_empty", 48, 0, 0, NULL);
    if (!a || !b || !f || !e) {
        perror("qslab_cache_create");
        return 1;
    }
    for (int i = 0; i < 1000; i++)
        keep[k++] = qslab_cache_alloc(a);
    for (int i = 0; i < 37; i++)
        keep[k++] = qslab_cache_alloc(b);
    void *fr[300];
    for (int i = 0; i < 300; i++)
        fr[i] = qslab_cache_alloc(f);
    for (int i = 0; i < 200; i++)
        qslab_cache_free(f, fr[i * 3 / 2]);
    for (int i = 0; i < 500; i++)
        keep[k++] = qslab_malloc(64);
    void *big = qslab_malloc((size_t)40 << 20);
    for (int i = 0; i < k; i++)
        if (!keep[i] || !big) {
            fprintf(stderr, "allocation failed\n");
            return 1;
        }
    if (argc > 1 && strcmp(argv[1], "exit") == 0)
        return 0;
    qslab_cache *mine[] = {a, b, f, e, qslab_cache_find("kmalloc-64")};
    for (unsigned i = 0; i < sizeof mine / sizeof mine[0]; i++) {
        struct qslab_cache_stats st;
        qslab_cache_stats(mine[i], &st);
        printf("STATS %s %lu %lu %lu %lu %lu %u\n", qslab_cache_name(mine[i]), st.active_objs,
               st.num_objs, st.num_slabs, st.empty_slabs, st.queued_objs, st.objs_per_slab);
    }
    printf("SLABINFO-BEGIN\n");
    fflush(stdout);
    qslab_slabinfo(1);
    printf("SLABINFO-END\nREADY\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    return 0;
}
