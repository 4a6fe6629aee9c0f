/*
 * attributes.c - typed attribute readers and writers (attributes.h). The
 * writer stores strings as UTF-8 (keys of /meta may be any text); the
 * reader takes variable- and fixed-length strings alike, and bounds what
 * one attribute may make it allocate.
 */
#include "h5/attributes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ATTR_STRINGS 1024 /* strings in one attribute: resdiag's lists have at most 32 */
#define MAX_ATTR_STRING ((size_t)1 << 20) /* bytes of one string attribute */

/* ---------------------------------------------------------------- write */

static resdiag_status out_of_memory(rd_h5_error *e)
{
    if (!e->captured) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->captured = 1;
    }
    return RESDIAG_E_NOMEM;
}

static resdiag_status put(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space,
                          const void *buf, rd_h5_error *e)
{
    hid_t a = H5I_INVALID_HID, acpl = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_E_IO;
    if ((acpl = H5Pcreate(H5P_ATTRIBUTE_CREATE)) < 0
        || H5Pset_char_encoding(acpl, H5T_CSET_UTF8) < 0
        || (a = H5Acreate2(obj, name, ftype, space, acpl, H5P_DEFAULT)) < 0
        || (buf && H5Awrite(a, mtype, buf) < 0)) {
        rd_h5_capture(e, errno);
        goto cleanup;
    }
    st = RESDIAG_OK;
cleanup:
    if (a >= 0 && H5Aclose(a) < 0 && st == RESDIAG_OK) {
        rd_h5_capture(e, errno);
        st = RESDIAG_E_IO;
    }
    if (acpl >= 0)
        H5Pclose(acpl);
    return st;
}

static resdiag_status put_scalar(hid_t obj, const char *name, hid_t ftype, hid_t mtype,
                                 const void *v, rd_h5_error *e)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) {
        rd_h5_capture(e, errno);
        return RESDIAG_E_IO;
    }
    resdiag_status st = put(obj, name, ftype, mtype, sp, v, e);
    H5Sclose(sp);
    return st;
}

resdiag_status rd_attr_put_int(hid_t obj, const char *name, int v, rd_h5_error *e)
{
    return put_scalar(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT, &v, e);
}

resdiag_status rd_attr_put_i64(hid_t obj, const char *name, int64_t v, rd_h5_error *e)
{
    long long i = v;
    return put_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &i, e);
}

resdiag_status rd_attr_put_u64(hid_t obj, const char *name, uint64_t v, rd_h5_error *e)
{
    unsigned long long u = v;
    return put_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_ULLONG, &u, e);
}

resdiag_status rd_attr_put_str(hid_t obj, const char *name, const char *v, rd_h5_error *e)
{
    hid_t t = rd_h5_vlen_string_type();
    if (t < 0) {
        rd_h5_capture(e, errno);
        return RESDIAG_E_IO;
    }
    const char *s = v ? v : "";
    resdiag_status st = put_scalar(obj, name, t, t, &s, e);
    H5Tclose(t);
    return st;
}

resdiag_status rd_attr_put_strs(hid_t obj, const char *name, const char *const *v, size_t n,
                                rd_h5_error *e)
{
    hid_t t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    const char **tmp = NULL;
    resdiag_status st = RESDIAG_E_IO;
    hsize_t dims[1] = { n };
    if ((t = rd_h5_vlen_string_type()) < 0 || (sp = H5Screate_simple(1, dims, NULL)) < 0) {
        rd_h5_capture(e, errno);
        goto cleanup;
    }
    if (n > 0) {
        if (!(tmp = malloc(n * sizeof *tmp))) {
            st = out_of_memory(e);
            goto cleanup;
        }
        for (size_t i = 0; i < n; i++)
            tmp[i] = v && v[i] ? v[i] : "";
    }
    st = put(obj, name, t, t, sp, n > 0 ? (const void *)tmp : NULL, e);
cleanup:
    free(tmp);
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    return st;
}

/* ----------------------------------------------------------------- read */

void rd_attr_free_strs(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

resdiag_status rd_attr_has(const char *path, hid_t obj, const char *name, int *has)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return rd_h5_fail_call(path, "reading attributes");
    *has = ex > 0;
    return RESDIAG_OK;
}

