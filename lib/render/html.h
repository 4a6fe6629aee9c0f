/*
 * html_report.h - `resdiag report --html` and `resdiag diff --html`: one
 * self-contained page (inline SVG and CSS, no script, no network) with the
 * verdict card and the figures of plot.h.
 */
#ifndef RESDIAG_HTML_REPORT_H
#define RESDIAG_HTML_REPORT_H

#include <resdiag.h>

/* The page of one analysed run; rd (the open reader of path) feeds the
 * layer x step heat maps when the run has several steps. NULL when out of
 * memory or the file cannot be read (the reader logs). Caller frees. */
char *html_report(const resdiag_analysis *a, const resdiag_reader *rd, const char *path);

/* The page comparing two runs: both verdicts, the differences that matter
 * and the figures with both runs on the same axes. Caller frees. */
char *html_diff(const resdiag_analysis *a, const resdiag_analysis *b, const char *path_a,
                const char *path_b);

/* Writes text to path ("-" = stdout); 0, or -1 with errno set. */
int html_write_file(const char *path, const char *text);

#endif
