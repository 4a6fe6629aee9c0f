/*
 * reader_root.c - the root attributes and /meta of a run file (reader_root.h,
 * doc/FORMAT.md), checked before anything else of the file is opened: the
 * sizes the tables follow from are bounded, every list has the length the
 * file's own sizes imply, every enum is a known value, and each declared
 * role names one of the file's parameters.
 */
#include "h5/reader_root.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "format/format.h"
#include "format/tables.h"
#include "h5/attributes.h"
#include "h5/common.h"

#define MAX_LAYERS 1000000
#define MAX_META 256 /* attributes of /meta, as the writer allows (record/validate.c) */

static const char ROOT[] = "the root group";

/* Names: n of them, each 1..RESDIAG_MAX_NAME-1 bytes, all different. */
static resdiag_status check_names(const char *path, const char *name, char **v, size_t n,
                                  size_t expect)
{
    if (n != expect)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' has %zu names, "
                          "expected %zu", path, name, n, expect);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (l == 0 || l >= RESDIAG_MAX_NAME)
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s': name %zu is %s",
                              path, name, i, l ? "too long" : "empty");
        for (size_t j = 0; j < i; j++)
            if (strcmp(v[i], v[j]) == 0) {
                char nb[128];
                return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s': '%s' appears "
                                  "twice", path, name, rd_h5_msg_name(v[i], nb, sizeof nb));
            }
    }
    return RESDIAG_OK;
}

static const char *block_name_i(int i) { return rd_h5_block_name((resdiag_block_kind)i); }
static const char *placement_name_i(int i)
{
    return RD_PLACEMENT_DECLARABLE(i) ? resdiag_placement_name((resdiag_placement)i) : NULL;
}
static const char *norm_name_i(int i) { return resdiag_norm_kind_name((resdiag_norm_kind)i); }
static const char *run_kind_name_i(int i) { return resdiag_run_kind_name((resdiag_run_kind)i); }

/* ---------------------------------------------------------------- /meta */

typedef struct meta_ctx {
    rd_root *r;
    const char *path;
    resdiag_status st;
    size_t cap;
} meta_ctx;

static herr_t meta_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    meta_ctx *c = data;
    rd_root *r = c->r;
    char *val = NULL;
    c->st = rd_attr_get_str(c->path, loc, "/" RD_META_GROUP, name, &val);
    if (c->st != RESDIAG_OK)
        return -1;
    if (r->n_meta_strings + 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        char **nm = realloc(r->meta, ncap * sizeof *nm);
        if (!nm) {
            free(val);
            c->st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", c->path);
            return -1;
        }
        r->meta = nm;
        c->cap = ncap;
    }
    char *key = strdup(name);
    if (!key) {
        free(val);
        c->st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", c->path);
        return -1;
    }
    r->meta[r->n_meta_strings++] = key;
    r->meta[r->n_meta_strings++] = val;
    return 0;
}

static resdiag_status read_meta(rd_root *r, hid_t file, const char *path)
{
    hid_t g = H5I_INVALID_HID, gcpl = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    htri_t ex = H5Lexists(file, RD_META_GROUP, H5P_DEFAULT);
    if (ex < 0)
        return rd_h5_fail_call(path, "/" RD_META_GROUP);
    if (ex == 0)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: no /" RD_META_GROUP " group", path);
    if ((g = H5Gopen2(file, RD_META_GROUP, H5P_DEFAULT)) < 0) {
        st = rd_h5_fail_call(path, "/" RD_META_GROUP);
        goto cleanup;
    }
    unsigned crt = 0;
    if ((gcpl = H5Gget_create_plist(g)) < 0 || H5Pget_attr_creation_order(gcpl, &crt) < 0) {
        st = rd_h5_fail_call(path, "/" RD_META_GROUP);
        goto cleanup;
    }
    H5O_info_t oi;
    if (H5Oget_info2(g, &oi, H5O_INFO_NUM_ATTRS) < 0) {
        st = rd_h5_fail_call(path, "/" RD_META_GROUP);
        goto cleanup;
    }
    if (oi.num_attrs > MAX_META) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: /" RD_META_GROUP " has %llu attributes "
                        "(at most %d)", path, (unsigned long long)oi.num_attrs, MAX_META);
        goto cleanup;
    }
    meta_ctx c = { r, path, RESDIAG_OK, 0 };
    H5_index_t idx = (crt & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    if (H5Aiterate2(g, idx, H5_ITER_INC, NULL, meta_cb, &c) < 0)
        st = c.st != RESDIAG_OK ? c.st : rd_h5_fail_call(path, "/" RD_META_GROUP);
cleanup:
    if (gcpl >= 0)
        H5Pclose(gcpl);
    if (g >= 0)
        H5Gclose(g);
    return st;
}

