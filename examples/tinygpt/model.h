/*
 * model.h - tinygpt: a GPT-style decoder (token + position embedding, L
 * blocks of causal self-attention and a GELU MLP, an optional final norm, an
 * untied output head, cross-entropy), with every norm placement that
 * resdiag tells apart, forward and backward.
 *
 * Dimensions as in kernels.h: B batch, T sequence, C d_model, NH heads,
 * V vocabulary, N = B*T tokens, L layers. Each block has two sublayers,
 * s = 0 (attention, "attn") and s = 1 (MLP, "mlp").
 *
 * Placements, per sublayer with branch F (attention or MLP):
 *   pre       x + F(Norm(x))
 *   post      Norm(x + F(x))
 *   sandwich  x + Norm2(F(Norm(x)))              (Peri-LN)
 *   deepnorm  Norm(alpha*x + F(x)), alpha = (2L)^(1/4); beta = (8L)^(-1/4)
 *             scales the init of the value/output projections and the MLP
 *   mix:K     post-norm in layers 0..K-1, pre-norm after (Mix-LN)
 *   parallel  x + Attn(Norm(x)) + MLP(Norm(x)), one norm shared per block
 *   none      x + F(x)
 *   reordered x + Norm(F(x)): the only norm on the branch's output, the
 *             branch reads the raw stream (OLMo 2, Swin v2 res-post-norm)
 *   hybrid    per sublayer: attention x + Attn(x) (no norm), MLP
 *             Norm(x + MLP(x)) (post-norm), in every layer
 */
#ifndef TINYGPT_MODEL_H
#define TINYGPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

typedef enum tg_placement {
    TG_PRE, TG_POST, TG_SANDWICH, TG_DEEPNORM, TG_MIX, TG_PARALLEL, TG_NONE,
    TG_REORDERED, TG_HYBRID
} tg_placement;
typedef enum tg_norm { TG_LAYERNORM, TG_RMSNORM } tg_norm;
typedef enum tg_init { TG_INIT_GPT2, TG_INIT_XAVIER } tg_init;

enum { TG_ATTN = 0, TG_MLP = 1, TG_N_SUBLAYERS = 2 };

typedef struct tg_config {
    int n_layers;            /* L */
    int d_model;             /* C */
    int n_heads;             /* NH, divides C */
    int seq_len;             /* T */
    int batch;               /* B */
    int vocab;               /* V */
    tg_placement placement;
    int mix_layers;          /* TG_MIX: layers 0..mix_layers-1 are post-norm */
    tg_norm norm;
    int final_norm;          /* 1: a norm between the last block and the head */
    tg_init init;
} tg_config;

/* NULL if cfg is usable, else a message saying what is wrong. */
const char *tg_config_check(const tg_config *cfg);
/* The placement that layer `layer` actually uses: TG_POST or TG_PRE for
 * TG_MIX, the configured one otherwise (TG_HYBRID stays TG_HYBRID). */
tg_placement tg_layer_placement(const tg_config *cfg, int layer);
/* The placement of sublayer s of layer `layer` alone: as tg_layer_placement,
 * with TG_HYBRID resolved to TG_NONE (attention) and TG_POST (MLP). */
tg_placement tg_sublayer_placement(const tg_config *cfg, int layer, int s);
double tg_deepnorm_alpha(int n_layers);
double tg_deepnorm_beta(int n_layers);
const char *tg_placement_name(tg_placement p);  /* "pre", "post", ... */

/* Pointers to one set of parameters (or to their gradients: the same layout
 * in a second buffer). A tensor that the configuration does not use is NULL
 * and has no storage. */
typedef struct tg_layer_weights {
    real *norm_g[TG_N_SUBLAYERS];  /* (C) the sublayer's norm: before F (pre, sandwich,
                                      mix-pre), after the add (post, deepnorm, mix-post,
                                      hybrid's MLP); parallel: [TG_ATTN] is the block's
                                      shared norm */
    real *norm_b[TG_N_SUBLAYERS];  /* (C) LayerNorm bias */
    real *norm2_g[TG_N_SUBLAYERS]; /* (C) the norm on F's output ("out_norm"): sandwich's
                                      second, reordered's only one */
    real *norm2_b[TG_N_SUBLAYERS]; /* (C) */
    real *wqkv;                    /* (C, 3C) q | k | v projections */
    real *bqkv;                    /* (3C) */
    real *wo;                      /* (C, C) attention output projection */
    real *bo;                      /* (C) */
    real *w1;                      /* (C, 4C) MLP up */
    real *b1;                      /* (4C) */
    real *w2;                      /* (4C, C) MLP down ("W2") */
    real *b2;                      /* (C) */
} tg_layer_weights;

typedef struct tg_weights {
    real *wte;                 /* (V, C) token embedding */
    real *wpe;                 /* (T, C) position embedding */
    tg_layer_weights *layer;   /* (L) */
    real *lnf_g, *lnf_b;       /* (C) final norm */
    real *head;                /* (C, V) output head */
} tg_weights;

/* One row of the parameter table: every parameter tensor in storage order. */
typedef enum tg_param_kind {
    TG_KIND_MATRIX,     /* weight matrices and embeddings: initialised randomly, decayed */
    TG_KIND_GAIN,       /* norm gains: 1 */
    TG_KIND_BIAS        /* biases and norm biases: 0 */
} tg_param_kind;

