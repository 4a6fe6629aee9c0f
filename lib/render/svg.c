/*
 * svg.c - the figures' small SVG writer (see svg.h): buffer, axes and ticks,
 * series, legends, heat maps. Pixel coordinates are printed with three
 * decimals so that a reader can invert the axis transform to ~1e-5.
 */
#include "render/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/escape.h"
#include "common/utf8.h"

/* Font sizes and the width of a character of them, for spacing ticks and
 * legends without measuring text: generous, so that labels never touch. */
#define FONT 11.0
#define CHAR_W 6.6
#define TICK_GAP 10.0 /* free pixels between two x tick labels */

/* ------------------------------------------------------------- buffer */

void svg_printf(svg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rd_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void svg_escape(svg_buf *b, const char *s)
{
    rd_strbuf_put_xml(b, s); /* the library's XML escaper (escape.h) */
}

char *svg_finish(svg_buf *b)
{
    return rd_strbuf_finish(b);
}

/* ------------------------------------------------------------- axes */

/* The smallest of 1, 2, 5 times a power of ten that is >= x (x > 0). */
static double nice_ceil(double x)
{
    double e = pow(10, floor(log10(x)));
    double f = x / e;
    return (f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10) * e;
}

/* The 1-2-5 step after s. */
static double nice_next(double s)
{
    double e = pow(10, floor(log10(s) + 1e-9));
    double f = s / e;
    return (f < 1.5 ? 2 : f < 3.5 ? 5 : 10) * e;
}

/* The 1-2-5 step before s. */
static double nice_prev(double s)
{
    double e = pow(10, floor(log10(s) + 1e-9));
    double f = s / e;
    return (f < 1.5 ? 0.5 : f < 3.5 ? 1 : 2) * e;
}

/* The range is the data's extent, EDGE_MARGIN of it more on each side (a
 * line at the data's max or min is drawn inside the frame, not under its
 * edge), rounded out to a round value: a 1-2-5 step of a 25th of the span
 * on a linear axis (so steps 0..199 give 0..210, not a whole tick step
 * more), never below 0 for non-negative data. A log axis over two decades
 * or more is rounded out to whole decades; under two decades each end is
 * rounded to a 1-2-5 step of a tenth of itself (or of the span when that
 * is smaller), so 0.2..1.6 gives 0.18..1.8, not 0.1..10. */
#define EDGE_MARGIN 0.03

/* v rounded down (dir < 0) or up to a multiple of the 1-2-5 step >= r. */
static double round_to(double v, double r, int dir)
{
    double step = nice_ceil(r);
    return (dir < 0 ? floor(v / step + 1e-9) : ceil(v / step - 1e-9)) * step;
}

void svg_axis_range(svg_axis *ax, const double *v, size_t n, int log, int zero_based)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]) && (!log || v[i] > 0)) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
        }
    ax->log = log;
    if (!(lo <= hi)) {
        ax->lo = log ? 1 : 0;
        ax->hi = log ? 10 : 1;
        return;
    }
    if (log) {
        double l0 = log10(lo), l1 = log10(hi);
        if (l1 - l0 < 1e-9) { /* one value: a factor 1.25 around it */
            l0 -= log10(1.25);
            l1 += log10(1.25);
        }
        double pad = EDGE_MARGIN * (l1 - l0);
        double a = pow(10, l0 - pad), b = pow(10, l1 + pad);
        if (l1 - l0 >= 2) {
            ax->lo = pow(10, floor(log10(a) + 1e-9));
            ax->hi = pow(10, ceil(log10(b) - 1e-9));
        } else {
            ax->lo = round_to(a, fmin(a, b - a) / 10, -1);
            ax->hi = round_to(b, fmin(b, b - a) / 10, 1);
        }
        return;
    }
    if (zero_based && lo >= 0)
        lo = 0;
    if (hi - lo <= 1e-12 * fmax(fabs(hi), 1e-300)) {
        /* one value: a range around it */
        double d = lo != 0 ? fabs(lo) * 0.5 : 1;
        lo = zero_based && lo >= 0 ? 0 : lo - d;
        hi = hi + d;
    }
    double pad = EDGE_MARGIN * (hi - lo);
    double a = lo - pad, b = hi + pad;
    if (lo >= 0 && a < 0)
        a = 0; /* non-negative data (steps, norms): not below 0 */
    ax->lo = round_to(a, (b - a) / 25, -1);
    ax->hi = round_to(b, (b - a) / 25, 1);
}

double svg_axis_map(const svg_axis *ax, double v)
{
    if (!isfinite(v) || (ax->log && v <= 0))
        return NAN;
    double t = ax->log ? (log10(v) - log10(ax->lo)) / (log10(ax->hi) - log10(ax->lo))
                       : (v - ax->lo) / (ax->hi - ax->lo);
    return ax->p0 + t * (ax->p1 - ax->p0);
}

