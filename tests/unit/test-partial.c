/*
 * test-partial.c - statistics computed elsewhere (resdiag_partial,
 * doc/PARTIAL.md): resdiag_partial_compute gives the members of their
 * definitions (checked against plain long double loops here, the sketch
 * from resdiag_sketch_layout's arrays), and a partial submitted for a site
 * records what the tensor itself records (f32, f64, f16, bf16, strided,
 * NaN and Inf, 0, 1 and many rows); a partial written by hand records the
 * fields its definitions give; a site's calls merge, the update ratio
 * comes from ratio_sum / ratio_rows or from row norms given with the
 * partials, a batch is its single calls; every
 * inconsistent member is refused, naming it; NULLs and no-op cases.
 */
#include <check.h>
#include <float.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"
#include "run-files.h"
#include "value-hash.h"

enum { D = 40, K = 8, SEED = 1234, MAX_ROWS = 1000 };
static const char *const sub_names[2] = { "attn", "mlp" };
static const char *const lparams[1] = { "mlp.w2" };
static const char *const mparams[1] = { "head.w" };

static resdiag *open_run(const char *name, int k)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 3, .cols = D, .sublayers = 2,
        .sublayer_names = sub_names, .layer_params = 1, .layer_param_names = lparams,
        .model_params = 1, .model_param_names = mparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.sketch_size = k;
    o.sketch_seed = SEED;
    return open_run_with(name, &m, &o);
}

/* ------------------------------------------------------------- tensors */

/* Deterministic values k / 64, |k| <= 255: exact in every dtype, so the
 * reference below sees exactly what the kernels read. Their sums are exact
 * on every path too (a float lane adds at most 16 terms per block: below
 * 2^20 units of 2^-12), so the 1e-12 below is the double path's bound on
 * every path, not the developer's CPU's. */
static double value(unsigned seed, int i)
{
    unsigned h = value_hash(seed, i);
    return (double)((int)(h % 511u) - 255) / 64.0;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* f16 of a value that is NaN, +-Inf, 0 or a normal f16 (all ours are). */
static uint16_t to_f16(double v)
{
    if (isnan(v))
        return 0x7e00;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (isinf(v))
        return sign | 0x7c00;
    if (v == 0)
        return sign;
    int e;
    double f = frexp(fabs(v), &e); /* |v| = f 2^e, 0.5 <= f < 1 */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                      (uint16_t)((f * 2 - 1) * 1024));
}

/* A tensor of the values x (rows, D) in dtype, row_stride D + pad (the
 * padding NaN, which must not be read); buf must hold rows * (D + pad)
 * doubles. */
static resdiag_tensor make_tensor(void *buf, const double *x, int rows, resdiag_dtype dtype,
                                  int pad)
{
    const int stride = D + pad;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < stride; j++) {
            double v = j < D ? x[i * D + j] : NAN;
            size_t at = (size_t)i * (size_t)stride + (size_t)j;
            switch (dtype) {
            case RESDIAG_DTYPE_F64: ((double *)buf)[at] = v; break;
            case RESDIAG_DTYPE_F32: ((float *)buf)[at] = (float)v; break;
            case RESDIAG_DTYPE_BF16:
                ((uint16_t *)buf)[at] = (uint16_t)(f32_bits((float)v) >> 16);
                break;
            case RESDIAG_DTYPE_F16: ((uint16_t *)buf)[at] = to_f16(v); break;
            }
        }
    return resdiag_tensor_make(buf, dtype, rows, D, pad ? stride : 0);
}

/* values of seed, with NaN, +Inf and -Inf in some rows */
static void fill(double *x, int rows, unsigned seed, int non_finite)
{
    for (int i = 0; i < rows * D; i++)
        x[i] = value(seed, i);
    if (non_finite && rows > 0) {
        x[0 * D + 5] = NAN;
        x[(rows - 1) * D + 0] = INFINITY;
        x[(rows / 2) * D + D - 1] = -INFINITY;
        x[(rows / 2) * D + 7] = NAN;
    }
}

/* ---------------------------------------------------------- reference */

/* The members of the partial of x (rows, D) from their definitions in
 * doc/PARTIAL.md, in long double, two passes for each (mean, m2); the
 * sketch from the layout's arrays for rows row0 on. */
static void reference(resdiag_partial *p, const double *x, int rows, const resdiag *r,
                      int64_t row0)
{
    static long double per[4][MAX_ROWS]; /* n_i, m_i, q_i, s_i */
    memset(p, 0, sizeof *p);
    p->rows = rows;
    p->cols = D;
    p->absmax = -1;
    p->absmax_col = NAN;
    long double sumsq = 0;
    for (int i = 0; i < rows; i++) {
        long double s = 0, s2 = 0;
        for (int j = 0; j < D; j++) {
            double v = x[i * D + j];
            if (isnan(v) || isinf(v)) {
                if (isnan(v))
                    p->nan_count++;
                else
                    p->inf_count++;
                continue;
            }
            s += v;
            s2 += (long double)v * v;
            if (fabs(v) > p->absmax) {
                p->absmax = fabs(v);
                p->absmax_col = j;
            }
        }
        sumsq += s2;
        long double m = s / D, dev = 0;
        for (int j = 0; j < D; j++) { /* a non-finite value counts as 0 */
            double v = isfinite(x[i * D + j]) ? x[i * D + j] : 0.0;
            dev += (v - m) * (v - m);
        }
        per[0][i] = sqrtl(s2);
        per[1][i] = m;
        per[2][i] = sqrtl(s2) / sqrtl(D);
        per[3][i] = sqrtl(dev / D);
    }
    p->sumsq = (double)sumsq;
    double *mean[4] = { &p->norm_mean, &p->mean_mean, &p->rms_mean, &p->std_mean };
    double *m2[4] = { &p->norm_m2, &p->mean_m2, &p->rms_m2, &p->std_m2 };
    for (int q = 0; q < 4; q++) {
        long double s = 0, d = 0;
        for (int i = 0; i < rows; i++)
            s += per[q][i];
        long double mu = s / rows;
        for (int i = 0; i < rows; i++)
            d += (per[q][i] - mu) * (per[q][i] - mu);
        *mean[q] = rows ? (double)mu : NAN;
        *m2[q] = (double)d;
    }
    p->norm_min = rows ? INFINITY : NAN;
    p->norm_max = rows ? -INFINITY : NAN;
    for (int i = 0; i < rows; i++) {
        p->norm_min = fmin(p->norm_min, (double)per[0][i]);
        p->norm_max = fmax(p->norm_max, (double)per[0][i]);
    }
    p->ratio_rows = -1;
    int32_t bucket[D];
    float col_sign[D], row_sign[MAX_ROWS];
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, D, bucket, col_sign, row0, rows, row_sign),
                     RESDIAG_OK);
    for (int m = 0; m < K; m++) {
        long double s = 0;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < D; j++)
                if (bucket[j] == m && isfinite(x[i * D + j]))
                    s += (long double)row_sign[i] * col_sign[j] * x[i * D + j];
        p->sketch[m] = (double)s;
    }
}

/* The recorded fields of a partial, from the formulas of doc/PARTIAL.md. */
static void fields_of(double *f, const resdiag_partial *p)
{
    const int any = p->rows > 0;
    for (int i = 0; i < RESDIAG_N_FIELDS; i++)
        f[i] = NAN;
    f[RESDIAG_FIELD_ROWS] = p->rows;
    f[RESDIAG_FIELD_COLS] = p->cols;
    f[RESDIAG_FIELD_FROB] = sqrt(p->sumsq);
    const double *pair[4][2] = { { &p->norm_mean, &p->norm_m2 }, { &p->mean_mean, &p->mean_m2 },
                                 { &p->rms_mean, &p->rms_m2 }, { &p->std_mean, &p->std_m2 } };
    const int field[4] = { RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_MEAN_MEAN,
                           RESDIAG_FIELD_TOK_RMS_MEAN, RESDIAG_FIELD_TOK_STD_MEAN };
    for (int q = 0; q < 4 && any; q++) {
        f[field[q]] = *pair[q][0];
        f[field[q] + 1] = sqrt(*pair[q][1] / p->rows);
    }
    if (any) {
        f[RESDIAG_FIELD_TOK_NORM_MIN] = p->norm_min;
        f[RESDIAG_FIELD_TOK_NORM_MAX] = p->norm_max;
    }
    f[RESDIAG_FIELD_ABSMAX] = p->absmax < 0 ? 0 : p->absmax;
    f[RESDIAG_FIELD_ABSMAX_COL] = p->absmax < 0 ? NAN : p->absmax_col;
    f[RESDIAG_FIELD_NAN_COUNT] = p->nan_count;
    f[RESDIAG_FIELD_INF_COUNT] = p->inf_count;
}

