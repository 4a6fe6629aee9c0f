/*
 * test-threads.c - hooks from several threads on different layers at once
 * (what resdiag.h allows) against the same calls made one after another.
 * The files must be equal in every value except the call order, which
 * threads interleave; the call order of a step must still number each
 * accepted call exactly once. Mixed dtypes, strided views, sketches, update
 * ratios, parameter gradients, refused calls logged from several threads at
 * once, and hook_threads = 2 splitting large tensors inside those threads.
 *
 * Meant to run under ThreadSanitizer (build-tsan, scripts/test-sanitizers.sh
 * with TSAN_OPTIONS=halt_on_error=1:exitcode=66); in a plain build it checks
 * the values only.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resdiag.h"

enum { L = 8, S = 2, D = 64, T = 24, STEPS = 5, THREADS = 4 };
/* A parameter gradient of 1 MiB of f32: large enough for hook_threads = 2. */
enum { BIG_ROWS = 2048, BIG_COLS = 128 };

static const char *const sub_names[S] = { "attn", "mlp" };
static const char *const lparams[2] = { "attn.wo", "mlp.w2" };

/* The log handler is called from the hook threads: a mutex guards it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static long log_count;
static void count_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    pthread_mutex_lock(&log_lock);
    log_count += msg && *msg;
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
    unsigned h = seed * 2654435761u ^ (unsigned)i * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
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
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = L;
    m.d_model = D;
    m.n_sublayers = S;
    m.sublayer_names = sub_names;
    m.n_layer_params = 2;
    m.layer_param_names = lparams;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 2;
    o.sketch_size = 8;
    o.hook_threads = hook_threads;
    resdiag *r = NULL;
    ck_assert_int_eq(resdiag_open(&r, path, &m, &o), RESDIAG_OK);
    return r;
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
    resdiag_reader_close(a);
    resdiag_reader_close(b);
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

START_TEST(hook_threads_2_inside_concurrent_hooks_is_deterministic)
{
    write_both(2, 1);
    assert_same_but_order(1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, threads_on_different_layers_write_what_one_thread_writes);
    tcase_add_test(tc, hook_threads_2_inside_concurrent_hooks_is_deterministic);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
