/*
 * deny_rseq.h - make a system call fail in this process: rseq, for the
 * tests of what qslab does when the kernel refuses it (tests/unit/rseq_os.c,
 * tests/integration/owner.c); membarrier, as on kernels before 5.10
 * (tests/integration/slub.c).  Header only.
 */
#ifndef QSLAB_TEST_DENY_RSEQ_H
#define QSLAB_TEST_DENY_RSEQ_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Make system call nr fail with `err` in this process and its children
 * (seccomp); 0 or -1. */
static inline int deny_syscall(unsigned nr, int err)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    return 0;
}

/* Make rseq fail with `err` in this process and its children; 0 or -1. */
static inline int deny_rseq(int err)
{
    return deny_syscall(__NR_rseq, err);
}

#endif /* QSLAB_TEST_DENY_RSEQ_H */
