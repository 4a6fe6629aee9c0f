/*
 * writer.c - creates a run file (doc/FORMAT.md), then appends batches of
 * step records to it under HDF5 SWMR, so that readers can follow the run and
 * a killed trainer leaves every flushed step readable.
 *
 * Commit order. Each append is committed in two flushes: first every table,
 * the summary, step_time and the call sites are extended, written and
 * flushed; only then is /steps extended, written and flushed. A reader
 * trusts a step only once its step number is on disk (and never reads past
 * the shortest first axis), so a step is either wholly there or not at all,
 * whenever the writer dies.
 *
 * Disk full. HDF5 1.10 does not survive a failed write: a file whose cache
 * cannot be flushed cannot be closed, the failed H5Fclose leaves a dangling
 * identifier, and the library then crashes the process at exit (in
 * H5_term_library), whether or not H5Fclose was called. So HDF5 must never
 * see a full disk:
 *   1. Before each write phase the writer reserves, with fallocate(2), more
 *      file space past HDF5's end of file than the phase can allocate (new
 *      chunks plus a margin for metadata). If the reservation fails with
 *      ENOSPC / EFBIG / EDQUOT the append returns RESDIAG_E_NOSPACE before
 *      HDF5 writes anything: the file stays consistent and closes cleanly
 *      with every step appended before.
 *   2. The file size limit (RLIMIT_FSIZE) is treated as the end of the
 *      disk, with or without fallocate: before each phase (and before the
 *      file is created) the writer checks that the same estimate stays
 *      within it, and fails the same way if not. A write, fallocate or
 *      ftruncate past the limit would raise SIGXFSZ, which kills the
 *      trainer, and the library leaves signal dispositions alone.
 *   3. Where fallocate is not supported (or the estimate was short) and an
 *      HDF5 write fails anyway, the writer "detaches" at once: it points
 *      HDF5's file descriptor at /dev/null (dup2), so that everything HDF5
 *      still writes, at close or at exit, is discarded and succeeds, and
 *      flushes once there, which HDF5's cache needs after a failed
 *      metadata write before it can close the file (see detach()). The run
 *      file stays as the failed flush left it, still marked as being written
 *      for SWMR, which is how a reader opens it (like a killed writer's).
 * Either way the writer then returns the first error to every later call.
 *
 * Torn writes. Linux copies a write() into the page cache one 4 KiB page at
 * a time and checks for a fatal signal between pages, so a SIGKILL can
 * leave a metadata block that spans a page boundary half new, half old:
 * its checksum then fails and the dataset cannot be read. Where space is
 * reserved (above), the file therefore uses HDF5's paged aggregation with
 * 4 KiB pages, which keeps every metadata block smaller than a page inside
 * one page; the tables index their chunks with a v2 B-tree (two unlimited
 * axes; its nodes are 2 KiB), not an extensible array, whose data blocks
 * outgrow a page in long runs; and the call-site datasets are allocated
 * when created, so that writing them changes no metadata. Without
 * reservation the file keeps the default layout (paged aggregation cannot
 * close after a failed write) and every growing dataset's header is moved
 * inside one page instead (keep_header_in_one_page). tests/test-kill.c
 * checks that no metadata write crosses a page, and tears a sample of the
 * page-crossing writes and reads each file back.
 *
 * Deflated tables (schema 2, compression >= 1) have one step per chunk, so
 * that an append only ever writes new chunks: a deflated chunk rewritten
 * with one more step would be other bytes, which a kill could tear, or
 * would move, and its old place could be reused before the index says so
 * (doc/FORMAT.md, "Schema 2"). Their reservation counts each new chunk at
 * its uncompressed size plus deflate's worst growth (chunk_bound). Only
 * tables of at least RD_FILTER_MIN_STEP_BYTES a step are deflated: the
 * others, where a chunk per step costs more in index than deflate saves,
 * are plain, in chunks of about 32 KiB (part_level).
 *
 * Schema 2 stores each value at its type (file_types.h): a table is one
 * dataset, or two for a STATS table (its real fields, then its counts:
 * table_part); the writer converts every value itself (pack_rows).
 *
 * The reservation, the size limit, detaching and the header moves are in
 * space.c; the typed attribute writers in attributes.c.
 */
#include "h5/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/utf8.h"
#include "format/metric_value.h"
#include "h5/attributes.h"
#include "h5/common.h"
#include "h5/file_fd.h"
#include "h5/file_types.h"
#include "h5/run_file_guard.h"
#include "h5/scales.h"
#include "h5/space.h"

/* Steps per chunk of the 1-D series /steps and /step_time: they are tiny,
 * so a chunk of record_chunk_steps would make a needlessly long index. */
#define SERIES_CHUNK_MIN 256
/* Bound on the bytes of one table chunk (see table_chunk_steps). */
#define TABLE_CHUNK_BYTES ((size_t)1 << 20)
/* About the bytes of one chunk of a plain table in a file with filters
 * (see plain_chunk_steps). */
#define PLAIN_CHUNK_BYTES ((size_t)32 << 10)
/* Bound on the chunk cache asked for per dataset. */
#define CHUNK_CACHE_MAX ((size_t)64 << 20)
/* Space reserved for the metadata that one write phase may allocate (index
 * blocks, aggregator blocks): a base plus a share per dataset. Measured:
 * at most ~1.2 KiB per dataset and phase (23 KiB for 19 datasets, over
 * chunk sizes 1..64 and batches 1..70); the margin covers the larger
 * index blocks of long runs. */
#define RESERVE_BASE ((off_t)64 << 10)
#define RESERVE_PER_DATASET ((off_t)24 << 10)
/* What creating the objects may write. */
#define RESERVE_CREATE ((off_t)1 << 20)
int rd_h5_writer_summary = 1;
void (*rd_h5_writer_before_create)(const char *path) = NULL;

/* One dataset of a table. A table has one, except a STATS table in schema
 * 2, which has two: its real-valued fields (float32), then its integer
 * fields (int64, in its counts_name dataset). */
typedef struct table_part {
    hid_t ds;            /* (step, dims..., width), or invalid: none */
    const char *name;
    rd_ftype ft;
    const int *map;      /* the values of a slot it stores; NULL: all, in order */
    int width;           /* the last axis */
    rd_chunk_info chunk;
    int level;           /* its deflate level: 0 = no filters (part_level) */
} table_part;
#define MAX_PARTS 2

struct rd_writer {
    hid_t file;
    hid_t steps_ds;                    /* (step) int64 */
    hid_t time_ds;                     /* (step) float64 */
    table_part part[RD_N_TABLES][MAX_PARTS]; /* part[i][0].ds invalid if count == 0 */
    int schema;                        /* 1 or 2 (doc/FORMAT.md) */
    int level;                         /* schema 2: deflate level of the tables, 0 = none */
    hid_t callsite_ds[RD_N_TABLES];    /* (dims without the last) strings, STATS tables */
    hid_t callsite_type;               /* fixed RD_CALLSITE_LEN string (memory) */
    rd_tables lay;
    hsize_t n_written;                 /* steps committed */
    char *callsite_buf;                /* (n_slots, RD_CALLSITE_LEN) */
    void *pack;                        /* one table's columns of a batch, packed */
    size_t pack_cap;                   /* bytes */
    char *path;
    resdiag_status failed;             /* sticky: the first error of an append */
    char failed_msg[1024];

    rd_space space;                    /* HDF5's descriptor, reservation, paging */
    rd_chunk_info series_chunk;           /* /steps and /step_time */
    hid_t summary_ds[RD_N_SUMMARY];    /* (step, dims...), or invalid: no /summary */
    rd_ftype summary_ft[RD_N_SUMMARY];
    rd_chunk_info summary_chunk[RD_N_SUMMARY];
    double *summary_buf;               /* (n, lay.summary_len) of a batch */
    size_t summary_cap;                /* steps */
    off_t callsite_bytes;              /* what the call-site datasets allocate */
    int n_datasets;
    int lock_fd;                       /* the claimed file, holding the writers' lock
                                          (run_file_guard.h) until the run is closed */
};

