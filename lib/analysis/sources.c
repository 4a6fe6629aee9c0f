/*
 * sources.c - the literature's claims and numbers that the consequences
 * quote, in one table: every renderer prints these strings and nothing
 * else of the sources, so a number is typed once (doc/REPORT.md,
 * "Consequences", gives the same table for people).
 */
#include "analysis/sources.h"

#include <stddef.h>

#define XIONG "Xiong et al. 2020, \"On Layer Normalization in the Transformer Architecture\" " \
              "(arXiv 2002.04745)"
#define XIE "Xie et al. (residual stream analysis)"
#define NGUYEN "Nguyen and Salazar 2019, \"Transformers without Tears\""

static const rd_source table[RD_N_CQ] = {
    [RD_CQ_POST_NO_WARMUP] = {
        "post_no_warmup", "post-norm trained without a learning-rate warm-up",
        XIONG "; " XIE,
        "at initialization post-LN's expected gradients of the parameters near the output "
        "layer are large (the bound does not shrink with depth), so post-LN needs a "
        "learning-rate warm-up; in the IWSLT table Post-LN without warm-up fails to train at "
        "both E6D6 and E12D12 (with warm-up: 35.37 BLEU at E6D6, fails at E12D12)",
        "IWSLT translation, encoder-decoder Transformers of 6+6 and 12+12 layers",
        "one dataset and one model family; the gradient bound holds at initialization under "
        "the paper's independence assumptions; a failure is that of the paper's optimizer "
        "settings",
    },
    [RD_CQ_POST_DEEP_WARMUP] = {
        "post_deep_with_warmup", "post-norm at 12 or more layers, with warm-up",
        XIE,
        "in the IWSLT table Post-LN with warm-up reaches 35.37 BLEU at E6D6 and fails to "
        "train at E12D12; Pre-LN with warm-up reaches 35.12 / 35.18",
        "IWSLT translation, encoder-decoder Transformers of 6+6 and 12+12 layers",
        "one dataset and one model family; 12 layers here are one stack, the source's E12D12 "
        "two stacks of 12",
    },
    [RD_CQ_POST_SMALL_INIT] = {
        "post_small_init", "post-norm with a small branch scale at initialization",
        NGUYEN,
        "at low resource post-norm with Xavier init fails to converge at 4k and 8k warm-up "
        "steps and reaches 5.76 BLEU at 16k; a smaller attention initialization (SmallInit) "
        "brings the same post-norm model to 28.17 BLEU at 4k (pre-norm 28.52); at high "
        "resource (WMT'14 en-de, base) post-norm wins: 27.58 against 26.83 BLEU",
        "low-resource translation (IWSLT, TED), Transformer base; WMT'14 en-de for the high "
        "resource numbers",
        "SmallInit is a smaller weight initialization of attention; here the branch scale is "
        "read from the relative update at the first step, which other causes can make small "
        "too; one task family",
    },
    [RD_CQ_PRE_DEEP] = {
        "pre_deep", "pre-norm at 24 or more layers",
        XIE,
        "in pre-LN the per-layer change of the normalized hidden state decays as "
        "O(1/sqrt(k)), and adding a block to an N-1 block model moves the output by "
        "O(1/sqrt(N)); at 24 layers the per-layer change is about a fifth of the first",
        "pre-LN Transformers, the bound's regime; the fifth at 24 layers",
        "an asymptotic order, not a constant; here the share is a first-order estimate from "
        "the recorded relative updates, the sublayers' updates taken as independent",
    },
    [RD_CQ_PRE_NO_WARMUP] = {
        "pre_no_warmup", "pre-norm trained without a learning-rate warm-up",
        XIONG "; " XIE "; " NGUYEN,
        "pre-LN can train without warm-up, at a cost: on IWSLT Pre-LN reaches 35.12 / 35.18 "
        "BLEU at E6D6 / E12D12 with warm-up and 32.28 / 31.82 without (2.84 and 3.36 BLEU "
        "less); with 5-6 layers and no warm-up post-norm fails and pre-norm reaches "
        "28.13 / 28.32",
        "IWSLT translation, 6+6 and 12+12 layers; low-resource translation at 5-6 layers",
        "two datasets of one task family; the cost depends on the peak learning rate and "
        "the optimizer, which the sources fixed",
    },
};

const rd_source *rd_source_of(rd_cq_id c)
{
    return c >= 0 && c < RD_N_CQ ? &table[c] : NULL;
}
