/*
 * track.c - owner tracking (U): where an object was allocated and freed.
 * A track holds the call site and the frames after it, the thread, the CPU
 * and the time (qs_track_record: a debug cache's slots, slot.c, and
 * guard.c's samples); the call-site lists gather a cache's tracks by site
 * (SLUB's alloc_calls and free_calls: qslab_cache_alloc_calls,
 * qslab_cache_free_calls) and list the objects still allocated when a cache
 * is destroyed (qs_debug_leaks).  Apart from the checks: the stack scan
 * is the one part of the debug front end that reads the loaded objects'
 * program headers and /proc/self/maps.
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define QS_SCAN_SITE 4096 /* stack bytes scanned for the call site */
#define QS_SCAN_MORE 512  /* ... and past it for the frames after it */

/* ---- stacks: the caller's frames, found by scanning the stack ----
 * The library is built without frame pointers (they cost the fast paths),
 * and an unwinder would be a dependency: the tracks take the words of the
 * stack that look like return addresses (inside a loaded object's code,
 * after a call instruction), as the kernel's stack dumps do when they
 * print "?" entries.  The first such word outside qslab is the call site:
 * outside the module qslab is in when it is a shared object; in a static
 * executable, the first whose call instruction calls one of qslab's entry
 * points.  Frames after it may be stale words ("probable"). */

#define QS_MAX_MODULES 128
struct qs_module {
    uintptr_t lo, hi, base; /* an executable segment; the object's load base */
    const char *name;
};
static QS_BSS_APART struct qs_module modules[QS_MAX_MODULES];
static int nr_modules, self_module = -1;
static bool self_is_main;
static uint64_t modules_ms;
static qs_lock modules_lock;
static uintptr_t code_lo, code_hi; /* every module's code lies within */

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    for (int i = 0; i < info->dlpi_phnum && nr_modules < QS_MAX_MODULES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        struct qs_module *m = &modules[nr_modules++];
        m->lo = info->dlpi_addr + ph->p_vaddr;
        m->hi = m->lo + ph->p_memsz;
        m->base = info->dlpi_addr;
        m->name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : NULL;
        if ((uintptr_t)&qs_debug_born >= m->lo && (uintptr_t)&qs_debug_born < m->hi) {
            self_module = nr_modules - 1;
            self_is_main = m->name == NULL;
        }
    }
    return 0;
}

/* modules_lock held */
static void modules_refresh(void)
{
    uint64_t now = qs_os_now_ms();
    if (nr_modules && now - modules_ms < 1000)
        return;
    modules_ms = now;
    nr_modules = 0;
    self_module = -1;
    dl_iterate_phdr(module_cb, NULL);
    code_lo = UINTPTR_MAX;
    code_hi = 0;
    for (int i = 0; i < nr_modules; i++) {
        if (modules[i].lo < code_lo)
            code_lo = modules[i].lo;
        if (modules[i].hi > code_hi)
            code_hi = modules[i].hi;
    }
}

static int module_of(uintptr_t a)
{
    if (a < code_lo || a >= code_hi)
        return -1;
    for (int i = 0; i < nr_modules; i++) /* a handful: faster than a search */
        if (a >= modules[i].lo && a < modules[i].hi)
            return i;
    return -1;
}

/* Is the instruction before return address a (in module m) a call?
 * Sets *target for a direct call. */
static bool after_call(uintptr_t a, int m, uintptr_t *target)
{
    const uint8_t *p = (const uint8_t *)a;
    uintptr_t lo = modules[m].lo;
    *target = 0;
#if defined(__x86_64__)
    if (a - 5 >= lo && p[-5] == 0xe8) { /* call rel32 */
        int32_t rel;
        memcpy(&rel, p - 4, 4);
        *target = a + (uintptr_t)(intptr_t)rel;
        return true;
    }
    /* call *r/m: ff /2, 2 to 7 bytes (register, disp8, disp32, SIB) */
    for (int k = 2; k <= 7; k++)
        if (a - (uintptr_t)k >= lo && p[-k] == 0xff && (p[-k + 1] & 0x38) == 0x10)
            return true;
    return false;
#elif defined(__aarch64__)
    if (a - 4 < lo)
        return false;
    uint32_t insn;
    memcpy(&insn, p - 4, 4);
    if ((insn & 0xfc000000u) == 0x94000000u) { /* bl imm26 */
        int32_t imm = (int32_t)(insn << 6) >> 6;
        *target = a - 4 + (uintptr_t)((intptr_t)imm * 4);
        return true;
    }
    return (insn & 0xfffffc1fu) == 0xd63f0000u; /* blr */
#else
    return true;
#endif
}

