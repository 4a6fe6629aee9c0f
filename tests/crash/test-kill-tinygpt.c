/*
 * test-kill-tinygpt.c - the real trainer killed with SIGKILL at 50 moments
 * while it records: every run file opens, `resdiag report` reads it, and it
 * holds every step up to the last one tinygpt had seen flushed.
 *
 *   test-kill-tinygpt TINYGPT RESDIAG
 *
 * Each round starts tinygpt (a small model, record every step, flush every
 * F steps for F in 1..16) with --flush-log, waits until the log says the
 * run file exists ("open"), then, in one round of ten, kills it 0..3 ms
 * later (before or around the first flush), and in the others waits until
 * the log says a pseudo-random step 0..79 was flushed and kills it 0..20 ms
 * after that (all seeded by the round number): the kills fall all over the
 * recording, however fast the machine is. tinygpt writes "flushed S" after each step
 * that moved resdiag_flushed_step() to S, with one write(2), so the last
 * complete line is a lower bound of what the file must hold: steps 0..S,
 * each with its data. At most one batch (F steps) more may be there (the
 * flush in flight when the kill came). `resdiag report` must exit 0; a file
 * killed before its first step was flushed holds no step, and then the
 * report must exit 2 with one line on stderr (nothing to analyse is bad
 * input for `report`, as documented in its --help) - never crash.
 *
 * Round r writes schema 2 with deflate level 1 (the default), schema 2
 * without compression or schema 1 (r mod 3), and every step the killed
 * file holds must equal, value for value, that step of a whole run of the
 * same schema (tinygpt with --threads 1 computes the same numbers each
 * time): a chunk rewritten by a flush keeps its earlier steps.
 *
 * Prints the figures: kills, files readable, flushed steps lost (must be 0).
 */
#include "crash-util.h"

#define ROUNDS 50
#define LAYERS 2
#define ROWS (2 * 16) /* --batch 2 --seq 16 */
#define REF_STEPS 400 /* the whole runs: more than a killed run reaches */

/* --file-schema and --compression of round r mod 3 */
static const char *const SCHEMA[3][2] = { { "2", "1" }, { "2", "0" }, { "1", "0" } };

static int failures;

