/*
 * rank-runs.h - the run files of a job of several ranks, made the way a
 * job makes them (unit/test-ranks.c, helpers/make-rank-runs.c): each rank
 * is written with the public API as that rank (the library names its
 * file and writes its rank attributes) and records its part of the same
 * tensors (rows for a data split, columns of the branch output for a
 * tensor split, layers for pipeline stages); rr_set_ranks then sets the
 * rank attributes with the HDF5 C API as the test wants them (another job
 * id, a stranger's values). The whole tensors, recorded by one process,
 * are the independent reference the merged reader must give back.
 *
 * The model: RR_L layers of two sublayers (attn, mlp), width RR_D,
 * pre-norm (stream_in -> RMSNorm -> branch -> add), RR_T tokens per step,
 * one per-layer parameter "mlp.w2" whose gradient every rank holds in
 * full (after the all-reduce, a data split's replicas are the same).
 */
#ifndef RD_RANK_RUNS_H
#define RD_RANK_RUNS_H

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "resdiag.h"

enum { RR_L = 4, RR_D = 8, RR_T = 16, RR_K = 8, RR_SEED = 91 };

/* What one rank records of the job. */
typedef struct rr_part {
    int rows_lo, rows_hi;   /* its tokens of the RR_T */
    int cols_lo, cols_hi;   /* its columns of the branch output (0, RR_D: all) */
    int layer_lo, layer_hi; /* the layers it holds */
    int n_steps;            /* steps 0 .. n_steps-1 */
    int nan_step, nan_layer;/* a NaN in its mlp branch output from nan_step on; -1: none */
    int d_model;            /* RR_D, or another model (a file of another run) */
    double grad_scale;      /* its gradients times this (1: the replicas agree) */
    int deflated;           /* 1: schema 2, its large tables deflated; 0: schema 1 */
    int gap_step;           /* a step it does not record; 0: none (step 0 always is) */
} rr_part;

static inline rr_part rr_whole(int n_steps)
{
    rr_part p = { 0, RR_T, 0, RR_D, 0, RR_L, n_steps, -1, -1, RR_D, 1.0, 0, 0 };
    return p;
}

/* Rows lo..hi-1 of every step in a schema 2 file, whose large tables are
 * deflated (one chunk a step: what a test of damaged chunks needs). */
static inline rr_part rr_deflated_rows(int lo, int hi, int n_steps)
{
    rr_part p = rr_whole(n_steps);
    p.rows_lo = lo;
    p.rows_hi = hi;
    p.deflated = 1;
    return p;
}

/* Deterministic values in [-2, 2]. */
static inline double rr_value(unsigned a, unsigned b)
{
    unsigned h = a * 2654435761u ^ b * 40503u ^ 0x9e3779b9u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return (double)((int)(h % 4001u) - 2000) / 1000.0;
}

/* Observes rows lo..hi-1, columns c0..c1-1 of x (RR_T, RR_D). */
static inline int rr_observe(resdiag *r, resdiag_direction dir, int layer, int sub,
                             resdiag_site site, const double *x, const rr_part *p, int c0,
                             int c1)
{
    double buf[RR_T * RR_D];
    int rows = p->rows_hi - p->rows_lo, cols = c1 - c0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            buf[i * cols + j] = x[(p->rows_lo + i) * RR_D + c0 + j];
    return resdiag_observe_at(r, dir, layer, sub, site, resdiag_f64(buf, rows, cols), "rr.c",
                              100 + site) == RESDIAG_OK ? 0 : -1;
}