/* ---------------------------------------------------------------- errors */

static resdiag_status set_err(char *err, size_t errlen, resdiag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static resdiag_status set_err(char *err, size_t errlen, resdiag_status st, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Records the HDF5 failure of the call just made, naming the object. */
#define H5FAIL(e, obj)                      \
    do {                                    \
        int saved_errno_ = errno;           \
        rd_h5_capture(&(e)->h5, saved_errno_); \
        (e)->object = (obj);                \
        goto cleanup;                       \
    } while (0)

typedef struct werr {
    rd_h5_error h5;
    const char *object; /* what was being created or written */
    resdiag_status st;  /* a status other than IO/NOSPACE, if the failure was not HDF5's */
    int before_hdf5;    /* failed before HDF5 wrote anything (the file is consistent) */
    long long size_limit; /* > 0: the file size limit (bytes) that stopped the write */
} werr;

#define CHECK(call, e, obj)       \
    do {                          \
        if ((call) < 0)           \
            H5FAIL((e), obj);     \
    } while (0)

/* ------------------------------------------------------------ attributes */

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

/* ------------------------------------------------------------ disk space */

/* Reserves room for a phase (space.h); 0 with e filled when there is none:
 * HDF5 has not written anything of the phase yet. */
static int reserve(rd_writer *w, off_t need, werr *e)
{
    if (rd_space_reserve(&w->space, need, &e->h5, &e->size_limit))
        return 1;
    e->object = "file (reserving space)";
    e->before_hdf5 = 1;
    return 0;
}

static void release(rd_writer *w)
{
    rd_space_release(&w->space);
}

static void detach(rd_writer *w)
{
    rd_space_detach(&w->space);
}

static int keep_header_in_one_page(hid_t file, hid_t *ds, const char *name, werr *e)
{
    if (rd_space_keep_header_in_one_page(file, ds, name, &e->h5))
        return 1;
    e->object = name;
    return 0;
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

/* -------------------------------------------------------------- creation */

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

static int write_root_attrs(hid_t file, const rd_file_header *hdr, int schema, werr *e)
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

/* A new group `name` without times (and with its attributes' creation
 * order kept when keep_order); failures name `object`. Close it. */
static hid_t create_group(hid_t file, const char *name, int keep_order, const char *object,
                          werr *e)
{
    hid_t gcpl = H5I_INVALID_HID, g = H5I_INVALID_HID;
    if ((gcpl = H5Pcreate(H5P_GROUP_CREATE)) < 0)
        H5FAIL(e, object);
    CHECK(H5Pset_obj_track_times(gcpl, 0), e, object);
    if (keep_order)
        CHECK(H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED), e,
              object);
    if ((g = H5Gcreate2(file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0)
        H5FAIL(e, object);
cleanup:
    if (gcpl >= 0)
        H5Pclose(gcpl);
    return g;
}

static int write_meta(hid_t file, const resdiag_model *m, werr *e)
{
    int ok = 0;
    /* Attribute order kept, so that a reader gets the pairs back in the
     * trainer's order. */
    hid_t g = create_group(file, RD_META_GROUP, 1, RD_META_GROUP, e);
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

/* Creates the groups above a dataset path ("forward/x" -> "forward"). */
static int ensure_parent(hid_t file, const char *path, werr *e)
{
    char group[128];
    const char *slash = strchr(path, '/');
    if (!slash)
        return 1;
    size_t n = (size_t)(slash - path);
    if (n >= sizeof group)
        n = sizeof group - 1;
    memcpy(group, path, n);
    group[n] = '\0';
    htri_t ex = H5Lexists(file, group, H5P_DEFAULT);
    if (ex < 0) {
        rd_h5_capture(&e->h5, errno);
        e->object = path;
        return 0;
    }
    if (ex > 0)
        return 1;
    hid_t g = create_group(file, group, 0, path, e);
    if (g < 0)
        return 0;
    H5Gclose(g);
    return 1;
}

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
static int describe_fields(hid_t ds, const char *description, const char *units,
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

static int describe(hid_t ds, const char *description, const char *units, const char *axes,
                    const rd_file_header *hdr, werr *e)
{
    return describe_fields(ds, description, units, axes, hdr, NULL, 0, e);
}

/* Creates an extendible dataset (0, dims...) / (unlimited, dims...); with
 * split_axis >= 0 each chunk holds one index of that axis of dims. With
 * btree (and dims), the last axis is declared unlimited too (it never
 * grows), which makes HDF5 index the chunks with a v2 B-tree (see the
 * top); else a single unlimited axis gets an extensible array. */
static hid_t create_series(hid_t file, const char *name, hid_t ftype, hid_t fill_type,
                           const void *fill, int rank, const int64_t *dims, int split_axis,
                           int btree, hsize_t chunk_steps, size_t elem_size, int level,
                           werr *e)
{
    hid_t sp = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, dapl = H5I_INVALID_HID;
    hid_t ds = H5I_INVALID_HID;
    hsize_t cur[RD_MAX_RANK + 1], max[RD_MAX_RANK + 1], chunk[RD_MAX_RANK + 1];
    cur[0] = 0;
    max[0] = H5S_UNLIMITED;
    chunk[0] = chunk_steps;
    size_t chunk_bytes = (size_t)chunk_steps * elem_size;
    for (int i = 0; i < rank; i++) {
        cur[i + 1] = max[i + 1] = chunk[i + 1] = (hsize_t)dims[i];
        if (i == split_axis)
            chunk[i + 1] = 1;
        chunk_bytes *= (size_t)chunk[i + 1];
    }
    if (btree && rank > 0)
        max[rank] = H5S_UNLIMITED;
    if (!ensure_parent(file, name, e))
        return H5I_INVALID_HID;
    if ((sp = H5Screate_simple(rank + 1, cur, max)) < 0)
        H5FAIL(e, name);
    if ((dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0)
        H5FAIL(e, name);
    CHECK(H5Pset_chunk(dcpl, rank + 1, chunk), e, name);
    CHECK(H5Pset_fill_value(dcpl, fill_type, fill), e, name);
    CHECK(H5Pset_obj_track_times(dcpl, 0), e, name);
    /* Schema 2 with compression: shuffle, then deflate, nothing else (the
     * reader accepts exactly that pipeline). */
    if (level > 0) {
        CHECK(H5Pset_shuffle(dcpl), e, name);
        CHECK(H5Pset_deflate(dcpl, (unsigned)level), e, name);
    }
    if ((dapl = H5Pcreate(H5P_DATASET_ACCESS)) < 0)
        H5FAIL(e, name);
    /* Keep the chunk being filled in memory across appends. */
    size_t cache = 2 * chunk_bytes + ((size_t)1 << 20);
    if (cache > CHUNK_CACHE_MAX)
        cache = CHUNK_CACHE_MAX;
    CHECK(H5Pset_chunk_cache(dapl, 521, cache, 1.0), e, name);
    if ((ds = H5Dcreate2(file, name, ftype, sp, H5P_DEFAULT, dcpl, dapl)) < 0)
        H5FAIL(e, name);
cleanup:
    if (dapl >= 0)
        H5Pclose(dapl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds;
}

/* The call sites of a STATS table: fixed strings, shape = table dims
 * without the field axis, chunked because SWMR writing requires it. */
static hid_t create_callsites(hid_t file, const rd_table *t, hid_t stype, off_t *bytes,
                              werr *e)
{
    hid_t sp = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    int rank = t->rank - 1;
    hsize_t dims[RD_MAX_RANK], chunk[RD_MAX_RANK];
    size_t inner = RD_CALLSITE_LEN;
    for (int i = 0; i < rank; i++) {
        dims[i] = chunk[i] = (hsize_t)t->dims[i];
        if (i > 0)
            inner *= (size_t)t->dims[i];
    }
    /* At most about 1 MiB per chunk: cut the first axis. */
    hsize_t rows = (hsize_t)(((size_t)1 << 20) / inner);
    if (rows < 1)
        rows = 1;
    if (chunk[0] > rows)
        chunk[0] = rows;
    *bytes = (off_t)((dims[0] + chunk[0] - 1) / chunk[0] * chunk[0]) * (off_t)inner;
    char empty[RD_CALLSITE_LEN] = { 0 };
    if (!ensure_parent(file, t->callsite_name, e))
        return H5I_INVALID_HID;
    if ((sp = H5Screate_simple(rank, dims, NULL)) < 0)
        H5FAIL(e, t->callsite_name);
    if ((dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0)
        H5FAIL(e, t->callsite_name);
    CHECK(H5Pset_chunk(dcpl, rank, chunk), e, t->callsite_name);
    CHECK(H5Pset_fill_value(dcpl, stype, empty), e, t->callsite_name);
    CHECK(H5Pset_obj_track_times(dcpl, 0), e, t->callsite_name);
    /* allocated now, so that the first write changes no metadata */
    CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), e, t->callsite_name);
    if ((ds = H5Dcreate2(file, t->callsite_name, stype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        H5FAIL(e, t->callsite_name);
cleanup:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds;
}

/* The axis of a table's dims that is the block site, or -1: tables with
 * one are chunked and written one site at a time, so that a site never
 * observed costs no disk space (see append_table). Not with compression:
 * the deflated NaN of a site never observed take a few bytes per chunk,
 * and one chunk per step instead of five keeps the index and the paged
 * file's rounding small (doc/FORMAT.md, "Chunks"). */
static int site_axis(const rd_writer *w, int table)
{
    if (w->level > 0)
        return -1;
    return table == RD_T_FWD_SITE || table == RD_T_BWD_SITE || table == RD_T_FWD_SITE_SKETCH
                   || table == RD_T_BWD_SITE_SKETCH
               ? 2
               : -1;
}

/* Steps per chunk of a table: a quarter of a batch, and at most about
 * TABLE_CHUNK_BYTES. A batch rarely starts on a chunk boundary (the first
 * step is flushed alone), and each flush writes every chunk it touched in
 * full: small chunks keep that rewrite small. Measured (resdiag-bench,
 * flush_steps=64): chunks of a whole batch cost 2-3x more per step. */
static hsize_t table_chunk_steps(int record_chunk_steps, size_t bytes_per_step)
{
    hsize_t cs = ((hsize_t)record_chunk_steps + 3) / 4;
    hsize_t cap = (hsize_t)(TABLE_CHUNK_BYTES / (bytes_per_step + 1));
    if (cs > cap)
        cs = cap;
    return cs < 1 ? 1 : cs;
}

static off_t metadata_margin(const rd_writer *w)
{
    return RESERVE_BASE + RESERVE_PER_DATASET * (off_t)w->n_datasets;
}

/* What the tables' chunks cost beyond their bytes when n steps are
 * appended: each new chunk adds a record to the table's v2 B-tree (at most
 * ~60 B; 256 B covers the nodes' slack), a split can add a node at each
 * level (a page each, for a tree of up to four levels), and on a paged
 * file a chunk can round up to a whole page. Reserved on top of
 * metadata_margin. */
static off_t index_margin(const rd_writer *w, hsize_t n)
{
    off_t m = 0;
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++) {
            const rd_table *t = &w->lay.tables[i];
            const rd_chunk_info *c = &w->part[i][p].chunk;
            if (t->count == 0 || w->part[i][p].ds < 0 || c->steps == 0 || n == 0)
                continue;
            int ax = site_axis(w, i);
            hsize_t per_step = ax < 0 ? 1 : (hsize_t)t->dims[ax];
            hsize_t first = w->n_written / c->steps, last = (w->n_written + n - 1) / c->steps;
            hsize_t pieces = (last - first + 1) * per_step;
            m += (off_t)pieces * (256 + (w->space.paged ? RD_FILE_PAGE : 0)) + 4 * RD_FILE_PAGE;
        }
    return m;
}

static void writer_free(rd_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0)
                H5Dclose(w->part[i][p].ds);
        if (w->callsite_ds[i] >= 0)
            H5Dclose(w->callsite_ds[i]);
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0)
            H5Dclose(w->summary_ds[i]);
    if (w->steps_ds >= 0)
        H5Dclose(w->steps_ds);
    if (w->time_ds >= 0)
        H5Dclose(w->time_ds);
    if (w->callsite_type >= 0)
        H5Tclose(w->callsite_type);
    free(w->callsite_buf);
    free(w->summary_buf);
    free(w->pack);
    free(w->path);
    if (w->lock_fd >= 0)
        close(w->lock_fd);
    free(w);
}

/* A writer with nothing open yet; NULL when out of memory. */
static rd_writer *writer_new(const char *path, const rd_tables *tables)
{
    rd_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->file = w->space.file = w->steps_ds = w->time_ds = w->callsite_type = H5I_INVALID_HID;
    w->space.fd = w->lock_fd = -1;
    for (int i = 0; i < RD_N_TABLES; i++) {
        w->callsite_ds[i] = H5I_INVALID_HID;
        for (int p = 0; p < MAX_PARTS; p++)
            w->part[i][p].ds = H5I_INVALID_HID;
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        w->summary_ds[i] = H5I_INVALID_HID;
    w->lay = *tables;
    w->path = strdup(path);
    w->callsite_buf = calloc(w->lay.n_slots ? w->lay.n_slots : 1, RD_CALLSITE_LEN);
    if (!w->path || !w->callsite_buf) {
        writer_free(w);
        return NULL;
    }
    return w;
}

/* The datasets of table i (see table_part): in schema 1 one of float64;
 * in schema 2 the type of its kind, and for a STATS table two. */
static void set_parts(rd_writer *w, int i)
{
    const rd_table *t = &w->lay.tables[i];
    table_part *pt = w->part[i];
    pt[0].name = t->name;
    pt[0].map = NULL;
    pt[0].width = (int)t->dims[t->rank - 1];
    pt[0].ft = rd_table_ftype(i, t, w->schema);
    pt[1].name = NULL;
    if (w->schema >= 2 && t->kind == RD_KIND_STATS) {
        pt[0].map = rd_real_fields;
        pt[0].width = RD_N_REAL_FIELDS;
        pt[1] = (table_part){ H5I_INVALID_HID, t->counts_name, RD_FT_COUNT, rd_count_fields,
                              RD_N_COUNT_FIELDS, { 0, 0 }, 0 };
    }
}

/* The description of a part in the file: where schema 2 stores a sentinel
 * instead of NaN, the table's "NaN: ..." says so. */
static const char *part_description(const rd_table *t, const table_part *pt, char *buf,
                                    size_t len)
{
    if (pt->ft == RD_FT_COUNT) {
        snprintf(buf, len, "the integer fields of /%s (field_names), at the same indices: "
                 "-1 where not observed, and absmax_col -1 where no value was finite",
                 t->name);
        return buf;
    }
    const char *nan = strstr(t->description, "NaN");
    if (!nan || (pt->ft != RD_FT_CALLS && pt->ft != RD_FT_ALIAS))
        return t->description;
    snprintf(buf, len, "%.*s%s%s", (int)(nan - t->description), t->description,
             pt->ft == RD_FT_CALLS ? "0" : "-1", nan + 3);
    return buf;
}

/* Bytes that a chunk of `raw` bytes may take in the file: with deflate,
 * HDF5 stores at most ceil(1.001 raw) + 12 bytes (its output buffer; a
 * chunk that does not fit is stored as it is, since the filter is
 * optional), and raw / 512 + 64 is more than that. */
static off_t chunk_bound(off_t raw, int level)
{
    return level > 0 ? raw + raw / 512 + 64 : raw;
}

/* The deflate level of a part whose step takes step_bytes in the file:
 * the file's level, or 0 (no filters) for a part smaller than
 * RD_FILTER_MIN_STEP_BYTES a step. A deflated part has one chunk per step,
 * and each chunk costs its index record, and at every append a copy of the
 * index nodes it touched: HDF5's SWMR writer moves every v2 B-tree node it
 * changes (2 KiB each, a leaf and its parents) to new space and never
 * frees the old copy. For a small part that costs more than deflate saves
 * (doc/FORMAT.md, "Filters"), so it is stored plain, in chunks of many
 * steps (plain_chunk_steps). */
static int part_level(const rd_writer *w, size_t step_bytes)
{
    return step_bytes >= RD_FILTER_MIN_STEP_BYTES ? w->level : 0;
}

/* Steps per chunk of a plain part in a file with filters: about
 * PLAIN_CHUNK_BYTES (at most SERIES_CHUNK_MIN steps), so that a new chunk,
 * and with it an index record and the copies of the nodes it touches,
 * comes only every few appends, while a short run allocates little. Its
 * chunks are rewritten in place by the appends that fill them, as schema
 * 1's are. */
static hsize_t plain_chunk_steps(size_t step_bytes)
{
    hsize_t cs = (hsize_t)(PLAIN_CHUNK_BYTES / (step_bytes + 1));
    if (cs > SERIES_CHUNK_MIN)
        cs = SERIES_CHUNK_MIN;
    return cs < 1 ? 1 : cs;
}

/* Creates part p of table i and describes it. */
static int create_part(rd_writer *w, hid_t file, const rd_file_header *hdr, int i, int p,
                       werr *e)
{
    const rd_table *t = &w->lay.tables[i];
    table_part *pt = &w->part[i][p];
    int64_t dims[RD_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    dims[t->rank - 1] = pt->width;
    size_t per_step = t->count / (size_t)t->dims[t->rank - 1] * (size_t)pt->width;
    size_t esz = rd_ftype_size(pt->ft);
    int split = site_axis(w, i);
    pt->level = part_level(w, per_step * esz);
    /* With filters a chunk is one step: each append then writes new chunks
     * only, and never rewrites one that holds a committed step (a deflated
     * chunk rewritten is other bytes, which a kill could tear, or moves,
     * and its old place may be reused before the index says so). */
    hsize_t cs = pt->level > 0 ? 1
                 : w->level > 0
                     ? plain_chunk_steps(per_step * esz)
                     : table_chunk_steps(hdr->record_chunk_steps,
                                         (split < 0 ? per_step : per_step / (size_t)dims[split])
                                             * esz);
    pt->ds = create_series(file, pt->name, rd_ftype_file(pt->ft), rd_ftype_memory(pt->ft),
                           rd_ftype_fill(pt->ft), t->rank, dims, split, w->space.paged, cs,
                           esz, pt->level, e);
    pt->chunk.steps = cs;
    pt->chunk.bytes = chunk_bound((off_t)cs * (off_t)per_step * (off_t)esz, pt->level);
    w->n_datasets++;
    char desc[512];
    return pt->ds >= 0
           && describe_fields(pt->ds, part_description(t, pt, desc, sizeof desc), t->units,
                              t->axes, hdr, pt->map, pt->width, e);
}

/* Table i's datasets, described, and its call sites for a STATS table. */
static int create_table(rd_writer *w, hid_t file, const rd_file_header *hdr, int i, werr *e)
{
    const rd_table *t = &w->lay.tables[i];
    if (t->count == 0)
        return 1;
    set_parts(w, i);
    for (int p = 0; p < MAX_PARTS && w->part[i][p].name; p++)
        if (!create_part(w, file, hdr, i, p, e))
            return 0;
    if (t->kind != RD_KIND_STATS || !t->callsite_name)
        return 1;
    off_t cs_bytes = 0;
    w->callsite_ds[i] = create_callsites(file, t, w->callsite_type, &cs_bytes, e);
    w->callsite_bytes += cs_bytes;
    w->n_datasets++;
    char axes[128];
    /* The table's axes without the last (field). */
    snprintf(axes, sizeof axes, "%s", t->axes);
    char *comma = strrchr(axes, ',');
    if (comma)
        *comma = '\0';
    if (w->callsite_ds[i] < 0
        || !describe(w->callsite_ds[i],
                     "\"file:line\" of the trainer code that called the hook at each slot of "
                     "the table (\"\": never observed; the first call of the latest step "
                     "that observed the slot)",
                     "text", strchr(axes, ',') ? strchr(axes, ',') + 1 : "", hdr, e))
        return 0;
    return 1;
}

/* /steps, /step_time, every table with its call sites, and the summary. */
static int create_datasets(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e)
{
    double nan = NAN;
    long long step_fill = RD_STEP_FILL;
    hsize_t series_chunk = (hsize_t)hdr->record_chunk_steps;
    if (series_chunk < SERIES_CHUNK_MIN)
        series_chunk = SERIES_CHUNK_MIN;
    w->series_chunk.steps = series_chunk;
    w->series_chunk.bytes = (off_t)series_chunk * 8;
    w->n_datasets = 2;
    w->steps_ds = create_series(file, RD_STEPS_NAME, H5T_STD_I64LE, H5T_NATIVE_LLONG,
                                &step_fill, 0, NULL, -1, 0, series_chunk, 8, 0, e);
    if (w->steps_ds < 0
        || !describe(w->steps_ds,
                     "the trainer's step number of each recorded step (-1: never written)",
                     "step", "step", hdr, e))
        return 0;
    w->time_ds = create_series(file, RD_STEP_TIME_NAME, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &nan,
                               0, NULL, -1, 0, series_chunk, 8, 0, e);
    if (w->time_ds < 0
        || !describe(w->time_ds, "time of the end of each recorded step since the run was opened",
                     "s", "step", hdr, e))
        return 0;

    if ((w->callsite_type = rd_h5_fixed_string_type(RD_CALLSITE_LEN)) < 0)
        H5FAIL(e, "callsite type");
    for (int i = 0; i < RD_N_TABLES; i++)
        if (!create_table(w, file, hdr, i, e))
            return 0;

    /* The per-step summary: rows of a few numbers, chunked like /steps and
     * never filtered (doc/FORMAT.md: its chunks are rewritten by each
     * append, which is safe only for bytes that stay the same); its types
     * in rd_summary_ftype. */
    for (int i = 0; i < RD_N_SUMMARY && rd_h5_writer_summary; i++) {
        const rd_table *t = &w->lay.summary[i];
        rd_ftype ft = rd_summary_ftype(i, w->schema);
        w->summary_ft[i] = ft;
        w->summary_ds[i] = create_series(file, t->name, rd_ftype_file(ft), rd_ftype_memory(ft),
                                         rd_ftype_fill(ft), t->rank, t->dims, -1,
                                         w->space.paged, series_chunk, rd_ftype_size(ft), 0, e);
        w->summary_chunk[i].steps = series_chunk;
        w->summary_chunk[i].bytes = (off_t)series_chunk * (off_t)t->count
                                    * (off_t)rd_ftype_size(ft);
        w->n_datasets++;
        if (w->summary_ds[i] < 0
            || !describe(w->summary_ds[i], t->description, t->units, t->axes, hdr, e))
            return 0;
    }
    return 1;
cleanup:
    return 0;
}

/* Every growing dataset's header inside one page (see
 * rd_space_keep_header_in_one_page), before readers may look. */
static int keep_headers_in_one_page(rd_writer *w, hid_t file, werr *e)
{
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0
                && !keep_header_in_one_page(file, &w->part[i][p].ds, w->part[i][p].name, e))
                return 0;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0
            && !keep_header_in_one_page(file, &w->summary_ds[i], w->lay.summary[i].name, e))
            return 0;
    if (!keep_header_in_one_page(file, &w->time_ds, RD_STEP_TIME_NAME, e)
        || !keep_header_in_one_page(file, &w->steps_ds, RD_STEPS_NAME, e))
        return 0;
    return 1;
}

/* ------------------------------------------------------ dimension scales */

/* The time series: /steps' dataset count as the record scale. */
static int n_time_series(const rd_writer *w)
{
    int n = 1; /* step_time */
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            n += w->part[i][p].ds >= 0;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        n += w->summary_ds[i] >= 0;
    return n;
}

/* Room in each growing header for its scale attributes (scales.h), before
 * the headers are moved into one page. */
static int make_scale_room(rd_writer *w, werr *e)
{
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0
                && !rd_scales_make_room(w->part[i][p].ds, w->lay.tables[i].rank + 1, 0,
                                        &e->h5)) {
                e->object = w->part[i][p].name;
                return 0;
            }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0
            && !rd_scales_make_room(w->summary_ds[i], w->lay.summary[i].rank + 1, 0, &e->h5)) {
            e->object = w->lay.summary[i].name;
            return 0;
        }
    e->object = RD_STEP_TIME_NAME;
    if (!rd_scales_make_room(w->time_ds, 1, 0, &e->h5))
        return 0;
    e->object = RD_STEPS_NAME;
    if (!rd_scales_make_room(w->steps_ds, 1, n_time_series(w), &e->h5))
        return 0;
    e->object = NULL;
    return 1;
}

/* Table i's call sites get the table's axes without the record and the
 * field axis. */
static int attach_callsite_scales(rd_writer *w, hid_t file, int i, werr *e)
{
    char axes[128];
    const char *first = strchr(w->lay.tables[i].axes, ',');
    snprintf(axes, sizeof axes, "%s", first ? first + 1 : "");
    char *comma = strrchr(axes, ',');
    if (comma)
        *comma = '\0';
    e->object = w->lay.tables[i].callsite_name;
    return rd_scales_attach(file, w->callsite_ds[i], axes, &e->h5);
}

/* The scale datasets, and every dataset's axes attached to them; after the
 * headers were moved (a move would leave the references behind). */
static int attach_scales(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e)
{
    if (!rd_scales_create(file, hdr->model, hdr->sketch_size, hdr->tables->n_block_sites,
                          w->summary_ds[0] >= 0, &e->h5,
                          &e->object))
        return 0;
    e->object = RD_STEPS_NAME;
    if (!rd_scales_set_record_scale(w->steps_ds, &e->h5))
        return 0;
    e->object = RD_STEP_TIME_NAME;
    if (!rd_scales_attach(file, w->time_ds, "step", &e->h5))
        return 0;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++) {
            const table_part *pt = &w->part[i][p];
            if (pt->ds < 0)
                continue;
            /* A part with some of the fields has no scale on its field axis
             * (the field scale has them all): its field_names name them. */
            char axes[128];
            snprintf(axes, sizeof axes, "%s", w->lay.tables[i].axes);
            char *last = strrchr(axes, ',');
            if (pt->map && last)
                snprintf(last, sizeof axes - (size_t)(last - axes), ",%s", "-");
            e->object = pt->name;
            if (!rd_scales_attach(file, pt->ds, axes, &e->h5)
                || (pt->map && !rd_scales_label(pt->ds, (unsigned)w->lay.tables[i].rank,
                                                "field", &e->h5)))
                return 0;
        }
        if (w->part[i][0].ds < 0)
            continue;
        if (w->callsite_ds[i] >= 0 && !attach_callsite_scales(w, file, i, e))
            return 0;
    }
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        e->object = w->lay.summary[i].name;
        if (w->summary_ds[i] >= 0
            && !rd_scales_attach(file, w->summary_ds[i], w->lay.summary[i].axes, &e->h5))
            return 0;
    }
    e->object = NULL;
    return 1;
}

static resdiag_status h5_status(const werr *e)
{
    if (e->st != RESDIAG_OK)
        return e->st;
    return rd_h5_error_is_nospace(&e->h5) ? RESDIAG_E_NOSPACE : RESDIAG_E_IO;
}

/* 1 if role is NULL (none declared) or one of names[0..n-1]. */
static int role_names_one_of(const char *role, const char *const *names, int n)
{
    if (!role)
        return 1;
    for (int i = 0; names && i < n; i++)
        if (names[i] && strcmp(names[i], role) == 0)
            return 1;
    return 0;
}

resdiag_status rd_writer_create(rd_writer **out, const char *path, const rd_file_header *hdr,
                                char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!out || !path || !hdr || !hdr->model || !hdr->tables)
        return set_err(err, errlen, RESDIAG_E_NULL,
                       "client bug: rd_writer_create: NULL argument");
    if (hdr->record_chunk_steps < 1)
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: record_chunk_steps %d < 1",
                       hdr->record_chunk_steps);
    if (hdr->file_schema < 0 || hdr->file_schema > RD_SCHEMA_VERSION || hdr->compression < 0
        || hdr->compression > 9)
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: file_schema %d (1..%d) or compression %d "
                       "(0..9)", hdr->file_schema, RD_SCHEMA_VERSION, hdr->compression);
    if (hdr->tables->n_block_sites !=
        rd_block_sites(hdr->file_schema ? hdr->file_schema : RD_SCHEMA_VERSION))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: tables of %d block sites for schema %d",
                       hdr->tables->n_block_sites, hdr->file_schema);
    /* A role naming no parameter would make a file that readers refuse. */
    const resdiag_model *m = hdr->model;
    if (!role_names_one_of(m->head_param, m->model_param_names, m->n_model_params))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: head_param is not a model parameter");
    if (!role_names_one_of(m->residual_param, m->layer_param_names, m->n_layer_params))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: residual_param is not a layer parameter");
    if (hdr->tables->n_metrics != (m->n_metrics > 0 ? m->n_metrics : 0))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: the tables hold %d metrics, the model "
                       "declares %d", hdr->tables->n_metrics, m->n_metrics);

    rd_h5_quiet q;
    werr e;
    memset(&e, 0, sizeof e);
    resdiag_status st = RESDIAG_OK;
    hid_t fapl = H5I_INVALID_HID, fcpl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    rd_writer *w = writer_new(path, hdr->tables);
    if (!w)
        return set_err(err, errlen, RESDIAG_E_NOMEM, "out of memory creating run file %s", path);
    w->schema = hdr->file_schema ? hdr->file_schema : RD_SCHEMA_VERSION;
    w->level = w->schema >= 2 ? hdr->compression : 0; /* schema 1: no filters */

    /* Nothing at path is given to HDF5 before it is claimed: a new file,
     * or with overwrite a run file, locked against other writers. */
    rd_run_claim claim;
    st = rd_run_claim_path(&claim, path, hdr->overwrite, err, errlen);
    if (st != RESDIAG_OK) {
        writer_free(w);
        return st;
    }
    if (rd_h5_writer_before_create)
        rd_h5_writer_before_create(path);

    rd_h5_quiet_begin(&q);
    e.object = "file";
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0)
        H5FAIL(&e, "file");
    /* SWMR needs the latest format (superblock v3). */
    CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), &e, "file");
