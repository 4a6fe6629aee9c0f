/*
 * test-html-svg.c - the SVG writer of the figures (lib/render/svg.c): text
 * escaping, the axis transform and its ranges, and the ticks read back
 * from the written SVG: on step axes of 1 to 100,000 steps and layer axes
 * of 2 to 96 layers, linear and log, every label sits where its value maps,
 * labels never overlap, and log axes put decades at equal distances;
 * colour bars label four or more values; a legend lists only what is drawn
 * (a reference line off the chart is left out; a single value is a point).
 * Then the public calls over a stream-only run written here: the growth
 * figure draws the per-token norms computed here, the pages hold what
 * their options ask for, dump prints the steps asked for, and every bad
 * call gets its status.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resdiag.h>

#include "check-one.h"
#include "fixture.h"
#include "render/svg.h"
#include "svg-axis.h"

#define CHAR_W 6.6 /* the writer's width estimate of a character */

typedef struct label {
    double x, y, v;
    char text[32];
} label;

/* The tick labels of group `cls` ("xticks", "yticks") of the first plot or
 * heat map in s; returns how many. */
static int read_labels(const char *s, const char *cls, label *out, int max)
{
    char open[64];
    snprintf(open, sizeof open, "<g class=\"%s\">", cls);
    const char *p = strstr(s, open);
    ck_assert_ptr_nonnull(p);
    const char *end = strstr(p, "</g>");
    ck_assert_ptr_nonnull(end);
    int n = 0;
    while ((p = strstr(p, "<text ")) && p < end && n < max) {
        label *l = &out[n];
        int used = 0;
        ck_assert_int_eq(sscanf(p, "<text x=\"%lf\" y=\"%lf\" text-anchor=\"%*[a-z]\" "
                                   "data-v=\"%lf\">%31[^<]</text>%n",
                                &l->x, &l->y, &l->v, l->text, &used),
                         4);
        p += used;
        n++;
    }
    return n;
}

/* The label's text is its value, and the value maps to where it sits. */
static void check_label_values(const label *l, int n, const svg_axis *ax, int horizontal)
{
    for (int i = 0; i < n; i++) {
        double shown = strtod(l[i].text, NULL);
        ck_assert_msg(fabs(shown - l[i].v) <= 1e-9 * fmax(1, fabs(l[i].v)),
                      "label '%s' for value %.17g", l[i].text, l[i].v);
        double px = horizontal ? l[i].x : l[i].y - 11 * 0.35;
        /* independent transform, for the check */
        double t = ax->log ? (log10(l[i].v) - log10(ax->lo)) / (log10(ax->hi) - log10(ax->lo))
                           : (l[i].v - ax->lo) / (ax->hi - ax->lo);
        double want = ax->p0 + t * (ax->p1 - ax->p0);
        ck_assert_msg(fabs(px - want) < 2e-3, "label %s at %.3f, expected %.3f", l[i].text, px,
                      want);
        ck_assert(t >= -1e-9 && t <= 1 + 1e-9);
    }
}

static void check_no_overlap(const label *l, int n, int horizontal)
{
    for (int i = 0; i + 1 < n; i++) {
        if (horizontal) {
            double gap = fabs(l[i + 1].x - l[i].x);
            double need = (strlen(l[i].text) + strlen(l[i + 1].text)) * CHAR_W / 2;
            ck_assert_msg(gap >= need, "labels %s and %s: %.1f px apart, need %.1f", l[i].text,
                          l[i + 1].text, gap, need);
        } else {
            ck_assert_msg(fabs(l[i + 1].y - l[i].y) >= 12, "labels %s and %s overlap",
                          l[i].text, l[i + 1].text);
        }
    }
}

START_TEST(svg_escape_makes_text_safe)
{
    svg_buf b = { 0 };
    svg_escape(&b, "a<b & 'c' \"d\">\x01");
    char *s = svg_finish(&b);
    ck_assert_str_eq(s, "a&lt;b &amp; &#39;c&#39; &quot;d&quot;&gt;\xef\xbf\xbd");
    free(s);
}
END_TEST

START_TEST(svg_axis_map_is_linear_or_log10)
{
    svg_axis a = { 0, -2, 8, 100, 600 };
    ck_assert(fabs(svg_axis_map(&a, 3) - 350) < 1e-12);
    ck_assert(isnan(svg_axis_map(&a, NAN)));
    svg_axis g = { 1, 0.01, 100, 500, 100 };
    ck_assert(fabs(svg_axis_map(&g, 1) - 300) < 1e-9);
    ck_assert(fabs(svg_axis_map(&g, 10) - 200) < 1e-9);
    ck_assert(isnan(svg_axis_map(&g, 0)));
    ck_assert(isnan(svg_axis_map(&g, -1)));
}
END_TEST

