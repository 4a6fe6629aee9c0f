/*
 * steps.c - the step lifecycle of a handle: which steps are recorded,
 * step_begin / step_end, the batch of recorded steps and its writing
 * (at step_end when due, on resdiag_flush, at close), set_enabled, and
 * acting on a SIGINT/SIGTERM noted by signals.c.
 */
#include <math.h>
#include <string.h>

#include "common/utf8.h"
#include "record/handle.h"
#include "record/signals.h"
#include "record/team.h"

/* Appends the buffered steps. On failure the run stops recording for good
 * (sticky error), says so once, and drops the unwritten steps; what is on
 * disk stays readable. */
resdiag_status rd_write_batch(resdiag *r)
{
    if (r->sticky)
        return r->sticky;
    if (r->n_batched == 0)
        return RESDIAG_OK;
    char err[512];
    int changed = atomic_exchange(&r->callsites_changed, 0);
    resdiag_status st = rd_writer_append(r->writer, r->batch_steps, r->batch_times, r->batch,
                                         r->n_batched, r->callsites, changed, err, sizeof err);
    if (st) {
        r->sticky = st;
        rd_run_log(r, RESDIAG_LOG_ERROR,
                   "writing the run file failed after %lld steps: %s; recording stops here, "
                   "the trainer is not affected and the steps already written stay readable",
                   (long long)r->n_written, err);
    } else {
        r->n_written += (int64_t)r->n_batched;
        r->flushed_step = r->batch_steps[r->n_batched - 1];
    }
    r->n_batched = 0;
    r->t_last_flush = rd_now_seconds();
    /* Inside a recorded step (resdiag_flush), the open record moves to the
     * front of the emptied batch. */
    if (r->recording) {
        memmove(r->batch, r->cur, r->lay.record_len * sizeof *r->batch);
        r->cur = r->batch;
    }
    return st;
}

resdiag_status resdiag_flushed_step(const resdiag *r, int64_t *step)
{
    if (!r || !step)
        return RESDIAG_E_NULL;
    *step = r->flushed_step;
    return RESDIAG_OK;
}

/* A SIGINT/SIGTERM caught for this run (signals.c): write what is
 * buffered, close the file cleanly, then raise the signal again or make
 * every later call return RESDIAG_E_INTERRUPTED. Only from step_begin and
 * step_end, which never run concurrently with hooks. */
static resdiag_status take_signal(resdiag *r)
{
    int reraise = 0;
    int sig = rd_signal_take(r, &reraise);
    if (!sig)
        return RESDIAG_OK;
    r->recording = 0;
    r->cur = NULL;
    rd_write_batch(r);
    if (r->writer) {
        char err[512];
        resdiag_status cst = rd_writer_close(r->writer, err, sizeof err);
        if (cst && !r->sticky)
            rd_run_log(r, RESDIAG_LOG_ERROR, "closing the run file failed: %s", err);
        r->writer = NULL;
    }
    rd_run_log(r, RESDIAG_LOG_INFO, "signal %d: run file closed with %lld steps%s", sig,
               (long long)r->n_written, reraise ? ", raising the signal again" : "");
    r->sticky = RESDIAG_E_INTERRUPTED;
    if (reraise)
        rd_signal_reraise(r, sig);
    else
        rd_signals_release(r);
    return RESDIAG_E_INTERRUPTED;
}

resdiag_status resdiag_flush(resdiag *r)
{
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_flush after resdiag_close");
    /* Inside a recorded step only the steps before it are written: the open
     * one is not complete. */
    return rd_write_batch(r);
}
/* ---------------------------------------------------------------- steps */

static int step_selected(const resdiag *r, int64_t step)
{
    const resdiag_options *o = &r->opt;
    if (o->record_init_only)
        return !r->any_step;
    return step >= o->record_first && step <= o->record_last &&
           (step - o->record_first) % o->record_every == 0;
}

resdiag_status resdiag_step_begin(resdiag *r, int64_t step)
{
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_step_begin after resdiag_close");
    if (r->in_step)
        return rd_client_bug(r, RESDIAG_E_STATE,
                             "resdiag_step_begin(%lld) while step %lld is still open",
                             (long long)step, (long long)r->step);
    if (step < 0 || (r->any_step && step <= r->step))
        return rd_client_bug(r, RESDIAG_E_INVALID,
                             "resdiag_step_begin(%lld): step numbers must be >= 0 and increase "
                             "(last was %lld); number steps with a counter that keeps increasing "
                             "across sequences/epochs, e.g. step = seq * T + pos",
                             (long long)step, (long long)r->step);
    int selected = r->enabled && step_selected(r, step);
    r->any_step = 1;
    r->step = step;
    r->in_step = 1;
    if (take_signal(r))
        return RESDIAG_E_INTERRUPTED;
    if (r->sticky)
        return r->sticky;
    if (selected) {
        r->serial++;
        r->cur = r->batch + r->n_batched * r->lay.record_len;
        for (size_t i = 0; i < r->lay.record_len; i++)
            r->cur[i] = NAN;
        atomic_store(&r->seq, 0);
        r->recording = 1;
    }
    return RESDIAG_OK;
}

