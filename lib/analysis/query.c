/*
 * query.c - the public accessors of an analysis (resdiag.h): the verdict,
 * its confidence, alpha, the mixed layers, the final norm, the growth, one
 * sublayer's verdict, the first non-finite value.
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/analysis.h"

resdiag_verdict resdiag_analysis_verdict(const resdiag_analysis *a)
{
    return a ? a->verdict : RESDIAG_VERDICT_CANNOT_TELL;
}

resdiag_confidence resdiag_analysis_confidence(const resdiag_analysis *a)
{
    return a && a->verdict != RESDIAG_VERDICT_CANNOT_TELL ? a->conf : RESDIAG_CONFIDENCE_NONE;
}

int resdiag_analysis_mix_layers(const resdiag_analysis *a)
{
    return a && a->verdict == RESDIAG_VERDICT_MIXED ? a->mix_layers : -1;
}

double resdiag_analysis_alpha(const resdiag_analysis *a)
{
    return a && a->verdict == RESDIAG_VERDICT_DEEPNORM ? a->alpha : NAN;
}

int resdiag_analysis_final_norm(const resdiag_analysis *a)
{
    return a ? a->final_norm : -1;
}

int resdiag_analysis_stream_only(const resdiag_analysis *a)
{
    return a ? a->stream_only : 0;
}

resdiag_verdict resdiag_analysis_sublayer(const resdiag_analysis *a, int layer, int sublayer,
                                          double *alpha)
{
    if (alpha)
        *alpha = NAN;
    if (!a || layer < 0 || layer >= a->n_layers || sublayer < 0 || sublayer >= a->n_sublayers)
        return RESDIAG_VERDICT_CANNOT_TELL;
    const rd_sub *r = &a->sub[layer * a->n_sublayers + sublayer];
    if (alpha && r->v == RESDIAG_VERDICT_DEEPNORM)
        *alpha = r->alpha;
    return r->v;
}

double resdiag_analysis_growth(const resdiag_analysis *a)
{
    return a ? a->growth : NAN;
}

int64_t resdiag_analysis_step(const resdiag_analysis *a)
{
    return a ? a->step : -1;
}

int resdiag_analysis_first_nonfinite(const resdiag_analysis *a, int64_t *step, int *layer,
                                     int *sublayer, int *site, resdiag_direction *dir)
{
    if (!a || !a->nf_found)
        return 0;
    if (step)
        *step = a->nf_step;
    if (layer)
        *layer = a->nf_layer;
    if (sublayer)
        *sublayer = a->nf_sub;
    if (site)
        *site = a->nf_site;
    if (dir)
        *dir = a->nf_dir;
    return 1;
}

void resdiag_free(void *p)
{
    free(p);
}
