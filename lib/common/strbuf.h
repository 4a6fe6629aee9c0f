/* strbuf.h - a growing string for the text the library and the tool build
 * (reports, JSON, SVG): printf-style appends, and one failure flag instead
 * of an error check after every append. Internal. */
#ifndef RD_STRBUF_H
#define RD_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct rd_strbuf {
    char *s;
    size_t len, cap;
    int failed; /* out of memory: everything after is dropped */
} rd_strbuf;

void rd_strbuf_printf(rd_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void rd_strbuf_vprintf(rd_strbuf *b, const char *fmt, va_list ap);
/* The text (the caller frees it), or NULL after a failure (the buffer is
 * freed then). An empty buffer that never failed gives NULL too. */
char *rd_strbuf_finish(rd_strbuf *b);

#endif
