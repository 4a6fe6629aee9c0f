/*
 * test-analysis.c - the analysis behind `resdiag report` and `check`:
 * the fits against closed forms and an independent long-double
 * computation, the sketch relations, and the verdict on synthetic runs
 * written through the real writer in f32 and in bf16 (every tensor rounded
 * as a bf16 trainer would), including a branch below the bf16 noise (never
 * a wrong verdict), a NaN run, an empty run and the check's exit codes.
 */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "analysis/analysis.h"
#include "analysis/fit.h"
#include "analysis/phases.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"

/* ------------------------------------------------------------- fits */

/* The 0.975 quantile of Student's t, found here without any table: the
 * density's integral from 0 by Simpson's rule, bisected to 0.475. */
static double t975_by_integration(int df)
{
    const double nu = df;
    const double c = exp(lgamma((nu + 1) / 2) - lgamma(nu / 2)) / sqrt(nu * M_PI);
    double lo = 0, hi = 20;
    for (int it = 0; it < 48; it++) {
        double t = (lo + hi) / 2;
        enum { N = 2000 };
        double h = t / N, area = 0;
        for (int i = 0; i <= N; i++) {
            double u = i * h;
            double w = (i == 0 || i == N) ? 1 : (i % 2 ? 4 : 2);
            area += w * pow(1 + u * u / nu, -(nu + 1) / 2);
        }
        area *= c * h / 3;
        if (area < 0.475)
            lo = t;
        else
            hi = t;
    }
    return (lo + hi) / 2;
}

START_TEST(fit_line_recovers_an_exact_line)
{
    double x[6] = { 1, 2, 3, 4, 5, 6 }, y[6];
    for (int i = 0; i < 6; i++)
        y[i] = 3 + 2 * x[i];
    rd_fit f;
    ck_assert_int_eq(rd_fit_line(x, y, 6, &f), 1);
    ck_assert_double_eq_tol(f.a, 3, 1e-12);
    ck_assert_double_eq_tol(f.b, 2, 1e-12);
    ck_assert_double_eq_tol(f.r2, 1, 1e-12);
    ck_assert_double_eq_tol(f.b_lo, 2, 1e-9);
    ck_assert_double_eq_tol(f.b_hi, 2, 1e-9);
    ck_assert_int_eq(f.n, 6);
}
END_TEST

/* Slope, intercept, R^2 and the 95% interval against a long-double
 * computation of the textbook formulas, on noisy data. */
START_TEST(fit_line_matches_independent_computation)
{
    enum { N = 9 };
    double x[N], y[N];
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = i * 0.7 + 0.3;
        y[i] = -1.5 + 0.8 * x[i] + ((s >> 16) % 1000) / 1000.0 - 0.5;
    }
    long double mx = 0, my = 0;
    for (int i = 0; i < N; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= N;
    my /= N;
    long double sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < N; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    long double b = sxy / sxx, a = my - b * mx;
    long double r2 = sxy * sxy / (sxx * syy);
    long double ssres = syy - b * sxy;
    long double se = sqrtl(ssres / (N - 2) / sxx);
    rd_fit f;
    ck_assert_int_eq(rd_fit_line(x, y, N, &f), 1);
    ck_assert_double_eq_tol(f.b, (double)b, 1e-12);
    ck_assert_double_eq_tol(f.a, (double)a, 1e-12);
    ck_assert_double_eq_tol(f.r2, (double)r2, 1e-12);
    /* the half-width is t(0.975, 7) se; t from the integral, which a table
     * of three decimals matches to 5e-4 */
    double t = t975_by_integration(N - 2);
    ck_assert_double_eq_tol(f.b_hi - f.b, t * (double)se, 5.1e-4 * (double)se);
    ck_assert_double_eq_tol(f.b - f.b_lo, t * (double)se, 5.1e-4 * (double)se);
}
END_TEST

/* rd_t975 against the integral: its table holds three decimals (so within
 * 5e-4), the Cornish-Fisher expansion beyond 30 degrees of freedom as
 * close. */
START_TEST(t_quantiles_match_an_independent_computation)
{
    for (int df = 1; df <= 200; df += df < 40 ? 1 : 7) {
        double want = t975_by_integration(df);
        ck_assert_msg(fabs(rd_t975(df) - want) <= 5.1e-4, "df %d: rd_t975 %.6f, integral %.6f",
                      df, rd_t975(df), want);
    }
    ck_assert_double_eq_tol(t975_by_integration(1), 12.7062, 1e-3); /* the integral itself */
    ck_assert_double_eq_tol(t975_by_integration(10), 2.2281, 1e-3);
}
END_TEST

START_TEST(t_quantiles_match_tables)
{
    ck_assert_double_eq_tol(rd_t975(1), 12.706, 1e-3);
    ck_assert_double_eq_tol(rd_t975(10), 2.228, 1e-3);
    ck_assert_double_eq_tol(rd_t975(30), 2.042, 1e-3);
    ck_assert_double_eq_tol(rd_t975(60), 2.000, 2e-3);
    ck_assert_double_eq_tol(rd_t975(120), 1.980, 2e-3);
    ck_assert_double_eq_tol(rd_t975(100000), 1.960, 1e-3);
    ck_assert(isnan(rd_t975(0)));
}
END_TEST

START_TEST(fit_says_when_data_are_too_short)
{
    double x[3] = { 1, 2, 2 }, y[3] = { 1, 2, 3 };
    rd_fit f;
    ck_assert_int_eq(rd_fit_line(x, y, 2, &f), 0); /* two points: a line, no interval */
    ck_assert_double_eq_tol(f.b, 1, 1e-12);
    ck_assert(isnan(f.b_lo));
    double c[3] = { 4, 4, 4 };
    ck_assert_int_eq(rd_fit_line(c, y, 3, &f), 0); /* constant x */
    ck_assert(isnan(f.b));
    double xn[4] = { 1, NAN, 3, 4 }, yn[4] = { 2, 5, 6, 8 };
    ck_assert_int_eq(rd_fit_line(xn, yn, 4, &f), 1); /* NaN points are left out */
    ck_assert_int_eq(f.n, 3);
}
END_TEST

START_TEST(loglog_slope_of_a_power_law)
{
    double k[12], y[12];
    for (int i = 0; i < 12; i++) {
        k[i] = i + 1;
        y[i] = 5 * pow(k[i], -0.5);
    }
    rd_fit f;
    ck_assert_int_eq(rd_fit_loglog(k, y, 12, &f), 1);
    ck_assert_double_eq_tol(f.b, -0.5, 1e-12);
    ck_assert_double_eq_tol(exp(f.a), 5, 1e-9);
}
END_TEST

