/*
 * analysis.h - the types of the analysis behind resdiag_analyze(): what
 * lib/analysis/ computes (driver.c runs the phases of phases.h) and
 * lib/render/ prints. Internal: the public API is the opaque
 * resdiag_analysis with its accessors in resdiag.h.
 */
#ifndef RESDIAG_ANALYSIS_H
#define RESDIAG_ANALYSIS_H

#include <stdarg.h>
#include <stdint.h>

#include "analysis/fit.h"
#include "resdiag.h"

/* A per-token norm spread (std/mean) below this is a norm output's in f32
 * (evidence.c says why); rd_signature widens it to a bf16 or f16 tensor's
 * unit roundoff. */
#define RD_NORM_CV 3e-4
/* Normalization signature of a tensor (rd_signature). */
enum { RD_SIG_UNKNOWN = 0, RD_SIG_NORMALIZED = 1, RD_SIG_NOT = 2, RD_SIG_UNCLEAR = 3 };

#define RD_MAX_WARNINGS 64
#define RD_WARNING_LEN 200
#define RD_MAX_RFIT RESDIAG_MAX_SUBLAYERS
#define RD_ABORTED_LISTED 8   /* aborted steps the report names (the rest counted) */
/* Strength of the evidence for a sublayer's verdict: the rival hypothesis's
 * error over max(the winner's, the rounding floor). From RD_SEP it is
 * decided (confidence medium), from RD_HIGH_SEP confidence high;
 * lib/analysis/placement.c says why. */
#define RD_SEP 10.0
#define RD_HIGH_SEP 25.0

/* The relations between the sites of a sublayer (bits of rd_sub.constructed). */
enum {
    RD_REL_ADD = 0, RD_REL_NX, RD_REL_NSUM, RD_REL_DEEP, RD_REL_YN, RD_REL_PAR, RD_REL_FN,
    RD_REL_BX, RD_REL_BN, RD_REL_FO, RD_REL_OID,
    RD_N_REL
};

/* One sublayer at the analysed step: relation errors (relative sketch
 * residuals, NaN = not computable) and the verdict. */
typedef struct rd_sub {
    resdiag_verdict v;
    resdiag_confidence conf;
    double alpha;     /* least-squares alpha of norm_in = alpha*stream_in + branch_out */
    double e_add;     /* stream_out = stream_in + branch_out (parallel: + all branches) */
    double e_nx;      /* norm_in = stream_in */
    double e_nsum;    /* norm_in = stream_in + branch_out */
    double e_deep;    /* norm_in = alpha*stream_in + branch_out */
    double e_yn;      /* stream_out = norm_out */
    double e_par;     /* parallel: every sublayer's stream_in equal */
    double e_fn;      /* branch_out = norm_out: what is added is the norm's output */
    double e_bx;      /* branch_in = stream_in: the branch reads the stream itself */
    double e_bn;      /* branch_in = norm_out: the branch reads the norm's output */
    double e_fo;      /* branch_out = out_norm_out: what is added is the output norm's */
    double e_oid;     /* out_norm_out = out_norm_in: the output norm changes nothing */
    double fit_pre, fit_post; /* worst relation of each family */
    double fit_branch_norm;   /* worst of e_add, e_fn: a norm on the branch (sandwich) */
    double floor;     /* what rounding alone can give a true relation (rd_rounding_floor) */
    double strength;  /* the rival's error / max(the winner's, floor); NaN without a rival */
    char conf_why[160]; /* why the confidence is not high ("" when it is) */
    /* Relations between two sites recorded from one tensor (bit RD_REL_*):
     * they hold by construction, so their e_* is NaN (no evidence) and
     * e_constructed[] keeps what was measured, for the record. */
    unsigned constructed;
    double e_constructed[RD_N_REL];
    int order;        /* hook order: 1 norm_in before the branch (branch_in, else
                         branch_out), 2 after, 0 unknown */
    int by_order;     /* the relations were within rounding: the hook order decided */
    int norm_on_branch; /* the norm sites held a norm on the branch's output */
    unsigned missing; /* bit b: site b not observed, but the relations that fit need it */
    char why[512];
} rd_sub;

