/*
 * hooks.c - the hook entry points a trainer calls inside a step
 * (resdiag_observe_at, resdiag_observe_alias, resdiag_param_grad_at), and
 * what they share with those for statistics computed elsewhere
 * (partial.c, through hooks.h): check the call, claim the site's slot,
 * compute the tensor's statistics (or take the partial ones) into the open
 * step's record (merging repeated calls), release.
 *
 * Hooks may run concurrently on different layers; they never call the
 * writer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "record/hooks.h"
#include "record/same_as.h"
#include "record/update_ratio.h"
#include "stats/part.h"
#include "stats/partial.h"

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

resdiag_status rd_hook_check_tensor(resdiag *r, const char *fn, const resdiag_tensor *t,
                                    const char *file, int line)
{
    const char *f = file ? file : "?";
    if ((unsigned)t->dtype > RESDIAG_DTYPE_BF16)
        return rd_client_bug(r, RESDIAG_E_DTYPE, "%s: unknown dtype %d (%s:%d)", fn, (int)t->dtype,
                             f, line);
    if (t->rows < 0 || t->cols < 1)
        return rd_client_bug(r, RESDIAG_E_SHAPE, "%s: tensor is (%lld, %lld); need rows >= 0, "
                             "cols >= 1 (%s:%d)", fn, (long long)t->rows, (long long)t->cols, f,
                             line);
    if (t->row_stride != 0 && t->row_stride < t->cols)
        return rd_client_bug(r, RESDIAG_E_SHAPE, "%s: row_stride %lld is less than cols %lld "
                             "(%s:%d)", fn, (long long)t->row_stride, (long long)t->cols, f, line);
    int64_t stride = t->row_stride ? t->row_stride : t->cols;
    if (t->rows > 0 && stride > INT64_MAX / 8 / t->rows)
        return rd_client_bug(r, RESDIAG_E_SHAPE, "%s: tensor of %lld rows x %lld stride is too "
                             "large to address (%s:%d)", fn, (long long)t->rows, (long long)stride,
                             f, line);
    if (t->rows > 0 && !t->data)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: tensor data is NULL (%s:%d)", fn, f, line);
    return RESDIAG_OK;
}

/* The checks of the call's data: a tensor's, or the consistency of
 * partial statistics (a client bug naming the member). */
static resdiag_status check_data(resdiag *r, const char *fn, rd_hook_data d, const char *file,
                                 int line)
{
    if (d.t)
        return rd_hook_check_tensor(r, fn, d.t, file, line);
    if (d.copy) /* statistics this library computed for another site */
        return RESDIAG_OK;
    char why[200];
    const char *member = rd_partial_check(d.p, why, sizeof why);
    if (member)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: the partial statistics are "
                             "inconsistent (member %s): %s; not recorded (%s:%d)", fn, member,
                             why, file ? file : "?", line);
    return RESDIAG_OK;
}

/* The data's width (checked: an integer up to 2^53 for a partial). */
static int64_t data_cols(rd_hook_data d)
{
    return d.t ? d.t->cols
               : d.copy ? (int64_t)d.copy->fields[RESDIAG_FIELD_COLS] : (int64_t)d.p->cols;
}

/* The data's rows. */
static int64_t data_rows(rd_hook_data d)
{
    return d.t ? d.t->rows
               : d.copy ? (int64_t)d.copy->fields[RESDIAG_FIELD_ROWS] : (int64_t)d.p->rows;
}

static void note_callsite(resdiag *r, size_t slot, const char *file, int line)
{
    rd_callsite *c = &r->callsites[slot];
    if (c->file != file || c->line != line) {
        c->file = file;
        c->line = line;
        atomic_store_explicit(&r->callsites_changed, 1, memory_order_relaxed);
    }
}

