/*
 * test-bad-numbers.c - bad numbers in, honest numbers out: tensors holding
 * NaN, +-Inf, huge values (near FLT_MAX in f32 and bf16, 1e300..1e303 in
 * f64, 65504 in f16), denormals, and all of them mixed, in f32, f64, f16
 * and bf16, go through the public API (hook -> run file -> reader) on every
 * kernel path this CPU has, and every statistic read back matches a long
 * double reference computed here from the definitions in resdiag.h, or is
 * one of the flagged quantities (NaN and Inf counts, exact). Nothing is
 * allowed to come back as Inf, NaN or 0 where the reference is a number.
 *
 *   test-bad-numbers [--expect-portable | --expect-no-avx512]
 *
 * With --expect-portable (meson runs it so with RESDIAG_FORCE_PORTABLE=1)
 * the path chosen from the environment must be the portable one, with
 * --expect-no-avx512 (RESDIAG_DISABLE_AVX512=1) the best the CPU has but
 * AVX-512, and only that path is tested; otherwise every available path
 * is, via rd_stats_set_path. Each tensor is observed with hook_threads 1,
 * and the large one also with hook_threads 2, 3, 4 and
 * RESDIAG_MAX_HOOK_THREADS (split over that many threads; f16 and bf16 at
 * 768 columns).
 *
 * Tolerance: rd_test_field_tol (tests/helpers/path-bounds.h): 1e-12
 * relative on the portable path and for f64 input (sums in double), and
 * 6 G + 1e-12 (G = 24 * 2^-24) for f32, f16 and bf16 input on
 * the vector paths, which sum a row in float lanes (the bound lib/stats/stats.h
 * documents and tests/unit/test-stats.c derives); each against a scale per
 * field (the field itself
 * for norms; the largest |value| for token means; the mean over tokens for
 * standard deviations over tokens; the token RMS for the per-token std,
 * whose cancellation double cannot avoid). Exact: rows, cols, counts,
 * ABSMAX, ABSMAX_COL. The largest error seen is printed.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"
#include "stats/stats.h"
#include "stats/stats_impl.h"

/* Widths: 601, past one 512-column chunk and not a multiple of any lane
 * count (the one-row kernels and their scalar tails); 768, the AVX-512
 * path's 16-row kernel (and its bf16 dot kernel) */
static const int64_t widths[] = { 601, 768 };
static int64_t COLS = 601; /* the width of this run */
#define ROWS 6
#define BIG_ROWS 700 /* 700 x 601 f64 > 1 MiB: hook_threads >= 2 splits it */

static int expect_portable, expect_no_avx512;
static char g_dir[256];
static double g_worst;   /* largest error / (tolerance * scale) seen */
static char g_worst_what[256];

static void quiet_log(resdiag_log_priority p, const char *msg, void *u)
{
    (void)u;
    if (p >= RESDIAG_LOG_ERROR)
        fprintf(stderr, "resdiag: %s\n", msg);
}

/* ------------------------------------------------------------ test data */

static uint64_t g_rng;

