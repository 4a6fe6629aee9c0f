/*
 * verdict.h - the model's placement verdict, as verdict.c decides it
 * (a->verdict): the verdict, its confidence and reasons, and the hooks
 * that decided it.
 */
#ifndef RESDIAG_ANALYSIS_VERDICT_H
#define RESDIAG_ANALYSIS_VERDICT_H

#include "resdiag.h"

typedef struct rd_model_verdict {
    resdiag_verdict v;
    char pattern[RESDIAG_MAX_SUBLAYERS * 40]; /* PER_SUBLAYER: "attn: none, mlp: post" */
    int last_norm_is_final; /* POST: the last sublayer's own norm is the final norm */
    int n_zero_branches;    /* sublayers whose branch adds exactly 0 at the step */
    resdiag_confidence conf;
    int mix_layers;
    double alpha;
    int n_undecided;
    char why[768];
    char conf_why[256]; /* what makes the confidence less than high, or "" */
    /* the hooks that decided: layer, sublayer and call sites */
    int cs_layer, cs_sub, cs_layer2, cs_sub2;
    char *cs_norm_in, *cs_branch_out, *cs_stream_out, *cs_norm_in2;
} rd_model_verdict;

#endif
