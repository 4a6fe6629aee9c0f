/*
 * reader_refresh.c - what a reader of one file reads again whenever the
 * writer may have gone on (at open, and at each resdiag_reader_refresh):
 * how many steps are there, and the call sites.
 *
 * Which steps are there: the shortest first axis over /steps, /step_time and
 * every table, cut at the first step number that is not a written one (-1,
 * the fill value, or not larger than the one before). The writer writes
 * /steps last, after everything else of those steps was flushed
 * (writer_append.c).
 */
#include <limits.h>
#include <stdlib.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/chunk_decode.h"
#include "h5/common.h"
#include "h5/reader_file.h"
#include "h5/reader_state.h"

#define STEP_BLOCK 65536 /* steps read at a time when checking /steps */

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
resdiag_status rd_reader_count_steps(resdiag_reader *rd)
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
resdiag_status rd_reader_read_callsites(resdiag_reader *rd)
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
                const char *p = rd_intern_str(&rd->pool, s);
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

resdiag_status rd_file_refresh(resdiag_reader *rd)
{
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
    if ((st = rd_reader_count_steps(rd)) == RESDIAG_OK)
        st = rd_reader_read_callsites(rd);
done:
    rd_h5_quiet_end(&q);
    return st;
}
