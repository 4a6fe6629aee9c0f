/*
 * ranks.c - the ranks of a job read as one (doc/RANKS.md): each merged
 * rank's own file is analysed alone (its verdict, where it holds every
 * layer; its first non-finite value; its last step), and the report says
 * how many ranks were found, which are missing, not recorded, rejected or
 * ended early, and where the ranks disagree: a verdict of their own, a
 * replica's gradient that differs from the lowest rank's (data and
 * sequence splits: after the all-reduce they are the same to rounding),
 * and whose first non-finite value came first. The merged first
 * non-finite value is the merged view's own (the earliest over ranks).
 * Which ranks hold each merged step: a step one rank's file lacks (it was
 * killed before its last flush) is merged from the others, so the report
 * says so per step, and says when the first and the last complete step,
 * which the growth and over-training comparisons set side by side, hold
 * different ranks.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"

#define GRAD_REL_TOL 1e-6 /* a replica's gradient differs beyond rounding */

static void add_line(rd_ranks *k, const char *fmt, ...)
{
    k->n_lines_all++;
    if (k->n_lines >= RD_RANKS_LINES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->lines[k->n_lines++], RD_WARNING_LEN, fmt, ap);
    va_end(ap);
}

/* The rank's index of step number `step` among its steps, -1 if none. */
static int64_t index_of(const resdiag_reader *rd, int64_t step)
{
    int64_t n = resdiag_reader_info(rd)->n_steps, *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int64_t at = -1;
    if (v && resdiag_reader_steps(rd, v, n) == RESDIAG_OK)
        for (int64_t i = 0; i < n && at < 0; i++)
            if (v[i] == step)
                at = i;
    free(v);
    return at;
}

/* What rank row->rank's file says alone. */
static void analyse_alone(const rd_analysis *a, const resdiag_reader *rr, rd_rank_row *row)
{
    const resdiag_run_info *in = resdiag_reader_info(rr);
    if (in->n_steps <= 0)
        return;
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.max_growth = a->load.max_growth;
    int64_t si = index_of(rr, a->load.step);
    if (si >= 0)
        o.step_index = si;
    resdiag_analysis *x = NULL;
    if (resdiag_analyze(rr, &o, &x) != RESDIAG_OK)
        return;
    /* judged alone only where the file holds every layer and every column:
     * a pipeline stage's or a tensor shard's relations span other ranks */
    if ((in->layer_count == 0 || in->layer_count == in->n_layers)
        && in->split != RESDIAG_SPLIT_TENSOR)
        row->verdict = (int)x->verdict.v;
    row->nf_found = x->nonfinite.found;
    row->nf_step = x->nonfinite.step;
    row->nf_layer = x->nonfinite.layer;
    row->nf_sub = x->nonfinite.sub;
    row->nf_site = x->nonfinite.site;
    row->nf_param = x->nonfinite.param;
    memcpy(row->nf_model_param, x->nonfinite.model_param, sizeof row->nf_model_param);
    row->nf_dir = x->nonfinite.dir;
    row->nf_is_nan = x->nonfinite.nan_count > 0;
    resdiag_analysis_destroy(x);
}

/* "layer 7, mlp" and the rest of where a rank's first non-finite value is. */
static void nf_where(const rd_analysis *a, const rd_rank_row *w, char *where, size_t wl,
                     char *detail, size_t dl)
{
    const char *dir = w->nf_dir == RESDIAG_FORWARD ? "forward" : "backward";
    detail[0] = '\0';
    if (w->nf_site < 0 && w->nf_layer == RESDIAG_MODEL_LEVEL)
        snprintf(where, wl, "model parameter %s gradient", w->nf_model_param);
    else if (w->nf_site < 0)
        snprintf(where, wl, "layer %d, %s gradient", w->nf_layer,
                 w->nf_param >= 0 && w->nf_param < a->load.n_layer_params
                     ? a->load.param_names[w->nf_param]
                     : "?");
    else if (w->nf_layer == RESDIAG_MODEL_LEVEL)
        snprintf(where, wl, "model site %s, %s", resdiag_site_name((resdiag_site)w->nf_site), dir);
    else {
        snprintf(where, wl, "layer %d, %s", w->nf_layer,
                 w->nf_sub >= 0 && w->nf_sub < a->load.n_sublayers
                     ? a->load.sublayer_names[w->nf_sub]
                     : "?");
        snprintf(detail, dl, " (%s, %s)", resdiag_site_name((resdiag_site)w->nf_site), dir);
    }
}

/* Where in its step a rank's first non-finite value is: the forward runs
 * before the backward, and the parameter gradients come last (in data
 * parallel they are all-reduced: one rank's NaN reaches every rank there,
 * after it showed in that rank's own forward or backward). */
static int nf_phase(const rd_rank_row *w)
{
    if (w->nf_site < 0)
        return 2;
    return w->nf_dir == RESDIAG_FORWARD ? 0 : 1;
}

/* Each rank's first non-finite value; the earliest, by step and then by
 * phase within the step (the lowest rank on a tie), is "first" and said
 * first. */
