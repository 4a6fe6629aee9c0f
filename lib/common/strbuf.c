/* strbuf.c - see strbuf.h. */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>

void rd_strbuf_vprintf(rd_strbuf *b, const char *fmt, va_list ap)
{
    if (b->failed)
        return;
    for (;;) {
        va_list again;
        va_copy(again, ap);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, again);
        va_end(again);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        /* Too small: grow (doubling keeps appends amortised O(1)), retry. */
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

void rd_strbuf_printf(rd_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rd_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *rd_strbuf_finish(rd_strbuf *b)
{
    if (b->failed || !b->s) {
        free(b->s);
        b->s = NULL;
        return NULL;
    }
    return b->s;
}
