/*
 * stats_avx2.c - the fast-row kernels of lib/stats/stats.c (see
 * stats_impl.h) in AVX2 intrinsics: rd_fast_row_avx2 and rd_fast_rows_avx2.
 *
 * meson compiles this file alone in a static library with -mavx2 -mfma
 * -mf16c, so that no other object of the library can contain these
 * instructions; stats.c calls a kernel only after __builtin_cpu_supports
 * said yes.
 *
 * What this file defines: the vector types and operations that the shared
 * kernels of simd_kernels.h are written in (8 floats, 4 doubles), and the
 * 16-row kernel for rows of any width (rows2_kernel, at the end of the
 * file: blocks of 512 columns, per-token values 4 rows a vector).
 */
#include "stats/stats_impl.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define RD_SIMD_AVX512 0
/* ---------------------------------------------------- AVX2+FMA+F16C */
typedef __m256d vd;
#define VD_W 4
#define vd_zero() _mm256_setzero_pd()
#define vd_set1(x) _mm256_set1_pd(x)
#define vd_loadu(p) _mm256_loadu_pd(p)
#define vd_storeu(p, v) _mm256_storeu_pd((p), (v))
#define vd_add(a, b) _mm256_add_pd((a), (b))
#define vd_sub(a, b) _mm256_sub_pd((a), (b))
#define vd_fmadd(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define vd_max(a, b) _mm256_max_pd((a), (b))
#define vd_abs(a) _mm256_andnot_pd(_mm256_set1_pd(-0.0), (a))
#define FAST_ROW rd_fast_row_avx2

static inline double vd_hsum(vd v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline double vd_hmax(vd v)
{
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}

/* 8 floats -> 2 vectors of doubles, in column order */
static inline void f8_to_vd(vd x[2], __m256 f)
{
    x[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    x[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
}

static inline __m256 bf16x8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

typedef __m256 vf; /* running max of |x| in float, for the float dtypes */
#define vf_zero() _mm256_setzero_ps()
static inline double vf_hmax(vf v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

/* 16 columns from j on: x as doubles; for the float dtypes *am takes the
 * max of |x| (exact in float, half the work of doing it in double). */
static inline void load16(vd x[4], vf *am, const void *row, int64_t j, const int dt)
{
    __m256 f0, f1;
    const uint16_t *h = (const uint16_t *)row + j;
    switch (dt) {
    case RESDIAG_DTYPE_F64: {
        const double *p = (const double *)row + j;
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            x[i] = _mm256_loadu_pd(p + 4 * i);
        return;
    }
    case RESDIAG_DTYPE_F32:
        f0 = _mm256_loadu_ps((const float *)row + j);
        f1 = _mm256_loadu_ps((const float *)row + j + 8);
        break;
    case RESDIAG_DTYPE_F16:
        f0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        f1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8)));
        break;
    default:
        f0 = bf16x8(h);
        f1 = bf16x8(h + 8);
        break;
    }
    const __m256 sign = _mm256_set1_ps(-0.0f);
    *am = _mm256_max_ps(*am, _mm256_max_ps(_mm256_andnot_ps(sign, f0),
                                           _mm256_andnot_ps(sign, f1)));
    f8_to_vd(x, f0);
    f8_to_vd(x + 2, f1);
}

static inline void load_tau16(vd t[4], const float *tp)
{
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        t[i] = _mm256_cvtps_pd(_mm_loadu_ps(tp + 4 * i));
}

/* The float kernel's vectors: 8 floats, 2 chains (columns 0-7 and 8-15 of
 * each step of 16 columns). */
#define VF_W 8
#define CH 2
#define vf_loadu(p) _mm256_loadu_ps(p)
#define vf_storeu(p, v) _mm256_storeu_ps((p), (v))
#define vf_add(a, b) _mm256_add_ps((a), (b))
#define vf_sub(a, b) _mm256_sub_ps((a), (b))
#define vf_fmadd(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define vf_max(a, b) _mm256_max_ps((a), (b))
#define vf_abs(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (a))
#define vf_set1(x) _mm256_set1_ps(x)

/* 8 columns from j on, as floats (exact for every float dtype) */
static inline vf loadf(const void *row, int64_t j, const int dt)
{
    const uint16_t *h = (const uint16_t *)row + j;
    switch (dt) {
    case RESDIAG_DTYPE_F32: return _mm256_loadu_ps((const float *)row + j);
    case RESDIAG_DTYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    default: return bf16x8(h);
    }
}

/* 1 if some lane of a is above b */
static inline int vf_any_gt(vf a, float b)
{
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(b), _CMP_GT_OQ)) != 0;
}

