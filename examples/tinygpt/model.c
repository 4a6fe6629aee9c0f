/*
 * model.c - tinygpt's parameter layout, initialisation, forward and
 * backward, for every norm placement (see model.h), with the resdiag hooks
 * at the places where each norm, sublayer and residual add happens.
 *
 * Dimensions as in kernels.h: B batch, T sequence, C d_model, NH heads,
 * V vocabulary, N = B*T tokens, L layers; NC = N*C elements of a stream.
 *
 * The hooks (instrument.h) sit on the line right after the kernel call whose
 * input or output they observe, so the "file:line" that resdiag records
 * points at that call. The order of the hook calls inside a sublayer is the
 * order of the computation, which resdiag also uses as evidence.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instrument.h"
#include "rng.h"

/* ------------------------------------------------------------ config */

const char *tg_placement_name(tg_placement p)
{
    switch (p) {
    case TG_PRE: return "pre";
    case TG_POST: return "post";
    case TG_SANDWICH: return "sandwich";
    case TG_DEEPNORM: return "deepnorm";
    case TG_MIX: return "mix";
    case TG_PARALLEL: return "parallel";
    case TG_NONE: return "none";
    case TG_REORDERED: return "reordered";
    case TG_HYBRID: return "hybrid";
    }
    return "?";
}

const char *tg_config_check(const tg_config *c)
{
    /* The bounds keep every index product far inside int and size_t. */
    if (c->n_layers < 1 || c->n_layers > 1024) return "layers must be in [1, 1024]";
    if (c->d_model < 1 || c->d_model > 16384) return "d-model must be in [1, 16384]";
    if (c->n_heads < 1 || c->n_heads > c->d_model) return "heads must be in [1, d-model]";
    if (c->d_model % c->n_heads != 0) return "heads must divide d-model";
    if (c->seq_len < 1 || c->seq_len > 65536) return "seq must be in [1, 65536]";
    if (c->batch < 1 || c->batch > 65536) return "batch must be in [1, 65536]";
    if ((long long)c->batch * c->seq_len > (1LL << 22)) return "batch * seq must be at most 4194304";
    if (c->vocab < 2 || c->vocab > (1 << 20)) return "vocab must be in [2, 1048576]";
    if (c->placement == TG_MIX && (c->mix_layers < 1 || c->mix_layers >= c->n_layers))
        return "mix:K needs 1 <= K < layers";
    return NULL;
}

tg_placement tg_layer_placement(const tg_config *cfg, int layer)
{
    if (cfg->placement == TG_MIX) return layer < cfg->mix_layers ? TG_POST : TG_PRE;
    return cfg->placement;
}

tg_placement tg_sublayer_placement(const tg_config *cfg, int layer, int s)
{
    tg_placement p = tg_layer_placement(cfg, layer);
    if (p == TG_HYBRID) return s == TG_ATTN ? TG_NONE : TG_POST;
    return p;
}

/* DeepNet (Wang et al. 2022), decoder-only with L layers. */
double tg_deepnorm_alpha(int n_layers) { return pow(2.0 * n_layers, 0.25); }
double tg_deepnorm_beta(int n_layers) { return pow(8.0 * n_layers, -0.25); }

/* ----------------------------------------------------- parameter layout */

/* Walks every parameter tensor in storage order. With m->params NULL it only
 * counts (tensors, elements); afterwards it fills the table and points w/g
 * into the buffers. Tensors that the configuration does not use get no
 * storage and stay NULL. */
typedef struct layout {
    tg_model *m;
    int n_tensors;
    size_t n_params;
} layout;

static void add_param(layout *lo, real **wslot, real **gslot, const char *name, int layer,
                      int rows, int cols, tg_param_kind kind, double init_scale)
{
    tg_model *m = lo->m;
    if (m->params) {
        tg_param *p = &m->tensors[lo->n_tensors];
        snprintf(p->name, sizeof p->name, "%s", name);
        p->layer = layer;
        p->rows = rows;
        p->cols = cols;
        p->offset = lo->n_params;
        p->kind = kind;
        p->init_scale = init_scale;
        *wslot = m->params + lo->n_params;
        *gslot = m->grads + lo->n_params;
    }
    lo->n_tensors++;
    lo->n_params += (size_t)rows * cols;
}

static void add_norm(layout *lo, int l, real **wg, real **gg, real **wb, real **gb,
                     const char *prefix)
{
    char name[32];
    snprintf(name, sizeof name, "%s.g", prefix);
    add_param(lo, wg, gg, name, l, 1, lo->m->cfg.d_model, TG_KIND_GAIN, 1);
    if (lo->m->cfg.norm == TG_LAYERNORM) {
        snprintf(name, sizeof name, "%s.b", prefix);
        add_param(lo, wb, gb, name, l, 1, lo->m->cfg.d_model, TG_KIND_BIAS, 1);
    }
}

