/*
 * observe.c - which sites were observed at the analysed step, in either
 * direction (a->observe, observe.h): whether the sketch relations can
 * judge the placement, or only the stream's signature.
 */
#include "analysis/phases.h"

resdiag_status rd_analysis_observe(const resdiag_reader *rd, rd_analysis *a)
{
    rd_observe *o = &a->observe;
    int64_t si = a->load.step_index;
    resdiag_status st;
    for (int l = 0; l < a->load.n_layers; l++)
        for (int s = 0; s < a->load.n_sublayers; s++)
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                for (int d = 0; d < 2; d++) {
                    double f[RESDIAG_N_FIELDS];
                    int obs = 0;
                    if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, l, s,
                                                  (resdiag_site)b, f, &obs)))
                        return st;
                    o->n_obs[d][b] += obs;
                }
    for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++)
        for (int d = 0; d < 2; d++) {
            double f[RESDIAG_N_FIELDS];
            int obs = 0;
            if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, 0, 0,
                                          (resdiag_site)(RESDIAG_EMBED_OUT + m), f, &obs)))
                return st;
            o->model_obs[d][m] = obs;
        }
    o->stream_only = o->n_obs[0][RESDIAG_NORM_IN] + o->n_obs[0][RESDIAG_NORM_OUT] +
                         o->n_obs[0][RESDIAG_BRANCH_OUT] == 0;
    o->use_relations = !o->stream_only && a->load.sketch_size > 0;
    return RESDIAG_OK;
}
