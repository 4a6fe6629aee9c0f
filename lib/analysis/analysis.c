/*
 * analysis.c - the verdict from data: where the norms sit, how the stream,
 * the relative updates and the gradients behave over depth, where values
 * went non-finite. Shared by every front end (resdiag report/check, JSON,
 * bindings); lib/report.c renders it as text and JSON.
 *
 * Evidence (doc/ARCHITECTURE.md, "Evidence for the placement verdict"):
 *  1. relations between the sketches of the sites of a sublayer (sketches
 *     are linear, so sk(x + f) = sk(x) + sk(f) up to rounding);
 *  2. the normalization signature of a tensor (per-token norm spread);
 *  3. the depth law of the stream; 4. the order of the hook calls.
 * The declared placement is never used to decide, only compared afterwards.
 *
 * Dimension names: L layers, S sublayers per block, K sketch size.
 */
#include "analysis/analysis.h"
#include "format/format.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/escape.h"
#include "analysis/fit.h"
#include "h5/reader.h"
#include "common/log.h"

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
 * rival off by FAIL in bf16 (floor 2^-7, below) at "high". */
#define HIGH_SEP RD_HIGH_SEP
/* The rounding floor of a relation (rd_rounding_floor): ROUND_C times the
 * unit roundoff u of the coarsest dtype among its tensors, plus the double
 * rounding of the sketch's sums. A true relation's residual is the rounding
 * of the one elementwise add (or copy) that made the tensor: independent
 * errors of at most u/2 relative per element, whose sketch is ~u/sqrt(12)
 * of the largest term and does not grow with the width (the sums are in
 * double); measured 3e-8..1e-7 in f32 (0.5-1.7 u), ~2e-3 in bf16. ROUND_C
 * = 2 leaves a factor 1.2..4 over that for the sketch's K-bucket spread. */
#define ROUND_C 2.0
/* DeepNorm's alpha must differ from 1 by more than this (tinygpt: alpha =
 * (2L)^(1/4) >= 1.19 for L >= 1); and the alpha = 1 fit must be SEP times
 * worse than the fitted alpha. */
#define ALPHA_MIN_DIFF 0.05

/* Normalization signature: coefficient of variation (std / mean over
 * tokens) of the per-token L2 norm. A norm output with gain 1 has equal
 * token norms: measured 1e-8 in f32; bf16 rounding adds ~2^-9/sqrt(3 d)
 * (< 2e-4 for d >= 32). Inputs that are tiny next to the norm's epsilon
 * (gpt2-init embeddings) spread it to ~1e-3, which is why the threshold is
 * not tighter: NORM_CV below it is "normalized". Gaussian-like tokens that
 * are not normalized spread by ~1/sqrt(2 d) (0.125 at d = 32, 0.026 at
 * d = 768): above 0.3/sqrt(2 d) (capped at 1e-2) is "not normalized". In
 * between the signature does not decide by itself (see sig_relative). */
#define NORM_CV 3e-4
#define UNNORM_CV_CAP 1e-2

/* Massive activations: one value this many times the mean per-token RMS.
 * A single column can be at most sqrt(d) times its token's RMS (when it
 * holds all the energy), and Gaussian-like tensors reach 4-5 times: warn
 * above max(MASSIVE_MIN, sqrt(d)/2), i.e. when one column carries a quarter
 * of a token's energy or more. */
#define MASSIVE_MIN 6.0
/* Relative update below this is "negligible", above DOMINANT "dominant". */
#define NEGLIGIBLE 1e-3
#define DOMINANT 1.0

/* ----------------------------------------------------------- small bits */

static double vnorm(const double *v, int k)
{
    double s = 0;
    for (int i = 0; i < k; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

double rd_rel_combo(const double *const *v, const double *c, int n, int k)
{
    double scale = 0, r2 = 0;
    for (int j = 0; j < n; j++) {
        double m = fabs(c[j]) * vnorm(v[j], k);
        if (!(m == m))
            return NAN;
        if (m > scale)
            scale = m;
    }
    for (int i = 0; i < k; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += c[j] * v[j][i];
        r2 += s * s;
    }
    if (!(scale > 1e-300))
        return NAN; /* all terms zero: no evidence either way */
    return sqrt(r2) / scale;
}

double rd_fit_alpha(const double *ni, const double *x, const double *f, int k, double *err)
{
    double xx = 0, xr = 0;
    for (int i = 0; i < k; i++) {
        xx += x[i] * x[i];
        xr += x[i] * (ni[i] - f[i]);
    }
    if (!(xx > 0)) {
        *err = NAN;
        return NAN;
    }
    double alpha = xr / xx;
    const double *v[3] = { ni, x, f };
    const double c[3] = { 1, -alpha, -1 };
    *err = rd_rel_combo(v, c, 3, k);
    return alpha;
}

int rd_signature(const double *f, double cv_unnorm)
{
    double rows = f[RESDIAG_FIELD_ROWS], m = f[RESDIAG_FIELD_TOK_NORM_MEAN];
    double sd = f[RESDIAG_FIELD_TOK_NORM_STD];
    if (!(rows >= 2) || !(m > 0) || !isfinite(sd))
        return RD_SIG_UNKNOWN;
    double cv = sd / m;
    if (cv < NORM_CV)
        return RD_SIG_NORMALIZED;
    if (cv > cv_unnorm)
        return RD_SIG_NOT;
    return RD_SIG_UNCLEAR;
}

/* Unit roundoff of the dtype a tensor was recorded in. resdiag does not
 * store the dtype, but the largest |value| is one of the tensor's elements,
 * stored exactly in double, and its bits show the format: an f32 value with
 * the low 16 mantissa bits zero is a bf16 value (a real f32 tensor's
 * maximum is that by chance with probability 2^-16), with the low 13 zero
 * and an f16 exponent an f16 value; not an f32 value at all, f64. A tensor
 * of zeros (no evidence either way) counts as f32. Errs coarse: an f32
 * tensor whose maximum happens to be short (1.0) gets the bf16 floor. */
static double unit_roundoff(const double *st)
{
    double m = st[RESDIAG_FIELD_ABSMAX];
    if (!(m > 0) || !isfinite(m))
        return 0x1p-24;
    float f = (float)m;
    if ((double)f != m)
        return 0x1p-53;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0xffffu) == 0)
        return 0x1p-8;
    int e = (int)(bits >> 23 & 0xffu) - 127;
    if ((bits & 0x1fffu) == 0 && e >= -14 && e <= 15)
        return 0x1p-11;
    return 0x1p-24;
}

double rd_rounding_floor(const double *const *stats, int n)
{
    double u = 0, elems = 0;
    for (int j = 0; j < n; j++) {
        double uj = unit_roundoff(stats[j]);
        double ej = stats[j][RESDIAG_FIELD_ROWS] * stats[j][RESDIAG_FIELD_COLS];
        if (uj > u)
            u = uj;
        if (ej > elems)
            elems = ej;
    }
    return ROUND_C * (u + 0x1p-53 * sqrt(elems > 0 ? elems : 1));
}

static double unnorm_cv(int cols)
{
    double t = 0.3 / sqrt(2.0 * (cols > 0 ? cols : 1));
    return t < UNNORM_CV_CAP ? t : UNNORM_CV_CAP;
}

static double cv_of(const double *f)
{
    return f[RESDIAG_FIELD_TOK_NORM_STD] / f[RESDIAG_FIELD_TOK_NORM_MEAN];
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s ? s : "", n);
    return d;
}

static int is_post_family(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_POST || v == RESDIAG_VERDICT_DEEPNORM;
}

static int is_pre_family(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_SANDWICH ||
           v == RESDIAG_VERDICT_PARALLEL || v == RESDIAG_VERDICT_NONE ||
           v == RESDIAG_VERDICT_PRE_OR_SANDWICH;
}

/* Combines two verdicts of one family where PRE_OR_SANDWICH stands for
 * either of PRE and SANDWICH: the more specific one wins; PRE with SANDWICH
 * is no placement. */
static resdiag_verdict combine(resdiag_verdict a, resdiag_verdict b)
{
    if (a == RESDIAG_VERDICT_CANNOT_TELL)
        return b;
    if (b == RESDIAG_VERDICT_CANNOT_TELL || a == b)
        return a;
    if (a == RESDIAG_VERDICT_PRE_OR_SANDWICH &&
        (b == RESDIAG_VERDICT_PRE || b == RESDIAG_VERDICT_SANDWICH))
        return b == RESDIAG_VERDICT_SANDWICH ? b : a;
    if (b == RESDIAG_VERDICT_PRE_OR_SANDWICH &&
        (a == RESDIAG_VERDICT_PRE || a == RESDIAG_VERDICT_SANDWICH))
        return a == RESDIAG_VERDICT_SANDWICH ? a : b;
    /* The relations agree (pre-type); only the branch's signature differs,
     * which training (gains, biases) can blur: not a contradiction. */
    if ((a == RESDIAG_VERDICT_PRE && b == RESDIAG_VERDICT_SANDWICH) ||
        (a == RESDIAG_VERDICT_SANDWICH && b == RESDIAG_VERDICT_PRE))
        return RESDIAG_VERDICT_PRE_OR_SANDWICH;
    return RESDIAG_VERDICT_INCONSISTENT;
}

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
    if (rd_signature(f, unnorm_cv(cols)) == RD_SIG_NORMALIZED &&
        rd_signature(x, unnorm_cv(cols)) != RD_SIG_NORMALIZED)
        return 2;
    if (fabs(f[RESDIAG_FIELD_TOK_MEAN_MEAN]) < 1e-3 * rms &&
        f[RESDIAG_FIELD_TOK_MEAN_STD] < 1e-3 * rms)
        return 2;
    double hi = f[RESDIAG_FIELD_TOK_NORM_MAX] / sqrt((double)cols);
    if (rms >= 0.3 && hi <= 1.001)
        return 1;
    return 0;
}

