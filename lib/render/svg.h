/*
 * svg.h - a small SVG writer for the figures (plot.h): a growing text
 * buffer, axes with linear and log10 scales and readable ticks (1-2-5 steps,
 * decades), line series with markers, a legend outside the plot area, heat
 * map cells with a colour bar, and XML text escaping.
 *
 * Every plot area is a <g class="plot"> whose data-x-* / data-y-* attributes
 * give the axis transform (scale, data range, pixel range), and every series
 * is a <polyline class="series"> with data-key naming the data it draws, so
 * a test can read the pixels back and invert the transform.
 */
#ifndef RESDIAG_SVG_H
#define RESDIAG_SVG_H

#include <stddef.h>

#include "common/strbuf.h"

/* ------------------------------------------------------------- buffer */

/* The growing string of lib/common/strbuf.h: out of memory drops everything after. */
typedef rd_strbuf svg_buf;

void svg_printf(svg_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends s as XML text or attribute value: lib/common/escape.h's XML escaper
 * (& < > " ' escaped, invalid UTF-8 and characters XML 1.0 forbids
 * replaced): the result is always well-formed. */
void svg_escape(svg_buf *b, const char *s);
/* The text (caller frees), or NULL after a failure (the buffer is freed). */
char *svg_finish(svg_buf *b);

/* ------------------------------------------------------------- axes */

typedef struct svg_axis {
    int log;        /* 1: log10 scale */
    double lo, hi;  /* data range shown (lo < hi; > 0 on a log axis) */
    double p0, p1;  /* pixels of lo and hi (p1 < p0 on a y axis) */
} svg_axis;

/* Data range of v (n) covering the finite values (> 0 on a log axis) and
 * 3% of their span more on each side (no value on the frame), rounded out
 * to a round value: whole decades on a log axis over two decades or more,
 * else 1-2-5 steps of a tenth of each end (0.2..1.6 gives 0.18..1.8); a
 * 1-2-5 step of a 25th of the span on a linear one (from zero when
 * zero_based and the data are >= 0; never below 0 for data >= 0). With no
 * usable value the range is [0, 1] or [1, 10]. */
void svg_axis_range(svg_axis *ax, const double *v, size_t n, int log, int zero_based);
/* Pixel of v; NaN for a non-finite v or v <= 0 on a log axis. */
double svg_axis_map(const svg_axis *ax, double v);

/* ------------------------------------------------------------- plots */

#define SVG_MAX_LEGEND 16
#define SVG_MAX_NOTES 3
#define SVG_NOTE_BYTES 200
#define SVG_LEGEND_CHARS 30 /* longer legend labels end in an ellipsis */

typedef struct svg_style {
    const char *color;  /* CSS colour */
    int dash;           /* 0 solid, 1 dashed, 2 dotted */
    int marker;         /* 0 none, 1 circle, 2 square, 3 triangle, 4 diamond */
    double width;       /* stroke width, 0 = 1.8 */
    int no_line;        /* a point, not a line: the legend shows the marker alone */
} svg_style;

typedef struct svg_plot {
    svg_buf *b;
    double x, y, w, h; /* plot area, pixels */
    svg_axis ax, ay;
    int integer_x;     /* x ticks only at whole numbers */
    int n_legend;
    char legend[SVG_MAX_LEGEND][4 * SVG_LEGEND_CHARS + 8];
    svg_style legend_style[SVG_MAX_LEGEND];
    int n_notes;
    char notes[SVG_MAX_NOTES][SVG_NOTE_BYTES];
} svg_plot;

/* Legend column width for labels of at most max_chars characters. */
double svg_legend_width(int max_chars);

/* Starts a plot area at (x, y, w, h) of the document: frame, grid, ticks
 * with labels, the axis labels (with units) and the title above. The axes
 * ax, ay give scale and data range; their pixels are set here. */
void svg_plot_begin(svg_plot *p, svg_buf *b, double x, double y, double w, double h,
                    const svg_axis *ax, const svg_axis *ay, int integer_x, const char *title,
                    const char *xlabel, const char *ylabel);
/* A line through the points (x[i], y[i]) (n), broken where a point cannot
 * be drawn (NaN, <= 0 on a log axis); markers when style->marker and few
 * points. key (may be NULL) names the data for data-key; label (may be
 * NULL) adds a legend entry. */
void svg_series(svg_plot *p, const double *x, const double *y, size_t n, const svg_style *st,
                const char *key, const char *label);
/* A horizontal reference line at y, across the plot; the legend entry
 * only when the line lies inside the frame (a line not drawn is not listed). */
void svg_hline(svg_plot *p, double y, const svg_style *st, const char *key, const char *label);
/* One value drawn as a marker of style st at (x, y), not a line: a
 * <path class="point"> whose data-px, data-py hold its pixel; label (may be
 * NULL) adds a legend entry showing the marker alone. Nothing is drawn
 * outside the frame. */
void svg_point(svg_plot *p, double x, double y, const svg_style *st, const char *key,
               const char *label);
/* A line of text below the legend (what the figure leaves out, and why);
 * wrapped to the legend column. */
void svg_note(svg_plot *p, const char *text);
/* A ring around one point, to highlight it (non-finite values, ...). */
void svg_highlight(svg_plot *p, double x, double y, const char *label);
/* Ends the plot area: the legend in a column right of it at legend_x. */
void svg_plot_end(svg_plot *p, double legend_x);

/* ------------------------------------------------------------- heat maps */

/* Colour of t in [0, 1] on the project's dark-blue to yellow ramp: "#rrggbb". */
void svg_ramp(double t, char out[8]);

/* A rows x cols heat map at (x, y, w, h): column c spans steps
 * [col_x[c], col_x[c+1]) on a linear step axis (col_x has cols + 1 entries),
 * row r is layer first_row + r (row 0 at the bottom). v (rows, cols), NaN =
 * no data (grey). Log colour scale when log_c. A colour bar right of the map
 * at bar_x, with several labelled ticks (four or more where the bar's
 * height leaves room for them). mark_x (NaN = none) draws a red line at that
 * step (the first non-finite value). key names the data (data-key). */
void svg_heatmap(svg_buf *b, double x, double y, double w, double h, const double *v, int rows,
                 int first_row, int cols, const double *col_x, int log_c, double bar_x, const char *title,
                 const char *xlabel, const char *ylabel, const char *clabel, double mark_x,
                 const char *key);

/* ------------------------------------------------------------- documents */

/* <svg> root of w x h pixels with the figures' CSS; title is its <title>. */
void svg_doc_begin(svg_buf *b, double w, double h, const char *title);
void svg_doc_end(svg_buf *b);

#endif
