/*
 * text_legend.c - the legend at the end of the text report: each term the
 * report uses, explained once (text_legend.h).
 */
#include "render/text_legend.h"

#include <stdlib.h>
#include <string.h>

#include "common/escape.h"

typedef rd_strbuf sb;

/* The report's own terms, each explained once for a reader who knows
 * Transformers but not this tool: only those the text above uses (found by
 * their marker), in the order a reader meets them. */
static const struct {
    const char *marker, *text;
} legend_terms[] = {
    { "(record ", "record N: the Nth record in the file, counted from 1 in the order written; "
                  "the step number beside it is the trainer's own" },
    { "; sketch ", "sketch N: each recorded tensor is also kept as N random projections "
                   "(its products with the same N random vectors), enough to test identities "
                   "between tensors without storing them" },
    { "sketch relations", "sketch relations: identities between recorded tensors of a sublayer "
                          "(e.g. stream_out = stream_in + branch_out) checked on the random "
                          "projections of each, given as a relative error; one that truly holds "
                          "shows ~1e-7 in float32 (rounding), one that does not ~0.1 to 1" },
    { "pre-type", "pre-type relations: those a pre-norm sublayer satisfies - the norm reads the "
                  "stream (norm_in = stream_in) and the branch output is added to it "
                  "(stream_out = stream_in + branch_out)" },
    { "post-type", "post-type relations: those a post-norm sublayer satisfies - the norm reads "
                   "the sum (norm_in = alpha stream_in + branch_out) and its output is the new "
                   "stream (stream_out = norm_out); \"post-type off by E\": their error E here" },
    { "(first of these)", "(first of these): the layers of that line share the verdict; the "
                          "numbers shown are the first layer's" },
    { "rounding floor", "rounding floor: the smallest relative error float rounding alone can "
                        "give for a tensor of that size and dtype; errors below it are noise, "
                        "not evidence" },
    { "by construction", "by construction: a relation between two records of the same tensor "
                         "(the trainer declared them one tensor); it holds for any model, so it "
                         "is no evidence" },
    { "call order", "call order: the order in which the model called the recording hooks in a "
                    "sublayer; a pre-norm block reaches the norm before the branch, a post-norm "
                    "block the branch before the norm" },
    { "deciding hooks", "deciding hooks: the source lines of the recording calls whose tensors "
                        "decided the verdict, to check the right tensors were recorded" },
    { " rms ", "rms: the per-token root mean square of the stream (per-token L2 norm / "
               "sqrt(d_model)), averaged over tokens" },
    { "||grad ", "||grad P||: the Frobenius norm of the loss gradient of that layer's parameter "
                 "P (the one named first in Gradients)" },
    { "growth", "stream growth: ||x_L|| / ||x_1||, the norm of the stream leaving the last layer "
                "over that leaving the first" },
};

void rd_text_legend(sb *b, const rd_analysis *a)
{
    if (b->failed || !b->s)
        return;
    /* The markers are looked for in the body only, never in the legend. */
    char *body = malloc(b->len + 1);
    if (!body) {
        b->failed = 1;
        return;
    }
    memcpy(body, b->s, b->len + 1);
    rd_strbuf_printf(b, "\nLegend:\n");
    size_t n = sizeof legend_terms / sizeof legend_terms[0];
    for (size_t i = 0; i < n; i++) {
        if (!strstr(body, legend_terms[i].marker))
            continue;
        rd_strbuf_printf(b, "  %s\n", legend_terms[i].text);
        if (!strcmp(legend_terms[i].marker, " rms ") && a->load.n_sublayers > 0) {
            /* the r columns, named by the trainer's sublayers */
            rd_strbuf_printf(b, "  ");
            for (int s = 0; s < a->load.n_sublayers && s < 4; s++) {
                char esc[160];
                rd_text_escape(esc, sizeof esc, a->load.sublayer_names[s]);
                rd_strbuf_printf(b, "%sr_%s", s ? ", " : "", esc);
            }
            rd_strbuf_printf(b, ": r = ||dx|| / ||x|| of that sublayer - the norm of what its "
                                "branch adds to the stream over the norm of the stream it reads\n");
        }
    }
    free(body);
}
