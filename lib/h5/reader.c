/*
 * reader.c - opens a run file (doc/FORMAT.md) again: one being written
 * (HDF5 SWMR), one left by a killed trainer, or a finished one. Nothing in
 * the file is trusted before it is checked against the tables that its own
 * root attributes imply; every problem becomes a status plus one logged line.
 *
 * Which steps are there: the shortest first axis over /steps, /step_time and
 * every table, cut at the first step number that is not a written one (-1,
 * the fill value, or not larger than the one before). The writer writes
 * /steps last, after everything else of those steps was flushed
 * (writer.c). The root attributes are read in reader_root.c.
 *
 * A run file may come from anyone (doc/FORMAT.md, "Reading files from
 * others"): before anything is followed or read, every link the reader
 * could walk must be a hard link, and every dataset it reads must keep its
 * data inside the file (chunked or contiguous, no external storage, not
 * virtual) without filters but shuffle then deflate (any other could make
 * HDF5 load a plugin). Work and memory follow what the file holds: the
 * call sites, which the writer stores in full, must be there for every
 * layer the file declares, and a deflated dataset's chunks must fit what
 * deflate can put in its stored bytes (check_expansion: the whole
 * dataset). A filtered dataset is never read through HDF5's filters, whose
 * deflate inflates a chunk without limit: it must be chunked one step per
 * chunk, as the writer does, and chunk_decode.c inflates each chunk into
 * exactly its size or refuses it (read_block); it keeps one decoded step
 * per dataset, forgotten at refresh.
 *
 * Schema 1 stores every value as a float64, schema 2 each at its type
 * (file_types.h; a STATS table as two datasets, joined by read_split): the
 * reader gives both as the step record has them, doubles with NaN where
 * nothing was observed, so nothing above lib/h5 sees the schema.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5/attributes.h"
#include "h5/chunk_decode.h"
#include "h5/common.h"
#include "h5/file_fd.h"
#include "h5/file_types.h"
#include "h5/guard.h"
#include "h5/merge.h"
#include "h5/reader.h"
#include "h5/reader_root.h"
#include "format/format.h"
#include "format/tables.h"
#include "common/log.h"

#define STEP_BLOCK 65536 /* steps read at a time when checking /steps */
#define RD_SWMR_READ_ATTEMPTS 20 /* see resdiag_reader_open */
#define MAX_GROUP_LINKS 1024 /* links in the root or a group: resdiag writes about 20 */
#define MAX_CHUNKS_PER_STEP 64 /* chunks across one step of a time series: the writer's have 1 or 5 */

int rd_h5_reader_summary = 1;

/* Interned strings: pointers stay valid until the reader closes. */
typedef struct pool_block {
    struct pool_block *next;
    size_t used, cap;
    char data[];
} pool_block;

typedef struct intern {
    pool_block *blocks;
    const char **table; /* open addressing, hcap entries */
    size_t hcap, count;
} intern;

typedef struct series {
    const char *name;
    hid_t ds;
    hid_t counts_ds;    /* schema 2, STATS tables: the integer fields; else invalid */
    int table;          /* table of format/tables.h, or -1 for steps / step_time */
    rd_ftype ft;        /* how ds stores the values (file_types.h): an integer type's
                           sentinel reads as NaN; any float reads as it is */
    int rank;           /* axes after the step axis */
    hsize_t dims[RD_MAX_RANK]; /* as a step record has them (a STATS table: every field) */
    hsize_t chunk[RD_MAX_RANK + 1]; /* chunk shape, step axis first; all 0: not chunked */
} series;

struct resdiag_reader {
    hid_t file;
    int swmr;                 /* opened for SWMR reading */
    char *path;
    long long file_size;      /* bytes, at open */
    rd_tables lay;
    rd_root root;             /* the root attributes and /meta, and the run info */

    hid_t steps_ds, time_ds;
    hid_t table_ds[RD_N_TABLES];
    hid_t counts_ds[RD_N_TABLES];     /* schema 2: the STATS tables' integer fields */
    hid_t callsite_ds[RD_N_TABLES];
    hid_t summary_ds[RD_N_SUMMARY];  /* all invalid: no summary (or ignored) */
    int n_series;
    series series[RD_N_TABLES + RD_N_SUMMARY + 2];
    int64_t last_step;        /* step number of step n_steps - 1 */

    /* the filtered time series, decoded by chunk_decode.c (never by HDF5) */
    int n_decoded;
    hid_t decoded_ds[2 * RD_N_TABLES + RD_N_SUMMARY + 2];
    const char *decoded_name[2 * RD_N_TABLES + RD_N_SUMMARY + 2];
    rd_chunk_steps *decoder[2 * RD_N_TABLES + RD_N_SUMMARY + 2];

    const char **callsites;   /* (n_slots) interned */
    intern pool;
    rd_merge *merge;          /* a job's rank files read as one (merge.h); NULL: one file */
};

/* --------------------------------------------------------------- intern */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *intern_str(intern *in, const char *s)
{
    if (!s[0])
        return "";
    if (in->count * 2 >= in->hcap) {
        size_t ncap = in->hcap ? in->hcap * 2 : 64;
        const char **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < in->hcap; i++) {
            if (!in->table[i])
                continue;
            size_t j = (size_t)hash_str(in->table[i]) & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = in->table[i];
        }
        free(in->table);
        in->table = nt;
        in->hcap = ncap;
    }
    size_t j = (size_t)hash_str(s) & (in->hcap - 1);
    while (in->table[j]) {
        if (strcmp(in->table[j], s) == 0)
            return in->table[j];
        j = (j + 1) & (in->hcap - 1);
    }
    size_t len = strlen(s) + 1;
    pool_block *b = in->blocks;
    if (!b || b->cap - b->used < len) {
        size_t cap = len > 65536 ? len : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = in->blocks;
        in->blocks = b;
    }
    char *dst = b->data + b->used;
    memcpy(dst, s, len);
    b->used += len;
    in->table[j] = dst;
    in->count++;
    return dst;
}

static void intern_free(intern *in)
{
    while (in->blocks) {
        pool_block *n = in->blocks->next;
        free(in->blocks);
        in->blocks = n;
    }
    free(in->table);
    in->table = NULL;
    in->hcap = in->count = 0;
}


/* ---------------------------------------------------------------- links */

/* Every link of the root and of the groups it holds must be a hard link:
 * a soft link could point anywhere, an external link makes HDF5 open
 * another file (a FIFO hangs it; /etc/passwd is read). Checked before any
 * path is opened: H5Lexists and H5Dopen2 follow every link on a path, and
 * H5Literate reports each link without following it. The reader never
 * opens anything deeper than a group of the root. */
