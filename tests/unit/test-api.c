/*
 * test-api.c - the public run API end to end: bad calls, the step
 * lifecycle, step selection, buffering and flushing, what lands in the file
 * (checked against values computed here independently), threads, and a
 * writer that runs out of space.
 */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"
#include "path-bounds.h"
#include "svg-axis.h"
#include "value-hash.h"

/* ------------------------------------------------------------- helpers */

/* Log capture: how many messages and the last one. */
static int log_count;
static char log_last[1024];
static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    log_count++;
    snprintf(log_last, sizeof log_last, "%s", msg);
}

static char tmpdir[256];
static char path_a[300], path_b[300];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/resdiag-test-api-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(path_a, sizeof path_a, "%s/a.h5", tmpdir);
    snprintf(path_b, sizeof path_b, "%s/b.h5", tmpdir);
    log_count = 0;
    log_last[0] = 0;
    resdiag_set_log_handler(capture_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
}

static void teardown(void)
{
    unlink(path_a);
    unlink(path_b);
    rmdir(tmpdir);
    resdiag_set_log_handler(NULL, NULL);
}

enum { L = 3, S = 2, D = 8, T = 5 };
static const char *const sub_names[S] = { "attn", "mlp" };
static const char *const lparams[2] = { "attn.wo", "mlp.w2" };
static const char *const mparams[1] = { "head.w" };

static resdiag_model test_model(void)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names, .layer_params = 2, .layer_param_names = lparams,
        .model_params = 1, .model_param_names = mparams });
    return m;
}

/* A run of test_model(). These tests hold the statistics read back to
 * the double (1e-12): unless o asks for a schema, the file is schema 1,
 * which stores them as computed (schema 2 rounds them to float32; its
 * own tests are in test-h5.c). */
static resdiag *open_run(const char *path, const resdiag_options *o)
{
    resdiag_model m = test_model();
    resdiag_options opt;
    if (o)
        opt = *o;
    else
        resdiag_options_init(&opt);
    if (opt.file_schema == 0)
        opt.file_schema = 1;
    return fixture_open(path, &m, &opt);
}

/* Deterministic values, different per (seed, i). */
static float value(unsigned seed, int i)
{
    unsigned h = value_hash(seed, i);
    return (float)((int)(h % 2001u) - 1000) / 250.0f;
}

static void fill(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++)
        x[i] = value(seed, i);
}

static long double ref_frob(const float *x, int rows, int cols)
{
    long double s = 0;
    for (int i = 0; i < rows * cols; i++)
        s += (long double)x[i] * x[i];
    return sqrtl(s);
}

/* Tolerances for kernel output on f32 data against the references above,
 * from the bound of the path that ran (path-bounds.h): a norm within
 * rd_test_norm_tol of itself, a ratio of norms within rd_test_ratio_tol. */
#define FROB_TOL(ref) ((double)(rd_test_norm_tol(RESDIAG_DTYPE_F32) * (ref)))
#define RATIO_TOL(ref) ((double)(rd_test_ratio_tol(RESDIAG_DTYPE_F32) * (ref)))

static resdiag_reader *reopen(const char *path)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path), RESDIAG_OK);
    return rd;
}

/* ---------------------------------------------------- versions, strings */

START_TEST(version_of_library_matches_header)
{
    ck_assert_uint_eq(resdiag_version_number(), RESDIAG_VERSION_NUMBER);
    ck_assert_str_eq(resdiag_version_string(), RESDIAG_VERSION_STRING);
}
END_TEST

START_TEST(strerror_names_every_status_distinctly)
{
    for (int a = RESDIAG_OK; a <= RESDIAG_E_DTYPE; a++) {
        ck_assert_str_ne(resdiag_strerror((resdiag_status)a), "unknown status");
        for (int b = RESDIAG_OK; b < a; b++)
            ck_assert_str_ne(resdiag_strerror((resdiag_status)a),
                             resdiag_strerror((resdiag_status)b));
    }
    ck_assert_str_eq(resdiag_strerror((resdiag_status)999), "unknown status");
    ck_assert_str_eq(resdiag_site_name(RESDIAG_BRANCH_IN), "branch_in");
    ck_assert_str_eq(resdiag_site_name(RESDIAG_OUT_NORM_IN), "out_norm_in");
    ck_assert_str_eq(resdiag_site_name(RESDIAG_OUT_NORM_OUT), "out_norm_out");
    ck_assert_str_eq(resdiag_site_name((resdiag_site)8), "?");
    ck_assert_str_eq(resdiag_site_name(RESDIAG_LOGITS), "logits");
    ck_assert_str_eq(resdiag_field_name(RESDIAG_FIELD_FROB), "frob");
    ck_assert_str_eq(resdiag_field_name((resdiag_field)RESDIAG_N_FIELDS), "?");
}
END_TEST

/* ------------------------------------------------------- a NULL handle */

START_TEST(null_handle_makes_every_call_a_no_op)
{
    float x[T * D] = { 0 };
    ck_assert_int_eq(resdiag_step_begin(NULL, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(NULL, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                     RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(NULL, 99, 99, (resdiag_site)99, resdiag_f32(NULL, 5, 0)),
                     RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(NULL, 0, "x", resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_is_recorded(NULL), 0);
    ck_assert_int_eq(resdiag_flush(NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_set_enabled(NULL, 1), RESDIAG_OK);
    resdiag_destroy(NULL);
    ck_assert_str_eq(resdiag_errmsg(NULL), "");
    resdiag_reader_destroy(NULL);
    ck_assert_int_eq(log_count, 0);
}
END_TEST

/* ----------------------------------------------------- bad open() calls */

typedef struct bad_open {
    const char *what;
    resdiag_status expect;
    void (*spoil)(resdiag_model *m, resdiag_options *o);
} bad_open;

static const char *const dup_names[2] = { "attn", "attn" };
static const char *const empty_name[2] = { "attn", "" };
static const char *const null_name[2] = { "attn", NULL };
static const char *const long_name[2] = {
    "attn", "a_name_that_is_much_too_long_to_be_a_sublayer_name_of_any_sane_model_xx"
};
static const char *const meta_slash[2] = { "a/b", "v" };
static const char *const meta_null_value[2] = { "k", NULL };

static void sp_layers0(resdiag_model *m, resdiag_options *o) { (void)o; m->n_layers = 0; }
static void sp_dmodel0(resdiag_model *m, resdiag_options *o) { (void)o; m->d_model = 0; }
static void sp_subs0(resdiag_model *m, resdiag_options *o) { (void)o; m->n_sublayers = 0; }
static void sp_subs17(resdiag_model *m, resdiag_options *o) { (void)o; m->n_sublayers = 17; }
static void sp_names_null(resdiag_model *m, resdiag_options *o) { (void)o; m->sublayer_names = NULL; }
static void sp_names_dup(resdiag_model *m, resdiag_options *o) { (void)o; m->sublayer_names = dup_names; }
static void sp_names_empty(resdiag_model *m, resdiag_options *o) { (void)o; m->sublayer_names = empty_name; }
static void sp_names_nullent(resdiag_model *m, resdiag_options *o) { (void)o; m->sublayer_names = null_name; }
static void sp_names_long(resdiag_model *m, resdiag_options *o) { (void)o; m->sublayer_names = long_name; }
static void sp_block(resdiag_model *m, resdiag_options *o) { (void)o; m->block = (resdiag_block_kind)7; }
static void sp_placement(resdiag_model *m, resdiag_options *o) { (void)o; m->declared_placement = (resdiag_placement)42; }
static void sp_norm(resdiag_model *m, resdiag_options *o) { (void)o; m->norm_kind = (resdiag_norm_kind)-1; }
static void sp_mix(resdiag_model *m, resdiag_options *o) { (void)o; m->declared_mix_layers = L + 1; }
static void sp_shard(resdiag_model *m, resdiag_options *o) { (void)o; m->shard_cols = -4; }
static void sp_params_dup(resdiag_model *m, resdiag_options *o) { (void)o; m->layer_param_names = dup_names; }
static void sp_params_many(resdiag_model *m, resdiag_options *o) { (void)o; m->n_layer_params = 33; }
static void sp_meta_slash(resdiag_model *m, resdiag_options *o) { (void)o; m->n_meta = 1; m->meta = meta_slash; }
static void sp_meta_null(resdiag_model *m, resdiag_options *o) { (void)o; m->n_meta = 1; m->meta = meta_null_value; }
static void sp_meta_neg(resdiag_model *m, resdiag_options *o) { (void)o; m->n_meta = -1; }
static void sp_head_unknown(resdiag_model *m, resdiag_options *o) { (void)o; m->head_param = "lm_head"; }
static void sp_head_layer_param(resdiag_model *m, resdiag_options *o) { (void)o; m->head_param = "mlp.w2"; }
static void sp_head_none_declared(resdiag_model *m, resdiag_options *o) { (void)o; m->n_model_params = 0; m->model_param_names = NULL; m->head_param = "head.w"; }
static void sp_residual_unknown(resdiag_model *m, resdiag_options *o) { (void)o; m->residual_param = "mlp.w3"; }
static void sp_residual_model_param(resdiag_model *m, resdiag_options *o) { (void)o; m->residual_param = "head.w"; }
static void sp_residual_empty(resdiag_model *m, resdiag_options *o) { (void)o; m->residual_param = ""; }
static void sp_head_control(resdiag_model *m, resdiag_options *o) { (void)o; m->head_param = "head\x1b[2J"; }
static void sp_residual_not_utf8(resdiag_model *m, resdiag_options *o) { (void)o; m->residual_param = "mlp.\xff"; }
static const char *const metrics_dup[2] = { "loss", "loss" };
static const char *const metrics_control[1] = { "lo\nss" };
static const char *const metrics_null[2] = { "loss", NULL };
static void sp_metrics_many(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = RESDIAG_MAX_METRICS + 1; m->metric_names = lparams; }
static void sp_metrics_neg(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = -1; }
static void sp_metrics_names_null(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = 1; }
static void sp_metrics_dup(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = 2; m->metric_names = metrics_dup; }
static void sp_metrics_control(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = 1; m->metric_names = metrics_control; }
static void sp_metrics_nullent(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = 2; m->metric_names = metrics_null; }
static void sp_metrics_long(resdiag_model *m, resdiag_options *o) { (void)o; m->n_metrics = 1; m->metric_names = long_name + 1; }
static void sp_model_size(resdiag_model *m, resdiag_options *o) { (void)o; m->struct_size = 0; }
static void sp_model_size_big(resdiag_model *m, resdiag_options *o) { (void)o; m->struct_size = sizeof *m + 64; }
static void sp_every0(resdiag_model *m, resdiag_options *o) { (void)m; o->record_every = 0; }
static void sp_range(resdiag_model *m, resdiag_options *o) { (void)m; o->record_first = 10; o->record_last = 5; }
static void sp_first_neg(resdiag_model *m, resdiag_options *o) { (void)m; o->record_first = -1; }
static void sp_sketch(resdiag_model *m, resdiag_options *o) { (void)m; o->sketch_size = RESDIAG_MAX_SKETCH + 1; }
static void sp_flush0(resdiag_model *m, resdiag_options *o) { (void)m; o->flush_steps = 0; }
static void sp_flush_nan(resdiag_model *m, resdiag_options *o) { (void)m; o->flush_seconds = NAN; }
static void sp_flush_neg(resdiag_model *m, resdiag_options *o) { (void)m; o->flush_seconds = -1; }
static void sp_opt_size(resdiag_model *m, resdiag_options *o) { (void)m; o->struct_size = 3; }

static const bad_open bad_opens[] = {
    { "n_layers", RESDIAG_E_INVALID, sp_layers0 },
    { "d_model", RESDIAG_E_INVALID, sp_dmodel0 },
    { "n_sublayers", RESDIAG_E_INVALID, sp_subs0 },
    { "n_sublayers", RESDIAG_E_INVALID, sp_subs17 },
    { "sublayer_names is NULL", RESDIAG_E_NULL, sp_names_null },
    { "appears twice", RESDIAG_E_INVALID, sp_names_dup },
    { "sublayer_names[1] must have", RESDIAG_E_INVALID, sp_names_empty },
    { "sublayer_names[1] is NULL", RESDIAG_E_NULL, sp_names_nullent },
    { "sublayer_names[1] must have", RESDIAG_E_INVALID, sp_names_long },
    { "block kind", RESDIAG_E_INVALID, sp_block },
    { "declared placement", RESDIAG_E_INVALID, sp_placement },
    { "norm kind", RESDIAG_E_INVALID, sp_norm },
    { "declared_mix_layers", RESDIAG_E_INVALID, sp_mix },
    { "shard_cols", RESDIAG_E_INVALID, sp_shard },
    { "layer_param_names 'attn' appears twice", RESDIAG_E_INVALID, sp_params_dup },
    { "n_layer_params", RESDIAG_E_INVALID, sp_params_many },
    { "may not contain '/'", RESDIAG_E_INVALID, sp_meta_slash },
    { "value of meta key 'k' is NULL", RESDIAG_E_NULL, sp_meta_null },
    { "n_meta", RESDIAG_E_INVALID, sp_meta_neg },
    { "head_param 'lm_head' is not one of model_param_names", RESDIAG_E_INVALID, sp_head_unknown },
    { "head_param 'mlp.w2' is not one of model_param_names", RESDIAG_E_INVALID, sp_head_layer_param },
    { "head_param 'head.w' is not one of model_param_names (0 declared)", RESDIAG_E_INVALID, sp_head_none_declared },
    { "residual_param 'mlp.w3' is not one of layer_param_names", RESDIAG_E_INVALID, sp_residual_unknown },
    { "residual_param 'head.w' is not one of layer_param_names", RESDIAG_E_INVALID, sp_residual_model_param },
    { "residual_param '' is not one of layer_param_names", RESDIAG_E_INVALID, sp_residual_empty },
    { "head_param contains a control character (byte 0x1b at offset 4)", RESDIAG_E_INVALID, sp_head_control },
    { "residual_param is not valid UTF-8 (byte 0xff at offset 4)", RESDIAG_E_INVALID, sp_residual_not_utf8 },
    { "n_metrics is 33, must be 0..32", RESDIAG_E_INVALID, sp_metrics_many },
    { "n_metrics is -1, must be 0..32", RESDIAG_E_INVALID, sp_metrics_neg },
    { "metric_names is NULL", RESDIAG_E_NULL, sp_metrics_names_null },
    { "metric_names 'loss' appears twice", RESDIAG_E_INVALID, sp_metrics_dup },
    { "metric_names[0] contains a control character", RESDIAG_E_INVALID, sp_metrics_control },
    { "metric_names[1] is NULL", RESDIAG_E_NULL, sp_metrics_nullent },
    { "metric_names[0] must have 1 to 63 bytes", RESDIAG_E_INVALID, sp_metrics_long },
    { "resdiag_model_init", RESDIAG_E_INVALID, sp_model_size },
    { "resdiag_model_init", RESDIAG_E_INVALID, sp_model_size_big },
    { "record_every", RESDIAG_E_INVALID, sp_every0 },
    { "record_first <= record_last", RESDIAG_E_INVALID, sp_range },
    { "record_first <= record_last", RESDIAG_E_INVALID, sp_first_neg },
    { "sketch_size", RESDIAG_E_INVALID, sp_sketch },
    { "flush_steps", RESDIAG_E_INVALID, sp_flush0 },
    { "flush_seconds", RESDIAG_E_INVALID, sp_flush_nan },
    { "flush_seconds", RESDIAG_E_INVALID, sp_flush_neg },
    { "resdiag_options_init", RESDIAG_E_INVALID, sp_opt_size },
};

START_TEST(open_rejects_bad_model_or_options)
{
    const bad_open *b = &bad_opens[_i];
    resdiag_model m = test_model();
    resdiag_options o;
    resdiag_options_init(&o);
    b->spoil(&m, &o);
    resdiag *r = (resdiag *)&m; /* must be overwritten with NULL */
    log_count = 0;
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), b->expect);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(log_count, 1);
    ck_assert_msg(strstr(log_last, b->what) != NULL, "case %d: '%s' not in '%s'", _i, b->what,
                  log_last);
    ck_assert_int_ne(access(path_a, F_OK), 0); /* no file was created */
}
END_TEST

START_TEST(open_rejects_null_arguments)
{
    resdiag_model m = test_model();
    resdiag *r = NULL;
    ck_assert_int_eq(resdiag_open(NULL, path_a, &m, NULL), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_open(&r, NULL, &m, NULL), RESDIAG_E_NULL);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(resdiag_open(&r, path_a, NULL, NULL), RESDIAG_E_NULL);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(log_count, 3);
    ck_assert_ptr_nonnull(strstr(log_last, "model is NULL"));
}
END_TEST

START_TEST(open_reports_a_path_that_cannot_be_created)
{
    resdiag_model m = test_model();
    resdiag *r = NULL;
    resdiag_status st = resdiag_open(&r, "/nonexistent-dir/sub/run.h5", &m, NULL);
    ck_assert_int_eq(st, RESDIAG_E_IO);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(log_count, 1);
    ck_assert_ptr_nonnull(strstr(log_last, "/nonexistent-dir/sub/run.h5"));
}
END_TEST

static void count_into_user(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)msg;
    (*(int *)user)++;
}

START_TEST(open_uses_the_handler_named_in_options)
{
    int mine = 0;
    resdiag_options o;
    resdiag_options_init(&o);
    o.log_fn = count_into_user;
    o.log_user_data = &mine;
    resdiag_model m = test_model();
    m.n_layers = -3;
    resdiag *r = NULL;
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), RESDIAG_E_INVALID);
    ck_assert_int_eq(mine, 1);
    ck_assert_int_eq(log_count, 0); /* the process-wide handler heard nothing */
}
END_TEST