static void nonfinite_lines(const rd_analysis *a, rd_ranks *k)
{
    const rd_rank_row *first = NULL;
    for (int i = 0; i < k->n_rows; i++) {
        const rd_rank_row *w = &k->rows[i];
        if (w->nf_found && (!first || w->nf_step < first->nf_step ||
                            (w->nf_step == first->nf_step && nf_phase(w) < nf_phase(first))))
            first = w;
    }
    k->first_nf_rank = first ? first->rank : -1;
    /* the first one's line, then the others in rank order */
    for (int i = -1; first && i < k->n_rows; i++) {
        const rd_rank_row *w = i < 0 ? first : &k->rows[i];
        char where[160], detail[80];
        if (!w->nf_found || (i >= 0 && w == first))
            continue;
        nf_where(a, w, where, sizeof where, detail, sizeof detail);
        add_line(k, "rank %d: %s at step %lld, %s%s%s", w->rank, w->nf_is_nan ? "NaN" : "Inf",
                 (long long)w->nf_step, where, w == first ? ", first" : "", detail);
    }
}

static void verdict_lines(const rd_analysis *a, rd_ranks *k)
{
    for (int i = 0; i < k->n_rows; i++) {
        const rd_rank_row *w = &k->rows[i];
        if (w->verdict >= 0 && w->verdict != (int)a->verdict.v)
            add_line(k, "rank %d alone: %s; the merged ranks: %s", w->rank,
                     resdiag_verdict_name((resdiag_verdict)w->verdict),
                     resdiag_verdict_name(a->verdict.v));
    }
}

/* One parameter's gradient at step number `step` over the merged ranks:
 * each replica's FROB against the lowest observing rank's. */
static void compare_grad(const resdiag_reader *rd, rd_ranks *k, int64_t step,
                         const int64_t *at, int layer, const char *name)
{
    double ref = NAN;
    int ref_rank = -1;
    for (int i = 0; i < k->n_rows; i++) {
        const resdiag_reader *rr = rd_reader_rank_reader(rd, k->rows[i].rank);
        int64_t si = rr ? at[i] : -1;
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        if (si < 0 || resdiag_reader_param(rr, si, layer, name, f, &obs) != RESDIAG_OK || !obs)
            continue;
        double v = f[RESDIAG_FIELD_FROB];
        if (ref_rank < 0) {
            ref = v;
            ref_rank = k->rows[i].rank;
            continue;
        }
        double rel = fabs(v - ref) / fmax(fabs(ref), 1e-300);
        if (!(rel <= GRAD_REL_TOL) && !(isnan(v) && isnan(ref))) {
            char lay[32] = "the model";
            if (layer != RESDIAG_MODEL_LEVEL)
                snprintf(lay, sizeof lay, "layer %d", layer);
            add_line(k, "rank %d: the gradient of %s in %s differs from rank %d's by %.3g "
                     "(relative) at step %lld", k->rows[i].rank, name, lay, ref_rank, rel,
                     (long long)step);
        }
    }
}

/* Replicas of a data or sequence split: their gradients at the analysed
 * and the last step. */
