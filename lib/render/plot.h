/*
 * plot.h - the figures of a run drawn from its analysis (svg.h): the
 * stream norm over depth, the relative updates and the gradients per layer
 * (one run, or several overlaid), and layer x step heat maps read from the
 * file. Used by resdiag_analysis_figure_svg (plot.c) and the HTML pages.
 */
#ifndef RESDIAG_PLOT_H
#define RESDIAG_PLOT_H

#include <resdiag.h>

#include "render/svg.h"

struct resdiag_analysis;

/* The size of every figure and of its plot area, in pixels: the same for
 * all, so the HTML page lines them up. */
#define PLOT_FIG_W 780.0
#define PLOT_FIG_H 380.0
#define PLOT_AREA_X 84.0
#define PLOT_AREA_Y 40.0
#define PLOT_LEGEND_W svg_legend_width(SVG_LEGEND_CHARS)
#define PLOT_AREA_W (PLOT_FIG_W - PLOT_AREA_X - PLOT_LEGEND_W - 20)
#define PLOT_AREA_H (PLOT_FIG_H - PLOT_AREA_Y - 62)

/* Appends one complete <svg> figure of n runs (1: with fits and reference
 * lines; more: overlaid, the runs told apart by names, which may be NULL
 * when n == 1). Returns 0, or -1 when the figure has no data to draw
 * (e.g. no gradients recorded); then nothing is appended. */
int plot_figure(svg_buf *b, resdiag_figure what, const struct resdiag_analysis *const *a,
                const char *const *names, int n);

/* plot_loss.c: the loss curve of n runs (as plot_figure); -1 when no run
 * gave a finite value of its loss metric. */
int plot_loss_figure(svg_buf *b, const struct resdiag_analysis *const *a,
                     const char *const *names, int n);
/* plot_loss.c: the HTML page's section with the loss curve; nothing for a
 * run without metrics. */
void plot_loss_html(svg_buf *b, const struct resdiag_analysis *a);

/* 1 when the gradient figure of this run draws the pre-norm reference of
 * Xiong et al. 2020 (gradients like 1/||x_k||): only for a verdict it is
 * the theory of (pre-norm, sandwich, or one of the two), never for a
 * post-norm, mixed or undecided run. */
int plot_draws_prenorm_reference(const struct resdiag_analysis *a);

/* Layer x step maps of a run with several recorded steps, read from the
 * file at no more than max_cols evenly spaced steps. */
typedef struct plot_heat {
    int rows, cols, n_sub;
    char **sub_names;  /* (n_sub) */
    double *col_x;     /* (cols + 1) trainer step numbers of the column edges */
    int64_t *col_step; /* (cols) the step of each column */
    double *r;         /* (n_sub, rows, cols) relative update r of layer row */
    double *growth;    /* (rows, cols) ||x_k|| / ||x_1||, k = row + 1 */
    int training;      /* the run kind is training: the steps are "training steps" */
} plot_heat;

/* Reads the maps; 0 on success, else a resdiag_status (the reader logs).
 * Columns: at most max_cols and at most max_cells / L. */
int plot_heat_read(const resdiag_reader *rd, int max_cols, int max_cells, plot_heat *h);
void plot_heat_free(plot_heat *h);
/* Appends one <svg> with the maps: r per sublayer and the stream growth;
 * mark_step (< 0: none) is the step of the first non-finite value. */
void plot_heat_figure(svg_buf *b, const plot_heat *h, int64_t mark_step);

#endif
