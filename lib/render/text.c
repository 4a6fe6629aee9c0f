/*
 * text.c - the analysis as text for people (resdiag_analysis_to_text):
 * the run, the placement and its evidence, the per-layer table, the
 * stream's depth laws, gradients, non-finite values, the steps over the
 * run, warnings, then the legend of the terms used (text_legend.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"
#include "format/metric_value.h"
#include "render/consequences.h"
#include "render/ranks.h"
#include "render/shared.h"
#include "render/table.h"
#include "render/text_legend.h"

/* The report is built in a growing string (strbuf.h). Every string that
 * came from the run file (names, description, provenance, call sites, and
 * the sentences that quote them) goes through the text escaper, escape.h:
 * E(s). */
typedef rd_strbuf sb;
#define E(s) rd_esc_text(esc, (s))

static void fit_text(sb *b, const rd_fit *f, const char *what)
{
    if (f->n < 2 || isnan(f->b)) {
        rd_strbuf_printf(b, "%s: too few points (%d)", what, f->n);
        return;
    }
    if (f->y_spread < RD_FLAT_SPREAD) {
        rd_strbuf_printf(b, "%s: flat (the %d values agree to %.0e)", what, f->n, RD_FLAT_SPREAD);
        return;
    }
    if (!f->ok) {
        rd_strbuf_printf(b, "%s: %+.3f from %d points, too short for an interval", what, f->b, f->n);
        return;
    }
    rd_strbuf_printf(b, "%s: %+.3f [%+.3f, %+.3f] (95%%), R^2 %.3f, n = %d", what, f->b, f->b_lo, f->b_hi,
              f->r2, f->n);
    if (f->n < 4)
        rd_strbuf_printf(b, " - too short to trust");
    else if (f->b_lo > -0.1 && f->b_hi < 0.1)
        rd_strbuf_printf(b, " - flat (slope within +-0.1)");
    else if (!(f->r2 >= 0.5))
        rd_strbuf_printf(b, " - poor fit");
}

static const char *site_label(int site)
{
    return site < 0 ? "parameter gradient" : resdiag_site_name((resdiag_site)site);
}

/* The data contradict the declaration: the report says so first. */
static void text_contradiction(sb *b, const rd_analysis *a)
{
    if (!rd_declared_contradicted(a))
        return;
    rd_strbuf_printf(b,
                     "WARNING: the data contradict the declared placement: the trainer "
                     "declares %s",
                     resdiag_placement_name(a->load.declared));
    if (a->load.declared == RESDIAG_PLACEMENT_MIXED)
        rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->load.declared_mix - 1);
    rd_strbuf_printf(b, ", the data say %s", rd_verdict_human(a->verdict.v));
    if (a->verdict.v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers > 0)
        rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->verdict.mix_layers - 1);
    rd_strbuf_printf(b, " (confidence %s); `resdiag check --expect declared` fails on this run\n",
                     resdiag_confidence_name(a->verdict.conf));
}

/* The evidence of the sketch relations: one line per run of layers with
 * the same sublayer verdicts, the confidence rule, relations that hold by
 * construction, the call order and the deciding hooks. */
