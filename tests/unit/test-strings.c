/*
 * test-strings.c - strings in and out of a run file: the UTF-8 decoder and
 * checker (lib/common/utf8.c) and the three escapers (lib/common/escape.c) against
 * expected strings worked out by hand; resdiag_open refusing names,
 * metadata and descriptions that are not UTF-8 or hold control characters;
 * a hook whose call site is not UTF-8 recording a valid one.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "common/escape.h"
#include "fixture.h"
#include "resdiag.h"
#include "common/utf8.h"

/* ------------------------------------------------------------- UTF-8 */

START_TEST(utf8_next_accepts_valid_sequences_and_nothing_else)
{
    static const struct {
        const char *s;
        size_t n, len;
        uint32_t cp;
    } t[] = {
        { "a", 1, 1, 'a' },
        { "\xc3\xa9", 2, 2, 0xe9 },
        { "\xe2\x80\x94", 3, 3, 0x2014 },
        { "\xf0\x9f\x98\x80", 4, 4, 0x1f600 },
        { "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff },
        { "\xc2\x85", 2, 2, 0x85 },
        { "\xff", 1, 0, 0 },                 /* never in UTF-8 */
        { "\xfe", 1, 0, 0 },
        { "\x80", 1, 0, 0 },                 /* lone continuation */
        { "\xc0\xaf", 2, 0, 0 },             /* overlong '/' */
        { "\xc1\xbf", 2, 0, 0 },             /* overlong */
        { "\xe0\x80\xaf", 3, 0, 0 },         /* overlong, 3 bytes */
        { "\xf0\x80\x80\xaf", 4, 0, 0 },     /* overlong, 4 bytes */
        { "\xed\xa0\x80", 3, 0, 0 },         /* surrogate U+D800 */
        { "\xf4\x90\x80\x80", 4, 0, 0 },     /* U+110000 */
        { "\xe2\x82", 2, 0, 0 },             /* cut short */
        { "\xe2\x82\xac", 2, 0, 0 },         /* cut short by n */
        { "\xc3\x28", 2, 0, 0 },             /* continuation missing */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t cp = 0;
        size_t len = rd_utf8_next((const unsigned char *)t[i].s, t[i].n, &cp);
        ck_assert_msg(len == t[i].len, "case %zu: length %zu, expected %zu", i, len, t[i].len);
        if (len)
            ck_assert_msg(cp == t[i].cp, "case %zu: U+%04X", i, (unsigned)cp);
    }
}
END_TEST

START_TEST(utf8_check_finds_the_first_bad_byte)
{
    size_t at = 99;
    ck_assert_int_eq(rd_utf8_check("attn", 0, &at), RD_TEXT_OK);
    ck_assert_int_eq(rd_utf8_check("", 0, &at), RD_TEXT_OK);
    ck_assert_int_eq(rd_utf8_check("caf\xc3\xa9 \xe2\x80\x94", 0, &at), RD_TEXT_OK);
    ck_assert_int_eq(rd_utf8_check("a\nb\tc", 1, &at), RD_TEXT_OK);
    ck_assert_int_eq(rd_utf8_check("a\nb", 0, &at), RD_TEXT_CONTROL);
    ck_assert_uint_eq(at, 1);
    ck_assert_int_eq(rd_utf8_check("ab\rc", 1, &at), RD_TEXT_CONTROL);
    ck_assert_uint_eq(at, 2);
    ck_assert_int_eq(rd_utf8_check("x\x1b[8m", 1, &at), RD_TEXT_CONTROL);
    ck_assert_uint_eq(at, 1);
    ck_assert_int_eq(rd_utf8_check("\x7f", 1, &at), RD_TEXT_CONTROL);
    ck_assert_int_eq(rd_utf8_check("\xc3\xa9\xc2\x9b", 1, &at), RD_TEXT_CONTROL); /* C1 CSI */
    ck_assert_uint_eq(at, 2);
    ck_assert_int_eq(rd_utf8_check("ab\xff", 1, &at), RD_TEXT_NOT_UTF8);
    ck_assert_uint_eq(at, 2);
    ck_assert_int_eq(rd_utf8_check("ok\xc0\xaf", 1, &at), RD_TEXT_NOT_UTF8);
    ck_assert_uint_eq(at, 2);
    ck_assert_int_eq(rd_utf8_check("end\xe2\x82", 1, NULL), RD_TEXT_NOT_UTF8);
}
END_TEST

START_TEST(utf8_scrub_replaces_bad_bytes_and_controls_in_place)
{
    char s[] = "a\xff" "b\xc0\xaf" "c\x1b\xc2\x85\xc3\xa9\xe2\x80";
    rd_utf8_scrub(s);
    /* each bad byte one '?', the 2-byte C1 control two, the e-acute kept */
    ck_assert_str_eq(s, "a?b??c???\xc3\xa9??");
}
END_TEST

/* ----------------------------------------------------------- escapers */

static const char hostile[] =
    "a\\b\n\t\r\x1b[8m\x7f\xc2\x85\xe2\x80\xae\"<&>'\xff\xfe\xc0\xaf\x80\xc3\xa9\x01\xe2\x82";

START_TEST(text_escaper_shows_every_control_and_bad_byte)
{
    rd_strbuf b = { 0 };
    rd_strbuf_put_text(&b, hostile);
    char *s = rd_strbuf_finish(&b);
    ck_assert_str_eq(s, "a\\\\b\\n\\t\\r\\x1b[8m\\x7f\\u0085\\u202e\"<&>'"
                        "\\xff\\xfe\\xc0\\xaf\\x80\xc3\xa9\\x01\\xe2\\x82");
    free(s);
    /* plain text, UTF-8 included, passes unchanged */
    rd_strbuf c = { 0 };
    rd_strbuf_put_text(&c, "layers 0-3 \xe2\x80\x94 caf\xc3\xa9");
    s = rd_strbuf_finish(&c);
    ck_assert_str_eq(s, "layers 0-3 \xe2\x80\x94 caf\xc3\xa9");
    free(s);
}
END_TEST

START_TEST(json_escaper_gives_a_valid_string)
{
    rd_strbuf b = { 0 };
    rd_strbuf_put_json(&b, hostile);
    rd_strbuf_put_json(&b, "\b\f\xe2\x80\xa8");
    rd_strbuf_put_json(&b, NULL);
    char *s = rd_strbuf_finish(&b);
    ck_assert_str_eq(s, "\"a\\\\b\\n\\t\\r\\u001b[8m\\u007f\\u0085\\u202e\\\"<&>'"
                        "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\xc3\xa9\\u0001\\ufffd\\ufffd\""
                        "\"\\b\\f\\u2028\"" "\"\"");
    free(s);
}
END_TEST

START_TEST(xml_escaper_gives_well_formed_text)
{
    rd_strbuf b = { 0 };
    rd_strbuf_put_xml(&b, hostile);
    rd_strbuf_put_xml(&b, "|\xef\xbf\xbe\xef\xbf\xbf\xef\xbf\xbd");
    char *s = rd_strbuf_finish(&b);
    ck_assert_str_eq(s, "a\\b&#10;&#9;&#13;\xef\xbf\xbd[8m&#x7f;&#x85;&#x202e;&quot;&lt;&amp;"
                        "&gt;&#39;\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
}
END_TEST

START_TEST(bounded_text_escape_never_splits_an_escape_or_a_character)
{
    char buf[16];
    ck_assert_uint_eq(rd_text_escape(buf, 7, "ab\x1b"), 6);
    ck_assert_str_eq(buf, "ab\\x1b");
    ck_assert_uint_eq(rd_text_escape(buf, 6, "ab\x1b"), 2); /* "\x1b" would not fit */
    ck_assert_str_eq(buf, "ab");
    ck_assert_uint_eq(rd_text_escape(buf, 4, "a\xc3\xa9z"), 3);
    ck_assert_str_eq(buf, "a\xc3\xa9");
    ck_assert_uint_eq(rd_text_escape(buf, 3, "a\xc3\xa9z"), 1);
    ck_assert_str_eq(buf, "a");
    ck_assert_uint_eq(rd_text_escape(buf, 1, "abc"), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(escape_ring_hands_out_separate_buffers)
{
    rd_esc_ring r = { 0 };
    const char *a = rd_esc_text(&r, "x\ny");
    const char *b = rd_esc_text(&r, "\x1b");
    ck_assert_str_eq(a, "x\\ny");
    ck_assert_str_eq(b, "\\x1b");
    ck_assert_str_eq(rd_esc_text(&r, NULL), "");
    /* after a full round a slot is reused, with its new text only */
    for (int i = 0; i < RD_ESC_SLOTS; i++)
        rd_esc_text(&r, "a longer string than before, to grow the slot");
    ck_assert_str_eq(rd_esc_text(&r, "s"), "s");
    rd_esc_ring_free(&r);
}
END_TEST

/* ------------------------------------------------------------ writer */

static int log_count;
static char log_last[1024];
static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    log_count++;
    snprintf(log_last, sizeof log_last, "%s", msg);
}

static char tmpdir[256];
static int n_paths;

/* A fresh path for each run. */
static const char *fresh_path(void)
{
    static char p[320];
    snprintf(p, sizeof p, "%s/run%d.h5", tmpdir, n_paths++);
    return p;
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/resdiag-test-strings-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    n_paths = 0;
    log_count = 0;
    resdiag_set_log_handler(capture_log, NULL);
}

static void teardown(void)
{
    for (int i = 0; i < n_paths; i++) {
        char p[320];
        snprintf(p, sizeof p, "%s/run%d.h5", tmpdir, i);
        unlink(p);
    }
    rmdir(tmpdir);
    resdiag_set_log_handler(NULL, NULL);
}

static const char *sub_names[2] = { "attn", "mlp" };
static const char *param_names[1] = { "mlp.w2" };
static const char *meta[4] = { "optimizer", "adamw", "note", "plain" };

static resdiag_model model(void)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 2, .cols = 4, .sublayers = 2,
        .sublayer_names = sub_names, .layer_params = 1, .layer_param_names = param_names });
    m.n_meta = 2;
    m.meta = meta;
    return m;
}

