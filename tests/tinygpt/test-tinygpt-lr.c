/*
 * test-tinygpt-lr.c - tinygpt's learning-rate schedule (argv[1] = the
 * binary): --warmup N's rate at every step, read back from the run file's
 * metric "lr", equals the linear warm-up computed here; --warmup 0 (and no
 * flag) keeps the constant rate and the losses of a run without the flag;
 * AdamW trains with the scheduled rate (equal rates give equal losses bit
 * for bit, a long warm-up slows the fall of the loss); bad values exit 2.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "crash-util.h"
#include "resdiag.h"

static const char *tinygpt; /* argv[1] */

/* A model small enough for a second per run. */
#define SMALL "--layers", "2", "--d-model", "32", "--heads", "2", "--seq", "16", "--batch", \
              "4", "--threads", "1", "--log-every", "1"

/* tinygpt with the NULL-terminated arguments, stdout to out, stderr to
 * err (in the scratch directory); returns the exit status, -1 if killed. */
static int run(const char *out, const char *err, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)tinygpt;
    va_list ap;
    va_start(ap, err);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 63) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    cu_child c = { cu_path("%s", out), cu_path("%s", err), -1 };
    int status = cu_wait(cu_spawn(&c, argv));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The losses of the "step N loss X" lines of a stdout, in step order, as
 * printed (%.6f); returns how many. */
static int printed_losses(const char *out, double *loss, int max)
{
    char *text = cu_slurp(cu_path("%s", out));
    int n = 0, step;
    double v;
    for (const char *line = text; line && *line && n < max; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        if (sscanf(line, "step %d loss %lf", &step, &v) == 2) {
            ck_assert_int_eq(step, n);
            loss[n++] = v;
        }
    }
    free(text);
    return n;
}

/* The metric `name` at every recorded step of a run file: the steps into
 * step[], the values into value[]; returns how many (at most max). */
static int read_metric(const char *file, const char *name, int64_t *step, double *value,
                       int max)
{
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, cu_path("%s", file));
    ck_assert_msg(st == RESDIAG_OK, "open %s: %s", file, resdiag_strerror(st));
    const resdiag_run_info *info = resdiag_reader_info(rd);
    int m = -1;
    for (int i = 0; i < info->n_metrics; i++)
        if (strcmp(info->metric_names[i], name) == 0) m = i;
    ck_assert_msg(m >= 0, "%s declares no metric '%s'", file, name);
    int n = (int)info->n_steps;
    ck_assert_int_le(n, max);
    ck_assert_int_eq(resdiag_reader_steps(rd, step, n), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_metric(rd, m, 0, n, value), RESDIAG_OK);
    resdiag_reader_destroy(rd);
    return n;
}

/* The rate of a linear warm-up over `warmup` steps to `peak`, as the help
 * text states it, X * min(1, (s + 1) / N): peak (s+1)/N while s < N. */
static double warmup_rate(double peak, int warmup, int64_t s)
{
    return s < warmup ? peak * (double)(s + 1) / warmup : peak;
}

/* The file keeps float64: the rate to its last bits or so. */
static void assert_rate(double got, double want, int64_t step)
{
    ck_assert_msg(fabs(got - want) <= 1e-15 * want, "step %lld: lr %.17g, want %.17g",
                  (long long)step, got, want);
}

START_TEST(warmup_5_rates_follow_the_formula)
{
    ck_assert_int_eq(run("wu.out", "wu.err", SMALL, "--steps", "12", "--warmup", "5", "--lr",
                         "0.01", "--record", "stream", "--out", cu_path("wu.h5"), NULL), 0);
    int64_t step[32];
    double lr[32];
    int n = read_metric("wu.h5", "lr", step, lr, 32);
    ck_assert_int_eq(n, 12);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(step[i], i);
        ck_assert_msg(resdiag_metric_given(lr[i]), "step %d: lr not given", i);
        assert_rate(lr[i], warmup_rate(0.01, 5, step[i]), step[i]);
    }
    /* it rises to the peak and stays: 0.002 at step 0, 0.01 from step 4 */
    ck_assert_double_lt(lr[0], lr[3]);
    ck_assert_double_eq_tol(lr[0], 0.002, 1e-15);
    ck_assert_double_eq(lr[4], lr[11]);
    /* every 3rd step recorded: the rates of those steps, not of the records */
    ck_assert_int_eq(run("wu3.out", "wu3.err", SMALL, "--steps", "12", "--warmup", "5", "--lr",
                         "0.01", "--record", "stream", "--record-every", "3", "--out",
                         cu_path("wu3.h5"), NULL), 0);
    n = read_metric("wu3.h5", "lr", step, lr, 32);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(step[i], 3 * i);
        assert_rate(lr[i], warmup_rate(0.01, 5, step[i]), step[i]);
    }
}
END_TEST

/* --warmup 0 is the constant rate: the default --lr at every step, and
 * the very losses of a run without the flag. */
