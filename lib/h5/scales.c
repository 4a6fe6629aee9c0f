/*
 * scales.c - the HDF5 dimension scales of a run file (scales.h): the 1-D
 * datasets /layer, /sublayer, /site, ... that name the indices of each
 * axis, and, on every dataset, each axis attached to its scale
 * (H5DSattach_scale: a DIMENSION_LIST attribute on the dataset, a
 * REFERENCE_LIST on the scale) and labelled (DIMENSION_LABELS). The first
 * axis of every time series is the record index; its scale is /steps, the
 * step number of each record.
 *
 * One-page headers. The writer moves the header of every growing dataset
 * (the time series, /steps among them) until it lies inside one 4 KiB page
 * (space.c), and a move is a copy: attaching before it would leave the
 * scales' references pointing at the deleted originals. Attaching after it
 * would grow the headers that were just placed. So each growing dataset
 * gets, before the move, a placeholder attribute as large as the scale
 * attributes it will get; attaching first deletes it, and the scale
 * attributes take its place in the header, which keeps its size and place.
 * tests/unit/test-h5.c measures it (one header chunk, inside one page).
 */
#include "h5/scales.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5_hl.h>

#include "format/format.h"
#include "h5/attributes.h"

/* Which scale and label each axis name (format/tables.c) gets. */
typedef struct axis_scale {
    const char *axis, *scale, *label;
} axis_scale;

static const axis_scale AXES[] = {
    { "step", RD_STEPS_NAME, RD_LABEL_STEP },
    { "layer", RD_SCALE_LAYER, "layer" },
    { "sublayer", RD_SCALE_SUBLAYER, "sublayer" },
    { "site", RD_SCALE_SITE, "site" },
    { "model_site", RD_SCALE_MODEL_SITE, "model_site" },
    { "param", RD_SCALE_PARAM, "param" },
    { "model_param", RD_SCALE_MODEL_PARAM, "model_param" },
    { "field", RD_SCALE_FIELD, "field" },
    /* the writer's names for the field axis of the two parts of a split
     * table: labelled "field", as their axes attribute calls it */
    { "stat_field", RD_SCALE_STAT_FIELD, "field" },
    { "count_field", RD_SCALE_COUNT_FIELD, "field" },
    { "update_field", RD_SCALE_UPDATE_FIELD, "update_field" },
    { "nonfinite_field", RD_SCALE_NONFINITE_FIELD, "nonfinite_field" },
    { "stats_table", RD_SCALE_STATS_TABLE, "stats_table" },
    { "sketch", RD_SCALE_SKETCH, "sketch" },
    { "metric", RD_SCALE_METRIC, "metric" },
    { "status", RD_SCALE_STATUS, "status" },
    { "reason_byte", RD_SCALE_REASON_BYTE, "reason_byte" },
};

static const axis_scale *axis_scale_of(const char *axis)
{
    for (size_t i = 0; i < sizeof AXES / sizeof AXES[0]; i++)
        if (strcmp(AXES[i].axis, axis) == 0)
            return &AXES[i];
    return NULL;
}

/* ------------------------------------------------------- the scale datasets */

/* A 1-D scale dataset `name` of n values of mtype (stored as ftype),
 * described like every dataset, and made a scale named after itself. */