/* ----------------------------------------------------------------- root */

/* The schema version, the sizes and the enums. */
static resdiag_status read_shape(resdiag_run_info *in, hid_t f, const char *P)
{
    resdiag_status st;
    long long v;
    htri_t ex = H5Aexists(f, RD_ATTR_SCHEMA_VERSION);
    if (ex < 0)
        return rd_h5_fail_call(P, "reading the root attributes");
    if (ex == 0)
        return rd_h5_fail(RESDIAG_E_FORMAT, "not a resdiag run file (no " RD_ATTR_SCHEMA_VERSION
                          "): %s", P);
    if ((st = rd_attr_get_int(P, f, ROOT, RD_ATTR_SCHEMA_VERSION, LLONG_MIN, LLONG_MAX, &v))
        != RESDIAG_OK)
        return st;
    if (v > RD_SCHEMA_VERSION)
        return rd_h5_fail(RESDIAG_E_VERSION,
                          "run file %s has schema version %lld; this resdiag (%s) reads up to %d",
                          P, v, RESDIAG_VERSION_STRING, RD_SCHEMA_VERSION);
    if (v < 1)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: " RD_ATTR_SCHEMA_VERSION " %lld is "
                          "not valid", P, v);
    in->schema_version = (int)v;

#define INT_ATTR(name, lo, hi, dst)                                                   \
    do {                                                                              \
        if ((st = rd_attr_get_int(P, f, ROOT, name, lo, hi, &v)) != RESDIAG_OK)       \
            return st;                                                                \
        dst = (int)v;                                                                 \
    } while (0)
    INT_ATTR(RD_ATTR_N_LAYERS, 1, MAX_LAYERS, in->n_layers);
    INT_ATTR(RD_ATTR_D_MODEL, 1, INT_MAX, in->d_model);
    INT_ATTR(RD_ATTR_N_SUBLAYERS, 1, RESDIAG_MAX_SUBLAYERS, in->n_sublayers);
    INT_ATTR(RD_ATTR_DECLARED_MIX_LAYERS, 0, in->n_layers, in->declared_mix_layers);
    INT_ATTR(RD_ATTR_SHARD_COLS, 0, INT_MAX, in->shard_cols);
    INT_ATTR(RD_ATTR_SKETCH_SIZE, 0, RESDIAG_MAX_SKETCH, in->sketch_size);
#undef INT_ATTR
    if ((st = rd_attr_get_u64(P, f, ROOT, RD_ATTR_SKETCH_SEED, &in->sketch_seed)) != RESDIAG_OK)
        return st;

    int e = 0;
    if ((st = rd_attr_get_enum(P, f, RD_ATTR_BLOCK, block_name_i, 2, &e)) != RESDIAG_OK)
        return st;
    in->block = (resdiag_block_kind)e;
    if ((st = rd_attr_get_enum(P, f, RD_ATTR_DECLARED_PLACEMENT, placement_name_i,
                               RD_PLACEMENT_END, &e)) != RESDIAG_OK)
        return st;
    in->declared_placement = (resdiag_placement)e;
    if ((st = rd_attr_get_enum(P, f, RD_ATTR_NORM_KIND, norm_name_i, RESDIAG_NORM_RMSNORM + 1,
                               &e)) != RESDIAG_OK)
        return st;
    in->norm_kind = (resdiag_norm_kind)e;
    /* run_kind came later (additive): a file without it is a training run. */
    in->run_kind = RESDIAG_RUN_TRAINING;
    htri_t has_kind = H5Aexists(f, RD_ATTR_RUN_KIND);
    if (has_kind < 0)
        return rd_h5_fail_call(P, "reading the root attributes");
    if (has_kind > 0) {
        if ((st = rd_attr_get_enum(P, f, RD_ATTR_RUN_KIND, run_kind_name_i,
                                   RESDIAG_RUN_INFERENCE + 1, &e)) != RESDIAG_OK)
            return st;
        in->run_kind = (resdiag_run_kind)e;
    }
    return RESDIAG_OK;
}

