/*
 * measures.c - the quantities the consequences speak of (a->measures,
 * measures.h), from what the phases before loaded:
 *  - the gradient exponent: gradients.c's log-log fit of each layer
 *    parameter's ||dL/dW_k|| against k (its 95% Student-t interval, n-2
 *    degrees of freedom, from the fit's residuals), the last layer's over
 *    the first's, and 1/sqrt(L);
 *  - the effective depth at the analysed step: block k's share of the
 *    final state, first order: removing block k's updates moves x_L by
 *    ||sum_s f_ks|| ~ sqrt(sum_s (r_ks ||x_ks||_F)^2) (the sublayers'
 *    updates taken as independent), over ||x_L||_F; and the fit of log
 *    share against log k (O(1/sqrt(N)) is a slope of -1/2);
 *  - each branch's scale at the first complete step: the median over
 *    layers of r, zero at or below RD_INIT_ZERO_R (what float rounding
 *    leaves of an exactly zero branch), SmallInit-like at or below
 *    RD_INIT_SMALL_R (a branch a tenth of the stream: Xavier or default
 *    inits give r of order 0.3 to 1 on a unit-scale stream);
 *  - the learning-rate schedule of the metric named "lr".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void grad_exponent(rd_analysis *a)
{
    rd_measures *m = &a->measures;
    int L = a->load.n_layers, P = a->load.n_layer_params;
    m->grad_step = a->gradients.step;
    m->inv_sqrt_l = L > 0 ? 1 / sqrt((double)L) : NAN;
    for (int p = 0; p < P && p < RESDIAG_MAX_PARAMS; p++) {
        double g0 = a->gradients.grad[p], g1 = a->gradients.grad[(size_t)(L - 1) * P + p];
        m->grad_last_over_first[p] = m->grad_step >= 0 && g0 > 0 && g1 > 0 ? g1 / g0 : NAN;
    }
}

static resdiag_status effective_depth(const resdiag_reader *rd, rd_analysis *a)
{
    rd_measures *m = &a->measures;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    int64_t si = a->load.step_index;
    double f[RESDIAG_N_FIELDS];
    int obs = 0;
    resdiag_status st;
    m->growth = a->depth.growth;
    m->share_last_over_first = NAN;
    if (!(m->share = malloc((size_t)L * sizeof *m->share)))
        return RESDIAG_E_NOMEM;
    for (int l = 0; l < L; l++)
        m->share[l] = NAN;
    if ((st = rd_analysis_stream_at(rd, a, si, L, f, &obs)))
        return st;
    double xl = obs ? f[RESDIAG_FIELD_FROB] : NAN;
    if (!(xl > 0))
        return RESDIAG_OK;
    for (int l = 0; l < L; l++) {
        double sum = 0;
        int ok = 1;
        for (int s = 0; s < S && ok; s++) {
            double r = a->placement.r[l * S + s];
            if ((st = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, l, s, RESDIAG_STREAM_IN, f,
                                       &obs)))
                return st;
            ok = obs && isfinite(r) && isfinite(f[RESDIAG_FIELD_FROB]);
            if (ok)
                sum += (r * f[RESDIAG_FIELD_FROB]) * (r * f[RESDIAG_FIELD_FROB]);
        }
        if (ok)
            m->share[l] = sqrt(sum) / xl;
    }
    double *k = malloc((size_t)L * sizeof *k);
    if (!k)
        return RESDIAG_E_NOMEM;
    for (int l = 0; l < L; l++)
        k[l] = l + 1;
    rd_fit_loglog(k, m->share, L, &m->share_fit);
    free(k);
    if (L > 1 && m->share[0] > 0 && isfinite(m->share[L - 1]))
        m->share_last_over_first = m->share[L - 1] / m->share[0];
    return RESDIAG_OK;
}

static resdiag_status init_scale(rd_analysis *a)
{
    rd_measures *m = &a->measures;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    m->init_step = a->aborted.first_index;
    double *v = malloc((size_t)L * sizeof *v);
    if (!v)
        return RESDIAG_E_NOMEM;
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        int n = 0;
        for (int l = 0; l < L; l++)
            if (isfinite(a->placement.r_first[l * S + s]))
                v[n++] = a->placement.r_first[l * S + s];
        m->init_r[s] = NAN;
        m->init_class[s] = RD_INIT_UNKNOWN;
        if (!n)
            continue;
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        m->init_r[s] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        m->init_class[s] = m->init_r[s] <= RD_INIT_ZERO_R    ? RD_INIT_ZERO
                           : m->init_r[s] <= RD_INIT_SMALL_R ? RD_INIT_SMALL
                                                             : RD_INIT_DEFAULT;
    }
    free(v);
    return RESDIAG_OK;
}

/* Warm-up: the first given lr below RD_WARMUP_START of the peak, which
 * comes later; its length the steps from the first given one to the first
 * at the peak (RD_WARMUP_END), both counted. Only the recorded steps are seen: with
 * record_every > 1 a warm-up shorter than it can be missed. */
static void lr_schedule(rd_analysis *a)
{
    rd_measures *m = &a->measures;
    m->lr_state = RD_LR_NOT_RECORDED;
    m->lr_first = m->lr_peak = NAN;
    m->lr_first_step = m->lr_peak_step = m->warmup_steps = -1;
    int lm = -1;
    for (int i = 0; i < a->metrics.count; i++)
        if (strcmp(a->metrics.names[i], "lr") == 0)
            lm = i;
    if (lm < 0)
        return;
    const double *v = a->metrics.values + (size_t)lm * a->load.n_steps;
    int n = 0;
    int64_t first = -1, peak = -1;
    for (int64_t i = 0; i < a->load.n_steps; i++) {
        if (!isfinite(v[i]) || rd_analysis_step_aborted(a, i))
            continue;
        n++;
        if (first < 0)
            first = i;
        if (peak < 0 || v[i] > v[peak])
            peak = i;
    }
    m->lr_state = RD_LR_TOO_FEW;
    if (n < 2)
        return;
    m->lr_first = v[first];
    m->lr_peak = v[peak];
    m->lr_first_step = a->load.steps[first];
    m->lr_peak_step = a->load.steps[peak];
    if (!(v[first] < RD_WARMUP_START * v[peak]) || peak <= first) {
        m->lr_state = RD_LR_NO_WARMUP;
        return;
    }
    m->lr_state = RD_LR_WARMUP;
    for (int64_t i = first; i <= peak; i++)
        if (isfinite(v[i]) && !rd_analysis_step_aborted(a, i) &&
            v[i] >= RD_WARMUP_END * v[peak]) {
            m->warmup_steps = a->load.steps[i] - a->load.steps[first] + 1;
            break;
        }
}

resdiag_status rd_analysis_measures(const resdiag_reader *rd, rd_analysis *a)
{
    resdiag_status st;
    grad_exponent(a);
    if ((st = effective_depth(rd, a)) || (st = init_scale(a)))
        return st;
    lr_schedule(a);
    return RESDIAG_OK;
}