/* ---------------------------------------------------- bad hook calls */

typedef struct bad_hook {
    resdiag_status expect;
    resdiag_direction dir;
    int layer, sublayer;
    int site;
    int dtype;
    int64_t rows, cols, stride;
    int null_data;
    const char *what;
} bad_hook;

static const bad_hook bad_hooks[] = {
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, -1, 0, RESDIAG_STREAM_IN, 0, T, D, 0, 0, "layer -1" },
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, L, 0, RESDIAG_STREAM_IN, 0, T, D, 0, 0, "layer 3" },
    { RESDIAG_E_RANGE, RESDIAG_BACKWARD, 0, S, RESDIAG_STREAM_IN, 0, T, D, 0, 0, "sublayer 2" },
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, 0, -1, RESDIAG_NORM_OUT, 0, T, D, 0, 0, "sublayer -1" },
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, 0, 0, 8, 0, T, D, 0, 0, "unknown site 8" },
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, 0, 0, 99, 0, T, D, 0, 0, "unknown site 99" },
    { RESDIAG_E_RANGE, RESDIAG_FORWARD, 0, 0, -2, 0, T, D, 0, 0, "unknown site -2" },
    { RESDIAG_E_INVALID, (resdiag_direction)2, 0, 0, RESDIAG_STREAM_IN, 0, T, D, 0, 0, "direction" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, T, D + 1, 0, 0, "9 columns" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_EMBED_OUT, 0, T, 3, 0, 0, "3 columns" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, -1, D, 0, 0, "need rows >= 0" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_LOGITS, 0, T, 0, 0, 0, "need rows >= 0, cols >= 1" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, T, D, D - 1, 0, "row_stride 7" },
    { RESDIAG_E_SHAPE, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, INT64_MAX / 4, D, 0, 0, "too large" },
    { RESDIAG_E_NULL, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, T, D, 0, 1, "data is NULL" },
    { RESDIAG_E_DTYPE, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 9, T, D, 0, 0, "dtype 9" },
    /* open_run writes schema 1: no room for the sites of schema 3 */
    { RESDIAG_E_INVALID, RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_IN, 0, T, D, 0, 0,
      "site branch_in needs a file of schema 3; this run writes schema 1" },
    { RESDIAG_E_INVALID, RESDIAG_BACKWARD, 0, 0, RESDIAG_OUT_NORM_OUT, 0, T, D, 0, 0,
      "site out_norm_out needs a file of schema 3" },
};

START_TEST(hooks_reject_bad_calls_and_the_run_goes_on)
{
    const bad_hook *b = &bad_hooks[_i];
    float x[T * D];
    fill(x, T * D, 1);
    resdiag *r = open_run(path_a, NULL);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    resdiag_tensor t = resdiag_tensor_make(b->null_data ? NULL : x, (resdiag_dtype)b->dtype,
                                           b->rows, b->cols, b->stride);
    log_count = 0;
    ck_assert_int_eq(resdiag_observe_at(r, b->dir, b->layer, b->sublayer,
                                        (resdiag_site)b->site, t, __FILE__, __LINE__),
                     b->expect);
    ck_assert_int_eq(log_count, 1);
    ck_assert_msg(strstr(log_last, "client bug:") == log_last, "no prefix: %s", log_last);
    ck_assert_msg(strstr(log_last, b->what) != NULL, "case %d: '%s' not in '%s'", _i, b->what,
                  log_last);
    ck_assert_str_eq(resdiag_errmsg(r), log_last);
    /* A good call afterwards records as usual. */
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 1, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 1);
    double f[RESDIAG_N_FIELDS];
    int observed = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 1, RESDIAG_STREAM_OUT, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 1);
    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(x, T, D),
                            FROB_TOL(ref_frob(x, T, D)));
    /* The bad call left nothing behind: layer 0 sublayer 0 is unobserved. */
    for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++) {
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, (resdiag_site)s, f,
                                             &observed), RESDIAG_OK);
        ck_assert_int_eq(observed, 0);
    }
    resdiag_reader_destroy(rd);
}
END_TEST

/* branch_in, out_norm_in and out_norm_out need a file of schema 3 (the
 * default): with file_schema 1 or 2 (the old 5-site layout) every hook on
 * them is a client bug naming the schema (RESDIAG_E_INVALID), the run goes
 * on and the file reads them as never observed; in schema 3 the same calls
 * record. */