START_TEST(svg_axis_range_covers_data_with_tick_values)
{
    const double v[] = { 0.013, 0.4, NAN, 7.5, -3 };
    svg_axis a;
    svg_axis_range(&a, v, 5, 1, 0); /* log: whole decades around the positive values */
    ck_assert(fabs(a.lo - 0.01) < 1e-15 && fabs(a.hi - 10) < 1e-12);
    svg_axis_range(&a, v, 5, 0, 1); /* linear: -3 .. 7.5 and 3% more, to a step of 0.5 */
    ck_assert(a.lo <= -3 && a.hi >= 7.5);
    ck_assert(fabs(a.lo - (-3.5)) < 1e-12 && fabs(a.hi - 8) < 1e-12);
    const double z[] = { 0.16, 0.18 };
    svg_axis_range(&a, z, 2, 0, 1);
    ck_assert(a.lo == 0 && a.hi >= 0.18 && a.hi <= 0.2 + 1e-12);
    svg_axis_range(&a, z, 0, 1, 0); /* no data */
    ck_assert(a.lo == 1 && a.hi == 10);
}
END_TEST

/* A line at the data's max or min (a head gradient of exactly 1, a
 * stream norm on a tick) is drawn inside the frame, not under its edge. */
START_TEST(svg_axis_range_keeps_edge_values_inside_the_frame)
{
    const double dec[] = { 0.1, 0.5, 1.0 }, on_ticks[] = { 2, 6, 10 }, inside[] = { 0.013, 7.5 };
    struct {
        const double *v;
        size_t n;
        int log, zero_based;
    } cases[] = { { dec, 3, 1, 0 }, { on_ticks, 3, 0, 0 }, { on_ticks, 3, 0, 1 }, { dec + 2, 1, 1, 0 },
                  { inside, 2, 1, 0 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        svg_axis a;
        svg_axis_range(&a, cases[c].v, cases[c].n, cases[c].log, cases[c].zero_based);
        a.p0 = 300; /* a y axis: lo at the bottom */
        a.p1 = 0;
        for (size_t i = 0; i < cases[c].n; i++) {
            double y = svg_axis_map(&a, cases[c].v[i]);
            ck_assert_msg(y > 0.01 * 300 && y < 0.99 * 300,
                          "case %zu: %g at pixel %g of 0..300 (range %g..%g): on the frame", c,
                          cases[c].v[i], y, a.lo, a.hi);
        }
    }
    /* data clear of the edges keep the tick range they had */
    svg_axis a;
    svg_axis_range(&a, inside, 2, 1, 0);
    ck_assert(fabs(a.lo - 0.01) < 1e-15 && fabs(a.hi - 10) < 1e-12);
}
END_TEST

/* The axis hugs the data: it contains them, spans at most 1.5 times their
 * span (on a log axis under two decades their log span, plus 0.05 decade;
 * over two, a decade more at most on each side), and is not below 0 for
 * non-negative data. Steps 0..199 once gave -50..250, 0.2..1.6 0.1..10. */
START_TEST(svg_axis_range_hugs_the_data)
{
    static double steps[200];
    for (int i = 0; i < 200; i++)
        steps[i] = i;
    static const double grads[] = { 0.2, 0.55, 1.6 }, narrow[] = { 1.0000000521, 1.0034748 },
                        wide[] = { 0.013, 7.5 }, small[] = { 2e-5, 3e-3 }, mixed[] = { -3, 7.5 },
                        far[] = { 1000, 1003 }, norms[] = { 0.16, 0.18 }, ticks[] = { 2, 6, 10 };
    struct {
        const double *v;
        size_t n;
        int log, zero_based;
    } cases[] = { { steps, 200, 0, 0 }, { steps, 200, 0, 1 }, { steps + 10, 190, 0, 0 },
                  { grads, 3, 1, 0 },   { narrow, 2, 1, 0 },  { wide, 2, 1, 0 },
                  { small, 2, 1, 0 },   { mixed, 2, 0, 0 },   { far, 2, 0, 0 },
                  { norms, 2, 0, 1 },   { norms, 2, 0, 0 },   { ticks, 3, 0, 0 },
                  { grads, 3, 0, 0 },   { narrow, 2, 0, 0 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < cases[c].n; i++) {
            lo = fmin(lo, cases[c].v[i]);
            hi = fmax(hi, cases[c].v[i]);
        }
        svg_axis a;
        svg_axis_range(&a, cases[c].v, cases[c].n, cases[c].log, cases[c].zero_based);
        ck_assert_msg(a.lo <= lo && a.hi >= hi, "case %zu: %g..%g outside %g..%g", c, lo, hi,
                      a.lo, a.hi);
        if (cases[c].log) {
            double span = log10(hi / lo), got = log10(a.hi / a.lo);
            if (span < 2)
                ck_assert_msg(got <= 1.5 * span + 0.05,
                              "case %zu: %g..%g on an axis %g..%g (%g decades for %g)", c, lo,
                              hi, a.lo, a.hi, got, span);
            else
                ck_assert(a.lo > lo / 10 && a.hi < hi * 10);
        } else {
            if (cases[c].zero_based && lo >= 0)
                lo = 0;
            ck_assert_msg(a.hi - a.lo <= 1.5 * (hi - lo), "case %zu: %g..%g on an axis %g..%g",
                          c, lo, hi, a.lo, a.hi);
            if (lo >= 0)
                ck_assert_msg(a.lo >= 0, "case %zu: non-negative data on an axis from %g", c,
                              a.lo);
        }
    }
}
END_TEST

/* One black series (xs, ys) (n) on the axes ax, ay: the SVG (the plot,
 * with the axes as drawn, in *p). */
static char *one_series_plot(svg_plot *p, const svg_axis *ax, const svg_axis *ay,
                             const double *xs, const double *ys, size_t n)
{
    svg_buf b = { 0 };
    svg_plot_begin(p, &b, 84, 40, 444, 278, ax, ay, 1, "t", "k", "y");
    svg_style st = { "#000", 0, 1, 0, 0 };
    svg_series(p, xs, ys, n, &st, "k", "series");
    svg_plot_end(p, 544);
    return svg_finish(&b);
}

/* A log axis under two decades is labelled with 1-2-5 values inside the
 * data's range (0.2 0.5 1 for gradients 0.2..1.6), not with two decades. */
START_TEST(svg_log_axis_under_two_decades_labels_1_2_5)
{
    static const double grads[] = { 0.2, 0.55, 1.6 };
    svg_axis ax = { 0, 0, 10, 0, 0 }, ay;
    svg_axis_range(&ay, grads, 3, 1, 0);
    svg_plot p;
    static const double xs[3] = { 0, 5, 10 };
    char *s = one_series_plot(&p, &ax, &ay, xs, grads, 3);
    label l[128];
    int n = read_labels(s, "yticks", l, 128);
    check_label_values(l, n, &p.ay, 0);
    check_no_overlap(l, n, 0);
    static const double want[] = { 0.2, 0.5, 1 };
    ck_assert_int_ge(n, 3);
    for (int k = 0; k < 3; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= fabs(l[i].v - want[k]) < 1e-12;
        ck_assert_msg(found, "no label %g on the axis %g..%g", want[k], p.ay.lo, p.ay.hi);
    }
    for (int i = 0; i < n; i++)
        ck_assert_msg(l[i].v >= 0.15 && l[i].v <= 2, "label %s far outside 0.2..1.6",
                      l[i].text);
    free(s);
}
END_TEST

/* Heat maps over 1 .. 100,000 steps and 2 .. 96 layers. */
START_TEST(svg_heatmap_ticks_readable_for_any_length)
{
    static const long steps[] = { 1, 2, 3, 7, 10, 99, 100, 101, 999, 1000, 4096, 12345,
                                  65536, 99999, 100000 };
    static const int layers[] = { 2, 3, 12, 13, 48, 95, 96 };
    for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
        for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
            long N = steps[si];
            int L = layers[li], C = N < 500 ? (int)N : 500;
            double *cx = malloc((C + 1) * sizeof *cx), *v = malloc((size_t)L * C * sizeof *v);
            for (int c = 0; c <= C; c++)
                cx[c] = C > 1 ? (double)c * (N - 1) / (C - 1) : c;
            if (C > 1)
                cx[C] = cx[C - 1] + (double)(N - 1) / (C - 1);
            for (int i = 0; i < L * C; i++)
                v[i] = 1e-3 * (1 + i % 17);
            svg_buf b = { 0 };
            svg_heatmap(&b, 84, 40, 546, 150, v, L, 0, C, cx, 1, 644, "t", "step", "layer", "r",
                        NAN, "k");
            char *s = svg_finish(&b);
            ck_assert_ptr_nonnull(s);
            label l[128];
            svg_axis ax = { 0, cx[0], cx[C], 84, 84 + 546 };
            int n = read_labels(s, "xticks", l, 128);
            ck_assert_msg(n >= 2 || C == 1, "%ld steps: %d labels", N, n);
            ck_assert(n >= 1);
            check_label_values(l, n, &ax, 1);
            check_no_overlap(l, n, 1);
            svg_axis ay = { 0, -0.5, L - 0.5, 190, 40 };
            n = read_labels(s, "yticks", l, 128);
            ck_assert_int_ge(n, 2);
            check_label_values(l, n, &ay, 0);
            check_no_overlap(l, n, 0);
            for (int i = 0; i < n; i++)
                ck_assert(l[i].v == floor(l[i].v) && l[i].v >= 0 && l[i].v <= L - 1);
            free(s);
            free(cx);
            free(v);
        }
}
END_TEST

