/*
 * ingest.c - the one ingestion of a write (hooks.h, rd_ingest): the data
 * checked, the slot claimed, a repeated call checked, the data's
 * statistics computed (a tensor) or taken (partial statistics, a completed
 * team's, a copy of another site's last call) into the open step's record,
 * merged with the step's earlier calls, CALL_SEQ, the call site, the last
 * call kept for copies and the update ratio paired, the slot released. An
 * alias is one number written under the same claim.
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

/* The data's width (checked: an integer up to 2^53 for a partial). */
static int64_t data_cols(const rd_hook_data *d)
{
    return d->t ? d->t->cols
                : d->copy ? (int64_t)d->copy->fields[RESDIAG_FIELD_COLS] : (int64_t)d->p->cols;
}

/* The data's rows. */
static int64_t data_rows(const rd_hook_data *d)
{
    return d->t ? d->t->rows
                : d->copy ? (int64_t)d->copy->fields[RESDIAG_FIELD_ROWS] : (int64_t)d->p->rows;
}

resdiag_status rd_ingest_check(resdiag *r, const rd_target *t, const rd_hook_data *d)
{
    const char *f = t->file ? t->file : "?";
    if (d->t) {
        resdiag_status st = rd_hook_check_tensor(r, t->fn, d->t, t->file, t->line);
        if (st)
            return st;
    } else if (!d->copy) { /* a copy is what this library computed for another site */
        char why[200];
        const char *member = rd_partial_check(d->p, why, sizeof why);
        if (member)
            return rd_client_bug(r, RESDIAG_E_INVALID, "%s: the partial statistics are "
                                 "inconsistent (member %s): %s; not recorded (%s:%d)", t->fn,
                                 member, why, f, t->line);
    }
    const int64_t cols = data_cols(d);
    if (t->kind == RD_TARGET_SITE && t->site != RESDIAG_LOGITS && cols != r->model.d_model &&
        (r->model.shard_cols == 0 || cols != r->model.shard_cols))
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, the model's d_model is %d (%s:%d)", t->fn,
                             resdiag_site_name(t->site), (long long)cols, r->model.d_model, f,
                             t->line);
    return RESDIAG_OK;
}

