/*
 * xorshift.h - the pseudo-random numbers the tests (testutil.h tu_rand) and
 * the benchmarks (bench/bench.h bench_rand) draw: xorshift64*, deterministic,
 * one state per thread.  Header only, no other dependency.
 */
#ifndef QSLAB_XORSHIFT_H
#define QSLAB_XORSHIFT_H

#include <stdint.h>

/* The next number of the sequence in *state (never 0 to start). */
static inline uint64_t xorshift64s(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif /* QSLAB_XORSHIFT_H */
