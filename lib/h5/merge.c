/*
 * merge.c - the reads of a merged reader (merge.h): each asks the merged
 * ranks that recorded the step, in rank order, for what the same call on
 * its own file gives, and joins their answers by the job's split
 * (doc/RANKS.md, "Reading and merging"):
 *   - data, sequence and pipeline splits: a tensor's statistics join as
 *     parts of one tensor (rd_stats_merge: rows add, extremes merge, Chan's
 *     update for the means and spreads, sketches add); a parameter
 *     gradient of a data or sequence split is a replica (the all-reduce):
 *     the lowest observing rank's;
 *   - tensor splits: a tensor of width d_model is replicated (the lowest
 *     rank's); a narrower one, and every parameter gradient, is a column
 *     shard: the columns add, FROB and ABSMAX(+column), the NaN and Inf
 *     counts and TOK_MEAN_MEAN join exactly, the per-token spreads are per
 *     shard (NaN here), the sketches add (their hash uses the global column);
 *   - metrics, aliases and call sites: the lowest rank that has them.
 * A rank that lacks a step contributes nothing to it. Memory: one step of
 * one table per rank at a time, never a whole dataset. Each rank's file
 * is read by the reader of one file (reader_file.h); only the public
 * reader (reader.c) calls these.
 */
#include "h5/merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "format/metric_value.h"
#include "h5/common.h"
#include "h5/reader_file.h"
#include "stats/stats.h"

enum { JOIN_FIRST, JOIN_ROWS, JOIN_COLS };

/* How a rank's observation f of a slot joins acc, what the ranks before it gave. */
static int join_rule(const rd_merge *m, int param, const double *acc, const double *f)
{
    double ca = acc[RESDIAG_FIELD_COLS], cf = f[RESDIAG_FIELD_COLS];
    switch (m->split) {
    case RESDIAG_SPLIT_TENSOR:
        if (!param && (cf == m->info.d_model || ca == m->info.d_model))
            return JOIN_FIRST; /* replicated */
        return acc[RESDIAG_FIELD_ROWS] == f[RESDIAG_FIELD_ROWS] ? JOIN_COLS : JOIN_FIRST;
    case RESDIAG_SPLIT_DATA:
    case RESDIAG_SPLIT_SEQUENCE:
        if (param)
            return JOIN_FIRST; /* replicas after the all-reduce */
        return ca == cf ? JOIN_ROWS : JOIN_FIRST;
    default: /* pipeline: only the holders observed it */
        return ca == cf ? JOIN_ROWS : JOIN_FIRST;
    }
}

/* The per-token quantities a column shard holds only for its columns. */
const int rd_merge_per_shard_fields[RD_MERGE_N_PER_SHARD] = {
    RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_NORM_STD, RESDIAG_FIELD_TOK_NORM_MIN,
    RESDIAG_FIELD_TOK_NORM_MAX,  RESDIAG_FIELD_TOK_MEAN_STD, RESDIAG_FIELD_TOK_RMS_MEAN,
    RESDIAG_FIELD_TOK_RMS_STD,   RESDIAG_FIELD_TOK_STD_MEAN, RESDIAG_FIELD_TOK_STD_STD,
};

