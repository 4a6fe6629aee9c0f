/*
 * test-ranks-mpi.c - jobs of several ranks under Open MPI (mpirun
 * --oversubscribe on this machine): tinygpt-mpi trains data parallel, each
 * rank records its own file, and the reader (resdiag_reader_open on rank
 * 0's file) merges them.
 *
 *   test-ranks-mpi MPIRUN TINYGPT_MPI TINYGPT RESDIAG
 *
 * - exactness: step 0 of 2 ranks of 4 sequences, merged, equals one
 *   process of 8 sequences (tinygpt, same weights, same tokens) in every
 *   field of every site, parameter gradient and update ratio, and gets the
 *   same verdict;
 * - a rank killed with SIGKILL mid-run: the other file stays whole and the
 *   report names the rank that ended early and the steps that lack it
 *   (every step flushed, and the default flush policy), counted against
 *   each rank's file read alone;
 * - a rank fed NaN from step 8: the report names it first;
 * - 4 ranks: the merged report (printed to stderr, the test's log);
 * - plain tinygpt (no MPI in it) under mpirun: the library takes the rank
 *   from Open MPI's environment.
 * Every job runs under a deadline (killed and failed after it).
 */
#include <check.h>

#include "check-one.h"
#include "crash-util.h"
#include "resdiag.h"

static const char *mpirun, *tinygpt_mpi, *tinygpt, *tool;

/* The model of every job: small enough for a few seconds on 2 cores. */
#define MODEL "--layers", "3", "--d-model", "32", "--heads", "2", "--seq", "16", "--vocab", \
              "32", "--threads", "1", "--log-every", "1"

/* Waits for pid at most seconds; past that kills it (mpirun passes
 * SIGTERM on to its ranks) and fails. The exit status, 128 + signal. */
static int wait_deadline(pid_t pid, int seconds, const char *what)
{
    for (long waited = 0; waited < seconds * 1000L; waited += 10) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        cu_sleep_us(10000);
    }
    kill(pid, SIGTERM);
    cu_sleep_us(2000000);
    kill(pid, SIGKILL);
    cu_wait(pid);
    ck_abort_msg("%s: still running after %d s, killed", what, seconds);
    return -1;
}

/* argv (NULL-terminated, argv[0] the program) with stdout and stderr in
 * NAME.out and NAME.err of the scratch directory; the exit status. */
static int run(const char *name, int seconds, char **argv)
{
    char out[512], err[512];
    snprintf(out, sizeof out, "%s", cu_path("%s.out", name));
    snprintf(err, sizeof err, "%s", cu_path("%s.err", name));
    cu_child c = { out, err, -1 };
    return wait_deadline(cu_spawn(&c, argv), seconds, name);
}

/* mpirun -np ranks PROGRAM ARGS... (NULL-terminated). */
static int mpi_job(const char *name, int ranks, const char *program, ...)
{
    char np[16];
    snprintf(np, sizeof np, "%d", ranks);
    char *argv[64] = { (char *)mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to",
                       "none", "-np", np, (char *)program };
    int argc = 8;
    va_list ap;
    va_start(ap, program);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 63)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    /* Under ASan (scripts/test-sanitizers.sh) the ranks keep every check
     * but the leak report: Open MPI leaks at exit by design, from plugins
     * it has unloaded by then (frames no suppression can name). The
     * library's leaks are the other suites' business. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", saved ? saved : "", saved ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    int rc = run(name, 60, argv);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    return rc;
}

static int report(const char *name, const char *file, const char *opt1, const char *opt2)
{
    char *argv[] = { (char *)tool, "report", (char *)file, (char *)opt1, (char *)opt2, NULL };
    return run(name, 60, argv);
}

static resdiag_reader *open_reader(const char *path)
{
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "reader_open %s: %s", path, resdiag_strerror(st));
    return rd;
}

static resdiag_rank_info rank_info(const resdiag_reader *rd, int rank)
{
    resdiag_rank_info ri;
    memset(&ri, 0, sizeof ri);
    ri.struct_size = sizeof ri;
    ck_assert_int_eq(resdiag_reader_rank(rd, rank, &ri), RESDIAG_OK);
    return ri;
}

/* Fails unless `ok`, printing `text` (a report) to stderr first: a
 * Check message holds a few kilobytes, not a whole report. */
