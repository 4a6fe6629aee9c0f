/*
 * reader_datasets.c - the generic dataset API (resdiag.h) on one run file:
 * the time series it holds (/steps, /step_time, every table present, the
 * summary), their shapes, and a block of steps of any of them as doubles
 * (reader_values.c).
 */
#include <string.h>

#include "h5/common.h"
#include "h5/reader_file.h"
#include "h5/reader_state.h"

const series *rd_reader_find_series(const resdiag_reader *rd, const char *name)
{
    if (name[0] == '/')
        name++;
    for (int i = 0; i < rd->n_series; i++)
        if (strcmp(rd->series[i].name, name) == 0)
            return &rd->series[i];
    return NULL;
}

int rd_file_n_datasets(const resdiag_reader *rd)
{
    return rd->n_series;
}

const char *rd_file_dataset_name(const resdiag_reader *rd, int i)
{
    if (i < 0 || i >= rd->n_series)
        return NULL;
    return rd->series[i].name;
}

resdiag_status rd_file_dims(const resdiag_reader *rd, const char *name, int64_t *dims,
                            int max_rank, int *rank)
{
    static const char fn[] = "resdiag_reader_dims";
    const series *s = rd_reader_find_series(rd, name);
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

resdiag_status rd_file_read(const resdiag_reader *rd, const char *name, int64_t first,
                            int64_t count, double *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_read";
    const series *s = rd_reader_find_series(rd, name);
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
    return rd_reader_read_values(rd, s, start, cnt, out);
}
