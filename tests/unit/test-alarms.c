/*
 * test-alarms.c - the alarms of resdiag_options: a NaN handed to a hook at
 * step k fires at step k (not before, not after) naming the site whose call
 * came first, the step is in the file when step_end returns; bounds on the
 * update ratio, the growth and a gradient norm fire on steps built to cross
 * them and not on clean ones; the callback sees the values; bad bounds are
 * refused at open; a run without alarms never sees RESDIAG_ALARM. The
 * expected values are computed here from the tensors handed to the hooks.
 */
#ifndef RESDIAG_ADVANCED_API
#define RESDIAG_ADVANCED_API
#endif
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"

enum { L = 3, S = 2, D = 8, ROWS = 4, STEPS = 6 };
static const char *const subs[S] = { "attn", "mlp" };
static const char *const params[1] = { "w" };

static char path[256];
static int n_seen;
static resdiag_alarm seen[8];
static void on_alarm(const resdiag_alarm *a, void *user)
{
    (*(int *)user)++;
    if (n_seen < 8)
        seen[n_seen++] = *a;
}

static void setup(void)
{
    snprintf(path, sizeof path, "/tmp/resdiag-test-alarms-%d.h5", (int)getpid());
    unlink(path);
    n_seen = 0;
    resdiag_set_log_priority(RESDIAG_LOG_ERROR + 1); /* the refusals are expected */
}

static void teardown(void)
{
    unlink(path);
}

static resdiag_model model(void)
{
    return fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
                                           .sublayer_names = subs, .layer_params = 1,
                                           .layer_param_names = params });
}

/* What one step hands to the hooks: every element of the stream leaving
 * layer l is x * g^l, a branch's r times its input; the gradient's
 * elements grad. nan_at_seq: the (layer, sublayer) whose branch_out holds
 * a NaN, and a later call (the last layer's stream_out) one too. */
typedef struct step_data {
    double g, r, grad;
    int nan_layer, nan_sub; /* -1: none */
} step_data;

static void fill(float *t, double v)
{
    for (int i = 0; i < ROWS * D; i++)
        t[i] = (float)v;
}

