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
    int64_t row0;        /* the tensor's first row is row row0 of the sketch: its rows get
                            the signs sigma(row0), sigma(row0 + 1), ... (0 for a whole
                            tensor; the rows seen before, for a later part of one) */
    int64_t col0;        /* >= 0: the tensor's column j is column col0 + j of a wider one
                            (a tensor-parallel shard): it goes to bucket (col0 + j) mod K
                            with sign tau((col0 + j) mod tau_len), and ABSMAX_COL is
                            col0 + its column, so shards' sketches add up to the whole
                            tensor's. 0 for a whole tensor. When col0 mod tau_len != 0,
                            tau must hold 2 * tau_len entries: the table twice. */
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
 * Sums are in double, except that the vector paths sum f32, f16 and bf16
 * rows in float lanes over blocks of columns and in double across blocks
 * (each row sum within ~1.4e-6 of the sum of its |terms|; see
 * lib/stats/simd_kernels.h); rows whose sum of squares overflows or underflows
 * (f64 input beyond ~1e154 or below ~1e-154) are rescanned with scaling, and
 * rows holding NaN or Inf are rescanned to leave those values out and count
 * them (those values count as 0 in the sketch), so the common path is a
 * single streaming read. A field is +Inf only where its value exceeds the
 * double range (FROB and the token norms of f64 data near DBL_MAX; their
 * moments are then those of the RMS times sqrt(cols)); the sketch is not
 * scaled (Inf or NaN where its sums overflow). */
void rd_stats_compute(double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp);

/* Kernel paths. rd_stats_compute uses the best path the CPU has (checked
 * once, thread-safe), or the portable one when the environment variable
 * RESDIAG_FORCE_PORTABLE is set to a value other than "" or "0" when the
 * first tensor is computed, or the best path but AVX-512 (AVX2 where the
 * CPU has it, as on CPUs without AVX-512) when RESDIAG_DISABLE_AVX512 is
 * so set. All paths give the same results within
 * rounding: double rounding for f64 (they differ only in the order of
 * additions within a row), float rounding of the row sums for f32, f16
 * and bf16 on the vector paths; the exact quantities (counts, ABSMAX,
 * ABSMAX_COL, shape) are identical. */
typedef enum rd_stats_path {
    RD_STATS_PORTABLE = 0, /* plain C, any CPU */
    RD_STATS_AVX2 = 1,     /* AVX2 + FMA + F16C */
    RD_STATS_AVX512 = 2,   /* AVX-512F, DQ and BW (+ the above); bf16 rows by
                              vdpbf16ps where the CPU has AVX512-BF16 and BW
                              (the same bound; see lib/stats/stats_avx512.c) */
    RD_STATS_N_PATHS = 3
} rd_stats_path;

/* 1 if the path is compiled in and this CPU can run it. */
int rd_stats_path_available(rd_stats_path path);
/* "portable", "avx2", "avx512"; "?" otherwise. Static storage. */
const char *rd_stats_path_name(rd_stats_path path);
/* The path rd_stats_compute uses now. */
rd_stats_path rd_stats_active_path(void);
/* The path chosen on first use when RESDIAG_FORCE_PORTABLE has the value
 * force_portable and RESDIAG_DISABLE_AVX512 the value disable_avx512 (NULL:
 * unset; a switch is on when set and not "" or "0"): the portable one if
 * force_portable is on, else the best available, leaving out AVX-512 if
 * disable_avx512 is on. */
rd_stats_path rd_stats_pick_path(const char *force_portable, const char *disable_avx512);
/* Makes rd_stats_compute use path from now on (tests, benchmarks). Returns
 * 0, or -1 (and changes nothing) if the path is not available. Atomic, but
 * hooks running at the same time may use either path. */
int rd_stats_set_path(rd_stats_path path);

/* rd_stats_compute with an explicit path; an unavailable path falls back
 * to the portable one. */
void rd_stats_compute_path(rd_stats_path path, double *fields, double *sketch,
                           double *row_norms, const resdiag_tensor *t,
                           const rd_sketch_params *sp);

/* rd_stats_compute, optionally on several threads for large tensors
 * (lib/stats/split.c): with threads >= 2 and at least 1 MiB of data, the
 * rows split into P = min(threads, rows) fixed parts (part k from row
 * k * rows / P), computed at once by this thread and threads - 1 others
 * and merged in row order (Chan et al.'s pairwise update for the
 * moments), so the result is deterministic: always the same bits for the
 * same input and threads, whichever thread computed which part, within
 * rounding of the one-thread result, with the same exact quantities.
 * Starts (and joins) the threads for this call, for tests and benchmarks;
 * a run keeps one pool for all its hooks (split.h). Parts whose thread
 * cannot start are computed by this thread, with the same result.
 * threads <= 1 is rd_stats_compute. */
void rd_stats_compute_split(int threads, double *fields, double *sketch, double *row_norms,
                            const resdiag_tensor *t, const rd_sketch_params *sp);

/* Merges the statistics of two parts of one tensor into *fields, as if
 * rd_stats_compute had seen the rows of `fields` followed by those of
 * `more` (computed with sp->row0 = the first part's rows, so that the
 * sketches add up to the whole tensor's): counts and sums add, extremes
 * and ABSMAX (the first part wins ties) merge, the means and standard
 * deviations over tokens combine by Chan et al.'s pairwise update, within
 * rounding of one call over all the rows. Both parts must have the same
 * COLS. sketch and more_sketch (k) may be NULL when k == 0. CALL_SEQ is
 * left untouched. */
void rd_stats_merge(double *fields, double *sketch, const double *more,
                    const double *more_sketch, int k);

/* f16 and bf16 to float, exact. */
float rd_f16_to_f32(uint16_t h);
float rd_bf16_to_f32(uint16_t b);

#endif