START_TEST(sites_of_schema_3_need_a_file_of_schema_3)
{
    static const int schemas[] = { 1, 2, 3, 0 };
    static const resdiag_site new_sites[] = { RESDIAG_BRANCH_IN, RESDIAG_OUT_NORM_IN,
                                              RESDIAG_OUT_NORM_OUT };
    float x[T * D];
    fill(x, T * D, 11);
    for (size_t c = 0; c < sizeof schemas / sizeof schemas[0]; c++) {
        const int schema = schemas[c], old = schema == 1 || schema == 2;
        resdiag_options o;
        resdiag_options_init(&o);
        o.file_schema = schema;
        resdiag_model m = test_model();
        resdiag *r = NULL;
        unlink(path_a); /* the file of the schema before */
        ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_BRANCH_OUT, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        char says[128];
        snprintf(says, sizeof says, "needs a file of schema 3; this run writes schema %d",
                 schema);
        const resdiag_status want = old ? RESDIAG_E_INVALID : RESDIAG_OK;
        for (int dir = 0; dir < 2; dir++)
            for (size_t k = 0; k < 3; k++) {
                log_count = 0;
                log_last[0] = 0;
                ck_assert_int_eq(resdiag_observe_at(r, (resdiag_direction)dir, 0, 1,
                                                    new_sites[k], resdiag_f32(x, T, D),
                                                    "trainer.c", 40), want);
                ck_assert_int_eq(log_count, old);
                if (old)
                    ck_assert_msg(strstr(log_last, "client bug: ") == log_last
                                  && strstr(log_last, resdiag_site_name(new_sites[k]))
                                  && strstr(log_last, says)
                                  && strstr(log_last, "(trainer.c:40)"),
                                  "schema %d: %s", schema, log_last);
            }
        /* an alias or a copy with one of them at either end */
        log_count = 0;
        ck_assert_int_eq(resdiag_observe_alias(r, RESDIAG_FORWARD, 1, 0, RESDIAG_OUT_NORM_OUT,
                                               RESDIAG_BRANCH_OUT), want);
        ck_assert_int_eq(resdiag_observe_alias(r, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_OUT,
                                               RESDIAG_BRANCH_IN), want);
        ck_assert_int_eq(resdiag_observe_same_as(r, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_IN, 1,
                                                 0, RESDIAG_BRANCH_OUT, "trainer.c", 41),
                         want);
        ck_assert_int_eq(log_count, old ? 3 : 0);
        if (old)
            ck_assert_msg(strstr(log_last, "branch_in") && strstr(log_last, says), "%s",
                          log_last);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
        resdiag_destroy(r);

        resdiag_reader *rd = reopen(path_a);
        ck_assert_int_eq(resdiag_reader_info(rd)->schema_version, schema ? schema : 3);
        double f[RESDIAG_N_FIELDS];
        int observed = -1;
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_OUT, f,
                                             &observed), RESDIAG_OK);
        ck_assert_int_eq(observed, 1);
        for (int dir = 0; dir < 2; dir++)
            for (size_t k = 0; k < 3; k++) {
                ck_assert_int_eq(resdiag_reader_site(rd, 0, (resdiag_direction)dir, 0, 1,
                                                     new_sites[k], f, &observed), RESDIAG_OK);
                ck_assert_int_eq(observed, !old);
                /* schema 3 stores it as float32: 2^-24 of it on top of the path's bound */
                if (!old)
                    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(x, T, D),
                                            ref_frob(x, T, D) * 0x1p-24 +
                                                FROB_TOL(ref_frob(x, T, D)));
            }
        int as = -2;
        ck_assert_int_eq(resdiag_reader_alias(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_OUT,
                                              &as), RESDIAG_OK);
        ck_assert_int_eq(as, old ? -1 : RESDIAG_BRANCH_IN);
        ck_assert_int_eq(resdiag_reader_alias(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_OUT_NORM_OUT,
                                              &as), RESDIAG_OK);
        ck_assert_int_eq(as, old ? -1 : RESDIAG_BRANCH_OUT);
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_IN, f,
                                             &observed), RESDIAG_OK);
        ck_assert_int_eq(observed, !old); /* the copy */
        resdiag_reader_destroy(rd);
    }
}
END_TEST

/* resdiag.h: rows >= 0, data may be NULL when rows == 0. An empty tensor,
 * also as the first one a sublayer's add ever sees (no norm buffer yet), is
 * recorded as observed with 0 tokens, without a message. */
START_TEST(empty_tensors_are_observed_with_zero_rows)
{
    float x[T * D], f[T * D];
    fill(x, T * D, 3);
    fill(f, T * D, 4);
    resdiag *r = open_run(path_a, NULL);
    log_count = 0;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(NULL, 0, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(x, 0, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_IN, resdiag_f32(NULL, 0, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f32(NULL, 0, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    /* the next step's tensors still give the update ratio */
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    ck_assert_msg(log_count == 0, "%d messages, the last: %s", log_count, log_last);

    resdiag_reader *rd = reopen(path_a);
    double v[RESDIAG_N_FIELDS], u[RESDIAG_N_UPDATE_FIELDS];
    static const resdiag_site sites[3] = { RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT,
                                           RESDIAG_NORM_IN };
    for (int i = 0; i < 4; i++) {
        int observed = -1;
        if (i < 3)
            ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, sites[i], v,
                                                 &observed), RESDIAG_OK);
        else
            ck_assert_int_eq(resdiag_reader_param(rd, 0, 0, "mlp.w2", v, &observed),
                             RESDIAG_OK);
        ck_assert_int_eq(observed, 1);
        ck_assert_double_eq(v[RESDIAG_FIELD_ROWS], 0);
        ck_assert_double_eq(v[RESDIAG_FIELD_COLS], D);
        ck_assert_double_eq(v[RESDIAG_FIELD_FROB], 0);
        ck_assert(isnan(v[RESDIAG_FIELD_TOK_NORM_MEAN]));
        ck_assert_double_eq(v[RESDIAG_FIELD_NAN_COUNT], 0);
    }
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 0, 0, u), RESDIAG_OK);
    ck_assert(isnan(u[RESDIAG_UPDATE_RATIO_FROB]) && isnan(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]));
    ck_assert_int_eq(resdiag_reader_update(rd, 1, 0, 0, u), RESDIAG_OK);
    ck_assert_double_eq_tol(u[RESDIAG_UPDATE_RATIO_FROB],
                            (double)(ref_frob(f, T, D) / ref_frob(x, T, D)),
                            RATIO_TOL(ref_frob(f, T, D) / ref_frob(x, T, D)));
    ck_assert(isfinite(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]));
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(shard_width_is_accepted_only_when_declared)
{
    float x[T * 4];
    fill(x, T * 4, 2);
    resdiag_model m = test_model();
    m.shard_cols = 4;
    resdiag *r = fixture_open(path_a, &m, NULL);
    resdiag_step_begin(r, 0);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, 4)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, 3)),
                     RESDIAG_E_SHAPE);
    /* Logits take any width. */
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, resdiag_f32(x, 4, 5)), RESDIAG_OK);
    resdiag_step_end(r);
    resdiag_destroy(r);
}
END_TEST

START_TEST(param_grad_rejects_unknown_names_and_layers)
{
    float g[T * D];
    fill(g, T * D, 3);
    resdiag *r = open_run(path_a, NULL);
    resdiag_step_begin(r, 0);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, NULL, resdiag_f32(g, T, D)), RESDIAG_E_NULL);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w9", resdiag_f32(g, T, D)), RESDIAG_E_RANGE);
    ck_assert_ptr_nonnull(strstr(log_last, "'mlp.w9' is not a declared per-layer parameter"));
    /* the message names the fields of resdiag_model that declare it */
    ck_assert_ptr_nonnull(
        strstr(log_last, "resdiag_model's layer_param_names and n_layer_params"));
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, L, "mlp.w2", resdiag_f32(g, T, D)), RESDIAG_E_RANGE);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, -2, "mlp.w2", resdiag_f32(g, T, D)), RESDIAG_E_RANGE);
    /* head.w is model-level, not per-layer, and the other way round. */
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "head.w", resdiag_f32(g, T, D)), RESDIAG_E_RANGE);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "mlp.w2", resdiag_f32(g, T, D)),
                     RESDIAG_E_RANGE);
    ck_assert_ptr_nonnull(
        strstr(log_last, "resdiag_model's model_param_names and n_model_params"));
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "head.w", resdiag_f32(g, 2, 7)),
                     RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 2, "mlp.w2", resdiag_f32(g, 4, 10)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 2, "mlp.w2", resdiag_f32(NULL, 4, 10)),
                     RESDIAG_E_NULL);
    resdiag_step_end(r);
    resdiag_destroy(r);

    resdiag_reader *rd = reopen(path_a);
    double f[RESDIAG_N_FIELDS];
    int obs;
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 2, "mlp.w2", f, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(g, 4, 10),
                            FROB_TOL(ref_frob(g, 4, 10)));
    ck_assert_double_eq(f[RESDIAG_FIELD_ROWS], 4);
    ck_assert_double_eq(f[RESDIAG_FIELD_COLS], 10);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "head.w", f, &obs),
                     RESDIAG_OK);
    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(g, 2, 7),
                            FROB_TOL(ref_frob(g, 2, 7)));
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 1, "mlp.w2", f, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 1, "nope", f, &obs), RESDIAG_E_NOT_FOUND);
    resdiag_reader_destroy(rd);
}
END_TEST

/* -------------------------------------------------------- call order */

START_TEST(calls_out_of_order_are_refused)
{
    float x[T * D];
    fill(x, T * D, 4);
    resdiag *r = open_run(path_a, NULL);
    /* a hook outside a step is a quiet no-op (hooks_outside_a_step_...) */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                     RESDIAG_OK);
    ck_assert_int_eq(log_count, 0);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_E_STATE);
    ck_assert_ptr_nonnull(strstr(log_last, "step_end without"));
    ck_assert_int_eq(resdiag_step_begin(r, -1), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_step_begin(r, 5), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 6), RESDIAG_E_STATE);
    ck_assert_ptr_nonnull(strstr(log_last, "while step 5 is still open"));
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 5), RESDIAG_E_INVALID);
    ck_assert_ptr_nonnull(strstr(log_last, "increase"));
    /* a decoder numbering steps by position: the message says what to do */
    ck_assert_ptr_nonnull(strstr(log_last, "resdiag_step_begin(5): step numbers must be >= 0 "
                                           "and increase (last was 5); number steps with a "
                                           "counter that keeps increasing across "
                                           "sequences/epochs, e.g. step = seq * T + pos"));
    ck_assert_int_eq(resdiag_step_begin(r, 4), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    /* After close: every call is refused, nothing crashes. */
    ck_assert_int_eq(resdiag_step_begin(r, 9), RESDIAG_E_STATE);
    int line = __LINE__ + 1;
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                     RESDIAG_E_STATE);
    ck_assert_ptr_nonnull(strstr(log_last, "after resdiag_close"));
    char where[64];
    snprintf(where, sizeof where, "test-api.c:%d)", line);
    ck_assert_msg(strstr(log_last, where) != NULL, "%s", log_last);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f32(x, T, D)), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_flush(r), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_set_enabled(r, 1), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_E_STATE);
    resdiag_destroy(r);

    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 1);
    int64_t step = -1;
    ck_assert_int_eq(resdiag_reader_steps(rd, &step, 1), RESDIAG_OK);
    ck_assert_int_eq(step, 5);
    resdiag_reader_destroy(rd);
}
END_TEST

/* Trainers run the same forward for validation and sampling between
 * training steps: hooks there record nothing, log nothing (one DEBUG line
 * at most) and return OK, and the next step is recorded as without them. */
static int log_debug_count;
static void count_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)user;
    if (prio == RESDIAG_LOG_DEBUG)
        log_debug_count++;
    capture_log(prio, msg, NULL);
}

START_TEST(hooks_outside_a_step_are_a_quiet_no_op)
{
    float x[T * D], y[T * D], big[2 * T * D];
    fill(x, T * D, 11);
    fill(y, T * D, 12);
    fill(big, 2 * T * D, 13);
    resdiag *r = open_run(path_a, NULL);
    /* before the first step: every kind of hook, also a wrong shape */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(y, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_BWD(r, 1, 1, RESDIAG_NORM_IN, resdiag_f32(y, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, resdiag_f32(y, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f32(y, T, D)), RESDIAG_OK);
    ck_assert_int_eq(log_count, 0);
    ck_assert_str_eq(resdiag_errmsg(r), "");

    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);

    /* between steps: a validation forward of other data, many times */
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(y, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 2, 1, RESDIAG_STREAM_OUT, resdiag_f32(y, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_BWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(y, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 1, "attn.wo", resdiag_f32(y, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(big, T, 2 * D)),
                         RESDIAG_OK);
    }
    ck_assert_int_eq(log_count, 0);

    /* the next step is recorded as if the calls between had not been */
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    ck_assert_int_eq(log_count, 0);

    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 2);
    double f[RESDIAG_N_FIELDS], u[RESDIAG_N_UPDATE_FIELDS];
    int obs = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(x, T, D),
                            FROB_TOL(ref_frob(x, T, D)));
    ck_assert_double_eq(f[RESDIAG_FIELD_CALL_SEQ], 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_BACKWARD, 1, 1, RESDIAG_NORM_IN, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_LOGITS, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 0, "mlp.w2", f, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    /* step 1 saw only branch_out: nothing of the validation forward */
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, f,
                                         &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_BACKWARD, 0, 0, RESDIAG_STREAM_IN, f,
                                         &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_param(rd, 1, 1, "attn.wo", f, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_OUT, f,
                                         &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_double_eq(f[RESDIAG_FIELD_CALL_SEQ], 0);
    /* the update ratio of step 0 is x against x: the same path on the same
     * data gives the same norm twice, so 1 up to the division; step 1 has none */
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 0, 0, u), RESDIAG_OK);
    ck_assert_double_eq_tol(u[RESDIAG_UPDATE_RATIO_FROB], 1.0, 1e-12);
    ck_assert_int_eq(resdiag_reader_update(rd, 1, 0, 0, u), RESDIAG_OK);
    ck_assert(isnan(u[RESDIAG_UPDATE_RATIO_FROB]));
    resdiag_reader_destroy(rd);

    /* at DEBUG level: one line the first time, naming the call site */
    log_count = 0;
    log_debug_count = 0;
    resdiag_set_log_handler(count_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_DEBUG);
    r = open_run(path_b, NULL);
    int line = __LINE__ + 2;
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_IN, resdiag_f32(y, T, D)),
                         RESDIAG_OK);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
    ck_assert_int_eq(log_debug_count, 1);
    ck_assert_int_eq(log_count, 1);
    char where[64];
    snprintf(where, sizeof where, "test-api.c:%d", line);
    ck_assert_msg(strstr(log_last, "outside a step") && strstr(log_last, where), "%s", log_last);
    resdiag_destroy(r);
}
END_TEST

