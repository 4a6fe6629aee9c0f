/*
 * sized_struct.h - the one rule for the public structs that carry their
 * own size (resdiag_model, resdiag_options, resdiag_analyze_options,
 * resdiag_check_options): the caller's struct_size says how much of the
 * struct its header knew, so an older caller's struct is read up to there
 * and the newer fields keep the defaults.
 */
#ifndef RESDIAG_SIZED_STRUCT_H
#define RESDIAG_SIZED_STRUCT_H

#include <stddef.h>
#include <string.h>

/* Copies src (whose first member is its size_t struct_size) over dst,
 * which the caller has filled with the defaults, and sets dst's
 * struct_size to dst_size. min_size is the smallest size the library
 * accepts (sizeof(size_t), or more when a field without a default must be
 * there). Returns 0, or -1 when src_size is below min_size or above
 * dst_size: a struct not set up by its _init call. */
static inline int rd_copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size,
                                size_t min_size)
{
    if (min_size < sizeof(size_t))
        min_size = sizeof(size_t);
    if (src_size < min_size || src_size > dst_size)
        return -1;
    memcpy(dst, src, src_size);
    memcpy(dst, &dst_size, sizeof dst_size);
    return 0;
}

#endif