/* max(|a|, |b|) lane by lane */
static inline vf vf_absmax(vf a, vf b)
{
    return _mm256_max_ps(vf_abs(a), vf_abs(b));
}

static inline float vf_hsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static inline void vf_hsum3(float out[3], vf a, vf b, vf c)
{
    out[0] = vf_hsum(a);
    out[1] = vf_hsum(b);
    out[2] = vf_hsum(c);
}

/* rb[u mod K] += the buckets, chain c lane l = column 8c + l mod 16 (K
 * divides 16). */
#define SPLIT_BF16 0
static inline void split_tau32(vf t[2], const float *tp) { (void)t, (void)tp; }
static inline void kb_fold(double *rb, const vf kb[CH], size_t K, const int dt)
{
    (void)dt;
    if (K == 16) {
        for (int c = 0; c < 2; c++) {
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(kb[c]));
            __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(kb[c], 1));
            _mm256_storeu_pd(rb + 8 * c, _mm256_add_pd(_mm256_loadu_pd(rb + 8 * c), lo));
            _mm256_storeu_pd(rb + 8 * c + 4, _mm256_add_pd(_mm256_loadu_pd(rb + 8 * c + 4), hi));
        }
        return;
    }
    float v[16];
    _mm256_storeu_ps(v, kb[0]);
    _mm256_storeu_ps(v + 8, kb[1]);
    for (size_t u = 0; u < 16; u++)
        rb[u & (K - 1)] += v[u];
}

/* acc[u] += sigma * the buckets (K = 16) */
static inline void kb_fold_signed(double *acc, const vf kb[CH], double sigma, const int dt)
{
    (void)dt;
    __m256d sg = _mm256_set1_pd(sigma);
    for (int c = 0; c < 2; c++) {
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(kb[c]));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(kb[c], 1));
        _mm256_storeu_pd(acc + 8 * c, _mm256_fmadd_pd(sg, lo, _mm256_loadu_pd(acc + 8 * c)));
        _mm256_storeu_pd(acc + 8 * c + 4,
                         _mm256_fmadd_pd(sg, hi, _mm256_loadu_pd(acc + 8 * c + 4)));
    }
}

#include "stats/simd_kernels.h"

/* ---------------------------------------------- AVX2: up to 16 rows a call */

/* rd_fast_rows_avx2: the AVX-512 rows_kernel's structure in 256-bit
 * vectors, for rows of any width. Each row is read once, in steps of
 * ROWS_CH vectors of 8 floats: sum x^2 and the sketch in ROWS_CH chains
 * each, sum x in one chain of the step's pairwise sums, ABSMAX in one
 * (9 accumulators: with more, or with the row's double sums held in
 * registers, gcc spilled a chain, 27-30 GB/s from L2 instead of ~42). A
 * row's float sums go into double every ROWS_BLOCK columns, lane by lane
 * (768 columns: a block of 512 and one of 256). Each lane takes at most 16
 * terms per block, each chain or step sum is a pairwise tree of depth 2,
 * and the lanes are added in double: each row sum is within 18 u_f of the
 * sum of its |terms|, inside the float kernel's bound G = 24 u_f. The last
 * cols mod ROWS_STEP columns are summed in double. ABSMAX is an unsigned
 * max of the raw bits shifted left by one (the sign drops out; what is
 * left orders as |x| does): 32-bit lanes for f32, 16-bit for f16 and bf16.
 * bf16 is split into even and odd columns by a shift and a mask, with the
 * column signs split alike once per call. The per-token values are
 * computed 4 rows a vector; the checks and the hand-over are rows_finish's. */