/* Every client bug a hook reports names the trainer's file:line given to
 * it (the macros pass __FILE__ and __LINE__), escaped like every message. */
START_TEST(client_bugs_from_hooks_name_the_callers_file_and_line)
{
    float x[T * D];
    fill(x, T * D, 21);
    resdiag *r = open_run(path_a, NULL);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    int line = __LINE__ + 1;
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, D, T)),
                     RESDIAG_E_SHAPE);
    char where[64];
    snprintf(where, sizeof where, "test-api.c:%d", line);
    ck_assert_msg(strstr(log_last, where) != NULL, "%s", log_last);

    const struct {
        resdiag_direction dir;
        int layer, sublayer;
        resdiag_site site;
        resdiag_tensor t;
        resdiag_status want;
    } bad[] = {
        { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D + 1), RESDIAG_E_SHAPE },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
          resdiag_tensor_make(x, (resdiag_dtype)9, T, D, 0), RESDIAG_E_DTYPE },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, -1, D), RESDIAG_E_SHAPE },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
          resdiag_tensor_make(x, RESDIAG_DTYPE_F32, T, D, D - 1), RESDIAG_E_SHAPE },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(NULL, T, D), RESDIAG_E_NULL },
        { RESDIAG_FORWARD, 0, 0, (resdiag_site)8, resdiag_f32(x, T, D), RESDIAG_E_RANGE },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_OUT_NORM_IN, resdiag_f32(x, T, D), RESDIAG_E_INVALID },
        { (resdiag_direction)5, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D),
          RESDIAG_E_INVALID },
        { RESDIAG_FORWARD, 9, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D), RESDIAG_E_RANGE },
        { RESDIAG_FORWARD, 0, 9, RESDIAG_STREAM_IN, resdiag_f32(x, T, D), RESDIAG_E_RANGE },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        log_last[0] = 0;
        ck_assert_int_eq(resdiag_observe_at(r, bad[i].dir, bad[i].layer, bad[i].sublayer,
                                            bad[i].site, bad[i].t, "trainer.c", 123),
                         bad[i].want);
        ck_assert_msg(strstr(log_last, "client bug: ") && strstr(log_last, "(trainer.c:123)"),
                      "case %zu: %s", i, log_last);
    }
    const struct {
        int layer;
        const char *name;
        resdiag_tensor t;
        resdiag_status want;
    } pbad[] = {
        { 0, NULL, resdiag_f32(x, T, D), RESDIAG_E_NULL },
        { 0, "nope", resdiag_f32(x, T, D), RESDIAG_E_RANGE },
        { 7, "mlp.w2", resdiag_f32(x, T, D), RESDIAG_E_RANGE },
        { 0, "mlp.w2", resdiag_f32(NULL, T, D), RESDIAG_E_NULL },
        { 0, "mlp.w2", resdiag_f32(x, T, 0), RESDIAG_E_SHAPE },
    };
    for (size_t i = 0; i < sizeof pbad / sizeof pbad[0]; i++) {
        log_last[0] = 0;
        ck_assert_int_eq(resdiag_param_grad_at(r, pbad[i].layer, pbad[i].name, pbad[i].t,
                                               "optim.c", 45),
                         pbad[i].want);
        ck_assert_msg(strstr(log_last, "client bug: ") && strstr(log_last, "(optim.c:45)"),
                      "param case %zu: %s", i, log_last);
    }
    /* a file name is any bytes: the message stays one clean line */
    log_last[0] = 0;
    ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
                                        resdiag_f32(x, T, D + 1), "evil\n\x1b[2Jx.c", 7),
                     RESDIAG_E_SHAPE);
    ck_assert_ptr_null(strchr(log_last, '\n'));
    ck_assert_ptr_null(strchr(log_last, '\x1b'));
    ck_assert_msg(strstr(log_last, "x.c:7)") != NULL, "%s", log_last);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    resdiag_destroy(r);
}
END_TEST

START_TEST(client_bug_messages_are_rate_limited)
{
    float x[T * D];
    fill(x, T * D, 5);
    resdiag *r = open_run(path_a, NULL);
    resdiag_step_begin(r, 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(RESDIAG_FWD(r, 77, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                         RESDIAG_E_RANGE);
    ck_assert_int_eq(log_count, 20);
    ck_assert_ptr_nonnull(strstr(log_last, "suppressed"));
    ck_assert_ptr_nonnull(strstr(resdiag_errmsg(r), "layer 77"));
    resdiag_step_end(r);
    resdiag_destroy(r);
}
END_TEST

/* ----------------------------------------------------- step selection */

static void record_steps(resdiag *r, int n)
{
    float x[T * D];
    for (int s = 0; s < n; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        fill(x, T * D, (unsigned)s);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
}

static void assert_steps(const char *path, const int64_t *want, int n)
{
    resdiag_reader *rd = reopen(path);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, n);
    int64_t got[64];
    ck_assert_int_eq(resdiag_reader_steps(rd, got, n), RESDIAG_OK);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(got[i], want[i]);
        double f[RESDIAG_N_FIELDS];
        float x[T * D];
        fill(x, T * D, (unsigned)want[i]);
        ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT,
                                             f, NULL), RESDIAG_OK);
        ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], (double)ref_frob(x, T, D),
                            FROB_TOL(ref_frob(x, T, D)));
    }
    resdiag_reader_destroy(rd);
}

START_TEST(record_every_and_range_select_steps)
{
    resdiag_options o;
    resdiag_options_init(&o);
    o.record_every = 3;
    o.record_first = 2;
    o.record_last = 10;
    resdiag *r = open_run(path_a, &o);
    record_steps(r, 20);
    resdiag_destroy(r);
    const int64_t want[] = { 2, 5, 8 };
    assert_steps(path_a, want, 3);
}
END_TEST

START_TEST(record_init_only_keeps_the_first_step)
{
    resdiag_options o;
    resdiag_options_init(&o);
    o.record_init_only = 1;
    o.record_first = 7; /* ignored with init only */
    resdiag *r = open_run(path_a, &o);
    record_steps(r, 5);
    resdiag_destroy(r);
    const int64_t want[] = { 0 };
    assert_steps(path_a, want, 1);
}
END_TEST

START_TEST(disabled_steps_record_nothing)
{
    float x[T * D];
    fill(x, T * D, 0);
    resdiag *r = open_run(path_a, NULL);
    ck_assert_int_eq(resdiag_set_enabled(r, 0), RESDIAG_OK);
    for (int s = 0; s < 3; s++) {
        resdiag_step_begin(r, s);
        ck_assert_int_eq(resdiag_step_is_recorded(r), 0);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        resdiag_step_end(r);
    }
    /* Outside a step a paused run is quiet too. */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    resdiag_set_enabled(r, 1);
    resdiag_step_begin(r, 3);
    ck_assert_int_eq(resdiag_step_is_recorded(r), 1);
    fill(x, T * D, 3);
    RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
    resdiag_step_end(r);
    ck_assert_int_eq(resdiag_step_is_recorded(r), 0);
    resdiag_destroy(r);
    const int64_t want[] = { 3 };
    assert_steps(path_a, want, 1);
    ck_assert_int_eq(log_count, 0);
}
END_TEST

/* -------------------------------------------------- what the file holds */

START_TEST(file_holds_statistics_ratios_order_and_callsites)
{
    float x[T * D], f[T * D], y[T * D];
    fill(x, T * D, 10);
    fill(f, T * D, 11);
    for (int i = 0; i < T * D; i++)
        f[i] *= 0.1f;
    for (int i = 0; i < T * D; i++)
        y[i] = x[i] + f[i];
    resdiag *r = open_run(path_a, NULL);
    resdiag_step_begin(r, 0);
    /* BRANCH_OUT first: the ratio must not depend on the order. */
    int line_br = __LINE__ + 1;
    RESDIAG_FWD(r, 2, 1, RESDIAG_BRANCH_OUT, resdiag_f32(f, T, D));
    int line_in = __LINE__ + 1;
    RESDIAG_FWD(r, 2, 1, RESDIAG_STREAM_IN, resdiag_f32(x, T, D));
    RESDIAG_FWD(r, 2, 1, RESDIAG_STREAM_OUT, resdiag_f32(y, T, D));
    RESDIAG_BWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(f, T, D));
    RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, resdiag_f32(x, D, T));
    resdiag_step_end(r);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = reopen(path_a);
    const resdiag_run_info *info = resdiag_reader_info(rd);
    ck_assert_int_eq(info->n_layers, L);
    ck_assert_int_eq(info->n_sublayers, S);
    ck_assert_str_eq(info->sublayer_names[1], "mlp");
    ck_assert_int_eq(info->sketch_size, 16);

    /* Ratios against the independent computation. */
    long double sum = 0;
    for (int t = 0; t < T; t++) {
        long double nx = 0, nf = 0;
        for (int i = 0; i < D; i++) {
            nx += (long double)x[t * D + i] * x[t * D + i];
            nf += (long double)f[t * D + i] * f[t * D + i];
        }
        sum += sqrtl(nf) / sqrtl(nx);
    }
    double u[RESDIAG_N_UPDATE_FIELDS];
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 2, 1, u), RESDIAG_OK);
    ck_assert_double_eq_tol(u[RESDIAG_UPDATE_RATIO_FROB],
                            (double)(ref_frob(f, T, D) / ref_frob(x, T, D)),
                            RATIO_TOL(ref_frob(f, T, D) / ref_frob(x, T, D)));
    ck_assert_double_eq_tol(u[RESDIAG_UPDATE_RATIO_TOK_MEAN], (double)(sum / T),
                            RATIO_TOL(sum / T));
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 0, 0, u), RESDIAG_OK);
    ck_assert(isnan(u[0]) && isnan(u[1]));

    /* Call order within the step. */
    double fl[RESDIAG_N_FIELDS];
    const struct { resdiag_direction dir; int l, s; resdiag_site site; int seq; } order[] = {
        { RESDIAG_FORWARD, 2, 1, RESDIAG_BRANCH_OUT, 0 },
        { RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_IN, 1 },
        { RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, 2 },
        { RESDIAG_BACKWARD, 0, 0, RESDIAG_STREAM_OUT, 3 },
        { RESDIAG_FORWARD, 0, 0, RESDIAG_LOGITS, 4 },
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        ck_assert_int_eq(resdiag_reader_site(rd, 0, order[i].dir, order[i].l, order[i].s,
                                             order[i].site, fl, NULL), RESDIAG_OK);
        ck_assert_double_eq(fl[RESDIAG_FIELD_CALL_SEQ], order[i].seq);
    }
    ck_assert_double_eq(fl[RESDIAG_FIELD_COLS], T); /* logits were (D, T) */

    /* The sketch is linear: sk(x) + sk(f) = sk(x + f) up to the float rounding
     * of y (u_f |y| an element) and the kernel's bound on each bucket (a
     * fraction of its |terms|, path-bounds.h); with tau = +-1 every bucket's
     * |terms| are at most the tensor's, and ||e||_2 <= ||e||_1. */
    double sx[16], sf[16], sy[16], err = 0, norm = 0;
    resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_IN, sx);
    resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 2, 1, RESDIAG_BRANCH_OUT, sf);
    resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, sy);
    for (int k = 0; k < 16; k++) {
        err += (sx[k] + sf[k] - sy[k]) * (sx[k] + sf[k] - sy[k]);
        norm += sy[k] * sy[k];
    }
    long double abs_x = 0, abs_f = 0, abs_y = 0;
    for (int i = 0; i < T * D; i++) {
        abs_x += fabsl((long double)x[i]);
        abs_f += fabsl((long double)f[i]);
        abs_y += fabsl((long double)y[i]);
    }
    double sk_tol = (double)(rd_test_active_sum_tol(RESDIAG_DTYPE_F32) * (abs_x + abs_f + abs_y) +
                             0x1p-24L * abs_y);
    ck_assert(norm > 0);
    ck_assert_msg(sqrt(err) <= sk_tol, "sketch not linear: %g > %g", sqrt(err), sk_tol);

    /* Call sites name this file and line. */
    char want[64];
    const char *cs = resdiag_reader_callsite(rd, RESDIAG_FORWARD, 2, 1, RESDIAG_BRANCH_OUT);
    snprintf(want, sizeof want, "test-api.c:%d", line_br);
    ck_assert_msg(strstr(cs, want) != NULL, "callsite '%s' lacks '%s'", cs, want);
    cs = resdiag_reader_callsite(rd, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_IN);
    snprintf(want, sizeof want, "test-api.c:%d", line_in);
    ck_assert_msg(strstr(cs, want) != NULL, "callsite '%s' lacks '%s'", cs, want);
    ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_IN), "");
    resdiag_reader_destroy(rd);
}
END_TEST

