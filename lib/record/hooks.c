/*
 * hooks.c - the hook entry points a trainer calls inside a step
 * (resdiag_observe_at, resdiag_observe_alias, resdiag_param_grad_at):
 * check the call, claim the site's slot, compute the tensor's statistics
 * into the open step's record (merging repeated calls), release.
 *
 * Hooks may run concurrently on different layers; they never call the
 * writer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "record/handle.h"
#include "record/update_ratio.h"

/* The common checks of every hook. Returns OK with *go = 1 when the hook
 * must record, OK with *go = 0 when it is a no-op. A hook outside a step
 * is a no-op, not a bug: trainers run the same forward for validation and
 * sampling between training steps. It says so once, at DEBUG level. */
static resdiag_status hook_gate(resdiag *r, const char *fn, const char *file, int line,
                                int *go)
{
    *go = 0;
    if (r->rank_idle) /* a rank that does not record: no-ops, whatever the call */
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "%s after resdiag_close (%s:%d)", fn,
                             file ? file : "?", line);
    if (r->sticky)
        return r->sticky;
    if (!r->in_step) {
        if (!atomic_exchange(&r->outside_noted, 1))
            rd_run_log(r, RESDIAG_LOG_DEBUG, "%s outside a step (%s:%d): not recorded, as every "
                       "hook outside a step", fn, file ? file : "?", line);
        return RESDIAG_OK;
    }
    *go = r->recording;
    return RESDIAG_OK;
}

static resdiag_status check_tensor(resdiag *r, const char *fn, const resdiag_tensor *t,
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
static int claim(atomic_uchar *flag)
{
    return atomic_exchange_explicit(flag, 1, memory_order_acquire) == 0;
}

static void release(atomic_uchar *flag)
{
    atomic_store_explicit(flag, 0, memory_order_release);
}

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

/* Whether a call may go into a slot that already holds calls of this step
 * (*calls is not NaN): not with one_call_per_site, and only with the same
 * width. Returns OK, or the client bug. The slot keeps what it has. */
static resdiag_status check_repeat(resdiag *r, const char *fn, const char *what,
                                   const double *fields, double calls, const resdiag_tensor *t,
                                   const char *file, int line)
{
    if (isnan(calls))
        return RESDIAG_OK;
    if (r->opt.one_call_per_site)
        return rd_client_bug(r, RESDIAG_E_STATE,
                             "%s: %s observed again in step %lld (call %.0f; one_call_per_site is "
                             "set): this call is not recorded, the step keeps the first call's "
                             "values (%s:%d)", fn, what, (long long)r->step, calls + 1,
                             file ? file : "?", line);
    if (fields[RESDIAG_FIELD_COLS] != (double)t->cols)
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, its earlier calls in step %lld had %.0f; "
                             "calls of one step merge only tensors of one width: this call is "
                             "not recorded (%s:%d)", fn, what, (long long)t->cols,
                             (long long)r->step, fields[RESDIAG_FIELD_COLS], file ? file : "?",
                             line);
    return RESDIAG_OK;
}

/* The statistics of t: hook_threads 2 splits a large tensor with the run's
 * worker (split.h; the caller alone does both halves while the worker is
 * busy with another layer's, or when it could not start). */
static void tensor_stats(resdiag *r, double *fields, double *sketch, double *row_norms,
                         const resdiag_tensor *t, const rd_sketch_params *sp)
{
    if (r->opt.hook_threads >= 2)
        rd_split_compute(r->split, fields, sketch, row_norms, t, sp);
    else
        rd_stats_compute(fields, sketch, row_norms, t, sp);
}

/* The statistics of t into a slot (fields, sketch, *calls): the first call
 * of the step computes them in place; a later one computes its own, with
 * the sketch's rows numbered after the rows seen, and merges them in, so
 * the slot holds the statistics of all the rows of the step's calls. The
 * call site and CALL_SEQ are those of the first call. */