static void layout_params(layout *lo)
{
    tg_model *m = lo->m;
    const tg_config *c = &m->cfg;
    int C = c->d_model, L = c->n_layers;
    static const char *const sub_name[TG_N_SUBLAYERS] = { "attn", "mlp" };
    /* gpt2: residual output projections scaled by 1/sqrt(2L) so the stream's
     * variance grows by O(1) over the whole depth; DeepNorm replaces that by
     * its beta on the value/output projections and the MLP (the q/k part of
     * wqkv is scaled separately in tg_model_init_params). */
    int deep = c->placement == TG_DEEPNORM;
    double resid = deep ? tg_deepnorm_beta(L) : c->init == TG_INIT_GPT2 ? 1.0 / sqrt(2.0 * L) : 1.0;
    double mlp_in = deep ? tg_deepnorm_beta(L) : 1.0;

    add_param(lo, &m->w.wte, &m->g.wte, "embed.wte", -1, c->vocab, C, TG_KIND_MATRIX, 1);
    add_param(lo, &m->w.wpe, &m->g.wpe, "embed.wpe", -1, c->seq_len, C, TG_KIND_MATRIX, 1);
    for (int l = 0; l < L; l++) {
        tg_layer_weights *w = &m->w.layer[l], *g = &m->g.layer[l];
        char prefix[32];
        for (int s = 0; s < TG_N_SUBLAYERS; s++) {
            tg_placement p = tg_sublayer_placement(c, l, s);
            /* One norm per sublayer, except: none has none, parallel shares
             * the attention slot's norm, sandwich adds one after F, and
             * reordered has only that one after F. */
            if (p == TG_PARALLEL) {
                if (s == TG_ATTN)
                    add_norm(lo, l, &w->norm_g[s], &g->norm_g[s], &w->norm_b[s], &g->norm_b[s], "norm");
            } else if (p != TG_NONE && p != TG_REORDERED) {
                snprintf(prefix, sizeof prefix, "%s.norm", sub_name[s]);
                add_norm(lo, l, &w->norm_g[s], &g->norm_g[s], &w->norm_b[s], &g->norm_b[s], prefix);
            }
            if (p == TG_SANDWICH || p == TG_REORDERED) {
                snprintf(prefix, sizeof prefix, "%s.out_norm", sub_name[s]);
                add_norm(lo, l, &w->norm2_g[s], &g->norm2_g[s], &w->norm2_b[s], &g->norm2_b[s], prefix);
            }
            if (s == TG_ATTN) {
                add_param(lo, &w->wqkv, &g->wqkv, "attn.wqkv", l, C, 3 * C, TG_KIND_MATRIX, 1);
                add_param(lo, &w->bqkv, &g->bqkv, "attn.bqkv", l, 1, 3 * C, TG_KIND_BIAS, 1);
                add_param(lo, &w->wo, &g->wo, "attn.wo", l, C, C, TG_KIND_MATRIX, resid);
                add_param(lo, &w->bo, &g->bo, "attn.bo", l, 1, C, TG_KIND_BIAS, 1);
            } else {
                add_param(lo, &w->w1, &g->w1, "mlp.w1", l, C, 4 * C, TG_KIND_MATRIX, mlp_in);
                add_param(lo, &w->b1, &g->b1, "mlp.b1", l, 1, 4 * C, TG_KIND_BIAS, 1);
                add_param(lo, &w->w2, &g->w2, "mlp.w2", l, 4 * C, C, TG_KIND_MATRIX, resid);
                add_param(lo, &w->b2, &g->b2, "mlp.b2", l, 1, C, TG_KIND_BIAS, 1);
            }
        }
    }
    if (c->final_norm)
        add_norm(lo, -1, &m->w.lnf_g, &m->g.lnf_g, &m->w.lnf_b, &m->g.lnf_b, "final_norm");
    add_param(lo, &m->w.head, &m->g.head, "head.w", -1, C, c->vocab, TG_KIND_MATRIX, 1);
}

/* Activations: the same counting / assigning walk over acts_mem and dacts_mem. */
typedef struct act_layout {
    tg_model *m;
    size_t n;
} act_layout;

static void add_act(act_layout *lo, real **aslot, real **dslot, size_t count)
{
    if (lo->m->acts_mem) {
        *aslot = lo->m->acts_mem + lo->n;
        *dslot = lo->m->dacts_mem + lo->n;
    }
    lo->n += count;
}

static void layout_acts(act_layout *lo)
{
    tg_model *m = lo->m;
    const tg_config *c = &m->cfg;
    size_t C = (size_t)c->d_model, N = (size_t)c->batch * c->seq_len, V = (size_t)c->vocab;
    size_t T = (size_t)c->seq_len;
    tg_acts *a = &m->a, *d = &m->da;
    /* Every buffer exists for every placement: simpler than tailoring, and
     * the unused ones cost memory only. */
    add_act(lo, &a->stream, &d->stream, (2 * (size_t)c->n_layers + 1) * N * C);
    for (int l = 0; l < c->n_layers; l++) {
        tg_layer_acts *al = &a->layer[l], *dl = &d->layer[l];
        for (int s = 0; s < TG_N_SUBLAYERS; s++) {
            tg_sublayer_acts *as = &al->sub[s], *ds = &dl->sub[s];
            add_act(lo, &as->norm_out, &ds->norm_out, N * C);
            add_act(lo, &as->norm_mean, &ds->norm_mean, N);
            add_act(lo, &as->norm_rstd, &ds->norm_rstd, N);
            add_act(lo, &as->sum, &ds->sum, N * C);
            add_act(lo, &as->branch, &ds->branch, N * C);
            add_act(lo, &as->norm2_out, &ds->norm2_out, N * C);
            add_act(lo, &as->norm2_mean, &ds->norm2_mean, N);
            add_act(lo, &as->norm2_rstd, &ds->norm2_rstd, N);
        }
        add_act(lo, &al->qkv, &dl->qkv, N * 3 * C);
        add_act(lo, &al->att, &dl->att, (size_t)c->batch * c->n_heads * T * T);
        add_act(lo, &al->atty, &dl->atty, N * C);
        add_act(lo, &al->h, &dl->h, N * 4 * C);
        add_act(lo, &al->hg, &dl->hg, N * 4 * C);
    }
    add_act(lo, &a->lnf, &d->lnf, N * C);
    add_act(lo, &a->lnf_mean, &d->lnf_mean, N);
    add_act(lo, &a->lnf_rstd, &d->lnf_rstd, N);
    add_act(lo, &a->logits, &d->logits, N * V);
    add_act(lo, &a->probs, &d->probs, N * V);
    add_act(lo, &a->losses, &d->losses, N);
}

