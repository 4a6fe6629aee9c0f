/*
 * test-ranks.c - the reader of a job of several ranks (doc/RANKS.md):
 * the rank attributes of the root (defaults, out-of-range values refused),
 * the merged view against one process that recorded the whole tensors
 * (helpers/rank-runs.h: its own computation, field by field) for data,
 * tensor and pipeline splits, the ranks' states (missing, not recorded,
 * ended early, rejected and why: another run, a damaged deflated chunk, at
 * open and at refresh), resdiag_reader_open_rank, and the ranks
 * part of the report (which rank's NaN came first, which steps lack a
 * rank: a middle step and the last ones).
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check-one.h"
#include "damage-chunk.h"
#include "rank-runs.h"
#include "resdiag.h"
#include "run-files.h"

/* Removes the job of path: rank files 0..world-1 and the whole run. */
static void remove_job(const char *name, int world)
{
    for (int r = 0; r < world; r++) {
        char p[600];
        ck_assert_int_eq(resdiag_rank_path(p, sizeof p, run_path(name), r), RESDIAG_OK);
        if (unlink(p) != 0)
            ck_assert_int_eq(errno, ENOENT);
    }
}

/* Writes the whole job in one process to path (a stale file removed first). */
static void write_whole(const char *name, const rr_part *p)
{
    remove_job(name, 1);
    ck_assert_int_eq(rr_write(run_path(name), p, 0), 0);
}

static rr_part part_rows(int lo, int hi, int n_steps)
{
    rr_part p = rr_whole(n_steps);
    p.rows_lo = lo;
    p.rows_hi = hi;
    return p;
}

/* Writes rank k->rank of the job at name (a stale file removed first). */
static void write_rank_k(const char *name, const rr_part *p, int shard_cols, const rr_ranks *k)
{
    char path[600];
    ck_assert_int_eq(resdiag_rank_path(path, sizeof path, run_path(name), k->rank), RESDIAG_OK);
    if (unlink(path) != 0)
        ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(rr_write_rank(run_path(name), p, shard_cols, k), 0);
}

static void write_rank(const char *name, const rr_part *p, int shard_cols, int rank, int world,
                       const char *split)
{
    rr_ranks k = { rank, world, split, 0, 0, 0, 1, "job-7" };
    write_rank_k(name, p, shard_cols, &k);
}

static resdiag_reader *open_ok(const char *path)
{
    resdiag_reader *rd = NULL;
    log_all[0] = '\0';
    ck_assert_msg(resdiag_reader_open(&rd, path) == RESDIAG_OK, "open %s: %s", path, log_all);
    return rd;
}

/* |a - b| within rel of the larger (or both NaN). */
static int close_to(double a, double b, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= rel * fmax(fmax(fabs(a), fabs(b)), 1e-300);
}

static const int exact_fields[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_COLS, RESDIAG_FIELD_ABSMAX,
                                    RESDIAG_FIELD_ABSMAX_COL, RESDIAG_FIELD_NAN_COUNT,
                                    RESDIAG_FIELD_INF_COUNT, RESDIAG_FIELD_CALL_SEQ };

/* The scale a field's rounding is relative to: a spread near 0 (the
 * token norms of a norm's output) is computed from sums of the size of its
 * mean, and a mean near 0 from sums of the size of the RMS. */
static double scale_of(const double *v, int f)
{
    double s = fabs(v[f]);
    switch (f) {
    case RESDIAG_FIELD_TOK_NORM_STD:
        return fmax(s, fabs(v[RESDIAG_FIELD_TOK_NORM_MEAN]));
    case RESDIAG_FIELD_TOK_RMS_STD:
        return fmax(s, fabs(v[RESDIAG_FIELD_TOK_RMS_MEAN]));
    case RESDIAG_FIELD_TOK_STD_STD:
        return fmax(s, fabs(v[RESDIAG_FIELD_TOK_STD_MEAN]));
    case RESDIAG_FIELD_TOK_MEAN_MEAN:
    case RESDIAG_FIELD_TOK_MEAN_STD:
        return fmax(s, fabs(v[RESDIAG_FIELD_TOK_RMS_MEAN]));
    default:
        return s;
    }
}

static int field_close(const double *a, const double *b, int f)
{
    if (isnan(a[f]) || isnan(b[f]))
        return isnan(a[f]) && isnan(b[f]);
    return fabs(a[f] - b[f]) <= 1e-12 * fmax(scale_of(b, f), 1e-300);
}

static int is_exact(int f);

/* Field f of a and b agree: the exact ones exactly, the rest to rounding;
 * CALL_SEQ not compared unless call_seq. */
static int same_field(const double *a, const double *b, int f, int call_seq)
{
    if (f == RESDIAG_FIELD_CALL_SEQ && !call_seq)
        return 1;
    if (is_exact(f))
        return a[f] == b[f] || (isnan(a[f]) && isnan(b[f]));
    return field_close(a, b, f);
}

static int is_exact(int f)
{
    for (size_t i = 0; i < sizeof exact_fields / sizeof exact_fields[0]; i++)
        if (exact_fields[i] == f)
            return 1;
    return 0;
}

/* Every site, parameter and update field of every step of the merged
 * reader m equals the whole run w's: exact counts, the rest to rounding;
 * CALL_SEQ too unless call_seq is 0 (a stage numbers only its own calls). */
