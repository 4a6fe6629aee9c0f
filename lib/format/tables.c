/*
 * tables.c - where each table sits in a step record. The writer, the reader
 * and the run all derive offsets from here, so they cannot disagree.
 */
#include "format/format.h"
#include "format/tables.h"

#include <math.h>
#include <string.h>

int rd_model_site_index(resdiag_site site)
{
    if (site >= RESDIAG_EMBED_OUT && site < RESDIAG_EMBED_OUT + RESDIAG_N_MODEL_SITES)
        return (int)site - (int)RESDIAG_EMBED_OUT;
    return -1;
}

const char *rd_update_label(int field)
{
    static const char *const labels[RESDIAG_N_UPDATE_FIELDS] = { "ratio_frob",
                                                                 "ratio_tok_mean" };
    return field >= 0 && field < RESDIAG_N_UPDATE_FIELDS ? labels[field] : "?";
}

const int rd_real_fields[RD_N_REAL_FIELDS] = {
    RESDIAG_FIELD_FROB,          RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_NORM_STD,
    RESDIAG_FIELD_TOK_NORM_MIN,  RESDIAG_FIELD_TOK_NORM_MAX,  RESDIAG_FIELD_TOK_MEAN_MEAN,
    RESDIAG_FIELD_TOK_MEAN_STD,  RESDIAG_FIELD_TOK_RMS_MEAN,  RESDIAG_FIELD_TOK_RMS_STD,
    RESDIAG_FIELD_TOK_STD_MEAN,  RESDIAG_FIELD_TOK_STD_STD,   RESDIAG_FIELD_ABSMAX
};
const int rd_count_fields[RD_N_COUNT_FIELDS] = {
    RESDIAG_FIELD_ROWS,      RESDIAG_FIELD_COLS,      RESDIAG_FIELD_ABSMAX_COL,
    RESDIAG_FIELD_NAN_COUNT, RESDIAG_FIELD_INF_COUNT, RESDIAG_FIELD_CALL_SEQ
};

static void set_table(rd_table *t, const char *name, const char *callsite_name,
                      const char *axes, const char *description, const char *units,
                      enum rd_table_kind kind, int rank, const int64_t *dims)
{
    t->name = name;
    t->callsite_name = callsite_name;
    t->axes = axes;
    t->description = description;
    t->units = units;
    t->kind = kind;
    t->rank = rank;
    t->count = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->count *= (size_t)dims[i];
    }
}

/* The step status tables (resdiag_step_abort): a flag per step, and the
 * bytes of the reason, which stay NaN (never stored) in a complete step. */
static void set_step_status_tables(rd_table *t)
{
    set_table(&t[RD_T_STEP_ABORTED], RD_DS_STEP_ABORTED, NULL, "step,status",
              "1: the trainer ended the step with resdiag_step_abort (an exception, a lost "
              "peer): its records are incomplete; 0: it ended normally; NaN: not written "
              "(reads as complete)",
              "flag", RD_KIND_FLAG, 1, (int64_t[]){ 1 });
    set_table(&t[RD_T_ABORT_REASON], RD_DS_ABORT_REASON, NULL, "step,reason_byte",
              "the reason given to resdiag_step_abort, UTF-8 bytes padded with NUL (all 0: "
              "none, or a complete step)",
              "byte", RD_KIND_TEXT, 1, (int64_t[]){ RESDIAG_MAX_ABORT_REASON });
}

int rd_block_sites(int schema_version)
{
    return schema_version >= 3 ? RESDIAG_N_BLOCK_SITES : RD_OLD_BLOCK_SITES;
}

