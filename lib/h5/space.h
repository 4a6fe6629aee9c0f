/*
 * space.h - what keeps the writer's HDF5 from meeting a full disk or a
 * torn page (space.c; the reasons: writer_space.c, writer_datasets.c):
 * reserving and giving back file space around each write phase, the file
 * size limit, detaching after a failed write, and object headers kept
 * inside one page.
 */
#ifndef RESDIAG_H5_SPACE_H
#define RESDIAG_H5_SPACE_H

#include <hdf5.h>
#include <sys/types.h>

#include "h5/common.h"

/* The page size of paged aggregation: the kernel's page-cache page. */
#define RD_FILE_PAGE 4096

/* The file's descriptor and how space is handled for it. */
typedef struct rd_space {
    hid_t file;
    int fd;       /* HDF5's descriptor of the file (sec2), or -1 */
    int reserve;  /* fallocate works here */
    int paged;    /* paged aggregation (writer_datasets.c, "Torn writes") */
    int detached; /* fd now points at a scratch file */
} rd_space;

/* Steps and bytes per chunk of one time series, to bound what an append
 * allocates. */
typedef struct rd_chunk_info {
    hsize_t steps;
    off_t bytes;
} rd_chunk_info;

/* Bytes of new chunks that appending n steps after n_old allocates (a
 * chunk already written is rewritten in place). */
off_t rd_space_new_chunk_bytes(const rd_chunk_info *c, hsize_t n_old, hsize_t n);

/* Whether the directory of path gives files space with fallocate. */
int rd_space_dir_can_fallocate(const char *path);

/* 1 if a phase that starts at HDF5's end of file `size` and may allocate
 * `need` bytes stays within the file size limit; else 0, with the reason
 * in *e (errno EFBIG) and the limit in *size_limit. */
int rd_space_within_limit(off_t size, off_t need, rd_h5_error *e, long long *size_limit);

/* Makes sure that HDF5's next writes, which may allocate `need` bytes past
 * its end of file, can neither cross the file size limit nor run out of
 * disk space. 0 (and *e, *size_limit as above) only when there is no room. */
int rd_space_reserve(rd_space *s, off_t need, rd_h5_error *e, long long *size_limit);

/* Gives back what a phase did not use: the file ends where HDF5's does. */
void rd_space_release(rd_space *s);

/* After HDF5 failed to write: everything it still writes goes nowhere, so
 * that closing the file (now or at exit) succeeds. */
void rd_space_detach(rd_space *s);

/* Moves dataset *ds (at path name, not yet written) until its object
 * header lies inside one page, reopening *ds. 0 with HDF5's error in *e
 * when an HDF5 call failed. */
int rd_space_keep_header_in_one_page(hid_t file, hid_t *ds, const char *name, rd_h5_error *e);

#endif
