/*
 * aborted.h - the steps ended with resdiag_step_abort, as aborted.c reads
 * them (a->aborted): their records are incomplete, so never the first or
 * last step, nor compared over the run.
 */
#ifndef RESDIAG_ANALYSIS_ABORTED_H
#define RESDIAG_ANALYSIS_ABORTED_H

#include <stdint.h>

#include "resdiag.h"

#define RD_ABORTED_LISTED 8 /* aborted steps the report names (the rest counted) */

typedef struct rd_aborted {
    unsigned char *flags; /* (n_steps) 1: aborted; NULL: none was */
    int64_t count;
    int64_t first_index, last_index;         /* the first and last complete step (with every
                                        step aborted: 0 and n_steps - 1) */
    int64_t listed_index[RD_ABORTED_LISTED]; /* the first min(count, LISTED) */
    char listed_reason[RD_ABORTED_LISTED][RESDIAG_MAX_ABORT_REASON]; /* "" none given */
    int step_aborted; /* the analysed step is one of them: not judged */
    char step_reason[RESDIAG_MAX_ABORT_REASON];
} rd_aborted;

#endif
