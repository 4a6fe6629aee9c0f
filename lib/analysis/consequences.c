/*
 * consequences.c - which of the sources' findings apply to the run
 * (a->consequences): each fires only on what was measured (the placement
 * verdict, the depth, a->measures), never on what the trainer declared;
 * one whose condition needs a measurement the run lacks (no `lr`
 * metric, no relative updates) is listed as not measured instead of
 * firing. The claims themselves are sources.c's. `check` never reads this.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/phases.h"

static int is_post(resdiag_verdict v)
{
    /* DeepNorm is a post-norm made to train deep; the sources did not test it */
    return v == RESDIAG_VERDICT_POST || v == RESDIAG_VERDICT_POST_FAMILY;
}

static int is_pre(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_PRE || v == RESDIAG_VERDICT_PRE_OR_SANDWICH;
}

static void cat(char *b, size_t n, const char *fmt, ...)
{
    size_t len = strlen(b);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + len, n - len, fmt, ap);
    va_end(ap);
}

static rd_consequence *add(rd_analysis *a, rd_cq_id id, int met)
{
    rd_consequence *c = &a->consequences.e[a->consequences.n++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->met = met;
    return c;
}

/* The output layer's gradient against the first's, in words. */
static void grad_words(const rd_analysis *a, char *b, size_t n)
{
    const rd_measures *m = &a->measures;
    if (a->gradients.n_order <= 0 || m->grad_step < 0) {
        cat(b, n, "; parameter gradients not recorded");
        return;
    }
    int p = a->gradients.param_order[0];
    const rd_fit *f = &a->gradients.fit_grad[p];
    if (!isfinite(m->grad_last_over_first[p])) {
        cat(b, n, "; the %s gradients were zero or not recorded", a->load.param_names[p]);
        return;
    }
    cat(b, n, "; the last layer's %s gradient is %.3g times the first layer's at step %lld",
        a->load.param_names[p], m->grad_last_over_first[p],
        (long long)a->load.steps[m->grad_step]);
    if (f->ok)
        cat(b, n, " (||g_k|| ~ k^%.2f, 95%% [%.2f, %.2f])", f->b, f->b_lo, f->b_hi);
}

static void lr_words(const rd_measures *m, char *b, size_t n)
{
    if (m->lr_state == RD_LR_WARMUP)
        cat(b, n, "lr warm-up of %lld steps (%.3g at step %lld) to the peak %.3g at step %lld",
            (long long)m->warmup_steps, m->lr_first, (long long)m->lr_first_step, m->lr_peak,
            (long long)m->lr_peak_step);
    else
        cat(b, n, "lr without warm-up (%.3g at step %lld, peak %.3g at step %lld)", m->lr_first,
            (long long)m->lr_first_step, m->lr_peak, (long long)m->lr_peak_step);
}

static const char *lr_missing(int state)
{
    return state == RD_LR_NOT_RECORDED ? "the run gives no `lr` metric"
                                       : "the `lr` metric is given at fewer than two steps";
}

static void warmup_entry(rd_analysis *a, rd_cq_id id, const char *placement)
{
    const rd_measures *m = &a->measures;
    if (m->lr_state == RD_LR_NO_WARMUP) {
        rd_consequence *c = add(a, id, 1);
        snprintf(c->measured, sizeof c->measured, "%s, %d layers; ", placement, a->load.n_layers);
        lr_words(m, c->measured, sizeof c->measured);
        grad_words(a, c->measured, sizeof c->measured);
    } else if (m->lr_state != RD_LR_WARMUP) {
        rd_consequence *c = add(a, id, 0);
        snprintf(c->missing, sizeof c->missing, "%s", lr_missing(m->lr_state));
    }
}

static void post_entries(rd_analysis *a)
{
    const rd_measures *m = &a->measures;
    int S = a->load.n_sublayers;
    warmup_entry(a, RD_CQ_POST_NO_WARMUP, "post-norm");
    if (a->load.n_layers >= 12 && m->lr_state == RD_LR_WARMUP) {
        rd_consequence *c = add(a, RD_CQ_POST_DEEP_WARMUP, 1);
        snprintf(c->measured, sizeof c->measured, "post-norm, %d layers; ", a->load.n_layers);
        lr_words(m, c->measured, sizeof c->measured);
        grad_words(a, c->measured, sizeof c->measured);
    }
    int small = 0;
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++)
        small |= m->init_class[s] == RD_INIT_SMALL || m->init_class[s] == RD_INIT_ZERO;
    if (small) {
        rd_consequence *c = add(a, RD_CQ_POST_SMALL_INIT, 1);
        snprintf(c->measured, sizeof c->measured,
                 "post-norm; branch scale at step %lld (median r over layers):",
                 (long long)a->load.steps[m->init_step]);
        for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++)
            cat(c->measured, sizeof c->measured, "%s %s %.3g%s", s ? "," : "",
                a->load.sublayer_names[s], m->init_r[s],
                m->init_class[s] == RD_INIT_ZERO    ? " (zero-initialised)"
                : m->init_class[s] == RD_INIT_SMALL ? " (SmallInit-like)"
                                                    : "");
    }
}

static void pre_entries(rd_analysis *a)
{
    const rd_measures *m = &a->measures;
    if (a->load.n_layers >= 24) {
        if (isfinite(m->share_last_over_first)) {
            rd_consequence *c = add(a, RD_CQ_PRE_DEEP, 1);
            snprintf(c->measured, sizeof c->measured,
                     "pre-norm, %d layers; at step %lld the last block moves the final state "
                     "by %.3g of the first block's share (1/sqrt(L) = %.3g)",
                     a->load.n_layers, (long long)a->load.step, m->share_last_over_first,
                     m->inv_sqrt_l);
            if (m->share_fit.ok) /* the source's law, O(1/sqrt(N)), is a slope of -1/2 */
                cat(c->measured, sizeof c->measured,
                    ", share ~ k^%.2f (95%% [%.2f, %.2f]: the source's -1/2 %s it)",
                    m->share_fit.b, m->share_fit.b_lo, m->share_fit.b_hi,
                    m->share_fit.b_lo <= -0.5 && -0.5 <= m->share_fit.b_hi ? "within"
                                                                            : "outside");
            cat(c->measured, sizeof c->measured, "; the stream norm grew x%.3g over depth",
                m->growth);
        } else {
            rd_consequence *c = add(a, RD_CQ_PRE_DEEP, 0);
            snprintf(c->missing, sizeof c->missing,
                     "the relative updates or the stream's norms were not recorded at the "
                     "analysed step");
        }
    }
    warmup_entry(a, RD_CQ_PRE_NO_WARMUP, "pre-norm");
}

void rd_analysis_consequences(rd_analysis *a)
{
    a->consequences.n = 0;
    if (a->consequences.off)
        return;
    if (is_post(a->verdict.v))
        post_entries(a);
    else if (is_pre(a->verdict.v))
        pre_entries(a);
}
