/*
 * reader_open.c - opens one run file (doc/FORMAT.md) again: one being
 * written (HDF5 SWMR), one left by a killed trainer, or a finished one;
 * and closes it. Nothing in the file is trusted before it is checked
 * (reader_trust.c, guard.c) against the tables that its own root
 * attributes imply (reader_root.c, reader_tables.c); every problem
 * becomes a status plus one logged line. Rank attributes are read but not
 * followed: merging a job's ranks is the layer above (merge.h).
 */
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/chunk_decode.h"
#include "h5/common.h"
#include "h5/file_fd.h"
#include "h5/guard.h"
#include "h5/reader_file.h"
#include "h5/reader_root.h"
#include "h5/reader_state.h"

#define RD_SWMR_READ_ATTEMPTS 20 /* see rd_file_open */

static void reader_free(resdiag_reader *rd)
{
    if (!rd)
        return;
    for (int i = 0; i < RD_N_TABLES; i++) {
        if (rd->table_ds[i] >= 0)
            H5Dclose(rd->table_ds[i]);
        if (rd->counts_ds[i] >= 0)
            H5Dclose(rd->counts_ds[i]);
        if (rd->callsite_ds[i] >= 0)
            H5Dclose(rd->callsite_ds[i]);
    }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (rd->summary_ds[i] >= 0)
            H5Dclose(rd->summary_ds[i]);
    if (rd->steps_ds >= 0)
        H5Dclose(rd->steps_ds);
    if (rd->time_ds >= 0)
        H5Dclose(rd->time_ds);
    for (int i = 0; i < rd->n_decoded; i++)
        rd_chunk_steps_free(rd->decoder[i]);
    if (rd->file >= 0)
        H5Fclose(rd->file);
    rd_root_free(&rd->root);
    free(rd->callsites);
    rd_intern_free(&rd->pool);
    free(rd->path);
    free(rd);
}

resdiag_reader *rd_file_alloc(const char *path)
{
    resdiag_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return NULL;
    rd->file = rd->steps_ds = rd->time_ds = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_TABLES; i++)
        rd->table_ds[i] = rd->counts_ds[i] = rd->callsite_ds[i] = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        rd->summary_ds[i] = H5I_INVALID_HID;
    rd->path = strdup(path);
    if (!rd->path) {
        free(rd);
        return NULL;
    }
    return rd;
}

resdiag_status rd_file_open(resdiag_reader **out, const char *path)
{
    if (!out)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: out is NULL");
    *out = NULL;
    if (!path)
        return rd_h5_fail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: path is NULL");
    long long file_size = 0;
    resdiag_status st = rd_reader_check_signature(path, &file_size);
    if (st != RESDIAG_OK)
        return st;
    /* damage that would crash HDF5 instead of failing in it */
    char gerr[256];
    st = rd_h5_guard_file(path, gerr, sizeof gerr);
    if (st != RESDIAG_OK)
        return rd_h5_fail(st, "%s run file %s: %s", st == RESDIAG_E_IO ? "cannot read" : "damaged",
                          path, gerr);

    resdiag_reader *rd = rd_file_alloc(path);
    if (!rd)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    rd->file_size = file_size;

    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        st = rd_h5_fail_call(path, "opening");
        goto fail;
    }
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 1, 1);
#endif
    /* The plain POSIX driver, whatever HDF5_DRIVER in the environment says. */
    if (H5Pset_fapl_sec2(fapl) < 0) {
        H5Pclose(fapl);
        st = rd_h5_fail_call(path, "opening");
        goto fail;
    }
    /* A SWMR reader retries metadata whose checksum fails (the writer may be
     * halfway through it), sleeping 1 ns, 2 ns, 4 ns, ... without a cap in
     * HDF5 1.10: the default 100 attempts hang on a damaged file for ever
     * (found by tests/fuzz). 20 attempts wait 1 ms in all, per damaged
     * block read. */
    H5Pset_metadata_read_attempts(fapl, RD_SWMR_READ_ATTEMPTS);
    /* SWMR reading opens a file that is still being written, and one whose
     * writer was killed (its superblock still says "being written"). A
     * file not written for SWMR (e.g. by h5py) needs a plain open. */
    rd_h5_error e1, e2;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    /* (errno after a failed HDF5 call means nothing: HDF5 reports the
     * errno of a failed system call in its own messages.) */
    rd->file = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (rd->file >= 0) {
        rd->swmr = 1;
    } else {
        rd_h5_capture(&e1, 0);
        rd->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (rd->file < 0)
            rd_h5_capture(&e2, 0);
    }
    H5Pclose(fapl);
    if (rd->file < 0) {
        /* A failed system call (permissions, locks, I/O) is an I/O error;
         * HDF5 not making sense of the bytes is a damaged file. */
        resdiag_status why = e1.sys_errno || e2.sys_errno ? RESDIAG_E_IO : RESDIAG_E_FORMAT;
        const char *what = why == RESDIAG_E_IO ? "cannot open run file" : "damaged HDF5 file";
        if (strcmp(e1.msg, e2.msg) != 0)
            st = rd_h5_fail(why, "%s %s: %s (opened for SWMR reading: %s)", what, path, e2.msg,
                            e1.msg);
        else
            st = rd_h5_fail(why, "%s %s: %s", what, path, e2.msg);
        goto fail;
    }
    /* The reader's program may exec while the file is open (file_fd.c). */
    if (rd_h5_file_cloexec(rd->file) < 0) {
        st = rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: cannot keep its descriptor "
                        "from programs this process executes", path);
        goto fail;
    }

    if ((st = rd_reader_check_links(rd, rd->file, "", 0)) != RESDIAG_OK
        || (st = rd_root_read(&rd->root, rd->file, rd->path)) != RESDIAG_OK)
        goto fail;
    const resdiag_run_info *in = &rd->root.info;
    rd_tables_init(&rd->lay, in->n_layers, in->n_sublayers, in->n_layer_params,
                   in->n_model_params, in->sketch_size, rd_block_sites(in->schema_version));
    rd_tables_set_metrics(&rd->lay, in->n_metrics);
    if ((st = rd_reader_open_datasets(rd)) != RESDIAG_OK
        || (st = rd_reader_read_chunk_shapes(rd)) != RESDIAG_OK
        || (st = rd_reader_count_steps(rd)) != RESDIAG_OK
        || (st = rd_reader_read_callsites(rd)) != RESDIAG_OK)
        goto fail;

    rd_h5_quiet_end(&q);
    *out = rd;
    return RESDIAG_OK;

fail:
    reader_free(rd);
    rd_h5_quiet_end(&q);
    return st;
}

void rd_file_destroy(resdiag_reader *rd)
{
    if (!rd)
        return;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    reader_free(rd);
    rd_h5_quiet_end(&q);
}
