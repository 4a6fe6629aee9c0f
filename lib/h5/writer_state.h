/*
 * writer_state.h - what the writer of a run file holds, how its files
 * report a failure (set_err, h5_status), and the functions they share:
 * writer_create.c (creating the file), writer_attrs.c (its attributes),
 * writer_datasets.c (its datasets), writer_scales.c (their dimension
 * scales), writer_space.c (the disk space around each write phase),
 * writer_append.c (appending steps) and writer_close.c. Private to them.
 * Why the writer is built as it is: writer_append.c (commit order),
 * writer_space.c (a full disk), writer_datasets.c (torn writes, deflated
 * tables, schema 2).
 */
#ifndef RESDIAG_H5_WRITER_STATE_H
#define RESDIAG_H5_WRITER_STATE_H

#include <errno.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/tables.h"
#include "h5/common.h"
#include "h5/file_types.h"
#include "h5/space.h"
#include "h5/writer.h"
#include "resdiag.h"

/* One dataset of a table. A table has one, except a STATS table in schema
 * 2, which has two: its real-valued fields (float32), then its integer
 * fields (int64, in its counts_name dataset). */
typedef struct table_part {
    hid_t ds;            /* (step, dims..., width), or invalid: none */
    const char *name;
    rd_ftype ft;
    const int *map;      /* the values of a slot it stores; NULL: all, in order */
    int width;           /* the last axis */
    rd_chunk_info chunk;
    int level;           /* its deflate level: 0 = no filters (part_level) */
} table_part;
#define MAX_PARTS 2

struct rd_writer {
    hid_t file;
    hid_t steps_ds;                    /* (step) int64 */
    hid_t time_ds;                     /* (step) float64 */
    table_part part[RD_N_TABLES][MAX_PARTS]; /* part[i][0].ds invalid if count == 0 */
    int schema;                        /* 1 or 2 (doc/FORMAT.md) */
    int level;                         /* schema 2: deflate level of the tables, 0 = none */
    hid_t callsite_ds[RD_N_TABLES];    /* (dims without the last) strings, STATS tables */
    hid_t callsite_type;               /* fixed RD_CALLSITE_LEN string (memory) */
    rd_tables lay;
    hsize_t n_written;                 /* steps committed */
    char *callsite_buf;                /* (n_slots, RD_CALLSITE_LEN) */
    void *pack;                        /* one table's columns of a batch, packed */
    size_t pack_cap;                   /* bytes */
    char *path;
    resdiag_status failed;             /* sticky: the first error of an append */
    char failed_msg[1024];

    rd_space space;                    /* HDF5's descriptor, reservation, paging */
    rd_chunk_info series_chunk;           /* /steps and /step_time */
    hid_t summary_ds[RD_N_SUMMARY];    /* (step, dims...), or invalid: no /summary */
    rd_ftype summary_ft[RD_N_SUMMARY];
    rd_chunk_info summary_chunk[RD_N_SUMMARY];
    double *summary_buf;               /* (n, lay.summary_len) of a batch */
    size_t summary_cap;                /* steps */
    off_t callsite_bytes;              /* what the call-site datasets allocate */
    int n_datasets;
    int lock_fd;                       /* the claimed file, holding the writers' lock
                                          (run_file_guard.h) until the run is closed */
};

/* Records the HDF5 failure of the call just made, naming the object. */
#define H5FAIL(e, obj)                      \
    do {                                    \
        int saved_errno_ = errno;           \
        rd_h5_capture(&(e)->h5, saved_errno_); \
        (e)->object = (obj);                \
        goto cleanup;                       \
    } while (0)

typedef struct werr {
    rd_h5_error h5;
    const char *object; /* what was being created or written */
    resdiag_status st;  /* a status other than IO/NOSPACE, if the failure was not HDF5's */
    int before_hdf5;    /* failed before HDF5 wrote anything (the file is consistent) */
    long long size_limit; /* > 0: the file size limit (bytes) that stopped the write */
} werr;

#define CHECK(call, e, obj)       \
    do {                          \
        if ((call) < 0)           \
            H5FAIL((e), obj);     \
    } while (0)


/* The message into err (NULL or errlen 0: none); returns st. */
static inline resdiag_status set_err(char *err, size_t errlen, resdiag_status st,
                                     const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static inline resdiag_status set_err(char *err, size_t errlen, resdiag_status st,
                                     const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* The status of the failure recorded in e: a full disk is
 * RESDIAG_E_NOSPACE. */
static inline resdiag_status h5_status(const werr *e)
{
    if (e->st != RESDIAG_OK)
        return e->st;
    return rd_h5_error_is_nospace(&e->h5) ? RESDIAG_E_NOSPACE : RESDIAG_E_IO;
}

/* Below, a function that returns int returns 1, or 0 with the failure
 * recorded in e. */

/* writer_attrs.c: the root attributes and /meta of a new file. */
int rd_writer_write_root_attrs(hid_t file, const rd_file_header *hdr, int schema, werr *e);
int rd_writer_write_meta(hid_t file, const resdiag_model *m, werr *e);
/* A dataset's description, units, axes and the labels of every labelled
 * axis (of the field axis: fields[0..n_fields-1], or every field when
 * fields is NULL). */
int rd_writer_describe_fields(hid_t ds, const char *description, const char *units,
                              const char *axes, const rd_file_header *hdr, const int *fields,
                              int n_fields, werr *e);
int rd_writer_describe(hid_t ds, const char *description, const char *units, const char *axes,
                       const rd_file_header *hdr, werr *e);

/* writer_datasets.c: a new group (closed by the caller; H5I_INVALID_HID
 * on failure), every dataset, and their headers each inside one page. */
hid_t rd_writer_create_group(hid_t file, const char *name, int keep_order, const char *object,
                             werr *e);
int rd_writer_create_datasets(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e);
int rd_writer_keep_headers_in_one_page(rd_writer *w, hid_t file, werr *e);
/* The axis of table's dims that is the block site, or -1: such a table is
 * written one site at a time. */
int rd_writer_site_axis(const rd_writer *w, int table);

/* writer_scales.c: room for the scale attributes, then the scales. */
int rd_writer_make_scale_room(rd_writer *w, werr *e);
int rd_writer_attach_scales(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e);

/* writer_space.c: room for a write phase (space.h), and what it may cost. */
int rd_writer_reserve_room(rd_writer *w, off_t need, werr *e);
void rd_writer_release_room(rd_writer *w);
void rd_writer_detach(rd_writer *w);
int rd_writer_keep_header_in_one_page(hid_t file, hid_t *ds, const char *name, werr *e);
off_t rd_writer_metadata_margin(const rd_writer *w);
off_t rd_writer_index_margin(const rd_writer *w, hsize_t n);

/* writer_close.c: frees w, closing its datasets and its lock (not the HDF5
 * file). NULL is a no-op. */
void rd_writer_free(rd_writer *w);

#endif
