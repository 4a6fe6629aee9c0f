/*
 * simd_kernels.h - the vector kernels that lib/stats/stats_avx2.c and
 * lib/stats/stats_avx512.c share, written once against the vector types
 * and operations (vd_*, vf_*, VD_W, VF_W, CH, ...) that the including file
 * defines before including this header, and compiled with its flags. Only
 * those two files include it; RD_SIMD_AVX512 (0 or 1) says which one.
 *
 * Dimension names: cols = width of the row, K = sketch size.
 *
 * Two kernels. f32, f16 (F16C, exact) and bf16 (a shift, exact) rows go
 * through row_kernel_f: floats all the way, per element one add (sum x),
 * two FMAs (sum x^2, and tau(j mod tau_len) * x into the sketch bucket,
 * exact products since tau is +-1) and a share of a max |x|, in float
 * lanes over blocks of at most BLOCK columns and in double across blocks.
 * That is what lets one core keep up with memory; its error bound (about
 * 1.4e-6 of each row sum's |terms|) and the rows it hands to the double
 * kernel are described above it. f64 rows, and rows handed over, go
 * through row_kernel: converted to double, shifted by the row's first
 * value x0 (d = x - x0 into sum d and sum d^2, x^2 into sum x^2), double
 * accumulation throughout, within rounding of the portable kernel.
 *
 * The sketch: with 16 columns per step, column j + u of a step falls in
 * bucket (j + u) mod K = u mod K when K divides 16, so for the usual K (1,
 * 2, 4, 8, 16) the buckets live in registers as 16 "virtual" buckets folded
 * at the end of the block; when K is a multiple of 16 (row_kernel only) a
 * step covers 16 consecutive buckets in memory; other K return 0 (the
 * portable kernel then does the row). The last columns that do not fill a
 * step are done by a scalar loop in double. Accumulators are split into
 * chains to shorten the dependency chains; the one-row loops prefetch
 * PREFETCH bytes ahead (the 16-row ones do not: see ROWS_NO_PREFETCH in
 * stats_avx512.c). The exact quantities (ABSMAX, counts) are identical on
 * every path.
 *
 * Also here: the end that the 16-row kernels of both files share
 * (rows_hand_back: the checks, the rows handed back, the max found again;
 * rows_max_update) and their dispatch on (dtype, sketch), ROWS_DISPATCH.
 */
#ifndef RESDIAG_SIMD_KERNELS_H
#define RESDIAG_SIMD_KERNELS_H

#ifndef RD_SIMD_AVX512
#error "include stats/simd_kernels.h from stats_avx2.c or stats_avx512.c only"
#endif

#include <float.h>

#if RD_SIMD_AVX512
#define BLOCK_SUMS rd_block_sums_avx512
#else
#define BLOCK_SUMS rd_block_sums_avx2
#endif

#define NV (16 / VD_W) /* double vectors per 16 columns */
#ifndef PREFETCH
#define PREFETCH 2048 /* bytes ahead */
#endif

static inline double load1(const void *row, const int dt, int64_t j)
{
    /* the row may start at any byte: memcpy loads assume no alignment */
    const char *p = (const char *)row;
    float f;
    double d;
    uint16_t h;
    switch (dt) {
    case RESDIAG_DTYPE_F32: memcpy(&f, p + (size_t)j * 4, 4); return f;
    case RESDIAG_DTYPE_F64: memcpy(&d, p + (size_t)j * 8, 8); return d;
    case RESDIAG_DTYPE_F16: memcpy(&h, p + (size_t)j * 2, 2); return rd_f16_to_f32(h);
    default: memcpy(&h, p + (size_t)j * 2, 2); return rd_bf16_to_f32(h);
    }
}

/* the largest |x| of a row (rare: see rows_hand_back) */
static double row_absmax(const void *row, int64_t cols, const int dt)
{
    vf am = vf_zero();
    int64_t j = 0;
    for (; j + VF_W <= cols; j += VF_W)
        am = vf_max(am, vf_abs(loadf(row, j, dt)));
    double a = vf_hmax(am);
    for (; j < cols; j++) {
        double v = fabs(load1(row, dt, j));
        a = v > a ? v : a;
    }
    return a;
}

