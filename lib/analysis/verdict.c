/*
 * verdict.c - the model's placement verdict: from the layers' verdicts
 * (the relations decided, placement.c), else from the signature of each
 * layer's stream (a stream-only record, or no sketches); the hooks that
 * decided it; and how the declared placement compares (never used to
 * decide).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/phases.h"

/* ---------------------------------------------------- verdict families */

int rd_is_post_family(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_POST || v == RESDIAG_VERDICT_DEEPNORM;
}

int rd_is_pre_family(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_SANDWICH ||
           v == RESDIAG_VERDICT_PARALLEL || v == RESDIAG_VERDICT_NONE ||
           v == RESDIAG_VERDICT_PRE_OR_SANDWICH;
}

/* Combines two verdicts of one family where PRE_OR_SANDWICH stands for
 * either of PRE and SANDWICH: the more specific one wins; a branch that
 * adds 0 says nothing against either; other pairs are no one placement. */
resdiag_verdict rd_combine_verdicts(resdiag_verdict a, resdiag_verdict b)
{
    if (a == RESDIAG_VERDICT_CANNOT_TELL || a == RESDIAG_VERDICT_ZERO_BRANCHES)
        return b == RESDIAG_VERDICT_CANNOT_TELL ? a : b;
    if (b == RESDIAG_VERDICT_CANNOT_TELL || b == RESDIAG_VERDICT_ZERO_BRANCHES || a == b)
        return a;
    if (a == RESDIAG_VERDICT_PRE_OR_SANDWICH &&
        (b == RESDIAG_VERDICT_PRE || b == RESDIAG_VERDICT_SANDWICH))
        return b == RESDIAG_VERDICT_SANDWICH ? b : a;
    if (b == RESDIAG_VERDICT_PRE_OR_SANDWICH &&
        (a == RESDIAG_VERDICT_PRE || a == RESDIAG_VERDICT_SANDWICH))
        return a == RESDIAG_VERDICT_SANDWICH ? a : b;
    return RESDIAG_VERDICT_INCONSISTENT;
}

resdiag_verdict rd_layer_verdict(const rd_analysis *a, int l)
{
    int S = a->load.n_sublayers;
    resdiag_verdict lv = RESDIAG_VERDICT_CANNOT_TELL;
    int differ = 0;
    for (int s = 0; s < S; s++) {
        resdiag_verdict v = a->placement.sub[l * S + s].v;
        if (v == RESDIAG_VERDICT_INCONSISTENT)
            return v;
        resdiag_verdict c = rd_combine_verdicts(lv, v);
        if (c == RESDIAG_VERDICT_INCONSISTENT)
            differ = 1;
        else
            lv = c;
    }
    if (!differ)
        return lv;
    /* sublayers of different placements: the model verdict looks for the
     * same pattern in every layer; an undecided one leaves it open */
    for (int s = 0; s < S; s++)
        if (a->placement.sub[l * S + s].v == RESDIAG_VERDICT_CANNOT_TELL)
            return RESDIAG_VERDICT_CANNOT_TELL;
    return RESDIAG_VERDICT_PER_SUBLAYER;
}

/* --------------------------------------------------- from the relations */

/* The weakest decided sublayer sets the model's confidence: *conf, and
 * why in a->conf_why. */
static void weakest_sublayer(rd_analysis *a, resdiag_confidence *conf)
{
    int weak = -1, n_weak = 0; /* the sublayer that sets the confidence */
    for (int l = 0; l < a->load.n_layers; l++) {
        if (a->placement.layer_v[l] == RESDIAG_VERDICT_CANNOT_TELL)
            continue;
        for (int s = 0; s < a->load.n_sublayers; s++) {
            rd_sub *r = &a->placement.sub[l * a->load.n_sublayers + s];
            if (r->v != RESDIAG_VERDICT_CANNOT_TELL && r->conf < *conf) {
                *conf = r->conf;
                weak = l * a->load.n_sublayers + s;
            }
            if (r->v != RESDIAG_VERDICT_CANNOT_TELL && r->conf < RESDIAG_CONFIDENCE_HIGH)
                n_weak++;
        }
    }
    if (weak >= 0) {
        const rd_sub *r = &a->placement.sub[weak];
        snprintf(a->verdict.conf_why, sizeof a->verdict.conf_why, "layer %d %s%s: %s",
                 weak / a->load.n_sublayers, a->load.sublayer_names[weak % a->load.n_sublayers],
                 n_weak > 1 ? " (the weakest of the sublayers below high)" : "",
                 r->conf_why[0] ? r->conf_why : "weaker evidence");
    }
}

