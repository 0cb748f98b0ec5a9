/*
 * The kmalloc classes made on their first use, by many threads at once: a
 * class's cache is set up by the first allocation of its size (or a look-up
 * of its name, or a tunable set on every cache), while other threads
 * allocate from it, look it up and free its objects (api/kmalloc.c,
 * "MAKING A CLASS").  2 x CPUs + 6 threads start together and each takes
 * one object of every class up to 1 MiB in an order of its own (some
 * through calloc, whose fast path reads the class's cache), checks that
 * the block holds the size and that calloc's is zero, looks up some
 * classes by name, and frees half of its objects; a last thread sets
 * empty_decay_ms to its default on every cache meanwhile, which makes
 * every class.  Then the main thread frees the other halves (frees from
 * another thread), and checks that each class is one cache (slabinfo lists
 * it once, in the order of sizes), found by its name, with its size and
 * nothing in use, and that every cache validates.  Each round is a child
 * process of its own (ROUNDS), whose classes are not made yet.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <qslab.h>

#include "../testutil.h"
#include "../xorshift.h"

#define MAX_BYTES (1u << 20) /* the classes allocated from (the rest: looked up) */
/* rounds: 16; 4 under ASan, 2 under TSan (a thread start costs 5-20
 * times ASan's there), 4 with every cache a debug cache (FZPU: each
 * operation 10-20 times dearer); a round is a fresh process */
#define ROUNDS ((int)tu_scale_debug(TU_SCALE_TSAN(TU_SCALE(16, 4), 2), 4))

static unsigned nr_classes; /* classes up to MAX_BYTES */
static size_t sizes[256];   /* every class's size, up to 32 MiB */
static unsigned nr_sizes;
static pthread_barrier_t start;

struct worker {
    pthread_t t;
    unsigned id;
    void *keep[256];
    unsigned nkeep;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x5eed + w->id;
    unsigned order[256];
    for (unsigned i = 0; i < nr_classes; i++)
        order[i] = i;
    for (unsigned i = nr_classes - 1; i > 0; i--) { /* a shuffle of its own */
        unsigned j = (unsigned)(xorshift64s(&rng) % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    pthread_barrier_wait(&start);
    for (unsigned k = 0; k < nr_classes; k++) {
        size_t size = sizes[order[k]];
        bool zeroed = (w->id + k) % 3 == 0;
        unsigned char *p = zeroed ? qslab_calloc(1, size) : qslab_malloc(size);
        if (!p) {
            tu_fail("thread %u: no block of %zu bytes", w->id, size);
            continue;
        }
        if (zeroed && (p[0] || p[size / 2] || p[size - 1]))
            tu_fail("thread %u: calloc(1, %zu) not zero", w->id, size);
        if (qslab_usable_size(p) < size)
            tu_fail("thread %u: %zu bytes asked, %zu usable", w->id, size, qslab_usable_size(p));
        p[0] = (unsigned char)w->id;
        p[size - 1] = (unsigned char)k;
        if (k % 7 == 0) {
            char name[32];
            snprintf(name, sizeof name, "kmalloc-%zu", sizes[order[(k + w->id) % nr_classes]]);
            qslab_cache *c = qslab_cache_find(name);
            if (!c || qslab_cache_object_size(c) != sizes[order[(k + w->id) % nr_classes]])
                tu_fail("thread %u: qslab_cache_find(%s): %p", w->id, name, (void *)c);
        }
        if (k % 2)
            qslab_free(p);
        else
            w->keep[w->nkeep++] = p;
    }
    return NULL;
}

static void *tune_all(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    CHECK(qslab_tune("*", "empty_decay_ms", "1000") == 0); /* the default: nothing changes */
    return NULL;
}

static int round_in_child(void)
{
    /* the ladder (docs/design.md, "kmalloc and large blocks"), computed
     * here: a look-up by name would make the classes before the threads */
    static const size_t small[] = {8, 16, 32, 48, 64, 80, 96, 112, 128};
    for (unsigned i = 0; i < sizeof small / sizeof small[0]; i++)
        sizes[nr_sizes++] = small[i];
    for (size_t p = 128; p < ((size_t)32 << 20); p *= 2) {
        size_t n = p >= 1024 && p < 2048 ? 32 : p >= 2048 && p < 8192 ? 16 : 8;
        for (size_t j = 1; j <= n && nr_sizes < 256; j++)
            sizes[nr_sizes++] = p + p / n * j;
    }
    for (unsigned i = 0; i < nr_sizes; i++)
        if (sizes[i] <= MAX_BYTES)
            nr_classes = i + 1;
    CHECKF(nr_sizes == 193, "%u classes named", nr_sizes);
    int nthreads = 2 * (int)sysconf(_SC_NPROCESSORS_ONLN) + 6;
    if (nthreads > 64)
        nthreads = 64;
    static struct worker w[64];
    pthread_t tuner;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        w[i].id = (unsigned)i;
        pthread_create(&w[i].t, NULL, work, &w[i]);
    }
    pthread_create(&tuner, NULL, tune_all, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].t, NULL);
    pthread_join(tuner, NULL);
    for (int i = 0; i < nthreads; i++)
        for (unsigned k = 0; k < w[i].nkeep; k++)
            qslab_free(w[i].keep[k]);

    static char text[1 << 18];
    tu_text_of(qslab_slabinfo, text, sizeof text);
    const char *last = text;
    for (unsigned i = 0; i < nr_sizes; i++) {
        char name[40];
        snprintf(name, sizeof name, "\nkmalloc-%zu ", sizes[i]);
        const char *at = strstr(text, name);
        CHECKF(at != NULL, "%s not in slabinfo", name + 1);
        if (!at)
            continue;
        CHECKF(strstr(at + 1, name) == NULL, "%s listed twice", name + 1);
        CHECKF(at > last, "%s listed before a smaller class", name + 1);
        last = at;
        name[strlen(name) - 1] = '\0';
        qslab_cache *c = qslab_cache_find(name + 1);
        struct qslab_cache_stats st;
        if (c)
            qslab_cache_stats(c, &st);
        CHECKF(c && qslab_cache_object_size(c) == sizes[i] && st.active_objs == 0,
               "%s: cache %p, %zu bytes, %lu in use", name + 1, (void *)c,
               c ? qslab_cache_object_size(c) : 0, c ? st.active_objs : 0);
        CHECKF(c && qslab_cache_validate(c) == 0, "%s does not validate", name + 1);
    }
    if (tu_failures())
        printf("%d threads, %u classes allocated from, %u named\n", nthreads, nr_classes, nr_sizes);
    return tu_failures() ? 1 : 0;
}

int main(void)
{
    int failed = 0;
    for (int r = 0; r < ROUNDS; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(round_in_child());
        int status = 0;
        CHECKF(pid > 0 && waitpid(pid, &status, 0) == pid, "round %d: fork or wait failed", r);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            tu_fail("round %d: the child ended with status 0x%x", r, status);
            failed++;
        }
    }
    printf("%d rounds, %d failed\n", ROUNDS, failed);
    return tu_done();
}
