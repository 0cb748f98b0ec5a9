/*
 * malloc/malloc.c - the glibc allocation surface over qslab, for
 * libqslab-malloc.so (LD_PRELOAD) and libqslab-malloc.a (link time).
 *
 * Every function is a thin wrapper; the library is linked with
 * -Bsymbolic-functions so the wrappers reach qslab directly.  Edge cases
 * follow glibc 2.36: every block is 16-byte aligned (the x86-64 ABI's
 * max_align_t: requests under 16 bytes take kmalloc-16, not kmalloc-8);
 * malloc(0) and calloc of 0 bytes return a block of size zero, a pointer of
 * its own that faults on any access (api/zero.c); realloc(p, 0) frees p and
 * returns NULL;
 * memalign/aligned_alloc round an alignment that is not a power of two up to
 * one (glibc before 2.38 does) and refuse one above SIZE_MAX/2+1 with EINVAL;
 * posix_memalign returns EINVAL for an alignment that is not a power-of-two
 * multiple of sizeof(void *) without touching errno, and ENOMEM with errno
 * ENOMEM (an alignment over QSLAB_MAX_ALIGN too: glibc fails those for
 * want of memory); malloc_info with options != 0 returns EINVAL; free keeps
 * errno.  free_sized checks its size (qslab_free_sized: a size that cannot
 * be the object's is reported, as a bad pointer is).
 * C++ operator new/delete reach these through libstdc++, but for the sized
 * and aligned deletes, which are here (below).
 */

#define _GNU_SOURCE
#include "api/api.h"
#include "api/kmalloc.h"
#include "observe/stats.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MALLOC_EXPORT __attribute__((visibility("default")))

/* malloc's minimum block: 16 bytes, for 16-byte alignment */
static inline size_t min16(size_t size)
{
    return size < 16 ? 16 : size;
}

MALLOC_EXPORT void *malloc(size_t size)
{
    return qs_kmalloc(size, qs_kmalloc_small_index16); /* qslab_malloc(min16(size)) */
}

MALLOC_EXPORT void free(void *p)
{
    qs_kfree(p); /* qslab_free's body: the fast path is one call deep */
}

/* cfree and __libc_free: the same function as free, not copies of its
 * path (GCC's copy takes free's attributes, which it would miss) */
#if defined(__clang__)
#define FREE_ALIAS __attribute__((alias("free")))
#else
#define FREE_ALIAS __attribute__((copy(free), alias("free")))
#endif
MALLOC_EXPORT void cfree(void *p) FREE_ALIAS;

MALLOC_EXPORT void free_sized(void *p, size_t size)
{
    if (unlikely(!qs_kfree_sized_fast(p, size)))
        qs_free_sized_as(p, size, "free_sized"); /* checks the size against the object's class */
}

/* C23: p came from aligned_alloc(align, size): the pointer must have that
 * alignment, and the size must fit the block (qs_free_aligned_as). */
MALLOC_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
    qs_free_aligned_as(p, align, size ? size : 1, "free_aligned_sized");
}

/* C++'s sized and aligned deletes (C++14, C++17), under their mangled
 * names (x86-64 and aarch64: size_t is unsigned long, std::align_val_t an
 * enum of it).  libstdc++'s own drop the size and the alignment and call
 * free; these check them against the object, on this path only: a size
 * its class cannot have been asked for (a delete through a pointer to a
 * smaller type), or an alignment the pointer does not have, is reported as
 * free_sized and free_aligned_sized report theirs, and nothing is freed.
 * The forms without size or alignment stay libstdc++'s (free).  A pointer
 * that is not in qslab's memory goes to operator delete(void *), whoever
 * defines it: a program that replaced operator new and the unsized delete
 * alone gets its sized deletes there, as the C++ standard's default sized
 * delete does (the weak reference is not bound by -Bsymbolic-functions:
 * this library does not define it).  new and new[] stay libstdc++'s,
 * which call malloc and aligned_alloc, so their memory is qslab's. */
extern void cxx_delete(void *p) __asm__("_ZdlPv") __attribute__((weak));
extern void cxx_delete_array(void *p) __asm__("_ZdaPv") __attribute__((weak));

/* A sized delete that is not the fast case: qslab's memory gets the full
 * check (qs_free_sized_as), other memory the unsized delete */
static QS_NOINLINE void delete_sized_slow(void *p, size_t size, bool array)
{
    if (p && !qs_kmalloc_owns(p)) {
        void (*fn)(void *) = array ? cxx_delete_array : cxx_delete;
        if (fn)
            fn(p);
        else
            qs_kfree(p); /* no C++ runtime: free's report */
        return;
    }
    qs_free_sized_as(p, size, array ? "operator delete[]" : "operator delete");
}

