/*
 * test-merge.c - several hook calls for one site in one step merge: the
 * step records the statistics of all their rows (checked against values
 * computed here in long double, the sketch against its formula with the
 * rows numbered on across calls), the number of calls (*_calls), the
 * first call's CALL_SEQ and call site; the update ratio pairs the k-th
 * STREAM_IN with the k-th BRANCH_OUT call; one_call_per_site refuses a
 * second call; a file without call counts (an older writer's) still reads.
 */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"
#include "run-files.h"
#include "stats/stats.h"
#include "value-hash.h"

enum { D = 8, K = 8, SEED = 77 };
static const char *const sub_names[2] = { "attn", "mlp" };
static const char *const lparams[1] = { "mlp.w2" };

static resdiag *open_run(const char *name, int one_call, int shard_cols)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 2, .cols = D, .sublayers = 2,
        .sublayer_names = sub_names, .layer_params = 1, .layer_param_names = lparams });
    m.shard_cols = shard_cols;
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.sketch_size = K;
    o.sketch_seed = SEED;
    o.one_call_per_site = one_call;
    return open_run_with(name, &m, &o);
}

/* Deterministic values in [-4, 4], recorded as f64: double on every
 * kernel path, so the 1e-12 tolerances below are every path's bound. */
static double value(unsigned seed, int i)
{
    unsigned h = value_hash(seed, i);
    return (double)((int)(h % 2001u) - 1000) / 250.0;
}

/* The fields of the rows x (rows, D) as one tensor, in long double, from
 * the definitions in doc/FORMAT.md (non-finite values count as 0, the
 * divisor stays D), and its sketch from the formula with rows 0..rows-1. */
static void reference(const double *x, int rows, double *f, double *sk)
{
    long double ss = 0, norm[64], mean[64], rms[64], sd[64];
    double amax = -1, amax_col = NAN;
    long nan = 0, inf = 0;
    ck_assert_int_le(rows, 64);
    for (int i = 0; i < rows; i++) {
        long double s = 0, s2 = 0;
        for (int j = 0; j < D; j++) {
            double v = x[i * D + j];
            if (isnan(v)) {
                nan++;
                continue;
            }
            if (isinf(v)) {
                inf++;
                continue;
            }
            s += v;
            s2 += (long double)v * v;
            if (fabs(v) > amax) {
                amax = fabs(v);
                amax_col = j;
            }
        }
        ss += s2;
        norm[i] = sqrtl(s2);
        mean[i] = s / D;
        rms[i] = norm[i] / sqrtl(D);
        long double var = s2 / D - mean[i] * mean[i];
        sd[i] = sqrtl(var > 0 ? var : 0);
    }
    const long double *per[4] = { norm, mean, rms, sd };
    const int mean_field[4] = { RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_MEAN_MEAN,
                                RESDIAG_FIELD_TOK_RMS_MEAN, RESDIAG_FIELD_TOK_STD_MEAN };
    for (int q = 0; q < 4; q++) {
        long double m = 0, v = 0;
        for (int i = 0; i < rows; i++)
            m += per[q][i];
        m /= rows;
        for (int i = 0; i < rows; i++)
            v += (per[q][i] - m) * (per[q][i] - m);
        f[mean_field[q]] = (double)m;
        f[mean_field[q] + 1] = (double)sqrtl(v / rows);
    }
    long double mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < rows; i++) {
        mn = norm[i] < mn ? norm[i] : mn;
        mx = norm[i] > mx ? norm[i] : mx;
    }
    f[RESDIAG_FIELD_ROWS] = rows;
    f[RESDIAG_FIELD_COLS] = D;
    f[RESDIAG_FIELD_FROB] = (double)sqrtl(ss);
    f[RESDIAG_FIELD_TOK_NORM_MIN] = (double)mn;
    f[RESDIAG_FIELD_TOK_NORM_MAX] = (double)mx;
    f[RESDIAG_FIELD_ABSMAX] = amax < 0 ? 0 : amax;
    f[RESDIAG_FIELD_ABSMAX_COL] = amax_col;
    f[RESDIAG_FIELD_NAN_COUNT] = (double)nan;
    f[RESDIAG_FIELD_INF_COUNT] = (double)inf;
    f[RESDIAG_FIELD_CALL_SEQ] = NAN;
    /* the run's column signs: a table of max(d_model, 4096) | 1 entries */
    float tau[4097];
    rd_fill_column_signs(tau, 4097, SEED);
    for (int m = 0; m < K; m++) {
        long double s = 0;
        for (int i = 0; i < rows; i++)
            for (int j = m; j < D; j += K)
                if (isfinite(x[i * D + j]))
                    s += (long double)rd_row_sign(SEED, i) * tau[j] * x[i * D + j];
        sk[m] = (double)s;
    }
}

