/*
 * check.c - resdiag_analysis_check(): whether an analysis bears out an
 * expected placement (or the declared one), with the final norm and the
 * growth limit when asked; holds, fails or cannot tell, with one line
 * saying why.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "analysis/analysis.h"
#include "format/format.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/sized_struct.h"

void resdiag_check_options_init(resdiag_check_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

static resdiag_check_result say(char *why, size_t len, resdiag_check_result r, const char *fmt,
                                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static resdiag_check_result say(char *why, size_t len, resdiag_check_result r, const char *fmt,
                                ...)
{
    if (why && len) {
        /* the line may quote the run's names (a->why): one line, escaped */
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        rd_text_escape(why, len, line);
    }
    return r;
}

/* The verdict of a against the expected placement c->expect. */
static resdiag_check_result judge(const resdiag_analysis *a, const resdiag_check_options *c,
                                  int from_declared, char *why, size_t len)
{
    char want_buf[48];
    snprintf(want_buf, sizeof want_buf, "%s%s", resdiag_placement_name(c->expect),
             from_declared ? " (as declared)" : "");
    const char *want = want_buf;
    resdiag_verdict v = a->verdict.v, e = (resdiag_verdict)c->expect;
    const char *conf = resdiag_confidence_name(a->verdict.conf);
    /* Below medium the report's own legend says "cannot tell": a gate must
     * not pass or fail on it, whatever it expects. */
    if (v != RESDIAG_VERDICT_CANNOT_TELL && a->verdict.conf < RESDIAG_CONFIDENCE_MEDIUM)
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL,
                   "cannot tell: the data say %s with "
                   "confidence %s (%s); check decides from medium up",
                   resdiag_verdict_name(v), conf,
                   a->verdict.conf_why[0] ? a->verdict.conf_why : a->verdict.why);
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL:
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell%s: %s",
                   a->observe.stream_only ? " with stream-only evidence" : "", a->verdict.why);
    case RESDIAG_VERDICT_POST_FAMILY:
        if (e == RESDIAG_VERDICT_POST || e == RESDIAG_VERDICT_DEEPNORM)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell post-norm from deepnorm "
                       "with stream-only evidence: every layer's stream is renormalized, but "
                       "what the norm reads was not observed");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: every layer's stream is renormalized "
                   "(post-norm or deepnorm), from stream-only evidence", want);
    case RESDIAG_VERDICT_NOT_RENORMALIZED:
        if (e == RESDIAG_VERDICT_PRE || e == RESDIAG_VERDICT_SANDWICH ||
            e == RESDIAG_VERDICT_PARALLEL || e == RESDIAG_VERDICT_NONE)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell with stream-only "
                       "evidence: the stream is not renormalized in any layer (pre-norm, "
                       "sandwich, parallel or no norm)");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: no layer renormalizes the stream "
                   "(stream-only evidence)", want);
    case RESDIAG_VERDICT_PRE_OR_SANDWICH:
        if (e == RESDIAG_VERDICT_PRE || e == RESDIAG_VERDICT_SANDWICH)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell pre-norm from sandwich: "
                       "the relations are pre-type and branch_out looks like a norm output, "
                       "but no norm on the branch's output was recorded (out_norm_in, "
                       "out_norm_out would decide)");
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: observed pre-norm or sandwich "
                   "(confidence %s)", want, conf);
    case RESDIAG_VERDICT_ZERO_BRANCHES:
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell at this step: every "
                   "branch adds exactly 0 (zero-initialised); judge a later step (--last)");
    case RESDIAG_VERDICT_INCONSISTENT:
        if (a->verdict.conf < RESDIAG_CONFIDENCE_MEDIUM)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL,
                       "cannot tell: the relations fit no "
                       "placement, but only by a little (confidence %s: %s)",
                       conf, a->verdict.conf_why[0] ? a->verdict.conf_why : a->verdict.why);
        return say(why, len, RESDIAG_CHECK_FAILS,
                   "not %s: the relations between the sites fit "
                   "no placement (%s)",
                   want, a->verdict.why);
    default:
        break;
    }
    if (v != e) {
        if (v == RESDIAG_VERDICT_PRE && e == RESDIAG_VERDICT_SANDWICH && !rd_out_norm_recorded(a))
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot tell pre-norm from sandwich: "
                       "the relations are pre-type, and a sandwich's second norm would be at "
                       "out_norm_in/out_norm_out, which were not recorded");
        if (v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers > 0)
            return say(why, len, RESDIAG_CHECK_FAILS,
                       "not %s: observed mixed, post-norm in "
                       "layers 0..%d and pre-norm after (confidence %s)",
                       want, a->verdict.mix_layers - 1, conf);
        if (v == RESDIAG_VERDICT_PER_SUBLAYER)
            return say(why, len, RESDIAG_CHECK_FAILS,
                       "not %s: observed a per-sublayer scheme, "
                       "%s (confidence %s)",
                       want, a->verdict.pattern, conf);
        return say(why, len, RESDIAG_CHECK_FAILS, "not %s: observed %s (confidence %s)", want,
                   resdiag_verdict_name(v), conf);
    }
    if (c->require_final_norm && a->final_norm.reads_norm == 0)
        return say(why, len, RESDIAG_CHECK_FAILS, "%s holds, but there is no final norm", want);
    if (c->require_final_norm && a->final_norm.reads_norm < 0)
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "%s holds, but whether there is a final "
                   "norm cannot be told (final-norm sites not observed)", want);
    if (c->max_growth > 0) {
        if (isnan(a->depth.growth))
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "%s holds, but the stream growth "
                       "cannot be measured", want);
        if (a->depth.growth > c->max_growth)
            return say(why, len, RESDIAG_CHECK_FAILS,
                       "%s holds, but the stream grows %.3gx over "
                       "depth (more than %g)",
                       want, a->depth.growth, c->max_growth);
    }
    if (v == RESDIAG_VERDICT_PER_SUBLAYER)
        return say(why, len, RESDIAG_CHECK_HOLDS,
                   "holds: per-sublayer scheme, %s (confidence %s)", a->verdict.pattern, conf);
    if (v == RESDIAG_VERDICT_DEEPNORM)
        return say(why, len, RESDIAG_CHECK_HOLDS, "holds: deepnorm, alpha = %.4g (confidence %s)",
                   a->verdict.alpha, conf);
    if (v == RESDIAG_VERDICT_MIXED && a->verdict.mix_layers > 0)
        return say(why, len, RESDIAG_CHECK_HOLDS,
                   "holds: mixed, post-norm in layers 0..%d, "
                   "pre-norm after (confidence %s%s)",
                   a->verdict.mix_layers - 1, conf,
                   a->observe.stream_only ? ", stream-only evidence" : "");
    return say(why, len, RESDIAG_CHECK_HOLDS, "holds: %s%s (confidence %s)",
               resdiag_verdict_name(v), from_declared ? ", as declared" : "", conf);
}

