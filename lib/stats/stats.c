/*
 * stats.c - one-pass statistics of a 2-D tensor and its linear sketch.
 *
 * Dimension names: rows = tokens, cols = width, K = sketch size.
 *
 * Semantics (the contract is lib/stats/stats.h; these are the details):
 * - Per token i: norm_i = sqrt(sum_j x_ij^2), mean_i = sum_j x_ij / cols,
 *   rms_i = norm_i / sqrt(cols), std_i = sqrt(max(0, sumsq/cols - mean_i^2))
 *   (population std about the token's own mean). std_i is computed from
 *   sums of x - x_i0 (the token's first value), the same quantity without
 *   the cancellation of sumsq/cols - mean^2 when |mean_i| >> std_i.
 * - Non-finite values (NaN, +-Inf) are counted and otherwise treated as 0:
 *   they add nothing to any sum or to the sketch, but the divisor stays
 *   cols, so rms_i^2 = mean_i^2 + std_i^2 holds for every token. A token
 *   whose values are all non-finite has norm, mean, rms and std 0 and is
 *   still a token. ABSMAX is over finite values only.
 * - FROB = sqrt(sum of all finite x^2). TOK_*_MEAN / TOK_*_STD are the mean
 *   and the population standard deviation (divide by rows) over tokens.
 * - ABSMAX_COL is the column of the first element (row-major order) holding
 *   ABSMAX; NaN when there is no finite element (so an all-zero tensor
 *   gives ABSMAX 0 at column 0).
 * - rows == 0: ROWS 0, COLS cols, FROB 0, counts 0, ABSMAX 0, ABSMAX_COL and
 *   every TOK_* field NaN (undefined), sketch all zeros.
 *
 * How: each row is read once, in column chunks that stay in L1 while the
 * statistics loop and the sketch loop both walk them. The statistics loop
 * keeps LANES independent double accumulators so that gcc -O2 can turn it
 * into SIMD code without reassociating anything itself. The common case
 * trusts the data to be finite and in range; a row whose sums come out
 * non-finite (NaN/Inf present, or f64 overflow), or an f64 row so tiny that
 * its squares lose precision, is read a second time by a careful scalar
 * loop that skips non-finite values and scales by a power of two. A row
 * that raises ABSMAX is re-read (from cache) to find the column. Per-row
 * results are combined with an overflow-free sum of squares (LAPACK dlassq
 * style) and, TOK_BLOCK tokens at a time, Chan et al.'s update of mean and
 * squared deviations (one division per block, not per token), so 1e200 or
 * 1e-310 f64 data give the right norms. Near DBL_MAX, where a sum or a
 * difference of per-token values overflows, those are taken one token at a
 * time from halves; a token norm beyond the double range makes FROB +Inf
 * and the norm's moments those of the RMS times sqrt(cols). No allocation, no state outside
 * the call: thread-safe.
 *
 * Paths: the one-read-per-row loop above (fast_row_portable) has vector
 * twins in lib/stats/stats_avx2.c (AVX2+FMA+F16C) and stats_avx512.c
 * (AVX-512F+DQ+BW; the kernels they share: simd_kernels.h; see
 * stats_impl.h), which sum f32/f16/bf16 rows in float lanes; both
 * also read up to 16 rows per call (rd_fast_rows_fn) and hand the rows
 * that need more back to the one-row kernel.
 * Only the fast row differs between paths; the rescans, the per-token
 * formulas and the combination over tokens are this file's for all of them.
 * The path is chosen once, on first use, from the CPU
 * (__builtin_cpu_supports); RESDIAG_FORCE_PORTABLE=1 in the environment
 * keeps the portable one, RESDIAG_DISABLE_AVX512=1 the best of the others
 * (AVX2 on an AVX-512 CPU, as on most laptops), and rd_stats_set_path()
 * switches (tests, bench).
 */
#include "stats/stats.h"
#include "stats/part.h"
#include "stats/stats_impl.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#define LANES 8    /* independent accumulators in the hot loop */
#define CHUNK 512  /* columns per chunk: 4 KiB of f64, stays in L1 */

/* f64 rows whose largest |x| is below this have squares near the denormal
 * range (2^-970 still leaves 52 bits above DBL_MIN), so they are rescanned
 * with scaling. Overflow needs no threshold: it shows up as Inf. */
#define TINY_F64 0x1p-485

/* ------------------------------------------------------------------------ */
/* Conversions and hashes                                                    */
/* ------------------------------------------------------------------------ */

static float bits_to_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float rd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) /* Inf, NaN (payload kept) */
        return bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in float */
    float f = (float)man * 0x1p-24f;
    return sign ? -f : f;
}

float rd_bf16_to_f32(uint16_t b)
{
    return bits_to_f32((uint32_t)b << 16);
}

/* splitmix64's finaliser: a bijection with good avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * RD_SIGN_M1;
    z = (z ^ (z >> 27)) * RD_SIGN_M2;
    return z ^ (z >> 31);
}

#define GOLDEN RD_SIGN_GOLDEN

double rd_row_sign(uint64_t seed, int64_t row)
{
    uint64_t h = mix64(seed ^ ((uint64_t)row * GOLDEN));
    return (h >> 63) ? -1.0 : 1.0;
}

/* rd_row_signs_fn of the paths without a vector one */
static void row_signs_portable(double *sg, uint64_t seed, int64_t row, int n)
{
    for (int q = 0; q < n; q++)
        sg[q] = rd_row_sign(seed, row + q);
}

void rd_fill_column_signs(float *tau /* (n) */, size_t n, uint64_t seed)
{
    /* A different stream than the row signs of the same seed, so that
     * sigma(i) and tau(j) are independent. */
    uint64_t base = mix64(seed ^ 0x636f6c756d6e73u /* "columns" */);
    for (size_t j = 0; j < n; j++)
        tau[j] = (mix64(base + (uint64_t)j * GOLDEN) >> 63) ? -1.0f : 1.0f;
}

/* ------------------------------------------------------------------------ */
/* Overflow-free sums of squares and moments over tokens                     */
/* ------------------------------------------------------------------------ */

/* The value scale^2 * sumsq, kept with scale = the largest |term| seen so
 * that nothing overflows or underflows (LAPACK dlassq). */
typedef struct ssq {
    double scale, sumsq;
    double inv; /* 1 / scale where that is exact enough, else 0 (divide) */
} ssq;

/* Once per token per statistic: multiplying by a kept reciprocal instead of
 * dividing saves most of the per-token cost (within rounding of x / scale). */
static inline __attribute__((always_inline)) void ssq_add(ssq *a, double x)
{
    x = fabs(x);
    if (x == 0.0)
        return;
    if (a->scale < x) {
        double r = a->scale / x;
        a->sumsq = 1.0 + a->sumsq * r * r;
        a->scale = x;
        a->inv = x > 0x1p-1000 && x < 0x1p1000 ? 1.0 / x : 0.0;
    } else {
        double r = a->inv != 0.0 ? x * a->inv : x / a->scale;
        a->sumsq += r * r;
    }
}

/* sqrt(value / n) */
static double ssq_rms(const ssq *a, double n)
{
    return a->scale == 0.0 ? 0.0 : a->scale * sqrt(a->sumsq / n);
}

/* Mean and population std over tokens by Welford's update. Its second
 * moment is a sum of non-negative terms delta^2 (n-1)/n, which go into an
 * ssq so that per-token norms of 1e300 do not overflow it. */