#if H5_VERSION_GE(1, 10, 7)
    /* HDF5's own flock guards the creation against a second writer. The
     * claim's lock does that already, for the whole run; and where flock
     * is emulated with byte-range locks (NFS) the two would conflict. So
     * HDF5 locks only where the claim could not. Locking is only a guard
     * against misuse; file systems without it are fine. */
    CHECK(H5Pset_file_locking(fapl, claim.locked ? 0 : 1, 1), &e, "file");
#endif
    if ((fcpl = H5Pcreate(H5P_FILE_CREATE)) < 0)
        H5FAIL(&e, "file");
    CHECK(H5Pset_obj_track_times(fcpl, 0), &e, "file");
    w->space.paged = rd_h5_writer_reserve && rd_space_dir_can_fallocate(path);
    if (w->space.paged) {
        CHECK(H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 0, 1), &e, "file");
        CHECK(H5Pset_file_space_page_size(fcpl, RD_FILE_PAGE), &e, "file");
    }
    /* Not even creating a file that the size limit would cut short. */
    if (!rd_space_within_limit(0, RESERVE_CREATE, &e.h5, &e.size_limit)) {
        e.object = "file (reserving space)";
        e.before_hdf5 = 1;
        goto cleanup;
    }
    errno = 0;
    /* TRUNC: the claimed file is new and empty, or a run file to replace. */
    if ((file = H5Fcreate(claim.h5_path[0] ? claim.h5_path : path, H5F_ACC_TRUNC, fcpl, fapl))
        < 0)
        H5FAIL(&e, "file");
    w->file = w->space.file = file;
    /* Kept from what the trainer executes (file_fd.c); -1 fails the check. */
    w->space.fd = rd_h5_file_cloexec(file);
    if (!rd_run_claim_check(&claim, path, w->space.fd, e.h5.msg, sizeof e.h5.msg)) {
        e.st = RESDIAG_E_EXISTS;
        e.h5.captured = 1;
        goto cleanup;
    }
    w->space.reserve = 1;
    if (!reserve(w, RESERVE_CREATE, &e))
        goto cleanup;

    if (!write_root_attrs(file, hdr, w->schema, &e) || !write_meta(file, hdr->model, &e))
        goto cleanup;

    if (!create_datasets(w, file, hdr, &e) || !make_scale_room(w, &e)
        || !keep_headers_in_one_page(w, file, &e) || !attach_scales(w, file, hdr, &e))
        goto cleanup;

    /* Every object exists: from now on readers may open the file. */
    errno = 0;
    CHECK(H5Fstart_swmr_write(file), &e, "file (starting SWMR writing)");
    release(w);

    H5Pclose(fapl);
    H5Pclose(fcpl);
    rd_h5_quiet_end(&q);
    w->lock_fd = claim.fd; /* the lock lives as long as the run */
    *out = w;
    return RESDIAG_OK;

