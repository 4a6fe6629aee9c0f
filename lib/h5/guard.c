/*
 * guard.c - the global heap collections of a file, walked before HDF5
 * reads it. Variable-length strings (the run's attributes, the callsites)
 * live in these collections ("GCOL"); HDF5 1.10.8 takes each object's size
 * from the file and copies that many bytes with only an assert to check it,
 * so one damaged size crashes the reader (a segfault in H5HG_read). Here
 * every object of every collection must end inside its collection.
 *
 * The layout (HDF5 file format spec, "Global Heap"): "GCOL", version 1,
 * 3 reserved bytes, collection size (8 bytes, the whole collection); then
 * objects: index (2), reference count (2), reserved (4), size (8), data
 * padded to a multiple of 8. Index 0 is free space, whose size includes
 * its header.
 * Files whose lengths are not 8 bytes wide are not walked (resdiag never
 * writes them).
 */
#include "h5/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK ((size_t)1 << 20)
#define GCOL_HEADER 16
#define OBJ_HEADER 16
#define GCOL_MIN 4096              /* HDF5 never makes a smaller collection */
#define GCOL_MAX ((uint64_t)1 << 32) /* larger than any resdiag writes */

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Walks the collection at off (its header already read into hdr). Returns
 * 0, or -1 with err filled. Collections not wholly in the file are left to
 * HDF5, which reports a read past the end as an error. */
static int walk_collection(int fd, long long off, long long file_size,
                           const unsigned char *hdr, char *err, size_t err_len)
{
    uint64_t size = le64(hdr + 8);
    if (hdr[4] != 1 || hdr[5] || hdr[6] || hdr[7] || size < GCOL_MIN || size > GCOL_MAX ||
        (long long)size > file_size - off)
        return 0; /* not a collection header (or not all here): HDF5 decides */
    unsigned char *c = malloc((size_t)size);
    if (!c)
        return 0; /* cannot check: leave it to HDF5 */
    int bad = 0;
    if (pread(fd, c, (size_t)size, (off_t)off) == (ssize_t)size) {
        uint64_t p = GCOL_HEADER;
        while (p + OBJ_HEADER <= size) {
            unsigned idx = (unsigned)c[p] | (unsigned)c[p + 1] << 8;
            uint64_t osize = le64(c + p + 8), room = size - p - OBJ_HEADER;
            /* Free space (index 0) counts its header in its size, and HDF5
             * steps over exactly that: 0 would never move on. */
            uint64_t need = idx == 0 ? osize : OBJ_HEADER + (osize + 7) / 8 * 8;
            if (idx == 0 ? osize < OBJ_HEADER || osize > room + OBJ_HEADER
                         : osize > room || (osize + 7) / 8 * 8 > room) {
                snprintf(err, err_len,
                         "global heap at byte %lld: object %u claims %llu bytes, %llu remain",
                         off, idx, (unsigned long long)osize, (unsigned long long)room);
                bad = 1;
                break;
            }
            p += need;
        }
    }
    free(c);
    return bad ? -1 : 0;
}

resdiag_status rd_h5_guard_file(const char *path, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "%s", strerror(errno));
        return RESDIAG_E_IO;
    }
    long long file_size = lseek(fd, 0, SEEK_END);
    unsigned char sb[16];
    /* Superblock at 0 (resdiag writes no user block): the width of lengths
     * is byte 14 in versions 0 and 1, byte 10 in versions 2 and 3. */
    if (file_size < 16 || pread(fd, sb, sizeof sb, 0) != (ssize_t)sizeof sb ||
        (sb[8] <= 1 ? sb[14] : sb[10]) != 8) {
        close(fd);
        return RESDIAG_OK;
    }
    long long end = file_size < RD_H5_GUARD_SCAN_MAX ? file_size : RD_H5_GUARD_SCAN_MAX;
    unsigned char *buf = malloc(BLOCK + 3);
    resdiag_status st = RESDIAG_OK;
    if (!buf) {
        close(fd);
        return RESDIAG_OK; /* cannot check: leave it to HDF5 */
    }
    /* Blocks overlap by 3 bytes so that a signature across a border is seen. */
    for (long long off = 0; off < end && st == RESDIAG_OK; off += BLOCK) {
        size_t want = (size_t)(end - off < (long long)BLOCK + 3 ? end - off : (long long)BLOCK + 3);
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0) {
            snprintf(err, err_len, "%s", strerror(errno));
            st = RESDIAG_E_IO;
            break;
        }
        for (size_t i = 0; i + 4 <= (size_t)got && i < BLOCK; i++) {
            unsigned char *hit = memchr(buf + i, 'G', (size_t)got - i);
            if (!hit)
                break;
            i = (size_t)(hit - buf);
            if (i + 4 > (size_t)got || i >= BLOCK)
                break;
            if (memcmp(hit, "GCOL", 4) != 0)
                continue;
            unsigned char hdr[GCOL_HEADER];
            long long at = off + (long long)i;
            if (pread(fd, hdr, sizeof hdr, (off_t)at) == (ssize_t)sizeof hdr &&
                walk_collection(fd, at, file_size, hdr, err, err_len) != 0) {
                st = RESDIAG_E_FORMAT;
                break;
            }
        }
    }
    free(buf);
    close(fd);
    return st;
}
