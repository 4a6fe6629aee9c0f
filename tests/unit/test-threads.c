/*
 * test-threads.c - hooks from several threads on different layers at once
 * (what resdiag.h allows) against the same calls made one after another.
 * The files must be equal in every value except the call order, which
 * threads interleave; the call order of a step must still number each
 * accepted call exactly once. Mixed dtypes, strided views, sketches, update
 * ratios, parameter gradients, refused calls logged from several threads at
 * once, and hook_threads 2, 3, 4 and the most splitting large tensors
 * inside those threads.
 *
 * The pool of workers (lib/stats/split.h) shared by several threads: the
 * callers that find workers busy compute their parts themselves, with the
 * same bits; so does a forked child, which has no copy of the workers.
 *
 * And what resdiag.h does not allow: two threads observing the same site
 * (or the two tensors of one residual add, or one parameter) at once. The
 * second of two overlapping calls returns RESDIAG_E_BUSY and the slot keeps
 * one accepted call's whole result, never a mix of two.
 *
 * Meant to run under ThreadSanitizer (build-tsan, scripts/test-sanitizers.sh
 * with TSAN_OPTIONS=halt_on_error=1:exitcode=66); in a plain build it checks
 * the values only.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"
#include "stats/split.h"
#include "value-hash.h"

enum { L = 8, S = 2, D = 64, T = 24, STEPS = 5, THREADS = 4 };
/* A parameter gradient of 1 MiB of f32: large enough to split. */
enum { BIG_ROWS = 2048, BIG_COLS = 128 };

static const char *const sub_names[S] = { "attn", "mlp" };
static const char *const lparams[2] = { "attn.wo", "mlp.w2" };

/* The log handler is called from the hook threads: a mutex guards it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static long log_count, busy_logs;
static void count_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    pthread_mutex_lock(&log_lock);
    log_count += msg && *msg;
    busy_logs += msg && strstr(msg, "client bug:") == msg &&
                 strstr(msg, "is being observed by another thread") != NULL;
    pthread_mutex_unlock(&log_lock);
}

static char tmpdir[256], path_seq[300], path_par[300];
static float *big; /* (BIG_ROWS, BIG_COLS), read by every thread */

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/resdiag-test-threads-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(path_seq, sizeof path_seq, "%s/seq.h5", tmpdir);
    snprintf(path_par, sizeof path_par, "%s/par.h5", tmpdir);
    resdiag_set_log_handler(count_log, NULL);
    big = malloc((size_t)BIG_ROWS * BIG_COLS * sizeof *big);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < (size_t)BIG_ROWS * BIG_COLS; i++)
        big[i] = (float)sin(0.001 * (double)i) * 3.0f;
}

static void teardown(void)
{
    free(big);
    unlink(path_seq);
    unlink(path_par);
    rmdir(tmpdir);
    resdiag_set_log_handler(NULL, NULL);
}

static float value(unsigned seed, int i)
{
    unsigned h = value_hash(seed, i);
    return (float)((int)(h % 2001u) - 1000) / 250.0f;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

/* The calls of one layer in one step; every thread owns its buffers. */
static void layer_hooks(resdiag *r, int layer, int step, int with_big)
{
    enum { STRIDE = D + 5 };
    float x[T * STRIDE], f[T * D];
    double g[T * D];
    uint16_t h[T * D];
    unsigned seed = (unsigned)(step * 1000 + layer);
    for (int i = 0; i < T * STRIDE; i++)
        x[i] = value(seed, i);
    for (int i = 0; i < T * D; i++) {
        f[i] = 0.1f * value(seed + 500, i);
        g[i] = 0.01 * value(seed + 900, i);
        h[i] = to_bf16(value(seed + 700, i));
    }
    for (int s = 0; s < S; s++) {
        resdiag_tensor xs = resdiag_tensor_make(x, RESDIAG_DTYPE_F32, T, D, STRIDE);
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_STREAM_IN, xs), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_NORM_OUT, resdiag_bf16(h, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_BRANCH_OUT, resdiag_f32(f, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_BWD(r, layer, s, RESDIAG_STREAM_OUT, resdiag_f64(g, T, D)),
                         RESDIAG_OK);
        /* refused calls, logged from several threads at once */
        ck_assert_int_eq(RESDIAG_FWD(r, layer, s, RESDIAG_STREAM_OUT, resdiag_f32(f, T, D - 1)),
                         RESDIAG_E_SHAPE);
        ck_assert_int_eq(RESDIAG_FWD(r, layer, S + s, RESDIAG_STREAM_OUT, resdiag_f32(f, T, D)),
                         RESDIAG_E_RANGE);
    }
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, layer, "mlp.w2", resdiag_f32(f, T, D)), RESDIAG_OK);
    if (with_big)
        ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, layer, "attn.wo",
                                            resdiag_f32(big, BIG_ROWS, BIG_COLS)),
                         RESDIAG_OK);
}

