/*
 * text_legend.h - the legend of the text report.
 */
#ifndef RESDIAG_RENDER_TEXT_LEGEND_H
#define RESDIAG_RENDER_TEXT_LEGEND_H

#include "analysis/analysis.h"
#include "common/strbuf.h"

/* Appends "Legend:" and the explanation of every term whose marker the
 * report in b (everything so far) contains, in the order a reader meets
 * them. */
void rd_text_legend(rd_strbuf *b, const rd_analysis *a);

#endif