static void join_cols(double *acc, double *acc_sk, const double *f, const double *sk, int k)
{
    double ca = acc[RESDIAG_FIELD_COLS], cf = f[RESDIAG_FIELD_COLS];
    acc[RESDIAG_FIELD_TOK_MEAN_MEAN] =
        (ca * acc[RESDIAG_FIELD_TOK_MEAN_MEAN] + cf * f[RESDIAG_FIELD_TOK_MEAN_MEAN]) / (ca + cf);
    acc[RESDIAG_FIELD_COLS] = ca + cf;
    acc[RESDIAG_FIELD_FROB] = sqrt(acc[RESDIAG_FIELD_FROB] * acc[RESDIAG_FIELD_FROB]
                                   + f[RESDIAG_FIELD_FROB] * f[RESDIAG_FIELD_FROB]);
    /* ABSMAX_COL is global in each shard: the first column on ties */
    if (f[RESDIAG_FIELD_ABSMAX] > acc[RESDIAG_FIELD_ABSMAX]
        || (f[RESDIAG_FIELD_ABSMAX] == acc[RESDIAG_FIELD_ABSMAX]
            && f[RESDIAG_FIELD_ABSMAX_COL] < acc[RESDIAG_FIELD_ABSMAX_COL])) {
        acc[RESDIAG_FIELD_ABSMAX] = f[RESDIAG_FIELD_ABSMAX];
        acc[RESDIAG_FIELD_ABSMAX_COL] = f[RESDIAG_FIELD_ABSMAX_COL];
    }
    acc[RESDIAG_FIELD_NAN_COUNT] += f[RESDIAG_FIELD_NAN_COUNT];
    acc[RESDIAG_FIELD_INF_COUNT] += f[RESDIAG_FIELD_INF_COUNT];
    for (int i = 0; i < RD_MERGE_N_PER_SHARD; i++)
        acc[rd_merge_per_shard_fields[i]] = NAN;
    for (int j = 0; acc_sk && j < k; j++)
        acc_sk[j] += sk[j];
}

/* Joins rank data f (sk) into acc (acc_sk), n ranks having given before. */
static void join(const rd_merge *m, int param, int n, double *acc, double *acc_sk,
                 const double *f, const double *sk, int k)
{
    if (n == 0) {
        memcpy(acc, f, RESDIAG_N_FIELDS * sizeof *acc);
        if (acc_sk)
            memcpy(acc_sk, sk, (size_t)k * sizeof *acc_sk);
        return;
    }
    switch (join_rule(m, param, acc, f)) {
    case JOIN_ROWS:
        rd_stats_merge(acc, acc_sk, f, sk, acc_sk ? k : 0);
        break;
    case JOIN_COLS:
        join_cols(acc, acc_sk, f, sk, k);
        break;
    default:
        break;
    }
}

static void fill_nan(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
}

static resdiag_status check_si(const rd_merge *m, int64_t si, const char *fn)
{
    if (si < 0 || si >= m->info.n_steps)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no step index %lld (the "
                          "merged ranks hold %lld)", fn, m->entries[0].path, (long long)si,
                          (long long)m->info.n_steps);
    return RESDIAG_OK;
}

/* One slot of a STATS table: a site (name NULL) or a parameter gradient. */
typedef struct slot_q {
    resdiag_direction dir;
    int layer, sublayer;
    resdiag_site site;
    const char *name;
} slot_q;

static resdiag_status read_rank_slot(const resdiag_reader *rd, int64_t rsi, const slot_q *q,
                                     double *f, double *sk, int *obs)
{
    resdiag_status st = q->name
        ? rd_file_param(rd, rsi, q->layer, q->name, f, obs)
        : rd_file_site(rd, rsi, q->dir, q->layer, q->sublayer, q->site, f, obs);
    if (st == RESDIAG_OK && sk && *obs)
        st = rd_file_sketch(rd, rsi, q->dir, q->layer, q->sublayer, q->site, sk);
    return st;
}

/* The merged slot q at merged step si into f (and sk, or NULL); *n_obs the
 * ranks that observed it. */
static resdiag_status merge_slot(const rd_merge *m, int64_t si, const slot_q *q, double *f,
                                 double *sk, int *n_obs)
{
    int k = m->info.sketch_size;
    double rf[RESDIAG_N_FIELDS], rsk[RESDIAG_MAX_SKETCH];
    fill_nan(f, RESDIAG_N_FIELDS);
    if (sk)
        fill_nan(sk, (size_t)k);
    *n_obs = 0;
    for (int i = 0; i < m->n_merged; i++) {
        const rd_rank_entry *e = m->merged[i];
        int64_t rsi = rd_merge_rank_index(e, m->steps[si]);
        int obs = 0;
        if (rsi < 0)
            continue;
        resdiag_status st = read_rank_slot(e->rd, rsi, q, rf, sk ? rsk : NULL, &obs);
        if (st != RESDIAG_OK)
            return st;
        if (!obs)
            continue;
        join(m, q->name != NULL, *n_obs, f, sk, rf, rsk, k);
        ++*n_obs;
    }
    return RESDIAG_OK;
}