typedef struct tg_param {
    char name[32];      /* "attn.wqkv", "embed.wte", ... */
    int layer;          /* 0..L-1, or -1 for model-level tensors */
    int rows, cols;     /* shape */
    size_t offset;      /* into tg_model.params / .grads */
    tg_param_kind kind;
    double init_scale;  /* std (gpt2) or bound factor (xavier) multiplier: 1/sqrt(2L), beta, 1 */
} tg_param;

/* Activations of one sublayer (the same layout again holds their gradients). */
typedef struct tg_sublayer_acts {
    real *norm_out;    /* (N, C) output of the norm that feeds F (pre, sandwich, parallel) */
    real *norm_mean;   /* (N) */
    real *norm_rstd;   /* (N) */
    real *sum;         /* (N, C) post/deepnorm: alpha*x + F(x), the norm's input */
    real *branch;      /* (N, C) F's output */
    real *norm2_out;   /* (N, C) sandwich, reordered: Norm2(F(...)), what is added */
    real *norm2_mean;  /* (N) */
    real *norm2_rstd;  /* (N) */
} tg_sublayer_acts;

typedef struct tg_layer_acts {
    tg_sublayer_acts sub[TG_N_SUBLAYERS];
    real *qkv;   /* (N, 3C) */
    real *att;   /* (B, NH, T, T) attention probabilities */
    real *atty;  /* (N, C) heads' outputs before the output projection */
    real *h;     /* (N, 4C) MLP pre-activation */
    real *hg;    /* (N, 4C) gelu(h) */
} tg_layer_acts;

typedef struct tg_acts {
    real *stream;           /* (2L+1, N, C): stream 2l+s enters sublayer s of layer l;
                               stream 0 is the embedding, stream 2L leaves the last block.
                               (Parallel blocks skip the odd streams.) */
    tg_layer_acts *layer;   /* (L) */
    real *lnf;              /* (N, C) final norm output */
    real *lnf_mean;         /* (N) */
    real *lnf_rstd;         /* (N) */
    real *logits;           /* (N, V) */
    real *probs;            /* (N, V) */
    real *losses;           /* (N) */
} tg_acts;

struct tg_instr; /* instrument.h: the resdiag connection, NULL for none */

typedef struct tg_model {
    tg_config cfg;
    int n_tensors;
    tg_param *tensors;     /* (n_tensors) the parameter table */
    size_t n_params;
    real *params;          /* (n_params) all parameters, one buffer */
    real *grads;           /* (n_params) dLoss/dparams of the last backward */
    tg_weights w;          /* views into params */
    tg_weights g;          /* views into grads */
    size_t n_acts;
    real *acts_mem;        /* (n_acts) */
    real *dacts_mem;       /* (n_acts) */
    tg_acts a;             /* views into acts_mem */
    tg_acts da;            /* the same views into dacts_mem: dLoss/d(activation) */
    real *scratch;         /* (max(4C, V) * C) matmul_backward's transposed weight */
    int *inputs;           /* (B, T) tokens of the last forward */
    int *targets;          /* (B, T) */
    double loss;           /* mean cross-entropy of the last forward */
    struct tg_instr *hooks;
    /* Gradient accumulation (tinygpt --grad-accum): the model runs one
     * micro-batch (cfg.batch sequences) at a time. tg_backward computes the
     * gradient of the loss summed over this micro-batch's tokens divided by
     * loss_tokens (0: by the micro-batch's own N = B*T, the mean loss), so
     * that with loss_tokens = the optimizer step's tokens every backward
     * tensor is that of the whole step's mean loss; accumulate = 1 adds the
     * parameter gradients to m->grads instead of overwriting them; and
     * param_hooks = 0 skips the parameter-gradient hooks (on for the last
     * micro-batch, whose backward completes each gradient). tg_model_create
     * sets 0, 0, 1: one batch per step. */
    int loss_tokens;
    int accumulate;
    int param_hooks;
} tg_model;

/* Allocates the model for cfg (which must pass tg_config_check). Returns 0,
 * or -1 if memory ran out (m is then freed). Parameters are zero. */
int tg_model_create(tg_model *m, const tg_config *cfg);
void tg_model_free(tg_model *m);
/* Initialises every parameter from seed per cfg.init (and DeepNorm's beta). */
void tg_model_init_params(tg_model *m, uint64_t seed);
/* Mean cross-entropy of predicting targets from inputs, both (B, T). Keeps
 * the activations for tg_backward. */
double tg_forward(tg_model *m, const int *inputs, const int *targets);
/* Gradients of the last forward's loss into m->grads (overwritten, or
 * added with m->accumulate; scaled per m->loss_tokens). */
void tg_backward(tg_model *m);
/* The parameter-gradient hooks of tg_backward, on m->grads as they are
 * now: for a trainer that changes the gradients after tg_backward and
 * records them then (tinygpt-mpi sums them over the ranks first, with
 * param_hooks = 0 during the backward). */
void tg_param_grad_hooks(tg_model *m);

#endif /* TINYGPT_MODEL_H */
