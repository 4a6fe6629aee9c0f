/*
 * nonfinite.c - the first NaN or Inf of the run in call order (step,
 * layer, sublayer, site or parameter, direction) and the totals over every
 * recorded step: from the per-step summary where the file has one, else
 * from every statistics table of every stored step.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "analysis/phases.h"
#include "format/format.h"

static const char *const stats_tables[6] = { RD_DS_FWD_SITE_STATS, RD_DS_BWD_SITE_STATS,
                                             RD_DS_FWD_MODEL_STATS, RD_DS_BWD_MODEL_STATS,
                                             RD_DS_LAYER_PARAM_STATS,
                                             RD_DS_MODEL_PARAM_STATS };

/* Scans every statistics row of recorded step si for NaN / Inf: *bad when
 * there is one; adds the counts to the totals when count_totals; the first
 * one in call order becomes a->nf_* unless a->nf_found. */
static resdiag_status scan_step(const resdiag_reader *rd, rd_analysis *a, int64_t si,
                                double **buf, size_t *cap, int *bad, int count_totals)
{
    const char *const *names = stats_tables;
    resdiag_status st;
    double best_seq = INFINITY;
    *bad = 0;
    for (int d = 0; d < 6; d++) {
        int64_t dims[8];
        int rank = 0;
        if (!rd_analysis_has_dataset(rd, names[d]) ||
            resdiag_reader_dims(rd, names[d], dims, 8, &rank) != RESDIAG_OK)
            continue; /* absent (no parameters) */
        size_t per = 1;
        for (int i = 1; i < rank; i++)
            per *= (size_t)dims[i];
        if (per > *cap) {
            free(*buf);
            *cap = per;
            *buf = malloc(per * sizeof **buf);
            if (!*buf) {
                *cap = 0;
                return RESDIAG_E_NOMEM;
            }
        }
        if ((st = resdiag_reader_read(rd, names[d], si, 1, *buf, per)))
            return st;
        size_t rows = per / RESDIAG_N_FIELDS;
        for (size_t r = 0; r < rows; r++) {
            const double *f = *buf + r * RESDIAG_N_FIELDS;
            double nn = f[RESDIAG_FIELD_NAN_COUNT], ni = f[RESDIAG_FIELD_INF_COUNT];
            if (!(nn > 0) && !(ni > 0))
                continue;
            *bad = 1;
            if (count_totals) {
                a->nonfinite.nan_total += nn > 0 ? nn : 0;
                a->nonfinite.inf_total += ni > 0 ? ni : 0;
            }
            if (a->nonfinite.found || !(f[RESDIAG_FIELD_CALL_SEQ] < best_seq))
                continue;
            best_seq = f[RESDIAG_FIELD_CALL_SEQ];
            a->nonfinite.step_index = si;
            a->nonfinite.dir = (d == 0 || d == 2) ? RESDIAG_FORWARD : RESDIAG_BACKWARD;
            a->nonfinite.nan_count = nn > 0 ? nn : 0;
            a->nonfinite.inf_count = ni > 0 ? ni : 0;
            a->nonfinite.param = -1;
            int S = a->load.n_sublayers, B = d < 2 ? (int)dims[3] : 1; /* the file's sites */
            if (d < 2) {
                a->nonfinite.layer = (int)(r / ((size_t)S * B));
                a->nonfinite.sub = (int)(r / B % (size_t)S);
                a->nonfinite.site = (int)(r % B);
            } else if (d < 4) {
                a->nonfinite.layer = RESDIAG_MODEL_LEVEL;
                a->nonfinite.sub = 0;
                a->nonfinite.site = RESDIAG_EMBED_OUT + (int)r;
            } else if (d == 4) {
                int P = a->load.n_layer_params;
                a->nonfinite.layer = (int)(r / (size_t)P);
                a->nonfinite.sub = 0;
                a->nonfinite.site = -1;
                a->nonfinite.param = (int)(r % (size_t)P);
            } else {
                a->nonfinite.layer = RESDIAG_MODEL_LEVEL;
                a->nonfinite.sub = 0;
                a->nonfinite.site = -1;
                a->nonfinite.param = (int)r;
                const resdiag_run_info *in = resdiag_reader_info(rd);
                snprintf(a->nonfinite.model_param, sizeof a->nonfinite.model_param, "%s",
                         (int)r < in->n_model_params ? in->model_param_names[r] : "?");
            }
        }
    }
    return RESDIAG_OK;
}