#ifndef ROWS_CH
#define ROWS_CH 4
#endif
#define ROWS_STEP (ROWS_CH * VF_W)
#define ROWS_BLOCK (16 * ROWS_STEP)
/* bf16 with a sketch: the column signs in the split order are put on the
 * stack once per call, for rows up to this width (wider ones: row by row) */
#define ROWS_SPLIT_MAX 4096

/* The sums of one row: 4 double lanes each of sum x and sum x^2, the 16
 * buckets, and the lane maxima of |x| */
typedef struct row2 {
    double dsx[4], dsq[4]; /* the blocks' lanes so far */
    double kb[16];
    __m256i amb;           /* the largest |x| so far, as in row2_sums */
    double sx, sq;         /* the row's sums */
    vf am;
} row2;

/* 16 bf16 columns from p: the even ones (low halves shifted up) and the
 * odd ones (high halves masked), exact */
static inline void bf16_split16(vf f[2], __m256i w)
{
    f[0] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    f[1] = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}

/* a[0] + ... + a[ROWS_CH-1], pairwise */
static inline vf rows_tree(const vf a[ROWS_CH])
{
#if ROWS_CH == 4
    return vf_add(vf_add(a[0], a[1]), vf_add(a[2], a[3]));
#elif ROWS_CH == 2
    return vf_add(a[0], a[1]);
#else
#error "ROWS_CH is 2 or 4"
#endif
}

/* p[0..3] += v */
static inline void acc4(double *p, __m256d v)
{
    _mm256_storeu_pd(p, _mm256_add_pd(_mm256_loadu_pd(p), v));
}

