/*
 * reader_tables.c - the datasets of a run file that its root attributes
 * imply (/steps, /step_time, every table, the call sites and the
 * summary), each opened only after its path was found, its storage
 * checked (reader_trust.c) and its type class and shape matched against
 * the tables of format/tables.h; then the chunk shape of every time
 * series, and a decoder (chunk_decode.c) for each filtered one. A table
 * that a file from before it lacks reads as NaN; a schema-2 STATS table
 * is two datasets, its real fields and its counts (file_types.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/common.h"
#include "h5/file_types.h"
#include "h5/reader_state.h"

#define MAX_CHUNKS_PER_STEP 64 /* chunks across one step of a time series: the writer's have 1 or 5 */

int rd_h5_reader_summary = 1;

/* 1 if every component of path exists as a link, 0 if not, -1 on error. */
static int path_exists(hid_t file, const char *path)
{
    char buf[256];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, path, len + 1);
    for (size_t i = 0; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        htri_t ex = H5Lexists(file, buf, H5P_DEFAULT);
        buf[i] = c;
        if (ex <= 0)
            return ex < 0 ? -1 : 0;
    }
    return 1;
}

static const char *class_name(H5T_class_t cls)
{
    return cls == H5T_FLOAT ? "floats" : cls == H5T_INTEGER ? "integers" : "strings";
}

/* Opens a dataset and checks its type class, rank and fixed dims
 * (time_series: the first axis is the step axis, not checked). */
static resdiag_status open_checked(resdiag_reader *rd, const char *name, H5T_class_t cls,
                                   int time_series, int rank, const hsize_t *dims, hid_t *out)
{
    hid_t ds = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    hid_t dapl = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    *out = H5I_INVALID_HID;
    int ex = path_exists(rd->file, name);
    if (ex < 0)
        return rd_h5_fail_call(rd->path, name);
    if (ex == 0)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is missing", rd->path, name);
    if ((ds = H5Dopen2(rd->file, name, H5P_DEFAULT)) < 0) {
        st = rd_h5_fail_call(rd->path, name);
        goto cleanup;
    }
    int filtered = 0;
    if ((st = rd_reader_check_storage(rd, ds, name, &filtered)) != RESDIAG_OK)
        goto cleanup;
    if ((t = H5Dget_type(ds)) < 0 || (sp = H5Dget_space(ds)) < 0) {
        st = rd_h5_fail_call(rd->path, name);
        goto cleanup;
    }
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t cur[RD_MAX_RANK + 1];
    int want = rank + (time_series ? 1 : 0);
    int ok = H5Tget_class(t) == cls && H5Sget_simple_extent_type(sp) == H5S_SIMPLE && nd == want;
    if (ok && H5Sget_simple_extent_dims(sp, cur, NULL) < 0) {
        st = rd_h5_fail_call(rd->path, name);
        goto cleanup;
    }
    for (int i = 0; ok && i < rank; i++)
        ok = cur[i + (time_series ? 1 : 0)] == dims[i];
    if (!ok) {
        char shape[128] = "";
        size_t o = 0;
        for (int i = 0; i < rank && o < sizeof shape; i++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", i ? ", " : "",
                                  (unsigned long long)dims[i]);
        st = rd_h5_fail(RESDIAG_E_FORMAT,
                        "run file %s: dataset /%s does not have the type or shape the model "
                        "implies (%s of shape %s%s%s)", rd->path, name, class_name(cls),
                        time_series ? "steps" : "", time_series && rank ? ", " : "", shape);
        goto cleanup;
    }
    if (filtered && !time_series) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is filtered; resdiag "
                        "writes it without filters (h5repack -f NONE makes it plain)", rd->path,
                        name);
        goto cleanup;
    }
    if (time_series) {
        /* No chunk cache: HDF5 reads a selection of unfiltered chunks
         * straight from the file. A cache of two chunks per dataset kept
         * far more than that alive (measured on a 8000-step x 96-layer
         * file: report --html 175 MB peak with it, 17 MB without, in the
         * same time). Filtered chunks never go through HDF5's filters:
         * chunk_decode.c reads them, one step kept decoded. */
        if ((dapl = H5Pcreate(H5P_DATASET_ACCESS)) < 0
            || H5Pset_chunk_cache(dapl, 0, 0, 1.0) < 0) {
            st = rd_h5_fail_call(rd->path, name);
            goto cleanup;
        }
        H5Dclose(ds);
        if ((ds = H5Dopen2(rd->file, name, dapl)) < 0) {
            st = rd_h5_fail_call(rd->path, name);
            goto cleanup;
        }
    }
    if (filtered) { /* its decoder: in rd_reader_read_chunk_shapes, once the layers are checked */
        rd->decoded_ds[rd->n_decoded] = ds;
        rd->decoded_name[rd->n_decoded++] = name;
    }
    *out = ds;
    ds = H5I_INVALID_HID;
