/*
 * h5_reader.c - opens a run file (doc/FORMAT.md) again: one being written
 * (HDF5 SWMR), one left by a killed trainer, or a finished one. Nothing in
 * the file is trusted before it is checked against the layout that its own
 * root attributes imply; every problem becomes a status plus one logged line.
 *
 * Which steps are there: the shortest first axis over /steps, /step_time and
 * every table, cut at the first step number that is not a written one (-1,
 * the fill value, or not larger than the one before). The writer writes
 * /steps last, after everything else of those steps was flushed
 * (h5_writer.c).
 *
 * A run file may come from anyone (doc/FORMAT.md, "Reading files from
 * others"): before anything is followed or read, every link the reader
 * could walk must be a hard link, and every dataset it reads must keep its
 * data inside the file (chunked or contiguous, no external storage, not
 * virtual) without filters, which could make HDF5 load a plugin. Work and
 * memory follow what the file holds: the call sites, which the writer
 * stores in full, must be there for every layer the file declares.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5/common.h"
#include "h5/guard.h"
#include "h5/reader.h"
#include "format/format.h"
#include "format/tables.h"
#include "common/log.h"

#define MAX_LAYERS 1000000
#define READ_CACHE_MAX ((size_t)64 << 20)
#define STEP_BLOCK 65536 /* steps read at a time when checking /steps */
#define RD_SWMR_READ_ATTEMPTS 20 /* see resdiag_reader_open */
#define MAX_GROUP_LINKS 1024 /* links in the root or a group: resdiag writes about 15 */
#define MAX_ATTR_STRINGS 1024 /* strings in one attribute: resdiag's lists have at most 32 */
#define MAX_ATTR_STRING ((size_t)1 << 20) /* bytes of one string attribute */
#define MAX_META 256 /* attributes of /meta, as the writer allows (run.c) */
#define MAX_CHUNKS_PER_STEP 64 /* chunks across one step of a time series: the writer's have 1 or 5 */

int rd_h5_reader_summary = 1;

/* Interned strings: pointers stay valid until the reader closes. */
typedef struct pool_block {
    struct pool_block *next;
    size_t used, cap;
    char data[];
} pool_block;

typedef struct intern {
    pool_block *blocks;
    const char **table; /* open addressing, hcap entries */
    size_t hcap, count;
} intern;

typedef struct series {
    const char *name;
    hid_t ds;
    int table;          /* layout table, or -1 for steps / step_time */
    int rank;           /* axes after the step axis */
    hsize_t dims[RD_MAX_RANK];
    hsize_t chunk[RD_MAX_RANK + 1]; /* chunk shape, step axis first; all 0: not chunked */
} series;

struct resdiag_reader {
    hid_t file;
    int swmr;                 /* opened for SWMR reading */
    char *path;
    long long file_size;      /* bytes, at open */
    rd_layout lay;
    resdiag_run_info info;

    char *resdiag_version, *description, *created_utc, *program, *hdf5_version;
    char **sublayer_names;
    size_t n_sublayer_names;
    char **layer_params;
    size_t n_layer_params;
    char **model_params;
    size_t n_model_params;
    char **meta;              /* 2 * n_meta */
    size_t n_meta_strings;

    hid_t steps_ds, time_ds;
    hid_t table_ds[RD_N_TABLES];
    hid_t callsite_ds[RD_N_TABLES];
    hid_t summary_ds[RD_N_SUMMARY];  /* all invalid: no summary (or ignored) */
    int n_series;
    series series[RD_N_TABLES + RD_N_SUMMARY + 2];
    int64_t last_step;        /* step number of step n_steps - 1 */

    const char **callsites;   /* (n_slots) interned */
    intern pool;
};

/* -------------------------------------------------------------- logging */

static resdiag_status rfail(resdiag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static resdiag_status rfail(resdiag_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s", msg);
    return st;
}

/* The HDF5 call just made failed: log it with HDF5's own message. */
static resdiag_status h5fail(const char *path, const char *what)
{
    rd_h5_error e;
    memset(&e, 0, sizeof e);
    rd_h5_capture(&e, 0);
    return rfail(RESDIAG_E_IO, "run file %s: %s: %s", path, what, e.msg);
}

/* A name from the file as it may appear in a message: at most about 80
 * bytes of it (the message stays short whatever the file holds). Not
 * escaped here: rd_log text-escapes every message (escape.h). */
static const char *msg_name(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; *s && o + 4 < len && o < 80; s++)
        buf[o++] = *s;
    if (*s && o + 4 < len)
        o += (size_t)snprintf(buf + o, len - o, "...");
    buf[o] = '\0';
    return buf;
}

/* --------------------------------------------------------------- intern */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *intern_str(intern *in, const char *s)
{
    if (!s[0])
        return "";
    if (in->count * 2 >= in->hcap) {
        size_t ncap = in->hcap ? in->hcap * 2 : 64;
        const char **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < in->hcap; i++) {
            if (!in->table[i])
                continue;
            size_t j = (size_t)hash_str(in->table[i]) & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = in->table[i];
        }
        free(in->table);
        in->table = nt;
        in->hcap = ncap;
    }
    size_t j = (size_t)hash_str(s) & (in->hcap - 1);
    while (in->table[j]) {
        if (strcmp(in->table[j], s) == 0)
            return in->table[j];
        j = (j + 1) & (in->hcap - 1);
    }
    size_t len = strlen(s) + 1;
    pool_block *b = in->blocks;
    if (!b || b->cap - b->used < len) {
        size_t cap = len > 65536 ? len : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = in->blocks;
        in->blocks = b;
    }
    char *dst = b->data + b->used;
    memcpy(dst, s, len);
    b->used += len;
    in->table[j] = dst;
    in->count++;
    return dst;
}

static void intern_free(intern *in)
{
    while (in->blocks) {
        pool_block *n = in->blocks->next;
        free(in->blocks);
        in->blocks = n;
    }
    free(in->table);
    in->table = NULL;
    in->hcap = in->count = 0;
}

static void free_strs(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ----------------------------------------------------------- attributes */

/* Opens attribute `name` of obj (called `objname` in messages). */
static resdiag_status attr_open(const char *path, hid_t obj, const char *objname,
                                const char *name, hid_t *out)
{
    *out = H5I_INVALID_HID;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return h5fail(path, "reading attributes");
    if (ex == 0)
        return rfail(RESDIAG_E_FORMAT, "run file %s: %s has no attribute '%s'", path, objname,
                     name);
    if ((*out = H5Aopen(obj, name, H5P_DEFAULT)) < 0)
        return h5fail(path, name);
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
        return h5fail(path, name);
    H5S_class_t cls = H5Sget_simple_extent_type(sp);
    int rank = H5Sget_simple_extent_ndims(sp);
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    if (cls == H5S_NULL)
        *n = 0;
    else if ((cls == H5S_SCALAR || cls == H5S_SIMPLE) && rank >= 0 && rank <= 1 && np >= 0)
        *n = (size_t)np;
    else
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not a scalar or a "
                   "list", path, name, objname);
    H5Sclose(sp);
    return st;
}

/* An integer attribute with one element, in [lo, hi]. */
static resdiag_status attr_int(const char *path, hid_t obj, const char *objname,
                               const char *name, long long lo, long long hi, long long *out)
{
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID;
    resdiag_status st;
    size_t n = 0;
    if ((st = attr_open(path, obj, objname, name, &a)) != RESDIAG_OK)
        return st;
    if ((t = H5Aget_type(a)) < 0) {
        st = h5fail(path, name);
        goto cleanup;
    }
    if ((st = attr_count(path, a, objname, name, &n)) != RESDIAG_OK)
        goto cleanup;
    if (H5Tget_class(t) != H5T_INTEGER || n != 1) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not one integer",
                   path, name, objname);
        goto cleanup;
    }
    long long v = 0;
    if (H5Tget_sign(t) == H5T_SGN_NONE) {
        unsigned long long u = 0;
        if (H5Aread(a, H5T_NATIVE_ULLONG, &u) < 0) {
            st = h5fail(path, name);
            goto cleanup;
        }
        v = u > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)u;
    } else if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) {
        st = h5fail(path, name);
        goto cleanup;
    }
    if (v < lo || v > hi) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is %lld, outside %lld..%lld",
                   path, name, objname, v, lo, hi);
        goto cleanup;
    }
    *out = v;
cleanup:
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