/* ------------------------------------------------------- relations */

START_TEST(relation_errors_on_synthetic_sketches)
{
    enum { K = 16 };
    double x[K], f[K], y[K], z[K];
    for (int i = 0; i < K; i++) {
        x[i] = sin(i + 1.0) * 3;
        f[i] = cos(2.0 * i + 0.5);
        y[i] = x[i] + f[i];
        z[i] = 2 * x[i] + f[i];
    }
    const double *v[3] = { y, x, f };
    const double c[3] = { 1, -1, -1 };
    ck_assert_double_lt(rd_rel_combo(v, c, 3, K), 1e-15);
    const double *w[2] = { y, x };
    const double c2[2] = { 1, -1 };
    double e = rd_rel_combo(w, c2, 2, K); /* misses f: off by ||f|| / ||y|| */
    ck_assert_double_gt(e, 0.1);
    double err, alpha = rd_fit_alpha(z, x, f, K, &err);
    ck_assert_double_eq_tol(alpha, 2, 1e-12);
    ck_assert_double_lt(err, 1e-15);
    /* bf16 rounding of every term (relative 2^-8 at most) stays below HOLD */
    double yb[K];
    for (int i = 0; i < K; i++)
        yb[i] = y[i] * (1 + ((i % 3) - 1) * 0.0039);
    const double *vb[3] = { yb, x, f };
    ck_assert_double_lt(rd_rel_combo(vb, c, 3, K), 0.03);
    /* NaN makes the relation unknown */
    double xn[K];
    memcpy(xn, x, sizeof xn);
    xn[3] = NAN;
    const double *vn[3] = { y, xn, f };
    ck_assert(isnan(rd_rel_combo(vn, c, 3, K)));
}
END_TEST

START_TEST(signature_of_normalized_and_plain_tensors)
{
    double s[RESDIAG_N_FIELDS] = { 0 };
    s[RESDIAG_FIELD_ROWS] = 16;
    s[RESDIAG_FIELD_TOK_NORM_MEAN] = 5.65683;
    s[RESDIAG_FIELD_TOK_NORM_STD] = 5e-8;
    ck_assert_int_eq(rd_signature(s, 0.01), RD_SIG_NORMALIZED);
    s[RESDIAG_FIELD_TOK_NORM_STD] = 0.3;
    ck_assert_int_eq(rd_signature(s, 0.01), RD_SIG_NOT);
    s[RESDIAG_FIELD_TOK_NORM_STD] = 0.005;
    ck_assert_int_eq(rd_signature(s, 0.01), RD_SIG_UNCLEAR);
    s[RESDIAG_FIELD_ROWS] = 1; /* one token has no spread to measure */
    ck_assert_int_eq(rd_signature(s, 0.01), RD_SIG_UNKNOWN);
}
END_TEST

/* ------------------------------------------------ synthetic runs */

enum { D = 64, ROWS = 32, NSUB = 2 };
enum kind { PRE, POST, DEEP, SANDWICH, NONE };

static uint16_t to_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (uint16_t)(u >> 16);
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* Rounds a tensor as a bf16 trainer stores it (no-op for f32). */
static void store(float *t, int bf16)
{
    if (bf16)
        for (int i = 0; i < ROWS * D; i++)
            t[i] = from_bf16(to_bf16(t[i]));
}

static void hook(resdiag *r, int l, int s, resdiag_site site, const float *t, int bf16)
{
    static uint16_t buf[ROWS * D];
    resdiag_status st;
    if (bf16) {
        for (int i = 0; i < ROWS * D; i++)
            buf[i] = to_bf16(t[i]);
        st = RESDIAG_FWD(r, l, s, site, resdiag_bf16(buf, ROWS, D));
    } else {
        st = RESDIAG_FWD(r, l, s, site, resdiag_f32(t, ROWS, D));
    }
    ck_assert_int_eq(st, RESDIAG_OK);
}

static void layernorm(float *out, const float *in)
{
    for (int i = 0; i < ROWS; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < D; j++)
            m += in[i * D + j];
        m /= D;
        for (int j = 0; j < D; j++)
            v += (in[i * D + j] - m) * (in[i * D + j] - m);
        v /= D;
        for (int j = 0; j < D; j++)
            out[i * D + j] = (float)((in[i * D + j] - m) / sqrt(v + 1e-5));
    }
}

static unsigned rng = 1;
static double gauss(void)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 1664525u + 1013904223u;
        u += (rng >> 8) / 16777216.0;
    }
    return u - 6;
}

/* F(u) = W u with W (D, D) of entries N(0, scale^2 / D). */
static void branch(float *out, const float *in, const float *w)
{
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int k = 0; k < D; k++)
                s += in[i * D + k] * w[k * D + j];
            out[i * D + j] = (float)s;
        }
}

/* Writes a run of L layers x 2 sublayers of the given kind, steps steps;
 * with nan_step >= 0 the branch of layer 1 goes NaN from that step on. */
static resdiag_placement declare_override; /* not UNDECLARED: declare this instead */
static int declare_nothing;                /* 1: declare no placement at all */
static int declare_mix;                    /* declared_mix_layers with a MIXED override */
static resdiag_run_kind run_kind;          /* the model's run_kind */
static int spike;                          /* > 0: embedding column 7 is this large */
/* What is observed between the last block and the logits (the head reads
 * FINAL_NORM_OUT): nothing, what the head reads without a final norm (the
 * last stream), a LayerNorm's input and output, an identity's. */
enum final_sites { FN_NONE, FN_HEAD_INPUT, FN_LAYERNORM, FN_IDENTITY };
static enum final_sites final_sites;
static int skip_branch_sub = -1; /* >= 0: that sublayer's BRANCH_OUT is never observed */
static int hide_out_norm;        /* 1: a sandwich's second norm is not in its sites */
/* ||x_k|| of the first step from the very values handed to the hooks: the
 * mean over tokens of the per-token L2 norm of the embedding (k = 0) and
 * of the stream leaving layer k-1, in long double. */
enum { MAX_L = 16 };
static double raw_stream_norm[MAX_L + 1];

static double mean_token_norm(const float *t)
{
    long double sum = 0;
    for (int i = 0; i < ROWS; i++) {
        long double ss = 0;
        for (int j = 0; j < D; j++)
            ss += (long double)t[i * D + j] * t[i * D + j];
        sum += sqrtl(ss);
    }
    return (double)(sum / ROWS);
}