/* Two calls at once must not write one slot, nor the add_state of one
 * sublayer (resdiag.h allows concurrent hooks on different layers only).
 * One atomic exchange per call tells: the second of two overlapping calls
 * finds the flag taken and records nothing, so the slot keeps the first
 * call's complete result. Acquire and release order one call's writes
 * before those of the next call that takes the flag, from any thread. */
static resdiag_status busy_bug(resdiag *r, const char *fn, const char *what, int add,
                               const char *file, int line)
{
    return rd_client_bug(r, RESDIAG_E_BUSY,
                         "%s: %s is being observed by another thread at this moment%s; this "
                         "call is not recorded (hooks may run concurrently on different layers "
                         "only) (%s:%d)", fn, what,
                         add ? " (or the other tensor of its residual add is)" : "",
                         file ? file : "?", line);
}

/* "forward stream_in of layer 3 sublayer 1" */
static void site_label(char *out, size_t len, resdiag_direction dir, int layer, int sublayer,
                       resdiag_site site)
{
    if (rd_model_site_index(site) >= 0)
        snprintf(out, len, "%s %s", dir ? "backward" : "forward", resdiag_site_name(site));
    else
        snprintf(out, len, "%s %s of layer %d sublayer %d", dir ? "backward" : "forward",
                 resdiag_site_name(site), layer, sublayer);
}

/* Where one call goes: the slot of a site or a parameter gradient, and
 * for a residual add's STREAM_IN and BRANCH_OUT its add_state. */
typedef struct slot_ref {
    double *fields, *sketch, *calls; /* sketch NULL: none kept (parameters, K = 0) */
    size_t cs;                       /* the slot's index among every table's slots */
    add_state *add;                  /* or NULL */
    resdiag_direction dir;
    int layer, sublayer;
    resdiag_site site;
    const char *param;               /* a parameter gradient's name, else NULL */
} slot_ref;

/* What messages call the slot: a site_label, or the parameter's. */
static void slot_label(char *out, size_t len, const slot_ref *s)
{
    if (!s->param)
        site_label(out, len, s->dir, s->layer, s->sublayer, s->site);
    else if (s->layer == RESDIAG_MODEL_LEVEL)
        snprintf(out, len, "the gradient of model parameter '%s'", s->param);
    else
        snprintf(out, len, "the gradient of '%s' in layer %d", s->param, s->layer);
}

/* Whether a call may go into a slot that already holds calls of this step
 * (*calls is not NaN): not with one_call_per_site, and only with the same
 * width. Returns OK, or the client bug. The slot keeps what it has. */
static resdiag_status check_repeat(resdiag *r, const char *fn, const slot_ref *s, int64_t cols,
                                   const char *file, int line)
{
    const double calls = *s->calls;
    if (isnan(calls))
        return RESDIAG_OK;
    char what[RESDIAG_MAX_NAME + 64];
    slot_label(what, sizeof what, s);
    if (r->opt.one_call_per_site)
        return rd_client_bug(r, RESDIAG_E_STATE,
                             "%s: %s observed again in step %lld (call %.0f; one_call_per_site is "
                             "set): this call is not recorded, the step keeps the first call's "
                             "values (%s:%d)", fn, what, (long long)r->step, calls + 1,
                             file ? file : "?", line);
    if (s->fields[RESDIAG_FIELD_COLS] != (double)cols)
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, its earlier calls in step %lld had %.0f; "
                             "calls of one step merge only tensors of one width: this call is "
                             "not recorded (%s:%d)", fn, what, (long long)cols,
                             (long long)r->step, s->fields[RESDIAG_FIELD_COLS],
                             file ? file : "?", line);
    return RESDIAG_OK;
}

/* The statistics of the call's data: a tensor's computed here (with
 * hook_threads >= 2 a large one is split into parts with the run's pool,
 * split.h; the caller does the parts of workers busy with other layers'
 * tensors or that could not start), a partial's derived from it. */
