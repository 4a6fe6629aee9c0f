/*
 * signals.c - SIGINT/SIGTERM for a recording trainer: the handler only
 * notes the signal and puts the previous disposition back (a second signal
 * acts as if resdiag were not there); steps.c sees the note at the next
 * resdiag_step_begin/step_end, writes and closes the file, and then raises
 * the signal again or returns RESDIAG_E_INTERRUPTED (resdiag.h).
 *
 * One run per process owns the handlers: a signal is process-wide.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>

#include "record/signals.h"

static const int g_sigs[] = { SIGINT, SIGTERM };
#define N_SIGS ((int)(sizeof g_sigs / sizeof *g_sigs))

static volatile sig_atomic_t g_pending;  /* signal number caught, 0: none */
static const resdiag *g_owner;           /* the run the handlers act for */
static int g_flags;
static int g_installed[N_SIGS];
static struct sigaction g_old[N_SIGS];

/* Async-signal-safe: sigaction and a sig_atomic_t store only. */
static void on_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < N_SIGS; i++)
        if (g_sigs[i] == sig && g_installed[i])
            sigaction(sig, &g_old[i], NULL);
    if (!g_pending)
        g_pending = sig;
    errno = saved;
}

resdiag_status resdiag_install_signal_handlers(resdiag *r, int flags)
{
    if (!r)
        return RESDIAG_E_NULL;
    if (flags & ~RESDIAG_SIGNALS_RETURN)
        return RESDIAG_E_INVALID;
    if (g_owner)
        return RESDIAG_E_STATE;
    g_owner = r;
    g_flags = flags;
    g_pending = 0;
    for (int i = 0; i < N_SIGS; i++) {
        struct sigaction old, sa;
        g_installed[i] = 0;
        if (sigaction(g_sigs[i], NULL, &old) != 0)
            continue;
        /* An ignored signal (nohup, a shell's background job) stays ignored. */
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            continue;
        g_old[i] = old;
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* The trainer's system calls go on as if nothing happened. */
        sa.sa_flags = SA_RESTART;
        g_installed[i] = 1;
        if (sigaction(g_sigs[i], &sa, NULL) != 0)
            g_installed[i] = 0;
    }
    return RESDIAG_OK;
}

int resdiag_signal_pending(void)
{
    return (int)g_pending;
}

int rd_signal_take(const resdiag *r, int *reraise)
{
    if (!r || r != g_owner || !g_pending)
        return 0;
    int sig = (int)g_pending;
    g_pending = 0;
    *reraise = !(g_flags & RESDIAG_SIGNALS_RETURN);
    return sig;
}

void rd_signals_release(const resdiag *r)
{
    if (!r || r != g_owner)
        return;
    for (int i = 0; i < N_SIGS; i++) {
        struct sigaction cur;
        /* Only where our handler is still in place: a handler the trainer
         * installed after ours stays. */
        if (g_installed[i] && sigaction(g_sigs[i], NULL, &cur) == 0 &&
            !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_signal)
            sigaction(g_sigs[i], &g_old[i], NULL);
        g_installed[i] = 0;
    }
    g_owner = NULL;
}

void rd_signal_reraise(const resdiag *r, int sig)
{
    rd_signals_release(r);
    /* The signal is not blocked here (a step function, not the handler):
     * the previous disposition acts at once, e.g. the default ends the
     * process with the signal as the trainer would have ended. */
    raise(sig);
}
