/*
 * replay_main.c - a main() for a fuzz target built without libFuzzer (the
 * normal gcc build): runs LLVMFuzzerTestOneInput once over each file given,
 * and over every regular file of each directory given (sorted by name, so
 * runs are repeatable).  Prints one line per directory and the total; exits
 * 0, or dies of the target's abort() on the first failing input (its name
 * is printed first, so the failure names its reproducer).
 *
 *     fuzz_ops_replay fuzz/corpus/ops [more dirs or files...]
 *
 * FUZZ_REPLAY_VERBOSE=1 prints each input's name before it runs.
 */
#include "fuzz_util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

static int verbose;
static char current_input[4096]; /* named on stderr if it fails */

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (n == cap)
            buf = realloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got)
            break;
        n += got;
    }
    fclose(f);
    /* a copy of exactly n bytes, as libFuzzer passes it (reads past the end
     * are then caught by ASan builds) */
    uint8_t *data = malloc(n ? n : 1);
    memcpy(data, buf, n);
    free(buf);
    snprintf(current_input, sizeof current_input, "%s", path);
    if (verbose) {
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
        fflush(stderr);
    }
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static long run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap)
            names = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    long runs = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && run_file(path) == 0)
            runs++;
        free(names[i]);
    }
    free(names);
    return runs;
}

/* On abort, say which input it was (the target printed why). */
static void on_abort(int sig)
{
    (void)sig;
    if (current_input[0]) {
        static const char pre[] = "replay: failing input: ";
        ssize_t w = write(2, pre, sizeof pre - 1);
        w = write(2, current_input, strlen(current_input));
        w = write(2, "\n", 1);
        (void)w;
    }
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS-DIR-OR-FILE...\n", argv[0]);
        return 2;
    }
    verbose = getenv("FUZZ_REPLAY_VERBOSE") != NULL;
    signal(SIGABRT, on_abort);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long total = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            bad = 1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            long n = run_dir(argv[i]);
            if (n < 0) {
                bad = 1;
                continue;
            }
            if (n == 0) {
                fprintf(stderr, "replay: %s holds no input\n", argv[i]);
                bad = 1;
            }
            printf("%s: %ld inputs\n", argv[i], n);
            total += n;
        } else {
            if (run_file(argv[i]) != 0)
                bad = 1;
            else
                total++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("replayed %ld inputs in %.2f s: all passed\n", total,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return bad;
}
