/*
 * file_fd.c - HDF5's own descriptor of a file that the library opened
 * (file_fd.h). HDF5 opens files without O_CLOEXEC and has no setting for
 * it, so a system(), popen() or posix_spawn() by the trainer, or by a
 * program reading runs, would hand the child the run file (a writer's
 * descriptor is writable). Every HDF5 open and create in lib/h5 sets
 * FD_CLOEXEC at once; a fork + exec by another thread between HDF5's
 * open() and that fcntl() is the one window left (doc/USING.md).
 */
#include "h5/file_fd.h"

#include <fcntl.h>

int rd_h5_file_fd(hid_t file)
{
    hid_t fapl = H5Fget_access_plist(file);
    int fd = -1;
    if (fapl < 0)
        return -1;
    void *h = NULL;
    if (H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle(file, fapl, &h) >= 0 && h)
        fd = *(int *)h;
    H5Pclose(fapl);
    return fd;
}

int rd_h5_file_cloexec(hid_t file)
{
    int fd = rd_h5_file_fd(file);
    if (fd < 0)
        return -1;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || (!(flags & FD_CLOEXEC) && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0))
        return -1;
    return fd;
}
