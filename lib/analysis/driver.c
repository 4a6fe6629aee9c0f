/*
 * driver.c - resdiag_analyze(): the analysis of one recorded step as a
 * list of phases, each in the file of its job (phases.h), and the
 * analysis's life (options, free). Shared by every front end (resdiag
 * report/check, JSON, HTML, bindings); lib/render/ renders the result.
 *
 * Evidence (doc/ARCHITECTURE.md, "Evidence for the placement verdict"):
 *  1. relations between the sketches of the sites of a sublayer (sketches
 *     are linear, so sk(x + f) = sk(x) + sk(f) up to rounding);
 *  2. the normalization signature of a tensor (per-token norm spread);
 *  3. the depth law of the stream; 4. the order of the hook calls.
 * The declared placement is never used to decide, only compared afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/phases.h"
#include "common/log.h"
#include "common/sized_struct.h"

void resdiag_analyze_options_init(resdiag_analyze_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->step_index = RESDIAG_STEP_FIRST;
    o->max_growth = 10;
}

void resdiag_analysis_destroy(resdiag_analysis *a)
{
    if (!a)
        return;
    rd_load *r = &a->load;
    free(r->steps);
    for (int s = 0; r->sublayer_names && s < r->n_sublayers; s++)
        free(r->sublayer_names[s]);
    free(r->sublayer_names);
    for (int p = 0; r->param_names && p < r->n_layer_params; p++)
        free(r->param_names[p]);
    free(r->param_names);
    free(r->description);
    free(r->writer_version);
    free(r->created);
    free(r->program);
    free(r->head_param_name);
    free(r->residual_param_name);
    free(a->aborted.flags);
    free(a->observe.block_st);
    free(a->observe.block_obs);
    free(a->placement.sub);
    free(a->placement.layer_v);
    free(a->placement.r);
    free(a->placement.r_first);
    free(a->placement.r_last);
    free(a->depth.xnorm);
    free(a->depth.xrms);
    free(a->depth.xenergy);
    free(a->depth.layer_sig);
    free(a->depth.layer_cv);
    free(a->depth.massive);
    free(a->verdict.cs_norm_in);
    free(a->verdict.cs_branch_out);
    free(a->verdict.cs_stream_out);
    free(a->verdict.cs_norm_in2);
    free(a->gradients.grad);
    free(a->gradients.sgrad);
    for (int m = 0; a->metrics.names && m < a->metrics.count; m++)
        free(a->metrics.names[m]);
    free(a->metrics.names);
    free(a->metrics.values);
    free(a->over_run.dominant);
    free(a->over_run.negligible);
    free(a->over_run.massive);
    free(a->measures.share);
    resdiag_analysis_destroy(a->at_last);
    rd_ranks_free(a->ranks);
    free(a);
}

/* The recorded step that o asks for, or -1 when there is none such: the
 * first or last complete one (aborted: the flags), or the index given. */
static int64_t step_index(const resdiag_run_info *in, const resdiag_analyze_options *o,
                          const unsigned char *aborted)
{
    int64_t si = o->step_index == RESDIAG_STEP_FIRST  ? rd_complete_step(aborted, in->n_steps, 0)
                 : o->step_index == RESDIAG_STEP_LAST ? rd_complete_step(aborted, in->n_steps, 1)
                                                      : o->step_index;
    return si >= 0 && si < in->n_steps ? si : -1;
}

/* The phases, in order: each reads what the ones before it left in a.
 * whole_run 0: only what one step says (the verdict of the last step that
 * the report shows beside the judged one); the phases over the whole run
 * (the first and last step's growth, the non-finite scan) are the outer
 * analysis's, and a second pass over every step would only repeat them. */
