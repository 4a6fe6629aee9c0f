/*
 * final_norm.c - whether the head reads a norm's output: what the head
 * reads (final_norm_out) against what enters the final norm.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/phases.h"

/* Two observations of one tensor: a sketch (else, without sketches, the
 * statistics) equal to rounding of the sketch sums themselves. A norm
 * changes even an already normalized input by its epsilon (1e-5 relative
 * for LayerNorm's default), far above this. */
#define SAME_TENSOR 1e-9
/* A difference below this (or the rounding floor) between a norm's output
 * and an input that is already normalized is what a unit-gain norm does to
 * it (its epsilon): no evidence of a norm. A real final norm of a raw
 * (pre-norm) stream changes it by O(1). */
#define IDENTITY_TOL 1e-4

static int same_tensor(const rd_site_data *p, const rd_site_data *q, int k, double *err)
{
    if (k > 0) {
        const double *v[2] = { p->sk, q->sk };
        const double c[2] = { 1, -1 };
        *err = rd_rel_combo(v, c, 2, k);
        return *err < SAME_TENSOR;
    }
    static const int fields[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_FROB,
                                  RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_NORM_STD,
                                  RESDIAG_FIELD_TOK_MEAN_MEAN, RESDIAG_FIELD_ABSMAX };
    *err = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        double x = p->st[fields[i]], y = q->st[fields[i]];
        double m = fmax(fabs(x), fabs(y));
        double e = m > 0 ? fabs(x - y) / m : x == y ? 0 : INFINITY;
        *err = fmax(*err, e);
    }
    return *err < SAME_TENSOR;
}

/* Whether the head reads a norm's output, from the data. FINAL_NORM_OUT is
 * what the head reads; it is compared with what enters the final norm
 * (FINAL_NORM_IN, else the stream leaving the last layer): the same tensor
 * means no norm there (an Identity in the final norm's place, or a trainer
 * without one that observes the head's input); a changed one, a norm.
 * Without any final-norm site: -1, not observed (logits alone say nothing
 * about what the head read). */
resdiag_status rd_analysis_final_norm(const resdiag_reader *rd, rd_analysis *a)
{
    int k = a->load.sketch_size, L = a->load.n_layers, S = a->load.n_sublayers;
    int64_t si = a->load.step_index;
    size_t kk = (size_t)(k > 0 ? k : 1);
    double *buf = calloc(3 * kk, sizeof *buf);
    if (!buf)
        return RESDIAG_E_NOMEM;
    rd_site_data in = { 0 }, out = { 0 }, x = { 0 };
    in.sk = buf;
    out.sk = buf + kk;
    x.sk = buf + 2 * kk;
    resdiag_status st;
    if ((st = rd_analysis_load_site(rd, a, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN, k,
                                    &in)) ||
        (st = rd_analysis_load_site(rd, a, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_OUT, k,
                                    &out)))
        goto out;
    if (!in.obs && !out.obs) {
        a->final_norm.reads_norm = -1;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "no final-norm site was recorded (final_norm_in, final_norm_out)");
        goto out;
    }
    if (!out.obs) {
        a->final_norm.reads_norm = 1;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "final_norm_in observed; its output is not");
        goto out;
    }
    const rd_site_data *ref = &in;
    const char *ref_name = "its input";
    if (!in.obs && L > 0) {
        if ((st = rd_analysis_load_site(rd, a, si, RESDIAG_FORWARD, L - 1, S - 1,
                                        RESDIAG_STREAM_OUT, k, &x)))
            goto out;
        ref = &x;
        ref_name = "the last layer's stream_out";
    }
    /* Schema 2 keeps the model sites' sketches as float64 and the block
     * sites' as float32 (doc/FORMAT.md): against the last stream_out, both
     * at float32, or the same tensor would differ by its rounding. */
    if (ref == &x && k > 0 && a->load.schema_version >= 2)
        for (int j = 0; j < k; j++)
            out.sk[j] = (double)(float)out.sk[j];
    double e = NAN;
    if (!ref->obs) {
        a->final_norm.reads_norm = 1;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "final_norm_out observed; nothing to compare it with");
    } else if (same_tensor(&out, ref, k, &e)) {
        a->final_norm.reads_norm = 0;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "what the head reads (final_norm_out) is %s unchanged (difference %.1e)",
                 ref_name, e);
    } else if (e < fmax(IDENTITY_TOL, rd_rounding_floor((const double *[]){ out.st, ref->st }, 2,
                                                        a->load.schema_version, 2)) &&
               rd_signature(ref->st, rd_unnorm_cv((int)ref->st[RESDIAG_FIELD_COLS])) ==
                   RD_SIG_NORMALIZED) {
        /* a unit-gain norm of a normalized input is an identity within its
         * epsilon: present or absent, the data cannot tell */
        a->final_norm.reads_norm = -1;
        a->final_norm.identity = 1;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "final_norm_out differs from %s (difference %.2g) only within rounding "
                 "or a norm's epsilon, and that input is already normalized: a norm there "
                 "cannot be told from an identity",
                 ref_name, e);
    } else {
        int sig = rd_signature(out.st, rd_unnorm_cv((int)out.st[RESDIAG_FIELD_COLS]));
        a->final_norm.reads_norm = 1;
        snprintf(a->final_norm.why, sizeof a->final_norm.why,
                 "final_norm_out differs from %s (difference %.2g)%s", ref_name, e,
                 sig == RD_SIG_NORMALIZED ? " and has equal token norms" : "");
    }
out:
    free(buf);
    return st;
}
