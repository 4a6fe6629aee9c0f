/*
 * stats_avx512.c - the fast-row kernels of lib/stats/stats.c (see
 * stats_impl.h) in AVX-512 intrinsics: rd_fast_row_avx512 and
 * rd_fast_rows_avx512.
 *
 * meson compiles this file alone in a static library with -mavx512f
 * -mavx512dq -mavx512bw -mavx2 -mfma -mf16c, so that no other object of the
 * library can contain these instructions; stats.c calls a kernel only after
 * __builtin_cpu_supports said yes. The bf16 dot kernel (rows_kernel_dot)
 * alone is compiled for AVX512-BF16 and BW by a target attribute (meson
 * defines RD_HAVE_BF16_DOT where the compiler has them), and used only
 * where CPUID has them too.
 *
 * What this file defines: the vector types and operations that the shared
 * kernels of simd_kernels.h are written in (16 floats, 8 doubles), the
 * bf16 split loads, and the 16-row kernels. bf16 on AVX-512: one 512-bit
 * load gives 32 columns, split by a shift and a mask into the even and the
 * odd columns (load_bf16_split), with the column signs split the same way;
 * or, in the 16-row kernel on CPUs with AVX512-BF16, summed by vdpbf16ps
 * (rows_kernel_dot).
 *
 * The 16-row kernels (rows_kernel, rows_kernel_dot) take up to 16 rows of
 * one block each (the hooks' usual d_model: 768 columns = 12 steps): at
 * that width a row's horizontal sums, checks and call cost as much as its
 * loop, so they reduce the 16 rows' sums together (vf_hsum16), compute
 * their per-token values 8 rows a vector, and leave the rows that fail
 * row_kernel_f's checks to the caller. Wider rows (d_model 2048, 4096,
 * ...) go through rows_kernel_wide, which sums each block as the one-row
 * kernel does, without its per-step and per-row costs.
 */
#include "stats/stats_impl.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#ifndef RD_HAVE_BF16_DOT /* meson: the compiler knows AVX512-BF16 */
#define RD_HAVE_BF16_DOT 0
#endif

#define RD_SIMD_AVX512 1
/* ---------------------------------------------------------- AVX-512F */
typedef __m512d vd;
#define VD_W 8 /* doubles per vector */
#define vd_zero() _mm512_setzero_pd()
#define vd_set1(x) _mm512_set1_pd(x)
#define vd_loadu(p) _mm512_loadu_pd(p)
#define vd_storeu(p, v) _mm512_storeu_pd((p), (v))
#define vd_add(a, b) _mm512_add_pd((a), (b))
#define vd_sub(a, b) _mm512_sub_pd((a), (b))
#define vd_fmadd(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define vd_max(a, b) _mm512_max_pd((a), (b))
#define vd_abs(a) _mm512_abs_pd(a)
#define FAST_ROW rd_fast_row_avx512

static inline double vd_hsum(vd v) { return _mm512_reduce_add_pd(v); }
static inline double vd_hmax(vd v) { return _mm512_reduce_max_pd(v); }

/* 16 floats -> 2 vectors of doubles, in column order */
static inline void f16x_to_vd(vd x[2], __m512 f)
{
    x[0] = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
    x[1] = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
}

typedef __m512 vf; /* running max of |x| in float, for the float dtypes */
#define vf_zero() _mm512_setzero_ps()
static inline double vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }

/* 16 columns from j on: x as doubles; for the float dtypes *am takes the
 * max of |x| (exact in float, half the work of doing it in double). */
static inline void load16(vd x[2], vf *am, const void *row, int64_t j, const int dt)
{
    __m512 f;
    switch (dt) {
    case RESDIAG_DTYPE_F64: {
        const double *p = (const double *)row + j;
        x[0] = _mm512_loadu_pd(p);
        x[1] = _mm512_loadu_pd(p + 8);
        return;
    }
    case RESDIAG_DTYPE_F32:
        f = _mm512_loadu_ps((const float *)row + j);
        break;
    case RESDIAG_DTYPE_F16:
        f = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + j)));
        break;
    default: { /* bf16: the upper half of an f32 */
        __m512i w = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + j)));
        f = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
        break;
    }
    }
    *am = _mm512_max_ps(*am, _mm512_abs_ps(f));
    f16x_to_vd(x, f);
}

/* kb += tau * x for 16 columns, tau = +-1: x with its sign flipped where
 * tau < 0 (exact, like the product), without converting tau to double. */
