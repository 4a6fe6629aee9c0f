/*
 * resdiag-bench - how fast resdiag reads tensors and writes steps, against
 * the machine's own ceiling and the peers installed on it.
 *
 * Not a test: it times things and prints the figures, ending with one line
 * per performance target, "target NAME: measured X, goal Y, met|missed"
 * (or "target NAME: not measured (why)"), judged on medians by the thread's
 * CPU clock, with the load average at the start and the end of the run.
 * doc/BENCHMARK.md says what each figure means.
 *
 *   resdiag-bench [--quick | --long] [--reps N] [--no-kernels] [--no-peers]
 *                 [--no-hook] [--no-writer] [--no-e2e] [--no-report] [--no-size]
 *                 [--no-deflate]
 *                 [--cols N] [--e2e-steps N]
 *   resdiag-bench --fixed-cost N     (the scenario of scripts/bench-callgrind.sh)
 *   resdiag-bench --ipe PATH DTYPE N COLS   (the scenario of ipe.c, under callgrind)
 *
 * Dimension names: rows = tokens, cols = width (768 here, GPT-2 small;
 * --cols N reads the same bytes as rows of N, which shows the per-row cost).
 *
 * Kernels: one thread, on the same buffer, 256 KiB (L2), 6 MiB (L3), 24 MiB and 256 MiB,
 * each dtype: the ceiling loops (ceiling.h: AVX-512 and AVX2 read-only sum,
 * sum of squares, sum of squares with prefetch), every resdiag kernel path
 * (all statistics, the sketch with K = 16 and the per-token norms, as a
 * hook computes them), the active path with K = 0, OpenBLAS snrm2 / dnrm2
 * per row when built with it, and the one-row reference loop (one_row_ref.h)
 * for f32 from DRAM. Kernel targets are per vector path, its name in theirs. Every method runs once in every repetition
 * (rep 1 of each, rep 2 of each, ...), each call timed by the thread's CPU
 * clock (CLOCK_THREAD_CPUTIME_ID: the time other jobs take the core from
 * us is not counted) and the wall clock; a method's ratio is, per
 * repetition, the ceiling's CPU time over its own, and the figures are
 * medians with [min-max]. numpy and torch run in scripts/bench-peers.py,
 * paired call by call with resdiag.
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

#include "ceiling.h"
#include "deflate.h"
#include "file_size.h"
#include "one_row_ref.h"
#include "ipe.h"

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

/* The calling thread's CPU time: what the work itself took, whatever else
 * the machine runs. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* seconds of one timed piece of work by both clocks */
typedef struct span {
    double wall, cpu;
} span;

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

static const char *dtype_label(resdiag_dtype dt)
{
    return resdiag_dtype_name(dt);
}

/* ------------------------------------------------------------------------ */
/* Kernels against the ceiling, interleaved in every repetition              */
/* ------------------------------------------------------------------------ */

/* Methods of the kernel table: the ceiling loops of each ISA
 * (isa * CEIL_N_LOOPS + loop), every resdiag path, the active path without
 * the sketch (K = 0), and OpenBLAS's norm per row. */
enum { M_CEIL0 = 0, M_PATH0 = CEIL_N_ISAS * CEIL_N_LOOPS, M_K0 = M_PATH0 + RD_STATS_N_PATHS,
       M_BLAS, M_REF0, N_METHODS = M_REF0 + REF_N_ISAS };

/* A tensor a hook reads just after the trainer wrote it: 256 KiB (in L2)
 * and 6 MiB (in L3), the same buffer read call after call as the layers of
 * one step are; then 24 MiB and 256 MiB (from DRAM). */
enum { N_SIZES = 4, SIZE_L2 = 0, SIZE_L3 = 1, SIZE_24 = 2, SIZE_256 = 3 };
static size_t size_bytes[N_SIZES] = { 256 << 10, 6 << 20, 24 << 20, 256 << 20 };
static char size_label[N_SIZES][16] = { "L2", "L3", "24MiB", "256MiB" };
static const resdiag_dtype bench_dts[4] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_BF16,
                                            RESDIAG_DTYPE_F16, RESDIAG_DTYPE_F64 };

typedef struct kresult {
    int valid;
    summary cpu_gbs, wall_gbs; /* GB/s of input by each clock */
    summary ratio;             /* per repetition: the ceiling's CPU time / this one's */
    int ceil_isa;              /* the ceiling it is held to */
    double cpu[MAX_REPS];      /* CPU seconds of each repetition (paired ratios) */
} kresult;
static kresult kres[N_SIZES][4][N_METHODS];
static int kernel_reps;
static int ipe_on; /* the callgrind counts: with the kernels, not --quick */

/* The ceiling of CEIL_N_ISAS: the fastest loop of every ISA the CPU runs.
 * On some CPUs the AVX2 loops read memory faster than the AVX-512 ones
 * (OpenBLAS's AVX-512 snrm2 then beat an AVX-512-only ceiling), so a
 * method is held to the best read of any of them. */
enum { CEIL_ALL = CEIL_N_ISAS };

static const char *ceiling_label(int isa)
{
    return isa == CEIL_ALL ? "best" : ceiling_isa_name(isa);
}

static const char *method_name(int m, resdiag_dtype dt)
{
    static char buf[64];
    if (m < M_PATH0)
        snprintf(buf, sizeof buf, "ceiling %s %s", ceiling_isa_name(m / CEIL_N_LOOPS),
                 ceiling_loop_name(m % CEIL_N_LOOPS));
    else if (m < M_K0)
        snprintf(buf, sizeof buf, "resdiag %s", rd_stats_path_name((rd_stats_path)(m - M_PATH0)));
    else if (m == M_K0)
        snprintf(buf, sizeof buf, "resdiag %s K=0", rd_stats_path_name(rd_stats_active_path()));
    else if (m >= M_REF0)
        snprintf(buf, sizeof buf, "one-row reference %s", m == M_REF0 + REF_AVX512 ? "avx512" : "avx2");
    else
        snprintf(buf, sizeof buf, "OpenBLAS %s/row", dt == RESDIAG_DTYPE_F64 ? "dnrm2" : "snrm2");
    return buf;
}

static int method_available(int m, resdiag_dtype dt, int si)
{
    if (m < M_PATH0)
        return ceiling_available(m / CEIL_N_LOOPS);
    if (m < M_K0) /* the portable path only where it stays short */
        return rd_stats_path_available((rd_stats_path)(m - M_PATH0)) &&
               (m != M_PATH0 + RD_STATS_PORTABLE || si != SIZE_256);
    if (m == M_K0)
        return 1;
    if (m >= M_REF0) /* f32 from DRAM: the sizes the one-row loop is held to */
        return dt == RESDIAG_DTYPE_F32 && si >= SIZE_24 && ref_available(m - M_REF0);
#ifdef RD_BENCH_OPENBLAS
    return dt == RESDIAG_DTYPE_F32 || dt == RESDIAG_DTYPE_F64;
#else
    (void)dt;
    return 0;
#endif
}

/* The ceiling a method is held to: the AVX2 one for the AVX2 path and the
 * AVX2 loops, the AVX-512 one for the AVX-512 loops, the best of all for
 * the rest. */
static int method_ceiling(int m)
{
    if (m == M_PATH0 + RD_STATS_AVX2 || m == M_REF0 + REF_AVX2 || m < M_PATH0)
        return m < M_PATH0 ? m / CEIL_N_LOOPS : CEIL_AVX2;
    return CEIL_ALL;
}

typedef struct kjob {
    const void *buf;
    size_t bytes;
    resdiag_dtype dtype;
    int64_t rows;
    double *row_norms;
    const rd_sketch_params *sp, *sp0; /* K = 16; K = 0 */
} kjob;

