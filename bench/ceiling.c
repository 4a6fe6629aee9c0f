/*
 * ceiling.c - the read loops of ceiling.h. Each ISA's loops carry their own
 * target attribute, so the file builds with the default flags and the CPU
 * is asked at run time (ceiling_available) before any of them runs.
 */
#include "ceiling.h"

#include <immintrin.h>

/* far enough ahead to hide DRAM latency at ~10-20 GB/s, near enough to
 * stay in L1/L2 until used */
#define PREFETCH_BYTES 2048

__attribute__((target("avx512f"))) static double sum_avx512(const float *x, size_t n,
                                                            int squares, int prefetch)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        if (prefetch) /* 256 bytes: four cache lines */
            for (int line = 0; line < 256; line += 64)
                _mm_prefetch((const char *)(x + i) + PREFETCH_BYTES + line, _MM_HINT_T0);
        __m512 v0 = _mm512_load_ps(x + i), v1 = _mm512_load_ps(x + i + 16);
        __m512 v2 = _mm512_load_ps(x + i + 32), v3 = _mm512_load_ps(x + i + 48);
        if (squares) {
            a0 = _mm512_fmadd_ps(v0, v0, a0);
            a1 = _mm512_fmadd_ps(v1, v1, a1);
            a2 = _mm512_fmadd_ps(v2, v2, a2);
            a3 = _mm512_fmadd_ps(v3, v3, a3);
        } else {
            a0 = _mm512_add_ps(a0, v0);
            a1 = _mm512_add_ps(a1, v1);
            a2 = _mm512_add_ps(a2, v2);
            a3 = _mm512_add_ps(a3, v3);
        }
    }
    return (double)_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1),
                                                      _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2,fma"))) static double sum_avx2(const float *x, size_t n,
                                                           int squares, int prefetch)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        if (prefetch) { /* 128 bytes: two cache lines */
            _mm_prefetch((const char *)(x + i) + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)(x + i) + PREFETCH_BYTES + 64, _MM_HINT_T0);
        }
        __m256 v0 = _mm256_load_ps(x + i), v1 = _mm256_load_ps(x + i + 8);
        __m256 v2 = _mm256_load_ps(x + i + 16), v3 = _mm256_load_ps(x + i + 24);
        if (squares) {
            a0 = _mm256_fmadd_ps(v0, v0, a0);
            a1 = _mm256_fmadd_ps(v1, v1, a1);
            a2 = _mm256_fmadd_ps(v2, v2, a2);
            a3 = _mm256_fmadd_ps(v3, v3, a3);
        } else {
            a0 = _mm256_add_ps(a0, v0);
            a1 = _mm256_add_ps(a1, v1);
            a2 = _mm256_add_ps(a2, v2);
            a3 = _mm256_add_ps(a3, v3);
        }
    }
    __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float t[8];
    _mm256_storeu_ps(t, a);
    double s = 0.0;
    for (int l = 0; l < 8; l++)
        s += t[l];
    return s;
}

int ceiling_available(int isa)
{
    __builtin_cpu_init();
    if (isa == CEIL_AVX512)
        return __builtin_cpu_supports("avx512f");
    return isa == CEIL_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const char *ceiling_isa_name(int isa)
{
    return isa == CEIL_AVX512 ? "avx512" : "avx2";
}

const char *ceiling_loop_name(int loop)
{
    return loop == CEIL_SUM ? "sum" : loop == CEIL_SUMSQ ? "sumsq" : "sumsq+prefetch";
}

double ceiling_run(int isa, int loop, const void *buf, size_t bytes)
{
    int squares = loop != CEIL_SUM, prefetch = loop == CEIL_SUMSQ_PREFETCH;
    size_t n = bytes / 256 * 64; /* floats, whole 256-byte blocks */
    if (isa == CEIL_AVX512)
        return sum_avx512(buf, n, squares, prefetch);
    return sum_avx2(buf, n, squares, prefetch);
}
