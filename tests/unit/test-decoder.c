/*
 * test-decoder.c - a decoder that computes one token per forward call (a
 * KV cache, as in llama2.c-style inference) and calls every hook once per
 * token: the step's merged statistics equal those of one call with all the
 * token rows (a second run recorded that way, and values computed here in
 * long double), every site counts T calls, and the placement verdict is
 * right for pre-norm and post-norm models, and for a sandwich recorded
 * without its output norm's sites "pre-norm or sandwich".
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"

enum { L = 3, S = 2, D = 16, H = 32, V = 20, T = 12, K = 16 };
enum { ATTN = 0, MLP = 1 };
/* The runs here are schema 1 (statistics to the double): its layout holds
 * the 5 block sites stream_in..stream_out, all of them observed. */
enum { OLD_SITES = 5 };
typedef enum { PRE, POST, SANDWICH } placement;

static char dir[256];
static const char *const sub_names[S] = { "attn", "mlp" };

/* A fixed pseudo-random normal, N(0, 1). */
static double gauss(unsigned *state)
{
    double u1 = 0, u2;
    while (u1 <= 1e-12) {
        *state = *state * 1664525u + 1013904223u;
        u1 = (double)(*state >> 8) / 16777216.0;
    }
    *state = *state * 1664525u + 1013904223u;
    u2 = (double)(*state >> 8) / 16777216.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

typedef struct weights {
    float embed[V][D], head[D][V];
    float wq[L][D][D], wk[L][D][D], wv[L][D][D], wo[L][D][D];
    float w1[L][D][H], w2[L][H][D];
    float gain[L][S][D], gain2[L][S][D], gain_f[D];
} weights;

static void init_weights(weights *w, unsigned seed)
{
    float *all = (float *)w;
    size_t n = sizeof *w / sizeof(float);
    for (size_t i = 0; i < n; i++)
        all[i] = (float)(gauss(&seed) / sqrt(D));
    /* the sandwich's second norm as at initialization (gain 1): its output
     * is then normalized per token, which is how the analysis tells it */
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            for (int j = 0; j < D; j++) {
                w->gain[l][s][j] = (float)(1 + 0.1 * gauss(&seed));
                w->gain2[l][s][j] = 1;
            }
    for (int j = 0; j < D; j++) {
        w->gain_f[j] = (float)(1 + 0.1 * gauss(&seed));
        for (int t = 0; t < V; t++)
            w->embed[t][j] *= 4; /* embeddings of norm ~4 */
    }
}

/* out = LayerNorm(x) * gain */
static void layernorm(float *out, const float *x, const float *gain)
{
    double m = 0, v = 0;
    for (int j = 0; j < D; j++)
        m += x[j];
    m /= D;
    for (int j = 0; j < D; j++)
        v += (x[j] - m) * (x[j] - m);
    double r = 1 / sqrt(v / D + 1e-5);
    for (int j = 0; j < D; j++)
        out[j] = (float)((x[j] - m) * r * gain[j]);
}

/* out (cols) = x (rows) W (rows, cols) */
static void matvec(float *out, const float *x, const float *w, int rows, int cols)
{
    for (int c = 0; c < cols; c++) {
        double s = 0;
        for (int r = 0; r < rows; r++)
            s += (double)x[r] * w[r * cols + c];
        out[c] = (float)s;
    }
}

/* The decoder's state: the KV cache, and every site's rows so far (what a
 * one-call trainer would have handed over, and the reference's input). */
typedef struct decoder {
    const weights *w;
    placement p;
    resdiag *r;
    float kc[L][T][D], vc[L][T][D];
    float rows[L][S][OLD_SITES][T][D];
    float mrows[RESDIAG_N_MODEL_SITES][T][V]; /* D columns but LOGITS */
} decoder;

static void site(decoder *dec, int t, int l, int s, resdiag_site k, const float *x)
{
    memcpy(dec->rows[l][s][k][t], x, sizeof(float) * D);
    ck_assert_int_eq(RESDIAG_FWD(dec->r, l, s, k, resdiag_f32(x, 1, D)), RESDIAG_OK);
}

static void model_site(decoder *dec, int t, resdiag_site k, const float *x, int cols)
{
    memcpy(dec->mrows[k - RESDIAG_EMBED_OUT][t], x, sizeof(float) * (size_t)cols);
    ck_assert_int_eq(RESDIAG_MODEL_FWD(dec->r, k, resdiag_f32(x, 1, cols)), RESDIAG_OK);
}

/* F of sublayer s at token t: attention over the cache, or the MLP. */
static void branch(decoder *dec, int t, int l, int s, float *out, const float *in)
{
    const weights *w = dec->w;
    if (s == MLP) {
        float h[H];
        matvec(h, in, &w->w1[l][0][0], D, H);
        for (int i = 0; i < H; i++)
            h[i] = (float)(0.5 * h[i] * (1 + erf(h[i] / sqrt(2.0))));
        matvec(out, h, &w->w2[l][0][0], H, D);
        return;
    }
    float q[D], y[D] = { 0 };
    matvec(q, in, &w->wq[l][0][0], D, D);
    matvec(dec->kc[l][t], in, &w->wk[l][0][0], D, D);
    matvec(dec->vc[l][t], in, &w->wv[l][0][0], D, D);
    double sc[T], mx = -INFINITY, sum = 0;
    for (int u = 0; u <= t; u++) {
        double d = 0;
        for (int j = 0; j < D; j++)
            d += (double)q[j] * dec->kc[l][u][j];
        sc[u] = d / sqrt(D);
        mx = sc[u] > mx ? sc[u] : mx;
    }
    for (int u = 0; u <= t; u++)
        sum += sc[u] = exp(sc[u] - mx);
    for (int u = 0; u <= t; u++)
        for (int j = 0; j < D; j++)
            y[j] += (float)(sc[u] / sum) * dec->vc[l][u][j];
    matvec(out, y, &w->wo[l][0][0], D, D);
}

/* One forward call: token t (id tok) through every layer, every hook once. */
static void forward_token(decoder *dec, int t, int tok)
{
    const weights *w = dec->w;
    float x[D], n[D], f[D], f2[D], sum[D];
    for (int j = 0; j < D; j++)
        x[j] = w->embed[tok][j] + (float)sin(0.3 * (t + 1) * (j + 1));
    model_site(dec, t, RESDIAG_EMBED_OUT, x, D);
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            site(dec, t, l, s, RESDIAG_STREAM_IN, x);
            switch (dec->p) {
            case PRE: /* x + F(Norm(x)) */
                layernorm(n, x, w->gain[l][s]);
                site(dec, t, l, s, RESDIAG_NORM_IN, x);
                site(dec, t, l, s, RESDIAG_NORM_OUT, n);
                branch(dec, t, l, s, f, n);
                site(dec, t, l, s, RESDIAG_BRANCH_OUT, f);
                for (int j = 0; j < D; j++)
                    x[j] += f[j];
                break;
            case POST: /* Norm(x + F(x)) */
                branch(dec, t, l, s, f, x);
                site(dec, t, l, s, RESDIAG_BRANCH_OUT, f);
                for (int j = 0; j < D; j++)
                    sum[j] = x[j] + f[j];
                layernorm(x, sum, w->gain[l][s]);
                site(dec, t, l, s, RESDIAG_NORM_IN, sum);
                site(dec, t, l, s, RESDIAG_NORM_OUT, x);
                break;
            case SANDWICH: /* x + Norm2(F(Norm(x))) */
                layernorm(n, x, w->gain[l][s]);
                site(dec, t, l, s, RESDIAG_NORM_IN, x);
                site(dec, t, l, s, RESDIAG_NORM_OUT, n);
                branch(dec, t, l, s, f, n);
                layernorm(f2, f, w->gain2[l][s]);
                site(dec, t, l, s, RESDIAG_BRANCH_OUT, f2);
                for (int j = 0; j < D; j++)
                    x[j] += f2[j];
                break;
            }
            site(dec, t, l, s, RESDIAG_STREAM_OUT, x);
        }
    float xf[D], logits[V];
    layernorm(xf, x, w->gain_f);
    model_site(dec, t, RESDIAG_FINAL_NORM_IN, x, D);
    model_site(dec, t, RESDIAG_FINAL_NORM_OUT, xf, D);
    matvec(logits, xf, &w->head[0][0], D, V);
    model_site(dec, t, RESDIAG_LOGITS, logits, V);
}