static double run_method(int m, const kjob *j)
{
    double f[RESDIAG_N_FIELDS], sk[16];
    resdiag_tensor t = resdiag_tensor_make(j->buf, j->dtype, j->rows, bench_cols, 0);
    if (m < M_PATH0)
        return ceiling_run(m / CEIL_N_LOOPS, m % CEIL_N_LOOPS, j->buf, j->bytes);
    if (m < M_K0) {
        rd_stats_compute_path((rd_stats_path)(m - M_PATH0), f, sk, j->row_norms, &t, j->sp);
        return f[RESDIAG_FIELD_FROB];
    }
    if (m == M_K0) {
        rd_stats_compute_path(rd_stats_active_path(), f, NULL, j->row_norms, &t, j->sp0);
        return f[RESDIAG_FIELD_FROB];
    }
    if (m >= M_REF0)
        return ref_one_row(m - M_REF0, f, sk, j->row_norms, j->buf, j->rows, bench_cols, j->sp);
    double s = 0.0;
#ifdef RD_BENCH_OPENBLAS
    for (int64_t i = 0; i < j->rows; i++)
        s += j->dtype == RESDIAG_DTYPE_F64
                 ? cblas_dnrm2(bench_cols, (const double *)j->buf + i * bench_cols, 1)
                 : cblas_snrm2(bench_cols, (const float *)j->buf + i * bench_cols, 1);
#endif
    return s;
}

/* One sample: `calls` calls of method m, by both clocks. */
static span time_method(int m, const kjob *j, int calls)
{
    double w0 = now(), c0 = thread_cpu();
    for (int c = 0; c < calls; c++)
        sink += run_method(m, j);
    span s = { now() - w0, thread_cpu() - c0 };
    return s;
}

/* Times every available method on one buffer, all in each repetition, and
 * keeps the figures in kres[si][d]. */
static void bench_kernel_row(int si, int d, void *buf, double *norms,
                             const rd_sketch_params *sp, const rd_sketch_params *sp0, int reps)
{
    resdiag_dtype dt = bench_dts[d];
    int64_t rows = (int64_t)(size_bytes[si] / (dt_size(dt) * (size_t)bench_cols));
    size_t bytes = (size_t)rows * (size_t)bench_cols * dt_size(dt);
    /* a sample of at least ~16 MiB read, so that a tensor from L2 is not
     * timed by a clock tick */
    int calls = bytes >= (16u << 20) ? 1 : (int)((16u << 20) / bytes) + 1;
    kjob j = { buf, bytes, dt, rows, norms, sp, sp0 };
    static double cpu[N_METHODS][MAX_REPS], wall[N_METHODS][MAX_REPS];
    double ceil_cpu[CEIL_N_ISAS + 1][MAX_REPS];
    for (int rep = -1; rep < reps; rep++) /* rep -1: warm-up */
        for (int m = 0; m < N_METHODS; m++)
            if (method_available(m, dt, si)) {
                span s = time_method(m, &j, calls);
                if (rep >= 0)
                    cpu[m][rep] = s.cpu, wall[m][rep] = s.wall;
            }
    for (int r = 0; r < reps; r++) {
        ceil_cpu[CEIL_ALL][r] = INFINITY;
        for (int isa = 0; isa < CEIL_N_ISAS; isa++) {
            ceil_cpu[isa][r] = INFINITY;
            for (int l = 0; l < CEIL_N_LOOPS && ceiling_available(isa); l++)
                ceil_cpu[isa][r] = fmin(ceil_cpu[isa][r], cpu[isa * CEIL_N_LOOPS + l][r]);
            ceil_cpu[CEIL_ALL][r] = fmin(ceil_cpu[CEIL_ALL][r], ceil_cpu[isa][r]);
        }
    }
    double read = (double)bytes * calls;
    for (int m = 0; m < N_METHODS; m++) {
        if (!method_available(m, dt, si))
            continue;
        double gc[MAX_REPS], gw[MAX_REPS], ratio[MAX_REPS];
        int isa = method_ceiling(m);
        for (int r = 0; r < reps; r++) {
            gc[r] = read / cpu[m][r] / 1e9;
            gw[r] = read / wall[m][r] / 1e9;
            ratio[r] = ceil_cpu[isa][r] / cpu[m][r];
        }
        kresult *k = &kres[si][d][m];
        *k = (kresult){ 1, summarize(gc, reps), summarize(gw, reps), summarize(ratio, reps),
                        isa, { 0 } };
        memcpy(k->cpu, cpu[m], (size_t)reps * sizeof k->cpu[0]);
        char rc[32], rr[32];
        snprintf(rc, sizeof rc, "[%.2f-%.2f]", k->cpu_gbs.min, k->cpu_gbs.max);
        snprintf(rr, sizeof rr, "[%.2f-%.2f]", k->ratio.min, k->ratio.max);
        printf("%-8s %-5s %-30s %7.2f %15s %7.2f %6.2f %13s %s\n", size_label[si],
               dtype_label(dt), method_name(m, dt), k->cpu_gbs.med, rc, k->wall_gbs.med,
               k->ratio.med, rr, ceiling_label(isa));
    }
    fflush(stdout);
}

static void bench_kernels(int reps, int quick)
{
    kernel_reps = reps;
    size_t max_bytes = size_bytes[quick ? SIZE_24 : SIZE_256];
    void *buf = aligned_alloc(4096, max_bytes);
    size_t max_rows = max_bytes / (2 * (size_t)bench_cols);
    double *norms = malloc(max_rows * sizeof(double));
    float *tau = malloc((size_t)(bench_cols + 1) * sizeof *tau); /* (bench_cols + 1) */
    if (!buf || !norms || !tau) {
        printf("kernels: out of memory (%zu MiB), skipped\n", max_bytes >> 20);
        free(buf), free(norms), free(tau);
        return;
    }
    rd_fill_column_signs(tau, (size_t)bench_cols + 1, 0x5eed);
    rd_sketch_params sp = { 16, tau, (size_t)bench_cols + 1, 0x5eed, 0, 0 };
    rd_sketch_params sp0 = { 0, tau, (size_t)bench_cols + 1, 0x5eed, 0, 0 };

    printf("\n== kernels, one thread: GB/s of input (1e9 B/s) by the thread's CPU clock, "
           "median [min-max] of %d repetitions; every method runs once in each repetition "
           "(interleaved); wall = the same by the wall clock (median); ratio = per "
           "repetition, the ceiling's CPU time over the method's (the ceiling = the fastest "
           "of that ISA's three loops in that repetition; best = of every ISA's), median "
           "[min-max] ==\n", reps);
    printf("cols = %d; resdiag = every statistic + sketch K=16 + per-token norms, one call "
           "per tensor; a sample from L2 is several calls\n", bench_cols);
    printf("%-8s %-5s %-30s %7s %15s %7s %6s %13s %s\n", "size", "dtype", "method", "CPU",
           "[min-max]", "wall", "ratio", "[min-max]", "ceiling");
    for (int d = 0; d < 4; d++) {
        fill(buf, max_bytes, bench_dts[d]);
        for (int si = 0; si < N_SIZES; si++) {
            if (size_bytes[si] > max_bytes || (si == SIZE_256 && bench_dts[d] == RESDIAG_DTYPE_F64))
                continue; /* f64 at 256 MiB: not a target, and the longest row */
            bench_kernel_row(si, d, buf, norms, &sp, &sp0, reps);
        }
    }
    free(buf);
    free(norms);
    free(tau);
}

/* ------------------------------------------------------------------------ */
/* Peers, paired with resdiag, through scripts/bench-peers.py --serve        */
/* ------------------------------------------------------------------------ */

/* The script runs as a co-process (--serve) and each pair is one turn of
 * resdiag then one turn of the peer (order alternating), each turn a
 * warm-up and PAIR_CALLS timed calls on its own 24 MiB f32 tensor; the
 * figure is the median over the pairs of the peer's CPU time over
 * resdiag's (both by the calling thread's CPU clock: numpy runs in it, and
 * torch does with one intra-op thread), with the min-max. A second script
 * runs with ATEN_CPU_CAPABILITY=avx512, torch's AVX-512 kernels. */
