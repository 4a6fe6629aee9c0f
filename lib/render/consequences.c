/*
 * consequences.c - the Consequences part of the report (consequences.h):
 * the measurements of lib/analysis/measures.c and the findings of
 * lib/analysis/consequences.c, as text, JSON, an HTML card and the diff's
 * side by side. The sources' words are lib/analysis/sources.c's, printed
 * as they are; names from the run file are escaped here.
 */
#include "render/consequences.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/shared.h"
#include "render/svg.h"

#define E(s) rd_esc_text(esc, (s))

static const char *init_class_name(int c)
{
    return c == RD_INIT_ZERO      ? "zero"
           : c == RD_INIT_SMALL   ? "small"
           : c == RD_INIT_DEFAULT ? "default"
                                  : "unknown";
}

static const char *lr_state_name(int s)
{
    static const char *const n[] = { "not_recorded", "too_few", "warmup", "no_warmup" };
    return s >= 0 && s < 4 ? n[s] : "?";
}

/* The lr schedule in a few words. */
static void lr_text(rd_strbuf *b, const rd_measures *m)
{
    if (m->lr_state == RD_LR_NOT_RECORDED)
        rd_strbuf_printf(b, "not recorded (no `lr` metric)");
    else if (m->lr_state == RD_LR_TOO_FEW)
        rd_strbuf_printf(b, "given at fewer than two steps");
    else if (m->lr_state == RD_LR_WARMUP)
        rd_strbuf_printf(b, "warm-up of %lld steps to the peak %.3g (step %lld)",
                         (long long)m->warmup_steps, m->lr_peak, (long long)m->lr_peak_step);
    else
        rd_strbuf_printf(b, "no warm-up (%.3g at step %lld; peak %.3g at step %lld)", m->lr_first,
                         (long long)m->lr_first_step, m->lr_peak, (long long)m->lr_peak_step);
}

static void measured_text(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *a)
{
    const rd_measures *m = &a->measures;
    int S = a->load.n_sublayers;
    rd_strbuf_printf(b, "  gradient over depth ||g_k|| ~ k^b:");
    if (m->grad_step < 0 || a->gradients.n_order <= 0)
        rd_strbuf_printf(b, " not recorded");
    for (int i = 0; m->grad_step >= 0 && i < a->gradients.n_order; i++) {
        int p = a->gradients.param_order[i];
        const rd_fit *f = &a->gradients.fit_grad[p];
        rd_strbuf_printf(b, "%s %s ", i ? "," : "", E(a->load.param_names[p]));
        if (f->ok)
            rd_strbuf_printf(b, "b = %.2f [%.2f, %.2f]", f->b, f->b_lo, f->b_hi);
        else
            rd_strbuf_printf(b, "b = -");
        if (isfinite(m->grad_last_over_first[p]))
            rd_strbuf_printf(b, " (last/first %.3g)", m->grad_last_over_first[p]);
        else
            rd_strbuf_printf(b, " (zero or not recorded at a layer)");
    }
    if (m->grad_step >= 0 && isfinite(a->gradients.head_grad))
        rd_strbuf_printf(b, "; head %.4g", a->gradients.head_grad);
    rd_strbuf_printf(b, "; 1/sqrt(L) = %.3g", m->inv_sqrt_l);
    if (isfinite(m->share_last_over_first))
        rd_strbuf_printf(b, "\n  effective depth: last/first block share %.3g",
                         m->share_last_over_first);
    else
        rd_strbuf_printf(b, "\n  effective depth: not recorded (no update ratios or norms)");
    if (m->share_fit.ok)
        rd_strbuf_printf(b, ", share ~ k^%.2f [%.2f, %.2f]", m->share_fit.b, m->share_fit.b_lo,
                         m->share_fit.b_hi);
    if (isfinite(m->growth))
        rd_strbuf_printf(b, "; stream norm x%.3g over depth", m->growth);
    rd_strbuf_printf(
        b, "\n  branch scale at step %lld (median r):", (long long)a->load.steps[m->init_step]);
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        if (!isfinite(m->init_r[s])) {
            rd_strbuf_printf(b, "%s %s not recorded", s ? "," : "", E(a->load.sublayer_names[s]));
            continue;
        }
        rd_strbuf_printf(b, "%s %s %.3g %s", s ? "," : "", E(a->load.sublayer_names[s]),
                         m->init_r[s], init_class_name(m->init_class[s]));
    }
    rd_strbuf_printf(b, "\n  lr: ");
    lr_text(b, m);
    rd_strbuf_printf(b, "\n");
}