/* -------------------------------------------------------------- loading */

typedef struct site_data {
    int obs;
    int alias;       /* the site whose very tensor this one was recorded from, or -1 */
    int nonfinite;   /* NaN or Inf elements: no relation evidence */
    double st[RESDIAG_N_FIELDS];
    double *sk; /* (K) */
} site_data;

static resdiag_status load_site(const resdiag_reader *rd, int64_t si, resdiag_direction dir,
                                int l, int s, resdiag_site site, int k, site_data *d)
{
    d->nonfinite = 0;
    resdiag_status st = resdiag_reader_site(rd, si, dir, l, s, site, d->st, &d->obs);
    if (st)
        return st;
    if (k > 0 && d->obs) {
        st = resdiag_reader_sketch(rd, si, dir, l, s, site, d->sk);
        if (st)
            return st;
    }
    d->alias = -1;
    if (d->obs && site < RESDIAG_N_BLOCK_SITES &&
        (st = resdiag_reader_alias(rd, si, dir, l, s, site, &d->alias)))
        return st;
    /* Non-finite elements count as 0 in the sketch: a relation between
     * such tensors proves nothing, so the site gives no evidence. */
    if (d->obs && (d->st[RESDIAG_FIELD_NAN_COUNT] > 0 || d->st[RESDIAG_FIELD_INF_COUNT] > 0))
        d->nonfinite = 1;
    return RESDIAG_OK;
}

/* ----------------------------------------------------- one sublayer */

/* root[b]: one representative site per tensor, from the sites' aliases
 * (chains and loops of them included): two sites have the same root
 * exactly when they were recorded from one tensor. */
static void site_roots(const site_data *sd, int *root)
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

