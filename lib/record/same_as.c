/*
 * same_as.c - one tensor, several sites: resdiag_observe_same_as and
 * resdiag_param_grad_same_as (routed here by hooks.c, rd_copy_write)
 * record at a site the most recent call of another one in the step,
 * reading no tensor.
 *
 * Why the most recent call and not the source's slot: with gradient
 * accumulation every micro-batch calls each hook, and the copy after the
 * second micro-batch is that micro-batch's tensor, not the merge of both.
 * So each slot keeps its last call (ingest.c): a first call's statistics
 * are the slot's own, a later call's stay where they were computed before
 * merging (rd_same_vals: one step record's worth of doubles, allocated at
 * open), and forward sites keep that call's per-token norms (grown only
 * when a call brings more rows than any before), because a copy into
 * STREAM_IN or BRANCH_OUT pairs by them for the update ratio. The copy
 * then goes through the same path as a read (rd_ingest: the claim, the
 * merge, CALL_SEQ, the calls count, the pairing), so it records the same
 * bits as resdiag_observe_at of the same tensor, but for its call site.
 * Both ends are resolved by the one prologue (rd_target_resolve); here
 * are only the checks of the pair and of the source's last call.
 *
 * A copy is the trainer's word, never evidence. Within one sublayer the
 * pair is recorded as an alias, which the analysis sets aside. Relations
 * that the file cannot mark (no alias across sublayers or at model sites)
 * are refused instead: FINAL_NORM_OUT (compared with what enters the final
 * norm: a copy would decide "no final norm") and, in one layer, two of the
 * sites a parallel block is judged by (every STREAM_IN and BRANCH_OUT, the
 * last STREAM_OUT) from one tensor in different sublayers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/hooks.h"
#include "record/same_as.h"

int rd_same_init(resdiag *r)
{
    size_t n = r->lay.n_slots;
    r->last = calloc(n ? n : 1, sizeof *r->last);
    r->last_vals = malloc((n ? n : 1) * (RESDIAG_N_FIELDS + (size_t)r->sp.k) *
                          sizeof *r->last_vals);
    return r->last && r->last_vals ? 0 : -1;
}

void rd_same_free(resdiag *r)
{
    if (r->last)
        for (size_t i = 0; i < r->lay.n_slots; i++)
            free(r->last[i].norms);
    free(r->last);
    free(r->last_vals);
}

void rd_same_noted(resdiag *r, size_t cs, int64_t rows_before, int partial, uint32_t origin)
{
    rd_last_call *lc = &r->last[cs];
    lc->rows_before = rows_before;
    lc->partial = partial;
    atomic_store_explicit(&lc->tag, (r->serial << 32) | origin, memory_order_relaxed);
}

double *rd_same_norms(resdiag *r, size_t cs, int64_t rows)
{
    rd_last_call *lc = &r->last[cs];
    if (rows > lc->norm_cap) {
        double *p = realloc(lc->norms, (size_t)rows * sizeof *p);
        if (!p)
            return NULL;
        lc->norms = p;
        lc->norm_cap = rows;
    }
    return lc->norms ? lc->norms : (double *)r->last; /* rows == 0: any non-NULL */
}

/* The slot that read the tensor of cs's last call in this step (cs
 * itself for a read), or -1 when cs has no call in this step. */
static int64_t origin_of(const resdiag *r, size_t cs)
{
    uint64_t tag = atomic_load_explicit(&r->last[cs].tag, memory_order_relaxed);
    return tag >> 32 == (r->serial & 0xffffffffu) ? (int64_t)(tag & 0xffffffffu) : -1;
}

/* A block site of one direction, layer and sublayer, located. */
static rd_target block_target(const resdiag *r, resdiag_direction dir, int layer, int sublayer,
                              resdiag_site site)
{
    rd_target q = { .kind = RD_TARGET_SITE, .dir = dir, .layer = layer, .sublayer = sublayer,
                    .site = site };
    rd_target_locate(r, &q);
    return q;
}

