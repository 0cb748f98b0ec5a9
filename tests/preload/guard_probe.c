/*
 * guard_probe.c - the drop-in's malloc under QSLAB_GUARD_SAMPLE (guard.sh).
 *
 *   guard_probe overflow   malloc(64) until one is a sample placed against
 *                          its right guard page (qslab_guarded,
 *                          found with dlsym: with QSLAB_GUARD_SAMPLE=1, every
 *                          allocation that misses the fast path is one), then
 *                          a write one byte past it
 *   guard_probe uaf        the same with malloc(250), free, then a write
 *                          into it
 *   guard_probe work       20,000 mallocs of mixed sizes with their contents
 *                          checked, realloc, calloc, malloc_usable_size,
 *                          free: prints "ok" (the same on glibc)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *volatile sink;

/* A malloc(size) that is a guarded sample (the others stay allocated), or
 * NULL; `right`: one placed against its right guard page (every other
 * sample is placed against its left one). */
static char *sample(size_t size, int right)
{
    int (*guarded)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "qslab_guarded");
    if (!guarded)
        return NULL;
    for (int i = 0; i < 100000; i++) {
        char *p = malloc(size);
        if (guarded(p) && (!right || ((uintptr_t)p + size) % 4096 == 0))
            return p;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "work";
    if (!strcmp(mode, "overflow")) {
        char *p = sample(64, 1);
        if (!p)
            return 2;
        sink = p;
        sink[64] = 1;
        return 3;
    }
    if (!strcmp(mode, "uaf")) {
        char *p = sample(250, 0); /* kmalloc-256 */
        if (!p)
            return 2;
        sink = p;
        free(p);
        sink[10] = 1;
        return 3;
    }
    static char *v[20000];
    static size_t sz[20000];
    for (int i = 0; i < 20000; i++) {
        sz[i] = (size_t)(i * 37 % 3000) + 1;
        v[i] = i % 3 ? malloc(sz[i]) : calloc(1, sz[i]);
        if (!v[i] || malloc_usable_size(v[i]) < sz[i])
            return 4;
        for (size_t k = 0; k < sz[i]; k++)
            if (i % 3 == 0 && v[i][k])
                return 5;
        memset(v[i], (int)(i & 0x7f), sz[i]);
    }
    for (int i = 0; i < 20000; i += 2) {
        v[i] = realloc(v[i], sz[i] * 2);
        if (!v[i])
            return 6;
        for (size_t k = 0; k < sz[i]; k++)
            if (v[i][k] != (char)(i & 0x7f))
                return 7;
    }
    for (int i = 0; i < 20000; i++) {
        for (size_t k = 0; k < sz[i]; k++)
            if (v[i][k] != (char)(i & 0x7f))
                return 8;
        free(v[i]);
    }
    puts("ok");
    return 0;
}
