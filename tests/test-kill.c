/*
 * test-kill.c - a trainer SIGKILLed at any moment leaves a run file that the
 * reader opens, holding every step it had appended, exactly as written.
 *
 * Each round forks a writer that appends steps forever (one or a few at a
 * time) and, after each successful append, reports the number of steps
 * appended so far through a pipe. The parent kills it after a pseudo-random
 * 1..200 ms, takes the last count reported, and opens the file: it must hold
 * n_steps >= that count (at most one batch more: the append in flight may
 * have committed before the kill), with every value of every step exact.
 *
 * Value of element `off` of step index i: i * 100000 + off + 0.5, NaN in
 * some stats rows (unobserved sites).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "h5_writer.h"
#include "layout.h"
#include "resdiag.h"

#ifndef N_ROUNDS
#define N_ROUNDS 16
#endif

static char g_dir[256];
static char g_log[2048];

static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(g_log, sizeof g_log, "%s", msg);
}

static const char *const SUB[] = { "attn", "mlp" };
static const char *const LP[] = { "attn.wo", "mlp.w2" };
static const char *const MP[] = { "head.w" };

static double expect(const rd_layout *lay, int64_t i, size_t off)
{
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &lay->tables[t];
        if (off >= tb->offset && off < tb->offset + tb->count) {
            if (tb->kind == RD_KIND_STATS && ((off - tb->offset) / RESDIAG_N_FIELDS + (size_t)i) % 5 == 2)
                return NAN;
            break;
        }
    }
    return (double)i * 100000.0 + (double)off + 0.5;
}

static int64_t step_no(int64_t i) { return 7 + 2 * i; }

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* Deterministic round parameters: xorshift64* from the round number. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
}

typedef struct setup {
    resdiag_model m;
    rd_layout lay;
    rd_file_header hdr;
} setup;

static void make_setup(setup *s, int chunk)
{
    memset(s, 0, sizeof *s);
    s->m.struct_size = sizeof s->m;
    s->m.n_layers = 4;
    s->m.d_model = 32;
    s->m.n_sublayers = 2;
    s->m.sublayer_names = SUB;
    s->m.n_layer_params = 2;
    s->m.layer_param_names = LP;
    s->m.n_model_params = 1;
    s->m.model_param_names = MP;
    rd_layout_init(&s->lay, 4, 2, 2, 1, 8);
    s->hdr.model = &s->m;
    s->hdr.layout = &s->lay;
    s->hdr.sketch_size = 8;
    s->hdr.sketch_seed = 99;
    s->hdr.record_chunk_steps = chunk;
}

/* The writer: never returns. Exit 3: an append failed. */
static void writer_child(const char *path, setup *s, size_t batch, int fd)
{
    char err[1024];
    rd_writer *w = NULL;
    size_t L = s->lay.record_len;
    double *rec = malloc(batch * L * sizeof *rec);
    int64_t *steps = malloc(batch * sizeof *steps);
    double *times = malloc(batch * sizeof *times);
    rd_callsite *cs = calloc(s->lay.n_slots, sizeof *cs);
    if (!rec || !steps || !times || !cs)
        _exit(2);
    for (size_t k = 0; k < s->lay.n_slots; k++) {
        cs[k].file = k % 2 ? "model.c" : NULL;
        cs[k].line = (int)k;
    }
    if (rd_writer_create(&w, path, &s->hdr, err, sizeof err) != RESDIAG_OK)
        _exit(2);
    int64_t n = 0;
    if (write(fd, &n, sizeof n) != sizeof n)
        _exit(2);
    for (;;) {
        for (size_t k = 0; k < batch; k++) {
            int64_t i = n + (int64_t)k;
            steps[k] = step_no(i);
            times[k] = (double)i;
            for (size_t off = 0; off < L; off++)
                rec[k * L + off] = expect(&s->lay, i, off);
        }
        if (rd_writer_append(w, steps, times, rec, batch, cs, n == 0, err, sizeof err)
            != RESDIAG_OK)
            _exit(3);
        n += (int64_t)batch;
        if (write(fd, &n, sizeof n) != sizeof n)
            _exit(2);
    }
}

