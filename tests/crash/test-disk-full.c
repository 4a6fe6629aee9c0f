/*
 * test-disk-full.c - recording onto a disk that fills up, or a file that
 * cannot be created, never stops the training.
 *
 *   test-disk-full TINYGPT RESDIAG
 *
 * 1. The API in a child under RLIMIT_FSIZE (SIGXFSZ ignored, so writes fail
 *    with EFBIG): once a flush fails, step_end and every hook return
 *    RESDIAG_E_NOSPACE, the log handler hears about it exactly once over
 *    the remaining steps and the close, and the file holds exactly the
 *    steps up to resdiag_flushed_step().
 * 2. tinygpt under RLIMIT_FSIZE, and 3. on a 2000 KiB tmpfs (mounted in a
 *    private mount namespace; skipped where mount(2) is not allowed): it
 *    trains all its steps and prints its final loss, says once that
 *    recording failed, the library's log has one line, the exit status is
 *    0 (lack of space is no failure of the run), and the run file holds exactly the steps of the last "flushed S"
 *    of --flush-log, read by `resdiag report`.
 * 4. A run file that cannot be created (a path under a regular file; a
 *    file size limit too small for the file's creation): one clear line,
 *    and tinygpt trains without recording (exit 0, final loss printed).
 */
#include <sched.h>
#include <sys/mount.h>

#include "crash-util.h"

#define LAYERS 2
#define ROWS (2 * 16)
#define STEPS 200
#define LIMIT 2000000L /* bytes: some of the 200 steps fit, not all */

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

/* ------------------------------------------------ 1. the API, in a child */

static int g_logs;
static char g_first_log[512];

static void count_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)user;
    if (prio >= RESDIAG_LOG_ERROR && g_logs++ == 0)
        snprintf(g_first_log, sizeof g_first_log, "%s", msg);
}

/* Exit 0 when every check held; 1 with the reason on stderr. */
static int api_child(const char *path)
{
    enum { L = 4, D = 64, T = 64, N_STEPS = 400 };
    static const char *const sub[] = { "attn", "mlp" };
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = L;
    m.d_model = D;
    m.n_sublayers = 2;
    m.sublayer_names = sub;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 3;
    o.log_fn = count_log;
    static float x[T * D];
    for (int i = 0; i < T * D; i++)
        x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK) {
        fprintf(stderr, "open failed: %s\n", g_first_log);
        return 1;
    }
    int64_t failed_at = -1, flushed = -1;
    long bad = 0;
    for (int64_t s = 0; s < N_STEPS; s++) {
        resdiag_status want = failed_at >= 0 ? RESDIAG_E_NOSPACE : RESDIAG_OK;
        resdiag_status st = resdiag_step_begin(r, s);
        bad += st != want;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 2; k++) {
                st = RESDIAG_FWD(r, l, k, RESDIAG_STREAM_IN, resdiag_f32(x, T, D));
                bad += st != want;
                st = RESDIAG_FWD(r, l, k, RESDIAG_BRANCH_OUT, resdiag_f32(x, T, D));
                bad += st != want;
            }
        st = resdiag_step_end(r);
        if (failed_at < 0 && st != RESDIAG_OK) {
            if (st != RESDIAG_E_NOSPACE) {
                fprintf(stderr, "step_end failed with %s, not E_NOSPACE\n",
                        resdiag_strerror(st));
                return 1;
            }
            failed_at = s;
            resdiag_flushed_step(r, &flushed);
        } else if (failed_at >= 0) {
            bad += st != RESDIAG_E_NOSPACE;
        }
    }
    resdiag_status cst = resdiag_close(r);
    resdiag_destroy(r);
    if (failed_at < 0 || flushed < 0 || flushed >= failed_at) {
        fprintf(stderr, "the file size limit was never reached (failed at %lld, flushed %lld)\n",
                (long long)failed_at, (long long)flushed);
        return 1;
    }
    if (bad || g_logs != 1 || cst != RESDIAG_E_NOSPACE) {
        fprintf(stderr, "%ld calls returned the wrong status, %d log lines (first: %s), close "
                "returned %s\n", bad, g_logs, g_first_log, resdiag_strerror(cst));
        return 1;
    }
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK) {
        fprintf(stderr, "the reader cannot open the file\n");
        return 1;
    }
    int64_t n = resdiag_reader_info(rd)->n_steps;
    resdiag_reader_destroy(rd);
    fprintf(stderr, "api: flush failed at step %lld of %d; %lld steps flushed before, the file "
            "holds %lld; 1 log line: %s\n", (long long)failed_at, N_STEPS,
            (long long)flushed + 1, (long long)n, g_first_log);
    if (n != flushed + 1) {
        fprintf(stderr, "the file holds %lld steps, flushed were %lld\n", (long long)n,
                (long long)flushed + 1);
        return 1;
    }
    return 0;
}

static void test_api(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 1600000, 1600000 };
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        _exit(api_child(cu_path("api.h5")));
    }
    int status = cu_wait(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("api", "child status %#x", status);
}

/* ------------------------------------------------ 2, 3. tinygpt, disk full */