typedef struct link_ctx {
    resdiag_reader *rd;
    const char *group; /* "" for the root, else "/name" (escaped) */
    int depth;         /* 0 for the root */
    int count;
    resdiag_status st;
} link_ctx;

static resdiag_status check_links_in(resdiag_reader *rd, hid_t g, const char *group, int depth);

static herr_t link_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    link_ctx *c = data;
    char nb[128], where[256];
    snprintf(where, sizeof where, "%s/%s", c->group, rd_h5_msg_name(name, nb, sizeof nb));
    if (++c->count > MAX_GROUP_LINKS) {
        c->st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %s holds more than %d links",
                           c->rd->path, c->group[0] ? c->group : "the root group",
                           MAX_GROUP_LINKS);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
        const char *kind = info->type == H5L_TYPE_SOFT       ? "a soft link"
                           : info->type == H5L_TYPE_EXTERNAL ? "an external link (into another file)"
                                                             : "a user-defined link";
        c->st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %s is %s; resdiag follows only hard "
                           "links to objects stored inside the file", c->rd->path, where, kind);
        return -1;
    }
    if (c->depth > 0)
        return 0;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        c->st = rd_h5_fail_call(c->rd->path, where);
        return -1;
    }
    if (oi.type != H5O_TYPE_GROUP)
        return 0;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0) {
        c->st = rd_h5_fail_call(c->rd->path, where);
        return -1;
    }
    c->st = check_links_in(c->rd, sub, where, c->depth + 1);
    H5Gclose(sub);
    return c->st == RESDIAG_OK ? 0 : -1;
}

static resdiag_status check_links_in(resdiag_reader *rd, hid_t g, const char *group, int depth)
{
    link_ctx c = { rd, group, depth, 0, RESDIAG_OK };
    if (H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, link_cb, &c) < 0)
        return c.st != RESDIAG_OK ? c.st
                                  : rd_h5_fail_call(rd->path, group[0] ? group : "the root group");
    return RESDIAG_OK;
}

/* ------------------------------------------------------------- datasets */

/* The filters of a dataset: none, or exactly shuffle then deflate, the
 * pipeline resdiag writes (HDF5 would look for any other among the plugins
 * in HDF5_PLUGIN_PATH and run its code). *filtered says which. */
static resdiag_status check_filters(const resdiag_reader *rd, hid_t dcpl, int n_filters,
                                    const char *name, int *filtered)
{
    H5Z_filter_t ids[2] = { H5Z_FILTER_ERROR, H5Z_FILTER_ERROR };
    *filtered = n_filters > 0;
    for (int i = 0; i < n_filters; i++) {
        unsigned flags = 0;
        size_t n_cd = 0;
        /* no filter_config: that would look the filter up */
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n_cd, NULL, 0, NULL, NULL);
        if (id < 0)
            return rd_h5_fail_call(rd->path, name);
        if (id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_DEFLATE)
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is stored through HDF5 "
                              "filter %d; resdiag reads only shuffle (2) then deflate (1), and "
                              "loads no filter plugins", rd->path, name, (int)id);
        if (i < 2)
            ids[i] = id;
    }
    if (n_filters > 0
        && (n_filters != 2 || ids[0] != H5Z_FILTER_SHUFFLE || ids[1] != H5Z_FILTER_DEFLATE))
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is stored through %d HDF5 "
                          "filters starting with filter %d; resdiag reads only shuffle (2) then "
                          "deflate (1)", rd->path, name, n_filters, (int)ids[0]);
    return RESDIAG_OK;
}

/* Deflate turns at most 1032 bytes into one (each 258-byte match costs at
 * least 2 bits), and an HDF5 chunk is one stream, stored as it is when the
 * filter could not shrink it: so each stored chunk of s bytes holds at
 * most DEFLATE_MAX_RATIO * s bytes. */
#define DEFLATE_MAX_RATIO 1032

/* A filtered dataset's allocated chunks, each of chunk_bytes once
 * inflated, must fit in what its stored bytes can hold (above): a small
 * file that claims more would make HDF5 allocate, and the reader loop,
 * without bound (a /steps of a billion steps in a few kilobytes). */
static resdiag_status check_expansion(const resdiag_reader *rd, hid_t ds, hid_t dcpl,
                                      hsize_t stored, const char *name)
{
    hsize_t chunk[H5S_MAX_RANK], n_chunks = 0;
    int nd = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    size_t elem = t >= 0 ? H5Tget_size(t) : 0;
    herr_t r = sp >= 0 ? H5Dget_num_chunks(ds, sp, &n_chunks) : -1;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (nd < 1 || elem == 0 || r < 0)
        return rd_h5_fail_call(rd->path, name);
    double bytes = (double)elem; /* (doubles: no product can overflow) */
    for (int i = 0; i < nd; i++)
        bytes *= (double)chunk[i];
    if ((double)n_chunks * bytes > (double)DEFLATE_MAX_RATIO * (double)stored)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s claims %llu chunks of %.0f "
                          "bytes in %llu stored bytes, more than deflate can hold (%d:1)",
                          rd->path, name, (unsigned long long)n_chunks, bytes,
                          (unsigned long long)stored, DEFLATE_MAX_RATIO);
    return RESDIAG_OK;
}

/* The data of dataset ds must be stored inside the file, as resdiag
 * writes it: chunked (or contiguous), no external storage, not virtual (a
 * view of datasets in other files), no filters but shuffle then deflate
 * (check_filters), no more storage than the file has bytes and, when
 * filtered, no more chunks than that storage can hold (check_expansion).
 * Checked once, at open, before anything of the dataset is read;
 * *filtered says whether it is. */
