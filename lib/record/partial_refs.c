/*
 * partial_refs.c - a step's partial statistics submitted by reference
 * (resdiag_submit_partial_refs): a binding that reads each tensor once
 * (resdiag_partial_compute) hands the library, in one call at the step's
 * end, every site with a pointer to its tensor's partial (one partial for
 * every site that saw that very tensor unchanged) and the tensor's
 * per-token norms, from which the library pairs the update ratio of a
 * residual add as it does for the tensors it reads (update_ratio.c): one
 * implementation of the pairing.
 */
#include "record/hooks.h"

/* One entry as a single call: a parameter gradient (site -1) or a site. */
static resdiag_status submit_ref(resdiag *r, const char *fn, const resdiag_partial_ref *e,
                                 const char *file)
{
    const resdiag_partial_site *s = &e->site;
    const char *f = s->file ? s->file : file;
    if (!e->p)
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: the partial statistics are NULL (%s:%d)",
                             fn, f ? f : "?", s->line);
    rd_hook_data d = { NULL, e->p, s->site == -1 ? NULL : e->row_norms, NULL, NULL };
    if (s->site == -1)
        return rd_hook_param_grad(r, fn, s->layer, NULL, s->param, d, f, s->line);
    return rd_hook_observe(r, fn, (resdiag_direction)s->dir, s->layer, s->sublayer,
                           (resdiag_site)s->site, d, f, s->line);
}

resdiag_status resdiag_submit_partial_refs(resdiag *r, int n, const resdiag_partial_ref *refs,
                                           const char *file, int *failed)
{
    static const char fn[] = "resdiag_submit_partial_refs";
    if (failed)
        *failed = 0;
    if (!r)
        return RESDIAG_OK;
    if (!r->recording)
        return rd_hook_idle(r, fn, file, 0);
    if (n < 0 || (n > 0 && !refs)) {
        if (failed)
            *failed = n > 0 ? n : 1;
        return n < 0 ? rd_client_bug(r, RESDIAG_E_INVALID, "%s: n is %d (%s)", fn, n,
                                     file ? file : "?")
                     : rd_client_bug(r, RESDIAG_E_NULL, "%s: refs is NULL for %d entries (%s)",
                                     fn, n, file ? file : "?");
    }
    resdiag_status first = RESDIAG_OK;
    for (int i = 0; i < n; i++) {
        resdiag_status st = submit_ref(r, fn, &refs[i], file);
        if (st) {
            if (!first)
                first = st;
            if (failed)
                ++*failed;
        }
    }
    return first;
}
