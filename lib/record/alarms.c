/*
 * alarms.c - the alarms a trainer declares in resdiag_options (alarm_*):
 * checked at step_end from the statistics the step's hooks already put in
 * its record, so that the hooks do no more work. Each kind fires once per
 * run (the first step where it holds); steps.c writes that step at once
 * and returns RESDIAG_ALARM. The getters: resdiag_alarm_count/_get.
 */
#include <math.h>
#include <string.h>

#include "record/handle.h"

/* A bound that is on: 0 and NaN are off (validated >= 0 at open). */
static int bound_on(double b)
{
    return b > 0;
}

static const char *kind_name(resdiag_alarm_kind k)
{
    static const char *const names[RESDIAG_N_ALARM_KINDS] = { "nonfinite", "update_ratio",
                                                              "growth", "grad_norm" };
    return k >= 0 && k < RESDIAG_N_ALARM_KINDS ? names[k] : "?";
}

static int kind_fired(const resdiag *r, resdiag_alarm_kind kind)
{
    for (int i = 0; i < r->n_alarms; i++)
        if (r->alarms[i].kind == kind)
            return 1;
    return 0;
}

static resdiag_alarm blank(const resdiag *r, resdiag_alarm_kind kind, double bound)
{
    return (resdiag_alarm){ .kind = kind, .step = r->step, .rank = r->rank,
                            .direction = RESDIAG_FORWARD, .layer = RESDIAG_MODEL_LEVEL,
                            .sublayer = -1, .site = -1, .param = NULL, .ref_layer = -1,
                            .value = NAN, .bound = bound };
}

/* Where slot `slot` of STATS table `t` is, in an alarm's terms. */
static void place_slot(const resdiag *r, int t, size_t slot, resdiag_alarm *a)
{
    const rd_tables *lay = &r->lay;
    const size_t B = (size_t)lay->n_block_sites, S = (size_t)lay->n_sublayers;
    a->direction = t == RD_T_FWD_SITE || t == RD_T_FWD_MODEL ? RESDIAG_FORWARD
                                                              : RESDIAG_BACKWARD;
    switch (t) {
    case RD_T_FWD_SITE:
    case RD_T_BWD_SITE:
        a->site = (int)(slot % B);
        a->sublayer = (int)(slot / B % S);
        a->layer = (int)(slot / B / S);
        break;
    case RD_T_FWD_MODEL:
    case RD_T_BWD_MODEL:
        a->site = (int)RESDIAG_EMBED_OUT + (int)slot;
        break;
    case RD_T_LAYER_PARAM: {
        const size_t P = (size_t)lay->n_layer_params;
        a->layer = (int)(slot / P);
        a->param = r->model.layer_param_names[slot % P];
        break;
    }
    default: /* RD_T_MODEL_PARAM */
        a->param = r->model.model_param_names[slot];
        break;
    }
}

/* The step's first non-finite value: of the slots holding a NaN or Inf,
 * the one whose first call came first in the step. */
static int check_nonfinite(const resdiag *r, resdiag_alarm *out)
{
    const int F = RESDIAG_N_FIELDS;
    double best_seq = INFINITY;
    int found = 0;
    for (int t = RD_T_FWD_SITE; t <= RD_T_MODEL_PARAM; t++) {
        const rd_table *tb = &r->lay.tables[t];
        const size_t n = tb->count / (size_t)F;
        for (size_t i = 0; i < n; i++) {
            const double *f = r->cur + tb->offset + i * (size_t)F;
            double bad = 0;
            if (f[RESDIAG_FIELD_NAN_COUNT] > 0)
                bad += f[RESDIAG_FIELD_NAN_COUNT];
            if (f[RESDIAG_FIELD_INF_COUNT] > 0)
                bad += f[RESDIAG_FIELD_INF_COUNT];
            if (!(bad > 0))
                continue;
            double seq = f[RESDIAG_FIELD_CALL_SEQ];
            if (isnan(seq))
                seq = INFINITY;
            if (found && !(seq < best_seq))
                continue;
            *out = blank(r, RESDIAG_ALARM_NONFINITE, 0);
            place_slot(r, t, i, out);
            out->value = bad;
            best_seq = seq;
            found = 1;
        }
    }
    return found;
}

/* The largest update ratio above the bound. */
static int check_update_ratio(const resdiag *r, resdiag_alarm *out)
{
    const double bound = r->opt.alarm_update_ratio;
    const int S = r->lay.n_sublayers;
    int found = 0;
    for (int l = r->layer_lo; l < r->layer_hi; l++)
        for (int s = 0; s < S; s++) {
            double v = r->cur[rd_tables_offset(&r->lay, RD_T_UPDATE, (size_t)l * S + s)
                              + RESDIAG_UPDATE_RATIO_FROB];
            if (!(v > bound) || (found && !(v > out->value)))
                continue;
            *out = blank(r, RESDIAG_ALARM_UPDATE_RATIO, bound);
            out->layer = l;
            out->sublayer = s;
            out->site = RESDIAG_BRANCH_OUT;
            out->value = v;
            found = 1;
        }
    return found;
}

