/*
 * reader_state.h - what a reader of one run file holds, and the functions
 * its files (reader_open.c, reader_trust.c, reader_tables.c,
 * reader_refresh.c, reader_values.c, reader_get.c, reader_datasets.c,
 * reader_stored.c) share. Private to them and to the public reader above
 * (reader.c), which only sets and reads `merge`.
 */
#ifndef RESDIAG_H5_READER_STATE_H
#define RESDIAG_H5_READER_STATE_H

#include <hdf5.h>
#include <stdint.h>

#include "format/tables.h"
#include "h5/chunk_decode.h"
#include "h5/file_types.h"
#include "h5/reader_root.h"
#include "h5/reader_strings.h"
#include "resdiag.h"

struct rd_merge;

typedef struct series {
    const char *name;
    hid_t ds;
    hid_t counts_ds;    /* schema 2, STATS tables: the integer fields; else invalid */
    int table;          /* table of format/tables.h, or -1 for steps / step_time */
    rd_ftype ft;        /* how ds stores the values (file_types.h): an integer type's
                           sentinel reads as NaN; any float reads as it is */
    int rank;           /* axes after the step axis */
    hsize_t dims[RD_MAX_RANK]; /* as a step record has them (a STATS table: every field) */
    hsize_t chunk[RD_MAX_RANK + 1]; /* chunk shape, step axis first; all 0: not chunked */
} series;

struct resdiag_reader {
    hid_t file;
    int swmr;                 /* opened for SWMR reading */
    char *path;
    long long file_size;      /* bytes, at open */
    rd_tables lay;
    rd_root root;             /* the root attributes and /meta, and the run info */

    hid_t steps_ds, time_ds;
    hid_t table_ds[RD_N_TABLES];
    hid_t counts_ds[RD_N_TABLES];     /* schema 2: the STATS tables' integer fields */
    hid_t callsite_ds[RD_N_TABLES];
    hid_t summary_ds[RD_N_SUMMARY];  /* all invalid: no summary (or ignored) */
    int n_series;
    series series[RD_N_TABLES + RD_N_SUMMARY + 2];
    int64_t last_step;        /* step number of step n_steps - 1 */

    /* the filtered time series, decoded by chunk_decode.c (never by HDF5) */
    int n_decoded;
    hid_t decoded_ds[2 * RD_N_TABLES + RD_N_SUMMARY + 2];
    const char *decoded_name[2 * RD_N_TABLES + RD_N_SUMMARY + 2];
    rd_chunk_steps *decoder[2 * RD_N_TABLES + RD_N_SUMMARY + 2];

    const char **callsites;   /* (n_slots) interned */
    rd_intern pool;
    /* A job's rank files read as one: set by the public reader above the
     * one-file reader (reader.c opens it with merge.h, and frees it), for
     * a reader that holds no file of its own. The one-file reader never
     * reads it. NULL: one file. */
    struct rd_merge *merge;
};

/* reader_trust.c: the checks of a file from anyone (doc/FORMAT.md,
 * "Reading files from others"). Each returns RESDIAG_OK or the logged
 * status of what is wrong. */

/* Path is a regular file that carries the HDF5 signature; *size its bytes. */
resdiag_status rd_reader_check_signature(const char *path, long long *size);
/* Every link of group g (the root: group "", depth 0) and of the groups it
 * holds is a hard link. */
resdiag_status rd_reader_check_links(resdiag_reader *rd, hid_t g, const char *group, int depth);
/* Dataset ds keeps its data inside the file, as resdiag writes it;
 * *filtered: it is shuffled and deflated. */
resdiag_status rd_reader_check_storage(const resdiag_reader *rd, hid_t ds, const char *name,
                                       int *filtered);
/* Call-site dataset ds is allocated in full. */
resdiag_status rd_reader_check_callsites_stored(const resdiag_reader *rd, hid_t ds,
                                                const char *name);

/* reader_tables.c: every dataset the root attributes imply, opened and
 * checked, into rd's series; then their chunk shapes and decoders. */
resdiag_status rd_reader_open_datasets(resdiag_reader *rd);
resdiag_status rd_reader_read_chunk_shapes(resdiag_reader *rd);

/* reader_refresh.c: info.n_steps and last_step from what the file holds
 * now; the call sites into rd->callsites. */
resdiag_status rd_reader_count_steps(resdiag_reader *rd);
resdiag_status rd_reader_read_callsites(resdiag_reader *rd);

/* reader_values.c: blocks of the datasets as doubles (see there). */
resdiag_status rd_reader_read_block(const resdiag_reader *rd, hid_t ds, const char *name,
                                    hid_t mtype, const hsize_t *start, const hsize_t *count,
                                    int mrank, const hsize_t *mdims, void *out);
resdiag_status rd_reader_read_values(const resdiag_reader *rd, const series *se,
                                     const hsize_t *start, const hsize_t *count, double *out);
resdiag_status rd_reader_read_slot(const resdiag_reader *rd, int table, size_t slot,
                                   int64_t step, hsize_t n_steps, hsize_t first, hsize_t n,
                                   double *out);

/* reader_get.c: RESDIAG_OK if step_index is one of rd's steps, else the
 * logged status, naming the public function fn. */
resdiag_status rd_reader_check_step(const resdiag_reader *rd, int64_t step_index,
                                    const char *fn);

/* reader_datasets.c: the series called name (a leading '/' allowed), NULL
 * when rd has none. */
const series *rd_reader_find_series(const resdiag_reader *rd, const char *name);

#endif
