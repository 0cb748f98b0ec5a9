/*
 * unit: the encoded link word of free objects.
 */
#include "../testutil.h"
#include "../front.h"
#include "core/internal.h"

static void ctor(void *p)
{
    memset(p, 0x5a, 24);
}

int main(void)
{
    qslab_cache *c = qslab_cache_create("t-link", 24, 0, 0, NULL);
    qslab_cache *k = qslab_cache_create("t-link-ctor", 24, 0, 0, ctor);
    CHECK(c && k);
    tf_pin_slqb("t-link"); /* SLQB's link words */
    tf_pin_slqb("t-link-ctor");
    CHECK(c->link_off == 0);            /* no constructor: link inside the object */
    CHECK(k->link_off == 24);           /* constructor: link after the object */
    CHECK(k->slot_size == 32);
    /* words that user data typically holds never look free */
    uintptr_t plain[] = {0, 1, 0xffffffffffffffffull, 0x5a5a5a5a5a5a5a5aull, (uintptr_t)&plain};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        CHECKF(!qs_looks_free(c, plain[i]), "word %#lx", (unsigned long)plain[i]);
    /* encoded links do, and decode back */
    void *targets[] = {NULL, &plain, (void *)(uintptr_t)0x7ffff0001000ull};
    for (size_t i = 0; i < 3; i++) {
        bool bad = true;
        uintptr_t w = qs_enc(c, targets[i]);
        CHECK(qs_looks_free(c, w));
        CHECK(qs_dec(c, w, &bad) == targets[i] && !bad);
        CHECK(!qs_looks_free(k, w) || c->secret == k->secret); /* secrets are per cache */
    }
    /* an allocated object's link word is cleared; a constructed object keeps
     * its bytes across free and alloc */
    unsigned char *o = qslab_cache_alloc(k);
    CHECK(*qs_link(k, o) == 0);
    for (int i = 0; i < 24; i++)
        CHECK(o[i] == 0x5a);
    qslab_cache_free(k, o);
    /* a queued object holds the free stamp: "free" to the slow paths, but
     * no valid link (a walker meeting it stops) */
    CHECK(*qs_link(k, o) == QS_STAMP(k->secret));
    CHECK(qs_maybe_free(k, *qs_link(k, o)) && !qs_looks_free(k, *qs_link(k, o)));
    {
        bool bad = false;
        qs_dec(k, *qs_link(k, o), &bad);
        CHECK(bad);
    }
    for (int i = 0; i < 24; i++)
        CHECK(o[i] == 0x5a);
    CHECK(qslab_cache_alloc(k) == o);
    qslab_cache_free(k, o);
    CHECK(qslab_cache_destroy(c) == 0 && qslab_cache_destroy(k) == 0);
    return tu_done();
}