static int close_to(double g, double w, double tol, double scale)
{
    return (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * (fabs(w) + scale);
}

static const char *const member_names[] = {
    "rows", "cols", "sumsq", "norm_mean", "norm_m2", "norm_min", "norm_max", "mean_mean",
    "mean_m2", "rms_mean", "rms_m2", "std_mean", "std_m2", "absmax", "absmax_col",
    "nan_count", "inf_count", "ratio_sum", "ratio_rows",
};
#define N_MEMBERS ((int)(sizeof member_names / sizeof *member_names))

/* got's members (and sketch) against want's: counts and extremes exact,
 * the rest within tol (of the value, or for an m2 of rows * mean^2). */
static void assert_members(const resdiag_partial *got, const resdiag_partial *want,
                           double tol, const char *what)
{
    const double *g = (const double *)got, *w = (const double *)want;
    for (int i = 0; i < N_MEMBERS; i++) {
        /* an m2 is compared on the scale rows * mean^2 of its mean (the member before) */
        int is_m2 = strstr(member_names[i], "_m2") != NULL;
        double scale = 1 + (is_m2 ? w[0] * w[i - 1] * w[i - 1] : 0);
        ck_assert_msg(close_to(g[i], w[i], tol, scale), "%s: %s is %.17g, its definition gives "
                      "%.17g", what, member_names[i], g[i], w[i]);
    }
    for (int m = 0; m < K; m++)
        ck_assert_msg(close_to(got->sketch[m], want->sketch[m], tol, 1), "%s: sketch[%d] is "
                      "%.17g, its definition gives %.17g", what, m, got->sketch[m],
                      want->sketch[m]);
}

static void assert_fields(const double *got, const double *want, double tol, const char *what)
{
    for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
        if (f == RESDIAG_FIELD_CALL_SEQ)
            continue;
        ck_assert_msg(close_to(got[f], want[f], tol, tol > 0 ? 1 : 0),
                      "%s: field %s is %.17g, want %.17g", what,
                      resdiag_field_name((resdiag_field)f), got[f], want[f]);
    }
}

static void read_site(resdiag_reader *rd, int64_t step, resdiag_direction dir, int layer,
                      int sublayer, resdiag_site site, double *f, double *sk, int want_obs)
{
    int obs = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, step, dir, layer, sublayer, site, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, want_obs);
    if (sk)
        ck_assert_int_eq(resdiag_reader_sketch(rd, step, dir, layer, sublayer, site, sk),
                         RESDIAG_OK);
}

/* A valid partial of the rows of seed, computed by the library. */
static resdiag_partial computed(const resdiag *r, const double *x, int rows, int64_t row0)
{
    resdiag_partial p;
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, rows, D), row0, &p, NULL),
                     RESDIAG_OK);
    return p;
}

/* --------------------------------------------------------------- tests */

/* resdiag_partial_compute gives each member's definition, and a partial
 * submitted for a site records the fields and sketch the tensor itself
 * records (exact quantities and the sketch bit for bit, FROB and the
 * spreads within a few ulps: sqrt of the plain sums vs the kernels' scaled
 * ones), and the fields of doc/PARTIAL.md's formulas. */
START_TEST(compute_and_submit_record_what_the_tensor_records)
{
    static const resdiag_dtype dtypes[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_F64,
                                            RESDIAG_DTYPE_BF16, RESDIAG_DTYPE_F16 };
    static const int rows_of[] = { 0, 1, 7, MAX_ROWS };
    static double x[MAX_ROWS * D], buf[MAX_ROWS * (D + 3)], norms[MAX_ROWS];
    static double want_f[32][RESDIAG_N_FIELDS], want_sk[32][K];
    resdiag *r = open_run("compute.h5", K);
    int64_t step = 0;
    for (int dt = 0; dt < 4; dt++)
        for (int ri = 0; ri < 4; ri++)
            for (int nf = 0; nf < 2; nf++, step++) {
                const int rows = rows_of[ri], pad = nf ? 3 : 0;
                fill(x, rows, 7 + (unsigned)step, nf);
                resdiag_tensor t = make_tensor(buf, x, rows, dtypes[dt], pad);
                char what[96];
                snprintf(what, sizeof what, "%s, %d rows%s", resdiag_dtype_name(dtypes[dt]),
                         rows, nf ? ", strided, NaN and Inf" : "");
                resdiag_partial p, want;
                for (int i = 0; i < rows; i++)
                    norms[i] = -1;
                ck_assert_int_eq(resdiag_partial_compute(r, t, 0, &p, norms), RESDIAG_OK);
                reference(&want, x, rows, r, 0);
                assert_members(&p, &want, 1e-12, what);
                fields_of(want_f[step], &want);
                memcpy(want_sk[step], want.sketch, sizeof want_sk[step]);
                for (int i = 0; i < rows; i++) {
                    long double s = 0;
                    for (int j = 0; j < D; j++)
                        if (isfinite(x[i * D + j]))
                            s += (long double)x[i * D + j] * x[i * D + j];
                    ck_assert_msg(close_to(norms[i], (double)sqrtl(s), 1e-12, 0),
                                  "%s: row_norms[%d] %.17g", what, i, norms[i]);
                }
                ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
                ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 0, 1,
                                                         RESDIAG_STREAM_OUT, &p, "dev.py", 3),
                                 RESDIAG_OK);
                ck_assert_int_eq(RESDIAG_FWD(r, 1, 1, RESDIAG_STREAM_OUT, t), RESDIAG_OK);
                ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
            }
    close_run(r);

    resdiag_reader *rd = read_run("compute.h5");
    step = 0;
    for (int dt = 0; dt < 4; dt++)
        for (int ri = 0; ri < 4; ri++)
            for (int nf = 0; nf < 2; nf++, step++) {
                const int rows = rows_of[ri];
                fill(x, rows, 7 + (unsigned)step, nf);
                double fp[RESDIAG_N_FIELDS], ft[RESDIAG_N_FIELDS];
                double skp[K], skt[K];
                read_site(rd, step, RESDIAG_FORWARD, 0, 1, RESDIAG_STREAM_OUT, fp, skp, 1);
                read_site(rd, step, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, ft, skt, 1);
                char what[96];
                snprintf(what, sizeof what, "step %lld (%s, %d rows)", (long long)step,
                         resdiag_dtype_name(dtypes[dt]), rows);
                for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
                    int rounded = f == RESDIAG_FIELD_FROB || f == RESDIAG_FIELD_TOK_NORM_STD ||
                                  f == RESDIAG_FIELD_TOK_MEAN_STD ||
                                  f == RESDIAG_FIELD_TOK_RMS_STD ||
                                  f == RESDIAG_FIELD_TOK_STD_STD;
                    if (f == RESDIAG_FIELD_CALL_SEQ)
                        continue;
                    ck_assert_msg(close_to(fp[f], ft[f], rounded ? 4 * DBL_EPSILON : 0, 0),
                                  "%s: field %s from the partial %.17g, from the tensor %.17g",
                                  what, resdiag_field_name((resdiag_field)f), fp[f], ft[f]);
                }
                ck_assert_msg(memcmp(skp, skt, sizeof skp) == 0, "%s: sketches differ", what);
                /* and both what the definitions give */
                assert_fields(fp, want_f[step], 1e-12, what);
                for (int m = 0; m < K; m++)
                    ck_assert_msg(close_to(skp[m], want_sk[step][m], 1e-12, 1),
                                  "%s: sketch[%d] %.17g, its definition gives %.17g", what, m,
                                  skp[m], want_sk[step][m]);
            }
    resdiag_reader_destroy(rd);
    remove_run("compute.h5");
}
END_TEST

