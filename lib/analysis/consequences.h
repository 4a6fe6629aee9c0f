/*
 * consequences.h - which of the sources' findings (sources.h) apply to
 * the run, as consequences.c decides them from the measured placement and
 * a->measures (a->consequences).
 */
#ifndef RESDIAG_ANALYSIS_CONSEQUENCES_H
#define RESDIAG_ANALYSIS_CONSEQUENCES_H

#include "analysis/sources.h"

typedef struct rd_consequence {
    rd_cq_id id;
    int met;             /* 1: the condition was measured and holds; 0: it could not be measured */
    char measured[480];  /* the measurements behind it, in words */
    char missing[160];   /* with met 0: what was not measured */
} rd_consequence;

typedef struct rd_consequences {
    int off;             /* resdiag_analyze_options.no_consequences: not decided */
    int n;
    rd_consequence e[RD_N_CQ];
} rd_consequences;

#endif
