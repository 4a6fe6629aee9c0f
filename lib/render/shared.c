/*
 * shared.c - the words and groupings every renderer uses (shared.h).
 */
#include "render/shared.h"

#include <math.h>
#include <stdio.h>

const char *rd_verdict_human(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL: return "cannot tell";
    case RESDIAG_VERDICT_PRE: return "pre-norm";
    case RESDIAG_VERDICT_POST: return "post-norm";
    case RESDIAG_VERDICT_SANDWICH: return "sandwich (Peri-LN)";
    case RESDIAG_VERDICT_DEEPNORM: return "deepnorm";
    case RESDIAG_VERDICT_MIXED: return "mixed";
    case RESDIAG_VERDICT_PARALLEL: return "parallel block";
    case RESDIAG_VERDICT_NONE: return "no norm";
    case RESDIAG_VERDICT_INCONSISTENT: return "inconsistent";
    case RESDIAG_VERDICT_POST_FAMILY: return "post-norm family (post-norm or deepnorm)";
    case RESDIAG_VERDICT_NOT_RENORMALIZED:
        return "stream not renormalized (pre-norm, sandwich, parallel or no norm)";
    case RESDIAG_VERDICT_PRE_OR_SANDWICH: return "pre-norm or sandwich";
    case RESDIAG_VERDICT_REORDERED: return "reordered norm (x + Norm(F(x)))";
    case RESDIAG_VERDICT_PER_SUBLAYER: return "per-sublayer scheme";
    case RESDIAG_VERDICT_ZERO_BRANCHES: return "zero-initialised branches";
    }
    return "?";
}

const char *rd_verdict_short(resdiag_verdict v)
{
    return v == RESDIAG_VERDICT_CANNOT_TELL ? "?" : resdiag_verdict_name(v);
}

void rd_energy_sentence(char *out, size_t cap, const rd_fit *e, int unicode)
{
    const char *lhs = unicode ? "\u2016x_k\u2016\u00b2" : "||x_k||^2";
    const char *r2 = unicode ? "R\u00b2" : "R^2";
    if (e->n >= 2 && e->y_spread < RD_FLAT_SPREAD)
        snprintf(out, cap, "%s = %.4g at every layer (flat to " RD_FLAT_SPREAD_TEXT ", n = %d)",
                 lhs, e->a, e->n);
    else if (e->n >= 2 && !isnan(e->b))
        snprintf(out, cap, "%s = %.4g %c %.4g k over k = 1..L (%s %.4f, n = %d)", lhs, e->a,
                 e->b < 0 ? '-' : '+', fabs(e->b), r2, e->r2, e->n);
    else
        snprintf(out, cap, "%s = a + b k: too few layers observed", lhs);
}

const char *rd_final_norm_text(const rd_analysis *a)
{
    return a->final_norm.reads_norm == 1   ? "present"
           : a->final_norm.reads_norm == 0 ? "absent"
           : a->final_norm.identity        ? "cannot be told from an identity here"
                                           : "not observed";
}

const char *rd_final_norm_key(const rd_analysis *a)
{
    return a->final_norm.identity ? "indistinguishable" : rd_final_norm_text(a);
}

const char *rd_head_name(const rd_analysis *a)
{
    return a->gradients.head_is_param ? a->load.head_param_name : NULL;
}

int rd_declared_contradicted(const rd_analysis *a)
{
    return rd_declared_agrees(a) == 0;
}

int rd_is_training(const rd_analysis *a)
{
    return a->load.run_kind == RESDIAG_RUN_TRAINING;
}

int rd_layer_group_end(const rd_analysis *a, int l)
{
    int L = a->load.n_layers, S = a->load.n_sublayers, m = l + 1;
    for (; m < L; m++)
        for (int s = 0; s < S; s++)
            if (a->placement.sub[m * S + s].v != a->placement.sub[l * S + s].v)
                return m;
    return m;
}

const char *rd_file_state_key(resdiag_file_state s)
{
    switch (s) {
    case RESDIAG_FILE_CLOSED:
        return "closed";
    case RESDIAG_FILE_WRITING:
        return "being_written";
    case RESDIAG_FILE_NOT_CLOSED:
        return "not_closed";
    default:
        return "unknown";
    }
}

void rd_file_state_sentence(char *out, size_t cap, const rd_analysis *a)
{
    long long last = (long long)a->load.steps[a->load.n_steps - 1];
    /* h5dump and h5ls open without SWMR and refuse a file still marked
     * open; h5clear -s clears the mark in place, so on a copy. */
    static const char other_tools[] =
        "resdiag and h5py (swmr=True) read it as it is; h5dump and h5ls refuse it "
        "(\"unable to open file\"): cp the file and run h5clear -s on the copy first";
    switch (a->load.file_state) {
    case RESDIAG_FILE_WRITING:
        snprintf(out, cap,
                 "still being written (a writer holds its lock): this report covers the "
                 "steps flushed so far, the last at step %lld; resdiag and h5py (swmr=True) "
                 "read it meanwhile; h5dump and h5ls refuse it until the writer closes it",
                 last);
        break;
    case RESDIAG_FILE_NOT_CLOSED:
        snprintf(out, cap, "its writer did not close it (last flush at step %lld); %s", last,
                 other_tools);
        break;
    case RESDIAG_FILE_UNKNOWN:
        snprintf(out, cap,
                 "marked as open by a writer, but whether one still writes it cannot be told "
                 "(no lock to ask); the last flush was at step %lld; %s",
                 last, other_tools);
        break;
    default:
        if (cap)
            out[0] = '\0';
    }
}
