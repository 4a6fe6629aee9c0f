/*
 * depth.c - how the stream and the updates behave over depth at the
 * analysed step (a->depth, depth.h): the mean token norm, RMS and energy
 * of the stream x_k for k = 0..L with the fits ||x_k||^2 = a + b k and
 * log ||x_k|| against log k, its growth, each layer's normalization
 * signature, massive activations; the log-log fits of the relative
 * updates r = ||dx||/||x|| per sublayer (placement.c loads them).
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/phases.h"

/* Massive activations: one value this many times the mean per-token RMS.
 * A single column can be at most sqrt(d) times its token's RMS (when it
 * holds all the energy), and Gaussian-like tensors reach 4-5 times: warn
 * above max(MASSIVE_MIN, sqrt(d)/2), i.e. when one column carries a quarter
 * of a token's energy or more. */
#define MASSIVE_MIN RD_MASSIVE_MIN

/* x_kk's numbers into d; for a layer output (kk > 0) also the layer's
 * signature and a massive activation (warnings.c words it). */
static void stream_point(rd_depth *d, int d_model, int kk, const double *f, int obs)
{
    d->xnorm[kk] = obs ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    d->xrms[kk] = obs ? f[RESDIAG_FIELD_TOK_RMS_MEAN] : NAN;
    d->xenergy[kk] = obs && f[RESDIAG_FIELD_ROWS] > 0
                         ? f[RESDIAG_FIELD_FROB] * f[RESDIAG_FIELD_FROB] / f[RESDIAG_FIELD_ROWS]
                         : NAN;
    if (kk == 0)
        return;
    d->layer_sig[kk - 1] = obs ? rd_signature(f, rd_unnorm_cv(d_model)) : RD_SIG_UNKNOWN;
    d->layer_cv[kk - 1] = obs ? rd_cv_of(f) : NAN;
    if (obs && f[RESDIAG_FIELD_ABSMAX] >
                   fmax(MASSIVE_MIN, 0.5 * sqrt(d_model)) * f[RESDIAG_FIELD_TOK_RMS_MEAN])
        d->massive[d->n_massive++] = (rd_massive){ kk - 1, f[RESDIAG_FIELD_ABSMAX],
                                                   f[RESDIAG_FIELD_ABSMAX_COL],
                                                   f[RESDIAG_FIELD_TOK_RMS_MEAN] };
}

/* Where the signature decides the verdict (no relations: verdict.c): a
 * layer between the thresholds is "not normalized" when its spread is 100
 * times that of the layers of the same run that are clearly normalized
 * (f32 norm outputs spread by ~1e-8, a pre-norm sublayer on top of a
 * normalized stream by ~1e-3): the run's own noise floor. */
static void signature_against_run(rd_depth *d, int L)
{
    double max_norm_cv = -1;
    for (int l = 0; l < L; l++)
        if (d->layer_sig[l] == RD_SIG_NORMALIZED && d->layer_cv[l] > max_norm_cv)
            max_norm_cv = d->layer_cv[l];
    for (int l = 0; l < L; l++)
        if (d->layer_sig[l] == RD_SIG_UNCLEAR && max_norm_cv >= 0 &&
            d->layer_cv[l] > 100 * fmax(max_norm_cv, 1e-9))
            d->layer_sig[l] = RD_SIG_NOT;
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
    rd_depth *d = &a->depth;
    d->growth = NAN;
    d->xnorm = calloc((size_t)L + 1, sizeof *d->xnorm);
    d->xrms = calloc((size_t)L + 1, sizeof *d->xrms);
    d->xenergy = calloc((size_t)L + 1, sizeof *d->xenergy);
    d->layer_sig = calloc((size_t)L, sizeof *d->layer_sig);
    d->layer_cv = calloc((size_t)L, sizeof *d->layer_cv);
    d->massive = calloc((size_t)L, sizeof *d->massive);
    double *k = calloc((size_t)L + 1, sizeof *k);
    if (!d->xnorm || !d->xrms || !d->xenergy || !d->layer_sig || !d->layer_cv || !d->massive ||
        !k) {
        free(k);
        return RESDIAG_E_NOMEM;
    }
    for (int kk = 0; kk <= L; kk++)
        k[kk] = kk;
    resdiag_status st = RESDIAG_OK;
    int first = -1;
    for (int kk = 0; kk <= L; kk++) {
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        if ((st = rd_analysis_stream_at(rd, a, a->load.step_index, kk, f, &obs)))
            goto out;
        stream_point(d, a->load.d_model, kk, f, obs);
        if (kk > 0 && obs && first < 0)
            first = kk;
    }
    /* over the layer outputs k = 1..L: the embedding is no norm output
     * even in a post-norm model, and would make a constant look linear */
    rd_fit_line(k + 1, d->xenergy + 1, L, &d->fit_energy);
    rd_fit_loglog(k + 1, d->xnorm + 1, L, &d->fit_xlog);
    if (first > 0 && first < L && d->xnorm[first] > 0 && isfinite(d->xnorm[L]))
        d->growth = d->xnorm[L] / d->xnorm[first];
    if (!a->observe.use_relations)
        signature_against_run(d, L);
    st = fit_updates(a, k);
out:
    free(k);
    return st;
}