/* The block site of slot cs (*p), or 0 when cs is not a block site's. */
static int block_site_at(const resdiag *r, int64_t cs, rd_target *p)
{
    const size_t per_dir = (size_t)r->model.n_layers * (size_t)r->model.n_sublayers *
                           (size_t)r->lay.n_block_sites;
    for (int d = 0; d < 2; d++) {
        size_t base = r->lay.tables[d ? RD_T_BWD_SITE : RD_T_FWD_SITE].slot_offset;
        if (cs < 0 || (size_t)cs < base || (size_t)cs >= base + per_dir)
            continue;
        size_t i = (size_t)cs - base;
        const resdiag_site site = (resdiag_site)(i % (size_t)r->lay.n_block_sites);
        i /= (size_t)r->lay.n_block_sites;
        *p = block_target(r, (resdiag_direction)d, (int)(i / (size_t)r->model.n_sublayers),
                          (int)(i % (size_t)r->model.n_sublayers), site);
        return 1;
    }
    return 0;
}

/* "stream_out of layer 2 sublayer 1", "embed_out" */
static void label(char *out, size_t n, const rd_target *p)
{
    if (p->model)
        snprintf(out, n, "%s", resdiag_site_name(p->site));
    else
        snprintf(out, n, "%s of layer %d sublayer %d", resdiag_site_name(p->site), p->layer,
                 p->sublayer);
}

/* The sites a parallel block is judged by (placement.c, classify_parallel):
 * each sublayer's STREAM_IN and BRANCH_OUT, the last one's STREAM_OUT. */
static int parallel_term(const resdiag *r, resdiag_site site, int sublayer)
{
    return site == RESDIAG_STREAM_IN || site == RESDIAG_BRANCH_OUT ||
           (site == RESDIAG_STREAM_OUT && sublayer == r->model.n_sublayers - 1);
}

/* A copy into forward block site t from the tensor that slot origin read
 * would make two terms of the parallel-block relations one tensor in two
 * sublayers: the origin itself, or a term of another sublayer already
 * copied from it in this step. Returns the other term's label in *other. */
static int joins_parallel_terms(const resdiag *r, const rd_target *t, int64_t origin,
                                char *other, size_t n)
{
    if (t->model || t->dir != RESDIAG_FORWARD || r->model.n_sublayers < 2 ||
        !parallel_term(r, t->site, t->sublayer))
        return 0;
    rd_target o;
    if (block_site_at(r, origin, &o) && o.dir == RESDIAG_FORWARD && o.layer == t->layer &&
        o.sublayer != t->sublayer && parallel_term(r, o.site, o.sublayer)) {
        label(other, n, &o);
        return 1;
    }
    static const resdiag_site terms[] = { RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT,
                                          RESDIAG_STREAM_OUT };
    for (int s = 0; s < r->model.n_sublayers; s++)
        for (int i = 0; i < 3; i++) {
            if (s == t->sublayer || !parallel_term(r, terms[i], s))
                continue;
            const rd_target q = block_target(r, RESDIAG_FORWARD, t->layer, s, terms[i]);
            if (origin_of(r, q.cs) == origin) {
                label(other, n, &q);
                return 1;
            }
        }
    return 0;
}

/* The block site of t's own sublayer that holds the same tensor, for the
 * alias (-1: none): the origin if it is there, else the source if it is,
 * else a sibling copied from the same origin in this step. */
static int alias_site(const resdiag *r, const rd_target *t, const rd_target *src,
                      int64_t origin)
{
    if (t->model)
        return -1;
    rd_target o;
    if (block_site_at(r, origin, &o) && o.dir == t->dir && o.layer == t->layer &&
        o.sublayer == t->sublayer)
        return (int)o.site;
    if (!src->model && src->layer == t->layer && src->sublayer == t->sublayer)
        return (int)src->site;
    for (int b = 0; b < r->lay.n_block_sites; b++) {
        if ((resdiag_site)b == t->site)
            continue;
        const rd_target q = block_target(r, t->dir, t->layer, t->sublayer, (resdiag_site)b);
        if (origin_of(r, q.cs) == origin)
            return b;
    }
    return -1;
}

