/*
 * ranks.h - which rank of a job this process is: from the model's explicit
 * rank fields, else from the launcher's environment (ranks.c has the
 * precedence; doc/RANKS.md). Internal.
 */
#ifndef RD_RECORD_RANKS_H
#define RD_RECORD_RANKS_H

#include "record/validate.h"
#include "resdiag.h"

#define RD_JOB_ID_MAX 256 /* bytes of a job id kept, with its NUL */

typedef struct rd_rank {
    int rank, world_size;
    int local_rank;          /* -1: unknown */
    const char *source;      /* "explicit", "torchrun", "openmpi", "pmi", "slurm", "single" */
    char job_id[RD_JOB_ID_MAX]; /* "" when none (or dropped) */
} rd_rank;

/* The rank of model m (its rank fields already checked by
 * rd_check_model_ranks) into *out: the explicit rank when m->rank >= 0,
 * else the first launcher whose variables are set and well formed. Reads
 * the environment on every call (no cache). RESDIAG_E_INVALID (logged)
 * when m->world_size is given with RESDIAG_RANK_DETECT and the launcher
 * says otherwise. */
resdiag_status rd_resolve_rank(const open_ctx *c, const resdiag_model *m, rd_rank *out);

#endif /* RD_RECORD_RANKS_H */
