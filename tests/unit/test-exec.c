/*
 * test-exec.c - no descriptor of a run file reaches a program that the
 * trainer (or a reader's program) executes while the file is open
 * (doc/USING.md, "Files and descriptors"): neither the writer's lock nor
 * HDF5's own descriptor of the file, for a new run, a replaced run, a
 * rank's file, a reader, and a reader of a job's rank files.
 *
 * The program is also its own exec'd child: test-exec --list-fds prints
 * "fd dev:ino" for each of its descriptors 0 .. 1023 that fstat() accepts.
 * The parent compares those with stat() of the run files, an identity the
 * library has no part in.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "rank-runs.h"
#include "resdiag.h"
#include "run-files.h"

static char self_path[4096];

/* The child (main, --list-fds). */
static int list_fds_main(void)
{
    for (int fd = 0; fd < 1024; fd++) {
        struct stat sb;
        if (fstat(fd, &sb) == 0)
            printf("%d %llu:%llu\n", fd, (unsigned long long)sb.st_dev,
                   (unsigned long long)sb.st_ino);
    }
    return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Runs this program with --list-fds (fork + exec, as system() does) and
 * returns how many of its descriptors are the file at path; what it
 * printed goes to seen (for the failure message). */
static int fds_in_child(const char *path, char *seen, size_t seen_len)
{
    struct stat want;
    ck_assert_msg(stat(path, &want) == 0, "%s is not there", path);
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl(self_path, self_path, "--list-fds", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    ck_assert_ptr_nonnull(f);
    char line[128];
    int found = 0, lines = 0;
    seen[0] = 0;
    while (fgets(line, sizeof line, f)) {
        int fd;
        unsigned long long dev, ino;
        ck_assert_int_eq(sscanf(line, "%d %llu:%llu", &fd, &dev, &ino), 3);
        lines++;
        if (dev == (unsigned long long)want.st_dev && ino == (unsigned long long)want.st_ino) {
            found++;
            size_t n = strlen(seen);
            snprintf(seen + n, seen_len - n, "%s%d", n ? ", " : "", fd);
        }
    }
    fclose(f);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
    ck_assert_int_ge(lines, 1); /* its stdout at least: it did list */
    return found;
}

static void assert_not_inherited(const char *path)
{
    char seen[256];
    int n = fds_in_child(path, seen, sizeof seen);
    ck_assert_msg(n == 0, "an exec'd child holds %d descriptor(s) of %s: fd %s", n, path, seen);
}

static void setup(void)
{
    ck_assert(check_one_make_dir(dir, sizeof dir, "exec"));
    log_count = 0;
    log_all[0] = 0;
    resdiag_set_log_handler(capture_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
}

static void teardown(void)
{
    remove_run_dir();
    resdiag_set_log_handler(NULL, NULL);
}

enum { L = 2, D = 8, T = 3 };

/* A run at name (rank `rank` of world_size), open, with one step on disk. */
static resdiag *open_with_step(const char *name, int overwrite, int rank, int world_size)
{
    resdiag_model m = mlp_model(L, D);
    m.rank = rank;
    m.world_size = world_size;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 1;
    o.overwrite = overwrite;
    resdiag *r = open_run_with(name, &m, &o);
    float x[T * D];
    for (int i = 0; i < T * D; i++)
        x[i] = 0.5f + (float)i;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    return r;
}

START_TEST(writer_keeps_the_run_file_from_exec)
{
    resdiag *r = open_with_step("run.h5", 0, 0, 1);
    assert_not_inherited(run_path("run.h5"));
    close_run(r);
}
END_TEST

/* Replacing a run opens the old file with HDF5 first (is it a run?). */
START_TEST(replaced_run_is_kept_from_exec)
{
    close_run(open_with_step("run.h5", 0, 0, 1));
    resdiag *r = open_with_step("run.h5", 1, 0, 1);
    assert_not_inherited(run_path("run.h5"));
    close_run(r);
}
END_TEST

START_TEST(rank_files_are_kept_from_exec)
{
    resdiag *r0 = open_with_step("run.h5", 0, 0, 2);
    resdiag *r1 = open_with_step("run.h5", 0, 1, 2);
    char rank1[600];
    ck_assert_int_eq(resdiag_rank_path(rank1, sizeof rank1, run_path("run.h5"), 1), RESDIAG_OK);
    assert_not_inherited(run_path("run.h5"));
    assert_not_inherited(rank1);
    close_run(r1);
    close_run(r0);
}
END_TEST

/* A reader keeps its file open for as long as the program wants. */
START_TEST(reader_keeps_the_run_file_from_exec)
{
    close_run(open_with_step("run.h5", 0, 0, 1));
    resdiag_reader *rd = read_run("run.h5");
    assert_not_inherited(run_path("run.h5"));
    resdiag_reader_destroy(rd);
}
END_TEST

/* Rank 0's reader opens every rank's file of the job. */
START_TEST(job_reader_keeps_every_rank_file_from_exec)
{
    const char *path = run_path("job.h5");
    for (int k = 0; k < 2; k++) {
        rr_part p = rr_whole(2);
        p.rows_lo = k * RR_T / 2;
        p.rows_hi = (k + 1) * RR_T / 2;
        rr_ranks rk = { k, 2, "data", 0, 0, 0, 1, "job-exec" };
        ck_assert_int_eq(rr_write_as(path, &p, 0, &rk), 0);
    }
    resdiag_reader *rd = read_run("job.h5");
    ck_assert_int_eq(resdiag_reader_info(rd)->n_ranks_merged, 2);
    char rank1[600];
    ck_assert_int_eq(resdiag_rank_path(rank1, sizeof rank1, path, 1), RESDIAG_OK);
    assert_not_inherited(path);
    assert_not_inherited(rank1);
    resdiag_reader_destroy(rd);
}
END_TEST

/* The child that lists its descriptors; else where this program is. */
static int child_mode_or_self_path(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list-fds") == 0)
        return list_fds_main();
    return realpath(argv[0], self_path) ? CHECK_GO_ON : EXIT_FAILURE;
}

static const check_program program = {
    .name = "exec",
    .start = child_mode_or_self_path,
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("exec", 60, setup, teardown),
               CHECK_TEST(writer_keeps_the_run_file_from_exec),
               CHECK_TEST(replaced_run_is_kept_from_exec),
               CHECK_TEST(rank_files_are_kept_from_exec),
               CHECK_TEST(reader_keeps_the_run_file_from_exec),
               CHECK_TEST(job_reader_keeps_every_rank_file_from_exec))
