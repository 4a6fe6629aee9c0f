/*
 * html.c - the report and the diff as one self-contained page each
 * (resdiag_analysis_to_html, resdiag_analysis_diff_html in resdiag.h).
 * The page is also well-formed XML (void elements closed, text escaped),
 * so that strict XML parsers read it as well as browsers.
 */
#include <resdiag.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "common/log.h"
#include "common/sized_struct.h"
#include "render/plot.h"
#include "render/consequences.h"
#include "render/ranks.h"
#include "render/shared.h"
#include "render/svg.h"

/* Heat maps: at most this many step columns, and cells per map. */
#define HEAT_MAX_COLS 500
#define HEAT_MAX_CELLS 12000

/* A number for people: "–" where there is none (NaN, Inf). Static
 * storage, four buffers in turn so that a printf may take several. */
static const char *num(double v)
{
    static char buf[4][32];
    static int k;
    k = (k + 1) % 4;
    if (isfinite(v))
        snprintf(buf[k], sizeof buf[k], "%.4g", v);
    else
        snprintf(buf[k], sizeof buf[k], "–");
    return buf[k];
}

/* escaped text */
static void tx(svg_buf *b, const char *s)
{
    svg_escape(b, s);
}

static const char *css =
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:0;background:#f4f5f7;"
    "color:#222;font-size:14px;line-height:1.45}"
    "main{max-width:820px;margin:0 auto;padding:18px 20px 40px}"
    "h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:26px 0 8px}"
    ".path{font-family:'DejaVu Sans Mono',monospace;color:#555;word-break:break-all;margin:0}"
    ".meta{color:#555;margin:4px 0 14px}"
    ".card{background:#fff;border:1px solid #d8dbe0;border-left:6px solid #4a6fa5;"
    "border-radius:6px;padding:12px 16px;margin:12px 0}"
    ".card.post{border-left-color:#b5651d}.card.unsure{border-left-color:#888}"
    ".card.bad{border-left-color:#d62728;background:#fff5f5}"
    ".card.contradicted{border-left-color:#e07b00;background:#fff6e5}"
    ".alert{color:#8a4b00;font-weight:bold;margin:0 0 8px}"
    ".verdict{font-size:24px;font-weight:bold;margin:0 0 4px}"
    ".badge{display:inline-block;font-size:12px;font-weight:normal;border-radius:10px;"
    "padding:1px 9px;margin-left:8px;background:#e6ecf5;vertical-align:middle}"
    "table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 10px 2px 0;text-align:left;"
    "vertical-align:top}th{font-weight:600;color:#444}"
    "td.num{text-align:right;font-family:'DejaVu Sans Mono',monospace}"
    ".kv{width:100%}.kv th{width:150px}.warn{color:#8a4b00}"
    "figure{background:#fff;border:1px solid #d8dbe0;border-radius:6px;margin:12px 0;"
    "padding:8px}figure svg{display:block;max-width:100%;height:auto}"
    "figcaption{color:#444;padding:4px 6px 2px;font-size:13px}"
    "pre{background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:10px;"
    "overflow-x:auto;font-size:12px}"
    "footer{color:#777;font-size:12px;margin-top:30px}";

static void page_begin(svg_buf *b, const char *title)
{
    svg_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
                  "<title>");
    tx(b, title);
    svg_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", css);
}

static void page_end(svg_buf *b)
{
    svg_printf(b, "<footer>Made by resdiag %s. One self-contained file: inline SVG and CSS, "
                  "no script, nothing loaded from the network.</footer>\n</main>\n</body>\n"
                  "</html>\n",
               resdiag_version_string());
}

static const char *card_class(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_POST:
    case RESDIAG_VERDICT_DEEPNORM:
    case RESDIAG_VERDICT_POST_FAMILY: return "card post";
    case RESDIAG_VERDICT_CANNOT_TELL:
    case RESDIAG_VERDICT_INCONSISTENT: return "card unsure";
    default: return "card";
    }
}

