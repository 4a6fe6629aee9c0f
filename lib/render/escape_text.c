/*
 * escape_text.c - the text escaper for front ends (resdiag_escape_text in
 * resdiag.h): the same escaping every output of the library applies to a
 * string from a run file (common/escape.h).
 */
#include <resdiag.h>

#include "common/escape.h"
#include "common/strbuf.h"

char *resdiag_escape_text(const char *bytes)
{
    if (!bytes)
        return NULL;
    rd_strbuf b = { 0 };
    rd_strbuf_put_text(&b, bytes);
    rd_strbuf_printf(&b, "%s", ""); /* "" still gives a string */
    return rd_strbuf_finish(&b);
}
