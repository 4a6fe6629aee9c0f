/*
 * plot.c - the figures of a run (plot.h): what the analysis computed, drawn
 * with the SVG writer. Depth k counts the stream: x_0 is the embedding,
 * x_k (k = 1..L) leaves layer k-1; per-layer quantities sit at k = layer+1,
 * the x the analysis fits against.
 */
#include "render/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "common/log.h"
#include "format/format.h"
#include "render/shared.h"

/* Figure geometry: the plot area, then the legend column to its right. */
#define FIG_W PLOT_FIG_W
#define FIG_H PLOT_FIG_H
#define AREA_X PLOT_AREA_X
#define AREA_Y PLOT_AREA_Y
#define LEGEND_W PLOT_LEGEND_W
#define AREA_W PLOT_AREA_W
#define AREA_H PLOT_AREA_H

static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                       "#8c564b", "#e377c2", "#17becf", "#bcbd22" };
#define N_PALETTE (sizeof palette / sizeof palette[0])
#define REF_COLOR "#555555"

const char *resdiag_figure_name(resdiag_figure figure)
{
    static const char *const names[RESDIAG_N_FIGURES] = { "growth", "updates", "gradients",
                                                                  "loss" };
    return (unsigned)figure < RESDIAG_N_FIGURES ? names[figure] : "?";
}

/* The style of series c (a palette index) of run i of n. One run: the
 * series' colour, solid with circles. Several (the diff page): colour means
 * the run in every figure (A palette[0], B palette[1], ...), and the
 * series are told apart by dash and marker (distinct for every c used). */
static svg_style run_style(int n, int i, int c)
{
    svg_style st = { palette[c % N_PALETTE], 0, 1, 0, 0 };
    if (n > 1) {
        st.color = palette[i % N_PALETTE];
        st.dash = c % 3;
        st.marker = 1 + c % 4;
    }
    return st;
}

static void label_of(char *out, size_t n, const char *const *names, int nrun, int i,
                     const char *what)
{
    if (nrun > 1 && names && names[i])
        snprintf(out, n, "%s: %s", names[i], what);
    else
        snprintf(out, n, "%s", what);
}

/* data-key of run i: the run's name first when there are several ("A/..."). */
static const char *key_of(char *out, size_t n, const char *const *names, int nrun, int i,
                          const char *key)
{
    if (nrun > 1 && names && names[i])
        snprintf(out, n, "%s/%s", names[i], key);
    else
        snprintf(out, n, "%s", key);
    return out;
}

/* A depth axis spans exactly the layers drawn: padding to a tick value
 * would leave empty room right of the last layer. */
static void depth_axis(svg_axis *ax, double lo, double hi, int log)
{
    ax->log = log;
    ax->lo = lo;
    ax->hi = hi > lo ? hi : lo + 1;
}

static void begin_doc(svg_buf *b, const char *title)
{
    svg_doc_begin(b, FIG_W, FIG_H, title);
}

/* ------------------------------------------------------------- growth */

/* Below this R² a fit of a run whose stream energy is not flat is called
 * poor in the figure. */
#define POOR_R2 0.5

/* The fitted ||x_k||^2 = a + b k as sqrt(a + b k), only over the data's own
 * k and where a + b k > 0; not drawn when the intercept is not positive
 * (the stream energy cannot be negative: the line then describes the data
 * badly), and the figure says so, as it says when the fit is poor. */
static void growth_fit(svg_plot *p, const rd_analysis *r, const char *color)
{
    const rd_fit *f = &r->depth.fit_energy;
    char text[SVG_NOTE_BYTES];
    if (f->n < 2 || !isfinite(f->a) || !isfinite(f->b))
        return;
    if (!(f->a > 0)) {
        snprintf(text, sizeof text, "fit √(a + b·k) not drawn: its intercept a = %.4g is "
                 "negative, so a + b·k describes the data badly", f->a);
        svg_note(p, text);
        return;
    }
    int k0 = 0, k1 = 0; /* the first and last k = 1..L with a value */
    for (int k = 1; k <= r->load.n_layers; k++)
        if (isfinite(r->depth.xnorm[k])) {
            k0 = k0 ? k0 : k;
            k1 = k;
        }
    if (k1 <= k0)
        return;
    enum { NS = 64 };
    double fx[NS], fy[NS];
    for (int j = 0; j < NS; j++) {
        fx[j] = k0 + (k1 - k0) * (double)j / (NS - 1);
        double e = f->a + f->b * fx[j];
        fy[j] = e > 0 ? sqrt(e) : NAN;
    }
    svg_style fs = { color, 1, 0, 1.4, 0 };
    snprintf(text, sizeof text, "fit √(a + b·k), b = %.3g", f->b);
    svg_series(p, fx, fy, NS, &fs, "fit.energy", text);
    if (f->y_spread >= RD_FLAT_SPREAD && isfinite(f->r2) && f->r2 < POOR_R2) {
        snprintf(text, sizeof text, "the fit √(a + b·k) is poor: R² = %.2f", f->r2);
        svg_note(p, text);
    }
}