/* A partial written here from its definition (not by partial_compute)
 * records the fields of doc/PARTIAL.md's formulas; members past K are
 * ignored; no finite value (absmax -1): ABSMAX 0, ABSMAX_COL NaN. */
START_TEST(a_partial_written_by_hand_records_its_fields)
{
    /* 2 tokens of 40 values: row 0 all 0.5 (norm sqrt(10)), row 1 all
     * -1.5 except column 9 = 2.5 */
    resdiag_partial p;
    memset(&p, 0, sizeof p);
    const double n0 = sqrt(40 * 0.25), n1 = sqrt(39 * 2.25 + 6.25);
    const double m0 = 0.5, m1 = (39 * -1.5 + 2.5) / 40;
    const double s0 = 0, s1 = sqrt((39 * 2.25 + 6.25) / 40 - m1 * m1);
    p.rows = 2;
    p.cols = D;
    p.sumsq = 40 * 0.25 + 39 * 2.25 + 6.25;
    p.norm_mean = (n0 + n1) / 2;
    p.norm_m2 = (n0 - n1) * (n0 - n1) / 2;
    p.norm_min = n0;
    p.norm_max = n1;
    p.mean_mean = (m0 + m1) / 2;
    p.mean_m2 = (m0 - m1) * (m0 - m1) / 2;
    p.rms_mean = (n0 + n1) / 2 / sqrt(D);
    p.rms_m2 = p.norm_m2 / D;
    p.std_mean = (s0 + s1) / 2;
    p.std_m2 = (s0 - s1) * (s0 - s1) / 2;
    p.absmax = 2.5;
    p.absmax_col = 9;
    p.ratio_rows = -1;
    for (int m = 0; m < RESDIAG_MAX_SKETCH; m++)
        p.sketch[m] = m < K ? 0.25 * m - 1 : 1e300; /* past K: ignored */
    resdiag_partial none; /* 3 tokens whose values are all NaN or Inf */
    memset(&none, 0, sizeof none);
    none.rows = 3;
    none.cols = D;
    none.nan_count = 100;
    none.inf_count = 20;
    none.absmax = -1;
    none.absmax_col = NAN;
    none.ratio_rows = -1;

    resdiag *r = open_run("hand.h5", K);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_BACKWARD, 2, 0, RESDIAG_NORM_OUT, &p,
                                             "dev.py", 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN,
                                             &none, "dev.py", 2), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);

    resdiag_reader *rd = read_run("hand.h5");
    double f[RESDIAG_N_FIELDS], sk[K];
    read_site(rd, 0, RESDIAG_BACKWARD, 2, 0, RESDIAG_NORM_OUT, f, sk, 1);
    double want[RESDIAG_N_FIELDS];
    for (int i = 0; i < RESDIAG_N_FIELDS; i++)
        want[i] = NAN;
    want[RESDIAG_FIELD_ROWS] = 2;
    want[RESDIAG_FIELD_COLS] = D;
    want[RESDIAG_FIELD_FROB] = sqrt(n0 * n0 + n1 * n1);
    want[RESDIAG_FIELD_TOK_NORM_MEAN] = (n0 + n1) / 2;
    want[RESDIAG_FIELD_TOK_NORM_STD] = fabs(n1 - n0) / 2; /* population std of two values */
    want[RESDIAG_FIELD_TOK_NORM_MIN] = n0;
    want[RESDIAG_FIELD_TOK_NORM_MAX] = n1;
    want[RESDIAG_FIELD_TOK_MEAN_MEAN] = (m0 + m1) / 2;
    want[RESDIAG_FIELD_TOK_MEAN_STD] = fabs(m1 - m0) / 2;
    want[RESDIAG_FIELD_TOK_RMS_MEAN] = (n0 + n1) / 2 / sqrt(D);
    want[RESDIAG_FIELD_TOK_RMS_STD] = fabs(n1 - n0) / 2 / sqrt(D);
    want[RESDIAG_FIELD_TOK_STD_MEAN] = s1 / 2;
    want[RESDIAG_FIELD_TOK_STD_STD] = s1 / 2;
    want[RESDIAG_FIELD_ABSMAX] = 2.5;
    want[RESDIAG_FIELD_ABSMAX_COL] = 9;
    want[RESDIAG_FIELD_NAN_COUNT] = 0;
    want[RESDIAG_FIELD_INF_COUNT] = 0;
    assert_fields(f, want, 1e-14, "by hand");
    for (int m = 0; m < K; m++)
        ck_assert_double_eq(sk[m], 0.25 * m - 1);
    ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_BACKWARD, 2, 0, RESDIAG_NORM_OUT),
                     "dev.py:1");

    read_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN, f, sk, 1);
    ck_assert_double_eq(f[RESDIAG_FIELD_ROWS], 3);
    ck_assert_double_eq(f[RESDIAG_FIELD_FROB], 0);
    ck_assert_double_eq(f[RESDIAG_FIELD_ABSMAX], 0);
    ck_assert(isnan(f[RESDIAG_FIELD_ABSMAX_COL]));
    ck_assert_double_eq(f[RESDIAG_FIELD_NAN_COUNT], 100);
    ck_assert_double_eq(f[RESDIAG_FIELD_INF_COUNT], 20);
    for (int m = 0; m < K; m++)
        ck_assert_double_eq(sk[m], 0);
    resdiag_reader_destroy(rd);
    remove_run("hand.h5");
}
END_TEST

/* Two partial calls of one site in a step (the second computed from
 * row0 = the first's rows) hold what one tensor of all the rows holds,
 * with the first call's CALL_SEQ and call site; so do a tensor call
 * followed by a partial one. */
START_TEST(partial_calls_of_a_site_merge_like_one_tensor)
{
    static double x[9 * D];
    fill(x, 9, 31, 1);
    x[6 * D + 2] = 9.5; /* ABSMAX tied across calls: the first call's column wins */
    x[1 * D + 4] = -9.5;
    resdiag *r = open_run("merge.h5", K);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 2, 1, RESDIAG_NORM_IN, resdiag_f64(x, 1, D)), RESDIAG_OK);
    resdiag_partial a = computed(r, x, 4, 0), b = computed(r, x + 4 * D, 5, 4);
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_OUT, &a,
                                             "dev.py", 10), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_OUT, &b,
                                             "dev.py", 11), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_NORM_OUT, resdiag_f64(x, 9, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 2, 0, RESDIAG_NORM_OUT, resdiag_f64(x, 4, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 2, 0, RESDIAG_NORM_OUT, &b,
                                             "dev.py", 12), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);

    resdiag_reader *rd = read_run("merge.h5");
    double one[RESDIAG_N_FIELDS], two[RESDIAG_N_FIELDS], mixed[RESDIAG_N_FIELDS];
    double sk1[K], sk2[K], skm[K];
    read_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_OUT, one, sk1, 1);
    read_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_OUT, two, sk2, 1);
    read_site(rd, 0, RESDIAG_FORWARD, 2, 0, RESDIAG_NORM_OUT, mixed, skm, 1);
    assert_fields(two, one, 1e-12, "two partial calls");
    assert_fields(mixed, one, 1e-12, "a tensor and a partial call");
    ck_assert_double_eq(two[RESDIAG_FIELD_ABSMAX_COL], 4);
    ck_assert_double_eq(two[RESDIAG_FIELD_CALL_SEQ], 1);
    for (int m = 0; m < K; m++) {
        ck_assert_msg(close_to(sk2[m], sk1[m], 1e-12, 1), "sketch[%d] %.17g, one tensor %.17g",
                      m, sk2[m], sk1[m]);
        ck_assert(close_to(skm[m], sk1[m], 1e-12, 1));
    }
    ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_OUT),
                     "dev.py:10");
    double calls[2 * 3 * RESDIAG_N_BLOCK_SITES];
    ck_assert_int_eq(resdiag_reader_read(rd, "forward/site_calls", 0, 1, calls,
                                         sizeof calls / sizeof *calls), RESDIAG_OK);
    ck_assert_double_eq(calls[0 * RESDIAG_N_BLOCK_SITES + RESDIAG_NORM_OUT], 2);
    resdiag_reader_destroy(rd);
    remove_run("merge.h5");
}
END_TEST