/* ------------------------------------------------------------- ticks */

typedef struct tick {
    double v;
    int major; /* labelled */
    char text[24];
} tick;
#define MAX_TICKS 128

static void fmt_linear(char *out, size_t n, double v, double step)
{
    if (fabs(v) < step * 1e-6)
        v = 0;
    if (v == 0)
        snprintf(out, n, "0");
    else if (fabs(v) >= 1e6 || step < 1e-4)
        snprintf(out, n, "%.3g", v);
    else if (step >= 1 - 1e-9)
        snprintf(out, n, "%.0f", v);
    else
        snprintf(out, n, "%.*f", (int)ceil(-log10(step) - 1e-9), v);
}

static void fmt_power(char *out, size_t n, double v)
{
    int e = (int)floor(log10(v) + 1e-9);
    double m = v / pow(10, e);
    if (e >= -4 && e <= 5)
        snprintf(out, n, "%.*f", e < 0 ? -e : 0, v);
    else if (fabs(m - 1) < 1e-6)
        snprintf(out, n, "1e%d", e);
    else
        snprintf(out, n, "%.0fe%d", m, e);
}

/* Ticks of a linear range [lo, hi] over len pixels: the smallest 1-2-5
 * step whose labels keep min_gap pixels apart (label widths counted when
 * horizontal). */
static int ticks_linear(double lo, double hi, double len, int horizontal, int integer, tick *t)
{
    double span = hi - lo;
    if (!(span > 0) || !(len > 0))
        return 0;
    double min_gap = horizontal ? 30 : 2.2 * FONT;
    double step = nice_ceil(span * min_gap / len);
    if (integer && step < 1)
        step = 1;
    for (int guard = 0; guard < 60; guard++) {
        int n = 0;
        double widest = 0;
        long long i0 = (long long)ceil(lo / step - 1e-9), i1 = (long long)floor(hi / step + 1e-9);
        if (i1 - i0 + 1 > MAX_TICKS) {
            step = nice_next(step);
            continue;
        }
        for (long long i = i0; i <= i1; i++) {
            t[n].v = (double)i * step;
            t[n].major = 1;
            fmt_linear(t[n].text, sizeof t[n].text, t[n].v, step);
            widest = fmax(widest, strlen(t[n].text) * CHAR_W);
            n++;
        }
        double gap = step / span * len;
        if (!horizontal || gap >= widest + TICK_GAP || n <= 1)
            return n;
        step = nice_next(step);
    }
    return 0;
}

static int cb_log_values(double lo, double hi, int set, int every, tick *t);

/* Ticks of a log axis: labelled decades (every m-th when crowded), 2 and 5
 * labelled as well when a decade is wide, unlabelled minor ticks 2..9; a
 * range with fewer than two decades inside falls back to 1-2-5 values. */
static int ticks_log(double lo, double hi, double len, int horizontal, int integer, tick *t)
{
    double l0 = log10(lo), l1 = log10(hi);
    if (!(l1 > l0) || !(len > 0))
        return 0;
    double per_dec = len / (l1 - l0);
    int e0 = (int)ceil(l0 - 1e-9), e1 = (int)floor(l1 + 1e-9);
    if (e1 - e0 + 1 < 2) {
        /* not two decades inside: 1-2-5 values (0.2 0.5 1 for 0.18..1.8),
         * or linear values when fewer than three of those are inside (2..8,
         * 1..1.003), mapped logarithmically */
        tick tmp[MAX_TICKS];
        int n = cb_log_values(lo, hi, 2, 1, tmp), m = 0;
        if (n < 3)
            n = ticks_linear(lo, hi, len, horizontal, integer, tmp);
        /* drop labels closer than a label height/width on the log scale */
        double last = -INFINITY;
        for (int i = 0; i < n; i++) {
            if (tmp[i].v <= 0)
                continue;
            double px = (log10(tmp[i].v) - l0) * per_dec;
            double need = horizontal ? strlen(tmp[i].text) * CHAR_W + TICK_GAP : 2 * FONT;
            if (px - last < need)
                continue;
            t[m++] = tmp[i];
            last = px;
        }
        return m;
    }
    double label_w = 0;
    for (int e = e0; e <= e1; e++) {
        char s[24];
        fmt_power(s, sizeof s, pow(10, e));
        label_w = fmax(label_w, strlen(s) * CHAR_W);
    }
    double need = horizontal ? label_w + TICK_GAP : 2 * FONT;
    int every = 1;
    while (per_dec * every < need)
        every = every == 1 ? 2 : every == 2 ? 5 : every * 2;
    int with25 = every == 1 && per_dec >= (horizontal ? 3.2 : 4.5) * need;
    int minor = every == 1 && per_dec >= 40;
    int n = 0;
    for (int e = e0 - 1; e <= e1 && n < MAX_TICKS - 10; e++) {
        for (int m = 1; m <= 9; m++) {
            double v = m * pow(10, e);
            if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9))
                continue;
            if (m == 1 && ((e % every) + every) % every == 0) {
                t[n].v = v;
                t[n].major = 1;
                fmt_power(t[n].text, sizeof t[n].text, v);
                n++;
            } else if (with25 && (m == 2 || m == 5)) {
                t[n].v = v;
                t[n].major = 1;
                snprintf(t[n].text, sizeof t[n].text, "%g", v);
                n++;
            } else if (minor || (m == 1 && every > 1)) {
                t[n].v = v;
                t[n].major = 0;
                t[n].text[0] = 0;
                n++;
            }
        }
    }
    return n;
}

