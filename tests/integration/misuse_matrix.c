/*
 * Heap misuse, one kind at a time, in three modes: the default, the
 * hardened profile (QSLAB_HARDEN=1) and full debugging (QSLAB_DEBUG=FZPU).
 * Each (kind, mode) runs in a child of its own with the default fatal
 * handler; the child's end is its outcome:
 *   caught  killed by SIGABRT after a last "qslab: " line holding the
 *           expected text (the report's conclusion: what, where, which cache)
 *   fault   killed by SIGSEGV (memory that can never be touched), with no
 *           report; "fault: text": after a last "qslab: " line holding text
 *   zeroed  a read after free saw zeros (exit 10)
 *   stale   a read after free saw old data (exit 11)
 *   missed  nothing noticed (exit 0)
 * The table below is what docs/debugging.md promises for each mode; a
 * change of any outcome fails the test, naming the kind, the mode, what was
 * expected and what happened (with the child's stderr).
 *
 * The kinds go through qslab's own API (qslab_malloc, qslab_free, ...),
 * which the malloc drop-in's functions are; "large" blocks are 256 KiB (a
 * kmalloc class, one to a slab), "huge" 40 MiB (mapped on their own: with
 * red zones, between guard pages; with the quarantine, inaccessible once
 * freed).
 */
#include <qslab.h>

#include "../testutil.h"

#include <stdbool.h>
#include <sys/mman.h>

#define SMALL 40
#define LARGE (256u << 10)
#define HUGE (40u << 20)

static volatile unsigned char sink;

/* A block of n bytes, written: whole, or for a huge block its first and
 * last pages (every page between is a fresh mapping's zeros: writing 40
 * MiB in each of a dozen children cost the test seconds) */
static char *fill(size_t n)
{
    char *p = qslab_malloc(n);
    if (!p)
        _exit(3);
    if (n < HUGE) {
        memset(p, 0x41, n);
    } else {
        memset(p, 0x41, 4096);
        memset(p + n - 4096, 0x41, 4096);
    }
    return p;
}

/* A read after free: zeros, or anything else (old data, a link). */
static int read_after(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 11;
    return 10;
}

/* After a write into a freed object: let the checks find it.  The
 * purger's walk checks free debug objects about once a second: wait for
 * it, up to 10 s on a loaded machine (the child dies when it reports).
 * The default mode has no such walk: nothing to wait for. */
static int settle(void)
{
    if (!getenv("QSLAB_HARDEN") && !getenv("QSLAB_DEBUG"))
        return 0;
    for (int i = 0; i < 100; i++)
        tu_sleep_ms(100);
    return 0;
}

