/*
 * reader.h - what the reader (reader.c) gives the analysis beyond
 * the public API (the analysis, and the tool's dump): which stretches of a
 * time series hold stored data, so that going over every step costs what
 * the file holds and not what it declares (an unstored stretch reads as
 * NaN: nothing was observed there).
 */
#ifndef RESDIAG_H5_READER_H
#define RESDIAG_H5_READER_H

#include <stdint.h>

#include "resdiag.h"

/* *n_chunks: the chunks of time series `name` stored in the file, over its
 * whole extent; -1 when it is not chunked. RESDIAG_OK, or the status of a
 * bad name or an HDF5 failure (logged). */
resdiag_status rd_reader_chunks(const resdiag_reader *rd, const char *name, int64_t *n_chunks);

/* For time series `name` at recorded step step_index: *n_stored the stored
 * chunks of the row of chunks that holds the step (0: every value of
 * those steps is the fill value), *row_end the step index where that row
 * ends (at most n_steps). A dataset that is not chunked counts as one
 * stored chunk over all steps. RESDIAG_OK, or the status of a bad name or
 * step index (logged). */
resdiag_status rd_reader_stored(const resdiag_reader *rd, const char *name, int64_t step_index,
                                int *n_stored, int64_t *row_end);

/* Where a time series holds stored data, asked step by step in increasing
 * order: each row of chunks is looked up once, and once every stored chunk
 * of the dataset has been met (the file says how many there are), the
 * rest reads as NaN without looking. */
typedef struct rd_stored_cursor {
    const char *name;
    int present;     /* the run file has the dataset */
    int64_t left;    /* stored chunks not met yet; -1: counts as stored everywhere */
    int64_t row_end; /* the row of chunks looked up last ends here */
    int stored;      /* ... and holds stored data */
} rd_stored_cursor;

/* A cursor over time series `name` (absent: never stored). */
void rd_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name);

/* 1 when step si (not smaller than at the call before) may hold stored
 * data; 0 when it does not, with *next the first step that may (INT64_MAX:
 * none). */
int rd_stored_at(const resdiag_reader *rd, rd_stored_cursor *c, int64_t si, int64_t *next);

/* Opens the one file at path as resdiag_reader_open did before ranks: no
 * merging, whatever its rank attributes say. */
resdiag_status rd_reader_open_file(resdiag_reader **out, const char *path);

/* The reader of rank r's own file behind rd (a merged reader: that merged
 * rank's reader, NULL when rank r was not merged; a reader of one file:
 * rd itself for r == 0, else NULL). Owned by rd. */
const resdiag_reader *rd_reader_rank_reader(const resdiag_reader *rd, int r);

/* The trainer's number of the last recorded step, -1 when none. */
int64_t rd_reader_last_step(const resdiag_reader *rd);
/* The path the reader was opened with. */
const char *rd_reader_path(const resdiag_reader *rd);

#endif
