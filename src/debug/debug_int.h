/*
 * debug/debug_int.h - what the debug front end's files share, and nothing
 * outside src/debug/ includes: the tools' client requests (valgrind's
 * memcheck, ASan), the byte values of red zones and poison, a debug cache's
 * owner tracks, the problem a check reports, the walk over a cache's
 * objects, and the functions one of those files calls in another (dbg_).
 * The files and what each holds: debug.c, THE FILES.
 */
#ifndef QSLAB_DEBUG_INT_H
#define QSLAB_DEBUG_INT_H

#include "core/internal.h"
#include "front/front.h"
#include "debug/debug.h"

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

#pragma GCC visibility push(hidden)

#define RED_INACTIVE 0xbb
#define RED_ACTIVE 0xcc
#define POISON_FREE 0x6b
#define POISON_END 0xa5
#define POISON_INUSE 0x5a
#define QS_TRACK_DEPTH 4 /* frames per track */

struct qs_track {
    uintptr_t addrs[QS_TRACK_DEPTH]; /* the call site first; 0: none */
    uint64_t when_ms;
    int32_t tid, cpu;
};

static inline struct qs_track *track_of(const qslab_cache *c, void *obj, int which)
{
    return (struct qs_track *)((char *)obj + c->track_off) + which;
}

/* the scan reads other frames' words: the sanitizers' red zones too */
#define QS_NO_SANITIZE __attribute__((no_sanitize("address", "thread")))

/* A problem found in object obj of slab s: kind of check, and the bad range
 * [bad, bad_end) that should hold `expect` (bad NULL: no byte range). */
struct problem {
    const char *what;   /* "Right Redzone overwritten" ... */
    const uint8_t *bad, *bad_end;
    int expect;         /* the byte expected there, or -1 */
    const char *detail; /* one more line, or NULL */
};

/* ---- bugs.c ---- */
void dbg_report(qslab_cache *c, struct qs_slab *s, const char *obj, const struct problem *pb);
/* After dbg_report(): repair mode restores and counts; else the fatal handler. */
void dbg_conclude(qslab_cache *c, const char *obj, const struct problem *pb);
void dbg_trace(qslab_cache *c, struct qs_slab *s, void *obj, const char *what);
/* "0x55d0c1a2b3c4 func+0x1a (module+0x1234)" */
void dbg_put_addr(struct qs_buf *b, uintptr_t a);

/* ---- debug.c: walks, every object of every slab of a debug cache ---- */
typedef void (*obj_fn)(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg);
/* Every slab of c's node lists, under each node's lock. */
void dbg_walk_cache(qslab_cache *c, obj_fn fn, void *arg);

/* ---- slot.c: an object's red zones and poison, checked by a walk ---- */
struct check_arg {
    unsigned long bad;
    bool fatal; /* the purger's walk: the handler; validation: counted */
};

void dbg_check_obj(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg);

/* ---- quarantine.c: Q, freed objects held back from reuse ---- */
/* The link word of an object in quarantine: a link to the address 16,
 * which no object has (so it looks free: a second free is reported) */
#define QS_QUAR_WORD(secret) ((uintptr_t)(secret) ^ (uintptr_t)16)
/* node's quarantine made, before its first free (no lock held): called
 * while it is missing (debug.c debug_free looks) */
void dbg_quarantine_prepare(qslab_cache *c, int node);
/* Under the node lock of *s: obj (checked, filled) goes in; the object that
 * leaves in its place is returned (its slab in *s), or NULL (room left, or
 * the one that left went onto the ready stack), or obj itself (no
 * quarantine) */
void *dbg_quarantine_swap(qslab_cache *c, struct qs_slab **s, void *obj);
/* node's next allocation from its ready stack (objects that left the
 * quarantine), checked; NULL: none there */
void *dbg_quarantine_reuse(qslab_cache *c, int node);
void dbg_quarantine_drain(qslab_cache *c);     /* every node's objects to their slabs */
void dbg_quarantine_release(qslab_cache *c);   /* destroy: the arrays freed */
unsigned long dbg_quarantine_objects(const qslab_cache *c); /* objects held, now */

#pragma GCC visibility pop

#endif /* QSLAB_DEBUG_INT_H */
