/*
 * path-bounds.h - the error bounds of the statistics kernel path that ran
 * (lib/stats/stats.h), from which every test that compares a computed
 * statistic with a reference takes its tolerance: the CPU a test runs on
 * picks the path (AVX-512, AVX2 or portable, or the environment does:
 * RESDIAG_FORCE_PORTABLE, RESDIAG_DISABLE_AVX512), never the developer's.
 *
 * The portable path, and f64 on every path, sum in double: a sum of n
 * terms is within (n-1) u sum|terms| (u = 2^-53; Higham, Accuracy and
 * Stability, 4.4), below 1e-12 of sum|terms| for the sizes the tests use
 * (RD_TEST_REL_TOL). The vector paths sum f32, f16 and bf16 rows in float
 * lanes over blocks of columns and in double across blocks
 * (lib/stats/simd_kernels.h): each row sum (sum x, sum x^2, a sketch
 * bucket) is within RD_TEST_G_F = 24 u_f (u_f = 2^-24, at most 22
 * roundings per term) of the sum of its |terms|.
 */
#ifndef RESDIAG_TEST_PATH_BOUNDS_H
#define RESDIAG_TEST_PATH_BOUNDS_H

#include "resdiag.h"
#include "stats/stats.h"

#define RD_TEST_REL_TOL 1e-12L
#define RD_TEST_G_F (24.0L * 0x1p-24L) /* one float-lane row sum */

/* Whether path p sums dtype in float lanes. */
static inline int rd_test_float_lanes(rd_stats_path p, resdiag_dtype dt)
{
    return p != RD_STATS_PORTABLE && dt != RESDIAG_DTYPE_F64;
}

/* The relative bound of one row sum of dtype on path p, as a fraction of
 * the sum of its |terms|. */
static inline long double rd_test_sum_tol(rd_stats_path p, resdiag_dtype dt)
{
    return rd_test_float_lanes(p, dt) ? RD_TEST_G_F + RD_TEST_REL_TOL : RD_TEST_REL_TOL;
}

/* The same for the path this process's hooks use now. */
static inline long double rd_test_active_sum_tol(resdiag_dtype dt)
{
    return rd_test_sum_tol(rd_stats_active_path(), dt);
}

/* The relative bound of a field (tests/unit/test-stats.c's header derives
 * 6 G on float lanes: std within 6 G of itself), against a scale per field. */
#define RD_TEST_FIELD_TOL_F (6.0L * RD_TEST_G_F + RD_TEST_REL_TOL)

static inline long double rd_test_field_tol(rd_stats_path p, resdiag_dtype dt)
{
    return rd_test_float_lanes(p, dt) ? RD_TEST_FIELD_TOL_F : RD_TEST_REL_TOL;
}

/* The relative bound of a norm of dtype data (the Frobenius norm, a
 * token's norm): the square root of row sums of x^2 (terms >= 0), so
 * within half a row sum's bound of itself, plus the double rounding. */
static inline long double rd_test_norm_tol(resdiag_dtype dt)
{
    return rd_test_active_sum_tol(dt) / 2 + RD_TEST_REL_TOL;
}

/* The relative bound of a ratio of two such norms (an update ratio, a
 * growth), or of a mean of such ratios: twice a norm's. */
static inline long double rd_test_ratio_tol(resdiag_dtype dt)
{
    return 2 * rd_test_norm_tol(dt);
}

#endif
