/*
 * gradients.h - the gradients at the first recorded backward, as
 * gradients.c reads them (a->gradients), and the order the parameters are
 * shown in.
 */
#ifndef RESDIAG_ANALYSIS_GRADIENTS_H
#define RESDIAG_ANALYSIS_GRADIENTS_H

#include <stdint.h>

#include "analysis/fit.h"
#include "resdiag.h"

typedef struct rd_gradients {
    int64_t step;  /* step index used, -1 none */
    double *grad;  /* (L, P) ||dL/dW||_F */
    double *sgrad; /* (L) ||dL/dx|| of the stream leaving each layer */
    double
        sgrad_embed; /* ||dL/dx_0|| of the embedding (embed_out backward); NaN if not recorded */
    double head_grad;
    int head_is_param; /* head_grad is the head parameter's gradient (else the logits') */
    rd_fit fit_grad[RESDIAG_MAX_PARAMS], fit_sgrad;
    int param_order[RESDIAG_MAX_PARAMS], n_order; /* the residual parameter's first */
} rd_gradients;

#endif
