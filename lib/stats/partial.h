/*
 * partial.h - the public partial statistics of a tensor (resdiag_partial,
 * doc/PARTIAL.md): the library's kernels compute them (the reference), and
 * statistics computed elsewhere become the recorded fields and sketch
 * through the same derivation the kernels' own results go through.
 */
#ifndef RESDIAG_STATS_PARTIAL_H
#define RESDIAG_STATS_PARTIAL_H

#include <stddef.h>

#include "resdiag.h"
#include "stats/stats.h"

/* The partial statistics of t (validated as for rd_stats_compute) on the
 * active kernel path, with sp's sketch layout and row signs from sp->row0
 * on; ratio_sum 0, ratio_rows -1, sketch members past sp->k 0. row_norms
 * (t->rows) or NULL receives each token's L2 norm. */
void rd_stats_partial(resdiag_partial *out, double *row_norms, const resdiag_tensor *t,
                      const rd_sketch_params *sp);

/* The recorded fields (CALL_SEQ untouched) and sketch (k, or NULL when
 * k == 0) of a consistent partial (rd_partial_check). */
void rd_partial_fields(double *fields, double *sketch, const resdiag_partial *p, int k);

/* NULL when the members of p are consistent with each other, else the
 * name of the first member that is not, with what is wrong with it in why
 * (len bytes, "rows is 2.5: ..."). The width against the model is the
 * caller's check. */
const char *rd_partial_check(const resdiag_partial *p, char *why, size_t len);

#endif