static resdiag_status attr_u64(const char *path, hid_t obj, const char *objname,
                               const char *name, uint64_t *out)
{
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID;
    resdiag_status st;
    size_t n = 0;
    if ((st = attr_open(path, obj, objname, name, &a)) != RESDIAG_OK)
        return st;
    if ((t = H5Aget_type(a)) < 0) {
        st = h5fail(path, name);
        goto cleanup;
    }
    if ((st = attr_count(path, a, objname, name, &n)) != RESDIAG_OK)
        goto cleanup;
    if (H5Tget_class(t) != H5T_INTEGER || n != 1) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not one integer",
                   path, name, objname);
        goto cleanup;
    }
    if (H5Tget_sign(t) != H5T_SGN_NONE) {
        long long v = 0;
        if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) {
            st = h5fail(path, name);
            goto cleanup;
        }
        if (v < 0) {
            st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is negative", path,
                       name, objname);
            goto cleanup;
        }
        *out = (uint64_t)v;
    } else {
        unsigned long long u = 0;
        if (H5Aread(a, H5T_NATIVE_ULLONG, &u) < 0) {
            st = h5fail(path, name);
            goto cleanup;
        }
        *out = u;
    }
cleanup:
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

/* A string attribute, scalar (want_scalar: exactly one element) or a list,
 * variable- or fixed-length. *out gets n malloc'd strings. */
static resdiag_status attr_strs(const char *path, hid_t obj, const char *objname,
                                const char *name, int want_scalar, char ***out, size_t *n_out)
{
    hid_t a = H5I_INVALID_HID, ft = H5I_INVALID_HID, mt = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    resdiag_status st;
    size_t n = 0;
    char **res = NULL, **vbuf = NULL;
    char *fbuf = NULL;
    *out = NULL;
    *n_out = 0;
    if ((st = attr_open(path, obj, objname, name, &a)) != RESDIAG_OK)
        return st;
    if ((ft = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) {
        st = h5fail(path, name);
        goto cleanup;
    }
    if ((st = attr_count(path, a, objname, name, &n)) != RESDIAG_OK)
        goto cleanup;
    if (H5Tget_class(ft) != H5T_STRING || (want_scalar && n != 1)) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s is not %s", path, name,
                   objname, want_scalar ? "a string" : "a list of strings");
        goto cleanup;
    }
    if (n > MAX_ATTR_STRINGS) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s has %zu strings (at "
                   "most %d)", path, name, objname, n, MAX_ATTR_STRINGS);
        goto cleanup;
    }
    res = calloc(n ? n : 1, sizeof *res);
    if (!res) {
        st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
        goto cleanup;
    }
    if (n == 0)
        goto done;
    htri_t var = H5Tis_variable_str(ft);
    if (var < 0 || (mt = H5Tcopy(ft)) < 0) {
        st = h5fail(path, name);
        goto cleanup;
    }
    if (var) {
        vbuf = calloc(n, sizeof *vbuf);
        if (!vbuf) {
            st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
            goto cleanup;
        }
        if (H5Aread(a, mt, vbuf) < 0) {
            st = h5fail(path, name);
            goto cleanup;
        }
        size_t longest = 0;
        for (size_t i = 0; i < n; i++) {
            size_t l = vbuf[i] ? strnlen(vbuf[i], MAX_ATTR_STRING + 1) : 0;
            if (l > longest)
                longest = l;
            res[i] = l > MAX_ATTR_STRING ? NULL : strdup(vbuf[i] ? vbuf[i] : "");
        }
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, vbuf);
        if (longest > MAX_ATTR_STRING) {
            st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s holds a string of "
                       "more than %zu bytes", path, name, objname, MAX_ATTR_STRING);
            goto cleanup;
        }
    } else {
        size_t len = H5Tget_size(ft);
        if (len == 0 || len > MAX_ATTR_STRING) {
            st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' of %s has strings of %zu "
                       "bytes", path, name, objname, len);
            goto cleanup;
        }
        fbuf = calloc(n, len);
        if (!fbuf) {
            st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
            goto cleanup;
        }
        if (H5Aread(a, mt, fbuf) < 0) {
            st = h5fail(path, name);
            goto cleanup;
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
    }
    for (size_t i = 0; i < n; i++)
        if (!res[i]) {
            st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
            goto cleanup;
        }
done:
    *out = res;
    *n_out = n;
    res = NULL;
cleanup:
    free_strs(res, n);
    free(vbuf);
    free(fbuf);
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

static resdiag_status attr_str(const char *path, hid_t obj, const char *objname,
                               const char *name, char **out)
{
    char **v = NULL;
    size_t n = 0;
    resdiag_status st = attr_strs(path, obj, objname, name, 1, &v, &n);
    *out = NULL;
    if (st == RESDIAG_OK) {
        *out = v[0];
        free(v);
    }
    return st;
}

/* Names: n of them, each 1..RESDIAG_MAX_NAME-1 bytes, all different. */
static resdiag_status check_names(const char *path, const char *name, char **v, size_t n,
                                  size_t expect)
{
    if (n != expect)
        return rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' has %zu names, expected %zu",
                     path, name, n, expect);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (l == 0 || l >= RESDIAG_MAX_NAME)
            return rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s': name %zu is %s", path,
                         name, i, l ? "too long" : "empty");
        for (size_t j = 0; j < i; j++)
            if (strcmp(v[i], v[j]) == 0) {
                char nb[128];
                return rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s': '%s' appears twice",
                             path, name, msg_name(v[i], nb, sizeof nb));
            }
    }
    return RESDIAG_OK;
}

/* A string attribute that must be one of names[0..n-1]; *out its index. */
static resdiag_status attr_enum(const char *path, hid_t obj, const char *name,
                                const char *(*namefn)(int), int n, int *out)
{
    char *s = NULL;
    resdiag_status st = attr_str(path, obj, "the root group", name, &s);
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
    st = rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' is \"%s\", not a known value", path,
               name, msg_name(s, nb, sizeof nb));
    free(s);
    return st;
}

static const char *block_name_i(int i) { return rd_h5_block_name((resdiag_block_kind)i); }
static const char *placement_name_i(int i) { return resdiag_placement_name((resdiag_placement)i); }
static const char *norm_name_i(int i) { return resdiag_norm_kind_name((resdiag_norm_kind)i); }
static const char *run_kind_name_i(int i) { return resdiag_run_kind_name((resdiag_run_kind)i); }

/* ---------------------------------------------------------------- /meta */

typedef struct meta_ctx {
    resdiag_reader *rd;
    resdiag_status st;
    size_t cap;
} meta_ctx;

static herr_t meta_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    meta_ctx *c = data;
    resdiag_reader *rd = c->rd;
    char *val = NULL;
    c->st = attr_str(rd->path, loc, "/meta", name, &val);
    if (c->st != RESDIAG_OK)
        return -1;
    if (rd->n_meta_strings + 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        char **nm = realloc(rd->meta, ncap * sizeof *nm);
        if (!nm) {
            free(val);
            c->st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
            return -1;
        }
        rd->meta = nm;
        c->cap = ncap;
    }
    char *key = strdup(name);
    if (!key) {
        free(val);
        c->st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
        return -1;
    }
    rd->meta[rd->n_meta_strings++] = key;
    rd->meta[rd->n_meta_strings++] = val;
    return 0;
}

static resdiag_status read_meta(resdiag_reader *rd)
{
    hid_t g = H5I_INVALID_HID, gcpl = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    htri_t ex = H5Lexists(rd->file, RD_META_GROUP, H5P_DEFAULT);
    if (ex < 0)
        return h5fail(rd->path, "/" RD_META_GROUP);
    if (ex == 0)
        return rfail(RESDIAG_E_FORMAT, "run file %s: no /" RD_META_GROUP " group", rd->path);
    if ((g = H5Gopen2(rd->file, RD_META_GROUP, H5P_DEFAULT)) < 0) {
        st = h5fail(rd->path, "/" RD_META_GROUP);
        goto cleanup;
    }
    unsigned crt = 0;
    if ((gcpl = H5Gget_create_plist(g)) < 0 || H5Pget_attr_creation_order(gcpl, &crt) < 0) {
        st = h5fail(rd->path, "/" RD_META_GROUP);
        goto cleanup;
    }
    H5O_info_t oi;
    if (H5Oget_info2(g, &oi, H5O_INFO_NUM_ATTRS) < 0) {
        st = h5fail(rd->path, "/" RD_META_GROUP);
        goto cleanup;
    }
    if (oi.num_attrs > MAX_META) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: /" RD_META_GROUP " has %llu attributes (at "
                   "most %d)", rd->path, (unsigned long long)oi.num_attrs, MAX_META);
        goto cleanup;
    }
    meta_ctx c = { rd, RESDIAG_OK, 0 };
    H5_index_t idx = (crt & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    if (H5Aiterate2(g, idx, H5_ITER_INC, NULL, meta_cb, &c) < 0)
        st = c.st != RESDIAG_OK ? c.st : h5fail(rd->path, "/" RD_META_GROUP);
cleanup:
    if (gcpl >= 0)
        H5Pclose(gcpl);
    if (g >= 0)
        H5Gclose(g);
    return st;
}

