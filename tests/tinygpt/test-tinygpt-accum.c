/*
 * test-tinygpt-accum.c - tinygpt (argv[1]) with gradient accumulation: a
 * step of --grad-accum 2 or 4 calls every hook once per micro-batch, and
 * the merged statistics of its step 0 equal those of one batch of the same
 * sequences (--grad-accum 1) in every field of every dataset, to rounding,
 * with the number of calls recorded; the placement verdict is the same
 * (and right for pre, post and sandwich), for every placement and both
 * norms; and the training is the same (the losses of the next steps agree).
 */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "resdiag.h"
#include "run-files.h"

extern char **environ;

static const char *tinygpt; /* argv[1] */

/* tinygpt with the NULL-terminated arguments, stdout to out_name, stderr
 * to /dev/null; returns its exit status. */
static int run(const char *out_name, ...)
{
    const char *argv[64];
    int argc = 0;
    argv[argc++] = tinygpt;
    va_list ap;
    va_start(ap, out_name);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 63)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, run_path(out_name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, tinygpt, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "cannot run %s", tinygpt);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int losses(const char *path, double *out, int max)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int n = 0, step;
    double loss;
    while (fgets(line, sizeof line, f) && n < max)
        if (sscanf(line, "step %d loss %lf", &step, &loss) == 2)
            out[n++] = loss;
    fclose(f);
    return n;
}

/* One run: L = 3, d_model 32, 8 sequences of 16 tokens per step. */
static void train(const char *placement, const char *norm, int accum, const char *file,
                  const char *out)
{
    char a[16];
    snprintf(a, sizeof a, "%d", accum);
    unlink(run_path(file));
    ck_assert_int_eq(run(out, "--placement", placement, "--norm", norm, "--layers", "3",
                         "--d-model", "32", "--heads", "2", "--seq", "16", "--batch", "8",
                         "--vocab", "32", "--steps", "3", "--log-every", "1", "--threads", "1",
                         "--grad-accum", a, "--out", run_path(file), (char *)NULL),
                     0);
}

static resdiag_reader *open_reader(const char *path)
{
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "reader_open %s: %s", path, resdiag_strerror(st));
    return rd;
}

static double *read_step0(resdiag_reader *rd, const char *name, size_t *len, int64_t *last)
{
    int64_t dims[8];
    int rank = 0;
    ck_assert_int_eq(resdiag_reader_dims(rd, name, dims, 8, &rank), RESDIAG_OK);
    size_t n = 1;
    for (int k = 1; k < rank; k++)
        n *= (size_t)dims[k];
    *last = rank > 1 ? dims[rank - 1] : 1;
    double *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(resdiag_reader_read(rd, name, 0, 1, v, n), RESDIAG_OK);
    *len = n;
    return v;
}

static int ends_with(const char *s, const char *end)
{
    size_t a = strlen(s), b = strlen(end);
    return a >= b && strcmp(s + a - b, end) == 0;
}

/* Two values of one row agree to rounding: relatively, or next to the
 * row's own scale (a mean over tokens of a normalized stream is ~0; its
 * rounding is that of the values it sums). tinygpt computes each token's
 * rows the same way in a micro-batch as in the batch, and adds up the
 * parameter gradients over the tokens in the same order, so what is left
 * is the double rounding of merging the calls' statistics (~1e-16). */
static int agree(double a, double b, double scale)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-9 * scale;
}

/* Whether sites j and k of one row of a site_alias table (a sublayer's
 * sites, each the index of the site it was recorded from, or NaN for none)
 * hold one tensor: joined through the recorded pairs. */
static int one_tensor(const double *row, int64_t n, int64_t j, int64_t k)
{
    int64_t group[64];
    ck_assert_int_le(n, 64);
    for (int64_t i = 0; i < n; i++)
        group[i] = i;
    for (int changed = 1; changed;) { /* the smallest index reachable through a pair */
        changed = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isnan(row[i]))
                continue;
            int64_t o = (int64_t)row[i];
            ck_assert(o >= 0 && o < n);
            int64_t g = group[i] < group[o] ? group[i] : group[o];
            if (group[i] != g || group[o] != g) {
                group[i] = group[o] = g;
                changed = 1;
            }
        }
    }
    return group[j] == group[k];
}

/* Step 0 of the accumulated run b equals that of the one-batch run a in
 * every dataset; the call counts are accum where a site is called per
 * micro-batch, 1 for the parameter gradients (called once, on the sums). */
