/*
 * hooks.c - every public write entry point of a step, each a thin wrapper:
 * it names its target (a site or a parameter gradient) and its source (a
 * tensor, partial statistics, a team's part, another site's last call, an
 * alias) and calls rd_write, which resolves the target by the one
 * prologue (target.c) and routes the source: a team's part to team.c, a
 * copy to same_as.c, the rest to the one ingestion (ingest.c). The two
 * batch submissions add only their own arguments' checks and the loop.
 */
#include "record/hooks.h"
#include "record/same_as.h"
#include "record/team.h"

resdiag_status rd_write(resdiag *r, rd_target *t, const rd_hook_data *d)
{
    int skipped;
    resdiag_status st = rd_target_resolve(r, t, d, &skipped);
    if (st || skipped)
        return st;
    if (d->kind == RD_SOURCE_TEAM_PART)
        return rd_team_write(r, t, d);
    if (d->kind == RD_SOURCE_SAME_AS)
        return rd_copy_write(r, t, d);
    return rd_ingest(r, t, d);
}

static rd_target site_target(const char *fn, resdiag_direction dir, int layer, int sublayer,
                             resdiag_site site, const char *file, int line)
{
    const rd_target t = { .fn = fn, .file = file, .line = line, .kind = RD_TARGET_SITE,
                          .dir = dir, .layer = layer, .sublayer = sublayer, .site = site };
    return t;
}

/* A parameter gradient by name, or (name_given 0) by its index param. */
static rd_target param_target(const char *fn, int layer, int name_given, const char *name,
                              int param, const char *file, int line)
{
    const rd_target t = { .fn = fn, .file = file, .line = line, .kind = RD_TARGET_PARAM,
                          .dir = RESDIAG_BACKWARD, .layer = layer, .by_name = name_given,
                          .name = name, .param = param };
    return t;
}

/* A batch entry's target: a parameter by index (site -1) or a site, at
 * the entry's call site (its file, else the batch's). */
static rd_target entry_target(const char *fn, const resdiag_partial_site *e, const char *file)
{
    const char *f = e->file ? e->file : file;
    if (e->site == -1)
        return param_target(fn, e->layer, 0, NULL, e->param, f, e->line);
    return site_target(fn, (resdiag_direction)e->dir, e->layer, e->sublayer,
                       (resdiag_site)e->site, f, e->line);
}

/* ------------------------------------------------------------ sites */

