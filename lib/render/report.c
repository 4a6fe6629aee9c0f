/*
 * report.c - the analysis as text for people and as JSON for programs
 * (keys documented in doc/REPORT-JSON.md; stable: only added, never
 * renamed or removed within a "report_version").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"

/* The report is built in a growing string (strbuf.h). Every string that
 * came from the run file (names, description, provenance, call sites, and
 * the sentences that quote them) goes through the escaper of its output,
 * escape.h: E(s) for text, js_str for JSON. */
typedef rd_strbuf sb;
#define E(s) rd_esc_text(esc, (s))

/* ---------------------------------------------------------------- text */

const char *rd_verdict_human(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL: return "cannot tell";
    case RESDIAG_VERDICT_PRE: return "pre-norm";
    case RESDIAG_VERDICT_POST: return "post-norm";
    case RESDIAG_VERDICT_SANDWICH: return "sandwich (Peri-LN)";
    case RESDIAG_VERDICT_DEEPNORM: return "deepnorm";
    case RESDIAG_VERDICT_MIXED: return "mixed";
    case RESDIAG_VERDICT_PARALLEL: return "parallel block";
    case RESDIAG_VERDICT_NONE: return "no norm";
    case RESDIAG_VERDICT_INCONSISTENT: return "inconsistent";
    case RESDIAG_VERDICT_POST_FAMILY: return "post-norm family (post-norm or deepnorm)";
    case RESDIAG_VERDICT_NOT_RENORMALIZED:
        return "stream not renormalized (pre-norm, sandwich, parallel or no norm)";
    case RESDIAG_VERDICT_PRE_OR_SANDWICH: return "pre-norm or sandwich";
    }
    return "?";
}

static const char *short_v(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL: return "?";
    case RESDIAG_VERDICT_PRE: return "pre";
    case RESDIAG_VERDICT_POST: return "post";
    case RESDIAG_VERDICT_SANDWICH: return "sandwich";
    case RESDIAG_VERDICT_DEEPNORM: return "deepnorm";
    case RESDIAG_VERDICT_PARALLEL: return "parallel";
    case RESDIAG_VERDICT_NONE: return "none";
    case RESDIAG_VERDICT_INCONSISTENT: return "inconsistent";
    default: return resdiag_verdict_name(v);
    }
}

/* Values that agree to this part of their mean are called flat. */
#define FLAT_SPREAD 1e-4
#define FLAT_SPREAD_TEXT "1e-4"

static void fit_text(sb *b, const rd_fit *f, const char *what)
{
    if (f->n < 2 || isnan(f->b)) {
        rd_strbuf_printf(b, "%s: too few points (%d)", what, f->n);
        return;
    }
    if (f->y_spread < FLAT_SPREAD) {
        rd_strbuf_printf(b, "%s: flat (the %d values agree to %.0e)", what, f->n, FLAT_SPREAD);
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

void rd_energy_sentence(char *out, size_t cap, const rd_fit *e, int unicode)
{
    const char *lhs = unicode ? "\u2016x_k\u2016\u00b2" : "||x_k||^2";
    const char *r2 = unicode ? "R\u00b2" : "R^2";
    if (e->n >= 2 && e->y_spread < FLAT_SPREAD)
        snprintf(out, cap, "%s = %.4g at every layer (flat to " FLAT_SPREAD_TEXT ", n = %d)", lhs,
                 e->a, e->n);
    else if (e->n >= 2 && !isnan(e->b))
        snprintf(out, cap, "%s = %.4g %c %.4g k over k = 1..L (%s %.4f, n = %d)", lhs, e->a,
                 e->b < 0 ? '-' : '+', fabs(e->b), r2, e->r2, e->n);
    else
        snprintf(out, cap, "%s = a + b k: too few layers observed", lhs);
}

/* A table cell: the number, or "-" when there is none. */
static void cell(sb *b, const char *fmt, int width, double v)
{
    if (isfinite(v))
        rd_strbuf_printf(b, fmt, v);
    else
        rd_strbuf_printf(b, " %*s", width, "-");
}

/* A table column heading into h: prefix, the escaped name, suffix, cut to
 * at most width bytes without splitting a UTF-8 character. */
static const char *column_head(char *h, size_t cap, const char *prefix, const char *name,
                               const char *suffix, int width)
{
    char esc[160];
    rd_text_escape(esc, sizeof esc, name);
    snprintf(h, cap, "%s%s%s", prefix, esc, suffix);
    size_t n = strlen(h);
    if (n > (size_t)width) {
        n = (size_t)width;
        while (n > 0 && ((unsigned char)h[n] & 0xc0) == 0x80)
            n--;
        h[n] = '\0';
    }
    return h;
}

static const char *site_label(int site)
{
    return site < 0 ? "parameter gradient" : resdiag_site_name((resdiag_site)site);
}

/* The data contradict the declaration: the report says so first, in
 * every output, since `report` exits 0 whatever it finds (the CI gate is
 * `resdiag check --expect declared`). */
static int declared_contradicted(const rd_analysis *a)
{
    return rd_declared_agrees(a) == 0;
}

static void text_contradiction(sb *b, const rd_analysis *a)
{
    if (!declared_contradicted(a))
        return;
    rd_strbuf_printf(b, "WARNING: the data contradict the declared placement: the trainer "
                        "declares %s", resdiag_placement_name(a->declared));
    if (a->declared == RESDIAG_PLACEMENT_MIXED)
        rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->declared_mix - 1);
    rd_strbuf_printf(b, ", the data say %s", rd_verdict_human(a->verdict));
    if (a->verdict == RESDIAG_VERDICT_MIXED && a->mix_layers > 0)
        rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->mix_layers - 1);
    rd_strbuf_printf(b, " (confidence %s); `resdiag check --expect declared` fails on this run\n",
                     resdiag_confidence_name(a->conf));
}

/* Training runs call the first step initialization and the span of steps
 * training; evaluation and inference runs only count recorded steps. */
static int is_training(const rd_analysis *a)
{
    return a->run_kind == RESDIAG_RUN_TRAINING;
}