static uint64_t next(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static double unif(void) { return (double)(next() >> 11) * 0x1p-53; }

/* What an element is made of. */
enum kind { K_NORMAL, K_HUGE, K_DENORMAL, K_NAN, K_INF, K_ZERO, K_OFFSET };

/* The cases: per element, a kind drawn from the case's mix. */
enum { C_NORMAL, C_NAN, C_INF, C_HUGE, C_DENORMAL, C_MIXED, C_ROW_NAN, C_ROW_INF, C_ZERO,
       C_OFFSET, C_ALL_NONFINITE, N_CASES };
static const char *const case_names[N_CASES] = {
    "normal", "some NaN", "some Inf", "huge", "denormal", "mixed", "a NaN row", "an Inf row",
    "zeros", "large mean, tiny spread", "nothing finite" };

static enum kind pick_kind(int c, int64_t row)
{
    double u = unif();
    switch (c) {
    case C_NORMAL: return K_NORMAL;
    case C_NAN: return u < 0.05 ? K_NAN : K_NORMAL;
    case C_INF: return u < 0.05 ? K_INF : K_NORMAL;
    case C_HUGE: return u < 0.5 ? K_HUGE : K_NORMAL;
    case C_DENORMAL: return K_DENORMAL;
    case C_MIXED:
        return u < 0.1 ? K_NAN : u < 0.2 ? K_INF : u < 0.45 ? K_HUGE : u < 0.7 ? K_DENORMAL
             : u < 0.8 ? K_ZERO : K_NORMAL;
    case C_ROW_NAN: return row == 2 ? K_NAN : K_NORMAL;
    case C_ROW_INF: return row == 4 ? K_INF : K_HUGE;
    case C_ZERO: return K_ZERO;
    case C_OFFSET: return K_OFFSET;
    case C_ALL_NONFINITE: return u < 0.5 ? K_NAN : K_INF;
    }
    return K_NORMAL;
}

static double sign(void) { return (next() >> 63) ? -1.0 : 1.0; }

/* One element of dtype dt and kind k, stored at out[j]; returns nothing:
 * the reference decodes the stored bits itself. */
static void make_elem(void *out, int64_t j, resdiag_dtype dt, enum kind k)
{
    double g = sign() * (0.25 + 2.0 * unif()); /* a normal-sized value */
    uint32_t man = (uint32_t)(next() >> 32);
    switch (dt) {
    case RESDIAG_DTYPE_F32: {
        float v;
        switch (k) {
        case K_NORMAL: v = (float)g; break;
        case K_HUGE: v = (float)(sign() * FLT_MAX * (0.05 + 0.95 * unif())); break;
        case K_DENORMAL: v = (float)sign() * ldexpf((float)(1 + man % 0x7fffff), -149); break;
        case K_NAN: v = NAN; break;
        case K_INF: v = (float)sign() * INFINITY; break;
        case K_ZERO: v = 0.0f; break;
        default: v = (float)(1000.0 + g * 1e-3); break;
        }
        ((float *)out)[j] = v;
        break;
    }
    case RESDIAG_DTYPE_F64: {
        double v;
        switch (k) {
        case K_NORMAL: v = g; break;
        case K_HUGE: v = sign() * 1e300 * pow(10.0, 3.0 * unif()); break;
        case K_DENORMAL: v = sign() * ldexp((double)(1 + (next() >> 13)), -1074); break;
        case K_NAN: v = NAN; break;
        case K_INF: v = sign() * INFINITY; break;
        case K_ZERO: v = 0.0; break;
        default: v = 1e8 + g * 1e-6; break;
        }
        ((double *)out)[j] = v;
        break;
    }
    case RESDIAG_DTYPE_F16: {
        /* bits: sign | exponent (5) | mantissa (10) */
        uint16_t s = (uint16_t)((next() >> 63) << 15), m = (uint16_t)(man & 0x3ff), v;
        switch (k) {
        case K_NORMAL: v = (uint16_t)(s | ((13 + man % 4) << 10) | m); break;
        case K_HUGE: v = (uint16_t)(s | (30u << 10) | m); break; /* up to 65504 */
        case K_DENORMAL: v = (uint16_t)(s | (m ? m : 1)); break;
        case K_NAN: v = (uint16_t)(0x7c00 | 0x200 | m); break;
        case K_INF: v = (uint16_t)(s | 0x7c00); break;
        case K_ZERO: v = 0; break;
        default: v = (uint16_t)((25u << 10) | (man & 0x7)); break; /* 1024 + a little */
        }
        ((uint16_t *)out)[j] = v;
        break;
    }
    case RESDIAG_DTYPE_BF16: {
        /* bits: sign | exponent (8) | mantissa (7) */
        uint16_t s = (uint16_t)((next() >> 63) << 15), m = (uint16_t)(man & 0x7f), v;
        switch (k) {
        case K_NORMAL: v = (uint16_t)(s | ((125 + man % 4) << 7) | m); break;
        case K_HUGE: v = (uint16_t)(s | (254u << 7) | m); break; /* ~1e38 */
        case K_DENORMAL: v = (uint16_t)(s | (m ? m : 1)); break;
        case K_NAN: v = (uint16_t)(0x7fc0 | (man & 0x3f)); break;
        case K_INF: v = (uint16_t)(s | 0x7f80); break;
        case K_ZERO: v = 0; break;
        default: v = (uint16_t)((136u << 7) | (man & 0x3)); break; /* 512 + a little */
        }
        ((uint16_t *)out)[j] = v;
        break;
    }
    }
}

static size_t dsize(resdiag_dtype dt)
{
    return dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
}

/* --------------------------------------------------- the long double side */

/* The test's own decoding of the stored bits (not the library's). */
static long double decode(const void *x, int64_t j, resdiag_dtype dt)
{
    switch (dt) {
    case RESDIAG_DTYPE_F32: return ((const float *)x)[j];
    case RESDIAG_DTYPE_F64: return ((const double *)x)[j];
    case RESDIAG_DTYPE_F16: {
        uint16_t h = ((const uint16_t *)x)[j];
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        long double s = (h & 0x8000) ? -1.0L : 1.0L;
        if (e == 31)
            return m ? (long double)NAN : s * (long double)INFINITY;
        return e ? s * ldexpl(1024 + m, e - 25) : s * ldexpl(m, -24);
    }
    case RESDIAG_DTYPE_BF16: {
        uint16_t b = ((const uint16_t *)x)[j];
        int e = (b >> 7) & 0xff, m = b & 0x7f;
        long double s = (b & 0x8000) ? -1.0L : 1.0L;
        if (e == 255)
            return m ? (long double)NAN : s * (long double)INFINITY;
        return e ? s * ldexpl(128 + m, e - 134) : s * ldexpl(m, -133);
    }
    }
    return 0;
}

/* Mean and population std of v (n), two passes. */
static void mean_std(const long double *v, int64_t n, long double *mean, long double *std)
{
    long double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int64_t i = 0; i < n; i++)
        q += (v[i] - *mean) * (v[i] - *mean);
    *std = sqrtl(q / n);
}

