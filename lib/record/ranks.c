/*
 * ranks.c - resolves the rank of this process in its job (ranks.h). The
 * model's explicit rank wins; else the launchers' variables are tried in
 * this order, the first complete one counting:
 *   torchrun  RANK, WORLD_SIZE, LOCAL_RANK; job id TORCHELASTIC_RUN_ID
 *   Open MPI  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
 *             OMPI_COMM_WORLD_LOCAL_RANK; job id OMPI_MCA_orte_ess_jobid,
 *             else OMPI_MCA_ess_base_jobid
 *   MPICH/PMI PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
 *   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; job id SLURM_JOB_ID
 * torchrun first because torchrun under Slurm or mpirun sets its own
 * variables for the processes it starts, which are the ones that train;
 * Slurm last because srun also runs MPI programs, whose MPI variables are
 * the more specific. A launcher counts when its rank and size are both
 * integers with 0 <= rank < size; a set but malformed pair is said (INFO)
 * and the next launcher is tried. None: rank 0 of 1 ("single").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/utf8.h"
#include "record/ranks.h"

typedef struct launcher {
    const char *source;
    const char *rank, *size, *local;
    const char *job_ids[2]; /* the first one set counts; NULL ends */
} launcher;

static const launcher launchers[] = {
    { "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", { "TORCHELASTIC_RUN_ID", NULL } },
    { "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      { "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid" } },
    { "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", { NULL, NULL } },
    { "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", { "SLURM_JOB_ID", NULL } },
};

/* A decimal int without sign or spaces into *out; 0, or -1 if s is not one. */
static int parse_int(const char *s, int *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* The launcher's job id into out, or "" when unset or not printable text
 * (then said once, INFO: the id only serves to match a job's files). */
static void take_job_id(const open_ctx *c, const launcher *l, char *out)
{
    out[0] = '\0';
    for (int i = 0; i < 2 && l->job_ids[i]; i++) {
        const char *v = getenv(l->job_ids[i]);
        if (!v)
            continue;
        if (rd_utf8_check(v, 0, NULL) != RD_TEXT_OK || strlen(v) >= RD_JOB_ID_MAX)
            rd_log(c->fn, c->user, RESDIAG_LOG_INFO,
                   "resdiag_open: %s is not UTF-8 text of at most %d bytes without control "
                   "characters; the run file records no job id", l->job_ids[i],
                   RD_JOB_ID_MAX - 1);
        else
            snprintf(out, RD_JOB_ID_MAX, "%s", v);
        return;
    }
}

/* 1 and *out when launcher l's variables give a rank; 0 otherwise. */
static int from_launcher(const open_ctx *c, const launcher *l, rd_rank *out)
{
    const char *rs = getenv(l->rank), *ws = getenv(l->size);
    if (!rs && !ws)
        return 0;
    int rank = -1, world = 0;
    if (parse_int(rs, &rank) || parse_int(ws, &world) || rank >= world) {
        rd_log(c->fn, c->user, RESDIAG_LOG_INFO,
               "resdiag_open: %s=%s%s%s and %s=%s%s%s do not give a rank 0 <= rank < size; "
               "not taken from %s", l->rank, rs ? "'" : "", rs ? rs : "(unset)", rs ? "'" : "",
               l->size, ws ? "'" : "", ws ? ws : "(unset)", ws ? "'" : "", l->source);
        return 0;
    }
    int local = -1;
    const char *ls = getenv(l->local);
    if (ls && parse_int(ls, &local))
        local = -1;
    out->rank = rank;
    out->world_size = world;
    out->local_rank = local;
    out->source = l->source;
    take_job_id(c, l, out->job_id);
    return 1;
}

resdiag_status rd_resolve_rank(const open_ctx *c, const resdiag_model *m, rd_rank *out)
{
    memset(out, 0, sizeof *out);
    out->local_rank = -1;
    if (m->rank >= 0) {
        out->rank = m->rank;
        out->world_size = m->world_size;
        out->source = "explicit";
        return RESDIAG_OK;
    }
    int found = 0;
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers && !found; i++)
        found = from_launcher(c, &launchers[i], out);
    if (!found) {
        out->rank = 0;
        out->world_size = 1;
        out->source = "single";
    }
    if (m->world_size >= 1 && m->world_size != out->world_size)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: world_size is %d but the rank is to be "
                            "detected and %s says %d; give rank with world_size, or leave "
                            "world_size 0", m->world_size,
                            found ? out->source : "no launcher variable", out->world_size);
    return RESDIAG_OK;
}
