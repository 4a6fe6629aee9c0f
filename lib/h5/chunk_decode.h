/*
 * chunk_decode.h - the steps of a filtered (shuffle + deflate) time series,
 * decoded by resdiag itself rather than by HDF5's filter pipeline, whose
 * deflate grows its output without limit: a chunk of a few hundred KB can
 * inflate to gigabytes there. Here each chunk inflates into exactly its
 * logical size or is refused (doc/FORMAT.md, "Reading files from others").
 */
#ifndef RESDIAG_H5_CHUNK_DECODE_H
#define RESDIAG_H5_CHUNK_DECODE_H

#include <hdf5.h>

#include "resdiag.h"

typedef struct rd_chunk_steps rd_chunk_steps;

/* A decoder of dataset ds (filters checked already: shuffle then deflate),
 * whose chunks must be what resdiag writes: one step each, and across
 * every other axis its full extent or one index of it. Anything else is
 * refused (logged, naming the dataset). path and name must outlive it. */
resdiag_status rd_chunk_steps_open(rd_chunk_steps **out, hid_t ds, const char *path,
                                   const char *name);
void rd_chunk_steps_free(rd_chunk_steps *c);
/* The dataset's axes, the step axis included. */
int rd_chunk_steps_axes(const rd_chunk_steps *c);
/* Forgets the step it keeps decoded (a SWMR refresh may have written it). */
void rd_chunk_steps_forget(rd_chunk_steps *c);

/* The block of step `step` with start/count over the axes after the step
 * axis, as mtype (a native type) into out, laid out as count. The step is
 * decoded once and kept until another step (or mtype) is read. */
resdiag_status rd_chunk_steps_read(rd_chunk_steps *c, hid_t mtype, hsize_t step,
                                   const hsize_t *start, const hsize_t *count, void *out);

#endif