resdiag_status rd_merge_steps(const rd_merge *m, int64_t *out, int64_t n)
{
    if (n < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: resdiag_reader_steps: n = %lld",
                          (long long)n);
    if (n > m->info.n_steps)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "resdiag_reader_steps: run file %s holds %lld "
                          "steps, not %lld", m->entries[0].path, (long long)m->info.n_steps,
                          (long long)n);
    if (n > 0)
        memcpy(out, m->steps, (size_t)n * sizeof *out);
    return RESDIAG_OK;
}

/* The merged fields of q at step index si for the reader's function fn
 * (NaN where it fails), and whether any rank observed it. */
static resdiag_status merge_fields(const rd_merge *m, int64_t si, const slot_q *q,
                                   const char *fn, double *out, int *observed)
{
    resdiag_status st = check_si(m, si, fn);
    int n = 0;
    if (st == RESDIAG_OK)
        st = merge_slot(m, si, q, out, NULL, &n);
    if (st != RESDIAG_OK)
        fill_nan(out, RESDIAG_N_FIELDS);
    if (observed)
        *observed = st == RESDIAG_OK && n > 0;
    return st;
}

resdiag_status rd_merge_site(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                             int sublayer, resdiag_site site, double *out, int *observed)
{
    slot_q q = { dir, layer, sublayer, site, NULL };
    return merge_fields(m, si, &q, "resdiag_reader_site", out, observed);
}

resdiag_status rd_merge_sketch(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, double *out)
{
    if (m->info.sketch_size == 0)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "resdiag_reader_sketch: run file %s has no "
                          "sketches (sketch size 0)", m->entries[0].path);
    resdiag_status st = check_si(m, si, "resdiag_reader_sketch");
    double f[RESDIAG_N_FIELDS];
    int n = 0;
    slot_q q = { dir, layer, sublayer, site, NULL };
    return st != RESDIAG_OK ? st : merge_slot(m, si, &q, f, out, &n);
}

resdiag_status rd_merge_param(const rd_merge *m, int64_t si, int layer, const char *name,
                              double *out, int *observed)
{
    slot_q q = { RESDIAG_BACKWARD, layer, 0, RESDIAG_STREAM_IN, name };
    return merge_fields(m, si, &q, "resdiag_reader_param", out, observed);
}

/* The update ratios from several ranks (first: the first rank's, kept for
 * a replicated branch output of a tensor split): RATIO_FROB from the
 * merged branch output and stream input, RATIO_TOK_MEAN the mean weighted
 * by the ranks' branch rows (tok_sum / rows; a shard's is per shard: NaN). */
static resdiag_status join_updates(const rd_merge *m, int64_t si, int layer, int sublayer,
                                   int frob_nan, double tok_sum, double rows, double *out)
{
    double fb[RESDIAG_N_FIELDS], fs[RESDIAG_N_FIELDS];
    int nb = 0, ns = 0;
    slot_q qb = { RESDIAG_FORWARD, layer, sublayer, RESDIAG_BRANCH_OUT, NULL };
    slot_q qs = { RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, NULL };
    resdiag_status st;
    if ((st = merge_slot(m, si, &qb, fb, NULL, &nb)) != RESDIAG_OK
        || (st = merge_slot(m, si, &qs, fs, NULL, &ns)) != RESDIAG_OK)
        return st;
    int tensor = m->split == RESDIAG_SPLIT_TENSOR;
    if (tensor && fb[RESDIAG_FIELD_COLS] == m->info.d_model)
        return RESDIAG_OK; /* replicated: every rank's ratios are the first's */
    out[RESDIAG_UPDATE_RATIO_FROB] = frob_nan || nb == 0 || ns == 0
        ? NAN : fb[RESDIAG_FIELD_FROB] / fs[RESDIAG_FIELD_FROB];
    out[RESDIAG_UPDATE_RATIO_TOK_MEAN] = tensor || !(rows > 0) ? NAN : tok_sum / rows;
    return RESDIAG_OK;
}