#define CXX_DELETE(name, sym, ...) MALLOC_EXPORT void name(__VA_ARGS__) __asm__(sym)
CXX_DELETE(cxx_delete_sized, "_ZdlPvm", void *p, size_t size);
CXX_DELETE(cxx_delete_array_sized, "_ZdaPvm", void *p, size_t size);
CXX_DELETE(cxx_delete_aligned, "_ZdlPvSt11align_val_t", void *p, size_t align);
CXX_DELETE(cxx_delete_array_aligned, "_ZdaPvSt11align_val_t", void *p, size_t align);
CXX_DELETE(cxx_delete_sized_aligned, "_ZdlPvmSt11align_val_t", void *p, size_t size, size_t align);
CXX_DELETE(cxx_delete_array_sized_aligned, "_ZdaPvmSt11align_val_t", void *p, size_t size, size_t align);
CXX_DELETE(cxx_delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t", void *p, size_t align,
           const void *nt);
CXX_DELETE(cxx_delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t", void *p, size_t align,
           const void *nt);

void cxx_delete_sized(void *p, size_t size)
{
    if (unlikely(!qs_kfree_sized_fast(p, size)))
        delete_sized_slow(p, size, false);
}

void cxx_delete_array_sized(void *p, size_t size)
{
    if (unlikely(!qs_kfree_sized_fast(p, size)))
        delete_sized_slow(p, size, true);
}

void cxx_delete_aligned(void *p, size_t align)
{
    qs_free_aligned_as(p, align, 0, "operator delete");
}

void cxx_delete_array_aligned(void *p, size_t align)
{
    qs_free_aligned_as(p, align, 0, "operator delete[]");
}

void cxx_delete_sized_aligned(void *p, size_t size, size_t align)
{
    qs_free_aligned_as(p, align, size ? size : 1, "operator delete");
}

void cxx_delete_array_sized_aligned(void *p, size_t size, size_t align)
{
    qs_free_aligned_as(p, align, size ? size : 1, "operator delete[]");
}

void cxx_delete_aligned_nothrow(void *p, size_t align, const void *nt)
{
    (void)nt;
    qs_free_aligned_as(p, align, 0, "operator delete");
}

void cxx_delete_array_aligned_nothrow(void *p, size_t align, const void *nt)
{
    (void)nt;
    qs_free_aligned_as(p, align, 0, "operator delete[]");
}

MALLOC_EXPORT void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return qslab_calloc(1, total ? min16(total) : 0); /* 0: a zero-size block */
}

MALLOC_EXPORT void *realloc(void *p, size_t size)
{
    /* realloc(p, 0) frees p (glibc); realloc(NULL, 0) is malloc(0) */
    return qslab_realloc(p, size == 0 && p ? 0 : min16(size));
}

MALLOC_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

static void *memalign_impl(size_t align, size_t size)
{
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (align <= 16) /* malloc's alignment already */
        return qslab_malloc(min16(size));
    if (align & (align - 1))
        align = (size_t)1 << (64 - __builtin_clzl(align));
    /* qslab_aligned_alloc refuses alignments over QSLAB_MAX_ALIGN (EINVAL);
     * glibc tries, and fails for want of memory: ENOMEM */
    if (align > QSLAB_MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    return qslab_aligned_alloc(align, size);
}

MALLOC_EXPORT void *memalign(size_t align, size_t size)
{
    return memalign_impl(align, size);
}

MALLOC_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    return memalign_impl(align, size);
}

MALLOC_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (align % sizeof(void *) != 0 || (align & (align - 1)) || align == 0)
        return EINVAL;
    void *p = memalign_impl(align, size); /* errno ENOMEM on failure, as glibc */
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

MALLOC_EXPORT void *valloc(size_t size)
{
    return memalign_impl((size_t)sysconf(_SC_PAGESIZE), size);
}

MALLOC_EXPORT void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = (size + page - 1) & ~(page - 1);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return memalign_impl(page, rounded ? rounded : page);
}

MALLOC_EXPORT size_t malloc_usable_size(void *p)
{
    return qs_usable_size_as(p, "malloc_usable_size");
}

MALLOC_EXPORT QS_NOINLINE int malloc_trim(size_t pad)
{
    (void)pad;
    return qslab_trim() > 0;
}

/* glibc's internal names, for programs and libraries that call them. */
MALLOC_EXPORT void *__libc_malloc(size_t size) { return malloc(size); }
MALLOC_EXPORT void __libc_free(void *p) FREE_ALIAS;
MALLOC_EXPORT void *__libc_calloc(size_t n, size_t size) { return calloc(n, size); }
MALLOC_EXPORT void *__libc_realloc(void *p, size_t size) { return realloc(p, size); }
MALLOC_EXPORT void *__libc_memalign(size_t align, size_t size) { return memalign_impl(align, size); }
MALLOC_EXPORT void *__libc_valloc(size_t size) { return valloc(size); }
MALLOC_EXPORT void *__libc_pvalloc(size_t size) { return pvalloc(size); }
MALLOC_EXPORT int __posix_memalign(void **out, size_t align, size_t size)
{
    return posix_memalign(out, align, size);
}