static inline void sketch16(vd kb[2], const vd x[2], const float *tp)
{
    __mmask16 neg = _mm512_cmp_ps_mask(_mm512_loadu_ps(tp), _mm512_setzero_ps(), _CMP_LT_OQ);
    const vd z = _mm512_setzero_pd();
    kb[0] = _mm512_add_pd(kb[0], _mm512_mask_sub_pd(x[0], (__mmask8)neg, z, x[0]));
    kb[1] = _mm512_add_pd(kb[1], _mm512_mask_sub_pd(x[1], (__mmask8)(neg >> 8), z, x[1]));
}

static inline void load_tau16(vd t[2], const float *tp)
{
    t[0] = _mm512_cvtps_pd(_mm256_loadu_ps(tp));
    t[1] = _mm512_cvtps_pd(_mm256_loadu_ps(tp + 8));
}

/* The float kernel's vectors: 16 floats, 4 chains of 16 columns each per
 * step of 64 columns. */
#define VF_W 16
#define CH 4
#define vf_loadu(p) _mm512_loadu_ps(p)
#define vf_storeu(p, v) _mm512_storeu_ps((p), (v))
#define vf_add(a, b) _mm512_add_ps((a), (b))
#define vf_sub(a, b) _mm512_sub_ps((a), (b))
#define vf_fmadd(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define vf_max(a, b) _mm512_max_ps((a), (b))
#define vf_abs(a) _mm512_abs_ps(a)
#define vf_set1(x) _mm512_set1_ps(x)

/* 16 columns from j on, as floats (exact for every float dtype) */
static inline vf loadf(const void *row, int64_t j, const int dt)
{
    const uint16_t *h = (const uint16_t *)row + j;
    switch (dt) {
    case RESDIAG_DTYPE_F32: return _mm512_loadu_ps((const float *)row + j);
    case RESDIAG_DTYPE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
    default: /* bf16: the upper half of an f32 */
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)h)), 16));
    }
}

/* 1 if some lane of a is above b */
static inline int vf_any_gt(vf a, float b)
{
    return _mm512_cmp_ps_mask(a, _mm512_set1_ps(b), _CMP_GT_OQ) != 0;
}

/* max(|a|, |b|) lane by lane in one instruction (AVX-512DQ vrangeps: imm
 * bits 1:0 = 3 the larger magnitude, bits 3:2 = 2 sign cleared) */
static inline vf vf_absmax(vf a, vf b)
{
    return _mm512_range_ps(a, b, 0x0b);
}

/* The lane sums of a, b and c in one shuffle tree (the 512-bit halves,
 * then the 128-bit quarters of the three, then within 128 bits). */
static inline void vf_hsum3(float out[3], vf a, vf b, vf c)
{
    const vf z = _mm512_setzero_ps();
    vf ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    vf cz = _mm512_add_ps(_mm512_shuffle_f32x4(c, z, 0x44), _mm512_shuffle_f32x4(c, z, 0xee));
    vf s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cz, 0x88), _mm512_shuffle_f32x4(ab, cz, 0xdd));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0xb1));
    float v[16];
    _mm512_storeu_ps(v, s);
    out[0] = v[0];
    out[1] = v[4];
    out[2] = v[8];
}

/* bf16 rows: one 512-bit load is 32 columns, split into the even columns
 * (the low halves of its 32-bit words, shifted up) and the odd ones (the
 * high halves, masked), exact: 2 instructions per 32 columns where
 * widening 16-bit words costs 4 (2 shuffles, 2 shifts). Chains 0 and 2 hold
 * even columns, 1 and 3 odd ones; lane l of a chain is column 2l (+1). */
#define SPLIT_BF16 1
static inline vf vf_tree(const vf a[CH]);
static inline void load_bf16_split(vf f[2], const void *row, int64_t j)
{
    __m512i w = _mm512_loadu_si512((const void *)((const uint16_t *)row + j));
    f[0] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    f[1] = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}

/* tau (32 columns from tp) in the split order: the even columns' signs,
 * then the odd ones' */
static inline void split_tau32(vf t[2], const float *tp)
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    vf a = _mm512_loadu_ps(tp), b = _mm512_loadu_ps(tp + 16);
    t[0] = _mm512_permutex2var_ps(a, ev, b);
    t[1] = _mm512_permutex2var_ps(a, od, b);
}

/* The CH chains of buckets summed into one vector whose lane u is bucket
 * u mod 16: a pairwise tree, or for split bf16 chains the even and odd
 * columns' lanes put back in column order (lanes l and l + 8 of a chain
 * are the same bucket). */
