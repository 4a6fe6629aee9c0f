/*
 * one_row_ref.h - the benchmark's reference for the statistics kernel: a
 * plain one-row-at-a-time loop over f32 tensors, standing for the kernel
 * resdiag had before its 16-row blocks, so that the current kernel's speed
 * from DRAM can be compared with it in the same run (never used by the
 * library, never checked for exactness: timing only).
 */
#ifndef RESDIAG_BENCH_ONE_ROW_REF_H
#define RESDIAG_BENCH_ONE_ROW_REF_H

#include <stddef.h>
#include <stdint.h>

#include "stats/stats.h"

/* ISAs of the reference (the widths of the paths it stands beside) */
enum { REF_AVX2, REF_AVX512, REF_N_ISAS };

/* 1 if this CPU runs the ISA (AVX2 + FMA; AVX-512F). */
int ref_available(int isa);
/* The same statistics set as rd_stats_compute for a contiguous f32 tensor
 * of rows x cols with finite values (fields RESDIAG_N_FIELDS, the K = 16 or
 * K = 0 sketch, per-token norms), one row per pass: each row's sum, sum of
 * squares, largest |x| and sketch buckets in vector lanes of the ISA's
 * width, reduced at the row's end. Returns FROB. */
double ref_one_row(int isa, double *fields, double *sketch, double *row_norms, const float *x,
                   int64_t rows, int64_t cols, const rd_sketch_params *sp);

#endif
