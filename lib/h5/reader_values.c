/*
 * reader_values.c - reads a block of a time series of one file as the
 * step record has it. Schema 1 stores every value as a float64, schema 2
 * each at its type (file_types.h; a STATS table as two datasets, joined by
 * read_split): the reader gives both as doubles with NaN where nothing was
 * observed, so nothing above lib/h5 sees the schema. A filtered dataset is
 * never read through HDF5's filters, whose deflate inflates a chunk
 * without limit: it is chunked one step per chunk, as the writer does, and
 * chunk_decode.c inflates each chunk into exactly its size or refuses it
 * (rd_reader_read_block); it keeps one decoded step per dataset, forgotten at
 * refresh.
 */
#include <stdlib.h>
#include <string.h>

#include "format/tables.h"
#include "h5/chunk_decode.h"
#include "h5/common.h"
#include "h5/file_types.h"
#include "h5/reader_state.h"

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
resdiag_status rd_reader_read_block(const resdiag_reader *rd, hid_t ds, const char *name,
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
        st = rd_reader_read_block(rd, se->ds, se->name, H5T_NATIVE_DOUBLE, st2, ct2, last + 1,
                                  ct2, real);
    st2[last] = kc;
    ct2[last] = nc;
    if (st == RESDIAG_OK && nc > 0) {
        st = rd_reader_read_block(rd, se->counts_ds, rd->lay.tables[se->table].counts_name,
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
resdiag_status rd_reader_read_values(const resdiag_reader *rd, const series *se,
                                     const hsize_t *start, const hsize_t *count, double *out)
{
    if (se->counts_ds >= 0)
        return read_split(rd, se, start, count, out);
    int is_int = rd_ftype_is_int(se->ft) && se->table >= 0;
    resdiag_status st = rd_reader_read_block(rd, se->ds, se->name,
                                             is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE,
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
resdiag_status rd_reader_read_slot(const resdiag_reader *rd, int table, size_t slot,
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
    return rd_reader_read_values(rd, se, start, count, out);
}
