/*
 * test-team.c - resdiag_observe_team_at and resdiag_param_grad_team_at
 * (lib/record/team.c): a team of real threads, each giving its part,
 * against resdiag_observe_at with hook_threads = n_parts (the reference:
 * lib/stats/split.c's parts). The two run files are read back and must
 * hold the same bits in every dataset (schema 1: doubles as computed),
 * for tensors below and above 1 MiB, rows not divisible by n_parts, fewer
 * rows than parts, strided and bf16 views, repeated calls of a site in a
 * step, the update ratio of a residual add (also with a stream in copied
 * from a team's stream out: its norms), parameter gradients, parts
 * arriving in every order and all at once; and a single thread's run
 * must differ somewhere (so the comparison can tell the parts apart).
 * Then each client bug (a part twice, another n_parts or tensor, a team of
 * one inside a team, out of range), a team incomplete at step_end (also
 * across set_enabled, close and destroy), and teams of different sites at
 * once, each for a tensor read whole (8 KiB) and one split (2 MiB).
 *
 * Meant to run under ThreadSanitizer too (suite 'threads').
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "resdiag.h"

enum { L = 2, S = 2, D = 256 };
/* the logits and a parameter take any width: 3 and 1 rows of 1.5 MiB */
enum { WIDE = 3 * 131072 };

static const char *const sub_names[S] = { "attn", "mlp" };
static const char *const lparams[1] = { "mlp.w2" };
static const char *const mparams[1] = { "head.w" };

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_log[600];
static int warnings;
static void keep_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    pthread_mutex_lock(&log_lock);
    snprintf(last_log, sizeof last_log, "%s", msg ? msg : "");
    warnings += msg && strstr(msg, "warning: resdiag_step_end: the team") != NULL;
    pthread_mutex_unlock(&log_lock);
}

static char tmpdir[256];

static const char *tmp(const char *name)
{
    static char paths[8][320];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 320, "%s/%s", tmpdir, name);
    return p;
}

static resdiag *open_run(const char *path, int hook_threads)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names, .layer_params = 1, .layer_param_names = lparams,
        .model_params = 1, .model_param_names = mparams });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* doubles as computed: the order of a merge shows in the bits */
    o.sketch_size = 16;
    o.hook_threads = hook_threads;
    o.log_fn = keep_log;
    o.overwrite = 1;
    return fixture_open(path, &m, &o);
}

/* ------------------------------------------------------------ tensors */

static uint64_t rng = 88172645463325252ull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0;
}

/* rows x stride of f32 (a view may take fewer columns), values of varied
 * magnitude. */
static float *f32_tensor(int64_t rows, int64_t stride)
{
    float *x = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)stride * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < stride; j++)
            x[i * stride + j] = (float)(rnd() * (1.0 + (double)(i % 7)) + 0.25 * (double)(j % 3));
    return x;
}

/* One observation: a site (param < 0) or parameter gradient, its tensor. */
typedef struct obs {
    resdiag_direction dir;
    int layer, sublayer;
    resdiag_site site;
    const char *param; /* or NULL */
    resdiag_tensor t;
} obs;

static resdiag_status observe_whole(resdiag *r, const obs *o)
{
    if (o->param)
        return resdiag_param_grad_at(r, o->layer, o->param, o->t, "test-team.c", 1);
    return resdiag_observe_at(r, o->dir, o->layer, o->sublayer, o->site, o->t, "test-team.c", 1);
}

static resdiag_status observe_part(resdiag *r, const obs *o, int part, int n)
{
    if (o->param)
        return resdiag_param_grad_team_at(r, o->layer, o->param, o->t, part, n, "test-team.c",
                                          1);
    return resdiag_observe_team_at(r, o->dir, o->layer, o->sublayer, o->site, o->t, part, n,
                                   "test-team.c", 1);
}

/* ------------------------------------------------------------ teams of threads */