resdiag_status resdiag_observe_at(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                  resdiag_site site, resdiag_tensor t, const char *file,
                                  int line)
{
    rd_target at = site_target("resdiag_observe_at", dir, layer, sublayer, site, file, line);
    const rd_hook_data d = { .kind = RD_SOURCE_TENSOR, .t = &t };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_observe_partial(resdiag *r, resdiag_direction dir, int layer,
                                       int sublayer, resdiag_site site, const resdiag_partial *p,
                                       const char *file, int line)
{
    rd_target at = site_target("resdiag_observe_partial", dir, layer, sublayer, site, file,
                               line);
    const rd_hook_data d = { .kind = RD_SOURCE_PARTIAL, .p = p };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_observe_team_at(resdiag *r, resdiag_direction dir, int layer,
                                       int sublayer, resdiag_site site, resdiag_tensor t,
                                       int part, int n_parts, const char *file, int line)
{
    rd_target at = site_target("resdiag_observe_team_at", dir, layer, sublayer, site, file,
                               line);
    const rd_hook_data d = { .kind = RD_SOURCE_TEAM_PART, .t = &t, .team_part = part,
                             .n_parts = n_parts };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_observe_same_as(resdiag *r, resdiag_direction dir, int layer,
                                       int sublayer, resdiag_site site, int from_layer,
                                       int from_sublayer, resdiag_site from_site,
                                       const char *file, int line)
{
    static const char fn[] = "resdiag_observe_same_as";
    rd_target at = site_target(fn, dir, layer, sublayer, site, file, line);
    rd_target from = site_target(fn, dir, from_layer, from_sublayer, from_site, file, line);
    at.end = "site";
    from.end = "source site";
    const rd_hook_data d = { .kind = RD_SOURCE_SAME_AS, .from = &from };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_observe_alias(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, resdiag_site same_as)
{
    rd_target at = site_target("resdiag_observe_alias", dir, layer, sublayer, site, NULL, 0);
    at.unlocated = 1;
    const rd_hook_data d = { .kind = RD_SOURCE_ALIAS, .alias_of = same_as };
    return rd_write(r, &at, &d);
}

/* ------------------------------------------------------------ parameter gradients */

resdiag_status resdiag_param_grad_at(resdiag *r, int layer, const char *name, resdiag_tensor t,
                                     const char *file, int line)
{
    rd_target at = param_target("resdiag_param_grad_at", layer, 1, name, -1, file, line);
    const rd_hook_data d = { .kind = RD_SOURCE_TENSOR, .t = &t };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_param_grad_partial(resdiag *r, int layer, const char *name,
                                          const resdiag_partial *p, const char *file, int line)
{
    rd_target at = param_target("resdiag_param_grad_partial", layer, 1, name, -1, file, line);
    const rd_hook_data d = { .kind = RD_SOURCE_PARTIAL, .p = p };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_param_grad_team_at(resdiag *r, int layer, const char *name,
                                          resdiag_tensor t, int part, int n_parts,
                                          const char *file, int line)
{
    rd_target at = param_target("resdiag_param_grad_team_at", layer, 1, name, -1, file, line);
    const rd_hook_data d = { .kind = RD_SOURCE_TEAM_PART, .t = &t, .team_part = part,
                             .n_parts = n_parts };
    return rd_write(r, &at, &d);
}

resdiag_status resdiag_param_grad_same_as(resdiag *r, int layer, const char *name,
                                          int from_layer, const char *from_name,
                                          const char *file, int line)
{
    static const char fn[] = "resdiag_param_grad_same_as";
    rd_target at = param_target(fn, layer, 1, name, -1, file, line);
    rd_target from = param_target(fn, from_layer, 1, from_name, -1, file, line);
    const rd_hook_data d = { .kind = RD_SOURCE_SAME_AS, .from = &from };
    return rd_write(r, &at, &d);
}

/* ------------------------------------------------------------ batches */

resdiag_status resdiag_submit_partials(resdiag *r, int n, const resdiag_partial_site *sites,
                                       const resdiag_partial *p, const char *file)
{
    static const char fn[] = "resdiag_submit_partials";
    resdiag_status st, first = RESDIAG_OK;
    if (rd_hook_skips(r, fn, file, 0, &st))
        return st;
    if (n < 0)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: n is %d (%s)", fn, n,
                             file ? file : "?");
    if (n > 0 && (!sites || !p))
        return rd_client_bug(r, RESDIAG_E_NULL, "%s: %s is NULL for %d entries (%s)", fn,
                             sites ? "p" : "sites", n, file ? file : "?");
    for (int i = 0; i < n; i++) {
        rd_target at = entry_target(fn, &sites[i], file);
        const rd_hook_data d = { .kind = RD_SOURCE_PARTIAL, .p = &p[i] };
        if ((st = rd_write(r, &at, &d)) && !first)
            first = st;
    }
    return first;
}

/* A binding that reads each tensor once (resdiag_partial_compute) hands
 * the library, in one call at the step's end, every site with a pointer
 * to its tensor's partial (one partial for every site that saw that very
 * tensor unchanged) and the tensor's per-token norms, from which the
 * library pairs the update ratio of a residual add as it does for the
 * tensors it reads (update_ratio.c): one implementation of the pairing. */
resdiag_status resdiag_submit_partial_refs(resdiag *r, int n, const resdiag_partial_ref *refs,
                                           const char *file, int *failed)
{
    static const char fn[] = "resdiag_submit_partial_refs";
    resdiag_status st, first = RESDIAG_OK;
    if (failed)
        *failed = 0;
    if (rd_hook_skips(r, fn, file, 0, &st))
        return st;
    if (n < 0 || (n > 0 && !refs)) {
        if (failed)
            *failed = n > 0 ? n : 1;
        return n < 0 ? rd_client_bug(r, RESDIAG_E_INVALID, "%s: n is %d (%s)", fn, n,
                                     file ? file : "?")
                     : rd_client_bug(r, RESDIAG_E_NULL, "%s: refs is NULL for %d entries (%s)",
                                     fn, n, file ? file : "?");
    }
    for (int i = 0; i < n; i++) {
        const resdiag_partial_ref *e = &refs[i];
        rd_target at = entry_target(fn, &e->site, file);
        const rd_hook_data d = { .kind = RD_SOURCE_PARTIAL, .p = e->p,
                                 .row_norms = e->site.site == -1 ? NULL : e->row_norms };
        if ((st = rd_write(r, &at, &d))) {
            if (!first)
                first = st;
            if (failed)
                ++*failed;
        }
    }
    return first;
}