/* The labels of a heat map's colour bar: value, position. */
static int read_colorbar_labels(const char *s, label *out, int max)
{
    const char *p = strstr(s, "<g class=\"colorbar\"");
    ck_assert_ptr_nonnull(p);
    int n = 0;
    while ((p = strstr(p, "<text x=")) && n < max) {
        label *l = &out[n];
        int used = 0;
        if (sscanf(p, "<text x=\"%lf\" y=\"%lf\" data-v=\"%lf\">%31[^<]</text>%n", &l->x, &l->y,
                   &l->v, l->text, &used) != 4)
            break; /* the bar's axis label */
        p += used;
        n++;
    }
    return n;
}

/* Colour bars of ranges from a few per mille to 15 decades, log and
 * linear: four or more labels, each where the bar's axis maps its value,
 * its text its value, never overlapping, the bottom and the top labelled. */
START_TEST(svg_colorbar_labels_several_values)
{
    static const double ranges[][2] = {
        { 0.00273, 0.4496 }, { 0.004945, 0.1314 }, { 1.0000000521, 1.0034748 }, { 1.18, 5.8e14 },
        { 0.0123, 0.345 }, { 1, 10 }, { 0.95, 1.05 }, { 2e-5, 3e-3 }, { 1, 2 }, { 0.5, 60 },
    };
    for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++)
        for (int log_c = 0; log_c <= 1; log_c++) {
            double cx[3] = { 0, 1, 2 }, v[4] = { ranges[ri][0], ranges[ri][1], ranges[ri][0],
                                                 ranges[ri][1] };
            svg_buf b = { 0 };
            svg_heatmap(&b, 84, 40, 546, 150, v, 2, 0, 2, cx, log_c, 644, "t", "step", "layer",
                        "c", NAN, "k");
            char *s = svg_finish(&b);
            ck_assert_ptr_nonnull(s);
            label l[128];
            int n = read_colorbar_labels(s, l, 128);
            ck_assert_msg(n >= 4, "[%g, %g] %s: %d labels", ranges[ri][0], ranges[ri][1],
                          log_c ? "log" : "linear", n);
            svg_axis ac = { log_c, ranges[ri][0], ranges[ri][1], 190, 40 };
            check_label_values(l, n, &ac, 0);
            check_no_overlap(l, n, 0);
            /* both ends labelled: a label within 2 px of the bar's bottom
             * (190) and of its top (40), its value within 1% of the end's */
            int bottom = 0, top = 0;
            for (int i = 0; i < n; i++) {
                double py = l[i].y - 11 * 0.35;
                bottom |= fabs(py - 190) <= 2;
                top |= fabs(py - 40) <= 2;
            }
            ck_assert_msg(bottom && top, "[%g, %g] %s: bottom %slabelled, top %slabelled",
                          ranges[ri][0], ranges[ri][1], log_c ? "log" : "linear",
                          bottom ? "" : "not ", top ? "" : "not ");
            free(s);
        }
}
END_TEST