static void classify_sequential(const rd_analysis *a, rd_sub *r, site_data *sd, int k)
{
    site_data *x = &sd[RESDIAG_STREAM_IN], *ni = &sd[RESDIAG_NORM_IN], *no = &sd[RESDIAG_NORM_OUT],
              *f = &sd[RESDIAG_BRANCH_OUT], *y = &sd[RESDIAG_STREAM_OUT];
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        if (sd[b].nonfinite) {
            snprintf(r->why, sizeof r->why, "%s holds NaN or Inf: no evidence at this step",
                     resdiag_site_name((resdiag_site)b));
            return;
        }
    {
        const double *st[RESDIAG_N_BLOCK_SITES];
        int n = 0;
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if (sd[b].obs)
                st[n++] = sd[b].st;
        r->floor = n ? rd_rounding_floor(st, n) : NAN;
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
    {
        /* Relations with two terms from one tensor hold by construction:
         * kept for the record, counted nowhere. */
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
    if (ni->obs && f->obs) {
        double qn = ni->st[RESDIAG_FIELD_CALL_SEQ], qf = f->st[RESDIAG_FIELD_CALL_SEQ];
        r->order = qn < qf ? 1 : qf < qn ? 2 : 0;
    }

    char t1[40], t2[40];
    if (!ni->obs && !no->obs) {
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
        return;
    }
    /* pre-type: stream_out = stream_in + branch_out and the norm reads the
     * stream; post-type: the norm reads alpha*stream_in + branch_out and
     * its output is the stream; a norm on the branch (sandwich recorded
     * with the norm after the branch in the norm sites): stream_out =
     * stream_in + branch_out and branch_out is the norm's output. */
    r->fit_pre = fmax(r->e_add, r->e_nx);
    r->fit_post = fmax(r->e_deep, r->e_yn);
    r->fit_branch_norm = isnan(r->e_fn) || isnan(r->e_add) ? NAN : fmax(r->e_add, r->e_fn);
    if (r->fit_branch_norm < HOLD && !(r->e_nx < HOLD)) {
        /* What is added is the output of a norm that does not read the
         * stream: a norm on the branch, decided by relations whatever the
         * output's signature (at init its input can be small next to the
         * norm's epsilon). Rivals: post-type, and pre-type when the norm's
         * input was observed (it would read the stream). */
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
        return;
    }
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
    /* The family that fits must have every one of its relations computed:
     * one that holds only by the relations that could be (norm_in =
     * stream_in, with branch_out never observed) is no evidence. A relation
     * set aside as holding by construction is judged below instead. */
    unsigned rel_a = pre ? RD_REL_ADD : RD_REL_DEEP, rel_n = pre ? RD_REL_NX : RD_REL_YN;
    if ((isnan(pre ? r->e_add : r->e_deep) && !(r->constructed & (1u << rel_a)))
        || (isnan(pre ? r->e_nx : r->e_yn) && !(r->constructed & (1u << rel_n)))) {
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
        return;
    }
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
    if (pre) {
        int nb = branch_is_normalized(f->st, x->st);
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
    } else {
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
}

/* A parallel block: every sublayer reads the same stream_in, and the last
 * sublayer's stream_out is stream_in + the sum of the branches. Returns 1
 * and classifies the layer's sublayers when that holds. */
static int classify_parallel(rd_analysis *a, int l, site_data (*sd)[RESDIAG_N_BLOCK_SITES], int k)
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
    double scale = fmax(vnorm(sd[0][RESDIAG_STREAM_IN].sk, k), vnorm(sum, k));
    double branch = scale > 0 ? vnorm(sum, k) / scale : NAN;
    double e_sum = NAN;
    site_data *y = &sd[S - 1][RESDIAG_STREAM_OUT];
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
    double floor_ = rd_rounding_floor(stv, nst);
    /* the sequential rival: stream_in would differ by the branches before */
    double best = y->obs ? fmax(e_same, e_sum) : e_same;
    if (!(e_same < HOLD) || !(branch > SEP * fmax(e_same, floor_)) ||
        (y->obs && !(e_sum < HOLD)))
        return 0;
    for (int s = 0; s < S; s++) {
        rd_sub *r = &a->sub[l * S + s];
        r->e_par = e_same;
        r->e_add = e_sum;
        site_data *ni = &sd[s][RESDIAG_NORM_IN];
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

/* ---------------------------------------------------------- the stream */

/* Stream tensor x_k, k = 0..L: k = 0 what enters layer 0, k = l+1 what
 * leaves layer l. */
static resdiag_status stream_at(const resdiag_reader *rd, const rd_analysis *a, int64_t si, int kk,
                                double *st, int *obs)
{
    int L = a->n_layers, S = a->n_sublayers;
    resdiag_status e;
    *obs = 0;
    if (kk == 0) {
        if ((e = resdiag_reader_site(rd, si, RESDIAG_FORWARD, 0, 0, RESDIAG_EMBED_OUT, st, obs)))
            return e;
        if (!*obs && (e = resdiag_reader_site(rd, si, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
                                              st, obs)))
            return e;
        return RESDIAG_OK;
    }
    int l = kk - 1;
    if ((e = resdiag_reader_site(rd, si, RESDIAG_FORWARD, l, S - 1, RESDIAG_STREAM_OUT, st, obs)))
        return e;
    if (!*obs && l + 1 < L &&
        (e = resdiag_reader_site(rd, si, RESDIAG_FORWARD, l + 1, 0, RESDIAG_STREAM_IN, st, obs)))
        return e;
    if (!*obs && l + 1 == L &&
        (e = resdiag_reader_site(rd, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN, st, obs)))
        return e;
    return RESDIAG_OK;
}

/* ---------------------------------------------------------- final norm */

/* Two observations of one tensor: a sketch (else, without sketches, the
 * statistics) equal to rounding of the sketch sums themselves. A norm
 * changes even an already normalized input by its epsilon (1e-5 relative
 * for LayerNorm's default), far above this. */
#define SAME_TENSOR 1e-9

static int same_tensor(const site_data *p, const site_data *q, int k, double *err)
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
static resdiag_status decide_final_norm(const resdiag_reader *rd, rd_analysis *a, int64_t si)
{
    int k = a->sketch_size, L = a->n_layers, S = a->n_sublayers;
    size_t kk = (size_t)(k > 0 ? k : 1);
    double *buf = calloc(3 * kk, sizeof *buf);
    if (!buf)
        return RESDIAG_E_NOMEM;
    site_data in = { 0 }, out = { 0 }, x = { 0 };
    in.sk = buf;
    out.sk = buf + kk;
    x.sk = buf + 2 * kk;
    resdiag_status st;
    if ((st = load_site(rd, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_IN, k, &in)) ||
        (st = load_site(rd, si, RESDIAG_FORWARD, 0, 0, RESDIAG_FINAL_NORM_OUT, k, &out)))
        goto out;
    if (!in.obs && !out.obs) {
        a->final_norm = -1;
        snprintf(a->final_norm_why, sizeof a->final_norm_why,
                 "no final-norm site was recorded (final_norm_in, final_norm_out)");
        goto out;
    }
    if (!out.obs) {
        a->final_norm = 1;
        snprintf(a->final_norm_why, sizeof a->final_norm_why,
                 "final_norm_in observed; its output is not");
        goto out;
    }
    const site_data *ref = &in;
    const char *ref_name = "its input";
    if (!in.obs && L > 0) {
        if ((st = load_site(rd, si, RESDIAG_FORWARD, L - 1, S - 1, RESDIAG_STREAM_OUT, k, &x)))
            goto out;
        ref = &x;
        ref_name = "the last layer's stream_out";
    }
    double e = NAN;
    if (!ref->obs) {
        a->final_norm = 1;
        snprintf(a->final_norm_why, sizeof a->final_norm_why,
                 "final_norm_out observed; nothing to compare it with");
    } else if (same_tensor(&out, ref, k, &e)) {
        a->final_norm = 0;
        snprintf(a->final_norm_why, sizeof a->final_norm_why,
                 "what the head reads (final_norm_out) is %s unchanged (difference %.1e)",
                 ref_name, e);
    } else {
        int sig = rd_signature(out.st, unnorm_cv((int)out.st[RESDIAG_FIELD_COLS]));
        a->final_norm = 1;
        snprintf(a->final_norm_why, sizeof a->final_norm_why,
                 "final_norm_out differs from %s (difference %.2g)%s", ref_name, e,
                 sig == RD_SIG_NORMALIZED ? " and has equal token norms" : "");
    }
out:
    free(buf);
    return st;
}

/* ------------------------------------------------------------ warnings */

static void warn(rd_analysis *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void warn(rd_analysis *a, const char *fmt, ...)
{
    if (a->n_warnings >= RD_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->warnings[a->n_warnings++], RD_WARNING_LEN, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------- non-finite scan */

/* 1 if the run file has the dataset; asks quietly (resdiag_reader_dims
 * logs an error for a missing one). */
static int has_dataset(const resdiag_reader *rd, const char *name)
{
    int n = resdiag_reader_n_datasets(rd);
    for (int i = 0; i < n; i++)
        if (strcmp(resdiag_reader_dataset_name(rd, i), name) == 0)
            return 1;
    return 0;
}

static const char *const stats_tables[6] = { RD_DS_FWD_SITE_STATS, RD_DS_BWD_SITE_STATS,
                                             RD_DS_FWD_MODEL_STATS, RD_DS_BWD_MODEL_STATS,
                                             RD_DS_LAYER_PARAM_STATS,
                                             RD_DS_MODEL_PARAM_STATS };

/* 0 when none of the n tables stores anything at recorded step si (all of
 * them read NaN there: nothing observed), with *next the first step where
 * one may; 1 when one may. Going over every step then costs what the file
 * holds, not what it declares. */
static int step_stored(const resdiag_reader *rd, rd_stored_cursor *c, int n, int64_t si,
                       int64_t *next)
{
    int any = 0;
    *next = INT64_MAX;
    for (int d = 0; d < n; d++) {
        int64_t nd = si + 1;
        if (rd_stored_at(rd, &c[d], si, &nd))
            any = 1;
        else if (nd < *next)
            *next = nd;
    }
    if (any || *next <= si)
        *next = si + 1;
    return any;
}

/* Scans every statistics row of recorded step si for NaN / Inf: *bad when
 * there is one; adds the counts to the totals when count_totals; the first
 * one in call order becomes a->nf_* unless a->nf_found. */
static resdiag_status scan_step(const resdiag_reader *rd, rd_analysis *a, int64_t si,
                                double **buf, size_t *cap, int *bad, int count_totals)
{
    const char *const *names = stats_tables;
    resdiag_status st;
    double best_seq = INFINITY;
    *bad = 0;
    for (int d = 0; d < 6; d++) {
        int64_t dims[8];
        int rank = 0;
        if (!has_dataset(rd, names[d]) ||
            resdiag_reader_dims(rd, names[d], dims, 8, &rank) != RESDIAG_OK)
            continue; /* absent (no parameters) */
        size_t per = 1;
        for (int i = 1; i < rank; i++)
            per *= (size_t)dims[i];
        if (per > *cap) {
            free(*buf);
            *cap = per;
            *buf = malloc(per * sizeof **buf);
            if (!*buf) {
                *cap = 0;
                return RESDIAG_E_NOMEM;
            }
        }
        if ((st = resdiag_reader_read(rd, names[d], si, 1, *buf, per)))
            return st;
        size_t rows = per / RESDIAG_N_FIELDS;
        for (size_t r = 0; r < rows; r++) {
            const double *f = *buf + r * RESDIAG_N_FIELDS;
            double nn = f[RESDIAG_FIELD_NAN_COUNT], ni = f[RESDIAG_FIELD_INF_COUNT];
            if (!(nn > 0) && !(ni > 0))
                continue;
            *bad = 1;
            if (count_totals) {
                a->nan_total += nn > 0 ? nn : 0;
                a->inf_total += ni > 0 ? ni : 0;
            }
            if (a->nf_found || !(f[RESDIAG_FIELD_CALL_SEQ] < best_seq))
                continue;
            best_seq = f[RESDIAG_FIELD_CALL_SEQ];
            a->nf_step_index = si;
            a->nf_dir = (d == 0 || d == 2) ? RESDIAG_FORWARD : RESDIAG_BACKWARD;
            a->nf_nan = nn > 0 ? nn : 0;
            a->nf_inf = ni > 0 ? ni : 0;
            a->nf_param = -1;
            int S = a->n_sublayers, B = RESDIAG_N_BLOCK_SITES;
            if (d < 2) {
                a->nf_layer = (int)(r / ((size_t)S * B));
                a->nf_sub = (int)(r / B % (size_t)S);
                a->nf_site = (int)(r % B);
            } else if (d < 4) {
                a->nf_layer = RESDIAG_MODEL_LEVEL;
                a->nf_sub = 0;
                a->nf_site = RESDIAG_EMBED_OUT + (int)r;
            } else if (d == 4) {
                int P = a->n_layer_params;
                a->nf_layer = (int)(r / (size_t)P);
                a->nf_sub = 0;
                a->nf_site = -1;
                a->nf_param = (int)(r % (size_t)P);
            } else {
                a->nf_layer = RESDIAG_MODEL_LEVEL;
                a->nf_sub = 0;
                a->nf_site = -1;
                a->nf_param = (int)r;
            }
        }
    }
    return RESDIAG_OK;
}

/* Steps read at a time from the per-step summary. */
#define SUMMARY_BLOCK 16384

/* With the per-step summary (doc/FORMAT.md, /summary): the totals and the
 * first non-finite step from a few numbers per step, then the full tables
 * of that one step for where it was. Gives what the scan of every step
 * gives (the counts are integers, exact in any order). */
static resdiag_status scan_nonfinite_summary(const resdiag_reader *rd, rd_analysis *a,
                                             int *disagree)
{
    enum { C = 3 }; /* nan_count, inf_count, records */
    int64_t n = a->n_steps, first_bad = -1;
    double *v = malloc((size_t)SUMMARY_BLOCK * C * sizeof *v);
    if (!v)
        return RESDIAG_E_NOMEM;
    resdiag_status st = RESDIAG_OK;
    for (int64_t s0 = 0; s0 < n; s0 += SUMMARY_BLOCK) {
        int64_t cnt = n - s0 < SUMMARY_BLOCK ? n - s0 : SUMMARY_BLOCK;
        if ((st = resdiag_reader_read(rd, RD_DS_SUMMARY_NONFINITE, s0, cnt, v,
                                      (size_t)SUMMARY_BLOCK * C)))
            goto out;
        for (int64_t i = 0; i < cnt; i++) {
            const double *row = v + i * C;
            if (!(row[2] > 0))
                continue;
            a->nf_steps++;
            a->nan_total += row[0];
            a->inf_total += row[1];
            if (first_bad < 0)
                first_bad = s0 + i;
        }
    }
    if (first_bad >= 0) {
        double *buf = NULL;
        size_t cap = 0;
        int bad = 0;
        st = scan_step(rd, a, first_bad, &buf, &cap, &bad, 0);
        free(buf);
        if (st == RESDIAG_OK && bad) {
            a->nf_found = 1;
            a->nf_step = a->steps[first_bad];
        } else if (st == RESDIAG_OK) {
            *disagree = 1; /* a damaged summary: the tables say otherwise */
        }
    }
out:
    free(v);
    return st;
}

static resdiag_status scan_nonfinite(const resdiag_reader *rd, rd_analysis *a)
{
    if (has_dataset(rd, RD_DS_SUMMARY_NONFINITE)) {
        int disagree = 0;
        resdiag_status sst = scan_nonfinite_summary(rd, a, &disagree);
        if (sst || !disagree)
            return sst;
        a->nf_steps = 0;
        a->nan_total = a->inf_total = 0;
    }
    /* a file without the summary (resdiag 0.1.0): every step in full */
    int64_t n = a->n_steps;
    double *buf = NULL;
    size_t cap = 0;
    resdiag_status st = RESDIAG_OK;
    rd_stored_cursor cur[6];
    for (int d = 0; d < 6; d++)
        rd_stored_init(rd, &cur[d], stats_tables[d]);
    for (int64_t si = 0, next; si < n; si++) {
        int step_bad = 0;
        if (!step_stored(rd, cur, 6, si, &next)) {
            si = next - 1; /* nothing stored up to there */
            continue;
        }
        if ((st = scan_step(rd, a, si, &buf, &cap, &step_bad, 1)))
            break;
        if (step_bad) {
            a->nf_steps++;
            if (!a->nf_found) {
                a->nf_found = 1;
                a->nf_step = a->steps[si];
            }
        }
    }
    free(buf);
    return st;
}

/* From the per-step summary: flags (n_steps) of the steps that observed
 * any backward block site or per-layer parameter gradient, or NULL
 * without a summary (or when it cannot be read: the full tables then say). */
static unsigned char *steps_with_backward(const resdiag_reader *rd, int64_t n)
{
    enum { C = 6 }; /* observed rows per statistics table, in table order */
    if (!has_dataset(rd, RD_DS_SUMMARY_OBSERVED) || n <= 0)
        return NULL;
    unsigned char *flag = malloc((size_t)n);
    double *v = malloc((size_t)SUMMARY_BLOCK * C * sizeof *v);
    if (!flag || !v) {
        free(flag);
        free(v);
        return NULL;
    }
    for (int64_t s0 = 0; s0 < n; s0 += SUMMARY_BLOCK) {
        int64_t cnt = n - s0 < SUMMARY_BLOCK ? n - s0 : SUMMARY_BLOCK;
        if (resdiag_reader_read(rd, RD_DS_SUMMARY_OBSERVED, s0, cnt, v,
                                (size_t)SUMMARY_BLOCK * C) != RESDIAG_OK) {
            free(flag);
            free(v);
            return NULL;
        }
        /* columns 1 and 4: backward/site_stats, backward/param_stats */
        for (int64_t i = 0; i < cnt; i++)
            flag[s0 + i] = v[i * C + 1] > 0 || v[i * C + 4] > 0;
    }
    free(v);
    return flag;
}

/* ------------------------------------------------------------- analyze */

void resdiag_analyze_options_init(resdiag_analyze_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->step_index = RESDIAG_STEP_FIRST;
    o->max_growth = 10;
}

void resdiag_analysis_free(resdiag_analysis *a)
{
    if (!a)
        return;
    free(a->sub);
    free(a->layer_v);
    free(a->layer_sig);
    free(a->layer_cv);
    free(a->xnorm);
    free(a->xrms);
    free(a->xenergy);
    free(a->r);
    free(a->grad);
    free(a->sgrad);
    free(a->steps);
    free(a->r_last);
    if (a->sublayer_names)
        for (int s = 0; s < a->n_sublayers; s++)
            free(a->sublayer_names[s]);
    free(a->sublayer_names);
    if (a->param_names)
        for (int p = 0; p < a->n_layer_params; p++)
            free(a->param_names[p]);
    free(a->param_names);
    free(a->description);
    free(a->writer_version);
    free(a->created);
    free(a->program);
    free(a->cs_norm_in);
    free(a->cs_stream_out);
    free(a->cs_branch_out);
    free(a->cs_norm_in2);
    resdiag_analysis_free(a->at_last);
    free(a);
}

/* Model verdict from the per-layer verdicts of a full record. */
static void decide_model_full(rd_analysis *a)
{
    int L = a->n_layers;
    int n_dec = 0, n_post = 0, n_pre = 0, n_inc = 0;
    resdiag_verdict first = RESDIAG_VERDICT_CANNOT_TELL;
    int same = 1;
    resdiag_confidence conf = RESDIAG_CONFIDENCE_HIGH;
    int weak = -1, n_weak = 0; /* the sublayer that sets the confidence */
    for (int l = 0; l < L; l++) {
        resdiag_verdict v = a->layer_v[l];
        if (v == RESDIAG_VERDICT_CANNOT_TELL)
            continue;
        if (n_dec++ == 0)
            first = v;
        else if (combine(first, v) != RESDIAG_VERDICT_INCONSISTENT)
            first = combine(first, v);
        else
            same = 0;
        n_inc += v == RESDIAG_VERDICT_INCONSISTENT;
        n_post += is_post_family(v);
        n_pre += is_pre_family(v);
        for (int s = 0; s < a->n_sublayers; s++) {
            rd_sub *r = &a->sub[l * a->n_sublayers + s];
            if (r->v != RESDIAG_VERDICT_CANNOT_TELL && r->conf < conf) {
                conf = r->conf;
                weak = l * a->n_sublayers + s;
            }
            if (r->v != RESDIAG_VERDICT_CANNOT_TELL && r->conf < RESDIAG_CONFIDENCE_HIGH)
                n_weak++;
        }
    }
    if (weak >= 0) {
        const rd_sub *r = &a->sub[weak];
        snprintf(a->conf_why, sizeof a->conf_why, "layer %d %s%s: %s", weak / a->n_sublayers,
                 a->sublayer_names[weak % a->n_sublayers],
                 n_weak > 1 ? " (the weakest of the sublayers below high)" : "",
                 r->conf_why[0] ? r->conf_why : "weaker evidence");
    }
    a->n_undecided = L - n_dec;
    if (n_dec == 0) {
        a->verdict = RESDIAG_VERDICT_CANNOT_TELL;
        snprintf(a->why, sizeof a->why, "no layer's relations decide between the placements");
        return;
    }
    if (n_inc) {
        a->verdict = RESDIAG_VERDICT_INCONSISTENT;
        a->conf = conf;
        snprintf(a->why, sizeof a->why, "%d layer(s) fit no placement", n_inc);
        return;
    }
    if (a->n_undecided) {
        /* Undecided layers: never guess a family for them. */
        a->verdict = RESDIAG_VERDICT_CANNOT_TELL;
        snprintf(a->why, sizeof a->why, "%d of %d layers undecided (the others: %s)",
                 a->n_undecided, L, resdiag_verdict_name(first));
        return;
    }
    a->conf = conf;
    if (same) {
        a->verdict = first;
        if (first == RESDIAG_VERDICT_SANDWICH) {
            int nsw = 0;
            for (int i = 0; i < L * a->n_sublayers; i++)
                nsw += a->sub[i].v == RESDIAG_VERDICT_SANDWICH;
            if (nsw < L * a->n_sublayers) {
                a->conf = RESDIAG_CONFIDENCE_LOW;
                snprintf(a->why, sizeof a->why, "pre-type relations in every layer; branch_out "
                         "is a norm output in %d of %d sublayers (trained gains blur the "
                         "signature)", nsw, L * a->n_sublayers);
                snprintf(a->conf_why, sizeof a->conf_why, "pre-norm or sandwich: branch_out "
                         "looks like a norm output in only %d of %d sublayers", nsw,
                         L * a->n_sublayers);
            }
        }
        if (first == RESDIAG_VERDICT_PRE_OR_SANDWICH) {
            int nsw = 0, npre = 0;
            for (int i = 0; i < L * a->n_sublayers; i++) {
                nsw += a->sub[i].v == RESDIAG_VERDICT_SANDWICH;
                npre += a->sub[i].v == RESDIAG_VERDICT_PRE;
            }
            a->conf = RESDIAG_CONFIDENCE_LOW;
            snprintf(a->why, sizeof a->why, "pre-type relations in every layer; branch_out is "
                     "clearly a norm output in %d sublayer(s), clearly not in %d, undecided in "
                     "%d", nsw, npre, L * a->n_sublayers - nsw - npre);
            snprintf(a->conf_why, sizeof a->conf_why, "pre-norm or sandwich: whether "
                     "branch_out is a norm output is told by its signature alone, which does "
                     "not decide here");
        }
        if (first == RESDIAG_VERDICT_DEEPNORM) {
            double s = 0;
            int m = 0;
            for (int i = 0; i < L * a->n_sublayers; i++)
                if (a->sub[i].v == RESDIAG_VERDICT_DEEPNORM) {
                    s += a->sub[i].alpha;
                    m++;
                }
            a->alpha = s / m;
        }
        return;
    }
    if (n_post && n_pre) {
        a->verdict = RESDIAG_VERDICT_MIXED;
        int k = 0;
        while (k < L && is_post_family(a->layer_v[k]))
            k++;
        int rest_pre = 1;
        for (int l = k; l < L; l++)
            rest_pre &= is_pre_family(a->layer_v[l]);
        a->mix_layers = rest_pre && k > 0 ? k : -1;
        return;
    }
    a->verdict = RESDIAG_VERDICT_INCONSISTENT;
    snprintf(a->why, sizeof a->why, "layers disagree within one family");
}

/* Model verdict from the signature of each layer's stream (stream-only
 * record, or no sketches). */
static void decide_model_signature(rd_analysis *a)
{
    int L = a->n_layers;
    /* A layer between the thresholds is "not normalized" when its spread is
     * 100 times that of the layers of the same run that are clearly
     * normalized (f32 norm outputs spread by ~1e-8, a pre-norm sublayer on
     * top of a normalized stream by ~1e-3): the run's own noise floor. */
    double max_norm_cv = -1;
    for (int l = 0; l < L; l++)
        if (a->layer_sig[l] == RD_SIG_NORMALIZED && a->layer_cv[l] > max_norm_cv)
            max_norm_cv = a->layer_cv[l];
    for (int l = 0; l < L; l++)
        if (a->layer_sig[l] == RD_SIG_UNCLEAR && max_norm_cv >= 0 &&
            a->layer_cv[l] > 100 * fmax(max_norm_cv, 1e-9))
            a->layer_sig[l] = RD_SIG_NOT;
    int n_n = 0, n_u = 0, n_q = 0;
    for (int l = 0; l < L; l++) {
        n_n += a->layer_sig[l] == RD_SIG_NORMALIZED;
        n_u += a->layer_sig[l] == RD_SIG_NOT;
        n_q += a->layer_sig[l] == RD_SIG_UNCLEAR || a->layer_sig[l] == RD_SIG_UNKNOWN;
    }
    a->n_undecided = n_q;
    a->conf = RESDIAG_CONFIDENCE_LOW;
    snprintf(a->conf_why, sizeof a->conf_why, "only the stream's normalization signature: the "
             "relations between the sites were not observed");
    if (n_q) {
        a->verdict = RESDIAG_VERDICT_CANNOT_TELL;
        snprintf(a->why, sizeof a->why, "%d of %d layers' streams are neither clearly "
                 "normalized nor clearly not", n_q, L);
        return;
    }
    if (n_n == L) {
        a->verdict = RESDIAG_VERDICT_POST_FAMILY;
        a->conf = RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(a->why, sizeof a->why, "every layer's stream is a norm output: post-norm or "
                 "deepnorm (they differ only in what the norm reads, which was not observed)");
        return;
    }
    if (n_u == L) {
        a->verdict = RESDIAG_VERDICT_NOT_RENORMALIZED;
        a->conf = RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(a->why, sizeof a->why, "no layer's stream is a norm output: pre-norm, sandwich, "
                 "parallel or no norm (the stream alone cannot separate them)");
        return;
    }
    a->verdict = RESDIAG_VERDICT_MIXED;
    int k = 0;
    while (k < L && a->layer_sig[k] == RD_SIG_NORMALIZED)
        k++;
    int rest = 1;
    for (int l = k; l < L; l++)
        rest &= a->layer_sig[l] == RD_SIG_NOT;
    a->mix_layers = rest && k > 0 ? k : -1;
    snprintf(a->why, sizeof a->why, "%d layer(s) renormalize the stream, %d do not", n_n, n_u);
}

static int param_index(const resdiag_run_info *in, const char *name)
{
    for (int p = 0; p < in->n_layer_params; p++)
        if (strcmp(in->layer_param_names[p], name) == 0)
            return p;
    return -1;
}

/* Growth, mean r per sublayer and the first parameter's gradient ratio at
 * recorded step si, for the over-training summary. */
static resdiag_status training_point(const resdiag_reader *rd, rd_analysis *a, int64_t si, int j)
{
    int L = a->n_layers, S = a->n_sublayers;
    double f[RESDIAG_N_FIELDS];
    int obs1 = 0, obsL = 0;
    resdiag_status st;
    if ((st = stream_at(rd, a, si, 1, f, &obs1)))
        return st;
    double x1 = obs1 ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    if ((st = stream_at(rd, a, si, L, f, &obsL)))
        return st;
    double xl = obsL ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
    a->tr_growth[j] = L > 1 && x1 > 0 ? xl / x1 : NAN;
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        double sum = 0;
        int m = 0;
        for (int l = 0; l < L; l++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            if ((st = resdiag_reader_update(rd, si, l, s, u)))
                return st;
            if (isfinite(u[0])) {
                sum += u[0];
                m++;
            }
        }
        a->tr_mean_r[j][s] = m ? sum / m : NAN;
    }
    a->tr_grad_ratio[j] = NAN;
    if (a->n_order > 0 && L > 1) {
        const char *name = a->param_names[a->param_order[0]];
        double g0[RESDIAG_N_FIELDS], g1[RESDIAG_N_FIELDS];
        int o0 = 0, o1 = 0;
        if ((st = resdiag_reader_param(rd, si, 0, name, g0, &o0)) ||
            (st = resdiag_reader_param(rd, si, L - 1, name, g1, &o1)))
            return st;
        if (o0 && o1 && g0[RESDIAG_FIELD_FROB] > 0)
            a->tr_grad_ratio[j] = g1[RESDIAG_FIELD_FROB] / g0[RESDIAG_FIELD_FROB];
    }
    return RESDIAG_OK;
}

/* whole_run 0: only what one step says (the verdict of the last step that
 * the report shows beside the judged one); the phases over the whole run
 * (the first and last step's growth, the non-finite scan) are the outer
 * analysis's, and a second pass over every step would only repeat them. */
static resdiag_status analyze(const resdiag_reader *rd, const resdiag_analyze_options *opt,
                              resdiag_analysis **out, int whole_run)
{
    static const char fn[] = "resdiag_analyze";
    if (out)
        *out = NULL;
    if (!rd || !out) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: NULL argument", fn);
        return RESDIAG_E_NULL;
    }
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    if (opt) {
        if (opt->struct_size < sizeof(size_t) || opt->struct_size > sizeof o) {
            rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
                   "(call resdiag_analyze_options_init)", fn, opt->struct_size);
            return RESDIAG_E_INVALID;
        }
        memcpy(&o, opt, opt->struct_size);
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    if (in->n_steps <= 0) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "the run holds no recorded steps (the trainer "
               "stopped before its first step ended, or is still in it)");
        return RESDIAG_E_NOT_FOUND;
    }
    int64_t si = o.step_index == RESDIAG_STEP_FIRST  ? 0
                 : o.step_index == RESDIAG_STEP_LAST ? in->n_steps - 1
                                                     : o.step_index;
    if (si < 0 || si >= in->n_steps) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: step index %lld is not among the %lld "
               "recorded steps", fn, (long long)o.step_index, (long long)in->n_steps);
        return RESDIAG_E_NOT_FOUND;
    }

    int L = in->n_layers, S = in->n_sublayers, K = in->sketch_size;
    rd_analysis *a = calloc(1, sizeof *a);
    if (!a)
        return RESDIAG_E_NOMEM;
    resdiag_status st = RESDIAG_OK;
    a->n_layers = L;
    a->n_sublayers = S;
    a->d_model = in->d_model;
    a->sketch_size = K;
    a->schema_version = in->schema_version;
    a->block = in->block;
    a->declared = in->declared_placement;
    a->declared_mix = in->declared_mix_layers;
    a->norm_kind = in->norm_kind;
    a->run_kind = in->run_kind;
    a->n_steps = in->n_steps;
    a->step_index = si;
    a->max_growth = o.max_growth;
    a->alpha = NAN;
    a->mix_layers = -1;
    a->growth = NAN;
    a->head_grad = NAN;
    a->sgrad_embed = NAN;
    a->grad_step = -1;
    a->n_layer_params = in->n_layer_params;
    a->description = dupstr(in->description);
    a->writer_version = dupstr(in->resdiag_version);
    a->created = dupstr(in->created_utc);
    a->program = dupstr(in->program);
    a->sublayer_names = calloc((size_t)S, sizeof *a->sublayer_names);
    a->param_names = calloc((size_t)(in->n_layer_params ? in->n_layer_params : 1),
                            sizeof *a->param_names);
    a->steps = calloc((size_t)in->n_steps, sizeof *a->steps);
    a->sub = calloc((size_t)L * S, sizeof *a->sub);
    a->layer_v = calloc((size_t)L, sizeof *a->layer_v);
    a->layer_sig = calloc((size_t)L, sizeof *a->layer_sig);
    a->layer_cv = calloc((size_t)L, sizeof *a->layer_cv);
    a->xnorm = calloc((size_t)L + 1, sizeof *a->xnorm);
    a->xrms = calloc((size_t)L + 1, sizeof *a->xrms);
    a->xenergy = calloc((size_t)L + 1, sizeof *a->xenergy);
    a->r = calloc((size_t)L * S, sizeof *a->r);
    a->r_last = calloc((size_t)L * S, sizeof *a->r_last);
    a->grad = calloc((size_t)L * (in->n_layer_params ? in->n_layer_params : 1), sizeof *a->grad);
    a->sgrad = calloc((size_t)L, sizeof *a->sgrad);
    site_data(*sd)[RESDIAG_N_BLOCK_SITES] = calloc((size_t)S, sizeof *sd);
    double *skbuf = calloc((size_t)S * RESDIAG_N_BLOCK_SITES * (K ? K : 1), sizeof *skbuf);
    if (!a->sublayer_names || !a->param_names || !a->steps || !a->sub || !a->layer_v ||
        !a->layer_sig || !a->layer_cv || !a->xnorm || !a->xrms || !a->xenergy || !a->r ||
        !a->r_last || !a->grad || !a->sgrad || !sd || !skbuf || !a->description ||
        !a->writer_version || !a->created || !a->program) {
        st = RESDIAG_E_NOMEM;
        goto fail;
    }
    for (int s = 0; s < S; s++)
        if (!(a->sublayer_names[s] = dupstr(in->sublayer_names[s]))) {
            st = RESDIAG_E_NOMEM;
            goto fail;
        }
    for (int p = 0; p < in->n_layer_params; p++)
        if (!(a->param_names[p] = dupstr(in->layer_param_names[p]))) {
            st = RESDIAG_E_NOMEM;
            goto fail;
        }
    if ((st = resdiag_reader_steps(rd, a->steps, in->n_steps)))
        goto fail;
    a->step = a->steps[si];
    for (int s = 0; s < S; s++)
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            sd[s][b].sk = skbuf + ((size_t)s * RESDIAG_N_BLOCK_SITES + b) * (K ? K : 1);

    /* --- what was observed at the step */
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                for (int d = 0; d < 2; d++) {
                    double f[RESDIAG_N_FIELDS];
                    int obs = 0;
                    if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, l, s,
                                                  (resdiag_site)b, f, &obs)))
                        goto fail;
                    a->n_obs[d][b] += obs;
                }
    for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++)
        for (int d = 0; d < 2; d++) {
            double f[RESDIAG_N_FIELDS];
            int obs = 0;
            if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, 0, 0,
                                          (resdiag_site)(RESDIAG_EMBED_OUT + m), f, &obs)))
                goto fail;
            a->model_obs[d][m] = obs;
        }
    a->stream_only = a->n_obs[0][RESDIAG_NORM_IN] + a->n_obs[0][RESDIAG_NORM_OUT] +
                         a->n_obs[0][RESDIAG_BRANCH_OUT] == 0;
    a->use_relations = !a->stream_only && K > 0;

    /* --- per sublayer relations */
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < S; s++) {
            rd_sub *r = &a->sub[l * S + s];
            r->e_add = r->e_nx = r->e_nsum = r->e_deep = r->e_yn = r->e_par = r->e_fn = NAN;
            r->alpha = r->fit_pre = r->fit_post = r->fit_branch_norm = NAN;
            r->floor = r->strength = NAN;
            r->v = RESDIAG_VERDICT_CANNOT_TELL;
            r->conf = RESDIAG_CONFIDENCE_NONE;
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                if ((st = load_site(rd, si, RESDIAG_FORWARD, l, s, (resdiag_site)b, K, &sd[s][b])))
                    goto fail;
            double u[RESDIAG_N_UPDATE_FIELDS];
            if ((st = resdiag_reader_update(rd, si, l, s, u)))
                goto fail;
            a->r[l * S + s] = u[RESDIAG_UPDATE_RATIO_FROB];
            if ((st = resdiag_reader_update(rd, in->n_steps - 1, l, s, u)))
                goto fail;
            a->r_last[l * S + s] = u[RESDIAG_UPDATE_RATIO_FROB];
        }
        if (!a->use_relations)
            continue;
        if (!classify_parallel(a, l, sd, K))
            for (int s = 0; s < S; s++)
                classify_sequential(a, &a->sub[l * S + s], sd[s], K);
        /* the layer's verdict: its decided sublayers, if they agree */
        resdiag_verdict lv = RESDIAG_VERDICT_CANNOT_TELL;
        for (int s = 0; s < S; s++)
            lv = combine(lv, a->sub[l * S + s].v);
        a->layer_v[l] = lv;
        for (int s = 0; s < S; s++) {
            rd_sub *r = &a->sub[l * S + s];
            if (r->order == 1 && is_pre_family(r->v))
                a->order_agree++;
            else if (r->order == 2 && is_post_family(r->v))
                a->order_agree++;
            else if (r->order && r->v != RESDIAG_VERDICT_CANNOT_TELL)
                a->order_disagree++;
        }
    }

    /* --- the stream over depth */
    {
        double *k = malloc(((size_t)L + 1) * sizeof *k);
        if (!k) {
            st = RESDIAG_E_NOMEM;
            goto fail;
        }
        int first = -1;
        for (int kk = 0; kk <= L; kk++) {
            double f[RESDIAG_N_FIELDS];
            int obs = 0;
            if ((st = stream_at(rd, a, si, kk, f, &obs))) {
                free(k);
                goto fail;
            }
            k[kk] = kk;
            a->xnorm[kk] = obs ? f[RESDIAG_FIELD_TOK_NORM_MEAN] : NAN;
            a->xrms[kk] = obs ? f[RESDIAG_FIELD_TOK_RMS_MEAN] : NAN;
            a->xenergy[kk] = obs && f[RESDIAG_FIELD_ROWS] > 0
                                 ? f[RESDIAG_FIELD_FROB] * f[RESDIAG_FIELD_FROB] /
                                       f[RESDIAG_FIELD_ROWS]
                                 : NAN;
            if (kk > 0) {
                a->layer_sig[kk - 1] = obs ? rd_signature(f, unnorm_cv(a->d_model))
                                           : RD_SIG_UNKNOWN;
                a->layer_cv[kk - 1] = obs ? cv_of(f) : NAN;
                if (obs && f[RESDIAG_FIELD_ABSMAX] > fmax(MASSIVE_MIN, 0.5 * sqrt(a->d_model)) *
                                                         f[RESDIAG_FIELD_TOK_RMS_MEAN])
                    warn(a, "massive activation: the stream leaving layer %d has |x| = %.3g in "
                         "column %.0f, %.1f times its mean per-token RMS %.3g", kk - 1,
                         f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_ABSMAX_COL],
                         f[RESDIAG_FIELD_ABSMAX] / f[RESDIAG_FIELD_TOK_RMS_MEAN],
                         f[RESDIAG_FIELD_TOK_RMS_MEAN]);
                if (obs && first < 0)
                    first = kk;
            }
        }
        /* over the layer outputs k = 1..L: the embedding is no norm output
         * even in a post-norm model, and would make a constant look linear */
        rd_fit_line(k + 1, a->xenergy + 1, L, &a->fit_energy);
        rd_fit_loglog(k + 1, a->xnorm + 1, L, &a->fit_xlog);
        if (first > 0 && first < L && a->xnorm[first] > 0 && isfinite(a->xnorm[L]))
            a->growth = a->xnorm[L] / a->xnorm[first];
        /* r_k per sublayer type over all layers and the deeper half */
        double *col = malloc((size_t)L * sizeof *col);
        if (!col) {
            free(k);
            st = RESDIAG_E_NOMEM;
            goto fail;
        }
        for (int s = 0; s < S && s < RD_MAX_RFIT; s++) {
            for (int l = 0; l < L; l++)
                col[l] = a->r[l * S + s];
            rd_fit_loglog(k + 1, col, L, &a->fit_r[s]);
            int h = L / 2;
            rd_fit_loglog(k + 1 + h, col + h, L - h, &a->fit_r_deep[s]);
        }
        free(col);
        free(k);
    }

    /* --- the verdict */
    if (a->use_relations)
        decide_model_full(a);
    else
        decide_model_signature(a);

    /* deciding hooks: the first sublayer that decided */
    for (int i = 0; i < L * S && a->use_relations; i++) {
        rd_sub *r = &a->sub[i];
        if (r->v == RESDIAG_VERDICT_CANNOT_TELL)
            continue;
        int l = i / S, s = i % S;
        if (!a->cs_norm_in) {
            a->cs_layer = l;
            a->cs_sub = s;
            a->cs_norm_in = dupstr(resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s,
                                                           RESDIAG_NORM_IN));
            a->cs_branch_out = dupstr(resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s,
                                                              RESDIAG_BRANCH_OUT));
            a->cs_stream_out = dupstr(resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s,
                                                              RESDIAG_STREAM_OUT));
        } else if (!a->cs_norm_in2 && a->verdict == RESDIAG_VERDICT_MIXED &&
                   is_pre_family(r->v) != is_pre_family(a->sub[a->cs_layer * S + a->cs_sub].v)) {
            a->cs_layer2 = l;
            a->cs_sub2 = s;
            a->cs_norm_in2 = dupstr(resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s,
                                                            RESDIAG_NORM_IN));
        }
    }
    if (!a->use_relations && L > 0) {
        a->cs_layer = L - 1;
        a->cs_sub = S - 1;
        a->cs_stream_out = dupstr(resdiag_reader_callsite(rd, RESDIAG_FORWARD, L - 1, S - 1,
                                                          RESDIAG_STREAM_OUT));
    }

    /* --- final norm */
    if ((st = decide_final_norm(rd, a, si)))
        goto fail;

    /* --- gradients: the selected step if it has backward data, else the
     * first recorded step that has */
    /* (the summary, where there is one, skips the steps without any) */
    unsigned char *bwd = steps_with_backward(rd, in->n_steps);
    static const char *const bwd_tables[2] = { RD_DS_BWD_SITE_STATS, RD_DS_LAYER_PARAM_STATS };
    rd_stored_cursor bcur[2];
    for (int d = 0; d < 2; d++)
        rd_stored_init(rd, &bcur[d], bwd_tables[d]);
    for (int64_t g = -1, next; g < in->n_steps && a->grad_step < 0 && !st; g++) {
        int64_t gs = g < 0 ? si : g;
        int any = 0;
        if (g >= 0 && bwd && !bwd[g])
            continue;
        if (g >= 0 && !step_stored(rd, bcur, 2, g, &next)) {
            g = next - 1; /* no backward data stored up to there */
            continue;
        }
        for (int l = 0; l < L && !any && !st; l++) {
            double f[RESDIAG_N_FIELDS];
            int obs = 0;
            for (int p = 0; p < in->n_layer_params && !any; p++) {
                if ((st = resdiag_reader_param(rd, gs, l, in->layer_param_names[p], f, &obs)))
                    break;
                any |= obs;
            }
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES && !any && !st; b++) {
                if ((st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, l, S - 1,
                                              (resdiag_site)b, f, &obs)))
                    break;
                any |= obs;
            }
        }
        if (any)
            a->grad_step = gs;
    }
    free(bwd);
    if (st)
        goto fail;
    if (a->grad_step >= 0) {
        int64_t gs = a->grad_step;
        int P = in->n_layer_params;
        for (int l = 0; l < L; l++) {
            double f[RESDIAG_N_FIELDS];
            int obs = 0;
            for (int p = 0; p < P; p++) {
                if ((st = resdiag_reader_param(rd, gs, l, in->layer_param_names[p], f, &obs)))
                    goto fail;
                a->grad[(size_t)l * P + p] = obs ? f[RESDIAG_FIELD_FROB] : NAN;
            }
            if ((st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, l, S - 1, RESDIAG_STREAM_OUT,
                                          f, &obs)))
                goto fail;
            if (!obs && (st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, l, 0,
                                                  RESDIAG_STREAM_IN, f, &obs)))
                goto fail;
            a->sgrad[l] = obs ? f[RESDIAG_FIELD_FROB] : NAN;
        }
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        /* dL/dx_0: at embed_out, else where layer 0 reads it (the same tensor) */
        if ((st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_EMBED_OUT, f, &obs)))
            goto fail;
        if (!obs && (st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_STREAM_IN,
                                              f, &obs)))
            goto fail;
        a->sgrad_embed = obs ? f[RESDIAG_FIELD_FROB] : NAN;
        obs = 0;
        for (int q = 0; q < in->n_model_params && !obs; q++)
            if (strcmp(in->model_param_names[q], "head.w") == 0) {
                if ((st = resdiag_reader_param(rd, gs, RESDIAG_MODEL_LEVEL, "head.w", f, &obs)))
                    goto fail;
                a->head_is_param = obs;
            }
        if (!obs && (st = resdiag_reader_site(rd, gs, RESDIAG_BACKWARD, 0, 0, RESDIAG_LOGITS, f,
                                              &obs)))
            goto fail;
        a->head_grad = obs ? f[RESDIAG_FIELD_FROB] : NAN;
        /* W2 first, then the others in the file's order */
        int w2 = param_index(in, "mlp.w2");
        a->n_order = 0;
        if (w2 >= 0)
            a->param_order[a->n_order++] = w2;
        for (int p = 0; p < P && a->n_order < RESDIAG_MAX_PARAMS; p++)
            if (p != w2)
                a->param_order[a->n_order++] = p;
        double *k = malloc((size_t)L * sizeof *k), *col = malloc((size_t)L * sizeof *col);
        if (!k || !col) {
            free(k);
            free(col);
            st = RESDIAG_E_NOMEM;
            goto fail;
        }
        for (int l = 0; l < L; l++)
            k[l] = l + 1;
        for (int p = 0; p < P && p < RESDIAG_MAX_PARAMS; p++) {
            for (int l = 0; l < L; l++)
                col[l] = a->grad[(size_t)l * P + p];
            rd_fit_loglog(k, col, L, &a->fit_grad[p]);
        }
        rd_fit_loglog(k, a->sgrad, L, &a->fit_sgrad);
        free(k);
        free(col);
    }

    /* --- over training */
    if (a->n_order == 0) { /* the parameter order, also without gradients at the step */
        int w2 = param_index(in, "mlp.w2");
        if (w2 >= 0)
            a->param_order[a->n_order++] = w2;
        for (int p = 0; p < in->n_layer_params && a->n_order < RESDIAG_MAX_PARAMS; p++)
            if (p != w2)
                a->param_order[a->n_order++] = p;
    }
    if (whole_run && ((st = training_point(rd, a, 0, 0))
                      || (st = training_point(rd, a, in->n_steps - 1, 1))))
        goto fail;

    /* --- non-finite values over all steps */
    if (whole_run && (st = scan_nonfinite(rd, a)))
        goto fail;

    /* --- warnings */
    {
        resdiag_verdict v = a->verdict;
        int pre_like = v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_SANDWICH ||
                       v == RESDIAG_VERDICT_PRE_OR_SANDWICH || v == RESDIAG_VERDICT_PARALLEL ||
                       v == RESDIAG_VERDICT_MIXED;
        if (pre_like && a->final_norm == 0)
            warn(a, "%s without a final norm: the head reads a stream that grows with depth",
                 resdiag_verdict_name(a->verdict));
        if (a->growth > a->max_growth)
            warn(a, "the stream norm grows %.3gx over depth (more than %.3g)", a->growth,
                 a->max_growth);
        for (int l = 0; l < L; l++)
            for (int s = 0; s < S; s++) {
                double r = a->r[l * S + s];
                if (r < NEGLIGIBLE)
                    warn(a, "layer %d %s: negligible update r = %.2g (< %g)", l,
                         a->sublayer_names[s], r, NEGLIGIBLE);
                else if (r > DOMINANT)
                    warn(a, "layer %d %s: dominant update r = %.3g (> %g): the branch outweighs "
                         "the stream", l, a->sublayer_names[s], r, DOMINANT);
            }
        if (a->declared != RESDIAG_PLACEMENT_UNDECLARED) {
            int agree = rd_declared_agrees(a);
            if (agree == 0)
                warn(a, "the trainer declares %s, but the data say %s",
                     resdiag_placement_name(a->declared), resdiag_verdict_name(a->verdict));
        }
        if (a->nf_found)
            warn(a, "non-finite values from step %lld on", (long long)a->nf_step);
        int n_missing = 0, first_missing = -1;
        for (int i = 0; i < L * S; i++)
            if (a->sub[i].missing && n_missing++ == 0)
                first_missing = i;
        if (n_missing) {
            char names[128] = "";
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                if (a->sub[first_missing].missing & (1u << b)) {
                    size_t u = strlen(names);
                    snprintf(names + u, sizeof names - u, "%s%s", u ? ", " : "",
                             resdiag_site_name((resdiag_site)b));
                }
            warn(a, "%s not observed while the other sites are, in %d of %d sublayers (first: "
                 "layer %d %s; a hooked module that never ran?): cannot tell those", names,
                 n_missing, L * S, first_missing / S, a->sublayer_names[first_missing % S]);
        }
    }

    free(sd);
    free(skbuf);
    /* What training made of the run: the last step, analysed the same way.
     * Its failure (a last step cut short, say) does not fail this one. */
    if (whole_run && si != a->n_steps - 1) {
        resdiag_analyze_options lo = o;
        lo.step_index = a->n_steps - 1;
        a->at_last_status = analyze(rd, &lo, &a->at_last, 0);
    }
    *out = a;
    return RESDIAG_OK;