static void assert_fields(const double *got, const double *want, const char *what)
{
    for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
        if (f == RESDIAG_FIELD_CALL_SEQ)
            continue;
        double g = got[f], w = want[f];
        ck_assert_msg((isnan(g) && isnan(w)) || fabs(g - w) <= 1e-12 * (1 + fabs(w)),
                      "%s: field %s is %.17g, all the rows as one tensor give %.17g", what,
                      resdiag_field_name((resdiag_field)f), g, w);
    }
}

/* One value of a float64 time series through the generic reader access. */
static double read_one(resdiag_reader *rd, const char *name, int64_t step, size_t index)
{
    int64_t dims[8];
    int rank = 0;
    ck_assert_int_eq(resdiag_reader_dims(rd, name, dims, 8, &rank), RESDIAG_OK);
    size_t per = 1;
    for (int k = 1; k < rank; k++)
        per *= (size_t)dims[k];
    double *buf = malloc(per * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(resdiag_reader_read(rd, name, step, 1, buf, per), RESDIAG_OK);
    ck_assert_uint_lt(index, per);
    double v = buf[index];
    free(buf);
    return v;
}

/* forward/site_calls index of (layer, sublayer, site) in the 2 x 2 model,
 * with as many sites a sublayer as the file's site axis holds (5 in the
 * schema 1 runs here) */
static size_t site_index(resdiag_reader *rd, int layer, int sublayer, int site)
{
    int64_t dims[8];
    int rank = 0;
    ck_assert_int_eq(resdiag_reader_dims(rd, "forward/site_calls", dims, 8, &rank), RESDIAG_OK);
    ck_assert_int_eq(rank, 4);
    ck_assert(dims[1] == 2 && dims[2] == 2 && dims[3] == 5);
    return ((size_t)layer * 2 + (size_t)sublayer) * (size_t)dims[3] + (size_t)site;
}

/* ---------------------------------------------------------------- tests */

/* A site called three times in a step with 1, 0 and 5 rows holds what one
 * call with the 6 rows gives; NaN and Inf in different calls add up, the
 * largest |value| tied across calls keeps the first call's column. */
START_TEST(three_calls_hold_the_statistics_of_all_their_rows)
{
    double x[6 * D];
    for (int i = 0; i < 6 * D; i++)
        x[i] = value(5, i);
    x[0 * D + 3] = 9.5;  /* call 1: the first 9.5, column 3 */
    x[4 * D + 1] = -9.5; /* call 3: the same |value|, column 1 */
    x[2 * D + 5] = NAN;
    x[5 * D + 0] = INFINITY;
    x[3 * D + 7] = -INFINITY;
    x[0 * D + 6] = INFINITY; /* call 1 */
    const int rows[3] = { 1, 0, 5 };
    double want[RESDIAG_N_FIELDS], want_sk[K];
    reference(x, 6, want, want_sk);
    ck_assert_double_eq(want[RESDIAG_FIELD_ABSMAX_COL], 3);

    resdiag *r = open_run("three.h5", 0, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    /* another site first, so that CALL_SEQ of the merged ones is not 0 */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_IN, resdiag_f64(x, 1, D)), RESDIAG_OK);
    int first_line = 0;
    for (int c = 0, at = 0; c < 3; at += rows[c], c++) {
        resdiag_tensor t = resdiag_f64(x + at * D, rows[c], D);
        int line = __LINE__ + 1;
        ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, t,
                                            "decoder.c", line + c), RESDIAG_OK);
        if (c == 0)
            first_line = line;
        ck_assert_int_eq(RESDIAG_MODEL_BWD(r, RESDIAG_EMBED_OUT, t), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 1, "mlp.w2", t), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    /* the next step starts afresh: one call */
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 1, RESDIAG_STREAM_OUT, resdiag_f64(x + D, 5, D)),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = read_run("three.h5");
    double got[RESDIAG_N_FIELDS], sk[K];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, got,
                                         &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    assert_fields(got, want, "forward stream_out");
    ck_assert_double_eq(got[RESDIAG_FIELD_CALL_SEQ], 1); /* the first call's */
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, sk),
                     RESDIAG_OK);
    for (int m = 0; m < K; m++)
        ck_assert_msg(fabs(sk[m] - want_sk[m]) <= 1e-12 * (1 + fabs(want_sk[m])),
                      "sketch[%d] %.17g, all the rows as one tensor give %.17g", m, sk[m],
                      want_sk[m]);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_BACKWARD, 0, 0, RESDIAG_EMBED_OUT, got,
                                         &obs), RESDIAG_OK);
    assert_fields(got, want, "backward embed_out");
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 1, "mlp.w2", got, &obs), RESDIAG_OK);
    assert_fields(got, want, "parameter gradient");
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_BACKWARD, 0, 0, RESDIAG_EMBED_OUT, sk),
                     RESDIAG_OK);
    for (int m = 0; m < K; m++)
        ck_assert(fabs(sk[m] - want_sk[m]) <= 1e-12 * (1 + fabs(want_sk[m])));

    /* the number of calls, per slot; NaN where not observed */
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 0, site_index(rd, 1, 1, 4)), 3);
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 0, site_index(rd, 0, 0, 1)), 1);
    ck_assert(isnan(read_one(rd, "forward/site_calls", 0, site_index(rd, 0, 0, 0))));
    ck_assert_double_eq(read_one(rd, "backward/model_calls", 0, 0), 3);
    ck_assert_double_eq(read_one(rd, "backward/param_calls", 0, 1), 3);
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 1, site_index(rd, 1, 1, 4)), 1);
    ck_assert(isnan(read_one(rd, "backward/model_calls", 1, 0)));

    /* step 1: its one call only */
    double want1[RESDIAG_N_FIELDS], want1_sk[K];
    reference(x + D, 5, want1, want1_sk);
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, got,
                                         &obs), RESDIAG_OK);
    assert_fields(got, want1, "step 1");

    resdiag_reader_destroy(rd);
    remove_run("three.h5");

    /* the call site of a step's calls is the first call's */
    r = open_run("callsite.h5", 0, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    for (int c = 0; c < 3; c++)
        ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT,
                                            resdiag_f64(x, 2, D), "decoder.c", first_line + c),
                         RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    rd = read_run("callsite.h5");
    char cs[64];
    snprintf(cs, sizeof cs, "decoder.c:%d", first_line);
    ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT), cs);
    resdiag_reader_destroy(rd);
    remove_run("callsite.h5");
}
END_TEST

