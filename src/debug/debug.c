/*
 * debug.c - SLUB's debugging for qslab caches: consistency checks (F), red
 * zones (Z), poisoning (P), owner tracking (U), tracing (T), and qslab's
 * repair mode (R).  docs/debugging.md is the user's guide.
 *
 * WHICH CACHES.  A cache's flags (QSLAB_RED_ZONE ...) and the environment
 * (QSLAB_DEBUG, SLUB's slub_debug syntax, parsed by qs_debug_flags_for)
 * decide its debug flags when it is made.  A cache with any is served by the
 * debug front end below: no per-owner caching at all (its owners' queues
 * stay inert, so the inline fast paths always miss, as for SLUB's caches),
 * every allocation and free on its node's lists under the node's lock,
 * where the checks run.  This is SLUB's own choice since Linux 6.2 (debug
 * caches allocate from the node's partial list under list_lock).  So a
 * cache without debug flags pays nothing: the fast paths do not test for
 * debugging, and the slow paths only where the debug front end's objects
 * pass (core/slab.c's birth, node.c's allocation: one test of c->debug there).
 *
 * SLOT LAYOUT of a debug cache (offsets from the object, the pointer the
 * user holds; slot_size is the stride):
 *
 *   -red_left     0          obj_size       link_off  track_off
 *   [ left red ][ object      ][ right red  ][ link  ][ alloc, free track ][ pad ]
 *
 * The left red zone of object k is the tail of slot k-1 (for the first
 * object, the bytes before the slab's base: core/slab.c starts base red_left in).
 * The link word (the free-list link of a free object, 0 while allocated) is
 * never inside the object, so poison covers all of a free object.  Right red
 * zone: the object's padding to 8 bytes and 16 more, so an overflow by 1 to
 * 16 bytes lands in it.  Values, as SLUB's: red zones 0xbb while the object
 * is free, 0xcc while allocated; a free object (no constructor) is 0x6b with
 * a last byte 0xa5; an allocated one starts as 0x5a (poison: reading it
 * before writing shows); padding 0x5a.  Constructor caches are never
 * poisoned (the constructed state must survive; SLUB does the same): red
 * zones, link checks and tracking still apply.
 *
 * CHECKS.  Allocation (object leaving a free list): red zones still 0xbb,
 * poison intact (else a write after free: "Poison overwritten" with its
 * offset).  Free: the link word must be 0 (an allocated object); a link
 * there is "Object already free", anything else "Freepointer corrupt"; the
 * red zones 0xcc (else an overflow or underflow).  A free-list link that
 * does not decode is "Freepointer corrupt".  qslab_cache_validate and the
 * purger (every QS_DEBUG_WALK_MS) check every object of every slab.
 *
 * REPORTS are SLUB's: a first line "BUG <cache>: <what>", the bad range and
 * first bad byte, the slab, the owners (U), a hexdump of the object and its
 * red zones; written with write(2) (no stdio, no allocation).  Then the
 * fatal handler (default: abort).  If the handler returns, nothing is
 * corrupted: a bad free is not done (a double free) or done after the red
 * zones are restored (an overflow); a bad object on allocation is kept out
 * of use ("quarantined", counted as allocated).  Repair mode (R) prints
 * "FIX <cache>: Restoring ..." instead of calling the handler, restores,
 * counts and goes on.
 *
 * LOCKING.  Every change of an object's debug state (red zones, poison,
 * tracks, link) is made under its node's lock, with the object's move
 * onto or off its slab's free list; the walks hold the same lock.  So a
 * walk never sees a half-written red zone.  The bytes of an allocated
 * object belong to its user: only their red zones are read.
 */
#define _GNU_SOURCE
#include "front/fastpath.h"
#include "front/front.h"
#include "debug/debug.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* V: valgrind's memcheck (client requests, from Debian's valgrind package
 * when it is installed: they cost nothing natively) and ASan's manual
 * poisoning (in ASan builds) learn where objects begin and end. */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define QS_HAVE_VALGRIND 1
#endif
#endif
#ifdef QS_HAVE_ASAN /* internal.h */
#include <sanitizer/asan_interface.h>
#endif
#ifndef QS_HAVE_VALGRIND
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MAKE_MEM_NOACCESS(p, n) ((void)(p), (void)(n))
#define VALGRIND_MAKE_MEM_UNDEFINED(p, n) ((void)(p), (void)(n))
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#define VALGRIND_MALLOCLIKE_BLOCK(p, n, rz, z) ((void)(p), (void)(n))
#define VALGRIND_FREELIKE_BLOCK(p, rz) ((void)(p))
#define VALGRIND_DISABLE_ERROR_REPORTING ((void)0)
#define VALGRIND_ENABLE_ERROR_REPORTING ((void)0)
#endif

bool qs_debug_tools;

/* [p, p+n) is not the program's to touch (red zones, free objects) */
static void tools_noaccess(void *p, size_t n)
{
    VALGRIND_MAKE_MEM_NOACCESS(p, n);
#ifdef QS_HAVE_ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
}

