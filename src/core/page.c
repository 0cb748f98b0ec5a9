/*
 * page.c - where slabs come from.
 *
 * Memory is mapped in 4 MiB chunks aligned to 4 MiB.  A chunk serves slabs of
 * one order on one node, and the CPUs of one home (HOMES, below) take
 * their cold slabs from chunks of their own.  Slabs of up to 2 MiB: the
 * chunk is one unit cut into slots of the slab size, slot i at
 * i << (page shift + order) from the chunk; the header (struct qs_chunk
 * and one descriptor per slot) covers the first slots, which never hold a
 * slab.  So a pointer's offset in its unit, shifted by the slab size,
 * indexes its descriptor, and the unit map byte says what the shift is: the
 * free path finds the descriptor with one load and no look at the header.
 * Slabs of 4 MiB and more get a chunk of their own, several units long
 * (header page, then the slab).  Slabs start
 * on a multiple of their size, so power-of-two objects are naturally
 * aligned.  Large blocks (kmalloc above 32 MiB) are chunks of kind LARGE
 * with one block (large.c, which also holds the fault injection).
 *
 * The unit map (internal.h) has a byte per 4 MiB unit of the address space:
 * 0 for units that are not qslab's, the slab shift for one-unit slab
 * chunks, else how many units back the chunk's header is.  qs_chunk_of()
 * tells "not ours" in O(1) with one load at a constant address for the
 * common case (a chunk of one unit).  Each unit belongs to at most one
 * chunk because chunks start and end on unit boundaries.
 *
 * Slots given back are decommitted (MADV_DONTNEED) at once.  Slabs a cache
 * does not keep but that may serve again soon (its FIFO's overflow, a
 * destroyed cache's) stay resident as WARM slots (qs_page_keep_slabs,
 * warm.c: the retention rule and the cached-memory cap), and the next slab of their (node, order), of any cache, takes one
 * before a cold slot, until they have been warm for QS_WARM_MS or the
 * retention rule cuts them.  Slabs given back together come as a list
 * (qs_page_free_slabs), and adjacent ones share one madvise.  A chunk whose slots are all free is unmapped unless it is
 * the only fully free chunk of its (node, order) pool, which is kept as a
 * spare (it costs address space only) to avoid mmap churn.
 *
 * WHEN THE KERNEL REFUSES A GIVE-BACK (madvise or munmap failing: munmap
 * that splits a mapping fails with ENOMEM at vm.max_map_count; tests inject
 * both, qslab_fault_inject) nothing above this layer changes: the memory is
 * kept here as if it had never been offered, and the refusal is counted
 * (qs_page_failures: the "Pages:" line of qslab_stats_report; a refused
 * request counts once, with all its bytes).  Slots whose decommit failed go
 * back to their chunk with their pages resident, and the bytes are not
 * counted as given back (shrink and trim report what the OS
 * took); a chunk whose unmap failed goes back to its pool as a fully free
 * chunk; a large block's pages are decommitted instead and its address
 * range is left mapped (no longer qslab's).  Nothing relies on a slot's
 * memory being zero but what QS_SLAB_ZERO says of it (calloc's births:
 * core/slab.c), which a slot whose give-back was refused does not get.
 *
 * Lock: pool->lock protects a pool's chunk list and each of its chunks'
 * slot lists and counters.  The unit map needs no lock: a chunk's units are
 * written only by whoever maps or unmaps that chunk.
 */
#include "core/page_int.h"
#include "core/hooks.h"

#include <errno.h>
#include <string.h>

