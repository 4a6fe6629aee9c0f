/*
 * test-same-as.c - one tensor, several sites (resdiag_observe_same_as,
 * resdiag_param_grad_same_as): a run that copies records, through the
 * reader, the same bits as a run that reads the tensor again at every site
 * (fields, sketch, CALL_SEQ, calls, update ratio, in both schemas, with
 * several micro-batches per step), but for the call sites and the aliases
 * of copies within a sublayer; what is refused (a source not observed, a
 * width, itself, a sketch that cannot be re-signed, relations the file
 * cannot mark, out of range, busy), each logged with file:line; the no-op
 * cases.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"
#include "run-files.h"
#include "value-hash.h"

enum { L = 3, S = 2, D = 24, K = 8, V = 40, MAX_ROWS = 16, MICRO = 3, STEPS = 3 };
static const char *const sub_names[S] = { "attn", "mlp" };
static const char *const lparams[1] = { "mlp.w2" };
static const char *const mparams[2] = { "head.w", "embed.wte" };

static resdiag *open_model(const char *name, int schema, int k, int one_call)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names, .layer_params = 1, .layer_param_names = lparams,
        .model_params = 2, .model_param_names = mparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = schema;
    o.sketch_size = k;
    o.one_call_per_site = one_call;
    return open_run_with(name, &m, &o);
}

/* A tensor of rows x cols f32 values of seed (the buffer stays). */
static resdiag_tensor tensor(unsigned seed, int rows, int cols)
{
    static float bufs[64][MAX_ROWS * V];
    static int next;
    float *b = bufs[next++ % 64];
    for (int i = 0; i < rows * cols; i++)
        b[i] = (float)((int)(value_hash(seed, i) % 2001u) - 1000) / 256.0f;
    return resdiag_tensor_make(b, RESDIAG_DTYPE_F32, rows, cols, 0);
}

/* The forward and backward pass of one micro-batch of `rows` tokens. Every
 * tensor that is one buffer in this "trainer" is observed by reading in
 * run A (copy 0) and by resdiag_observe_same_as in run B (copy 1): the
 * stream entering each sublayer is the one leaving the one before (the
 * embedding's for the first), the final norm's input the last stream, in
 * layer 1 the stream out is the norm's output (post-norm), in layer 2's
 * mlp the branch is the norm's output (a norm on the branch), in layer 0 the
 * first norm reads the stream and the second branch is the identity; backward,
 * the gradient leaving a sublayer's input is the one entering the
 * sublayer before's output; the two model parameters are tied. Reads name
 * "read.c", copies "copy.c". */