START_TEST(kill_at_random_time_keeps_every_reported_step)
{
    uint64_t rnd = mix(0x9E3779B97F4A7C15ull * (uint64_t)(_i + 1));
    static const int chunks[] = { 1, 3, 8, 16 };
    static const size_t batches[] = { 1, 1, 2, 5 };
    int chunk = chunks[rnd % 4];
    size_t batch = batches[(rnd >> 8) % 4];
    /* 1..200 ms, a few rounds right after the file exists */
    long delay_us = _i % 4 == 0 ? 1000 + (long)((rnd >> 16) % 3000)
                                : 1000 + (long)((rnd >> 16) % 199000);
    setup s;
    make_setup(&s, chunk);
    char path[512];
    snprintf(path, sizeof path, "%s/kill-%d.h5", g_dir, _i);

    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        writer_child(path, &s, batch, fds[1]);
    }
    close(fds[1]);
    int64_t last = -1, v;
    /* the file exists once 0 is reported */
    ck_assert_int_eq(read(fds[0], &v, sizeof v), (ssize_t)sizeof v);
    ck_assert_int_eq(v, 0);
    last = 0;
    struct timespec ts = { delay_us / 1000000, (delay_us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "writer ended by itself: status %#x", status);
    ssize_t got;
    while ((got = read(fds[0], &v, sizeof v)) == (ssize_t)sizeof v)
        last = v;
    close(fds[0]);

    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "round %d (chunk %d, batch %zu, %ld us): open: %s", _i,
                  chunk, batch, delay_us, g_log);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    ck_assert_msg(n >= last && n <= last + (int64_t)batch,
                  "round %d: n_steps %lld, last reported %lld, batch %zu", _i, (long long)n,
                  (long long)last, batch);
    fprintf(stderr, "kill round %2d: chunk %2d batch %zu after %6.1f ms: reported %4lld, "
            "file holds %4lld\n", _i, chunk, batch, (double)delay_us / 1000.0, (long long)last,
            (long long)n);

    /* every value of every step the file claims (counted, then asserted
     * once: a Check assertion per value would dominate the run time) */
    long bad = 0;
    char first_bad[256] = "";
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &s.lay.tables[t];
        size_t len = (size_t)n * tb->count;
        double *all = malloc((len ? len : 1) * sizeof *all);
        ck_assert_int_eq(resdiag_reader_read(rd, tb->name, 0, n, all, len), RESDIAG_OK);
        for (int64_t i = 0; i < n; i++)
            for (size_t e = 0; e < tb->count; e++) {
                double val = all[(size_t)i * tb->count + e];
                if (!same(val, expect(&s.lay, i, tb->offset + e)) && bad++ == 0)
                    snprintf(first_bad, sizeof first_bad, "%s step %lld element %zu = %g",
                             tb->name, (long long)i, e, val);
            }
        free(all);
    }
    ck_assert_msg(bad == 0, "round %d: %ld wrong values, first: %s", _i, bad, first_bad);
    int64_t *steps = malloc((size_t)(n ? n : 1) * sizeof *steps);
    double *times = malloc((size_t)(n ? n : 1) * sizeof *times);
    ck_assert_int_eq(resdiag_reader_steps(rd, steps, n), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_read(rd, "step_time", 0, n, times, (size_t)n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++)
        bad += steps[i] != step_no(i) || times[i] != (double)i;
    ck_assert_msg(bad == 0, "round %d: %ld wrong step numbers or times", _i, bad);
    free(steps);
    free(times);
    if (n > 0) {
        /* call sites were written with the first append */
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_IN),
                         "model.c:1");
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN),
                         "");
    }
    /* a reader of a file still marked as being written can refresh */
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, n);
    resdiag_reader_close(rd);
    unlink(path);
}
END_TEST

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/resdiag-test-kill-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    resdiag_set_log_handler(capture_log, NULL);
    Suite *s = suite_create("kill");
    TCase *tc = tcase_create("sigkill");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, kill_at_random_time_keeps_every_reported_step, 0, N_ROUNDS);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    /* leave the files of failed rounds for inspection */
    if (failed == 0)
        rmdir(g_dir);
    else
        fprintf(stderr, "run files left in %s\n", g_dir);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
