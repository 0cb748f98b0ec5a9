/*
 * flags.c - which caches the debug front end serves, with which of SLUB's
 * debug flags (F Z P U T, qslab's R and V): the cache's own flags
 * (QSLAB_RED_ZONE ...), the environment's QSLAB_DEBUG in SLUB's slub_debug
 * syntax (qs_debug_flags_for), memcheck's V, and the flags as letters
 * ("FZPU": the reports, the statistics, the `debug` tunable).
 *
 * Apart from the checks (slot.c): this runs when a cache is made or a debug
 * twin is asked for (api/cache.c, twin.c), never on an object's way.
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"

#include <string.h>

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
    case 'q':
        return QS_DBG_Q;
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

/* The cache names of QSLAB_DEBUG that matched a cache, by their offset in
 * it (relaxed bits: set by cache creations, read by the checks below) */
#define QS_DEBUG_ENV_MAX 4096
static uint8_t names_used[QS_DEBUG_ENV_MAX / 8];

static void name_used(const char *v, const char *n)
{
    size_t off = (size_t)(n - v);
    if (off < QS_DEBUG_ENV_MAX)
        __atomic_fetch_or(&names_used[off / 8], (uint8_t)(1u << (off % 8)), __ATOMIC_RELAXED);
}

/* Each name of QSLAB_DEBUG's blocks that no cache matched: kmalloc class
 * names at start-up (kmalloc: true), those that name no class, the others
 * at exit (a program makes its caches when it likes). */
static QS_STARTUP void names_unused(bool kmalloc)
{
    const char *v = qs_os_getenv("QSLAB_DEBUG");
    if (!v || strlen(v) >= QS_DEBUG_ENV_MAX)
        return;
    for (const char *b = v; *b;) {
        const char *end = strchr(b, ';');
        if (!end)
            end = b + strlen(b);
        const char *comma = memchr(b, ',', (size_t)(end - b));
        for (const char *n = comma ? comma + 1 : end; n < end;) {
            const char *ne = memchr(n, ',', (size_t)(end - n));
            if (!ne)
                ne = end;
            size_t off = (size_t)(n - v), len = (size_t)(ne - n);
            bool km = len > 8 && !memcmp(n, "kmalloc-", 8);
            /* a class is made on its first use: at start-up, a name is
             * known if it names one (a pattern: matches one) */
            bool used = km ? qs_kmalloc_class_matches(n, len)
                           : __atomic_load_n(&names_used[off / 8], __ATOMIC_RELAXED) & (1u << (off % 8));
            if (len && !used && km == kmalloc) {
                char name[64], block[96];
                size_t k = len < sizeof(name) - 1 ? len : sizeof(name) - 1, bl = (size_t)(end - b);
                memcpy(name, n, k);
                name[k] = '\0';
                memcpy(block, b, bl < sizeof(block) - 1 ? bl : sizeof(block) - 1);
                block[bl < sizeof(block) - 1 ? bl : sizeof(block) - 1] = '\0';
                char served[QS_NAME_MAX];
                const char *near = qs_kmalloc_serving(name, served, sizeof served);
                if (!kmalloc)
                    qs_warn("QSLAB_DEBUG block '%s': no cache named '%s' was made", block, name);
                else if (near)
                    qs_warn("QSLAB_DEBUG block '%s': unknown cache '%s' ignored (a request of %s bytes is "
                            "served by %s)", block, name, name + 8, near);
                else
                    qs_warn("QSLAB_DEBUG block '%s': unknown cache '%s' ignored (the kmalloc classes are "
                            "kmalloc-8 to kmalloc-33554432, named by their object size)", block, name);
            }
            n = ne + 1;
        }
        b = *end ? end + 1 : end;
    }
}

QS_STARTUP void qs_debug_env_check(void)
{
    names_unused(true);
}

QS_STARTUP void qs_debug_env_unused(void)
{
    names_unused(false);
}

QS_STARTUP unsigned qs_debug_flags_for(const char *name, unsigned long flags)
{
    return qs_debug_final(flags_for(name, flags));
}

static unsigned own_flags(unsigned long flags)
{
    return (flags & QSLAB_CONSISTENCY_CHECKS ? QS_DBG_F : 0) |
           (flags & QSLAB_RED_ZONE ? QS_DBG_Z : 0) | (flags & QSLAB_POISON ? QS_DBG_P : 0) |
           (flags & QSLAB_STORE_USER ? QS_DBG_U : 0) | (flags & QSLAB_TRACE ? QS_DBG_T : 0) |
           (flags & QSLAB_DEBUG_REPAIR ? QS_DBG_R : 0) | (flags & QSLAB_QUARANTINE ? QS_DBG_Q : 0);
}

unsigned qs_debug_flags_own(unsigned long flags)
{
    return qs_debug_final(own_flags(flags));
}

/* THE HARDENED PROFILE (QSLAB_HARDEN=1, qslab_harden()): Z and Q on every
 * cache, added to its own flags and QSLAB_DEBUG's as those are to each
 * other; QSLAB_DEBUG=- still turns everything off.  The variable is read
 * when the first cache is made (start-up's kmalloc classes); the call
 * counts for the caches made after it (the caches in use get debug twins:
 * twin.c qs_twin_harden_all). */
static int harden_asked;
void qs_debug_harden(void)
{
    __atomic_store_n(&harden_asked, 1, __ATOMIC_RELAXED);
}

static unsigned harden_flags(void)
{
    if (__atomic_load_n(&harden_asked, __ATOMIC_RELAXED))
        return QS_DEBUG_HARDEN;
    static int known; /* 0 unknown, 1 off, 2 on */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!k) {
        bool on = qs_env_bool("QSLAB_HARDEN", 0, "the hardened profile");
        k = on ? 2 : 1;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k == 2 ? QS_DEBUG_HARDEN : 0;
}

static unsigned flags_for(const char *name, unsigned long flags)
{
    unsigned own = own_flags(flags) | harden_flags();
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
                if (!l && *f != ' ' && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
                    char ch[2] = {*f, '\0'};
                    qs_warn("QSLAB_DEBUG: unknown flag '%s' ignored (flags: F Z P U T R V Q, -)", ch);
                }
                fl |= (int)l;
            }
        }
        if (!comma) {
            all = fl;
        } else { /* the first block naming it wins; every name it matches is used */
            for (const char *n = comma + 1; n < end;) {
                const char *ne = memchr(n, ',', (size_t)(end - n));
                if (!ne)
                    ne = end;
                if (ne > n && name_matches(name, n, (size_t)(ne - n))) {
                    if (mine == -1)
                        mine = fl;
                    name_used(v, n);
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

QS_STARTUP unsigned qs_debug_final(unsigned d)
{
    if (d != QS_DEBUG_OFF && under_memcheck())
        d |= QS_DBG_V;
    if (d == QS_DEBUG_OFF)
        return 0;
    if (d & QS_DBG_V)
        d &= ~(unsigned)(QS_DBG_Z | QS_DBG_P);
    return d;
}
