/*
 * test-consequences.c - the report's Consequences on runs written here
 * through the C API with values the test sets: each consequence fires on
 * its condition and not on its neighbour's (post-norm without warm-up
 * against with it, pre-norm at 6 against 48 layers, a small against a
 * default branch at the first step, no `lr` metric); the gradient
 * exponent and the effective depth in the JSON against the test's own
 * float64 computation from the tensors it wrote; every number the claims
 * quote against the sources' values typed here; and no_consequences, with
 * check unchanged by it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "fixture.h"

enum { D = 64, ROWS = 8, STEPS = 4, MAXL = 48 };
enum { LR_NONE, LR_WARMUP, LR_CONST };

static char dir[256];
static const check_program program = { .name = "consequences", .timeout = 120, .scratch = dir,
                                       .scratch_size = sizeof dir, .remove_files = 1 };

static unsigned rng;
static double uniform(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 16777216.0 - 0.5;
}

static double frob(const float *t, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)t[i] * t[i];
    return sqrt(s);
}

/* What the test keeps of step 0: each layer's ||f_l||_F, ||x_L||_F and
 * the gradients' norms as written. */
static double f_norm[MAXL], xl_norm, g_norm[MAXL];

#define FWD(r, l, site, t) \
    ck_assert_int_eq(RESDIAG_FWD(r, l, 0, site, resdiag_f32(t, ROWS, D)), RESDIAG_OK)

/* A run of L layers of one sublayer "attn", placement pre or post, whose
 * branch is scale0 times its input's scale at step 0 (0.5 after); the lr
 * metric as lr says; mlp-free gradients ||g_l|| ~ (l+1)^gexp. */
static void write_run(const char *path, resdiag_placement pl, int L, double scale0, int lr,
                      double gexp)
{
    static const char *const subs[1] = { "attn" };
    static const char *const params[1] = { "attn.wo" };
    static const char *const metrics[1] = { "lr" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = 1,
                                                      .sublayer_names = subs, .layer_params = 1,
                                                      .layer_param_names = params });
    m.declared_placement = pl;
    m.norm_kind = RESDIAG_NORM_RMSNORM;
    m.residual_param = "attn.wo";
    if (lr != LR_NONE) {
        m.n_metrics = 1;
        m.metric_names = metrics;
    }
    resdiag *r = fixture_open(path, &m, NULL);
    static float x[ROWS * D], no[ROWS * D], f[ROWS * D], y[ROWS * D], g[ROWS * D];
    rng = 7;
    for (int k = 0; k < STEPS; k++) {
        ck_assert_int_eq(resdiag_step_begin(r, 10 * k), RESDIAG_OK);
        double scale = k == 0 ? scale0 : 0.5;
        for (int i = 0; i < ROWS * D; i++)
            x[i] = (float)(2 * uniform());
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, ROWS, D));
        for (int l = 0; l < L; l++) {
            FWD(r, l, RESDIAG_STREAM_IN, x);
            if (pl == RESDIAG_PLACEMENT_PRE) {
                fixture_rmsnorm(no, x, ROWS, D);
                FWD(r, l, RESDIAG_NORM_IN, x);
                FWD(r, l, RESDIAG_NORM_OUT, no);
                for (int i = 0; i < ROWS * D; i++)
                    f[i] = (float)(scale * (no[i] + uniform()));
                FWD(r, l, RESDIAG_BRANCH_OUT, f);
                for (int i = 0; i < ROWS * D; i++)
                    y[i] = x[i] + f[i];
            } else {
                double rms = frob(x, ROWS * D) / sqrt(ROWS * D);
                for (int i = 0; i < ROWS * D; i++)
                    f[i] = (float)(scale * rms * (x[i] / rms + 2 * uniform()));
                FWD(r, l, RESDIAG_BRANCH_OUT, f);
                for (int i = 0; i < ROWS * D; i++)
                    no[i] = x[i] + f[i];
                FWD(r, l, RESDIAG_NORM_IN, no);
                fixture_rmsnorm(y, no, ROWS, D);
                FWD(r, l, RESDIAG_NORM_OUT, y);
            }
            FWD(r, l, RESDIAG_STREAM_OUT, y);
            if (k == 0)
                f_norm[l] = frob(f, ROWS * D);
            memcpy(x, y, sizeof x);
        }
        if (k == 0)
            xl_norm = frob(x, ROWS * D);
        fixture_rmsnorm(y, x, ROWS, D);
        RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(x, ROWS, D));
        RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(y, ROWS, D));
        for (int l = 0; l < L; l++) {
            double c = pow(l + 1, gexp) * (1 + 0.2 * uniform());
            for (int i = 0; i < ROWS * D; i++)
                g[i] = (float)(c * uniform());
            ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, l, "attn.wo", resdiag_f32(g, ROWS, D)),
                             RESDIAG_OK);
            if (k == 0)
                g_norm[l] = frob(g, ROWS * D);
        }
        if (lr != LR_NONE) {
            double v = lr == LR_WARMUP ? 1e-3 * fmin(1, (k + 1) / 3.0) : 1e-3;
            ck_assert_int_eq(resdiag_step_metric(r, "lr", v), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

/* The recorded step analysed: the first by default. */
static int64_t analysed = RESDIAG_STEP_FIRST;

static resdiag_analysis *analyse(const char *path, int no_consequences)
{
    resdiag_reader *rd = fixture_read(path);
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.no_consequences = no_consequences;
    o.step_index = analysed;
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, &o, &a), RESDIAG_OK);
    resdiag_reader_destroy(rd);
    return a;
}

