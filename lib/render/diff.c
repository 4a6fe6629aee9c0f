/*
 * diff.c - two analyses side by side as text (resdiag_analysis_diff_text):
 * the differences that matter first, ranked, then both runs per layer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"
#include "render/consequences.h"
#include "render/shared.h"
#include "render/table.h"

/* Names from the run files go through the text escaper (escape.h). */
typedef rd_strbuf sb;
#define E(s) rd_esc_text(esc, (s))

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

/* The per-layer quantities of both runs (stream growth; per layer the
 * stream norm, each sublayer's r, the first parameter's gradient when
 * both runs name it the same) into it, which holds room for all; returns
 * how many. */
static size_t diff_items(diff_item *it, const rd_analysis *a, const rd_analysis *b, int L,
                         int S)
{
    size_t m = 0;
    double gr = log_ratio(a->depth.growth, b->depth.growth);
    if (gr == gr) {
        it[m].score = gr;
        snprintf(it[m++].text, sizeof it[0].text,
                 "stream growth ||x_L||/||x_1||: A %.4g, B %.4g (B/A %.3g)", a->depth.growth,
                 b->depth.growth, b->depth.growth / a->depth.growth);
    }
    for (int k = 1; k <= L; k++) {
        double s = log_ratio(a->depth.xnorm[k], b->depth.xnorm[k]);
        if (s == s) {
            it[m].score = s;
            snprintf(it[m++].text, sizeof it[0].text,
                     "layer %d stream ||x||: A %.4g, B %.4g (B/A %.3g)", k - 1, a->depth.xnorm[k],
                     b->depth.xnorm[k], b->depth.xnorm[k] / a->depth.xnorm[k]);
        }
        for (int s2 = 0; s2 < S; s2++) {
            double ra = a->placement.r[(k - 1) * a->load.n_sublayers + s2];
            double rb = b->placement.r[(k - 1) * b->load.n_sublayers + s2];
            double sc = log_ratio(ra, rb);
            if (sc == sc) {
                it[m].score = sc;
                snprintf(it[m++].text, sizeof it[0].text,
                         "layer %d %s update r: A %.3g, B %.3g (B/A %.3g)", k - 1,
                         a->load.sublayer_names[s2], ra, rb, rb / ra);
            }
        }
        if (a->gradients.step >= 0 && b->gradients.step >= 0 && a->gradients.n_order &&
            b->gradients.n_order) {
            int pa = a->gradients.param_order[0], pb = b->gradients.param_order[0];
            double ga = a->gradients.grad[(size_t)(k - 1) * a->load.n_layer_params + pa];
            double gb = b->gradients.grad[(size_t)(k - 1) * b->load.n_layer_params + pb];
            double sc = log_ratio(ga, gb);
            if (sc == sc && strcmp(a->load.param_names[pa], b->load.param_names[pb]) == 0) {
                it[m].score = sc;
                snprintf(it[m++].text, sizeof it[0].text,
                         "layer %d %s gradient: A %.4g, B %.4g (B/A %.3g)", k - 1,
                         a->load.param_names[pa], ga, gb, gb / ga);
            }
        }
    }
    return m;
}

/* "Differences that matter": the verdicts, the final norms, then the
 * eight per-layer quantities that differ most (above 5%). -1 when out of
 * memory. */
static int diff_ranked(sb *o, rd_esc_ring *esc, const rd_analysis *a, const rd_analysis *b,
                       int L, int S)
{
    rd_strbuf_printf(o, "\nDifferences that matter, largest first:\n");
    int n = 0;
    if (a->verdict.v != b->verdict.v || a->verdict.mix_layers != b->verdict.mix_layers)
        rd_strbuf_printf(o, "  placement: A %s, B %s\n", rd_verdict_human(a->verdict.v),
                         rd_verdict_human(b->verdict.v)),
            n++;
    if (a->final_norm.reads_norm != b->final_norm.reads_norm ||
        a->final_norm.identity != b->final_norm.identity) {
        rd_strbuf_printf(o, "  final norm: A %s, B %s\n", rd_final_norm_text(a),
                         rd_final_norm_text(b));
        n++;
    }
    diff_item *it = calloc((size_t)(L + 1) * (S + 3) + 4, sizeof *it);
    if (!it)
        return -1;
    size_t m = diff_items(it, a, b, L, S);
    qsort(it, m, sizeof *it, by_score);
    for (size_t i = 0; i < m && i < 8; i++)
        if (it[i].score > log(1.05))
            rd_strbuf_printf(o, "  %s\n", E(it[i].text)), n++;
    free(it);
    if (!n)
        rd_strbuf_printf(o, "  none above 5%%\n");
    if (a->nonfinite.found != b->nonfinite.found)
        rd_strbuf_printf(o, "  non-finite values: %s\n",
                         a->nonfinite.found ? "only in A" : "only in B");
    return 0;
}