static void tools_usable(void *p, size_t n)
{
    VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#ifdef QS_HAVE_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

#define RED_INACTIVE 0xbb
#define RED_ACTIVE 0xcc
#define POISON_FREE 0x6b
#define POISON_END 0xa5
#define POISON_INUSE 0x5a
#define QS_RED_MIN 16          /* right red zone past the object's 8-byte padding */
#define QS_TRACK_DEPTH 4       /* frames per track */
#define QS_SCAN_SITE 4096      /* stack bytes scanned for the call site */
#define QS_SCAN_MORE 512       /* ... and past it for the frames after it */
#define QS_DEBUG_WALK_MS 1000  /* the purger checks debug caches this often */
#define QS_DUMP_MAX 256        /* object bytes in a report's hexdump */

struct qs_track {
    uintptr_t addrs[QS_TRACK_DEPTH]; /* the call site first; 0: none */
    uint64_t when_ms;
    int32_t tid, cpu;
};

static inline struct qs_track *track_of(const qslab_cache *c, void *obj, int which)
{
    return (struct qs_track *)((char *)obj + c->track_off) + which;
}

/* ---- flags: the cache's, and QSLAB_DEBUG ---- */

unsigned qs_debug_letter(char ch)
{
    switch (ch | 0x20) {
    case 'f':
        return QS_DBG_F;
    case 'z':
        return QS_DBG_Z;
    case 'p':
        return QS_DBG_P;
    case 'u':
        return QS_DBG_U;
    case 't':
        return QS_DBG_T;
    case 'r':
        return QS_DBG_R;
    case 'v':
        return QS_DBG_V;
    default:
        return 0;
    }
}

/* Does `name` match the pattern [p, p+len) (a trailing '*': a prefix)? */
static bool name_matches(const char *name, const char *p, size_t len)
{
    if (len && p[len - 1] == '*')
        return strncmp(name, p, len - 1) == 0;
    return strlen(name) == len && strncmp(name, p, len) == 0;
}

/*
 * QSLAB_DEBUG, as SLUB's slub_debug:  block (';' block)*
 *   block := flags (',' cache)*       flags: letters of FZPUTR, '-' (none),
 *                                     or nothing (FZPU)
 *   cache := a name; a trailing '*' matches every name with that prefix
 * A block without names sets the flags of every cache; a block naming the
 * cache (the first one that does) wins over it.  The cache's own flags are
 * added, unless the block says '-'.
 */
#define QS_DEBUG_OFF 0x80000000u /* QSLAB_DEBUG said '-' */
static unsigned flags_for(const char *name, unsigned long flags);

unsigned qs_debug_flags_for(const char *name, unsigned long flags)
{
    return qs_debug_final(flags_for(name, flags));
}

static unsigned own_flags(unsigned long flags)
{
    return (flags & QSLAB_CONSISTENCY_CHECKS ? QS_DBG_F : 0) |
           (flags & QSLAB_RED_ZONE ? QS_DBG_Z : 0) | (flags & QSLAB_POISON ? QS_DBG_P : 0) |
           (flags & QSLAB_STORE_USER ? QS_DBG_U : 0) | (flags & QSLAB_TRACE ? QS_DBG_T : 0) |
           (flags & QSLAB_DEBUG_REPAIR ? QS_DBG_R : 0);
}

unsigned qs_debug_flags_own(unsigned long flags)
{
    return qs_debug_final(own_flags(flags));
}

static unsigned flags_for(const char *name, unsigned long flags)
{
    unsigned own = own_flags(flags);
    const char *v = qs_os_getenv("QSLAB_DEBUG");
    if (!v)
        return own;
    static int warned;
    int all = -1, mine = -1; /* -1: not said; else flags, or -2 for '-' */
    for (const char *b = v; *b;) {
        const char *end = strchr(b, ';');
        if (!end)
            end = b + strlen(b);
        const char *comma = memchr(b, ',', (size_t)(end - b));
        const char *fend = comma ? comma : end;
        int fl = 0;
        if (fend == b) {
            fl = QS_DBG_F | QS_DBG_Z | QS_DBG_P | QS_DBG_U;
        } else {
            for (const char *f = b; f < fend; f++) {
                if (*f == '-') {
                    fl = -2;
                    break;
                }
                unsigned l = qs_debug_letter(*f);
                if (!l && *f != ' ' && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
                    qs_warn("QSLAB_DEBUG: unknown flag '%s' ignored (flags: F Z P U T R V, -)", f);
                fl |= (int)l;
            }
        }
        if (!comma) {
            all = fl;
        } else if (mine == -1) {
            for (const char *n = comma + 1; n < end;) {
                const char *ne = memchr(n, ',', (size_t)(end - n));
                if (!ne)
                    ne = end;
                if (ne > n && name_matches(name, n, (size_t)(ne - n))) {
                    mine = fl;
                    break;
                }
                n = ne + (ne < end);
            }
        }
        b = *end ? end + 1 : end;
    }
    int env = mine != -1 ? mine : all;
    if (env == -2)
        return QS_DEBUG_OFF; /* not even V under memcheck */
    unsigned d = own | (env > 0 ? (unsigned)env : 0);
    return d;
}

/* The flags a cache gets: under valgrind every cache tells memcheck about
 * its objects (V); with V, the tools check red zones and poison better
 * than qslab can (they see the access, not its trace), so Z and P are
 * theirs. */
/* Is the program running under valgrind's memcheck (not another tool:
 * callgrind counts qslab's own instructions)?  Memcheck answers a check of
 * a byte it was told is inaccessible; the other tools answer 0. */
static bool under_memcheck(void)
{
    static int known; /* 0 unknown, 1 no, 2 yes */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k)
        return k == 2;
    bool yes = false;
#ifdef QS_HAVE_VALGRIND
    if (RUNNING_ON_VALGRIND) {
        static char probe[8];
        VALGRIND_MAKE_MEM_NOACCESS(probe, 1);
        yes = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(probe, 1) != 0;
        VALGRIND_MAKE_MEM_DEFINED(probe, 1);
    }
#endif
    __atomic_store_n(&known, yes ? 2 : 1, __ATOMIC_RELAXED);
    return yes;
}

unsigned qs_debug_final(unsigned d)
{
    if (d != QS_DEBUG_OFF && under_memcheck())
        d |= QS_DBG_V;
    if (d == QS_DEBUG_OFF)
        return 0;
    if (d & QS_DBG_V)
        d &= ~(unsigned)(QS_DBG_Z | QS_DBG_P);
    return d;
}

void qs_debug_flags_str(unsigned debug, char *out)
{
    static const char letters[] = "FZPUTRV";
    int k = 0;
    for (int i = 0; i < 7; i++)
        if (debug & (1u << i))
            out[k++] = letters[i];
    out[k] = '\0';
}

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

bool qs_debug_layout(qslab_cache *c, size_t size, size_t align, size_t *slot, size_t *link_off)
{
    unsigned d = c->debug;
    /* malloc's objects of 16 bytes and more are 16-aligned: the stride too */
    if (align < 16 && size >= 16)
        align = 16;
    bool red = d & (QS_DBG_Z | QS_DBG_V); /* V: red zones the tools guard */
    size_t red_left = red ? round_up(QS_RED_MIN, align) : 0;
    size_t link = round_up(size, 8) + (red ? QS_RED_MIN : 0);
    size_t end = link + sizeof(uintptr_t);
    c->track_off = (uint32_t)end;
    if (d & QS_DBG_U)
        end += 2 * sizeof(struct qs_track);
    size_t s = round_up(end + red_left, align);
    if (s > UINT32_MAX || red_left > UINT32_MAX)
        return false;
    c->red_left = (uint32_t)red_left;
    if (d & QS_DBG_V)
        __atomic_store_n(&qs_debug_tools, true, __ATOMIC_RELAXED);
    *slot = s;
    *link_off = link;
    return true;
}

/* The user's bytes of a free object hold the poison (no constructor). */
static inline bool poisoned(const qslab_cache *c)
{
    return (c->debug & QS_DBG_P) && !c->ctor;
}

static void fill_free(qslab_cache *c, char *obj)
{
    if (c->debug & QS_DBG_Z) {
        memset(obj - c->red_left, RED_INACTIVE, c->red_left);
        memset(obj + c->obj_size, RED_INACTIVE, c->link_off - c->obj_size);
    }
    if (poisoned(c)) {
        memset(obj, POISON_FREE, c->obj_size - 1);
        obj[c->obj_size - 1] = (char)POISON_END;
    }
}

void qs_debug_born(qslab_cache *c, char *first, uint32_t n)
{
    size_t pad_from = c->track_off + (c->debug & QS_DBG_U ? 2 * sizeof(struct qs_track) : 0);
    size_t pad_to = c->slot_size - c->red_left;
    for (uint32_t i = 0; i < n; i++) {
        char *obj = first + (size_t)i * c->slot_size;
        fill_free(c, obj);
        if (c->debug & QS_DBG_U)
            memset(track_of(c, obj, 0), 0, 2 * sizeof(struct qs_track));
        if (pad_to > pad_from)
            memset(obj + pad_from, POISON_INUSE, pad_to - pad_from);
        if (c->debug & QS_DBG_V) /* red zones and object: the tools guard them */
            tools_noaccess(obj - c->red_left, c->red_left + c->link_off);
    }
}

void qs_debug_slab_released(struct qs_slab *s)
{
    qslab_cache *c = s->cache;
    if (c && (c->debug & QS_DBG_V))
        tools_usable(s->mem, qs_slab_bytes(s->order));
}

void qs_debug_large(void *p, size_t size, bool alloc)
{
    if (alloc)
        VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, 1); /* fresh mappings are zero */
    else
        VALGRIND_FREELIKE_BLOCK(p, 0);
}

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
static struct qs_module modules[QS_MAX_MODULES];
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
    static const uintptr_t entries[] = {
        (uintptr_t)&qslab_cache_alloc,  (uintptr_t)&qslab_cache_alloc_node,
        (uintptr_t)&qslab_cache_free,   (uintptr_t)&qslab_malloc,
        (uintptr_t)&qslab_malloc_node,  (uintptr_t)&qslab_calloc,
        (uintptr_t)&qslab_realloc,      (uintptr_t)&qslab_aligned_alloc,
        (uintptr_t)&qslab_free,         (uintptr_t)&qslab_cache_destroy,
    };
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if (t == entries[i])
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

