/*
 * slot.c - a debug cache's slots: their layout, their red zones (Z) and
 * poison (P) from birth, and the checks made as an object leaves its slab's
 * free list (qs_debug_alloc_locked) or joins it (qs_debug_free_locked),
 * under the node's lock (debug.c, LOCKING), with the tools told (V).
 * Together because the checks are the hot path of every debug cache's
 * allocation and free: they and the bytes they check stay in one file.
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
 * 16 bytes lands in it.  With Q (the hardened profile, which must be cheap
 * in memory) Z's red zone is compact: the padding and 8 more bytes, none on
 * the left, so a 32-byte object takes 48 bytes instead of 80.  An overflow
 * by 1 to 8 bytes lands in it; an underflow lands in the previous slot's
 * link word or red zone, reported when that object is freed or handed out
 * ("Freepointer corrupt", "Right Redzone overwritten"); a longer overflow
 * into a free neighbour breaks its zero fill.  Values, as SLUB's: red zones 0xbb while the object
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
 * purger (debug.c, every QS_DEBUG_WALK_MS) check every object of every
 * slab (dbg_check_obj).  What follows a report: bugs.c, REPORTS.
 */
#define _GNU_SOURCE
#include "debug/debug_int.h"

#include <string.h>

#define QS_RED_MIN 16    /* right red zone past the object's 8-byte padding */
#define QS_RED_COMPACT 8 /* ... with Q: the compact red zone */

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

bool qs_debug_layout(qslab_cache *c, size_t size, size_t align, size_t *slot, size_t *link_off)
{
    unsigned d = c->debug;
    /* malloc's objects of 16 bytes and more are 16-aligned: the stride too */
    if (align < 16 && size >= 16)
        align = 16;
    bool red = d & (QS_DBG_Z | QS_DBG_V); /* V: red zones the tools guard */
    /* Z with Q (the hardened profile): the compact red zone, SLOT LAYOUT */
    bool compact = (d & QS_DBG_Z) && (d & QS_DBG_Q) && !(d & QS_DBG_V);
    size_t red_left = red && !compact ? qs_round_up(QS_RED_MIN, align) : 0;
    size_t link = qs_round_up(size, 8) + (red ? (compact ? QS_RED_COMPACT : QS_RED_MIN) : 0);
    size_t end = link + sizeof(uintptr_t);
    c->track_off = (uint32_t)end;
    if (d & QS_DBG_U)
        end += 2 * sizeof(struct qs_track);
    size_t s = qs_round_up(end + red_left, align);
    if (s > UINT32_MAX || red_left > UINT32_MAX)
        return false;
    c->red_left = (uint32_t)red_left;
    if (d & QS_DBG_V)
        __atomic_store_n(&qs_debug_tools, true, __ATOMIC_RELAXED);
    *slot = s;
    *link_off = link;
    return true;
}

/* The user's bytes of a free object hold the poison (no constructor):
 * P's 0x6b .. 0xa5, or Q's zeros (quarantine.c). */
static inline bool poisoned(const qslab_cache *c)
{
    return (c->debug & (QS_DBG_P | QS_DBG_Q)) && !c->ctor;
}
static inline uint8_t poison_free(const qslab_cache *c)
{
    return c->debug & QS_DBG_P ? POISON_FREE : 0;
}
static inline uint8_t poison_end(const qslab_cache *c)
{
    return c->debug & QS_DBG_P ? POISON_END : 0;
}
/* Q's fill without P: every byte zero, the last one too */
static inline bool poison_zeros(const qslab_cache *c)
{
    return !(c->debug & QS_DBG_P);
}

/* A free object's fill: its red zones (Z) and, poison false, nothing else */
static void fill_free_as(qslab_cache *c, char *obj, bool poison)
{
    if (c->debug & QS_DBG_Z) {
        memset(obj - c->red_left, RED_INACTIVE, c->red_left);
        memset(obj + c->obj_size, RED_INACTIVE, c->link_off - c->obj_size);
    }
    if (poison) {
        memset(obj, poison_free(c), c->obj_size - 1);
        obj[c->obj_size - 1] = (char)poison_end(c);
    }
}

static void fill_free(qslab_cache *c, char *obj)
{
    fill_free_as(c, obj, poisoned(c));
}

/* New objects: filled as free ones.  Q's poison is zeros, which memory
 * known zero holds already: not written again, so a birth writes only the
 * lines of the red zones and words.  (The run's pages are populated all the
 * same, core/slab.c qs_slab_first_touch: the allocation's check reads every
 * byte, and on some VMs a read of an untouched page faults in a page.) */
