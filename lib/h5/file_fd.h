/*
 * file_fd.h - HDF5's own descriptor of a file that the library opened:
 * finding it, and keeping it from programs that the process executes.
 */
#ifndef RESDIAG_H5_FILE_FD_H
#define RESDIAG_H5_FILE_FD_H

#include <hdf5.h>

/* HDF5's descriptor of the file, when it uses the default (sec2) driver;
 * else -1. */
int rd_h5_file_fd(hid_t file);

/* Sets close-on-exec on HDF5's descriptor of file, to be called right
 * after it is opened or created: the descriptor, or -1 when HDF5 gave none
 * (another driver) or fcntl failed. */
int rd_h5_file_cloexec(hid_t file);

#endif