static void gradient_lines(const resdiag_reader *rd, const rd_analysis *a, rd_ranks *k)
{
    if (k->split != RESDIAG_SPLIT_DATA && k->split != RESDIAG_SPLIT_SEQUENCE
        && k->split != RESDIAG_SPLIT_NONE)
        return;
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t steps[2] = { a->load.step,
                         a->load.steps[a->aborted.last_index] }; /* the last complete one */
    int64_t *at = calloc((size_t)k->n_rows + 1, sizeof *at);
    for (int s = 0; at && s < (steps[1] != steps[0] ? 2 : 1); s++) {
        for (int i = 0; i < k->n_rows; i++) {
            const resdiag_reader *rr = rd_reader_rank_reader(rd, k->rows[i].rank);
            at[i] = rr ? index_of(rr, steps[s]) : -1;
        }
        for (int l = 0; l < in->n_layers; l++)
            for (int p = 0; p < in->n_layer_params; p++)
                compare_grad(rd, k, steps[s], at, l, in->layer_param_names[p]);
        for (int p = 0; p < in->n_model_params; p++)
            compare_grad(rd, k, steps[s], at, RESDIAG_MODEL_LEVEL, in->model_param_names[p]);
    }
    free(at);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* 1: step indices s and t are held by the same merged ranks. */
static int same_ranks(const rd_ranks *k, int64_t s, int64_t t)
{
    for (int i = 0; i < k->n_rows; i++)
        if (k->has[s * k->n_rows + i] != k->has[t * k->n_rows + i])
            return 0;
    return 1;
}

/* Which merged ranks' own files hold each merged step, from each rank's
 * own reader (its steps sorted, each merged step looked up). */
static resdiag_status presence(const resdiag_reader *rd, const rd_analysis *a, rd_ranks *k)
{
    int64_t n = a->load.n_steps;
    k->n_steps = n;
    k->compare_same = k->judged_whole = 1;
    if (n <= 0 || k->n_rows <= 0)
        return RESDIAG_OK;
    k->present = calloc((size_t)n, sizeof *k->present);
    k->has = calloc((size_t)n * (size_t)k->n_rows, 1);
    if (!k->present || !k->has)
        return RESDIAG_E_NOMEM;
    for (int i = 0; i < k->n_rows; i++) {
        const resdiag_reader *rr = rd_reader_rank_reader(rd, k->rows[i].rank);
        if (k->rows[i].state == RESDIAG_RANK_REJECTED || !rr)
            continue;
        int64_t m = resdiag_reader_info(rr)->n_steps;
        int64_t *v = malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
        if (!v)
            return RESDIAG_E_NOMEM;
        if (m > 0 && resdiag_reader_steps(rr, v, m) != RESDIAG_OK)
            m = 0;
        qsort(v, (size_t)m, sizeof *v, cmp_i64);
        for (int64_t s = 0; s < n; s++)
            if (m > 0 && bsearch(&a->load.steps[s], v, (size_t)m, sizeof *v, cmp_i64)) {
                k->has[s * k->n_rows + i] = 1;
                k->present[s]++;
            }
        free(v);
    }
    for (int64_t s = 0; s < n; s++)
        k->n_partial += k->present[s] < k->n_merged;
    k->compare_same = same_ranks(k, a->aborted.first_index, a->aborted.last_index);
    k->judged_whole = a->load.step_index < 0 || a->load.step_index >= n ||
                      k->present[a->load.step_index] >= k->n_merged;
    return RESDIAG_OK;
}

/* Every rank's state; the ranks with a file get a row. */
static resdiag_status classify(const resdiag_reader *rd, rd_ranks *k)
{
    k->rows = calloc((size_t)resdiag_reader_info(rd)->n_ranks_merged + 1, sizeof *k->rows);
    size_t cap = (size_t)resdiag_reader_info(rd)->n_ranks_merged + 1;
    if (!k->rows)
        return RESDIAG_E_NOMEM;
    for (int r = 0; r < k->world_size; r++) {
        resdiag_rank_info ri;
        memset(&ri, 0, sizeof ri);
        ri.struct_size = sizeof ri;
        if (resdiag_reader_rank(rd, r, &ri) != RESDIAG_OK)
            return RESDIAG_E_IO;
        if (ri.state == RESDIAG_RANK_MISSING) {
            if (k->n_missing < RD_RANKS_LISTED)
                k->missing[k->n_missing] = r;
            k->n_missing++;
            continue;
        }
        if (ri.state == RESDIAG_RANK_NOT_RECORDED) {
            k->n_not_recorded++;
            continue;
        }
        if ((size_t)k->n_rows == cap) {
            rd_rank_row *nr = realloc(k->rows, cap * 2 * sizeof *nr);
            if (!nr)
                return RESDIAG_E_NOMEM;
            k->rows = nr;
            cap *= 2;
        }
        rd_rank_row *w = &k->rows[k->n_rows++];
        memset(w, 0, sizeof *w);
        w->rank = r;
        w->state = ri.state;
        w->n_steps = ri.n_steps;
        w->last_step = ri.last_step;
        w->verdict = -1;
        if (!(w->why = strdup(ri.why)))
            return RESDIAG_E_NOMEM;
        if (ri.state == RESDIAG_RANK_REJECTED)
            k->n_rejected++;
        else
            k->n_merged++;
        if (ri.state != RESDIAG_RANK_REJECTED && ri.last_step > k->last_step)
            k->last_step = ri.last_step;
    }
    return RESDIAG_OK;
}

resdiag_status rd_analysis_ranks(const resdiag_reader *rd, rd_analysis *a)
{
    if (resdiag_reader_n_ranks(rd) <= 1)
        return RESDIAG_OK; /* one file */
    rd_ranks *k = calloc(1, sizeof *k);
    if (!k)
        return RESDIAG_E_NOMEM;
    a->ranks = k;
    const resdiag_run_info *in = resdiag_reader_info(rd);
    k->world_size = resdiag_reader_n_ranks(rd);
    k->split = in->split;
    k->last_step = -1;
    k->per_shard = in->split == RESDIAG_SPLIT_TENSOR;
    resdiag_status st = classify(rd, k);
    if (st != RESDIAG_OK)
        return st;
    for (int i = 0; i < k->n_rows; i++)
        if (k->rows[i].state != RESDIAG_RANK_REJECTED)
            analyse_alone(a, rd_reader_rank_reader(rd, k->rows[i].rank), &k->rows[i]);
    if ((st = presence(rd, a, k)))
        return st;
    verdict_lines(a, k);
    gradient_lines(rd, a, k);
    nonfinite_lines(a, k);
    return RESDIAG_OK;
}

void rd_ranks_free(rd_ranks *k)
{
    if (!k)
        return;
    for (int i = 0; i < k->n_rows; i++)
        free(k->rows[i].why);
    free(k->rows);
    free(k->present);
    free(k->has);
    free(k);
}