/* sum over the rows with ||x_i|| > 0 of ||dx_i|| / ||x_i||, from the
 * partial_compute row norms; the count in *n */
static double ratio_sum(const double *in_norms, const double *br_norms, int rows, double *n)
{
    double s = 0;
    *n = 0;
    for (int i = 0; i < rows; i++)
        if (in_norms[i] > 0) {
            s += br_norms[i] / in_norms[i];
            *n += 1;
        }
    return s;
}

/* The update ratio from partials: the k-th STREAM_IN pairs with the k-th
 * BRANCH_OUT, whose ratio_sum / ratio_rows give the per-token mean as the
 * tensors' norms do; ratio_rows -1 leaves the step without it (RATIO_FROB
 * stays); a tensor paired with a partial cannot pair per token. */
START_TEST(update_ratio_from_ratio_sum_and_ratio_rows)
{
    static double x[5 * D], dx[5 * D];
    fill(x, 5, 41, 0);
    fill(dx, 5, 43, 0);
    for (int j = 0; j < D; j++)
        x[3 * D + j] = 0; /* a token of norm 0: left out of the per-token mean */
    resdiag *r = open_run("ratio.h5", K);
    const int at[2] = { 0, 2 }, n[2] = { 2, 3 };
    for (int s = 0; s < 3; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        for (int c = 0; c < 2; c++) {
            double in_norms[3], br_norms[3], cnt;
            resdiag_partial pi, pb;
            ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x + at[c] * D, n[c], D),
                                                     at[c], &pi, in_norms), RESDIAG_OK);
            ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(dx + at[c] * D, n[c], D),
                                                     at[c], &pb, br_norms), RESDIAG_OK);
            pb.ratio_sum = ratio_sum(in_norms, br_norms, n[c], &cnt);
            pb.ratio_rows = s == 1 && c == 1 ? -1 : cnt;
            /* layer 0: tensors; layer 1: partials; layer 2: a tensor
             * STREAM_IN with a partial BRANCH_OUT */
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_STREAM_IN,
                                         resdiag_f64(x + at[c] * D, n[c], D)), RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_BRANCH_OUT,
                                         resdiag_f64(dx + at[c] * D, n[c], D)), RESDIAG_OK);
            ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 1, 1, RESDIAG_BRANCH_OUT,
                                                     &pb, "dev.py", 1), RESDIAG_OK);
            ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_IN,
                                                     &pi, "dev.py", 2), RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, 2, 1, RESDIAG_STREAM_IN,
                                         resdiag_f64(x + at[c] * D, n[c], D)), RESDIAG_OK);
            ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 2, 1, RESDIAG_BRANCH_OUT,
                                                     &pb, "dev.py", 3), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    close_run(r);

    /* the definitions, in long double */
    long double sx = 0, sdx = 0, tok = 0;
    int tok_n = 0;
    for (int i = 0; i < 5; i++) {
        long double a = 0, b = 0;
        for (int j = 0; j < D; j++) {
            a += (long double)x[i * D + j] * x[i * D + j];
            b += (long double)dx[i * D + j] * dx[i * D + j];
        }
        sx += a;
        sdx += b;
        if (a > 0) {
            tok += sqrtl(b / a);
            tok_n++;
        }
    }
    const double want_frob = (double)sqrtl(sdx / sx), want_tok = (double)(tok / tok_n);
    resdiag_reader *rd = read_run("ratio.h5");
    for (int s = 0; s < 3; s++)
        for (int layer = 0; layer < 3; layer++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            ck_assert_int_eq(resdiag_reader_update(rd, s, layer, 1, u), RESDIAG_OK);
            ck_assert_msg(close_to(u[RESDIAG_UPDATE_RATIO_FROB], want_frob, 1e-12, 0),
                          "step %d layer %d: ratio_frob %.17g, want %.17g", s, layer,
                          u[RESDIAG_UPDATE_RATIO_FROB], want_frob);
            if (layer == 2 || (s == 1 && layer == 1))
                ck_assert_msg(isnan(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]),
                              "step %d layer %d: ratio_tok_mean %.17g, want NaN", s, layer,
                              u[RESDIAG_UPDATE_RATIO_TOK_MEAN]);
            else
                ck_assert_msg(close_to(u[RESDIAG_UPDATE_RATIO_TOK_MEAN], want_tok, 1e-12, 0),
                              "step %d layer %d: ratio_tok_mean %.17g, want %.17g", s, layer,
                              u[RESDIAG_UPDATE_RATIO_TOK_MEAN], want_tok);
        }
    resdiag_reader_destroy(rd);
    remove_run("ratio.h5");
}
END_TEST

/* one entry of resdiag_submit_partial_refs, alone: forward, sublayer 1 */
static resdiag_status ref1(resdiag *r, int layer, resdiag_site site, const resdiag_partial *p,
                           const double *norms, int line)
{
    resdiag_partial_ref e = { { RESDIAG_FORWARD, layer, 1, site, -1, line, "bind.py" }, p,
                              norms };
    int failed = -1;
    resdiag_status st = resdiag_submit_partial_refs(r, 1, &e, NULL, &failed);
    ck_assert_int_eq(failed, st != RESDIAG_OK);
    return st;
}

/* Partials submitted with their row norms (resdiag_submit_partial_refs)
 * pair the update ratio by the norms, as tensors do: the same per-token
 * mean as two tensors (bit for bit), whatever the BRANCH_OUT's ratio_sum /
 * ratio_rows say, also paired with a tensor; a partial with norms and one
 * without cannot pair. */