static void write_run(const char *path, enum kind kind, int L, int bf16, double scale, int steps,
                      int nan_step)
{
    static const char *const names[NSUB] = { "attn", "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = NSUB,
        .sublayer_names = names });
    m.declared_placement = kind == PRE ? RESDIAG_PLACEMENT_PRE
                           : kind == POST ? RESDIAG_PLACEMENT_POST
                           : kind == DEEP ? RESDIAG_PLACEMENT_DEEPNORM
                           : kind == SANDWICH ? RESDIAG_PLACEMENT_SANDWICH
                                              : RESDIAG_PLACEMENT_NONE;
    if (declare_override != RESDIAG_PLACEMENT_UNDECLARED)
        m.declared_placement = declare_override;
    if (declare_nothing)
        m.declared_placement = RESDIAG_PLACEMENT_UNDECLARED;
    m.declared_mix_layers = declare_mix;
    m.run_kind = run_kind;
    m.norm_kind = RESDIAG_NORM_LAYERNORM;
    resdiag_options o;
    resdiag_options_init(&o);
    o.overwrite = 1; /* the cases write one path again and again */
    resdiag *r = fixture_open(path, &m, &o);
    static float x[ROWS * D], ni[ROWS * D], no[ROWS * D], f[ROWS * D], y[ROWS * D], g[ROWS * D];
    static float w[NSUB * 64][D * D];
    rng = 7;
    for (int l = 0; l < L * NSUB; l++)
        for (int i = 0; i < D * D; i++)
            w[l][i] = (float)(gauss() * scale / sqrt(D));
    const float alpha = kind == DEEP ? 2.0f : 1.0f;
    for (int step = 0; step < steps; step++) {
        ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
        for (int i = 0; i < ROWS * D; i++)
            x[i] = (float)gauss();
        if (spike > 0)
            for (int i = 0; i < ROWS; i++)
                x[i * D + 7] = (float)spike;
        store(x, bf16);
        if (step == 0)
            raw_stream_norm[0] = mean_token_norm(x);
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, ROWS, D));
        for (int l = 0; l < L; l++)
            for (int s = 0; s < NSUB; s++) {
                const float *wl = w[l * NSUB + s];
                hook(r, l, s, RESDIAG_STREAM_IN, x, bf16);
                if (kind == PRE || kind == SANDWICH) {
                    layernorm(no, x);
                    store(no, bf16);
                    hook(r, l, s, RESDIAG_NORM_IN, x, bf16);
                    hook(r, l, s, RESDIAG_NORM_OUT, no, bf16);
                    hook(r, l, s, RESDIAG_BRANCH_IN, no, bf16);
                    branch(f, no, wl);
                    store(f, bf16);
                    if (kind == SANDWICH) {
                        memcpy(g, f, sizeof g);
                        layernorm(f, g);
                        store(f, bf16);
                        /* the norm on the branch's output, in its own sites */
                        if (!hide_out_norm) {
                            hook(r, l, s, RESDIAG_OUT_NORM_IN, g, bf16);
                            hook(r, l, s, RESDIAG_OUT_NORM_OUT, f, bf16);
                        }
                    }
                    if (nan_step >= 0 && step >= nan_step && l == 1)
                        f[5] = NAN;
                    if (s != skip_branch_sub)
                        hook(r, l, s, RESDIAG_BRANCH_OUT, f, bf16);
                    for (int i = 0; i < ROWS * D; i++)
                        y[i] = x[i] + f[i];
                    store(y, bf16);
                } else if (kind == NONE) {
                    hook(r, l, s, RESDIAG_BRANCH_IN, x, bf16);
                    branch(f, x, wl);
                    store(f, bf16);
                    hook(r, l, s, RESDIAG_BRANCH_OUT, f, bf16);
                    for (int i = 0; i < ROWS * D; i++)
                        y[i] = x[i] + f[i];
                    store(y, bf16);
                } else {
                    hook(r, l, s, RESDIAG_BRANCH_IN, x, bf16);
                    branch(f, x, wl);
                    store(f, bf16);
                    hook(r, l, s, RESDIAG_BRANCH_OUT, f, bf16);
                    for (int i = 0; i < ROWS * D; i++)
                        ni[i] = alpha * x[i] + f[i];
                    store(ni, bf16);
                    layernorm(y, ni);
                    store(y, bf16);
                    hook(r, l, s, RESDIAG_NORM_IN, ni, bf16);
                    hook(r, l, s, RESDIAG_NORM_OUT, y, bf16);
                }
                hook(r, l, s, RESDIAG_STREAM_OUT, y, bf16);
                if (step == 0 && s == NSUB - 1 && l < MAX_L)
                    raw_stream_norm[l + 1] = mean_token_norm(y);
                memcpy(x, y, sizeof x);
            }
        if (final_sites == FN_LAYERNORM || final_sites == FN_IDENTITY)
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(x, ROWS, D));
        if (final_sites == FN_LAYERNORM) {
            layernorm(y, x);
            memcpy(x, y, sizeof x);
        }
        if (final_sites != FN_NONE)
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(x, ROWS, D));
        RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, resdiag_f32(x, ROWS, D));
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

static char dir[64];
static const char *path(const char *name)
{
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}
static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test-analysis-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static resdiag_analysis *analyse(const char *p, int64_t step_index)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, p), RESDIAG_OK);
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.step_index = step_index;
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, &o, &a), RESDIAG_OK);
    resdiag_reader_destroy(rd);
    return a;
}

static resdiag_check_result check(const resdiag_analysis *a, resdiag_placement p)
{
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = p;
    char why[256];
    resdiag_check_result r = resdiag_analysis_check(a, &c, why, sizeof why);
    ck_assert_int_gt(strlen(why), 0);
    ck_assert_ptr_null(strchr(why, '\n'));
    return r;
}

/* The number after `"key": ` at or after from in the JSON (NaN if absent
 * or null), and where it ends. */
static double json_number(const char *from, const char *key, const char **end)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(from, pat);
    if (!p)
        return NAN;
    char *e;
    double v = strtod(p + strlen(pat), &e);
    if (end)
        *end = e;
    return e == p + strlen(pat) ? NAN : v;
}

/* The JSON's stream.norm[] and stream.growth against ||x_k|| computed in
 * the test from the tensors it recorded: the values, not the keys. */
