/*
 * log.c - process-wide log handler and priority, and rd_log().
 */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/escape.h"

static void default_handler(resdiag_log_priority priority, const char *msg, void *user_data)
{
    (void)priority;
    (void)user_data;
    fprintf(stderr, "resdiag: %s\n", msg);
}

static resdiag_log_fn global_fn = default_handler;
static void *global_user;
static resdiag_log_priority global_priority = RESDIAG_LOG_ERROR;

void resdiag_set_log_handler(resdiag_log_fn fn, void *user_data)
{
    global_fn = fn ? fn : default_handler;
    global_user = fn ? user_data : NULL;
}

void resdiag_set_log_priority(resdiag_log_priority priority)
{
    global_priority = priority;
}

void rd_log(resdiag_log_fn fn, void *user, resdiag_log_priority prio, const char *fmt, ...)
{
    if (prio < global_priority)
        return;
    char raw[1024], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* A message may quote a run file's strings (a name the reader refuses)
     * or a path: text-escaped, so that every handler gets one clean line. */
    rd_text_escape(msg, sizeof msg, raw);
    if (fn)
        fn(prio, msg, user);
    else
        global_fn(prio, msg, global_user);
}