static void micro_batch(resdiag *r, int copy, unsigned seed, int rows)
{
    const resdiag_direction F = RESDIAG_FORWARD, B = RESDIAG_BACKWARD;
    resdiag_tensor embed = tensor(seed, rows, D);
    ck_assert_int_eq(resdiag_observe_at(r, F, 0, 0, RESDIAG_EMBED_OUT, embed, "read.c", 1),
                     RESDIAG_OK);
    resdiag_tensor prev = embed;
    int pl = -1, ps = 0; /* where prev was observed: -1 = embed_out */
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            unsigned q = seed * 131u + (unsigned)(l * S + s) * 7u;
            if (copy && pl < 0)
                ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_STREAM_IN, 0, 0,
                                                         RESDIAG_EMBED_OUT, "copy.c", 2),
                                 RESDIAG_OK);
            else if (copy)
                ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_STREAM_IN, pl, ps,
                                                         RESDIAG_STREAM_OUT, "copy.c", 3),
                                 RESDIAG_OK);
            else
                ck_assert_int_eq(resdiag_observe_at(r, F, l, s, RESDIAG_STREAM_IN, prev,
                                                    "read.c", 2), RESDIAG_OK);
            resdiag_tensor ni = tensor(q + 1, rows, D), no = tensor(q + 2, rows, D);
            resdiag_tensor br = tensor(q + 3, rows, D), out = tensor(q + 4, rows, D);
            if (l == 0 && s == 0 && copy)
                ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_NORM_IN, l, s,
                                                         RESDIAG_STREAM_IN, "copy.c", 9),
                                 RESDIAG_OK);
            else
                ck_assert_int_eq(resdiag_observe_at(r, F, l, s, RESDIAG_NORM_IN,
                                                    l == 0 && s == 0 ? prev : ni, "read.c", 3),
                                 RESDIAG_OK);
            ck_assert_int_eq(resdiag_observe_at(r, F, l, s, RESDIAG_NORM_OUT, no, "read.c", 4),
                             RESDIAG_OK);
            if (l == 2 && s == 1) {
                br = no;
                if (copy)
                    ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_BRANCH_OUT, l,
                                                             s, RESDIAG_NORM_OUT, "copy.c", 4),
                                     RESDIAG_OK);
            }
            if (l == 0 && s == 1) { /* an identity branch: the add's other side */
                br = prev;
                if (copy)
                    ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_BRANCH_OUT, l,
                                                             s, RESDIAG_STREAM_IN, "copy.c", 10),
                                     RESDIAG_OK);
            }
            if (!copy || !((l == 2 && s == 1) || (l == 0 && s == 1)))
                ck_assert_int_eq(resdiag_observe_at(r, F, l, s, RESDIAG_BRANCH_OUT, br,
                                                    "read.c", 5), RESDIAG_OK);
            if (l == 1) {
                out = no;
                if (copy)
                    ck_assert_int_eq(resdiag_observe_same_as(r, F, l, s, RESDIAG_STREAM_OUT, l,
                                                             s, RESDIAG_NORM_OUT, "copy.c", 5),
                                     RESDIAG_OK);
            }
            if (!copy || l != 1)
                ck_assert_int_eq(resdiag_observe_at(r, F, l, s, RESDIAG_STREAM_OUT, out,
                                                    "read.c", 6), RESDIAG_OK);
            prev = out;
            pl = l;
            ps = s;
        }
    if (copy)
        ck_assert_int_eq(resdiag_observe_same_as(r, F, 0, 0, RESDIAG_FINAL_NORM_IN, L - 1,
                                                 S - 1, RESDIAG_STREAM_OUT, "copy.c", 6),
                         RESDIAG_OK);
    else
        ck_assert_int_eq(resdiag_observe_at(r, F, 0, 0, RESDIAG_FINAL_NORM_IN, prev, "read.c", 7),
                         RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_at(r, F, 0, 0, RESDIAG_FINAL_NORM_OUT,
                                        tensor(seed + 5, rows, D), "read.c", 8), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_at(r, F, 0, 0, RESDIAG_LOGITS, tensor(seed + 6, rows, V),
                                        "read.c", 9), RESDIAG_OK);
    /* backward, from the last sublayer down */
    for (int l = L - 1; l >= 0; l--)
        for (int s = S - 1; s >= 0; s--) {
            unsigned q = seed * 977u + (unsigned)(l * S + s) * 5u;
            resdiag_tensor gin = tensor(q, rows, D);
            ck_assert_int_eq(resdiag_observe_at(r, B, l, s, RESDIAG_STREAM_IN, gin, "read.c",
                                                10), RESDIAG_OK);
            int nl = s > 0 ? l : l - 1, ns = s > 0 ? s - 1 : S - 1;
            if (nl < 0)
                continue;
            if (copy)
                ck_assert_int_eq(resdiag_observe_same_as(r, B, nl, ns, RESDIAG_STREAM_OUT, l, s,
                                                         RESDIAG_STREAM_IN, "copy.c", 7),
                                 RESDIAG_OK);
            else
                ck_assert_int_eq(resdiag_observe_at(r, B, nl, ns, RESDIAG_STREAM_OUT, gin,
                                                    "read.c", 11), RESDIAG_OK);
        }
    for (int l = 0; l < L; l++)
        ck_assert_int_eq(resdiag_param_grad_at(r, l, "mlp.w2", tensor(seed + 40u + (unsigned)l,
                                                                      rows, D), "read.c", 12),
                         RESDIAG_OK);
    resdiag_tensor wte = tensor(seed + 50, rows, V);
    ck_assert_int_eq(resdiag_param_grad_at(r, RESDIAG_MODEL_LEVEL, "head.w", wte, "read.c", 13),
                     RESDIAG_OK);
    if (copy)
        ck_assert_int_eq(resdiag_param_grad_same_as(r, RESDIAG_MODEL_LEVEL, "embed.wte",
                                                    RESDIAG_MODEL_LEVEL, "head.w", "copy.c", 8),
                         RESDIAG_OK);
    else
        ck_assert_int_eq(resdiag_param_grad_at(r, RESDIAG_MODEL_LEVEL, "embed.wte", wte,
                                               "read.c", 14), RESDIAG_OK);
}