static void text_placement(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->n_layers, S = a->n_sublayers;
    rd_strbuf_printf(b, "\nPlacement: %s", rd_verdict_human(a->verdict));
    if (a->verdict == RESDIAG_VERDICT_DEEPNORM)
        rd_strbuf_printf(b, ", alpha = %.4g", a->alpha);
    if (a->verdict == RESDIAG_VERDICT_MIXED && a->mix_layers > 0)
        rd_strbuf_printf(b, ": post-norm in layers 0..%d, pre-norm in layers %d..%d", a->mix_layers - 1,
                  a->mix_layers, L - 1);
    if (a->verdict != RESDIAG_VERDICT_CANNOT_TELL)
        rd_strbuf_printf(b, " (confidence %s)", resdiag_confidence_name(a->conf));
    rd_strbuf_printf(b, "\n");
    if (a->why[0])
        rd_strbuf_printf(b, "  why: %s\n", E(a->why));
    if (a->verdict != RESDIAG_VERDICT_CANNOT_TELL && a->conf < RESDIAG_CONFIDENCE_HIGH &&
        a->conf_why[0])
        rd_strbuf_printf(b, "  confidence %s: %s\n", resdiag_confidence_name(a->conf),
                         E(a->conf_why));
    if (a->use_relations) {
        /* evidence: one line per run of layers with the same sublayer verdicts */
        rd_strbuf_printf(b, "  evidence (sketch relations, relative error; true relations ~1e-7 in f32, "
                     "<3e-2 in bf16):\n");
        int l = 0;
        while (l < L) {
            int m = l + 1;
            while (m < L) {
                int same = 1;
                for (int s = 0; s < S; s++)
                    same &= a->sub[m * S + s].v == a->sub[l * S + s].v;
                if (!same)
                    break;
                m++;
            }
            for (int s = 0; s < S; s++) {
                const rd_sub *r = &a->sub[l * S + s];
                char range[32];
                if (m - l > 1)
                    snprintf(range, sizeof range, "layers %d-%d", l, m - 1);
                else
                    snprintf(range, sizeof range, "layer %d", l);
                rd_strbuf_printf(b, "    %-12s %-6s %-12s %s%s%s\n", range, E(a->sublayer_names[s]),
                          short_v(r->v), E(r->why), m - l > 1 ? " (first of these)" : "",
                          "");
            }
            l = m;
        }
        rd_strbuf_printf(b, "  confidence: the rival placement's error over max(the winner's "
                     "error, the rounding floor): high from %gx, medium from %gx, below that "
                     "cannot tell; rounding floor 2 (u + 2^-53 sqrt(elements)), u = 2^-24 f32, "
                     "2^-11 f16, 2^-8 bf16 (read from each tensor's largest |value|)\n",
                     RD_HIGH_SEP, RD_SEP);
        int n_constructed = 0;
        for (int i = 0; i < L * S; i++)
            for (int j = 0; j < RD_N_REL; j++)
                n_constructed += a->sub[i].constructed >> j & 1u;
        if (n_constructed)
            rd_strbuf_printf(b, "  by construction: %d relation(s) between two records of one "
                             "tensor (declared with resdiag_observe_alias) hold whatever the "
                             "model; shown, not counted\n", n_constructed);
        if (a->order_agree + a->order_disagree)
            rd_strbuf_printf(b, "  call order: %d of %d sublayers call the hooks in the order of the "
                         "verdict (pre: norm before branch; post: branch before norm)\n",
                      a->order_agree, a->order_agree + a->order_disagree);
        if (a->cs_norm_in && (a->cs_norm_in[0] || a->cs_stream_out[0]))
            rd_strbuf_printf(b, "  deciding hooks (layer %d %s): norm_in at %s, branch_out at %s, "
                         "stream_out at %s\n",
                      a->cs_layer, E(a->sublayer_names[a->cs_sub]),
                      a->cs_norm_in[0] ? E(a->cs_norm_in) : "-",
                      a->cs_branch_out[0] ? E(a->cs_branch_out) : "-",
                      a->cs_stream_out[0] ? E(a->cs_stream_out) : "-");
        if (a->cs_norm_in2 && a->cs_norm_in2[0])
            rd_strbuf_printf(b, "  first layer of the other kind (layer %d %s): norm_in at %s\n",
                      a->cs_layer2, E(a->sublayer_names[a->cs_sub2]), E(a->cs_norm_in2));
    } else {
        rd_strbuf_printf(b, "  LESS EVIDENCE: %s; the verdict rests on the normalization signature of "
                     "each layer's stream (per-token norm spread) and the depth law.\n",
                  a->stream_only ? "only the stream was observed"
                                 : "the run has no sketches (sketch_size 0)");
        rd_strbuf_printf(b, "  signature (token-norm spread std/mean of the stream leaving each layer; "
                     "norm output < 3e-4):\n   ");
        for (int l = 0; l < L; l++) {
            const char *s = a->layer_sig[l] == RD_SIG_NORMALIZED ? "norm"
                            : a->layer_sig[l] == RD_SIG_NOT      ? "not"
                                                                 : "?";
            rd_strbuf_printf(b, " L%d %s (%.1e)%s", l, s, a->layer_cv[l],
                      (l + 1) % 4 == 0 && l + 1 < L ? "\n   " : "");
        }
        rd_strbuf_printf(b, "\n");
        if (a->cs_stream_out && a->cs_stream_out[0])
            rd_strbuf_printf(b, "  stream hook: %s\n", E(a->cs_stream_out));
    }
    rd_strbuf_printf(b, "  final norm: %s - %s\n",
              a->final_norm == 1 ? "present" : a->final_norm == 0 ? "absent" : "not observed",
              E(a->final_norm_why));
    if (a->declared == RESDIAG_PLACEMENT_UNDECLARED) {
        rd_strbuf_printf(b, "  declared: nothing\n");
    } else {
        int agree = rd_declared_agrees(a);
        rd_strbuf_printf(b, "  declared: %s", resdiag_placement_name(a->declared));
        if (a->declared == RESDIAG_PLACEMENT_MIXED)
            rd_strbuf_printf(b, " (post-norm in layers 0..%d)", a->declared_mix - 1);
        rd_strbuf_printf(b, " - %s\n", agree == 1   ? "agrees with the data"
                                : agree == 0 ? "CONTRADICTED by the data"
                                             : "the data cannot confirm or refute it");
    }
}

static void text_layers(sb *b, const rd_analysis *a)
{
    int L = a->n_layers, S = a->n_sublayers, P = a->n_layer_params;
    int gp = a->grad_step >= 0 && a->n_order > 0 ? a->param_order[0] : -1;
    /* The gradient columns stay Frobenius norms: parameters have no tokens,
     * and the Gradients section, its fits and the JSON use the same numbers. */
    rd_strbuf_printf(b, "\nPer layer (x_k = stream leaving layer k-1, x_0 = the embedding; "
                 "||x_k||, rms: mean over tokens of the per-token L2 norm, RMS; "
                 "r = ||dx||/||x||");
    if (a->grad_step >= 0)
        rd_strbuf_printf(b, ";\n  gradient columns (%s||dL/dx||): Frobenius norm of the whole "
                            "tensor", gp >= 0 ? "parameter, " : "");
    rd_strbuf_printf(b, "):\n");
    rd_strbuf_printf(b, "   k  layer  %10s %9s", "||x_k||", "rms");
    for (int s = 0; s < S && s < 4; s++) {
        char h[200];
        rd_strbuf_printf(b, " %9s", column_head(h, sizeof h, "r_", a->sublayer_names[s], "", 9));
    }
    if (gp >= 0) { /* the column says it is a gradient norm, not a weight */
        char h[200];
        rd_strbuf_printf(b, " %16s", column_head(h, sizeof h, "||grad ", a->param_names[gp], "||",
                                                  16));
    }
    if (a->grad_step >= 0)
        rd_strbuf_printf(b, " %11s", "||dL/dx||");
    rd_strbuf_printf(b, "\n");
    for (int k = 0; k <= L; k++) {
        if (k == 0)
        {
            rd_strbuf_printf(b, "  %2d  embed ", k);
            cell(b, " %10.4g", 10, a->xnorm[0]);
            cell(b, " %9.4g", 9, a->xrms[0]);
            if (a->grad_step >= 0) { /* the embedding has no r and no layer parameters */
                for (int s = 0; s < S && s < 4; s++)
                    rd_strbuf_printf(b, " %9s", "");
                if (gp >= 0)
                    rd_strbuf_printf(b, " %16s", "");
                cell(b, " %11.4g", 11, a->sgrad_embed);
            }
            rd_strbuf_printf(b, "\n");
        }
        else {
            int l = k - 1;
            rd_strbuf_printf(b, "  %2d  %5d ", k, l);
            cell(b, " %10.4g", 10, a->xnorm[k]);
            cell(b, " %9.4g", 9, a->xrms[k]);
            for (int s = 0; s < S && s < 4; s++)
                cell(b, " %9.3g", 9, a->r[l * S + s]);
            if (gp >= 0)
                cell(b, " %16.4g", 16, a->grad[(size_t)l * P + gp]);
            if (a->grad_step >= 0)
                cell(b, " %11.4g", 11, a->sgrad[l]);
            rd_strbuf_printf(b, "\n");
        }
    }
}