/* Every decided layer agrees on `first`: pre-or-sandwich says how many
 * sublayers looked like a norm output; deepnorm gets the mean alpha. */
static void decide_one_family(rd_analysis *a, resdiag_verdict first)
{
    int n = a->load.n_layers * a->load.n_sublayers;
    a->verdict.v = first;
    if (first == RESDIAG_VERDICT_PRE_OR_SANDWICH) {
        int nsw = 0;
        for (int i = 0; i < n; i++)
            nsw += a->placement.sub[i].v == RESDIAG_VERDICT_PRE_OR_SANDWICH;
        a->verdict.conf = RESDIAG_CONFIDENCE_LOW;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "pre-type relations in every layer; branch_out looks "
                 "like a norm output in %d of %d sublayers, but no norm on the branch's output "
                 "was observed",
                 nsw, n);
        snprintf(a->verdict.conf_why, sizeof a->verdict.conf_why,
                 "pre-norm or sandwich: record out_norm_in "
                 "and out_norm_out (the input and output of a norm after the branch) to "
                 "decide; a signature alone does not");
    }
    if (first == RESDIAG_VERDICT_ZERO_BRANCHES) {
        a->verdict.conf = RESDIAG_CONFIDENCE_HIGH;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "every branch adds exactly 0 at this step "
                 "(zero-initialised, as ReZero or SkipInit): where the norms sit shows once "
                 "the branches move; judge a later step (--last)");
    }
    if (first == RESDIAG_VERDICT_DEEPNORM) {
        double s = 0;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (a->placement.sub[i].v == RESDIAG_VERDICT_DEEPNORM) {
                s += a->placement.sub[i].alpha;
                m++;
            }
        a->verdict.alpha = s / m;
    }
}

/* Post-norm everywhere but in the model's very last sublayer, which has no
 * norm of its own while a final norm reads its output: the final norm is
 * that sublayer's post-norm (x-transformers with pre_norm=False). */
static int last_norm_is_final(const rd_analysis *a)
{
    int n = a->load.n_layers * a->load.n_sublayers;
    /* a final norm observed as a norm step of its own (at init it may
     * change an almost normalized stream by less than rounding) */
    if (n < 2 || !(a->final_norm.reads_norm == 1 || a->final_norm.identity) ||
        a->placement.sub[n - 1].v != RESDIAG_VERDICT_NONE)
        return 0;
    int n_post = 0;
    for (int i = 0; i < n - 1; i++) {
        resdiag_verdict v = a->placement.sub[i].v;
        /* an undecided or zero sublayer says nothing against it (its layer
         * was decided by the others) */
        if (v != RESDIAG_VERDICT_POST && v != RESDIAG_VERDICT_CANNOT_TELL &&
            v != RESDIAG_VERDICT_ZERO_BRANCHES)
            return 0;
        n_post += v == RESDIAG_VERDICT_POST;
    }
    return n_post > 0;
}

/* The same placement at each sublayer position in every layer, the
 * positions differing: PER_SUBLAYER with its pattern. 0 when some
 * position disagrees across the layers. */
static int per_sublayer_pattern(rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    size_t u = 0;
    a->verdict.pattern[0] = 0;
    for (int s = 0; s < S; s++) {
        resdiag_verdict p = RESDIAG_VERDICT_CANNOT_TELL;
        for (int l = 0; l < L; l++) {
            p = rd_combine_verdicts(p, a->placement.sub[l * S + s].v);
            if (p == RESDIAG_VERDICT_INCONSISTENT)
                return 0;
        }
        int w = snprintf(a->verdict.pattern + u, sizeof a->verdict.pattern - u, "%s%s: %s",
                         s ? ", " : "", a->load.sublayer_names[s], resdiag_verdict_name(p));
        if (w > 0 && (size_t)w < sizeof a->verdict.pattern - u)
            u += (size_t)w;
    }
    return 1;
}