static resdiag *open_run(const char *path, placement p)
{
    static const resdiag_placement declared[] = { RESDIAG_PLACEMENT_PRE, RESDIAG_PLACEMENT_POST,
                                                  RESDIAG_PLACEMENT_SANDWICH };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = S,
        .sublayer_names = sub_names });
    m.declared_placement = declared[p];
    m.norm_kind = RESDIAG_NORM_LAYERNORM;
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.sketch_size = K;
    return fixture_open(path, &m, &o);
}

/* Long double values of a few fields of rows x (T, D): frob, the mean and
 * std of the token norms, their min and max, absmax. */
static void reference(const float *x, int cols, double *f)
{
    long double ss = 0, norm[T], m = 0, v = 0, mn = INFINITY, mx = 0, amax = 0;
    for (int i = 0; i < T; i++) {
        long double s2 = 0;
        for (int j = 0; j < cols; j++) {
            long double a = x[i * cols + j];
            s2 += a * a;
            amax = fabsl(a) > amax ? fabsl(a) : amax;
        }
        ss += s2;
        norm[i] = sqrtl(s2);
        m += norm[i];
        mn = norm[i] < mn ? norm[i] : mn;
        mx = norm[i] > mx ? norm[i] : mx;
    }
    m /= T;
    for (int i = 0; i < T; i++)
        v += (norm[i] - m) * (norm[i] - m);
    f[RESDIAG_FIELD_ROWS] = T;
    f[RESDIAG_FIELD_FROB] = (double)sqrtl(ss);
    f[RESDIAG_FIELD_TOK_NORM_MEAN] = (double)m;
    f[RESDIAG_FIELD_TOK_NORM_STD] = (double)sqrtl(v / T);
    f[RESDIAG_FIELD_TOK_NORM_MIN] = (double)mn;
    f[RESDIAG_FIELD_TOK_NORM_MAX] = (double)mx;
    f[RESDIAG_FIELD_ABSMAX] = (double)amax;
}