static void text_stream(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->n_layers, S = a->n_sublayers;
    rd_strbuf_printf(b, "\nResidual stream:\n");
    char energy[256];
    rd_energy_sentence(energy, sizeof energy, &a->fit_energy, 0);
    if (a->fit_energy.n >= 2 && !isnan(a->fit_energy.b))
        rd_strbuf_printf(b, "  %s; pre-norm theory: linear in k, post-norm: constant\n", energy);
    else
        rd_strbuf_printf(b, "  %s\n", energy);
    rd_strbuf_printf(b, "  ");
    fit_text(b, &a->fit_xlog, "log-log slope of ||x_k|| (k = 1..L)");
    rd_strbuf_printf(b, "\n  growth over depth ||x_L|| / ||x_1||: %.4g\n", a->growth);

    rd_strbuf_printf(b, "\nRelative updates r = ||dx||/||x|| (1/sqrt(k) predicts slope -0.5 for pre-norm; "
                 "post-norm: flat):\n");
    for (int s = 0; s < S && s < RD_MAX_RFIT; s++) {
        rd_strbuf_printf(b, "  %-6s ", E(a->sublayer_names[s]));
        fit_text(b, &a->fit_r[s], "all layers");
        rd_strbuf_printf(b, "\n         ");
        fit_text(b, &a->fit_r_deep[s], "deeper half");
        rd_strbuf_printf(b, "\n");
    }
    (void)L;
}

static void text_grads(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    int L = a->n_layers, P = a->n_layer_params;
    if (a->grad_step < 0) {
        if (is_training(a))
            rd_strbuf_printf(b, "\nGradients: none recorded.\n");
        return; /* an evaluation or inference run has none to speak of */
    }
    rd_strbuf_printf(b, "\nGradients at step %lld (%s):\n", (long long)a->steps[a->grad_step],
              a->grad_step == a->step_index ? "the analysed step"
                                            : "the first recorded step with gradients");
    for (int i = 0; i < a->n_order; i++) {
        int p = a->param_order[i];
        double g0 = a->grad[p], g1 = a->grad[(size_t)(L - 1) * P + p];
        if (!(g0 > 0) || !(g1 > 0)) { /* NaN: not recorded; 0: zeroed before they were read */
            rd_strbuf_printf(b, "  %-10s parameter gradients were zero or not available at this "
                         "step (first layer %.4g, last %.4g)\n", E(a->param_names[p]), g0, g1);
            continue;
        }
        rd_strbuf_printf(b, "  %-10s %.4g -> %.4g, last/first %.3g; ", E(a->param_names[p]), g0, g1,
                  g1 / g0);
        fit_text(b, &a->fit_grad[p], "log-log slope");
        rd_strbuf_printf(b, "\n");
    }
    rd_strbuf_printf(b, "  %-10s %.4g -> %.4g, last/first %.3g; ", "stream", a->sgrad[0],
              a->sgrad[L - 1], a->sgrad[0] > 0 ? a->sgrad[L - 1] / a->sgrad[0] : NAN);
    fit_text(b, &a->fit_sgrad, "log-log slope");
    rd_strbuf_printf(b, "\n  head %s: %.4g\n", a->head_is_param ? "head.w" : "(logits)", a->head_grad);
    if (a->n_order > 0) {
        int p = a->param_order[0];
        double ratio = a->grad[p] > 0 ? a->grad[(size_t)(L - 1) * P + p] / a->grad[p] : NAN;
        int post = a->verdict == RESDIAG_VERDICT_POST || a->verdict == RESDIAG_VERDICT_DEEPNORM ||
                   a->verdict == RESDIAG_VERDICT_POST_FAMILY;
        int pre = a->verdict == RESDIAG_VERDICT_PRE || a->verdict == RESDIAG_VERDICT_SANDWICH ||
                  a->verdict == RESDIAG_VERDICT_PRE_OR_SANDWICH ||
                  a->verdict == RESDIAG_VERDICT_PARALLEL;
        if (!(ratio > 0) || !isfinite(ratio))
            rd_strbuf_printf(b, "  Xiong et al. 2020 (gradients over depth): no comparison, the "
                         "parameter gradients of %s were zero or not available at this step\n",
                      E(a->param_names[p]));
        else if (post)
            rd_strbuf_printf(b, "  Xiong et al. 2020 predict for post-norm larger gradients near the "
                         "output (last/first > 1); measured %.3g for %s: %s\n", ratio,
                      E(a->param_names[p]), ratio > 1.2 ? "agrees" : "not seen at this step");
        else if (pre)
            rd_strbuf_printf(b, "  Xiong et al. 2020 predict for pre-norm gradients flat or falling with "
                         "depth like 1/||x_k|| (here ||x_1||/||x_L|| = %.3g); measured last/first "
                         "%.3g for %s: %s\n", 1 / a->growth, ratio, E(a->param_names[p]),
                      ratio <= 1.2 ? "agrees" : "does not agree");
        else
            rd_strbuf_printf(b, "  Xiong et al. 2020: pre-norm flat/falling, post-norm larger near the "
                         "output; measured last/first %.3g\n", ratio);
    }
}