static int fig_growth(svg_buf *b, const rd_analysis *const *a, const char *const *names, int n)
{
    int kmax = 0, any = 0;
    svg_axis ax, ay;
    double *all = NULL;
    size_t m = 0;
    for (int i = 0; i < n; i++)
        kmax = a[i]->load.n_layers > kmax ? a[i]->load.n_layers : kmax;
    all = malloc(((size_t)kmax + 3) * n * sizeof *all);
    if (!all)
        return -1;
    double dmax = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= a[i]->load.n_layers; k++) {
            all[m++] = a[i]->depth.xnorm[k];
            any |= isfinite(a[i]->depth.xnorm[k]);
            if (isfinite(a[i]->depth.xnorm[k]))
                dmax = fmax(dmax, a[i]->depth.xnorm[k]);
        }
    if (!any) {
        free(all);
        return -1;
    }
    /* the sqrt(d) level joins the axis when it is near the data; far
     * above, it would flatten the curves, and a note says so instead */
    for (int i = 0; i < n; i++)
        if (sqrt((double)a[i]->load.d_model) <= 3 * dmax)
            all[m++] = sqrt((double)a[i]->load.d_model);
    depth_axis(&ax, 0, kmax, 0);
    svg_axis_range(&ay, all, m, 0, 1);
    free(all);
    begin_doc(b, "Residual stream norm over depth");
    svg_plot p;
    svg_plot_begin(&p, b, AREA_X, AREA_Y, AREA_W, AREA_H, &ax, &ay, 1,
                   "Residual stream norm over depth",
                   "depth k (x₀ = embedding, x_k leaves layer k−1)",
                   "‖x_k‖, mean per-token L2 norm");
    char label[96];
    for (int i = 0; i < n; i++) {
        const rd_analysis *r = a[i];
        int L = r->load.n_layers;
        double *k = malloc(((size_t)L + 1) * sizeof *k);
        if (!k)
            break;
        for (int j = 0; j <= L; j++)
            k[j] = j;
        svg_style st = run_style(n, i, i);
        label_of(label, sizeof label, names, n, i, "‖x_k‖ measured");
        char key[200];
        svg_series(&p, k, r->depth.xnorm, (size_t)L + 1, &st,
                   key_of(key, sizeof key, names, n, i, "stream.norm"), label);
        free(k);
        /* ||x_k||^2 = a + b k fitted to the mean squared token norm */
        if (n == 1)
            growth_fit(&p, r, palette[i % N_PALETTE]);
    }
    for (int i = 0; i < n; i++) {
        int same = 0;
        for (int j = 0; j < i; j++)
            same |= a[j]->load.d_model == a[i]->load.d_model;
        if (same)
            continue;
        svg_style rs = { REF_COLOR, 2, 0, 1.4, 0 };
        double sd = sqrt((double)a[i]->load.d_model);
        snprintf(label, sizeof label, "√d = %.3g: post-norm", sd);
        svg_hline(&p, sd, &rs, "ref.sqrt_d", label); /* listed only when drawn */
        if (svg_axis_map(&p.ay, sd) < p.y - 1e-6) {
            snprintf(label, sizeof label, "√d = %.3g (post-norm level) lies above the frame",
                     sd);
            svg_note(&p, label);
        }
    }
    for (int i = 0; i < n; i++) {
        const rd_analysis *r = a[i];
        if (r->nonfinite.found && r->nonfinite.step == r->load.step && r->nonfinite.layer >= 0 &&
            r->nonfinite.site >= 0) {
            label_of(label, sizeof label, names, n, i, "first non-finite value");
            svg_highlight(&p, r->nonfinite.layer + 1, r->depth.xnorm[r->nonfinite.layer + 1],
                          label);
        }
    }
    svg_plot_end(&p, AREA_X + AREA_W + 16);
    svg_doc_end(b);
    return 0;
}