/* ----------------------------------------------------------------- root */

static resdiag_status read_root(resdiag_reader *rd)
{
    const char *P = rd->path, *R = "the root group";
    hid_t f = rd->file;
    resdiag_run_info *in = &rd->info;
    resdiag_status st;
    long long v;

    htri_t ex = H5Aexists(f, "schema_version");
    if (ex < 0)
        return h5fail(P, "reading the root attributes");
    if (ex == 0)
        return rfail(RESDIAG_E_FORMAT, "not a resdiag run file (no schema_version): %s", P);
    if ((st = attr_int(P, f, R, "schema_version", LLONG_MIN, LLONG_MAX, &v)) != RESDIAG_OK)
        return st;
    if (v > RD_SCHEMA_VERSION)
        return rfail(RESDIAG_E_VERSION,
                     "run file %s has schema version %lld; this resdiag (%s) reads up to %d",
                     P, v, RESDIAG_VERSION_STRING, RD_SCHEMA_VERSION);
    if (v < 1)
        return rfail(RESDIAG_E_FORMAT, "run file %s: schema_version %lld is not valid", P, v);
    in->schema_version = (int)v;

#define INT_ATTR(name, lo, hi, dst)                                                   \
    do {                                                                              \
        if ((st = attr_int(P, f, R, name, lo, hi, &v)) != RESDIAG_OK)                 \
            return st;                                                                \
        dst = (int)v;                                                                 \
    } while (0)
    INT_ATTR("n_layers", 1, MAX_LAYERS, in->n_layers);
    INT_ATTR("d_model", 1, INT_MAX, in->d_model);
    INT_ATTR("n_sublayers", 1, RESDIAG_MAX_SUBLAYERS, in->n_sublayers);
    INT_ATTR("declared_mix_layers", 0, in->n_layers, in->declared_mix_layers);
    INT_ATTR("shard_cols", 0, INT_MAX, in->shard_cols);
    INT_ATTR("sketch_size", 0, RESDIAG_MAX_SKETCH, in->sketch_size);
#undef INT_ATTR
    if ((st = attr_u64(P, f, R, "sketch_seed", &in->sketch_seed)) != RESDIAG_OK)
        return st;

    int e = 0;
    if ((st = attr_enum(P, f, "block", block_name_i, 2, &e)) != RESDIAG_OK)
        return st;
    in->block = (resdiag_block_kind)e;
    if ((st = attr_enum(P, f, "declared_placement", placement_name_i,
                        RESDIAG_PLACEMENT_NONE + 1, &e)) != RESDIAG_OK)
        return st;
    in->declared_placement = (resdiag_placement)e;
    if ((st = attr_enum(P, f, "norm_kind", norm_name_i, RESDIAG_NORM_RMSNORM + 1, &e))
        != RESDIAG_OK)
        return st;
    in->norm_kind = (resdiag_norm_kind)e;
    /* run_kind came later (additive): a file without it is a training run. */
    in->run_kind = RESDIAG_RUN_TRAINING;
    htri_t has_kind = H5Aexists(f, "run_kind");
    if (has_kind < 0)
        return h5fail(P, "reading the root attributes");
    if (has_kind > 0) {
        if ((st = attr_enum(P, f, "run_kind", run_kind_name_i, RESDIAG_RUN_INFERENCE + 1, &e))
            != RESDIAG_OK)
            return st;
        in->run_kind = (resdiag_run_kind)e;
    }

    if ((st = attr_strs(P, f, R, "sublayer_names", 0, &rd->sublayer_names,
                        &rd->n_sublayer_names)) != RESDIAG_OK
        || (st = check_names(P, "sublayer_names", rd->sublayer_names, rd->n_sublayer_names,
                             (size_t)in->n_sublayers)) != RESDIAG_OK)
        return st;
    if ((st = attr_strs(P, f, R, "layer_param_names", 0, &rd->layer_params,
                        &rd->n_layer_params)) != RESDIAG_OK)
        return st;
    if (rd->n_layer_params > RESDIAG_MAX_PARAMS)
        return rfail(RESDIAG_E_FORMAT, "run file %s: %zu layer parameters (at most %d)", P,
                     rd->n_layer_params, RESDIAG_MAX_PARAMS);
    if ((st = check_names(P, "layer_param_names", rd->layer_params, rd->n_layer_params,
                          rd->n_layer_params)) != RESDIAG_OK)
        return st;
    if ((st = attr_strs(P, f, R, "model_param_names", 0, &rd->model_params,
                        &rd->n_model_params)) != RESDIAG_OK)
        return st;
    if (rd->n_model_params > RESDIAG_MAX_PARAMS)
        return rfail(RESDIAG_E_FORMAT, "run file %s: %zu model parameters (at most %d)", P,
                     rd->n_model_params, RESDIAG_MAX_PARAMS);
    if ((st = check_names(P, "model_param_names", rd->model_params, rd->n_model_params,
                          rd->n_model_params)) != RESDIAG_OK)
        return st;
    in->n_layer_params = (int)rd->n_layer_params;
    in->n_model_params = (int)rd->n_model_params;

    /* Labels of the fixed axes: their number is part of the layout. */
    static const struct { const char *name; size_t n; } labels[] = {
        { "site_names", RESDIAG_N_BLOCK_SITES },
        { "model_site_names", RESDIAG_N_MODEL_SITES },
        { "field_names", RESDIAG_N_FIELDS },
        { "field_units", RESDIAG_N_FIELDS },
    };
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        char **names = NULL;
        size_t n = 0;
        if ((st = attr_strs(P, f, R, labels[i].name, 0, &names, &n)) != RESDIAG_OK)
            return st;
        free_strs(names, n);
        if (n != labels[i].n)
            return rfail(RESDIAG_E_FORMAT, "run file %s: attribute '%s' has %zu entries, "
                         "expected %zu", P, labels[i].name, n, labels[i].n);
    }

    if ((st = attr_str(P, f, R, "resdiag_version", &rd->resdiag_version)) != RESDIAG_OK
        || (st = attr_str(P, f, R, "description", &rd->description)) != RESDIAG_OK
        || (st = attr_str(P, f, R, "created_utc", &rd->created_utc)) != RESDIAG_OK
        || (st = attr_str(P, f, R, "program", &rd->program)) != RESDIAG_OK
        || (st = attr_str(P, f, R, "hdf5_version", &rd->hdf5_version)) != RESDIAG_OK)
        return st;
    /* "host" is provenance the API does not expose; check only its type. */
    char *host = NULL;
    if ((st = attr_str(P, f, R, "host", &host)) != RESDIAG_OK)
        return st;
    free(host);
    return RESDIAG_OK;
}

/* ---------------------------------------------------------------- links */

/* Every link of the root and of the groups it holds must be a hard link:
 * a soft link could point anywhere, an external link makes HDF5 open
 * another file (a FIFO hangs it; /etc/passwd is read). Checked before any
 * path is opened: H5Lexists and H5Dopen2 follow every link on a path, and
 * H5Literate reports each link without following it. The reader never
 * opens anything deeper than a group of the root. */
typedef struct link_ctx {
    resdiag_reader *rd;
    const char *group; /* "" for the root, else "/name" (escaped) */
    int depth;         /* 0 for the root */
    int count;
    resdiag_status st;
} link_ctx;

static resdiag_status check_links_in(resdiag_reader *rd, hid_t g, const char *group, int depth);

static herr_t link_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    link_ctx *c = data;
    char nb[128], where[256];
    snprintf(where, sizeof where, "%s/%s", c->group, msg_name(name, nb, sizeof nb));
    if (++c->count > MAX_GROUP_LINKS) {
        c->st = rfail(RESDIAG_E_FORMAT, "run file %s: %s holds more than %d links", c->rd->path,
                      c->group[0] ? c->group : "the root group", MAX_GROUP_LINKS);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
        const char *kind = info->type == H5L_TYPE_SOFT       ? "a soft link"
                           : info->type == H5L_TYPE_EXTERNAL ? "an external link (into another file)"
                                                             : "a user-defined link";
        c->st = rfail(RESDIAG_E_FORMAT, "run file %s: %s is %s; resdiag follows only hard links "
                      "to objects stored inside the file", c->rd->path, where, kind);
        return -1;
    }
    if (c->depth > 0)
        return 0;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        c->st = h5fail(c->rd->path, where);
        return -1;
    }
    if (oi.type != H5O_TYPE_GROUP)
        return 0;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0) {
        c->st = h5fail(c->rd->path, where);
        return -1;
    }
    c->st = check_links_in(c->rd, sub, where, c->depth + 1);
    H5Gclose(sub);
    return c->st == RESDIAG_OK ? 0 : -1;
}

