/*
 * kernels.h - the numerical operations of tinygpt, one per operation, each
 * with its forward and backward kernel side by side.
 *
 * Dimension names used in every shape comment:
 *   B  = batch size            T  = sequence length (time)
 *   C  = d_model (channels)    NH = attention heads, hs = C / NH
 *   V  = vocabulary            N  = B * T tokens (the rows of every activation)
 *   IC, OC = input and output channels of a matmul
 * A shape (N, C) means N rows of C contiguous values (row-major).
 *
 * Conventions:
 *   - Outputs first, then inputs, sizes last.
 *   - Weight matrices are stored (IC, OC), "y = x W" as in GPT-2's original
 *     checkpoints, so that the forward matmul and the weight gradient are
 *     row-times-scalar updates (axpy) the compiler vectorizes without
 *     reassociating sums.
 *   - Backward kernels ACCUMULATE (+=) into every gradient they produce (as
 *     llm.c does). The model zeroes all gradients once per step; a tensor
 *     read by two consumers (the residual stream feeds the add and the norm)
 *     then collects both contributions with no extra code.
 *   - Determinism: every output element is computed by one thread in a fixed
 *     sequential order. Parallel loops run over independent rows, heads or
 *     weight rows; no sum depends on the schedule, so results are bitwise
 *     identical for any thread count.
 */
#ifndef TINYGPT_KERNELS_H
#define TINYGPT_KERNELS_H

#include <stddef.h>

/* The model's scalar type: float for training, double for the gradient
 * check (compile everything with -DTINYGPT_DOUBLE). */
#ifdef TINYGPT_DOUBLE
typedef double real;
#else
typedef float real;
#endif

/* ---- token + position embedding ------------------------------------- */
void encoder_forward(real *out,          /* (B, T, C) */
                     const int *tokens,  /* (B, T) */
                     const real *wte,    /* (V, C) */
                     const real *wpe,    /* (T, C) */
                     int B, int T, int C);
void encoder_backward(real *dwte,        /* (V, C) */
                      real *dwpe,        /* (T, C) */
                      const real *dout,  /* (B, T, C) */
                      const int *tokens, /* (B, T) */
                      int B, int T, int C);

/* ---- LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias ---------- */
void layernorm_forward(real *out,          /* (N, C) */
                       real *mean,         /* (N) saved for backward */
                       real *rstd,         /* (N) 1 / sqrt(var + eps), saved */
                       const real *inp,    /* (N, C) */
                       const real *weight, /* (C) gamma */
                       const real *bias,   /* (C) beta */
                       int N, int C);
void layernorm_backward(real *dinp,         /* (N, C) */
                        real *dweight,      /* (C) */
                        real *dbias,        /* (C) */
                        const real *dout,   /* (N, C) */
                        const real *inp,    /* (N, C) */
                        const real *weight, /* (C) */
                        const real *mean,   /* (N) */
                        const real *rstd,   /* (N) */
                        int N, int C);

/* ---- RMSNorm: x / sqrt(mean(x^2) + eps) * weight ---------------------- */
void rmsnorm_forward(real *out,          /* (N, C) */
                     real *rstd,         /* (N) 1 / sqrt(mean(x^2) + eps), saved */
                     const real *inp,    /* (N, C) */
                     const real *weight, /* (C) gamma */
                     int N, int C);
void rmsnorm_backward(real *dinp,         /* (N, C) */
                      real *dweight,      /* (C) */
                      const real *dout,   /* (N, C) */
                      const real *inp,    /* (N, C) */
                      const real *weight, /* (C) */
                      const real *rstd,   /* (N) */
                      int N, int C);

/* The epsilon of both norms (PyTorch's LayerNorm default). */
#define TG_NORM_EPS 1e-5

/* ---- matmul: out = inp @ weight + bias -------------------------------- */
void matmul_forward(real *out,          /* (N, OC) */
                    const real *inp,    /* (N, IC) */
                    const real *weight, /* (IC, OC) */
                    const real *bias,   /* (OC) or NULL */
                    int N, int IC, int OC);
/* scratch: (OC, IC), receives weight transposed so that dinp is an axpy too. */
void matmul_backward(real *dinp,         /* (N, IC) */
                     real *dweight,      /* (IC, OC) */
                     real *dbias,        /* (OC) or NULL */
                     const real *dout,   /* (N, OC) */
                     const real *inp,    /* (N, IC) */
                     const real *weight, /* (IC, OC) */
                     real *scratch,      /* (OC, IC) */
                     int N, int IC, int OC);

/* ---- causal multi-head self-attention (without the projections) ------- */
/* qkv holds q | k | v along the columns; head h uses columns h*hs..h*hs+hs-1
 * of each third. */
void attention_forward(real *out,       /* (N, C) concatenated head outputs */
                       real *att,       /* (B, NH, T, T) softmax probabilities, saved */
                       const real *qkv, /* (N, 3C) */
                       int B, int T, int C, int NH);
void attention_backward(real *dqkv,       /* (N, 3C) */
                        real *datt,       /* (B, NH, T, T) scratch */
                        const real *dout, /* (N, C) */
                        const real *qkv,  /* (N, 3C) */
                        const real *att,  /* (B, NH, T, T) */
                        int B, int T, int C, int NH);

/* ---- GELU, tanh approximation (GPT-2) --------------------------------- */
void gelu_forward(real *out, const real *inp, size_t n);              /* (n) */
void gelu_backward(real *dinp, const real *inp, const real *dout, size_t n); /* (n) */

/* ---- residual add: out = alpha * x + f --------------------------------- */
/* alpha is 1 except in DeepNorm, which up-weights the stream. */
void residual_forward(real *out, const real *x, const real *f, real alpha, size_t n);
void residual_backward(real *dx, real *df, const real *dout, real alpha, size_t n);
/* The parallel block's two-branch add: out = x + f1 + f2. */
void residual3_forward(real *out, const real *x, const real *f1, const real *f2, size_t n);
void residual3_backward(real *dx, real *df1, real *df2, const real *dout, size_t n);

/* ---- softmax + cross-entropy ------------------------------------------ */
void crossentropy_softmax_forward(real *losses,       /* (N) -log p(target) */
                                  real *probs,        /* (N, V) saved */
                                  const real *logits, /* (N, V) */
                                  const int *targets, /* (N) */
                                  int N, int V);
/* dloss: dL/d(each token's loss), 1/N for the mean loss. */
void crossentropy_softmax_backward(real *dlogits,      /* (N, V) */
                                   const real *probs,  /* (N, V) */
                                   const int *targets, /* (N) */
                                   real dloss, int N, int V);

#endif /* TINYGPT_KERNELS_H */