#ifdef QS_HAVE_ASAN
/* In ASan builds the unit map is mapped, not BSS: LeakSanitizer reads every
 * writable global of the process for pointers at its exit, and 32 MiB of
 * BSS cost each ASan test process 0.27 s (integration_fault_inject, with
 * its children: 10.2 s against 2.3).  Mapped by the first constructor to
 * run (priority 101), before anything can look a pointer up; straight
 * through mmap, not the OS layer, whose requests fault injection counts.
 * Other builds keep the array: the lookup stays one load at a constant
 * base. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
uint8_t *qs_unit_map;
__attribute__((constructor(101))) static void unit_map_init(void)
{
    void *m = mmap(NULL, QS_UNITS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        static const char msg[] = "qslab: cannot map the unit map (ASan build)\n";
        ssize_t r = write(2, msg, sizeof msg - 1);
        (void)r;
        abort();
    }
    qs_unit_map = m;
}
#else
QS_BSS_APART uint8_t qs_unit_map[QS_UNITS];
#endif

QS_BSS_APART struct qs_page_pool qs_page_pools[QS_MAX_NODES][QS_NR_ORDERS];

/* fork: take (lock) or release every page-layer lock, in order */
void qs_page_lock_all(bool lock)
{
    for (int n = 0; n < qs_nr_nodes; n++)
        for (int o = 0; o < QS_NR_ORDERS; o++)
            (lock ? qs_lock_acquire : qs_lock_release)(&qs_page_pools[n][o].lock);
}

/* Mark the units of [ch, ch + size) as belonging to chunk ch (or to nobody,
 * when clear).  A one-unit slab chunk gets the byte that locates its slab
 * descriptors (internal.h); other chunks get back-distances.  Entries are
 * published with release stores after the header is written; a chunk's
 * units are its own, so no lock is needed. */
void qs_page_map_set(struct qs_chunk *ch, size_t size, bool clear)
{
    size_t first = (uintptr_t)ch >> QS_CHUNK_SHIFT, n = size >> QS_CHUNK_SHIFT;
    if (!clear && n == 1 && ch->kind == QS_CHUNK_SLABS) {
        uint8_t v = (uint8_t)(QS_UNIT_SLABS | (QS_PAGE_SHIFT + ch->order));
        __atomic_store_n(&qs_unit_map[first], v, __ATOMIC_RELEASE);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t v = clear ? 0 : (uint8_t)(i + 1 < QS_UNIT_FAR_MAX ? i + 1 : QS_UNIT_FAR_MAX);
        __atomic_store_n(&qs_unit_map[first + i], v, __ATOMIC_RELEASE);
    }
}

/* Header of a chunk that spans more than one unit (p in a later unit). */
struct qs_chunk *qs_chunk_of_far(size_t unit, unsigned k)
{
    while (k == QS_UNIT_FAR_MAX) {
        unit -= QS_UNIT_FAR_MAX - 1;
        k = __atomic_load_n(&qs_unit_map[unit], __ATOMIC_ACQUIRE);
    }
    if (k == 0)
        return NULL;
    return (struct qs_chunk *)((unit - (k - 1)) << QS_CHUNK_SHIFT);
}

/* Layout of a chunk of order-`order` slabs: number of slots (descriptors),
 * the first slot not covered by the header, data offset and mapped size.
 * Slabs of up to half a unit: the chunk is one unit, slot i starts at
 * i << (page shift + order) from the chunk and the header covers the first
 * slots (so a pointer's offset in the unit indexes its descriptor).  Bigger
 * slabs: one slab after a page of header, several units. */
