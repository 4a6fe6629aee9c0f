/* escape.h - the one escaper per kind of output for strings that come from
 * a run file (names, description, metadata, call sites, provenance) or
 * from anywhere else outside the program. A run file is input from
 * strangers: none of its strings may reach a terminal, a JSON document or
 * an XML page raw. Internal.
 *
 *   text  for terminals and logs: printable characters as they are; "\\"
 *         as "\\\\"; newline, tab and CR as "\n", "\t", "\r"; other C0
 *         controls and DEL as "\x1b"; C1 controls and the bidirectional
 *         and line-separator formatting characters (U+061C, U+200E/F,
 *         U+2028/9, U+202A..E, U+2066..9) as "\u0085"; each byte that is
 *         not valid UTF-8 as "\xff". One line, valid UTF-8, always.
 *   JSON  a quoted string: '"' and '\\' escaped, \n \t \r \b \f, every
 *         other control and the characters above as \u00XX / \uXXXX;
 *         each invalid byte becomes U+FFFD ("\ufffd"). Valid JSON.
 *   XML   text or attribute value: & < > " ' as entities; tab, newline
 *         and CR as &#9; &#10; &#13; (kept in attributes too); DEL, C1
 *         and the characters above as &#x..; references; the C0 controls
 *         XML 1.0 forbids, U+FFFE, U+FFFF and each invalid byte become
 *         U+FFFD. Well-formed XML 1.0.
 */
#ifndef RD_ESCAPE_H
#define RD_ESCAPE_H

#include <stddef.h>

#include "common/strbuf.h"

/* Append s (NULL = "") escaped; on out of memory b->failed is set. */
void rd_strbuf_put_text(rd_strbuf *b, const char *s);
void rd_strbuf_put_json(rd_strbuf *b, const char *s); /* with the quotes */
void rd_strbuf_put_xml(rd_strbuf *b, const char *s);

/* s text-escaped into dst (cap bytes, cap >= 1), NUL-terminated; cut short
 * so that neither an escape nor a UTF-8 character is split. Returns the
 * length written. */
size_t rd_text_escape(char *dst, size_t cap, const char *s);

/* Text-escaped copies for printf-style arguments: each call returns the
 * escaped s in the next of RD_ESC_SLOTS reused buffers, valid until the
 * ring comes round to it again ("?" when memory runs out). Zero-initialise
 * the ring; rd_esc_ring_free releases it. */
#define RD_ESC_SLOTS 8
typedef struct rd_esc_ring {
    rd_strbuf slot[RD_ESC_SLOTS];
    int next;
} rd_esc_ring;
const char *rd_esc_text(rd_esc_ring *r, const char *s);
void rd_esc_ring_free(rd_esc_ring *r);

#endif