static void text_nonfinite(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    if (!a->nf_found) {
        rd_strbuf_printf(b, "\nNon-finite values: none in %lld recorded step(s).\n",
                  (long long)a->n_steps);
        return;
    }
    rd_strbuf_printf(b, "\nNon-finite values: first at step %lld, ", (long long)a->nf_step);
    if (a->nf_site < 0) {
        if (a->nf_layer == RESDIAG_MODEL_LEVEL)
            rd_strbuf_printf(b, "model parameter #%d gradient", a->nf_param);
        else
            rd_strbuf_printf(b, "layer %d %s gradient", a->nf_layer,
                      a->nf_param >= 0 && a->nf_param < a->n_layer_params
                          ? E(a->param_names[a->nf_param])
                          : "?");
    } else if (a->nf_layer == RESDIAG_MODEL_LEVEL) {
        rd_strbuf_printf(b, "model site %s, %s", site_label(a->nf_site),
                  a->nf_dir == RESDIAG_FORWARD ? "forward" : "backward");
    } else {
        rd_strbuf_printf(b, "layer %d %s %s, %s", a->nf_layer, E(a->sublayer_names[a->nf_sub]),
                  site_label(a->nf_site), a->nf_dir == RESDIAG_FORWARD ? "forward" : "backward");
    }
    rd_strbuf_printf(b, " (%.0f NaN, %.0f Inf there); %lld of %lld steps affected, %.0f NaN and %.0f Inf "
                 "in all\n", a->nf_nan, a->nf_inf, (long long)a->nf_steps, (long long)a->n_steps,
              a->nan_total, a->inf_total);
}

/* Which step the verdict judges and why, then the last recorded step's
 * verdict, stream growth and mean updates beside it: a user who trained
 * 200 steps wants to see both. */
static void text_judged_step(sb *b, rd_esc_ring *esc, const rd_analysis *a)
{
    const char *other = a->n_steps > 1 ? "; --step N or --last judges another" : "";
    if (a->step_index == 0 && is_training(a))
        rd_strbuf_printf(b, "  judged at step %lld, the first recorded: at initialization the "
                     "branch updates are smallest against the stream, so the relations between "
                     "sites are cleanest%s\n", (long long)a->step, other);
    else if (a->step_index == 0)
        rd_strbuf_printf(b, "  judged at step %lld, the first recorded (the default)%s\n",
                         (long long)a->step, other);
    else
        rd_strbuf_printf(b, "  judged at step %lld, as chosen; the default is the first recorded "
                     "step\n", (long long)a->step);
    if (a->step_index == a->n_steps - 1)
        return;
    const rd_analysis *z = a->at_last;
    rd_strbuf_printf(b, "  at the last recorded step %lld: ", (long long)a->steps[a->n_steps - 1]);
    if (!z) {
        rd_strbuf_printf(b, "cannot analyse it: %s\n", resdiag_strerror(a->at_last_status));
        return;
    }
    rd_strbuf_printf(b, "%s", rd_verdict_human(z->verdict));
    if (z->verdict == RESDIAG_VERDICT_DEEPNORM)
        rd_strbuf_printf(b, ", alpha = %.4g", z->alpha);
    if (z->verdict == RESDIAG_VERDICT_MIXED && z->mix_layers > 0)
        rd_strbuf_printf(b, ": post-norm in layers 0..%d, pre-norm in layers %d..%d",
                         z->mix_layers - 1, z->mix_layers, z->n_layers - 1);
    if (z->verdict != RESDIAG_VERDICT_CANNOT_TELL)
        rd_strbuf_printf(b, " (confidence %s)", resdiag_confidence_name(z->conf));
    rd_strbuf_printf(b, "; stream growth %.4g; mean r", a->tr_growth[1]);
    for (int s = 0; s < z->n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++)
        rd_strbuf_printf(b, "%s %s %.4g", s ? "," : "", E(z->sublayer_names[s]),
                         a->tr_mean_r[1][s]);
    rd_strbuf_printf(b, "\n");
}

static void text_legend(sb *b, const rd_analysis *a);

char *resdiag_analysis_to_text(const resdiag_analysis *a)
{
    if (!a)
        return NULL;
    sb b = { 0 };
    rd_esc_ring ring = { 0 }, *esc = &ring;
    int L = a->n_layers, S = a->n_sublayers;
    text_contradiction(&b, a);
    rd_strbuf_printf(&b, "Run: %d layers, d_model %d, %s block of", L, a->d_model,
              a->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < S; s++)
        rd_strbuf_printf(&b, " %s", E(a->sublayer_names[s]));
    rd_strbuf_printf(&b, "; norm %s; %s%swritten by resdiag %s (schema %d)\n",
              resdiag_norm_kind_name(a->norm_kind),
              is_training(a) ? "" : resdiag_run_kind_name(a->run_kind),
              is_training(a) ? "" : " run; ", E(a->writer_version), a->schema_version);
    if (a->description[0])
        rd_strbuf_printf(&b, "  %s\n", E(a->description));
    rd_strbuf_printf(&b, "  created %s by %s\n", E(a->created), a->program[0] ? E(a->program) : "?");
    rd_strbuf_printf(&b, "Steps: %lld recorded (%lld .. %lld); analysed step %lld (record %lld)%s\n",
              (long long)a->n_steps, (long long)a->steps[0], (long long)a->steps[a->n_steps - 1],
              (long long)a->step, (long long)a->step_index + 1,
              a->step_index != 0 ? ""
              : is_training(a)    ? ", the first: initialization"
                                  : ", the first recorded");
    text_judged_step(&b, esc, a);
    rd_strbuf_printf(&b, "Observed: %s;", a->stream_only ? "stream only (less evidence)"
                                                  : "block sites");
    static const char *const nm[RESDIAG_N_BLOCK_SITES] = { "stream_in", "norm_in", "norm_out",
                                                           "branch_out", "stream_out" };
    for (int d = 0; d < 2; d++) {
        int any = 0;
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            any += a->n_obs[d][s];
        if (!any) {
            rd_strbuf_printf(&b, " %s: none;", d ? "backward" : "forward");
            continue;
        }
        rd_strbuf_printf(&b, " %s:", d ? "backward" : "forward");
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            if (a->n_obs[d][s])
                rd_strbuf_printf(&b, " %s %d/%d", nm[s], a->n_obs[d][s], L * S);
        rd_strbuf_printf(&b, ";");
    }
    rd_strbuf_printf(&b, " sketch %d\n", a->sketch_size);
    text_placement(&b, esc, a);
    text_layers(&b, a);
    text_stream(&b, esc, a);
    text_grads(&b, esc, a);
    text_nonfinite(&b, esc, a);
    if (a->n_steps > 1) {
        rd_strbuf_printf(&b, "\nOver %s (step %lld -> %lld, %lld recorded):\n",
                  is_training(a) ? "training" : "the recorded steps",
                  (long long)a->steps[0], (long long)a->steps[a->n_steps - 1],
                  (long long)a->n_steps);
        rd_strbuf_printf(&b, "  stream growth ||x_L||/||x_1||: %.4g -> %.4g\n", a->tr_growth[0],
                  a->tr_growth[1]);
        for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++)
            rd_strbuf_printf(&b, "  mean r %-8s %.4g -> %.4g\n", E(a->sublayer_names[s]),
                      a->tr_mean_r[0][s], a->tr_mean_r[1][s]);
        if (a->n_order > 0 && (isfinite(a->tr_grad_ratio[0]) || isfinite(a->tr_grad_ratio[1])))
            rd_strbuf_printf(&b, "  %s gradient last/first layer: %.4g -> %.4g\n",
                      E(a->param_names[a->param_order[0]]), a->tr_grad_ratio[0], a->tr_grad_ratio[1]);
        else if (a->n_order > 0)
            rd_strbuf_printf(&b, "  %s gradient last/first layer: parameter gradients were zero "
                         "or not available\n", E(a->param_names[a->param_order[0]]));
    }
    rd_strbuf_printf(&b, "\nWarnings:%s\n", a->n_warnings ? "" : " none");
    for (int i = 0; i < a->n_warnings; i++)
        rd_strbuf_printf(&b, "  - %s\n", E(a->warnings[i]));
    text_legend(&b, a);
    rd_esc_ring_free(&ring);
    return rd_strbuf_finish(&b);
}

