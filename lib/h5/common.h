/*
 * common.h - what the HDF5 code of lib/h5 shares: the stored spelling of a
 * few enums (doc/FORMAT.md), turning HDF5's error stack into one line of
 * text, logging a reader's failure, and keeping HDF5 from printing on its
 * own.
 *
 * Only the files of lib/h5 include this: they are the only ones that call
 * HDF5.
 */
#ifndef RESDIAG_H5_COMMON_H
#define RESDIAG_H5_COMMON_H

#include <hdf5.h>
#include <stddef.h>

#include "format/format.h"
#include "resdiag.h"

/* The 8 bytes every HDF5 file starts with, at offset 0 or at 512, 1024,
 * 2048, ... after a user block. */
#define RD_H5_SIGNATURE "\211HDF\r\n\032\n"
#define RD_H5_SIGNATURE_LEN 8

/* 1 (the default): the writer reserves disk space before HDF5 writes (see
 * space.c). Tests set it to 0 to reach the path where HDF5 itself
 * runs out of space. */
extern int rd_h5_writer_reserve;

/* 1 (the default): before each write phase the writer checks that the file
 * stays within the file size limit (RLIMIT_FSIZE, see space.c). Tests
 * set it to 0, with SIGXFSZ ignored, to make HDF5 itself meet the limit:
 * a disk that fills up where fallocate is not supported. */
extern int rd_h5_writer_size_limit;

/* 1 (the default): the writer adds the per-step summary (group /summary).
 * Tests set it to 0 to write a file as resdiag 0.1.0 did, without it. */
extern int rd_h5_writer_summary;

/* 1 (the default): the reader uses /summary where the file has one. 0, or
 * the environment variable RESDIAG_IGNORE_SUMMARY=1 when the reader opens
 * a file, makes it read the file as if it had none (the analysis then
 * takes the slow path over the full tables). */
extern int rd_h5_reader_summary;

/* Block kind as stored in the RD_ATTR_BLOCK attribute; NULL when out of range. */
const char *rd_h5_block_name(resdiag_block_kind kind);

/* Units of each statistics field, stored as the RD_ATTR_FIELD_UNITS attribute. */
const char *rd_h5_field_unit(int field);

/* HDF5 error stack, captured before anything else can clear it. */
typedef struct rd_h5_error {
    int captured;      /* 1 once a failure was captured; later captures are ignored */
    int sys_errno;     /* errno of a failed system call in the stack (or at capture), else 0 */
    char msg[512];     /* HDF5's innermost message, one line */
} rd_h5_error;

/* Captures the current thread's HDF5 error stack into *e (if nothing was
 * captured yet). Call it right after the failing HDF5 call: any later HDF5
 * API call clears the stack. errno_at_call is errno read right after the
 * failing call (0 if unknown). */
void rd_h5_capture(rd_h5_error *e, int errno_at_call);

/* The HDF5 call just made failed: capture its error into e (an
 * rd_h5_error *), then go to the function's `cleanup` label. */
#define RD_H5_FAIL(e)                    \
    do {                                 \
        rd_h5_capture((e), errno);       \
        goto cleanup;                    \
    } while (0)

/* RD_H5_FAIL when call returns a negative value. */
#define RD_H5_CHECK(call, e)             \
    do {                                 \
        if ((call) < 0)                  \
            RD_H5_FAIL(e);               \
    } while (0)

/* 1 if the captured failure was the disk or a size limit running out
 * (ENOSPC, EFBIG, EDQUOT). */
int rd_h5_error_is_nospace(const rd_h5_error *e);

/* Logs msg as an error (rd_log) and returns st: how the reader fails. */
resdiag_status rd_h5_fail(resdiag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* From rd_h5_hold_failures(buf, len) until rd_h5_hold_failures(NULL, 0),
 * rd_h5_fail in this thread logs nothing and keeps the first message in
 * buf instead: the merged reader reports a rank file it leaves out as the
 * rank's reason, not as an error of the run. */
void rd_h5_hold_failures(char *buf, size_t len);

/* The HDF5 call just made failed: logs "run file PATH: WHAT: HDF5's
 * message" and returns RESDIAG_E_IO. */
resdiag_status rd_h5_fail_call(const char *path, const char *what);

/* A name from the file as it may appear in a message: at most about 80
 * bytes of it (the message stays short whatever the file holds). Not
 * escaped here: rd_log text-escapes every message (escape.h). */
const char *rd_h5_msg_name(const char *s, char *buf, size_t len);

/* Keeps HDF5 from printing its error stack during a resdiag call, and gives
 * the caller's own setting back afterwards (a trainer may use HDF5 itself). */
typedef struct rd_h5_quiet {
    H5E_auto2_t fn;
    void *data;
} rd_h5_quiet;

static inline void rd_h5_quiet_begin(rd_h5_quiet *q)
{
    q->fn = NULL;
    q->data = NULL;
    if (H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data) < 0) {
        q->fn = NULL;
        q->data = NULL;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static inline void rd_h5_quiet_end(const rd_h5_quiet *q)
{
    H5Eset_auto2(H5E_DEFAULT, q->fn, q->data);
}

/* A new variable-length, UTF-8, NUL-terminated string type (close it). */
hid_t rd_h5_vlen_string_type(void);

/* A new fixed-length string type of len bytes, NUL-terminated (close it). */
hid_t rd_h5_fixed_string_type(size_t len);

#endif