int tg_model_create(tg_model *m, const tg_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->param_hooks = 1;
    int L = cfg->n_layers;
    size_t N = (size_t)cfg->batch * cfg->seq_len, C = (size_t)cfg->d_model;
    m->w.layer = calloc((size_t)L, sizeof *m->w.layer);
    m->g.layer = calloc((size_t)L, sizeof *m->g.layer);
    m->a.layer = calloc((size_t)L, sizeof *m->a.layer);
    m->da.layer = calloc((size_t)L, sizeof *m->da.layer);
    if (!m->w.layer || !m->g.layer || !m->a.layer || !m->da.layer) goto fail;

    layout lo = { m, 0, 0 };
    layout_params(&lo);                       /* count */
    m->n_tensors = lo.n_tensors;
    m->n_params = lo.n_params;
    m->tensors = calloc((size_t)m->n_tensors, sizeof *m->tensors);
    m->params = calloc(m->n_params, sizeof *m->params);
    m->grads = calloc(m->n_params, sizeof *m->grads);
    if (!m->tensors || !m->params || !m->grads) goto fail;
    lo = (layout){ m, 0, 0 };
    layout_params(&lo);                       /* assign */

    act_layout al = { m, 0 };
    layout_acts(&al);
    m->n_acts = al.n;
    m->acts_mem = calloc(m->n_acts, sizeof *m->acts_mem);
    m->dacts_mem = calloc(m->n_acts, sizeof *m->dacts_mem);
    if (!m->acts_mem || !m->dacts_mem) goto fail;
    al = (act_layout){ m, 0 };
    layout_acts(&al);

    size_t wide = 4 * C > (size_t)cfg->vocab ? 4 * C : (size_t)cfg->vocab;
    m->scratch = malloc(wide * C * sizeof *m->scratch);
    m->inputs = malloc(N * sizeof *m->inputs);
    m->targets = malloc(N * sizeof *m->targets);
    if (!m->scratch || !m->inputs || !m->targets) goto fail;
    return 0;
fail:
    tg_model_free(m);
    return -1;
}