rd_sketch_params rd_hook_sketch(const resdiag *r, int64_t cols)
{
    rd_sketch_params sp = r->sp;
    sp.row0 = r->row_sign_base;
    if (r->shard_col0 >= 0 && cols == r->model.shard_cols)
        sp.col0 = r->shard_col0;
    return sp;
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

/* The target's slot in the open step's record. */
typedef struct slot_ref {
    const rd_target *t;
    double *fields, *sketch, *calls; /* sketch NULL: none kept (parameters, K = 0) */
} slot_ref;

/* Whether a call may go into a slot that already holds calls of this step
 * (*calls is not NaN): not with one_call_per_site, and only with the same
 * width. Returns OK, or the client bug. The slot keeps what it has. */
static resdiag_status check_repeat(resdiag *r, const slot_ref *s, int64_t cols)
{
    const double calls = *s->calls;
    if (isnan(calls))
        return RESDIAG_OK;
    const rd_target *t = s->t;
    const char *f = t->file ? t->file : "?";
    char what[RESDIAG_MAX_NAME + 64];
    rd_target_label(what, sizeof what, t);
    if (r->opt.one_call_per_site)
        return rd_client_bug(r, RESDIAG_E_STATE,
                             "%s: %s observed again in step %lld (call %.0f; one_call_per_site is "
                             "set): this call is not recorded, the step keeps the first call's "
                             "values (%s:%d)", t->fn, what, (long long)r->step, calls + 1, f,
                             t->line);
    if (s->fields[RESDIAG_FIELD_COLS] != (double)cols)
        return rd_client_bug(r, RESDIAG_E_SHAPE,
                             "%s: %s has %lld columns, its earlier calls in step %lld had %.0f; "
                             "calls of one step merge only tensors of one width: this call is "
                             "not recorded (%s:%d)", t->fn, what, (long long)cols,
                             (long long)r->step, s->fields[RESDIAG_FIELD_COLS], f, t->line);
    return RESDIAG_OK;
}

/* A copy's sketch is the source call's, its rows signed from the rows
 * the source had seen before that call: the copy is what a read would have
 * recorded only if the slot has seen as many rows (as when both sites are
 * called once per micro-batch); the sketch cannot be re-signed. */
static resdiag_status check_copy_rows(resdiag *r, const slot_ref *s, const rd_copy *c)
{
    const int64_t seen = isnan(*s->calls) ? 0 : (int64_t)s->fields[RESDIAG_FIELD_ROWS];
    if (!s->sketch || seen == c->rows_before)
        return RESDIAG_OK;
    char what[RESDIAG_MAX_NAME + 64];
    rd_target_label(what, sizeof what, s->t);
    return rd_client_bug(r, RESDIAG_E_STATE,
                         "%s: %s has seen %lld rows in step %lld, its source had seen %lld "
                         "before the call copied: the sketch of a copy keeps its source's row "
                         "signs, so both must have had the same calls; not recorded (%s:%d)",
                         s->t->fn, what, (long long)seen, (long long)r->step,
                         (long long)c->rows_before, s->t->file ? s->t->file : "?", s->t->line);
}

/* The statistics of the call's data: a tensor's computed here (with
 * hook_threads >= 2 a large one is split into parts with the run's pool,
 * split.h; the caller does the parts of workers busy with other layers'
 * tensors or that could not start), a partial's derived from it. */
static void data_stats(resdiag *r, double *fields, double *sketch, double *row_norms,
                       const rd_hook_data *d, const rd_sketch_params *sp)
{
    if (d->copy) {
        /* taken as the source's call computed them: the same sketch
         * parameters (same_as.c checks them) and the same first row
         * (check_copy_rows), so the same bits */
        memcpy(fields, d->copy->fields, RESDIAG_N_FIELDS * sizeof *fields);
        if (sketch)
            memcpy(sketch, d->copy->sketch, (size_t)sp->k * sizeof *sketch);
    } else if (d->part) {
        rd_stats_part_fields(fields, sketch, d->part, NULL, d->t, sp);
    } else if (!d->t) {
        rd_partial_fields(fields, sketch, d->p, sketch ? sp->k : 0);
        /* a shard's column is recorded at its place in d_model, as the
         * kernels do for a tensor (its sketch is already global) */
        if (sp->col0 > 0 && !isnan(fields[RESDIAG_FIELD_ABSMAX_COL]))
            fields[RESDIAG_FIELD_ABSMAX_COL] += (double)sp->col0;
    }
    else if (r->opt.hook_threads >= 2)
        rd_split_compute(r->split, r->opt.hook_threads, fields, sketch, row_norms, d->t, sp);
    else
        rd_stats_compute(fields, sketch, row_norms, d->t, sp);
}

/* The statistics of the data into the slot: the first call of the step
 * computes them in place; a later one computes its own, with the sketch's
 * rows numbered after the rows seen (a partial brings its sketch so
 * numbered), and merges them in, so the slot holds the statistics of all
 * the rows of the step's calls. The call site and CALL_SEQ are those of the
 * first call. A later call's own statistics stay in rd_same_vals, where a
 * copy to another site finds the slot's last call (same_as.c). */
static void observe_slot(resdiag *r, const slot_ref *s, double *row_norms,
                         const rd_hook_data *d, const rd_sketch_params *sp)
{
    const size_t cs = s->t->cs;
    int seq = atomic_fetch_add(&r->seq, 1);
    const int partial = d->copy ? d->copy->partial : !d->t && !d->row_norms;
    const uint32_t origin = d->copy ? d->copy->origin : (uint32_t)cs;
    if (isnan(*s->calls)) {
        data_stats(r, s->fields, s->sketch, row_norms, d, sp);
        s->fields[RESDIAG_FIELD_CALL_SEQ] = (double)seq;
        *s->calls = 1;
        note_callsite(r, cs, s->t->file, s->t->line);
        rd_same_noted(r, cs, 0, partial, origin);
        return;
    }
    double *more = rd_same_vals(r, cs), *more_sketch = more + RESDIAG_N_FIELDS;
    rd_sketch_params later = *sp;
    const int64_t before = (int64_t)s->fields[RESDIAG_FIELD_ROWS];
    later.row0 = sp->row0 + before;
    data_stats(r, more, s->sketch ? more_sketch : NULL, row_norms, d, &later);
    rd_stats_merge(s->fields, s->sketch, more, more_sketch, s->sketch ? sp->k : 0);
    *s->calls += 1;
    rd_same_noted(r, cs, before, partial, origin);
}

/* The add_state's side of one call: a tensor's norms go into the buffer
 * (*row_norms, where the kernel writes them), a partial's given norms are
 * copied there (both then pair by norms; *kept 0 and rows -1 when there
 * is no memory for them), a partial without norms brings its ratio. */
static rd_add_call add_call(const rd_target *t, const rd_hook_data *d, double **row_norms,
                            int *kept)
{
    const int is_in = t->site == RESDIAG_STREAM_IN;
    const int64_t rows = data_rows(d);
    /* a copy pairs as its source's call would have: by its norms, or as
     * statistics from elsewhere that bring no ratio of this add */
    const double *given = d->copy ? d->copy->norms : d->row_norms;
    rd_add_call c = { is_in, rows, 0, 0.0, -1 };
    *row_norms = NULL;
    *kept = 1;
    if (d->copy && d->copy->partial) {
        c.partial = 1;
    } else if (d->copy && !given) {
        c.rows = -1; /* the source's norms were not kept: unpaired */
    } else if (!d->t && !d->row_norms && !d->copy) {
        c.partial = 1;
        if (!is_in) {
            c.ratio_sum = d->p->ratio_sum;
            c.ratio_rows = (int64_t)d->p->ratio_rows;
        }
    } else if ((given || !d->part) && rd_add_reserve(t->add, rows) == 0) {
        /* rows == 0 needs no buffer; a copy from the other side of this
         * add: its norms are the other buffer, already as large as rows,
         * so the reserve moved nothing; a team's statistics bring their
         * norms (or none were kept: not paired) */
        double *buf = is_in ? t->add->in_norms : t->add->br_norms;
        if (d->t && !d->part)
            *row_norms = buf;
        else if (rows > 0)
            memcpy(buf, given, (size_t)rows * sizeof *buf);
    } else {
        c.rows = -1;
        *kept = 0;
    }
    return c;
}

/* Where a call of such a slot puts its norms (a tensor: the kernel writes
 * them; given norms or a copy's: copied), and how many it kept. */
static double *last_norms(resdiag *r, size_t cs, const rd_hook_data *d)
{
    rd_last_call *lc = &r->last[cs];
    const double *given = d->copy ? d->copy->norms : d->row_norms;
    const int64_t rows = data_rows(d);
    lc->norm_rows = -1;
    if ((!d->t || d->part) && !given) /* a team's that were not kept: none */
        return NULL;
    double *buf = rd_same_norms(r, cs, rows);
    if (!buf)
        return NULL;
    lc->norm_rows = rows;
    if (d->t && !d->part)
        return buf;
    if (rows > 0)
        memcpy(buf, given, (size_t)rows * sizeof *buf);
    return NULL;
}

/* The claimed slot's statistics with the data's: the repeat and copy
 * checks, then the record and the add's ratios. *kept 0: the per-token
 * norms found no memory (the statistics are recorded). */
static resdiag_status record_statistics(resdiag *r, const slot_ref *s, const rd_hook_data *d,
                                        int *kept)
{
    const rd_target *t = s->t;
    resdiag_status st = check_repeat(r, s, data_cols(d));
    if (st || (d->copy && (st = check_copy_rows(r, s, d->copy))))
        return st;
    const rd_sketch_params none = { 0, NULL, 0, 0, 0, 0 };
    const rd_sketch_params sp =
        t->kind == RD_TARGET_PARAM
            ? none : rd_hook_sketch(r, t->site == RESDIAG_LOGITS ? 0 : data_cols(d));
    double *row_norms = NULL;
    rd_add_call c = { 0, 0, 0, 0.0, -1 };
    if (t->add)
        c = add_call(t, d, &row_norms, kept);
    else if (rd_hook_keeps_norms(t->kind == RD_TARGET_PARAM, t->dir, t->site))
        row_norms = last_norms(r, t->cs, d);
    observe_slot(r, s, row_norms, d, &sp);
    if (t->add)
        rd_add_observed(r, t->layer, t->sublayer, t->add, &c);
    return RESDIAG_OK;
}

/* Two calls at once must not write one slot, nor the add_state of one
 * sublayer (resdiag.h allows concurrent hooks on different layers only).
 * One atomic exchange per call tells: the second of two overlapping calls
 * finds the flag taken and records nothing, so the slot keeps the first
 * call's complete result. Acquire and release order one call's writes
 * before those of the next call that takes the flag, from any thread. The
 * add_state is claimed too where the update ratio reads the other
 * tensor's fields and norms (not for an alias). */
resdiag_status rd_ingest(resdiag *r, const rd_target *t, const rd_hook_data *d)
{
    const int alias = d->kind == RD_SOURCE_ALIAS;
    resdiag_status st = alias ? RESDIAG_OK : rd_ingest_check(r, t, d);
    if (st)
        return st;
    add_state *a = alias ? NULL : t->add;
    int claimed = rd_hook_claim(&r->slot_busy[t->cs]);
    if (claimed && a && !rd_hook_claim(&a->busy)) {
        rd_hook_release(&r->slot_busy[t->cs]);
        claimed = 0;
    }
    if (!claimed) {
        char what[RESDIAG_MAX_NAME + 64];
        rd_target_label(what, sizeof what, t);
        return rd_client_bug(r, RESDIAG_E_BUSY,
                             "%s: %s is being observed by another thread at this moment%s; this "
                             "call is not recorded (hooks may run concurrently on different "
                             "layers only) (%s:%d)", t->fn, what,
                             a ? " (or the other tensor of its residual add is)" : "",
                             t->file ? t->file : "?", t->line);
    }
    int kept = 1;
    if (alias) {
        const int at = t->dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
        const size_t block = (size_t)t->layer * (size_t)r->model.n_sublayers + (size_t)t->sublayer;
        r->cur[rd_tables_offset(&r->lay, at, block) + (size_t)t->site] = (double)d->alias_of;
    } else {
        const slot_ref s = { t, r->cur + t->fields,
                             t->kind == RD_TARGET_SITE && r->sp.k ? r->cur + t->sketch : NULL,
                             r->cur + t->calls };
        st = record_statistics(r, &s, d, &kept);
    }
    if (a)
        rd_hook_release(&a->busy);
    rd_hook_release(&r->slot_busy[t->cs]);
    if (!st && !kept)
        return rd_client_bug(r, RESDIAG_E_NOMEM,
                             "%s: no memory for %lld per-token norms; update ratio per "
                             "token not recorded (%s:%d)", t->fn,
                             (long long)data_rows(d), t->file ? t->file : "?", t->line);
    return st;
}