static void text_relations(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    /* evidence: one line per run of layers with the same sublayer verdicts */
    rd_strbuf_printf(b, "  evidence (sketch relations, relative error; true relations ~1e-7 in f32, "
                 "<3e-2 in bf16):\n");
    int l = 0;
    while (l < L) {
        int m = rd_layer_group_end(a, l);
        for (int s = 0; s < S; s++) {
            const rd_sub *r = &a->placement.sub[l * S + s];
            char range[32];
            if (m - l > 1)
                snprintf(range, sizeof range, "layers %d-%d", l, m - 1);
            else
                snprintf(range, sizeof range, "layer %d", l);
            rd_strbuf_printf(b, "    %-12s %-6s %-12s %s%s%s\n", range,
                             E(a->load.sublayer_names[s]), rd_verdict_short(r->v), E(r->why),
                             m - l > 1 ? " (first of these)" : "", "");
        }
        l = m;
    }
    rd_strbuf_printf(b, "  confidence: the rival placement's error over max(the winner's "
                 "error, the rounding floor): high from %gx, medium from %gx, below that "
                 "cannot tell; rounding floor = 2 x (u + 2^-53 x sqrt(elements)), a relative error "
                 "(1.2e-7 for 64 x 128 f32), u = 2^-24 f32, "
                 "2^-11 f16, 2^-8 bf16 (read from each tensor's largest |value|); "
                 "low: decided by the hook order alone, or a signature; `resdiag check` "
                 "passes or fails from medium up and exits 2 below\n",
                 RD_HIGH_SEP, RD_SEP);
    int n_constructed = 0;
    for (int i = 0; i < L * S; i++)
        for (int j = 0; j < RD_N_REL; j++)
            n_constructed += a->placement.sub[i].constructed >> j & 1u;
    if (n_constructed)
        rd_strbuf_printf(b, "  by construction: %d relation(s) between two records of one "
                         "tensor (declared with resdiag_observe_alias) hold whatever the "
                         "model; shown, not counted\n", n_constructed);
    if (a->placement.order_agree + a->placement.order_disagree)
        rd_strbuf_printf(b,
                         "  call order: %d of %d sublayers call the hooks in the order of the "
                         "verdict (pre: norm before branch; post: branch before norm)\n",
                         a->placement.order_agree,
                         a->placement.order_agree + a->placement.order_disagree);
    if (a->verdict.cs_norm_in && (a->verdict.cs_norm_in[0] || a->verdict.cs_stream_out[0]))
        rd_strbuf_printf(b,
                         "  deciding hooks (layer %d %s): norm_in at %s, branch_out at %s, "
                         "stream_out at %s\n",
                         a->verdict.cs_layer, E(a->load.sublayer_names[a->verdict.cs_sub]),
                         a->verdict.cs_norm_in[0] ? E(a->verdict.cs_norm_in) : "-",
                         a->verdict.cs_branch_out[0] ? E(a->verdict.cs_branch_out) : "-",
                         a->verdict.cs_stream_out[0] ? E(a->verdict.cs_stream_out) : "-");
    if (a->verdict.cs_norm_in2 && a->verdict.cs_norm_in2[0])
        rd_strbuf_printf(b, "  first layer of the other kind (layer %d %s): norm_in at %s\n",
                         a->verdict.cs_layer2, E(a->load.sublayer_names[a->verdict.cs_sub2]),
                         E(a->verdict.cs_norm_in2));
}

/* Without relations: the normalization signature of each layer's stream. */
static void text_signature(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->load.n_layers;
    rd_strbuf_printf(b,
                     "  LESS EVIDENCE: %s; the verdict rests on the normalization signature of "
                     "each layer's stream (per-token norm spread) and the depth law.\n",
                     a->observe.stream_only ? "only the stream was observed"
                                            : "the run has no sketches (sketch_size 0)");
    rd_strbuf_printf(b, "  signature (token-norm spread std/mean of the stream leaving each layer; "
                 "norm output < 3e-4):\n   ");
    for (int l = 0; l < L; l++) {
        const char *s = a->depth.layer_sig[l] == RD_SIG_NORMALIZED ? "norm"
                        : a->depth.layer_sig[l] == RD_SIG_NOT      ? "not"
                                                                   : "?";
        rd_strbuf_printf(b, " L%d %s (%.1e)%s", l, s, a->depth.layer_cv[l],
                         (l + 1) % 4 == 0 && l + 1 < L ? "\n   " : "");
    }
    rd_strbuf_printf(b, "\n");
    if (a->verdict.cs_stream_out && a->verdict.cs_stream_out[0])
        rd_strbuf_printf(b, "  stream hook: %s\n", E(a->verdict.cs_stream_out));
}