void qs_debug_born(qslab_cache *c, char *first, uint32_t n, bool zero)
{
    size_t pad_from = c->track_off + (c->debug & QS_DBG_U ? 2 * sizeof(struct qs_track) : 0);
    size_t pad_to = c->slot_size - c->red_left;
    bool poison = poisoned(c) && !(zero && poison_zeros(c));
    for (uint32_t i = 0; i < n; i++) {
        char *obj = first + (size_t)i * c->slot_size;
        fill_free_as(c, obj, poison);
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

/* The first and last byte of [p, p+n) that differ from v; NULL if none.
 * Words until a difference (the kernel's memchr_inv), four to a compare:
 * the common case, intact poison, costs a compare per 32 bytes. */
static inline __attribute__((always_inline)) const uint8_t *mismatch(const uint8_t *p, size_t n, uint8_t v,
                                                                     const uint8_t **last)
{
    uint64_t pat = 0x0101010101010101ULL * v, w;
    size_t i = 0;
    if (n >= 8) { /* words, unaligned loads; the last one may overlap the one before */
        /* four words at a time, their differences or-ed: one branch for
         * 32 bytes (the hardened profile checks every byte of each object
         * it hands out) */
        for (; i + 32 <= n; i += 32) {
            uint64_t a, b, c, d;
            memcpy(&a, p + i, 8);
            memcpy(&b, p + i + 8, 8);
            memcpy(&c, p + i + 16, 8);
            memcpy(&d, p + i + 24, 8);
            if (((a ^ pat) | (b ^ pat) | (c ^ pat) | (d ^ pat)) != 0)
                goto byte;
        }
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            if (w != pat)
                goto byte;
        }
        if (i == n)
            return NULL;
        memcpy(&w, p + n - 8, 8);
        if (w == pat)
            return NULL;
        i = n - 8;
    }
byte:
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

/* The report of a bad range: [first, last] differ from v */
static QS_NOINLINE void bytes_report(qslab_cache *c, struct qs_slab *s, char *obj, const char *what,
                                     const uint8_t *first, const uint8_t *last, uint8_t v, bool fatal)
{
    struct problem pb = {what, first, last + 1, v, NULL};
    dbg_report(c, s, obj, &pb);
    if (fatal)
        dbg_conclude(c, obj, &pb);
}

/* Check a red zone or poison range; report and conclude if bad.  True if
 * it was intact.  Inline, the report out of line: every debug allocation
 * and free checks two or three ranges, most of them a word or two long,
 * where a call cost more than the compares. */
static inline __attribute__((always_inline)) bool check_bytes(qslab_cache *c, struct qs_slab *s, char *obj,
                                                              const char *what, uint8_t *p, size_t n,
                                                              uint8_t v, bool fatal)
{
    const uint8_t *last = NULL, *first = mismatch(p, n, v, &last);
    if (likely(!first))
        return true;
    bytes_report(c, s, obj, what, first, last, v, fatal);
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

/* The poison of a free object: 0x6b .. 0xa5 (P), or zeros (Q) */
static bool check_poison(qslab_cache *c, struct qs_slab *s, char *obj, bool fatal)
{
    if (!poisoned(c))
        return true;
    if (poison_zeros(c)) /* one range */
        return check_bytes(c, s, obj, "Poison overwritten", (uint8_t *)obj, c->obj_size, poison_free(c),
                           fatal);
    bool ok = check_bytes(c, s, obj, "Poison overwritten", (uint8_t *)obj, c->obj_size - 1,
                          poison_free(c), fatal);
    if (ok)
        ok = check_bytes(c, s, obj, "Poison overwritten", (uint8_t *)obj + c->obj_size - 1, 1,
                         poison_end(c), fatal);
    return ok;
}

static void set_red(qslab_cache *c, char *obj, uint8_t v)
{
    if (c->debug & QS_DBG_Z) {
        memset(obj - c->red_left, v, c->red_left);
        memset(obj + c->obj_size, v, c->link_off - c->obj_size);
    }
}

static void record(qslab_cache *c, void *obj, int which)
{
    qs_track_record(track_of(c, obj, which));
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
    dbg_report(c, s, obj, &pb);
    dbg_conclude(c, obj, &pb);
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
    if ((c->debug & QS_DBG_P) && !c->ctor) /* P's in-use fill (Q's zeros stay) */
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
        dbg_trace(c, s, obj, "alloc");
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
    dbg_report(c, s, obj, &pb);
    dbg_conclude(c, obj, &pb);
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

int qs_debug_free_locked(qslab_cache *c, struct qs_slab **sp, void **objp)
{
    struct qs_slab *s = *sp;
    char *obj = *objp;
    uintptr_t w = *qs_link(c, obj);
    if (w != 0) {
        bool twice = qs_looks_free(c, w);
        struct problem pb = {twice ? "Object already free" : "Freepointer corrupt", NULL, NULL, -1,
                             twice ? "The object is free: freed twice"
                                   : "The word after the object's red zone was overwritten"};
        if (w == QS_QUAR_WORD(c->secret))
            pb.detail = "The object is free, in quarantine (not handed out since): freed twice";
        if (!twice) {
            pb.bad = (const uint8_t *)qs_link(c, obj);
            pb.bad_end = pb.bad + sizeof(uintptr_t);
            pb.expect = 0;
        }
        dbg_report(c, s, obj, &pb);
        if (twice) { /* never freed again: the handler, or repair leaves it */
            dbg_conclude(c, obj, &pb);
            return QS_DBG_FREE_KEEP;
        }
        dbg_conclude(c, obj, &pb);
        *qs_link(c, obj) = 0;
    }
    if (!check_slab(c, s, obj))
        return QS_DBG_FREE_KEEP;
    /* an overflow: reported, then the free goes on with the red zones
     * restored (the object is the caller's to free) */
    check_red(c, s, obj, RED_ACTIVE, true);
    if (!check_ctor(c, s, obj) && !(c->debug & QS_DBG_R))
        return QS_DBG_FREE_KEEP; /* the handler returned: kept out of the cache */
    if (c->debug & QS_DBG_U)
        record(c, obj, 1);
    if (c->debug & QS_DBG_T)
        dbg_trace(c, s, obj, "free");
    fill_free(c, obj);
    if (c->debug & QS_DBG_V) {
        VALGRIND_FREELIKE_BLOCK(obj, c->red_left); /* memcheck: no access */
#ifdef QS_HAVE_ASAN
        ASAN_POISON_MEMORY_REGION(obj, c->obj_size);
#endif
    }
    if (c->debug & QS_DBG_Q) { /* held back; another may leave in its place */
        *objp = dbg_quarantine_swap(c, sp, obj);
        return *objp ? QS_DBG_FREE_PUT : QS_DBG_FREE_HELD;
    }
    return QS_DBG_FREE_PUT;
}

void dbg_check_obj(qslab_cache *c, struct qs_slab *s, char *obj, bool allocated, void *arg)
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
