/*
 * stats_impl.h - what lib/stats/stats.c shares with its vector kernels
 * (lib/stats/stats_avx2.c and stats_avx512.c, one file per instruction
 * set). Not API, not part of the stats contract: the contract is
 * lib/stats/stats.h.
 *
 * A "fast row" kernel reads one row once, trusting it to be finite and in
 * range, and returns its sums; stats.c checks them, rescans the rare rows
 * that need it with its careful scalar loop, and combines rows. So every
 * path shares the rare-row handling, the per-token formulas and the
 * combination over tokens, and differs only in the order of the additions
 * inside a row.
 */
#ifndef RESDIAG_STATS_IMPL_H
#define RESDIAG_STATS_IMPL_H

#include <stdint.h>

#include "stats/stats.h"

/* Sums of one row, in units of 2^e. Shifting by the row's first value y0
 * before squaring keeps std_i accurate when |mean_i| >> std_i (and exactly
 * 0 for a constant row). */
typedef struct rd_row_sums {
    int e;            /* scale exponent: values below are x * 2^-e */
    double y0;        /* shift: first value of the row (0 if non-finite) */
    double sd, sd2;   /* sum (y - y0), sum (y - y0)^2 */
    double sq;        /* sum y^2 */
    double amax;      /* largest finite |x| (unscaled); -1 if none */
    int64_t amax_col; /* its first column, -1 if not located (fast path) */
    int64_t nan, inf;
} rd_row_sums;

/* One read of a row (cols) of dtype, assuming finite values: fills rs with
 * e = 0, y0 = x[0], amax_col = -1, nan = inf = 0, and adds the row's sketch
 * buckets tau(j mod tau_len) * x[j] into rb[j mod K] (rb (K), zeroed by the
 * caller; untouched when sp->k == 0). rs->amax is the row's largest |x|, or
 * -1 when that is not above amax_floor (a kernel may skip reducing it then;
 * the caller only wants to know whether the row raises ABSMAX). With acc
 * not NULL a kernel may instead add sigma * the buckets straight into acc
 * (K), the tensor's sketch, for a row whose sums are finite (so that the
 * caller does not rescan it). Returns 0 without reading anything if the
 * kernel does not handle this sketch size (the caller then uses the
 * portable kernel), 1 when the buckets are in rb, 2 when they went into
 * acc. */
typedef int (*rd_fast_row_fn)(rd_row_sums *rs, double *rb /* (K) */, const void *row,
                              resdiag_dtype dtype, int64_t cols, const rd_sketch_params *sp,
                              double amax_floor, double *acc /* (K) */, double sigma);

/* Up to RD_ROWS_MAX rows at once: what a fast-row kernel gives for each,
 * with the horizontal reductions of all the rows done together (at 768
 * columns they cost as much as the row's loop). Out of the call: */
#define RD_ROWS_MAX 16
typedef struct rd_rows_out {
    double sx[RD_ROWS_MAX], sq[RD_ROWS_MAX]; /* sum x, sum x^2 of each row */
    uint32_t redo;    /* bit r set: row r needs the one-row path (its sketch is not in acc) */
    double amax;      /* largest |x| above amax_floor over the other rows, else -1 */
    int amax_row;     /* the first of those rows holding it, else -1 */
    /* each row's norm, mean, rms and std (stats.c's per-token formulas
     * with y0 = 0), for the rows not in redo */
    double norm[RD_ROWS_MAX], mean[RD_ROWS_MAX], rms[RD_ROWS_MAX], std[RD_ROWS_MAX];
} rd_rows_out;

/* Rows row0 + r * row_bytes (r < n <= RD_ROWS_MAX) of dtype, each read
 * once as by rd_fast_row_fn with y0 = 0 (sum d = sum x): for a row whose
 * sums pass the fast row's checks, its sketch buckets times sigma[r] (n)
 * go into acc (K); the other rows are marked in redo and left to the
 * caller. Returns 0 without reading anything if it does not handle this
 * dtype, width or sketch (the caller then goes row by row), else 1. */
typedef int (*rd_fast_rows_fn)(rd_rows_out *o, double *acc /* (K) */,
                               const double *sigma /* (n) */, const void *row0,
                               size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                               const rd_sketch_params *sp, double amax_floor);

/* Vector kernels, present when meson defines RD_HAVE_AVX2 / RD_HAVE_AVX512
 * (x86-64 with a compiler that knows the instructions). Call them only when
 * the CPU has AVX2+FMA+F16C (resp. AVX-512F, DQ and BW as well). */