cleanup:
    st = h5_status(&e);
    set_err(err, errlen, st, "cannot create run file %s: %s: %s", path,
            e.object ? e.object : "?", e.h5.captured ? e.h5.msg : "unknown error");
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    /* A file that cannot be flushed cannot be closed (see the top). */
    if (file >= 0 && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
        detach(w);
    writer_free(w); /* closes the datasets */
    if (file >= 0)
        H5Fclose(file);
    /* Half a run file helps nobody; but only a file this call created
     * (and still at path) is removed. A replaced run stays as it is. */
    rd_run_claim_abandon(&claim, path);
    rd_h5_quiet_end(&q);
    return st;
}

/* ---------------------------------------------------------------- append */

/* Copies "file:line" into dst (RD_CALLSITE_LEN bytes, zero padded); a path
 * too long keeps its end: ".../tools/x.c:12". __FILE__ is a path, any
 * bytes: what is not UTF-8, and control characters, become '?' (a hook
 * never fails over its call site). */
static void format_callsite(char *dst, const char *file, int line)
{
    memset(dst, 0, RD_CALLSITE_LEN);
    if (!file)
        return;
    char tail[24];
    int tl = snprintf(tail, sizeof tail, ":%d", line);
    size_t fl = strlen(file), room = RD_CALLSITE_LEN - 1 - (size_t)tl;
    if (fl <= room) {
        memcpy(dst, file, fl);
        memcpy(dst + fl, tail, (size_t)tl);
        rd_utf8_scrub(dst);
        return;
    }
    const char *p = file + fl - (room - 3);
    while ((*p & 0xC0) == 0x80) /* do not start inside a UTF-8 character */
        p++;
    size_t n = strlen(p);
    memcpy(dst, "...", 3);
    memcpy(dst + 3, p, n);
    memcpy(dst + 3 + n, tail, (size_t)tl);
    rd_utf8_scrub(dst);
}