static void text_placement(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->load.n_layers;
    rd_strbuf_printf(b, "\nPlacement: %s", rd_verdict_human(a->verdict.v));
    if (a->verdict.v == RESDIAG_VERDICT_DEEPNORM)
        rd_strbuf_printf(b, ", alpha = %.4g", a->verdict.alpha);
    if (a->verdict.v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers > 0)
        rd_strbuf_printf(b, ": post-norm in layers 0..%d, pre-norm in layers %d..%d",
                         a->verdict.mix_layers - 1, a->verdict.mix_layers, L - 1);
    if (a->verdict.v == RESDIAG_VERDICT_PER_SUBLAYER)
        rd_strbuf_printf(b, ": %s", E(a->verdict.pattern));
    if (a->verdict.last_norm_is_final)
        rd_strbuf_printf(b, ", the last sublayer's norm being the final norm");
    if (a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL)
        rd_strbuf_printf(b, " (confidence %s)", resdiag_confidence_name(a->verdict.conf));
    rd_strbuf_printf(b, "\n");
    if (a->verdict.why[0])
        rd_strbuf_printf(b, "  why: %s\n", E(a->verdict.why));
    if (a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL &&
        a->verdict.conf < RESDIAG_CONFIDENCE_HIGH && a->verdict.conf_why[0])
        rd_strbuf_printf(b, "  confidence %s: %s\n", resdiag_confidence_name(a->verdict.conf),
                         E(a->verdict.conf_why));
    if (a->observe.use_relations)
        text_relations(b, esc, a);
    else
        text_signature(b, esc, a);
    rd_strbuf_printf(b, "  final norm: %s - %s\n", rd_final_norm_text(a), E(a->final_norm.why));
    if (a->load.declared == RESDIAG_PLACEMENT_UNDECLARED) {
        rd_strbuf_printf(b, "  declared: nothing\n");
    } else {
        int agree = rd_declared_agrees(a);
        rd_strbuf_printf(b, "  declared: %s", resdiag_placement_name(a->load.declared));
        if (a->load.declared == RESDIAG_PLACEMENT_MIXED)
            rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->load.declared_mix - 1);
        rd_strbuf_printf(b, " - %s\n", agree == 1   ? "agrees with the data"
                                : agree == 0 ? "CONTRADICTED by the data"
                                             : "the data cannot confirm or refute it");
    }
}

