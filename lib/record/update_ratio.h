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

/* One more call (is_in: STREAM_IN, else BRANCH_OUT) of rows rows (-1: its
 * norms were not kept) for the add of (layer, sublayer), after its
 * statistics are in the step's record: updates the step's ratios. */
void rd_add_observed(resdiag *r, int layer, int sublayer, add_state *a, int is_in,
                     int64_t rows);

#endif /* RD_RECORD_UPDATE_RATIO_H */