typedef struct worker {
    resdiag *r;
    int first, step, with_big;
    pthread_barrier_t *go;
} worker;

static void *worker_main(void *p)
{
    worker *w = p;
    pthread_barrier_wait(w->go);
    for (int l = w->first; l < L; l += THREADS)
        layer_hooks(w->r, l, w->step, w->with_big);
    return NULL;
}

static resdiag *open_run(const char *path, int hook_threads)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names, .layer_params = 2, .layer_param_names = lparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.flush_steps = 2;
    o.sketch_size = 8;
    o.hook_threads = hook_threads;
    return fixture_open(path, &m, &o);
}

/* Both runs, step by step: one thread, then THREADS threads. */
static void write_both(int hook_threads, int with_big)
{
    resdiag *seq = open_run(path_seq, hook_threads), *par = open_run(path_par, hook_threads);
    for (int step = 0; step < STEPS; step++) {
        ck_assert_int_eq(resdiag_step_begin(seq, step), RESDIAG_OK);
        for (int l = 0; l < L; l++)
            layer_hooks(seq, l, step, with_big);
        ck_assert_int_eq(resdiag_step_end(seq), RESDIAG_OK);

        ck_assert_int_eq(resdiag_step_begin(par, step), RESDIAG_OK);
        pthread_t th[THREADS];
        worker w[THREADS];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, THREADS);
        for (int i = 0; i < THREADS; i++) {
            w[i] = (worker){ par, i, step, with_big, &go };
            ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
        }
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
        ck_assert_int_eq(resdiag_step_end(par), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(seq), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(par), RESDIAG_OK);
    resdiag_destroy(seq);
    resdiag_destroy(par);
}

/* Every dataset but step_time equal; in *_stats the call order is only
 * checked to number the calls of each step 0..n-1 once each. */
static void assert_same_but_order(int with_big)
{
    resdiag_reader *a = NULL, *b = NULL;
    ck_assert_int_eq(resdiag_reader_open(&a, path_seq), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_open(&b, path_par), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(b)->n_steps, STEPS);
    int n = resdiag_reader_n_datasets(a);
    ck_assert_int_eq(n, resdiag_reader_n_datasets(b));
    /* accepted calls per step: 4 per sublayer, 1 or 2 parameter gradients */
    const int calls = L * (S * 4 + 1 + with_big);
    int seen[STEPS][L * (S * 4 + 2)];
    memset(seen, 0, sizeof seen);
    int compared = 0, stats_tables = 0;
    for (int i = 0; i < n; i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        ck_assert_str_eq(name, resdiag_reader_dataset_name(b, i));
        if (strcmp(name, "step_time") == 0)
            continue;
        int64_t dims[8], dims_b[8];
        int rank, rank_b;
        ck_assert_int_eq(resdiag_reader_dims(a, name, dims, 8, &rank), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_dims(b, name, dims_b, 8, &rank_b), RESDIAG_OK);
        ck_assert_int_eq(rank, rank_b);
        size_t per = 1;
        for (int k = 1; k < rank; k++) {
            ck_assert_int_eq(dims[k], dims_b[k]);
            per *= (size_t)dims[k];
        }
        ck_assert_int_eq(dims[0], STEPS);
        size_t total = per * STEPS;
        double *va = malloc(total * sizeof *va), *vb = malloc(total * sizeof *vb);
        ck_assert(va && vb);
        ck_assert_int_eq(resdiag_reader_read(a, name, 0, STEPS, va, total), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_read(b, name, 0, STEPS, vb, total), RESDIAG_OK);
        int is_stats = strstr(name, "_stats") != NULL;
        stats_tables += is_stats;
        for (size_t k = 0; k < total; k++) {
            if (is_stats && k % RESDIAG_N_FIELDS == RESDIAG_FIELD_CALL_SEQ) {
                ck_assert_msg(isnan(va[k]) == isnan(vb[k]), "%s[%zu]: observed in one run only",
                              name, k);
                if (!isnan(vb[k])) {
                    ck_assert_msg(vb[k] >= 0 && vb[k] < calls, "%s[%zu]: call order %g",
                                  name, k, vb[k]);
                    seen[k / per][(int)vb[k]]++;
                }
                continue;
            }
            ck_assert_msg((isnan(va[k]) && isnan(vb[k])) || va[k] == vb[k],
                          "%s[%zu]: %.17g sequential, %.17g threads", name, k, va[k], vb[k]);
        }
        free(va);
        free(vb);
        compared++;
    }
    ck_assert_int_ge(compared, 8);
    ck_assert_int_ge(stats_tables, 3);
    for (int s = 0; s < STEPS; s++)
        for (int c = 0; c < calls; c++)
            ck_assert_msg(seen[s][c] == 1, "step %d: call number %d given %d times", s, c,
                          seen[s][c]);
    /* the trainer's file:line of every site, the same in both */
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++)
                for (int d = 0; d < 2; d++)
                    ck_assert_str_eq(resdiag_reader_callsite(a, (resdiag_direction)d, l, s,
                                                             (resdiag_site)site),
                                     resdiag_reader_callsite(b, (resdiag_direction)d, l, s,
                                                             (resdiag_site)site));
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
}

