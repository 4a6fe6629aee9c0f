/*
 * mutate-runs.c - writes valid run files through the library, then N
 * damaged copies of them made with a fixed seed: bit flips, truncations and
 * byte stomps, half of them aimed at the first 4 KiB where HDF5 keeps the
 * superblock and the root's metadata. The same seed gives the same damage
 * to the same offsets (the valid files themselves carry a creation time).
 * Usage: mutate-runs DIR N SEED
 * Writes DIR/base-*.h5 and DIR/mut-NNNN.h5. The bases: schema 2 with deflate
 * level 1 (the default; full, stream only, no sketch), schema 2 without
 * compression and schema 1 (full): damage inside a deflated chunk reaches
 * the inflate and the conversions of schema 2, damage elsewhere the rest.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resdiag.h"

enum { L = 3, D = 8, T = 4, STEPS = 5 };

static void die(const char *what)
{
    fprintf(stderr, "mutate-runs: %s\n", what);
    exit(1);
}

static uint64_t rng;
static uint64_t next(void) /* xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dULL;
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

/* A pre-norm run with two sublayers, both directions, model sites,
 * parameter gradients and metadata; stream_only keeps just the stream. */
static void write_run(const char *path, int stream_only, int sketch, int schema, int level)
{
    static const char *const subs[] = { "attn", "mlp" };
    static const char *const lp[] = { "attn.wo", "mlp.w2" };
    static const char *const mp[] = { "head.w" };
    static const char *const meta[] = { "dataset", "synthetic", "seed", "7" };
    resdiag_model m;
    resdiag_model_init(&m);
    m.n_layers = L;
    m.d_model = D;
    m.n_sublayers = 2;
    m.sublayer_names = subs;
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    m.norm_kind = RESDIAG_NORM_RMSNORM;
    m.n_layer_params = 2;
    m.layer_param_names = lp;
    m.n_model_params = 1;
    m.model_param_names = mp;
    m.n_meta = 2;
    m.meta = meta;
    m.description = "mutate-runs base";
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 2;
    o.sketch_size = sketch;
    o.file_schema = schema;
    o.compression = level;
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        die("resdiag_open");
    float x[T * D], n[T * D], f[T * D], g[T * D], logits[T * 11];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < T * D; i++)
            x[i] = (float)sin(0.7 * i + s);
        if (resdiag_step_begin(r, 10 * s) != RESDIAG_OK)
            die("step_begin");
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, T, D));
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 2; k++) {
                for (int t = 0; t < T; t++) {
                    double ss = 0;
                    for (int i = 0; i < D; i++)
                        ss += (double)x[t * D + i] * x[t * D + i];
                    for (int i = 0; i < D; i++) {
                        n[t * D + i] = (float)(x[t * D + i] / sqrt(ss / D + 1e-5));
                        f[t * D + i] = 0.3f * tanhf(n[t * D + i] * (float)(l + k + 1));
                        g[t * D + i] = 0.01f * (float)cos(i + t + l);
                    }
                }
                RESDIAG_FWD(r, l, k, RESDIAG_STREAM_IN, resdiag_f32(x, T, D));
                if (!stream_only) {
                    RESDIAG_FWD(r, l, k, RESDIAG_NORM_IN, resdiag_f32(x, T, D));
                    RESDIAG_FWD(r, l, k, RESDIAG_NORM_OUT, resdiag_f32(n, T, D));
                    RESDIAG_FWD(r, l, k, RESDIAG_BRANCH_OUT, resdiag_f32(f, T, D));
                    RESDIAG_BWD(r, l, k, RESDIAG_STREAM_OUT, resdiag_f32(g, T, D));
                    RESDIAG_PARAM_GRAD(r, l, lp[k], resdiag_f32(g, T, D));
                }
                for (int i = 0; i < T * D; i++)
                    x[i] += f[i];
                RESDIAG_FWD(r, l, k, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D));
            }
        if (!stream_only) {
            for (int i = 0; i < T * 11; i++)
                logits[i] = (float)cos(i * 0.3);
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_IN, resdiag_f32(x, T, D));
            RESDIAG_MODEL_FWD(r, RESDIAG_FINAL_NORM_OUT, resdiag_f32(x, T, D));
            RESDIAG_MODEL_FWD(r, RESDIAG_LOGITS, resdiag_f32(logits, T, 11));
            RESDIAG_PARAM_GRAD(r, RESDIAG_MODEL_LEVEL, "head.w", resdiag_f32(logits, T, 11));
        }
        if (resdiag_step_end(r) != RESDIAG_OK)
            die("step_end");
    }
    if (resdiag_close(r) != RESDIAG_OK)
        die("resdiag_close");
    resdiag_destroy(r);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        die("cannot read a base file");
    long n = ftell(f);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    rewind(f);
    if (n <= 0 || !b || fread(b, 1, (size_t)n, f) != (size_t)n)
        die("cannot read a base file");
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* An offset: half the time in the metadata-heavy head of the file. */
static size_t where(size_t len)
{
    return (next() & 1) ? below(len < 4096 ? len : 4096) : below(len);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        die("usage: mutate-runs DIR N SEED");
    const char *dir = argv[1];
    long count = strtol(argv[2], NULL, 10);
    rng = strtoull(argv[3], NULL, 0) | 1;
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);

    enum { N_BASE = 5 };
    static const int schema[N_BASE] = { 2, 2, 2, 2, 1 }, level[N_BASE] = { 1, 1, 1, 0, 0 };
    char path[4096];
    unsigned char *base[N_BASE];
    size_t base_len[N_BASE];
    for (int b = 0; b < N_BASE; b++) {
        snprintf(path, sizeof path, "%s/base-%d.h5", dir, b);
        write_run(path, b == 1, b == 2 ? 0 : 4, schema[b], level[b]);
        base[b] = slurp(path, &base_len[b]);
    }

    for (long i = 0; i < count; i++) {
        int b = (int)below(N_BASE);
        size_t len = base_len[b];
        unsigned char *m = malloc(len);
        if (!m)
            die("out of memory");
        memcpy(m, base[b], len);
        int rounds = 1 + (int)below(3);
        for (int k = 0; k < rounds; k++) {
            switch (below(4)) {
            case 0: /* a few bit flips */
                for (int j = 1 + (int)below(8); j > 0; j--) {
                    size_t at = where(len);
                    m[at] ^= (unsigned char)(1u << below(8));
                }
                break;
            case 1: /* truncation */
                len = below(len) + 1;
                break;
            case 2: { /* a run of bytes stomped with 0, 0xff or noise */
                size_t at = where(len), n = 1 + below(32);
                unsigned kind = (unsigned)below(3);
                for (size_t j = at; j < at + n && j < len; j++)
                    m[j] = kind == 0 ? 0 : kind == 1 ? 0xff : (unsigned char)next();
                break;
            }
            default: { /* a run copied from elsewhere (an address to a wrong place) */
                size_t from = below(len), to = where(len), n = 1 + below(8);
                for (size_t j = 0; j < n && from + j < len && to + j < len; j++)
                    m[to + j] = m[from + j];
                break;
            }
            }
        }
        snprintf(path, sizeof path, "%s/mut-%04ld.h5", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(m, 1, len, f) != len || fclose(f) != 0)
            die("cannot write a mutated file");
        free(m);
    }
    for (int b = 0; b < N_BASE; b++)
        free(base[b]);
    return 0;
}