START_TEST(update_ratio_from_row_norms)
{
    static double x[5 * D], dx[5 * D];
    fill(x, 5, 51, 0);
    fill(dx, 5, 53, 0);
    for (int j = 0; j < D; j++)
        x[1 * D + j] = 0; /* a token of norm 0: left out of the per-token mean */
    resdiag *r = open_run("norms.h5", K);
    const int at[2] = { 0, 2 }, n[2] = { 2, 3 };
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        for (int c = 0; c < 2; c++) {
            resdiag_tensor tx = resdiag_f64(x + at[c] * D, n[c], D);
            resdiag_tensor tdx = resdiag_f64(dx + at[c] * D, n[c], D);
            double in_norms[3], br_norms[3];
            resdiag_partial pi, pb;
            ck_assert_int_eq(resdiag_partial_compute(r, tx, at[c], &pi, in_norms), RESDIAG_OK);
            ck_assert_int_eq(resdiag_partial_compute(r, tdx, at[c], &pb, br_norms), RESDIAG_OK);
            pb.ratio_sum = 99; /* not used when norms come with it */
            pb.ratio_rows = 1;
            /* layer 0: tensors; layer 1: partials with norms (in step 1 the
             * second BRANCH_OUT without); layer 2: a partial STREAM_IN with
             * norms and a tensor BRANCH_OUT */
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_STREAM_IN, tx), RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_BRANCH_OUT, tdx), RESDIAG_OK);
            ck_assert_int_eq(ref1(r, 1, RESDIAG_STREAM_IN, &pi, in_norms, 1), RESDIAG_OK);
            ck_assert_int_eq(ref1(r, 1, RESDIAG_BRANCH_OUT, &pb,
                                  s == 1 && c == 1 ? NULL : br_norms, 2), RESDIAG_OK);
            ck_assert_int_eq(ref1(r, 2, RESDIAG_STREAM_IN, &pi, in_norms, 3), RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, 2, 1, RESDIAG_BRANCH_OUT, tdx), RESDIAG_OK);
            /* norms at a site without an add are not read */
            ck_assert_int_eq(ref1(r, 0, RESDIAG_NORM_OUT, &pi, NULL, 4), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    /* the no-op and NULL cases */
    int failed = -1;
    ck_assert_int_eq(resdiag_submit_partial_refs(NULL, 1, NULL, "b", &failed), RESDIAG_OK);
    ck_assert_int_eq(failed, 0);
    resdiag_partial idle;
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, 1, D), 0, &idle, NULL),
                     RESDIAG_OK);
    ck_assert_int_eq(ref1(r, 0, RESDIAG_STREAM_IN, &idle, NULL, 6), RESDIAG_OK); /* no step */
    ck_assert_int_eq(resdiag_step_begin(r, 2), RESDIAG_OK);
    ck_assert_int_eq(ref1(r, 0, RESDIAG_STREAM_IN, NULL, NULL, 7), RESDIAG_E_NULL);
    ck_assert_ptr_nonnull(strstr(resdiag_errmsg(r), "resdiag_submit_partial_refs"));
    ck_assert_ptr_nonnull(strstr(resdiag_errmsg(r), "bind.py:7"));
    ck_assert_int_eq(resdiag_submit_partial_refs(r, 2, NULL, "b", &failed), RESDIAG_E_NULL);
    ck_assert_int_eq(failed, 2);
    ck_assert_int_eq(resdiag_submit_partial_refs(r, -1, NULL, "b", &failed), RESDIAG_E_INVALID);
    ck_assert_int_eq(failed, 1);
    ck_assert_int_eq(resdiag_submit_partial_refs(r, 0, NULL, "b", &failed), RESDIAG_OK);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);

    long double tok = 0;
    int tok_n = 0;
    for (int i = 0; i < 5; i++) {
        long double a = 0, b = 0;
        for (int j = 0; j < D; j++) {
            a += (long double)x[i * D + j] * x[i * D + j];
            b += (long double)dx[i * D + j] * dx[i * D + j];
        }
        if (a > 0) {
            tok += sqrtl(b / a);
            tok_n++;
        }
    }
    const double want_tok = (double)(tok / tok_n);
    resdiag_reader *rd = read_run("norms.h5");
    for (int s = 0; s < 2; s++) {
        double u0[RESDIAG_N_UPDATE_FIELDS];
        ck_assert_int_eq(resdiag_reader_update(rd, s, 0, 1, u0), RESDIAG_OK);
        ck_assert_msg(close_to(u0[RESDIAG_UPDATE_RATIO_TOK_MEAN], want_tok, 1e-12, 0),
                      "step %d: tensors' ratio_tok_mean %.17g, want %.17g", s,
                      u0[RESDIAG_UPDATE_RATIO_TOK_MEAN], want_tok);
        for (int layer = 1; layer < 3; layer++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            ck_assert_int_eq(resdiag_reader_update(rd, s, layer, 1, u), RESDIAG_OK);
            ck_assert_msg(u[RESDIAG_UPDATE_RATIO_FROB] == u0[RESDIAG_UPDATE_RATIO_FROB],
                          "step %d layer %d: ratio_frob %.17g, the tensors' %.17g", s, layer,
                          u[RESDIAG_UPDATE_RATIO_FROB], u0[RESDIAG_UPDATE_RATIO_FROB]);
            if (s == 1 && layer == 1)
                ck_assert_msg(isnan(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]),
                              "step 1 layer 1: ratio_tok_mean %.17g, want NaN (norms on one "
                              "side only)", u[RESDIAG_UPDATE_RATIO_TOK_MEAN]);
            else
                ck_assert_msg(u[RESDIAG_UPDATE_RATIO_TOK_MEAN] ==
                                  u0[RESDIAG_UPDATE_RATIO_TOK_MEAN],
                              "step %d layer %d: ratio_tok_mean %.17g, the tensors' %.17g", s,
                              layer, u[RESDIAG_UPDATE_RATIO_TOK_MEAN],
                              u0[RESDIAG_UPDATE_RATIO_TOK_MEAN]);
        }
    }
    resdiag_reader_destroy(rd);
    remove_run("norms.h5");
}
END_TEST

/* Every dataset of two runs (but the wall-clock times) holds the same
 * values, and the sites' call sites are the same. */
static void assert_same_runs(const char *a_name, const char *b_name)
{
    resdiag_reader *a = read_run(a_name), *b = read_run(b_name);
    ck_assert_int_eq(resdiag_reader_n_datasets(a), resdiag_reader_n_datasets(b));
    static double va[1 << 16], vb[1 << 16];
    int compared = 0;
    for (int i = 0; i < resdiag_reader_n_datasets(a); i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        int64_t dims[8];
        int rank = 0;
        if (strstr(name, "time") || resdiag_reader_dims(a, name, dims, 8, &rank) != RESDIAG_OK ||
            rank < 1)
            continue;
        size_t per = 1;
        for (int k = 1; k < rank; k++)
            per *= (size_t)dims[k];
        size_t len = per * (size_t)dims[0];
        ck_assert_uint_le(len, sizeof va / sizeof *va);
        if (resdiag_reader_read(a, name, 0, dims[0], va, len) != RESDIAG_OK)
            continue; /* not a float64 time series */
        ck_assert_int_eq(resdiag_reader_read(b, name, 0, dims[0], vb, len), RESDIAG_OK);
        for (size_t k = 0; k < len; k++)
            ck_assert_msg((isnan(va[k]) && isnan(vb[k])) || va[k] == vb[k],
                          "%s[%zu]: %.17g in %s, %.17g in %s", name, k, va[k], a_name, vb[k],
                          b_name);
        compared++;
    }
    ck_assert_int_ge(compared, 10);
    for (int dir = 0; dir < 2; dir++)
        for (int layer = 0; layer < 3; layer++)
            for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++)
                ck_assert_str_eq(resdiag_reader_callsite(a, dir, layer, 0, site),
                                 resdiag_reader_callsite(b, dir, layer, 0, site));
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
}

enum { N_BATCH = 8 };
static const char own_file[] = "own.py";
/* entries 3 and 5 name their own call site's file, the others the batch's */
static const resdiag_partial_site batch_sites[N_BATCH] = {
    { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, -1, 100, NULL },
    { RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_OUT, -1, 101, NULL },
    { RESDIAG_BACKWARD, 1, 0, RESDIAG_NORM_OUT, -1, 102, NULL },
    { RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_EMBED_OUT, -1, 103, own_file },
    { RESDIAG_BACKWARD, 2, 0, -1, 0, 104, NULL },                      /* mlp.w2 of layer 2 */
    { RESDIAG_BACKWARD, RESDIAG_MODEL_LEVEL, 0, -1, 0, 105, own_file }, /* head.w */
    { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, -1, 106, NULL },  /* merges with the first */
    { RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_OUT, -1, 107, NULL },
};
static const char batch_file[] = "batch.py";

/* The batch's partials: the repeated sites' second calls numbered on (from
 * row 2), the BRANCH_OUT ones with a ratio. */
static void batch_partials(const resdiag *r, resdiag_partial *p)
{
    static const int rows[N_BATCH] = { 2, 2, 3, 4, 2, 3, 3, 3 };
    static double x[N_BATCH][4 * D];
    for (int e = 0; e < N_BATCH; e++) {
        fill(x[e], 4, 60 + (unsigned)e, e == 2);
        p[e] = computed(r, x[e], rows[e], e >= 6 ? 2 : 0);
    }
    for (int e = 1; e < N_BATCH; e += 6) {
        p[e].ratio_sum = 0.5 * e;
        p[e].ratio_rows = p[e].rows;
    }
}

/* entry e as a single call */
static resdiag_status single_call(resdiag *r, int e, const resdiag_partial *p)
{
    const resdiag_partial_site *b = &batch_sites[e];
    const char *file = b->file ? b->file : batch_file;
    if (b->site == -1)
        return resdiag_param_grad_partial(r, b->layer,
                                          b->layer == RESDIAG_MODEL_LEVEL ? "head.w" : "mlp.w2",
                                          p, file, b->line);
    return resdiag_observe_partial(r, (resdiag_direction)b->dir, b->layer, b->sublayer,
                                   (resdiag_site)b->site, p, file, b->line);
}

/* resdiag_submit_partials (and resdiag_submit_partial_refs) of n entries
 * writes what n single calls write;
 * a bad entry in the middle is reported (the first failure returned, each
 * logged) and the others are still recorded. */
