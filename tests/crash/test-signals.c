/*
 * test-signals.c - SIGTERM and SIGINT sent to the real trainer while it
 * records.
 *
 *   test-signals TINYGPT RESDIAG
 *
 * With the handler helper (tinygpt --handle-signals, which calls
 * resdiag_install_signal_handlers):
 *   raise: tinygpt dies by that very signal, and the run file is closed
 *     cleanly - HDF5 opens it without SWMR, which it refuses for a file
 *     still marked as being written - holding every step up to the signal:
 *     with --log-every 1 and the last "step P" line printed before death,
 *     the steps are 0..P plus at most the step in progress (its step_end
 *     took the signal), so P+1 or P+2 steps. --flush-steps 1000 leaves all
 *     but step 0 in the buffer until the signal: the close wrote them.
 *   stop: tinygpt stops by itself, prints its final loss, exits 130; the
 *     file is closed cleanly with steps 0..P (or P-1 when step_begin took
 *     the signal and the step after it ran unrecorded).
 * Without the helper the signal kills tinygpt as SIGKILL would: the file
 * opens with the reader (not with a plain HDF5 open: the control that the
 * clean-close check can fail) and holds every step the --flush-log said
 * was flushed. `resdiag report` reads every file.
 *
 * Round r of each mode and signal writes schema 2 with deflate level 1
 * (the default), schema 2 without compression or schema 1 (r = 0, 1, 2),
 * and the steps its file holds equal those of a whole run of the same
 * schema, value for value (the first WHOLE_STEPS of them).
 *
 * First, in this process, the helper's contract: flags checked, one owner,
 * an ignored signal stays ignored, the handler puts the previous
 * disposition back, RESDIAG_SIGNALS_RETURN makes step_end return
 * RESDIAG_E_INTERRUPTED with the file closed cleanly, and destroy gives
 * the dispositions back.
 */
#include <hdf5.h>

#include "crash-util.h"

#define LAYERS 2
#define ROWS (2 * 16)
#define WHOLE_STEPS 300

/* --file-schema and --compression of round r */
static const char *const SCHEMA[3][2] = { { "2", "1" }, { "2", "0" }, { "1", "0" } };

static int failures;

static void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

/* 1 when HDF5 opens the file without SWMR: it was closed cleanly. */
static int closed_cleanly(const char *path)
{
    H5E_auto2_t fn;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &fn, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5I_INVALID_HID;
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, fn, data);
    if (f < 0)
        return 0;
    H5Fclose(f);
    return 1;
}

static void (*disposition(int sig))(int)
{
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa.sa_handler;
}