typedef struct moments {
    double mean;
    ssq m2;
} moments;

static void ssq_merge(ssq *a, const ssq *b);

/* value += (x * f)^2 for f >= 0, also where x * f itself would overflow. */
static void ssq_add_prod(ssq *a, double x, double f)
{
    ssq b = { fabs(x), f * f, 0.0 };
    if (f != 0.0)
        ssq_merge(a, &b);
}

/* w = sqrt((n-1)/n) and inv_n = 1/n for the n-th token. Only for values
 * near DBL_MAX (see moments_add_block): v - mean may overflow there, so
 * that difference is taken of halves (exact this far above the denormals). */
static void moments_add(moments *m, double v, double inv_n, double w)
{
    double delta = v - m->mean;
    if (isfinite(delta)) {
        m->mean += delta * inv_n;
        ssq_add(&m->m2, delta * w);
        return;
    }
    double dh = 0.5 * v - 0.5 * m->mean;
    m->mean += dh * (2.0 * inv_n);
    ssq_add_prod(&m->m2, dh, 2.0 * w);
}

/* ------------------------------------------------------------------------ */
/* One row                                                                   */
/* ------------------------------------------------------------------------ */

typedef rd_row_sums row_sums;

/* Element j of a row that may start at any byte: a tensor's data pointer
 * need not be aligned to its dtype. memcpy compiles to the same single load
 * as a typed read, without assuming alignment. */
static inline float ld_f32(const void *row, int64_t j)
{
    float v;
    memcpy(&v, (const char *)row + (size_t)j * sizeof v, sizeof v);
    return v;
}

static inline double ld_f64(const void *row, int64_t j)
{
    double v;
    memcpy(&v, (const char *)row + (size_t)j * sizeof v, sizeof v);
    return v;
}

static inline uint16_t ld_u16(const void *row, int64_t j)
{
    uint16_t v;
    memcpy(&v, (const char *)row + (size_t)j * sizeof v, sizeof v);
    return v;
}

static double load(const void *row, resdiag_dtype dtype, int64_t j)
{
    switch (dtype) {
    case RESDIAG_DTYPE_F32: return ld_f32(row, j);
    case RESDIAG_DTYPE_F64: return ld_f64(row, j);
    case RESDIAG_DTYPE_F16: return rd_f16_to_f32(ld_u16(row, j));
    case RESDIAG_DTYPE_BF16: return rd_bf16_to_f32(ld_u16(row, j));
    }
    return 0.0;
}

typedef struct lanes {
    double sd[LANES], sd2[LANES], sq[LANES], amax[LANES];
} lanes;

/* The hot loops: plain loops of LANES independent accumulators over a
 * contiguous chunk, so the compiler can vectorise them as they are. The
 * f32 and f64 versions differ only in the element type. */
#define ACC_BODY(x, n, x0)                                                    \
    do {                                                                      \
        double sd[LANES], sd2[LANES], sq[LANES], am[LANES];                   \
        memcpy(sd, L->sd, sizeof sd);                                         \
        memcpy(sd2, L->sd2, sizeof sd2);                                      \
        memcpy(sq, L->sq, sizeof sq);                                         \
        memcpy(am, L->amax, sizeof am);                                       \
        int64_t j = 0;                                                        \
        for (; j + LANES <= (n); j += LANES) {                                \
            for (int l = 0; l < LANES; l++) {                                 \
                double v = (x)[j + l], d = v - (x0), a = fabs(v);             \
                sd[l] += d;                                                   \
                sd2[l] += d * d;                                              \
                sq[l] += v * v;                                               \
                am[l] = a > am[l] ? a : am[l];                                \
            }                                                                 \
        }                                                                     \
        for (int l = 0; j < (n); j++, l++) {                                  \
            double v = (x)[j], d = v - (x0), a = fabs(v);                     \
            sd[l] += d;                                                       \
            sd2[l] += d * d;                                                  \
            sq[l] += v * v;                                                   \
            am[l] = a > am[l] ? a : am[l];                                    \
        }                                                                     \
        memcpy(L->sd, sd, sizeof sd);                                         \
        memcpy(L->sd2, sd2, sizeof sd2);                                      \
        memcpy(L->sq, sq, sizeof sq);                                         \
        memcpy(L->amax, am, sizeof am);                                       \
    } while (0)

static void acc_f32(lanes *L, const float *x /* (n) */, int64_t n, double x0)
{
    ACC_BODY(x, n, x0);
}

static void acc_f64(lanes *L, const double *x /* (n) */, int64_t n, double x0)
{
    ACC_BODY(x, n, x0);
}

/* Adds tau(j mod tau_len) * x[j] into rb[j mod K] for the columns
 * j0 .. j0+n-1. Walks segments over which both j mod K and j mod tau_len
 * run contiguously; tau * x is exact (tau is +-1). */
#define SKETCH_BODY(x, n, j0)                                                 \
    do {                                                                      \
        size_t K = (size_t)sp->k, tl = sp->tau_len;                           \
        size_t m = (size_t)(j0) % K, t = (size_t)(j0) % tl;                   \
        int64_t j = 0;                                                        \
        while (j < (n)) {                                                     \
            size_t len = K - m;                                               \
            if (tl - t < len)                                                 \
                len = tl - t;                                                 \
            if ((size_t)((n) - j) < len)                                      \
                len = (size_t)((n) - j);                                      \
            double *r = rb + m;                                               \
            const float *tau = sp->tau + t;                                   \
            size_t u = 0;                                                     \
            for (; u + LANES <= len; u += LANES)                              \
                for (int l = 0; l < LANES; l++)                               \
                    r[u + l] += (double)tau[u + l] * (x)[j + (int64_t)(u + l)]; \
            for (; u < len; u++)                                              \
                r[u] += (double)tau[u] * (x)[j + (int64_t)u];                 \
            j += (int64_t)len;                                                \
            m += len;                                                         \
            if (m == K)                                                       \
                m = 0;                                                        \
            t += len;                                                         \
            if (t == tl)                                                      \
                t = 0;                                                        \
        }                                                                     \
    } while (0)

static void sketch_f32(double *rb /* (K) */, const float *x /* (n) */, int64_t n,
                       int64_t j0, const rd_sketch_params *sp)
{
    SKETCH_BODY(x, n, j0);
}

static void sketch_f64(double *rb /* (K) */, const double *x /* (n) */, int64_t n,
                       int64_t j0, const rd_sketch_params *sp)
{
    SKETCH_BODY(x, n, j0);
}

/* Pairwise sum of the lanes, a fixed order. */
static double lane_sum(const double *a /* (LANES) */)
{
    double s[LANES];
    memcpy(s, a, sizeof s);
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            s[l] += s[l + w];
    return s[0];
}

static size_t dtype_size(resdiag_dtype dtype);

/* The common path: one read of the row, assuming finite values.
 * rb (K) receives the row's sketch buckets (unsigned by sigma). */