START_TEST(a_batch_is_its_single_calls)
{
    resdiag_partial p[N_BATCH];
    for (int bad = 0; bad < 2; bad++) {
        resdiag *a = open_run("batch.h5", K), *b = open_run("single.h5", K),
                *c = open_run("refs.h5", K);
        batch_partials(a, p);
        resdiag_partial_site sites[N_BATCH];
        memcpy(sites, batch_sites, sizeof sites);
        if (bad) {
            p[2].absmax_col = D;  /* E_INVALID */
            sites[4].param = 1;   /* no such parameter: E_RANGE */
        }
        ck_assert_int_eq(resdiag_step_begin(a, 0), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_begin(b, 0), RESDIAG_OK);
        log_all[0] = 0;
        ck_assert_int_eq(resdiag_submit_partials(a, N_BATCH, sites, p, batch_file),
                         bad ? RESDIAG_E_INVALID : RESDIAG_OK);
        if (bad) {
            ck_assert_ptr_nonnull(strstr(log_all, "member absmax_col"));
            ck_assert_ptr_nonnull(strstr(log_all, "batch.py:102"));
            ck_assert_ptr_nonnull(strstr(log_all, "parameter index 1 out of range 0..0"));
            ck_assert_ptr_nonnull(strstr(log_all, "batch.py:104"));
        }
        for (int e = 0; e < N_BATCH; e++)
            if (!bad || (e != 2 && e != 4))
                ck_assert_int_eq(single_call(b, e, &p[e]), RESDIAG_OK);
        /* the same entries by reference, without norms: the same run */
        resdiag_partial_ref refs[N_BATCH];
        for (int e = 0; e < N_BATCH; e++)
            refs[e] = (resdiag_partial_ref){ sites[e], &p[e], NULL };
        int failed = -1;
        ck_assert_int_eq(resdiag_step_begin(c, 0), RESDIAG_OK);
        ck_assert_int_eq(resdiag_submit_partial_refs(c, N_BATCH, refs, batch_file, &failed),
                         bad ? RESDIAG_E_INVALID : RESDIAG_OK);
        ck_assert_int_eq(failed, bad ? 2 : 0);
        ck_assert_int_eq(resdiag_step_end(c), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_begin(c, 1), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(c), RESDIAG_OK);
        close_run(c);
        ck_assert_int_eq(resdiag_step_end(a), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(b), RESDIAG_OK);
        /* an empty batch is a no-op */
        ck_assert_int_eq(resdiag_step_begin(a, 1), RESDIAG_OK);
        ck_assert_int_eq(resdiag_submit_partials(a, 0, NULL, NULL, batch_file), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(a), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_begin(b, 1), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(b), RESDIAG_OK);
        close_run(a);
        close_run(b);
        assert_same_runs("batch.h5", "single.h5");
        assert_same_runs("refs.h5", "single.h5");
        resdiag_reader *rd = read_run("batch.h5");
        double f[RESDIAG_N_FIELDS];
        int obs = -1;
        ck_assert_int_eq(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "head.w", f, &obs),
                         RESDIAG_OK);
        ck_assert_int_eq(obs, 1); /* recorded after the bad entries */
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_EMBED_OUT),
                         "own.py:103");
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN),
                         "batch.py:100");
        read_site(rd, 0, RESDIAG_BACKWARD, 1, 0, RESDIAG_NORM_OUT, f, NULL, !bad);
        double u[RESDIAG_N_UPDATE_FIELDS];
        ck_assert_int_eq(resdiag_reader_update(rd, 0, 0, 0, u), RESDIAG_OK);
        ck_assert_double_eq_tol(u[RESDIAG_UPDATE_RATIO_TOK_MEAN],
                                (0.5 + 3.5) / (p[1].rows + p[7].rows), 1e-15);
        resdiag_reader_destroy(rd);
        remove_run("batch.h5");
        remove_run("single.h5");
        remove_run("refs.h5");
    }
}
END_TEST

/* resdiag_param_grad_partial records what resdiag_param_grad_at records
 * for the tensor; an unknown name is E_RANGE, NULL ones E_NULL. */
START_TEST(param_grad_partial_records_the_gradient)
{
    static double x[6 * D];
    fill(x, 6, 77, 1);
    resdiag *r = open_run("param.h5", K);
    resdiag_partial p = computed(r, x, 6, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_partial(r, 1, "mlp.w2", &p, "dev.py", 5), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 2, "mlp.w2", resdiag_f64(x, 6, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_partial(r, RESDIAG_MODEL_LEVEL, "head.w", &p, "dev.py",
                                                6), RESDIAG_OK);
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_param_grad_partial(r, 1, "nope", &p, "dev.py", 7), RESDIAG_E_RANGE);
    ck_assert_ptr_nonnull(strstr(log_all, "'nope' is not a declared per-layer parameter"));
    ck_assert_int_eq(resdiag_param_grad_partial(r, 3, "mlp.w2", &p, "dev.py", 7),
                     RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_param_grad_partial(r, 1, NULL, &p, "dev.py", 8), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_param_grad_partial(r, 1, "mlp.w2", NULL, "dev.py", 9),
                     RESDIAG_E_NULL);
    ck_assert_ptr_nonnull(strstr(log_all, "the partial statistics is NULL (dev.py:9)"));
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);
    resdiag_reader *rd = read_run("param.h5");
    double fp[RESDIAG_N_FIELDS], ft[RESDIAG_N_FIELDS], fm[RESDIAG_N_FIELDS];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 1, "mlp.w2", fp, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 2, "mlp.w2", ft, &obs), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "head.w", fm, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    assert_fields(fp, ft, 4 * DBL_EPSILON, "parameter gradient");
    assert_fields(fm, ft, 4 * DBL_EPSILON, "model parameter gradient");
    resdiag_reader_destroy(rd);
    remove_run("param.h5");
}
END_TEST

/* One inconsistent member of an otherwise valid partial. */
typedef struct bad_member {
    const char *member; /* named in the message */
    int index;          /* which double of the struct */
    double value;
    resdiag_status status;
} bad_member;

#define AT(m) ((int)(offsetof(resdiag_partial, m) / sizeof(double)))

/* Every inconsistent member is refused (E_INVALID; E_SHAPE for another
 * width), logged as a client bug naming the member and file:line, and
 * nothing is recorded; through every entry point. */
