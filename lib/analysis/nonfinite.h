/*
 * nonfinite.h - the first NaN or Inf over every recorded step and the
 * totals, as nonfinite.c finds them (a->nonfinite).
 */
#ifndef RESDIAG_ANALYSIS_NONFINITE_H
#define RESDIAG_ANALYSIS_NONFINITE_H

#include <stdint.h>

#include "resdiag.h"

typedef struct rd_nonfinite {
    int found;
    int64_t step, step_index, n_bad_steps;
    int layer, sub, site, param;
    char model_param[RESDIAG_MAX_NAME]; /* with layer MODEL_LEVEL and site -1: that
                                           model parameter's name */
    resdiag_direction dir;
    double nan_count, inf_count; /* in the first bad record */
    double nan_total, inf_total;
} rd_nonfinite;

#endif
