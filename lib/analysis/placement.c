/*
 * placement.c - where a sublayer's norms sit, from the relations between
 * the sketches of its sites (sketches are linear, so sk(x + f) = sk(x) +
 * sk(f) up to rounding) and the order of its hook calls: pre-norm,
 * post-norm, deepnorm (with alpha), sandwich, reordered, a parallel block,
 * no norm, zero branches, inconsistent or cannot tell, with the confidence
 * and the reason (a->placement, placement.h). A signature (equal token
 * norms) only supports; the declared placement is never used to decide.
 * Also the relative updates of every sublayer, read here once for every
 * phase.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"

/* ------------------------------------------------------------ tolerances */

/* A relation "a = b + c" holds when the sketch residual is below HOLD times
 * the largest term. Sketches of f32 tensors satisfy true relations to ~1e-6
 * (tinygpt: 1e-7); bf16 tensors carry a relative rounding of 2^-8 per
 * element, which after the sketch's signed sums is a residual of ~2^-8/sqrt(3)
 * ~ 2e-3 of the largest term typically and of order 1e-2 in the worst case:
 * 0.03 leaves a factor 3 over that. A false relation misses by the size of
 * the missing term: O(1) when the terms are comparable (FAIL = 0.2). */
#define HOLD 0.03
#define FAIL 0.2
/* At initialization a branch can be 1e-4 of the stream (post-norm, gpt2
 * init), so the relations of pre- and post-norm differ only by the branch:
 * both "hold" within HOLD. The hypothesis that fits is then still SEP times
 * better than the other one whenever the branch is above the rounding
 * noise; when it is not, the sublayer is "cannot tell". */
#define SEP RD_SEP
/* Confidence follows the strength of the evidence: the error of the best
 * rival hypothesis over max(the winner's error, the rounding floor). From
 * SEP the sublayer is decided ("medium"); from HIGH_SEP the rival misses by
 * far more than any rounding or near-miss could explain ("high"). 25 puts a
 * rival off by FAIL in bf16 (floor 2^-7, evidence.c) at "high". */
#define HIGH_SEP RD_HIGH_SEP
/* DeepNorm's alpha must differ from 1 by more than this (tinygpt: alpha =
 * (2L)^(1/4) >= 1.19 for L >= 1); and the alpha = 1 fit must be SEP times
 * worse than the fitted alpha. */
#define ALPHA_MIN_DIFF 0.05

/* An output identical to its input within this is no norm: a real one
 * changes a raw branch output by O(1); below it the input was already
 * normalized, and a norm there is an identity (bf16: the rounding floor
 * is larger and is used instead). */
#define IDENTITY_TOL 1e-4

/* The signature of a norm output on the branch (supporting evidence only:
 * it never decides a sandwich): strictly equal token norms that the stream
 * feeding the sublayer does not have, or LayerNorm's zero token means.
 * Returns 1 when branch_out looks like a norm output. */
static int branch_is_normalized(const double *f, const double *x)
{
    double rms = f[RESDIAG_FIELD_TOK_RMS_MEAN];
    int cols = (int)f[RESDIAG_FIELD_COLS];
    if (!(rms > 0) || !(f[RESDIAG_FIELD_ROWS] >= 2))
        return 0;
    /* Equal token norms are evidence of a norm only when the stream feeding
     * the sublayer does not have them itself: a stream dominated by one
     * massive column makes every token alike, and so every branch output. */
    /* The f32 threshold whatever the dtype: a bf16 attention output at
     * init (uniform attention averages the values) spreads its token
     * norms by as little as 2e-3, which bf16's rounding threshold would
     * call a norm output. */
    if (rd_cv_of(f) < RD_NORM_CV && rd_signature(x, rd_unnorm_cv(cols)) != RD_SIG_NORMALIZED)
        return 1;
    if (fabs(f[RESDIAG_FIELD_TOK_MEAN_MEAN]) < 1e-3 * rms &&
        f[RESDIAG_FIELD_TOK_MEAN_STD] < 1e-3 * rms)
        return 1;
    return 0;
}

/* ----------------------------------------------------- one sublayer */

/* root[b]: one representative site per tensor, from the sites' aliases
 * (chains and loops of them included): two sites have the same root
 * exactly when they were recorded from one tensor. */
static void site_roots(const rd_site_data *sd, int *root)
{
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        root[b] = b;
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++) {
        int o = sd[b].alias;
        if (o < 0 || o >= RESDIAG_N_BLOCK_SITES)
            continue;
        /* join the two groups under the smaller root */
        int lo = root[b] < root[o] ? root[b] : root[o];
        int hi = root[b] < root[o] ? root[o] : root[b];
        for (int c = 0; c < RESDIAG_N_BLOCK_SITES; c++)
            if (root[c] == hi)
                root[c] = lo;
    }
}

/* "error 1.2e-07", or "by construction" for a relation between one tensor's
 * two records. */
static const char *err_text(char *buf, size_t n, const rd_sub *r, int rel, double v,
                            const char *fmt)
{
    if (r->constructed >> rel & 1u)
        return "by construction, not counted";
    snprintf(buf, n, fmt, v);
    return buf;
}

/* Relation rel holds: by construction (two records of one tensor), or
 * measured within HOLD. */
static int holds(const rd_sub *r, int rel, double e)
{
    return (r->constructed >> rel & 1u) || e < HOLD;
}

/* The largest of the measured values (NaN ones left out; 0 when none is). */
static double worst(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

/* The smallest of the measured values; NaN when none is. */
static double nearest(const double *v, int n)
{
    double m = NAN;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]) && !(v[i] >= m))
            m = v[i];
    return m;
}

