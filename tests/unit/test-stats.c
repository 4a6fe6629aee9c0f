/*
 * test-stats.c - Check suite for lib/stats/stats.c.
 *
 * Every statistic is compared with an independent reference: a plain
 * two-pass loop in long double that uses nothing from stats.c except the
 * f16/bf16 conversions, which are tested on their own against the IEEE
 * formulas first. The reference scales each row, and each list of per-token
 * values, by a power of two (exact) before squaring: long double's range
 * would make that unnecessary on x86-64, but valgrind (meson's "valgrind"
 * setup) runs long double at double precision and range.
 *
 * Dimension names: rows = tokens, cols = width, K = sketch size.
 *
 * Tolerances. stats.c sums in double (unit roundoff u = 2^-53 = 1.1e-16).
 * A sum of n terms has error at most (n-1) u sum|terms| (Higham, Accuracy
 * and Stability, 4.4); the tensors here have at most ~3000 terms per sum, so
 * (n-1) u < 3.4e-13. Each per-token value (norm, mean, rms, std) therefore
 * has an absolute error below ~1e-12 of that token's norm (resp. rms);
 * means and population stds over tokens (Welford) add errors of the same
 * order for the few hundred tokens used. So fields are compared with
 *     |got - ref| <= 1e-12 * (|ref| + scale)
 * where scale is the largest per-token norm (norm fields) or rms (mean,
 * rms and std fields): a bound derived from the arithmetic, not a fudge.
 * Exact quantities (counts, ABSMAX, its column, shape) must match exactly.
 *
 * The vector paths (AVX2, AVX-512) sum f32, f16 and bf16 rows in float
 * lanes over blocks and in double across blocks (lib/stats/simd_kernels.h), so for
 * those dtypes their bound is float's: each row sum (sum x, sum x^2, a
 * sketch bucket) is within G = 24 u_f (u_f = 2^-24, at most 22 roundings
 * per term) of the sum of its |terms|. Per token that gives: norm and rms
 * within G/2 of themselves; mean within G * rms (Cauchy-Schwarz: sum|x| <=
 * sqrt(cols sum x^2)); variance sum x^2/cols - mean^2 within 3 G rms^2,
 * and the kernel sends rows with mean^2 > 3 var to its double loop, so
 * rms^2 <= 4 var there and std is within 6 G of itself. Hence
 *     |got - ref| <= (6 G + 1e-12) * (|ref| + scale)       (F_TOL)
 * for fields, G * sum|terms| for the sketch and G of each row norm; f64
 * on every path, and everything on the portable path, keep REL_TOL.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "resdiag.h"
#include "path-bounds.h"
#include "stats/stats.h"
#include "stats/stats_impl.h"

#define REL_TOL RD_TEST_REL_TOL
#define G_F RD_TEST_G_F              /* one float-lane row sum, see above */
#define F_TOL RD_TEST_FIELD_TOL_F /* fields of the float kernel: 6 G_F + REL_TOL */
#define CALL_SEQ_SENTINEL 4242.0

/* ------------------------------------------------------------------------ */
/* Deterministic random numbers (splitmix64)                                 */
/* ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double rng_unif(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1p-53;
}

static double rng_normal(uint64_t *s)
{
    double u1 = rng_unif(s), u2 = rng_unif(s);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* ------------------------------------------------------------------------ */
/* Test tensors: values are generated as doubles, then stored in a dtype     */
/* ------------------------------------------------------------------------ */