static resdiag_status check_storage(const resdiag_reader *rd, hid_t ds, const char *name,
                                    int *filtered)
{
    *filtered = 0;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0)
        return rd_h5_fail_call(rd->path, name);
    resdiag_status st = RESDIAG_OK;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int n_external = H5Pget_external_count(dcpl);
    int n_filters = H5Pget_nfilters(dcpl);
    const char *P = rd->path;
    if (layout < 0 || n_external < 0 || n_filters < 0) {
        st = rd_h5_fail_call(P, name);
    } else if (layout == H5D_VIRTUAL) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is a virtual dataset (its data "
                        "is in other files); resdiag reads only data stored inside the file", P,
                        name);
    } else if (n_external > 0) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s uses external storage; resdiag "
                        "reads only data stored inside the file", P, name);
    } else if (layout != H5D_CHUNKED && layout != H5D_CONTIGUOUS) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s has a storage layout that "
                        "resdiag does not write (only chunked or contiguous)", P, name);
    } else {
        st = check_filters(rd, dcpl, n_filters, name, filtered);
    }
    if (st != RESDIAG_OK) {
        H5Pclose(dcpl);
        return st;
    }
    /* A chunk index or a contiguous address can claim any storage; past
     * the end of the file HDF5 reads zeros. */
    hsize_t bytes = H5Dget_storage_size(ds);
    if (bytes > (hsize_t)rd->file_size)
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s claims %llu bytes of "
                        "storage, more than the file's %lld", P, name, (unsigned long long)bytes,
                        rd->file_size);
    else if (*filtered)
        st = check_expansion(rd, ds, dcpl, bytes, name);
    H5Pclose(dcpl);
    if (st != RESDIAG_OK)
        return st;
    if (layout == H5D_CONTIGUOUS) {
        haddr_t at = H5Dget_offset(ds);
        if (at != HADDR_UNDEF && (at > (haddr_t)rd->file_size
                                  || bytes > (hsize_t)rd->file_size - (hsize_t)at))
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s lies past the end of the "
                              "file (%llu bytes at byte %llu, file of %lld bytes)", P, name,
                              (unsigned long long)bytes, (unsigned long long)at, rd->file_size);
    }
    return RESDIAG_OK;
}

/* The writer allocates every call-site dataset in full when it creates
 * the file (writer.c), so their storage is what shows that the layers,
 * sublayers and parameters the root attributes declare are really there:
 * a small file that declares a million layers would otherwise make every
 * reader, and the analysis, do work for each of them. */
static resdiag_status check_callsites_stored(const resdiag_reader *rd, hid_t ds,
                                             const char *name)
{
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t elem = t >= 0 ? H5Tget_size(t) : 0;
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (np < 0 || elem == 0)
        return rd_h5_fail_call(rd->path, name);
    hsize_t want = (hsize_t)np * elem, have = H5Dget_storage_size(ds);
    if (have < want)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s stores %llu of its %llu "
                          "bytes: the file does not hold the %d layers (x %d sublayers) it "
                          "declares",
                          rd->path, name, (unsigned long long)have, (unsigned long long)want,
                          rd->root.info.n_layers, rd->root.info.n_sublayers);
    return RESDIAG_OK;
}

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
    if ((st = check_storage(rd, ds, name, &filtered)) != RESDIAG_OK)
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
    if (filtered) { /* its decoder: read_chunk_shapes, once the layers are checked */
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

static resdiag_status open_datasets(resdiag_reader *rd)
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
        if ((st = check_callsites_stored(rd, rd->callsite_ds[i], t->callsite_name)) != RESDIAG_OK)
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

/* Chunk shape of each time series (for rd_reader_stored: the first
 * dataset's, which a STATS table's counts share when the writer made
 * them), each checked; a filtered one's must be the writer's
 * (chunk_decode.h), which its decoder checks. */
static resdiag_status read_chunk_shapes(resdiag_reader *rd)
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

/* Current length of the step axis of dataset ds of series s, or -1 (logged). */
static long long first_axis_of(const resdiag_reader *rd, const series *s, hid_t ds)
{
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[RD_MAX_RANK + 1];
    if (sp < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) != s->rank + 1) {
        rd_h5_fail_call(rd->path, s->name);
        if (sp >= 0)
            H5Sclose(sp);
        return -1;
    }
    H5Sclose(sp);
    return (long long)dims[0];
}

/* The shorter of a series' datasets' step axes, or -1 (logged). */
static long long first_axis(const resdiag_reader *rd, const series *s)
{
    long long n = first_axis_of(rd, s, s->ds);
    if (n >= 0 && s->counts_ds >= 0) {
        long long m = first_axis_of(rd, s, s->counts_ds);
        n = m < n ? m : n;
    }
    return n;
}

/* Sets info.n_steps from the datasets' lengths and the step numbers. */
static resdiag_status count_steps(resdiag_reader *rd)
{
    long long n = LLONG_MAX;
    for (int i = 0; i < rd->n_series; i++) {
        long long len = first_axis(rd, &rd->series[i]);
        if (len < 0)
            return RESDIAG_E_IO;
        if (len < n)
            n = len;
    }
    long long old = rd->root.info.n_steps;
    if (n < old)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: has %lld steps, fewer than the %lld read "
                          "before (was it overwritten?)", rd->path, n, old);
    int64_t *buf = NULL;
    long long good = old;
    int64_t prev = rd->last_step;
    if (n > old) {
        size_t block = (size_t)(n - old < STEP_BLOCK ? n - old : STEP_BLOCK);
        buf = malloc(block * sizeof *buf);
        if (!buf)
            return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
    }
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    for (long long first = old; first < n && good == first;) {
        hsize_t cnt = (hsize_t)(n - first < STEP_BLOCK ? n - first : STEP_BLOCK);
        hsize_t start = (hsize_t)first;
        if ((fs = H5Dget_space(rd->steps_ds)) < 0
            || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL) < 0
            || (ms = H5Screate_simple(1, &cnt, NULL)) < 0
            || H5Dread(rd->steps_ds, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, buf) < 0) {
            st = rd_h5_fail_call(rd->path, RD_STEPS_NAME);
            goto cleanup;
        }
        H5Sclose(fs);
        H5Sclose(ms);
        fs = ms = H5I_INVALID_HID;
        for (hsize_t i = 0; i < cnt; i++) {
            /* -1 (the fill value), or not increasing (as zeros read past
             * the end of a damaged file look): not written. Step numbers
             * strictly increase (resdiag_step_begin enforces it). */
            if (buf[i] < 0 || (good > 0 && buf[i] <= prev))
                break;
            prev = buf[i];
            good++;
        }
        first += (long long)cnt;
    }
    rd->root.info.n_steps = good;
    rd->last_step = prev;
cleanup:
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    free(buf);
    return st;
}

