/*
 * cacheutil.h (tests) - what the tests of qslab's caches repeat: statistics,
 * tunables, a sanity round.  Header only; public API only (like front.h).
 *
 *   tc_stats(c)          the cache's statistics (CHECKed; zeroes if refused)
 *   tc_active(c)         its objects in use, (unsigned long)-1 if unreadable
 *   tc_get(cache, attr)  a tunable's value, 0xdeadbeef if unreadable
 *   tc_check_sane(c, n, size, fill, when)  n fresh objects: none NULL, none
 *                        twice, no fatal handler call; each written first
 *                        (size bytes); all freed again
 *   tc_refused_at(...)   qslab_tune refused: EINVAL, the value unchanged,
 *                        what it printed captured for the caller's checks
 *   tc_accepted(cache, attr, value, expect)  qslab_tune accepted: 0, and
 *                        the value reads back as expect (CHECKed at the
 *                        caller's line)
 */
#ifndef QSLAB_TESTS_CACHEUTIL_H
#define QSLAB_TESTS_CACHEUTIL_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qslab.h"
#include "testutil.h"

/* c's statistics (CHECKed; zeroes if qslab_cache_stats refuses). */
static inline struct qslab_cache_stats tc_stats(qslab_cache *c)
{
    struct qslab_cache_stats st;
    memset(&st, 0, sizeof st);
    CHECK(qslab_cache_stats(c, &st) == 0);
    return st;
}

/* c's objects in use; (unsigned long)-1 if its statistics cannot be read. */
static inline unsigned long tc_active(qslab_cache *c)
{
    struct qslab_cache_stats st;
    return qslab_cache_stats(c, &st) ? (unsigned long)-1 : st.active_objs;
}

/* The tunable attr of cache `cache`; 0xdeadbeef if it cannot be read. */
static inline unsigned long tc_get(const char *cache, const char *attr)
{
    unsigned long v = 0xdeadbeef;
    if (qslab_tune_get(cache, attr, &v) != 0)
        return 0xdeadbeef;
    return v;
}

/* n fresh objects of c: none NULL, none twice, no handler call; each one's
 * first `size` bytes written with byte `fill` (-1: its index) first; all
 * freed. */
static inline void tc_check_sane(qslab_cache *c, int n, size_t size, int fill, const char *when)
{
    void **v = calloc((size_t)n, sizeof *v);
    int nulls = 0;
    for (int i = 0; i < n; i++)
        if (!(v[i] = qslab_cache_alloc(c)))
            nulls++;
        else if (size)
            memset(v[i], fill < 0 ? i : fill, size);
    int dups = tu_sorted_dups(v, n);
    for (int i = 0; i < n; i++)
        if (v[i])
            qslab_cache_free(c, v[i]);
    CHECKF(nulls == 0 && dups == 0, "%s after %s: %d NULL, %d handed out twice",
           qslab_cache_name(c), when, nulls, dups);
    CHECKF(tu_capture_calls() == 0, "%s after %s: handler called: %s", qslab_cache_name(c), when,
           tu_fatal_msg);
    tu_capture_reset();
    free(v);
}

/* qslab_tune(cache, attr, value) with stderr captured into err[cap]: it must
 * fail with EINVAL and leave the value as it was (CHECKed at file:line). */
static inline void tc_refused_at(const char *file, int line, const char *cache, const char *attr,
                                 const char *value, char *err, size_t cap)
{
    unsigned long before = tc_get(cache, attr);
    tu_stderr_begin();
    errno = 0;
    int r = qslab_tune(cache, attr, value);
    int e = errno;
    tu_stderr_end(err, cap);
    tu_check(r == -1 && e == EINVAL, file, line, "tune refused",
             "qslab_tune(\"%s\", \"%s\", \"%s\") = %d errno %d", cache, attr, value, r, e);
    unsigned long after = tc_get(cache, attr);
    tu_check(after == before, file, line, "refused value not applied", "%s %s: %lu -> %lu", cache,
             attr, before, after);
}

/* qslab_tune(cache, attr, value) must succeed and attr read back as expect. */
#define tc_accepted(cache, attr, value, expect)                                                    \
    tc_accepted_at(__FILE__, __LINE__, cache, attr, value, expect)
static inline void tc_accepted_at(const char *file, int line, const char *cache, const char *attr,
                                  const char *value, unsigned long expect)
{
    errno = 0;
    int r = qslab_tune(cache, attr, value);
    tu_check(r == 0, file, line, "tune accepted",
             "qslab_tune(\"%s\", \"%s\", \"%s\") = %d errno %d", cache, attr, value, r, errno);
    unsigned long v = tc_get(cache, attr);
    tu_check(v == expect, file, line, "value reads back", "%s %s = %lu, expected %lu", cache, attr,
             v, expect);
}

#endif /* QSLAB_TESTS_CACHEUTIL_H */