static size_t dtype_size(resdiag_dtype dt)
{
    return dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* float -> bf16, round to nearest even (finite inputs; NaN/Inf kept). */
static uint16_t to_bf16(float f)
{
    uint32_t b = f32_bits(f);
    if ((b & 0x7f800000u) == 0x7f800000u)
        return (uint16_t)((b >> 16) | ((b & 0xffffu) ? 0x40u : 0u));
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* double -> f16, round to nearest even, via the exact grid of f16 values.
 * Only for test data: |v| below 65520 or non-finite. */
static uint16_t to_f16(double v)
{
    if (isnan(v))
        return 0x7e00;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (isinf(a) || a >= 65520.0)
        return sign | 0x7c00;
    int e;
    (void)frexp(a, &e); /* a = f * 2^e, 0.5 <= f < 1 */
    if (e < -13)
        e = -13;        /* subnormal range: spacing 2^-24 */
    double q = nearbyint(ldexp(a, 11 - e)); /* 11 significant bits */
    double r = ldexp(q, e - 11);
    /* encode r exactly */
    if (r < 0x1p-14)
        return sign | (uint16_t)ldexp(r, 24);
    int re;
    double rf = frexp(r, &re);
    uint16_t man = (uint16_t)(ldexp(rf, 11) - 1024.0);
    return sign | (uint16_t)((re + 14) << 10) | man;
}

typedef struct tensor {
    resdiag_tensor view;
    void *buf;      /* (rows, stride) elements */
} tensor;

/* A tensor of dtype with the given values (rows, cols), stored with the
 * given row stride; padding elements are filled with `pad`. */
static tensor tensor_from(const double *vals /* (rows, cols) */, resdiag_dtype dt,
                          int64_t rows, int64_t cols, int64_t stride, double pad)
{
    tensor t;
    int64_t st = stride ? stride : cols;
    size_t n = (size_t)(rows * st);
    t.buf = malloc((n ? n : 1) * dtype_size(dt));
    ck_assert_ptr_nonnull(t.buf);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < st; j++) {
            double v = j < cols ? vals[i * cols + j] : pad;
            size_t k = (size_t)(i * st + j);
            switch (dt) {
            case RESDIAG_DTYPE_F32: ((float *)t.buf)[k] = (float)v; break;
            case RESDIAG_DTYPE_F64: ((double *)t.buf)[k] = v; break;
            case RESDIAG_DTYPE_F16: ((uint16_t *)t.buf)[k] = to_f16(v); break;
            case RESDIAG_DTYPE_BF16: ((uint16_t *)t.buf)[k] = to_bf16((float)v); break;
            }
        }
    t.view = resdiag_tensor_make(t.buf, dt, rows, cols, stride);
    return t;
}

static void tensor_free(tensor *t)
{
    free(t->buf);
    t->buf = NULL;
}

/* Element (i, j) of a view, as the exact value the library must see.
 * (double holds every f32/f16/bf16 value; classify it before widening to
 * long double, which valgrind does not classify reliably.) */
static double elem(const resdiag_tensor *t, int64_t i, int64_t j)
{
    int64_t st = t->row_stride ? t->row_stride : t->cols;
    size_t k = (size_t)(i * st + j);
    switch (t->dtype) {
    case RESDIAG_DTYPE_F32: return ((const float *)t->data)[k];
    case RESDIAG_DTYPE_F64: return ((const double *)t->data)[k];
    case RESDIAG_DTYPE_F16: return rd_f16_to_f32(((const uint16_t *)t->data)[k]);
    case RESDIAG_DTYPE_BF16: return rd_bf16_to_f32(((const uint16_t *)t->data)[k]);
    }
    return 0.0;
}

/* Random values: each row has its own offset and scale, so that the
 * per-token statistics have a spread over tokens. */
static double *random_values(uint64_t *s, int64_t rows, int64_t cols, double scale)
{
    double *v = malloc((size_t)(rows * cols + 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < rows; i++) {
        double mu = 0.5 * rng_normal(s), sd = exp(0.5 * rng_normal(s));
        for (int64_t j = 0; j < cols; j++)
            v[i * cols + j] = scale * (mu + sd * rng_normal(s));
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* Sketch parameters                                                         */
/* ------------------------------------------------------------------------ */

typedef struct sketch_setup {
    rd_sketch_params sp;
    float *tau; /* (tau_len) */
} sketch_setup;

static sketch_setup sketch_make(int k, size_t tau_len, uint64_t seed)
{
    sketch_setup s;
    s.tau = malloc(tau_len * sizeof *s.tau);
    ck_assert_ptr_nonnull(s.tau);
    rd_fill_column_signs(s.tau, tau_len, seed);
    s.sp.k = k;
    s.sp.tau = s.tau;
    s.sp.tau_len = tau_len;
    s.sp.seed = seed;
    s.sp.row0 = 0;
    s.sp.col0 = 0;
    return s;
}

static void sketch_free(sketch_setup *s)
{
    free(s->tau);
    s->tau = NULL;
}

/* ------------------------------------------------------------------------ */
/* The reference                                                             */
/* ------------------------------------------------------------------------ */

typedef struct reference {
    long double f[RESDIAG_N_FIELDS];
    long double norm_scale; /* largest per-token norm */
    long double rms_scale;  /* largest per-token rms */
    long double *row_norm;  /* (rows) */
    long double sketch[RESDIAG_MAX_SKETCH];
    long double sketch_l1[RESDIAG_MAX_SKETCH]; /* sum of |terms| per bucket */
} reference;

/* Exponent e with |a| < 2^e, for a > 0; 0 for a == 0. */
static int exponent_of(long double a)
{
    int e = 0;
    if (a > 0.0L)
        (void)frexpl(a, &e);
    return e;
}

/* Two-pass mean and population std of v (n), computed on v * 2^-e. */
static void mean_std(long double *mean, long double *sd, const long double *v, int64_t n)
{
    long double big = 0.0L, s = 0.0L, q = 0.0L;
    for (int64_t i = 0; i < n; i++)
        big = fmaxl(big, fabsl(v[i]));
    int e = exponent_of(big);
    for (int64_t i = 0; i < n; i++)
        s += ldexpl(v[i], -e);
    s /= (long double)n;
    for (int64_t i = 0; i < n; i++)
        q += (ldexpl(v[i], -e) - s) * (ldexpl(v[i], -e) - s);
    *mean = ldexpl(s, e);
    *sd = ldexpl(sqrtl(q / (long double)n), e);
}

/* Straight from the definitions in stats.c's header comment: non-finite
 * values are counted and count as 0; the divisor of per-token means is
 * cols; statistics over tokens are population ones. */
static void reference_compute(reference *r, const resdiag_tensor *t,
                              const rd_sketch_params *sp)
{
    int64_t rows = t->rows, cols = t->cols, n = rows > 0 ? rows : 1;
    long double *tn = malloc((size_t)n * sizeof *tn), *tm = malloc((size_t)n * sizeof *tm);
    long double *tr = malloc((size_t)n * sizeof *tr), *ts = malloc((size_t)n * sizeof *ts);
    long double *s2 = malloc((size_t)n * sizeof *s2); /* (rows) sum x^2 * 2^-2e_i */
    int *ex = malloc((size_t)n * sizeof *ex);           /* (rows) e_i */
    ck_assert(tn && tm && tr && ts && s2 && ex);
    long double amax = -1.0L, amax_col = NAN;
    long double nan = 0, inf = 0;
    int k = sp ? sp->k : 0, eg = INT32_MIN;
    memset(r, 0, sizeof *r);

    for (int64_t i = 0; i < rows; i++) {
        /* pass 1: counts, absmax, sketch, the row's scale 2^e */
        long double rmax = 0.0L;
        for (int64_t j = 0; j < cols; j++) {
            double v = elem(t, i, j);
            if (isnan(v)) {
                nan++;
                continue;
            }
            if (isinf(v)) {
                inf++;
                continue;
            }
            rmax = fmaxl(rmax, fabsl(v));
            if (fabsl(v) > amax) {
                amax = fabsl(v);
                amax_col = (long double)j;
            }
            if (k > 0) {
                long double term = (long double)rd_row_sign(sp->seed, i) *
                                   sp->tau[(size_t)j % sp->tau_len] * (long double)v;
                r->sketch[j % k] += term;
                r->sketch_l1[j % k] += fabsl(term);
            }
        }
        int e = exponent_of(rmax);
        /* pass 2: sums of y = x * 2^-e (non-finite as 0); pass 3: deviations */
        long double s1 = 0.0L, q = 0.0L, dev = 0.0L;
        for (int64_t j = 0; j < cols; j++) {
            double v = elem(t, i, j);
            long double y = isfinite(v) ? ldexpl(v, -e) : 0.0L;
            s1 += y;
            q += y * y;
        }
        long double mean = s1 / (long double)cols;
        for (int64_t j = 0; j < cols; j++) {
            double v = elem(t, i, j);
            long double y = isfinite(v) ? ldexpl(v, -e) : 0.0L;
            dev += (y - mean) * (y - mean);
        }
        tn[i] = ldexpl(sqrtl(q), e);
        tm[i] = ldexpl(mean, e);
        tr[i] = ldexpl(sqrtl(q / (long double)cols), e);
        ts[i] = ldexpl(sqrtl(dev / (long double)cols), e);
        s2[i] = q;
        ex[i] = e;
        if (q > 0.0L && e > eg)
            eg = e;
        r->norm_scale = fmaxl(r->norm_scale, tn[i]);
        r->rms_scale = fmaxl(r->rms_scale, tr[i]);
    }
    /* FROB on the scale of the largest row */
    long double total = 0.0L;
    for (int64_t i = 0; i < rows; i++)
        if (s2[i] > 0.0L)
            total += ldexpl(s2[i], 2 * (ex[i] - eg));

    long double *f = r->f;
    f[RESDIAG_FIELD_ROWS] = (long double)rows;
    f[RESDIAG_FIELD_COLS] = (long double)cols;
    f[RESDIAG_FIELD_FROB] = total > 0.0L ? ldexpl(sqrtl(total), eg) : 0.0L;
    f[RESDIAG_FIELD_ABSMAX] = amax < 0.0L ? 0.0L : amax;
    f[RESDIAG_FIELD_ABSMAX_COL] = amax_col;
    f[RESDIAG_FIELD_NAN_COUNT] = nan;
    f[RESDIAG_FIELD_INF_COUNT] = inf;
    f[RESDIAG_FIELD_CALL_SEQ] = CALL_SEQ_SENTINEL;
    if (rows > 0) {
        mean_std(&f[RESDIAG_FIELD_TOK_NORM_MEAN], &f[RESDIAG_FIELD_TOK_NORM_STD], tn, rows);
        mean_std(&f[RESDIAG_FIELD_TOK_MEAN_MEAN], &f[RESDIAG_FIELD_TOK_MEAN_STD], tm, rows);
        mean_std(&f[RESDIAG_FIELD_TOK_RMS_MEAN], &f[RESDIAG_FIELD_TOK_RMS_STD], tr, rows);
        mean_std(&f[RESDIAG_FIELD_TOK_STD_MEAN], &f[RESDIAG_FIELD_TOK_STD_STD], ts, rows);
        f[RESDIAG_FIELD_TOK_NORM_MIN] = f[RESDIAG_FIELD_TOK_NORM_MAX] = tn[0];
        for (int64_t i = 1; i < rows; i++) {
            f[RESDIAG_FIELD_TOK_NORM_MIN] = fminl(f[RESDIAG_FIELD_TOK_NORM_MIN], tn[i]);
            f[RESDIAG_FIELD_TOK_NORM_MAX] = fmaxl(f[RESDIAG_FIELD_TOK_NORM_MAX], tn[i]);
        }
    } else {
        for (int q = RESDIAG_FIELD_TOK_NORM_MEAN; q <= RESDIAG_FIELD_TOK_STD_STD; q++)
            f[q] = NAN;
    }
    free(tm);
    free(tr);
    free(ts);
    free(s2);
    free(ex);
    r->row_norm = tn;
}

static void reference_free(reference *r)
{
    free(r->row_norm);
    r->row_norm = NULL;
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                 */
/* ------------------------------------------------------------------------ */

static const char *field_label(int q)
{
    static const char *const names[RESDIAG_N_FIELDS] = {
        "ROWS", "COLS", "FROB", "TOK_NORM_MEAN", "TOK_NORM_STD", "TOK_NORM_MIN",
        "TOK_NORM_MAX", "TOK_MEAN_MEAN", "TOK_MEAN_STD", "TOK_RMS_MEAN", "TOK_RMS_STD",
        "TOK_STD_MEAN", "TOK_STD_STD", "ABSMAX", "ABSMAX_COL", "NAN_COUNT", "INF_COUNT",
        "CALL_SEQ" };
    return names[q];
}

/* |got - ref| <= tol, both NaN, or both the same infinity. */
static void expect_close(const char *label, const char *what, double got, long double ref,
                         long double tol)
{
    if (isnan(ref)) {
        ck_assert_msg(isnan(got), "%s: %s = %.17g, expected NaN", label, what, got);
        return;
    }
    ck_assert_msg(isfinite(got), "%s: %s = %.17g, expected %.17Lg", label, what, got, ref);
    long double err = fabsl((long double)got - ref);
    ck_assert_msg(err <= tol, "%s: %s = %.17g, expected %.17Lg (error %.3Lg > tolerance %.3Lg)",
                  label, what, got, ref, err, tol);
}

static int field_is_exact(int q)
{
    return q == RESDIAG_FIELD_ROWS || q == RESDIAG_FIELD_COLS || q == RESDIAG_FIELD_ABSMAX ||
           q == RESDIAG_FIELD_ABSMAX_COL || q == RESDIAG_FIELD_NAN_COUNT ||
           q == RESDIAG_FIELD_INF_COUNT || q == RESDIAG_FIELD_CALL_SEQ;
}

/* Relative tolerance of the fields (rel) and of one row sum (sum_tol) for
 * path p on dtype. */
static long double field_tol(rd_stats_path p, resdiag_dtype dt)
{
    return rd_test_field_tol(p, dt); /* F_TOL or REL_TOL (path-bounds.h) */
}

static long double sum_tol(rd_stats_path p, resdiag_dtype dt)
{
    return rd_test_sum_tol(p, dt);
}

static void expect_fields(const char *label, const double *got, const reference *r,
                          long double rel)
{
    for (int q = 0; q < RESDIAG_N_FIELDS; q++) {
        long double ref = r->f[q], tol;
        if (field_is_exact(q))
            tol = 0.0L;
        else if (q == RESDIAG_FIELD_FROB)
            tol = rel * fabsl(ref);
        else if (q >= RESDIAG_FIELD_TOK_NORM_MEAN && q <= RESDIAG_FIELD_TOK_NORM_MAX)
            tol = rel * (fabsl(ref) + r->norm_scale);
        else
            tol = rel * (fabsl(ref) + r->rms_scale);
        expect_close(label, field_label(q), got[q], ref, tol);
    }
}

/* Runs rd_stats_compute on t and compares fields, sketch and row norms with
 * the reference. sp may have k == 0. */
static void check_against_reference(const char *label, const resdiag_tensor *t,
                                    const rd_sketch_params *sp)
{
    double fields[RESDIAG_N_FIELDS], sketch[RESDIAG_MAX_SKETCH];
    int64_t n = t->rows > 0 ? t->rows : 1;
    double *norms = malloc((size_t)n * sizeof *norms);
    ck_assert_ptr_nonnull(norms);
    for (int q = 0; q < RESDIAG_N_FIELDS; q++)
        fields[q] = -777.0;
    fields[RESDIAG_FIELD_CALL_SEQ] = CALL_SEQ_SENTINEL;
    for (int m = 0; m < RESDIAG_MAX_SKETCH; m++)
        sketch[m] = -777.0;

    rd_stats_compute(fields, sp->k > 0 ? sketch : NULL, norms, t, sp);

    reference r;
    reference_compute(&r, t, sp);
    rd_stats_path path = rd_stats_active_path();
    expect_fields(label, fields, &r, field_tol(path, t->dtype));
    long double st = sum_tol(path, t->dtype);
    for (int m = 0; m < sp->k; m++) {
        char what[32];
        snprintf(what, sizeof what, "sketch[%d]", m);
        /* one sum of (rows * cols / K) terms: error <= (n-1) u sum|terms| */
        expect_close(label, what, sketch[m], r.sketch[m], st * r.sketch_l1[m]);
    }
    for (int64_t i = 0; i < t->rows; i++) {
        char what[32];
        snprintf(what, sizeof what, "row_norms[%lld]", (long long)i);
        expect_close(label, what, norms[i], r.row_norm[i], st * r.row_norm[i]);
    }
    reference_free(&r);
    free(norms);
}

static const resdiag_dtype all_dtypes[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_F64,
                                            RESDIAG_DTYPE_F16, RESDIAG_DTYPE_BF16 };
static const char *const dtype_label[] = { "f32", "f64", "f16", "bf16" };

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */
/* ------------------------------------------------------------------------ */

START_TEST(f16_to_f32_matches_hand_computed_bit_patterns)
{
    ck_assert(rd_f16_to_f32(0x3c00) == 1.0f);
    ck_assert(rd_f16_to_f32(0xc000) == -2.0f);
    ck_assert(rd_f16_to_f32(0x0001) == 0x1p-24f);  /* smallest subnormal */
    ck_assert(rd_f16_to_f32(0x8001) == -0x1p-24f);
    ck_assert(rd_f16_to_f32(0x03ff) == 1023.0f * 0x1p-24f); /* largest subnormal */
    ck_assert(rd_f16_to_f32(0x0400) == 0x1p-14f);  /* smallest normal */
    ck_assert(rd_f16_to_f32(0x7bff) == 65504.0f);  /* largest finite */
    ck_assert(rd_f16_to_f32(0x3555) == 0.333251953125f);
    ck_assert(rd_f16_to_f32(0x7c00) == INFINITY);
    ck_assert(rd_f16_to_f32(0xfc00) == -INFINITY);
    ck_assert(isnan(rd_f16_to_f32(0x7e00)));
    ck_assert(isnan(rd_f16_to_f32(0x7c01))); /* signaling NaN stays a NaN */
    ck_assert(rd_f16_to_f32(0x0000) == 0.0f && !signbit(rd_f16_to_f32(0x0000)));
    ck_assert(rd_f16_to_f32(0x8000) == 0.0f && signbit(rd_f16_to_f32(0x8000)));
}
END_TEST

START_TEST(bf16_to_f32_matches_hand_computed_bit_patterns)
{
    ck_assert(rd_bf16_to_f32(0x3f80) == 1.0f);
    ck_assert(rd_bf16_to_f32(0xc000) == -2.0f);
    ck_assert(rd_bf16_to_f32(0x4049) == 3.140625f);
    ck_assert(rd_bf16_to_f32(0x0001) == 0x1p-133f); /* subnormal: 2^16 * 2^-149 */
    ck_assert(rd_bf16_to_f32(0x0080) == 0x1p-126f); /* smallest normal */
    ck_assert(rd_bf16_to_f32(0x7f7f) == 0x1.fep127f); /* largest finite */
    ck_assert(rd_bf16_to_f32(0x7f80) == INFINITY);
    ck_assert(rd_bf16_to_f32(0xff80) == -INFINITY);
    ck_assert(isnan(rd_bf16_to_f32(0x7fc0)));
    ck_assert(isnan(rd_bf16_to_f32(0x7f81))); /* signaling NaN stays a NaN */
    ck_assert(rd_bf16_to_f32(0x8000) == 0.0f && signbit(rd_bf16_to_f32(0x8000)));
}
END_TEST

/* Every one of the 65536 patterns against the IEEE binary16 formula. */
START_TEST(f16_to_f32_is_exact_for_every_pattern)
{
    for (uint32_t h = 0; h < 65536; h++) {
        int s = (int)(h >> 15), e = (int)((h >> 10) & 31), m = (int)(h & 1023);
        float got = rd_f16_to_f32((uint16_t)h);
        double want;
        if (e == 31)
            want = m ? NAN : INFINITY;
        else if (e == 0)
            want = ldexp(m, -24);
        else
            want = ldexp(1024 + m, e - 25);
        if (s)
            want = -want;
        if (isnan(want))
            ck_assert_msg(isnan(got), "f16 0x%04x", h);
        else
            ck_assert_msg((double)got == want && !signbit(got) == !s,
                          "f16 0x%04x -> %.9g, expected %.9g", h, got, want);
    }
}
END_TEST

START_TEST(bf16_to_f32_is_exact_for_every_pattern)
{
    for (uint32_t b = 0; b < 65536; b++) {
        int s = (int)(b >> 15), e = (int)((b >> 7) & 255), m = (int)(b & 127);
        float got = rd_bf16_to_f32((uint16_t)b);
        double want;
        if (e == 255)
            want = m ? NAN : INFINITY;
        else if (e == 0)
            want = ldexp(m, -133);
        else
            want = ldexp(128 + m, e - 134);
        if (s)
            want = -want;
        if (isnan(want))
            ck_assert_msg(isnan(got), "bf16 0x%04x", b);
        else
            ck_assert_msg((double)got == want && !signbit(got) == !s,
                          "bf16 0x%04x -> %.9g, expected %.9g", b, got, want);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Signs                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(row_signs_are_balanced_and_depend_on_seed_and_row)
{
    /* 10000 fair coins: sd 50, so +-300 is 6 sigma. */
    int plus = 0, same_next = 0, same_seed = 0;
    for (int64_t i = 0; i < 10000; i++) {
        double s = rd_row_sign(0x5eed, i);
        ck_assert(s == 1.0 || s == -1.0);
        ck_assert(s == rd_row_sign(0x5eed, i)); /* deterministic */
        plus += s > 0;
        same_next += s == rd_row_sign(0x5eed, i + 1);
        same_seed += s == rd_row_sign(0x5eee, i);
    }
    ck_assert_int_lt(abs(plus - 5000), 300);
    ck_assert_int_lt(abs(same_next - 5000), 300);
    ck_assert_int_lt(abs(same_seed - 5000), 300);
    int over_seeds = 0;
    for (uint64_t seed = 0; seed < 10000; seed++)
        over_seeds += rd_row_sign(seed, 3) > 0;
    ck_assert_int_lt(abs(over_seeds - 5000), 300);
}
END_TEST

START_TEST(column_signs_are_balanced_and_independent_of_row_signs)
{
    enum { N = 10000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    ck_assert(a && b);
    rd_fill_column_signs(a, N, 7);
    rd_fill_column_signs(b, N, 8);
    int plus = 0, same_seed = 0, same_row = 0;
    for (int j = 0; j < N; j++) {
        ck_assert(a[j] == 1.0f || a[j] == -1.0f);
        plus += a[j] > 0;
        same_seed += a[j] == b[j];
        same_row += a[j] == (float)rd_row_sign(7, j);
    }
    ck_assert_int_lt(abs(plus - N / 2), 300);
    ck_assert_int_lt(abs(same_seed - N / 2), 300);
    ck_assert_int_lt(abs(same_row - N / 2), 300);
    /* a prefix of a longer fill is the shorter fill */
    rd_fill_column_signs(b, 100, 7);
    ck_assert_mem_eq(a, b, 100 * sizeof *a);
    free(a);
    free(b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Random data against the reference                                         */
/* ------------------------------------------------------------------------ */

/* Shapes: single row / column, cols not a multiple of K or 8, and widths
 * beyond one 512-column chunk. */
static const int64_t shapes[][2] = {
    { 1, 1 }, { 1, 7 }, { 9, 1 }, { 3, 8 }, { 5, 17 }, { 33, 100 },
    { 16, 768 }, { 3, 1100 }, { 2, 1025 }, { 1, 2999 },
};

START_TEST(stats_random_data_matches_reference_for_every_dtype_and_shape)
{
    uint64_t s = 1;
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
            int64_t rows = shapes[c][0], cols = shapes[c][1];
            double *v = random_values(&s, rows, cols, 1.0);
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
            sketch_setup sk = sketch_make(16, (size_t)cols, 0x5eed + c);
            char label[64];
            snprintf(label, sizeof label, "%s (%lld, %lld)", dtype_label[d], (long long)rows,
                     (long long)cols);
            check_against_reference(label, &t.view, &sk.sp);
            sketch_free(&sk);
            tensor_free(&t);
            free(v);
        }
}
END_TEST

START_TEST(stats_strided_rows_ignore_the_padding)
{
    /* Padding holds NaN, Inf and huge values: none may reach a result, and
     * the counts must stay 0. */
    const double pads[] = { NAN, INFINITY, 3e38 };
    uint64_t s = 2;
    for (size_t d = 0; d < 4; d++)
        for (size_t p = 0; p < 3; p++) {
            int64_t rows = 13, cols = 37, stride = 45;
            double *v = random_values(&s, rows, cols, 1.0);
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, stride, pads[p]);
            sketch_setup sk = sketch_make(8, (size_t)cols, 99);
            char label[64];
            snprintf(label, sizeof label, "%s stride %lld pad %g", dtype_label[d],
                     (long long)stride, pads[p]);
            check_against_reference(label, &t.view, &sk.sp);

            double f[RESDIAG_N_FIELDS], g[RESDIAG_N_FIELDS], a[8], b[8];
            tensor c = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
            rd_stats_compute(f, a, NULL, &t.view, &sk.sp);
            rd_stats_compute(g, b, NULL, &c.view, &sk.sp);
            ck_assert_msg(f[RESDIAG_FIELD_NAN_COUNT] == 0 && f[RESDIAG_FIELD_INF_COUNT] == 0,
                          "%s: padding was counted", label);
            /* same elements in the same order: bit-identical results */
            for (int q = 0; q < RESDIAG_FIELD_CALL_SEQ; q++)
                ck_assert_msg(f[q] == g[q], "%s: %s differs from the contiguous copy",
                              label, field_label(q));
            ck_assert_mem_eq(a, b, sizeof a);
            tensor_free(&c);
            sketch_free(&sk);
            tensor_free(&t);
            free(v);
        }
}
END_TEST

START_TEST(stats_zero_rows_gives_nan_token_fields_and_zero_sketch)
{
    sketch_setup sk = sketch_make(16, 64, 1);
    for (size_t d = 0; d < 4; d++) {
        resdiag_tensor t = resdiag_tensor_make(NULL, all_dtypes[d], 0, 64, 0);
        double f[RESDIAG_N_FIELDS], sketch[16];
        for (int q = 0; q < RESDIAG_N_FIELDS; q++)
            f[q] = -1.0;
        f[RESDIAG_FIELD_CALL_SEQ] = CALL_SEQ_SENTINEL;
        for (int m = 0; m < 16; m++)
            sketch[m] = 5.0;
        rd_stats_compute(f, sketch, NULL, &t, &sk.sp);
        ck_assert(f[RESDIAG_FIELD_ROWS] == 0.0);
        ck_assert(f[RESDIAG_FIELD_COLS] == 64.0);
        ck_assert(f[RESDIAG_FIELD_FROB] == 0.0);
        ck_assert(f[RESDIAG_FIELD_ABSMAX] == 0.0);
        ck_assert(isnan(f[RESDIAG_FIELD_ABSMAX_COL]));
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] == 0.0);
        ck_assert(f[RESDIAG_FIELD_INF_COUNT] == 0.0);
        ck_assert(f[RESDIAG_FIELD_CALL_SEQ] == CALL_SEQ_SENTINEL);
        for (int q = RESDIAG_FIELD_TOK_NORM_MEAN; q <= RESDIAG_FIELD_TOK_STD_STD; q++)
            ck_assert_msg(isnan(f[q]), "%s: %s = %g, expected NaN", dtype_label[d],
                          field_label(q), f[q]);
        for (int m = 0; m < 16; m++)
            ck_assert(sketch[m] == 0.0);
        check_against_reference(dtype_label[d], &t, &sk.sp);
    }
    sketch_free(&sk);
}
END_TEST

START_TEST(stats_rms_of_constant_row_is_value)
{
    const double values[] = { 0.1, -3.0, 1e-3, 12345.678, 0.0 };
    const int64_t cols = 771;
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof values / sizeof values[0]; c++) {
            double *v = malloc((size_t)(4 * cols) * sizeof *v);
            ck_assert_ptr_nonnull(v);
            for (int64_t k = 0; k < 4 * cols; k++)
                v[k] = values[c];
            tensor t = tensor_from(v, all_dtypes[d], 4, cols, 0, 0.0);
            double x = (double)elem(&t.view, 0, 0); /* the value as stored */
            double f[RESDIAG_N_FIELDS], norms[4];
            rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
            rd_stats_compute(f, NULL, norms, &t.view, &none);
            const char *dl = dtype_label[d];
            /* sqrt(cols x^2 / cols): a handful of roundings of x */
            ck_assert_msg(fabs(f[RESDIAG_FIELD_TOK_RMS_MEAN] - fabs(x)) <= 1e-14 * fabs(x),
                          "%s %g: rms %.17g", dl, x, f[RESDIAG_FIELD_TOK_RMS_MEAN]);
            ck_assert_msg(fabs(f[RESDIAG_FIELD_TOK_MEAN_MEAN] - x) <= 1e-14 * fabs(x),
                          "%s %g: mean %.17g", dl, x, f[RESDIAG_FIELD_TOK_MEAN_MEAN]);
            /* every deviation from the row's first value is exactly 0 */
            ck_assert_msg(f[RESDIAG_FIELD_TOK_STD_MEAN] == 0.0, "%s %g: std %.17g", dl, x,
                          f[RESDIAG_FIELD_TOK_STD_MEAN]);
            ck_assert(f[RESDIAG_FIELD_TOK_STD_STD] == 0.0);
            ck_assert(f[RESDIAG_FIELD_TOK_RMS_STD] == 0.0);
            ck_assert(f[RESDIAG_FIELD_TOK_NORM_STD] == 0.0);
            ck_assert(fabs(norms[2] - fabs(x) * sqrt((double)cols)) <= 1e-14 * fabs(x) * 28);
            ck_assert(f[RESDIAG_FIELD_ABSMAX] == fabs(x));
            ck_assert(f[RESDIAG_FIELD_ABSMAX_COL] == 0.0); /* all tie: the first */
            tensor_free(&t);
            free(v);
        }
}
END_TEST

START_TEST(stats_token_std_is_accurate_when_the_mean_dominates)
{
    /* Rows of mean 1e4 and std ~1: sumsq/cols - mean^2 in double would lose
     * 8 digits (1e8 * 1.1e-16 relative to var = 1); the library must keep
     * the std to ~1e-11 of itself. */
    uint64_t s = 3;
    int64_t rows = 8, cols = 1000;
    double *v = malloc((size_t)(rows * cols) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t k = 0; k < rows * cols; k++)
        v[k] = 1e4 + rng_normal(&s);
    tensor t = tensor_from(v, RESDIAG_DTYPE_F64, rows, cols, 0, 0.0);
    double f[RESDIAG_N_FIELDS];
    rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
    rd_stats_compute(f, NULL, NULL, &t.view, &none);
    reference r;
    reference_compute(&r, &t.view, &none);
    long double ref = r.f[RESDIAG_FIELD_TOK_STD_MEAN];
    ck_assert_msg(fabsl(f[RESDIAG_FIELD_TOK_STD_MEAN] - ref) <= 1e-11L * ref,
                  "std mean %.17g, expected %.17Lg", f[RESDIAG_FIELD_TOK_STD_MEAN], ref);
    reference_free(&r);
    tensor_free(&t);
    free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Extremes                                                                  */
/* ------------------------------------------------------------------------ */

/* A tensor of `rows` rows of random values times `scale`, checked. */
static void check_scaled(const char *label, resdiag_dtype dt, int64_t rows, int64_t cols,
                         double scale, uint64_t seed)
{
    uint64_t s = seed;
    double *v = random_values(&s, rows, cols, scale);
    tensor t = tensor_from(v, dt, rows, cols, 0, 0.0);
    sketch_setup sk = sketch_make(16, (size_t)cols, seed);
    check_against_reference(label, &t.view, &sk.sp);
    double f[RESDIAG_N_FIELDS];
    rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
    for (int q = 0; q < RESDIAG_FIELD_CALL_SEQ; q++)
        ck_assert_msg(isfinite(f[q]), "%s: %s not finite", label, field_label(q));
    ck_assert_msg(f[RESDIAG_FIELD_NAN_COUNT] == 0 && f[RESDIAG_FIELD_INF_COUNT] == 0, "%s",
                  label);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}

START_TEST(stats_huge_f32_values_do_not_overflow)
{
    check_scaled("f32 1e30", RESDIAG_DTYPE_F32, 20, 300, 1e30, 10);
    /* near FLT_MAX: each |x| <= 3.4e38 after rounding to float */
    uint64_t s = 11;
    double *v = malloc(4 * 513 * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int k = 0; k < 4 * 513; k++)
        v[k] = (rng_unif(&s) < 0.5 ? -1 : 1) * (3e38 + 4e37 * rng_unif(&s));
    v[5] = 0x1.fffffep127; /* FLT_MAX itself */
    tensor t = tensor_from(v, RESDIAG_DTYPE_F32, 4, 513, 0, 0.0);
    sketch_setup sk = sketch_make(16, 513, 3);
    check_against_reference("f32 3e38", &t.view, &sk.sp);
    double f[RESDIAG_N_FIELDS];
    rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
    ck_assert(f[RESDIAG_FIELD_ABSMAX] == (double)0x1.fffffep127f);
    ck_assert(f[RESDIAG_FIELD_ABSMAX_COL] == 5.0);
    ck_assert(isfinite(f[RESDIAG_FIELD_FROB]) && f[RESDIAG_FIELD_FROB] > 3e38 * 45);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}
END_TEST

START_TEST(stats_f32_denormals_are_measured)
{
    /* 1e-40 is an f32 denormal; its square 1e-80 is a normal double. */
    check_scaled("f32 1e-40", RESDIAG_DTYPE_F32, 12, 200, 1e-40, 12);
    check_scaled("f32 1e-44", RESDIAG_DTYPE_F32, 3, 50, 1e-44, 13);
}
END_TEST

START_TEST(stats_f64_1e200_has_right_norms)
{
    /* squares of 1e200 overflow a double: the row must be rescaled, and
     * FROB ~ 1e200 * sqrt(n) must not be Inf */
    check_scaled("f64 1e200", RESDIAG_DTYPE_F64, 10, 700, 1e200, 20);
    check_scaled("f64 1e300", RESDIAG_DTYPE_F64, 3, 16, 1e300, 21);
    /* every value 1e200: FROB = 1e200 * sqrt(rows * cols) */
    enum { R = 50, C = 400 };
    double *v = malloc(R * C * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int k = 0; k < R * C; k++)
        v[k] = 1e200;
    double f[RESDIAG_N_FIELDS], norms[R];
    resdiag_tensor t = resdiag_f64(v, R, C);
    rd_stats_compute(f, NULL, norms, &t, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
    ck_assert(fabs(f[RESDIAG_FIELD_FROB] / (1e200 * sqrt(R * C)) - 1.0) < 1e-13);
    ck_assert(fabs(norms[R - 1] / (1e200 * sqrt(C)) - 1.0) < 1e-13);
    ck_assert(fabs(f[RESDIAG_FIELD_TOK_RMS_MEAN] / 1e200 - 1.0) < 1e-13);
    ck_assert(f[RESDIAG_FIELD_TOK_STD_MEAN] == 0.0);
    ck_assert(f[RESDIAG_FIELD_TOK_NORM_STD] == 0.0);
    free(v);
}
END_TEST

/* Values near the top of the range. Everything is scaled on the way, so
 * a statistic is finite whenever its value is: RMS, means and stds of
 * DBL_MAX data are DBL_MAX or 0. Only a value beyond the double range is
 * +Inf: FROB and the per-token norms (sqrt(cols) times the RMS) of such
 * f64 data. Never NaN. Against the long double reference, whose range
 * holds those values (x86-64). */
static void check_near_max(const char *label, const double *v, resdiag_dtype dt, int64_t rows,
                           int64_t cols, int threads)
{
    tensor t = tensor_from(v, dt, rows, cols, 0, 0.0);
    double f[RESDIAG_N_FIELDS], *norms = malloc((size_t)rows * sizeof *norms);
    ck_assert_ptr_nonnull(norms);
    rd_stats_compute_split(threads, f, NULL, norms, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
    reference r;
    reference_compute(&r, &t.view, NULL);
    long double rel = field_tol(rd_stats_active_path(), dt);
    /* valgrind runs long double at double range: its reference of a value
     * beyond DBL_MAX is Inf or NaN, so only those fields go unchecked there */
    volatile long double twice = DBL_MAX;
    twice *= 2.0L;
    const int wide = isfinite(twice);
    for (int q = 0; q < RESDIAG_N_FIELDS - 1; q++) {
        long double ref = r.f[q];
        ck_assert_msg(!isnan(f[q]), "%s: %s is NaN, expected %.6Lg", label, field_label(q), ref);
        if (!wide && !isfinite(ref))
            continue;
        if (fabsl(ref) > (long double)DBL_MAX) {
            ck_assert_msg(f[q] == (ref > 0 ? INFINITY : -INFINITY), "%s: %s = %.17g, expected "
                          "%.6Lg: Inf", label, field_label(q), f[q], ref);
            continue;
        }
        long double scale = q >= RESDIAG_FIELD_TOK_NORM_MEAN && q <= RESDIAG_FIELD_TOK_NORM_MAX
                                ? r.norm_scale : r.rms_scale;
        long double tol = field_is_exact(q) ? 0.0L
                          : q == RESDIAG_FIELD_FROB ? rel * ref : rel * (fabsl(ref) + scale);
        expect_close(label, field_label(q), f[q], ref, tol);
    }
    for (int64_t i = 0; i < rows; i++) {
        if (r.row_norm[i] > (long double)DBL_MAX)
            ck_assert_msg(norms[i] == INFINITY, "%s: row_norms[%lld] = %g, expected Inf", label,
                          (long long)i, norms[i]);
        else
            expect_close(label, "row_norms", norms[i], r.row_norm[i], rel * r.row_norm[i]);
    }
    reference_free(&r);
    free(norms);
    tensor_free(&t);
}

START_TEST(stats_values_near_the_top_of_the_range_give_inf_only_beyond_it)
{
    enum { R = 200, C = 768 }; /* 1.2 MiB of f64: hook_threads = 2 splits it */
    double *v = malloc((size_t)R * C * sizeof *v);
    ck_assert_ptr_nonnull(v);
    static const int64_t shapes[][2] = { { 5, 7 }, { 1, 7 }, { 1, 1 }, { 100, 768 }, { R, C } };
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int64_t rows = shapes[c][0], cols = shapes[c][1];
        char label[96];
        for (int sign = -1; sign <= 1; sign += 2) {
            for (int64_t k = 0; k < rows * cols; k++)
                v[k] = sign * DBL_MAX;
            snprintf(label, sizeof label, "f64 (%lld, %lld) all %sDBL_MAX", (long long)rows,
                     (long long)cols, sign < 0 ? "-" : "");
            check_near_max(label, v, RESDIAG_DTYPE_F64, rows, cols, 1);
            check_near_max(label, v, RESDIAG_DTYPE_F64, rows, cols, 2);
        }
        /* tokens of opposite signs: the mean over tokens is ~0, its std
         * 0.75 DBL_MAX; differences of the values overflow */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                v[i * cols + j] = (i % 2 ? -0.75 : 0.75) * DBL_MAX;
        snprintf(label, sizeof label, "f64 (%lld, %lld) rows of +-0.75 DBL_MAX",
                 (long long)rows, (long long)cols);
        check_near_max(label, v, RESDIAG_DTYPE_F64, rows, cols, 1);
        check_near_max(label, v, RESDIAG_DTYPE_F64, rows, cols, 2);
        /* columns of opposite signs: per-token std near DBL_MAX */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                v[i * cols + j] = (j % 2 ? -1.0 : 1.0) * DBL_MAX;
        snprintf(label, sizeof label, "f64 (%lld, %lld) columns of +-DBL_MAX", (long long)rows,
                 (long long)cols);
        check_near_max(label, v, RESDIAG_DTYPE_F64, rows, cols, 1);
    }
    /* mixed rows: DBL_MAX, ordinary values, Inf, NaN and DBL_MAX in one row */
    uint64_t s = 910;
    double *m = random_values(&s, 6, 33, 1.0);
    for (int j = 0; j < 33; j++)
        m[j] = DBL_MAX;
    m[2 * 33 + 1] = INFINITY;
    m[2 * 33 + 2] = DBL_MAX;
    m[2 * 33 + 3] = NAN;
    m[4 * 33 + 5] = -DBL_MAX;
    check_near_max("f64 mixed rows", m, RESDIAG_DTYPE_F64, 6, 33, 1);
    /* f32 at FLT_MAX, with +-Inf among them: finite in double, every field */
    for (int64_t k = 0; k < R * C; k++)
        v[k] = (k % 3 ? 1.0 : -1.0) * FLT_MAX;
    v[5] = INFINITY;
    v[C + 7] = -INFINITY;
    check_near_max("f32 FLT_MAX with Inf", v, RESDIAG_DTYPE_F32, R, C, 1);
    check_near_max("f32 FLT_MAX with Inf", v, RESDIAG_DTYPE_F32, R, C, 2);
    free(m);
    free(v);
}
END_TEST

START_TEST(stats_f64_tiny_values_have_right_norms)
{
    /* 1e-310 is a double denormal; the squares of 1e-160 underflow to
     * denormals with few bits; 1e-150 is just below the rescan threshold
     * and 1e-140 just above it. */
    check_scaled("f64 1e-310", RESDIAG_DTYPE_F64, 6, 300, 1e-310, 30);
    check_scaled("f64 1e-160", RESDIAG_DTYPE_F64, 6, 300, 1e-160, 31);
    check_scaled("f64 1e-150", RESDIAG_DTYPE_F64, 6, 300, 1e-150, 32);
    check_scaled("f64 1e-140", RESDIAG_DTYPE_F64, 6, 300, 1e-140, 33);
}
END_TEST

START_TEST(stats_f64_rows_of_very_different_magnitudes_combine)
{
    /* FROB and the token statistics mix rows of 1e200, 1, 1e-300 and 0 */
    const double scales[] = { 1.0, 1e200, 1e-300, 0.0, 1e-5, 1e150 };
    uint64_t s = 40;
    int64_t rows = 6, cols = 129;
    double *v = random_values(&s, rows, cols, 1.0);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            v[i * cols + j] *= scales[i];
    tensor t = tensor_from(v, RESDIAG_DTYPE_F64, rows, cols, 0, 0.0);
    sketch_setup sk = sketch_make(16, (size_t)cols, 4);
    check_against_reference("f64 mixed magnitudes", &t.view, &sk.sp);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* NaN and Inf                                                               */
/* ------------------------------------------------------------------------ */

START_TEST(stats_nan_and_inf_are_counted_and_left_out)
{
    uint64_t s = 50;
    for (size_t d = 0; d < 4; d++) {
        int64_t rows = 24, cols = 300;
        double *v = random_values(&s, rows, cols, 1.0);
        int nan = 0, inf = 0;
        for (int64_t k = 0; k < rows * cols; k++) {
            double u = rng_unif(&s);
            if (u < 0.01) {
                v[k] = NAN;
                nan++;
            } else if (u < 0.02) {
                v[k] = u < 0.015 ? INFINITY : -INFINITY;
                inf++;
            }
        }
        v[0] = NAN; /* a row whose first value is not finite */
        nan += 1;
        v[5 * cols + 3] = 1e3; /* the largest |x|, in a row with NaN/Inf */
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
        sketch_setup sk = sketch_make(16, (size_t)cols, 5);
        check_against_reference(dtype_label[d], &t.view, &sk.sp);
        double f[RESDIAG_N_FIELDS];
        rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] >= 1 && f[RESDIAG_FIELD_INF_COUNT] >= 1);
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] + f[RESDIAG_FIELD_INF_COUNT] <= nan + inf);
        ck_assert(f[RESDIAG_FIELD_ABSMAX] == (double)elem(&t.view, 5, 3));
        ck_assert(f[RESDIAG_FIELD_ABSMAX_COL] == 3.0);
        sketch_free(&sk);
        tensor_free(&t);
        free(v);
    }
}
END_TEST

START_TEST(stats_all_nan_row_has_zero_norm_and_is_a_token)
{
    int64_t rows = 3, cols = 40;
    double v[3 * 40];
    for (int k = 0; k < 40; k++) {
        v[k] = 1.0;
        v[40 + k] = k % 2 ? NAN : INFINITY; /* row 1: nothing finite */
        v[80 + k] = -2.0;
    }
    for (size_t d = 0; d < 4; d++) {
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
        double f[RESDIAG_N_FIELDS], norms[3];
        sketch_setup sk = sketch_make(4, 40, 6);
        double sketch[4];
        rd_stats_compute(f, sketch, norms, &t.view, &sk.sp);
        ck_assert(f[RESDIAG_FIELD_ROWS] == 3.0);
        ck_assert(norms[1] == 0.0);
        ck_assert(f[RESDIAG_FIELD_TOK_NORM_MIN] == 0.0);
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] == 20.0 && f[RESDIAG_FIELD_INF_COUNT] == 20.0);
        /* mean of norms over 3 tokens: (sqrt(40) + 0 + 2 sqrt(40)) / 3 */
        ck_assert(fabs(f[RESDIAG_FIELD_TOK_NORM_MEAN] - sqrt(40.0)) < 1e-14 * sqrt(40.0));
        ck_assert(fabs(f[RESDIAG_FIELD_FROB] - sqrt(200.0)) < 1e-14 * sqrt(200.0));
        check_against_reference(dtype_label[d], &t.view, &sk.sp);
        sketch_free(&sk);
        tensor_free(&t);
    }
}
END_TEST

START_TEST(stats_all_nan_tensor_has_no_absmax_column)
{
    double v[2 * 9];
    for (int k = 0; k < 18; k++)
        v[k] = NAN;
    for (size_t d = 0; d < 4; d++) {
        tensor t = tensor_from(v, all_dtypes[d], 2, 9, 0, 0.0);
        double f[RESDIAG_N_FIELDS], sketch[4];
        sketch_setup sk = sketch_make(4, 9, 7);
        rd_stats_compute(f, sketch, NULL, &t.view, &sk.sp);
        ck_assert(f[RESDIAG_FIELD_ABSMAX] == 0.0);
        ck_assert(isnan(f[RESDIAG_FIELD_ABSMAX_COL]));
        ck_assert(f[RESDIAG_FIELD_FROB] == 0.0);
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] == 18.0);
        ck_assert(f[RESDIAG_FIELD_TOK_NORM_MEAN] == 0.0);
        ck_assert(f[RESDIAG_FIELD_TOK_MEAN_MEAN] == 0.0);
        for (int m = 0; m < 4; m++)
            ck_assert(sketch[m] == 0.0);
        sketch_free(&sk);
        tensor_free(&t);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ABSMAX and its column                                                     */
/* ------------------------------------------------------------------------ */

static void expect_absmax(const double *v, int64_t rows, int64_t cols, double amax,
                          double col, const char *what)
{
    for (size_t d = 0; d < 4; d++) {
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
        double f[RESDIAG_N_FIELDS];
        rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
        ck_assert_msg(f[RESDIAG_FIELD_ABSMAX] == amax && f[RESDIAG_FIELD_ABSMAX_COL] == col,
                      "%s %s: absmax %g at %g, expected %g at %g", dtype_label[d], what,
                      f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL], amax, col);
        tensor_free(&t);
    }
}

START_TEST(stats_absmax_column_is_the_first_largest_magnitude)
{
    const double neg[] = { 1, 2, 3, -7, 5, 6 }; /* one row */
    expect_absmax(neg, 1, 6, 7, 3, "negative max");
    const double tie_in_row[] = { 1, -8, 8, 2 };
    expect_absmax(tie_in_row, 1, 4, 8, 1, "tie in a row");
    const double tie_across_rows[] = { 1, 0, 5, 2, -5, 0, 5, 5, 0 };
    expect_absmax(tie_across_rows, 3, 3, 5, 2, "tie across rows: row 0 wins");
    const double later_row[] = { 1, 0, 5, 2, -6, 0 };
    expect_absmax(later_row, 2, 3, 6, 1, "larger in a later row");
    const double with_nan[] = { NAN, -9, 9, 1 };
    expect_absmax(with_nan, 1, 4, 9, 1, "max in a row with NaN");
    const double inf_not_max[] = { 1, 4, 2, 0, INFINITY, 3 };
    expect_absmax(inf_not_max, 2, 3, 4, 1, "Inf is not the max");
    const double zeros[] = { 0, 0, 0, 0 };
    expect_absmax(zeros, 2, 2, 0, 0, "all zero");
    /* past the 8-lane blocks and the 512-column chunk */
    double wide[1100] = { 0 };
    wide[1037] = -3;
    wide[1099] = 3;
    expect_absmax(wide, 1, 1100, 3, 1037, "wide row");
}
END_TEST

/* ABSMAX's column is found by comparing the row's raw magnitude bits
 * (the value's bits without the sign) in chunks of 32 columns: the first
 * of a tie wins also across a chunk's end, -0 counts as 0, and f32 and f64
 * compare in their own widths. */
START_TEST(stats_absmax_column_is_found_across_scan_chunks)
{
    static const int64_t at[] = { 0, 1, 31, 32, 33, 63, 64, 65, 95, 127 };
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
        double v[130] = { 0 };
        v[at[a]] = -6.5;
        if (at[a] + 1 < 130)
            v[at[a] + 1] = 6.5; /* a tie right after */
        v[129] = 6.5;           /* and one at the end */
        if (at[a] > 0)
            v[at[a] - 1] = 6.25; /* just below, just before */
        char what[64];
        snprintf(what, sizeof what, "max at column %lld of 130", (long long)at[a]);
        expect_absmax(v, 1, 130, 6.5, (double)at[a], what);
    }
    double negzero[70] = { 0 };
    for (int j = 0; j < 70; j++)
        negzero[j] = -0.0;
    expect_absmax(negzero, 1, 70, 0, 0, "all -0: column 0");
    /* one ulp below the max, in an earlier chunk, is not the max (f32 and
     * f64: the 16-bit dtypes would round it to the max) */
    for (int d = 0; d < 2; d++) {
        double ulp[40] = { 0 };
        ulp[3] = d ? nextafter(3.0, 0.0) : nextafterf(3.0f, 0.0f);
        ulp[36] = -3.0;
        tensor t = tensor_from(ulp, all_dtypes[d], 1, 40, 0, 0.0);
        double f[RESDIAG_N_FIELDS];
        rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
        ck_assert_msg(f[RESDIAG_FIELD_ABSMAX] == 3.0 && f[RESDIAG_FIELD_ABSMAX_COL] == 36.0,
                      "%s one ulp below: absmax %.17g at %g", dtype_label[d],
                      f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL]);
        tensor_free(&t);
    }
}
END_TEST

