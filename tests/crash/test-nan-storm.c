/*
 * test-nan-storm.c - a run whose tensors turn NaN from step K on at one
 * layer: `resdiag report` (text and --json) and the analysis API name the
 * first (step, layer, sublayer, site, direction) and give the counts after,
 * and every statistic of the finite steps before K is bit-identical to the
 * same run without the NaN.
 *
 *   test-nan-storm RESDIAG
 *
 * The run (public API only): L = 4 layers of attn + mlp, d = 32, 16 tokens,
 * 20 steps, every block site forward in call order, the embedding, final
 * norm and logits, then the backward sites in reverse. From step K = 8 on,
 * layer 2's mlp branch output holds 3 + (step - K) NaNs; everything the
 * forward pass computes after it in that step is all NaN, and so is every
 * backward tensor (as a real NaN would spread), and the logits also hold
 * +Inf. The expected counts are counted here from the tensors passed in.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"

enum { L = 4, S = 2, D = 32, T = 16, V = 24, STEPS = 20, K = 8, BAD_LAYER = 2, BAD_SUB = 1 };

static const char *tool;
static char g_dir[256];

/* What the storm run passed in, counted by the test. */
static double g_nan_total, g_inf_total, g_first_nan;
static int g_steps_affected;

static uint64_t g_rng;

static double unif(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (double)((g_rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}

/* A tensor for (step, dir, layer, sub, site), the same in both runs up to
 * the storm: its own seed, so the NaNs change no other tensor's values. */
static void fill(float *x, int cols, int64_t step, int dir, int layer, int sub, int site)
{
    g_rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)step << 40) ^ ((uint64_t)dir << 36) ^
            ((uint64_t)(layer + 1) << 24) ^ ((uint64_t)sub << 16) ^ (uint64_t)site;
    for (int k = 0; k < 4; k++)
        unif();
    double gain = 1.0 + 0.25 * layer + 0.01 * (double)step;
    for (int i = 0; i < T * cols; i++)
        x[i] = (float)(gain * (2.0 * unif() - 1.0));
}

/* Where the storm has reached: 0 clean, 1 the first bad tensor (a few NaN),
 * 2 everything after it (all NaN). */
static int storm_state(int storm, int64_t step, int dir, int layer, int sub, int site)
{
    if (!storm || step < K)
        return 0;
    if (dir == RESDIAG_BACKWARD)
        return 2;
    if (layer == BAD_LAYER && sub == BAD_SUB && site == RESDIAG_BRANCH_OUT)
        return 1;
    if (layer == RESDIAG_MODEL_LEVEL)
        return site == RESDIAG_EMBED_OUT ? 0 : 2;
    int pos = (layer * S + sub) * RESDIAG_N_BLOCK_SITES + site;
    int bad = (BAD_LAYER * S + BAD_SUB) * RESDIAG_N_BLOCK_SITES + RESDIAG_BRANCH_OUT;
    return pos > bad ? 2 : 0;
}

static void observe(resdiag *r, int storm, int64_t step, int dir, int layer, int sub, int site)
{
    int cols = site == RESDIAG_LOGITS ? V : D;
    static float x[T * V > T * D ? T * V : T * D];
    fill(x, cols, step, dir, layer, sub, site);
    int state = storm_state(storm, step, dir, layer, sub, site);
    double nan = 0, inf = 0;
    if (state == 1) {
        for (int i = 0; i < 3 + (int)(step - K); i++)
            x[(i * 37) % (T * cols)] = NAN;
    } else if (state == 2) {
        for (int i = 0; i < T * cols; i++)
            x[i] = NAN;
        if (site == RESDIAG_LOGITS && dir == RESDIAG_FORWARD)
            for (int i = 0; i < T * cols; i += 5)
                x[i] = INFINITY;
    }
    for (int i = 0; i < T * cols; i++) {
        nan += isnan(x[i]);
        inf += isinf(x[i]);
    }
    if (state == 1 && step == K)
        g_first_nan = nan;
    g_nan_total += nan;
    g_inf_total += inf;
    ck_assert_int_eq(resdiag_observe_at(r, (resdiag_direction)dir, layer, sub,
                                        (resdiag_site)site, resdiag_f32(x, T, cols),
                                        "nan-storm.c", 1),
                     RESDIAG_OK);
}

