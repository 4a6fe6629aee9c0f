/*
 * writer_create.c - creates a run file (doc/FORMAT.md) in a path that
 * run_file_guard.c claimed: the header checked, HDF5's file made (paged
 * aggregation where space can be reserved: writer_datasets.c, "Torn
 * writes"), the root attributes and /meta written (writer_attrs.c), every
 * dataset created (writer_datasets.c) and attached to its scales
 * (writer_scales.c), and SWMR writing started. A file this call created
 * is removed again when it fails; nothing else is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/common.h"
#include "h5/file_fd.h"
#include "h5/run_file_guard.h"
#include "h5/space.h"
#include "h5/writer_state.h"

/* What creating the objects may write. */
#define RESERVE_CREATE ((off_t)1 << 20)

void (*rd_h5_writer_before_create)(const char *path) = NULL;

/* A writer with nothing open yet; NULL when out of memory. */
static rd_writer *writer_new(const char *path, const rd_tables *tables)
{
    rd_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->file = w->space.file = w->steps_ds = w->time_ds = w->callsite_type = H5I_INVALID_HID;
    w->space.fd = w->lock_fd = -1;
    for (int i = 0; i < RD_N_TABLES; i++) {
        w->callsite_ds[i] = H5I_INVALID_HID;
        for (int p = 0; p < MAX_PARTS; p++)
            w->part[i][p].ds = H5I_INVALID_HID;
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        w->summary_ds[i] = H5I_INVALID_HID;
    w->lay = *tables;
    w->path = strdup(path);
    w->callsite_buf = calloc(w->lay.n_slots ? w->lay.n_slots : 1, RD_CALLSITE_LEN);
    if (!w->path || !w->callsite_buf) {
        rd_writer_free(w);
        return NULL;
    }
    return w;
}

/* 1 if role is NULL (none declared) or one of names[0..n-1]. */
static int role_names_one_of(const char *role, const char *const *names, int n)
{
    if (!role)
        return 1;
    for (int i = 0; names && i < n; i++)
        if (names[i] && strcmp(names[i], role) == 0)
            return 1;
    return 0;
}

resdiag_status rd_writer_create(rd_writer **out, const char *path, const rd_file_header *hdr,
                                char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!out || !path || !hdr || !hdr->model || !hdr->tables)
        return set_err(err, errlen, RESDIAG_E_NULL,
                       "client bug: rd_writer_create: NULL argument");
    if (hdr->record_chunk_steps < 1)
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: record_chunk_steps %d < 1",
                       hdr->record_chunk_steps);
    if (hdr->file_schema < 0 || hdr->file_schema > RD_SCHEMA_VERSION || hdr->compression < 0
        || hdr->compression > 9)
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: file_schema %d (1..%d) or compression %d "
                       "(0..9)", hdr->file_schema, RD_SCHEMA_VERSION, hdr->compression);
    if (hdr->tables->n_block_sites !=
        rd_block_sites(hdr->file_schema ? hdr->file_schema : RD_SCHEMA_VERSION))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: tables of %d block sites for schema %d",
                       hdr->tables->n_block_sites, hdr->file_schema);
    /* A role naming no parameter would make a file that readers refuse. */
    const resdiag_model *m = hdr->model;
    if (!role_names_one_of(m->head_param, m->model_param_names, m->n_model_params))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: head_param is not a model parameter");
    if (!role_names_one_of(m->residual_param, m->layer_param_names, m->n_layer_params))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: residual_param is not a layer parameter");
    if (hdr->tables->n_metrics != (m->n_metrics > 0 ? m->n_metrics : 0))
        return set_err(err, errlen, RESDIAG_E_INVALID,
                       "client bug: rd_writer_create: the tables hold %d metrics, the model "
                       "declares %d", hdr->tables->n_metrics, m->n_metrics);

    rd_h5_quiet q;
    werr e;
    memset(&e, 0, sizeof e);
    resdiag_status st = RESDIAG_OK;
    hid_t fapl = H5I_INVALID_HID, fcpl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    rd_writer *w = writer_new(path, hdr->tables);
    if (!w)
        return set_err(err, errlen, RESDIAG_E_NOMEM, "out of memory creating run file %s", path);
    w->schema = hdr->file_schema ? hdr->file_schema : RD_SCHEMA_VERSION;
    w->level = w->schema >= 2 ? hdr->compression : 0; /* schema 1: no filters */

    /* Nothing at path is given to HDF5 before it is claimed: a new file,
     * or with overwrite a run file, locked against other writers. */
    rd_run_claim claim;
    st = rd_run_claim_path(&claim, path, hdr->overwrite, err, errlen);
    if (st != RESDIAG_OK) {
        rd_writer_free(w);
        return st;
    }
    if (rd_h5_writer_before_create)
        rd_h5_writer_before_create(path);

    rd_h5_quiet_begin(&q);
    e.object = "file";
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0)
        H5FAIL(&e, "file");
    /* SWMR needs the latest format (superblock v3). */
    CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), &e, "file");