static int create_scale(hid_t file, const char *name, hid_t ftype, hid_t mtype, size_t n,
                        const void *values, const char *description, const char *units,
                        rd_h5_error *e)
{
    hid_t sp = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    int ok = 0;
    hsize_t dim = (hsize_t)n;
    if ((sp = H5Screate_simple(1, &dim, NULL)) < 0)
        RD_H5_FAIL(e);
    if ((dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0)
        RD_H5_FAIL(e);
    RD_H5_CHECK(H5Pset_obj_track_times(dcpl, 0), e);
    if ((ds = H5Dcreate2(file, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        RD_H5_FAIL(e);
    RD_H5_CHECK(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), e);
    if (rd_attr_put_str(ds, RD_ATTR_DESCRIPTION, description, e) != RESDIAG_OK
        || rd_attr_put_str(ds, RD_ATTR_UNITS, units, e) != RESDIAG_OK
        || rd_attr_put_str(ds, RD_ATTR_AXES, name, e) != RESDIAG_OK)
        goto cleanup;
    RD_H5_CHECK(H5DSset_label(ds, 0, name), e);
    RD_H5_CHECK(H5DSset_scale(ds, name), e);
    ok = 1;
cleanup:
    if (ds >= 0)
        H5Dclose(ds);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (sp >= 0)
        H5Sclose(sp);
    return ok;
}

static int create_index_scale(hid_t file, const char *name, int n, const char *description,
                              rd_h5_error *e)
{
    int *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->captured = 1;
        return 0;
    }
    for (int i = 0; i < n; i++)
        v[i] = i;
    int ok = create_scale(file, name, H5T_STD_I32LE, H5T_NATIVE_INT, (size_t)n, v, description,
                          "1", e);
    free(v);
    return ok;
}

static int create_names_scale(hid_t file, const char *name, const char *const *names, int n,
                              const char *description, rd_h5_error *e)
{
    hid_t t = rd_h5_vlen_string_type();
    if (t < 0) {
        rd_h5_capture(e, errno);
        return 0;
    }
    int ok = create_scale(file, name, t, t, (size_t)n, names, description, "text", e);
    H5Tclose(t);
    return ok;
}

/* The labels of the fixed axes, from the same functions as the writer's
 * label attributes. */
static int create_fixed_name_scales(hid_t file, int n_block_sites, int split_fields,
                                    int with_summary, rd_h5_error *e, const char **object)
{
    const char *sites[RESDIAG_N_BLOCK_SITES], *msites[RESDIAG_N_MODEL_SITES];
    const char *fields[RESDIAG_N_FIELDS], *updates[RESDIAG_N_UPDATE_FIELDS];
    const char *reals[RD_N_REAL_FIELDS], *counts[RD_N_COUNT_FIELDS];
    const char *nonfinite[RD_SUM_NF_COLS], *observed[RD_SUM_OBS_COLS];
    for (int i = 0; i < RESDIAG_N_BLOCK_SITES; i++)
        sites[i] = resdiag_site_name((resdiag_site)i);
    for (int i = 0; i < RESDIAG_N_MODEL_SITES; i++)
        msites[i] = resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + i));
    for (int i = 0; i < RESDIAG_N_FIELDS; i++)
        fields[i] = resdiag_field_name((resdiag_field)i);
    for (int i = 0; i < RD_N_REAL_FIELDS; i++)
        reals[i] = resdiag_field_name((resdiag_field)rd_real_fields[i]);
    for (int i = 0; i < RD_N_COUNT_FIELDS; i++)
        counts[i] = resdiag_field_name((resdiag_field)rd_count_fields[i]);
    for (int i = 0; i < RESDIAG_N_UPDATE_FIELDS; i++)
        updates[i] = rd_update_label(i);
    for (int i = 0; i < RD_SUM_NF_COLS; i++)
        nonfinite[i] = rd_summary_nonfinite_label(i);
    for (int i = 0; i < RD_SUM_OBS_COLS; i++)
        observed[i] = rd_summary_observed_label(i);
    if (!(*object = RD_SCALE_SITE, create_names_scale(file, RD_SCALE_SITE, sites,
                                                      (size_t)n_block_sites,
                                                      "block site of each index", e))
        || !(*object = RD_SCALE_MODEL_SITE,
             create_names_scale(file, RD_SCALE_MODEL_SITE, msites, RESDIAG_N_MODEL_SITES,
                                "model site of each index", e))
        || !(*object = RD_SCALE_UPDATE_FIELD,
             create_names_scale(file, RD_SCALE_UPDATE_FIELD, updates, RESDIAG_N_UPDATE_FIELDS,
                                "update ratio of each index", e)))
        return 0;
    /* One field axis of 18 (schema 1), or the two parts' axes of 12 and 6. */
    if (split_fields) {
        if (!(*object = RD_SCALE_STAT_FIELD,
              create_names_scale(file, RD_SCALE_STAT_FIELD, reals, RD_N_REAL_FIELDS,
                                 "real-valued statistics field of each index of the *_stats "
                                 "datasets (units in their field_units)", e))
            || !(*object = RD_SCALE_COUNT_FIELD,
                 create_names_scale(file, RD_SCALE_COUNT_FIELD, counts, RD_N_COUNT_FIELDS,
                                    "integer statistics field of each index of the *_counts "
                                    "datasets", e)))
            return 0;
    } else if (!(*object = RD_SCALE_FIELD,
                 create_names_scale(file, RD_SCALE_FIELD, fields, RESDIAG_N_FIELDS,
                                    "statistics field of each index (units in field_units)", e)))
        return 0;
    if (!with_summary)
        return 1;
    return (*object = RD_SCALE_NONFINITE_FIELD,
            create_names_scale(file, RD_SCALE_NONFINITE_FIELD, nonfinite, RD_SUM_NF_COLS,
                               "count of each index of /summary/nonfinite", e))
           && (*object = RD_SCALE_STATS_TABLE,
               create_names_scale(file, RD_SCALE_STATS_TABLE, observed, RD_SUM_OBS_COLS,
                                  "statistics table of each index of /summary/observed", e));
}

/* The axes of /step_status/aborted and abort_reason. */
static int create_step_status_scales(hid_t file, rd_h5_error *e, const char **object)
{
    static const char *const status[1] = { "aborted" };
    return (*object = RD_SCALE_STATUS,
            create_names_scale(file, RD_SCALE_STATUS, status, 1,
                               "the one column of /step_status/aborted", e))
           && (*object = RD_SCALE_REASON_BYTE,
               create_index_scale(file, RD_SCALE_REASON_BYTE, RESDIAG_MAX_ABORT_REASON,
                                  "byte of each index of /step_status/abort_reason", e));
}