/* A list of parameter names: at most RESDIAG_MAX_PARAMS, each a name. */
static resdiag_status read_params(hid_t f, const char *P, const char *attr, const char *what,
                                  char ***names, size_t *n)
{
    resdiag_status st = rd_attr_get_strs(P, f, ROOT, attr, 0, names, n);
    if (st != RESDIAG_OK)
        return st;
    if (*n > RESDIAG_MAX_PARAMS)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %zu %s parameters (at most %d)", P, *n,
                          what, RESDIAG_MAX_PARAMS);
    return check_names(P, attr, *names, *n, *n);
}

/* The trainer's metric names: an optional attribute (files written before
 * metrics, or by a trainer that declared none, have no metrics). */
static resdiag_status read_metric_names(rd_root *r, hid_t f, const char *P)
{
    int has = 0;
    resdiag_status st = rd_attr_has(P, f, RD_ATTR_METRIC_NAMES, &has);
    if (st != RESDIAG_OK || !has)
        return st;
    if ((st = rd_attr_get_strs(P, f, ROOT, RD_ATTR_METRIC_NAMES, 0, &r->metric_names,
                               &r->n_metric_names)) != RESDIAG_OK)
        return st;
    if (r->n_metric_names > RESDIAG_MAX_METRICS)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %zu metrics (at most %d)", P,
                          r->n_metric_names, RESDIAG_MAX_METRICS);
    if ((st = check_names(P, RD_ATTR_METRIC_NAMES, r->metric_names, r->n_metric_names,
                          r->n_metric_names)) != RESDIAG_OK)
        return st;
    r->info.n_metrics = (int)r->n_metric_names;
    r->info.metric_names = r->n_metric_names ? (const char *const *)r->metric_names : NULL;
    return RESDIAG_OK;
}

/* The names of the sublayers and parameters, and the labels of the fixed
 * axes (their number is part of the file's tables). */
static resdiag_status read_names(rd_root *r, hid_t f, const char *P)
{
    resdiag_run_info *in = &r->info;
    resdiag_status st;
    if ((st = rd_attr_get_strs(P, f, ROOT, RD_ATTR_SUBLAYER_NAMES, 0, &r->sublayer_names,
                               &r->n_sublayer_names)) != RESDIAG_OK
        || (st = check_names(P, RD_ATTR_SUBLAYER_NAMES, r->sublayer_names, r->n_sublayer_names,
                             (size_t)in->n_sublayers)) != RESDIAG_OK
        || (st = read_params(f, P, RD_ATTR_LAYER_PARAM_NAMES, "layer", &r->layer_params,
                             &r->n_layer_params)) != RESDIAG_OK
        || (st = read_params(f, P, RD_ATTR_MODEL_PARAM_NAMES, "model", &r->model_params,
                             &r->n_model_params)) != RESDIAG_OK)
        return st;
    in->n_layer_params = (int)r->n_layer_params;
    in->n_model_params = (int)r->n_model_params;

    const struct { const char *name; size_t n; } labels[] = {
        { RD_ATTR_SITE_NAMES, (size_t)rd_block_sites(in->schema_version) },
        { RD_ATTR_MODEL_SITE_NAMES, RESDIAG_N_MODEL_SITES },
        { RD_ATTR_FIELD_NAMES, RESDIAG_N_FIELDS },
        { RD_ATTR_FIELD_UNITS, RESDIAG_N_FIELDS },
    };
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        char **names = NULL;
        size_t n = 0;
        if ((st = rd_attr_get_strs(P, f, ROOT, labels[i].name, 0, &names, &n)) != RESDIAG_OK)
            return st;
        rd_attr_free_strs(names, n);
        if (n != labels[i].n)
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' has %zu entries, "
                              "expected %zu", P, labels[i].name, n, labels[i].n);
    }
    return RESDIAG_OK;
}

