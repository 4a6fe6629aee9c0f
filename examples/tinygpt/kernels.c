/*
 * kernels.c - forward and backward kernels of tinygpt (see kernels.h for the
 * dimension legend and the conventions: outputs first, backward accumulates,
 * every output element summed by one thread in a fixed order).
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

#ifdef TINYGPT_DOUBLE
#define EXP exp
#define TANH tanh
#else
#define EXP expf
#define TANH tanhf
#endif

/* Parallel loops only over independent outputs (see kernels.h), and only
 * when the loop has about 10^5 operations or more (`work`): a parallel
 * region costs a wake-up and a barrier that waits for the slowest thread,
 * which on a busy machine can be a whole scheduler time slice. Written with
 * _Pragma so that a build without OpenMP has no unknown pragmas. */
#ifdef _OPENMP
#define PRAGMA(x) _Pragma(#x)
#define PARALLEL_FOR(work) PRAGMA(omp parallel for schedule(static) if ((work) >= 100000))
#else
#define PARALLEL_FOR(work)
#endif

/* ------------------------------------------------------------ embedding */

void encoder_forward(real *out, const int *tokens, const real *wte, const real *wpe,
                     int B, int T, int C)
{
    PARALLEL_FOR((size_t)B * T * C)
    for (int bt = 0; bt < B * T; bt++) {
        real *o = out + (size_t)bt * C;                    /* (C) */
        const real *te = wte + (size_t)tokens[bt] * C;     /* (C) */
        const real *pe = wpe + (size_t)(bt % T) * C;       /* (C) */
        for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
    }
}

void encoder_backward(real *dwte, real *dwpe, const real *dout, const int *tokens,
                      int B, int T, int C)
{
    /* Serial: several positions may share a token row of dwte, and a fixed
     * order keeps the sum deterministic. It is O(N*C), nothing next to the
     * matmuls. */
    for (int bt = 0; bt < B * T; bt++) {
        const real *d = dout + (size_t)bt * C;
        real *dte = dwte + (size_t)tokens[bt] * C;
        real *dpe = dwpe + (size_t)(bt % T) * C;
        for (int i = 0; i < C; i++) {
            dte[i] += d[i];
            dpe[i] += d[i];
        }
    }
}

/* ------------------------------------------------------------ LayerNorm */

void layernorm_forward(real *out, real *mean, real *rstd, const real *inp,
                       const real *weight, const real *bias, int N, int C)
{
    PARALLEL_FOR((size_t)N * C * 8)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;  /* (C) */
        real *o = out + (size_t)n * C;        /* (C) */
        /* Statistics in double: a float sum of C squares loses bits that
         * would show up as a per-token RMS visibly different from 1. */
        double m = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        double v = 0;
        for (int i = 0; i < C; i++) v += ((double)x[i] - m) * ((double)x[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + TG_NORM_EPS);
        for (int i = 0; i < C; i++)
            o[i] = (real)(((double)x[i] - m) * s) * weight[i] + bias[i];
        mean[n] = (real)m;
        rstd[n] = (real)s;
    }
}

void layernorm_backward(real *dinp, real *dweight, real *dbias, const real *dout,
                        const real *inp, const real *weight, const real *mean,
                        const real *rstd, int N, int C)
{
    /* dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy * xhat)) */
    PARALLEL_FOR((size_t)N * C * 8)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        const real *dy = dout + (size_t)n * C;
        real *dx = dinp + (size_t)n * C;
        double dnorm_mean = 0, dnorm_xhat_mean = 0;
        for (int i = 0; i < C; i++) {
            double xhat = ((double)x[i] - mean[n]) * rstd[n];
            double dnorm = (double)weight[i] * dy[i];
            dnorm_mean += dnorm;
            dnorm_xhat_mean += dnorm * xhat;
        }
        dnorm_mean /= C;
        dnorm_xhat_mean /= C;
        for (int i = 0; i < C; i++) {
            double xhat = ((double)x[i] - mean[n]) * rstd[n];
            double dnorm = (double)weight[i] * dy[i];
            dx[i] += (real)((dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * rstd[n]);
        }
    }
    /* Parameter gradients sum over tokens: one pass in token order. */
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        const real *dy = dout + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            real xhat = (x[i] - mean[n]) * rstd[n];
            dweight[i] += dy[i] * xhat;
            dbias[i] += dy[i];
        }
    }
}

