/*
 * validate.c - resdiag_open's checks of the model and the options: every
 * count in range, every name a short unique UTF-8 string without control
 * characters, every role naming a declared parameter. Each problem is one
 * "client bug" message naming the field.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/utf8.h"
#include "format/format.h"
#include "record/validate.h"

#define MAX_LAYERS 1000000
#define MAX_D_MODEL (1 << 24)
#define MAX_META 256

resdiag_status rd_open_fail(const open_ctx *c, resdiag_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rd_log(c->fn, c->user, RESDIAG_LOG_ERROR, "%s", msg);
    return st;
}

/* Every string of the model goes into the file and comes back out of it in
 * reports: valid UTF-8 (doc/FORMAT.md), and no control characters, so that
 * a name can never break a line or drive a terminal. Free text (the
 * description, meta values) may have newlines and tabs. The message names
 * the string but never prints it. */
static resdiag_status check_text(const open_ctx *c, const char *what, int index,
                                 const char *s, int allow_lines)
{
    size_t at = 0;
    rd_text_problem p = rd_utf8_check(s, allow_lines, &at);
    if (p == RD_TEXT_OK)
        return RESDIAG_OK;
    char name[96];
    if (index >= 0)
        snprintf(name, sizeof name, "%s[%d]", what, index);
    else
        snprintf(name, sizeof name, "%s", what);
    if (p == RD_TEXT_NOT_UTF8)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: %s is not valid UTF-8 (byte 0x%02x at "
                            "offset %zu)", name, (unsigned char)s[at], at);
    return rd_open_fail(c, RESDIAG_E_INVALID,
                        "client bug: resdiag_open: %s contains a control character (byte 0x%02x "
                        "at offset %zu)%s", name, (unsigned char)s[at], at,
                        allow_lines ? "; only newline and tab are allowed" : "");
}

/* A list of n names: each non-NULL, non-empty, shorter than RESDIAG_MAX_NAME,
 * UTF-8 without control characters, and unique. */
static resdiag_status check_names(const open_ctx *c, const char *what,
                                  const char *const *names, int n, int stride)
{
    if (n > 0 && !names)
        return rd_open_fail(c, RESDIAG_E_NULL, "client bug: resdiag_open: %s is NULL", what);
    for (int i = 0; i < n; i++) {
        const char *a = names[(size_t)i * (size_t)stride];
        if (!a)
            return rd_open_fail(c, RESDIAG_E_NULL, "client bug: resdiag_open: %s[%d] is NULL",
                                what, i);
        size_t len = strlen(a);
        if (len == 0 || len >= RESDIAG_MAX_NAME)
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: %s[%d] must have 1 to %d bytes", what,
                                i, RESDIAG_MAX_NAME - 1);
        resdiag_status st = check_text(c, what, i, a, 0);
        if (st)
            return st;
        for (int j = 0; j < i; j++)
            if (strcmp(a, names[(size_t)j * (size_t)stride]) == 0)
                return rd_open_fail(c, RESDIAG_E_INVALID,
                                    "client bug: resdiag_open: %s '%s' appears twice", what, a);
    }
    return RESDIAG_OK;
}

/* A role (head_param, residual_param): NULL declares none; otherwise the
 * name of one of the parameters in names (the list called list). The value
 * is checked as text before the message quotes it. */
static resdiag_status check_role(const open_ctx *c, const char *what, const char *role,
                                 const char *list, const char *const *names, int n)
{
    if (!role)
        return RESDIAG_OK;
    resdiag_status st = check_text(c, what, -1, role, 0);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        if (strcmp(role, names[i]) == 0)
            return RESDIAG_OK;
    return rd_open_fail(c, RESDIAG_E_INVALID,
                        "client bug: resdiag_open: %s '%s' is not one of %s (%d declared); "
                        "name a declared parameter, or leave it NULL", what, role, list, n);
}

/* The rank fields (doc/RANKS.md): an explicit rank with its world size,
 * a known split, and the split's own fields in range, the others 0. */
