/*
 * reader_get.c - the public getters (resdiag.h) on one run file: the
 * steps, a site's or a parameter's statistics, a sketch, the update
 * ratios, the metrics, a step's status, an alias, a call site and a
 * site's series, each with its arguments checked (a block site the file's
 * schema has no room for reads as "not observed"); and what the layers
 * above ask of the file itself (its info, path and last step).
 */
#include <math.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/common.h"
#include "h5/reader_file.h"
#include "h5/reader_state.h"

const resdiag_run_info *rd_file_info(const resdiag_reader *rd)
{
    return &rd->root.info;
}

int64_t rd_file_last_step(const resdiag_reader *rd)
{
    return rd->root.info.n_steps > 0 ? rd->last_step : -1;
}

const char *rd_file_path(const resdiag_reader *rd)
{
    return rd->path;
}

resdiag_status rd_reader_check_step(const resdiag_reader *rd, int64_t step_index, const char *fn)
{
    if (step_index < 0 || step_index >= rd->root.info.n_steps)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no step index %lld (it holds "
                          "%lld)",
                          fn, rd->path, (long long)step_index, (long long)rd->root.info.n_steps);
    return RESDIAG_OK;
}

/* Checks direction, site, layer and sublayer; block sites need the latter two. */
/* A block site the file's schema has no room for (branch_in, out_norm_in,
 * out_norm_out before schema 3): the getters say "not observed". */
static int site_not_in_file(const resdiag_reader *rd, resdiag_site site)
{
    return rd_model_site_index(site) < 0 && (int)site >= rd->lay.n_block_sites;
}

static resdiag_status check_site(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                 int sublayer, resdiag_site site, const char *fn)
{
    if (dir != RESDIAG_FORWARD && dir != RESDIAG_BACKWARD)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: direction %d is not forward or "
                          "backward", fn, (int)dir);
    if (rd_model_site_index(site) >= 0)
        return RESDIAG_OK;
    if ((int)site < 0 || (int)site >= RESDIAG_N_BLOCK_SITES)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: site %d is not a site", fn, (int)site);
    /* sites beyond the file's (branch_in.. in a file before schema 3): valid, never observed */
    if (layer < 0 || layer >= rd->root.info.n_layers)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: layer %d is outside 0..%d", fn, layer,
                          rd->root.info.n_layers - 1);
    if (sublayer < 0 || sublayer >= rd->root.info.n_sublayers)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: sublayer %d is outside 0..%d", fn,
                          sublayer, rd->root.info.n_sublayers - 1);
    return RESDIAG_OK;
}

static resdiag_status table_present(const resdiag_reader *rd, int table, const char *fn)
{
    if (rd->table_ds[table] < 0)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no %s (%s)", fn, rd->path,
                          rd->lay.tables[table].name,
                          rd->lay.tables[table].kind == RD_KIND_SKETCH  ? "sketch size 0"
                          : rd->lay.tables[table].kind == RD_KIND_CALLS
                              ? "written by a resdiag that did not count calls"
                              : "no such parameters");
    return RESDIAG_OK;
}

resdiag_status rd_file_steps(const resdiag_reader *rd, int64_t *out, int64_t n)
{
    if (n < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: resdiag_reader_steps: n = %lld",
                          (long long)n);
    if (n > rd->root.info.n_steps)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "resdiag_reader_steps: run file %s holds %lld "
                          "steps, not %lld", rd->path, (long long)rd->root.info.n_steps,
                          (long long)n);
    if (n == 0)
        return RESDIAG_OK;
    hsize_t start = 0, cnt = (hsize_t)n;
    return rd_reader_read_block(rd, rd->steps_ds, RD_STEPS_NAME, H5T_NATIVE_INT64, &start, &cnt,
                                1, &cnt, out);
}

static void fill_nan(double *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = NAN;
}

/* The fields of one stats row into out (NaN on failure); *observed (may be
 * NULL) whether the row was observed at that step. */
static resdiag_status read_fields(const resdiag_reader *rd, int table, size_t slot,
                                  int64_t step_index, double *out, int *observed)
{
    resdiag_status st = rd_reader_read_slot(rd, table, slot, step_index, 1, 0, RESDIAG_N_FIELDS,
                                            out);
    if (st != RESDIAG_OK) {
        fill_nan(out, RESDIAG_N_FIELDS);
        return st;
    }
    if (observed)
        *observed = !isnan(out[RESDIAG_FIELD_ROWS]);
    return RESDIAG_OK;
}

