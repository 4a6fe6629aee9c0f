/*
 * test-abort.c - steps ended with resdiag_step_abort: the flag and the
 * reason in the file (every schema), the reader's getters, a file killed
 * mid-step and one without the step status tables, calls out of order;
 * and the analysis: STEP_FIRST / STEP_LAST and the comparisons over the
 * run take complete steps only, an aborted step asked for by index is
 * shown but not judged, and its non-finite values are still found.
 * Expected numbers are computed here from the values handed to the hooks.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "check-one.h"
#include "analysis/analysis.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"

enum { L = 3, S = 2, D = 16, ROWS = 24, MAX_STEPS = 4 };

/* ------------------------------------------------------------- logging */

static int n_errors;
static char last_error[1024];
static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)user;
    if (prio >= RESDIAG_LOG_ERROR) {
        n_errors++;
        snprintf(last_error, sizeof last_error, "%s", msg);
    }
}

static char dir[64], file_path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/resdiag-test-abort-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file_path, sizeof file_path, "%s/run.h5", dir);
    n_errors = 0;
    last_error[0] = '\0';
    resdiag_set_log_handler(capture_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
}

static void teardown(void)
{
    unlink(file_path);
    rmdir(dir);
    resdiag_set_log_handler(NULL, NULL);
}

/* ------------------------------------------------ a pre-norm model run */

static unsigned rng;
static double gauss(void)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 1664525u + 1013904223u;
        u += (rng >> 8) / 16777216.0;
    }
    return u - 6;
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

/* Mean over tokens of the per-token L2 norm, in long double. */
static long double mean_token_norm(const float *t)
{
    long double sum = 0;
    for (int i = 0; i < ROWS; i++) {
        long double ss = 0;
        for (int j = 0; j < D; j++)
            ss += (long double)t[i * D + j] * t[i * D + j];
        sum += sqrtl(ss);
    }
    return sum / ROWS;
}

/* What each step of a run does. */
typedef struct step_plan {
    int abort;         /* end it with resdiag_step_abort (after the forward) */
    const char *reason;
    int backward;      /* record the parameter gradients */
    int nan;           /* layer 1's attn branch holds a NaN */
} step_plan;

/* Per step: ||x_L|| / ||x_1|| and the forward stream_in frob of layer 0,
 * from the values handed to the hooks. */
static long double growth_of[MAX_STEPS], frob_in0[MAX_STEPS];

static resdiag *open_run(int schema)
{
    static const char *const names[S] = { "attn", "mlp" };
    static const char *const params[1] = { "mlp.w2" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = names, .layer_params = 1, .layer_param_names = params });
    m.residual_param = "mlp.w2";
    m.norm_kind = RESDIAG_NORM_LAYERNORM;
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = schema;
    o.flush_steps = 1; /* every step on disk at its end: a kill keeps them */
    o.overwrite = 1;
    return fixture_open(file_path, &m, &o);
}

/* The forward of one step (and its gradients with p->backward); the step
 * is left open. Branch weights grow with the step, so that the steps'
 * stream growths differ. */
