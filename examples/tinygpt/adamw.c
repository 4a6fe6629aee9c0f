/*
 * adamw.c - AdamW, elementwise (see adamw.h).
 */
#include "adamw.h"

#include <math.h>

void adamw_update(real *param, real *m, real *v, const real *grad, size_t n,
                  const tg_adamw *opt, long t, int decay)
{
    /* Bias corrections in double: 1 - beta^t for small t is a difference of
     * nearly equal numbers. */
    real c1 = (real)(1.0 / (1.0 - pow(opt->beta1, (double)t)));
    real c2 = (real)(1.0 / (1.0 - pow(opt->beta2, (double)t)));
    real b1 = (real)opt->beta1, b2 = (real)opt->beta2;
    real lr = (real)opt->lr, eps = (real)opt->eps;
    real wd = decay ? (real)opt->weight_decay : 0;
    /* Elementwise; parallel only for tensors large enough to pay for it. */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= 10000)
#endif
    for (size_t i = 0; i < n; i++) {
        real g = grad[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        real mhat = m[i] * c1, vhat = v[i] * c2;
        param[i] -= lr * (mhat / ((real)sqrt((double)vhat) + eps) + wd * param[i]);
    }
}
