/*
 * partial_norms.c - partial statistics submitted with the tensor's
 * per-token norms (resdiag_observe_partial_norms): a binding that reads a
 * tensor once for every site that sees it (the stream a pre-norm block's
 * sublayers share) submits the one partial at each site, and the library
 * pairs the update ratio's per-token norms itself, as for the tensors it
 * reads (update_ratio.c): one implementation of the pairing.
 */
#include "record/hooks.h"

resdiag_status resdiag_observe_partial_norms(resdiag *r, resdiag_direction dir, int layer,
                                             int sublayer, resdiag_site site,
                                             const resdiag_partial *p, const double *row_norms,
                                             const char *file, int line)
{
    static const char fn[] = "resdiag_observe_partial_norms";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording)
        return rd_hook_idle(r, fn, file, line);
    if (!p)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: the partial statistics are NULL (%s:%d)",
                             fn, file ? file : "?", line);
    rd_hook_data d = { NULL, p, row_norms };
    return rd_hook_observe(r, fn, dir, layer, sublayer, site, d, file, line);
}
