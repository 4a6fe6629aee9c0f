/*
 * reader.h - what the public reader (reader.c) gives the
 * analysis and the tool's dump beyond the public API, for any reader,
 * merged or not: cursors over the stretches of a time series that hold
 * stored data (reader_stored.h), so that going over every step costs what
 * the file holds and not what it declares, and the reader of each rank's
 * own file behind a merged reader.
 */
#ifndef RESDIAG_H5_READER_H
#define RESDIAG_H5_READER_H

#include "h5/reader_stored.h"
#include "resdiag.h"

struct rd_merge;

/* A cursor over time series `name` of rd (absent: never stored); a
 * merged reader's counts as stored everywhere (each read asks the ranks). */
void rd_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name);

/* The reader of rank r's own file behind rd (a merged reader: that merged
 * rank's reader, NULL when rank r was not merged; a reader of one file:
 * rd itself for r == 0, else NULL). Owned by rd. */
const resdiag_reader *rd_reader_rank_reader(const resdiag_reader *rd, int r);

/* rd's merge (merge.h), NULL for a reader of one file. */
const struct rd_merge *rd_reader_merge(const resdiag_reader *rd);

#endif
