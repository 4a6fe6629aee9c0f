/*
 * stats_simd.c - the fast-row kernels of lib/stats/stats.c (see stats_impl.h) in
 * x86 vector intrinsics.
 *
 * meson compiles this file twice, each time alone in a static library with
 * its own flags, so that no other object of the library can contain these
 * instructions:
 *   -DRD_SIMD_AVX512=0 -mavx2 -mfma -mf16c                   -> rd_fast_row_avx2
 *                                                  and rd_fast_rows_avx2
 *   -DRD_SIMD_AVX512=1 -mavx512f -mavx512dq -mavx512bw -mavx2 -mfma -mf16c
 *                                                  -> rd_fast_row_avx512
 *                                                  and rd_fast_rows_avx512
 * stats.c calls a kernel only after __builtin_cpu_supports said yes. The
 * AVX-512 file's bf16 dot kernel (rows_kernel_dot) alone is compiled for
 * AVX512-BF16 and BW by a target attribute (meson defines RD_HAVE_BF16_DOT
 * where the compiler has them), and used only where CPUID has them too.
 *
 * Dimension names: cols = width of the row, K = sketch size.
 *
 * Two kernels. f32, f16 (F16C, exact) and bf16 (a shift, exact) rows go
 * through row_kernel_f: floats all the way, per element one add (sum x),
 * two FMAs (sum x^2, and tau(j mod tau_len) * x into the sketch bucket,
 * exact products since tau is +-1) and a share of a max |x|, in float
 * lanes over blocks of at most BLOCK columns and in double across blocks.
 * That is what lets one core keep up with memory; its error bound (about
 * 1.4e-6 of each row sum's |terms|) and the rows it hands to the double
 * kernel are described above it. f64 rows, and rows handed over, go
 * through row_kernel: converted to double, shifted by the row's first
 * value x0 (d = x - x0 into sum d and sum d^2, x^2 into sum x^2), double
 * accumulation throughout, within rounding of the portable kernel.
 *
 * The sketch: with 16 columns per step, column j + u of a step falls in
 * bucket (j + u) mod K = u mod K when K divides 16, so for the usual K (1,
 * 2, 4, 8, 16) the buckets live in registers as 16 "virtual" buckets folded
 * at the end of the block; when K is a multiple of 16 (row_kernel only) a
 * step covers 16 consecutive buckets in memory; other K return 0 (the
 * portable kernel then does the row). The last columns that do not fill a
 * step are done by a scalar loop in double. Accumulators are split into
 * chains to shorten the dependency chains; the one-row loops prefetch
 * PREFETCH bytes ahead (the 16-row ones do not: see ROWS_NO_PREFETCH). The exact quantities (ABSMAX, counts) are identical on
 * every path.
 *
 * bf16 on AVX-512: one 512-bit load gives 32 columns, split by a shift
 * and a mask into the even and the odd columns (load_bf16_split), with the
 * column signs split the same way; or, in the 16-row kernel on CPUs with
 * AVX512-BF16, summed by vdpbf16ps (rows_kernel_dot).
 *
 * AVX-512 also has rows_kernel, row_kernel_f for up to 16 rows of one
 * block each (the hooks' usual d_model: 768 columns = 12 steps): at that
 * width a row's horizontal sums, checks and call cost as much as its
 * loop, so it reduces the 16 rows' sums together (vf_hsum16), computes
 * their per-token values 8 rows a vector, and leaves the rows that fail
 * row_kernel_f's checks to the caller. AVX2 has the same for rows of any
 * width (rows2_kernel, at the end of the file: blocks of 512 columns,
 * per-token values 4 rows a vector).
 */
#include "stats/stats_impl.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#ifndef RD_SIMD_AVX512
#error "define RD_SIMD_AVX512 to 0 or 1"
#endif
#ifndef RD_HAVE_BF16_DOT /* meson: the compiler knows AVX512-BF16 */
#define RD_HAVE_BF16_DOT 0
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
#endif

#define NV (16 / VD_W) /* double vectors per 16 columns */
#ifndef PREFETCH
#define PREFETCH 2048 /* bytes ahead */
#endif