/* The fields of resdiag.h from their definitions: non-finite values count
 * and are otherwise 0, per-token divisors stay cols. ref (RESDIAG_N_FIELDS);
 * scale (RESDIAG_N_FIELDS) the magnitude each is compared against. */
static void reference(const void *x, resdiag_dtype dt, int64_t rows, int64_t cols,
                      long double *ref, long double *scale)
{
    long double *norm = calloc((size_t)rows, sizeof *norm);
    long double *mean = calloc((size_t)rows, sizeof *mean);
    long double *rms = calloc((size_t)rows, sizeof *rms);
    long double *sd = calloc((size_t)rows, sizeof *sd);
    ck_assert(norm && mean && rms && sd);
    long double frob2 = 0, amax = -1, amax_col = NAN;
    long nan = 0, inf = 0;
    for (int64_t i = 0; i < rows; i++) {
        const char *row = (const char *)x + (size_t)(i * cols) * dsize(dt);
        long double s = 0, q = 0, d = 0;
        for (int64_t j = 0; j < cols; j++) {
            long double v = decode(row, j, dt);
            if (isnan(v)) {
                nan++;
                continue;
            }
            if (isinf(v)) {
                inf++;
                continue;
            }
            s += v;
            q += v * v;
            if (fabsl(v) > amax) {
                amax = fabsl(v);
                amax_col = j;
            }
        }
        mean[i] = s / cols;
        for (int64_t j = 0; j < cols; j++) {
            long double v = decode(row, j, dt);
            if (!isfinite(v))
                v = 0;
            d += (v - mean[i]) * (v - mean[i]);
        }
        norm[i] = sqrtl(q);
        rms[i] = norm[i] / sqrtl(cols);
        sd[i] = sqrtl(d / cols);
        frob2 += q;
    }
    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
        ref[f] = scale[f] = 0;
    ref[RESDIAG_FIELD_ROWS] = rows;
    ref[RESDIAG_FIELD_COLS] = cols;
    ref[RESDIAG_FIELD_FROB] = sqrtl(frob2);
    mean_std(norm, rows, &ref[RESDIAG_FIELD_TOK_NORM_MEAN], &ref[RESDIAG_FIELD_TOK_NORM_STD]);
    mean_std(mean, rows, &ref[RESDIAG_FIELD_TOK_MEAN_MEAN], &ref[RESDIAG_FIELD_TOK_MEAN_STD]);
    mean_std(rms, rows, &ref[RESDIAG_FIELD_TOK_RMS_MEAN], &ref[RESDIAG_FIELD_TOK_RMS_STD]);
    mean_std(sd, rows, &ref[RESDIAG_FIELD_TOK_STD_MEAN], &ref[RESDIAG_FIELD_TOK_STD_STD]);
    long double nmin = INFINITY, nmax = 0, rmax = 0;
    for (int64_t i = 0; i < rows; i++) {
        nmin = norm[i] < nmin ? norm[i] : nmin;
        nmax = norm[i] > nmax ? norm[i] : nmax;
        rmax = rms[i] > rmax ? rms[i] : rmax;
    }
    ref[RESDIAG_FIELD_TOK_NORM_MIN] = nmin;
    ref[RESDIAG_FIELD_TOK_NORM_MAX] = nmax;
    ref[RESDIAG_FIELD_ABSMAX] = amax < 0 ? 0 : amax;
    ref[RESDIAG_FIELD_ABSMAX_COL] = amax_col;
    ref[RESDIAG_FIELD_NAN_COUNT] = nan;
    ref[RESDIAG_FIELD_INF_COUNT] = inf;

    long double am = ref[RESDIAG_FIELD_ABSMAX];
    for (int f = RESDIAG_FIELD_FROB; f <= RESDIAG_FIELD_TOK_STD_STD; f++)
        scale[f] = fabsl(ref[f]);
    /* sums that cancel are only as good as the largest term */
    scale[RESDIAG_FIELD_TOK_MEAN_MEAN] = am;
    scale[RESDIAG_FIELD_TOK_MEAN_STD] = am;
    scale[RESDIAG_FIELD_TOK_NORM_STD] = fmaxl(scale[RESDIAG_FIELD_TOK_NORM_STD],
                                              ref[RESDIAG_FIELD_TOK_NORM_MEAN]);
    scale[RESDIAG_FIELD_TOK_RMS_STD] = fmaxl(scale[RESDIAG_FIELD_TOK_RMS_STD],
                                             ref[RESDIAG_FIELD_TOK_RMS_MEAN]);
    scale[RESDIAG_FIELD_TOK_STD_MEAN] = fmaxl(scale[RESDIAG_FIELD_TOK_STD_MEAN], rmax);
    scale[RESDIAG_FIELD_TOK_STD_STD] = fmaxl(scale[RESDIAG_FIELD_TOK_STD_STD], rmax);
    free(norm);
    free(mean);
    free(rms);
    free(sd);
}

