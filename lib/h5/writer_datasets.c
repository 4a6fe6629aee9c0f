/*
 * writer_datasets.c - every group and dataset of a new run file
 * (doc/FORMAT.md): /steps, /step_time, each table with its call sites, and
 * the per-step summary, each described (writer_attrs.c), with the chunk
 * shape, fill value and filters that the appends and the readers rely on.
 *
 * Torn writes. Linux copies a write() into the page cache one 4 KiB page at
 * a time and checks for a fatal signal between pages, so a SIGKILL can
 * leave a metadata block that spans a page boundary half new, half old:
 * its checksum then fails and the dataset cannot be read. Where space is
 * reserved (writer_space.c), the file therefore uses HDF5's paged
 * aggregation with 4 KiB pages (writer_create.c), which keeps every
 * metadata block smaller than a page inside one page; the tables index
 * their chunks with a v2 B-tree (two unlimited axes; its nodes are 2 KiB),
 * not an extensible array, whose data blocks
 * outgrow a page in long runs; and the call-site datasets are allocated
 * when created, so that writing them changes no metadata. Without
 * reservation the file keeps the default layout (paged aggregation cannot
 * close after a failed write) and every growing dataset's header is moved
 * inside one page instead (keep_headers_in_one_page). tests/test-kill.c
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
 * table_part); the writer converts every value itself (pack_rows in
 * writer_append.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/common.h"
#include "h5/file_types.h"
#include "h5/writer_state.h"

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

int rd_h5_writer_summary = 1;

/* A new group `name` without times (and with its attributes' creation
 * order kept when keep_order); failures name `object`. Close it. */
hid_t rd_writer_create_group(hid_t file, const char *name, int keep_order, const char *object,
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
    hid_t g = rd_writer_create_group(file, group, 0, path, e);
    if (g < 0)
        return 0;
    H5Gclose(g);
    return 1;
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
int rd_writer_site_axis(const rd_writer *w, int table)
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
    int split = rd_writer_site_axis(w, i);
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
           && rd_writer_describe_fields(pt->ds, part_description(t, pt, desc, sizeof desc),
                                        t->units, t->axes, hdr, pt->map, pt->width, e);
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
        || !rd_writer_describe(w->callsite_ds[i],
                               "\"file:line\" of the trainer code that called the hook at each "
                               "slot of the table (\"\": never observed; the first call of the "
                               "latest step that observed the slot)",
                               "text", strchr(axes, ',') ? strchr(axes, ',') + 1 : "", hdr, e))
        return 0;
    return 1;
}

/* /steps, /step_time, every table with its call sites, and the summary. */
int rd_writer_create_datasets(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e)
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
        || !rd_writer_describe(w->steps_ds,
                               "the trainer's step number of each recorded step (-1: never "
                               "written)",
                               "step", "step", hdr, e))
        return 0;
    w->time_ds = create_series(file, RD_STEP_TIME_NAME, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &nan,
                               0, NULL, -1, 0, series_chunk, 8, 0, e);
    if (w->time_ds < 0
        || !rd_writer_describe(w->time_ds,
                               "time of the end of each recorded step since the run was opened",
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
            || !rd_writer_describe(w->summary_ds[i], t->description, t->units, t->axes, hdr, e))
            return 0;
    }
    return 1;
cleanup:
    return 0;
}

/* Every growing dataset's header inside one page (see
 * rd_space_keep_header_in_one_page), before readers may look. */
int rd_writer_keep_headers_in_one_page(rd_writer *w, hid_t file, werr *e)
{
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0
                && !rd_writer_keep_header_in_one_page(file, &w->part[i][p].ds,
                                                      w->part[i][p].name, e))
                return 0;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0
            && !rd_writer_keep_header_in_one_page(file, &w->summary_ds[i],
                                                  w->lay.summary[i].name, e))
            return 0;
    if (!rd_writer_keep_header_in_one_page(file, &w->time_ds, RD_STEP_TIME_NAME, e)
        || !rd_writer_keep_header_in_one_page(file, &w->steps_ds, RD_STEPS_NAME, e))
        return 0;
    return 1;
}