/* The value of an f16 bit pattern (finite), decoded here by its definition */
static double f16_value(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* The value of a bf16 bit pattern: the upper half of an f32 */
static double bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Every finite f16 and bf16 magnitude as a row's largest |x|, with either
 * sign, a tie after it and the next smaller magnitude elsewhere: ABSMAX is
 * that value and ABSMAX_COL its column, at widths that take the 16-row
 * kernels (64, 128: the bf16 dot kernel) and the one-row kernels with a
 * scalar tail (100). The vector paths take the largest |x| of f16 and bf16
 * rows as an integer maximum of these bits, and every path finds the
 * column by comparing them. */
START_TEST(stats_absmax_of_every_f16_and_bf16_magnitude)
{
    static const int64_t widths[] = { 64, 100, 128 };
    for (int bf = 0; bf < 2; bf++) {
        const resdiag_dtype dt = bf ? RESDIAG_DTYPE_BF16 : RESDIAG_DTYPE_F16;
        const unsigned top = bf ? 0x7f7fu : 0x7bffu; /* the largest finite magnitude */
        for (size_t w = 0; w < 3; w++) {
            const int64_t C = widths[w];
            uint16_t *row = calloc((size_t)C, sizeof *row);
            ck_assert_ptr_nonnull(row);
            resdiag_tensor t = resdiag_tensor_make(row, dt, 1, C, 0);
            for (unsigned h = 0; h <= top; h++) {
                const int64_t c = (int64_t)((h * 37u) % (unsigned)C);
                const int64_t tie = c + 1 < C ? c + 1 + (int64_t)(h % (unsigned)(C - c - 1)) : -1;
                const int64_t below = (c + C / 2) % C;
                const uint16_t sign = h & 1 ? 0x8000u : 0;
                if (h > 0)
                    row[below] = (uint16_t)(h - 1);
                row[c] = (uint16_t)(h | sign);
                if (tie >= 0)
                    row[tie] = (uint16_t)(h | (sign ^ 0x8000u));
                double f[RESDIAG_N_FIELDS];
                rd_stats_compute(f, NULL, NULL, &t, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
                const double want = fabs(bf ? bf16_value((uint16_t)h) : f16_value((uint16_t)h));
                const double want_col = h == 0 ? 0.0 : (double)c;
                if (f[RESDIAG_FIELD_ABSMAX] != want || f[RESDIAG_FIELD_ABSMAX_COL] != want_col)
                    ck_abort_msg("%s, %lld columns, magnitude 0x%04x: absmax %.9g at %g, "
                                 "expected %.9g at %g", bf ? "bf16" : "f16", (long long)C, h,
                                 f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL], want,
                                 want_col);
                row[below] = row[c] = 0;
                if (tie >= 0)
                    row[tie] = 0;
            }
            free(row);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The sketch                                                                */
/* ------------------------------------------------------------------------ */

/* A tensor's data may start at any byte (a view into a packed buffer): the
 * statistics of a copy at offsets 1, 2 and 3 bytes equal those of the
 * aligned tensor bit for bit, on every path, also for rows the careful
 * loop rescans (NaN, Inf, huge f64). Under UBSan (build-asan) a misaligned
 * typed read anywhere in the kernels stops this test. */
START_TEST(stats_misaligned_data_gives_the_aligned_results)
{
    static const int64_t ashapes[][3] = { /* rows, cols, stride */
        { 5, 67, 0 }, { 20, 128, 0 }, { 3, 1100, 0 }, { 7, 40, 45 },
    };
    uint64_t s = 900;
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof ashapes / sizeof ashapes[0]; c++)
            for (int k = 0; k <= 16; k += 16) {
                int64_t rows = ashapes[c][0], cols = ashapes[c][1], stride = ashapes[c][2];
                double *v = random_values(&s, rows, cols, 1.0);
                v[cols + 3] = NAN; /* row 1: rescanned */
                v[2 * cols] = INFINITY;
                if (all_dtypes[d] == RESDIAG_DTYPE_F64)
                    v[(rows - 1) * cols + 1] = 1e300; /* its squares overflow */
                tensor t = tensor_from(v, all_dtypes[d], rows, cols, stride, 0.5);
                sketch_setup sk = sketch_make(k ? k : 1, (size_t)cols + 1, 41);
                sk.sp.k = k;
                char label[96];
                snprintf(label, sizeof label, "%s (%lld, %lld) stride %lld K=%d aligned",
                         dtype_label[d], (long long)rows, (long long)cols, (long long)stride,
                         k);
                check_against_reference(label, &t.view, &sk.sp);
                double f0[RESDIAG_N_FIELDS] = { 0 }, k0[RESDIAG_MAX_SKETCH] = { 0 };
                double *n0 = calloc((size_t)rows, sizeof *n0), *n1 = calloc((size_t)rows, sizeof *n1);
                ck_assert(n0 && n1);
                rd_stats_compute(f0, k ? k0 : NULL, n0, &t.view, &sk.sp);
                size_t bytes = (size_t)(rows * (stride ? stride : cols)) * dtype_size(all_dtypes[d]);
                char *base = malloc(bytes + 8);
                ck_assert_ptr_nonnull(base);
                for (int off = 1; off <= 3; off++) {
                    memcpy(base + off, t.buf, bytes);
                    resdiag_tensor u = t.view;
                    u.data = base + off;
                    double f1[RESDIAG_N_FIELDS] = { 0 }, k1[RESDIAG_MAX_SKETCH] = { 0 };
                    rd_stats_compute(f1, k ? k1 : NULL, n1, &u, &sk.sp);
                    for (int q = 0; q < RESDIAG_N_FIELDS; q++)
                        ck_assert_msg(memcmp(&f1[q], &f0[q], sizeof f0[q]) == 0,
                                      "%s at offset %d: %s %.17g, aligned %.17g", label, off,
                                      field_label(q), f1[q], f0[q]);
                    ck_assert_msg(memcmp(k1, k0, sizeof k0) == 0, "%s at offset %d: sketch",
                                  label, off);
                    ck_assert_msg(memcmp(n1, n0, (size_t)rows * sizeof *n0) == 0,
                                  "%s at offset %d: row norms", label, off);
                }
                free(base);
                free(n0);
                free(n1);
                sketch_free(&sk);
                tensor_free(&t);
                free(v);
            }
}
END_TEST

START_TEST(stats_sketch_matches_its_definition)
{
    /* K and tau_len: tau shorter than cols (wraps, not a multiple of K),
     * equal, longer; K from 1 to the maximum */
    const int ks[] = { 1, 5, 16, 64 };
    const size_t tls[] = { 7, 130, 1000 };
    uint64_t s = 60;
    for (size_t d = 0; d < 4; d++)
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 3; b++) {
                int64_t rows = 11, cols = 130;
                double *v = random_values(&s, rows, cols, 1.0);
                v[17] = NAN; /* contributes 0 */
                tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
                sketch_setup sk = sketch_make(ks[a], tls[b], 1000 + a + b);
                char label[64];
                snprintf(label, sizeof label, "%s K=%d tau_len=%zu", dtype_label[d], ks[a],
                         tls[b]);
                check_against_reference(label, &t.view, &sk.sp);
                sketch_free(&sk);
                tensor_free(&t);
                free(v);
            }
}
END_TEST

START_TEST(stats_sketch_of_zero_tensor_is_zero)
{
    double v[5 * 33];
    for (int k = 0; k < 5 * 33; k++)
        v[k] = k % 3 ? 0.0 : -0.0;
    for (size_t d = 0; d < 4; d++) {
        tensor t = tensor_from(v, all_dtypes[d], 5, 33, 0, 0.0);
        sketch_setup sk = sketch_make(16, 33, 8);
        double f[RESDIAG_N_FIELDS], sketch[16];
        rd_stats_compute(f, sketch, NULL, &t.view, &sk.sp);
        for (int m = 0; m < 16; m++)
            ck_assert_msg(sketch[m] == 0.0, "%s: sketch[%d] = %g", dtype_label[d], m,
                          sketch[m]);
        ck_assert(f[RESDIAG_FIELD_FROB] == 0.0);
        sketch_free(&sk);
        tensor_free(&t);
    }
}
END_TEST

static double vec_norm(const double *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

/* Sketches of a, b and c = a + b as stored in dtype dt; returns
 * ||sk(c) - sk(a) - sk(b)||_2 and sets ||c||_F and ||sk(b)||_2. */
static double linearity_gap(resdiag_dtype dt, uint64_t seed, double *c_frob, double *b_sketch)
{
    enum { R = 48, C = 200, K = 16 };
    uint64_t s = seed;
    double *a = random_values(&s, R, C, 1.0), *b = random_values(&s, R, C, 1.0);
    double *c = malloc(R * C * sizeof *c);
    ck_assert_ptr_nonnull(c);
    tensor ta = tensor_from(a, dt, R, C, 0, 0.0), tb = tensor_from(b, dt, R, C, 0, 0.0);
    /* the sum of the stored values, then stored (rounded) like a trainer's x + f */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            c[i * C + j] = (double)(elem(&ta.view, i, j) + elem(&tb.view, i, j));
    tensor tc = tensor_from(c, dt, R, C, 0, 0.0);
    sketch_setup sk = sketch_make(K, C, seed);
    double f[RESDIAG_N_FIELDS], ska[K], skb[K], skc[K], gap[K];
    rd_stats_compute(f, ska, NULL, &ta.view, &sk.sp);
    rd_stats_compute(f, skb, NULL, &tb.view, &sk.sp);
    rd_stats_compute(f, skc, NULL, &tc.view, &sk.sp);
    *c_frob = f[RESDIAG_FIELD_FROB];
    for (int m = 0; m < K; m++)
        gap[m] = skc[m] - ska[m] - skb[m];
    *b_sketch = vec_norm(skb, K);
    sketch_free(&sk);
    tensor_free(&ta);
    tensor_free(&tb);
    tensor_free(&tc);
    free(a);
    free(b);
    free(c);
    return vec_norm(gap, K);
}

START_TEST(stats_sketch_is_linear_for_f32)
{
    /* c = fl32(a + b) differs from a + b by e with |e_ij| <= 2^-24 |c_ij|,
     * so ||e||_F <= 6e-8 ||c||_F; the sketch keeps norms in expectation
     * (E||sk(e)||^2 = ||e||^2), and the double sums add ~1e-16. 1e-6 of
     * ||c||_F is ~17 times the expected gap. */
    for (uint64_t seed = 1; seed <= 5; seed++) {
        double frob, bsk;
        double gap = linearity_gap(RESDIAG_DTYPE_F32, seed, &frob, &bsk);
        ck_assert_msg(gap <= 1e-6 * frob, "gap %g vs ||c|| %g", gap, frob);
        /* the relation is discriminating: leaving out b is far outside it */
        ck_assert(bsk > 1000 * 1e-6 * frob);
    }
}
END_TEST

START_TEST(stats_sketch_is_linear_for_bf16)
{
    /* bf16 has 8 significant bits: rounding c = a + b to bf16 moves each
     * element by at most 2^-8 |c_ij| (unit roundoff 2^-8; the RMS relative
     * error of round-to-nearest is about 2^-9.3, hence "~2^-9" on average).
     * So ||e||_F <= 2^-8 ||c||_F, and the sketch's gap sk(e) has expected
     * norm ||e||_F. Allow 4 * 2^-8 ||c||_F = 2^-6 ||c||_F: 4x the worst-case
     * element bound, ~10x the expected gap. */
    for (uint64_t seed = 1; seed <= 5; seed++) {
        double frob, bsk;
        double gap = linearity_gap(RESDIAG_DTYPE_BF16, seed, &frob, &bsk);
        ck_assert_msg(gap <= 0x1p-6 * frob, "gap %g vs ||c|| %g", gap, frob);
        ck_assert_msg(gap > 0.0, "bf16 rounding must show in the gap");
        ck_assert(bsk > 10 * 0x1p-6 * frob);
    }
}
END_TEST

START_TEST(stats_sketch_preserves_squared_norm_on_average)
{
    /* E[sum_m sketch[m]^2] = ||x||_F^2 over random row and column signs.
     * One seed's sum has relative spread ~sqrt(2/K) = 0.35 for K = 16; over
     * 400 seeds the mean's spread is ~0.018, so 10% is ~5 sigma. */
    enum { R = 16, C = 96, K = 16, SEEDS = 400 };
    uint64_t s = 70;
    double *v = random_values(&s, R, C, 1.0);
    tensor t = tensor_from(v, RESDIAG_DTYPE_F32, R, C, 0, 0.0);
    double f[RESDIAG_N_FIELDS], sk2 = 0.0, lo = INFINITY, hi = 0.0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        sketch_setup sk = sketch_make(K, C, seed * 7919 + 1);
        double sketch[K];
        rd_stats_compute(f, sketch, NULL, &t.view, &sk.sp);
        double n2 = vec_norm(sketch, K) * vec_norm(sketch, K);
        sk2 += n2;
        lo = n2 < lo ? n2 : lo;
        hi = n2 > hi ? n2 : hi;
        sketch_free(&sk);
    }
    double frob2 = f[RESDIAG_FIELD_FROB] * f[RESDIAG_FIELD_FROB];
    ck_assert_msg(fabs(sk2 / SEEDS / frob2 - 1.0) < 0.1, "E[|sk|^2] / |x|^2 = %g",
                  sk2 / SEEDS / frob2);
    /* and the seeds do matter: single sketches spread widely */
    ck_assert(lo < 0.7 * frob2 && hi > 1.3 * frob2);
    tensor_free(&t);
    free(v);
}
END_TEST

START_TEST(stats_k_zero_needs_no_sketch_and_changes_nothing_else)
{
    uint64_t s = 80;
    double *v = random_values(&s, 7, 90, 1.0);
    tensor t = tensor_from(v, RESDIAG_DTYPE_F32, 7, 90, 0, 0.0);
    sketch_setup sk = sketch_make(16, 90, 9);
    rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
    double f[RESDIAG_N_FIELDS], g[RESDIAG_N_FIELDS], sketch[16], na[7], nb[7];
    rd_stats_compute(f, NULL, na, &t.view, &none);
    rd_stats_compute(g, sketch, nb, &t.view, &sk.sp);
    for (int q = 0; q < RESDIAG_FIELD_CALL_SEQ; q++)
        ck_assert(f[q] == g[q]);
    ck_assert_mem_eq(na, nb, sizeof na);
    check_against_reference("k = 0", &t.view, &none);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}
END_TEST

START_TEST(stats_row_norms_match_reference)
{
    uint64_t s = 90;
    for (size_t d = 0; d < 4; d++) {
        int64_t rows = 40, cols = 333;
        double *v = random_values(&s, rows, cols, 1.0);
        v[3 * cols + 1] = NAN;
        v[7 * cols + 2] = -INFINITY;
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, cols + 3, NAN);
        double f[RESDIAG_N_FIELDS], norms[40];
        rd_stats_compute(f, NULL, norms, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
        for (int64_t i = 0; i < rows; i++) {
            long double ref = 0.0L;
            for (int64_t j = 0; j < cols; j++) {
                double x = elem(&t.view, i, j);
                if (isfinite(x))
                    ref += (long double)x * x;
            }
            ref = sqrtl(ref);
            ck_assert_msg(fabsl(norms[i] - ref) <=
                              sum_tol(rd_stats_active_path(), all_dtypes[d]) * ref,
                          "%s row %lld: %.17g vs %.17Lg",
                          dtype_label[d], (long long)i, norms[i], ref);
        }
        tensor_free(&t);
        free(v);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Kernel paths: portable C, AVX2, AVX-512 give the same results             */
/* ------------------------------------------------------------------------ */

/* main() runs the whole suite once per available path (rd_stats_set_path),
 * so every test above checks every path against the reference. The tests
 * here also compute every path on the same input side by side: exact
 * quantities identical, sums within the reference tolerances of each other
 * and of the reference. */

/* One path's output on t. */
typedef struct path_out {
    double f[RESDIAG_N_FIELDS];
    double sketch[RESDIAG_MAX_SKETCH];
    double *norms; /* (rows) */
} path_out;

static void path_run(path_out *o, rd_stats_path p, const resdiag_tensor *t,
                     const rd_sketch_params *sp)
{
    o->norms = malloc((size_t)(t->rows > 0 ? t->rows : 1) * sizeof *o->norms);
    ck_assert_ptr_nonnull(o->norms);
    for (int q = 0; q < RESDIAG_N_FIELDS; q++)
        o->f[q] = -777.0;
    o->f[RESDIAG_FIELD_CALL_SEQ] = CALL_SEQ_SENTINEL;
    rd_stats_compute_path(p, o->f, sp->k > 0 ? o->sketch : NULL, o->norms, t, sp);
}

/* Every available path on t: each against the reference, each against the
 * portable path. Returns how many paths ran. */
static int check_all_paths(const char *label, const resdiag_tensor *t,
                           const rd_sketch_params *sp)
{
    reference r;
    reference_compute(&r, t, sp);
    path_out base;
    path_run(&base, RD_STATS_PORTABLE, t, sp);
    int ran = 0;
    const int dot = rd_stats_bf16_dot(); /* as main() set it for this round */
    /* every path, and the AVX-512 one also with its bf16 dot kernel
     * switched the other way (where the CPU has one) */
    for (int v = 0; v < RD_STATS_N_PATHS + 1; v++) {
        const int p = v < RD_STATS_N_PATHS ? v : RD_STATS_AVX512;
        if (!rd_stats_path_available((rd_stats_path)p))
            continue;
        if (v == RD_STATS_N_PATHS) {
            rd_stats_set_bf16_dot(!dot);
            if (rd_stats_bf16_dot() == dot)
                continue; /* no dot kernel on this CPU */
        }
        ran++;
        path_out o;
        path_run(&o, (rd_stats_path)p, t, sp);
        rd_stats_set_bf16_dot(dot);
        char lab[160];
        snprintf(lab, sizeof lab, "%s [%s%s]", label, rd_stats_path_name((rd_stats_path)p),
                 p == RD_STATS_AVX512 && (v == RD_STATS_N_PATHS ? !dot : dot) ? ", bf16 dot"
                                                                            : "");
        long double rel = field_tol((rd_stats_path)p, t->dtype);
        long double st = sum_tol((rd_stats_path)p, t->dtype);
        expect_fields(lab, o.f, &r, rel);
        for (int q = 0; q < RESDIAG_N_FIELDS; q++) {
            if (field_is_exact(q)) {
                ck_assert_msg((isnan(o.f[q]) && isnan(base.f[q])) || o.f[q] == base.f[q],
                              "%s: %s = %.17g, portable %.17g", lab, field_label(q), o.f[q],
                              base.f[q]);
                continue;
            }
            /* two results each within their tolerance of the reference
             * are within the sum of the two of each other; the same
             * bound as expect_fields' (the portable path has REL_TOL) */
            long double scale = q == RESDIAG_FIELD_FROB ? 0.0L
                                : q <= RESDIAG_FIELD_TOK_NORM_MAX ? r.norm_scale
                                                                  : r.rms_scale;
            long double tol = (rel + REL_TOL) * (fabsl(r.f[q]) + scale);
            expect_close(lab, field_label(q), o.f[q], base.f[q], tol);
        }
        for (int m = 0; m < sp->k; m++) {
            char what[48];
            snprintf(what, sizeof what, "sketch[%d]", m);
            expect_close(lab, what, o.sketch[m], r.sketch[m], st * r.sketch_l1[m]);
            expect_close(lab, what, o.sketch[m], base.sketch[m],
                         (st + REL_TOL) * r.sketch_l1[m]);
        }
        for (int64_t i = 0; i < t->rows; i++) {
            char what[48];
            snprintf(what, sizeof what, "row_norms[%lld]", (long long)i);
            expect_close(lab, what, o.norms[i], r.row_norm[i], st * r.row_norm[i]);
        }
        free(o.norms);
    }
    free(base.norms);
    reference_free(&r);
    return ran;
}

START_TEST(paths_portable_is_always_available_and_named)
{
    ck_assert(rd_stats_path_available(RD_STATS_PORTABLE));
    ck_assert(!rd_stats_path_available(RD_STATS_N_PATHS));
    ck_assert(!rd_stats_path_available((rd_stats_path)-1));
    ck_assert_str_eq(rd_stats_path_name(RD_STATS_PORTABLE), "portable");
    ck_assert_str_eq(rd_stats_path_name(RD_STATS_AVX2), "avx2");
    ck_assert_str_eq(rd_stats_path_name(RD_STATS_AVX512), "avx512");
    ck_assert_str_eq(rd_stats_path_name(RD_STATS_N_PATHS), "?");
    /* AVX-512 is only offered on top of AVX2 */
    if (rd_stats_path_available(RD_STATS_AVX512))
        ck_assert(rd_stats_path_available(RD_STATS_AVX2));
    /* an unavailable path is refused and changes nothing */
    rd_stats_path before = rd_stats_active_path();
    ck_assert_int_eq(rd_stats_set_path(RD_STATS_N_PATHS), -1);
    ck_assert_int_eq(rd_stats_active_path(), before);
    ck_assert_int_eq(rd_stats_set_path(RD_STATS_PORTABLE), 0);
    ck_assert_int_eq(rd_stats_active_path(), RD_STATS_PORTABLE);
}
END_TEST

START_TEST(paths_force_portable_variable_picks_the_portable_path)
{
    rd_stats_path best = RD_STATS_PORTABLE;
    for (int p = 0; p < RD_STATS_N_PATHS; p++)
        if (rd_stats_path_available((rd_stats_path)p))
            best = (rd_stats_path)p;
    ck_assert_int_eq(rd_stats_pick_path(NULL, NULL), best);
    ck_assert_int_eq(rd_stats_pick_path("", NULL), best);
    ck_assert_int_eq(rd_stats_pick_path("0", NULL), best);
    ck_assert_int_eq(rd_stats_pick_path("1", NULL), RD_STATS_PORTABLE);
    ck_assert_int_eq(rd_stats_pick_path("yes", NULL), RD_STATS_PORTABLE);
    /* forcing the portable path wins over disabling AVX-512 */
    ck_assert_int_eq(rd_stats_pick_path("1", "1"), RD_STATS_PORTABLE);
}
END_TEST

START_TEST(paths_disable_avx512_variable_picks_the_best_other_path)
{
    rd_stats_path best = RD_STATS_PORTABLE, no512 = RD_STATS_PORTABLE;
    for (int p = 0; p < RD_STATS_N_PATHS; p++)
        if (rd_stats_path_available((rd_stats_path)p)) {
            best = (rd_stats_path)p;
            if (p != RD_STATS_AVX512)
                no512 = (rd_stats_path)p;
        }
    /* on a CPU with AVX-512 the switch lands on AVX2 */
    if (rd_stats_path_available(RD_STATS_AVX512))
        ck_assert_int_eq(no512, RD_STATS_AVX2);
    ck_assert_int_eq(rd_stats_pick_path(NULL, ""), best);
    ck_assert_int_eq(rd_stats_pick_path(NULL, "0"), best);
    ck_assert_int_eq(rd_stats_pick_path("0", "1"), no512);
    ck_assert_int_eq(rd_stats_pick_path(NULL, "1"), no512);
    ck_assert_int_eq(rd_stats_pick_path(NULL, "yes"), no512);
}
END_TEST

START_TEST(paths_agree_on_random_data_for_every_dtype_shape_and_sketch_size)
{
    /* K: none, dividing 16 (register buckets), multiples of 16 (memory
     * buckets), others (portable fallback inside the vector paths); tau
     * shorter than a 16-column step, odd, longer than the row. */
    const int ks[] = { 0, 1, 4, 5, 16, 24, 32, 64 };
    const size_t tls[] = { 7, 769, 3001 };
    static const int64_t pshapes[][2] = {
        { 1, 1 }, { 2, 15 }, { 3, 16 }, { 4, 17 }, { 5, 31 }, { 9, 48 },
        { 16, 768 }, { 3, 1100 }, { 2, 2999 },
    };
    uint64_t s = 500;
    int ran = 0;
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof pshapes / sizeof pshapes[0]; c++)
            for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
                int64_t rows = pshapes[c][0], cols = pshapes[c][1];
                double *v = random_values(&s, rows, cols, 1.0);
                tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
                size_t tl = tls[(c + a) % 3];
                sketch_setup sk = sketch_make(ks[a] ? ks[a] : 1, tl, 77 + a);
                sk.sp.k = ks[a];
                char label[96];
                snprintf(label, sizeof label, "%s (%lld, %lld) K=%d tau_len=%zu",
                         dtype_label[d], (long long)rows, (long long)cols, ks[a], tl);
                ran = check_all_paths(label, &t.view, &sk.sp);
                sketch_free(&sk);
                tensor_free(&t);
                free(v);
            }
    ck_assert_int_ge(ran, 1);
}
END_TEST

START_TEST(paths_agree_on_strided_rows_with_poisoned_padding)
{
    const double pads[] = { NAN, -INFINITY, 1e300 };
    uint64_t s = 501;
    for (size_t d = 0; d < 4; d++)
        for (size_t p = 0; p < 3; p++) {
            int64_t rows = 21, cols = 83, stride = 101;
            double *v = random_values(&s, rows, cols, 1.0);
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, stride, pads[p]);
            sketch_setup sk = sketch_make(16, 85, 5);
            char label[96];
            snprintf(label, sizeof label, "%s stride %lld pad %g", dtype_label[d],
                     (long long)stride, pads[p]);
            check_all_paths(label, &t.view, &sk.sp);
            sketch_free(&sk);
            tensor_free(&t);
            free(v);
        }
}
END_TEST

START_TEST(paths_agree_on_nan_and_inf)
{
    uint64_t s = 502;
    for (size_t d = 0; d < 4; d++) {
        int64_t rows = 30, cols = 100;
        double *v = random_values(&s, rows, cols, 1.0);
        v[0] = NAN;                    /* the row's first value: shift y0 */
        v[1 * cols + 17] = INFINITY;   /* inside a 16-column step */
        v[2 * cols + 99] = -INFINITY;  /* in the scalar tail */
        v[3 * cols + 50] = NAN;
        v[3 * cols + 51] = INFINITY;
        for (int64_t j = 0; j < cols; j++)
            v[5 * cols + j] = j % 2 ? NAN : -INFINITY; /* nothing finite */
        v[9 * cols + 3] = 1e4;         /* ABSMAX in a row that is fine */
        v[10 * cols + 3] = -1e4;       /* its tie later: row 9 wins */
        v[11 * cols + 4] = 1e4;
        v[11 * cols + 5] = NAN;        /* tie in a careful row */
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
        sketch_setup sk = sketch_make(16, 101, 6);
        check_all_paths(dtype_label[d], &t.view, &sk.sp);
        double f[RESDIAG_N_FIELDS];
        for (int p = 0; p < RD_STATS_N_PATHS; p++) {
            if (!rd_stats_path_available((rd_stats_path)p))
                continue;
            rd_stats_compute_path((rd_stats_path)p, f, NULL, NULL, &t.view,
                                  &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
            ck_assert(f[RESDIAG_FIELD_NAN_COUNT] == 3 + 50);
            ck_assert(f[RESDIAG_FIELD_INF_COUNT] == 3 + 50);
            ck_assert(f[RESDIAG_FIELD_ABSMAX] == elem(&t.view, 9, 3)); /* 1e4 as stored */
            ck_assert(f[RESDIAG_FIELD_ABSMAX_COL] == 3.0);
        }
        sketch_free(&sk);
        tensor_free(&t);
        free(v);
    }
}
END_TEST

START_TEST(paths_agree_on_extreme_magnitudes)
{
    /* f64 beyond the square's range both ways, denormals, f32 near FLT_MAX
     * and denormal, f16 subnormals, bf16 large */
    static const struct {
        resdiag_dtype dt;
        double scale;
    } cases[] = {
        { RESDIAG_DTYPE_F64, 1e200 }, { RESDIAG_DTYPE_F64, 1e-200 },
        { RESDIAG_DTYPE_F64, 1e-310 }, { RESDIAG_DTYPE_F64, 1e150 },
        { RESDIAG_DTYPE_F32, 1e37 }, { RESDIAG_DTYPE_F32, 1e-41 },
        { RESDIAG_DTYPE_F16, 1e-6 }, { RESDIAG_DTYPE_F16, 1e4 },
        { RESDIAG_DTYPE_BF16, 1e36 }, { RESDIAG_DTYPE_BF16, 1e-39 },
    };
    uint64_t s = 503;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t rows = 12, cols = 263;
        double *v = random_values(&s, rows, cols, cases[c].scale);
        if (cases[c].dt == RESDIAG_DTYPE_F64)
            for (int64_t j = 0; j < cols; j++) /* one ordinary row among them */
                v[4 * cols + j] = rng_normal(&s);
        tensor t = tensor_from(v, cases[c].dt, rows, cols, 0, 0.0);
        sketch_setup sk = sketch_make(16, 263, 8);
        char label[64];
        snprintf(label, sizeof label, "%s scale %g", resdiag_dtype_name(cases[c].dt),
                 cases[c].scale);
        check_all_paths(label, &t.view, &sk.sp);
        sketch_free(&sk);
        tensor_free(&t);
        free(v);
    }
}
END_TEST

/* The float lanes of the vector kernels (see Tolerances) hand rows they
 * cannot sum well to their double loop. Each case below is built to take
 * one of those exits, or to sit just inside it, and must give the
 * reference's values on every path. */

START_TEST(paths_float_lanes_overflow_goes_to_double)
{
    /* x^2 overflows float from |x| ~ 1.84e19 on; the row sum of squares
     * already from |x| ~ 1.84e19 / sqrt(cols). 1e17 stays inside. */
    static const double scales[] = { 1e17, 1e18, 1.1e18, 1e19, 1.8e19, 2e19, 1e25,
                                     1e30, 1e36, 3e37 };
    uint64_t s = 601;
    for (size_t c = 0; c < sizeof scales / sizeof scales[0]; c++) {
        int64_t rows = 9, cols = 293;
        double *v = random_values(&s, rows, cols, 1.0);
        for (int64_t j = 0; j < cols; j++)
            v[2 * cols + j] *= scales[c];     /* a whole row at the scale */
        v[5 * cols + 7] = scales[c];          /* one value in an ordinary row */
        v[7 * cols + cols - 1] = -scales[c];  /* in the last, scalar column */
        for (size_t d = 0; d < 4; d++) {
            if (all_dtypes[d] == RESDIAG_DTYPE_F16)
                continue; /* no such magnitudes */
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
            sketch_setup sk = sketch_make(16, 293, 21);
            char label[64];
            snprintf(label, sizeof label, "%s scale %g", dtype_label[d], scales[c]);
            check_all_paths(label, &t.view, &sk.sp);
            sketch_free(&sk);
            tensor_free(&t);
        }
        free(v);
    }
}
END_TEST

START_TEST(paths_float_lanes_near_underflow_go_to_double)
{
    /* float squares reach FLT_MIN (2^-126) at |x| ~ 1.1e-19 and vanish
     * below ~1e-23; f32 and bf16 denormals start at 1.2e-38 */
    static const double scales[] = { 1e-15, 1e-18, 1e-19, 1e-20, 1e-23, 1e-30,
                                     1e-38, 1e-40, 1e-44 };
    uint64_t s = 602;
    for (size_t c = 0; c < sizeof scales / sizeof scales[0]; c++) {
        int64_t rows = 7, cols = 150;
        double *v = random_values(&s, rows, cols, 1.0);
        for (int64_t j = 0; j < cols; j++) {
            v[1 * cols + j] *= scales[c];                 /* a tiny row */
            v[4 * cols + j] *= j == 9 ? 1.0 : scales[c];  /* one normal value */
            v[6 * cols + j] = j % 3 ? 0.0 : scales[c];    /* zeros and tiny */
        }
        for (size_t d = 0; d < 4; d++) {
            if (all_dtypes[d] == RESDIAG_DTYPE_F16)
                continue; /* its subnormals start at 6e-5: squares are fine */
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
            /* K 8: the one-row kernels; K 16: the 16-row ones too */
            for (int k = 8; k <= 16; k += 8) {
                sketch_setup sk = sketch_make(k, 151, 22);
                char label[64];
                snprintf(label, sizeof label, "%s scale %g K %d", dtype_label[d], scales[c], k);
                check_all_paths(label, &t.view, &sk.sp);
                sketch_free(&sk);
            }
            tensor_free(&t);
        }
        free(v);
    }
    /* f16 subnormals (6e-8 .. 6e-5) */
    s = 603;
    double *v = random_values(&s, 5, 77, 1e-6);
    tensor t = tensor_from(v, RESDIAG_DTYPE_F16, 5, 77, 0, 0.0);
    sketch_setup sk = sketch_make(16, 77, 23);
    check_all_paths("f16 subnormal", &t.view, &sk.sp);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}
END_TEST

START_TEST(paths_float_lanes_keep_the_std_under_a_large_mean)
{
    /* Rows of std 1 around a mean of c. The float lanes do not shift the
     * row, so from mean^2 > 3 var (c > 1.73) their variance would cancel;
     * such rows go to the double loop, shifted by the row's first value.
     * Either way each token's std must stay within F_TOL of itself, which
     * the field tolerance (relative to the rms, ~c) would not show. */
    static const double offsets[] = { 0.0, 1.0, 1.5, 1.7, 1.75, 2.0, 3.0, 30.0, 1e3, 1e4 };
    uint64_t s = 604;
    for (size_t c = 0; c < sizeof offsets / sizeof offsets[0]; c++) {
        int64_t rows = 16, cols = 517;
        double *v = malloc((size_t)(rows * cols) * sizeof *v);
        ck_assert_ptr_nonnull(v);
        for (int64_t i = 0; i < rows; i++) {
            /* a row mean of exactly c: centre the noise */
            double m = 0.0;
            for (int64_t j = 0; j < cols; j++)
                m += v[i * cols + j] = rng_normal(&s);
            m /= (double)cols;
            for (int64_t j = 0; j < cols; j++)
                v[i * cols + j] += offsets[c] - m;
        }
        for (size_t d = 0; d < 4; d++) {
            tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
            sketch_setup sk = sketch_make(16, 517, 24);
            char label[64];
            snprintf(label, sizeof label, "%s mean %g", dtype_label[d], offsets[c]);
            check_all_paths(label, &t.view, &sk.sp);
            reference r;
            reference_compute(&r, &t.view, &sk.sp);
            for (int p = 0; p < RD_STATS_N_PATHS; p++) {
                if (!rd_stats_path_available((rd_stats_path)p))
                    continue;
                double f[RESDIAG_N_FIELDS];
                rd_stats_compute_path((rd_stats_path)p, f, NULL, NULL, &t.view,
                                      &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
                long double ref = r.f[RESDIAG_FIELD_TOK_STD_MEAN];
                long double tol = field_tol((rd_stats_path)p, all_dtypes[d]) * ref;
                ck_assert_msg(fabsl(f[RESDIAG_FIELD_TOK_STD_MEAN] - ref) <= tol,
                              "%s [%s]: std mean %.17g, expected %.17Lg (tolerance %.3Lg)",
                              label, rd_stats_path_name((rd_stats_path)p),
                              f[RESDIAG_FIELD_TOK_STD_MEAN], ref, tol);
            }
            reference_free(&r);
            sketch_free(&sk);
            tensor_free(&t);
        }
        free(v);
    }
}
END_TEST

START_TEST(paths_agree_on_every_width_and_stride)
{
    /* Widths around the vector kernels' steps (8, 16, 64 columns), blocks
     * (256, 1024) and scalar tails, rows of length 1 included; contiguous
     * and with an odd stride (unaligned rows of every dtype); sketch sizes
     * in registers (16, 4), in memory (32) and neither (5), with a column
     * sign table shorter than the row (it wraps) or not; ABSMAX tied across
     * rows, so that the first row holding it must win. */
    static const int64_t widths[] = { 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65,
                                      127, 129, 255, 257, 1023, 1024, 1025, 1087, 2113 };
    static const int ks[] = { 16, 4, 32, 5 };
    uint64_t s = 605;
    int n = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int64_t rows = 5, cols = widths[w];
        double *v = random_values(&s, rows, cols, 2.0);
        v[1 * cols + cols / 2] = 40.0; /* the tie: row 1 first, row 3 too */
        v[3 * cols + cols / 3] = -40.0;
        for (size_t d = 0; d < 4; d++) {
            for (int strided = 0; strided < 2; strided++, n++) {
                int k = ks[n % 4];
                size_t tau_len = n % 3 ? (size_t)cols + 1 : 7;
                tensor t = tensor_from(v, all_dtypes[d], rows, cols,
                                       strided ? cols + 3 : 0, NAN);
                sketch_setup sk = sketch_make(k, tau_len, 25 + (uint64_t)n);
                char label[96];
                snprintf(label, sizeof label, "%s cols %lld stride %lld K %d tau_len %zu",
                         dtype_label[d], (long long)cols,
                         (long long)(strided ? cols + 3 : cols), k, tau_len);
                check_all_paths(label, &t.view, &sk.sp);
                double f[RESDIAG_N_FIELDS];
                rd_stats_compute(f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
                ck_assert_msg(f[RESDIAG_FIELD_ABSMAX] == 40.0 &&
                                  f[RESDIAG_FIELD_ABSMAX_COL] == (double)(cols / 2),
                              "%s: ABSMAX %g at %g", label, f[RESDIAG_FIELD_ABSMAX],
                              f[RESDIAG_FIELD_ABSMAX_COL]);
                sketch_free(&sk);
                tensor_free(&t);
            }
        }
        free(v);
    }
}
END_TEST

/* The vector paths read up to 16 rows per kernel call (AVX-512: widths
 * that are multiples of 64, in float blocks of 1024 columns; AVX2: any width, in float blocks of
 * 512 columns and a scalar tail; K = 0 or 16 with tau_len >= cols) and
 * leave other shapes to their one-row kernel: every row count around
 * those blocks (and around the 64-token blocks of stats.c), contiguous and
 * with an odd stride, widths they take and widths they do not, each
 * sketch case. */
START_TEST(paths_agree_on_row_blocks_of_every_row_count)
{
    /* the AVX-512 kernel's widths and others; then the AVX2 kernel's
     * steps (32 columns), blocks (512) and tails, for fewer row counts */
    static const int64_t widths[] = { 64, 128, 768, 1024, 65, 1088, 2048,
                                      1, 7, 31, 32, 255, 256, 257, 511, 512, 513, 1023 };
    static const resdiag_dtype dts[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_BF16,
                                         RESDIAG_DTYPE_F16 };
    static const char *const dnames[] = { "f32", "bf16", "f16" };
    int64_t counts[33 + 7];
    for (int c = 0; c < 33; c++)
        counts[c] = c + 1;
    const int64_t extra[] = { 47, 48, 49, 63, 64, 65, 130 };
    memcpy(counts + 33, extra, sizeof extra);
    uint64_t s = 700;
    int n = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (size_t d = 0; d < 3; d++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++, n++) {
                int64_t rows = counts[c], cols = widths[w];
                /* wider rows, and the AVX2 widths, only for some counts:
                 * the test stays fast */
                if (((cols > 768 && rows > 17) || (w >= 7 && rows > 2 && rows % 16 > 1 &&
                                                   rows % 16 != 15)) &&
                    rows != 64 && rows != 130)
                    continue;
                double *v = random_values(&s, rows, cols, 1.0);
                int64_t stride = n % 2 ? cols + 3 : 0;
                tensor t = tensor_from(v, dts[d], rows, cols, stride, NAN);
                int variant = n % 3; /* K 16 in blocks, K 0, K 16 with a wrapping tau */
                sketch_setup sk = sketch_make(16, variant == 2 ? 7 : (size_t)cols + 1,
                                              (uint64_t)n);
                sk.sp.k = variant == 1 ? 0 : 16;
                char label[96];
                snprintf(label, sizeof label, "%s rows %lld cols %lld stride %lld K %d tau %zu",
                         dnames[d], (long long)rows, (long long)cols, (long long)stride,
                         sk.sp.k, sk.sp.tau_len);
                check_all_paths(label, &t.view, &sk.sp);
                sketch_free(&sk);
                tensor_free(&t);
                free(v);
            }
}
END_TEST

/* The AVX2 16-row kernel takes every width of f32, f16 and bf16 with K 0
 * or 16 (tau_len >= cols; bf16 with a sketch up to 4096 columns), and
 * declines the rest without reading (the row-by-row path does them): a
 * shape it should take and declines would pass every test above on the
 * slower path. Its sums of a taken shape are held to the reference there. */
/* The row sign as the run file defines it, written out here: the top bit
 * of splitmix64's finaliser of seed ^ (row * golden ratio). */
static double ref_row_sign(uint64_t seed, int64_t row)
{
    uint64_t z = seed ^ ((uint64_t)row * 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return z >> 63 ? -1.0 : 1.0;
}

/* Each path's signs of 1-16 rows at once (the 16-row calls'), bit for bit
 * the definition's, for rows near 0, negative, a rank's base r * 2^40 and
 * near INT64_MAX; nothing written past the n signs. */
START_TEST(paths_row_signs_of_16_rows_are_the_definition_bit_for_bit)
{
    static const uint64_t seeds[] = { 0, 1, 0x5eed, 0x8000000000000000u, UINT64_MAX,
                                      0x0123456789abcdefu };
    static const int64_t rows[] = { 0, 1, 13, -16, -1, (int64_t)3 << 40, ((int64_t)7 << 40) + 999,
                                    INT64_MAX - 15, INT64_MIN, 123456789 };
    for (int path = 0; path < RD_STATS_N_PATHS; path++) {
        if (!rd_stats_path_available((rd_stats_path)path))
            continue;
        rd_row_signs_fn signs = rd_stats_row_signs((rd_stats_path)path);
        ck_assert_ptr_nonnull(signs);
        int plus = 0, total = 0;
        for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
                for (int n = 1; n <= RD_ROWS_MAX; n++) {
                    double sg[RD_ROWS_MAX + 1];
                    for (int q = 0; q <= RD_ROWS_MAX; q++)
                        sg[q] = 7.0;
                    signs(sg, seeds[s], rows[r], n);
                    for (int q = 0; q < n; q++) {
                        double want = ref_row_sign(seeds[s], (int64_t)((uint64_t)rows[r] + (uint64_t)q));
                        ck_assert_msg(sg[q] == want, "path %s seed %llx row %lld + %d of %d: %g, not %g",
                                      rd_stats_path_name((rd_stats_path)path),
                                      (unsigned long long)seeds[s], (long long)rows[r], q, n,
                                      sg[q], want);
                        plus += sg[q] > 0;
                        total++;
                    }
                    for (int q = n; q <= RD_ROWS_MAX; q++)
                        ck_assert_msg(sg[q] == 7.0, "path %s wrote sign %d of %d",
                                      rd_stats_path_name((rd_stats_path)path), q, n);
                }
        ck_assert_int_gt(plus, total / 4); /* both signs occur */
        ck_assert_int_lt(plus, 3 * total / 4);
    }
}
END_TEST

/* rd_block_sums as stats_impl.h documents it, value q of n tokens: 4
 * chains (token k in chain k mod 4) added (c0 + c1) + (c2 + c3); the
 * extremes in 2 (k even, k odd). */
static void ref_block_sums(rd_block_sums *o, const double *v, int n, int q)
{
    double s[4] = { 0 }, sq[4] = { 0 }, dv[4] = { 0 };
    double lo[2], hi[2], am[2] = { 0.0, 0.0 };
    const double x0 = v[q];
    lo[0] = lo[1] = hi[0] = hi[1] = x0;
    for (int k = 0; k < n; k++) {
        const double x = v[4 * k + q];
        const int c = k < n - n % 4 ? k % 4 : 0, e = k < n - n % 4 ? k % 2 : 0;
        s[c] += x - x0;
        sq[c] += x * x;
        lo[e] = x < lo[e] ? x : lo[e];
        hi[e] = x > hi[e] ? x : hi[e];
        am[e] = fabs(x) > am[e] ? fabs(x) : am[e];
    }
    o->s[q] = (s[0] + s[1]) + (s[2] + s[3]);
    o->sq[q] = (sq[0] + sq[1]) + (sq[2] + sq[3]);
    o->lo[q] = lo[1] < lo[0] ? lo[1] : lo[0];
    o->hi[q] = hi[1] > hi[0] ? hi[1] : hi[0];
    o->amax[q] = am[1] > am[0] ? am[1] : am[0];
    double mean = x0 + o->s[q] / n;
    const double c0 = isfinite(mean) ? mean : 0.0;
    for (int k = 0; k < n; k++) {
        const double d = v[4 * k + q] - c0;
        dv[k < n - n % 4 ? k % 4 : 0] += d * d;
    }
    o->dev[q] = (dv[0] + dv[1]) + (dv[2] + dv[3]);
}

/* Each path's sums of a block of 1-64 tokens' 4 values, bit for bit the
 * documented order of operations (so every path gives the moments over
 * tokens the same bits): random values of every sign and scale, equal
 * values, and values near DBL_MAX (whose mean overflows). */
START_TEST(paths_block_sums_of_tokens_follow_the_documented_order_bit_for_bit)
{
    double v[4 * 64];
    uint64_t st = 0x1234567u;
    for (int path = 0; path < RD_STATS_N_PATHS; path++) {
        if (!rd_stats_path_available((rd_stats_path)path))
            continue;
        rd_block_sums_fn sums = rd_stats_block_sums((rd_stats_path)path);
        ck_assert_ptr_nonnull(sums);
        for (int kind = 0; kind < 4; kind++)
            for (int n = 1; n <= 64; n++) {
                for (int i = 0; i < 4 * n; i++) {
                    st = st * 6364136223846793005u + 1442695040888963407u;
                    double u = (double)(st >> 11) * 0x1p-53 - 0.25;
                    v[i] = kind == 0   ? u
                           : kind == 1 ? ldexp(u, (int)(st % 200) - 100)
                           : kind == 2 ? 3.5
                                       : (u > 0 ? DBL_MAX : -DBL_MAX) * (0.5 + fabs(u));
                }
                rd_block_sums got, want;
                sums(&got, v, n);
                for (int q = 0; q < 4; q++)
                    ref_block_sums(&want, v, n, q);
                const double *g = &got.s[0], *w = &want.s[0];
                for (int f = 0; f < 24; f++)
                    ck_assert_msg(memcmp(&g[f], &w[f], sizeof *g) == 0,
                                  "path %s kind %d n %d field %d lane %d: %a, not %a",
                                  rd_stats_path_name((rd_stats_path)path), kind, n, f / 4, f % 4,
                                  g[f], w[f]);
            }
    }
}
END_TEST

START_TEST(paths_avx2_row_kernel_takes_the_shapes_it_is_for)
{
    rd_fast_rows_fn rows = rd_stats_rows_kernel(RD_STATS_AVX2);
    if (!rd_stats_path_available(RD_STATS_AVX2))
        return; /* no AVX2 on this CPU (or not built for x86) */
    ck_assert_ptr_nonnull(rows);
    enum { MAXC = 4097 };
    float *x = calloc(MAXC, sizeof(float)); /* zeros: also valid f16/bf16 */
    ck_assert_ptr_nonnull(x);
    sketch_setup sk = sketch_make(16, MAXC, 3);
    const double sg[RD_ROWS_MAX] = { 1.0 };
    static const int64_t widths[] = { 1, 7, 31, 32, 255, 256, 257, 768, 1023, 4096 };
    static const resdiag_dtype dts[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_F16,
                                         RESDIAG_DTYPE_BF16 };
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
        for (size_t d = 0; d < 3; d++)
            for (int k = 0; k <= 16; k += 16) {
                rd_rows_out o;
                double acc[16] = { 0 };
                sk.sp.k = k;
                ck_assert_msg(rows(&o, acc, sg, x, 0, 1, dts[d], widths[w], &sk.sp, -1.0) == 1,
                              "%s cols %lld K %d declined", resdiag_dtype_name(dts[d]),
                              (long long)widths[w], k);
            }
    rd_rows_out o;
    double acc[16] = { 0 };
    sk.sp.k = 16;
    ck_assert_int_eq(rows(&o, acc, sg, x, 0, 1, RESDIAG_DTYPE_BF16, 4097, &sk.sp, -1.0), 0);
    ck_assert_int_eq(rows(&o, acc, sg, x, 0, 1, RESDIAG_DTYPE_F64, 64, &sk.sp, -1.0), 0);
    ck_assert_int_eq(rows(&o, acc, sg, x, 0, 17, RESDIAG_DTYPE_F32, 64, &sk.sp, -1.0), 0);
    sk.sp.tau_len = 63; /* shorter than the row: it would wrap */
    ck_assert_int_eq(rows(&o, acc, sg, x, 0, 1, RESDIAG_DTYPE_F32, 64, &sk.sp, -1.0), 0);
    sk.sp.tau_len = MAXC;
    sk.sp.k = 8;
    ck_assert_int_eq(rows(&o, acc, sg, x, 0, 1, RESDIAG_DTYPE_F32, 64, &sk.sp, -1.0), 0);
    sketch_free(&sk);
    free(x);
}
END_TEST

/* The AVX-512 16-row kernel takes rows wider than one float block too
 * (multiples of 64 above 1024 columns; bf16 with a sketch up to 4096) and
 * sums each row's blocks as the one-row kernel does, which did those rows
 * before: every row's sum x and sum x^2 bit for bit rd_fast_row_avx512's,
 * its largest |x| the same, and the sketch (the rows' buckets times their
 * signs) within double rounding of the one-row buckets added up here.
 * bf16 rows of a multiple of 128 columns go through the dot kernel where
 * the CPU has AVX512-BF16 (turned off for the bit-for-bit part): its sums
 * are held to the float-lane bound, twice (its and the one-row kernel's
 * error), of the sums of |x| and x^2 computed here. */
START_TEST(paths_avx512_row_kernel_takes_wide_rows_with_the_one_row_sums)
{
    if (!rd_stats_path_available(RD_STATS_AVX512))
        return; /* no AVX-512 on this CPU (or not built for x86) */
    rd_fast_rows_fn rows = rd_stats_rows_kernel(RD_STATS_AVX512);
    ck_assert_ptr_nonnull(rows);
    static const int64_t widths[] = { 1088, 2048, 3136, 4096, 8192 };
    static const resdiag_dtype dts[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_F16,
                                         RESDIAG_DTYPE_BF16 };
    static const int counts[] = { 16, 5, 1 };
    uint64_t s = 703;
    for (int dot = 0; dot < 2; dot++) {
        rd_set_bf16_dot_avx512(dot);
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
            for (size_t d = 0; d < 3; d++)
                for (int k = 0; k <= 16; k += 16)
                    for (size_t c = 0; c < 3; c++) {
                        const int64_t cols = widths[w];
                        /* the dot kernel: bf16 only, where the CPU has it */
                        const int by_dot = dot && dts[d] == RESDIAG_DTYPE_BF16 && cols % 128 == 0;
                        if (dot && (!by_dot || !rd_bf16_dot_avx512()))
                            continue;
                        const int n = counts[c];
                        double *v = malloc((size_t)(n * cols) * sizeof *v);
                        ck_assert_ptr_nonnull(v);
                        for (int64_t i = 0; i < n * cols; i++) /* mean 0: no row handed back */
                            v[i] = exp(0.5 * rng_normal(&s)) * rng_normal(&s);
                        tensor t = tensor_from(v, dts[d], n, cols, 0, NAN);
                        sketch_setup sk = sketch_make(16, (size_t)cols + 1, 40 + w);
                        sk.sp.k = k;
                        double sg[RD_ROWS_MAX], acc[16] = { 0 }, want[16] = { 0 }, mag[16] = { 0 };
                        for (int r = 0; r < RD_ROWS_MAX; r++)
                            sg[r] = r % 3 ? 1.0 : -1.0;
                        const size_t row_bytes = (size_t)cols * dtype_size(dts[d]);
                        rd_rows_out o;
                        const int took =
                            rows(&o, acc, sg, t.buf, row_bytes, n, dts[d], cols, &sk.sp, -1.0);
                        const char *dn = resdiag_dtype_name(dts[d]);
                        if (dts[d] == RESDIAG_DTYPE_BF16 && k && cols > 4096) {
                            ck_assert_msg(took == 0, "bf16 cols %lld K 16 taken", (long long)cols);
                        } else {
                            ck_assert_msg(took == 1, "%s cols %lld K %d rows %d declined", dn,
                                          (long long)cols, k, n);
                            ck_assert_uint_eq(o.redo, 0);
                            double amax = -1.0, tot = 0.0; /* tot: sum |x| of all rows */
                            for (int r = 0; r < n; r++) {
                                rd_row_sums rs;
                                double rb[16] = { 0 };
                                const char *row = (const char *)t.buf + (size_t)r * row_bytes;
                                ck_assert_int_eq(rd_fast_row_avx512(&rs, rb, row, dts[d], cols,
                                                                    &sk.sp, -1.0, NULL, 0.0),
                                                 1);
                                double sa = 0.0, s2 = 0.0; /* sum |x|, sum x^2 */
                                for (int64_t j = 0; j < cols; j++) {
                                    const double x = elem(&t.view, r, j);
                                    sa += fabs(x);
                                    s2 += x * x;
                                }
                                const double g = by_dot ? 2.0 * (double)RD_TEST_G_F : 0.0;
                                ck_assert_msg(fabs(o.sx[r] - rs.sd) <= g * sa &&
                                                  fabs(o.sq[r] - rs.sq) <= g * s2 &&
                                                  (by_dot ||
                                                   (memcmp(&o.sx[r], &rs.sd, sizeof rs.sd) == 0 &&
                                                    memcmp(&o.sq[r], &rs.sq, sizeof rs.sq) == 0)),
                                              "%s cols %lld K %d row %d of %d dot %d: sums %a %a, "
                                              "the one-row kernel's %a %a",
                                              dn, (long long)cols, k, r, n, by_dot, o.sx[r],
                                              o.sq[r], rs.sd, rs.sq);
                                amax = rs.amax > amax ? rs.amax : amax;
                                tot += sa;
                                for (int u = 0; u < 16; u++) {
                                    want[u] += sg[r] * rb[u];
                                    mag[u] += fabs(rb[u]);
                                }
                            }
                            ck_assert_msg(o.amax == amax, "%s cols %lld: ABSMAX %g, not %g", dn,
                                          (long long)cols, o.amax, amax);
                            /* n + 1 double additions at most; the dot kernel's
                             * float buckets: twice the float-lane bound of the
                             * rows' sum of |x| (which bounds each bucket's) */
                            for (int u = 0; u < 16; u++)
                                ck_assert_msg(fabs(acc[u] - want[u]) <=
                                                  20 * DBL_EPSILON * mag[u] +
                                                  (by_dot ? 2.0 * (double)RD_TEST_G_F * tot
                                                          : 0.0),
                                              "%s cols %lld K %d bucket %d: %.17g, not %.17g", dn,
                                              (long long)cols, k, u, acc[u], want[u]);
                        }
                        sketch_free(&sk);
                        tensor_free(&t);
                        free(v);
                    }
    }
    rd_set_bf16_dot_avx512(1);
}
END_TEST

/* bf16 bit patterns the float lanes treat specially, at the 16-row
 * kernels' width (where the AVX-512 path's dot kernel, if the CPU has one,
 * reads them; it treats subnormals as 0): rows of subnormals only, of
 * subnormals among normal values, signed zeros, the smallest normal, the
 * largest finite (squares overflow float), NaN with payloads and +-Inf at
 * the first and the last column; each row its own case, in a 16-row block
 * of ordinary rows. */
START_TEST(paths_agree_on_bf16_special_values)
{
    enum { R = 20, C = 768 };
    static const uint16_t special[] = { 0x0001, 0x8001, 0x007f, 0x0000, 0x8000, 0x0080,
                                        0x7f7f, 0xff7f, 0x7fc1, 0xffff, 0x7f80, 0xff80 };
    uint64_t s = 702;
    for (int c = 0; c < 7; c++) {
        uint16_t *buf = malloc((size_t)R * C * sizeof *buf);
        ck_assert_ptr_nonnull(buf);
        for (int64_t i = 0; i < (int64_t)R * C; i++) {
            float f = (float)(2.0 * rng_unif(&s) - 1.0);
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            buf[i] = (uint16_t)(u >> 16);
        }
        uint16_t *row = buf + 5 * C; /* the case's row */
        for (int j = 0; j < C; j++) {
            uint16_t sub = (uint16_t)(1 + (uint16_t)(rng_unif(&s) * 0x7e)) |
                           (rng_unif(&s) < 0.5 ? 0x8000 : 0);
            switch (c) {
            case 0: row[j] = sub; break;                       /* subnormals only */
            case 1: row[j] = j % 3 ? sub : row[j]; break;      /* among normal values */
            case 2: row[j] = special[3 + j % 2]; break;        /* +-0 */
            case 3: row[j] = j % 2 ? special[5] : sub; break;  /* smallest normal */
            case 4: row[j] = j == 100 ? special[6 + j % 2] : row[j]; break;
            default: break;
            }
        }
        if (c == 5) { /* NaN payloads, first and last column; a subnormal ABSMAX row */
            row[0] = special[8];
            row[C - 1] = special[9];
            for (int j = 0; j < C; j++)
                buf[7 * C + j] = j % 2 ? 0x0001 : 0x807f;
        } else if (c == 6) {
            row[0] = special[11];
            row[C - 1] = special[10];
        }
        resdiag_tensor t = resdiag_tensor_make(buf, RESDIAG_DTYPE_BF16, R, C, 0);
        sketch_setup sk = sketch_make(16, C + 1, 800 + (uint64_t)c);
        char label[64];
        snprintf(label, sizeof label, "bf16 special case %d", c);
        check_all_paths(label, &t, &sk.sp);
        sk.sp.k = 0;
        snprintf(label, sizeof label, "bf16 special case %d, K 0", c);
        check_all_paths(label, &t, &sk.sp);
        sk.sp.k = 16;
        sketch_free(&sk);
        free(buf);
    }
}
END_TEST

/* Rows a 16-row block hands back to the one-row path (NaN, Inf, float
 * overflow, near float underflow, all zero, a mean that dominates) at
 * every position in a block, their sketch counted once, and ABSMAX's
 * first column found whether the first row holding it was handed back
 * or not. */
START_TEST(paths_row_blocks_hand_back_rows_that_need_more)
{
    static const resdiag_dtype dts[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_BF16,
                                         RESDIAG_DTYPE_F16 };
    static const char *const dnames[] = { "f32", "bf16", "f16" };
    enum { R = 48 };
    uint64_t s = 701;
    /* each dtype at 768 columns, then at 1061: two AVX2 blocks and a
     * scalar tail of 5 */
    for (size_t dw = 0; dw < 6; dw++)
        for (int order = 0; order < 6; order++) {
            const size_t d = dw % 3;
            const int C = dw < 3 ? 768 : 1061;
            /* order 3: squares that overflow float (f16 cannot hold them:
             * an Inf there), no ABSMAX check; orders 0-2: an Inf instead */
            const int f16 = dts[d] == RESDIAG_DTYPE_F16, ovf = order == 3 && !f16;
            double *v = random_values(&s, R, C, 1.0);
            /* the bad rows, spread over the three blocks of 16 */
            v[0 * C + 5] = NAN;                        /* first row of a block */
            for (int j = 0; j < C; j++) {
                v[7 * C + j] = 0.0;                    /* all zero */
                v[9 * C + j] = ovf ? 1e20 * v[9 * C + j] : v[9 * C + j];
                v[12 * C + j] = f16 ? v[12 * C + j] : 1e-21 * v[12 * C + j]; /* squares subnormal */
                v[17 * C + j] = 3000.0 + v[17 * C + j]; /* mean >> std */
                v[38 * C + j] = -3000.0 + v[38 * C + j];
                /* mean 4e5 x std: float sums of x and x^2 would leave
                 * nothing of the variance (f32; bf16/f16 round them to
                 * near-constant rows) */
                for (int i = 2; i <= 11; i++)
                    if (i != 7 && i != 9) /* the zero and the overflow rows */
                        v[i * C + j] = 4000.0 + 0.01 * v[i * C + j];
            }
            v[9 * C + 1] = ovf ? v[9 * C + 1] : INFINITY;
            v[15 * C + 700] = -INFINITY;               /* last row of a block */
            v[31 * C + 0] = NAN;
            v[47 * C + 767] = NAN;                     /* the last row, last column */
            /* ABSMAX 4992 (above every other value; exact in f16 and bf16):
             * order 0: first in a row handed back (row 20 has a NaN), tied later
             *          in good rows 22 and 40;
             * order 1: first in good row 21, tied later in handed-back row 23;
             * order 2: only in handed-back row 26, after good rows whose own
             *          maxima rise (the block's maximum is not in a good row);
             * order 4: in good row 36, after an Inf in row 33 of its block;
             * order 5: in good row 41's last column, tied later in row 44 */
            const double big = 4992.0;
            int64_t want_row = 0, want_col = 0;
            if (order == 0) {
                v[20 * C + 3] = NAN;
                v[20 * C + 11] = big, v[22 * C + 2] = -big, v[40 * C + 1] = big;
                want_row = 20, want_col = 11;
            } else if (order == 1) {
                v[21 * C + 30] = -big, v[23 * C + 4] = NAN, v[23 * C + 5] = big;
                want_row = 21, want_col = 30;
            } else if (order == 2) {
                v[18 * C + 9] = 3000.0, v[24 * C + 9] = 4000.0;
                v[26 * C + 6] = NAN, v[26 * C + 60] = big;
                v[28 * C + 9] = 4500.0;
                want_row = 26, want_col = 60;
            } else if (order == 4) {
                v[33 * C + 2] = INFINITY, v[36 * C + 100] = -big;
                want_row = 36, want_col = 100;
            } else if (order == 5) {
                v[41 * C + C - 1] = big, v[44 * C + C - 2] = -big;
                want_row = 41, want_col = C - 1;
            }
            tensor t = tensor_from(v, dts[d], R, C, order == 1 ? C + 5 : 0, 7.0);
            sketch_setup sk = sketch_make(16, C + 1, 90 + (uint64_t)order);
            char label[64];
            snprintf(label, sizeof label, "%s cols %d order %d", dnames[d], C, order);
            check_all_paths(label, &t.view, &sk.sp);
            int64_t nan = 0, inf = 0;
            for (int64_t i = 0; i < R; i++)
                for (int64_t j = 0; j < C; j++) {
                    double x = elem(&t.view, i, j);
                    nan += isnan(x) != 0;
                    inf += isinf(x) != 0; /* glibc's isinf(-Inf) is -1 */
                }
            for (int p = 0; p < RD_STATS_N_PATHS; p++) {
                if (!rd_stats_path_available((rd_stats_path)p))
                    continue;
                double f[RESDIAG_N_FIELDS], sketch[16];
                rd_stats_compute_path((rd_stats_path)p, f, sketch, NULL, &t.view, &sk.sp);
                ck_assert_msg(f[RESDIAG_FIELD_NAN_COUNT] == (double)nan &&
                                  f[RESDIAG_FIELD_INF_COUNT] == (double)inf,
                              "%s [%s]: NaN %g (want %lld), Inf %g (want %lld)", label,
                              rd_stats_path_name((rd_stats_path)p), f[RESDIAG_FIELD_NAN_COUNT],
                              (long long)nan, f[RESDIAG_FIELD_INF_COUNT], (long long)inf);
                if (order == 3) /* the 1e20 row holds the maximum */
                    continue;
                ck_assert_msg(f[RESDIAG_FIELD_ABSMAX] == big &&
                                  f[RESDIAG_FIELD_ABSMAX_COL] == (double)want_col,
                              "%s [%s]: ABSMAX %g at column %g, want %g at %lld (row %lld)",
                              label, rd_stats_path_name((rd_stats_path)p),
                              f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL], big,
                              (long long)want_col, (long long)want_row);
            }
            sketch_free(&sk);
            tensor_free(&t);
            free(v);
        }
}
END_TEST

START_TEST(paths_agree_on_a_model_sized_tensor)
{
    /* 512 tokens x 768, the shape hooks see; values like a pre-norm stream */
    uint64_t s = 504;
    int64_t rows = 512, cols = 768;
    double *v = random_values(&s, rows, cols, 3.0);
    for (size_t d = 0; d < 4; d++) {
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, 0, 0.0);
        sketch_setup sk = sketch_make(16, 769, 0x5eed);
        check_all_paths(dtype_label[d], &t.view, &sk.sp);
        sketch_free(&sk);
        tensor_free(&t);
    }
    free(v);
}
END_TEST

/* rd_stats_compute_split(threads, ...): the reference's values within the
 * same tolerances, the exact quantities of one thread, and the same bits
 * every time (fixed parts merged in a fixed order). */
static void check_split_threads(const char *label, const resdiag_tensor *t,
                                const rd_sketch_params *sp, int threads)
{
    reference r;
    reference_compute(&r, t, sp);
    path_out one;
    path_run(&one, rd_stats_active_path(), t, sp);
    path_out two[2];
    for (int k = 0; k < 2; k++) {
        two[k].norms = malloc((size_t)(t->rows > 0 ? t->rows : 1) * sizeof(double));
        ck_assert_ptr_nonnull(two[k].norms);
        for (int q = 0; q < RESDIAG_N_FIELDS; q++)
            two[k].f[q] = -777.0;
        two[k].f[RESDIAG_FIELD_CALL_SEQ] = CALL_SEQ_SENTINEL;
        memset(two[k].sketch, 0, sizeof two[k].sketch);
        rd_stats_compute_split(threads, two[k].f, sp->k > 0 ? two[k].sketch : NULL,
                               two[k].norms, t, sp);
    }
    char lab[160];
    snprintf(lab, sizeof lab, "%s [split %d, %s]", label, threads,
             rd_stats_path_name(rd_stats_active_path()));
    ck_assert_msg(memcmp(two[0].f, two[1].f, sizeof two[0].f) == 0 &&
                      memcmp(two[0].sketch, two[1].sketch, sizeof two[0].sketch) == 0,
                  "%s: two runs differ", lab);
    expect_fields(lab, two[0].f, &r, field_tol(rd_stats_active_path(), t->dtype));
    for (int q = 0; q < RESDIAG_N_FIELDS; q++)
        if (field_is_exact(q))
            ck_assert_msg((isnan(two[0].f[q]) && isnan(one.f[q])) || two[0].f[q] == one.f[q],
                          "%s: %s = %.17g, one thread %.17g", lab, field_label(q),
                          two[0].f[q], one.f[q]);
    for (int m = 0; m < sp->k; m++) {
        char what[48];
        snprintf(what, sizeof what, "sketch[%d]", m);
        expect_close(lab, what, two[0].sketch[m], r.sketch[m],
                     sum_tol(rd_stats_active_path(), t->dtype) * r.sketch_l1[m]);
    }
    for (int64_t i = 0; i < t->rows; i++) {
        /* each token's norm is computed the same way on either thread */
        ck_assert_msg(two[0].norms[i] == one.norms[i], "%s: row_norms[%lld]", lab,
                      (long long)i);
    }
    for (int k = 0; k < 2; k++)
        free(two[k].norms);
    free(one.norms);
    reference_free(&r);
}

static void check_split(const char *label, const resdiag_tensor *t, const rd_sketch_params *sp)
{
    static const int threads[] = { 2, 3, 4, RESDIAG_MAX_HOOK_THREADS };
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++)
        check_split_threads(label, t, sp, threads[k]);
}