typedef struct member {
    resdiag *r;
    const obs *o;
    int part, n;
    pthread_barrier_t *go; /* NULL: no barrier */
    resdiag_status st;
} member;

static void *member_main(void *p)
{
    member *m = p;
    if (m->go)
        pthread_barrier_wait(m->go);
    m->st = observe_part(m->r, m->o, m->part, m->n);
    return NULL;
}

/* The n parts of o from n threads: in the order `order` (each thread
 * joined before the next starts), or with order NULL all released at once. */
static void team(resdiag *r, const obs *o, int n, const int *order)
{
    pthread_t th[16];
    member m[16];
    pthread_barrier_t go;
    ck_assert_int_le(n, 16);
    if (!order)
        pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        const int part = order ? order[i] : i;
        m[i] = (member){ r, o, part, n, order ? NULL : &go, RESDIAG_E_INVALID };
        ck_assert_int_eq(pthread_create(&th[i], NULL, member_main, &m[i]), 0);
        if (order)
            pthread_join(th[i], NULL);
    }
    if (!order) {
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
    }
    for (int i = 0; i < n; i++)
        ck_assert_msg(m[i].st == RESDIAG_OK, "part %d of %d: %s (%s)", m[i].part, n,
                      resdiag_strerror(m[i].st), resdiag_errmsg(r));
}

/* ------------------------------------------------------------ comparing files */

/* Whether every dataset but step_time holds the same values in both files
 * (NaN equal to NaN); with calls_too 0 the call order is left out. Fails
 * the test on a difference when must_equal, else returns 0. */
static int same_files(const char *pa, const char *pb, int calls_too, int must_equal)
{
    resdiag_reader *a = NULL, *b = NULL;
    ck_assert_int_eq(resdiag_reader_open(&a, pa), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_open(&b, pb), RESDIAG_OK);
    const int64_t steps = resdiag_reader_info(a)->n_steps;
    ck_assert_int_eq(steps, resdiag_reader_info(b)->n_steps);
    ck_assert_int_gt(steps, 0);
    int n = resdiag_reader_n_datasets(a), same = 1, compared = 0;
    ck_assert_int_eq(n, resdiag_reader_n_datasets(b));
    for (int i = 0; i < n; i++) {
        const char *name = resdiag_reader_dataset_name(a, i);
        ck_assert_str_eq(name, resdiag_reader_dataset_name(b, i));
        if (strcmp(name, "step_time") == 0)
            continue;
        int64_t dims[8];
        int rank;
        ck_assert_int_eq(resdiag_reader_dims(a, name, dims, 8, &rank), RESDIAG_OK);
        size_t total = 1;
        for (int k = 0; k < rank; k++)
            total *= (size_t)dims[k];
        if (total == 0)
            continue;
        double *va = malloc(total * sizeof *va), *vb = malloc(total * sizeof *vb);
        ck_assert(va && vb);
        ck_assert_int_eq(resdiag_reader_read(a, name, 0, dims[0], va, total), RESDIAG_OK);
        ck_assert_int_eq(resdiag_reader_read(b, name, 0, dims[0], vb, total), RESDIAG_OK);
        const int is_stats = strstr(name, "_stats") != NULL;
        for (size_t k = 0; k < total && same; k++) {
            if (is_stats && !calls_too && k % RESDIAG_N_FIELDS == RESDIAG_FIELD_CALL_SEQ)
                continue;
            const int eq = (isnan(va[k]) && isnan(vb[k])) || memcmp(&va[k], &vb[k], 8) == 0;
            if (!eq && must_equal)
                ck_abort_msg("%s[%zu]: %.17g with hook_threads, %.17g by team", name, k,
                             va[k], vb[k]);
            same &= eq;
        }
        compared++;
        free(va);
        free(vb);
    }
    ck_assert_int_ge(compared, 6);
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
    return same;
}

/* ------------------------------------------------------------ the same bits */

typedef struct shape {
    int64_t rows, cols, stride;
} shape;