/* The layer numbers k = 1..L of a per-layer curve in *k, and room for one
 * curve's values in *col; 0 (nothing allocated) when memory is short. */
static int layer_columns(int L, double **k, double **col)
{
    *k = malloc((size_t)L * sizeof **k);
    *col = malloc((size_t)L * sizeof **col);
    if (!*k || !*col) {
        free(*k);
        free(*col);
        return 0;
    }
    for (int l = 0; l < L; l++)
        (*k)[l] = l + 1;
    return 1;
}
/* ------------------------------------------------------------- updates */

static int fig_updates(svg_buf *b, const rd_analysis *const *a, const char *const *names, int n)
{
    int kmax = 1, any = 0;
    size_t m = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        kmax = a[i]->load.n_layers > kmax ? a[i]->load.n_layers : kmax;
        cap += (size_t)a[i]->load.n_layers * a[i]->load.n_sublayers;
    }
    double *all = malloc((cap + 3) * sizeof *all);
    if (!all)
        return -1;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < (size_t)a[i]->load.n_layers * a[i]->load.n_sublayers; j++) {
            all[m++] = a[i]->placement.r[j];
            any |= a[i]->placement.r[j] > 0 && isfinite(a[i]->placement.r[j]);
        }
    if (!any) {
        free(all);
        return -1;
    }
    /* the 1/sqrt(k) reference through the centre (in log-log) of the first
     * sublayer's points, kept inside the axes: a slope to compare with */
    double slr = 0, slk = 0, ref_c = NAN;
    int nr = 0, S0 = a[0]->load.n_sublayers;
    for (int l = 0; l < a[0]->load.n_layers; l++) {
        double v = a[0]->placement.r[(size_t)l * S0];
        if (v > 0 && isfinite(v)) {
            slr += log(v);
            slk += log(l + 1.0);
            nr++;
        }
    }
    if (nr > 0) {
        ref_c = exp(slr / nr + 0.5 * slk / nr);
        all[m++] = ref_c;
        all[m++] = ref_c / sqrt(kmax);
    }
    svg_axis ax, ay;
    depth_axis(&ax, 1, kmax, 1);
    svg_axis_range(&ay, all, m, 1, 0);
    begin_doc(b, "Relative updates per layer");
    svg_plot p;
    svg_plot_begin(&p, b, AREA_X, AREA_Y, AREA_W, AREA_H, &ax, &ay, 1,
                   "Relative updates r_k = ‖Δx‖/‖x‖ per sublayer (log-log)",
                   "layer k = layer index + 1 (log scale)", "r_k (ratio, log scale)");
    char label[200], key[200];
    for (int i = 0; i < n; i++) {
        const rd_analysis *r = a[i];
        int L = r->load.n_layers, S = r->load.n_sublayers;
        double *k, *col;
        if (!layer_columns(L, &k, &col))
            break;
        for (int s = 0; s < S; s++) {
            for (int l = 0; l < L; l++)
                col[l] = r->placement.r[(size_t)l * S + s];
            svg_style st = run_style(n, i, s);
            label_of(label, sizeof label, names, n, i, r->load.sublayer_names[s]);
            char what[96];
            snprintf(what, sizeof what, "updates.%s", r->load.sublayer_names[s]);
            svg_series(&p, k, col, (size_t)L, &st, key_of(key, sizeof key, names, n, i, what),
                       label);
            /* the fitted power law r = e^a k^b: a straight line here */
            const rd_fit *f = s < RD_MAX_RFIT ? &r->depth.fit_r[s] : NULL;
            if (n == 1 && f && f->n >= 2 && isfinite(f->a) && isfinite(f->b)) {
                double fx[2] = { 1, L }, fy[2] = { exp(f->a), exp(f->a) * pow(L, f->b) };
                svg_style fs = { palette[s % N_PALETTE], 1, 0, 1.3, 0 };
                snprintf(label, sizeof label, "%.12s fit, slope %+.2f", r->load.sublayer_names[s],
                         f->b);
                snprintf(key, sizeof key, "fit.%s", r->load.sublayer_names[s]);
                svg_series(&p, fx, fy, 2, &fs, key, label);
            }
        }
        free(k);
        free(col);
    }
    if (isfinite(ref_c)) {
        enum { NS = 2 };
        double fx[NS] = { 1, kmax }, fy[NS] = { ref_c, ref_c / sqrt(kmax) };
        svg_style rs = { REF_COLOR, 2, 0, 1.4, 0 };
        svg_series(&p, fx, fy, NS, &rs, "ref.inv_sqrt_k", "1/√k: slope −½ (pre-norm)");
    }
    free(all);
    svg_plot_end(&p, AREA_X + AREA_W + 16);
    svg_doc_end(b);
    return 0;
}