static void expect_same_fields(const resdiag_reader *m, const resdiag_reader *w, int call_seq)
{
    int64_t n = resdiag_reader_info(w)->n_steps;
    ck_assert_int_eq(resdiag_reader_info(m)->n_steps, n);
    int compared = 0;
    for (int64_t si = 0; si < n; si++)
        for (int l = 0; l < RR_L; l++)
            for (int s = 0; s < 2; s++) {
                for (int site = 0; site <= RESDIAG_N_BLOCK_SITES; site++) {
                    double a[RESDIAG_N_FIELDS], b[RESDIAG_N_FIELDS];
                    int oa = 0, ob = 0;
                    if (site < RESDIAG_N_BLOCK_SITES) {
                        ck_assert_int_eq(resdiag_reader_site(m, si, RESDIAG_FORWARD, l, s, site,
                                                             a, &oa), RESDIAG_OK);
                        ck_assert_int_eq(resdiag_reader_site(w, si, RESDIAG_FORWARD, l, s, site,
                                                             b, &ob), RESDIAG_OK);
                    } else if (s == 0) {
                        ck_assert_int_eq(resdiag_reader_param(m, si, l, "mlp.w2", a, &oa),
                                         RESDIAG_OK);
                        ck_assert_int_eq(resdiag_reader_param(w, si, l, "mlp.w2", b, &ob),
                                         RESDIAG_OK);
                    } else {
                        continue;
                    }
                    ck_assert_int_eq(oa, ob);
                    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
                        ck_assert_msg(same_field(a, b, f, call_seq),
                                      "step %lld layer %d sub %d site %d field %s: merged %.17g, "
                                      "whole %.17g", (long long)si, l, s, site,
                                      resdiag_field_name((resdiag_field)f), a[f], b[f]);
                    compared++;
                }
                double ua[RESDIAG_N_UPDATE_FIELDS], ub[RESDIAG_N_UPDATE_FIELDS];
                ck_assert_int_eq(resdiag_reader_update(m, si, l, s, ua), RESDIAG_OK);
                ck_assert_int_eq(resdiag_reader_update(w, si, l, s, ub), RESDIAG_OK);
                for (int f = 0; f < RESDIAG_N_UPDATE_FIELDS; f++)
                    ck_assert_msg(close_to(ua[f], ub[f], 1e-12), "update %d: %.17g vs %.17g", f,
                                  ua[f], ub[f]);
            }
    ck_assert_int_gt(compared, 0);
}

static void expect_same_verdict(const resdiag_reader *m, const resdiag_reader *w)
{
    resdiag_analysis *am = NULL, *aw = NULL;
    ck_assert_int_eq(resdiag_analyze(m, NULL, &am), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analyze(w, NULL, &aw), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analysis_verdict(am), resdiag_analysis_verdict(aw));
    ck_assert_int_ne(resdiag_analysis_verdict(aw), RESDIAG_VERDICT_CANNOT_TELL);
    ck_assert(close_to(resdiag_analysis_growth(am), resdiag_analysis_growth(aw), 1e-9));
    resdiag_analysis_destroy(am);
    resdiag_analysis_destroy(aw);
}

START_TEST(files_without_rank_attributes_are_one_process)
{
    rr_part p = rr_whole(2);
    ck_assert_int_eq(rr_write(run_path("one.h5"), &p, 0), 0);
    ck_assert_int_eq(rr_drop_ranks(run_path("one.h5")), 0);
    resdiag_reader *rd = open_ok(run_path("one.h5"));
    const resdiag_run_info *in = resdiag_reader_info(rd);
    ck_assert_int_eq(in->rank, 0);
    ck_assert_int_eq(in->world_size, 1);
    ck_assert_int_eq(in->local_rank, -1);
    ck_assert_int_eq(in->split, RESDIAG_SPLIT_NONE);
    ck_assert_int_eq(in->layer_count, 0);
    ck_assert_int_eq(in->record_rank_every, 1);
    ck_assert_str_eq(in->rank_source, "single");
    ck_assert_str_eq(in->job_id, "");
    ck_assert_int_eq(in->n_ranks_merged, 1);
    ck_assert_int_eq(resdiag_reader_n_ranks(rd), 1);
    resdiag_rank_info ri = { .struct_size = sizeof ri };
    ck_assert_int_eq(resdiag_reader_rank(rd, 0, &ri), RESDIAG_OK);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MERGED);
    ck_assert_int_eq(ri.last_step, 1);
    ck_assert_int_eq(resdiag_reader_rank(rd, 1, &ri), RESDIAG_E_RANGE);
    resdiag_reader_destroy(rd);
    remove_job("one.h5", 1);
}
END_TEST