/* The observations of one step: every block site of layer 0 sublayer 1 in
 * shape sh (STREAM_IN and BRANCH_OUT: the update ratio), STREAM_OUT twice
 * (a second call's sketch rows follow the first's), the backward
 * STREAM_OUT as bf16, the logits and the two parameters wide (fewer rows
 * than parts). Returns how many; the buffers go to *bufs. */
static int step_obs(obs *o, void **bufs, int *nbufs, shape sh, int64_t wide_rows)
{
    int n = 0, nb = 0;
    float *x[4];
    for (int k = 0; k < 4; k++)
        bufs[nb++] = x[k] = f32_tensor(sh.rows, sh.stride);
    static const resdiag_site sites[] = { RESDIAG_STREAM_IN, RESDIAG_NORM_OUT,
                                          RESDIAG_BRANCH_OUT, RESDIAG_STREAM_OUT };
    for (int k = 0; k < 4; k++) {
        resdiag_tensor t = resdiag_f32(x[k], sh.rows, sh.cols);
        t.row_stride = sh.stride;
        o[n++] = (obs){ RESDIAG_FORWARD, 0, 1, sites[k], NULL, t };
    }
    o[n] = o[n - 1]; /* STREAM_OUT again: the rows of x[0] */
    o[n].t.data = x[0];
    n++;
    uint16_t *h = malloc((size_t)(sh.rows > 0 ? sh.rows : 1) * (size_t)sh.cols * sizeof *h);
    ck_assert_ptr_nonnull(h);
    bufs[nb++] = h;
    for (int64_t i = 0; i < sh.rows * sh.cols; i++) {
        float v = x[1][(i / sh.cols) * sh.stride + i % sh.cols];
        uint32_t u;
        memcpy(&u, &v, 4);
        h[i] = (uint16_t)(u >> 16);
    }
    o[n++] = (obs){ RESDIAG_BACKWARD, 1, 0, RESDIAG_STREAM_OUT, NULL,
                    resdiag_bf16(h, sh.rows, sh.cols) };
    float *w = f32_tensor(wide_rows, WIDE / wide_rows);
    bufs[nb++] = w;
    o[n++] = (obs){ RESDIAG_FORWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_LOGITS, NULL,
                    resdiag_f32(w, wide_rows, WIDE / wide_rows) };
    o[n++] = (obs){ RESDIAG_BACKWARD, 1, 0, RESDIAG_STREAM_IN, "mlp.w2",
                    resdiag_f32(w, wide_rows, WIDE / wide_rows) };
    o[n++] = (obs){ RESDIAG_BACKWARD, RESDIAG_MODEL_LEVEL, 0, RESDIAG_STREAM_IN, "head.w",
                    resdiag_f32(w, 1, WIDE) };
    *nbufs = nb;
    return n;
}

/* One run per mode of a few steps of step_obs in the shapes given:
 * mode 0 resdiag_observe_at with hook_threads (n), mode 1 teams of n in
 * the order `order` (NULL: all at once). */