static inline vf kb_canon(const vf kb[CH], const int dt)
{
    if (dt != RESDIAG_DTYPE_BF16)
        return vf_tree(kb);
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                        24, 8);
    vf e = _mm512_add_ps(kb[0], kb[2]), o = _mm512_add_ps(kb[1], kb[3]);
    return _mm512_add_ps(_mm512_permutex2var_ps(e, lo, o), _mm512_permutex2var_ps(e, hi, o));
}

/* rb[u mod K] += the buckets of the CH chains (K divides 16). */
static inline void kb_fold(double *rb, const vf kb[CH], size_t K, const int dt)
{
    vf s = kb_canon(kb, dt);
    if (K == 16) {
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(s));
        __m512d hi = _mm512_cvtps_pd(
            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
        _mm512_storeu_pd(rb, _mm512_add_pd(_mm512_loadu_pd(rb), lo));
        _mm512_storeu_pd(rb + 8, _mm512_add_pd(_mm512_loadu_pd(rb + 8), hi));
        return;
    }
    float v[16];
    _mm512_storeu_ps(v, s);
    for (size_t u = 0; u < 16; u++)
        rb[u & (K - 1)] += v[u];
}

/* acc[u] += sigma * the buckets of the CH chains (K = 16) */
static inline void kb_fold_signed(double *acc, const vf kb[CH], double sigma, const int dt)
{
    vf s = kb_canon(kb, dt);
    __m512d sg = _mm512_set1_pd(sigma);
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(s));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    _mm512_storeu_pd(acc, _mm512_fmadd_pd(sg, lo, _mm512_loadu_pd(acc)));
    _mm512_storeu_pd(acc + 8, _mm512_fmadd_pd(sg, hi, _mm512_loadu_pd(acc + 8)));
}


#include "stats/simd_kernels.h"

/* Lane r of the result = the sum of the 16 lanes of v[r] (r < 16): the
 * horizontal sums of 16 rows in one transposing tree (pairs within 128
 * bits, then 64-bit halves, then the 128-bit quarters), 45 instructions
 * instead of ~10 per row; each sum is a pairwise tree of depth 4, as in
 * vf_hsum3. */
static inline vf vf_hsum16(const vf v[16])
{
    vf y[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const vf *w = v + 4 * k;
        vf x01 = _mm512_add_ps(_mm512_unpacklo_ps(w[0], w[1]), _mm512_unpackhi_ps(w[0], w[1]));
        vf x23 = _mm512_add_ps(_mm512_unpacklo_ps(w[2], w[3]), _mm512_unpackhi_ps(w[2], w[3]));
        /* per 128-bit quarter b: rows 4k..4k+3's sums over quarter b */
        __m512d a = _mm512_castps_pd(x01), b = _mm512_castps_pd(x23);
        y[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    vf u01 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x44),
                           _mm512_shuffle_f32x4(y[0], y[1], 0xee));
    vf u23 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x44),
                           _mm512_shuffle_f32x4(y[2], y[3], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, 0x88),
                         _mm512_shuffle_f32x4(u01, u23, 0xdd));
}

/* the per-token values of stats.c's compute_rows from o->sx and o->sq, 8
 * rows a vector: the same operations, so the same results */
static inline void rows_tokens(rd_rows_out *o, int64_t cols)
{
    const __m512d inv_cols = _mm512_set1_pd(1.0 / (double)cols);
    const __m512d rsqrt_cols = _mm512_set1_pd(1.0 / sqrt((double)cols));
#pragma GCC unroll 2
    for (int h = 0; h < RD_ROWS_MAX; h += 8) {
        __m512d sx = _mm512_loadu_pd(o->sx + h), sq = _mm512_loadu_pd(o->sq + h);
        __m512d mu = _mm512_mul_pd(sx, inv_cols);
        __m512d var = _mm512_sub_pd(_mm512_mul_pd(sq, inv_cols), _mm512_mul_pd(mu, mu));
        __m512d norm = _mm512_sqrt_pd(sq);
        _mm512_storeu_pd(o->norm + h, norm);
        _mm512_storeu_pd(o->mean + h, _mm512_add_pd(_mm512_setzero_pd(), mu)); /* y0 + mu */
        _mm512_storeu_pd(o->rms + h, _mm512_mul_pd(norm, rsqrt_cols));
        _mm512_storeu_pd(o->std + h, _mm512_sqrt_pd(_mm512_max_pd(var, _mm512_setzero_pd())));
    }
}

/* After the rows' loops (S, Q, KB: each row's sum x, sum x^2 and canonical
 * buckets in float lanes): the rows' horizontal sums in vf_hsum16,
 * row_kernel_f's checks on each row, and the buckets of the rows that pass
 * into acc in double. */