static inline double load1(const void *row, const int dt, int64_t j)
{
    /* the row may start at any byte: memcpy loads assume no alignment */
    const char *p = (const char *)row;
    float f;
    double d;
    uint16_t h;
    switch (dt) {
    case RESDIAG_DTYPE_F32: memcpy(&f, p + (size_t)j * 4, 4); return f;
    case RESDIAG_DTYPE_F64: memcpy(&d, p + (size_t)j * 8, 8); return d;
    case RESDIAG_DTYPE_F16: memcpy(&h, p + (size_t)j * 2, 2); return rd_f16_to_f32(h);
    default: memcpy(&h, p + (size_t)j * 2, 2); return rd_bf16_to_f32(h);
    }
}

/* the largest |x| of a row (rare: see rows_hand_back) */
static double row_absmax(const void *row, int64_t cols, const int dt)
{
    vf am = vf_zero();
    int64_t j = 0;
    for (; j + VF_W <= cols; j += VF_W)
        am = vf_max(am, vf_abs(loadf(row, j, dt)));
    double a = vf_hmax(am);
    for (; j < cols; j++) {
        double v = fabs(load1(row, dt, j));
        a = v > a ? v : a;
    }
    return a;
}

/* The end of both 16-row kernels, after the n rows' sums (o->sx, o->sq):
 * row_kernel_f's checks on each row. A row that fails is the caller's (its
 * bit in o->redo, returned too), and its max does not count here (the
 * caller's one-row path finds it). */
static inline __attribute__((always_inline)) uint32_t
rows_hand_back(rd_rows_out *o, const void *row0, size_t row_bytes, int n, int64_t cols,
               double amax_floor, const int dt)
{
    uint32_t redo = 0;
    const double dcols = (double)cols;
    for (int r = 0; r < n; r++) {
        double sx = o->sx[r], sq = o->sq[r];
        if (!(isfinite(sq) && 4.0 * sx * sx <= 3.0 * sq * dcols) || sq < 0x1p-70)
            redo |= 1u << r;
    }
    o->redo = redo;
    if (o->amax_row >= 0 && (redo >> o->amax_row & 1u)) {
        /* the block's max was in a row handed back: find the largest
         * above the floor among the others again (rare) */
        o->amax = -1.0;
        o->amax_row = -1;
        double fl = amax_floor;
        for (int r = 0; r < n; r++) {
            if (redo >> r & 1u)
                continue;
            double a = row_absmax((const char *)row0 + (size_t)r * row_bytes, cols, dt);
            if (a > fl) {
                fl = a;
                o->amax = a;
                o->amax_row = r;
            }
        }
    }
    return redo;
}

/* In rd_fast_rows_avx512 and _avx2, after their checks: each (dtype,
 * sketch) its own copy of the 16-row kernel, with constants. */
#define ROWS_CASE(kernel, dt, sk)                                                           \
    case 4 * (dt) + (sk):                                                                   \
        return kernel(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, (dt), (sk))
#define ROWS_DISPATCH(kernel)                                                               \
    switch (4 * (int)dtype + (k == 16)) {                                                   \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F32, 0);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F32, 1);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F16, 0);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F16, 1);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_BF16, 0);                                           \
        ROWS_CASE(kernel, RESDIAG_DTYPE_BF16, 1);                                           \
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

/* Columns per block of the float kernel: each float accumulator lane takes
 * at most 16 terms per block before the block's sums go into double. */
#define BLOCK (16 * CH * VF_W)

/* a[0] + ... + a[CH-1], pairwise (log2 CH roundings per lane) */
static inline vf vf_tree(const vf a[CH])
{
    vf t[CH];
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++)
        t[c] = a[c];
#pragma GCC unroll 8
    for (int w = CH / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            t[c] = vf_add(t[c], t[c + w]);
    return t[0];
}

/* max |a[c]| over the chains, lane by lane */
static inline vf vf_absmax_tree(const vf a[CH])
{
    vf t[CH / 2];
#pragma GCC unroll 8
    for (int c = 0; c < CH / 2; c++)
        t[c] = vf_absmax(a[c], a[c + CH / 2]);
#pragma GCC unroll 8
    for (int w = CH / 4; w >= 1; w /= 2)
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            t[c] = vf_max(t[c], t[c + w]);
    return t[0];
}

/* One step of the float loop: CH vectors of row from column j, their
 * largest |x| into *am, and sum x, sum x^2 and (sk) the sketch, with the
 * column signs at tau (CH * VF_W of them, in the chains' order: split for
 * bf16 on AVX-512, see split_tau32), into the chains s1, q, kb. */