static resdiag_status check_links_in(resdiag_reader *rd, hid_t g, const char *group, int depth)
{
    link_ctx c = { rd, group, depth, 0, RESDIAG_OK };
    if (H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, link_cb, &c) < 0)
        return c.st != RESDIAG_OK ? c.st
                                  : h5fail(rd->path, group[0] ? group : "the root group");
    return RESDIAG_OK;
}

/* ------------------------------------------------------------- datasets */

/* The data of dataset ds must be stored inside the file, as resdiag
 * writes it: chunked (or contiguous), no external storage, not virtual (a
 * view of datasets in other files), no filters (HDF5 would look for an
 * unknown one among the plugins in HDF5_PLUGIN_PATH and run its code), and
 * no more storage than the file has bytes. Checked once, at open, before
 * anything of the dataset is read. */
static resdiag_status check_storage(const resdiag_reader *rd, hid_t ds, const char *name)
{
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0)
        return h5fail(rd->path, name);
    resdiag_status st = RESDIAG_OK;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int n_external = H5Pget_external_count(dcpl);
    int n_filters = H5Pget_nfilters(dcpl);
    const char *P = rd->path;
    if (layout < 0 || n_external < 0 || n_filters < 0) {
        st = h5fail(P, name);
    } else if (layout == H5D_VIRTUAL) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is a virtual dataset (its data "
                   "is in other files); resdiag reads only data stored inside the file", P, name);
    } else if (n_external > 0) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s uses external storage; resdiag "
                   "reads only data stored inside the file", P, name);
    } else if (layout != H5D_CHUNKED && layout != H5D_CONTIGUOUS) {
        st = rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s has a storage layout that "
                   "resdiag does not write (only chunked or contiguous)", P, name);
    } else if (n_filters > 0) {
        unsigned flags = 0;
        size_t n_cd = 0;
        /* no filter_config: that would look the filter up */
        H5Z_filter_t id = H5Pget_filter2(dcpl, 0, &flags, &n_cd, NULL, 0, NULL, NULL);
        st = rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is stored through HDF5 filter "
                   "%d; resdiag writes no filters and loads no filter plugins", P, name, (int)id);
    }
    H5Pclose(dcpl);
    if (st != RESDIAG_OK)
        return st;
    /* A chunk index or a contiguous address can claim any storage; past
     * the end of the file HDF5 reads zeros. */
    hsize_t bytes = H5Dget_storage_size(ds);
    if (bytes > (hsize_t)rd->file_size)
        return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s claims %llu bytes of storage, "
                     "more than the file's %lld", P, name, (unsigned long long)bytes,
                     rd->file_size);
    if (layout == H5D_CONTIGUOUS) {
        haddr_t at = H5Dget_offset(ds);
        if (at != HADDR_UNDEF && (at > (haddr_t)rd->file_size
                                  || bytes > (hsize_t)rd->file_size - (hsize_t)at))
            return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s lies past the end of the "
                         "file (%llu bytes at byte %llu, file of %lld bytes)", P, name,
                         (unsigned long long)bytes, (unsigned long long)at, rd->file_size);
    }
    return RESDIAG_OK;
}

/* The writer allocates every call-site dataset in full when it creates
 * the file (h5_writer.c), so their storage is what shows that the layers,
 * sublayers and parameters the root attributes declare are really there:
 * a small file that declares a million layers would otherwise make every
 * reader, and the analysis, do work for each of them. */
static resdiag_status check_callsites_stored(const resdiag_reader *rd, hid_t ds,
                                             const char *name)
{
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t elem = t >= 0 ? H5Tget_size(t) : 0;
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (np < 0 || elem == 0)
        return h5fail(rd->path, name);
    hsize_t want = (hsize_t)np * elem, have = H5Dget_storage_size(ds);
    if (have < want)
        return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s stores %llu of its %llu bytes: "
                     "the file does not hold the %d layers (x %d sublayers) it declares",
                     rd->path, name, (unsigned long long)have, (unsigned long long)want,
                     rd->info.n_layers, rd->info.n_sublayers);
    return RESDIAG_OK;
}

/* 1 if every component of path exists as a link, 0 if not, -1 on error. */
static int path_exists(hid_t file, const char *path)
{
    char buf[256];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, path, len + 1);
    for (size_t i = 0; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        htri_t ex = H5Lexists(file, buf, H5P_DEFAULT);
        buf[i] = c;
        if (ex <= 0)
            return ex < 0 ? -1 : 0;
    }
    return 1;
}

/* Opens a dataset and checks its type class, rank and fixed dims
 * (time_series: the first axis is the step axis, not checked). */
static resdiag_status open_checked(resdiag_reader *rd, const char *name, H5T_class_t cls,
                                   int time_series, int rank, const hsize_t *dims, hid_t *out)
{
    hid_t ds = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    hid_t dapl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    *out = H5I_INVALID_HID;
    int ex = path_exists(rd->file, name);
    if (ex < 0)
        return h5fail(rd->path, name);
    if (ex == 0)
        return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is missing", rd->path, name);
    if ((ds = H5Dopen2(rd->file, name, H5P_DEFAULT)) < 0) {
        st = h5fail(rd->path, name);
        goto cleanup;
    }
    if ((st = check_storage(rd, ds, name)) != RESDIAG_OK)
        goto cleanup;
    if ((t = H5Dget_type(ds)) < 0 || (sp = H5Dget_space(ds)) < 0) {
        st = h5fail(rd->path, name);
        goto cleanup;
    }
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t cur[RD_MAX_RANK + 1];
    int want = rank + (time_series ? 1 : 0);
    int ok = H5Tget_class(t) == cls && H5Sget_simple_extent_type(sp) == H5S_SIMPLE && nd == want;
    if (ok && H5Sget_simple_extent_dims(sp, cur, NULL) < 0) {
        st = h5fail(rd->path, name);
        goto cleanup;
    }
    for (int i = 0; ok && i < rank; i++)
        ok = cur[i + (time_series ? 1 : 0)] == dims[i];
    if (!ok) {
        char shape[128] = "";
        size_t o = 0;
        for (int i = 0; i < rank && o < sizeof shape; i++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", i ? ", " : "",
                                  (unsigned long long)dims[i]);
        st = rfail(RESDIAG_E_FORMAT,
                   "run file %s: dataset /%s does not have the type or shape the model implies "
                   "(%s%s%s)", rd->path, name, time_series ? "steps" : "", time_series && rank ? ", " : "",
                   shape);
        goto cleanup;
    }
    if (time_series) {
        /* A chunk cache that holds a chunk or two, so that reading one
         * slot after another does not decode the same chunk again. */
        hsize_t chunk[RD_MAX_RANK + 1];
        size_t bytes = H5Tget_size(t);
        if ((dcpl = H5Dget_create_plist(ds)) < 0) {
            st = h5fail(rd->path, name);
            goto cleanup;
        }
        if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, want, chunk) == want) {
            for (int i = 0; i < want; i++)
                bytes *= (size_t)chunk[i];
            size_t cache = 2 * bytes + ((size_t)1 << 20);
            if (cache > READ_CACHE_MAX)
                cache = READ_CACHE_MAX;
            if ((dapl = H5Pcreate(H5P_DATASET_ACCESS)) < 0
                || H5Pset_chunk_cache(dapl, 521, cache, 1.0) < 0) {
                st = h5fail(rd->path, name);
                goto cleanup;
            }
            H5Dclose(ds);
            if ((ds = H5Dopen2(rd->file, name, dapl)) < 0) {
                st = h5fail(rd->path, name);
                goto cleanup;
            }
        }
    }
    *out = ds;
    ds = H5I_INVALID_HID;
cleanup:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (dapl >= 0)
        H5Pclose(dapl);
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (ds >= 0)
        H5Dclose(ds);
    return st;
}

/* The per-step summary, where the file has one (files of resdiag 0.1.0 do
 * not) and it is not to be ignored. Its datasets count as time series:
 * the writer commits them with the tables. */