/* Marks site b as the one that would decide, naming it in r->why. */
static void needs_site(rd_sub *r, int b, const char *what)
{
    r->missing |= 1u << b;
    snprintf(r->why, sizeof r->why, "%s not observed; cannot tell: %s",
             resdiag_site_name((resdiag_site)b), what);
}

/* Sets the confidence of a decided sublayer from the strength of its
 * evidence, and says why when it is not high. */
static void set_confidence(rd_sub *r, double best, double rival, const char *winner,
                           const char *rival_name)
{
    double m = fmax(best, r->floor);
    r->strength = rival / m;
    r->conf_why[0] = 0;
    if (r->strength >= HIGH_SEP) {
        r->conf = RESDIAG_CONFIDENCE_HIGH;
        return;
    }
    r->conf = RESDIAG_CONFIDENCE_MEDIUM;
    if (best >= r->floor)
        snprintf(r->conf_why, sizeof r->conf_why, "the %s relations also hold within %.3gx of "
                 "the %s relations' error (%.2g against %.2g)", rival_name, r->strength, winner,
                 rival, best);
    else
        snprintf(r->conf_why, sizeof r->conf_why, "the %s relations miss by only %.3gx the "
                 "rounding floor %.2g (error %.2g)", rival_name, r->strength, r->floor, rival);
}

/* Relations with two terms from one tensor hold by construction: kept for
 * the record (e_constructed), counted nowhere (their e_* becomes NaN). */
static void set_aside_constructed(rd_sub *r, const rd_site_data *sd)
{
    static const struct { int rel; int s[3]; } terms[] = {
        { RD_REL_ADD, { RESDIAG_STREAM_OUT, RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT } },
        { RD_REL_NX, { RESDIAG_NORM_IN, RESDIAG_STREAM_IN, -1 } },
        { RD_REL_NSUM, { RESDIAG_NORM_IN, RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT } },
        { RD_REL_DEEP, { RESDIAG_NORM_IN, RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT } },
        { RD_REL_YN, { RESDIAG_STREAM_OUT, RESDIAG_NORM_OUT, -1 } },
        { RD_REL_FN, { RESDIAG_BRANCH_OUT, RESDIAG_NORM_OUT, -1 } },
        { RD_REL_BX, { RESDIAG_BRANCH_IN, RESDIAG_STREAM_IN, -1 } },
        { RD_REL_BN, { RESDIAG_BRANCH_IN, RESDIAG_NORM_OUT, -1 } },
        { RD_REL_FO, { RESDIAG_BRANCH_OUT, RESDIAG_OUT_NORM_OUT, -1 } },
        { RD_REL_OID, { RESDIAG_OUT_NORM_OUT, RESDIAG_OUT_NORM_IN, -1 } },
    };
    double *e[RD_N_REL] = { &r->e_add, &r->e_nx, &r->e_nsum, &r->e_deep, &r->e_yn,
                            &r->e_par, &r->e_fn, &r->e_bx, &r->e_bn, &r->e_fo, &r->e_oid };
    int root[RESDIAG_N_BLOCK_SITES];
    site_roots(sd, root);
    for (size_t i = 0; i < sizeof terms / sizeof *terms; i++) {
        const int *t = terms[i].s;
        int one = root[t[0]] == root[t[1]] ||
                  (t[2] >= 0 && (root[t[0]] == root[t[2]] || root[t[1]] == root[t[2]]));
        if (!one || isnan(*e[terms[i].rel]))
            continue;
        r->constructed |= 1u << terms[i].rel;
        r->e_constructed[terms[i].rel] = *e[terms[i].rel];
        *e[terms[i].rel] = NAN;
    }
}

/* The relations between the sites of a sequential sublayer (e_* of r),
 * its rounding floor, the ones that hold by construction, and the hook
 * order. */
static void measure_relations(rd_sub *r, rd_site_data *sd, int k, int schema_version)
{
    rd_site_data *x = &sd[RESDIAG_STREAM_IN], *ni = &sd[RESDIAG_NORM_IN],
                 *no = &sd[RESDIAG_NORM_OUT], *f = &sd[RESDIAG_BRANCH_OUT],
                 *y = &sd[RESDIAG_STREAM_OUT];
    {
        const double *st[RESDIAG_N_BLOCK_SITES];
        int n = 0;
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if (sd[b].obs)
                st[n++] = sd[b].st;
        /* the add relation has the most terms: stream_out, stream_in, branch_out */
        r->floor = n ? rd_rounding_floor(st, n, schema_version, 3) : NAN;
    }
    if (x->obs && f->obs && y->obs) {
        const double *v[3] = { y->sk, x->sk, f->sk };
        const double c[3] = { 1, -1, -1 };
        r->e_add = rd_rel_combo(v, c, 3, k);
    }
    if (ni->obs && x->obs) {
        const double *v[2] = { ni->sk, x->sk };
        const double c[2] = { 1, -1 };
        r->e_nx = rd_rel_combo(v, c, 2, k);
    }
    if (ni->obs && x->obs && f->obs) {
        const double *v[3] = { ni->sk, x->sk, f->sk };
        const double c[3] = { 1, -1, -1 };
        r->e_nsum = rd_rel_combo(v, c, 3, k);
        r->alpha = rd_fit_alpha(ni->sk, x->sk, f->sk, k, &r->e_deep);
    }
    if (y->obs && no->obs) {
        const double *v[2] = { y->sk, no->sk };
        const double c[2] = { 1, -1 };
        r->e_yn = rd_rel_combo(v, c, 2, k);
    }
    if (f->obs && no->obs) {
        const double *v[2] = { f->sk, no->sk };
        const double c[2] = { 1, -1 };
        r->e_fn = rd_rel_combo(v, c, 2, k);
    }
    rd_site_data *bi = &sd[RESDIAG_BRANCH_IN], *oi = &sd[RESDIAG_OUT_NORM_IN],
                 *oo = &sd[RESDIAG_OUT_NORM_OUT];
    const double c2[2] = { 1, -1 };
    if (bi->obs && x->obs)
        r->e_bx = rd_rel_combo((const double *[]){ bi->sk, x->sk }, c2, 2, k);
    if (bi->obs && no->obs)
        r->e_bn = rd_rel_combo((const double *[]){ bi->sk, no->sk }, c2, 2, k);
    if (f->obs && oo->obs)
        r->e_fo = rd_rel_combo((const double *[]){ f->sk, oo->sk }, c2, 2, k);
    if (oi->obs && oo->obs)
        r->e_oid = rd_rel_combo((const double *[]){ oo->sk, oi->sk }, c2, 2, k);
    set_aside_constructed(r, sd);
    /* The norm called before the branch reads (or, without branch_in,
     * before its output) is a norm in front of the branch. */
    rd_site_data *b = bi->obs ? bi : f;
    if (ni->obs && b->obs) {
        double qn = ni->st[RESDIAG_FIELD_CALL_SEQ], qf = b->st[RESDIAG_FIELD_CALL_SEQ];
        r->order = qn < qf ? 1 : qf < qn ? 2 : 0;
    }
}