enum { P_NUMPY, P_TORCH, P_TORCH_STATS, P_TORCH512, P_TORCH512_STATS, N_PEERS };
static const char *const peer_label[N_PEERS] = {
    "numpy linalg.norm(axis=1)", "torch vector_norm (default dispatch)",
    "torch same statistics (default dispatch)", "torch vector_norm (avx512)",
    "torch same statistics (avx512)" };
static const char *const peer_word[N_PEERS] = { "numpy", "torch", "torch-stats", "torch",
                                                "torch-stats" };

typedef struct paired {
    int valid, n;
    summary ratio, rd, peer, peer_wall; /* ratio per pair; GB/s of each side */
} paired;
static paired pairs_res[N_PEERS];
static char peers_note[256] = "--no-peers";
static char torch_capability[2][32]; /* what torch says it dispatches to */

#define PAIR_CALLS 3

/* Starts the script with --serve (with ATEN_CPU_CAPABILITY=avx512 when
 * avx512); 0 and the two streams, or -1. */
static int start_server(const char *python, int avx512, FILE **to, FILE **from, pid_t *pid)
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
        if (avx512)
            setenv("ATEN_CPU_CAPABILITY", "avx512", 1);
        else
            unsetenv("ATEN_CPU_CAPABILITY");
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

/* One turn of the peer: the median of its PAIR_CALLS calls by each clock;
 * 0, or -1 when the script does not answer. */
static int peer_turn(FILE *to, FILE *from, const char *name, span *med)
{
    char line[1024];
    fprintf(to, "%s %d\n", name, PAIR_CALLS);
    fflush(to);
    if (!fgets(line, sizeof line, from) || strncmp(line, "times ", 6) != 0)
        return -1;
    double c[PAIR_CALLS], w[PAIR_CALLS];
    char *p = line + 6, *end;
    for (int k = 0; k < PAIR_CALLS; k++) {
        c[k] = strtod(p, &end);
        if (end == p || !(c[k] > 0))
            return -1;
        w[k] = strtod(p = end, &end);
        if (end == p || !(w[k] > 0))
            return -1;
        p = end;
    }
    med->cpu = summarize(c, PAIR_CALLS).med;
    med->wall = summarize(w, PAIR_CALLS).med;
    return 0;
}

/* One turn of resdiag's active path: the median CPU seconds of PAIR_CALLS. */
static double resdiag_turn(const resdiag_tensor *t, double *norms, const rd_sketch_params *sp)
{
    double f[RESDIAG_N_FIELDS], sk[16], v[PAIR_CALLS];
    rd_stats_compute(f, sk, norms, t, sp); /* warm-up */
    for (int c = 0; c < PAIR_CALLS; c++) {
        double c0 = thread_cpu();
        rd_stats_compute(f, sk, norms, t, sp);
        v[c] = thread_cpu() - c0;
        sink += f[RESDIAG_FIELD_FROB];
    }
    return summarize(v, PAIR_CALLS).med;
}

/* Starts the script (trying each python); the words of its "ready" line
 * in ready, or -1. */
static int open_server(int avx512, FILE **to, FILE **from, pid_t *pid, char *ready, size_t n)
{
    static const char *const pythons[] = { "/usr/bin/python3", "python3" };
    for (size_t p = 0; p < sizeof pythons / sizeof pythons[0]; p++) {
        if (start_server(pythons[p], avx512, to, from, pid) != 0)
            continue;
        ready[0] = 0;
        while (fgets(ready, (int)n, *from) && strncmp(ready, "ready", 5) != 0)
            ;
        if (!strncmp(ready, "ready", 5)) {
            snprintf(peers_note, sizeof peers_note, "%s", pythons[p]);
            return 0;
        }
        stop_server(*to, *from, *pid);
    }
    return -1;
}

static void pair_peer(int w, FILE *to, FILE *from, const resdiag_tensor *t, double *norms,
                      const rd_sketch_params *sp, size_t bytes, int npairs)
{
    double ratio[MAX_REPS], rd_gbs[MAX_REPS], peer_gbs[MAX_REPS], peer_wall[MAX_REPS];
    int n = 0;
    for (int k = 0; k < npairs; k++) {
        double rd_s = -1.0;
        span peer = { -1.0, -1.0 };
        for (int side = 0; side < 2; side++) {
            if ((side ^ (k & 1)) == 0)
                rd_s = resdiag_turn(t, norms, sp);
            else if (peer_turn(to, from, peer_word[w], &peer) != 0)
                break;
        }
        if (rd_s <= 0 || peer.cpu <= 0)
            break;
        rd_gbs[n] = (double)bytes / rd_s / 1e9;
        peer_gbs[n] = (double)bytes / peer.cpu / 1e9;
        peer_wall[n] = (double)bytes / peer.wall / 1e9;
        ratio[n] = peer.cpu / rd_s;
        n++;
    }
    if (n == 0) {
        printf("  %s: the script stopped answering\n", peer_label[w]);
        return;
    }
    paired *r = &pairs_res[w];
    *r = (paired){ 1, n, summarize(ratio, n), summarize(rd_gbs, n), summarize(peer_gbs, n),
                   summarize(peer_wall, n) };
    printf("  %-42s %6.2fx [%.2f-%.2f] over %2d pairs; resdiag %.2f GB/s [%.2f-%.2f], peer "
           "%.2f GB/s [%.2f-%.2f] (wall %.2f)\n", peer_label[w], r->ratio.med, r->ratio.min,
           r->ratio.max, n, r->rd.med, r->rd.min, r->rd.max, r->peer.med, r->peer.min,
           r->peer.max, r->peer_wall.med);
}