static resdiag_status open_summary(resdiag_reader *rd)
{
    const char *env = getenv("RESDIAG_IGNORE_SUMMARY");
    if (!rd_h5_reader_summary || (env && strcmp(env, "1") == 0))
        return RESDIAG_OK;
    int ex = path_exists(rd->file, RD_SUMMARY_GROUP);
    if (ex < 0)
        return h5fail(rd->path, RD_SUMMARY_GROUP);
    if (ex == 0)
        return RESDIAG_OK;
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        const rd_table *t = &rd->lay.summary[i];
        hsize_t dims[RD_MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        resdiag_status st = open_checked(rd, t->name, H5T_FLOAT, 1, t->rank, dims,
                                         &rd->summary_ds[i]);
        if (st != RESDIAG_OK)
            return st;
        series *se = &rd->series[rd->n_series++];
        se->name = t->name;
        se->ds = rd->summary_ds[i];
        se->table = -1;
        se->rank = t->rank;
        memcpy(se->dims, dims, sizeof dims);
    }
    return RESDIAG_OK;
}

static resdiag_status open_datasets(resdiag_reader *rd)
{
    resdiag_status st;
    if ((st = open_checked(rd, RD_STEPS_NAME, H5T_INTEGER, 1, 0, NULL, &rd->steps_ds))
        != RESDIAG_OK
        || (st = open_checked(rd, RD_STEP_TIME_NAME, H5T_FLOAT, 1, 0, NULL, &rd->time_ds))
               != RESDIAG_OK)
        return st;
    rd->series[0] = (series){ RD_STEPS_NAME, rd->steps_ds, -1, 0, { 0 }, { 0 } };
    rd->series[1] = (series){ RD_STEP_TIME_NAME, rd->time_ds, -1, 0, { 0 }, { 0 } };
    rd->n_series = 2;
    for (int i = 0; i < RD_N_TABLES; i++) {
        const rd_table *t = &rd->lay.tables[i];
        if (t->count == 0)
            continue;
        if (RD_TABLE_OPTIONAL(i)) { /* a file from before the table: it reads as NaN */
            int ex = path_exists(rd->file, t->name);
            if (ex < 0)
                return h5fail(rd->path, t->name);
            if (ex == 0)
                continue;
        }
        hsize_t dims[RD_MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        if ((st = open_checked(rd, t->name, H5T_FLOAT, 1, t->rank, dims, &rd->table_ds[i]))
            != RESDIAG_OK)
            return st;
        series *s = &rd->series[rd->n_series++];
        s->name = t->name;
        s->ds = rd->table_ds[i];
        s->table = i;
        s->rank = t->rank;
        memcpy(s->dims, dims, sizeof dims);
        if (t->kind != RD_KIND_STATS || !t->callsite_name)
            continue;
        if ((st = open_checked(rd, t->callsite_name, H5T_STRING, 0, t->rank - 1, dims,
                               &rd->callsite_ds[i])) != RESDIAG_OK)
            return st;
        hid_t ft = H5Dget_type(rd->callsite_ds[i]);
        if (ft < 0)
            return h5fail(rd->path, t->callsite_name);
        htri_t var = H5Tis_variable_str(ft);
        H5Tclose(ft);
        if (var != 0)
            return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is not fixed-length strings",
                         rd->path, t->callsite_name);
        if ((st = check_callsites_stored(rd, rd->callsite_ds[i], t->callsite_name)) != RESDIAG_OK)
            return st;
    }
    return open_summary(rd);
}

/* Chunk shape of each time series (for rd_reader_stored), and no more
 * chunks across one step than MAX_CHUNKS_PER_STEP: asking which chunks
 * of a step are stored must cost little. */
static resdiag_status read_chunk_shapes(resdiag_reader *rd)
{
    for (int i = 0; i < rd->n_series; i++) {
        series *se = &rd->series[i];
        hid_t dcpl = H5Dget_create_plist(se->ds);
        if (dcpl < 0)
            return h5fail(rd->path, se->name);
        int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
        int nd = chunked ? H5Pget_chunk(dcpl, se->rank + 1, se->chunk) : 0;
        H5Pclose(dcpl);
        if (!chunked) {
            memset(se->chunk, 0, sizeof se->chunk);
            continue;
        }
        if (nd != se->rank + 1)
            return h5fail(rd->path, se->name);
        double per_step = 1;
        for (int k = 0; k < se->rank; k++)
            per_step *= se->chunk[k + 1] ? (double)((se->dims[k] + se->chunk[k + 1] - 1)
                                                    / se->chunk[k + 1])
                                         : INFINITY;
        if (se->chunk[0] == 0 || per_step > MAX_CHUNKS_PER_STEP)
            return rfail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is cut into %.0f chunks "
                         "across each step (resdiag reads at most %d)", rd->path, se->name,
                         per_step, MAX_CHUNKS_PER_STEP);
    }
    return RESDIAG_OK;
}

/* Current length of the step axis of a dataset, or -1 (logged). */
static long long first_axis(const resdiag_reader *rd, const series *s)
{
    hid_t sp = H5Dget_space(s->ds);
    hsize_t dims[RD_MAX_RANK + 1];
    if (sp < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) != s->rank + 1) {
        h5fail(rd->path, s->name);
        if (sp >= 0)
            H5Sclose(sp);
        return -1;
    }
    H5Sclose(sp);
    return (long long)dims[0];
}

/* Sets info.n_steps from the datasets' lengths and the step numbers. */
static resdiag_status count_steps(resdiag_reader *rd)
{
    long long n = LLONG_MAX;
    for (int i = 0; i < rd->n_series; i++) {
        long long len = first_axis(rd, &rd->series[i]);
        if (len < 0)
            return RESDIAG_E_IO;
        if (len < n)
            n = len;
    }
    long long old = rd->info.n_steps;
    if (n < old)
        return rfail(RESDIAG_E_FORMAT, "run file %s: has %lld steps, fewer than the %lld read "
                     "before (was it overwritten?)", rd->path, n, old);
    int64_t *buf = NULL;
    long long good = old;
    int64_t prev = rd->last_step;
    if (n > old) {
        size_t block = (size_t)(n - old < STEP_BLOCK ? n - old : STEP_BLOCK);
        buf = malloc(block * sizeof *buf);
        if (!buf)
            return rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
    }
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    for (long long first = old; first < n && good == first;) {
        hsize_t cnt = (hsize_t)(n - first < STEP_BLOCK ? n - first : STEP_BLOCK);
        hsize_t start = (hsize_t)first;
        if ((fs = H5Dget_space(rd->steps_ds)) < 0
            || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL) < 0
            || (ms = H5Screate_simple(1, &cnt, NULL)) < 0
            || H5Dread(rd->steps_ds, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, buf) < 0) {
            st = h5fail(rd->path, RD_STEPS_NAME);
            goto cleanup;
        }
        H5Sclose(fs);
        H5Sclose(ms);
        fs = ms = H5I_INVALID_HID;
        for (hsize_t i = 0; i < cnt; i++) {
            /* -1 (the fill value), or not increasing (as zeros read past
             * the end of a damaged file look): not written. Step numbers
             * strictly increase (resdiag_step_begin enforces it). */
            if (buf[i] < 0 || (good > 0 && buf[i] <= prev))
                break;
            prev = buf[i];
            good++;
        }
        first += (long long)cnt;
    }
    rd->info.n_steps = good;
    rd->last_step = prev;
cleanup:
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    free(buf);
    return st;
}

/* Reads every call-site dataset into rd->callsites (interned). */
static resdiag_status read_callsites(resdiag_reader *rd)
{
    resdiag_status st = RESDIAG_OK;
    hid_t mt = H5I_INVALID_HID, fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    char *buf = NULL;
    if (!rd->callsites) {
        rd->callsites = calloc(rd->lay.n_slots ? rd->lay.n_slots : 1, sizeof *rd->callsites);
        if (!rd->callsites)
            return rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
        for (size_t i = 0; i < rd->lay.n_slots; i++)
            rd->callsites[i] = "";
    }
    if ((mt = rd_h5_fixed_string_type(RD_CALLSITE_LEN)) < 0)
        return h5fail(rd->path, "call sites");
    for (int i = 0; i < RD_N_TABLES; i++) {
        const rd_table *t = &rd->lay.tables[i];
        if (rd->callsite_ds[i] < 0)
            continue;
        int rank = t->rank - 1;
        hsize_t start[RD_MAX_RANK] = { 0 }, count[RD_MAX_RANK];
        size_t inner = 1;
        for (int k = 0; k < rank; k++) {
            count[k] = (hsize_t)t->dims[k];
            if (k > 0)
                inner *= (size_t)t->dims[k];
        }
        /* A few MiB at a time along the first axis. */
        size_t rows = ((size_t)4 << 20) / (inner * RD_CALLSITE_LEN);
        if (rows < 1)
            rows = 1;
        if (rows > (size_t)t->dims[0])
            rows = (size_t)t->dims[0];
        free(buf);
        buf = malloc(rows * inner * RD_CALLSITE_LEN);
        if (!buf) {
            st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
            goto cleanup;
        }
        for (size_t r0 = 0; r0 < (size_t)t->dims[0]; r0 += rows) {
            size_t nr = (size_t)t->dims[0] - r0 < rows ? (size_t)t->dims[0] - r0 : rows;
            start[0] = r0;
            count[0] = nr;
            hsize_t mn = nr * inner;
            if ((fs = H5Dget_space(rd->callsite_ds[i])) < 0
                || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0
                || (ms = H5Screate_simple(1, &mn, NULL)) < 0
                || H5Dread(rd->callsite_ds[i], mt, ms, fs, H5P_DEFAULT, buf) < 0) {
                st = h5fail(rd->path, t->callsite_name);
                goto cleanup;
            }
            H5Sclose(fs);
            H5Sclose(ms);
            fs = ms = H5I_INVALID_HID;
            for (size_t k = 0; k < nr * inner; k++) {
                char *s = buf + k * RD_CALLSITE_LEN;
                s[RD_CALLSITE_LEN - 1] = '\0';
                const char *p = intern_str(&rd->pool, s);
                if (!p) {
                    st = rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", rd->path);
                    goto cleanup;
                }
                rd->callsites[t->slot_offset + r0 * inner + k] = p;
            }
        }
    }
cleanup:
    free(buf);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    H5Tclose(mt);
    return st;
}