/* Values near the ends of the double range merge like any others: calls
 * of 2, 1 and 3 rows hold what one call with the 6 rows gives (FROB +Inf
 * where the norms exceed the range, the moments of the norms then those of
 * the RMS times sqrt(cols); scaled sums for the tiny ones, subnormal ones
 * too). */
START_TEST(extreme_values_merge_like_one_call)
{
    static const double scales[] = { 1e300, 1.7e308, 1e-300, 4e-320 };
    for (size_t c = 0; c < sizeof scales / sizeof *scales; c++) {
        double x[6 * D];
        for (int i = 0; i < 6 * D; i++)
            x[i] = scales[c] == 1.7e308 ? (i % 3 ? 1 : -1) * scales[c] * (1 - 0.01 * (i % 7))
                                        : scales[c] * value(41 + (unsigned)c, i) / 4;
        resdiag *r = open_run("extreme.h5", 0, 0);
        ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
        const int rows[3] = { 2, 1, 3 };
        for (int k = 0, at = 0; k < 3; at += rows[k], k++)
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT,
                                         resdiag_f64(x + at * D, rows[k], D)), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_BRANCH_OUT, resdiag_f64(x, 6, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
        resdiag_destroy(r);
        resdiag_reader *rd = read_run("extreme.h5");
        double merged[RESDIAG_N_FIELDS], one[RESDIAG_N_FIELDS];
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_OUT,
                                             merged, NULL), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_OUT,
                                             one, NULL), RESDIAG_OK);
        char what[64];
        snprintf(what, sizeof what, "values of %g", scales[c]);
        for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
            if (f == RESDIAG_FIELD_CALL_SEQ)
                continue;
            double g = merged[f], w = one[f];
            /* a subnormal result keeps only its absolute rounding (a few of
             * the 2^-1074 steps, from the parts' own) */
            ck_assert_msg(g == w || (isnan(g) && isnan(w)) ||
                              fabs(g - w) <= 1e-12 * fmax(fabs(g), fabs(w)) + 0x1p-1068,
                          "%s: field %s merged %.17g, one call %.17g", what,
                          resdiag_field_name((resdiag_field)f), g, w);
        }
        if (scales[c] == 1.7e308)
            ck_assert_msg(isinf(merged[RESDIAG_FIELD_FROB]) &&
                              isfinite(merged[RESDIAG_FIELD_TOK_RMS_MEAN]),
                          "frob %g, rms mean %g, norm max %g", merged[RESDIAG_FIELD_FROB],
                          merged[RESDIAG_FIELD_TOK_RMS_MEAN], merged[RESDIAG_FIELD_TOK_NORM_MAX]);
        resdiag_reader_destroy(rd);
        remove_run("extreme.h5");
    }
}
END_TEST

