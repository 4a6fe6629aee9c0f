/*
 * training.c - what training made of the run, for the over-training
 * summary (a->training, training.h): the stream's growth, the mean
 * relative update per sublayer and the first shown parameter's gradient
 * ratio at the first and the last complete step (an aborted step's
 * records are incomplete: comparing it would show what the abort cut
 * off). What an earlier phase loaded is taken from it, not read again.
 */
#include <math.h>

#include "analysis/phases.h"

/* The mean token norm of x_kk (kk = 1..L) at recorded step si: depth.c's
 * where si is the analysed step, else read. */
static resdiag_status stream_norm(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                  int kk, double *x)
{
    if (si == a->load.step_index && kk <= a->load.n_layers) {
        *x = a->depth.xnorm[kk];
        return RESDIAG_OK;
    }
    double f[RESDIAG_N_FIELDS];
    int obs = 0;
    resdiag_status st = rd_analysis_stream_at(rd, a, si, kk, f, &obs);
    *x = obs ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    return st;
}

/* The gradient of the first shown parameter at its last over its first
 * layer at recorded step si, NaN without both (or a first one of 0):
 * gradients.c's where si is its step, else read. */
static resdiag_status grad_ratio(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                 double *ratio)
{
    const rd_gradients *g = &a->gradients;
    int L = a->load.n_layers, P = a->load.n_layer_params;
    *ratio = NAN;
    if (g->n_order <= 0 || L <= 1)
        return RESDIAG_OK;
    int p = g->param_order[0];
    if (si == g->step) {
        /* an unobserved gradient is NaN there */
        double g0 = g->grad[p], g1 = g->grad[(size_t)(L - 1) * P + p];
        if (g0 > 0)
            *ratio = g1 / g0;
        return RESDIAG_OK;
    }
    const char *name = a->load.param_names[p];
    double f0[RESDIAG_N_FIELDS], f1[RESDIAG_N_FIELDS];
    int o0 = 0, o1 = 0;
    resdiag_status st;
    if ((st = resdiag_reader_param(rd, si, 0, name, f0, &o0)) ||
        (st = resdiag_reader_param(rd, si, L - 1, name, f1, &o1)))
        return st;
    if (o0 && o1 && f0[RESDIAG_FIELD_FROB] > 0)
        *ratio = f1[RESDIAG_FIELD_FROB] / f0[RESDIAG_FIELD_FROB];
    return RESDIAG_OK;
}

/* Point j (0 the first complete step, 1 the last) at recorded step si;
 * r holds the relative updates there (placement.c's). */
static resdiag_status training_point(const resdiag_reader *rd, rd_analysis *a, int64_t si,
                                     const double *r, int j)
{
    rd_training *t = &a->training;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    double x1, xl;
    resdiag_status st;
    if ((st = stream_norm(rd, a, si, 1, &x1)) || (st = stream_norm(rd, a, si, L, &xl)))
        return st;
    t->growth[j] = L > 1 && x1 > 0 ? xl / x1 : NAN;
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        double sum = 0;
        int m = 0;
        for (int l = 0; l < L; l++)
            if (isfinite(r[l * S + s])) {
                sum += r[l * S + s];
                m++;
            }
        t->mean_r[j][s] = m ? sum / m : NAN;
    }
    return grad_ratio(rd, a, si, &t->grad_ratio[j]);
}

resdiag_status rd_analysis_training(const resdiag_reader *rd, rd_analysis *a)
{
    resdiag_status st = training_point(rd, a, a->aborted.first_index, a->placement.r_first, 0);
    return st ? st : training_point(rd, a, a->aborted.last_index, a->placement.r_last, 1);
}