/* A reference line off the chart is neither drawn nor listed; a point is
 * one marker at its pixel, listed with no line. */
START_TEST(svg_legend_lists_only_what_is_drawn)
{
    svg_buf b = { 0 };
    svg_plot p;
    svg_axis ax = { 0, 0, 10, 0, 0 }, ay = { 0, 0, 1, 0, 0 };
    svg_plot_begin(&p, &b, 10, 10, 100, 100, &ax, &ay, 0, NULL, NULL, NULL);
    svg_style st = { "#123456", 2, 0, 0, 0 };
    svg_hline(&p, 5, &st, "off", "above the chart");
    ck_assert_int_eq(p.n_legend, 0);
    svg_hline(&p, 0.5, &st, "on", "inside");
    ck_assert_int_eq(p.n_legend, 1);
    svg_style pt = { "#654321", 0, 4, 0, 1 };
    svg_point(&p, 7, 0.25, &pt, "one", "one value");
    svg_point(&p, 70, 0.25, &pt, "outside", "not drawn");
    ck_assert_int_eq(p.n_legend, 2);
    ck_assert(p.legend_style[1].no_line);
    svg_plot_end(&p, 120);
    char *s = svg_finish(&b);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(strstr(s, "data-key=\"off\""));
    ck_assert_ptr_null(strstr(s, "above the chart"));
    ck_assert_ptr_null(strstr(s, "data-key=\"outside\""));
    const char *q = strstr(s, "<path class=\"point\"");
    ck_assert_ptr_nonnull(q);
    double px, py;
    ck_assert_int_eq(sscanf(q, "<path class=\"point\" data-px=\"%lf\" data-py=\"%lf\"", &px, &py), 2);
    ck_assert(fabs(px - (10 + 70)) < 1e-3 && fabs(py - (110 - 25)) < 1e-3);
    /* the point's legend entry: its marker, no line of its colour */
    const char *legend = strstr(s, "<g class=\"legend\">");
    ck_assert_ptr_nonnull(legend);
    ck_assert_ptr_null(strstr(legend, "stroke=\"#654321\""));
    ck_assert_ptr_nonnull(strstr(legend, "fill=\"#654321\""));
    free(s);
}
END_TEST