static void chunk_layout(unsigned order, uint32_t *nr, uint32_t *first, size_t *data_off,
                         size_t *map_size)
{
    size_t sb = qs_slab_bytes(order);
    if (sb > QS_CHUNK_SIZE / 2) {
        /* the free bits (core/slab.h) after the header's page cover the
         * chunk up to the slab's end: data_off stays under a unit, so a
         * bit per granule of (sb + a unit) does */
        *nr = 1;
        *first = 0;
        *data_off = qs_round_up(QS_PAGE_SIZE + ((sb + QS_CHUNK_SIZE) >> (QS_FBITS_SHIFT(order) + 3)),
                                QS_PAGE_SIZE);
        *map_size = qs_round_up(*data_off + sb, QS_CHUNK_SIZE);
        return;
    }
    uint32_t n = (uint32_t)(QS_CHUNK_SIZE / sb);
    /* descriptors for every slot of the unit (qs_slab_fast indexes them by
     * offset alone: those of the header's and the free bits' slots stay
     * zero, span 0), then the free bits: in the header's slots when they
     * have room, else at the unit's end, whose slots go */
    size_t hdr = qs_round_up(sizeof(struct qs_chunk) + n * sizeof(struct qs_slab), QS_PAGE_SIZE);
    *first = (uint32_t)((hdr + sb - 1) / sb);
    bool at_end = qs_fbits_off[order] == QS_CHUNK_SIZE - QS_FBITS_BYTES(order);
    *nr = at_end ? (uint32_t)((QS_CHUNK_SIZE - QS_FBITS_BYTES(order)) / sb) : n;
    *data_off = 0;
    *map_size = QS_CHUNK_SIZE;
}

#define FBITS_OFF(o)                                                                               \
    ((o) > QS_CHUNK_SHIFT - QS_PAGE_SHIFT - 1 ? QS_PAGE_SIZE                                      \
     : FBITS_HDR(o) + QS_FBITS_BYTES(o) <= FBITS_FIRST_END(o) ? FBITS_HDR(o)                      \
                                                              : QS_CHUNK_SIZE - QS_FBITS_BYTES(o))
#define FBITS_SB(o) (QS_PAGE_SIZE << (o))
#define FBITS_HDR(o)                                                                               \
    ((sizeof(struct qs_chunk) + QS_CHUNK_SIZE / FBITS_SB(o) * sizeof(struct qs_slab) +            \
      QS_PAGE_SIZE - 1) & ~(QS_PAGE_SIZE - 1))
#define FBITS_FIRST_END(o) ((FBITS_HDR(o) + FBITS_SB(o) - 1) / FBITS_SB(o) * FBITS_SB(o))
const uint32_t qs_fbits_off[QS_NR_ORDERS] = {
    FBITS_OFF(0),  FBITS_OFF(1),  FBITS_OFF(2),  FBITS_OFF(3),  FBITS_OFF(4),
    FBITS_OFF(5),  FBITS_OFF(6),  FBITS_OFF(7),  FBITS_OFF(8),  FBITS_OFF(9),
    FBITS_OFF(10), FBITS_OFF(11), FBITS_OFF(12), FBITS_OFF(13), FBITS_OFF(14),
};
_Static_assert(QS_NR_ORDERS == 15, "qs_fbits_off: one entry per order");

/* Give-backs the kernel refused (atomic counters): see the top comment. */
static struct qs_page_failures failures;

void qs_page_failures(struct qs_page_failures *f)
{
    f->decommit = __atomic_load_n(&failures.decommit, __ATOMIC_RELAXED);
    f->decommit_bytes = __atomic_load_n(&failures.decommit_bytes, __ATOMIC_RELAXED);
    f->unmap = __atomic_load_n(&failures.unmap, __ATOMIC_RELAXED);
    f->unmap_bytes = __atomic_load_n(&failures.unmap_bytes, __ATOMIC_RELAXED);
}

static void count_failure(unsigned long *n, size_t *bytes, size_t b)
{
    __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(bytes, b, __ATOMIC_RELAXED);
}

void qs_page_unmap_refused(size_t bytes)
{
    count_failure(&failures.unmap, &failures.unmap_bytes, bytes);
}

void qs_page_decommit_refused(size_t bytes)
{
    count_failure(&failures.decommit, &failures.decommit_bytes, bytes);
}

/* Bytes in slabs handed out; past QS_PURGER_AT the purger is wanted. */
size_t qs_page_out;
size_t *const qs_page_slab_bytes = &qs_page_out; /* observe.c: the root points here */
/* Bytes of slab chunks mapped, and of their slots (what slabs can use; the
 * rest is headers, descriptors and free bits): relaxed atomics, changed
 * where a chunk is mapped and unmapped, read by qslabinfo -T. */