static void expect(int ok, const char *text, const char *what)
{
    if (!ok)
        fprintf(stderr, "--- %s; the report:\n%s", what, text);
    ck_assert_msg(ok, "%s (the report is printed above)", what);
}

/* ------------------------------------------------------------ exactness */

/* Two values agree when |a - b| <= rel * max(|a|, |b|) + rel * scale,
 * scale the largest |value| of the tensor (ABSMAX: a mean over tokens of a
 * normalized stream is ~0, its rounding that of the values it sums). */
static int agree(double a, double b, double scale, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + rel * scale;
}

static double worst_site, worst_param;

/* Every field but the call order (the ranks' calls are merged in rank
 * order, not the one process's order). */
static void same_fields(const double *one, const double *merged, double rel, const char *what,
                        double *worst)
{
    double scale = one[RESDIAG_FIELD_ABSMAX];
    for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
        if (f == RESDIAG_FIELD_CALL_SEQ)
            continue;
        ck_assert_msg(agree(one[f], merged[f], scale, rel), "%s: %s: one process %.9g, 2 ranks "
                      "merged %.9g", what, resdiag_field_name((resdiag_field)f), one[f],
                      merged[f]);
        if (isfinite(one[f]) && one[f] != merged[f])
            *worst = fmax(*worst, fabs(one[f] - merged[f]) / fmax(fabs(one[f]), scale));
    }
}

static const resdiag_site sites[] = { RESDIAG_STREAM_IN, RESDIAG_NORM_IN, RESDIAG_NORM_OUT,
                                      RESDIAG_BRANCH_OUT, RESDIAG_STREAM_OUT };
static const resdiag_site model_sites[] = { RESDIAG_EMBED_OUT, RESDIAG_FINAL_NORM_IN,
                                            RESDIAG_FINAL_NORM_OUT, RESDIAG_LOGITS };

/* Tolerances. Sites and update ratios: every rank computes each token's
 * row as the one process does (the same kernels, row by row, the loss's
 * gradient divided by the batch's tokens on every rank), so what is left
 * is merging the ranks' statistics in double: 1e-9. Parameter gradients:
 * a rank sums its N/2 = 64 tokens' terms of each gradient element in
 * float32 and the ranks' sums are then added (MPI_Allreduce), where the
 * one process sums all 128 in one run: the orders differ, by at most
 * 64 * 2^-24 = 3.8e-6 of the sum of the terms' magnitudes per element
 * (the classic bound n*u), less for norms over many elements: 2e-5. */
#define SITE_REL 1e-9
#define PARAM_REL 2e-5
/* Files of schema 2 keep each field as a float32 (half a step, 2^-24
 * relative, on each rank and in the one process), and the merge's sums
 * and differences of those add a few such steps: 2^-20. */
#define SITE_REL_F32 0x1p-20