static inline __attribute__((always_inline)) int
rows_finish(rd_rows_out *o, double *acc, const double *sigma, vf S[16], vf Q[16],
            const vf KB[16], const void *row0, size_t row_bytes, int n, int64_t cols,
            double amax_floor, const int dt, const int sk)
{
    for (int r = n; r < 16; r++)
        S[r] = Q[r] = vf_set1(0.0f);
    vf sxv = vf_hsum16(S), sqv = vf_hsum16(Q);
    _mm512_storeu_pd(o->sx, _mm512_cvtps_pd(_mm512_castps512_ps256(sxv)));
    _mm512_storeu_pd(o->sx + 8, _mm512_cvtps_pd(_mm256_castpd_ps(
                                    _mm512_extractf64x4_pd(_mm512_castps_pd(sxv), 1))));
    _mm512_storeu_pd(o->sq, _mm512_cvtps_pd(_mm512_castps512_ps256(sqv)));
    _mm512_storeu_pd(o->sq + 8, _mm512_cvtps_pd(_mm256_castpd_ps(
                                    _mm512_extractf64x4_pd(_mm512_castps_pd(sqv), 1))));
    rows_tokens(o, cols);
    const uint32_t redo = rows_hand_back(o, row0, row_bytes, n, cols, amax_floor, dt);
    if (sk) {
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int r = 0; r < n; r++) {
            if (redo >> r & 1u)
                continue;
            __m512d sg = _mm512_set1_pd(sigma[r]);
            a0 = _mm512_fmadd_pd(sg, _mm512_cvtps_pd(_mm512_castps512_ps256(KB[r])), a0);
            a1 = _mm512_fmadd_pd(sg, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                         _mm512_castps_pd(KB[r]), 1))), a1);
        }
        _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), a0));
        _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), a1));
    }
    return 1;
}

/* rows_finish for rows of more than one block (rows_kernel_wide): their
 * sums in double in o->sx and o->sq already, their buckets in double */
static inline __attribute__((always_inline)) int
rows_finish_wide(rd_rows_out *o, double *acc, const double *sigma, double KB[16][16],
                 const void *row0, size_t row_bytes, int n, int64_t cols, double amax_floor,
                 const int dt, const int sk)
{
    for (int r = n; r < 16; r++)
        o->sx[r] = o->sq[r] = 0.0;
    rows_tokens(o, cols);
    const uint32_t redo = rows_hand_back(o, row0, row_bytes, n, cols, amax_floor, dt);
    if (sk) {
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int r = 0; r < n; r++) {
            if (redo >> r & 1u)
                continue;
            __m512d sg = _mm512_set1_pd(sigma[r]);
            a0 = _mm512_fmadd_pd(sg, _mm512_loadu_pd(KB[r]), a0);
            a1 = _mm512_fmadd_pd(sg, _mm512_loadu_pd(KB[r] + 8), a1);
        }
        _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), a0));
        _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), a1));
    }
    return 1;
}


/* float_step for f16 rows: the largest |x| as an unsigned max of the raw
 * 16-bit magnitudes (the sign bit masked off: what is left orders as |x|
 * does, NaN above Inf above every finite value), 2 integer operations per
 * 32 columns on the raw loads, where the float maximum of the converted
 * values took 3 per 64 columns on the pipes the conversions need. */
static inline __attribute__((always_inline)) void
f16_step(vf s1[CH], vf q[CH], vf kb[CH], __m512i *am, const void *row, int64_t j,
         const float *tau, const int sk)
{
    const uint16_t *h = (const uint16_t *)row + j;
    const __m512i mag = _mm512_set1_epi16(0x7fff);
    __m512i w0 = _mm512_loadu_si512((const void *)h), w1 = _mm512_loadu_si512((const void *)(h + 32));
    *am = _mm512_max_epu16(*am, _mm512_max_epu16(_mm512_and_si512(w0, mag),
                                                 _mm512_and_si512(w1, mag)));
    vf f[CH];
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++) /* from memory again: cheaper than extracting halves */
        f[c] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(h + 16 * c)));
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++) {
        s1[c] = vf_add(s1[c], f[c]);
        q[c] = vf_fmadd(f[c], f[c], q[c]);
        if (sk)
            kb[c] = vf_fmadd(vf_loadu(tau + c * VF_W), f[c], kb[c]);
    }
}

/* f16_step's 32 lanes of magnitudes as the 16 lane maxima of |x| in float
 * (exact) */
static inline vf f16_magnitudes(__m512i am)
{
    return vf_max(_mm512_cvtph_ps(_mm512_castsi512_si256(am)),
                  _mm512_cvtph_ps(_mm512_extracti64x4_epi64(am, 1)));
}