static void tinygpt_full(const char *what, const char *tinygpt, const char *tool,
                         const char *run, long fsize_limit)
{
    const char *log = cu_path("%s.log", what);
    char steps[16];
    snprintf(steps, sizeof steps, "%d", STEPS);
    char *args[] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                     "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", steps,
                     "--threads", "1", "--log-every", "1", "--flush-steps", "4",
                     "--out", (char *)run, "--flush-log", (char *)log, NULL };
    cu_child c = { cu_path("%s.out", what), cu_path("%s.err", what), fsize_limit };
    int status = cu_wait(cu_spawn(&c, args));
    char *out = cu_slurp(c.out), *err = cu_slurp(c.err), *flog = cu_slurp(log);
    long long flushed = cu_last_number(flog, "flushed");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail(what, "tinygpt status %#x, want exit 0 (recording stopped for lack of space)",
             status);
    if (cu_last_number(out, "step") != STEPS - 1 || !strstr(out, "final loss"))
        fail(what, "training did not finish: last step %lld", cu_last_number(out, "step"));
    int lib_lines = cu_count_lines(err, "resdiag: ");
    int lib_write = cu_count_lines(err, "resdiag: writing the run file failed");
    int tg_lines = cu_count_lines(err, "tinygpt: recording failed at step");
    if (lib_lines != 1 || lib_write != 1 || tg_lines != 1)
        fail(what, "stderr has %d library lines (%d about the write), %d tinygpt lines, want "
             "1, 1, 1:\n%s", lib_lines, lib_write, tg_lines, err);
    if (flushed < 0 || flushed >= STEPS - 1)
        fail(what, "flushed up to step %lld: the limit was not reached in time", flushed);
    char why[512];
    int64_t n = cu_check_run(run, LAYERS - 1, ROWS, why, sizeof why);
    if (n < 0)
        fail(what, "%s", why);
    else if (n != flushed + 1)
        fail(what, "flushed up to step %lld, the file holds %lld steps", flushed, (long long)n);
    int rc = cu_report(tool, run, NULL);
    if (rc != 0)
        fail(what, "resdiag report exited %d", rc);
    struct stat sb = { 0 };
    stat(run, &sb);
    fprintf(stderr, "%s: %d steps trained, flushed up to step %lld, the file (%lld bytes) "
            "holds %lld steps; stderr:\n%s", what, STEPS, flushed, (long long)sb.st_size,
            (long long)n, err);
    free(out);
    free(err);
    free(flog);
}

/* A private mount namespace with a tmpfs of 2000 KiB; NULL if not allowed. */
static const char *mount_tmpfs(char *why, size_t len)
{
    const char *dir = cu_path("tmpfs");
    if (mkdir(dir, 0700) != 0) {
        snprintf(why, len, "mkdir: %s", strerror(errno));
        return NULL;
    }
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, "size=2000k") != 0) {
        snprintf(why, len, "%s", strerror(errno));
        rmdir(dir);
        return NULL;
    }
    return dir;
}

/* ------------------------------------------------ 4. cannot create */

static void cannot_create(const char *what, const char *tinygpt, const char *run, long limit)
{
    char *args[] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                     "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", "20",
                     "--threads", "1", "--out", (char *)run, NULL };
    cu_child c = { cu_path("%s.out", what), cu_path("%s.err", what), limit };
    int status = cu_wait(cu_spawn(&c, args));
    char *out = cu_slurp(c.out), *err = cu_slurp(c.err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail(what, "tinygpt status %#x, want exit 0", status);
    if (!strstr(out, "final loss") || !strstr(out, "recording: off"))
        fail(what, "stdout:\n%s", out);
    if (cu_count_lines(err, "tinygpt: cannot record to") != 1 ||
        !strstr(err, "training without recording"))
        fail(what, "stderr:\n%s", err);
    fprintf(stderr, "%s: stderr:\n%s", what, err);
    free(out);
    free(err);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TINYGPT RESDIAG\n", argv[0]);
        return 2;
    }
    resdiag_set_log_handler(NULL, NULL);
    cu_make_dir("disk-full");
    test_api();
    tinygpt_full("rlimit", argv[1], argv[2], cu_path("rlimit.h5"), LIMIT);
    char why[256];
    const char *tmpfs = mount_tmpfs(why, sizeof why);
    if (tmpfs) {
        char run[600];
        snprintf(run, sizeof run, "%s/run.h5", tmpfs);
        tinygpt_full("tmpfs", argv[1], argv[2], run, -1);
        umount2(tmpfs, MNT_DETACH);
    } else {
        fprintf(stderr, "tmpfs: skipped, cannot mount one here (%s)\n", why);
    }
    /* a path under a regular file */
    FILE *f = fopen(cu_path("plain"), "w");
    if (f)
        fclose(f);
    cannot_create("under-a-file", argv[1], cu_path("plain/run.h5"), -1);
    cannot_create("rlimit-tiny", argv[1], cu_path("tiny.h5"), 40000);
    if (failures)
        fprintf(stderr, "%d failures; files left in %s\n", failures, cu_dir);
    else
        cu_remove_dir();
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