static void text_layers(sb *b, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers, P = a->load.n_layer_params;
    int gp = a->gradients.step >= 0 && a->gradients.n_order > 0 ? a->gradients.param_order[0]
                                                                : -1;
    /* The gradient columns stay Frobenius norms: parameters have no tokens,
     * and the Gradients section, its fits and the JSON use the same numbers. */
    rd_strbuf_printf(b, "\nPer layer (x_k = stream leaving layer k-1, x_0 = the embedding; "
                 "||x_k||, rms: mean over tokens of the per-token L2 norm, RMS; "
                 "r = ||dx||/||x||");
    if (a->gradients.step >= 0)
        rd_strbuf_printf(b, ";\n  gradient columns (%s||dL/dx||): Frobenius norm of the whole "
                            "tensor", gp >= 0 ? "parameter, " : "");
    rd_strbuf_printf(b, "):\n");
    rd_strbuf_printf(b, "   k  layer  %10s %9s", "||x_k||", "rms");
    for (int s = 0; s < S; s++) {
        char h[200];
        rd_strbuf_printf(b, " %9s",
                         rd_table_head(h, sizeof h, "r_", a->load.sublayer_names[s], "", 9));
    }
    if (gp >= 0) { /* the column says it is a gradient norm, not a weight */
        char h[200];
        rd_strbuf_printf(
            b, " %16s", rd_table_head(h, sizeof h, "||grad ", a->load.param_names[gp], "||", 16));
    }
    if (a->gradients.step >= 0)
        rd_strbuf_printf(b, " %11s", "||dL/dx||");
    rd_strbuf_printf(b, "\n");
    for (int k = 0; k <= L; k++) {
        if (k == 0)
        {
            rd_strbuf_printf(b, "  %2d  embed ", k);
            rd_table_cell(b, " %10.4g", 10, a->depth.xnorm[0]);
            rd_table_cell(b, " %9.4g", 9, a->depth.xrms[0]);
            if (a->gradients.step >= 0) { /* the embedding has no r and no layer parameters */
                for (int s = 0; s < S; s++)
                    rd_strbuf_printf(b, " %9s", "");
                if (gp >= 0)
                    rd_strbuf_printf(b, " %16s", "");
                rd_table_cell(b, " %11.4g", 11, a->gradients.sgrad_embed);
            }
            rd_strbuf_printf(b, "\n");
        }
        else {
            int l = k - 1;
            rd_strbuf_printf(b, "  %2d  %5d ", k, l);
            rd_table_cell(b, " %10.4g", 10, a->depth.xnorm[k]);
            rd_table_cell(b, " %9.4g", 9, a->depth.xrms[k]);
            for (int s = 0; s < S; s++)
                rd_table_cell(b, " %9.3g", 9, a->placement.r[l * S + s]);
            if (gp >= 0)
                rd_table_cell(b, " %16.4g", 16, a->gradients.grad[(size_t)l * P + gp]);
            if (a->gradients.step >= 0)
                rd_table_cell(b, " %11.4g", 11, a->gradients.sgrad[l]);
            rd_strbuf_printf(b, "\n");
        }
    }
}

static void text_stream(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    rd_strbuf_printf(b, "\nResidual stream:\n");
    char energy[256];
    rd_energy_sentence(energy, sizeof energy, &a->depth.fit_energy, 0);
    if (a->depth.fit_energy.n >= 2 && !isnan(a->depth.fit_energy.b))
        rd_strbuf_printf(b, "  %s; pre-norm theory: linear in k, post-norm: constant\n", energy);
    else
        rd_strbuf_printf(b, "  %s\n", energy);
    rd_strbuf_printf(b, "  ");
    fit_text(b, &a->depth.fit_xlog, "log-log slope of ||x_k|| (k = 1..L)");
    rd_strbuf_printf(b, "\n  growth over depth ||x_L|| / ||x_1||: %.4g\n", a->depth.growth);

    rd_strbuf_printf(b, "\nRelative updates r = ||dx||/||x|| (1/sqrt(k) predicts slope -0.5 for pre-norm; "
                 "post-norm: flat):\n");
    for (int s = 0; s < S && s < RD_MAX_RFIT; s++) {
        rd_strbuf_printf(b, "  %-6s ", E(a->load.sublayer_names[s]));
        fit_text(b, &a->depth.fit_r[s], "all layers");
        rd_strbuf_printf(b, "\n         ");
        fit_text(b, &a->depth.fit_r_deep[s], "deeper half");
        rd_strbuf_printf(b, "\n");
    }
    (void)L;
}

