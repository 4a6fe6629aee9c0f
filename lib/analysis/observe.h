/*
 * observe.h - which sites were observed at the analysed step, as
 * observe.c counts them (a->observe): what decides whether the relations
 * or the stream's signature judge the placement.
 */
#ifndef RESDIAG_ANALYSIS_OBSERVE_H
#define RESDIAG_ANALYSIS_OBSERVE_H

#include "resdiag.h"

typedef struct rd_observe {
    int n_obs[2][RESDIAG_N_BLOCK_SITES];    /* [dir][block site] over all (layer, sublayer) */
    int model_obs[2][RESDIAG_N_MODEL_SITES]; /* [dir][model site 0..3] */
    int stream_only;     /* no norm or branch site observed forward */
    int use_relations;   /* sketch relations decide (not stream-only, K > 0) */
} rd_observe;

#endif