void rd_tables_init(rd_tables *lay, int n_layers, int n_sublayers, int n_layer_params,
                    int n_model_params, int sketch_size, int n_block_sites)
{
    const int64_t L = n_layers, S = n_sublayers, B = n_block_sites,
                  M = RESDIAG_N_MODEL_SITES, P = n_layer_params, Q = n_model_params,
                  F = RESDIAG_N_FIELDS, U = RESDIAG_N_UPDATE_FIELDS, K = sketch_size;
    memset(lay, 0, sizeof *lay);
    lay->n_layers = n_layers;
    lay->n_sublayers = n_sublayers;
    lay->n_layer_params = n_layer_params;
    lay->n_model_params = n_model_params;
    lay->sketch_size = sketch_size;
    lay->n_block_sites = n_block_sites;

    rd_table *t = lay->tables;
    set_table(&t[RD_T_FWD_SITE], RD_DS_FWD_SITE_STATS, RD_DS_FWD_SITE_CALLSITE,
              "step,layer,sublayer,site,field",
              "statistics of the activation observed at each block site",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 4,
              (int64_t[]){ L, S, B, F });
    set_table(&t[RD_T_BWD_SITE], RD_DS_BWD_SITE_STATS, RD_DS_BWD_SITE_CALLSITE,
              "step,layer,sublayer,site,field",
              "statistics of dLoss/d(activation) at each block site",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 4,
              (int64_t[]){ L, S, B, F });
    set_table(&t[RD_T_FWD_MODEL], RD_DS_FWD_MODEL_STATS, RD_DS_FWD_MODEL_CALLSITE,
              "step,model_site,field",
              "statistics of the activation at the model-level sites",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ M, F });
    set_table(&t[RD_T_BWD_MODEL], RD_DS_BWD_MODEL_STATS, RD_DS_BWD_MODEL_CALLSITE,
              "step,model_site,field",
              "statistics of dLoss/d(activation) at the model-level sites",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ M, F });
    set_table(&t[RD_T_LAYER_PARAM], RD_DS_LAYER_PARAM_STATS, RD_DS_LAYER_PARAM_CALLSITE,
              "step,layer,param,field",
              "statistics of the gradient of each named per-layer parameter",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 3,
              (int64_t[]){ L, P, F });
    set_table(&t[RD_T_MODEL_PARAM], RD_DS_MODEL_PARAM_STATS,
              RD_DS_MODEL_PARAM_CALLSITE, "step,model_param,field",
              "statistics of the gradient of each named model-level parameter",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ Q, F });
    set_table(&t[RD_T_UPDATE], RD_DS_UPDATE, NULL, "step,layer,sublayer,update_field",
              "relative update of the residual stream by each sublayer: "
              "ratio_frob = ||dx||_F/||x||_F, ratio_tok_mean = mean over tokens of "
              "||dx_i||/||x_i||, with x = stream_in and dx = branch_out",
              "1 (dimensionless ratio)", RD_KIND_UPDATE, 3, (int64_t[]){ L, S, U });
    set_table(&t[RD_T_FWD_SITE_SKETCH], RD_DS_FWD_SITE_SKETCH, NULL,
              "step,layer,sublayer,site,sketch",
              "linear sketch (signed count-sketch projection) of the activation at each "
              "block site: sketch(a+b) = sketch(a)+sketch(b)",
              "same units as the activation", RD_KIND_SKETCH, 4, (int64_t[]){ L, S, B, K });
    set_table(&t[RD_T_BWD_SITE_SKETCH], RD_DS_BWD_SITE_SKETCH, NULL,
              "step,layer,sublayer,site,sketch",
              "linear sketch of dLoss/d(activation) at each block site",
              "same units as the gradient", RD_KIND_SKETCH, 4, (int64_t[]){ L, S, B, K });
    set_table(&t[RD_T_FWD_MODEL_SKETCH], RD_DS_FWD_MODEL_SKETCH, NULL,
              "step,model_site,sketch", "linear sketch of the activation at model-level sites",
              "same units as the activation", RD_KIND_SKETCH, 2, (int64_t[]){ M, K });
    set_table(&t[RD_T_BWD_MODEL_SKETCH], RD_DS_BWD_MODEL_SKETCH, NULL,
              "step,model_site,sketch",
              "linear sketch of dLoss/d(activation) at model-level sites",
              "same units as the gradient", RD_KIND_SKETCH, 2, (int64_t[]){ M, K });
    set_table(&t[RD_T_FWD_ALIAS], RD_DS_FWD_SITE_ALIAS, NULL, "step,layer,sublayer,site",
              "the site of the same layer and sublayer whose tensor this site was recorded "
              "from, the very same tensor (resdiag_observe_alias): a relation between the two "
              "holds by construction; NaN: a tensor of its own",
              "site index (site_names)", RD_KIND_ALIAS, 3, (int64_t[]){ L, S, B });
    set_table(&t[RD_T_BWD_ALIAS], RD_DS_BWD_SITE_ALIAS, NULL, "step,layer,sublayer,site",
              "as forward/site_alias, for the gradients at the block sites",
              "site index (site_names)", RD_KIND_ALIAS, 3, (int64_t[]){ L, S, B });
    /* Sized by rd_tables_set_metrics: absent until then. */
    set_table(&t[RD_T_METRICS], RD_DS_METRICS, NULL, "step,metric",
              "the trainer's own value of each metric at the step (resdiag_step_metric), "
              "e.g. its loss; NaN: not given at that step",
              "trainer-defined (see metric_names)", RD_KIND_METRIC, 1, (int64_t[]){ 0 });
    set_step_status_tables(t);

    static const char *const calls_names[] = {
        RD_DS_FWD_SITE_CALLS, RD_DS_BWD_SITE_CALLS, RD_DS_FWD_MODEL_CALLS,
        RD_DS_BWD_MODEL_CALLS, RD_DS_LAYER_PARAM_CALLS, RD_DS_MODEL_PARAM_CALLS
    };
    for (int i = RD_T_FWD_SITE; i <= RD_T_MODEL_PARAM; i++) {
        /* the stats table's axes and dims without the last (field) */
        static const char *const calls_axes[] = {
            "step,layer,sublayer,site", "step,layer,sublayer,site", "step,model_site",
            "step,model_site", "step,layer,param", "step,model_param"
        };
        static const char *const calls_desc[] = {
            "hook calls merged into each row of forward/site_stats in the step (NaN: not observed)",
            "hook calls merged into each row of backward/site_stats in the step (NaN: not observed)",
            "hook calls merged into each row of forward/model_stats in the step (NaN: not observed)",
            "hook calls merged into each row of backward/model_stats in the step (NaN: not "
            "observed)",
            "hook calls merged into each row of backward/param_stats in the step (NaN: not "
            "observed)",
            "hook calls merged into each row of backward/model_param_stats in the step (NaN: not "
            "observed)"
        };
        set_table(&t[RD_T_FWD_SITE_CALLS + i], calls_names[i], NULL, calls_axes[i],
                  calls_desc[i], "count", RD_KIND_CALLS, t[i].rank - 1, t[i].dims);
    }

    static const char *const counts_names[] = {
        RD_DS_FWD_SITE_COUNTS, RD_DS_BWD_SITE_COUNTS, RD_DS_FWD_MODEL_COUNTS,
        RD_DS_BWD_MODEL_COUNTS, RD_DS_LAYER_PARAM_COUNTS, RD_DS_MODEL_PARAM_COUNTS
    };
    for (int i = RD_T_FWD_SITE; i <= RD_T_MODEL_PARAM; i++)
        t[i].counts_name = counts_names[i];

    size_t off = 0, slots = 0;
    for (int i = 0; i < RD_N_TABLES; i++) {
        t[i].offset = off;
        off += t[i].count;
        if (t[i].kind == RD_KIND_STATS) {
            t[i].slot_offset = slots;
            slots += t[i].count / (size_t)F;
        }
    }
    lay->record_len = off;
    lay->n_slots = slots;

    rd_table *u = lay->summary;
    set_table(&u[RD_S_NONFINITE], RD_DS_SUMMARY_NONFINITE, NULL, "step,nonfinite_field",
              "non-finite values of the step over every statistics table: nan_count and "
              "inf_count summed over all observed tensors, records = tensors with any",
              "count", RD_KIND_UPDATE, 1, (int64_t[]){ RD_SUM_NF_COLS });
    set_table(&u[RD_S_OBSERVED], RD_DS_SUMMARY_OBSERVED, NULL, "step,stats_table",
              "observed tensors (rows whose rows field is not NaN) in each statistics table "
              "at the step", "count", RD_KIND_UPDATE, 1, (int64_t[]){ RD_SUM_OBS_COLS });
    set_table(&u[RD_S_STREAM_NORM], RD_DS_SUMMARY_STREAM_NORM, NULL, "step,layer",
              "tok_norm_mean of the forward stream_out of each layer's last sublayer "
              "(copy of forward/site_stats; NaN: not observed)",
              "same units as the activation", RD_KIND_UPDATE, 1, (int64_t[]){ L });
    set_table(&u[RD_S_UPDATE_RATIO], RD_DS_SUMMARY_UPDATE_RATIO, NULL, "step,layer,sublayer",
              "ratio_frob = ||dx||_F/||x||_F of each sublayer (copy of forward/update; NaN: "
              "not observed)", "1 (dimensionless ratio)", RD_KIND_UPDATE, 2,
              (int64_t[]){ L, S });
    off = 0;
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        u[i].offset = off;
        off += u[i].count;
    }
    lay->summary_len = off;
}