static resdiag_status check_ranks(const open_ctx *c, const resdiag_model *m)
{
    if (m->world_size < 0)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: world_size is %d, must be >= 1, or 0 "
                            "to detect it with the rank", m->world_size);
    if (m->rank < RESDIAG_RANK_DETECT)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: rank is %d, must be >= 0 or "
                            "RESDIAG_RANK_DETECT (-1)", m->rank);
    if (m->rank >= 0 && m->world_size < 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: rank %d is given without world_size; "
                            "an explicit rank needs world_size >= 1", m->rank);
    if (m->rank >= 0 && m->rank >= m->world_size)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: rank is %d, must be below world_size %d",
                            m->rank, m->world_size);
    if ((unsigned)m->split > RESDIAG_SPLIT_PIPELINE)
        return rd_open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown split %d",
                            (int)m->split);
    if (m->split == RESDIAG_SPLIT_TENSOR) {
        if (m->shard_cols < 1)
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: split TENSOR needs shard_cols, the "
                                "width of this rank's shard");
        if (m->shard_col_offset < 0 || m->shard_col_offset > m->d_model - m->shard_cols)
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: shard_col_offset %d with shard_cols "
                                "%d is outside d_model %d", m->shard_col_offset, m->shard_cols,
                                m->d_model);
    } else if (m->shard_col_offset != 0) {
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: shard_col_offset is %d; it is for split "
                            "TENSOR only", m->shard_col_offset);
    }
    if (m->split == RESDIAG_SPLIT_PIPELINE) {
        if (m->layer_first < 0 || m->layer_count < 0 ||
            m->layer_first > m->n_layers - m->layer_count ||
            (m->layer_count == 0 && m->layer_first != 0))
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: layer_first %d, layer_count %d: the "
                                "layers must lie in 0..%d (layer_count 0: every layer, from 0)",
                                m->layer_first, m->layer_count, m->n_layers - 1);
    } else if (m->layer_first != 0 || m->layer_count != 0) {
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: layer_first %d, layer_count %d; they "
                            "are for split PIPELINE only", m->layer_first, m->layer_count);
    }
    return RESDIAG_OK;
}

resdiag_status rd_check_model(const open_ctx *c, const resdiag_model *m)
{
    resdiag_status st;
    if (m->n_layers < 1 || m->n_layers > MAX_LAYERS)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: n_layers is %d, must be 1..%d",
                            m->n_layers, MAX_LAYERS);
    if (m->d_model < 1 || m->d_model > MAX_D_MODEL)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: d_model is %d, must be 1..%d", m->d_model,
                            MAX_D_MODEL);
    if (m->n_sublayers < 1 || m->n_sublayers > RESDIAG_MAX_SUBLAYERS)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: n_sublayers is %d, must be 1..%d",
                            m->n_sublayers, RESDIAG_MAX_SUBLAYERS);
    if ((st = check_names(c, "sublayer_names", m->sublayer_names, m->n_sublayers, 1)))
        return st;
    if ((unsigned)m->block > RESDIAG_BLOCK_PARALLEL)
        return rd_open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown block kind %d",
                            (int)m->block);
    if (!RD_PLACEMENT_DECLARABLE(m->declared_placement))
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: unknown declared placement %d",
                            (int)m->declared_placement);
    if (m->declared_mix_layers < 0 || m->declared_mix_layers > m->n_layers)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: declared_mix_layers is %d, must be 0..%d",
                            m->declared_mix_layers, m->n_layers);
    if ((unsigned)m->norm_kind > RESDIAG_NORM_RMSNORM)
        return rd_open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown norm kind %d",
                            (int)m->norm_kind);
    if ((unsigned)m->run_kind > RESDIAG_RUN_INFERENCE)
        return rd_open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown run kind %d",
                            (int)m->run_kind);
    if (m->shard_cols < 0 || m->shard_cols > MAX_D_MODEL)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: shard_cols is %d, must be 0..%d",
                            m->shard_cols, MAX_D_MODEL);
    if (m->n_layer_params < 0 || m->n_layer_params > RESDIAG_MAX_PARAMS ||
        m->n_model_params < 0 || m->n_model_params > RESDIAG_MAX_PARAMS)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: n_layer_params and n_model_params must be "
                            "0..%d", RESDIAG_MAX_PARAMS);
    if ((st = check_names(c, "layer_param_names", m->layer_param_names, m->n_layer_params, 1)))
        return st;
    if ((st = check_names(c, "model_param_names", m->model_param_names, m->n_model_params, 1)))
        return st;
    if ((st = check_role(c, "head_param", m->head_param, "model_param_names",
                         m->model_param_names, m->n_model_params)))
        return st;
    if ((st = check_role(c, "residual_param", m->residual_param, "layer_param_names",
                         m->layer_param_names, m->n_layer_params)))
        return st;
    if (m->n_metrics < 0 || m->n_metrics > RESDIAG_MAX_METRICS)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: n_metrics is %d, must be 0..%d",
                            m->n_metrics, RESDIAG_MAX_METRICS);
    if ((st = check_names(c, "metric_names", m->metric_names, m->n_metrics, 1)))
        return st;
    if (m->n_meta < 0 || m->n_meta > MAX_META)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: n_meta is %d, must be 0..%d", m->n_meta,
                            MAX_META);
    if ((st = check_names(c, "meta key", m->meta, m->n_meta, 2)))
        return st;
    for (int i = 0; i < m->n_meta; i++) {
        if (!m->meta[2 * i + 1])
            return rd_open_fail(c, RESDIAG_E_NULL,
                                "client bug: resdiag_open: the value of meta key '%s' is NULL",
                                m->meta[2 * i]);
        if (strchr(m->meta[2 * i], '/'))
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: meta key '%s' may not contain '/'",
                                m->meta[2 * i]);
        char what[96];
        snprintf(what, sizeof what, "the value of meta key '%s'", m->meta[2 * i]);
        if ((st = check_text(c, what, -1, m->meta[2 * i + 1], 1)))
            return st;
    }
    if (m->description && (st = check_text(c, "description", -1, m->description, 1)))
        return st;
    return check_ranks(c, m);
}