static int run_kind(const char *kind)
{
    char *p, *q;
    /* the default mode faults with no report: a sanitizer's handler would
     * report and exit (the others install qslab's, which chains to it for
     * faults that are not qslab's) */
    if (!getenv("QSLAB_HARDEN") && !getenv("QSLAB_DEBUG"))
        signal(SIGSEGV, SIG_DFL);
    if (!strcmp(kind, "double-free-small")) {
        p = fill(SMALL);
        qslab_free(p);
        qslab_free(p);
    } else if (!strcmp(kind, "double-free-large")) {
        p = fill(LARGE);
        qslab_free(p);
        qslab_free(p);
    } else if (!strcmp(kind, "double-free-huge")) {
        p = fill(HUGE);
        qslab_free(p);
        qslab_free(p);
    } else if (!strcmp(kind, "double-free-delayed")) {
        /* freed, its slot given to another block, freed again */
        p = fill(SMALL);
        qslab_free(p);
        for (int i = 0; i < 100; i++)
            sink = *(volatile char *)fill(SMALL);
        qslab_free(p);
    } else if (!strcmp(kind, "invalid-free")) {
        char on_stack[64];
        qslab_free(on_stack + 16);
    } else if (!strcmp(kind, "unaligned-free")) {
        p = fill(SMALL);
        qslab_free(p + 1);
    } else if (!strcmp(kind, "interior-free")) {
        p = fill(SMALL);
        qslab_free(p + 16);
    } else if (!strcmp(kind, "foreign-free")) {
        p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        qslab_free(p + 64);
    } else if (!strcmp(kind, "never-allocated-free")) {
        /* the last slot of a fresh cache's first slab (slabs are aligned
         * to their size; the first object starts base_off into it), never
         * handed out; under
         * SLOB, whose pages every cache shares, two slots past the object
         * (free space of its page) */
        qslab_cache *c = qslab_cache_create("t-never", 64, 0, 0, NULL);
        p = qslab_cache_alloc(c);
        struct qslab_cache_stats st;
        if (!p || qslab_cache_stats(c, &st) != 0)
            return 3;
        uintptr_t slab = (uintptr_t)p & ~(uintptr_t)(st.slab_bytes - 1);
        uintptr_t base_off = ((uintptr_t)p - slab) % st.slot_size;
        size_t slots = (st.slab_bytes - base_off) / st.slot_size;
        if (st.num_objs > 2 || slots > 2) /* (objects may be born as they are taken) */
            qslab_cache_free(c, (void *)(slab + base_off + (slots - 1) * st.slot_size));
        else
            qslab_cache_free(c, p + 2 * st.slot_size);
        /* the program goes on (a check may come when the slot is next
         * handed out) */
        for (int i = 0; i < 100; i++)
            sink = *(volatile char *)qslab_cache_alloc(c);
    } else if (!strcmp(kind, "uninit-free")) {
        qslab_free((void *)(uintptr_t)0x7f1234567890ull);
    } else if (!strcmp(kind, "uninit-realloc")) {
        sink = (unsigned char)(uintptr_t)qslab_realloc((void *)(uintptr_t)0x7f1234567890ull, 10);
    } else if (!strcmp(kind, "uninit-usable")) {
        sink = (unsigned char)qslab_usable_size((void *)(uintptr_t)0x7f1234567890ull);
    } else if (!strcmp(kind, "usable-after-free")) {
        p = fill(SMALL);
        qslab_free(p);
        sink = (unsigned char)qslab_usable_size(p);
    } else if (!strcmp(kind, "realloc-after-free")) {
        p = fill(SMALL);
        qslab_free(p);
        sink = (unsigned char)(uintptr_t)qslab_realloc(p, 100);
    } else if (!strcmp(kind, "overflow-1-small") || !strcmp(kind, "overflow-8-small") ||
               !strcmp(kind, "overflow-1-large") || !strcmp(kind, "overflow-8-large")) {
        p = fill(strstr(kind, "small") ? SMALL : LARGE);
        memset(p + qslab_usable_size(p), 'o', strstr(kind, "-1-") ? 1 : 8);
        qslab_free(p);
    } else if (!strcmp(kind, "overflow-1-huge") || !strcmp(kind, "underflow-1-huge")) {
        p = fill(HUGE);
        if (kind[0] == 'o')
            p[qslab_usable_size(p)] = 'o';
        else
            p[-1] = 'u';
        qslab_free(p);
    } else if (!strcmp(kind, "read-after-free-huge")) {
        p = fill(HUGE);
        qslab_free(p);
        return read_after(p, HUGE);
    } else if (!strcmp(kind, "write-after-free-huge")) {
        p = fill(HUGE);
        qslab_free(p);
        p[8] = 'w';
    } else if (!strcmp(kind, "string-overflow")) {
        p = fill(16);
        strcpy(p + qslab_usable_size(p) - 4, "a string of 24 bytes....");
        qslab_free(p);
    } else if (!strcmp(kind, "read-after-free-small")) {
        p = fill(SMALL);
        qslab_free(p);
        return read_after(p, SMALL);
    } else if (!strcmp(kind, "read-after-free-large")) {
        p = fill(LARGE);
        qslab_free(p);
        return read_after(p, LARGE);
    } else if (!strcmp(kind, "write-after-free-small")) {
        p = fill(SMALL);
        qslab_free(p);
        p[8] = 'w';
        return settle();
    } else if (!strcmp(kind, "write-after-free-large")) {
        p = fill(LARGE);
        q = fill(LARGE); /* p's slab stays */
        qslab_free(p);
        p[8] = 'w';
        return settle() + (q == NULL);
    } else if (!strcmp(kind, "write-after-free-reused")) {
        /* freed, a block of its size allocated, written through the old
         * pointer: into the new block if the slot was reused at once */
        p = fill(SMALL);
        qslab_free(p);
        q = fill(SMALL);
        p[8] = 'w';
        if (q[8] != 0x41)
            return 0; /* the new block corrupted: missed */
        return settle();
    } else if (!strcmp(kind, "zero-size-read")) {
        p = qslab_malloc(0);
        sink = *(volatile char *)p;
    } else if (!strcmp(kind, "zero-size-write")) {
        p = qslab_malloc(0);
        *(volatile char *)p = 1;
    } else if (!strcmp(kind, "sized-free-small")) {
        p = fill(100);
        qslab_free_sized(p, 8);
    } else if (!strcmp(kind, "sized-free-large")) {
        p = fill(LARGE);
        qslab_free_sized(p, 1000);
    } else {
        return 2;
    }
    return 0;
}

