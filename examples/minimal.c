/*
 * minimal.c - the smallest instrumented program: a two-layer pre-norm toy
 * block, x + F(Norm(x)), observed at every site for three steps.
 * Usage: minimal [run.h5]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <resdiag.h>

enum { L = 2, T = 8, D = 16 };  /* layers, tokens (rows), d_model (cols) */

static void rmsnorm(float *out, const float *x)  /* out, x: (T, D) */
{
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[t * D + i] * x[t * D + i];
        float s = (float)(1.0 / sqrt(ss / D + 1e-5));
        for (int i = 0; i < D; i++) out[t * D + i] = x[t * D + i] * s;
    }
}

int main(int argc, char **argv)
{
    static float x[T * D], n[T * D], f[T * D], w[L][D * D];
    for (int i = 0; i < T * D; i++) x[i] = (float)sin(i);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < D * D; i++) w[l][i] = 0.3f * (float)cos(i * (l + 2));

    const char *subs[] = { "mlp" };
    resdiag_model model;
    resdiag_model_init(&model);
    model.n_layers = L;
    model.d_model = D;
    model.n_sublayers = 1;
    model.sublayer_names = subs;
    model.declared_placement = RESDIAG_PLACEMENT_PRE;
    model.norm_kind = RESDIAG_NORM_RMSNORM;
    resdiag *rd = NULL;  /* if open fails, rd stays NULL and every hook is a no-op */
    resdiag_open(&rd, argc > 1 ? argv[1] : "run.h5", &model, NULL);

    for (int step = 0; step < 3; step++) {
        resdiag_step_begin(rd, step);
        for (int l = 0; l < L; l++) {
            RESDIAG_FWD(rd, l, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D));
            RESDIAG_FWD(rd, l, 0, RESDIAG_NORM_IN, resdiag_f32(x, T, D));
            rmsnorm(n, x);
            RESDIAG_FWD(rd, l, 0, RESDIAG_NORM_OUT, resdiag_f32(n, T, D));
            for (int t = 0; t < T; t++)  /* F = tanh(W n) */
                for (int i = 0; i < D; i++) {
                    float s = 0;
                    for (int j = 0; j < D; j++) s += w[l][i * D + j] * n[t * D + j];
                    f[t * D + i] = tanhf(s);
                }
            RESDIAG_FWD(rd, l, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, T, D));
            for (int i = 0; i < T * D; i++) x[i] += f[i];  /* the residual add, in place */
            RESDIAG_FWD(rd, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
        }
        resdiag_step_end(rd);
    }
    int status = resdiag_close(rd);
    resdiag_destroy(rd);
    if (!rd || status) return 1;
    printf("wrote %s\n", argc > 1 ? argv[1] : "run.h5");
    return 0;
}