/* 0, with e saying that memory ran out `what`, before HDF5 wrote anything
 * of the append. */
static int out_of_memory(werr *e, const char *object, const char *what)
{
    snprintf(e->h5.msg, sizeof e->h5.msg, "out of memory %s", what);
    e->h5.captured = 1;
    e->st = RESDIAG_E_NOMEM;
    e->object = object;
    e->before_hdf5 = 1;
    return 0;
}

/* w->pack with room for `bytes`; 0 (and e filled) when out of memory. */
static int pack_room(rd_writer *w, size_t bytes, const char *name, werr *e)
{
    if (bytes <= w->pack_cap)
        return 1;
    void *p = realloc(w->pack, bytes);
    if (!p)
        return out_of_memory(e, name, "packing a batch");
    w->pack = p;
    w->pack_cap = bytes;
    return 1;
}

/* Extends ds to n_old + n steps (rank axes after the step). */
static int extend(hid_t ds, const char *name, int rank, const int64_t *dims, hsize_t n_total,
                  werr *e)
{
    hsize_t size[RD_MAX_RANK + 1];
    size[0] = n_total;
    for (int i = 0; i < rank; i++)
        size[i + 1] = (hsize_t)dims[i];
    errno = 0;
    CHECK(H5Dset_extent(ds, size), e, name);
    return 1;
cleanup:
    return 0;
}

