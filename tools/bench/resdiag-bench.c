/*
 * resdiag-bench - how fast resdiag reads tensors and writes steps, against
 * the machine's own ceiling and the peers installed on it.
 *
 * Not a test: it times things and prints the figures, ending with one line
 * performance target, "target NAME: measured X, goal Y, met|missed".
 * doc/BENCHMARK.md says what each figure means.
 *
 *   resdiag-bench [--quick] [--reps N] [--no-peers] [--no-writer] [--no-e2e]
 *                 [--no-report] [--cols N] [--e2e-steps N]
 *
 * Dimension names: rows = tokens, cols = width (768 here, GPT-2 small;
 * --cols N reads the same bytes as rows of N, which shows the per-row cost).
 *
 * Kernels: in one run, on the same buffers, for 24 MiB and 256 MiB of input,
 * 1 and 2 threads (2 threads = two tensors of that size, one per thread, at
 * the same time), each dtype: the ceiling (a plain AVX2 sum of squares of
 * the buffer's bytes read as f32, and a read-only sum), every resdiag kernel
 * path (all statistics, the sketch with K = 16 and the per-token norms, as a
 * hook computes them), the same on one tensor split over two threads
 * (rd_stats_compute_split, in the 1-thread rows), OpenBLAS snrm2 / sdot per row (f32) when built with
 * it. Repetitions of all methods are interleaved (rep 1 of each, rep 2 of
 * each, ...) so that the machine's drift hits them alike; the figures are
 * medians with [min-max], in GB/s of input (1e9 bytes/s). numpy and torch
 * run in scripts/bench-peers.py, on buffers of the same shape.
 */
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "resdiag.h"
#include "stats/stats.h"

#ifdef RD_BENCH_OPENBLAS
#include <cblas.h>
#endif

#ifndef RD_BENCH_SOURCE_ROOT
#define RD_BENCH_SOURCE_ROOT "."
#endif
#ifndef RD_BENCH_BUILD_ROOT
#define RD_BENCH_BUILD_ROOT "."
#endif

/* width of the kernel tensors: 768 (GPT-2 small) unless --cols says otherwise */
static int bench_cols = 768;
#define MIB (1024.0 * 1024.0)
#define MAX_REPS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct summary {
    double med, min, max;
} summary;

static summary summarize(const double *v, int n)
{
    double s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    summary r = { n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]), s[0], s[n - 1] };
    return r;
}

static volatile double sink; /* keeps results alive */

/* ------------------------------------------------------------------------ */
/* The ceiling: the plainest vector loops over the same bytes               */
/* ------------------------------------------------------------------------ */

__attribute__((target("avx2,fma"))) static double ceil_sumsq(const void *buf, size_t bytes)
{
    const float *x = buf;
    size_t n = bytes / 4, i = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_load_ps(x + i), v1 = _mm256_load_ps(x + i + 8);
        __m256 v2 = _mm256_load_ps(x + i + 16), v3 = _mm256_load_ps(x + i + 24);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
        a2 = _mm256_fmadd_ps(v2, v2, a2);
        a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float t[8];
    _mm256_storeu_ps(t, a);
    double s = 0.0;
    for (int l = 0; l < 8; l++)
        s += t[l];
    return s;
}

__attribute__((target("avx2"))) static double ceil_sum(const void *buf, size_t bytes)
{
    const float *x = buf;
    size_t n = bytes / 4, i = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
    }
    __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float t[8];
    _mm256_storeu_ps(t, a);
    double s = 0.0;
    for (int l = 0; l < 8; l++)
        s += t[l];
    return s;
}

/* ------------------------------------------------------------------------ */
/* Methods                                                                   */
/* ------------------------------------------------------------------------ */

/* M_SPLIT: the active path on one tensor split over 2 threads (1-thread rows) */
enum { M_SUMSQ, M_SUM, M_PATH0, M_SPLIT = M_PATH0 + RD_STATS_N_PATHS, M_SNRM2, M_SDOT,
       N_METHODS };

static const char *method_name(int m)
{
    static char buf[RD_STATS_N_PATHS][32];
    switch (m) {
    case M_SUMSQ: return "ceiling sumsq (AVX2)";
    case M_SUM: return "ceiling read-only sum";
    case M_SNRM2: return "OpenBLAS snrm2 per row";
    case M_SDOT: return "OpenBLAS sdot per row";
    case M_SPLIT: return "resdiag split x2 threads";
    default:
        snprintf(buf[m - M_PATH0], sizeof buf[0], "resdiag %s",
                 rd_stats_path_name((rd_stats_path)(m - M_PATH0)));
        return buf[m - M_PATH0];
    }
}

typedef struct job {
    int method;
    const void *buf;       /* (rows, bench_cols) of dtype */
    size_t bytes;
    resdiag_dtype dtype;
    int64_t rows;
    double *row_norms;     /* (rows) */
    const rd_sketch_params *sp;
    double result;
} job;

static void run_job(job *j)
{
    switch (j->method) {
    case M_SUMSQ: j->result = ceil_sumsq(j->buf, j->bytes); return;
    case M_SUM: j->result = ceil_sum(j->buf, j->bytes); return;
    case M_SPLIT: {
        double f[RESDIAG_N_FIELDS], sk[16];
        resdiag_tensor t = resdiag_tensor_make(j->buf, j->dtype, j->rows, bench_cols, 0);
        rd_stats_compute_split(2, f, sk, j->row_norms, &t, j->sp);
        j->result = f[RESDIAG_FIELD_FROB];
        return;
    }
#ifdef RD_BENCH_OPENBLAS
    case M_SNRM2: {
        double s = 0.0;
        for (int64_t i = 0; i < j->rows; i++)
            s += cblas_snrm2(bench_cols, (const float *)j->buf + i * bench_cols, 1);
        j->result = s;
        return;
    }
    case M_SDOT: {
        double s = 0.0;
        for (int64_t i = 0; i < j->rows; i++) {
            const float *x = (const float *)j->buf + i * bench_cols;
            s += sqrt(cblas_sdot(bench_cols, x, 1, x, 1));
        }
        j->result = s;
        return;
    }
#endif
    default: {
        double f[RESDIAG_N_FIELDS], sk[16];
        resdiag_tensor t = resdiag_tensor_make(j->buf, j->dtype, j->rows, bench_cols, 0);
        rd_stats_compute_path((rd_stats_path)(j->method - M_PATH0), f, sk, j->row_norms, &t,
                              j->sp);
        j->result = f[RESDIAG_FIELD_FROB];
    }
    }
}

static void *job_thread(void *arg)
{
    run_job(arg);
    return NULL;
}

/* Seconds for nt jobs at once (one per thread). */
static double time_jobs(job *jobs, int nt)
{
    pthread_t th[2];
    double t0 = now();
    if (nt == 1) {
        run_job(&jobs[0]);
    } else {
        for (int k = 1; k < nt; k++)
            if (pthread_create(&th[k], NULL, job_thread, &jobs[k]) != 0)
                run_job(&jobs[k]), th[k] = 0;
        run_job(&jobs[0]);
        for (int k = 1; k < nt; k++)
            if (th[k])
                pthread_join(th[k], NULL);
    }
    double dt = now() - t0;
    for (int k = 0; k < nt; k++)
        sink += jobs[k].result;
    return dt;
}

/* ------------------------------------------------------------------------ */
/* Test data                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static double rnd_normal(void)
{
    /* sum of 4 uniforms, rescaled: close enough to N(0,1) for timing */
    double s = 0.0;
    for (int k = 0; k < 4; k++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        s += (double)(rng >> 11) * 0x1p-53;
    }
    return (s - 2.0) * 1.7320508;
}

static uint16_t to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

__attribute__((target("f16c"))) static uint16_t to_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, 0);
}

static size_t dt_size(resdiag_dtype dt)
{
    return dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
}

/* Fills bytes of buf with rows of dt; each row has its own scale, like a
 * residual stream. */