static void assert_same_step0(const char *pa, const char *pb, int accum)
{
    resdiag_reader *a = open_reader(pa), *b = open_reader(pb);
    int n = resdiag_reader_n_datasets(a);
    ck_assert_int_eq(n, resdiag_reader_n_datasets(b));
    int tables = 0, calls_tables = 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        ck_assert_str_eq(name, resdiag_reader_dataset_name(b, i));
        if (strcmp(name, "steps") == 0 || strcmp(name, "step_time") == 0)
            continue;
        size_t la, lb;
        int64_t row, row_b;
        double *va = read_step0(a, name, &la, &row), *vb = read_step0(b, name, &lb, &row_b);
        ck_assert_uint_eq(la, lb);
        if (ends_with(name, "_calls")) {
            int params = strstr(name, "param") != NULL;
            for (size_t k = 0; k < la; k++) {
                ck_assert_msg(isnan(va[k]) == isnan(vb[k]), "%s[%zu]: observed differs", name,
                              k);
                if (isnan(va[k]))
                    continue;
                ck_assert_msg(va[k] == 1, "%s[%zu]: one batch made %g calls", name, k, va[k]);
                ck_assert_msg(vb[k] == (params ? 1 : accum), "%s[%zu]: %g calls with %d "
                              "micro-batches", name, k, vb[k], accum);
            }
            calls_tables++;
            free(va);
            free(vb);
            continue;
        }
        /* Which sites hold one tensor, not which of a pair names the other:
         * with micro-batches the first site's second call is recorded as a
         * copy with its partner already there, and names it. */
        if (ends_with(name, "site_alias")) {
            for (size_t r0 = 0; r0 < la; r0 += (size_t)row)
                for (int64_t j = 0; j < row; j++)
                    for (int64_t k = j + 1; k < row; k++)
                        ck_assert_msg(one_tensor(va + r0, row, j, k) ==
                                          one_tensor(vb + r0, row, j, k),
                                      "%s: row %zu: sites %lld and %lld one tensor: %d with "
                                      "one batch, %d with %d micro-batches", name,
                                      r0 / (size_t)row, (long long)j, (long long)k,
                                      one_tensor(va + r0, row, j, k),
                                      one_tensor(vb + r0, row, j, k), accum);
            tables++;
            free(va);
            free(vb);
            continue;
        }
        int stats = ends_with(name, "_stats");
        for (size_t r0 = 0; r0 < la; r0 += (size_t)row) {
            /* the row's scale: its largest |value| (stats: absmax) */
            double scale = 0;
            if (stats) {
                scale = va[r0 + RESDIAG_FIELD_ABSMAX];
            } else {
                for (int64_t k = 0; k < row; k++)
                    if (isfinite(va[r0 + (size_t)k]))
                        scale = fmax(scale, fabs(va[r0 + (size_t)k]));
            }
            for (int64_t k = 0; k < row; k++) {
                /* the order of the calls is no statistic: accumulation changes it */
                if (stats && k == RESDIAG_FIELD_CALL_SEQ)
                    continue;
                double x = va[r0 + (size_t)k], y = vb[r0 + (size_t)k];
                ck_assert_msg(agree(x, y, scale), "%s: row %zu column %lld: one batch %.9g, %d "
                              "micro-batches %.9g", name, r0 / (size_t)row, (long long)k, x,
                              accum, y);
                if (isfinite(x) && x != y)
                    worst = fmax(worst, fabs(x - y) / fmax(fabs(x), scale));
            }
        }
        tables++;
        free(va);
        free(vb);
    }
    ck_assert_int_ge(tables, 10);
    ck_assert_int_ge(calls_tables, 5);
    fprintf(stderr, "%s vs %s: %d tables equal to %.3g\n", pa, pb, tables, worst);

    /* the same verdict, of the model and of every sublayer */
    resdiag_analysis *xa = NULL, *xb = NULL;
    ck_assert_int_eq(resdiag_analyze(a, NULL, &xa), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analyze(b, NULL, &xb), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analysis_verdict(xa), resdiag_analysis_verdict(xb));
    ck_assert_int_eq(resdiag_analysis_confidence(xa), resdiag_analysis_confidence(xb));
    ck_assert_int_eq(resdiag_analysis_final_norm(xa), resdiag_analysis_final_norm(xb));
    for (int l = 0; l < 3; l++)
        for (int s = 0; s < 2; s++)
            ck_assert_int_eq(resdiag_analysis_sublayer(xa, l, s, NULL),
                             resdiag_analysis_sublayer(xb, l, s, NULL));
    resdiag_analysis_destroy(xa);
    resdiag_analysis_destroy(xb);
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
}

