/*
 * dist.h - tinygpt's processes: one (tinygpt), or the ranks of an MPI job
 * training data parallel (tinygpt-mpi, built from the same sources with
 * -DTINYGPT_MPI when meson finds MPI: -Dmpi=auto|enabled|disabled).
 *
 * Data parallel: every rank holds the same weights (the same --seed) and
 * draws the same batches; rank r trains sequences [r*B/W, (r+1)*B/W) of
 * each batch of B, with its loss summed over its tokens and divided by the
 * batch's B*T tokens, so that the gradients summed over the ranks
 * (tg_dist_sum) are those of one process training the whole batch. Only
 * the trainer talks MPI: libresdiag is given the rank and the world size
 * (resdiag_model.rank, .world_size) and writes one file per rank.
 *
 * Without TINYGPT_MPI every function is that of a job of one rank.
 */
#ifndef TINYGPT_DIST_H
#define TINYGPT_DIST_H

#include <stddef.h>

#include "kernels.h"

typedef struct tg_dist {
    int rank;   /* 0 .. world-1 */
    int world;  /* ranks of the job, 1 without MPI */
} tg_dist;

/* MPI_Init and the rank and size of MPI_COMM_WORLD; 0 and 1 without MPI. */
void tg_dist_init(tg_dist *d, int *argc, char ***argv);
/* MPI_Finalize. */
void tg_dist_finalize(tg_dist *d);
/* x (n values) summed over the ranks, in place, on every rank. */
void tg_dist_sum(const tg_dist *d, real *x, size_t n);
/* One double summed over the ranks. */
double tg_dist_sum_double(const tg_dist *d, double x);
/* Returns when every rank has called it. */
void tg_dist_barrier(const tg_dist *d);

#endif /* TINYGPT_DIST_H */