static void write_run(const char *name, int schema, int copy)
{
    static const int rows[MICRO] = { 5, 7, 4 };
    resdiag *r = open_model(name, schema, K, 0);
    for (int step = 0; step < STEPS; step++) {
        ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
        for (int m = 0; m < MICRO; m++)
            micro_batch(r, copy, (unsigned)(step * 10 + m + 1), rows[(step + m) % MICRO]);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    close_run(r);
}

/* Every dataset of the two runs (but the wall-clock times and the aliases,
 * checked apart) holds the same values; returns how many were compared. */
static int assert_same_datasets(resdiag_reader *a, resdiag_reader *b)
{
    ck_assert_int_eq(resdiag_reader_n_datasets(a), resdiag_reader_n_datasets(b));
    static double va[1 << 16], vb[1 << 16];
    int compared = 0;
    for (int i = 0; i < resdiag_reader_n_datasets(a); i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        int64_t dims[8];
        int rank = 0;
        if (strstr(name, "time") || strstr(name, "alias") ||
            resdiag_reader_dims(a, name, dims, 8, &rank) != RESDIAG_OK || rank < 1)
            continue;
        size_t len = 1;
        for (int k = 0; k < rank; k++)
            len *= (size_t)dims[k];
        ck_assert_uint_le(len, sizeof va / sizeof *va);
        if (resdiag_reader_read(a, name, 0, dims[0], va, len) != RESDIAG_OK)
            continue; /* not a time series of numbers */
        ck_assert_int_eq(resdiag_reader_read(b, name, 0, dims[0], vb, len), RESDIAG_OK);
        for (size_t k = 0; k < len; k++)
            ck_assert_msg((isnan(va[k]) && isnan(vb[k])) || memcmp(&va[k], &vb[k], 8) == 0,
                          "%s[%zu]: %.17g read, %.17g copied", name, k, va[k], vb[k]);
        compared++;
    }
    return compared;
}

static int copied_site(int dir, int l, int s, int b)
{
    if (dir == RESDIAG_FORWARD)
        return b == RESDIAG_STREAM_IN || (l == 1 && b == RESDIAG_STREAM_OUT) ||
               (l == 2 && s == 1 && b == RESDIAG_BRANCH_OUT) ||
               (l == 0 && s == 1 && b == RESDIAG_BRANCH_OUT) ||
               (l == 0 && s == 0 && b == RESDIAG_NORM_IN);
    return b == RESDIAG_STREAM_OUT && !(l == L - 1 && s == S - 1);
}

START_TEST(a_copy_records_what_a_read_records)
{
    for (int schema = 1; schema <= 2; schema++) {
        write_run("read.h5", schema, 0);
        write_run("copy.h5", schema, 1);
        resdiag_reader *a = read_run("read.h5"), *b = read_run("copy.h5");
        ck_assert_int_eq(resdiag_reader_info(a)->n_steps, STEPS);
        ck_assert_int_ge(assert_same_datasets(a, b), 12);
        /* the per-token update ratio was paired in every sublayer */
        for (int l = 0; l < L; l++)
            for (int s = 0; s < S; s++) {
                double u[RESDIAG_N_UPDATE_FIELDS];
                ck_assert_int_eq(resdiag_reader_update(b, 1, l, s, u), RESDIAG_OK);
                ck_assert(isfinite(u[RESDIAG_UPDATE_RATIO_TOK_MEAN]));
            }
        double f[RESDIAG_N_FIELDS];
        int obs = 0;
        ck_assert_int_eq(resdiag_reader_param(b, 2, RESDIAG_MODEL_LEVEL, "embed.wte", f, &obs),
                         RESDIAG_OK);
        ck_assert(obs && f[RESDIAG_FIELD_ROWS] == 16);
        for (int dir = 0; dir < 2; dir++)
            for (int l = 0; l < L; l++)
                for (int s = 0; s < S; s++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        const char *cb = resdiag_reader_callsite(b, dir, l, s, site);
                        if (copied_site(dir, l, s, site))
                            ck_assert_msg(strncmp(cb, "copy.c:", 7) == 0, "%d %d %d %d: %s",
                                          dir, l, s, site, cb);
                        else
                            ck_assert_str_eq(cb, resdiag_reader_callsite(a, dir, l, s, site));
                    }
        /* aliases: the copies within a sublayer only, in either direction */
        for (int dir = 0; dir < 2; dir++)
            for (int l = 0; l < L; l++)
                for (int s = 0; s < S; s++) {
                    int pair = -1; /* the expected pair: site x and NORM_OUT or STREAM_IN */
                    if (dir == RESDIAG_FORWARD && (l == 1 || (l == 2 && s == 1)))
                        pair = l == 1 ? RESDIAG_STREAM_OUT : RESDIAG_BRANCH_OUT;
                    if (dir == RESDIAG_FORWARD && l == 0)
                        pair = s ? RESDIAG_BRANCH_OUT : RESDIAG_NORM_IN;
                    int other = l == 0 ? RESDIAG_STREAM_IN : RESDIAG_NORM_OUT, seen = 0;
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        int same = -2;
                        ck_assert_int_eq(resdiag_reader_alias(b, 1, dir, l, s, site, &same),
                                         RESDIAG_OK);
                        if (same < 0)
                            continue;
                        ck_assert_msg((site == pair && same == other) ||
                                      (site == other && same == pair),
                                      "alias %d %d %d %d: %d", dir, l, s, site, same);
                        seen = 1;
                    }
                    ck_assert_int_eq(seen, pair >= 0);
                }
        ck_assert_str_eq(resdiag_reader_callsite(b, 0, 0, 0, RESDIAG_FINAL_NORM_IN), "copy.c:6");
        resdiag_reader_destroy(a);
        resdiag_reader_destroy(b);
        remove_run("read.h5");
        remove_run("copy.h5");
    }
}
END_TEST