/* ------------------------------------------------------------- gradients */

int plot_draws_prenorm_reference(const rd_analysis *a)
{
    return a->verdict.v == RESDIAG_VERDICT_PRE || a->verdict.v == RESDIAG_VERDICT_SANDWICH ||
           a->verdict.v == RESDIAG_VERDICT_PRE_OR_SANDWICH;
}

/* The pre-norm reference into col (L): the first layer's gradient of
 * parameter pi scaled by ||x_1|| / ||x_k||; 0 when there is none. */
static int prenorm_reference(const rd_analysis *r, int pi, double *col)
{
    int L = r->load.n_layers;
    if (!plot_draws_prenorm_reference(r) || !(r->gradients.grad[pi] > 0) ||
        !(r->depth.xnorm[1] > 0))
        return 0;
    for (int l = 0; l < L; l++)
        col[l] = r->gradients.grad[pi] * r->depth.xnorm[1] / r->depth.xnorm[l + 1];
    return 1;
}

/* Colours of the per-layer parameters' gradients (the stream's is
 * palette[2], the head's palette[3]). */
static const int param_color[] = { 0, 1, 4, 5, 6, 7 };
#define N_PARAM_COLORS (sizeof param_color / sizeof param_color[0])

/* 1 when run r has a head gradient to draw as its one point. */
static int has_head(const rd_analysis *r)
{
    return r->gradients.step >= 0 && isfinite(r->gradients.head_grad) &&
           r->gradients.head_grad > 0;
}

/* The values the gradient figure draws, for its y range: every recorded
 * per-layer parameter gradient, the stream's, the head's and the pre-norm
 * reference of a single run. NULL when memory is short. */
static double *gradient_values(const rd_analysis *const *a, int n, size_t *m)
{
    size_t cap = 0;
    for (int i = 0; i < n; i++)
        cap += (size_t)(a[i]->gradients.n_order + 2) * a[i]->load.n_layers + 1;
    double *all = malloc((cap + 1) * sizeof *all);
    if (!all)
        return NULL;
    *m = 0;
    for (int i = 0; i < n; i++) {
        const rd_analysis *r = a[i];
        if (r->gradients.step < 0)
            continue;
        int L = r->load.n_layers, P = r->load.n_layer_params;
        for (int l = 0; l < L; l++) {
            for (int j = 0; j < r->gradients.n_order; j++)
                all[(*m)++] = r->gradients.grad[(size_t)l * P + r->gradients.param_order[j]];
            all[(*m)++] = r->gradients.sgrad[l];
        }
        all[(*m)++] = r->gradients.head_grad;
        if (n == 1 && r->gradients.n_order > 0 &&
            prenorm_reference(r, r->gradients.param_order[0], all + *m))
            *m += (size_t)L;
    }
    return all;
}

/* The curves of run i: one per recorded per-layer parameter (the residual
 * writer first), the pre-norm reference, the stream's gradient, and the
 * head's gradient as one point at k = L + 1. */
