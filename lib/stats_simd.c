/*
 * stats_simd.c - the fast-row kernel of lib/stats.c (see stats_impl.h) in
 * x86 vector intrinsics, double accumulation throughout.
 *
 * meson compiles this file twice, each time alone in a static library with
 * its own flags, so that no other object of the library can contain these
 * instructions:
 *   -DRD_SIMD_AVX512=0 -mavx2 -mfma -mf16c             -> rd_fast_row_avx2
 *   -DRD_SIMD_AVX512=1 -mavx512f -mavx2 -mfma -mf16c   -> rd_fast_row_avx512
 * stats.c calls a kernel only after __builtin_cpu_supports said yes.
 *
 * Dimension names: cols = width of the row, K = sketch size.
 *
 * A row is read once, 16 columns at a time: f32 / f16 (F16C, exact) / bf16
 * (a shift, exact) become floats, then doubles; f64 is loaded as it is.
 * Per element: d = x - x0 into sum d and sum d^2, x^2 into sum x^2 (FMA),
 * |x| into a running max, and tau(j mod tau_len) * x (exact: tau is +-1)
 * into the sketch buckets. With 16 columns per step, column j + u of a step
 * falls in bucket (j + u) mod K = u mod K when K divides 16, so for the
 * usual K (1, 2, 4, 8, 16) the buckets live in registers as 16 "virtual"
 * buckets folded at the end of the row; when K is a multiple of 16 a step
 * covers 16 consecutive buckets in memory; other K return 0 (the portable
 * kernel then does the row). The last cols mod 16 columns are done by a
 * scalar loop. Each accumulator is split in two to shorten the dependency
 * chains; max |x| of the float dtypes is taken in float (exact); the loop
 * prefetches PREFETCH bytes ahead, without which it stalls on memory
 * between bursts of arithmetic (measured: 2x at 24 and 256 MiB). The sums
 * differ from the portable kernel's only in the order of the additions,
 * i.e. within rounding; the exact quantities are identical.
 */
#include "stats_impl.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#ifndef RD_SIMD_AVX512
#error "define RD_SIMD_AVX512 to 0 or 1"
#endif

#if RD_SIMD_AVX512
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

#else
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
#endif

#define NV (16 / VD_W) /* double vectors per 16 columns */
#ifndef PREFETCH
#define PREFETCH 2048 /* bytes ahead */
#endif

static inline double load1(const void *row, const int dt, int64_t j)
{
    switch (dt) {
    case RESDIAG_DTYPE_F32: return ((const float *)row)[j];
    case RESDIAG_DTYPE_F64: return ((const double *)row)[j];
    case RESDIAG_DTYPE_F16: return rd_f16_to_f32(((const uint16_t *)row)[j]);
    default: return rd_bf16_to_f32(((const uint16_t *)row)[j]);
    }
}

/* kmode: 0 no sketch, 1 K divides 16 (register buckets), 2 K multiple of
 * 16 (memory buckets). dt and kmode are constants at every call, so each
 * combination is compiled on its own. */