/* One sublayer of one step: x in (RR_T, RR_D) becomes x + f. */
static inline int rr_sublayer(resdiag *r, const rr_part *p, int step, int l, int s, double *x)
{
    double no[RR_T * RR_D], f[RR_T * RR_D], y[RR_T * RR_D];
    for (int i = 0; i < RR_T; i++) {
        double ss = 0;
        for (int j = 0; j < RR_D; j++)
            ss += x[i * RR_D + j] * x[i * RR_D + j];
        double inv = 1.0 / sqrt(ss / RR_D + 1e-6);
        for (int j = 0; j < RR_D; j++) {
            int k = i * RR_D + j;
            no[k] = x[k] * inv;
            f[k] = 0.4 * no[k] * (1.0 + 0.5 * rr_value(l * 7 + s, j)) + 0.1 * rr_value(step, k);
            y[k] = x[k] + f[k];
        }
    }
    int holds = l >= p->layer_lo && l < p->layer_hi;
    if (holds && s == 1 && p->nan_step >= 0 && step >= p->nan_step && l == p->nan_layer)
        f[(p->rows_lo) * RR_D + p->cols_lo] = NAN;
    int rc = 0;
    if (holds) {
        rc |= rr_observe(r, RESDIAG_FORWARD, l, s, RESDIAG_STREAM_IN, x, p, 0, RR_D);
        rc |= rr_observe(r, RESDIAG_FORWARD, l, s, RESDIAG_NORM_IN, x, p, 0, RR_D);
        rc |= rr_observe(r, RESDIAG_FORWARD, l, s, RESDIAG_NORM_OUT, no, p, 0, RR_D);
        rc |= rr_observe(r, RESDIAG_FORWARD, l, s, RESDIAG_BRANCH_OUT, f, p, p->cols_lo,
                         p->cols_hi);
        rc |= rr_observe(r, RESDIAG_FORWARD, l, s, RESDIAG_STREAM_OUT, y, p, 0, RR_D);
    }
    memcpy(x, y, sizeof y);
    return rc;
}

/* The gradient of mlp.w2 of layer l: (RR_D, RR_D), the same on every rank
 * of a data split; a tensor split's rank holds its columns cols_lo.. */
static inline int rr_grad(resdiag *r, const rr_part *p, int step, int l)
{
    double g[RR_D * RR_D];
    int cols = p->cols_hi - p->cols_lo;
    for (int i = 0; i < RR_D; i++)
        for (int j = 0; j < cols; j++)
            g[i * cols + j] = 0.01 * rr_value(1000 + step * 31 + l, i * RR_D + p->cols_lo + j)
                              / (1.0 + l) * p->grad_scale;
    return resdiag_param_grad_at(r, l, "mlp.w2", resdiag_f64(g, RR_D, cols), "rr.c", 200)
               == RESDIAG_OK ? 0 : -1;
}

typedef struct rr_ranks rr_ranks;
static inline int rr_write_as(const char *path, const rr_part *p, int shard_cols,
                              const rr_ranks *k);

/* Writes part p of the job to path as a run of one process. 0, or -1. */
static inline int rr_write(const char *path, const rr_part *p, int shard_cols)
{
    return rr_write_as(path, p, shard_cols, NULL);
}

/* The rank attributes of doc/RANKS.md, as the writer of a rank writes them. */
struct rr_ranks {
    int rank, world_size;
    const char *split;      /* "data", "sequence", "tensor", "pipeline" */
    int shard_col_offset, layer_first, layer_count, record_rank_every;
    const char *job_id;
};

static inline resdiag_split rr_split(const char *name)
{
    static const char *const names[] = { "none", "data", "sequence", "tensor", "pipeline" };
    for (int i = 0; i < 5; i++)
        if (strcmp(names[i], name) == 0)
            return (resdiag_split)i;
    return RESDIAG_SPLIT_DATA;
}

/* Opens part p at path for writing: a run of one process (k NULL), or
 * rank k->rank of a job, which the library names (resdiag_rank_path) and
 * marks with the rank attributes itself. NULL on failure. */
static inline resdiag *rr_open_as(const char *path, const rr_part *p, int shard_cols,
                                  const rr_ranks *k)
{
    static const char *const subs[2] = { "attn", "mlp" };
    static const char *const params[1] = { "mlp.w2" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = RR_L, .cols = p->d_model,
        .sublayers = 2, .sublayer_names = subs, .layer_params = 1,
        .layer_param_names = params });
    m.shard_cols = shard_cols;
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    m.rank = k ? k->rank : 0; /* given, whatever the environment says */
    m.world_size = k ? k->world_size : 1;
    m.split = k ? rr_split(k->split) : RESDIAG_SPLIT_NONE;
    m.shard_col_offset = k ? k->shard_col_offset : 0;
    m.layer_first = k ? k->layer_first : 0;
    m.layer_count = k ? k->layer_count : 0;
    resdiag_options o;
    resdiag_options_init(&o);
    /* merged against whole to the double: schema 1 keeps them as computed */
    o.file_schema = p->deflated ? 2 : 1;
    o.sketch_size = RR_K;
    o.sketch_seed = RR_SEED;
    o.record_rank_every = k && k->record_rank_every ? k->record_rank_every : 1;
    resdiag *r = NULL;
    return resdiag_open(&r, path, &m, &o) == RESDIAG_OK ? r : NULL;
}