START_TEST(data_split_merges_to_the_whole_run)
{
    rr_part w = rr_whole(4), a = part_rows(0, 8, 4), b = part_rows(8, RR_T, 4);
    write_whole("whole.h5", &w);
    write_rank("data.h5", &a, 0, 0, 2, "data");
    write_rank("data.h5", &b, 0, 1, 2, "data");
    resdiag_reader *m = open_ok(run_path("data.h5")), *r = open_ok(run_path("whole.h5"));
    ck_assert_int_eq(resdiag_reader_info(m)->n_ranks_merged, 2);
    ck_assert_int_eq(resdiag_reader_info(m)->world_size, 2);
    ck_assert_int_eq(resdiag_reader_info(m)->split, RESDIAG_SPLIT_DATA);
    ck_assert_str_eq(resdiag_reader_info(m)->job_id, "job-7");
    expect_same_fields(m, r, 1);
    expect_same_verdict(m, r);
    /* the generic read merges the same way, and the calls add */
    double sa[RR_L * 2 * 5 * RESDIAG_N_FIELDS], sb[RR_L * 2 * 5 * RESDIAG_N_FIELDS];
    double ca[RR_L * 2 * 5];
    ck_assert_int_eq(resdiag_reader_read(m, "forward/site_stats", 1, 1, sa, 1000), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_read(r, "forward/site_stats", 1, 1, sb, 1000), RESDIAG_OK);
    for (size_t i = 0; i < sizeof sa / sizeof sa[0]; i++)
        ck_assert_msg(field_close(sa + i / RESDIAG_N_FIELDS * RESDIAG_N_FIELDS,
                                  sb + i / RESDIAG_N_FIELDS * RESDIAG_N_FIELDS,
                                  (int)(i % RESDIAG_N_FIELDS)),
                      "element %zu: %.17g vs %.17g", i, sa[i], sb[i]);
    ck_assert_int_eq(resdiag_reader_read(m, "forward/site_calls", 1, 1, ca, 40), RESDIAG_OK);
    ck_assert(ca[0] == 2 && ca[39] == 2);
    /* the per-step summary is per file: the merged view does not serve it */
    for (int i = 0; i < resdiag_reader_n_datasets(m); i++)
        ck_assert(strncmp(resdiag_reader_dataset_name(m, i), "summary/", 8) != 0);
    resdiag_reader_destroy(m);
    resdiag_reader_destroy(r);
    remove_job("data.h5", 2);
    remove_job("whole.h5", 1);
}
END_TEST

/* 1 when the writer stored rank 1's shard (columns RR_D/2..) at its global
 * columns (ABSMAX_COL, and then the sketch: doc/RANKS.md), 0 when at the
 * shard's own; the merged view is exact for the columns only in the first case. */
static int shards_at_global_columns(const char *name)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path(name), 1), RESDIAG_OK);
    int global = 0;
    for (int64_t si = 0; si < resdiag_reader_info(rd)->n_steps; si++)
        for (int l = 0; l < RR_L; l++) {
            double f[RESDIAG_N_FIELDS];
            ck_assert_int_eq(resdiag_reader_site(rd, si, RESDIAG_FORWARD, l, 1,
                                                 RESDIAG_BRANCH_OUT, f, NULL), RESDIAG_OK);
            global |= f[RESDIAG_FIELD_ABSMAX_COL] >= RR_D / 2;
        }
    resdiag_reader_destroy(rd);
    return global;
}