static void fill(void *buf, size_t bytes, resdiag_dtype dt)
{
    size_t n = bytes / dt_size(dt);
    double scale = 1.0;
    for (size_t k = 0; k < n; k++) {
        if (k % bench_cols == 0)
            scale = 0.5 + fabs(rnd_normal());
        double v = scale * rnd_normal();
        switch (dt) {
        case RESDIAG_DTYPE_F32: ((float *)buf)[k] = (float)v; break;
        case RESDIAG_DTYPE_F64: ((double *)buf)[k] = v; break;
        case RESDIAG_DTYPE_F16: ((uint16_t *)buf)[k] = to_f16((float)v); break;
        case RESDIAG_DTYPE_BF16: ((uint16_t *)buf)[k] = to_bf16((float)v); break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Results kept for the targets                                              */
/* ------------------------------------------------------------------------ */

typedef struct kresult {
    int valid;
    summary s;
} kresult;

/* [size index][threads-1][dtype][method] */
static kresult kres[2][2][4][N_METHODS];
static const int sizes_mib[2] = { 24, 256 };

typedef struct peer {
    char name[16], dtype[8];
    int mib, threads;
    summary s;
} peer;
static peer peers[64];
static int n_peers;
static char peers_note[256] = "not run";

static const peer *find_peer(const char *name, const char *dtype, int mib, int threads)
{
    for (int k = 0; k < n_peers; k++)
        if (!strcmp(peers[k].name, name) && !strcmp(peers[k].dtype, dtype) &&
            peers[k].mib == mib && peers[k].threads == threads)
            return &peers[k];
    return NULL;
}

static const char *dtype_label(resdiag_dtype dt)
{
    return resdiag_dtype_name(dt);
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

static int method_available(int m, resdiag_dtype dt, int have_avx2)
{
    if (m == M_SUMSQ || m == M_SUM)
        return have_avx2;
    if (m == M_SPLIT)
        return 1;
    if (m == M_SNRM2 || m == M_SDOT) {
#ifdef RD_BENCH_OPENBLAS
        return dt == RESDIAG_DTYPE_F32;
#else
        (void)dt;
        return 0;
#endif
    }
    return rd_stats_path_available((rd_stats_path)(m - M_PATH0));
}

static void bench_kernels(int reps_small, int reps_large, int quick)
{
    __builtin_cpu_init();
    int have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
    size_t max_bytes = (size_t)(quick ? 24 : 256) * (size_t)MIB;
    void *buf[2];
    for (int k = 0; k < 2; k++) {
        buf[k] = aligned_alloc(4096, max_bytes);
        if (!buf[k]) {
            printf("kernels: cannot allocate 2 x %zu MiB, skipped\n", max_bytes >> 20);
            return;
        }
    }
    size_t max_rows = max_bytes / (2 * bench_cols);
    double *norms[2] = { malloc(max_rows * sizeof(double)), malloc(max_rows * sizeof(double)) };
    float *tau = malloc((size_t)(bench_cols + 1) * sizeof *tau); /* (bench_cols + 1) */
    if (!norms[0] || !norms[1] || !tau) {
        printf("kernels: out of memory, skipped\n");
        for (int k = 0; k < 2; k++)
            free(buf[k]), free(norms[k]);
        free(tau);
        return;
    }
    rd_fill_column_signs(tau, (size_t)bench_cols + 1, 0x5eed);
    rd_sketch_params sp = { 16, tau, bench_cols + 1, 0x5eed, 0 };

    printf("\n== kernels: GB/s of input (1e9 B/s), median [min-max] of %d (24 MiB) / %d "
           "(256 MiB) interleaved runs; ratio = median / median of the AVX2 sumsq ceiling "
           "of the same row ==\n", reps_small, reps_large);
    printf("cols = %d; resdiag = every statistic + sketch K=16 + per-token norms, one "
           "call per tensor\n", bench_cols);
    printf("%-6s %-3s %-5s %-26s %8s %17s %6s\n", "size", "thr", "dtype", "method", "GB/s",
           "[min-max]", "ratio");

    static const resdiag_dtype dts[4] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_BF16,
                                          RESDIAG_DTYPE_F16, RESDIAG_DTYPE_F64 };
    for (int d = 0; d < 4; d++) {
        resdiag_dtype dt = dts[d];
        for (int k = 0; k < 2; k++)
            fill(buf[k], max_bytes, dt);
        for (int si = 0; si < 2; si++) {
            if (quick && si == 1)
                continue;
            size_t bytes = (size_t)sizes_mib[si] * (size_t)MIB;
            int64_t rows = (int64_t)(bytes / (dt_size(dt) * bench_cols));
            int reps = si == 0 ? reps_small : reps_large;
            for (int nt = 1; nt <= 2; nt++) {
                double secs[N_METHODS][MAX_REPS];
                job jobs[2];
                for (int rep = -1; rep < reps; rep++) /* rep -1: warm-up */
                    for (int m = 0; m < N_METHODS; m++) {
                        if (!method_available(m, dt, have_avx2) || (m == M_SPLIT && nt != 1))
                            continue;
                        for (int k = 0; k < nt; k++)
                            jobs[k] = (job){ m, buf[k], bytes, dt, rows, norms[k], &sp, 0.0 };
                        double s = time_jobs(jobs, nt);
                        if (rep >= 0)
                            secs[m][rep] = s;
                    }
                double ceil_med = 0.0;
                for (int m = 0; m < N_METHODS; m++) {
                    if (!method_available(m, dt, have_avx2) || (m == M_SPLIT && nt != 1))
                        continue;
                    double gbs[MAX_REPS];
                    for (int r = 0; r < reps; r++)
                        gbs[r] = (double)bytes * nt / secs[m][r] / 1e9;
                    summary s = summarize(gbs, reps);
                    if (m == M_SUMSQ)
                        ceil_med = s.med;
                    kres[si][nt - 1][d][m] = (kresult){ 1, s };
                    char range[32];
                    snprintf(range, sizeof range, "[%.2f-%.2f]", s.min, s.max);
                    printf("%3dMiB %-3d %-5s %-26s %8.2f %17s %6.2f\n", sizes_mib[si], nt,
                           dtype_label(dt), method_name(m), s.med, range,
                           ceil_med > 0 ? s.med / ceil_med : NAN);
                }
                fflush(stdout);
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        free(buf[k]);
        free(norms[k]);
    }
    free(tau);
}

/* ------------------------------------------------------------------------ */
/* numpy and torch, through scripts/bench-peers.py                           */
/* ------------------------------------------------------------------------ */

static void bench_peers(int reps_small, int reps_large, int quick)
{
    static const char *const pythons[] = { "/usr/bin/python3", "python3" };
    char cmd[1024];
    printf("\n== peers: numpy / torch per-row norms (scripts/bench-peers.py), same shapes, "
           "GB/s of input, median [min-max] ==\n");
    for (size_t p = 0; p < sizeof pythons / sizeof pythons[0]; p++) {
        snprintf(cmd, sizeof cmd, "%s %s/scripts/bench-peers.py --cols %d --sizes %s "
                 "--reps %d,%d 2>&1", pythons[p], RD_BENCH_SOURCE_ROOT, bench_cols,
                 quick ? "24" : "24,256", reps_small, reps_large);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        char line[512];
        int got = 0;
        while (fgets(line, sizeof line, f)) {
            peer pr;
            if (sscanf(line, "peer %15s %7s %d %d %lf %lf %lf", pr.name, pr.dtype, &pr.mib,
                       &pr.threads, &pr.s.med, &pr.s.min, &pr.s.max) == 7) {
                if (n_peers < (int)(sizeof peers / sizeof peers[0]))
                    peers[n_peers++] = pr;
                char range[32];
                snprintf(range, sizeof range, "[%.2f-%.2f]", pr.s.min, pr.s.max);
                printf("%3dMiB %-3d %-5s %-26s %8.2f %17s\n", pr.mib, pr.threads, pr.dtype,
                       pr.name, pr.s.med, range);
                got = 1;
            } else {
                printf("  %s", line); /* the script's notes: versions, what is missing */
            }
        }
        int st = pclose(f);
        if (got) {
            snprintf(peers_note, sizeof peers_note, "%s", pythons[p]);
            return;
        }
        if (st == 0)
            break;
    }
    snprintf(peers_note, sizeof peers_note, "no python3 with numpy or torch");
    printf("  (%s)\n", peers_note);
}

/* numpy and torch paired with resdiag: the peers' own run above is a
 * separate process at a separate time, and torch's GB/s moved 2x between
 * runs, so its ratio to resdiag was mostly noise. Here the script runs as
 * a co-process (--serve) and each pair is one turn of resdiag then one
 * turn of the peer (order alternating), each turn a warm-up and 3 timed
 * calls on its own 24 MiB f32 tensor; the figure is the median over the
 * pairs of resdiag's GB/s over the peer's, with the min-max. */
typedef struct paired {
    int valid, n;
    summary ratio, rd, peer; /* ratio per pair; GB/s of each side */
} paired;
static paired pairs_res[2]; /* [0] numpy, [1] torch */
static const char *const pair_names[2] = { "numpy", "torch" };

#define PAIR_CALLS 3

/* Starts the script with --serve; 0 and the two streams, or -1. */
static int start_server(const char *python, FILE **to, FILE **from, pid_t *pid)
{
    int in[2], out[2];
    if (pipe(in) != 0)
        return -1;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    char script[1024], cols[32];
    snprintf(script, sizeof script, "%s/scripts/bench-peers.py", RD_BENCH_SOURCE_ROOT);
    snprintf(cols, sizeof cols, "%d", bench_cols);
    fflush(stdout);
    *pid = fork();
    if (*pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execlp(python, python, script, "--serve", "--cols", cols, "--sizes", "24",
               (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (*pid < 0) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    *to = fdopen(in[1], "w");
    *from = fdopen(out[0], "r");
    if (!*to || !*from) {
        if (*to)
            fclose(*to);
        else
            close(in[1]);
        if (*from)
            fclose(*from);
        else
            close(out[0]);
        waitpid(*pid, NULL, 0); /* its stdin is closed: it exits */
        return -1;
    }
    return 0;
}

static void stop_server(FILE *to, FILE *from, pid_t pid)
{
    fclose(to); /* the script's stdin ends: it exits */
    fclose(from);
    waitpid(pid, NULL, 0);
}

/* One turn of the peer: the median seconds of its PAIR_CALLS calls, or -1. */
static double peer_turn(FILE *to, FILE *from, const char *name)
{
    char line[512];
    fprintf(to, "%s %d\n", name, PAIR_CALLS);
    fflush(to);
    if (!fgets(line, sizeof line, from) || strncmp(line, "secs ", 5) != 0)
        return -1.0;
    double v[PAIR_CALLS];
    char *p = line + 5, *end;
    for (int k = 0; k < PAIR_CALLS; k++, p = end) {
        v[k] = strtod(p, &end);
        if (end == p || !(v[k] > 0))
            return -1.0;
    }
    return summarize(v, PAIR_CALLS).med;
}

static void bench_peer_pairs(int quick)
{
    static const char *const pythons[] = { "/usr/bin/python3", "python3" };
    const int npairs = quick ? 3 : 9;
    const size_t bytes = (size_t)24 * (size_t)MIB;
    const int64_t rows = (int64_t)(bytes / (4 * (size_t)bench_cols));
    int path = RD_STATS_PORTABLE;
    for (int p = RD_STATS_N_PATHS - 1; p > 0; p--)
        if (rd_stats_path_available((rd_stats_path)p)) {
            path = p;
            break;
        }
    printf("\n== peers paired with resdiag %s (f32 24 MiB, 1 thread): %d pairs, each one turn "
           "of resdiag and one of the peer (order alternating), a turn = warm-up + median of "
           "%d calls; ratio = resdiag GB/s / peer GB/s per pair, median [min-max] ==\n",
           rd_stats_path_name((rd_stats_path)path), npairs, PAIR_CALLS);
    void *buf = aligned_alloc(4096, bytes);
    double *norms = malloc((size_t)rows * sizeof *norms);
    float *tau = malloc((size_t)(bench_cols + 1) * sizeof *tau); /* (bench_cols + 1) */
    if (!buf || !norms || !tau) {
        printf("  out of memory, skipped\n");
        free(buf), free(norms), free(tau);
        return;
    }
    fill(buf, bytes, RESDIAG_DTYPE_F32);
    rd_fill_column_signs(tau, (size_t)bench_cols + 1, 0x5eed);
    rd_sketch_params sp = { 16, tau, (size_t)bench_cols + 1, 0x5eed, 0 };
    resdiag_tensor t = resdiag_tensor_make(buf, RESDIAG_DTYPE_F32, rows, bench_cols, 0);

    FILE *to = NULL, *from = NULL;
    pid_t pid = -1;
    char line[512] = "";
    signal(SIGPIPE, SIG_IGN); /* a script that dies makes fprintf fail, not the bench */
    for (size_t p = 0; p < sizeof pythons / sizeof pythons[0]; p++) {
        if (start_server(pythons[p], &to, &from, &pid) != 0)
            continue;
        line[0] = 0;
        while (fgets(line, sizeof line, from) && strncmp(line, "ready", 5) != 0)
            ;
        if (!strncmp(line, "ready", 5))
            break;
        stop_server(to, from, pid);
        to = NULL;
    }
    if (!to) {
        printf("  (no python3 with numpy or torch)\n");
        free(buf), free(norms), free(tau);
        return;
    }
    for (int w = 0; w < 2; w++) {
        if (!strstr(line, pair_names[w]))
            continue;
        double ratio[MAX_REPS], rd_gbs[MAX_REPS], peer_gbs[MAX_REPS];
        int n = 0;
        for (int k = 0; k < npairs; k++) {
            double rd_s = -1.0, peer_s = -1.0;
            for (int side = 0; side < 2; side++) {
                if ((side ^ (k & 1)) == 0) {
                    double f[RESDIAG_N_FIELDS], sk[16], v[PAIR_CALLS];
                    rd_stats_compute_path((rd_stats_path)path, f, sk, norms, &t, &sp);
                    for (int c = 0; c < PAIR_CALLS; c++) {
                        double t0 = now();
                        rd_stats_compute_path((rd_stats_path)path, f, sk, norms, &t, &sp);
                        v[c] = now() - t0;
                        sink += f[RESDIAG_FIELD_FROB];
                    }
                    rd_s = summarize(v, PAIR_CALLS).med;
                } else {
                    peer_s = peer_turn(to, from, pair_names[w]);
                }
            }
            if (rd_s <= 0 || peer_s <= 0)
                break;
            rd_gbs[n] = (double)bytes / rd_s / 1e9;
            peer_gbs[n] = (double)bytes / peer_s / 1e9;
            ratio[n] = rd_gbs[n] / peer_gbs[n];
            n++;
        }
        if (n == 0) {
            printf("  %s: the script stopped answering\n", pair_names[w]);
            continue;
        }
        paired *r = &pairs_res[w];
        *r = (paired){ 1, n, summarize(ratio, n), summarize(rd_gbs, n), summarize(peer_gbs, n) };
        printf("  vs %-6s ratio %.2fx [%.2f-%.2f] over %d pairs; resdiag %.2f GB/s "
               "[%.2f-%.2f], %s %.2f GB/s [%.2f-%.2f]\n", pair_names[w], r->ratio.med,
               r->ratio.min, r->ratio.max, n, r->rd.med, r->rd.min, r->rd.max, pair_names[w],
               r->peer.med, r->peer.min, r->peer.max);
    }
    stop_server(to, from, pid);
    free(buf), free(norms), free(tau);
}

/* ------------------------------------------------------------------------ */
/* The writer: cost per recorded step through the public API                 */
/* ------------------------------------------------------------------------ */

typedef struct wresult {
    double us_step, us_record, us_hooks_per_record, us_step_end;
    int records;
} wresult;

static double wres_worst_batched = 0.0;

/* A model of `layers` blocks with the named sublayers and parameters. */
static resdiag_model bench_model(int layers, int d_model, int n_sub, const char *const *subs,
                                 int n_lp, const char *const *lp, int n_mp,
                                 const char *const *mp)
{
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = layers;
    m.d_model = d_model;
    m.n_sublayers = n_sub;
    m.sublayer_names = subs;
    m.n_layer_params = n_lp;
    m.layer_param_names = lp;
    m.n_model_params = n_mp;
    m.model_param_names = mp;
    return m;
}

static int bench_writer_one(wresult *w, const char *dir, int layers, int flush_steps,
                            int steps)
{
    enum { C = 64, T = 4 }; /* tiny tensors: the writer's cost, not the statistics' */
    static float x[T * C];
    for (int k = 0; k < T * C; k++)
        x[k] = (float)rnd_normal();
    static const char *const subs[] = { "attn", "mlp" };
    static const char *const lp[] = { "attn.wo", "mlp.w2" };
    static const char *const mp[] = { "head.w" };
    resdiag_model m = bench_model(layers, C, 2, subs, 2, lp, 1, mp);
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = flush_steps;
    o.flush_seconds = 0;
    o.overwrite = 1; /* repetitions write the same path in the bench's own directory */
    char path[512];
    snprintf(path, sizeof path, "%s/writer-%d-%d.h5", dir, layers, flush_steps);
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        return -1;
    resdiag_tensor t = resdiag_f32(x, T, C);
    static const resdiag_site msites[4] = { RESDIAG_EMBED_OUT, RESDIAG_FINAL_NORM_IN,
                                            RESDIAG_FINAL_NORM_OUT, RESDIAG_LOGITS };
    double t_hooks = 0.0, t_end = 0.0;
    int records = 0;
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        resdiag_step_begin(r, s);
        double h0 = now();
        records = 0;
        for (int dir = 0; dir < 2; dir++) {
            for (int k = 0; k < 4; k++, records++)
                resdiag_observe_at(r, (resdiag_direction)dir, RESDIAG_MODEL_LEVEL, 0,
                                   msites[k], t, __FILE__, __LINE__);
            for (int l = 0; l < layers; l++)
                for (int sub = 0; sub < 2; sub++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++, records++)
                        resdiag_observe_at(r, (resdiag_direction)dir, l, sub,
                                           (resdiag_site)site, t, __FILE__, __LINE__);
        }
        for (int l = 0; l < layers; l++)
            for (int p = 0; p < 2; p++, records++)
                resdiag_param_grad_at(r, l, lp[p], t, __FILE__, __LINE__);
        resdiag_param_grad_at(r, RESDIAG_MODEL_LEVEL, "head.w", t, __FILE__, __LINE__);
        records++;
        double h1 = now();
        resdiag_step_end(r);
        t_end += now() - h1;
        t_hooks += h1 - h0;
    }
    resdiag_status st = resdiag_close(r);
    double total = now() - t0; /* the final flush included */
    resdiag_destroy(r);
    remove(path);
    if (st != RESDIAG_OK)
        return -1;
    w->records = records;
    w->us_step = 1e6 * total / steps;
    w->us_record = w->us_step / records;
    w->us_hooks_per_record = 1e6 * t_hooks / steps / records;
    w->us_step_end = 1e6 * t_end / steps;
    return 0;
}

static void bench_writer(int quick)
{
    printf("\n== writer: public API, hooks at every site (forward and backward, 2 sublayers, "
           "model sites, 2 parameter gradients per layer + head), tensors of 4 x 64 f32 ==\n");
    char dir[] = "/tmp/resdiag-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("  cannot create a temporary directory: %s\n", strerror(errno));
        return;
    }
    printf("%-7s %-12s %8s %10s %12s %14s %14s\n", "layers", "flush_steps", "records",
           "us/step", "us/record", "hooks us/rec", "step_end us");
    static const int layer_counts[2] = { 12, 96 };
    static const int flushes[2] = { 64, 1 };
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int steps = (layer_counts[a] == 12 ? 1280 : 256) / (quick ? 4 : 1);
            wresult w[5];
            double per[5];
            int n = quick ? 1 : 3, ok = 1;
            for (int k = 0; k < n && ok; k++) {
                ok = bench_writer_one(&w[k], dir, layer_counts[a], flushes[b], steps) == 0;
                per[k] = w[k].us_record;
            }
            if (!ok) {
                printf("%-7d %-12d  failed to write in %s\n", layer_counts[a], flushes[b], dir);
                continue;
            }
            /* the median run by us/record */
            summary s = summarize(per, n);
            int med = 0;
            for (int k = 0; k < n; k++)
                if (per[k] == s.med)
                    med = k;
            printf("%-7d %-12d %8d %10.1f %12.3f %14.3f %14.1f   (us/record over %d runs: "
                   "[%.3f-%.3f])\n",
                   layer_counts[a], flushes[b], w[med].records, w[med].us_step,
                   w[med].us_record, w[med].us_hooks_per_record, w[med].us_step_end, n,
                   s.min, s.max);
            if (flushes[b] == 64 && w[med].us_record > wres_worst_batched)
                wres_worst_batched = w[med].us_record;
        }
    rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* End to end: tinygpt with and without recording                            */
/* ------------------------------------------------------------------------ */

static double e2e_overhead = NAN; /* fraction of tokens/s lost: the step-interleaved figure */
/* The same from the time tinygpt measured inside resdiag: a direct reading
 * that the interleaving cannot bias low (a recorded step that slows the
 * unrecorded one after it would hide that cost from the first figure). */
static double e2e_inside = NAN;
static int e2e_steps = 0;         /* --e2e-steps: 0 = 257 (--quick: 17) */
static char e2e_note[768] = "not measured";

/* Three estimates of what recording every site forward and backward costs
 * tinygpt (doc/BENCHMARK.md, "End to end"):
 *   step-interleaved (the target's): one process, --record-every 2, each
 *     recorded step's CPU time against its unrecorded neighbours';
 *   inside libresdiag: the time tinygpt measured inside its resdiag calls;
 *   paired processes: whole runs with --record off and full, alternating. */

/* One line of tinygpt --step-times. */
typedef struct e2e_step {
    int step, recorded, flushed;
    double cpu;   /* s, the process's CPU time for the whole step */
    double in_rd; /* s, wall time inside resdiag calls */
} e2e_step;

enum { E2E_MAX_STEPS = 1024 };

/* Reads a --step-times file: returns the number of steps, or -1. */
static int read_step_times(const char *path, e2e_step *s, int max, double *close_cpu)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int n = 0;
    *close_cpu = NAN;
    while (fgets(line, sizeof line, f)) {
        e2e_step e;
        double wall;
        if (sscanf(line, "# close %lf", &e.cpu) == 1)
            *close_cpu = e.cpu;
        else if (line[0] != '#' && n < max &&
                 sscanf(line, "%d %d %lf %lf %lf %d", &e.step, &e.recorded, &e.cpu, &wall,
                        &e.in_rd, &e.flushed) == 6)
            s[n++] = e;
    }
    fclose(f);
    return n;
}

static double median_of(double *v, int n) /* sorts v */
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The k-th smallest of v (0-based), reordering v: quickselect, O(n). */
static double select_kth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

/* Hodges-Lehmann: the median of the Walsh averages (x_i + x_j) / 2, i <= j.
 * Robust like the median against steps that other jobs slowed down, and on
 * quiet steps nearly as efficient as the mean; work: (n (n + 1) / 2). */
static double hodges_lehmann(const double *x, int n, double *work)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            work[m++] = 0.5 * (x[i] + x[j]);
    if (m == 0)
        return NAN;
    double hi = select_kth(work, m, m / 2);
    if (m % 2)
        return hi;
    double lo = work[0]; /* the largest of the lower half */
    for (int i = 1; i < m / 2; i++)
        lo = work[i] > lo ? work[i] : lo;
    return 0.5 * (lo + hi);
}

/* A recorded step's CPU time over the mean of its unrecorded neighbours'
 * (k - 1 and k + 1), minus 1: a drift of the machine's speed over a few
 * steps cancels. NAN without an unrecorded neighbour. */
static double neighbour_excess(const e2e_step *s, int n, int k)
{
    double ref = 0;
    int m = 0;
    for (int d = -1; d <= 1; d += 2)
        if (k + d >= 0 && k + d < n && !s[k + d].recorded) {
            ref += s[k + d].cpu;
            m++;
        }
    return m ? s[k].cpu / (ref / m) - 1.0 : NAN;
}

/* The cost of recording per recorded step, as a fraction of an unrecorded
 * step: the Hodges-Lehmann excess of the ordinary recorded steps (ord, n_ord)
 * plus what the steps that wrote the run file (fl, n_fl) cost beyond that
 * and the close (in unrecorded steps), spread over all recorded steps -
 * writing is part of recording, so it is amortised, not dropped as an
 * outlier. */
static double interleaved_cost(const double *ord, int n_ord, const double *fl, int n_fl,
                               double close, double *work)
{
    if (n_ord < 2)
        return NAN;
    double m = hodges_lehmann(ord, n_ord, work), extra = close;
    for (int i = 0; i < n_fl; i++)
        extra += fl[i] - m;
    return m + extra / (n_ord + n_fl);
}

/* Fewer tokens/s when every step costs 1 + c unrecorded steps. */
static double tokens_lost(double c)
{
    return c / (1.0 + c);
}

typedef struct e2e_estimate {
    double lost, lo, hi, half[2]; /* fewer tokens/s: HL, 90% bootstrap, each half */
    double writes;                /* of lost: the steps that wrote the run file */
    double rec_ms, unrec_ms;      /* median CPU per step */
    int n_ord, n_fl, n_unrec;
    double in_ms, in_share, in_write_ms, in_lost; /* inside libresdiag */
    double unrec_in_us, unrec_in_max_us;          /* ... in unrecorded steps */
} e2e_estimate;

/* close_cpu: the CPU time of closing the run file, which writes what is
 * still buffered (flushes also come every flush_seconds). */
static int e2e_estimate_steps(const e2e_step *s, int n, double close_cpu, e2e_estimate *e)
{
    /* Steps 0 and 1 are the warm-up (first touch of every buffer; step 0
     * also writes the run file at once). */
    enum { FIRST = 2 };
    double *ord = malloc((size_t)n * sizeof *ord), *fl = malloc((size_t)n * sizeof *fl);
    double *bo = malloc((size_t)n * sizeof *bo), *bf = malloc((size_t)n * sizeof *bf);
    double *tmp = malloc((size_t)n * sizeof *tmp), *tmp2 = malloc((size_t)n * sizeof *tmp2);
    double *work = malloc(((size_t)n * (size_t)(n + 1) / 2 + 1) * sizeof *work);
    enum { BOOT = 1000 };
    double *boot = malloc(BOOT * sizeof *boot);
    int ok = 0;
    if (!ord || !fl || !bo || !bf || !tmp || !tmp2 || !work || !boot)
        goto done;
    memset(e, 0, sizeof *e);
    for (int k = FIRST - 1; k < n; k++)
        if (!s[k].recorded)
            tmp[e->n_unrec++] = s[k].cpu;
    /* the close in units of an unrecorded step, counted once per part */
    double unrec = median_of(tmp, e->n_unrec), close = close_cpu / unrec;

    /* the halves first, then all steps (leaving ord/fl filled) */
    for (int part = 0; part < 3; part++) {
        int lo = part == 1 ? n / 2 : FIRST, hi = part == 0 ? n / 2 : n;
        int no = 0, nf = 0;
        for (int k = lo; k < hi; k++) {
            double x = s[k].recorded ? neighbour_excess(s, n, k) : NAN;
            if (isnan(x))
                continue;
            if (s[k].flushed)
                fl[nf++] = x;
            else
                ord[no++] = x;
        }
        double c = interleaved_cost(ord, no, fl, nf, close, work);
        if (part < 2) {
            e->half[part] = tokens_lost(c);
            continue;
        }
        e->n_ord = no;
        e->n_fl = nf;
        e->lost = tokens_lost(c);
        if (isnan(c))
            goto done;
        double m = hodges_lehmann(ord, no, work);
        e->writes = e->lost - tokens_lost(m);
        /* 90% percentile bootstrap over the recorded steps (fixed seed:
         * the same file gives the same interval) */
        uint64_t r = 0x2545f4914f6cdd1dull;
        for (int b = 0; b < BOOT; b++) {
            for (int i = 0; i < no; i++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                bo[i] = ord[r % (uint64_t)no];
            }
            for (int i = 0; i < nf; i++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                bf[i] = fl[r % (uint64_t)nf];
            }
            boot[b] = tokens_lost(interleaved_cost(bo, no, bf, nf, close, work));
        }
        qsort(boot, BOOT, sizeof *boot, cmp_double);
        e->lo = boot[BOOT / 20];
        e->hi = boot[BOOT - 1 - BOOT / 20];
    }

    /* medians of the steps' CPU time, and the time inside resdiag */
    int nr = 0, nu = 0, ni = 0, nw = 0;
    for (int k = FIRST; k < n; k++)
        if (s[k].recorded && !s[k].flushed)
            tmp[nr++] = s[k].cpu;
    e->rec_ms = 1e3 * median_of(tmp, nr);
    for (int k = FIRST - 1; k < n; k++)
        if (!s[k].recorded) {
            tmp[nu] = s[k].cpu;
            tmp2[nu++] = s[k].in_rd;
        }
    e->unrec_ms = 1e3 * median_of(tmp, nu);
    e->unrec_in_us = 1e6 * median_of(tmp2, nu);
    e->unrec_in_max_us = nu ? 1e6 * tmp2[nu - 1] : NAN;
    /* Inside: each ordinary recorded step's resdiag time over the rest of
     * that step (a step that other jobs slowed down scales both alike),
     * plus what the writing steps spent beyond an ordinary one and the
     * close, spread over all recorded steps. Medians: the times are wall
     * time, and a preemption inside a hook adds a whole time slice to
     * some steps (with a CPU clock the median and the mean agreed). */
    for (int k = FIRST; k < n; k++)
        if (s[k].recorded && !s[k].flushed) {
            tmp[ni] = s[k].in_rd / (s[k].cpu - s[k].in_rd);
            tmp2[ni++] = s[k].in_rd;
        }
    double q = median_of(tmp, ni), in_med = median_of(tmp2, ni);
    for (int k = FIRST, i = 0; k < n; k++)
        if (s[k].recorded && !s[k].flushed)
            tmp[i++] = s[k].in_rd / s[k].cpu;
    e->in_share = median_of(tmp, ni);
    for (int k = FIRST; k < n; k++)
        if (s[k].recorded && s[k].flushed)
            tmp[nw++] = s[k].in_rd - in_med;
    double per_write = nw ? median_of(tmp, nw) : 0;
    e->in_ms = 1e3 * in_med;
    e->in_write_ms = 1e3 * per_write;
    e->in_lost = tokens_lost(q + (nw * per_write + close_cpu) / (ni + nw) / unrec);
    ok = 1;
done:
    free(ord);
    free(fl);
    free(bo);
    free(bf);
    free(tmp);
    free(tmp2);
    free(work);
    free(boot);
    return ok;
}

/* Runs cmd; returns its tokens/s of wall time and sets *cpu_tps to its
 * tokens per second of CPU time, both from tinygpt's last line
 * "time: W s for N steps (CPU C s), T tokens/s"; -1 on failure. */
static double run_tokens_per_s(const char *cmd, double *cpu_tps)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[512];
    double tps = -1, wall = -1, cpu = -1;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, " tokens/s");
        if (p && strncmp(line, "time:", 5) == 0) {
            char *q = p;
            while (q > line && q[-1] != ' ' && q[-1] != ',')
                q--;
            tps = strtod(q, NULL);
            wall = strtod(line + 5, NULL);
            char *c = strstr(line, "(CPU ");
            cpu = c ? strtod(c + 5, NULL) : -1;
        }
    }
    *cpu_tps = tps > 0 && wall > 0 && cpu > 0 ? tps * wall / cpu : -1;
    return pclose(f) == 0 ? tps : -1;
}

/* The primary figure: one tinygpt process, recorded and unrecorded steps
 * alternating (--record-every 2), so that both see the same machine. */
static void e2e_interleaved(const char *exe, const char *dir, int quick, char *summary_out,
                            size_t summary_len)
{
    /* step 0 is written at once, then every flush_steps recorded steps:
     * with 2 * flush * k + 1 steps every write falls in a timed step and
     * none is left for the close (but flush_seconds may leave some). 257
     * steps, ~1 min: three 129-step runs gave -0.2%, 0.2% and 1.7% here,
     * one 513-step run 0.9% [0.5% .. 1.2%]. */
    int flush = quick && !e2e_steps ? 8 : 16, groups = quick ? 1 : 8;
    if (e2e_steps > 0) /* rounded up to whole groups */
        groups = (e2e_steps - 1 + 2 * flush - 1) / (2 * flush);
    int steps = 2 * flush * (groups > 0 ? groups : 1) + 1;
    char cmd[2200], times[700], h5[700];
    snprintf(times, sizeof times, "%s/steps.txt", dir);
    snprintf(h5, sizeof h5, "%s/e2e.h5", dir);
    snprintf(cmd, sizeof cmd,
             "%s --threads 1 --steps %d --record full --record-every 2 --flush-steps %d "
             "--log-every 1000 --out %s --overwrite --step-times %s 2>&1", exe, steps, flush, h5,
             times);
    double cpu_tps, tps = run_tokens_per_s(cmd, &cpu_tps);
    static e2e_step s[E2E_MAX_STEPS];
    double close_cpu = NAN;
    int n = tps > 0 ? read_step_times(times, s, E2E_MAX_STEPS, &close_cpu) : -1;
    remove(times);
    remove(h5);
    e2e_estimate e;
    if (n != steps || isnan(close_cpu) || !e2e_estimate_steps(s, n, close_cpu, &e)) {
        snprintf(e2e_note, sizeof e2e_note, "not measured (tinygpt --step-times failed: %.200s)",
                 cmd);
        printf("  %s\n", e2e_note);
        return;
    }
    double sum = 0;
    for (int k = 0; k < n; k++)
        sum += s[k].cpu;
    e2e_overhead = e.lost;
    printf("  step-interleaved (primary): tinygpt --threads 1 --steps %d --record full "
           "--record-every 2 --flush-steps %d, one process\n", steps, flush);
    printf("    %d recorded steps (%d of them wrote the run file), %d unrecorded; steps 0-1 "
           "skipped (warm-up); %.1f s of CPU in all steps\n", e.n_ord + e.n_fl, e.n_fl,
           e.n_unrec, sum);
    printf("    CPU per step (medians): recorded %.1f ms, unrecorded %.1f ms\n", e.rec_ms,
           e.unrec_ms);
    printf("    cost %.2f%% fewer tokens/s [90%% bootstrap %.2f%% .. %.2f%%; halves %.2f%% / "
           "%.2f%%], of which writing and closing the run file %.2f%%\n", 100.0 * e.lost,
           100.0 * e.lo, 100.0 * e.hi, 100.0 * e.half[0], 100.0 * e.half[1],
           100.0 * e.writes);
    printf("  inside libresdiag (third estimate, same run): %.2f ms per recorded step (%.2f%% "
           "of it; medians), +%.2f ms per write -> %.2f%% fewer tokens/s\n", e.in_ms,
           100.0 * e.in_share, e.in_write_ms, 100.0 * e.in_lost);
    printf("    unrecorded steps: %.1f us inside resdiag (median; max %.1f us): step_begin and "
           "step_end only; closing the file (counted): %.1f ms CPU\n",
           e.unrec_in_us, e.unrec_in_max_us, 1e3 * close_cpu);
    snprintf(e2e_note, sizeof e2e_note,
             "%.2f%% [90%% bootstrap %.2f%% .. %.2f%%, halves %.2f%% / %.2f%%] fewer tokens/s, "
             "step-interleaved (%d recorded vs %d unrecorded steps of one process, CPU "
             "time%s)", 100.0 * e.lost, 100.0 * e.lo, 100.0 * e.hi, 100.0 * e.half[0],
             100.0 * e.half[1], e.n_ord + e.n_fl, e.n_unrec,
             e.lo <= 0.02 && e.hi > 0.02 ? "; the interval holds 2%: not conclusive" : "");
    snprintf(summary_out, summary_len, "inside libresdiag %.2f%%", 100.0 * e.in_lost);
    e2e_inside = e.in_lost;
}

/* The second estimate: whole tinygpt processes, --record off and full in
 * interleaved pairs. On a shared machine the pairs spread by +-15%, which
 * is why it is not the target's figure. */
static void e2e_paired(const char *exe, const char *dir, int quick, char *summary_out,
                       size_t summary_len)
{
    /* one OpenMP thread: the hooks run in the trainer's thread, and the
     * other core stays free for the rest of the machine's load */
    const char *args = quick ? "--threads 1 --steps 6 --log-every 1000"
                             : "--threads 1 --steps 10 --log-every 1000";
    enum { MAXR = 9 };
    int reps = quick ? 2 : 9;
    double off[MAXR], full[MAXR], coff[MAXR], cfull[MAXR], ratio[MAXR], cratio[MAXR];
    char cmd[1600], h5[700];
    snprintf(h5, sizeof h5, "%s/e2e.h5", dir);
    /* Interleaved pairs, the order alternating (off then full, full then
     * off), so that drift in the machine's load hits both alike. */
    for (int k = 0; k < reps; k++) {
        for (int h = 0; h < 2; h++) {
            int rec = (h + k) % 2; /* 0: off, 1: full */
            if (rec)
                snprintf(cmd, sizeof cmd, "%s %s --record full --out %s --overwrite 2>&1", exe,
                         args, h5);
            else
                snprintf(cmd, sizeof cmd, "%s %s --record off 2>&1", exe, args);
            double c, w = run_tokens_per_s(cmd, &c);
            if (w <= 0 || c <= 0) {
                snprintf(summary_out, summary_len, "paired processes not measured");
                printf("  paired processes: not measured (tinygpt failed: %.200s)\n", cmd);
                remove(h5);
                return;
            }
            (rec ? full : off)[k] = w;
            (rec ? cfull : coff)[k] = c;
        }
    }
    remove(h5);
    for (int k = 0; k < reps; k++) {
        ratio[k] = 1.0 - full[k] / off[k]; /* each pair ran back to back */
        cratio[k] = 1.0 - cfull[k] / coff[k];
    }
    summary so = summarize(off, reps), sf = summarize(full, reps), sr = summarize(ratio, reps);
    summary co = summarize(coff, reps), cf = summarize(cfull, reps), cr = summarize(cratio, reps);
    /* CPU time: the run is single-threaded, and on a small shared machine
     * its wall clock mostly measures the other jobs. */
    printf("  paired processes (second estimate): tinygpt %s, %d interleaved pairs\n", args,
           reps);
    printf("    tokens/s of wall time : off %8.0f [%.0f-%.0f], full %8.0f [%.0f-%.0f], "
           "cost %.1f%% [%.1f%% .. %.1f%%]\n", so.med, so.min, so.max, sf.med, sf.min,
           sf.max, 100.0 * sr.med, 100.0 * sr.min, 100.0 * sr.max);
    printf("    tokens/s of CPU time  : off %8.0f [%.0f-%.0f], full %8.0f [%.0f-%.0f], "
           "cost %.1f%% [%.1f%% .. %.1f%%]\n", co.med, co.min, co.max, cf.med, cf.min,
           cf.max, 100.0 * cr.med, 100.0 * cr.min, 100.0 * cr.max);
    /* Noise from other jobs only ever adds time, so the best run of each
     * mode is another estimate. */
    printf("    cost = median over pairs of 1 - full/off; from the best run of each mode: "
           "%.1f%% (CPU), %.1f%% (wall)\n", 100.0 * (1.0 - cf.max / co.max),
           100.0 * (1.0 - sf.max / so.max));
    snprintf(summary_out, summary_len, "paired processes %.1f%% [%.1f%% .. %.1f%%]",
             100.0 * cr.med, 100.0 * cr.min, 100.0 * cr.max);
}

static void bench_e2e(int quick)
{
    char exe[600];
    snprintf(exe, sizeof exe, "%s/examples/tinygpt/tinygpt", RD_BENCH_BUILD_ROOT);
    printf("\n== end to end: tinygpt, --record full (every site forward and backward) vs not "
           "recording ==\n");
    if (access(exe, X_OK) != 0) {
        snprintf(e2e_note, sizeof e2e_note, "not measured (%.200s not built)", exe);
        printf("  %s\n", e2e_note);
        return;
    }
    char dir[] = "/tmp/resdiag-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(e2e_note, sizeof e2e_note, "not measured (no temporary directory)");
        return;
    }
    char inside[128] = "inside libresdiag not measured", paired[128] = "";
    e2e_interleaved(exe, dir, quick, inside, sizeof inside);
    e2e_paired(exe, dir, quick, paired, sizeof paired);
    rmdir(dir);
    if (!isnan(e2e_overhead)) {
        size_t len = strlen(e2e_note);
        snprintf(e2e_note + len, sizeof e2e_note - len, "; other estimates: %s, %s (CPU time)",
                 inside, paired);
    }
}