START_TEST(threads_on_different_layers_write_what_one_thread_writes)
{
    log_count = 0;
    write_both(1, 0);
    /* each refused call was logged (up to the rate limit) from its thread */
    ck_assert_int_gt(log_count, 0);
    assert_same_but_order(0);
}
END_TEST

/* Each layer's large gradient is split; with 4 trainer threads on a pool
 * of hook_threads - 1 workers most hooks find some workers busy. */
START_TEST(hook_threads_inside_concurrent_hooks_is_deterministic)
{
    static const int counts[] = { 2, 3, 4, RESDIAG_MAX_HOOK_THREADS };
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        unlink(path_seq);
        unlink(path_par);
        write_both(counts[c], 1);
        assert_same_but_order(1);
    }
}
END_TEST


/* ------------------------------------------- one split pool, many callers */

enum { SPLIT_ROWS = 1025, SPLIT_COLS = 512, SPLIT_CALLS = 12 }; /* 2 MiB of f32 */

typedef struct split_out {
    double f[RESDIAG_N_FIELDS], sketch[8];
    double norms[SPLIT_ROWS];
} split_out;

typedef struct split_job {
    rd_split_pool *pool;
    int threads;
    const resdiag_tensor *t;
    const rd_sketch_params *sp;
    const split_out *want;
    pthread_barrier_t *go;
    int mismatches;
} split_job;

static void split_run(split_out *o, rd_split_pool *pool, int threads, const resdiag_tensor *t,
                      const rd_sketch_params *sp)
{
    memset(o, 0, sizeof *o);
    rd_split_compute(pool, threads, o->f, o->sketch, o->norms, t, sp);
}