START_TEST(tensor_shards_merge_where_exact)
{
    rr_part w = rr_whole(3), a = rr_whole(3), b = rr_whole(3);
    a.cols_hi = RR_D / 2;
    b.cols_lo = RR_D / 2;
    write_whole("whole.h5", &w);
    rr_ranks k0 = { 0, 2, "tensor", 0, 0, 0, 1, "" };
    rr_ranks k1 = { 1, 2, "tensor", RR_D / 2, 0, 0, 1, "" };
    write_rank_k("tp.h5", &a, RR_D / 2, &k0);
    write_rank_k("tp.h5", &b, RR_D / 2, &k1);
    resdiag_reader *m = open_ok(run_path("tp.h5")), *r = open_ok(run_path("whole.h5"));
    int cols_compared = 0, global = shards_at_global_columns("tp.h5");
    for (int64_t si = 0; si < 3; si++)
        for (int l = 0; l < RR_L; l++)
            for (int s = 0; s < 2; s++)
                for (int q = 0; q < 2; q++) {
                    double x[RESDIAG_N_FIELDS], y[RESDIAG_N_FIELDS];
                    if (q == 0) {
                        ck_assert_int_eq(resdiag_reader_site(m, si, RESDIAG_FORWARD, l, s,
                                                             RESDIAG_BRANCH_OUT, x, NULL),
                                         RESDIAG_OK);
                        ck_assert_int_eq(resdiag_reader_site(r, si, RESDIAG_FORWARD, l, s,
                                                             RESDIAG_BRANCH_OUT, y, NULL),
                                         RESDIAG_OK);
                    } else {
                        if (s == 1)
                            continue;
                        ck_assert_int_eq(resdiag_reader_param(m, si, l, "mlp.w2", x, NULL),
                                         RESDIAG_OK);
                        ck_assert_int_eq(resdiag_reader_param(r, si, l, "mlp.w2", y, NULL),
                                         RESDIAG_OK);
                    }
                    ck_assert(x[RESDIAG_FIELD_ROWS] == y[RESDIAG_FIELD_ROWS]);
                    ck_assert(x[RESDIAG_FIELD_COLS] == RR_D && y[RESDIAG_FIELD_COLS] == RR_D);
                    ck_assert(close_to(x[RESDIAG_FIELD_FROB], y[RESDIAG_FIELD_FROB], 1e-13));
                    ck_assert(x[RESDIAG_FIELD_ABSMAX] == y[RESDIAG_FIELD_ABSMAX]);
                    ck_assert(x[RESDIAG_FIELD_NAN_COUNT] == y[RESDIAG_FIELD_NAN_COUNT]);
                    ck_assert(x[RESDIAG_FIELD_INF_COUNT] == y[RESDIAG_FIELD_INF_COUNT]);
                    ck_assert_msg(close_to(x[RESDIAG_FIELD_TOK_MEAN_MEAN],
                                           y[RESDIAG_FIELD_TOK_MEAN_MEAN], 1e-12),
                                  "%.17g %.17g", x[RESDIAG_FIELD_TOK_MEAN_MEAN],
                                  y[RESDIAG_FIELD_TOK_MEAN_MEAN]);
                    /* per shard: not merged */
                    ck_assert(isnan(x[RESDIAG_FIELD_TOK_NORM_MEAN]));
                    ck_assert(isnan(x[RESDIAG_FIELD_TOK_RMS_STD]));
                    /* the maximum in rank 0's shard: its column is the global one
                     * whatever the writer stores for the other shard */
                    if (y[RESDIAG_FIELD_ABSMAX_COL] < RR_D / 2 || (global && q == 0)) {
                        ck_assert(x[RESDIAG_FIELD_ABSMAX_COL] == y[RESDIAG_FIELD_ABSMAX_COL]);
                        cols_compared++;
                    }
                    if (global && q == 0) { /* the shards' sketches add up to the whole's */
                        double sx[RR_K], sy[RR_K];
                        ck_assert_int_eq(resdiag_reader_sketch(m, si, RESDIAG_FORWARD, l, s,
                                                               RESDIAG_BRANCH_OUT, sx),
                                         RESDIAG_OK);
                        ck_assert_int_eq(resdiag_reader_sketch(r, si, RESDIAG_FORWARD, l, s,
                                                               RESDIAG_BRANCH_OUT, sy),
                                         RESDIAG_OK);
                        for (int j = 0; j < RR_K; j++)
                            ck_assert(fabs(sx[j] - sy[j]) <= 1e-12 * y[RESDIAG_FIELD_FROB]);
                    }
                }
    ck_assert_int_gt(cols_compared, 0);
    /* a replicated tensor (width d_model) is the lowest rank's: the whole run's */
    double x[RESDIAG_N_FIELDS], y[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(m, 1, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, x,
                                         NULL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_site(r, 1, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, y,
                                         NULL), RESDIAG_OK);
    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
        ck_assert(x[f] == y[f] || (isnan(x[f]) && isnan(y[f])));
    resdiag_reader_destroy(m);
    resdiag_reader_destroy(r);
    remove_job("tp.h5", 2);
    remove_job("whole.h5", 1);
}
END_TEST

START_TEST(pipeline_stages_join_by_layer)
{
    rr_part w = rr_whole(3), a = rr_whole(3), b = rr_whole(3);
    a.layer_hi = 2;
    b.layer_lo = 2;
    write_whole("whole.h5", &w);
    rr_ranks k0 = { 0, 2, "pipeline", 0, 0, 2, 1, "" }, k1 = { 1, 2, "pipeline", 0, 2, 2, 1, "" };
    write_rank_k("pp.h5", &a, 0, &k0);
    write_rank_k("pp.h5", &b, 0, &k1);
    resdiag_reader *m = open_ok(run_path("pp.h5")), *r = open_ok(run_path("whole.h5"));
    expect_same_fields(m, r, 0);
    expect_same_verdict(m, r);
    resdiag_reader_destroy(m);
    resdiag_reader_destroy(r);
    remove_job("pp.h5", 2);
    remove_job("whole.h5", 1);
}
END_TEST

static void rank_info(const resdiag_reader *rd, int r, resdiag_rank_info *ri)
{
    memset(ri, 0, sizeof *ri);
    ri->struct_size = sizeof *ri;
    ck_assert_int_eq(resdiag_reader_rank(rd, r, ri), RESDIAG_OK);
    ck_assert_int_eq(ri->rank, r);
}

START_TEST(missing_not_recorded_and_ended_early_ranks)
{
    rr_part a = part_rows(0, 8, 5), c = part_rows(8, RR_T, 3);
    /* world 4, every 2nd rank records: 0 and 2; rank 2 ended after step 2 */
    rr_ranks k0 = { 0, 4, "data", 0, 0, 0, 2, "" }, k2 = { 2, 4, "data", 0, 0, 0, 2, "" };
    write_rank_k("job.h5", &a, 0, &k0);
    write_rank_k("job.h5", &c, 0, &k2);
    resdiag_reader *m = open_ok(run_path("job.h5"));
    resdiag_rank_info ri;
    ck_assert_int_eq(resdiag_reader_n_ranks(m), 4);
    ck_assert_int_eq(resdiag_reader_info(m)->n_ranks_merged, 2);
    rank_info(m, 0, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MERGED);
    ck_assert_int_eq(ri.last_step, 4);
    rank_info(m, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_NOT_RECORDED);
    ck_assert_str_eq(ri.path, "");
    rank_info(m, 2, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_ENDED_EARLY);
    ck_assert_int_eq(ri.last_step, 2);
    ck_assert_int_eq(ri.n_steps, 3);
    ck_assert_int_eq(resdiag_reader_info(m)->n_steps, 5);
    /* a step the ended rank lacks holds rank 0's tokens only */
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(m, 4, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == 8);
    ck_assert_int_eq(resdiag_reader_site(m, 2, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == RR_T);
    resdiag_reader_destroy(m);
    /* rank 2's file gone: missing (rank 3 is still not recorded) */
    char p2[600];
    resdiag_rank_path(p2, sizeof p2, run_path("job.h5"), 2);
    ck_assert_int_eq(unlink(p2), 0);
    m = open_ok(run_path("job.h5"));
    rank_info(m, 2, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MISSING);
    rank_info(m, 3, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_NOT_RECORDED);
    resdiag_reader_destroy(m);
    remove_job("job.h5", 4);
}
END_TEST

static void expect_rejected(const char *name, const char *why_part)
{
    resdiag_reader *m = open_ok(run_path(name));
    resdiag_rank_info ri;
    rank_info(m, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_REJECTED);
    ck_assert_msg(strstr(ri.why, why_part) != NULL, "why: %s", ri.why);
    ck_assert_int_eq(resdiag_reader_info(m)->n_ranks_merged, 1);
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(m, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == 8); /* not merged */
    resdiag_reader_destroy(m);
}

START_TEST(files_of_another_run_are_rejected_with_why)
{
    rr_part a = part_rows(0, 8, 2), b = part_rows(8, RR_T, 2);
    write_rank("rej.h5", &a, 0, 0, 2, "data");
    b.d_model = 2 * RR_D; /* (its tensors of width RR_D as shards) */
    write_rank("rej.h5", &b, RR_D, 1, 2, "data");
    expect_rejected("rej.h5", "d_model");
    b.d_model = RR_D;
    rr_ranks k1 = { 1, 2, "data", 0, 0, 0, 1, "job-8" };
    write_rank_k("rej.h5", &b, 0, &k1);
    expect_rejected("rej.h5", "job id");
    /* the file says it is rank 0, not 1 */
    char p1[600], p0[600];
    resdiag_rank_path(p1, sizeof p1, run_path("rej.h5"), 1);
    resdiag_rank_path(p0, sizeof p0, run_path("rej.h5"), 0);
    ck_assert_int_eq(unlink(p1), 0);
    ck_assert_int_eq(rr_write(p1, &b, 0), 0);
    rr_ranks wrong = { 0, 2, "data", 0, 0, 0, 1, "job-7" };
    ck_assert_int_eq(rr_set_ranks(p1, &wrong), 0);
    expect_rejected("rej.h5", "rank attribute is 0");
    /* a symbolic link is never followed */
    ck_assert_int_eq(unlink(p1), 0);
    ck_assert_int_eq(symlink(p0, p1), 0);
    expect_rejected("rej.h5", "symbolic link");
    /* a file that is not a run */
    ck_assert_int_eq(unlink(p1), 0);
    FILE *fp = fopen(p1, "w");
    fputs("not hdf5\n", fp);
    fclose(fp);
    expect_rejected("rej.h5", "not an HDF5 file");
    remove_job("rej.h5", 2);
}
END_TEST

/* Damages the deflated chunk of step index step of /forward/site_stats in
 * rank r's file of job name. */
static void damage_rank(const char *name, int r, int step)
{
    char p[600];
    ck_assert_int_eq(resdiag_rank_path(p, sizeof p, run_path(name), r), RESDIAG_OK);
    ck_assert_int_eq(dc_damage_chunk(p, "/forward/site_stats", (hsize_t)step), 0);
}

START_TEST(a_damaged_chunk_rejects_its_rank)
{
    rr_part a = rr_deflated_rows(0, 6, 3), b = rr_deflated_rows(6, 11, 3);
    rr_part c = rr_deflated_rows(11, RR_T, 3);
    write_rank("dmg.h5", &a, 0, 0, 3, "data");
    write_rank("dmg.h5", &b, 0, 1, 3, "data");
    write_rank("dmg.h5", &c, 0, 2, 3, "data");
    damage_rank("dmg.h5", 1, 1); /* step 0 whole: the rank is rejected, not cut */
    resdiag_reader *m = open_ok(run_path("dmg.h5"));
    resdiag_rank_info ri;
    rank_info(m, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_REJECTED);
    ck_assert_msg(strstr(ri.why, "dataset /forward/site_stats, step 1: its chunk"), "why: %s",
                  ri.why);
    ck_assert_int_eq(resdiag_reader_info(m)->n_ranks_merged, 2);
    ck_assert_int_eq(resdiag_reader_info(m)->n_steps, 3);
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(m, 1, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == 6 + 5); /* ranks 0 and 2 */
    /* every read: that of the job without rank 1's file */
    char p1[600];
    resdiag_rank_path(p1, sizeof p1, run_path("dmg.h5"), 1);
    ck_assert_int_eq(unlink(p1), 0);
    resdiag_reader *w = open_ok(run_path("dmg.h5"));
    rank_info(w, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MISSING);
    expect_same_fields(m, w, 1);
    expect_same_verdict(m, w);
    resdiag_reader_destroy(m);
    resdiag_reader_destroy(w);
    /* rank 0's own damaged chunk: the job's reads fail, saying where */
    write_rank("dmg.h5", &b, 0, 1, 3, "data");
    damage_rank("dmg.h5", 0, 1);
    m = open_ok(run_path("dmg.h5"));
    log_all[0] = '\0';
    ck_assert_int_eq(resdiag_reader_site(m, 1, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_E_FORMAT);
    ck_assert_msg(strstr(log_all, "dataset /forward/site_stats, step 1: its chunk"), "%s",
                  log_all);
    resdiag_reader_destroy(m);
    remove_job("dmg.h5", 3);
}
END_TEST

/* A rank whose chunk is damaged in a step written after the merged reader
 * opened: rejected at refresh, as it would have been at open. */
START_TEST(a_chunk_damaged_after_open_rejects_its_rank_at_refresh)
{
    rr_part a = rr_deflated_rows(0, 8, 3), b = rr_deflated_rows(8, RR_T, 3);
    write_rank("live.h5", &a, 0, 0, 2, "data");
    char p1[600];
    resdiag_rank_path(p1, sizeof p1, run_path("live.h5"), 1);
    if (unlink(p1) != 0)
        ck_assert_int_eq(errno, ENOENT);
    int c2p[2], p2c[2];
    ck_assert_int_eq(pipe(c2p), 0);
    ck_assert_int_eq(pipe(p2c), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* rank 1, training: two steps, then the third, damaged */
        rr_ranks k = { 1, 2, "data", 0, 0, 0, 1, "" };
        resdiag *r = rr_open_as(run_path("live.h5"), &b, 0, &k);
        char c = 0;
        int ok = r && rr_step(r, &b, 0) == 0 && rr_step(r, &b, 1) == 0
                 && resdiag_flush(r) == RESDIAG_OK && write(c2p[1], "a", 1) == 1
                 && read(p2c[0], &c, 1) == 1 && rr_step(r, &b, 2) == 0;
        ok = r && resdiag_close(r) == RESDIAG_OK && ok;
        resdiag_destroy(r);
        ok = ok && dc_damage_chunk(p1, "/forward/site_stats", 2) == 0;
        ok = write(c2p[1], ok ? "b" : "x", 1) == 1 && ok;
        _exit(ok ? 0 : 1);
    }
    char c = 0;
    ck_assert_int_eq(read(c2p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'a');
    resdiag_reader *m = open_ok(run_path("live.h5"));
    resdiag_rank_info ri;
    rank_info(m, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_ENDED_EARLY); /* so far */
    ck_assert_int_eq(ri.n_steps, 2);
    ck_assert_int_eq(write(p2c[1], "g", 1), 1);
    ck_assert_int_eq(read(c2p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'b');
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(resdiag_reader_refresh(m), RESDIAG_OK);
    rank_info(m, 1, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_REJECTED);
    ck_assert_msg(strstr(ri.why, "dataset /forward/site_stats, step 2: its chunk"), "why: %s",
                  ri.why);
    ck_assert_int_eq(resdiag_reader_info(m)->n_ranks_merged, 1);
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(m, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f, NULL),
                     RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == 8); /* rank 0's alone */
    resdiag_reader_destroy(m);
    remove_job("live.h5", 2);
}
END_TEST

static char *report_of(const char *name, int json)
{
    resdiag_reader *rd = open_ok(run_path(name));
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    char *t = json ? resdiag_analysis_to_json(a) : resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(t);
    resdiag_analysis_destroy(a);
    resdiag_reader_destroy(rd);
    return t;
}

START_TEST(open_rank_reads_one_file)
{
    rr_part a = part_rows(0, 8, 2), b = part_rows(8, RR_T, 3);
    write_rank("or.h5", &a, 0, 0, 2, "data");
    write_rank("or.h5", &b, 0, 1, 2, "data");
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path("or.h5"), 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->rank, 1);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_ranks_merged, 1);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    ck_assert_int_eq(resdiag_reader_n_ranks(rd), 1);
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, f,
                                         NULL), RESDIAG_OK);
    ck_assert(f[RESDIAG_FIELD_ROWS] == 8);
    /* its report says it is one rank's file, read alone */
    resdiag_analysis *an = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    char *text = resdiag_analysis_to_text(an), *json = resdiag_analysis_to_json(an);
    ck_assert_msg(strstr(text, "Ranks: this file is rank 1 of 2 (data split), read alone") != NULL,
                  "%s", text);
    ck_assert_ptr_nonnull(strstr(json, "\"rank_file\": {\"rank\": 1, \"world_size\": 2, "
                                       "\"split\": \"data\"}"));
    ck_assert_ptr_null(strstr(json, "\"ranks\":"));
    resdiag_free(text);
    resdiag_free(json);
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path("or.h5"), 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_ranks_merged, 1);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 2);
    resdiag_reader_destroy(rd);
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path("or.h5"), RESDIAG_RANK_ALL), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_ranks_merged, 2);
    resdiag_reader_destroy(rd);
    char *merged = report_of("or.h5", 1);
    ck_assert_ptr_null(strstr(merged, "\"rank_file\""));
    ck_assert_ptr_nonnull(strstr(merged, "\"ranks\":"));
    resdiag_free(merged);
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path("or.h5"), 5), RESDIAG_E_NOT_FOUND);
    ck_assert_ptr_null(rd);
    ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path("or.h5"), -2), RESDIAG_E_INVALID);
    remove_job("or.h5", 2);
}
END_TEST

