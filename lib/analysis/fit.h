/*
 * fit.h - least-squares line fits with 95% intervals and R^2, for the
 * depth laws of the analysis (||x_k||^2 = a + b k, log-log slopes).
 * Internal: not part of the public API.
 */
#ifndef RESDIAG_FIT_H
#define RESDIAG_FIT_H

typedef struct rd_fit {
    int n;          /* points used (finite x and y) */
    int ok;         /* 1 when n >= 3 and the x values are not all equal */
    double a, b;    /* y = a + b x */
    double b_lo, b_hi; /* 95% interval of b (Student t, n-2 degrees of freedom) */
    double r2;      /* coefficient of determination; NaN when y is constant */
    double y_spread; /* (max y - min y) / |mean y| over the points: ~0 = flat data */
} rd_fit;

/* Two-sided 97.5% quantile of Student's t with df degrees of freedom
 * (df >= 1); exact table to 30, then the Cornish-Fisher expansion. */
double rd_t975(int df);

/* Fits y = a + b x over the points where both are finite: x, y (n).
 * With fewer than 3 points, or constant x, ok = 0 and a, b are NaN unless
 * n == 2 (then the line through both, with no interval). Returns ok. */
int rd_fit_line(const double *x, const double *y, int n, rd_fit *out);

/* log y = a + b log x over the points with x > 0, y > 0: the log-log slope b. */
int rd_fit_loglog(const double *x, const double *y, int n, rd_fit *out);

#endif