static void bench_peer_pairs(int npairs)
{
    const size_t bytes = (size_t)24 * (size_t)MIB;
    const int64_t rows = (int64_t)(bytes / (4 * (size_t)bench_cols));
    printf("\n== peers paired with resdiag %s (f32 24 MiB, 1 thread): each pair one turn of "
           "resdiag and one of the peer (order alternating), a turn = warm-up + median of %d "
           "calls; ratio = the peer's CPU time / resdiag's per pair (how many times faster "
           "resdiag is), median [min-max]; GB/s by the thread's CPU clock ==\n",
           rd_stats_path_name(rd_stats_active_path()), PAIR_CALLS);
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
    rd_sketch_params sp = { 16, tau, (size_t)bench_cols + 1, 0x5eed, 0, 0 };
    resdiag_tensor t = resdiag_tensor_make(buf, RESDIAG_DTYPE_F32, rows, bench_cols, 0);
    signal(SIGPIPE, SIG_IGN); /* a script that dies makes fprintf fail, not the bench */
    for (int avx512 = 0; avx512 < 2; avx512++) {
        FILE *to = NULL, *from = NULL;
        pid_t pid = -1;
        char ready[512];
        if (open_server(avx512, &to, &from, &pid, ready, sizeof ready) != 0) {
            snprintf(peers_note, sizeof peers_note, "no python3 with numpy or torch");
            printf("  (%s)\n", peers_note);
            break;
        }
        char *cap = strstr(ready, "capability=");
        snprintf(torch_capability[avx512], sizeof torch_capability[avx512], "%.*s",
                 cap ? (int)strcspn(cap + 11, " \n") : 1, cap ? cap + 11 : "?");
        printf("  script %s%s: %s", peers_note, avx512 ? " with ATEN_CPU_CAPABILITY=avx512" : "",
               ready + 6);
        for (int w = avx512 ? P_TORCH512 : P_NUMPY; w <= (avx512 ? P_TORCH512_STATS : P_TORCH_STATS);
             w++) {
            char word[32];
            snprintf(word, sizeof word, " %s ", peer_word[w]);
            char padded[520];
            snprintf(padded, sizeof padded, " %s ", ready);
            padded[strcspn(padded, "\n")] = ' ';
            if (strstr(padded, word))
                pair_peer(w, to, from, &t, norms, &sp, bytes, npairs);
        }
        stop_server(to, from, pid);
    }
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
    double t0 = thread_cpu();
    for (int s = 0; s < steps; s++) {
        resdiag_step_begin(r, s);
        double h0 = thread_cpu();
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
        double h1 = thread_cpu();
        resdiag_step_end(r);
        t_end += thread_cpu() - h1;
        t_hooks += h1 - h0;
    }
    resdiag_status st = resdiag_close(r);
    double total = thread_cpu() - t0; /* the final flush included */
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
            /* appending every step costs ~10 ms here: fewer steps for it */
            int steps = (layer_counts[a] == 12 ? 1280 : 256) / (quick ? 4 : 1) /
                        (flushes[b] == 1 ? 4 : 1);
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
/* hook_threads = 2 against 1, through the public API                        */
/* ------------------------------------------------------------------------ */

/* Two runs open at once, hook_threads 1 and 2, the same 32 MiB f32
 * tensor observed at one site per step, the two alternating (order
 * swapped every repetition). A speed-up over threads shows only in wall
 * time (the thread's CPU clock misses the second thread, and the
 * process's counts both): the speed-up is per repetition, wall of 1
 * thread over wall of 2, median [min-max]; the process CPU time says what
 * the second thread costs. On a machine whose other core is busy, the
 * wall clock of 2 threads measures that load too: the load average is in
 * the target line. */
static int hook_valid;
static summary hook_speedup, hook_wall_ms[2], hook_cpu_ms[2];
static char hook_note[256] = "not measured (--no-hook)";

static double process_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_hook_threads(int reps)
{
    enum { C = 1024, ROWS = 32 * 1024 * 1024 / (4 * C) };
    static const char *const subs[] = { "block" };
    printf("\n== hook_threads: one 32 MiB f32 tensor (%d x %d) observed at stream_out per "
           "step, runs with hook_threads = 1 and 2 alternating; %d repetitions ==\n", ROWS, C,
           reps);
    char dir[] = "/tmp/resdiag-bench-XXXXXX";
    float *x = aligned_alloc(4096, (size_t)ROWS * C * sizeof *x);
    if (!x || !mkdtemp(dir)) {
        snprintf(hook_note, sizeof hook_note, "not measured (no memory or temporary directory)");
        printf("  %s\n", hook_note);
        free(x);
        return;
    }
    int saved_cols = bench_cols;
    bench_cols = C; /* fill's per-row scales */
    fill(x, (size_t)ROWS * C * sizeof *x, RESDIAG_DTYPE_F32);
    bench_cols = saved_cols;
    resdiag *r[2] = { NULL, NULL };
    char path[2][600];
    int ok = 1;
    for (int h = 0; h < 2; h++) {
        resdiag_model m = bench_model(1, C, 1, subs, 0, NULL, 0, NULL);
        resdiag_options o;
        resdiag_options_init(&o);
        o.hook_threads = h + 1;
        o.flush_steps = 1024;
        o.flush_seconds = 0;
        snprintf(path[h], sizeof path[h], "%s/hook-%d.h5", dir, h + 1);
        ok = ok && resdiag_open(&r[h], path[h], &m, &o) == RESDIAG_OK;
    }
    resdiag_tensor t = resdiag_f32(x, ROWS, C);
    double wall[2][MAX_REPS], cpu[2][MAX_REPS], speedup[MAX_REPS];
    for (int rep = -1; rep < reps && ok; rep++)
        for (int k = 0; k < 2 && ok; k++) {
            int h = k ^ (rep & 1);
            ok = resdiag_step_begin(r[h], rep + 1) == RESDIAG_OK;
            double w0 = now(), c0 = process_cpu();
            ok = ok && RESDIAG_FWD(r[h], 0, 0, RESDIAG_STREAM_OUT, t) == RESDIAG_OK;
            double w = now() - w0, c = process_cpu() - c0;
            ok = ok && resdiag_step_end(r[h]) == RESDIAG_OK;
            if (rep >= 0)
                wall[h][rep] = 1e3 * w, cpu[h][rep] = 1e3 * c;
        }
    for (int h = 0; h < 2; h++) {
        if (r[h] && resdiag_close(r[h]) != RESDIAG_OK)
            ok = 0;
        resdiag_destroy(r[h]);
        remove(path[h]);
    }
    rmdir(dir);
    free(x);
    if (!ok) {
        snprintf(hook_note, sizeof hook_note, "not measured (the run could not be written)");
        printf("  %s\n", hook_note);
        return;
    }
    for (int k = 0; k < reps; k++)
        speedup[k] = wall[0][k] / wall[1][k];
    for (int h = 0; h < 2; h++) {
        hook_wall_ms[h] = summarize(wall[h], reps);
        hook_cpu_ms[h] = summarize(cpu[h], reps);
        printf("  hook_threads=%d: wall %.2f ms [%.2f-%.2f], process CPU %.2f ms [%.2f-%.2f] "
               "per hook (%.2f GB/s by the wall clock)\n", h + 1, hook_wall_ms[h].med,
               hook_wall_ms[h].min, hook_wall_ms[h].max, hook_cpu_ms[h].med, hook_cpu_ms[h].min,
               hook_cpu_ms[h].max, 32.0 * MIB / hook_wall_ms[h].med / 1e6);
    }
    hook_speedup = summarize(speedup, reps);
    hook_valid = 1;
    printf("  speed-up (wall, per repetition): %.2fx [%.2f-%.2f]\n", hook_speedup.med,
           hook_speedup.min, hook_speedup.max);
}

/* ------------------------------------------------------------------------ */
/* The fixed-cost scenario (scripts/bench-callgrind.sh)                      */
/* ------------------------------------------------------------------------ */

/* `steps` steps of a 12-layer model, two sublayers, every block site
 * forward and backward on 4 x 64 f32 tensors, two parameter gradients per
 * layer, flush_steps 64: the costs that do not grow with the tensor.
 * Prints how many calls of each public function it made, which the script
 * divides callgrind's instruction counts by. */
static int fixed_cost_scenario(int steps)
{
    enum { C = 64, T = 4, LAYERS = 12 };
    static float x[T * C];
    for (int k = 0; k < T * C; k++)
        x[k] = (float)rnd_normal();
    static const char *const subs[] = { "attn", "mlp" };
    static const char *const lp[] = { "attn.wo", "mlp.w2" };
    resdiag_model m = bench_model(LAYERS, C, 2, subs, 2, lp, 0, NULL);
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 64;
    o.flush_seconds = 0;
    char dir[] = "/tmp/resdiag-bench-XXXXXX", path[600];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/fixed.h5", dir);
    resdiag *r = NULL;
    long observes = 0, grads = 0;
    int ok = resdiag_open(&r, path, &m, &o) == RESDIAG_OK;
    resdiag_tensor t = resdiag_f32(x, T, C);
    for (int s = 0; s < steps && ok; s++) {
        ok = resdiag_step_begin(r, s) == RESDIAG_OK;
        for (int dir_ = 0; dir_ < 2; dir_++)
            for (int l = 0; l < LAYERS; l++)
                for (int sub = 0; sub < 2; sub++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++, observes++)
                        ok = ok && resdiag_observe_at(r, (resdiag_direction)dir_, l, sub,
                                                      (resdiag_site)site, t, __FILE__,
                                                      __LINE__) == RESDIAG_OK;
        for (int l = 0; l < LAYERS; l++)
            for (int p = 0; p < 2; p++, grads++)
                ok = ok && resdiag_param_grad_at(r, l, lp[p], t, __FILE__, __LINE__) ==
                               RESDIAG_OK;
        ok = ok && resdiag_step_end(r) == RESDIAG_OK;
    }
    ok = r && resdiag_close(r) == RESDIAG_OK && ok;
    resdiag_destroy(r);
    remove(path);
    rmdir(dir);
    printf("calls resdiag_step_begin %d\ncalls resdiag_observe_at %ld\n"
           "calls resdiag_param_grad_at %ld\ncalls resdiag_step_end %d\n", steps, observes,
           grads, steps);
    return ok ? 0 : 1;
}

/* --long: the instruction counts of scripts/bench-callgrind.sh (about a
 * minute under valgrind), its lines as they come. */
static void bench_callgrind(void)
{
    char cmd[1400];
    printf("\n== fixed per-call costs as instruction counts (scripts/bench-callgrind.sh: "
           "callgrind, deterministic) ==\n");
    snprintf(cmd, sizeof cmd, "command -v valgrind >/dev/null 2>&1 && bash %s/scripts/"
             "bench-callgrind.sh %s 2>&1", RD_BENCH_SOURCE_ROOT, RD_BENCH_BUILD_ROOT);
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    char line[512];
    int got = 0;
    while (f && fgets(line, sizeof line, f)) {
        printf("  %s", line);
        got = 1;
    }
    if (f)
        pclose(f);
    if (!got)
        printf("  not measured (valgrind is not installed)\n");
}

/* ------------------------------------------------------------------------ */
/* The machine's load                                                        */
/* ------------------------------------------------------------------------ */

/* "1-min 5-min 15-min" from /proc/loadavg, or "unknown". */
static void load_average(char *out, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a[3];
    if (f && fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]) == 3)
        snprintf(out, n, "%.2f %.2f %.2f", a[0], a[1], a[2]);
    else
        snprintf(out, n, "unknown");
    if (f)
        fclose(f);
}

