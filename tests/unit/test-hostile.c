/*
 * test-hostile.c - the reader API on run files crafted to abuse it
 * (tests/helpers/make-hostile-runs.c): resdiag_reader_open refuses each with
 * RESDIAG_E_FORMAT and a message naming the object, before reading what it
 * points at; a file whose table cannot be read opens, and the reads fail;
 * the process-wide plugin state of HDF5 is what the caller had (the reader
 * runs inside other people's processes, h5py's among them) and yet no
 * plugin in HDF5_PLUGIN_PATH gets loaded.
 *
 *   test-hostile MAKE_HOSTILE_RUNS PLUGIN.so
 */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check-one.h"
#include "resdiag.h"

static char g_dir[256], g_runs[320], g_marker[320], g_secret[320];
static char g_last[1024];

static void keep_message(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(g_last, sizeof g_last, "%s", msg);
}

static const char *run(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_runs, name);
    return p[k];
}

static const struct {
    const char *file, *says;
} refused[] = {
    { "external-callsite.h5", "dataset /forward/site_callsite uses external storage" },
    { "external-table.h5", "dataset /forward/site_stats uses external storage" },
    { "elink-callsite.h5", "/forward/site_callsite is an external link" },
    { "elink-group.h5", "/backward is an external link" },
    { "elink-fifo.h5", "/forward/site_stats is an external link" },
    { "softlink.h5", "/forward/site_stats is a soft link" },
    { "vds-callsite.h5", "dataset /forward/site_callsite is a virtual dataset" },
    { "vds-fifo.h5", "dataset /forward/site_stats is a virtual dataset" },
    { "filter.h5", "dataset /forward/site_stats is stored through HDF5 filter 32123" },
    { "layers-100k.h5", "does not hold the 100000 layers" },
    { "layers-1m.h5", "does not hold the 1000000 layers" },
    { "scales-elink.h5", "/layer is an external link" },
    /* schema 2: only shuffle then deflate, only the pinned types */
    { "s2-filter-blosc.h5", "dataset /forward/site_stats is stored through HDF5 filter 32001" },
    { "s2-filter-order.h5", "/forward/site_counts" },
    { "s2-filter-extra.h5", "/forward/site_sketch" },
    { "s2-type-string.h5", "/forward/site_stats" },
    { "s2-type-compound.h5", "/forward/site_counts" },
    { "s2-type-double-counts.h5", "/forward/site_counts" },
};

START_TEST(refused_at_open)
{
    unsigned before = 0, after = 0;
    ck_assert_int_ge(H5PLget_loading_state(&before), 0);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        resdiag_reader *rd = (resdiag_reader *)1;
        g_last[0] = 0;
        resdiag_status st = resdiag_reader_open(&rd, run(refused[i].file));
        ck_assert_msg(st == RESDIAG_E_FORMAT, "%s: status %s (%s)", refused[i].file,
                      resdiag_strerror(st), g_last);
        ck_assert_ptr_null(rd);
        ck_assert_msg(strstr(g_last, refused[i].says) != NULL, "%s: message \"%s\" lacks \"%s\"",
                      refused[i].file, g_last, refused[i].says);
        ck_assert_msg(strstr(g_last, g_secret) == NULL, "%s: the secret is in the message",
                      refused[i].file);
        ck_assert_int_ge(H5PLget_loading_state(&after), 0);
        ck_assert_uint_eq(after, before);
    }
    ck_assert_msg(access(g_marker, F_OK) != 0, "the reader loaded the plugin in HDF5_PLUGIN_PATH");
}
END_TEST

/* A schema newer than this library's: RESDIAG_E_VERSION, saying so. */
START_TEST(schema_4_is_newer)
{
    resdiag_reader *rd = (resdiag_reader *)1;
    g_last[0] = 0;
    ck_assert_int_eq(resdiag_reader_open(&rd, run("s2-version-4.h5")), RESDIAG_E_VERSION);
    ck_assert_ptr_null(rd);
    ck_assert_msg(strstr(g_last, "schema version 4") != NULL,
                  "message: %s", g_last);
}
END_TEST

/* Integers that no writer stores (a negative count other than -1, one past
 * 2^53, a negative call count, an alias past the sites): the reader refuses
 * the file or the read naming the dataset, or reads the element as not
 * observed (NaN); it never gives the number back as a value (the alias:
 * resdiag_reader_alias refuses it, or reads it as the site's own tensor). */