/* one_call_per_site = 1: a second call for a site (or parameter) in a step
 * is a client bug, RESDIAG_E_STATE and logged; the step keeps the first
 * call's values and counts one call. */
START_TEST(one_call_per_site_refuses_a_second_call)
{
    double x[4 * D];
    for (int i = 0; i < 4 * D; i++)
        x[i] = value(9, i);
    double want[RESDIAG_N_FIELDS], want_sk[K];
    reference(x, 3, want, want_sk);

    resdiag *r = open_run("one.h5", 1, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_NORM_OUT, resdiag_f64(x, 3, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f64(x, 3, D)), RESDIAG_OK);
    log_count = 0;
    log_all[0] = 0;
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_NORM_OUT, resdiag_f64(x + 3 * D, 1, D)),
                     RESDIAG_E_STATE);
    ck_assert_int_eq(log_count, 1);
    ck_assert_ptr_nonnull(strstr(log_all, "client bug"));
    ck_assert_ptr_nonnull(strstr(log_all, "one_call_per_site"));
    ck_assert_ptr_nonnull(strstr(log_all, "norm_out of layer 0 sublayer 1"));
    ck_assert_ptr_nonnull(strstr(resdiag_errmsg(r), "one_call_per_site"));
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f64(x + 3 * D, 1, D)),
                     RESDIAG_E_STATE);
    ck_assert_int_eq(log_count, 2);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    /* a new step takes a first call again */
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_NORM_OUT, resdiag_f64(x, 3, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = read_run("one.h5");
    double got[RESDIAG_N_FIELDS];
    int obs = 0;
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(resdiag_reader_site(rd, s, RESDIAG_FORWARD, 0, 1, RESDIAG_NORM_OUT, got,
                                             &obs), RESDIAG_OK);
        assert_fields(got, want, "the first call");
        ck_assert_double_eq(read_one(rd, "forward/site_calls", s, site_index(rd, 0, 1, 2)), 1);
    }
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 0, "mlp.w2", got, &obs), RESDIAG_OK);
    assert_fields(got, want, "the first parameter call");
    ck_assert_double_eq(read_one(rd, "backward/param_calls", 0, 0), 1);
    resdiag_reader_destroy(rd);
    remove_run("one.h5");

    /* the option takes 0 or 1 */
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 1, .cols = D, .sublayers = 1,
        .sublayer_names = sub_names });
    resdiag_options o;
    resdiag_options_init(&o);
    ck_assert_int_eq(o.one_call_per_site, 0);
    o.one_call_per_site = 2;
    const char *path = run_path("bad-option.h5");
    resdiag *bad = NULL;
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_open(&bad, path, &m, &o), RESDIAG_E_INVALID);
    ck_assert_ptr_null(bad);
    ck_assert_ptr_nonnull(strstr(log_all, "one_call_per_site is 2"));
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