static size_t chunk_bytes, slot_bytes;
size_t *const qs_page_chunk_bytes = &chunk_bytes;
size_t *const qs_page_slot_bytes = &slot_bytes;

static size_t chunk_slot_bytes(const struct qs_chunk *ch)
{
    return (size_t)(ch->nr_slots - ch->first_slot) * qs_slab_bytes(ch->order);
}
#define QS_PURGER_AT ((size_t)1 << 20)

static struct qs_chunk *chunk_new(int node, unsigned order)
{
    uint32_t nr, first;
    size_t off, size;
    chunk_layout(order, &nr, &first, &off, &size);
    struct qs_chunk *ch = qs_os_map_aligned(size, QS_CHUNK_SIZE);
    if (!ch)
        return NULL;
    if (qs_real_numa)
        qs_os_bind_node(ch, size, node);
    ch->magic = QS_CHUNK_MAGIC;
    ch->kind = QS_CHUNK_SLABS;
    ch->order = (uint8_t)order;
    ch->node = (uint16_t)node;
    ch->nr_slots = nr;
    ch->first_slot = first;
    ch->next_unused = first;
    ch->nr_free = nr - first;
    ch->data = (char *)ch + off;
    ch->map_size = size;
    qs_page_map_set(ch, size, false);
    __atomic_fetch_add(&chunk_bytes, size, __ATOMIC_RELAXED);
    __atomic_fetch_add(&slot_bytes, chunk_slot_bytes(ch), __ATOMIC_RELAXED);
    return ch;
}

static void avail_add(struct qs_page_pool *p, struct qs_chunk *ch)
{
    ch->prev = NULL;
    ch->next = p->avail;
    if (p->avail)
        p->avail->prev = ch;
    p->avail = ch;
}

static void avail_del(struct qs_page_pool *p, struct qs_chunk *ch)
{
    if (ch->prev)
        ch->prev->next = ch->next;
    else
        p->avail = ch->next;
    if (ch->next)
        ch->next->prev = ch->prev;
    ch->next = ch->prev = NULL;
}

QS_SLOW void qs_fbit_set_cold(const struct qs_slab *s, const void *obj)
{
    qs_fbit_set(s, obj);
}

void qs_fbits_clear(const struct qs_slab *s, const char *from, const char *to)
{
    uintptr_t ch;
    uint64_t *bits = qs_fbits_of(s, &ch);
    unsigned shift = QS_FBITS_SHIFT(s->order);
    size_t g0 = ((uintptr_t)from - ch) >> shift, g1 = ((uintptr_t)to - ch) >> shift;
    if (g0 >= g1)
        return;
    g1--; /* the last granule to clear */
    uint64_t bit0 = (uint64_t)1 << (g0 & 63), bit1 = (uint64_t)1 << (g1 & 63);
    uint64_t *w = bits + (g0 >> 6), *e = bits + (g1 >> 6);
    uint64_t lo = ~(bit0 - 1), hi = bit1 | (bit1 - 1); /* bits from bit0 up, up to bit1 */
    if (w == e) {
        *w &= ~(lo & hi);
        return;
    }
    *w++ &= ~lo;
    while (w < e)
        *w++ = 0;
    *e &= ~hi;
}

void qs_fbits_clear_objs(const struct qs_slab *s, const char *first, uint32_t n, uint32_t slot)
{
    if (slot < (64u << QS_FBITS_SHIFT(s->order))) {
        qs_fbits_clear(s, first, first + (size_t)n * slot);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t bit, *w = qs_fbit_word(s, first + (size_t)i * slot, &bit);
        if (*w & bit) /* a read first: an untouched page of bits stays the zero page */
            *w &= ~bit;
    }
}

/* A fully free chunk joins pool p: available, on the walk's list (p->lock
 * held). */
