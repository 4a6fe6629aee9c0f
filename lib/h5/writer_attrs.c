/*
 * writer_attrs.c - every attribute the writer puts into a new run file
 * (doc/FORMAT.md): the root attributes (the run's shape, kinds and names,
 * its provenance, the rank that writes it), the trainer's /meta, and on
 * each dataset its description, units, axes and axis labels. Each goes
 * through the typed writers of attributes.c, with a failure recorded (and
 * the attribute named) for the writer's message.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/utf8.h"
#include "format/format.h"
#include "format/tables.h"
#include "h5/attributes.h"
#include "h5/common.h"
#include "h5/writer_state.h"

/* An attribute written (attributes.h), or its failure recorded in e. */
static int put(resdiag_status st, const char *name, werr *e)
{
    if (st == RESDIAG_OK)
        return 1;
    e->object = name;
    if (st != RESDIAG_E_IO)
        e->st = st;
    return 0;
}

static int attr_int(hid_t obj, const char *name, int v, werr *e)
{
    return put(rd_attr_put_int(obj, name, v, &e->h5), name, e);
}

static int attr_i64(hid_t obj, const char *name, int64_t v, werr *e)
{
    return put(rd_attr_put_i64(obj, name, v, &e->h5), name, e);
}

static int attr_u64(hid_t obj, const char *name, uint64_t v, werr *e)
{
    return put(rd_attr_put_u64(obj, name, v, &e->h5), name, e);
}

static int attr_str(hid_t obj, const char *name, const char *v, werr *e)
{
    return put(rd_attr_put_str(obj, name, v, &e->h5), name, e);
}

static int attr_strs(hid_t obj, const char *name, const char *const *v, size_t n, werr *e)
{
    return put(rd_attr_put_strs(obj, name, v, n, &e->h5), name, e);
}

/* ------------------------------------------------------------ provenance */

static void utc_now(char *buf, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, len, "%s", "");
}

/* A path and a host name are bytes, not text: scrubbed to UTF-8 without
 * control characters, as every string in the file must be. */
static void program_path(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    buf[n > 0 ? (size_t)n : 0] = '\0';
    rd_utf8_scrub(buf);
}

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len - 1) != 0)
        buf[0] = '\0';
    buf[len - 1] = '\0';
    rd_utf8_scrub(buf);
}

/* -------------------------------------------------------- root and /meta */

/* The rank that writes the file, on every file (one of one process too),
 * so that a reader never guesses. */
static int write_rank_attrs(hid_t file, const rd_rank_attrs *ra, werr *e)
{
    static const rd_rank_attrs single = { 0, 1, -1, "single", "none", 0, 0, 0, 1, "" };
    const rd_rank_attrs *a = ra ? ra : &single;
    return attr_i64(file, RD_ATTR_RANK, a->rank, e)
           && attr_i64(file, RD_ATTR_WORLD_SIZE, a->world_size, e)
           && attr_i64(file, RD_ATTR_LOCAL_RANK, a->local_rank, e)
           && attr_str(file, RD_ATTR_RANK_SOURCE, a->rank_source, e)
           && attr_str(file, RD_ATTR_SPLIT, a->split, e)
           && attr_i64(file, RD_ATTR_SHARD_COL_OFFSET, a->shard_col_offset, e)
           && attr_i64(file, RD_ATTR_LAYER_FIRST, a->layer_first, e)
           && attr_i64(file, RD_ATTR_LAYER_COUNT, a->layer_count, e)
           && attr_i64(file, RD_ATTR_RECORD_RANK_EVERY, a->record_rank_every, e)
           && attr_str(file, RD_ATTR_JOB_ID, a->job_id, e);
}