cleanup:
    if (dapl >= 0)
        H5Pclose(dapl);
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (ds >= 0)
        H5Dclose(ds);
    return st;
}

/* The per-step summary, where the file has one (files of resdiag 0.1.0 do
 * not) and it is not to be ignored. Its datasets count as time series:
 * the writer commits them with the tables. */
static resdiag_status open_summary(resdiag_reader *rd)
{
    const char *env = getenv("RESDIAG_IGNORE_SUMMARY");
    if (!rd_h5_reader_summary || (env && strcmp(env, "1") == 0))
        return RESDIAG_OK;
    int ex = path_exists(rd->file, RD_SUMMARY_GROUP);
    if (ex < 0)
        return rd_h5_fail_call(rd->path, RD_SUMMARY_GROUP);
    if (ex == 0)
        return RESDIAG_OK;
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        const rd_table *t = &rd->lay.summary[i];
        hsize_t dims[RD_MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        resdiag_status st = open_checked(rd, t->name, H5T_FLOAT, 1, t->rank, dims,
                                         &rd->summary_ds[i]);
        if (st != RESDIAG_OK)
            return st;
        series *se = &rd->series[rd->n_series++];
        se->name = t->name;
        se->ds = rd->summary_ds[i];
        se->counts_ds = H5I_INVALID_HID;
        se->ft = rd_summary_ftype(i, rd->root.info.schema_version);
        se->table = -1;
        se->rank = t->rank;
        memcpy(se->dims, dims, sizeof dims);
    }
    return RESDIAG_OK;
}

/* Table i's dataset(s) into series s, checked against the types of the
 * file's schema: in schema 2 a STATS table's real fields (any float) and
 * its counts (any integer), each table of integers any integer (read as
 * int64), of floats any float; in schema 1 every table of floats. */
static resdiag_status open_table(resdiag_reader *rd, int i, series *s)
{
    const rd_table *t = &rd->lay.tables[i];
    int schema = rd->root.info.schema_version;
    hsize_t dims[RD_MAX_RANK];
    memcpy(dims, s->dims, sizeof dims);
    s->ft = rd_table_ftype(i, t, schema);
    int split = schema >= 2 && t->kind == RD_KIND_STATS;
    if (split)
        dims[t->rank - 1] = RD_N_REAL_FIELDS;
    resdiag_status st = open_checked(rd, t->name, rd_ftype_is_int(s->ft) ? H5T_INTEGER : H5T_FLOAT,
                                     1, t->rank, dims, &rd->table_ds[i]);
    s->ds = rd->table_ds[i];
    if (st != RESDIAG_OK || !split)
        return st;
    dims[t->rank - 1] = RD_N_COUNT_FIELDS;
    st = open_checked(rd, t->counts_name, H5T_INTEGER, 1, t->rank, dims, &rd->counts_ds[i]);
    s->counts_ds = rd->counts_ds[i];
    return st;
}