static void pool_add_free_chunk(struct qs_page_pool *p, struct qs_chunk *ch)
{
    avail_add(p, ch);
    ch->all_prev = NULL;
    ch->all_next = p->all;
    if (p->all)
        p->all->all_prev = ch;
    p->all = ch;
    p->nr_fully_free++;
}

/* HOMES.  The CPUs take their cold slots from chunks of their own: each
 * pool has QS_PAGE_HOMES homes (a CPU's is its id modulo QS_PAGE_HOMES),
 * and a home takes its slots from its chunk until that chunk is full, then
 * claims another that no home holds, or a new one.  Slabs of two CPUs
 * side by side in a chunk cost both CPUs dearly when each works on its
 * own (bench_slub batch_all: two CPUs each taking and freeing 10,000
 * blocks of 256 bytes, 120 cycles an allocation and free against 35 on
 * one CPU while their slabs alternated page by page; 37 with slabs of a
 * home together and kept by the CPU that emptied them, node.c's FIFO
 * homes).  What it costs: a chunk per home in use and order, address
 * space and the header pages its slabs' descriptors lie on.  A home's
 * chunk is pool->home[h], and ch->home is h + 1 while it is (0: no home
 * holds it).  p->lock held.  A thread that moved to another CPU after reading its CPU
 * takes a slot of its old home's chunk: locality lost, nothing else. */
/* Home h's chunk with a free slot; when it is full, the home lets it go
 * and claims one that no home holds; NULL: none (the caller maps one) */
static struct qs_chunk *home_chunk(struct qs_page_pool *p, unsigned h)
{
    struct qs_chunk *ch = p->home[h];
    if (ch && ch->nr_free)
        return ch;
    if (ch)
        ch->home = 0;
    p->home[h] = NULL;
    for (ch = p->avail; ch; ch = ch->next) /* chunks with a free slot */
        if (!ch->home) {
            p->home[h] = ch;
            ch->home = h + 1;
            return ch;
        }
    return NULL;
}

/* The layer above keeps empty slabs too (its FIFOs): it registers what
 * gives them back, or makes them warm, when the process would grow past
 * the retention cap (node.c qs_node_reclaim).  Set once at start-up. */
static void (*reclaim_hook)(int node, unsigned order);

void qs_page_set_reclaim(void (*fn)(int node, unsigned order))
{
    reclaim_hook = fn;
}

struct qs_slab *qs_page_alloc_slab(int node, unsigned order)
{
    struct qs_page_pool *p = &qs_page_pools[node][order];
    struct qs_slab *s;
    bool cold = false, asked = false;
again:
    qs_lock_acquire(&p->lock);
    if ((s = qs_page_warm_pop(p)) != NULL) { /* the newest warm slot: resident */
        qs_lock_release(&p->lock);
        s->empty_ms = 0; /* resident, with a cache's old objects */
        goto out;
    }
    if (!asked && reclaim_hook) {
        /* about to take memory that is not resident: what the caches keep
         * empty over the retention cap goes first, and empty slabs of this
         * order may come here warm (no lock held for it) */
        qs_lock_release(&p->lock);
        asked = true;
        reclaim_hook(node, order);
        goto again;
    }
    cold = true; /* not resident: the retention rule, below */
    unsigned h = (unsigned)qs_os_current_cpu() % QS_PAGE_HOMES;
    struct qs_chunk *ch = home_chunk(p, h);
    if (!ch) {
        qs_lock_release(&p->lock);
        struct qs_chunk *fresh = chunk_new(node, order);
        qs_lock_acquire(&p->lock);
        if (fresh) {
            pool_add_free_chunk(p, fresh);
            ch = home_chunk(p, h); /* fresh, unless the home found one meanwhile */
        } else if (!(ch = p->avail)) { /* no new chunk: any slot will do */
            qs_lock_release(&p->lock);
            errno = ENOMEM;
            return NULL;
        }
    }
    if (ch->nr_free == ch->nr_slots - ch->first_slot)
        p->nr_fully_free--;
    if (ch->free_slots) {
        s = ch->free_slots;
        ch->free_slots = s->next;
    } else {
        /* first use of the slot: mem, order and node never change again */
        s = &ch->slabs[ch->next_unused];
        s->mem = ch->data + ((size_t)ch->next_unused << (QS_PAGE_SHIFT + order));
        s->order = (uint8_t)order;
        s->node = (uint16_t)node;
        s->empty_ms = QS_SLAB_ZERO; /* never touched */
        ch->next_unused++;
    }
    if (--ch->nr_free == 0)
        avail_del(p, ch);
    qs_lock_release(&p->lock);
out:
    s->next = s->prev = NULL;
    __atomic_store_n(&s->state, (uint8_t)QS_SLAB_FREE, __ATOMIC_RELAXED);
    size_t sb = qs_slab_bytes(order);
    size_t total = __atomic_add_fetch(&qs_page_out, sb, __ATOMIC_RELAXED);
    if (total >= QS_PURGER_AT && total - sb < QS_PURGER_AT)
        qs_node_purger_want(); /* started at a safe point (node.c) */
    /* the process grows: memory kept warm beyond the retention cap goes
     * back first (no lock held) */
    if (cold && __atomic_load_n(qs_page_warm_bytes, __ATOMIC_RELAXED) > qs_page_retain_cap())
        qs_page_warm_cut(qs_page_retain_cap());
    return s;
}