static int split_same(const split_out *a, const split_out *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void *split_caller(void *p)
{
    split_job *j = p;
    split_out *o = malloc(sizeof *o);
    ck_assert_ptr_nonnull(o);
    pthread_barrier_wait(j->go);
    for (int c = 0; c < SPLIT_CALLS; c++) {
        split_run(o, j->pool, j->threads, j->t, j->sp);
        j->mismatches += !split_same(o, j->want);
    }
    free(o);
    return NULL;
}

/* THREADS callers on one pool at once, so that most find some or all of
 * the workers busy: every call gives the bits of *want. */
static void split_concurrent(rd_split_pool *pool, int threads, const resdiag_tensor *t,
                             const rd_sketch_params *sp, const split_out *want)
{
    pthread_t th[THREADS];
    split_job jobs[THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (split_job){ pool, threads, t, sp, want, &go, 0 };
        ck_assert_int_eq(pthread_create(&th[i], NULL, split_caller, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(jobs[i].mismatches == 0, "hook_threads %d: thread %d: %d of %d calls "
                      "differ", threads, i, jobs[i].mismatches, SPLIT_CALLS);
    }
    pthread_barrier_destroy(&go);
}

/* Within rounding of one thread, the exact quantities exactly: the same
 * path on the same rows (a part is whole rows), only the double combination
 * of the parts differs, so 1e-12 and not a float-lane bound. */
static void split_near_one_thread(const split_out *got, const split_out *one, int threads)
{
    static const int exact[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_COLS, RESDIAG_FIELD_ABSMAX,
                                 RESDIAG_FIELD_ABSMAX_COL, RESDIAG_FIELD_NAN_COUNT,
                                 RESDIAG_FIELD_INF_COUNT };
    for (size_t k = 0; k < sizeof exact / sizeof exact[0]; k++)
        ck_assert_msg(got->f[exact[k]] == one->f[exact[k]], "hook_threads %d: field %d",
                      threads, exact[k]);
    for (int q = 0; q < RESDIAG_N_FIELDS; q++)
        ck_assert_msg((isnan(got->f[q]) && isnan(one->f[q])) ||
                          fabs(got->f[q] - one->f[q]) <= 1e-12 * fabs(one->f[q]),
                      "hook_threads %d: field %d: %.17g, one thread %.17g", threads, q,
                      got->f[q], one->f[q]);
    for (int m = 0; m < 8; m++) /* sums of both signs: against the Frobenius norm */
        ck_assert_msg(fabs(got->sketch[m] - one->sketch[m]) <= 1e-12 * one->f[RESDIAG_FIELD_FROB],
                      "hook_threads %d: sketch[%d]", threads, m);
    ck_assert(memcmp(got->norms, one->norms, sizeof got->norms) == 0);
}

/* For hook_threads 2, 3, 4 and the most: each call gives the bits of
 * rd_stats_compute_split(threads) (which starts its own threads) with
 * the pool to itself, with no pool, with fewer workers than parts (the
 * others not started), with THREADS callers sharing the pool (most find
 * workers busy), and in a forked child, where destroying the pool returns
 * (its threads are not in the child: a join would wait forever); and
 * those bits are one thread's within rounding. */
/* The pool has split `tensors` calls of n parts each, and no call gave a
 * worker more parts than the `most` workers it has. */
static void expect_split_counts(const rd_split_pool *pool, int n, long long tensors, int most)
{
    rd_split_counts c;
    rd_split_pool_counts(pool, &c);
    ck_assert_msg(c.tensors == tensors && c.parts == n * tensors,
                  "hook_threads %d: %lld tensors in %lld parts, want %lld in %lld", n,
                  c.tensors, c.parts, tensors, n * tensors);
    ck_assert_msg(c.by_workers >= 0 && c.by_workers <= most * c.tensors,
                  "hook_threads %d: %lld parts by %d workers over %lld tensors", n,
                  c.by_workers, most, c.tensors);
}

/* The workers compute parts: a caller takes back only a part whose worker
 * has not begun it, so over many calls some worker begins one (unless
 * the hand-over is broken). The bits stay the same whoever computed it. */
static void workers_compute_parts(rd_split_pool *pool, int n, const resdiag_tensor *t,
                                  const rd_sketch_params *sp, const split_out *want)
{
    split_out *o = malloc(sizeof *o);
    ck_assert_ptr_nonnull(o);
    rd_split_counts c;
    int calls = 0;
    do {
        split_run(o, pool, n, t, sp);
        ck_assert_msg(split_same(o, want), "hook_threads %d: call %d differs", n, calls);
        rd_split_pool_counts(pool, &c);
    } while (c.by_workers == 0 && ++calls < 2000);
    ck_assert_msg(c.by_workers > 0, "hook_threads %d: no worker computed a part in %d calls",
                  n, calls);
    free(o);
}

START_TEST(split_pool_shared_absent_or_forked_gives_the_same_bits)
{
    float *x = malloc((size_t)SPLIT_ROWS * SPLIT_COLS * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < SPLIT_ROWS * SPLIT_COLS; i++)
        x[i] = value(77, i) * (1.0f + (float)(i / SPLIT_COLS % 5));
    x[3 * SPLIT_COLS + 1] = NAN; /* a rescanned row in the first and the last part */
    x[1000 * SPLIT_COLS + 2] = INFINITY;
    const resdiag_tensor t = resdiag_f32(x, SPLIT_ROWS, SPLIT_COLS);
    float tau[4097];
    rd_fill_column_signs(tau, 4097, 9);
    const rd_sketch_params sp = { 8, tau, 4097, 11, 0, 0 };
    split_out *want = malloc(sizeof *want), *got = malloc(sizeof *got), *one = malloc(sizeof *one);
    ck_assert(want && got && one);
    split_run(one, NULL, 1, &t, &sp);

    static const int counts[] = { 2, 3, 4, RESDIAG_MAX_HOOK_THREADS };
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const int n = counts[c];
        memset(want, 0, sizeof *want);
        rd_stats_compute_split(n, want->f, want->sketch, want->norms, &t, &sp);
        split_near_one_thread(want, one, n);

        rd_split_pool *pool = NULL, *few = NULL;
        int started = 0;
        ck_assert_int_eq(rd_split_pool_create(&pool, n - 1, &started), 0);
        ck_assert_int_eq(started, n - 1);
        split_run(got, pool, n, &t, &sp);
        ck_assert_msg(split_same(got, want), "hook_threads %d: the pool's result differs", n);
        /* That the parts ran is counted, not inferred from the bits (which
         * on some data and CPUs round alike in every order) */
        expect_split_counts(pool, n, 1, n - 1);
        workers_compute_parts(pool, n, &t, &sp, want);
        split_run(got, NULL, n, &t, &sp);
        ck_assert_msg(split_same(got, want), "hook_threads %d: without a pool it differs", n);
        ck_assert_int_eq(rd_split_pool_create(&few, 1, &started), 0);
        split_run(got, few, n, &t, &sp);
        ck_assert_msg(split_same(got, want), "hook_threads %d: with 1 worker it differs", n);
        expect_split_counts(few, n, 1, 1);
        rd_split_pool_destroy(few);
        rd_split_counts before;
        rd_split_pool_counts(pool, &before);
        split_concurrent(pool, n, &t, &sp, want);
        expect_split_counts(pool, n, before.tensors + THREADS * SPLIT_CALLS, n - 1);

        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            alarm(20); /* a hang ends the child by SIGALRM */
            split_run(got, pool, n, &t, &sp);
            int same = split_same(got, want);
            rd_split_pool_destroy(pool);
            _exit(same ? 0 : 1);
        }
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "hook_threads %d: child: status %d", n, status);
        split_run(got, pool, n, &t, &sp); /* the parent's workers are still there */
        ck_assert(split_same(got, want));
        rd_split_pool_destroy(pool);
    }
    int started = -1;
    rd_split_pool *none = (rd_split_pool *)&started;
    ck_assert_int_eq(rd_split_pool_create(&none, RESDIAG_MAX_HOOK_THREADS, &started), EINVAL);
    ck_assert(none == NULL && started == 0);
    free(want);
    free(got);
    free(one);
    free(x);
}
END_TEST