fail:
    free(sd);
    free(skbuf);
    resdiag_analysis_free(a);
    rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: cannot analyse the run: %s", fn,
           resdiag_strerror(st));
    return st;
}

resdiag_status resdiag_analyze(const resdiag_reader *rd, const resdiag_analyze_options *opt,
                               resdiag_analysis **out)
{
    return analyze(rd, opt, out, 1);
}

/* 1 agrees, 0 disagrees, -1 cannot compare (undeclared, or the data do not
 * decide, or stream-only evidence covers the declaration). */
int rd_declared_agrees(const rd_analysis *a)
{
    resdiag_verdict v = a->verdict;
    resdiag_placement d = a->declared;
    if (d == RESDIAG_PLACEMENT_UNDECLARED || v == RESDIAG_VERDICT_CANNOT_TELL)
        return -1;
    if (v == RESDIAG_VERDICT_POST_FAMILY)
        return d == RESDIAG_PLACEMENT_POST || d == RESDIAG_PLACEMENT_DEEPNORM ? -1 : 0;
    if (v == RESDIAG_VERDICT_NOT_RENORMALIZED)
        return d == RESDIAG_PLACEMENT_PRE || d == RESDIAG_PLACEMENT_SANDWICH ||
                       d == RESDIAG_PLACEMENT_PARALLEL || d == RESDIAG_PLACEMENT_NONE
                   ? -1
                   : 0;
    if (v == RESDIAG_VERDICT_PRE_OR_SANDWICH)
        return d == RESDIAG_PLACEMENT_PRE || d == RESDIAG_PLACEMENT_SANDWICH ? -1 : 0;
    if (v == RESDIAG_VERDICT_INCONSISTENT)
        return 0;
    if ((int)v != (int)d)
        return 0;
    if (v == RESDIAG_VERDICT_MIXED && a->mix_layers >= 0 && a->declared_mix != a->mix_layers)
        return 0;
    return 1;
}

