/*
 * metrics.c - resdiag_step_metric: the trainer's own per-step numbers (its
 * loss, its learning rate) into the open step's record, beside the
 * statistics. Like a hook it only fills the record; step_end writes it.
 */
#include <string.h>

#include "common/escape.h"
#include "format/metric_value.h"
#include "record/handle.h"

/* Index of name among the declared metrics, or -1. */
static int metric_index(const resdiag *r, const char *name)
{
    for (int i = 0; i < r->model.n_metrics; i++)
        if (strcmp(r->model.metric_names[i], name) == 0)
            return i;
    return -1;
}

resdiag_status resdiag_step_metric(resdiag *r, const char *name, double value)
{
    static const char fn[] = "resdiag_step_metric";
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "%s after resdiag_close", fn);
    if (!name)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: name is NULL", fn);
    /* Checked in every step, recorded or not: a misspelt name shows at once. */
    int m = metric_index(r, name);
    if (m < 0) {
        char shown[RESDIAG_MAX_NAME * 4];
        rd_text_escape(shown, sizeof shown, name);
        return rd_client_bug(r, RESDIAG_E_INVALID,
                             "%s: '%s' is not a declared metric (resdiag_model.metric_names "
                             "declares %d)", fn, shown, r->model.n_metrics);
    }
    if (r->sticky)
        return r->sticky;
    if (!r->in_step) {
        if (!r->metric_outside_noted) {
            r->metric_outside_noted = 1;
            rd_run_log(r, RESDIAG_LOG_DEBUG, "%s('%s') outside a step: not recorded; give the "
                       "value between resdiag_step_begin and resdiag_step_end", fn, name);
        }
        return RESDIAG_OK;
    }
    if (!r->recording)
        return RESDIAG_OK;
    /* a NaN given is kept apart from the NaN of "not given" */
    r->cur[r->lay.tables[RD_T_METRICS].offset + (size_t)m] = rd_metric_stored(value);
    return RESDIAG_OK;
}
