/*
 * partial.c - what device code needs to compute partial statistics as the
 * library does (doc/PARTIAL.md): the reference computation
 * (resdiag_partial_compute) and the sketch's layout. Submitting them is a
 * write like any other (hooks.c).
 */
#include <math.h>

#include "record/hooks.h"
#include "stats/partial.h"

resdiag_status resdiag_partial_compute(const resdiag *r, resdiag_tensor t, int64_t row0,
                                       resdiag_partial *out, double *row_norms)
{
    static const char fn[] = "resdiag_partial_compute";
    if (!r || !out)
        return RESDIAG_E_NULL;
    /* The handle's log and message are not part of the run's statistics:
     * a bad call is reported through them as every other call's. */
    resdiag *log = (resdiag *)r;
    resdiag_status st = rd_hook_check_tensor(log, fn, &t, NULL, 0);
    if (st)
        return st;
    if (row0 < 0 || row0 > INT64_MAX - t.rows - r->row_sign_base)
        return rd_client_bug(log, RESDIAG_E_INVALID, "%s: row0 is %lld: it must be >= 0 (the "
                             "rows submitted before for the site in this step)", fn,
                             (long long)row0);
    rd_sketch_params sp = rd_hook_sketch(r, t.cols);
    sp.row0 += row0;
    rd_stats_partial(out, row_norms, &t, &sp);
    /* the kernels place a shard's column in d_model; a partial's column is
     * the tensor's own (resdiag.h), which submitting places again */
    if (sp.col0 > 0 && !isnan(out->absmax_col))
        out->absmax_col -= (double)sp.col0;
    return RESDIAG_OK;
}

resdiag_status resdiag_sketch_layout(const resdiag *r, int64_t col0, int64_t n_cols,
                                     int32_t *bucket, float *col_sign, int64_t row0,
                                     int64_t n_rows, float *row_sign)
{
    static const char fn[] = "resdiag_sketch_layout";
    if (!r)
        return RESDIAG_E_NULL;
    resdiag *log = (resdiag *)r;
    if (col0 < 0 || n_cols < 0 || row0 < 0 || n_rows < 0 || n_cols > INT64_MAX - col0 ||
        n_rows > INT64_MAX - row0 - r->row_sign_base)
        return rd_client_bug(log, RESDIAG_E_INVALID, "%s: col0 %lld, n_cols %lld, row0 %lld, "
                             "n_rows %lld: each must be >= 0 (and their sums in range)", fn,
                             (long long)col0, (long long)n_cols, (long long)row0,
                             (long long)n_rows);
    if ((n_cols > 0 && (!bucket || !col_sign)) || (n_rows > 0 && !row_sign))
        return rd_client_bug(log, RESDIAG_E_NULL, "%s: %s is NULL for %lld entries", fn,
                             n_rows > 0 && !row_sign ? "row_sign" : !bucket ? "bucket" : "col_sign",
                             (long long)(n_rows > 0 && !row_sign ? n_rows : n_cols));
    const rd_sketch_params *sp = &r->sp;
    const uint64_t K = sp->k > 0 ? (uint64_t)sp->k : 0;
    for (int64_t j = 0; j < n_cols; j++) {
        const uint64_t c = (uint64_t)(col0 + j);
        bucket[j] = K ? (int32_t)(c % K) : 0;
        col_sign[j] = sp->tau[c % sp->tau_len];
    }
    for (int64_t i = 0; i < n_rows; i++)
        row_sign[i] = (float)rd_row_sign(sp->seed, r->row_sign_base + row0 + i);
    return RESDIAG_OK;
}

int resdiag_sketch_size(const resdiag *r)
{
    return r ? r->sp.k : 0;
}