/* the scan reads other frames' words: the sanitizers' red zones too */
#define QS_NO_SANITIZE __attribute__((no_sanitize("address", "thread")))

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

static void record(qslab_cache *c, void *obj, int which)
{
    qs_track_record(track_of(c, obj, which));
}

/* ---- reports ---- */

static const int report_fd = 2;

static void out(struct qs_buf *b)
{
    qs_buf_putc(b, '\n');
    qs_os_write(report_fd, b->p, b->len);
    b->len = 0;
}

static void put_hex2(struct qs_buf *b, unsigned v)
{
    qs_buf_putc(b, "0123456789abcdef"[(v >> 4) & 15]);
    qs_buf_putc(b, "0123456789abcdef"[v & 15]);
}

/* "0x55d0c1a2b3c4 func+0x1a (module+0x1234)" */
static void put_addr(struct qs_buf *b, uintptr_t a)
{
    qs_buf_hex(b, a);
    Dl_info info;
    if (dladdr((void *)a, &info)) {
        if (info.dli_sname) {
            qs_buf_putc(b, ' ');
            qs_buf_str(b, info.dli_sname);
            qs_buf_putc(b, '+');
            qs_buf_hex(b, a - (uintptr_t)info.dli_saddr);
        }
        const char *f = info.dli_fname ? info.dli_fname : "?";
        const char *slash = strrchr(f, '/');
        qs_buf_str(b, " (");
        qs_buf_str(b, slash ? slash + 1 : f);
        qs_buf_putc(b, '+');
        qs_buf_hex(b, a - (uintptr_t)info.dli_fbase);
        qs_buf_putc(b, ')');
    }
}

