/*
 * make-rank-runs.c - the jobs of several ranks that tool/test-ranks.sh
 * reports on, made as helpers/rank-runs.h makes them, in DIR:
 *   nan.h5      2 ranks, data split: rank 1's NaN (step 3, layer 2, mlp)
 *               comes before rank 0's (step 4, layer 0)
 *   early.h5    3 ranks: rank 1 ended after step 2, rank 2 has no file
 *   rejected.h5 2 ranks: rank 1's file is of another job
 *   pipeline.h5 2 stages: layers 0..1 and 2..3
 *   tensor.h5   2 ranks, each a column shard of the branch outputs
 *   damaged.h5  3 ranks: rank 1's file has a damaged deflated chunk at step 1
 *               of /forward/site_stats (step 0 is whole)
 *   damaged-ref.h5 the same job without rank 1's file: what damaged.h5 merges
 *   damaged0.h5 2 ranks: rank 0's own file has that damaged chunk
 *   world-1e9.h5, rank-string.h5, rank-negative.h5: rank 0's files whose
 *               rank attributes a stranger set (world_size 10^9, a rank
 *               that is a string, a negative rank)
 * Usage: make-rank-runs DIR
 */
#include <stdio.h>
#include <stdlib.h>

#include "damage-chunk.h"
#include "rank-runs.h"

static char dir[900];

static const char *at(const char *name)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static rr_part rows(int lo, int hi, int n_steps)
{
    rr_part p = rr_whole(n_steps);
    p.rows_lo = lo;
    p.rows_hi = hi;
    return p;
}

static int job(const char *name, rr_part *parts, int n, int world, const char *job_id1)
{
    for (int r = 0; r < n; r++) {
        rr_ranks k = { r, world, "data", 0, 0, 0, 1, r == 1 && job_id1 ? job_id1 : "job-1" };
        if (parts[r].n_steps > 0 && rr_write_rank(at(name), &parts[r], 0, &k) != 0)
            return -1;
    }
    return 0;
}

/* Two ranks split by layers (pipeline) or by the branch output's columns. */
static int split_job(const char *name, const char *split)
{
    int pipeline = split[0] == 'p';
    for (int r = 0; r < 2; r++) {
        rr_part p = rr_whole(3);
        rr_ranks k = { r, 2, split, 0, 0, 0, 1, "" };
        if (pipeline) {
            p.layer_lo = r ? RR_L / 2 : 0;
            p.layer_hi = r ? RR_L : RR_L / 2;
            k.layer_first = p.layer_lo;
            k.layer_count = p.layer_hi - p.layer_lo;
        } else {
            p.cols_lo = r ? RR_D / 2 : 0;
            p.cols_hi = r ? RR_D : RR_D / 2;
            k.shard_col_offset = p.cols_lo;
        }
        if (rr_write_rank(at(name), &p, pipeline ? 0 : RR_D / 2, &k) != 0)
            return -1;
    }
    return 0;
}

/* Damages the chunk of step 1 of /forward/site_stats in rank r's file of job name. */
static int damage(const char *name, int r)
{
    char path[1024];
    return resdiag_rank_path(path, sizeof path, at(name), r) == RESDIAG_OK
               && dc_damage_chunk(path, "/forward/site_stats", 1) == 0 ? 0 : -1;
}

static int hostile(const char *name, int as_string, long long rank, long long world)
{
    rr_part p = rr_whole(1);
    rr_ranks k = { 0, 2, "data", 0, 0, 0, 1, "" };
    if (rr_write(at(name), &p, 0) != 0 || rr_set_ranks(at(name), &k) != 0)
        return -1;
    hid_t f = H5Fopen(at(name), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int rc = as_string ? rr_put_str(f, "rank", "three") : rr_put_int(f, "rank", rank);
    rc |= rr_put_int(f, "world_size", world);
    return (H5Fclose(f) < 0) | rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-rank-runs DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    rr_part nan[2] = { rows(0, 8, 6), rows(8, RR_T, 6) };
    nan[0].nan_step = 4;
    nan[0].nan_layer = 0;
    nan[1].nan_step = 3;
    nan[1].nan_layer = 2;
    rr_part early[3] = { rows(0, 6, 5), rows(6, 11, 3), rows(11, RR_T, 0) };
    rr_part rej[2] = { rows(0, 8, 2), rows(8, RR_T, 2) };
    rr_part dmg[3] = { rr_deflated_rows(0, 6, 3), rr_deflated_rows(6, 11, 3),
                       rr_deflated_rows(11, RR_T, 3) };
    rr_part dmg_ref[3] = { dmg[0], rr_deflated_rows(6, 11, 0), dmg[2] };
    rr_part dmg0[2] = { rr_deflated_rows(0, 8, 3), rr_deflated_rows(8, RR_T, 3) };
    if (job("nan.h5", nan, 2, 2, NULL) || job("early.h5", early, 3, 3, NULL)
        || job("rejected.h5", rej, 2, 2, "job-2") || split_job("pipeline.h5", "pipeline")
        || split_job("tensor.h5", "tensor") || job("damaged.h5", dmg, 3, 3, NULL)
        || damage("damaged.h5", 1) || job("damaged-ref.h5", dmg_ref, 3, 3, NULL)
        || job("damaged0.h5", dmg0, 2, 2, NULL) || damage("damaged0.h5", 0)
        || hostile("world-1e9.h5", 0, 0, 1000000000LL)
        || hostile("rank-string.h5", 1, 0, 2) || hostile("rank-negative.h5", 0, -1, 2)) {
        fprintf(stderr, "make-rank-runs: cannot write the runs in %s\n", dir);
        return 1;
    }
    return 0;
}