static void observe_slot(resdiag *r, double *fields, double *sketch, double *calls,
                         double *row_norms, const resdiag_tensor *t, const rd_sketch_params *sp,
                         size_t cs, const char *file, int line)
{
    int seq = atomic_fetch_add(&r->seq, 1);
    if (isnan(*calls)) {
        tensor_stats(r, fields, sketch, row_norms, t, sp);
        fields[RESDIAG_FIELD_CALL_SEQ] = (double)seq;
        *calls = 1;
        note_callsite(r, cs, file, line);
        return;
    }
    double more[RESDIAG_N_FIELDS], more_sketch[RESDIAG_MAX_SKETCH];
    rd_sketch_params later = *sp;
    later.row0 = sp->row0 + (int64_t)fields[RESDIAG_FIELD_ROWS];
    tensor_stats(r, more, sketch ? more_sketch : NULL, row_norms, t, &later);
    rd_stats_merge(fields, sketch, more, more_sketch, sketch ? sp->k : 0);
    *calls += 1;
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

/* The sketch parameters of a tensor of width cols at this rank: its rows'
 * signs after the rank's base (row_sign_base), and a shard's columns at
 * their place in d_model (shard_col0; a tensor of width d_model on a
 * tensor-parallel rank is the same on every rank, taken as is). */
static rd_sketch_params rank_sketch(const resdiag *r, int64_t cols)
{
    rd_sketch_params sp = r->sp;
    sp.row0 = r->row_sign_base;
    if (r->shard_col0 >= 0 && cols == r->model.shard_cols)
        sp.col0 = r->shard_col0;
    return sp;
}

/* The arguments of resdiag_observe_at: direction, site, layer and
 * sublayer in range, the tensor well formed and of the model's width
 * (logits excepted). */
static resdiag_status check_observe(resdiag *r, const char *fn, resdiag_direction dir,
                                    int layer, int sublayer, resdiag_site site,
                                    const resdiag_tensor *t, const char *file, int line)
{
    resdiag_status st;
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d (%s:%d)", fn,
                             (int)dir, file ? file : "?", line);
    if (rd_model_site_index(site) < 0) {
        if ((unsigned)site >= RESDIAG_N_BLOCK_SITES)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: unknown site %d (%s:%d)", fn,
                                 (int)site, file ? file : "?", line);
        if (layer < 0 || layer >= r->model.n_layers)
            return rd_client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d (%s:%d)",
                                 fn, layer, r->model.n_layers - 1, file ? file : "?", line);
        if (sublayer < 0 || sublayer >= r->model.n_sublayers)
            return rd_client_bug(r, RESDIAG_E_RANGE,
                                 "%s: sublayer %d out of range 0..%d (%s:%d)", fn, sublayer,
                                 r->model.n_sublayers - 1, file ? file : "?", line);
        if ((st = check_stage(r, fn, layer, file, line)))
            return st;
    }
    st = check_tensor(r, fn, t, file, line);
    if (st)
        return st;
    if (site != RESDIAG_LOGITS && t->cols != r->model.d_model &&
        (r->model.shard_cols == 0 || t->cols != r->model.shard_cols))
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, the model's d_model is %d (%s:%d)", fn,
                             resdiag_site_name(site), (long long)t->cols, r->model.d_model,
                             file ? file : "?", line);
    return RESDIAG_OK;
}

resdiag_status resdiag_observe_at(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                  resdiag_site site, resdiag_tensor t, const char *file,
                                  int line)
{
    static const char fn[] = "resdiag_observe_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, file, line, &go);
    }
    resdiag_status st = check_observe(r, fn, dir, layer, sublayer, site, &t, file, line);
    if (st)
        return st;

    const rd_tables *lay = &r->lay;
    int table, sk_table;
    size_t slot, sk_slot;
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 0, &table, &slot);
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 1, &sk_table, &sk_slot);
    double *fields = r->cur + rd_tables_offset(lay, table, slot);
    double *sketch = r->sp.k ? r->cur + rd_tables_offset(lay, sk_table, sk_slot) : NULL;
    double *calls = r->cur + rd_tables_calls_offset(lay, table, slot);
    const size_t cs = lay->tables[table].slot_offset + slot;

    /* The add's two tensors keep their per-token norms for the update ratio;
     * the call holds the add_state as well as its slot, as the update ratio
     * reads the other tensor's fields and norms. */
    add_state *a = NULL;
    if (dir == RESDIAG_FORWARD && (site == RESDIAG_STREAM_IN || site == RESDIAG_BRANCH_OUT))
        a = &r->adds[(size_t)layer * (size_t)r->model.n_sublayers + (size_t)sublayer];
    int claimed = claim(&r->slot_busy[cs]);
    if (claimed && a && !claim(&a->busy)) {
        release(&r->slot_busy[cs]);
        claimed = 0;
    }
    char what[96];
    if (!claimed) {
        site_label(what, sizeof what, dir, layer, sublayer, site);
        return busy_bug(r, fn, what, a != NULL, file, line);
    }
    if (!isnan(*calls)) {
        site_label(what, sizeof what, dir, layer, sublayer, site);
        st = check_repeat(r, fn, what, fields, *calls, &t, file, line);
        if (st) {
            if (a)
                release(&a->busy);
            release(&r->slot_busy[cs]);
            return st;
        }
    }
    double *row_norms = NULL;
    int have_norms = 0; /* rows == 0 needs no buffer */
    if (a && rd_add_reserve(a, t.rows) == 0) {
        have_norms = 1;
        row_norms = site == RESDIAG_STREAM_IN ? a->in_norms : a->br_norms;
    }
    const rd_sketch_params sp = rank_sketch(r, site == RESDIAG_LOGITS ? 0 : t.cols);
    observe_slot(r, fields, sketch, calls, row_norms, &t, &sp, cs, file, line);

    if (a) {
        rd_add_observed(r, layer, sublayer, a, site == RESDIAG_STREAM_IN,
                        have_norms ? t.rows : -1);
        release(&a->busy);
    }
    release(&r->slot_busy[cs]);
    if (a && !have_norms)
        return rd_client_bug(r, RESDIAG_E_NOMEM,
                             "%s: no memory for %lld per-token norms; update ratio per "
                             "token not recorded (%s:%d)", fn, (long long)t.rows,
                             file ? file : "?", line);
    return RESDIAG_OK;
}