/* Reads every call-site dataset into rd->callsites (interned). */
static resdiag_status read_callsites(resdiag_reader *rd)
{
    resdiag_status st = RESDIAG_OK;
    hid_t mt = H5I_INVALID_HID, fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    char *buf = NULL;
    if (!rd->callsites) {
        rd->callsites = calloc(rd->lay.n_slots ? rd->lay.n_slots : 1, sizeof *rd->callsites);
        if (!rd->callsites)
            return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
        for (size_t i = 0; i < rd->lay.n_slots; i++)
            rd->callsites[i] = "";
    }
    if ((mt = rd_h5_fixed_string_type(RD_CALLSITE_LEN)) < 0)
        return rd_h5_fail_call(rd->path, "call sites");
    for (int i = 0; i < RD_N_TABLES; i++) {
        const rd_table *t = &rd->lay.tables[i];
        if (rd->callsite_ds[i] < 0)
            continue;
        int rank = t->rank - 1;
        hsize_t start[RD_MAX_RANK] = { 0 }, count[RD_MAX_RANK];
        size_t inner = 1;
        for (int k = 0; k < rank; k++) {
            count[k] = (hsize_t)t->dims[k];
            if (k > 0)
                inner *= (size_t)t->dims[k];
        }
        /* A few MiB at a time along the first axis. */
        size_t rows = ((size_t)4 << 20) / (inner * RD_CALLSITE_LEN);
        if (rows < 1)
            rows = 1;
        if (rows > (size_t)t->dims[0])
            rows = (size_t)t->dims[0];
        free(buf);
        buf = malloc(rows * inner * RD_CALLSITE_LEN);
        if (!buf) {
            st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
            goto cleanup;
        }
        for (size_t r0 = 0; r0 < (size_t)t->dims[0]; r0 += rows) {
            size_t nr = (size_t)t->dims[0] - r0 < rows ? (size_t)t->dims[0] - r0 : rows;
            start[0] = r0;
            count[0] = nr;
            hsize_t mn = nr * inner;
            if ((fs = H5Dget_space(rd->callsite_ds[i])) < 0
                || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0
                || (ms = H5Screate_simple(1, &mn, NULL)) < 0
                || H5Dread(rd->callsite_ds[i], mt, ms, fs, H5P_DEFAULT, buf) < 0) {
                st = rd_h5_fail_call(rd->path, t->callsite_name);
                goto cleanup;
            }
            H5Sclose(fs);
            H5Sclose(ms);
            fs = ms = H5I_INVALID_HID;
            for (size_t k = 0; k < nr * inner; k++) {
                char *s = buf + k * RD_CALLSITE_LEN;
                s[RD_CALLSITE_LEN - 1] = '\0';
                const char *p = intern_str(&rd->pool, s);
                if (!p) {
                    st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
                    goto cleanup;
                }
                rd->callsites[t->slot_offset + r0 * inner + k] = p;
            }
        }
    }
cleanup:
    free(buf);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    H5Tclose(mt);
    return st;
}

/* ----------------------------------------------------------- open/close */

/* Does the file exist, is it a regular file, does it carry the HDF5
 * signature at 0, 512, 1024, ...? Keeps text files away from HDF5. */
static resdiag_status check_signature(const char *path, long long *size)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return rd_h5_fail(RESDIAG_E_FORMAT, "not a regular file: %s", path);
    *size = (long long)sb.st_size;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    int found = 0;
    for (off_t off = 0; off + RD_H5_SIGNATURE_LEN <= sb.st_size; off = off ? off * 2 : 512) {
        char sig[RD_H5_SIGNATURE_LEN];
        ssize_t r = pread(fd, sig, sizeof sig, off);
        if (r < 0) {
            int err = errno;
            close(fd);
            return rd_h5_fail(RESDIAG_E_IO, "cannot read run file %s: %s", path, strerror(err));
        }
        if (r == RD_H5_SIGNATURE_LEN && memcmp(sig, RD_H5_SIGNATURE, RD_H5_SIGNATURE_LEN) == 0) {
            found = 1;
            break;
        }
    }
    close(fd);
    if (!found)
        return rd_h5_fail(RESDIAG_E_FORMAT, "not an HDF5 file: %s", path);
    return RESDIAG_OK;
}

static void reader_free(resdiag_reader *rd)
{
    if (!rd)
        return;
    for (int i = 0; i < RD_N_TABLES; i++) {
        if (rd->table_ds[i] >= 0)
            H5Dclose(rd->table_ds[i]);
        if (rd->counts_ds[i] >= 0)
            H5Dclose(rd->counts_ds[i]);
        if (rd->callsite_ds[i] >= 0)
            H5Dclose(rd->callsite_ds[i]);
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (rd->summary_ds[i] >= 0)
            H5Dclose(rd->summary_ds[i]);
    if (rd->steps_ds >= 0)
        H5Dclose(rd->steps_ds);
    if (rd->time_ds >= 0)
        H5Dclose(rd->time_ds);
    for (int i = 0; i < rd->n_decoded; i++)
        rd_chunk_steps_free(rd->decoder[i]);
    if (rd->file >= 0)
        H5Fclose(rd->file);
    rd_merge_free(rd->merge);
    rd_root_free(&rd->root);
    free(rd->callsites);
    intern_free(&rd->pool);
    free(rd->path);
    free(rd);
}

static resdiag_reader *reader_alloc(const char *path)
{
    resdiag_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return NULL;
    rd->file = rd->steps_ds = rd->time_ds = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_TABLES; i++)
        rd->table_ds[i] = rd->counts_ds[i] = rd->callsite_ds[i] = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        rd->summary_ds[i] = H5I_INVALID_HID;
    rd->path = strdup(path);
    if (!rd->path) {
        free(rd);
        return NULL;
    }
    return rd;
}

resdiag_status resdiag_reader_open(resdiag_reader **out, const char *path)
{
    resdiag_reader *rd0 = NULL;
    resdiag_status st = rd_reader_open_file(out, path);
    if (st != RESDIAG_OK)
        return st;
    rd0 = *out;
    const resdiag_run_info *in = &rd0->root.info;
    if (in->world_size <= 1 || in->rank != 0)
        return RESDIAG_OK; /* one process, or one rank's file named directly */
    *out = NULL;
    resdiag_reader *rd = reader_alloc(path);
    if (!rd) {
        resdiag_reader_destroy(rd0);
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    }
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    st = rd_merge_open(&rd->merge, rd0); /* takes rd0 over */
    rd_h5_quiet_end(&q);
    if (st != RESDIAG_OK) {
        resdiag_reader_destroy(rd);
        return st;
    }
    *out = rd;
    return RESDIAG_OK;
}

const rd_merge *rd_reader_merge(const resdiag_reader *rd)
{
    return rd ? rd->merge : NULL;
}

int64_t rd_reader_last_step(const resdiag_reader *rd)
{
    return rd->root.info.n_steps > 0 ? rd->last_step : -1;
}

const char *rd_reader_path(const resdiag_reader *rd)
{
    return rd->path;
}