static const struct {
    const char *file, *dataset;
    int64_t bad;
} bad_ints[] = {
    { "s2-counts-negative.h5", "forward/site_counts", -5 },
    { "s2-counts-huge.h5", "forward/site_counts", (int64_t)1 << 62 },
    { "s2-calls-negative.h5", "forward/site_calls", -3 },
    { "s2-alias-range.h5", "forward/site_alias", 100 },
};

START_TEST(integers_out_of_range)
{
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++) {
        const char *file = bad_ints[i].file, *ds = bad_ints[i].dataset;
        resdiag_reader *rd = NULL;
        g_last[0] = 0;
        resdiag_status st = resdiag_reader_open(&rd, run(file));
        if (st != RESDIAG_OK) {
            ck_assert_msg(st == RESDIAG_E_FORMAT && strstr(g_last, ds), "%s: open: %s (%s)",
                          file, resdiag_strerror(st), g_last);
            continue;
        }
        if (strstr(ds, "_alias")) {
            /* the reader's meaning of it: another site's index, or its own */
            int same = 0;
            g_last[0] = 0;
            st = resdiag_reader_alias(rd, 0, RESDIAG_FORWARD, 0, 0, (resdiag_site)0, &same);
            ck_assert_msg((st == RESDIAG_OK && same == -1) || st == RESDIAG_E_FORMAT,
                          "%s: alias read as %s, site %d (written %lld; %s)", file,
                          resdiag_strerror(st), same, (long long)bad_ints[i].bad, g_last);
            resdiag_reader_destroy(rd);
            continue;
        }
        /* the element written: the first of the dataset, at step 0; its
         * place in the record is the first of the table of that name, or
         * for the counts the row count of the first slot of site_stats */
        int counts = strstr(ds, "_counts") != NULL;
        const char *table = counts ? "forward/site_stats" : ds;
        int64_t dims[8];
        int rank = 0;
        ck_assert_int_eq(resdiag_reader_dims(rd, table, dims, 8, &rank), RESDIAG_OK);
        size_t per = 1;
        for (int k = 1; k < rank; k++) per *= (size_t)dims[k];
        double *v = calloc(per, sizeof *v);
        g_last[0] = 0;
        st = resdiag_reader_read(rd, table, 0, 1, v, per);
        double got = counts ? v[RESDIAG_FIELD_ROWS] : v[0];
        ck_assert_msg((st == RESDIAG_OK && isnan(got))
                      || (st != RESDIAG_OK && strstr(g_last, ds)),
                      "%s: %s read as %s, element %.17g (written %lld; %s)", file, ds,
                      resdiag_strerror(st), got, (long long)bad_ints[i].bad, g_last);
        free(v);
        /* and the analysis: a verdict or a refusal, no crash */
        resdiag_analysis *an = NULL;
        if (resdiag_analyze(rd, NULL, &an) == RESDIAG_OK)
            resdiag_analysis_destroy(an);
        resdiag_reader_destroy(rd);
    }
}
END_TEST

/* Files that claim far more than they hold: a chunk that inflates to 256
 * MiB, 3e9 steps of nothing. In a child: open, read step 0 and the last
 * step of every dataset, analyse; every call OK or refused with a message.
 * The child must finish in 10 s and never hold 256 MiB (its address space
 * is capped at 1 GiB, but under ASan, so that a reader that inflates
 * without bound fails here, not on the machine). */
static int bomb_child(const char *file)
{
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, run(file)) != RESDIAG_OK)
        return g_last[0] ? 0 : 1;
    int64_t n = resdiag_reader_info(rd)->n_steps;
    for (int d = 0; d < resdiag_reader_n_datasets(rd); d++) {
        const char *name = resdiag_reader_dataset_name(rd, d);
        int64_t dims[8];
        int rank = 0;
        if (resdiag_reader_dims(rd, name, dims, 8, &rank) != RESDIAG_OK || rank < 1)
            continue;
        size_t per = 1;
        for (int k = 1; k < rank; k++) per *= (size_t)dims[k];
        double *v = malloc(per * sizeof *v);
        for (int64_t at = 0; v && n > 0 && at < n; at = at == n - 1 ? n : n - 1) {
            g_last[0] = 0;
            if (resdiag_reader_read(rd, name, at, 1, v, per) != RESDIAG_OK && !g_last[0])
                return 2;
        }
        free(v);
    }
    resdiag_analysis *an = NULL;
    g_last[0] = 0;
    if (resdiag_analyze(rd, NULL, &an) == RESDIAG_OK)
        resdiag_analysis_destroy(an);
    else if (!g_last[0])
        return 3;
    resdiag_reader_destroy(rd);
    return 0;
}

