/*
 * signals.h - what the handle (steps.c, open.c) needs from signals.c:
 * whether a SIGINT/SIGTERM caught for a run is waiting, and re-raising it
 * once the file is closed.
 */
#ifndef RD_SIGNALS_H
#define RD_SIGNALS_H

#include "resdiag.h"

/* The signal caught for run r and not yet acted on (0: none); taking it
 * clears it. *reraise says whether the trainer asked for it to be raised
 * again after the close (RESDIAG_SIGNALS_RERAISE). */
int rd_signal_take(const resdiag *r, int *reraise);
/* Restores the dispositions that resdiag_install_signal_handlers replaced,
 * if r installed them. */
void rd_signals_release(const resdiag *r);
/* Releases, then raises sig with the trainer's previous disposition. */
void rd_signal_reraise(const resdiag *r, int sig);

#endif /* RD_SIGNALS_H */
