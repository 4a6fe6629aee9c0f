/*
 * ranks.h - the ranks part of a merged job's report (ranks.c), alike in
 * the text, the JSON and the HTML page: how many ranks were found of how
 * many expected, which are missing, not recorded, rejected (why) or ended
 * early, and where they disagree. Each writes nothing for one file, so a
 * report of one file stays as it was.
 */
#ifndef RESDIAG_RENDER_RANKS_H
#define RESDIAG_RENDER_RANKS_H

#include "analysis/analysis.h"
#include "common/escape.h"
#include "common/strbuf.h"

/* "none", "data", "sequence", "tensor", "pipeline"; "?" otherwise. */
const char *rd_ranks_split_name(resdiag_split s);

void rd_ranks_text(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *a);
/* The key "ranks" (with the comma before it), doc/REPORT-JSON.md. */
void rd_ranks_json(rd_strbuf *b, const rd_analysis *a);
/* A line under the over-training header when its two steps hold
 * different ranks; nothing otherwise. */
void rd_ranks_compare_note(rd_strbuf *b, const rd_analysis *a);
void rd_ranks_html(rd_strbuf *b, const rd_analysis *a);

#endif
