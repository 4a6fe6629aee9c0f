/*
 * json.c - the analysis as JSON for programs (resdiag_analysis_to_json;
 * keys documented in doc/REPORT-JSON.md; stable: only added, never
 * renamed or removed within a "report_version"). Strings from the run
 * file go through the JSON escaper (strbuf.h).
 */
#include <math.h>
#include <stdio.h>

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"
#include "format/metric_value.h"
#include "render/consequences.h"
#include "render/ranks.h"
#include "render/shared.h"

typedef rd_strbuf sb;

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

/* the run: its model, declaration and provenance */
static void json_run(sb *b, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    rd_strbuf_printf(b,
                     "{\n  \"report_version\": 1,\n  \"declared_contradicted\": %s,\n"
                     "  \"run\": {\"n_layers\": %d, \"d_model\": %d, "
                     "\"n_sublayers\": %d, \"sublayer_names\": [",
                     rd_declared_contradicted(a) ? "true" : "false", L, a->load.d_model, S);
    for (int s = 0; s < S; s++) {
        if (s)
            rd_strbuf_printf(b, ", ");
        js_str(b, a->load.sublayer_names[s]);
    }
    rd_strbuf_printf(
        b,
        "], \"block\": \"%s\", \"norm_kind\": \"%s\", \"declared_placement\": \"%s\", "
        "\"declared_mix_layers\": %d, \"schema_version\": %d, \"resdiag_version\": ",
        a->load.block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential",
        resdiag_norm_kind_name(a->load.norm_kind), resdiag_placement_name(a->load.declared),
        a->load.declared_mix, a->load.schema_version);
    js_str(b, a->load.writer_version);
    rd_strbuf_printf(b, ", \"description\": ");
    js_str(b, a->load.description);
    rd_strbuf_printf(b, ", \"created_utc\": ");
    js_str(b, a->load.created);
    rd_strbuf_printf(b, ", \"program\": ");
    js_str(b, a->load.program);
    rd_strbuf_printf(b, ", \"sketch_size\": %d, \"run_kind\": \"%s\", \"file_state\": \"%s\"},\n",
                     a->load.sketch_size, resdiag_run_kind_name(a->load.run_kind),
                     rd_file_state_key(a->load.file_state));
}

/* the steps ended with resdiag_step_abort: how many, the first few */
static void json_aborted(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(b, "  \"n_aborted_steps\": %lld, \"aborted_steps\": [",
                     (long long)a->aborted.count);
    int n = a->aborted.count < RD_ABORTED_LISTED ? (int)a->aborted.count : RD_ABORTED_LISTED;
    for (int i = 0; i < n; i++) {
        rd_strbuf_printf(b, "%s{\"step\": %lld, \"index\": %lld, \"reason\": ", i ? ", " : "",
                         (long long)a->load.steps[a->aborted.listed_index[i]],
                         (long long)a->aborted.listed_index[i]);
        if (a->aborted.listed_reason[i][0])
            js_str(b, a->aborted.listed_reason[i]);
        else
            rd_strbuf_printf(b, "null");
        rd_strbuf_printf(b, "}");
    }
    rd_strbuf_printf(b, "],\n");
}

