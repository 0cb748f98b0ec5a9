/*
 * core/large.h - the large blocks' counters (core/large.c holds them,
 * api/kmalloc.c counts, the observe root and the statistics read them) and
 * the totals over every cache that mallinfo and the statistics report.
 * Part of core/internal.h, which includes it.
 */
#ifndef QSLAB_CORE_LARGE_H
#define QSLAB_CORE_LARGE_H

#ifndef QSLAB_INTERNAL_H
#error "core/large.h is part of core/internal.h: include that"
#endif

/* Large blocks' counters (qs_large: defined in core/large.c, counted by
 * api/kmalloc.c), read from outside through the observe root too: totals,
 * and by size bucket (bucket b: mappings of [2^(SHIFT0 + b),
 * 2^(SHIFT0 + b + 1)) bytes; the last, anything bigger). */
#define QS_LARGE_BUCKET_SHIFT0 22 /* 4 MiB: the smallest mapping (one chunk) */
#define QS_LARGE_BUCKETS 16       /* up to 128 GiB, then one for the rest */
struct qs_large_bucket {
    unsigned long alloc, live;
    size_t live_bytes;
};
struct qs_large_counters {
    unsigned long alloc, free, live;
    size_t live_bytes;
    struct qs_large_bucket bucket[QS_LARGE_BUCKETS];
};
extern struct qs_large_counters qs_large;

/* Totals over every cache, for mallinfo and friends (observe/stats.c). */
struct qs_totals {
    size_t slab_bytes;   /* objects' slots in all slabs (num_objs * slot) */
    size_t inuse_bytes;  /* allocated objects' slots */
    size_t queued_bytes; /* free objects held in queues and inboxes */
    size_t empty_bytes;  /* empty slabs kept for reuse */
    unsigned long slabs, large_count;
    size_t large_bytes;
};

#endif /* QSLAB_CORE_LARGE_H */