void tg_model_free(tg_model *m)
{
    if (!m) return;
    free(m->w.layer);
    free(m->g.layer);
    free(m->a.layer);
    free(m->da.layer);
    free(m->tensors);
    free(m->params);
    free(m->grads);
    free(m->acts_mem);
    free(m->dacts_mem);
    free(m->scratch);
    free(m->inputs);
    free(m->targets);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------ initialisation */

void tg_model_init_params(tg_model *m, uint64_t seed)
{
    const tg_config *c = &m->cfg;
    tg_rng rng;
    tg_rng_seed(&rng, seed);
    double beta = tg_deepnorm_beta(c->n_layers);
    for (int t = 0; t < m->n_tensors; t++) {
        const tg_param *p = &m->tensors[t];
        real *x = m->params + p->offset;
        size_t n = (size_t)p->rows * p->cols;
        if (p->kind == TG_KIND_GAIN) {
            for (size_t i = 0; i < n; i++) x[i] = 1;
            continue;
        }
        if (p->kind == TG_KIND_BIAS) {
            for (size_t i = 0; i < n; i++) x[i] = 0;
            continue;
        }
        /* wqkv is three (C, C) projections side by side: Glorot's fans are
         * those of one projection, and DeepNorm scales only v by beta. */
        int is_qkv = strcmp(p->name, "attn.wqkv") == 0;
        int fan_in = p->rows, fan_out = is_qkv ? p->cols / 3 : p->cols;
        double bound = sqrt(6.0 / (fan_in + fan_out));
        for (int r = 0; r < p->rows; r++)
            for (int col = 0; col < p->cols; col++) {
                double scale = p->init_scale;
                if (is_qkv && c->placement == TG_DEEPNORM && col >= 2 * c->d_model) scale = beta;
                double v = c->init == TG_INIT_GPT2
                               ? 0.02 * tg_rng_normal(&rng)
                               : bound * (2 * tg_rng_uniform(&rng) - 1);
                x[(size_t)r * p->cols + col] = (real)(scale * v);
            }
    }
}

/* -------------------------------------------------------------- forward */

#define B (m->cfg.batch)
#define T (m->cfg.seq_len)
#define C (m->cfg.d_model)
#define NH (m->cfg.n_heads)
#define V (m->cfg.vocab)
#define L (m->cfg.n_layers)
#define N (B * T)
#define NC ((size_t)N * C)

/* Stream k (N, C) of the activations (or, with m->da, of their gradients). */
static real *stream_at(const tg_acts *a, const tg_model *m, int k)
{
    return a->stream + (size_t)k * NC;
}

/* The configured norm, LayerNorm or RMSNorm (mean and bias unused by RMSNorm). */
static void norm_forward(const tg_model *m, real *out, real *mean, real *rstd,
                         const real *inp, const real *g, const real *b)
{
    if (m->cfg.norm == TG_LAYERNORM) layernorm_forward(out, mean, rstd, inp, g, b, N, C);
    else rmsnorm_forward(out, rstd, inp, g, N, C);
}

static void norm_backward(const tg_model *m, real *dinp, real *dg, real *db,
                          const real *dout, const real *inp, const real *g,
                          const real *mean, const real *rstd)
{
    if (m->cfg.norm == TG_LAYERNORM)
        layernorm_backward(dinp, dg, db, dout, inp, g, mean, rstd, N, C);
    else rmsnorm_backward(dinp, dg, dout, inp, g, rstd, N, C);
}

/* F of sublayer s of layer l: attention or MLP, in (N, C) -> out (N, C). */
static void branch_forward(tg_model *m, int l, int s, real *out, const real *in)
{
    const tg_layer_weights *w = &m->w.layer[l];
    tg_layer_acts *a = &m->a.layer[l];
    if (s == TG_ATTN) {
        matmul_forward(a->qkv, in, w->wqkv, w->bqkv, N, C, 3 * C);
        attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
        matmul_forward(out, a->atty, w->wo, w->bo, N, C, C);
    } else {
        matmul_forward(a->h, in, w->w1, w->b1, N, C, 4 * C);
        gelu_forward(a->hg, a->h, (size_t)N * 4 * C);
        matmul_forward(out, a->hg, w->w2, w->b2, N, 4 * C, C);
    }
}

/* One sequential sublayer: stream 2l+s -> stream 2l+s+1. */
static void sublayer_forward(tg_model *m, int l, int s)
{
    tg_instr *h = m->hooks;
    const tg_layer_weights *w = &m->w.layer[l];
    tg_sublayer_acts *a = &m->a.layer[l].sub[s];
    const real *x = stream_at(&m->a, m, 2 * l + s);  /* (N, C) stream in */
    real *y = stream_at(&m->a, m, 2 * l + s + 1);    /* (N, C) stream out */
#define FWD(site, t) HOOK_FWD(h, l, s, site, t, N, C)
/* site holds the very buffer recorded at from_site of this sublayer */
#define SAME(site, t, from_site) HOOK_FWD_SAME(h, l, s, site, t, N, C, l, s, from_site)
    /* x is the buffer the sublayer before wrote (the embedding for the
     * first): recorded from that hook, not read again. The norm's input
     * is read even where it is x: that it reads the stream is evidence.
     * branch_in, and branch_out where it is the output norm's output, are
     * the buffer of a site recorded just before: copies of it. */
    if (l == 0 && s == 0)
        HOOK_FWD_SAME(h, l, s, TG_STREAM_IN, x, N, C, TG_MODEL_LEVEL, 0, TG_EMBED_OUT);
    else
        HOOK_FWD_SAME(h, l, s, TG_STREAM_IN, x, N, C, s ? l : l - 1, s ? s - 1 : TG_N_SUBLAYERS - 1,
                      TG_STREAM_OUT);
    tg_placement p = tg_sublayer_placement(&m->cfg, l, s);
    switch (p) {
    case TG_PRE:  /* x + F(Norm(x)) */
        norm_forward(m, a->norm_out, a->norm_mean, a->norm_rstd, x, w->norm_g[s], w->norm_b[s]);
        FWD(TG_NORM_IN, x);
        FWD(TG_NORM_OUT, a->norm_out);
        branch_forward(m, l, s, a->branch, a->norm_out);
        SAME(TG_BRANCH_IN, a->norm_out, TG_NORM_OUT);  /* F reads the norm's output */
        FWD(TG_BRANCH_OUT, a->branch);
        residual_forward(y, x, a->branch, 1, NC);
        FWD(TG_STREAM_OUT, y);
        break;
    case TG_POST:      /* Norm(x + F(x)) */
    case TG_DEEPNORM:  /* Norm(alpha*x + F(x)) */
        branch_forward(m, l, s, a->branch, x);
        SAME(TG_BRANCH_IN, x, TG_STREAM_IN);  /* F reads the stream */
        FWD(TG_BRANCH_OUT, a->branch);
        residual_forward(a->sum, x, a->branch,
                         p == TG_DEEPNORM ? (real)tg_deepnorm_alpha(L) : 1, NC);
        norm_forward(m, y, a->norm_mean, a->norm_rstd, a->sum, w->norm_g[s], w->norm_b[s]);
        FWD(TG_NORM_IN, a->sum);
        FWD(TG_NORM_OUT, y);
        FWD(TG_STREAM_OUT, y);  /* the norm's output is the stream */
        break;
    case TG_SANDWICH:  /* x + Norm2(F(Norm(x))) */
        /* The norm sites hold the input norm, which reads the stream; the
         * out_norm sites hold Norm2, the norm on the branch, whose output
         * is what is added (branch_out). */
        norm_forward(m, a->norm_out, a->norm_mean, a->norm_rstd, x, w->norm_g[s], w->norm_b[s]);
        FWD(TG_NORM_IN, x);
        FWD(TG_NORM_OUT, a->norm_out);
        branch_forward(m, l, s, a->branch, a->norm_out);
        SAME(TG_BRANCH_IN, a->norm_out, TG_NORM_OUT);
        norm_forward(m, a->norm2_out, a->norm2_mean, a->norm2_rstd, a->branch,
                     w->norm2_g[s], w->norm2_b[s]);
        FWD(TG_OUT_NORM_IN, a->branch);
        FWD(TG_OUT_NORM_OUT, a->norm2_out);
        SAME(TG_BRANCH_OUT, a->norm2_out, TG_OUT_NORM_OUT);  /* what is added */
        residual_forward(y, x, a->norm2_out, 1, NC);
        FWD(TG_STREAM_OUT, y);
        break;
    case TG_REORDERED:  /* x + Norm(F(x)), Norm in the out_norm slot: the norm sites stay empty */
        branch_forward(m, l, s, a->branch, x);
        SAME(TG_BRANCH_IN, x, TG_STREAM_IN);  /* F reads the stream */
        norm_forward(m, a->norm2_out, a->norm2_mean, a->norm2_rstd, a->branch,
                     w->norm2_g[s], w->norm2_b[s]);
        FWD(TG_OUT_NORM_IN, a->branch);
        FWD(TG_OUT_NORM_OUT, a->norm2_out);
        SAME(TG_BRANCH_OUT, a->norm2_out, TG_OUT_NORM_OUT);  /* what is added */
        residual_forward(y, x, a->norm2_out, 1, NC);
        FWD(TG_STREAM_OUT, y);
        break;
    case TG_NONE:  /* x + F(x) */
        branch_forward(m, l, s, a->branch, x);
        SAME(TG_BRANCH_IN, x, TG_STREAM_IN);
        FWD(TG_BRANCH_OUT, a->branch);
        residual_forward(y, x, a->branch, 1, NC);
        FWD(TG_STREAM_OUT, y);
        break;
    case TG_MIX:       /* resolved per layer by tg_layer_placement */
    case TG_HYBRID:    /* resolved per sublayer by tg_sublayer_placement */
    case TG_PARALLEL:  /* parallel_block_forward */
        break;
    }
#undef SAME
#undef FWD
}

/* A parallel block, x + Attn(Norm(x)) + MLP(Norm(x)): stream 2l -> 2l+2.
 * Both sublayers read the same stream through one shared norm; resdiag sees
 * the norm from each sublayer and the stream leaving the block on the MLP. */
static void parallel_block_forward(tg_model *m, int l)
{
    tg_instr *h = m->hooks;
    const tg_layer_weights *w = &m->w.layer[l];
    tg_sublayer_acts *at = &m->a.layer[l].sub[TG_ATTN], *ml = &m->a.layer[l].sub[TG_MLP];
    const real *x = stream_at(&m->a, m, 2 * l);   /* (N, C) */
    real *y = stream_at(&m->a, m, 2 * l + 2);     /* (N, C) */
    real *n = at->norm_out;                       /* (N, C) shared Norm(x) */
#define FWD(sub, site, t) HOOK_FWD(h, l, sub, site, t, N, C)
    /* x from the block before's hook; read for the MLP: that both
     * sublayers read one stream is the parallel verdict's evidence */
    if (l == 0)
        HOOK_FWD_SAME(h, l, TG_ATTN, TG_STREAM_IN, x, N, C, TG_MODEL_LEVEL, 0, TG_EMBED_OUT);
    else
        HOOK_FWD_SAME(h, l, TG_ATTN, TG_STREAM_IN, x, N, C, l - 1, TG_MLP, TG_STREAM_OUT);
    FWD(TG_MLP, TG_STREAM_IN, x);
    norm_forward(m, n, at->norm_mean, at->norm_rstd, x, w->norm_g[TG_ATTN], w->norm_b[TG_ATTN]);
    FWD(TG_ATTN, TG_NORM_IN, x);
    FWD(TG_MLP, TG_NORM_IN, x);
    FWD(TG_ATTN, TG_NORM_OUT, n);
    FWD(TG_MLP, TG_NORM_OUT, n);
    branch_forward(m, l, TG_ATTN, at->branch, n);
    HOOK_FWD_SAME(h, l, TG_ATTN, TG_BRANCH_IN, n, N, C, l, TG_ATTN, TG_NORM_OUT);
    FWD(TG_ATTN, TG_BRANCH_OUT, at->branch);
    branch_forward(m, l, TG_MLP, ml->branch, n);
    HOOK_FWD_SAME(h, l, TG_MLP, TG_BRANCH_IN, n, N, C, l, TG_MLP, TG_NORM_OUT);
    FWD(TG_MLP, TG_BRANCH_OUT, ml->branch);
    residual3_forward(y, x, at->branch, ml->branch, NC);
    FWD(TG_MLP, TG_STREAM_OUT, y);
#undef FWD
}

double tg_forward(tg_model *m, const int *inputs, const int *targets)
{
    tg_instr *h = m->hooks;
    memcpy(m->inputs, inputs, (size_t)N * sizeof *inputs);
    memcpy(m->targets, targets, (size_t)N * sizeof *targets);

    real *x0 = stream_at(&m->a, m, 0);  /* (N, C) */
    encoder_forward(x0, m->inputs, m->w.wte, m->w.wpe, B, T, C);
    HOOK_FWD(h, TG_MODEL_LEVEL, 0, TG_EMBED_OUT, x0, N, C);

    for (int l = 0; l < L; l++) {
        if (m->cfg.placement == TG_PARALLEL) parallel_block_forward(m, l);
        else for (int s = 0; s < TG_N_SUBLAYERS; s++) sublayer_forward(m, l, s);
    }

    real *xl = stream_at(&m->a, m, 2 * L);  /* (N, C) leaves the last block */
    const real *head_in = xl;               /* (N, C) */
    if (m->cfg.final_norm) {
        norm_forward(m, m->a.lnf, m->a.lnf_mean, m->a.lnf_rstd, xl, m->w.lnf_g, m->w.lnf_b);
        HOOK_FWD_SAME(h, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_IN, xl, N, C, L - 1,
                      TG_N_SUBLAYERS - 1, TG_STREAM_OUT);
        HOOK_FWD(h, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_OUT, m->a.lnf, N, C);
        head_in = m->a.lnf;
    } else {
        /* What the head reads is the last stream itself: observed there,
         * it shows from the data that there is no final norm. */
        HOOK_FWD(h, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_OUT, head_in, N, C);
    }
    matmul_forward(m->a.logits, head_in, m->w.head, NULL, N, C, V);
    HOOK_FWD(h, TG_MODEL_LEVEL, 0, TG_LOGITS, m->a.logits, N, V);
    crossentropy_softmax_forward(m->a.losses, m->a.probs, m->a.logits, m->targets, N, V);

    double sum = 0;  /* in double and in token order: the reported loss is reproducible */
    for (int i = 0; i < N; i++) sum += m->a.losses[i];
    m->loss = sum / N;
    return m->loss;
}

/* ------------------------------------------------------------- backward */

/* dL/din += (dF/din)^T dout for F of sublayer s, and F's parameter gradients. */
static void branch_backward(tg_model *m, int l, int s, real *din, const real *dout,
                            const real *in)
{
    tg_instr *h = m->hooks;
    const tg_layer_weights *w = &m->w.layer[l];
    tg_layer_weights *g = &m->g.layer[l];
    const tg_layer_acts *a = &m->a.layer[l];
    tg_layer_acts *d = &m->da.layer[l];
    if (s == TG_ATTN) {
        matmul_backward(d->atty, g->wo, g->bo, dout, a->atty, w->wo, m->scratch, N, C, C);
        if (m->param_hooks) HOOK_PARAM(h, l, "attn.wo", g->wo, C, C);
        attention_backward(d->qkv, d->att, d->atty, a->qkv, a->att, B, T, C, NH);
        matmul_backward(din, g->wqkv, g->bqkv, d->qkv, in, w->wqkv, m->scratch, N, C, 3 * C);
        if (m->param_hooks) HOOK_PARAM(h, l, "attn.wqkv", g->wqkv, C, 3 * C);
    } else {
        matmul_backward(d->hg, g->w2, g->b2, dout, a->hg, w->w2, m->scratch, N, 4 * C, C);
        if (m->param_hooks) HOOK_PARAM(h, l, "mlp.w2", g->w2, 4 * C, C);
        gelu_backward(d->h, a->h, d->hg, (size_t)N * 4 * C);
        matmul_backward(din, g->w1, g->b1, d->h, in, w->w1, m->scratch, N, C, 4 * C);
        if (m->param_hooks) HOOK_PARAM(h, l, "mlp.w1", g->w1, C, 4 * C);
    }
}

/* Backward of sublayer s of layer l. On entry the gradient of stream 2l+s+1
 * is complete; on return that of stream 2l+s is. Backward hooks see
 * dL/d(tensor) of the forward site's tensor. */
static void sublayer_backward(tg_model *m, int l, int s)
{
    tg_instr *h = m->hooks;
    const tg_layer_weights *w = &m->w.layer[l];
    tg_layer_weights *g = &m->g.layer[l];
    const tg_sublayer_acts *a = &m->a.layer[l].sub[s];
    tg_sublayer_acts *d = &m->da.layer[l].sub[s];
    const real *x = stream_at(&m->a, m, 2 * l + s);    /* (N, C) */
    real *dx = stream_at(&m->da, m, 2 * l + s);        /* (N, C) */
    const real *dy = stream_at(&m->da, m, 2 * l + s + 1);
#define BWD(site, t) HOOK_BWD(h, l, s, site, t, N, C)
#define SAME(site, t, from_site) HOOK_BWD_SAME(h, l, s, site, t, N, C, l, s, from_site)
    /* dy is the gradient the sublayer after returned (the final norm's,
     * for the last), recorded there */
    if (s + 1 < TG_N_SUBLAYERS)
        HOOK_BWD_SAME(h, l, s, TG_STREAM_OUT, dy, N, C, l, s + 1, TG_STREAM_IN);
    else if (l + 1 < L)
        HOOK_BWD_SAME(h, l, s, TG_STREAM_OUT, dy, N, C, l + 1, 0, TG_STREAM_IN);
    else if (m->cfg.final_norm)
        HOOK_BWD_SAME(h, l, s, TG_STREAM_OUT, dy, N, C, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_IN);
    else
        BWD(TG_STREAM_OUT, dy);
    tg_placement p = tg_sublayer_placement(&m->cfg, l, s);
    switch (p) {
    case TG_PRE:
        residual_backward(dx, d->branch, dy, 1, NC);
        BWD(TG_BRANCH_OUT, d->branch);
        branch_backward(m, l, s, d->norm_out, d->branch, a->norm_out);
        BWD(TG_NORM_OUT, d->norm_out);
        SAME(TG_BRANCH_IN, d->norm_out, TG_NORM_OUT);
        norm_backward(m, dx, g->norm_g[s], g->norm_b[s], d->norm_out, x, w->norm_g[s],
                      a->norm_mean, a->norm_rstd);
        BWD(TG_NORM_IN, dx);
        break;
    case TG_POST:
    case TG_DEEPNORM:
        BWD(TG_NORM_OUT, dy);
        norm_backward(m, d->sum, g->norm_g[s], g->norm_b[s], dy, a->sum, w->norm_g[s],
                      a->norm_mean, a->norm_rstd);
        BWD(TG_NORM_IN, d->sum);
        residual_backward(dx, d->branch, d->sum,
                          p == TG_DEEPNORM ? (real)tg_deepnorm_alpha(L) : 1, NC);
        BWD(TG_BRANCH_OUT, d->branch);
        branch_backward(m, l, s, dx, d->branch, x);
        break;
    case TG_SANDWICH:
        residual_backward(dx, d->norm2_out, dy, 1, NC);
        BWD(TG_BRANCH_OUT, d->norm2_out);
        SAME(TG_OUT_NORM_OUT, d->norm2_out, TG_BRANCH_OUT);
        norm_backward(m, d->branch, g->norm2_g[s], g->norm2_b[s], d->norm2_out, a->branch,
                      w->norm2_g[s], a->norm2_mean, a->norm2_rstd);
        BWD(TG_OUT_NORM_IN, d->branch);
        branch_backward(m, l, s, d->norm_out, d->branch, a->norm_out);
        BWD(TG_NORM_OUT, d->norm_out);
        SAME(TG_BRANCH_IN, d->norm_out, TG_NORM_OUT);
        norm_backward(m, dx, g->norm_g[s], g->norm_b[s], d->norm_out, x, w->norm_g[s],
                      a->norm_mean, a->norm_rstd);
        BWD(TG_NORM_IN, dx);
        break;
    case TG_REORDERED:
        residual_backward(dx, d->norm2_out, dy, 1, NC);
        BWD(TG_BRANCH_OUT, d->norm2_out);
        SAME(TG_OUT_NORM_OUT, d->norm2_out, TG_BRANCH_OUT);
        norm_backward(m, d->branch, g->norm2_g[s], g->norm2_b[s], d->norm2_out, a->branch,
                      w->norm2_g[s], a->norm2_mean, a->norm2_rstd);
        BWD(TG_OUT_NORM_IN, d->branch);
        branch_backward(m, l, s, dx, d->branch, x);
        break;
    case TG_NONE:
        residual_backward(dx, d->branch, dy, 1, NC);
        BWD(TG_BRANCH_OUT, d->branch);
        branch_backward(m, l, s, dx, d->branch, x);
        break;
    case TG_MIX:
    case TG_HYBRID:
    case TG_PARALLEL:
        break;
    }
    BWD(TG_STREAM_IN, dx);
    /* Where F reads the stream, its input's gradient is the stream's, whole
     * only now (the add's part and F's part). */
    if (p == TG_POST || p == TG_DEEPNORM || p == TG_REORDERED || p == TG_NONE)
        SAME(TG_BRANCH_IN, dx, TG_STREAM_IN);
#undef SAME
#undef BWD
}

static void parallel_block_backward(tg_model *m, int l)
{
    tg_instr *h = m->hooks;
    const tg_layer_weights *w = &m->w.layer[l];
    tg_layer_weights *g = &m->g.layer[l];
    const tg_sublayer_acts *at = &m->a.layer[l].sub[TG_ATTN];
    tg_sublayer_acts *dat = &m->da.layer[l].sub[TG_ATTN], *dml = &m->da.layer[l].sub[TG_MLP];
    const real *x = stream_at(&m->a, m, 2 * l);
    real *dx = stream_at(&m->da, m, 2 * l);
    const real *dy = stream_at(&m->da, m, 2 * l + 2);
    real *dn = dat->norm_out;  /* (N, C) gradient of the shared Norm(x) */
#define BWD(sub, site, t) HOOK_BWD(h, l, sub, site, t, N, C)
    if (l + 1 < L)
        HOOK_BWD_SAME(h, l, TG_MLP, TG_STREAM_OUT, dy, N, C, l + 1, TG_ATTN, TG_STREAM_IN);
    else if (m->cfg.final_norm)
        HOOK_BWD_SAME(h, l, TG_MLP, TG_STREAM_OUT, dy, N, C, TG_MODEL_LEVEL, 0,
                      TG_FINAL_NORM_IN);
    else
        BWD(TG_MLP, TG_STREAM_OUT, dy);
    residual3_backward(dx, dat->branch, dml->branch, dy, NC);
    BWD(TG_MLP, TG_BRANCH_OUT, dml->branch);
    BWD(TG_ATTN, TG_BRANCH_OUT, dat->branch);
    branch_backward(m, l, TG_MLP, dn, dml->branch, at->norm_out);
    branch_backward(m, l, TG_ATTN, dn, dat->branch, at->norm_out);
    BWD(TG_MLP, TG_NORM_OUT, dn);
    HOOK_BWD_SAME(h, l, TG_MLP, TG_BRANCH_IN, dn, N, C, l, TG_MLP, TG_NORM_OUT);
    BWD(TG_ATTN, TG_NORM_OUT, dn);
    HOOK_BWD_SAME(h, l, TG_ATTN, TG_BRANCH_IN, dn, N, C, l, TG_ATTN, TG_NORM_OUT);
    norm_backward(m, dx, g->norm_g[TG_ATTN], g->norm_b[TG_ATTN], dn, x, w->norm_g[TG_ATTN],
                  at->norm_mean, at->norm_rstd);
    BWD(TG_MLP, TG_NORM_IN, dx);
    BWD(TG_ATTN, TG_NORM_IN, dx);
    BWD(TG_MLP, TG_STREAM_IN, dx);
    HOOK_BWD_SAME(h, l, TG_ATTN, TG_STREAM_IN, dx, N, C, l, TG_MLP, TG_STREAM_IN);
#undef BWD
}

void tg_backward(tg_model *m)
{
    tg_instr *h = m->hooks;
    /* Backward kernels accumulate: start from zero (the parameter
     * gradients of earlier micro-batches stay with m->accumulate). */
    if (!m->accumulate) memset(m->grads, 0, m->n_params * sizeof *m->grads);
    memset(m->dacts_mem, 0, m->n_acts * sizeof *m->dacts_mem);

    const int loss_tokens = m->loss_tokens > 0 ? m->loss_tokens : N;
    crossentropy_softmax_backward(m->da.logits, m->a.probs, m->targets, (real)1 / loss_tokens,
                                  N, V);
    HOOK_BWD(h, TG_MODEL_LEVEL, 0, TG_LOGITS, m->da.logits, N, V);

    real *xl = stream_at(&m->a, m, 2 * L);
    real *dxl = stream_at(&m->da, m, 2 * L);
    const real *head_in = m->cfg.final_norm ? m->a.lnf : xl;
    real *dhead_in = m->cfg.final_norm ? m->da.lnf : dxl;
    matmul_backward(dhead_in, m->g.head, NULL, m->da.logits, head_in, m->w.head, m->scratch,
                    N, C, V);
    if (m->param_hooks) HOOK_PARAM(h, TG_MODEL_LEVEL, "head.w", m->g.head, C, V);
    if (m->cfg.final_norm) {
        HOOK_BWD(h, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_OUT, m->da.lnf, N, C);
        norm_backward(m, dxl, m->g.lnf_g, m->g.lnf_b, m->da.lnf, xl, m->w.lnf_g,
                      m->a.lnf_mean, m->a.lnf_rstd);
        HOOK_BWD(h, TG_MODEL_LEVEL, 0, TG_FINAL_NORM_IN, dxl, N, C);
    }

    for (int l = L - 1; l >= 0; l--) {
        if (m->cfg.placement == TG_PARALLEL) parallel_block_backward(m, l);
        else for (int s = TG_N_SUBLAYERS - 1; s >= 0; s--) sublayer_backward(m, l, s);
    }

    real *dx0 = stream_at(&m->da, m, 0);
    HOOK_BWD_SAME(h, TG_MODEL_LEVEL, 0, TG_EMBED_OUT, dx0, N, C, 0, 0, TG_STREAM_IN);
    encoder_backward(m->g.wte, m->g.wpe, dx0, m->inputs, B, T, C);
    if (m->param_hooks) HOOK_PARAM(h, TG_MODEL_LEVEL, "embed.wte", m->g.wte, V, C);
    if (m->param_hooks) HOOK_PARAM(h, TG_MODEL_LEVEL, "embed.wpe", m->g.wpe, T, C);
}

void tg_param_grad_hooks(tg_model *m)
{
    tg_instr *h = m->hooks;
    (void)h; /* unused with TINYGPT_NO_HOOKS */
    /* the order of tg_backward's hooks */
    HOOK_PARAM(h, TG_MODEL_LEVEL, "head.w", m->g.head, C, V);
    for (int l = L - 1; l >= 0; l--) {
        const tg_layer_weights *g = &m->g.layer[l];
        (void)g;
        HOOK_PARAM(h, l, "mlp.w2", g->w2, 4 * C, C);
        HOOK_PARAM(h, l, "mlp.w1", g->w1, C, 4 * C);
        HOOK_PARAM(h, l, "attn.wo", g->wo, C, C);
        HOOK_PARAM(h, l, "attn.wqkv", g->wqkv, C, 3 * C);
    }
    HOOK_PARAM(h, TG_MODEL_LEVEL, "embed.wte", m->g.wte, V, C);
    HOOK_PARAM(h, TG_MODEL_LEVEL, "embed.wpe", m->g.wpe, T, C);
}
