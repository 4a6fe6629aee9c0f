/*
 * test-tinygpt-grad.c - tinygpt's backward pass against central finite
 * differences of its own forward pass: every element of every parameter
 * tensor, for every placement, both norms, final norm on and off.
 *
 * Built with -DTINYGPT_DOUBLE -DTINYGPT_NO_HOOKS (meson: dep_tinygpt_f64),
 * so `real` is double and the model needs no libresdiag. The finite
 * differences call tg_forward(), the very code the trainer runs.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "model.h"
#include "rng.h"

_Static_assert(sizeof(real) == sizeof(double), "the gradient check needs -DTINYGPT_DOUBLE");

typedef struct grad_case {
    const char *name;
    tg_placement placement;
    int mix_layers;
} grad_case;

static const grad_case placements[] = {
    { "pre", TG_PRE, 0 },           { "post", TG_POST, 0 },
    { "sandwich", TG_SANDWICH, 0 }, { "deepnorm", TG_DEEPNORM, 0 },
    { "mix:1", TG_MIX, 1 },         { "parallel", TG_PARALLEL, 0 },
    { "none", TG_NONE, 0 },         { "reordered", TG_REORDERED, 0 },
    { "hybrid", TG_HYBRID, 0 },
};
enum { N_PLACEMENTS = sizeof placements / sizeof *placements };
enum { N_CASES = N_PLACEMENTS * 2 /* norms */ * 2 /* final norm */ };

/* A tiny model: 2 layers (so mix:1 has a post and a pre layer), 2 heads of
 * size 4, 4 positions (the causal mask matters), a batch of 2, 7 tokens. */
static tg_config tiny_config(int i, const char **name_out, char *buf, size_t buflen)
{
    const grad_case *pc = &placements[i % N_PLACEMENTS];
    tg_config c = { .n_layers = 2, .d_model = 8, .n_heads = 2, .seq_len = 4, .batch = 2,
                    .vocab = 7, .placement = pc->placement, .mix_layers = pc->mix_layers,
                    .norm = (i / N_PLACEMENTS) % 2 ? TG_RMSNORM : TG_LAYERNORM,
                    .final_norm = (i / (2 * N_PLACEMENTS)) % 2 ? 0 : 1,
                    .init = TG_INIT_XAVIER };
    snprintf(buf, buflen, "%s, %s, final norm %s", pc->name,
             c.norm == TG_RMSNORM ? "rmsnorm" : "layernorm", c.final_norm ? "on" : "off");
    *name_out = buf;
    return c;
}

/* Parameters away from the special values of the initialisation: gains
 * not 1, biases not 0, every weight O(0.1-1), so that every term of every
 * backward formula contributes (a backward that used 1 for a gain, or
 * forgot a bias, would be invisible at gains 1 and biases 0). */
static void randomise(tg_model *m, uint64_t seed)
{
    tg_rng rng;
    tg_rng_seed(&rng, seed);
    for (size_t i = 0; i < m->n_params; i++)
        m->params[i] += (real)(0.4 * (tg_rng_uniform(&rng) - 0.5));
}