/* The copy is of the source's most recent call, not of the merge of its
 * calls: a site copied after the second micro-batch only (its first call)
 * is refused with a sketch (its rows would be signed from row 0, the
 * source's second call's from row 5), and without one records the second
 * tensor alone. */
START_TEST(a_copy_is_of_the_most_recent_call)
{
    for (int k = K; k >= 0; k -= K) {
        resdiag *r = open_model("last.h5", 1, k, 0), *w = open_model("want.h5", 1, k, 0);
        resdiag_tensor t1 = tensor(1, 5, D), t2 = tensor(2, 7, D);
        ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_begin(w, 0), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_OUT, t1), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_OUT, t2), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(w, 0, 0, RESDIAG_STREAM_OUT, t2), RESDIAG_OK);
        log_all[0] = 0;
        resdiag_status st = resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0,
                                                    RESDIAG_STREAM_OUT, 0, 0, RESDIAG_NORM_OUT,
                                                    "late.c", 31);
        if (k) {
            ck_assert_int_eq(st, RESDIAG_E_STATE);
            ck_assert_ptr_nonnull(strstr(log_all, "late.c:31"));
        } else {
            ck_assert_int_eq(st, RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(w), RESDIAG_OK);
        close_run(r);
        close_run(w);
        resdiag_reader *a = read_run("last.h5"), *b = read_run("want.h5");
        double fa[RESDIAG_N_FIELDS], fb[RESDIAG_N_FIELDS];
        int oa = 0, ob = 0;
        ck_assert_int_eq(resdiag_reader_site(a, 0, 0, 0, 0, RESDIAG_STREAM_OUT, fa, &oa),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_site(b, 0, 0, 0, 0, RESDIAG_STREAM_OUT, fb, &ob),
                         RESDIAG_OK);
        ck_assert_int_eq(oa, !k);
        if (!k)
            for (int i = 0; i < RESDIAG_N_FIELDS; i++)
                if (i != RESDIAG_FIELD_CALL_SEQ)
                    ck_assert_msg(memcmp(&fa[i], &fb[i], 8) == 0, "field %d: %.17g, want %.17g",
                                  i, fa[i], fb[i]);
        if (k)
            ck_assert(isnan(fa[RESDIAG_FIELD_ROWS]));
        else
            ck_assert_double_eq(fa[RESDIAG_FIELD_ROWS], 7);
        resdiag_reader_destroy(a);
        resdiag_reader_destroy(b);
        remove_run("last.h5");
        remove_run("want.h5");
    }
}
END_TEST

