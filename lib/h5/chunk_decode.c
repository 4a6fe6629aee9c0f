/*
 * chunk_decode.c - reads the steps of a filtered time series chunk by
 * chunk: the stored bytes (H5Dread_chunk), inflated with zlib into exactly
 * the chunk's logical size, unshuffled, converted from the file's type
 * (H5Tconvert: byte order, float32 -> double, any integer -> int64). HDF5's
 * own deflate filter would grow its buffer for as long as the stream goes
 * on; here a chunk that stores more than deflate can make of its logical
 * size (compressBound), or whose stream does not end exactly at that
 * size and at the chunk's last byte, is refused, so the work and memory of
 * a read follow the chunk's shape, which open checks is the writer's (one
 * step).
 *
 * One decoded step is kept (in the memory type last asked for): a step's
 * reads go site by site, and each of its chunks is then inflated once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "h5/chunk_decode.h"
#include "h5/common.h"
#include "format/tables.h"

#define FILTER_SHUFFLE_BIT 1u /* filter_mask bit i: filter i was skipped (check_filters' order) */
#define FILTER_DEFLATE_BIT 2u

struct rd_chunk_steps {
    hid_t ds, dcpl, ftype;
    const char *path, *name;
    int nd;                           /* axes, the step axis first */
    hsize_t dims[RD_MAX_RANK + 1];    /* extent of each axis but the first */
    hsize_t chunk[RD_MAX_RANK + 1];
    size_t fsize;                     /* bytes of a value in the file */
    size_t chunk_elems, step_elems;
    unsigned char *fill;              /* one value of the file type */
    unsigned char *step;              /* step_elems x max(file size, memory size) */
    size_t step_cap;
    hsize_t step_at;                  /* the step in `step`, as step_type */
    hid_t step_type;                  /* H5I_INVALID_HID: none kept */
};

static resdiag_status shape_fail(const rd_chunk_steps *c, const char *why)
{
    return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is filtered and %s; resdiag "
                      "reads a filtered dataset only in the writer's chunks (one step, each "
                      "other axis whole or one index of it): h5repack -f NONE makes it plain",
                      c->path, c->name, why);
}

/* The chunk shape must be the writer's; sizes and the fill value. */
static resdiag_status check_shape(rd_chunk_steps *c)
{
    hid_t sp = H5Dget_space(c->ds);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd < 1 || nd > RD_MAX_RANK + 1 || H5Sget_simple_extent_dims(sp, c->dims, NULL) < 0
        || H5Pget_layout(c->dcpl) != H5D_CHUNKED || H5Pget_chunk(c->dcpl, nd, c->chunk) != nd) {
        if (sp >= 0)
            H5Sclose(sp);
        return nd > RD_MAX_RANK + 1 ? shape_fail(c, "has too many axes")
                                    : rd_h5_fail_call(c->path, c->name);
    }
    H5Sclose(sp);
    c->nd = nd;
    if (c->chunk[0] != 1)
        return shape_fail(c, "its chunks hold more than one step");
    c->chunk_elems = c->step_elems = 1;
    for (int k = 1; k < nd; k++) {
        if (c->chunk[k] != 1 && c->chunk[k] != c->dims[k])
            return shape_fail(c, "its chunks cut an axis in pieces");
        c->chunk_elems *= (size_t)c->chunk[k];
        c->step_elems *= (size_t)c->dims[k];
    }
    return RESDIAG_OK;
}

resdiag_status rd_chunk_steps_open(rd_chunk_steps **out, hid_t ds, const char *path,
                                   const char *name)
{
    *out = NULL;
    rd_chunk_steps *c = calloc(1, sizeof *c);
    if (!c)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory opening /%s", path, name);
    c->ds = ds;
    c->path = path;
    c->name = name;
    c->step_type = H5I_INVALID_HID;
    c->dcpl = H5Dget_create_plist(ds);
    c->ftype = H5Dget_type(ds);
    resdiag_status st = RESDIAG_OK;
    if (c->dcpl < 0 || c->ftype < 0 || (c->fsize = H5Tget_size(c->ftype)) == 0)
        st = rd_h5_fail_call(path, name);
    else
        st = check_shape(c);
    H5D_fill_value_t fv = H5D_FILL_VALUE_UNDEFINED;
    if (st == RESDIAG_OK && !(c->fill = calloc(1, c->fsize)))
        st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory opening /%s", path, name);
    else if (st == RESDIAG_OK
             && (H5Pfill_value_defined(c->dcpl, &fv) < 0
                 || (fv != H5D_FILL_VALUE_UNDEFINED
                     && H5Pget_fill_value(c->dcpl, c->ftype, c->fill) < 0)))
        st = rd_h5_fail_call(path, name); /* (undefined: zeros, as HDF5 gives) */
    if (st != RESDIAG_OK) {
        rd_chunk_steps_free(c);
        return st;
    }
    *out = c;
    return RESDIAG_OK;
}