/* The calls of a site in one step are one tensor: a second width (a shard)
 * is refused and leaves the first call's values. */
START_TEST(calls_of_another_width_are_refused)
{
    double x[3 * D];
    for (int i = 0; i < 3 * D; i++)
        x[i] = value(13, i);
    double want[RESDIAG_N_FIELDS], want_sk[K];
    reference(x, 2, want, want_sk);
    resdiag *r = open_run("width.h5", 0, D / 2);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_STREAM_IN, resdiag_f64(x, 2, D)), RESDIAG_OK);
    log_all[0] = 0;
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_STREAM_IN, resdiag_f64(x, 2, D / 2)),
                     RESDIAG_E_SHAPE);
    ck_assert_ptr_nonnull(strstr(log_all, "earlier calls"));
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    resdiag_reader *rd = read_run("width.h5");
    double got[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, got,
                                         NULL), RESDIAG_OK);
    assert_fields(got, want, "the first width");
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 0, site_index(rd, 1, 0, 0)), 1);
    resdiag_reader_destroy(rd);
    remove_run("width.h5");
}
END_TEST

static long double row_norm(const double *x)
{
    long double s = 0;
    for (int j = 0; j < D; j++)
        s += (long double)x[j] * x[j];
    return sqrtl(s);
}

/* The update ratio of a step with several calls: the k-th STREAM_IN pairs
 * with the k-th BRANCH_OUT (either order within a pair); ratio_frob is
 * ||dx||_F / ||x||_F over the paired rows, ratio_tok_mean the mean over
 * all the paired tokens. A pair whose rows differ, or a second call of
 * one side before its partner came, leaves no per-token mean. */
START_TEST(update_ratio_pairs_the_kth_calls)
{
    double x[5 * D], dx[5 * D];
    for (int i = 0; i < 5 * D; i++) {
        x[i] = 1 + value(21, i);
        dx[i] = 0.1 * value(23, i);
    }
    long double sx = 0, sdx = 0, tok = 0;
    for (int i = 0; i < 5; i++) {
        long double a = row_norm(x + i * D), b = row_norm(dx + i * D);
        sx += a * a;
        sdx += b * b;
        tok += b / a;
    }
    const double want_frob = (double)sqrtl(sdx / sx), want_tok = (double)(tok / 5);

    /* step 0: in, br, in, br; step 1: br, in, br, in; step 2: in, in, br,
     * br; step 3: a pair of 2 and 3 rows, then one of 3 and 2 */
    resdiag *r = open_run("ratio.h5", 0, 0);
    for (int s = 0; s < 4; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        const int at[2] = { 0, 2 }, n[2] = { 2, 3 };
        if (s == 2) {
            for (int c = 0; c < 2; c++)
                ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_STREAM_IN,
                                             resdiag_f64(x + at[c] * D, n[c], D)), RESDIAG_OK);
            for (int c = 0; c < 2; c++)
                ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_BRANCH_OUT,
                                             resdiag_f64(dx + at[c] * D, n[c], D)), RESDIAG_OK);
        } else {
            for (int c = 0; c < 2; c++) {
                resdiag_tensor a = resdiag_f64(x + at[c] * D, n[c], D);
                /* step 3: branch rows 2 + 3 in calls of 3 and 2 rows */
                resdiag_tensor b = s == 3 ? resdiag_f64(dx + (c ? 3 : 0) * D, c ? 2 : 3, D)
                                          : resdiag_f64(dx + at[c] * D, n[c], D);
                resdiag_site first = s == 1 ? RESDIAG_BRANCH_OUT : RESDIAG_STREAM_IN;
                resdiag_site second = s == 1 ? RESDIAG_STREAM_IN : RESDIAG_BRANCH_OUT;
                ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, first, s == 1 ? b : a), RESDIAG_OK);
                ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, second, s == 1 ? a : b), RESDIAG_OK);
            }
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    /* step 4: three STREAM_IN, two BRANCH_OUT calls: the ratio of the two
     * pairs */
    ck_assert_int_eq(resdiag_step_begin(r, 4), RESDIAG_OK);
    for (int c = 0; c < 2; c++) {
        const int at[2] = { 0, 2 }, n[2] = { 2, 3 };
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_STREAM_IN,
                                     resdiag_f64(x + at[c] * D, n[c], D)), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_BRANCH_OUT,
                                     resdiag_f64(dx + at[c] * D, n[c], D)), RESDIAG_OK);
    }
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 1, RESDIAG_STREAM_IN, resdiag_f64(dx, 4, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = read_run("ratio.h5");
    for (int s = 0; s < 5; s++) {
        double u[RESDIAG_N_UPDATE_FIELDS];
        ck_assert_int_eq(resdiag_reader_update(rd, s, 0, 1, u), RESDIAG_OK);
        ck_assert_msg(fabs(u[RESDIAG_UPDATE_RATIO_FROB] - want_frob) <= 1e-12,
                      "step %d: ratio_frob %.17g, want %.17g", s, u[RESDIAG_UPDATE_RATIO_FROB],
                      want_frob);
        if (s == 0 || s == 1 || s == 4)
            ck_assert_msg(fabs(u[RESDIAG_UPDATE_RATIO_TOK_MEAN] - want_tok) <= 1e-12,
                          "step %d: ratio_tok_mean %.17g, want %.17g", s,
                          u[RESDIAG_UPDATE_RATIO_TOK_MEAN], want_tok);
        else
            ck_assert_msg(isnan(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]),
                          "step %d: ratio_tok_mean %.17g, want NaN (rows not paired)", s,
                          u[RESDIAG_UPDATE_RATIO_TOK_MEAN]);
    }
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 4, site_index(rd, 0, 1, 0)), 3);
    ck_assert_double_eq(read_one(rd, "forward/site_calls", 4, site_index(rd, 0, 1, 3)), 2);
    resdiag_reader_destroy(rd);
    remove_run("ratio.h5");
}
END_TEST

