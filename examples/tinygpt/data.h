/*
 * data.h - a deterministic synthetic token stream: walks on a fixed random
 * sparse Markov chain. Each token has a few possible successors with
 * unequal probabilities, so a small model learns the transition table in a
 * few hundred steps and the loss falls from ln(V) towards the loss of
 * the true chain, which is known exactly (tg_data_loss_floor).
 */
#ifndef TINYGPT_DATA_H
#define TINYGPT_DATA_H

#include <stdint.h>

#include "rng.h"

#define TG_DATA_SUCCESSORS 4  /* successors per token */

typedef struct tg_data {
    int vocab;            /* V */
    int *next;            /* (V, TG_DATA_SUCCESSORS) successor tokens */
    double *cum;          /* (V, TG_DATA_SUCCESSORS) cumulative probabilities */
    tg_rng rng;           /* draws the walks */
} tg_data;

/* Builds the chain from seed. Returns 0, or -1 if memory ran out. */
int tg_data_create(tg_data *d, int vocab, uint64_t seed);
void tg_data_free(tg_data *d);
/* The mean cross-entropy (nats) of predicting with the true chain, over
 * walks of T tokens from a uniform start: no model can do better on
 * average. NaN if memory ran out. */
double tg_data_loss_floor(const tg_data *d, int T);
/* B walks of T+1 tokens: inputs (B, T) are tokens 0..T-1 of each walk,
 * targets (B, T) tokens 1..T (the next token at every position). */
void tg_data_batch(tg_data *d, int *inputs, int *targets, int B, int T);

#endif /* TINYGPT_DATA_H */