START_TEST(bombs_are_bounded)
{
    static const char *const bombs[] = { "s2-bomb-chunk.h5", "s2-steps-3g.h5" };
    const char *file = bombs[_i];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL); /* Check's handler kills the whole process group */
        alarm(10);
#ifndef __SANITIZE_ADDRESS__
        struct rlimit as = { (rlim_t)1 << 30, (rlim_t)1 << 30 };
        setrlimit(RLIMIT_AS, &as);
#endif
        _exit(bomb_child(file));
    }
    int status = 0;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &status, 0, &ru), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double mib = (double)ru.ru_maxrss / 1024.0;
    fprintf(stderr, "%s: %.2f s, peak %.0f MiB, status %#x\n", file, secs, mib, status);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s: the child ended with status %#x (SIGALRM: over 10 s)", file, status);
    ck_assert_msg(mib < 256, "%s: the reader held %.0f MiB", file, mib);
}
END_TEST

/* Every chunk of /forward/site_stats is its deflate stream, whole, then 4
 * bytes more: the file opens (the stored sizes are within the bound), and
 * each step's read is refused naming the dataset and the step. The same
 * streams without the bytes (base.h5) read. */
START_TEST(trailing_bytes_are_refused)
{
    double row[5 * 1 * RESDIAG_N_BLOCK_SITES * RESDIAG_N_FIELDS]; /* 5 layers, 1 sublayer */
    const size_t n = sizeof row / sizeof row[0];
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, run("base.h5")), RESDIAG_OK);
    for (int64_t step = 0; step < 3; step++)
        ck_assert_int_eq(resdiag_reader_read(rd, "forward/site_stats", step, 1, row, n),
                         RESDIAG_OK);
    resdiag_reader_destroy(rd);
    ck_assert_int_eq(resdiag_reader_open(&rd, run("s2-chunk-trailing.h5")), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    for (int64_t step = 0; step < 3; step++) {
        char want[128];
        snprintf(want, sizeof want, "dataset /forward/site_stats, step %lld: its chunk has 4 "
                 "bytes after the end of its deflate stream", (long long)step);
        g_last[0] = 0;
        ck_assert_int_eq(resdiag_reader_read(rd, "forward/site_stats", step, 1, row, n),
                         RESDIAG_E_FORMAT);
        ck_assert_msg(strstr(g_last, want) != NULL, "step %lld: message: %s", (long long)step,
                      g_last);
    }
    double f[RESDIAG_N_FIELDS];
    int observed = 1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f,
                                         &observed), RESDIAG_E_FORMAT);
    ck_assert_int_eq(observed, 0);
    resdiag_analysis *an = (resdiag_analysis *)1;
    ck_assert_int_ne(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    ck_assert_ptr_null(an);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(read_errors_are_errors)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, run("bad-chunk-index.h5")), RESDIAG_OK);
    ck_assert_int_gt(resdiag_reader_info(rd)->n_steps, 0);
    double f[RESDIAG_N_FIELDS];
    int observed = 1;
    g_last[0] = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f,
                                         &observed), RESDIAG_E_IO);
    ck_assert_int_eq(observed, 0);
    ck_assert_msg(strstr(g_last, "forward/site_stats") != NULL, "message: %s", g_last);
    double row[5 * 1 * RESDIAG_N_BLOCK_SITES * RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_read(rd, "forward/site_stats", 0, 1, row,
                                         sizeof row / sizeof row[0]), RESDIAG_E_IO);
    resdiag_analysis *an = (resdiag_analysis *)1;
    ck_assert_int_ne(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    ck_assert_ptr_null(an);
    resdiag_reader_destroy(rd);
    /* deflated chunks: their index is walked at open (the expansion bound) */
    g_last[0] = 0;
    rd = (resdiag_reader *)1;
    ck_assert_int_eq(resdiag_reader_open(&rd, run("bad-chunk-index-deflated.h5")), RESDIAG_E_IO);
    ck_assert_ptr_null(rd);
    ck_assert_msg(strstr(g_last, "forward/site_stats") != NULL, "message: %s", g_last);
}
END_TEST

/* The message of a request past the end used to compute first + count - 1,
 * which overflows for count = INT64_MAX (UBSan: signed integer overflow). */