/* Opens attribute `name` of obj (called `objname` in messages). */
static resdiag_status attr_open(const char *path, hid_t obj, const char *objname,
                                const char *name, hid_t *out)
{
    int has = 0;
    resdiag_status st = rd_attr_has(path, obj, name, &has);
    *out = H5I_INVALID_HID;
    if (st != RESDIAG_OK)
        return st;
    if (!has)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %s has no attribute '%s'", path,
                          objname, name);
    if ((*out = H5Aopen(obj, name, H5P_DEFAULT)) < 0)
        return rd_h5_fail_call(path, name);
    return RESDIAG_OK;
}

/* Number of elements of an attribute: 0 for a null dataspace; rank must be
 * 0 (scalar) or 1. */
static resdiag_status attr_count(const char *path, hid_t a, const char *objname,
                                 const char *name, size_t *n)
{
    hid_t sp = H5Aget_space(a);
    resdiag_status st = RESDIAG_OK;
    if (sp < 0)
        return rd_h5_fail_call(path, name);
    H5S_class_t cls = H5Sget_simple_extent_type(sp);
    int rank = H5Sget_simple_extent_ndims(sp);
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    if (cls == H5S_NULL)
        *n = 0;
    else if ((cls == H5S_SCALAR || cls == H5S_SIMPLE) && rank >= 0 && rank <= 1 && np >= 0)
        *n = (size_t)np;
    else
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not a scalar "
                        "or a list", path, name, objname);
    H5Sclose(sp);
    return st;
}

/* One integer, read with the sign it is stored with: *is_signed, and the
 * value in *sv or *uv. */
static resdiag_status get_integer(const char *path, hid_t obj, const char *objname,
                                  const char *name, int *is_signed, long long *sv,
                                  unsigned long long *uv)
{
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID;
    size_t n = 0;
    resdiag_status st = attr_open(path, obj, objname, name, &a);
    if (st != RESDIAG_OK)
        return st;
    if ((t = H5Aget_type(a)) < 0) {
        st = rd_h5_fail_call(path, name);
        goto cleanup;
    }
    if ((st = attr_count(path, a, objname, name, &n)) != RESDIAG_OK)
        goto cleanup;
    if (H5Tget_class(t) != H5T_INTEGER || n != 1) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not one integer",
                        path, name, objname);
        goto cleanup;
    }
    *is_signed = H5Tget_sign(t) != H5T_SGN_NONE;
    if (*is_signed ? H5Aread(a, H5T_NATIVE_LLONG, sv) < 0 : H5Aread(a, H5T_NATIVE_ULLONG, uv) < 0)
        st = rd_h5_fail_call(path, name);
cleanup:
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

resdiag_status rd_attr_get_int(const char *path, hid_t obj, const char *objname,
                               const char *name, long long lo, long long hi, long long *out)
{
    int is_signed = 0;
    long long v = 0;
    unsigned long long u = 0;
    resdiag_status st = get_integer(path, obj, objname, name, &is_signed, &v, &u);
    if (st != RESDIAG_OK)
        return st;
    if (!is_signed)
        v = u > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)u;
    if (v < lo || v > hi)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is %lld, outside "
                          "%lld..%lld", path, name, objname, v, lo, hi);
    *out = v;
    return RESDIAG_OK;
}

resdiag_status rd_attr_get_u64(const char *path, hid_t obj, const char *objname,
                               const char *name, uint64_t *out)
{
    int is_signed = 0;
    long long v = 0;
    unsigned long long u = 0;
    resdiag_status st = get_integer(path, obj, objname, name, &is_signed, &v, &u);
    if (st != RESDIAG_OK)
        return st;
    if (is_signed && v < 0)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is negative",
                          path, name, objname);
    *out = is_signed ? (uint64_t)v : (uint64_t)u;
    return RESDIAG_OK;
}

/* The n variable-length strings of attribute a (memory type mt) into res. */
static resdiag_status get_vlen_strs(const char *path, hid_t a, hid_t mt, hid_t sp,
                                    const char *objname, const char *name, size_t n, char **res)
{
    char **vbuf = calloc(n, sizeof *vbuf);
    if (!vbuf)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    if (H5Aread(a, mt, vbuf) < 0) {
        free(vbuf);
        return rd_h5_fail_call(path, name);
    }
    size_t longest = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = vbuf[i] ? strnlen(vbuf[i], MAX_ATTR_STRING + 1) : 0;
        if (l > longest)
            longest = l;
        res[i] = l > MAX_ATTR_STRING ? NULL : strdup(vbuf[i] ? vbuf[i] : "");
    }
    H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, vbuf);
    free(vbuf);
    if (longest > MAX_ATTR_STRING)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s holds a string "
                          "of more than %zu bytes", path, name, objname, MAX_ATTR_STRING);
    return RESDIAG_OK;
}

