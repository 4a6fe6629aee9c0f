/*
 * target.c - the one prologue of every write call (hooks.h): whether the
 * call does anything at all, its NULL arguments, a team part's range, and
 * the rules of its target (a site's direction, site, schema, layer,
 * sublayer and pipeline stage; a parameter's layer, stage and name), then
 * where its slot lies in the step's record. Each rule is written once
 * here, with the variants of its message that the entry points have
 * always given.
 */
#include <stdio.h>
#include <string.h>

#include "record/hooks.h"

int rd_hook_skips(resdiag *r, const char *fn, const char *file, int line, resdiag_status *st)
{
    *st = RESDIAG_OK;
    if (!r)
        return 1;
    if (r->recording)
        return 0;
    *st = rd_hook_idle(r, fn, file, line);
    return 1;
}

/* A hook outside a step is a no-op, not a bug: trainers run the same
 * forward for validation and sampling between training steps. It says so
 * once, at DEBUG level. */
resdiag_status rd_hook_idle(resdiag *r, const char *fn, const char *file, int line)
{
    if (r->rank_idle) /* a rank that does not record: no-ops, whatever the call */
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "%s after resdiag_close (%s:%d)", fn,
                             file ? file : "?", line);
    if (r->sticky)
        return r->sticky;
    if (!r->in_step && !atomic_exchange(&r->outside_noted, 1))
        rd_run_log(r, RESDIAG_LOG_DEBUG, "%s outside a step (%s:%d): not recorded, as every "
                   "hook outside a step", fn, file ? file : "?", line);
    return RESDIAG_OK;
}

/* The call site as argument messages end: " (file:line)", or nothing for
 * a call that has none (resdiag_observe_alias). out holds a whole message. */
static const char *where(char out[512], const rd_target *t)
{
    out[0] = '\0';
    if (!t->unlocated)
        snprintf(out, 512, " (%s:%d)", t->file ? t->file : "?", t->line);
    return out;
}

/* ------------------------------------------------------------ arguments */

/* The pointers and counts the entry point was given. A parameter's name
 * and its partial share one message ("%s is NULL", as
 * resdiag_param_grad_partial has said), a site's partial has its own. */
static resdiag_status check_arguments(resdiag *r, const rd_target *t, const rd_hook_data *d)
{
    const char *f = t->file ? t->file : "?";
    const int partial_null = d && d->kind == RD_SOURCE_PARTIAL && !d->p;
    if (t->kind == RD_TARGET_PARAM && t->by_name && (!t->name || partial_null))
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: %s is NULL (%s:%d)", t->fn,
                             t->name ? "the partial statistics" : "name", f, t->line);
    if (partial_null)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: the partial statistics are NULL (%s:%d)",
                             t->fn, f, t->line);
    if (d && d->kind == RD_SOURCE_TEAM_PART &&
        (d->n_parts < 1 || d->n_parts > RESDIAG_MAX_TEAM || d->team_part < 0 ||
         d->team_part >= d->n_parts))
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: part %d of n_parts %d; need 0 <= part < "
                             "n_parts <= RESDIAG_MAX_TEAM (%d): not recorded (%s:%d)", t->fn,
                             d->team_part, d->n_parts, RESDIAG_MAX_TEAM, f, t->line);
    return RESDIAG_OK;
}

/* ------------------------------------------------------------ a site */

/* A pipeline stage holds layers layer_lo .. layer_hi-1 only: a write for
 * another layer is the trainer's mistake (another stage records it). */
static resdiag_status check_stage(resdiag *r, const rd_target *t)
{
    if (t->layer >= r->layer_lo && t->layer < r->layer_hi)
        return RESDIAG_OK;
    const int copy = t->kind == RD_TARGET_SITE && t->end;
    return rd_client_bug(r, RESDIAG_E_RANGE,
                         "%s: %s%slayer %d is not in this pipeline stage's layers %d..%d%s "
                         "(%s:%d)", t->fn, copy ? t->end : "", copy ? " " : "", t->layer,
                         r->layer_lo, r->layer_hi - 1,
                         copy ? "" : " (layer_first, layer_count): not recorded",
                         t->file ? t->file : "?", t->line);
}