static void run_line(svg_buf *b, const rd_analysis *a)
{
    svg_printf(b, "<p class=\"meta\">%d layers, d_model %d, %s block of", a->load.n_layers,
               a->load.d_model,
               a->load.block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < a->load.n_sublayers; s++) {
        svg_printf(b, " ");
        tx(b, a->load.sublayer_names[s]);
    }
    svg_printf(b, "; norm %s; %s%s%lld step(s) recorded (%lld … %lld), analysed step %lld%s.",
               resdiag_norm_kind_name(a->load.norm_kind),
               rd_is_training(a) ? "" : resdiag_run_kind_name(a->load.run_kind),
               rd_is_training(a) ? "" : " run; ", (long long)a->load.n_steps,
               (long long)a->load.steps[0], (long long)a->load.steps[a->load.n_steps - 1],
               (long long)a->load.step,
               a->load.step_index != 0 || a->aborted.step_aborted ? ""
               : rd_is_training(a)                                ? " (the first: initialization)"
                                                                  : " (the first recorded)");
    if (a->load.description && a->load.description[0]) {
        svg_printf(b, " ");
        tx(b, a->load.description);
    }
    char fs[512];
    rd_file_state_sentence(fs, sizeof fs, a);
    if (fs[0]) {
        svg_printf(b, " File: ");
        tx(b, fs);
        svg_printf(b, ".");
    }
    svg_printf(b, "</p>\n");
}

/* The evidence: one row per run of layers with the same sublayer verdicts. */
static void evidence_table(svg_buf *b, const rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    if (!a->observe.use_relations) {
        svg_printf(b,
                   "<p>Less evidence: %s; the verdict rests on the normalization signature "
                   "of each layer's stream and the depth law.</p>\n",
                   a->observe.stream_only ? "only the stream was observed"
                                          : "the run has no sketches (sketch_size 0)");
        return;
    }
    svg_printf(b, "<table class=\"evidence\"><tr><th>layers</th>");
    for (int s = 0; s < S; s++) {
        svg_printf(b, "<th>");
        tx(b, a->load.sublayer_names[s]);
        svg_printf(b, "</th>");
    }
    svg_printf(b, "</tr>\n");
    int l = 0, rows = 0;
    while (l < L && rows < 24) {
        int m = rd_layer_group_end(a, l);
        if (m - l > 1)
            svg_printf(b, "<tr><td>%d–%d</td>", l, m - 1);
        else
            svg_printf(b, "<tr><td>%d</td>", l);
        for (int s = 0; s < S; s++) {
            const rd_sub *r = &a->placement.sub[l * S + s];
            svg_printf(b, "<td title=\"");
            tx(b, r->why);
            svg_printf(b, "\">");
            tx(b, rd_verdict_human(r->v));
            svg_printf(b, "</td>");
        }
        svg_printf(b, "</tr>\n");
        l = m;
        rows++;
    }
    svg_printf(b, "</table>\n");
    if (l < L)
        svg_printf(b, "<p>… and layers %d–%d (see resdiag report for all).</p>\n", l, L - 1);
}

