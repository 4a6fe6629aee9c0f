/*
 * update_ratio.h - the update ratio ||dx|| / ||x|| of a residual add, from
 * the STREAM_IN and BRANCH_OUT hooks of one (layer, sublayer). Internal.
 */
#ifndef RD_RECORD_UPDATE_RATIO_H
#define RD_RECORD_UPDATE_RATIO_H

#include "record/handle.h"

/* Grows a's norm buffers to hold rows norms. Returns 0, or -1 when memory
 * ran out (a keeps what it had). */
int rd_add_reserve(add_state *a, int64_t rows);

/* One call of the add's STREAM_IN or BRANCH_OUT. */
typedef struct rd_add_call {
    int is_in;          /* STREAM_IN, else BRANCH_OUT */
    int64_t rows;       /* its rows; -1: a tensor whose norms were not kept */
    int partial;        /* statistics computed elsewhere: no per-token norms here */
    double ratio_sum;   /* a partial BRANCH_OUT's sum of per-token ratios */
    int64_t ratio_rows; /* ... over this many rows; -1: not computed */
} rd_add_call;

/* One more call for the add of (layer, sublayer), after its statistics
 * are in the step's record: updates the step's ratios. A tensor call's
 * norms are in a's buffers. */
void rd_add_observed(resdiag *r, int layer, int sublayer, add_state *a, const rd_add_call *c);

#endif /* RD_RECORD_UPDATE_RATIO_H */