static resdiag_status read_provenance(rd_root *r, hid_t f, const char *P)
{
    resdiag_status st;
    if ((st = rd_attr_get_str(P, f, ROOT, RD_ATTR_RESDIAG_VERSION, &r->resdiag_version))
            != RESDIAG_OK
        || (st = rd_attr_get_str(P, f, ROOT, RD_ATTR_DESCRIPTION, &r->description)) != RESDIAG_OK
        || (st = rd_attr_get_str(P, f, ROOT, RD_ATTR_CREATED_UTC, &r->created_utc)) != RESDIAG_OK
        || (st = rd_attr_get_str(P, f, ROOT, RD_ATTR_PROGRAM, &r->program)) != RESDIAG_OK
        || (st = rd_attr_get_str(P, f, ROOT, RD_ATTR_HDF5_VERSION, &r->hdf5_version))
               != RESDIAG_OK)
        return st;
    /* The host is provenance the API does not expose; check only its type. */
    char *host = NULL;
    if ((st = rd_attr_get_str(P, f, ROOT, RD_ATTR_HOST, &host)) != RESDIAG_OK)
        return st;
    free(host);
    return RESDIAG_OK;
}

/* The parameter that role attribute `attr` names, as one of names[0..n-1]
 * (so that it lives as long as the reader); NULL when the file has no such
 * attribute and no parameter called `conventional`. An attribute that is
 * not valid UTF-8 or names none of the parameters is a damaged file. */
static resdiag_status read_role(hid_t f, const char *P, const char *attr, char **names,
                                size_t n, const char *conventional, const char **out)
{
    int has = 0;
    char *name = NULL;
    resdiag_status st = rd_attr_has(P, f, attr, &has);
    *out = NULL;
    if (st != RESDIAG_OK)
        return st;
    /* Files written before roles existed: the names of the example. */
    const char *want = conventional;
    if (has) {
        if ((st = rd_attr_get_str(P, f, ROOT, attr, &name)) != RESDIAG_OK)
            return st;
        if (rd_utf8_check(name, 0, NULL) != RD_TEXT_OK) {
            free(name);
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' is not UTF-8 text",
                              P, attr);
        }
        want = name;
    }
    for (size_t i = 0; i < n && !*out; i++)
        if (strcmp(names[i], want) == 0)
            *out = names[i];
    if (has && !*out) {
        char nb[128];
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' is \"%s\", not one of "
                        "the file's parameters", P, attr, rd_h5_msg_name(name, nb, sizeof nb));
    }
    free(name);
    return st;
}

/* ---------------------------------------------------------------- ranks */

static const char *split_name_i(int i) { return rd_split_name(i); }

/* An optional integer attribute in [lo, hi], def when absent. */
static resdiag_status opt_int(hid_t f, const char *P, const char *name, long long lo,
                              long long hi, int def, int *out)
{
    int has = 0;
    long long v = def;
    resdiag_status st = rd_attr_has(P, f, name, &has);
    if (st == RESDIAG_OK && has)
        st = rd_attr_get_int(P, f, ROOT, name, lo, hi, &v);
    if (st == RESDIAG_OK)
        *out = (int)v;
    return st;
}

/* An optional UTF-8 string of at most max_len bytes, def when absent. */
static resdiag_status opt_str(hid_t f, const char *P, const char *name, size_t max_len,
                              const char *def, char **out)
{
    int has = 0;
    resdiag_status st = rd_attr_has(P, f, name, &has);
    if (st != RESDIAG_OK)
        return st;
    if (!has)
        *out = strdup(def);
    else if ((st = rd_attr_get_str(P, f, ROOT, name, out)) != RESDIAG_OK)
        return st;
    if (!*out)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", P);
    if (strlen(*out) > max_len || rd_utf8_check(*out, 0, NULL) != RD_TEXT_OK)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' is not UTF-8 text of "
                          "at most %zu bytes", P, name, max_len);
    return RESDIAG_OK;
}

/* The rank attributes (doc/RANKS.md), each optional: a file without them
 * is rank 0 of a job of one. world_size first, since it bounds the rest. */
