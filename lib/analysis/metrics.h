/*
 * metrics.h - the trainer's metrics over every recorded step, as
 * metrics.c copies them (a->metrics).
 */
#ifndef RESDIAG_ANALYSIS_METRICS_H
#define RESDIAG_ANALYSIS_METRICS_H

typedef struct rd_metrics {
    int count;
    char **names;   /* (count) */
    double *values; /* (count, n_steps): metric m at step index i is
                             [m * n_steps + i]; NaN where not given */
} rd_metrics;

#endif
