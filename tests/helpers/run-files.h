/*
 * run-files.h - the run files of a unit test in a scratch directory of its
 * own (dir, made by check_one_make_dir or a fixture): their paths, opening
 * one to write or to read (fixture.h's, at a path in dir), closing,
 * removing, a one-sublayer model; and a log handler that keeps every
 * message. Each helper asserts that its call succeeds.
 */
#ifndef RD_RUN_FILES_H
#define RD_RUN_FILES_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "resdiag.h"

static char dir[256];

/* Every message since the test began, one a line, and how many. */
static char log_all[16384];
static int log_count;

static inline void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    log_count++;
    size_t n = strlen(log_all);
    snprintf(log_all + n, sizeof log_all - n, "%s\n", msg);
}

/* capture_log as the library's handler (a check_program's prepare). */
static inline void capture_every_log(void)
{
    resdiag_set_log_handler(capture_log, NULL);
}

/* dir/name; the last 8 paths stay valid, so a call may take several. */
static inline const char *run_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static inline resdiag *open_run_with(const char *name, const resdiag_model *m,
                                     const resdiag_options *o)
{
    return fixture_open(run_path(name), m, o);
}

static inline resdiag_reader *read_run(const char *name)
{
    return fixture_read(run_path(name));
}

static inline void close_run(resdiag *r)
{
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

static inline void remove_run(const char *name)
{
    ck_assert_int_eq(unlink(run_path(name)), 0);
}

/* A model of n_layers layers of d_model columns, one sublayer "mlp" each. */
static inline resdiag_model mlp_model(int n_layers, int d_model)
{
    static const char *const mlp[1] = { "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = n_layers, .cols = d_model,
        .sublayers = 1, .sublayer_names = mlp });
    return m;
}

/* Removes dir with all in it (a fixture's teardown). */
static inline void remove_run_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

#endif