static void write_run(const char *path, int storm)
{
    static const char *const sub[] = { "attn", "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub });
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    resdiag *r = fixture_open(path, &m, NULL);
    g_nan_total = g_inf_total = 0;
    for (int64_t s = 0; s < STEPS; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        observe(r, storm, s, RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_EMBED_OUT);
        for (int l = 0; l < L; l++)
            for (int k = 0; k < S; k++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++)
                    observe(r, storm, s, RESDIAG_FORWARD, l, k, site);
        observe(r, storm, s, RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_FINAL_NORM_IN);
        observe(r, storm, s, RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_FINAL_NORM_OUT);
        observe(r, storm, s, RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_LOGITS);
        for (int l = L - 1; l >= 0; l--)
            for (int k = S - 1; k >= 0; k--)
                for (int site = RESDIAG_N_BLOCK_SITES - 1; site >= 0; site--)
                    observe(r, storm, s, RESDIAG_BACKWARD, l, k, site);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    if (storm)
        g_steps_affected = STEPS - K;
}

/* `resdiag report [--json] FILE`: stdout, or NULL unless it exits 0. */
static char *tool_report(const char *file, int json)
{
    char out[400];
    snprintf(out, sizeof out, "%s/report.out", g_dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout))
            _exit(126);
        if (json)
            execl(tool, tool, "report", "--json", file, (char *)NULL);
        else
            execl(tool, tool, "report", file, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return NULL;
    FILE *f = fopen(out, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    if (buf && fread(buf, 1, (1 << 20) - 1, f) == 0)
        buf[0] = 0;
    fclose(f);
    unlink(out);
    return buf;
}

START_TEST(the_report_names_the_first_nan_and_the_steps_before_are_untouched)
{
    char clean[400], storm[400];
    snprintf(clean, sizeof clean, "%s/clean.h5", g_dir);
    snprintf(storm, sizeof storm, "%s/storm.h5", g_dir);
    write_run(clean, 0);
    ck_assert_double_eq(g_nan_total, 0);
    write_run(storm, 1);
    ck_assert_double_gt(g_nan_total, 0);

    /* the analysis API */
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, storm), RESDIAG_OK);
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    int64_t step = -1;
    int layer = -9, sub = -9, site = -9;
    resdiag_direction dir = RESDIAG_BACKWARD;
    ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, &layer, &sub, &site, &dir), 1);
    ck_assert_int_eq(step, K);
    ck_assert_int_eq(layer, BAD_LAYER);
    ck_assert_int_eq(sub, BAD_SUB);
    ck_assert_int_eq(site, RESDIAG_BRANCH_OUT);
    ck_assert_int_eq(dir, RESDIAG_FORWARD);
    resdiag_analysis_destroy(a);

    /* the tool, text: the sentence with the counts counted here */
    char want[512];
    snprintf(want, sizeof want,
             "Non-finite values: first at step %d, layer %d mlp branch_out, forward (%.0f NaN, "
             "0 Inf there); %d of %d steps affected, %.0f NaN and %.0f Inf in all",
             K, BAD_LAYER, g_first_nan, g_steps_affected, STEPS, g_nan_total, g_inf_total);
    char *text = tool_report(storm, 0);
    ck_assert_msg(text != NULL, "resdiag report did not exit 0");
    ck_assert_msg(strstr(text, want), "text report lacks\n  %s\n%s", want, text);
    free(text);
    /* ... and JSON */
    snprintf(want, sizeof want,
             "\"nonfinite\": {\"step\": %d, \"layer\": %d, \"sublayer\": \"mlp\", \"site\": "
             "\"branch_out\", \"param\": null, \"direction\": \"forward\", \"nan\": %.0f, "
             "\"inf\": 0, \"steps_affected\": %d, \"nan_total\": %.0f, \"inf_total\": %.0f, "
             "\"step_aborted\": false}",
             K, BAD_LAYER, g_first_nan, g_steps_affected, g_nan_total, g_inf_total);
    char *json = tool_report(storm, 1);
    ck_assert_msg(json != NULL, "resdiag report --json did not exit 0");
    ck_assert_msg(strstr(json, want), "JSON report lacks\n  %s\n%s", want, json);
    free(json);
    /* the clean run: none */
    text = tool_report(clean, 0);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "Non-finite values: none in 20 recorded step(s)."));
    free(text);

    /* steps 0..K-1 of every dataset but the wall-clock times: the same bits */
    resdiag_reader *rc = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rc, clean), RESDIAG_OK);
    int n = resdiag_reader_n_datasets(rd);
    ck_assert_int_eq(n, resdiag_reader_n_datasets(rc));
    int compared = 0;
    size_t values = 0;
    for (int i = 0; i < n; i++) {
        const char *name = resdiag_reader_dataset_name(rd, i);
        ck_assert_str_eq(name, resdiag_reader_dataset_name(rc, i));
        if (strcmp(name, "step_time") == 0)
            continue;
        int64_t dims[8];
        int rank = 0;
        if (resdiag_reader_dims(rd, name, dims, 8, &rank) != RESDIAG_OK || rank < 1 ||
            dims[0] != STEPS)
            continue; /* not a time series */
        size_t per = 1;
        for (int k = 1; k < rank; k++)
            per *= (size_t)dims[k];
        size_t len = per * K;
        double *a1 = malloc(len * sizeof *a1), *a2 = malloc(len * sizeof *a2);
        ck_assert(a1 && a2);
        ck_assert_int_eq(resdiag_reader_read(rd, name, 0, K, a1, len), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_read(rc, name, 0, K, a2, len), RESDIAG_OK);
        ck_assert_msg(memcmp(a1, a2, len * sizeof *a1) == 0,
                      "%s differs in the steps before the storm", name);
        /* and from step K on the storm did change something */
        if (strstr(name, "site_stats")) {
            ck_assert_int_eq(resdiag_reader_read(rd, name, K, 1, a1, per), RESDIAG_OK);
            ck_assert_int_eq(resdiag_reader_read(rc, name, K, 1, a2, per), RESDIAG_OK);
            ck_assert_msg(memcmp(a1, a2, per * sizeof *a1) != 0, "%s: step %d unchanged",
                          name, K);
        }
        free(a1);
        free(a2);
        compared++;
        values += len;
    }
    ck_assert_int_ge(compared, 4);
    fprintf(stderr, "nan storm: first NaN at step %d layer %d mlp branch_out forward (%.0f); "
            "%d steps affected, %.0f NaN, %.0f Inf; %d datasets x %d steps (%zu values) "
            "bit-identical before\n", K, BAD_LAYER, g_first_nan, g_steps_affected, g_nan_total,
            g_inf_total, compared, K, values);
    resdiag_reader_destroy(rc);
    resdiag_reader_destroy(rd);
    unlink(clean);
    unlink(storm);
}
END_TEST

static int take_tool(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s RESDIAG\n", argv[0]);
        return 2;
    }
    tool = argv[1];
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "nan-storm",
    .timeout = 60,
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .start = take_tool,
};
CHECK_MAIN(&program,
           CHECK_TEST(the_report_names_the_first_nan_and_the_steps_before_are_untouched))