/* ----------------------------------------------------------- open/close */

/* Does the file exist, is it a regular file, does it carry the HDF5
 * signature at 0, 512, 1024, ...? Keeps text files away from HDF5. */
static resdiag_status check_signature(const char *path, long long *size)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rfail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return rfail(RESDIAG_E_FORMAT, "not a regular file: %s", path);
    *size = (long long)sb.st_size;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rfail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    int found = 0;
    for (off_t off = 0; off + RD_H5_SIGNATURE_LEN <= sb.st_size; off = off ? off * 2 : 512) {
        char sig[RD_H5_SIGNATURE_LEN];
        ssize_t r = pread(fd, sig, sizeof sig, off);
        if (r < 0) {
            int err = errno;
            close(fd);
            return rfail(RESDIAG_E_IO, "cannot read run file %s: %s", path, strerror(err));
        }
        if (r == RD_H5_SIGNATURE_LEN && memcmp(sig, RD_H5_SIGNATURE, RD_H5_SIGNATURE_LEN) == 0) {
            found = 1;
            break;
        }
    }
    close(fd);
    if (!found)
        return rfail(RESDIAG_E_FORMAT, "not an HDF5 file: %s", path);
    return RESDIAG_OK;
}

static void reader_free(resdiag_reader *rd)
{
    if (!rd)
        return;
    for (int i = 0; i < RD_N_TABLES; i++) {
        if (rd->table_ds[i] >= 0)
            H5Dclose(rd->table_ds[i]);
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
    if (rd->file >= 0)
        H5Fclose(rd->file);
    free(rd->resdiag_version);
    free(rd->description);
    free(rd->created_utc);
    free(rd->program);
    free(rd->hdf5_version);
    free_strs(rd->sublayer_names, rd->n_sublayer_names);
    free_strs(rd->layer_params, rd->n_layer_params);
    free_strs(rd->model_params, rd->n_model_params);
    free_strs(rd->meta, rd->n_meta_strings);
    free(rd->callsites);
    intern_free(&rd->pool);
    free(rd->path);
    free(rd);
}

resdiag_status resdiag_reader_open(resdiag_reader **out, const char *path)
{
    if (!out)
        return rfail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: out is NULL");
    *out = NULL;
    if (!path)
        return rfail(RESDIAG_E_NULL, "client bug: resdiag_reader_open: path is NULL");
    long long file_size = 0;
    resdiag_status st = check_signature(path, &file_size);
    if (st != RESDIAG_OK)
        return st;
    /* damage that would crash HDF5 instead of failing in it */
    char gerr[256];
    st = rd_h5_guard_file(path, gerr, sizeof gerr);
    if (st != RESDIAG_OK)
        return rfail(st, "%s run file %s: %s", st == RESDIAG_E_IO ? "cannot read" : "damaged",
                     path, gerr);

    resdiag_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    rd->file = rd->steps_ds = rd->time_ds = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_TABLES; i++)
        rd->table_ds[i] = rd->callsite_ds[i] = H5I_INVALID_HID;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        rd->summary_ds[i] = H5I_INVALID_HID;
    rd->file_size = file_size;
    rd->path = strdup(path);
    if (!rd->path) {
        free(rd);
        return rfail(RESDIAG_E_NOMEM, "run file %s: out of memory", path);
    }

    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        st = h5fail(path, "opening");
        goto fail;
    }
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 1, 1);
#endif
    /* The plain POSIX driver, whatever HDF5_DRIVER in the environment says. */
    if (H5Pset_fapl_sec2(fapl) < 0) {
        H5Pclose(fapl);
        st = h5fail(path, "opening");
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
            st = rfail(why, "%s %s: %s (opened for SWMR reading: %s)", what, path, e2.msg,
                       e1.msg);
        else
            st = rfail(why, "%s %s: %s", what, path, e2.msg);
        goto fail;
    }

    if ((st = check_links_in(rd, rd->file, "", 0)) != RESDIAG_OK
        || (st = read_root(rd)) != RESDIAG_OK || (st = read_meta(rd)) != RESDIAG_OK)
        goto fail;
    rd_layout_init(&rd->lay, rd->info.n_layers, rd->info.n_sublayers, rd->info.n_layer_params,
                   rd->info.n_model_params, rd->info.sketch_size);
    if ((st = open_datasets(rd)) != RESDIAG_OK || (st = read_chunk_shapes(rd)) != RESDIAG_OK
        || (st = count_steps(rd)) != RESDIAG_OK || (st = read_callsites(rd)) != RESDIAG_OK)
        goto fail;

    resdiag_run_info *in = &rd->info;
    in->resdiag_version = rd->resdiag_version;
    in->sublayer_names = (const char *const *)rd->sublayer_names;
    in->layer_param_names = (const char *const *)rd->layer_params;
    in->model_param_names = (const char *const *)rd->model_params;
    in->n_meta = (int)(rd->n_meta_strings / 2);
    in->meta = (const char *const *)rd->meta;
    in->description = rd->description;
    in->created_utc = rd->created_utc;
    in->program = rd->program;
    in->hdf5_version = rd->hdf5_version;
    rd_h5_quiet_end(&q);
    *out = rd;
    return RESDIAG_OK;

fail:
    reader_free(rd);
    rd_h5_quiet_end(&q);
    return st;
}

void resdiag_reader_close(resdiag_reader *rd)
{
    if (!rd)
        return;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    reader_free(rd);
    rd_h5_quiet_end(&q);
}

const resdiag_run_info *resdiag_reader_info(const resdiag_reader *rd)
{
    return rd ? &rd->info : NULL;
}

resdiag_status resdiag_reader_refresh(resdiag_reader *rd)
{
    if (!rd)
        return rfail(RESDIAG_E_NULL, "client bug: resdiag_reader_refresh: reader is NULL");
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    resdiag_status st = RESDIAG_OK;
    if (rd->swmr) {
        for (int i = 0; i < rd->n_series; i++)
            if (H5Drefresh(rd->series[i].ds) < 0) {
                st = h5fail(rd->path, rd->series[i].name);
                goto done;
            }
        for (int i = 0; i < RD_N_TABLES; i++)
            if (rd->callsite_ds[i] >= 0 && H5Drefresh(rd->callsite_ds[i]) < 0) {
                st = h5fail(rd->path, rd->lay.tables[i].callsite_name);
                goto done;
            }
    }
    if ((st = count_steps(rd)) == RESDIAG_OK)
        st = read_callsites(rd);
done:
    rd_h5_quiet_end(&q);
    return st;
}

/* --------------------------------------------------------------- access */

static resdiag_status check_step(const resdiag_reader *rd, int64_t step_index, const char *fn)
{
    if (step_index < 0 || step_index >= rd->info.n_steps)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no step index %lld (it holds %lld)",
                     fn, rd->path, (long long)step_index, (long long)rd->info.n_steps);
    return RESDIAG_OK;
}