static void text_grads(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->load.n_layers, P = a->load.n_layer_params;
    if (a->gradients.step < 0) {
        if (rd_is_training(a))
            rd_strbuf_printf(b, "\nGradients: none recorded.\n");
        return; /* an evaluation or inference run has none to speak of */
    }
    rd_strbuf_printf(
        b, "\nGradients at step %lld (%s):\n", (long long)a->load.steps[a->gradients.step],
        a->gradients.step == a->load.step_index ? "the analysed step"
                                                : "the first recorded step with gradients");
    for (int i = 0; i < a->gradients.n_order; i++) {
        int p = a->gradients.param_order[i];
        double g0 = a->gradients.grad[p], g1 = a->gradients.grad[(size_t)(L - 1) * P + p];
        if (!(g0 > 0) || !(g1 > 0)) { /* NaN: not recorded; 0: zeroed before they were read */
            rd_strbuf_printf(b,
                             "  %-10s parameter gradients were zero or not available at this "
                             "step (first layer %.4g, last %.4g)\n",
                             E(a->load.param_names[p]), g0, g1);
            continue;
        }
        rd_strbuf_printf(b, "  %-10s %.4g -> %.4g, last/first %.3g; ", E(a->load.param_names[p]),
                         g0, g1, g1 / g0);
        fit_text(b, &a->gradients.fit_grad[p], "log-log slope");
        rd_strbuf_printf(b, "\n");
    }
    rd_strbuf_printf(b, "  %-10s %.4g -> %.4g, last/first %.3g; ", "stream",
                     a->gradients.sgrad[0], a->gradients.sgrad[L - 1],
                     a->gradients.sgrad[0] > 0 ? a->gradients.sgrad[L - 1] / a->gradients.sgrad[0]
                                               : NAN);
    fit_text(b, &a->gradients.fit_sgrad, "log-log slope");
    rd_strbuf_printf(b, "\n  head %s: %.4g\n", rd_head_name(a) ? E(rd_head_name(a)) : "(logits)",
                     a->gradients.head_grad);
    if (a->gradients.n_order > 0) {
        int p = a->gradients.param_order[0];
        double ratio = a->gradients.grad[p] > 0
                           ? a->gradients.grad[(size_t)(L - 1) * P + p] / a->gradients.grad[p]
                           : NAN;
        int post = a->verdict.v == RESDIAG_VERDICT_POST ||
                   a->verdict.v == RESDIAG_VERDICT_DEEPNORM ||
                   a->verdict.v == RESDIAG_VERDICT_POST_FAMILY;
        int pre = a->verdict.v == RESDIAG_VERDICT_PRE ||
                  a->verdict.v == RESDIAG_VERDICT_SANDWICH ||
                  a->verdict.v == RESDIAG_VERDICT_PRE_OR_SANDWICH ||
                  a->verdict.v == RESDIAG_VERDICT_PARALLEL;
        if (!(ratio > 0) || !isfinite(ratio))
            rd_strbuf_printf(
                b,
                "  Xiong et al. 2020 (gradients over depth): no comparison, the "
                "parameter gradients of %s were zero or not available at this step\n",
                E(a->load.param_names[p]));
        else if (post)
            rd_strbuf_printf(
                b,
                "  Xiong et al. 2020 predict for post-norm larger gradients near the "
                "output (last/first > 1); measured %.3g for %s: %s\n",
                ratio, E(a->load.param_names[p]),
                ratio > 1.2 ? "agrees" : "not seen at this step");
        else if (pre)
            rd_strbuf_printf(
                b,
                "  Xiong et al. 2020 predict for pre-norm gradients flat or falling with "
                "depth like 1/||x_k|| (here ||x_1||/||x_L|| = %.3g); measured last/first "
                "%.3g for %s: %s\n",
                1 / a->depth.growth, ratio, E(a->load.param_names[p]),
                ratio <= 1.2 ? "agrees" : "does not agree");
        else
            rd_strbuf_printf(b, "  Xiong et al. 2020: pre-norm flat/falling, post-norm larger near the "
                         "output; measured last/first %.3g\n", ratio);
    }
}