START_TEST(warmup_0_is_the_constant_rate)
{
    ck_assert_int_eq(run("c0.out", "c0.err", SMALL, "--steps", "8", "--warmup", "0",
                         "--record", "stream", "--out", cu_path("c0.h5"), NULL), 0);
    ck_assert_int_eq(run("none.out", "none.err", SMALL, "--steps", "8", "--record", "stream",
                         "--out", cu_path("none.h5"), NULL), 0);
    int64_t step[16];
    double lr[16];
    for (int k = 0; k < 2; k++) {
        int n = read_metric(k ? "none.h5" : "c0.h5", "lr", step, lr, 16);
        ck_assert_int_eq(n, 8);
        for (int i = 0; i < n; i++) ck_assert_double_eq(lr[i], 0.001);
    }
    double a[16], b[16];
    ck_assert_int_eq(printed_losses("c0.out", a, 16), 8);
    ck_assert_int_eq(printed_losses("none.out", b, 16), 8);
    for (int i = 0; i < 8; i++) ck_assert_double_eq(a[i], b[i]);
}
END_TEST

/* The optimizer takes the scheduled rate. --warmup 2 --lr 0.02 and
 * --warmup 4 --lr 0.04 both update with 0.01 after step 0 and 0.02 after
 * step 1, then 0.02 against 0.03: the losses of steps 0..2 agree bit for
 * bit and step 3's differs. A rate that only went to the file would give
 * 0.02 against 0.04 from the first update on. */
START_TEST(adamw_updates_with_the_scheduled_rate)
{
    ck_assert_int_eq(run("w2.out", "w2.err", SMALL, "--steps", "5", "--warmup", "2", "--lr",
                         "0.02", "--record", "off", NULL), 0);
    ck_assert_int_eq(run("w4.out", "w4.err", SMALL, "--steps", "5", "--warmup", "4", "--lr",
                         "0.04", "--record", "off", NULL), 0);
    double a[8], b[8];
    ck_assert_int_eq(printed_losses("w2.out", a, 8), 5);
    ck_assert_int_eq(printed_losses("w4.out", b, 8), 5);
    for (int i = 0; i < 3; i++) ck_assert_msg(a[i] == b[i], "step %d: %g != %g", i, a[i], b[i]);
    ck_assert_msg(a[3] != b[3] && a[4] != b[4], "steps 3, 4 agree: %g %g", a[3], a[4]);
}
END_TEST

/* A warm-up far longer than the run keeps the rate near 0: the loss falls
 * much less than with the full rate from the start (same data, same init). */
START_TEST(long_warmup_slows_the_loss)
{
    ck_assert_int_eq(run("full.out", "full.err", SMALL, "--steps", "30", "--lr", "0.01",
                         "--record", "off", NULL), 0);
    ck_assert_int_eq(run("slow.out", "slow.err", SMALL, "--steps", "30", "--lr", "0.01",
                         "--warmup", "100000", "--record", "off", NULL), 0);
    double full[32], slow[32];
    ck_assert_int_eq(printed_losses("full.out", full, 32), 30);
    ck_assert_int_eq(printed_losses("slow.out", slow, 32), 30);
    ck_assert_double_eq(full[0], slow[0]); /* the same model at step 0 */
    double fell_full = full[0] - (full[27] + full[28] + full[29]) / 3;
    double fell_slow = slow[0] - (slow[27] + slow[28] + slow[29]) / 3;
    ck_assert_msg(fell_full > 0.5, "the full rate's loss fell only %g", fell_full);
    ck_assert_msg(fabs(fell_slow) < 0.2 * fell_full, "the warm-up's loss fell %g, the full "
                  "rate's %g", fell_slow, fell_full);
}
END_TEST

START_TEST(bad_warmup_exits_2)
{
    static const char *const bad[] = { "-1", "x", "1.5", "", "99999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--warmup=%s", bad[i]);
        int rc = run("bad.out", "bad.err", flag, "--record", "off", NULL);
        char *err = cu_slurp(cu_path("bad.err"));
        ck_assert_msg(rc == 2, "%s: exit %d", flag, rc);
        ck_assert_msg(strstr(err, "tinygpt: --warmup: expected an integer") == err, "%s: '%s'",
                      flag, err);
        ck_assert_msg(strstr(err, "--help") != NULL, "%s: '%s'", flag, err);
        free(err);
    }
    ck_assert_int_eq(run("bad.out", "bad.err", "--record", "off", "--warmup", NULL), 2);
    ck_assert_int_eq(run("help.out", "help.err", "--help", NULL), 0);
    char *help = cu_slurp(cu_path("help.out"));
    ck_assert_ptr_nonnull(strstr(help, "--warmup N"));
    ck_assert_ptr_nonnull(strstr(help, "X * min(1, (s + 1) / N)"));
    free(help);
}
END_TEST

static int take_tinygpt(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-TINYGPT\n", argv[0]);
        return 2;
    }
    tinygpt = argv[1];
    cu_make_dir("tinygpt-lr");
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "tinygpt-lr",
    .timeout = 120,
    .start = take_tinygpt,
    .finish = cu_remove_dir,
};
CHECK_MAIN(&program,
           CHECK_TEST(warmup_5_rates_follow_the_formula),
           CHECK_TEST(warmup_0_is_the_constant_rate),
           CHECK_TEST(adamw_updates_with_the_scheduled_rate),
           CHECK_TEST(long_warmup_slows_the_loss),
           CHECK_TEST(bad_warmup_exits_2))