/* the recorded steps, and the last one's verdict beside the judged one */
static void json_steps(sb *b, const rd_analysis *a)
{
    int S = a->load.n_sublayers;
    rd_strbuf_printf(b,
                     "  \"steps\": {\"recorded\": %lld, \"first\": %lld, \"last\": %lld, "
                     "\"analysed\": %lld, \"analysed_index\": %lld, \"analysed_aborted\": %s},\n",
                     (long long)a->load.n_steps, (long long)a->load.steps[0],
                     (long long)a->load.steps[a->load.n_steps - 1], (long long)a->load.step,
                     (long long)a->load.step_index, a->aborted.step_aborted ? "true" : "false");
    json_aborted(b, a);
    /* the last complete step's verdict beside the judged one: null when the
     * judged step is the last */
    if (a->load.step_index == a->aborted.last_index) {
        rd_strbuf_printf(b, "  \"last_step\": null,\n");
    } else {
        const rd_analysis *z = a->at_last;
        rd_strbuf_printf(b, "  \"last_step\": {\"step\": %lld, \"index\": %lld, \"error\": ",
                         (long long)a->load.steps[a->aborted.last_index],
                         (long long)a->aborted.last_index);
        if (z)
            rd_strbuf_printf(b,
                             "null, \"verdict\": \"%s\", \"confidence\": \"%s\", "
                             "\"mix_layers\": %d, \"growth\": ",
                             resdiag_verdict_name(z->verdict.v),
                             resdiag_confidence_name(z->verdict.conf),
                             resdiag_analysis_mix_layers(z));
        else {
            js_str(b, resdiag_strerror(a->at_last_status));
            rd_strbuf_printf(b, ", \"verdict\": null, \"confidence\": null, \"mix_layers\": null, "
                          "\"growth\": ");
        }
        js_num(b, a->training.growth[1]);
        rd_strbuf_printf(b, ", \"mean_r\": ");
        js_array(b, a->training.mean_r[1], S < RESDIAG_MAX_SUBLAYERS ? S : RESDIAG_MAX_SUBLAYERS,
                 1);
        rd_strbuf_printf(b, "},\n");
    }
}

/* which sites were observed, forward and backward */
static void json_observed(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(b, "  \"observed\": {\"stream_only\": %s, \"relations\": %s, \"forward\": {",
                     a->observe.stream_only ? "true" : "false",
                     a->observe.use_relations ? "true" : "false");
    for (int d = 0; d < 2; d++) {
        if (d)
            rd_strbuf_printf(b, "}, \"backward\": {");
        for (int s = 0; s < RESDIAG_N_BLOCK_SITES; s++)
            rd_strbuf_printf(b, "%s\"%s\": %d", s ? ", " : "", resdiag_site_name((resdiag_site)s),
                             a->observe.n_obs[d][s]);
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++)
            rd_strbuf_printf(b, ", \"%s\": %d",
                             resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + m)),
                             a->observe.model_obs[d][m]);
    }
    rd_strbuf_printf(b, "}},\n");

}

/* the verdict, its reasons and the deciding hooks */
static void json_placement(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(
        b, "  \"placement\": {\"verdict\": \"%s\", \"confidence\": \"%s\", \"why\": ",
        resdiag_verdict_name(a->verdict.v), resdiag_confidence_name(a->verdict.conf));
    js_str(b, a->verdict.why);
    rd_strbuf_printf(b, ", \"confidence_why\": ");
    js_str(b, a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL &&
                      a->verdict.conf < RESDIAG_CONFIDENCE_HIGH
                  ? a->verdict.conf_why
                  : "");
    rd_strbuf_printf(b, ", \"pattern\": ");
    js_str(b, a->verdict.v == RESDIAG_VERDICT_PER_SUBLAYER ? a->verdict.pattern : "");
    rd_strbuf_printf(b, ", \"last_norm_is_final_norm\": %s, \"zero_branch_sublayers\": %d",
                     a->verdict.last_norm_is_final ? "true" : "false",
                     a->verdict.n_zero_branches);
    rd_strbuf_printf(b, ", \"check_decides\": %s",
                     a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL &&
                             a->verdict.v != RESDIAG_VERDICT_ZERO_BRANCHES &&
                             a->verdict.conf >= RESDIAG_CONFIDENCE_MEDIUM
                         ? "true"
                         : "false");
    rd_strbuf_printf(b, ", \"mix_layers\": %d, \"alpha\": ", resdiag_analysis_mix_layers(a));
    js_num(b, resdiag_analysis_alpha(a));
    int agree = rd_declared_agrees(a);
    rd_strbuf_printf(b, ", \"final_norm\": \"%s\", \"final_norm_why\": ",
              rd_final_norm_key(a));
    js_str(b, a->final_norm.why);
    rd_strbuf_printf(
        b,
        ", \"declared_agrees\": %s, \"undecided_layers\": %d, "
        "\"call_order_agrees\": %d, \"call_order_disagrees\": %d, \"deciding_hooks\": {",
        agree == 1   ? "true"
        : agree == 0 ? "false"
                     : "null",
        a->verdict.n_undecided, a->placement.order_agree, a->placement.order_disagree);
    rd_strbuf_printf(b, "\"norm_in\": ");
    js_str(b, a->verdict.cs_norm_in);
    rd_strbuf_printf(b, ", \"branch_out\": ");
    js_str(b, a->verdict.cs_branch_out);
    rd_strbuf_printf(b, ", \"stream_out\": ");
    js_str(b, a->verdict.cs_stream_out);
    rd_strbuf_printf(b, "},\n    \"layers\": [");
}