static void run_step(resdiag *r, int step, const step_plan *p)
{
    static float x[ROWS * D], no[ROWS * D], f[ROWS * D], y[ROWS * D], w[D * D];
    ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
    rng = 11u + (unsigned)step;
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (float)gauss();
    long double x1 = 0;
    frob_in0[step] = 0;
    for (int i = 0; i < ROWS * D; i++)
        frob_in0[step] += (long double)x[i] * x[i];
    frob_in0[step] = sqrtl(frob_in0[step]);
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, ROWS, D)),
                     RESDIAG_OK);
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < S; s++) {
            for (int i = 0; i < D * D; i++)
                w[i] = (float)(gauss() * 0.4 * (1 + step) / sqrt(D));
            layernorm(no, x);
            for (int i = 0; i < ROWS; i++)
                for (int j = 0; j < D; j++) {
                    double acc = 0;
                    for (int k = 0; k < D; k++)
                        acc += no[i * D + k] * w[k * D + j];
                    f[i * D + j] = (float)acc;
                }
            if (p->nan && l == 1 && s == 0)
                f[3] = NAN;
            for (int i = 0; i < ROWS * D; i++)
                y[i] = x[i] + f[i];
            ck_assert_int_eq(RESDIAG_FWD(r, l, s, RESDIAG_STREAM_IN, resdiag_f32(x, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, l, s, RESDIAG_NORM_IN, resdiag_f32(x, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, l, s, RESDIAG_NORM_OUT, resdiag_f32(no, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, l, s, RESDIAG_BRANCH_OUT, resdiag_f32(f, ROWS, D)),
                             RESDIAG_OK);
            ck_assert_int_eq(RESDIAG_FWD(r, l, s, RESDIAG_STREAM_OUT, resdiag_f32(y, ROWS, D)),
                             RESDIAG_OK);
            memcpy(x, y, sizeof x);
        }
        if (l == 0)
            x1 = mean_token_norm(x);
    }
    growth_of[step] = mean_token_norm(x) / x1;
    if (p->backward)
        for (int l = 0; l < L; l++) {
            for (int i = 0; i < D * D; i++)
                w[i] = (float)gauss();
            ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, l, "mlp.w2", resdiag_f32(w, D, D)),
                             RESDIAG_OK);
        }
}

static void end_step(resdiag *r, const step_plan *p)
{
    if (p->abort)
        ck_assert_int_eq(resdiag_step_abort(r, p->reason), RESDIAG_OK);
    else
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
}

static void write_run(int schema, int n, const step_plan *plan)
{
    resdiag *r = open_run(schema);
    for (int s = 0; s < n; s++) {
        run_step(r, s, &plan[s]);
        end_step(r, &plan[s]);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

static resdiag_reader *open_reader(void)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, file_path), RESDIAG_OK);
    return rd;
}

static int aborted_at(const resdiag_reader *rd, int64_t si)
{
    int ab = -1;
    ck_assert_int_eq(resdiag_reader_step_aborted(rd, si, &ab), RESDIAG_OK);
    return ab;
}

static resdiag_analysis *analyse(const resdiag_reader *rd, int64_t step_index)
{
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.step_index = step_index;
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, &o, &a), RESDIAG_OK);
    return a;
}

#define BOOM "RuntimeError: NCCL peer 3 lost in backward"

/* ------------------------------------------------------ file and reader */