START_TEST(huge_count_message)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, run("base.h5")), RESDIAG_OK);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    ck_assert_int_eq(n, 3);
    double v[4];
    g_last[0] = 0;
    ck_assert_int_eq(resdiag_reader_read(rd, "steps", 1, INT64_MAX, v, 4), RESDIAG_E_NOT_FOUND);
    ck_assert_msg(strstr(g_last, "holds 3 steps; asked for 9223372036854775807 from index 1"),
                  "message: %s", g_last);
    ck_assert_int_eq(resdiag_reader_read(rd, "steps", INT64_MAX, INT64_MAX, v, 4),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_read(rd, "steps", 0, 3, v, 4), RESDIAG_OK);
    ck_assert(v[0] == 0 && v[1] == 1 && v[2] == 2);
    resdiag_reader_destroy(rd);
    unsigned state = 0;
    ck_assert_int_ge(H5PLget_loading_state(&state), 0);
    ck_assert_uint_eq(state, H5PL_ALL_PLUGIN);
}
END_TEST

/* Dimension scales are for other readers: resdiag follows none, so scales
 * that point nowhere change nothing it reads or reports. */
START_TEST(dangling_scales_are_ignored)
{
    resdiag_reader *base = NULL, *rd = NULL;
    g_last[0] = 0;
    ck_assert_int_eq(resdiag_reader_open(&base, run("base.h5")), RESDIAG_OK);
    ck_assert_msg(resdiag_reader_open(&rd, run("scales-dangling.h5")) == RESDIAG_OK, "%s", g_last);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, resdiag_reader_info(base)->n_steps);
    double a[5 * 1 * RESDIAG_N_BLOCK_SITES * RESDIAG_N_FIELDS], b[sizeof a / sizeof a[0]];
    size_t n = sizeof a / sizeof a[0];
    for (int64_t i = 0; i < resdiag_reader_info(rd)->n_steps; i++) {
        ck_assert_int_eq(resdiag_reader_read(base, "forward/site_stats", i, 1, a, n), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_read(rd, "forward/site_stats", i, 1, b, n), RESDIAG_OK);
        ck_assert_mem_eq(a, b, sizeof a);
    }
    resdiag_analysis *an = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    char *text = resdiag_analysis_to_text(an);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "layer"));
    resdiag_free(text);
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
    resdiag_reader_destroy(base);
}
END_TEST

/* The crafted runs (MAKE_HOSTILE_RUNS), the plugin (PLUGIN.so) where HDF5
 * looks for filters, the secret a run must not leak, in the scratch
 * directory. */
static int make_the_runs(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MAKE_HOSTILE_RUNS PLUGIN.so\n", argv[0]);
        return EXIT_FAILURE;
    }
    char plugins[320], secret_file[320], fifo[320], cmd[2048];
    snprintf(g_runs, sizeof g_runs, "%s/runs", g_dir);
    snprintf(plugins, sizeof plugins, "%s/plugins", g_dir);
    snprintf(g_marker, sizeof g_marker, "%s/plugin-loaded", g_dir);
    snprintf(secret_file, sizeof secret_file, "%s/secret.txt", g_dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
    snprintf(g_secret, sizeof g_secret, "resdiag-secret-%ld", (long)getpid());
    FILE *s = fopen(secret_file, "w");
    if (!s || fprintf(s, "%s\n", g_secret) < 0 || fclose(s) != 0 || mkfifo(fifo, 0600) != 0
        || mkdir(g_runs, 0700) != 0 || mkdir(plugins, 0700) != 0) {
        perror("set-up");
        return EXIT_FAILURE;
    }
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/' && timeout 60 '%s' '%s' '%s' '%s'", argv[2],
             plugins, argv[1], g_runs, secret_file, fifo);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot make the hostile runs: %s\n", cmd);
        return EXIT_FAILURE;
    }
    /* before HDF5 starts: it reads HDF5_PLUGIN_PATH once */
    setenv("HDF5_PLUGIN_PATH", plugins, 1);
    setenv("RESDIAG_TEST_PLUGIN_MARKER", g_marker, 1);
    resdiag_set_log_handler(keep_message, NULL);
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "hostile",
    .timeout = 60,
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .remove_files = 1,
    .start = make_the_runs,
};
CHECK_MAIN(&program,
           CHECK_TEST(refused_at_open),
           CHECK_TEST(read_errors_are_errors),
           CHECK_TEST(trailing_bytes_are_refused),
           CHECK_TEST(huge_count_message),
           CHECK_TEST(dangling_scales_are_ignored),
           CHECK_TEST(schema_4_is_newer),
           CHECK_TEST(integers_out_of_range),
           CHECK_LOOP(bombs_are_bounded, 0, 2))