/* ------------------------------------------------------------------------ */
/* resdiag report on a long synthetic run                                    */
/* ------------------------------------------------------------------------ */

static char report_note[512] = "not measured (resdiag report not built yet)";
static double report_s_100k = NAN, report_mib = NAN, report_growth = NAN;

/* The synthetic run of bench_report: a pre-norm model of 96 layers (one
 * sublayer "block", d_model 64, 4 tokens), its tensors computed once. The
 * first and the last recorded step observe everything (every block site
 * forward with sketches, the final norm, the stream gradient and mlp.w2's
 * per layer): the verdict, the depth laws, the gradients at init and the
 * over-training summary have their full evidence. Every step between
 * observes what a minimal integration does (the embedding and each
 * layer's stream_out), and two of them carry a NaN and an Inf, which the
 * non-finite scan must find. doc/BENCHMARK.md explains the choice. */
enum { LR_L = 96, LR_C = 64, LR_T = 4 };
static float lr_x[LR_L + 1][LR_T * LR_C]; /* x_0 = embedding, x_{l+1} = x_l + f_l */
static float lr_n[LR_L + 1][LR_T * LR_C]; /* LayerNorm(x_l); [L] = the final norm */
static float lr_f[LR_L][LR_T * LR_C];     /* the branch output of layer l */
static float lr_g[LR_L][LR_T * LR_C];     /* a gradient per layer */

