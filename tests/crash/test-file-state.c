/*
 * test-file-state.c - what a run file says of its writer, read while the
 * writer lives, after it was SIGKILLed, and after a clean close: the
 * reader's resdiag_reader_file_state and the report's words in text, JSON
 * and HTML ("still being written", "its writer did not close it (last
 * flush at step N)"), and that looking changes no byte of the file.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "run-files.h"
#include "resdiag.h"

enum { L = 2, D = 16, ROWS = 4, STEPS = 3 };

/* Writes STEPS steps (numbered 10, 11, 12) into r, flushing each. */
static void write_steps(resdiag *r)
{
    float x[ROWS * D];
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (float)((i * 7) % 13) - 6.0f;
    resdiag_tensor t = resdiag_f32(x, ROWS, D);
    for (int s = 0; s < STEPS; s++) {
        ck_assert_int_eq(resdiag_step_begin(r, 10 + s), RESDIAG_OK);
        for (int l = 0; l < L; l++) {
            ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, l, 0, RESDIAG_STREAM_IN, t,
                                                "t.c", 1), RESDIAG_OK);
            ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, l, 0, RESDIAG_STREAM_OUT, t,
                                                "t.c", 2), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
}

/* A child that writes the run at path and then waits, holding it open,
 * until it is killed; the parent goes on once the steps are flushed. */
static pid_t start_writer(const char *path)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        resdiag_model m = mlp_model(L, D);
        resdiag_options o;
        resdiag_options_init(&o);
        o.flush_steps = 1;
        resdiag *r = NULL;
        if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
            _exit(3);
        write_steps(r);
        if (resdiag_flush(r) != RESDIAG_OK || write(ready[1], "k", 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

/* The file's bytes, to show that reading its state changes none. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    struct stat sb;
    ck_assert_int_eq(fstat(fileno(f), &sb), 0);
    char *b = malloc((size_t)sb.st_size + 1);
    ck_assert_ptr_nonnull(b);
    *n = fread(b, 1, (size_t)sb.st_size, f);
    fclose(f);
    return b;
}

/* Reads path and checks its state and what each report says of it. */
static void expect(const char *path, resdiag_file_state want, const char *text_has,
                   const char *json_has)
{
    size_t n0, n1;
    char *before = slurp(path, &n0);
    resdiag_reader *rd = fixture_read(path);
    resdiag_file_state st = (resdiag_file_state)-1;
    ck_assert_int_eq(resdiag_reader_file_state(rd, &st), RESDIAG_OK);
    ck_assert_int_eq(st, want);
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    char *text = resdiag_analysis_to_text(a), *json = resdiag_analysis_to_json(a);
    char *html = resdiag_analysis_to_html(a, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(html);
    if (text_has) {
        ck_assert_msg(strstr(text, text_has), "text lacks \"%s\":\n%s", text_has, text);
        ck_assert_msg(strstr(html, text_has), "HTML lacks \"%s\"", text_has);
    } else {
        ck_assert_msg(!strstr(text, "  file: "), "a closed file is remarked on:\n%s", text);
    }
    ck_assert_msg(strstr(json, json_has), "JSON lacks %s", json_has);
    resdiag_free(text);
    resdiag_free(json);
    resdiag_free(html);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
    char *after = slurp(path, &n1);
    ck_assert_msg(n0 == n1 && memcmp(before, after, n0) == 0, "reading changed the file");
    free(before);
    free(after);
}

START_TEST(live_then_killed)
{
    const char *path = run_path("live.h5");
    pid_t pid = start_writer(path);
    expect(path, RESDIAG_FILE_WRITING, "still being written", "\"file_state\": \"being_written\"");
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    /* The last of steps 10, 11, 12 was flushed before the child signalled. */
    expect(path, RESDIAG_FILE_NOT_CLOSED, "its writer did not close it (last flush at step 12)",
           "\"file_state\": \"not_closed\"");
    remove_run("live.h5");
}
END_TEST

START_TEST(closed)
{
    resdiag_model m = mlp_model(L, D);
    resdiag *r = open_run_with("closed.h5", &m, NULL);
    write_steps(r);
    close_run(r);
    expect(run_path("closed.h5"), RESDIAG_FILE_CLOSED, NULL, "\"file_state\": \"closed\"");
    remove_run("closed.h5");
}
END_TEST

START_TEST(bad_calls)
{
    resdiag_file_state st;
    ck_assert_int_eq(resdiag_reader_file_state(NULL, &st), RESDIAG_E_NULL);
}
END_TEST

static const check_program program = { .name = "file-state", .timeout = 60, .scratch = dir,
                                       .scratch_size = sizeof dir, .remove_files = 1 };
CHECK_MAIN(&program, CHECK_TEST(live_then_killed), CHECK_TEST(closed), CHECK_TEST(bad_calls))
