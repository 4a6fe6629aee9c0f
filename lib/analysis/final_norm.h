/*
 * final_norm.h - whether the head reads a norm's output, as final_norm.c
 * tells it (a->final_norm).
 */
#ifndef RESDIAG_ANALYSIS_FINAL_NORM_H
#define RESDIAG_ANALYSIS_FINAL_NORM_H

typedef struct rd_final_norm {
    int reads_norm; /* 1 the head reads a norm's output, 0 it does not, -1 not observed
                            or not told from an identity (identity) */
    int identity;   /* the final norm's output equals its already normalized
                            input within rounding: a norm or an identity, the
                            data cannot tell */
    char why[256];
} rd_final_norm;

#endif