static void assert_stream_json(const char *json, int L, double tol)
{
    const char *p = strstr(json, "\"stream\": {\"norm\": [");
    ck_assert_msg(p != NULL, "%s", json);
    p += strlen("\"stream\": {\"norm\": [");
    for (int k = 0; k <= L; k++) {
        char *e;
        double v = strtod(p, &e);
        ck_assert_msg(e != p, "stream.norm[%d] missing: %.40s", k, p);
        ck_assert_msg(fabs(v - raw_stream_norm[k]) <= tol * raw_stream_norm[k],
                      "stream.norm[%d] %.9g, recomputed %.9g", k, v, raw_stream_norm[k]);
        p = e + strspn(e, ", ");
    }
    ck_assert_msg(*p == ']', "stream.norm has more than %d values: %.40s", L + 1, p);
    double growth = json_number(p, "growth", NULL);
    double want = raw_stream_norm[L] / raw_stream_norm[1];
    ck_assert_msg(fabs(growth - want) <= 2 * tol * want, "stream.growth %.9g, recomputed %.9g",
                  growth, want);
}

static const struct {
    enum kind kind;
    resdiag_verdict v;
    resdiag_placement p;
    const char *json; /* placement.verdict, as doc/REPORT-JSON.md names it */
} cases[] = {
    { PRE, RESDIAG_VERDICT_PRE, RESDIAG_PLACEMENT_PRE, "pre" },
    { POST, RESDIAG_VERDICT_POST, RESDIAG_PLACEMENT_POST, "post" },
    { DEEP, RESDIAG_VERDICT_DEEPNORM, RESDIAG_PLACEMENT_DEEPNORM, "deepnorm" },
    { SANDWICH, RESDIAG_VERDICT_SANDWICH, RESDIAG_PLACEMENT_SANDWICH, "sandwich" },
    { NONE, RESDIAG_VERDICT_NONE, RESDIAG_PLACEMENT_NONE, "none" },
};

/* _i: case x {f32, bf16}. A branch of realistic size (scale 0.5). */
START_TEST(verdict_of_synthetic_runs_in_f32_and_bf16)
{
    int c = _i / 2, bf16 = _i % 2;
    write_run(path("run.h5"), cases[c].kind, 4, bf16, 0.5, 1, -1);
    resdiag_analysis *a = analyse(path("run.h5"), RESDIAG_STEP_FIRST);
    ck_assert_msg(resdiag_analysis_verdict(a) == cases[c].v, "case %d bf16 %d: verdict %s", c,
                  bf16, resdiag_verdict_name(resdiag_analysis_verdict(a)));
    ck_assert_int_eq(check(a, cases[c].p), RESDIAG_CHECK_HOLDS);
    /* pre-norm without out_norm sites cannot refute a sandwich: its second
     * norm would be there */
    for (int o = 0; o < 5; o++)
        if (o != c)
            ck_assert_int_eq(check(a, cases[o].p), cases[c].kind == PRE && cases[o].kind == SANDWICH
                                                       ? RESDIAG_CHECK_CANNOT_TELL
                                                       : RESDIAG_CHECK_FAILS);
    if (cases[c].kind == DEEP)
        ck_assert_double_eq_tol(resdiag_analysis_alpha(a), 2, bf16 ? 0.02 : 1e-5);
    else
        ck_assert(isnan(resdiag_analysis_alpha(a)));
    for (int l = 0; l < 4; l++)
        for (int s = 0; s < NSUB; s++)
            ck_assert_int_eq(resdiag_analysis_sublayer(a, l, s, NULL), cases[c].v);
    char *text = resdiag_analysis_to_text(a), *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(json);
    char want[64];
    snprintf(want, sizeof want, "\"placement\": {\"verdict\": \"%s\",", cases[c].json);
    ck_assert_msg(strstr(json, want) != NULL, "case %d bf16 %d: no %s in %s", c, bf16, want, json);
    /* a mean token norm: the kernel's norm bound on the path that ran
     * (float lanes for f32 and bf16 on the vector paths, path-bounds.h), plus
     * the file's float32 (schema 2: half an ulp, 2^-24) and the JSON's 9
     * significant digits (5e-9) */
    assert_stream_json(json, 4,
                       (double)rd_test_norm_tol(bf16 ? RESDIAG_DTYPE_BF16 : RESDIAG_DTYPE_F32) +
                           0x1p-24 + 5e-9);
    if (cases[c].kind == DEEP) {
        const char *pl = strstr(json, "\"placement\": {");
        ck_assert_double_eq_tol(json_number(pl, "alpha", NULL), 2, bf16 ? 0.02 : 1e-5);
    }
    resdiag_free(text);
    resdiag_free(json);
    resdiag_analysis_destroy(a);
}
END_TEST

/* A branch 1e-4 of the stream in bf16 is below the rounding noise: post-
 * norm must then be "cannot tell", never pre-norm; in f32 it is decided. */
START_TEST(tiny_branch_in_bf16_is_cannot_tell_never_wrong)
{
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int k = 0; k < 2; k++) {
            enum kind kind = k ? POST : PRE;
            write_run(path("tiny.h5"), kind, 3, bf16, 1e-4, 1, -1);
            resdiag_analysis *a = analyse(path("tiny.h5"), RESDIAG_STEP_FIRST);
            resdiag_verdict v = resdiag_analysis_verdict(a);
            if (kind == POST)
                ck_assert_msg(v == RESDIAG_VERDICT_POST || v == RESDIAG_VERDICT_CANNOT_TELL,
                              "post-norm, bf16 %d: %s", bf16, resdiag_verdict_name(v));
            else
                ck_assert_msg(v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_CANNOT_TELL,
                              "pre-norm, bf16 %d: %s", bf16, resdiag_verdict_name(v));
            if (!bf16) /* f32 resolves a 1e-4 branch */
                ck_assert_int_eq(v, kind == POST ? RESDIAG_VERDICT_POST : RESDIAG_VERDICT_PRE);
            if (kind == POST)
                ck_assert_int_ne(check(a, RESDIAG_PLACEMENT_PRE), RESDIAG_CHECK_HOLDS);
            resdiag_analysis_destroy(a);
        }
}
END_TEST

