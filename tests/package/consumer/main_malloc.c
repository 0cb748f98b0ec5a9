/* A program linked with the installed malloc drop-in (qslab::malloc or
 * qslab::malloc_static, tests/package/package_test.sh): its malloc is
 * qslab's, so qslab_usable_size() knows the block (it would report a
 * foreign pointer through the fatal handler and abort). */
#include <qslab.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *p = malloc(100);
    if (!p)
        return 1;
    strcpy(p, "from qslab");
    size_t n = qslab_usable_size(p);
    if (n < 100) {
        fprintf(stderr, "consumer_malloc: usable size %zu of a 100-byte malloc\n", n);
        return 1;
    }
    free(p);
    printf("consumer_malloc: ok (malloc(100) is a qslab block of %zu bytes)\n", n);
    return 0;
}