/* status of a copy, and that the log names file:line when it is an error */
static void expect(resdiag_status got, resdiag_status want, int line)
{
    ck_assert_msg(got == want, "line %d: status %d, want %d", line, (int)got, (int)want);
    if (want != RESDIAG_OK) {
        char where[32];
        snprintf(where, sizeof where, "bad.c:%d", line);
        ck_assert_msg(strstr(log_all, where) != NULL, "no %s in the log: %s", where, log_all);
    }
    log_all[0] = 0;
}

#define SAME(r, l, s, site, fl, fs, fsite, want)                                               \
    expect(resdiag_observe_same_as((r), RESDIAG_FORWARD, (l), (s), (site), (fl), (fs), (fsite), \
                                   "bad.c", __LINE__),                                         \
           (want), __LINE__)

START_TEST(bad_copies_are_refused)
{
    resdiag *r = open_model("bad.h5", 2, K, 0);
    const resdiag_site IN = RESDIAG_STREAM_IN, OUT = RESDIAG_STREAM_OUT, BR = RESDIAG_BRANCH_OUT;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    SAME(r, 0, 1, IN, 0, 0, OUT, RESDIAG_E_STATE); /* not observed yet */
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, OUT, tensor(1, 4, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, tensor(2, 4, V)), RESDIAG_OK);
    SAME(r, 0, 1, IN, 0, 0, RESDIAG_LOGITS, RESDIAG_E_SHAPE);
    SAME(r, 0, 0, OUT, 0, 0, OUT, RESDIAG_E_INVALID); /* itself */
    SAME(r, 0, 0, RESDIAG_EMBED_OUT, 2, 1, RESDIAG_EMBED_OUT, RESDIAG_E_INVALID);
    SAME(r, 3, 0, IN, 0, 0, OUT, RESDIAG_E_RANGE);
    SAME(r, 0, 2, IN, 0, 0, OUT, RESDIAG_E_RANGE);
    SAME(r, 0, 1, IN, -1, 0, OUT, RESDIAG_E_RANGE);
    SAME(r, 0, 1, IN, 0, 0, (resdiag_site)99, RESDIAG_E_RANGE);
    SAME(r, 0, 1, (resdiag_site)RESDIAG_N_BLOCK_SITES, 0, 0, OUT, RESDIAG_E_RANGE);
    /* this run writes schema 2: no room for the sites of schema 3, at either end */
    resdiag_status st = resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 1, RESDIAG_BRANCH_IN, 0,
                                                0, OUT, "bad.c", 41);
    ck_assert_msg(strstr(log_all, "branch_in needs a file of schema 3; this run writes schema 2"),
                  "%s", log_all);
    expect(st, RESDIAG_E_INVALID, 41);
    SAME(r, 0, 1, IN, 0, 1, RESDIAG_OUT_NORM_OUT, RESDIAG_E_INVALID);
    expect(resdiag_observe_same_as(r, (resdiag_direction)2, 0, 1, IN, 0, 0, OUT, "bad.c", 40),
           RESDIAG_E_INVALID, 40);
    /* what the head reads is compared with what enters the final norm */
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, tensor(3, 4, D)), RESDIAG_OK);
    SAME(r, 0, 0, RESDIAG_FINAL_NORM_OUT, 0, 0, RESDIAG_FINAL_NORM_IN, RESDIAG_E_INVALID);
    SAME(r, 0, 0, RESDIAG_FINAL_NORM_OUT, 0, 0, OUT, RESDIAG_E_INVALID);
    /* a parallel block is judged by its sublayers' stream_in being one
     * tensor: never by a copy, directly or from one source */
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, IN, tensor(4, 4, D)), RESDIAG_OK);
    SAME(r, 1, 1, IN, 1, 0, IN, RESDIAG_E_INVALID);
    SAME(r, 2, 0, IN, 0, 0, OUT, RESDIAG_OK);
    SAME(r, 2, 1, IN, 0, 0, OUT, RESDIAG_E_INVALID);
    SAME(r, 2, 1, BR, 2, 0, IN, RESDIAG_E_INVALID);
    SAME(r, 2, 0, BR, 2, 0, IN, RESDIAG_OK); /* one sublayer: an alias */
    SAME(r, 0, 1, IN, 0, 0, OUT, RESDIAG_OK); /* the stream from the sublayer before */
    /* a copy of a copy back into its origin */
    SAME(r, 0, 0, OUT, 0, 1, IN, RESDIAG_E_INVALID);
    /* the source busy: a hook that logs while it holds its slot (a second
     * call with one_call_per_site) is where a copy from it runs */
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);
    remove_run("bad.h5");
}
END_TEST

