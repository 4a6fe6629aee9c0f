/*
 * fixture.h - the model and the run a test opens: a resdiag_model of a
 * shape (layers, columns, sublayers and parameters by name), and a run to
 * write or a reader opened at a path, asserting that the call succeeds.
 * The test sets the rest (placement, norm, options) on what it gets.
 *
 *     resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D,
 *         .sublayers = S, .sublayer_names = subs });
 */
#ifndef RD_FIXTURE_H
#define RD_FIXTURE_H

#include <check.h>
#include <math.h>

#include "resdiag.h"

/* n_layers, d_model, and the names with their counts (0 and NULL: none). */
typedef struct fixture_shape {
    int layers, cols;
    int sublayers;
    const char *const *sublayer_names;
    int layer_params;
    const char *const *layer_param_names;
    int model_params;
    const char *const *model_param_names;
} fixture_shape;

/* resdiag_model_init's defaults, with the shape. */
static inline resdiag_model fixture_model(const fixture_shape *s)
{
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = s->layers;
    m.d_model = s->cols;
    m.n_sublayers = s->sublayers;
    m.sublayer_names = s->sublayer_names;
    m.n_layer_params = s->layer_params;
    m.layer_param_names = s->layer_param_names;
    m.n_model_params = s->model_params;
    m.model_param_names = s->model_param_names;
    return m;
}

/* The run of m at path, with o (NULL: the defaults); asserts it opens. */
static inline resdiag *fixture_open(const char *path, const resdiag_model *m,
                                    const resdiag_options *o)
{
    resdiag *r = NULL;
    resdiag_status st = resdiag_open(&r, path, m, o);
    ck_assert_msg(st == RESDIAG_OK, "resdiag_open %s: %s", path, resdiag_strerror(st));
    ck_assert_ptr_nonnull(r);
    return r;
}

/* The run at path to read; asserts it opens. */
static inline resdiag_reader *fixture_read(const char *path)
{
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "resdiag_reader_open %s: %s", path, resdiag_strerror(st));
    return rd;
}

/* RMSNorm without a gain, row by row: rows x d floats (eps 1e-6, in
 * double), as the tests' hand-built blocks normalise. */
static inline void fixture_rmsnorm(float *out, const float *in, int rows, int d)
{
    for (const float *row = in; row < in + (size_t)rows * d; row += d, out += d) {
        double ss = 0;
        for (int j = 0; j < d; j++)
            ss += (double)row[j] * row[j];
        double inv = 1 / sqrt(ss / d + 1e-6);
        for (int j = 0; j < d; j++)
            out[j] = (float)(row[j] * inv);
    }
}

#endif
