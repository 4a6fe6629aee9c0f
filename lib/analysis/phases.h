/*
 * phases.h - the phases of resdiag_analyze() (lib/analysis/driver.c calls
 * them in order) and the helpers they share. Each phase fills its own
 * member of the analysis (a->load, a->placement, ...: analysis.h) and
 * reads the members of the phases before it. Internal to lib/analysis/:
 * the renderers read only the struct of analysis.h.
 *
 * Dimension names: L layers, S sublayers per block, K sketch size.
 */
#ifndef RESDIAG_ANALYSIS_PHASES_H
#define RESDIAG_ANALYSIS_PHASES_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/analysis.h"
#include "h5/reader.h"

/* Steps read at a time from the per-step summary (doc/FORMAT.md, /summary). */
#define RD_SUMMARY_BLOCK 16384

/* One site of a sublayer at the analysed step, as the relations need it. */
typedef struct rd_site_data {
    int obs;
    int alias;       /* the site whose very tensor this one was recorded from, or -1 */
    int nonfinite;   /* NaN or Inf elements: no relation evidence */
    double st[RESDIAG_N_FIELDS];
    double *sk; /* (K) */
} rd_site_data;

/* ------------------------------------------- the phases, in their order */

/* load.c: a new analysis of recorded step si with the run's identity,
 * names and steps copied in (*out NULL on failure). */
resdiag_status rd_analysis_load(const resdiag_reader *rd, const resdiag_analyze_options *o,
                                int64_t si, rd_analysis **out);
/* aborted.c: *flags (n) 1 for each aborted step, NULL when no step was
 * (or the file predates step status); what a step selection then takes:
 * the first (last = 0) or last complete step, or 0 / n - 1 when none is.
 * rd_analysis_aborted hands flags to a (freed with it) and reads the
 * reasons. */
resdiag_status rd_aborted_flags(const resdiag_reader *rd, int64_t n, unsigned char **flags);
int64_t rd_complete_step(const unsigned char *flags, int64_t n, int last);
resdiag_status rd_analysis_aborted(const resdiag_reader *rd, rd_analysis *a,
                                   unsigned char *flags);
/* observe.c: which sites were observed at the step, in either direction. */
resdiag_status rd_analysis_observe(const resdiag_reader *rd, rd_analysis *a);
/* placement.c: each sublayer's sites and where its norm sits; the layers'
 * verdicts and the hook-order tally; the relative updates at the step and
 * at the first and the last complete step. */
resdiag_status rd_analysis_sublayers(const resdiag_reader *rd, rd_analysis *a);
/* depth.c: the stream over depth (norms, energy, fits, growth, the
 * signature per layer) and the fits of the relative updates. */
resdiag_status rd_analysis_depth(const resdiag_reader *rd, rd_analysis *a);
/* verdict.c: the model's verdict from the layers, and the hooks (file:line)
 * that decided it. */
void rd_analysis_decide(const resdiag_reader *rd, rd_analysis *a);
/* final_norm.c: whether the head reads a norm's output. */
resdiag_status rd_analysis_final_norm(const resdiag_reader *rd, rd_analysis *a);
/* gradients.c: the gradients at the first recorded backward, and the
 * order the parameters are shown in (the residual-write matrix first). */
resdiag_status rd_analysis_gradients(const resdiag_reader *rd, rd_analysis *a);
void rd_analysis_param_order(const resdiag_reader *rd, rd_analysis *a);
/* training.c: growth, mean update and gradient ratio at the first and the
 * last complete step. */
resdiag_status rd_analysis_training(const resdiag_reader *rd, rd_analysis *a);
/* nonfinite.c: the first NaN / Inf over every recorded step, and totals. */
resdiag_status rd_analysis_nonfinite(const resdiag_reader *rd, rd_analysis *a);
/* metrics.c: the trainer's metrics (its loss, ...) at every recorded step. */
resdiag_status rd_analysis_metrics(const resdiag_reader *rd, rd_analysis *a);
/* ranks.c: for a merged job, each rank's own file alone (verdict, first
 * non-finite value, last step) and where the ranks disagree; nothing for
 * one file. */
resdiag_status rd_analysis_ranks(const resdiag_reader *rd, rd_analysis *a);
void rd_ranks_free(rd_ranks *k);
/* over_run.c: the conditions warned of, at every recorded complete step. */
resdiag_status rd_analysis_over_run(const resdiag_reader *rd, rd_analysis *a);
/* measures.c: the gradient exponent, the effective depth, the branches'
 * scale at the first step and the lr schedule (after metrics.c). */
resdiag_status rd_analysis_measures(const resdiag_reader *rd, rd_analysis *a);
/* consequences.c: the sources' findings that the measured run meets
 * (after the verdict is final). */
void rd_analysis_consequences(rd_analysis *a);
/* verdict.c: an aborted judged step's verdict made CANNOT_TELL, saying
 * why (after every phase that reads the step's own verdict). */
void rd_analysis_abort_verdict(rd_analysis *a);
/* warnings.c: what the report warns about, from everything above. */
void rd_analysis_warnings(rd_analysis *a);

/* ------------------------------------------------------- shared helpers */

/* load.c: which parameter plays a role (the run info's head_param or
 * residual_param), or NULL when the run declares none. */
enum { RD_ROLE_HEAD, RD_ROLE_RESIDUAL };
const char *rd_analysis_role_param(const resdiag_run_info *in, int which);
/* load.c: a malloc'ed copy of s ("" for NULL), NULL without memory. */
char *rd_analysis_dupstr(const char *s);
/* observe.c: one site's statistics at recorded step si, as
 * resdiag_reader_site gives them: observe.c's copy at the analysed step,
 * else read. */
resdiag_status rd_analysis_site(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                resdiag_direction dir, int l, int s, resdiag_site site, double *f,
                                int *obs);
/* load.c: one site's statistics, sketch (k > 0) and alias at step si. */
resdiag_status rd_analysis_load_site(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                     resdiag_direction dir, int l, int s, resdiag_site site,
                                     int k, rd_site_data *d);
/* load.c: the stream tensor x_kk, kk = 0..L (0 what enters layer 0, l+1
 * what leaves layer l). */
resdiag_status rd_analysis_stream_at(const resdiag_reader *rd, const rd_analysis *a, int64_t si,
                                     int kk, double *st, int *obs);
/* load.c: 1 if the run file has the dataset (asked quietly). */
int rd_analysis_has_dataset(const resdiag_reader *rd, const char *name);
/* load.c: 0 when none of the n tables stores anything at step si, with
 * *next the first step where one may; 1 when one may. */
int rd_analysis_step_stored(const resdiag_reader *rd, rd_stored_cursor *c, int n, int64_t si,
                            int64_t *next);

/* evidence.c: ||v|| of a sketch of length k. */
double rd_vnorm(const double *v, int k);
/* evidence.c: the token-norm spread above which a tensor of this width is
 * "not normalized", and a tensor's spread. */
double rd_unnorm_cv(int cols);
double rd_cv_of(const double *f);

/* verdict.c: the families of verdicts, and two verdicts of one family
 * combined (RESDIAG_VERDICT_INCONSISTENT when they are not). */
int rd_is_post_family(resdiag_verdict v);
int rd_is_pre_family(resdiag_verdict v);
resdiag_verdict rd_combine_verdicts(resdiag_verdict a, resdiag_verdict b);
/* verdict.c: layer l's verdict from its sublayers': theirs when they
 * agree, PER_SUBLAYER when they differ (INCONSISTENT when one does). */
resdiag_verdict rd_layer_verdict(const rd_analysis *a, int l);

#endif
