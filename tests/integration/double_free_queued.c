/*
 * A double free that is not next to the first one, while the first free is
 * still queued (the fast paths do not see it), and then the queue is emptied
 * before either entry is handed out again: by a shrink, a trim, or the
 * owner's exit.  The fuzzer found this handing the object out twice (the
 * first entry's routing wrote a link into it, and the second entry then
 * looked like a refilled object).  Now the emptying reports it, once, and
 * the object goes home once.  Every front end: whichever way each catches
 * it, the report names the object, and nothing is handed out twice.
 * REMOTE: the object is of another owner's slab (another thread's, gone,
 * whose slabs went to the node; with per-CPU queues, another CPU's), so
 * the emptying routes both entries towards a batch, not onto a slab of
 * its own: the second entry must be caught there too.
 */
#define _GNU_SOURCE /* CPU affinity */
#include <qslab.h>

#include "../testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

enum { SHRINK, TRIM, EXIT, REMOTE };

struct arg {
    qslab_cache *c;
    int how;
    void *victim;
};

static void double_free(struct arg *a)
{
    qslab_cache *c = a->c;
    void *p = qslab_cache_alloc(c), *q = qslab_cache_alloc(c), *r = qslab_cache_alloc(c);
    a->victim = p;
    qslab_cache_free(c, p);
    qslab_cache_free(c, q);
    qslab_cache_free(c, r);
    qslab_cache_free(c, p); /* p is queued twice */
}

static void *in_thread(void *v)
{
    double_free(v);
    return NULL; /* the exit empties the thread's queue */
}

/* Run the caller on CPU cpu alone; false if it cannot */
static bool pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* REMOTE: p, q, r made on CPU 0 by a thread that exits */
static void *alloc_three(void *v)
{
    void **o = v;
    pin(0);
    for (int i = 0; i < 3; i++)
        o[i] = qslab_cache_alloc(((struct arg *)o[3])->c);
    return NULL;
}

static void run(int how)
{
    static const char *names[] = {"t-dfq-shrink", "t-dfq-trim", "t-dfq-exit", "t-dfq-remote"};
    char s[32];
    qslab_cache *c = qslab_cache_create(names[how], 48, 0, 0, NULL);
    struct arg a = {c, how, NULL};
    tu_capture_reset();
    if (how == REMOTE) {
        cpu_set_t old;
        sched_getaffinity(0, sizeof(old), &old);
        void *o[4] = {NULL, NULL, NULL, &a};
        pthread_t t;
        pthread_create(&t, NULL, alloc_three, o);
        pthread_join(t, NULL);
        pin(1); /* with one CPU, CPU 0's objects: SHRINK's case again */
        a.victim = o[0];
        qslab_cache_free(c, o[0]);
        qslab_cache_free(c, o[1]);
        qslab_cache_free(c, o[2]);
        qslab_cache_free(c, o[0]); /* queued twice, another owner's object */
        qslab_cache_shrink(c);
        sched_setaffinity(0, sizeof(old), &old);
    } else if (how == EXIT) {
        pthread_t t;
        pthread_create(&t, NULL, in_thread, &a);
        pthread_join(t, NULL);
        qslab_cache_shrink(c); /* a CPU's queue: emptied here */
    } else {
        double_free(&a);
        if (how == SHRINK)
            qslab_cache_shrink(c);
        else
            qslab_trim();
    }
    /* reported (when, depends on the front end), naming the object */
    void *v[256];
    for (int i = 0; i < 256; i++)
        v[i] = qslab_cache_alloc(c);
    CHECKF(tu_capture_calls() >= 1, "%s: the double free of %s was not reported", names[how],
           tu_addr(s, a.victim));
    CHECKF(strstr(tu_fatal_msg, tu_addr(s, a.victim)) != NULL &&
               (strstr(tu_fatal_msg, "double free") || strstr(tu_fatal_msg, "already free")),
           "%s: message \"%s\"", names[how], tu_fatal_msg);
    int dup = 0;
    for (int i = 0; i < 256; i++)
        for (int j = 0; j < i; j++)
            dup += v[i] == v[j];
    CHECKF(dup == 0, "%s: %d objects handed out twice", names[how], dup);
    for (int i = 0; i < 256; i++)
        qslab_cache_free(c, v[i]);
    CHECKF(qslab_cache_validate(c) == 0, "%s", names[how]);
    tu_capture_reset();
}

int main(void)
{
    qslab_set_fatal_handler(tu_fatal_capture);
    run(SHRINK);
    run(TRIM);
    run(EXIT);
    run(REMOTE);
    return tu_done();
}