/* The n fixed-length strings of attribute a (file type ft) into res. */
static resdiag_status get_fixed_strs(const char *path, hid_t a, hid_t ft, hid_t mt,
                                     const char *objname, const char *name, size_t n,
                                     char **res)
{
    size_t len = H5Tget_size(ft);
    if (len == 0 || len > MAX_ATTR_STRING)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s has strings of "
                          "%zu bytes", path, name, objname, len);
    char *fbuf = calloc(n, len);
    if (!fbuf)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    if (H5Aread(a, mt, fbuf) < 0) {
        free(fbuf);
        return rd_h5_fail_call(path, name);
    }
    for (size_t i = 0; i < n; i++) {
        res[i] = strndup(fbuf + i * len, len);
        /* space padding is not part of the text */
        if (res[i] && H5Tget_strpad(ft) == H5T_STR_SPACEPAD) {
            size_t l = strlen(res[i]);
            while (l > 0 && res[i][l - 1] == ' ')
                res[i][--l] = '\0';
        }
    }
    free(fbuf);
    return RESDIAG_OK;
}

resdiag_status rd_attr_get_strs(const char *path, hid_t obj, const char *objname,
                                const char *name, int want_scalar, char ***out, size_t *n_out)
{
    hid_t a = H5I_INVALID_HID, ft = H5I_INVALID_HID, mt = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    size_t n = 0;
    char **res = NULL;
    *out = NULL;
    *n_out = 0;
    resdiag_status st = attr_open(path, obj, objname, name, &a);
    if (st != RESDIAG_OK)
        return st;
    if ((ft = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) {
        st = rd_h5_fail_call(path, name);
        goto cleanup;
    }
    if ((st = attr_count(path, a, objname, name, &n)) != RESDIAG_OK)
        goto cleanup;
    if (H5Tget_class(ft) != H5T_STRING || (want_scalar && n != 1)) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not %s", path,
                        name, objname, want_scalar ? "a string" : "a list of strings");
        goto cleanup;
    }
    if (n > MAX_ATTR_STRINGS) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s has %zu strings "
                        "(at most %d)", path, name, objname, n, MAX_ATTR_STRINGS);
        goto cleanup;
    }
    if (!(res = calloc(n ? n : 1, sizeof *res))) {
        st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
        goto cleanup;
    }
    if (n > 0) {
        htri_t var = H5Tis_variable_str(ft);
        if (var < 0 || (mt = H5Tcopy(ft)) < 0) {
            st = rd_h5_fail_call(path, name);
            goto cleanup;
        }
        st = var ? get_vlen_strs(path, a, mt, sp, objname, name, n, res)
                 : get_fixed_strs(path, a, ft, mt, objname, name, n, res);
        if (st != RESDIAG_OK)
            goto cleanup;
    }
    for (size_t i = 0; i < n; i++)
        if (!res[i]) {
            st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
            goto cleanup;
        }
    *out = res;
    *n_out = n;
    res = NULL;
cleanup:
    rd_attr_free_strs(res, n);
    if (mt >= 0)
        H5Tclose(mt);
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

resdiag_status rd_attr_get_str(const char *path, hid_t obj, const char *objname,
                               const char *name, char **out)
{
    char **v = NULL;
    size_t n = 0;
    resdiag_status st = rd_attr_get_strs(path, obj, objname, name, 1, &v, &n);
    *out = NULL;
    if (st == RESDIAG_OK) {
        *out = v[0];
        free(v);
    }
    return st;
}

resdiag_status rd_attr_get_enum(const char *path, hid_t obj, const char *name,
                                const char *(*namefn)(int), int n, int *out)
{
    char *s = NULL;
    resdiag_status st = rd_attr_get_str(path, obj, "the root group", name, &s);
    if (st != RESDIAG_OK)
        return st;
    for (int i = 0; i < n; i++) {
        const char *cand = namefn(i);
        if (cand && strcmp(cand, s) == 0) {
            *out = i;
            free(s);
            return RESDIAG_OK;
        }
    }
    char nb[128];
    st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' is \"%s\", not a known value",
                    path, name, rd_h5_msg_name(s, nb, sizeof nb));
    free(s);
    return st;
}