/* The old layouts have room for stream_in..stream_out only. */
static resdiag_status needs_schema3(resdiag *r, const rd_target *t, resdiag_site site)
{
    char at[512];
    return rd_client_bug(r, RESDIAG_E_INVALID, "%s: site %s needs a file of schema 3; this run "
                         "writes schema %d (resdiag_options.file_schema)%s", t->fn,
                         resdiag_site_name(site), r->opt.file_schema, where(at, t));
}

/* An alias's two sites: block sites, not the same, both of this schema. */
static resdiag_status check_alias_sites(resdiag *r, const rd_target *t, resdiag_site same_as)
{
    if ((unsigned)t->site >= RESDIAG_N_BLOCK_SITES || (unsigned)same_as >= RESDIAG_N_BLOCK_SITES)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: sites %d and %d: both must be block sites "
                             "(0..%d)", t->fn, (int)t->site, (int)same_as,
                             RESDIAG_N_BLOCK_SITES - 1);
    if (t->site == same_as)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: %s cannot be an alias of itself", t->fn,
                             resdiag_site_name(t->site));
    if ((int)t->site >= r->lay.n_block_sites || (int)same_as >= r->lay.n_block_sites)
        return needs_schema3(r, t, (int)t->site >= r->lay.n_block_sites ? t->site : same_as);
    return RESDIAG_OK;
}

static resdiag_status check_site(resdiag *r, rd_target *t, const rd_hook_data *d)
{
    char at[512];
    const char *fn = t->fn, *end = t->end ? t->end : "", *gap = t->end ? " " : "";
    if ((unsigned)t->dir > RESDIAG_BACKWARD)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d%s", fn,
                             (int)t->dir, where(at, t));
    resdiag_status st;
    if (d && d->kind == RD_SOURCE_ALIAS && (st = check_alias_sites(r, t, d->alias_of)))
        return st;
    t->model = rd_model_site_index(t->site) >= 0;
    if (t->model) /* layer and sublayer are not used */
        return RESDIAG_OK;
    if ((unsigned)t->site >= RESDIAG_N_BLOCK_SITES)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: unknown %s %d%s", fn,
                             t->end ? t->end : "site", (int)t->site, where(at, t));
    if ((int)t->site >= r->lay.n_block_sites)
        return needs_schema3(r, t, t->site);
    if (t->layer < 0 || t->layer >= r->model.n_layers)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: %s%slayer %d out of range 0..%d%s", fn,
                             end, gap, t->layer, r->model.n_layers - 1, where(at, t));
    if (t->sublayer < 0 || t->sublayer >= r->model.n_sublayers)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: %s%ssublayer %d out of range 0..%d%s",
                             fn, end, gap, t->sublayer, r->model.n_sublayers - 1,
                             where(at, t));
    return check_stage(r, t);
}

/* ------------------------------------------------------------ a parameter */

/* The layer in range and in this stage, and the parameter's index into its
 * layer's (or the model's) names: looked up by name, or checked. */