/* No norm site observed: only the residual add can be tested. */
static void judge_without_norm(rd_sub *r)
{
    if (isnan(r->e_add)) {
        snprintf(r->why, sizeof r->why, "%s", r->constructed
                 ? "no norm sites, and stream_out = stream_in + branch_out holds by "
                   "construction (two of its tensors are one)"
                 : "no norm sites, and stream_in, branch_out and stream_out not all "
                   "observed");
        return;
    }
    if (r->e_add < HOLD && !isnan(r->e_bx) && !(r->e_bx < HOLD)) {
        snprintf(r->why, sizeof r->why, "no norm sites, but branch_in differs from stream_in "
                 "(error %.2g): the branch reads something the sites do not show (a norm? "
                 "record norm_in and norm_out)", r->e_bx);
        return;
    }
    if (r->e_add < HOLD) {
        r->v = RESDIAG_VERDICT_NONE;
        r->conf = r->e_add < HOLD / SEP ? RESDIAG_CONFIDENCE_HIGH : RESDIAG_CONFIDENCE_MEDIUM;
        if (r->conf != RESDIAG_CONFIDENCE_HIGH)
            snprintf(r->conf_why, sizeof r->conf_why, "stream_out = stream_in + branch_out "
                     "holds only to %.2g", r->e_add);
        snprintf(r->why, sizeof r->why, "stream_out = stream_in + branch_out (error %.1e), "
                 "no norm observed", r->e_add);
    } else {
        r->v = RESDIAG_VERDICT_INCONSISTENT;
        r->conf = RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(r->conf_why, sizeof r->conf_why, "no norm observed: only the residual add "
                 "was tested");
        snprintf(r->why, sizeof r->why, "no norm observed, but stream_out != stream_in + "
                 "branch_out (error %.2g)", r->e_add);
    }
}

/* A norm on the branch's output was found (in the out_norm sites, or in
 * the norm sites of an older recording); what the branch reads tells a
 * reordered norm (the stream itself) from a sandwich (the output of a norm
 * of it). bx_err/bx_made: branch_in = stream_in, measured or by
 * construction; best/rival: the winner's error and its nearest rival's. */
static void name_norm_on_branch(rd_sub *r, const rd_site_data *sd, int input_norm_seen,
                                double best, double rival, const char *rival_name,
                                const char *norm_text)
{
    char t1[40];
    if (!sd[RESDIAG_BRANCH_IN].obs && !input_norm_seen) {
        needs_site(r, RESDIAG_BRANCH_IN, "a norm sits on the branch's output, and whether the "
                   "branch reads stream_in (reordered) or a norm of it (sandwich) is what "
                   "branch_in shows");
        return;
    }
    if (isnan(rival) || !(rival > SEP * fmax(best, r->floor))) {
        snprintf(r->why, sizeof r->why, "%s, but its rivals' relations (error %.2g) are too "
                 "close to tell", norm_text, rival);
        return;
    }
    if (!input_norm_seen && holds(r, RD_REL_BX, r->e_bx)) {
        r->v = RESDIAG_VERDICT_REORDERED;
        set_confidence(r, best, rival, "reordered", rival_name);
        snprintf(r->why, sizeof r->why, "%s; the branch reads stream_in (%s): x + Norm(F(x)), "
                 "no norm in front of the branch", norm_text,
                 err_text(t1, sizeof t1, r, RD_REL_BX, r->e_bx, "error %.1e"));
        return;
    }
    r->v = RESDIAG_VERDICT_SANDWICH;
    set_confidence(r, best, rival, "sandwich", rival_name);
    if (input_norm_seen) {
        snprintf(r->why, sizeof r->why, "%s; norm_in = stream_in (%s) and the branch reads the "
                 "norm's output: x + Norm2(F(Norm1(x)))", norm_text,
                 err_text(t1, sizeof t1, r, RD_REL_NX, r->e_nx, "error %.1e"));
        return;
    }
    /* the branch reads neither the stream nor an observed norm */
    if (r->conf > RESDIAG_CONFIDENCE_MEDIUM)
        r->conf = RESDIAG_CONFIDENCE_MEDIUM;
    snprintf(r->conf_why, sizeof r->conf_why, "the norm in front of the branch is not in the "
             "sites: branch_in differs from stream_in (error %.2g)", r->e_bx);
    snprintf(r->why, sizeof r->why, "%s; the branch does not read stream_in (error %.2g): "
             "a sandwich whose input norm is not recorded", norm_text, r->e_bx);
}