/* one sublayer of layer l: its verdict, the errors of every relation
 * between its sites and why */
static void json_sublayer(sb *b, const rd_analysis *a, int l, int s)
{
    const rd_sub *r = &a->placement.sub[l * a->load.n_sublayers + s];
    rd_strbuf_printf(b, "%s{\"name\": ", s ? ", " : "");
    js_str(b, a->load.sublayer_names[s]);
    rd_strbuf_printf(b, ", \"verdict\": \"%s\", \"confidence\": \"%s\", \"alpha\": ",
              resdiag_verdict_name(r->v), resdiag_confidence_name(r->conf));
    js_num(b, r->alpha);
    double e[RD_N_REL] = { r->e_add, r->e_nx,  r->e_nsum, r->e_deep, r->e_yn, r->e_par,
                           r->e_fn,  r->e_bx, r->e_bn,   r->e_fo,   r->e_oid };
    static const char *const en[RD_N_REL] = { "add", "norm_reads_stream",
                                              "norm_reads_sum", "norm_reads_alpha_sum",
                                              "out_is_norm", "parallel_same_input",
                                              "branch_is_norm_out", "branch_reads_stream",
                                              "branch_reads_norm_out", "branch_is_out_norm_out",
                                              "out_norm_is_identity" };
    /* as measured; by_construction says which of them count for nothing */
    for (int i = 0; i < RD_N_REL; i++)
        if (r->constructed >> i & 1u)
            e[i] = r->e_constructed[i];
    rd_strbuf_printf(b, ", \"by_construction\": [");
    for (int i = 0, n = 0; i < RD_N_REL; i++)
        if (r->constructed >> i & 1u)
            rd_strbuf_printf(b, "%s\"%s\"", n++ ? ", " : "", en[i]);
    rd_strbuf_printf(b, "]");
    rd_strbuf_printf(b, ", \"rounding_floor\": ");
    js_num(b, r->floor);
    rd_strbuf_printf(b, ", \"evidence_strength\": ");
    js_num(b, r->strength);
    rd_strbuf_printf(b, ", \"confidence_why\": ");
    js_str(b, r->conf_why);
    rd_strbuf_printf(b, ", \"relation_errors\": {");
    for (int i = 0; i < RD_N_REL; i++) {
        rd_strbuf_printf(b, "%s\"%s\": ", i ? ", " : "", en[i]);
        js_num(b, e[i]);
    }
    rd_strbuf_printf(b, "}, \"call_order\": \"%s\", \"decided_by_call_order\": %s, \"why\": ",
              r->order == 1 ? "norm_first" : r->order == 2 ? "branch_first" : "unknown",
              r->by_order ? "true" : "false");
    js_str(b, r->why);
    rd_strbuf_printf(b, "}");
}