/* ------------------------------------------------------------- colour bars */

/* A colour bar's labels: enough values to read a colour by (the decades
 * alone are often two or fewer), never closer than a label's height. */
#define CB_WANT 5   /* the coarsest candidate set with this many labels wins */
#define CB_GAP (1.6 * FONT)
#define CB_LOG_SETS 5

/* Values m * 10^e in [lo, hi] for the mantissas m of set (0: 1; 1: 1 3;
 * 2: 1 2 5; 3: 1 2 3 5; 4: 1..9), of every e that every divides. */
static int cb_log_values(double lo, double hi, int set, int every, tick *t)
{
    static const int sets[CB_LOG_SETS][10] = {
        { 1 }, { 1, 3 }, { 1, 2, 5 }, { 1, 2, 3, 5 }, { 1, 2, 3, 4, 5, 6, 7, 8, 9 }
    };
    int n = 0;
    for (int e = (int)floor(log10(lo)) - 1; e <= (int)ceil(log10(hi)) && n < MAX_TICKS; e++)
        for (int i = 0; i < 10 && sets[set][i] && n < MAX_TICKS && e % every == 0; i++) {
            double v = sets[set][i] * pow(10, e);
            if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9))
                continue;
            t[n].v = v;
            t[n].major = 1;
            if (sets[set][i] == 1)
                fmt_power(t[n].text, sizeof t[n].text, v);
            else
                snprintf(t[n].text, sizeof t[n].text, "%g", v);
            n++;
        }
    return n;
}

/* Multiples of step in [lo, hi]; 0 when more than MAX_TICKS. */
static int cb_linear_values(double lo, double hi, double step, tick *t)
{
    long long i0 = (long long)ceil(lo / step - 1e-9), i1 = (long long)floor(hi / step + 1e-9);
    if (i1 - i0 + 1 > MAX_TICKS)
        return 0;
    int n = 0;
    for (long long i = i0; i <= i1; i++, n++) {
        t[n].v = (double)i * step;
        t[n].major = 1;
        fmt_linear(t[n].text, sizeof t[n].text, t[n].v, step);
    }
    return n;
}

/* 1 when the n labels (ascending values) of t keep CB_GAP pixels apart on ac. */
static int cb_fits(const svg_axis *ac, const tick *t, int n)
{
    for (int i = 0; i + 1 < n; i++)
        if (fabs(svg_axis_map(ac, t[i + 1].v) - svg_axis_map(ac, t[i].v)) < CB_GAP)
            return 0;
    return n > 0;
}

/* Candidate sets from coarse to fine (on a log bar every 5th and every
 * 2nd decade, the mantissa sets; then 1-2-5 steps from half the range
 * down): the first that fits with CB_WANT labels or more, else the fitting
 * one with the most labels. */
static int colorbar_ticks(const svg_axis *ac, tick *t)
{
    tick cand[MAX_TICKS];
    int best = 0;
    double span = ac->hi - ac->lo;
    double step = nice_ceil(span / 2);
    for (int c = 0; c < 2 + CB_LOG_SETS + 12; c++) {
        int n;
        if (c < 2 + CB_LOG_SETS) {
            if (!ac->log)
                continue;
            n = c < 2 ? cb_log_values(ac->lo, ac->hi, 0, c == 0 ? 5 : 2, cand)
                      : cb_log_values(ac->lo, ac->hi, c - 2, 1, cand);
        } else {
            n = cb_linear_values(ac->lo, ac->hi, step, cand);
            step = nice_prev(step);
        }
        if (n > best && cb_fits(ac, cand, n)) {
            memcpy(t, cand, (size_t)n * sizeof *t);
            best = n;
            if (n >= CB_WANT)
                break;
        }
    }
    return best;
}