resdiag_status rd_reader_open_file(resdiag_reader **out, const char *path)
{
    if (!out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: out is NULL");
    *out = NULL;
    if (!path)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: path is NULL");
    long long file_size = 0;
    resdiag_status st = check_signature(path, &file_size);
    if (st != RESDIAG_OK)
        return st;
    /* damage that would crash HDF5 instead of failing in it */
    char gerr[256];
    st = rd_h5_guard_file(path, gerr, sizeof gerr);
    if (st != RESDIAG_OK)
        return rd_h5_fail(st, "%s run file %s: %s", st == RESDIAG_E_IO ? "cannot read" : "damaged",
                          path, gerr);

    resdiag_reader *rd = reader_alloc(path);
    if (!rd)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    rd->file_size = file_size;

    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        st = rd_h5_fail_call(path, "opening");
        goto fail;
    }
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 1, 1);
#endif
    /* The plain POSIX driver, whatever HDF5_DRIVER in the environment says. */
    if (H5Pset_fapl_sec2(fapl) < 0) {
        H5Pclose(fapl);
        st = rd_h5_fail_call(path, "opening");
        goto fail;
    }
    /* A SWMR reader retries metadata whose checksum fails (the writer may be
     * halfway through it), sleeping 1 ns, 2 ns, 4 ns, ... without a cap in
     * HDF5 1.10: the default 100 attempts hang on a damaged file for ever
     * (found by tests/fuzz). 20 attempts wait 1 ms in all, per damaged
     * block read. */
    H5Pset_metadata_read_attempts(fapl, RD_SWMR_READ_ATTEMPTS);
    /* SWMR reading opens a file that is still being written, and one whose
     * writer was killed (its superblock still says "being written"). A
     * file not written for SWMR (e.g. by h5py) needs a plain open. */
    rd_h5_error e1, e2;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    /* (errno after a failed HDF5 call means nothing: HDF5 reports the
     * errno of a failed system call in its own messages.) */
    rd->file = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (rd->file >= 0) {
        rd->swmr = 1;
    } else {
        rd_h5_capture(&e1, 0);
        rd->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (rd->file < 0)
            rd_h5_capture(&e2, 0);
    }
    H5Pclose(fapl);
    if (rd->file < 0) {
        /* A failed system call (permissions, locks, I/O) is an I/O error;
         * HDF5 not making sense of the bytes is a damaged file. */
        resdiag_status why = e1.sys_errno || e2.sys_errno ? RESDIAG_E_IO : RESDIAG_E_FORMAT;
        const char *what = why == RESDIAG_E_IO ? "cannot open run file" : "damaged HDF5 file";
        if (strcmp(e1.msg, e2.msg) != 0)
            st = rd_h5_fail(why, "%s %s: %s (opened for SWMR reading: %s)", what, path, e2.msg,
                            e1.msg);
        else
            st = rd_h5_fail(why, "%s %s: %s", what, path, e2.msg);
        goto fail;
    }
    /* The reader's program may exec while the file is open (file_fd.c). */
    if (rd_h5_file_cloexec(rd->file) < 0) {
        st = rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: cannot keep its descriptor "
                        "from programs this process executes", path);
        goto fail;
    }

    if ((st = check_links_in(rd, rd->file, "", 0)) != RESDIAG_OK
        || (st = rd_root_read(&rd->root, rd->file, rd->path)) != RESDIAG_OK)
        goto fail;
    const resdiag_run_info *in = &rd->root.info;
    rd_tables_init(&rd->lay, in->n_layers, in->n_sublayers, in->n_layer_params,
                   in->n_model_params, in->sketch_size, rd_block_sites(in->schema_version));
    rd_tables_set_metrics(&rd->lay, in->n_metrics);
    if ((st = open_datasets(rd)) != RESDIAG_OK || (st = read_chunk_shapes(rd)) != RESDIAG_OK
        || (st = count_steps(rd)) != RESDIAG_OK || (st = read_callsites(rd)) != RESDIAG_OK)
        goto fail;

    rd_h5_quiet_end(&q);
    *out = rd;
    return RESDIAG_OK;

fail:
    reader_free(rd);
    rd_h5_quiet_end(&q);
    return st;
}

void resdiag_reader_destroy(resdiag_reader *rd)
{
    if (!rd)
        return;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    reader_free(rd);
    rd_h5_quiet_end(&q);
}

const resdiag_run_info *resdiag_reader_info(const resdiag_reader *rd)
{
    if (rd && rd->merge)
        return &rd->merge->info;
    return rd ? &rd->root.info : NULL;
}

resdiag_status resdiag_reader_refresh(resdiag_reader *rd)
{
    if (!rd)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_refresh: reader is NULL");
    if (rd->merge)
        return rd_merge_refresh(rd->merge);
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    resdiag_status st = RESDIAG_OK;
    for (int i = 0; i < rd->n_decoded; i++) /* the steps kept may have been written since */
        rd_chunk_steps_forget(rd->decoder[i]);
    if (rd->swmr) {
        for (int i = 0; i < rd->n_series; i++)
            if (H5Drefresh(rd->series[i].ds) < 0
                || (rd->series[i].counts_ds >= 0 && H5Drefresh(rd->series[i].counts_ds) < 0)) {
                st = rd_h5_fail_call(rd->path, rd->series[i].name);
                goto done;
            }
        for (int i = 0; i < RD_N_TABLES; i++)
            if (rd->callsite_ds[i] >= 0 && H5Drefresh(rd->callsite_ds[i]) < 0) {
                st = rd_h5_fail_call(rd->path, rd->lay.tables[i].callsite_name);
                goto done;
            }
    }
    if ((st = count_steps(rd)) == RESDIAG_OK)
        st = read_callsites(rd);
done:
    rd_h5_quiet_end(&q);
    return st;
}

/* --------------------------------------------------------------- access */

static resdiag_status check_step(const resdiag_reader *rd, int64_t step_index, const char *fn)
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

static rd_chunk_steps *decoder_of(const resdiag_reader *rd, hid_t ds)
{
    for (int i = 0; i < rd->n_decoded; i++)
        if (rd->decoded_ds[i] == ds)
            return rd->decoder[i];
    return NULL;
}

/* Reads the block (start, count) of dataset ds (called name) as mtype into
 * out, laid out as the memory space (mrank, mdims), which holds as many
 * values as count, in the same order. A filtered dataset step by step
 * through its decoder (chunk_decode.h), never through HDF5's filters. */
static resdiag_status read_block(const resdiag_reader *rd, hid_t ds, const char *name,
                                 hid_t mtype, const hsize_t *start, const hsize_t *count,
                                 int mrank, const hsize_t *mdims, void *out)
{
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    rd_chunk_steps *dec = decoder_of(rd, ds);
    if (dec) {
        size_t per = H5Tget_size(mtype);
        for (int k = 1; k < rd_chunk_steps_axes(dec); k++)
            per *= (size_t)count[k];
        for (hsize_t s = 0; st == RESDIAG_OK && s < count[0]; s++)
            st = rd_chunk_steps_read(dec, mtype, start[0] + s, start + 1, count + 1,
                                     (unsigned char *)out + s * per);
        rd_h5_quiet_end(&q);
        return st;
    }
    if ((fs = H5Dget_space(ds)) < 0
        || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0
        || (ms = H5Screate_simple(mrank, mdims, NULL)) < 0
        || H5Dread(ds, mtype, ms, fs, H5P_DEFAULT, out) < 0)
        st = rd_h5_fail_call(rd->path, name);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    rd_h5_quiet_end(&q);
    return st;
}