int rd_scales_create(hid_t file, const resdiag_model *m, int sketch_size, int n_block_sites,
                     int split_fields, int with_summary, rd_h5_error *e, const char **object)
{
    *object = RD_SCALE_LAYER;
    if (!create_index_scale(file, RD_SCALE_LAYER, m->n_layers,
                            "layer index of the file, 0 = the first block; the report's "
                            "depth k is layer + 1 (k = 0 is the embedding, model site "
                            "embed_out)",
                            e))
        return 0;
    *object = RD_SCALE_SUBLAYER;
    if (!create_names_scale(file, RD_SCALE_SUBLAYER, m->sublayer_names, m->n_sublayers,
                            "sublayer of each index, in block order", e))
        return 0;
    *object = RD_SCALE_PARAM;
    if (m->n_layer_params > 0
        && !create_names_scale(file, RD_SCALE_PARAM, m->layer_param_names, m->n_layer_params,
                               "per-layer parameter of each index", e))
        return 0;
    *object = RD_SCALE_MODEL_PARAM;
    if (m->n_model_params > 0
        && !create_names_scale(file, RD_SCALE_MODEL_PARAM, m->model_param_names,
                               m->n_model_params, "model-level parameter of each index", e))
        return 0;
    *object = RD_SCALE_SKETCH;
    if (sketch_size > 0
        && !create_index_scale(file, RD_SCALE_SKETCH, sketch_size,
                               "sketch bucket of each index (doc/FORMAT.md, The sketch)", e))
        return 0;
    *object = RD_SCALE_METRIC;
    if (m->n_metrics > 0
        && !create_names_scale(file, RD_SCALE_METRIC, m->metric_names, m->n_metrics,
                               "trainer's metric of each index of /metrics/values", e))
        return 0;
    return create_fixed_name_scales(file, n_block_sites, split_fields, with_summary, e, object)
           && create_step_status_scales(file, e, object);
}

/* ------------------------------------------------------- room in a header */

/* Bytes of placeholder data that cover what the scale attributes of a
 * dataset need in its header: DIMENSION_LIST and DIMENSION_LABELS (a
 * 16-byte variable-length entry per axis, their names, types and
 * dataspaces); for /steps CLASS, NAME, its label and a REFERENCE_LIST of
 * 16 bytes per dataset. H5DSattach_scale rewrites REFERENCE_LIST one
 * entry larger at each attach, so /steps keeps room for twice as many.
 * Measured (tinygpt, 24 layers): /steps stays one header chunk of 1462
 * bytes with 512 of them free; test-h5 checks every growing header. */
static size_t room_bytes(int rank, int n_refs)
{
    if (n_refs > 0)
        return 320 + 32 * (size_t)n_refs;
    return 96 + 56 * (size_t)rank;
}

int rd_scales_make_room(hid_t ds, int rank, int n_refs, rd_h5_error *e)
{
    size_t n = room_bytes(rank, n_refs);
    hsize_t dim = (hsize_t)n;
    hid_t sp = H5I_INVALID_HID, a = H5I_INVALID_HID;
    unsigned char *zeros = calloc(n, 1);
    int ok = 0;
    if (!zeros) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->captured = 1;
        return 0;
    }
    if ((sp = H5Screate_simple(1, &dim, NULL)) < 0)
        RD_H5_FAIL(e);
    if ((a = H5Acreate2(ds, RD_ATTR_SCALE_ROOM, H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        RD_H5_FAIL(e);
    RD_H5_CHECK(H5Awrite(a, H5T_NATIVE_UCHAR, zeros), e);
    ok = 1;
cleanup:
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    free(zeros);
    return ok;
}

static int give_up_room(hid_t ds, rd_h5_error *e)
{
    htri_t has = H5Aexists(ds, RD_ATTR_SCALE_ROOM);
    if (has < 0 || (has > 0 && H5Adelete(ds, RD_ATTR_SCALE_ROOM) < 0)) {
        rd_h5_capture(e, errno);
        return 0;
    }
    return 1;
}

/* ----------------------------------------------------------- attaching */

int rd_scales_set_record_scale(hid_t steps, rd_h5_error *e)
{
    if (!give_up_room(steps, e))
        return 0;
    RD_H5_CHECK(H5DSset_scale(steps, RD_STEPS_NAME), e);
    RD_H5_CHECK(H5DSset_label(steps, 0, RD_LABEL_STEP), e);
    return 1;
cleanup:
    return 0;
}

int rd_scales_attach(hid_t file, hid_t ds, const char *axes, rd_h5_error *e)
{
    if (!give_up_room(ds, e))
        return 0;
    unsigned idx = 0;
    for (const char *p = axes; *p; idx++) {
        char axis[32];
        size_t n = strcspn(p, ",");
        const axis_scale *as = NULL;
        if (n < sizeof axis) {
            memcpy(axis, p, n);
            axis[n] = '\0';
            as = axis_scale_of(axis);
        }
        if (as) {
            hid_t scale = H5Dopen2(file, as->scale, H5P_DEFAULT);
            if (scale < 0) {
                rd_h5_capture(e, errno);
                return 0;
            }
            herr_t r = H5DSattach_scale(ds, scale, idx);
            H5Dclose(scale);
            if (r < 0 || H5DSset_label(ds, idx, as->label) < 0) {
                rd_h5_capture(e, errno);
                return 0;
            }
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 1;
}