int rd_writer_write_root_attrs(hid_t file, const rd_file_header *hdr, int schema, werr *e)
{
    const resdiag_model *m = hdr->model;
    const char *site_names[RESDIAG_N_BLOCK_SITES];
    const char *model_site_names[RESDIAG_N_MODEL_SITES];
    const char *field_names[RESDIAG_N_FIELDS], *field_units[RESDIAG_N_FIELDS];
    for (int i = 0; i < RESDIAG_N_BLOCK_SITES; i++)
        site_names[i] = resdiag_site_name((resdiag_site)i);
    for (int i = 0; i < RESDIAG_N_MODEL_SITES; i++)
        model_site_names[i] = resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + i));
    for (int i = 0; i < RESDIAG_N_FIELDS; i++) {
        field_names[i] = resdiag_field_name((resdiag_field)i);
        field_units[i] = rd_h5_field_unit(i);
    }
    char created[64], program[PATH_MAX], host[256], h5ver[64];
    unsigned maj = 0, min = 0, rel = 0;
    utc_now(created, sizeof created);
    program_path(program, sizeof program);
    host_name(host, sizeof host);
    H5get_libversion(&maj, &min, &rel);
    snprintf(h5ver, sizeof h5ver, "%u.%u.%u", maj, min, rel);
    const char *block = rd_h5_block_name(m->block);

    return attr_int(file, RD_ATTR_SCHEMA_VERSION, schema, e)
           && attr_str(file, RD_ATTR_RESDIAG_VERSION, RESDIAG_VERSION_STRING, e)
           && attr_int(file, RD_ATTR_N_LAYERS, m->n_layers, e)
           && attr_int(file, RD_ATTR_D_MODEL, m->d_model, e)
           && attr_int(file, RD_ATTR_N_SUBLAYERS, m->n_sublayers, e)
           && attr_strs(file, RD_ATTR_SUBLAYER_NAMES, m->sublayer_names, (size_t)m->n_sublayers, e)
           && attr_str(file, RD_ATTR_BLOCK, block ? block : "?", e)
           && attr_str(file, RD_ATTR_DECLARED_PLACEMENT,
                       resdiag_placement_name(m->declared_placement), e)
           && attr_int(file, RD_ATTR_DECLARED_MIX_LAYERS, m->declared_mix_layers, e)
           && attr_str(file, RD_ATTR_NORM_KIND, resdiag_norm_kind_name(m->norm_kind), e)
           && attr_int(file, RD_ATTR_SHARD_COLS, m->shard_cols, e)
           && attr_strs(file, RD_ATTR_LAYER_PARAM_NAMES, m->layer_param_names,
                        (size_t)(m->n_layer_params > 0 ? m->n_layer_params : 0), e)
           && attr_strs(file, RD_ATTR_MODEL_PARAM_NAMES, m->model_param_names,
                        (size_t)(m->n_model_params > 0 ? m->n_model_params : 0), e)
           && attr_int(file, RD_ATTR_SKETCH_SIZE, hdr->sketch_size, e)
           && attr_u64(file, RD_ATTR_SKETCH_SEED, hdr->sketch_seed, e)
           && attr_strs(file, RD_ATTR_SITE_NAMES, site_names, (size_t)hdr->tables->n_block_sites, e)
           && attr_strs(file, RD_ATTR_MODEL_SITE_NAMES, model_site_names, RESDIAG_N_MODEL_SITES, e)
           && attr_strs(file, RD_ATTR_FIELD_NAMES, field_names, RESDIAG_N_FIELDS, e)
           && attr_strs(file, RD_ATTR_FIELD_UNITS, field_units, RESDIAG_N_FIELDS, e)
           && attr_str(file, RD_ATTR_DESCRIPTION, m->description ? m->description : "", e)
           && attr_str(file, RD_ATTR_CREATED_UTC, created, e)
           && attr_str(file, RD_ATTR_PROGRAM, program, e)
           && attr_str(file, RD_ATTR_HDF5_VERSION, h5ver, e)
           && attr_str(file, RD_ATTR_HOST, host, e)
           && attr_str(file, RD_ATTR_RUN_KIND, resdiag_run_kind_name(m->run_kind), e)
           && (!m->head_param || attr_str(file, RD_ATTR_HEAD_PARAM, m->head_param, e))
           && (!m->residual_param || attr_str(file, RD_ATTR_RESIDUAL_PARAM, m->residual_param, e))
           && (m->n_metrics <= 0
               || attr_strs(file, RD_ATTR_METRIC_NAMES, m->metric_names, (size_t)m->n_metrics, e))
           && write_rank_attrs(file, hdr->ranks, e);
}

int rd_writer_write_meta(hid_t file, const resdiag_model *m, werr *e)
{
    int ok = 0;
    /* Attribute order kept, so that a reader gets the pairs back in the
     * trainer's order. */
    hid_t g = rd_writer_create_group(file, RD_META_GROUP, 1, RD_META_GROUP, e);
    if (g < 0)
        return 0;
    for (int i = 0; i < m->n_meta; i++) {
        const char *key = m->meta ? m->meta[2 * i] : NULL;
        const char *val = m->meta ? m->meta[2 * i + 1] : NULL;
        if (!key || !key[0]) {
            snprintf(e->h5.msg, sizeof e->h5.msg, "metadata key %d is %s", i,
                     key ? "empty" : "NULL");
            e->h5.captured = 1;
            e->st = RESDIAG_E_INVALID;
            e->object = RD_META_GROUP;
            goto cleanup;
        }
        if (!attr_str(g, key, val, e))
            goto cleanup;
    }
    ok = 1;
cleanup:
    H5Gclose(g);
    return ok;
}

/* -------------------------------------------------- dataset descriptions */