/* Layer axes 1..L on log scales and 0..L on linear ones, L = 2 .. 96, and
 * y values over many decades. */
START_TEST(svg_plot_ticks_readable_linear_and_log)
{
    for (int L = 2; L <= 96; L++)
        for (int log = 0; log < 2; log++) {
            svg_axis ax = { log, log ? 1 : 0, L, 0, 0 };
            double yv[2] = { 1e-6 * L, 3e-2 * L * L };
            svg_axis ay;
            svg_axis_range(&ay, yv, 2, log, 0);
            svg_plot p;
            double xs[2] = { ax.lo, ax.hi };
            char *s = one_series_plot(&p, &ax, &ay, xs, yv, 2);
            label l[128];
            int n = read_labels(s, "xticks", l, 128);
            ck_assert_int_ge(n, 2);
            check_label_values(l, n, &p.ax, 1);
            check_no_overlap(l, n, 1);
            for (int i = 0; i < n; i++)
                ck_assert_msg(l[i].v == floor(l[i].v), "L %d: label %s is no layer", L,
                              l[i].text);
            n = read_labels(s, "yticks", l, 128);
            ck_assert_int_ge(n, 2);
            check_label_values(l, n, &p.ay, 0);
            check_no_overlap(l, n, 0);
            if (log) {
                /* decades at equal distances */
                double first = NAN, gap = NAN;
                int decades = 0;
                for (int i = 0; i < n; i++) {
                    double e = log10(l[i].v);
                    if (fabs(e - round(e)) > 1e-9)
                        continue;
                    if (decades == 1)
                        gap = l[i].y - first;
                    else if (decades > 1)
                        ck_assert(fabs((l[i].y - first) / decades - gap) < 1e-2);
                    if (decades == 0)
                        first = l[i].y;
                    decades++;
                }
                ck_assert_int_ge(decades, 2);
            }
            /* the series' end points are where the axes put them */
            const char *q = strstr(s, "points=\"");
            ck_assert_ptr_nonnull(q);
            double x0, y0, x1, y1;
            ck_assert_int_eq(sscanf(q, "points=\"%lf,%lf %lf,%lf\"", &x0, &y0, &x1, &y1), 4);
            ck_assert(fabs(x0 - 84) < 1e-3 && fabs(x1 - 528) < 1e-3);
            free(s);
        }
}
END_TEST