/* The value a colour bar's end shows: v rounded towards the inside of the
 * bar (dir 1 up, -1 down) to 3 significant digits, or finer where the bar
 * spans less than a hundredth of v, so that it lies on the bar. */
static tick cb_end(const svg_axis *ac, double v, int dir)
{
    double span = ac->hi - ac->lo;
    int e = (int)floor(log10(fmin(fabs(v) > 0 ? fabs(v) / 100 : span / 100, span / 100)));
    double q = pow(10, e);
    double r = (dir > 0 ? ceil(v / q - 1e-9) : floor(v / q + 1e-9)) * q;
    tick t = { r, 1, "" };
    int sig = (r != 0 ? (int)floor(log10(fabs(r))) : e) - e + 1;
    snprintf(t.text, sizeof t.text, "%.*g", sig < 1 ? 1 : sig > 17 ? 17 : sig, r);
    t.v = strtod(t.text, NULL); /* the value shown is the value placed */
    return t;
}

/* The colour bar's labels with both ends labelled: the bottom and the top
 * value (read a colour against them), unless a label is already there;
 * labels crowding an end's label give way to it. */
static int colorbar_labels(const svg_axis *ac, tick *t)
{
    tick in[MAX_TICKS];
    int n = colorbar_ticks(ac, in), m = 0;
    tick ends[2] = { cb_end(ac, ac->lo, 1), cb_end(ac, ac->hi, -1) };
    int need[2];
    for (int k = 0; k < 2; k++) {
        double pe = svg_axis_map(ac, k ? ac->hi : ac->lo);
        need[k] = 1;
        for (int i = 0; i < n; i++)
            if (fabs(svg_axis_map(ac, in[i].v) - pe) < 1)
                need[k] = 0;
    }
    if (need[0])
        t[m++] = ends[0];
    for (int i = 0; i < n && m < MAX_TICKS - 1; i++) {
        double pi = svg_axis_map(ac, in[i].v);
        int crowds = 0;
        for (int k = 0; k < 2; k++)
            if (need[k] && fabs(pi - svg_axis_map(ac, ends[k].v)) < CB_GAP)
                crowds = 1;
        if (!crowds)
            t[m++] = in[i];
    }
    if (need[1])
        t[m++] = ends[1];
    return m;
}

static int axis_ticks(const svg_axis *ax, int horizontal, int integer, tick *t)
{
    double len = fabs(ax->p1 - ax->p0);
    return ax->log ? ticks_log(ax->lo, ax->hi, len, horizontal, integer, t)
                   : ticks_linear(ax->lo, ax->hi, len, horizontal, integer, t);
}

/* ------------------------------------------------------------- plots */

static const char *dash_attr(int dash)
{
    return dash == 1 ? " stroke-dasharray=\"7 4\"" : dash == 2 ? " stroke-dasharray=\"2 3\"" : "";
}

static void axis_attrs(svg_buf *b, const char *name, const svg_axis *a)
{
    svg_printf(b, " data-%s-scale=\"%s\" data-%s-lo=\"%.17g\" data-%s-hi=\"%.17g\""
                  " data-%s-p0=\"%.3f\" data-%s-p1=\"%.3f\"",
               name, a->log ? "log" : "linear", name, a->lo, name, a->hi, name, a->p0, name,
               a->p1);
}

/* Ticks, labels and grid of both axes of a plot area. */
static void draw_axes(svg_buf *b, double x, double y, double w, double h, const svg_axis *ax,
                      const svg_axis *ay, int integer_x, int integer_y, int grid)
{
    tick t[MAX_TICKS];
    int n = axis_ticks(ax, 1, integer_x, t);
    svg_printf(b, "<g class=\"xticks\">");
    for (int i = 0; i < n; i++) {
        double px = svg_axis_map(ax, t[i].v);
        if (!isfinite(px))
            continue;
        if (t[i].major && grid)
            svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" class=\"grid\"/>",
                       px, y, px, y + h);
        svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" class=\"tick\"/>", px,
                   y + h, px, y + h + (t[i].major ? 5 : 3));
        if (t[i].major && t[i].text[0]) {
            svg_printf(b, "<text x=\"%.3f\" y=\"%.3f\" text-anchor=\"middle\" data-v=\"%.17g\">",
                       px, y + h + 8 + FONT, t[i].v);
            svg_escape(b, t[i].text);
            svg_printf(b, "</text>");
        }
    }
    svg_printf(b, "</g><g class=\"yticks\">");
    n = axis_ticks(ay, 0, integer_y, t);
    for (int i = 0; i < n; i++) {
        double py = svg_axis_map(ay, t[i].v);
        if (!isfinite(py))
            continue;
        if (t[i].major && grid)
            svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" class=\"grid\"/>",
                       x, py, x + w, py);
        svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" class=\"tick\"/>",
                   x - (t[i].major ? 5 : 3), py, x, py);
        if (t[i].major && t[i].text[0]) {
            svg_printf(b, "<text x=\"%.3f\" y=\"%.3f\" text-anchor=\"end\" data-v=\"%.17g\">",
                       x - 8, py + FONT * 0.35, t[i].v);
            svg_escape(b, t[i].text);
            svg_printf(b, "</text>");
        }
    }
    svg_printf(b, "</g>");
}