static void layernorm_rows(float *out, const float *x)
{
    for (int t = 0; t < LR_T; t++) {
        const float *r = x + t * LR_C;
        double m = 0, v = 0;
        for (int j = 0; j < LR_C; j++)
            m += r[j];
        m /= LR_C;
        for (int j = 0; j < LR_C; j++)
            v += (r[j] - m) * (r[j] - m);
        double inv = 1.0 / sqrt(v / LR_C + 1e-5);
        for (int j = 0; j < LR_C; j++)
            out[t * LR_C + j] = (float)((r[j] - m) * inv);
    }
}

static void long_run_tensors(void)
{
    for (int k = 0; k < LR_T * LR_C; k++)
        lr_x[0][k] = (float)rnd_normal();
    for (int l = 0; l < LR_L; l++) {
        layernorm_rows(lr_n[l], lr_x[l]);
        /* a fixed mixing of the normalized tokens: F(Norm(x)) */
        for (int t = 0; t < LR_T; t++)
            for (int j = 0; j < LR_C; j++)
                lr_f[l][t * LR_C + j] = 0.4f * lr_n[l][t * LR_C + (j * 5 + l) % LR_C]
                                        + 0.2f * (float)rnd_normal();
        for (int k = 0; k < LR_T * LR_C; k++) {
            lr_x[l + 1][k] = lr_x[l][k] + lr_f[l][k];
            lr_g[l][k] = (float)(rnd_normal() / sqrt(1.0 + l));
        }
    }
    layernorm_rows(lr_n[LR_L], lr_x[LR_L]);
}

