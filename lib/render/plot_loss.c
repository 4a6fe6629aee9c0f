/*
 * plot_loss.c - the loss curve (RESDIAG_FIGURE_LOSS): the trainer's own
 * loss (resdiag_step_metric; the metric "loss", else the first declared)
 * over the recorded steps, drawn with the SVG writer (svg.h). Values that
 * are not finite, or were not given at a step, are not drawn; the legend
 * says how many. A long run is thinned to the lowest and the highest
 * value of each stretch of steps, so spikes stay visible.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/analysis.h"
#include "render/plot.h"

/* Points drawn per run at most: two per stretch of steps. */
#define LOSS_MAX_POINTS 4000

static const char *const loss_colors[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd" };

/* The finite values of run a's loss with their trainer steps into x, y
 * (room for LOSS_MAX_POINTS + 2): every one, or the lowest and the highest
 * of each stretch for a longer run, in step order. Returns the count;
 * *skipped the steps not drawn for want of a finite value. */
static size_t loss_points(const rd_analysis *a, int m, double *x, double *y, int64_t *skipped)
{
    const double *v = a->metrics.values + (size_t)m * (size_t)a->load.n_steps;
    int64_t n = a->load.n_steps, finite = 0;
    for (int64_t i = 0; i < n; i++)
        finite += isfinite(v[i]) != 0;
    *skipped = n - finite;
    int64_t stretch = finite <= LOSS_MAX_POINTS ? 1 : (n + LOSS_MAX_POINTS / 2 - 1)
                                                          / (LOSS_MAX_POINTS / 2);
    size_t k = 0;
    for (int64_t s = 0; s < n; s += stretch) {
        int64_t lo = -1, hi = -1;
        for (int64_t i = s; i < s + stretch && i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            if (lo < 0 || v[i] < v[lo])
                lo = i;
            if (hi < 0 || v[i] > v[hi])
                hi = i;
        }
        if (lo < 0)
            continue;
        int64_t first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
        x[k] = (double)a->load.steps[first];
        y[k++] = v[first];
        if (second != first) {
            x[k] = (double)a->load.steps[second];
            y[k++] = v[second];
        }
    }
    return k;
}

int plot_loss_figure(svg_buf *b, const struct resdiag_analysis *const *a,
                     const char *const *names, int n)
{
    size_t cap = LOSS_MAX_POINTS + 2, total = 0;
    double *x = malloc((size_t)n * cap * sizeof *x), *y = malloc((size_t)n * cap * sizeof *y);
    size_t *count = calloc((size_t)n, sizeof *count);
    int64_t *skipped = calloc((size_t)n, sizeof *skipped);
    int rc = -1;
    if (!x || !y || !count || !skipped)
        goto done;
    for (int i = 0; i < n; i++) {
        int m = rd_analysis_loss_metric(a[i]);
        if (m >= 0)
            count[i] = loss_points(a[i], m, x + (size_t)i * cap, y + (size_t)i * cap,
                                   &skipped[i]);
        total += count[i];
    }
    if (total == 0)
        goto done;
    /* both axes from every run's drawn points, packed one after the other */
    double *px = malloc(total * sizeof *px), *py = malloc(total * sizeof *py);
    if (!px || !py) {
        free(px);
        free(py);
        goto done;
    }
    size_t t = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < count[i]; j++, t++) {
            px[t] = x[(size_t)i * cap + j];
            py[t] = y[(size_t)i * cap + j];
        }
    svg_axis ax, ay;
    svg_axis_range(&ax, px, total, 0, 0);
    svg_axis_range(&ay, py, total, 0, 0);
    free(px);
    free(py);

    const char *title = "Training loss (the trainer's own value per recorded step)";
    svg_doc_begin(b, PLOT_FIG_W, PLOT_FIG_H, title);
    svg_plot p;
    svg_plot_begin(&p, b, PLOT_AREA_X, PLOT_AREA_Y, PLOT_AREA_W, PLOT_AREA_H, &ax, &ay, 1, title,
                   "training step", "loss (as the trainer computes it)");
    for (int i = 0; i < n; i++) {
        int m = rd_analysis_loss_metric(a[i]);
        if (m < 0)
            continue;
        char label[160], key[160];
        const char *run = n > 1 && names && names[i] ? names[i] : NULL;
        int len = snprintf(label, sizeof label, "%s%s%s", run ? run : "", run ? ": " : "",
                           a[i]->metrics.names[m]);
        if (skipped[i] > 0 && len > 0 && (size_t)len < sizeof label)
            snprintf(label + len, sizeof label - (size_t)len, " (%lld steps not drawn)",
                     (long long)skipped[i]);
        snprintf(key, sizeof key, "%s%smetric.%s", run ? run : "", run ? "/" : "",
                 a[i]->metrics.names[m]);
        svg_style st = { loss_colors[i % 4], i % 3, 0, 0, 0 };
        svg_series(&p, x + (size_t)i * cap, y + (size_t)i * cap, count[i], &st, key, label);
    }
    svg_plot_end(&p, PLOT_AREA_X + PLOT_AREA_W + 16);
    svg_doc_end(b);
    rc = 0;
done:
    free(x);
    free(y);
    free(count);
    free(skipped);
    return rc;
}

void plot_loss_html(svg_buf *b, const struct resdiag_analysis *a)
{
    int m = rd_analysis_loss_metric(a);
    if (m < 0)
        return;
    const rd_analysis *one[1] = { a };
    svg_printf(b, "<h2>Training loss</h2>\n<figure id=\"loss\">\n");
    if (plot_loss_figure(b, one, NULL, 1) != 0) {
        svg_printf(b, "<p>The trainer gave no finite value of its metric ‘");
        svg_escape(b, a->metrics.names[m]);
        svg_printf(b, "’.</p>\n</figure>\n");
        return;
    }
    svg_printf(b, "<figcaption>The trainer's own metric ‘");
    svg_escape(b, a->metrics.names[m]);
    svg_printf(b, "’ (given with resdiag_step_metric) at each recorded step; a step without a "
                  "finite value is not drawn.</figcaption>\n</figure>\n");
}
