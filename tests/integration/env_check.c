/*
 * Every QSLAB_* variable is checked where it is read: a bad value gets one
 * line that names the variable, the value, what is wrong and what is
 * allowed, and changes nothing else; the program runs as without it.
 * Boolean variables take 1/0, yes/no, on/off, true/false in any case.
 * QSLAB_TUNE's own cases are in tune_env.c, QSLAB_GUARD_* in guard.c.
 * The test runs itself again with each setting and reads its stderr.
 */
#include <qslab.h>

#include "../testutil.h"

/* what every child does: a few mallocs, a cache of its own, its statistics */
static int child_run(void)
{
    void *p[64];
    for (int i = 0; i < 64; i++)
        CHECK((p[i] = qslab_malloc((size_t)16 << (i % 8))) != NULL);
    for (int i = 0; i < 64; i++)
        qslab_free(p[i]);
    qslab_cache *c = qslab_cache_create("t-env-mine", 100, 0, 0, NULL);
    CHECK(c != NULL);
    void *o = qslab_cache_alloc(c);
    CHECK(o != NULL);
    qslab_cache_free(c, o);
    CHECK(qslab_cache_destroy(c) == 0);
    return tu_done();
}

static char err[1 << 16];

/* Run the child with name=value; its stderr must hold exactly the lines of
 * want (NULL-terminated; each a whole line, or the start of one when it
 * ends without '\n'), as its only "qslab: " lines, and `also` if given. */