/* Both runs per layer: the stream norm, up to four sublayers' r and the
 * first parameter's gradient, A beside B. */
static void diff_table(sb *o, const rd_analysis *a, const rd_analysis *b, int L, int S)
{
    rd_strbuf_printf(o, "\nPer layer (A | B):\n   k  %10s %10s", "||x||_A", "||x||_B");
    for (int s2 = 0; s2 < S && s2 < 4; s2++) {
        char h[200];
        rd_strbuf_printf(o, " %10s %9s",
                         rd_table_head(h, sizeof h, "r_", a->load.sublayer_names[s2], " A", 10),
                         "B");
    }
    int grads = a->gradients.step >= 0 && b->gradients.step >= 0 && a->gradients.n_order &&
                b->gradients.n_order;
    if (grads) {
        char h[200];
        rd_strbuf_printf(o, " %10s %9s",
                         rd_table_head(h, sizeof h, "",
                                       a->load.param_names[a->gradients.param_order[0]], " A",
                                       10),
                         "B");
    }
    rd_strbuf_printf(o, "\n");
    for (int k = 0; k <= L; k++) {
        rd_strbuf_printf(o, "  %2d ", k);
        rd_table_cell(o, " %10.4g", 10, a->depth.xnorm[k]);
        rd_table_cell(o, " %10.4g", 10, b->depth.xnorm[k]);
        if (k > 0) {
            for (int s2 = 0; s2 < S && s2 < 4; s2++) {
                rd_table_cell(o, " %10.3g", 10,
                              a->placement.r[(k - 1) * a->load.n_sublayers + s2]);
                rd_table_cell(o, " %9.3g", 9, b->placement.r[(k - 1) * b->load.n_sublayers + s2]);
            }
            if (grads) {
                rd_table_cell(o, " %10.4g", 10,
                              a->gradients.grad[(size_t)(k - 1) * a->load.n_layer_params +
                                                a->gradients.param_order[0]]);
                rd_table_cell(o, " %9.4g", 9,
                              b->gradients.grad[(size_t)(k - 1) * b->load.n_layer_params +
                                                b->gradients.param_order[0]]);
            }
        }
        rd_strbuf_printf(o, "\n");
    }
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
    int L = a->load.n_layers < b->load.n_layers ? a->load.n_layers : b->load.n_layers;
    int S = a->load.n_sublayers < b->load.n_sublayers ? a->load.n_sublayers : b->load.n_sublayers;
    rd_strbuf_printf(&o, "A = %s\nB = %s\n", E(na), E(nb));
    rd_strbuf_printf(&o,
                     "  A: %d layers, d_model %d, step %lld; B: %d layers, d_model %d, "
                     "step %lld%s\n",
                     a->load.n_layers, a->load.d_model, (long long)a->load.step, b->load.n_layers,
                     b->load.d_model, (long long)b->load.step,
                     a->load.n_layers != b->load.n_layers ? " - compared over the common layers"
                                                          : "");
    if (diff_ranked(&o, esc, a, b, L, S) != 0) {
        free(o.s);
        rd_esc_ring_free(&ring);
        return NULL;
    }
    diff_table(&o, a, b, L, S);
    rd_consequences_diff(&o, esc, a, b);
    rd_esc_ring_free(&ring);
    return rd_strbuf_finish(&o);
}