/* The end of both 16-row kernels, after the n rows' sums (o->sx, o->sq):
 * row_kernel_f's checks on each row. A row that fails is the caller's (its
 * bit in o->redo, returned too), and its max does not count here (the
 * caller's one-row path finds it). */
static inline __attribute__((always_inline)) uint32_t
rows_hand_back(rd_rows_out *o, const void *row0, size_t row_bytes, int n, int64_t cols,
               double amax_floor, const int dt)
{
    uint32_t redo = 0;
    const double dcols = (double)cols;
    for (int r = 0; r < n; r++) {
        double sx = o->sx[r], sq = o->sq[r];
        if (!(isfinite(sq) && 4.0 * sx * sx <= 3.0 * sq * dcols) || sq < 0x1p-70)
            redo |= 1u << r;
    }
    o->redo = redo;
    if (o->amax_row >= 0 && (redo >> o->amax_row & 1u)) {
        /* the block's max was in a row handed back: find the largest
         * above the floor among the others again (rare) */
        o->amax = -1.0;
        o->amax_row = -1;
        double fl = amax_floor;
        for (int r = 0; r < n; r++) {
            if (redo >> r & 1u)
                continue;
            double a = row_absmax((const char *)row0 + (size_t)r * row_bytes, cols, dt);
            if (a > fl) {
                fl = a;
                o->amax = a;
                o->amax_row = r;
            }
        }
    }
    return redo;
}

/* In rd_fast_rows_avx512 and _avx2, after their checks: each (dtype,
 * sketch) its own copy of the 16-row kernel, with constants. */
#define ROWS_CASE(kernel, dt, sk)                                                           \
    case 4 * (dt) + (sk):                                                                   \
        return kernel(o, acc, sigma, row0, row_bytes, n, cols, sp, amax_floor, (dt), (sk))
#define ROWS_DISPATCH(kernel)                                                               \
    switch (4 * (int)dtype + (k == 16)) {                                                   \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F32, 0);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F32, 1);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F16, 0);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_F16, 1);                                            \
        ROWS_CASE(kernel, RESDIAG_DTYPE_BF16, 0);                                           \
        ROWS_CASE(kernel, RESDIAG_DTYPE_BF16, 1);                                           \
    }

/* kmode: 0 no sketch, 1 K divides 16 (register buckets), 2 K multiple of
 * 16 (memory buckets). dt and kmode are constants at every call, so each
 * combination is compiled on its own. */