/* The roles name one of the declared parameters each, or none (NULL). */
START_TEST(open_accepts_roles_that_name_declared_parameters)
{
    static const char *const heads[] = { NULL, "head.w" };
    static const char *const residuals[] = { NULL, "attn.wo", "mlp.w2" };
    for (size_t h = 0; h < sizeof heads / sizeof *heads; h++)
        for (size_t w = 0; w < sizeof residuals / sizeof *residuals; w++) {
            resdiag_model m = test_model();
            m.head_param = heads[h];
            m.residual_param = residuals[w];
            resdiag *r = NULL;
            ck_assert_msg(resdiag_open(&r, path_a, &m, NULL) == RESDIAG_OK,
                          "roles %s / %s refused: %s", heads[h] ? heads[h] : "NULL",
                          residuals[w] ? residuals[w] : "NULL", log_last);
            record_steps(r, 1);
            ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
            resdiag_destroy(r);
            ck_assert_int_eq(unlink(path_a), 0);
        }
    ck_assert_int_eq(log_count, 0);
}
END_TEST

/* A caller built against a header from before the roles passes a smaller
 * struct_size: open reads the model only up to there, so whatever lies
 * beyond it (here roles that name no parameter) is not looked at and the
 * roles stay undeclared. */
START_TEST(open_accepts_a_model_of_a_header_without_roles)
{
    resdiag_model m = test_model();
    m.struct_size = offsetof(resdiag_model, head_param);
    m.head_param = "not.a.parameter";
    m.residual_param = "\xff\x01";
    resdiag *r = NULL;
    ck_assert_msg(resdiag_open(&r, path_a, &m, NULL) == RESDIAG_OK, "refused: %s", log_last);
    record_steps(r, 2);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    ck_assert_int_eq(log_count, 0);
    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 2);
    resdiag_reader_destroy(rd);
}
END_TEST

/* ------------------------------------------------- the trainer's metrics */



static const char *const metric_names[2] = { "loss", "lr" };

/* NaN-aware equality: the file keeps NaN as NaN, and every other value
 * bit for bit. */
static int same_value(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Steps 0..9 with record_every 2: the recorded steps keep the values given
 * last (NaN for a metric not given, Inf and NaN as given), the unrecorded
 * ones leave no trace, a bad name is refused in every step with one clear
 * message, and the reader, the JSON report and the loss figure give the
 * values back. */
START_TEST(step_metrics_reach_the_file_as_given)
{
    resdiag_model m = test_model();
    m.n_metrics = 2;
    m.metric_names = metric_names;
    resdiag_options o;
    resdiag_options_init(&o);
    o.record_every = 2;
    resdiag *r = fixture_open(path_a, &m, &o);
    /* expected per recorded step (0, 2, 4, 6, 8): loss, lr */
    double want[5][2];
    float x[T * D];
    for (int s = 0; s < 10; s++) {
        double loss = s == 4 ? INFINITY : s == 6 ? NAN : 3.0 - 0.25 * s;
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        fill(x, T * D, (unsigned)s);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_metric(r, "loss", 99.0), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_metric(r, "loss", loss), RESDIAG_OK); /* the last counts */
        if (s != 2) /* lr not given at step 2 */
            ck_assert_int_eq(resdiag_step_metric(r, "lr", 1e-3 * (s + 1)), RESDIAG_OK);
        int before = log_count;
        ck_assert_int_eq(resdiag_step_metric(r, "Loss", 1.0), RESDIAG_E_INVALID);
        ck_assert_int_eq(log_count, before + 1);
        ck_assert_msg(strstr(log_last, "client bug: resdiag_step_metric: 'Loss' is not a "
                                       "declared metric") != NULL, "%s", log_last);
        ck_assert_int_eq(resdiag_step_metric(r, NULL, 1.0), RESDIAG_E_NULL);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        if (s % 2 == 0) {
            want[s / 2][0] = loss;
            want[s / 2][1] = s == 2 ? NAN : 1e-3 * (s + 1);
        }
    }
    /* outside a step: nothing recorded, no error, and the next step is clean */
    ck_assert_int_eq(resdiag_step_metric(r, "loss", 42.0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_metric(r, "loss", 1.0), RESDIAG_E_STATE);
    resdiag_destroy(r);
    ck_assert_int_eq(resdiag_step_metric(NULL, "loss", 1.0), RESDIAG_OK);

    resdiag_reader *rd = reopen(path_a);
    const resdiag_run_info *in = resdiag_reader_info(rd);
    ck_assert_int_eq(in->n_steps, 5);
    ck_assert_int_eq(in->n_metrics, 2);
    ck_assert_str_eq(in->metric_names[0], "loss");
    ck_assert_str_eq(in->metric_names[1], "lr");
    for (int k = 0; k < 2; k++) {
        double got[5];
        ck_assert_int_eq(resdiag_reader_metric(rd, k, 0, 5, got), RESDIAG_OK);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(same_value(got[i], want[i][k]), "metric %d step index %d: %g, want %g",
                          k, i, got[i], want[i][k]);
        ck_assert_int_eq(resdiag_reader_metric(rd, k, 3, 2, got), RESDIAG_OK);
        ck_assert(same_value(got[0], want[3][k]) && same_value(got[1], want[4][k]));
    }
    double v;
    ck_assert_int_eq(resdiag_reader_metric(rd, 2, 0, 1, &v), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_reader_metric(rd, -1, 0, 1, &v), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 4, 2, &v), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, -1, 1, &v), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 0, 1, NULL), RESDIAG_E_NULL);

    /* the NaN and Inf given apart from the NaN of "not given" (lr at step 2) */
    double loss[5], lr[5];
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 0, 5, loss), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_metric(rd, 1, 0, 5, lr), RESDIAG_OK);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(resdiag_metric_given(loss[i]), 1);
        ck_assert_int_eq(resdiag_metric_given(lr[i]), i != 1);
    }
    ck_assert_int_eq(resdiag_metric_given(NAN), 0);
    ck_assert_int_eq(resdiag_metric_given(-INFINITY), 1);

    /* the JSON report: loss and lr at the recorded steps; NaN and Inf given
     * as strings (strict JSON has no literal), null where none was given */
    resdiag_analysis *an = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    char *json = resdiag_analysis_to_json(an);
    ck_assert_ptr_nonnull(strstr(json, "\"metric_steps\": [0, 2, 4, 6, 8]"));
    ck_assert_msg(strstr(json, "\"loss\": [3, 2.5, \"Infinity\", \"NaN\", 1]") != NULL, "%s",
                  json);
    ck_assert_ptr_nonnull(strstr(json, "\"lr\": [0.001, null, 0.005, 0.007, 0.009]"));
    resdiag_free(json);
    char *text = resdiag_analysis_to_text(an);
    ck_assert_msg(strstr(text, "Trainer's metrics (last value given): loss 1 at step 8, lr "
                               "0.009 at step 8") != NULL, "%s", text);
    resdiag_free(text);
    char *svg = NULL;
    ck_assert_int_eq(resdiag_analysis_figure_svg(an, RESDIAG_FIGURE_LOSS, &svg), RESDIAG_OK);
    /* the finite losses, at steps 0, 2 and 8, through the declared axes */
    double ax[4], ay[4];
    read_axis(svg, "x", ax);
    read_axis(svg, "y", ay);
    const char *p = strstr(svg, "data-key=\"metric.loss\" points=\"");
    ck_assert_ptr_nonnull(p);
    p += strlen("data-key=\"metric.loss\" points=\"");
    const int steps[3] = { 0, 2, 8 };
    const double losses[3] = { 3.0, 2.5, 1.0 };
    for (int i = 0; i < 3; i++) {
        double px, py;
        int used = 0;
        ck_assert_int_eq(sscanf(p, "%lf,%lf%n", &px, &py, &used), 2);
        p += used;
        ck_assert_double_eq_tol(px, axis_pixel(ax, steps[i]), 2e-3);
        ck_assert_double_eq_tol(py, axis_pixel(ay, losses[i]), 2e-3);
    }
    ck_assert_int_eq(*p, '"');
    ck_assert_ptr_nonnull(strstr(svg, "loss (2 steps not drawn)"));
    resdiag_free(svg);
    ck_assert_str_eq(resdiag_figure_name(RESDIAG_FIGURE_LOSS), "loss");
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
}
END_TEST

/* A run that declares no metrics, as every file before them: no metrics
 * table, n_metrics 0, no metric to read, an empty "metrics" in the JSON,
 * and no loss figure. A caller built against a header without the metric
 * fields passes a smaller struct_size: what lies beyond is not read. */
START_TEST(runs_without_metrics_have_none)
{
    resdiag_model m = test_model();
    m.struct_size = offsetof(resdiag_model, n_metrics);
    m.n_metrics = -7; /* beyond the caller's struct: never looked at */
    m.metric_names = (const char *const *)"garbage";
    resdiag *r = NULL;
    ck_assert_msg(resdiag_open(&r, path_a, &m, NULL) == RESDIAG_OK, "refused: %s", log_last);
    record_steps(r, 2);
    ck_assert_int_eq(resdiag_step_begin(r, 2), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_metric(r, "loss", 1.0), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    hid_t f = H5Fopen(path_a, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_eq(H5Lexists(f, "metrics", H5P_DEFAULT), 0);
    ck_assert_int_eq(H5Aexists(f, "metric_names"), 0);
    H5Fclose(f);
    resdiag_reader *rd = reopen(path_a);
    const resdiag_run_info *in = resdiag_reader_info(rd);
    ck_assert_int_eq(in->n_metrics, 0);
    ck_assert_ptr_null(in->metric_names);
    double v = 5;
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 0, 1, &v), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 0, 0, &v), RESDIAG_E_RANGE);
    resdiag_analysis *an = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    char *json = resdiag_analysis_to_json(an);
    ck_assert_ptr_nonnull(strstr(json, "\"metric_steps\": [],\n  \"metrics\": {}"));
    resdiag_free(json);
    char *text = resdiag_analysis_to_text(an);
    ck_assert_ptr_null(strstr(text, "Trainer's metrics"));
    resdiag_free(text);
    char *svg = (char *)1;
    ck_assert_int_eq(resdiag_analysis_figure_svg(an, RESDIAG_FIGURE_LOSS, &svg),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_ptr_null(svg);
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
}
END_TEST