/* The source's last call as a copy (its slot claimed; calls >= 1): its
 * statistics are the slot's after one call, rd_same_vals after more; its
 * norms are the add_state's for an add's side (a), else the slot's own. */
static void take_last(resdiag *r, const rd_target *src, double calls, rd_copy *c)
{
    const size_t cs = src->cs;
    const rd_last_call *lc = &r->last[cs];
    const add_state *a = src->add;
    const int in = src->site == RESDIAG_STREAM_IN;
    if (calls == 1) {
        c->fields = r->cur + src->fields;
        c->sketch = src->kind == RD_TARGET_SITE && r->sp.k ? r->cur + src->sketch : NULL;
    } else {
        c->fields = rd_same_vals(r, cs);
        c->sketch = src->kind == RD_TARGET_SITE && r->sp.k ? c->fields + RESDIAG_N_FIELDS : NULL;
    }
    c->partial = lc->partial;
    c->rows_before = lc->rows_before;
    c->origin = (uint32_t)origin_of(r, cs);
    c->norms = NULL;
    int64_t rows = a ? (in ? a->in_rows : a->br_rows) : lc->norm_rows;
    if (!c->partial && rows >= 0 && rows == (int64_t)c->fields[RESDIAG_FIELD_ROWS])
        c->norms = a ? (in ? a->in_norms : a->br_norms) : lc->norms;
}

/* src's last call (its slot claimed, calls >= 1) recorded at t. */
static resdiag_status record_copy(resdiag *r, const rd_target *t, const rd_target *src,
                                  double calls)
{
    rd_copy c;
    take_last(r, src, calls, &c);
    const rd_hook_data d = { .kind = RD_SOURCE_COPY, .copy = &c };
    return rd_ingest(r, t, &d);
}

/* The checks of a copy between two sites (labelled a and b) that need no
 * slot: the same direction is implied; not a site into itself;
 * FINAL_NORM_OUT neither end forward; the same sketch parameters at both
 * (LOGITS takes its columns at 0, a d_model site of a tensor-parallel rank
 * at its shard's place). */
static resdiag_status check_pair(resdiag *r, const rd_target *t, const rd_target *src,
                                 const char *a, const char *b)
{
    const char *fn = t->fn, *f = t->file ? t->file : "?";
    const int line = t->line;
    if (t->site == src->site && (t->model || (t->layer == src->layer &&
                                              t->sublayer == src->sublayer)))
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: %s cannot be its own source (%s:%d)",
                             fn, a, f, line);
    if (t->dir == RESDIAG_FORWARD &&
        (t->site == RESDIAG_FINAL_NORM_OUT || src->site == RESDIAG_FINAL_NORM_OUT))
        return rd_client_bug(r, RESDIAG_E_INVALID,
                             "%s: %s from %s: final_norm_out is what the head reads, compared "
                             "with what enters the final norm; a copy would decide that verdict, "
                             "so observe it by reading (%s:%d)", fn, a, b, f, line);
    if ((t->site == RESDIAG_LOGITS) != (src->site == RESDIAG_LOGITS) &&
        r->shard_col0 > 0)
        return rd_client_bug(r, RESDIAG_E_INVALID,
                             "%s: %s from %s: on this tensor-parallel rank the logits' columns "
                             "are taken at 0 and a shard's at %lld, so the statistics differ; "
                             "observe it by reading (%s:%d)", fn, a, b,
                             (long long)r->shard_col0, f, line);
    return RESDIAG_OK;
}

/* The copy of src's last call into site t, both resolved: checks the
 * pair, claims the source, records the copy (rd_ingest), then the alias. */