static void verdict_card(svg_buf *b, const rd_analysis *a)
{
    /* A contradicted declaration turns the card into a warning: `report`
     * exits 0 whatever it finds, so the page must say it loudly. */
    int contradicted = rd_declared_contradicted(a);
    svg_printf(b, "<section class=\"%s\" id=\"verdict\">\n",
               contradicted ? "card contradicted" : card_class(a->verdict.v));
    if (contradicted) {
        svg_printf(b,
                   "<p class=\"alert\" id=\"declared-contradicted\">WARNING: the data "
                   "contradict the declared placement: the trainer declares %s",
                   resdiag_placement_name(a->load.declared));
        if (a->load.declared == RESDIAG_PLACEMENT_MIXED)
            svg_printf(b, " (post-norm in layers 0..%d)", a->load.declared_mix - 1);
        svg_printf(b, ", the data say ");
        tx(b, rd_verdict_human(a->verdict.v));
        svg_printf(b, ". <code>resdiag check --expect declared</code> fails on this run.</p>\n");
    }
    svg_printf(b, "<p class=\"verdict\">Placement: ");
    tx(b, rd_verdict_human(a->verdict.v));
    if (a->verdict.v == RESDIAG_VERDICT_DEEPNORM)
        svg_printf(b, ", α = %.4g", a->verdict.alpha);
    if (a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL)
        svg_printf(b, "<span class=\"badge\">confidence %s</span>",
                   resdiag_confidence_name(a->verdict.conf));
    svg_printf(b, "</p>\n<table class=\"kv\">\n");
    if (a->verdict.v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers > 0)
        svg_printf(b, "<tr><th>layers</th><td>post-norm in 0..%d, pre-norm in %d..%d</td></tr>\n",
                   a->verdict.mix_layers - 1, a->verdict.mix_layers, a->load.n_layers - 1);
    if (a->verdict.v == RESDIAG_VERDICT_PER_SUBLAYER) {
        svg_printf(b, "<tr><th>sublayers</th><td>");
        tx(b, a->verdict.pattern);
        svg_printf(b, " (in every layer)</td></tr>\n");
    }
    if (a->verdict.last_norm_is_final)
        svg_printf(b, "<tr><th>last sublayer</th><td>its norm is the final norm</td></tr>\n");
    /* the rule of resdiag check, on the card: below medium it exits 2 */
    int decides = a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL &&
                  a->verdict.v != RESDIAG_VERDICT_ZERO_BRANCHES &&
                  a->verdict.conf >= RESDIAG_CONFIDENCE_MEDIUM;
    svg_printf(b, "<tr><th>resdiag check</th><td id=\"check-decides\">%s</td></tr>\n",
               decides ? "decides (confidence medium or high)"
                       : "cannot tell: exits 2 (confidence below medium)");
    svg_printf(b, "<tr><th>final norm</th><td>%s: ", rd_final_norm_text(a));
    tx(b, a->final_norm.why);
    svg_printf(b, "</td></tr>\n");
    svg_printf(b, "<tr><th>declared</th><td>");
    if (a->load.declared == RESDIAG_PLACEMENT_UNDECLARED) {
        svg_printf(b, "nothing");
    } else {
        int agree = rd_declared_agrees(a);
        svg_printf(b, "%s – %s", resdiag_placement_name(a->load.declared),
                   agree == 1   ? "agrees with the data"
                   : agree == 0 ? "<strong>CONTRADICTED by the data</strong>"
                                : "the data cannot confirm or refute it");
    }
    svg_printf(b, "</td></tr>\n");
    if (a->verdict.why[0]) {
        svg_printf(b, "<tr><th>why</th><td>");
        tx(b, a->verdict.why);
        svg_printf(b, "</td></tr>\n");
    }
    if (a->verdict.conf_why[0] && a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL) {
        /* "medium" or "low" means a real ambiguity: say which */
        svg_printf(b, "<tr><th>confidence %s</th><td>", resdiag_confidence_name(a->verdict.conf));
        tx(b, a->verdict.conf_why);
        svg_printf(b, "</td></tr>\n");
    }
    svg_printf(b, "<tr><th>stream growth</th><td>‖x_L‖/‖x_1‖ = %s over %d layers</td></tr>\n",
               num(a->depth.growth), a->load.n_layers);
    if (a->placement.order_agree + a->placement.order_disagree)
        svg_printf(b,
                   "<tr><th>call order</th><td>%d of %d sublayers call the hooks in the order "
                   "of the verdict</td></tr>\n",
                   a->placement.order_agree,
                   a->placement.order_agree + a->placement.order_disagree);
    svg_printf(b, "</table>\n");
    evidence_table(b, a);
    svg_printf(b, "<p><strong>Warnings:</strong>%s</p>\n", a->warnings.count ? "" : " none");
    if (a->warnings.count) {
        svg_printf(b, "<ul class=\"warn\">\n");
        for (int i = 0; i < a->warnings.count; i++) {
            svg_printf(b, "<li>");
            tx(b, a->warnings.lines[i]);
            svg_printf(b, "</li>\n");
        }
        svg_printf(b, "</ul>\n");
    }
    svg_printf(b, "</section>\n");
}

/* The steps ended with resdiag_step_abort: the judged one first (shown,
 * not judged), then how many and the first few. */
static void aborted_card(svg_buf *b, const rd_analysis *a)
{
    if (a->aborted.count <= 0)
        return;
    svg_printf(b, "<section class=\"card unsure\" id=\"aborted\">\n");
    if (a->aborted.step_aborted) {
        svg_printf(b, "<p><strong>");
        tx(b, a->verdict.why);
        svg_printf(b, ".</strong></p>\n");
    }
    svg_printf(b,
               "<p>%lld step(s) aborted (resdiag_step_abort): their records are incomplete, "
               "so the first and last step and the comparisons over the run skip them:",
               (long long)a->aborted.count);
    int n = a->aborted.count < RD_ABORTED_LISTED ? (int)a->aborted.count : RD_ABORTED_LISTED;
    for (int i = 0; i < n; i++) {
        svg_printf(b, "%s step %lld", i ? "," : "",
                   (long long)a->load.steps[a->aborted.listed_index[i]]);
        if (a->aborted.listed_reason[i][0]) {
            svg_printf(b, " (");
            tx(b, a->aborted.listed_reason[i]);
            svg_printf(b, ")");
        }
    }
    if (a->aborted.count > n)
        svg_printf(b, ", and %lld more", (long long)(a->aborted.count - n));
    svg_printf(b, ".</p>\n</section>\n");
}

