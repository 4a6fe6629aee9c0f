/*
 * ranks.h - the ranks of a job read as one, as ranks.c analyses them
 * (a->ranks; doc/RANKS.md): what each rank with a file said alone, and
 * what the report says about them.
 */
#ifndef RESDIAG_ANALYSIS_RANKS_H
#define RESDIAG_ANALYSIS_RANKS_H

#include <stdint.h>

#include "analysis/warnings.h"
#include "resdiag.h"

#define RD_RANKS_LISTED 64 /* missing ranks listed by number (the rest counted) */
#define RD_RANKS_LINES 32  /* disagreement sentences kept (the rest counted) */
typedef struct rd_rank_row {
    int rank;
    resdiag_rank_state state;
    int64_t n_steps, last_step;
    char *why;    /* REJECTED: the reason */
    int verdict;  /* alone (resdiag_verdict); -1 not judged (a stage that
                                  holds not every layer, a rank without steps) */
    int nf_found; /* its own first non-finite value */
    int64_t nf_step;
    int nf_layer, nf_sub, nf_site, nf_param, nf_is_nan;
    char nf_model_param[RESDIAG_MAX_NAME]; /* the model parameter's name, there */
    resdiag_direction nf_dir;
} rd_rank_row;

typedef struct rd_ranks {
    int world_size, n_merged, n_rejected, n_missing, n_not_recorded;
    resdiag_split split;
    int n_rows;
    rd_rank_row *rows;            /* the ranks with a file, by rank */
    int missing[RD_RANKS_LISTED]; /* the first missing ranks (n_missing in all) */
    int64_t last_step;            /* the last step of the merged ranks */
    int first_nf_rank;            /* the rank whose first non-finite value came first, -1 */
    int n_lines, n_lines_all;
    char lines[RD_RANKS_LINES][RD_WARNING_LEN]; /* where ranks disagree, in words */
    int per_shard; /* a tensor split: the per-token spreads are per shard */
    /* which merged ranks' own files hold each merged step (a->load.steps) */
    int64_t n_steps;
    int *present;       /* (n_steps) how many merged ranks hold the step */
    unsigned char *has; /* (n_steps * n_rows) 1: row i's file holds step s */
    int64_t n_partial;  /* steps held by fewer than n_merged ranks */
    int compare_same;   /* 1: the first and last complete step hold the same ranks */
    int judged_whole;   /* 1: the analysed step holds every merged rank */
} rd_ranks;

#endif
