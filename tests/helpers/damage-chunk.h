/*
 * damage-chunk.h - damages one deflated chunk of a run file in place, as a
 * bad disk or a torn copy would: HDF5 says where the chunk's stored bytes
 * lie (H5Dget_chunk_info_by_coord), and a few bytes in the middle of its
 * deflate stream are flipped there with plain file I/O. The file's
 * structure stays valid: it opens, and only decoding that chunk fails
 * (zlib finds the stream or its check damaged). Plain I/O needs no
 * HDF5 write access, so a reader may hold the file open (a refresh test).
 */
#ifndef RD_DAMAGE_CHUNK_H
#define RD_DAMAGE_CHUNK_H

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

/* Flips bytes inside the chunk of dataset `name` (a deflated time series,
 * one step a chunk) that holds step index `step`, its first chunk across
 * the other axes. 0, or -1 when the chunk is not deflated or a call fails. */
static inline int dc_damage_chunk(const char *path, const char *name, hsize_t step)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = f >= 0 ? H5Dopen2(f, name, H5P_DEFAULT) : H5I_INVALID_HID;
    hid_t dcpl = ds >= 0 ? H5Dget_create_plist(ds) : H5I_INVALID_HID;
    hsize_t off[8] = { step }, size = 0;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask = 0;
    /* deflated: shuffle and deflate, neither skipped (filter mask bits 0, 1) */
    int found = dcpl >= 0 && H5Pget_nfilters(dcpl) == 2
                && H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size) >= 0
                && addr != HADDR_UNDEF && size >= 16 && (mask & 3u) == 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ds >= 0)
        H5Dclose(ds);
    if (f >= 0 && H5Fclose(f) < 0)
        found = 0;
    int fd = found ? open(path, O_RDWR) : -1;
    if (fd < 0)
        return -1;
    unsigned char buf[8];
    off_t at = (off_t)(addr + size / 2 - sizeof buf / 2);
    int rc = pread(fd, buf, sizeof buf, at) == (ssize_t)sizeof buf ? 0 : -1;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] ^= 0x5a;
    if (rc == 0 && pwrite(fd, buf, sizeof buf, at) != (ssize_t)sizeof buf)
        rc = -1;
    return close(fd) == 0 ? rc : -1;
}

#endif