static resdiag_status run_step(resdiag *rd, int64_t step, const step_data *s)
{
    float in[ROWS * D], br[ROWS * D], out[ROWS * D], gr[D * D];
    ck_assert_int_eq(resdiag_step_begin(rd, step), RESDIAG_OK);
    double x = 1.0;
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < S; k++) {
            fill(in, x);
            fill(br, s->r * x);
            if (l == s->nan_layer && k == s->nan_sub)
                br[5] = NAN;
            double next = k == S - 1 ? pow(s->g, l + 1) : x; /* the layer's output */
            fill(out, next);
            if (s->nan_layer >= 0 && l == L - 1 && k == S - 1)
                out[0] = NAN; /* called later than the first NaN */
            ck_assert_int_eq(RESDIAG_FWD(rd, l, k, RESDIAG_STREAM_IN, resdiag_f32(in, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(rd, l, k, RESDIAG_BRANCH_OUT, resdiag_f32(br, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(rd, l, k, RESDIAG_STREAM_OUT, resdiag_f32(out, ROWS, D)),
                             RESDIAG_OK);
            x = next;
        }
        for (int i = 0; i < D * D; i++)
            gr[i] = (float)s->grad;
        ck_assert_int_eq(RESDIAG_PARAM_GRAD(rd, l, "w", resdiag_f32(gr, D, D)), RESDIAG_OK);
    }
    return resdiag_step_end(rd);
}

static const step_data clean = { .g = 1.0, .r = 0.5, .grad = 0.01, .nan_layer = -1 };

/* The last step on disk (resdiag_flushed_step): flush_steps is 16, so
 * only an alarm's own flush puts a later step than 0 there. */
static int64_t flushed(resdiag *rd)
{
    int64_t s = -2;
    ck_assert_int_eq(resdiag_flushed_step(rd, &s), RESDIAG_OK);
    return s;
}

START_TEST(nan_fires_at_its_step_with_the_first_site_and_is_in_the_file)
{
    resdiag_model m = model();
    resdiag_options o;
    resdiag_options_init(&o);
    o.alarm_nonfinite = 1;
    int calls = 0;
    o.alarm_fn = on_alarm;
    o.alarm_user_data = &calls;
    resdiag *rd = fixture_open(path, &m, &o);
    const int k = 3;
    for (int step = 0; step < STEPS; step++) {
        step_data s = clean;
        if (step >= k) { /* from step k on, as a NaN in the weights would */
            s.nan_layer = 1;
            s.nan_sub = 0;
        }
        resdiag_status st = run_step(rd, step, &s);
        ck_assert_msg(st == (step == k ? RESDIAG_ALARM : RESDIAG_OK), "step %d: %s", step,
                      resdiag_strerror(st));
        ck_assert_int_eq(resdiag_alarm_count(rd), step >= k);
        if (step == k) /* written before step_end returned: steps 0..k, the last k */
            ck_assert_int_eq(flushed(rd), k);
    }
    ck_assert_int_eq(calls, 1);
    resdiag_alarm a;
    ck_assert_int_eq(resdiag_alarm_get(rd, 0, &a), RESDIAG_OK);
    ck_assert_int_eq(resdiag_alarm_get(rd, 1, &a), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_alarm_get(rd, 0, &a), RESDIAG_OK);
    ck_assert_int_eq(a.kind, RESDIAG_ALARM_NONFINITE);
    ck_assert_int_eq(a.step, k);
    ck_assert_int_eq(a.rank, 0);
    ck_assert_int_eq(a.direction, RESDIAG_FORWARD);
    ck_assert_int_eq(a.layer, 1);
    ck_assert_int_eq(a.sublayer, 0);
    ck_assert_int_eq(a.site, RESDIAG_BRANCH_OUT);
    ck_assert_ptr_null(a.param);
    ck_assert_double_eq(a.value, 1); /* one NaN element in that tensor */
    ck_assert_int_eq(seen[0].step, k);
    ck_assert_int_eq(seen[0].site, RESDIAG_BRANCH_OUT);
    ck_assert_int_eq(seen[0].layer, 1);
    ck_assert_int_eq(resdiag_close(rd), RESDIAG_OK);
    resdiag_destroy(rd);
    resdiag_reader *rr = fixture_read(path);
    ck_assert_int_eq(resdiag_reader_info(rr)->n_steps, STEPS);
    resdiag_reader_destroy(rr);
}
END_TEST

START_TEST(without_alarms_a_nan_step_returns_ok)
{
    resdiag_model m = model();
    resdiag *rd = fixture_open(path, &m, NULL);
    step_data s = clean;
    s.nan_layer = 0;
    s.nan_sub = 1;
    ck_assert_int_eq(run_step(rd, 0, &s), RESDIAG_OK);
    ck_assert_int_eq(resdiag_alarm_count(rd), 0);
    resdiag_destroy(rd);
}
END_TEST

/* Bounds: _i 0 the update ratio, 1 the growth, 2 the gradient norm. A
 * clean run stays under each; step 2 crosses it. */
START_TEST(bounds_fire_on_the_step_that_crosses_them)
{
    resdiag_model m = model();
    resdiag_options o;
    resdiag_options_init(&o);
    int calls = 0;
    o.alarm_fn = on_alarm;
    o.alarm_user_data = &calls;
    step_data cross = clean;
    double want;
    resdiag_alarm_kind kind;
    if (_i == 0) {
        o.alarm_update_ratio = 2;
        cross.r = 3; /* ||r x|| / ||x|| */
        want = 3;
        kind = RESDIAG_ALARM_UPDATE_RATIO;
    } else if (_i == 1) {
        o.alarm_growth = 100;
        cross.g = 20; /* layer 2's output over layer 0's: 20^3 / 20 */
        want = 400;
        kind = RESDIAG_ALARM_GROWTH;
    } else {
        o.alarm_grad_norm = 1;
        cross.grad = 0.5; /* Frobenius norm of D x D elements of 0.5 */
        want = 0.5 * D;
        kind = RESDIAG_ALARM_GRAD_NORM;
    }
    resdiag *rd = fixture_open(path, &m, &o);
    for (int step = 0; step < 4; step++) {
        resdiag_status st = run_step(rd, step, step >= 2 ? &cross : &clean);
        ck_assert_msg(st == (step == 2 ? RESDIAG_ALARM : RESDIAG_OK), "case %d step %d: %s",
                      _i, step, resdiag_strerror(st));
    }
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(seen[0].kind, kind);
    ck_assert_int_eq(seen[0].step, 2);
    ck_assert_msg(fabs(seen[0].value - want) <= 1e-5 * want, "value %g, want %g", seen[0].value,
                  want);
    ck_assert_double_eq(seen[0].bound, _i == 0 ? 2 : _i == 1 ? 100 : 1);
    if (_i == 1) {
        ck_assert_int_eq(seen[0].layer, L - 1);
        ck_assert_int_eq(seen[0].ref_layer, 0);
        ck_assert_int_eq(seen[0].site, RESDIAG_STREAM_OUT);
    } else if (_i == 2) {
        ck_assert_str_eq(seen[0].param, "w");
        ck_assert_int_eq(seen[0].direction, RESDIAG_BACKWARD);
    } else {
        ck_assert_int_eq(seen[0].site, RESDIAG_BRANCH_OUT);
    }
    ck_assert_int_eq(flushed(rd), 2);
    resdiag_destroy(rd);
}
END_TEST

START_TEST(bad_bounds_are_refused_at_open)
{
    resdiag_model m = model();
    for (int c = 0; c < 5; c++) {
        resdiag_options o;
        resdiag_options_init(&o);
        if (c == 0) o.alarm_update_ratio = -1;
        if (c == 1) o.alarm_growth = -INFINITY;
        if (c == 2) o.alarm_grad_norm = -0.5;
        if (c == 3) o.alarm_nonfinite = 2;
        if (c == 4) o.alarm_growth = NAN; /* off: allowed */
        resdiag *rd = NULL;
        resdiag_status st = resdiag_open(&rd, path, &m, &o);
        ck_assert_int_eq(st, c == 4 ? RESDIAG_OK : RESDIAG_E_INVALID);
        resdiag_destroy(rd);
        unlink(path);
    }
    ck_assert_str_eq(resdiag_strerror(RESDIAG_ALARM), "an alarm fired; the step is written");
}
END_TEST

static const check_program program = { .name = "alarms" };
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("alarms", 60, setup, teardown),
               CHECK_TEST(nan_fires_at_its_step_with_the_first_site_and_is_in_the_file),
               CHECK_TEST(without_alarms_a_nan_step_returns_ok),
               CHECK_LOOP(bounds_fire_on_the_step_that_crosses_them, 0, 3),
               CHECK_TEST(bad_bounds_are_refused_at_open))