resdiag_status rd_check_options(const open_ctx *c, const resdiag_options *o)
{
    if (o->record_every < 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: record_every is %lld, must be >= 1",
                            (long long)o->record_every);
    if (o->record_first < 0 || o->record_last < o->record_first)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: need 0 <= record_first <= record_last "
                            "(got %lld, %lld)",
                            (long long)o->record_first, (long long)o->record_last);
    if (o->sketch_size < 0 || o->sketch_size > RESDIAG_MAX_SKETCH)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: sketch_size is %d, must be 0..%d",
                            o->sketch_size, RESDIAG_MAX_SKETCH);
    if (o->flush_steps < 1 || o->flush_steps > 100000)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: flush_steps is %d, must be 1..100000",
                            o->flush_steps);
    if (!(o->flush_seconds >= 0.0) || isinf(o->flush_seconds))
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: flush_seconds must be finite and >= 0");
    if (o->hook_threads < 0 || o->hook_threads > RESDIAG_MAX_HOOK_THREADS)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: hook_threads is %d, must be 0..%d "
                            "(0: the CPUs the process may run on)",
                            o->hook_threads, RESDIAG_MAX_HOOK_THREADS);
    if (o->overwrite != 0 && o->overwrite != 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: overwrite is %d, must be 0 or 1",
                            o->overwrite);
    if (o->one_call_per_site != 0 && o->one_call_per_site != 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: one_call_per_site is %d, must be 0 or 1",
                            o->one_call_per_site);
    if (o->record_rank_every < 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: record_rank_every is %d, must be >= 1",
                            o->record_rank_every);
    if (o->file_schema < 0 || o->file_schema > RD_SCHEMA_VERSION)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: file_schema is %d, must be 0..%d "
                            "(0: the newest, %d)",
                            o->file_schema, RD_SCHEMA_VERSION, RD_SCHEMA_VERSION);
    if (o->alarm_nonfinite != 0 && o->alarm_nonfinite != 1)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: alarm_nonfinite is %d, must be 0 or 1",
                            o->alarm_nonfinite);
    const struct { const char *name; double v; } bounds[] = {
        { "alarm_update_ratio", o->alarm_update_ratio },
        { "alarm_growth", o->alarm_growth },
        { "alarm_grad_norm", o->alarm_grad_norm },
    };
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++)
        if (bounds[i].v < 0)
            return rd_open_fail(c, RESDIAG_E_INVALID,
                                "client bug: resdiag_open: %s is %g, must be >= 0 (0 or NaN: "
                                "off)", bounds[i].name, bounds[i].v);
    if (o->compression < 0 || o->compression > 9)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: compression is %d, must be 0..9 "
                            "(0: none, 1..9: the deflate level)",
                            o->compression);
    return RESDIAG_OK;
}