START_TEST(gradients_match_central_differences)
{
    char buf[96];
    const char *name;
    tg_config cfg = tiny_config(_i, &name, buf, sizeof buf);
    ck_assert_msg(tg_config_check(&cfg) == NULL, "%s: config rejected", name);
    tg_model m;
    ck_assert_int_eq(tg_model_create(&m, &cfg), 0);
    tg_model_init_params(&m, 42 + (uint64_t)_i);
    randomise(&m, 7 + (uint64_t)_i);

    int N = cfg.batch * cfg.seq_len;
    int *inputs = malloc((size_t)N * sizeof *inputs), *targets = malloc((size_t)N * sizeof *targets);
    ck_assert_ptr_nonnull(inputs);
    ck_assert_ptr_nonnull(targets);
    tg_rng rng;
    tg_rng_seed(&rng, 99);
    for (int i = 0; i < N; i++) {
        inputs[i] = tg_rng_int(&rng, cfg.vocab);
        targets[i] = tg_rng_int(&rng, cfg.vocab);
    }

    double loss = tg_forward(&m, inputs, targets);
    ck_assert_msg(isfinite(loss) && loss > 0, "%s: loss %g", name, loss);
    tg_backward(&m);
    real *analytic = malloc(m.n_params * sizeof *analytic);
    ck_assert_ptr_nonnull(analytic);
    memcpy(analytic, m.grads, m.n_params * sizeof *analytic);

    /* Central differences in double with h = 3e-6: the truncation error is
     * h^2/6 * |d3L/dp3| ~ 1.5e-12 for third derivatives O(1), the rounding
     * error ~ eps * |L| / h = 1.1e-16 * 2 / 3e-6 ~ 7e-11. The norm on F's
     * output in reordered reads F's raw output, whose per-token spread is
     * small: its third derivatives (~ 1/spread^3) are ~1e3 times larger,
     * and there the truncation is ~1e-9 (2e-8 with h = 1e-5, which is why
     * h is not larger). Measured, the worst |analytic - numeric| over all
     * cases is 1.8e-9, the worst error/tolerance 0.04 (TINYGPT_GRAD_VERBOSE=1
     * prints them). We allow
     *     |a - n| <= 1e-7 * max(|a|, |n|) + 1e-8,
     * about 25x the measured error, and 1e4 and more times smaller than
     * the gradients (O(1e-3 - 1) with these weights): a wrong or missing term
     * anywhere in the backward fails it (dropping one term of the LayerNorm
     * backward, scaling the key gradient by 0.999 or the bias gradients by
     * 1.0001, each fails it). */
    const double h = 3e-6;
    double worst = 0, worst_abs = 0;  /* largest error / tolerance, largest error */
    const char *worst_tensor = "";
    for (int t = 0; t < m.n_tensors; t++) {
        const tg_param *p = &m.tensors[t];
        size_t n = (size_t)p->rows * p->cols;
        double largest = 0;
        for (size_t e = 0; e < n; e++) {
            size_t i = p->offset + e;
            real orig = m.params[i];
            m.params[i] = orig + h;
            double lp = tg_forward(&m, inputs, targets);
            m.params[i] = orig - h;
            double lm = tg_forward(&m, inputs, targets);
            m.params[i] = orig;
            double num = (lp - lm) / (2 * h);
            double a = analytic[i];
            double err = fabs(a - num);
            double tol = 1e-7 * fmax(fabs(a), fabs(num)) + 1e-8;
            ck_assert_msg(err <= tol,
                          "%s: %s (layer %d) element %zu (row %zu, col %zu): analytic %.12g, "
                          "numeric %.12g, |diff| %.3g > %.3g",
                          name, p->name, p->layer, e, e / (size_t)p->cols,
                          e % (size_t)p->cols, a, num, err, tol);
            if (err / tol > worst) {
                worst = err / tol;
                worst_tensor = p->name;
            }
            if (err > worst_abs) worst_abs = err;
            if (fabs(a) > largest) largest = fabs(a);
        }
        /* A check on gradients that are all ~0 would prove nothing: every
         * tensor must matter to this loss (embedding rows of tokens absent
         * from the batch are 0, but not the whole table). */
        ck_assert_msg(largest > 1e-4, "%s: %s (layer %d) has no gradient (max |g| %g)",
                      name, p->name, p->layer, largest);
    }
    /* The forward after the probing must give the original loss exactly:
     * restoring a parameter restores the model. */
    ck_assert_msg(tg_forward(&m, inputs, targets) == loss, "%s: loss not reproduced", name);
    if (getenv("TINYGPT_GRAD_VERBOSE"))
        fprintf(stderr, "%-36s %5zu parameters: largest |a - n| %.1e, largest error/tolerance "
                "%.3f (%s)\n", name, m.n_params, worst_abs, worst, worst_tensor);
    free(analytic);
    free(inputs);
    free(targets);
    tg_model_free(&m);
}
END_TEST

/* Every placement has the norms it should have: the parameter table is
 * what the gradient check walks, so a missing tensor would go unchecked. */
START_TEST(parameter_table_has_each_placements_norms)
{
    static const struct { tg_placement p; int norms_per_layer; } expect[] = {
        { TG_PRE, 2 }, { TG_POST, 2 }, { TG_SANDWICH, 4 }, { TG_DEEPNORM, 2 },
        { TG_MIX, 2 }, { TG_PARALLEL, 1 }, { TG_NONE, 0 },
        { TG_REORDERED, 2 },  /* one per sublayer, on F's output */
        { TG_HYBRID, 1 },     /* the MLP's, after the add */
    };
    for (size_t k = 0; k < sizeof expect / sizeof *expect; k++) {
        for (int final = 0; final <= 1; final++) {
            tg_config c = { .n_layers = 3, .d_model = 8, .n_heads = 2, .seq_len = 4, .batch = 2,
                            .vocab = 7, .placement = expect[k].p, .mix_layers = 1,
                            .norm = TG_LAYERNORM, .final_norm = final, .init = TG_INIT_GPT2 };
            tg_model m;
            ck_assert_int_eq(tg_model_create(&m, &c), 0);
            int gains = 0, matrices = 0;
            for (int t = 0; t < m.n_tensors; t++) {
                if (m.tensors[t].kind == TG_KIND_GAIN) gains++;
                if (m.tensors[t].kind == TG_KIND_MATRIX) matrices++;
            }
            ck_assert_int_eq(gains, 3 * expect[k].norms_per_layer + final);
            ck_assert_int_eq(matrices, 3 * 4 + 3);  /* wqkv wo w1 w2 per layer; wte wpe head */
            tg_model_free(&m);
        }
    }
}
END_TEST