/* The norm sites hold a norm that does not read the stream and whose output
 * is what is added (an older recording of the norm on the branch output). */
static void judge_norm_on_branch(rd_sub *r, const rd_site_data *sd)
{
    char text[200];
    snprintf(text, sizeof text, "stream_out = stream_in + branch_out (error %.1e), branch_out "
             "= norm_out (error %.1e): a norm on the branch's output", r->e_add, r->e_fn);
    /* rivals: post-type, and pre-type when the norm's input was observed */
    double rival = isnan(r->e_nx) ? r->fit_post : fmin(r->fit_pre, r->fit_post);
    r->norm_on_branch = 1;
    name_norm_on_branch(r, sd, 0, r->fit_branch_norm, rival,
                        r->fit_post <= rival ? "post-type" : "pre-type", text);
}

/* The out_norm sites were observed: a norm on the branch's output unless
 * it changes nothing. input_norm: the norm sites were observed too. */
static int judge_out_norm(const rd_analysis *a, rd_sub *r, const rd_site_data *sd)
{
    (void)a;
    const rd_site_data *oi = &sd[RESDIAG_OUT_NORM_IN], *oo = &sd[RESDIAG_OUT_NORM_OUT];
    int input_norm = sd[RESDIAG_NORM_IN].obs || sd[RESDIAG_NORM_OUT].obs;
    if (!oi->obs || !oo->obs) {
        needs_site(r, oi->obs ? RESDIAG_OUT_NORM_OUT : RESDIAG_OUT_NORM_IN,
                   "the norm on the branch's output needs both its input and its output");
        return 1;
    }
    /* by construction, or within rounding: the "norm" is an identity */
    if ((r->constructed >> RD_REL_OID & 1u) || r->e_oid < fmax(r->floor, IDENTITY_TOL))
        return 0;
    if (!holds(r, RD_REL_FO, r->e_fo)) {
        r->v = RESDIAG_VERDICT_INCONSISTENT;
        r->conf = r->e_fo > FAIL ? RESDIAG_CONFIDENCE_HIGH : RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(r->why, sizeof r->why, "out_norm_out is not what is added (branch_out; error "
                 "%.2g)", r->e_fo);
        return 1;
    }
    if (!holds(r, RD_REL_ADD, r->e_add)) {
        if (input_norm)
            return 0; /* the norm sites may say post-norm: the families decide */
        r->v = RESDIAG_VERDICT_INCONSISTENT;
        r->conf = r->e_add > FAIL ? RESDIAG_CONFIDENCE_HIGH : RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(r->why, sizeof r->why, "a norm on the branch's output, but stream_out != "
                 "stream_in + branch_out (error %.2g)", r->e_add);
        return 1;
    }
    if (input_norm && !holds(r, RD_REL_NX, r->e_nx))
        return 0;
    if (input_norm && !isnan(r->e_bn) && !(r->e_bn < HOLD)) {
        snprintf(r->why, sizeof r->why, "norms in front of and behind the branch, but the "
                 "branch does not read the first one's output (error %.2g)", r->e_bn);
        return 1;
    }
    char text[240], t1[40];
    snprintf(text, sizeof text, "stream_out = stream_in + branch_out (%s), branch_out is the "
             "output of a norm on the branch (it changes its input by %.2g)",
             err_text(t1, sizeof t1, r, RD_REL_ADD, r->e_add, "error %.1e"), r->e_oid);
    /* The winner: its measured relations. Rivals: no norm on the output
     * (e_oid), and what the branch reads: a norm of the stream against the
     * stream itself (e_bx for a sandwich, e_bn cannot be for reordered). */
    double won[] = { r->e_add, r->e_fo,
                     input_norm ? r->e_nx : holds(r, RD_REL_BX, r->e_bx) ? r->e_bx : NAN,
                     input_norm ? r->e_bn : NAN };
    double best = worst(won, 4);
    double rv[] = { r->e_oid, input_norm ? r->e_bx : NAN };
    double rival = nearest(rv, 2);
    const char *rival_name = rival == r->e_oid ? "no-norm-on-the-output" : "reordered";
    name_norm_on_branch(r, sd, input_norm, best, rival, rival_name, text);
    return 1;
}

/* The family that fits must have every one of its relations computed: one
 * that holds only by the relations that could be (norm_in = stream_in,
 * with branch_out never observed) is no evidence. A relation set aside as
 * holding by construction is judged by the caller instead. Returns 1 (with
 * the reason in r->why) when the family pre (1) or post (0) lacks one. */
static int family_unmeasured(rd_sub *r, const rd_site_data *sd, int pre)
{
    unsigned rel_a = pre ? RD_REL_ADD : RD_REL_DEEP, rel_n = pre ? RD_REL_NX : RD_REL_YN;
    if (!(isnan(pre ? r->e_add : r->e_deep) && !(r->constructed & (1u << rel_a))) &&
        !(isnan(pre ? r->e_nx : r->e_yn) && !(r->constructed & (1u << rel_n))))
        return 0;
    static const int need_pre[] = { RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT, RESDIAG_STREAM_OUT,
                                    RESDIAG_NORM_IN };
    static const int need_post[] = { RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT, RESDIAG_NORM_IN,
                                     RESDIAG_STREAM_OUT, RESDIAG_NORM_OUT };
    const int *need = pre ? need_pre : need_post;
    int n_need = pre ? 4 : 5;
    char names[128] = "";
    for (int i = 0; i < n_need; i++)
        if (!sd[need[i]].obs) {
            r->missing |= 1u << need[i];
            size_t u = strlen(names);
            snprintf(names + u, sizeof names - u, "%s%s", u ? ", " : "",
                     resdiag_site_name((resdiag_site)need[i]));
        }
    if (r->missing)
        snprintf(r->why, sizeof r->why, "%s not observed; cannot tell (the %s-type relations "
                 "need it)", names, pre ? "pre" : "post");
    else
        snprintf(r->why, sizeof r->why, "the %s-type relations cannot be computed (zero "
                 "tensors); cannot tell", pre ? "pre" : "post");
    return 1;
}

