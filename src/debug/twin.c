/*
 * twin.c - debugging turned on for a cache in use: the tunable `debug`.
 *
 * A cache's slab layout is fixed while it has objects (a debug slot has red
 * zones, a link after the object and owner tracks; a plain one has none of
 * them), and its owners' queues hand objects out without a test.  So a cache
 * in use does not change its own slabs.  It gets a debug twin instead: a
 * cache of the debug front end (debug.c) with the same object size,
 * alignment and constructor, and the flags asked for, named `<cache>:<flags>`
 * (kmalloc-64:FZPU).  From then on:
 *
 *   - the cache's allocations that reach a slow path go to the twin
 *     (qs_twin_divert, at the top of every slow allocation path: queue.c,
 *     kmalloc.c, cache.c's alloc_node), so its new slabs are the twin's,
 *     debug slabs;
 *   - its owners' queues take nothing more: hiwater, limit and park are 0
 *     (the front end's queue_knobs, front.h: set here under qs_global like
 *     a lowered hiwater, and by an owner attaching later), so every free of one of
 *     the cache's old objects takes a slow path that puts it straight back
 *     on its slab or batches it home (queue.c qs_free_full, front/slab/slab.c
 *     th_free/pc_free), and an allocation gets a debug object as soon as
 *     its queue is empty (claiming its inbox then: qs_twin_take).  The CPUs' queues and the
 * caller's own are emptied at once (the cache's shrink); another thread's queue hands out what it
 * holds (at most its hiwater) first;
 *   - a twin's objects go back to the twin wherever they are freed: their
 *     slabs name it (kmalloc's free finds it by the slab), and
 *     qslab_cache_free(cache, obj) accepts its twin's objects (cache.c);
 *   - the statistics list the twin as a cache of its own, so its slabs are
 *     the debug slabs; destroy, shrink and validate of the cache take its
 *     twins along (cache.c, validate.c).
 *
 * `debug=-` turns it off: allocations go back to the cache's own slabs (the
 * queues' knobs come back; each owner raises its limit on its next slow
 * free) and the twin keeps its objects until they are freed.  Turning the
 * same flags on again reuses that twin; other flags make another twin.
 * A twin lives until its cache is destroyed.
 *
 * Concurrency: tunes of `debug` are serialised by twin_lock (a twin is made
 * outside qs_global, which making a cache takes: qs_api_hooks.cache_setup,
 * the API's set-up).  dbg_alloc is published with a release store after the
 * twin is fully made and listed; the slow paths load it with acquire.  A
 * slow path that read the old value makes one allocation of the old kind;
 * nothing depends on which.  The twin's memory is never freed while its
 * cache lives, so a stale pointer stays valid.
 */
#include "front/fastpath.h"
#include "front/front.h"
#include "debug/debug.h"

#include <errno.h>
#include <string.h>

static qs_lock twin_lock; /* serialises tunes of `debug` */

qslab_cache *qs_twin_next(const qslab_cache *c, const qslab_cache *after)
{
    return after ? after->twin_next : c->twins;
}

unsigned qs_twin_flags(const qslab_cache *c)
{
    qslab_cache *t = __atomic_load_n(&c->dbg_alloc, __ATOMIC_ACQUIRE);
    return t ? t->debug : c->debug;
}


/* Other owners send our old objects home to our inbox, which SLQB claims
 * at a refill; with no refills while the twin takes the allocations, a
 * diverted allocation claims it instead, so that those objects go back onto
 * our slabs and emptied slabs go back (the hint is read without the lock) */
qslab_cache *qs_twin_take(qslab_cache *c, qslab_cache *t)
{
    struct qs_queue *q = qs_queue_of(c);
    if (!qs_percpu()) {
        if (q && QS_TOP_NR(q->top)) /* its old objects first */
            return NULL;
        if (q && qs_front_of(c)->owns_slabs && QS_LOAD(q->inbox.pending))
            qs_queue_claim(c, q);
    } else if (q && qs_front_of(c)->owns_slabs && QS_LOAD(q->inbox.pending) &&
               (q = qs_percpu_lock(c)) != NULL) {
        qs_queue_claim(c, q); /* the CPU's queue, under its lock */
        qs_lock_release(&q->lock);
    }
    return t;
}

void *qs_twin_alloc(qslab_cache *t, int node)
{
    return qs_front_debug.alloc(t, node);
}

static void twin_name(char *out, const char *name, const char *flags)
{
    size_t fl = strlen(flags), n = strlen(name);
    if (n + 1 + fl > QS_NAME_MAX - 1) /* the cache's name gives way */
        n = QS_NAME_MAX - 2 - fl;
    memcpy(out, name, n);
    out[n] = ':';
    memcpy(out + n + 1, flags, fl + 1);
}

/* Queue knobs for every queue of c, after dbg_alloc changed (qs_global
 * held): while it is set, every knob 0; back, the owner raises its limit as
 * its next slow free finds it low (queue.c qs_free_full, front/slab/slab.c
 * th_free and pc_free).  The front end's `queue_knobs` (front.h); a front
 * end without one keeps its queues inert. */
