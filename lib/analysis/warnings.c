/*
 * warnings.c - what the report warns about (a->warnings, warnings.h):
 * massive activations (depth.c finds them), a pre-type model without a
 * final norm, stream growth, negligible or dominant updates, a
 * declaration the data contradict, non-finite values, sites missing while
 * the others are observed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/phases.h"

/* stream_in..stream_out */
#define RD_OLD_CORE_SITES 5

/* Relative update below this is "negligible", above DOMINANT "dominant". */
#define NEGLIGIBLE 1e-3
#define DOMINANT 1.0

/* Appends a warning (up to RD_MAX_WARNINGS). */
static void warn(rd_warnings *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void warn(rd_warnings *w, const char *fmt, ...)
{
    if (w->count >= RD_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->lines[w->count++], RD_WARNING_LEN, fmt, ap);
    va_end(ap);
}

/* The massive activations depth.c found, in layer order. */
static void warn_massive(rd_warnings *w, const rd_depth *d)
{
    for (int i = 0; i < d->n_massive; i++) {
        const rd_massive *m = &d->massive[i];
        warn(w,
             "massive activation: the stream leaving layer %d has |x| = %.3g in column "
             "%.0f, %.1f times its mean per-token RMS %.3g",
             m->layer, m->absmax, m->col, m->absmax / m->rms, m->rms);
    }
}

/* Sites that the relations needed but were not observed, while the other
 * sites were: named for the first such sublayer. */
static void warn_missing_sites(rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    int n_missing = 0, first_missing = -1;
    /* the sites every sublayer has; a missing optional one (branch_in,
     * out_norm_*) is named by the verdict that needed it */
    const unsigned core = (1u << RD_OLD_CORE_SITES) - 1;
    for (int i = 0; i < L * S; i++)
        if ((a->placement.sub[i].missing & core) && n_missing++ == 0)
            first_missing = i;
    if (!n_missing)
        return;
    char names[128] = "";
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        if (a->placement.sub[first_missing].missing & core & (1u << b)) {
            size_t u = strlen(names);
            snprintf(names + u, sizeof names - u, "%s%s", u ? ", " : "",
                     resdiag_site_name((resdiag_site)b));
        }
    warn(&a->warnings,
         "%s not observed while the other sites are, in %d of %d sublayers "
         "(first: layer %d %s; a hooked module that never ran?): cannot tell those",
         names, n_missing, L * S, first_missing / S, a->load.sublayer_names[first_missing % S]);
}

void rd_analysis_warnings(rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    /* depth.c's come first, as when it added them itself */
    warn_massive(&a->warnings, &a->depth);
    resdiag_verdict v = a->verdict.v;
    int pre_like = v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_SANDWICH ||
                   v == RESDIAG_VERDICT_PRE_OR_SANDWICH || v == RESDIAG_VERDICT_PARALLEL ||
                   v == RESDIAG_VERDICT_MIXED;
    if (pre_like && a->final_norm.reads_norm == 0)
        warn(&a->warnings,
             "%s without a final norm: the head reads a stream that grows with "
             "depth",
             resdiag_verdict_name(a->verdict.v));
    if (a->depth.growth > a->load.max_growth)
        warn(&a->warnings, "the stream norm grows %.3gx over depth (more than %.3g)",
             a->depth.growth, a->load.max_growth);
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            double r = a->placement.r[l * S + s];
            if (r < NEGLIGIBLE)
                warn(&a->warnings, "layer %d %s: negligible update r = %.2g (< %g)", l,
                     a->load.sublayer_names[s], r, NEGLIGIBLE);
            else if (r > DOMINANT)
                warn(&a->warnings,
                     "layer %d %s: dominant update r = %.3g (> %g): the branch "
                     "outweighs the stream",
                     l, a->load.sublayer_names[s], r, DOMINANT);
        }
    if (a->load.declared != RESDIAG_PLACEMENT_UNDECLARED && rd_declared_agrees(a) == 0)
        warn(&a->warnings, "the trainer declares %s, but the data say %s",
             resdiag_placement_name(a->load.declared), resdiag_verdict_name(a->verdict.v));
    if (a->nonfinite.found)
        warn(&a->warnings, "non-finite values from step %lld on", (long long)a->nonfinite.step);
    warn_missing_sites(a);
}
