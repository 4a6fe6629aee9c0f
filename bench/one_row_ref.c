/*
 * one_row_ref.c - the one-row reference kernel of one_row_ref.h: one pass
 * per row in AVX2 (8 lanes) or AVX-512 (16 lanes), the row's sums reduced
 * at its end, then the per-token moments in double, as the kernel before
 * the 16-row blocks did. Rows with NaN/Inf are not handled (the benchmark's
 * data is finite); the column of ABSMAX is found by a rescan of the row
 * that raised it, as before.
 */
#include "one_row_ref.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "resdiag.h"

int ref_available(int isa)
{
    __builtin_cpu_init();
    if (isa == REF_AVX512)
        return __builtin_cpu_supports("avx512f");
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* per-token accumulation across rows, in double */
typedef struct tok_acc {
    double sq, nsum, nsq, nmin, nmax, msum, msq, rsum, rsq, ssum, ssq, amax;
    int64_t amax_row;
} tok_acc;

static void tok_add(tok_acc *a, double sx, double sq, double amax, int64_t i, int64_t cols,
                    double *row_norms)
{
    double n = sqrt(sq), mean = sx / (double)cols, rms = n / sqrt((double)cols);
    double var = sq / (double)cols - mean * mean;
    double sd = var > 0 ? sqrt(var) : 0.0;
    if (row_norms)
        row_norms[i] = n;
    a->sq += sq;
    a->nsum += n, a->nsq += n * n;
    a->nmin = fmin(a->nmin, n), a->nmax = fmax(a->nmax, n);
    a->msum += mean, a->msq += mean * mean;
    a->rsum += rms, a->rsq += rms * rms;
    a->ssum += sd, a->ssq += sd * sd;
    if (amax > a->amax)
        a->amax = amax, a->amax_row = i;
}

static double sd_of(double s, double s2, double n)
{
    double v = s2 / n - (s / n) * (s / n);
    return v > 0 ? sqrt(v) : 0.0;
}

static double finish(const tok_acc *a, double *f, const float *x, int64_t rows, int64_t cols)
{
    double n = (double)rows;
    memset(f, 0, RESDIAG_N_FIELDS * sizeof *f);
    f[RESDIAG_FIELD_ROWS] = n, f[RESDIAG_FIELD_COLS] = (double)cols;
    f[RESDIAG_FIELD_FROB] = sqrt(a->sq);
    f[RESDIAG_FIELD_TOK_NORM_MEAN] = a->nsum / n;
    f[RESDIAG_FIELD_TOK_NORM_STD] = sd_of(a->nsum, a->nsq, n);
    f[RESDIAG_FIELD_TOK_NORM_MIN] = a->nmin, f[RESDIAG_FIELD_TOK_NORM_MAX] = a->nmax;
    f[RESDIAG_FIELD_TOK_MEAN_MEAN] = a->msum / n;
    f[RESDIAG_FIELD_TOK_MEAN_STD] = sd_of(a->msum, a->msq, n);
    f[RESDIAG_FIELD_TOK_RMS_MEAN] = a->rsum / n;
    f[RESDIAG_FIELD_TOK_RMS_STD] = sd_of(a->rsum, a->rsq, n);
    f[RESDIAG_FIELD_TOK_STD_MEAN] = a->ssum / n;
    f[RESDIAG_FIELD_TOK_STD_STD] = sd_of(a->ssum, a->ssq, n);
    f[RESDIAG_FIELD_ABSMAX] = a->amax;
    f[RESDIAG_FIELD_ABSMAX_COL] = -1;
    if (a->amax_row >= 0) /* the column: a rescan of the row that holds it */
        for (int64_t j = 0; j < cols; j++)
            if (fabsf(x[a->amax_row * cols + j]) == (float)a->amax) {
                f[RESDIAG_FIELD_ABSMAX_COL] = (double)j;
                break;
            }
    return f[RESDIAG_FIELD_FROB];
}

/* A row's end: its tail columns, its sketch buckets times the row's sign
 * into acc, its per-token figures. */
static void row_end(tok_acc *a, const float *r, int64_t j, int64_t i, int64_t cols,
                    const rd_sketch_params *sp, int k16, double sx, double sq, double amax,
                    double *rb, double *acc, double *row_norms)
{
    for (; j < cols; j++) {
        double v = r[j];
        sx += v, sq += v * v, amax = fmax(amax, fabs(v));
        if (k16)
            rb[j % 16] += (double)sp->tau[j] * v;
    }
    if (k16) {
        double sg = rd_row_sign(sp->seed, sp->row0 + i);
        for (int b = 0; b < 16; b++)
            acc[b] += sg * rb[b];
    }
    tok_add(a, sx, sq, amax, i, cols, row_norms);
}

__attribute__((target("avx2,fma"))) static double
ref_avx2(double *f, double *sketch, double *row_norms, const float *x, int64_t rows,
         int64_t cols, const rd_sketch_params *sp)
{
    tok_acc a = { 0, 0, 0, INFINITY, -INFINITY, 0, 0, 0, 0, 0, 0, -1, -1 };
    int k16 = sp && sp->k == 16 && sp->tau_len >= (size_t)cols;
    double acc[16] = { 0 };
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < rows; i++) {
        const float *r = x + i * cols;
        __m256 s = _mm256_setzero_ps(), q = _mm256_setzero_ps(), m = _mm256_setzero_ps();
        __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            __m256 v0 = _mm256_loadu_ps(r + j), v1 = _mm256_loadu_ps(r + j + 8);
            s = _mm256_add_ps(s, _mm256_add_ps(v0, v1));
            q = _mm256_fmadd_ps(v0, v0, q);
            q = _mm256_fmadd_ps(v1, v1, q);
            m = _mm256_max_ps(m, _mm256_max_ps(_mm256_and_ps(v0, absm), _mm256_and_ps(v1, absm)));
            if (k16) {
                b0 = _mm256_fmadd_ps(_mm256_loadu_ps(sp->tau + j), v0, b0);
                b1 = _mm256_fmadd_ps(_mm256_loadu_ps(sp->tau + j + 8), v1, b1);
            }
        }
        float ls[8], lq[8], lm[8], l0[8], l1[8];
        _mm256_storeu_ps(ls, s), _mm256_storeu_ps(lq, q), _mm256_storeu_ps(lm, m);
        _mm256_storeu_ps(l0, b0), _mm256_storeu_ps(l1, b1);
        double sx = 0, sq = 0, amax = 0, rb[16];
        for (int l = 0; l < 8; l++) {
            sx += ls[l], sq += lq[l], amax = fmax(amax, lm[l]);
            rb[l] = l0[l], rb[l + 8] = l1[l];
        }
        row_end(&a, r, j, i, cols, sp, k16, sx, sq, amax, rb, acc, row_norms);
    }
    if (k16 && sketch)
        memcpy(sketch, acc, sizeof acc);
    return finish(&a, f, x, rows, cols);
}

