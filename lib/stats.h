/*
 * stats.h - one-pass statistics of a 2-D tensor (pure math, no I/O, no
 * allocation). One read of the tensor yields every RESDIAG_FIELD_* value
 * except CALL_SEQ, the linear sketch, and optionally each token's L2 norm.
 *
 * The sketch is a signed count-sketch: with a column sign tau(j) in {-1,+1}
 * from a table, a row sign sigma(i) = rd_row_sign(seed, i) and the bucket
 * j mod K,
 *     sketch[m] = sum_i sigma(i) * sum_{j : j mod K == m} tau(j mod tau_len) * x[i][j]
 * It is linear in x, so sketch(a + b) = sketch(a) + sketch(b) up to rounding,
 * and E[sum_m sketch[m]^2] = ||x||_F^2 as long as no two columns share both
 * bucket and sign index, i.e. cols <= lcm(K, tau_len) (the run makes tau_len
 * odd, so that is K * tau_len for the usual K).
 */
#ifndef RESDIAG_STATS_H
#define RESDIAG_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "resdiag.h"

typedef struct rd_sketch_params {
    int k;               /* sketch size K, 0..RESDIAG_MAX_SKETCH (0 = no sketch) */
    const float *tau;    /* (tau_len) column signs, each -1.0f or +1.0f */
    size_t tau_len;      /* >= 1 when k > 0; columns beyond it wrap around */
    uint64_t seed;       /* seed of the row signs */
} rd_sketch_params;

/* Row sign sigma(i) in {-1.0, +1.0}: a hash of (seed, row). */
double rd_row_sign(uint64_t seed, int64_t row);

/* Fills tau (n) with column signs derived from seed. */
void rd_fill_column_signs(float *tau, size_t n, uint64_t seed);

/* Computes the statistics of t in one pass.
 *   fields     (RESDIAG_N_FIELDS) out; CALL_SEQ is left untouched
 *   sketch     (sp->k) out, or NULL when sp->k == 0
 *   row_norms  (t->rows) out: each token's L2 norm over its finite values, or NULL
 * t must already be validated (known dtype, rows >= 0, cols >= 1,
 * data != NULL when rows > 0, row_stride 0 or >= cols).
 * Sums are in double; rows whose sum of squares overflows or underflows
 * (f64 input beyond ~1e154 or below ~1e-154) are rescanned with scaling, and
 * rows holding NaN or Inf are rescanned to leave those values out and count
 * them (those values count as 0 in the sketch), so the common path is a
 * single streaming read. */
void rd_stats_compute(double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp);

/* f16 and bf16 to float, exact. */
float rd_f16_to_f32(uint16_t h);
float rd_bf16_to_f32(uint16_t b);

#endif