START_TEST(svg_legend_labels_are_cut_whole)
{
    svg_buf b = { 0 };
    svg_plot p;
    svg_axis ax = { 0, 0, 1, 0, 0 }, ay = { 0, 0, 1, 0, 0 };
    svg_plot_begin(&p, &b, 10, 10, 100, 100, &ax, &ay, 0, NULL, NULL, NULL);
    svg_style st = { "#000", 0, 0, 0, 0 };
    /* 40 characters of two bytes each: cut to 29 and an ellipsis */
    char lab[128] = "";
    for (int i = 0; i < 40; i++)
        strcat(lab, "\xc3\xa9");
    svg_hline(&p, 0.5, &st, NULL, lab);
    ck_assert_int_eq(strlen(p.legend[0]), 29 * 2 + 3);
    ck_assert(memcmp(p.legend[0] + 58, "\xe2\x80\xa6", 3) == 0);
    svg_plot_end(&p, 120);
    free(svg_finish(&b));
}
END_TEST

START_TEST(svg_ramp_runs_dark_to_light)
{
    char a[8], z[8], m[8];
    svg_ramp(0, a);
    svg_ramp(1, z);
    svg_ramp(NAN, m);
    ck_assert_str_eq(a, "#26185a");
    ck_assert_str_eq(z, "#fae628");
    ck_assert_str_eq(m, a);
}
END_TEST

/* ------------------------------------------------------ the public calls */

#define RUN_L 4
#define RUN_D 16
#define RUN_ROWS 6
#define RUN_STEPS 3

/* The stream leaving layer k - 1 (k = 0: the embedding) at a step: row i
 * column j is (k + 1) (1 + (3i + 5j) mod 7) / 4, whatever the step. */
static float stream_value(int k, int i, int j)
{
    return (float)((k + 1) * (1 + (3 * i + 5 * j) % 7) / 4.0);
}

/* The mean over rows of the per-token L2 norm of that stream. */
static double stream_norm(int k)
{
    double sum = 0;
    for (int i = 0; i < RUN_ROWS; i++) {
        double ss = 0;
        for (int j = 0; j < RUN_D; j++)
            ss += (double)stream_value(k, i, j) * stream_value(k, i, j);
        sum += sqrt(ss);
    }
    return sum / RUN_ROWS;
}

static char run_dir[256]; /* the program's scratch directory */
static char run_path[300];

/* Written once, before the tests fork; 0, or -1 when it cannot be. */
static int write_stream_run(void)
{
    snprintf(run_path, sizeof run_path, "%s/run.h5", run_dir);
    static const char *const names[1] = { "blk" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = RUN_L, .cols = RUN_D,
        .sublayers = 1, .sublayer_names = names });
    resdiag *r = NULL;
    if (resdiag_open(&r, run_path, &m, NULL) != RESDIAG_OK)
        return -1;
    static float x[RUN_ROWS * RUN_D];
    int bad = 0;
    for (int step = 0; step < RUN_STEPS; step++) {
        bad |= resdiag_step_begin(r, step) != RESDIAG_OK;
        for (int k = 0; k <= RUN_L; k++) {
            for (int i = 0; i < RUN_ROWS; i++)
                for (int j = 0; j < RUN_D; j++)
                    x[i * RUN_D + j] = stream_value(k, i, j);
            resdiag_tensor t = resdiag_f32(x, RUN_ROWS, RUN_D);
            bad |= (k == 0 ? RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, t)
                           : RESDIAG_FWD(r, k - 1, 0, RESDIAG_STREAM_OUT, t)) != RESDIAG_OK;
        }
        bad |= resdiag_step_end(r) != RESDIAG_OK;
    }
    bad |= resdiag_close(r) != RESDIAG_OK;
    resdiag_destroy(r);
    return bad ? -1 : 0;
}

static resdiag_reader *run_reader;
static resdiag_analysis *run_analysis;

static void open_stream_run(void)
{
    ck_assert_int_eq(resdiag_reader_open(&run_reader, run_path), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analyze(run_reader, NULL, &run_analysis), RESDIAG_OK);
}

static void close_stream_run(void)
{
    resdiag_analysis_destroy(run_analysis);
    resdiag_reader_destroy(run_reader);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}