/* ------------------------------------------------------------------------ */
/* End to end: tinygpt with and without recording                            */
/* ------------------------------------------------------------------------ */

static double e2e_overhead = NAN; /* fraction of tokens/s lost: the step-interleaved figure */
/* The same from the time tinygpt measured inside resdiag: a direct reading
 * that the interleaving cannot bias low (a recorded step that slows the
 * unrecorded one after it would hide that cost from the first figure). */
static double e2e_inside = NAN;
static int e2e_steps = 0;         /* --e2e-steps: 0 = 65 (--quick: 17, --long: 257) */
static char e2e_note[768] = "not measured (--no-e2e)";

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
    double in_rd;   /* s, the process's CPU time inside resdiag calls */
    double in_wall; /* s, their wall time (printed beside it) */
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
                 sscanf(line, "%d %d %lf %lf %lf %d %lf", &e.step, &e.recorded, &e.cpu, &wall,
                        &e.in_wall, &e.flushed, &e.in_rd) == 7)
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
    double in_ms, in_share, in_write_ms, in_lost; /* inside libresdiag, CPU */
    double in_wall_ms;                            /* ... its wall time */
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
     * close, spread over all recorded steps. CPU time, as the targets
     * are judged: a preemption inside a hook adds a time slice to its
     * wall time (the wall figure is printed beside it). */
    for (int k = FIRST; k < n; k++)
        if (s[k].recorded && !s[k].flushed) {
            tmp[ni] = s[k].in_rd / (s[k].cpu - s[k].in_rd);
            tmp2[ni++] = s[k].in_rd;
        }
    double q = median_of(tmp, ni), in_med = median_of(tmp2, ni);
    for (int k = FIRST, i = 0; k < n; k++)
        if (s[k].recorded && !s[k].flushed)
            tmp[i++] = s[k].in_wall;
    e->in_wall_ms = 1e3 * median_of(tmp, ni);
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
static void e2e_interleaved(const char *exe, const char *dir, int mode, char *summary_out,
                            size_t summary_len)
{
    /* step 0 is written at once, then every flush_steps recorded steps:
     * with 2 * flush * k + 1 steps every write falls in a timed step and
     * none is left for the close (--flush-seconds 0: no write by the clock,
     * which would flush each recorded step of a slow machine). 257
     * steps, ~1 min: three 129-step runs gave -0.2%, 0.2% and 1.7% here,
     * one 513-step run 0.9% [0.5% .. 1.2%]. */
    int flush = mode == 0 && !e2e_steps ? 8 : 16, groups = mode == 0 ? 1 : mode == 1 ? 2 : 8;
    if (e2e_steps > 0) /* rounded up to whole groups */
        groups = (e2e_steps - 1 + 2 * flush - 1) / (2 * flush);
    int steps = 2 * flush * (groups > 0 ? groups : 1) + 1;
    char cmd[2200], times[700], h5[700];
    snprintf(times, sizeof times, "%s/steps.txt", dir);
    snprintf(h5, sizeof h5, "%s/e2e.h5", dir);
    snprintf(cmd, sizeof cmd,
             "%s --threads 1 --steps %d --record full --record-every 2 --flush-steps %d --flush-seconds 0 "
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
    printf("  inside libresdiag (third estimate, same run): %.2f ms CPU per recorded step "
           "(%.2f%% of it; medians; wall %.2f ms), +%.2f ms per write -> %.2f%% fewer "
           "tokens/s\n", e.in_ms, 100.0 * e.in_share, e.in_wall_ms, e.in_write_ms,
           100.0 * e.in_lost);
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

/* The hooks' share of the wall time against their share of the CPU time
 * (hook-wall-share-vs-cpu-share): an OpenMP trainer on 2 threads whose
 * hooks run on 1 thread takes a larger share of the wall time in them
 * than of the CPU time; the hooks' work spread over the OpenMP threads
 * should make the two shares equal. tinygpt with activations of 1 MiB
 * (4096 tokens x 64, f32: the size from which a hook splits a tensor),
 * every site recorded every step, in three configurations in alternating
 * processes: --hook-threads 1, --hook-threads 2 (the library's pool, which
 * wakes a worker per part) and --hook-team on (each hook a team call of
 * the 2 OpenMP threads from a parallel region: no thread to wake), on
 * which the target is judged, with OMP_WAIT_POLICY=passive: on a machine
 * whose cores other processes share, an OpenMP thread that spins between
 * regions is preempted, and the next region (each team hook is one) waits
 * a time slice for it (5 ms a region here, against 20 us for a thread
 * woken from a passive wait); the team with OpenMP's default policy is
 * printed too. */
enum { SHARE_CONFIGS = 4, SHARE_TEAM = 2 };
static double share_ratio[SHARE_CONFIGS] = { NAN, NAN, NAN, NAN }; /* median wall / CPU */
static char share_note[SHARE_CONFIGS][512] = { "not measured (--no-e2e)",
                                               "not measured (--no-e2e)",
                                               "not measured (--no-e2e)",
                                               "not measured (--no-e2e)" };

/* The recorded steps of a --step-times file after step 0 (its first write
 * and warm-up): their shares of wall and CPU time inside resdiag and
 * their parallelism (CPU / wall), appended at *n (up to MAX_REPS). */
static int read_shares(const char *path, double *wall_share, double *cpu_share,
                       double *par, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        int step, rec, fl;
        double cpu, wall, in_rd, rd_cpu;
        if (line[0] == '#' || sscanf(line, "%d %d %lf %lf %lf %d %lf", &step, &rec, &cpu,
                                     &wall, &in_rd, &fl, &rd_cpu) != 7)
            continue;
        if (step == 0 || !rec || fl || *n >= MAX_REPS || !(cpu > 0 && wall > 0))
            continue;
        wall_share[*n] = in_rd / wall;
        cpu_share[*n] = rd_cpu / cpu;
        par[*n] = cpu / wall;
        (*n)++;
        got++;
    }
    fclose(f);
    return got;
}

static void e2e_hook_share(const char *exe, const char *dir, int mode)
{
    const int steps = mode == 0 ? 5 : mode == 1 ? 9 : 17, rounds = mode == 0 ? 1 : 2;
    double ws[SHARE_CONFIGS][MAX_REPS], cs[SHARE_CONFIGS][MAX_REPS], par[SHARE_CONFIGS][MAX_REPS];
    int n[SHARE_CONFIGS] = { 0, 0, 0, 0 };
    static const char *const config_env[SHARE_CONFIGS] = { "", "", "OMP_WAIT_POLICY=passive ",
                                                           "" };
    static const char *const config_args[SHARE_CONFIGS] = {
        "--hook-threads 1", "--hook-threads 2", "--hook-team on", "--hook-team on" };
    static const char *const config_names[SHARE_CONFIGS] = {
        "hook_threads 1", "hook_threads 2", "hook team of 2, OMP_WAIT_POLICY=passive",
        "hook team of 2, OpenMP's default wait policy" };
    char times[700], h5[700], cmd[2200], load0[64], load1[64];
    snprintf(times, sizeof times, "%s/share.txt", dir);
    snprintf(h5, sizeof h5, "%s/share.h5", dir);
    load_average(load0, sizeof load0);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < SHARE_CONFIGS; k++) {
            const int h = (k + r) % SHARE_CONFIGS; /* each round starts with the next */
            snprintf(cmd, sizeof cmd,
                     "%s%s --threads 2 %s --layers 2 --d-model 64 --seq 64 "
                     "--batch 64 --steps %d --record full --log-every 1000 --out %s "
                     "--overwrite --step-times %s 2>&1", config_env[h], exe, config_args[h],
                     steps, h5, times);
            double cpu_tps;
            if (run_tokens_per_s(cmd, &cpu_tps) <= 0 ||
                !read_shares(times, ws[h], cs[h], par[h], &n[h])) {
                for (int c = 0; c < SHARE_CONFIGS; c++)
                    snprintf(share_note[c], sizeof share_note[c],
                             "not measured (tinygpt failed: %.300s)", cmd);
                remove(times);
                remove(h5);
                printf("  hook shares: %s\n", share_note[0]);
                return;
            }
        }
    remove(times);
    remove(h5);
    load_average(load1, sizeof load1);
    printf("  hook shares: tinygpt --threads 2 --layers 2 --d-model 64 --seq 64 --batch 64 "
           "--record full (1 MiB activations), --hook-threads 1, --hook-threads 2 and "
           "--hook-team on (OMP_WAIT_POLICY=passive, and OpenMP's default) in %d "
           "alternating processes each; load average %s at the start, %s at the end\n",
           rounds, load0, load1);
    for (int h = 0; h < SHARE_CONFIGS; h++) {
        summary w = summarize(ws[h], n[h]), c = summarize(cs[h], n[h]);
        summary p = summarize(par[h], n[h]);
        share_ratio[h] = w.med / c.med;
        snprintf(share_note[h], sizeof share_note[h],
                 "%.2fx (%s: wall share %.2f%% [%.2f-%.2f], CPU share %.2f%% "
                 "[%.2f-%.2f], medians over %d recorded steps; the steps ran %.2f threads "
                 "on average [%.2f-%.2f] of the 2 they have; load average %s / %s)",
                 share_ratio[h], config_names[h], 100.0 * w.med, 100.0 * w.min, 100.0 * w.max,
                 100.0 * c.med, 100.0 * c.min, 100.0 * c.max, n[h], p.med, p.min, p.max,
                 load0, load1);
        printf("    %s\n", share_note[h]);
    }
}