resdiag_status rd_file_site(const resdiag_reader *rd, int64_t step_index,
                            resdiag_direction dir, int layer, int sublayer,
                            resdiag_site site, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_site";
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK
        || (st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if (site_not_in_file(rd, site)) {
        fill_nan(out, RESDIAG_N_FIELDS);
        return RESDIAG_OK;
    }
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return read_fields(rd, table, slot, step_index, out, observed);
}

resdiag_status rd_file_sketch(const resdiag_reader *rd, int64_t step_index,
                              resdiag_direction dir, int layer, int sublayer,
                              resdiag_site site, double *out)
{
    static const char fn[] = "resdiag_reader_sketch";
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 1, &table, &slot);
    if ((st = table_present(rd, table, fn)) != RESDIAG_OK
        || (st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if (site_not_in_file(rd, site)) {
        fill_nan(out, (size_t)rd->root.info.sketch_size);
        return RESDIAG_OK;
    }
    return rd_reader_read_slot(rd, table, slot, step_index, 1, 0,
                               (hsize_t)rd->root.info.sketch_size, out);
}

resdiag_status rd_file_param(const resdiag_reader *rd, int64_t step_index, int layer,
                             const char *name, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_param";
    int table;
    size_t slot = 0;
    char **names;
    size_t n;
    if (layer == RESDIAG_MODEL_LEVEL) {
        table = RD_T_MODEL_PARAM;
        names = rd->root.model_params;
        n = rd->root.n_model_params;
    } else if (layer >= 0 && layer < rd->root.info.n_layers) {
        table = RD_T_LAYER_PARAM;
        names = rd->root.layer_params;
        n = rd->root.n_layer_params;
    } else {
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: layer %d is outside 0..%d (or -1 for "
                          "the model level)", fn, layer, rd->root.info.n_layers - 1);
    }
    size_t p = 0;
    while (p < n && strcmp(names[p], name) != 0)
        p++;
    if (p == n)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no %s parameter \"%s\"", fn,
                          rd->path, layer == RESDIAG_MODEL_LEVEL ? "model-level" : "per-layer",
                          name);
    slot = layer == RESDIAG_MODEL_LEVEL ? p : (size_t)layer * n + p;
    resdiag_status st;
    if ((st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    return read_fields(rd, table, slot, step_index, out, observed);
}

resdiag_status rd_file_update(const resdiag_reader *rd, int64_t step_index, int layer,
                              int sublayer, double *out)
{
    static const char fn[] = "resdiag_reader_update";
    resdiag_status st;
    if ((st = check_site(rd, RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, fn))
        != RESDIAG_OK
        || (st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    size_t slot = (size_t)layer * (size_t)rd->root.info.n_sublayers + (size_t)sublayer;
    return rd_reader_read_slot(rd, RD_T_UPDATE, slot, step_index, 1, 0, RESDIAG_N_UPDATE_FIELDS,
                               out);
}

resdiag_status rd_file_metric(const resdiag_reader *rd, int metric, int64_t first,
                              int64_t n, double *out)
{
    static const char fn[] = "resdiag_reader_metric";
    const resdiag_run_info *in = &rd->root.info;
    if (metric < 0 || metric >= in->n_metrics)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: metric %d is outside 0..%d (run "
                          "file %s declares %d)", fn, metric, in->n_metrics - 1, rd->path,
                          in->n_metrics);
    if (first < 0 || n < 0 || n > in->n_steps - first)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps, not "
                          "%lld..%lld", fn, rd->path, (long long)in->n_steps, (long long)first,
                          (long long)(first + n - 1));
    if (n == 0)
        return RESDIAG_OK;
    if (rd->table_ds[RD_T_METRICS] < 0) { /* names without the table: nothing given */
        fill_nan(out, (size_t)n);
        return RESDIAG_OK;
    }
    hsize_t start[2] = { (hsize_t)first, (hsize_t)metric }, count[2] = { (hsize_t)n, 1 };
    hsize_t mn = (hsize_t)n;
    return rd_reader_read_block(rd, rd->table_ds[RD_T_METRICS], RD_DS_METRICS, H5T_NATIVE_DOUBLE,
                                start, count, 1, &mn, out);
}

/* The step status of step index si: *aborted, and its reason into out
 * (out_len >= 1) unless out is NULL. A file without the tables: complete. */
static resdiag_status read_step_status(const resdiag_reader *rd, int64_t si, int *aborted,
                                       char *out, size_t out_len)
{
    double flag = NAN, bytes[RESDIAG_MAX_ABORT_REASON];
    *aborted = 0;
    if (out)
        out[0] = '\0';
    resdiag_status st = RESDIAG_OK;
    if (rd->table_ds[RD_T_STEP_ABORTED] >= 0)
        st = rd_reader_read_slot(rd, RD_T_STEP_ABORTED, 0, si, 1, 0, 1, &flag);
    if (st != RESDIAG_OK || !(flag == 1))
        return st;
    *aborted = 1;
    if (!out || rd->table_ds[RD_T_ABORT_REASON] < 0)
        return RESDIAG_OK;
    st = rd_reader_read_slot(rd, RD_T_ABORT_REASON, 0, si, 1, 0, RESDIAG_MAX_ABORT_REASON, bytes);
    if (st == RESDIAG_OK)
        rd_tables_abort_reason(bytes, out, out_len);
    return st;
}

resdiag_status rd_file_step_aborted(const resdiag_reader *rd, int64_t step_index,
                                    int *aborted)
{
    static const char fn[] = "resdiag_reader_step_aborted";
    resdiag_status st = rd_reader_check_step(rd, step_index, fn);
    return st != RESDIAG_OK ? st : read_step_status(rd, step_index, aborted, NULL, 0);
}

resdiag_status rd_file_abort_reason(const resdiag_reader *rd, int64_t step_index,
                                    char *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_abort_reason";
    int aborted = 0;
    resdiag_status st = rd_reader_check_step(rd, step_index, fn);
    return st != RESDIAG_OK ? st : read_step_status(rd, step_index, &aborted, out, out_len);
}

resdiag_status rd_file_alias(const resdiag_reader *rd, int64_t step_index,
                             resdiag_direction dir, int layer, int sublayer,
                             resdiag_site site, int *same_as)
{
    static const char fn[] = "resdiag_reader_alias";
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    if (rd_model_site_index(site) >= 0)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: %s is a model site; aliases are "
                          "between the block sites of one sublayer", fn, resdiag_site_name(site));
    if ((st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    int table = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    if (rd->table_ds[table] < 0 || site_not_in_file(rd, site))
        return RESDIAG_OK; /* a file from before aliases (or this site): none declared */
    size_t slot = (size_t)layer * (size_t)rd->root.info.n_sublayers + (size_t)sublayer;
    double v;
    if ((st = rd_reader_read_slot(rd, table, slot, step_index, 1, (hsize_t)site, 1, &v)) !=
        RESDIAG_OK)
        return st;
    if (isnan(v))
        return RESDIAG_OK;
    if (!(v >= 0 && v < rd->lay.n_block_sites) || v != floor(v) || (int)v == (int)site)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: /%s holds %g at step index %lld, layer "
                          "%d, sublayer %d, site %s: not the index of another block site", rd->path,
                          rd->lay.tables[table].name, v, (long long)step_index, layer, sublayer,
                          resdiag_site_name(site));
    *same_as = (int)v;
    return RESDIAG_OK;
}

const char *rd_file_callsite(const resdiag_reader *rd, resdiag_direction dir, int layer,
                             int sublayer, resdiag_site site)
{
    static const char fn[] = "resdiag_reader_callsite";
    if (check_site(rd, dir, layer, sublayer, site, fn) != RESDIAG_OK)
        return "";
    if (site_not_in_file(rd, site))
        return "";
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return rd->callsites[rd->lay.tables[table].slot_offset + slot];
}

resdiag_status rd_file_series(const resdiag_reader *rd, resdiag_direction dir, int layer,
                              int sublayer, resdiag_site site, resdiag_field field,
                              double *out, int64_t n)
{
    static const char fn[] = "resdiag_reader_series";
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    if ((int)field < 0 || (int)field >= RESDIAG_N_FIELDS)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: field %d is outside 0..%d", fn,
                          (int)field, RESDIAG_N_FIELDS - 1);
    if (n < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: n = %lld", fn, (long long)n);
    if (n > rd->root.info.n_steps)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps, not %lld", fn,
                          rd->path, (long long)rd->root.info.n_steps, (long long)n);
    if (n == 0)
        return RESDIAG_OK;
    if (site_not_in_file(rd, site)) {
        fill_nan(out, (size_t)n);
        return RESDIAG_OK;
    }
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return rd_reader_read_slot(rd, table, slot, 0, (hsize_t)n, (hsize_t)field, 1, out);
}