void rd_chunk_steps_free(rd_chunk_steps *c)
{
    if (!c)
        return;
    if (c->dcpl >= 0)
        H5Pclose(c->dcpl);
    if (c->ftype >= 0)
        H5Tclose(c->ftype);
    free(c->fill);
    free(c->step);
    free(c);
}

int rd_chunk_steps_axes(const rd_chunk_steps *c)
{
    return c->nd;
}

void rd_chunk_steps_forget(rd_chunk_steps *c)
{
    if (c)
        c->step_type = H5I_INVALID_HID;
}

/* Copies the box count[] at soff[] of an array of dims sd[] into an array
 * of dims dd[] at doff[] (n axes, values of esz bytes). */
static void copy_box(int n, size_t esz, const unsigned char *src, const hsize_t *sd,
                     const hsize_t *soff, unsigned char *dst, const hsize_t *dd,
                     const hsize_t *doff, const hsize_t *count)
{
    hsize_t at[RD_MAX_RANK + 1] = { 0 };
    if (n == 0) { /* one value */
        memcpy(dst, src, esz);
        return;
    }
    for (int k = 0; k < n; k++)
        if (count[k] == 0)
            return;
    size_t run = (size_t)count[n - 1] * esz;
    for (;;) {
        size_t si = 0, di = 0;
        for (int k = 0; k < n; k++) {
            si = si * (size_t)sd[k] + (size_t)(soff[k] + (k < n - 1 ? at[k] : 0));
            di = di * (size_t)dd[k] + (size_t)(doff[k] + (k < n - 1 ? at[k] : 0));
        }
        memcpy(dst + di * esz, src + si * esz, run);
        int k = n - 2;
        while (k >= 0 && ++at[k] == count[k])
            at[k--] = 0;
        if (k < 0)
            return;
    }
}

/* Inflates the stored chunk raw (len bytes) into exactly want bytes at out. */
static resdiag_status inflate_exact(const rd_chunk_steps *c, hsize_t step,
                                    const unsigned char *raw, size_t len, unsigned char *out,
                                    size_t want)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory inflating /%s", c->path,
                          c->name);
    z.next_in = (Bytef *)(uintptr_t)raw;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)want;
    int rc = inflate(&z, Z_FINISH);
    unsigned char extra;
    if (rc != Z_STREAM_END && z.avail_out == 0 && z.avail_in > 0) {
        z.next_out = &extra; /* one byte more: the stream goes on, ends, or is damaged */
        z.avail_out = 1;
        rc = inflate(&z, Z_FINISH);
    }
    /* After the extra call: a stream of want + 1 bytes ends there too. */
    size_t got = (size_t)z.total_out;
    const char *msg = z.msg ? z.msg : "damaged data";
    size_t after = (size_t)z.avail_in; /* stored bytes the stream did not use */
    inflateEnd(&z);
    if (got > want)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "inflates to more than its %zu bytes", c->path, c->name,
                          (unsigned long long)step, want);
    if (rc == Z_STREAM_END && got == want && after == 0)
        return RESDIAG_OK;
    if (rc == Z_STREAM_END && got == want) /* HDF5 stores the stream alone */
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "has %zu bytes after the end of its deflate stream", c->path,
                          c->name, (unsigned long long)step, after);
    if (rc == Z_STREAM_END)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "inflates to %zu bytes, not %zu", c->path, c->name,
                          (unsigned long long)step, got, want);
    if (rc == Z_DATA_ERROR)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "is not a deflate stream (%s)", c->path, c->name,
                          (unsigned long long)step, msg);
    return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk's "
                      "deflate stream is cut short after %zu of %zu bytes", c->path, c->name,
                      (unsigned long long)step, got, want);
}

/* HDF5's shuffle: byte j of every value, then byte j + 1 ... Back to values. */
static void unshuffle(const unsigned char *in, size_t n, size_t esz, unsigned char *out)
{
    for (size_t j = 0; j < esz; j++)
        for (size_t i = 0; i < n; i++)
            out[i * esz + j] = in[j * n + i];
}

/* *size: the stored bytes of the chunk at off, 0 for one never written; 0
 * on failure. Not H5Dget_chunk_info_by_coord first: HDF5 1.10 finds the
 * chunk by walking every chunk of the dataset, which made reading each
 * step of a long run quadratic; H5Dget_chunk_storage_size is a lookup. It
 * fails for a chunk never written ("... not allocated" in 1.10), and only
 * then, for any other failure, the walk says which it was. */
static int chunk_size(const rd_chunk_steps *c, const hsize_t *off, hsize_t *size)
{
    if (H5Dget_chunk_storage_size(c->ds, off, size) >= 0)
        return 1;
    rd_h5_error e;
    memset(&e, 0, sizeof e);
    rd_h5_capture(&e, 0);
    *size = 0;
    if (strstr(e.msg, "not allocated"))
        return 1;
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    if (H5Dget_chunk_info_by_coord(c->ds, off, &mask, &addr, size) < 0)
        return 0;
    if (addr == HADDR_UNDEF)
        *size = 0;
    return 1;
}

