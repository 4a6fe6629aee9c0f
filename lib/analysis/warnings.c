/*
 * warnings.c - what the report warns about (a->warnings, warnings.h):
 * massive activations (depth.c finds them), a pre-type model without a
 * final norm, stream growth, negligible or dominant updates, a
 * declaration the data contradict, non-finite values, sites missing while
 * the others are observed. Where over_run.c scanned the run, an update,
 * growth or massive-activation warning holds at any complete step and
 * says where (first step, worst step, in how many); a mean update that
 * rose more than RISE times from the first to the last complete step, to
 * RISE_MIN or more, is one too. Without that scan (the analysis of the last step shown beside
 * the judged one) each is judged at the analysed step alone.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/phases.h"

/* stream_in..stream_out */
#define RD_OLD_CORE_SITES 5

/* Relative update below this is "negligible", above DOMINANT "dominant". */
#define NEGLIGIBLE RD_NEGLIGIBLE_R
#define DOMINANT RD_DOMINANT_R
/* A sublayer's mean r over layers this many times its first step's, and
 * at least RISE_MIN: a rise among small updates (0.003 to 0.02) is what
 * early training does; one to a quarter of the stream and beyond is the
 * branches taking over. */
#define RISE 4.0
#define RISE_MIN 0.25

/* Appends a warning (up to RD_MAX_WARNINGS). */
static int warn(rd_warnings *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int warn(rd_warnings *w, const char *fmt, ...)
{
    if (w->count >= RD_MAX_WARNINGS)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->lines[w->count], RD_WARNING_LEN, fmt, ap);
    va_end(ap);
    return w->count++;
}

/* Where h holds, in words ("at step 199 only, of 200 steps"), into buf,
 * and in numbers. of: the steps scanned; stride > 1 when they were a
 * sample. */
static rd_warning_at where(const rd_analysis *a, const rd_where *h, int64_t of,
                           int64_t stride, char *buf, size_t cap)
{
    const int64_t *st = a->load.steps;
    long long first = st[h->first], worst = st[h->worst], n = h->n;
    const char *kind = stride > 1 ? " sampled" : "";
    if (of == 1)
        snprintf(buf, cap, "at the one step %lld scanned", worst);
    else if (n == of)
        snprintf(buf, cap, "at every one of the %lld%s steps, worst at step %lld", n, kind,
                 worst);
    else if (n == 1)
        snprintf(buf, cap, "at step %lld only, of %lld%s steps", worst, (long long)of, kind);
    else
        snprintf(buf, cap, "at %lld of %lld%s steps, first at step %lld, worst at step %lld", n,
                 (long long)of, kind, first, worst);
    return (rd_warning_at){ 1, first, worst, n, of };
}

/* Appends a warning: head, where h holds (of the steps scanned), tail. */
static void warn_where(rd_analysis *a, const rd_where *h, int64_t of, int64_t stride,
                       const char *head, const char *tail)
{
    char w[160];
    rd_warning_at at = where(a, h, of, stride, w, sizeof w);
    int i = warn(&a->warnings, "%s %s%s", head, w, tail);
    if (i >= 0)
        a->warnings.at[i] = at;
}

/* The massive activations depth.c found, in layer order: over the run
 * where it was scanned, else at the analysed step. */