/* The pre-type relations won: pre-norm. No norm on the branch's output
 * was observed (judge_out_norm would have named it); when branch_out
 * nevertheless looks like a norm output, the verdict says that the sites
 * that would decide were not recorded, and never "sandwich". */
static void name_pre_type(rd_sub *r, const rd_site_data *sd)
{
    char t1[40], t2[40];
    int nb = branch_is_normalized(sd[RESDIAG_BRANCH_OUT].st, sd[RESDIAG_STREAM_IN].st);
    if (nb) {
        r->v = RESDIAG_VERDICT_PRE_OR_SANDWICH;
        r->conf = RESDIAG_CONFIDENCE_LOW;
        r->missing |= 1u << RESDIAG_OUT_NORM_IN | 1u << RESDIAG_OUT_NORM_OUT;
        snprintf(r->conf_why, sizeof r->conf_why, "branch_out looks like a norm output, and "
                 "out_norm_in/out_norm_out, which would show a norm there, were not recorded");
    } else {
        r->v = RESDIAG_VERDICT_PRE;
    }
    snprintf(r->why, sizeof r->why, "stream_out = stream_in + branch_out (%s), "
             "norm reads stream_in (%s); post-type off by %.2g%s",
             err_text(t1, sizeof t1, r, RD_REL_ADD, r->e_add, "error %.1e"),
             err_text(t2, sizeof t2, r, RD_REL_NX, r->e_nx, "error %.1e"),
             r->fit_post, nb ? "; branch_out has equal token norms, like a norm output "
                               "(a signature: supports, does not decide)"
                             : "");
}

/* The post-type relations won: post-norm, or deepnorm when the norm reads
 * alpha*stream_in + branch_out with alpha clearly not 1. */
static void name_post_type(rd_sub *r)
{
    char t1[40], t2[40];
    int deep = fabs(r->alpha - 1) > ALPHA_MIN_DIFF && r->e_nsum > SEP * r->e_deep;
    r->v = deep ? RESDIAG_VERDICT_DEEPNORM : RESDIAG_VERDICT_POST;
    if (deep)
        snprintf(r->why, sizeof r->why, "norm reads %.4g*stream_in + branch_out (error %.1e; "
                 "with alpha = 1: %.2g), stream_out = norm_out (%s); pre-type off by "
                 "%.2g", r->alpha, r->e_deep, r->e_nsum,
                 err_text(t1, sizeof t1, r, RD_REL_YN, r->e_yn, "error %.1e"), r->fit_pre);
    else
        snprintf(r->why, sizeof r->why, "norm reads stream_in + branch_out (%s), "
                 "stream_out = norm_out (%s); pre-type off by %.2g",
                 err_text(t1, sizeof t1, r, RD_REL_NSUM, r->e_nsum, "error %.1e"),
                 err_text(t2, sizeof t2, r, RD_REL_YN, r->e_yn, "error %.1e"), r->fit_pre);
}

/* Both families' relations hold within the rounding floor (a branch below
 * bf16's rounding at initialization): the order of the hook calls says
 * where the norm is (in front of the branch, or after it), and the stream
 * leaving the sublayer supports it when its signature agrees (a norm
 * output after a post-norm sublayer, not after a pre-norm one). Medium
 * with that support, low on the order alone; never against the signature.
 * Returns 1 when it decided. */
static int decide_by_order(rd_sub *r, const rd_site_data *sd)
{
    if (!r->order)
        return 0;
    int pre = r->order == 1;
    const double *y = sd[RESDIAG_STREAM_OUT].st;
    int sig = sd[RESDIAG_STREAM_OUT].obs ? rd_signature(y, rd_unnorm_cv((int)y[RESDIAG_FIELD_COLS]))
                                         : RD_SIG_UNKNOWN;
    int support = pre ? sig == RD_SIG_NOT : sig == RD_SIG_NORMALIZED;
    int against = pre ? sig == RD_SIG_NORMALIZED : sig == RD_SIG_NOT;
    if (against)
        return 0;
    double fit_pre = r->fit_pre, fit_post = r->fit_post;
    if (pre)
        name_pre_type(r, sd);
    else
        name_post_type(r);
    r->by_order = 1;
    if (r->v != RESDIAG_VERDICT_PRE_OR_SANDWICH)
        r->conf = support ? RESDIAG_CONFIDENCE_MEDIUM : RESDIAG_CONFIDENCE_LOW;
    r->strength = NAN;
    /* what the relations showed, behind why the order decided */
    char head[256];
    int n = snprintf(head, sizeof head, "pre-type error %.2g and post-type error %.2g are too "
                     "close to tell apart against the rounding floor %.2g: the hook order "
                     "decides (norm_in called %s the branch)%s; ", fit_pre, fit_post, r->floor,
                     pre ? "before" : "after",
                     support ? (pre ? ", and stream_out is not a norm output"
                                    : ", and stream_out is a norm output")
                             : "");
    size_t h = n > 0 && (size_t)n < sizeof head ? (size_t)n : strlen(head);
    size_t t = strlen(r->why);
    if (h + t >= sizeof r->why)
        t = sizeof r->why - 1 - h;
    memmove(r->why + h, r->why, t);
    memcpy(r->why, head, h);
    r->why[h + t] = 0;
    snprintf(r->conf_why, sizeof r->conf_why, "the relations differ by less than %gx the "
             "rounding floor %.2g; decided by the hook order%s", SEP, r->floor,
             support ? " with stream_out's signature in support" : " alone");
    return 1;
}

