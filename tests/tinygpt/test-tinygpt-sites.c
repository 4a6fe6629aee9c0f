/*
 * test-tinygpt-sites.c - what the real tinygpt binary (argv[1]) records at
 * the block sites of each placement, read back through the public reader:
 * which sites are observed, which are copies of another site's tensor
 * (resdiag_reader_alias, the sketch identical), the relations that the
 * placement's algebra makes hold between the linear sketches (y = x + f,
 * norm_in = x, ...), the ones that must fail, and the order of the calls.
 * The expectations come from each block's formula (model.h), not from
 * tinygpt's hooks.
 *
 * Sites: x = stream_in, y = stream_out, f = branch_out, n_in/n_out =
 * norm_in/norm_out, b = branch_in, o_in/o_out = out_norm_in/out_norm_out.
 */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"

extern char **environ;

static const char *tinygpt; /* argv[1] */

enum { LAYERS = 2, ATTN = 0, MLP = 1, NSUB = 2 };

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-tinygpt-sites-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    static const char *const names[] = { "run.h5", "out", "err", NULL };
    char p[400];
    for (int i = 0; names[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
}

static const char *tmp(const char *name)
{
    static char buf[4][400];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* The whole of a small file, NUL-terminated (static buffer). */
static const char *slurp(const char *path)
{
    static char buf[1 << 14];
    FILE *f = fopen(path, "r");
    if (!f) return "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* tinygpt with the NULL-terminated arguments after a tiny model's, stdout
 * and stderr into tmpdir; fails unless it exits 0 with an empty stderr (a
 * refused hook would say so there). */
static void run_tinygpt(const char *first, ...)
{
    const char *argv[64];
    int argc = 0;
    static const char *const tiny[] = { "--layers", "2", "--d-model", "32", "--heads", "2",
                                        "--seq", "8", "--batch", "2", "--steps", "1",
                                        "--threads", "1", "--log-every", "1000" };
    argv[argc++] = tinygpt;
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) argv[argc++] = tiny[i];
    argv[argc++] = "--out";
    argv[argc++] = tmp("run.h5");
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *)) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    unlink(tmp("run.h5"));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, tmp("out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, tmp("err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, tinygpt, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tinygpt failed: %s",
                  slurp(tmp("err")));
    const char *err = slurp(tmp("err"));
    ck_assert_msg(err[0] == 0, "tinygpt said: %s", err);
}

static resdiag_reader *open_run(void)
{
    resdiag_reader *rd = fixture_read(tmp("run.h5"));
    ck_assert_int_gt(resdiag_reader_info(rd)->sketch_size, 0);
    return rd;
}

/* One observed tensor at step 0: its sketch, its Frobenius norm, element
 * count, call order and what it was recorded from. */
typedef struct site_rec {
    int observed;
    double sketch[RESDIAG_MAX_SKETCH];
    double frob, elements, call_seq;
    int same_as;
} site_rec;

static site_rec get(resdiag_reader *rd, int dir, int l, int s, resdiag_site site)
{
    site_rec r;
    memset(&r, 0, sizeof r);
    double f[RESDIAG_N_FIELDS];
    ck_assert_int_eq(resdiag_reader_site(rd, 0, (resdiag_direction)dir, l, s, site, f,
                                         &r.observed), RESDIAG_OK);
    if (!r.observed) return r;
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, (resdiag_direction)dir, l, s, site, r.sketch),
                     RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_alias(rd, 0, (resdiag_direction)dir, l, s, site, &r.same_as),
                     RESDIAG_OK);
    r.frob = f[RESDIAG_FIELD_FROB];
    r.elements = f[RESDIAG_FIELD_ROWS] * f[RESDIAG_FIELD_COLS];
    r.call_seq = f[RESDIAG_FIELD_CALL_SEQ];
    return r;
}

static const char *dir_name(int dir) { return dir ? "bwd" : "fwd"; }

/* lhs = sum_k c[k] * term[k] in every sketch bucket, within the bound of
 * the computation: each bucket sums E/K signed elements, whose absolute
 * sum is at most sqrt(E/K) ||t||_F (Cauchy-Schwarz); the kernel path sums
 * within rd_test_active_sum_tol of that, the file may keep a float (2^-24
 * of each), and the model's f32 add rounds each element up to three times
 * (DeepNorm: alpha to a float, alpha * x, the sum). */