START_TEST(split_two_threads_match_reference_and_repeat_bit_for_bit)
{
    /* 700 x 768: 2.1 MB of f32, above the 1 MiB threshold; the halves are
     * rows 0..349 and 350..699 */
    uint64_t s = 600;
    int64_t rows = 700, cols = 768;
    for (size_t d = 0; d < 4; d++) {
        double *v = random_values(&s, rows, cols, 2.0);
        v[5 * cols + 7] = NAN;           /* careful rows in both halves */
        v[500 * cols + 9] = -INFINITY;
        v[10 * cols + 100] = 3e4;        /* ABSMAX tie across the halves: */
        v[600 * cols + 50] = -3e4;       /* the lower half's column wins */
        tensor t = tensor_from(v, all_dtypes[d], rows, cols, d == 1 ? cols + 5 : 0, NAN);
        sketch_setup sk = sketch_make(16, 769, 31);
        check_split(dtype_label[d], &t.view, &sk.sp);
        double f[RESDIAG_N_FIELDS];
        rd_stats_compute_split(2, f, NULL, NULL, &t.view, &(rd_sketch_params){ 0, NULL, 0, 0, 0, 0 });
        ck_assert(f[RESDIAG_FIELD_ABSMAX_COL] == 100.0);
        ck_assert(f[RESDIAG_FIELD_NAN_COUNT] == 1.0 && f[RESDIAG_FIELD_INF_COUNT] == 1.0);
        sketch_free(&sk);
        tensor_free(&t);
        free(v);
    }
    /* fewer rows than threads: one part per row (3 rows of 1.2 MB) */
    double *w = random_values(&s, 3, 100000, 1.0);
    w[2 * 100000 + 7] = NAN;
    tensor u = tensor_from(w, RESDIAG_DTYPE_F32, 3, 100000, 0, 0.0);
    sketch_setup sk = sketch_make(16, 4097, 33);
    check_split("f32 3 x 100000", &u.view, &sk.sp);
    sketch_free(&sk);
    tensor_free(&u);
    free(w);
}
END_TEST