resdiag_check_result resdiag_analysis_check(const resdiag_analysis *a,
                                            const resdiag_check_options *c, char *why,
                                            size_t len)
{
    static const char fn[] = "resdiag_analysis_check";
    if (why && len)
        why[0] = 0;
    /* A caller built against an older header passes a smaller struct: the
     * fields it does not have keep their defaults, and nothing past its
     * struct_size is read. expect has no default, so it must be there. */
    resdiag_check_options o;
    resdiag_check_options_init(&o);
    const size_t min_size = offsetof(resdiag_check_options, expect) + sizeof o.expect;
    if (c && rd_copy_sized(&o, sizeof o, c, c->struct_size, min_size)) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
               "(call resdiag_check_options_init)", fn, c->struct_size);
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "client bug: %s: options.struct_size "
                   "%zu (call resdiag_check_options_init)", fn, c->struct_size);
    }
    int from_declared = o.expect == RESDIAG_EXPECT_DECLARED;
    if (!a || !c ||
        (!from_declared && (o.expect == RESDIAG_PLACEMENT_UNDECLARED ||
                            !RD_PLACEMENT_DECLARABLE(o.expect))))
        return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "client bug: no analysis or no valid "
                   "expected placement");
    if (from_declared) {
        if (a->load.declared == RESDIAG_PLACEMENT_UNDECLARED)
            return say(why, len, RESDIAG_CHECK_CANNOT_TELL, "cannot check the declared "
                       "placement: the run declares none (resdiag_model.declared_placement)");
        o.expect = a->load.declared;
        /* The report's contradiction and this check's failure are one test. */
        if (a->load.declared == RESDIAG_PLACEMENT_MIXED &&
            a->verdict.v == RESDIAG_VERDICT_MIXED && rd_declared_agrees(a) == 0)
            return say(why, len, RESDIAG_CHECK_FAILS,
                       "the data contradict the declared "
                       "placement: declared mixed with %d post-norm layers, observed mixed "
                       "with %d (confidence %s)",
                       a->load.declared_mix, a->verdict.mix_layers,
                       resdiag_confidence_name(a->verdict.conf));
    }
    return judge(a, &o, from_declared, why, len);
}