static int fast_row_portable(row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
                             int64_t cols, const rd_sketch_params *sp, double amax_floor,
                             double *acc, double sigma)
{
    (void)amax_floor; /* the exact max costs nothing extra here */
    (void)acc;        /* the buckets always go to rb */
    (void)sigma;
    lanes L;
    memset(&L, 0, sizeof L);
    const int sk = sp != NULL && sp->k > 0;
    double x0 = load(row, dtype, 0);

    for (int64_t j0 = 0; j0 < cols; j0 += CHUNK) {
        int64_t n = cols - j0 < CHUNK ? cols - j0 : CHUNK;
        const char *at = (const char *)row + (size_t)j0 * dtype_size(dtype);
        /* The loops below read typed elements: a chunk of a misaligned
         * tensor is copied first (from L1; aligned rows are read in place). */
        const int misaligned = ((uintptr_t)at & (dtype_size(dtype) - 1)) != 0;
        if (dtype == RESDIAG_DTYPE_F64) {
            double dbuf[CHUNK];
            if (misaligned)
                memcpy(dbuf, at, (size_t)n * sizeof *dbuf);
            const double *x = misaligned ? dbuf : (const double *)(const void *)at; /* (n) */
            acc_f64(&L, x, n, x0);
            if (sk)
                sketch_f64(rb, x, n, j0, sp);
            continue;
        }
        const float *x;                       /* (n) */
        float buf[CHUNK];
        if (dtype == RESDIAG_DTYPE_F32) {
            if (misaligned)
                memcpy(buf, at, (size_t)n * sizeof *buf);
            x = misaligned ? buf : (const float *)(const void *)at;
        } else {
            if (dtype == RESDIAG_DTYPE_F16)
                for (int64_t u = 0; u < n; u++)
                    buf[u] = rd_f16_to_f32(ld_u16(at, u));
            else
                for (int64_t u = 0; u < n; u++)
                    buf[u] = rd_bf16_to_f32(ld_u16(at, u));
            x = buf;
        }
        acc_f32(&L, x, n, x0);
        if (sk)
            sketch_f32(rb, x, n, j0, sp);
    }

    double am = L.amax[0];
    for (int l = 1; l < LANES; l++)
        am = L.amax[l] > am ? L.amax[l] : am;
    rs->e = 0;
    rs->y0 = x0;
    rs->sd = lane_sum(L.sd);
    rs->sd2 = lane_sum(L.sd2);
    rs->sq = lane_sum(L.sq);
    rs->amax = am;
    rs->amax_col = -1;
    rs->nan = rs->inf = 0;
    return 1;
}

/* Whether fast_row's result can be used as it is. */
static int fast_row_ok(const row_sums *rs, resdiag_dtype dtype)
{
    if (!isfinite(rs->sq) || !isfinite(rs->sd2))
        return 0; /* NaN/Inf in the row, or f64 overflow */
    if (dtype == RESDIAG_DTYPE_F64 && rs->amax > 0.0 && rs->amax < TINY_F64)
        return 0; /* f64 squares too close to underflow */
    return 1;
}

/* The rare path: skips and counts non-finite values (they become 0) and
 * scales by 2^e, e the exponent of the largest finite |x|, so that no
 * square overflows or underflows. Two scalar reads of the row. */
static void careful_row(row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
                        int64_t cols, const rd_sketch_params *sp)
{
    int64_t nan = 0, inf = 0, col = -1;
    double amax = -1.0;
    for (int64_t j = 0; j < cols; j++) {
        double v = load(row, dtype, j);
        if (isnan(v)) {
            nan++;
        } else if (isinf(v)) {
            inf++;
        } else if (fabs(v) > amax) {
            amax = fabs(v);
            col = j;
        }
    }
    int e = 0;
    if (amax > 0.0)
        (void)frexp(amax, &e); /* amax = f * 2^e, 0.5 <= f < 1 */

    const int sk = sp != NULL && sp->k > 0;
    if (sk)
        memset(rb, 0, (size_t)sp->k * sizeof *rb);
    double y0 = 0.0, sd = 0.0, sd2 = 0.0, sq = 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double v = load(row, dtype, j);
        if (!isfinite(v))
            v = 0.0;
        double y = ldexp(v, -e); /* exact unless far below amax */
        if (j == 0)
            y0 = y;
        double d = y - y0;
        sd += d;
        sd2 += d * d;
        sq += y * y;
        if (sk)
            rb[(size_t)j % (size_t)sp->k] += (double)sp->tau[(size_t)j % sp->tau_len] * v;
    }
    rs->e = e;
    rs->y0 = y0;
    rs->sd = sd;
    rs->sd2 = sd2;
    rs->sq = sq;
    rs->amax = amax;
    rs->amax_col = col;
    rs->nan = nan;
    rs->inf = inf;
}

/* The bits of |x| as an f16 or bf16 for a = |x| >= 0, a finite value of
 * that dtype (so exact): a float's bits shifted by the difference of the
 * exponent biases and mantissa widths, f16 subnormals (a < 2^-14) as
 * a * 2^24, an integer. */
static uint16_t half_magnitude(double a, resdiag_dtype dtype)
{
    const float f = (float)a; /* exact: a is a value of the dtype */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if (dtype == RESDIAG_DTYPE_BF16)
        return (uint16_t)(b >> 16);
    if (f < 0x1p-14f)
        return (uint16_t)(f * 0x1p24f);
    return (uint16_t)((((b >> 23) - 112u) << 10) | ((b >> 13) & 0x3ffu));
}

/* First column of a row holding |x| == a (the row is finite here). */
static inline uint32_t ld_u32(const void *row, int64_t j)
{
    uint32_t v;
    memcpy(&v, (const char *)row + (size_t)j * sizeof v, sizeof v);
    return v;
}

static inline uint64_t ld_u64(const void *row, int64_t j)
{
    uint64_t v;
    memcpy(&v, (const char *)row + (size_t)j * sizeof v, sizeof v);
    return v;
}

/* From column j on, the first whose raw bits without the sign bit (the
 * magnitude) are m: chunks of FIRST_CHUNK columns with no exit inside
 * (the compiler vectorises those), then the chunk that holds it column by
 * column. */
#define FIRST_CHUNK 32
#define FIRST_MATCH(LD, mask, m)                                              \
    do {                                                                      \
        for (; j + FIRST_CHUNK <= cols; j += FIRST_CHUNK) {                   \
            int hit = 0;                                                      \
            for (int u = 0; u < FIRST_CHUNK; u++)                             \
                hit |= (LD(row, j + u) & (mask)) == (m);                      \
            if (hit)                                                          \
                break;                                                        \
        }                                                                     \
        while (j < cols && (LD(row, j) & (mask)) != (m))                      \
            j++;                                                              \
    } while (0)

static int64_t first_col(const void *row, resdiag_dtype dtype, int64_t cols, double a)
{
    /* a is |x| of a finite element of the row, so its bits as the dtype
     * are exact and the row's magnitudes are compared as integers, which
     * also finds +-0 for a = 0 (a call to load() per element made this
     * scan cost as much as the row's statistics in small tensors) */
    int64_t j = 0;
    switch (dtype) {
    case RESDIAG_DTYPE_F32: {
        const float f = (float)a;
        uint32_t m;
        memcpy(&m, &f, sizeof m);
        FIRST_MATCH(ld_u32, 0x7fffffffu, m);
        break;
    }
    case RESDIAG_DTYPE_F64: {
        uint64_t m;
        memcpy(&m, &a, sizeof m);
        FIRST_MATCH(ld_u64, 0x7fffffffffffffffu, m);
        break;
    }
    default: { /* f16, bf16 */
        const uint16_t m = half_magnitude(a, dtype);
        FIRST_MATCH(ld_u16, 0x7fffu, m);
        break;
    }
    }
    return j < cols ? j : 0; /* j == cols not reached: a came from this row */
}
#undef FIRST_MATCH

