/*
 * ranks.c - the names of a job's rank files: rank 0 keeps the path the
 * trainer gave, so that `resdiag report run.h5` names the run as the user
 * does; the others sit beside it with the rank in the name, so that a
 * directory listing groups them and the reader finds them from that one
 * path without listing the directory (doc/RANKS.md). Also the names of
 * the splits as the file stores them.
 */
#include <stdio.h>
#include <string.h>

#include "format/format.h"
#include "resdiag.h"

resdiag_status resdiag_rank_path(char *out, size_t out_len, const char *path, int rank)
{
    if (!out || !path)
        return RESDIAG_E_NULL;
    if (rank < 0)
        return RESDIAG_E_INVALID;
    size_t n = strlen(path);
    int w;
    if (rank == 0)
        w = snprintf(out, out_len, "%s", path);
    else if (n > 3 && strcmp(path + n - 3, ".h5") == 0)
        w = snprintf(out, out_len, "%.*s.rank%05d.h5", (int)(n - 3), path, rank);
    else
        w = snprintf(out, out_len, "%s.rank%05d", path, rank);
    if (w < 0 || (size_t)w >= out_len) {
        if (out_len > 0)
            out[0] = '\0';
        return RESDIAG_E_RANGE;
    }
    return RESDIAG_OK;
}

const char *rd_split_name(int split)
{
    static const char *const names[] = { "none", "data", "sequence", "tensor", "pipeline" };
    if (split < 0 || split >= (int)(sizeof names / sizeof *names))
        return NULL;
    return names[split];
}