/* Writes the run of `steps` recorded steps; *write_s the seconds it took. */
static int write_long_run(const char *path, int steps, double *write_s)
{
    static const char *const subs[] = { "block" };
    static const char *const lp[] = { "mlp.w2" };
    resdiag_model m = bench_model(LR_L, LR_C, 1, subs, 1, lp, 0, NULL);
    m.norm_kind = RESDIAG_NORM_LAYERNORM;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 256;
    o.flush_seconds = 0;
    o.overwrite = 1; /* the bench's own file, written again on each run */
    resdiag *r = NULL;
    double t0 = now();
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        return -1;
    static float bad[LR_T * LR_C];
    const int nan_at = steps / 8 * 5, inf_at = steps / 8 * 7;
    for (int s = 0; s < steps; s++) {
        int full = s == 0 || s == steps - 1;
        resdiag_step_begin(r, s);
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(lr_x[0], LR_T, LR_C));
        for (int l = 0; l < LR_L; l++) {
            const float *out = lr_x[l + 1];
            if ((s == nan_at && l == 40) || (s == inf_at && l == 90)) {
                memcpy(bad, out, sizeof bad);
                bad[3] = s == nan_at ? NAN : INFINITY;
                out = bad;
            }
            if (full) {
                RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_IN, resdiag_f32(lr_x[l], LR_T, LR_C));
                RESDIAG_FWD(r, l, 0, RESDIAG_NORM_IN, resdiag_f32(lr_x[l], LR_T, LR_C));
                RESDIAG_FWD(r, l, 0, RESDIAG_NORM_OUT, resdiag_f32(lr_n[l], LR_T, LR_C));
                RESDIAG_FWD(r, l, 0, RESDIAG_BRANCH_OUT, resdiag_f32(lr_f[l], LR_T, LR_C));
            }
            RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(out, LR_T, LR_C));
        }
        if (full) {
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(lr_x[LR_L], LR_T, LR_C));
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(lr_n[LR_L], LR_T, LR_C));
            for (int l = LR_L - 1; l >= 0; l--) {
                RESDIAG_BWD(r, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(lr_g[l], LR_T, LR_C));
                RESDIAG_PARAM_GRAD(r, l, "mlp.w2", resdiag_f32(lr_g[l], LR_T, LR_C));
            }
        }
        resdiag_step_end(r);
    }
    int st = resdiag_close(r);
    resdiag_destroy(r);
    *write_s = now() - t0;
    return st == RESDIAG_OK ? 0 : -1;
}