/* The run's report as JSON. */
static char *json_of(const char *name, resdiag_placement pl, int L, double scale0, int lr,
                     double gexp)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s.h5", dir, name);
    write_run(path, pl, L, scale0, lr, gexp);
    resdiag_analysis *a = analyse(path, 0);
    ck_assert_int_eq(resdiag_analysis_verdict(a),
                     pl == RESDIAG_PLACEMENT_PRE ? RESDIAG_VERDICT_PRE : RESDIAG_VERDICT_POST);
    char *j = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(j);
    resdiag_analysis_destroy(a);
    return j;
}

/* The consequence's entry in j ("{\"id\": \"ID\"" up to its end), or NULL. */
static const char *entry(const char *j, const char *id)
{
    char key[80];
    snprintf(key, sizeof key, "{\"id\": \"%s\"", id);
    const char *c = strstr(j, "\"consequences\": [");
    return c ? strstr(c, key) : NULL;
}

static int fires(const char *j, const char *id)
{
    const char *e = entry(j, id);
    return e && strncmp(strstr(e, "\"condition_met\": ") + 17, "true", 4) == 0;
}

static int not_measured(const char *j, const char *id)
{
    const char *e = entry(j, id);
    return e && strncmp(strstr(e, "\"condition_met\": ") + 17, "null", 4) == 0;
}

static double num_after(const char *j, const char *key)
{
    const char *p = strstr(j, key);
    ck_assert_msg(p, "no %s in %.400s", key, j);
    return strtod(p + strlen(key), NULL);
}

START_TEST(post_without_warmup_against_with)
{
    char *no = json_of("post-const", RESDIAG_PLACEMENT_POST, 12, 0.5, LR_CONST, 0.3);
    ck_assert_msg(fires(no, "post_no_warmup"), "%s", strstr(no, "\"consequences\""));
    ck_assert(!entry(no, "post_deep_with_warmup") && !entry(no, "post_small_init"));
    ck_assert(!entry(no, "pre_no_warmup") && !entry(no, "pre_deep"));
    /* the last layer's gradient over the first's, as written */
    char want[64];
    snprintf(want, sizeof want, "gradient is %.3g times the first layer's", g_norm[11] / g_norm[0]);
    ck_assert_msg(strstr(entry(no, "post_no_warmup"), want), "no \"%s\" in %.600s", want,
                  entry(no, "post_no_warmup"));
    ck_assert_msg(strstr(no, "\"lr\": {\"state\": \"no_warmup\""), "%.200s", strstr(no, "\"lr\""));
    char *wu = json_of("post-warmup", RESDIAG_PLACEMENT_POST, 12, 0.5, LR_WARMUP, 0.3);
    ck_assert_msg(!entry(wu, "post_no_warmup"), "%s", strstr(wu, "\"consequences\""));
    ck_assert(fires(wu, "post_deep_with_warmup"));
    /* lr 1e-3 * (k+1)/3 at steps 0, 10, 20, 30: the peak first at step 20 */
    const char *lr = strstr(wu, "\"lr\": {\"state\": \"warmup\"");
    ck_assert_msg(lr, "%.200s", strstr(wu, "\"lr\""));
    /* steps 0, 10, 20 at 1/3, 2/3 and all of the peak: 0 .. 20 counted */
    ck_assert_int_eq((int)num_after(lr, "\"warmup_steps\": "), 21);
    ck_assert_double_eq_tol(num_after(lr, "\"peak\": "), 1e-3, 1e-12);
    ck_assert_double_eq_tol(num_after(lr, "\"first\": "), 1e-3 / 3, 1e-12);
    char *none = json_of("post-nolr", RESDIAG_PLACEMENT_POST, 12, 0.5, LR_NONE, 0.3);
    ck_assert(not_measured(none, "post_no_warmup") && !entry(none, "post_deep_with_warmup"));
    ck_assert(strstr(entry(none, "post_no_warmup"), "no `lr` metric"));
    char *shallow = json_of("post6-warmup", RESDIAG_PLACEMENT_POST, 6, 0.5, LR_WARMUP, 0.3);
    ck_assert(!entry(shallow, "post_deep_with_warmup") && !entry(shallow, "post_no_warmup"));
    free(no);
    free(wu);
    free(none);
    free(shallow);
}
END_TEST

