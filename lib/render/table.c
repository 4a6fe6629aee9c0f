/*
 * table.c - fixed-width table cells and headings (table.h).
 */
#include "render/table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/escape.h"

void rd_table_cell(rd_strbuf *b, const char *fmt, int width, double v)
{
    if (isfinite(v))
        rd_strbuf_printf(b, fmt, v);
    else
        rd_strbuf_printf(b, " %*s", width, "-");
}

const char *rd_table_head(char *h, size_t cap, const char *prefix, const char *name,
                          const char *suffix, int width)
{
    char esc[160];
    rd_text_escape(esc, sizeof esc, name);
    snprintf(h, cap, "%s%s%s", prefix, esc, suffix);
    size_t n = strlen(h);
    if (n > (size_t)width) {
        n = (size_t)width;
        while (n > 0 && ((unsigned char)h[n] & 0xc0) == 0x80)
            n--;
        h[n] = '\0';
    }
    return h;
}
