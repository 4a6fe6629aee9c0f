/*
 * placement.c - where a sublayer's norm sits, from the relations between
 * the sketches of its sites (sketches are linear, so sk(x + f) = sk(x) +
 * sk(f) up to rounding) and the signature of its branch output: pre-norm,
 * post-norm, deepnorm (with alpha), sandwich, a parallel block, no norm,
 * inconsistent or cannot tell, with the confidence and the reason. The
 * declared placement is never used to decide.
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

/* Sandwich: the branch output is itself a norm output. Strictly equal token
 * norms; or LayerNorm's zero token means (exact for any input, unlike the
 * RMS, which epsilon pulls below 1 for the tiny branch outputs at init);
 * or, weaker, every token's RMS in [0.3, 1] like a gain-1 norm output whose
 * input is small next to epsilon. Returns 0 no, 2 strong, 1 weak. */
static int branch_is_normalized(const double *f, const double *x)
{
    double rms = f[RESDIAG_FIELD_TOK_RMS_MEAN];
    int cols = (int)f[RESDIAG_FIELD_COLS];
    if (!(rms > 0) || !(f[RESDIAG_FIELD_ROWS] >= 2))
        return 0;
    /* Equal token norms are evidence of a norm only when the stream feeding
     * the sublayer does not have them itself: a stream dominated by one
     * massive column makes every token alike, and so every branch output. */
    if (rd_signature(f, rd_unnorm_cv(cols)) == RD_SIG_NORMALIZED &&
        rd_signature(x, rd_unnorm_cv(cols)) != RD_SIG_NORMALIZED)
        return 2;
    if (fabs(f[RESDIAG_FIELD_TOK_MEAN_MEAN]) < 1e-3 * rms &&
        f[RESDIAG_FIELD_TOK_MEAN_STD] < 1e-3 * rms)
        return 2;
    double hi = f[RESDIAG_FIELD_TOK_NORM_MAX] / sqrt((double)cols);
    if (rms >= 0.3 && hi <= 1.001)
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
    };
    double *e[RD_N_REL] = { &r->e_add, &r->e_nx, &r->e_nsum, &r->e_deep, &r->e_yn,
                            &r->e_par, &r->e_fn };
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
    set_aside_constructed(r, sd);
    if (ni->obs && f->obs) {
        double qn = ni->st[RESDIAG_FIELD_CALL_SEQ], qf = f->st[RESDIAG_FIELD_CALL_SEQ];
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

/* What is added is the output of a norm that does not read the stream: a
 * norm on the branch, decided by relations whatever the output's signature
 * (at init its input can be small next to the norm's epsilon). Rivals:
 * post-type, and pre-type when the norm's input was observed (it would
 * read the stream). */
static void judge_norm_on_branch(rd_sub *r)
{
    char t1[40];
    double best = r->fit_branch_norm;
    double rival = isnan(r->e_nx) ? r->fit_post : fmin(r->fit_pre, r->fit_post);
    if (isnan(rival) || !(rival > SEP * fmax(best, r->floor))) {
        snprintf(r->why, sizeof r->why, "branch_out is the norm's output (error %.2g), but "
                 "the other placements' relations (error %.2g) are too close to tell",
                 r->e_fn, rival);
        return;
    }
    r->v = RESDIAG_VERDICT_SANDWICH;
    set_confidence(r, best, rival, "sandwich", r->fit_post <= rival ? "post-type"
                                                                     : "pre-type");
    snprintf(r->why, sizeof r->why, "stream_out = stream_in + branch_out (error %.1e), "
             "branch_out = norm_out (error %.1e): the norm sits on the branch; the norm "
             "does not read the stream (%s); post-type off by %.2g", r->e_add, r->e_fn,
             err_text(t1, sizeof t1, r, RD_REL_NX, r->e_nx, "error %.2g"), r->fit_post);
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

/* The pre-type relations won: pre-norm, or a sandwich when branch_out is
 * itself a norm output. */
static void name_pre_type(const rd_analysis *a, rd_sub *r, const rd_site_data *sd)
{
    char t1[40], t2[40];
    int nb = branch_is_normalized(sd[RESDIAG_BRANCH_OUT].st, sd[RESDIAG_STREAM_IN].st);
    /* The weak signature (token RMS in [0.3, 1]) fits an RMSNorm output
     * whose input is small next to epsilon (a sandwich at gpt2 init) as
     * well as a plain branch of that size (pre-norm, Glorot init): it
     * does not decide. A LayerNorm output would show zero token means
     * whatever its input, so with a declared LayerNorm it means "pre". */
    if (nb == 1 && a->norm_kind == RESDIAG_NORM_LAYERNORM)
        nb = 0;
    if (nb == 2) {
        r->v = RESDIAG_VERDICT_SANDWICH;
    } else if (nb == 1) {
        r->v = RESDIAG_VERDICT_PRE_OR_SANDWICH;
        r->conf = RESDIAG_CONFIDENCE_LOW;
        snprintf(r->conf_why, sizeof r->conf_why, "branch_out may be an RMSNorm output: the "
                 "norm after the branch, if any, is not in the norm sites");
    } else {
        r->v = RESDIAG_VERDICT_PRE;
    }
    snprintf(r->why, sizeof r->why, "stream_out = stream_in + branch_out (%s), "
             "norm reads stream_in (%s); post-type off by %.2g%s",
             err_text(t1, sizeof t1, r, RD_REL_ADD, r->e_add, "error %.1e"),
             err_text(t2, sizeof t2, r, RD_REL_NX, r->e_nx, "error %.1e"),
             r->fit_post, nb == 2   ? "; branch_out is a norm output"
                          : nb == 1 ? "; branch_out may be an RMSNorm output (token RMS in "
                                      "[0.3, 1]): pre-norm or sandwich"
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

/* Pre-type against post-type relations: the family that fits, when it
 * fits and its rival clearly does not. */
static void judge_families(const rd_analysis *a, rd_sub *r, const rd_site_data *sd)
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
        r->v = RESDIAG_VERDICT_INCONSISTENT;
        r->conf = best > FAIL ? RESDIAG_CONFIDENCE_HIGH : RESDIAG_CONFIDENCE_MEDIUM;
        if (r->conf != RESDIAG_CONFIDENCE_HIGH)
            snprintf(r->conf_why, sizeof r->conf_why, "the best relations miss by %.2g, "
                     "between what holds (%g) and what plainly fails (%g)", best, HOLD, FAIL);
        snprintf(r->why, sizeof r->why, "neither pre-type relations (error %.2g) nor post-type "
                 "relations (error %.2g) hold", r->fit_pre, r->fit_post);
        return;
    }
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
        name_pre_type(a, r, sd);
    else
        name_post_type(r);
}

/* A sublayer of a sequential block: pre-type (stream_out = stream_in +
 * branch_out and the norm reads the stream), post-type (the norm reads
 * alpha*stream_in + branch_out and its output is the stream), or a norm on
 * the branch (a sandwich recorded with the norm after the branch in the
 * norm sites: stream_out = stream_in + branch_out and branch_out is the
 * norm's output). */
static void classify_sequential(const rd_analysis *a, rd_sub *r, rd_site_data *sd, int k)
{
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        if (sd[b].nonfinite) {
            snprintf(r->why, sizeof r->why, "%s holds NaN or Inf: no evidence at this step",
                     resdiag_site_name((resdiag_site)b));
            return;
        }
    measure_relations(r, sd, k, a->schema_version);
    if (!sd[RESDIAG_NORM_IN].obs && !sd[RESDIAG_NORM_OUT].obs) {
        judge_without_norm(r);
        return;
    }
    r->fit_pre = fmax(r->e_add, r->e_nx);
    r->fit_post = fmax(r->e_deep, r->e_yn);
    r->fit_branch_norm = isnan(r->e_fn) || isnan(r->e_add) ? NAN : fmax(r->e_add, r->e_fn);
    if (r->fit_branch_norm < HOLD && !(r->e_nx < HOLD))
        judge_norm_on_branch(r);
    else
        judge_families(a, r, sd);
}

/* A parallel block: every sublayer reads the same stream_in, and the last
 * sublayer's stream_out is stream_in + the sum of the branches. Returns 1
 * and classifies the layer's sublayers when that holds. */
static int classify_parallel(rd_analysis *a, int l, rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES],
                             int k)
{
    int S = a->n_sublayers;
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
    double floor_ = rd_rounding_floor(stv, nst, a->schema_version, S + 2);
    /* the sequential rival: stream_in would differ by the branches before */
    double best = y->obs ? fmax(e_same, e_sum) : e_same;
    if (!(e_same < HOLD) || !(branch > SEP * fmax(e_same, floor_)) ||
        (y->obs && !(e_sum < HOLD)))
        return 0;
    for (int s = 0; s < S; s++) {
        rd_sub *r = &a->sub[l * S + s];
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

/* Layer l's sites into sd[s][b], and its relative updates at the step and
 * at the last recorded step. */
static resdiag_status load_layer(const resdiag_reader *rd, rd_analysis *a, int l,
                                 rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES])
{
    int S = a->n_sublayers, K = a->sketch_size;
    int64_t si = a->step_index;
    resdiag_status st;
    for (int s = 0; s < S; s++) {
        reset_sublayer(&a->sub[l * S + s]);
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if ((st = rd_analysis_load_site(rd, si, RESDIAG_FORWARD, l, s, (resdiag_site)b, K,
                                            &sd[s][b])))
                return st;
        double u[RESDIAG_N_UPDATE_FIELDS];
        if ((st = resdiag_reader_update(rd, si, l, s, u)))
            return st;
        a->r[l * S + s] = u[RESDIAG_UPDATE_RATIO_FROB];
        if ((st = resdiag_reader_update(rd, a->n_steps - 1, l, s, u)))
            return st;
        a->r_last[l * S + s] = u[RESDIAG_UPDATE_RATIO_FROB];
    }
    return RESDIAG_OK;
}

/* Layer l's sublayers classified; the layer's verdict is that of its
 * decided sublayers, if they agree; the hook order is tallied against it. */
static void classify_layer(rd_analysis *a, int l, rd_site_data (*sd)[RESDIAG_N_BLOCK_SITES])
{
    int S = a->n_sublayers, K = a->sketch_size;
    if (!classify_parallel(a, l, sd, K))
        for (int s = 0; s < S; s++)
            classify_sequential(a, &a->sub[l * S + s], sd[s], K);
    resdiag_verdict lv = RESDIAG_VERDICT_CANNOT_TELL;
    for (int s = 0; s < S; s++)
        lv = rd_combine_verdicts(lv, a->sub[l * S + s].v);
    a->layer_v[l] = lv;
    for (int s = 0; s < S; s++) {
        rd_sub *r = &a->sub[l * S + s];
        if (r->order == 1 && rd_is_pre_family(r->v))
            a->order_agree++;
        else if (r->order == 2 && rd_is_post_family(r->v))
            a->order_agree++;
        else if (r->order && r->v != RESDIAG_VERDICT_CANNOT_TELL)
            a->order_disagree++;
    }
}

resdiag_status rd_analysis_sublayers(const resdiag_reader *rd, rd_analysis *a)
{
    int L = a->n_layers, S = a->n_sublayers, K = a->sketch_size;
    rd_site_data(*sd)[RESDIAG_N_BLOCK_SITES] = calloc((size_t)S, sizeof *sd);
    double *skbuf = calloc((size_t)S * RESDIAG_N_BLOCK_SITES * (K ? K : 1), sizeof *skbuf);
    resdiag_status st = RESDIAG_OK;
    if (!sd || !skbuf) {
        st = RESDIAG_E_NOMEM;
        goto out;
    }
    for (int s = 0; s < S; s++)
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            sd[s][b].sk = skbuf + ((size_t)s * RESDIAG_N_BLOCK_SITES + b) * (K ? K : 1);
    for (int l = 0; l < L && !st; l++) {
        st = load_layer(rd, a, l, sd);
        if (!st && a->use_relations)
            classify_layer(a, l, sd);
    }
out:
    free(sd);
    free(skbuf);
    return st;
}
