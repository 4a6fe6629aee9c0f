/*
 * reader.c - the public reader (resdiag.h): opens a run, one file or a
 * job's ranks merged into one view, and answers every call on it: a
 * merged reader's from the merge (merge.h), any other from the reader of
 * one file (reader_file.h). It is the one unit above both; the calls go
 * one way only:
 *
 *     reader_*.c (one file)  <-  rank_files.c, merge.c  <-  reader.c
 *
 * Each call checks its NULL arguments (and clears its outputs) here, then
 * hands the rest on with the same arguments. The calls about a job's
 * ranks are here too: how many ranks the run has and each one's state,
 * one rank's own file opened by itself, and for the analysis the reader
 * of each merged rank's own file.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "h5/common.h"
#include "h5/merge.h"
#include "h5/reader.h"
#include "h5/reader_file.h"
#include "h5/reader_state.h"
#include "h5/reader_stored.h"
#include "h5/run_file_guard.h"

/* -------------------------------------------------------- open and close */

resdiag_status resdiag_reader_open(resdiag_reader **out, const char *path)
{
    resdiag_reader *rd0 = NULL;
    resdiag_status st = rd_file_open(out, path);
    if (st != RESDIAG_OK)
        return st;
    rd0 = *out;
    const resdiag_run_info *in = rd_file_info(rd0);
    if (in->world_size <= 1 || in->rank != 0)
        return RESDIAG_OK; /* one process, or one rank's file named directly */
    *out = NULL;
    resdiag_reader *rd = rd_file_alloc(path);
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

void resdiag_reader_destroy(resdiag_reader *rd)
{
    if (!rd)
        return;
    rd_merge_free(rd->merge); /* a merged reader's ranks, each closing its file */
    rd_file_destroy(rd);
}

/* The name of 0.1.0, kept for callers written against it. */
void resdiag_reader_close(resdiag_reader *rd)
{
    resdiag_reader_destroy(rd);
}

const resdiag_run_info *resdiag_reader_info(const resdiag_reader *rd)
{
    if (rd && rd->merge)
        return &rd->merge->info;
    return rd ? rd_file_info(rd) : NULL;
}

resdiag_status resdiag_reader_refresh(resdiag_reader *rd)
{
    if (!rd)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_refresh: reader is NULL");
    if (rd->merge)
        return rd_merge_refresh(rd->merge);
    return rd_file_refresh(rd);
}

/* --------------------------------------------------------------- getters */

resdiag_status resdiag_reader_steps(const resdiag_reader *rd, int64_t *out, int64_t n)
{
    if (!rd || (!out && n > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_steps: NULL argument");
    if (rd->merge)
        return rd_merge_steps(rd->merge, out, n);
    return rd_file_steps(rd, out, n);
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
    return rd_file_site(rd, step_index, dir, layer, sublayer, site, out, observed);
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
    return rd_file_sketch(rd, step_index, dir, layer, sublayer, site, out);
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
    return rd_file_param(rd, step_index, layer, name, out, observed);
}

resdiag_status resdiag_reader_update(const resdiag_reader *rd, int64_t step_index, int layer,
                                     int sublayer, double *out)
{
    static const char fn[] = "resdiag_reader_update";
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_update(rd->merge, step_index, layer, sublayer, out);
    return rd_file_update(rd, step_index, layer, sublayer, out);
}

resdiag_status resdiag_reader_metric(const resdiag_reader *rd, int metric, int64_t first,
                                     int64_t n, double *out)
{
    static const char fn[] = "resdiag_reader_metric";
    if (!rd || (!out && n > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_metric(rd->merge, metric, first, n, out);
    return rd_file_metric(rd, metric, first, n, out);
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
    return rd_file_step_aborted(rd, step_index, aborted);
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
    return rd_file_abort_reason(rd, step_index, out, out_len);
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
    return rd_file_alias(rd, step_index, dir, layer, sublayer, site, same_as);
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
    return rd_file_callsite(rd, dir, layer, sublayer, site);
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
    return rd_file_series(rd, dir, layer, sublayer, site, field, out, n);
}

/* ------------------------------------------------------ generic datasets */

int resdiag_reader_n_datasets(const resdiag_reader *rd)
{
    if (rd && rd->merge)
        return rd->merge->n_datasets;
    return rd ? rd_file_n_datasets(rd) : 0;
}

const char *resdiag_reader_dataset_name(const resdiag_reader *rd, int i)
{
    if (rd && rd->merge)
        return i >= 0 && i < rd->merge->n_datasets ? rd->merge->datasets[i] : NULL;
    return rd ? rd_file_dataset_name(rd, i) : NULL;
}

resdiag_status resdiag_reader_dims(const resdiag_reader *rd, const char *name, int64_t *dims,
                                   int max_rank, int *rank)
{
    static const char fn[] = "resdiag_reader_dims";
    if (!rd || !name || !rank || (!dims && max_rank > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_dims(rd->merge, name, dims, max_rank, rank);
    return rd_file_dims(rd, name, dims, max_rank, rank);
}

resdiag_status resdiag_reader_read(const resdiag_reader *rd, const char *name, int64_t first,
                                   int64_t count, double *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_read";
    if (!rd || !name || (!out && count > 0))
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (rd->merge)
        return rd_merge_read(rd->merge, name, first, count, out, out_len);
    return rd_file_read(rd, name, first, count, out, out_len);
}

/* --------------------------------------------------------- stored chunks */

void rd_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name)
{
    if (rd->merge) /* merged: counts as stored everywhere (each read asks the ranks) */
        rd_stored_begin(c, name, rd_merge_has_dataset(rd->merge, name));
    else
        rd_file_stored_init(rd, c, name);
}

/* ---------------------------------------------------------------- ranks */

resdiag_status resdiag_reader_open_rank(resdiag_reader **out, const char *path, int rank)
{
    static const char fn[] = "resdiag_reader_open_rank";
    if (!out || !path)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    *out = NULL;
    if (rank == RESDIAG_RANK_ALL)
        return resdiag_reader_open(out, path);
    if (rank < 0)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: rank %d (a rank is >= 0, or "
                          "RESDIAG_RANK_ALL)", fn, rank);
    char name[PATH_MAX + 32];
    if (resdiag_rank_path(name, sizeof name, path, rank) != RESDIAG_OK)
        return rd_h5_fail(RESDIAG_E_INVALID, "%s: the path %.200s is too long", fn, path);
    struct stat sb;
    int err = lstat(name, &sb) != 0 ? errno : 0;
    if (err == ENOENT || err == ENOTDIR)
        return rd_h5_fail(RESDIAG_E_NOT_FOUND, "rank %d of run %s has no file (%s)", rank, path,
                          name);
    if (rank > 0 && !err && S_ISLNK(sb.st_mode))
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: a symbolic link (resdiag opens only "
                          "regular files as ranks' files)", name);
    resdiag_status st = rd_file_open(out, name);
    if (st != RESDIAG_OK)
        return st;
    int got = resdiag_reader_info(*out)->rank;
    if (got != rank) {
        resdiag_reader_destroy(*out);
        *out = NULL;
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: its rank attribute is %d, not %d", name,
                          got, rank);
    }
    return RESDIAG_OK;
}

int resdiag_reader_n_ranks(const resdiag_reader *rd)
{
    const rd_merge *m = rd_reader_merge(rd);
    return m ? m->world_size : rd ? 1 : 0;
}

resdiag_status resdiag_reader_rank(const resdiag_reader *rd, int i, resdiag_rank_info *out)
{
    static const char fn[] = "resdiag_reader_rank";
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    if (out->struct_size < sizeof *out)
        return rd_h5_fail(RESDIAG_E_INVALID, "client bug: %s: struct_size is %zu, expected %zu",
                          fn, out->struct_size, sizeof *out);
    int n = resdiag_reader_n_ranks(rd);
    if (i < 0 || i >= n)
        return rd_h5_fail(RESDIAG_E_RANGE, "client bug: %s: rank %d is outside 0..%d", fn, i,
                          n - 1);
    const rd_merge *m = rd_reader_merge(rd);
    if (m) {
        rd_merge_rank_info(m, i, out);
        return RESDIAG_OK;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    out->rank = in->rank;
    out->state = RESDIAG_RANK_MERGED;
    out->path = rd_file_path(rd);
    out->n_steps = in->n_steps;
    out->last_step = rd_file_last_step(rd);
    out->why = "";
    return RESDIAG_OK;
}

const resdiag_reader *rd_reader_rank_reader(const resdiag_reader *rd, int r)
{
    const rd_merge *m = rd_reader_merge(rd);
    if (!m)
        return rd && r == 0 ? rd : NULL;
    const rd_rank_entry *e = rd_merge_entry(m, r);
    return e ? e->rd : NULL;
}

/* The worse of two states: WRITING, then NOT_CLOSED, then UNKNOWN, then CLOSED. */
static resdiag_file_state worse_state(resdiag_file_state a, resdiag_file_state b)
{
    static const int rank[] = { [RESDIAG_FILE_CLOSED] = 0, [RESDIAG_FILE_UNKNOWN] = 1,
                                [RESDIAG_FILE_NOT_CLOSED] = 2, [RESDIAG_FILE_WRITING] = 3 };
    return rank[b] > rank[a] ? b : a;
}

resdiag_status resdiag_reader_file_state(const resdiag_reader *rd, resdiag_file_state *out)
{
    if (!rd || !out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_file_state: NULL argument");
    if (!rd->merge) {
        *out = rd_run_file_state(rd_file_path(rd));
        return RESDIAG_OK;
    }
    resdiag_file_state st = RESDIAG_FILE_CLOSED;
    for (int r = 0; r < resdiag_reader_n_ranks(rd); r++) {
        const resdiag_reader *one = rd_reader_rank_reader(rd, r);
        if (one) /* a rank without a file has no writer to speak of */
            st = worse_state(st, rd_run_file_state(rd_file_path(one)));
    }
    *out = st;
    return RESDIAG_OK;
}