/* mode: 0 --quick, 1 default, 2 --long (the paired processes too) */
static void bench_e2e(int mode)
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
    e2e_interleaved(exe, dir, mode, inside, sizeof inside);
    e2e_hook_share(exe, dir, mode);
    if (mode == 2)
        e2e_paired(exe, dir, 0, paired, sizeof paired);
    else
        snprintf(paired, sizeof paired, "paired processes not run (--long runs them)");
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
static char html_note[512] = "not measured (resdiag report not built yet)";
static double report_s_100k = NAN, report_mib = NAN, report_growth = NAN;
static double html_s_100k = NAN, html_mib = NAN;

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

/* Runs `resdiag report path` (with --html html_out when html_out is not
 * NULL); 0 with its wall and CPU seconds (user + system, the child's) and
 * peak RSS (MiB), or -1. */
static int time_report(const char *tool, const char *path, const char *html_out, span *t,
                       double *mib)
{
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        if (html_out)
            execl(tool, tool, "report", "--html", html_out, path, (char *)NULL);
        else
            execl(tool, tool, "report", path, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    t->wall = now() - t0;
    t->cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    *mib = (double)ru.ru_maxrss / 1024.0;
    return 0;
}

/* The figures of one kind of report (text, html) at both sizes. */
typedef struct report_fig {
    double cpu[2], wall[2], mib[2]; /* medians of 3; the peak of 3 */
} report_fig;

/* Times 3 reports of path of each kind; 0, or -1 if one failed. */
static int time_reports(const char *tool, const char *path, const char *html, int k,
                        report_fig *fig)
{
    for (int kind = 0; kind < 2; kind++) {
        double c[3], w[3], m = 0.0;
        for (int rep = 0; rep < 3; rep++) {
            span t;
            double mb;
            if (time_report(tool, path, kind ? html : NULL, &t, &mb) != 0)
                return -1;
            c[rep] = t.cpu, w[rep] = t.wall, m = fmax(m, mb);
        }
        fig[kind].cpu[k] = summarize(c, 3).med;
        fig[kind].wall[k] = summarize(w, 3).med;
        fig[kind].mib[k] = m;
    }
    remove(html);
    return 0;
}

static void bench_report(int long_run)
{
    char tool[600];
    snprintf(tool, sizeof tool, "%s/resdiag", RD_BENCH_BUILD_ROOT);
    printf("\n== resdiag report and report --html on a synthetic 96-layer run (full records "
           "at the first and last step, embed_out + stream_out per layer at every other "
           "step); CPU = the child's user + system time, median of 3 ==\n");
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
    /* Two sizes, 4x apart: the reports of the larger one are the targets
     * (--long: the 100,000-step file, ~3 GB and minutes to write); the
     * ratio of their times checks that the time grows at most linearly. */
    const int steps[2] = { long_run ? 25000 : 2000, long_run ? 100000 : 8000 };
    report_fig fig[2]; /* text, html */
    double wsecs[2] = { 0, 0 }, gb[2] = { 0, 0 };
    int ok = 1;
    for (int k = 0; k < 2 && ok; k++) {
        char path[700], html[720];
        snprintf(path, sizeof path, "%s/long-%d.h5", dir, steps[k]);
        snprintf(html, sizeof html, "%s.html", path);
        ok = write_long_run(path, steps[k], &wsecs[k]) == 0;
        if (ok) {
            struct stat sb;
            gb[k] = stat(path, &sb) == 0 ? (double)sb.st_size / 1e9 : -1;
            /* the file was just written: no report reads a cold page cache */
            ok = time_reports(tool, path, html, k, fig) == 0;
        }
        if (ok)
            for (int kind = 0; kind < 2; kind++)
                printf("  %6d steps x 96 layers (file %.2f GB, written in %.1f s): report%s "
                       "CPU %.3f s, wall %.3f s, peak RSS %.1f MiB\n", steps[k], gb[k],
                       wsecs[k], kind ? " --html" : "", fig[kind].cpu[k], fig[kind].wall[k],
                       fig[kind].mib[k]);
        remove(path);
    }
    rmdir(dir);
    if (!ok) {
        snprintf(report_note, sizeof report_note, "not measured (writing or reporting failed)");
        snprintf(html_note, sizeof html_note, "%s", report_note);
        printf("  %s\n", report_note);
        return;
    }
    report_growth = fig[0].cpu[1] / fig[0].cpu[0];
    printf("  growth of the text report: %.2fx CPU time for %.1fx steps x layers\n",
           report_growth, (double)steps[1] / steps[0]);
    report_mib = fig[0].mib[1];
    html_mib = fig[1].mib[1];
    if (!long_run) {
        snprintf(report_note, sizeof report_note,
                 "not measured at 100,000 steps (the file takes minutes to write: run with "
                 "--long; here %.3f s CPU, %.0f MiB at %d steps; time x%.2f for x4 steps)",
                 fig[0].cpu[1], fig[0].mib[1], steps[1], report_growth);
        snprintf(html_note, sizeof html_note,
                 "not measured at 100,000 steps (run with --long; here %.3f s CPU, %.0f MiB "
                 "at %d steps)", fig[1].cpu[1], fig[1].mib[1], steps[1]);
        return;
    }
    report_s_100k = fig[0].cpu[1];
    html_s_100k = fig[1].cpu[1];
    snprintf(report_note, sizeof report_note,
             "%.3f s CPU (wall %.3f s) and %.0f MiB peak RSS on a real 100,000-step x 96-layer "
             "file (%.2f GB); time x%.2f for x4 steps (25,000 -> 100,000)", fig[0].cpu[1],
             fig[0].wall[1], fig[0].mib[1], gb[1], report_growth);
    snprintf(html_note, sizeof html_note,
             "%.3f s CPU (wall %.3f s) and %.0f MiB peak RSS on the same file", fig[1].cpu[1],
             fig[1].wall[1], fig[1].mib[1]);
}

/* ------------------------------------------------------------------------ */
/* Targets                                                                   */
/* ------------------------------------------------------------------------ */

static void target(const char *name, const char *measured, const char *goal, int met)
{
    printf("target %s: measured %s, goal %s, %s\n", name, measured, goal,
           met ? "met" : "missed");
}

static void not_measured(const char *name, const char *why)
{
    printf("target %s: not measured (%s)\n", name, why);
}

/* A kernel against its ceiling: the per-repetition CPU-time ratio. */
static void kernel_target(const char *name, int si, int d, int m, double goal)
{
    const kresult *k = &kres[si][d][m];
    char g[32], meas[256];
    snprintf(g, sizeof g, ">= %.2fx", goal);
    if (!k->valid) {
        not_measured(name, kernel_reps == 0 ? "--no-kernels"
                           : si == SIZE_256 ? "256 MiB is not run with --quick"
                                            : "the path does not run on this CPU");
        return;
    }
    snprintf(meas, sizeof meas, "%.2fx [%.2f-%.2f] of the %s ceiling (%s %.2f GB/s CPU, "
             "median of %d interleaved repetitions)", k->ratio.med, k->ratio.min, k->ratio.max,
             ceiling_label(k->ceil_isa), method_name(m, bench_dts[d]), k->cpu_gbs.med,
             kernel_reps);
    target(name, meas, g, k->ratio.med >= goal);
}

/* The current kernel against the one-row reference of the same width (f32),
 * per repetition the reference's CPU time over the kernel's: >= 1.0x is no
 * slower than the loop it replaced. */
static void ref_target(const char *name, int si, int m, int ref)
{
    const kresult *k = &kres[si][0][m], *r = &kres[si][0][ref];
    if (!k->valid || !r->valid) {
        not_measured(name, kernel_reps == 0 ? "--no-kernels"
                           : si == SIZE_256 ? "256 MiB is not run with --quick"
                                            : "the path does not run on this CPU");
        return;
    }
    double v[MAX_REPS];
    for (int i = 0; i < kernel_reps; i++)
        v[i] = r->cpu[i] / k->cpu[i];
    summary q = summarize(v, kernel_reps);
    char meas[320], mn[64];
    snprintf(mn, sizeof mn, "%s", method_name(m, RESDIAG_DTYPE_F32));
    snprintf(meas, sizeof meas, "%.2fx [%.2f-%.2f] the one-row loop's speed (%s %.2f vs %s "
             "%.2f GB/s CPU, median of %d interleaved repetitions)", q.med, q.min, q.max,
             mn, k->cpu_gbs.med, method_name(ref, RESDIAG_DTYPE_F32),
             r->cpu_gbs.med, kernel_reps);
    target(name, meas, ">= 1.00x", q.med >= 1.0);
}

static void peer_target(const char *name, int w, double goal)
{
    char g[32], meas[320];
    snprintf(g, sizeof g, ">= %.1fx", goal);
    const paired *q = &pairs_res[w];
    if (!q->valid) {
        not_measured(name, peers_note);
        return;
    }
    snprintf(meas, sizeof meas, "%.2fx [%.2f-%.2f] (peer CPU time / resdiag's, median of %d "
             "interleaved pairs; resdiag %.2f vs %.2f GB/s, f32 24 MiB, 1 thread)",
             q->ratio.med, q->ratio.min, q->ratio.max, q->n, q->rd.med, q->peer.med);
    target(name, meas, g, q->ratio.med >= goal);
}

static fs_result size_res; /* file_size.c */
static dfl_result deflate_res; /* deflate.c */

static void print_targets(const char *load_start)
{
    char load_end[64], m[1024];
    load_average(load_end, sizeof load_end);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("\n== targets, judged on medians by the thread's CPU clock; active kernel path: "
           "%s ==\n", rd_stats_path_name(rd_stats_active_path()));
    printf("load average (1, 5, 15 min): start %s, end %s (%ld CPUs)\n", load_start, load_end,
           ncpu);
    static const char *const dnames[3] = { "f32", "bf16", "f16" };
    /* every kernel target on every vector path the CPU has, by name (the
     * same figures whatever RESDIAG_DISABLE_AVX512 says), so an AVX2-only
     * CPU's figures show here too; the path is in the name and the line */
    for (int p = RD_STATS_N_PATHS - 1; p >= RD_STATS_AVX2; p--) {
        const char *pn = rd_stats_path_name((rd_stats_path)p);
        int m = M_PATH0 + p, avx512 = p == RD_STATS_AVX512;
        for (int d = 0; d < 3; d++)
            for (int si = SIZE_L2; si <= SIZE_L3; si++) {
                char name[64];
                snprintf(name, sizeof name, "%s-%s-%s", dnames[d], size_label[si], pn);
                /* from cache: f32 0.6, bf16/f16 0.45 on AVX2; AVX-512 0.7 / 0.55 */
                double g = d == 0 ? (avx512 ? 0.7 : 0.6) : (avx512 ? 0.55 : 0.45);
                kernel_target(name, si, d, m, g);
            }
        for (int d = 0; d < 3; d++)
            for (int si = SIZE_24; si < N_SIZES; si++) {
                char name[64];
                snprintf(name, sizeof name, "%s-%s-%s", dnames[d], size_label[si], pn);
                kernel_target(name, si, d, m, 0.9);
            }
        for (int si = SIZE_24; si < N_SIZES; si++) {
            char name[64];
            snprintf(name, sizeof name, "f32-%s-%s-vs-one-row", size_label[si], pn);
            ref_target(name, si, m, M_REF0 + (avx512 ? REF_AVX512 : REF_AVX2));
        }
    }
    if (ipe_on)
        ipe_print(bench_cols);
    else
        printf("ipe: not measured (--quick, or --no-kernels)\n");
    peer_target("f32-vs-numpy", P_NUMPY, 2.5);
    peer_target("f32-vs-torch-vector-norm-default", P_TORCH, 1.2);
    peer_target("f32-vs-torch-vector-norm-avx512", P_TORCH512, 1.2);
    peer_target("f32-vs-torch-same-stats-default", P_TORCH_STATS, 4.0);
    peer_target("f32-vs-torch-same-stats-avx512", P_TORCH512_STATS, 4.0);
    if (hook_valid) {
        snprintf(m, sizeof m, "%.2fx [%.2f-%.2f] (wall time per hook, 1 thread / 2 threads, "
                 "median of per-repetition ratios: %.2f vs %.2f ms; a speed-up over threads "
                 "does not show on a thread's CPU clock; the load average above counts)",
                 hook_speedup.med, hook_speedup.min, hook_speedup.max, hook_wall_ms[0].med,
                 hook_wall_ms[1].med);
        target("hook-2-threads-32MiB", m, ">= 1.6x", hook_speedup.med >= 1.6);
    } else {
        not_measured("hook-2-threads-32MiB", hook_note + (strncmp(hook_note, "not measured (", 14)
                                                              ? 0 : 14));
    }
    file_size_targets(&size_res);
    if (!isnan(html_s_100k)) {
        target("report-html-100k", html_note, "< 2 s and < 256 MiB",
               html_s_100k < 2.0 && html_mib < 256.0);
    } else {
        printf("target report-html-100k: %s\n", html_note);
    }
    if (!isnan(report_s_100k))
        target("report-100k", report_note, "< 2 s and < 256 MiB, time at most linear in steps",
               report_s_100k < 2.0 && report_mib < 256.0 && report_growth <= 4.0 * 1.25);
    else
        printf("target report-100k: %s\n", report_note);
    if (!isnan(e2e_inside)) {
        snprintf(m, sizeof m, "%.2f%% of a recorded step's time (writes and close amortised; "
                 "tinygpt --record full --record-every 2: each recorded step has every site; "
                 "the process's CPU time inside its resdiag calls, as tinygpt reads it around "
                 "them)", 100.0 * e2e_inside);
        target("tinygpt-time-in-resdiag", m, "<= 1%", e2e_inside <= 0.01);
    } else {
        printf("target tinygpt-time-in-resdiag: %s\n", e2e_note);
    }
    deflate_targets(&deflate_res, e2e_inside, load_end);
    if (!isnan(e2e_overhead)) {
        double worst = e2e_overhead;
        if (!isnan(e2e_inside) && !(e2e_inside <= worst))
            worst = e2e_inside;
        snprintf(m, sizeof m, "%s; judged on the larger of the step-interleaved and the "
                 "inside figure: %.2f%%", e2e_note, 100.0 * worst);
        target("tinygpt-overhead", m, "<= 2% fewer tokens/s", worst <= 0.02);
    } else {
        printf("target tinygpt-overhead: %s\n", e2e_note);
    }
    if (!isnan(share_ratio[SHARE_TEAM])) {
        snprintf(m, sizeof m, "%s; hook_threads 1: %.2fx, hook_threads 2: %.2fx, the team "
                 "with OpenMP's default wait policy: %.2fx", share_note[SHARE_TEAM],
                 share_ratio[0], share_ratio[1], share_ratio[3]);
        target("hook-wall-share-vs-cpu-share", m, "<= 1.2x", share_ratio[SHARE_TEAM] <= 1.2);
    } else {
        printf("target hook-wall-share-vs-cpu-share: %s\n", share_note[SHARE_TEAM]);
    }
    if (wres_worst_batched > 0) {
        snprintf(m, sizeof m, "%.3f us per record (the thread's CPU time; worst of 12 and 96 "
                 "layers, flush_steps=64; instruction counts: scripts/bench-callgrind.sh)",
                 wres_worst_batched);
        target("writer-per-record", m, "<= 2 us", wres_worst_batched <= 2.0);
    } else {
        not_measured("writer-per-record", "--no-writer");
    }
    target("no-hdf5-in-hooks", "hooks fill the step buffer only; HDF5 is called from "
           "step_end/flush/close (lib/record/steps.c)", "no HDF5 call inside a hook", 1);
}

static int usage(void)
{
    fprintf(stderr, "usage: resdiag-bench [--quick | --long] [--reps N] [--no-kernels] "
                    "[--no-peers] "
                    "[--no-hook] [--no-writer] [--no-e2e] [--no-report] [--no-size] [--no-deflate] "
                    "[--cols N] "
                    "[--e2e-steps N]\n"
                    "       resdiag-bench --fixed-cost STEPS\n"
                    "       resdiag-bench --ipe PATH DTYPE N COLS\n");
    return 2;
}

int main(int argc, char **argv)
{
    int mode = 1, kernels_on = 1, peers_on = 1, hook_on = 1, writer_on = 1, e2e_on = 1;
    int report_on = 1, size_on = 1, deflate_on = 1;
    int reps = 15;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--quick"))
            mode = 0;
        else if (!strcmp(argv[k], "--long"))
            mode = 2;
        else if (!strcmp(argv[k], "--no-kernels"))
            kernels_on = 0;
        else if (!strcmp(argv[k], "--no-peers"))
            peers_on = 0;
        else if (!strcmp(argv[k], "--no-hook"))
            hook_on = 0;
        else if (!strcmp(argv[k], "--no-writer"))
            writer_on = 0;
        else if (!strcmp(argv[k], "--no-e2e"))
            e2e_on = 0;
        else if (!strcmp(argv[k], "--no-report"))
            report_on = 0;
        else if (!strcmp(argv[k], "--no-size"))
            size_on = 0;
        else if (!strcmp(argv[k], "--no-deflate"))
            deflate_on = 0;
        else if (!strcmp(argv[k], "--reps") && k + 1 < argc && atoi(argv[k + 1]) >= 1)
            reps = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--cols") && k + 1 < argc && atoi(argv[k + 1]) >= 16)
            bench_cols = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--e2e-steps") && k + 1 < argc && atoi(argv[k + 1]) >= 5 &&
                 atoi(argv[k + 1]) <= E2E_MAX_STEPS - 64)
            e2e_steps = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--ipe") && k + 4 < argc) /* the scenario of ipe.c */
            return ipe_scenario(argv[k + 1], argv[k + 2], atol(argv[k + 3]), atoi(argv[k + 4]));
        else if (!strcmp(argv[k], "--fixed-cost") && k + 1 < argc && atoi(argv[k + 1]) >= 1)
            return fixed_cost_scenario(atoi(argv[++k]));
        else
            return usage();
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when redirected too */
    if (reps > MAX_REPS)
        reps = MAX_REPS;
    char load_start[64];
    load_average(load_start, sizeof load_start);

    printf("resdiag-bench: resdiag %s; kernel paths available:", resdiag_version_string());
    for (int p = 0; p < RD_STATS_N_PATHS; p++)
        if (rd_stats_path_available((rd_stats_path)p))
            printf(" %s", rd_stats_path_name((rd_stats_path)p));
    printf(" (hooks use %s); ceilings:", rd_stats_path_name(rd_stats_active_path()));
    for (int isa = 0; isa < CEIL_N_ISAS; isa++)
        if (ceiling_available(isa))
            printf(" %s", ceiling_isa_name(isa));
    printf("\n");
#ifdef RD_BENCH_OPENBLAS
    openblas_set_num_threads(1);
    printf("OpenBLAS: %s (1 thread)\n", openblas_get_config());
#else
    printf("OpenBLAS: not built in (libopenblas-dev not found at configure time)\n");
#endif
    printf("online CPUs: %ld; load average (1, 5, 15 min) at the start: %s\n",
           sysconf(_SC_NPROCESSORS_ONLN), load_start);
    fflush(stdout);

    if (kernels_on)
        bench_kernels(reps, mode == 0), ipe_on = mode != 0;
    if (peers_on)
        bench_peer_pairs(reps);
    if (hook_on)
        bench_hook_threads(reps);
    if (writer_on)
        bench_writer(mode == 0);
    if (writer_on && mode == 2)
        bench_callgrind();
    if (size_on)
        bench_file_size(RD_BENCH_BUILD_ROOT, mode == 0, &size_res);
    if (deflate_on)
        bench_deflate(RD_BENCH_BUILD_ROOT, mode == 0, &deflate_res);
    if (e2e_on)
        bench_e2e(mode);
    if (report_on) {
        bench_report(mode == 2);
    } else {
        snprintf(report_note, sizeof report_note, "not measured (--no-report)");
        snprintf(html_note, sizeof html_note, "not measured (--no-report)");
    }
    print_targets(load_start);
    return 0;
}