static void write_run(const char *path, int mode, int hook_threads, int n, const int *order,
                      const shape *shapes, int n_shapes)
{
    resdiag *r = open_run(path, hook_threads);
    rng = 88172645463325252ull; /* the same tensors in every run */
    for (int s = 0; s < n_shapes; s++) {
        obs o[16];
        void *bufs[16];
        int nb = 0;
        const int64_t wide_rows = s % 2 ? 1 : 3;
        const int no = step_obs(o, bufs, &nb, shapes[s], wide_rows);
        ck_assert_int_eq(resdiag_step_begin(r, s), RESDIAG_OK);
        for (int k = 0; k < no; k++) {
            if (mode == 0)
                ck_assert_int_eq(observe_whole(r, &o[k]), RESDIAG_OK);
            else
                team(r, &o[k], n, order);
        }
        /* a stream in copied from a site of the sublayer before (observed
         * once in the step) with its per-token norms (same_as.c), which its
         * add then pairs by */
        ck_assert_msg(resdiag_observe_same_as(r, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, 0, 1,
                                              RESDIAG_NORM_OUT, "test-team.c", 2) == RESDIAG_OK,
                      "%s", resdiag_errmsg(r));
        const obs branch = { RESDIAG_FORWARD, 1, 0, RESDIAG_BRANCH_OUT, NULL, o[2].t };
        if (mode == 0)
            ck_assert_int_eq(observe_whole(r, &branch), RESDIAG_OK);
        else
            team(r, &branch, n, order);
        ck_assert_msg(resdiag_step_end(r) == RESDIAG_OK, "%s", resdiag_errmsg(r));
        for (int k = 0; k < nb; k++)
            free(bufs[k]);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

static const shape shapes[] = {
    { 100, D, D },       /* 100 KiB: one part, read by part 0 */
    { 1024, D, D },      /* 1 MiB: split */
    { 1031, D, D },      /* rows not divisible by 2, 3, 4 */
    { 1500, D, D + 5 },  /* a strided view */
    { 0, D, D },         /* no rows */
    { 2053, D, D },
};
enum { N_SHAPES = sizeof shapes / sizeof *shapes };

/* n_parts 2, 3, 4 and 5, all parts at once: the bits of hook_threads = n;
 * and hook_threads 1 differs (the comparison sees the parts). */
START_TEST(team_gives_the_bits_of_hook_threads)
{
    static const int counts[] = { 2, 3, 4, 5 };
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        const int n = counts[c];
        write_run(tmp("ref.h5"), 0, n, n, NULL, shapes, N_SHAPES);
        write_run(tmp("team.h5"), 1, 1, n, NULL, shapes, N_SHAPES);
        same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
        /* and with the run's own hook_threads set otherwise: the team decides */
        write_run(tmp("team.h5"), 1, 3, n, NULL, shapes, N_SHAPES);
        same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
    }
    write_run(tmp("one.h5"), 0, 1, 1, NULL, shapes, N_SHAPES);
    ck_assert_msg(!same_files(tmp("ref.h5"), tmp("one.h5"), 1, 0),
                  "hook_threads 5 gave the bits of one thread: the comparison is blind");
}
END_TEST

/* Every order of arrival of 3 parts (and 4 reversed): the same bits. */
START_TEST(parts_in_every_order_give_the_same_bits)
{
    static const int orders[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
                                      { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
    const shape few[] = { shapes[2], shapes[5] };
    write_run(tmp("ref.h5"), 0, 3, 3, NULL, few, 2);
    for (int k = 0; k < 6; k++) {
        write_run(tmp("team.h5"), 1, 1, 3, orders[k], few, 2);
        same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
    }
    static const int rev4[4] = { 3, 2, 1, 0 };
    write_run(tmp("ref.h5"), 0, 4, 4, NULL, few, 2);
    write_run(tmp("team.h5"), 1, 1, 4, rev4, few, 2);
    same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
}
END_TEST

/* n_parts = 1 is resdiag_observe_at; NULL handle and outside a step: no-ops. */
START_TEST(one_part_null_handle_and_outside_a_step)
{
    const shape one[] = { shapes[1] };
    write_run(tmp("ref.h5"), 0, 1, 1, NULL, one, 1);
    write_run(tmp("team.h5"), 1, 1, 1, NULL, one, 1);
    same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
    float x[D] = { 1.0f };
    resdiag_tensor t = resdiag_f32(x, 1, D);
    ck_assert_int_eq(resdiag_observe_team_at(NULL, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, t,
                                             0, 2, "f.c", 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_team_at(NULL, 0, "mlp.w2", t, 5, 2, "f.c", 1),
                     RESDIAG_OK);
    resdiag *r = open_run(tmp("idle.h5"), 1);
    ck_assert_int_eq(resdiag_observe_team_at(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, t, 0,
                                             2, "f.c", 1), RESDIAG_OK);
    resdiag_destroy(r);
}
END_TEST

/* ------------------------------------------------------------ client bugs */

/* The tensors of the tests below, by their loop's index: 8 rows (8 KiB,
 * read whole by one call of the team) and 2048 rows (2 MiB, split). */
static const int64_t team_rows[] = { 8, 2048 };
enum { N_TEAM_SIZES = sizeof team_rows / sizeof *team_rows };

static resdiag_tensor sized_tensor(float **x, int size)
{
    /* twice the rows: a view of twice the row stride stays in the buffer */
    *x = f32_tensor(2 * team_rows[size], D);
    return resdiag_f32(*x, team_rows[size], D);
}

static int log_says(const char *what)
{
    pthread_mutex_lock(&log_lock);
    int yes = strstr(last_log, what) != NULL;
    pthread_mutex_unlock(&log_lock);
    return yes;
}

#define TEAM(r, t, part, n, line) \
    resdiag_observe_team_at((r), RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, (t), (part), (n), \
                            "trainer.c", (line))

#define PARAM_TEAM(r, t, part, n, line) \
    resdiag_param_grad_team_at((r), 0, "mlp.w2", (t), (part), (n), "trainer.c", (line))

/* The client bugs of a team, each after the first call of a site's team
 * (part 0 of 2) and of a parameter's (part 1 of 2): the bug's tensor, part
 * and n_parts, and what its log line says. */
enum { N_BUGS = 9 };
static const char *bad_call(int bug, resdiag_tensor *t, const float *other, int *part, int *n,
                            int *param)
{
    *part = 1;
    *n = 2;
    *param = 0;
    switch (bug) {
    case 0: *part = 0; return "given twice";
    case 1: *n = 3; return "n_parts 3";
    case 2: /* a team of one inside a team */
        *part = 0;
        *n = 1;
        return "n_parts 1";
    case 3: t->data = other; return "another tensor";
    case 4: t->rows--; return "another tensor";
    case 5: t->row_stride = 2 * D; return "another tensor";
    case 6: t->dtype = RESDIAG_DTYPE_BF16; return "another tensor";
    case 7: /* a parameter takes any width: another shape of the same data */
        t->rows /= 2;
        t->cols *= 2;
        *part = 0;
        *param = 1;
        return "another tensor";
    default: *param = 1; return "given twice";
    }
}

/* Each bug (test index: bug x tensor size) is refused with its code and a
 * message naming the call site, for a tensor read whole and one split
 * alike; the call records nothing and the team completes with the right
 * calls: each slot then holds exactly one call, equal to the reference's. */
START_TEST(client_bugs_are_refused_and_the_team_still_completes)
{
    const int size = _i % N_TEAM_SIZES, bug = _i / N_TEAM_SIZES;
    float *x, *y;
    resdiag_tensor t = sized_tensor(&x, size), other = sized_tensor(&y, size);
    resdiag *ref = open_run(tmp("ref.h5"), 2), *r = open_run(tmp("team.h5"), 1);
    ck_assert_int_eq(resdiag_step_begin(ref, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_at(ref, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, t,
                                        "trainer.c", 10), RESDIAG_OK);
    ck_assert_int_eq(resdiag_param_grad_at(ref, 0, "mlp.w2", t, "trainer.c", 20), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(ref), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(ref), RESDIAG_OK);
    resdiag_destroy(ref);

    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 0, 2, 10), RESDIAG_OK);
    ck_assert_int_eq(PARAM_TEAM(r, t, 1, 2, 20), RESDIAG_OK);
    resdiag_tensor bad = t;
    int part, n, param;
    const char *says = bad_call(bug, &bad, other.data, &part, &n, &param);
    const resdiag_status st = param ? PARAM_TEAM(r, bad, part, n, 11) : TEAM(r, bad, part, n, 11);
    ck_assert_msg(st == RESDIAG_E_INVALID, "bug %d (%s): %s", bug, says, resdiag_strerror(st));
    ck_assert_msg(log_says(says) && log_says("trainer.c:11"), "bug %d: %s", bug, last_log);

    ck_assert_int_eq(TEAM(r, t, 2, 2, 15), RESDIAG_E_RANGE);
    ck_assert_msg(log_says("trainer.c:15"), "%s", last_log);
    ck_assert_int_eq(TEAM(r, t, -1, 2, 16), RESDIAG_E_RANGE);
    ck_assert_int_eq(TEAM(r, t, 0, 0, 17), RESDIAG_E_RANGE);
    ck_assert_int_eq(TEAM(r, t, 0, RESDIAG_MAX_TEAM + 1, 18), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_observe_team_at(r, RESDIAG_FORWARD, L, 0, RESDIAG_STREAM_OUT, t, 0,
                                             2, "trainer.c", 19), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_param_grad_team_at(r, 0, "nope", t, 0, 2, "trainer.c", 20),
                     RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_param_grad_team_at(r, 0, NULL, t, 0, 2, "trainer.c", 21),
                     RESDIAG_E_NULL);
    ck_assert_int_eq(TEAM(r, t, 1, 2, 22), RESDIAG_OK); /* completes the teams */
    ck_assert_int_eq(PARAM_TEAM(r, t, 0, 2, 22), RESDIAG_OK);
    ck_assert_msg(resdiag_step_end(r) == RESDIAG_OK, "%s", resdiag_errmsg(r));
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    same_files(tmp("ref.h5"), tmp("team.h5"), 1, 1);
    free(x);
    free(y);
}
END_TEST

/* A team short of a part at step_end: the step is written without that
 * site (the other site of the step is there), step_end says so and
 * returns RESDIAG_E_STATE; the next step's team starts afresh. */
START_TEST(incomplete_team_at_step_end)
{
    float *x;
    resdiag_tensor t = sized_tensor(&x, _i);
    resdiag *r = open_run(tmp("team.h5"), 1);
    warnings = 0;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_at(r, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_OUT, t, "t.c",
                                        1), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 1, 3, 30), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 0, 3, 31), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_E_STATE);
    ck_assert_int_eq(warnings, 1);
    ck_assert_msg(strstr(resdiag_errmsg(r), "2 of its 3 parts") &&
                  strstr(resdiag_errmsg(r), "trainer.c:30"), "%s", resdiag_errmsg(r));
    /* the next step: a whole team of 2, recorded; part 2 of the old team is gone */
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 1, 2, 32), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 0, 2, 32), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(warnings, 1);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, tmp("team.h5")), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 2);
    double f[RESDIAG_N_FIELDS];
    int observed = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_OUT, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 1);
    ck_assert_int_eq(resdiag_reader_site(rd, 1, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 1);
    ck_assert_int_eq((int64_t)f[RESDIAG_FIELD_ROWS], team_rows[_i]);
    resdiag_reader_destroy(rd);
    free(x);
}
END_TEST