/* Model verdict from the per-layer verdicts of a full record. */
static void decide_from_layers(rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    int n_dec = 0, n_post = 0, n_pre = 0, n_inc = 0, n_per = 0, n_zero = 0;
    resdiag_verdict first = RESDIAG_VERDICT_CANNOT_TELL;
    int same = 1;
    resdiag_confidence conf = RESDIAG_CONFIDENCE_HIGH;
    for (int i = 0; i < L * S; i++)
        a->verdict.n_zero_branches += a->placement.sub[i].v == RESDIAG_VERDICT_ZERO_BRANCHES;
    for (int l = 0; l < L; l++) {
        resdiag_verdict v = a->placement.layer_v[l];
        if (v == RESDIAG_VERDICT_CANNOT_TELL)
            continue;
        n_dec++;
        n_inc += v == RESDIAG_VERDICT_INCONSISTENT;
        n_per += v == RESDIAG_VERDICT_PER_SUBLAYER;
        n_zero += v == RESDIAG_VERDICT_ZERO_BRANCHES;
        n_post += rd_is_post_family(v);
        n_pre += rd_is_pre_family(v);
        resdiag_verdict c = rd_combine_verdicts(first, v);
        if (c == RESDIAG_VERDICT_INCONSISTENT)
            same = 0;
        else
            first = c;
    }
    weakest_sublayer(a, &conf);
    a->verdict.n_undecided = L - n_dec;
    if (n_dec == 0) {
        a->verdict.v = RESDIAG_VERDICT_CANNOT_TELL;
        unsigned missing = 0;
        for (int i = 0; i < L * S; i++)
            missing |= a->placement.sub[i].missing;
        char names[160] = "";
        for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
            if (missing >> b & 1u) {
                size_t u = strlen(names);
                snprintf(names + u, sizeof names - u, "%s%s", u ? ", " : "",
                         resdiag_site_name((resdiag_site)b));
            }
        if (names[0])
            snprintf(a->verdict.why, sizeof a->verdict.why,
                     "no layer's relations decide between the "
                     "placements; the site(s) that would: %s (not recorded)",
                     names);
        else
            snprintf(a->verdict.why, sizeof a->verdict.why,
                     "no layer's relations decide between the "
                     "placements");
        return;
    }
    if (n_inc) {
        a->verdict.v = RESDIAG_VERDICT_INCONSISTENT;
        a->verdict.conf = conf;
        snprintf(a->verdict.why, sizeof a->verdict.why, "%d layer(s) fit no placement", n_inc);
        return;
    }
    if (a->verdict.n_undecided) {
        /* Undecided layers: never guess a family for them. */
        a->verdict.v = RESDIAG_VERDICT_CANNOT_TELL;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "%d of %d layers undecided (the others: %s)", a->verdict.n_undecided, L,
                 resdiag_verdict_name(first));
        return;
    }
    a->verdict.conf = conf;
    if (last_norm_is_final(a)) {
        a->verdict.v = RESDIAG_VERDICT_POST;
        a->verdict.last_norm_is_final = 1;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "post-type relations in every sublayer but the last, "
                 "whose norm is the final norm (it has none of its own, and the final norm "
                 "reads its output)");
        return;
    }
    if (n_per || (!same && n_post == 0 && n_pre == 0)) {
        if (per_sublayer_pattern(a)) {
            a->verdict.v = RESDIAG_VERDICT_PER_SUBLAYER;
            snprintf(a->verdict.why, sizeof a->verdict.why,
                     "each sublayer has its own placement, the same "
                     "in every layer: %s",
                     a->verdict.pattern);
            return;
        }
        a->verdict.v = RESDIAG_VERDICT_INCONSISTENT;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "the layers' sublayers differ, and not in one "
                 "pattern repeated in every layer");
        return;
    }
    if (same) {
        decide_one_family(a, first);
        if (n_zero && first != RESDIAG_VERDICT_ZERO_BRANCHES)
            snprintf(a->verdict.why, sizeof a->verdict.why,
                     "%d layer(s) decided; in %d sublayer(s) the "
                     "branch adds exactly 0 (no evidence there)",
                     n_dec - n_zero, a->verdict.n_zero_branches);
        return;
    }
    if (n_post && n_pre && n_post + n_pre + n_zero == n_dec) {
        a->verdict.v = RESDIAG_VERDICT_MIXED;
        int k = 0;
        while (k < L && rd_is_post_family(a->placement.layer_v[k]))
            k++;
        int rest_pre = 1;
        for (int l = k; l < L; l++)
            rest_pre &= rd_is_pre_family(a->placement.layer_v[l]);
        a->verdict.mix_layers = rest_pre && k > 0 ? k : -1;
        return;
    }
    a->verdict.v = RESDIAG_VERDICT_INCONSISTENT;
    snprintf(a->verdict.why, sizeof a->verdict.why, "layers disagree, with no pattern");
}

