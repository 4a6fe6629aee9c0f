/*
 * warnings.h - what the report warns about, as warnings.c words it
 * (a->warnings) from what the other phases found.
 */
#ifndef RESDIAG_ANALYSIS_WARNINGS_H
#define RESDIAG_ANALYSIS_WARNINGS_H

#define RD_MAX_WARNINGS 64
#define RD_WARNING_LEN 200

typedef struct rd_warnings {
    int count;
    char lines[RD_MAX_WARNINGS][RD_WARNING_LEN];
} rd_warnings;

#endif