/* resdiag_set_enabled inside a step acts at the next step_begin: the open
 * team still counts at this step_end. Closing inside a step with a team
 * open drops that step (as any) and destroy frees the team (ASan: no
 * leak); a team call after close is refused. */
START_TEST(set_enabled_close_and_destroy_with_an_open_team)
{
    float *x;
    resdiag_tensor t = sized_tensor(&x, _i);
    resdiag *r = open_run(tmp("team.h5"), 1);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 0, 2, 40), RESDIAG_OK);
    ck_assert_int_eq(resdiag_set_enabled(r, 0), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_E_STATE);
    ck_assert_int_eq(resdiag_step_begin(r, 1), RESDIAG_OK); /* not recorded: a no-op */
    ck_assert_int_eq(TEAM(r, t, 1, 2, 41), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_set_enabled(r, 1), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_begin(r, 2), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 1, 2, 42), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    ck_assert_int_eq(TEAM(r, t, 0, 2, 43), RESDIAG_E_STATE);
    resdiag_destroy(r);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, tmp("team.h5")), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 1);
    double f[RESDIAG_N_FIELDS];
    int observed = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 0);
    resdiag_reader_destroy(rd);
    free(x);
}
END_TEST

/* ------------------------------------------------------------ teams at once */

typedef struct site_job {
    resdiag *r;
    obs o[3];
    int part, n;
    pthread_barrier_t *go;
    int failed;
} site_job;