/* Runs `resdiag report path`; seconds and peak RSS (MiB), or -1. */
static double time_report(const char *tool, const char *path, double *mib)
{
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execl(tool, tool, "report", path, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    *mib = (double)ru.ru_maxrss / 1024.0;
    return now() - t0;
}

static void bench_report(int quick)
{
    char tool[600];
    snprintf(tool, sizeof tool, "%s/resdiag", RD_BENCH_BUILD_ROOT);
    printf("\n== resdiag report on a synthetic 96-layer run (full records at the first and "
           "last step, embed_out + stream_out per layer at every other step) ==\n");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s help report >/dev/null 2>&1", tool);
    if (access(tool, X_OK) != 0 || system(cmd) != 0) {
        printf("  %s\n", report_note);
        return;
    }
    char dir[] = "/tmp/resdiag-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(report_note, sizeof report_note, "not measured (no temporary directory)");
        return;
    }
    long_run_tensors();
    /* Two sizes, 4x apart: the report of the larger one is the target; the
     * ratio of their times checks that the time grows at most linearly. */
    const int steps[2] = { quick ? 2000 : 25000, quick ? 8000 : 100000 };
    double secs[2] = { -1, -1 }, mib[2] = { 0, 0 }, wsecs[2] = { 0, 0 }, gb[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        char path[700];
        snprintf(path, sizeof path, "%s/long-%d.h5", dir, steps[k]);
        if (write_long_run(path, steps[k], &wsecs[k]) == 0) {
            struct stat sb;
            gb[k] = stat(path, &sb) == 0 ? (double)sb.st_size / 1e9 : -1;
            /* the median of 3 reports (the first one reads a cold page cache
             * no more than the others: the file was just written) */
            double t[3], m[3];
            for (int rep = 0; rep < 3; rep++)
                t[rep] = time_report(tool, path, &m[rep]);
            summary ts = summarize(t, 3);
            secs[k] = t[0] < 0 || t[1] < 0 || t[2] < 0 ? -1 : ts.med;
            mib[k] = fmax(m[0], fmax(m[1], m[2]));
            printf("  %6d steps x 96 layers: file %.2f GB written in %.1f s; report %.3f s "
                   "(median of 3, %.3f-%.3f), peak RSS %.1f MiB\n",
                   steps[k], gb[k], wsecs[k], secs[k], ts.min, ts.max, mib[k]);
        }
        remove(path);
    }
    rmdir(dir);
    if (secs[0] <= 0 || secs[1] <= 0) {
        snprintf(report_note, sizeof report_note, "not measured (writing or reporting failed)");
        printf("  %s\n", report_note);
        return;
    }
    report_growth = secs[1] / secs[0];
    printf("  growth: %.2fx time for %.1fx steps x layers\n", report_growth,
           (double)steps[1] / steps[0]);
    report_mib = mib[1];
    if (quick) {
        snprintf(report_note, sizeof report_note,
                 "not measured at 100,000 steps (--quick: %.3f s, %.0f MiB at %d steps; "
                 "time x%.2f for x4 steps)", secs[1], mib[1], steps[1], report_growth);
        return;
    }
    report_s_100k = secs[1];
    snprintf(report_note, sizeof report_note,
             "%.3f s and %.0f MiB peak RSS on a real 100,000-step x 96-layer file (%.2f GB); "
             "time x%.2f for x4 steps (25,000 -> 100,000)", secs[1], mib[1], gb[1],
             report_growth);
}