static void put_track(struct qs_buf *b, const char *what, const struct qs_track *t)
{
    if (!t->when_ms) {
        qs_buf_str(b, what);
        qs_buf_str(b, ": never");
        out(b);
        return;
    }
    uint64_t now = qs_os_now_ms();
    qs_buf_str(b, what);
    qs_buf_str(b, " by thread ");
    qs_buf_u64(b, (uint64_t)t->tid);
    qs_buf_str(b, " on CPU ");
    qs_buf_u64(b, (uint64_t)t->cpu);
    qs_buf_str(b, ", ");
    qs_buf_u64(b, now - t->when_ms);
    qs_buf_str(b, " ms ago:");
    out(b);
    for (int i = 0; i < QS_TRACK_DEPTH && t->addrs[i]; i++) {
        qs_buf_str(b, i ? "  ? " : "    ");
        put_addr(b, t->addrs[i]);
        out(b);
    }
}

void qs_track_print(struct qs_buf *b, const char *what, const void *track)
{
    put_track(b, what, track);
}

void qs_report_line(struct qs_buf *b)
{
    out(b);
}

/* Hexdump [p, p+n) as lines of 16: "<label> 0x...: bb bb ...  ........"
 * (bytes the tools guard too: their reports are off meanwhile) */
static QS_NO_SANITIZE void dump(struct qs_buf *b, const char *label, const uint8_t *p, size_t n)
{
    VALGRIND_DISABLE_ERROR_REPORTING;
    for (size_t i = 0; i < n; i += 16) {
        size_t from = b->len;
        qs_buf_str(b, label);
        qs_buf_pad(b, 8, false, from);
        qs_buf_hex(b, (uintptr_t)(p + i));
        qs_buf_str(b, ": ");
        size_t k = n - i < 16 ? n - i : 16;
        for (size_t j = 0; j < 16; j++) {
            if (j < k) {
                put_hex2(b, p[i + j]);
                qs_buf_putc(b, ' ');
            } else {
                qs_buf_str(b, "   ");
            }
        }
        qs_buf_putc(b, ' ');
        for (size_t j = 0; j < k; j++)
            qs_buf_putc(b, p[i + j] >= 0x20 && p[i + j] < 0x7f ? (char)p[i + j] : '.');
        out(b);
    }
    VALGRIND_ENABLE_ERROR_REPORTING;
}

/* A problem found in object obj of slab s: kind of check, and the bad range
 * [bad, bad_end) that should hold `expect` (bad NULL: no byte range). */
struct problem {
    const char *what;   /* "Right Redzone overwritten" ... */
    const uint8_t *bad, *bad_end;
    int expect;         /* the byte expected there, or -1 */
    const char *detail; /* one more line, or NULL */
};