/* -------------------------------------------------------------- RMSNorm */

void rmsnorm_forward(real *out, real *rstd, const real *inp, const real *weight,
                     int N, int C)
{
    PARALLEL_FOR((size_t)N * C * 8)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        real *o = out + (size_t)n * C;
        double ss = 0;
        for (int i = 0; i < C; i++) ss += (double)x[i] * x[i];
        double s = 1.0 / sqrt(ss / C + TG_NORM_EPS);
        for (int i = 0; i < C; i++) o[i] = (real)(x[i] * s) * weight[i];
        rstd[n] = (real)s;
    }
}

void rmsnorm_backward(real *dinp, real *dweight, const real *dout, const real *inp,
                      const real *weight, const real *rstd, int N, int C)
{
    /* y = g * x * r with r = (mean(x^2) + eps)^(-1/2), dr/dx_j = -r^3 x_j / C:
     * dx = r * (g*dy - xhat * mean(g*dy * xhat)), xhat = x * r. */
    PARALLEL_FOR((size_t)N * C * 8)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        const real *dy = dout + (size_t)n * C;
        real *dx = dinp + (size_t)n * C;
        double dnorm_xhat_mean = 0;
        for (int i = 0; i < C; i++)
            dnorm_xhat_mean += (double)weight[i] * dy[i] * ((double)x[i] * rstd[n]);
        dnorm_xhat_mean /= C;
        for (int i = 0; i < C; i++) {
            double xhat = (double)x[i] * rstd[n];
            dx[i] += (real)(((double)weight[i] * dy[i] - xhat * dnorm_xhat_mean) * rstd[n]);
        }
    }
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        const real *dy = dout + (size_t)n * C;
        for (int i = 0; i < C; i++) dweight[i] += dy[i] * (x[i] * rstd[n]);
    }
}

/* --------------------------------------------------------------- matmul */

/* Every loop below is an axpy (a row += scalar * row) over contiguous
 * memory, which the compiler vectorizes without reordering any sum: each
 * output element is its initial value plus the products in a fixed order
 * of the summed index, whatever the tiling or the thread count. Rows go
 * four at a time so that each weight row loaded feeds four output rows.
 * (A register-tiled version written in plain C was slower: GCC 12 does not
 * keep the tile in vector registers.) */
void matmul_forward(real *out, const real *inp, const real *weight, const real *bias,
                    int N, int IC, int OC)
{
    PARALLEL_FOR((size_t)N * IC * OC)
    for (int n0 = 0; n0 < N; n0 += 4) {
        int rows = N - n0 < 4 ? N - n0 : 4;
        for (int r = 0; r < rows; r++) {
            real *o = out + (size_t)(n0 + r) * OC;
            if (bias) memcpy(o, bias, (size_t)OC * sizeof *o);
            else memset(o, 0, (size_t)OC * sizeof *o);
        }
        if (rows == 4) {
            real *restrict o0 = out + (size_t)n0 * OC, *restrict o1 = o0 + OC;
            real *restrict o2 = o1 + OC, *restrict o3 = o2 + OC;
            const real *x = inp + (size_t)n0 * IC;    /* (4, IC) */
            for (int i = 0; i < IC; i++) {
                const real *restrict w = weight + (size_t)i * OC;  /* (OC) */
                real a0 = x[i], a1 = x[IC + i], a2 = x[2 * IC + i], a3 = x[3 * IC + i];
                for (int o = 0; o < OC; o++) {
                    o0[o] += a0 * w[o];
                    o1[o] += a1 * w[o];
                    o2[o] += a2 * w[o];
                    o3[o] += a3 * w[o];
                }
            }
        } else {
            for (int r = 0; r < rows; r++) {
                real *restrict o = out + (size_t)(n0 + r) * OC;
                const real *x = inp + (size_t)(n0 + r) * IC;
                for (int i = 0; i < IC; i++) {
                    const real *restrict w = weight + (size_t)i * OC;
                    real a = x[i];
                    for (int oc = 0; oc < OC; oc++) o[oc] += a * w[oc];
                }
            }
        }
    }
}