/* A fully free chunk the kernel would not unmap: back to its pool, as the
 * fully free chunk it is (the pool may then keep two; the next one to
 * empty is unmapped again), and counted. */
static QS_SLOW void chunk_keep(struct qs_page_pool *p, struct qs_chunk *ch)
{
    count_failure(&failures.unmap, &failures.unmap_bytes, ch->map_size);
    qs_page_map_set(ch, ch->map_size, false);
    qs_lock_acquire(&p->lock);
    pool_add_free_chunk(p, ch);
    qs_lock_release(&p->lock);
}

/* A slab leaving its cache for the page layer: no pointer is its object
 * any more, and its bytes no longer count as handed out. */
void qs_page_slab_leave(struct qs_slab *s)
{
    __atomic_sub_fetch(&qs_page_out, qs_slab_bytes(s->order), __ATOMIC_RELAXED);
    if (unlikely(qs_debug_tools)) /* valgrind or ASan saw its objects: usable again */
        qs_debug_hooks.slab_released(s);
    __atomic_store_n(&s->cache, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&s->span, 0, __ATOMIC_RELAXED); /* no pointer is its object now */
    __atomic_store_n(&s->state, (uint8_t)QS_SLAB_FREE, __ATOMIC_RELAXED); /* qs_page_walk */
    s->owner = NULL;
    s->freelist = s->tail = NULL;
}

/* Decommit [mem, mem + bytes), the slots of one or more slabs: the bytes
 * the OS took (0 if it refused: the pages stay resident, counted). */
static size_t decommit(char *mem, size_t bytes)
{
    if (unlikely(qs_os_decommit(mem, bytes) != 0)) {
        /* refused: the slots still go back to their chunk (no cache wants
         * them), their pages resident until reused or the chunk unmapped */
        count_failure(&failures.decommit, &failures.decommit_bytes, bytes);
        return 0;
    }
    return bytes;
}

/* PINS.  While a defragmentation pass (api/defrag.c) reads the objects of
 * slabs it found by qs_page_walk, those slabs may leave their cache (every
 * object freed by other threads) and their slots return to their chunks; a
 * pin keeps every chunk mapped meanwhile, so that such a read finds
 * memory (zeros, or another cache's objects), never a hole.  Why it holds:
 * qs_page_pin's increment comes before the walk takes a pool's lock; a
 * slot_return that would unmap a chunk decides under that same lock.  If
 * it decided before the walk, the chunk left the pool's list first and the
 * walk never saw it; if after, the walk's release of the lock happens
 * before the decision, so the decision sees the pin and keeps the chunk,
 * fully free, in its pool.  qs_page_unpin's last release unmaps those kept
 * beyond each pool's one. */