static void nonfinite_card(svg_buf *b, const rd_analysis *a)
{
    if (!a->nonfinite.found)
        return;
    svg_printf(b,
               "<section class=\"card bad\" id=\"nonfinite\">\n<p><strong>First non-finite "
               "value:</strong> step %lld, ",
               (long long)a->nonfinite.step);
    const char *dir = a->nonfinite.dir == RESDIAG_FORWARD ? "forward" : "backward";
    if (a->nonfinite.site < 0) {
        if (a->nonfinite.layer == RESDIAG_MODEL_LEVEL) {
            svg_printf(b, "model parameter ");
            tx(b, a->nonfinite.model_param);
            svg_printf(b, " gradient");
        } else {
            svg_printf(b, "layer %d ", a->nonfinite.layer);
            tx(b, a->nonfinite.param >= 0 && a->nonfinite.param < a->load.n_layer_params
                      ? a->load.param_names[a->nonfinite.param]
                      : "?");
            svg_printf(b, " gradient");
        }
    } else if (a->nonfinite.layer == RESDIAG_MODEL_LEVEL) {
        svg_printf(b, "model site %s, %s", resdiag_site_name((resdiag_site)a->nonfinite.site),
                   dir);
    } else {
        svg_printf(b, "layer %d ", a->nonfinite.layer);
        tx(b, a->load.sublayer_names[a->nonfinite.sub]);
        svg_printf(b, " %s, %s", resdiag_site_name((resdiag_site)a->nonfinite.site), dir);
    }
    svg_printf(b,
               " (%.0f NaN, %.0f Inf there); %lld of %lld steps affected, %.0f NaN and %.0f "
               "Inf in all. The heat maps mark this step with a red line.%s</p>\n</section>\n",
               a->nonfinite.nan_count, a->nonfinite.inf_count,
               (long long)a->nonfinite.n_bad_steps, (long long)a->load.n_steps,
               a->nonfinite.nan_total, a->nonfinite.inf_total,
               rd_analysis_step_aborted(a, a->nonfinite.step_index)
                   ? " The trainer aborted that step (resdiag_step_abort)."
                   : "");
}

static void fit_caption(svg_buf *b, const rd_fit *f, const char *what)
{
    if (f->n < 2 || isnan(f->b))
        svg_printf(b, "%s: too few points (%d). ", what, f->n);
    else if (!f->ok)
        svg_printf(b, "%s: %+.3f from %d points. ", what, f->b, f->n);
    else
        svg_printf(b, "%s: %+.3f [%+.3f, %+.3f] (95%%), R² %.3f, n = %d. ", what, f->b, f->b_lo,
                   f->b_hi, f->r2, f->n);
}

static void figure(svg_buf *b, resdiag_figure w, const rd_analysis *const *a, const char *const *names,
                   int n, const char *id)
{
    svg_printf(b, "<figure id=\"%s\">\n", id);
    if (plot_figure(b, w, a, names, n) != 0)
        svg_printf(b, "<p>No data recorded for this figure.</p>\n");
    svg_printf(b, "<figcaption>");
    if (n == 1) {
        const rd_analysis *r = a[0];
        if (w == RESDIAG_FIGURE_GROWTH) {
            char energy[256];
            rd_energy_sentence(energy, sizeof energy, &r->depth.fit_energy, 1);
            svg_printf(b, "%s. ", energy);
            fit_caption(b, &r->depth.fit_xlog, "Log-log slope of ‖x_k‖");
            svg_printf(b, "Pre-norm theory: ‖x_k‖² linear in k; post-norm: constant at √d.");
        } else if (w == RESDIAG_FIGURE_UPDATES) {
            for (int s = 0; s < r->load.n_sublayers && s < RD_MAX_RFIT; s++) {
                char what[96];
                snprintf(what, sizeof what, "%s slope", r->load.sublayer_names[s]);
                svg_buf t = { 0 };
                fit_caption(&t, &r->depth.fit_r[s], what);
                if (t.s)
                    tx(b, t.s);
                free(t.s);
            }
            svg_printf(b, "Pre-norm predicts r_k ∝ 1/√k (slope −0.5); post-norm: flat.");
        } else {
            if (r->gradients.step >= 0 && r->gradients.n_order > 0) {
                int p = r->gradients.param_order[0], L = r->load.n_layers,
                    P = r->load.n_layer_params;
                double g0 = r->gradients.grad[p], g1 = r->gradients.grad[(size_t)(L - 1) * P + p];
                svg_printf(b, "At step %lld. ", (long long)r->load.steps[r->gradients.step]);
                tx(b, r->load.param_names[p]);
                if (g0 > 0 && g1 > 0)
                    svg_printf(b, " last/first layer %s. ", num(g1 / g0));
                else
                    svg_printf(b, ": parameter gradients were zero or not available. ");
            }
            svg_printf(b, "Xiong et al. 2020: pre-norm gradients flat or falling with depth like "
                          "1/‖x_k‖%s; post-norm gradients larger near the output.",
                       plot_draws_prenorm_reference(r) ? " (dotted)" : "");
        }
    } else {
        svg_printf(b, "Both runs on the same axes: A solid with circles, B dashed with squares.");
    }
    svg_printf(b, "</figcaption>\n</figure>\n");
}

