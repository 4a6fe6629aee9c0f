/*
 * over_run.c - the conditions the report warns about, checked at every
 * recorded complete step and not only at the judged one (a->over_run,
 * over_run.h): a dominant or negligible relative update, the stream's
 * growth over depth above max_growth, a massive activation. The updates
 * and the growth come from the per-step summary (doc/FORMAT.md, /summary:
 * a few numbers per step, read in blocks) at every step; a massive
 * activation, and the rest in a file without the summary, from the
 * records, at most RD_SCAN_RECORDS of them per kind, beyond which an even
 * sample of the steps is read (always with the first and the last
 * complete step and the judged one). warnings.c words them.
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/phases.h"
#include "format/format.h"

/* Layers whose norms a step's scan keeps for the growth, without the
 * summary (the summary has no such bound). */
#define RESDIAG_MAX_LAYERS_SCAN 4096

/* At most this many records read one by one per kind (~25 us each):
 * under half a second whatever the run's length. */
#define RD_SCAN_RECORDS 16384
/* Values of the summary read at a time. */
#define RD_SCAN_BLOCK (1 << 20)

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

/* The update ratios (L*S per step) or the stream norms (L per step) of
 * the summary, in blocks of steps; each complete step's row to take(). */
static resdiag_status scan_summary(const resdiag_reader *rd, rd_analysis *a, const char *name,
                                   int per, int64_t *n_scanned,
                                   void (*take)(rd_analysis *, int64_t, const double *))
{
    int64_t n = a->load.n_steps, block = RD_SCAN_BLOCK / (per > 0 ? per : 1);
    if (block < 1)
        block = 1;
    double *v = malloc((size_t)block * per * sizeof *v);
    if (!v)
        return RESDIAG_E_NOMEM;
    resdiag_status st = RESDIAG_OK;
    for (int64_t s0 = 0; s0 < n && !st; s0 += block) {
        int64_t cnt = n - s0 < block ? n - s0 : block;
        if ((st = resdiag_reader_read(rd, name, s0, cnt, v, (size_t)block * per)))
            break;
        for (int64_t i = 0; i < cnt; i++) {
            int64_t si = s0 + i;
            if (si != a->load.step_index && rd_analysis_step_aborted(a, si))
                continue;
            (*n_scanned)++;
            take(a, si, v + i * per);
        }
    }
    free(v);
    return st;
}

static void take_updates(rd_analysis *a, int64_t si, const double *r)
{
    for (int i = 0; i < a->load.n_layers * a->load.n_sublayers; i++)
        if (r[i] < RD_NEGLIGIBLE_R)
            note(&a->over_run.negligible[i], si, r[i], -1);
        else if (r[i] > RD_DOMINANT_R)
            note(&a->over_run.dominant[i], si, r[i], 1);
}

/* Growth from the norms of the stream leaving each layer (NaN: not
 * observed): the last over the first observed, as depth.c measures it. */
static void take_growth(rd_analysis *a, int64_t si, const double *x)
{
    int L = a->load.n_layers;
    double first = NAN;
    for (int l = 0; l < L - 1 && isnan(first); l++)
        if (isfinite(x[l]))
            first = x[l];
    double g = first > 0 && isfinite(x[L - 1]) ? x[L - 1] / first : NAN;
    if (g > a->load.max_growth)
        note(&a->over_run.growth, si, g, 1);
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
            if (r < RD_NEGLIGIBLE_R)
                note(&o->negligible[i], si, r, -1);
            else if (r > RD_DOMINANT_R)
                note(&o->dominant[i], si, r, 1);
        }
    }
    return RESDIAG_OK;
}

/* The stream leaving each layer at step si: growth (as depth.c measures
 * it, from the first observed layer output to the last) and massive
 * activations. */
static resdiag_status stream_step(const resdiag_reader *rd, rd_analysis *a, int64_t si,
                                   int growth)
{
    rd_over_run *o = &a->over_run;
    int L = a->load.n_layers;
    double x[RESDIAG_MAX_LAYERS_SCAN];
    for (int kk = 1; kk <= L; kk++) {
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        resdiag_status st = rd_analysis_stream_at(rd, a, si, kk, f, &obs);
        if (st)
            return st;
        if (kk <= RESDIAG_MAX_LAYERS_SCAN)
            x[kk - 1] = obs ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
        if (!obs)
            continue;
        double rms = f[RESDIAG_FIELD_TOK_RMS_MEAN], mx = f[RESDIAG_FIELD_ABSMAX];
        if (mx > fmax(RD_MASSIVE_MIN, 0.5 * sqrt(a->load.d_model)) * rms) {
            rd_where *w = &o->massive[kk - 1];
            note(w, si, mx / rms, 1);
            if (w->worst == si) { /* this step is the worst so far */
                w->col = f[RESDIAG_FIELD_ABSMAX_COL];
                w->rms = rms;
            }
        }
    }
    if (growth && L <= RESDIAG_MAX_LAYERS_SCAN)
        take_growth(a, si, x);
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
    int summary = rd_analysis_has_dataset(rd, RD_DS_SUMMARY_UPDATE_RATIO) &&
                  rd_analysis_has_dataset(rd, RD_DS_SUMMARY_STREAM_NORM);
    resdiag_status st;
    if (summary) {
        o->update_stride = o->growth_stride = 1;
        if ((st = scan_summary(rd, a, RD_DS_SUMMARY_UPDATE_RATIO, L * S, &o->n_update_steps,
                               take_updates)) ||
            (st = scan_summary(rd, a, RD_DS_SUMMARY_STREAM_NORM, L, &o->n_growth_steps,
                               take_growth)))
            return st;
    } else if ((st = scan_updates(rd, a))) {
        return st;
    }
    o->stream_stride = stride_for(a->load.n_steps, L);
    for (int64_t si = 0, k = 0; si < a->load.n_steps; si++) {
        if (!scanned(a, si, o->stream_stride, &k))
            continue;
        o->n_stream_steps++;
        if ((st = stream_step(rd, a, si, !summary)))
            return st;
    }
    if (!summary) {
        o->n_growth_steps = o->n_stream_steps;
        o->growth_stride = o->stream_stride;
    }
    return RESDIAG_OK;
}
