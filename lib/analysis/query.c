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
    return a ? a->verdict.v : RESDIAG_VERDICT_CANNOT_TELL;
}

resdiag_confidence resdiag_analysis_confidence(const resdiag_analysis *a)
{
    return a && a->verdict.v != RESDIAG_VERDICT_CANNOT_TELL ? a->verdict.conf
                                                            : RESDIAG_CONFIDENCE_NONE;
}

int resdiag_analysis_mix_layers(const resdiag_analysis *a)
{
    return a && a->verdict.v == RESDIAG_VERDICT_MIXED ? a->verdict.mix_layers : -1;
}

double resdiag_analysis_alpha(const resdiag_analysis *a)
{
    return a && a->verdict.v == RESDIAG_VERDICT_DEEPNORM ? a->verdict.alpha : NAN;
}

int resdiag_analysis_final_norm(const resdiag_analysis *a)
{
    return a ? a->final_norm.reads_norm : -1;
}

int resdiag_analysis_stream_only(const resdiag_analysis *a)
{
    return a ? a->observe.stream_only : 0;
}

resdiag_verdict resdiag_analysis_sublayer(const resdiag_analysis *a, int layer, int sublayer,
                                          double *alpha)
{
    if (alpha)
        *alpha = NAN;
    if (!a || layer < 0 || layer >= a->load.n_layers || sublayer < 0 ||
        sublayer >= a->load.n_sublayers)
        return RESDIAG_VERDICT_CANNOT_TELL;
    const rd_sub *r = &a->placement.sub[layer * a->load.n_sublayers + sublayer];
    if (alpha && r->v == RESDIAG_VERDICT_DEEPNORM)
        *alpha = r->alpha;
    return r->v;
}

double resdiag_analysis_growth(const resdiag_analysis *a)
{
    return a ? a->depth.growth : NAN;
}

int64_t resdiag_analysis_step(const resdiag_analysis *a)
{
    return a ? a->load.step : -1;
}

int resdiag_analysis_first_nonfinite(const resdiag_analysis *a, int64_t *step, int *layer,
                                     int *sublayer, int *site, resdiag_direction *dir)
{
    if (!a || !a->nonfinite.found)
        return 0;
    if (step)
        *step = a->nonfinite.step;
    if (layer)
        *layer = a->nonfinite.layer;
    if (sublayer)
        *sublayer = a->nonfinite.sub;
    if (site)
        *site = a->nonfinite.site;
    if (dir)
        *dir = a->nonfinite.dir;
    return 1;
}

void resdiag_free(void *p)
{
    free(p);
}