typedef struct bad_string {
    const char *what;       /* in the message */
    int field;              /* 0 description, 1 sublayer 1, 2 param 0, 3 meta key 1, 4 meta value 1 */
    const char *value;
} bad_string;

static const bad_string bad_strings[] = {
    { "description is not valid UTF-8 (byte 0xff at offset 1)", 0, "a\xff" },
    { "description is not valid UTF-8 (byte 0xc0 at offset 0)", 0, "\xc0\xaf" },
    { "description is not valid UTF-8 (byte 0xe2 at offset 3)", 0, "end\xe2\x82" },
    { "description contains a control character (byte 0x1b at offset 8)", 0,
      "innocent\x1b[8m" },
    { "description contains a control character (byte 0x0d at offset 1)", 0, "a\rb" },
    { "sublayer_names[1] contains a control character (byte 0x1b at offset 2)", 1,
      "ml\x1b[31mp" },
    { "sublayer_names[1] contains a control character (byte 0x0a at offset 3)", 1, "mlp\n" },
    { "sublayer_names[1] contains a control character (byte 0xc2 at offset 0)", 1,
      "\xc2\x85mlp" },
    { "sublayer_names[1] is not valid UTF-8 (byte 0x80 at offset 1)", 1, "m\x80" },
    { "layer_param_names[0] is not valid UTF-8 (byte 0xfe at offset 0)", 2, "\xfe" },
    { "meta key[1] contains a control character (byte 0x0a at offset 4)", 3,
      "note\nPlacement: pre-norm (confidence high)" },
    { "meta key[1] is not valid UTF-8", 3, "n\xff" },
    { "the value of meta key 'note' is not valid UTF-8 (byte 0xff at offset 5)", 4,
      "plain\xff" },
    { "the value of meta key 'note' contains a control character (byte 0x07 at offset 1)",
      4, "v\x07" },
};