static void axis_labels(svg_buf *b, double x, double y, double w, double h, const char *title,
                        const char *xlabel, const char *ylabel, double ylabel_x)
{
    if (title && title[0]) {
        svg_printf(b, "<text class=\"title\" x=\"%.3f\" y=\"%.3f\">", x, y - 12);
        svg_escape(b, title);
        svg_printf(b, "</text>");
    }
    if (xlabel && xlabel[0]) {
        svg_printf(b, "<text class=\"label\" x=\"%.3f\" y=\"%.3f\" text-anchor=\"middle\">",
                   x + w / 2, y + h + 2 * FONT + 16);
        svg_escape(b, xlabel);
        svg_printf(b, "</text>");
    }
    if (ylabel && ylabel[0]) {
        svg_printf(b, "<text class=\"label\" x=\"%.3f\" y=\"%.3f\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 %.3f %.3f)\">",
                   ylabel_x, y + h / 2, ylabel_x, y + h / 2);
        svg_escape(b, ylabel);
        svg_printf(b, "</text>");
    }
}

double svg_legend_width(int max_chars)
{
    return 34 + max_chars * CHAR_W;
}

void svg_plot_begin(svg_plot *p, svg_buf *b, double x, double y, double w, double h,
                    const svg_axis *ax, const svg_axis *ay, int integer_x, const char *title,
                    const char *xlabel, const char *ylabel)
{
    memset(p, 0, sizeof *p);
    p->b = b;
    p->x = x;
    p->y = y;
    p->w = w;
    p->h = h;
    p->ax = *ax;
    p->ay = *ay;
    p->ax.p0 = x;
    p->ax.p1 = x + w;
    p->ay.p0 = y + h;
    p->ay.p1 = y;
    p->integer_x = integer_x;
    svg_printf(b, "<g class=\"plot\"");
    axis_attrs(b, "x", &p->ax);
    axis_attrs(b, "y", &p->ay);
    svg_printf(b, ">");
    svg_printf(b, "<rect class=\"area\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\"/>",
               x, y, w, h);
    draw_axes(b, x, y, w, h, &p->ax, &p->ay, integer_x, 0, 1);
    axis_labels(b, x, y, w, h, title, xlabel, ylabel, x - 70);
    /* series stay inside the plot area */
    svg_printf(b, "<svg x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\" viewBox=\"%.3f %.3f "
                  "%.3f %.3f\" overflow=\"hidden\">",
               x - 6, y - 6, w + 12, h + 12, x - 6, y - 6, w + 12, h + 12);
}

static void add_legend(svg_plot *p, const svg_style *st, const char *label)
{
    if (!label || p->n_legend >= SVG_MAX_LEGEND)
        return;
    /* at most SVG_LEGEND_CHARS characters (UTF-8 sequences kept whole), so
     * that the legend column holds it */
    char *out = p->legend[p->n_legend];
    size_t o = 0;
    int chars = 0;
    for (const unsigned char *c = (const unsigned char *)label; *c;) {
        uint32_t cp;
        size_t len = rd_utf8_next(c, strlen((const char *)c), &cp);
        if (!len)
            len = 1; /* a stray byte: svg_escape replaces it */
        if (chars == SVG_LEGEND_CHARS - 1 && strlen((const char *)c) > len) {
            memcpy(out + o, "\xe2\x80\xa6", 3); /* an ellipsis */
            o += 3;
            break;
        }
        if (o + len + 4 > sizeof p->legend[0])
            break;
        memcpy(out + o, c, len);
        o += len;
        c += len;
        chars++;
    }
    out[o] = 0;
    p->legend_style[p->n_legend++] = *st;
}

static void marker(svg_buf *b, int kind, double px, double py, const char *color)
{
    if (kind == 1)
        svg_printf(b, "<circle cx=\"%.3f\" cy=\"%.3f\" r=\"2.8\" fill=\"%s\"/>", px, py, color);
    else if (kind == 2)
        svg_printf(b, "<rect x=\"%.3f\" y=\"%.3f\" width=\"5.4\" height=\"5.4\" fill=\"%s\"/>",
                   px - 2.7, py - 2.7, color);
    else if (kind == 3)
        svg_printf(b, "<path d=\"M%.3f %.3fl3.2 5.6h-6.4z\" fill=\"%s\"/>", px, py - 3.4, color);
    else if (kind == 4)
        svg_printf(b, "<path d=\"M%.3f %.3fl4.5 4.5l-4.5 4.5l-4.5 -4.5z\" fill=\"%s\"/>", px,
                   py - 4.5, color);
}