resdiag_status resdiag_observe_alias(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, resdiag_site same_as)
{
    static const char fn[] = "resdiag_observe_alias";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, NULL, 0, &go);
    }
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d", fn, (int)dir);
    if ((unsigned)site >= RESDIAG_N_BLOCK_SITES || (unsigned)same_as >= RESDIAG_N_BLOCK_SITES)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: sites %d and %d: both must be block sites "
                             "(0..%d)", fn, (int)site, (int)same_as, RESDIAG_N_BLOCK_SITES - 1);
    if (site == same_as)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: %s cannot be an alias of itself", fn,
                             resdiag_site_name(site));
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
    if (!claim(&r->slot_busy[cs])) {
        char what[96];
        site_label(what, sizeof what, dir, layer, sublayer, site);
        return busy_bug(r, fn, what, 0, NULL, 0);
    }
    int at = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    r->cur[rd_tables_offset(lay, at, (size_t)layer * (size_t)r->model.n_sublayers + sublayer)
           + (size_t)site] = (double)same_as;
    release(&r->slot_busy[cs]);
    return RESDIAG_OK;
}

resdiag_status resdiag_param_grad_at(resdiag *r, int layer, const char *name, resdiag_tensor t,
                                     const char *file, int line)
{
    static const char fn[] = "resdiag_param_grad_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, file, line, &go);
    }
    if (!name)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: name is NULL (%s:%d)", fn,
                             file ? file : "?", line);
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
    int p = 0;
    while (p < n && strcmp(names[p], name) != 0)
        p++;
    if (p == n)
        return rd_client_bug(r, RESDIAG_E_RANGE, "%s: '%s' is not a declared %s parameter "
                             "(%s:%d)", fn, name, model_level ? "model-level" : "per-layer",
                             file ? file : "?", line);
    if ((st = check_tensor(r, fn, &t, file, line)))
        return st;
    int table = model_level ? RD_T_MODEL_PARAM : RD_T_LAYER_PARAM;
    size_t slot = model_level ? (size_t)p : (size_t)layer * (size_t)n + (size_t)p;
    double *fields = r->cur + rd_tables_offset(&r->lay, table, slot);
    double *calls = r->cur + rd_tables_calls_offset(&r->lay, table, slot);
    const size_t cs = r->lay.tables[table].slot_offset + slot;
    char what[RESDIAG_MAX_NAME + 64];
    if (model_level)
        snprintf(what, sizeof what, "the gradient of model parameter '%s'", name);
    else
        snprintf(what, sizeof what, "the gradient of '%s' in layer %d", name, layer);
    if (!claim(&r->slot_busy[cs]))
        return busy_bug(r, fn, what, 0, file, line);
    if ((st = check_repeat(r, fn, what, fields, *calls, &t, file, line))) {
        release(&r->slot_busy[cs]);
        return st;
    }
    rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
    observe_slot(r, fields, NULL, calls, NULL, &t, &none, cs, file, line);
    release(&r->slot_busy[cs]);
    return RESDIAG_OK;
}
