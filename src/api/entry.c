/*
 * entry.c - the entry points of qslab.h whose work is done below the API
 * layer (statistics and reports, tunables, the control channel, the owner
 * budget, the owner kind, fault injection).  Any of them may be a program's first call into
 * qslab, so each starts the library up (qs_init) and then calls the layer
 * that does the work, which runs after start-up.  Start-up is the API
 * layer's, and so are its triggers (api/api.h, START-UP).
 */
#include "api/kmalloc.h"
#include "api/api.h"
#include "debug/debug.h"
#include "observe/control.h"
#include "owner/owner.h"
#include "observe/stats.h"
#include "observe/tune.h"

#include <errno.h>

QSLAB_EXPORT void qslab_slabinfo(int fd)
{
    qs_init();
    qs_slabinfo(fd);
}

QSLAB_EXPORT void qslab_stats_report(int fd)
{
    qs_init();
    qs_stats_report(fd);
}

QSLAB_EXPORT int qslab_stats_json(int fd)
{
    if (fd < 0) {
        errno = EBADF;
        return -1;
    }
    qs_init();
    return qs_stats_json(fd);
}

QSLAB_EXPORT int qslab_tune(const char *cache, const char *attr, const char *value)
{
    qs_init();
    return qs_tune(cache, attr, value);
}

QSLAB_EXPORT int qslab_tune_get(const char *cache, const char *attr, unsigned long *out)
{
    qs_init();
    return qs_tune_get(cache, attr, out);
}

QSLAB_EXPORT int qslab_control_start(void)
{
    qs_init();
    return qs_control_start();
}

QSLAB_EXPORT void qslab_budget_stats(struct qslab_budget_stats *st)
{
    qs_init();
    qs_owner_budget_stats(st); /* front/slqb/budget.c */
}

QSLAB_EXPORT void qslab_cached_stats(struct qslab_cached_stats *st)
{
    qs_init();
    st->max = __atomic_load_n(&qs_cached.max, __ATOMIC_RELAXED);
    st->cached = qs_node_cached_bytes(); /* core/node.c */
    st->walks = __atomic_load_n(&qs_cached.walks, __ATOMIC_RELAXED);
    st->cuts = __atomic_load_n(&qs_cached.cuts, __ATOMIC_RELAXED);
    st->cut_bytes = __atomic_load_n(&qs_cached.cut_bytes, __ATOMIC_RELAXED);
}

/* Fault injection of the OS's requests and give-backs, for tests
 * (os/os.h). */
QSLAB_EXPORT int qslab_fault_inject(unsigned long nth, unsigned flags)
{
    if (flags & ~(QSLAB_FAULT_RELEASE | QSLAB_FAULT_EVERY)) {
        errno = EINVAL;
        return -1;
    }
    qs_init(); /* start-up's own requests are not the caller's to count */
    int kind = flags & QSLAB_FAULT_RELEASE ? QS_OS_FAULT_RELEASE : QS_OS_FAULT_MAP;
    qs_os_fault_arm(kind, nth, (flags & QSLAB_FAULT_EVERY) != 0);
    return 0;
}

QSLAB_EXPORT unsigned long qslab_fault_injected(unsigned flags)
{
    return qs_os_fault_injected(flags & QSLAB_FAULT_RELEASE ? QS_OS_FAULT_RELEASE
                                                            : QS_OS_FAULT_MAP);
}

QSLAB_EXPORT void qslab_owner_info(struct qslab_owner_info *info)
{
    qs_init();
    qs_owner_info(info);
}

/* The hardened profile from now on: the caches made after this get its
 * flags (debug/flags.c), the caches in use debug twins with them
 * (debug/twin.c), the large blocks made after it guard pages and a
 * quarantine (core/large.c); asked before start-up (a first call), the
 * start-up's caches are made with them. */
QSLAB_EXPORT int qslab_harden(void)
{
    qs_debug_harden();
    qs_init();
    qs_large_protect_add(QS_LARGE_GUARD | QS_LARGE_KEEP);
    return qs_twin_harden_all();
}