START_TEST(split_merges_halves_of_very_different_magnitudes)
{
    /* f64: rows of 1e200 in the upper half only, 1e-200 in the lower; and
     * small tensors (below the threshold, one thread) and 0 or 1 rows */
    uint64_t s = 601;
    int64_t rows = 400, cols = 512; /* 1.6 MB of f64 */
    double *v = random_values(&s, rows, cols, 1e-200);
    for (int64_t k = 200 * cols; k < rows * cols; k++)
        v[k] = v[k] * 1e200 * 1e200; /* 1e-200 -> 1e200, no overflow on the way */
    tensor t = tensor_from(v, RESDIAG_DTYPE_F64, rows, cols, 0, 0.0);
    sketch_setup sk = sketch_make(16, 513, 32);
    check_split("f64 1e-200 | 1e200", &t.view, &sk.sp);
    tensor_free(&t);
    const int64_t small_rows[] = { 0, 1, 2, 37 };
    for (size_t k = 0; k < 4; k++) {
        tensor u = tensor_from(v, RESDIAG_DTYPE_F32, small_rows[k], 33, 0, 0.0);
        check_split("small", &u.view, &sk.sp);
        tensor_free(&u);
    }
    sketch_free(&sk);
    free(v);
}
END_TEST

/* Threads computing the same tensor at once get bit-identical results. */
typedef struct thread_job {
    const resdiag_tensor *t;
    const rd_sketch_params *sp;
    double f[RESDIAG_N_FIELDS];
    double sketch[16];
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (int rep = 0; rep < 20; rep++)
        rd_stats_compute(j->f, j->sketch, NULL, j->t, j->sp);
    return NULL;
}