resdiag_status rd_merge_update(const rd_merge *m, int64_t si, int layer, int sublayer,
                               double *out)
{
    resdiag_status st = check_si(m, si, "resdiag_reader_update");
    fill_nan(out, RESDIAG_N_UPDATE_FIELDS);
    if (st != RESDIAG_OK)
        return st;
    int n = 0, frob_nan = 0;
    double tok_sum = 0, rows = 0;
    for (int i = 0; i < m->n_merged; i++) {
        const rd_rank_entry *e = m->merged[i];
        int64_t rsi = rd_merge_rank_index(e, m->steps[si]);
        double u[RESDIAG_N_UPDATE_FIELDS], b[RESDIAG_N_FIELDS];
        int obs = 0;
        if (rsi < 0)
            continue;
        if ((st = rd_file_update(e->rd, rsi, layer, sublayer, u)) != RESDIAG_OK
            || (st = rd_file_site(e->rd, rsi, RESDIAG_FORWARD, layer, sublayer,
                                  RESDIAG_BRANCH_OUT, b, &obs)) != RESDIAG_OK)
            return st;
        if (isnan(u[0]) && isnan(u[1]) && !obs)
            continue; /* nothing of this sublayer on that rank */
        if (n++ == 0)
            memcpy(out, u, sizeof u);
        frob_nan |= isnan(u[RESDIAG_UPDATE_RATIO_FROB]);
        /* NaN propagates: one rank without the ratio makes it NaN */
        tok_sum += u[RESDIAG_UPDATE_RATIO_TOK_MEAN] * b[RESDIAG_FIELD_ROWS];
        rows += b[RESDIAG_FIELD_ROWS];
    }
    if (n <= 1)
        return RESDIAG_OK;
    return join_updates(m, si, layer, sublayer, frob_nan, tok_sum, rows, out);
}