static void warn_massive(rd_analysis *a)
{
    rd_warnings *w = &a->warnings;
    const rd_depth *d = &a->depth;
    if (a->over_run.n_stream_steps) {
        for (int l = 0; l < a->load.n_layers; l++) {
            const rd_where *h = &a->over_run.massive[l];
            if (!h->n)
                continue;
            char head[200];
            snprintf(head, sizeof head,
                     "massive activation: the stream leaving layer %d has |x| = %.3g in column "
                     "%.0f, %.1f times its mean per-token RMS %.3g,",
                     l, h->worst_value * h->rms, h->col, h->worst_value, h->rms);
            warn_where(a, h, a->over_run.n_stream_steps, a->over_run.stream_stride, head, "");
        }
        return;
    }
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

/* The stream's growth over depth above max_growth. */
static void warn_growth(rd_analysis *a)
{
    char head[160];
    if (a->over_run.n_growth_steps) {
        const rd_where *h = &a->over_run.growth;
        if (!h->n)
            return;
        snprintf(head, sizeof head, "the stream norm grows %.3gx over depth (more than %.3g)",
                 h->worst_value, a->load.max_growth);
        warn_where(a, h, a->over_run.n_growth_steps, a->over_run.growth_stride, head, "");
    } else if (a->depth.growth > a->load.max_growth) {
        warn(&a->warnings, "the stream norm grows %.3gx over depth (more than %.3g)",
             a->depth.growth, a->load.max_growth);
    }
}

/* Negligible and dominant updates, sublayer by sublayer. */
static void warn_updates(rd_analysis *a)
{
    int L = a->load.n_layers, S = a->load.n_sublayers;
    const rd_over_run *o = &a->over_run;
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) {
            const char *name = a->load.sublayer_names[s];
            char head[200];
            if (o->n_update_steps) {
                const rd_where *ng = &o->negligible[l * S + s], *dm = &o->dominant[l * S + s];
                if (ng->n) {
                    snprintf(head, sizeof head, "layer %d %s: negligible update r = %.2g (< %g)",
                             l, name, ng->worst_value, NEGLIGIBLE);
                    warn_where(a, ng, o->n_update_steps, o->update_stride, head, "");
                }
                if (dm->n) {
                    snprintf(head, sizeof head, "layer %d %s: dominant update r = %.3g (> %g)",
                             l, name, dm->worst_value, DOMINANT);
                    warn_where(a, dm, o->n_update_steps, o->update_stride, head,
                               ": the branch outweighs the stream");
                }
                continue;
            }
            double r = a->placement.r[l * S + s];
            if (r < NEGLIGIBLE)
                warn(&a->warnings, "layer %d %s: negligible update r = %.2g (< %g)", l, name, r,
                     NEGLIGIBLE);
            else if (r > DOMINANT)
                warn(&a->warnings,
                     "layer %d %s: dominant update r = %.3g (> %g): the branch "
                     "outweighs the stream",
                     l, name, r, DOMINANT);
        }
}

/* A sublayer's mean update over layers that rose more than RISE times
 * from the first complete step to the last, to RISE_MIN or more (not from
 * a negligible start: a zero-initialised branch rises by design). */
static void warn_rise(rd_analysis *a)
{
    if (!a->over_run.n_update_steps || a->aborted.first_index == a->aborted.last_index)
        return;
    const int64_t *st = a->load.steps;
    for (int s = 0; s < a->load.n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++) {
        double r0 = a->training.mean_r[0][s], r1 = a->training.mean_r[1][s];
        if (!(r0 >= NEGLIGIBLE && r1 > RISE * r0 && r1 >= RISE_MIN))
            continue;
        long long s0 = st[a->aborted.first_index], s1 = st[a->aborted.last_index];
        int i = warn(&a->warnings,
                     "%s: the mean update r over layers rose %.1fx, from %.3g at step %lld to "
                     "%.3g at step %lld (more than %gx)",
                     a->load.sublayer_names[s], r1 / r0, r0, s0, r1, s1, RISE);
        if (i >= 0)
            a->warnings.at[i] = (rd_warning_at){ 1, s0, s1, 0, 0 };
    }
}

void rd_analysis_warnings(rd_analysis *a)
{
    /* depth.c's come first, as when it added them itself */
    warn_massive(a);
    resdiag_verdict v = a->verdict.v;
    int pre_like = v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_SANDWICH ||
                   v == RESDIAG_VERDICT_PRE_OR_SANDWICH || v == RESDIAG_VERDICT_PARALLEL ||
                   v == RESDIAG_VERDICT_MIXED;
    if (pre_like && a->final_norm.reads_norm == 0)
        warn(&a->warnings,
             "%s without a final norm: the head reads a stream that grows with "
             "depth",
             resdiag_verdict_name(a->verdict.v));
    warn_growth(a);
    warn_updates(a);
    warn_rise(a);
    if (a->load.declared != RESDIAG_PLACEMENT_UNDECLARED && rd_declared_agrees(a) == 0)
        warn(&a->warnings, "the trainer declares %s, but the data say %s",
             resdiag_placement_name(a->load.declared), resdiag_verdict_name(a->verdict.v));
    if (a->nonfinite.found) {
        int i = warn(&a->warnings, "non-finite values from step %lld on (in %lld of %lld "
                     "recorded steps)", (long long)a->nonfinite.step,
                     (long long)a->nonfinite.n_bad_steps, (long long)a->load.n_steps);
        if (i >= 0)
            a->warnings.at[i] = (rd_warning_at){ 1, a->nonfinite.step, a->nonfinite.step,
                                                 a->nonfinite.n_bad_steps, a->load.n_steps };
    }
    warn_missing_sites(a);
}