START_TEST(paths_concurrent_calls_agree_bit_for_bit)
{
    enum { NT = 4 };
    uint64_t s = 505;
    double *v = random_values(&s, 64, 768, 1.0);
    v[100] = NAN; /* a careful row too */
    tensor t = tensor_from(v, RESDIAG_DTYPE_BF16, 64, 768, 0, 0.0);
    sketch_setup sk = sketch_make(16, 769, 1);
    thread_job jobs[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].t = &t.view;
        jobs[i].sp = &sk.sp;
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < NT; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 1; i < NT; i++) {
        ck_assert_mem_eq(jobs[i].f, jobs[0].f, sizeof jobs[0].f);
        ck_assert_mem_eq(jobs[i].sketch, jobs[0].sketch, sizeof jobs[0].sketch);
    }
    ck_assert(jobs[0].f[RESDIAG_FIELD_NAN_COUNT] == 1.0);
    sketch_free(&sk);
    tensor_free(&t);
    free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* The whole suite once per kernel path this machine has, so that every test
 * checks every path against the reference. */
static check_round each_kernel_path(int round)
{
    static int has_dot;
    if (round == 0)
        has_dot = rd_stats_bf16_dot();
    if (round > RD_STATS_N_PATHS)
        return CHECK_ROUND_STOP;
    /* the last round: the AVX-512 path without its bf16 dot kernel */
    const int p = round < RD_STATS_N_PATHS ? round : RD_STATS_AVX512;
    if (!rd_stats_path_available((rd_stats_path)p) || (round == RD_STATS_N_PATHS && !has_dot))
        return CHECK_ROUND_SKIP;
    if (rd_stats_set_path((rd_stats_path)p) != 0)
        return CHECK_ROUND_FAIL;
    rd_stats_set_bf16_dot(round < RD_STATS_N_PATHS);
    printf("stats: kernel path %s%s\n", rd_stats_path_name((rd_stats_path)p),
           p == RD_STATS_AVX512 ? (rd_stats_bf16_dot() ? " (bf16 dot)" : " (no bf16 dot)")
                                : "");
    fflush(stdout);
    return CHECK_ROUND_RUN;
}