/* Checks direction, site, layer and sublayer; block sites need the latter two. */
static resdiag_status check_site(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                 int sublayer, resdiag_site site, const char *fn)
{
    if (dir != RESDIAG_FORWARD && dir != RESDIAG_BACKWARD)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: direction %d is not forward or backward",
                     fn, (int)dir);
    if (rd_model_site_index(site) >= 0)
        return RESDIAG_OK;
    if ((int)site < 0 || (int)site >= RESDIAG_N_BLOCK_SITES)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: site %d is not a site", fn, (int)site);
    if (layer < 0 || layer >= rd->info.n_layers)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: layer %d is outside 0..%d", fn, layer,
                     rd->info.n_layers - 1);
    if (sublayer < 0 || sublayer >= rd->info.n_sublayers)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: sublayer %d is outside 0..%d", fn,
                     sublayer, rd->info.n_sublayers - 1);
    return RESDIAG_OK;
}

/* Reads elements [first, first + n) of slot `slot` of a table, for steps
 * [step, step + n_steps) with n_steps > 1 only when n == 1; out (n_steps * n). */
static resdiag_status read_slot(const resdiag_reader *rd, int table, size_t slot,
                                int64_t step, hsize_t n_steps, hsize_t first, hsize_t n,
                                double *out)
{
    const rd_table *t = &rd->lay.tables[table];
    hsize_t start[RD_MAX_RANK + 1], count[RD_MAX_RANK + 1];
    start[0] = (hsize_t)step;
    count[0] = n_steps;
    size_t rest = slot;
    for (int i = t->rank - 2; i >= 0; i--) {
        start[i + 1] = rest % (size_t)t->dims[i];
        count[i + 1] = 1;
        rest /= (size_t)t->dims[i];
    }
    start[t->rank] = first;
    count[t->rank] = n;
    hsize_t mn = n_steps * n;
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    if ((fs = H5Dget_space(rd->table_ds[table])) < 0
        || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0
        || (ms = H5Screate_simple(1, &mn, NULL)) < 0
        || H5Dread(rd->table_ds[table], H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, out) < 0)
        st = h5fail(rd->path, t->name);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    rd_h5_quiet_end(&q);
    return st;
}

static resdiag_status table_present(const resdiag_reader *rd, int table, const char *fn)
{
    if (rd->table_ds[table] < 0)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no %s (%s)", fn, rd->path,
                     rd->lay.tables[table].name,
                     rd->lay.tables[table].kind == RD_KIND_SKETCH  ? "sketch size 0"
                     : rd->lay.tables[table].kind == RD_KIND_CALLS ? "written by a resdiag "
                                                                     "that did not count calls"
                                                                   : "no such parameters");
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_steps(const resdiag_reader *rd, int64_t *out, int64_t n)
{
    if (!rd || (!out && n > 0))
        return rfail(RESDIAG_E_NULL, "client bug: resdiag_reader_steps: NULL argument");
    if (n < 0)
        return rfail(RESDIAG_E_INVALID, "client bug: resdiag_reader_steps: n = %lld",
                     (long long)n);
    if (n > rd->info.n_steps)
        return rfail(RESDIAG_E_NOT_FOUND, "resdiag_reader_steps: run file %s holds %lld steps, "
                     "not %lld", rd->path, (long long)rd->info.n_steps, (long long)n);
    if (n == 0)
        return RESDIAG_OK;
    hsize_t start = 0, cnt = (hsize_t)n;
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    if ((fs = H5Dget_space(rd->steps_ds)) < 0
        || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL) < 0
        || (ms = H5Screate_simple(1, &cnt, NULL)) < 0
        || H5Dread(rd->steps_ds, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, out) < 0)
        st = h5fail(rd->path, RD_STEPS_NAME);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    rd_h5_quiet_end(&q);
    return st;
}

static void fill_nan(double *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = NAN;
}

resdiag_status resdiag_reader_site(const resdiag_reader *rd, int64_t step_index,
                                   resdiag_direction dir, int layer, int sublayer,
                                   resdiag_site site, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_site";
    if (observed)
        *observed = 0;
    if (!rd || !out)
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    int table;
    size_t slot;
    rd_layout_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    if ((st = read_slot(rd, table, slot, step_index, 1, 0, RESDIAG_N_FIELDS, out))
        != RESDIAG_OK) {
        fill_nan(out, RESDIAG_N_FIELDS);
        return st;
    }
    if (observed)
        *observed = !isnan(out[RESDIAG_FIELD_ROWS]);
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_sketch(const resdiag_reader *rd, int64_t step_index,
                                     resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, double *out)
{
    static const char fn[] = "resdiag_reader_sketch";
    if (!rd || !out)
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    int table;
    size_t slot;
    rd_layout_site_slot(&rd->lay, dir, layer, sublayer, site, 1, &table, &slot);
    if ((st = table_present(rd, table, fn)) != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    return read_slot(rd, table, slot, step_index, 1, 0, (hsize_t)rd->info.sketch_size, out);
}

resdiag_status resdiag_reader_param(const resdiag_reader *rd, int64_t step_index, int layer,
                                    const char *name, double *out, int *observed)
{
    static const char fn[] = "resdiag_reader_param";
    if (observed)
        *observed = 0;
    if (!rd || !name || !out)
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    int table;
    size_t slot = 0;
    char **names;
    size_t n;
    if (layer == RESDIAG_MODEL_LEVEL) {
        table = RD_T_MODEL_PARAM;
        names = rd->model_params;
        n = rd->n_model_params;
    } else if (layer >= 0 && layer < rd->info.n_layers) {
        table = RD_T_LAYER_PARAM;
        names = rd->layer_params;
        n = rd->n_layer_params;
    } else {
        return rfail(RESDIAG_E_RANGE, "client bug: %s: layer %d is outside 0..%d (or -1 for "
                     "the model level)", fn, layer, rd->info.n_layers - 1);
    }
    size_t p = 0;
    while (p < n && strcmp(names[p], name) != 0)
        p++;
    if (p == n)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no %s parameter \"%s\"", fn,
                     rd->path, layer == RESDIAG_MODEL_LEVEL ? "model-level" : "per-layer", name);
    slot = layer == RESDIAG_MODEL_LEVEL ? p : (size_t)layer * n + p;
    resdiag_status st;
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if ((st = read_slot(rd, table, slot, step_index, 1, 0, RESDIAG_N_FIELDS, out))
        != RESDIAG_OK) {
        fill_nan(out, RESDIAG_N_FIELDS);
        return st;
    }
    if (observed)
        *observed = !isnan(out[RESDIAG_FIELD_ROWS]);
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_update(const resdiag_reader *rd, int64_t step_index, int layer,
                                     int sublayer, double *out)
{
    static const char fn[] = "resdiag_reader_update";
    if (!rd || !out)
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    resdiag_status st;
    if ((st = check_site(rd, RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, fn))
        != RESDIAG_OK
        || (st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    size_t slot = (size_t)layer * (size_t)rd->info.n_sublayers + (size_t)sublayer;
    return read_slot(rd, RD_T_UPDATE, slot, step_index, 1, 0, RESDIAG_N_UPDATE_FIELDS, out);
}

resdiag_status resdiag_reader_alias(const resdiag_reader *rd, int64_t step_index,
                                    resdiag_direction dir, int layer, int sublayer,
                                    resdiag_site site, int *same_as)
{
    static const char fn[] = "resdiag_reader_alias";
    if (same_as)
        *same_as = -1;
    if (!rd || !same_as)
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    if (rd_model_site_index(site) >= 0)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: %s is a model site; aliases are "
                     "between the block sites of one sublayer", fn, resdiag_site_name(site));
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    int table = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    if (rd->table_ds[table] < 0)
        return RESDIAG_OK; /* a file from before aliases: none declared */
    size_t slot = (size_t)layer * (size_t)rd->info.n_sublayers + (size_t)sublayer;
    double v;
    if ((st = read_slot(rd, table, slot, step_index, 1, (hsize_t)site, 1, &v)) != RESDIAG_OK)
        return st;
    if (isnan(v))
        return RESDIAG_OK;
    if (!(v >= 0 && v < RESDIAG_N_BLOCK_SITES) || v != floor(v) || (int)v == (int)site)
        return rfail(RESDIAG_E_FORMAT, "run file %s: /%s holds %g at step index %lld, layer %d, "
                     "sublayer %d, site %s: not the index of another block site", rd->path,
                     rd->lay.tables[table].name, v, (long long)step_index, layer, sublayer,
                     resdiag_site_name(site));
    *same_as = (int)v;
    return RESDIAG_OK;
}

const char *resdiag_reader_callsite(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                    int sublayer, resdiag_site site)
{
    static const char fn[] = "resdiag_reader_callsite";
    if (!rd) {
        rfail(RESDIAG_E_NULL, "client bug: %s: reader is NULL", fn);
        return "";
    }
    if (check_site(rd, dir, layer, sublayer, site, fn) != RESDIAG_OK)
        return "";
    int table;
    size_t slot;
    rd_layout_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return rd->callsites[rd->lay.tables[table].slot_offset + slot];
}

resdiag_status resdiag_reader_series(const resdiag_reader *rd, resdiag_direction dir, int layer,
                                     int sublayer, resdiag_site site, resdiag_field field,
                                     double *out, int64_t n)
{
    static const char fn[] = "resdiag_reader_series";
    if (!rd || (!out && n > 0))
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    resdiag_status st;
    if ((st = check_site(rd, dir, layer, sublayer, site, fn)) != RESDIAG_OK)
        return st;
    if ((int)field < 0 || (int)field >= RESDIAG_N_FIELDS)
        return rfail(RESDIAG_E_RANGE, "client bug: %s: field %d is outside 0..%d", fn,
                     (int)field, RESDIAG_N_FIELDS - 1);
    if (n < 0)
        return rfail(RESDIAG_E_INVALID, "client bug: %s: n = %lld", fn, (long long)n);
    if (n > rd->info.n_steps)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps, not %lld", fn,
                     rd->path, (long long)rd->info.n_steps, (long long)n);
    if (n == 0)
        return RESDIAG_OK;
    int table;
    size_t slot;
    rd_layout_site_slot(&rd->lay, dir, layer, sublayer, site, 0, &table, &slot);
    return read_slot(rd, table, slot, 0, (hsize_t)n, (hsize_t)field, 1, out);
}

/* ------------------------------------------------------ generic datasets */

static const series *find_series(const resdiag_reader *rd, const char *name)
{
    if (name[0] == '/')
        name++;
    for (int i = 0; i < rd->n_series; i++)
        if (strcmp(rd->series[i].name, name) == 0)
            return &rd->series[i];
    return NULL;
}

int resdiag_reader_n_datasets(const resdiag_reader *rd)
{
    return rd ? rd->n_series : 0;
}

const char *resdiag_reader_dataset_name(const resdiag_reader *rd, int i)
{
    if (!rd || i < 0 || i >= rd->n_series)
        return NULL;
    return rd->series[i].name;
}

resdiag_status resdiag_reader_dims(const resdiag_reader *rd, const char *name, int64_t *dims,
                                   int max_rank, int *rank)
{
    static const char fn[] = "resdiag_reader_dims";
    if (!rd || !name || !rank || (!dims && max_rank > 0))
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    const series *s = find_series(rd, name);
    if (!s)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn, rd->path,
                     name);
    *rank = s->rank + 1;
    if (max_rank < s->rank + 1)
        return rfail(RESDIAG_E_INVALID, "client bug: %s: /%s has %d axes, max_rank is %d", fn,
                     s->name, s->rank + 1, max_rank);
    dims[0] = rd->info.n_steps;
    for (int i = 0; i < s->rank; i++)
        dims[i + 1] = (int64_t)s->dims[i];
    return RESDIAG_OK;
}

resdiag_status resdiag_reader_read(const resdiag_reader *rd, const char *name, int64_t first,
                                   int64_t count, double *out, size_t out_len)
{
    static const char fn[] = "resdiag_reader_read";
    if (!rd || !name || (!out && count > 0))
        return rfail(RESDIAG_E_NULL, "client bug: %s: NULL argument", fn);
    const series *s = find_series(rd, name);
    if (!s)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn, rd->path,
                     name);
    if (first < 0 || count < 0)
        return rfail(RESDIAG_E_INVALID, "client bug: %s: first = %lld, count = %lld", fn,
                     (long long)first, (long long)count);
    /* (first + count may not fit in an int64_t: it is never computed) */
    if (first > rd->info.n_steps || count > rd->info.n_steps - first)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s holds %lld steps; asked for %lld "
                     "from index %lld", fn, rd->path, (long long)rd->info.n_steps,
                     (long long)count, (long long)first);
    size_t per = 1;
    for (int i = 0; i < s->rank; i++)
        per *= (size_t)s->dims[i];
    if ((size_t)count > out_len / per)
        return rfail(RESDIAG_E_INVALID, "client bug: %s: %lld steps of /%s need %zu doubles, "
                     "out_len is %zu", fn, (long long)count, s->name, (size_t)count * per,
                     out_len);
    if (count == 0)
        return RESDIAG_OK;
    hsize_t start[RD_MAX_RANK + 1] = { 0 }, cnt[RD_MAX_RANK + 1];
    start[0] = (hsize_t)first;
    cnt[0] = (hsize_t)count;
    for (int i = 0; i < s->rank; i++)
        cnt[i + 1] = s->dims[i];
    hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    /* A memory space of the selection's own shape: HDF5 then copies whole
     * blocks instead of iterating element by element. */
    if ((fs = H5Dget_space(s->ds)) < 0
        || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL) < 0
        || (ms = H5Screate_simple(s->rank + 1, cnt, NULL)) < 0
        || H5Dread(s->ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, out) < 0)
        st = h5fail(rd->path, s->name);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    rd_h5_quiet_end(&q);
    return st;
}