/* --------------------------------------------------- from the signature */

/* Model verdict from the signature of each layer's stream (stream-only
 * record, or no sketches), as depth.c judged it against the run's own
 * normalized layers. */
static void decide_from_signature(rd_analysis *a)
{
    int L = a->load.n_layers;
    int n_n = 0, n_u = 0, n_q = 0;
    for (int l = 0; l < L; l++) {
        n_n += a->depth.layer_sig[l] == RD_SIG_NORMALIZED;
        n_u += a->depth.layer_sig[l] == RD_SIG_NOT;
        n_q += a->depth.layer_sig[l] == RD_SIG_UNCLEAR || a->depth.layer_sig[l] == RD_SIG_UNKNOWN;
    }
    a->verdict.n_undecided = n_q;
    a->verdict.conf = RESDIAG_CONFIDENCE_LOW;
    snprintf(a->verdict.conf_why, sizeof a->verdict.conf_why,
             "only the stream's normalization signature: the "
             "relations between the sites were not observed");
    if (n_q) {
        a->verdict.v = RESDIAG_VERDICT_CANNOT_TELL;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "%d of %d layers' streams are neither clearly "
                 "normalized nor clearly not",
                 n_q, L);
        return;
    }
    if (n_n == L) {
        a->verdict.v = RESDIAG_VERDICT_POST_FAMILY;
        a->verdict.conf = RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "every layer's stream is a norm output: post-norm or "
                 "deepnorm (they differ only in what the norm reads, which was not observed)");
        return;
    }
    if (n_u == L) {
        a->verdict.v = RESDIAG_VERDICT_NOT_RENORMALIZED;
        a->verdict.conf = RESDIAG_CONFIDENCE_MEDIUM;
        snprintf(a->verdict.why, sizeof a->verdict.why,
                 "no layer's stream is a norm output: pre-norm, sandwich, "
                 "parallel or no norm (the stream alone cannot separate them)");
        return;
    }
    /* each layer clearly renormalized or clearly not, as for the two
     * families above: the same evidence, the same confidence */
    a->verdict.v = RESDIAG_VERDICT_MIXED;
    a->verdict.conf = RESDIAG_CONFIDENCE_MEDIUM;
    int k = 0;
    while (k < L && a->depth.layer_sig[k] == RD_SIG_NORMALIZED)
        k++;
    int rest = 1;
    for (int l = k; l < L; l++)
        rest &= a->depth.layer_sig[l] == RD_SIG_NOT;
    a->verdict.mix_layers = rest && k > 0 ? k : -1;
    snprintf(a->verdict.why, sizeof a->verdict.why,
             "%d layer(s) renormalize the stream, %d do not", n_n, n_u);
}

int rd_out_norm_recorded(const rd_analysis *a)
{
    return a->observe.n_obs[RESDIAG_FORWARD][RESDIAG_OUT_NORM_IN] ||
           a->observe.n_obs[RESDIAG_FORWARD][RESDIAG_OUT_NORM_OUT];
}

/* 1 agrees, 0 disagrees, -1 cannot compare (undeclared, or the data do not
 * decide, or stream-only evidence covers the declaration). */
