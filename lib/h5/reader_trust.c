/*
 * reader_trust.c - what a run file from anyone must be before the reader
 * follows or reads any of it (doc/FORMAT.md, "Reading files from others"):
 * a regular file with the HDF5 signature; every link the reader could
 * walk a hard link; every dataset it reads keeping its data inside the
 * file (chunked or contiguous, no external storage, not virtual) without
 * filters but shuffle then deflate (any other could make HDF5 load a
 * plugin). Work and memory follow what the file holds: the call sites,
 * which the writer stores in full, must be there for every layer the file
 * declares, and a deflated dataset's chunks must fit what deflate can put
 * in its stored bytes (check_expansion: the whole dataset). Each chunk is
 * then inflated with its own bound, never through HDF5's filters
 * (chunk_decode.c, called from reader_values.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5/common.h"
#include "h5/reader_state.h"

#define MAX_GROUP_LINKS 1024 /* links in the root or a group: resdiag writes about 20 */

/* ----------------------------------------------------------------- links */

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

static herr_t link_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    link_ctx *c = data;
    char nb[128], where[256];
    snprintf(where, sizeof where, "%s/%s", c->group, rd_h5_msg_name(name, nb, sizeof nb));
    if (++c->count > MAX_GROUP_LINKS) {
        c->st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %s holds more than %d links",
                           c->rd->path, c->group[0] ? c->group : "the root group",
                           MAX_GROUP_LINKS);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
        const char *kind = info->type == H5L_TYPE_SOFT       ? "a soft link"
                           : info->type == H5L_TYPE_EXTERNAL ? "an external link (into another file)"
                                                             : "a user-defined link";
        c->st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: %s is %s; resdiag follows only hard "
                           "links to objects stored inside the file", c->rd->path, where, kind);
        return -1;
    }
    if (c->depth > 0)
        return 0;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        c->st = rd_h5_fail_call(c->rd->path, where);
        return -1;
    }
    if (oi.type != H5O_TYPE_GROUP)
        return 0;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0) {
        c->st = rd_h5_fail_call(c->rd->path, where);
        return -1;
    }
    c->st = rd_reader_check_links(c->rd, sub, where, c->depth + 1);
    H5Gclose(sub);
    return c->st == RESDIAG_OK ? 0 : -1;
}

resdiag_status rd_reader_check_links(resdiag_reader *rd, hid_t g, const char *group, int depth)
{
    link_ctx c = { rd, group, depth, 0, RESDIAG_OK };
    if (H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, link_cb, &c) < 0)
        return c.st != RESDIAG_OK ? c.st
                                  : rd_h5_fail_call(rd->path, group[0] ? group : "the root group");
    return RESDIAG_OK;
}

/* -------------------------------------------------------------- datasets */

/* The filters of a dataset: none, or exactly shuffle then deflate, the
 * pipeline resdiag writes (HDF5 would look for any other among the plugins
 * in HDF5_PLUGIN_PATH and run its code). *filtered says which. */
static resdiag_status check_filters(const resdiag_reader *rd, hid_t dcpl, int n_filters,
                                    const char *name, int *filtered)
{
    H5Z_filter_t ids[2] = { H5Z_FILTER_ERROR, H5Z_FILTER_ERROR };
    *filtered = n_filters > 0;
    for (int i = 0; i < n_filters; i++) {
        unsigned flags = 0;
        size_t n_cd = 0;
        /* no filter_config: that would look the filter up */
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n_cd, NULL, 0, NULL, NULL);
        if (id < 0)
            return rd_h5_fail_call(rd->path, name);
        if (id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_DEFLATE)
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is stored through HDF5 "
                              "filter %d; resdiag reads only shuffle (2) then deflate (1), and "
                              "loads no filter plugins", rd->path, name, (int)id);
        if (i < 2)
            ids[i] = id;
    }
    if (n_filters > 0
        && (n_filters != 2 || ids[0] != H5Z_FILTER_SHUFFLE || ids[1] != H5Z_FILTER_DEFLATE))
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is stored through %d HDF5 "
                          "filters starting with filter %d; resdiag reads only shuffle (2) then "
                          "deflate (1)", rd->path, name, n_filters, (int)ids[0]);
    return RESDIAG_OK;
}

/* Deflate turns at most 1032 bytes into one (each 258-byte match costs at
 * least 2 bits), and an HDF5 chunk is one stream, stored as it is when the
 * filter could not shrink it: so each stored chunk of s bytes holds at
 * most DEFLATE_MAX_RATIO * s bytes. */
#define DEFLATE_MAX_RATIO 1032

/* A filtered dataset's allocated chunks, each of chunk_bytes once
 * inflated, must fit in what its stored bytes can hold (above): a small
 * file that claims more would make HDF5 allocate, and the reader loop,
 * without bound (a /steps of a billion steps in a few kilobytes). */
static resdiag_status check_expansion(const resdiag_reader *rd, hid_t ds, hid_t dcpl,
                                      hsize_t stored, const char *name)
{
    hsize_t chunk[H5S_MAX_RANK], n_chunks = 0;
    int nd = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    size_t elem = t >= 0 ? H5Tget_size(t) : 0;
    herr_t r = sp >= 0 ? H5Dget_num_chunks(ds, sp, &n_chunks) : -1;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (nd < 1 || elem == 0 || r < 0)
        return rd_h5_fail_call(rd->path, name);
    double bytes = (double)elem; /* (doubles: no product can overflow) */
    for (int i = 0; i < nd; i++)
        bytes *= (double)chunk[i];
    if ((double)n_chunks * bytes > (double)DEFLATE_MAX_RATIO * (double)stored)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s claims %llu chunks of %.0f "
                          "bytes in %llu stored bytes, more than deflate can hold (%d:1)",
                          rd->path, name, (unsigned long long)n_chunks, bytes,
                          (unsigned long long)stored, DEFLATE_MAX_RATIO);
    return RESDIAG_OK;
}

