/*
 * writer_close.c - closes a run file: a last flush (with room reserved,
 * or detached when it fails: writer_space.c), every dataset before the
 * file, and the first error of the run, if any, returned; and frees the
 * writer.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5/common.h"
#include "h5/space.h"
#include "h5/writer_state.h"

void rd_writer_free(rd_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0)
                H5Dclose(w->part[i][p].ds);
        if (w->callsite_ds[i] >= 0)
            H5Dclose(w->callsite_ds[i]);
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0)
            H5Dclose(w->summary_ds[i]);
    if (w->steps_ds >= 0)
        H5Dclose(w->steps_ds);
    if (w->time_ds >= 0)
        H5Dclose(w->time_ds);
    if (w->callsite_type >= 0)
        H5Tclose(w->callsite_type);
    free(w->callsite_buf);
    free(w->summary_buf);
    free(w->pack);
    free(w->path);
    if (w->lock_fd >= 0)
        close(w->lock_fd);
    free(w);
}

/* ----------------------------------------------------------------- close */

/* Returns the first error of an earlier append if there was one (the file
 * then holds every step appended before it), else the close's own. */
resdiag_status rd_writer_close(rd_writer *w, char *err, size_t errlen)
{
    if (!w)
        return RESDIAG_OK;
    rd_h5_quiet q;
    werr e;
    memset(&e, 0, sizeof e);
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet_begin(&q);
    if (w->file >= 0 && !w->space.detached) {
        /* Every append ended with a flush, so this one has little or
         * nothing to write; reserve for it anyway (where the margin would
         * cross the file size limit, rd_writer_reserve_room() allocates nothing, and the
         * flush writes only inside what HDF5 has allocated, which the
         * appends kept within the limit). If it fails, close detached.
         * After a successful flush, closing only rewrites the superblock
         * in place (it allocates nothing). */
        werr ignored;
        memset(&ignored, 0, sizeof ignored);
        rd_writer_reserve_room(w, rd_writer_metadata_margin(w), &ignored);
        errno = 0;
        if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "file (final flush)";
            rd_writer_detach(w);
        }
        rd_writer_release_room(w);
    }
    /* Datasets before the file: the file is only really closed with its
     * last object. */
    hid_t *ids[(MAX_PARTS + 1) * RD_N_TABLES + RD_N_SUMMARY + 3];
    int n_ids = 0;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++)
            ids[n_ids++] = &w->part[i][p].ds;
        ids[n_ids++] = &w->callsite_ds[i];
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        ids[n_ids++] = &w->summary_ds[i];
    ids[n_ids++] = &w->time_ds;
    ids[n_ids++] = &w->steps_ds;
    ids[n_ids++] = &w->callsite_type;
    for (int i = 0; i < n_ids; i++) {
        if (*ids[i] < 0)
            continue;
        errno = 0;
        herr_t r = i == n_ids - 1 ? H5Tclose(*ids[i]) : H5Dclose(*ids[i]);
        if (r < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "dataset (close)";
        }
        *ids[i] = H5I_INVALID_HID;
    }
    if (w->file >= 0) {
        errno = 0;
        if (H5Fclose(w->file) < 0) {
            rd_h5_capture(&e.h5, errno);
            e.object = "file (close)";
        }
        w->file = w->space.file = H5I_INVALID_HID;
    }
    if (w->failed) {
        st = set_err(err, errlen, w->failed, "%s", w->failed_msg);
    } else if (e.h5.captured) {
        st = h5_status(&e);
        set_err(err, errlen, st, "closing run file %s %s: %s: %s", w->path,
                w->space.detached ? "left it as a killed writer would" : "failed", e.object,
                e.h5.msg);
    }
    rd_writer_free(w);
    rd_h5_quiet_end(&q);
    return st;
}