START_TEST(inconsistent_members_are_refused)
{
    static double x[3 * D];
    fill(x, 3, 91, 1); /* 3 rows, 4 non-finite values */
    const bad_member bad[] = {
        { "rows", AT(rows), -1, RESDIAG_E_INVALID },
        { "rows", AT(rows), 2.5, RESDIAG_E_INVALID },
        { "rows", AT(rows), NAN, RESDIAG_E_INVALID },
        { "cols", AT(cols), 0, RESDIAG_E_INVALID },
        { "cols", AT(cols), 39.5, RESDIAG_E_INVALID },
        { "columns", AT(cols), D + 1, RESDIAG_E_SHAPE },
        { "nan_count", AT(nan_count), -1, RESDIAG_E_INVALID },
        { "inf_count", AT(inf_count), 0.5, RESDIAG_E_INVALID },
        { "nan_count", AT(nan_count), 3 * D, RESDIAG_E_INVALID }, /* + inf_count > rows*cols */
        { "sumsq", AT(sumsq), -1, RESDIAG_E_INVALID },
        { "sumsq", AT(sumsq), NAN, RESDIAG_E_INVALID },
        { "norm_m2", AT(norm_m2), -1e-9, RESDIAG_E_INVALID },
        { "mean_m2", AT(mean_m2), -1, RESDIAG_E_INVALID },
        { "rms_m2", AT(rms_m2), NAN, RESDIAG_E_INVALID },
        { "std_m2", AT(std_m2), -2, RESDIAG_E_INVALID },
        { "norm_min", AT(norm_min), 1e9, RESDIAG_E_INVALID }, /* > norm_max */
        { "norm_min", AT(norm_min), NAN, RESDIAG_E_INVALID },
        { "norm_min", AT(norm_max), NAN, RESDIAG_E_INVALID },
        { "norm_min", AT(norm_min), -1, RESDIAG_E_INVALID },
        { "norm_mean", AT(norm_mean), NAN, RESDIAG_E_INVALID },
        { "mean_mean", AT(mean_mean), INFINITY, RESDIAG_E_INVALID },
        { "mean_mean", AT(mean_mean), NAN, RESDIAG_E_INVALID },
        { "rms_mean", AT(rms_mean), INFINITY, RESDIAG_E_INVALID },
        { "std_mean", AT(std_mean), -0.5, RESDIAG_E_INVALID },
        { "absmax", AT(absmax), NAN, RESDIAG_E_INVALID },
        { "absmax", AT(absmax), -1, RESDIAG_E_INVALID }, /* but values are finite */
        { "absmax", AT(absmax), INFINITY, RESDIAG_E_INVALID },
        { "absmax_col", AT(absmax_col), D, RESDIAG_E_INVALID },
        { "absmax_col", AT(absmax_col), -1, RESDIAG_E_INVALID },
        { "absmax_col", AT(absmax_col), NAN, RESDIAG_E_INVALID },
        { "absmax_col", AT(absmax_col), 1.5, RESDIAG_E_INVALID },
        { "ratio_rows", AT(ratio_rows), 4, RESDIAG_E_INVALID }, /* > rows */
        { "ratio_rows", AT(ratio_rows), -2, RESDIAG_E_INVALID },
        { "ratio_rows", AT(ratio_rows), 1.5, RESDIAG_E_INVALID },
    };
    resdiag *r = open_run("bad.h5", K);
    resdiag_partial good = computed(r, x, 3, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        resdiag_partial p = good;
        ((double *)&p)[bad[i].index] = bad[i].value;
        for (int how = 0; how < 3; how++) {
            log_all[0] = 0;
            resdiag_status st;
            int line = 200 + (int)i;
            if (how == 0) {
                st = resdiag_observe_partial(r, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_IN, &p,
                                             "dev.py", line);
            } else if (how == 1) {
                st = resdiag_param_grad_partial(r, 0, "mlp.w2", &p, "dev.py", line);
            } else {
                resdiag_partial_site e = { RESDIAG_BACKWARD, 2, 1, RESDIAG_STREAM_OUT, -1,
                                           line, NULL };
                st = resdiag_submit_partials(r, 1, &e, &p, "dev.py");
            }
            if (how == 1 && bad[i].status == RESDIAG_E_SHAPE) { /* a parameter has any width */
                ck_assert_int_eq(st, RESDIAG_OK);
                continue;
            }
            ck_assert_msg(st == bad[i].status, "%s = %g (entry %d): status %d, want %d",
                          member_names[bad[i].index], bad[i].value, how, (int)st,
                          (int)bad[i].status);
            char where[32];
            snprintf(where, sizeof where, "dev.py:%d", line);
            /* the log stops after 20 client bugs; the message stays current */
            const char *msg = resdiag_errmsg(r);
            ck_assert_msg(strstr(msg, "client bug") && strstr(msg, where) &&
                              strstr(msg, bad[i].member),
                          "%s = %g: the message does not name %s at %s: %s",
                          member_names[bad[i].index], bad[i].value, bad[i].member, where, msg);
        }
    }
    /* ratio_sum counts only with ratio_rows >= 0 */
    resdiag_partial p = good;
    p.ratio_rows = 2;
    p.ratio_sum = -1;
    ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_OUT, &p,
                                             "dev.py", 1), RESDIAG_E_INVALID);
    ck_assert_ptr_nonnull(strstr(resdiag_errmsg(r), "ratio_sum"));
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);
    resdiag_reader *rd = read_run("bad.h5");
    double f[RESDIAG_N_FIELDS];
    read_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_IN, f, NULL, 0);
    read_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_OUT, f, NULL, 0);
    read_site(rd, 0, RESDIAG_BACKWARD, 2, 1, RESDIAG_STREAM_OUT, f, NULL, 0);
    double u[RESDIAG_N_UPDATE_FIELDS];
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 1, 0, u), RESDIAG_OK);
    ck_assert(isnan(u[RESDIAG_UPDATE_RATIO_FROB]));
    resdiag_reader_destroy(rd);
    remove_run("bad.h5");
}
END_TEST

/* resdiag_sketch_layout: bucket (col0 + j) mod K, column sign
 * tau((col0 + j) mod tau_len) (the run's table: max(d_model, 4096) | 1
 * entries, wrapping), row sign sigma(row0 + i); with K = 0 every bucket 0;
 * resdiag_sketch_size. */
START_TEST(the_layout_is_the_sketch_of_the_kernels)
{
    resdiag *r = open_run("layout.h5", K);
    ck_assert_int_eq(resdiag_sketch_size(r), K);
    ck_assert_int_eq(resdiag_sketch_size(NULL), 0);
    enum { N = 4097 + 50 };
    static int32_t bucket[N], b2[60];
    static float col_sign[N], c2[60], row_sign[N], r2[60];
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, N, bucket, col_sign, 0, N, row_sign),
                     RESDIAG_OK);
    int plus = 0, rplus = 0;
    for (int j = 0; j < N; j++) {
        ck_assert_int_eq(bucket[j], j % K);
        ck_assert(col_sign[j] == 1.0f || col_sign[j] == -1.0f);
        ck_assert(row_sign[j] == 1.0f || row_sign[j] == -1.0f);
        plus += col_sign[j] > 0;
        rplus += row_sign[j] > 0;
        if (j >= 4097)
            ck_assert(col_sign[j] == col_sign[j - 4097]); /* the table wraps */
    }
    /* signs of a hash: about half each, and rows and columns not the same */
    ck_assert_int_gt(plus, N / 2 - 200);
    ck_assert_int_lt(plus, N / 2 + 200);
    ck_assert_int_gt(rplus, N / 2 - 200);
    ck_assert_int_lt(rplus, N / 2 + 200);
    ck_assert(memcmp(col_sign, row_sign, sizeof col_sign) != 0);
    /* an offset is the same layout further on */
    ck_assert_int_eq(resdiag_sketch_layout(r, 4090, 57, b2, c2, 3000, 57, r2), RESDIAG_OK);
    for (int j = 0; j < 57; j++) {
        ck_assert_int_eq(b2[j], bucket[4090 + j]);
        ck_assert(c2[j] == col_sign[4090 + j]);
        ck_assert(r2[j] == row_sign[3000 + j]);
    }
    /* the sketch of a tensor from its rows 5.. is that of these signs */
    static double x[3 * D];
    fill(x, 3, 5, 0);
    resdiag_partial p, want;
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, 3, D), 5, &p, NULL), RESDIAG_OK);
    reference(&want, x, 3, r, 5);
    assert_members(&p, &want, 1e-12, "rows 5..7");
    /* arrays may be NULL with their count 0 */
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 0, NULL, NULL, 0, 0, NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 3, NULL, c2, 0, 0, NULL), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 3, b2, NULL, 0, 0, NULL), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 0, NULL, NULL, 0, 3, NULL), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_sketch_layout(r, -1, 3, b2, c2, 0, 0, NULL), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, -3, b2, c2, 0, 0, NULL), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 0, NULL, NULL, -1, 1, r2), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_sketch_layout(r, 0, 0, NULL, NULL, 0, -1, r2), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_sketch_layout(NULL, 0, 0, NULL, NULL, 0, 0, NULL), RESDIAG_E_NULL);
    close_run(r);
    remove_run("layout.h5");

    r = open_run("layout0.h5", 0);
    ck_assert_int_eq(resdiag_sketch_size(r), 0);
    ck_assert_int_eq(resdiag_sketch_layout(r, 3, 50, b2, c2, 0, 0, NULL), RESDIAG_OK);
    for (int j = 0; j < 50; j++)
        ck_assert_int_eq(b2[j], 0);
    close_run(r);
    remove_run("layout0.h5");
}
END_TEST

/* NULL arguments are E_NULL (logged); a NULL handle, a paused run and a
 * hook outside a step are no-ops; after close E_STATE, while
 * resdiag_partial_compute still works; bad tensors and row0 as for hooks. */
