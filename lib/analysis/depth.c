/*
 * depth.c - how the stream and the updates behave over depth: the mean
 * token norm, RMS and energy of the stream x_k for k = 0..L with the fits
 * ||x_k||^2 = a + b k and log ||x_k|| against log k, its growth, each
 * layer's normalization signature, massive activations; the log-log fits
 * of the relative updates r = ||dx||/||x|| per sublayer; and the same few
 * numbers at the first and the last recorded step (over training).
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/phases.h"

/* Massive activations: one value this many times the mean per-token RMS.
 * A single column can be at most sqrt(d) times its token's RMS (when it
 * holds all the energy), and Gaussian-like tensors reach 4-5 times: warn
 * above max(MASSIVE_MIN, sqrt(d)/2), i.e. when one column carries a quarter
 * of a token's energy or more. */
#define MASSIVE_MIN 6.0

/* x_kk's numbers into the analysis; for a layer output (kk > 0) also the
 * layer's signature and the massive-activation warning. */
static void stream_point(rd_analysis *a, int kk, const double *f, int obs)
{
    a->depth.xnorm[kk] = obs ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    a->depth.xrms[kk] = obs ? f[RESDIAG_FIELD_TOK_RMS_MEAN] : NAN;
    a->depth.xenergy[kk] = obs && f[RESDIAG_FIELD_ROWS] > 0
                         ? f[RESDIAG_FIELD_FROB] * f[RESDIAG_FIELD_FROB] / f[RESDIAG_FIELD_ROWS]
                         : NAN;
    if (kk == 0)
        return;
    a->depth.layer_sig[kk - 1] = obs ? rd_signature(f, rd_unnorm_cv(a->load.d_model)) : RD_SIG_UNKNOWN;
    a->depth.layer_cv[kk - 1] = obs ? rd_cv_of(f) : NAN;
    if (obs && f[RESDIAG_FIELD_ABSMAX] > fmax(MASSIVE_MIN, 0.5 * sqrt(a->load.d_model)) *
                                             f[RESDIAG_FIELD_TOK_RMS_MEAN])
        rd_analysis_warn(a, "massive activation: the stream leaving layer %d has |x| = %.3g in "
                         "column %.0f, %.1f times its mean per-token RMS %.3g", kk - 1,
                         f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL],
                         f[RESDIAG_FIELD_ABSMAX] / f[RESDIAG_FIELD_TOK_RMS_MEAN],
                         f[RESDIAG_FIELD_TOK_RMS_MEAN]);
}

/* r_k per sublayer type over all layers and over the deeper half; k holds
 * 0..L. */
static resdiag_status fit_updates(rd_analysis *a, const double *k)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    double *col = malloc((size_t)L * sizeof *col);
    if (!col)
        return RESDIAG_E_NOMEM;
    for (int s = 0; s < S && s < RD_MAX_RFIT; s++) {
        for (int l = 0; l < L; l++)
            col[l] = a->placement.r[l * S + s];
        rd_fit_loglog(k + 1, col, L, &a->depth.fit_r[s]);
        int h = L / 2;
        rd_fit_loglog(k + 1 + h, col + h, L - h, &a->depth.fit_r_deep[s]);
    }
    free(col);
    return RESDIAG_OK;
}

resdiag_status rd_analysis_depth(const resdiag_reader *rd, rd_analysis *a)
{
    int L = a->load.n_layers;
    double *k = calloc((size_t)L + 1, sizeof *k);
    if (!k)
        return RESDIAG_E_NOMEM;
    for (int kk = 0; kk <= L; kk++)
        k[kk] = kk;
    resdiag_status st = RESDIAG_OK;
    int first = -1;
    for (int kk = 0; kk <= L; kk++) {
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        if ((st = rd_analysis_stream_at(rd, a, a->load.step_index, kk, f, &obs)))
            goto out;
        stream_point(a, kk, f, obs);
        if (kk > 0 && obs && first < 0)
            first = kk;
    }
    /* over the layer outputs k = 1..L: the embedding is no norm output
     * even in a post-norm model, and would make a constant look linear */
    rd_fit_line(k + 1, a->depth.xenergy + 1, L, &a->depth.fit_energy);
    rd_fit_loglog(k + 1, a->depth.xnorm + 1, L, &a->depth.fit_xlog);
    if (first > 0 && first < L && a->depth.xnorm[first] > 0 && isfinite(a->depth.xnorm[L]))
        a->depth.growth = a->depth.xnorm[L] / a->depth.xnorm[first];
    st = fit_updates(a, k);
out:
    free(k);
    return st;
}

/* ------------------------------------------------------- over training */

/* Growth, mean r per sublayer and the first parameter's gradient ratio at
 * recorded step si, for the over-training summary. */
static resdiag_status training_point(const resdiag_reader *rd, rd_analysis *a, int64_t si, int j)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    double f[RESDIAG_N_FIELDS];
    int obs1 = 0, obsL = 0;
    resdiag_status st;
    if ((st = rd_analysis_stream_at(rd, a, si, 1, f, &obs1)))
        return st;
    double x1 = obs1 ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    if ((st = rd_analysis_stream_at(rd, a, si, L, f, &obsL)))
        return st;
    double xl = obsL ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    a->training.growth[j] = L > 1 && x1 > 0 ? xl / x1 : NAN;
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        double sum = 0;
        int m = 0;
        for (int l = 0; l < L; l++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            if ((st = resdiag_reader_update(rd, si, l, s, u)))
                return st;
            if (isfinite(u[0])) {
                sum += u[0];
                m++;
            }
        }
        a->training.mean_r[j][s] = m ? sum / m : NAN;
    }
    a->training.grad_ratio[j] = NAN;
    if (a->gradients.n_order > 0 && L > 1) {
        const char *name = a->load.param_names[a->gradients.param_order[0]];
        double g0[RESDIAG_N_FIELDS], g1[RESDIAG_N_FIELDS];
        int o0 = 0, o1 = 0;
        if ((st = resdiag_reader_param(rd, si, 0, name, g0, &o0)) ||
            (st = resdiag_reader_param(rd, si, L - 1, name, g1, &o1)))
            return st;
        if (o0 && o1 && g0[RESDIAG_FIELD_FROB] > 0)
            a->training.grad_ratio[j] = g1[RESDIAG_FIELD_FROB] / g0[RESDIAG_FIELD_FROB];
    }
    return RESDIAG_OK;
}

/* The first and the last complete step: an aborted step's records are
 * incomplete, so comparing it would show what the abort cut off. */
resdiag_status rd_analysis_training(const resdiag_reader *rd, rd_analysis *a)
{
    resdiag_status st = training_point(rd, a, a->aborted.first_index, 0);
    return st ? st : training_point(rd, a, a->aborted.last_index, 1);
}
