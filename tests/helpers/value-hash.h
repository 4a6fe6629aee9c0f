/*
 * value-hash.h - the hash behind the tests' deterministic values: a
 * different, well-mixed number per (seed, i), which each test maps to the
 * range and the steps it needs.
 */
#ifndef RD_VALUE_HASH_H
#define RD_VALUE_HASH_H

static inline unsigned value_hash(unsigned seed, int i)
{
    unsigned h = seed * 2654435761u ^ (unsigned)i * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return h;
}

#endif