void rd_consequences_text(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *a)
{
    const rd_consequences *c = &a->consequences;
    if (c->off)
        return;
    rd_strbuf_printf(b, "\nConsequences (what the sources found where their condition is "
                        "measured here; not advice beyond it):\n");
    measured_text(b, esc, a);
    int met = 0;
    for (int i = 0; i < c->n; i++) {
        const rd_consequence *e = &c->e[i];
        const rd_source *s = rd_source_of(e->id);
        if (!e->met) {
            rd_strbuf_printf(b, "  * %s (%s): not measured, %s\n", s->id, s->title, e->missing);
            continue;
        }
        met++;
        rd_strbuf_printf(b,
                         "  * %s (%s)\n    measured: %s\n    %s: %s\n    setting: %s\n"
                         "    limits: %s\n",
                         s->id, s->title, E(e->measured), s->source, s->claim, s->setting,
                         s->limits);
    }
    if (!met)
        rd_strbuf_printf(b,
                         "  none of the sources' conditions is met (placement %s, %d layers)\n",
                         rd_verdict_human(a->verdict.v), a->load.n_layers);
}

static void js_num(rd_strbuf *b, double v)
{
    if (isfinite(v))
        rd_strbuf_printf(b, "%.9g", v);
    else
        rd_strbuf_printf(b, "null");
}

static void js_key_num(rd_strbuf *b, const char *k, double v)
{
    rd_strbuf_printf(b, ", \"%s\": ", k);
    js_num(b, v);
}

static void js_step(rd_strbuf *b, const char *k, int64_t s, int have)
{
    if (have)
        rd_strbuf_printf(b, ", \"%s\": %lld", k, (long long)s);
    else
        rd_strbuf_printf(b, ", \"%s\": null", k);
}

static void measured_json(rd_strbuf *b, const rd_analysis *a)
{
    const rd_measures *m = &a->measures;
    int L = a->load.n_layers, S = a->load.n_sublayers;
    int g = m->grad_step >= 0;
    rd_strbuf_printf(b, ",\n  \"measurements\": {\"gradient_step\": ");
    if (g)
        rd_strbuf_printf(b, "%lld", (long long)a->load.steps[m->grad_step]);
    else
        rd_strbuf_printf(b, "null");
    rd_strbuf_printf(b, ", \"gradient_exponent\": [");
    for (int i = 0; g && i < a->gradients.n_order; i++) {
        int p = a->gradients.param_order[i];
        const rd_fit *f = &a->gradients.fit_grad[p];
        rd_strbuf_printf(b, "%s\n    {\"param\": ", i ? "," : "");
        rd_strbuf_put_json(b, a->load.param_names[p]);
        js_key_num(b, "exponent", f->ok ? f->b : NAN);
        js_key_num(b, "exponent_lo", f->ok ? f->b_lo : NAN);
        js_key_num(b, "exponent_hi", f->ok ? f->b_hi : NAN);
        rd_strbuf_printf(b, ", \"n\": %d", f->n);
        js_key_num(b, "last_over_first", m->grad_last_over_first[p]);
        rd_strbuf_printf(b, "}");
    }
    rd_strbuf_printf(b, "]");
    js_key_num(b, "head_gradient", g ? a->gradients.head_grad : NAN);
    js_key_num(b, "inv_sqrt_layers", m->inv_sqrt_l);
    rd_strbuf_printf(b, ",\n    \"effective_depth\": {\"share\": [");
    for (int l = 0; l < L; l++) {
        rd_strbuf_printf(b, "%s", l ? ", " : "");
        js_num(b, m->share ? m->share[l] : NAN);
    }
    rd_strbuf_printf(b, "]");
    js_key_num(b, "exponent", m->share_fit.ok ? m->share_fit.b : NAN);
    js_key_num(b, "exponent_lo", m->share_fit.ok ? m->share_fit.b_lo : NAN);
    js_key_num(b, "exponent_hi", m->share_fit.ok ? m->share_fit.b_hi : NAN);
    js_key_num(b, "last_over_first", m->share_last_over_first);
    js_key_num(b, "stream_growth", m->growth);
    rd_strbuf_printf(b, "},\n    \"init_scale\": {\"step\": %lld, \"sublayers\": [",
                     (long long)a->load.steps[m->init_step]);
    for (int s = 0; s < S && s < RESDIAG_MAX_SUBLAYERS; s++) {
        rd_strbuf_printf(b, "%s{\"name\": ", s ? ", " : "");
        rd_strbuf_put_json(b, a->load.sublayer_names[s]);
        js_key_num(b, "r", m->init_r[s]);
        rd_strbuf_printf(b, ", \"class\": \"%s\"}", init_class_name(m->init_class[s]));
    }
    int have = m->lr_state >= RD_LR_WARMUP;
    rd_strbuf_printf(b, "]},\n    \"lr\": {\"state\": \"%s\"", lr_state_name(m->lr_state));
    js_key_num(b, "first", m->lr_first);
    js_step(b, "first_step", m->lr_first_step, have);
    js_key_num(b, "peak", m->lr_peak);
    js_step(b, "peak_step", m->lr_peak_step, have);
    js_step(b, "warmup_steps", m->warmup_steps,
            m->lr_state == RD_LR_WARMUP && m->warmup_steps >= 0);
    rd_strbuf_printf(b, "}}");
}

