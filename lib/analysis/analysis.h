/*
 * analysis.h - the analysis behind resdiag_analyze(): one member per
 * phase (driver.c runs the phases of phases.h), each of a type declared
 * in the header of the file that fills it, which writes only its own
 * member and reads the others'; lib/render/ prints it. Internal: the
 * public API is the opaque resdiag_analysis with its accessors in
 * resdiag.h.
 */
#ifndef RESDIAG_ANALYSIS_H
#define RESDIAG_ANALYSIS_H

#include <stdarg.h>
#include <stdint.h>

#include "analysis/aborted.h"
#include "analysis/consequences.h"
#include "analysis/depth.h"
#include "analysis/final_norm.h"
#include "analysis/gradients.h"
#include "analysis/load.h"
#include "analysis/measures.h"
#include "analysis/metrics.h"
#include "analysis/nonfinite.h"
#include "analysis/observe.h"
#include "analysis/over_run.h"
#include "analysis/placement.h"
#include "analysis/ranks.h"
#include "analysis/training.h"
#include "analysis/verdict.h"
#include "analysis/warnings.h"
#include "resdiag.h"

/* A per-token norm spread (std/mean) below this is a norm output's in f32
 * (evidence.c says why); rd_signature widens it to a bf16 or f16 tensor's
 * unit roundoff. */
#define RD_NORM_CV 3e-4
/* Normalization signature of a tensor (rd_signature). */
enum { RD_SIG_UNKNOWN = 0, RD_SIG_NORMALIZED = 1, RD_SIG_NOT = 2, RD_SIG_UNCLEAR = 3 };

/* In the order the phases run; the name of each member is its file's. */
struct resdiag_analysis {
    rd_load load;             /* load.c: the run, the step asked for */
    rd_aborted aborted;       /* aborted.c: the aborted steps */
    rd_observe observe;       /* observe.c: the sites observed at the step */
    rd_placement placement;   /* placement.c: each sublayer, the relative updates */
    rd_depth depth;           /* depth.c: the stream over depth */
    rd_final_norm final_norm; /* final_norm.c: whether the head reads a norm */
    rd_model_verdict verdict; /* verdict.c: the model's verdict */
    rd_gradients gradients;   /* gradients.c: the gradients, the parameters' order */
    rd_training training;     /* training.c: the first and the last complete step */
    rd_nonfinite nonfinite;   /* nonfinite.c: the first NaN / Inf over the run */
    rd_metrics metrics;       /* metrics.c: the trainer's metrics */
    rd_ranks *ranks;          /* ranks.c: the ranks of a merged job; NULL for one file */
    rd_over_run over_run;     /* over_run.c: the warned-of conditions at every step */
    rd_measures measures;     /* measures.c: what the consequences speak of */
    rd_consequences consequences; /* consequences.c: the sources' findings that apply */
    rd_warnings warnings;     /* warnings.c: what the report warns about */

    /* driver.c: the same analysis at the last complete step, shown beside
     * this one; NULL when this is the last step, or with at_last_status
     * when it failed */
    struct resdiag_analysis *at_last;
    resdiag_status at_last_status;
};
typedef struct resdiag_analysis rd_analysis;

/* 1 when recorded step si of the run was aborted (resdiag_step_abort). */
static inline int rd_analysis_step_aborted(const rd_analysis *a, int64_t si)
{
    return a->aborted.flags && si >= 0 && si < a->load.n_steps && a->aborted.flags[si];
}

/* ------------------------------------------------ evidence.c, verdict.c */

/* ||sum_j c[j] v[j]|| / max_j ||c[j] v[j]|| over sketches of length k:
 * the relative residual of the relation sum_j c[j] v[j] = 0. NaN when a
 * term is not finite; 0 when every term is 0. */
double rd_rel_combo(const double *const *v, const double *c, int n, int k);
/* alpha minimising ||ni - alpha x - f||; *err the relative residual. */
double rd_fit_alpha(const double *ni, const double *x, const double *f, int k, double *err);
/* RD_SIG_* of a tensor's statistics (RESDIAG_N_FIELDS), with the token
 * norm spread above which it is "not normalized". */
int rd_signature(const double *stats, double cv_unnorm);
/* What rounding alone can leave in a true relation between tensors with
 * these statistics (RESDIAG_N_FIELDS each), relative to its largest term. */
double rd_rounding_floor(const double *const *stats, int n, int schema_version, int terms);
/* metrics.c: the metric the loss curve shows: the one named "loss", else
 * the first declared; -1 when the run has none. */
int rd_analysis_loss_metric(const rd_analysis *a);
/* 1 when some sublayer recorded a norm on its branch's output (out_norm_in
 * or out_norm_out): only then can a pre-norm verdict refute a sandwich. */
int rd_out_norm_recorded(const rd_analysis *a);
/* Declared placement against the verdict: 1 agrees, 0 not, -1 cannot say. */
int rd_declared_agrees(const rd_analysis *a);

#endif