__attribute__((target("avx512f"))) static double
ref_avx512(double *f, double *sketch, double *row_norms, const float *x, int64_t rows,
           int64_t cols, const rd_sketch_params *sp)
{
    tok_acc a = { 0, 0, 0, INFINITY, -INFINITY, 0, 0, 0, 0, 0, 0, -1, -1 };
    int k16 = sp && sp->k == 16 && sp->tau_len >= (size_t)cols;
    double acc[16] = { 0 };
    for (int64_t i = 0; i < rows; i++) {
        const float *r = x + i * cols;
        __m512 s = _mm512_setzero_ps(), q = _mm512_setzero_ps(), m = _mm512_setzero_ps();
        __m512 b = _mm512_setzero_ps();
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            __m512 v = _mm512_loadu_ps(r + j);
            s = _mm512_add_ps(s, v);
            q = _mm512_fmadd_ps(v, v, q);
            m = _mm512_max_ps(m, _mm512_abs_ps(v));
            if (k16)
                b = _mm512_fmadd_ps(_mm512_loadu_ps(sp->tau + j), v, b);
        }
        float lb[16];
        _mm512_storeu_ps(lb, b);
        double sx = _mm512_reduce_add_ps(s), sq = _mm512_reduce_add_ps(q);
        double amax = _mm512_reduce_max_ps(m), rb[16];
        for (int l = 0; l < 16; l++)
            rb[l] = lb[l];
        row_end(&a, r, j, i, cols, sp, k16, sx, sq, amax, rb, acc, row_norms);
    }
    if (k16 && sketch)
        memcpy(sketch, acc, sizeof acc);
    return finish(&a, f, x, rows, cols);
}

double ref_one_row(int isa, double *fields, double *sketch, double *row_norms, const float *x,
                   int64_t rows, int64_t cols, const rd_sketch_params *sp)
{
    if (rows <= 0)
        return 0.0;
    return isa == REF_AVX512 ? ref_avx512(fields, sketch, row_norms, x, rows, cols, sp)
                             : ref_avx2(fields, sketch, row_norms, x, rows, cols, sp);
}