enum mode { DEFAULT, HARDENED, DEBUG, MODES };
static const char *const mode_name[MODES] = {"default", "hardened", "debug"};

/* Expected outcome per mode: "missed", "fault", "zeroed", "stale", the
 * text the last qslab line must hold (caught), "fault: " and that text, or
 * "any" (not promised); slub, slab, slob: the
 * default mode's under that front end (NULL: the same): SLAB knows a slot
 * never born; SLOB's blocks carry headers, and SLOB gives a large block's
 * slab back as the block is freed. */
struct kind {
    const char *name;
    const char *want[MODES];
    const char *slub, *slab, *slob;
};

static const struct kind kinds[] = {
    {"double-free-small", {"double free", "Object already free", "Object already free"}, NULL, NULL, NULL},
    {"double-free-large", {"double free", "Object already free", "Object already free"}, NULL, NULL,
     "not an allocated object (free slab memory)"},
    {"double-free-huge", {"a large block freed before", "a large block freed before", "a large block freed before"}, NULL, NULL, NULL},
    {"double-free-delayed", {"missed", "Object already free", "missed"}, NULL, NULL, NULL},
    {"invalid-free", {"not allocated by qslab", "not allocated by qslab", "not allocated by qslab"}, NULL, NULL, NULL},
    {"unaligned-free", {"interior pointer", "Invalid object pointer", "Invalid object pointer"}, NULL, NULL, NULL},
    {"interior-free", {"interior pointer", "Invalid object pointer", "Invalid object pointer"}, NULL, NULL, NULL},
    {"foreign-free", {"not allocated by qslab", "not allocated by qslab", "not allocated by qslab"}, NULL, NULL, NULL},
    {"never-allocated-free", {"double free", "Object already free", "a slot never handed out"}, NULL,
     "a slot never handed out", "free memory of a SLOB page"},
    {"uninit-free", {"not allocated by qslab", "not allocated by qslab", "not allocated by qslab"}, NULL, NULL, NULL},
    {"uninit-realloc", {"not allocated by qslab", "not allocated by qslab", "not allocated by qslab"}, NULL, NULL, NULL},
    {"uninit-usable", {"not allocated by qslab", "not allocated by qslab", "not allocated by qslab"}, NULL, NULL, NULL},
    {"usable-after-free",
     {"a freed object of cache kmalloc-48", "qslab_usable_size of a free object", "qslab_usable_size of a free object"},
     NULL, NULL, NULL},
    {"realloc-after-free",
     {"a freed object of cache kmalloc-48", "realloc of a free object", "realloc of a free object"},
     NULL, NULL, NULL},
    {"overflow-1-small", {"missed", "Right Redzone overwritten", "Right Redzone overwritten"}, NULL, NULL, NULL},
    {"overflow-8-small", {"missed", "Right Redzone overwritten", "Right Redzone overwritten"}, NULL, NULL, NULL},
    {"overflow-1-large", {"missed", "Right Redzone overwritten", "Right Redzone overwritten"}, NULL, NULL, NULL},
    {"overflow-8-large", {"missed", "Right Redzone overwritten", "Right Redzone overwritten"}, NULL, NULL, NULL},
    {"overflow-1-huge", {"any", "fault: out-of-bounds access past a large block", "fault: out-of-bounds access past a large block"}, NULL, NULL, NULL},
    {"underflow-1-huge", {"missed", "fault: out-of-bounds access before a large block", "fault: out-of-bounds access before a large block"}, NULL, NULL, NULL},
    {"string-overflow", {"missed", "Freepointer corrupt", "Freepointer corrupt"}, NULL, NULL, NULL},
    {"read-after-free-small", {"stale", "zeroed", "stale"}, NULL, NULL, NULL},
    {"read-after-free-large", {"stale", "zeroed", "stale"}, NULL, NULL, "zeroed"},
    {"write-after-free-small", {"missed", "Poison overwritten", "Poison overwritten"}, NULL, NULL, NULL},
    {"write-after-free-large", {"missed", "Poison overwritten", "Poison overwritten"}, NULL, NULL, NULL},
    {"read-after-free-huge", {"fault", "fault: use after free of a large block", "fault: use after free of a large block"}, NULL, NULL, NULL},
    {"write-after-free-huge", {"fault", "fault: use after free of a large block", "fault: use after free of a large block"}, NULL, NULL, NULL},
    {"write-after-free-reused", {"missed", "Poison overwritten", "missed"}, NULL, NULL, NULL},
    {"zero-size-read", {"fault", "fault: access to a zero-size block", "fault: access to a zero-size block"}, NULL, NULL, NULL},
    {"zero-size-write", {"fault", "fault: access to a zero-size block", "fault: access to a zero-size block"}, NULL, NULL, NULL},
    {"sized-free-small", {"with size 8", "with size 8", "with size 8"}, NULL, NULL, NULL},
    {"sized-free-large", {"with size 1000", "with size 1000", "with size 1000"}, NULL, NULL, NULL},
};