static void text_nonfinite(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    if (!a->nonfinite.found) {
        rd_strbuf_printf(b, "\nNon-finite values: none in %lld recorded step(s).\n",
                         (long long)a->load.n_steps);
        return;
    }
    rd_strbuf_printf(b, "\nNon-finite values: first at step %lld, ",
                     (long long)a->nonfinite.step);
    if (a->nonfinite.site < 0) {
        if (a->nonfinite.layer == RESDIAG_MODEL_LEVEL)
            rd_strbuf_printf(b, "model parameter %s gradient", E(a->nonfinite.model_param));
        else
            rd_strbuf_printf(b, "layer %d %s gradient", a->nonfinite.layer,
                             a->nonfinite.param >= 0 &&
                                     a->nonfinite.param < a->load.n_layer_params
                                 ? E(a->load.param_names[a->nonfinite.param])
                                 : "?");
    } else if (a->nonfinite.layer == RESDIAG_MODEL_LEVEL) {
        rd_strbuf_printf(b, "model site %s, %s", site_label(a->nonfinite.site),
                         a->nonfinite.dir == RESDIAG_FORWARD ? "forward" : "backward");
    } else {
        rd_strbuf_printf(b, "layer %d %s %s, %s", a->nonfinite.layer,
                         E(a->load.sublayer_names[a->nonfinite.sub]),
                         site_label(a->nonfinite.site),
                         a->nonfinite.dir == RESDIAG_FORWARD ? "forward" : "backward");
    }
    rd_strbuf_printf(
        b,
        " (%.0f NaN, %.0f Inf there); %lld of %lld steps affected, %.0f NaN and %.0f Inf "
        "in all\n",
        a->nonfinite.nan_count, a->nonfinite.inf_count, (long long)a->nonfinite.n_bad_steps,
        (long long)a->load.n_steps, a->nonfinite.nan_total, a->nonfinite.inf_total);
    if (rd_analysis_step_aborted(a, a->nonfinite.step_index))
        rd_strbuf_printf(b,
                         "  step %lld was aborted: the trainer ended it with "
                         "resdiag_step_abort, maybe over this value\n",
                         (long long)a->nonfinite.step);
}

/* An aborted judged step: said before anything else. */
static void text_aborted_note(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    if (a->aborted.step_aborted)
        rd_strbuf_printf(b, "NOTE: %s\n", E(a->verdict.why));
}

/* How many steps were aborted, and the first few with their reasons. */
static void text_aborted_steps(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    if (a->aborted.count <= 0)
        return;
    rd_strbuf_printf(b,
                     "  aborted: %lld step(s) ended with resdiag_step_abort (records "
                     "incomplete; the first and last step and the comparisons over the run "
                     "skip them):",
                     (long long)a->aborted.count);
    int n = a->aborted.count < RD_ABORTED_LISTED ? (int)a->aborted.count : RD_ABORTED_LISTED;
    for (int i = 0; i < n; i++) {
        rd_strbuf_printf(b, "%s step %lld", i ? "," : "",
                         (long long)a->load.steps[a->aborted.listed_index[i]]);
        if (a->aborted.listed_reason[i][0])
            rd_strbuf_printf(b, " (%s)", E(a->aborted.listed_reason[i]));
    }
    if (a->aborted.count > n)
        rd_strbuf_printf(b, ", and %lld more", (long long)(a->aborted.count - n));
    rd_strbuf_printf(b, "\n");
}

/* Which step the verdict judges and why, then the last recorded step's
 * verdict, stream growth and mean updates beside it: a user who trained
 * 200 steps wants to see both. */
