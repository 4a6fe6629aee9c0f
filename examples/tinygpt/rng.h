/*
 * rng.h - a small, fully specified random number generator (xoshiro256**
 * seeded by splitmix64), so that a seed gives the same parameters and data
 * on every platform and C library.
 */
#ifndef TINYGPT_RNG_H
#define TINYGPT_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct tg_rng { uint64_t s[4]; } tg_rng;

static inline uint64_t tg_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void tg_rng_seed(tg_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = tg_splitmix64(&seed);
}

static inline uint64_t tg_rng_u64(tg_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1), 53 random bits. */
static inline double tg_rng_uniform(tg_rng *r)
{
    return (double)(tg_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n >= 1 (the tiny modulo bias is irrelevant here). */
static inline int tg_rng_int(tg_rng *r, int n)
{
    return (int)(tg_rng_u64(r) % (uint64_t)n);
}

/* Standard normal by Box-Muller (one value per call: simple, reproducible). */
static inline double tg_rng_normal(tg_rng *r)
{
    double u1 = 1.0 - tg_rng_uniform(r); /* (0, 1]: log(u1) is finite */
    double u2 = tg_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif /* TINYGPT_RNG_H */