static resdiag *busy_run;
static resdiag_status busy_from, busy_into;
static void copy_while_busy(resdiag_log_priority prio, const char *msg, void *user)
{
    capture_log(prio, msg, user);
    if (busy_run && strstr(msg, "observed again")) {
        resdiag *r = busy_run;
        busy_run = NULL;
        busy_from = resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, 0, 0,
                                            RESDIAG_NORM_OUT, "busy.c", 51);
        busy_into = resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_OUT, 0, 0,
                                            RESDIAG_NORM_IN, "busy.c", 52);
    }
}

START_TEST(a_source_or_target_being_observed_is_busy)
{
    resdiag *r = open_model("busy.h5", 2, K, 1);
    resdiag_set_log_handler(copy_while_busy, NULL);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_IN, tensor(1, 4, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_OUT, tensor(2, 4, D)), RESDIAG_OK);
    busy_run = r;
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_OUT, tensor(3, 4, D)), RESDIAG_E_STATE);
    ck_assert_int_eq(busy_from, RESDIAG_E_BUSY);
    ck_assert_int_eq(busy_into, RESDIAG_E_BUSY);
    ck_assert_ptr_nonnull(strstr(log_all, "busy.c:51"));
    ck_assert_ptr_nonnull(strstr(log_all, "busy.c:52"));
    /* free again: the copy goes through */
    ck_assert_int_eq(resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, 0, 0,
                                             RESDIAG_NORM_OUT, "busy.c", 53), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);
    resdiag_set_log_handler(capture_log, NULL);
    remove_run("busy.h5");
}
END_TEST

#define PSAME(r, l, n, fl, fn, want) \
    expect(resdiag_param_grad_same_as((r), (l), (n), (fl), (fn), "bad.c", __LINE__), (want), \
           __LINE__)