/* One batch, then 2 and 4 micro-batches, of one model; want: the verdict
 * of the one-batch run, or -1 to require only that all three agree. */
static void one_placement(const char *placement, const char *norm, int want)
{
    char f1[64], o1[64];
    snprintf(f1, sizeof f1, "%s-%s-1.h5", placement, norm);
    snprintf(o1, sizeof o1, "%s-%s-1.out", placement, norm);
    train(placement, norm, 1, f1, o1);
    double l1[8], lk[8];
    ck_assert_int_eq(losses(run_path(o1), l1, 8), 3);
    if (want >= 0) {
        resdiag_reader *rd = open_reader(run_path(f1));
        resdiag_analysis *x = NULL;
        ck_assert_int_eq(resdiag_analyze(rd, NULL, &x), RESDIAG_OK);
        ck_assert_msg(resdiag_analysis_verdict(x) == (resdiag_verdict)want, "%s %s: verdict %s",
                      placement, norm, resdiag_verdict_name(resdiag_analysis_verdict(x)));
        resdiag_analysis_destroy(x);
        resdiag_reader_destroy(rd);
    }
    for (int accum = 2; accum <= 4; accum *= 2) {
        char fk[64], ok[64];
        snprintf(fk, sizeof fk, "%s-%s-%d.h5", placement, norm, accum);
        snprintf(ok, sizeof ok, "%s-%s-%d.out", placement, norm, accum);
        train(placement, norm, accum, fk, ok);
        assert_same_step0(run_path(f1), run_path(fk), accum);
        /* the same training: the gradients of a step add up to the batch's */
        ck_assert_int_eq(losses(run_path(ok), lk, 8), 3);
        for (int s = 0; s < 3; s++)
            ck_assert_msg(fabs(lk[s] - l1[s]) <= 2e-6, "%s %s: step %d loss %.6f with %d "
                          "micro-batches, %.6f with one batch", placement, norm, s, lk[s],
                          accum, l1[s]);
        unlink(run_path(fk));
        unlink(run_path(ok));
    }
    unlink(run_path(f1));
    unlink(run_path(o1));
}

START_TEST(micro_batches_merge_into_the_batch)
{
    one_placement("pre", "layernorm", RESDIAG_VERDICT_PRE);
    one_placement("post", "layernorm", RESDIAG_VERDICT_POST);
    one_placement("sandwich", "layernorm", RESDIAG_VERDICT_SANDWICH);
}
END_TEST

/* Every other placement and RMSNorm: the accumulated runs hold the same
 * data and get the same verdict as one batch, whatever that is. */
START_TEST(every_placement_gets_the_one_batch_verdict)
{
    static const char *const placements[] = { "pre", "post", "sandwich", "deepnorm",
                                              "mix:1", "parallel", "none", "reordered",
                                              "hybrid" };
    for (size_t i = 0; i < sizeof placements / sizeof *placements; i++) {
        if (i >= 3)
            one_placement(placements[i], "layernorm", -1);
        one_placement(placements[i], "rmsnorm", -1);
    }
}
END_TEST

/* --grad-accum must divide the batch; a bad value is a usage error. */
START_TEST(grad_accum_must_divide_the_batch)
{
    ck_assert_int_eq(run("bad.out", "--batch", "6", "--grad-accum", "4", "--steps", "1",
                         "--record", "off", (char *)NULL), 2);
    ck_assert_int_eq(run("bad.out", "--grad-accum", "0", "--steps", "1", "--record", "off",
                         (char *)NULL), 2);
    unlink(run_path("bad.out"));
}
END_TEST

static int take_tinygpt(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-tinygpt-accum TINYGPT\n");
        return 2;
    }
    tinygpt = argv[1];
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "tinygpt-accum",
    .timeout = 240,
    .scratch = dir,
    .scratch_size = sizeof dir,
    .start = take_tinygpt,
};
CHECK_MAIN(&program,
           CHECK_TEST(micro_batches_merge_into_the_batch),
           CHECK_TEST(every_placement_gets_the_one_batch_verdict),
           CHECK_TEST(grad_accum_must_divide_the_batch))
