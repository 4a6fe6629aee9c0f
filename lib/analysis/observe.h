/*
 * observe.h - which sites were observed at the analysed step, as
 * observe.c counts them (a->observe): what decides whether the relations
 * or the stream's signature judge the placement; and every site's
 * statistics there, which the other phases read.
 */
#ifndef RESDIAG_ANALYSIS_OBSERVE_H
#define RESDIAG_ANALYSIS_OBSERVE_H

#include "resdiag.h"

typedef struct rd_observe {
    int n_obs[2][RESDIAG_N_BLOCK_SITES];     /* [dir][block site] over all (layer, sublayer) */
    int model_obs[2][RESDIAG_N_MODEL_SITES]; /* [dir][model site 0..3] */
    int stream_only;                         /* no norm or branch site observed forward */
    int use_relations; /* sketch relations decide (not stream-only, K > 0) */
    /* every site's statistics at the step, read once here for the phases
     * after (rd_analysis_site): block site b of (l, s) in direction d at
     * ((d * L + l) * S + s) * B + b, with B = RESDIAG_N_BLOCK_SITES */
    double (*block_st)[RESDIAG_N_FIELDS];
    int *block_obs;
    double model_st[2][RESDIAG_N_MODEL_SITES][RESDIAG_N_FIELDS];
} rd_observe;

#endif
