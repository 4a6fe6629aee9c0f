/*
 * reader_stored.h - which stretches of a time series hold stored data
 * (reader_stored.c), so that going over every step costs what the file
 * holds and not what it declares (an unstored stretch reads as NaN:
 * nothing was observed there). The analysis and the dump make their
 * cursors with rd_stored_init (reader.h), for any reader; the rank merge
 * with rd_file_stored_init, on one rank's file.
 */
#ifndef RESDIAG_H5_READER_STORED_H
#define RESDIAG_H5_READER_STORED_H

#include <stdint.h>

#include "resdiag.h"

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

/* A cursor over time series `name` that counts as stored at every step
 * when present (absent: never stored); it never looks at a file. */
void rd_stored_begin(rd_stored_cursor *c, const char *name, int present);

/* A cursor over time series `name` of the one file that rd reads. */
void rd_file_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name);

/* 1 when step si (not smaller than at the call before) may hold stored
 * data; 0 when it does not, with *next the first step that may (INT64_MAX:
 * none). rd is the reader the cursor was made for (not looked at by a
 * cursor of rd_stored_begin). */
int rd_stored_at(const resdiag_reader *rd, rd_stored_cursor *c, int64_t si, int64_t *next);

#endif
