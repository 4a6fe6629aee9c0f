/*
 * layout.c - where each table sits in a step record. The writer, the reader
 * and the run all derive offsets from here, so they cannot disagree.
 */
#include "layout.h"

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

void rd_layout_init(rd_layout *lay, int n_layers, int n_sublayers, int n_layer_params,
                    int n_model_params, int sketch_size)
{
    const int64_t L = n_layers, S = n_sublayers, B = RESDIAG_N_BLOCK_SITES,
                  M = RESDIAG_N_MODEL_SITES, P = n_layer_params, Q = n_model_params,
                  F = RESDIAG_N_FIELDS, U = RESDIAG_N_UPDATE_FIELDS, K = sketch_size;
    memset(lay, 0, sizeof *lay);
    lay->n_layers = n_layers;
    lay->n_sublayers = n_sublayers;
    lay->n_layer_params = n_layer_params;
    lay->n_model_params = n_model_params;
    lay->sketch_size = sketch_size;

    rd_table *t = lay->tables;
    set_table(&t[RD_T_FWD_SITE], "forward/site_stats", "forward/site_callsite",
              "step,layer,sublayer,site,field",
              "statistics of the activation observed at each block site",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 4,
              (int64_t[]){ L, S, B, F });
    set_table(&t[RD_T_BWD_SITE], "backward/site_stats", "backward/site_callsite",
              "step,layer,sublayer,site,field",
              "statistics of dLoss/d(activation) at each block site",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 4,
              (int64_t[]){ L, S, B, F });
    set_table(&t[RD_T_FWD_MODEL], "forward/model_stats", "forward/model_callsite",
              "step,model_site,field",
              "statistics of the activation at the model-level sites",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ M, F });
    set_table(&t[RD_T_BWD_MODEL], "backward/model_stats", "backward/model_callsite",
              "step,model_site,field",
              "statistics of dLoss/d(activation) at the model-level sites",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ M, F });
    set_table(&t[RD_T_LAYER_PARAM], "backward/param_stats", "backward/param_callsite",
              "step,layer,param,field",
              "statistics of the gradient of each named per-layer parameter",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 3,
              (int64_t[]){ L, P, F });
    set_table(&t[RD_T_MODEL_PARAM], "backward/model_param_stats",
              "backward/model_param_callsite", "step,model_param,field",
              "statistics of the gradient of each named model-level parameter",
              "field-dependent: see the field_units attribute", RD_KIND_STATS, 2,
              (int64_t[]){ Q, F });
    set_table(&t[RD_T_UPDATE], "forward/update", NULL, "step,layer,sublayer,update_field",
              "relative update of the residual stream by each sublayer: "
              "ratio_frob = ||dx||_F/||x||_F, ratio_tok_mean = mean over tokens of "
              "||dx_i||/||x_i||, with x = stream_in and dx = branch_out",
              "1 (dimensionless ratio)", RD_KIND_UPDATE, 3, (int64_t[]){ L, S, U });
    set_table(&t[RD_T_FWD_SITE_SKETCH], "forward/site_sketch", NULL,
              "step,layer,sublayer,site,sketch",
              "linear sketch (signed count-sketch projection) of the activation at each "
              "block site: sketch(a+b) = sketch(a)+sketch(b)",
              "same units as the activation", RD_KIND_SKETCH, 4, (int64_t[]){ L, S, B, K });
    set_table(&t[RD_T_BWD_SITE_SKETCH], "backward/site_sketch", NULL,
              "step,layer,sublayer,site,sketch",
              "linear sketch of dLoss/d(activation) at each block site",
              "same units as the gradient", RD_KIND_SKETCH, 4, (int64_t[]){ L, S, B, K });
    set_table(&t[RD_T_FWD_MODEL_SKETCH], "forward/model_sketch", NULL,
              "step,model_site,sketch", "linear sketch of the activation at model-level sites",
              "same units as the activation", RD_KIND_SKETCH, 2, (int64_t[]){ M, K });
    set_table(&t[RD_T_BWD_MODEL_SKETCH], "backward/model_sketch", NULL,
              "step,model_site,sketch",
              "linear sketch of dLoss/d(activation) at model-level sites",
              "same units as the gradient", RD_KIND_SKETCH, 2, (int64_t[]){ M, K });

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
}

void rd_layout_site_slot(const rd_layout *lay, resdiag_direction dir, int layer, int sublayer,
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
    *slot = ((size_t)layer * (size_t)lay->n_sublayers + (size_t)sublayer) * RESDIAG_N_BLOCK_SITES
            + (size_t)site;
}