START_TEST(first_nonfinite_value_is_located)
{
    write_run(path("nan.h5"), PRE, 3, 0, 0.5, 4, 2);
    resdiag_analysis *a = analyse(path("nan.h5"), RESDIAG_STEP_FIRST);
    int64_t step;
    int layer, sub, site;
    resdiag_direction dir;
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, &layer, &sub, &site, &dir), 1);
    ck_assert_int_eq(step, 2);
    ck_assert_int_eq(layer, 1);
    ck_assert_int_eq(sub, 0);                      /* the first in call order */
    ck_assert_int_eq(site, RESDIAG_BRANCH_OUT);
    ck_assert_int_eq(dir, RESDIAG_FORWARD);
    char *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"nonfinite\": {\"step\": 2, \"layer\": 1"));
    resdiag_free(json);
    resdiag_analysis_destroy(a);
    /* step 0 has none: a run analysed at its last step still reports step 2 */
    a = analyse(path("nan.h5"), RESDIAG_STEP_LAST);
    ck_assert_int_eq(resdiag_analysis_step(a), 3);
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, NULL, NULL, NULL, NULL), 1);
    ck_assert_int_eq(step, 2);
    resdiag_analysis_destroy(a);
    write_run(path("ok.h5"), PRE, 2, 0, 0.5, 1, -1);
    a = analyse(path("ok.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, NULL, NULL, NULL, NULL), 0);
    resdiag_analysis_destroy(a);
}
END_TEST

/* A model parameter's gradient that holds the first NaN is named (not
 * numbered) in the text, the JSON and the HTML page. */
START_TEST(first_nonfinite_model_parameter_is_named)
{
    static const char *const subs[1] = { "mlp" };
    static const char *const mparams[2] = { "embed.wte", "head.w" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 1, .cols = 4, .sublayers = 1,
        .sublayer_names = subs, .model_params = 2, .model_param_names = mparams });
    resdiag *r = fixture_open(path("param-nan.h5"), &m, NULL);
    float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, g[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    g[5] = NAN;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, 2, 4)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "embed.wte", resdiag_f32(x, 2, 4)),
                     RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "head.w", resdiag_f32(g, 2, 4)),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    resdiag_analysis *a = analyse(path("param-nan.h5"), RESDIAG_STEP_FIRST);
    int64_t step;
    int layer, site;
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, &layer, NULL, &site, NULL), 1);
    ck_assert_int_eq(layer, RESDIAG_MODEL_LEVEL);
    ck_assert_int_eq(site, -1);
    char *text = resdiag_analysis_to_text(a), *json = resdiag_analysis_to_json(a);
    char *html = resdiag_analysis_to_html(a, NULL);
    ck_assert_msg(strstr(text, "model parameter head.w gradient") != NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(json, "\"param\": \"head.w\""));
    ck_assert_ptr_nonnull(strstr(html, "model parameter head.w gradient"));
    resdiag_free(text);
    resdiag_free(json);
    resdiag_free(html);
    resdiag_analysis_destroy(a);
}
END_TEST

START_TEST(empty_run_and_bad_arguments_are_errors)
{
    write_run(path("empty.h5"), PRE, 2, 0, 0.5, 0, -1);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path("empty.h5")), RESDIAG_OK);
    resdiag_analysis *a = (resdiag_analysis *)1;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_E_NOT_FOUND);
    ck_assert_ptr_null(a);
    ck_assert_int_eq(resdiag_analyze(NULL, NULL, &a), RESDIAG_E_NULL);
    resdiag_reader_destroy(rd);
    write_run(path("one.h5"), PRE, 2, 0, 0.5, 1, -1);
    ck_assert_int_eq(resdiag_reader_open(&rd, path("one.h5")), RESDIAG_OK);
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.step_index = 5;
    ck_assert_int_eq(resdiag_analyze(rd, &o, &a), RESDIAG_E_NOT_FOUND);
    resdiag_reader_destroy(rd);
    resdiag_analysis_destroy(NULL);
    resdiag_free(NULL);
    ck_assert_ptr_null(resdiag_analysis_to_text(NULL));
    ck_assert_int_eq(resdiag_analysis_check(NULL, NULL, NULL, 0), RESDIAG_CHECK_CANNOT_TELL);
    ck_assert_str_eq(resdiag_verdict_name(RESDIAG_VERDICT_PRE_OR_SANDWICH), "pre_or_sandwich");
    ck_assert_str_eq(resdiag_verdict_name((resdiag_verdict)99), "?");
}
END_TEST

/* A sandwich whose second norm is not in the sites: its branch_out has a
 * norm output's equal token norms, which supports a norm there but never
 * decides it: "pre-norm or sandwich" (low), and check exits 2 on it for
 * every expectation, the rival family's too, naming the sites to record. */
START_TEST(low_verdict_is_cannot_tell_for_every_expectation)
{
    hide_out_norm = 1;
    write_run(path("low.h5"), SANDWICH, 4, 0, 0.5, 1, -1);
    hide_out_norm = 0;
    resdiag_analysis *a = analyse(path("low.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE_OR_SANDWICH);
    ck_assert_int_eq(resdiag_analysis_confidence(a), RESDIAG_CONFIDENCE_LOW);
    static const resdiag_placement every[] = {
        RESDIAG_PLACEMENT_PRE, RESDIAG_PLACEMENT_POST, RESDIAG_PLACEMENT_SANDWICH,
        RESDIAG_PLACEMENT_DEEPNORM, RESDIAG_PLACEMENT_MIXED, RESDIAG_PLACEMENT_PARALLEL,
        RESDIAG_PLACEMENT_NONE, RESDIAG_PLACEMENT_REORDERED, RESDIAG_PLACEMENT_PER_SUBLAYER
    };
    for (size_t i = 0; i < sizeof every / sizeof every[0]; i++) {
        resdiag_check_options c;
        resdiag_check_options_init(&c);
        c.expect = every[i];
        char why[512];
        ck_assert_int_eq(resdiag_analysis_check(a, &c, why, sizeof why),
                         RESDIAG_CHECK_CANNOT_TELL);
        ck_assert_msg(strstr(why, "out_norm_in") && strstr(why, "confidence low"), "%s", why);
    }
    char *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"check_decides\": false"));
    resdiag_free(json);
    resdiag_analysis_destroy(a);
    /* recorded, the same norm decides: a sandwich, and check decides */
    write_run(path("low.h5"), SANDWICH, 4, 0, 0.5, 1, -1);
    a = analyse(path("low.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_SANDWICH);
    json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"check_decides\": true"));
    resdiag_free(json);
    resdiag_analysis_destroy(a);
}
END_TEST

/* The final norm comes from the data: what the head reads (FINAL_NORM_OUT)
 * against what entered; never from which sites were observed. */