/* The column signs a 16-row kernel reads: sp->tau, or for bf16 tau in the
 * split order, put in split (cols) once for the rows; NULL without a
 * sketch. */
static inline const float *rows_signs(float *split, const rd_sketch_params *sp, int64_t cols,
                                      const int dt, const int sk)
{
    if (!sk)
        return NULL;
    if (dt != RESDIAG_DTYPE_BF16)
        return sp->tau;
    for (int64_t j = 0; j < cols; j += 32) {
        vf tv[2];
        split_tau32(tv, sp->tau + j);
        vf_storeu(split + j, tv[0]);
        vf_storeu(split + j + VF_W, tv[1]);
    }
    return split;
}

/* rd_fast_rows_fn: row_kernel_f's loop for each row (one block, no tail,
 * no tau wrap), then rows_finish. ROWS_NO_PREFETCH: unlike the one-row
 * kernels, the 16-row kernels (this one and rows_kernel_dot) leave the
 * reading ahead to the hardware. On an AMD EPYC (Zen 4), rows of 768
 * columns, the software prefetch 2 KiB ahead per 64 bytes cost f32 0.41
 * -> 0.55 of the ceiling at 24 MiB and 0.53 -> 0.70 at 256 MiB, f16
 * 0.35 -> 0.49 and 0.46 -> 0.67, bf16 ~10 % (thread CPU time; 512 bytes
 * or 6 KiB ahead: no better); the ceiling's own loop with it reads 13-17 %
 * slower than without. */
static inline __attribute__((always_inline)) int
rows_kernel(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
            size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
            double amax_floor, const int dt, const int sk)
{
    const int64_t step = CH * VF_W;
    vf S[16], Q[16], KB[16];
    float split[BLOCK]; /* bf16: tau in the split order */
    const float *tau = rows_signs(split, sp, cols, dt, sk);
    rows_max mx = { amax_floor < 0.0 ? -1.0f : (float)amax_floor, amax_floor };
    o->amax = -1.0;
    o->amax_row = -1;
    for (int r = 0; r < n; r++) {
        const void *row = (const char *)row0 + (size_t)r * row_bytes;
        vf s1[CH], q[CH], kb[CH], am = vf_set1(0.0f);
        __m512i am16 = _mm512_setzero_si512(); /* f16: see f16_step */
#pragma GCC unroll 8
        for (int c = 0; c < CH; c++)
            s1[c] = q[c] = kb[c] = vf_set1(0.0f);
        /* no software prefetch: ROWS_NO_PREFETCH above */
        for (int64_t j = 0; j < cols; j += step) {
            if (dt == RESDIAG_DTYPE_F16)
                f16_step(s1, q, kb, &am16, row, j, sk ? tau + j : NULL, sk);
            else
                float_step(s1, q, kb, &am, row, j, sk ? tau + j : NULL, dt, sk);
        }
        if (dt == RESDIAG_DTYPE_F16)
            am = f16_magnitudes(am16);
        S[r] = vf_tree(s1);
        Q[r] = vf_tree(q);
        if (sk)
            KB[r] = kb_canon(kb, dt);
        rows_max_update(&mx, o, am, r);
    }
    return rows_finish(o, acc, sigma, S, Q, KB, row0, row_bytes, n, cols, amax_floor, dt, sk);
}

/* bf16 rows with a sketch up to this width go through rows_kernel_wide
 * (the signs in the split order are put on the stack once per call) */
#define ROWS_WIDE_SPLIT_MAX 4096

/* rows_kernel for rows of more than one block (cols > BLOCK, a multiple of
 * CH * VF_W): each row's blocks as row_kernel_f does them (the float sums
 * of a block reduced by vf_hsum3 and added in double, the buckets folded
 * into double by kb_fold), so that a row's sums are those of the one-row
 * kernel, bit for bit; the checks, per-token values and sketch of
 * rows_finish_wide. Row by row, the rows read in order as from one-row
 * calls, without their per-row and per-step costs (the column signs'
 * wrap, the software prefetch, the caller's per-row work): on AMD Zen 4,
 * f32 from L2, 1088 columns ran at 0.37 of the ceiling through the
 * one-row kernel against 0.69 for 1024 columns here. */
