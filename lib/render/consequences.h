/*
 * consequences.h - the Consequences part of the report (consequences.c),
 * alike in the text, the JSON, the HTML page and the diff: what was
 * measured for it (a->measures) and each of the sources' findings whose
 * condition the run meets (a->consequences), quoting sources.c's strings.
 */
#ifndef RESDIAG_RENDER_CONSEQUENCES_H
#define RESDIAG_RENDER_CONSEQUENCES_H

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"

/* Nothing when the analysis was asked for none (no_consequences). */
void rd_consequences_text(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *a);
/* The keys "measurements" and "consequences", each with the comma before it. */
void rd_consequences_json(rd_strbuf *b, const rd_analysis *a);
void rd_consequences_html(rd_strbuf *b, const rd_analysis *a);
/* diff: the measured differences the sources say matter, then each run's
 * consequences. */
void rd_consequences_diff(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *x,
                          const rd_analysis *y);

#endif