static void check_sum(const site_rec *lhs, int n, const double *c, const site_rec *const *term,
                      int K, const char *what)
{
    const double tol = (double)rd_test_active_sum_tol(RESDIAG_DTYPE_F32) + 4 * 0x1p-24;
    double scale = lhs->frob;
    for (int k = 0; k < n; k++) scale += fabs(c[k]) * term[k]->frob;
    scale *= sqrt(lhs->elements / K);
    for (int m = 0; m < K; m++) {
        double v = lhs->sketch[m];
        for (int k = 0; k < n; k++) v -= c[k] * term[k]->sketch[m];
        ck_assert_msg(fabs(v) <= tol * scale, "%s: bucket %d off by %.3g > %.3g", what, m,
                      fabs(v), tol * scale);
    }
}

static void check_equal(const site_rec *a, const site_rec *b, int K, const char *what)
{
    const double one = 1;
    const site_rec *t[1] = { b };
    check_sum(a, 1, &one, t, K, what);
}

/* a and b are different tensors to the analysis: their sketches differ by
 * more than its FAIL level (0.2 of the larger). Used where the block makes
 * it so at gpt2 init: a norm's output (RMS 1) against its raw input (F's
 * output, of RMS ~0.01). */
static void check_differ(const site_rec *a, const site_rec *b, int K, const char *what)
{
    double d = 0, na = 0, nb = 0;
    for (int m = 0; m < K; m++) {
        d += (a->sketch[m] - b->sketch[m]) * (a->sketch[m] - b->sketch[m]);
        na += a->sketch[m] * a->sketch[m];
        nb += b->sketch[m] * b->sketch[m];
    }
    ck_assert_msg(sqrt(d) > 0.2 * sqrt(fmax(na, nb)), "%s: relative difference only %.3g", what,
                  sqrt(d / fmax(na, nb)));
}

/* `site` is a copy of `from` (resdiag_observe_same_as): marked as such,
 * and the very numbers of it. */
static void check_copy(const site_rec *site, const site_rec *from, resdiag_site from_site,
                       int K, const char *what)
{
    ck_assert_msg(site->same_as == (int)from_site, "%s: recorded from site %d, not %d", what,
                  site->same_as, (int)from_site);
    ck_assert_msg(memcmp(site->sketch, from->sketch, (size_t)K * sizeof *site->sketch) == 0,
                  "%s: the copy's sketch differs", what);
    ck_assert_msg(site->frob == from->frob, "%s: the copy's norm differs", what);
}

/* The sublayer kinds of model.h, per sublayer. */
typedef enum kind { PRE, POST, DEEP, SANDWICH, REORDERED, NONE, PARALLEL } kind;

typedef struct placement_case {
    const char *arg;                 /* --placement */
    kind sub[LAYERS][NSUB];
    resdiag_placement declared;
} placement_case;

static const placement_case cases[] = {
    { "pre", { { PRE, PRE }, { PRE, PRE } }, RESDIAG_PLACEMENT_PRE },
    { "post", { { POST, POST }, { POST, POST } }, RESDIAG_PLACEMENT_POST },
    { "sandwich", { { SANDWICH, SANDWICH }, { SANDWICH, SANDWICH } }, RESDIAG_PLACEMENT_SANDWICH },
    { "deepnorm", { { DEEP, DEEP }, { DEEP, DEEP } }, RESDIAG_PLACEMENT_DEEPNORM },
    { "mix:1", { { POST, POST }, { PRE, PRE } }, RESDIAG_PLACEMENT_MIXED },
    { "parallel", { { PARALLEL, PARALLEL }, { PARALLEL, PARALLEL } }, RESDIAG_PLACEMENT_PARALLEL },
    { "none", { { NONE, NONE }, { NONE, NONE } }, RESDIAG_PLACEMENT_NONE },
    { "reordered", { { REORDERED, REORDERED }, { REORDERED, REORDERED } },
      RESDIAG_PLACEMENT_REORDERED },
    { "hybrid", { { NONE, POST }, { NONE, POST } }, RESDIAG_PLACEMENT_PER_SUBLAYER },
};
enum { N_CASES = sizeof cases / sizeof *cases };

/* DeepNet's alpha for the test's L (model.h), from its formula. */
static double deepnorm_alpha(void) { return pow(2.0 * LAYERS, 0.25); }

