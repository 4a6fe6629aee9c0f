/*
 * warnings.h - what the report warns about, as warnings.c words it
 * (a->warnings) from what the other phases found, each with the steps
 * where it holds.
 */
#ifndef RESDIAG_ANALYSIS_WARNINGS_H
#define RESDIAG_ANALYSIS_WARNINGS_H

#define RD_MAX_WARNINGS 64
#define RD_WARNING_LEN 320

#include <stdint.h>

/* Where a warning holds, in the trainer's step numbers: the first step and
 * the worst, in n of of_steps steps scanned (n 0: a comparison of the
 * first step, first_step, with the last, worst_step). set 0: a warning
 * about the judged step alone. */
typedef struct rd_warning_at {
    int set;
    int64_t first_step, worst_step, n, of_steps;
} rd_warning_at;

typedef struct rd_warnings {
    int count;
    char lines[RD_MAX_WARNINGS][RD_WARNING_LEN];
    rd_warning_at at[RD_MAX_WARNINGS];
} rd_warnings;

#endif