static resdiag_status copy_site(resdiag *r, const rd_target *t, const rd_target *src)
{
    const char *fn = t->fn, *f = t->file ? t->file : "?";
    const int line = t->line;
    char a[96], b[96];
    label(a, sizeof a, t);
    label(b, sizeof b, src);
    resdiag_status st = check_pair(r, t, src, a, b);
    if (st)
        return st;
    if (!rd_hook_claim(&r->slot_busy[src->cs]))
        return rd_client_bug(r, RESDIAG_E_BUSY, "%s: %s, the source of %s, is being observed "
                             "by another thread at this moment; not recorded (%s:%d)", fn, b, a,
                             f, line);
    const double calls = r->cur[src->calls];
    const int64_t origin = origin_of(r, src->cs);
    char other[96];
    if (isnan(calls) || origin < 0) {
        st = rd_client_bug(r, RESDIAG_E_STATE, "%s: %s from %s, which has not been observed in "
                           "step %lld; not recorded (%s:%d)", fn, a, b, (long long)r->step, f,
                           line);
    } else if ((size_t)origin == t->cs) {
        st = rd_client_bug(r, RESDIAG_E_INVALID, "%s: %s from %s, which is itself a copy of "
                           "%s: a site cannot be its own source (%s:%d)", fn, a, b, a, f, line);
    } else if (joins_parallel_terms(r, t, origin, other, sizeof other)) {
        st = rd_client_bug(r, RESDIAG_E_INVALID,
                           "%s: %s from %s would make it one tensor with %s: a parallel block "
                           "is judged by those two, and the file marks no copy across "
                           "sublayers; observe one of them by reading (%s:%d)", fn, a, b, other,
                           f, line);
    } else {
        st = record_copy(r, t, src, calls);
    }
    rd_hook_release(&r->slot_busy[src->cs]);
    if (st)
        return st;
    int same = alias_site(r, t, src, origin);
    return same < 0 ? RESDIAG_OK
                    : resdiag_observe_alias(r, t->dir, t->layer, t->sublayer, t->site,
                                            (resdiag_site)same);
}

/* The copy of the gradient src's last call into the gradient t, both
 * checked: claims the source, records the copy (rd_ingest). */
static resdiag_status copy_param(resdiag *r, const rd_target *t, const rd_target *src)
{
    const char *fn = t->fn, *f = t->file ? t->file : "?";
    const int line = t->line;
    if (t->cs == src->cs)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: the gradient of '%s' cannot be its own "
                             "source (%s:%d)", fn, t->name, f, line);
    if (!rd_hook_claim(&r->slot_busy[src->cs]))
        return rd_client_bug(r, RESDIAG_E_BUSY, "%s: the gradient of '%s', the source of '%s', "
                             "is being observed by another thread at this moment; not recorded "
                             "(%s:%d)", fn, src->name, t->name, f, line);
    resdiag_status st;
    const double calls = r->cur[src->calls];
    if (isnan(calls) || origin_of(r, src->cs) < 0) {
        st = rd_client_bug(r, RESDIAG_E_STATE, "%s: the gradient of '%s' from that of '%s', "
                           "which has not been observed in step %lld; not recorded (%s:%d)", fn,
                           t->name, src->name, (long long)r->step, f, line);
    } else if ((size_t)origin_of(r, src->cs) == t->cs) {
        st = rd_client_bug(r, RESDIAG_E_INVALID, "%s: the gradient of '%s' from that of '%s', "
                           "itself a copy of '%s': a gradient cannot be its own source "
                           "(%s:%d)", fn, t->name, src->name, t->name, f, line);
    } else {
        st = record_copy(r, t, src, calls);
    }
    rd_hook_release(&r->slot_busy[src->cs]);
    return st;
}

resdiag_status rd_copy_write(resdiag *r, const rd_target *t, const rd_hook_data *d)
{
    int skipped;
    resdiag_status st = rd_target_resolve(r, d->from, NULL, &skipped);
    if (st || skipped)
        return st;
    return t->kind == RD_TARGET_PARAM ? copy_param(r, t, d->from) : copy_site(r, t, d->from);
}
