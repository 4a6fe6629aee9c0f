/*
 * writer_append.c - appends batches of step records to a run file under
 * HDF5 SWMR, so that readers can follow the run and a killed trainer
 * leaves every flushed step readable: each table (only the chunks that
 * hold data, in the file's types), the summary, /step_time and the call
 * sites, then /steps.
 *
 * Commit order. Each append is committed in two flushes: first every table,
 * the summary, step_time and the call sites are extended, written and
 * flushed; only then is /steps extended, written and flushed. A reader
 * trusts a step only once its step number is on disk (and never reads past
 * the shortest first axis), so a step is either wholly there or not at all,
 * whenever the writer dies.
 * Before each phase the room it may allocate is reserved
 * (writer_space.c); the first failure is kept and returned to every later
 * call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "format/format.h"
#include "format/metric_value.h"
#include "format/tables.h"
#include "h5/common.h"
#include "h5/file_types.h"
#include "h5/space.h"
#include "h5/writer_state.h"

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
    int ax = rd_writer_site_axis(w, i);
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
    int ax = rd_writer_site_axis(w, i);
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
    int ax = rd_writer_site_axis(w, i);
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
    off_t need = rd_writer_metadata_margin(w) + rd_writer_index_margin(w, n)
                 + rd_space_new_chunk_bytes(&w->series_chunk, w->n_written, n)
                 + (callsites_changed ? w->callsite_bytes : 0);
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (lay->tables[i].count > 0 && w->part[i][p].ds >= 0)
                need += rd_space_new_chunk_bytes(&w->part[i][p].chunk, w->n_written, n);
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0)
            need += rd_space_new_chunk_bytes(&w->summary_chunk[i], w->n_written, n);
    if (!rd_writer_reserve_room(w, need, &e))
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
    rd_writer_release_room(w);

    /* Phase 2: the step numbers commit the steps. */
    if (n > 0) {
        need = rd_writer_metadata_margin(w)
               + rd_space_new_chunk_bytes(&w->series_chunk, w->n_written, n);
        if (!rd_writer_reserve_room(w, need, &e)) {
            /* Phase 1 is on disk, but without step numbers those steps
             * do not count; the file is consistent. */
            goto cleanup;
        }
        if (!append_rows(w->steps_ds, RD_STEPS_NAME, H5T_NATIVE_INT64, 0, NULL, w->n_written, n,
                         steps, &e)
            || !flush_file(w, &e))
            goto cleanup;
        rd_writer_release_room(w);
    }
    w->n_written += n;
    rd_h5_quiet_end(&q);
    return RESDIAG_OK;

cleanup:
    if (!e.before_hdf5)
        rd_writer_detach(w);
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
