/*
 * over_run.h - what over_run.c finds at every recorded complete step
 * (a->over_run) for the warnings of the whole run: where each update is
 * dominant or negligible, where the stream grows too much, where a
 * massive activation sits, with the first and the worst step of each.
 */
#ifndef RESDIAG_ANALYSIS_OVER_RUN_H
#define RESDIAG_ANALYSIS_OVER_RUN_H

#include <stdint.h>

/* What the warnings call a negligible (below) or dominant (above) relative
 * update, and the least ratio of a massive activation to its token's RMS
 * (depth.c says why). */
#define RD_NEGLIGIBLE_R 1e-3
#define RD_DOMINANT_R 1.0
#define RD_MASSIVE_MIN 6.0

/* Where one condition holds over the scanned steps (step indices). */
typedef struct rd_where {
    int64_t n;          /* steps where it holds; 0: none */
    int64_t first, worst; /* the first such step, the one of the worst value */
    double worst_value;
    double col, rms;    /* a massive activation's column and RMS at the worst step */
} rd_where;

typedef struct rd_over_run {
    /* steps scanned for the updates and for the stream; 0: no scan (the
     * analysis of one step only); stride > 1: every stride-th complete step
     * (with the first and the last), to bound the work */
    int64_t n_update_steps, n_stream_steps, n_growth_steps;
    int64_t update_stride, stream_stride, growth_stride;
    rd_where *dominant, *negligible; /* (L, S) */
    rd_where growth;
    rd_where *massive; /* (L) */
} rd_over_run;

#endif
