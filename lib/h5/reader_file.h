/*
 * reader_file.h - the reader of one run file, whatever its rank attributes
 * say (reader_open.c and the other reader_*.c): what the layers above it
 * in lib/h5 call, the rank merge (rank_files.c, merge.c) on each rank's
 * file and the public reader (reader.c). It knows nothing
 * of ranks or merging:
 *
 *     reader_*.c (one file)  <-  rank_files.c, merge.c  <-  reader.c
 *
 * Each rd_file_X answers the public call resdiag_reader_X (resdiag.h) for
 * one file, with the same arguments, checked and logged the same way,
 * except for NULL pointers, which the caller has ruled out; the outputs
 * that the public call sets before it checks anything (*observed 0,
 * *aborted 0, *same_as -1, out[0] '\0') are the caller's to set.
 */
#ifndef RESDIAG_H5_READER_FILE_H
#define RESDIAG_H5_READER_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "resdiag.h"

/* Opens the one file at path as resdiag_reader_open did before ranks: no
 * merging, whatever its rank attributes say. */
resdiag_status rd_file_open(resdiag_reader **out, const char *path);
/* A reader of path with no file open: what a merged reader is besides its
 * merge (reader.c); NULL when out of memory. rd_file_destroy frees it. */
resdiag_reader *rd_file_alloc(const char *path);
/* Closes the file and frees rd (not its merge); NULL is a no-op. */
void rd_file_destroy(resdiag_reader *rd);
resdiag_status rd_file_refresh(resdiag_reader *rd);

const resdiag_run_info *rd_file_info(const resdiag_reader *rd);
/* The trainer's number of the last recorded step, -1 when none. */
int64_t rd_file_last_step(const resdiag_reader *rd);
/* The path the reader was opened with. */
const char *rd_file_path(const resdiag_reader *rd);

resdiag_status rd_file_steps(const resdiag_reader *rd, int64_t *out, int64_t n);
resdiag_status rd_file_site(const resdiag_reader *rd, int64_t step_index, resdiag_direction dir,
                            int layer, int sublayer, resdiag_site site, double *out,
                            int *observed);
resdiag_status rd_file_sketch(const resdiag_reader *rd, int64_t step_index,
                              resdiag_direction dir, int layer, int sublayer, resdiag_site site,
                              double *out);
resdiag_status rd_file_param(const resdiag_reader *rd, int64_t step_index, int layer,
                             const char *name, double *out, int *observed);
resdiag_status rd_file_update(const resdiag_reader *rd, int64_t step_index, int layer,
                              int sublayer, double *out);
resdiag_status rd_file_metric(const resdiag_reader *rd, int metric, int64_t first, int64_t n,
                              double *out);
resdiag_status rd_file_step_aborted(const resdiag_reader *rd, int64_t step_index, int *aborted);
/* out_len >= 1. */
resdiag_status rd_file_abort_reason(const resdiag_reader *rd, int64_t step_index, char *out,
                                    size_t out_len);
resdiag_status rd_file_alias(const resdiag_reader *rd, int64_t step_index, resdiag_direction dir,
                             int layer, int sublayer, resdiag_site site, int *same_as);
const char *rd_file_callsite(const resdiag_reader *rd, resdiag_direction dir, int layer,
                             int sublayer, resdiag_site site);
resdiag_status rd_file_series(const resdiag_reader *rd, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site, resdiag_field field, double *out,
                              int64_t n);

/* The generic dataset API (reader_datasets.c). */
int rd_file_n_datasets(const resdiag_reader *rd);
const char *rd_file_dataset_name(const resdiag_reader *rd, int i);
resdiag_status rd_file_dims(const resdiag_reader *rd, const char *name, int64_t *dims,
                            int max_rank, int *rank);
resdiag_status rd_file_read(const resdiag_reader *rd, const char *name, int64_t first,
                            int64_t count, double *out, size_t out_len);

#endif