/* ------------------------------------------------------------ accessors */

resdiag_verdict resdiag_analysis_verdict(const resdiag_analysis *a)
{
    return a ? a->verdict : RESDIAG_VERDICT_CANNOT_TELL;
}

resdiag_confidence resdiag_analysis_confidence(const resdiag_analysis *a)
{
    return a && a->verdict != RESDIAG_VERDICT_CANNOT_TELL ? a->conf : RESDIAG_CONFIDENCE_NONE;
}

int resdiag_analysis_mix_layers(const resdiag_analysis *a)
{
    return a && a->verdict == RESDIAG_VERDICT_MIXED ? a->mix_layers : -1;
}

double resdiag_analysis_alpha(const resdiag_analysis *a)
{
    return a && a->verdict == RESDIAG_VERDICT_DEEPNORM ? a->alpha : NAN;
}

int resdiag_analysis_final_norm(const resdiag_analysis *a)
{
    return a ? a->final_norm : -1;
}

int resdiag_analysis_stream_only(const resdiag_analysis *a)
{
    return a ? a->stream_only : 0;
}

resdiag_verdict resdiag_analysis_sublayer(const resdiag_analysis *a, int layer, int sublayer,
                                          double *alpha)
{
    if (alpha)
        *alpha = NAN;
    if (!a || layer < 0 || layer >= a->n_layers || sublayer < 0 || sublayer >= a->n_sublayers)
        return RESDIAG_VERDICT_CANNOT_TELL;
    const rd_sub *r = &a->sub[layer * a->n_sublayers + sublayer];
    if (alpha && r->v == RESDIAG_VERDICT_DEEPNORM)
        *alpha = r->alpha;
    return r->v;
}