static inline __m256d cvt_lo(vf v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
static inline __m256d cvt_hi(vf v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

/* One row: tau (cols) the column signs in the chains' order (split for
 * bf16), tau_plain in column order (the scalar tail). */
static inline __attribute__((always_inline)) void
row2_sums(row2 *o, const void *row, int64_t cols, const float *tau, const float *tau_plain,
          const int dt, const int sk)
{
    const int64_t nb = cols - cols % ROWS_STEP;
    const size_t esize = dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    /* (integers: the signs and the row are different objects) */
    const uintptr_t tdelta = sk ? (uintptr_t)(const void *)tau - (uintptr_t)row : 0;
    /* the double sums live in *o, not in registers: the loop needs all 16
     * (kept there, the compiler spilled the float chains instead) */
    const __m256d z = _mm256_setzero_pd(); /* (a memset became rep stos: slower) */
    _mm256_storeu_pd(o->dsx, z);
    _mm256_storeu_pd(o->dsq, z);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        _mm256_storeu_pd(o->kb + 4 * i, z);
    o->amb = _mm256_setzero_si256();
    for (int64_t b0 = 0; b0 < nb; b0 += ROWS_BLOCK) {
        const int64_t b1 = nb - b0 < ROWS_BLOCK ? nb : b0 + ROWS_BLOCK;
        vf s = vf_zero(), q[ROWS_CH], kb[ROWS_CH];
        /* the largest |x|, as raw bits shifted left by one (the sign
         * drops out, and the unsigned order of what is left is the order
         * of |x|): f32 in 32-bit lanes, f16 and bf16 in 16-bit lanes; no
         * mask register. Per block, like the sums (live across blocks, it
         * was spilled) */
        __m256i am = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int c = 0; c < ROWS_CH; c++)
            q[c] = kb[c] = vf_zero();
        for (int64_t j = b0; j < b1; j += ROWS_STEP) {
            const char *p = (const char *)row + (size_t)j * esize;
            /* f16 and bf16 (compute-bound) as in row_kernel; f32 without:
             * at 24 and 256 MiB the hardware alone read 0.73-0.98 of
             * the AVX2 ceiling, with a prefetch 2 KiB ahead 0.55-0.66,
             * one per 128 bytes 0.50-0.77, 4 or 8 KiB ahead no better */
            if (dt != RESDIAG_DTYPE_F32)
                _mm_prefetch(p + PREFETCH, _MM_HINT_T0);
            /* two vectors at a time, each used up before the next pair is
             * loaded: 9 accumulators and am leave 6 registers, and with
             * all four loaded first gcc spilled am */
            vf t = vf_zero();
#pragma GCC unroll 8
            for (int h = 0; h < ROWS_CH / 2; h++) {
                vf f[2];
                if (dt == RESDIAG_DTYPE_F32) {
                    f[0] = _mm256_loadu_ps((const float *)(const void *)p + 16 * h);
                    f[1] = _mm256_loadu_ps((const float *)(const void *)p + 16 * h + 8);
                    am = _mm256_max_epu32(am, _mm256_max_epu32(
                                                  _mm256_slli_epi32(_mm256_castps_si256(f[0]), 1),
                                                  _mm256_slli_epi32(_mm256_castps_si256(f[1]), 1)));
                } else {
                    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * h));
                    am = _mm256_max_epu16(am, _mm256_slli_epi16(w, 1));
                    if (dt == RESDIAG_DTYPE_F16) {
                        /* converted from memory again: a load costs less
                         * than extracting the upper half */
                        const __m128i *hp = (const __m128i *)(const void *)(p + 32 * h);
                        f[0] = _mm256_cvtph_ps(_mm_loadu_si128(hp));
                        f[1] = _mm256_cvtph_ps(_mm_loadu_si128(hp + 1));
                    } else {
                        bf16_split16(f, w);
                    }
                }
                /* sum x: the step's vectors by a tree first, so that one
                 * chain holds it (the same rounding depth as a tree over
                 * chains, one register instead of ROWS_CH) */
                t = h == 0 ? vf_add(f[0], f[1]) : vf_add(t, vf_add(f[0], f[1]));
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    const int c = 2 * h + e;
                    q[c] = vf_fmadd(f[e], f[e], q[c]);
                    if (sk) /* f32: the signs at the data's offset plus tdelta,
                             * so that one register steps through both */
                        kb[c] = vf_fmadd(
                            vf_loadu(dt == RESDIAG_DTYPE_F32
                                         ? (const float *)((uintptr_t)p + tdelta) + 8 * c
                                         : tau + j + 8 * c),
                            f[e], kb[c]);
                }
            }
            s = vf_add(s, t);
        }
        /* the block into double: chains by a pairwise tree, lanes in double */
        vf st = s, qt = rows_tree(q);
        o->amb = dt == RESDIAG_DTYPE_F32 ? _mm256_max_epu32(o->amb, am)
                                         : _mm256_max_epu16(o->amb, am);
        acc4(o->dsx, _mm256_add_pd(cvt_lo(st), cvt_hi(st)));
        acc4(o->dsq, _mm256_add_pd(cvt_lo(qt), cvt_hi(qt)));
        if (sk) {
            /* even chains: columns 0-7 of each 16 (bf16: the even columns),
             * odd chains: 8-15 (bf16: the odd columns) */
            vf a = kb[0], b = kb[1];
#pragma GCC unroll 8
            for (int c = 2; c < ROWS_CH; c += 2)
                a = vf_add(a, kb[c]), b = vf_add(b, kb[c + 1]);
            if (dt == RESDIAG_DTYPE_BF16) { /* back in bucket order */
                vf lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
                a = _mm256_permute2f128_ps(lo, hi, 0x20);
                b = _mm256_permute2f128_ps(lo, hi, 0x31);
            }
            acc4(o->kb, cvt_lo(a));
            acc4(o->kb + 4, cvt_hi(a));
            acc4(o->kb + 8, cvt_lo(b));
            acc4(o->kb + 12, cvt_hi(b));
        }
        __asm__ volatile("" : : "r"(o) : "memory"); /* *o stays in memory */
    }
    double tsx = 0.0, tsq = 0.0;
    float tam = 0.0f;
    for (int64_t j = nb; j < cols; j++) { /* the tail, in double */
        double v = load1(row, dt, j);
        float a = fabsf((float)v);
        tsx += v;
        tsq += v * v;
        tam = a > tam ? a : tam;
        if (sk)
            o->kb[j & 15] += (double)tau_plain[j] * v;
    }
    /* (adding the tail into dsx[0] first stalled on store forwarding) */
    o->sx = vd_hsum(_mm256_loadu_pd(o->dsx)) + tsx;
    o->sq = vd_hsum(_mm256_loadu_pd(o->dsq)) + tsq;
    vf amf;
    __m256i am = o->amb;
    if (dt == RESDIAG_DTYPE_F32) {
        amf = _mm256_castsi256_ps(_mm256_srli_epi32(am, 1));
    } else {
        am = _mm256_srli_epi16(am, 1);
        if (dt == RESDIAG_DTYPE_F16) {
            amf = vf_max(_mm256_cvtph_ps(_mm256_castsi256_si128(am)),
                         _mm256_cvtph_ps(_mm256_extracti128_si256(am, 1)));
        } else {
            vf h[2];
            bf16_split16(h, am);
            amf = vf_max(h[0], h[1]);
        }
    }
    o->am = vf_max(amf, _mm256_set1_ps(tam));
}