START_TEST(final_norm_is_decided_from_the_data)
{
    static const struct {
        enum kind kind;
        enum final_sites sites;
        int want;                 /* resdiag_analysis_final_norm */
        resdiag_check_result check; /* with require_final_norm */
        const char *text;
    } cases[] = {
        { PRE, FN_NONE, -1, RESDIAG_CHECK_CANNOT_TELL, "final norm: not observed - no final-norm" },
        { PRE, FN_HEAD_INPUT, 0, RESDIAG_CHECK_FAILS, "final norm: absent - what the head reads" },
        { PRE, FN_IDENTITY, 0, RESDIAG_CHECK_FAILS, "is its input unchanged (difference 0.0e+00)" },
        { PRE, FN_LAYERNORM, 1, RESDIAG_CHECK_HOLDS, "final norm: present - final_norm_out differs" },
        /* a LayerNorm of a stream that is a norm output already changes it
         * only by its epsilon: a norm or an identity, the data cannot tell */
        { POST, FN_LAYERNORM, -1, RESDIAG_CHECK_CANNOT_TELL,
          "final norm: cannot be told from an identity here - final_norm_out differs from" },
        { POST, FN_HEAD_INPUT, 0, RESDIAG_CHECK_FAILS, "final norm: absent" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        final_sites = cases[i].sites;
        write_run(path("fn.h5"), cases[i].kind, 3, 0, 0.5, 1, -1);
        final_sites = FN_NONE;
        resdiag_analysis *a = analyse(path("fn.h5"), RESDIAG_STEP_FIRST);
        ck_assert_int_eq(resdiag_analysis_final_norm(a), cases[i].want);
        resdiag_check_options c;
        resdiag_check_options_init(&c);
        c.expect = cases[i].kind == PRE ? RESDIAG_PLACEMENT_PRE : RESDIAG_PLACEMENT_POST;
        c.require_final_norm = 1;
        ck_assert_int_eq(resdiag_analysis_check(a, &c, NULL, 0), cases[i].check);
        char *text = resdiag_analysis_to_text(a);
        ck_assert_msg(strstr(text, cases[i].text), "case %zu: %s", i, text);
        /* the warning only when the data show there is none */
        int warned = strstr(text, "pre without a final norm") != NULL;
        ck_assert_int_eq(warned, cases[i].kind == PRE && cases[i].want == 0);
        resdiag_free(text);
        char *json = resdiag_analysis_to_json(a);
        ck_assert_ptr_nonnull(strstr(json, cases[i].want == 1   ? "\"final_norm\": \"present\""
                                           : cases[i].want == 0 ? "\"final_norm\": \"absent\""
                                           : cases[i].kind == POST
                                               ? "\"final_norm\": \"indistinguishable\""
                                               : "\"final_norm\": \"not observed\""));
        resdiag_free(json);
        resdiag_analysis_destroy(a);
    }
}
END_TEST

/* A sublayer whose deciding relation cannot be computed (its branch_out
 * never observed, while its norm_in = stream_in by itself fits pre-norm)
 * is "cannot tell", and the report says which site is missing. */
START_TEST(missing_site_is_cannot_tell)
{
    skip_branch_sub = 1;
    write_run(path("miss.h5"), PRE, 3, 0, 0.5, 1, -1);
    skip_branch_sub = -1;
    resdiag_analysis *a = analyse(path("miss.h5"), RESDIAG_STEP_FIRST);
    for (int l = 0; l < 3; l++) {
        ck_assert_int_eq(resdiag_analysis_sublayer(a, l, 0, NULL), RESDIAG_VERDICT_PRE);
        ck_assert_int_eq(resdiag_analysis_sublayer(a, l, 1, NULL), RESDIAG_VERDICT_CANNOT_TELL);
    }
    char *text = resdiag_analysis_to_text(a);
    ck_assert_msg(strstr(text, "mlp    ?            branch_out not observed; cannot tell"), "%s",
                  text);
    ck_assert_msg(strstr(text, "branch_out not observed while the other sites are, in 3 of 6 "
                               "sublayers (first: layer 0 mlp"), "%s", text);
    resdiag_free(text);
    resdiag_analysis_destroy(a);
}
END_TEST

/* Check's extra requirements: final norm, stream growth. */
START_TEST(check_final_norm_and_growth)
{
    final_sites = FN_HEAD_INPUT; /* no final norm, seen in the data */
    write_run(path("g.h5"), PRE, 4, 0, 0.5, 1, -1);
    final_sites = FN_NONE;
    resdiag_analysis *a = analyse(path("g.h5"), RESDIAG_STEP_FIRST);
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = RESDIAG_PLACEMENT_PRE;
    c.require_final_norm = 1;
    ck_assert_int_eq(resdiag_analysis_final_norm(a), 0);
    ck_assert_int_eq(resdiag_analysis_check(a, &c, NULL, 0), RESDIAG_CHECK_FAILS);
    c.require_final_norm = 0;
    double g = resdiag_analysis_growth(a);
    ck_assert(g > 1);
    c.max_growth = g * 0.9;
    ck_assert_int_eq(resdiag_analysis_check(a, &c, NULL, 0), RESDIAG_CHECK_FAILS);
    c.max_growth = g * 1.1;
    ck_assert_int_eq(resdiag_analysis_check(a, &c, NULL, 0), RESDIAG_CHECK_HOLDS);
    resdiag_analysis_destroy(a);
}
END_TEST

/* A caller built against an older header passes a smaller
 * resdiag_check_options: what lies past its struct_size is not read (here
 * poisoned with values that would fail the check, or not allocated at all)
 * and those fields keep their defaults. Sizes without expect, or larger
 * than the library knows, are refused. */
START_TEST(check_options_of_an_older_caller_get_the_defaults)
{
    final_sites = FN_HEAD_INPUT; /* no final norm */
    write_run(path("old.h5"), PRE, 4, 0, 0.5, 1, -1);
    final_sites = FN_NONE;
    resdiag_analysis *a = analyse(path("old.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_final_norm(a), 0);
    ck_assert(resdiag_analysis_growth(a) > 1);
    char why[256];
    const size_t sizes[2] = { offsetof(resdiag_check_options, require_final_norm),
                              offsetof(resdiag_check_options, max_growth) };
    for (int i = 0; i < 2; i++) {
        resdiag_check_options c;
        resdiag_check_options_init(&c);
        c.struct_size = sizes[i];
        c.expect = RESDIAG_PLACEMENT_PRE;
        /* the poison: a final norm required (there is none), growth limit 1e-9 */
        c.require_final_norm = i == 0 ? 1 : 0;
        c.max_growth = 1e-9;
        ck_assert_msg(resdiag_analysis_check(a, &c, why, sizeof why) == RESDIAG_CHECK_HOLDS,
                      "struct_size %zu: %s", sizes[i], why);
        /* exactly the caller's bytes, no more (ASan sees a read past them) */
        resdiag_check_options *heap = malloc(sizes[i]);
        ck_assert_ptr_nonnull(heap);
        memcpy(heap, &c, sizes[i]);
        ck_assert_msg(resdiag_analysis_check(a, heap, why, sizeof why) == RESDIAG_CHECK_HOLDS,
                      "struct_size %zu on the heap: %s", sizes[i], why);
        free(heap);
    }
    const size_t bad[4] = { 0, sizeof(size_t), offsetof(resdiag_check_options, expect),
                            sizeof(resdiag_check_options) + 8 };
    for (int i = 0; i < 4; i++) {
        resdiag_check_options c;
        resdiag_check_options_init(&c);
        c.expect = RESDIAG_PLACEMENT_PRE;
        c.struct_size = bad[i];
        ck_assert_int_eq(resdiag_analysis_check(a, &c, why, sizeof why),
                         RESDIAG_CHECK_CANNOT_TELL);
        ck_assert_msg(strstr(why, "struct_size") != NULL, "struct_size %zu: %s", bad[i], why);
    }
    resdiag_analysis_destroy(a);
}
END_TEST

/* Warnings: a declaration the data contradict; massive activations. */
START_TEST(warnings_name_the_contradiction_and_the_column)
{
    declare_override = RESDIAG_PLACEMENT_PRE;
    write_run(path("w.h5"), POST, 3, 0, 0.5, 1, -1);
    declare_override = RESDIAG_PLACEMENT_UNDECLARED;
    resdiag_analysis *a = analyse(path("w.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_POST);
    char *text = resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(strstr(text, "declared: pre - CONTRADICTED by the data"));
    ck_assert_ptr_nonnull(strstr(text, "the trainer declares pre, but the data say post"));
    ck_assert_ptr_null(strstr(text, "massive activation"));
    resdiag_free(text);
    resdiag_analysis_destroy(a);

    spike = 3000;
    write_run(path("s.h5"), PRE, 3, 0, 0.5, 1, -1);
    spike = 0;
    a = analyse(path("s.h5"), RESDIAG_STEP_FIRST);
    text = resdiag_analysis_to_text(a);
    ck_assert_msg(strstr(text, "massive activation: the stream leaving layer 0") != NULL, "%s",
                  text);
    ck_assert_ptr_nonnull(strstr(text, "in column 7,"));
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
    resdiag_free(text);
    resdiag_analysis_destroy(a);
}
END_TEST

/* expect = RESDIAG_EXPECT_DECLARED holds the data against the run's own
 * declaration; it fails exactly where the report warns of a contradiction,
 * which is the first line of the text and a key of the JSON. */
static resdiag_check_result check_declared(const resdiag_analysis *a, char *why, size_t len)
{
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = RESDIAG_EXPECT_DECLARED;
    return resdiag_analysis_check(a, &c, why, len);
}

START_TEST(check_expect_declared_is_the_gate_for_the_declaration)
{
    char why[256];
    /* post-norm data declared post: holds */
    write_run(path("post.h5"), POST, 3, 0, 0.5, 1, -1);
    resdiag_analysis *a = analyse(path("post.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(check_declared(a, why, sizeof why), RESDIAG_CHECK_HOLDS);
    ck_assert_msg(strstr(why, "holds: post, as declared") != NULL, "%s", why);
    char *text = resdiag_analysis_to_text(a), *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_null(strstr(text, "WARNING"));
    ck_assert_ptr_nonnull(strstr(json, "\"declared_contradicted\": false"));
    resdiag_free(text);
    resdiag_free(json);
    resdiag_analysis_destroy(a);

    /* post-norm data declared pre: fails, and every output says so first */
    declare_override = RESDIAG_PLACEMENT_PRE;
    write_run(path("post-as-pre.h5"), POST, 3, 0, 0.5, 1, -1);
    declare_override = RESDIAG_PLACEMENT_UNDECLARED;
    a = analyse(path("post-as-pre.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(check_declared(a, why, sizeof why), RESDIAG_CHECK_FAILS);
    ck_assert_msg(strstr(why, "not pre (as declared): observed post") != NULL, "%s", why);
    ck_assert_int_eq(check(a, RESDIAG_PLACEMENT_POST), RESDIAG_CHECK_HOLDS);
    text = resdiag_analysis_to_text(a);
    const char *warning = "WARNING: the data contradict the declared placement: the trainer "
                          "declares pre, the data say post-norm (confidence ";
    ck_assert_msg(strncmp(text, warning, strlen(warning)) == 0, "%s", text);
    json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"declared_contradicted\": true"));
    ck_assert_ptr_nonnull(strstr(json, "\"declared_agrees\": false"));
    resdiag_free(text);
    resdiag_free(json);
    resdiag_analysis_destroy(a);

    /* nothing declared: cannot tell, and no warning */
    declare_nothing = 1;
    write_run(path("undeclared.h5"), POST, 3, 0, 0.5, 1, -1);
    declare_nothing = 0;
    a = analyse(path("undeclared.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(check_declared(a, why, sizeof why), RESDIAG_CHECK_CANNOT_TELL);
    ck_assert_msg(strstr(why, "declares none") != NULL, "%s", why);
    text = resdiag_analysis_to_text(a);
    ck_assert_ptr_null(strstr(text, "WARNING"));
    resdiag_free(text);
    resdiag_analysis_destroy(a);

    /* pre data declared mixed: contradicted, the gate fails */
    declare_override = RESDIAG_PLACEMENT_MIXED;
    declare_mix = 1;
    write_run(path("pre-as-mixed.h5"), PRE, 3, 0, 0.5, 1, -1);
    declare_override = RESDIAG_PLACEMENT_UNDECLARED;
    declare_mix = 0;
    a = analyse(path("pre-as-mixed.h5"), RESDIAG_STEP_FIRST);
    ck_assert_int_eq(check_declared(a, why, sizeof why), RESDIAG_CHECK_FAILS);
    text = resdiag_analysis_to_text(a);
    ck_assert_msg(strstr(text, "WARNING: the data contradict the declared placement: the "
                               "trainer declares mixed (post-norm in layers 0..0), the data "
                               "say pre-norm") == text, "%s", text);
    resdiag_free(text);
    resdiag_analysis_destroy(a);

    /* the options of a caller that knows only expect work too */
    a = analyse(path("post-as-pre.h5"), RESDIAG_STEP_FIRST);
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = RESDIAG_EXPECT_DECLARED;
    c.struct_size = offsetof(resdiag_check_options, require_final_norm);
    ck_assert_int_eq(resdiag_analysis_check(a, &c, why, sizeof why), RESDIAG_CHECK_FAILS);
    resdiag_analysis_destroy(a);
}
END_TEST

/* Evaluation and inference runs: the report never calls the first step
 * initialization nor the recorded steps training. */
START_TEST(forward_only_runs_are_not_worded_as_training)
{
    static const resdiag_run_kind kinds[2] = { RESDIAG_RUN_EVALUATION, RESDIAG_RUN_INFERENCE };
    for (int k = 0; k < 2; k++) {
        run_kind = kinds[k];
        write_run(path("fwd.h5"), PRE, 3, 0, 0.5, 4, -1);
        run_kind = RESDIAG_RUN_TRAINING;
        resdiag_analysis *a = analyse(path("fwd.h5"), RESDIAG_STEP_FIRST);
        ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
        char *text = resdiag_analysis_to_text(a);
        ck_assert_msg(strstr(text, "initiali") == NULL && strstr(text, "training") == NULL &&
                          strstr(text, "Training") == NULL, "%s", text);
        ck_assert_msg(strstr(text, "analysed step 0 (record 1), the first recorded\n") != NULL,
                      "%s", text);
        ck_assert_msg(strstr(text, "Over the recorded steps (step 0 -> 3, 4 recorded):") != NULL,
                      "%s", text);
        char kind_line[64];
        snprintf(kind_line, sizeof kind_line, "; norm layernorm; %s run; ",
                 resdiag_run_kind_name(kinds[k]));
        ck_assert_msg(strstr(text, kind_line) != NULL, "%s", text);
        ck_assert_ptr_null(strstr(text, "Gradients"));
        char *json = resdiag_analysis_to_json(a);
        char key[64];
        snprintf(key, sizeof key, "\"run_kind\": \"%s\"", resdiag_run_kind_name(kinds[k]));
        ck_assert_msg(strstr(json, key) != NULL, "%s", json);
        resdiag_free(text);
        resdiag_free(json);
        resdiag_analysis_destroy(a);
    }
    /* a training run keeps its words */
    write_run(path("train.h5"), PRE, 3, 0, 0.5, 2, -1);
    resdiag_analysis *a = analyse(path("train.h5"), RESDIAG_STEP_FIRST);
    char *text = resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(strstr(text, "the first: initialization"));
    ck_assert_ptr_nonnull(strstr(text, "Over training (step 0 -> 1"));
    ck_assert_ptr_nonnull(strstr(text, "Gradients: none recorded."));
    resdiag_free(text);
    resdiag_analysis_destroy(a);
}
END_TEST

/* ---------------------------------------------------------- roles */

/* The analysis reads the head and the residual-write matrix by the roles
 * the run declares, whatever the parameters are called; a role naming no
 * parameter of the run is no role. */
START_TEST(roles_name_the_head_and_the_residual_write)
{
    const char *layer[] = { "ffn.out", "attn.proj" }, *model[] = { "lm_head" };
    resdiag_run_info in;
    memset(&in, 0, sizeof in);
    in.n_layer_params = 2;
    in.layer_param_names = layer;
    in.n_model_params = 1;
    in.model_param_names = model;
    in.head_param = "lm_head";
    in.residual_param = "attn.proj";
    ck_assert_str_eq(rd_analysis_role_param(&in, RD_ROLE_HEAD), "lm_head");
    ck_assert_str_eq(rd_analysis_role_param(&in, RD_ROLE_RESIDUAL), "attn.proj");
    in.head_param = "head";
    in.residual_param = "mlp.w1";
    ck_assert_ptr_null(rd_analysis_role_param(&in, RD_ROLE_HEAD));
    ck_assert_ptr_null(rd_analysis_role_param(&in, RD_ROLE_RESIDUAL));
    in.head_param = in.residual_param = NULL;
    ck_assert_ptr_null(rd_analysis_role_param(&in, RD_ROLE_HEAD));
    ck_assert_ptr_null(rd_analysis_role_param(&in, RD_ROLE_RESIDUAL));
}
END_TEST

static void quiet(resdiag_log_priority p, const char *m, void *u)
{
    (void)p;
    (void)m;
    (void)u;
}

static void be_quiet(void)
{
    resdiag_set_log_handler(quiet, NULL);
}

static const check_program program = {
    .name = "analysis",
    .prepare = be_quiet,
};
CHECK_MAIN(&program,
           CHECK_CASE("fits", 0),
               CHECK_TEST(fit_line_recovers_an_exact_line),
               CHECK_TEST(fit_line_matches_independent_computation),
               CHECK_TEST(t_quantiles_match_tables),
               CHECK_TEST(t_quantiles_match_an_independent_computation),
               CHECK_TEST(fit_says_when_data_are_too_short),
               CHECK_TEST(loglog_slope_of_a_power_law),
               CHECK_TEST(relation_errors_on_synthetic_sketches),
               CHECK_TEST(signature_of_normalized_and_plain_tensors),
               CHECK_TEST(roles_name_the_head_and_the_residual_write),
           CHECK_CASE_FIXTURE("runs", 120, setup, teardown),
               CHECK_LOOP(verdict_of_synthetic_runs_in_f32_and_bf16, 0, 10),
               CHECK_TEST(tiny_branch_in_bf16_is_cannot_tell_never_wrong),
               CHECK_TEST(first_nonfinite_value_is_located),
               CHECK_TEST(first_nonfinite_model_parameter_is_named),
               CHECK_TEST(empty_run_and_bad_arguments_are_errors),
               CHECK_TEST(check_final_norm_and_growth),
               CHECK_TEST(final_norm_is_decided_from_the_data),
               CHECK_TEST(low_verdict_is_cannot_tell_for_every_expectation),
               CHECK_TEST(missing_site_is_cannot_tell),
               CHECK_TEST(check_options_of_an_older_caller_get_the_defaults),
               CHECK_TEST(warnings_name_the_contradiction_and_the_column),
               CHECK_TEST(check_expect_declared_is_the_gate_for_the_declaration),
               CHECK_TEST(forward_only_runs_are_not_worded_as_training))