/* qslab's entry points: a direct call to one of them is the user's. */
static bool entry_point(uintptr_t t)
{
    for (unsigned i = 0; i < qs_api_hooks.nr_entries; i++) /* (api/cache.c) */
        if (t == qs_api_hooks.entries[i])
            return true;
    return false;
}

/* The calling thread's stack: [lo, hi), from /proc/self/maps, once. */
static __thread uintptr_t stack_lo, stack_hi;

static QS_NOINLINE void stack_bounds(uintptr_t sp) /* its buffer off capture's frame */
{
    char buf[4096];
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    stack_lo = stack_hi = 0;
    if (fd < 0)
        return;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            uintptr_t lo = 0, hi = 0;
            char *q = line;
            for (; *q != '-' && q < nl; q++)
                lo = lo * 16 + (uintptr_t)(*q <= '9' ? *q - '0' : (*q | 0x20) - 'a' + 10);
            for (q++; *q != ' ' && q < nl; q++)
                hi = hi * 16 + (uintptr_t)(*q <= '9' ? *q - '0' : (*q | 0x20) - 'a' + 10);
            if (sp >= lo && sp < hi) {
                stack_lo = lo;
                stack_hi = hi;
                close(fd);
                return;
            }
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    close(fd);
}

/* Fill t->addrs with the call site and the frames after it. */
static QS_NO_SANITIZE void capture(struct qs_track *t)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    memset(t->addrs, 0, sizeof(t->addrs));
    if (sp < stack_lo || sp >= stack_hi)
        stack_bounds(sp);
    uintptr_t top = stack_hi;
    if (!top)
        return;
    /* qslab's own frames are small: the call site lies within
     * QS_SCAN_SITE bytes; the frames after it within QS_SCAN_MORE more
     * (the scan, not the frames, is what a track costs: scanning up to the
     * stack's top in a shallow program cost 1,300 instructions a track) */
    if (top - sp > QS_SCAN_SITE)
        top = sp + QS_SCAN_SITE;
    qs_lock_acquire(&modules_lock);
    modules_refresh();
    int k = 0;
    bool found = false;
    uintptr_t first = 0;
    for (const uintptr_t *w = (const uintptr_t *)sp; (uintptr_t)(w + 1) <= top && k < QS_TRACK_DEPTH;
         w++) {
        uintptr_t a = *w, target;
        int m = module_of(a);
        if (m < 0 || !after_call(a, m, &target))
            continue;
        if (!found) {
            if (!first)
                first = a;
            if (self_module >= 0 && !self_is_main ? m != self_module : entry_point(target))
                found = true;
            else
                continue;
            if ((uintptr_t)w + QS_SCAN_MORE < top)
                top = (uintptr_t)w + QS_SCAN_MORE;
        }
        t->addrs[k++] = a;
    }
    qs_lock_release(&modules_lock);
    if (!found)
        t->addrs[0] = first; /* no boundary seen: the innermost frame */
}

static __thread int32_t my_tid;

/* A track: the caller's stack, thread, CPU and time.  Also guard.c's (a
 * track in a buffer of QS_TRACK_BYTES, printed as a debug cache's are). */
_Static_assert(sizeof(struct qs_track) <= QS_TRACK_BYTES, "guard.c's track buffers");
void qs_track_record(void *track)
{
    struct qs_track *t = track;
    capture(t);
    if (!my_tid)
        my_tid = (int32_t)syscall(SYS_gettid);
    t->tid = my_tid;
    t->cpu = qs_os_current_cpu();
    t->when_ms = qs_os_now_ms();
}

/* ---- call sites (SLUB's alloc_calls, free_calls) ---- */

#define QS_SITES 64
struct site {
    uintptr_t addr;
    unsigned long count;
    uint64_t min_age, max_age, sum_age;
    int32_t min_tid, max_tid;
    uint64_t cpus; /* CPUs 0..63 seen */
};

struct sites {
    struct site s[QS_SITES];
    unsigned n;
    unsigned long other; /* objects of sites past QS_SITES */
    int which;           /* 0 alloc, 1 free */
    uint64_t now;
};