static void data_stats(resdiag *r, double *fields, double *sketch, double *row_norms,
                       rd_hook_data d, const rd_sketch_params *sp)
{
    if (d.copy) {
        /* taken as the source's call computed them: the same sketch
         * parameters (same_as.c checks them) and the same first row
         * (check_copy_rows), so the same bits */
        memcpy(fields, d.copy->fields, RESDIAG_N_FIELDS * sizeof *fields);
        if (sketch)
            memcpy(sketch, d.copy->sketch, (size_t)sp->k * sizeof *sketch);
    } else if (d.part) {
        rd_stats_part_fields(fields, sketch, d.part, NULL, d.t, sp);
    } else if (!d.t) {
        rd_partial_fields(fields, sketch, d.p, sketch ? sp->k : 0);
        /* a shard's column is recorded at its place in d_model, as the
         * kernels do for a tensor (its sketch is already global) */
        if (sp->col0 > 0 && !isnan(fields[RESDIAG_FIELD_ABSMAX_COL]))
            fields[RESDIAG_FIELD_ABSMAX_COL] += (double)sp->col0;
    }
    else if (r->opt.hook_threads >= 2)
        rd_split_compute(r->split, r->opt.hook_threads, fields, sketch, row_norms, d.t, sp);
    else
        rd_stats_compute(fields, sketch, row_norms, d.t, sp);
}

/* The statistics of the data into the slot: the first call of the step
 * computes them in place; a later one computes its own, with the sketch's
 * rows numbered after the rows seen (a partial brings its sketch so
 * numbered), and merges them in, so the slot holds the statistics of all
 * the rows of the step's calls. The call site and CALL_SEQ are those of the
 * first call. A later call's own statistics stay in rd_same_vals, where a
 * copy to another site finds the slot's last call (same_as.c). */
static void observe_slot(resdiag *r, const slot_ref *s, double *row_norms, rd_hook_data d,
                         const rd_sketch_params *sp, const char *file, int line)
{
    int seq = atomic_fetch_add(&r->seq, 1);
    const int partial = d.copy ? d.copy->partial : !d.t && !d.row_norms;
    const uint32_t origin = d.copy ? d.copy->origin : (uint32_t)s->cs;
    if (isnan(*s->calls)) {
        data_stats(r, s->fields, s->sketch, row_norms, d, sp);
        s->fields[RESDIAG_FIELD_CALL_SEQ] = (double)seq;
        *s->calls = 1;
        note_callsite(r, s->cs, file, line);
        rd_same_noted(r, s->cs, 0, partial, origin);
        return;
    }
    double *more = rd_same_vals(r, s->cs), *more_sketch = more + RESDIAG_N_FIELDS;
    rd_sketch_params later = *sp;
    const int64_t before = (int64_t)s->fields[RESDIAG_FIELD_ROWS];
    later.row0 = sp->row0 + before;
    data_stats(r, more, s->sketch ? more_sketch : NULL, row_norms, d, &later);
    rd_stats_merge(s->fields, s->sketch, more, more_sketch, s->sketch ? sp->k : 0);
    *s->calls += 1;
    rd_same_noted(r, s->cs, before, partial, origin);
}

/* The add_state's side of one call: a tensor's norms go into the buffer
 * (*row_norms, where the kernel writes them), a partial's given norms are
 * copied there (both then pair by norms; *kept 0 and rows -1 when there
 * is no memory for them), a partial without norms brings its ratio. */
