/*
 * adamw.h - the AdamW optimizer (Loshchilov & Hutter), decoupled weight
 * decay, bias-corrected moments, as one elementwise kernel.
 */
#ifndef TINYGPT_ADAMW_H
#define TINYGPT_ADAMW_H

#include <stddef.h>

#include "kernels.h"

typedef struct tg_adamw {
    double lr;            /* learning rate */
    double beta1, beta2;  /* moment decay rates */
    double eps;
    double weight_decay;  /* applied to tensors the caller marks (matrices) */
    long t;               /* updates taken so far */
} tg_adamw;

/* One update of n parameters with their first/second moments m, v (n each),
 * t = the 1-based update number. decay = 0 turns weight decay off for this
 * tensor (norm gains, biases). Elementwise, so any thread count gives the
 * same result. */
void adamw_update(real *param, real *m, real *v, const real *grad, size_t n,
                  const tg_adamw *opt, long t, int decay);

#endif /* TINYGPT_ADAMW_H */