static size_t dtype_size(resdiag_dtype dtype)
{
    switch (dtype) {
    case RESDIAG_DTYPE_F32: return 4;
    case RESDIAG_DTYPE_F64: return 8;
    case RESDIAG_DTYPE_F16:
    case RESDIAG_DTYPE_BF16: return 2;
    }
    return 4;
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */
/* ------------------------------------------------------------------------ */

static const rd_fast_row_fn path_kernel[RD_STATS_N_PATHS] = {
    fast_row_portable,
#ifdef RD_HAVE_AVX2
    rd_fast_row_avx2,
#else
    NULL,
#endif
#ifdef RD_HAVE_AVX512
    rd_fast_row_avx512,
#else
    NULL,
#endif
};

/* Several rows at once, where a path has it (NULL: row by row). */
static const rd_fast_rows_fn path_rows_kernel[RD_STATS_N_PATHS] = {
    NULL,
#ifdef RD_HAVE_AVX2
    rd_fast_rows_avx2,
#else
    NULL,
#endif
#ifdef RD_HAVE_AVX512
    rd_fast_rows_avx512,
#else
    NULL,
#endif
};

/* The row signs of a 16-row call (rd_row_signs_fn). */
static const rd_row_signs_fn path_row_signs[RD_STATS_N_PATHS] = {
    row_signs_portable,
#ifdef RD_HAVE_AVX2
    rd_row_signs_avx2,
#else
    row_signs_portable,
#endif
#ifdef RD_HAVE_AVX512
    rd_row_signs_avx512,
#else
    row_signs_portable,
#endif
};

/* The sums of a block of tokens' values (rd_block_sums_fn). */
static void block_sums_portable(rd_block_sums *o, const double *v, int n);
static const rd_block_sums_fn path_block_sums[RD_STATS_N_PATHS] = {
    block_sums_portable,
#ifdef RD_HAVE_AVX2
    rd_block_sums_avx2,
#else
    block_sums_portable,
#endif
#ifdef RD_HAVE_AVX512
    rd_block_sums_avx512,
#else
    block_sums_portable,
#endif
};

static int cpu_has_path(rd_stats_path path)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    /* libgcc's check includes the OS's support for the register state. */
    __builtin_cpu_init();
#if defined(__clang__)
    /* clang's __builtin_cpu_supports knows no "f16c": CPUID leaf 1, ECX bit 29 */
    unsigned ax, bx, cx = 0, dx;
    int f16c = __get_cpuid(1, &ax, &bx, &cx, &dx) && (cx >> 29 & 1u);
#else
    int f16c = __builtin_cpu_supports("f16c");
#endif
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    switch (path) {
    case RD_STATS_PORTABLE: return 1;
    case RD_STATS_AVX2: return avx2;
    case RD_STATS_AVX512:
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw");
    default: return 0;
    }
#else
    return path == RD_STATS_PORTABLE;
#endif
}

int rd_stats_path_available(rd_stats_path path)
{
    if ((unsigned)path >= RD_STATS_N_PATHS || !path_kernel[path])
        return 0;
    return cpu_has_path(path);
}

rd_fast_rows_fn rd_stats_rows_kernel(rd_stats_path path)
{
    return rd_stats_path_available(path) ? path_rows_kernel[path] : NULL;
}

rd_block_sums_fn rd_stats_block_sums(rd_stats_path path)
{
    return rd_stats_path_available(path) ? path_block_sums[path] : block_sums_portable;
}

rd_row_signs_fn rd_stats_row_signs(rd_stats_path path)
{
    return rd_stats_path_available(path) ? path_row_signs[path] : row_signs_portable;
}

const char *rd_stats_path_name(rd_stats_path path)
{
    static const char *const names[RD_STATS_N_PATHS] = { "portable", "avx2", "avx512" };
    return (unsigned)path < RD_STATS_N_PATHS ? names[path] : "?";
}

/* The chosen path + 1; 0 = not chosen yet. Choosing is idempotent, so two
 * threads that race on the first call store the same value. */
static atomic_int chosen_path;

/* an environment switch is on: set, and not "" or "0" */
static int switch_on(const char *value)
{
    return value && value[0] && strcmp(value, "0") != 0;
}

rd_stats_path rd_stats_pick_path(const char *force_portable, const char *disable_avx512)
{
    if (switch_on(force_portable))
        return RD_STATS_PORTABLE;
    for (int p = RD_STATS_N_PATHS - 1; p > 0; p--)
        if (rd_stats_path_available((rd_stats_path)p) &&
            !(p == RD_STATS_AVX512 && switch_on(disable_avx512)))
            return (rd_stats_path)p;
    return RD_STATS_PORTABLE;
}

rd_stats_path rd_stats_active_path(void)
{
    int c = atomic_load_explicit(&chosen_path, memory_order_relaxed);
    if (c == 0) {
        c = (int)rd_stats_pick_path(getenv("RESDIAG_FORCE_PORTABLE"),
                                    getenv("RESDIAG_DISABLE_AVX512")) + 1;
        atomic_store_explicit(&chosen_path, c, memory_order_relaxed);
    }
    return (rd_stats_path)(c - 1);
}

int rd_stats_set_path(rd_stats_path path)
{
    if (!rd_stats_path_available(path))
        return -1;
    atomic_store_explicit(&chosen_path, (int)path + 1, memory_order_relaxed);
    return 0;
}

void rd_stats_set_bf16_dot(int on)
{
#ifdef RD_HAVE_AVX512
    rd_set_bf16_dot_avx512(on);
#else
    (void)on;
#endif
}

int rd_stats_bf16_dot(void)
{
#ifdef RD_HAVE_AVX512
    return rd_bf16_dot_avx512();
#else
    return 0;
#endif
}

static void compute(rd_stats_path path, double *fields, double *sketch, double *row_norms,
                    const resdiag_tensor *t, const rd_sketch_params *sp);

void rd_stats_compute(double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp)
{
    compute(rd_stats_active_path(), fields, sketch, row_norms, t, sp);
}

void rd_stats_compute_path(rd_stats_path path, double *fields, double *sketch,
                           double *row_norms, const resdiag_tensor *t,
                           const rd_sketch_params *sp)
{
    if (!rd_stats_path_available(path))
        path = RD_STATS_PORTABLE;
    compute(path, fields, sketch, row_norms, t, sp);
}

/* ------------------------------------------------------------------------ */
/* The tensor                                                                */
/* ------------------------------------------------------------------------ */

/* What a run of consecutive tokens contributes; two combine exactly like
 * one run over both (within rounding). */
typedef struct partial {
    double n;                        /* tokens */
    ssq frob;
    moments norm, mean, rms, sdev;
    double norm_min, norm_max;
    double amax, amax_col;           /* -1, NaN: no finite value yet */
    int64_t nan, inf;
    double sketch[RESDIAG_MAX_SKETCH]; /* (K) */
} partial;