static inline __attribute__((always_inline)) int
rows_kernel_wide(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                 size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
                 double amax_floor, const int dt, const int sk)
{
    const int64_t step = CH * VF_W;
    double KB[16][16];
    float split[ROWS_WIDE_SPLIT_MAX]; /* bf16: tau in the split order */
    const float *tau = rows_signs(split, sp, cols, dt, sk);
    rows_max mx = { amax_floor < 0.0 ? -1.0f : (float)amax_floor, amax_floor };
    o->amax = -1.0;
    o->amax_row = -1;
    for (int r = 0; r < n; r++) {
        const void *row = (const char *)row0 + (size_t)r * row_bytes;
        vf s1[CH], q[CH], kb[CH], am = vf_set1(0.0f);
        __m512i am16 = _mm512_setzero_si512(); /* f16: see f16_step */
        double sx = 0.0, sq = 0.0;
        if (sk)
            memset(KB[r], 0, sizeof KB[r]);
        for (int64_t b0 = 0; b0 < cols; b0 += BLOCK) {
            const int64_t b1 = cols - b0 < BLOCK ? cols : b0 + BLOCK;
#pragma GCC unroll 8
            for (int c = 0; c < CH; c++)
                s1[c] = q[c] = kb[c] = vf_set1(0.0f);
            for (int64_t j = b0; j < b1; j += step) {
                if (dt == RESDIAG_DTYPE_F16)
                    f16_step(s1, q, kb, &am16, row, j, sk ? tau + j : NULL, sk);
                else
                    float_step(s1, q, kb, &am, row, j, sk ? tau + j : NULL, dt, sk);
            }
            float h[3];
            vf_hsum3(h, vf_tree(s1), vf_tree(q), vf_tree(q));
            sx += h[0];
            sq += h[1];
            if (sk)
                kb_fold(KB[r], kb, 16, dt);
        }
        if (dt == RESDIAG_DTYPE_F16)
            am = f16_magnitudes(am16);
        o->sx[r] = sx;
        o->sq[r] = sq;
        rows_max_update(&mx, o, am, r);
    }
    return rows_finish_wide(o, acc, sigma, KB, row0, row_bytes, n, cols, amax_floor, dt, sk);
}

/* rows_kernel or, for rows of more than one block, rows_kernel_wide */
static inline __attribute__((always_inline)) int
rows_kernel_any(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
                double amax_floor, const int dt, const int sk)
{
    if (cols <= BLOCK)
        return rows_kernel(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, dt, sk);
    return rows_kernel_wide(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, dt, sk);
}

#if RD_HAVE_BF16_DOT
/* bf16 rows by vdpbf16ps (AVX512-BF16): one instruction adds the products
 * of the 32 columns of a 512-bit load, pairwise, into 16 float lanes, so
 * sum x (times ones) and sum x^2 (times itself) cost one each; for the
 * sketch a vpermw first pairs columns l and l + 16 of the 32 in lane l
 * (one bucket, l mod 16), the pairs of negative column signs get their
 * sign bit flipped (a mask per 32 columns, paired alike once per call),
 * and one more times ones adds lane l into bucket l, and ABSMAX is an
 * integer max of the 16-bit magnitudes (on AMD Zen 4 from L2 15 % faster
 * than two products, of the even and then the odd columns, each in its own
 * lanes). The signs as masks (4 bytes per 32 columns) rather than as a
 * table of bf16 +-1 (64 bytes per 32 columns, a 512-bit load each): from
 * L3 and from memory ~25 % and 5-20 % faster, from L2 ~15 % slower (the
 * loop is compute-bound there; the flip costs 2 instructions). -x is
 * x * -1 exactly: the same bits. The products are exact; each
 * instruction rounds twice, and treats bf16 subnormals (|x| < 2^-126) as
 * 0 (so does its result: a lane sum below 2^-126 flushes to 0), which
 * moves a row sum by less than 2^-126 per column: far below the bound,
 * except for a row of such values, whose sum x^2 is then below 2^-70
 * while its ABSMAX is not 0, so that it goes to the one-row path
 * (row_kernel_f's check). A step is 128 columns in 4 chains, so that each
 * lane of a chain (sums and buckets alike) takes 16 terms per 1024
 * columns, as in row_kernel_f: the same bound. */
#define DOT_STEP 128
typedef __m512i vi;

__attribute__((target("avx512bf16,avx512bw"))) static inline vf dot(vf a, vi x, vi y)
{
    return _mm512_dpbf16_ps(a, (__m512bh)x, (__m512bh)y);
}

/* the 32 signs of columns j .. j+31 as bf16, in column order (exact) */
__attribute__((target("avx512bf16,avx512bw"))) static inline vi dot_tau32(const float *tp)
{
    return (vi)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(tp + 16), _mm512_loadu_ps(tp));
}