static int close_to(double a, double b, double tol)
{
    return (isnan(a) && isnan(b)) || fabs(a - b) <= tol * (1 + fabs(b));
}

/* The token-by-token run's site against the all-rows run's (the same path
 * on the same rows, only the double combination of rows differs: 1e-12)
 * and the long double values. */
static void assert_site(resdiag_reader *tok, resdiag_reader *all, int l, int s, resdiag_site k,
                        const float *rows, int cols, const char *what)
{
    double a[RESDIAG_N_FIELDS], b[RESDIAG_N_FIELDS], ref[RESDIAG_N_FIELDS];
    double ska[K], skb[K];
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(tok, 0, RESDIAG_FORWARD, l, s, k, a, &obs), RESDIAG_OK);
    ck_assert_msg(obs, "%s: not observed", what);
    ck_assert_int_eq(resdiag_reader_site(all, 0, RESDIAG_FORWARD, l, s, k, b, &obs), RESDIAG_OK);
    for (int f = 0; f < RESDIAG_N_FIELDS; f++)
        if (f != RESDIAG_FIELD_CALL_SEQ)
            ck_assert_msg(close_to(a[f], b[f], 1e-12), "%s: %s %.17g token by token, %.17g in "
                          "one call", what, resdiag_field_name((resdiag_field)f), a[f], b[f]);
    reference(rows, cols, ref);
    static const int checked[] = { RESDIAG_FIELD_ROWS, RESDIAG_FIELD_FROB,
                                   RESDIAG_FIELD_TOK_NORM_MEAN, RESDIAG_FIELD_TOK_NORM_STD,
                                   RESDIAG_FIELD_TOK_NORM_MIN, RESDIAG_FIELD_TOK_NORM_MAX,
                                   RESDIAG_FIELD_ABSMAX };
    /* f32 rows against long double: the norms within the path's norm bound
     * of themselves (path-bounds.h), their std within it of the largest
     * norm (a population std moves by at most its values' largest change);
     * ROWS and ABSMAX are exact. */
    const double nt = (double)rd_test_norm_tol(RESDIAG_DTYPE_F32);
    for (size_t i = 0; i < sizeof checked / sizeof *checked; i++) {
        const int c = checked[i];
        double tol = 1e-12 * (1 + fabs(ref[c]));
        if (c == RESDIAG_FIELD_TOK_NORM_STD)
            tol += nt * ref[RESDIAG_FIELD_TOK_NORM_MAX];
        else if (c != RESDIAG_FIELD_ROWS && c != RESDIAG_FIELD_ABSMAX)
            tol += nt * fabs(ref[c]);
        ck_assert_msg((isnan(a[c]) && isnan(ref[c])) || fabs(a[c] - ref[c]) <= tol,
                      "%s: %s %.17g, long double %.17g", what,
                      resdiag_field_name((resdiag_field)c), a[c], ref[c]);
    }
    ck_assert_int_eq(resdiag_reader_sketch(tok, 0, RESDIAG_FORWARD, l, s, k, ska), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_sketch(all, 0, RESDIAG_FORWARD, l, s, k, skb), RESDIAG_OK);
    for (int m = 0; m < K; m++)
        ck_assert_msg(close_to(ska[m], skb[m], 1e-12), "%s: sketch[%d] %.17g token by token, "
                      "%.17g in one call", what, m, ska[m], skb[m]);
}