/* a = a and b: two sums of squares. */
static void ssq_merge(ssq *a, const ssq *b)
{
    if (b->scale == 0.0)
        return;
    if (a->scale < b->scale) {
        double r = a->scale / b->scale;
        a->sumsq = b->sumsq + a->sumsq * r * r;
        a->scale = b->scale;
        a->inv = b->inv;
    } else {
        double r = b->scale / a->scale;
        a->sumsq += b->sumsq * r * r;
    }
}

/* Chan et al.'s pairwise update: M2 = M2a + M2b + delta^2 na nb / n. */
static void moments_merge(moments *a, const moments *b, double na, double nb)
{
    double n = na + nb, delta = b->mean - a->mean, f = sqrt(na * nb / n);
    if (isfinite(delta * f)) {
        a->mean += delta * (nb / n);
        ssq_merge(&a->m2, &b->m2);
        ssq_add(&a->m2, delta * f);
        return;
    }
    /* means near DBL_MAX of both signs: the same from halves */
    double dh = 0.5 * b->mean - 0.5 * a->mean;
    a->mean = a->mean * (na / n) + b->mean * (nb / n);
    ssq_merge(&a->m2, &b->m2);
    ssq_add_prod(&a->m2, dh, 2.0 * f);
}

/* Tokens per block: per-token values are combined into the partial a
 * block at a time (Chan et al.'s update), which costs one division and a
 * few square roots per block instead of per token. 16 tokens per block
 * spent ~10 % of a 768-column f32 tensor's time in these merges (perf);
 * 64 spend a quarter of that. */
#define TOK_BLOCK 64

/* Four independent chains for the loops over a block's tokens: with one
 * chain of 64 dependent adds (4 cycles each) the merges took ~14 % of a
 * 768-column f32 tensor's time from L2 (perf), with four ~10 %. Each loop
 * does all it can in one pass (the sum and the extremes; the squares and
 * the largest value): the chains of two quantities interleave, and the
 * deviations from the mean are not stored and read back. */

/* sum_k (x[k] - x0), and the smallest and largest x[k] into *lo, *hi */
static double sum_range4(const double *x /* (n) */, int n, double x0, double *lo, double *hi)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0; /* scalars: kept in registers */
    double l0 = x[0], l1 = x[0], h0 = x[0], h1 = x[0];
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += x[k] - x0;
        s1 += x[k + 1] - x0;
        s2 += x[k + 2] - x0;
        s3 += x[k + 3] - x0;
        l0 = x[k] < l0 ? x[k] : l0;
        l1 = x[k + 1] < l1 ? x[k + 1] : l1;
        l0 = x[k + 2] < l0 ? x[k + 2] : l0;
        l1 = x[k + 3] < l1 ? x[k + 3] : l1;
        h0 = x[k] > h0 ? x[k] : h0;
        h1 = x[k + 1] > h1 ? x[k + 1] : h1;
        h0 = x[k + 2] > h0 ? x[k + 2] : h0;
        h1 = x[k + 3] > h1 ? x[k + 3] : h1;
    }
    for (; k < n; k++) {
        s0 += x[k] - x0;
        l0 = x[k] < l0 ? x[k] : l0;
        h0 = x[k] > h0 ? x[k] : h0;
    }
    *lo = l1 < l0 ? l1 : l0;
    *hi = h1 > h0 ? h1 : h0;
    return (s0 + s1) + (s2 + s3);
}

/* sum_k (x[k] - c)^2 */
static double sumsq_about4(const double *x /* (n) */, int n, double c)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        double d0 = x[k] - c, d1 = x[k + 1] - c, d2 = x[k + 2] - c, d3 = x[k + 3] - c;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; k < n; k++) {
        double d = x[k] - c;
        s0 += d * d;
    }
    return (s0 + s1) + (s2 + s3);
}

/* sum_k x[k]^2, and the largest |x[k]| into *mx */
#define MAX_ABS(m, v) ((m) = fabs(v) > (m) ? fabs(v) : (m))
static double sumsq_max4(const double *x /* (n) */, int n, double *mx)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    double m0 = 0.0, m1 = 0.0;
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += x[k] * x[k];
        s1 += x[k + 1] * x[k + 1];
        s2 += x[k + 2] * x[k + 2];
        s3 += x[k + 3] * x[k + 3];
        MAX_ABS(m0, x[k]);
        MAX_ABS(m1, x[k + 1]);
        MAX_ABS(m0, x[k + 2]);
        MAX_ABS(m1, x[k + 3]);
    }
    for (; k < n; k++) {
        s0 += x[k] * x[k];
        MAX_ABS(m0, x[k]);
    }
    *mx = m1 > m0 ? m1 : m0;
    return (s0 + s1) + (s2 + s3);
}
#undef MAX_ABS

/* The block sums (rd_block_sums_fn) of the paths without vector ones:
 * each value's tokens gathered, then the one-value loops above. */
static void block_sums_portable(rd_block_sums *o, const double *v /* (4 n) */, int n)
{
    double x[TOK_BLOCK];
    for (int q = 0; q < 4; q++) {
        for (int k = 0; k < n; k++)
            x[k] = v[4 * k + q];
        o->s[q] = sum_range4(x, n, x[0], &o->lo[q], &o->hi[q]);
        o->sq[q] = sumsq_max4(x, n, &o->amax[q]);
        double mean = x[0] + o->s[q] / n;
        o->dev[q] = sumsq_about4(x, n, isfinite(mean) ? mean : 0.0);
    }
}

/* value += sum_k (v_k - c)^2 for the n values v_k = v[4 k + q], where mx
 * is the largest |v_k - c| (+Inf or NaN if one is not finite) and sumsq
 * their plain sum of squares: that sum when no square can overflow or
 * lose precision to underflow, else one ssq_add each. Returns 0, adding
 * nothing, when a v_k - c is not finite. */
static int ssq_add_about(ssq *a, const double *v /* (4 n) */, int q, int n, double c, double mx,
                         double sumsq)
{
    if (mx == 0.0)
        return 1;
    if (mx > 0x1p-450 && mx < 0x1p450) {
        /* smaller squares that underflow are below 2^-1000 of the sum */
        ssq_add(a, sqrt(sumsq));
        return 1;
    }
    if (!(mx <= DBL_MAX))
        return 0;
    for (int k = 0; k < n; k++)
        ssq_add(a, v[4 * k + q] - c);
    return 1;
}

/* m (n0 tokens so far) followed by the n tokens' value q (v[4 k + q],
 * bs their block sums): the block's mean and sum of squared deviations,
 * merged by Chan et al.'s pairwise update. */
static void moments_add_block(moments *m, const rd_block_sums *bs, const double *v /* (4 n) */,
                              int q, int n, double n0)
{
    /* about the first value: equal tokens give exactly that value and a
     * spread of exactly 0 whatever n is */
    double lo = bs->lo[q], hi = bs->hi[q];
    double mean = v[q] + bs->s[q] / n;
    if (isfinite(mean)) {
        /* the largest |v_k - mean|: rounding is monotonic, so it is that
         * of the extremes (NaN or Inf where a difference overflows) */
        double up = hi - mean, down = mean - lo;
        double mx = isnan(up) || isnan(down) ? NAN : up > down ? up : down;
        moments b = { mean, { 0.0, 0.0, 0.0 } };
        if (ssq_add_about(&b.m2, v, q, n, mean, mx, bs->dev[q])) {
            if (n0 == 0.0)
                *m = b;
            else
                moments_merge(m, &b, n0, (double)n);
            return;
        }
    }
    /* values near DBL_MAX (their sum or a difference overflows): one token
     * at a time */
    for (int k = 0; k < n; k++) {
        double nk = n0 + k + 1, inv = 1.0 / nk;
        moments_add(m, v[4 * k + q], inv, sqrt((nk - 1.0) * inv));
    }
}