void rd_consequences_json(rd_strbuf *b, const rd_analysis *a)
{
    const rd_consequences *c = &a->consequences;
    if (a->measures.share || !c->off)
        measured_json(b, a);
    else
        rd_strbuf_printf(b, ",\n  \"measurements\": null");
    if (c->off) {
        rd_strbuf_printf(b, ",\n  \"consequences\": null");
        return;
    }
    rd_strbuf_printf(b, ",\n  \"consequences\": [");
    for (int i = 0; i < c->n; i++) {
        const rd_consequence *e = &c->e[i];
        const rd_source *s = rd_source_of(e->id);
        rd_strbuf_printf(b, "%s\n    {\"id\": \"%s\", \"title\": ", i ? "," : "", s->id);
        rd_strbuf_put_json(b, s->title);
        rd_strbuf_printf(b, ", \"condition_met\": %s, \"measured\": ", e->met ? "true" : "null");
        if (e->met)
            rd_strbuf_put_json(b, e->measured);
        else
            rd_strbuf_printf(b, "null");
        rd_strbuf_printf(b, ", \"missing\": ");
        if (e->met)
            rd_strbuf_printf(b, "null");
        else
            rd_strbuf_put_json(b, e->missing);
        rd_strbuf_printf(b, ", \"source\": ");
        rd_strbuf_put_json(b, s->source);
        rd_strbuf_printf(b, ", \"claim\": ");
        rd_strbuf_put_json(b, s->claim);
        rd_strbuf_printf(b, ", \"setting\": ");
        rd_strbuf_put_json(b, s->setting);
        rd_strbuf_printf(b, ", \"limits\": ");
        rd_strbuf_put_json(b, s->limits);
        rd_strbuf_printf(b, "}");
    }
    rd_strbuf_printf(b, "]");
}

void rd_consequences_html(rd_strbuf *b, const rd_analysis *a)
{
    if (a->consequences.off)
        return;
    rd_strbuf s = { 0 };
    rd_esc_ring ring = { 0 };
    rd_consequences_text(&s, &ring, a);
    char *text = rd_strbuf_finish(&s);
    rd_esc_ring_free(&ring);
    svg_printf(b, "<section class=\"card\" id=\"consequences\">\n<h2>Consequences</h2>\n<pre>");
    /* the text's first line is blank, its second the heading above */
    const char *body = text ? strchr(text + 1, '\n') : NULL;
    svg_escape(b, body ? body + 1 : "");
    svg_printf(b, "</pre>\n</section>\n");
    free(text);
}

/* One row of the diff's side by side; "differs" where the sources'
 * categories differ, or intervals do not overlap, not where digits do. */
static void row(rd_strbuf *b, const char *what, const char *x, const char *y, int differs)
{
    rd_strbuf_printf(b, "  %-26s %-30s %s%s\n", what, x, y, differs ? "  <- differs" : "");
}