static void test_api(void)
{
    static const char *const sub[] = { "attn", "mlp" };
    const char *what = "api";
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = 1;
    m.d_model = 8;
    m.n_sublayers = 2;
    m.sublayer_names = sub;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 100;
    float x[4 * 8] = { 1, 2, 3 };
    resdiag *r = NULL, *r2 = NULL;
    const char *path = cu_path("api.h5"), *path2 = cu_path("api2.h5");
    if (resdiag_open(&r, path, &m, &o) || resdiag_open(&r2, path2, &m, &o)) {
        fail(what, "open failed");
        return;
    }
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_IGN);
    if (resdiag_install_signal_handlers(NULL, 0) != RESDIAG_E_NULL ||
        resdiag_install_signal_handlers(r, 4) != RESDIAG_E_INVALID)
        fail(what, "bad arguments accepted");
    if (resdiag_install_signal_handlers(r, RESDIAG_SIGNALS_RETURN) != RESDIAG_OK)
        fail(what, "install failed");
    if (resdiag_install_signal_handlers(r2, 0) != RESDIAG_E_STATE)
        fail(what, "a second run took the handlers");
    if (disposition(SIGTERM) == SIG_DFL || disposition(SIGINT) != SIG_IGN)
        fail(what, "SIGTERM not caught, or the ignored SIGINT no longer ignored");
    for (int64_t s = 0; s < 5; s++) {
        resdiag_step_begin(r, s);
        RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, 4, 8));
        if (s == 3) {
            raise(SIGTERM);
            if (resdiag_signal_pending() != SIGTERM || disposition(SIGTERM) != SIG_DFL)
                fail(what, "after the signal: pending %d, disposition not the default",
                     resdiag_signal_pending());
        }
        resdiag_status st = resdiag_step_end(r);
        if (st != (s < 3 ? RESDIAG_OK : RESDIAG_E_INTERRUPTED))
            fail(what, "step_end of step %lld returned %s", (long long)s, resdiag_strerror(st));
    }
    if (resdiag_signal_pending() != 0)
        fail(what, "the signal is still pending after it was acted on");
    if (RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, 4, 8)) != RESDIAG_E_INTERRUPTED)
        fail(what, "a hook after the interruption did not return RESDIAG_E_INTERRUPTED");
    if (!closed_cleanly(path))
        fail(what, "the file was not closed at the interruption");
    resdiag_reader *rd = NULL;
    int64_t n = -1;
    if (resdiag_reader_open(&rd, path) == RESDIAG_OK) {
        n = resdiag_reader_info(rd)->n_steps;
        resdiag_reader_destroy(rd);
    }
    if (n != 4)
        fail(what, "the file holds %lld steps, want 4 (0..3, the last ended by step_end)",
             (long long)n);
    if (resdiag_close(r) != RESDIAG_OK)
        fail(what, "close after the interruption failed");
    resdiag_destroy(r);
    /* r2 may take them now, and gives them back at destroy */
    signal(SIGINT, SIG_DFL);
    if (resdiag_install_signal_handlers(r2, 0) != RESDIAG_OK ||
        disposition(SIGINT) == SIG_DFL)
        fail(what, "the second run could not take the handlers");
    resdiag_destroy(r2);
    if (disposition(SIGINT) != SIG_DFL || disposition(SIGTERM) != SIG_DFL)
        fail(what, "destroy did not give the dispositions back");
    fprintf(stderr, "api: RETURN mode: interrupted at step 3, file closed with %lld steps\n",
            (long long)n);
}

enum mode { NO_HELPER, RAISE, STOP };

