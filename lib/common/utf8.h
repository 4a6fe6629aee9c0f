/* utf8.h - UTF-8 validation for the strings that go into a run file and
 * come back out of one: the writer checks the trainer's strings with it,
 * the escapers (escape.h) walk untrusted text with it. Internal. */
#ifndef RD_UTF8_H
#define RD_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid UTF-8 sequence at s, of which n bytes may be
 * read, with its code point in *cp; 0 when s does not start one (a bad
 * lead byte, a lone continuation byte, an overlong form, a surrogate, a
 * value above U+10FFFF, or a sequence cut short). */
size_t rd_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* A control character: C0 (U+0000..U+001F), DEL (U+007F) or C1
 * (U+0080..U+009F). */
int rd_utf8_is_control(uint32_t cp);

/* What rd_utf8_check finds wrong with a string. */
typedef enum rd_text_problem {
    RD_TEXT_OK = 0,
    RD_TEXT_NOT_UTF8 = 1, /* a byte that is not part of a valid sequence */
    RD_TEXT_CONTROL = 2   /* a control character (other than those allowed) */
} rd_text_problem;

/* Checks a NUL-terminated string: valid UTF-8 with no control character,
 * except newline and tab when allow_lines. On a problem *at (may be NULL)
 * is the offset of the first bad byte. */
rd_text_problem rd_utf8_check(const char *s, int allow_lines, size_t *at);

/* Replaces, in place, every byte that is not part of a valid sequence and
 * every byte of a control character by '?' (the length stays): for strings
 * the system hands over as bytes (paths, host names). */
void rd_utf8_scrub(char *s);

#endif