/* Two fits' 95% intervals are apart (both fitted). */
static int apart(const rd_fit *f, const rd_fit *g)
{
    return f->ok && g->ok && (f->b_hi < g->b_lo || g->b_hi < f->b_lo);
}

static const rd_fit *first_grad_fit(const rd_analysis *a)
{
    if (a->measures.grad_step < 0 || a->gradients.n_order <= 0)
        return NULL;
    return &a->gradients.fit_grad[a->gradients.param_order[0]];
}

static int init_classes_differ(const rd_analysis *x, const rd_analysis *y)
{
    if (x->load.n_sublayers != y->load.n_sublayers)
        return 1;
    for (int s = 0; s < x->load.n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++)
        if (x->measures.init_class[s] != y->measures.init_class[s])
            return 1;
    return 0;
}

static void lr_short(char *o, size_t n, const rd_measures *m)
{
    if (m->lr_state == RD_LR_WARMUP)
        snprintf(o, n, "yes, %lld steps", (long long)m->warmup_steps);
    else if (m->lr_state == RD_LR_NO_WARMUP)
        snprintf(o, n, "no");
    else
        snprintf(o, n, "lr not recorded");
}

static void init_short(char *o, size_t n, const rd_analysis *a)
{
    o[0] = 0;
    for (int s = 0; s < a->load.n_sublayers && s < RESDIAG_MAX_SUBLAYERS; s++) {
        size_t len = strlen(o);
        snprintf(o + len, n - len, "%s%.2g %s", s ? ", " : "", a->measures.init_r[s],
                 init_class_name(a->measures.init_class[s]));
    }
}

static void grad_short(char *o, size_t n, const rd_analysis *a)
{
    const rd_fit *f = first_grad_fit(a);
    if (!f || !f->ok) {
        snprintf(o, n, "-");
        return;
    }
    snprintf(o, n, "%.2f [%.2f, %.2f]", f->b, f->b_lo, f->b_hi);
}

static void ids(rd_strbuf *b, const char *who, const rd_analysis *a)
{
    rd_strbuf_printf(b, "  %s:", who);
    int any = 0;
    for (int i = 0; i < a->consequences.n; i++)
        if (a->consequences.e[i].met) {
            rd_strbuf_printf(b, "%s %s", any ? "," : "",
                             rd_source_of(a->consequences.e[i].id)->id);
            any = 1;
        }
    rd_strbuf_printf(b, "%s\n", any ? "" : " none");
}

void rd_consequences_diff(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *x,
                          const rd_analysis *y)
{
    if (x->consequences.off || y->consequences.off)
        return;
    char u[2][160];
    const rd_analysis *r[2] = { x, y };
    rd_strbuf_printf(b, "\nWhat the sources say matters (A | B):\n");
    row(b, "placement", rd_verdict_human(x->verdict.v), rd_verdict_human(y->verdict.v),
        x->verdict.v != y->verdict.v);
    for (int k = 0; k < 2; k++)
        lr_short(u[k], sizeof u[k], &r[k]->measures);
    row(b, "warm-up", u[0], u[1], x->measures.lr_state != y->measures.lr_state);
    for (int k = 0; k < 2; k++)
        snprintf(u[k], sizeof u[k], "%d", r[k]->load.n_layers);
    row(b, "depth (layers)", u[0], u[1], x->load.n_layers != y->load.n_layers);
    for (int k = 0; k < 2; k++)
        init_short(u[k], sizeof u[k], r[k]);
    row(b, "branch scale at init (r)", E(u[0]), E(u[1]), init_classes_differ(x, y));
    for (int k = 0; k < 2; k++)
        grad_short(u[k], sizeof u[k], r[k]);
    const rd_fit *gx = first_grad_fit(x), *gy = first_grad_fit(y);
    row(b, "gradient exponent b", u[0], u[1], gx && gy && apart(gx, gy));
    for (int k = 0; k < 2; k++)
        snprintf(u[k], sizeof u[k], "%.3g (k^%.2f)", r[k]->measures.share_last_over_first,
                 r[k]->measures.share_fit.b);
    row(b, "last/first block share", u[0], u[1],
        apart(&x->measures.share_fit, &y->measures.share_fit));
    rd_strbuf_printf(b, "Consequences met (resdiag report gives each with its source):\n");
    ids(b, "A", x);
    ids(b, "B", y);
}