static void setup(void *arg)
{
    enum mode m = (enum mode)(uintptr_t)arg;
    unsetenv("QSLAB_HARDEN");
    unsetenv("QSLAB_DEBUG");
    unsetenv("QSLAB_GUARD_SAMPLE");
    if (m == HARDENED)
        setenv("QSLAB_HARDEN", "1", 1);
    else if (m == DEBUG)
        setenv("QSLAB_DEBUG", "FZPU", 1);
}

static char err[1 << 16];

static void check(const struct kind *k, enum mode m)
{
    char arg[64];
    snprintf(arg, sizeof arg, "kind=%s", k->name);
    tu_stderr_begin();
    pid_t pid = tu_spawn_self(arg, setup, (void *)(uintptr_t)m);
    int st = pid < 0 ? -1 : tu_wait(pid);
    tu_stderr_end(err, sizeof err);
    const char *last = NULL;
    for (const char *l = err; (l = strstr(l, "qslab: ")) != NULL; l++)
        if (l == err || l[-1] == '\n')
            last = l;
    char line[512] = "";
    if (last) {
        size_t n = strcspn(last, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), last);
    }
    const char *got;
    char caught[600];
    if (st == 128 + SIGABRT && last) {
        snprintf(caught, sizeof caught, "caught: %s", line);
        got = caught;
    } else if (st == 128 + SIGSEGV) {
        got = "fault";
        if (last) {
            snprintf(caught, sizeof caught, "fault: %s", line);
            got = caught;
        }
    } else if (st == 10) {
        got = "zeroed";
    } else if (st == 11) {
        got = "stale";
    } else if (st == 0) {
        got = "missed";
    } else {
        snprintf(caught, sizeof caught, "status %d", st);
        got = caught;
    }
    const char *want = k->want[m];
    const char *front = getenv("QSLAB_FRONT");
    if (m == DEFAULT && k->slob && front && !strcmp(front, "slob"))
        want = k->slob;
    if (m == DEFAULT && k->slub && front && !strcmp(front, "slub"))
        want = k->slub;
    if (m == DEFAULT && k->slab && front && !strcmp(front, "slab"))
        want = k->slab;
    bool plain = !strcmp(want, "missed") || !strcmp(want, "fault") || !strcmp(want, "zeroed") ||
                 !strcmp(want, "stale");
    bool ok;
    if (!strcmp(want, "any")) /* not promised: what lies past the mapping */
        ok = true;
    else if (plain)
        ok = !strcmp(got, want);
    else if (!strncmp(want, "fault: ", 7))
        ok = !strncmp(got, "fault: ", 7) && strstr(got + 7, want + 7);
    else
        ok = !strncmp(got, "caught: ", 8) && strstr(got, want);
    CHECKF(ok, "%s in the %s mode: expected %s%s, got %s; stderr:\n%s", k->name, mode_name[m],
           plain ? "" : "caught with ", want, got, err);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strncmp(argv[1], "kind=", 5))
        return run_kind(argv[1] + 5);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        for (int m = 0; m < MODES; m++)
            check(&kinds[i], (enum mode)m);
    return tu_done();
}
