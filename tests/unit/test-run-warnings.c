/*
 * test-run-warnings.c - the report's warnings come from the whole run:
 * a pre-norm run whose branch outweighs the stream only at its last step
 * is warned of by the analysis of step 0 (the default), naming that step
 * and the value computed here from the tensors written; so is a massive
 * activation at the last step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "fixture.h"

enum { L = 2, D = 64, ROWS = 8, STEPS = 10 };

static char dir[256];
static const check_program program = { .name = "run-warnings", .timeout = 60, .scratch = dir,
                                       .scratch_size = sizeof dir, .remove_files = 1 };

static unsigned rng = 3;
static double uniform(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 16777216.0 - 0.5;
}

/* ||f||_F / ||x||_F */
static double ratio(const float *f, const float *x)
{
    double a = 0, b = 0;
    for (int i = 0; i < ROWS * D; i++) {
        a += (double)f[i] * f[i];
        b += (double)x[i] * x[i];
    }
    return sqrt(a / b);
}

#define FWD(r, l, site, t) ck_assert_int_eq(RESDIAG_FWD(r, l, 0, site, resdiag_f32(t, ROWS, D)), \
                                            RESDIAG_OK)

/* max |x| over the mean per-token RMS of x */
static double peak_over_rms(const float *x)
{
    double mx = 0, rms = 0;
    for (int i = 0; i < ROWS; i++) {
        double ss = 0;
        for (int j = 0; j < D; j++) {
            ss += (double)x[i * D + j] * x[i * D + j];
            mx = fmax(mx, fabs(x[i * D + j]));
        }
        rms += sqrt(ss / D) / ROWS;
    }
    return mx / rms;
}

static double spike;         /* > 0: column 3 of the embedding is this at the last step */
static double peak_layer0;   /* peak_over_rms of what leaves layer 0 at the last step */

/* Steps 0, 10, ..., 90; layer 1's branch is `big` times its input norm's
 * scale at the last step, 0.1 before. Returns layer 1's r at the last step. */
static double write_run(const char *path, double big)
{
    static const char *const names[1] = { "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = 1,
                                                      .sublayer_names = names });
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    m.norm_kind = RESDIAG_NORM_RMSNORM;
    resdiag *r = fixture_open(path, &m, NULL);
    static float x[ROWS * D], no[ROWS * D], f[ROWS * D], y[ROWS * D];
    double r_last = NAN;
    for (int k = 0; k < STEPS; k++) {
        ck_assert_int_eq(resdiag_step_begin(r, 10 * k), RESDIAG_OK);
        for (int i = 0; i < ROWS * D; i++)
            x[i] = (float)(4 * uniform());
        if (spike > 0 && k == STEPS - 1)
            for (int i = 0; i < ROWS; i++)
                x[i * D + 3] = (float)spike;
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, ROWS, D));
        for (int l = 0; l < L; l++) {
            double scale = l == 1 && k == STEPS - 1 ? big : 0.1;
            FWD(r, l, RESDIAG_STREAM_IN, x);
            fixture_rmsnorm(no, x, ROWS, D);
            FWD(r, l, RESDIAG_NORM_IN, x);
            FWD(r, l, RESDIAG_NORM_OUT, no);
            for (int i = 0; i < ROWS * D; i++)
                f[i] = (float)(scale * (no[i] + uniform()));
            FWD(r, l, RESDIAG_BRANCH_OUT, f);
            for (int i = 0; i < ROWS * D; i++)
                y[i] = x[i] + f[i];
            FWD(r, l, RESDIAG_STREAM_OUT, y);
            if (l == 1 && k == STEPS - 1)
                r_last = ratio(f, x);
            if (l == 0 && k == STEPS - 1)
                peak_layer0 = peak_over_rms(y);
            memcpy(x, y, sizeof x);
        }
        fixture_rmsnorm(y, x, ROWS, D);
        RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(x, ROWS, D));
        RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(y, ROWS, D));
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    return r_last;
}

/* The default analysis (the first step) of the run at path, as JSON. */
static char *report_json(const char *path)
{
    resdiag_reader *rd = fixture_read(path);
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    char *j = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(j);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
    return j;
}

START_TEST(dominant_update_at_the_last_step_is_warned_of_at_step_0)
{
    char path[300];
    snprintf(path, sizeof path, "%s/last.h5", dir);
    double r = write_run(path, 8.0);
    ck_assert_msg(r > 2, "the fixture's last step has r = %g", r);
    char *j = report_json(path);
    const char *w = strstr(j, "layer 1 mlp: dominant update r = ");
    ck_assert_msg(w, "no dominant-update warning for layer 1 in %.300s", j);
    double quoted = strtod(w + strlen("layer 1 mlp: dominant update r = "), NULL);
    ck_assert_msg(fabs(quoted - r) < 0.01 * r, "quoted r %g, written %g", quoted, r);
    ck_assert_msg(strstr(w, "at step 90 only, of 10 steps"), "the step is not named: %.200s", w);
    ck_assert_msg(!strstr(j, "layer 0 mlp: dominant"), "layer 0 never dominates: %.300s", j);
    const char *at = strstr(j, "\"warnings_at\"");
    ck_assert_msg(at && strstr(at, "{\"first_step\": 90, \"worst_step\": 90, \"steps\": 1, "
                                   "\"of_steps\": 10}"),
                  "warnings_at: %.300s", at ? at : "(none)");
    free(j);
}
END_TEST

START_TEST(a_quiet_run_has_no_update_warning)
{
    char path[300];
    snprintf(path, sizeof path, "%s/quiet.h5", dir);
    write_run(path, 0.1);
    char *j = report_json(path);
    ck_assert_msg(!strstr(j, "dominant update") && !strstr(j, "rose"), "%.300s", j);
    free(j);
}
END_TEST

START_TEST(massive_activation_at_the_last_step_is_warned_of_at_step_0)
{
    char path[300];
    snprintf(path, sizeof path, "%s/massive.h5", dir);
    spike = 200;
    write_run(path, 0.1);
    ck_assert_msg(peak_layer0 > 6, "the fixture's peak is %g times the RMS", peak_layer0);
    char *j = report_json(path);
    const char *w = strstr(j, "massive activation: the stream leaving layer 0 has ");
    ck_assert_msg(w, "no massive-activation warning for layer 0 in %.300s", j);
    const char *t = strstr(w, "column 3, ");
    ck_assert_msg(t, "not column 3: %.200s", w);
    double quoted = strtod(t + strlen("column 3, "), NULL);
    ck_assert_msg(fabs(quoted - peak_layer0) < 0.01 * peak_layer0, "quoted %g times, written %g",
                  quoted, peak_layer0);
    ck_assert_msg(strstr(w, "at step 90 only, of 10 steps"), "the step is not named: %.200s", w);
    free(j);
}
END_TEST

CHECK_MAIN(&program, CHECK_TEST(dominant_update_at_the_last_step_is_warned_of_at_step_0),
           CHECK_TEST(a_quiet_run_has_no_update_warning),
           CHECK_TEST(massive_activation_at_the_last_step_is_warned_of_at_step_0))