/* The report's own terms, each explained once for a reader who knows
 * Transformers but not this tool: only those the text above uses (found by
 * their marker), in the order a reader meets them. */
static const struct {
    const char *marker, *text;
} legend_terms[] = {
    { "(record ", "record N: the Nth record in the file, counted from 1 in the order written; "
                  "the step number beside it is the trainer's own" },
    { "; sketch ", "sketch N: each recorded tensor is also kept as N random projections "
                   "(its products with the same N random vectors), enough to test identities "
                   "between tensors without storing them" },
    { "sketch relations", "sketch relations: identities between recorded tensors of a sublayer "
                          "(e.g. stream_out = stream_in + branch_out) checked on the random "
                          "projections of each, given as a relative error; one that truly holds "
                          "shows ~1e-7 in float32 (rounding), one that does not ~0.1 to 1" },
    { "pre-type", "pre-type relations: those a pre-norm sublayer satisfies - the norm reads the "
                  "stream (norm_in = stream_in) and the branch output is added to it "
                  "(stream_out = stream_in + branch_out)" },
    { "post-type", "post-type relations: those a post-norm sublayer satisfies - the norm reads "
                   "the sum (norm_in = alpha stream_in + branch_out) and its output is the new "
                   "stream (stream_out = norm_out); \"post-type off by E\": their error E here" },
    { "(first of these)", "(first of these): the layers of that line share the verdict; the "
                          "numbers shown are the first layer's" },
    { "rounding floor", "rounding floor: the smallest relative error float rounding alone can "
                        "give for a tensor of that size and dtype; errors below it are noise, "
                        "not evidence" },
    { "by construction", "by construction: a relation between two records of the same tensor "
                         "(the trainer declared them one tensor); it holds for any model, so it "
                         "is no evidence" },
    { "call order", "call order: the order in which the model called the recording hooks in a "
                    "sublayer; a pre-norm block reaches the norm before the branch, a post-norm "
                    "block the branch before the norm" },
    { "deciding hooks", "deciding hooks: the source lines of the recording calls whose tensors "
                        "decided the verdict, to check the right tensors were recorded" },
    { " rms ", "rms: the per-token root mean square of the stream (per-token L2 norm / "
               "sqrt(d_model)), averaged over tokens" },
    { "||grad ", "||grad P||: the Frobenius norm of the loss gradient of that layer's parameter "
                 "P (the one named first in Gradients)" },
    { "growth", "stream growth: ||x_L|| / ||x_1||, the norm of the stream leaving the last layer "
                "over that leaving the first" },
};

static void text_legend(sb *b, const rd_analysis *a)
{
    if (b->failed || !b->s)
        return;
    /* The markers are looked for in the body only, never in the legend. */
    char *body = malloc(b->len + 1);
    if (!body) {
        b->failed = 1;
        return;
    }
    memcpy(body, b->s, b->len + 1);
    rd_strbuf_printf(b, "\nLegend:\n");
    size_t n = sizeof legend_terms / sizeof legend_terms[0];
    for (size_t i = 0; i < n; i++) {
        if (!strstr(body, legend_terms[i].marker))
            continue;
        rd_strbuf_printf(b, "  %s\n", legend_terms[i].text);
        if (!strcmp(legend_terms[i].marker, " rms ") && a->n_sublayers > 0) {
            /* the r columns, named by the trainer's sublayers */
            rd_strbuf_printf(b, "  ");
            for (int s = 0; s < a->n_sublayers && s < 4; s++) {
                char esc[160];
                rd_text_escape(esc, sizeof esc, a->sublayer_names[s]);
                rd_strbuf_printf(b, "%sr_%s", s ? ", " : "", esc);
            }
            rd_strbuf_printf(b, ": r = ||dx|| / ||x|| of that sublayer - the norm of what its "
                                "branch adds to the stream over the norm of the stream it reads\n");
        }
    }
    free(body);
}

/* ---------------------------------------------------------------- JSON */

static void js_str(sb *b, const char *s)
{
    rd_strbuf_put_json(b, s);
}

static void js_num(sb *b, double v)
{
    if (isfinite(v))
        rd_strbuf_printf(b, "%.9g", v);
    else
        rd_strbuf_printf(b, "null");
}

static void js_fit(sb *b, const rd_fit *f)
{
    rd_strbuf_printf(b, "{\"n\": %d, \"ok\": %s, \"intercept\": ", f->n, f->ok ? "true" : "false");
    js_num(b, f->a);
    rd_strbuf_printf(b, ", \"slope\": ");
    js_num(b, f->b);
    rd_strbuf_printf(b, ", \"slope_lo\": ");
    js_num(b, f->b_lo);
    rd_strbuf_printf(b, ", \"slope_hi\": ");
    js_num(b, f->b_hi);
    rd_strbuf_printf(b, ", \"r2\": ");
    js_num(b, f->r2);
    rd_strbuf_printf(b, "}");
}

static void js_array(sb *b, const double *v, int n, int stride)
{
    rd_strbuf_printf(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            rd_strbuf_printf(b, ", ");
        js_num(b, v[(size_t)i * stride]);
    }
    rd_strbuf_printf(b, "]");
}