static resdiag_status run_phases(const resdiag_reader *rd, rd_analysis *a, int whole_run)
{
    resdiag_status st;
    if ((st = rd_analysis_observe(rd, a)) ||
        (st = rd_analysis_sublayers(rd, a)) ||
        (st = rd_analysis_depth(rd, a)))
        return st;
    /* the final norm first: the verdict asks whether it reads the last
     * sublayer's output (a post-norm model's last norm) */
    if ((st = rd_analysis_final_norm(rd, a)))
        return st;
    rd_analysis_decide(rd, a);
    if ((st = rd_analysis_gradients(rd, a)))
        return st;
    rd_analysis_param_order(rd, a);
    if (whole_run && ((st = rd_analysis_training(rd, a)) ||
                      (st = rd_analysis_nonfinite(rd, a)) ||
                      (st = rd_analysis_metrics(rd, a)) ||
                      (st = rd_analysis_ranks(rd, a)) ||
                      (st = rd_analysis_over_run(rd, a)) ||
                      (st = rd_analysis_measures(rd, a))))
        return st;
    rd_analysis_abort_verdict(a);
    if (whole_run)
        rd_analysis_consequences(a);
    rd_analysis_warnings(a);
    return RESDIAG_OK;
}

static resdiag_status analyze(const resdiag_reader *rd, const resdiag_analyze_options *opt,
                              resdiag_analysis **out, int whole_run);

/* What training made of the run: the last complete step, analysed the same way
 * into a->at_last. Its failure does not fail a's (at_last_status says
 * why), unless the file is damaged or unreadable there: a bad file fails
 * the analysis, the reader's line (the dataset, the step, what is wrong)
 * the first one logged, as when that step is the judged one. */
static resdiag_status analyze_last(const resdiag_reader *rd, const resdiag_analyze_options *o,
                                   rd_analysis *a)
{
    resdiag_analyze_options lo = *o;
    lo.step_index = a->aborted.last_index;
    resdiag_status st = analyze(rd, &lo, &a->at_last, 0);
    a->at_last_status = st;
    return st == RESDIAG_E_FORMAT || st == RESDIAG_E_IO || st == RESDIAG_E_NOMEM ? st
                                                                                 : RESDIAG_OK;
}

static resdiag_status analyze(const resdiag_reader *rd, const resdiag_analyze_options *opt,
                              resdiag_analysis **out, int whole_run)
{
    static const char fn[] = "resdiag_analyze";
    if (out)
        *out = NULL;
    if (!rd || !out) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: NULL argument", fn);
        return RESDIAG_E_NULL;
    }
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    if (opt && rd_copy_sized(&o, sizeof o, opt, opt->struct_size, sizeof(size_t))) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
               "(call resdiag_analyze_options_init)", fn, opt->struct_size);
        return RESDIAG_E_INVALID;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    if (in->n_steps <= 0) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "the run holds no recorded steps (the trainer "
               "stopped before its first step ended, or is still in it)");
        return RESDIAG_E_NOT_FOUND;
    }
    unsigned char *aborted = NULL;
    resdiag_status st = rd_aborted_flags(rd, in->n_steps, &aborted);
    if (st) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: cannot read which steps were aborted: %s",
               fn, resdiag_strerror(st));
        return st;
    }
    int64_t si = step_index(in, &o, aborted);
    if (si < 0) {
        free(aborted);
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: step index %lld is not among the %lld "
               "recorded steps", fn, (long long)o.step_index, (long long)in->n_steps);
        return RESDIAG_E_NOT_FOUND;
    }

    rd_analysis *a = NULL;
    st = rd_analysis_load(rd, &o, si, &a);
    if (st)
        free(aborted);
    else
        st = rd_analysis_aborted(rd, a, aborted);
    if (!st) /* the last step's analysis (whole_run 0) decides none */
        a->consequences.off = o.no_consequences || !whole_run;
    if (!st && (st = run_phases(rd, a, whole_run))) {
        resdiag_analysis_destroy(a);
        a = NULL;
    }
    if (st) {
        resdiag_analysis_destroy(a);
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: cannot analyse the run: %s", fn,
               resdiag_strerror(st));
        return st;
    }
    if (whole_run && si != a->aborted.last_index &&
        (st = analyze_last(rd, &o, a)) != RESDIAG_OK) {
        resdiag_analysis_destroy(a);
        return st;
    }
    *out = a;
    return RESDIAG_OK;
}

resdiag_status resdiag_analyze(const resdiag_reader *rd, const resdiag_analyze_options *opt,
                               resdiag_analysis **out)
{
    return analyze(rd, opt, out, 1);
}

/* The name of 0.1.0, kept for callers written against it. */
void resdiag_analysis_free(resdiag_analysis *a)
{
    resdiag_analysis_destroy(a);
}
