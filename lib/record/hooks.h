/*
 * hooks.h - the one write path of lib/record, shared by its files: what a
 * write call targets (rd_target: a site or a parameter gradient) and what
 * it brings (rd_hook_data: a tensor, partial statistics, a team's part, a
 * copy of another site's last call, an alias). Every public write entry
 * point (hooks.c) fills the two and calls rd_write, which resolves and
 * checks the target (target.c, the one prologue) and routes the source: a
 * team's part to team.c, a copy to same_as.c, which gather what they need
 * and hand it to rd_ingest (ingest.c, the one ingestion: claim, check the
 * data, compute or merge into the step's record, release), and everything
 * else straight to rd_ingest. Internal.
 */
#ifndef RD_RECORD_HOOKS_H
#define RD_RECORD_HOOKS_H

#include <stdatomic.h>

#include "record/handle.h"

struct rd_stats_part;
struct rd_copy;

typedef enum rd_target_kind { RD_TARGET_SITE, RD_TARGET_PARAM } rd_target_kind;

/* Where a write goes. The entry point fills the first block; resolving
 * (rd_target_resolve) checks it and fills the second. */
typedef struct rd_target {
    const char *fn;          /* the public function, as messages name it */
    const char *file;        /* the call site (NULL: messages say "?") */
    int line;
    /* resdiag_observe_alias has no call site: the messages about its
     * arguments name none (its stage and busy messages say "?:0") */
    int unlocated;
    /* one end of a copy between sites (resdiag_observe_same_as): "site" or
     * "source site", which its range messages name; NULL otherwise */
    const char *end;
    rd_target_kind kind;
    resdiag_direction dir;   /* a site: direction, layer, sublayer, site */
    int layer;               /* a parameter: its layer or RESDIAG_MODEL_LEVEL */
    int sublayer;
    resdiag_site site;
    int by_name;             /* a parameter given by name, else by its index param */
    const char *name;        /* as given; resolved: the model's own copy */
    int param;

    /* resolved */
    int model;               /* a model site */
    size_t cs;               /* the slot's index among every table's slots */
    size_t fields, sketch, calls; /* offsets into the step's record (sketch: sites) */
    add_state *add;          /* a residual add's STREAM_IN or BRANCH_OUT: its add */
} rd_target;

/* What one write brings. The statistics for a slot: a tensor (t), whose
 * statistics the library computes; or the partial statistics of one (p,
 * with or without its per-token norms: row_norms, p->rows of them, make a
 * residual add's side pair by norms, as a tensor's does); or a completed
 * team's (part: every row of t, its sketch's row signs numbered after the
 * rows the slot has seen, with its norms in row_norms, t->rows of them, or
 * none kept: NULL); or another site's last call (copy, same_as.h). Or
 * what rd_write routes before that: a team's part (team.c), a copy still
 * to take from another target (same_as.c), or an alias. */
typedef enum rd_source_kind {
    RD_SOURCE_TENSOR,    /* t */
    RD_SOURCE_PARTIAL,   /* p, row_norms */
    RD_SOURCE_TEAM_PART, /* t, team_part of n_parts */
    RD_SOURCE_TEAM_DONE, /* t, part, row_norms */
    RD_SOURCE_SAME_AS,   /* from */
    RD_SOURCE_COPY,      /* copy */
    RD_SOURCE_ALIAS,     /* alias_of */
} rd_source_kind;

typedef struct rd_hook_data {
    rd_source_kind kind;
    const resdiag_tensor *t;
    const resdiag_partial *p;
    const double *row_norms;
    const struct rd_copy *copy;
    const struct rd_stats_part *part;
    int team_part, n_parts;
    rd_target *from;
    resdiag_site alias_of;
} rd_hook_data;

/* hooks.c: a write call. Resolves the target, then records the source:
 * OK, a no-op's status (rd_hook_idle) or the client bug (logged). */
resdiag_status rd_write(resdiag *r, rd_target *t, const rd_hook_data *d);