static void report(qslab_cache *c, struct qs_slab *s, const char *obj, const struct problem *pb)
{
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "BUG ");
    qs_buf_str(&b, c->name);
    qs_buf_str(&b, ": ");
    qs_buf_str(&b, pb->what);
    out(&b);
    qs_buf_str(&b, "-----------------------------------------------------------------------------");
    out(&b);
    if (pb->bad) {
        qs_buf_hex(&b, (uintptr_t)pb->bad);
        qs_buf_putc(&b, '-');
        qs_buf_hex(&b, (uintptr_t)pb->bad_end - 1);
        qs_buf_str(&b, " @offset=");
        long off = (long)(pb->bad - (const uint8_t *)obj);
        if (off < 0) {
            qs_buf_putc(&b, '-');
            qs_buf_u64(&b, (uint64_t)-off);
        } else {
            qs_buf_u64(&b, (uint64_t)off);
        }
        qs_buf_str(&b, ". First byte ");
        qs_buf_hex(&b, *pb->bad);
        qs_buf_str(&b, " instead of ");
        qs_buf_hex(&b, (uint64_t)pb->expect);
        out(&b);
    }
    if (pb->detail) {
        qs_buf_str(&b, pb->detail);
        out(&b);
    }
    char fl[8];
    qs_debug_flags_str(c->debug, fl);
    qs_buf_str(&b, "Object ");
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " (");
    qs_buf_u64(&b, c->obj_size);
    qs_buf_str(&b, " bytes) in slab ");
    qs_buf_hex(&b, (uintptr_t)s->mem);
    qs_buf_str(&b, " objects=");
    qs_buf_u64(&b, s->objects);
    qs_buf_str(&b, " used=");
    qs_buf_u64(&b, s->inuse);
    qs_buf_str(&b, " node=");
    qs_buf_u64(&b, s->node);
    qs_buf_str(&b, " flags=");
    qs_buf_str(&b, fl);
    out(&b);
    if (c->debug & QS_DBG_U) {
        put_track(&b, "Allocated", track_of(c, (void *)obj, 0));
        put_track(&b, "Freed", track_of(c, (void *)obj, 1));
    }
    const uint8_t *o = (const uint8_t *)obj;
    if (c->red_left)
        dump(&b, "Redzone", o - c->red_left, c->red_left);
    size_t n = c->obj_size < QS_DUMP_MAX ? c->obj_size : QS_DUMP_MAX;
    dump(&b, "Object", o, n);
    if (pb->bad && pb->bad >= o + n && pb->bad < o + c->obj_size) { /* the bad bytes too */
        const uint8_t *from = o + ((size_t)(pb->bad - o) & ~(size_t)15);
        dump(&b, "Object", from, (size_t)(o + c->obj_size - from) < 32 ? (size_t)(o + c->obj_size - from) : 32);
    }
    if (c->link_off > c->obj_size)
        dump(&b, "Redzone", o + c->obj_size, c->link_off - c->obj_size);
    dump(&b, "Freeptr", o + c->link_off, sizeof(uintptr_t));
}

/* After report(): repair mode restores and counts; else the fatal handler. */
static void conclude(qslab_cache *c, const char *obj, const struct problem *pb)
{
    if (c->debug & QS_DBG_R) {
        char text[256];
        struct qs_buf b = {text, 0, sizeof(text)};
        qs_buf_str(&b, "FIX ");
        qs_buf_str(&b, c->name);
        qs_buf_str(&b, ": ");
        if (pb->bad && pb->expect >= 0) {
            qs_buf_str(&b, "Restoring ");
            qs_buf_hex(&b, (uintptr_t)pb->bad);
            qs_buf_putc(&b, '-');
            qs_buf_hex(&b, (uintptr_t)pb->bad_end - 1);
            qs_buf_putc(&b, '=');
            qs_buf_hex(&b, (uint64_t)pb->expect);
        } else {
            qs_buf_str(&b, "Object ");
            qs_buf_hex(&b, (uintptr_t)obj);
            qs_buf_str(&b, " left alone");
        }
        out(&b);
        __atomic_fetch_add(&c->debug_repairs, 1, __ATOMIC_RELAXED);
        return;
    }
    qs_fatal("BUG %s: %s (object %p)", c->name, pb->what, obj);
}

/* The first and last byte of [p, p+n) that differ from v; NULL if none.
 * Eight bytes at a time until a difference (the kernel's memchr_inv): the
 * common case, intact poison, costs a compare per word. */
static const uint8_t *mismatch(const uint8_t *p, size_t n, uint8_t v, const uint8_t **last)
{
    uint64_t pat = 0x0101010101010101ULL * v;
    size_t i = 0;
    for (; i < n && ((uintptr_t)(p + i) & 7); i++)
        if (p[i] != v)
            goto found;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != pat)
            break;
    }
    for (; i < n; i++)
        if (p[i] != v)
            goto found;
    return NULL;
found:;
    size_t j = n;
    while (j > i + 1 && p[j - 1] == v)
        j--;
    *last = p + j - 1;
    return p + i;
}

/* Check a red zone or poison range; report and conclude if bad.  True if
 * it was intact. */
static bool check_bytes(qslab_cache *c, struct qs_slab *s, char *obj, const char *what, uint8_t *p,
                        size_t n, uint8_t v, bool fatal)
{
    const uint8_t *last = NULL, *first = mismatch(p, n, v, &last);
    if (!first)
        return true;
    struct problem pb = {what, first, last + 1, v, NULL};
    report(c, s, obj, &pb);
    if (fatal)
        conclude(c, obj, &pb);
    return false;
}

/* Red zones of obj, expected to hold v; restored afterwards when asked. */
static bool check_red(qslab_cache *c, struct qs_slab *s, char *obj, uint8_t v, bool fatal)
{
    if (!(c->debug & QS_DBG_Z))
        return true;
    bool ok = check_bytes(c, s, obj, "Left Redzone overwritten", (uint8_t *)obj - c->red_left,
                          c->red_left, v, fatal);
    ok &= check_bytes(c, s, obj, "Right Redzone overwritten", (uint8_t *)obj + c->obj_size,
                      c->link_off - c->obj_size, v, fatal);
    return ok;
}

