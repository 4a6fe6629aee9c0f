/*
 * measures.h - the quantities the consequences speak of, as measures.c
 * computes them (a->measures): the gradients' exponent over depth, the
 * effective depth, each branch's scale at initialization and the
 * learning-rate schedule of the trainer's `lr` metric.
 */
#ifndef RESDIAG_ANALYSIS_MEASURES_H
#define RESDIAG_ANALYSIS_MEASURES_H

#include <stdint.h>

#include "analysis/fit.h"
#include "resdiag.h"

/* A branch's relative update at the first step at or below these is
 * zero-initialised / SmallInit-like (measures.c says why). */
#define RD_INIT_ZERO_R 1e-6
#define RD_INIT_SMALL_R 0.1
enum { RD_INIT_UNKNOWN = 0, RD_INIT_ZERO, RD_INIT_SMALL, RD_INIT_DEFAULT };
/* The lr metric: absent, given at fewer than two steps, with and without warm-up. */
enum { RD_LR_NOT_RECORDED = 0, RD_LR_TOO_FEW, RD_LR_WARMUP, RD_LR_NO_WARMUP };
/* A warm-up: the first given lr is below this fraction of the peak. */
#define RD_WARMUP_START 0.5
/* Its end: the first step whose lr is the peak's (to this fraction, for
 * rounding); its length counts that step: tinygpt's --warmup N is N. */
#define RD_WARMUP_END (1 - 1e-6)

typedef struct rd_measures {
    /* ||dL/dW_k|| ~ k^b per layer parameter (gradients.c's fits), at the
     * gradients' step; 1/sqrt(L), the pre-LN scale of Xiong et al. */
    int64_t grad_step; /* recorded step index, -1: none */
    double grad_last_over_first[RESDIAG_MAX_PARAMS];
    double inv_sqrt_l;
    /* effective depth at the analysed step: block k's share of the final
     * state, sqrt(sum_s (r_ks ||x_ks||)^2) / ||x_L|| (Frobenius norms) */
    double *share;    /* (L), NaN where not measured */
    rd_fit share_fit; /* log share against log k */
    double share_last_over_first;
    double growth; /* ||x_L|| / ||x_1|| (depth.c's) */
    /* each branch's scale at the first complete step: the median r over layers */
    int64_t init_step; /* recorded step index */
    double init_r[RESDIAG_MAX_SUBLAYERS];
    int init_class[RESDIAG_MAX_SUBLAYERS]; /* RD_INIT_* */
    /* the lr metric */
    int lr_state; /* RD_LR_* */
    double lr_first, lr_peak;
    int64_t lr_first_step, lr_peak_step; /* trainer's steps */
    int64_t warmup_steps; /* with RD_LR_WARMUP: first step at the peak - first step */
} rd_measures;

#endif
