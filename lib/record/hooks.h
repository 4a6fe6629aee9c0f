/*
 * hooks.h - what the hook entry points share (hooks.c: a tensor the
 * library reads; partial.c: statistics computed elsewhere): the checks of
 * the call, the slot claim, the merge of a step's calls into the slot,
 * CALL_SEQ, the call site and the update ratio, for either kind of data.
 * Internal.
 */
#ifndef RD_RECORD_HOOKS_H
#define RD_RECORD_HOOKS_H

#include <stdatomic.h>

#include "record/handle.h"

struct rd_stats_part;

/* What one hook call brings: a tensor (t), whose statistics the library
 * computes, or the partial statistics of one (p, when t is NULL), with
 * or without its per-token norms (row_norms, p->rows of them: a residual
 * add's side then pairs by norms, as a tensor's does), or, when t and p
 * are NULL, another site's last call (copy, same_as.h). Or a tensor whose
 * statistics are computed already (part: every row of t, its sketch's row
 * signs numbered after the rows the slot has seen; team.c), with its
 * norms in row_norms (t->rows of them) or none kept (NULL). */
struct rd_copy;
typedef struct rd_hook_data {
    const resdiag_tensor *t;
    const resdiag_partial *p;
    const double *row_norms;
    const struct rd_copy *copy;
    const struct rd_stats_part *part;
} rd_hook_data;

/* A hook of a run that is not recording the open step (or has none):
 * RESDIAG_E_STATE after close, the writer's sticky error, else OK (a
 * no-op). */
resdiag_status rd_hook_idle(resdiag *r, const char *fn, const char *file, int line);

/* The sketch parameters of data of width cols at this rank: its rows'
 * signs after the rank's base (row_sign_base), and a shard's columns at
 * their place in d_model (shard_col0; a tensor of width d_model on a
 * tensor-parallel rank is the same on every rank, taken as is). */
rd_sketch_params rd_hook_sketch(const resdiag *r, int64_t cols);

/* The checks of a tensor for function fn: dtype, shape, stride, data. */
resdiag_status rd_hook_check_tensor(resdiag *r, const char *fn, const resdiag_tensor *t,
                                    const char *file, int line);

/* A client bug (logged): block site `site` has no room in the file's
 * layout (branch_in.. with file_schema 1 or 2). */
resdiag_status rd_hook_site_needs_schema3(resdiag *r, const char *fn, resdiag_site site,
                                          const char *file, int line);

/* The arguments of resdiag_observe_at: direction, site, layer and
 * sublayer in range, the data well formed and of the model's width
 * (logits excepted). A client bug (logged) or OK. */
resdiag_status rd_hook_check_observe(resdiag *r, const char *fn, resdiag_direction dir,
                                     int layer, int sublayer, resdiag_site site, rd_hook_data d,
                                     const char *file, int line);

/* The index of parameter `name` of layer (or RESDIAG_MODEL_LEVEL) into its
 * layer's (or the model's) parameter names in *param (name NULL: *param
 * checked), the layer in range and in this rank's stage; else the client
 * bug (logged). */
resdiag_status rd_hook_param_index(resdiag *r, const char *fn, int layer, const char *name,
                                   int *param, const char *file, int line);

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

/* The table and slot of parameter `param` (an index rd_hook_param_index
 * checked) of layer, or of the model for RESDIAG_MODEL_LEVEL. */
void rd_hook_param_slot(const resdiag *r, int layer, int param, int *table, size_t *slot);

/* resdiag_observe_at for either kind of data, for a run recording the
 * open step (the entry points check r and rd_hook_idle first). */
resdiag_status rd_hook_observe(resdiag *r, const char *fn, resdiag_direction dir, int layer,
                               int sublayer, resdiag_site site, rd_hook_data d,
                               const char *file, int line);

/* resdiag_param_grad_at for either kind of data, likewise: the parameter
 * given by name (not NULL) or, with name NULL, by its index param into the
 * layer's (or the model's) parameter names. */
resdiag_status rd_hook_param_grad(resdiag *r, const char *fn, int layer, const char *name,
                                  int param, rd_hook_data d, const char *file, int line);

#endif /* RD_RECORD_HOOKS_H */