static void one_round(const char *tinygpt, const char *tool, enum mode mode, int sig, int round)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s round %d",
             mode == NO_HELPER ? "no helper" : mode == RAISE ? "raise" : "stop",
             sig == SIGINT ? "SIGINT" : "SIGTERM", round);
    uint64_t rnd = cu_mix(0x51ED270B27D5A3C9ull * (uint64_t)(round + 1) + (uint64_t)sig +
                          97 * (uint64_t)mode);
    long delay_us = 5000 + (long)(rnd % 150000);
    const char *run = cu_path("sig-%d-%d-%d.h5", mode, sig, round);
    const char *log = cu_path("sig-%d-%d-%d.log", mode, sig, round);
    char *args[40] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                       "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", "100000000",
                       "--threads", "1", "--log-every", "1", "--out", (char *)run,
                       "--flush-log", (char *)log, "--flush-steps",
                       mode == NO_HELPER ? "4" : "1000", "--file-schema",
                       (char *)SCHEMA[round][0], "--compression", (char *)SCHEMA[round][1] };
    int na = 29;
    if (mode != NO_HELPER) {
        args[na++] = "--handle-signals";
        args[na++] = mode == RAISE ? "raise" : "stop";
    }
    args[na] = NULL;
    cu_child c = { cu_path("sig.out"), cu_path("sig.err"), -1 };
    pid_t pid = cu_spawn(&c, args);
    if (!cu_wait_open(log, pid) || !cu_wait_flushed(log, 0)) {
        fail(what, "tinygpt did not record a first step");
        kill(pid, SIGKILL);
        cu_wait(pid);
        return;
    }
    cu_sleep_us(delay_us);
    kill(pid, sig);
    int status = cu_wait(pid);
    char *out = cu_slurp(c.out), *err = cu_slurp(c.err), *flog = cu_slurp(log);
    long long printed = cu_last_number(out, "step");
    long long flushed = cu_last_number(flog, "flushed");

    if (mode == STOP) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 130)
            fail(what, "tinygpt status %#x, want exit 130", status);
        if (!strstr(out, "final loss"))
            fail(what, "no final loss printed");
        if (cu_count_lines(err, "tinygpt: stopped by a signal") != 1)
            fail(what, "stderr: '%s'", err);
    } else if (!WIFSIGNALED(status) || WTERMSIG(status) != sig) {
        fail(what, "tinygpt status %#x, want killed by signal %d", status, sig);
    }
    if (mode == RAISE && err[0])
        fail(what, "unexpected stderr: '%s'", err);

    char why[512];
    int64_t n = cu_check_run(run, LAYERS - 1, ROWS, why, sizeof why);
    if (n < 0) {
        fail(what, "%s", why);
    } else if (mode == RAISE && (n < printed + 1 || n > printed + 2)) {
        fail(what, "last step printed %lld, the file holds %lld steps", printed, (long long)n);
    } else if (mode == STOP && (n < printed || n > printed + 1)) {
        fail(what, "last step printed %lld, the file holds %lld steps", printed, (long long)n);
    } else if (n < flushed + 1) {
        fail(what, "flushed up to step %lld, the file holds %lld steps", flushed, (long long)n);
    }
    if (n > 0 && !cu_same_steps(run, cu_path("whole-%d.h5", round),
                                n < WHOLE_STEPS ? n : WHOLE_STEPS, why, sizeof why))
        fail(what, "schema %s level %s: %s", SCHEMA[round][0], SCHEMA[round][1], why);
    int clean = closed_cleanly(run);
    if (mode != NO_HELPER && !clean)
        fail(what, "the run file was not closed cleanly");
    if (mode == NO_HELPER && clean)
        fail(what, "a file whose writer was killed opens without SWMR: the clean-close "
             "check cannot tell");
    int rc = cu_report(tool, run, NULL);
    if (rc != 0)
        fail(what, "resdiag report exited %d", rc);
    fprintf(stderr, "%-26s schema %s level %s, after %6.1f ms: last printed step %5lld, "
            "flushed %5lld, file holds %5lld steps, %s\n", what, SCHEMA[round][0],
            SCHEMA[round][1], (double)delay_us / 1000.0, printed, flushed, (long long)n,
            clean ? "closed cleanly" : "marked as being written");
    free(out);
    free(err);
    free(flog);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TINYGPT RESDIAG\n", argv[0]);
        return 2;
    }
    resdiag_set_log_handler(NULL, NULL);
    cu_make_dir("signals");
    test_api();
    /* the whole runs, one per schema */
    char steps_text[16];
    snprintf(steps_text, sizeof steps_text, "%d", WHOLE_STEPS);
    for (int k = 0; k < 3; k++) {
        char *args[] = { argv[1], "--layers", "2", "--d-model", "32", "--heads", "2",
                         "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", steps_text,
                         "--threads", "1", "--log-every", "1000000",
                         "--out", (char *)cu_path("whole-%d.h5", k), "--flush-steps", "1000",
                         "--file-schema", (char *)SCHEMA[k][0], "--compression",
                         (char *)SCHEMA[k][1], NULL };
        cu_child c = { NULL, cu_path("whole.err"), -1 };
        int status = cu_wait(cu_spawn(&c, args));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("whole run", "schema %s level %s: status %#x", SCHEMA[k][0], SCHEMA[k][1],
                 status);
    }
    static const enum mode modes[] = { RAISE, STOP, NO_HELPER };
    static const int sigs[] = { SIGTERM, SIGINT };
    for (int m = 0; m < 3; m++)
        for (int s = 0; s < 2; s++)
            for (int round = 0; round < 3; round++)
                one_round(argv[1], argv[2], modes[m], sigs[s], round);
    if (failures)
        fprintf(stderr, "%d failures; files left in %s\n", failures, cu_dir);
    else
        cu_remove_dir();
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