/* The poison of a free object: 0x6b .. 0xa5 */
static bool check_poison(qslab_cache *c, struct qs_slab *s, char *obj, bool fatal)
{
    if (!poisoned(c))
        return true;
    bool ok = check_bytes(c, s, obj, "Poison overwritten", (uint8_t *)obj, c->obj_size - 1,
                          POISON_FREE, fatal);
    if (ok)
        ok = check_bytes(c, s, obj, "Poison overwritten", (uint8_t *)obj + c->obj_size - 1, 1,
                         POISON_END, fatal);
    return ok;
}

static void set_red(qslab_cache *c, char *obj, uint8_t v)
{
    if (c->debug & QS_DBG_Z) {
        memset(obj - c->red_left, v, c->red_left);
        memset(obj + c->obj_size, v, c->link_off - c->obj_size);
    }
}

static void trace(qslab_cache *c, struct qs_slab *s, void *obj, const char *what)
{
    char text[256];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "TRACE ");
    qs_buf_str(&b, c->name);
    qs_buf_putc(&b, ' ');
    qs_buf_str(&b, what);
    qs_buf_putc(&b, ' ');
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " inuse=");
    qs_buf_u64(&b, s->inuse);
    qs_buf_str(&b, " fp=");
    qs_buf_hex(&b, (uintptr_t)s->freelist);
    out(&b);
    if (what[0] == 'f') /* the object as it is freed (SLUB's trace does so) */
        dump(&b, "Object", obj, c->obj_size < 64 ? c->obj_size : 64);
}

/* F: the slab's own invariants, on every alloc and free. */
static bool check_slab(qslab_cache *c, struct qs_slab *s, char *obj)
{
    if (!(c->debug & QS_DBG_F))
        return true;
    const char *why = NULL;
    if (s->cache != c)
        why = "slab of another cache";
    else if (s->inuse > s->objects)
        why = "slab has more objects in use than it holds";
    else if (s->freelist && !qs_slab_valid_obj(s, s->freelist))
        why = "slab's free list does not point to one of its objects";
    if (!why)
        return true;
    struct problem pb = {"Slab corrupt", NULL, NULL, -1, why};
    report(c, s, obj, &pb);
    conclude(c, obj, &pb);
    return false;
}

bool qs_debug_alloc_locked(qslab_cache *c, struct qs_slab *s, void *p)
{
    char *obj = p;
    check_slab(c, s, obj);
    bool ok = check_red(c, s, obj, RED_INACTIVE, true);
    ok &= check_poison(c, s, obj, true);
    if (!ok && !(c->debug & QS_DBG_R)) {
        /* the handler returned: keep the object out of use (counted as
         * allocated, red zones as an allocated object's: quiet walks) */
        set_red(c, obj, RED_ACTIVE);
        __atomic_fetch_add(&c->debug_quarantined, 1, __ATOMIC_RELAXED);
        return false;
    }
    set_red(c, obj, RED_ACTIVE);
    if (poisoned(c))
        memset(obj, POISON_INUSE, c->obj_size);
    if (c->debug & QS_DBG_V) {
        /* a heap block to memcheck (leaks, use after free, its stack);
         * the constructed state of a constructor cache is defined */
        VALGRIND_MALLOCLIKE_BLOCK(obj, c->obj_size, c->red_left, 0);
        if (c->ctor)
            VALGRIND_MAKE_MEM_DEFINED(obj, c->obj_size);
#ifdef QS_HAVE_ASAN
        ASAN_UNPOISON_MEMORY_REGION(obj, c->obj_size);
#endif
    }
    if (c->debug & QS_DBG_U)
        record(c, obj, 0);
    if (c->debug & QS_DBG_T)
        trace(c, s, obj, "alloc");
    return true;
}

/* F on a constructor cache: the object must come back in its constructed
 * state (the contract of qslab_cache_create), for objects up to
 * QS_CTOR_CHECK_MAX.  What the constructor sets is found by running it on
 * two copies on the stack, at different addresses, one filled with 0x00 and
 * one with 0xff:
 * - a word that, in both copies, points the same distance from the copy's
 *   start is a pointer into the object itself (an empty list head points at
 *   itself): the object's word must point as far from the object;
 * - any other byte the two agree on is one the constructor sets, to a value
 *   that depends neither on the address nor on what was there: the object
 *   must hold it;
 * - the rest is not the constructor's (kernel-style constructors set a few
 *   fields and leave the others to the user): not compared.
 * The constructor must have no effect outside the object (docs/debugging.md). */
