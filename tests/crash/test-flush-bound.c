/*
 * test-flush-bound.c - with the default flush policy, a trainer SIGKILLed
 * loses only the steps of its last flush_seconds (doc/FORMAT.md, "Crash
 * safety"): every step that ended more than BOUND_S before its last
 * step_end is in the file, however long after that step the kill comes.
 *
 * A child records steps with resdiag's default options, one every PERIOD_MS
 * (slower than flush_steps steps per BOUND_S, so that the step count alone
 * would not flush them), and after each step_end writes the step and the
 * time it ended (CLOCK_MONOTONIC) to a pipe. The parent kills it 3 s after
 * its last step (the trainer stuck in a long step), then at pseudo-random
 * moments while it steps, reads the file back after each kill, and checks
 * the bound from the child's own timings, not from the library's state.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check-one.h"
#include "run-files.h"
#include "resdiag.h"

/* The documented default bound: steps that ended more than flush_seconds
 * (1 s) before the last step_end are on disk; the slack covers the flush's
 * own time and the child's clock read after step_end returns. */
#define BOUND_S 1.0
#define SLACK_S 0.25
#define PERIOD_MS 150
#define MAX_STEPS 1000
#define N_RANDOM 6

typedef struct progress {
    int64_t step;
    double t; /* when its step_end returned, CLOCK_MONOTONIC seconds */
} progress;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Child: steps 0.. one every PERIOD_MS, n_steps of them (or forever when
 * n_steps < 0), then waits to be killed. Never returns. */
static void trainer(const char *path, int fd, int n_steps)
{
    resdiag_model m = mlp_model(2, 16);
    resdiag_options o;
    resdiag_options_init(&o); /* the defaults are what is tested */
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        _exit(3);
    float x[4 * 16];
    for (int i = 0; i < 4 * 16; i++)
        x[i] = (float)(i % 7) - 3.0f;
    resdiag_tensor t = resdiag_f32(x, 4, 16);
    for (int64_t s = 0; n_steps < 0 || s < n_steps; s++) {
        sleep_s(PERIOD_MS / 1000.0); /* the step's work */
        if (resdiag_step_begin(r, s) != RESDIAG_OK
            || resdiag_observe_at(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, t, "t.c", 1)
            || resdiag_observe_at(r, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_OUT, t, "t.c", 2)
            || resdiag_step_end(r) != RESDIAG_OK)
            _exit(4);
        progress p = { s, mono() };
        if (write(fd, &p, sizeof p) != (ssize_t)sizeof p)
            _exit(5);
    }
    for (;;)
        pause();
}

/* Forks the trainer; *fd reads its progress. */
static pid_t start(const char *path, int n_steps, int *fd)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        trainer(path, p[1], n_steps);
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}

/* Reads every progress record until the pipe closes (the child is dead). */
static int read_all(int fd, progress *out, int max)
{
    int n = 0;
    progress p;
    while (n < max && read(fd, &p, sizeof p) == (ssize_t)sizeof p)
        out[n++] = p;
    close(fd);
    return n;
}

/* After the kill: the file opens, its steps are 0..k in order, none that
 * the child had not begun, and every step that ended more than the bound
 * before the last step_end is there. */
static void check_bound(const char *path, const progress *pr, int n, const char *what)
{
    ck_assert_msg(n > 0, "%s: the trainer recorded no step", what);
    resdiag_reader *rd = fixture_read(path);
    int64_t in_file = resdiag_reader_info(rd)->n_steps;
    int64_t *steps = calloc((size_t)(in_file > 0 ? in_file : 1), sizeof *steps);
    ck_assert_int_eq(resdiag_reader_steps(rd, steps, in_file), RESDIAG_OK);
    for (int64_t i = 0; i < in_file; i++)
        ck_assert_int_eq(steps[i], i);
    int64_t last_flushed = in_file - 1;
    free(steps);
    resdiag_reader_destroy(rd);
    ck_assert_msg(last_flushed <= pr[n - 1].step + 1, "%s: step %lld in the file, never begun",
                  what, (long long)last_flushed);
    double t_last = pr[n - 1].t;
    int64_t must = -1; /* the last step that ended before t_last - bound */
    for (int i = 0; i < n; i++)
        if (pr[i].t <= t_last - BOUND_S - SLACK_S)
            must = pr[i].step;
    ck_assert_msg(last_flushed >= must,
                  "%s: the trainer reached step %lld; step %lld ended %.2f s before that, yet "
                  "the file ends at step %lld (%lld steps, %.2f s, unwritten; bound %.1f s)",
                  what, (long long)pr[n - 1].step, (long long)must,
                  t_last - pr[must].t, (long long)last_flushed,
                  (long long)(pr[n - 1].step - last_flushed),
                  t_last - (last_flushed >= 0 ? pr[last_flushed].t : pr[0].t), BOUND_S);
}

/* Killed 3 s after its last step: the steps of its last second at most are lost. */
START_TEST(killed_after_last_step)
{
    const char *path = run_path("idle.h5");
    int fd;
    enum { N = 14 }; /* 2.1 s of steps: fewer than flush_steps, more than the bound */
    pid_t pid = start(path, N, &fd);
    progress pr[MAX_STEPS];
    int n = 0;
    progress p;
    while (n < N && read(fd, &p, sizeof p) == (ssize_t)sizeof p)
        pr[n++] = p;
    ck_assert_int_eq(n, N);
    sleep_s(3.0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    n += read_all(fd, pr + n, MAX_STEPS - n);
    check_bound(path, pr, n, "killed 3 s after its last step");
    remove_run("idle.h5");
}
END_TEST

/* Killed at pseudo-random moments while stepping (in a step or between). */
START_TEST(killed_at_random)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < N_RANDOM; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double after = 1.2 + (double)(x % 1000) / 1000.0 * 1.3; /* 1.2 .. 2.5 s */
        char name[32], what[64];
        snprintf(name, sizeof name, "random-%d.h5", k);
        snprintf(what, sizeof what, "kill %d, %.3f s after the start", k, after);
        const char *path = run_path(name);
        int fd;
        pid_t pid = start(path, -1, &fd);
        sleep_s(after);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status));
        progress pr[MAX_STEPS];
        int n = read_all(fd, pr, MAX_STEPS);
        check_bound(path, pr, n, what);
        remove_run(name);
    }
}
END_TEST

static const check_program program = { .name = "flush-bound", .timeout = 60, .scratch = dir,
                                       .scratch_size = sizeof dir, .remove_files = 1 };
CHECK_MAIN(&program, CHECK_TEST(killed_after_last_step), CHECK_TEST(killed_at_random))