static void fail(int round, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL round %d: ", round);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TINYGPT RESDIAG\n", argv[0]);
        return 2;
    }
    const char *tinygpt = argv[1], *tool = argv[2];
    resdiag_set_log_handler(NULL, NULL);
    cu_make_dir("kill-tinygpt");
    static const int flushes[] = { 1, 2, 3, 5, 8, 16 };
    int readable = 0, reported = 0, empty = 0;
    long long lost = 0, total_steps = 0, beyond = 0, compared = 0;

    /* the whole runs, one per schema */
    char steps_text[16];
    snprintf(steps_text, sizeof steps_text, "%d", REF_STEPS);
    for (int k = 0; k < 3; k++) {
        char *args[] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                         "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", steps_text,
                         "--threads", "1", "--log-every", "1000000",
                         "--out", (char *)cu_path("whole-%d.h5", k), "--flush-steps", "64",
                         "--file-schema", (char *)SCHEMA[k][0], "--compression",
                         (char *)SCHEMA[k][1], NULL };
        cu_child c = { NULL, cu_path("whole-%d.err", k), -1 };
        int status = cu_wait(cu_spawn(&c, args));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "FAIL: the whole run of schema %s level %s: status %#x: %s\n",
                    SCHEMA[k][0], SCHEMA[k][1], status, cu_slurp(c.err));
            return EXIT_FAILURE;
        }
    }

    for (int round = 0; round < ROUNDS; round++) {
        uint64_t rnd = cu_mix(0x9E3779B97F4A7C15ull * (uint64_t)(round + 1));
        int flush = flushes[rnd % 6];
        /* a few kills right after the file exists, the rest spread out */
        long long target = round % 10 == 0 ? -1 : (long long)((rnd >> 32) % 80);
        long delay_us = round % 10 == 0 ? (long)((rnd >> 8) % 3000)
                                        : (long)((rnd >> 8) % 20000);
        const char *run = cu_path("kill-%d.h5", round);
        const char *log = cu_path("kill-%d.log", round);
        char fl[16];
        snprintf(fl, sizeof fl, "%d", flush);
        const int sk = round % 3;
        char *args[] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                         "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", "100000000",
                         "--threads", "1", "--log-every", "1000000", "--out", (char *)run,
                         "--flush-log", (char *)log, "--flush-steps", fl,
                         "--file-schema", (char *)SCHEMA[sk][0], "--compression",
                         (char *)SCHEMA[sk][1], NULL };
        cu_child c = { NULL, cu_path("kill-%d.err", round), -1 };
        pid_t pid = cu_spawn(&c, args);
        if (!cu_wait_open(log, pid)) {
            fail(round, "tinygpt did not open its run file: %s", cu_slurp(c.err));
            kill(pid, SIGKILL);
            cu_wait(pid);
            continue;
        }
        if (target >= 0 && !cu_wait_flushed(log, target)) {
            fail(round, "tinygpt did not flush step %lld in 20 s", target);
            kill(pid, SIGKILL);
            cu_wait(pid);
            continue;
        }
        cu_sleep_us(delay_us);
        kill(pid, SIGKILL);
        int status = cu_wait(pid);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
            fail(round, "tinygpt ended by itself (status %#x)", status);
            continue;
        }
        char *text = cu_slurp(log);
        long long flushed = cu_last_number(text, "flushed");
        free(text);

        char why[512];
        int64_t n = cu_check_run(run, LAYERS - 1, ROWS, why, sizeof why);
        if (n < 0) {
            fail(round, "%s", why);
            continue;
        }
        readable++;
        total_steps += n;
        if (n < flushed + 1) {
            lost += flushed + 1 - n;
            fail(round, "flushed up to step %lld, the file holds %lld steps", flushed,
                 (long long)n);
        }
        if (n > flushed + 1 + flush)
            fail(round, "the file holds %lld steps, more than one batch of %d past the last "
                 "flushed step %lld", (long long)n, flush, flushed);
        beyond += n > flushed + 1 ? n - (flushed + 1) : 0;
        if (!cu_same_steps(run, cu_path("whole-%d.h5", sk), n, why, sizeof why))
            fail(round, "schema %s level %s: %s", SCHEMA[sk][0], SCHEMA[sk][1], why);
        compared += n;
        int rc = cu_report(tool, run, NULL);
        char *err = cu_slurp(cu_path("report.err"));
        if (n > 0 && rc != 0)
            fail(round, "resdiag report exited %d on %lld steps: %s", rc, (long long)n, err);
        if (n == 0 && (rc != 2 || cu_count_lines(err, "") != 1))
            fail(round, "resdiag report on a file without steps: exit %d, stderr '%s'", rc, err);
        free(err);
        reported += n > 0 ? rc == 0 : rc == 2;
        empty += n == 0;
        fprintf(stderr, "kill %2d: schema %s level %s, flush %2d, %5.1f ms after %s %3lld: "
                "flushed step %5lld, file holds %5lld steps\n", round, SCHEMA[sk][0],
                SCHEMA[sk][1], flush, (double)delay_us / 1000.0,
                target < 0 ? "open, step" : "flushed step", target, flushed, (long long)n);
        if (!failures) {
            unlink(run);
            unlink(log);
            unlink(c.err);
        }
    }
    fprintf(stderr, "kill-tinygpt: %d kills, %d files readable, %d reported (%d without a "
            "step: exit 2), %lld flushed steps lost, %lld steps in all, %lld committed by a "
            "flush in flight, %lld equal to the whole run's\n", ROUNDS, readable, reported,
            empty, lost, total_steps, beyond, compared);
    if (failures)
        fprintf(stderr, "%d failures; files left in %s\n", failures, cu_dir);
    else
        cu_remove_dir();
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