START_TEST(open_refuses_strings_that_are_not_clean_utf8)
{
    const bad_string *b = &bad_strings[_i];
    resdiag_model m = model();
    const char *subs[2] = { "attn", "mlp" }, *params[1] = { "mlp.w2" };
    const char *kv[4] = { "optimizer", "adamw", "note", "plain" };
    m.sublayer_names = subs;
    m.layer_param_names = params;
    m.meta = kv;
    if (b->field == 0)
        m.description = b->value;
    else if (b->field == 1)
        subs[1] = b->value;
    else if (b->field == 2)
        params[0] = b->value;
    else if (b->field == 3)
        kv[2] = b->value;
    else
        kv[3] = b->value;
    const char *p = fresh_path();
    resdiag *r = (resdiag *)&m;
    log_count = 0;
    ck_assert_int_eq(resdiag_open(&r, p, &m, NULL), RESDIAG_E_INVALID);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(log_count, 1);
    ck_assert_msg(strstr(log_last, b->what) != NULL, "case %d: '%s' not in '%s'", _i, b->what,
                  log_last);
    /* the message names the string but does not repeat it */
    ck_assert_int_eq(rd_utf8_check(log_last, 0, NULL), RD_TEXT_OK);
    ck_assert_int_ne(access(p, F_OK), 0);
}
END_TEST

static void one_step(resdiag *r, const char *file, int line)
{
    float x[3 * 4];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN,
                                        resdiag_f32(x, 3, 4), file, line),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
}