static rd_add_call add_call(const slot_ref *s, rd_hook_data d, double **row_norms, int *kept)
{
    const int is_in = s->site == RESDIAG_STREAM_IN;
    const int64_t rows = data_rows(d);
    /* a copy pairs as its source's call would have: by its norms, or as
     * statistics from elsewhere that bring no ratio of this add */
    const double *given = d.copy ? d.copy->norms : d.row_norms;
    rd_add_call c = { is_in, rows, 0, 0.0, -1 };
    *row_norms = NULL;
    *kept = 1;
    if (d.copy && d.copy->partial) {
        c.partial = 1;
    } else if (d.copy && !given) {
        c.rows = -1; /* the source's norms were not kept: unpaired */
    } else if (!d.t && !d.row_norms && !d.copy) {
        c.partial = 1;
        if (!is_in) {
            c.ratio_sum = d.p->ratio_sum;
            c.ratio_rows = (int64_t)d.p->ratio_rows;
        }
    } else if ((given || !d.part) && rd_add_reserve(s->add, rows) == 0) {
        /* rows == 0 needs no buffer; a copy from the other side of this
         * add: its norms are the other buffer, already as large as rows,
         * so the reserve moved nothing; a team's statistics bring their
         * norms (or none were kept: not paired) */
        double *buf = is_in ? s->add->in_norms : s->add->br_norms;
        if (d.t && !d.part)
            *row_norms = buf;
        else if (rows > 0)
            memcpy(buf, given, (size_t)rows * sizeof *buf);
    } else {
        c.rows = -1;
        *kept = 0;
    }
    return c;
}

/* A copy's sketch is the source call's, its rows signed from the rows
 * the source had seen before that call: the copy is what a read would have
 * recorded only if the slot has seen as many rows (as when both sites are
 * called once per micro-batch); the sketch cannot be re-signed. */
static resdiag_status check_copy_rows(resdiag *r, const char *fn, const slot_ref *s,
                                      const rd_copy *c, const char *file, int line)
{
    const int64_t seen = isnan(*s->calls) ? 0 : (int64_t)s->fields[RESDIAG_FIELD_ROWS];
    if (!s->sketch || seen == c->rows_before)
        return RESDIAG_OK;
    char what[RESDIAG_MAX_NAME + 64];
    slot_label(what, sizeof what, s);
    return rd_client_bug(r, RESDIAG_E_STATE,
                         "%s: %s has seen %lld rows in step %lld, its source had seen %lld "
                         "before the call copied: the sketch of a copy keeps its source's row "
                         "signs, so both must have had the same calls; not recorded (%s:%d)",
                         fn, what, (long long)seen, (long long)r->step,
                         (long long)c->rows_before, file ? file : "?", line);
}

/* Where a call of such a slot puts its norms (a tensor: the kernel writes
 * them; given norms or a copy's: copied), and how many it kept. */
static double *last_norms(resdiag *r, const slot_ref *s, rd_hook_data d)
{
    rd_last_call *lc = &r->last[s->cs];
    const double *given = d.copy ? d.copy->norms : d.row_norms;
    const int64_t rows = data_rows(d);
    lc->norm_rows = -1;
    if ((!d.t || d.part) && !given) /* a team's that were not kept: none */
        return NULL;
    double *buf = rd_same_norms(r, s->cs, rows);
    if (!buf)
        return NULL;
    lc->norm_rows = rows;
    if (d.t && !d.part)
        return buf;
    if (rows > 0)
        memcpy(buf, given, (size_t)rows * sizeof *buf);
    return NULL;
}

/* One checked call into its slot: claims it (and the add_state: the update
 * ratio reads the other tensor's fields and norms), checks a repeat,
 * records, updates the add's ratios, releases. */
