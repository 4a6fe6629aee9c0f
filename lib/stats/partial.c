/*
 * partial.c - the public partial statistics (doc/PARTIAL.md) both ways:
 * from a tensor through the kernels (the reference), and from a struct
 * computed elsewhere to the recorded fields. The fields come from the
 * struct exactly as partial_fields in stats.c makes them from the kernels'
 * running sums (FROB = sqrt(sumsq), TOK_*_STD = sqrt(m2 / rows): population
 * spreads, NaN over no token), so a site's later calls merge by the one
 * rd_stats_merge whichever way each call's statistics came.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats/part.h"
#include "stats/partial.h"

void rd_stats_partial(resdiag_partial *out, double *row_norms, const resdiag_tensor *t,
                      const rd_sketch_params *sp)
{
    rd_stats_part part;
    rd_stats_part_rows(&part, rd_stats_active_path(), row_norms, t, sp, 0, t->rows);
    rd_stats_part_public(out, &part, t, sp);
}

void rd_partial_fields(double *fields, double *sketch, const resdiag_partial *p, int k)
{
    const double n = p->rows;
    const int any = n > 0;
    const int none_finite = p->absmax < 0.0;
    fields[RESDIAG_FIELD_ROWS] = n;
    fields[RESDIAG_FIELD_COLS] = p->cols;
    fields[RESDIAG_FIELD_FROB] = sqrt(p->sumsq);
    fields[RESDIAG_FIELD_TOK_NORM_MEAN] = any ? p->norm_mean : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_STD] = any ? sqrt(p->norm_m2 / n) : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_MIN] = any ? p->norm_min : NAN;
    fields[RESDIAG_FIELD_TOK_NORM_MAX] = any ? p->norm_max : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_MEAN] = any ? p->mean_mean : NAN;
    fields[RESDIAG_FIELD_TOK_MEAN_STD] = any ? sqrt(p->mean_m2 / n) : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_MEAN] = any ? p->rms_mean : NAN;
    fields[RESDIAG_FIELD_TOK_RMS_STD] = any ? sqrt(p->rms_m2 / n) : NAN;
    fields[RESDIAG_FIELD_TOK_STD_MEAN] = any ? p->std_mean : NAN;
    fields[RESDIAG_FIELD_TOK_STD_STD] = any ? sqrt(p->std_m2 / n) : NAN;
    fields[RESDIAG_FIELD_ABSMAX] = none_finite ? 0.0 : p->absmax;
    fields[RESDIAG_FIELD_ABSMAX_COL] = none_finite ? NAN : p->absmax_col;
    fields[RESDIAG_FIELD_NAN_COUNT] = p->nan_count;
    fields[RESDIAG_FIELD_INF_COUNT] = p->inf_count;
    for (int m = 0; m < k; m++)
        sketch[m] = p->sketch[m];
}

/* ------------------------------------------------------------------------ */
/* Consistency                                                               */
/* ------------------------------------------------------------------------ */

/* Counts travel as doubles: exact integers up to 2^53. */
#define MAX_EXACT 9007199254740992.0

static int is_count(double x)
{
    return x >= 0.0 && x <= MAX_EXACT && x == floor(x);
}

/* A sum of squares: >= 0, +Inf where it exceeds the double range. */
static int is_sum_of_squares(double x)
{
    return x >= 0.0;
}

#define BAD(member, ...) (snprintf(why, len, __VA_ARGS__), (member))