static inline __attribute__((always_inline)) void
float_step(vf s1[CH], vf q[CH], vf kb[CH], vf *am, const void *row, int64_t j, const float *tau,
           const int dt, const int sk)
{
    vf f[CH];
#if SPLIT_BF16
    if (dt == RESDIAG_DTYPE_BF16) {
        load_bf16_split(f, row, j);
        load_bf16_split(f + 2, row, j + 2 * VF_W);
    } else
#endif
#pragma GCC unroll 8
        for (int c = 0; c < CH; c++)
            f[c] = loadf(row, j + c * VF_W, dt);
    *am = vf_max(*am, vf_absmax_tree(f));
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++) {
        s1[c] = vf_add(s1[c], f[c]);
        q[c] = vf_fmadd(f[c], f[c], q[c]);
        if (sk)
            kb[c] = vf_fmadd(vf_loadu(tau + c * VF_W), f[c], kb[c]);
    }
}

/* The float kernel for f32, f16 and bf16 (sk: K divides 16, else 0): per
 * element one add (sum x), two FMAs (sum x^2, the sketch bucket) and a
 * share of a max, in float lanes over blocks of BLOCK columns, in double
 * across blocks. A float block sum of m terms is within m u_f of the sum of
 * its |terms| (u_f = 2^-24); here m <= 16 per lane + 2 (chains) + 4
 * (lanes), so each row sum is within 22 u_f (< 1.4e-6) of the sum of its
 * |terms|. The row is not shifted (y0 = 0, sum d = sum x, sum d^2 = sum x^2),
 * so the token's variance sum x^2/cols - mean^2 cancels when |mean| >>
 * std; rows where mean^2 > 3 var (4 (sum x)^2 > 3 cols sum x^2), i.e.
 * where that could cost more than a factor 4, go to row_kernel (double,
 * shifted by x0), and so do rows whose squares overflow float (|x| >
 * ~1.8e19: the sums come out Inf; NaN and Inf do the same) or come near
 * its underflow (sum x^2 < 2^-70 with a non-zero value). ABSMAX is exact
 * (a max); it is reduced only when some lane beats amax_floor, else
 * rs->amax = -1. The last block's buckets are folded after those checks:
 * for a row that passes them, with K = 16 and acc given, straight into
 * acc with the row's sign (returns 2), else into rb (returns 1). */
static inline __attribute__((always_inline)) int
row_kernel_f(rd_row_sums *rs, double *rb /* (K) */, const void *row, int64_t cols,
             const rd_sketch_params *sp, double amax_floor, double *acc /* (K) */,
             double sigma, const int dt, const int sk)
{
    const int64_t step = CH * VF_W, nb = cols - cols % step;
    const size_t K = sk ? (size_t)sp->k : 1, tl = sk ? sp->tau_len : 1;
    const size_t esize = dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    size_t t = 0;           /* column mod tau_len */
    float wrap[CH * VF_W];  /* tau across its end */
    float split[CH * VF_W]; /* tau in the split order (bf16) */
    vf am = vf_set1(0.0f);
    double sx = 0.0, sq = 0.0;
    vf kb[CH]; /* the current block's buckets */
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++)
        kb[c] = vf_set1(0.0f);

    for (int64_t b0 = 0; b0 < nb; b0 += BLOCK) {
        const int64_t b1 = nb - b0 < BLOCK ? nb : b0 + BLOCK;
        vf s1[CH], q[CH];
        if (sk && b0 > 0) { /* the previous block's buckets */
            kb_fold(rb, kb, K, dt);
#pragma GCC unroll 8
            for (int c = 0; c < CH; c++)
                kb[c] = vf_set1(0.0f);
        }
#pragma GCC unroll 8
        for (int c = 0; c < CH; c++)
            s1[c] = q[c] = vf_set1(0.0f);
        for (int64_t j = b0; j < b1; j += step) {
            /* see row_kernel: without it the loop waits for memory */
            const char *pf = (const char *)row + (size_t)j * esize + PREFETCH;
#pragma GCC unroll 8
            for (size_t o = 0; o < (size_t)step * esize; o += 64)
                _mm_prefetch(pf + o, _MM_HINT_T0);
            const float *tp = NULL;
            if (sk) {
                tp = sp->tau + t;
                if (t + (size_t)step > tl) { /* once per tau_len columns */
                    for (size_t u = 0; u < (size_t)step; u++)
                        wrap[u] = sp->tau[(t + u) % tl];
                    tp = wrap;
                }
                t += (size_t)step;
                while (t >= tl)
                    t -= tl;
                if (SPLIT_BF16 && dt == RESDIAG_DTYPE_BF16) {
                    vf tv[4];
                    split_tau32(tv, tp);
                    split_tau32(tv + 2, tp + 32);
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++)
                        vf_storeu(split + c * VF_W, tv[c]);
                    tp = split;
                }
            }
            float_step(s1, q, kb, &am, row, j, tp, dt, sk);
        }
        float h[3];
        vf_hsum3(h, vf_tree(s1), vf_tree(q), vf_tree(q));
        sx += h[0];
        sq += h[1];
    }

    double tam = 0.0; /* the last cols mod step columns, in double */
    for (int64_t j = nb; j < cols; j++) {
        double v = load1(row, dt, j), a = fabs(v);
        sx += v;
        sq += v * v;
        tam = a > tam ? a : tam;
        if (sk)
            rb[(size_t)j % K] += (double)sp->tau[(size_t)j % tl] * v;
    }

    double amax = -1.0;
    int ok = isfinite(sq) && 4.0 * sx * sx <= 3.0 * sq * (double)cols;
    if (ok && sq < 0x1p-70) {
        amax = vf_hmax(am);
        amax = tam > amax ? tam : amax;
        ok = amax == 0.0;
    }
    if (!ok) { /* rare: redo the row in double */
        if (sk)
            memset(rb, 0, K * sizeof *rb);
        row_kernel(rs, rb, row, cols, sp, dt, sk);
        return 1;
    }
    int done = 1;
    if (sk && acc && K == 16 && nb == cols && nb <= BLOCK) {
        kb_fold_signed(acc, kb, sigma, dt); /* the whole row was one block */
        done = 2;
    } else if (sk && nb > 0) {
        kb_fold(rb, kb, K, dt);
    }
    if (amax < 0.0 && (tam > amax_floor || vf_any_gt(am, (float)amax_floor))) {
        amax = vf_hmax(am);
        amax = tam > amax ? tam : amax;
    }
    rs->e = 0;
    rs->y0 = 0.0;
    rs->sd = sx;
    rs->sd2 = sq;
    rs->sq = sq;
    rs->amax = amax;
    rs->amax_col = -1;
    rs->nan = rs->inf = 0;
    return done;
}

