/*
 * split.h - one large tensor's statistics on several threads: the
 * caller's and a pool of persistent workers that a run starts once
 * (resdiag_open with hook_threads >= 2) and joins once (resdiag_destroy),
 * so that no hook starts a thread.
 *
 * A worker serves one part of one tensor at a time. Hooks on different
 * layers may run at once from several trainer threads (resdiag.h,
 * "Threads"): a hook takes the workers that are free and computes the
 * parts no free worker took on its own thread instead of waiting, so no
 * hook ever waits behind another layer's hook. Either way the rows split
 * into the same parts (they depend on the thread count asked for and the
 * row count only) and the parts merge in row order, so the result has the
 * same bits whoever computed which part.
 */
#ifndef RESDIAG_STATS_SPLIT_H
#define RESDIAG_STATS_SPLIT_H

#include "stats/stats.h"

/* Below this many bytes a second thread costs more than it saves: a
 * smaller tensor is one part (lib/record/team.c splits as this file). */
#define RD_SPLIT_MIN_BYTES (1u << 20)

typedef struct rd_split_pool rd_split_pool;

/* Starts `workers` worker threads (1 .. RESDIAG_MAX_HOOK_THREADS - 1),
 * every signal blocked in them (the trainer's signals keep going to the
 * trainer's threads). Returns 0 with *out holding all of them; or the
 * errno value (EAGAIN, ENOMEM, ...) of the first that could not start,
 * with *out holding those started before it, or NULL (and no thread left)
 * when none did. *started: how many run. */
int rd_split_pool_create(rd_split_pool **out, int workers, int *started);

/* Stops and joins every worker and frees the pool; NULL is a no-op. Not
 * while a call of rd_split_compute with it is running. In a child forked
 * from the process that started the workers (which has no copy of those
 * threads) it only frees the memory. */
void rd_split_pool_destroy(rd_split_pool *pool);

/* rd_stats_compute, with t's rows in P = min(threads, rows) fixed parts
 * (part k from row k * rows / P) merged in row order when t holds at least
 * 1 MiB; the free workers of pool compute parts 1.., the caller part 0 and
 * every part no free worker took (pool NULL, workers busy with other
 * tensors or fewer started, forked child), and takes back a part whose
 * worker has not begun it when the caller is done with its own. The same
 * bits in every case for the same input and threads (stats.h,
 * rd_stats_compute_split). threads <= 1 or a smaller tensor: one part.
 * Thread-safe: any number of threads may call it with one pool at once. */
void rd_split_compute(rd_split_pool *pool, int threads, double *fields, double *sketch,
                      double *row_norms, const resdiag_tensor *t, const rd_sketch_params *sp);

/* The work a pool's callers split, counted as it happens: the proof that
 * parts ran in parallel, which the bits cannot give (on some data and
 * CPUs every order of summation rounds to the same value). For tests and
 * the run's closing debug line. */
typedef struct rd_split_counts {
    long long tensors;    /* calls that split a tensor into parts */
    long long parts;      /* the parts of those calls */
    long long by_workers; /* of those parts, the ones a worker computed */
} rd_split_counts;

/* The counts of every rd_split_compute with this pool so far (all zero for
 * NULL; calls without a pool count nowhere). Exact once no call with the
 * pool runs. */
void rd_split_pool_counts(const rd_split_pool *pool, rd_split_counts *out);

/* The CPUs this process may run on (its affinity mask), 1 ..
 * RESDIAG_MAX_HOOK_THREADS: what hook_threads = 0 asks for. */
int rd_split_threads_available(void);

#endif