START_TEST(free_text_keeps_newlines_and_tabs)
{
    resdiag_model m = model();
    const char *kv[4] = { "optimizer", "adamw", "note", "line 1\nline\t2" };
    m.meta = kv;
    m.description = "caf\xc3\xa9 model\n\tsecond line";
    const char *p = fresh_path();
    resdiag *r = fixture_open(p, &m, NULL);
    one_step(r, __FILE__, __LINE__);
    resdiag_destroy(r);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, p), RESDIAG_OK);
    const resdiag_run_info *in = resdiag_reader_info(rd);
    ck_assert_str_eq(in->description, "caf\xc3\xa9 model\n\tsecond line");
    ck_assert_str_eq(in->meta[3], "line 1\nline\t2");
    /* provenance from the system is scrubbed to clean UTF-8 too */
    ck_assert_int_eq(rd_utf8_check(in->program, 0, NULL), RD_TEXT_OK);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(a_call_site_that_is_not_utf8_is_recorded_as_valid_utf8)
{
    resdiag_model m = model();
    const char *p = fresh_path();
    resdiag *r = fixture_open(p, &m, NULL);
    /* what __FILE__ can be: any bytes of a path */
    one_step(r, "src\xff/\xc0\xafmodel\x1b]0;title\x07.c", 42);
    resdiag_destroy(r);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, p), RESDIAG_OK);
    const char *cs = resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN);
    ck_assert_str_eq(cs, "src?/??model?]0;title?.c:42");
    resdiag_reader_destroy(rd);

    /* a long path keeps its end; the cut falls inside a UTF-8 character */
    char file[300];
    memset(file, 'd', sizeof file);
    memcpy(file, "/\xc3\xa9", 3);
    for (int i = 3; i + 2 < 280; i += 2)
        memcpy(file + i, "\xc3\xa9", 2);
    snprintf(file + 280, sizeof file - 280, "/m\xff.c");
    p = fresh_path();
    ck_assert_int_eq(resdiag_open(&r, p, &m, NULL), RESDIAG_OK);
    one_step(r, file, 7);
    resdiag_destroy(r);
    ck_assert_int_eq(resdiag_reader_open(&rd, p), RESDIAG_OK);
    cs = resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN);
    ck_assert_int_eq(rd_utf8_check(cs, 0, NULL), RD_TEXT_OK);
    ck_assert_msg(strncmp(cs, "...", 3) == 0, "'%s'", cs);
    size_t n = strlen(cs);
    ck_assert_uint_le(n, 127);
    ck_assert_str_eq(cs + n - 7, "/m?.c:7");
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(log_messages_reach_the_handler_escaped)
{
    resdiag_model m = model();
    const char *p = fresh_path();
    resdiag *r = fixture_open(p, &m, NULL);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    float x[4] = { 1, 2, 3, 4 };
    log_count = 0;
    /* a bad call whose message quotes the call site */
    ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 99, 0, RESDIAG_STREAM_IN,
                                        resdiag_f32(x, 1, 4), "a\x1b[8m\nb\xff.c", 5),
                     RESDIAG_E_RANGE);
    ck_assert_int_eq(log_count, 1);
    ck_assert_msg(strstr(log_last, "a\\x1b[8m\\nb\\xff.c:5") != NULL, "%s", log_last);
    ck_assert_int_eq(rd_utf8_check(log_last, 0, NULL), RD_TEXT_OK);
    resdiag_destroy(r);
}
END_TEST

static const check_program program = {
    .name = "strings",
};
CHECK_MAIN(&program,
           CHECK_CASE("utf8-and-escapers", 0),
               CHECK_TEST(utf8_next_accepts_valid_sequences_and_nothing_else),
               CHECK_TEST(utf8_check_finds_the_first_bad_byte),
               CHECK_TEST(utf8_scrub_replaces_bad_bytes_and_controls_in_place),
               CHECK_TEST(text_escaper_shows_every_control_and_bad_byte),
               CHECK_TEST(json_escaper_gives_a_valid_string),
               CHECK_TEST(xml_escaper_gives_well_formed_text),
               CHECK_TEST(bounded_text_escape_never_splits_an_escape_or_a_character),
               CHECK_TEST(escape_ring_hands_out_separate_buffers),
           CHECK_CASE_FIXTURE("writer", 60, setup, teardown),
               CHECK_LOOP(open_refuses_strings_that_are_not_clean_utf8, 0, (int)(sizeof bad_strings / sizeof bad_strings[0])),
               CHECK_TEST(free_text_keeps_newlines_and_tabs),
               CHECK_TEST(a_call_site_that_is_not_utf8_is_recorded_as_valid_utf8),
               CHECK_TEST(log_messages_reach_the_handler_escaped))