#define KERNELS(dt)                                                           \
    case 3 * (dt) + 0: row_kernel(rs, rb, row, cols, sp, (dt), 0); return 1;  \
    case 3 * (dt) + 1: row_kernel(rs, rb, row, cols, sp, (dt), 1); return 1;  \
    case 3 * (dt) + 2: row_kernel(rs, rb, row, cols, sp, (dt), 2); return 1;

#define KERNELS_F(dt)                                                                  \
    case 3 * (dt) + 0:                                                                 \
        return row_kernel_f(rs, rb, row, cols, sp, amax_floor, acc, sigma, (dt), 0);   \
    case 3 * (dt) + 1:                                                                 \
        return row_kernel_f(rs, rb, row, cols, sp, amax_floor, acc, sigma, (dt), 1);   \
    case 3 * (dt) + 2: row_kernel(rs, rb, row, cols, sp, (dt), 2); return 1;

int FAST_ROW(rd_row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
             int64_t cols, const rd_sketch_params *sp, double amax_floor, double *acc,
             double sigma)
{
    const int k = sp != NULL ? sp->k : 0;
    const int kmode = k <= 0 ? 0 : 16 % k == 0 ? 1 : k % 16 == 0 ? 2 : -1;
    if (kmode < 0)
        return 0;
    switch (3 * (int)dtype + kmode) {
        KERNELS_F(RESDIAG_DTYPE_F32)
        KERNELS(RESDIAG_DTYPE_F64)
        KERNELS_F(RESDIAG_DTYPE_F16)
        KERNELS_F(RESDIAG_DTYPE_BF16)
    }
    return 0;
}

/* The running largest |x| of the rows so far (above the floor): row r's
 * lane maxima am. */
typedef struct rows_max {
    float floor_f; /* the floor as a float (|x| are floats) */
    double floor_d;
} rows_max;

static inline void rows_max_update(rows_max *m, rd_rows_out *o, vf am, int r)
{
    if (vf_any_gt(am, m->floor_f)) { /* rare after the first rows */
        double a = vf_hmax(am);
        if (a > m->floor_d) {
            m->floor_d = a;
            m->floor_f = (float)a;
            o->amax = a;
            o->amax_row = r;
        }
    }
}