/* Pre-type against post-type relations: the family that fits, when it
 * fits and its rival clearly does not. */
static void judge_families(rd_sub *r, const rd_site_data *sd)
{
    if (isnan(r->fit_pre) && isnan(r->fit_post)) {
        snprintf(r->why, sizeof r->why, "%s", r->constructed
                 ? "too few relations between distinct tensors (the others hold by "
                   "construction)"
                 : "too few sites observed to relate them");
        return;
    }
    double best = fmin(r->fit_pre, r->fit_post);  /* fmin ignores one NaN */
    double other = isnan(r->fit_pre) || isnan(r->fit_post) ? NAN : fmax(r->fit_pre, r->fit_post);
    int pre = !(r->fit_post < r->fit_pre); /* the pre-type fit is the better one (or the only) */
    int pre_measured = isnan(other) ? !isnan(r->fit_pre) : pre; /* the family with an error */
    if (family_unmeasured(r, sd, pre))
        return;
    if (!(best < HOLD) && isnan(other) && r->constructed) {
        /* the other family's relations hold by construction: unmeasured */
        snprintf(r->why, sizeof r->why, "%s-type relations fail (error %.2g), and the %s-type "
                 "ones hold by construction only (two records of one tensor)",
                 pre_measured ? "pre" : "post", best, pre_measured ? "post" : "pre");
        return;
    }
    if (!(best < HOLD)) {
        /* between what holds and what plainly fails (a bf16 parallel block
         * at init read as sequential) is no decision: low */
        r->v = RESDIAG_VERDICT_INCONSISTENT;
        r->conf = best > FAIL ? RESDIAG_CONFIDENCE_HIGH : RESDIAG_CONFIDENCE_LOW;
        if (r->conf != RESDIAG_CONFIDENCE_HIGH)
            snprintf(r->conf_why, sizeof r->conf_why, "the best relations miss by %.2g, "
                     "between what holds (%g) and what plainly fails (%g)", best, HOLD, FAIL);
        snprintf(r->why, sizeof r->why, "neither pre-type relations (error %.2g) nor post-type "
                 "relations (error %.2g) hold", r->fit_pre, r->fit_post);
        return;
    }
    if (!isnan(other) && !(other > SEP * fmax(best, r->floor)) && decide_by_order(r, sd))
        return;
    if (isnan(other) || !(other > SEP * fmax(best, r->floor))) {
        if (isnan(other) && r->constructed)
            snprintf(r->why, sizeof r->why, "%s-type error %.2g, and no %s-type relation "
                     "between distinct tensors (the one observed holds by construction)",
                     pre_measured ? "pre" : "post", best, pre_measured ? "post" : "pre");
        else
            snprintf(r->why, sizeof r->why, "pre-type error %.2g and post-type error %.2g are "
                     "too close to tell (branch below the rounding noise?)", r->fit_pre,
                     r->fit_post);
        return;
    }
    set_confidence(r, best, other, pre ? "pre-type" : "post-type", pre ? "post-type"
                                                                       : "pre-type");
    if (pre)
        name_pre_type(r, sd);
    else
        name_post_type(r);
}

/* A sublayer of a sequential block: pre-type (stream_out = stream_in +
 * branch_out and the norm reads the stream), post-type (the norm reads
 * alpha*stream_in + branch_out and its output is the stream), a norm on the
 * branch's output (sandwich or reordered, by what the branch reads), no
 * norm, or a branch that adds exactly 0. */
static void classify_sequential(const rd_analysis *a, rd_sub *r, rd_site_data *sd, int k)
{
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        if (sd[b].nonfinite) {
            snprintf(r->why, sizeof r->why, "%s holds NaN or Inf: no evidence at this step",
                     resdiag_site_name((resdiag_site)b));
            return;
        }
    const rd_site_data *f = &sd[RESDIAG_BRANCH_OUT];
    if (f->obs && f->st[RESDIAG_FIELD_ROWS] > 0 && f->st[RESDIAG_FIELD_FROB] == 0 &&
        f->st[RESDIAG_FIELD_ABSMAX] == 0) {
        r->v = RESDIAG_VERDICT_ZERO_BRANCHES;
        r->conf = RESDIAG_CONFIDENCE_HIGH;
        snprintf(r->why, sizeof r->why, "branch_out is exactly 0: the branch adds nothing at "
                 "this step (zero-initialised, as ReZero or SkipInit); where the norms sit "
                 "shows once it moves");
        return;
    }
    measure_relations(r, sd, k, a->load.schema_version);
    int input_norm = sd[RESDIAG_NORM_IN].obs || sd[RESDIAG_NORM_OUT].obs;
    int output_norm = sd[RESDIAG_OUT_NORM_IN].obs || sd[RESDIAG_OUT_NORM_OUT].obs;
    double pre_rel[] = { r->e_add, r->e_nx, r->e_bn }, post_rel[] = { r->e_deep, r->e_yn, r->e_bx };
    r->fit_pre = isnan(r->e_add) && isnan(r->e_nx) ? NAN : worst(pre_rel, 3);
    r->fit_post = isnan(r->e_deep) && isnan(r->e_yn) ? NAN : worst(post_rel, 3);
    r->fit_branch_norm = isnan(r->e_fn) || isnan(r->e_add) ? NAN : fmax(r->e_add, r->e_fn);
    if (output_norm && judge_out_norm(a, r, sd))
        return;
    if (!input_norm) {
        judge_without_norm(r);
        return;
    }
    if (r->fit_branch_norm < HOLD && !(r->e_nx < HOLD))
        judge_norm_on_branch(r, sd);
    else
        judge_families(r, sd);
}