START_TEST(post_small_against_default_branch_at_init)
{
    char *small = json_of("post-small", RESDIAG_PLACEMENT_POST, 4, 0.01, LR_CONST, 0);
    ck_assert_msg(fires(small, "post_small_init"), "%s", strstr(small, "\"consequences\""));
    ck_assert(strstr(small, "\"class\": \"small\""));
    char *def = json_of("post-default", RESDIAG_PLACEMENT_POST, 4, 0.5, LR_CONST, 0);
    ck_assert(!entry(def, "post_small_init") && strstr(def, "\"class\": \"default\""));
    /* a zero branch at step 0 has no placement there: step 10 is judged,
     * the branch scale is still the first step's */
    analysed = 1;
    char *zero = json_of("post-zero", RESDIAG_PLACEMENT_POST, 4, 0, LR_CONST, 0);
    analysed = RESDIAG_STEP_FIRST;
    ck_assert(fires(zero, "post_small_init") && strstr(zero, "\"class\": \"zero\""));
    /* a small branch in a pre-norm run is no post-norm's consequence */
    char *pre = json_of("pre-small", RESDIAG_PLACEMENT_PRE, 4, 0.01, LR_WARMUP, 0);
    ck_assert(!entry(pre, "post_small_init"));
    free(small);
    free(def);
    free(zero);
    free(pre);
}
END_TEST

/* The JSON array of n numbers after key. */
static void numbers_after(const char *j, const char *key, double *v, int n)
{
    const char *p = strstr(j, key);
    ck_assert_msg(p, "no %s", key);
    p += strlen(key);
    for (int i = 0; i < n; i++) {
        char *end;
        v[i] = strtod(p, &end);
        ck_assert_msg(end != p, "%s: entry %d is not a number: %.40s", key, i, p);
        p = end + strspn(end, ", ");
    }
}