static void training_table(svg_buf *b, const rd_analysis *a)
{
    svg_printf(b,
               "<h2>Over %s</h2>\n<table><tr><th></th><th>step %lld</th><th>step %lld"
               "</th></tr>\n",
               rd_is_training(a) ? "training" : "the recorded steps",
               (long long)a->load.steps[a->aborted.first_index],
               (long long)a->load.steps[a->aborted.last_index]);
    svg_printf(b,
               "<tr><td>stream growth ‖x_L‖/‖x_1‖</td><td class=\"num\">%s</td>"
               "<td class=\"num\">%s</td></tr>\n",
               num(a->training.growth[0]), num(a->training.growth[1]));
    for (int s = 0; s < a->load.n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++) {
        svg_printf(b, "<tr><td>mean r ");
        tx(b, a->load.sublayer_names[s]);
        svg_printf(b, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td></tr>\n",
                   num(a->training.mean_r[0][s]), num(a->training.mean_r[1][s]));
    }
    svg_printf(b, "</table>\n");
}

void resdiag_html_options_init(resdiag_html_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

/* The heat maps of a run with several steps, read from rd, and the table
 * of its first and last step; -1 when they cannot be read (logged). */
static int html_over_steps(svg_buf *b, const rd_analysis *a, const resdiag_reader *rd)
{
    plot_heat h;
    if (plot_heat_read(rd, HEAT_MAX_COLS, HEAT_MAX_CELLS, &h) != 0)
        return -1;
    training_table(b, a);
    svg_printf(b, "<h2>Layers over %s</h2>\n<figure id=\"heatmaps\">\n",
               rd_is_training(a) ? "training" : "the recorded steps");
    plot_heat_figure(b, &h, a->nonfinite.found ? a->nonfinite.step : -1);
    svg_printf(b,
               "<figcaption>%d of %lld recorded steps, evenly spaced; grey = not "
               "recorded.%s</figcaption>\n</figure>\n",
               h.cols, (long long)a->load.n_steps,
               a->nonfinite.found ? " The red line is the first non-finite value." : "");
    plot_heat_free(&h);
    return 0;
}

char *resdiag_analysis_to_html(const resdiag_analysis *a, const resdiag_html_options *options)
{
    static const char fn[] = "resdiag_analysis_to_html";
    resdiag_html_options o;
    resdiag_html_options_init(&o);
    if (!a) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: the analysis is NULL", fn);
        return NULL;
    }
    if (options && rd_copy_sized(&o, sizeof o, options, options->struct_size, 0) != 0) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
               "(call resdiag_html_options_init)", fn, options->struct_size);
        return NULL;
    }
    const char *path = o.run_name ? o.run_name : "run";
    const resdiag_reader *rd = o.reader;
    svg_buf b = { 0 };
    char title[512];
    snprintf(title, sizeof title, "resdiag report: %s", path);
    page_begin(&b, title);
    svg_printf(&b, "<h1>resdiag report</h1>\n<p class=\"path\">");
    tx(&b, path);
    svg_printf(&b, "</p>\n");
    run_line(&b, a);
    verdict_card(&b, a);
    aborted_card(&b, a);
    nonfinite_card(&b, a);
    rd_ranks_html(&b, a);
    rd_consequences_html(&b, a);
    const rd_analysis *one[1] = { a };
    svg_printf(&b, "<h2>Residual stream over depth</h2>\n");
    figure(&b, RESDIAG_FIGURE_GROWTH, one, NULL, 1, "growth");
    svg_printf(&b, "<h2>Relative updates</h2>\n");
    figure(&b, RESDIAG_FIGURE_UPDATES, one, NULL, 1, "updates");
    if (rd_is_training(a) || a->gradients.step >= 0) {
        svg_printf(&b, "<h2>Gradients</h2>\n");
        figure(&b, RESDIAG_FIGURE_GRADIENTS, one, NULL, 1, "gradients");
    }
    plot_loss_html(&b, a);
    if (a->load.n_steps > 1 && rd && html_over_steps(&b, a, rd) != 0) {
        free(b.s);
        return NULL;
    }
    page_end(&b);
    char *page = svg_finish(&b);
    if (!page)
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: out of memory", fn);
    return page;
}

