/*
 * metrics.c - the trainer's own per-step numbers (resdiag_step_metric: its
 * loss, its learning rate) copied out of the run file for every recorded
 * step, for the loss curve and the reports. A file without metrics gives
 * none.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"

resdiag_status rd_analysis_metrics(const resdiag_reader *rd, rd_analysis *a)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int n = in->n_metrics;
    if (n <= 0 || a->load.n_steps <= 0)
        return RESDIAG_OK;
    /* n <= RESDIAG_MAX_METRICS and n_steps is what the file holds. */
    a->metrics.names = calloc((size_t)n, sizeof *a->metrics.names);
    a->metrics.values = malloc((size_t)n * (size_t)a->load.n_steps * sizeof *a->metrics.values);
    if (!a->metrics.names || !a->metrics.values)
        return RESDIAG_E_NOMEM;
    a->metrics.count = n;
    for (int m = 0; m < n; m++) {
        if (!(a->metrics.names[m] = rd_analysis_dupstr(in->metric_names[m])))
            return RESDIAG_E_NOMEM;
        resdiag_status st = resdiag_reader_metric(
            rd, m, 0, a->load.n_steps, a->metrics.values + (size_t)m * a->load.n_steps);
        if (st != RESDIAG_OK)
            return st;
    }
    return RESDIAG_OK;
}

int rd_analysis_loss_metric(const rd_analysis *a)
{
    for (int m = 0; m < a->metrics.count; m++)
        if (strcmp(a->metrics.names[m], "loss") == 0)
            return m;
    return a->metrics.count > 0 ? 0 : -1;
}