START_TEST(bad_parameter_copies_are_refused)
{
    resdiag *r = open_model("pbad.h5", 2, K, 0);
    const int M = RESDIAG_MODEL_LEVEL;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    PSAME(r, M, "embed.wte", M, "head.w", RESDIAG_E_STATE);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, M, "head.w", tensor(1, 6, V)), RESDIAG_OK);
    PSAME(r, M, "head.w", M, "head.w", RESDIAG_E_INVALID);
    PSAME(r, M, "nope", M, "head.w", RESDIAG_E_RANGE);
    PSAME(r, M, "embed.wte", M, "nope", RESDIAG_E_RANGE);
    PSAME(r, 3, "mlp.w2", M, "head.w", RESDIAG_E_RANGE);
    PSAME(r, M, NULL, M, "head.w", RESDIAG_E_NULL);
    PSAME(r, M, "embed.wte", M, NULL, RESDIAG_E_NULL);
    PSAME(r, 0, "mlp.w2", M, "head.w", RESDIAG_OK); /* any shape: the gradient's */
    PSAME(r, M, "embed.wte", 0, "mlp.w2", RESDIAG_OK);
    PSAME(r, M, "head.w", M, "embed.wte", RESDIAG_E_INVALID); /* its own, through two copies */
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    close_run(r);
    resdiag_reader *rd = read_run("pbad.h5");
    double f[RESDIAG_N_FIELDS], g[RESDIAG_N_FIELDS];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_param(rd, 0, M, "head.w", f, &obs), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, M, "embed.wte", g, &obs), RESDIAG_OK);
    ck_assert(obs);
    ck_assert_double_eq(f[RESDIAG_FIELD_FROB], g[RESDIAG_FIELD_FROB]);
    ck_assert_double_eq(g[RESDIAG_FIELD_COLS], V);
    resdiag_reader_destroy(rd);
    remove_run("pbad.h5");
}
END_TEST

/* NULL handle, a paused run, a step not recorded, outside a step: OK,
 * nothing recorded, nothing logged. */
START_TEST(no_op_cases)
{
    ck_assert_int_eq(resdiag_observe_same_as(NULL, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0,
                                             0, RESDIAG_EMBED_OUT, "n.c", 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_same_as(NULL, 0, "a", 0, "b", "n.c", 1), RESDIAG_OK);
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names, .model_params = 2, .model_param_names = mparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.record_every = 2;
    resdiag *r = open_run_with("noop.h5", &m, &o);
    log_all[0] = 0;
    ck_assert_int_eq(resdiag_observe_same_as(r, RESDIAG_FORWARD, 9, 9, RESDIAG_STREAM_IN, 0, 0,
                                             RESDIAG_EMBED_OUT, "n.c", 2), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, tensor(1, 3, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "head.w", tensor(1, 3, D)),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK); /* not recorded */
    ck_assert_int_eq(resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, 0,
                                             RESDIAG_EMBED_OUT, "n.c", 3), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_same_as(r, RESDIAG_MODEL_LEVEL, "embed.wte",
                                                RESDIAG_MODEL_LEVEL, "head.w", "n.c", 3),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_set_enabled(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 2), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_same_as(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, 0, 0,
                                             RESDIAG_EMBED_OUT, "n.c", 4), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_ptr_null(strstr(log_all, "client bug"));
    close_run(r);
    resdiag_reader *rd = read_run("noop.h5");
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 1);
    double f[RESDIAG_N_FIELDS];
    int obs = 1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, 0, 0, 0, RESDIAG_STREAM_IN, f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "embed.wte", f, &obs),
                     RESDIAG_OK);
    ck_assert_int_eq(obs, 0);
    resdiag_reader_destroy(rd);
    remove_run("noop.h5");
}
END_TEST

static const check_program program = {
    .name = "same-as",
    .timeout = 60,
    .scratch = dir,
    .scratch_size = sizeof dir,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_TEST(a_copy_records_what_a_read_records),
           CHECK_TEST(a_copy_is_of_the_most_recent_call),
           CHECK_TEST(bad_copies_are_refused),
           CHECK_TEST(a_source_or_target_being_observed_is_busy),
           CHECK_TEST(bad_parameter_copies_are_refused),
           CHECK_TEST(no_op_cases))