/* ---- statistics in glibc's shapes ---- */

static void malloc_totals(struct qs_totals *t)
{
    qs_init(); /* mallinfo may be the program's first call */
    qs_stats_totals(t);
}

MALLOC_EXPORT QS_NOINLINE struct mallinfo2 mallinfo2(void)
{
    struct qs_totals t;
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof(mi));
    malloc_totals(&t);
    mi.arena = t.slab_bytes;       /* bytes in slabs */
    mi.ordblks = t.slabs;          /* slabs */
    mi.hblks = t.large_count;      /* directly mapped blocks */
    mi.hblkhd = t.large_bytes;
    mi.uordblks = t.inuse_bytes;   /* allocated (slot bytes) */
    mi.fordblks = t.slab_bytes - t.inuse_bytes; /* free in slabs, queues included */
    mi.fsmblks = t.queued_bytes;   /* of which in per-thread queues */
    mi.keepcost = t.empty_bytes;   /* empty slabs kept for reuse (trimmable) */
    return mi;
}

static int clamp_int(size_t v)
{
    return v > (size_t)0x7fffffff ? 0x7fffffff : (int)v;
}

MALLOC_EXPORT QS_NOINLINE struct mallinfo mallinfo(void)
{
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo mi;
    mi.arena = clamp_int(m2.arena);
    mi.ordblks = clamp_int(m2.ordblks);
    mi.smblks = clamp_int(m2.smblks);
    mi.hblks = clamp_int(m2.hblks);
    mi.hblkhd = clamp_int(m2.hblkhd);
    mi.usmblks = clamp_int(m2.usmblks);
    mi.fsmblks = clamp_int(m2.fsmblks);
    mi.uordblks = clamp_int(m2.uordblks);
    mi.fordblks = clamp_int(m2.fordblks);
    mi.keepcost = clamp_int(m2.keepcost);
    return mi;
}

MALLOC_EXPORT QS_NOINLINE void malloc_stats(void)
{
    struct qs_totals t;
    malloc_totals(&t);
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    size_t from;
#define LINE(label, v)                                                                             \
    qs_buf_str(&b, label);                                                                         \
    from = b.len;                                                                                  \
    qs_buf_u64(&b, v);                                                                             \
    qs_buf_pad(&b, 10, true, from);                                                                \
    qs_buf_putc(&b, '\n')
    qs_buf_str(&b, "Arena 0:\n");
    LINE("system bytes     = ", t.slab_bytes);
    LINE("in use bytes     = ", t.inuse_bytes);
    qs_buf_str(&b, "Total (incl. mmap):\n");
    LINE("system bytes     = ", t.slab_bytes + t.large_bytes);
    LINE("in use bytes     = ", t.inuse_bytes + t.large_bytes);
    LINE("max mmap regions = ", t.large_count);
    LINE("max mmap bytes   = ", t.large_bytes);
#undef LINE
    qs_os_write(2, text, b.len);
}

MALLOC_EXPORT QS_NOINLINE int malloc_info(int options, FILE *fp)
{
    if (options != 0)
        return EINVAL; /* glibc 2.36 returns the error code, errno untouched */
    struct qs_totals t;
    malloc_totals(&t);
    fprintf(fp,
            "<malloc version=\"1\">\n"
            "<heap nr=\"0\">\n"
            "<sizes>\n</sizes>\n"
            "<total type=\"fast\" count=\"0\" size=\"%zu\"/>\n"
            "<total type=\"rest\" count=\"%lu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<system type=\"max\" size=\"%zu\"/>\n"
            "<aspace type=\"total\" size=\"%zu\"/>\n"
            "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
            "</heap>\n"
            "<total type=\"fast\" count=\"0\" size=\"%zu\"/>\n"
            "<total type=\"rest\" count=\"%lu\" size=\"%zu\"/>\n"
            "<total type=\"mmap\" count=\"%lu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<system type=\"max\" size=\"%zu\"/>\n"
            "<aspace type=\"total\" size=\"%zu\"/>\n"
            "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
            "</malloc>\n",
            t.queued_bytes, t.slabs, t.slab_bytes - t.inuse_bytes, t.slab_bytes, t.slab_bytes,
            t.slab_bytes, t.slab_bytes, t.queued_bytes, t.slabs, t.slab_bytes - t.inuse_bytes,
            t.large_count, t.large_bytes, t.slab_bytes + t.large_bytes,
            t.slab_bytes + t.large_bytes, t.slab_bytes + t.large_bytes,
            t.slab_bytes + t.large_bytes);
    return 0;
}
