/*
 * reader_stored.c - which stretches of a time series of one file hold
 * stored data (reader_stored.h): the chunks HDF5 has allocated, looked up
 * one row of chunks (at most MAX_CHUNKS_PER_STEP of reader_tables.c) at a
 * time, and the cursor that asks step by step.
 */
#include <stdint.h>
#include <string.h>

#include "h5/common.h"
#include "h5/reader_state.h"
#include "h5/reader_stored.h"

/* *n_chunks: the chunks of time series `name` stored in the file, over its
 * whole extent; -1 when it is not chunked. RESDIAG_OK, or the status of a
 * bad name or an HDF5 failure (logged). */
static resdiag_status rd_reader_chunks(const resdiag_reader *rd, const char *name,
                                       int64_t *n_chunks)
{
    static const char fn[] = "rd_reader_chunks";
    *n_chunks = -1;
    const series *s = rd_reader_find_series(rd, name);
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

/* For time series `name` at recorded step step_index: *n_stored the stored
 * chunks of the row of chunks that holds the step (0: every value of
 * those steps is the fill value), *row_end the step index where that row
 * ends (at most n_steps). A dataset that is not chunked counts as one
 * stored chunk over all steps. RESDIAG_OK, or the status of a bad name or
 * step index (logged). */
static resdiag_status rd_reader_stored(const resdiag_reader *rd, const char *name,
                                       int64_t step_index, int *n_stored, int64_t *row_end)
{
    static const char fn[] = "rd_reader_stored";
    *n_stored = 1;
    *row_end = step_index + 1;
    const series *s = rd_reader_find_series(rd, name);
    if (!s)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn,
                          rd->path, name);
    resdiag_status st;
    if ((st = rd_reader_check_step(rd, step_index, fn)) != RESDIAG_OK)
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

void rd_stored_begin(rd_stored_cursor *c, const char *name, int present)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->stored = 1;
    c->left = -1;
    c->present = present;
}

void rd_file_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name)
{
    rd_stored_begin(c, name, rd_reader_find_series(rd, name) != NULL);
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