START_TEST(aborted_step_is_flagged_with_its_reason_and_keeps_its_records)
{
    static const int schemas[] = { 1, 2, 0 };
    int schema = schemas[_i];
    const step_plan plan[3] = { { 0 }, { 1, BOOM, 0, 0 }, { 0 } };
    write_run(schema, 3, plan);
    resdiag_reader *rd = open_reader();
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    ck_assert_int_eq(aborted_at(rd, 0), 0);
    ck_assert_int_eq(aborted_at(rd, 1), 1);
    ck_assert_int_eq(aborted_at(rd, 2), 0);
    char why[RESDIAG_MAX_ABORT_REASON];
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 1, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, BOOM);
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 0, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, "");
    /* cut to fit the caller's buffer */
    char small[8];
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 1, small, sizeof small), RESDIAG_OK);
    ck_assert_str_eq(small, "Runtime");
    /* the dataset itself: 0 complete, 1 aborted */
    double flags[3];
    ck_assert_int_eq(resdiag_reader_read(rd, "step_status/aborted", 0, 3, flags, 3), RESDIAG_OK);
    ck_assert(flags[0] == 0 && flags[1] == 1 && flags[2] == 0);
    /* the aborted step's records are there, as the hooks gave them */
    double f[RESDIAG_N_FIELDS];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    double tol = (double)(rd_test_norm_tol(RESDIAG_DTYPE_F32) * frob_in0[1])
                 + (schema == 1 ? 0 : 0x1p-23 * (double)frob_in0[1]); /* float32 storage */
    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)frob_in0[1], tol);
    ck_assert_int_eq(n_errors, 0);
    /* bad calls */
    int ab = 0;
    ck_assert_int_eq(resdiag_reader_step_aborted(rd, 3, &ab), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_step_aborted(rd, -1, &ab), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_step_aborted(rd, 0, NULL), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_reader_step_aborted(NULL, 0, &ab), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 0, why, 0), RESDIAG_E_INVALID);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(abort_outside_a_step_is_a_state_error)
{
    const step_plan plain = { 0 };
    resdiag *r = open_run(0);
    ck_assert_int_eq(resdiag_step_abort(r, "too early"), RESDIAG_E_STATE);
    ck_assert_int_eq(n_errors, 1);
    ck_assert_ptr_nonnull(strstr(last_error, "resdiag_step_abort without resdiag_step_begin"));
    run_step(r, 0, &plain);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_abort(r, NULL), RESDIAG_E_STATE); /* the step has ended */
    ck_assert_int_eq(n_errors, 2);
    /* NULL reason inside a step: fine */
    run_step(r, 1, &plain);
    ck_assert_int_eq(resdiag_step_abort(r, NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_is_recorded(r), 0);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_abort(r, "late"), RESDIAG_E_STATE);
    ck_assert_ptr_nonnull(strstr(last_error, "after resdiag_close"));
    resdiag_destroy(r);
    ck_assert_int_eq(resdiag_step_abort(NULL, "no handle"), RESDIAG_OK);
    resdiag_reader *rd = open_reader();
    ck_assert_int_eq(aborted_at(rd, 0), 0);
    ck_assert_int_eq(aborted_at(rd, 1), 1);
    char why[16];
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 1, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, "");
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(reason_is_cut_on_a_character_and_bad_bytes_are_refused)
{
    /* 126 ASCII bytes and a 2-byte character: 128 bytes, one over; the
     * character goes whole */
    char longer[160];
    memset(longer, 'a', 126);
    memcpy(longer + 126, "\xc3\xa9", 3);
    const step_plan plain = { 0 };
    resdiag *r = open_run(0);
    run_step(r, 0, &plain);
    ck_assert_int_eq(resdiag_step_abort(r, longer), RESDIAG_OK);
    /* not UTF-8: the step still ends aborted, the byte stored as '?' */
    run_step(r, 1, &plain);
    ck_assert_int_eq(resdiag_step_abort(r, "bad \xff byte"), RESDIAG_E_INVALID);
    ck_assert_int_eq(n_errors, 1);
    ck_assert_ptr_nonnull(strstr(last_error, "not valid UTF-8"));
    ck_assert_int_eq(resdiag_step_is_recorded(r), 0);
    /* newlines and tabs are free text, as in a description */
    run_step(r, 2, &plain);
    ck_assert_int_eq(resdiag_step_abort(r, "Traceback:\n\tline 3"), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    resdiag_reader *rd = open_reader();
    char why[RESDIAG_MAX_ABORT_REASON + 8];
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 0, why, sizeof why), RESDIAG_OK);
    ck_assert_uint_eq(strlen(why), 126);
    ck_assert_int_eq(strspn(why, "a"), 126);
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 1, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, "bad ? byte");
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 2, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, "Traceback:\n\tline 3");
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(file_killed_mid_step_reads_its_complete_and_aborted_steps)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const step_plan plain = { 0 }, boom = { 1, BOOM, 0, 0 };
        resdiag *r = open_run(0);
        run_step(r, 0, &plain);
        end_step(r, &plain);
        run_step(r, 1, &boom);
        end_step(r, &boom);
        run_step(r, 2, &plain); /* killed inside this one */
        raise(SIGKILL);
        _exit(3);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    resdiag_reader *rd = open_reader();
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 2);
    ck_assert_int_eq(aborted_at(rd, 0), 0);
    ck_assert_int_eq(aborted_at(rd, 1), 1);
    resdiag_analysis *a = analyse(rd, RESDIAG_STEP_LAST);
    ck_assert_int_eq(resdiag_analysis_step(a), 0); /* the last complete one */
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(file_without_step_status_reads_as_complete)
{
    const step_plan plan[2] = { { 0 }, { 1, BOOM, 0, 0 } };
    write_run(0, 2, plan);
    /* what a file of an older resdiag is: no /step_status */
    hid_t f = H5Fopen(file_path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_ge(H5Ldelete(f, "step_status", H5P_DEFAULT), 0);
    H5Fclose(f);
    resdiag_reader *rd = open_reader();
    ck_assert_int_eq(aborted_at(rd, 1), 0);
    char why[16] = "x";
    ck_assert_int_eq(resdiag_reader_abort_reason(rd, 1, why, sizeof why), RESDIAG_OK);
    ck_assert_str_eq(why, "");
    resdiag_analysis *a = analyse(rd, RESDIAG_STEP_LAST);
    ck_assert_int_eq(resdiag_analysis_step(a), 1);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

/* ------------------------------------------------------------- analysis */

START_TEST(first_and_last_skip_aborted_steps)
{
    /* step 0 and step 3 aborted: the first complete is 1, the last 2 */
    const step_plan plan[4] = { { 1, "first", 0, 0 }, { 0 }, { 0 }, { 1, "last", 0, 0 } };
    write_run(1, 4, plan);
    resdiag_reader *rd = open_reader();
    resdiag_analysis *a = analyse(rd, RESDIAG_STEP_FIRST);
    ck_assert_int_eq(resdiag_analysis_step(a), 1);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
    /* over training: the first and last complete steps' growth */
    const rd_analysis *in = a;
    double tol1 = (double)(rd_test_ratio_tol(RESDIAG_DTYPE_F32) * growth_of[1]);
    double tol2 = (double)(rd_test_ratio_tol(RESDIAG_DTYPE_F32) * growth_of[2]);
    ck_assert_double_eq_tol(in->training.growth[0], (double)growth_of[1], tol1);
    ck_assert_double_eq_tol(in->training.growth[1], (double)growth_of[2], tol2);
    /* and the verdict shown beside it is the last complete step's */
    ck_assert_ptr_nonnull(in->at_last);
    ck_assert_int_eq(resdiag_analysis_step(in->at_last), 2);
    char *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"training\": {\"first_step\": 1, \"last_step\": 2,"));
    ck_assert_ptr_nonnull(strstr(json, "\"last_step\": {\"step\": 2, \"index\": 2,"));
    ck_assert_ptr_nonnull(strstr(json, "\"n_aborted_steps\": 2, \"aborted_steps\": [{\"step\": 0, "
                                       "\"index\": 0, \"reason\": \"first\"}, {\"step\": 3, "
                                       "\"index\": 3, \"reason\": \"last\"}]"));
    resdiag_free(json);
    char *text = resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(strstr(text, "aborted: 2 step(s)"));
    ck_assert_ptr_nonnull(strstr(text, "step 0 (first), step 3 (last)"));
    resdiag_free(text);
    resdiag_analysis_destroy(a);
    a = analyse(rd, RESDIAG_STEP_LAST);
    ck_assert_int_eq(resdiag_analysis_step(a), 2);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(aborted_step_asked_by_index_is_shown_not_judged)
{
    const step_plan plan[3] = { { 0 }, { 1, BOOM, 0, 0 }, { 0 } };
    write_run(1, 3, plan);
    resdiag_reader *rd = open_reader();
    resdiag_analysis *a = analyse(rd, 1);
    ck_assert_int_eq(resdiag_analysis_step(a), 1);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_CANNOT_TELL);
    ck_assert_int_eq(resdiag_analysis_confidence(a), RESDIAG_CONFIDENCE_NONE);
    const char *expect = "step 1 was aborted (" BOOM "): its records are incomplete, "
                         "not judged";
    char *text = resdiag_analysis_to_text(a);
    ck_assert_msg(strncmp(text, "NOTE: ", 6) == 0 && strncmp(text + 6, expect, strlen(expect)) == 0,
                  "the report does not start with the note: %.200s", text);
    resdiag_free(text);
    char why[512];
    resdiag_check_options co;
    resdiag_check_options_init(&co);
    co.expect = RESDIAG_PLACEMENT_PRE;
    ck_assert_int_eq(resdiag_analysis_check(a, &co, why, sizeof why), RESDIAG_CHECK_CANNOT_TELL);
    ck_assert_ptr_nonnull(strstr(why, expect));
    char *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"analysed_aborted\": true"));
    resdiag_free(json);
    char *html = resdiag_analysis_to_html(a, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_ptr_nonnull(strstr(html, "id=\"aborted\""));
    ck_assert_ptr_nonnull(strstr(html, "its records are incomplete, not judged"));
    resdiag_free(html);
    resdiag_analysis_destroy(a);
    /* the same records in a complete step are judged */
    a = analyse(rd, 0);
    ck_assert_int_eq(resdiag_analysis_verdict(a), RESDIAG_VERDICT_PRE);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(first_backward_skips_an_aborted_step)
{
    /* step 0: forward only; step 1: aborted with its gradients; step 2:
     * complete with gradients: the gradients shown are step 2's */
    const step_plan plan[3] = { { 0 }, { 1, BOOM, 1, 0 }, { 0, NULL, 1, 0 } };
    write_run(1, 3, plan);
    resdiag_reader *rd = open_reader();
    resdiag_analysis *a = analyse(rd, 0);
    ck_assert_int_eq(a->gradients.step, 2);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(nonfinite_scan_looks_at_aborted_steps_and_says_so)
{
    const step_plan plan[3] = { { 0 }, { 1, BOOM, 0, 1 }, { 0 } };
    write_run(1, 3, plan);
    resdiag_reader *rd = open_reader();
    resdiag_analysis *a = analyse(rd, RESDIAG_STEP_FIRST);
    int64_t step = -1;
    int layer = -1, sub = -1, site = -1;
    resdiag_direction dir;
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, &layer, &sub, &site, &dir), 1);
    ck_assert_int_eq(step, 1);
    ck_assert_msg(layer == 1 && sub == 0 && site == RESDIAG_BRANCH_OUT,
                  "first non-finite at layer %d sublayer %d site %d", layer, sub, site);
    char *text = resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(strstr(text, "step 1 was aborted: the trainer ended it with "
                                       "resdiag_step_abort"));
    resdiag_free(text);
    char *json = resdiag_analysis_to_json(a);
    ck_assert_ptr_nonnull(strstr(json, "\"step_aborted\": true}"));
    resdiag_free(json);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
}
END_TEST

static const check_program program = {
    .name = "abort",
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("abort", 120, setup, teardown),
               CHECK_LOOP(aborted_step_is_flagged_with_its_reason_and_keeps_its_records, 0, 3),
               CHECK_TEST(abort_outside_a_step_is_a_state_error),
               CHECK_TEST(reason_is_cut_on_a_character_and_bad_bytes_are_refused),
               CHECK_TEST(file_killed_mid_step_reads_its_complete_and_aborted_steps),
               CHECK_TEST(file_without_step_status_reads_as_complete),
               CHECK_TEST(first_and_last_skip_aborted_steps),
               CHECK_TEST(aborted_step_asked_by_index_is_shown_not_judged),
               CHECK_TEST(first_backward_skips_an_aborted_step),
               CHECK_TEST(nonfinite_scan_looks_at_aborted_steps_and_says_so))