START_TEST(null_arguments_and_no_op_cases)
{
    static double x[2 * D];
    fill(x, 2, 3, 0);
    resdiag_partial_site e = { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, -1, 1, NULL };
    resdiag *r = open_run("null.h5", K);
    resdiag_partial p = computed(r, x, 2, 0), q;
    /* NULL handle */
    ck_assert_int_eq(resdiag_observe_partial(NULL, 0, 0, 0, RESDIAG_STREAM_OUT, &p, "f", 1),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_partial(NULL, 0, "mlp.w2", &p, "f", 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_submit_partials(NULL, 1, &e, &p, "f"), RESDIAG_OK);
    ck_assert_int_eq(resdiag_partial_compute(NULL, resdiag_f64(x, 2, D), 0, &q, NULL),
                     RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, 2, D), 0, NULL, NULL),
                     RESDIAG_E_NULL);
    /* outside a step (even with NULL partials: nothing is read) */
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_STREAM_OUT, &p, "f", 1),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_STREAM_OUT, NULL, "f", 1),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &e, &p, "f"), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_partial(r, 0, "mlp.w2", &p, "f", 1), RESDIAG_OK);
    /* step 0: NULLs inside a step */
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_STREAM_OUT, NULL, "f.py", 4),
                     RESDIAG_E_NULL);
    ck_assert_ptr_nonnull(strstr(log_all, "the partial statistics are NULL (f.py:4)"));
    ck_assert_int_eq(resdiag_submit_partials(r, 1, NULL, &p, "f"), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &e, NULL, "f"), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_submit_partials(r, -1, &e, &p, "f"), RESDIAG_E_INVALID);
    /* a bad site in a batch, as for a single call */
    resdiag_partial_site bad_site = { RESDIAG_FORWARD, 7, 0, RESDIAG_STREAM_OUT, -1, 1, NULL };
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &bad_site, &p, "f"), RESDIAG_E_RANGE);
    bad_site.layer = 0;
    bad_site.site = (resdiag_site)12; /* neither a block site (0..7) nor a model site (16..) */
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &bad_site, &p, "f"), RESDIAG_E_RANGE);
    bad_site.site = (resdiag_site)RESDIAG_N_BLOCK_SITES;
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &bad_site, &p, "f"), RESDIAG_E_RANGE);
    /* a site of schema 3 in this schema 1 run */
    bad_site.site = RESDIAG_OUT_NORM_IN;
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &bad_site, &p, "f"), RESDIAG_E_INVALID);
    ck_assert_msg(strstr(log_all, "out_norm_in needs a file of schema 3"), "%s", log_all);
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_BRANCH_IN, &p, "f.py", 5),
                     RESDIAG_E_INVALID);
    ck_assert_msg(strstr(log_all, "branch_in needs a file of schema 3; this run writes schema 1"),
                  "%s", log_all);
    bad_site.site = RESDIAG_STREAM_OUT;
    bad_site.dir = 5;
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &bad_site, &p, "f"), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    /* step 1: paused */
    ck_assert_int_eq(resdiag_set_enabled(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_STREAM_OUT, &p, "f", 1),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &e, &p, "f"), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_set_enabled(r, 1), RESDIAG_OK);
    /* bad tensors and row0 for the reference computation */
    resdiag_tensor t = resdiag_f64(x, 2, D);
    t.dtype = (resdiag_dtype)9;
    ck_assert_int_eq(resdiag_partial_compute(r, t, 0, &q, NULL), RESDIAG_E_DTYPE);
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, -1, D), 0, &q, NULL),
                     RESDIAG_E_SHAPE);
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(NULL, 2, D), 0, &q, NULL),
                     RESDIAG_E_NULL);
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, 2, D), -1, &q, NULL),
                     RESDIAG_E_INVALID);
    ck_assert_ptr_nonnull(strstr(log_all, "row0 is -1"));
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(NULL, 0, D), 0, &q, NULL),
                     RESDIAG_OK);
    ck_assert_double_eq(q.rows, 0);
    ck_assert_double_eq(q.absmax, -1);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    /* after close: hooks are E_STATE, the reference still computes */
    ck_assert_int_eq(resdiag_observe_partial(r, 0, 0, 0, RESDIAG_STREAM_OUT, &p, "f", 1),
                     RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_submit_partials(r, 1, &e, &p, "f"), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_param_grad_partial(r, 0, "mlp.w2", &p, "f", 1), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_partial_compute(r, resdiag_f64(x, 2, D), 0, &q, NULL), RESDIAG_OK);
    ck_assert_int_eq(memcmp(&p, &q, sizeof p), 0);
    ck_assert_int_eq(resdiag_sketch_size(r), K);
    resdiag_destroy(r);

    resdiag_reader *rd = read_run("null.h5");
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 1); /* the paused step is not recorded */
    double f[RESDIAG_N_FIELDS];
    read_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, f, NULL, 0);
    resdiag_reader_destroy(rd);
    remove_run("null.h5");
}
END_TEST

/* f64 values near the ends of the double range: the kernels' partial is
 * accepted as it is; its plain sums of squares reach +Inf (or underflow)
 * where the kernels' scaled ones do not (doc/PARTIAL.md), so FROB and the
 * spreads differ there, the means, extremes and counts do not. */
START_TEST(partials_of_extreme_values_are_accepted)
{
    static const double scales[] = { 1e300, 1.7e308, 1e-300 };
    static double x[4 * D];
    resdiag *r = open_run("extreme.h5", K);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 4 * D; i++)
            x[i] = scales[c] * (i % 3 ? 1 : -1) * (1 - 0.01 * (i % 7));
        resdiag_partial p = computed(r, x, 4, 0);
        ck_assert_int_eq(resdiag_step_begin(r, c), RESDIAG_OK);
        ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT,
                                                 &p, "dev.py", 1), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_STREAM_OUT, resdiag_f64(x, 4, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    close_run(r);
    resdiag_reader *rd = read_run("extreme.h5");
    for (int c = 0; c < 3; c++) {
        double fp[RESDIAG_N_FIELDS], ft[RESDIAG_N_FIELDS];
        read_site(rd, c, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, fp, NULL, 1);
        read_site(rd, c, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_OUT, ft, NULL, 1);
        static const int same[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_TOK_NORM_MEAN,
                                    RESDIAG_FIELD_TOK_NORM_MIN, RESDIAG_FIELD_TOK_NORM_MAX,
                                    RESDIAG_FIELD_TOK_MEAN_MEAN, RESDIAG_FIELD_TOK_RMS_MEAN,
                                    RESDIAG_FIELD_TOK_STD_MEAN, RESDIAG_FIELD_ABSMAX,
                                    RESDIAG_FIELD_ABSMAX_COL, RESDIAG_FIELD_NAN_COUNT };
        for (size_t k = 0; k < sizeof same / sizeof *same; k++)
            ck_assert_msg(fp[same[k]] == ft[same[k]], "%g: field %s %.17g, the tensor's %.17g",
                          scales[c], resdiag_field_name((resdiag_field)same[k]), fp[same[k]],
                          ft[same[k]]);
        if (c < 2)
            ck_assert(isinf(fp[RESDIAG_FIELD_FROB]));
        else
            ck_assert(fp[RESDIAG_FIELD_FROB] < ft[RESDIAG_FIELD_FROB]); /* underflowed */
    }
    resdiag_reader_destroy(rd);
    remove_run("extreme.h5");
}
END_TEST

static const check_program program = {
    .name = "partial",
    .timeout = 60,
    .scratch = dir,
    .scratch_size = sizeof dir,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_TEST(compute_and_submit_record_what_the_tensor_records),
           CHECK_TEST(a_partial_written_by_hand_records_its_fields),
           CHECK_TEST(partial_calls_of_a_site_merge_like_one_tensor),
           CHECK_TEST(update_ratio_from_ratio_sum_and_ratio_rows),
           CHECK_TEST(update_ratio_from_row_norms),
           CHECK_TEST(a_batch_is_its_single_calls),
           CHECK_TEST(param_grad_partial_records_the_gradient),
           CHECK_TEST(inconsistent_members_are_refused),
           CHECK_TEST(the_layout_is_the_sketch_of_the_kernels),
           CHECK_TEST(null_arguments_and_no_op_cases),
           CHECK_TEST(partials_of_extreme_values_are_accepted))
