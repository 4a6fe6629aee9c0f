/*
 * attributes.h - the one set of typed attribute readers and writers of the
 * run file: the writer puts integers and UTF-8 strings (scalars or lists)
 * on the root, /meta and each dataset; the reader gets them back and checks
 * each against what it must be (a file may come from anyone).
 */
#ifndef RESDIAG_H5_ATTRIBUTES_H
#define RESDIAG_H5_ATTRIBUTES_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "h5/common.h"
#include "resdiag.h"

/* ---- writing: each creates attribute `name` of obj. RESDIAG_OK; else
 * RESDIAG_E_IO with HDF5's error captured into *e, or RESDIAG_E_NOMEM
 * (e->msg says so). */

resdiag_status rd_attr_put_int(hid_t obj, const char *name, int v, rd_h5_error *e);
/* A signed 64-bit integer (the rank attributes). */
resdiag_status rd_attr_put_i64(hid_t obj, const char *name, int64_t v, rd_h5_error *e);
resdiag_status rd_attr_put_u64(hid_t obj, const char *name, uint64_t v, rd_h5_error *e);
/* NULL is stored as "". */
resdiag_status rd_attr_put_str(hid_t obj, const char *name, const char *v, rd_h5_error *e);
/* A 1-D list of n strings (NULL entries as ""); n == 0 gives a zero-length
 * list. */
resdiag_status rd_attr_put_strs(hid_t obj, const char *name, const char *const *v, size_t n,
                                rd_h5_error *e);

/* ---- reading: attribute `name` of obj, which messages call objname, in
 * run file path. Every problem is logged (one line) and returned as a
 * status: RESDIAG_E_FORMAT when the attribute is missing or not what it
 * must be, RESDIAG_E_IO when HDF5 fails, RESDIAG_E_NOMEM. */

/* *has: 1 if obj has the attribute, else 0. */
resdiag_status rd_attr_has(const char *path, hid_t obj, const char *name, int *has);

/* One integer in [lo, hi]. */
resdiag_status rd_attr_get_int(const char *path, hid_t obj, const char *objname,
                               const char *name, long long lo, long long hi, long long *out);

/* One non-negative integer. */
resdiag_status rd_attr_get_u64(const char *path, hid_t obj, const char *objname,
                               const char *name, uint64_t *out);

/* Strings, variable- or fixed-length: a scalar (want_scalar: exactly one)
 * or a list. *out gets *n_out malloc'd strings (rd_attr_free_strs). */
resdiag_status rd_attr_get_strs(const char *path, hid_t obj, const char *objname,
                                const char *name, int want_scalar, char ***out, size_t *n_out);

/* One string, malloc'd. */
resdiag_status rd_attr_get_str(const char *path, hid_t obj, const char *objname,
                               const char *name, char **out);

/* A string of the root that must be one of namefn(0..n-1); *out its index. */
resdiag_status rd_attr_get_enum(const char *path, hid_t obj, const char *name,
                                const char *(*namefn)(int), int n, int *out);

/* Frees n strings of rd_attr_get_strs and the array; NULL is a no-op. */
void rd_attr_free_strs(char **v, size_t n);

#endif