static inline __attribute__((always_inline)) void
row_kernel(rd_row_sums *rs, double *rb /* (K) */, const void *row, int64_t cols,
           const rd_sketch_params *sp, const int dt, const int kmode)
{
    const int64_t nb = cols & ~(int64_t)15;
    const double x0 = load1(row, dt, 0);
    const vd vx0 = vd_set1(x0);
    vd a_sd[2], a_sd2[2], a_sq[2], a_am[2], kb[NV];
    vf amf = vf_zero();
#pragma GCC unroll 4
    for (int i = 0; i < 2; i++)
        a_sd[i] = a_sd2[i] = a_sq[i] = a_am[i] = vd_zero();
#pragma GCC unroll 4
    for (int i = 0; i < NV; i++)
        kb[i] = vd_zero();
    const size_t K = kmode ? (size_t)sp->k : 1, tl = kmode ? sp->tau_len : 1;
    size_t t = 0, m = 0; /* column mod tau_len, column mod K (kmode 2) */
    float wrap[16];      /* tau across its end */

    const size_t esize = dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    for (int64_t j = 0; j < nb; j += 16) {
        /* The loop does enough arithmetic per byte that the hardware
         * prefetcher alone lets it wait for memory; ask for the lines
         * PREFETCH bytes ahead (past the row's end is fine: the next row
         * usually follows, and a prefetch never faults). */
        const char *pf = (const char *)row + (size_t)j * esize + PREFETCH;
        _mm_prefetch(pf, _MM_HINT_T0);
        if (esize == 8)
            _mm_prefetch(pf + 64, _MM_HINT_T0);
        vd x[NV];
        load16(x, &amf, row, j, dt);
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++) {
            vd d = vd_sub(x[i], vx0);
            a_sd[i & 1] = vd_add(a_sd[i & 1], d);
            a_sd2[i & 1] = vd_fmadd(d, d, a_sd2[i & 1]);
            a_sq[i & 1] = vd_fmadd(x[i], x[i], a_sq[i & 1]);
            if (dt == RESDIAG_DTYPE_F64)
                a_am[i & 1] = vd_max(a_am[i & 1], vd_abs(x[i]));
        }
        if (kmode) {
            const float *tp = sp->tau + t;
            if (t + 16 > tl) { /* once per tau_len columns */
                for (size_t u = 0; u < 16; u++)
                    wrap[u] = sp->tau[(t + u) % tl];
                tp = wrap;
            }
            t += 16;
            if (t >= tl)
                t = t - tl < tl ? t - tl : t % tl;
            if (kmode == 1) {
#if RD_SIMD_AVX512
                sketch16(kb, x, tp);
#else
                vd tv[NV];
                load_tau16(tv, tp);
#pragma GCC unroll 4
                for (int i = 0; i < NV; i++)
                    kb[i] = vd_fmadd(tv[i], x[i], kb[i]);
#endif
            } else {
                vd tv[NV];
                load_tau16(tv, tp);
                double *r = rb + m; /* (16) buckets m .. m+15 */
#pragma GCC unroll 4
                for (int i = 0; i < NV; i++)
                    vd_storeu(r + i * VD_W, vd_fmadd(tv[i], x[i], vd_loadu(r + i * VD_W)));
                m += 16;
                if (m == K)
                    m = 0;
            }
        }
    }

    double sd = 0.0, sd2 = 0.0, sq = 0.0, am = 0.0;
    for (int64_t j = nb; j < cols; j++) {
        double v = load1(row, dt, j), d = v - x0, a = fabs(v);
        sd += d;
        sd2 += d * d;
        sq += v * v;
        am = a > am ? a : am;
        if (kmode)
            rb[(size_t)j % K] += (double)sp->tau[(size_t)j % tl] * v;
    }
    if (kmode == 1 && K == 16) {
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            vd_storeu(rb + i * VD_W, vd_add(vd_loadu(rb + i * VD_W), kb[i]));
    } else if (kmode == 1) { /* K = 1, 2, 4, 8: a power of two */
        double v[16];
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            vd_storeu(v + i * VD_W, kb[i]);
        for (size_t u = 0; u < 16; u++)
            rb[u & (K - 1)] += v[u];
    }
    double vam = dt == RESDIAG_DTYPE_F64 ? vd_hmax(vd_max(a_am[0], a_am[1])) : vf_hmax(amf);
    rs->e = 0;
    rs->y0 = x0;
    rs->sd = vd_hsum(vd_add(a_sd[0], a_sd[1])) + sd;
    rs->sd2 = vd_hsum(vd_add(a_sd2[0], a_sd2[1])) + sd2;
    rs->sq = vd_hsum(vd_add(a_sq[0], a_sq[1])) + sq;
    rs->amax = vam > am ? vam : am;
    rs->amax_col = -1;
    rs->nan = rs->inf = 0;
}

/* Columns per block of the float kernel: each float accumulator lane takes
 * at most 16 terms per block before the block's sums go into double. */
#define BLOCK (16 * CH * VF_W)

/* a[0] + ... + a[CH-1], pairwise (log2 CH roundings per lane) */
static inline vf vf_tree(const vf a[CH])
{
    vf t[CH];
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++)
        t[c] = a[c];
#pragma GCC unroll 8
    for (int w = CH / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            t[c] = vf_add(t[c], t[c + w]);
    return t[0];
}

/* max |a[c]| over the chains, lane by lane */
static inline vf vf_absmax_tree(const vf a[CH])
{
    vf t[CH / 2];
#pragma GCC unroll 8
    for (int c = 0; c < CH / 2; c++)
        t[c] = vf_absmax(a[c], a[c + CH / 2]);
#pragma GCC unroll 8
    for (int w = CH / 4; w >= 1; w /= 2)
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            t[c] = vf_max(t[c], t[c + w]);
    return t[0];
}

/* One step of the float loop: CH vectors of row from column j, their
 * largest |x| into *am, and sum x, sum x^2 and (sk) the sketch, with the
 * column signs at tau (CH * VF_W of them, in the chains' order: split for
 * bf16 on AVX-512, see split_tau32), into the chains s1, q, kb. */