static resdiag_status read_ranks(rd_root *r, hid_t f, const char *P)
{
    resdiag_run_info *in = &r->info;
    resdiag_status st;
    int split = 0;
    if ((st = opt_int(f, P, RD_ATTR_WORLD_SIZE, 1, RD_MAX_WORLD_SIZE, 1, &in->world_size))
            != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_RANK, 0, in->world_size - 1, 0, &in->rank)) != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_LOCAL_RANK, -1, in->world_size - 1, -1, &in->local_rank))
               != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_SHARD_COL_OFFSET, 0, in->d_model - 1, 0,
                         &in->shard_col_offset)) != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_LAYER_FIRST, 0, in->n_layers - 1, 0, &in->layer_first))
               != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_LAYER_COUNT, 0, in->n_layers - in->layer_first, 0,
                         &in->layer_count)) != RESDIAG_OK
        || (st = opt_int(f, P, RD_ATTR_RECORD_RANK_EVERY, 1, INT_MAX, 1,
                         &in->record_rank_every)) != RESDIAG_OK
        || (st = opt_str(f, P, RD_ATTR_RANK_SOURCE, 64, "single", &r->rank_source)) != RESDIAG_OK
        || (st = opt_str(f, P, RD_ATTR_JOB_ID, 255, "", &r->job_id)) != RESDIAG_OK)
        return st;
    int has = 0;
    if ((st = rd_attr_has(P, f, RD_ATTR_SPLIT, &has)) != RESDIAG_OK
        || (has && (st = rd_attr_get_enum(P, f, RD_ATTR_SPLIT, split_name_i,
                                             RESDIAG_SPLIT_PIPELINE + 1, &split))
                       != RESDIAG_OK))
        return st;
    in->split = (resdiag_split)split;
    if (in->split == RESDIAG_SPLIT_TENSOR && in->shard_cols > 0
        && in->shard_col_offset > in->d_model - in->shard_cols)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: the shard's columns %d..%d lie outside "
                          "d_model %d", P, in->shard_col_offset,
                          in->shard_col_offset + in->shard_cols - 1, in->d_model);
    in->rank_source = r->rank_source;
    in->job_id = r->job_id;
    in->n_ranks_merged = 1;
    return RESDIAG_OK;
}

resdiag_status rd_root_read(rd_root *r, hid_t file, const char *path)
{
    resdiag_run_info *in = &r->info;
    resdiag_status st;
    if ((st = read_shape(in, file, path)) != RESDIAG_OK
        || (st = read_names(r, file, path)) != RESDIAG_OK
        || (st = read_provenance(r, file, path)) != RESDIAG_OK
        || (st = read_meta(r, file, path)) != RESDIAG_OK
        || (st = read_role(file, path, RD_ATTR_HEAD_PARAM, r->model_params, r->n_model_params,
                           "head.w", &in->head_param)) != RESDIAG_OK
        || (st = read_role(file, path, RD_ATTR_RESIDUAL_PARAM, r->layer_params,
                           r->n_layer_params, "mlp.w2", &in->residual_param)) != RESDIAG_OK
        || (st = read_metric_names(r, file, path)) != RESDIAG_OK
        || (st = read_ranks(r, file, path)) != RESDIAG_OK)
        return st;
    in->resdiag_version = r->resdiag_version;
    in->sublayer_names = (const char *const *)r->sublayer_names;
    in->layer_param_names = (const char *const *)r->layer_params;
    in->model_param_names = (const char *const *)r->model_params;
    in->n_meta = (int)(r->n_meta_strings / 2);
    in->meta = (const char *const *)r->meta;
    in->description = r->description;
    in->created_utc = r->created_utc;
    in->program = r->program;
    in->hdf5_version = r->hdf5_version;
    return RESDIAG_OK;
}

void rd_root_free(rd_root *r)
{
    free(r->resdiag_version);
    free(r->description);
    free(r->created_utc);
    free(r->program);
    free(r->hdf5_version);
    rd_attr_free_strs(r->sublayer_names, r->n_sublayer_names);
    rd_attr_free_strs(r->layer_params, r->n_layer_params);
    rd_attr_free_strs(r->model_params, r->n_model_params);
    rd_attr_free_strs(r->meta, r->n_meta_strings);
    rd_attr_free_strs(r->metric_names, r->n_metric_names);
    free(r->rank_source);
    free(r->job_id);
    memset(r, 0, sizeof *r);
}