int rd_fast_row_avx2(rd_row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
                     int64_t cols, const rd_sketch_params *sp, double amax_floor,
                     double *acc, double sigma);
int rd_fast_row_avx512(rd_row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
                       int64_t cols, const rd_sketch_params *sp, double amax_floor,
                       double *acc, double sigma);
/* AVX-512 only: f32, f16, bf16; K = 0, or K = 16 with tau_len >= cols;
 * cols a multiple of 64 (bf16 with a sketch: up to 4096 columns); rows of
 * more than one float block (1024 columns) summed block by block as the
 * one-row kernel sums them. */
int rd_fast_rows_avx512(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                        size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                        const rd_sketch_params *sp, double amax_floor);
/* AVX2: f32, f16, bf16 of any width (bf16 with a sketch: up to 4096
 * columns); K = 0, or K = 16 with tau_len >= cols. */
int rd_fast_rows_avx2(rd_rows_out *o, double *acc, const double *sigma, const void *row0,
                      size_t row_bytes, int n, resdiag_dtype dtype, int64_t cols,
                      const rd_sketch_params *sp, double amax_floor);

/* The row signs of the sketch: sigma(i) = rd_row_sign(seed, i) is the top
 * bit of mix64(seed ^ (i * RD_SIGN_GOLDEN)), splitmix64's finaliser
 * (multipliers RD_SIGN_M1, RD_SIGN_M2). The vector kernels compute them
 * too, so the constants live here, once. */
#define RD_SIGN_GOLDEN 0x9e3779b97f4a7c15u
#define RD_SIGN_M1 0xbf58476d1ce4e5b9u
#define RD_SIGN_M2 0x94d049bb133111ebu

/* sg[q] = rd_row_sign(seed, row + q) for q < n (1 <= n <= RD_ROWS_MAX),
 * bit for bit: the signs are part of the run file's sketch. */
typedef void (*rd_row_signs_fn)(double *sg /* (n) */, uint64_t seed, int64_t row, int n);
/* AVX-512 (DQ's 64-bit products): 8 rows a vector */
void rd_row_signs_avx512(double *sg, uint64_t seed, int64_t row, int n);
/* AVX2 (64-bit products from 32-bit ones): 4 rows a vector */
void rd_row_signs_avx2(double *sg, uint64_t seed, int64_t row, int n);
/* The path's row signs (the portable loop where it has no vector one; tests). */
rd_row_signs_fn rd_stats_row_signs(rd_stats_path path);

/* What stats.c's moments over tokens take from a block of n (1..64)
 * tokens, for their 4 values at once: v[4 k + q] is token k's norm, mean,
 * rms and std for q = 0..3, and lane q of each field below is value q's.
 * Every lane is computed by the same operations in the same order as
 * stats.c's one-value loops did (4 chains, token k in chain k mod 4, added
 * (c0 + c1) + (c2 + c3)), so every path gives the same bits:
 *   s     sum_k (v_k - v_0)
 *   lo/hi the smallest / largest v_k (chains k even / odd)
 *   sq    sum_k v_k^2
 *   amax  the largest |v_k| (chains k even / odd)
 *   dev   sum_k (v_k - c)^2 about c = v_0 + s / n where that is finite,
 *         else c = 0 */
typedef struct rd_block_sums {
    double s[4], lo[4], hi[4], sq[4], amax[4], dev[4];
} rd_block_sums;
typedef void (*rd_block_sums_fn)(rd_block_sums *o, const double *v /* (4 n) */, int n);
/* 4 values a vector (256-bit, in both vector files) */
void rd_block_sums_avx2(rd_block_sums *o, const double *v, int n);
void rd_block_sums_avx512(rd_block_sums *o, const double *v, int n);
/* The path's block sums (tests). */
rd_block_sums_fn rd_stats_block_sums(rd_stats_path path);

/* The path's 16-row kernel, or NULL when it has none or the CPU cannot
 * run it (tests: which shapes it takes). */
rd_fast_rows_fn rd_stats_rows_kernel(rd_stats_path path);

/* The AVX-512 path reads bf16 rows by vdpbf16ps where the CPU has
 * AVX512-BF16 (checked on first use; rd_fast_rows_avx512 only).
 * rd_stats_set_bf16_dot(0) turns that off, (1) back on where the CPU has
 * it (tests, benchmarks; hooks running at the same time may use either);
 * rd_stats_bf16_dot() says whether it is on (0 without AVX-512). */
void rd_stats_set_bf16_dot(int on);
int rd_stats_bf16_dot(void);
void rd_set_bf16_dot_avx512(int on);
int rd_bf16_dot_avx512(void);

#endif
