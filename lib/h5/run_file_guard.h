/*
 * run_file_guard.h - what creating a run file may do at its path, decided
 * before HDF5 is given the path: create a new file, or replace a resdiag
 * run file when asked to, and nothing else; and the lock that keeps two
 * writers off one path. doc/FORMAT.md, "Creating a run file", is the
 * contract.
 */
#ifndef RESDIAG_RUN_FILE_GUARD_H
#define RESDIAG_RUN_FILE_GUARD_H

#include <stddef.h>
#include <sys/types.h>

#include "resdiag.h"

/* The file a writer has claimed at its path. */
typedef struct rd_run_claim {
    int fd;                /* the file, open for the life of the run (it carries the lock), or -1 */
    int created;           /* this claim created the file: it was not there before */
    int locked;            /* fd holds the write lock (0: the file system has no locks) */
    dev_t dev;             /* the claimed file's identity */
    ino_t ino;
    char h5_path[64];      /* what to give HDF5: /proc/self/fd/N, which opens this very file,
                              or the path itself where /proc is not there */
} rd_run_claim;

/* Claims path for a new run. A path that does not exist is created (only
 * that: O_CREAT | O_EXCL). An existing regular file is locked first
 * (RESDIAG_E_LOCKED while another writer, in this process or another, has
 * it), then refused (RESDIAG_E_EXISTS) unless overwrite is 1 and it is a
 * resdiag run file. A symbolic link, a directory, a device, a FIFO or a
 * socket at path is refused in both modes (RESDIAG_E_EXISTS) without being
 * opened by HDF5. Other failures (a missing directory, permissions) are
 * RESDIAG_E_IO. On failure *c holds nothing, nothing at path was changed,
 * and err names path and what to do. */
resdiag_status rd_run_claim_path(rd_run_claim *c, const char *path, int overwrite, char *err,
                                 size_t errlen);

/* 1 if descriptor fd (HDF5's own) is the claimed file and path still names
 * it; else 0 with the reason in err (one line, without the path). */
int rd_run_claim_check(const rd_run_claim *c, const char *path, int fd, char *err,
                       size_t errlen);

/* After creating failed: removes path if the claim created it and path is
 * still that file, then releases the claim. Never removes anything else. */
void rd_run_claim_abandon(rd_run_claim *c, const char *path);

/* Closes the claim's descriptor, which drops the lock. -1 is a no-op. */
void rd_run_claim_release(rd_run_claim *c);

/* What the file at path says of its writer (resdiag_file_state), looked
 * at without taking the lock or changing the file: the lock tested with
 * F_OFD_GETLK on a read-only descriptor of its own, and the superblock's
 * status flags (byte 11 of a version 2 or 3 superblock at byte 0), which
 * HDF5 sets while a writer has the file open and clears at its close. */
resdiag_file_state rd_run_file_state(const char *path);

#endif
