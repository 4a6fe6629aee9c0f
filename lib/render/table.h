/*
 * table.h - the cells and column headings of the text report's and the
 * diff's fixed-width tables.
 */
#ifndef RESDIAG_RENDER_TABLE_H
#define RESDIAG_RENDER_TABLE_H

#include <stddef.h>

#include "common/strbuf.h"

/* A cell: v printed with fmt, or "-" right-aligned in width when v is
 * not finite (not recorded). */
void rd_table_cell(rd_strbuf *b, const char *fmt, int width, double v);

/* A column heading into h (cap bytes): prefix, the escaped name, suffix,
 * cut to at most width bytes without splitting a UTF-8 character.
 * Returns h. */
const char *rd_table_head(char *h, size_t cap, const char *prefix, const char *name,
                          const char *suffix, int width);

#endif