/* The ranks of a job read as one (ranks.c; doc/RANKS.md): what each rank
 * with a file said alone, and what the report says about them. NULL in
 * the analysis of one file. */
#define RD_RANKS_LISTED 64     /* missing ranks listed by number (the rest counted) */
#define RD_RANKS_LINES 32      /* disagreement sentences kept (the rest counted) */
typedef struct rd_rank_row {
    int rank;
    resdiag_rank_state state;
    int64_t n_steps, last_step;
    char *why;                 /* REJECTED: the reason */
    int verdict;               /* alone (resdiag_verdict); -1 not judged (a stage that
                                  holds not every layer, a rank without steps) */
    int nf_found;              /* its own first non-finite value */
    int64_t nf_step;
    int nf_layer, nf_sub, nf_site, nf_param, nf_is_nan;
    char nf_model_param[RESDIAG_MAX_NAME]; /* the model parameter's name, there */
    resdiag_direction nf_dir;
} rd_rank_row;

typedef struct rd_ranks {
    int world_size, n_merged, n_rejected, n_missing, n_not_recorded;
    resdiag_split split;
    int n_rows;
    rd_rank_row *rows;         /* the ranks with a file, by rank */
    int missing[RD_RANKS_LISTED]; /* the first missing ranks (n_missing in all) */
    int64_t last_step;         /* the last step of the merged ranks */
    int first_nf_rank;         /* the rank whose first non-finite value came first, -1 */
    int n_lines, n_lines_all;
    char lines[RD_RANKS_LINES][RD_WARNING_LEN]; /* where ranks disagree, in words */
    int per_shard;             /* a tensor split: the per-token spreads are per shard */
} rd_ranks;

/* Grouped by the phase that fills them (phases.h), in the order they run;
 * the renderers (lib/render/) read them. */
struct resdiag_analysis {
    /* --- the run (load.c) */
    int n_layers, n_sublayers, d_model, sketch_size, schema_version;
    char **sublayer_names;
    int n_layer_params;
    char **param_names;
    char *head_param_name;       /* the parameter declared the output head, NULL if none */
    int file_rank, file_world;   /* the rank and world size of a file read alone (1 of 1 for
                                    one process; a merged job has ranks instead) */
    resdiag_split file_split;
    char *residual_param_name;   /* the per-layer residual-write matrix (W2), NULL if none */
    resdiag_block_kind block;
    resdiag_placement declared;
    int declared_mix;
    resdiag_norm_kind norm_kind;
    resdiag_run_kind run_kind;
    char *description, *writer_version, *created, *program;
    int64_t n_steps, *steps, step_index, step;
    double max_growth;           /* the option: warn above this growth */

    /* --- what was observed at the step (load.c): n_obs[dir][block site]
     * over all (layer, sublayer); model_obs[dir][model site 0..3] */
    int n_obs[2][RESDIAG_N_BLOCK_SITES];
    int model_obs[2][RESDIAG_N_MODEL_SITES];
    int stream_only;     /* no norm or branch site observed forward */
    int use_relations;   /* sketch relations decide (not stream-only, K > 0) */

    /* --- each sublayer (placement.c) */
    rd_sub *sub;                 /* (L, S) */
    resdiag_verdict *layer_v;    /* (L) from relations */
    int order_agree, order_disagree; /* hook order against the sublayers' verdicts */
    double *r;           /* (L, S) relative updates r = ||dx||/||x|| at the step */
    double *r_last;      /* (L, S) at the last recorded step */

    /* --- the stream over depth, k = 0..L (depth.c) */
    double *xnorm, *xrms, *xenergy; /* (L+1) */
    rd_fit fit_energy, fit_xlog;
    double growth;
    int *layer_sig;              /* (L) signature of the stream leaving each layer */
    double *layer_cv;            /* (L) its token-norm spread */
    rd_fit fit_r[RD_MAX_RFIT], fit_r_deep[RD_MAX_RFIT]; /* r over all layers, the deeper half */