#define QS_CTOR_CHECK_MAX 1024
static QS_NOINLINE bool ctor_compare(qslab_cache *c, struct qs_slab *s, char *obj)
{
    /* then: want[] the expected bytes, used[k] whether byte k is compared */
    _Alignas(64) uint8_t want[QS_CTOR_CHECK_MAX], used[QS_CTOR_CHECK_MAX];
    size_t size = c->obj_size;
    memset(want, 0, size);
    memset(used, 0xff, size);
    c->ctor(want);
    c->ctor(used);
    for (size_t k = 0; k < size;) {
        uintptr_t a, b;
        if (k % sizeof(uintptr_t) == 0 && k + sizeof(uintptr_t) <= size) {
            memcpy(&a, want + k, sizeof a);
            memcpy(&b, used + k, sizeof b);
            uintptr_t off = a - (uintptr_t)want;
            if (a != b && off == b - (uintptr_t)used && off <= size) {
                a = (uintptr_t)obj + off; /* into the object, or just past it */
                memcpy(want + k, &a, sizeof a);
                memset(used + k, 1, sizeof a);
                k += sizeof a;
                continue;
            }
        }
        used[k] = want[k] == used[k];
        k++;
    }
    size_t first = size, last = 0;
    for (size_t k = 0; k < size; k++)
        if (used[k] && (uint8_t)obj[k] != want[k]) {
            if (first == size)
                first = k;
            last = k;
        }
    if (first == size)
        return true;
    struct problem pb = {"Object not in its constructed state", (const uint8_t *)obj + first,
                         (const uint8_t *)obj + last + 1, want[first],
                         "Freed with bytes the constructor sets changed (restored in repair mode)"};
    report(c, s, obj, &pb);
    conclude(c, obj, &pb);
    if (c->debug & QS_DBG_R)
        for (size_t k = first; k <= last; k++)
            if (used[k])
                obj[k] = (char)want[k];
    return false;
}

/* its 2 KiB of stack set up only when there is a constructor to check
 * (the frame cost every F cache's free 25 instructions) */
static inline bool check_ctor(qslab_cache *c, struct qs_slab *s, char *obj)
{
    if (!(c->debug & QS_DBG_F) || !c->ctor || c->obj_size > QS_CTOR_CHECK_MAX || c->align > 64)
        return true;
    return ctor_compare(c, s, obj);
}

bool qs_debug_free_locked(qslab_cache *c, struct qs_slab *s, void *p)
{
    char *obj = p;
    uintptr_t w = *qs_link(c, obj);
    if (w != 0) {
        bool twice = qs_looks_free(c, w);
        struct problem pb = {twice ? "Object already free" : "Freepointer corrupt", NULL, NULL, -1,
                             twice ? "The object is free: freed twice"
                                   : "The word after the object's red zone was overwritten"};
        if (!twice) {
            pb.bad = (const uint8_t *)qs_link(c, obj);
            pb.bad_end = pb.bad + sizeof(uintptr_t);
            pb.expect = 0;
        }
        report(c, s, obj, &pb);
        if (twice) { /* never freed again: the handler, or repair leaves it */
            conclude(c, obj, &pb);
            return false;
        }
        conclude(c, obj, &pb);
        *qs_link(c, obj) = 0;
    }
    if (!check_slab(c, s, obj))
        return false;
    /* an overflow: reported, then the free goes on with the red zones
     * restored (the object is the caller's to free) */
    check_red(c, s, obj, RED_ACTIVE, true);
    if (!check_ctor(c, s, obj) && !(c->debug & QS_DBG_R))
        return false; /* the handler returned: kept out of the cache */
    if (c->debug & QS_DBG_U)
        record(c, obj, 1);
    if (c->debug & QS_DBG_T)
        trace(c, s, obj, "free");
    fill_free(c, obj);
    if (c->debug & QS_DBG_V) {
        VALGRIND_FREELIKE_BLOCK(obj, c->red_left); /* memcheck: no access */
#ifdef QS_HAVE_ASAN
        ASAN_POISON_MEMORY_REGION(obj, c->obj_size);
#endif
    }
    return true;
}

void qs_debug_bad_link(qslab_cache *c, void *obj)
{
    struct qs_slab *s = qs_slab_lookup(obj);
    struct problem pb = {"Freepointer corrupt", (const uint8_t *)qs_link(c, obj),
                         (const uint8_t *)qs_link(c, obj) + sizeof(uintptr_t), -1,
                         "A free object's free-list link does not decode (written after free?)"};
    if (s)
        report(c, s, obj, &pb);
    pb.bad = NULL; /* nothing to restore: the list after it is lost */
    conclude(c, obj, &pb);
}

bool qs_debug_bad_pointer(qslab_cache *c, struct qs_slab *s, const void *p)
{
    uintptr_t off = (uintptr_t)p + c->red_left - (uintptr_t)s->base;
    if ((uintptr_t)p + c->red_left < (uintptr_t)s->base ||
        off >= __atomic_load_n(&s->span, __ATOMIC_RELAXED))
        return false; /* not near an object born: the common message */
    char *obj = s->base + off / c->slot_size * c->slot_size;
    char detail[160];
    struct qs_buf b = {detail, 0, sizeof(detail)};
    qs_buf_hex(&b, (uintptr_t)p);
    qs_buf_str(&b, " is not an object: it points into object ");
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " at offset ");
    long o = (long)((const char *)p - obj);
    if (o < 0) {
        qs_buf_putc(&b, '-');
        o = -o;
    }
    qs_buf_u64(&b, (uint64_t)o);
    struct problem pb = {"Invalid object pointer", NULL, NULL, -1, detail};
    report(c, s, obj, &pb);
    qs_fatal("BUG %s: Invalid object pointer %p (object %p)", c->name, p, obj);
    return true;
}