double resdiag_analysis_growth(const resdiag_analysis *a)
{
    return a ? a->growth : NAN;
}

int64_t resdiag_analysis_step(const resdiag_analysis *a)
{
    return a ? a->step : -1;
}

int resdiag_analysis_first_nonfinite(const resdiag_analysis *a, int64_t *step, int *layer,
                                     int *sublayer, int *site, resdiag_direction *dir)
{
    if (!a || !a->nf_found)
        return 0;
    if (step)
        *step = a->nf_step;
    if (layer)
        *layer = a->nf_layer;
    if (sublayer)
        *sublayer = a->nf_sub;
    if (site)
        *site = a->nf_site;
    if (dir)
        *dir = a->nf_dir;
    return 1;
}

const char *resdiag_verdict_name(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL: return "cannot_tell";
    case RESDIAG_VERDICT_PRE: return "pre";
    case RESDIAG_VERDICT_POST: return "post";
    case RESDIAG_VERDICT_SANDWICH: return "sandwich";
    case RESDIAG_VERDICT_DEEPNORM: return "deepnorm";
    case RESDIAG_VERDICT_MIXED: return "mixed";
    case RESDIAG_VERDICT_PARALLEL: return "parallel";
    case RESDIAG_VERDICT_NONE: return "none";
    case RESDIAG_VERDICT_INCONSISTENT: return "inconsistent";
    case RESDIAG_VERDICT_POST_FAMILY: return "post_family";
    case RESDIAG_VERDICT_NOT_RENORMALIZED: return "not_renormalized";
    case RESDIAG_VERDICT_PRE_OR_SANDWICH: return "pre_or_sandwich";
    }
    return "?";
}