/* ------------------------------------------------------ stored chunks */

resdiag_status rd_reader_chunks(const resdiag_reader *rd, const char *name, int64_t *n_chunks)
{
    static const char fn[] = "rd_reader_chunks";
    *n_chunks = -1;
    const series *s = find_series(rd, name);
    if (!s)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn, rd->path,
                     name);
    if (s->chunk[0] == 0)
        return RESDIAG_OK;
    hsize_t n = 0;
    resdiag_status st = RESDIAG_OK;
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    hid_t sp = H5Dget_space(s->ds); /* (HDF5 1.10 counts every chunk whatever it selects) */
    if (sp < 0 || H5Dget_num_chunks(s->ds, sp, &n) < 0)
        st = h5fail(rd->path, s->name);
    else
        *n_chunks = n > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)n;
    if (sp >= 0)
        H5Sclose(sp);
    rd_h5_quiet_end(&q);
    return st;
}

resdiag_status rd_reader_stored(const resdiag_reader *rd, const char *name, int64_t step_index,
                                int *n_stored, int64_t *row_end)
{
    static const char fn[] = "rd_reader_stored";
    *n_stored = 1;
    *row_end = step_index + 1;
    const series *s = find_series(rd, name);
    if (!s)
        return rfail(RESDIAG_E_NOT_FOUND, "%s: run file %s has no dataset \"%s\"", fn, rd->path,
                     name);
    resdiag_status st;
    if ((st = check_step(rd, step_index, fn)) != RESDIAG_OK)
        return st;
    if (s->chunk[0] == 0) {
        *row_end = rd->info.n_steps; /* contiguous: all there, or nothing */
        return RESDIAG_OK;
    }
    hsize_t cs = s->chunk[0], row = (hsize_t)step_index / cs * cs;
    *row_end = row + cs < (hsize_t)rd->info.n_steps ? (int64_t)(row + cs) : rd->info.n_steps;
    /* every chunk of that row of chunks (at most MAX_CHUNKS_PER_STEP), the
     * last axis fastest */
    hsize_t off[RD_MAX_RANK + 1] = { row };
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    *n_stored = 0;
    for (;;) {
        hsize_t bytes = 0;
        /* (an error counts as stored: the read will say what it is) */
        if (H5Dget_chunk_storage_size(s->ds, off, &bytes) < 0 || bytes > 0)
            ++*n_stored;
        int k = s->rank;
        while (k > 0 && (off[k] += s->chunk[k]) >= s->dims[k - 1])
            off[k--] = 0;
        if (k == 0)
            break;
    }
    rd_h5_quiet_end(&q);
    return RESDIAG_OK;
}

void rd_stored_init(const resdiag_reader *rd, rd_stored_cursor *c, const char *name)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->stored = 1;
    c->left = -1;
    c->present = find_series(rd, name) != NULL;
    if (c->present && rd_reader_chunks(rd, name, &c->left) != RESDIAG_OK)
        c->left = -1; /* cannot tell: every step counts as stored (and its read fails) */
}

int rd_stored_at(const resdiag_reader *rd, rd_stored_cursor *c, int64_t si, int64_t *next)
{
    *next = INT64_MAX; /* absent, or every stored chunk met: NaN to the end */
    if (!c->present)
        return 0;
    if (c->left < 0)
        return 1;
    if (si >= c->row_end) {
        /* (only past the row looked up last: the chunks met may be in it) */
        if (c->left == 0)
            return 0;
        int n_stored = 1;
        if (rd_reader_stored(rd, c->name, si, &n_stored, &c->row_end) != RESDIAG_OK) {
            c->left = -1;
            return 1;
        }
        c->stored = n_stored > 0;
        c->left = c->left > n_stored ? c->left - n_stored : 0;
    }
    if (c->stored)
        return 1;
    *next = c->row_end;
    return 0;
}