static resdiag_status record_call(resdiag *r, const char *fn, const slot_ref *s,
                                  rd_hook_data d, const rd_sketch_params *sp, const char *file,
                                  int line)
{
    add_state *a = s->add;
    int claimed = rd_hook_claim(&r->slot_busy[s->cs]);
    if (claimed && a && !rd_hook_claim(&a->busy)) {
        rd_hook_release(&r->slot_busy[s->cs]);
        claimed = 0;
    }
    if (!claimed) {
        char what[RESDIAG_MAX_NAME + 64];
        slot_label(what, sizeof what, s);
        return busy_bug(r, fn, what, a != NULL, file, line);
    }
    resdiag_status st = check_repeat(r, fn, s, data_cols(d), file, line);
    if (st) {
        if (a)
            rd_hook_release(&a->busy);
        rd_hook_release(&r->slot_busy[s->cs]);
        return st;
    }
    if (d.copy && (st = check_copy_rows(r, fn, s, d.copy, file, line))) {
        if (a)
            rd_hook_release(&a->busy);
        rd_hook_release(&r->slot_busy[s->cs]);
        return st;
    }
    double *row_norms = NULL;
    int kept = 1;
    rd_add_call c = { 0, 0, 0, 0.0, -1 };
    if (a)
        c = add_call(s, d, &row_norms, &kept);
    else if (rd_hook_keeps_norms(s->param != NULL, s->dir, s->site))
        row_norms = last_norms(r, s, d);
    observe_slot(r, s, row_norms, d, sp, file, line);
    if (a) {
        rd_add_observed(r, s->layer, s->sublayer, a, &c);
        rd_hook_release(&a->busy);
    }
    rd_hook_release(&r->slot_busy[s->cs]);
    if (!kept)
        return rd_client_bug(r, RESDIAG_E_NOMEM,
                             "%s: no memory for %lld per-token norms; update ratio per "
                             "token not recorded (%s:%d)", fn,
                             (long long)data_rows(d), file ? file : "?", line);
    return RESDIAG_OK;
}

/* A pipeline stage holds layers layer_lo .. layer_hi-1 only: a hook for
 * another layer is the trainer's mistake (another stage records it). */
static resdiag_status check_stage(resdiag *r, const char *fn, int layer, const char *file,
                                  int line)
{
    if (layer >= r->layer_lo && layer < r->layer_hi)
        return RESDIAG_OK;
    return rd_client_bug(r, RESDIAG_E_RANGE,
                         "%s: layer %d is not in this pipeline stage's layers %d..%d "
                         "(layer_first, layer_count): not recorded (%s:%d)", fn, layer,
                         r->layer_lo, r->layer_hi - 1, file ? file : "?", line);
}

rd_sketch_params rd_hook_sketch(const resdiag *r, int64_t cols)
{
    rd_sketch_params sp = r->sp;
    sp.row0 = r->row_sign_base;
    if (r->shard_col0 >= 0 && cols == r->model.shard_cols)
        sp.col0 = r->shard_col0;
    return sp;
}

resdiag_status rd_hook_site_needs_schema3(resdiag *r, const char *fn, resdiag_site site,
                                          const char *file, int line)
{
    /* the old layouts have room for stream_in..stream_out only */
    return rd_client_bug(r, RESDIAG_E_INVALID, "%s: site %s needs a file of schema 3; this run "
                         "writes schema %d (resdiag_options.file_schema) (%s:%d)", fn,
                         resdiag_site_name(site), r->opt.file_schema, file, line);
}

resdiag_status rd_hook_check_observe(resdiag *r, const char *fn, resdiag_direction dir,
                                     int layer, int sublayer, resdiag_site site, rd_hook_data d,
                                     const char *file, int line)
{
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d (%s:%d)", fn,
                             (int)dir, file ? file : "?", line);
    if (rd_model_site_index(site) < 0) {
        if ((unsigned)site >= RESDIAG_N_BLOCK_SITES)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: unknown site %d (%s:%d)", fn,
                                 (int)site, file ? file : "?", line);
        if ((int)site >= r->lay.n_block_sites)
            return rd_hook_site_needs_schema3(r, fn, site, file ? file : "?", line);
        if (layer < 0 || layer >= r->model.n_layers)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d (%s:%d)",
                                 fn, layer, r->model.n_layers - 1, file ? file : "?", line);
        if (sublayer < 0 || sublayer >= r->model.n_sublayers)
            return rd_client_bug(r, RESDIAG_E_RANGE,
                                 "%s: sublayer %d out of range 0..%d (%s:%d)", fn, sublayer,
                                 r->model.n_sublayers - 1, file ? file : "?", line);
        resdiag_status st = check_stage(r, fn, layer, file, line);
        if (st)
            return st;
    }
    resdiag_status st = check_data(r, fn, d, file, line);
    if (st)
        return st;
    const int64_t cols = data_cols(d);
    if (site != RESDIAG_LOGITS && cols != r->model.d_model &&
        (r->model.shard_cols == 0 || cols != r->model.shard_cols))
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, the model's d_model is %d (%s:%d)", fn,
                             resdiag_site_name(site), (long long)cols, r->model.d_model,
                             file ? file : "?", line);
    return RESDIAG_OK;
}