/* ------------------------------------------------------------- the test */

/* 1 and the splits of the large tensor into 2, 3, 4 and the most parts */
static const int hook_threads[] = { 1, 2, 3, 4, RESDIAG_MAX_HOOK_THREADS };

static const resdiag_dtype dtypes[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_F64,
                                        RESDIAG_DTYPE_F16, RESDIAG_DTYPE_BF16 };

/* One run: layer c observes case c at STREAM_IN (ROWS x COLS) and, at
 * layer N_CASES, a BIG_ROWS tensor of the mixed case; then each is read
 * back and compared. */
static void run_one(rd_stats_path path, resdiag_dtype dt, int hook_threads)
{
    static const char *const sub[] = { "block" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = N_CASES + 1, .cols = COLS,
        .sublayers = 1, .sublayer_names = sub });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.log_fn = quiet_log;
    o.hook_threads = hook_threads;
    char path_h5[400];
    snprintf(path_h5, sizeof path_h5, "%s/bad-%d-%d-%d.h5", g_dir, (int)path, (int)dt,
             hook_threads);
    resdiag *r = fixture_open(path_h5, &m, &o);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);

    void *data[N_CASES + 1];
    int64_t rows[N_CASES + 1];
    g_rng = 0x1234567ull + 7919ull * (uint64_t)dt;
    for (int c = 0; c <= N_CASES; c++) {
        int cs = c < N_CASES ? c : C_MIXED;
        rows[c] = c < N_CASES ? ROWS : BIG_ROWS;
        data[c] = malloc((size_t)(rows[c] * COLS) * dsize(dt));
        ck_assert_ptr_nonnull(data[c]);
        for (int64_t i = 0; i < rows[c]; i++)
            for (int64_t j = 0; j < COLS; j++)
                make_elem(data[c], i * COLS + j, dt, pick_kind(cs, i));
        resdiag_tensor t = resdiag_tensor_make(data[c], dt, rows[c], COLS, 0);
        ck_assert_int_eq(RESDIAG_FWD(r, c, 0, RESDIAG_STREAM_IN, t), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path_h5), RESDIAG_OK);
    for (int c = 0; c <= N_CASES; c++) {
        double got[RESDIAG_N_FIELDS];
        long double ref[RESDIAG_N_FIELDS], scale[RESDIAG_N_FIELDS];
        int observed = 0;
        ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, c, 0, RESDIAG_STREAM_IN,
                                             got, &observed), RESDIAG_OK);
        ck_assert_int_eq(observed, 1);
        reference(data[c], dt, rows[c], COLS, ref, scale);
        char what[200];
        snprintf(what, sizeof what, "path %s%s, %s, %lld columns, %s%s, hook_threads %d",
                 rd_stats_path_name(path),
                 path == RD_STATS_AVX512 && rd_stats_bf16_dot() ? " (bf16 dot)" : "",
                 resdiag_dtype_name(dt), (long long)COLS,
                 c < N_CASES ? case_names[c] : "mixed", c < N_CASES ? "" : " (large)",
                 hook_threads);
        for (int f = 0; f < RESDIAG_N_FIELDS; f++) {
            if (f == RESDIAG_FIELD_CALL_SEQ)
                continue;
            long double want = ref[f];
            if (f <= RESDIAG_FIELD_COLS || f >= RESDIAG_FIELD_ABSMAX) {
                /* exact: shape, the largest value, its column, the counts */
                int ok = isnan(want) ? isnan(got[f]) : (long double)got[f] == want;
                ck_assert_msg(ok, "%s: %s = %.17g, want %.17Lg", what,
                              resdiag_field_name((resdiag_field)f), got[f], want);
                continue;
            }
            long double err = fabsl((long double)got[f] - want);
            long double bound = rd_test_field_tol(path, dt) * scale[f];
            ck_assert_msg(isfinite(got[f]) && err <= bound,
                          "%s: %s = %.17g, reference %.20Lg (error %.3Lg, allowed %.3Lg)",
                          what, resdiag_field_name((resdiag_field)f), got[f], want, err,
                          bound);
            double rel = bound > 0 ? (double)(err / bound) : 0;
            if (rel > g_worst) {
                g_worst = rel;
                snprintf(g_worst_what, sizeof g_worst_what, "%s: %s", what,
                         resdiag_field_name((resdiag_field)f));
            }
        }
        free(data[c]);
    }
    resdiag_reader_destroy(rd);
    unlink(path_h5);
}