/* Writes buf, laid out as the block (count...) of the file, at start. The
 * memory selection has the shape of the file selection, so that HDF5 maps
 * whole blocks to chunks instead of iterating element by element (which
 * took most of an append's time). */
static int write_block(hid_t ds, const char *name, hid_t mtype, int rank1, const hsize_t *start,
                       const hsize_t *count, const void *buf, werr *e)
{
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    int ok = 0;
    if ((fs = H5Dget_space(ds)) < 0)
        H5FAIL(e, name);
    CHECK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL), e, name);
    if ((ms = H5Screate_simple(rank1, count, NULL)) < 0)
        H5FAIL(e, name);
    errno = 0;
    CHECK(H5Dwrite(ds, mtype, ms, fs, H5P_DEFAULT, buf), e, name);
    ok = 1;
cleanup:
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    return ok;
}

/* Extends a series (/steps, /step_time, a summary dataset) by n steps and
 * writes them from buf: n rows of the dataset's other dims, contiguous. */
static int append_rows(hid_t ds, const char *name, hid_t mtype, int rank, const int64_t *dims,
                       hsize_t n_old, hsize_t n, const void *buf, werr *e)
{
    hsize_t start[RD_MAX_RANK + 1] = { 0 }, count[RD_MAX_RANK + 1];
    start[0] = n_old;
    count[0] = n;
    for (int i = 0; i < rank; i++)
        count[i + 1] = (hsize_t)dims[i];
    return extend(ds, name, rank, dims, n_old + n, e)
           && write_block(ds, name, mtype, rank + 1, start, count, buf, e);
}

/* 1 if any value of site block b of table t, steps [r0, r1) of records,
 * is not NaN, or is a metric's given NaN (metric_value.h): a block of NaN
 * only is left to the fill value, which is "not given". */