/* Label attribute for the axis `axis` of a table, if it has labels. */
static int axis_labels(hid_t ds, const char *axis, const rd_file_header *hdr,
                       const int *fields, int n_fields, werr *e)
{
    const resdiag_model *m = hdr->model;
    if (strcmp(axis, "sublayer") == 0)
        return attr_strs(ds, RD_ATTR_SUBLAYER_NAMES, m->sublayer_names, (size_t)m->n_sublayers, e);
    if (strcmp(axis, "site") == 0) {
        const char *n[RESDIAG_N_BLOCK_SITES];
        for (int i = 0; i < RESDIAG_N_BLOCK_SITES; i++)
            n[i] = resdiag_site_name((resdiag_site)i);
        return attr_strs(ds, RD_ATTR_SITE_NAMES, n, (size_t)hdr->tables->n_block_sites, e);
    }
    if (strcmp(axis, "model_site") == 0) {
        const char *n[RESDIAG_N_MODEL_SITES];
        for (int i = 0; i < RESDIAG_N_MODEL_SITES; i++)
            n[i] = resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + i));
        return attr_strs(ds, RD_ATTR_MODEL_SITE_NAMES, n, RESDIAG_N_MODEL_SITES, e);
    }
    if (strcmp(axis, "param") == 0)
        return attr_strs(ds, RD_ATTR_PARAM_NAMES, m->layer_param_names,
                         (size_t)m->n_layer_params, e);
    if (strcmp(axis, "model_param") == 0)
        return attr_strs(ds, RD_ATTR_MODEL_PARAM_NAMES, m->model_param_names,
                         (size_t)m->n_model_params, e);
    if (strcmp(axis, "metric") == 0)
        return attr_strs(ds, RD_ATTR_METRIC_NAMES, m->metric_names, (size_t)m->n_metrics, e);
    if (strcmp(axis, "field") == 0) {
        /* (a schema-2 dataset holds some of the fields: it names those) */
        const char *n[RESDIAG_N_FIELDS], *u[RESDIAG_N_FIELDS];
        int nf = fields ? n_fields : RESDIAG_N_FIELDS;
        for (int i = 0; i < nf; i++) {
            int f = fields ? fields[i] : i;
            n[i] = resdiag_field_name((resdiag_field)f);
            u[i] = rd_h5_field_unit(f);
        }
        return attr_strs(ds, RD_ATTR_FIELD_NAMES, n, (size_t)nf, e)
               && attr_strs(ds, RD_ATTR_FIELD_UNITS, u, (size_t)nf, e);
    }
    if (strcmp(axis, "nonfinite_field") == 0) {
        const char *n[RD_SUM_NF_COLS];
        for (int i = 0; i < RD_SUM_NF_COLS; i++)
            n[i] = rd_summary_nonfinite_label(i);
        return attr_strs(ds, RD_ATTR_NONFINITE_FIELD_NAMES, n, RD_SUM_NF_COLS, e);
    }
    if (strcmp(axis, "stats_table") == 0) {
        const char *n[RD_SUM_OBS_COLS];
        for (int i = 0; i < RD_SUM_OBS_COLS; i++)
            n[i] = rd_summary_observed_label(i);
        return attr_strs(ds, RD_ATTR_STATS_TABLE_NAMES, n, RD_SUM_OBS_COLS, e);
    }
    if (strcmp(axis, "update_field") == 0) {
        const char *n[RESDIAG_N_UPDATE_FIELDS];
        for (int i = 0; i < RESDIAG_N_UPDATE_FIELDS; i++)
            n[i] = rd_update_label(i);
        return attr_strs(ds, RD_ATTR_UPDATE_FIELD_NAMES, n, RESDIAG_N_UPDATE_FIELDS, e);
    }
    return 1;
}

/* description, units, axes, and the labels of every labelled axis (of the
 * field axis: fields[0..n_fields-1], or every field when fields is NULL). */
int rd_writer_describe_fields(hid_t ds, const char *description, const char *units,
                              const char *axes, const rd_file_header *hdr, const int *fields,
                              int n_fields, werr *e)
{
    if (!attr_str(ds, RD_ATTR_DESCRIPTION, description, e) || !attr_str(ds, RD_ATTR_UNITS, units, e)
        || !attr_str(ds, RD_ATTR_AXES, axes, e))
        return 0;
    const char *p = axes;
    while (*p) {
        char axis[32];
        size_t n = strcspn(p, ",");
        if (n < sizeof axis) {
            memcpy(axis, p, n);
            axis[n] = '\0';
            if (!axis_labels(ds, axis, hdr, fields, n_fields, e))
                return 0;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 1;
}

int rd_writer_describe(hid_t ds, const char *description, const char *units, const char *axes,
                       const rd_file_header *hdr, werr *e)
{
    return rd_writer_describe_fields(ds, description, units, axes, hdr, NULL, 0, e);
}