resdiag_status rd_hook_observe(resdiag *r, const char *fn, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, rd_hook_data d,
                               const char *file, int line)
{
    resdiag_status st = rd_hook_check_observe(r, fn, dir, layer, sublayer, site, d, file, line);
    if (st)
        return st;
    const rd_tables *lay = &r->lay;
    int table, sk_table;
    size_t slot, sk_slot;
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 0, &table, &slot);
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 1, &sk_table, &sk_slot);
    slot_ref s = { r->cur + rd_tables_offset(lay, table, slot),
                   r->sp.k ? r->cur + rd_tables_offset(lay, sk_table, sk_slot) : NULL,
                   r->cur + rd_tables_calls_offset(lay, table, slot),
                   lay->tables[table].slot_offset + slot, NULL, dir, layer, sublayer, site,
                   NULL };
    /* The add's two tensors keep what the update ratio needs. */
    if (dir == RESDIAG_FORWARD && (site == RESDIAG_STREAM_IN || site == RESDIAG_BRANCH_OUT))
        s.add = &r->adds[(size_t)layer * (size_t)r->model.n_sublayers + (size_t)sublayer];
    const rd_sketch_params sp = rd_hook_sketch(r, site == RESDIAG_LOGITS ? 0 : data_cols(d));
    return record_call(r, fn, &s, d, &sp, file, line);
}

resdiag_status resdiag_observe_at(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                  resdiag_site site, resdiag_tensor t, const char *file,
                                  int line)
{
    static const char fn[] = "resdiag_observe_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording)
        return rd_hook_idle(r, fn, file, line);
    rd_hook_data d = { &t, NULL, NULL, NULL, NULL };
    return rd_hook_observe(r, fn, dir, layer, sublayer, site, d, file, line);
}

resdiag_status resdiag_observe_alias(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, resdiag_site same_as)
{
    static const char fn[] = "resdiag_observe_alias";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording)
        return rd_hook_idle(r, fn, NULL, 0);
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d", fn, (int)dir);
    if ((unsigned)site >= RESDIAG_N_BLOCK_SITES || (unsigned)same_as >= RESDIAG_N_BLOCK_SITES)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: sites %d and %d: both must be block sites "
                             "(0..%d)", fn, (int)site, (int)same_as, RESDIAG_N_BLOCK_SITES - 1);
    if (site == same_as)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: %s cannot be an alias of itself", fn,
                             resdiag_site_name(site));
    if ((int)site >= r->lay.n_block_sites || (int)same_as >= r->lay.n_block_sites)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: site %s needs a file of schema 3; this "
                             "run writes schema %d (resdiag_options.file_schema)", fn,
                             resdiag_site_name((int)site >= r->lay.n_block_sites ? site : same_as),
                             r->opt.file_schema);
    if (layer < 0 || layer >= r->model.n_layers)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d", fn, layer,
                             r->model.n_layers - 1);
    if (sublayer < 0 || sublayer >= r->model.n_sublayers)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: sublayer %d out of range 0..%d", fn,
                             sublayer, r->model.n_sublayers - 1);
    resdiag_status st = check_stage(r, fn, layer, NULL, 0);
    if (st)
        return st;
    const rd_tables *lay = &r->lay;
    int table;
    size_t slot;
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 0, &table, &slot);
    const size_t cs = lay->tables[table].slot_offset + slot;
    if (!rd_hook_claim(&r->slot_busy[cs])) {
        char what[96];
        site_label(what, sizeof what, dir, layer, sublayer, site);
        return busy_bug(r, fn, what, 0, NULL, 0);
    }
    int at = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    r->cur[rd_tables_offset(lay, at, (size_t)layer * (size_t)r->model.n_sublayers + sublayer)
           + (size_t)site] = (double)same_as;
    rd_hook_release(&r->slot_busy[cs]);
    return RESDIAG_OK;
}