static resdiag_verdict verdict_of(resdiag_reader *rd, resdiag_confidence *conf)
{
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, NULL, &a), RESDIAG_OK);
    resdiag_verdict v = resdiag_analysis_verdict(a);
    *conf = resdiag_analysis_confidence(a);
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            ck_assert_int_eq(resdiag_analysis_sublayer(a, l, s, NULL), v);
    resdiag_analysis_destroy(a);
    return v;
}

static void decode(placement p, resdiag_verdict want)
{
    static const char *const names[] = { "pre", "post", "sandwich" };
    weights *w = malloc(sizeof *w);
    decoder *dec = calloc(1, sizeof *dec);
    ck_assert(w && dec);
    init_weights(w, 1234u + (unsigned)p);
    dec->w = w;
    dec->p = p;

    char tok_path[400], all_path[400];
    snprintf(tok_path, sizeof tok_path, "%s/%s-tokens.h5", dir, names[p]);
    snprintf(all_path, sizeof all_path, "%s/%s-all.h5", dir, names[p]);

    /* token by token: one step, T forward calls of one row each */
    dec->r = open_run(tok_path, p);
    ck_assert_int_eq(resdiag_step_begin(dec->r, 0), RESDIAG_OK);
    for (int t = 0; t < T; t++)
        forward_token(dec, t, (7 * t + 3) % V);
    ck_assert_int_eq(resdiag_step_end(dec->r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(dec->r), RESDIAG_OK);
    resdiag_destroy(dec->r);

    /* the same rows, one call per site */
    resdiag *r = open_run(all_path, p);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    for (int k = 0; k < RESDIAG_N_MODEL_SITES; k++) {
        resdiag_site site = (resdiag_site)(RESDIAG_EMBED_OUT + k);
        int cols = site == RESDIAG_LOGITS ? V : D;
        /* mrows holds each token's row at stride V */
        ck_assert_int_eq(RESDIAG_MODEL_FWD(r, site, resdiag_tensor_make(dec->mrows[k],
                                                                        RESDIAG_DTYPE_F32, T,
                                                                        cols, V)),
                         RESDIAG_OK);
    }
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            for (int k = 0; k < OLD_SITES; k++)
                ck_assert_int_eq(RESDIAG_FWD(r, l, s, (resdiag_site)k,
                                             resdiag_f32(&dec->rows[l][s][k][0][0], T, D)),
                                 RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);

    resdiag_reader *tok = NULL, *all = NULL;
    ck_assert_int_eq(resdiag_reader_open(&tok, tok_path), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_open(&all, all_path), RESDIAG_OK);
    char what[96];
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            for (int k = 0; k < OLD_SITES; k++) {
                snprintf(what, sizeof what, "%s layer %d %s %s", names[p], l, sub_names[s],
                         resdiag_site_name((resdiag_site)k));
                assert_site(tok, all, l, s, (resdiag_site)k, &dec->rows[l][s][k][0][0], D,
                            what);
            }
    for (int k = 0; k < RESDIAG_N_MODEL_SITES; k++) {
        resdiag_site site = (resdiag_site)(RESDIAG_EMBED_OUT + k);
        int cols = site == RESDIAG_LOGITS ? V : D;
        float packed[T * V];
        for (int t = 0; t < T; t++)
            memcpy(packed + t * cols, dec->mrows[k][t], sizeof(float) * (size_t)cols);
        snprintf(what, sizeof what, "%s %s", names[p], resdiag_site_name(site));
        assert_site(tok, all, 0, 0, site, packed, cols, what);
    }
    /* T calls at every site, the update ratio over every token */
    double calls[L * S * OLD_SITES], mcalls[RESDIAG_N_MODEL_SITES];
    ck_assert_int_eq(resdiag_reader_read(tok, "forward/site_calls", 0, 1, calls,
                                         sizeof calls / sizeof *calls), RESDIAG_OK);
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        ck_assert_double_eq(calls[i], T);
    ck_assert_int_eq(resdiag_reader_read(tok, "forward/model_calls", 0, 1, mcalls,
                                         RESDIAG_N_MODEL_SITES), RESDIAG_OK);
    for (int i = 0; i < RESDIAG_N_MODEL_SITES; i++)
        ck_assert_double_eq(mcalls[i], T);
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            double ua[RESDIAG_N_UPDATE_FIELDS], ub[RESDIAG_N_UPDATE_FIELDS];
            ck_assert_int_eq(resdiag_reader_update(tok, 0, l, s, ua), RESDIAG_OK);
            ck_assert_int_eq(resdiag_reader_update(all, 0, l, s, ub), RESDIAG_OK);
            for (int u = 0; u < RESDIAG_N_UPDATE_FIELDS; u++)
                ck_assert_msg(isfinite(ua[u]) && close_to(ua[u], ub[u], 1e-12),
                              "%s layer %d sublayer %d: update field %d %.17g token by token, "
                              "%.17g in one call", names[p], l, s, u, ua[u], ub[u]);
        }

    /* the verdict: the model's, and the same as from one call per site */
    resdiag_confidence ct, ca;
    resdiag_verdict vt = verdict_of(tok, &ct), va = verdict_of(all, &ca);
    ck_assert_msg(vt == want, "%s decoder, token by token: verdict %s (%s)", names[p],
                  resdiag_verdict_name(vt), resdiag_confidence_name(ct));
    ck_assert_int_eq(va, vt);
    ck_assert_int_eq(ca, ct);
    resdiag_reader_destroy(tok);
    resdiag_reader_destroy(all);
    unlink(tok_path);
    unlink(all_path);
    free(w);
    free(dec);
}

START_TEST(one_token_per_call_decoders)
{
    decode(PRE, RESDIAG_VERDICT_PRE);
    decode(POST, RESDIAG_VERDICT_POST);
    /* its second norm recorded as branch_out alone (schema 1 has no
     * out_norm sites): pre-type relations, branch_out a norm output */
    decode(SANDWICH, RESDIAG_VERDICT_PRE_OR_SANDWICH);
}
END_TEST

static const check_program program = {
    .name = "decoder",
    .timeout = 60,
    .scratch = dir,
    .scratch_size = sizeof dir,
};
CHECK_MAIN(&program, CHECK_TEST(one_token_per_call_decoders))
