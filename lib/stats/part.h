/*
 * part.h - the statistics of a run of consecutive rows of one tensor, kept
 * as the running sums from which two runs combine exactly as one run over
 * both would (within rounding). lib/stats/stats.c computes and combines
 * them; lib/stats/split.c hands parts of a large tensor to other
 * threads with them; lib/stats/partial.c gives them out as the public
 * resdiag_partial. Internal to lib/stats.
 */
#ifndef RESDIAG_STATS_PART_H
#define RESDIAG_STATS_PART_H

#include <stddef.h>
#include <stdint.h>

#include "stats/stats.h"

/* Opaque storage for stats.c's running sums (it checks at compile time that
 * they fit); plain data, copied by value. */
typedef struct rd_stats_part {
    double opaque[128];
} rd_stats_part;

/* Rows [r0, r1) of t (0 <= r0 <= r1 <= t->rows) into *part on the kernel
 * path `path` (an available one: rd_stats_active_path()). row_norms (t->rows)
 * or NULL: rows r0..r1-1 of it are written. t and sp as for
 * rd_stats_compute, with sp->row0 the sign index of t's row 0 (not r0). */
void rd_stats_part_rows(rd_stats_part *part, rd_stats_path path, double *row_norms,
                        const resdiag_tensor *t, const rd_sketch_params *sp, int64_t r0,
                        int64_t r1);

/* The fields (CALL_SEQ untouched) and sketch (sp->k, or NULL when k == 0) of
 * the whole of t from its rows [0, h) in *first followed by its rows
 * [h, t->rows) in *second; second is NULL when *first holds every row. */
void rd_stats_part_fields(double *fields, double *sketch, const rd_stats_part *first,
                          const rd_stats_part *second, const resdiag_tensor *t,
                          const rd_sketch_params *sp);

/* *a = the rows of *a followed by those of *b (b's rows come right after
 * a's in t), within rounding of one part over both; the same bits for the
 * same two parts. sp as for rd_stats_part_fields (only its k is used). */
void rd_stats_part_merge(rd_stats_part *a, const rd_stats_part *b, const rd_sketch_params *sp);

/* The public partial statistics (resdiag.h, doc/PARTIAL.md) of the whole
 * of t from its rows in *part (every row of t, as rd_stats_part_rows(...,
 * 0, t->rows) gives them): the sums of squares as plain values, the
 * sketch's members past sp->k 0, ratio_sum 0 and ratio_rows -1. */
void rd_stats_part_public(resdiag_partial *out, const rd_stats_part *part,
                          const resdiag_tensor *t, const rd_sketch_params *sp);

/* Bytes of one element of dtype (a known one). */
size_t rd_stats_dtype_size(resdiag_dtype dtype);

#endif