/* A file that names its metrics but lacks metrics/values (a damaged or
 * hand-made file): every value reads as NaN, not as an error. */
START_TEST(metric_names_without_the_table_read_as_nan)
{
    resdiag_model m = test_model();
    m.n_metrics = 2;
    m.metric_names = metric_names;
    resdiag *r = fixture_open(path_a, &m, NULL);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_metric(r, "loss", 2.0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    hid_t f = H5Fopen(path_a, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_ge(H5Ldelete(f, "metrics/values", H5P_DEFAULT), 0);
    H5Fclose(f);
    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_metrics, 2);
    double v = 0;
    ck_assert_int_eq(resdiag_reader_metric(rd, 0, 0, 1, &v), RESDIAG_OK);
    ck_assert(isnan(v));
    resdiag_reader_destroy(rd);
}
END_TEST

/* Callers written against 0.1.0 free readers and analyses by the old
 * names; the symbols must stay and do the same. */
START_TEST(the_0_1_0_names_of_destroy_still_free)
{
    resdiag_model m = test_model();
    resdiag *r = fixture_open(path_a, &m, NULL);
    record_steps(r, 2);
    resdiag_destroy(r);
    resdiag_reader *rd = reopen(path_a);
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    ck_assert_ptr_nonnull(a);
    /* the old names are deprecated: the compiler warns at each use */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    resdiag_analysis_free(a);
    resdiag_reader_close(rd);
#pragma GCC diagnostic pop
    ck_assert_int_eq(log_count, 0);
}
END_TEST

START_TEST(model_description_and_metadata_reach_the_file)
{
    static const char *const meta[4] = { "optimizer", "adamw", "lr", "3e-4" };
    resdiag_model m = test_model();
    m.block = RESDIAG_BLOCK_PARALLEL;
    m.declared_placement = RESDIAG_PLACEMENT_MIXED;
    m.declared_mix_layers = 2;
    m.norm_kind = RESDIAG_NORM_RMSNORM;
    m.n_meta = 2;
    m.meta = meta;
    m.description = "toy model";
    m.run_kind = RESDIAG_RUN_EVALUATION;
    resdiag_options o;
    resdiag_options_init(&o);
    o.sketch_size = 0;
    resdiag *r = fixture_open(path_a, &m, &o);
    record_steps(r, 2);
    resdiag_destroy(r);

    resdiag_reader *rd = reopen(path_a);
    const resdiag_run_info *i = resdiag_reader_info(rd);
    ck_assert_int_eq(i->schema_version, 3); /* the newest, by default */
    ck_assert_str_eq(i->resdiag_version, RESDIAG_VERSION_STRING);
    ck_assert_int_eq(i->block, RESDIAG_BLOCK_PARALLEL);
    ck_assert_int_eq(i->declared_placement, RESDIAG_PLACEMENT_MIXED);
    ck_assert_int_eq(i->declared_mix_layers, 2);
    ck_assert_int_eq(i->norm_kind, RESDIAG_NORM_RMSNORM);
    ck_assert_int_eq(i->n_layer_params, 2);
    ck_assert_str_eq(i->layer_param_names[1], "mlp.w2");
    ck_assert_str_eq(i->model_param_names[0], "head.w");
    ck_assert_int_eq(i->sketch_size, 0);
    ck_assert_int_eq(i->n_meta, 2);
    ck_assert_str_eq(i->meta[0], "optimizer");
    ck_assert_str_eq(i->meta[1], "adamw");
    ck_assert_str_eq(i->meta[2], "lr");
    ck_assert_str_eq(i->meta[3], "3e-4");
    ck_assert_str_eq(i->description, "toy model");
    ck_assert_int_eq(i->run_kind, RESDIAG_RUN_EVALUATION);
    ck_assert_int_eq(i->n_steps, 2);
    double sk[4];
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, sk),
                     RESDIAG_E_NOT_FOUND);
    resdiag_reader_destroy(rd);
}
END_TEST

/* The run kind: a root attribute; files written before it read as
 * training runs; an unknown kind is refused, in the model and in a file. */
START_TEST(run_kind_reaches_the_file_and_old_files_read_as_training)
{
    resdiag_model m = test_model();
    ck_assert_int_eq(m.run_kind, RESDIAG_RUN_TRAINING);
    m.run_kind = (resdiag_run_kind)3;
    resdiag *r = NULL;
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, NULL), RESDIAG_E_INVALID);
    ck_assert_ptr_nonnull(strstr(log_last, "unknown run kind 3"));
    ck_assert_ptr_null(r);
    ck_assert_str_eq(resdiag_run_kind_name(RESDIAG_RUN_TRAINING), "training");
    ck_assert_str_eq(resdiag_run_kind_name(RESDIAG_RUN_EVALUATION), "evaluation");
    ck_assert_str_eq(resdiag_run_kind_name(RESDIAG_RUN_INFERENCE), "inference");
    ck_assert_str_eq(resdiag_run_kind_name((resdiag_run_kind)3), "?");

    m.run_kind = RESDIAG_RUN_INFERENCE;
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, NULL), RESDIAG_OK);
    record_steps(r, 1);
    resdiag_destroy(r);
    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->run_kind, RESDIAG_RUN_INFERENCE);
    resdiag_reader_destroy(rd);

    /* a file of an older writer has no run_kind: a training run */
    hid_t f = H5Fopen(path_a, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_gt(H5Aexists(f, "run_kind"), 0);
    ck_assert_int_ge(H5Adelete(f, "run_kind"), 0);
    H5Fclose(f);
    rd = reopen(path_a);
    ck_assert_int_eq(resdiag_reader_info(rd)->run_kind, RESDIAG_RUN_TRAINING);
    resdiag_reader_destroy(rd);

    /* a forged value is a format error naming the attribute */
    f = H5Fopen(path_a, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "run_kind", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char *v = "finetuning";
    ck_assert_int_ge(H5Awrite(a, t, &v), 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    rd = NULL;
    log_last[0] = 0;
    ck_assert_int_eq(resdiag_reader_open(&rd, path_a), RESDIAG_E_FORMAT);
    ck_assert_msg(strstr(log_last, "'run_kind'") != NULL, "%s", log_last);
}
END_TEST

/* --------------------------------------------------------- buffering */

/* Children run this test binary again in a helper mode (see main), through
 * exec rather than a bare fork, so that a child neither inherits the
 * parent's open run nor counts it as leaked under valgrind. */
static char self_path[4096];

static pid_t spawn_self(const char *mode, const char *arg1, const char *arg2)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(self_path, self_path, mode, arg1, arg2, (char *)NULL);
        _exit(253);
    }
    return pid;
}

/* Helper mode --count-steps PATH: exit code = steps a reader sees. */
static int count_steps_main(const char *path)
{
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK)
        return 255;
    int64_t n = resdiag_reader_info(rd)->n_steps;
    resdiag_reader_destroy(rd);
    return n > 200 ? 254 : (int)n;
}

/* Steps a separate process sees in the file right now. */
static int64_t steps_seen_by_another_process(const char *path)
{
    pid_t pid = spawn_self("--count-steps", path, NULL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status));
    ck_assert_int_lt(WEXITSTATUS(status), 253);
    return WEXITSTATUS(status);
}

START_TEST(steps_reach_the_file_in_batches_and_on_flush)
{
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 4;
    o.flush_seconds = 0;
    resdiag *r = open_run(path_a, &o);
    record_steps(r, 1);
    ck_assert_int_eq(steps_seen_by_another_process(path_a), 1); /* the first at once */
    float x[T * D];
    for (int s = 1; s <= 3; s++) {
        resdiag_step_begin(r, s);
        fill(x, T * D, (unsigned)s);
        RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
        resdiag_step_end(r);
    }
    ck_assert_int_eq(steps_seen_by_another_process(path_a), 1);
    resdiag_step_begin(r, 4);
    fill(x, T * D, 4);
    RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
    resdiag_step_end(r); /* the batch of 4 is full */
    ck_assert_int_eq(steps_seen_by_another_process(path_a), 5);
    /* Flush inside a step writes the finished steps, not the open one. */
    resdiag_step_begin(r, 5);
    fill(x, T * D, 5);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_flush(r), RESDIAG_OK);
    ck_assert_int_eq(steps_seen_by_another_process(path_a), 5);
    resdiag_step_end(r);
    ck_assert_int_eq(resdiag_flush(r), RESDIAG_OK);
    ck_assert_int_eq(steps_seen_by_another_process(path_a), 6);
    /* A flush between two calls of one site in a step: both merge into the
     * step (its rows in two halves give the statistics of the whole). */
    resdiag_step_begin(r, 6);
    fill(x, T * D, 6);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T / 2, D)),
                     RESDIAG_OK);
    resdiag_flush(r);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT,
                                 resdiag_f32(x + (T / 2) * D, T - T / 2, D)),
                     RESDIAG_OK);
    resdiag_step_end(r);
    resdiag_destroy(r);
    const int64_t want[] = { 0, 1, 2, 3, 4, 5, 6 };
    assert_steps(path_a, want, 7);
}
END_TEST

/* ------------------------------------------------------------ threads */

enum { TH_L = 8, TH_STEPS = 6, TH_T = 64, TH_D = 32 };

typedef struct th_arg {
    resdiag *r;
    int layer0, step;
    pthread_barrier_t *barrier;
} th_arg;

static void th_layer(resdiag *r, int layer, int step)
{
    float x[TH_T * TH_D], f[TH_T * TH_D];
    fill(x, TH_T * TH_D, (unsigned)(step * 1000 + layer));
    fill(f, TH_T * TH_D, (unsigned)(step * 1000 + layer + 500));
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_STREAM_IN, resdiag_f32(x, TH_T, TH_D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_BRANCH_OUT,
                                     resdiag_f32(f, TH_T, TH_D)), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_BWD(r, layer, s, RESDIAG_STREAM_OUT,
                                     resdiag_f32(f, TH_T, TH_D)), RESDIAG_OK);
    }
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, layer, "mlp.w2", resdiag_f32(x, TH_T, TH_D)),
                     RESDIAG_OK);
}

static void *th_main(void *p)
{
    th_arg *a = p;
    pthread_barrier_wait(a->barrier);
    for (int l = a->layer0; l < TH_L; l += 4)
        th_layer(a->r, l, a->step);
    return NULL;
}

static resdiag *th_open(const char *path)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = TH_L, .cols = TH_D,
        .sublayers = 2, .sublayer_names = sub_names, .layer_params = 2,
        .layer_param_names = lparams });
    return fixture_open(path, &m, NULL);
}

START_TEST(concurrent_hooks_on_different_layers_match_a_sequential_run)
{
    resdiag *seq = th_open(path_a), *par = th_open(path_b);
    for (int step = 0; step < TH_STEPS; step++) {
        resdiag_step_begin(seq, step);
        for (int l = 0; l < TH_L; l++)
            th_layer(seq, l, step);
        resdiag_step_end(seq);

        resdiag_step_begin(par, step);
        pthread_t th[4];
        th_arg args[4];
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, 4);
        for (int i = 0; i < 4; i++) {
            args[i] = (th_arg){ par, i, step, &barrier };
            pthread_create(&th[i], NULL, th_main, &args[i]);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&barrier);
        resdiag_step_end(par);
    }
    resdiag_destroy(seq);
    resdiag_destroy(par);

    /* Every dataset equal, except the call order, which threads interleave. */
    resdiag_reader *a = reopen(path_a), *b = reopen(path_b);
    int n = resdiag_reader_n_datasets(a);
    ck_assert_int_eq(n, resdiag_reader_n_datasets(b));
    int compared = 0;
    for (int i = 0; i < n; i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        if (strcmp(name, "step_time") == 0)
            continue;
        int64_t dims[8];
        int rank;
        ck_assert_int_eq(resdiag_reader_dims(a, name, dims, 8, &rank), RESDIAG_OK);
        size_t len = 1;
        for (int k = 1; k < rank; k++)
            len *= (size_t)dims[k];
        ck_assert_int_eq(dims[0], TH_STEPS);
        size_t total = len * TH_STEPS;
        double *va = malloc(total * sizeof *va), *vb = malloc(total * sizeof *vb);
        ck_assert_int_eq(resdiag_reader_read(a, name, 0, TH_STEPS, va, total), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_read(b, name, 0, TH_STEPS, vb, total), RESDIAG_OK);
        int is_stats = strstr(name, "_stats") != NULL;
        for (size_t k = 0; k < total; k++) {
            if (is_stats && k % RESDIAG_N_FIELDS == RESDIAG_FIELD_CALL_SEQ)
                continue;
            ck_assert_msg((isnan(va[k]) && isnan(vb[k])) || va[k] == vb[k],
                          "%s[%zu]: %g vs %g", name, k, va[k], vb[k]);
        }
        free(va);
        free(vb);
        compared++;
    }
    ck_assert_int_ge(compared, 6);
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
}
END_TEST