/* ------------------------------------------------- target.c: the prologue */

/* A call that does nothing: a NULL handle (*st OK) or a run not recording
 * the open step (*st as rd_hook_idle says). Returns 1 then, else 0. */
int rd_hook_skips(resdiag *r, const char *fn, const char *file, int line, resdiag_status *st);

/* A write of a run that is not recording the open step (or has none):
 * RESDIAG_E_STATE after close, the writer's sticky error, else OK (a
 * no-op). */
resdiag_status rd_hook_idle(resdiag *r, const char *fn, const char *file, int line);

/* The one prologue of a write: a call that does nothing (rd_hook_skips),
 * then its NULL arguments (a parameter's name, a partial), a team part's
 * range, then the target's rules: a site's direction, its site (of this
 * file's schema), layer, sublayer and pipeline stage, or a parameter's
 * layer, stage and name or index; finally its slot (rd_target_locate).
 * d NULL: a target with no source of its own (a copy's source end).
 * Returns OK with *skipped 0, a no-op's status with *skipped 1, or the
 * client bug (logged). */
resdiag_status rd_target_resolve(resdiag *r, rd_target *t, const rd_hook_data *d,
                                 int *skipped);

/* The slot of a target whose fields are in range: cs, the offsets, add
 * (for a parameter, name and param as resolved). */
void rd_target_locate(const resdiag *r, rd_target *t);

/* What messages call the target's slot: "forward stream_in of layer 3
 * sublayer 1", "backward embed_out", "the gradient of 'w' in layer 2". */
void rd_target_label(char *out, size_t len, const rd_target *t);

/* -------------------------------------------------- ingest.c: the ingestion */

/* The one ingestion of a resolved target's statistics (or alias): checks
 * the data (rd_ingest_check), claims the slot (and a residual add's
 * add_state), checks a repeated call, computes or merges the data into the
 * open step's record with CALL_SEQ, the call site and the update ratio,
 * releases. OK or the client bug (logged). */
resdiag_status rd_ingest(resdiag *r, const rd_target *t, const rd_hook_data *d);

/* The checks of the data for its target: a tensor's, a partial's
 * consistency, and a site's width (d_model or shard_cols, LOGITS any). */
resdiag_status rd_ingest_check(resdiag *r, const rd_target *t, const rd_hook_data *d);

/* The checks of a tensor for function fn: dtype, shape, stride, data. */
resdiag_status rd_hook_check_tensor(resdiag *r, const char *fn, const resdiag_tensor *t,
                                    const char *file, int line);

/* The sketch parameters of data of width cols at this rank: its rows'
 * signs after the rank's base (row_sign_base), and a shard's columns at
 * their place in d_model (shard_col0; a tensor of width d_model on a
 * tensor-parallel rank is the same on every rank, taken as is). */
rd_sketch_params rd_hook_sketch(const resdiag *r, int64_t cols);

/* ------------------------------------------------------------ shared */

/* A slot's busy flag: 1 if this call took it (two calls at once for one
 * slot are a client bug: the loser returns RESDIAG_E_BUSY). */
static inline int rd_hook_claim(atomic_uchar *flag)
{
    return atomic_exchange_explicit(flag, 1, memory_order_acquire) == 0;
}

static inline void rd_hook_release(atomic_uchar *flag)
{
    atomic_store_explicit(flag, 0, memory_order_release);
}

/* Whether a site's calls keep their per-token norms (for a copy into
 * STREAM_IN or BRANCH_OUT, same_as.c): forward sites but LOGITS and
 * FINAL_NORM_OUT, which are never copied; no parameter gradient. */
static inline int rd_hook_keeps_norms(int param, resdiag_direction dir, resdiag_site site)
{
    return !param && dir == RESDIAG_FORWARD && site != RESDIAG_LOGITS &&
           site != RESDIAG_FINAL_NORM_OUT;
}

#endif /* RD_RECORD_HOOKS_H */