void svg_series(svg_plot *p, const double *x, const double *y, size_t n, const svg_style *st,
                const char *key, const char *label)
{
    svg_buf *b = p->b;
    double width = st->width > 0 ? st->width : 1.8;
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        double px = svg_axis_map(&p->ax, x[i]), py = svg_axis_map(&p->ay, y[i]);
        if (!isfinite(px) || !isfinite(py)) {
            if (open)
                svg_printf(b, "\"/>");
            open = 0;
            continue;
        }
        if (!open) {
            svg_printf(b, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"%.1f\"%s",
                       st->color, width, dash_attr(st->dash));
            if (key) {
                svg_printf(b, " data-key=\"");
                svg_escape(b, key);
                svg_printf(b, "\"");
            }
            svg_printf(b, " points=\"");
            open = 1;
        } else {
            svg_printf(b, " ");
        }
        svg_printf(b, "%.3f,%.3f", px, py);
    }
    if (open)
        svg_printf(b, "\"/>");
    if (st->marker && n <= 48)
        for (size_t i = 0; i < n; i++) {
            double px = svg_axis_map(&p->ax, x[i]), py = svg_axis_map(&p->ay, y[i]);
            if (isfinite(px) && isfinite(py))
                marker(b, st->marker, px, py, st->color);
        }
    add_legend(p, st, label);
}

void svg_hline(svg_plot *p, double y, const svg_style *st, const char *key, const char *label)
{
    double py = svg_axis_map(&p->ay, y);
    if (!(isfinite(py) && py >= p->y - 1e-6 && py <= p->y + p->h + 1e-6))
        return; /* off the chart: not drawn, so not in the legend */
    {
        svg_printf(p->b, "<line class=\"ref\" x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" "
                         "stroke=\"%s\" stroke-width=\"%.1f\"%s",
                   p->x, py, p->x + p->w, py, st->color, st->width > 0 ? st->width : 1.4,
                   dash_attr(st->dash));
        if (key) {
            svg_printf(p->b, " data-key=\"");
            svg_escape(p->b, key);
            svg_printf(p->b, "\"");
        }
        svg_printf(p->b, "/>");
    }
    add_legend(p, st, label);
}

/* 1 when pixel (px, py) lies inside the plot area of p. */
static int in_area(const svg_plot *p, double px, double py)
{
    return isfinite(px) && isfinite(py) && px >= p->x - 1e-6 && px <= p->x + p->w + 1e-6 &&
           py >= p->y - 1e-6 && py <= p->y + p->h + 1e-6;
}

void svg_point(svg_plot *p, double x, double y, const svg_style *st, const char *key,
               const char *label)
{
    double px = svg_axis_map(&p->ax, x), py = svg_axis_map(&p->ay, y);
    if (!in_area(p, px, py))
        return;
    svg_printf(p->b, "<path class=\"point\" data-px=\"%.3f\" data-py=\"%.3f\"", px, py);
    if (key) {
        svg_printf(p->b, " data-key=\"");
        svg_escape(p->b, key);
        svg_printf(p->b, "\"");
    }
    svg_printf(p->b, " d=\"M%.3f %.3fl5 5l-5 5l-5 -5z\" fill=\"%s\" stroke=\"#222\" "
                     "stroke-width=\"0.8\"/>",
               px, py - 5, st->color);
    svg_style legend = *st;
    legend.no_line = 1;
    add_legend(p, &legend, label);
}

void svg_note(svg_plot *p, const char *text)
{
    if (!text || p->n_notes >= SVG_MAX_NOTES)
        return;
    snprintf(p->notes[p->n_notes++], SVG_NOTE_BYTES, "%s", text);
}

/* The notes under the legend from y, each wrapped at spaces to lines of
 * at most SVG_LEGEND_CHARS + 4 characters. */