static unsigned long page_pins;

void qs_page_pin(void)
{
    __atomic_fetch_add(&page_pins, 1, __ATOMIC_SEQ_CST);
}

/* After fork, in the child: only the forking thread's pins are left */
void qs_page_pins_forked(unsigned long mine)
{
    __atomic_store_n(&page_pins, mine, __ATOMIC_RELAXED);
}

/* Unlink fully free chunk ch from pool p (p->lock held): it is to be unmapped */
static void pool_del_chunk(struct qs_page_pool *p, struct qs_chunk *ch)
{
    if (ch->home)
        p->home[ch->home - 1] = NULL;
    ch->home = 0;
    avail_del(p, ch);
    if (ch->all_prev)
        ch->all_prev->all_next = ch->all_next;
    else
        p->all = ch->all_next;
    if (ch->all_next)
        ch->all_next->all_prev = ch->all_prev;
}

static void chunk_unmap(struct qs_page_pool *p, struct qs_chunk *unmap)
{
    qs_page_map_set(unmap, unmap->map_size, true);
    size_t mapped = unmap->map_size, slots = chunk_slot_bytes(unmap);
    if (unlikely(qs_os_unmap(unmap, mapped) != 0)) {
        chunk_keep(p, unmap);
    } else {
        __atomic_fetch_sub(&chunk_bytes, mapped, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&slot_bytes, slots, __ATOMIC_RELAXED);
    }
}

void qs_page_unpin(void)
{
    if (__atomic_sub_fetch(&page_pins, 1, __ATOMIC_SEQ_CST) != 0)
        return;
    for (int n = 0; n < qs_nr_nodes; n++)
        for (int o = 0; o < QS_NR_ORDERS; o++) {
            struct qs_page_pool *p = &qs_page_pools[n][o];
            for (;;) {
                struct qs_chunk *unmap = NULL;
                qs_lock_acquire(&p->lock);
                if (p->nr_fully_free > 1 && !__atomic_load_n(&page_pins, __ATOMIC_RELAXED))
                    for (struct qs_chunk *ch = p->all; ch; ch = ch->all_next)
                        if (ch->nr_free == ch->nr_slots - ch->first_slot) {
                            pool_del_chunk(p, ch);
                            p->nr_fully_free--;
                            unmap = ch;
                            break;
                        }
                qs_lock_release(&p->lock);
                if (!unmap)
                    break;
                chunk_unmap(p, unmap);
            }
        }
}

/* A left slab's slot (decommitted, or refused) back to its chunk; a chunk
 * all of whose slots are free then unmapped, unless it is its pool's only
 * fully free one or a pass holds a pin (above). */
static void slot_return(struct qs_slab *s)
{
    struct qs_chunk *ch = qs_chunk_of(s->mem);
    struct qs_page_pool *p = &qs_page_pools[ch->node][ch->order];
    struct qs_chunk *unmap = NULL;
    qs_lock_acquire(&p->lock);
    s->next = ch->free_slots;
    ch->free_slots = s;
    if (ch->nr_free++ == 0)
        avail_add(p, ch);
    if (ch->nr_free == ch->nr_slots - ch->first_slot) {
        if (p->nr_fully_free >= 1 && !__atomic_load_n(&page_pins, __ATOMIC_RELAXED)) {
            pool_del_chunk(p, ch);
            unmap = ch;
        } else {
            p->nr_fully_free++;
        }
    }
    qs_lock_release(&p->lock);
    if (unmap)
        chunk_unmap(p, unmap);
}

size_t qs_page_free_slab_now(struct qs_slab *s)
{
    s->next = NULL;
    return qs_page_free_slabs(s);
}