/* The stream leaving layer l (its last sublayer's STREAM_OUT): the mean
 * per-token norm, NaN when not recorded in the step. */
static double stream_norm(const resdiag *r, int l)
{
    int table;
    size_t slot;
    rd_tables_site_slot(&r->lay, RESDIAG_FORWARD, l, r->lay.n_sublayers - 1,
                        RESDIAG_STREAM_OUT, 0, &table, &slot);
    const double *f = r->cur + rd_tables_offset(&r->lay, table, slot);
    return f[RESDIAG_FIELD_ROWS] > 0 ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
}

/* Growth: the highest recorded layer's output over the lowest's. */
static int check_growth(const resdiag *r, resdiag_alarm *out)
{
    int lo = -1, hi = -1;
    for (int l = r->layer_lo; l < r->layer_hi; l++)
        if (!isnan(stream_norm(r, l))) {
            if (lo < 0)
                lo = l;
            hi = l;
        }
    if (lo < 0 || hi == lo)
        return 0;
    const double den = stream_norm(r, lo), g = stream_norm(r, hi) / den;
    if (!(den > 0) || !(g > r->opt.alarm_growth))
        return 0;
    *out = blank(r, RESDIAG_ALARM_GROWTH, r->opt.alarm_growth);
    out->layer = hi;
    out->sublayer = r->lay.n_sublayers - 1;
    out->site = RESDIAG_STREAM_OUT;
    out->ref_layer = lo;
    out->value = g;
    return 1;
}

/* The largest parameter gradient norm above the bound. */
static int check_grad_norm(const resdiag *r, resdiag_alarm *out)
{
    const int F = RESDIAG_N_FIELDS;
    const double bound = r->opt.alarm_grad_norm;
    int found = 0;
    for (int t = RD_T_LAYER_PARAM; t <= RD_T_MODEL_PARAM; t++) {
        const rd_table *tb = &r->lay.tables[t];
        const size_t n = tb->count / (size_t)F;
        for (size_t i = 0; i < n; i++) {
            double v = r->cur[tb->offset + i * (size_t)F + RESDIAG_FIELD_FROB];
            if (!(v > bound) || (found && !(v > out->value)))
                continue;
            *out = blank(r, RESDIAG_ALARM_GRAD_NORM, bound);
            place_slot(r, t, i, out);
            out->value = v;
            found = 1;
        }
    }
    return found;
}

int rd_alarms_check(resdiag *r)
{
    const resdiag_options *o = &r->opt;
    int fired = 0;
    resdiag_alarm a;
    if (o->alarm_nonfinite && !kind_fired(r, RESDIAG_ALARM_NONFINITE) && check_nonfinite(r, &a))
        r->alarms[r->n_alarms++] = a, fired++;
    if (bound_on(o->alarm_update_ratio) && !kind_fired(r, RESDIAG_ALARM_UPDATE_RATIO)
        && check_update_ratio(r, &a))
        r->alarms[r->n_alarms++] = a, fired++;
    if (bound_on(o->alarm_growth) && !kind_fired(r, RESDIAG_ALARM_GROWTH) && check_growth(r, &a))
        r->alarms[r->n_alarms++] = a, fired++;
    if (bound_on(o->alarm_grad_norm) && !kind_fired(r, RESDIAG_ALARM_GRAD_NORM)
        && check_grad_norm(r, &a))
        r->alarms[r->n_alarms++] = a, fired++;
    for (int i = r->n_alarms - fired; i < r->n_alarms; i++) {
        const resdiag_alarm *x = &r->alarms[i];
        rd_run_log(r, RESDIAG_LOG_INFO,
                   "alarm: %s at step %lld (rank %d, %s, layer %d, sublayer %d, site %s%s%s): "
                   "%g, bound %g",
                   kind_name(x->kind), (long long)x->step, x->rank,
                   x->direction == RESDIAG_FORWARD ? "forward" : "backward", x->layer,
                   x->sublayer, x->site >= 0 ? resdiag_site_name((resdiag_site)x->site) : "-",
                   x->param ? ", parameter " : "", x->param ? x->param : "", x->value,
                   x->bound);
    }
    return fired;
}

void rd_alarms_notify(resdiag *r, int n)
{
    if (!r->opt.alarm_fn)
        return;
    for (int i = r->n_alarms - n; i < r->n_alarms; i++)
        r->opt.alarm_fn(&r->alarms[i], r->opt.alarm_user_data);
}

int resdiag_alarm_count(const resdiag *r)
{
    return r ? r->n_alarms : 0;
}

resdiag_status resdiag_alarm_get(const resdiag *r, int i, resdiag_alarm *out)
{
    if (!r || !out)
        return RESDIAG_E_NULL;
    if (i < 0 || i >= r->n_alarms)
        return RESDIAG_E_RANGE;
    *out = r->alarms[i];
    return RESDIAG_OK;
}