static void draw_notes(const svg_plot *p, double x, double y)
{
    svg_buf *b = p->b;
    if (!p->n_notes)
        return;
    svg_printf(b, "<g class=\"notes\">");
    for (int i = 0; i < p->n_notes; i++) {
        const char *s = p->notes[i];
        while (*s) {
            /* the longest run of whole words within the width (a word
             * longer than the width is cut) */
            size_t len = strlen(s), cut = 0, at = 0;
            int chars = 0;
            while (at < len && chars < SVG_LEGEND_CHARS + 4) {
                uint32_t cp;
                size_t n = rd_utf8_next((const unsigned char *)s + at, len - at, &cp);
                at += n ? n : 1;
                chars++;
                if (at == len || s[at] == ' ')
                    cut = at;
            }
            if (!cut)
                cut = at;
            char line[SVG_NOTE_BYTES];
            memcpy(line, s, cut);
            line[cut] = 0;
            svg_printf(b, "<text class=\"note\" x=\"%.3f\" y=\"%.3f\">", x, y);
            svg_escape(b, line);
            svg_printf(b, "</text>");
            y += FONT + 3;
            s += cut;
            while (*s == ' ')
                s++;
        }
        y += 4;
    }
    svg_printf(b, "</g>");
}

void svg_highlight(svg_plot *p, double x, double y, const char *label)
{
    double px = svg_axis_map(&p->ax, x), py = svg_axis_map(&p->ay, y);
    if (!isfinite(px))
        return;
    if (!isfinite(py))
        py = p->y + 8; /* the value itself is not finite: mark the top edge */
    svg_printf(p->b, "<circle class=\"highlight\" cx=\"%.3f\" cy=\"%.3f\" r=\"7\"/>", px, py);
    svg_style st = { "#d62728", 0, 1, 0, 0 };
    add_legend(p, &st, label);
}

void svg_plot_end(svg_plot *p, double legend_x)
{
    svg_buf *b = p->b;
    svg_printf(b, "</svg><rect class=\"frame\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" "
                  "height=\"%.3f\"/>",
               p->x, p->y, p->w, p->h);
    if (p->n_legend) {
        svg_printf(b, "<g class=\"legend\">");
        for (int i = 0; i < p->n_legend; i++) {
            const svg_style *st = &p->legend_style[i];
            double ly = p->y + 8 + i * 17;
            if (!st->no_line)
                svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" "
                              "stroke=\"%s\" stroke-width=\"%.1f\"%s/>",
                           legend_x, ly, legend_x + 24, ly, st->color,
                           st->width > 0 ? st->width : 1.8, dash_attr(st->dash));
            marker(b, st->marker, legend_x + 12, ly, st->color);
            svg_printf(b, "<text x=\"%.3f\" y=\"%.3f\">", legend_x + 30, ly + FONT * 0.35);
            svg_escape(b, p->legend[i]);
            svg_printf(b, "</text>");
        }
        svg_printf(b, "</g>");
    }
    draw_notes(p, legend_x, p->y + 8 + p->n_legend * 17 + (p->n_legend ? 10 : 0));
    svg_printf(b, "</g>\n");
}

/* ------------------------------------------------------------- heat maps */