void matmul_backward(real *dinp, real *dweight, real *dbias, const real *dout,
                     const real *inp, const real *weight, real *scratch,
                     int N, int IC, int OC)
{
    /* dinp = dout @ weight^T. With weight^T in scratch (OC, IC), row n of
     * dinp gathers rows of weight^T scaled by dout[n, o]: axpys in o order. */
    PARALLEL_FOR((size_t)IC * OC)
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) scratch[(size_t)o * IC + i] = weight[(size_t)i * OC + o];
    PARALLEL_FOR((size_t)N * IC * OC)
    for (int n = 0; n < N; n++) {
        real *restrict dx = dinp + (size_t)n * IC;   /* (IC) */
        const real *dy = dout + (size_t)n * OC;      /* (OC) */
        for (int o = 0; o < OC; o++) {
            const real *restrict wt = scratch + (size_t)o * IC;
            real a = dy[o];
            for (int i = 0; i < IC; i++) dx[i] += a * wt[i];
        }
    }
    /* dweight[i, :] += sum over tokens n, in order, of inp[n, i] * dout[n, :];
     * one thread per group of four weight rows. */
    PARALLEL_FOR((size_t)N * IC * OC)
    for (int i0 = 0; i0 < IC; i0 += 4) {
        int rows = IC - i0 < 4 ? IC - i0 : 4;
        for (int n = 0; n < N; n++) {
            const real *restrict dy = dout + (size_t)n * OC;
            const real *x = inp + (size_t)n * IC + i0;
            for (int r = 0; r < rows; r++) {
                real *restrict dw = dweight + (size_t)(i0 + r) * OC;
                real a = x[r];
                for (int o = 0; o < OC; o++) dw[o] += a * dy[o];
            }
        }
    }
    if (dbias) {
        for (int n = 0; n < N; n++) {
            const real *restrict dy = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) dbias[o] += dy[o];
        }
    }
}

/* ------------------------------------------------------------ attention */

void attention_forward(real *out, real *att, const real *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    int C3 = 3 * C;
    real scale = (real)(1.0 / sqrt((double)hs));
    PARALLEL_FOR((size_t)B * T * T * C)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        for (int t = 0; t < T; t++) {
            const real *q = qkv + (size_t)(b * T + t) * C3 + h * hs;  /* (hs) */
            real *a = att + ((size_t)bh * T + t) * T;                   /* (T) */
            /* scores against positions 0..t only: the causal mask */
            real maxv = -INFINITY;
            for (int t2 = 0; t2 <= t; t2++) {
                const real *k = qkv + (size_t)(b * T + t2) * C3 + C + h * hs;
                real s = 0;
                for (int i = 0; i < hs; i++) s += q[i] * k[i];
                s *= scale;
                a[t2] = s;
                if (s > maxv) maxv = s;
            }
            real sum = 0;
            for (int t2 = 0; t2 <= t; t2++) {
                a[t2] = EXP(a[t2] - maxv);
                sum += a[t2];
            }
            real inv = 1 / sum;
            for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
            for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0;
            real *o = out + (size_t)(b * T + t) * C + h * hs;        /* (hs) */
            for (int i = 0; i < hs; i++) o[i] = 0;
            for (int t2 = 0; t2 <= t; t2++) {
                const real *v = qkv + (size_t)(b * T + t2) * C3 + 2 * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
            }
        }
    }
}

