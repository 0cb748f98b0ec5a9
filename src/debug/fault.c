/*
 * fault.c - the SIGSEGV/SIGBUS handler: a fault on memory qslab made
 * inaccessible on purpose is reported like any other misuse, naming what
 * was hit, the object, the offset and, where known, where the object was
 * allocated and freed.  What faults on purpose:
 *   the guarded samples' pool       guard.c (qs_guard_fault reports)
 *   large blocks' guard pages, and  core/large.c (protected blocks:
 *   freed large blocks kept         qs_large_fault tells which)
 *   zero-size blocks                api/zero.c (qs_api_hooks.zero_block)
 * Installed once, when the first of these is asked for (sampling, or large
 * blocks' protection: the hardened profile, or red zones or quarantine on
 * the kmalloc classes); a program that never asks for them keeps its own
 * signal dispositions untouched.  Any other fault goes to the handler this
 * one replaced (or the default action: the process dies of it).
 *
 * After a report the default action is restored and the handler returns:
 * the access is retried, faults again and the process dies of SIGSEGV.  A
 * fatal handler the program installed (qslab_set_fatal_handler) is called
 * instead; if it returns, the page that faulted is opened where that makes
 * the access valid (a guard page, a freed block's page: it stays open),
 * and the program goes on.  A zero-size block's page is shared by 256
 * blocks and stays closed: the process dies all the same.
 */
#define _GNU_SOURCE
#include "debug/debug.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

static int installed;
static struct sigaction old_segv, old_bus;

static void handler(int sig, siginfo_t *si, void *uc);

static void install(int sig, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, old);
}

void qs_fault_install(void)
{
    int no = 0;
    if (__atomic_compare_exchange_n(&installed, &no, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        install(SIGSEGV, &old_segv);
        install(SIGBUS, &old_bus);
    }
}

const char *qs_fault_access(void *uc)
{
#if defined(__x86_64__)
    if (uc)
        return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) ? "Write" : "Read";
#else
    (void)uc;
#endif
    return "Access";
}

bool qs_fault_conclude(int sig, const char *kind, const char *what, const void *obj, uintptr_t a)
{
    char msg[256];
    struct qs_buf m = {msg, 0, sizeof(msg)};
    qs_buf_str(&m, "qslab: BUG ");
    qs_buf_str(&m, kind);
    qs_buf_str(&m, ": ");
    qs_buf_str(&m, what);
    qs_buf_str(&m, " (");
    if (obj) {
        qs_buf_str(&m, "object ");
        qs_buf_hex(&m, (uintptr_t)obj);
        qs_buf_str(&m, ", ");
    }
    qs_buf_str(&m, "address ");
    qs_buf_hex(&m, a);
    qs_buf_putc(&m, ')');
    qslab_fatal_fn fn = qs_fatal_handler();
    if (fn) {
        fn(msg);
        return true;
    }
    qs_buf_putc(&m, '\n');
    qs_os_write(2, msg, m.len);
    signal(sig, SIG_DFL); /* retried: the default action, a SIGSEGV death */
    return false;
}

static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, si, uc);
            return;
        }
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* the default: die of it when the access is retried, or at once for a
     * signal that was sent (blocked until this handler returns) */
    signal(sig, SIG_DFL);
    if (si->si_code <= 0)
        raise(sig);
}

static void put_off(struct qs_buf *b, uintptr_t a, const char *obj)
{
    if (a < (uintptr_t)obj) {
        qs_buf_putc(b, '-');
        qs_buf_u64(b, (uintptr_t)obj - a);
    } else {
        qs_buf_u64(b, a - (uintptr_t)obj);
    }
}

/* The report's body: the fault at a, on what (an object of size bytes at
 * obj, of `kind`); the last line is qs_fault_conclude's */
static void report(const char *kind, const char *what, uintptr_t a, void *uc,
                   const char *obj, size_t size, const char *detail, const void *tracks)
{
    char text[512];
    struct qs_buf b = {text, 0, sizeof(text)};
    qs_buf_str(&b, "BUG ");
    qs_buf_str(&b, kind);
    qs_buf_str(&b, ": ");
    qs_buf_str(&b, what);
    qs_report_line(&b);
    qs_buf_str(&b, "-----------------------------------------------------------------------------");
    qs_report_line(&b);
    qs_buf_str(&b, qs_fault_access(uc));
    qs_buf_str(&b, " at ");
    qs_buf_hex(&b, a);
    qs_buf_str(&b, " @offset=");
    put_off(&b, a, obj);
    qs_report_line(&b);
    qs_buf_str(&b, "Object ");
    qs_buf_hex(&b, (uintptr_t)obj);
    qs_buf_str(&b, " (");
    qs_buf_u64(&b, size);
    qs_buf_str(&b, " bytes), ");
    qs_buf_str(&b, detail);
    qs_report_line(&b);
    if (tracks) {
        qs_track_print(&b, "Allocated", tracks);
        qs_track_print(&b, "Freed", (const char *)tracks + QS_LARGE_TRACK_BYTES);
    }
}

static void handler(int sig, siginfo_t *si, void *uc)
{
    if (qs_guard_fault(sig, si, uc))
        return;
    uintptr_t a = (uintptr_t)si->si_addr;
    bool access = sig == SIGSEGV && si->si_code == SEGV_ACCERR; /* (not a missing page) */
    struct qs_large_fault f;
    if (access && qs_large_fault(a, &f)) {
        const char *what = f.freed ? "use after free of a large block"
                           : a < (uintptr_t)f.block ? "out-of-bounds access before a large block"
                                                    : "out-of-bounds access past a large block";
        report("large", what, a, uc, f.block, f.size,
               f.freed ? "a large block, inaccessible since its free"
                       : "a large block, allocated: guard page fault",
               f.tracks);
        if (qs_fault_conclude(sig, "large", what, f.block, a)) /* open the page: the access goes on */
            mprotect((void *)(a & ~(uintptr_t)(QS_PAGE_SIZE - 1)), QS_PAGE_SIZE, PROT_READ | PROT_WRITE);
        return;
    }
    char *z = access ? qs_api_hooks.zero_block(a) : NULL;
    if (z) {
        const char *what = "access to a zero-size block";
        report("zero-size", what, a, uc, z, 0,
               "a zero-size block (malloc(0)): no byte of it can be read or written", NULL);
        qs_fault_conclude(sig, "zero-size", what, z, a);
        signal(sig, SIG_DFL); /* its page is other blocks' too: it stays closed */
        return;
    }
    chain(sig, si, uc);
}
