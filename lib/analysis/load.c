/*
 * load.c - reading the run into the analysis (a->load, load.h): the
 * run's identity, names and steps; the parameters that play a role, and
 * the reads of one site or of the stream that the phases share.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"
#include "format/format.h"

/* ------------------------------------------------------------ the run */

char *rd_analysis_dupstr(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s ? s : "", n);
    return d;
}

/* Which parameter plays a role: the run info's declaration (the reader
 * fills it, from the file's role attributes or, for files without them,
 * the conventional names) when it is one of the run's parameters, else
 * NULL. */
const char *rd_analysis_role_param(const resdiag_run_info *in, int which)
{
    int head = which == RD_ROLE_HEAD;
    const char *name = head ? in->head_param : in->residual_param;
    int n = head ? in->n_model_params : in->n_layer_params;
    const char *const *names = head ? in->model_param_names : in->layer_param_names;
    for (int i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0)
            return names[i];
    return NULL;
}

/* The sizes and names of the run. */
static resdiag_status copy_run(const resdiag_reader *rd, rd_load *r)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int S = in->n_sublayers, P = in->n_layer_params;
    r->n_layers = in->n_layers;
    r->n_sublayers = S;
    r->d_model = in->d_model;
    r->sketch_size = in->sketch_size;
    r->schema_version = in->schema_version;
    r->block = in->block;
    r->declared = in->declared_placement;
    r->declared_mix = in->declared_mix_layers;
    r->norm_kind = in->norm_kind;
    r->run_kind = in->run_kind;
    r->n_steps = in->n_steps;
    r->n_layer_params = P;
    r->file_rank = in->rank;
    r->file_world = in->n_ranks_merged > 1 ? 1 : in->world_size;
    r->file_split = in->split;
    r->description = rd_analysis_dupstr(in->description);
    r->writer_version = rd_analysis_dupstr(in->resdiag_version);
    r->created = rd_analysis_dupstr(in->created_utc);
    r->program = rd_analysis_dupstr(in->program);
    r->sublayer_names = calloc((size_t)S, sizeof *r->sublayer_names);
    r->param_names = calloc((size_t)(P ? P : 1), sizeof *r->param_names);
    r->steps = calloc((size_t)in->n_steps, sizeof *r->steps);
    if (!r->sublayer_names || !r->param_names || !r->steps || !r->description ||
        !r->writer_version || !r->created || !r->program)
        return RESDIAG_E_NOMEM;
    for (int s = 0; s < S; s++)
        if (!(r->sublayer_names[s] = rd_analysis_dupstr(in->sublayer_names[s])))
            return RESDIAG_E_NOMEM;
    for (int p = 0; p < P; p++)
        if (!(r->param_names[p] = rd_analysis_dupstr(in->layer_param_names[p])))
            return RESDIAG_E_NOMEM;
    const char *head = rd_analysis_role_param(in, RD_ROLE_HEAD);
    const char *residual = rd_analysis_role_param(in, RD_ROLE_RESIDUAL);
    if ((head && !(r->head_param_name = rd_analysis_dupstr(head))) ||
        (residual && !(r->residual_param_name = rd_analysis_dupstr(residual))))
        return RESDIAG_E_NOMEM;
    return RESDIAG_OK;
}

resdiag_status rd_analysis_load(const resdiag_reader *rd, const resdiag_analyze_options *o,
                                int64_t si, rd_analysis **out)
{
    *out = NULL;
    rd_analysis *a = calloc(1, sizeof *a);
    if (!a)
        return RESDIAG_E_NOMEM;
    rd_load *r = &a->load;
    r->step_index = si;
    r->max_growth = o->max_growth;
    resdiag_status st = copy_run(rd, r);
    if (!st)
        st = resdiag_reader_steps(rd, r->steps, r->n_steps);
    if (!st)
        st = resdiag_reader_file_state(rd, &r->file_state);
    if (st) {
        resdiag_analysis_destroy(a);
        return st;
    }
    r->step = r->steps[si];
    *out = a;
    return RESDIAG_OK;
}

/* ------------------------------------------- reads the phases share */

resdiag_status rd_analysis_load_site(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                     resdiag_direction dir, int l, int s, resdiag_site site,
                                     int k, rd_site_data *d)
{
    d->nonfinite = 0;
    resdiag_status st = rd_analysis_site(rd, a, si, dir, l, s, site, d->st, &d->obs);
    if (st)
        return st;
    if (k > 0 && d->obs) {
        st = resdiag_reader_sketch(rd, si, dir, l, s, site, d->sk);
        if (st)
            return st;
    }
    d->alias = -1;
    if (d->obs && site < RESDIAG_N_BLOCK_SITES &&
        (st = resdiag_reader_alias(rd, si, dir, l, s, site, &d->alias)))
        return st;
    /* Non-finite elements count as 0 in the sketch: a relation between
     * such tensors proves nothing, so the site gives no evidence. */
    if (d->obs && (d->st[RESDIAG_FIELD_NAN_COUNT] > 0 || d->st[RESDIAG_FIELD_INF_COUNT] > 0))
        d->nonfinite = 1;
    return RESDIAG_OK;
}

resdiag_status rd_analysis_stream_at(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                     int kk, double *st, int *obs)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    resdiag_status e;
    *obs = 0;
    if (kk == 0) {
        if ((e = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, 0, 0, RESDIAG_EMBED_OUT, st, obs)))
            return e;
        if (!*obs &&
            (e = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, st, obs)))
            return e;
        return RESDIAG_OK;
    }
    int l = kk - 1;
    if ((e = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, l, S - 1, RESDIAG_STREAM_OUT, st, obs)))
        return e;
    if (!*obs && l + 1 < L &&
        (e = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, l + 1, 0, RESDIAG_STREAM_IN, st, obs)))
        return e;
    if (!*obs && l + 1 == L &&
        (e = rd_analysis_site(rd, a, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN, st, obs)))
        return e;
    return RESDIAG_OK;
}

/* 1 if the run file has the dataset; asks quietly (resdiag_reader_dims
 * logs an error for a missing one). */
int rd_analysis_has_dataset(const resdiag_reader *rd, const char *name)
{
    int n = resdiag_reader_n_datasets(rd);
    for (int i = 0; i < n; i++)
        if (strcmp(resdiag_reader_dataset_name(rd, i), name) == 0)
            return 1;
    return 0;
}

/* 0 when none of the n tables stores anything at recorded step si (all of
 * them read NaN there: nothing observed), with *next the first step where
 * one may; 1 when one may. Going over every step then costs what the file
 * holds, not what it declares. */
int rd_analysis_step_stored(const resdiag_reader *rd, rd_stored_cursor *c, int n, int64_t si,
                            int64_t *next)
{
    int any = 0;
    *next = INT64_MAX;
    for (int d = 0; d < n; d++) {
        int64_t nd = si + 1;
        if (rd_stored_at(rd, &c[d], si, &nd))
            any = 1;
        else if (nd < *next)
            *next = nd;
    }
    if (any || *next <= si)
        *next = si + 1;
    return any;
}