/* vpermw's index that puts columns l and l + 16 of 32 in 32-bit lane l */
__attribute__((target("avx512bf16,avx512bw"))) static inline vi dot_pair_index(void)
{
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                            22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

/* One row's loop: S, Q, the canonical buckets *kbo and the lane maxima of
 * |x| as floats in *amo. */
__attribute__((target("avx512bf16,avx512bw"))) static inline __attribute__((always_inline)) void
dot_row(vf *so, vf *qo, vf *kbo, vf *amo, const void *row, int64_t cols, const __mmask32 *neg,
        const int sk)
{
    const vi ones = _mm512_set1_epi32(0x3f803f80), mag = _mm512_set1_epi32(0x7fff7fff);
    const vi sign = _mm512_set1_epi32((int)0x80008000u);
    vf s[4], q[4], kb[4];
    vi am = _mm512_setzero_si512();
    const vi pidx = dot_pair_index();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        s[c] = q[c] = kb[c] = vf_set1(0.0f);
    for (int64_t j = 0; j < cols; j += DOT_STEP) {
        const char *p = (const char *)row + (size_t)j * 2; /* no prefetch: ROWS_NO_PREFETCH */
        vi w[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            w[c] = _mm512_loadu_si512((const void *)(p + 64 * c));
        am = _mm512_max_epu16(am, _mm512_max_epu16(
                                      _mm512_max_epu16(_mm512_and_si512(w[0], mag),
                                                       _mm512_and_si512(w[1], mag)),
                                      _mm512_max_epu16(_mm512_and_si512(w[2], mag),
                                                       _mm512_and_si512(w[3], mag))));
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            s[c] = dot(s[c], w[c], ones);
            q[c] = dot(q[c], w[c], w[c]);
            if (sk) {
                /* columns l and l + 16 (one bucket) into lane l */
                vi pw = _mm512_permutexvar_epi16(pidx, w[c]);
                pw = _mm512_mask_mov_epi16(pw, neg[j / 32 + c], _mm512_xor_si512(pw, sign));
                kb[c] = dot(kb[c], pw, ones);
            }
        }
    }
    *so = vf_tree(s);
    *qo = vf_tree(q);
    if (sk) /* lane l is bucket l */
        *kbo = vf_tree(kb);
    /* the 16-bit magnitudes of either half of each lane, as floats */
    *amo = vf_max(_mm512_castsi512_ps(_mm512_slli_epi32(am, 16)),
                  _mm512_castsi512_ps(_mm512_and_si512(am, _mm512_set1_epi32((int)0xffff0000u))));
}

/* rows_kernel for bf16 rows of a multiple of DOT_STEP columns, by dot_row;
 * rows of more than one block (bf16 with a sketch: up to
 * ROWS_WIDE_SPLIT_MAX columns) block by block, each block's float sums
 * reduced by vf_hsum3 and added in double, as rows_kernel_wide does */
__attribute__((target("avx512bf16,avx512bw"))) static inline __attribute__((always_inline)) int
rows_kernel_dot(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
                double amax_floor, const int sk)
{
    vf S[16], Q[16], KB[16];
    double KBD[16][16]; /* wide rows: the buckets in double */
    /* the negative column signs, paired as the data will be */
    __mmask32 neg[ROWS_WIDE_SPLIT_MAX / 32];
    if (sk)
        for (int64_t j = 0; j < cols; j += 32)
            neg[j / 32] = _mm512_movepi16_mask(
                _mm512_permutexvar_epi16(dot_pair_index(), dot_tau32(sp->tau + j)));
    rows_max mx = { amax_floor < 0.0 ? -1.0f : (float)amax_floor, amax_floor };
    o->amax = -1.0;
    o->amax_row = -1;
    for (int r = 0; r < n; r++) {
        const char *row = (const char *)row0 + (size_t)r * row_bytes;
        vf am;
        if (cols <= BLOCK) {
            dot_row(&S[r], &Q[r], &KB[r], &am, row, cols, neg, sk);
        } else {
            double sx = 0.0, sq = 0.0;
            am = vf_set1(0.0f);
            if (sk)
                memset(KBD[r], 0, sizeof KBD[r]);
            for (int64_t b0 = 0; b0 < cols; b0 += BLOCK) {
                const int64_t b1 = cols - b0 < BLOCK ? cols : b0 + BLOCK;
                vf bs, bq, bkb, bam;
                dot_row(&bs, &bq, &bkb, &bam, row + 2 * b0, b1 - b0, neg + b0 / 32, sk);
                float h[3];
                vf_hsum3(h, bs, bq, bq);
                sx += h[0];
                sq += h[1];
                am = vf_max(am, bam);
                if (sk) { /* lane u is bucket u */
                    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(bkb));
                    __m512d hi = _mm512_cvtps_pd(
                        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(bkb), 1)));
                    _mm512_storeu_pd(KBD[r], _mm512_add_pd(_mm512_loadu_pd(KBD[r]), lo));
                    _mm512_storeu_pd(KBD[r] + 8, _mm512_add_pd(_mm512_loadu_pd(KBD[r] + 8), hi));
                }
            }
            o->sx[r] = sx;
            o->sq[r] = sq;
        }
        rows_max_update(&mx, o, am, r);
    }
    if (cols > BLOCK)
        return rows_finish_wide(o, acc, sigma, KBD, row0, row_bytes, n, cols, amax_floor,
                                RESDIAG_DTYPE_BF16, sk);
    return rows_finish(o, acc, sigma, S, Q, KB, row0, row_bytes, n, cols, amax_floor,
                       RESDIAG_DTYPE_BF16, sk);
}