char *resdiag_analysis_to_json(const resdiag_analysis *a)
{
    if (!a)
        return NULL;
    sb b = { 0 };
    int L = a->n_layers, S = a->n_sublayers, P = a->n_layer_params;
    rd_strbuf_printf(&b, "{\n  \"report_version\": 1,\n  \"declared_contradicted\": %s,\n"
                  "  \"run\": {\"n_layers\": %d, \"d_model\": %d, "
                  "\"n_sublayers\": %d, \"sublayer_names\": [",
              declared_contradicted(a) ? "true" : "false", L, a->d_model, S);
    for (int s = 0; s < S; s++) {
        if (s)
            rd_strbuf_printf(&b, ", ");
        js_str(&b, a->sublayer_names[s]);
    }
    rd_strbuf_printf(&b, "], \"block\": \"%s\", \"norm_kind\": \"%s\", \"declared_placement\": \"%s\", "
                  "\"declared_mix_layers\": %d, \"schema_version\": %d, \"resdiag_version\": ",
              a->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential",
              resdiag_norm_kind_name(a->norm_kind), resdiag_placement_name(a->declared),
              a->declared_mix, a->schema_version);
    js_str(&b, a->writer_version);
    rd_strbuf_printf(&b, ", \"description\": ");
    js_str(&b, a->description);
    rd_strbuf_printf(&b, ", \"created_utc\": ");
    js_str(&b, a->created);
    rd_strbuf_printf(&b, ", \"program\": ");
    js_str(&b, a->program);
    rd_strbuf_printf(&b, ", \"sketch_size\": %d, \"run_kind\": \"%s\"},\n", a->sketch_size,
              resdiag_run_kind_name(a->run_kind));
    rd_strbuf_printf(&b, "  \"steps\": {\"recorded\": %lld, \"first\": %lld, \"last\": %lld, "
                  "\"analysed\": %lld, \"analysed_index\": %lld},\n",
              (long long)a->n_steps, (long long)a->steps[0], (long long)a->steps[a->n_steps - 1],
              (long long)a->step, (long long)a->step_index);
    /* the last recorded step's verdict beside the judged one: null when the
     * judged step is the last */
    if (a->step_index == a->n_steps - 1) {
        rd_strbuf_printf(&b, "  \"last_step\": null,\n");
    } else {
        const rd_analysis *z = a->at_last;
        rd_strbuf_printf(&b, "  \"last_step\": {\"step\": %lld, \"index\": %lld, \"error\": ",
                  (long long)a->steps[a->n_steps - 1], (long long)(a->n_steps - 1));
        if (z)
            rd_strbuf_printf(&b, "null, \"verdict\": \"%s\", \"confidence\": \"%s\", "
                          "\"mix_layers\": %d, \"growth\": ", resdiag_verdict_name(z->verdict),
                      resdiag_confidence_name(z->conf), resdiag_analysis_mix_layers(z));
        else {
            js_str(&b, resdiag_strerror(a->at_last_status));
            rd_strbuf_printf(&b, ", \"verdict\": null, \"confidence\": null, \"mix_layers\": null, "
                          "\"growth\": ");
        }
        js_num(&b, a->tr_growth[1]);
        rd_strbuf_printf(&b, ", \"mean_r\": ");
        js_array(&b, a->tr_mean_r[1], S < RESDIAG_MAX_SUBLAYERS ? S : RESDIAG_MAX_SUBLAYERS, 1);
        rd_strbuf_printf(&b, "},\n");
    }
    rd_strbuf_printf(&b, "  \"observed\": {\"stream_only\": %s, \"relations\": %s, \"forward\": {",
              a->stream_only ? "true" : "false", a->use_relations ? "true" : "false");
    for (int d = 0; d < 2; d++) {
        if (d)
            rd_strbuf_printf(&b, "}, \"backward\": {");
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            rd_strbuf_printf(&b, "%s\"%s\": %d", s ? ", " : "", resdiag_site_name((resdiag_site)s),
                      a->n_obs[d][s]);
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++)
            rd_strbuf_printf(&b, ", \"%s\": %d", resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + m)),
                      a->model_obs[d][m]);
    }
    rd_strbuf_printf(&b, "}},\n");

    rd_strbuf_printf(&b, "  \"placement\": {\"verdict\": \"%s\", \"confidence\": \"%s\", \"why\": ",
              resdiag_verdict_name(a->verdict), resdiag_confidence_name(a->conf));
    js_str(&b, a->why);
    rd_strbuf_printf(&b, ", \"confidence_why\": ");
    js_str(&b, a->verdict != RESDIAG_VERDICT_CANNOT_TELL && a->conf < RESDIAG_CONFIDENCE_HIGH
                   ? a->conf_why : "");
    rd_strbuf_printf(&b, ", \"mix_layers\": %d, \"alpha\": ", resdiag_analysis_mix_layers(a));
    js_num(&b, resdiag_analysis_alpha(a));
    int agree = rd_declared_agrees(a);
    rd_strbuf_printf(&b, ", \"final_norm\": \"%s\", \"final_norm_why\": ",
              a->final_norm == 1 ? "present" : a->final_norm == 0 ? "absent" : "not observed");
    js_str(&b, a->final_norm_why);
    rd_strbuf_printf(&b, ", \"declared_agrees\": %s, \"undecided_layers\": %d, "
                  "\"call_order_agrees\": %d, \"call_order_disagrees\": %d, \"deciding_hooks\": {",
              agree == 1 ? "true" : agree == 0 ? "false" : "null", a->n_undecided,
              a->order_agree, a->order_disagree);
    rd_strbuf_printf(&b, "\"norm_in\": ");
    js_str(&b, a->cs_norm_in);
    rd_strbuf_printf(&b, ", \"branch_out\": ");
    js_str(&b, a->cs_branch_out);
    rd_strbuf_printf(&b, ", \"stream_out\": ");
    js_str(&b, a->cs_stream_out);
    rd_strbuf_printf(&b, "},\n    \"layers\": [");
    for (int l = 0; l < L; l++) {
        rd_strbuf_printf(&b, "%s\n      {\"layer\": %d, \"stream_signature\": \"%s\", "
                      "\"stream_token_norm_cv\": ", l ? "," : "", l,
                  a->layer_sig[l] == RD_SIG_NORMALIZED ? "normalized"
                  : a->layer_sig[l] == RD_SIG_NOT      ? "not_normalized"
                  : a->layer_sig[l] == RD_SIG_UNCLEAR  ? "unclear"
                                                       : "unknown");
        js_num(&b, a->layer_cv[l]);
        rd_strbuf_printf(&b, ", \"sublayers\": [");
        for (int s = 0; s < S; s++) {
            const rd_sub *r = &a->sub[l * S + s];
            rd_strbuf_printf(&b, "%s{\"name\": ", s ? ", " : "");
            js_str(&b, a->sublayer_names[s]);
            rd_strbuf_printf(&b, ", \"verdict\": \"%s\", \"confidence\": \"%s\", \"alpha\": ",
                      resdiag_verdict_name(r->v), resdiag_confidence_name(r->conf));
            js_num(&b, r->alpha);
            double e[RD_N_REL] = { r->e_add, r->e_nx, r->e_nsum, r->e_deep, r->e_yn, r->e_par,
                                   r->e_fn };
            static const char *const en[RD_N_REL] = { "add", "norm_reads_stream",
                                                      "norm_reads_sum", "norm_reads_alpha_sum",
                                                      "out_is_norm", "parallel_same_input",
                                                      "branch_is_norm_out" };
            /* as measured; by_construction says which of them count for nothing */
            for (int i = 0; i < RD_N_REL; i++)
                if (r->constructed >> i & 1u)
                    e[i] = r->e_constructed[i];
            rd_strbuf_printf(&b, ", \"by_construction\": [");
            for (int i = 0, n = 0; i < RD_N_REL; i++)
                if (r->constructed >> i & 1u)
                    rd_strbuf_printf(&b, "%s\"%s\"", n++ ? ", " : "", en[i]);
            rd_strbuf_printf(&b, "]");
            rd_strbuf_printf(&b, ", \"rounding_floor\": ");
            js_num(&b, r->floor);
            rd_strbuf_printf(&b, ", \"evidence_strength\": ");
            js_num(&b, r->strength);
            rd_strbuf_printf(&b, ", \"confidence_why\": ");
            js_str(&b, r->conf_why);
            rd_strbuf_printf(&b, ", \"relation_errors\": {");
            for (int i = 0; i < RD_N_REL; i++) {
                rd_strbuf_printf(&b, "%s\"%s\": ", i ? ", " : "", en[i]);
                js_num(&b, e[i]);
            }
            rd_strbuf_printf(&b, "}, \"call_order\": \"%s\", \"why\": ",
                      r->order == 1 ? "norm_first" : r->order == 2 ? "branch_first" : "unknown");
            js_str(&b, r->why);
            rd_strbuf_printf(&b, "}");
        }
        rd_strbuf_printf(&b, "]}");
    }
    rd_strbuf_printf(&b, "]},\n");

    rd_strbuf_printf(&b, "  \"stream\": {\"norm\": ");
    js_array(&b, a->xnorm, L + 1, 1);
    rd_strbuf_printf(&b, ", \"rms\": ");
    js_array(&b, a->xrms, L + 1, 1);
    rd_strbuf_printf(&b, ", \"energy\": ");
    js_array(&b, a->xenergy, L + 1, 1);
    rd_strbuf_printf(&b, ", \"energy_fit\": ");
    js_fit(&b, &a->fit_energy);
    rd_strbuf_printf(&b, ", \"loglog_fit\": ");
    js_fit(&b, &a->fit_xlog);
    rd_strbuf_printf(&b, ", \"growth\": ");
    js_num(&b, a->growth);
    rd_strbuf_printf(&b, "},\n  \"updates\": [");
    for (int s = 0; s < S; s++) {
        rd_strbuf_printf(&b, "%s\n    {\"sublayer\": ", s ? "," : "");
        js_str(&b, a->sublayer_names[s]);
        rd_strbuf_printf(&b, ", \"r\": ");
        js_array(&b, a->r + s, L, S);
        rd_strbuf_printf(&b, ", \"fit_all\": ");
        js_fit(&b, &a->fit_r[s < RD_MAX_RFIT ? s : 0]);
        rd_strbuf_printf(&b, ", \"fit_deeper_half\": ");
        js_fit(&b, &a->fit_r_deep[s < RD_MAX_RFIT ? s : 0]);
        rd_strbuf_printf(&b, "}");
    }
    rd_strbuf_printf(&b, "],\n  \"gradients\": ");
    if (a->grad_step < 0) {
        rd_strbuf_printf(&b, "null");
    } else {
        rd_strbuf_printf(&b, "{\"step\": %lld, \"params\": [", (long long)a->steps[a->grad_step]);
        for (int i = 0; i < a->n_order; i++) {
            int p = a->param_order[i];
            rd_strbuf_printf(&b, "%s\n    {\"name\": ", i ? "," : "");
            js_str(&b, a->param_names[p]);
            rd_strbuf_printf(&b, ", \"norm\": ");
            js_array(&b, a->grad + p, L, P);
            rd_strbuf_printf(&b, ", \"last_over_first\": ");
            js_num(&b, a->grad[p] > 0 ? a->grad[(size_t)(L - 1) * P + p] / a->grad[p] : NAN);
            rd_strbuf_printf(&b, ", \"loglog_fit\": ");
            js_fit(&b, &a->fit_grad[p]);
            rd_strbuf_printf(&b, "}");
        }
        rd_strbuf_printf(&b, "],\n    \"stream\": ");
        js_array(&b, a->sgrad, L, 1);
        rd_strbuf_printf(&b, ", \"stream_embed\": ");
        js_num(&b, a->sgrad_embed);
        rd_strbuf_printf(&b, ", \"stream_last_over_first\": ");
        js_num(&b, a->sgrad[0] > 0 ? a->sgrad[L - 1] / a->sgrad[0] : NAN);
        rd_strbuf_printf(&b, ", \"stream_loglog_fit\": ");
        js_fit(&b, &a->fit_sgrad);
        rd_strbuf_printf(&b, ", \"head\": ");
        js_num(&b, a->head_grad);
        rd_strbuf_printf(&b, ", \"head_source\": \"%s\"}", a->head_is_param ? "head.w" : "logits");
    }
    rd_strbuf_printf(&b, ",\n  \"nonfinite\": ");
    if (!a->nf_found) {
        rd_strbuf_printf(&b, "null");
    } else {
        rd_strbuf_printf(&b, "{\"step\": %lld, \"layer\": %d, \"sublayer\": ", (long long)a->nf_step,
                  a->nf_layer);
        if (a->nf_layer == RESDIAG_MODEL_LEVEL || a->nf_site < 0)
            rd_strbuf_printf(&b, "null");
        else
            js_str(&b, a->sublayer_names[a->nf_sub]);
        rd_strbuf_printf(&b, ", \"site\": ");
        if (a->nf_site < 0)
            rd_strbuf_printf(&b, "null");
        else
            js_str(&b, resdiag_site_name((resdiag_site)a->nf_site));
        rd_strbuf_printf(&b, ", \"param\": ");
        if (a->nf_site >= 0)
            rd_strbuf_printf(&b, "null");
        else if (a->nf_layer != RESDIAG_MODEL_LEVEL && a->nf_param >= 0)
            js_str(&b, a->param_names[a->nf_param]);
        else
            rd_strbuf_printf(&b, "%d", a->nf_param);
        rd_strbuf_printf(&b, ", \"direction\": \"%s\", \"nan\": %.0f, \"inf\": %.0f, \"steps_affected\": "
                      "%lld, \"nan_total\": %.0f, \"inf_total\": %.0f}",
                  a->nf_dir == RESDIAG_FORWARD ? "forward" : "backward", a->nf_nan, a->nf_inf,
                  (long long)a->nf_steps, a->nan_total, a->inf_total);
    }
    rd_strbuf_printf(&b, ",\n  \"training\": {\"first_step\": %lld, \"last_step\": %lld, \"growth\": [",
              (long long)a->steps[0], (long long)a->steps[a->n_steps - 1]);
    js_num(&b, a->tr_growth[0]);
    rd_strbuf_printf(&b, ", ");
    js_num(&b, a->tr_growth[1]);
    rd_strbuf_printf(&b, "], \"mean_r\": [");
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        rd_strbuf_printf(&b, "%s{\"sublayer\": ", s ? ", " : "");
        js_str(&b, a->sublayer_names[s]);
        rd_strbuf_printf(&b, ", \"first\": ");
        js_num(&b, a->tr_mean_r[0][s]);
        rd_strbuf_printf(&b, ", \"last\": ");
        js_num(&b, a->tr_mean_r[1][s]);
        rd_strbuf_printf(&b, "}");
    }
    rd_strbuf_printf(&b, "], \"grad_param\": ");
    js_str(&b, a->n_order > 0 ? a->param_names[a->param_order[0]] : "");
    rd_strbuf_printf(&b, ", \"grad_last_over_first\": [");
    js_num(&b, a->tr_grad_ratio[0]);
    rd_strbuf_printf(&b, ", ");
    js_num(&b, a->tr_grad_ratio[1]);
    rd_strbuf_printf(&b, "]}");
    rd_strbuf_printf(&b, ",\n  \"warnings\": [");
    for (int i = 0; i < a->n_warnings; i++) {
        rd_strbuf_printf(&b, "%s\n    ", i ? "," : "");
        js_str(&b, a->warnings[i]);
    }
    rd_strbuf_printf(&b, "]\n}\n");
    return rd_strbuf_finish(&b);
}