/* Every layer and sublayer of one placement x norm, forward and backward. */
START_TEST(sites_hold_what_the_block_computes)
{
    const placement_case *pc = &cases[_i / 2];
    const char *norm = _i % 2 ? "rmsnorm" : "layernorm";
    run_tinygpt("--placement", pc->arg, "--norm", norm, NULL);
    resdiag_reader *rd = open_run();
    const resdiag_run_info *info = resdiag_reader_info(rd);
    ck_assert_int_eq(info->declared_placement, pc->declared);
    const int K = info->sketch_size;
    char what[160];

    for (int l = 0; l < LAYERS; l++)
        for (int s = 0; s < NSUB; s++) {
            kind k = pc->sub[l][s];
            int has_norm = k != NONE && k != REORDERED;
            int has_out_norm = k == SANDWICH || k == REORDERED;
            int norm_first = k == PRE || k == SANDWICH || k == PARALLEL; /* F reads Norm(x) */
            for (int dir = 0; dir < 2; dir++) {
                site_rec x = get(rd, dir, l, s, RESDIAG_STREAM_IN);
                site_rec y = get(rd, dir, l, s, RESDIAG_STREAM_OUT);
                site_rec f = get(rd, dir, l, s, RESDIAG_BRANCH_OUT);
                site_rec nin = get(rd, dir, l, s, RESDIAG_NORM_IN);
                site_rec nout = get(rd, dir, l, s, RESDIAG_NORM_OUT);
                site_rec b = get(rd, dir, l, s, RESDIAG_BRANCH_IN);
                site_rec oin = get(rd, dir, l, s, RESDIAG_OUT_NORM_IN);
                site_rec oout = get(rd, dir, l, s, RESDIAG_OUT_NORM_OUT);
#define WHAT(rel) (snprintf(what, sizeof what, "%s %s L%d/%d %s: %s", pc->arg, norm, l, s, \
                            dir_name(dir), rel), what)
                ck_assert_msg(x.observed && f.observed && b.observed, "%s", WHAT("observed"));
                ck_assert_msg(nin.observed == has_norm && nout.observed == has_norm, "%s",
                              WHAT("norm sites observed where there is an input or post norm"));
                ck_assert_msg(oin.observed == has_out_norm && oout.observed == has_out_norm,
                              "%s", WHAT("out_norm sites observed where F's output is normed"));

                /* What F reads: the input norm's output, or the stream. */
                if (norm_first)
                    check_copy(&b, &nout, RESDIAG_NORM_OUT, K, WHAT("branch_in = norm_out"));
                else
                    check_copy(&b, &x, RESDIAG_STREAM_IN, K, WHAT("branch_in = stream_in"));
                /* The input norm reads the stream, read again, not copied:
                 * that it reads the stream is evidence. */
                if (norm_first) {
                    ck_assert_msg(nin.same_as == -1, "%s", WHAT("norm_in read"));
                    check_equal(&nin, &x, K, WHAT("norm_in = stream_in"));
                }
                /* A norm on F's output: it reads F's raw output, and its
                 * output is what is added (one tensor). */
                if (has_out_norm) {
                    if (dir == RESDIAG_FORWARD) {
                        check_copy(&f, &oout, RESDIAG_OUT_NORM_OUT, K,
                                   WHAT("branch_out = out_norm_out"));
                        check_differ(&oin, &oout, K, WHAT("out_norm_in != out_norm_out"));
                    } else {
                        /* backward: the add's gradient first, the norm's after */
                        check_copy(&oout, &f, RESDIAG_BRANCH_OUT, K,
                                   WHAT("out_norm_out = branch_out"));
                    }
                    ck_assert_msg(oin.same_as == -1, "%s", WHAT("out_norm_in read"));
                }
                /* The add, forward: y = x + f, or the post norm's input is
                 * alpha x + f and its output is y. */
                if (dir == RESDIAG_FORWARD && k != PARALLEL) {
                    const double one[2] = { 1, 1 }, deep[2] = { deepnorm_alpha(), 1 };
                    const site_rec *xf[2] = { &x, &f };
                    if (k == POST || k == DEEP) {
                        check_sum(&nin, 2, k == DEEP ? deep : one, xf, K,
                                  WHAT("norm_in = alpha x + f"));
                        check_equal(&y, &nout, K, WHAT("stream_out = norm_out"));
                    } else {
                        check_sum(&y, 2, one, xf, K, WHAT("stream_out = x + f"));
                    }
                }
                /* The order of the calls is the forward's computation. */
                if (dir == RESDIAG_FORWARD && k != PARALLEL) {
                    ck_assert_msg(x.call_seq < b.call_seq && b.call_seq < f.call_seq &&
                                      f.call_seq < y.call_seq, "%s", WHAT("x < b < f < y"));
                    if (norm_first)
                        ck_assert_msg(nin.call_seq < nout.call_seq && nout.call_seq < b.call_seq,
                                      "%s", WHAT("norm_in < norm_out < branch_in"));
                    if (has_norm && !norm_first)
                        ck_assert_msg(f.call_seq < nin.call_seq && nin.call_seq < nout.call_seq &&
                                          nout.call_seq <= y.call_seq, "%s",
                                      WHAT("branch_out < norm_in < norm_out <= stream_out"));
                    if (has_out_norm)
                        ck_assert_msg(b.call_seq < oin.call_seq && oin.call_seq < oout.call_seq &&
                                          oout.call_seq < f.call_seq, "%s",
                                      WHAT("branch_in < out_norm_in < out_norm_out < branch_out"));
                }
#undef WHAT
            }
        }
    /* A parallel block: both sublayers read one stream, and the last
     * stream_out adds both branches. */
    if (pc->sub[0][0] == PARALLEL)
        for (int l = 0; l < LAYERS; l++) {
            site_rec xa = get(rd, 0, l, ATTN, RESDIAG_STREAM_IN);
            site_rec xm = get(rd, 0, l, MLP, RESDIAG_STREAM_IN);
            site_rec fa = get(rd, 0, l, ATTN, RESDIAG_BRANCH_OUT);
            site_rec fm = get(rd, 0, l, MLP, RESDIAG_BRANCH_OUT);
            site_rec y = get(rd, 0, l, MLP, RESDIAG_STREAM_OUT);
            const double one[3] = { 1, 1, 1 };
            const site_rec *t[3] = { &xa, &fa, &fm };
            snprintf(what, sizeof what, "parallel L%d: mlp stream_in = attn stream_in", l);
            check_equal(&xm, &xa, K, what);
            snprintf(what, sizeof what, "parallel L%d: y = x + f_attn + f_mlp", l);
            check_sum(&y, 3, one, t, K, what);
        }
    resdiag_reader_destroy(rd);
}
END_TEST