/* A parallel block: every sublayer reads the same stream_in, and the last
 * sublayer's stream_out is stream_in + the sum of the branches. Returns 1
 * and classifies the layer's sublayers when that holds. */
static int classify_parallel(rd_analysis *a, int l, rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES],
                             int k)
{
    int S = a->load.n_sublayers;
    if (S < 2 || k == 0)
        return 0;
    for (int s = 0; s < S; s++) {
        if (!sd[s][RESDIAG_STREAM_IN].obs || !sd[s][RESDIAG_BRANCH_OUT].obs)
            return 0;
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if (sd[s][b].nonfinite)
                return 0;
    }
    double e_same = 0;
    for (int s = 1; s < S; s++) {
        const double *v[2] = { sd[s][RESDIAG_STREAM_IN].sk, sd[0][RESDIAG_STREAM_IN].sk };
        const double c[2] = { 1, -1 };
        e_same = fmax(e_same, rd_rel_combo(v, c, 2, k));
    }
    /* The branches before the last would make the stream_in differ in a
     * sequential block: they must be clearly above the error. */
    double *sum = calloc((size_t)k, sizeof *sum);
    if (!sum)
        return 0;
    for (int s = 0; s < S - 1; s++)
        for (int i = 0; i < k; i++)
            sum[i] += sd[s][RESDIAG_BRANCH_OUT].sk[i];
    double scale = fmax(rd_vnorm(sd[0][RESDIAG_STREAM_IN].sk, k), rd_vnorm(sum, k));
    double branch = scale > 0 ? rd_vnorm(sum, k) / scale : NAN;
    double e_sum = NAN;
    rd_site_data *y = &sd[S - 1][RESDIAG_STREAM_OUT];
    if (y->obs) {
        const double *v[RESDIAG_MAX_SUBLAYERS + 2];
        double c[RESDIAG_MAX_SUBLAYERS + 2];
        v[0] = y->sk;
        c[0] = 1;
        v[1] = sd[0][RESDIAG_STREAM_IN].sk;
        c[1] = -1;
        for (int s = 0; s < S; s++) {
            v[2 + s] = sd[s][RESDIAG_BRANCH_OUT].sk;
            c[2 + s] = -1;
        }
        e_sum = rd_rel_combo(v, c, S + 2, k);
    }
    free(sum);
    /* what rounding leaves in the relations, over every site of the block */
    const double *stv[RESDIAG_MAX_SUBLAYERS * RESDIAG_N_BLOCK_SITES];
    int nst = 0;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if (sd[s][b].obs)
                stv[nst++] = sd[s][b].st;
    double floor_ = rd_rounding_floor(stv, nst, a->load.schema_version, S + 2);
    /* the sequential rival: stream_in would differ by the branches before */
    double best = y->obs ? fmax(e_same, e_sum) : e_same;
    if (e_same < HOLD && !(branch > SEP * fmax(e_same, floor_)) && (!y->obs || e_sum < HOLD)) {
        /* Every sublayer reads the same stream within rounding, the branches
         * too small to tell parallel from sequential; recorded as a
         * parallel block (no stream_out before the last sublayer), the
         * sequential reading has nothing more to say. */
        int seq_recorded = 0;
        for (int s = 0; s < S - 1; s++)
            seq_recorded |= sd[s][RESDIAG_STREAM_OUT].obs;
        if (!seq_recorded) {
            for (int s = 0; s < S; s++)
                snprintf(a->placement.sub[l * S + s].why, sizeof a->placement.sub[l * S + s].why,
                         "every sublayer "
                         "reads the same stream_in (error %.1e), but the branches (%.2g of the "
                         "stream) are too small against the rounding floor %.2g to tell a "
                         "parallel block from a sequential one",
                         e_same, branch, floor_);
            return 1;
        }
    }
    if (!(e_same < HOLD) || !(branch > SEP * fmax(e_same, floor_)) ||
        (y->obs && !(e_sum < HOLD)))
        return 0;
    for (int s = 0; s < S; s++) {
        rd_sub *r = &a->placement.sub[l * S + s];
        r->e_par = e_same;
        r->e_add = e_sum;
        rd_site_data *ni = &sd[s][RESDIAG_NORM_IN];
        if (ni->obs) {
            const double *v[2] = { ni->sk, sd[s][RESDIAG_STREAM_IN].sk };
            const double c[2] = { 1, -1 };
            r->e_nx = rd_rel_combo(v, c, 2, k);
        }
        if (!ni->obs || r->e_nx < HOLD) {
            r->v = RESDIAG_VERDICT_PARALLEL;
            r->floor = floor_;
            set_confidence(r, best, branch, "parallel", "sequential");
            if (!y->obs) {
                r->conf = RESDIAG_CONFIDENCE_MEDIUM;
                snprintf(r->conf_why, sizeof r->conf_why, "stream_out of the block not observed: "
                         "the sum of the branches was not tested");
            }
            snprintf(r->why, sizeof r->why, "all sublayers read the same stream_in (error %.1e, "
                     "branches %.2g); stream_out = stream_in + sum of branches (error %.1e)%s",
                     e_same, branch, e_sum, ni->obs ? "; norm reads stream_in" : "");
        } else {
            r->v = RESDIAG_VERDICT_INCONSISTENT;
            r->conf = RESDIAG_CONFIDENCE_MEDIUM;
            snprintf(r->conf_why, sizeof r->conf_why, "one relation fails: the norm's input");
            snprintf(r->why, sizeof r->why, "parallel block whose norm does not read stream_in "
                     "(error %.2g)", r->e_nx);
        }
    }
    return 1;
}

