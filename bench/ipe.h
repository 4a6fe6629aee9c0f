/*
 * ipe.h - instructions per element of the statistics kernels, counted by
 * callgrind (a figure load cannot move): resdiag-bench runs itself under
 * valgrind --tool=callgrind with --ipe PATH DTYPE N and with 2N elements,
 * collecting inside rd_stats_compute_path only, and prints
 * (total(2N) - total(N)) / N, so that startup and per-call costs cancel.
 */
#ifndef RESDIAG_BENCH_IPE_H
#define RESDIAG_BENCH_IPE_H

/* The scenario run under callgrind: IPE_CALLS calls on N elements. */
int ipe_scenario(const char *path, const char *dtype, long elems, int cols);
/* One "ipe" line per vector path and dtype, or a "not measured" line. */
void ipe_print(int cols);

#endif
