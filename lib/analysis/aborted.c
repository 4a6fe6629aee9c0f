/*
 * aborted.c - the steps the trainer ended with resdiag_step_abort: their
 * records are incomplete, so the step selection (RESDIAG_STEP_FIRST /
 * LAST) and every comparison over the run take complete steps only, and a
 * judged step that was aborted is shown but not judged.
 */
#include <math.h>
#include <stdio.h>
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
    a->aborted.flags = flags;
    a->aborted.first_index = rd_complete_step(flags, a->load.n_steps, 0);
    a->aborted.last_index = rd_complete_step(flags, a->load.n_steps, 1);
    for (int64_t i = 0; flags && i < a->load.n_steps; i++) {
        if (!flags[i])
            continue;
        if (a->aborted.count < RD_ABORTED_LISTED) {
            int k = (int)a->aborted.count;
            a->aborted.listed_index[k] = i;
            resdiag_status st = resdiag_reader_abort_reason(rd, i, a->aborted.listed_reason[k],
                                                            sizeof a->aborted.listed_reason[k]);
            if (st)
                return st;
        }
        a->aborted.count++;
    }
    a->aborted.step_aborted = rd_analysis_step_aborted(a, a->load.step_index);
    if (!a->aborted.step_aborted)
        return RESDIAG_OK;
    return resdiag_reader_abort_reason(rd, a->load.step_index, a->aborted.step_reason,
                                       sizeof a->aborted.step_reason);
}

void rd_analysis_abort_verdict(rd_analysis *a)
{
    if (!a->aborted.step_aborted)
        return;
    a->verdict.v = RESDIAG_VERDICT_CANNOT_TELL;
    a->verdict.conf = RESDIAG_CONFIDENCE_NONE;
    a->verdict.mix_layers = -1;
    a->verdict.alpha = NAN;
    snprintf(a->verdict.why, sizeof a->verdict.why, "step %lld was aborted%s%.*s%s: its records are "
             "incomplete, not judged", (long long)a->load.step, a->aborted.step_reason[0] ? " (" : "",
             (int)(sizeof a->verdict.why - 96), a->aborted.step_reason,
             a->aborted.step_reason[0] ? ")" : "");
    a->verdict.conf_why[0] = '\0';
}
