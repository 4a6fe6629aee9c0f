/*
 * names.c - versions, status strings and the printable names of enums:
 * the one table of each (verdicts and confidences included).
 */
#include "resdiag.h"

unsigned resdiag_version_number(void)
{
    return RESDIAG_VERSION_NUMBER;
}

const char *resdiag_version_string(void)
{
    return RESDIAG_VERSION_STRING;
}

const char *resdiag_strerror(resdiag_status status)
{
    switch (status) {
    case RESDIAG_OK: return "success";
    case RESDIAG_E_NULL: return "a required pointer argument is NULL";
    case RESDIAG_E_INVALID: return "invalid argument";
    case RESDIAG_E_RANGE: return "layer, sublayer, site or parameter out of range";
    case RESDIAG_E_SHAPE: return "tensor shape does not match the model";
    case RESDIAG_E_STATE: return "call out of order";
    case RESDIAG_E_NOMEM: return "out of memory";
    case RESDIAG_E_IO: return "input/output error";
    case RESDIAG_E_NOSPACE: return "no space left (disk full or file size limit)";
    case RESDIAG_E_FORMAT: return "not a resdiag run file, or a damaged one";
    case RESDIAG_E_VERSION: return "run file written by a newer schema";
    case RESDIAG_E_NOT_FOUND: return "not found in the run file";
    case RESDIAG_E_DTYPE: return "unknown tensor dtype";
    case RESDIAG_E_INTERRUPTED: return "interrupted by a signal; the run file was closed";
    case RESDIAG_E_EXISTS: return "the path already exists and may not be replaced";
    case RESDIAG_E_LOCKED: return "another writer is recording at this path";
    case RESDIAG_E_BUSY: return "the same site is being observed by another thread";
    case RESDIAG_ALARM: return "an alarm fired; the step is written";
    }
    return "unknown status";
}

const char *resdiag_site_name(resdiag_site site)
{
    switch (site) {
    case RESDIAG_STREAM_IN: return "stream_in";
    case RESDIAG_NORM_IN: return "norm_in";
    case RESDIAG_NORM_OUT: return "norm_out";
    case RESDIAG_BRANCH_OUT: return "branch_out";
    case RESDIAG_STREAM_OUT: return "stream_out";
    case RESDIAG_BRANCH_IN: return "branch_in";
    case RESDIAG_OUT_NORM_IN: return "out_norm_in";
    case RESDIAG_OUT_NORM_OUT: return "out_norm_out";
    case RESDIAG_N_BLOCK_SITES: break;
    case RESDIAG_EMBED_OUT: return "embed_out";
    case RESDIAG_FINAL_NORM_IN: return "final_norm_in";
    case RESDIAG_FINAL_NORM_OUT: return "final_norm_out";
    case RESDIAG_LOGITS: return "logits";
    }
    return "?";
}

const char *resdiag_field_name(resdiag_field field)
{
    static const char *const names[RESDIAG_N_FIELDS] = {
        "rows", "cols", "frob", "tok_norm_mean", "tok_norm_std", "tok_norm_min",
        "tok_norm_max", "tok_mean_mean", "tok_mean_std", "tok_rms_mean", "tok_rms_std",
        "tok_std_mean", "tok_std_std", "absmax", "absmax_col", "nan_count", "inf_count",
        "call_seq",
    };
    return (unsigned)field < RESDIAG_N_FIELDS ? names[field] : "?";
}

const char *resdiag_placement_name(resdiag_placement placement)
{
    /* indexed by value; 8..11 are verdicts only */
    static const char *const names[] = { "undeclared", "pre",   "post",     "sandwich",
                                         "deepnorm",   "mixed", "parallel", "none",
                                         NULL,         NULL,    NULL,       NULL,
                                         "reordered",  "per_sublayer" };
    if ((unsigned)placement < sizeof names / sizeof names[0] && names[placement])
        return names[placement];
    return "?";
}

const char *resdiag_norm_kind_name(resdiag_norm_kind kind)
{
    static const char *const names[] = { "undeclared", "layernorm", "rmsnorm" };
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *resdiag_run_kind_name(resdiag_run_kind kind)
{
    static const char *const names[] = { "training", "evaluation", "inference" };
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *resdiag_dtype_name(resdiag_dtype dtype)
{
    static const char *const names[] = { "f32", "f64", "f16", "bf16" };
    return (unsigned)dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

const char *resdiag_verdict_name(resdiag_verdict v)
{
    switch (v) {
    case RESDIAG_VERDICT_CANNOT_TELL: return "cannot_tell";
    case RESDIAG_VERDICT_PRE: return "pre";
    case RESDIAG_VERDICT_POST: return "post";
    case RESDIAG_VERDICT_SANDWICH: return "sandwich";
    case RESDIAG_VERDICT_DEEPNORM: return "deepnorm";
    case RESDIAG_VERDICT_MIXED: return "mixed";
    case RESDIAG_VERDICT_PARALLEL: return "parallel";
    case RESDIAG_VERDICT_NONE: return "none";
    case RESDIAG_VERDICT_INCONSISTENT: return "inconsistent";
    case RESDIAG_VERDICT_POST_FAMILY: return "post_family";
    case RESDIAG_VERDICT_NOT_RENORMALIZED: return "not_renormalized";
    case RESDIAG_VERDICT_PRE_OR_SANDWICH: return "pre_or_sandwich";
    case RESDIAG_VERDICT_REORDERED: return "reordered";
    case RESDIAG_VERDICT_PER_SUBLAYER: return "per_sublayer";
    case RESDIAG_VERDICT_ZERO_BRANCHES: return "zero_branches";
    }
    return "?";
}

const char *resdiag_confidence_name(resdiag_confidence c)
{
    switch (c) {
    case RESDIAG_CONFIDENCE_NONE: return "none";
    case RESDIAG_CONFIDENCE_LOW: return "low";
    case RESDIAG_CONFIDENCE_MEDIUM: return "medium";
    case RESDIAG_CONFIDENCE_HIGH: return "high";
    }
    return "?";
}
