/*
 * observe.c - which sites were observed at the analysed step, in either
 * direction (a->observe, observe.h): whether the sketch relations can
 * judge the placement, or only the stream's signature; every site's
 * statistics there are kept, so that no phase reads them again.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"

/* Where block site b of (l, s) in direction d is kept. */
static size_t block_slot(const rd_analysis *a, int d, int l, int s, int b)
{
    return (((size_t)d * a->load.n_layers + l) * a->load.n_sublayers + s) *
               RESDIAG_N_BLOCK_SITES +
           b;
}

resdiag_status rd_analysis_observe(const resdiag_reader *rd, rd_analysis *a)
{
    rd_observe *o = &a->observe;
    int64_t si = a->load.step_index;
    size_t n = block_slot(a, 2, 0, 0, 0);
    o->block_st = malloc((n ? n : 1) * sizeof *o->block_st);
    o->block_obs = calloc(n ? n : 1, sizeof *o->block_obs);
    if (!o->block_st || !o->block_obs)
        return RESDIAG_E_NOMEM;
    resdiag_status st;
    for (int l = 0; l < a->load.n_layers; l++)
        for (int s = 0; s < a->load.n_sublayers; s++)
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                for (int d = 0; d < 2; d++) {
                    size_t i = block_slot(a, d, l, s, b);
                    int obs = 0;
                    if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, l, s,
                                                  (resdiag_site)b, o->block_st[i], &obs)))
                        return st;
                    o->block_obs[i] = obs;
                    o->n_obs[d][b] += obs;
                }
    for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++)
        for (int d = 0; d < 2; d++) {
            int obs = 0;
            if ((st = resdiag_reader_site(rd, si, (resdiag_direction)d, 0, 0,
                                          (resdiag_site)(RESDIAG_EMBED_OUT + m),
                                          o->model_st[d][m], &obs)))
                return st;
            o->model_obs[d][m] = obs;
        }
    o->stream_only = o->n_obs[0][RESDIAG_NORM_IN] + o->n_obs[0][RESDIAG_NORM_OUT] +
                         o->n_obs[0][RESDIAG_BRANCH_OUT] ==
                     0;
    o->use_relations = !o->stream_only && a->load.sketch_size > 0;
    return RESDIAG_OK;
}

resdiag_status rd_analysis_site(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                resdiag_direction dir, int l, int s, resdiag_site site, double *f,
                                int *obs)
{
    const rd_observe *o = &a->observe;
    int d = dir == RESDIAG_FORWARD ? 0 : dir == RESDIAG_BACKWARD ? 1 : -1;
    int m = (int)site - RESDIAG_EMBED_OUT;
    if (si != a->load.step_index || !o->block_st || d < 0)
        return resdiag_reader_site(rd, si, dir, l, s, site, f, obs);
    if ((int)site >= 0 && site < RESDIAG_N_BLOCK_SITES && l >= 0 && l < a->load.n_layers &&
        s >= 0 && s < a->load.n_sublayers) {
        size_t i = block_slot(a, d, l, s, (int)site);
        memcpy(f, o->block_st[i], sizeof o->block_st[i]);
        *obs = o->block_obs[i];
        return RESDIAG_OK;
    }
    if (m >= 0 && m < RESDIAG_N_MODEL_SITES && l == 0 && s == 0) {
        memcpy(f, o->model_st[d][m], sizeof o->model_st[d][m]);
        *obs = o->model_obs[d][m];
        return RESDIAG_OK;
    }
    return resdiag_reader_site(rd, si, dir, l, s, site, f, obs);
}
