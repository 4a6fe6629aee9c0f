/*
 * over_run.c - the conditions the report warns about, checked at every
 * recorded complete step and not only at the judged one (a->over_run,
 * over_run.h): a dominant or negligible relative update, the stream's
 * growth over depth above max_growth, a massive activation. Each record
 * is read once; the work is bounded by RD_SCAN_RECORDS records per kind,
 * beyond which an even sample of the steps is read (always with the first
 * and the last complete step and the judged one). warnings.c words them.
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/phases.h"

/* At most this many records read per kind (updates, stream): a few
 * seconds of reading at most, whatever the run's length. */
#define RD_SCAN_RECORDS 65536

/* Thresholds shared with depth.c and warnings.c (same meaning). */
#define NEGLIGIBLE 1e-3
#define DOMINANT 1.0
#define MASSIVE_MIN 6.0

/* Value v at step si: counted when it holds; worst by larger (sign 1) or
 * smaller (sign -1). */
static void note(rd_where *w, int64_t si, double v, int sign)
{
    if (w->n++ == 0) {
        w->first = si;
        w->worst = si;
        w->worst_value = v;
        return;
    }
    if (sign * (v - w->worst_value) > 0) {
        w->worst = si;
        w->worst_value = v;
    }
}

/* 1 when step index si is to be scanned: complete, and on the stride (or
 * the first, the last or the judged step). */
static int scanned(const rd_analysis *a, int64_t si, int64_t stride, int64_t *k)
{
    if (si != a->load.step_index && rd_analysis_step_aborted(a, si))
        return 0;
    int on = (*k)++ % stride == 0 || si == a->aborted.first_index ||
             si == a->aborted.last_index || si == a->load.step_index;
    return on;
}

static int64_t stride_for(int64_t n_steps, int64_t per_step)
{
    int64_t total = n_steps * (per_step > 0 ? per_step : 1);
    return total <= RD_SCAN_RECORDS ? 1 : (total + RD_SCAN_RECORDS - 1) / RD_SCAN_RECORDS;
}

static resdiag_status scan_updates(const resdiag_reader *rd, rd_analysis *a)
{
    rd_over_run *o = &a->over_run;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    o->update_stride = stride_for(a->load.n_steps, (int64_t)L * S);
    for (int64_t si = 0, k = 0; si < a->load.n_steps; si++) {
        if (!scanned(a, si, o->update_stride, &k))
            continue;
        o->n_update_steps++;
        for (int i = 0; i < L * S; i++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            resdiag_status st = resdiag_reader_update(rd, si, i / S, i % S, u);
            if (st)
                return st;
            double r = u[RESDIAG_UPDATE_RATIO_FROB];
            if (r < NEGLIGIBLE)
                note(&o->negligible[i], si, r, -1);
            else if (r > DOMINANT)
                note(&o->dominant[i], si, r, 1);
        }
    }
    return RESDIAG_OK;
}

/* The stream leaving each layer at step si: growth (as depth.c measures
 * it, from the first observed layer output to the last) and massive
 * activations. */
static resdiag_status stream_step(const resdiag_reader *rd, rd_analysis *a, int64_t si)
{
    rd_over_run *o = &a->over_run;
    int L = a->load.n_layers;
    double first = NAN, last = NAN;
    for (int kk = 1; kk <= L; kk++) {
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        resdiag_status st = rd_analysis_stream_at(rd, a, si, kk, f, &obs);
        if (st)
            return st;
        if (!obs)
            continue;
        if (kk < L && isnan(first))
            first = f[RESDIAG_FIELD_TOK_NORM_MEAN];
        if (kk == L)
            last = f[RESDIAG_FIELD_TOK_NORM_MEAN];
        double rms = f[RESDIAG_FIELD_TOK_RMS_MEAN], mx = f[RESDIAG_FIELD_ABSMAX];
        if (mx > fmax(MASSIVE_MIN, 0.5 * sqrt(a->load.d_model)) * rms) {
            rd_where *w = &o->massive[kk - 1];
            note(w, si, mx / rms, 1);
            if (w->worst == si) { /* this step is the worst so far */
                w->col = f[RESDIAG_FIELD_ABSMAX_COL];
                w->rms = rms;
            }
        }
    }
    double g = first > 0 && isfinite(last) ? last / first : NAN;
    if (g > a->load.max_growth)
        note(&o->growth, si, g, 1);
    return RESDIAG_OK;
}

resdiag_status rd_analysis_over_run(const resdiag_reader *rd, rd_analysis *a)
{
    rd_over_run *o = &a->over_run;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    o->dominant = calloc((size_t)L * S, sizeof *o->dominant);
    o->negligible = calloc((size_t)L * S, sizeof *o->negligible);
    o->massive = calloc((size_t)L, sizeof *o->massive);
    if (!o->dominant || !o->negligible || !o->massive)
        return RESDIAG_E_NOMEM;
    resdiag_status st = scan_updates(rd, a);
    if (st)
        return st;
    o->stream_stride = stride_for(a->load.n_steps, L);
    for (int64_t si = 0, k = 0; si < a->load.n_steps; si++) {
        if (!scanned(a, si, o->stream_stride, &k))
            continue;
        o->n_stream_steps++;
        if ((st = stream_step(rd, a, si)))
            return st;
    }
    return RESDIAG_OK;
}