resdiag_status rd_hook_param_index(resdiag *r, const char *fn, int layer, const char *name,
                                   int *param, const char *file, int line)
{
    int model_level = layer == RESDIAG_MODEL_LEVEL;
    if (!model_level && (layer < 0 || layer >= r->model.n_layers))
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d or "
                             "RESDIAG_MODEL_LEVEL (%s:%d)", fn, layer, r->model.n_layers - 1,
                             file ? file : "?", line);
    resdiag_status st;
    if (!model_level && (st = check_stage(r, fn, layer, file, line)))
        return st;
    int n = model_level ? r->model.n_model_params : r->model.n_layer_params;
    const char *const *names =
        model_level ? r->model.model_param_names : r->model.layer_param_names;
    if (name) {
        *param = 0;
        while (*param < n && strcmp(names[*param], name) != 0)
            (*param)++;
        if (*param == n)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: '%s' is not a declared %s parameter "
                                 "(%s:%d)", fn, name, model_level ? "model-level" : "per-layer",
                                 file ? file : "?", line);
    } else if (*param < 0 || *param >= n) {
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: parameter index %d out of range 0..%d of "
                             "the %s parameters (%s:%d)", fn, *param, n - 1,
                             model_level ? "model-level" : "per-layer", file ? file : "?", line);
    }
    return RESDIAG_OK;
}

void rd_hook_param_slot(const resdiag *r, int layer, int param, int *table, size_t *slot)
{
    const int model_level = layer == RESDIAG_MODEL_LEVEL;
    *table = model_level ? RD_T_MODEL_PARAM : RD_T_LAYER_PARAM;
    *slot = model_level ? (size_t)param
                        : (size_t)layer * (size_t)r->model.n_layer_params + (size_t)param;
}

resdiag_status rd_hook_param_grad(resdiag *r, const char *fn, int layer, const char *name,
                                  int param, rd_hook_data d, const char *file, int line)
{
    resdiag_status st = rd_hook_param_index(r, fn, layer, name, &param, file, line);
    if (st)
        return st;
    const char *const *names = layer == RESDIAG_MODEL_LEVEL ? r->model.model_param_names
                                                            : r->model.layer_param_names;
    if ((st = check_data(r, fn, d, file, line)))
        return st;
    int table;
    size_t slot;
    rd_hook_param_slot(r, layer, param, &table, &slot);
    slot_ref s = { r->cur + rd_tables_offset(&r->lay, table, slot), NULL,
                   r->cur + rd_tables_calls_offset(&r->lay, table, slot),
                   r->lay.tables[table].slot_offset + slot, NULL, RESDIAG_BACKWARD, layer, 0,
                   RESDIAG_STREAM_IN, names[param] };
    rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
    return record_call(r, fn, &s, d, &none, file, line);
}

resdiag_status resdiag_param_grad_at(resdiag *r, int layer, const char *name, resdiag_tensor t,
                                     const char *file, int line)
{
    static const char fn[] = "resdiag_param_grad_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording)
        return rd_hook_idle(r, fn, file, line);
    if (!name)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: name is NULL (%s:%d)", fn,
                             file ? file : "?", line);
    rd_hook_data d = { &t, NULL, NULL, NULL, NULL };
    return rd_hook_param_grad(r, fn, layer, name, -1, d, file, line);
}