const char *resdiag_confidence_name(resdiag_confidence c)
{
    switch (c) {
    case RESDIAG_CONFIDENCE_NONE: return "none";
    case RESDIAG_CONFIDENCE_LOW: return "low";
    case RESDIAG_CONFIDENCE_MEDIUM: return "medium";
    case RESDIAG_CONFIDENCE_HIGH: return "high";
    }
    return "?";
}

/* ---------------------------------------------------------------- check */

void resdiag_check_options_init(resdiag_check_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

static resdiag_check_result say(char *why, size_t len, resdiag_check_result r, const char *fmt,
                                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static resdiag_check_result say(char *why, size_t len, resdiag_check_result r, const char *fmt,
                                ...)
{
    if (why && len) {
        /* the line may quote the run's names (a->why): one line, escaped */
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        rd_text_escape(why, len, line);
    }
    return r;
}

resdiag_check_result resdiag_analysis_check(const resdiag_analysis *a,
                                            const resdiag_check_options *c, char *why,
                                            size_t len)
{
    static const char fn[] = "resdiag_analysis_check";
    if (why && len)
        why[0] = 0;
    /* A caller built against an older header passes a smaller struct: the
     * fields it does not have keep their defaults, and nothing past its
     * struct_size is read. expect has no default, so it must be there. */
    resdiag_check_options o;
    resdiag_check_options_init(&o);
    const size_t min_size = offsetof(resdiag_check_options, expect) + sizeof o.expect;
    if (c && (c->struct_size < min_size || c->struct_size > sizeof o)) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
               "(call resdiag_check_options_init)", fn, c->struct_size);
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "client bug: %s: options.struct_size "
                   "%zu (call resdiag_check_options_init)", fn, c->struct_size);
    }
    if (c)
        memcpy(&o, c, c->struct_size);
    int from_declared = o.expect == RESDIAG_EXPECT_DECLARED;
    if (!a || !c ||
        (!from_declared && (o.expect <= RESDIAG_PLACEMENT_UNDECLARED ||
                            o.expect > RESDIAG_PLACEMENT_NONE)))
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "client bug: no analysis or no valid "
                   "expected placement");
    if (from_declared) {
        if (a->declared == RESDIAG_PLACEMENT_UNDECLARED)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot check the declared "
                       "placement: the run declares none (resdiag_model.declared_placement)");
        o.expect = a->declared;
        /* The report's contradiction and this check's failure are one test. */
        if (a->declared == RESDIAG_PLACEMENT_MIXED && a->verdict == RESDIAG_VERDICT_MIXED &&
            rd_declared_agrees(a) == 0)
            return say(why, len, RESDIAG_CHECK_FAILS, "the data contradict the declared "
                       "placement: declared mixed with %d post-norm layers, observed mixed "
                       "with %d (confidence %s)", a->declared_mix, a->mix_layers,
                       resdiag_confidence_name(a->conf));
    }
    c = &o;
    char want_buf[48];
    snprintf(want_buf, sizeof want_buf, "%s%s", resdiag_placement_name(c->expect),
             from_declared ? " (as declared)" : "");
    const char *want = want_buf;
    resdiag_verdict v = a->verdict, e = (resdiag_verdict)c->expect;
    const char *conf = resdiag_confidence_name(a->conf);
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL:
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell%s: %s",
                   a->stream_only ? " with stream-only evidence" : "", a->why);
    case RESDIAG_VERDICT_POST_FAMILY:
        if (e == RESDIAG_VERDICT_POST || e == RESDIAG_VERDICT_DEEPNORM)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell post-norm from deepnorm "
                       "with stream-only evidence: every layer's stream is renormalized, but "
                       "what the norm reads was not observed");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: every layer's stream is renormalized "
                   "(post-norm or deepnorm), from stream-only evidence", want);
    case RESDIAG_VERDICT_NOT_RENORMALIZED:
        if (e == RESDIAG_VERDICT_PRE || e == RESDIAG_VERDICT_SANDWICH ||
            e == RESDIAG_VERDICT_PARALLEL || e == RESDIAG_VERDICT_NONE)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell with stream-only "
                       "evidence: the stream is not renormalized in any layer (pre-norm, "
                       "sandwich, parallel or no norm)");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: no layer renormalizes the stream "
                   "(stream-only evidence)", want);
    case RESDIAG_VERDICT_PRE_OR_SANDWICH:
        if (e == RESDIAG_VERDICT_PRE || e == RESDIAG_VERDICT_SANDWICH)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell pre-norm from sandwich: "
                       "the relations are pre-type, but whether branch_out is an RMSNorm output "
                       "(its input small next to epsilon) cannot be told");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: observed pre-norm or sandwich "
                   "(confidence %s)", want, conf);
    case RESDIAG_VERDICT_INCONSISTENT:
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: the relations between the sites fit "
                   "no placement (%s)", want, a->why);
    default:
        break;
    }
    if (v != e) {
        if (v == RESDIAG_VERDICT_MIXED && a->mix_layers > 0)
            return say(why, len, RESDIAG_CHECK_FAILS, "not %s: observed mixed, post-norm in "
                       "layers 0..%d and pre-norm after (confidence %s)", want,
                       a->mix_layers - 1, conf);
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: observed %s (confidence %s)", want,
                   resdiag_verdict_name(v), conf);
    }
    if (c->require_final_norm && a->final_norm == 0)
        return say(why, len, RESDIAG_CHECK_FAILS, "%s holds, but there is no final norm", want);
    if (c->require_final_norm && a->final_norm < 0)
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "%s holds, but whether there is a final "
                   "norm cannot be told (final-norm sites not observed)", want);
    if (c->max_growth > 0) {
        if (isnan(a->growth))
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "%s holds, but the stream growth "
                       "cannot be measured", want);
        if (a->growth > c->max_growth)
            return say(why, len, RESDIAG_CHECK_FAILS, "%s holds, but the stream grows %.3gx over "
                       "depth (more than %g)", want, a->growth, c->max_growth);
    }
    if (v == RESDIAG_VERDICT_DEEPNORM)
        return say(why, len, RESDIAG_CHECK_HOLDS, "holds: deepnorm, alpha = %.4g (confidence %s)",
                   a->alpha, conf);
    if (v == RESDIAG_VERDICT_MIXED && a->mix_layers > 0)
        return say(why, len, RESDIAG_CHECK_HOLDS, "holds: mixed, post-norm in layers 0..%d, "
                   "pre-norm after (confidence %s%s)", a->mix_layers - 1, conf,
                   a->stream_only ? ", stream-only evidence" : "");
    return say(why, len, RESDIAG_CHECK_HOLDS, "holds: %s%s (confidence %s)",
               resdiag_verdict_name(v), from_declared ? ", as declared" : "", conf);
}

void resdiag_free(void *p)
{
    free(p);
}
