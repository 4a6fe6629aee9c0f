/*
 * training.h - a few numbers at the first and the last complete step
 * (index 0, 1), as training.c computes them (a->training) for the
 * over-training summary.
 */
#ifndef RESDIAG_ANALYSIS_TRAINING_H
#define RESDIAG_ANALYSIS_TRAINING_H

#include "resdiag.h"

typedef struct rd_training {
    double growth[2];                        /* ||x_L|| / ||x_1|| */
    double mean_r[2][RESDIAG_MAX_SUBLAYERS]; /* mean r over layers per sublayer */
    double grad_ratio[2];                    /* first parameter's last/first layer gradient */
} rd_training;

#endif
