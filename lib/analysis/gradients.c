/*
 * gradients.c - the gradients at the first recorded backward (the analysed
 * step when it has one): ||dL/dW|| per layer and parameter, ||dL/dx|| of
 * the stream per layer and of the embedding, the head's gradient (its
 * declared parameter, else the logits), their log-log fits over depth; and
 * the order the parameters are shown in (a->gradients, gradients.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"
#include "format/format.h"

/* From the per-step summary: flags (n_steps) of the steps that observed
 * any backward block site or per-layer parameter gradient, or NULL
 * without a summary (or when it cannot be read: the full tables then say). */
static unsigned char *steps_with_backward(const resdiag_reader *rd, int64_t n)
{
    enum { C = 6 }; /* observed rows per statistics table, in table order */
    if (!rd_analysis_has_dataset(rd, RD_DS_SUMMARY_OBSERVED) || n <= 0)
        return NULL;
    unsigned char *flag = malloc((size_t)n);
    double *v = malloc((size_t)RD_SUMMARY_BLOCK * C * sizeof *v);
    if (!flag || !v) {
        free(flag);
        free(v);
        return NULL;
    }
    for (int64_t s0 = 0; s0 < n; s0 += RD_SUMMARY_BLOCK) {
        int64_t cnt = n - s0 < RD_SUMMARY_BLOCK ? n - s0 : RD_SUMMARY_BLOCK;
        if (resdiag_reader_read(rd, RD_DS_SUMMARY_OBSERVED, s0, cnt, v,
                                (size_t)RD_SUMMARY_BLOCK * C) != RESDIAG_OK) {
            free(flag);
            free(v);
            return NULL;
        }
        /* columns 1 and 4: backward/site_stats, backward/param_stats */
        for (int64_t i = 0; i < cnt; i++)
            flag[s0 + i] = v[i * C + 1] > 0 || v[i * C + 4] > 0;
    }
    free(v);
    return flag;
}

static int param_index(const resdiag_run_info *in, const char *name)
{
    for (int p = 0; p < in->n_layer_params; p++)
        if (strcmp(in->layer_param_names[p], name) == 0)
            return p;
    return -1;
}

/* 1 in *any when recorded step gs holds any backward statistic of a layer
 * (a parameter's gradient or a block site's). */
static resdiag_status has_backward(const resdiag_reader *rd, const rd_analysis *a, int64_t gs,
                                   int *any)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    resdiag_status st = RESDIAG_OK;
    *any = 0;
    for (int l = 0; l < a->load.n_layers && !*any && !st; l++) {
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        for (int p = 0; p < in->n_layer_params && !*any; p++) {
            if ((st = resdiag_reader_param(rd, gs, l, in->layer_param_names[p], f, &obs)))
                break;
            *any |= obs;
        }
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES && !*any && !st; b++) {
            if ((st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, l, a->load.n_sublayers - 1,
                                       (resdiag_site)b, f, &obs)))
                break;
            *any |= obs;
        }
    }
    return st;
}

/* a->grad_step: the analysed step if it has backward data, else the first
 * recorded step that has (the summary, where there is one, and the stored
 * chunks skip the steps without any); never an aborted step, whose
 * backward may have stopped halfway. */
static resdiag_status find_grad_step(const resdiag_reader *rd, rd_analysis *a)
{
    int64_t n = a->load.n_steps;
    unsigned char *bwd = steps_with_backward(rd, n);
    static const char *const bwd_tables[2] = { RD_DS_BWD_SITE_STATS, RD_DS_LAYER_PARAM_STATS };
    rd_stored_cursor bcur[2];
    resdiag_status st = RESDIAG_OK;
    for (int d = 0; d < 2; d++)
        rd_stored_init(rd, &bcur[d], bwd_tables[d]);
    for (int64_t g = -1, next; g < n && a->gradients.step < 0 && !st; g++) {
        int64_t gs = g < 0 ? a->load.step_index : g;
        int any = 0;
        if (rd_analysis_step_aborted(a, gs))
            continue;
        if (g >= 0 && bwd && !bwd[g])
            continue;
        if (g >= 0 && !rd_analysis_step_stored(rd, bcur, 2, g, &next)) {
            g = next - 1; /* no backward data stored up to there */
            continue;
        }
        st = has_backward(rd, a, gs, &any);
        if (any)
            a->gradients.step = gs;
    }
    free(bwd);
    return st;
}

/* ||dL/dW|| per layer and parameter, ||dL/dx|| per layer (the stream
 * leaving it, else where it enters) and of the embedding at a->grad_step. */