static int block_has_data(const rd_writer *w, const rd_table *t, const double *records,
                          hsize_t r0, hsize_t r1, size_t b, size_t nb, size_t inner,
                          size_t outer)
{
    for (hsize_t r = r0; r < r1; r++) {
        const double *row = records + (size_t)r * w->lay.record_len + t->offset + b * inner;
        for (size_t o = 0; o < outer; o++) {
            const double *v = row + o * nb * inner;
            for (size_t k = 0; k < inner; k++)
                if (rd_metric_is_given(v[k]))
                    return 1;
        }
    }
    return 0;
}

/* 0, with e saying that a value of the record has no exact value in the
 * file's type: a value the library computed (a count, a column, a call
 * order, a site index) that is not an integer in range, which would be a
 * bug; checked rather than trusted, since HDF5 would convert it silently.
 * Nothing of the append is committed (/steps comes last). */
static int not_storable(werr *e, const table_part *pt, double v, hsize_t step)
{
    snprintf(e->h5.msg, sizeof e->h5.msg, "a value %.17g at step index %llu "
             "is not an integer that the file's %s can hold", v, (unsigned long long)step, rd_ftype_name(pt->ft));
    e->h5.captured = 1;
    e->st = RESDIAG_E_INVALID;
    e->object = pt->name;
    e->before_hdf5 = 1; /* HDF5 has failed nothing: the file closes cleanly */
    return 0;
}

/* Packs site block b of steps [r0, r1) of part p of table i into w->pack,
 * in the part's type, laid out as the file's block (steps, dims... with 1
 * at the site axis). */
static int pack_rows(rd_writer *w, int i, int p, const double *records, hsize_t r0,
                     hsize_t r1, size_t b, werr *e)
{
    const rd_table *t = &w->lay.tables[i];
    const table_part *pt = &w->part[i][p];
    int ax = site_axis(w, i);
    size_t nb = ax < 0 ? 1 : (size_t)t->dims[ax];
    size_t inner = ax < 0 ? t->count : (size_t)t->dims[t->rank - 1];
    size_t width = (size_t)t->dims[t->rank - 1]; /* values per slot in the record */
    size_t outer = t->count / (nb * inner), slots = inner / width;
    size_t esz = rd_ftype_size(pt->ft), out_slot = (size_t)pt->width * esz;
    if (!pack_room(w, (size_t)(r1 - r0) * outer * slots * out_slot, pt->name, e))
        return 0;
    char *to = w->pack;
    for (hsize_t r = r0; r < r1; r++) {
        const double *row = records + (size_t)r * w->lay.record_len + t->offset + b * inner;
        for (size_t o = 0; o < outer; o++) {
            const double *from = row + o * nb * inner;
            if (!pt->map && pt->ft == RD_FT_F64) { /* schema 1: as it is */
                memcpy(to, from, inner * sizeof(double));
                to += inner * sizeof(double);
                continue;
            }
            for (size_t sl = 0; sl < slots; sl++, to += out_slot, from += width) {
                long bad = rd_ftype_pack(pt->ft, from, pt->map, (size_t)pt->width, to);
                if (bad >= 0)
                    return not_storable(e, pt, from[pt->map ? (size_t)pt->map[bad] : (size_t)bad],
                                        w->n_written + r);
            }
        }
    }
    return 1;
}

/* Writes site block b of steps [r0, r1) of every part of table i at step
 * n_written + r0. (Not with H5Dwrite_chunk for whole chunks: it was hardly
 * faster, and HDF5 1.10.8 crashes when such a write meets a full disk.) */
static int write_rows(rd_writer *w, int i, const double *records, hsize_t r0, hsize_t r1,
                      size_t b, werr *e)
{
    const rd_table *t = &w->lay.tables[i];
    int ax = site_axis(w, i);
    for (int p = 0; p < MAX_PARTS && w->part[i][p].ds >= 0; p++) {
        const table_part *pt = &w->part[i][p];
        if (!pack_rows(w, i, p, records, r0, r1, b, e))
            return 0;
        hsize_t start[RD_MAX_RANK + 1] = { 0 }, count[RD_MAX_RANK + 1];
        start[0] = w->n_written + r0;
        count[0] = r1 - r0;
        for (int k = 0; k < t->rank; k++)
            count[k + 1] = (hsize_t)t->dims[k];
        count[t->rank] = (hsize_t)pt->width;
        if (ax >= 0) {
            start[ax + 1] = b;
            count[ax + 1] = 1;
        }
        if (!write_block(pt->ds, pt->name, rd_ftype_memory(pt->ft), t->rank + 1, start, count,
                         w->pack, e))
            return 0;
    }
    return 1;
}

/* Extends table i by n steps and writes their rows from records (n,
 * record_len): per site for tables with a site axis, and per chunk of
 * steps. A chunk's worth of rows that is all NaN is not written: NaN is
 * the fill value (or its sentinel), so it reads the same, and the chunks
 * of what was never observed are never allocated (a run that observes the
 * norm and branch sites at a few steps stores them for those steps only).
 * Runs of chunks with data are written with one call. */
static int append_table(rd_writer *w, int i, const double *records, hsize_t n, werr *e)
{
    const rd_table *t = &w->lay.tables[i];
    for (int p = 0; p < MAX_PARTS && w->part[i][p].ds >= 0; p++) {
        int64_t dims[RD_MAX_RANK];
        memcpy(dims, t->dims, sizeof dims);
        dims[t->rank - 1] = w->part[i][p].width;
        if (!extend(w->part[i][p].ds, w->part[i][p].name, t->rank, dims, w->n_written + n, e))
            return 0;
    }
    int ax = site_axis(w, i);
    size_t nb = ax < 0 ? 1 : (size_t)t->dims[ax];
    size_t inner = ax < 0 ? t->count : (size_t)t->dims[t->rank - 1];
    size_t outer = t->count / (nb * inner);
    hsize_t cs = w->part[i][0].chunk.steps;
    for (size_t b = 0; b < nb; b++) {
        hsize_t run0 = 0, c1;
        int in_run = 0;
        for (hsize_t c0 = 0; c0 < n; c0 = c1) {
            c1 = c0 + (cs - (w->n_written + c0) % cs);
            if (c1 > n)
                c1 = n;
            int any = block_has_data(w, t, records, c0, c1, b, nb, inner, outer);
            if (any && !in_run) {
                run0 = c0;
                in_run = 1;
            } else if (!any && in_run) {
                if (!write_rows(w, i, records, run0, c0, b, e))
                    return 0;
                in_run = 0;
            }
        }
        if (in_run && !write_rows(w, i, records, run0, n, b, e))
            return 0;
    }
    return 1;
}

/* The summary rows of n records into w->summary_buf. */
static int summarize(rd_writer *w, const double *records, size_t n, werr *e)
{
    size_t len = w->lay.summary_len;
    if (n > w->summary_cap) {
        double *p = realloc(w->summary_buf, n * len * sizeof *p);
        if (!p)
            return out_of_memory(e, RD_SUMMARY_GROUP, "for the summary");
        w->summary_buf = p;
        w->summary_cap = n;
    }
    for (size_t r = 0; r < n; r++)
        rd_tables_summarize(&w->lay, records + r * w->lay.record_len, w->summary_buf + r * len);
    return 1;
}

static int flush_file(rd_writer *w, werr *e)
{
    errno = 0;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
        rd_h5_capture(&e->h5, errno);
        e->object = "file (flush)";
        return 0;
    }
    return 1;
}