/* One slab a front end lets go as it empties (SLUB's pass-through block,
 * SLOB's page, a slab that could not be set up): kept warm, as the kernel's
 * page allocator keeps a freed page hot on its CPU's list. */
size_t qs_page_free_slab(struct qs_slab *s)
{
    s->next = NULL;
    return qs_page_keep_slabs(s);
}

/* A ->next list sorted by address (merge sort: lists of a destroy may be
 * long). */
static struct qs_slab *sort_by_mem(struct qs_slab *l)
{
    if (!l || !l->next)
        return l;
    struct qs_slab *slow = l, *fast = l->next;
    while (fast && fast->next) {
        slow = slow->next;
        fast = fast->next->next;
    }
    struct qs_slab *b = slow->next;
    slow->next = NULL;
    struct qs_slab *a = sort_by_mem(l), head, *t = &head;
    b = sort_by_mem(b);
    while (a && b) {
        struct qs_slab **m = a->mem < b->mem ? &a : &b;
        t->next = *m;
        t = *m;
        *m = (*m)->next;
    }
    t->next = a ? a : b;
    return head.next;
}

/* Many slabs at once (shrink, trim, the purger, destroy: a ->next linked
 * list): sorted by address, each run of adjacent slots of one chunk
 * decommitted with one madvise.  In a process whose threads have run on
 * several CPUs every madvise that drops pages also flushes their TLBs: an
 * interrupt to each of those CPUs and a wait for the slowest, one per run
 * instead of one per slab.  (Slots of a chunk are handed out in address
 * order, and the slabs a cache gives back together were mostly born
 * together.)  The slots go back to their chunks only after the decommits,
 * so no slot is reused while its pages go. */
size_t qs_page_free_slabs(struct qs_slab *list)
{
    for (struct qs_slab *s = list; s; s = s->next)
        qs_page_slab_leave(s);
    return qs_page_free_left(list);
}

/* The decommits and slot returns of qs_page_free_slabs, for slabs that
 * have left their caches already (qs_page_slab_leave). */
size_t qs_page_free_left(struct qs_slab *list)
{
    list = sort_by_mem(list);
    size_t back = 0;
    for (struct qs_slab *s = list; s;) {
        struct qs_chunk *ch = qs_chunk_of(s->mem);
        char *end = s->mem + qs_slab_bytes(s->order);
        struct qs_slab *t = s->next;
        for (; t && t->mem == end && qs_chunk_of(t->mem) == ch; t = t->next)
            end += qs_slab_bytes(t->order);
        size_t b = decommit(s->mem, (size_t)(end - s->mem));
        back += b;
        for (; s != t; s = s->next) /* zero again, unless the OS refused */
            s->empty_ms = b ? QS_SLAB_ZERO : 0;
    }
    while (list) {
        struct qs_slab *next = list->next;
        slot_return(list);
        list = next;
    }
    return back;
}

struct qs_slab *qs_slab_lookup(const void *p)
{
    struct qs_slab *s = qs_slab_fast(p);
    if (s)
        return s;
    struct qs_chunk *ch = qs_chunk_of(p);
    return ch && ch->kind == QS_CHUNK_SLABS ? qs_chunk_slab(ch, p) : NULL;
}

void qs_page_walk(void (*fn)(struct qs_slab *s, void *arg), void *arg)
{
    for (int n = 0; n < qs_nr_nodes; n++)
        for (int o = 0; o < QS_NR_ORDERS; o++) {
            struct qs_page_pool *p = &qs_page_pools[n][o];
            qs_lock_acquire(&p->lock);
            for (struct qs_chunk *ch = p->all; ch; ch = ch->all_next)
                for (uint32_t i = ch->first_slot; i < ch->next_unused; i++)
                    if (__atomic_load_n(&ch->slabs[i].cache, __ATOMIC_ACQUIRE))
                        fn(&ch->slabs[i], arg);
            qs_lock_release(&p->lock);
        }
}
