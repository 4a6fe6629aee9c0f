/*
 * depth.h - how the stream behaves over depth at the analysed step, as
 * depth.c measures it (a->depth): the stream x_k for k = 0..L, its fits
 * and growth, each layer's normalization signature, the massive
 * activations (warnings.c words them) and the fits of the relative
 * updates.
 */
#ifndef RESDIAG_ANALYSIS_DEPTH_H
#define RESDIAG_ANALYSIS_DEPTH_H

#include "analysis/fit.h"
#include "resdiag.h"

#define RD_MAX_RFIT RESDIAG_MAX_SUBLAYERS

/* One value of the stream leaving a layer far above its token's RMS. */
typedef struct rd_massive {
    int layer;
    double absmax, col, rms; /* |x|, its column, the mean per-token RMS */
} rd_massive;

typedef struct rd_depth {
    double *xnorm, *xrms, *xenergy; /* (L+1) */
    rd_fit fit_energy, fit_xlog;
    double growth;
    int *layer_sig;   /* (L) signature of the stream leaving each layer */
    double *layer_cv; /* (L) its token-norm spread */
    rd_fit fit_r[RD_MAX_RFIT], fit_r_deep[RD_MAX_RFIT]; /* r over all layers, the deeper half */
    int n_massive;
    rd_massive *massive; /* (L) the first n_massive, by layer */
} rd_depth;

#endif