static void gradient_series(svg_plot *p, const rd_analysis *r, const char *const *names, int n,
                            int i, double *k, double *col)
{
    int L = r->load.n_layers, P = r->load.n_layer_params;
    char label[200], key[200], what[96];
    for (int j = 0; j < r->gradients.n_order; j++) {
        int pi = r->gradients.param_order[j];
        for (int l = 0; l < L; l++)
            col[l] = r->gradients.grad[(size_t)l * P + pi];
        svg_style st = run_style(n, i, param_color[j % N_PARAM_COLORS]);
        if (j > 0)
            st.width = 1.2; /* the residual writer stands out */
        snprintf(what, sizeof what, "‖∇%.24s‖", r->load.param_names[pi]);
        label_of(label, sizeof label, names, n, i, what);
        snprintf(what, sizeof what, "gradients.%s", r->load.param_names[pi]);
        svg_series(p, k, col, (size_t)L, &st, key_of(key, sizeof key, names, n, i, what), label);
        /* Xiong et al.: pre-norm gradients fall like 1/||x_k|| from the
         * first layer; drawn for the placements that theory is about */
        if (j == 0 && n == 1 && prenorm_reference(r, pi, col)) {
            svg_style rs = { REF_COLOR, 2, 0, 1.4, 0 };
            svg_series(p, k, col, (size_t)L, &rs, "ref.inv_xnorm", "pre-norm: ∝ 1/‖x_k‖ (Xiong)");
        }
    }
    svg_style st = run_style(n, i, 2);
    label_of(label, sizeof label, names, n, i, "‖∂L/∂x_k‖ stream");
    svg_series(p, k, r->gradients.sgrad, (size_t)L, &st,
               key_of(key, sizeof key, names, n, i, "gradients.stream"), label);
    if (has_head(r)) {
        /* several runs: the run's colour, and B's diamond right of A's (a
         * factor 1.08 of k, ~13 px, more than a diamond's 10) so that equal
         * heads do not hide each other */
        svg_style hs = { palette[3], 0, 4, 0, 1 };
        double hk = L + 1;
        if (n > 1) {
            hs.color = palette[i % N_PALETTE];
            hk *= pow(1.08, i);
        }
        if (rd_head_name(r))
            snprintf(what, sizeof what, "‖∇%.24s‖ output head", rd_head_name(r));
        else
            snprintf(what, sizeof what, "‖∂L/∂logits‖ output head");
        label_of(label, sizeof label, names, n, i, what);
        svg_point(p, hk, r->gradients.head_grad, &hs,
                  key_of(key, sizeof key, names, n, i, "gradients.head"), label);
    }
}

static int fig_gradients(svg_buf *b, const rd_analysis *const *a, const char *const *names,
                         int n)
{
    int kmax = 1, any = 0, head = 0;
    size_t m = 0;
    for (int i = 0; i < n; i++) {
        kmax = a[i]->load.n_layers > kmax ? a[i]->load.n_layers : kmax;
        head |= has_head(a[i]);
    }
    double *all = gradient_values(a, n, &m);
    if (!all)
        return -1;
    for (size_t j = 0; j < m; j++)
        any |= all[j] > 0 && isfinite(all[j]);
    if (!any) {
        free(all);
        return -1;
    }
    svg_axis ax, ay;
    /* the head sits one place right of the last layer, off the frame */
    depth_axis(&ax, 1, head ? (kmax + 1) * 1.1 : kmax, 1);
    svg_axis_range(&ay, all, m, 1, 0);
    free(all);
    begin_doc(b, "Gradients per layer");
    svg_plot p;
    svg_plot_begin(&p, b, AREA_X, AREA_Y, AREA_W, AREA_H, &ax, &ay, 1,
                   "Gradients per layer at the first recorded backward (log-log)",
                   head ? "layer k = layer index + 1 (log scale); head at k = L + 1"
                        : "layer k = layer index + 1 (log scale)",
                   "gradient norm (Frobenius, log scale)");
    for (int i = 0; i < n; i++) {
        if (a[i]->gradients.step < 0)
            continue;
        double *k, *col;
        if (!layer_columns(a[i]->load.n_layers, &k, &col))
            break;
        gradient_series(&p, a[i], names, n, i, k, col);
        free(k);
        free(col);
    }
    svg_plot_end(&p, AREA_X + AREA_W + 16);
    svg_doc_end(b);
    return 0;
}

int plot_figure(svg_buf *b, resdiag_figure what, const struct resdiag_analysis *const *a,
                const char *const *names, int n)
{
    /* draw into a scratch buffer: a figure without data leaves nothing */
    svg_buf t = { 0 };
    int rc = what == RESDIAG_FIGURE_GROWTH      ? fig_growth(&t, a, names, n)
             : what == RESDIAG_FIGURE_UPDATES   ? fig_updates(&t, a, names, n)
             : what == RESDIAG_FIGURE_GRADIENTS ? fig_gradients(&t, a, names, n)
             : what == RESDIAG_FIGURE_LOSS      ? plot_loss_figure(&t, a, names, n)
                                      : -1;
    if (rc == 0 && !t.failed)
        svg_printf(b, "%s", t.s);
    else if (t.failed)
        b->failed = 1;
    free(t.s);
    return rc;
}