void svg_ramp(double t, char out[8])
{
    /* dark blue - teal - green - yellow, roughly even in lightness */
    static const double c[5][3] = {
        { 38, 24, 90 }, { 40, 96, 146 }, { 33, 156, 140 }, { 120, 200, 80 }, { 250, 230, 40 },
    };
    if (!(t >= 0))
        t = 0;
    if (t > 1)
        t = 1;
    double u = t * 4;
    int i = (int)u;
    if (i > 3)
        i = 3;
    double f = u - i;
    int rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(c[i][k] + f * (c[i + 1][k] - c[i][k]));
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

void svg_heatmap(svg_buf *b, double x, double y, double w, double h, const double *v, int rows,
                 int first_row, int cols, const double *col_x, int log_c, double bar_x, const char *title,
                 const char *xlabel, const char *ylabel, const char *clabel, double mark_x,
                 const char *key)
{
    svg_axis ax = { 0, col_x[0], col_x[cols], x, x + w };
    svg_axis ay = { 0, first_row - 0.5, first_row + rows - 0.5, y + h, y };
    if (!(ax.hi > ax.lo))
        ax.hi = ax.lo + 1;
    /* colour range: the data's own, not widened, so that small changes show */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (isfinite(v[i]) && (!log_c || v[i] > 0)) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
        }
    if (!(lo <= hi)) {
        lo = log_c ? 1 : 0;
        hi = log_c ? 10 : 1;
    }
    if (hi <= lo * (1 + 1e-9) + (log_c ? 0 : 1e-300)) {
        /* constant data: a range around the value */
        if (log_c) {
            lo /= 1.1;
            hi *= 1.1;
        } else {
            double d = lo != 0 ? fabs(lo) * 0.05 : 1;
            lo -= d;
            hi += d;
        }
    }
    svg_axis ac = { log_c, lo, hi, y + h, y };

    svg_printf(b, "<g class=\"heatmap\"");
    if (key) {
        svg_printf(b, " data-key=\"");
        svg_escape(b, key);
        svg_printf(b, "\"");
    }
    axis_attrs(b, "x", &ax);
    axis_attrs(b, "y", &ay);
    axis_attrs(b, "c", &ac);
    svg_printf(b, ">");
    svg_printf(b, "<rect class=\"nodata\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\"/>",
               x, y, w, h);
    svg_printf(b, "<g shape-rendering=\"crispEdges\">");
    double rh = h / rows;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double val = v[(size_t)r * cols + c];
            double t = log_c ? (val > 0 ? (log10(val) - log10(lo)) / (log10(hi) - log10(lo)) : NAN)
                             : (val - lo) / (hi - lo);
            if (!isfinite(val) || !isfinite(t))
                continue; /* the grey background shows through */
            char col[8];
            svg_ramp(t, col);
            double x0 = svg_axis_map(&ax, col_x[c]), x1 = svg_axis_map(&ax, col_x[c + 1]);
            /* a hair wider, so that no seam shows between columns */
            svg_printf(b, "<rect x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\" "
                          "fill=\"%s\" data-v=\"%.6g\"/>",
                       x0, y + h - (r + 1) * rh, x1 - x0 + 0.3, rh + 0.3, col, val);
        }
    svg_printf(b, "</g>");
    if (isfinite(mark_x)) {
        double px = svg_axis_map(&ax, mark_x);
        if (isfinite(px) && px >= x - 1e-6 && px <= x + w + 1e-6)
            svg_printf(b, "<line class=\"nfmark\" x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" "
                          "y2=\"%.3f\"/>",
                       px, y - 4, px, y + h + 4);
    }
    svg_printf(b, "<rect class=\"frame\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\"/>",
               x, y, w, h);
    draw_axes(b, x, y, w, h, &ax, &ay, 1, 1, 0);
    axis_labels(b, x, y, w, h, title, xlabel, ylabel, x - 48);

    /* the colour bar: 48 bands and its own ticks */
    double bw = 14;
    svg_printf(b, "<g class=\"colorbar\" shape-rendering=\"crispEdges\">");
    for (int i = 0; i < 48; i++) {
        char col[8];
        svg_ramp((i + 0.5) / 48, col);
        svg_printf(b, "<rect x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\" fill=\"%s\"/>",
                   bar_x, y + h - (i + 1) * h / 48, bw, h / 48 + 0.3, col);
    }
    svg_printf(b, "<rect class=\"frame\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\"/>",
               bar_x, y, bw, h);
    tick t[MAX_TICKS];
    int n = colorbar_labels(&ac, t);
    for (int i = 0; i < n; i++) {
        double py = svg_axis_map(&ac, t[i].v);
        if (!isfinite(py))
            continue;
        svg_printf(b, "<line x1=\"%.3f\" y1=\"%.3f\" x2=\"%.3f\" y2=\"%.3f\" class=\"tick\"/>",
                   bar_x + bw, py, bar_x + bw + (t[i].major ? 5 : 3), py);
        if (t[i].major && t[i].text[0]) {
            svg_printf(b, "<text x=\"%.3f\" y=\"%.3f\" data-v=\"%.17g\">", bar_x + bw + 8,
                       py + FONT * 0.35, t[i].v);
            svg_escape(b, t[i].text);
            svg_printf(b, "</text>");
        }
    }
    if (clabel && clabel[0]) {
        double lx = bar_x + bw + 62;
        svg_printf(b, "<text class=\"label\" x=\"%.3f\" y=\"%.3f\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 %.3f %.3f)\">",
                   lx, y + h / 2, lx, y + h / 2);
        svg_escape(b, clabel);
        svg_printf(b, "</text>");
    }
    svg_printf(b, "</g></g>\n");
}

/* ------------------------------------------------------------- documents */

void svg_doc_begin(svg_buf *b, double w, double h, const char *title)
{
    svg_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                  "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, "
                  "sans-serif\" font-size=\"%.0f\">\n",
               w, h, w, h, FONT);
    svg_printf(b, "<title>");
    svg_escape(b, title);
    svg_printf(b, "</title>\n<style>"
                  ".area{fill:#fff}.frame{fill:none;stroke:#333;stroke-width:1}"
                  ".nodata{fill:#ddd}.grid{stroke:#e4e4e4;stroke-width:1}"
                  ".tick{stroke:#333;stroke-width:1}text{fill:#222}.note{fill:#8a4b00}"
                  ".title{font-size:13px;font-weight:bold}.label{font-size:12px}"
                  ".highlight{fill:none;stroke:#d62728;stroke-width:2.5}"
                  ".nfmark{stroke:#d62728;stroke-width:2}"
                  "</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
}

void svg_doc_end(svg_buf *b)
{
    svg_printf(b, "</svg>\n");
}
