/*
 * data.c - the sparse Markov chain behind tinygpt's training data (data.h).
 */
#include "data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K = TG_DATA_SUCCESSORS };

int tg_data_create(tg_data *d, int vocab, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->vocab = vocab;
    d->next = malloc((size_t)vocab * K * sizeof *d->next);
    d->cum = malloc((size_t)vocab * K * sizeof *d->cum);
    if (!d->next || !d->cum) {
        tg_data_free(d);
        return -1;
    }
    /* The chain and the walks come from separate streams of the same seed. */
    tg_rng chain;
    tg_rng_seed(&chain, seed ^ 0xc4a1f00dull);
    tg_rng_seed(&d->rng, seed);

    /* Four random successors with weights 8 : 4 : 2 : 1 (a repeated token
     * merges their weights). Skewed, so there is something to learn beyond
     * "which four". */
    static const double weight[K] = { 8, 4, 2, 1 };
    double total = 0;
    for (int k = 0; k < K; k++) total += weight[k];
    for (int v = 0; v < vocab; v++) {
        double acc = 0;
        for (int k = 0; k < K; k++) {
            d->next[v * K + k] = tg_rng_int(&chain, vocab);
            acc += weight[k] / total;
            d->cum[v * K + k] = acc;
        }
        d->cum[v * K + K - 1] = 1.0;
    }
    return 0;
}

/* Entropy of token v's successor distribution (repeated successors merge). */
static double row_entropy(const tg_data *d, int v)
{
    double h = 0;
    for (int k = 0; k < K; k++) {
        int tok = d->next[v * K + k];
        int first = 1;
        for (int j = 0; j < k; j++)
            if (d->next[v * K + j] == tok) first = 0;
        if (!first) continue;
        double p = 0, prev = 0;
        for (int j = 0; j < K; j++) {
            if (d->next[v * K + j] == tok) p += d->cum[v * K + j] - prev;
            prev = d->cum[v * K + j];
        }
        h -= p * log(p);
    }
    return h;
}

double tg_data_loss_floor(const tg_data *d, int T)
{
    /* P_t, the distribution of the token at position t, starts uniform (the
     * walks do) and moves by the chain; the best possible prediction of
     * token t+1 costs H(next | token t) on average. */
    int V = d->vocab;
    double *p = malloc((size_t)V * sizeof *p), *q = malloc((size_t)V * sizeof *q);
    double *h = malloc((size_t)V * sizeof *h);
    double floor = NAN;
    if (p && q && h) {
        for (int v = 0; v < V; v++) {
            p[v] = 1.0 / V;
            h[v] = row_entropy(d, v);
        }
        floor = 0;
        for (int t = 0; t < T; t++) {
            for (int v = 0; v < V; v++) floor += p[v] * h[v] / T;
            memset(q, 0, (size_t)V * sizeof *q);
            for (int v = 0; v < V; v++) {
                double prev = 0;
                for (int k = 0; k < K; k++) {
                    q[d->next[v * K + k]] += p[v] * (d->cum[v * K + k] - prev);
                    prev = d->cum[v * K + k];
                }
            }
            memcpy(p, q, (size_t)V * sizeof *p);
        }
    }
    free(p);
    free(q);
    free(h);
    return floor;
}

void tg_data_free(tg_data *d)
{
    if (!d) return;
    free(d->next);
    free(d->cum);
    d->next = NULL;
    d->cum = NULL;
}

static int step(tg_data *d, int tok)
{
    double u = tg_rng_uniform(&d->rng);
    const double *cum = d->cum + (size_t)tok * K;
    int k = 0;
    while (k < K - 1 && u >= cum[k]) k++;
    return d->next[(size_t)tok * K + k];
}

void tg_data_batch(tg_data *d, int *inputs, int *targets, int B, int T)
{
    for (int b = 0; b < B; b++) {
        int tok = tg_rng_int(&d->rng, d->vocab);
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tok;
            tok = step(d, tok);
            targets[b * T + t] = tok;
        }
    }
}