/* per layer: the stream's signature and each sublayer's evidence */
static void json_layers(sb *b, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    for (int l = 0; l < L; l++) {
        rd_strbuf_printf(b,
                         "%s\n      {\"layer\": %d, \"stream_signature\": \"%s\", "
                         "\"stream_token_norm_cv\": ",
                         l ? "," : "", l,
                         a->depth.layer_sig[l] == RD_SIG_NORMALIZED ? "normalized"
                         : a->depth.layer_sig[l] == RD_SIG_NOT      ? "not_normalized"
                         : a->depth.layer_sig[l] == RD_SIG_UNCLEAR  ? "unclear"
                                                                    : "unknown");
        js_num(b, a->depth.layer_cv[l]);
        rd_strbuf_printf(b, ", \"sublayers\": [");
        for (int s = 0; s < S; s++) {
            json_sublayer(b, a, l, s);
        }
        rd_strbuf_printf(b, "]}");
    }
    rd_strbuf_printf(b, "]},\n");
}

/* the stream's depth laws and the relative updates per sublayer */
static void json_stream(sb *b, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    rd_strbuf_printf(b, "  \"stream\": {\"norm\": ");
    js_array(b, a->depth.xnorm, L + 1, 1);
    rd_strbuf_printf(b, ", \"rms\": ");
    js_array(b, a->depth.xrms, L + 1, 1);
    rd_strbuf_printf(b, ", \"energy\": ");
    js_array(b, a->depth.xenergy, L + 1, 1);
    rd_strbuf_printf(b, ", \"energy_fit\": ");
    js_fit(b, &a->depth.fit_energy);
    rd_strbuf_printf(b, ", \"loglog_fit\": ");
    js_fit(b, &a->depth.fit_xlog);
    rd_strbuf_printf(b, ", \"growth\": ");
    js_num(b, a->depth.growth);
    rd_strbuf_printf(b, "},\n  \"updates\": [");
    for (int s = 0; s < S; s++) {
        rd_strbuf_printf(b, "%s\n    {\"sublayer\": ", s ? "," : "");
        js_str(b, a->load.sublayer_names[s]);
        rd_strbuf_printf(b, ", \"r\": ");
        js_array(b, a->placement.r + s, L, S);
        rd_strbuf_printf(b, ", \"fit_all\": ");
        js_fit(b, &a->depth.fit_r[s < RD_MAX_RFIT ? s : 0]);
        rd_strbuf_printf(b, ", \"fit_deeper_half\": ");
        js_fit(b, &a->depth.fit_r_deep[s < RD_MAX_RFIT ? s : 0]);
        rd_strbuf_printf(b, "}");
    }
}

/* the gradients at the first recorded backward (null: none) */
static void json_gradients(sb *b, const rd_analysis *a)
{
    int L = a->load.n_layers, P = a->load.n_layer_params;
    rd_strbuf_printf(b, "],\n  \"gradients\": ");
    if (a->gradients.step < 0) {
        rd_strbuf_printf(b, "null");
    } else {
        rd_strbuf_printf(b, "{\"step\": %lld, \"params\": [",
                         (long long)a->load.steps[a->gradients.step]);
        for (int i = 0; i < a->gradients.n_order; i++) {
            int p = a->gradients.param_order[i];
            rd_strbuf_printf(b, "%s\n    {\"name\": ", i ? "," : "");
            js_str(b, a->load.param_names[p]);
            rd_strbuf_printf(b, ", \"norm\": ");
            js_array(b, a->gradients.grad + p, L, P);
            rd_strbuf_printf(b, ", \"last_over_first\": ");
            js_num(b, a->gradients.grad[p] > 0
                          ? a->gradients.grad[(size_t)(L - 1) * P + p] / a->gradients.grad[p]
                          : NAN);
            rd_strbuf_printf(b, ", \"loglog_fit\": ");
            js_fit(b, &a->gradients.fit_grad[p]);
            rd_strbuf_printf(b, "}");
        }
        rd_strbuf_printf(b, "],\n    \"stream\": ");
        js_array(b, a->gradients.sgrad, L, 1);
        rd_strbuf_printf(b, ", \"stream_embed\": ");
        js_num(b, a->gradients.sgrad_embed);
        rd_strbuf_printf(b, ", \"stream_last_over_first\": ");
        js_num(b, a->gradients.sgrad[0] > 0 ? a->gradients.sgrad[L - 1] / a->gradients.sgrad[0]
                                            : NAN);
        rd_strbuf_printf(b, ", \"stream_loglog_fit\": ");
        js_fit(b, &a->gradients.fit_sgrad);
        rd_strbuf_printf(b, ", \"head\": ");
        js_num(b, a->gradients.head_grad);
        /* the head parameter's name, or "logits" */
        rd_strbuf_printf(b, ", \"head_source\": ");
        js_str(b, rd_head_name(a) ? rd_head_name(a) : "logits");
        rd_strbuf_printf(b, "}");
    }
}