static void diff_row(svg_buf *b, const char *what, const char *va, const char *vb)
{
    svg_printf(b, "<tr><th>%s</th><td>", what);
    tx(b, va);
    svg_printf(b, "</td><td>");
    tx(b, vb);
    svg_printf(b, "</td></tr>\n");
}

char *resdiag_analysis_diff_html(const resdiag_analysis *a, const resdiag_analysis *b,
                                 const char *path_a, const char *path_b)
{
    if (!a || !b) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: resdiag_analysis_diff_html: an "
               "analysis is NULL");
        return NULL;
    }
    path_a = path_a ? path_a : "A";
    path_b = path_b ? path_b : "B";
    svg_buf o = { 0 };
    char title[512], va[160], vb[160];
    snprintf(title, sizeof title, "resdiag diff: %s vs %s", path_a, path_b);
    page_begin(&o, title);
    svg_printf(&o, "<h1>resdiag diff</h1>\n<p class=\"path\">A = ");
    tx(&o, path_a);
    svg_printf(&o, "<br/>B = ");
    tx(&o, path_b);
    svg_printf(&o, "</p>\n<section class=\"card\" id=\"verdict\">\n<table class=\"kv\">"
                   "<tr><th></th><th>A</th><th>B</th></tr>\n");
    snprintf(va, sizeof va, "%s (%s)", rd_verdict_human(a->verdict.v),
             resdiag_confidence_name(a->verdict.conf));
    snprintf(vb, sizeof vb, "%s (%s)", rd_verdict_human(b->verdict.v),
             resdiag_confidence_name(b->verdict.conf));
    diff_row(&o, "placement", va, vb);
    diff_row(&o, "final norm", rd_final_norm_text(a), rd_final_norm_text(b));
    snprintf(va, sizeof va, "%d layers, d_model %d", a->load.n_layers, a->load.d_model);
    snprintf(vb, sizeof vb, "%d layers, d_model %d", b->load.n_layers, b->load.d_model);
    diff_row(&o, "model", va, vb);
    snprintf(va, sizeof va, "%lld", (long long)a->load.step);
    snprintf(vb, sizeof vb, "%lld", (long long)b->load.step);
    diff_row(&o, "analysed step", va, vb);
    snprintf(va, sizeof va, "%s", num(a->depth.growth));
    snprintf(vb, sizeof vb, "%s", num(b->depth.growth));
    diff_row(&o, "growth ‖x_L‖/‖x_1‖", va, vb);
    snprintf(va, sizeof va, "%s", a->nonfinite.found ? "yes" : "none");
    snprintf(vb, sizeof vb, "%s", b->nonfinite.found ? "yes" : "none");
    diff_row(&o, "non-finite values", va, vb);
    svg_printf(&o, "</table>\n</section>\n");
    const rd_analysis *two[2] = { a, b };
    const char *names[2] = { "A", "B" };
    svg_printf(&o, "<h2>Residual stream over depth</h2>\n");
    figure(&o, RESDIAG_FIGURE_GROWTH, two, names, 2, "growth");
    svg_printf(&o, "<h2>Relative updates</h2>\n");
    figure(&o, RESDIAG_FIGURE_UPDATES, two, names, 2, "updates");
    svg_printf(&o, "<h2>Gradients</h2>\n");
    figure(&o, RESDIAG_FIGURE_GRADIENTS, two, names, 2, "gradients");
    char *text = resdiag_analysis_diff_text(a, b, path_a, path_b);
    if (text) {
        svg_printf(&o, "<h2>The differences, as resdiag diff prints them</h2>\n<pre>");
        tx(&o, text);
        svg_printf(&o, "</pre>\n");
        resdiag_free(text);
    } else {
        o.failed = 1;
    }
    page_end(&o);
    char *page = svg_finish(&o);
    if (!page)
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "resdiag_analysis_diff_html: out of memory");
    return page;
}