resdiag_status rd_reader_open_datasets(resdiag_reader *rd)
{
    resdiag_status st;
    if ((st = open_checked(rd, RD_STEPS_NAME, H5T_INTEGER, 1, 0, NULL, &rd->steps_ds))
        != RESDIAG_OK
        || (st = open_checked(rd, RD_STEP_TIME_NAME, H5T_FLOAT, 1, 0, NULL, &rd->time_ds))
               != RESDIAG_OK)
        return st;
    rd->series[0] = (series){ .name = RD_STEPS_NAME, .ds = rd->steps_ds,
                              .counts_ds = H5I_INVALID_HID, .table = -1, .ft = RD_FT_COUNT };
    rd->series[1] = (series){ .name = RD_STEP_TIME_NAME, .ds = rd->time_ds,
                              .counts_ds = H5I_INVALID_HID, .table = -1, .ft = RD_FT_F64 };
    rd->n_series = 2;
    for (int i = 0; i < RD_N_TABLES; i++) {
        const rd_table *t = &rd->lay.tables[i];
        if (t->count == 0)
            continue;
        if (RD_TABLE_OPTIONAL(i)) { /* a file from before the table: it reads as NaN */
            int ex = path_exists(rd->file, t->name);
            if (ex < 0)
                return rd_h5_fail_call(rd->path, t->name);
            if (ex == 0)
                continue;
        }
        hsize_t dims[RD_MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        series *s = &rd->series[rd->n_series++];
        s->name = t->name;
        s->table = i;
        s->rank = t->rank;
        memcpy(s->dims, dims, sizeof dims);
        s->counts_ds = H5I_INVALID_HID;
        if ((st = open_table(rd, i, s)) != RESDIAG_OK)
            return st;
        if (t->kind != RD_KIND_STATS || !t->callsite_name)
            continue;
        if ((st = open_checked(rd, t->callsite_name, H5T_STRING, 0, t->rank - 1, dims,
                               &rd->callsite_ds[i])) != RESDIAG_OK)
            return st;
        hid_t ft = H5Dget_type(rd->callsite_ds[i]);
        if (ft < 0)
            return rd_h5_fail_call(rd->path, t->callsite_name);
        htri_t var = H5Tis_variable_str(ft);
        H5Tclose(ft);
        if (var != 0)
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is not fixed-length "
                              "strings",
                              rd->path, t->callsite_name);
        if ((st = rd_reader_check_callsites_stored(rd, rd->callsite_ds[i], t->callsite_name))
            != RESDIAG_OK)
            return st;
    }
    return open_summary(rd);
}

/* The chunk shape of time series dataset ds (all 0: not chunked), and no
 * more chunks across one step than MAX_CHUNKS_PER_STEP: asking which
 * chunks of a step are stored must cost little. */
static resdiag_status chunk_shape(const resdiag_reader *rd, hid_t ds, const char *name, int rank,
                                  hsize_t *chunk)
{
    hsize_t cur[RD_MAX_RANK + 1];
    hid_t dcpl = H5Dget_create_plist(ds), sp = H5Dget_space(ds);
    int nc = sp >= 0 ? H5Sget_simple_extent_dims(sp, cur, NULL) : -1;
    if (sp >= 0)
        H5Sclose(sp);
    if (dcpl < 0 || nc != rank + 1) {
        if (dcpl >= 0)
            H5Pclose(dcpl);
        return rd_h5_fail_call(rd->path, name);
    }
    int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
    int nd = chunked ? H5Pget_chunk(dcpl, rank + 1, chunk) : 0;
    H5Pclose(dcpl);
    if (!chunked) {
        memset(chunk, 0, (RD_MAX_RANK + 1) * sizeof *chunk);
        return RESDIAG_OK;
    }
    if (nd != rank + 1)
        return rd_h5_fail_call(rd->path, name);
    double per_step = 1;
    for (int k = 0; k < rank; k++)
        per_step *= chunk[k + 1] ? (double)((cur[k + 1] + chunk[k + 1] - 1) / chunk[k + 1])
                                 : INFINITY;
    if (chunk[0] == 0 || per_step > MAX_CHUNKS_PER_STEP)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is cut into %.0f chunks "
                          "across each step (resdiag reads at most %d)", rd->path, name,
                          per_step, MAX_CHUNKS_PER_STEP);
    return RESDIAG_OK;
}

/* Chunk shape of each time series (for rd_file_stored: the first
 * dataset's, which a STATS table's counts share when the writer made
 * them), each checked; a filtered one's must be the writer's
 * (chunk_decode.h), which its decoder checks. */
resdiag_status rd_reader_read_chunk_shapes(resdiag_reader *rd)
{
    for (int i = 0; i < rd->n_decoded; i++) {
        resdiag_status st = rd_chunk_steps_open(&rd->decoder[i], rd->decoded_ds[i], rd->path,
                                                rd->decoded_name[i]);
        if (st != RESDIAG_OK)
            return st;
    }
    for (int i = 0; i < rd->n_series; i++) {
        series *se = &rd->series[i];
        hsize_t other[RD_MAX_RANK + 1];
        resdiag_status st = chunk_shape(rd, se->ds, se->name, se->rank, se->chunk);
        if (st == RESDIAG_OK && se->counts_ds >= 0)
            st = chunk_shape(rd, se->counts_ds, rd->lay.tables[se->table].counts_name, se->rank,
                             other);
        if (st != RESDIAG_OK)
            return st;
    }
    return RESDIAG_OK;
}