__attribute__((target("avx512bf16,avx512bw"))) static int
rows_dot0(rd_rows_out *o, double *acc, const double *sigma, const void *row0, size_t row_bytes,
          int n, int64_t cols, const rd_sketch_params *sp, double amax_floor)
{
    return rows_kernel_dot(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, 0);
}

__attribute__((target("avx512bf16,avx512bw"))) static int
rows_dot1(rd_rows_out *o, double *acc, const double *sigma, const void *row0, size_t row_bytes,
          int n, int64_t cols, const rd_sketch_params *sp, double amax_floor)
{
    return rows_kernel_dot(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, 1);
}

/* 1 when the CPU has AVX512-BF16 and BW and the dot kernel is not turned
 * off (rd_set_bf16_dot_avx512); 0 when not; -1 not checked yet */
static _Atomic int bf16_dot = -1;

void rd_set_bf16_dot_avx512(int on)
{
    bf16_dot = on && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
}

int rd_bf16_dot_avx512(void)
{
    if (bf16_dot < 0)
        rd_set_bf16_dot_avx512(1);
    return bf16_dot;
}
#else
void rd_set_bf16_dot_avx512(int on) { (void)on; }
int rd_bf16_dot_avx512(void) { return 0; }
#endif /* RD_HAVE_BF16_DOT */

/* rd_row_signs_fn: rd_row_sign's hash 8 rows a vector (vpmullq), the same
 * integer operations, so the same bits. The hash's last step,
 * z ^ (z >> 31), leaves the top bit (the sign) as it is: not done. */
void rd_row_signs_avx512(double *sg, uint64_t seed, int64_t row, int n)
{
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i golden = _mm512_set1_epi64((long long)RD_SIGN_GOLDEN);
    const __m512i m1 = _mm512_set1_epi64((long long)RD_SIGN_M1);
    const __m512i m2 = _mm512_set1_epi64((long long)RD_SIGN_M2);
    const __m512i s = _mm512_set1_epi64((long long)seed);
    for (int h = 0; h < n; h += 8) {
        __m512i r = _mm512_add_epi64(_mm512_set1_epi64((long long)((uint64_t)row + (uint64_t)h)),
                                     lane);
        __m512i z = _mm512_xor_si512(s, _mm512_mullo_epi64(r, golden));
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), m1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), m2);
        __m512d v = _mm512_mask_blend_pd(_mm512_movepi64_mask(z), _mm512_set1_pd(1.0),
                                         _mm512_set1_pd(-1.0));
        const int left = n - h < 8 ? n - h : 8;
        _mm512_mask_storeu_pd(sg + h, (__mmask8)((1u << left) - 1u), v);
    }
}

int rd_fast_rows_avx512(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                        size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                        const rd_sketch_params *sp, double amax_floor)
{
    const int k = sp != NULL ? sp->k : 0;
    if (n < 1 || n > RD_ROWS_MAX || cols % (CH * VF_W) != 0 ||
        (k != 0 && (k != 16 || sp->tau_len < (size_t)cols)) ||
        (k != 0 && dtype == RESDIAG_DTYPE_BF16 && cols > ROWS_WIDE_SPLIT_MAX))
        return 0;
#if RD_HAVE_BF16_DOT
    if (dtype == RESDIAG_DTYPE_BF16 && cols % DOT_STEP == 0 && rd_bf16_dot_avx512())
        return (k ? rows_dot1 : rows_dot0)(o, acc, sigma, row0, row_bytes, n, cols, sp,
                                           amax_floor);
#endif
    ROWS_DISPATCH(rows_kernel_any);
    return 0;
}