/* First index of e's steps at or after step. */
static int64_t lower_bound(const rd_rank_entry *e, int64_t step)
{
    int64_t lo = 0, hi = e->n_steps;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e->steps[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

resdiag_status rd_merge_metric(const rd_merge *m, int metric, int64_t first, int64_t n,
                               double *out)
{
    static const char fn[] = "resdiag_reader_metric";
    if (metric < 0 || metric >= m->info.n_metrics)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: metric %d is outside 0..%d (run "
                          "file %s declares %d)", fn, metric, m->info.n_metrics - 1,
                          m->entries[0].path, m->info.n_metrics);
    if (first < 0 || n < 0 || n > m->info.n_steps - first)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps, not "
                          "%lld..%lld", fn, m->entries[0].path, (long long)m->info.n_steps,
                          (long long)first, (long long)(first + n - 1));
    fill_nan(out, (size_t)n);
    if (n == 0)
        return RESDIAG_OK;
    for (int i = 0; i < m->n_merged; i++) {
        const rd_rank_entry *e = m->merged[i];
        int64_t lo = lower_bound(e, m->steps[first]);
        int64_t hi = lower_bound(e, m->steps[first + n - 1] + 1);
        if (hi <= lo)
            continue;
        double *v = malloc((size_t)(hi - lo) * sizeof *v);
        if (!v)
            return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", e->path);
        resdiag_status st = rd_file_metric(e->rd, metric, lo, hi - lo, v);
        int64_t mi = first;
        for (int64_t j = 0; st == RESDIAG_OK && j < hi - lo; j++) {
            while (m->steps[mi] < e->steps[lo + j])
                mi++;
            if (!rd_metric_is_given(out[mi - first]))
                out[mi - first] = v[j];
        }
        free(v);
        if (st != RESDIAG_OK)
            return st;
    }
    return RESDIAG_OK;
}

resdiag_status rd_merge_step_status(const rd_merge *m, int64_t si, int *aborted, char *out,
                                    size_t out_len)
{
    *aborted = 0;
    resdiag_status st = check_si(m, si, out ? "resdiag_reader_abort_reason"
                                            : "resdiag_reader_step_aborted");
    for (int i = 0; st == RESDIAG_OK && i < m->n_merged && !*aborted; i++) {
        int64_t rsi = rd_merge_rank_index(m->merged[i], m->steps[si]);
        if (rsi < 0)
            continue;
        st = out ? rd_file_abort_reason(m->merged[i]->rd, rsi, out, out_len) : RESDIAG_OK;
        if (st == RESDIAG_OK)
            st = rd_file_step_aborted(m->merged[i]->rd, rsi, aborted);
    }
    if (out && !*aborted)
        out[0] = '\0';
    return st;
}

resdiag_status rd_merge_alias(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site, int *same_as)
{
    resdiag_status st = check_si(m, si, "resdiag_reader_alias");
    for (int i = 0; st == RESDIAG_OK && i < m->n_merged; i++) {
        int64_t rsi = rd_merge_rank_index(m->merged[i], m->steps[si]);
        if (rsi < 0)
            continue;
        st = rd_file_alias(m->merged[i]->rd, rsi, dir, layer, sublayer, site, same_as);
        if (st == RESDIAG_OK && *same_as >= 0)
            return st;
    }
    return st;
}

const char *rd_merge_callsite(const rd_merge *m, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site)
{
    const char *cs = "";
    for (int i = 0; i < m->n_merged && !cs[0]; i++)
        cs = rd_file_callsite(m->merged[i]->rd, dir, layer, sublayer, site);
    return cs;
}

resdiag_status rd_merge_series(const rd_merge *m, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, resdiag_field field,
                               double *out, int64_t n)
{
    static const char fn[] = "resdiag_reader_series";
    if ((int)field < 0 || (int)field >= RESDIAG_N_FIELDS)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: field %d is outside 0..%d", fn,
                          (int)field, RESDIAG_N_FIELDS - 1);
    if (n < 0 || n > m->info.n_steps)
        return rd_h5_fail(n < 0 ? RESDIAG_E_INVALID : RESDIAG_E_NOT_FOUND, "%s: run file %s "
                          "holds %lld steps, not %lld", fn, m->entries[0].path,
                          (long long)m->info.n_steps, (long long)n);
    slot_q q = { dir, layer, sublayer, site, NULL };
    for (int64_t si = 0; si < n; si++) {
        double f[RESDIAG_N_FIELDS];
        int nobs = 0;
        resdiag_status st = merge_slot(m, si, &q, f, NULL, &nobs);
        if (st != RESDIAG_OK)
            return st;
        out[si] = f[field];
    }
    return RESDIAG_OK;
}

/* ------------------------------------------------------ generic datasets */

int rd_merge_has_dataset(const rd_merge *m, const char *name)
{
    if (name[0] == '/')
        name++;
    for (int i = 0; i < m->n_datasets; i++)
        if (strcmp(m->datasets[i], name) == 0)
            return 1;
    return 0;
}

resdiag_status rd_merge_dims(const rd_merge *m, const char *name, int64_t *dims, int max_rank,
                             int *rank)
{
    if (!rd_merge_has_dataset(m, name))
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "resdiag_reader_dims: run file %s has no dataset "
                          "\"%s\"", m->entries[0].path, name);
    resdiag_status st = rd_file_dims(m->entries[0].rd, name, dims, max_rank, rank);
    if (st == RESDIAG_OK)
        dims[0] = m->info.n_steps;
    return st;
}

static int table_of(const rd_merge *m, const char *name)
{
    if (name[0] == '/')
        name++;
    for (int i = 0; i < RD_N_TABLES; i++)
        if (m->lay.tables[i].count && strcmp(m->lay.tables[i].name, name) == 0)
            return i;
    return -1;
}