START_TEST(every_dtype_and_case_matches_the_long_double_reference)
{
    int n_paths = 0;
    for (int p = 0; p < RD_STATS_N_PATHS; p++) {
        rd_stats_path path = (rd_stats_path)p;
        if (expect_portable || expect_no_avx512) {
            /* the environment chose, not the test */
            rd_stats_path want = RD_STATS_PORTABLE;
            for (int q = 1; q < RD_STATS_N_PATHS && expect_no_avx512; q++)
                if (q != RD_STATS_AVX512 && rd_stats_path_available((rd_stats_path)q))
                    want = (rd_stats_path)q;
            if (path != want)
                continue;
            ck_assert_int_eq(rd_stats_active_path(), want);
        } else if (rd_stats_set_path(path) != 0) {
            continue;
        }
        n_paths++;
        /* the AVX-512 path with and without its bf16 dot kernel (where
         * the CPU has one) */
        int dots = path == RD_STATS_AVX512 && rd_stats_bf16_dot() ? 2 : 1;
        for (int dot = 0; dot < dots; dot++) {
            if (path == RD_STATS_AVX512)
                rd_stats_set_bf16_dot(dots == 2 && dot == 0);
            for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
                COLS = widths[w];
                for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
                    for (size_t th = 0; th < sizeof hook_threads / sizeof *hook_threads; th++)
                        run_one(path, dtypes[d], hook_threads[th]);
            }
        }
        if (path == RD_STATS_AVX512)
            rd_stats_set_bf16_dot(1);
    }
    ck_assert_int_ge(n_paths, 1);
    fprintf(stderr, "bad numbers: %d kernel path(s) x 4 dtypes x 2 widths x %d cases x hook_threads 1, "
            "2, 3, 4, %d: all match; largest error %.3g of the tolerance (%s)\n", n_paths,
            N_CASES + 1, RESDIAG_MAX_HOOK_THREADS, g_worst, g_worst_what);
}
END_TEST

/* --expect-portable, --expect-no-avx512: the kernel path the variant's
 * environment must pick. */
static int take_expectation(int argc, char **argv)
{
    expect_portable = argc > 1 && strcmp(argv[1], "--expect-portable") == 0;
    expect_no_avx512 = argc > 1 && strcmp(argv[1], "--expect-no-avx512") == 0;
    return CHECK_GO_ON;
}

static const check_program program = {
    .name = "bad-numbers",
    .timeout = 120,
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .start = take_expectation,
};
CHECK_MAIN(&program, CHECK_TEST(every_dtype_and_case_matches_the_long_double_reference))