#if RD_SIMD_AVX512
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

    /* the per-token values of stats.c's compute_rows, 8 rows a vector:
     * the same operations, so the same results */
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
    const float *tau = sk ? sp->tau : NULL;
    float split[BLOCK]; /* bf16: tau in the split order, once for the rows */
    if (sk && dt == RESDIAG_DTYPE_BF16) {
        for (int64_t j = 0; j < cols; j += 32) {
            vf tv[2];
            split_tau32(tv, sp->tau + j);
            vf_storeu(split + j, tv[0]);
            vf_storeu(split + j + VF_W, tv[1]);
        }
        tau = split;
    }
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

#if RD_HAVE_BF16_DOT
/* bf16 rows by vdpbf16ps (AVX512-BF16): one instruction adds the products
 * of the 32 columns of a 512-bit load, pairwise, into 16 float lanes, so
 * sum x (times ones) and sum x^2 (times itself) cost one each; for the
 * sketch a vpermw first pairs columns l and l + 16 of the 32 in lane l
 * (one bucket, l mod 16), so that one more times the column signs, paired
 * alike once per call, adds lane l into bucket l: 4 instructions per 32
 * columns, and ABSMAX is an integer max of the 16-bit magnitudes (on AMD
 * Zen 4 from L2 15 % faster than two products, of the even and then the
 * odd columns, each in its own lanes). The products are exact; each
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
dot_row(vf *so, vf *qo, vf *kbo, vf *amo, const void *row, int64_t cols, const vi *tau,
        const int sk)
{
    const vi ones = _mm512_set1_epi32(0x3f803f80), mag = _mm512_set1_epi32(0x7fff7fff);
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
                kb[c] = dot(kb[c], _mm512_permutexvar_epi16(pidx, w[c]), tau[j / 32 + c]);
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

/* rows_kernel for bf16 rows of a multiple of DOT_STEP columns, by dot_row */
__attribute__((target("avx512bf16,avx512bw"))) static inline __attribute__((always_inline)) int
rows_kernel_dot(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                size_t row_bytes, int n, int64_t cols, const rd_sketch_params *sp,
                double amax_floor, const int sk)
{
    vf S[16], Q[16], KB[16];
    vi tau[BLOCK / 32]; /* the column signs, paired as the data will be */
    if (sk)
        for (int64_t j = 0; j < cols; j += 32)
            tau[j / 32] = _mm512_permutexvar_epi16(dot_pair_index(), dot_tau32(sp->tau + j));
    rows_max mx = { amax_floor < 0.0 ? -1.0f : (float)amax_floor, amax_floor };
    o->amax = -1.0;
    o->amax_row = -1;
    for (int r = 0; r < n; r++) {
        vf am;
        dot_row(&S[r], &Q[r], &KB[r], &am, (const char *)row0 + (size_t)r * row_bytes, cols, tau,
                sk);
        rows_max_update(&mx, o, am, r);
    }
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

int rd_fast_rows_avx512(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                        size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                        const rd_sketch_params *sp, double amax_floor)
{
    const int k = sp != NULL ? sp->k : 0;
    if (n < 1 || n > RD_ROWS_MAX || cols % (CH * VF_W) != 0 || cols > BLOCK ||
        (k != 0 && (k != 16 || sp->tau_len < (size_t)cols)))
        return 0;
#if RD_HAVE_BF16_DOT
    if (dtype == RESDIAG_DTYPE_BF16 && cols % DOT_STEP == 0 && rd_bf16_dot_avx512())
        return (k ? rows_dot1 : rows_dot0)(o, acc, sigma, row0, row_bytes, n, cols, sp,
                                           amax_floor);
#endif
    ROWS_DISPATCH(rows_kernel);
    return 0;
}
#else
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
                    if (sk)
                        kb[c] = vf_fmadd(vf_loadu(tau + j + 8 * c), f[e], kb[c]);
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
    double kb[RD_ROWS_MAX][16];
    for (int r = 0; r < n; r++) {
        const void *row = (const char *)row0 + (size_t)r * row_bytes;
        row2 rs;
        row2_sums(&rs, row, cols, tau, sk ? sp->tau : NULL, dt, sk);
        o->sx[r] = rs.sx;
        o->sq[r] = rs.sq;
        if (sk)
            memcpy(kb[r], rs.kb, sizeof kb[r]);
        rows_max_update(&mx, o, rs.am, r);
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
                a[i] = _mm256_fmadd_pd(sg, _mm256_loadu_pd(kb[r] + 4 * i), a[i]);
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
#endif