/* Records step `step` of part p. 0, or -1. */
static inline int rr_step(resdiag *r, const rr_part *p, int step)
{
    double x[RR_T * RR_D];
    for (int k = 0; k < RR_T * RR_D; k++)
        x[k] = rr_value(step + 1, k);
    int rc = resdiag_step_begin(r, step) != RESDIAG_OK;
    for (int l = 0; l < RR_L; l++)
        for (int s = 0; s < 2; s++)
            rc |= rr_sublayer(r, p, step, l, s, x);
    for (int l = p->layer_lo; l < p->layer_hi; l++)
        rc |= rr_grad(r, p, step, l);
    rc |= resdiag_step_end(r) != RESDIAG_OK;
    return rc ? -1 : 0;
}

/* Writes part p to path as rr_open_as opens it, every step. 0, or -1. */
static inline int rr_write_as(const char *path, const rr_part *p, int shard_cols,
                              const rr_ranks *k)
{
    resdiag *r = rr_open_as(path, p, shard_cols, k);
    if (!r)
        return -1;
    int rc = 0;
    for (int step = 0; step < p->n_steps && rc == 0; step++)
        if (step == 0 || step != p->gap_step)
            rc = rr_step(r, p, step);
    rc |= resdiag_close(r) != RESDIAG_OK;
    resdiag_destroy(r);
    return rc ? -1 : 0;
}

/* Replaces root attribute name of file f by a scalar of file_type, written
 * from *v of mem_type. */
static inline int rr_put(hid_t f, const char *name, hid_t file_type, hid_t mem_type,
                         const void *v)
{
    if (H5Aexists(f, name) > 0 && H5Adelete(f, name) < 0)
        return -1;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, mem_type, v) >= 0 ? 0 : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* ... by an int64 (or a UTF-8 string). */
static inline int rr_put_int(hid_t f, const char *name, long long v)
{
    return rr_put(f, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &v);
}

static inline int rr_put_str(hid_t f, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = rr_put(f, name, t, t, &v);
    H5Tclose(t);
    return rc;
}

static inline int rr_set_ranks(const char *path, const rr_ranks *k)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int rc = rr_put_int(f, "rank", k->rank) | rr_put_int(f, "world_size", k->world_size)
             | rr_put_int(f, "local_rank", k->rank) | rr_put_str(f, "rank_source", "explicit")
             | rr_put_str(f, "split", k->split)
             | rr_put_int(f, "shard_col_offset", k->shard_col_offset)
             | rr_put_int(f, "layer_first", k->layer_first)
             | rr_put_int(f, "layer_count", k->layer_count)
             | rr_put_int(f, "record_rank_every", k->record_rank_every ? k->record_rank_every : 1)
             | rr_put_str(f, "job_id", k->job_id ? k->job_id : "");
    return (H5Fclose(f) < 0 ? -1 : 0) | rc;
}

/* Removes every rank attribute from the root: a file as resdiag wrote it
 * before ranks existed. */
static inline int rr_drop_ranks(const char *path)
{
    static const char *const names[] = { "rank", "world_size", "local_rank", "rank_source",
                                         "split", "shard_col_offset", "layer_first",
                                         "layer_count", "record_rank_every", "job_id" };
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (H5Aexists(f, names[i]) > 0 && H5Adelete(f, names[i]) < 0)
            rc = -1;
    return (H5Fclose(f) < 0 ? -1 : 0) | rc;
}

/* Writes rank k->rank of the job at path with the library (which names
 * its file, resdiag_rank_path, and sets its rank attributes), then sets
 * them again as k says, for the job id (the writer takes it from the
 * launcher's environment). */
static inline int rr_write_rank(const char *path, const rr_part *p, int shard_cols,
                                const rr_ranks *k)
{
    char name[1024];
    if (resdiag_rank_path(name, sizeof name, path, k->rank) != RESDIAG_OK)
        return -1;
    return rr_write_as(path, p, shard_cols, k) == 0 && rr_set_ranks(name, k) == 0 ? 0 : -1;
}

#endif
