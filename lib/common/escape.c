/* escape.c - see escape.h. Each escaper walks the string one unit at a time
 * (a valid UTF-8 character or one invalid byte) and appends what that unit
 * becomes in its kind of output. */
#include "common/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

/* Formatting characters that reorder or break lines on display (Trojan
 * Source): escaped although they are printable. */
static int is_invisible_format(uint32_t cp)
{
    return cp == 0x061c || cp == 0x200e || cp == 0x200f || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

typedef enum { KIND_TEXT, KIND_JSON, KIND_XML } esc_kind;

/* What the unit at p (n bytes left) becomes: written to out (at least 16
 * bytes), its length returned; *used is the bytes of p it consumed. */
static size_t escape_unit(esc_kind kind, const unsigned char *p, size_t n, char *out,
                          size_t *used)
{
    uint32_t cp;
    size_t k = rd_utf8_next(p, n, &cp);
    if (!k) {
        *used = 1;
        if (kind == KIND_TEXT)
            return (size_t)snprintf(out, 16, "\\x%02x", p[0]);
        if (kind == KIND_JSON)
            return (size_t)snprintf(out, 16, "\\ufffd");
        memcpy(out, "\xef\xbf\xbd", 3); /* U+FFFD */
        return 3;
    }
    *used = k;
    switch (kind) {
    case KIND_TEXT:
        if (cp == '\\')
            return (size_t)snprintf(out, 16, "\\\\");
        if (cp == '\n' || cp == '\t' || cp == '\r')
            return (size_t)snprintf(out, 16, "\\%c", cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r');
        if (cp < 0x20 || cp == 0x7f)
            return (size_t)snprintf(out, 16, "\\x%02x", (unsigned)cp);
        if (rd_utf8_is_control(cp) || is_invisible_format(cp))
            return (size_t)snprintf(out, 16, "\\u%04x", (unsigned)cp);
        break;
    case KIND_JSON:
        if (cp == '"' || cp == '\\')
            return (size_t)snprintf(out, 16, "\\%c", (char)cp);
        if (cp == '\n' || cp == '\t' || cp == '\r' || cp == '\b' || cp == '\f')
            return (size_t)snprintf(out, 16, "\\%c",
                                    cp == '\n' ? 'n' : cp == '\t' ? 't' : cp == '\r' ? 'r'
                                                   : cp == '\b' ? 'b' : 'f');
        if (rd_utf8_is_control(cp) || is_invisible_format(cp))
            return (size_t)snprintf(out, 16, "\\u%04x", (unsigned)cp);
        break;
    case KIND_XML:
        switch (cp) {
        case '&': return (size_t)snprintf(out, 16, "&amp;");
        case '<': return (size_t)snprintf(out, 16, "&lt;");
        case '>': return (size_t)snprintf(out, 16, "&gt;");
        case '"': return (size_t)snprintf(out, 16, "&quot;");
        case '\'': return (size_t)snprintf(out, 16, "&#39;");
        case '\t': return (size_t)snprintf(out, 16, "&#9;");
        case '\n': return (size_t)snprintf(out, 16, "&#10;");
        case '\r': return (size_t)snprintf(out, 16, "&#13;");
        default: break;
        }
        if (cp < 0x20 || cp == 0xfffe || cp == 0xffff) { /* not XML 1.0 characters */
            memcpy(out, "\xef\xbf\xbd", 3);
            return 3;
        }
        if (rd_utf8_is_control(cp) || is_invisible_format(cp))
            return (size_t)snprintf(out, 16, "&#x%x;", (unsigned)cp);
        break;
    }
    memcpy(out, p, k);
    return k;
}

static void put_escaped(rd_strbuf *b, esc_kind kind, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    /* runs of characters that stay as they are go in one append */
    size_t plain = 0;
    for (size_t i = 0; i < n;) {
        char out[16];
        size_t used;
        size_t len = escape_unit(kind, p + i, n - i, out, &used);
        if (len == used && memcmp(out, p + i, used) == 0) {
            plain += used;
            i += used;
            continue;
        }
        if (plain)
            rd_strbuf_printf(b, "%.*s", (int)plain, (const char *)p + i - plain);
        plain = 0;
        rd_strbuf_printf(b, "%.*s", (int)len, out);
        i += used;
    }
    if (plain)
        rd_strbuf_printf(b, "%.*s", (int)plain, (const char *)p + n - plain);
}

void rd_strbuf_put_text(rd_strbuf *b, const char *s)
{
    put_escaped(b, KIND_TEXT, s);
}

void rd_strbuf_put_json(rd_strbuf *b, const char *s)
{
    rd_strbuf_printf(b, "\"");
    put_escaped(b, KIND_JSON, s);
    rd_strbuf_printf(b, "\"");
}

void rd_strbuf_put_xml(rd_strbuf *b, const char *s)
{
    put_escaped(b, KIND_XML, s);
}

size_t rd_text_escape(char *dst, size_t cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p), o = 0;
    for (size_t i = 0; i < n;) {
        char out[16];
        size_t used;
        size_t len = escape_unit(KIND_TEXT, p + i, n - i, out, &used);
        if (o + len + 1 > cap)
            break;
        memcpy(dst + o, out, len);
        o += len;
        i += used;
    }
    dst[o] = '\0';
    return o;
}

const char *rd_esc_text(rd_esc_ring *r, const char *s)
{
    rd_strbuf *b = &r->slot[r->next];
    r->next = (r->next + 1) % RD_ESC_SLOTS;
    /* reuse the slot's memory: start over at length 0 */
    b->len = 0;
    b->failed = 0;
    if (b->s)
        b->s[0] = '\0';
    rd_strbuf_put_text(b, s);
    if (b->failed)
        return "?";
    return b->s ? b->s : "";
}

void rd_esc_ring_free(rd_esc_ring *r)
{
    for (int i = 0; i < RD_ESC_SLOTS; i++) {
        free(r->slot[i].s);
        r->slot[i].s = NULL;
        r->slot[i].len = r->slot[i].cap = 0;
    }
}