/* ------------------------------------------------------ running out */

/* In a child limited to a small file size, the writer fails: hooks and
 * steps return the error, the log says so once, the trainer loop finishes,
 * and the parent still reads every step written before. */
/* Helper mode --fill-disk PATH FD: a trainer loop under a 3 MiB file size
 * limit; writes {steps written, failed steps, first error, steps finished,
 * log lines} to FD. */
static int fill_disk_main(const char *path, int fd)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = { 3 << 20, 3 << 20 };
    setrlimit(RLIMIT_FSIZE, &rl);
    resdiag_set_log_handler(capture_log, NULL);
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 1;
    resdiag_model m = test_model();
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        return 2;
    float x[T * D];
    int64_t written = 0, errors = 0, first_error = 0, finished = 0;
    for (int s = 0; s < 5000; s++) {
        fill(x, T * D, (unsigned)s);
        resdiag_status a = resdiag_step_begin(r, s);
        resdiag_status b = RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
        resdiag_status c = resdiag_step_end(r);
        if (a == RESDIAG_OK && b == RESDIAG_OK && c == RESDIAG_OK)
            written = s + 1;
        else {
            if (!first_error)
                first_error = c ? c : (b ? b : a);
            errors++;
        }
        finished = s + 1;
    }
    resdiag_destroy(r);
    int64_t msg[5] = { written, errors, first_error, finished, log_count };
    return write(fd, msg, sizeof msg) == (ssize_t)sizeof msg ? 0 : 3;
}

/* hook_threads 2, 3, 4 and the most: a large tensor is split over that
 * many threads; the file holds the same values as with one thread within
 * rounding, the same exact quantities, and the same bits every time. */
enum { HT_T = 1024, HT_D = 512 }; /* 2 MiB of f32: above the 1 MiB threshold */

static resdiag_model ht_model(void)
{
    static const char *const names[1] = { "blk" };
    static const char *const lp[1] = { "w" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 1, .cols = HT_D, .sublayers = 1,
        .sublayer_names = names, .layer_params = 1, .layer_param_names = lp });
    return m;
}

static void ht_run(const char *path, int threads, const float *x, const float *f)
{
    resdiag_model m = ht_model();
    resdiag_options o;
    resdiag_options_init(&o);
    ck_assert_int_eq(o.hook_threads, 1);
    o.hook_threads = threads;
    resdiag *r = fixture_open(path, &m, &o);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, HT_T, HT_D)), 0);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, HT_T, HT_D)), 0);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "w", resdiag_f32(f, HT_T, HT_D)), 0);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    resdiag_destroy(r);
}

typedef struct ht_read {
    double in[RESDIAG_N_FIELDS], br[RESDIAG_N_FIELDS], w[RESDIAG_N_FIELDS];
    double sk[16], upd[RESDIAG_N_UPDATE_FIELDS];
} ht_read;

static void ht_load(ht_read *h, const char *path)
{
    resdiag_reader *rd = reopen(path);
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
                                         h->in, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_BRANCH_OUT,
                                         h->br, &obs), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 0, "w", h->w, &obs), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
                                           h->sk), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_update(rd, 0, 0, 0, h->upd), RESDIAG_OK);
    resdiag_reader_destroy(rd);
}

/* One hook thread against several: the same path on the same rows (a part
 * is whole rows), so the row sums are the same; only the double combination
 * of the parts differs: REL_TOL, not a float-lane bound. */
static void ht_close(const double *a, const double *b, int n, const char *what)
{
    for (int q = 0; q < n; q++) {
        double tol = 1e-12 * (fabs(a[q]) + 1e-300);
        ck_assert_msg(fabs(a[q] - b[q]) <= tol, "%s[%d]: %.17g vs %.17g", what, q, a[q], b[q]);
    }
}

START_TEST(hook_threads_split_large_tensors_deterministically)
{
    float *x = malloc(sizeof(float) * HT_T * HT_D), *f = malloc(sizeof(float) * HT_T * HT_D);
    ck_assert(x && f);
    uint32_t z = 12345;
    for (int k = 0; k < HT_T * HT_D; k++) {
        z = z * 1664525u + 1013904223u;
        x[k] = (float)((int32_t)z >> 8) * 0x1p-22f * (1.0f + (float)(k / HT_D % 7));
        f[k] = 0.01f * x[k] + 0x1p-20f * (float)(k % 97);
    }
    x[3 * HT_D + 5] = NAN; /* a rescanned row in the first part */
    char path_c[320];
    snprintf(path_c, sizeof path_c, "%s/c.h5", tmpdir);
    ht_run(path_a, 1, x, f);
    ht_read one, two, again;
    ht_load(&one, path_a);
    static const int counts[] = { 2, 3, 4, RESDIAG_MAX_HOOK_THREADS };
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        unlink(path_b);
        ht_run(path_b, counts[c], x, f);
        ht_run(path_c, counts[c], x, f);
        ht_load(&two, path_b);
        ht_load(&again, path_c);
        unlink(path_c);
        ck_assert_mem_eq(&two, &again, sizeof two); /* deterministic */
        ht_close(one.in, two.in, RESDIAG_N_FIELDS, "STREAM_IN");
        ht_close(one.br, two.br, RESDIAG_N_FIELDS, "BRANCH_OUT");
        ht_close(one.w, two.w, RESDIAG_N_FIELDS, "param w");
        ht_close(one.upd, two.upd, RESDIAG_N_UPDATE_FIELDS, "update");
        for (int m = 0; m < 16; m++) /* sums of ~32k terms of both signs */
            ck_assert_msg(fabs(one.sk[m] - two.sk[m]) <= 1e-9 * one.in[RESDIAG_FIELD_FROB],
                          "sketch[%d]: %.17g vs %.17g", m, one.sk[m], two.sk[m]);
        static const int exact[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_COLS, RESDIAG_FIELD_ABSMAX,
                                     RESDIAG_FIELD_ABSMAX_COL, RESDIAG_FIELD_NAN_COUNT,
                                     RESDIAG_FIELD_INF_COUNT, RESDIAG_FIELD_CALL_SEQ };
        for (size_t k = 0; k < sizeof exact / sizeof exact[0]; k++) {
            ck_assert(one.in[exact[k]] == two.in[exact[k]]);
            ck_assert(one.br[exact[k]] == two.br[exact[k]]);
        }
        ck_assert(two.in[RESDIAG_FIELD_NAN_COUNT] == 1.0);
    }
    free(x);
    free(f);
}
END_TEST

START_TEST(hook_threads_out_of_range_is_refused)
{
    resdiag_model m = test_model();
    const int bad[] = { RESDIAG_MAX_HOOK_THREADS + 1, -1, INT_MAX, INT_MIN };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        resdiag_options o;
        resdiag_options_init(&o);
        o.hook_threads = bad[k];
        resdiag *r = (resdiag *)&m; /* must be set to NULL */
        ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), RESDIAG_E_INVALID);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(log_last, "hook_threads") != NULL, "log: %s", log_last);
    }
}
END_TEST

/* The threads of this process (/proc/self/task): up to cap ids into tids,
 * and the ids of those named "resdiag-split" (a pool's workers) into
 * workers (up to cap) with *n_workers such threads. Returns how many
 * threads. */
static int list_threads(long *tids, int cap, long *workers, int *n_workers)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    *n_workers = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        long tid = strtol(e->d_name, NULL, 10);
        if (n < cap)
            tids[n] = tid;
        n++;
        char path[96], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f) && strcmp(comm, "resdiag-split\n") == 0) {
            if (*n_workers < cap)
                workers[*n_workers] = tid;
            (*n_workers)++;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* The times thread tid has gone to sleep on its own (waiting for work). */
static long sleeps_of(long tid)
{
    char path[96], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* Waits (up to 5 s) until thread tid sleeps: state S in its stat line. */
static void wait_asleep(long tid)
{
    char path[96], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    for (int ms = 0; ms < 5000; ms++) {
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        const char *paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        fclose(f);
        if (paren && paren[1] == ' ' && paren[2] == 'S')
            return;
        usleep(1000);
    }
    ck_abort_msg("thread %ld never went to sleep", tid);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The signals thread tid blocks (bit n - 1: signal n). */
static unsigned long long blocked_of(long tid)
{
    char path[96], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    unsigned long long blocked = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "SigBlk:", 7) == 0)
            blocked = strtoull(line + 7, NULL, 16);
    fclose(f);
    return blocked;
}

/* The CPUs this process may run on, capped: what hook_threads 0 asks for. */
static int cpus_allowed(void)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int n = CPU_COUNT(&set);
    return n > RESDIAG_MAX_HOOK_THREADS ? RESDIAG_MAX_HOOK_THREADS : n;
}

/* A run with hook_threads `threads` starts `workers` worker threads at
 * open (signals all blocked), 100 large tensors later they are the same
 * threads and no other has appeared, each woke for them, and
 * resdiag_destroy leaves the threads of before open. */
static void check_pool_lifetime(int threads, int workers, const float *x)
{
    enum { CAP = 64, HOOKS = 100 };
    long before[CAP], now[CAP], opened[CAP], w0[CAP], w1[CAP], sleeps0[CAP];
    int nw;
    const int n0 = list_threads(before, CAP, w0, &nw);
    ck_assert_int_le(n0 + workers, CAP);
    ck_assert_int_eq(nw, 0);

    resdiag_model m = ht_model();
    resdiag_options o;
    resdiag_options_init(&o);
    o.hook_threads = threads;
    resdiag *r = NULL;
    /* opened from a thread that blocks nothing (test runners may block
     * signals), which must still block nothing afterwards */
    sigset_t none, saved, after;
    sigemptyset(&none);
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, &none, &saved), 0);
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), RESDIAG_OK);
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, &saved, &after), 0);
    for (int sig = 1; sig < SIGRTMIN; sig++)
        ck_assert_msg(!sigismember(&after, sig), "open left signal %d blocked", sig);
    ck_assert_int_eq(list_threads(opened, CAP, w0, &nw), n0 + workers);
    ck_assert_int_eq(nw, workers);
    /* all but SIGKILL and SIGSTOP (no one can block those) and glibc's own 32, 33 */
    const unsigned long long unblockable = (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)) |
                                           (3ull << 31);
    for (int i = 0; i < workers; i++) {
        wait_asleep(w0[i]); /* started, waiting for work */
        sleeps0[i] = sleeps_of(w0[i]);
        const unsigned long long blocked = blocked_of(w0[i]);
        ck_assert_msg((blocked | unblockable) == ~0ull, "worker %d blocks only %llx", i,
                      blocked);
    }

    for (int s = 0; s < HOOKS; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, HT_T, HT_D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(list_threads(now, CAP, w1, &nw), n0 + workers);
    ck_assert_int_eq(nw, workers);
    qsort(opened, (size_t)(n0 + workers), sizeof *opened, cmp_long);
    qsort(now, (size_t)(n0 + workers), sizeof *now, cmp_long);
    ck_assert_mem_eq(opened, now, (size_t)(n0 + workers) * sizeof *now);
    /* the hooks woke each of them: each went back to sleep since */
    for (int i = 0; i < workers; i++) {
        wait_asleep(w0[i]);
        ck_assert_msg(sleeps_of(w0[i]) > sleeps0[i], "worker %d never woke", i);
    }

    resdiag_destroy(r); /* joins the workers */
    unlink(path_a);
    ck_assert_int_eq(list_threads(now, CAP, w1, &nw), n0);
    ck_assert_int_eq(nw, 0);
    qsort(before, (size_t)n0, sizeof *before, cmp_long);
    qsort(now, (size_t)n0, sizeof *now, cmp_long);
    ck_assert_mem_eq(before, now, (size_t)n0 * sizeof *now);
}