    /* --- the verdict (verdict.c) */
    resdiag_verdict verdict;
    char pattern[RESDIAG_MAX_SUBLAYERS * 40]; /* PER_SUBLAYER: "attn: none, mlp: post" */
    int last_norm_is_final; /* POST: the last sublayer's own norm is the final norm */
    int n_zero_branches;    /* sublayers whose branch adds exactly 0 at the step */
    resdiag_confidence conf;
    int mix_layers;
    double alpha;
    int n_undecided;
    char why[768];
    char conf_why[256];          /* what makes the confidence less than high, or "" */
    /* the hooks that decided: layer, sublayer and call sites */
    int cs_layer, cs_sub, cs_layer2, cs_sub2;
    char *cs_norm_in, *cs_branch_out, *cs_stream_out, *cs_norm_in2;

    /* --- the final norm (final_norm.c) */
    int final_norm;      /* 1 the head reads a norm's output, 0 it does not, -1 not observed
                            or not told from an identity (final_norm_identity) */
    int final_norm_identity; /* the final norm's output equals its already normalized
                                input within rounding: a norm or an identity, the
                                data cannot tell */
    char final_norm_why[256];

    /* --- gradients (gradients.c) */
    int64_t grad_step;   /* step index used, -1 none */
    double *grad;        /* (L, P) ||dL/dW||_F */
    double *sgrad;       /* (L) ||dL/dx|| of the stream leaving each layer */
    double sgrad_embed;  /* ||dL/dx_0|| of the embedding (embed_out backward); NaN if not recorded */
    double head_grad;
    int head_is_param;   /* head_grad is head_param_name's gradient (else the logits') */
    rd_fit fit_grad[RESDIAG_MAX_PARAMS], fit_sgrad;
    int param_order[RESDIAG_MAX_PARAMS], n_order; /* residual_param_name's first */

    /* --- over training: the first and the last recorded step, index 0, 1
     * (depth.c) */
    double tr_growth[2];                       /* ||x_L|| / ||x_1|| */
    double tr_mean_r[2][RESDIAG_MAX_SUBLAYERS]; /* mean r over layers per sublayer */
    double tr_grad_ratio[2];                   /* first parameter's last/first layer gradient */

    /* --- non-finite values over every step (nonfinite.c) */
    int nf_found;
    int64_t nf_step, nf_step_index, nf_steps;
    int nf_layer, nf_sub, nf_site, nf_param;
    char nf_model_param[RESDIAG_MAX_NAME]; /* with nf_layer MODEL_LEVEL and nf_site -1:
                                              that model parameter's name */
    resdiag_direction nf_dir;
    double nf_nan, nf_inf, nan_total, inf_total;

    /* --- the trainer's metrics over every recorded step (metrics.c) */
    int n_metrics;
    char **metric_names;         /* (n_metrics) */
    double *metric_values;       /* (n_metrics, n_steps): metric m at step index i is
                                    [m * n_steps + i]; NaN where not given */

    /* --- the ranks of a merged job (ranks.c); NULL for one file */
    rd_ranks *ranks;

    /* --- warnings (warnings.c; depth.c adds massive activations) */
    int n_warnings;
    char warnings[RD_MAX_WARNINGS][RD_WARNING_LEN];

    /* --- the steps ended with resdiag_step_abort (aborted.c): records
     * incomplete, so never the first or last step, nor compared over the run */
    unsigned char *aborted;      /* (n_steps) 1: aborted; NULL: none was */
    int64_t n_aborted;
    int64_t first_index, last_index; /* the first and last complete step (with every
                                        step aborted: 0 and n_steps - 1) */
    int64_t aborted_index[RD_ABORTED_LISTED]; /* the first min(n_aborted, LISTED) */
    char aborted_reason[RD_ABORTED_LISTED][RESDIAG_MAX_ABORT_REASON]; /* "" none given */
    int step_aborted;            /* the analysed step is one of them: not judged */
    char step_abort_reason[RESDIAG_MAX_ABORT_REASON];

    /* --- the same analysis at the last recorded step, shown beside this
     * one (driver.c); NULL when this is the last step, or with
     * at_last_status when it failed */
    struct resdiag_analysis *at_last;
    resdiag_status at_last_status;
};
typedef struct resdiag_analysis rd_analysis;

/* 1 when recorded step si of the run was aborted (resdiag_step_abort). */
static inline int rd_analysis_step_aborted(const rd_analysis *a, int64_t si)
{
    return a->aborted && si >= 0 && si < a->n_steps && a->aborted[si];
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