START_TEST(figure_svg_draws_the_stream_norms)
{
    open_stream_run();
    char *svg = NULL;
    ck_assert_int_eq(resdiag_analysis_figure_svg(run_analysis, RESDIAG_FIGURE_GROWTH, &svg),
                     RESDIAG_OK);
    ck_assert_ptr_nonnull(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    double ax[4], ay[4];
    read_axis(svg, "x", ax);
    read_axis(svg, "y", ay);
    ck_assert(ax[0] == 0 && ax[1] == RUN_L);
    const char *p = strstr(svg, "data-key=\"stream.norm\" points=\"");
    ck_assert_ptr_nonnull(p);
    p += strlen("data-key=\"stream.norm\" points=\"");
    for (int k = 0; k <= RUN_L; k++) {
        double px, py;
        int used = 0;
        ck_assert_int_eq(sscanf(p, "%lf,%lf%n", &px, &py, &used), 2);
        p += used;
        ck_assert_double_eq_tol(px, axis_pixel(ax, k), 2e-3);
        ck_assert_double_eq_tol(py, axis_pixel(ay, stream_norm(k)), 2e-3);
    }
    ck_assert_int_eq(*p, '"');
    resdiag_free(svg);
    /* a run without backward has no gradient figure; nothing is returned */
    svg = (char *)1;
    ck_assert_int_eq(resdiag_analysis_figure_svg(run_analysis, RESDIAG_FIGURE_GRADIENTS, &svg),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_ptr_null(svg);
    ck_assert_int_eq(resdiag_analysis_figure_svg(run_analysis, RESDIAG_N_FIGURES, &svg),
                     RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_analysis_figure_svg(run_analysis, (resdiag_figure)-1, &svg),
                     RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_analysis_figure_svg(NULL, RESDIAG_FIGURE_GROWTH, &svg),
                     RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_analysis_figure_svg(run_analysis, RESDIAG_FIGURE_GROWTH, NULL),
                     RESDIAG_E_NULL);
    ck_assert_str_eq(resdiag_figure_name(RESDIAG_FIGURE_GROWTH), "growth");
    ck_assert_str_eq(resdiag_figure_name(RESDIAG_FIGURE_UPDATES), "updates");
    ck_assert_str_eq(resdiag_figure_name(RESDIAG_FIGURE_GRADIENTS), "gradients");
    ck_assert_str_eq(resdiag_figure_name(RESDIAG_N_FIGURES), "?");
    close_stream_run();
}
END_TEST

START_TEST(html_page_holds_what_its_options_ask)
{
    open_stream_run();
    /* no options: the defaults, no heat maps without the reader */
    char *page = resdiag_analysis_to_html(run_analysis, NULL);
    ck_assert_ptr_nonnull(page);
    ck_assert_ptr_nonnull(strstr(page, "<title>resdiag report: run</title>"));
    ck_assert_ptr_nonnull(strstr(page, "<figure id=\"growth\">"));
    ck_assert_ptr_null(strstr(page, "id=\"heatmaps\""));
    ck_assert_ptr_nonnull(strstr(page, "</html>\n"));
    resdiag_free(page);
    resdiag_html_options o;
    resdiag_html_options_init(&o);
    ck_assert_uint_eq(o.struct_size, sizeof o);
    o.run_name = "a<b>&\x1b";
    o.reader = run_reader;
    page = resdiag_analysis_to_html(run_analysis, &o);
    ck_assert_ptr_nonnull(page);
    ck_assert_ptr_nonnull(strstr(page, "<title>resdiag report: a&lt;b&gt;&amp;"));
    ck_assert_ptr_null(strstr(page, "\x1b"));
    ck_assert_int_eq(count(page, "id=\"heatmaps\""), 1);
    resdiag_free(page);
    /* an older caller's struct (only struct_size) is read with the defaults;
     * a size past the struct's is refused */
    o.struct_size = sizeof(size_t);
    page = resdiag_analysis_to_html(run_analysis, &o);
    ck_assert_ptr_nonnull(strstr(page, "<title>resdiag report: run</title>"));
    resdiag_free(page);
    o.struct_size = sizeof o + 1;
    ck_assert_ptr_null(resdiag_analysis_to_html(run_analysis, &o));
    o.struct_size = 0;
    ck_assert_ptr_null(resdiag_analysis_to_html(run_analysis, &o));
    ck_assert_ptr_null(resdiag_analysis_to_html(NULL, NULL));
    /* the diff page: both names, both figures on one axis, the text inside */
    page = resdiag_analysis_diff_html(run_analysis, run_analysis, "first", NULL);
    ck_assert_ptr_nonnull(page);
    ck_assert_ptr_nonnull(strstr(page, "A = first<br/>B = B</p>"));
    ck_assert_ptr_nonnull(strstr(page, "data-key=\"A/stream.norm\""));
    ck_assert_ptr_nonnull(strstr(page, "data-key=\"B/stream.norm\""));
    ck_assert_ptr_nonnull(strstr(page, "<pre>A = first&#10;B = B&#10;"));
    resdiag_free(page);
    ck_assert_ptr_null(resdiag_analysis_diff_html(run_analysis, NULL, NULL, NULL));
    close_stream_run();
}
END_TEST

START_TEST(dump_prints_the_steps_asked_for)
{
    open_stream_run();
    char *text = NULL;
    ck_assert_int_eq(resdiag_reader_dump(run_reader, NULL, &text), RESDIAG_OK);
    ck_assert_int_eq(strncmp(text, "run: resdiag run file, schema ", 30), 0);
    ck_assert_int_eq(count(text, "\nstep "), 1);
    ck_assert_ptr_nonnull(strstr(text, "\nstep 0 (record 1 of 3)\n"));
    /* the embedding and every layer's stream, one row each */
    ck_assert_int_eq(count(text, " stream_out "), RUN_L);
    ck_assert_int_eq(count(text, " embed_out "), 1);
    resdiag_free(text);
    resdiag_dump_options o;
    resdiag_dump_options_init(&o);
    o.run_name = "x\ny";
    o.first_index = 1;
    o.n_steps = -1;
    ck_assert_int_eq(resdiag_reader_dump(run_reader, &o, &text), RESDIAG_OK);
    ck_assert_int_eq(strncmp(text, "x\\ny: ", 6), 0);
    ck_assert_int_eq(count(text, "\nstep "), 2);
    ck_assert_ptr_nonnull(strstr(text, "\nstep 1 (record 2 of 3)\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nstep 2 (record 3 of 3)\n"));
    resdiag_free(text);
    o.first_index = RUN_STEPS;
    text = (char *)1;
    ck_assert_int_eq(resdiag_reader_dump(run_reader, &o, &text), RESDIAG_E_RANGE);
    ck_assert_ptr_null(text);
    o.first_index = 0;
    o.struct_size = sizeof o + 8;
    ck_assert_int_eq(resdiag_reader_dump(run_reader, &o, &text), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_reader_dump(NULL, NULL, &text), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_reader_dump(run_reader, NULL, NULL), RESDIAG_E_NULL);
    close_stream_run();
}
END_TEST

START_TEST(escape_text_gives_one_printable_line)
{
    char *e = resdiag_escape_text("a\nb\x1b\\c\xff");
    ck_assert_str_eq(e, "a\\nb\\x1b\\\\c\\xff");
    resdiag_free(e);
    e = resdiag_escape_text("");
    ck_assert_str_eq(e, "");
    resdiag_free(e);
    ck_assert_ptr_null(resdiag_escape_text(NULL));
}
END_TEST

static void quiet(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)msg;
    (void)user;
}

static void be_quiet(void)
{
    resdiag_set_log_handler(quiet, NULL); /* the bad calls log */
}

static int write_the_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (write_stream_run() != 0) {
        fprintf(stderr, "test-html-svg: cannot write %s\n", run_path);
        return 1;
    }
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "html-svg",
    .scratch = run_dir,
    .scratch_size = sizeof run_dir,
    .remove_files = 1,
    .prepare = be_quiet,
    .start = write_the_run,
};
CHECK_MAIN(&program,
           CHECK_CASE("svg", 120),
               CHECK_TEST(svg_escape_makes_text_safe),
               CHECK_TEST(svg_axis_map_is_linear_or_log10),
               CHECK_TEST(svg_axis_range_covers_data_with_tick_values),
               CHECK_TEST(svg_axis_range_keeps_edge_values_inside_the_frame),
               CHECK_TEST(svg_axis_range_hugs_the_data),
               CHECK_TEST(svg_log_axis_under_two_decades_labels_1_2_5),
               CHECK_TEST(svg_heatmap_ticks_readable_for_any_length),
               CHECK_TEST(svg_plot_ticks_readable_linear_and_log),
               CHECK_TEST(svg_legend_labels_are_cut_whole),
               CHECK_TEST(svg_colorbar_labels_several_values),
               CHECK_TEST(svg_legend_lists_only_what_is_drawn),
               CHECK_TEST(svg_ramp_runs_dark_to_light),
           CHECK_CASE("public", 60),
               CHECK_TEST(figure_svg_draws_the_stream_norms),
               CHECK_TEST(html_page_holds_what_its_options_ask),
               CHECK_TEST(dump_prints_the_steps_asked_for),
               CHECK_TEST(escape_text_gives_one_printable_line))