static resdiag_status read_grads(const resdiag_reader *rd, rd_analysis *a)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t gs = a->gradients.step;
    int L = a->load.n_layers, S = a->load.n_sublayers, P = in->n_layer_params;
    double f[RESDIAG_N_FIELDS];
    int obs = 0;
    resdiag_status st;
    for (int l = 0; l < L; l++) {
        for (int p = 0; p < P; p++) {
            if ((st = resdiag_reader_param(rd, gs, l, in->layer_param_names[p], f, &obs)))
                return st;
            a->gradients.grad[(size_t)l * P + p] = obs ? f[RESDIAG_FIELD_FROB] : NAN;
        }
        if ((st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, l, S - 1, RESDIAG_STREAM_OUT, f,
                                   &obs)))
            return st;
        if (!obs && (st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, l, 0, RESDIAG_STREAM_IN,
                                           f, &obs)))
            return st;
        a->gradients.sgrad[l] = obs ? f[RESDIAG_FIELD_FROB] : NAN;
    }
    obs = 0;
    /* dL/dx_0: at embed_out, else where layer 0 reads it (the same tensor) */
    if ((st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_EMBED_OUT, f, &obs)))
        return st;
    if (!obs &&
        (st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_STREAM_IN, f, &obs)))
        return st;
    a->gradients.sgrad_embed = obs ? f[RESDIAG_FIELD_FROB] : NAN;
    return RESDIAG_OK;
}

/* The head's gradient at a->grad_step: its parameter's where the run
 * declares one and recorded it, else the logits'. */
static resdiag_status read_head_grad(const resdiag_reader *rd, rd_analysis *a)
{
    const char *head = rd_analysis_role_param(resdiag_reader_info(rd), RD_ROLE_HEAD);
    int64_t gs = a->gradients.step;
    double f[RESDIAG_N_FIELDS];
    int obs = 0;
    resdiag_status st;
    if (head) {
        if ((st = resdiag_reader_param(rd, gs, RESDIAG_MODEL_LEVEL, head, f, &obs)))
            return st;
        a->gradients.head_is_param = obs;
    }
    if (!obs &&
        (st = rd_analysis_site(rd, a, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_LOGITS, f, &obs)))
        return st;
    a->gradients.head_grad = obs ? f[RESDIAG_FIELD_FROB] : NAN;
    return RESDIAG_OK;
}

/* Log-log fits over depth of each parameter's gradient and the stream's. */
static resdiag_status fit_grads(rd_analysis *a)
{
    int L = a->load.n_layers, P = a->load.n_layer_params;
    double *k = malloc((size_t)L * sizeof *k), *col = malloc((size_t)L * sizeof *col);
    if (!k || !col) {
        free(k);
        free(col);
        return RESDIAG_E_NOMEM;
    }
    for (int l = 0; l < L; l++)
        k[l] = l + 1;
    for (int p = 0; p < P && p < RESDIAG_MAX_PARAMS; p++) {
        for (int l = 0; l < L; l++)
            col[l] = a->gradients.grad[(size_t)l * P + p];
        rd_fit_loglog(k, col, L, &a->gradients.fit_grad[p]);
    }
    rd_fit_loglog(k, a->gradients.sgrad, L, &a->gradients.fit_sgrad);
    free(k);
    free(col);
    return RESDIAG_OK;
}

resdiag_status rd_analysis_gradients(const resdiag_reader *rd, rd_analysis *a)
{
    rd_gradients *g = &a->gradients;
    int L = a->load.n_layers, P = a->load.n_layer_params;
    g->step = -1;
    g->head_grad = NAN;
    g->sgrad_embed = NAN;
    g->grad = calloc((size_t)L * (P ? P : 1), sizeof *g->grad);
    g->sgrad = calloc((size_t)L, sizeof *g->sgrad);
    if (!g->grad || !g->sgrad)
        return RESDIAG_E_NOMEM;
    resdiag_status st = find_grad_step(rd, a);
    if (st || a->gradients.step < 0)
        return st;
    if ((st = read_grads(rd, a)) || (st = read_head_grad(rd, a)))
        return st;
    return fit_grads(a);
}

/* The residual-write matrix (W2) first, then the others in the file's
 * order: the over-training summary and the report follow it. */
void rd_analysis_param_order(const resdiag_reader *rd, rd_analysis *a)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    const char *residual = rd_analysis_role_param(in, RD_ROLE_RESIDUAL);
    int w2 = residual ? param_index(in, residual) : -1;
    a->gradients.n_order = 0;
    if (w2 >= 0)
        a->gradients.param_order[a->gradients.n_order++] = w2;
    for (int p = 0; p < in->n_layer_params && a->gradients.n_order < RESDIAG_MAX_PARAMS; p++)
        if (p != w2)
            a->gradients.param_order[a->gradients.n_order++] = p;
}
