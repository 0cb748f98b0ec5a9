/*
 * zero.c - blocks of size zero.  malloc(0), calloc of zero bytes and
 * qslab_malloc(0) (as the kernel's kmalloc(0) returns ZERO_SIZE_PTR) get a
 * pointer of their own into a reserved range that can never be read or
 * written (PROT_NONE, no memory behind it): any access to the block faults
 * at once, where a 16-byte object would let a program read and write 16
 * bytes it never asked for.  malloc_usable_size says 0; free, realloc and
 * free_sized(p, 0) take the block back; freeing one twice, or a pointer
 * into the range that is no block, is reported as bad frees are.
 *
 * QS_ZERO_BLOCKS blocks, 16 bytes apart (malloc's alignment), one live bit
 * each; a block is found from a cursor that moves on (next fit, a word of
 * bits at a time), under zero_lock: zero-size blocks are rare, and none is
 * on a fast path (malloc's size 0 fails its class tests, free's pointer is
 * in no slab: both end in slow paths).  When every block is live, a
 * zero-size request gets a 16-byte object instead, as before.
 */
#include "api/api.h"
#include "api/zero.h"

#define QS_ZERO_BLOCKS (1u << 20) /* 16 MiB of address space */
#define QS_ZERO_SPAN ((size_t)QS_ZERO_BLOCKS * QS_ZERO_GRAIN)

char *qs_zero_base; /* atomic (release, once): NULL until the first zero-size block */
static qs_lock zero_lock;
static QS_BSS_APART uint64_t live[QS_ZERO_BLOCKS / 64]; /* zero_lock */
static unsigned cursor, nr_live;           /* zero_lock: a word of live[] */
static unsigned long zero_allocs;          /* atomic */

bool qs_zero_in(const void *p)
{
    char *b = __atomic_load_n(&qs_zero_base, __ATOMIC_ACQUIRE);
    return b && (uintptr_t)p - (uintptr_t)b < QS_ZERO_SPAN;
}

void *qs_zero_alloc(void)
{
    qs_lock_acquire(&zero_lock);
    char *b = qs_zero_base;
    if (unlikely(!b)) {
        b = qs_os_reserve(QS_ZERO_SPAN);
        if (!b) {
            qs_lock_release(&zero_lock);
            return NULL;
        }
        __atomic_store_n(&qs_zero_base, b, __ATOMIC_RELEASE);
    }
    void *p = NULL;
    if (nr_live < QS_ZERO_BLOCKS) {
        while (live[cursor] == ~(uint64_t)0)
            cursor = (cursor + 1) % (QS_ZERO_BLOCKS / 64);
        unsigned bit = (unsigned)__builtin_ctzll(~live[cursor]);
        live[cursor] |= (uint64_t)1 << bit;
        nr_live++;
        p = b + ((size_t)cursor * 64 + bit) * QS_ZERO_GRAIN;
    }
    qs_lock_release(&zero_lock);
    if (p)
        __atomic_fetch_add(&zero_allocs, 1, __ATOMIC_RELAXED);
    return p;
}

/* The fault handler (debug/fault.c, through qs_api_hooks): the block whose
 * slot holds a, or NULL (not in the range); no lock (a signal handler) */
void *qs_zero_block(uintptr_t a)
{
    char *b = __atomic_load_n(&qs_zero_base, __ATOMIC_ACQUIRE);
    if (!b || a - (uintptr_t)b >= QS_ZERO_SPAN)
        return NULL;
    return (void *)(a & ~(uintptr_t)(QS_ZERO_GRAIN - 1));
}

/* p is in the range (qs_zero_in): its block's index, or -1 (reported as
 * `what` of a pointer between blocks) */
static long block_of(const void *p, const char *what)
{
    size_t off = (size_t)((const char *)p - qs_zero_base);
    if (off % QS_ZERO_GRAIN) {
        qs_fatal("invalid %s of %p: inside the range of zero-size blocks, not a block", what, p);
        return -1;
    }
    return (long)(off / QS_ZERO_GRAIN);
}

/* p is in the range: is it a live block?  If not, say so (false). */
bool qs_zero_live(const void *p, const char *what)
{
    long i = block_of(p, what);
    if (i < 0)
        return false;
    qs_lock_acquire(&zero_lock);
    bool on = live[i / 64] >> (i % 64) & 1;
    qs_lock_release(&zero_lock);
    if (!on)
        qs_fatal("%s of %p: a zero-size block already freed (double free)", what, p);
    return on;
}

void qs_zero_free(void *p, const char *what)
{
    long i = block_of(p, what);
    if (i < 0)
        return;
    uint64_t m = (uint64_t)1 << (i % 64);
    qs_lock_acquire(&zero_lock);
    bool on = live[i / 64] & m;
    if (on) {
        live[i / 64] &= ~m;
        nr_live--;
    }
    qs_lock_release(&zero_lock);
    if (!on)
        qs_fatal("%s of %p: double free of a zero-size block", what, p);
}

/* fork (fork.c): the lock taken before, released in parent and child
 * after, so that no thread the child lacks holds it (a leaf: no other lock
 * is taken under it) */
void qs_zero_fork(bool before)
{
    if (before)
        qs_lock_acquire(&zero_lock);
    else
        qs_lock_release(&zero_lock);
}

unsigned long qs_zero_live_count(void)
{
    qs_lock_acquire(&zero_lock);
    unsigned long n = nr_live;
    qs_lock_release(&zero_lock);
    return n;
}
