/*
 * placement.h - what placement.c finds in each sublayer at the analysed
 * step (a->placement): the relations between its sites and where its
 * norms sit, the layers' verdicts, the hook-order tally, and the relative
 * updates the other phases read (loaded here once).
 */
#ifndef RESDIAG_ANALYSIS_PLACEMENT_H
#define RESDIAG_ANALYSIS_PLACEMENT_H

#include "resdiag.h"

/* Strength of the evidence for a sublayer's verdict: the rival hypothesis's
 * error over max(the winner's, the rounding floor). From RD_SEP it is
 * decided (confidence medium), from RD_HIGH_SEP confidence high;
 * placement.c says why. */
#define RD_SEP 10.0
#define RD_HIGH_SEP 25.0

/* The relations between the sites of a sublayer (bits of rd_sub.constructed). */
enum {
    RD_REL_ADD = 0,
    RD_REL_NX,
    RD_REL_NSUM,
    RD_REL_DEEP,
    RD_REL_YN,
    RD_REL_PAR,
    RD_REL_FN,
    RD_REL_BX,
    RD_REL_BN,
    RD_REL_FO,
    RD_REL_OID,
    RD_N_REL
};

/* One sublayer at the analysed step: relation errors (relative sketch
 * residuals, NaN = not computable) and the verdict. */
typedef struct rd_sub {
    resdiag_verdict v;
    resdiag_confidence conf;
    double alpha;             /* least-squares alpha of norm_in = alpha*stream_in + branch_out */
    double e_add;             /* stream_out = stream_in + branch_out (parallel: + all branches) */
    double e_nx;              /* norm_in = stream_in */
    double e_nsum;            /* norm_in = stream_in + branch_out */
    double e_deep;            /* norm_in = alpha*stream_in + branch_out */
    double e_yn;              /* stream_out = norm_out */
    double e_par;             /* parallel: every sublayer's stream_in equal */
    double e_fn;              /* branch_out = norm_out: what is added is the norm's output */
    double e_bx;              /* branch_in = stream_in: the branch reads the stream itself */
    double e_bn;              /* branch_in = norm_out: the branch reads the norm's output */
    double e_fo;              /* branch_out = out_norm_out: what is added is the output norm's */
    double e_oid;             /* out_norm_out = out_norm_in: the output norm changes nothing */
    double fit_pre, fit_post; /* worst relation of each family */
    double fit_branch_norm;   /* worst of e_add, e_fn: a norm on the branch (sandwich) */
    double floor;       /* what rounding alone can give a true relation (rd_rounding_floor) */
    double strength;    /* the rival's error / max(the winner's, floor); NaN without a rival */
    char conf_why[160]; /* why the confidence is not high ("" when it is) */
    /* Relations between two sites recorded from one tensor (bit RD_REL_*):
     * they hold by construction, so their e_* is NaN (no evidence) and
     * e_constructed[] keeps what was measured, for the record. */
    unsigned constructed;
    double e_constructed[RD_N_REL];
    int order;          /* hook order: 1 norm_in before the branch (branch_in, else
                         branch_out), 2 after, 0 unknown */
    int by_order;       /* the relations were within rounding: the hook order decided */
    int norm_on_branch; /* the norm sites held a norm on the branch's output */
    unsigned missing;   /* bit b: site b not observed, but the relations that fit need it */
    char why[512];
} rd_sub;

typedef struct rd_placement {
    rd_sub *sub;                     /* (L, S) */
    resdiag_verdict *layer_v;        /* (L) from relations */
    int order_agree, order_disagree; /* hook order against the sublayers' verdicts */
    /* relative updates r = ||dx||/||x|| (L, S), at the analysed step and at
     * the first and the last complete step */
    double *r, *r_first, *r_last;
} rd_placement;

#endif