static void text_judged_step(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    const char *other = a->load.n_steps > 1 ? "; --step N or --last judges another" : "";
    const char *complete = a->aborted.first_index > 0 ? " complete" : "";
    if (a->aborted.step_aborted)
        rd_strbuf_printf(b,
                         "  judged at step %lld, as chosen: it was aborted, so it is shown, "
                         "not judged\n",
                         (long long)a->load.step);
    else if (a->load.step_index == a->aborted.first_index && rd_is_training(a))
        rd_strbuf_printf(
            b,
            "  judged at step %lld, the first%s recorded: at initialization the "
            "branch updates are smallest against the stream, so the relations between "
            "sites are cleanest%s\n",
            (long long)a->load.step, complete, other);
    else if (a->load.step_index == a->aborted.first_index)
        rd_strbuf_printf(b, "  judged at step %lld, the first%s recorded (the default)%s\n",
                         (long long)a->load.step, complete, other);
    else
        rd_strbuf_printf(b,
                         "  judged at step %lld, as chosen; the default is the first recorded "
                         "step\n",
                         (long long)a->load.step);
    if (a->load.step_index == a->aborted.last_index)
        return;
    const rd_analysis *z = a->at_last;
    rd_strbuf_printf(b, "  at the last%s recorded step %lld: ",
                     a->aborted.last_index < a->load.n_steps - 1 ? " complete" : "",
                     (long long)a->load.steps[a->aborted.last_index]);
    if (!z) {
        rd_strbuf_printf(b, "cannot analyse it: %s\n", resdiag_strerror(a->at_last_status));
        return;
    }
    rd_strbuf_printf(b, "%s", rd_verdict_human(z->verdict.v));
    if (z->verdict.v == RESDIAG_VERDICT_DEEPNORM)
        rd_strbuf_printf(b, ", alpha = %.4g", z->verdict.alpha);
    if (z->verdict.v == RESDIAG_VERDICT_MIXED && z->verdict.mix_layers > 0)
        rd_strbuf_printf(b, ": post-norm in layers 0..%d, pre-norm in layers %d..%d",
                         z->verdict.mix_layers - 1, z->verdict.mix_layers, z->load.n_layers - 1);
    if (z->verdict.v != RESDIAG_VERDICT_CANNOT_TELL)
        rd_strbuf_printf(b, " (confidence %s)", resdiag_confidence_name(z->verdict.conf));
    rd_strbuf_printf(b, "; stream growth %.4g; mean r", a->training.growth[1]);
    for (int s = 0; s < z->load.n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++)
        rd_strbuf_printf(b, "%s %s %.4g", s ? "," : "", E(z->load.sublayer_names[s]),
                         a->training.mean_r[1][s]);
    rd_strbuf_printf(b, "\n");
}

/* One line for the trainer's metrics: each one's last value given, with
 * its step; nothing for a run without metrics. */
static void text_metrics(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    if (a->metrics.count <= 0)
        return;
    rd_strbuf_printf(b, "\nTrainer's metrics (last value given):");
    for (int m = 0; m < a->metrics.count; m++) {
        const double *v = a->metrics.values + (size_t)m * (size_t)a->load.n_steps;
        int64_t i = a->load.n_steps - 1;
        while (i >= 0 && !rd_metric_is_given(v[i]))
            i--;
        rd_strbuf_printf(b, "%s %s ", m ? "," : "", E(a->metrics.names[m]));
        if (i < 0)
            rd_strbuf_printf(b, "never given");
        else
            rd_strbuf_printf(b, "%.6g at step %lld", v[i], (long long)a->load.steps[i]);
    }
    rd_strbuf_printf(b, "\n");
}