/* The data of dataset ds must be stored inside the file, as resdiag
 * writes it: chunked (or contiguous), no external storage, not virtual (a
 * view of datasets in other files), no filters but shuffle then deflate
 * (check_filters), no more storage than the file has bytes and, when
 * filtered, no more chunks than that storage can hold (check_expansion).
 * Checked once, at open, before anything of the dataset is read;
 * *filtered says whether it is. */
resdiag_status rd_reader_check_storage(const resdiag_reader *rd, hid_t ds, const char *name,
                                       int *filtered)
{
    *filtered = 0;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0)
        return rd_h5_fail_call(rd->path, name);
    resdiag_status st = RESDIAG_OK;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int n_external = H5Pget_external_count(dcpl);
    int n_filters = H5Pget_nfilters(dcpl);
    const char *P = rd->path;
    if (layout < 0 || n_external < 0 || n_filters < 0) {
        st = rd_h5_fail_call(P, name);
    } else if (layout == H5D_VIRTUAL) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s is a virtual dataset (its data "
                        "is in other files); resdiag reads only data stored inside the file", P,
                        name);
    } else if (n_external > 0) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s uses external storage; resdiag "
                        "reads only data stored inside the file", P, name);
    } else if (layout != H5D_CHUNKED && layout != H5D_CONTIGUOUS) {
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s has a storage layout that "
                        "resdiag does not write (only chunked or contiguous)", P, name);
    } else {
        st = check_filters(rd, dcpl, n_filters, name, filtered);
    }
    if (st != RESDIAG_OK) {
        H5Pclose(dcpl);
        return st;
    }
    /* A chunk index or a contiguous address can claim any storage; past
     * the end of the file HDF5 reads zeros. */
    hsize_t bytes = H5Dget_storage_size(ds);
    if (bytes > (hsize_t)rd->file_size)
        st = rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s claims %llu bytes of "
                        "storage, more than the file's %lld", P, name, (unsigned long long)bytes,
                        rd->file_size);
    else if (*filtered)
        st = check_expansion(rd, ds, dcpl, bytes, name);
    H5Pclose(dcpl);
    if (st != RESDIAG_OK)
        return st;
    if (layout == H5D_CONTIGUOUS) {
        haddr_t at = H5Dget_offset(ds);
        if (at != HADDR_UNDEF && (at > (haddr_t)rd->file_size
                                  || bytes > (hsize_t)rd->file_size - (hsize_t)at))
            return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s lies past the end of the "
                              "file (%llu bytes at byte %llu, file of %lld bytes)", P, name,
                              (unsigned long long)bytes, (unsigned long long)at, rd->file_size);
    }
    return RESDIAG_OK;
}

/* The writer allocates every call-site dataset in full when it creates
 * the file (writer_datasets.c), so their storage is what shows that the layers,
 * sublayers and parameters the root attributes declare are really there:
 * a small file that declares a million layers would otherwise make every
 * reader, and the analysis, do work for each of them. */
resdiag_status rd_reader_check_callsites_stored(const resdiag_reader *rd, hid_t ds,
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
        return rd_h5_fail_call(rd->path, name);
    hsize_t want = (hsize_t)np * elem, have = H5Dget_storage_size(ds);
    if (have < want)
        return rd_h5_fail(RESDIAG_E_FORMAT, "run file %s: dataset /%s stores %llu of its %llu "
                          "bytes: the file does not hold the %d layers (x %d sublayers) it "
                          "declares",
                          rd->path, name, (unsigned long long)have, (unsigned long long)want,
                          rd->root.info.n_layers, rd->root.info.n_sublayers);
    return RESDIAG_OK;
}

/* ------------------------------------------------------------------ file */

/* Does the file exist, is it a regular file, does it carry the HDF5
 * signature at 0, 512, 1024, ...? Keeps text files away from HDF5. */
resdiag_status rd_reader_check_signature(const char *path, long long *size)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return rd_h5_fail(RESDIAG_E_FORMAT, "not a regular file: %s", path);
    *size = (long long)sb.st_size;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rd_h5_fail(RESDIAG_E_IO, "cannot open run file %s: %s", path, strerror(errno));
    int found = 0;
    for (off_t off = 0; off + RD_H5_SIGNATURE_LEN <= sb.st_size; off = off ? off * 2 : 512) {
        char sig[RD_H5_SIGNATURE_LEN];
        ssize_t r = pread(fd, sig, sizeof sig, off);
        if (r < 0) {
            int err = errno;
            close(fd);
            return rd_h5_fail(RESDIAG_E_IO, "cannot read run file %s: %s", path, strerror(err));
        }
        if (r == RD_H5_SIGNATURE_LEN && memcmp(sig, RD_H5_SIGNATURE, RD_H5_SIGNATURE_LEN) == 0) {
            found = 1;
            break;
        }
    }
    close(fd);
    if (!found)
        return rd_h5_fail(RESDIAG_E_FORMAT, "not an HDF5 file: %s", path);
    return RESDIAG_OK;
}