/* rd_fast_rows_fn for one dtype and sketch (sk: K = 16) */
static inline __attribute__((always_inline)) int
rows2_kernel(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
             size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
             double amax_floor, const int dt, const int sk)
{
    const float *tau = sk ? sp->tau : NULL;
    float split[ROWS_SPLIT_MAX]; /* bf16: tau in the split order, once for the rows */
    if (sk && dt == RESDIAG_DTYPE_BF16) {
        const int64_t nb = cols - cols % ROWS_STEP;
        for (int64_t j = 0; j < nb; j += 16)
            for (int l = 0; l < 8; l++) {
                split[j + l] = sp->tau[j + 2 * l];
                split[j + 8 + l] = sp->tau[j + 2 * l + 1];
            }
        tau = split;
    }
    rows_max mx = { amax_floor < 0.0 ? -1.0f : (float)amax_floor, amax_floor };
    o->amax = -1.0;
    o->amax_row = -1;
    row2 rs[RD_ROWS_MAX]; /* each row's own: its buckets are read from there below */
    for (int r = 0; r < n; r++) {
        const void *row = (const char *)row0 + (size_t)r * row_bytes;
        row2_sums(&rs[r], row, cols, tau, sk ? sp->tau : NULL, dt, sk);
        o->sx[r] = rs[r].sx;
        o->sq[r] = rs[r].sq;
        rows_max_update(&mx, o, rs[r].am, r);
    }
    for (int r = n; r < RD_ROWS_MAX; r++)
        o->sx[r] = o->sq[r] = 0.0;

    /* the per-token values of stats.c's compute_rows, 4 rows a vector:
     * the same operations, so the same results */
    const __m256d inv_cols = _mm256_set1_pd(1.0 / (double)cols);
    const __m256d rsqrt_cols = _mm256_set1_pd(1.0 / sqrt((double)cols));
    const __m256d z = _mm256_setzero_pd();
#pragma GCC unroll 4
    for (int h = 0; h < RD_ROWS_MAX; h += 4) {
        __m256d sx = _mm256_loadu_pd(o->sx + h), sq = _mm256_loadu_pd(o->sq + h);
        __m256d mu = _mm256_mul_pd(sx, inv_cols);
        __m256d var = _mm256_sub_pd(_mm256_mul_pd(sq, inv_cols), _mm256_mul_pd(mu, mu));
        __m256d norm = _mm256_sqrt_pd(sq);
        _mm256_storeu_pd(o->norm + h, norm);
        _mm256_storeu_pd(o->mean + h, _mm256_add_pd(z, mu)); /* y0 + mu */
        _mm256_storeu_pd(o->rms + h, _mm256_mul_pd(norm, rsqrt_cols));
        _mm256_storeu_pd(o->std + h, _mm256_sqrt_pd(_mm256_max_pd(var, z)));
    }

    const uint32_t redo = rows_hand_back(o, row0, row_bytes, n, cols, amax_floor, dt);
    if (sk) {
        __m256d a[4] = { z, z, z, z };
        for (int r = 0; r < n; r++) {
            if (redo >> r & 1u)
                continue;
            __m256d sg = _mm256_set1_pd(sigma[r]);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                a[i] = _mm256_fmadd_pd(sg, _mm256_loadu_pd(rs[r].kb + 4 * i), a[i]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            _mm256_storeu_pd(acc + 4 * i, _mm256_add_pd(_mm256_loadu_pd(acc + 4 * i), a[i]));
    }
    return 1;
}

int rd_fast_rows_avx2(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                      size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                      const rd_sketch_params *sp, double amax_floor)
{
    const int k = sp != NULL ? sp->k : 0;
    if (n < 1 || n > RD_ROWS_MAX || cols < 1 ||
        (k != 0 && (k != 16 || sp->tau_len < (size_t)cols)) ||
        (k != 0 && dtype == RESDIAG_DTYPE_BF16 && cols > ROWS_SPLIT_MAX))
        return 0;
    ROWS_DISPATCH(rows2_kernel);
    return 0;
}

/* rd_row_signs_fn: rd_row_sign's hash 4 rows a vector, the same integer
 * operations, so the same bits (the hash's last step, z ^ (z >> 31),
 * leaves the sign bit as it is: not done). AVX2 has no 64-bit product:
 * the low 64 bits of a * b from three 32-bit ones, lo*lo + ((hi*lo +
 * lo*hi) << 32), mod 2^64 as the scalar product is. One per 16 rows, it
 * was 20 of the ~1,000 instructions a row of 768 f32 columns costs. */
static inline __m256i mullo64(__m256i a, uint64_t b)
{
    const __m256i bl = _mm256_set1_epi64x((long long)b);
    const __m256i bh = _mm256_set1_epi64x((long long)(b >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), bl),
                                     _mm256_mul_epu32(a, bh));
    return _mm256_add_epi64(_mm256_mul_epu32(a, bl), _mm256_slli_epi64(cross, 32));
}

void rd_row_signs_avx2(double *sg, uint64_t seed, int64_t row, int n)
{
    const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0);
    const __m256i s = _mm256_set1_epi64x((long long)seed);
    for (int h = 0; h < n; h += 4) {
        __m256i r = _mm256_add_epi64(
            _mm256_set1_epi64x((long long)((uint64_t)row + (uint64_t)h)), lane);
        __m256i z = _mm256_xor_si256(s, mullo64(r, RD_SIGN_GOLDEN));
        z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), RD_SIGN_M1);
        z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), RD_SIGN_M2);
        /* the sign bit of z picks -1 */
        __m256d v = _mm256_blendv_pd(_mm256_set1_pd(1.0), _mm256_set1_pd(-1.0),
                                     _mm256_castsi256_pd(z));
        const int left = n - h < 4 ? n - h : 4;
        const __m256i keep = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), lane);
        _mm256_maskstore_pd(sg + h, keep, v);
    }
}