/* A file from a writer that did not count calls (no *_calls datasets)
 * reads as before; asking for the counts is RESDIAG_E_NOT_FOUND. */
START_TEST(files_without_call_counts_still_read)
{
    double x[2 * D];
    for (int i = 0; i < 2 * D; i++)
        x[i] = value(3, i);
    double want[RESDIAG_N_FIELDS], want_sk[K];
    reference(x, 2, want, want_sk);
    resdiag *r = open_run("old.h5", 0, 0);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f64(x, 2, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f64(x, 2, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    const char *path = run_path("old.h5");
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    static const char *const calls[] = { "forward/site_calls", "backward/site_calls",
                                         "forward/model_calls", "backward/model_calls",
                                         "backward/param_calls" };
    for (int i = 0; i < 5; i++)
        ck_assert_int_ge(H5Ldelete(f, calls[i], H5P_DEFAULT), 0);
    ck_assert_int_le(H5Lexists(f, "backward/model_param_calls", H5P_DEFAULT), 0); /* Q = 0 */
    H5Fclose(f);

    resdiag_reader *rd = read_run("old.h5");
    double got[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, got,
                                         NULL), RESDIAG_OK);
    assert_fields(got, want, "old file");
    for (int i = 0; i < resdiag_reader_n_datasets(rd); i++)
        ck_assert_ptr_null(strstr(resdiag_reader_dataset_name(rd, i), "_calls"));
    double buf[64];
    ck_assert_int_ne(resdiag_reader_read(rd, "forward/site_calls", 0, 1, buf, 64), RESDIAG_OK);
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
    remove_run("old.h5");
}
END_TEST

static const check_program program = {
    .name = "merge",
    .timeout = 60,
    .scratch = dir,
    .scratch_size = sizeof dir,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_TEST(three_calls_hold_the_statistics_of_all_their_rows),
           CHECK_TEST(extreme_values_merge_like_one_call),
           CHECK_TEST(one_call_per_site_refuses_a_second_call),
           CHECK_TEST(calls_of_another_width_are_refused),
           CHECK_TEST(update_ratio_pairs_the_kth_calls),
           CHECK_TEST(files_without_call_counts_still_read))