int rd_declared_agrees(const rd_analysis *a)
{
    resdiag_verdict v = a->verdict.v;
    resdiag_placement d = a->load.declared;
    if (d == RESDIAG_PLACEMENT_UNDECLARED || v == RESDIAG_VERDICT_CANNOT_TELL ||
        v == RESDIAG_VERDICT_ZERO_BRANCHES)
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
    if (v == RESDIAG_VERDICT_PRE && d == RESDIAG_PLACEMENT_SANDWICH && !rd_out_norm_recorded(a))
        return -1; /* its second norm would be in sites that were not recorded */
    if (v == RESDIAG_VERDICT_INCONSISTENT)
        return 0;
    if ((int)v != (int)d)
        return 0;
    if (v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers >= 0 &&
        a->load.declared_mix != a->verdict.mix_layers)
        return 0;
    return 1;
}

/* ------------------------------------------------------ deciding hooks */

/* The call sites (file:line) of the first sublayer that decided, and for a
 * mixed verdict of the first one of the other family; of the last stream
 * site when the signature decided. */
static void deciding_hooks(const resdiag_reader *rd, rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    for (int i = 0; i < L * S && a->observe.use_relations; i++) {
        rd_sub *r = &a->placement.sub[i];
        if (r->v == RESDIAG_VERDICT_CANNOT_TELL)
            continue;
        int l = i / S, s = i % S;
        if (!a->verdict.cs_norm_in) {
            a->verdict.cs_layer = l;
            a->verdict.cs_sub = s;
            a->verdict.cs_norm_in = rd_analysis_dupstr(
                resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s, RESDIAG_NORM_IN));
            a->verdict.cs_branch_out = rd_analysis_dupstr(
                resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s, RESDIAG_BRANCH_OUT));
            a->verdict.cs_stream_out = rd_analysis_dupstr(
                resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s, RESDIAG_STREAM_OUT));
        } else if (!a->verdict.cs_norm_in2 && a->verdict.v == RESDIAG_VERDICT_MIXED &&
                   rd_is_pre_family(r->v) !=
                       rd_is_pre_family(
                           a->placement.sub[a->verdict.cs_layer * S + a->verdict.cs_sub].v)) {
            a->verdict.cs_layer2 = l;
            a->verdict.cs_sub2 = s;
            a->verdict.cs_norm_in2 = rd_analysis_dupstr(
                resdiag_reader_callsite(rd, RESDIAG_FORWARD, l, s, RESDIAG_NORM_IN));
        }
    }
    if (!a->observe.use_relations && L > 0) {
        a->verdict.cs_layer = L - 1;
        a->verdict.cs_sub = S - 1;
        a->verdict.cs_stream_out = rd_analysis_dupstr(
            resdiag_reader_callsite(rd, RESDIAG_FORWARD, L - 1, S - 1, RESDIAG_STREAM_OUT));
    }
}

void rd_analysis_decide(const resdiag_reader *rd, rd_analysis *a)
{
    a->verdict.alpha = NAN;
    a->verdict.mix_layers = -1;
    if (a->observe.use_relations)
        decide_from_layers(a);
    else
        decide_from_signature(a);
    deciding_hooks(rd, a);
}

/* An aborted judged step is shown, not judged: its records are incomplete.
 * Runs after every phase that reads the verdict of the step's records. */
void rd_analysis_abort_verdict(rd_analysis *a)
{
    if (!a->aborted.step_aborted)
        return;
    a->verdict.v = RESDIAG_VERDICT_CANNOT_TELL;
    a->verdict.conf = RESDIAG_CONFIDENCE_NONE;
    a->verdict.mix_layers = -1;
    a->verdict.alpha = NAN;
    snprintf(a->verdict.why, sizeof a->verdict.why,
             "step %lld was aborted%s%.*s%s: its records are "
             "incomplete, not judged",
             (long long)a->load.step, a->aborted.step_reason[0] ? " (" : "",
             (int)(sizeof a->verdict.why - 96), a->aborted.step_reason,
             a->aborted.step_reason[0] ? ")" : "");
    a->verdict.conf_why[0] = '\0';
}
