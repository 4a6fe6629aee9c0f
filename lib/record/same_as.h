/*
 * same_as.h - one tensor, several sites (resdiag_observe_same_as,
 * resdiag_param_grad_same_as): what each slot keeps of its step's most
 * recent call so that another site can record that call without reading
 * the tensor again, and the copy that rd_ingest records in its place.
 * Internal.
 */
#ifndef RD_RECORD_SAME_AS_H
#define RD_RECORD_SAME_AS_H

#include "record/handle.h"
#include "record/hooks.h"

/* Per slot: the most recent call of the step, beyond what the slot itself
 * holds. Written only by the call that holds the slot (slot_busy), except
 * tag, which copies of sibling sites read without that claim. */
typedef struct rd_last_call {
    /* (serial << 32) | the slot whose hook read the tensor of this call:
     * the slot itself for a read, the source's origin for a copy. A tag of
     * another serial is of an earlier step. */
    _Atomic uint64_t tag;
    int64_t rows_before; /* rows of the slot's calls before this one: the sketch's first row */
    int partial;         /* statistics computed elsewhere that brought no per-token norms */
    /* Forward sites that are no residual add's side (whose norms live in the
     * add_state): the per-token norms of the call, for a copy into STREAM_IN
     * or BRANCH_OUT that pairs by them. norm_rows -1: not kept. */
    double *norms;
    int64_t norm_cap, norm_rows;
} rd_last_call;

/* A copy's data (rd_hook_data.copy): the source's last call. */
typedef struct rd_copy {
    const double *fields; /* (RESDIAG_N_FIELDS) CALL_SEQ is not taken */
    const double *sketch; /* (sketch_size) or NULL: none kept */
    const double *norms;  /* (rows) per-token norms, or NULL: none kept */
    int partial;          /* the source's call brought no norms (statistics from elsewhere) */
    int64_t rows_before;  /* the source's rows before that call */
    uint32_t origin;      /* the slot that read the tensor */
} rd_copy;

/* Allocates and frees what the slots keep (open.c): r->last (lay.n_slots)
 * and r->last_vals. Returns 0, or -1 when memory ran out. */
int rd_same_init(resdiag *r);
void rd_same_free(resdiag *r);

/* Where a later call of slot cs computes its own statistics before they
 * merge into the slot, so that they stay there as its last call's
 * (RESDIAG_N_FIELDS values, then sketch_size). */
static inline double *rd_same_vals(resdiag *r, size_t cs)
{
    return r->last_vals + cs * (RESDIAG_N_FIELDS + (size_t)r->sp.k);
}

/* Notes a call of slot cs (its claim held) whose statistics are in the
 * slot (rows_before 0) or in rd_same_vals: origin as in tag. */
void rd_same_noted(resdiag *r, size_t cs, int64_t rows_before, int partial, uint32_t origin);

/* A buffer for rows per-token norms of a call of slot cs (its claim held;
 * grows only when a call has more rows than any before), or NULL when
 * memory ran out (the call's norms are then not kept). */
double *rd_same_norms(resdiag *r, size_t cs, int64_t rows);

/* A copy (d: RD_SOURCE_SAME_AS, d->from its source, not yet resolved)
 * into the resolved target t: resolves the source, checks the pair,
 * claims the source, records its last call at t (rd_ingest) and, for
 * sites of one sublayer, the alias. */
resdiag_status rd_copy_write(resdiag *r, const rd_target *t, const rd_hook_data *d);

#endif /* RD_RECORD_SAME_AS_H */