/* ------------------------------------------------- same site, two threads */

/* Two tensors per site, of different row counts (so ROWS tells which one a
 * slot holds) and values; large, so that two calls released together by a
 * barrier overlap. */
enum { SAME_D = 64, SAME_ROUNDS_MIN = 8, SAME_ROUNDS_MAX = 400 };
static const int same_rows[2] = { 6144, 4096 };

typedef struct same_call {
    int rc[4]; /* STREAM_IN, BRANCH_OUT, NORM_IN, parameter gradient */
} same_call;

typedef struct same_worker {
    resdiag *r;
    int k; /* which tensors: 0 or 1 */
    const float *x, *f, *g;
    pthread_barrier_t *go;
    same_call out;
} same_worker;

static void same_hooks(resdiag *r, int k, const float *x, const float *f, const float *g,
                       same_call *out)
{
    int n = same_rows[k];
    out->rc[0] = RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, n, SAME_D));
    out->rc[1] = RESDIAG_FWD(r, 0, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, n, SAME_D));
    out->rc[2] = RESDIAG_FWD(r, 0, 0, RESDIAG_NORM_IN, resdiag_f32(g, n, SAME_D));
    out->rc[3] = RESDIAG_PARAM_GRAD(r, 0, "mlp.w2", resdiag_f32(g, n, SAME_D));
}

static void *same_main(void *p)
{
    same_worker *w = p;
    pthread_barrier_wait(w->go);
    same_hooks(w->r, w->k, w->x, w->f, w->g, &w->out);
    return NULL;
}

static resdiag *open_same(const char *path)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 1, .cols = SAME_D,
        .sublayers = 1, .sublayer_names = sub_names, .layer_params = 2,
        .layer_param_names = lparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.sketch_size = 8;
    o.flush_steps = 64;
    return fixture_open(path, &m, &o);
}

/* What the test knows of a tensor without the library, in long double. */
typedef struct known {
    double rows, frob, norm_mean, absmax, absmax_col;
} known;

static known know(const float *x, int rows)
{
    long double ss = 0, norms = 0, amax = -1;
    int col = -1;
    for (int i = 0; i < rows; i++) {
        long double row = 0;
        for (int j = 0; j < SAME_D; j++) {
            long double v = x[(size_t)i * SAME_D + (size_t)j];
            row += v * v;
            if (fabsl(v) > amax) {
                amax = fabsl(v);
                col = j;
            }
        }
        ss += row;
        norms += sqrtl(row);
    }
    return (known){ rows, (double)sqrtl(ss), (double)(norms / rows), (double)amax, col };
}

/* sum_i ||f_i|| / ||x_i|| / rows, for the update ratio */
static double know_tok_ratio(const float *x, const float *f, int rows)
{
    long double sum = 0;
    for (int i = 0; i < rows; i++) {
        long double nx = 0, nf = 0;
        for (int j = 0; j < SAME_D; j++) {
            long double a = x[(size_t)i * SAME_D + (size_t)j], b = f[(size_t)i * SAME_D + (size_t)j];
            nx += a * a;
            nf += b * b;
        }
        sum += sqrtl(nf) / sqrtl(nx);
    }
    return (double)(sum / rows);
}

/* got within rel of want: the kernel output on f32 rows against the long
 * double values, rel the bound of the path that ran (path-bounds.h):
 * NORM_TOL for a norm, RATIO_TOL for a ratio of norms or a mean of them. */
static int close_to(double got, double want, long double rel)
{
    return fabs(got - want) <= (double)(rel * fabs(want));
}
#define NORM_TOL rd_test_norm_tol(RESDIAG_DTYPE_F32)
#define RATIO_TOL rd_test_ratio_tol(RESDIAG_DTYPE_F32)

/* Whether got holds every field but CALL_SEQ and the sk sketch buckets of
 * the reference bit for bit. */