/* The STATS table whose slots a sketch or calls table follows; -1: none. */
static int stats_table_of(int t)
{
    if (t >= RD_T_FWD_SITE && t <= RD_T_MODEL_PARAM)
        return t;
    if (t >= RD_T_FWD_SITE_SKETCH && t <= RD_T_BWD_MODEL_SKETCH)
        return t - RD_T_FWD_SITE_SKETCH;
    if (t >= RD_T_FWD_SITE_CALLS && t <= RD_T_MODEL_PARAM_CALLS)
        return t - RD_T_FWD_SITE_CALLS;
    return -1;
}

typedef struct step_bufs {
    double *acc;   /* (slots, F) the merged statistics */
    double *row;   /* one step of the table, from one rank */
    double *stats; /* one step of its STATS table, from one rank */
    int *n;        /* (slots) ranks joined */
} step_bufs;

/* One merged step of table t (of `per` doubles) into dst, t a STATS,
 * SKETCH or CALLS table: each slot joins the ranks that observed it. */
static resdiag_status merge_stats_step(const rd_merge *m, int t, int64_t si, size_t per,
                                       step_bufs *b, double *dst)
{
    int s = stats_table_of(t), param = s == RD_T_LAYER_PARAM || s == RD_T_MODEL_PARAM;
    const char *sname = m->lay.tables[s].name;
    size_t slots = m->lay.tables[s].count / RESDIAG_N_FIELDS, w = per / (slots ? slots : 1);
    int k = m->lay.tables[t].kind == RD_KIND_SKETCH ? (int)w : 0;
    fill_nan(dst, per);
    fill_nan(b->acc, m->lay.tables[s].count);
    memset(b->n, 0, slots * sizeof *b->n);
    for (int i = 0; i < m->n_merged; i++) {
        const rd_rank_entry *e = m->merged[i];
        int64_t rsi = rd_merge_rank_index(e, m->steps[si]);
        if (rsi < 0)
            continue;
        resdiag_status st = rd_file_read(e->rd, sname, rsi, 1, b->stats, m->lay.tables[s].count);
        if (st == RESDIAG_OK && t != s)
            st = rd_file_read(e->rd, m->lay.tables[t].name, rsi, 1, b->row, per);
        if (st != RESDIAG_OK)
            return st;
        for (size_t j = 0; j < slots; j++) {
            const double *f = b->stats + j * RESDIAG_N_FIELDS;
            double *acc = b->acc + j * RESDIAG_N_FIELDS;
            if (isnan(f[RESDIAG_FIELD_ROWS]))
                continue;
            int rule = b->n[j] ? join_rule(m, param, acc, f) : JOIN_FIRST;
            if (m->lay.tables[t].kind == RD_KIND_CALLS && (b->n[j] == 0 || rule == JOIN_ROWS))
                dst[j] = (b->n[j] ? dst[j] : 0) + (isnan(b->row[j]) ? 0 : b->row[j]);
            join(m, param, b->n[j], acc, k ? dst + j * w : NULL, f, b->row + j * w, k);
            b->n[j]++;
        }
    }
    if (t == s)
        memcpy(dst, b->acc, per * sizeof *dst);
    return RESDIAG_OK;
}

/* One merged step of a table whose values are taken from the lowest rank
 * that has them (aliases, metrics, step times). */
static resdiag_status merge_first_step(const rd_merge *m, const char *name, int64_t si,
                                       size_t per, double *row, double *dst)
{
    fill_nan(dst, per);
    for (int i = 0; i < m->n_merged; i++) {
        int64_t rsi = rd_merge_rank_index(m->merged[i], m->steps[si]);
        if (rsi < 0)
            continue;
        resdiag_status st = rd_file_read(m->merged[i]->rd, name, rsi, 1, row, per);
        if (st != RESDIAG_OK)
            return st;
        for (size_t j = 0; j < per; j++)
            if (isnan(dst[j]))
                dst[j] = row[j];
    }
    return RESDIAG_OK;
}