/* the first non-finite value (null: none) */
static void json_nonfinite(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(b, ",\n  \"nonfinite\": ");
    if (!a->nonfinite.found) {
        rd_strbuf_printf(b, "null");
    } else {
        rd_strbuf_printf(b, "{\"step\": %lld, \"layer\": %d, \"sublayer\": ",
                         (long long)a->nonfinite.step, a->nonfinite.layer);
        if (a->nonfinite.layer == RESDIAG_MODEL_LEVEL || a->nonfinite.site < 0)
            rd_strbuf_printf(b, "null");
        else
            js_str(b, a->load.sublayer_names[a->nonfinite.sub]);
        rd_strbuf_printf(b, ", \"site\": ");
        if (a->nonfinite.site < 0)
            rd_strbuf_printf(b, "null");
        else
            js_str(b, resdiag_site_name((resdiag_site)a->nonfinite.site));
        rd_strbuf_printf(b, ", \"param\": ");
        if (a->nonfinite.site >= 0)
            rd_strbuf_printf(b, "null");
        else if (a->nonfinite.layer != RESDIAG_MODEL_LEVEL && a->nonfinite.param >= 0)
            js_str(b, a->load.param_names[a->nonfinite.param]);
        else
            js_str(b, a->nonfinite.model_param);
        rd_strbuf_printf(
            b,
            ", \"direction\": \"%s\", \"nan\": %.0f, \"inf\": %.0f, \"steps_affected\": "
            "%lld, \"nan_total\": %.0f, \"inf_total\": %.0f, \"step_aborted\": %s}",
            a->nonfinite.dir == RESDIAG_FORWARD ? "forward" : "backward", a->nonfinite.nan_count,
            a->nonfinite.inf_count, (long long)a->nonfinite.n_bad_steps, a->nonfinite.nan_total,
            a->nonfinite.inf_total,
            rd_analysis_step_aborted(a, a->nonfinite.step_index) ? "true" : "false");
    }
}

/* the first and the last complete step side by side */
static void json_training(sb *b, const rd_analysis *a)
{
    int S = a->load.n_sublayers;
    rd_strbuf_printf(
        b, ",\n  \"training\": {\"first_step\": %lld, \"last_step\": %lld, \"growth\": [",
        (long long)a->load.steps[a->aborted.first_index],
        (long long)a->load.steps[a->aborted.last_index]);
    js_num(b, a->training.growth[0]);
    rd_strbuf_printf(b, ", ");
    js_num(b, a->training.growth[1]);
    rd_strbuf_printf(b, "], \"mean_r\": [");
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        rd_strbuf_printf(b, "%s{\"sublayer\": ", s ? ", " : "");
        js_str(b, a->load.sublayer_names[s]);
        rd_strbuf_printf(b, ", \"first\": ");
        js_num(b, a->training.mean_r[0][s]);
        rd_strbuf_printf(b, ", \"last\": ");
        js_num(b, a->training.mean_r[1][s]);
        rd_strbuf_printf(b, "}");
    }
    rd_strbuf_printf(b, "], \"grad_param\": ");
    js_str(b, a->gradients.n_order > 0 ? a->load.param_names[a->gradients.param_order[0]] : "");
    rd_strbuf_printf(b, ", \"grad_last_over_first\": [");
    js_num(b, a->training.grad_ratio[0]);
    rd_strbuf_printf(b, ", ");
    js_num(b, a->training.grad_ratio[1]);
    rd_strbuf_printf(b, "]}");
}