/* Opening rank 0's file with root attributes a stranger set fails with one
 * line, quickly. */
static void expect_refused(const char *attr, int as_string, long long v, const char *msg_part)
{
    rr_part a = rr_whole(1);
    write_whole("bad.h5", &a);
    rr_ranks k = { 0, 2, "data", 0, 0, 0, 1, "" };
    ck_assert_int_eq(rr_set_ranks(run_path("bad.h5"), &k), 0);
    hid_t f = H5Fopen(run_path("bad.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    ck_assert_int_eq(as_string ? rr_put_str(f, attr, "seven") : rr_put_int(f, attr, v), 0);
    H5Fclose(f);
    resdiag_reader *rd = NULL;
    log_all[0] = '\0';
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(resdiag_reader_open(&rd, run_path("bad.h5")), RESDIAG_E_FORMAT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_ptr_null(rd);
    ck_assert_msg(strstr(log_all, msg_part) != NULL, "log: %s", log_all);
    ck_assert_msg(strchr(log_all, '\n') == log_all + strlen(log_all) - 1, "one line: %s",
                  log_all);
    ck_assert((t1.tv_sec - t0.tv_sec) < 2);
    ck_assert_int_eq(unlink(run_path("bad.h5")), 0);
}

START_TEST(hostile_rank_attributes_are_refused)
{
    expect_refused("world_size", 0, 1000000000LL, "world_size");
    expect_refused("world_size", 0, 0, "world_size");
    expect_refused("rank", 1, 0, "rank");
    expect_refused("rank", 0, -1, "rank");
    expect_refused("rank", 0, 2, "rank");
    expect_refused("split", 0, 3, "split");
    expect_refused("layer_count", 0, RR_L + 1, "layer_count");
    expect_refused("record_rank_every", 0, 0, "record_rank_every");
    /* an unknown split name */
    rr_part a = rr_whole(1);
    write_whole("bad.h5", &a);
    rr_ranks k = { 0, 2, "diagonal", 0, 0, 0, 1, "" };
    ck_assert_int_eq(rr_set_ranks(run_path("bad.h5"), &k), 0);
    resdiag_reader *rd = NULL;
    log_all[0] = '\0';
    ck_assert_int_eq(resdiag_reader_open(&rd, run_path("bad.h5")), RESDIAG_E_FORMAT);
    ck_assert_msg(strstr(log_all, "diagonal") != NULL, "log: %s", log_all);
    ck_assert_int_eq(unlink(run_path("bad.h5")), 0);
}
END_TEST

START_TEST(a_huge_world_probes_names_only)
{
    /* the largest world a file may declare, with one other rank's file:
     * the directory is listed once, nothing is kept for the missing ranks */
    rr_part a = rr_whole(1);
    rr_ranks k = { 0, 1000000, "data", 0, 0, 0, 1, "" }, k1 = k;
    k1.rank = 123457;
    write_rank_k("big.h5", &a, 0, &k);
    write_rank_k("big.h5", &a, 0, &k1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    resdiag_reader *rd = open_ok(run_path("big.h5"));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 20);
    ck_assert_int_eq(resdiag_reader_n_ranks(rd), 1000000);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_ranks_merged, 2);
    resdiag_rank_info ri;
    rank_info(rd, 999999, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MISSING);
    rank_info(rd, 123457, &ri);
    ck_assert_int_eq(ri.state, RESDIAG_RANK_MERGED);
    resdiag_reader_destroy(rd);
    char p1[600];
    resdiag_rank_path(p1, sizeof p1, run_path("big.h5"), 123457);
    ck_assert_int_eq(unlink(p1), 0);
    ck_assert_int_eq(unlink(run_path("big.h5")), 0);
}
END_TEST


START_TEST(report_names_the_rank_whose_nan_came_first)
{
    rr_part a = part_rows(0, 8, 6), b = part_rows(8, RR_T, 6);
    a.nan_step = 4;
    a.nan_layer = 1;
    b.nan_step = 2;
    b.nan_layer = 3;
    write_rank("nf.h5", &a, 0, 0, 2, "data");
    write_rank("nf.h5", &b, 0, 1, 2, "data");
    char *t = report_of("nf.h5", 0);
    ck_assert_msg(strstr(t, "rank 1: NaN at step 2, layer 3, mlp, first (branch_out, forward)"),
                  "%s", t);
    ck_assert_msg(strstr(t, "rank 0: NaN at step 4, layer 1, mlp (branch_out, forward)"), "%s", t);
    ck_assert_msg(strstr(t, "Non-finite values: first at step 2, layer 3 mlp branch_out"), "%s", t);
    resdiag_free(t);
    t = report_of("nf.h5", 1);
    ck_assert_msg(strstr(t, "\"first_nonfinite_rank\": 1"), "%s", t);
    resdiag_free(t);
    remove_job("nf.h5", 2);
}
END_TEST

START_TEST(report_names_replicas_whose_gradients_differ)
{
    rr_part a = part_rows(0, 8, 2), b = part_rows(8, RR_T, 2);
    write_rank("gd.h5", &a, 0, 0, 2, "data");
    write_rank("gd.h5", &b, 0, 1, 2, "data");
    char *t = report_of("gd.h5", 0);
    ck_assert_msg(strstr(t, "where the ranks disagree: nowhere"), "%s", t);
    ck_assert_msg(strstr(t, "Ranks: 2 of 2 expected rank files found (world size 2, data split), "
                            "2 merged"), "%s", t);
    resdiag_free(t);
    b.grad_scale = 1.001;
    write_rank("gd.h5", &b, 0, 1, 2, "data");
    t = report_of("gd.h5", 0);
    ck_assert_msg(strstr(t, "rank 1: the gradient of mlp.w2 in layer 0 differs from rank 0's by "
                            "0.001 (relative) at step 0"), "%s", t);
    resdiag_free(t);
    remove_job("gd.h5", 2);
}
END_TEST

START_TEST(report_of_a_tensor_split_says_what_is_per_shard)
{
    rr_part a = rr_whole(2), b = rr_whole(2);
    a.cols_hi = RR_D / 2;
    b.cols_lo = RR_D / 2;
    rr_ranks k0 = { 0, 2, "tensor", 0, 0, 0, 1, "" };
    rr_ranks k1 = { 1, 2, "tensor", RR_D / 2, 0, 0, 1, "" };
    write_rank_k("tps.h5", &a, RR_D / 2, &k0);
    write_rank_k("tps.h5", &b, RR_D / 2, &k1);
    char *t = report_of("tps.h5", 0);
    ck_assert_msg(strstr(t, "per shard (tensor split, not merged: NaN): tok_norm_mean"), "%s", t);
    resdiag_free(t);
    t = report_of("tps.h5", 1);
    ck_assert_msg(strstr(t, "\"per_shard\": [\"tok_norm_mean\""), "%s", t);
    resdiag_free(t);
    remove_job("tps.h5", 2);
}
END_TEST

/* How many of a 2-rank job's files, each opened alone, hold each of
 * the steps 0..n-1 (count[s]), and which rank lacks it (lacks[s], -1). */
static void count_alone(const char *name, int n, int *count, int *lacks)
{
    for (int s = 0; s < n; s++) {
        count[s] = 0;
        lacks[s] = -1;
    }
    for (int r = 0; r < 2; r++) {
        resdiag_reader *rd = NULL;
        ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_path(name), r), RESDIAG_OK);
        int64_t m = resdiag_reader_info(rd)->n_steps, v[64];
        ck_assert_int_le(m, 64);
        ck_assert_int_eq(resdiag_reader_steps(rd, v, m), RESDIAG_OK);
        for (int s = 0; s < n; s++) {
            int held = 0;
            for (int64_t i = 0; i < m; i++)
                held |= v[i] == s;
            count[s] += held;
            if (!held)
                lacks[s] = r;
        }
        resdiag_reader_destroy(rd);
    }
}