static resdiag_status merge_update_step(const rd_merge *m, int64_t si, double *dst)
{
    for (int l = 0; l < m->info.n_layers; l++)
        for (int s = 0; s < m->info.n_sublayers; s++) {
            resdiag_status st = rd_merge_update(
                m, si, l, s, dst + ((size_t)l * (size_t)m->info.n_sublayers + (size_t)s)
                                       * RESDIAG_N_UPDATE_FIELDS);
            if (st != RESDIAG_OK)
                return st;
        }
    return RESDIAG_OK;
}

/* One merged step of the step status tables (the flag: 1 when any rank
 * aborted; the reason: that rank's), as rd_merge_step_status says. */
static resdiag_status merge_status_step(const rd_merge *m, int t, int64_t si, double *dst)
{
    char reason[RESDIAG_MAX_ABORT_REASON];
    int aborted = 0;
    resdiag_status st = rd_merge_step_status(m, si, &aborted, reason, sizeof reason);
    if (st != RESDIAG_OK)
        return st;
    if (t == RD_T_STEP_ABORTED) {
        dst[0] = aborted;
        return RESDIAG_OK;
    }
    size_t n = strlen(reason);
    for (size_t i = 0; i < RESDIAG_MAX_ABORT_REASON; i++)
        dst[i] = i < n ? (double)(unsigned char)reason[i] : 0;
    return RESDIAG_OK;
}

static resdiag_status merge_read_steps(const rd_merge *m, const char *name, int t, int64_t first,
                                       int64_t count, size_t per, double *out)
{
    int s = stats_table_of(t);
    size_t sc = s >= 0 ? m->lay.tables[s].count : 0;
    step_bufs b = { calloc(sc + 1, sizeof(double)), calloc(per + 1, sizeof(double)),
                    calloc(sc + 1, sizeof(double)), calloc(sc + 1, sizeof(int)) };
    resdiag_status st = RESDIAG_OK;
    if (!b.acc || !b.row || !b.stats || !b.n)
        st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", m->entries[0].path);
    for (int64_t i = 0; st == RESDIAG_OK && i < count; i++) {
        double *dst = out + (size_t)i * per;
        if (s >= 0)
            st = merge_stats_step(m, t, first + i, per, &b, dst);
        else if (t == RD_T_UPDATE)
            st = merge_update_step(m, first + i, dst);
        else if (t == RD_T_STEP_ABORTED || t == RD_T_ABORT_REASON)
            st = merge_status_step(m, t, first + i, dst);
        else
            st = merge_first_step(m, name, first + i, per, b.row, dst);
    }
    free(b.acc);
    free(b.row);
    free(b.stats);
    free(b.n);
    return st;
}

resdiag_status rd_merge_read(const rd_merge *m, const char *name, int64_t first, int64_t count,
                             double *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_read";
    int64_t dims[RD_MAX_RANK + 1];
    int rank = 0;
    resdiag_status st = rd_merge_dims(m, name, dims, RD_MAX_RANK + 1, &rank);
    if (st != RESDIAG_OK)
        return st;
    if (first < 0 || count < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: first = %lld, count = %lld", fn,
                          (long long)first, (long long)count);
    if (first > m->info.n_steps || count > m->info.n_steps - first)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps; asked for %lld "
                          "from index %lld", fn, m->entries[0].path, (long long)m->info.n_steps,
                          (long long)count, (long long)first);
    size_t per = 1;
    for (int i = 1; i < rank; i++)
        per *= (size_t)dims[i];
    if ((size_t)count > out_len / per)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: %lld steps of %s need %zu doubles, "
                          "out_len is %zu", fn, (long long)count, name, (size_t)count * per,
                          out_len);
    const char *bare = name[0] == '/' ? name + 1 : name;
    if (strcmp(bare, RD_STEPS_NAME) == 0) {
        for (int64_t i = 0; i < count; i++)
            out[i] = (double)m->steps[first + i];
        return RESDIAG_OK;
    }
    return merge_read_steps(m, bare, table_of(m, bare), first, count, per, out);
}
