/*
 * unit: empty slabs of a program that went quiet go back through the
 * background purger once they are older than empty_decay_ms, including
 * those in a thread's stash (queue.c), which only its owner touches while
 * it is active; the purger is the thread named qslab-purger.  Polls for up to
 * 20 s (a loaded machine may be slow to schedule the purger); fails only if
 * they never go back.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

#include <dirent.h>
#include <stdio.h>
#include <time.h>

/* Is one of this process's threads named `name` (/proc/self/task/N/comm)? */
static int thread_named(const char *name)
{
    int found = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
        if (f && fgets(comm, sizeof comm, f))
            found = strncmp(comm, name, strlen(name)) == 0 && comm[strlen(name)] == '\n';
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

enum { N = 2000 };
static void *objs[N];

int main(void)
{
    /* one CPU: with per-CPU queues, frees on another CPU than the
     * allocations' go to the first CPU's inbox, which a refill there, an
     * idle-CPU purge or another CPU's adoption claims, and the stash below
     * would not hold exactly what it expects */
    tu_pin_one_cpu();
    qslab_cache *c = qslab_cache_create("t-purge", 2048, 0, 0, NULL);
    tf_pin_slqb("t-purge"); /* SLQB's slabs and stash */
    /* a long decay while the slabs empty, so that a purger tick between
     * the frees and the count (a loaded machine) cannot take them yet */
    CHECK(c && qslab_tune("t-purge", "empty_decay_ms", "60000") == 0);
    for (int i = 0; i < N; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < N; i++)
        qslab_cache_free(c, objs[i]);
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    unsigned long kept = st.empty_slabs;
    CHECKF(kept > 0, "no empty slab kept right after the frees (%lu)", kept);
    /* now a short decay, and do nothing with the cache */
    CHECK(qslab_tune("t-purge", "empty_decay_ms", "100") == 0);
    for (int waited = 0; waited < 200; waited++) {
        qslab_cache_stats(c, &st);
        if (st.empty_slabs == 0)
            break;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECKF(st.empty_slabs == 0, "%lu of %lu empty slabs still kept after 20 s", st.empty_slabs, kept);
    CHECK(st.free_slab >= kept);
    CHECKF(thread_named("qslab-purger"), "no thread of this process is named qslab-purger");
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);

    /* a stash and nothing else: a queue of one object, so that frees go
     * straight to their slabs, and two of three slabs empty into the stash */
    qslab_cache *t = qslab_cache_create("t-stash", 1024, 0, 0, NULL);
    tf_pin_slqb("t-stash");
    CHECK(t && qslab_tune("t-stash", "empty_decay_ms", "100") == 0);
    CHECK(qslab_tune("t-stash", "freebatch", "1") == 0 && qslab_tune("t-stash", "hiwater", "1") == 0);
    unsigned per = qs_slab_objects(t, t->order), n = 3 * per;
    void *few[64];
    CHECK(n <= 64);
    for (unsigned i = 0; i < n; i++)
        few[i] = qslab_cache_alloc(t);
    for (unsigned i = 0; i < n; i++)
        qslab_cache_free(t, few[i]);
    qslab_cache_stats(t, &st);
    CHECKF(st.empty_slabs == 2, "%lu empty slabs in the stash, expected 2", st.empty_slabs);
    for (int waited = 0; waited < 200 && st.empty_slabs; waited++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        qslab_cache_stats(t, &st);
    }
    CHECKF(st.empty_slabs == 0, "%lu stashed slabs still kept after 20 s", st.empty_slabs);
    CHECK(st.free_slab >= 2);
    CHECK(qslab_cache_validate(t) == 0);
    CHECK(qslab_cache_destroy(t) == 0);
    return tu_done();
}
