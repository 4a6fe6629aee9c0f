/*
 * guard.h - checks a run file's bytes, before HDF5 reads them, for the
 * damage that HDF5 1.10 does not check and that crashes it (found by
 * tests/fuzz; doc/FUZZING.md lists what is guarded and what is not).
 */
#ifndef RESDIAG_H5_GUARD_H
#define RESDIAG_H5_GUARD_H

#include <stddef.h>

#include "resdiag.h"

/* Bytes of a file that rd_h5_guard_file looks at, from the start. */
#define RD_H5_GUARD_SCAN_MAX ((long long)1 << 30)

/* RESDIAG_OK, or RESDIAG_E_FORMAT with what is damaged in err (one line
 * without the path), or RESDIAG_E_IO when the file cannot be read. */
resdiag_status rd_h5_guard_file(const char *path, char *err, size_t err_len);

#endif