/* ------------------------------------------------------ every sublayer */

static void reset_sublayer(rd_sub *r)
{
    r->e_add = r->e_nx = r->e_nsum = r->e_deep = r->e_yn = r->e_par = r->e_fn = NAN;
    r->alpha = r->fit_pre = r->fit_post = r->fit_branch_norm = NAN;
    r->floor = r->strength = NAN;
    r->v = RESDIAG_VERDICT_CANNOT_TELL;
    r->conf = RESDIAG_CONFIDENCE_NONE;
}

/* Sublayer (l, s)'s relative update r = ||dx||/||x|| at the analysed step
 * and at the last and the first complete step, each step read once: the
 * phases after this one (depth.c, training.c, warnings.c) read them here. */
static resdiag_status load_updates(const resdiag_reader *rd, rd_analysis *a, int l, int s)
{
    rd_placement *p = &a->placement;
    int i = l * a->load.n_sublayers + s;
    const int64_t at[3] = { a->load.step_index, a->aborted.last_index, a->aborted.first_index };
    double *const to[3] = { p->r, p->r_last, p->r_first };
    for (int k = 0; k < 3; k++) {
        int same = -1;
        for (int j = 0; j < k && same < 0; j++)
            if (at[j] == at[k])
                same = j;
        if (same >= 0) {
            to[k][i] = to[same][i];
            continue;
        }
        double u[RESDIAG_N_UPDATE_FIELDS];
        resdiag_status st = resdiag_reader_update(rd, at[k], l, s, u);
        if (st)
            return st;
        to[k][i] = u[RESDIAG_UPDATE_RATIO_FROB];
    }
    return RESDIAG_OK;
}

/* Layer l's sites into sd[s][b], and its relative updates. */
static resdiag_status load_layer(const resdiag_reader *rd, rd_analysis *a, int l,
                                 rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES])
{
    int S = a->load.n_sublayers, K = a->load.sketch_size;
    int64_t si = a->load.step_index;
    resdiag_status st;
    for (int s = 0; s < S; s++) {
        reset_sublayer(&a->placement.sub[l * S + s]);
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if ((st = rd_analysis_load_site(rd, a, si, RESDIAG_FORWARD, l, s, (resdiag_site)b, K,
                                            &sd[s][b])))
                return st;
        if ((st = load_updates(rd, a, l, s)))
            return st;
    }
    return RESDIAG_OK;
}

/* Layer l's sublayers classified; the layer's verdict is that of its
 * decided sublayers, if they agree; the hook order is tallied against it. */
static void classify_layer(rd_analysis *a, int l, rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES])
{
    int S = a->load.n_sublayers, K = a->load.sketch_size;
    if (!classify_parallel(a, l, sd, K))
        for (int s = 0; s < S; s++)
            classify_sequential(a, &a->placement.sub[l * S + s], sd[s], K);
    a->placement.layer_v[l] = rd_layer_verdict(a, l);
    for (int s = 0; s < S; s++) {
        rd_sub *r = &a->placement.sub[l * S + s];
        /* the order is evidence where a norm is in front of or after the
         * branch; one that decided is not tallied against itself */
        int front = r->v == RESDIAG_VERDICT_PRE || r->v == RESDIAG_VERDICT_PRE_OR_SANDWICH ||
                    r->v == RESDIAG_VERDICT_PARALLEL ||
                    (r->v == RESDIAG_VERDICT_SANDWICH && !r->norm_on_branch);
        if (!r->order || r->by_order || !(front || rd_is_post_family(r->v)))
            continue;
        if ((r->order == 1) == front)
            a->placement.order_agree++;
        else
            a->placement.order_disagree++;
    }
}

resdiag_status rd_analysis_sublayers(const resdiag_reader *rd, rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers, K = a->load.sketch_size;
    rd_placement *p = &a->placement;
    p->sub = calloc((size_t)L * S, sizeof *p->sub);
    p->layer_v = calloc((size_t)L, sizeof *p->layer_v);
    p->r = calloc((size_t)L * S, sizeof *p->r);
    p->r_first = calloc((size_t)L * S, sizeof *p->r_first);
    p->r_last = calloc((size_t)L * S, sizeof *p->r_last);
    rd_site_data(*sd)[RESDIAG_N_BLOCK_SITES] = calloc((size_t)S, sizeof *sd);
    double *skbuf = calloc((size_t)S * RESDIAG_N_BLOCK_SITES * (K ? K : 1), sizeof *skbuf);
    resdiag_status st = RESDIAG_OK;
    if (!p->sub || !p->layer_v || !p->r || !p->r_first || !p->r_last || !sd || !skbuf) {
        st = RESDIAG_E_NOMEM;
        goto out;
    }
    for (int s = 0; s < S; s++)
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            sd[s][b].sk = skbuf + ((size_t)s * RESDIAG_N_BLOCK_SITES + b) * (K ? K : 1);
    for (int l = 0; l < L && !st; l++) {
        st = load_layer(rd, a, l, sd);
        if (!st && a->observe.use_relations)
            classify_layer(a, l, sd);
    }
out:
    free(sd);
    free(skbuf);
    return st;
}
