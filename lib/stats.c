/*
 * stats.c - one-pass statistics of a 2-D tensor and its linear sketch.
 *
 * Dimension names: rows = tokens, cols = width, K = sketch size.
 *
 * Semantics (the contract is lib/stats.h; these are the details):
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
 * style) and Welford's update, so 1e200 or 1e-310 f64 data give the right
 * norms. No allocation, no state outside the call: thread-safe.
 */
#include "stats.h"

#include <math.h>
#include <string.h>

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
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15u

double rd_row_sign(uint64_t seed, int64_t row)
{
    uint64_t h = mix64(seed ^ ((uint64_t)row * GOLDEN));
    return (h >> 63) ? -1.0 : 1.0;
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
} ssq;

static void ssq_add(ssq *a, double x)
{
    x = fabs(x);
    if (x == 0.0)
        return;
    if (a->scale < x) {
        double r = a->scale / x;
        a->sumsq = 1.0 + a->sumsq * r * r;
        a->scale = x;
    } else {
        double r = x / a->scale;
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

/* w = sqrt((n-1)/n) and inv_n = 1/n for the n-th token, shared by the four
 * quantities of a token. */
static void moments_add(moments *m, double v, double inv_n, double w)
{
    double delta = v - m->mean;
    m->mean += delta * inv_n;
    ssq_add(&m->m2, delta * w);
}

/* ------------------------------------------------------------------------ */
/* One row                                                                   */
/* ------------------------------------------------------------------------ */

/* Sums of one row, in units of 2^e. Shifting by the row's first value y0
 * before squaring keeps std_i accurate when |mean_i| >> std_i (and exactly
 * 0 for a constant row). */
typedef struct row_sums {
    int e;            /* scale exponent: values below are x * 2^-e */
    double y0;        /* shift: first value of the row (0 if non-finite) */
    double sd, sd2;   /* sum (y - y0), sum (y - y0)^2 */
    double sq;        /* sum y^2 */
    double amax;      /* largest finite |x| (unscaled); -1 if none */
    int64_t amax_col; /* its first column, -1 if not located (fast path) */
    int64_t nan, inf;
} row_sums;

static double load(const void *row, resdiag_dtype dtype, int64_t j)
{
    switch (dtype) {
    case RESDIAG_DTYPE_F32: return ((const float *)row)[j];
    case RESDIAG_DTYPE_F64: return ((const double *)row)[j];
    case RESDIAG_DTYPE_F16: return rd_f16_to_f32(((const uint16_t *)row)[j]);
    case RESDIAG_DTYPE_BF16: return rd_bf16_to_f32(((const uint16_t *)row)[j]);
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

/* The common path: one read of the row, assuming finite values.
 * rb (K) receives the row's sketch buckets (unsigned by sigma). */
static void fast_row(row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
                     int64_t cols, const rd_sketch_params *sp)
{
    lanes L;
    memset(&L, 0, sizeof L);
    const int sk = sp != NULL && sp->k > 0;
    double x0 = load(row, dtype, 0);

    for (int64_t j0 = 0; j0 < cols; j0 += CHUNK) {
        int64_t n = cols - j0 < CHUNK ? cols - j0 : CHUNK;
        if (dtype == RESDIAG_DTYPE_F64) {
            const double *x = (const double *)row + j0; /* (n) */
            acc_f64(&L, x, n, x0);
            if (sk)
                sketch_f64(rb, x, n, j0, sp);
            continue;
        }
        const float *x;                       /* (n) */
        float buf[CHUNK];
        if (dtype == RESDIAG_DTYPE_F32) {
            x = (const float *)row + j0;
        } else {
            const uint16_t *h = (const uint16_t *)row + j0; /* (n) */
            if (dtype == RESDIAG_DTYPE_F16)
                for (int64_t u = 0; u < n; u++)
                    buf[u] = rd_f16_to_f32(h[u]);
            else
                for (int64_t u = 0; u < n; u++)
                    buf[u] = rd_bf16_to_f32(h[u]);
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

/* First column of a row holding |x| == a (the row is finite here). */
static int64_t first_col(const void *row, resdiag_dtype dtype, int64_t cols, double a)
{
    for (int64_t j = 0; j < cols; j++)
        if (fabs(load(row, dtype, j)) == a)
            return j;
    return 0; /* not reached: a came from this row */
}

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
/* The tensor                                                                */
/* ------------------------------------------------------------------------ */

void rd_stats_compute(double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp)
{
    const int64_t rows = t->rows, cols = t->cols;
    const int64_t stride = t->row_stride ? t->row_stride : cols;
    const size_t K = sp != NULL && sp->k > 0 ? (size_t)sp->k : 0;
    const double dcols = (double)cols, inv_cols = 1.0 / dcols;

    ssq frob = { 0.0, 0.0 };
    moments norm = { 0.0, { 0.0, 0.0 } }, mean = norm, rms = norm, sdev = norm;
    double norm_min = INFINITY, norm_max = -INFINITY;
    double amax = -1.0, amax_col = NAN; /* -1: below every |x| */
    int64_t nan = 0, inf = 0;
    double rb[RESDIAG_MAX_SKETCH]; /* (K) one row's buckets */

    for (size_t m = 0; m < K; m++)
        sketch[m] = 0.0;

    for (int64_t i = 0; i < rows; i++) {
        const void *row = (const char *)t->data +
                          (size_t)i * (size_t)stride * dtype_size(t->dtype);
        row_sums rs;
        if (K)
            memset(rb, 0, K * sizeof *rb);
        fast_row(&rs, rb, row, t->dtype, cols, sp);
        if (!fast_row_ok(&rs, t->dtype))
            careful_row(&rs, rb, row, t->dtype, cols, sp);

        /* Per-token values; the scaling by 2^e is exact. */
        double mu = rs.sd * inv_cols; /* mean of (y - y0) */
        double var = rs.sd2 * inv_cols - mu * mu;
        double tok_norm = ldexp(sqrt(rs.sq), rs.e);
        double tok_mean = ldexp(rs.y0 + mu, rs.e);
        double tok_rms = ldexp(sqrt(rs.sq * inv_cols), rs.e);
        double tok_std = ldexp(sqrt(var > 0.0 ? var : 0.0), rs.e);

        double n = (double)(i + 1), inv_n = 1.0 / n, w = sqrt((n - 1.0) * inv_n);
        moments_add(&norm, tok_norm, inv_n, w);
        moments_add(&mean, tok_mean, inv_n, w);
        moments_add(&rms, tok_rms, inv_n, w);
        moments_add(&sdev, tok_std, inv_n, w);
        norm_min = tok_norm < norm_min ? tok_norm : norm_min;
        norm_max = tok_norm > norm_max ? tok_norm : norm_max;
        ssq_add(&frob, tok_norm);
        if (row_norms)
            row_norms[i] = tok_norm;

        if (rs.amax > amax) { /* strictly: the first on ties wins */
            amax = rs.amax;
            amax_col = (double)(rs.amax_col >= 0 ? rs.amax_col
                                                 : first_col(row, t->dtype, cols, rs.amax));
        }
        nan += rs.nan;
        inf += rs.inf;

        double sigma = K ? rd_row_sign(sp->seed, i) : 0.0;
        for (size_t m = 0; m < K; m++)
            sketch[m] += sigma * rb[m];
    }

    fields[RESDIAG_FIELD_ROWS] = (double)rows;
    fields[RESDIAG_FIELD_COLS] = dcols;
    fields[RESDIAG_FIELD_FROB] = frob.scale * sqrt(frob.sumsq);
    fields[RESDIAG_FIELD_ABSMAX] = amax < 0.0 ? 0.0 : amax;
    fields[RESDIAG_FIELD_ABSMAX_COL] = amax_col;
    fields[RESDIAG_FIELD_NAN_COUNT] = (double)nan;
    fields[RESDIAG_FIELD_INF_COUNT] = (double)inf;

    const double r = (double)rows;
    const int any = rows > 0;
    fields[RESDIAG_FIELD_TOK_NORM_MEAN] = any ? norm.mean : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_STD] = any ? ssq_rms(&norm.m2, r) : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_MIN] = any ? norm_min : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_MAX] = any ? norm_max : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_MEAN] = any ? mean.mean : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_STD] = any ? ssq_rms(&mean.m2, r) : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_MEAN] = any ? rms.mean : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_STD] = any ? ssq_rms(&rms.m2, r) : NAN;
    fields[RESDIAG_FIELD_TOK_STD_MEAN] = any ? sdev.mean : NAN;
    fields[RESDIAG_FIELD_TOK_STD_STD] = any ? ssq_rms(&sdev.m2, r) : NAN;
}
