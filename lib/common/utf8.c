/* utf8.c - see utf8.h. */
#include "common/utf8.h"

#include <string.h>

size_t rd_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5.. */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

int rd_utf8_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

rd_text_problem rd_utf8_check(const char *s, int allow_lines, size_t *at)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = rd_utf8_next(p + i, n - i, &cp);
        rd_text_problem bad = !k ? RD_TEXT_NOT_UTF8
                              : rd_utf8_is_control(cp) && !(allow_lines && (cp == '\n' || cp == '\t'))
                                  ? RD_TEXT_CONTROL
                                  : RD_TEXT_OK;
        if (bad) {
            if (at)
                *at = i;
            return bad;
        }
        i += k;
    }
    return RD_TEXT_OK;
}

void rd_utf8_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = rd_utf8_next(p + i, n - i, &cp);
        if (!k) {
            p[i++] = '?';
        } else if (rd_utf8_is_control(cp)) {
            memset(p + i, '?', k);
            i += k;
        } else {
            i += k;
        }
    }
}