static int same_bits(const double *got, const double *got_sk, const double *ref,
                     const double *ref_sk, int sk)
{
    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
        if (f != RESDIAG_FIELD_CALL_SEQ && got[f] != ref[f] && !(isnan(got[f]) && isnan(ref[f])))
            return 0;
    for (int m = 0; m < sk; m++)
        if (got_sk[m] != ref_sk[m])
            return 0;
    return 1;
}

/* Which of the tensors the recorded stats are: 0 or 1 when one call was
 * recorded, 2 (tensor 0 then 1) or 3 (1 then 0) when both were, for calls
 * of one step merge. Every field must agree bit for bit with the
 * one-thread reference run of that order (ref, ref_sk: 0, 1, 01, 10),
 * tensor 0 and 1 also with the independently known values, and the calls
 * it holds must have returned OK. */
static int which_one(const double *got, const double *got_sk, const double ref[4][RESDIAG_N_FIELDS],
                     const double ref_sk[4][RESDIAG_MAX_SKETCH], int sk, const known kn[2],
                     const int ok[2], const char *what, int step)
{
    int k = got[RESDIAG_FIELD_ROWS] == same_rows[0] ? 0
            : got[RESDIAG_FIELD_ROWS] == same_rows[1] ? 1 : 2;
    if (k == 2) {
        ck_assert_msg(got[RESDIAG_FIELD_ROWS] == same_rows[0] + same_rows[1],
                      "step %d %s: rows %g", step, what, got[RESDIAG_FIELD_ROWS]);
        ck_assert_msg(ok[0] && ok[1], "step %d %s: holds both tensors, but a call was refused",
                      step, what);
        /* the order: the reference of 0 then 1 or of 1 then 0 whose every
         * field and sketch bucket it holds (a parameter has no sketch, and
         * the two orders may round alike: then either is right) */
        k = same_bits(got, got_sk, ref[2], ref_sk[2], sk) ? 2 : 3;
    } else {
        ck_assert_msg(ok[k], "step %d %s: holds tensor %d, whose call was refused", step, what, k);
        ck_assert_msg(close_to(got[RESDIAG_FIELD_FROB], kn[k].frob, NORM_TOL) &&
                          close_to(got[RESDIAG_FIELD_TOK_NORM_MEAN], kn[k].norm_mean, NORM_TOL) &&
                          got[RESDIAG_FIELD_ABSMAX] == kn[k].absmax &&
                          got[RESDIAG_FIELD_ABSMAX_COL] == kn[k].absmax_col,
                      "step %d %s: rows of tensor %d, frob %.9g (want %.9g), norm mean %.9g "
                      "(want %.9g), absmax %g (want %g)", step, what, k, got[RESDIAG_FIELD_FROB],
                      kn[k].frob, got[RESDIAG_FIELD_TOK_NORM_MEAN], kn[k].norm_mean,
                      got[RESDIAG_FIELD_ABSMAX], kn[k].absmax);
    }
    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
        if (f != RESDIAG_FIELD_CALL_SEQ)
            ck_assert_msg(got[f] == ref[k][f] || (isnan(got[f]) && isnan(ref[k][f])),
                          "step %d %s: field %s %.17g, the reference of order %d gives %.17g",
                          step, what, resdiag_field_name((resdiag_field)f), got[f], k,
                          ref[k][f]);
    for (int m = 0; m < sk; m++)
        ck_assert_msg(got_sk[m] == ref_sk[k][m], "step %d %s: sketch[%d] %.17g, the reference "
                      "of order %d gives %.17g", step, what, m, got_sk[m], k, ref_sk[k][m]);
    return k;
}