static inline __attribute__((always_inline)) void
float_step(vf s1[CH], vf q[CH], vf kb[CH], vf *am, const void *row, int64_t j, const float *tau,
           const int dt, const int sk)
{
    vf f[CH];
#if SPLIT_BF16
    if (dt == RESDIAG_DTYPE_BF16) {
        load_bf16_split(f, row, j);
        load_bf16_split(f + 2, row, j + 2 * VF_W);
    } else
#endif
#pragma GCC unroll 8
        for (int c = 0; c < CH; c++)
            f[c] = loadf(row, j + c * VF_W, dt);
    *am = vf_max(*am, vf_absmax_tree(f));
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++) {
        s1[c] = vf_add(s1[c], f[c]);
        q[c] = vf_fmadd(f[c], f[c], q[c]);
        if (sk)
            kb[c] = vf_fmadd(vf_loadu(tau + c * VF_W), f[c], kb[c]);
    }
}

/* The float kernel for f32, f16 and bf16 (sk: K divides 16, else 0): per
 * element one add (sum x), two FMAs (sum x^2, the sketch bucket) and a
 * share of a max, in float lanes over blocks of BLOCK columns, in double
 * across blocks. A float block sum of m terms is within m u_f of the sum of
 * its |terms| (u_f = 2^-24); here m <= 16 per lane + 2 (chains) + 4
 * (lanes), so each row sum is within 22 u_f (< 1.4e-6) of the sum of its
 * |terms|. The row is not shifted (y0 = 0, sum d = sum x, sum d^2 = sum x^2),
 * so the token's variance sum x^2/cols - mean^2 cancels when |mean| >>
 * std; rows where mean^2 > 3 var (4 (sum x)^2 > 3 cols sum x^2), i.e.
 * where that could cost more than a factor 4, go to row_kernel (double,
 * shifted by x0), and so do rows whose squares overflow float (|x| >
 * ~1.8e19: the sums come out Inf; NaN and Inf do the same) or come near
 * its underflow (sum x^2 < 2^-70 with a non-zero value). ABSMAX is exact
 * (a max); it is reduced only when some lane beats amax_floor, else
 * rs->amax = -1. The last block's buckets are folded after those checks:
 * for a row that passes them, with K = 16 and acc given, straight into
 * acc with the row's sign (returns 2), else into rb (returns 1). */
