/*
 * tune_probe.c - what QSLAB_TUNE and QSLAB_STATS do to a program run under
 * the preload.  Allocates from a few classes (so that the statistics report
 * has lines), then prints, for each "cache:attr" argument, the tunable's
 * value through qslab_tune_get, found with dlsym (it resolves only when
 * libqslab-malloc.so is loaded):
 *   tune_probe kmalloc-64:hiwater kmalloc-8192:order
 *   -> kmalloc-64 hiwater 2048
 *      kmalloc-8192 order 3
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int (*tune_get)(const char *, const char *, unsigned long *) =
        (int (*)(const char *, const char *, unsigned long *))dlsym(RTLD_DEFAULT, "qslab_tune_get");
    if (!tune_get) {
        fprintf(stderr, "FAIL: qslab_tune_get not found: not running on libqslab-malloc\n");
        return 1;
    }
    static void *keep[3000];
    for (int i = 0; i < 3000; i++)
        keep[i] = malloc((size_t)(i % 3 == 0 ? 50 : i % 3 == 1 ? 200 : 9000));
    for (int i = 0; i < 3000; i++)
        free(keep[i]);

    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char cache[64];
        const char *colon = strchr(argv[i], ':');
        if (!colon || (size_t)(colon - argv[i]) >= sizeof cache) {
            fprintf(stderr, "usage: tune_probe cache:attr...\n");
            return 2;
        }
        memcpy(cache, argv[i], (size_t)(colon - argv[i]));
        cache[colon - argv[i]] = 0;
        unsigned long v = 0;
        if (tune_get(cache, colon + 1, &v) != 0) {
            printf("%s %s error\n", cache, colon + 1);
            rc = 1;
        } else {
            printf("%s %s %lu\n", cache, colon + 1, v);
        }
    }
    return rc;
}
