/*
 * log.h - the library's only way to say anything. Messages go to the run's
 * handler, else the process-wide one, else "resdiag: msg" on stderr; every
 * message is text-escaped first (escape.h): one line, no control
 * characters, valid UTF-8.
 */
#ifndef RESDIAG_LOG_H
#define RESDIAG_LOG_H

#include "resdiag.h"

/* fn may be NULL: use the process-wide handler. printf-style. */
void rd_log(resdiag_log_fn fn, void *user, resdiag_log_priority prio, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