/* ------------------------------------------------------------- heat maps */

void plot_heat_free(plot_heat *h)
{
    if (h->sub_names)
        for (int s = 0; s < h->n_sub; s++)
            free(h->sub_names[s]);
    free(h->sub_names);
    free(h->col_x);
    free(h->col_step);
    free(h->r);
    free(h->growth);
    memset(h, 0, sizeof *h);
}

/* The mean token norm of the stream leaving each layer l at step index si,
 * where the analysis looks for it: the last sublayer's STREAM_OUT, else the
 * next layer's STREAM_IN, else (last layer) the final norm's input in
 * model (the step's model sites); x (L). Read site by site: only the
 * values the map shows, never a whole step's statistics. */
static int heat_stream_norms(const resdiag_reader *rd, int64_t si, int L, int S,
                             const double *model, double *x)
{
    double f[RESDIAG_N_FIELDS];
    int rc;
    for (int l = 0; l < L; l++) {
        if ((rc = resdiag_reader_site(rd, si, RESDIAG_FORWARD, l, S - 1, RESDIAG_STREAM_OUT, f,
                                      NULL)))
            return rc;
        x[l] = f[RESDIAG_FIELD_TOK_NORM_MEAN];
    }
    for (int l = 0; l < L; l++) {
        if (!isnan(x[l]))
            continue;
        if (l + 1 < L) {
            if ((rc = resdiag_reader_site(rd, si, RESDIAG_FORWARD, l + 1, 0, RESDIAG_STREAM_IN,
                                          f, NULL)))
                return rc;
            x[l] = f[RESDIAG_FIELD_TOK_NORM_MEAN];
        } else {
            x[l] = model[(RESDIAG_FINAL_NORM_IN - RESDIAG_EMBED_OUT) * RESDIAG_N_FIELDS +
                         RESDIAG_FIELD_TOK_NORM_MEAN];
        }
    }
    return 0;
}

int plot_heat_read(const resdiag_reader *rd, int max_cols, int max_cells, plot_heat *h)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int L = in->n_layers, S = in->n_sublayers, F = RESDIAG_N_FIELDS;
    int64_t N = in->n_steps;
    memset(h, 0, sizeof *h);
    if (N < 1 || L < 1)
        return RESDIAG_E_INVALID;
    int64_t C = N < max_cols ? N : max_cols;
    if (C > max_cells / L)
        C = max_cells / L > 0 ? max_cells / L : 1;
    h->rows = L;
    h->cols = (int)C;
    h->n_sub = S;
    h->training = in->run_kind == RESDIAG_RUN_TRAINING;
    int64_t *steps = malloc((size_t)N * sizeof *steps);
    double *upd = malloc((size_t)L * S * RESDIAG_N_UPDATE_FIELDS * sizeof *upd);
    double *model = malloc((size_t)RESDIAG_N_MODEL_SITES * F * sizeof *model);
    double *x = malloc((size_t)L * sizeof *x);
    h->sub_names = calloc((size_t)S, sizeof *h->sub_names);
    h->col_x = malloc(((size_t)C + 1) * sizeof *h->col_x);
    h->col_step = malloc((size_t)C * sizeof *h->col_step);
    h->r = malloc((size_t)S * L * C * sizeof *h->r);
    h->growth = malloc((size_t)L * C * sizeof *h->growth);
    int rc = RESDIAG_E_NOMEM;
    if (!steps || !upd || !model || !x || !h->sub_names || !h->col_x || !h->col_step ||
        !h->r || !h->growth)
        goto out;
    for (int s = 0; s < S; s++)
        if (!(h->sub_names[s] = strdup(in->sublayer_names[s])))
            goto out;
    if ((rc = resdiag_reader_steps(rd, steps, N)))
        goto out;
    for (int64_t c = 0; c < C; c++) {
        /* evenly spaced over the records, first and last included */
        int64_t si = C > 1 ? (int64_t)llround((double)c * (N - 1) / (C - 1)) : 0;
        h->col_step[c] = steps[si];
        h->col_x[c] = (double)steps[si];
        if ((rc = resdiag_reader_read(rd, RD_DS_UPDATE, si, 1, upd,
                                      (size_t)L * S * RESDIAG_N_UPDATE_FIELDS)) ||
            (rc = resdiag_reader_read(rd, RD_DS_FWD_MODEL_STATS, si, 1, model,
                                      (size_t)RESDIAG_N_MODEL_SITES * F)))
            goto out;
        for (int l = 0; l < L; l++)
            for (int s = 0; s < S; s++)
                h->r[((size_t)s * L + l) * C + c] =
                    upd[((size_t)l * S + s) * RESDIAG_N_UPDATE_FIELDS + RESDIAG_UPDATE_RATIO_FROB];
        if ((rc = heat_stream_norms(rd, si, L, S, model, x)))
            goto out;
        double x1 = NAN;
        for (int l = 0; l < L && isnan(x1); l++)
            if (x[l] > 0 && isfinite(x[l]))
                x1 = x[l];
        for (int l = 0; l < L; l++)
            h->growth[(size_t)l * C + c] = x[l] / x1;
    }
    /* the last column is as wide as the mean spacing (one step when alone) */
    double last = h->col_x[C - 1];
    h->col_x[C] = last + (C > 1 ? (last - h->col_x[0]) / (double)(C - 1) : 1);
    rc = 0;
