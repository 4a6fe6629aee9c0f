/*
 * validate.h - the checks resdiag_open makes on the trainer's model and
 * options before anything is allocated or created. Internal.
 */
#ifndef RD_RECORD_VALIDATE_H
#define RD_RECORD_VALIDATE_H

#include "resdiag.h"

/* Messages for open() go to the options' handler, or the global one:
 * there is no handle yet. */
typedef struct open_ctx {
    resdiag_log_fn fn;
    void *user;
} open_ctx;

/* Logs the message as an error and returns st. */
resdiag_status rd_open_fail(const open_ctx *c, resdiag_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* OK, or the first problem (logged) of a model copied to the full size. */
resdiag_status rd_check_model(const open_ctx *c, const resdiag_model *m);
resdiag_status rd_check_options(const open_ctx *c, const resdiag_options *o);

#endif /* RD_RECORD_VALIDATE_H */