/* The indices [k0, k0 + *n) of fields[0..n_fields-1] that lie in the field
 * range [f0, f0 + nf) (the fields are in field order, so they are one run). */
static hsize_t field_run(const int *fields, int n_fields, hsize_t f0, hsize_t nf, hsize_t *n)
{
    hsize_t k0 = 0;
    *n = 0;
    for (int k = 0; k < n_fields; k++)
        if ((hsize_t)fields[k] >= f0 && (hsize_t)fields[k] < f0 + nf) {
            if (*n == 0)
                k0 = (hsize_t)k;
            ++*n;
        }
    return k0;
}

/* The block (start, count) of a schema-2 STATS table, fields [f0, f0 + nf)
 * on its last axis, from its two datasets into out (count, laid out as
 * the record has the fields). */
static resdiag_status read_split(const resdiag_reader *rd, const series *se, const hsize_t *start,
                                 const hsize_t *count, double *out)
{
    int last = se->rank;
    hsize_t f0 = start[last], nf = count[last], rows = 1, nr, nc;
    for (int i = 0; i < last; i++)
        rows *= count[i];
    hsize_t kr = field_run(rd_real_fields, RD_N_REAL_FIELDS, f0, nf, &nr);
    hsize_t kc = field_run(rd_count_fields, RD_N_COUNT_FIELDS, f0, nf, &nc);
    double *real = malloc((size_t)(rows * (nr + nc)) * sizeof *real + 1);
    if (!real)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory reading /%s", rd->path,
                          se->name);
    double *counts = real + rows * nr;
    hsize_t st2[RD_MAX_RANK + 1], ct2[RD_MAX_RANK + 1];
    memcpy(st2, start, sizeof st2);
    memcpy(ct2, count, sizeof ct2);
    resdiag_status st = RESDIAG_OK;
    st2[last] = kr;
    ct2[last] = nr;
    if (nr > 0)
        st = read_block(rd, se->ds, se->name, H5T_NATIVE_DOUBLE, st2, ct2, last + 1, ct2, real);
    st2[last] = kc;
    ct2[last] = nc;
    if (st == RESDIAG_OK && nc > 0) {
        st = read_block(rd, se->counts_ds, rd->lay.tables[se->table].counts_name,
                        H5T_NATIVE_INT64, st2, ct2, last + 1, ct2, counts);
        rd_ftype_unpack_int(RD_FT_COUNT, counts, (size_t)(rows * nc), counts);
    }
    for (hsize_t r = 0; st == RESDIAG_OK && r < rows; r++) {
        const double *fr = real + r * nr, *fc = counts + r * nc;
        double *to = out + r * nf;
        for (hsize_t j = 0; j < nf; j++) /* the fields in order take turns from both */
            to[j] = f0 + j >= RESDIAG_FIELD_FROB && f0 + j <= RESDIAG_FIELD_ABSMAX ? *fr++ : *fc++;
    }
    free(real);
    return st;
}

/* Reads the block (start, count) of series se (as a step record has it) as
 * doubles into out, laid out as count: floats as they are, the integers'
 * sentinels as NaN, a schema-2 STATS table from both its datasets. */
static resdiag_status read_values(const resdiag_reader *rd, const series *se,
                                  const hsize_t *start, const hsize_t *count, double *out)
{
    if (se->counts_ds >= 0)
        return read_split(rd, se, start, count, out);
    int is_int = rd_ftype_is_int(se->ft) && se->table >= 0;
    resdiag_status st = read_block(rd, se->ds, se->name, is_int ? H5T_NATIVE_INT64
                                                                : H5T_NATIVE_DOUBLE,
                                   start, count, se->rank + 1, count, out);
    if (st == RESDIAG_OK && is_int) {
        size_t n = 1;
        for (int i = 0; i <= se->rank; i++)
            n *= (size_t)count[i];
        rd_ftype_unpack_int(se->ft, out, n, out);
    }
    return st;
}

static const series *table_series(const resdiag_reader *rd, int table)
{
    for (int i = 0; i < rd->n_series; i++)
        if (rd->series[i].table == table)
            return &rd->series[i];
    return NULL;
}

/* Reads elements [first, first + n) of slot `slot` of a table, for steps
 * [step, step + n_steps) with n_steps > 1 only when n == 1; out (n_steps * n). */
static resdiag_status read_slot(const resdiag_reader *rd, int table, size_t slot,
                                int64_t step, hsize_t n_steps, hsize_t first, hsize_t n,
                                double *out)
{
    const rd_table *t = &rd->lay.tables[table];
    const series *se = table_series(rd, table);
    if (!se)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "run file %s has no /%s", rd->path, t->name);
    hsize_t start[RD_MAX_RANK + 1], count[RD_MAX_RANK + 1];
    start[0] = (hsize_t)step;
    count[0] = n_steps;
    size_t rest = slot;
    for (int i = t->rank - 2; i >= 0; i--) {
        start[i + 1] = rest % (size_t)t->dims[i];
        count[i + 1] = 1;
        rest /= (size_t)t->dims[i];
    }
    start[t->rank] = first;
    count[t->rank] = n;
    return read_values(rd, se, start, count, out);
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