static const check_program program = {
    .name = "stats",
    .round = each_kernel_path,
};
CHECK_MAIN(&program,
           CHECK_CASE("conversions", 0),
               CHECK_TEST(f16_to_f32_matches_hand_computed_bit_patterns),
               CHECK_TEST(bf16_to_f32_matches_hand_computed_bit_patterns),
               CHECK_TEST(f16_to_f32_is_exact_for_every_pattern),
               CHECK_TEST(bf16_to_f32_is_exact_for_every_pattern),
           CHECK_CASE("signs", 0),
               CHECK_TEST(row_signs_are_balanced_and_depend_on_seed_and_row),
               CHECK_TEST(column_signs_are_balanced_and_independent_of_row_signs),
           CHECK_CASE("fields", 60),
               CHECK_TEST(stats_random_data_matches_reference_for_every_dtype_and_shape),
               CHECK_TEST(stats_strided_rows_ignore_the_padding),
               CHECK_TEST(stats_zero_rows_gives_nan_token_fields_and_zero_sketch),
               CHECK_TEST(stats_rms_of_constant_row_is_value),
               CHECK_TEST(stats_token_std_is_accurate_when_the_mean_dominates),
               CHECK_TEST(stats_absmax_column_is_the_first_largest_magnitude),
               CHECK_TEST(stats_absmax_column_is_found_across_scan_chunks),
               CHECK_TEST(stats_absmax_of_every_f16_and_bf16_magnitude),
               CHECK_TEST(stats_row_norms_match_reference),
               CHECK_TEST(stats_k_zero_needs_no_sketch_and_changes_nothing_else),
               CHECK_TEST(stats_misaligned_data_gives_the_aligned_results),
           CHECK_CASE("extremes", 60),
               CHECK_TEST(stats_huge_f32_values_do_not_overflow),
               CHECK_TEST(stats_f32_denormals_are_measured),
               CHECK_TEST(stats_f64_1e200_has_right_norms),
               CHECK_TEST(stats_values_near_the_top_of_the_range_give_inf_only_beyond_it),
               CHECK_TEST(stats_f64_tiny_values_have_right_norms),
               CHECK_TEST(stats_f64_rows_of_very_different_magnitudes_combine),
               CHECK_TEST(stats_nan_and_inf_are_counted_and_left_out),
               CHECK_TEST(stats_all_nan_row_has_zero_norm_and_is_a_token),
               CHECK_TEST(stats_all_nan_tensor_has_no_absmax_column),
           CHECK_CASE("sketch", 60),
               CHECK_TEST(stats_sketch_matches_its_definition),
               CHECK_TEST(stats_sketch_of_zero_tensor_is_zero),
               CHECK_TEST(stats_sketch_is_linear_for_f32),
               CHECK_TEST(stats_sketch_is_linear_for_bf16),
               CHECK_TEST(stats_sketch_preserves_squared_norm_on_average),
           CHECK_CASE("paths", 120),
               CHECK_TEST(paths_portable_is_always_available_and_named),
               CHECK_TEST(paths_force_portable_variable_picks_the_portable_path),
               CHECK_TEST(paths_disable_avx512_variable_picks_the_best_other_path),
               CHECK_TEST(paths_agree_on_random_data_for_every_dtype_shape_and_sketch_size),
               CHECK_TEST(paths_agree_on_strided_rows_with_poisoned_padding),
               CHECK_TEST(paths_agree_on_nan_and_inf),
               CHECK_TEST(paths_agree_on_extreme_magnitudes),
               CHECK_TEST(paths_agree_on_a_model_sized_tensor),
               CHECK_TEST(paths_float_lanes_overflow_goes_to_double),
               CHECK_TEST(paths_float_lanes_near_underflow_go_to_double),
               CHECK_TEST(paths_float_lanes_keep_the_std_under_a_large_mean),
               CHECK_TEST(paths_agree_on_every_width_and_stride),
               CHECK_TEST(paths_agree_on_row_blocks_of_every_row_count),
               CHECK_TEST(paths_row_blocks_hand_back_rows_that_need_more),
               CHECK_TEST(paths_avx2_row_kernel_takes_the_shapes_it_is_for),
               CHECK_TEST(paths_avx512_row_kernel_takes_wide_rows_with_the_one_row_sums),
               CHECK_TEST(paths_row_signs_of_16_rows_are_the_definition_bit_for_bit),
               CHECK_TEST(paths_block_sums_of_tokens_follow_the_documented_order_bit_for_bit),
               CHECK_TEST(paths_agree_on_bf16_special_values),
               CHECK_TEST(paths_concurrent_calls_agree_bit_for_bit),
               CHECK_TEST(split_two_threads_match_reference_and_repeat_bit_for_bit),
               CHECK_TEST(split_merges_halves_of_very_different_magnitudes))