/* The initialisations: gpt2's std 0.02 with 1/sqrt(2L) on the residual
 * projections; DeepNorm's beta on v, wo, w1, w2 but not on q and k. */
START_TEST(init_scales_follow_gpt2_and_deepnet)
{
    tg_config c = { .n_layers = 8, .d_model = 64, .n_heads = 4, .seq_len = 8, .batch = 1,
                    .vocab = 64, .placement = TG_PRE, .norm = TG_LAYERNORM, .final_norm = 1,
                    .init = TG_INIT_GPT2 };
    for (int deep = 0; deep <= 1; deep++) {
        c.placement = deep ? TG_DEEPNORM : TG_PRE;
        tg_model m;
        ck_assert_int_eq(tg_model_create(&m, &c), 0);
        tg_model_init_params(&m, 5);
        double beta = tg_deepnorm_beta(c.n_layers);
        for (int l = 0; l < c.n_layers; l++) {
            const tg_layer_weights *w = &m.w.layer[l];
            size_t C = (size_t)c.d_model;
            double sq = 0, sv = 0, so = 0, s1 = 0, s2 = 0;
            for (size_t r = 0; r < C; r++)
                for (size_t k = 0; k < C; k++) {
                    sq += w->wqkv[r * 3 * C + k] * w->wqkv[r * 3 * C + k];
                    sv += w->wqkv[r * 3 * C + 2 * C + k] * w->wqkv[r * 3 * C + 2 * C + k];
                    so += w->wo[r * C + k] * w->wo[r * C + k];
                }
            for (size_t i = 0; i < 4 * C * C; i++) {
                s1 += w->w1[i] * w->w1[i];
                s2 += w->w2[i] * w->w2[i];
            }
            double std_q = sqrt(sq / (C * C)), std_v = sqrt(sv / (C * C)),
                   std_o = sqrt(so / (C * C)), std_1 = sqrt(s1 / (4 * C * C)),
                   std_2 = sqrt(s2 / (4 * C * C));
            double resid = deep ? beta : 1 / sqrt(2.0 * c.n_layers);
            /* 4096+ samples: the sample std is within ~3% (1.1% sigma) */
            ck_assert_double_eq_tol(std_q, 0.02, 0.02 * 0.05);
            ck_assert_double_eq_tol(std_v, 0.02 * (deep ? beta : 1), 0.02 * 0.05);
            ck_assert_double_eq_tol(std_o, 0.02 * resid, 0.02 * resid * 0.05);
            ck_assert_double_eq_tol(std_1, 0.02 * (deep ? beta : 1), 0.02 * 0.05);
            ck_assert_double_eq_tol(std_2, 0.02 * resid, 0.02 * resid * 0.05);
        }
        tg_model_free(&m);
    }
}
END_TEST

START_TEST(config_check_rejects_bad_shapes)
{
    tg_config ok = { .n_layers = 2, .d_model = 8, .n_heads = 2, .seq_len = 4, .batch = 2,
                     .vocab = 7, .placement = TG_PRE };
    ck_assert_ptr_null(tg_config_check(&ok));
    tg_config c = ok;
    c.n_heads = 3;  /* does not divide 8 */
    ck_assert_ptr_nonnull(tg_config_check(&c));
    c = ok;
    c.placement = TG_MIX;
    c.mix_layers = 2;  /* would be all post-norm */
    ck_assert_ptr_nonnull(tg_config_check(&c));
    c.mix_layers = 1;
    ck_assert_ptr_null(tg_config_check(&c));
    c = ok;
    c.vocab = 1;
    ck_assert_ptr_nonnull(tg_config_check(&c));
    c = ok;
    c.n_layers = 0;
    ck_assert_ptr_nonnull(tg_config_check(&c));
}
END_TEST

static const check_program program = {
    .name = "tinygpt-grad",
};
CHECK_MAIN(&program,
           CHECK_CASE("finite-differences", 120),
               CHECK_LOOP(gradients_match_central_differences, 0, N_CASES),
           CHECK_CASE("layout", 0),
               CHECK_TEST(parameter_table_has_each_placements_norms),
               CHECK_TEST(init_scales_follow_gpt2_and_deepnet),
               CHECK_TEST(config_check_rejects_bad_shapes))