/* ------------------------------------------------------------------------ */
/* Targets                                                                   */
/* ------------------------------------------------------------------------ */

static void target(const char *name, const char *measured, const char *goal, int met)
{
    printf("target %s: measured %s, goal %s, %s\n", name, measured, goal,
           met ? "met" : "missed");
}

/* The best vector path's median for (size, threads, dtype). */
static const kresult *best_path(int si, int nt, int d, int *path)
{
    const kresult *b = NULL;
    for (int p = RD_STATS_N_PATHS - 1; p >= 0 && !b; p--)
        if (kres[si][nt][d][M_PATH0 + p].valid) {
            b = &kres[si][nt][d][M_PATH0 + p];
            *path = p;
        }
    return b;
}

/* One "resdiag vs peer" target line: the ratio of medians, f32 24 MiB. */
static void peer_target(const char *name, const char *peer_name, const kresult *b,
                        const peer *pr, double goal)
{
    char m[320], g[32];
    snprintf(g, sizeof g, ">= %.1fx", goal);
    for (int w = 0; w < 2; w++) /* the paired figure when there is one */
        if (pairs_res[w].valid && !strcmp(peer_name, pair_names[w])) {
            const paired *q = &pairs_res[w];
            snprintf(m, sizeof m, "%.2fx [%.2f-%.2f] (median of %d interleaved pairs; "
                     "%.2f vs %s %.2f GB/s, f32 24 MiB, 1 thread)", q->ratio.med,
                     q->ratio.min, q->ratio.max, q->n, q->rd.med, peer_name, q->peer.med);
            target(name, m, g, q->ratio.med >= goal);
            return;
        }
    if (!b || !pr) {
        snprintf(m, sizeof m, "not measured (%s)", peers_note);
        target(name, m, g, 0);
        return;
    }
    double r = b->s.med / pr->s.med;
    snprintf(m, sizeof m, "%.2fx (%.2f vs %s %.2f GB/s, f32 24 MiB, 1 thread)", r, b->s.med,
             peer_name, pr->s.med);
    target(name, m, g, r >= goal);
}