/* A metric's value: the trainer's own number, so NaN and +-Inf are kept,
 * as the strings that proto3's JSON mapping uses for them (strict parsers
 * take no literal); null where it gave none. */
static void js_metric(sb *b, double v)
{
    if (!rd_metric_is_given(v))
        rd_strbuf_printf(b, "null");
    else if (isnan(v))
        rd_strbuf_printf(b, "\"NaN\"");
    else if (isinf(v))
        rd_strbuf_printf(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        js_num(b, v);
}

/* the trainer's metrics: each one's value at every recorded step, and the
 * step numbers they belong to */
static void json_metrics(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(b, ",\n  \"metric_steps\": [");
    for (int64_t i = 0; a->metrics.count > 0 && i < a->load.n_steps; i++)
        rd_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)a->load.steps[i]);
    rd_strbuf_printf(b, "],\n  \"metrics\": {");
    for (int m = 0; m < a->metrics.count; m++) {
        rd_strbuf_printf(b, "%s\n    ", m ? "," : "");
        js_str(b, a->metrics.names[m]);
        rd_strbuf_printf(b, ": [");
        for (int64_t i = 0; i < a->load.n_steps; i++) {
            if (i)
                rd_strbuf_printf(b, ", ");
            js_metric(b, a->metrics.values[(size_t)m * (size_t)a->load.n_steps + (size_t)i]);
        }
        rd_strbuf_printf(b, "]");
    }
    rd_strbuf_printf(b, "}");
}

/* the warnings */
static void json_warnings(sb *b, const rd_analysis *a)
{
    rd_strbuf_printf(b, ",\n  \"warnings\": [");
    for (int i = 0; i < a->warnings.count; i++) {
        rd_strbuf_printf(b, "%s\n    ", i ? "," : "");
        js_str(b, a->warnings.lines[i]);
    }
    /* where each holds, in the same order: null for the judged step alone */
    rd_strbuf_printf(b, "],\n  \"warnings_at\": [");
    for (int i = 0; i < a->warnings.count; i++) {
        const rd_warning_at *w = &a->warnings.at[i];
        rd_strbuf_printf(b, "%s\n    ", i ? "," : "");
        if (!w->set) {
            rd_strbuf_printf(b, "null");
            continue;
        }
        rd_strbuf_printf(b, "{\"first_step\": %lld, \"worst_step\": %lld, ",
                         (long long)w->first_step, (long long)w->worst_step);
        if (w->n)
            rd_strbuf_printf(b, "\"steps\": %lld, \"of_steps\": %lld}", (long long)w->n,
                             (long long)w->of_steps);
        else
            rd_strbuf_printf(b, "\"steps\": null, \"of_steps\": null}");
    }
    rd_strbuf_printf(b, "]\n}\n");
}

char *resdiag_analysis_to_json(const resdiag_analysis *a)
{
    if (!a)
        return NULL;
    sb b = { 0 };
    json_run(&b, a);
    json_steps(&b, a);
    json_observed(&b, a);
    json_placement(&b, a);
    json_layers(&b, a);
    json_stream(&b, a);
    json_gradients(&b, a);
    json_nonfinite(&b, a);
    json_training(&b, a);
    json_metrics(&b, a);
    rd_ranks_json(&b, a);
    rd_consequences_json(&b, a);
    json_warnings(&b, a);
    return rd_strbuf_finish(&b);
}