static resdiag_status check_param(resdiag *r, rd_target *t)
{
    const char *f = t->file ? t->file : "?";
    const int model_level = t->layer == RESDIAG_MODEL_LEVEL;
    if (!model_level && (t->layer < 0 || t->layer >= r->model.n_layers))
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d or "
                             "RESDIAG_MODEL_LEVEL (%s:%d)", t->fn, t->layer,
                             r->model.n_layers - 1, f, t->line);
    resdiag_status st;
    if (!model_level && (st = check_stage(r, t)))
        return st;
    const int n = model_level ? r->model.n_model_params : r->model.n_layer_params;
    const char *const *names =
        model_level ? r->model.model_param_names : r->model.layer_param_names;
    const char *level = model_level ? "model-level" : "per-layer";
    /* the fields of resdiag_model that declare them: the fix to name */
    const char *fields = model_level ? "model_param_names and n_model_params"
                                     : "layer_param_names and n_layer_params";
    if (t->by_name) {
        t->param = 0;
        while (t->param < n && strcmp(names[t->param], t->name) != 0)
            t->param++;
        if (t->param == n)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: '%s' is not a declared %s parameter: "
                                 "list it in resdiag_model's %s (%d declared) (%s:%d)",
                                 t->fn, t->name, level, fields, n, f, t->line);
    } else if (t->param < 0 || t->param >= n) {
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: parameter index %d out of range 0..%d of "
                             "the %s parameters, declared in resdiag_model's %s (%s:%d)",
                             t->fn, t->param, n - 1, level, fields, f, t->line);
    }
    t->name = names[t->param];
    return RESDIAG_OK;
}

/* ------------------------------------------------------------ resolving */

resdiag_status rd_target_resolve(resdiag *r, rd_target *t, const rd_hook_data *d,
                                 int *skipped)
{
    resdiag_status st;
    *skipped = rd_hook_skips(r, t->fn, t->file, t->line, &st);
    if (*skipped || (st = check_arguments(r, t, d)))
        return st;
    st = t->kind == RD_TARGET_PARAM ? check_param(r, t) : check_site(r, t, d);
    if (!st)
        rd_target_locate(r, t);
    return st;
}

void rd_target_locate(const resdiag *r, rd_target *t)
{
    const rd_tables *lay = &r->lay;
    int table;
    size_t slot;
    t->add = NULL;
    t->sketch = 0;
    if (t->kind == RD_TARGET_PARAM) {
        const int model_level = t->layer == RESDIAG_MODEL_LEVEL;
        table = model_level ? RD_T_MODEL_PARAM : RD_T_LAYER_PARAM;
        slot = model_level ? (size_t)t->param
                           : (size_t)t->layer * (size_t)r->model.n_layer_params +
                                 (size_t)t->param;
    } else {
        int sk_table;
        size_t sk_slot;
        t->model = rd_model_site_index(t->site) >= 0;
        rd_tables_site_slot(lay, t->dir, t->layer, t->sublayer, t->site, 0, &table, &slot);
        rd_tables_site_slot(lay, t->dir, t->layer, t->sublayer, t->site, 1, &sk_table,
                            &sk_slot);
        t->sketch = rd_tables_offset(lay, sk_table, sk_slot);
        /* the add's two tensors keep what the update ratio needs */
        if (t->dir == RESDIAG_FORWARD &&
            (t->site == RESDIAG_STREAM_IN || t->site == RESDIAG_BRANCH_OUT))
            t->add = &r->adds[(size_t)t->layer * (size_t)r->model.n_sublayers +
                              (size_t)t->sublayer];
    }
    t->cs = lay->tables[table].slot_offset + slot;
    t->fields = rd_tables_offset(lay, table, slot);
    t->calls = rd_tables_calls_offset(lay, table, slot);
}

void rd_target_label(char *out, size_t len, const rd_target *t)
{
    const char *dir = t->dir ? "backward" : "forward";
    if (t->kind == RD_TARGET_PARAM && t->layer == RESDIAG_MODEL_LEVEL)
        snprintf(out, len, "the gradient of model parameter '%s'", t->name);
    else if (t->kind == RD_TARGET_PARAM)
        snprintf(out, len, "the gradient of '%s' in layer %d", t->name, t->layer);
    else if (t->model)
        snprintf(out, len, "%s %s", dir, resdiag_site_name(t->site));
    else
        snprintf(out, len, "%s %s of layer %d sublayer %d", dir, resdiag_site_name(t->site),
                 t->layer, t->sublayer);
}