static void assert_same_step0(const char *pa, const char *pb, int n_layers)
{
    resdiag_reader *a = open_reader(pa), *b = open_reader(pb);
    const double site_rel = resdiag_reader_info(a)->schema_version >= 2 ? SITE_REL_F32 : SITE_REL;
    ck_assert_int_eq(resdiag_reader_n_ranks(b), 2);
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(rank_info(b, r).state, RESDIAG_RANK_MERGED);
    ck_assert_int_eq(resdiag_reader_info(b)->n_ranks_merged, 2);
    double va[RESDIAG_N_FIELDS], vb[RESDIAG_N_FIELDS];
    char what[400];
    int compared = 0;
    for (int dir = RESDIAG_FORWARD; dir <= RESDIAG_BACKWARD; dir++) {
        for (int l = -1; l < n_layers; l++) {
            int n_sites = l < 0 ? 4 : 5;
            for (int s = 0; s < (l < 0 ? 1 : 2); s++) {
                for (int k = 0; k < n_sites; k++) {
                    resdiag_site site = l < 0 ? model_sites[k] : sites[k];
                    int oa = 0, ob = 0;
                    ck_assert_int_eq(resdiag_reader_site(a, 0, (resdiag_direction)dir, l, s,
                                                         site, va, &oa), RESDIAG_OK);
                    ck_assert_int_eq(resdiag_reader_site(b, 0, (resdiag_direction)dir, l, s,
                                                         site, vb, &ob), RESDIAG_OK);
                    snprintf(what, sizeof what, "%s %s layer %d sublayer %d", pa,
                             resdiag_site_name(site), l, s);
                    ck_assert_msg(oa == ob, "%s: observed %d in one process, %d merged", what,
                                  oa, ob);
                    if (!oa)
                        continue;
                    /* dir: a backward tensor is dL/d(the forward one) */
                    if (dir == RESDIAG_BACKWARD)
                        strncat(what, " backward", sizeof what - strlen(what) - 1);
                    same_fields(va, vb, site_rel, what, &worst_site);
                    compared++;
                }
            }
        }
    }
    for (int l = 0; l < n_layers; l++) {
        for (int s = 0; s < 2; s++) {
            double ua[RESDIAG_N_UPDATE_FIELDS], ub[RESDIAG_N_UPDATE_FIELDS];
            ck_assert_int_eq(resdiag_reader_update(a, 0, l, s, ua), RESDIAG_OK);
            ck_assert_int_eq(resdiag_reader_update(b, 0, l, s, ub), RESDIAG_OK);
            for (int f = 0; f < RESDIAG_N_UPDATE_FIELDS; f++)
                ck_assert_msg(agree(ua[f], ub[f], 0, site_rel), "%s update %d/%d field %d: "
                              "%.9g vs %.9g", pa, l, s, f, ua[f], ub[f]);
            compared++;
        }
    }
    static const char *const layer_params[] = { "attn.wqkv", "attn.wo", "mlp.w1", "mlp.w2" };
    static const char *const model_params[] = { "head.w", "embed.wte", "embed.wpe" };
    for (int l = -1; l < n_layers; l++) {
        for (int p = 0; p < (l < 0 ? 3 : 4); p++) {
            const char *name = l < 0 ? model_params[p] : layer_params[p];
            int oa = 0, ob = 0;
            ck_assert_int_eq(resdiag_reader_param(a, 0, l, name, va, &oa), RESDIAG_OK);
            ck_assert_int_eq(resdiag_reader_param(b, 0, l, name, vb, &ob), RESDIAG_OK);
            ck_assert_msg(oa && ob, "%s: param %s of layer %d: observed %d and %d", pa, name,
                          l, oa, ob);
            snprintf(what, sizeof what, "%s param %s layer %d", pa, name, l);
            same_fields(va, vb, PARAM_REL, what, &worst_param);
            compared++;
        }
    }
    /* 2 x (3 layers x 2 sublayers x 5 sites + 4 model sites), updates, params */
    ck_assert_int_ge(compared, 60);

    resdiag_analysis *xa = NULL, *xb = NULL;
    ck_assert_int_eq(resdiag_analyze(a, NULL, &xa), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analyze(b, NULL, &xb), RESDIAG_OK);
    ck_assert_int_eq(resdiag_analysis_verdict(xa), resdiag_analysis_verdict(xb));
    ck_assert_int_eq(resdiag_analysis_confidence(xa), resdiag_analysis_confidence(xb));
    ck_assert_int_eq(resdiag_analysis_final_norm(xa), resdiag_analysis_final_norm(xb));
    for (int l = 0; l < n_layers; l++)
        for (int s = 0; s < 2; s++)
            ck_assert_int_eq(resdiag_analysis_sublayer(xa, l, s, NULL),
                             resdiag_analysis_sublayer(xb, l, s, NULL));
    resdiag_analysis_destroy(xa);
    resdiag_analysis_destroy(xb);
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
}

