/*
 * make-bad-runs.c - writes the run files of the bad-input table that
 * tests/tool/test-report.sh feeds to `resdiag report` and `resdiag check`:
 *   notrun.h5   an HDF5 file that is not a resdiag run
 *   newer.h5    a run whose schema_version says a newer resdiag wrote it
 *   empty.h5    a run closed before any step
 *   killed.h5   a run whose writer died (_exit) after 3 flushed steps
 *   nan.h5      a run where every tensor is NaN
 * Usage: make-bad-runs DIR
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "resdiag.h"

enum { L = 2, D = 16, ROWS = 8 };

static const char *dir;
static char *path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int die(const char *what)
{
    fprintf(stderr, "make-bad-runs: %s\n", what);
    exit(1);
}

static resdiag *open_run(const char *p, int flush_steps)
{
    static const char *const names[1] = { "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = 1,
        .sublayer_names = names });
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = flush_steps;
    resdiag *r = NULL;
    if (resdiag_open(&r, p, &m, &o) != RESDIAG_OK)
        die("resdiag_open");
    return r;
}

/* One pre-norm step with every site observed; value v fills the tensors
 * (NAN for the NaN run), else a small deterministic pattern. */
static void step(resdiag *r, int64_t s, float v)
{
    float x[ROWS * D], f[ROWS * D], y[ROWS * D], n[ROWS * D];
    for (int i = 0; i < ROWS * D; i++) {
        x[i] = isnan(v) ? v : (float)sin(i + 0.1 * s);
        f[i] = isnan(v) ? v : (float)(0.1 * cos(3.0 * i));
        y[i] = x[i] + f[i];
        n[i] = isnan(v) ? v : (float)((i % 2) ? 1 : -1);
    }
    if (resdiag_step_begin(r, s) != RESDIAG_OK)
        die("step_begin");
    for (int l = 0; l < L; l++) {
        RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_IN, resdiag_f32(x, ROWS, D));
        RESDIAG_FWD(r, l, 0, RESDIAG_NORM_IN, resdiag_f32(x, ROWS, D));
        RESDIAG_FWD(r, l, 0, RESDIAG_NORM_OUT, resdiag_f32(n, ROWS, D));
        RESDIAG_FWD(r, l, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, ROWS, D));
        RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(y, ROWS, D));
        memcpy(x, y, sizeof x);
        for (int i = 0; i < ROWS * D; i++)
            y[i] = x[i] + f[i];
    }
    if (resdiag_step_end(r) != RESDIAG_OK)
        die("step_end");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: make-bad-runs DIR");
    dir = argv[1];
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);

    /* an HDF5 file with a group and nothing of a run */
    hid_t f = H5Fcreate(path("notrun.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        die("H5Fcreate");
    hid_t g = H5Gcreate2(f, "/data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(f);

    /* a good run whose schema_version is then raised */
    resdiag *r = open_run(path("newer.h5"), 16);
    step(r, 0, 0);
    resdiag_close(r);
    resdiag_destroy(r);
    f = H5Fopen(path("newer.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        die("H5Fopen newer.h5");
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    int v = 99;
    if (a < 0 || H5Awrite(a, H5T_NATIVE_INT, &v) < 0)
        die("schema_version");
    H5Aclose(a);
    H5Fclose(f);

    /* no steps */
    r = open_run(path("empty.h5"), 16);
    resdiag_close(r);
    resdiag_destroy(r);

    /* the writer dies after three flushed steps */
    pid_t pid = fork();
    if (pid == 0) {
        resdiag *k = open_run(path("killed.h5"), 1);
        for (int s = 0; s < 3; s++)
            step(k, s, 0);
        _exit(0); /* no close, no atexit: as after SIGKILL */
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        die("killed writer");

    /* every tensor NaN */
    r = open_run(path("nan.h5"), 16);
    step(r, 0, NAN);
    step(r, 1, NAN);
    resdiag_close(r);
    resdiag_destroy(r);
    return 0;
}