resdiag_status rd_writer_append(rd_writer *w, const int64_t *steps, const double *times,
                                const double *records, size_t n,
                                const rd_callsite *callsites, int callsites_changed,
                                char *err, size_t errlen)
{
    if (!w)
        return set_err(err, errlen, RESDIAG_E_NULL, "client bug: rd_writer_append: no writer");
    if (w->failed)
        return set_err(err, errlen, w->failed,
                       "run file %s: not written since an earlier error (%s)", w->path,
                       w->failed_msg);
    if (n > 0 && (!steps || !times || !records))
        return set_err(err, errlen, RESDIAG_E_NULL,
                       "client bug: rd_writer_append: NULL steps, times or records");
    if (callsites_changed && !callsites && w->lay.n_slots > 0)
        return set_err(err, errlen, RESDIAG_E_NULL,
                       "client bug: rd_writer_append: callsites changed but NULL");
    if (n == 0 && !callsites_changed)
        return RESDIAG_OK;

    rd_h5_quiet q;
    werr e;
    memset(&e, 0, sizeof e);
    rd_h5_quiet_begin(&q);
    const rd_tables *lay = &w->lay;

    /* Phase 1: everything but the step numbers, then flush. */
    off_t need = metadata_margin(w) + index_margin(w, n)
                 + rd_space_new_chunk_bytes(&w->series_chunk, w->n_written, n)
                 + (callsites_changed ? w->callsite_bytes : 0);
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (lay->tables[i].count > 0 && w->part[i][p].ds >= 0)
                need += rd_space_new_chunk_bytes(&w->part[i][p].chunk, w->n_written, n);
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0)
            need += rd_space_new_chunk_bytes(&w->summary_chunk[i], w->n_written, n);
    if (!reserve(w, need, &e))
        goto cleanup;
    for (int i = 0; n > 0 && i < RD_N_TABLES; i++)
        if (lay->tables[i].count > 0 && !append_table(w, i, records, n, &e))
            goto cleanup;
    if (n > 0 && w->summary_ds[0] >= 0) {
        if (!summarize(w, records, n, &e))
            goto cleanup;
        for (int i = 0; i < RD_N_SUMMARY; i++) {
            const rd_table *t = &lay->summary[i];
            /* (n, summary_len) -> (n, count) of this dataset, in its type */
            rd_ftype ft = w->summary_ft[i];
            size_t row = t->count * rd_ftype_size(ft);
            if (!pack_room(w, n * row, t->name, &e))
                goto cleanup;
            for (size_t r = 0; r < n; r++)
                rd_ftype_pack(ft, w->summary_buf + r * lay->summary_len + t->offset, NULL,
                              t->count, (char *)w->pack + r * row);
            if (!append_rows(w->summary_ds[i], t->name, rd_ftype_memory(ft), t->rank, t->dims,
                             w->n_written, n, w->pack, &e))
                goto cleanup;
        }
    }
    if (n > 0 && !append_rows(w->time_ds, RD_STEP_TIME_NAME, H5T_NATIVE_DOUBLE, 0, NULL,
                              w->n_written, n, times, &e))
        goto cleanup;
    if (callsites_changed && lay->n_slots > 0) {
        for (size_t s = 0; s < lay->n_slots; s++)
            format_callsite(w->callsite_buf + s * RD_CALLSITE_LEN, callsites[s].file,
                            callsites[s].line);
        for (int i = 0; i < RD_N_TABLES; i++) {
            const rd_table *t = &lay->tables[i];
            if (w->callsite_ds[i] < 0)
                continue;
            errno = 0;
            CHECK(H5Dwrite(w->callsite_ds[i], w->callsite_type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           w->callsite_buf + t->slot_offset * RD_CALLSITE_LEN),
                  &e, t->callsite_name);
        }
    }
    if (!flush_file(w, &e))
        goto cleanup;
    release(w);

    /* Phase 2: the step numbers commit the steps. */
    if (n > 0) {
        need = metadata_margin(w) + rd_space_new_chunk_bytes(&w->series_chunk, w->n_written, n);
        if (!reserve(w, need, &e)) {
            /* Phase 1 is on disk, but without step numbers those steps
             * do not count; the file is consistent. */
            goto cleanup;
        }
        if (!append_rows(w->steps_ds, RD_STEPS_NAME, H5T_NATIVE_INT64, 0, NULL, w->n_written, n,
                         steps, &e)
            || !flush_file(w, &e))
            goto cleanup;
        release(w);
    }
    w->n_written += n;
    rd_h5_quiet_end(&q);
    return RESDIAG_OK;

cleanup:
    if (!e.before_hdf5)
        detach(w);
    rd_h5_quiet_end(&q);
    w->failed = h5_status(&e);
    if (e.size_limit > 0)
        set_err(w->failed_msg, sizeof w->failed_msg, w->failed,
                "%s; run file %s keeps its %llu step(s), the %zu of this append are not "
                "written", e.h5.msg, w->path, (unsigned long long)w->n_written, n);
    else if (w->failed == RESDIAG_E_NOSPACE)
        set_err(w->failed_msg, sizeof w->failed_msg, w->failed,
                 "no space left for run file %s (%s) while appending %zu step(s) after %llu: "
                 "%s: %s",
                 w->path, strerror(e.h5.sys_errno), n, (unsigned long long)w->n_written,
                 e.object ? e.object : "?", e.h5.msg);
    else
        set_err(w->failed_msg, sizeof w->failed_msg, w->failed,
                 "cannot write run file %s while appending %zu step(s) after %llu: %s: %s",
                 w->path, n, (unsigned long long)w->n_written, e.object ? e.object : "?",
                 e.h5.msg);
    return set_err(err, errlen, w->failed, "%s", w->failed_msg);
}

/* ----------------------------------------------------------------- close */

/* Returns the first error of an earlier append if there was one (the file
 * then holds every step appended before it), else the close's own. */
resdiag_status rd_writer_close(rd_writer *w, char *err, size_t errlen)
{
    if (!w)
        return RESDIAG_OK;
    rd_h5_quiet q;
    werr e;
    memset(&e, 0, sizeof e);
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet_begin(&q);
    if (w->file >= 0 && !w->space.detached) {
        /* Every append ended with a flush, so this one has little or
         * nothing to write; reserve for it anyway (where the margin would
         * cross the file size limit, reserve() allocates nothing, and the
         * flush writes only inside what HDF5 has allocated, which the
         * appends kept within the limit). If it fails, close detached.
         * After a successful flush, closing only rewrites the superblock
         * in place (it allocates nothing). */
        werr ignored;
        memset(&ignored, 0, sizeof ignored);
        reserve(w, metadata_margin(w), &ignored);
        errno = 0;
        if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "file (final flush)";
            detach(w);
        }
        release(w);
    }
    /* Datasets before the file: the file is only really closed with its
     * last object. */
    hid_t *ids[(MAX_PARTS + 1) * RD_N_TABLES + RD_N_SUMMARY + 3];
    int n_ids = 0;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++)
            ids[n_ids++] = &w->part[i][p].ds;
        ids[n_ids++] = &w->callsite_ds[i];
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        ids[n_ids++] = &w->summary_ds[i];
    ids[n_ids++] = &w->time_ds;
    ids[n_ids++] = &w->steps_ds;
    ids[n_ids++] = &w->callsite_type;
    for (int i = 0; i < n_ids; i++) {
        if (*ids[i] < 0)
            continue;
        errno = 0;
        herr_t r = i == n_ids - 1 ? H5Tclose(*ids[i]) : H5Dclose(*ids[i]);
        if (r < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "dataset (close)";
        }
        *ids[i] = H5I_INVALID_HID;
    }
    if (w->file >= 0) {
        errno = 0;
        if (H5Fclose(w->file) < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "file (close)";
        }
        w->file = w->space.file = H5I_INVALID_HID;
    }
    if (w->failed) {
        st = set_err(err, errlen, w->failed, "%s", w->failed_msg);
    } else if (e.h5.captured) {
        st = h5_status(&e);
        set_err(err, errlen, st, "closing run file %s %s: %s: %s", w->path,
                w->space.detached ? "left it as a killed writer would" : "failed", e.object,
                e.h5.msg);
    }
    writer_free(w);
    rd_h5_quiet_end(&q);
    return st;
}