static void print_targets(int quick)
{
    printf("\n== targets; active kernel path: %s ==\n",
           rd_stats_path_name(rd_stats_active_path()));
    char m[640];
    /* f32 one pass vs the ceiling, 1 thread, both sizes; bf16/f16 likewise */
    static const char *const dnames[4] = { "f32", "bf16", "f16", "f64" };
    for (int d = 0; d < 3; d++)
        for (int si = 0; si < 2; si++) {
            if (quick && si == 1)
                continue;
            int p = 0;
            const kresult *b = best_path(si, 0, d, &p);
            const kresult *c = &kres[si][0][d][M_SUMSQ];
            char name[64];
            snprintf(name, sizeof name, "%s-%dMiB-vs-ceiling", dnames[d], sizes_mib[si]);
            if (!b || !c->valid) {
                target(name, "not measured", ">= 0.90x", 0);
                continue;
            }
            double ratio = b->s.med / c->s.med;
            snprintf(m, sizeof m, "%.2fx (%s %.2f GB/s vs sumsq %.2f GB/s, 1 thread)",
                     ratio, rd_stats_path_name((rd_stats_path)p), b->s.med, c->s.med);
            target(name, m, ">= 0.90x", ratio >= 0.9);
        }
    /* peers, f32, 1 thread: both sizes measured; the target uses 24 MiB */
    {
        int p = 0;
        const kresult *b = best_path(0, 0, 0, &p);
        const peer *np = find_peer("numpy", "f32", 24, 1);
        const peer *tp = find_peer("torch", "f32", 24, 1);
        peer_target("f32-vs-numpy", "numpy", b, np, 2.5);
        peer_target("f32-vs-torch", "torch", b, tp, 1.2);
    }
    if (wres_worst_batched > 0) {
        snprintf(m, sizeof m, "%.3f us per record (worst of 12 and 96 layers, flush_steps=64)",
                 wres_worst_batched);
        target("writer-per-record", m, "<= 2 us", wres_worst_batched <= 2.0);
    } else {
        target("writer-per-record", "not measured", "<= 2 us", 0);
    }
    target("no-hdf5-in-hooks", "hooks fill the step buffer only; HDF5 is called from "
           "step_end/flush/close (lib/record/steps.c)", "no HDF5 call inside a hook", 1);
    /* the step-interleaved figure and the time inside resdiag (bench_e2e),
     * judged on the larger of the two */
    {
        double worst = e2e_overhead;
        if (!isnan(e2e_inside) && !(e2e_inside <= worst))
            worst = e2e_inside;
        char tm[sizeof e2e_note + 96];
        snprintf(tm, sizeof tm, "%s; judged on the larger of the step-interleaved and the "
                 "inside figure: %.2f%%", e2e_note, 100.0 * worst);
        target("tinygpt-overhead", isnan(worst) ? e2e_note : tm, "<= 2% fewer tokens/s",
               !isnan(worst) && worst <= 0.02);
    }
    /* linear: 4x the steps may take at most 4x the time (with 25% slack
     * for timing noise) */
    target("report-100k", report_note, "< 2 s and < 256 MiB, time at most linear in steps",
           !isnan(report_s_100k) && report_s_100k < 2.0 && report_mib < 256.0
               && report_growth <= 4.0 * 1.25);
}

int main(int argc, char **argv)
{
    int quick = 0, peers_on = 1, writer_on = 1, e2e_on = 1, report_on = 1, reps = 0;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--quick"))
            quick = 1;
        else if (!strcmp(argv[k], "--no-peers"))
            peers_on = 0;
        else if (!strcmp(argv[k], "--no-writer"))
            writer_on = 0;
        else if (!strcmp(argv[k], "--no-e2e"))
            e2e_on = 0;
        else if (!strcmp(argv[k], "--no-report"))
            report_on = 0;
        else if (!strcmp(argv[k], "--reps") && k + 1 < argc)
            reps = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--cols") && k + 1 < argc && atoi(argv[k + 1]) >= 16)
            bench_cols = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--e2e-steps") && k + 1 < argc && atoi(argv[k + 1]) >= 5 &&
                 atoi(argv[k + 1]) <= E2E_MAX_STEPS - 64)
            e2e_steps = atoi(argv[++k]);
        else {
            fprintf(stderr, "usage: resdiag-bench [--quick] [--reps N] [--no-peers] "
                            "[--no-writer] [--no-e2e] [--no-report] [--cols N] "
                            "[--e2e-steps N]\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when redirected too */
    int reps_small = reps > 0 ? reps : quick ? 3 : 11;
    int reps_large = reps > 0 ? reps : quick ? 3 : 5;
    if (reps_small > MAX_REPS)
        reps_small = MAX_REPS;
    if (reps_large > MAX_REPS)
        reps_large = MAX_REPS;

    printf("resdiag-bench: resdiag %s; kernel paths available:", resdiag_version_string());
    for (int p = 0; p < RD_STATS_N_PATHS; p++)
        if (rd_stats_path_available((rd_stats_path)p))
            printf(" %s", rd_stats_path_name((rd_stats_path)p));
    printf(" (hooks use %s)\n", rd_stats_path_name(rd_stats_active_path()));
#ifdef RD_BENCH_OPENBLAS
    openblas_set_num_threads(1);
    printf("OpenBLAS: %s\n", openblas_get_config());
#else
    printf("OpenBLAS: not built in (libopenblas-dev not found at configure time)\n");
#endif
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("online CPUs: %ld\n", ncpu);
    fflush(stdout);

    bench_kernels(reps_small, reps_large, quick);
    if (peers_on) {
        bench_peers(reps_small, reps_large, quick);
        bench_peer_pairs(quick);
    }
    if (writer_on)
        bench_writer(quick);
    if (e2e_on)
        bench_e2e(quick);
    if (report_on)
        bench_report(quick);
    print_targets(quick);
    return 0;
}