resdiag_status resdiag_reader_steps(const resdiag_reader *rd, int64_t *out, int64_t n)
{
    if (!rd || (!out && n > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_steps: NULL argument");
    if (rd->merge)
        return rd_merge_steps(rd->merge, out, n);
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
    return read_block(rd, rd->steps_ds, RD_STEPS_NAME, H5T_NATIVE_INT64, &start, &cnt, 1, &cnt,
                      out);
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
    resdiag_status st = read_slot(rd, table, slot, step_index, 1, 0, RESDIAG_N_FIELDS, out);
    if (st != RESDIAG_OK) {
        fill_nan(out, RESDIAG_N_FIELDS);
        return st;
    }
    if (observed)
        *observed = !isnan(out[RESDIAG_FIELD_ROWS]);
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_site(const resdiag_reader *rd, int64_t step_index,
                                   resdiag_direction dir, int layer, int sublayer,
                                   resdiag_site site, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_site";
    if (observed)
        *observed = 0;
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_site(rd->merge, step_index, dir, layer, sublayer, site, out, observed);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
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

resdiag_status resdiag_reader_sketch(const resdiag_reader *rd, int64_t step_index,
                                     resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, double *out)
{
    static const char fn[] = "resdiag_reader_sketch";
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_sketch(rd->merge, step_index, dir, layer, sublayer, site, out);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 1, &table, &slot);
    if ((st = table_present(rd, table, fn)) != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if (site_not_in_file(rd, site)) {
        fill_nan(out, (size_t)rd->root.info.sketch_size);
        return RESDIAG_OK;
    }
    return read_slot(rd, table, slot, step_index, 1, 0, (hsize_t)rd->root.info.sketch_size, out);
}

resdiag_status resdiag_reader_param(const resdiag_reader *rd, int64_t step_index, int layer,
                                    const char *name, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_param";
    if (observed)
        *observed = 0;
    if (!rd || !name || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_param(rd->merge, step_index, layer, name, out, observed);
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
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    return read_fields(rd, table, slot, step_index, out, observed);
}

resdiag_status resdiag_reader_update(const resdiag_reader *rd, int64_t step_index, int layer,
                                     int sublayer, double *out)
{
    static const char fn[] = "resdiag_reader_update";
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_update(rd->merge, step_index, layer, sublayer, out);
    resdiag_status st;
    if ((st = check_site(rd, RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, fn))
        != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    size_t slot = (size_t)layer * (size_t)rd->root.info.n_sublayers + (size_t)sublayer;
    return read_slot(rd, RD_T_UPDATE, slot, step_index, 1, 0, RESDIAG_N_UPDATE_FIELDS, out);
}

resdiag_status resdiag_reader_metric(const resdiag_reader *rd, int metric, int64_t first,
                                     int64_t n, double *out)
{
    static const char fn[] = "resdiag_reader_metric";
    if (!rd || (!out && n > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_metric(rd->merge, metric, first, n, out);
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
    return read_block(rd, rd->table_ds[RD_T_METRICS], RD_DS_METRICS, H5T_NATIVE_DOUBLE, start,
                      count, 1, &mn, out);
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
        st = read_slot(rd, RD_T_STEP_ABORTED, 0, si, 1, 0, 1, &flag);
    if (st != RESDIAG_OK || !(flag == 1))
        return st;
    *aborted = 1;
    if (!out || rd->table_ds[RD_T_ABORT_REASON] < 0)
        return RESDIAG_OK;
    st = read_slot(rd, RD_T_ABORT_REASON, 0, si, 1, 0, RESDIAG_MAX_ABORT_REASON, bytes);
    if (st == RESDIAG_OK)
        rd_tables_abort_reason(bytes, out, out_len);
    return st;
}

resdiag_status resdiag_reader_step_aborted(const resdiag_reader *rd, int64_t step_index,
                                           int *aborted)
{
    static const char fn[] = "resdiag_reader_step_aborted";
    if (aborted)
        *aborted = 0;
    if (!rd || !aborted)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_step_status(rd->merge, step_index, aborted, NULL, 0);
    resdiag_status st = check_step(rd, step_index, fn);
    return st != RESDIAG_OK ? st : read_step_status(rd, step_index, aborted, NULL, 0);
}

resdiag_status resdiag_reader_abort_reason(const resdiag_reader *rd, int64_t step_index,
                                           char *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_abort_reason";
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (out_len == 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: out_len 0", fn);
    out[0] = '\0';
    int aborted = 0;
    if (rd->merge)
        return rd_merge_step_status(rd->merge, step_index, &aborted, out, out_len);
    resdiag_status st = check_step(rd, step_index, fn);
    return st != RESDIAG_OK ? st : read_step_status(rd, step_index, &aborted, out, out_len);
}

resdiag_status resdiag_reader_alias(const resdiag_reader *rd, int64_t step_index,
                                    resdiag_direction dir, int layer, int sublayer,
                                    resdiag_site site, int *same_as)
{
    static const char fn[] = "resdiag_reader_alias";
    if (same_as)
        *same_as = -1;
    if (!rd || !same_as)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_alias(rd->merge, step_index, dir, layer, sublayer, site, same_as);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    if (rd_model_site_index(site) >= 0)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: %s is a model site; aliases are "
                          "between the block sites of one sublayer", fn, resdiag_site_name(site));
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    int table = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    if (rd->table_ds[table] < 0 || site_not_in_file(rd, site))
        return RESDIAG_OK; /* a file from before aliases (or this site): none declared */
    size_t slot = (size_t)layer * (size_t)rd->root.info.n_sublayers + (size_t)sublayer;
    double v;
    if ((st = read_slot(rd, table, slot, step_index, 1, (hsize_t)site, 1, &v)) != RESDIAG_OK)
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

const char *resdiag_reader_callsite(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                    int sublayer, resdiag_site site)
{
    static const char fn[] = "resdiag_reader_callsite";
    if (!rd) {
        rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: reader is NULL", fn);
        return "";
    }
    if (rd->merge)
        return rd_merge_callsite(rd->merge, dir, layer, sublayer, site);
    if (check_site(rd, dir, layer, sublayer, site, fn) != RESDIAG_OK)
        return "";
    if (site_not_in_file(rd, site))
        return "";
    int table;
    size_t slot;
    rd_tables_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return rd->callsites[rd->lay.tables[table].slot_offset + slot];
}

resdiag_status resdiag_reader_series(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                     int sublayer, resdiag_site site, resdiag_field field,
                                     double *out, int64_t n)
{
    static const char fn[] = "resdiag_reader_series";
    if (!rd || (!out && n > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_series(rd->merge, dir, layer, sublayer, site, field, out, n);
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
    return read_slot(rd, table, slot, 0, (hsize_t)n, (hsize_t)field, 1, out);
}

/* ------------------------------------------------------ generic datasets */

static const series *find_series(const resdiag_reader *rd, const char *name)
{
    if (name[0] == '/')
        name++;
    for (int i = 0; i < rd->n_series; i++)
        if (strcmp(rd->series[i].name, name) == 0)
            return &rd->series[i];
    return NULL;
}

int resdiag_reader_n_datasets(const resdiag_reader *rd)
{
    if (rd && rd->merge)
        return rd->merge->n_datasets;
    return rd ? rd->n_series : 0;
}

const char *resdiag_reader_dataset_name(const resdiag_reader *rd, int i)
{
    if (rd && rd->merge)
        return i >= 0 && i < rd->merge->n_datasets ? rd->merge->datasets[i] : NULL;
    if (!rd || i < 0 || i >= rd->n_series)
        return NULL;
    return rd->series[i].name;
}

resdiag_status resdiag_reader_dims(const resdiag_reader *rd, const char *name, int64_t *dims,
                                   int max_rank, int *rank)
{
    static const char fn[] = "resdiag_reader_dims";
    if (!rd || !name || !rank || (!dims && max_rank > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_dims(rd->merge, name, dims, max_rank, rank);
    const series *s = find_series(rd, name);
    if (!s)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn,
                          rd->path, name);
    *rank = s->rank + 1;
    if (max_rank < s->rank + 1)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: /%s has %d axes, max_rank is %d", fn,
                          s->name, s->rank + 1, max_rank);
    dims[0] = rd->root.info.n_steps;
    for (int i = 0; i < s->rank; i++)
        dims[i + 1] = (int64_t)s->dims[i];
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_read(const resdiag_reader *rd, const char *name, int64_t first,
                                   int64_t count, double *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_read";
    if (!rd || !name || (!out && count > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_read(rd->merge, name, first, count, out, out_len);
    const series *s = find_series(rd, name);
    if (!s)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn,
                          rd->path, name);
    if (first < 0 || count < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: first = %lld, count = %lld", fn,
                          (long long)first, (long long)count);
    /* (first + count may not fit in an int64_t: it is never computed) */
    if (first > rd->root.info.n_steps || count > rd->root.info.n_steps - first)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps; asked for %lld "
                          "from index %lld", fn, rd->path, (long long)rd->root.info.n_steps,
                          (long long)count, (long long)first);
    size_t per = 1;
    for (int i = 0; i < s->rank; i++)
        per *= (size_t)s->dims[i];
    if ((size_t)count > out_len / per)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: %lld steps of /%s need %zu doubles, "
                          "out_len is %zu", fn, (long long)count, s->name, (size_t)count * per,
                          out_len);
    if (count == 0)
        return RESDIAG_OK;
    hsize_t start[RD_MAX_RANK + 1] = { 0 }, cnt[RD_MAX_RANK + 1];
    start[0] = (hsize_t)first;
    cnt[0] = (hsize_t)count;
    for (int i = 0; i < s->rank; i++)
        cnt[i + 1] = s->dims[i];
    /* A memory space of the selection's own shape: HDF5 then copies whole
     * blocks instead of iterating element by element. */
    return read_values(rd, s, start, cnt, out);
}

/* ------------------------------------------------------ stored chunks */

resdiag_status rd_reader_chunks(const resdiag_reader *rd, const char *name, int64_t *n_chunks)
{
    static const char fn[] = "rd_reader_chunks";
    *n_chunks = -1;
    if (rd->merge) /* merged: counts as stored everywhere (each read asks the ranks) */
        return rd_merge_has_dataset(rd->merge, name)
                   ? RESDIAG_OK
                   : rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"",
                                fn, rd->path, name);
    const series *s = find_series(rd, name);
    if (!s)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn,
                          rd->path, name);
    if (s->chunk[0] == 0)
        return RESDIAG_OK;
    hsize_t n = 0;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    hid_t sp = H5Dget_space(s->ds); /* (HDF5 1.10 counts every chunk whatever it selects) */
    if (sp < 0 || H5Dget_num_chunks(s->ds, sp, &n) < 0)
        st = rd_h5_fail_call(rd->path, s->name);
    else
        *n_chunks = n > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)n;
    if (sp >= 0)
        H5Sclose(sp);
    rd_h5_quiet_end(&q);
    return st;
}

/* Axis i (after the step axis) of series s's first dataset in the file: a
 * schema-2 STATS table's holds the real fields only. */
static hsize_t file_dim(const series *s, int i)
{
    return s->counts_ds >= 0 && i == s->rank - 1 ? RD_N_REAL_FIELDS : s->dims[i];
}

resdiag_status rd_reader_stored(const resdiag_reader *rd, const char *name, int64_t step_index,
                                int *n_stored, int64_t *row_end)
{
    static const char fn[] = "rd_reader_stored";
    *n_stored = 1;
    *row_end = step_index + 1;
    if (rd->merge) {
        *row_end = rd->merge->info.n_steps;
        return rd_merge_has_dataset(rd->merge, name)
                   ? RESDIAG_OK
                   : rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"",
                                fn, rd->path, name);
    }
    const series *s = find_series(rd, name);
    if (!s)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn,
                          rd->path, name);
    resdiag_status st;
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if (s->chunk[0] == 0) {
        *row_end = rd->root.info.n_steps; /* contiguous: all there, or nothing */
        return RESDIAG_OK;
    }
    hsize_t cs = s->chunk[0], row = (hsize_t)step_index / cs * cs;
    int64_t n_steps = rd->root.info.n_steps;
    *row_end = row + cs < (hsize_t)n_steps ? (int64_t)(row + cs) : n_steps;
    /* every chunk of that row of chunks (at most MAX_CHUNKS_PER_STEP), the
     * last axis fastest */
    hsize_t off[RD_MAX_RANK + 1] = { row };
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    *n_stored = 0;
    for (;;) {
        hsize_t bytes = 0;
        /* (an error counts as stored: the read will say what it is) */
        if (H5Dget_chunk_storage_size(s->ds, off, &bytes) < 0 || bytes > 0)
            ++*n_stored;
        int k = s->rank;
        while (k > 0 && (off[k] += s->chunk[k]) >= file_dim(s, k - 1))
            off[k--] = 0;
        if (k == 0)
            break;
    }
    rd_h5_quiet_end(&q);
    return RESDIAG_OK;
}

void rd_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->stored = 1;
    c->left = -1;
    c->present = rd->merge ? rd_merge_has_dataset(rd->merge, name) : find_series(rd, name) != NULL;
    if (c->present && rd_reader_chunks(rd, name, &c->left) != RESDIAG_OK)
        c->left = -1; /* cannot tell: every step counts as stored (and its read fails) */
}

int rd_stored_at(const resdiag_reader *rd, rd_stored_cursor *c, int64_t si, int64_t *next)
{
    *next = INT64_MAX; /* absent, or every stored chunk met: NaN to the end */
    if (!c->present)
        return 0;
    if (c->left < 0)
        return 1;
    if (si >= c->row_end) {
        /* (only past the row looked up last: the chunks met may be in it) */
        if (c->left == 0)
            return 0;
        int n_stored = 1;
        if (rd_reader_stored(rd, c->name, si, &n_stored, &c->row_end) != RESDIAG_OK) {
            c->left = -1;
            return 1;
        }
        c->stored = n_stored > 0;
        c->left = c->left > n_stored ? c->left - n_stored : 0;
    }
    if (c->stored)
        return 1;
    *next = c->row_end;
    return 0;
}

/* The name of 0.1.0, kept for callers written against it. */
void resdiag_reader_close(resdiag_reader *rd)
{
    resdiag_reader_destroy(rd);
}