/* least-squares slope of log y against log x, x = 1..n */
static double loglog_slope(const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double lx = log(i + 1.0), ly = log(y[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

START_TEST(pre_at_6_against_48_layers_with_effective_depth_recomputed)
{
    char *deep = json_of("pre48", RESDIAG_PLACEMENT_PRE, 48, 0.5, LR_WARMUP, -0.5);
    ck_assert_msg(fires(deep, "pre_deep"), "%s", strstr(deep, "\"consequences\""));
    ck_assert(!entry(deep, "pre_no_warmup") && !entry(deep, "post_no_warmup"));
    /* block l's share: ||f_l|| / ||x_L||, from the tensors written */
    double share[48], want[48];
    numbers_after(deep, "\"effective_depth\": {\"share\": [", share, 48);
    for (int l = 0; l < 48; l++) {
        want[l] = f_norm[l] / xl_norm;
        ck_assert_msg(fabs(share[l] - want[l]) <= 1e-5 * want[l], "layer %d: share %.9g, "
                      "computed %.9g", l, share[l], want[l]);
    }
    double ws = loglog_slope(want, 48);
    ck_assert_double_eq_tol(num_after(strstr(deep, "\"effective_depth\""), "\"exponent\": "), ws,
                            1e-5);
    char words[64];
    snprintf(words, sizeof words, "by %.3g of the first block's share", want[47] / want[0]);
    ck_assert_msg(strstr(entry(deep, "pre_deep"), words), "no \"%s\" in %.500s", words,
                  entry(deep, "pre_deep"));
    /* the gradient exponent: ||g_l|| ~ (l+1)^-0.5 as written */
    double gs = loglog_slope(g_norm, 48);
    ck_assert_msg(fabs(gs + 0.5) < 0.1, "the fixture's exponent is %g", gs);
    const char *ge = strstr(deep, "\"gradient_exponent\": [");
    ck_assert_double_eq_tol(num_after(ge, "\"exponent\": "), gs, 1e-5);
    ck_assert(num_after(ge, "\"exponent_lo\": ") < gs && num_after(ge, "\"exponent_hi\": ") > gs);
    char *shallow = json_of("pre6", RESDIAG_PLACEMENT_PRE, 6, 0.5, LR_WARMUP, -0.5);
    ck_assert_msg(!strstr(shallow, "{\"id\": "), "%s", strstr(shallow, "\"consequences\""));
    free(deep);
    free(shallow);
}
END_TEST

START_TEST(pre_without_warmup_against_with)
{
    char *no = json_of("pre-const", RESDIAG_PLACEMENT_PRE, 6, 0.5, LR_CONST, 0);
    ck_assert(fires(no, "pre_no_warmup") && !entry(no, "post_no_warmup"));
    char *none = json_of("pre-nolr", RESDIAG_PLACEMENT_PRE, 6, 0.5, LR_NONE, 0);
    ck_assert(not_measured(none, "pre_no_warmup"));
    free(no);
    free(none);
}
END_TEST

/* The sources' numbers, typed from the literature: every number with a
 * decimal point that a claim quotes is one of them, and each is quoted. */
static const double source_numbers[] = {
    35.37, 35.12, 35.18, 32.28, 31.82, 2.84, 3.36,   /* Xie et al., IWSLT */
    27.58, 26.83, 5.76, 28.17, 28.52, 28.13, 28.32, /* Nguyen and Salazar */
};

START_TEST(quoted_numbers_are_the_sources)
{
    char *j[3] = { json_of("q-post", RESDIAG_PLACEMENT_POST, 12, 0.01, LR_CONST, 0),
                   json_of("q-pre", RESDIAG_PLACEMENT_PRE, 48, 0.5, LR_CONST, 0),
                   json_of("q-postw", RESDIAG_PLACEMENT_POST, 12, 0.5, LR_WARMUP, 0) };
    int seen[sizeof source_numbers / sizeof source_numbers[0]] = { 0 };
    int claims = 0;
    for (int k = 0; k < 3; k++)
        for (const char *c = strstr(j[k], "\"claim\": \""); c; c = strstr(c + 1, "\"claim\": \"")) {
            claims++;
            const char *end = strstr(c + 10, "\", \"setting\"");
            ck_assert_ptr_nonnull(end);
            for (const char *p = c + 10; p < end; p++) {
                if (!(p[0] >= '0' && p[0] <= '9') || (p > c && p[-1] >= '0' && p[-1] <= '9'))
                    continue;
                char *e;
                double v = strtod(p, &e);
                if (!memchr(p, '.', (size_t)(e - p)) || e > end)
                    continue; /* integers: depths, E6D6, 4k warm-up steps */
                int found = 0;
                for (size_t i = 0; i < sizeof source_numbers / sizeof *source_numbers; i++)
                    if (v == source_numbers[i])
                        found = seen[i] = 1;
                ck_assert_msg(found, "quoted %g is not among the sources' numbers: %.80s", v, p);
            }
            /* the depths and warm-ups the claims name */
            ck_assert(k != 1 || !strstr(c, "O(1/sqrt(N))") || strstr(c, "at 24 layers"));
        }
    ck_assert_int_ge(claims, 5);
    for (size_t i = 0; i < sizeof seen / sizeof *seen; i++)
        ck_assert_msg(seen[i], "%g is never quoted", source_numbers[i]);
    ck_assert(strstr(j[0], "fails to converge at 4k and 8k warm-up steps"));
    for (int k = 0; k < 3; k++)
        free(j[k]);
}
END_TEST

START_TEST(no_consequences_and_check_unchanged)
{
    char path[300];
    snprintf(path, sizeof path, "%s/off.h5", dir);
    write_run(path, RESDIAG_PLACEMENT_POST, 12, 0.01, LR_CONST, 0);
    resdiag_analysis *on = analyse(path, 0), *off = analyse(path, 1);
    char *jo = resdiag_analysis_to_json(on), *jf = resdiag_analysis_to_json(off);
    char *to = resdiag_analysis_to_text(on), *tf = resdiag_analysis_to_text(off);
    ck_assert(fires(jo, "post_no_warmup") && strstr(to, "\nConsequences"));
    ck_assert(strstr(jf, "\"consequences\": null") && !strstr(tf, "Consequences"));
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = RESDIAG_PLACEMENT_POST;
    ck_assert_int_eq(resdiag_analysis_check(on, &c, NULL, 0), RESDIAG_CHECK_HOLDS);
    ck_assert_int_eq(resdiag_analysis_check(off, &c, NULL, 0), RESDIAG_CHECK_HOLDS);
    c.expect = RESDIAG_PLACEMENT_PRE;
    ck_assert_int_eq(resdiag_analysis_check(on, &c, NULL, 0), RESDIAG_CHECK_FAILS);
    resdiag_free(jo);
    resdiag_free(jf);
    resdiag_free(to);
    resdiag_free(tf);
    resdiag_analysis_destroy(on);
    resdiag_analysis_destroy(off);
}
END_TEST

/* diff: both runs' consequences and the measured differences side by side. */
START_TEST(diff_shows_what_the_sources_say_matters)
{
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/d-pre.h5", dir);
    snprintf(pb, sizeof pb, "%s/d-post.h5", dir);
    write_run(pa, RESDIAG_PLACEMENT_PRE, 6, 0.5, LR_WARMUP, 0);
    write_run(pb, RESDIAG_PLACEMENT_POST, 6, 0.01, LR_CONST, 0);
    resdiag_analysis *a = analyse(pa, 0), *b = analyse(pb, 0);
    char *t = resdiag_analysis_diff_text(a, b, "pre", "post");
    ck_assert_ptr_nonnull(t);
    const char *s = strstr(t, "\nWhat the sources say matters (A | B):\n");
    ck_assert_msg(s, "%s", t);
    const char *rows[] = { "placement", "warm-up", "depth (layers)", "branch scale at init (r)",
                           "gradient exponent b" };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        ck_assert_msg(strstr(s, rows[i]), "no row %s in %s", rows[i], s);
    const char *w = strstr(s, "  warm-up");
    ck_assert_msg(w && strstr(w, "yes, 21 steps") && strstr(w, " no ") &&
                  strstr(w, "<- differs") < strchr(w, '\n'), "%.120s", w);
    const char *d = strstr(s, "  depth (layers)");
    ck_assert_msg(!strstr(d, "<- differs") || strstr(d, "<- differs") > strchr(d, '\n'),
                  "equal depths differ: %.120s", d);
    /* 0.5 is default, 0.01 small: another class; the same run against
     * itself marks no row */
    const char *bs = strstr(s, "  branch scale at init (r)");
    ck_assert_msg(bs && strstr(bs, "<- differs") && strstr(bs, "<- differs") < strchr(bs, '\n'),
                  "%.160s", bs);
    char *same = resdiag_analysis_diff_text(a, a, "pre", "pre");
    const char *ss = strstr(same, "\nWhat the sources say matters");
    ck_assert_msg(ss && !strstr(ss, "<- differs"), "%s", ss);
    resdiag_free(same);
    ck_assert_msg(strstr(s, "  A: none\n") && strstr(s, "  B: post_no_warmup, post_small_init\n"),
                  "%s", s);
    resdiag_free(t);
    resdiag_analysis_destroy(a);
    resdiag_analysis_destroy(b);
}
END_TEST

CHECK_MAIN(&program, CHECK_TEST(diff_shows_what_the_sources_say_matters), CHECK_TEST(post_without_warmup_against_with),
           CHECK_TEST(post_small_against_default_branch_at_init),
           CHECK_TEST(pre_at_6_against_48_layers_with_effective_depth_recomputed),
           CHECK_TEST(pre_without_warmup_against_with), CHECK_TEST(quoted_numbers_are_the_sources),
           CHECK_TEST(no_consequences_and_check_unchanged))
