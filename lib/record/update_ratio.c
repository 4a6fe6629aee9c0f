/*
 * update_ratio.c - the update ratio of a residual add x + dx: ||dx||_F /
 * ||x||_F over the step, and the mean of the per-token ratios when every
 * STREAM_IN call of the step has a BRANCH_OUT partner of the same rows.
 * The ingestion (ingest.c) keeps a tensor's per-token norms in the
 * add_state; a BRANCH_OUT of statistics computed elsewhere (a partial)
 * brings the sum of its per-token ratios instead.
 */
#include <math.h>
#include <stdlib.h>

#include "record/update_ratio.h"

/* Grows one add_state buffer to hold rows norms; only when a larger tensor
 * than ever before arrives. */
int rd_add_reserve(add_state *a, int64_t rows)
{
    if (rows <= a->cap)
        return 0;
    double *in = realloc(a->in_norms, (size_t)rows * sizeof *in);
    if (!in)
        return -1;
    a->in_norms = in;
    double *br = realloc(a->br_norms, (size_t)rows * sizeof *br);
    if (!br)
        return -1;
    a->br_norms = br;
    a->cap = rows;
    return 0;
}

/* The per-token ratios of the pair that a's latest STREAM_IN and
 * BRANCH_OUT calls make: of two tensors, from their norms; of two partials,
 * what the BRANCH_OUT brought. Rows that differ, norms not kept, a ratio
 * not computed, or a tensor paired with a partial (one side's norms are
 * not here) leave the step without a per-token mean. */
static void add_pair(add_state *a)
{
    if (a->in_partial != a->br_partial || a->in_rows != a->br_rows || a->in_rows < 0) {
        a->tok_unpaired = 1;
    } else if (a->br_partial) {
        if (a->br_ratio_rows < 0) {
            a->tok_unpaired = 1;
        } else {
            a->tok_sum += a->br_ratio_sum;
            a->tok_n += a->br_ratio_rows;
        }
    } else {
        for (int64_t i = 0; i < a->in_rows; i++)
            if (a->in_norms[i] > 0) {
                a->tok_sum += a->br_norms[i] / a->in_norms[i];
                a->tok_n++;
            }
    }
}

/* One more call for the add of (layer, sublayer): notes what it gives per
 * token, and when it completes a pair (as many STREAM_IN as BRANCH_OUT
 * calls in the step) updates the step's ratios over every pair so far:
 * ||dx||_F / ||x||_F from the merged fields, the mean per-token ratio from
 * the paired rows. */
void rd_add_observed(resdiag *r, int layer, int sublayer, add_state *a, const rd_add_call *c)
{
    if (a->mark != r->serial) {
        a->mark = r->serial;
        a->in_calls = a->br_calls = 0;
        a->tok_sum = 0;
        a->tok_n = 0;
        a->tok_unpaired = 0;
    }
    /* a second call of one side before the other side's: the first one's
     * norms are gone, so its rows cannot be paired */
    if (c->is_in ? a->in_calls > a->br_calls : a->br_calls > a->in_calls)
        a->tok_unpaired = 1;
    if (c->is_in) {
        a->in_rows = c->rows;
        a->in_partial = c->partial;
        a->in_calls++;
    } else {
        a->br_rows = c->rows;
        a->br_partial = c->partial;
        a->br_ratio_sum = c->ratio_sum;
        a->br_ratio_rows = c->ratio_rows;
        a->br_calls++;
    }
    if (a->in_calls != a->br_calls)
        return;
    add_pair(a);

    const rd_tables *lay = &r->lay;
    size_t slot_in, slot_br;
    int table;
    rd_tables_site_slot(lay, RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, 0, &table,
                        &slot_in);
    rd_tables_site_slot(lay, RESDIAG_FORWARD, layer, sublayer, RESDIAG_BRANCH_OUT, 0, &table,
                        &slot_br);
    double x_frob = r->cur[rd_tables_offset(lay, table, slot_in) + RESDIAG_FIELD_FROB];
    double dx_frob = r->cur[rd_tables_offset(lay, table, slot_br) + RESDIAG_FIELD_FROB];
    double *u = r->cur + rd_tables_offset(lay, RD_T_UPDATE,
                                          (size_t)layer * (size_t)r->model.n_sublayers +
                                              (size_t)sublayer);
    u[RESDIAG_UPDATE_RATIO_FROB] = x_frob > 0 ? dx_frob / x_frob : NAN;
    u[RESDIAG_UPDATE_RATIO_TOK_MEAN] =
        !a->tok_unpaired && a->tok_n > 0 ? a->tok_sum / (double)a->tok_n : NAN;
}