static void *no_work(void *arg)
{
    return arg;
}

/* hook_threads 1 starts no thread; N >= 2 a pool of N - 1 for the run's
 * life; 0 as many as the process may run on (logged). */
START_TEST(hook_threads_keep_their_workers_from_open_to_destroy)
{
    /* a runtime may start a thread of its own at the first pthread_create
     * (ThreadSanitizer does): one started and joined first */
    pthread_t first;
    ck_assert_int_eq(pthread_create(&first, NULL, no_work, NULL), 0);
    ck_assert_int_eq(pthread_join(first, NULL), 0);
    float *x = malloc(sizeof(float) * HT_T * HT_D); /* 2 MiB: split */
    ck_assert_ptr_nonnull(x);
    for (int k = 0; k < HT_T * HT_D; k++)
        x[k] = (float)(k % 1013) * 0x1p-9f - 1.0f;
    check_pool_lifetime(1, 0, x);
    check_pool_lifetime(2, 1, x);
    check_pool_lifetime(4, 3, x);
    check_pool_lifetime(RESDIAG_MAX_HOOK_THREADS, RESDIAG_MAX_HOOK_THREADS - 1, x);
    check_pool_lifetime(0, cpus_allowed() - 1, x);
    /* and open says how many that is */
    resdiag_set_log_priority(RESDIAG_LOG_INFO);
    resdiag_model m = ht_model();
    resdiag_options o;
    resdiag_options_init(&o);
    o.hook_threads = 0;
    resdiag *r = NULL;
    log_last[0] = 0;
    ck_assert_int_eq(resdiag_open(&r, path_a, &m, &o), RESDIAG_OK);
    char want[64];
    snprintf(want, sizeof want, "hook_threads 0: %d, ", cpus_allowed());
    ck_assert_msg(strstr(log_last, want) != NULL, "log: %s", log_last);
    resdiag_destroy(r);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
    free(x);
}
END_TEST

/* In a child forked while a run has its pool of workers (the child has no
 * copy of those threads), a hook on a large tensor returns OK without
 * waiting for them (the bits are checked in test-threads.c); the parent's
 * run goes on. The child leaves the parent's file alone (_exit). */
START_TEST(hook_threads_pool_hooks_work_in_a_forked_child)
{
    float *x = malloc(sizeof(float) * HT_T * HT_D), *f = malloc(sizeof(float) * HT_T * HT_D);
    ck_assert(x && f);
    for (int k = 0; k < HT_T * HT_D; k++) {
        x[k] = (float)(k % 977) * 0x1p-8f - 2.0f;
        f[k] = 0.5f * x[k];
    }
    resdiag_model m = ht_model();
    resdiag_options o;
    resdiag_options_init(&o);
    o.hook_threads = 4;
    resdiag *r = fixture_open(path_a, &m, &o);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(20); /* a hang ends the child by SIGALRM */
        int rc = RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, HT_T, HT_D));
        ssize_t ok = write(fds[1], &rc, sizeof rc);
        _exit(ok == (ssize_t)sizeof rc ? 0 : 3);
    }
    close(fds[1]);
    int rc_child = -1, status = 0;
    ck_assert_int_eq(read(fds[0], &rc_child, sizeof rc_child), (ssize_t)sizeof rc_child);
    close(fds[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert_int_eq(rc_child, RESDIAG_OK);
    /* the parent's run goes on with its workers */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, HT_T, HT_D)),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    resdiag_destroy(r);
    free(x);
    free(f);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RD_TEST_SANITIZED 1
#endif
#endif

/* The child of the test below: with too little address space left for a
 * thread's stack, hook_threads 2 and 4 open with an INFO warning and
 * compute on one thread the bits their workers would have given, into
 * path_b and path_c. Exit 0 when so. */
static int open_without_a_thread(const float *x, const float *f, const char *path_c)
{
    resdiag_set_log_priority(RESDIAG_LOG_INFO);
    ht_run(path_b, 1, x, f); /* HDF5 and the heap warmed up */
    unlink(path_b);
    FILE *sf = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (!sf || fscanf(sf, "%ld", &pages) != 1)
        return 10;
    fclose(sf);
    /* 4 MiB: room for HDF5 to create the file, not for a thread's 8 MiB stack */
    struct rlimit lim = { .rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (4u << 20),
                          .rlim_max = RLIM_INFINITY };
    if (setrlimit(RLIMIT_AS, &lim))
        return 11;
    log_count = 0;
    ht_run(path_b, 2, x, f);
    if (!strstr(log_last, "warning: hook_threads 2: cannot start 1 of the hooks' 1 worker"))
        return 12;
    ht_run(path_c, 4, x, f);
    if (!strstr(log_last, "warning: hook_threads 4: cannot start 3 of the hooks' 3 worker"))
        return 13;
    return 0;
}

START_TEST(hook_threads_fall_back_to_one_thread_when_none_can_start)
{
#ifdef RD_TEST_SANITIZED
    return; /* the sanitizers reserve more address space than any limit leaves */
#endif
    float *x = malloc(sizeof(float) * HT_T * HT_D), *f = malloc(sizeof(float) * HT_T * HT_D);
    ck_assert(x && f);
    for (int k = 0; k < HT_T * HT_D; k++) {
        x[k] = (float)(k % 1009) * 0x1p-8f - 2.0f;
        f[k] = 0.25f * x[k] + 0x1p-12f * (float)(k % 13);
    }
    char path_c[320], path_d[320];
    snprintf(path_c, sizeof path_c, "%s/c.h5", tmpdir);
    snprintf(path_d, sizeof path_d, "%s/d.h5", tmpdir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(open_without_a_thread(x, f, path_c));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ht_run(path_a, 2, x, f); /* with their workers */
    ht_run(path_d, 4, x, f);
    ht_read with, without;
    ht_load(&with, path_a);
    ht_load(&without, path_b);
    ck_assert_mem_eq(&with, &without, sizeof with);
    ht_load(&with, path_d);
    ht_load(&without, path_c);
    ck_assert_mem_eq(&with, &without, sizeof with);
    unlink(path_c);
    unlink(path_d);
    free(x);
    free(f);
}
END_TEST

START_TEST(a_full_disk_is_reported_once_and_earlier_steps_survive)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    char fd_arg[16];
    snprintf(fd_arg, sizeof fd_arg, "%d", fds[1]);
    pid_t pid = spawn_self("--fill-disk", path_a, fd_arg);
    close(fds[1]);
    int64_t msg[5] = { 0 };
    ck_assert_int_eq(read(fds[0], msg, sizeof msg), (ssize_t)sizeof msg);
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_gt(msg[0], 1);         /* some steps were written */
    ck_assert_int_gt(msg[1], 0);         /* then the limit was hit */
    ck_assert_int_eq(msg[2], RESDIAG_E_NOSPACE);
    ck_assert_int_eq(msg[3], 5000);      /* the loop went on to the end */
    ck_assert_int_eq(msg[4], 1);         /* said once */
    resdiag_reader *rd = reopen(path_a);
    ck_assert_int_ge(resdiag_reader_info(rd)->n_steps, msg[0]);
    int64_t n = msg[0];
    int64_t *steps = malloc((size_t)n * sizeof *steps);
    ck_assert_int_eq(resdiag_reader_steps(rd, steps, n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_int_eq(steps[i], i);
        double f[RESDIAG_N_FIELDS];
        float x[T * D];
        fill(x, T * D, (unsigned)i);
        ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT,
                                             f, NULL), RESDIAG_OK);
        /* the default file (schema 2) keeps it as a float32: half an ulp,
         * on top of the kernel's bound for the norm */
        double ref = (double)ref_frob(x, T, D);
        ck_assert_double_eq_tol(f[RESDIAG_FIELD_FROB], ref, ref * 0x1p-24 + FROB_TOL(ref));
    }
    free(steps);
    resdiag_reader_destroy(rd);
}
END_TEST

/* ---------------------------------------------------------------- main */

/* The child modes the tests run this program in; else where it is. */
static int child_mode_or_self_path(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--count-steps") == 0)
        return count_steps_main(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--fill-disk") == 0)
        return fill_disk_main(argv[2], atoi(argv[3]));
    return realpath(argv[0], self_path) ? CHECK_GO_ON : EXIT_FAILURE;
}

static const check_program program = {
    .name = "api",
    .start = child_mode_or_self_path,
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("api", 60, setup, teardown),
               CHECK_TEST(version_of_library_matches_header),
               CHECK_TEST(strerror_names_every_status_distinctly),
               CHECK_TEST(null_handle_makes_every_call_a_no_op),
               CHECK_LOOP(open_rejects_bad_model_or_options, 0, (int)(sizeof bad_opens / sizeof bad_opens[0])),
               CHECK_TEST(open_rejects_null_arguments),
               CHECK_TEST(open_reports_a_path_that_cannot_be_created),
               CHECK_TEST(open_uses_the_handler_named_in_options),
               CHECK_TEST(open_accepts_roles_that_name_declared_parameters),
               CHECK_TEST(open_accepts_a_model_of_a_header_without_roles),
               CHECK_TEST(the_0_1_0_names_of_destroy_still_free),
               CHECK_LOOP(hooks_reject_bad_calls_and_the_run_goes_on, 0, (int)(sizeof bad_hooks / sizeof bad_hooks[0])),
               CHECK_TEST(shard_width_is_accepted_only_when_declared),
               CHECK_TEST(param_grad_rejects_unknown_names_and_layers),
               CHECK_TEST(calls_out_of_order_are_refused),
               CHECK_TEST(hooks_outside_a_step_are_a_quiet_no_op),
               CHECK_TEST(client_bugs_from_hooks_name_the_callers_file_and_line),
               CHECK_TEST(sites_of_schema_3_need_a_file_of_schema_3),
               CHECK_TEST(client_bug_messages_are_rate_limited),
               CHECK_TEST(record_every_and_range_select_steps),
               CHECK_TEST(record_init_only_keeps_the_first_step),
               CHECK_TEST(disabled_steps_record_nothing),
               CHECK_TEST(file_holds_statistics_ratios_order_and_callsites),
               CHECK_TEST(model_description_and_metadata_reach_the_file),
               CHECK_TEST(run_kind_reaches_the_file_and_old_files_read_as_training),
               CHECK_TEST(step_metrics_reach_the_file_as_given),
               CHECK_TEST(runs_without_metrics_have_none),
               CHECK_TEST(metric_names_without_the_table_read_as_nan),
               CHECK_TEST(steps_reach_the_file_in_batches_and_on_flush),
               CHECK_TEST(concurrent_hooks_on_different_layers_match_a_sequential_run),
               CHECK_TEST(hook_threads_split_large_tensors_deterministically),
               CHECK_TEST(hook_threads_out_of_range_is_refused),
               CHECK_TEST(hook_threads_keep_their_workers_from_open_to_destroy),
               CHECK_TEST(hook_threads_pool_hooks_work_in_a_forked_child),
               CHECK_TEST(hook_threads_fall_back_to_one_thread_when_none_can_start),
               CHECK_TEST(empty_tensors_are_observed_with_zero_rows),
               CHECK_TEST(a_full_disk_is_reported_once_and_earlier_steps_survive))