/* A rescanned row's per-token values, computed on x * 2^-e, scaled back.
 * |mean|, std <= rms <= the largest |x| (amax): a row of DBL_MAX must not
 * round its rms up to Inf (its norm may well be Inf: beyond the double
 * range). Out of line: the hot loop that calls it stays small. */
static __attribute__((noinline)) void unscale_token(double *norm, double *mean, double *rms,
                                                    double *std, int e, double amax)
{
    double r = ldexp(*rms, e), s = ldexp(*std, e), m = ldexp(*mean, e);
    r = r < amax ? r : amax;
    *norm = ldexp(*norm, e);
    *rms = r;
    *std = s < r ? s : r;
    *mean = fabs(m) <= r ? m : copysign(r, m);
}

/* The nr rows from row (block row k) that fast_rows did all of (ro): their
 * per-token values into the block's tv (4 a token: norm, mean, rms, std)
 * and row_norms, and the extremes and ABSMAX into *p, as compute_rows'
 * loop does row by row. */
static void take_rows(partial *p, const rd_rows_out *ro, int nr, int k, double *tv,
                      double *row_norms /* (nr) or NULL */, const void *row, size_t row_bytes,
                      resdiag_dtype dtype, int64_t cols)
{
    double *t = tv + 4 * k;
    for (int q = 0; q < nr; q++) {
        t[4 * q] = ro->norm[q];
        t[4 * q + 1] = ro->mean[q];
        t[4 * q + 2] = ro->rms[q];
        t[4 * q + 3] = ro->std[q];
    }
    if (row_norms)
        memcpy(row_norms, ro->norm, (size_t)nr * sizeof *ro->norm);
    double lo = p->norm_min, hi = p->norm_max;
    for (int q = 0; q < nr; q++) {
        lo = ro->norm[q] < lo ? ro->norm[q] : lo;
        hi = ro->norm[q] > hi ? ro->norm[q] : hi;
    }
    p->norm_min = lo;
    p->norm_max = hi;
    if (ro->amax_row >= 0 && ro->amax > p->amax) {
        p->amax = ro->amax;
        p->amax_col = (double)first_col((const char *)row + (size_t)ro->amax_row * row_bytes,
                                        dtype, cols, ro->amax);
    }
}

/* Rows [r0, r1) of t into *p (which starts empty). */
static void compute_rows(partial *p, rd_stats_path path, double *row_norms,
                         const resdiag_tensor *t, const rd_sketch_params *sp, int64_t r0,
                         int64_t r1)
{
    const rd_fast_row_fn fast_row = path_kernel[path];
    const rd_row_signs_fn row_signs = path_row_signs[path];
    const rd_block_sums_fn block_sums = path_block_sums[path];
    rd_fast_rows_fn fast_rows = path_rows_kernel[path];
    const size_t row_bytes = (size_t)(t->row_stride ? t->row_stride : t->cols) *
                             dtype_size(t->dtype);
    const int64_t cols = t->cols;
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    const double dcols = (double)cols, inv_cols = 1.0 / dcols;
    const double rsqrt_cols = 1.0 / sqrt(dcols);
    double rb[RESDIAG_MAX_SKETCH]; /* (K) one row's buckets */
    /* the block's per-token norm, mean, rms, std, token by token */
    double tv[4 * TOK_BLOCK];

    memset(p, 0, sizeof *p);
    p->norm_min = INFINITY;
    p->norm_max = -INFINITY;
    p->amax = -1.0; /* below every |x| */
    p->amax_col = NAN;
    memset(rb, 0, sizeof rb);

    for (int64_t b0 = r0; b0 < r1; b0 += TOK_BLOCK) {
        const int nb = r1 - b0 < TOK_BLOCK ? (int)(r1 - b0) : TOK_BLOCK;
        /* Up to RD_ROWS_MAX rows at a time through fast_rows where the
         * path has one for this tensor; the rows it hands back, and every
         * row without it, one at a time through fast_row. */
        rd_rows_out ro;
        double sg[RD_ROWS_MAX]; /* the rows' signs */
        int nr = 0;             /* rows of ro, from row b0 + k0 on */
        int k0 = 0;
        for (int k = 0; k < nb; k++) {
            const int64_t i = b0 + k;
            const void *row = (const char *)t->data + (size_t)i * row_bytes;
            row_sums rs; /* rb is all zeros here (see below) */
            if (fast_rows && k >= k0 + nr) {
                k0 = k;
                nr = nb - k < RD_ROWS_MAX ? nb - k : RD_ROWS_MAX;
                if (K)
                    row_signs(sg, sp->seed, sp->row0 + i, nr);
                else
                    memset(sg, 0, (size_t)nr * sizeof *sg);
                if (!fast_rows(&ro, K ? p->sketch : NULL, sg, row, row_bytes, nr, t->dtype,
                               cols, sp, p->amax)) {
                    fast_rows = NULL; /* it depends on the shape only: not for this tensor */
                    nr = 0;
                } else if (ro.redo == 0) { /* the common case: every row done */
                    take_rows(p, &ro, nr, k, tv, row_norms ? row_norms + i : NULL, row,
                              row_bytes, t->dtype, cols);
                    k += nr - 1;
                    continue;
                }
            }
            double sigma;
            int got;
            const int q = k - k0;
            if (q < nr && !(ro.redo >> q & 1u)) { /* the block's sums; sketch added */
                rs.e = 0;
                rs.y0 = 0.0;
                rs.sd = ro.sx[q];
                rs.sd2 = rs.sq = ro.sq[q];
                rs.amax = q == ro.amax_row ? ro.amax : -1.0;
                rs.amax_col = -1;
                sigma = sg[q];
                got = 2;
            } else {
                sigma = q < nr ? sg[q] : K ? rd_row_sign(sp->seed, sp->row0 + i) : 0.0;
                got = fast_row(&rs, rb, row, t->dtype, cols, sp, p->amax,
                               K ? p->sketch : NULL, sigma);
                if (!got)
                    got = fast_row_portable(&rs, rb, row, t->dtype, cols, sp, p->amax, NULL,
                                            0.0);
            }
            /* got == 2 (sketch added already) only for finite sums */
            if (!fast_row_ok(&rs, t->dtype)) {
                careful_row(&rs, rb, row, t->dtype, cols, sp);
                got = 1;
                /* only rescanned rows count any; reading the fast row's
                 * zeros back would stall on store forwarding every row */
                p->nan += rs.nan;
                p->inf += rs.inf;
            }

            /* Per-token values; the scaling by 2^e is exact. */
            double mu = rs.sd * inv_cols; /* mean of (y - y0) */
            double var = rs.sd2 * inv_cols - mu * mu;
            double tok_norm = sqrt(rs.sq);
            double tok_mean = rs.y0 + mu;
            double tok_rms = tok_norm * rsqrt_cols;
            double tok_std = sqrt(var > 0.0 ? var : 0.0);
            if (rs.e != 0) /* rescanned rows only; libm calls cost on every row */
                unscale_token(&tok_norm, &tok_mean, &tok_rms, &tok_std, rs.e, rs.amax);
            tv[4 * k] = tok_norm;
            tv[4 * k + 1] = tok_mean;
            tv[4 * k + 2] = tok_rms;
            tv[4 * k + 3] = tok_std;
            p->norm_min = tok_norm < p->norm_min ? tok_norm : p->norm_min;
            p->norm_max = tok_norm > p->norm_max ? tok_norm : p->norm_max;
            if (row_norms)
                row_norms[i] = tok_norm;

            if (rs.amax > p->amax) { /* strictly: the first on ties wins */
                p->amax = rs.amax;
                p->amax_col = (double)(rs.amax_col >= 0
                                           ? rs.amax_col
                                           : first_col(row, t->dtype, cols, rs.amax));
            }

            /* Zeroing rb as it is used keeps it zero for the next row
             * without a memset per row (rep stos: ~15% of a 768-column
             * f32 row); got == 2 left it untouched. */
            if (got == 1)
                for (size_t m = 0; m < K; m++) {
                    p->sketch[m] += sigma * rb[m];
                    rb[m] = 0.0;
                }
        }
        const double n0 = (double)(b0 - r0);
        rd_block_sums bs;
        block_sums(&bs, tv, nb);
        moments_add_block(&p->norm, &bs, tv, 0, nb, n0);
        moments_add_block(&p->mean, &bs, tv, 1, nb, n0);
        moments_add_block(&p->rms, &bs, tv, 2, nb, n0);
        moments_add_block(&p->sdev, &bs, tv, 3, nb, n0);
        /* FROB: sum of the norms' squares */
        ssq_add_about(&p->frob, tv, 0, nb, 0.0, bs.amax[0], bs.sq[0]);
    }
    p->n = (double)(r1 - r0);
}

