/*
 * qslab_set_fatal_handler(NULL) restores the default handler: after a custom
 * handler was installed and removed, a bad free aborts again.
 */
#include <qslab.h>

#include "../testutil.h"

static void custom(const char *msg)
{
    (void)msg;
}

static void restored(void *arg)
{
    char s[32];
    qslab_set_fatal_handler(custom);
    if (qslab_set_fatal_handler(NULL) != custom)
        _exit(3);
    void *p = qslab_malloc(64);
    tu_child_expect(tu_addr(s, p));
    qslab_free(p);
    qslab_free(p);
}

/* The custom handler returns: no abort, the child goes on and exits 0. */
static int custom_survives(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        qslab_set_fatal_handler(custom);
        void *p = qslab_malloc(64);
        qslab_free(p);
        qslab_free(p);
        void *q = qslab_malloc(64);
        qslab_free(q);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
    tu_expect_abort("double free after the default handler is restored", restored, NULL, "double free");
    CHECK(custom_survives());
    return tu_done();
}
