/*
 * split.h - one large tensor's statistics on two threads: the caller's and
 * a persistent worker that a run starts once (resdiag_open with
 * hook_threads = 2) and joins once (resdiag_destroy), so that no hook
 * starts a thread.
 *
 * One worker serves one tensor at a time. Hooks on different layers may
 * run at once from several trainer threads (resdiag.h, "Threads"): the
 * hook that finds the worker taken computes both halves on its own thread
 * instead of waiting, so no hook ever waits behind another layer's hook.
 * Either way the rows split at rows/2 and the halves merge in row order,
 * so the result has the same bits whoever computed which half.
 */
#ifndef RESDIAG_STATS_SPLIT_H
#define RESDIAG_STATS_SPLIT_H

#include "stats/stats.h"

typedef struct rd_split_worker rd_split_worker;

/* Starts a worker thread with every signal blocked (the trainer's signals
 * keep going to the trainer's threads). Returns 0 and *out, or an errno
 * value (EAGAIN, ENOMEM, ...) with *out NULL and no thread left. */
int rd_split_worker_create(rd_split_worker **out);

/* Stops and joins the worker and frees it; NULL is a no-op. Not while a
 * call of rd_split_compute with it is running. In a child forked from the
 * process that started the worker (which has no copy of that thread) it
 * only frees the memory. */
void rd_split_worker_destroy(rd_split_worker *w);

/* rd_stats_compute, with rows [rows/2, rows) on the worker when t holds
 * at least 1 MiB and the worker is free; else (w NULL, worker busy with
 * another tensor, small tensor, forked child) on the caller's thread
 * alone. The same bits in every case for the same input (stats.h,
 * rd_stats_compute_split). Thread-safe: any number of threads may call it
 * with one worker at once. */
void rd_split_compute(rd_split_worker *w, double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp);

#endif