/* placement.verdict of a report --json. */
static char *json_verdict(const char *path)
{
    char *s = cu_slurp(path);
    char *p = strstr(s, "\"placement\"");
    ck_assert_msg(p != NULL, "%s: no \"placement\"", path);
    char *v = strstr(p, "\"verdict\"");
    ck_assert_msg(v != NULL, "%s: no \"verdict\"", path);
    char *q = strchr(v + 9, '"');
    ck_assert_ptr_nonnull(q);
    char *e = strchr(q + 1, '"');
    ck_assert_ptr_nonnull(e);
    *e = 0;
    char *out = strdup(q + 1);
    free(s);
    return out;
}

/* schema "1" checks the merge to the double (every value a float64),
 * "2" the default files, to their float32. */
static void exact_one(const char *placement, const char *norm, const char *schema)
{
    char one[256], two[256];
    char name[64];
    snprintf(name, sizeof name, "%s-%s", placement, schema);
    snprintf(one, sizeof one, "%s", cu_path("one-%s.h5", name));
    snprintf(two, sizeof two, "%s", cu_path("two-%s.h5", name));
    char *argv[] = { (char *)tinygpt, MODEL, "--placement", (char *)placement, "--norm",
                     (char *)norm, "--batch", "8", "--steps", "2", "--file-schema",
                     (char *)schema, "--out", one, NULL };
    ck_assert_int_eq(run("one", 60, argv), 0);
    ck_assert_int_eq(mpi_job("two", 2, tinygpt_mpi, MODEL, "--placement", placement, "--norm",
                             norm, "--batch", "8", "--steps", "2", "--file-schema", schema,
                             "--out", two, (char *)NULL),
                     0);
    /* the same training: the summed gradients are the batch's */
    char *lo = cu_slurp(cu_path("one.out")), *lt = cu_slurp(cu_path("two.out"));
    ck_assert_msg(strstr(lo, "step     1 loss ") != NULL, "one process: %s", lo);
    const char *s1 = strstr(lo, "step     1 loss "), *s2 = strstr(lt, "step     1 loss ");
    ck_assert_msg(s2 != NULL, "2 ranks: %s", lt);
    ck_assert_msg(fabs(atof(s1 + 16) - atof(s2 + 16)) <= 2e-6, "step 1 loss: %s vs %s", s1, s2);
    free(lo);
    free(lt);
    assert_same_step0(one, two, 3);
    /* and the tool says the same */
    ck_assert_int_eq(report("report-one", one, "--json", NULL), 0);
    ck_assert_int_eq(report("report-two", two, "--json", NULL), 0);
    char *va = json_verdict(cu_path("report-one.out")), *vb = json_verdict(cu_path("report-two.out"));
    ck_assert_str_eq(va, vb);
    fprintf(stderr, "%s %s: one process and 2 ranks merged: verdict %s; fields equal to %.3g "
            "(sites, updates) and %.3g (parameter gradients)\n", placement, norm, va,
            worst_site, worst_param);
    free(va);
    free(vb);
}

START_TEST(two_ranks_merged_equal_one_process)
{
    exact_one("pre", "layernorm", "1");
    exact_one("post", "layernorm", "1");
    exact_one("sandwich", "rmsnorm", "1");
    exact_one("pre", "layernorm", "2");
}
END_TEST

/* ---------------------------------------------------------- faults */

/* Rank 1 dies by SIGKILL in step 5 after rank 0 wrote it (every step is
 * flushed at once): rank 0's file is whole with steps 0..5, rank 1's keeps
 * 0..4, and the merged report names rank 1 as ended early. */