static void *site_job_main(void *p)
{
    site_job *j = p;
    pthread_barrier_wait(j->go);
    for (int k = 0; k < 3; k++)
        j->failed += observe_part(j->r, &j->o[k], j->part, j->n) != RESDIAG_OK;
    return NULL;
}

/* Two teams of two threads each, on sites of different layers (and a
 * parameter), all four threads at once: the values of a run of one
 * thread with hook_threads 2 (the call order aside, which interleaves). */
START_TEST(teams_of_different_sites_at_once)
{
    float *x[2];
    resdiag_tensor t[2];
    for (int l = 0; l < 2; l++)
        t[l] = sized_tensor(&x[l], _i);
    obs o[2][3];
    for (int l = 0; l < 2; l++) {
        o[l][0] = (obs){ RESDIAG_FORWARD, l, 0, RESDIAG_STREAM_IN, NULL, t[l] };
        o[l][1] = (obs){ RESDIAG_FORWARD, l, 0, RESDIAG_BRANCH_OUT, NULL, t[1 - l] };
        o[l][2] = (obs){ RESDIAG_BACKWARD, l, 0, RESDIAG_STREAM_IN, "mlp.w2", t[l] };
    }
    resdiag *ref = open_run(tmp("ref.h5"), 2), *r = open_run(tmp("team.h5"), 1);
    for (int step = 0; step < 4; step++) {
        ck_assert_int_eq(resdiag_step_begin(ref, step), RESDIAG_OK);
        for (int l = 0; l < 2; l++)
            for (int k = 0; k < 3; k++)
                ck_assert_int_eq(observe_whole(ref, &o[l][k]), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(ref), RESDIAG_OK);

        ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 4);
        site_job j[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            j[i] = (site_job){ r, { o[i / 2][0], o[i / 2][1], o[i / 2][2] }, i % 2, 2, &go, 0 };
            ck_assert_int_eq(pthread_create(&th[i], NULL, site_job_main, &j[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            ck_assert_int_eq(j[i].failed, 0);
        }
        pthread_barrier_destroy(&go);
        ck_assert_msg(resdiag_step_end(r) == RESDIAG_OK, "%s", resdiag_errmsg(r));
    }
    ck_assert_int_eq(resdiag_close(ref), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(ref);
    resdiag_destroy(r);
    same_files(tmp("ref.h5"), tmp("team.h5"), 0, 1);
    free(x[0]);
    free(x[1]);
}
END_TEST

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/resdiag-test-team-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    static const char *const names[] = { "ref.h5", "team.h5", "one.h5", "idle.h5" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        unlink(tmp(names[i]));
    rmdir(tmpdir);
}

/* step_end's warning */
static void log_info(void)
{
    resdiag_set_log_priority(RESDIAG_LOG_INFO);
}

static const check_program program = {
    .name = "team",
    .prepare = log_info,
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("team", 120, setup, teardown),
               CHECK_TEST(team_gives_the_bits_of_hook_threads),
               CHECK_TEST(parts_in_every_order_give_the_same_bits),
               CHECK_TEST(one_part_null_handle_and_outside_a_step),
               CHECK_LOOP(client_bugs_are_refused_and_the_team_still_completes, 0, N_BUGS * N_TEAM_SIZES),
               CHECK_LOOP(incomplete_team_at_step_end, 0, N_TEAM_SIZES),
               CHECK_LOOP(set_enabled_close_and_destroy_with_an_open_team, 0, N_TEAM_SIZES),
               CHECK_LOOP(teams_of_different_sites_at_once, 0, N_TEAM_SIZES))
