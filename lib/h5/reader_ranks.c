/*
 * reader_ranks.c - the public calls about a job's ranks (resdiag.h,
 * doc/RANKS.md): how many ranks the run has and each one's state, and one
 * rank's own file opened by itself; and, for the analysis, the reader of
 * each merged rank's own file. Part of the public reader, above the merge
 * (merge.h) and the reader of one file (reader_file.h).
 */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>

#include "h5/common.h"
#include "h5/merge.h"
#include "h5/reader.h"
#include "h5/reader_file.h"

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