/* Rank 1 skips step 2 of 0..5: the merged report says, in text, JSON and
 * HTML, that step 2 holds 1 of 2 ranks (counts from each file opened
 * alone); the first and last steps hold both, so the comparisons stand. */
START_TEST(report_says_which_steps_lack_a_rank)
{
    rr_part a = part_rows(0, 8, 6), b = part_rows(8, RR_T, 6);
    b.gap_step = 2;
    write_rank("gap.h5", &a, 0, 0, 2, "data");
    write_rank("gap.h5", &b, 0, 1, 2, "data");
    int count[6], lacks[6];
    count_alone("gap.h5", 6, count, lacks);
    char want[256], json[256] = "\"present_per_step\": [";
    for (int s = 0; s < 6; s++)
        snprintf(json + strlen(json), sizeof json - strlen(json), "%s%d", s ? ", " : "", count[s]);
    strcat(json, "], \"steps_all_ranks\": 5, \"n_steps_fewer_ranks\": 1");
    char *t = report_of("gap.h5", 0);
    ck_assert_msg(strstr(t, "steps held by all 2 merged ranks: 5 of 6"), "%s", t);
    snprintf(want, sizeof want, "  - step 2: %d of 2 ranks present, missing rank %d\n", count[2],
             lacks[2]);
    ck_assert_msg(strstr(t, want), "no '%s' in\n%s", want, t);
    ck_assert_msg(!strstr(t, "mix ranks"), "%s", t);
    resdiag_free(t);
    t = report_of("gap.h5", 1);
    ck_assert_msg(strstr(t, json), "no '%s' in\n%s", json, t);
    snprintf(want, sizeof want, "{\"first_step\": 2, \"last_step\": 2, \"present\": %d, "
             "\"missing\": [%d]}", count[2], lacks[2]);
    ck_assert_msg(strstr(t, want), "no '%s' in\n%s", want, t);
    ck_assert_msg(strstr(t, "\"compared_steps_same_ranks\": true"), "%s", t);
    resdiag_free(t);

    /* rank 1 ends after step 3: steps 4-5 hold rank 0 alone, and the
     * first and last complete step (0, 5) hold different ranks */
    b = part_rows(8, RR_T, 4);
    write_rank("gap.h5", &b, 0, 1, 2, "data");
    count_alone("gap.h5", 6, count, lacks);
    ck_assert_int_eq(count[4] + count[5], 2); /* the files alone: rank 0 only */
    t = report_of("gap.h5", 0);
    ck_assert_msg(strstr(t, "  - steps 4-5: 1 of 2 ranks present, missing rank 1\n"), "%s", t);
    ck_assert_msg(strstr(t, "the first and the last complete step (0, 5) hold different ranks "
                            "(2 and 1 present)"), "%s", t);
    ck_assert_msg(strstr(t, "  not the same ranks: 2 of 2 merged at the first step, 1 at the "
                            "last (see Ranks)\n"), "%s", t);
    resdiag_free(t);
    t = report_of("gap.h5", 1);
    ck_assert_msg(strstr(t, "\"compared_steps_same_ranks\": false"), "%s", t);
    resdiag_free(t);
    resdiag_reader *rd = open_ok(run_path("gap.h5"));
    resdiag_analysis *an = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &an), RESDIAG_OK);
    t = resdiag_analysis_to_html(an, NULL);
    ck_assert_msg(t && strstr(t, "steps 4-5: 1 of 2 ranks present, missing rank 1"), "%s", t);
    resdiag_free(t);
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
    remove_job("gap.h5", 2);
}
END_TEST

static const check_program program = {
    .name = "ranks",
    .timeout = 120,
    .scratch = dir,
    .scratch_size = sizeof dir,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_TEST(files_without_rank_attributes_are_one_process),
           CHECK_TEST(data_split_merges_to_the_whole_run),
           CHECK_TEST(tensor_shards_merge_where_exact),
           CHECK_TEST(pipeline_stages_join_by_layer),
           CHECK_TEST(missing_not_recorded_and_ended_early_ranks),
           CHECK_TEST(files_of_another_run_are_rejected_with_why),
           CHECK_TEST(a_damaged_chunk_rejects_its_rank),
           CHECK_TEST(a_chunk_damaged_after_open_rejects_its_rank_at_refresh),
           CHECK_TEST(open_rank_reads_one_file),
           CHECK_TEST(hostile_rank_attributes_are_refused),
           CHECK_TEST(a_huge_world_probes_names_only),
           CHECK_TEST(report_names_the_rank_whose_nan_came_first),
           CHECK_TEST(report_names_replicas_whose_gradients_differ),
           CHECK_TEST(report_of_a_tensor_split_says_what_is_per_shard),
           CHECK_TEST(report_says_which_steps_lack_a_rank))