static inline __attribute__((always_inline)) int
row_kernel_f(rd_row_sums *rs, double *rb /* (K) */, const void *row, int64_t cols,
             const rd_sketch_params *sp, double amax_floor, double *acc /* (K) */,
             double sigma, const int dt, const int sk)
{
    const int64_t step = CH * VF_W, nb = cols - cols % step;
    const size_t K = sk ? (size_t)sp->k : 1, tl = sk ? sp->tau_len : 1;
    const size_t esize = dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    size_t t = 0;           /* column mod tau_len */
    float wrap[CH * VF_W];  /* tau across its end */
    float split[CH * VF_W]; /* tau in the split order (bf16) */
    vf am = vf_set1(0.0f);
    double sx = 0.0, sq = 0.0;
    vf kb[CH]; /* the current block's buckets */
#pragma GCC unroll 8
    for (int c = 0; c < CH; c++)
        kb[c] = vf_set1(0.0f);

    for (int64_t b0 = 0; b0 < nb; b0 += BLOCK) {
        const int64_t b1 = nb - b0 < BLOCK ? nb : b0 + BLOCK;
        vf s1[CH], q[CH];
        if (sk && b0 > 0) { /* the previous block's buckets */
            kb_fold(rb, kb, K, dt);
#pragma GCC unroll 8
            for (int c = 0; c < CH; c++)
                kb[c] = vf_set1(0.0f);
        }
#pragma GCC unroll 8
        for (int c = 0; c < CH; c++)
            s1[c] = q[c] = vf_set1(0.0f);
        for (int64_t j = b0; j < b1; j += step) {
            /* see row_kernel: without it the loop waits for memory */
            const char *pf = (const char *)row + (size_t)j * esize + PREFETCH;
#pragma GCC unroll 8
            for (size_t o = 0; o < (size_t)step * esize; o += 64)
                _mm_prefetch(pf + o, _MM_HINT_T0);
            const float *tp = NULL;
            if (sk) {
                tp = sp->tau + t;
                if (t + (size_t)step > tl) { /* once per tau_len columns */
                    for (size_t u = 0; u < (size_t)step; u++)
                        wrap[u] = sp->tau[(t + u) % tl];
                    tp = wrap;
                }
                t += (size_t)step;
                while (t >= tl)
                    t -= tl;
                if (SPLIT_BF16 && dt == RESDIAG_DTYPE_BF16) {
                    vf tv[4];
                    split_tau32(tv, tp);
                    split_tau32(tv + 2, tp + 32);
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++)
                        vf_storeu(split + c * VF_W, tv[c]);
                    tp = split;
                }
            }
            float_step(s1, q, kb, &am, row, j, tp, dt, sk);
        }
        float h[3];
        vf_hsum3(h, vf_tree(s1), vf_tree(q), vf_tree(q));
        sx += h[0];
        sq += h[1];
    }

    double tam = 0.0; /* the last cols mod step columns, in double */
    for (int64_t j = nb; j < cols; j++) {
        double v = load1(row, dt, j), a = fabs(v);
        sx += v;
        sq += v * v;
        tam = a > tam ? a : tam;
        if (sk)
            rb[(size_t)j % K] += (double)sp->tau[(size_t)j % tl] * v;
    }

    double amax = -1.0;
    int ok = isfinite(sq) && 4.0 * sx * sx <= 3.0 * sq * (double)cols;
    if (ok && sq < 0x1p-70) {
        amax = vf_hmax(am);
        amax = tam > amax ? tam : amax;
        ok = amax == 0.0;
    }
    if (!ok) { /* rare: redo the row in double */
        if (sk)
            memset(rb, 0, K * sizeof *rb);
        row_kernel(rs, rb, row, cols, sp, dt, sk);
        return 1;
    }
    int done = 1;
    if (sk && acc && K == 16 && nb == cols && nb <= BLOCK) {
        kb_fold_signed(acc, kb, sigma, dt); /* the whole row was one block */
        done = 2;
    } else if (sk && nb > 0) {
        kb_fold(rb, kb, K, dt);
    }
    if (amax < 0.0 && (tam > amax_floor || vf_any_gt(am, (float)amax_floor))) {
        amax = vf_hmax(am);
        amax = tam > amax ? tam : amax;
    }
    rs->e = 0;
    rs->y0 = 0.0;
    rs->sd = sx;
    rs->sd2 = sq;
    rs->sq = sq;
    rs->amax = amax;
    rs->amax_col = -1;
    rs->nan = rs->inf = 0;
    return done;
}

#define KERNELS(dt)                                                           \
    case 3 * (dt) + 0: row_kernel(rs, rb, row, cols, sp, (dt), 0); return 1;  \
    case 3 * (dt) + 1: row_kernel(rs, rb, row, cols, sp, (dt), 1); return 1;  \
    case 3 * (dt) + 2: row_kernel(rs, rb, row, cols, sp, (dt), 2); return 1;

#define KERNELS_F(dt)                                                                  \
    case 3 * (dt) + 0:                                                                 \
        return row_kernel_f(rs, rb, row, cols, sp, amax_floor, acc, sigma, (dt), 0);   \
    case 3 * (dt) + 1:                                                                 \
        return row_kernel_f(rs, rb, row, cols, sp, amax_floor, acc, sigma, (dt), 1);   \
    case 3 * (dt) + 2: row_kernel(rs, rb, row, cols, sp, (dt), 2); return 1;

int FAST_ROW(rd_row_sums *rs, double *rb, const void *row, resdiag_dtype dtype,
             int64_t cols, const rd_sketch_params *sp, double amax_floor, double *acc,
             double sigma)
{
    const int k = sp != NULL ? sp->k : 0;
    const int kmode = k <= 0 ? 0 : 16 % k == 0 ? 1 : k % 16 == 0 ? 2 : -1;
    if (kmode < 0)
        return 0;
    switch (3 * (int)dtype + kmode) {
        KERNELS_F(RESDIAG_DTYPE_F32)
        KERNELS(RESDIAG_DTYPE_F64)
        KERNELS_F(RESDIAG_DTYPE_F16)
        KERNELS_F(RESDIAG_DTYPE_BF16)
    }
    return 0;
}

