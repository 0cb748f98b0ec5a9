/*
 * debug/debug.h - the debug layer's entry points: guarded sampling
 * (guard.c), the debug front end's flags, checks, owner tracks and reports
 * (debug.c, flags.c, slot.c, track.c, bugs.c), debug twins (twin.c).
 */
#ifndef QSLAB_DEBUG_H
#define QSLAB_DEBUG_H

#include "core/internal.h"
#include "core/hooks.h" /* qs_guard_on, qs_twin_divert */

#include <signal.h>

#pragma GCC visibility push(hidden)

/* Fill qs_debug_hooks (core/hooks.h), the calls of the layers below into
 * this one: qs_init_slow, first thing (debug.c) */
void qs_debug_hooks_register(void);
extern const struct qs_front qs_front_debug; /* the front end of caches with debug flags */
void qs_debug_slab_released(struct qs_slab *s); /* its memory usable again (page.c's hook) */
/* an empty slab leaving its FIFO: its objects' last check (node.c's hook) */
void qs_debug_slab_leaving(qslab_cache *c, struct qs_slab *s);

/* ---- guard.c (QSLAB_GUARD_SAMPLE: docs/debugging.md) ---- */
extern unsigned long qs_guard_rate;   /* QSLAB_GUARD_SAMPLE's N; 0: none (start-up) */
/* qs_guard_on (core/hooks.h): sampling anywhere (N, or a cache's guard_sample) */
void qs_guard_enable(bool locked);    /* sampling wanted (locked: qs_global held) */
#define QS_GUARD_MAX_RATE 1000000000UL
extern uintptr_t qs_guard_lo, qs_guard_hi; /* the pool's range, once mapped */
void qs_guard_init(void);             /* start-up: the environment */
/* An allocation slow path of c (size: the request, 0 for the object's
 * size): a guarded sample, or NULL (none due, or the pool is full) */
void *qs_guard_alloc(qslab_cache *c, size_t size);
static inline bool qs_guard_owns(const void *p)
{
    return (uintptr_t)p - __atomic_load_n(&qs_guard_lo, __ATOMIC_RELAXED) <
           __atomic_load_n(&qs_guard_hi, __ATOMIC_RELAXED) - __atomic_load_n(&qs_guard_lo, __ATOMIC_RELAXED);
}
/* Free of p in the pool (expected: the cache named by the caller, NULL for
 * kfree); reports misuse */
void qs_guard_free(qslab_cache *expected, void *p);
size_t qs_guard_usable(const void *p, const char *what); /* 0: reported */
int qs_guard_node(const void *p); /* qslab_object_node of a sample */
/* The owner, on a slow free while q->guard_armed: empty q (so that the next
 * allocation takes the slow path, which takes the sample) */
void qs_guard_armed_free(qslab_cache *c, struct qs_queue *q);
void qs_guard_fork(int phase); /* 0 prepare, 1 parent, 2 child */
/* A fault (the handler's arguments): an access to the pool? Reported, and
 * true; false if not the pool's */
bool qs_guard_fault(int sig, siginfo_t *si, void *uc);

/* ---- fault.c: the SIGSEGV/SIGBUS handler ---- */
/* Installed once, when something faults on purpose: guarded sampling,
 * protected large blocks (and then zero-size blocks get reports too) */
void qs_fault_install(void);
/* "Read", "Write" or "Access", from the handler's context */
const char *qs_fault_access(void *uc);
/* A fault reported: its last line, "qslab: BUG <kind>: <what> (object
 * <obj>, address <a>)" (obj NULL: no object), to the program's fatal
 * handler, true if that returned (the caller opens what faulted and the
 * access is retried); else to stderr, the default action restored and
 * false (the retried access kills the process) */
bool qs_fault_conclude(int sig, const char *kind, const char *what, const void *obj, uintptr_t a);
void qs_guard_report(int fd);  /* the statistics report's Guard: line */

/* ---- the debug front end: debug.c, flags.c, slot.c, track.c, bugs.c ---- */
#define QS_TRACK_BYTES 48
void qs_track_record(void *track);
void qs_report_line(struct qs_buf *b); /* bugs.c: b + newline to stderr; b emptied */
void qs_track_print(struct qs_buf *b, const char *what, const void *track);
unsigned qs_debug_flags_for(const char *name, unsigned long flags);
/* QSLAB_DEBUG's cache names no cache matched: kmalloc classes (start-up,
 * once they exist), the others (at exit): one line each (flags.c) */
void qs_debug_env_check(void);
void qs_debug_env_unused(void);
/* The slot layout of a debug cache: slot size and link offset */
bool qs_debug_layout(qslab_cache *c, size_t size, size_t align, size_t *slot, size_t *link_off);
void qs_debug_born(qslab_cache *c, char *first, uint32_t n, bool zero); /* new objects */
/* Under the node lock: an object leaving (alloc) or joining (free) its
 * slab's free list; false: reported, keep it out (alloc: quarantined) */
bool qs_debug_alloc_locked(qslab_cache *c, struct qs_slab *s, void *obj);
int qs_debug_free_locked(qslab_cache *c, struct qs_slab **s, void **obj); /* QS_DBG_FREE_* */
void qs_debug_bad_link(qslab_cache *c, void *obj); /* Freepointer corrupt */
/* qs_bad_free of a pointer into a debug cache's slab: true if reported */
bool qs_debug_bad_pointer(qslab_cache *c, struct qs_slab *s, const void *p);
/* destroy with live objects: list where they were allocated (U) */
void qs_debug_leaks(qslab_cache *c, int fd);
/* A defragmentation pass moved object `from` of cache fc to `to` of tc
 * (api/defrag.c): the alloc track follows the object where both keep them */
void qs_debug_moved(qslab_cache *fc, void *from, qslab_cache *tc, void *to);
unsigned qs_debug_letter(char ch);      /* QS_DBG_* of a letter of FZPUTRVQ; 0: none */
unsigned qs_debug_flags_own(unsigned long flags); /* from the cache's flags alone */
unsigned qs_debug_final(unsigned d);    /* the flags a cache with d gets (V under memcheck) */
/* The hardened profile's flags, on every cache (flags.c) */
#define QS_DEBUG_HARDEN (QS_DBG_Z | QS_DBG_Q)
void qs_debug_harden(void);   /* qslab_harden(): the caches made from now on */

/* ---- twin.c: debugging turned on for a cache in use ---- */
/* The tunable `debug` (qs_global not held): letters of FZPUTRVQ, or - */
int qs_twin_tune(qslab_cache *c, const char *value, size_t vlen);
/* The flags of c's new allocations now (QS_DBG_*) */
unsigned qs_twin_flags(const qslab_cache *c);
/* The next debug twin of c after `after` (NULL: the first); qs_global held
 * or c quiet (destroy) */
qslab_cache *qs_twin_next(const qslab_cache *c, const qslab_cache *after);
void *qs_twin_alloc(qslab_cache *t, int node); /* an allocation of c's twin t */
/* qslab_harden() after start-up: every cache in use without debug flags
 * gets a twin with the hardened profile's; -1 if one was refused */
int qs_twin_harden_all(void);
qslab_cache *qs_twin_take(qslab_cache *c, qslab_cache *t); /* qs_twin_divert's queue test */
/* qs_twin_divert(c), the twin that takes this allocation of c, or NULL:
 * in core/hooks.h, as the slow paths below this layer call it too */

#pragma GCC visibility pop

#endif /* QSLAB_DEBUG_H */