static inline __attribute__((always_inline)) void
row_kernel(rd_row_sums *rs, double *rb /* (K) */, const void *row, int64_t cols,
           const rd_sketch_params *sp, const int dt, const int kmode)
{
    const int64_t nb = cols & ~(int64_t)15;
    const double x0 = load1(row, dt, 0);
    const vd vx0 = vd_set1(x0);
    vd a_sd[2], a_sd2[2], a_sq[2], a_am[2], kb[NV];
    vf amf = vf_zero();
#pragma GCC unroll 4
    for (int i = 0; i < 2; i++)
        a_sd[i] = a_sd2[i] = a_sq[i] = a_am[i] = vd_zero();
#pragma GCC unroll 4
    for (int i = 0; i < NV; i++)
        kb[i] = vd_zero();
    const size_t K = kmode ? (size_t)sp->k : 1, tl = kmode ? sp->tau_len : 1;
    size_t t = 0, m = 0; /* column mod tau_len, column mod K (kmode 2) */
    float wrap[16];      /* tau across its end */

    const size_t esize = dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    for (int64_t j = 0; j < nb; j += 16) {
        /* The loop does enough arithmetic per byte that the hardware
         * prefetcher alone lets it wait for memory; ask for the lines
         * PREFETCH bytes ahead (past the row's end is fine: the next row
         * usually follows, and a prefetch never faults). */
        const char *pf = (const char *)row + (size_t)j * esize + PREFETCH;
        _mm_prefetch(pf, _MM_HINT_T0);
        if (esize == 8)
            _mm_prefetch(pf + 64, _MM_HINT_T0);
        vd x[NV];
        load16(x, &amf, row, j, dt);
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++) {
            vd d = vd_sub(x[i], vx0);
            a_sd[i & 1] = vd_add(a_sd[i & 1], d);
            a_sd2[i & 1] = vd_fmadd(d, d, a_sd2[i & 1]);
            a_sq[i & 1] = vd_fmadd(x[i], x[i], a_sq[i & 1]);
            if (dt == RESDIAG_DTYPE_F64)
                a_am[i & 1] = vd_max(a_am[i & 1], vd_abs(x[i]));
        }
        if (kmode) {
            const float *tp = sp->tau + t;
            if (t + 16 > tl) { /* once per tau_len columns */
                for (size_t u = 0; u < 16; u++)
                    wrap[u] = sp->tau[(t + u) % tl];
                tp = wrap;
            }
            t += 16;
            if (t >= tl)
                t = t - tl < tl ? t - tl : t % tl;
            if (kmode == 1) {
#if RD_SIMD_AVX512
                sketch16(kb, x, tp);
#else
                vd tv[NV];
                load_tau16(tv, tp);
#pragma GCC unroll 4
                for (int i = 0; i < NV; i++)
                    kb[i] = vd_fmadd(tv[i], x[i], kb[i]);
#endif
            } else {
                vd tv[NV];
                load_tau16(tv, tp);
                double *r = rb + m; /* (16) buckets m .. m+15 */
#pragma GCC unroll 4
                for (int i = 0; i < NV; i++)
                    vd_storeu(r + i * VD_W, vd_fmadd(tv[i], x[i], vd_loadu(r + i * VD_W)));
                m += 16;
                if (m == K)
                    m = 0;
            }
        }
    }

    double sd = 0.0, sd2 = 0.0, sq = 0.0, am = 0.0;
    for (int64_t j = nb; j < cols; j++) {
        double v = load1(row, dt, j), d = v - x0, a = fabs(v);
        sd += d;
        sd2 += d * d;
        sq += v * v;
        am = a > am ? a : am;
        if (kmode)
            rb[(size_t)j % K] += (double)sp->tau[(size_t)j % tl] * v;
    }
    if (kmode == 1 && K == 16) {
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            vd_storeu(rb + i * VD_W, vd_add(vd_loadu(rb + i * VD_W), kb[i]));
    } else if (kmode == 1) { /* K = 1, 2, 4, 8: a power of two */
        double v[16];
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            vd_storeu(v + i * VD_W, kb[i]);
        for (size_t u = 0; u < 16; u++)
            rb[u & (K - 1)] += v[u];
    }
    double vam = dt == RESDIAG_DTYPE_F64 ? vd_hmax(vd_max(a_am[0], a_am[1])) : vf_hmax(amf);
    rs->e = 0;
    rs->y0 = x0;
    rs->sd = vd_hsum(vd_add(a_sd[0], a_sd[1])) + sd;
    rs->sd2 = vd_hsum(vd_add(a_sd2[0], a_sd2[1])) + sd2;
    rs->sq = vd_hsum(vd_add(a_sq[0], a_sq[1])) + sq;
    rs->amax = vam > am ? vam : am;
    rs->amax_col = -1;
    rs->nan = rs->inf = 0;
}

#define KERNELS(dt)                                                           \
    case 3 * (dt) + 0: row_kernel(rs, rb, row, cols, sp, (dt), 0); return 1;  \
    case 3 * (dt) + 1: row_kernel(rs, rb, row, cols, sp, (dt), 1); return 1;  \
    case 3 * (dt) + 2: row_kernel(rs, rb, row, cols, sp, (dt), 2); return 1;

int FAST_ROW(rd_row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
             int64_t cols, const rd_sketch_params *sp)
{
    const int k = sp != NULL ? sp->k : 0;
    const int kmode = k <= 0 ? 0 : 16 % k == 0 ? 1 : k % 16 == 0 ? 2 : -1;
    if (kmode < 0)
        return 0;
    switch (3 * (int)dtype + kmode) {
        KERNELS(RESDIAG_DTYPE_F32)
        KERNELS(RESDIAG_DTYPE_F64)
        KERNELS(RESDIAG_DTYPE_F16)
        KERNELS(RESDIAG_DTYPE_BF16)
    }
    return 0;
}