/* The running largest |x| of the rows so far (above the floor): row r's
 * lane maxima am. */
typedef struct rows_max {
    float floor_f; /* the floor as a float (|x| are floats) */
    double floor_d;
} rows_max;

static inline void rows_max_update(rows_max *m, rd_rows_out *o, vf am, int r)
{
    if (vf_any_gt(am, m->floor_f)) { /* rare after the first rows */
        double a = vf_hmax(am);
        if (a > m->floor_d) {
            m->floor_d = a;
            m->floor_f = (float)a;
            o->amax = a;
            o->amax_row = r;
        }
    }
}


/* rd_block_sums_fn (stats_impl.h): the 4 values of a token in one 256-bit
 * vector; vminpd/vmaxpd are exactly stats.c's "x < l ? x : l" and
 * "x > h ? x : h", and no product is fused into an add (ISO C: no
 * contraction), so each lane gives stats.c's one-value bits. */
void BLOCK_SUMS(rd_block_sums *o, const double *v, int n)
{
    const __m256d x0 = _mm256_loadu_pd(v), sgn = _mm256_set1_pd(-0.0);
    __m256d s[4], q[4], l0 = x0, l1 = x0, h0 = x0, h1 = x0;
    __m256d m0 = _mm256_setzero_pd(), m1 = _mm256_setzero_pd();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        s[c] = q[c] = _mm256_setzero_pd();
    int k = 0;
    for (; k + 4 <= n; k += 4) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256d x = _mm256_loadu_pd(v + 4 * (k + c));
            s[c] = _mm256_add_pd(s[c], _mm256_sub_pd(x, x0));
            q[c] = _mm256_add_pd(q[c], _mm256_mul_pd(x, x));
            __m256d a = _mm256_andnot_pd(sgn, x);
            if (c % 2 == 0) {
                l0 = _mm256_min_pd(x, l0);
                h0 = _mm256_max_pd(x, h0);
                m0 = _mm256_max_pd(a, m0);
            } else {
                l1 = _mm256_min_pd(x, l1);
                h1 = _mm256_max_pd(x, h1);
                m1 = _mm256_max_pd(a, m1);
            }
        }
    }
    for (; k < n; k++) {
        __m256d x = _mm256_loadu_pd(v + 4 * k);
        s[0] = _mm256_add_pd(s[0], _mm256_sub_pd(x, x0));
        q[0] = _mm256_add_pd(q[0], _mm256_mul_pd(x, x));
        l0 = _mm256_min_pd(x, l0);
        h0 = _mm256_max_pd(x, h0);
        m0 = _mm256_max_pd(_mm256_andnot_pd(sgn, x), m0);
    }
    const __m256d sum = _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3]));
    _mm256_storeu_pd(o->s, sum);
    _mm256_storeu_pd(o->sq, _mm256_add_pd(_mm256_add_pd(q[0], q[1]), _mm256_add_pd(q[2], q[3])));
    _mm256_storeu_pd(o->lo, _mm256_min_pd(l1, l0));
    _mm256_storeu_pd(o->hi, _mm256_max_pd(h1, h0));
    _mm256_storeu_pd(o->amax, _mm256_max_pd(m1, m0));

    /* about the means, where finite (|mean| <= DBL_MAX; else about 0) */
    __m256d mean = _mm256_add_pd(x0, _mm256_div_pd(sum, _mm256_set1_pd((double)n)));
    __m256d fin = _mm256_cmp_pd(_mm256_andnot_pd(sgn, mean), _mm256_set1_pd(DBL_MAX), _CMP_LE_OQ);
    const __m256d c0 = _mm256_and_pd(mean, fin);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        s[c] = _mm256_setzero_pd();
    for (k = 0; k + 4 <= n; k += 4) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256d d = _mm256_sub_pd(_mm256_loadu_pd(v + 4 * (k + c)), c0);
            s[c] = _mm256_add_pd(s[c], _mm256_mul_pd(d, d));
        }
    }
    for (; k < n; k++) {
        __m256d d = _mm256_sub_pd(_mm256_loadu_pd(v + 4 * k), c0);
        s[0] = _mm256_add_pd(s[0], _mm256_mul_pd(d, d));
    }
    _mm256_storeu_pd(o->dev, _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3])));
}

#endif