/* With the per-step summary (doc/FORMAT.md, /summary): the totals and the
 * first non-finite step from a few numbers per step, then the full tables
 * of that one step for where it was. Gives what the scan of every step
 * gives (the counts are integers, exact in any order). */
static resdiag_status scan_nonfinite_summary(const resdiag_reader *rd, rd_analysis *a,
                                             int *disagree)
{
    enum { C = 3 }; /* nan_count, inf_count, records */
    int64_t n = a->load.n_steps, first_bad = -1;
    double *v = malloc((size_t)RD_SUMMARY_BLOCK * C * sizeof *v);
    if (!v)
        return RESDIAG_E_NOMEM;
    resdiag_status st = RESDIAG_OK;
    for (int64_t s0 = 0; s0 < n; s0 += RD_SUMMARY_BLOCK) {
        int64_t cnt = n - s0 < RD_SUMMARY_BLOCK ? n - s0 : RD_SUMMARY_BLOCK;
        if ((st = resdiag_reader_read(rd, RD_DS_SUMMARY_NONFINITE, s0, cnt, v,
                                      (size_t)RD_SUMMARY_BLOCK * C)))
            goto out;
        for (int64_t i = 0; i < cnt; i++) {
            const double *row = v + i * C;
            if (!(row[2] > 0))
                continue;
            a->nonfinite.n_bad_steps++;
            a->nonfinite.nan_total += row[0];
            a->nonfinite.inf_total += row[1];
            if (first_bad < 0)
                first_bad = s0 + i;
        }
    }
    if (first_bad >= 0) {
        double *buf = NULL;
        size_t cap = 0;
        int bad = 0;
        st = scan_step(rd, a, first_bad, &buf, &cap, &bad, 0);
        free(buf);
        if (st == RESDIAG_OK && bad) {
            a->nonfinite.found = 1;
            a->nonfinite.step = a->load.steps[first_bad];
        } else if (st == RESDIAG_OK) {
            *disagree = 1; /* a damaged summary: the tables say otherwise */
        }
    }
out:
    free(v);
    return st;
}

resdiag_status rd_analysis_nonfinite(const resdiag_reader *rd, rd_analysis *a)
{
    if (rd_analysis_has_dataset(rd, RD_DS_SUMMARY_NONFINITE)) {
        int disagree = 0;
        resdiag_status sst = scan_nonfinite_summary(rd, a, &disagree);
        if (sst || !disagree)
            return sst;
        a->nonfinite.n_bad_steps = 0;
        a->nonfinite.nan_total = a->nonfinite.inf_total = 0;
    }
    /* a file without the summary (resdiag 0.1.0): every step in full */
    int64_t n = a->load.n_steps;
    double *buf = NULL;
    size_t cap = 0;
    resdiag_status st = RESDIAG_OK;
    rd_stored_cursor cur[6];
    for (int d = 0; d < 6; d++)
        rd_stored_init(rd, &cur[d], stats_tables[d]);
    for (int64_t si = 0, next; si < n; si++) {
        int step_bad = 0;
        if (!rd_analysis_step_stored(rd, cur, 6, si, &next)) {
            si = next - 1; /* nothing stored up to there */
            continue;
        }
        if ((st = scan_step(rd, a, si, &buf, &cap, &step_bad, 1)))
            break;
        if (step_bad) {
            a->nonfinite.n_bad_steps++;
            if (!a->nonfinite.found) {
                a->nonfinite.found = 1;
                a->nonfinite.step = a->load.steps[si];
            }
        }
    }
    free(buf);
    return st;
}
