/*
 * make-inference-runs.c - writes forward-only runs as a decoder and an
 * evaluation loop record them (doc/INSTRUMENTING.md), for
 * tests/tool/test-declared.sh:
 *   inference.h5   run_kind inference: 2 sequences x 3 decoding steps,
 *                  step = seq * T + pos (the counter that keeps increasing),
 *                  with the same forward also run outside any step
 *   evaluation.h5  run_kind evaluation: 3 evaluation batches
 * Both are pre-norm blocks (LayerNorm, a random linear branch), forward
 * only: no backward hook, no parameter gradient. Usage: make-inference-runs DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "resdiag.h"

enum { L = 3, S = 2, D = 16, ROWS = 8, T = 3 };

static int die(const char *what)
{
    fprintf(stderr, "make-inference-runs: %s\n", what);
    exit(1);
}

static unsigned rng = 12345;
static double gauss(void)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 1664525u + 1013904223u;
        u += (rng >> 8) / 16777216.0;
    }
    return u - 6;
}

static void layernorm(float *out, const float *in)
{
    for (int i = 0; i < ROWS; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < D; j++)
            m += in[i * D + j];
        m /= D;
        for (int j = 0; j < D; j++)
            v += (in[i * D + j] - m) * (in[i * D + j] - m);
        v /= D;
        for (int j = 0; j < D; j++)
            out[i * D + j] = (float)((in[i * D + j] - m) / sqrt(v + 1e-5));
    }
}

static float w[L * S][D * D];

/* One forward pass of the model with every block site observed; outside
 * a step the hooks are no-ops (a validation forward between steps). */
static void forward(resdiag *r)
{
    float x[ROWS * D], n[ROWS * D], f[ROWS * D], y[ROWS * D];
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (float)gauss();
    if (RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, ROWS, D)) != RESDIAG_OK)
        die("embed_out");
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            layernorm(n, x);
            for (int i = 0; i < ROWS; i++)
                for (int j = 0; j < D; j++) {
                    double acc = 0;
                    for (int k = 0; k < D; k++)
                        acc += n[i * D + k] * w[l * S + s][k * D + j];
                    f[i * D + j] = (float)acc;
                }
            for (int i = 0; i < ROWS * D; i++)
                y[i] = x[i] + f[i];
            if (RESDIAG_FWD(r, l, s, RESDIAG_STREAM_IN, resdiag_f32(x, ROWS, D)) ||
                RESDIAG_FWD(r, l, s, RESDIAG_NORM_IN, resdiag_f32(x, ROWS, D)) ||
                RESDIAG_FWD(r, l, s, RESDIAG_NORM_OUT, resdiag_f32(n, ROWS, D)) ||
                RESDIAG_FWD(r, l, s, RESDIAG_BRANCH_OUT, resdiag_f32(f, ROWS, D)) ||
                RESDIAG_FWD(r, l, s, RESDIAG_STREAM_OUT, resdiag_f32(y, ROWS, D)))
                die("a block hook");
            memcpy(x, y, sizeof x);
        }
    layernorm(n, x);
    if (RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(x, ROWS, D)) ||
        RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(n, ROWS, D)))
        die("final norm hooks");
}

static resdiag *open_run(const char *dir, const char *name, resdiag_run_kind kind)
{
    static const char *const names[S] = { "attn", "mlp" };
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = names });
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    m.norm_kind = RESDIAG_NORM_LAYERNORM;
    m.run_kind = kind;
    m.description = "forward-only pre-norm model from tests/helpers/make-inference-runs.c";
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, NULL) != RESDIAG_OK)
        die("resdiag_open");
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: make-inference-runs DIR");
    for (int i = 0; i < L * S; i++)
        for (int j = 0; j < D * D; j++)
            w[i][j] = (float)(gauss() * 0.5 / sqrt(D));

    /* a decoder: the position restarts with each sequence, the step does not */
    resdiag *r = open_run(argv[1], "inference.h5", RESDIAG_RUN_INFERENCE);
    for (int seq = 0; seq < 2; seq++) {
        for (int pos = 0; pos < T; pos++) {
            if (resdiag_step_begin(r, (int64_t)seq * T + pos) != RESDIAG_OK)
                die("step_begin");
            forward(r);
            if (resdiag_step_end(r) != RESDIAG_OK)
                die("step_end");
        }
        forward(r); /* e.g. scoring the sequence: outside any step, not recorded */
    }
    if (resdiag_close(r) != RESDIAG_OK)
        die("close");
    resdiag_destroy(r);

    r = open_run(argv[1], "evaluation.h5", RESDIAG_RUN_EVALUATION);
    for (int batch = 0; batch < 3; batch++) {
        if (resdiag_step_begin(r, batch) != RESDIAG_OK)
            die("step_begin");
        forward(r);
        if (resdiag_step_end(r) != RESDIAG_OK)
            die("step_end");
    }
    if (resdiag_close(r) != RESDIAG_OK)
        die("close");
    resdiag_destroy(r);
    return 0;
}