START_TEST(same_site_from_two_threads_keeps_whole_calls)
{
    float *x[2], *f[2], *g[2];
    known kx[2], kf[2], kg[2];
    double tok_ratio[2];
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)same_rows[k] * SAME_D;
        x[k] = malloc(n * sizeof(float));
        f[k] = malloc(n * sizeof(float));
        g[k] = malloc(n * sizeof(float));
        ck_assert(x[k] && f[k] && g[k]);
        for (size_t i = 0; i < n; i++) {
            x[k][i] = (1.0f + 2.0f * (float)k) * (value(11u + (unsigned)k, (int)i) + 0.5f);
            f[k][i] = (0.1f + 0.2f * (float)k) * value(31u + (unsigned)k, (int)i);
            g[k][i] = (0.5f + (float)k) * value(51u + (unsigned)k, (int)i);
        }
        kx[k] = know(x[k], same_rows[k]);
        kf[k] = know(f[k], same_rows[k]);
        kg[k] = know(g[k], same_rows[k]);
        tok_ratio[k] = know_tok_ratio(x[k], f[k], same_rows[k]);
    }

    /* The reference, one thread: step k holds tensors k alone (k = 0, 1),
     * step 2 tensors 0 then 1, step 3 tensors 1 then 0 (calls merge). */
    char path_ref[320], path_two[320];
    snprintf(path_ref, sizeof path_ref, "%s/same-ref.h5", tmpdir);
    snprintf(path_two, sizeof path_two, "%s/same-two.h5", tmpdir);
    resdiag *r = open_same(path_ref);
    for (int k = 0; k < 2; k++) {
        same_call c;
        ck_assert_int_eq(resdiag_step_begin(r, k), RESDIAG_OK);
        same_hooks(r, k, x[k], f[k], g[k], &c);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(c.rc[i], RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    for (int k = 0; k < 2; k++) {
        same_call c;
        ck_assert_int_eq(resdiag_step_begin(r, 2 + k), RESDIAG_OK);
        same_hooks(r, k, x[k], f[k], g[k], &c);
        same_hooks(r, 1 - k, x[1 - k], f[1 - k], g[1 - k], &c);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    resdiag_destroy(r);

    /* Two threads, the same sites, released together; rounds until each
     * kind of overlap was refused at least once. */
    same_call calls[SAME_ROUNDS_MAX][2];
    int busy[4] = { 0, 0, 0, 0 }, rounds = 0;
    busy_logs = log_count = 0;
    r = open_same(path_two);
    while (rounds < SAME_ROUNDS_MIN ||
           (rounds < SAME_ROUNDS_MAX && (!busy[0] || !busy[1] || !busy[2] || !busy[3]))) {
        ck_assert_int_eq(resdiag_step_begin(r, rounds), RESDIAG_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        pthread_t th[2];
        same_worker w[2];
        for (int k = 0; k < 2; k++) {
            w[k] = (same_worker){ r, k, x[k], f[k], g[k], &go, { { 0 } } };
            ck_assert_int_eq(pthread_create(&th[k], NULL, same_main, &w[k]), 0);
        }
        for (int k = 0; k < 2; k++)
            pthread_join(th[k], NULL);
        pthread_barrier_destroy(&go);
        for (int k = 0; k < 2; k++) {
            calls[rounds][k] = w[k].out;
            for (int i = 0; i < 4; i++) {
                int rc = w[k].out.rc[i];
                ck_assert_msg(rc == RESDIAG_OK || rc == RESDIAG_E_BUSY,
                              "round %d thread %d call %d: %s", rounds, k, i,
                              resdiag_strerror((resdiag_status)rc));
                busy[i] += rc == RESDIAG_E_BUSY;
            }
        }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        rounds++;
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    const int refused = busy[0] + busy[1] + busy[2] + busy[3];
    ck_assert_msg(refused > 0, "no call was refused in %d rounds: the calls never overlapped",
                  rounds);
    /* one line per refused call, up to the rate limit of client-bug messages */
    ck_assert_int_eq(busy_logs, refused < 20 ? refused : 20);
    ck_assert_int_eq(log_count, busy_logs);

    resdiag_reader *ref = NULL, *two = NULL;
    ck_assert_int_eq(resdiag_reader_open(&ref, path_ref), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_open(&two, path_two), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(two)->n_steps, rounds);
    const int sk = resdiag_reader_info(two)->sketch_size;
    static const resdiag_site sites[3] = { RESDIAG_STREAM_IN, RESDIAG_BRANCH_OUT,
                                           RESDIAG_NORM_IN };
    double ref_f[4][4][RESDIAG_N_FIELDS], ref_sk[4][4][RESDIAG_MAX_SKETCH];
    double ref_u[4][RESDIAG_N_UPDATE_FIELDS];
    memset(ref_sk, 0, sizeof ref_sk);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(resdiag_reader_site(ref, k, RESDIAG_FORWARD, 0, 0, sites[i],
                                                 ref_f[i][k], NULL), RESDIAG_OK);
            ck_assert_int_eq(resdiag_reader_sketch(ref, k, RESDIAG_FORWARD, 0, 0, sites[i],
                                                   ref_sk[i][k]), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_reader_param(ref, k, 0, "mlp.w2", ref_f[3][k], NULL),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_update(ref, k, 0, 0, ref_u[k]), RESDIAG_OK);
    }
    for (int k = 0; k < 2; k++)
        ck_assert(close_to(ref_u[k][RESDIAG_UPDATE_RATIO_TOK_MEAN], tok_ratio[k], RATIO_TOL));
    /* merged: the mean over the tokens of both */
    double pooled = (tok_ratio[0] * same_rows[0] + tok_ratio[1] * same_rows[1]) /
                    (same_rows[0] + same_rows[1]);
    ck_assert(close_to(ref_u[2][RESDIAG_UPDATE_RATIO_TOK_MEAN], pooled, RATIO_TOL));
    ck_assert(close_to(ref_u[3][RESDIAG_UPDATE_RATIO_TOK_MEAN], pooled, RATIO_TOL));
    const known *kn[4] = { kx, kf, kg, kg };
    static const char *const what[4] = { "stream_in", "branch_out", "norm_in", "mlp.w2" };
    for (int s = 0; s < rounds; s++) {
        int held[4];
        for (int i = 0; i < 4; i++) {
            double got[RESDIAG_N_FIELDS], got_sk[RESDIAG_MAX_SKETCH] = { 0 };
            int observed = 0;
            if (i < 3) {
                ck_assert_int_eq(resdiag_reader_site(two, s, RESDIAG_FORWARD, 0, 0, sites[i],
                                                     got, &observed), RESDIAG_OK);
                ck_assert_int_eq(resdiag_reader_sketch(two, s, RESDIAG_FORWARD, 0, 0, sites[i],
                                                       got_sk), RESDIAG_OK);
            } else {
                ck_assert_int_eq(resdiag_reader_param(two, s, 0, "mlp.w2", got, &observed),
                                 RESDIAG_OK);
            }
            int ok[2] = { calls[s][0].rc[i] == RESDIAG_OK, calls[s][1].rc[i] == RESDIAG_OK };
            ck_assert_msg(observed == (ok[0] || ok[1]), "step %d %s: observed %d", s, what[i],
                          observed);
            held[i] = observed ? which_one(got, got_sk, ref_f[i], ref_sk[i], i < 3 ? sk : 0,
                                           kn[i], ok, what[i], s)
                               : -1;
        }
        /* The update ratio: of the stream_in and branch_out the step holds,
         * paired k-th call with k-th call in the order the threads made
         * them. When both sites hold the same calls in the same order, it
         * is that reference's, or (the threads interleaved the two calls of
         * a pair) NaN per token. Otherwise it is one that a pairing of the
         * calls gives: NaN, or a pair of single calls of either tensor. */
        double u[RESDIAG_N_UPDATE_FIELDS];
        ck_assert_int_eq(resdiag_reader_update(two, s, 0, 0, u), RESDIAG_OK);
        if (held[0] < 0 || held[1] < 0) {
            ck_assert(isnan(u[0]) && isnan(u[1]));
            continue;
        }
        if (held[0] == held[1]) {
            double want = ref_f[1][held[1]][RESDIAG_FIELD_FROB] /
                          ref_f[0][held[0]][RESDIAG_FIELD_FROB];
            ck_assert_msg(u[RESDIAG_UPDATE_RATIO_FROB] == want, "step %d: ratio_frob %.17g, "
                          "the recorded tensors give %.17g", s, u[RESDIAG_UPDATE_RATIO_FROB],
                          want);
            double tok = u[RESDIAG_UPDATE_RATIO_TOK_MEAN];
            ck_assert_msg(tok == ref_u[held[0]][RESDIAG_UPDATE_RATIO_TOK_MEAN] ||
                              (held[0] >= 2 && isnan(tok)),
                          "step %d: ratio_tok_mean %.17g, the reference of order %d gives "
                          "%.17g", s, tok, held[0], ref_u[held[0]][RESDIAG_UPDATE_RATIO_TOK_MEAN]);
            continue;
        }
        int plausible_frob = isnan(u[RESDIAG_UPDATE_RATIO_FROB]);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                plausible_frob |= u[RESDIAG_UPDATE_RATIO_FROB] ==
                                  ref_f[1][b][RESDIAG_FIELD_FROB] / ref_f[0][a][RESDIAG_FIELD_FROB];
        ck_assert_msg(plausible_frob, "step %d: ratio_frob %.17g is no pairing's", s,
                      u[RESDIAG_UPDATE_RATIO_FROB]);
        double tok = u[RESDIAG_UPDATE_RATIO_TOK_MEAN];
        ck_assert_msg(isnan(tok) || tok == ref_u[0][RESDIAG_UPDATE_RATIO_TOK_MEAN] ||
                          tok == ref_u[1][RESDIAG_UPDATE_RATIO_TOK_MEAN],
                      "step %d: ratio_tok_mean %.17g is no pairing's", s, tok);
    }
    resdiag_reader_destroy(ref);
    resdiag_reader_destroy(two);
    unlink(path_ref);
    unlink(path_two);
    for (int k = 0; k < 2; k++) {
        free(x[k]);
        free(f[k]);
        free(g[k]);
    }
    fprintf(stderr, "same site: %d rounds, refused %d stream_in, %d branch_out, %d norm_in, "
            "%d parameter calls\n", rounds, busy[0], busy[1], busy[2], busy[3]);
}
END_TEST

static const check_program program = {
    .name = "threads",
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("threads", 240, setup, teardown),
               CHECK_TEST(threads_on_different_layers_write_what_one_thread_writes),
               CHECK_TEST(hook_threads_inside_concurrent_hooks_is_deterministic),
               CHECK_TEST(split_pool_shared_absent_or_forked_gives_the_same_bits),
               CHECK_TEST(same_site_from_two_threads_keeps_whole_calls))