char *resdiag_analysis_to_text(const resdiag_analysis *a)
{
    if (!a)
        return NULL;
    sb b = { 0 };
    rd_esc_ring ring = { 0 }, *esc = &ring;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    text_aborted_note(&b, esc, a);
    text_contradiction(&b, a);
    rd_strbuf_printf(&b, "Run: %d layers, d_model %d, %s block of", L, a->load.d_model,
                     a->load.block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < S; s++)
        rd_strbuf_printf(&b, " %s", E(a->load.sublayer_names[s]));
    rd_strbuf_printf(&b, "; norm %s; %s%swritten by resdiag %s (schema %d)\n",
                     resdiag_norm_kind_name(a->load.norm_kind),
                     rd_is_training(a) ? "" : resdiag_run_kind_name(a->load.run_kind),
                     rd_is_training(a) ? "" : " run; ", E(a->load.writer_version),
                     a->load.schema_version);
    if (a->load.description[0])
        rd_strbuf_printf(&b, "  %s\n", E(a->load.description));
    rd_strbuf_printf(&b, "  created %s by %s\n", E(a->load.created),
                     a->load.program[0] ? E(a->load.program) : "?");
    rd_strbuf_printf(&b,
                     "Steps: %lld recorded (%lld .. %lld); analysed step %lld (record %lld)%s\n",
                     (long long)a->load.n_steps, (long long)a->load.steps[0],
                     (long long)a->load.steps[a->load.n_steps - 1], (long long)a->load.step,
                     (long long)a->load.step_index + 1,
                     a->load.step_index != 0 || a->aborted.step_aborted ? ""
                     : rd_is_training(a) ? ", the first: initialization"
                                         : ", the first recorded");
    {
        char fs[512];
        rd_file_state_sentence(fs, sizeof fs, a);
        if (fs[0])
            rd_strbuf_printf(&b, "  file: %s\n", fs);
    }
    text_aborted_steps(&b, esc, a);
    text_judged_step(&b, esc, a);
    rd_strbuf_printf(&b, "Observed: %s;",
                     a->observe.stream_only ? "stream only (less evidence)" : "block sites");
    for (int d = 0; d < 2; d++) {
        int any = 0;
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            any += a->observe.n_obs[d][s];
        if (!any) {
            rd_strbuf_printf(&b, " %s: none;", d ? "backward" : "forward");
            continue;
        }
        rd_strbuf_printf(&b, " %s:", d ? "backward" : "forward");
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            if (a->observe.n_obs[d][s])
                rd_strbuf_printf(&b, " %s %d/%d", resdiag_site_name((resdiag_site)s),
                                 a->observe.n_obs[d][s], L * S);
        rd_strbuf_printf(&b, ";");
    }
    rd_strbuf_printf(&b, " sketch %d\n", a->load.sketch_size);
    text_placement(&b, esc, a);
    text_layers(&b, a);
    text_stream(&b, esc, a);
    text_grads(&b, esc, a);
    text_nonfinite(&b, esc, a);
    rd_ranks_text(&b, esc, a);
    if (a->load.n_steps > 1) {
        rd_strbuf_printf(&b, "\nOver %s (step %lld -> %lld, %lld recorded%s):\n",
                         rd_is_training(a) ? "training" : "the recorded steps",
                         (long long)a->load.steps[a->aborted.first_index],
                         (long long)a->load.steps[a->aborted.last_index],
                         (long long)a->load.n_steps,
                         a->aborted.count ? "; the first and last complete" : "");
        rd_ranks_compare_note(&b, a);
        rd_strbuf_printf(&b, "  stream growth ||x_L||/||x_1||: %.4g -> %.4g\n",
                         a->training.growth[0], a->training.growth[1]);
        for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++)
            rd_strbuf_printf(&b, "  mean r %-8s %.4g -> %.4g\n", E(a->load.sublayer_names[s]),
                             a->training.mean_r[0][s], a->training.mean_r[1][s]);
        if (a->gradients.n_order > 0 &&
            (isfinite(a->training.grad_ratio[0]) || isfinite(a->training.grad_ratio[1])))
            rd_strbuf_printf(&b, "  %s gradient last/first layer: %.4g -> %.4g\n",
                             E(a->load.param_names[a->gradients.param_order[0]]),
                             a->training.grad_ratio[0], a->training.grad_ratio[1]);
        else if (a->gradients.n_order > 0)
            rd_strbuf_printf(&b,
                             "  %s gradient last/first layer: parameter gradients were zero "
                             "or not available\n",
                             E(a->load.param_names[a->gradients.param_order[0]]));
    }
    text_metrics(&b, esc, a);
    rd_consequences_text(&b, esc, a);
    rd_strbuf_printf(&b, "\nWarnings:%s\n", a->warnings.count ? "" : " none");
    for (int i = 0; i < a->warnings.count; i++)
        rd_strbuf_printf(&b, "  - %s\n", E(a->warnings.lines[i]));
    rd_text_legend(&b, a);
    rd_esc_ring_free(&ring);
    return rd_strbuf_finish(&b);
}