/* a = a followed by b (b's rows come after a's). */
static void partial_merge(partial *a, const partial *b, size_t K)
{
    if (b->n == 0.0)
        return;
    if (a->n == 0.0) {
        *a = *b;
        return;
    }
    ssq_merge(&a->frob, &b->frob);
    moments_merge(&a->norm, &b->norm, a->n, b->n);
    moments_merge(&a->mean, &b->mean, a->n, b->n);
    moments_merge(&a->rms, &b->rms, a->n, b->n);
    moments_merge(&a->sdev, &b->sdev, a->n, b->n);
    a->norm_min = b->norm_min < a->norm_min ? b->norm_min : a->norm_min;
    a->norm_max = b->norm_max > a->norm_max ? b->norm_max : a->norm_max;
    if (b->amax > a->amax) { /* a's rows come first: a wins ties */
        a->amax = b->amax;
        a->amax_col = b->amax_col;
    }
    a->nan += b->nan;
    a->inf += b->inf;
    for (size_t m = 0; m < K; m++)
        a->sketch[m] += b->sketch[m];
    a->n += b->n;
}

/* The fields (and sketch) of the partial p of a whole tensor. */
static void partial_fields(const partial *p_, int64_t rows, int64_t cols, size_t K,
                           double *fields, double *sketch)
{
    const partial p = *p_;
    for (size_t m = 0; m < K; m++)
        sketch[m] = p.sketch[m];
    fields[RESDIAG_FIELD_ROWS] = (double)rows;
    fields[RESDIAG_FIELD_COLS] = (double)cols;
    fields[RESDIAG_FIELD_FROB] = p.frob.scale * sqrt(p.frob.sumsq);
    fields[RESDIAG_FIELD_ABSMAX] = p.amax < 0.0 ? 0.0 : p.amax;
    fields[RESDIAG_FIELD_ABSMAX_COL] = p.amax_col;
    fields[RESDIAG_FIELD_NAN_COUNT] = (double)p.nan;
    fields[RESDIAG_FIELD_INF_COUNT] = (double)p.inf;

    const double r = (double)rows;
    const int any = rows > 0;
    fields[RESDIAG_FIELD_TOK_NORM_MEAN] = any ? p.norm.mean : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_STD] = any ? ssq_rms(&p.norm.m2, r) : NAN;
    if (p.norm_max == INFINITY) {
        /* A token's norm beyond the double range (f64 values near DBL_MAX):
         * so is FROB, and the moments of the norms are those of the rms,
         * which stay in range, times sqrt(cols) (Inf only if they overflow). */
        const double sc = sqrt((double)cols);
        fields[RESDIAG_FIELD_FROB] = INFINITY;
        fields[RESDIAG_FIELD_TOK_NORM_MEAN] = p.rms.mean * sc;
        fields[RESDIAG_FIELD_TOK_NORM_STD] = ssq_rms(&p.rms.m2, r) * sc;
    }
    fields[RESDIAG_FIELD_TOK_NORM_MIN] = any ? p.norm_min : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_MAX] = any ? p.norm_max : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_MEAN] = any ? p.mean.mean : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_STD] = any ? ssq_rms(&p.mean.m2, r) : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_MEAN] = any ? p.rms.mean : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_STD] = any ? ssq_rms(&p.rms.m2, r) : NAN;
    fields[RESDIAG_FIELD_TOK_STD_MEAN] = any ? p.sdev.mean : NAN;
    fields[RESDIAG_FIELD_TOK_STD_STD] = any ? ssq_rms(&p.sdev.m2, r) : NAN;
}

/* The partial that the fields (and sketch) of a whole tensor stand for,
 * within rounding: the moments' sums of squared deviations are n * std^2,
 * kept as an ssq of scale std so that nothing overflows. */
static ssq ssq_of(double scale, double sumsq)
{
    ssq a = { 0.0, 0.0, 0.0 };
    if (scale > 0.0 && sumsq > 0.0) {
        a.scale = scale;
        a.sumsq = sumsq;
        a.inv = scale > 0x1p-1000 && scale < 0x1p1000 ? 1.0 / scale : 0.0;
    }
    return a;
}

static void moments_of(moments *m, const double *fields, int mean_field, int std_field,
                       double n)
{
    m->mean = fields[mean_field];
    m->m2 = ssq_of(fields[std_field], n);
}

static void fields_partial(partial *p, const double *fields, const double *sketch, size_t K)
{
    memset(p, 0, sizeof *p);
    const double n = fields[RESDIAG_FIELD_ROWS];
    p->n = n;
    p->frob = ssq_of(fields[RESDIAG_FIELD_FROB], 1.0);
    p->norm_min = n > 0 ? fields[RESDIAG_FIELD_TOK_NORM_MIN] : INFINITY;
    p->norm_max = n > 0 ? fields[RESDIAG_FIELD_TOK_NORM_MAX] : -INFINITY;
    if (n > 0) {
        moments_of(&p->norm, fields, RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_NORM_STD, n);
        moments_of(&p->mean, fields, RESDIAG_FIELD_TOK_MEAN_MEAN, RESDIAG_FIELD_TOK_MEAN_STD, n);
        moments_of(&p->rms, fields, RESDIAG_FIELD_TOK_RMS_MEAN, RESDIAG_FIELD_TOK_RMS_STD, n);
        moments_of(&p->sdev, fields, RESDIAG_FIELD_TOK_STD_MEAN, RESDIAG_FIELD_TOK_STD_STD, n);
    }
    /* ABSMAX_COL NaN: no finite element */
    p->amax = isnan(fields[RESDIAG_FIELD_ABSMAX_COL]) ? -1.0 : fields[RESDIAG_FIELD_ABSMAX];
    p->amax_col = fields[RESDIAG_FIELD_ABSMAX_COL];
    p->nan = (int64_t)fields[RESDIAG_FIELD_NAN_COUNT];
    p->inf = (int64_t)fields[RESDIAG_FIELD_INF_COUNT];
    for (size_t m = 0; m < K; m++)
        p->sketch[m] = sketch[m];
}