/* ---- walks: every object of every slab of a debug cache ---- */

typedef void (*obj_fn)(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg);

static void walk_slab_objs(qslab_cache *c, struct qs_slab *s, obj_fn fn, void *arg)
{
    for (uint32_t i = 0; i < s->objects; i++) {
        char *obj = s->base + (size_t)i * c->slot_size;
        fn(c, s, obj, *qs_link(c, obj) == 0, arg);
    }
}

/* Every slab of c's node lists, under each node's lock. */
static void walk_cache(qslab_cache *c, obj_fn fn, void *arg)
{
    for (int i = 0; i < qs_nr_nodes; i++) {
        struct qs_node *n = &c->nodes[i];
        qs_lock_acquire(&n->lock);
        for (struct qs_slab *s = n->list.partial; s; s = s->next)
            walk_slab_objs(c, s, fn, arg);
        for (struct qs_slab *s = n->list.full; s; s = s->next)
            walk_slab_objs(c, s, fn, arg);
        for (struct qs_slab *s = n->empty_head; s; s = s->next)
            walk_slab_objs(c, s, fn, arg);
        qs_lock_release(&n->lock);
    }
}

struct check_arg {
    unsigned long bad;
    bool fatal; /* the purger's walk: the handler; validation: counted */
};

static void check_obj(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg)
{
    struct check_arg *a = arg;
    bool ok = check_red(c, s, obj, allocated ? RED_ACTIVE : RED_INACTIVE, a->fatal);
    if (!allocated)
        ok &= check_poison(c, s, obj, a->fatal);
    if (!ok) {
        a->bad++;
        if (a->fatal) { /* reported once: restored, as repair would */
            set_red(c, obj, allocated ? RED_ACTIVE : RED_INACTIVE);
            if (!allocated)
                fill_free(c, obj);
        }
    }
}

static void debug_validate(qslab_cache *c, struct qs_walk *w)
{
    struct check_arg a = {0, false};
    walk_cache(c, check_obj, &a);
    if (a.bad)
        qs_walk_problem(w, "debug checks failed (BUG reports above) in objects of the cache", c);
}

/* The purger's tick: check every debug cache, every QS_DEBUG_WALK_MS. */
static size_t debug_sweep(bool all)
{
    static uint64_t last; /* the purger's and trim's calls race: one walks */
    uint64_t now = qs_os_now_ms(), was = __atomic_load_n(&last, __ATOMIC_RELAXED);
    if ((!all && now - was < QS_DEBUG_WALK_MS) ||
        !__atomic_compare_exchange_n(&last, &was, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return 0;
    qs_lock_acquire(&qs_global);
    for (qslab_cache *c = qs_caches; c; c = c->next) {
        if (c->front != QS_FRONT_DEBUG || !(c->debug & (QS_DBG_Z | QS_DBG_P)))
            continue;
        struct check_arg a = {0, true};
        walk_cache(c, check_obj, &a);
    }
    qs_lock_release(&qs_global);
    return 0;
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
    static struct sites st; /* 3.5 KiB: not on the caller's stack */
    static qs_lock calls_lock;
    qs_lock_acquire(&calls_lock);
    memset(&st, 0, sizeof(st));
    st.which = which;
    st.now = qs_os_now_ms();
    walk_cache(c, site_add, &st);
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
            put_addr(&b, x->addr);
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

/* ---- the debug front end ---- */

static void *debug_alloc(qslab_cache *c, int node)
{
    if (node < 0)
        node = qslab_current_node();
    if (c->debug & (QS_DBG_Z | QS_DBG_P)) /* its walks (debug_sweep) */
        qs_node_purger_want();
    /* a corrupt free list met on the way isolates its slab, and
     * qs_node_alloc takes another: NULL is the OS refusing memory, which is
     * not asked again (fault injection's "the path returns NULL") */
    void *obj = qs_node_alloc(c, NULL, node);
    if (!obj)
        errno = ENOMEM;
    return obj;
}

static void debug_free(qslab_cache *c, struct qs_slab *s, void *obj)
{
    qs_node_free(c, s, obj);
}

static size_t debug_usable(struct qs_slab *s, const void *obj)
{
    return s->cache->obj_size; /* never the slot: its tail is red zone */
}

static size_t debug_shrink(qslab_cache *c)
{
    size_t bytes = 0;
    for (int n = 0; n < qs_nr_nodes; n++)
        bytes += qs_node_shrink(c, NULL, &c->nodes[n]);
    return bytes;
}

static unsigned debug_objs_per_slab(const qslab_cache *c, unsigned order)
{
    return (unsigned)((qs_slab_bytes(order) - c->red_left) / c->slot_size);
}

const struct qs_front qs_front_debug = {
    .name = "debug",
    .what = "debug caches: checked allocations from node lists, no per-owner caching (SLUB's)",
    .alloc = debug_alloc,
    .free = debug_free,
    .usable = debug_usable,
    .shrink = debug_shrink,
    .sweep = debug_sweep,
    .validate = debug_validate,
    .objs_per_slab = debug_objs_per_slab,
};