static void site_add(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg)
{
    struct sites *st = arg;
    if (allocated != (st->which == 0))
        return;
    const struct qs_track *t = track_of(c, obj, st->which);
    if (!t->when_ms)
        return; /* never freed */
    unsigned i = 0;
    while (i < st->n && st->s[i].addr != t->addrs[0])
        i++;
    if (i == st->n) {
        if (st->n == QS_SITES) {
            st->other++;
            return;
        }
        st->n++;
        st->s[i] = (struct site){t->addrs[0], 0, UINT64_MAX, 0, 0, INT32_MAX, INT32_MIN, 0};
    }
    struct site *x = &st->s[i];
    uint64_t age = st->now - t->when_ms;
    x->count++;
    x->sum_age += age;
    if (age < x->min_age)
        x->min_age = age;
    if (age > x->max_age)
        x->max_age = age;
    if (t->tid < x->min_tid)
        x->min_tid = t->tid;
    if (t->tid > x->max_tid)
        x->max_tid = t->tid;
    if (t->cpu >= 0 && t->cpu < 64)
        x->cpus |= 1ULL << t->cpu;
}

static int calls(qslab_cache *c, int fd, int which)
{
    if (!c || !(c->debug & QS_DBG_U)) {
        errno = EINVAL;
        return -1;
    }
    static QS_BSS_APART struct sites st; /* 3.5 KiB: not on the caller's stack */
    static qs_lock calls_lock;
    qs_lock_acquire(&calls_lock);
    memset(&st, 0, sizeof(st));
    st.which = which;
    st.now = qs_os_now_ms();
    dbg_walk_cache(c, site_add, &st);
    /* most objects first (selection: 64 sites at most) */
    for (unsigned i = 0; i < st.n; i++)
        for (unsigned j = i + 1; j < st.n; j++)
            if (st.s[j].count > st.s[i].count) {
                struct site t = st.s[i];
                st.s[i] = st.s[j];
                st.s[j] = t;
            }
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    for (unsigned i = 0; i < st.n; i++) {
        struct site *x = &st.s[i];
        size_t from = b.len;
        qs_buf_u64(&b, x->count);
        qs_buf_pad(&b, 8, true, from);
        qs_buf_putc(&b, ' ');
        if (x->addr)
            dbg_put_addr(&b, x->addr);
        else
            qs_buf_str(&b, "<unknown>");
        qs_buf_str(&b, " age=");
        qs_buf_u64(&b, x->min_age);
        qs_buf_putc(&b, '/');
        qs_buf_u64(&b, x->sum_age / x->count);
        qs_buf_putc(&b, '/');
        qs_buf_u64(&b, x->max_age);
        qs_buf_str(&b, " ms tid=");
        qs_buf_u64(&b, (uint64_t)x->min_tid);
        if (x->max_tid != x->min_tid) {
            qs_buf_putc(&b, '-');
            qs_buf_u64(&b, (uint64_t)x->max_tid);
        }
        qs_buf_str(&b, " cpus=");
        for (int k = 0, first = 1; k < 64; k++) { /* ranges: 0-3,6 */
            if (!(x->cpus >> k & 1))
                continue;
            int from = k;
            while (k < 63 && (x->cpus >> (k + 1) & 1))
                k++;
            if (!first)
                qs_buf_putc(&b, ',');
            qs_buf_u64(&b, (uint64_t)from);
            if (k > from) {
                qs_buf_putc(&b, '-');
                qs_buf_u64(&b, (uint64_t)k);
            }
            first = 0;
        }
        qs_buf_putc(&b, '\n');
        qs_os_write(fd, b.p, b.len);
        b.len = 0;
    }
    if (st.other) {
        qs_buf_u64(&b, st.other);
        qs_buf_str(&b, " objects from other call sites\n");
        qs_os_write(fd, b.p, b.len);
    }
    int n = (int)st.n;
    qs_lock_release(&calls_lock);
    return n;
}

QSLAB_EXPORT int qslab_cache_alloc_calls(qslab_cache *c, int fd)
{
    return calls(c, fd, 0);
}

QSLAB_EXPORT int qslab_cache_free_calls(qslab_cache *c, int fd)
{
    return calls(c, fd, 1);
}

void qs_debug_leaks(qslab_cache *c, int fd)
{
    static const char head[] =
        "qslab: objects still allocated, by call site (count, where, age min/avg/max):\n";
    qs_os_write(fd, head, sizeof(head) - 1);
    calls(c, fd, 0);
}

/* The moved object keeps where it was allocated (its owner allocated it
 * there; the pass's own allocation of `to` is no news): its alloc track,
 * the first of the two, copied over the one `to` got.  The pass owns both
 * objects now (old not yet freed, new not yet handed to the owner). */
void qs_debug_moved(qslab_cache *fc, void *from, qslab_cache *tc, void *to)
{
    if ((fc->debug & QS_DBG_U) && (tc->debug & QS_DBG_U))
        memcpy(track_of(tc, to, 0), track_of(fc, from, 0), sizeof(struct qs_track));
}