/* --record stream records the stream sites only: none of the new ones. */
START_TEST(record_stream_records_no_branch_or_out_norm_site)
{
    run_tinygpt("--placement", _i ? "reordered" : "sandwich", "--record", "stream", NULL);
    resdiag_reader *rd = open_run();
    for (int l = 0; l < LAYERS; l++)
        for (int s = 0; s < NSUB; s++)
            for (int dir = 0; dir < 2; dir++) {
                ck_assert_int_eq(get(rd, dir, l, s, RESDIAG_BRANCH_IN).observed, 0);
                ck_assert_int_eq(get(rd, dir, l, s, RESDIAG_OUT_NORM_IN).observed, 0);
                ck_assert_int_eq(get(rd, dir, l, s, RESDIAG_OUT_NORM_OUT).observed, 0);
                ck_assert_int_eq(get(rd, dir, l, s, RESDIAG_NORM_OUT).observed, 0);
                ck_assert_int_eq(get(rd, dir, l, s, RESDIAG_STREAM_OUT).observed,
                                 dir == RESDIAG_FORWARD && s == MLP);
            }
    resdiag_reader_destroy(rd);
}
END_TEST

/* Files of schema 1 and 2 have no room for the new sites: tinygpt leaves
 * them out there (run_tinygpt fails on any complaint) and records the rest. */
START_TEST(old_schemas_record_the_five_sites)
{
    const char *schema = _i ? "2" : "1";
    run_tinygpt("--placement", "sandwich", "--file-schema", schema, NULL);
    resdiag_reader *rd = open_run();
    ck_assert_int_eq(resdiag_reader_info(rd)->schema_version, atoi(schema));
    for (int dir = 0; dir < 2; dir++) {
        ck_assert_int_eq(get(rd, dir, 1, MLP, RESDIAG_NORM_IN).observed, 1);
        ck_assert_int_eq(get(rd, dir, 1, MLP, RESDIAG_BRANCH_OUT).observed, 1);
        ck_assert_int_eq(get(rd, dir, 1, MLP, RESDIAG_BRANCH_IN).observed, 0);
        ck_assert_int_eq(get(rd, dir, 1, MLP, RESDIAG_OUT_NORM_OUT).observed, 0);
    }
    resdiag_reader_destroy(rd);
}
END_TEST

static int take_tinygpt(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-TINYGPT\n", argv[0]);
        return 2;
    }
    tinygpt = argv[1];
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "tinygpt-sites",
    .start = take_tinygpt,
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("sites", 60, make_tmpdir, remove_tmpdir),
               CHECK_LOOP(sites_hold_what_the_block_computes, 0, 2 * N_CASES),
               CHECK_LOOP(record_stream_records_no_branch_or_out_norm_site, 0, 2),
               CHECK_LOOP(old_schemas_record_the_five_sites, 0, 2))
