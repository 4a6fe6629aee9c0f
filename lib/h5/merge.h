/*
 * merge.h - the reader of a job of several ranks (doc/RANKS.md, "Reading
 * and merging"): rank_files.c finds rank 0's siblings, checks that each is
 * of the same run and classifies every rank; merge.c answers the reader's
 * calls from the merged ranks' own readers. The merge uses the reader of
 * one file (reader_file.h) for each rank's file, and the public reader
 * (reader.c) hands it every call on a merged reader; neither of those is
 * called back:
 *
 *     reader_*.c (one file)  <-  rank_files.c, merge.c  <-  reader.c
 */
#ifndef RESDIAG_H5_MERGE_H
#define RESDIAG_H5_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "format/tables.h"
#include "resdiag.h"

/* A rank with a file (rank 0 always): merged or rejected. Ranks without
 * one (missing, not recorded) have no entry: their state follows from
 * their number, so memory follows the files that are there. */
typedef struct rd_rank_entry {
    int rank;
    resdiag_rank_state state;
    char *path;
    char *why;               /* "" unless REJECTED */
    resdiag_reader *rd;      /* merged ranks: the file's own reader; else NULL */
    int64_t n_steps, last_step;
    int64_t *steps;          /* (n_steps) its step numbers */
} rd_rank_entry;

typedef struct rd_merge {
    int world_size, every;
    resdiag_split split;     /* as rank 0's file says; NONE reads as DATA */
    int n_entries;
    rd_rank_entry *entries;  /* by rank */
    int n_merged;
    rd_rank_entry **merged;  /* the merged entries, by rank (rank 0 first) */
    resdiag_run_info info;   /* rank 0's, with the merged n_steps and n_ranks_merged */
    rd_tables lay;
    int64_t *steps;          /* (info.n_steps) the sorted union of the ranks' steps */
    char **datasets;         /* the time series the merged view serves (no summary) */
    int n_datasets;
} rd_merge;

/* rank_files.c: *out the merge of the job whose rank 0 reader is rd0 (its
 * world_size > 1), which it takes over (freed with the merge, also on
 * failure). Ranks that cannot be merged are classified, not an error;
 * RESDIAG_E_NOMEM or an I/O error of rank 0 fail. */
resdiag_status rd_merge_open(rd_merge **out, resdiag_reader *rd0);
void rd_merge_free(rd_merge *m);
/* Re-reads every merged rank's steps (resdiag_reader_refresh). */
resdiag_status rd_merge_refresh(rd_merge *m);
/* The entry of rank r, NULL when it has no file. */
const rd_rank_entry *rd_merge_entry(const rd_merge *m, int r);
void rd_merge_rank_info(const rd_merge *m, int r, resdiag_rank_info *out);
/* The index of step number `step` in e's steps, -1 when e lacks it. */
int64_t rd_merge_rank_index(const rd_rank_entry *e, int64_t step);

/* merge.c: the fields a tensor split's column shard holds for its own
 * columns only (the per-token spreads): NaN in the merged view. */
#define RD_MERGE_N_PER_SHARD 9
extern const int rd_merge_per_shard_fields[RD_MERGE_N_PER_SHARD];

/* merge.c: the public reads of resdiag.h, on the merged view (same
 * arguments, checked the same way but for NULL pointers, which reader.c
 * has ruled out). */
resdiag_status rd_merge_steps(const rd_merge *m, int64_t *out, int64_t n);
resdiag_status rd_merge_site(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                             int sublayer, resdiag_site site, double *out, int *observed);
resdiag_status rd_merge_sketch(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, double *out);
resdiag_status rd_merge_param(const rd_merge *m, int64_t si, int layer, const char *name,
                              double *out, int *observed);
resdiag_status rd_merge_update(const rd_merge *m, int64_t si, int layer, int sublayer,
                               double *out);
resdiag_status rd_merge_metric(const rd_merge *m, int metric, int64_t first, int64_t n,
                               double *out);
/* The step status of merged step si: aborted when a rank that recorded it
 * aborted it; the reason (out, out_len; out may be NULL) the lowest such
 * rank's. */
resdiag_status rd_merge_step_status(const rd_merge *m, int64_t si, int *aborted, char *out,
                                    size_t out_len);
resdiag_status rd_merge_alias(const rd_merge *m, int64_t si, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site, int *same_as);
const char *rd_merge_callsite(const rd_merge *m, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site);
resdiag_status rd_merge_series(const rd_merge *m, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, resdiag_field field,
                               double *out, int64_t n);
int rd_merge_has_dataset(const rd_merge *m, const char *name);
resdiag_status rd_merge_dims(const rd_merge *m, const char *name, int64_t *dims, int max_rank,
                             int *rank);
resdiag_status rd_merge_read(const rd_merge *m, const char *name, int64_t first, int64_t count,
                             double *out, size_t out_len);

#endif