void rd_tables_set_metrics(rd_tables *lay, int n_metrics)
{
    rd_table *t = &lay->tables[RD_T_METRICS];
    if (n_metrics <= 0 || t->count != 0)
        return;
    lay->n_metrics = n_metrics;
    t->dims[0] = n_metrics;
    t->count = (size_t)n_metrics;
    t->offset = lay->record_len;
    lay->record_len += t->count;
}

const char *rd_summary_nonfinite_label(int col)
{
    static const char *const labels[RD_SUM_NF_COLS] = { "nan_count", "inf_count", "records" };
    return col >= 0 && col < RD_SUM_NF_COLS ? labels[col] : "?";
}

const char *rd_summary_observed_label(int col)
{
    /* the STATS tables, in table order */
    static const char *const labels[RD_SUM_OBS_COLS] = {
        RD_DS_FWD_SITE_STATS, RD_DS_BWD_SITE_STATS, RD_DS_FWD_MODEL_STATS,
        RD_DS_BWD_MODEL_STATS, RD_DS_LAYER_PARAM_STATS, RD_DS_MODEL_PARAM_STATS
    };
    return col >= 0 && col < RD_SUM_OBS_COLS ? labels[col] : "?";
}

void rd_tables_summarize(const rd_tables *lay, const double *record, double *out)
{
    const int F = RESDIAG_N_FIELDS, L = lay->n_layers, S = lay->n_sublayers;
    double *nf = out + lay->summary[RD_S_NONFINITE].offset;
    double *obs = out + lay->summary[RD_S_OBSERVED].offset;
    nf[RD_SUM_NAN] = nf[RD_SUM_INF] = nf[RD_SUM_RECORDS] = 0;
    for (int i = 0; i < RD_SUM_OBS_COLS; i++) {
        const rd_table *t = &lay->tables[RD_T_FWD_SITE + i];
        size_t rows = t->count / (size_t)F, seen = 0;
        const double *f = record + t->offset;
        for (size_t r = 0; r < rows; r++, f += F) {
            double nn = f[RESDIAG_FIELD_NAN_COUNT], ni = f[RESDIAG_FIELD_INF_COUNT];
            seen += !isnan(f[RESDIAG_FIELD_ROWS]);
            /* as the analysis counts them: NaN (unobserved) counts nothing */
            if (nn > 0)
                nf[RD_SUM_NAN] += nn;
            if (ni > 0)
                nf[RD_SUM_INF] += ni;
            if (nn > 0 || ni > 0)
                nf[RD_SUM_RECORDS] += 1;
        }
        obs[i] = (double)seen;
    }
    double *xn = out + lay->summary[RD_S_STREAM_NORM].offset;
    double *ur = out + lay->summary[RD_S_UPDATE_RATIO].offset;
    for (int l = 0; l < L; l++) {
        size_t slot = ((size_t)l * (size_t)S + (size_t)(S - 1)) * (size_t)lay->n_block_sites
                      + RESDIAG_STREAM_OUT;
        xn[l] = record[rd_tables_offset(lay, RD_T_FWD_SITE, slot) + RESDIAG_FIELD_TOK_NORM_MEAN];
        for (int s = 0; s < S; s++)
            ur[l * S + s] = record[rd_tables_offset(lay, RD_T_UPDATE, (size_t)l * S + s)
                                   + RESDIAG_UPDATE_RATIO_FROB];
    }
}