#if H5_VERSION_GE(1, 10, 7)
    /* HDF5's own flock guards the creation against a second writer. The
     * claim's lock does that already, for the whole run; and where flock
     * is emulated with byte-range locks (NFS) the two would conflict. So
     * HDF5 locks only where the claim could not. Locking is only a guard
     * against misuse; file systems without it are fine. */
    CHECK(H5Pset_file_locking(fapl, claim.locked ? 0 : 1, 1), &e, "file");
#endif
    if ((fcpl = H5Pcreate(H5P_FILE_CREATE)) < 0)
        H5FAIL(&e, "file");
    CHECK(H5Pset_obj_track_times(fcpl, 0), &e, "file");
    w->space.paged = rd_h5_writer_reserve && rd_space_dir_can_fallocate(path);
    if (w->space.paged) {
        CHECK(H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 0, 1), &e, "file");
        CHECK(H5Pset_file_space_page_size(fcpl, RD_FILE_PAGE), &e, "file");
    }
    /* Not even creating a file that the size limit would cut short. */
    if (!rd_space_within_limit(0, RESERVE_CREATE, &e.h5, &e.size_limit)) {
        e.object = "file (reserving space)";
        e.before_hdf5 = 1;
        goto cleanup;
    }
    errno = 0;
    /* TRUNC: the claimed file is new and empty, or a run file to replace. */
    if ((file = H5Fcreate(claim.h5_path[0] ? claim.h5_path : path, H5F_ACC_TRUNC, fcpl, fapl))
        < 0)
        H5FAIL(&e, "file");
    w->file = w->space.file = file;
    /* Kept from what the trainer executes (file_fd.c); -1 fails the check. */
    w->space.fd = rd_h5_file_cloexec(file);
    if (!rd_run_claim_check(&claim, path, w->space.fd, e.h5.msg, sizeof e.h5.msg)) {
        e.st = RESDIAG_E_EXISTS;
        e.h5.captured = 1;
        goto cleanup;
    }
    w->space.reserve = 1;
    if (!rd_writer_reserve_room(w, RESERVE_CREATE, &e))
        goto cleanup;

    if (!rd_writer_write_root_attrs(file, hdr, w->schema, &e)
        || !rd_writer_write_meta(file, hdr->model, &e))
        goto cleanup;

    if (!rd_writer_create_datasets(w, file, hdr, &e) || !rd_writer_make_scale_room(w, &e)
        || !rd_writer_keep_headers_in_one_page(w, file, &e)
        || !rd_writer_attach_scales(w, file, hdr, &e))
        goto cleanup;

    /* Every object exists: from now on readers may open the file. */
    errno = 0;
    CHECK(H5Fstart_swmr_write(file), &e, "file (starting SWMR writing)");
    rd_writer_release_room(w);

    H5Pclose(fapl);
    H5Pclose(fcpl);
    rd_h5_quiet_end(&q);
    w->lock_fd = claim.fd; /* the lock lives as long as the run */
    *out = w;
    return RESDIAG_OK;

cleanup:
    st = h5_status(&e);
    set_err(err, errlen, st, "cannot create run file %s: %s: %s", path,
            e.object ? e.object : "?", e.h5.captured ? e.h5.msg : "unknown error");
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    /* A file that cannot be flushed cannot be closed (see the top). */
    if (file >= 0 && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
        rd_writer_detach(w);
    rd_writer_free(w); /* closes the datasets */
    if (file >= 0)
        H5Fclose(file);
    /* Half a run file helps nobody; but only a file this call created
     * (and still at path) is removed. A replaced run stays as it is. */
    rd_run_claim_abandon(&claim, path);
    rd_h5_quiet_end(&q);
    return st;
}