/* The chunk at off (file type) into plain (chunk_elems values); scratch
 * holds compressBound(chunk bytes) + chunk bytes. */
static resdiag_status decode_chunk(const rd_chunk_steps *c, const hsize_t *off,
                                   unsigned char *plain, unsigned char *scratch)
{
    size_t bytes = c->chunk_elems * c->fsize, bound = (size_t)compressBound((uLong)bytes);
    hsize_t size = 0;
    if (!chunk_size(c, off, &size))
        return rd_h5_fail_call(c->path, c->name);
    if (size == 0) { /* never written: the fill value, as HDF5 gives */
        for (size_t i = 0; i < c->chunk_elems; i++)
            memcpy(plain + i * c->fsize, c->fill, c->fsize);
        return RESDIAG_OK;
    }
    if (size > bound)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "stores %llu bytes, more than deflate of its %zu bytes can take "
                          "(%zu)", c->path, c->name, (unsigned long long)off[0],
                          (unsigned long long)size, bytes, bound);
    uint32_t mask = 0;
    unsigned char *raw = scratch, *mid = scratch + bound;
    if (H5Dread_chunk(c->ds, H5P_DEFAULT, off, &mask, raw) < 0)
        return rd_h5_fail_call(c->path, c->name);
    int deflated = !(mask & FILTER_DEFLATE_BIT), shuffled = !(mask & FILTER_SHUFFLE_BIT);
    if (!deflated && size != bytes)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s, step %llu: its chunk "
                          "stores %llu bytes, not its %zu bytes", c->path, c->name,
                          (unsigned long long)off[0], (unsigned long long)size, bytes);
    unsigned char *in = raw;
    if (deflated) {
        resdiag_status st = inflate_exact(c, off[0], raw, (size_t)size, mid, bytes);
        if (st != RESDIAG_OK)
            return st;
        in = mid;
    }
    if (shuffled && c->fsize > 1)
        unshuffle(in, c->chunk_elems, c->fsize, plain);
    else
        memcpy(plain, in, bytes);
    return RESDIAG_OK;
}

/* Step `step` decoded and converted to mtype into c->step. */
static resdiag_status decode_step(rd_chunk_steps *c, hid_t mtype, hsize_t step)
{
    size_t msize = H5Tget_size(mtype);
    size_t esz = msize > c->fsize ? msize : c->fsize;
    size_t bytes = c->chunk_elems * c->fsize;
    size_t bound = (size_t)compressBound((uLong)bytes);
    c->step_type = H5I_INVALID_HID;
    if (c->step_cap < c->step_elems * esz) {
        free(c->step);
        c->step_cap = 0;
        if (!(c->step = malloc(c->step_elems * esz)))
            return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory reading /%s",
                              c->path, c->name);
        c->step_cap = c->step_elems * esz;
    }
    unsigned char *work = malloc(bound + 2 * bytes);
    if (!work)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory reading /%s", c->path,
                          c->name);
    unsigned char *plain = work + bound + bytes;
    hsize_t off[RD_MAX_RANK + 1] = { step }, zero[RD_MAX_RANK + 1] = { 0 };
    resdiag_status st = RESDIAG_OK;
    for (;;) { /* every chunk of the step, the last axis fastest */
        if ((st = decode_chunk(c, off, plain, work)) != RESDIAG_OK)
            break;
        copy_box(c->nd - 1, c->fsize, plain, c->chunk + 1, zero, c->step, c->dims + 1, off + 1,
                 c->chunk + 1);
        int k = c->nd - 1;
        while (k > 0 && (off[k] += c->chunk[k]) >= c->dims[k])
            off[k--] = 0;
        if (k == 0)
            break;
    }
    free(work);
    if (st != RESDIAG_OK)
        return st;
    if (H5Tconvert(c->ftype, mtype, c->step_elems, c->step, NULL, H5P_DEFAULT) < 0)
        return rd_h5_fail_call(c->path, c->name);
    c->step_at = step;
    c->step_type = mtype;
    return RESDIAG_OK;
}

resdiag_status rd_chunk_steps_read(rd_chunk_steps *c, hid_t mtype, hsize_t step,
                                   const hsize_t *start, const hsize_t *count, void *out)
{
    if (c->step_type != mtype || c->step_at != step) {
        resdiag_status st = decode_step(c, mtype, step);
        if (st != RESDIAG_OK)
            return st;
    }
    hsize_t zero[RD_MAX_RANK + 1] = { 0 };
    copy_box(c->nd - 1, H5Tget_size(mtype), c->step, c->dims + 1, start, out, count, zero,
             count);
    return RESDIAG_OK;
}
