/*
 * ceiling.h - the machine's ceiling for reading a buffer: the plainest
 * vector loops over the same bytes a kernel reads (a read-only sum, a sum
 * of squares, and a sum of squares with software prefetch), in AVX-512 and
 * AVX2. resdiag-bench runs them interleaved with the kernels in the same
 * repetition and takes the fastest of one ISA's three as that ISA's
 * ceiling. bytes is rounded down to a multiple of 256; buf is 64-byte
 * aligned. Each returns its sum (to keep the loop alive).
 */
#ifndef RESDIAG_BENCH_CEILING_H
#define RESDIAG_BENCH_CEILING_H

#include <stddef.h>

enum { CEIL_SUM, CEIL_SUMSQ, CEIL_SUMSQ_PREFETCH, CEIL_N_LOOPS };
enum { CEIL_AVX2, CEIL_AVX512, CEIL_N_ISAS };

/* 1 if this CPU runs the ISA's loops (AVX2 + FMA; AVX-512F). */
int ceiling_available(int isa);
/* "avx2", "avx512" */
const char *ceiling_isa_name(int isa);
/* "sum", "sumsq", "sumsq+prefetch" */
const char *ceiling_loop_name(int loop);
double ceiling_run(int isa, int loop, const void *buf, size_t bytes);

#endif