static void knobs_all(qslab_cache *c)
{
    void (*knobs)(qslab_cache *, struct qs_queue *, bool) = qs_front_of(c)->queue_knobs;
    for (struct qs_queue *q = c->queues; q && knobs; q = q->all_next)
        knobs(c, q, false);
}

static int refuse(qslab_cache *c, const char *val, int err, const char *why, const char *a,
                  const char *b)
{
    qs_warn("tune %s debug=%s refused: %s%s%s", c->name, val, why, a ? a : "", b ? b : "");
    errno = err;
    return -1;
}

int qs_twin_tune(qslab_cache *c, const char *value, size_t vlen)
{
    char val[24];
    size_t n = vlen < sizeof(val) - 1 ? vlen : sizeof(val) - 1;
    memcpy(val, value, n);
    val[n] = '\0';
    unsigned d = 0;
    bool off = vlen == 0 || (vlen == 1 && (value[0] == '-' || value[0] == '0'));
    for (size_t i = 0; !off && i < vlen; i++) {
        unsigned l = qs_debug_letter(value[i]);
        if (!l || vlen > 8)
            return refuse(c, val, EINVAL,
                          "the flags are letters of FZPUTRVQ (SLUB's: consistency checks, red "
                          "zones, poison, user tracking, trace; R repair, V memory checkers, "
                          "Q quarantine), or - for none",
                          NULL, NULL);
        d |= l;
    }
    if (c->twin_of)
        return refuse(c, val, EINVAL, "it is the debug twin of ", c->twin_of->name,
                      "; tune that cache's debug");
    if (c->debug) { /* made a debug cache: its layout is the debug one already */
        if (!off && qs_debug_final(d) == c->debug)
            return 0;
        char fl[QS_DEBUG_LETTERS_LEN];
        qs_debug_letters(c->debug, fl);
        return refuse(c, val, EINVAL, "the cache was made with debug flags ", fl,
                      " (its flags or QSLAB_DEBUG), which it keeps");
    }
    qs_lock_acquire(&twin_lock);
    if (off) {
        qs_lock_acquire(&qs_global);
        if (QS_LOAD(c->dbg_alloc)) {
            __atomic_store_n(&c->dbg_alloc, NULL, __ATOMIC_RELEASE);
            knobs_all(c);
            qs_front_fast(c); /* SLUB's own fast path again */
        }
        qs_lock_release(&qs_global);
        qs_lock_release(&twin_lock);
        return 0;
    }
    d = qs_debug_final(d);
    qs_lock_acquire(&qs_global);
    qslab_cache *t = qs_twin_next(c, NULL);
    while (t && t->debug != d)
        t = qs_twin_next(c, t);
    qs_lock_release(&qs_global);
    if (!t) {
        t = qs_meta_alloc(sizeof(*t));
        if (!t) {
            qs_lock_release(&twin_lock);
            return refuse(c, val, ENOMEM, "out of memory for its debug twin", NULL, NULL);
        }
        char fl[QS_DEBUG_LETTERS_LEN], name[QS_NAME_MAX];
        qs_debug_letters(d, fl);
        twin_name(name, c->name, fl);
        t->twin_of = c; /* before cache_setup lists it */
        if (!qs_api_hooks.cache_setup(t, name, c->obj_size, c->align, c->flags, c->ctor, c->is_kmalloc,
                                 (int)d)) {
            int e = errno;
            qs_meta_free(t, sizeof(*t));
            qs_lock_release(&twin_lock);
            return refuse(c, val, e,
                          e == ENOMEM ? "out of memory (or cache ids) for its debug twin"
                                      : "no debug layout fits its objects in a slab",
                          NULL, NULL);
        }
    }
    qs_lock_acquire(&qs_global);
    __atomic_store_n(&c->dbg_alloc, t, __ATOMIC_RELEASE);
    knobs_all(c);
    qs_front_fast(c); /* SLUB's allocations to the slow path, which diverts */
    qs_lock_release(&qs_global);
    qs_lock_release(&twin_lock);
    /* the CPUs' queues and the caller's own hand their objects back now */
    qs_front_of(c)->shrink(c);
    return 0;
}

/* Each cache by its id (the table of live caches); one destroyed meanwhile
 * is the caller's race, as for qslab_tune (qslab.h: not while the program
 * destroys caches).  Twins, caches made with debug flags (their own
 * checks) and SLOB's arena (not a cache of objects) are left as they are. */
int qs_twin_harden_all(void)
{
    char fl[QS_DEBUG_LETTERS_LEN];
    qs_debug_letters(QS_DEBUG_HARDEN, fl);
    int refused = 0;
    for (unsigned id = 0; id < QS_MAX_CACHES; id++) {
        qslab_cache *c = __atomic_load_n(&qs_cache_by_id[id], __ATOMIC_ACQUIRE);
        if (!c || c->twin_of || c->debug || c == &qs_slob_arena)
            continue;
        if (qs_twin_tune(c, fl, strlen(fl)) != 0)
            refused++;
    }
    return refused ? -1 : 0;
}