void rd_stats_merge(double *fields, double *sketch, const double *more,
                    const double *more_sketch, int k)
{
    const size_t K = k > 0 ? (size_t)k : 0;
    partial a, b;
    fields_partial(&a, fields, sketch, K);
    fields_partial(&b, more, more_sketch, K);
    /* counts and sketches add for empty parts too (partial_merge skips them) */
    int64_t nan = a.nan + b.nan, inf = a.inf + b.inf;
    double amax = a.amax, amax_col = a.amax_col;
    if (b.amax > amax) {
        amax = b.amax;
        amax_col = b.amax_col;
    }
    partial_merge(&a, &b, K);
    a.nan = nan;
    a.inf = inf;
    a.amax = amax;
    a.amax_col = amax_col;
    const int64_t rows = (int64_t)fields[RESDIAG_FIELD_ROWS] + (int64_t)more[RESDIAG_FIELD_ROWS];
    double seq = fields[RESDIAG_FIELD_CALL_SEQ];
    partial_fields(&a, rows, (int64_t)fields[RESDIAG_FIELD_COLS], K, fields, sketch);
    fields[RESDIAG_FIELD_CALL_SEQ] = seq;
}

/* ------------------------------------------------------------------------ */
/* Parts of a tensor (part.h: lib/stats/split.c computes the parts of a    */
/* large tensor on several threads with them)                               */
/* ------------------------------------------------------------------------ */

_Static_assert(sizeof(partial) <= sizeof(rd_stats_part) &&
                   _Alignof(partial) <= _Alignof(rd_stats_part),
               "rd_stats_part must hold a partial");

size_t rd_stats_dtype_size(resdiag_dtype dtype)
{
    return dtype_size(dtype);
}

/* compute_rows on the path, for a tensor whose columns start at sp->col0
 * of a wider one (stats.h): the kernels see the signs from tau(col0 mod
 * tau_len) on, a plain offset into the doubled table, and put column j in
 * bucket j mod K; the buckets then turn by col0 mod K and ABSMAX_COL moves
 * by col0. So the kernels never know about shards. */
static void compute_rows_at(partial *p, rd_stats_path path, double *row_norms,
                            const resdiag_tensor *t, const rd_sketch_params *sp, int64_t r0,
                            int64_t r1)
{
    if (sp == NULL || sp->col0 <= 0) {
        compute_rows(p, path, row_norms, t, sp, r0, r1);
        return;
    }
    const size_t K = sp->k > 0 ? (size_t)sp->k : 0;
    rd_sketch_params local = *sp;
    local.col0 = 0;
    if (K)
        local.tau = sp->tau + (size_t)((uint64_t)sp->col0 % sp->tau_len);
    compute_rows(p, path, row_norms, t, &local, r0, r1);
    if (K) {
        double turned[RESDIAG_MAX_SKETCH];
        const size_t c = (size_t)((uint64_t)sp->col0 % K);
        for (size_t m = 0; m < K; m++)
            turned[(m + c) % K] = p->sketch[m];
        memcpy(p->sketch, turned, K * sizeof *turned);
    }
    if (!isnan(p->amax_col))
        p->amax_col += (double)sp->col0;
}

void rd_stats_part_rows(rd_stats_part *part, rd_stats_path path, double *row_norms,
                        const resdiag_tensor *t, const rd_sketch_params *sp, int64_t r0,
                        int64_t r1)
{
    partial p;
    compute_rows_at(&p, path, row_norms, t, sp, r0, r1);
    memcpy(part->opaque, &p, sizeof p);
}

void rd_stats_part_fields(double *fields, double *sketch, const rd_stats_part *first,
                          const rd_stats_part *second, const resdiag_tensor *t,
                          const rd_sketch_params *sp)
{
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    partial p, q;
    memcpy(&p, first->opaque, sizeof p);
    if (second != NULL) { /* the rows of second come after those of first */
        memcpy(&q, second->opaque, sizeof q);
        partial_merge(&p, &q, K);
    }
    partial_fields(&p, t->rows, t->cols, K, fields, sketch);
}

void rd_stats_part_merge(rd_stats_part *a, const rd_stats_part *b, const rd_sketch_params *sp)
{
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    partial p, q;
    memcpy(&p, a->opaque, sizeof p);
    memcpy(&q, b->opaque, sizeof q);
    partial_merge(&p, &q, K);
    memcpy(a->opaque, &p, sizeof p);
}

/* An ssq's value scale^2 * sumsq as a plain double (+Inf beyond the range). */
static double ssq_value(const ssq *a)
{
    return a->scale == 0.0 ? 0.0 : a->scale * (a->scale * a->sumsq);
}

/* The mean and sum of squared deviations of m; the mean NaN over no token. */
static void moments_public(double *mean, double *m2, const moments *m, double n, double f)
{
    *mean = n > 0 ? m->mean * f : NAN;
    *m2 = ssq_value(&m->m2) * (f * f);
}

/* partial_fields' twin for the public struct: the same quantities before
 * the divisions and square roots that make them fields. */
void rd_stats_part_public(resdiag_partial *out, const rd_stats_part *part,
                          const resdiag_tensor *t, const rd_sketch_params *sp)
{
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    partial p;
    memcpy(&p, part->opaque, sizeof p);
    memset(out, 0, sizeof *out);
    const double n = (double)t->rows;
    out->rows = n;
    out->cols = (double)t->cols;
    out->sumsq = ssq_value(&p.frob);
    if (p.norm_max == INFINITY) { /* as partial_fields: the norms' moments from the rms' */
        out->sumsq = INFINITY;
        moments_public(&out->norm_mean, &out->norm_m2, &p.rms, n, sqrt((double)t->cols));
    } else {
        moments_public(&out->norm_mean, &out->norm_m2, &p.norm, n, 1.0);
    }
    out->norm_min = n > 0 ? p.norm_min : NAN;
    out->norm_max = n > 0 ? p.norm_max : NAN;
    moments_public(&out->mean_mean, &out->mean_m2, &p.mean, n, 1.0);
    moments_public(&out->rms_mean, &out->rms_m2, &p.rms, n, 1.0);
    moments_public(&out->std_mean, &out->std_m2, &p.sdev, n, 1.0);
    out->absmax = p.amax;
    out->absmax_col = p.amax_col;
    out->nan_count = (double)p.nan;
    out->inf_count = (double)p.inf;
    out->ratio_sum = 0.0;
    out->ratio_rows = -1.0;
    for (size_t m = 0; m < K; m++)
        out->sketch[m] = p.sketch[m];
}

static void compute(rd_stats_path path, double *fields, double *sketch, double *row_norms,
                    const resdiag_tensor *t, const rd_sketch_params *sp)
{
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    partial p;
    compute_rows_at(&p, path, row_norms, t, sp, 0, t->rows);
    partial_fields(&p, t->rows, t->cols, K, fields, sketch);
}