START_TEST(killed_rank_is_named)
{
    char run_h5[512]; /* cu_path's buffers are reused */
    snprintf(run_h5, sizeof run_h5, "%s", cu_path("kill.h5"));
    int rc = mpi_job("kill", 2, tinygpt_mpi, MODEL, "--batch", "4", "--steps", "50",
                     "--flush-steps", "1", "--kill-rank", "1", "--kill-step", "5", "--out",
                     run_h5, (char *)NULL);
    ck_assert_msg(rc != 0, "mpirun exited 0 though a rank was killed");

    resdiag_reader *rd = open_reader(run_h5);
    ck_assert_int_eq(resdiag_reader_n_ranks(rd), 2);
    resdiag_rank_info r0 = rank_info(rd, 0), r1 = rank_info(rd, 1);
    ck_assert_int_eq(r0.state, RESDIAG_RANK_MERGED);
    ck_assert_int_eq(r0.last_step, 5);
    ck_assert_int_eq(r1.state, RESDIAG_RANK_ENDED_EARLY);
    ck_assert_int_eq(r1.last_step, 4);
    resdiag_reader_destroy(rd);

    /* rank 0's file alone: whole, its six steps */
    resdiag_reader *r = NULL;
    ck_assert_int_eq(resdiag_reader_open_rank(&r, run_h5, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(r)->n_steps, 6);
    resdiag_reader_destroy(r);
    ck_assert_int_eq(report("kill-report0", run_h5, "--rank", "0"), 0);
    /* the killed rank's file still reads */
    ck_assert_int_eq(report("kill-report1", run_h5, "--rank", "1"), 0);

    ck_assert_int_eq(report("kill-report", run_h5, NULL, NULL), 0);
    char *text = cu_slurp(cu_path("kill-report.out"));
    expect(strstr(text, "rank 1") && strstr(text, "ended early"), text,
           "the report does not name rank 1 as ended early");
    /* which steps lack rank 1, against its file opened alone */
    ck_assert_int_eq(resdiag_reader_open_rank(&r, run_h5, 1), RESDIAG_OK);
    int64_t n1 = resdiag_reader_info(r)->n_steps;
    resdiag_reader_destroy(r);
    ck_assert_int_eq(n1, 5);
    char want[160];
    snprintf(want, sizeof want, "  - step %lld: 1 of 2 ranks present, missing rank 1\n",
             (long long)n1);
    expect(strstr(text, want) != NULL, text, "the report does not say step 5 lacks rank 1");
    expect(strstr(text, "the first and the last complete step (0, 5) hold different ranks "
                        "(2 and 1 present)") != NULL, text,
           "the report does not say the compared steps hold different ranks");
    fprintf(stderr, "--- a rank killed: resdiag report %s\n%s", run_h5, text);
    free(text);
    ck_assert_int_eq(report("kill-json", run_h5, "--json", NULL), 0);
    text = cu_slurp(cu_path("kill-json.out"));
    expect(strstr(text, "ended_early") || strstr(text, "ended early"), text,
           "report --json does not say a rank ended early");
    expect(strstr(text, "\"present_per_step\": [2, 2, 2, 2, 2, 1]") != NULL, text,
           "report --json does not count the ranks per step");
    expect(strstr(text, "\"compared_steps_same_ranks\": false") != NULL, text,
           "report --json does not flag the compared steps");
    free(text);
    char html[512];
    snprintf(html, sizeof html, "%s", cu_path("kill.html"));
    ck_assert_int_eq(report("kill-html", run_h5, "--html", html), 0);
    text = cu_slurp(html);
    expect(strstr(text, "step 5: 1 of 2 ranks present, missing rank 1") != NULL, text,
           "report --html does not say step 5 lacks rank 1");
    free(text);
}
END_TEST

/* Rank 1 dies in step 3 of 0..3 under the default flush policy: its file
 * keeps what it flushed. The merged report counts, per step, the ranks
 * whose files (each opened alone here) hold it, and flags the over-training
 * comparison of step 0 with step 3, which rank 1 lacks. */
START_TEST(killed_rank_default_flush_counts_ranks_per_step)
{
    char run_h5[512];
    snprintf(run_h5, sizeof run_h5, "%s", cu_path("killdef.h5"));
    int rc = mpi_job("killdef", 2, tinygpt_mpi, MODEL, "--batch", "4", "--steps", "4",
                     "--kill-rank", "1", "--kill-step", "3", "--out", run_h5, (char *)NULL);
    ck_assert_msg(rc != 0, "mpirun exited 0 though a rank was killed");
    int count[4] = { 0 };
    for (int rank = 0; rank < 2; rank++) {
        resdiag_reader *r = NULL;
        ck_assert_int_eq(resdiag_reader_open_rank(&r, run_h5, rank), RESDIAG_OK);
        int64_t m = resdiag_reader_info(r)->n_steps, v[8];
        ck_assert_int_le(m, 8);
        ck_assert_int_eq(resdiag_reader_steps(r, v, m), RESDIAG_OK);
        for (int64_t i = 0; i < m; i++)
            if (v[i] >= 0 && v[i] < 4)
                count[v[i]]++;
        resdiag_reader_destroy(r);
    }
    ck_assert_int_eq(count[0], 2);
    ck_assert_int_eq(count[3], 1); /* rank 1 died before recording step 3 */
    char want[160];
    snprintf(want, sizeof want, "\"present_per_step\": [%d, %d, %d, %d]", count[0], count[1],
             count[2], count[3]);
    ck_assert_int_eq(report("killdef-json", run_h5, "--json", NULL), 0);
    char *text = cu_slurp(cu_path("killdef-json.out"));
    expect(strstr(text, want) != NULL, text, "report --json miscounts the ranks per step");
    expect(strstr(text, "\"compared_steps_same_ranks\": false") != NULL, text,
           "report --json does not flag the compared steps");
    free(text);
    ck_assert_int_eq(report("killdef", run_h5, NULL, NULL), 0);
    text = cu_slurp(cu_path("killdef.out"));
    expect(strstr(text, "not the same ranks: 2 of 2 merged at the first step, 1 at the last")
               != NULL, text, "the over-training summary does not flag its steps");
    fprintf(stderr, "--- a rank killed, default flush: resdiag report %s\n%s", run_h5, text);
    free(text);
}
END_TEST

/* Rank 1's copy of the embedding holds a NaN from step 8: the NaN reaches
 * rank 0 only through the summed gradients (then every rank's loss is NaN
 * and the job stops at step 8, exit 1). The report names rank 1 first. */
START_TEST(nan_rank_is_named_first)
{
    char run_h5[512]; /* cu_path's buffers are reused */
    snprintf(run_h5, sizeof run_h5, "%s", cu_path("nan.h5"));
    int rc = mpi_job("nan", 2, tinygpt_mpi, MODEL, "--batch", "4", "--steps", "20",
                     "--nan-rank", "1", "--nan-step", "8", "--out", run_h5, (char *)NULL);
    ck_assert_msg(rc == 1, "tinygpt-mpi with a NaN: exit %d, want 1 (the loss is not finite)",
                  rc);
    ck_assert_int_eq(report("nan-report", run_h5, NULL, NULL), 0);
    char *text = cu_slurp(cu_path("nan-report.out"));
    const char *r1 = strstr(text, "rank 1: NaN at step 8");
    expect(r1 != NULL, text, "the report does not name rank 1's NaN at step 8");
    const char *r0 = strstr(text, "rank 0: NaN");
    expect(!r0 || r0 > r1, text, "rank 0's NaN named before rank 1's");
    /* "first" is said of rank 1's line */
    const char *eol = strchr(r1, '\n');
    expect(strstr(r1, "first") && (!eol || strstr(r1, "first") < eol), text,
           "rank 1's line does not say first");
    fprintf(stderr, "--- a rank fed NaN: resdiag report %s\n%s", run_h5, text);
    free(text);
}
END_TEST

/* ----------------------------------------------------- 4 ranks, env */

START_TEST(four_ranks_report)
{
    char run_h5[512]; /* cu_path's buffers are reused */
    snprintf(run_h5, sizeof run_h5, "%s", cu_path("four.h5"));
    ck_assert_int_eq(mpi_job("four", 4, tinygpt_mpi, MODEL, "--batch", "8", "--steps", "20",
                             "--record-every", "5", "--out", run_h5, (char *)NULL),
                     0);
    resdiag_reader *rd = open_reader(run_h5);
    ck_assert_int_eq(resdiag_reader_n_ranks(rd), 4);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(rank_info(rd, r).state, RESDIAG_RANK_MERGED);
    double v[RESDIAG_N_FIELDS];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 2, 1, RESDIAG_STREAM_OUT, v,
                                         &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_double_eq(v[RESDIAG_FIELD_ROWS], 8 * 16);  /* the 4 ranks' 2 x 16 tokens */
    resdiag_reader_destroy(rd);
    ck_assert_int_eq(report("four-report", run_h5, NULL, NULL), 0);
    char *text = cu_slurp(cu_path("four-report.out"));
    fprintf(stderr, "--- 4 ranks: mpirun -np 4 tinygpt-mpi --batch 8 ...; resdiag report %s\n%s",
            run_h5, text);
    free(text);
}
END_TEST

/* Plain tinygpt knows nothing of MPI: under mpirun each process finds its
 * rank in OMPI_COMM_WORLD_RANK/SIZE (RESDIAG_RANK_DETECT) and writes its
 * own file. */
START_TEST(rank_from_the_environment)
{
    char run_h5[512]; /* cu_path's buffers are reused */
    snprintf(run_h5, sizeof run_h5, "%s", cu_path("env.h5"));
    ck_assert_int_eq(mpi_job("env", 2, tinygpt, MODEL, "--batch", "4", "--steps", "2", "--out",
                             run_h5, (char *)NULL),
                     0);
    char rank1[512];
    ck_assert_int_eq(resdiag_rank_path(rank1, sizeof rank1, run_h5, 1), RESDIAG_OK);
    ck_assert_int_eq(access(rank1, F_OK), 0);
    for (int r = 0; r < 2; r++) {
        resdiag_reader *rd = NULL;
        ck_assert_int_eq(resdiag_reader_open_rank(&rd, run_h5, r), RESDIAG_OK);
        const resdiag_run_info *info = resdiag_reader_info(rd);
        ck_assert_int_eq(info->rank, r);
        ck_assert_int_eq(info->world_size, 2);
        ck_assert_str_eq(info->rank_source, "openmpi");
        ck_assert_int_eq(info->split, RESDIAG_SPLIT_DATA);
        resdiag_reader_destroy(rd);
    }
    /* both processes trained the whole batch: merged, twice its tokens */
    resdiag_reader *rd = open_reader(run_h5);
    double v[RESDIAG_N_FIELDS];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0,
                                         RESDIAG_EMBED_OUT, v, &obs), RESDIAG_OK);
    ck_assert_int_eq(obs, 1);
    ck_assert_double_eq(v[RESDIAG_FIELD_ROWS], 2 * 4 * 16);
    resdiag_reader_destroy(rd);
}
END_TEST

static int take_programs(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test-ranks-mpi MPIRUN TINYGPT_MPI TINYGPT RESDIAG\n");
        return 2;
    }
    mpirun = argv[1];
    tinygpt_mpi = argv[2];
    tinygpt = argv[3];
    tool = argv[4];
    /* Open MPI as root on one machine: shared memory between the ranks,
     * the runtime's own connections on loopback only. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl", "self,vader", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMPI_MCA_oob_tcp_if_include", "lo", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "ranks-mpi",
    .timeout = 240,
    .scratch = cu_dir,
    .scratch_size = sizeof cu_dir,
    .remove_files = 1,
    .start = take_programs,
};
CHECK_MAIN(&program,
           CHECK_TEST(two_ranks_merged_equal_one_process),
           CHECK_TEST(killed_rank_is_named),
           CHECK_TEST(killed_rank_default_flush_counts_ranks_per_step),
           CHECK_TEST(nan_rank_is_named_first),
           CHECK_TEST(four_ranks_report),
           CHECK_TEST(rank_from_the_environment))