void attention_backward(real *dqkv, real *datt, const real *dout, const real *qkv,
                        const real *att, int B, int T, int C, int NH)
{
    int hs = C / NH;
    int C3 = 3 * C;
    real scale = (real)(1.0 / sqrt((double)hs));
    /* Each (b, h) owns its columns of dqkv for its rows: independent. */
    PARALLEL_FOR((size_t)B * T * T * C)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        for (int t = 0; t < T; t++) {
            const real *a = att + ((size_t)bh * T + t) * T;    /* (T) */
            real *da = datt + ((size_t)bh * T + t) * T;        /* (T) */
            const real *dy = dout + (size_t)(b * T + t) * C + h * hs;
            /* through out = a @ v */
            for (int t2 = 0; t2 <= t; t2++) {
                const real *v = qkv + (size_t)(b * T + t2) * C3 + 2 * C + h * hs;
                real *dv = dqkv + (size_t)(b * T + t2) * C3 + 2 * C + h * hs;
                real s = 0;
                for (int i = 0; i < hs; i++) {
                    s += dy[i] * v[i];
                    dv[i] += a[t2] * dy[i];
                }
                da[t2] = s;
            }
            /* through the softmax: dscore = a * (da - sum(a * da)) */
            real dot = 0;
            for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
            const real *q = qkv + (size_t)(b * T + t) * C3 + h * hs;
            real *dq = dqkv + (size_t)(b * T + t) * C3 + h * hs;
            for (int t2 = 0; t2 <= t; t2++) {
                real ds = a[t2] * (da[t2] - dot) * scale;
                const real *k = qkv + (size_t)(b * T + t2) * C3 + C + h * hs;
                real *dk = dqkv + (size_t)(b * T + t2) * C3 + C + h * hs;
                for (int i = 0; i < hs; i++) {
                    dq[i] += ds * k[i];
                    dk[i] += ds * q[i];
                }
            }
        }
    }
}

/* ----------------------------------------------------------------- GELU */

#define GELU_SCALE 0.7978845608028654 /* sqrt(2 / pi) */

void gelu_forward(real *out, const real *inp, size_t n)
{
    PARALLEL_FOR(n * 20)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_SCALE * (x + (real)0.044715 * x * x * x);
        out[i] = (real)0.5 * x * (1 + TANH(u));
    }
}

void gelu_backward(real *dinp, const real *inp, const real *dout, size_t n)
{
    PARALLEL_FOR(n * 20)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_SCALE * (x + (real)0.044715 * x * x * x);
        real th = TANH(u);
        real sech2 = 1 - th * th;
        real du = (real)GELU_SCALE * (1 + 3 * (real)0.044715 * x * x);
        dinp[i] += dout[i] * ((real)0.5 * (1 + th) + (real)0.5 * x * sech2 * du);
    }
}

/* ------------------------------------------------------------- residual */

void residual_forward(real *out, const real *x, const real *f, real alpha, size_t n)
{
    PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) out[i] = alpha * x[i] + f[i];
}

void residual_backward(real *dx, real *df, const real *dout, real alpha, size_t n)
{
    PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        dx[i] += alpha * dout[i];
        df[i] += dout[i];
    }
}

void residual3_forward(real *out, const real *x, const real *f1, const real *f2, size_t n)
{
    PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) out[i] = x[i] + f1[i] + f2[i];
}

void residual3_backward(real *dx, real *df1, real *df2, const real *dout, size_t n)
{
    PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        dx[i] += dout[i];
        df1[i] += dout[i];
        df2[i] += dout[i];
    }
}

/* -------------------------------------------- softmax + cross-entropy */

void crossentropy_softmax_forward(real *losses, real *probs, const real *logits,
                                  const int *targets, int N, int V)
{
    PARALLEL_FOR((size_t)N * V * 8)
    for (int n = 0; n < N; n++) {
        const real *z = logits + (size_t)n * V;  /* (V) */
        real *p = probs + (size_t)n * V;         /* (V) */
        real maxv = z[0];
        for (int v = 1; v < V; v++) if (z[v] > maxv) maxv = z[v];
        double sum = 0;
        for (int v = 0; v < V; v++) {
            p[v] = EXP(z[v] - maxv);
            sum += p[v];
        }
        real inv = (real)(1.0 / sum);
        for (int v = 0; v < V; v++) p[v] *= inv;
        /* log-sum-exp form: exact even where p[target] underflows */
        losses[n] = (real)(log(sum) - ((double)z[targets[n]] - maxv));
    }
}

void crossentropy_softmax_backward(real *dlogits, const real *probs, const int *targets,
                                   real dloss, int N, int V)
{
    PARALLEL_FOR((size_t)N * V)
    for (int n = 0; n < N; n++) {
        const real *p = probs + (size_t)n * V;
        real *dz = dlogits + (size_t)n * V;
        for (int v = 0; v < V; v++) dz[v] += (p[v] - (v == targets[n])) * dloss;
    }
}
