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
 * 2. tinygpt under RLIMIT_FSIZE, and 3. on a 1600 KiB tmpfs (mounted in a
 *    private mount namespace; skipped where mount(2) is not allowed): it
 *    trains all its steps and prints its final loss, says once that
 *    recording failed, the library's log has one line, the exit status is
 *    0 (lack of space is no failure of the run), and the run file holds exactly the steps of the last "flushed S"
 *    of --flush-log, read by `resdiag report`.
 *    Each of 1-3 runs on schema 2 with deflate level 1 (the default; a
 *    compressed chunk grows at each flush), schema 2 without compression,
 *    and schema 1 (the tmpfs on the first and the last). The limit is half
 *    the size of the same run without one, and every step the cut file
 *    holds equals, value for value, that step of the run without a limit.
 * 4. A run file that cannot be created (a path under a regular file; a
 *    file size limit too small for the file's creation): one clear line,
 *    and tinygpt trains without recording (exit 0, final loss printed).
 */
#include <sched.h>
#include <sys/mount.h>

#include "crash-util.h"

#define LAYERS 2
#define ROWS (2 * 16)
/* Runs long enough that half of one is well above what an append may
 * reserve (about 2.2 MB for these models), so that the limit of half a
 * run cuts it in the middle, not at its first step. */
#define STEPS 500

/* The files every case is checked on: schema, deflate level, as text. */
typedef struct schema_case {
    const char *schema, *level, *name;
} schema_case;
static const schema_case SCHEMAS[3] = { { "2", "1", "s2-deflate1" }, { "2", "0", "s2-plain" },
                                        { "1", "0", "s1" } };

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

/* Records N_STEPS steps to path under the file size limit that is in
 * force (none: the whole run, the reference). limited: the limit must be
 * hit. Exit 0 when every check held; 1 with the reason on stderr. */
static int api_child(const char *path, const schema_case *sc, int limited)
{
    enum { L = 4, D = 64, T = 64, N_STEPS = 1200 };
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
    o.file_schema = atoi(sc->schema);
    o.compression = atoi(sc->level);
    static float x[T * D];
    static float y[T * D];
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK) {
        fprintf(stderr, "open failed: %s\n", g_first_log);
        return 1;
    }
    int64_t failed_at = -1, flushed = -1;
    long bad = 0;
    uint64_t rnd = 1;
    for (int64_t s = 0; s < N_STEPS; s++) {
        /* other numbers each step, as hard to compress as a trainer's */
        for (int i = 0; i < T * D; i++) {
            rnd = cu_mix(rnd + 0x9E3779B97F4A7C15ull);
            x[i] = (float)(rnd >> 40) / (float)(1 << 24) - 0.5f;
            y[i] = x[i] * (float)(1 + s % 7);
        }
        resdiag_status want = failed_at >= 0 ? RESDIAG_E_NOSPACE : RESDIAG_OK;
        resdiag_status st = resdiag_step_begin(r, s);
        bad += st != want;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 2; k++) {
                st = RESDIAG_FWD(r, l, k, RESDIAG_STREAM_IN, resdiag_f32(x, T, D));
                bad += st != want;
                st = RESDIAG_FWD(r, l, k, RESDIAG_BRANCH_OUT, resdiag_f32(y, T, D));
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
    if (!limited) {
        if (failed_at >= 0 || cst != RESDIAG_OK || bad || g_logs) {
            fprintf(stderr, "the run without a limit failed at step %lld: %s\n",
                    (long long)failed_at, g_first_log);
            return 1;
        }
        return 0;
    }
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
    fprintf(stderr, "api %s: flush failed at step %lld of %d; %lld steps flushed before, the "
            "file holds %lld; 1 log line: %s\n", sc->name, (long long)failed_at, N_STEPS,
            (long long)flushed + 1, (long long)n, g_first_log);
    if (n != flushed + 1) {
        fprintf(stderr, "the file holds %lld steps, flushed were %lld\n", (long long)n,
                (long long)flushed + 1);
        return 1;
    }
    return 0;
}

/* api_child in a child under a limit of limit bytes (-1: none). */
static int run_api_child(const char *path, const schema_case *sc, long limit)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { (rlim_t)limit, (rlim_t)limit };
        if (limit >= 0 && setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        _exit(api_child(path, sc, limit >= 0));
    }
    int status = cu_wait(pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void test_api(const schema_case *sc)
{
    char what[64], why[512];
    snprintf(what, sizeof what, "api %s", sc->name);
    const char *whole = cu_path("api-%s-whole.h5", sc->name);
    if (!run_api_child(whole, sc, -1)) {
        fail(what, "the run without a limit failed");
        return;
    }
    const char *cut = cu_path("api-%s.h5", sc->name);
    if (!run_api_child(cut, sc, file_size(whole) / 2)) {
        fail(what, "the child under half the whole run's size (%lld bytes) failed",
             (long long)file_size(whole));
        return;
    }
    resdiag_reader *rd = NULL;
    int64_t n = 0;
    if (resdiag_reader_open(&rd, cut) == RESDIAG_OK)
        n = resdiag_reader_info(rd)->n_steps;
    resdiag_reader_destroy(rd);
    if (!cu_same_steps(cut, whole, n, why, sizeof why))
        fail(what, "%s", why);
}

/* ------------------------------------------------ 2, 3. tinygpt, disk full */

/* tinygpt recording to run in schema sc under a file size limit (-1:
 * none), with a --flush-log; its exit status. */
static int run_tinygpt(const char *what, const char *tinygpt, const char *run,
                       const schema_case *sc, long fsize_limit)
{
    char steps[16];
    snprintf(steps, sizeof steps, "%d", STEPS);
    char *args[] = { (char *)tinygpt, "--layers", "2", "--d-model", "32", "--heads", "2",
                     "--seq", "16", "--batch", "2", "--vocab", "32", "--steps", steps,
                     "--threads", "1", "--log-every", "1", "--flush-steps", "4",
                     "--out", (char *)run, "--flush-log", (char *)cu_path("%s.log", what),
                     "--file-schema", (char *)sc->schema, "--compression", (char *)sc->level,
                     NULL };
    cu_child c = { cu_path("%s.out", what), cu_path("%s.err", what), fsize_limit };
    return cu_wait(cu_spawn(&c, args));
}

/* The whole run of schema sc, without a limit: its path, or NULL. */
static const char *whole_run(const char *tinygpt, const schema_case *sc)
{
    char what[64];
    snprintf(what, sizeof what, "whole-%s", sc->name);
    const char *run = cu_path("%s.h5", what);
    int status = run_tinygpt(what, tinygpt, run, sc, -1);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail(what, "tinygpt status %#x", status);
        return NULL;
    }
    return run;
}

static void tinygpt_full(const char *what, const char *tinygpt, const char *tool,
                         const char *run, const schema_case *sc, long fsize_limit,
                         const char *whole)
{
    const char *log = cu_path("%s.log", what);
    cu_child c = { cu_path("%s.out", what), cu_path("%s.err", what), fsize_limit };
    int status = run_tinygpt(what, tinygpt, run, sc, fsize_limit);
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
    else if (!cu_same_steps(run, whole, n, why, sizeof why))
        fail(what, "%s", why);
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

/* A private mount namespace with a tmpfs of kib KiB; NULL if not allowed. */
static const char *mount_tmpfs(const char *name, long kib, char *why, size_t len)
{
    const char *dir = cu_path("%s", name);
    char size[32];
    snprintf(size, sizeof size, "size=%ldk", kib);
    if (mkdir(dir, 0700) != 0) {
        snprintf(why, len, "mkdir: %s", strerror(errno));
        return NULL;
    }
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, size) != 0) {
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
    for (int k = 0; k < 3; k++) {
        const schema_case *sc = &SCHEMAS[k];
        test_api(sc);
        const char *w = whole_run(argv[1], sc);
        if (!w)
            continue;
        char whole[600]; /* cu_path's buffers are reused */
        snprintf(whole, sizeof whole, "%s", w);
        long half = file_size(whole) / 2;
        char what[64];
        snprintf(what, sizeof what, "rlimit-%s", sc->name);
        char run[600];
        snprintf(run, sizeof run, "%s", cu_path("%s.h5", what));
        tinygpt_full(what, argv[1], argv[2], run, sc, half, whole);
        if (k == 1)
            continue;
        char why[256];
        snprintf(what, sizeof what, "tmpfs-%s", sc->name);
        const char *tmpfs = mount_tmpfs(what, half / 1024, why, sizeof why);
        if (tmpfs) {
            snprintf(run, sizeof run, "%s/run.h5", tmpfs);
            tinygpt_full(what, argv[1], argv[2], run, sc, -1, whole);
            umount2(tmpfs, MNT_DETACH);
        } else {
            fprintf(stderr, "%s: skipped, cannot mount one here (%s)\n", what, why);
        }
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