void rd_tables_site_slot(const rd_tables *lay, resdiag_direction dir, int layer, int sublayer,
                         resdiag_site site, int sketch, int *table, size_t *slot)
{
    int m = rd_model_site_index(site);
    int fwd = dir == RESDIAG_FORWARD;
    if (m >= 0) {
        *table = sketch ? (fwd ? RD_T_FWD_MODEL_SKETCH : RD_T_BWD_MODEL_SKETCH)
                        : (fwd ? RD_T_FWD_MODEL : RD_T_BWD_MODEL);
        *slot = (size_t)m;
        return;
    }
    *table = sketch ? (fwd ? RD_T_FWD_SITE_SKETCH : RD_T_BWD_SITE_SKETCH)
                    : (fwd ? RD_T_FWD_SITE : RD_T_BWD_SITE);
    *slot = ((size_t)layer * (size_t)lay->n_sublayers + (size_t)sublayer) *
                (size_t)lay->n_block_sites
            + (size_t)site;
}

void rd_tables_set_aborted(const rd_tables *lay, double *record, const char *reason)
{
    record[lay->tables[RD_T_STEP_ABORTED].offset] = 1;
    double *bytes = record + lay->tables[RD_T_ABORT_REASON].offset;
    size_t n = reason ? strlen(reason) : 0;
    if (n > RESDIAG_MAX_ABORT_REASON - 1)
        n = RESDIAG_MAX_ABORT_REASON - 1;
    for (size_t i = 0; i < RESDIAG_MAX_ABORT_REASON; i++)
        bytes[i] = i < n ? (double)(unsigned char)reason[i] : 0;
}

void rd_tables_set_complete(const rd_tables *lay, double *record)
{
    double *flag = record + lay->tables[RD_T_STEP_ABORTED].offset;
    if (!(*flag == 1))
        *flag = 0;
}

void rd_tables_abort_reason(const double *bytes, char *out, size_t out_len)
{
    size_t n = 0;
    for (; n + 1 < out_len && n < RESDIAG_MAX_ABORT_REASON; n++) {
        double v = bytes[n];
        if (!(v >= 1 && v <= 255))
            break;
        out[n] = (char)(unsigned char)v;
    }
    out[n] = '\0';
}