static void expect(const char *name, const char *value, const char *const *want, const char *also)
{
    tu_stderr_begin();
    int r = tu_reexec("run", name, value);
    tu_stderr_end(err, sizeof err);
    CHECKF(r == 0, "%s=%s: status %d; stderr:\n%s", name, value, r, err);
    int lines = 0, wanted = 0;
    for (const char *l = err; (l = strstr(l, "qslab: ")) != NULL; l++)
        lines += l == err || l[-1] == '\n';
    for (; want[wanted]; wanted++) {
        const char *at = strstr(err, want[wanted]);
        CHECKF(at && (at == err || at[-1] == '\n'), "%s=%s: no line \"%s\" in:\n%s", name, value, want[wanted],
               err);
    }
    CHECKF(lines == wanted, "%s=%s: %d qslab lines, %d expected:\n%s", name, value, lines, wanted, err);
    if (also)
        CHECKF(strstr(err, also) != NULL, "%s=%s: no \"%s\" in:\n%s", name, value, also, err);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return strcmp(argv[1], "run") == 0 ? child_run() : 2;
    static const char *const none[] = {NULL};
    if (getenv("QSLAB_DEBUG") || getenv("QSLAB_TUNE") || getenv("QSLAB_STATS")) {
        printf("env_check: skipped, QSLAB_DEBUG, QSLAB_TUNE or QSLAB_STATS is set for the whole run\n");
        return 0;
    }

    /* booleans */
    static const char *const stats_bad[] = {"qslab: QSLAB_STATS=maybe ignored: not a boolean (1, yes, on, true or 0, "
                                            "no, off, false); the statistics report at exit stays off\n",
                                            NULL};
    expect("QSLAB_STATS", "maybe", stats_bad, NULL);
    CHECKF(!strstr(err, "Name "), "QSLAB_STATS=maybe printed the report:\n%s", err);
    expect("QSLAB_STATS", "Yes", none, "Name "); /* the report (no "qslab: " lines) */
    expect("QSLAB_STATS", "off", none, NULL);
    CHECKF(!strstr(err, "Name "), "QSLAB_STATS=off printed the report:\n%s", err);
    static const char *const purge_bad[] = {"qslab: QSLAB_PURGE=2 ignored: not a boolean (1, yes, on, true or 0, no, "
                                            "off, false); the purger stays on\n",
                                            NULL};
    expect("QSLAB_PURGE", "2", purge_bad, NULL);
    expect("QSLAB_PURGE", "FALSE", none, NULL);
    static const char *const pressure_bad[] = {"qslab: QSLAB_PRESSURE=sometimes ignored: not a boolean (1, yes, on, "
                                               "true or 0, no, off, false); the reaction to memory pressure stays on\n",
                                               NULL};
    expect("QSLAB_PRESSURE", "sometimes", pressure_bad, NULL);
    expect("QSLAB_PRESSURE", "Off", none, NULL);
    static const char *const harden_bad[] = {"qslab: QSLAB_HARDEN=maybe ignored: not a boolean (1, yes, on, true or 0, "
                                             "no, off, false); the hardened profile stays off\n",
                                             NULL};
    expect("QSLAB_HARDEN", "maybe", harden_bad, NULL);
    expect("QSLAB_HARDEN", "on", none, NULL);
    static const char *const ctl_bad[] = {"qslab: QSLAB_CONTROL=maybe ignored: not a boolean (1, yes, on, true or 0, "
                                          "no, off, false); the control channel stays off\n",
                                          NULL};
    expect("QSLAB_CONTROL", "maybe", ctl_bad, NULL);
    expect("QSLAB_CONTROL", "no", none, NULL);

    /* names of things */
    static const char *const owner_bad[] = {
        "qslab: QSLAB_OWNER=cpux: not an owner kind (cpu or thread); using the default\n", NULL};
    expect("QSLAB_OWNER", "cpux", owner_bad, NULL);
    static const char *const front_bad[] = {"qslab: QSLAB_FRONT=slx ignored: the front ends are slqb, slub, slab, "
                                            "slob\n",
                                            NULL};
    expect("QSLAB_FRONT", "slx", front_bad, NULL);

    /* numbers */
    static const char *const numa_word[] = {"qslab: QSLAB_FAKE_NUMA=two ignored: not a number; allowed range is "
                                            "1..64\n",
                                            NULL};
    expect("QSLAB_FAKE_NUMA", "two", numa_word, NULL);
    static const char *const numa_big[] = {"qslab: QSLAB_FAKE_NUMA=99 ignored: allowed range is 1..64\n", NULL};
    expect("QSLAB_FAKE_NUMA", "99", numa_big, NULL);
    static const char *const cached_word[] = {"qslab: QSLAB_CACHED_MAX=64M ignored: not a number; allowed range "
                                              "is 0..1099511627776 bytes (0: no cap); no cap on cached memory\n",
                                              NULL};
    expect("QSLAB_CACHED_MAX", "64M", cached_word, NULL);
    static const char *const cached_neg[] = {"qslab: QSLAB_CACHED_MAX=-1 ignored: negative; allowed range "
                                             "is 0..1099511627776 bytes (0: no cap); no cap on cached memory\n",
                                             NULL};
    expect("QSLAB_CACHED_MAX", "-1", cached_neg, NULL);
    static const char *const cached_big[] = {"qslab: QSLAB_CACHED_MAX=1099511627777 ignored: allowed range is "
                                             "0..1099511627776 bytes (0: no cap); no cap on cached memory\n",
                                             NULL};
    expect("QSLAB_CACHED_MAX", "1099511627777", cached_big, NULL);
    static const char *const cached_empty[] = {"qslab: QSLAB_CACHED_MAX= ignored: empty; allowed range is "
                                               "0..1099511627776 bytes (0: no cap); no cap on cached memory\n",
                                               NULL};
    expect("QSLAB_CACHED_MAX", "", cached_empty, NULL);
    expect("QSLAB_CACHED_MAX", "1048576", none, NULL);

    /* QSLAB_DEBUG: flags, and cache names that name no cache */
    static const char *const dbg_flag[] = {
        "qslab: QSLAB_DEBUG: unknown flag 'X' ignored (flags: F Z P U T R V Q, -)\n", NULL};
    expect("QSLAB_DEBUG", "FX,t-env-mine", dbg_flag, NULL);
    static const char *const dbg_class[] = {"qslab: QSLAB_DEBUG block 'F,kmalloc-77': unknown cache 'kmalloc-77' "
                                            "ignored (a request of 77 bytes is served by kmalloc-80)\n",
                                            NULL};
    expect("QSLAB_DEBUG", "F,kmalloc-77", dbg_class, NULL);
    static const char *const dbg_name[] = {"qslab: QSLAB_DEBUG block 'F,t-env-nosuch,t-env-mine': no cache named "
                                           "'t-env-nosuch' was made\n",
                                           NULL};
    expect("QSLAB_DEBUG", "F,t-env-nosuch,t-env-mine", dbg_name, NULL);
    expect("QSLAB_DEBUG", "F,kmalloc-64,t-env-*", none, NULL);
    return tu_done();
}
