/*
 * handle.h - the private struct behind a resdiag handle, shared by the
 * files of lib/record: open.c creates and frees it, steps.c runs the step
 * lifecycle and writes batches, the write path (hooks.h: hooks.c,
 * target.c, ingest.c, team.c, same_as.c) and update_ratio.c fill the open
 * step's record, messages.c logs for it. Internal.
 *
 * A hook computes its statistics straight into the current step's record
 * (a slot per site, so hooks for different layers never touch the same
 * memory) and returns; only step_end, flush and close reach the writer.
 */
#ifndef RD_RECORD_HANDLE_H
#define RD_RECORD_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "format/tables.h"
#include "h5/writer.h"
#include "resdiag.h"
#include "stats/split.h"
#include "stats/stats.h"

/* Per (layer, sublayer): what the update ratio needs from the two tensors
 * of the add, whichever hook comes first. A step may call each of them
 * several times (micro-batches, one token per call): the k-th STREAM_IN
 * call pairs with the k-th BRANCH_OUT call, and the per-token ratios of
 * every pair are summed. Only that layer's hooks touch it, one at a time:
 * busy is held by the STREAM_IN or BRANCH_OUT call that is using it (see
 * rd_ingest in ingest.c). */
typedef struct add_state {
    double *in_norms;  /* (cap) per-token norms of the latest STREAM_IN call */
    double *br_norms;  /* (cap) per-token norms of the latest BRANCH_OUT call */
    int64_t cap;
    int64_t in_rows, br_rows;   /* rows of those calls; -1: their norms were not kept */
    int in_partial, br_partial; /* those calls were statistics computed elsewhere (no norms) */
    double br_ratio_sum;        /* ... and the BRANCH_OUT one's ratio_sum, ratio_rows */
    int64_t br_ratio_rows;
    uint64_t mark;              /* step serial that the counts below belong to */
    int64_t in_calls, br_calls; /* calls of each in that step */
    double tok_sum;             /* sum of ||dx_i|| / ||x_i|| over the paired rows */
    int64_t tok_n;              /* rows in tok_sum */
    int tok_unpaired;           /* a call found no partner of the same rows: no per-token mean */
    atomic_uchar busy;
} add_state;

struct resdiag {
    /* The model as given, with every string owned by the handle. */
    resdiag_model model;
    char **owned_strings;
    size_t n_owned;
    resdiag_options opt;
    rd_tables lay;
    float *tau;        /* (2 * sp.tau_len) the column signs, twice: a shard's signs
                          start anywhere in it (stats.h, col0) */
    rd_sketch_params sp; /* row0 0 and col0 0; a hook adds the two below */
    /* Jobs of several ranks (doc/RANKS.md). Added to every row sign index:
     * rank << 40 for DATA and SEQUENCE splits, so that each rank's rows have
     * their own signs; 0 otherwise (TENSOR and PIPELINE ranks see the same
     * tokens) and for one process. */
    int64_t row_sign_base;
    /* TENSOR split: a tensor of width shard_cols is the columns
     * shard_col0 .. +shard_cols-1 of d_model (sketch and ABSMAX_COL global);
     * -1 otherwise. */
    int64_t shard_col0;
    /* PIPELINE split: the layers this rank holds, layer_lo .. layer_hi-1
     * (0 .. n_layers otherwise). */
    int layer_lo, layer_hi;
    /* This rank does not record (record_rank_every): there is no file and
     * every call is a no-op that returns OK. */
    int rank_idle;
    int rank;          /* this process's rank (0 for one process), for alarms */

    enum { RUN_OPEN, RUN_CLOSED } state;
    int enabled;
    int in_step;
    int recording;     /* the open step is recorded */
    int any_step;      /* a step has been begun */
    int64_t step;      /* number of the open (or last) step */
    uint64_t serial;   /* recorded steps begun, identifies the open one */
    atomic_int seq;    /* hook calls in the open step */

    /* Recorded steps not yet written: (opt.flush_steps, lay.record_len). */
    double *batch;
    int64_t *batch_steps; /* (opt.flush_steps) */
    double *batch_times;  /* (opt.flush_steps) */
    size_t n_batched;
    double *cur;          /* record of the open recorded step, inside batch */
    int64_t n_written;    /* steps on disk */
    int64_t flushed_step; /* trainer's number of the last step on disk, -1 if none */
    double t_open, t_last_flush;

    rd_callsite *callsites; /* (lay.n_slots) */
    atomic_int callsites_changed;
    atomic_uchar *slot_busy; /* (lay.n_slots) held by the hook writing that slot */
    add_state *adds;        /* (n_layers * n_sublayers) */
    /* same_as.c: each slot's most recent call in the step, for a copy to
     * another site (lay.n_slots; last_vals: a later call's statistics,
     * lay.n_slots x (RESDIAG_N_FIELDS + sp.k)) */
    struct rd_last_call *last;
    double *last_vals;
    rd_split_pool *split;   /* hook_threads >= 2: the workers; NULL: none could start */
    /* team calls (team.c): every slot's team, made by the first one; NULL before */
    _Atomic(struct rd_teams *) teams;

    rd_writer *writer;
    resdiag_status sticky;  /* the writer failed: hooks and steps return this */

    pthread_mutex_t msg_lock;
    char errmsg[512];
    atomic_int client_bugs;
    atomic_int outside_noted; /* a hook outside a step was logged (once, DEBUG) */
    int metric_outside_noted; /* resdiag_step_metric outside a step was logged (once) */

    /* alarms.c: the alarms fired so far, one per kind at most, in order */
    resdiag_alarm alarms[RESDIAG_N_ALARM_KINDS];
    int n_alarms;
};

/* messages.c: a message for this run, to its log handler; ERROR and above
 * also become resdiag_errmsg(). */
void rd_run_log(resdiag *r, resdiag_log_priority prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Logs "client bug: ..." (rate-limited) and returns status. */
resdiag_status rd_client_bug(resdiag *r, resdiag_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* alarms.c: checks the open step's record (r->cur) against the declared
 * alarms; appends those that fire to r->alarms and returns how many did.
 * rd_alarms_notify calls alarm_fn for the last n of them. */
int rd_alarms_check(resdiag *r);
void rd_alarms_notify(resdiag *r, int n);

/* steps.c: appends the buffered steps (see there for what a failure does). */
resdiag_status rd_write_batch(resdiag *r);

static inline double rd_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* RD_RECORD_HANDLE_H */