out:
    free(steps);
    free(upd);
    free(model);
    free(x);
    if (rc)
        plot_heat_free(h);
    return rc;
}

void plot_heat_figure(svg_buf *b, const plot_heat *h, int64_t mark_step)
{
    /* the growth map starts at layer 1: layer 0's ratio is 1 by definition */
    int growth_rows = h->rows - 1;
    int maps = h->n_sub + (growth_rows > 0);
    double mh = h->rows <= 24 ? 150 : h->rows <= 48 ? 220 : 300; /* map height */
    double gap = 90, top = 40;
    double H = top + maps * (mh + gap) - 20;
    double mx = AREA_X, mw = FIG_W - AREA_X - 150;
    svg_doc_begin(b, FIG_W, H, "Layer x step heat maps");
    double mark = mark_step >= 0 ? (double)mark_step : NAN;
    const char *over = h->training ? "training" : "the recorded steps";
    char title[160], key[96];
    for (int s = 0; s < maps; s++) {
        double y = top + s * (mh + gap);
        if (s < h->n_sub) {
            snprintf(title, sizeof title, "Relative update r of %.40s per layer over %s",
                     h->sub_names[s], over);
            snprintf(key, sizeof key, "heat.updates.%s", h->sub_names[s]);
            svg_heatmap(b, mx, y, mw, mh, h->r + (size_t)s * h->rows * h->cols, h->rows, 0,
                        h->cols, h->col_x, 1, mx + mw + 14, title,
                        h->training ? "training step" : "step", "layer", "r (log colour)", mark,
                        key);
        } else {
            snprintf(title, sizeof title, "Stream growth ‖x_k‖/‖x_1‖ per layer over %s "
                     "(layer 0: 1 by definition)", over);
            svg_heatmap(b, mx, y, mw, mh, h->growth + h->cols, growth_rows, 1, h->cols, h->col_x,
                        1, mx + mw + 14, title, h->training ? "training step" : "step", "layer",
                        "growth (log)", mark, "heat.growth");
        }
    }
    svg_doc_end(b);
}

resdiag_status resdiag_analysis_figure_svg(const resdiag_analysis *a, resdiag_figure figure,
                                           char **svg)
{
    static const char fn[] = "resdiag_analysis_figure_svg";
    if (svg)
        *svg = NULL;
    if (!a || !svg) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: %s is NULL", fn,
               a ? "svg" : "the analysis");
        return RESDIAG_E_NULL;
    }
    if ((unsigned)figure >= RESDIAG_N_FIGURES) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: no figure %d", fn, (int)figure);
        return RESDIAG_E_INVALID;
    }
    svg_buf b = { 0 };
    const rd_analysis *one[1] = { a };
    if (plot_figure(&b, figure, one, NULL, 1) != 0 && !b.failed) {
        free(b.s);
        return RESDIAG_E_NOT_FOUND;
    }
    if (!(*svg = svg_finish(&b))) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: out of memory", fn);
        return RESDIAG_E_NOMEM;
    }
    return RESDIAG_OK;
}
