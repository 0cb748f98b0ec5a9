/*
 * obs_fake: a process that is not qslab but defines qslab_observe_root,
 * for qslabinfo_test.py: the reader must refuse or fail with a clear
 * message, never crash or loop.
 *   obs_fake version   a root of layout version 999: exit 2, both versions named
 *   obs_fake cycle     a valid root whose cache list is a cycle: exit 3
 *   obs_fake wild      a valid root whose cache list points nowhere: exit 3
 *   obs_fake starting  a root not yet `ready` (its addresses unrelocated, as
 *                      in a process the dynamic loader is still loading) for
 *                      0.5 s after READY, then valid: the reader waits, exit 0
 *   obs_fake unrelocated  never `ready`: exit 3 after the reader's wait
 *   obs_fake torn      a valid root whose generation stays odd (a change that
 *                      never ends): every read torn, exit 3 ("try again"); a
 *                      --record skips each sample with a comment line
 *   obs_fake later     valid (one cache, "loop"); a 't' on its stdin makes
 *                      its generation odd (every read torn), a 'u' even again:
 *                      for qslabtop's screen across a torn refresh
 */
#include "observe/observe.h"

#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static qslab_cache fake_cache, *fake_head;
static struct qs_node fake_nodes[1];
static int one = 1, zero;
static const char *why_text = "fake";
static struct qs_owner **no_owners;
static uint32_t objs[QS_MAX_CACHES];
static struct qs_large_counters large_words;
static void *large_ptr = &large_words;
static size_t slab_bytes_word;
static size_t *slab_bytes_ptr = &slab_bytes_word;
static size_t *chunk_bytes_ptr = &slab_bytes_word, *slot_bytes_ptr = &slab_bytes_word,
              *meta_bytes_ptr = &slab_bytes_word, *warm_bytes_ptr = &slab_bytes_word;
static struct qs_pressure pressure_words;
static struct qs_cached cached_words;

#define OFF_(s, f) (uint32_t) offsetof(struct s, f),
struct qs_observe_root qslab_observe_root = {
    .magic = QS_OBSERVE_MAGIC,
    .version = QS_OBSERVE_VERSION,
    .root_size = sizeof(struct qs_observe_root),
    .ptr_size = sizeof(void *),
    .stat_nr = QS_STAT_NR,
    .sizeof_cache = sizeof(struct qslab_cache),
    .sizeof_queue = sizeof(struct qs_queue),
    .sizeof_node = sizeof(struct qs_node),
    .sizeof_list = sizeof(struct qs_list),
    .sizeof_owner = sizeof(struct qs_owner),
    .sizeof_inbox = sizeof(struct qs_inbox),
    .max_caches = QS_MAX_CACHES,
    .max_nodes = QS_MAX_NODES,
    .page_shift = QS_PAGE_SHIFT,
    .name_max = QS_NAME_MAX,
    .front_nr = QS_FRONT_NR,
    .nr_offsets = QS_OBSERVE_NR_OFFSETS,
    .offsets = {QS_OBSERVE_OFFSETS(OFF_)},
    .caches = &fake_head,
    .nr_nodes = &one,
    .owner_kind = &zero,
    .owner_why = &why_text,
    .cpu_owners = &no_owners,
    .nr_cpu_ids = &zero,
    .front_default = &zero,
    .objs_per_slab = objs,
    .large = &large_ptr,
    .page_slab_bytes = &slab_bytes_ptr,
    .page_chunk_bytes = &chunk_bytes_ptr,
    .page_slot_bytes = &slot_bytes_ptr,
    .page_warm_bytes = &warm_bytes_ptr,
    .meta_mapped_bytes = &meta_bytes_ptr,
    .slob_arena = &fake_cache,
    .front_queues = 1,
    .large_buckets = QS_LARGE_BUCKETS,
    .large_bucket_shift0 = QS_LARGE_BUCKET_SHIFT0,
    .sizeof_large = sizeof(struct qs_large_counters),
    .sizeof_pressure = sizeof(struct qs_pressure),
    .pressure = &pressure_words,
    .sizeof_cached = sizeof(struct qs_cached),
    .cached = &cached_words,
    .front_names = {"slqb"},
    .ready = 1,
};

int main(int argc, char **argv)
{
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    const char *how = argc > 1 ? argv[1] : "version";
    strcpy(fake_cache.name, "loop");
    fake_cache.slot_size = 64;
    fake_cache.nodes = fake_nodes;
    if (strcmp(how, "version") == 0) {
        qslab_observe_root.version = 999;
    } else if (strcmp(how, "later") == 0) {
        fake_head = &fake_cache; /* one cache, its list ended */
    } else if (strcmp(how, "torn") == 0) {
        qslab_observe_root.generation = 1; /* odd: a change in progress, for ever */
    } else if (strcmp(how, "cycle") == 0) {
        fake_cache.next = &fake_cache; /* the list never ends */
        fake_head = &fake_cache;
    } else if (strcmp(how, "starting") == 0 || strcmp(how, "unrelocated") == 0) {
        /* as before relocation: small link-time values, nothing mapped */
        qslab_observe_root.ready = 0;
        qslab_observe_root.caches = (qslab_cache *const *)(uintptr_t)0x3000;
        qslab_observe_root.nr_nodes = (const int *)(uintptr_t)0x3008;
    } else {
        fake_head = (qslab_cache *)(uintptr_t)0x1000; /* nothing mapped there */
    }
    printf("READY\n");
    fflush(stdout);
    if (strcmp(how, "starting") == 0) { /* relocated 0.5 s later, then ready */
        nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
        qslab_observe_root.caches = &fake_head;
        qslab_observe_root.nr_nodes = &one;
        __atomic_store_n(&qslab_observe_root.ready, 1, __ATOMIC_RELEASE);
    }
    char buf[64];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] == 't' || buf[i] == 'u') /* torn from now on, or not */
                __atomic_store_n(&qslab_observe_root.generation, buf[i] == 't' ? 3 : 4,
                                 __ATOMIC_SEQ_CST);
    return 0;
}
