/*
 * aborted.c - the steps the trainer ended with resdiag_step_abort: their
 * records are incomplete, so the step selection (RESDIAG_STEP_FIRST /
 * LAST) and every comparison over the run take complete steps only
 * (a->aborted, aborted.h); verdict.c shows a judged step that was aborted
 * without judging it.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"
#include "format/format.h"

/* Steps read at a time from /step_status/aborted. */
#define FLAG_BLOCK 16384

resdiag_status rd_aborted_flags(const resdiag_reader *rd, int64_t n, unsigned char **flags)
{
    *flags = NULL;
    if (n <= 0 || !rd_analysis_has_dataset(rd, RD_DS_STEP_ABORTED))
        return RESDIAG_OK; /* a file from before step status: every step complete */
    unsigned char *f = calloc((size_t)n, 1);
    double *v = malloc(FLAG_BLOCK * sizeof *v);
    resdiag_status st = f && v ? RESDIAG_OK : RESDIAG_E_NOMEM;
    int64_t n_aborted = 0;
    for (int64_t s0 = 0; s0 < n && st == RESDIAG_OK; s0 += FLAG_BLOCK) {
        int64_t cnt = n - s0 < FLAG_BLOCK ? n - s0 : FLAG_BLOCK;
        st = resdiag_reader_read(rd, RD_DS_STEP_ABORTED, s0, cnt, v, FLAG_BLOCK);
        for (int64_t i = 0; st == RESDIAG_OK && i < cnt; i++) {
            f[s0 + i] = v[i] == 1;
            n_aborted += f[s0 + i];
        }
    }
    free(v);
    if (st != RESDIAG_OK || n_aborted == 0) {
        free(f);
        return st;
    }
    *flags = f;
    return RESDIAG_OK;
}

int64_t rd_complete_step(const unsigned char *flags, int64_t n, int last)
{
    for (int64_t k = 0; k < n; k++) {
        int64_t i = last ? n - 1 - k : k;
        if (!flags || !flags[i])
            return i;
    }
    return last ? n - 1 : 0; /* every step aborted: the selection still gives one */
}

resdiag_status rd_analysis_aborted(const resdiag_reader *rd, rd_analysis *a,
                                   unsigned char *flags)
{
    rd_aborted *b = &a->aborted;
    int64_t si = a->load.step_index;
    b->flags = flags;
    b->first_index = rd_complete_step(flags, a->load.n_steps, 0);
    b->last_index = rd_complete_step(flags, a->load.n_steps, 1);
    int listed = -1; /* the judged step among the listed ones */
    for (int64_t i = 0; flags && i < a->load.n_steps; i++) {
        if (!flags[i])
            continue;
        if (b->count < RD_ABORTED_LISTED) {
            int k = (int)b->count;
            b->listed_index[k] = i;
            if (i == si)
                listed = k;
            resdiag_status st = resdiag_reader_abort_reason(rd, i, b->listed_reason[k],
                                                            sizeof b->listed_reason[k]);
            if (st)
                return st;
        }
        b->count++;
    }
    b->step_aborted = rd_analysis_step_aborted(a, si);
    if (!b->step_aborted)
        return RESDIAG_OK;
    if (listed >= 0) { /* its reason is read already */
        memcpy(b->step_reason, b->listed_reason[listed], sizeof b->step_reason);
        return RESDIAG_OK;
    }
    return resdiag_reader_abort_reason(rd, si, b->step_reason, sizeof b->step_reason);
}