/* The shape, the counts of non-finite values and the largest |value|. */
static const char *check_counts(const resdiag_partial *p, char *why, size_t len)
{
    if (!is_count(p->rows))
        return BAD("rows", "rows is %g: it must be a non-negative integer", p->rows);
    if (!is_count(p->cols) || p->cols < 1)
        return BAD("cols", "cols is %g: it must be a positive integer", p->cols);
    if (!is_count(p->nan_count))
        return BAD("nan_count", "nan_count is %g: it must be a non-negative integer",
                   p->nan_count);
    if (!is_count(p->inf_count))
        return BAD("inf_count", "inf_count is %g: it must be a non-negative integer",
                   p->inf_count);
    const double elements = p->rows * p->cols, non_finite = p->nan_count + p->inf_count;
    if (non_finite > elements)
        return BAD("nan_count", "nan_count + inf_count is %g, more than the %g values of "
                   "%g rows x %g cols", non_finite, elements, p->rows, p->cols);
    if (!is_sum_of_squares(p->sumsq))
        return BAD("sumsq", "sumsq is %g: it must be >= 0", p->sumsq);
    /* absmax -1 (and its column NaN) exactly when no value is finite */
    if (non_finite == elements) {
        if (p->absmax != -1.0)
            return BAD("absmax", "absmax is %g, but no value is finite (%g of %g): it must "
                       "be -1", p->absmax, non_finite, elements);
        if (!isnan(p->absmax_col))
            return BAD("absmax_col", "absmax_col is %g, but no value is finite: it must be "
                       "NaN", p->absmax_col);
        return NULL;
    }
    if (!(p->absmax >= 0.0) || !isfinite(p->absmax))
        return BAD("absmax", "absmax is %g: it must be the largest finite |value| (>= 0), "
                   "or -1 when no value is finite", p->absmax);
    if (!is_count(p->absmax_col) || p->absmax_col >= p->cols)
        return BAD("absmax_col", "absmax_col is %g: it must be a column 0..%g", p->absmax_col,
                   p->cols - 1);
    return NULL;
}

/* One (mean, m2) pair over the tokens, rows > 0: a mean that is a number
 * (finite, or for the norms +Inf beyond the range) at or above lowest,
 * and m2 >= 0. */
static const char *check_pair(double mean, double m2, double lowest, int inf_ok,
                              const char *mean_name, const char *m2_name, char *why, size_t len)
{
    if (!(mean >= lowest) || (!inf_ok && !isfinite(mean)))
        return BAD(mean_name, "%s is %g: it must be a finite mean%s over the tokens",
                   mean_name, mean, lowest == 0.0 ? " (>= 0)" : "");
    if (!is_sum_of_squares(m2))
        return BAD(m2_name, "%s is %g: a sum of squared deviations must be >= 0", m2_name, m2);
    return NULL;
}

/* The members over tokens (ignored when rows == 0) and the update ratio. */
static const char *check_tokens(const resdiag_partial *p, char *why, size_t len)
{
    const char *bad;
    if (p->rows > 0) {
        if (!(p->norm_min >= 0.0))
            return BAD("norm_min", "norm_min is %g: it must be a norm (>= 0)", p->norm_min);
        if (!(p->norm_max >= p->norm_min))
            return BAD("norm_min", "norm_min %g is not <= norm_max %g", p->norm_min,
                       p->norm_max);
        if ((bad = check_pair(p->norm_mean, p->norm_m2, 0.0, 1, "norm_mean", "norm_m2", why,
                              len)) ||
            (bad = check_pair(p->mean_mean, p->mean_m2, -INFINITY, 0, "mean_mean", "mean_m2",
                              why, len)) ||
            (bad = check_pair(p->rms_mean, p->rms_m2, 0.0, 0, "rms_mean", "rms_m2", why,
                              len)) ||
            (bad = check_pair(p->std_mean, p->std_m2, 0.0, 0, "std_mean", "std_m2", why, len)))
            return bad;
    }
    if (p->ratio_rows != -1.0 && (!is_count(p->ratio_rows) || p->ratio_rows > p->rows))
        return BAD("ratio_rows", "ratio_rows is %g: it must be -1 (not computed) or a count "
                   "0..%g (rows)", p->ratio_rows, p->rows);
    if (p->ratio_rows >= 0 && !(p->ratio_sum >= 0.0))
        return BAD("ratio_sum", "ratio_sum is %g: a sum of ratios of norms must be >= 0",
                   p->ratio_sum);
    return NULL;
}

const char *rd_partial_check(const resdiag_partial *p, char *why, size_t len)
{
    const char *bad = check_counts(p, why, len);
    return bad ? bad : check_tokens(p, why, len);
}