resdiag_status resdiag_step_end(resdiag *r)
{
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_step_end after resdiag_close");
    if (!r->in_step)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_step_end without resdiag_step_begin");
    r->in_step = 0;
    if (!r->recording)
        return take_signal(r) ? RESDIAG_E_INTERRUPTED : r->sticky;
    rd_tables_set_complete(&r->lay, r->cur); /* unless resdiag_step_abort marked it */
    const int alarms = rd_alarms_check(r); /* from the record, before it is written */
    r->recording = 0;
    r->cur = NULL;
    /* A team short of parts records nothing for its site; the step is written. */
    const resdiag_status teams = rd_teams_step_end(r);
    double now = rd_now_seconds();
    r->batch_steps[r->n_batched] = r->step;
    r->batch_times[r->n_batched] = now - r->t_open;
    r->n_batched++;
    if (take_signal(r)) { /* it wrote the batch */
        rd_alarms_notify(r, alarms);
        return RESDIAG_E_INTERRUPTED;
    }
    if (alarms) { /* the step that broke is in the file before the trainer hears of it */
        resdiag_status st = rd_write_batch(r);
        rd_alarms_notify(r, alarms);
        return st ? st : RESDIAG_ALARM;
    }
    /* The first recorded step (initialization) is the most precious: write it at once. */
    if (r->n_written == 0 || r->n_batched == (size_t)r->opt.flush_steps ||
        (r->opt.flush_seconds > 0 && now - r->t_last_flush >= r->opt.flush_seconds)) {
        resdiag_status st = rd_write_batch(r);
        return st ? st : teams;
    }
    return teams;
}

/* The reason as stored: cut to RESDIAG_MAX_ABORT_REASON - 1 bytes before a
 * character that would not fit whole; bad bytes as '?'. RESDIAG_OK, or
 * RESDIAG_E_INVALID (logged) when the reason is not UTF-8 free text. */
static resdiag_status abort_reason(resdiag *r, const char *reason, char *out)
{
    out[0] = '\0';
    if (!reason)
        return RESDIAG_OK;
    size_t at = 0, n = strlen(reason);
    rd_text_problem p = rd_utf8_check(reason, 1, &at);
    if (n > RESDIAG_MAX_ABORT_REASON - 1) {
        n = RESDIAG_MAX_ABORT_REASON - 1;
        while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80)
            n--; /* reason[n], the first byte left out, continues a character */
    }
    memcpy(out, reason, n);
    out[n] = '\0';
    if (p == RD_TEXT_OK)
        return RESDIAG_OK;
    rd_utf8_scrub(out);
    return rd_client_bug(r, RESDIAG_E_INVALID,
                         "resdiag_step_abort(step %lld): the reason %s at byte %zu; the step is "
                         "ended as aborted, the reason stored with '?' for each bad byte",
                         (long long)r->step,
                         p == RD_TEXT_NOT_UTF8 ? "is not valid UTF-8"
                                               : "holds a control character",
                         at);
}

resdiag_status resdiag_step_abort(resdiag *r, const char *reason)
{
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_step_abort after resdiag_close");
    if (!r->in_step)
        return rd_client_bug(r, RESDIAG_E_STATE,
                             "resdiag_step_abort without resdiag_step_begin: no step is open to "
                             "abort (the last one has ended)");
    char text[RESDIAG_MAX_ABORT_REASON];
    resdiag_status bad = abort_reason(r, reason, text);
    if (r->recording)
        rd_tables_set_aborted(&r->lay, r->cur, text);
    rd_run_log(r, RESDIAG_LOG_INFO, "step %lld aborted%s%s%s: %s", (long long)r->step,
               text[0] ? " (" : "", text, text[0] ? ")" : "",
               r->recording ? "its records are written, flagged incomplete"
                            : "it was not recorded");
    resdiag_status st = resdiag_step_end(r);
    return st ? st : bad;
}

int resdiag_step_is_recorded(const resdiag *r)
{
    return r && r->recording;
}

resdiag_status resdiag_set_enabled(resdiag *r, int enabled)
{
    if (!r || r->rank_idle)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_set_enabled after resdiag_close");
    r->enabled = enabled != 0;
    return RESDIAG_OK;
}