/* ---------------------------------------------------------------- diff */

typedef struct diff_item {
    double score; /* |log(b / a)| */
    char text[200];
} diff_item;

static int by_score(const void *x, const void *y)
{
    double a = ((const diff_item *)x)->score, b = ((const diff_item *)y)->score;
    return a < b ? 1 : a > b ? -1 : 0;
}

static double log_ratio(double a, double b)
{
    return a > 0 && b > 0 && isfinite(a) && isfinite(b) ? fabs(log(b / a)) : NAN;
}

char *resdiag_analysis_diff_text(const resdiag_analysis *a, const resdiag_analysis *b,
                                 const char *na, const char *nb)
{
    if (!a || !b)
        return NULL;
    na = na ? na : "A";
    nb = nb ? nb : "B";
    sb o = { 0 };
    rd_esc_ring ring = { 0 }, *esc = &ring;
    int L = a->n_layers < b->n_layers ? a->n_layers : b->n_layers;
    int S = a->n_sublayers < b->n_sublayers ? a->n_sublayers : b->n_sublayers;
    rd_strbuf_printf(&o, "A = %s\nB = %s\n", E(na), E(nb));
    rd_strbuf_printf(&o, "  A: %d layers, d_model %d, step %lld; B: %d layers, d_model %d, step %lld%s\n",
              a->n_layers, a->d_model, (long long)a->step, b->n_layers, b->d_model,
              (long long)b->step,
              a->n_layers != b->n_layers ? " - compared over the common layers" : "");

    rd_strbuf_printf(&o, "\nDifferences that matter, largest first:\n");
    int n = 0;
    if (a->verdict != b->verdict || a->mix_layers != b->mix_layers)
        rd_strbuf_printf(&o, "  placement: A %s, B %s\n", rd_verdict_human(a->verdict), rd_verdict_human(b->verdict)), n++;
    if (a->final_norm != b->final_norm) {
        static const char *const fnm[3] = { "not observed", "absent", "present" };
        rd_strbuf_printf(&o, "  final norm: A %s, B %s\n", fnm[a->final_norm + 1], fnm[b->final_norm + 1]);
        n++;
    }
    /* per-layer quantities ranked by how much they differ */
    size_t cap = (size_t)(L + 1) * (S + 3) + 4, m = 0;
    diff_item *it = calloc(cap, sizeof *it);
    if (!it) {
        free(o.s);
        rd_esc_ring_free(&ring);
        return NULL;
    }
    double gr = log_ratio(a->growth, b->growth);
    if (gr == gr) {
        it[m].score = gr;
        snprintf(it[m++].text, sizeof it[0].text,
                 "stream growth ||x_L||/||x_1||: A %.4g, B %.4g (B/A %.3g)", a->growth, b->growth,
                 b->growth / a->growth);
    }
    for (int k = 1; k <= L; k++) {
        double s = log_ratio(a->xnorm[k], b->xnorm[k]);
        if (s == s) {
            it[m].score = s;
            snprintf(it[m++].text, sizeof it[0].text,
                     "layer %d stream ||x||: A %.4g, B %.4g (B/A %.3g)", k - 1, a->xnorm[k],
                     b->xnorm[k], b->xnorm[k] / a->xnorm[k]);
        }
        for (int s2 = 0; s2 < S; s2++) {
            double ra = a->r[(k - 1) * a->n_sublayers + s2];
            double rb = b->r[(k - 1) * b->n_sublayers + s2];
            double sc = log_ratio(ra, rb);
            if (sc == sc) {
                it[m].score = sc;
                snprintf(it[m++].text, sizeof it[0].text,
                         "layer %d %s update r: A %.3g, B %.3g (B/A %.3g)", k - 1,
                         a->sublayer_names[s2], ra, rb, rb / ra);
            }
        }
        if (a->grad_step >= 0 && b->grad_step >= 0 && a->n_order && b->n_order) {
            int pa = a->param_order[0], pb = b->param_order[0];
            double ga = a->grad[(size_t)(k - 1) * a->n_layer_params + pa];
            double gb = b->grad[(size_t)(k - 1) * b->n_layer_params + pb];
            double sc = log_ratio(ga, gb);
            if (sc == sc && strcmp(a->param_names[pa], b->param_names[pb]) == 0) {
                it[m].score = sc;
                snprintf(it[m++].text, sizeof it[0].text,
                         "layer %d %s gradient: A %.4g, B %.4g (B/A %.3g)", k - 1,
                         a->param_names[pa], ga, gb, gb / ga);
            }
        }
    }
    qsort(it, m, sizeof *it, by_score);
    for (size_t i = 0; i < m && i < 8; i++)
        if (it[i].score > log(1.05))
            rd_strbuf_printf(&o, "  %s\n", E(it[i].text)), n++;
    free(it);
    if (!n)
        rd_strbuf_printf(&o, "  none above 5%%\n");
    if (a->nf_found != b->nf_found)
        rd_strbuf_printf(&o, "  non-finite values: %s\n", a->nf_found ? "only in A" : "only in B");

    rd_strbuf_printf(&o, "\nPer layer (A | B):\n   k  %10s %10s", "||x||_A", "||x||_B");
    for (int s2 = 0; s2 < S && s2 < 4; s2++) {
        char h[200];
        rd_strbuf_printf(&o, " %10s %9s", column_head(h, sizeof h, "r_", a->sublayer_names[s2], " A", 10), "B");
    }
    int grads = a->grad_step >= 0 && b->grad_step >= 0 && a->n_order && b->n_order;
    if (grads) {
        char h[200];
        rd_strbuf_printf(&o, " %10s %9s",
                         column_head(h, sizeof h, "", a->param_names[a->param_order[0]], " A", 10),
                         "B");
    }
    rd_strbuf_printf(&o, "\n");
    for (int k = 0; k <= L; k++) {
        rd_strbuf_printf(&o, "  %2d ", k);
        cell(&o, " %10.4g", 10, a->xnorm[k]);
        cell(&o, " %10.4g", 10, b->xnorm[k]);
        if (k > 0) {
            for (int s2 = 0; s2 < S && s2 < 4; s2++) {
                cell(&o, " %10.3g", 10, a->r[(k - 1) * a->n_sublayers + s2]);
                cell(&o, " %9.3g", 9, b->r[(k - 1) * b->n_sublayers + s2]);
            }
            if (grads) {
                cell(&o, " %10.4g", 10,
                     a->grad[(size_t)(k - 1) * a->n_layer_params + a->param_order[0]]);
                cell(&o, " %9.4g", 9,
                     b->grad[(size_t)(k - 1) * b->n_layer_params + b->param_order[0]]);
            }
        }
        rd_strbuf_printf(&o, "\n");
    }
    rd_esc_ring_free(&ring);
    return rd_strbuf_finish(&o);
}
