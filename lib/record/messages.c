/*
 * messages.c - what a run says: every message goes to the run's log
 * handler (the options' one or the process-wide one), errors are kept for
 * resdiag_errmsg(), and client bugs are rate-limited.
 */
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "record/handle.h"

/* Client-bug messages are logged this many times per run, then suppressed,
 * so a hook misused in a loop does not flood the trainer's log. */
#define MAX_CLIENT_BUG_LOGS 20

static void run_vlog(resdiag *r, resdiag_log_priority prio, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&r->msg_lock);
    if (prio >= RESDIAG_LOG_ERROR)
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
    pthread_mutex_unlock(&r->msg_lock);
    rd_log(r->opt.log_fn, r->opt.log_user_data, prio, "%s", msg);
}

void rd_run_log(resdiag *r, resdiag_log_priority prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    run_vlog(r, prio, fmt, ap);
    va_end(ap);
}

resdiag_status rd_client_bug(resdiag *r, resdiag_status status, const char *fmt, ...)
{
    int n = atomic_fetch_add(&r->client_bugs, 1);
    if (n < MAX_CLIENT_BUG_LOGS) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        rd_run_log(r, RESDIAG_LOG_ERROR, "client bug: %s%s", msg,
                   n == MAX_CLIENT_BUG_LOGS - 1 ? " (further client-bug messages suppressed)"
                                                : "");
    } else {
        /* Still keep resdiag_errmsg() current. */
        pthread_mutex_lock(&r->msg_lock);
        va_list ap;
        va_start(ap, fmt);
        int k = snprintf(r->errmsg, sizeof r->errmsg, "client bug: ");
        vsnprintf(r->errmsg + k, sizeof r->errmsg - (size_t)k, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&r->msg_lock);
    }
    return status;
}

const char *resdiag_errmsg(const resdiag *r)
{
    return r ? r->errmsg : "";
}
