/*
 * unit: a thread keeps allocating and freeing after qslab's exit destructor
 * ran (later pthread key destructors, libc's own clean-up).  It must get no
 * new queue (it would never be retired): no queue leak, counts exact,
 * invariants intact.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"
#include "owner/owner.h"

#include <pthread.h>

static qslab_cache *c;
static pthread_key_t late_key;

static void late_destructor(void *arg)
{
    /* runs after qslab's destructor: our key was created after qslab's */
    void *objs[50];
    for (int i = 0; i < 50; i++)
        objs[i] = qslab_cache_alloc(c);
    for (int i = 0; i < 50; i++)
        qslab_cache_free(c, objs[i]);
    qslab_free(qslab_malloc(100));
    int state = qs_self.state;
    qslab_free(qslab_malloc(64 << 10)); /* never queued: from the node's slabs */
    /* which set up no owner for the exited thread again */
    CHECKF(qs_self.state == state, "a 64 KiB malloc after the exit: owner state %d -> %d", state,
           qs_self.state);
    qslab_cache_free(c, arg); /* allocated while the thread was alive */
}

static void *worker(void *arg)
{
    void *keep = qslab_cache_alloc(c);
    for (int i = 0; i < 100; i++)
        qslab_cache_free(c, qslab_cache_alloc(c));
    pthread_setspecific(late_key, keep);
    return NULL;
}

static unsigned long nr_queues(void)
{
    unsigned long n = 0;
    qs_lock_acquire(&qs_global);
    for (struct qs_queue *q = c->queues; q; q = q->all_next)
        n++;
    qs_lock_release(&qs_global);
    return n;
}

int main(void)
{
    c = qslab_cache_create("t-late", 72, 0, 0, NULL);
    CHECK(c != NULL);
    tf_pin_slqb("t-late"); /* SLQB's queues */
    qslab_cache_free(c, qslab_cache_alloc(c)); /* qslab's key exists now */
    CHECK(pthread_key_create(&late_key, late_destructor) == 0);
    enum { ROUNDS = 50, PAR = 4 };
    for (int r = 0; r < ROUNDS; r++) {
        pthread_t t[PAR];
        for (int i = 0; i < PAR; i++)
            pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < PAR; i++)
            pthread_join(t[i], NULL);
    }
    struct qslab_cache_stats st;
    qslab_cache_stats(c, &st);
    CHECKF(st.active_objs == 0, "active %lu", st.active_objs);
    CHECKF(st.alloc == 1 + ROUNDS * PAR * 151, "alloc %lu", st.alloc);
    CHECKF(nr_queues() <= PAR + 1, "%lu queues for %d threads at a time", nr_queues(), PAR);
    /* no exited thread became an owner again (thread owners: the main one) */
    CHECKF(qs_percpu() || qs_owners_sharing() == 1, "%lu thread owners after every worker's exit",
           qs_owners_sharing());
    CHECK(qslab_cache_validate(c) == 0);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}
